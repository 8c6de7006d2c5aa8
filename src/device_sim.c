/*
 * device_sim.c - a simulated GPU: streams are host threads, device memory
 * is host memory.
 *
 * Why it exists: the engine's GPU scheduling (work queued on streams,
 * events between streams, copies on their own streams, blocks reused by
 * the caching allocator after their last user) is the part of the CUDA
 * backend that can be wrong in ways no single-threaded test shows.  With
 * the simulator it runs on any machine, under ThreadSanitizer and
 * AddressSanitizer, with random delays that widen every race window.
 * It is a test device, chosen only on request (device.c); nothing in it
 * pretends to be fast.
 *
 * The model follows CUDA's semantics, not its implementation:
 *  - a stream is a FIFO of items run one at a time by the stream's thread;
 *  - event_record makes a new "mark" and queues an item that completes it;
 *    the event points at its latest mark;
 *  - stream_wait_event captures the event's latest mark at the call (as
 *    cudaStreamWaitEvent captures the latest record: recording the event
 *    again later does not change what an earlier wait waits for) and
 *    queues an item that blocks the stream until that mark completes;
 *  - event_sync blocks the caller the same way; device_sync waits until
 *    every stream of the device has run everything queued;
 *  - a mark keeps the host's monotonic time at which its stream reached it,
 *    so the device time between two records of timing events is the
 *    difference of their marks' times (the profiler places GPU-side work on
 *    the host's timeline with it).
 * Asynchronous failures (ordo_device_sim_inject_error) travel like the CUDA
 * backend's error slot: the device keeps the first message, and the first
 * host wait on that device after it was raised reports it, once.
 */
#include "device.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_MAX_DEVICES 16

typedef struct sim_mark sim_mark;
typedef struct sim_stream sim_stream;

enum { IT_FN, IT_WAIT, IT_RECORD, IT_COPY, IT_FAIL, IT_STOP };

typedef struct item {
    struct item *next;
    int kind;
    void (*fn)(void *);
    void *arg;
    sim_mark *mark;
    void *dst;
    const void *src;
    size_t n;
    char *msg;
} item;

/* One record of an event.  Marks share one lock and condition variable:
 * this is a test device, simplicity beats speed. */
struct sim_mark {
    int done;
    int refs; /* the event's latest pointer, queued items, waiting hosts */
    uint64_t t_ns; /* CLOCK_MONOTONIC when the stream got there (once done) */
};

typedef struct sim_event {
    sim_mark *latest; /* NULL until recorded */
    int timing;       /* made by timer_create: event_elapsed_ns may read it */
    int dev;          /* the device it was made on */
} sim_event;

struct sim_stream {
    int dev;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* items arrived */
    pthread_cond_t idle_cv; /* queue drained */
    item *head, *tail;
    int busy;               /* an item is running */
    sim_stream *next;       /* the device's streams */
};

static struct {
    int ndev;
    unsigned delay_ns;
    size_t mem_limit;
    pthread_mutex_t mu; /* the streams list (a device sync holds it while it waits for the streams) */
    sim_stream *streams;
    pthread_mutex_t state_mu; /* memory accounting, errors: stream threads take it, never mu */
    size_t used[SIM_MAX_DEVICES];
    char *error[SIM_MAX_DEVICES]; /* first asynchronous failure not yet reported */
    pthread_mutex_t mark_mu;
    pthread_cond_t mark_cv;
} sim = {.mu = PTHREAD_MUTEX_INITIALIZER, .state_mu = PTHREAD_MUTEX_INITIALIZER, .mark_mu = PTHREAD_MUTEX_INITIALIZER, .mark_cv = PTHREAD_COND_INITIALIZER};

void ordo_device_sim_configure(unsigned delay_ns, size_t mem_limit) {
    pthread_mutex_lock(&sim.state_mu);
    sim.delay_ns = delay_ns;
    sim.mem_limit = mem_limit;
    pthread_mutex_unlock(&sim.state_mu);
}

static int bad_dev(int dev, char *err, size_t errlen) {
    if (dev >= 0 && dev < sim.ndev) return 0;
    snprintf(err, errlen, "gpu(%d) does not exist (%d simulated device%s)", dev, sim.ndev, sim.ndev == 1 ? "" : "s");
    return 1;
}

static uint64_t sim_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Busy work before an item: a random share of delay_ns, so streams drift
 * against each other and against the host. */
static void sim_delay(unsigned *seed) {
    unsigned d = __atomic_load_n(&sim.delay_ns, __ATOMIC_RELAXED);
    if (!d) return;
    *seed = *seed * 1103515245u + 12345u;
    uint64_t ns = (*seed >> 8) % d;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t.tv_nsec - t0.tv_nsec) < ns);
}

