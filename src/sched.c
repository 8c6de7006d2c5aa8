/*
 * sched.c - ready queues, worker pools, and running ops.
 *
 * Ready ops wait in the ready queue of their pool.  A queue keeps priority-0
 * ops in a FIFO (the common case, O(1)) and all other priorities in a heap;
 * it pops positive priorities first, then the FIFO, then negative ones, so
 * the order is exactly "higher priority first, push order among equals"
 * (rule 10) while the common case never pays for a heap.
 *
 * A worker that completes an op often makes the next op of a chain ready;
 * it runs that op itself instead of queueing it (no hand-off, no wake-up),
 * a bounded number of times in a row so the queue is not starved.
 */
#include "internal.h"
#include "dev_event.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define INLINE_STREAK_MAX 64
#define POP_BATCH_MAX 16

ORDO_HIDDEN _Thread_local worker *tls_worker;
ORDO_HIDDEN _Thread_local thread_ops tls_thread;
/* The async op whose function this thread is running, and where ops it
 * makes ready go when it completes before its function returns. */
static _Thread_local op *tls_exec_op;
static _Thread_local ready_list *tls_exec_rl;

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- ready queue ---------------------------------------------------- */

static bool heap_before(const op *a, const op *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->seq < b->seq);
}

static void heap_push(ready_queue *q, op *o) {
    if (q->heap_n == q->heap_cap) {
        int cap = q->heap_cap ? q->heap_cap * 2 : 64;
        op **h = realloc(q->heap, (size_t)cap * sizeof *h);
        if (!h) abort(); /* a ready op cannot be dropped: no way to recover */
        q->heap = h;
        q->heap_cap = cap;
    }
    int i = q->heap_n++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!heap_before(o, q->heap[parent])) break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = o;
}

static op *heap_pop(ready_queue *q) {
    op *top = q->heap[0];
    op *last = q->heap[--q->heap_n];
    int i = 0, n = q->heap_n;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(q->heap[c + 1], q->heap[c])) c++;
        if (!heap_before(q->heap[c], last)) break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (n > 0) q->heap[i] = last;
    return top;
}

static void queue_init(ready_queue *q) {
    memset(q, 0, sizeof *q);
    atomic_init(&q->lock.v, 0);
    pthread_mutex_init(&q->sleep_mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    atomic_init(&q->size, 0);
    atomic_init(&q->heap_size, 0);
    atomic_init(&q->spinners, 0);
    atomic_init(&q->sleepers, 0);
    atomic_init(&q->stop, false);
}

static void queue_fini(ready_queue *q) {
    free(q->heap);
    pthread_mutex_destroy(&q->sleep_mu);
    pthread_cond_destroy(&q->cv);
}

/* The queue itself takes a spin lock, held for a few pointer moves: a mutex
 * here turned every collision between the pusher and a worker into futex
 * system calls.  The mutex and condition variable are only for workers that
 * found nothing and go to sleep. */
static void wake_one(ready_queue *q) {
    pthread_mutex_lock(&q->sleep_mu);
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->sleep_mu);
}

void queue_push(ready_queue *q, op *o) {
    spin_lock_acquire(&q->lock);
    if (o->priority == 0) {
        o->next = NULL;
        if (q->fifo_tail) q->fifo_tail->next = o;
        else q->fifo_head = o;
        q->fifo_tail = o;
    } else {
        heap_push(q, o);
        atomic_store_explicit(&q->heap_size, q->heap_n, memory_order_relaxed);
    }
    atomic_fetch_add(&q->size, 1);
    spin_lock_release(&q->lock);
    /* Pairs with the sleeper's sleepers++ then size check (both seq_cst):
     * either it sees this op, or we see it and wake it.  Not while a worker
     * spins on this queue: it will take the op, and a wake-up (a futex call
     * here, a worker that finds nothing there) would be paid per push.  A
     * spinner always looks at the queue under its lock after leaving the
     * count (queue_pop), and our op is in it before we read the count, so
     * the op cannot be left behind; and a worker that leaves ops in the
     * queue after taking its share wakes a sleeper for them (queue_pop), so
     * the ops a spinner did not take still get a worker of their own. */
    if (atomic_load(&q->sleepers) > 0 && atomic_load(&q->spinners) == 0) wake_one(q);
}

/* One priority-0 op, or NULL when there is none or a prioritised op waits
 * (it must run first: rule 10). */
