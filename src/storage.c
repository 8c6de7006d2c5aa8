/*
 * storage.c - refcounted, 64-byte-aligned host memory owning one engine var.
 *
 * The last release pushes ordo_delete_variable with a function that frees
 * the bytes, so they go only after every op pushed on the storage has run
 * (rule 6) - whatever thread (a Lua finalizer, a C caller) drops the last
 * reference, and without any wait.  A CPU storage with no op pending (the
 * usual case for a tensor the GC collects) is freed at once instead
 * (engine_delete_idle).
 *
 * Memory accounting for garbage-collected front ends: a GC that does not
 * see these bytes (LuaJIT) would let thousands of 1 MB tensors pile up
 * behind a few hundred bytes of Lua objects.  "referenced" bytes drop at the
 * last release (synchronously, when the front end's finalizer runs); "live"
 * bytes drop when the engine has actually freed them.  ordo_storage_gc_due
 * asks for a collection once the bytes allocated since the previous one
 * exceed max(threshold, bytes still referenced after it) - the same
 * geometric pacing as Lua's own pause of 200% - and GC_HEAP_RATIO times
 * the front end's own heap after it (ordo_storage_gc_pace).  A full
 * collection costs in proportion to that heap: a long autograd graph (an
 * LSTM over 2,000 steps holds a 30 MB Lua heap while its backward makes a
 * gigabyte of short-lived gradients) would otherwise collect a number of
 * times that grows with the graph, each time over the whole graph, and
 * take time quadratic in its length.  Each GPU is counted on its own too
 * (dev_due): its memory is a fraction of the host's, and a training loop
 * whose pause is 64 MiB of garbage, plus what waits to be freed behind the
 * ops in flight, filled a 256 MiB device for a 12 MB model.
 *
 * The bytes of released storages are freed by the engine, after their
 * pending ops: a loop that allocates faster than the workers retire its
 * ops would pile up freed-but-not-yet-free memory behind max_inflight ops.
 * So allocation has backpressure on memory too: past 2 x threshold bytes
 * waiting to be freed, a new allocation waits (on a condition variable
 * the free op signals) until half of them are gone.  Never inside an op
 * (a worker must not block on other workers), and never more than a few
 * seconds, so it cannot deadlock whatever the ops do.  A GPU allocation
 * waits the same way on the bytes waiting to be freed on its own device.
 */
#include "ordo_tensor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h" /* tls_worker, tls_thread.in_op: never block inside an op */
#include "dev_alloc.h"
#include "host_alloc.h"
#include "tensor_internal.h"

/* ---- accounting -------------------------------------------------------------- */

static _Atomic int64_t live_bytes, live_count, total_bytes, referenced_bytes;
static _Atomic int64_t pinned_live_bytes; /* the part of live_bytes that is pinned */
static _Atomic int64_t since_gc;     /* bytes allocated since the last collection */
static _Atomic int64_t gc_base;      /* bytes referenced right after it */
static _Atomic int64_t gc_heap;      /* the front end's heap right after it */
#define GC_HEAP_RATIO 4
static _Atomic int64_t gc_threshold; /* 0 = not read from the environment yet */
static _Atomic int64_t pending_free; /* released, not yet freed by the engine */
/* The same count per GPU, whose memory is much smaller than the host's:
 * bytes allocated on it since the last collection, bytes on it still
 * referenced (and right after the last collection), and its size (read at
 * its first storage; 0 = unknown).  gpu_top is 1 + the highest GPU used (0
 * while none is: CPU-only programs never look at these). */
static _Atomic int64_t dev_since[ORDO_MAX_DEVICES], dev_ref[ORDO_MAX_DEVICES], dev_base[ORDO_MAX_DEVICES];
static _Atomic int64_t dev_total[ORDO_MAX_DEVICES];
static _Atomic int64_t dev_pending[ORDO_MAX_DEVICES]; /* released on it, not yet freed */
static atomic_int gpu_top;
static atomic_int dev_seen[ORDO_MAX_DEVICES]; /* its size has been read */
#define DEV_FULL_SCALE ((int64_t)1 << 30) /* a device this size or more: threshold() as is */
#define DEV_HEAP_DIV 4     /* the heap term may not take more than 1/4 of the device */
static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t free_cv = PTHREAD_COND_INITIALIZER;
static atomic_int free_waiters;