/* ---- streams ------------------------------------------------------------------ */

/* Both under mark_mu. */
static void mark_unref(sim_mark *m) {
    if (m && --m->refs == 0) free(m);
}
static void mark_wait(sim_mark *m) {
    while (!m->done) pthread_cond_wait(&sim.mark_cv, &sim.mark_mu);
}

/* Keeps msg as dev's asynchronous failure unless one is pending already. */
static void raise_error(int dev, char *msg) {
    pthread_mutex_lock(&sim.state_mu);
    if (!sim.error[dev]) sim.error[dev] = msg, msg = NULL;
    pthread_mutex_unlock(&sim.state_mu);
    free(msg);
}

/* After a host wait: reports dev's pending failure, once. */
static int take_error(int dev, char *err, size_t errlen) {
    pthread_mutex_lock(&sim.state_mu);
    char *msg = sim.error[dev];
    sim.error[dev] = NULL;
    pthread_mutex_unlock(&sim.state_mu);
    if (!msg) return 0;
    snprintf(err, errlen, "gpu(%d): %s", dev, msg);
    free(msg);
    return 1;
}

static void *stream_main(void *arg) {
    sim_stream *s = arg;
    unsigned seed = (unsigned)(uintptr_t)s;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head) pthread_cond_wait(&s->cv, &s->mu);
        item *it = s->head;
        s->head = it->next;
        if (!s->head) s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);

        if (it->kind == IT_STOP) {
            free(it);
            /* Idle on the way out: a device sync may be waiting for this
             * stream, holding the list its destroyer must take next. */
            pthread_mutex_lock(&s->mu);
            s->busy = 0;
            pthread_cond_broadcast(&s->idle_cv);
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        sim_delay(&seed);
        switch (it->kind) {
        case IT_FN: it->fn(it->arg); break;
        case IT_COPY: memmove(it->dst, it->src, it->n); break;
        case IT_WAIT:
            pthread_mutex_lock(&sim.mark_mu);
            mark_wait(it->mark);
            mark_unref(it->mark);
            pthread_mutex_unlock(&sim.mark_mu);
            break;
        case IT_FAIL:
            raise_error(s->dev, it->msg);
            it->msg = NULL;
            break;
        case IT_RECORD:
            pthread_mutex_lock(&sim.mark_mu);
            it->mark->t_ns = sim_now_ns();
            it->mark->done = 1;
            mark_unref(it->mark);
            pthread_cond_broadcast(&sim.mark_cv);
            pthread_mutex_unlock(&sim.mark_mu);
            break;
        }
        free(it->msg);
        free(it);

        pthread_mutex_lock(&s->mu);
        s->busy = 0;
        if (!s->head) pthread_cond_broadcast(&s->idle_cv);
        pthread_mutex_unlock(&s->mu);
    }
}

static int enqueue(sim_stream *s, item *it, char *err, size_t errlen) {
    if (!it) {
        snprintf(err, errlen, "gpu(%d): out of memory queuing work", s->dev);
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = it;
    else s->head = it;
    s->tail = it;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static item *new_item(int kind) {
    item *it = calloc(1, sizeof *it);
    if (it) it->kind = kind;
    return it;
}

static int sim_count(void) { return sim.ndev; }

/* The calling thread's current device, which CUDA keeps per host thread (0
 * until one is selected).  Every call the CUDA backend makes select its
 * device with cudaSetDevice (device_cuda.cu) selects it here too, and the
 * CUDA emulation's cudaGetDevice / cudaSetDevice are this: its kernel
 * launches fail on a stream of another device than the current one, as
 * CUDA's do ("invalid resource handle"). */
static _Thread_local int sim_current_dev;

int ordo_device_sim_current_device(void) { return sim_current_dev; }

int ordo_device_sim_set_current_device(int dev) {
    if (dev < 0 || dev >= sim.ndev) return 1;
    sim_current_dev = dev;
    return 0;
}

static void sim_use_device(int dev) { ordo_device_sim_set_current_device(dev); }

static int sim_stream_create(int dev, void **out, char *err, size_t errlen) {
    if (bad_dev(dev, err, errlen)) return 1;
    sim_current_dev = dev;
    sim_stream *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "gpu(%d): out of memory for a stream", dev);
        return 1;
    }
    s->dev = dev;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);
    if (pthread_create(&s->thread, NULL, stream_main, s)) {
        snprintf(err, errlen, "gpu(%d): cannot start a stream thread", dev);
        free(s);
        return 1;
    }
    pthread_mutex_lock(&sim.mu);
    s->next = sim.streams;
    sim.streams = s;
    pthread_mutex_unlock(&sim.mu);
    *out = s;
    return 0;
}

