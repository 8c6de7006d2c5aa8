/*
 * push.c - validating and pushing ops, reusable operators, deleting vars.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- argument checks ---------------------------------------------------- */

static bool var_is_live(ordo_var *v) {
    return atomic_load_explicit(&v->magic, memory_order_acquire) == VAR_LIVE;
}

/* Whether v may be used with engine e: vars live in their engine's slabs
 * and queues, and another engine's pending counts, free lists and destroy
 * know nothing of them (struct ordo_var, internal.h). */
static inline bool var_of(const ordo_engine *e, const ordo_var *v) { return v->engine == e; }

static int check_vars(ordo_engine *e, const char *fn, const char *which, ordo_var *const *vars, int n) {
    if (n < 0) return set_error(ORDO_ERR_INVALID, "%s: %s count is negative (%d)", fn, which, n);
    if (n > 0 && !vars) return set_error(ORDO_ERR_INVALID, "%s: %s is NULL but its count is %d", fn, which, n);
    for (int i = 0; i < n; i++) {
        if (!vars[i]) return set_error(ORDO_ERR_INVALID, "%s: %s[%d] is NULL", fn, which, i);
        if (!var_is_live(vars[i]))
            return set_error(ORDO_ERR_DELETED, "%s: %s[%d] is a deleted variable", fn, which, i);
        if (!var_of(e, vars[i]))
            return set_error(ORDO_ERR_INVALID, "%s: %s[%d]: variable belongs to another engine", fn, which, i);
    }
    return ORDO_OK;
}

static int check_ctx(const char *fn, ordo_ctx ctx) {
    if (ctx.dev_type != ORDO_CPU && ctx.dev_type != ORDO_GPU && ctx.dev_type != ORDO_CPU_PINNED)
        return set_error(ORDO_ERR_INVALID, "%s: unknown device type %d (expected ORDO_CPU=1, ORDO_GPU=2 or ORDO_CPU_PINNED=3)",
                         fn, ctx.dev_type);
    if (ctx.dev_id < 0 || ctx.dev_id >= ORDO_MAX_DEVICES)
        return set_error(ORDO_ERR_INVALID, "%s: device id %d out of range 0..%d", fn, ctx.dev_id, ORDO_MAX_DEVICES - 1);
    if (ctx.dev_type == ORDO_GPU) {
        int n = ordo_gpu_count();
        if (n == 0) return set_error(ORDO_ERR_NO_DEVICE, "%s: gpu(%d): no CUDA device available", fn, ctx.dev_id);
        if (ctx.dev_id >= n)
            return set_error(ORDO_ERR_NO_DEVICE, "%s: gpu(%d) does not exist (%d CUDA device%s)", fn, ctx.dev_id, n, n > 1 ? "s" : "");
    }
    return ORDO_OK;
}

static int check_prop(const char *fn, int prop) {
    int base = prop & ~(ORDO_PROP_NO_SKIP | ORDO_PROP_BULK);
    if (base < ORDO_PROP_NORMAL || base > ORDO_PROP_GPU_PRIORITIZED)
        return set_error(ORDO_ERR_INVALID, "%s: unknown property %d", fn, prop);
    if (base == ORDO_PROP_DELETE_VAR)
        return set_error(ORDO_ERR_INVALID, "%s: ORDO_PROP_DELETE_VAR is for ordo_delete_variable", fn);
    return ORDO_OK;
}

/* The checks of an op's property and vars, one function for both ways of
 * making an op -- pushed at once (push_fn) or kept as a reusable operator
 * (ordo_new_operator) -- so that neither accepts what the other refuses. */
static int check_op(ordo_engine *e, const char *fn, int prop, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites) {
    int rc;
    if ((rc = check_prop(fn, prop)) || (rc = check_vars(e, fn, "reads", reads, nreads))) return rc;
    return check_vars(e, fn, "writes", writes, nwrites);
}

static int deleted_error(const char *fn, const ordo_var *v) {
    return set_error(ORDO_ERR_DELETED, "%s: variable %p was deleted (rule 6)", fn, (const void *)v);
}

/* ---- var sets ------------------------------------------------------------ */

static int cmp_use(const void *a, const void *b) {
    const var_use *x = a, *y = b;
    return x->v < y->v ? -1 : x->v > y->v;
}

/* collect_vars (internal.h) for pushes of more than 16 vars.  Callers that
 * mean two reads of one var pass it once. */
int collect_vars_many(ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites, var_use *out) {
    int n = nreads + nwrites, m = 0;
    for (int i = 0; i < nreads; i++) out[i] = (var_use){reads[i], false};
    for (int i = 0; i < nwrites; i++) out[nreads + i] = (var_use){writes[i], true};
    qsort(out, (size_t)n, sizeof *out, cmp_use);
    for (int i = 0; i < n; i++) {
        if (m > 0 && out[m - 1].v == out[i].v) out[m - 1].w = true;
        else out[m++] = out[i];
    }
    return m;
}

