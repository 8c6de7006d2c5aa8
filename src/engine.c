/*
 * engine.c - engine life cycle, pushing, waiting, and op/var memory.
 */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>


static atomic_uint_least64_t next_engine_uid = 1;

/* ---- configuration ---------------------------------------------------- */

/* ORDO_* settings are checked, never guessed at: a value that is not a
 * whole number in range fails engine creation with a message naming the
 * variable, its value and what it accepts.  Replacing a typo by the default
 * would look like a setting that has no effect.  Unset or empty: not set.
 *
 * Returns 0 when name is unset (out untouched), 1 with *out set, or -1 with
 * the message in err (when err is not NULL).  device_sim.c reads its
 * variables with it too. */
int config_env_long(const char *name, long lo, long hi, const char *note, long *out, char *err, size_t errlen) {
    const char *s = getenv(name);
    if (!s || !*s) return 0;
    /* strtol alone would take " 12", "12abc" (with end) and 1e30 (ERANGE) */
    const char *d = s + (s[0] == '-' || s[0] == '+');
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*d >= '0' && *d <= '9' && !*end && errno == 0 && v >= lo && v <= hi) {
        *out = v;
        return 1;
    }
    if (err) {
        char range[96];
        if (hi == lo + 1) snprintf(range, sizeof range, "%ld or %ld", lo, hi);
        else snprintf(range, sizeof range, "an integer from %ld to %ld", lo, hi);
        snprintf(err, errlen, "%s=%.64s%s: expected %s%s", name, s, strlen(s) > 64 ? "..." : "", range,
                 note ? note : "");
    }
    return -1;
}


/* Where a setting came from, for messages that must name it. */
#define ORIGIN_LEN 64
typedef struct {
    char cpu[ORIGIN_LEN], prio[ORIGIN_LEN], copy[ORIGIN_LEN];
} config_origin;

/* An integer setting: the field if set (> 0), else the environment, else
 * the default. */
static int resolve_int(int *field, const char *name, long lo, long hi, int fallback, char *origin, char *err,
                       size_t errlen) {
    const char *from = "from the config";
    if (*field <= 0) {
        long v;
        int r = config_env_long(name, lo, hi, NULL, &v, err, errlen);
        if (r < 0) return -1;
        *field = r ? (int)v : fallback;
        from = r ? name : "by default";
    }
    if (origin) snprintf(origin, ORIGIN_LEN, "%s%s", from == name ? "from " : "", from);
    return 0;
}

/* A setting where negative means "off" and 0 in the config means "take
 * the environment": there 0 means off too, and reads back as -1. */
static int resolve_signed(int *field, const char *name, const char *note, int fallback, char *err, size_t errlen) {
    if (*field != 0) return 0;
    long v;
    int r = config_env_long(name, -(1L << 30), 1L << 30, note, &v, err, errlen);
    if (r < 0) return -1;
    *field = !r ? fallback : v > 0 ? (int)v : -1;
    return 0;
}

static int resolve_kind(int *kind, char *err, size_t errlen) {
    if (*kind >= ORDO_ENGINE_NAIVE && *kind <= ORDO_ENGINE_PER_DEVICE) return 0;
    const char *s = getenv("ORDO_ENGINE_TYPE");
    /* MXNet's names (MXNET_ENGINE_TYPE) too */
    if (!s || !*s || !strcasecmp(s, "perdevice") || !strcasecmp(s, "per_device") ||
        !strcasecmp(s, "ThreadedEnginePerDevice")) {
        *kind = ORDO_ENGINE_PER_DEVICE;
    } else if (!strcasecmp(s, "naive") || !strcasecmp(s, "NaiveEngine")) {
        *kind = ORDO_ENGINE_NAIVE;
    } else if (!strcasecmp(s, "pooled") || !strcasecmp(s, "ThreadedEnginePooled")) {
        *kind = ORDO_ENGINE_POOLED;
    } else {
        snprintf(err, errlen, "ORDO_ENGINE_TYPE=%.64s%s: expected naive, pooled or perdevice", s,
                 strlen(s) > 64 ? "..." : "");
        return -1;
    }
    return 0;
}