/* Like cudaStreamDestroy, queued work still runs before the stream goes. */
static void sim_stream_destroy(int dev, void *stream) {
    ordo_device_sim_set_current_device(dev);
    sim_stream *s = stream;
    char err[64];
    enqueue(s, new_item(IT_STOP), err, sizeof err);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&sim.mu);
    for (sim_stream **pp = &sim.streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&sim.mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->idle_cv);
    free(s);
}

/* ---- events ------------------------------------------------------------------- */

static int sim_event_create(int dev, void **out, char *err, size_t errlen) {
    if (bad_dev(dev, err, errlen)) return 1;
    sim_current_dev = dev;
    sim_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        snprintf(err, errlen, "gpu(%d): out of memory for an event", dev);
        return 1;
    }
    ev->dev = dev;
    *out = ev;
    return 0;
}

/* As CUDA's timing events: the same event, which the elapsed time may read. */
static int sim_timer_create(int dev, void **out, char *err, size_t errlen) {
    if (sim_event_create(dev, out, err, errlen)) return 1;
    ((sim_event *)*out)->timing = 1;
    return 0;
}

static void sim_event_destroy(int dev, void *e) {
    ordo_device_sim_set_current_device(dev);
    sim_event *ev = e;
    pthread_mutex_lock(&sim.mark_mu);
    mark_unref(ev->latest);
    pthread_mutex_unlock(&sim.mark_mu);
    free(ev);
}

static int sim_event_record(int dev, void *e, void *stream, char *err, size_t errlen) {
    sim_event *ev = e;
    const sim_stream *s = stream;
    if (s->dev != ev->dev) { /* CUDA: cudaEventRecord fails (invalid resource handle) */
        snprintf(err, errlen, "gpu(%d): cannot record an event: an event of gpu(%d) on a stream of gpu(%d)", dev,
                 ev->dev, s->dev);
        return 1;
    }
    item *it = new_item(IT_RECORD);
    sim_mark *m = calloc(1, sizeof *m);
    if (!it || !m) {
        free(it);
        free(m);
        snprintf(err, errlen, "gpu(%d): out of memory recording an event", dev);
        return 1;
    }
    m->refs = 2; /* the event's latest, the record item */
    it->mark = m;
    pthread_mutex_lock(&sim.mark_mu);
    mark_unref(ev->latest);
    ev->latest = m;
    pthread_mutex_unlock(&sim.mark_mu);
    return enqueue(stream, it, err, errlen);
}

/* The event's latest mark with a reference, or NULL if never recorded. */
static sim_mark *latest_mark(sim_event *ev) {
    pthread_mutex_lock(&sim.mark_mu);
    sim_mark *m = ev->latest;
    if (m) m->refs++;
    pthread_mutex_unlock(&sim.mark_mu);
    return m;
}

static int sim_stream_wait_event(int dev, void *stream, void *e, char *err, size_t errlen) {
    (void)dev;
    sim_mark *m = latest_mark(e);
    if (!m) return 0; /* never recorded: nothing to wait for (CUDA: likewise) */
    item *it = new_item(IT_WAIT);
    if (it) it->mark = m;
    else {
        pthread_mutex_lock(&sim.mark_mu);
        mark_unref(m);
        pthread_mutex_unlock(&sim.mark_mu);
    }
    return enqueue(stream, it, err, errlen);
}

void ordo_device_sim_event_wait_quiet(void *e) {
    sim_mark *m = latest_mark(e);
    if (!m) return;
    pthread_mutex_lock(&sim.mark_mu);
    mark_wait(m);
    mark_unref(m);
    pthread_mutex_unlock(&sim.mark_mu);
}

static int sim_event_sync(int dev, void *e, char *err, size_t errlen) {
    ordo_device_sim_event_wait_quiet(e);
    return take_error(dev, err, errlen);
}

static int sim_event_wait_quiet(int dev, void *e, char *err, size_t errlen) {
    (void)dev, (void)err, (void)errlen;
    ordo_device_sim_event_wait_quiet(e);
    return 0;
}

/* Waits like event_sync but leaves the device's pending failure alone
 * (device.h: a profile read must not report an op's error). */