op *queue_take_fifo(ready_queue *q) {
    if (atomic_load_explicit(&q->size, memory_order_relaxed) == 0) return NULL;
    op *o = NULL;
    spin_lock_acquire(&q->lock);
    if (q->heap_n == 0 && q->fifo_head) {
        o = q->fifo_head;
        q->fifo_head = o->next;
        if (!q->fifo_head) q->fifo_tail = NULL;
        atomic_fetch_sub(&q->size, 1);
    }
    spin_lock_release(&q->lock);
    return o;
}

static op *queue_take_locked(ready_queue *q) {
    op *o;
    if (q->heap_n > 0 && (q->heap[0]->priority > 0 || !q->fifo_head)) {
        o = heap_pop(q);
        atomic_store_explicit(&q->heap_size, q->heap_n, memory_order_relaxed);
    } else if (q->fifo_head) {
        o = q->fifo_head;
        q->fifo_head = o->next;
        if (!q->fifo_head) q->fifo_tail = NULL;
    } else {
        return NULL;
    }
    atomic_fetch_sub_explicit(&q->size, 1, memory_order_relaxed);
    return o;
}

/* Takes up to max priority-0 ops from the FIFO in one go, or one op from the
 * heap.  Batches keep a busy worker from taking the queue lock per op; the
 * batch is at most its share of the FIFO, so other workers still get work. */
static int queue_take_batch_locked(ready_queue *q, op **out, int max, int nworkers) {
    int fifo_n = atomic_load_explicit(&q->size, memory_order_relaxed) - q->heap_n;
    if (q->heap_n > 0 || fifo_n <= 1) {
        op *o = queue_take_locked(q);
        if (!o) return 0;
        out[0] = o;
        return 1;
    }
    int k = fifo_n / nworkers;
    if (k > max) k = max;
    if (k < 1) k = 1;
    for (int i = 0; i < k; i++) {
        op *o = q->fifo_head;
        q->fifo_head = o->next;
        out[i] = o;
    }
    if (!q->fifo_head) q->fifo_tail = NULL;
    atomic_fetch_sub_explicit(&q->size, k, memory_order_relaxed);
    return k;
}

/* Blocks until ops are ready (returns how many are in out) or the queue is
 * stopped and empty (0).  Spins for spin_ns first: going to sleep and being
 * woken costs microseconds, far more than the gap between two ops in a busy
 * stream. */
static int queue_pop(ready_queue *q, uint64_t spin_ns, op **out, int max, int nworkers) {
    /* One spinner per queue is enough to catch the next op; more would only
     * take the cores from the threads that push and run. */
    if (spin_ns && atomic_load_explicit(&q->size, memory_order_acquire) == 0) {
        if (atomic_fetch_add(&q->spinners, 1) == 0) {
            uint64_t until = now_ns() + spin_ns;
            /* (stop: destroy must not wait out a long spin_us) */
            for (int i = 0; atomic_load_explicit(&q->size, memory_order_acquire) == 0 && !help_open(q) &&
                            !atomic_load_explicit(&q->stop, memory_order_relaxed);
                 i++) {
                if ((i & 63) == 63) {
                    if (now_ns() > until) break;
                    sched_yield(); /* 2 cores, 3+ threads: let the pusher run */
                } else {
                    cpu_relax();
                }
            }
        }
        atomic_fetch_sub(&q->spinners, 1);
    }
    for (;;) {
        if (help_open(q)) help_run(q); /* an idle worker: chunks of a large op first */
        spin_lock_acquire(&q->lock);
        int n = queue_take_batch_locked(q, out, max, nworkers);
        spin_lock_release(&q->lock);
        if (n) {
            /* Work left that a push did not wake anyone for (a spinner was
             * counted then): a sleeper takes it beside us. */
            if (atomic_load(&q->size) > 0 && atomic_load(&q->sleepers) > 0) wake_one(q);
            return n;
        }
        if (help_open(q)) { /* its last chunks are running: the owner closes it soon */
            sched_yield();
            continue;
        }
        pthread_mutex_lock(&q->sleep_mu);
        atomic_fetch_add(&q->sleepers, 1);
        while (atomic_load(&q->size) == 0 && !atomic_load(&q->stop) && !help_open(q))
            pthread_cond_wait(&q->cv, &q->sleep_mu);
        atomic_fetch_sub(&q->sleepers, 1);
        pthread_mutex_unlock(&q->sleep_mu);
        if (atomic_load(&q->size) == 0 && atomic_load(&q->stop) && !help_open(q)) return 0;
    }
}

/* ---- running ops ------------------------------------------------------ */