int64_t ordo_storage_live_bytes(void) { return atomic_load(&live_bytes); }
int64_t ordo_storage_live_count(void) { return atomic_load(&live_count); }
int64_t ordo_storage_total_bytes(void) { return atomic_load(&total_bytes); }
int64_t ordo_pinned_live_bytes(void) { return atomic_load(&pinned_live_bytes); }
int64_t ordo_pinned_cached_bytes(void) { return (int64_t)host_pinned_cached_bytes(); }
int64_t ordo_host_cached_bytes(void) { return (int64_t)host_cached_bytes(); }
void ordo_host_empty_cache(void) {
    host_cache_empty();
    tensor_desc_cache_empty();
}
void ordo_pinned_empty_cache(void) {
    if (ordo_device_backend()) host_pinned_cache_empty();
}

static int64_t threshold(void) {
    int64_t t = atomic_load_explicit(&gc_threshold, memory_order_relaxed);
    if (t == 0) {
        const char *s = getenv("ORDO_GC_THRESHOLD_MB");
        long mb = s ? atol(s) : 0;
        t = (mb > 0 ? (int64_t)mb : 64) << 20;
        atomic_store(&gc_threshold, t);
    }
    return t;
}

void ordo_storage_set_gc_threshold(int64_t bytes) {
    atomic_store(&gc_threshold, bytes > 0 ? bytes : (int64_t)1);
}

/* The least pause of GPU d: threshold, scaled down by the device's size
 * over DEV_FULL_SCALE when it is smaller (4 MiB of a 64 MiB device). */
static int64_t dev_floor(int d) {
    int64_t t = threshold(), total = atomic_load_explicit(&dev_total[d], memory_order_relaxed);
    if (total > 0 && total < DEV_FULL_SCALE) t = (int64_t)((double)t * (double)total / (double)DEV_FULL_SCALE);
    return t > 0 ? t : 1;
}

/* Whether GPU d has had its share of allocations since the last collection:
 * max(its floor; the bytes on it referenced after the last collection; the
 * heap term, or 1/4 of the device if less). */
static bool dev_due(int d, int64_t heap) {
    int64_t since = atomic_load_explicit(&dev_since[d], memory_order_relaxed);
    int64_t total = atomic_load_explicit(&dev_total[d], memory_order_relaxed);
    int64_t t = dev_floor(d);
    if (total > 0 && heap > total / DEV_HEAP_DIV) heap = total / DEV_HEAP_DIV;
    int64_t base = atomic_load_explicit(&dev_base[d], memory_order_relaxed);
    if (base > t) t = base;
    if (heap > t) t = heap;
    return since >= t;
}

int ordo_storage_gc_due(void) {
    int64_t since = atomic_load_explicit(&since_gc, memory_order_relaxed);
    int64_t t = threshold(), base = atomic_load_explicit(&gc_base, memory_order_relaxed);
    int64_t heap = GC_HEAP_RATIO * atomic_load_explicit(&gc_heap, memory_order_relaxed);
    if (base > t) t = base;
    if (heap > t) t = heap;
    bool due = since >= t;
    int top = atomic_load_explicit(&gpu_top, memory_order_relaxed);
    for (int d = 0; d < top && !due; d++) due = dev_due(d, heap);
    if (!due) return 0;
    atomic_store(&since_gc, 0);
    for (int d = 0; d < top; d++) atomic_store(&dev_since[d], 0);
    return 1;
}

/* Called by the front end once its collection has run (the finalizers have
 * released what was garbage): the next pause is measured from here. */
void ordo_storage_gc_done(void) {
    atomic_store(&gc_base, atomic_load(&referenced_bytes));
    int top = atomic_load_explicit(&gpu_top, memory_order_relaxed);
    for (int d = 0; d < top; d++) atomic_store(&dev_base[d], atomic_load(&dev_ref[d]));
}

void ordo_storage_gc_pace(int64_t heap_bytes) {
    /* (capped: GC_HEAP_RATIO times it must not overflow) */
    atomic_store(&gc_heap, heap_bytes < 0 ? 0 : heap_bytes > ((int64_t)1 << 56) ? (int64_t)1 << 56 : heap_bytes);
}

/* ---- engines created for front ends ------------------------------------------- */

typedef struct eng_ref {
    ordo_engine *e;
    long refs; /* storages on it, + 1 while the front end's handle is open */
    bool closed; /* ordo_tensor_engine_close has dropped the handle's reference */
    struct eng_ref *next;
} eng_ref;