static int sim_event_elapsed_ns(int dev, void *start, void *end, double *ns, char *err, size_t errlen) {
    sim_event *a = start, *b = end;
    if (bad_dev(dev, err, errlen)) return 1;
    if (!a->timing || !b->timing) {
        snprintf(err, errlen, "gpu(%d): elapsed time of an event not created for timing", dev);
        return 1;
    }
    if (a->dev != b->dev) { /* CUDA: cudaEventElapsedTime fails (invalid resource handle) */
        snprintf(err, errlen, "gpu(%d): elapsed time between events of gpu(%d) and gpu(%d)", dev, a->dev, b->dev);
        return 1;
    }
    sim_mark *ma = latest_mark(a), *mb = latest_mark(b);
    pthread_mutex_lock(&sim.mark_mu);
    int ok = ma && mb;
    if (ok) {
        mark_wait(ma);
        mark_wait(mb);
        *ns = mb->t_ns >= ma->t_ns ? (double)(mb->t_ns - ma->t_ns) : -(double)(ma->t_ns - mb->t_ns);
    }
    mark_unref(ma);
    mark_unref(mb);
    pthread_mutex_unlock(&sim.mark_mu);
    if (!ok) snprintf(err, errlen, "gpu(%d): elapsed time of an event never recorded", dev);
    return !ok;
}

static int sim_device_sync_quiet(int dev, char *err, size_t errlen) {
    if (bad_dev(dev, err, errlen)) return 1;
    sim_current_dev = dev;
    pthread_mutex_lock(&sim.mu);
    for (sim_stream *s = sim.streams; s; s = s->next) {
        if (s->dev != dev) continue;
        pthread_mutex_lock(&s->mu);
        while (s->head || s->busy) pthread_cond_wait(&s->idle_cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&sim.mu);
    return 0;
}

static int sim_device_sync(int dev, char *err, size_t errlen) {
    if (sim_device_sync_quiet(dev, err, errlen)) return 1;
    return take_error(dev, err, errlen);
}

static int sim_op_check(int dev, void *stream, char *err, size_t errlen) {
    (void)dev, (void)stream, (void)err, (void)errlen;
    return 0;
}

static int sim_host_fn(int dev, void *stream, void (*fn)(void *), void *arg, char *err, size_t errlen) {
    (void)dev;
    item *it = new_item(IT_FN);
    if (it) it->fn = fn, it->arg = arg;
    return enqueue(stream, it, err, errlen);
}

/* ---- memory ------------------------------------------------------------------- */

/* A header before each block keeps its size for the accounting; 64 bytes so
 * the block stays 64-byte aligned like device memory (256 on CUDA). */
#define SIM_HDR 64

static int sim_mem_alloc(int dev, size_t nbytes, void **ptr, char *err, size_t errlen) {
    if (bad_dev(dev, err, errlen)) return 2;
    sim_current_dev = dev;
    pthread_mutex_lock(&sim.state_mu);
    int full = sim.mem_limit && sim.used[dev] + nbytes > sim.mem_limit;
    if (!full) sim.used[dev] += nbytes;
    pthread_mutex_unlock(&sim.state_mu);
    void *p = NULL;
    if (!full && posix_memalign(&p, SIM_HDR, SIM_HDR + (nbytes ? nbytes : 1)) != 0) {
        pthread_mutex_lock(&sim.state_mu);
        sim.used[dev] -= nbytes;
        pthread_mutex_unlock(&sim.state_mu);
        full = 1;
    }
    if (full) {
        snprintf(err, errlen, "gpu(%d): out of memory (simulated device)", dev);
        return 1;
    }
    memcpy(p, &nbytes, sizeof nbytes);
    *ptr = (char *)p + SIM_HDR;
    return 0;
}

static void sim_mem_free(int dev, void *ptr) {
    ordo_device_sim_set_current_device(dev);
    if (!ptr) return;
    char *p = (char *)ptr - SIM_HDR;
    size_t nbytes;
    memcpy(&nbytes, p, sizeof nbytes);
    pthread_mutex_lock(&sim.state_mu);
    sim.used[dev] -= nbytes;
    pthread_mutex_unlock(&sim.state_mu);
    free(p);
}

static void sim_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
    ordo_device_sim_set_current_device(dev);
    pthread_mutex_lock(&sim.state_mu);
    size_t total = sim.mem_limit, used = dev >= 0 && dev < sim.ndev ? sim.used[dev] : 0;
    pthread_mutex_unlock(&sim.state_mu);
    *total_bytes = total;
    *free_bytes = total > used ? total - used : 0;
}

