/*
 * gpu_check.c - GPU ops that complete only once the host has checked their
 * work (ordo_gpu_check_after in ordo_kernel.h).
 *
 * A GPU op normally completes for the engine as soon as its function has
 * queued its work (var_events.c).  Some kernels find errors only while they
 * run on the device -- an index out of range in gather, an integer division
 * by zero -- and write them to memory the host reads.  Rule 5 wants that
 * failure on the op itself: what it wrote carries the error, the ops that
 * use it are skipped, the wait that meets it reports it.  So such an op is
 * held back: the worker records an event after its work and hands the op to
 * the engine's checker thread, then goes on to its next op at once.  The
 * checker waits for the event, runs the kernel's check, and finishes the op
 * (sched_finish_checked), which releases its dependants -- with the failure
 * if the check found one.  Only those dependants wait, one host round trip;
 * everything else keeps flowing, and no worker thread ever blocks on a GPU.
 *
 * The checker is one thread per engine, started at the first checked op:
 * checks are cheap and arrive in push order per stream, so a FIFO served by
 * one thread keeps them in order without any ordering of its own.  The
 * naive engine waits for every GPU op at its push already, so there the
 * check runs in place.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "dev_event.h"

typedef struct gpu_checker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op *head, *tail; /* linked through op->next: a held op is in no ready list */
    bool stop;
    pthread_t thread;
    ordo_engine *engine;
} gpu_checker;

int ordo_gpu_check_after(const ordo_run_ctx *rc, ordo_gpu_check_fn check, void *arg) {
    if (!rc || !check) return set_error(ORDO_ERR_INVALID, "ordo_gpu_check_after: rc and check must not be NULL");
    op *o = rc->op_;
    if (!o || !rc->stream || o->ctx.dev_type != ORDO_GPU || !(o->flags & OP_SYNC))
        return set_error(ORDO_ERR_INVALID, "ordo_gpu_check_after: only from the function of a sync op on a GPU");
    if (o->gpu_check)
        return set_error(ORDO_ERR_INVALID, "ordo_gpu_check_after: %s has a check already (one per op)",
                         o->name && o->name[0] ? o->name : "the op");
    o->gpu_check = check;
    o->gpu_check_arg = arg;
    return ORDO_OK;
}

/* Waits for o's GPU work (its event, or the whole device when no event
 * could be recorded), then runs its check; a failure of either fails o
 * unless it failed already. */
static void run_check(op *o) {
    char err[256];
    int bad;
    if (o->gpu_check_ev) {
        bad = dev_event_wait_quiet(o->gpu_check_ev, err, sizeof err);
        dev_event_unref(o->gpu_check_ev);
        o->gpu_check_ev = NULL;
    } else {
        /* (the slot must not be read, nor released, before the work that
         * may write it is done; quietly, as the event's wait above: the
         * device's pending failure is another op's, for the next wait) */
        bad = ordo_device_backend()->device_sync_quiet(o->ctx.dev_id, err, sizeof err);
    }
    if (bad && !o->fail) o->fail = failure_new("%s", err);
    err[0] = '\0';
    ordo_gpu_check_fn check = o->gpu_check;
    o->gpu_check = NULL;
    if (check(o->gpu_check_arg, err, sizeof err) && !o->fail)
        o->fail = failure_new("%s", err[0] ? err : "the check of its GPU work failed");
}

static void *checker_main(void *arg) {
    gpu_checker *c = arg;
    ordo_engine *e = c->engine;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
        op *o = c->head;
        if (!o) break; /* stop, and nothing left */
        c->head = o->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        o->next = NULL;
        run_check(o);
        sched_finish_checked(e, o);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The engine's checker, started on first use (under pool_mu, published
 * once running, so later checked ops take no engine lock); NULL when no
 * thread could be started (the caller then checks in place). */
static gpu_checker *checker_get(ordo_engine *e) {
    gpu_checker *c = atomic_load_explicit(&e->checker, memory_order_acquire);
    if (c) return c;
    pthread_mutex_lock(&e->pool_mu);
    c = atomic_load_explicit(&e->checker, memory_order_relaxed);
    if (!c && (c = calloc(1, sizeof *c))) {
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->cv, NULL);
        c->engine = e;
        if (pthread_create(&c->thread, NULL, checker_main, c) == 0) {
            atomic_store_explicit(&e->checker, c, memory_order_release);
        } else {
            pthread_cond_destroy(&c->cv);
            pthread_mutex_destroy(&c->mu);
            free(c);
            c = NULL;
        }
    }
    pthread_mutex_unlock(&e->pool_mu);
    return c;
}

bool gpu_check_defer(ordo_engine *e, op *o) {
    gpu_checker *c;
    if (e->cfg.kind != ORDO_ENGINE_NAIVE && o->gpu_check_ev && (c = checker_get(e))) {
        pthread_mutex_lock(&c->mu);
        o->next = NULL;
        if (c->tail) c->tail->next = o;
        else c->head = o;
        c->tail = o;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return true;
    }
    run_check(o);
    return false;
}

void gpu_checker_free(ordo_engine *e) {
    gpu_checker *c = atomic_load(&e->checker);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    atomic_store(&e->checker, NULL);
}