/* Gives o its var and node arrays: lent ones (a bulk's), else inline when
 * they fit, else allocated. */
static int op_set_vars(op *o, const var_use *uses, int n, ordo_var **lent_vars, dep_node *lent_nodes) {
    if (lent_vars) {
        o->vars = lent_vars;
        o->nodes = lent_nodes;
    } else if (n <= OP_INLINE_VARS) {
        o->vars = o->vars_inline;
        o->nodes = o->nodes_inline;
    } else {
        o->vars = malloc((size_t)n * sizeof *o->vars);
        o->nodes = malloc((size_t)n * sizeof *o->nodes);
        if (!o->vars || !o->nodes) {
            free(o->vars);
            free(o->nodes);
            o->vars = o->vars_inline;
            o->nodes = o->nodes_inline;
            o->nvars = 0;
            return ORDO_ERR_NOMEM;
        }
    }
    o->nvars = n;
    for (int i = 0; i < n; i++) {
        o->vars[i] = uses[i].v;
        o->nodes[i].op_w = (uintptr_t)o | (uses[i].w ? 1u : 0u);
        o->nodes[i].next = NULL;
    }
    return ORDO_OK;
}

static void op_discard(ordo_engine *e, op *o) {
    if (op_owns_arrays(o)) {
        free(o->vars);
        free(o->nodes);
    }
    op_free(e, o);
}

/* ---- pools ----------------------------------------------------------------- */

static pool *lazy_pool(ordo_engine *e, _Atomic(pool *) *slot, enum pool_kind kind, ordo_ctx ctx, int nworkers) {
    pool *p = atomic_load_explicit(slot, memory_order_acquire);
    if (p) return p;
    pthread_mutex_lock(&e->pool_mu);
    p = atomic_load_explicit(slot, memory_order_relaxed);
    if (!p) {
        p = calloc(1, sizeof *p);
        if (p && pool_start(e, p, kind, ctx, nworkers) != ORDO_OK) {
            /* Keep the workers that did start: they drain nothing and exit at destroy. */
            if (p->nworkers == 0) {
                free(p->workers);
                free(p);
                p = NULL;
            }
        }
        if (p) atomic_store_explicit(slot, p, memory_order_release);
    }
    pthread_mutex_unlock(&e->pool_mu);
    return p;
}

int start_cpu_pool(ordo_engine *e, int dev_id) {
    return lazy_pool(e, &e->cpu_pools[dev_id], POOL_CPU, (ordo_ctx){ORDO_CPU, dev_id}, e->cfg.cpu_workers)
               ? ORDO_OK : ORDO_ERR_NOMEM;
}

/* The pool that runs ops of this context and property (NULL: naive). */
static pool *select_pool(ordo_engine *e, ordo_ctx ctx, int prop) {
    int base = prop & ~ORDO_PROP_NO_SKIP;
    bool copy = base == ORDO_PROP_COPY_FROM_GPU || base == ORDO_PROP_COPY_TO_GPU;
    switch (e->cfg.kind) {
    case ORDO_ENGINE_NAIVE:
        return NULL;
    case ORDO_ENGINE_POOLED:
        return copy ? e->shared_copy_pool : e->shared_pool;
    default:
        break;
    }
    if (base == ORDO_PROP_CPU_PRIORITIZED) return e->cpu_prio_pool;
    if (ctx.dev_type == ORDO_GPU) {
        int d = ctx.dev_id;
        if (copy) return lazy_pool(e, &e->gpu_copy_pools[d], POOL_GPU_COPY, ctx, e->cfg.gpu_copy_workers);
        if (base == ORDO_PROP_GPU_PRIORITIZED) return lazy_pool(e, &e->gpu_prio_pools[d], POOL_GPU_PRIORITY, ctx, 1);
        return lazy_pool(e, &e->gpu_pools[d], POOL_GPU, ctx, e->cfg.gpu_workers);
    }
    return lazy_pool(e, &e->cpu_pools[ctx.dev_id], POOL_CPU, (ordo_ctx){ORDO_CPU, ctx.dev_id}, e->cfg.cpu_workers);
}

/* ---- the push itself ------------------------------------------------------- */

/* True when o, ready at push, is better run by the pusher: its CPU pool has
 * a long queue of ready ops and none of higher priority.  Never from inside
 * an op (no nesting of ops on one stack). */