static int sim_host_alloc_pinned(size_t nbytes, void **ptr, char *err, size_t errlen) {
    if (posix_memalign(ptr, 64, nbytes ? nbytes : 1) != 0) {
        snprintf(err, errlen, "out of pinned host memory allocating %zu bytes", nbytes);
        return 1;
    }
    return 0;
}

static void sim_host_free_pinned(void *ptr) { free(ptr); }

static int sim_memcpy_async(int dev, void *dst, const void *src, size_t nbytes, int kind, void *stream,
                            char *err, size_t errlen) {
    (void)dev, (void)kind;
    if (nbytes == 0) return 0;
    item *it = new_item(IT_COPY);
    if (it) it->dst = dst, it->src = src, it->n = nbytes;
    return enqueue(stream, it, err, errlen);
}

/* ---- for tests ----------------------------------------------------------------- */

/* An asynchronous failure on stream (as a faulting kernel would raise):
 * from the stream's own thread (a kernel body) it is raised at once, from
 * any other thread it is queued to be raised when the stream gets there.
 * The first host wait on the device after that reports msg. */
int ordo_device_sim_inject_error(void *stream, const char *msg) {
    sim_stream *s = stream;
    char *copy = strdup(msg);
    if (!copy) return 1;
    if (pthread_equal(pthread_self(), s->thread)) {
        raise_error(s->dev, copy);
        return 0;
    }
    char err[64];
    item *it = new_item(IT_FAIL);
    if (it) it->msg = copy;
    else free(copy);
    return enqueue(stream, it, err, sizeof err);
}

/* The device a simulated stream belongs to (the CUDA emulation reads that
 * device's error slot after a grid). */
int ordo_device_sim_stream_device(void *stream) { return ((sim_stream *)stream)->dev; }

static const device_backend sim_backend = {
    "simulated",
    sim_count,
    sim_use_device,
    sim_stream_create,
    sim_stream_destroy,
    sim_event_create,
    sim_event_destroy,
    sim_event_record,
    sim_stream_wait_event,
    sim_event_sync,
    sim_event_wait_quiet,
    sim_device_sync,
    sim_device_sync_quiet,
    sim_op_check,
    sim_host_fn,
    sim_mem_alloc,
    sim_mem_free,
    sim_mem_info,
    sim_host_alloc_pinned,
    sim_host_free_pinned,
    sim_memcpy_async,
    sim_timer_create,
    sim_event_elapsed_ns,
};

/* ORDO_SIMULATED_GPUS (how many; 0 or unset: none), ORDO_SIMULATED_GPU_MEM_MB
 * (each device's memory; 0 or unset: no limit) and
 * ORDO_SIMULATED_GPU_DELAY_NS (the random delay per stream item), read and
 * checked in one place: device.c picks the backend by the first, engine
 * creation fails on a bad one (engine.c), and ordo_device_sim_backend
 * applies the other two.  0, or -1 with the message in err (when not NULL);
 * each variable read is set only when it was given and good. */
typedef struct {
    long ngpus, mem_mb, delay_ns;
    int has_mem, has_delay;
} sim_env;

static int sim_env_read(sim_env *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    int bad = config_env_long("ORDO_SIMULATED_GPUS", 0, SIM_MAX_DEVICES, " (0: none)", &s->ngpus, err, errlen) < 0;
    int r = config_env_long("ORDO_SIMULATED_GPU_MEM_MB", 0, 1L << 24, " (0: no limit)", &s->mem_mb,
                            bad ? NULL : err, errlen);
    s->has_mem = r > 0;
    bad |= r < 0;
    r = config_env_long("ORDO_SIMULATED_GPU_DELAY_NS", 0, 1000000000L, NULL, &s->delay_ns, bad ? NULL : err, errlen);
    s->has_delay = r > 0;
    bad |= r < 0;
    return bad ? -1 : 0;
}

int device_sim_env_check(int *ngpus, char *err, size_t errlen) {
    sim_env s;
    int rc = sim_env_read(&s, err, errlen);
    if (ngpus) *ngpus = (int)s.ngpus;
    return rc;
}

/* The environment's memory limit and delay apply where given
 * (ordo_device_sim_configure sets them for native tests). */
const device_backend *ordo_device_sim_backend(int ndev) {
    sim.ndev = ndev < 1 ? 1 : ndev > SIM_MAX_DEVICES ? SIM_MAX_DEVICES : ndev;
    sim_env s;
    sim_env_read(&s, NULL, 0); /* a bad value fails every engine's creation; the good ones apply */
    if (s.has_mem) sim.mem_limit = (size_t)s.mem_mb << 20;
    if (s.has_delay) sim.delay_ns = (unsigned)s.delay_ns;
    return &sim_backend;
}