static pthread_mutex_t eng_mu = PTHREAD_MUTEX_INITIALIZER;
static eng_ref *eng_list;
static atomic_int eng_custom; /* engines in eng_list: 0 keeps the usual path lock-free */

static void engine_ref(ordo_engine *e, long delta) {
    if (atomic_load_explicit(&eng_custom, memory_order_acquire) == 0) return;
    ordo_engine *destroy = NULL;
    pthread_mutex_lock(&eng_mu);
    for (eng_ref **pp = &eng_list; *pp; pp = &(*pp)->next) {
        eng_ref *r = *pp;
        if (r->e != e) continue;
        r->refs += delta;
        if (r->refs == 0) {
            *pp = r->next;
            destroy = r->e;
            free(r);
            atomic_fetch_sub(&eng_custom, 1);
        }
        break;
    }
    pthread_mutex_unlock(&eng_mu);
    if (destroy) ordo_engine_destroy(destroy);
}

bool storage_engine_is_front(const ordo_engine *e) {
    if (atomic_load_explicit(&eng_custom, memory_order_acquire) == 0) return false;
    bool found = false;
    pthread_mutex_lock(&eng_mu);
    for (eng_ref *r = eng_list; r && !found; r = r->next) found = r->e == e;
    pthread_mutex_unlock(&eng_mu);
    return found;
}

ordo_engine *ordo_tensor_engine_create(const ordo_engine_config *cfg) {
    eng_ref *r = calloc(1, sizeof *r);
    if (!r) {
        tensor_set_error("engine.new: out of memory");
        return NULL;
    }
    ordo_engine *e = ordo_engine_create(cfg);
    if (!e) {
        tensor_set_error("engine.new: %s", ordo_last_error());
        free(r);
        return NULL;
    }
    r->e = e;
    r->refs = 1;
    pthread_mutex_lock(&eng_mu);
    r->next = eng_list;
    eng_list = r;
    atomic_fetch_add(&eng_custom, 1);
    pthread_mutex_unlock(&eng_mu);
    return e;
}

int ordo_tensor_engines_live(void) { return atomic_load(&eng_custom); }

void ordo_tensor_engine_close(ordo_engine *e) {
    if (!e) return;
    /* Only the handle's reference, once: a second close dropped a
     * storage's, and the engine was destroyed under that storage. */
    bool open = false;
    pthread_mutex_lock(&eng_mu);
    for (eng_ref *r = eng_list; r; r = r->next)
        if (r->e == e) {
            open = !r->closed;
            r->closed = true;
            break;
        }
    pthread_mutex_unlock(&eng_mu);
    if (open) engine_ref(e, -1);
    else tensor_set_error("ordo_tensor_engine_close: the engine was not made by ordo_tensor_engine_create, "
                          "or is closed already");
}

/* ---- backpressure on memory waiting to be freed ---------------------------------- */

/* The bytes waiting to be freed that make an allocation on ctx wait: on the
 * host 2 x threshold of them (all devices), on GPU d 2 x its pause (its
 * floor, or the bytes on it referenced after the last collection). */
static _Atomic int64_t *pending_of(ordo_ctx ctx, int64_t *limit) {
    if (ctx.dev_type != ORDO_GPU) {
        *limit = 2 * threshold();
        return &pending_free;
    }
    int64_t t = dev_floor(ctx.dev_id), base = atomic_load_explicit(&dev_base[ctx.dev_id], memory_order_relaxed);
    *limit = 2 * (base > t ? base : t);
    return &dev_pending[ctx.dev_id];
}

static void wait_for_frees(ordo_ctx ctx) {
    int64_t limit;
    _Atomic int64_t *pending = pending_of(ctx, &limit);
    if (atomic_load_explicit(pending, memory_order_relaxed) <= limit || tls_worker || tls_thread.in_op) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&free_mu);
    atomic_fetch_add(&free_waiters, 1);
    while (atomic_load(pending) > limit / 2)
        if (pthread_cond_timedwait(&free_cv, &free_mu, &until) != 0) break;
    atomic_fetch_sub(&free_waiters, 1);
    pthread_mutex_unlock(&free_mu);
}