/* The stream a GPU op queues its work on: the worker's own (created on
 * its first GPU op), or for the naive engine, which runs ops in the pushing
 * thread, one stream per device shared by every pusher.  NULL with err
 * filled when the backend cannot make one. */
static void *stream_for(ordo_engine *e, worker *w, ordo_ctx ctx, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    if (ctx.dev_type != ORDO_GPU) return NULL;
    if (!b) {
        snprintf(err, errlen, "gpu(%d): no CUDA device available", ctx.dev_id);
        return NULL;
    }
    void **slot = w ? &w->streams[ctx.dev_id] : &e->naive_streams[ctx.dev_id];
    if (!w) pthread_mutex_lock(&e->pool_mu);
    if (!*slot && b->stream_create(ctx.dev_id, slot, err, errlen) == 0)
        atomic_fetch_or(&e->gpu_used, (uint64_t)1 << ctx.dev_id);
    void *stream = *slot;
    if (!w) pthread_mutex_unlock(&e->pool_mu);
    return stream;
}

/* After a GPU op's function: launch errors fail it, and its vars get the
 * event that marks the end of its work (var_events.c).  The naive engine
 * then waits for that event at once, so a GPU failure shows at its op. */
static void gpu_op_done(ordo_engine *e, op *o) {
    const device_backend *b = ordo_device_backend();
    char err[256];
    if (!o->fail && b->op_check(o->ctx.dev_id, o->stream, err, sizeof err)) o->fail = failure_new("%s", err);
    if (o->prof_gpu) prof_gpu_end(e, o); /* after op_check: a timing call never fails the op */
    if (o->flags & OP_DELETE) return; /* its var goes away now */
    struct dev_event *ev = NULL;
    bool naive = e->cfg.kind == ORDO_ENGINE_NAIVE;
    if (var_events_after(o, o->ctx.dev_id, o->stream, naive || o->gpu_check ? &ev : NULL, err, sizeof err)) {
        if (!o->fail) o->fail = failure_new("%s", err);
        return;
    }
    if (ev) {
        if (naive && dev_event_sync(ev, err, sizeof err) && !o->fail) o->fail = failure_new("%s", err);
        if (o->gpu_check) o->gpu_check_ev = ev; /* what its check waits for (gpu_check.c) */
        else dev_event_unref(ev);
    }
}

/* The failure carried by the op's vars that nobody has reported yet (a
 * wait: what it reports; a data wait also a void var's), or that was not
 * reported before the op was pushed, or that voids a var the op only
 * reads (any other op: what skips it, failure_meets, var_void).  Of two,
 * the one of the var of lower address, whatever the order of the op's
 * vars (a bulk picks the same, bulk.c). */
static failure *inherited_failure(const op *o) {
    const bool wait = (o->flags & OP_WAIT) != 0, data = (o->flags & OP_WAIT_DATA) != 0;
    failure *found = NULL;
    const ordo_var *at = NULL;
    for (int i = 0; i < o->nvars; i++) {
        const ordo_var *v = o->vars[i];
        failure *f = v->fail;
        if (!f || (found && v > at)) continue;
        const bool meets = wait ? !failure_reported(f) || (data && !v->made)
                                : failure_meets(f, o->epoch) || (var_void(v) && !node_is_write(&o->nodes[i]));
        if (meets) {
            found = f;
            at = v;
        }
    }
    return found;
}

/* Everything after an op's function: spread its failure to what it wrote,
 * release its vars, free it.  Ops made ready are added to rl. */
