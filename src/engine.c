/*
 * engine.c - engine life cycle, pushing, waiting, and op/var memory.
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>


static atomic_uint_least64_t next_engine_uid = 1;

/* ---- configuration ---------------------------------------------------- */

static int env_int(const char *name, int fallback) {
    const char *s = getenv(name);
    if (!s || !*s) return fallback;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < 0 || v > 1 << 24) ? fallback : (int)v;
}

static int env_kind(void) {
    const char *s = getenv("ORDO_ENGINE_TYPE");
    if (!s || !*s) return ORDO_ENGINE_PER_DEVICE;
    if (!strcasecmp(s, "naive") || !strcasecmp(s, "NaiveEngine")) return ORDO_ENGINE_NAIVE;
    if (!strcasecmp(s, "pooled") || !strcasecmp(s, "ThreadedEnginePooled")) return ORDO_ENGINE_POOLED;
    return ORDO_ENGINE_PER_DEVICE;
}

static ordo_engine_config resolve_config(const ordo_engine_config *in) {
    ordo_engine_config c = in ? *in : (ordo_engine_config){0};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (c.kind < ORDO_ENGINE_NAIVE || c.kind > ORDO_ENGINE_PER_DEVICE) c.kind = env_kind();
    if (c.cpu_workers <= 0) c.cpu_workers = env_int("ORDO_CPU_WORKER_NTHREADS", (int)cores);
    if (c.cpu_priority_workers <= 0) c.cpu_priority_workers = env_int("ORDO_CPU_PRIORITY_NTHREADS", 1);
    if (c.gpu_workers <= 0) c.gpu_workers = env_int("ORDO_GPU_WORKER_NTHREADS", 2);
    if (c.gpu_copy_workers <= 0) c.gpu_copy_workers = env_int("ORDO_GPU_COPY_NTHREADS", 1);
    if (c.max_inflight <= 0) c.max_inflight = env_int("ORDO_MAX_INFLIGHT", 8192);
    if (c.spin_us <= 0) c.spin_us = env_int("ORDO_SPIN_US", 50);
    if (c.profiler_autostart <= 0) c.profiler_autostart = env_int("ORDO_PROFILER_AUTOSTART", 0);
    if (c.push_inline_after == 0) {
        const char *s = getenv("ORDO_PUSH_INLINE_AFTER");
        c.push_inline_after = s && *s == '-' ? -1 : env_int("ORDO_PUSH_INLINE_AFTER", 64);
    }
    if (c.bulk_op_max_ns == 0) {
        const char *s = getenv("ORDO_BULK_OP_MAX_NS");
        c.bulk_op_max_ns = s && *s == '-' ? -1 : env_int("ORDO_BULK_OP_MAX_NS", 500);
    }
    if (c.run_now_max_elements == 0) {
        const char *s = getenv("ORDO_RUN_NOW_MAX_ELEMENTS");
        c.run_now_max_elements = s && *s == '-' ? -1 : env_int("ORDO_RUN_NOW_MAX_ELEMENTS", 1024);
        if (c.run_now_max_elements == 0) c.run_now_max_elements = -1;
    }
    if (c.cpu_workers < 1) c.cpu_workers = 1;
    if (c.cpu_priority_workers < 1) c.cpu_priority_workers = 1;
    if (c.gpu_workers < 1) c.gpu_workers = 1;
    if (c.gpu_copy_workers < 1) c.gpu_copy_workers = 1;
    if (c.max_inflight < 16) c.max_inflight = 16;
    return c;
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
    if (e && out) *out = e->cfg;
}

long ordo_engine_pending(ordo_engine *e) {
    bulk_flush_mine();
    return e ? engine_pending(e) : 0;
}

int ordo_gpu_count(void) {
    const device_backend *b = ordo_device_backend();
    return b ? b->count() : 0;
}

/* The host waits for the GPU work of every device this engine queued work
 * on; 0, or 1 with the first asynchronous failure in err. */
int engine_device_sync(ordo_engine *e, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    uint64_t used = atomic_load(&e->gpu_used);
    int rc = 0;
    for (int d = 0; b && d < ORDO_MAX_DEVICES; d++) {
        char msg[256];
        if ((used >> d & 1u) && b->device_sync(d, msg, sizeof msg) && !rc) {
            snprintf(err, errlen, "%s", msg);
            rc = 1;
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
        pthread_mutex_lock(&e->mem_mu);
        if (!e->op_batches) {
            op *block = engine_slab_alloc(&e->op_slabs, OPS_PER_SLAB * sizeof(op));
            if (!block) {
                pthread_mutex_unlock(&e->mem_mu);
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
        pthread_mutex_unlock(&e->mem_mu);
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
        pthread_mutex_lock(&e->mem_mu);
        first->next_batch = e->op_batches;
        e->op_batches = first;
        pthread_mutex_unlock(&e->mem_mu);
    }
}

/* ---- failures ------------------------------------------------------------ */

void engine_record_failure(ordo_engine *e, failure *f) {
    failure_ref(f);
    pthread_mutex_lock(&e->fail_mu);
    /* Drop failures a wait_for_var already reported, so the list stays short. */
    failure **pp = &e->fail_head;
    e->fail_tail = NULL;
    while (*pp) {
        failure *x = *pp;
        if (atomic_load(&x->reported)) {
            *pp = x->next;
            failure_unref(x);
        } else {
            e->fail_tail = x;
            pp = &x->next;
        }
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
    e->fail_head = e->fail_tail = NULL;
    pthread_mutex_unlock(&e->fail_mu);
    int rc = ORDO_OK, more = 0;
    while (list) {
        failure *f = list;
        list = f->next;
        if (failure_claim(f)) {
            if (rc == ORDO_OK) rc = set_error(ORDO_ERR_FAILED, "%s", f->msg);
            else more++;
        }
        failure_unref(f);
    }
    if (more) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s (and %d more failure%s)", ordo_last_error(), more, more > 1 ? "s" : "");
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
    ordo_engine *e = aligned_alloc(64, (sizeof *e + 63) / 64 * 64);
    if (e) memset(e, 0, sizeof *e);
    if (!e) {
        set_error(ORDO_ERR_NOMEM, "ordo_engine_create: out of memory");
        return NULL;
    }
    e->cfg = resolve_config(cfg);
    e->uid = atomic_fetch_add(&next_engine_uid, 1);
    asym_fence_init();
    e->low_mark = e->cfg.max_inflight / 2;
    pthread_mutex_init(&e->idle_mu, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    pthread_mutex_init(&e->fail_mu, NULL);
    pthread_mutex_init(&e->pool_mu, NULL);
    pthread_mutex_init(&e->mem_mu, NULL);
    pthread_mutex_init(&e->prof_mu, NULL);
    pthread_mutex_init(&e->names_mu, NULL);
    e->prof_shared = prof_buf_new(e, -1, (ordo_ctx){0, 0}, "pushing threads");

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
        ordo_engine_destroy(e);
        set_error(rc, "ordo_engine_create: cannot start worker threads");
        return NULL;
    }
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

void ordo_engine_destroy(ordo_engine *e) {
    if (!e) return;
    bulk_flush_mine();
    engine_wait_pending(e, 0);
    while (atomic_load(&e->external) > 0) sched_yield();
    /* Rule 11 covers the GPU work the ops queued, too. */
    char err[256];
    engine_device_sync(e, err, sizeof err);
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
    pthread_mutex_destroy(&e->mem_mu);
    pthread_mutex_destroy(&e->prof_mu);
    free(e);
}