/* Settings the library reads elsewhere, lazily (storage.c, host_alloc.c,
 * kernels/cpu/matmul.c), where a failure has no caller to go to: checked
 * at every engine creation, which comes before any of them is read. */
static const struct {
    const char *name;
    long lo, hi;
    const char *note;
} lib_settings[] = {
    {"ORDO_GC_THRESHOLD_MB", 1, 1L << 24, NULL},
    {"ORDO_HOST_CACHE_MB", 0, 1L << 24, " (0: no cache)"},
    {"ORDO_PINNED_CACHE_MB", 0, 1L << 24, " (0: no cache)"},
    {"ORDO_BLAS_THREADS", 1, ORDO_MAX_WORKERS, NULL},
    {"ORDO_PROFILER_MAX_EVENTS", 1, PROF_MAX_EVENTS, " (records per worker thread)"},
};

/* The fields a caller set (nonzero) must be in range: a wrong one would
 * otherwise be taken for "use the environment" (kind 99, cpu_workers -3)
 * or start an engine the environment could not (spin_us INT_MAX made
 * destroy wait half an hour).  0, or -1 with the message in err. */
static int check_config_fields(const ordo_engine_config *c, char *err, size_t errlen) {
    const struct {
        const char *field;
        int value;
        long lo, hi;
        const char *env;
    } f[] = {
        {"kind", c->kind, ORDO_ENGINE_NAIVE, ORDO_ENGINE_PER_DEVICE, "ORDO_ENGINE_TYPE"},
        {"cpu_workers", c->cpu_workers, 1, ORDO_MAX_WORKERS, "ORDO_CPU_WORKER_NTHREADS"},
        {"cpu_priority_workers", c->cpu_priority_workers, 1, ORDO_MAX_WORKERS, "ORDO_CPU_PRIORITY_NTHREADS"},
        {"gpu_workers", c->gpu_workers, 1, ORDO_MAX_WORKERS, "ORDO_GPU_WORKER_NTHREADS"},
        {"gpu_copy_workers", c->gpu_copy_workers, 1, ORDO_MAX_WORKERS, "ORDO_GPU_COPY_NTHREADS"},
        {"max_inflight", c->max_inflight, 1, 1L << 24, "ORDO_MAX_INFLIGHT"},
        {"spin_us", c->spin_us, 1, 1000000, "ORDO_SPIN_US"},
        {"profiler_autostart", c->profiler_autostart, 1, 1, "ORDO_PROFILER_AUTOSTART"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value != 0 && (f[i].value < f[i].lo || f[i].value > f[i].hi)) {
            snprintf(err, errlen, "config.%s = %d: expected %ld..%ld, or 0 for %s or the default", f[i].field,
                     f[i].value, f[i].lo, f[i].hi, f[i].env);
            return -1;
        }
    return 0;
}

/* 0, or -1 with the message in err. */
static int resolve_config(const ordo_engine_config *in, ordo_engine_config *out, config_origin *o, char *err,
                          size_t errlen) {
    ordo_engine_config c = in ? *in : (ordo_engine_config){0};
    if (check_config_fields(&c, err, errlen)) return -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    /* cpu(0)'s pool and the priority pool must fit in an engine's workers */
    if (cores > ORDO_MAX_WORKERS / 2) cores = ORDO_MAX_WORKERS / 2;
    const long W = ORDO_MAX_WORKERS;
    if (resolve_kind(&c.kind, err, errlen) ||
        resolve_int(&c.cpu_workers, "ORDO_CPU_WORKER_NTHREADS", 1, W, (int)cores, o->cpu, err, errlen) ||
        resolve_int(&c.cpu_priority_workers, "ORDO_CPU_PRIORITY_NTHREADS", 1, W, 1, o->prio, err, errlen) ||
        resolve_int(&c.gpu_workers, "ORDO_GPU_WORKER_NTHREADS", 1, W, 2, NULL, err, errlen) ||
        resolve_int(&c.gpu_copy_workers, "ORDO_GPU_COPY_NTHREADS", 1, W, 1, o->copy, err, errlen) ||
        resolve_int(&c.max_inflight, "ORDO_MAX_INFLIGHT", 16, 1L << 24, 8192, NULL, err, errlen) ||
        resolve_signed(&c.push_inline_after, "ORDO_PUSH_INLINE_AFTER", " (0 or negative: never)", 64, err,
                       errlen) ||
        resolve_signed(&c.bulk_op_max_ns, "ORDO_BULK_OP_MAX_NS", " (0 or negative: always bulked)", 500, err,
                       errlen) ||
        resolve_signed(&c.run_now_max_elements, "ORDO_RUN_NOW_MAX_ELEMENTS", " (0 or negative: never)", 1024, err,
                       errlen))
        return -1;
    long v;
    int r;
    if (c.spin_us <= 0) {
        if ((r = config_env_long("ORDO_SPIN_US", 0, 1000000, NULL, &v, err, errlen)) < 0) return -1;
        c.spin_us = r ? (int)v : 50;
    }
    if (c.profiler_autostart <= 0) {
        if ((r = config_env_long("ORDO_PROFILER_AUTOSTART", 0, 1, NULL, &v, err, errlen)) < 0) return -1;
        c.profiler_autostart = r ? (int)v : 0;
    }
    for (size_t i = 0; i < sizeof lib_settings / sizeof lib_settings[0]; i++)
        if (config_env_long(lib_settings[i].name, lib_settings[i].lo, lib_settings[i].hi, lib_settings[i].note, &v,
                            err, errlen) < 0)
            return -1;
    if (device_sim_env_check(NULL, err, errlen)) return -1;
    /* A smaller window counts as 16 (README): a worker takes up to 16
     * ready ops at a time (POP_BATCH_MAX, sched.c). */
    if (c.max_inflight < 16) c.max_inflight = 16;
    *out = c;
    return 0;
}

const char *ordo_engine_kind_name(int kind) {
    switch (kind) {
    case ORDO_ENGINE_NAIVE: return "naive";
    case ORDO_ENGINE_POOLED: return "pooled";
    case ORDO_ENGINE_PER_DEVICE: return "perdevice";
    }
    return "unknown";
}

void ordo_engine_get_config(ordo_engine *e, ordo_engine_config *out) {
    if (!out) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_get_config: out is NULL");
    } else if (!e) {
        *out = (ordo_engine_config){0}; /* not the caller's garbage taken for a config */
        set_error(ORDO_ERR_INVALID, "ordo_engine_get_config: engine is NULL");
    } else {
        *out = e->cfg;
    }
}