static void freed(ordo_ctx ctx, int64_t nbytes) {
    int64_t left = atomic_fetch_sub_explicit(&pending_free, nbytes, memory_order_relaxed) - nbytes;
    bool go = left <= threshold(); /* a waiter on the host may go */
    if (ctx.dev_type == ORDO_GPU) {
        int64_t limit;
        _Atomic int64_t *pending = pending_of(ctx, &limit);
        if (atomic_fetch_sub_explicit(pending, nbytes, memory_order_relaxed) - nbytes <= limit / 2) go = true;
    }
    if (atomic_load_explicit(&free_waiters, memory_order_acquire) && go) {
        pthread_mutex_lock(&free_mu);
        pthread_cond_broadcast(&free_cv);
        pthread_mutex_unlock(&free_mu);
    }
}

/* ---- storages ----------------------------------------------------------------- */

/* Gives a storage's bytes back to the allocator of its device (last_use:
 * see storage_free_now). */
static void bytes_free(ordo_ctx ctx, void *data, size_t nbytes, struct dev_event *last_use) {
    if (ctx.dev_type == ORDO_GPU) dev_free(ctx.dev_id, data, last_use);
    else if (ctx.dev_type == ORDO_CPU_PINNED) host_free_pinned(data, nbytes);
    else host_free(data, nbytes);
}