static void finish_op(ordo_engine *e, worker *w, op *o, ready_list *rl, bool fresh_failure) {
    const long weight = op_weight(o); /* before its param (a bulk) goes */
    op_settle *const settle = o->settle;
    failure *f = o->fail;
    if (f && fresh_failure) {
        /* Name the op in the message, once, where the failure starts
         * (kernels often name themselves already). */
        o->fail = f = failure_named(f, o->name);
        engine_record_failure(e, f);
    }
    if (atomic_load_explicit(&e->profiling, memory_order_relaxed) && !(o->flags & OP_WAIT))
        prof_record(e, w, o, now_ns(), f ? (fresh_failure ? 2 : 1) : 0);
    else if (o->prof_gpu) /* profiling stopped while it ran */
        prof_gpu_drop(e, o);

    for (int i = 0; i < o->nvars; i++) {
        ordo_var *v = o->vars[i];
        bool is_write = node_is_write(&o->nodes[i]);
        if (is_write && !(o->flags & OP_NO_VERSION)) {
            /* A bulk's ops each leave their own failure (or none) on what
             * they wrote, and each write counts (bulk.c). */
            failure *vf = (o->flags & OP_BULK) ? bulk_var_failure(o, i) : f;
            unsigned writes = (o->flags & OP_BULK) ? bulk_var_writes(o, i) : 1;
            if (vf != v->fail) {
                if (vf) failure_ref(vf);
                failure_unref(v->fail);
                v->fail = vf;
            }
            if ((o->flags & OP_BULK) ? bulk_var_made(o, i) : !vf) v->made = true;
            /* Only the granted writer changes the version: no atomic
             * increment needed, only a release store for its readers. */
            atomic_store_explicit(&v->version, atomic_load_explicit(&v->version, memory_order_relaxed) + writes,
                                  memory_order_release);
        }
        spin_lock_acquire(&v->lock);
        var_complete(v, is_write, rl);
        spin_lock_release(&v->lock);
        if (o->flags & OP_DELETE) var_free(e, v); /* nothing can queue behind a delete */
    }

    if (o->opr) {
        opr_unref(o->opr);
    } else if (o->param_free) {
        o->param_free(o->param);
    }
    failure_unref(o->fail);
    if (op_owns_arrays(o)) {
        free(o->vars);
        free(o->nodes);
    }
    op_free(e, o);
    engine_op_retired(e, w, weight);
    /* After the retire: the naive pusher that returns now finds its op no
     * longer pending. */
    if (settle) op_settle_signal(settle);
}

/* Runs o's function.  Sync ops are finished here; async ones finish in
 * ordo_done_complete, possibly before this returns, so o is not touched
 * after the call. */
static void execute(ordo_engine *e, worker *w, op *o, ready_list *rl) {
    if (atomic_load_explicit(&e->profiling, memory_order_relaxed)) o->t_start = now_ns();

    if (o->flags & OP_WAIT) {
        failure *f = inherited_failure(o);
        if (f) failure_ref(f);
        /* The waiter blocks on the var's GPU events itself: this thread may
         * be a GPU worker with more work to queue. */
        struct dev_event **evs;
        int nevs;
        bool oom = var_events_collect_for_wait(o->vars[0], node_is_write(&o->nodes[0]), &evs, &nevs) != 0;
        waiter_signal(o->param, f, evs, nevs, oom);
        finish_op(e, w, o, rl, false);
        return;
    }

    failure *inherited = (o->flags & OP_DELETE) ? NULL : inherited_failure(o);
    if (inherited && !(o->prop & ORDO_PROP_NO_SKIP)) {
        /* Skipped: its outputs would be built on a failed input (rule 5). */
        failure_ref(inherited);
        o->fail = inherited;
        finish_op(e, w, o, rl, false);
        return;
    }

    char err[256];
    ordo_run_ctx rc = {o->ctx, NULL, w ? w->id : -1, e, o};
    if (o->ctx.dev_type == ORDO_GPU && !(rc.stream = stream_for(e, w, o->ctx, err, sizeof err))) {
        o->fail = failure_new("%s", err);
        finish_op(e, w, o, rl, true);
        return;
    }
    /* GPU work this op depends on: its stream waits, or (host ops) we do.
     * Not for host-side ASYNC ops: they are launchers and markers (the
     * launcher's interruptible wait), which must never block a thread on
     * a GPU, nor take a GPU failure away from the wait that follows them. */
    bool launcher = !rc.stream && (o->prop & ~ORDO_PROP_NO_SKIP) == ORDO_PROP_ASYNC;
    if (!launcher && var_events_before(o, rc.stream, err, sizeof err)) {
        o->fail = failure_new("%s", err);
        if (!(o->prop & ORDO_PROP_NO_SKIP)) { /* its inputs are not what they should be */
            finish_op(e, w, o, rl, true);
            return;
        }
    }
    o->stream = rc.stream;
    if (rc.stream) {
        ordo_device_backend()->use_device(o->ctx.dev_id);
        if (o->t_start) prof_gpu_begin(e, o); /* profiled: its GPU side too */
    }
    if (o->flags & OP_SYNC) {
        int rv = 0;
        if (o->fn.sync) {
            tls_thread.in_op++;
            if (o->flags & OP_PACED) { /* a bulkable op pushed alone: the pace learns its time */
                uint64_t t0 = bulk_pace_start(e);
                rv = o->fn.sync(&rc, o->param);
                bulk_pace_note(e, t0, 1);
            } else {
                rv = o->fn.sync(&rc, o->param);
            }
            tls_thread.in_op--;
        }
        if (rv != 0 && !o->fail)
            o->fail = failure_new("failed (returned %d)", rv);
        if (o->stream) gpu_op_done(e, o);
        /* A checked op finishes on the checker thread, once its GPU work
         * has run: its dependants wait, this worker goes on. */
        if (o->gpu_check && gpu_check_defer(e, o)) return;
        finish_op(e, w, o, rl, o->fail != NULL);
    } else {
        /* If the function completes the op before returning (a common way
         * to use reusable operators), ordo_done_complete finishes it into rl
         * so the next op can run here, as after a sync op. */
        op *outer_op = tls_exec_op;
        ready_list *outer_rl = tls_exec_rl;
        tls_exec_op = o;
        tls_exec_rl = rl;
        tls_thread.in_op++;
        atomic_store_explicit(&o->awaiting_done, 1, memory_order_relaxed); /* handed on with done */
        o->fn.async(&rc, o->param, (ordo_done *)o);
        tls_thread.in_op--;
        tls_exec_op = outer_op;
        tls_exec_rl = outer_rl;
    }
}