long ordo_engine_pending(ordo_engine *e) {
    bulk_flush_mine();
    if (!e) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_pending: engine is NULL");
        return 0;
    }
    return engine_pending(e);
}

int ordo_gpu_count(void) {
    const device_backend *b = ordo_device_backend();
    return b ? b->count() : 0;
}

/* The host waits for the GPU work of every device this engine queued work
 * on; 0, or the number of devices with an asynchronous failure, their
 * messages in err joined by "; " (each sync takes its device's failure:
 * one left out here would never be reported). */
int engine_device_sync(ordo_engine *e, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    uint64_t used = atomic_load(&e->gpu_used);
    int rc = 0;
    size_t len = 0;
    for (int d = 0; b && d < ORDO_MAX_DEVICES; d++) {
        char msg[256];
        if ((used >> d & 1u) && b->device_sync(d, msg, sizeof msg)) {
            if (len < errlen) {
                int n = snprintf(err + len, errlen - len, "%s%s", rc ? "; " : "", msg);
                len += n > 0 ? (size_t)n : 0;
            }
            rc++;
        }
    }
    return rc;
}

/* ---- op and var blocks ------------------------------------------------- */

/* Ops are the hot path: each thread keeps a cache of free op blocks and
 * trades them with the engine's list in batches, so a push and a completion
 * normally take no lock at all. */
#define OPS_PER_SLAB 256
#define OP_CACHE_MAX 192
#define OP_BATCH 64

static _Thread_local struct { uint64_t uid; op_cache c; } tls_ops;