static bool pool_saturated(ordo_engine *e, const op *o) {
    pool *p = o->pool;
    return e->cfg.push_inline_after > 0 && o->priority == 0 && !tls_thread.in_op &&
           (p->kind == POOL_CPU || p->kind == POOL_SHARED) && o->ctx.dev_type != ORDO_GPU &&
           /* (in long: a threshold near INT_MAX times the workers overflowed an int) */
           atomic_load_explicit(&p->q.size, memory_order_relaxed) >= (long)e->cfg.push_inline_after * p->size &&
           atomic_load_explicit(&p->q.heap_size, memory_order_relaxed) == 0;
}

/* Blocks a pusher that is max_inflight ops ahead until the engine is back
 * at the low mark (rule 9).  Meanwhile, when pushes may run ops themselves
 * (push_inline_after), it runs ready priority-0 ops of the pool it pushes to
 * instead of sleeping: a pusher that far ahead has nothing better to do. */
static void backpressure(ordo_engine *e, pool *p) {
    bool may_help = e->cfg.push_inline_after > 0 && p && (p->kind == POOL_CPU || p->kind == POOL_SHARED);
    while (may_help && engine_pending(e) > e->low_mark) {
        op *o = queue_take_fifo(&p->q);
        if (!o) break;
        run_ready(e, o);
    }
    engine_wait_pending(e, e->low_mark);
}

#define PUSH_HELD_MAX 16
#define LOCK_SORT_MAX BULK_MAX_VARS /* a bulk's vars at most; more come from collect_vars, sorted */

/* Locks every var of a push, so that it is appended to all of them at once
 * (rule 8).  A thread that waits for a var lock waits holding none, or
 * holding only locks of lower address: two pushers on overlapping vars then
 * cannot each hold what the other waits for.  So the vars are first tried
 * in the order given, without waiting -- a thread that never waits while
 * holding a lock closes no cycle -- and only when one is busy are those
 * taken dropped and all taken in address order.  A general push's vars come
 * sorted (collect_vars); a bulk's do not, and the try spares it a sort of a
 * few dozen vars on every push, most of its hand-over. */