/* A new storage of nbytes on GPU d (the device's size read at its first). */
static void gpu_counted(int d, int64_t nbytes) {
    /* (per device, not by gpu_top: gpu(1) used first must not leave gpu(0)'s size unread) */
    int unseen = 0;
    if (atomic_load_explicit(&dev_seen[d], memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong(&dev_seen[d], &unseen, 1)) {
        size_t free_b = 0, total_b = 0;
        ordo_device_backend()->mem_info(d, &free_b, &total_b);
        atomic_store(&dev_total[d], (int64_t)total_b);
        int top = atomic_load(&gpu_top);
        while (top <= d && !atomic_compare_exchange_weak(&gpu_top, &top, d + 1)) {}
    }
    atomic_fetch_add_explicit(&dev_ref[d], nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&dev_since[d], nbytes, memory_order_relaxed);
}

ordo_storage *ordo_storage_new(ordo_engine *e, ordo_ctx ctx, size_t nbytes) {
    if (!e) e = ordo_engine_default();
    if (!e) {
        tensor_set_error("cannot start the default engine: %s", ordo_last_error());
        return NULL;
    }
    if (ctx.dev_type == ORDO_GPU) {
        int n = ordo_gpu_count();
        if (n == 0) {
            tensor_set_error_code(ORDO_ERR_NO_DEVICE, "gpu(%d): no CUDA device available", ctx.dev_id);
            return NULL;
        }
        if (ctx.dev_id < 0 || ctx.dev_id >= n) {
            tensor_set_error_code(ORDO_ERR_NO_DEVICE, "gpu(%d) does not exist (%d CUDA device%s)", ctx.dev_id, n,
                                  n == 1 ? "" : "s");
            return NULL;
        }
    } else if ((ctx.dev_type != ORDO_CPU && ctx.dev_type != ORDO_CPU_PINNED) || ctx.dev_id < 0 ||
        ctx.dev_id >= ORDO_MAX_DEVICES) {
        tensor_set_error_code(ORDO_ERR_INVALID, "unknown device (type %d, id %d)", ctx.dev_type, ctx.dev_id);
        return NULL;
    }
    if (nbytes > 0) wait_for_frees(ctx);
    ordo_storage *s = malloc(sizeof *s);
    if (!s) {
        tensor_set_error_code(ORDO_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->data = NULL;
    struct dev_event *ready = NULL;
    if (ctx.dev_type == ORDO_GPU) {
        char err[512];
        int rc = dev_alloc(ctx.dev_id, nbytes, &s->data, &ready, err, sizeof err);
        if (rc != ORDO_OK) {
            free(s);
            tensor_set_error_code(rc, "%s", err);
            return NULL;
        }
    } else if (ctx.dev_type == ORDO_CPU_PINNED) {
        char err[256];
        if (!(s->data = host_alloc_pinned(nbytes, err, sizeof err))) {
            free(s);
            tensor_set_error_code(ordo_device_backend() ? ORDO_ERR_NOMEM : ORDO_ERR_NO_DEVICE, "cpu_pinned(%d): %s",
                                  ctx.dev_id, err);
            return NULL;
        }
    } else if (nbytes > 0) {
        if (!(s->data = host_alloc(nbytes))) {
            free(s);
            tensor_set_error_code(ORDO_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
            return NULL;
        }
    }
    s->var = ordo_new_variable(e);
    if (!s->var) {
        tensor_set_error_code(ORDO_ERR_NOMEM, "%s", ordo_last_error());
        bytes_free(ctx, s->data, nbytes, ready);
        free(s);
        return NULL;
    }
    /* A reused device block: the first op on it waits for its last user. */
    if (ready) {
        var_events_seed(s->var, ready);
        dev_event_unref(ready);
    }
    s->refs = 1;
    s->writes = 0;
    s->nbytes = nbytes;
    s->engine = e;
    s->ctx = ctx;
    atomic_fetch_add_explicit(&e->storages, 1, memory_order_relaxed);
    engine_ref(e, +1);
    atomic_fetch_add_explicit(&live_bytes, (int64_t)nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
    if (ctx.dev_type == ORDO_CPU_PINNED) atomic_fetch_add_explicit(&pinned_live_bytes, (int64_t)nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_bytes, (int64_t)nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&referenced_bytes, (int64_t)nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&since_gc, (int64_t)nbytes, memory_order_relaxed);
    if (ctx.dev_type == ORDO_GPU) gpu_counted(ctx.dev_id, (int64_t)nbytes);
    return s;
}

void ordo_storage_retain(ordo_storage *s) {
    if (s) __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
}

/* last_use: for device memory, the event after which the work queued on
 * the bytes is done (NULL: none pending); the allocator keeps it. */
static void storage_free_now(ordo_storage *s, struct dev_event *last_use) {
    int64_t n = (int64_t)s->nbytes;
    ordo_ctx ctx = s->ctx;
    bytes_free(s->ctx, s->data, s->nbytes, last_use);
    if (s->ctx.dev_type == ORDO_CPU_PINNED) atomic_fetch_sub_explicit(&pinned_live_bytes, n, memory_order_relaxed);
    free(s);
    atomic_fetch_sub_explicit(&live_bytes, n, memory_order_relaxed);
    atomic_fetch_sub_explicit(&live_count, 1, memory_order_relaxed);
    freed(ctx, n);
}

/* The delete op: runs after every earlier op on the storage's var.  On a
 * GPU it runs as soon as those ops have queued their work, on a stream made
 * to wait for all of it, so an event recorded there marks the moment the
 * block is really free; the allocator hands that event to its next user
 * instead of anybody waiting now. */
static int storage_free_op(const ordo_run_ctx *rc, void *param) {
    ordo_storage *s = param;
    struct dev_event *last_use = NULL;
    if (s->ctx.dev_type == ORDO_GPU && rc->stream) {
        char err[256];
        if (!(last_use = dev_event_record(s->ctx.dev_id, rc->stream, err, sizeof err))) {
            /* No event: make sure nothing is pending the slow way, quietly
             * (freeing a tensor never takes the device's pending failure:
             * it is another op's, for the next wait to report). */
            ordo_device_backend()->device_sync_quiet(s->ctx.dev_id, err, sizeof err);
        }
    }
    storage_free_now(s, last_use);
    return 0;
}

void ordo_storage_release(ordo_storage *s) {
    if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    atomic_fetch_sub_explicit(&referenced_bytes, (int64_t)s->nbytes, memory_order_relaxed);
    if (s->ctx.dev_type == ORDO_GPU) {
        atomic_fetch_sub_explicit(&dev_ref[s->ctx.dev_id], (int64_t)s->nbytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&dev_pending[s->ctx.dev_id], (int64_t)s->nbytes, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&pending_free, (int64_t)s->nbytes, memory_order_relaxed);
    ordo_engine *e = s->engine;
    ordo_ctx ctx = s->ctx;
    if (ctx.dev_type == ORDO_CPU && engine_delete_idle(e, s->var)) {
        /* Its ops have all run (the GC dropped it long after): freed here,
         * without a delete op's push and hand-off. */
        storage_free_now(s, NULL);
    } else {
        if (ctx.dev_type == ORDO_CPU_PINNED) ctx.dev_type = ORDO_CPU;
        if (ordo_delete_variable(e, storage_free_op, s, ctx, s->var) != ORDO_OK) {
            /* Cannot happen short of running out of memory for one op: wait
             * for the var's ops instead (not possible inside an op: leak). */
            if (ordo_wait_to_write(e, s->var) == ORDO_ERR_DEADLOCK) return;
            storage_free_now(s, NULL);
        }
    }
    atomic_fetch_sub_explicit(&e->storages, 1, memory_order_relaxed);
    engine_ref(e, -1);
}