void *engine_slab_alloc(slab **list, size_t size) {
    slab *s = aligned_alloc(64, (size + 63) / 64 * 64 + 64);
    if (!s) return NULL;
    s->next = *list;
    *list = s;
    return (char *)s + 64;
}

static op_cache *cache_for(ordo_engine *e) {
    if (tls_worker && tls_worker->engine == e) return &tls_worker->cache;
    if (tls_ops.uid != e->uid) {
        /* Blocks cached for an older engine belong to its slabs: drop them. */
        tls_ops.uid = e->uid;
        tls_ops.c.head = NULL;
        tls_ops.c.n = 0;
    }
    return &tls_ops.c;
}

/* Free ops move between a thread's cache and the engine in whole chains of
 * OP_BATCH, handed over in O(1): walking a chain of blocks last touched by
 * another core would cost a cache miss per block under the lock. */
op *op_alloc(ordo_engine *e) {
    op_cache *c = cache_for(e);
    if (!c->head) {
        spin_lock_acquire(&e->mem_mu);
        if (!e->op_batches) {
            op *block = engine_slab_alloc(&e->op_slabs, OPS_PER_SLAB * sizeof(op));
            if (!block) {
                spin_lock_release(&e->mem_mu);
                return NULL;
            }
            for (int b = 0; b < OPS_PER_SLAB / OP_BATCH; b++) {
                op *first = &block[b * OP_BATCH];
                for (int i = 0; i < OP_BATCH - 1; i++) first[i].next = &first[i + 1];
                first[OP_BATCH - 1].next = NULL;
                first->next_batch = e->op_batches;
                e->op_batches = first;
            }
        }
        c->head = e->op_batches;
        e->op_batches = c->head->next_batch;
        spin_lock_release(&e->mem_mu);
        c->n = OP_BATCH;
    }
    op *o = c->head;
    c->head = o->next;
    c->n--;
    /* The next block was most likely last written by another core (the
     * worker that freed it): start taking its lines now, so the next push
     * does not stall on them. */
    if (c->head) {
        __builtin_prefetch(c->head, 1);
        __builtin_prefetch((char *)c->head + 64, 1);
    }
    return o;
}

void op_free(ordo_engine *e, op *o) {
    op_cache *c = cache_for(e);
    o->next = c->head;
    c->head = o;
    if (++c->n >= OP_CACHE_MAX) {
        /* Hand the newest OP_BATCH blocks back; this thread touched them last,
         * so walking them is cheap. */
        op *first = c->head, *last = first;
        for (int i = 1; i < OP_BATCH; i++) last = last->next;
        c->head = last->next;
        c->n -= OP_BATCH;
        last->next = NULL;
        spin_lock_acquire(&e->mem_mu);
        first->next_batch = e->op_batches;
        e->op_batches = first;
        spin_lock_release(&e->mem_mu);
    }
}

/* ---- failures ------------------------------------------------------------ */

void engine_record_failure(ordo_engine *e, failure *f) {
    failure_ref(f);
    pthread_mutex_lock(&e->fail_mu);
    /* Drop failures a wait_for_var already reported, so the list stays
     * short -- once it has doubled since the last time: a walk per failure
     * made a run of failures nobody waits for quadratic (40,000 took a
     * second under this lock, 400,000 minutes).  Drop too, as a count, the
     * unreported ones that only this list holds (their vars deleted, their
     * ops done: only wait_for_all can report them), but the oldest: what
     * wait_for_all says stays the same ("the oldest (and N more)"), and a
     * loop whose op fails every time, never read, no longer holds every
     * failure's message until a wait_for_all (~100 bytes each, without
     * bound).  (refs is read under fail_mu: at 1 nobody else holds f, so
     * nobody can take a new reference to it.) */
    if (++e->fail_n > e->fail_prune_at) {
        failure **pp = &e->fail_head;
        bool kept_orphan = false;
        e->fail_tail = NULL;
        e->fail_n = 1; /* f */
        while (*pp) {
            failure *x = *pp;
            bool orphan = !failure_reported(x) && atomic_load_explicit(&x->refs, memory_order_acquire) == 1;
            if (failure_reported(x) || (orphan && kept_orphan)) {
                if (!failure_reported(x)) e->fail_dropped++;
                *pp = x->next;
                failure_unref(x);
            } else {
                kept_orphan |= orphan;
                e->fail_tail = x;
                e->fail_n++;
                pp = &x->next;
            }
        }
        e->fail_prune_at = 2 * e->fail_n + 64;
    }
    f->next = NULL;
    if (e->fail_tail) e->fail_tail->next = f;
    else e->fail_head = f;
    e->fail_tail = f;
    pthread_mutex_unlock(&e->fail_mu);
}