/* Finishes o on a thread that did not run it (an async op's completer, the
 * GPU checker), and dispatches what it made ready.  The caller counted
 * itself in e->external before it first touched o; this drops the count
 * as its last touch of the engine (ordo_engine_destroy waits for zero). */
static void finish_elsewhere(ordo_engine *e, op *o) {
    worker *w = tls_worker && tls_worker->engine == e ? tls_worker : NULL;
    ready_list rl = {NULL, NULL};
    finish_op(e, w, o, &rl, o->fail != NULL);
    dispatch_list(e, &rl);
    atomic_fetch_sub_explicit(&e->external, 1, memory_order_acq_rel);
}

void ordo_done_complete(ordo_done *done, const char *error) {
    if (!done) { /* nothing to complete; void, so the message is all the caller gets */
        set_error(ORDO_ERR_INVALID, "ordo_done_complete: done is NULL");
        return;
    }
    op *o = (op *)done;
    if (atomic_exchange_explicit(&o->awaiting_done, 0, memory_order_acq_rel) != 1) {
        /* Finishing it again would retire an op that has already retired,
         * perhaps a newer op on its reused block. */
        set_error(ORDO_ERR_INVALID, "ordo_done_complete: the operation was already completed "
                                    "(call it exactly once per run)");
        return;
    }
    ordo_engine *e = o->engine;
    if (o == tls_exec_op) {
        if (error && !o->fail) o->fail = failure_new("%s", error);
        tls_exec_op = NULL; /* o is freed below: never match it again */
        worker *w = tls_worker && tls_worker->engine == e ? tls_worker : NULL;
        if (o->stream) gpu_op_done(e, o);
        finish_op(e, w, o, tls_exec_rl, o->fail != NULL);
        return;
    }
    atomic_fetch_add_explicit(&e->external, 1, memory_order_acq_rel);
    if (error && !o->fail) o->fail = failure_new("%s", error);
    if (o->stream) gpu_op_done(e, o);
    finish_elsewhere(e, o);
}

void sched_finish_checked(ordo_engine *e, op *o) {
    atomic_fetch_add_explicit(&e->external, 1, memory_order_acq_rel);
    finish_elsewhere(e, o);
}

static inline bool runs_here(const ordo_engine *e, const op *o) {
    return (o->flags & OP_RUN_HERE) || e->cfg.kind == ORDO_ENGINE_NAIVE;
}

void run_ready(ordo_engine *e, op *first) {
    worker *w = tls_worker && tls_worker->engine == e ? tls_worker : NULL;
    ready_list todo = {first, first};
    first->next = NULL;
    int streak = 0;
    while (todo.head) {
        op *o = todo.head;
        todo.head = o->next;
        if (!todo.head) todo.tail = NULL;

        ready_list rl = {NULL, NULL};
        execute(e, w, o, &rl);

        /* Ops that run here (waits, launchers) go first: they are cheap,
         * and a waiter must not sit behind a long op this thread takes on. */
        ready_list now = {NULL, NULL};
        op *inline_op = NULL;
        for (op *r = rl.head, *next; r; r = next) {
            next = r->next;
            r->next = NULL;
            if (atomic_load_explicit(&e->profiling, memory_order_relaxed)) r->t_ready = now_ns();
            if (runs_here(e, r)) {
                if (now.tail) now.tail->next = r;
                else now.head = r;
                now.tail = r;
            } else if (w && !inline_op && r->pool == w->pool && streak < INLINE_STREAK_MAX &&
                       atomic_load_explicit(&w->pool->q.heap_size, memory_order_relaxed) == 0) {
                inline_op = r; /* the next op of a chain: no hand-off */
            } else {
                queue_push(&r->pool->q, r);
            }
        }
        if (inline_op) {
            if (todo.tail) todo.tail->next = inline_op;
            else todo.head = inline_op;
            todo.tail = inline_op;
        }
        if (now.head) {
            now.tail->next = todo.head;
            if (!todo.head) todo.tail = now.tail;
            todo.head = now.head;
        }
        bool took_inline = inline_op != NULL;
        streak = took_inline ? streak + 1 : 0;
    }
}