static void lock_vars(ordo_var *const *vars, int n) {
    int i = 0;
    while (i < n && spin_lock_try(&vars[i]->lock)) i++;
    if (i == n) return;
    while (i > 0) spin_lock_release(&vars[--i]->lock);
    if (n > LOCK_SORT_MAX) {
        for (i = 0; i < n; i++) spin_lock_acquire(&vars[i]->lock);
        return;
    }
    ordo_var *order[LOCK_SORT_MAX];
    for (i = 0; i < n; i++) { /* insertion sort: rarely here, and at most a bulk's vars */
        ordo_var *v = vars[i];
        int j = i - 1;
        while (j >= 0 && order[j] > v) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    for (i = 0; i < n; i++) spin_lock_acquire(&order[i]->lock);
}

/* Appends o's nodes to its vars, atomically over all of them, and runs or
 * queues o if it is ready at once.  On error nothing was appended. */
int push_prepared(ordo_engine *e, op *o, const char *fn) {
    bool internal = (o->flags & OP_WAIT) != 0;
    if (!internal && e->cfg.kind != ORDO_ENGINE_NAIVE && !tls_thread.in_op && !tls_worker) {
        /* Backpressure (rule 9).  The exact count reads every worker's
         * counter, so it is only taken when the cheap bound says we may be
         * at the limit.  Ops pushed from inside ops never block: the op they
         * run in may be what the engine needs to catch up. */
        long pushed = atomic_load_explicit(&e->pushed, memory_order_relaxed);
        if (pushed - atomic_load_explicit(&e->retired_seen, memory_order_relaxed) >= e->cfg.max_inflight) {
            long pending = engine_pending(e);
            atomic_store_explicit(&e->retired_seen, pushed - pending, memory_order_relaxed);
            if (pending >= e->cfg.max_inflight) backpressure(e, o->pool);
        }
    }

    int n = o->nvars;
    if (tls_thread.run_now_held && run_now_holds_any(o->vars, n))
        return set_error(ORDO_ERR_DEADLOCK,
                         "%s: pushed from inside a kernel run at its push, onto a variable that kernel uses: "
                         "it would deadlock", fn);
    lock_vars(o->vars, n);
    for (int i = 0; i < n; i++) {
        ordo_var *v = o->vars[i];
        if (v->deleted || !var_is_live(v)) {
            for (int j = n - 1; j >= 0; j--) spin_lock_release(&o->vars[j]->lock);
            return deleted_error(fn, v);
        }
    }
    /* Before the op can be granted: failures reported from now on still
     * skip it (failure_meets).  This thread's own earlier reports are
     * seen: the report's epoch was taken by this thread. */
    o->epoch = atomic_load_explicit(&e->report_epoch, memory_order_relaxed);
    /* seq only orders equal priorities in the heap; FIFO ops need none. */
    if (o->priority != 0) o->seq = atomic_fetch_add_explicit(&e->seq, 1, memory_order_relaxed);
    atomic_fetch_add(&e->pushed, op_weight(o));
    int granted = 0;
    for (int i = 0; i < n; i++) {
        if (var_append(o->vars[i], &o->nodes[i])) granted++;
        if (o->flags & OP_DELETE) o->vars[i]->deleted = true;
    }
    bool ready;
    if (n <= PUSH_HELD_MAX) {
        /* Every var of o is still locked, so no other thread can grant a
         * node of o yet: the count of grants o waits for is exact now, and
         * the unlocks below (release) publish it to whoever grants next.
         * Once the first lock is dropped, o may be granted, run and freed
         * by another thread, so the unlocks use a copy of its var list. */
        ordo_var *held[PUSH_HELD_MAX];
        for (int i = 0; i < n; i++) held[i] = o->vars[i];
        atomic_store_explicit(&o->wait, n - granted, memory_order_relaxed);
        for (int i = n - 1; i >= 0; i--) spin_lock_release(&held[i]->lock);
        ready = granted == n;
    } else {
        /* Too many vars to copy: the +1 keeps o alive and undispatched
         * until we are done with it. */
        atomic_store_explicit(&o->wait, n - granted + 1, memory_order_relaxed);
        for (int i = n - 1; i >= 0; i--) spin_lock_release(&o->vars[i]->lock);
        ready = atomic_fetch_sub_explicit(&o->wait, 1, memory_order_acq_rel) == 1;
    }

    if (ready) {
        if (atomic_load_explicit(&e->profiling, memory_order_relaxed)) o->t_ready = now_ns();
        if ((o->flags & OP_RUN_HERE) || e->cfg.kind == ORDO_ENGINE_NAIVE || pool_saturated(e, o))
            run_ready(e, o);
        else
            queue_push(&o->pool->q, o);
    }
    return ORDO_OK;
}

op *op_new(ordo_engine *e, int flags, int prop, int priority, ordo_ctx ctx, const char *name) {
    op *o = op_alloc(e);
    if (!o) return NULL;
    o->next = NULL;
    o->engine = e;
    o->flags = flags;
    o->prop = prop;
    o->priority = priority;
    o->ctx = ctx;
    o->pool = NULL;
    o->fn.sync = NULL;
    o->param = NULL;
    o->param_free = NULL;
    o->opr = NULL;
    o->fail = NULL;
    o->nvars = 0;
    o->vars = o->vars_inline;
    o->nodes = o->nodes_inline;
    o->t_ready = o->t_start = 0;
    o->stream = NULL;
    o->prof_gpu = NULL;
    o->settle = NULL;
    o->gpu_check = NULL;
    o->gpu_check_arg = NULL;
    o->gpu_check_ev = NULL;
    o->name = name;
    if ((prop & ~ORDO_PROP_NO_SKIP) == ORDO_PROP_ASYNC) o->flags |= OP_RUN_HERE;
    return o;
}

void op_settle_signal(op_settle *s) {
    pthread_mutex_lock(&s->mu);
    atomic_store_explicit(&s->done, 1, memory_order_release);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* s lives on the pusher's stack: not touched after this point. */
}

/* push_prepared, and on the naive engine the wait for the op itself: a
 * naive push returns once its op has run, async ones too.  For its own op
 * only -- waiting until the whole engine had nothing pending hung a
 * thread that pushes anything before it calls ordo_done_complete for an
 * async op another push waits for.  Not from inside an op or on a worker:
 * the op may be queued behind the very op that thread runs. */
static int push_settled(ordo_engine *e, op *o, const char *fn) {
    if (e->cfg.kind != ORDO_ENGINE_NAIVE || tls_thread.in_op || tls_worker) return push_prepared(e, o, fn);
    op_settle s;
    atomic_init(&s.done, 0);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    o->settle = &s;
    int rc = push_prepared(e, o, fn);
    if (rc == ORDO_OK) { /* o may be freed already: only s from here on */
        pthread_mutex_lock(&s.mu);
        while (!atomic_load_explicit(&s.done, memory_order_acquire)) pthread_cond_wait(&s.cv, &s.mu);
        pthread_mutex_unlock(&s.mu);
    } else {
        o->settle = NULL; /* not pushed: the caller discards it */
    }
    pthread_mutex_destroy(&s.mu);
    pthread_cond_destroy(&s.cv);
    return rc;
}

int push_uses(ordo_engine *e, int flags, ordo_sync_fn sfn, ordo_async_fn afn, void *param,
              void (*param_free)(void *), ordo_ctx ctx, const var_use *uses, int n, int prop, int priority,
              const char *name, const char *fname, ordo_var **lent_vars, dep_node *lent_nodes) {
    op *o = op_new(e, (sfn ? OP_SYNC : 0) | flags, prop, priority, ctx, name);
    if (!o || op_set_vars(o, uses, n, lent_vars, lent_nodes) != ORDO_OK) {
        if (o) op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "%s: out of memory", fname);
    }
    if (sfn) o->fn.sync = sfn;
    else o->fn.async = afn;
    o->param = param;
    o->param_free = param_free;
    o->pool = select_pool(e, ctx, prop);
    if (!o->pool && e->cfg.kind != ORDO_ENGINE_NAIVE) {
        op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "%s: cannot start workers for the device", fname);
    }
    int rc = push_settled(e, o, fname);
    if (rc != ORDO_OK) op_discard(e, o);
    return rc;
}