/* Reports the oldest unreported failure and marks all of them reported. */
int engine_report_failures(ordo_engine *e) {
    pthread_mutex_lock(&e->fail_mu);
    failure *list = e->fail_head;
    long more = e->fail_dropped;
    e->fail_head = e->fail_tail = NULL;
    e->fail_n = e->fail_prune_at = e->fail_dropped = 0;
    pthread_mutex_unlock(&e->fail_mu);
    int rc = ORDO_OK;
    while (list) {
        failure *f = list;
        list = f->next;
        if (failure_claim(e, f)) {
            if (rc == ORDO_OK) rc = set_error(ORDO_ERR_FAILED, "%s", f->msg);
            else more++;
        }
        failure_unref(f);
    }
    if (more && rc == ORDO_OK) /* (not expected: the oldest dropped one's elder stays in the list) */
        rc = set_error(ORDO_ERR_FAILED, "%ld failure%s nobody waited for", more, more > 1 ? "s" : "");
    else if (more) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s (and %ld more failure%s)", ordo_last_error(), more, more > 1 ? "s" : "");
        set_error(rc, "%s", buf);
    }
    return rc;
}

/* ---- pending count: wait_for_all and backpressure ------------------------ */

/* Every retired count is read before `pushed`: each count only grows and an
 * op is counted as pushed before it can be retired, so the difference is
 * never below the true number pending when `pushed` is read, and is exact
 * whenever it reads zero. */
long engine_pending(ordo_engine *e) {
    long retired = atomic_load(&e->retired_other);
    int n = atomic_load(&e->nall_workers);
    for (int i = 0; i < n; i++) {
        worker *w = atomic_load(&e->all_workers[i]);
        if (w) retired += atomic_load(&w->retired);
    }
    return atomic_load(&e->pushed) - retired;
}

static void wake_sleepers(ordo_engine *e) {
    pthread_mutex_lock(&e->idle_mu);
    pthread_cond_broadcast(&e->idle_cv);
    pthread_mutex_unlock(&e->idle_mu);
}

/* ---- the sleeper/retirer handshake ---------------------------------------
 *
 * A thread about to sleep until few enough ops are pending sets a wake flag
 * and then reads the retired counts; a retiring thread bumps its count and
 * then reads the flags.  Each side must see the other's write (else the
 * sleeper sleeps past the last retire), which takes a full fence between
 * the write and the read - on both sides, per retire.  Retires happen
 * millions of times a second and sleeps rarely, so the fence is moved
 * entirely to the sleeper: membarrier() makes every running thread of the
 * process execute one, so a retirer needs only a compiler barrier.  Where
 * the system has no membarrier (old kernels, valgrind) the retirer fences
 * itself. */
static atomic_int asym_fence = -1; /* -1 not known yet, 0 unavailable, 1 registered */

static void asym_fence_init(void) {
    if (atomic_load_explicit(&asym_fence, memory_order_acquire) >= 0) return;
    int ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    atomic_store_explicit(&asym_fence, ok, memory_order_release);
}

/* A full fence.  ThreadSanitizer does not support atomic_thread_fence
 * (gcc refuses it), so under it a read-modify-write, which is one on every
 * machine it runs on, stands in. */