void dispatch_list(ordo_engine *e, ready_list *rl) {
    for (op *r = rl->head, *next; r; r = next) {
        next = r->next;
        if (atomic_load_explicit(&e->profiling, memory_order_relaxed)) r->t_ready = now_ns();
        if (runs_here(e, r)) run_ready(e, r);
        else queue_push(&r->pool->q, r);
    }
}

/* ---- pools and workers ------------------------------------------------ */

static void *worker_main(void *arg) {
    worker *w = arg;
    ordo_engine *e = w->engine;
    tls_worker = w;
    uint64_t spin_ns = (uint64_t)e->cfg.spin_us * 1000u;
    op *batch[POP_BATCH_MAX];
    int n;
    while ((n = queue_pop(&w->pool->q, spin_ns, batch, POP_BATCH_MAX, w->pool->size)))
        for (int i = 0; i < n; i++) run_ready(e, batch[i]);
    for (int d = 0; d < ORDO_MAX_DEVICES; d++)
        if (w->streams[d]) ordo_device_backend()->stream_destroy(d, w->streams[d]);
    tls_worker = NULL;
    return NULL;
}

static const char *pool_label(enum pool_kind k) {
    switch (k) {
    case POOL_CPU: return "cpu";
    case POOL_CPU_PRIORITY: return "cpu-priority";
    case POOL_GPU: return "gpu";
    case POOL_GPU_COPY: return "gpu-copy";
    case POOL_GPU_PRIORITY: return "gpu-priority";
    case POOL_SHARED: return "shared";
    case POOL_SHARED_COPY: return "shared-copy";
    }
    return "?";
}

int pool_start(ordo_engine *e, pool *p, enum pool_kind kind, ordo_ctx ctx, int nworkers) {
    p->engine = e;
    p->kind = kind;
    p->ctx = ctx;
    p->size = nworkers;
    queue_init(&p->q);
    p->workers = aligned_alloc(64, (size_t)nworkers * sizeof *p->workers);
    if (!p->workers) return ORDO_ERR_NOMEM;
    memset(p->workers, 0, (size_t)nworkers * sizeof *p->workers);
    for (int i = 0; i < nworkers; i++) {
        worker *w = &p->workers[i];
        w->engine = e;
        w->pool = p;
        w->id = atomic_fetch_add(&e->next_worker_id, 1);
        if (w->id >= ORDO_MAX_WORKERS) {
            p->nworkers = i;
            return set_error(ORDO_ERR_NOMEM, "ordo: more than %d worker threads", ORDO_MAX_WORKERS);
        }
        /* Registered before it can retire anything; pool_mu or engine
         * creation serialises registrations. */
        atomic_store(&e->all_workers[w->id], w);
        atomic_store(&e->nall_workers, w->id + 1);
        char label[64];
        snprintf(label, sizeof label, "%s worker %d", pool_label(kind), i);
        w->prof = prof_buf_new(e, w->id, ctx, label);
        if (!w->prof || pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            p->nworkers = i;
            return set_error(ORDO_ERR_NOMEM, "ordo: cannot start %s", label);
        }
        p->nworkers = i + 1;
    }
    return ORDO_OK;
}

/* Called once nothing is pending: workers find nothing and exit. */
void pool_signal_stop(pool *p) {
    pthread_mutex_lock(&p->q.sleep_mu);
    atomic_store(&p->q.stop, true);
    pthread_cond_broadcast(&p->q.cv);
    pthread_mutex_unlock(&p->q.sleep_mu);
}

void pool_join(pool *p) {
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i].thread, NULL);
    p->nworkers = 0;
}

void pool_free(pool *p) {
    free(p->workers);
    p->workers = NULL;
    queue_fini(&p->q);
}