/* A checked push from here on: uses distinct (and sorted, but for a bulk's),
 * every var live.
 * iname: the name, already interned (or as long-lived), or NULL to intern
 * name. */
static int push_checked(ordo_engine *e, const char *fname, ordo_sync_fn sfn, ordo_async_fn afn, void *param,
                        void (*param_free)(void *), ordo_ctx ctx, const var_use *uses, int n, int prop,
                        int priority, const char *name, const char *iname) {
    bool bulk = engine_bulkable(e, sfn, ctx, prop, priority);
    prop &= ~ORDO_PROP_BULK;
    if (!iname) iname = engine_intern(e, name);
    if (bulk && bulk_append(e, sfn, param, param_free, ctx, uses, n, prop, iname)) return ORDO_OK;
    bulk_flush_mine(); /* this thread's earlier ops go first (rule 1) */
    return push_uses(e, bulk ? bulk_alone_flags(e) : 0, sfn, afn, param, param_free, ctx, uses, n, prop, priority,
                     iname, fname, NULL, NULL);
}

static int push_fn(ordo_engine *e, const char *fname, ordo_sync_fn sfn, ordo_async_fn afn, void *param,
                   void (*param_free)(void *), ordo_ctx ctx, ordo_var *const *reads, int nreads,
                   ordo_var *const *writes, int nwrites, int prop, int priority, const char *name) {
    int rc;
    if (!e) return set_error(ORDO_ERR_INVALID, "%s: engine is NULL", fname);
    if (!sfn && !afn) return set_error(ORDO_ERR_INVALID, "%s: function is NULL", fname);
    if ((rc = check_ctx(fname, ctx)) || (rc = check_op(e, fname, prop, reads, nreads, writes, nwrites))) return rc;

    var_use stack_uses[16];
    int total = nreads + nwrites;
    var_use *uses = total <= 16 ? stack_uses : malloc((size_t)total * sizeof *uses);
    if (!uses) return set_error(ORDO_ERR_NOMEM, "%s: out of memory", fname);
    int n = collect_vars(reads, nreads, writes, nwrites, uses);
    rc = push_checked(e, fname, sfn, afn, param, param_free, ctx, uses, n, prop, priority, name, NULL);
    if (uses != stack_uses) free(uses);
    return rc;
}

int engine_push_trusted_alone(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                              ordo_ctx ctx, const var_use *uses, int n, int prop, const char *name,
                              bool short_name) {
    return push_checked(e, "ordo_push_sync", fn, NULL, param, param_free, ctx, uses, n, prop, 0, name,
                        short_name ? name : NULL);
}

/* The whole push of a small bulked op from a bulking thread -- most of the
 * pushes such a thread makes -- in one frame: the checks push_fn would make,
 * the var set and the append.  False for any other push and for anything
 * wrong; the general path then takes the push and names the error. */