static inline void full_fence(void) {
#if defined(__SANITIZE_THREAD__)
    static atomic_int fence_word;
    atomic_fetch_add(&fence_word, 0);
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* The sleeper's side, after its seq_cst store of the flag: a full fence
 * on every thread of the process. */
static void heavy_fence(void) {
    if (atomic_load_explicit(&asym_fence, memory_order_relaxed) == 1 &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        atomic_store(&asym_fence, 0); /* cannot happen once registered; be safe anyway */
}

void engine_op_retired(ordo_engine *e, worker *w, long count) {
    if (w) {
        long n = atomic_load_explicit(&w->retired, memory_order_relaxed) + count;
        if (atomic_load_explicit(&asym_fence, memory_order_relaxed) == 1) {
            /* Release: whoever sees the count sees the op's writes. */
            atomic_store_explicit(&w->retired, n, memory_order_release);
            atomic_signal_fence(memory_order_seq_cst);
        } else {
            atomic_store(&w->retired, n);
        }
    } else {
        atomic_fetch_add(&e->retired_other, count);
    }
    /* Only while somebody sleeps on the count is it computed here. */
    bool zero = atomic_load_explicit(&e->wake_zero, memory_order_relaxed);
    bool low = atomic_load_explicit(&e->wake_low, memory_order_relaxed);
    if (zero || low) {
        /* Two threads retiring the last ops at once must not both miss the
         * other's count (each would see one op left, and nobody would
         * wake the sleeper): between our count and our read of theirs, a
         * real fence.  Rare: only while somebody sleeps. */
        full_fence();
        long left = engine_pending(e);
        if ((zero && left == 0 && atomic_exchange(&e->wake_zero, 0)) ||
            (low && left <= e->low_mark && atomic_exchange(&e->wake_low, 0)))
            wake_sleepers(e);
    }
}

/* Waits until pending <= target (0 or the low mark).  Spins first: a
 * sleep/wake costs ~4 us, more than many ops take. */
void engine_wait_pending(ordo_engine *e, long target) {
    if (engine_pending(e) <= target) return;
    uint64_t until = now_ns() + (uint64_t)e->cfg.spin_us * 1000u;
    for (int i = 0; engine_pending(e) > target; i++) {
        if ((i & 63) != 63) {
            cpu_relax();
        } else if (now_ns() < until) {
            sched_yield();
        } else {
            atomic_int *flag = target == 0 ? &e->wake_zero : &e->wake_low;
            pthread_mutex_lock(&e->idle_mu);
            for (;;) {
                atomic_store(flag, 1);
                heavy_fence();
                if (engine_pending(e) <= target) break;
                pthread_cond_wait(&e->idle_cv, &e->idle_mu);
            }
            pthread_mutex_unlock(&e->idle_mu);
            return;
        }
    }
}

/* ---- create / destroy ---------------------------------------------------- */

ordo_engine *ordo_engine_create(const ordo_engine_config *cfg) {
    ordo_engine_config c;
    config_origin origin;
    char err[512];
    if (resolve_config(cfg, &c, &origin, err, sizeof err)) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_create: %s", err);
        return NULL;
    }
    ordo_engine *e = aligned_alloc(64, (sizeof *e + 63) / 64 * 64);
    if (e) memset(e, 0, sizeof *e);
    if (!e) {
        set_error(ORDO_ERR_NOMEM, "ordo_engine_create: out of memory");
        return NULL;
    }
    e->cfg = c;
    e->uid = atomic_fetch_add(&next_engine_uid, 1);
    asym_fence_init();
    e->low_mark = e->cfg.max_inflight / 2;
    pthread_mutex_init(&e->idle_mu, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    pthread_mutex_init(&e->fail_mu, NULL);
    pthread_mutex_init(&e->pool_mu, NULL);
    atomic_init(&e->mem_mu.v, 0);
    pthread_mutex_init(&e->prof_mu, NULL);
    long max_events = PROF_MAX_EVENTS; /* checked by resolve_config */
    config_env_long("ORDO_PROFILER_MAX_EVENTS", 1, PROF_MAX_EVENTS, NULL, &max_events, NULL, 0);
    e->prof_max_events = (size_t)max_events;
    pthread_mutex_init(&e->names_mu, NULL);
    e->prof_shared = prof_buf_new(e, -1, (ordo_ctx){0, 0}, "pushing threads");

    /* A failing pool_start sets the message; one that fails without (no
     * memory) must not leave an older message to be taken for its own.
     * The caller's last error stands again when all went well. */
    char saved_error[1024];
    snprintf(saved_error, sizeof saved_error, "%s", ordo_last_error());
    set_error(ORDO_OK, "%s", "");
    int rc = ORDO_OK;
    if (e->cfg.kind == ORDO_ENGINE_PER_DEVICE) {
        rc = start_cpu_pool(e, 0);
        if (rc == ORDO_OK) {
            e->cpu_prio_pool = calloc(1, sizeof(pool));
            rc = e->cpu_prio_pool ? pool_start(e, e->cpu_prio_pool, POOL_CPU_PRIORITY,
                                               (ordo_ctx){ORDO_CPU, 0}, e->cfg.cpu_priority_workers)
                                  : ORDO_ERR_NOMEM;
        }
    } else if (e->cfg.kind == ORDO_ENGINE_POOLED) {
        e->shared_pool = calloc(1, sizeof(pool));
        e->shared_copy_pool = calloc(1, sizeof(pool));
        rc = e->shared_pool && e->shared_copy_pool
                 ? pool_start(e, e->shared_pool, POOL_SHARED, (ordo_ctx){0, 0}, e->cfg.cpu_workers)
                 : ORDO_ERR_NOMEM;
        if (rc == ORDO_OK)
            rc = pool_start(e, e->shared_copy_pool, POOL_SHARED_COPY, (ordo_ctx){0, 0}, e->cfg.gpu_copy_workers);
    }
    if (rc != ORDO_OK) {
        /* pool_start's message says why ("more than 1024 worker threads");
         * the counts and where they came from say what to change. */
        char why[512];
        snprintf(why, sizeof why, "%s", ordo_last_error()[0] ? ordo_last_error() : "out of memory");
        ordo_engine_destroy(e);
        bool pooled = c.kind == ORDO_ENGINE_POOLED;
        set_error(rc, "ordo_engine_create: cannot start the worker threads: %s (cpu_workers = %d %s, %s = %d %s; "
                  "at most %d in all)", why, c.cpu_workers, origin.cpu,
                  pooled ? "gpu_copy_workers" : "cpu_priority_workers",
                  pooled ? c.gpu_copy_workers : c.cpu_priority_workers, pooled ? origin.copy : origin.prio,
                  ORDO_MAX_WORKERS);
        return NULL;
    }
    set_error(ORDO_OK, "%s", saved_error);
    if (e->cfg.profiler_autostart) ordo_profiler_start(e);
    return e;
}

/* Every pool is told to stop and joined before any is freed: a worker that
 * retired the last op may still be summing every worker's counter. */
static int engine_pools(ordo_engine *e, pool **out) {
    int n = 0;
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        pool *p;
        if ((p = atomic_load(&e->cpu_pools[d]))) out[n++] = p;
        if ((p = atomic_load(&e->gpu_pools[d]))) out[n++] = p;
        if ((p = atomic_load(&e->gpu_copy_pools[d]))) out[n++] = p;
        if ((p = atomic_load(&e->gpu_prio_pools[d]))) out[n++] = p;
    }
    if (e->cpu_prio_pool) out[n++] = e->cpu_prio_pool;
    if (e->shared_pool) out[n++] = e->shared_pool;
    if (e->shared_copy_pool) out[n++] = e->shared_copy_pool;
    return n;
}

static void engine_destroy(ordo_engine *e, bool at_exit) {
    if (!e || (!at_exit && engine_destroy_refused(e))) return; /* the default engine: only its exit handler destroys it (wait.c) */
    /* From inside one of its ops, destroy would wait for that op: a
     * deadlock (rule 7).  destroy returns nothing, so the refusal is the
     * thread's last error, and the engine runs on. */
    if (tls_thread.in_op || tls_worker) {
        set_error(ORDO_ERR_DEADLOCK, "ordo_engine_destroy: called from inside an operation (it would wait for "
                                     "that operation); destroy engines from the thread that made them");
        return;
    }
    /* A tensor's storage keeps its var and engine pointers: freed under
     * it, every later use of the tensor (its release too) would touch
     * freed memory. */
    if (!at_exit && storage_engine_is_front(e)) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_destroy: this engine was made by ordo_tensor_engine_create: close it "
                                    "with ordo_tensor_engine_close; the engine was left as it was");
        return;
    }
    long live = atomic_load(&e->storages);
    if (live > 0 && !at_exit) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_destroy: %ld tensor storage%s still use%s this engine; free %s "
                  "first (ordo_tensor_free / ordo_storage_release), or make the engine with "
                  "ordo_tensor_engine_create, which lives until its last tensor is freed; the engine was left as it was",
                  live, live > 1 ? "s" : "", live > 1 ? "" : "s", live > 1 ? "them" : "it");
        return;
    }
    bulk_flush_mine();
    /* Another thread's bulk holds ops for e that it hands over later (at
     * its next engine call, flush or exit): into freed memory. */
    int bulks = atomic_load_explicit(&e->open_bulks, memory_order_acquire);
    if (bulks > 0 && !at_exit) {
        set_error(ORDO_ERR_INVALID, "ordo_engine_destroy: %d other thread%s still collect%s ops for this engine in a "
                  "bulk (ordo_set_bulk_size); call ordo_bulk_flush on %s first; the engine was left as it was",
                  bulks, bulks > 1 ? "s" : "", bulks > 1 ? "" : "s", bulks > 1 ? "them" : "it");
        return;
    }
    engine_wait_pending(e, 0);
    while (atomic_load(&e->external) > 0) sched_yield();
    /* Rule 11 covers the GPU work the ops queued, too.  Quietly: a
     * device's pending failure may be another engine's work's (it took the
     * default engine's, whose failed tensor then read its garbage without
     * an error); this engine's own is nobody's to report any more. */
    const device_backend *b = ordo_device_backend();
    uint64_t used = atomic_load(&e->gpu_used);
    for (int d = 0; b && d < ORDO_MAX_DEVICES; d++) {
        char err[256];
        if (used >> d & 1u) b->device_sync_quiet(d, err, sizeof err);
    }
    gpu_checker_free(e); /* idle: no op is pending */
    pool *pools[4 * ORDO_MAX_DEVICES + 3];
    int npools = engine_pools(e, pools);
    for (int i = 0; i < npools; i++) pool_signal_stop(pools[i]);
    for (int i = 0; i < npools; i++) pool_join(pools[i]);
    for (int i = 0; i < npools; i++) {
        pool_free(pools[i]);
        free(pools[i]);
    }
    for (int d = 0; d < ORDO_MAX_DEVICES; d++)
        if (e->naive_streams[d]) ordo_device_backend()->stream_destroy(d, e->naive_streams[d]);

    engine_free_operators(e); /* nothing pending: only their handles hold them */
    /* Failures still held by live vars or by the unreported list. */
    for (failure *f = e->fail_head, *next; f; f = next) {
        next = f->next;
        failure_unref(f);
    }
    for (slab *s = e->var_slabs, *next; s; s = next) {
        next = s->next;
        ordo_var *vars = (ordo_var *)((char *)s + 64);
        for (int i = 0; i < VARS_PER_SLAB; i++)
            if (atomic_load(&vars[i].magic) == VAR_LIVE) {
                failure_unref(vars[i].fail);
                var_events_free(&vars[i]);
            }
        free(s);
    }
    for (slab *s = e->op_slabs, *next; s; s = next) {
        next = s->next;
        free(s);
    }
    prof_free_all(e);
    engine_names_free(e);
    pthread_mutex_destroy(&e->names_mu);
    pthread_mutex_destroy(&e->idle_mu);
    pthread_cond_destroy(&e->idle_cv);
    pthread_mutex_destroy(&e->fail_mu);
    pthread_mutex_destroy(&e->pool_mu);
    pthread_mutex_destroy(&e->prof_mu);
    free(e);
}

void ordo_engine_destroy(ordo_engine *e) { engine_destroy(e, false); }

void engine_destroy_at_exit(ordo_engine *e) { engine_destroy(e, true); }