#if defined(__GNUC__)
__attribute__((always_inline)) /* into ordo_push_sync: a frame of 11 arguments saved per push */
#endif
static inline bool push_sync_bulked(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                             ordo_ctx ctx, ordo_var *const *reads, int nreads, ordo_var *const *writes,
                             int nwrites, int prop, const char *name) {
    if (tls_bulk_size <= 0) return false; /* asked before the work below, which bulk_append would waste */
    if ((unsigned)nreads > 16 || (unsigned)nwrites > 16u - (unsigned)nreads) return false;
    if ((nreads && !reads) || (nwrites && !writes)) return false;
    if (!engine_bulkable(e, fn, ctx, prop, 0) || (unsigned)ctx.dev_id >= ORDO_MAX_DEVICES) return false;
    for (int i = 0; i < nreads; i++)
        if (!reads[i] || !var_is_live(reads[i]) || !var_of(e, reads[i])) return false;
    for (int i = 0; i < nwrites; i++)
        if (!writes[i] || !var_is_live(writes[i]) || !var_of(e, writes[i])) return false;
    const char *iname = engine_intern(e, name); /* one call site: gcc inlines it */
    /* Two vars or more: the bulk's table finds repeats, no sort needed.
     * One or none: nothing to sort, and bulk_append's test for a repeat of
     * the previous op's uses is the shortest path. */
    if (nreads + nwrites > 1) {
        const bulk_rw rw = {reads, writes, nreads, nwrites};
        return bulk_append_rw(e, fn, param, param_free, ctx, &rw, prop & ~ORDO_PROP_BULK, iname);
    }
    const var_use use = nreads ? (var_use){reads[0], false} : nwrites ? (var_use){writes[0], true} : (var_use){0};
    return bulk_append(e, fn, param, param_free, ctx, &use, nreads + nwrites, prop & ~ORDO_PROP_BULK, iname);
}

int ordo_push_sync(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                   ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites, int prop,
                   int priority, const char *name) {
    if (e && fn && priority == 0 && (prop & ORDO_PROP_BULK) &&
        push_sync_bulked(e, fn, param, param_free, ctx, reads, nreads, writes, nwrites, prop, name))
        return ORDO_OK;
    if (e && !fn) return set_error(ORDO_ERR_INVALID, "ordo_push_sync: function is NULL");
    return push_fn(e, "ordo_push_sync", fn, NULL, param, param_free, ctx, reads, nreads, writes, nwrites, prop,
                   priority, name);
}

int ordo_push_async(ordo_engine *e, ordo_async_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                    ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites, int prop,
                    int priority, const char *name) {
    if (e && !fn) return set_error(ORDO_ERR_INVALID, "ordo_push_async: function is NULL");
    return push_fn(e, "ordo_push_async", NULL, fn, param, param_free, ctx, reads, nreads, writes, nwrites, prop,
                   priority, name);
}

/* ---- reusable operators ------------------------------------------------------ */

/* An operator's block: a freed one of e's (struct ordo_opr's magic) or a
 * new one, zeroed. */
static ordo_opr *opr_block(ordo_engine *e) {
    spin_lock_acquire(&e->mem_mu);
    ordo_opr *r = e->opr_dead;
    if (r) e->opr_dead = r->next;
    spin_lock_release(&e->mem_mu);
    if (!r) return calloc(1, sizeof *r);
    memset(r, 0, sizeof *r); /* OPR_DEAD -> 0: unused until ordo_new_operator marks it live */
    return r;
}

/* Gives r's block back to e, marked dead: a stale handle to it is refused. */
static void opr_block_put(ordo_engine *e, ordo_opr *r) {
    spin_lock_acquire(&e->mem_mu);
    atomic_store_explicit(&r->magic, OPR_DEAD, memory_order_relaxed);
    r->prev = NULL;
    r->next = e->opr_dead;
    e->opr_dead = r;
    spin_lock_release(&e->mem_mu);
}

static const char *opr_name(const ordo_opr *r) { return r->name && r->name[0] ? r->name : "(unnamed)"; }

ordo_opr *ordo_new_operator(ordo_engine *e, ordo_async_fn fn, void *param, void (*param_free)(void *),
                            ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites, int prop,
                            const char *name) {
    const char *fname = "ordo_new_operator";
    if (!e) { set_error(ORDO_ERR_INVALID, "%s: engine is NULL", fname); return NULL; }
    if (!fn) { set_error(ORDO_ERR_INVALID, "%s: function is NULL", fname); return NULL; }
    if (check_op(e, fname, prop, reads, nreads, writes, nwrites)) return NULL;
    /* A var whose delete is pushed but has not run yet: every push of the
     * operator would fail (push_prepared), so it is refused now, as the
     * naive engine, whose delete has already run, refuses it. */
    for (int k = 0; k < 2; k++) {
        ordo_var *const *vars = k ? writes : reads;
        for (int i = 0, n = k ? nwrites : nreads; i < n; i++) {
            /* A var whose lock this thread holds for a kernel run at its
             * push is idle, so not deleted; taking the lock would hang. */
            if (tls_thread.run_now_held && run_now_holds_any(&vars[i], 1)) continue;
            spin_lock_acquire(&vars[i]->lock); /* deleted is written under it */
            bool deleted = vars[i]->deleted;
            spin_lock_release(&vars[i]->lock);
            if (deleted) {
                deleted_error(fname, vars[i]);
                return NULL;
            }
        }
    }
    prop &= ~ORDO_PROP_BULK; /* operators run async functions: never bulked */
    ordo_opr *r = opr_block(e);
    var_use *uses = malloc((size_t)(nreads + nwrites + 1) * sizeof *uses);
    if (!r || !uses) {
        if (r) opr_block_put(e, r);
        free(uses);
        set_error(ORDO_ERR_NOMEM, "%s: out of memory", fname);
        return NULL;
    }
    int n = collect_vars(reads, nreads, writes, nwrites, uses);
    r->vars = malloc((size_t)(n + 1) * sizeof *r->vars);
    r->gens = malloc((size_t)(n + 1) * sizeof *r->gens);
    r->is_write = malloc((size_t)(n + 1) * sizeof *r->is_write);
    if (!r->vars || !r->gens || !r->is_write) {
        free(r->vars);
        free(r->gens);
        free(r->is_write);
        opr_block_put(e, r);
        free(uses);
        set_error(ORDO_ERR_NOMEM, "%s: out of memory", fname);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        r->vars[i] = uses[i].v;
        r->gens[i] = atomic_load_explicit(&uses[i].v->gen, memory_order_relaxed);
        r->is_write[i] = uses[i].w;
    }
    free(uses);
    r->engine = e;
    r->fn = fn;
    r->param = param;
    r->param_free = param_free;
    r->prop = prop;
    r->nvars = n;
    atomic_init(&r->refs, 1);
    r->name = engine_intern(e, name);
    spin_lock_acquire(&e->mem_mu);
    atomic_store_explicit(&r->magic, OPR_LIVE, memory_order_relaxed);
    r->prev = NULL;
    r->next = e->oprs;
    if (e->oprs) e->oprs->prev = r;
    e->oprs = r;
    spin_lock_release(&e->mem_mu);
    return r;
}

int ordo_push(ordo_engine *e, ordo_opr *r, ordo_ctx ctx, int priority) {
    int rc;
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_push: engine is NULL");
    if (!r) return set_error(ORDO_ERR_INVALID, "ordo_push: operator is NULL");
    if (atomic_load_explicit(&r->magic, memory_order_relaxed) != OPR_LIVE ||
        atomic_load_explicit(&r->deleted, memory_order_relaxed))
        return set_error(ORDO_ERR_DELETED, "ordo_push: operator %p was deleted (ordo_delete_operator)", (void *)r);
    if (r->engine != e) return set_error(ORDO_ERR_INVALID, "ordo_push: operator belongs to another engine");
    if ((rc = check_ctx("ordo_push", ctx))) return rc;
    /* A var deleted since: freed (its delete has run), or its block now a
     * new var's -- which push_prepared, checking the block, would take. */
    for (int i = 0; i < r->nvars; i++) {
        ordo_var *v = r->vars[i];
        if (!var_is_live(v) || atomic_load_explicit(&v->gen, memory_order_relaxed) != r->gens[i])
            return set_error(ORDO_ERR_DELETED, "ordo_push: operator '%s': its variable %p was deleted (rule 6)",
                             opr_name(r), (void *)v);
    }
    bulk_flush_mine();
    op *o = op_new(e, 0, r->prop, priority, ctx, r->name);
    var_use stack_uses[16];
    var_use *uses = r->nvars <= 16 ? stack_uses : malloc((size_t)r->nvars * sizeof *uses);
    if (!o || !uses) {
        if (o) op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "ordo_push: out of memory");
    }
    for (int i = 0; i < r->nvars; i++) uses[i] = (var_use){r->vars[i], r->is_write[i]};
    rc = op_set_vars(o, uses, r->nvars, NULL, NULL);
    if (uses != stack_uses) free(uses);
    if (rc != ORDO_OK) {
        op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "ordo_push: out of memory");
    }
    o->fn.async = r->fn;
    o->param = r->param;
    o->opr = r;
    o->pool = select_pool(e, ctx, r->prop);
    if (!o->pool && e->cfg.kind != ORDO_ENGINE_NAIVE) {
        op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "ordo_push: cannot start workers for the device");
    }
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    if ((rc = push_settled(e, o, "ordo_push")) != ORDO_OK) {
        atomic_fetch_sub_explicit(&r->refs, 1, memory_order_relaxed);
        op_discard(e, o);
        return rc;
    }
    return ORDO_OK;
}

/* Everything r holds; its block is the caller's. */
static void opr_release(ordo_opr *r) {
    if (r->param_free) r->param_free(r->param);
    free(r->vars);
    free(r->gens);
    free(r->is_write);
}

void opr_unref(ordo_opr *r) {
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1) return;
    ordo_engine *e = r->engine;
    spin_lock_acquire(&e->mem_mu);
    if (r->prev) r->prev->next = r->next;
    else e->oprs = r->next;
    if (r->next) r->next->prev = r->prev;
    spin_lock_release(&e->mem_mu);
    opr_release(r);
    opr_block_put(e, r);
}

void ordo_delete_operator(ordo_engine *e, ordo_opr *r) {
    const char *fname = "ordo_delete_operator";
    if (!e) {
        set_error(ORDO_ERR_INVALID, "%s: engine is NULL", fname);
        return;
    }
    if (!r) {
        set_error(ORDO_ERR_INVALID, "%s: operator is NULL", fname);
        return;
    }
    /* A second delete: refused, not a second drop of the handle's
     * reference (which would free the operator under its pushed runs). */
    if (atomic_load_explicit(&r->magic, memory_order_relaxed) != OPR_LIVE ||
        atomic_load_explicit(&r->deleted, memory_order_relaxed)) {
        set_error(ORDO_ERR_DELETED, "%s: operator %p was already deleted", fname, (void *)r);
        return;
    }
    if (r->engine != e) {
        set_error(ORDO_ERR_INVALID, "%s: operator '%s' belongs to another engine", fname, opr_name(r));
        return;
    }
    if (atomic_exchange_explicit(&r->deleted, true, memory_order_acq_rel)) { /* two threads at once */
        set_error(ORDO_ERR_DELETED, "%s: operator %p was already deleted", fname, (void *)r);
        return;
    }
    opr_unref(r);
}

void engine_free_operators(ordo_engine *e) {
    for (ordo_opr *r = e->oprs, *next; r; r = next) {
        next = r->next;
        opr_release(r);
        free(r);
    }
    e->oprs = NULL;
    for (ordo_opr *r = e->opr_dead, *next; r; r = next) {
        next = r->next;
        free(r);
    }
    e->opr_dead = NULL;
}

/* ---- variables --------------------------------------------------------------- */

ordo_var *ordo_new_variable(ordo_engine *e) {
    if (!e) {
        set_error(ORDO_ERR_INVALID, "ordo_new_variable: engine is NULL");
        return NULL;
    }
    ordo_var *v = var_alloc(e);
    if (!v) set_error(ORDO_ERR_NOMEM, "ordo_new_variable: out of memory");
    return v;
}

bool engine_delete_idle(ordo_engine *e, ordo_var *v) {
    if (!e || !v || !var_is_live(v) || !var_of(e, v) || atomic_load_explicit(&e->profiling, memory_order_relaxed) ||
        atomic_load_explicit(&v->device_state, memory_order_acquire) || bulk_has_var(v) ||
        (tls_thread.run_now_held && run_now_holds_any(&v, 1))) /* its lock is this thread's */
        return false;
    spin_lock_acquire(&v->lock);
    bool idle = !v->deleted && !v->head && !v->writer_active && v->nreaders == 0;
    if (idle) v->deleted = true; /* from here on, pushes on v fail (rule 6) */
    spin_lock_release(&v->lock);
    if (idle) var_free(e, v);
    return idle;
}

int ordo_delete_variable(ordo_engine *e, ordo_sync_fn fn, void *param, ordo_ctx ctx, ordo_var *v) {
    const char *fname = "ordo_delete_variable";
    int rc;
    if (!e) return set_error(ORDO_ERR_INVALID, "%s: engine is NULL", fname);
    if (!v) return set_error(ORDO_ERR_INVALID, "%s: variable is NULL", fname);
    if (!var_is_live(v)) return set_error(ORDO_ERR_DELETED, "%s: variable %p was already deleted", fname, (void *)v);
    if (!var_of(e, v)) return set_error(ORDO_ERR_INVALID, "%s: variable belongs to another engine", fname);
    if ((rc = check_ctx(fname, ctx))) return rc;
    bulk_flush_mine(); /* the bulk may still use v */
    op *o = op_new(e, OP_SYNC | OP_DELETE, ORDO_PROP_DELETE_VAR, 0, ctx, engine_intern(e, "delete_variable"));
    var_use use = {v, true};
    if (!o || op_set_vars(o, &use, 1, NULL, NULL) != ORDO_OK) {
        if (o) op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "%s: out of memory", fname);
    }
    o->fn.sync = fn;
    o->param = param;
    o->pool = select_pool(e, ctx, ORDO_PROP_NORMAL);
    if (!o->pool && e->cfg.kind != ORDO_ENGINE_NAIVE) {
        op_discard(e, o);
        return set_error(ORDO_ERR_NOMEM, "%s: cannot start workers for the device", fname);
    }
    if ((rc = push_settled(e, o, fname)) != ORDO_OK) {
        op_discard(e, o);
        return rc == ORDO_ERR_DELETED ? set_error(rc, "%s: variable %p was already deleted", fname, (void *)v) : rc;
    }
    return ORDO_OK;
}
