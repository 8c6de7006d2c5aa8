/*
 * wait.c - waiting for vars and for the whole engine, and the default engine.
 *
 * A wait on a var is itself an op: an internal op that reads the var (or
 * writes it, for wait_to_write) and signals the waiting thread when it is
 * granted.  So a wait sees exactly the ops pushed before it (rule 4), with no
 * extra bookkeeping in the var.  The op runs in whichever thread grants it,
 * and captures the var's failure while it holds the grant, so the waiter can
 * report it without racing later writers.
 */
#include "internal.h"
#include "dev_event.h"

#include <sched.h>
#include <stdlib.h>


struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int done;
    failure *fail;
    dev_event **evs; /* GPU work the waiter still blocks on after the grant */
    int nevs;
    bool evs_oom;
};

void waiter_signal(waiter *wt, failure *f, dev_event **evs, int nevs, bool evs_oom) {
    pthread_mutex_lock(&wt->mu);
    wt->fail = f;
    wt->evs = evs;
    wt->nevs = nevs;
    wt->evs_oom = evs_oom;
    atomic_store_explicit(&wt->done, 1, memory_order_release);
    pthread_cond_signal(&wt->cv);
    pthread_mutex_unlock(&wt->mu);
    /* wt lives on the waiter's stack: not touched after this point. */
}

static void waiter_block(ordo_engine *e, waiter *wt) {
    uint64_t until = now_ns() + (uint64_t)e->cfg.spin_us * 1000u;
    for (int i = 0; !atomic_load_explicit(&wt->done, memory_order_acquire); i++) {
        if ((i & 63) != 63) cpu_relax();
        else if (now_ns() < until) sched_yield();
        else break;
    }
    /* Taking the mutex even after a successful spin: the signalling thread
     * may still be inside waiter_signal, using wt. */
    pthread_mutex_lock(&wt->mu);
    while (!atomic_load_explicit(&wt->done, memory_order_acquire)) pthread_cond_wait(&wt->cv, &wt->mu);
    pthread_mutex_unlock(&wt->mu);
}

static int check_wait(ordo_engine *e, ordo_var *v, const char *fn, bool need_var) {
    bulk_flush_mine(); /* what this thread pushed is what it waits for */
    if (!e) return set_error(ORDO_ERR_INVALID, "%s: engine is NULL", fn);
    if (need_var && !v) return set_error(ORDO_ERR_INVALID, "%s: variable is NULL", fn);
    if (tls_thread.in_op || tls_worker)
        return set_error(ORDO_ERR_DEADLOCK,
                         "%s called from inside an operation: it would deadlock (rule 7); "
                         "push a dependent op instead", fn);
    if (need_var && atomic_load_explicit(&v->magic, memory_order_acquire) != VAR_LIVE)
        return set_error(ORDO_ERR_DELETED, "%s: variable %p was deleted", fn, (void *)v);
    /* Waiting on another engine's var would push the wait op on this
     * engine: it would see none of the ops that write v here. */
    if (need_var && v->engine != e)
        return set_error(ORDO_ERR_INVALID, "%s: variable belongs to another engine", fn);
    return ORDO_OK;
}

/* A device's asynchronous failure, taken by a wait (the sync took it from
 * the device: it is reported here or never): the wait's message, or added
 * to the one the wait reports already ("...; gpu(1): div: ..."). */
static int report_device_failure(int rc, const char *err) {
    if (rc != ORDO_OK) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s; %s", ordo_last_error(), err);
        return set_error(rc, "%s", buf);
    }
    return set_error(ORDO_ERR_FAILED, "%s", err);
}

/* data: the caller reads v's data (a tensor's read): a void var fails the
 * wait even when its failure was reported before (var_void). */
static int wait_var(ordo_engine *e, ordo_var *v, bool as_write, bool data, const char *fn) {
    int rc = check_wait(e, v, fn, true);
    if (rc) return rc;
    waiter wt;
    pthread_mutex_init(&wt.mu, NULL);
    pthread_cond_init(&wt.cv, NULL);
    atomic_init(&wt.done, 0);
    wt.fail = NULL;
    wt.evs = NULL;
    wt.nevs = 0;
    wt.evs_oom = false;

    op *o = op_new(e, OP_WAIT | OP_RUN_HERE | (as_write ? OP_NO_VERSION : 0) | (data ? OP_WAIT_DATA : 0),
                   ORDO_PROP_NO_SKIP, 0,
                   (ordo_ctx){ORDO_CPU, 0}, "");
    if (!o) {
        pthread_mutex_destroy(&wt.mu);
        pthread_cond_destroy(&wt.cv);
        return set_error(ORDO_ERR_NOMEM, "%s: out of memory", fn);
    }
    o->param = &wt;
    o->nvars = 1;
    o->vars[0] = v;
    o->nodes[0] = (dep_node){NULL, (uintptr_t)o | (as_write ? 1u : 0u)};
    if ((rc = push_prepared(e, o, fn)) != ORDO_OK) {
        op_free(e, o);
        pthread_mutex_destroy(&wt.mu);
        pthread_cond_destroy(&wt.cv);
        return rc;
    }
    waiter_block(e, &wt);
    pthread_mutex_destroy(&wt.mu);
    pthread_cond_destroy(&wt.cv);
    if (wt.fail) {
        /* (a data wait gets a failure reported before only from a void var) */
        if (failure_claim(e, wt.fail)) rc = set_error(ORDO_ERR_FAILED, "%s", wt.fail->msg);
        else if (data)
            rc = set_error(ORDO_ERR_FAILED, "%s (reported before: its value was never computed)", wt.fail->msg);
        failure_unref(wt.fail);
    }
    /* The ops are done for the engine; their GPU work may not be yet.  A
     * failure found there is the device's ("gpu(0): gather: index 5 out of
     * range..."): it names the device and the op, and is not this wait's
     * own, so the message is not prefixed with the C function's name. */
    char err[512];
    for (int i = 0; i < wt.nevs; i++) {
        if (dev_event_sync(wt.evs[i], err, sizeof err)) rc = report_device_failure(rc, err);
        dev_event_unref(wt.evs[i]);
    }
    free(wt.evs);
    if (wt.evs_oom) {
        /* Could not list the var's events: wait for every GPU instead. */
        if (engine_device_sync(e, err, sizeof err)) rc = report_device_failure(rc, err);
    }
    return rc;
}

int ordo_wait_for_var(ordo_engine *e, ordo_var *v) { return wait_var(e, v, false, false, "ordo_wait_for_var"); }

int ordo_wait_to_write(ordo_engine *e, ordo_var *v) { return wait_var(e, v, true, false, "ordo_wait_to_write"); }

/* (ordo_tensor_wait's: its refusals name it) */
int engine_wait_for_data(ordo_engine *e, ordo_var *v) { return wait_var(e, v, false, true, "ordo_tensor_wait"); }

int ordo_wait_for_all(ordo_engine *e) {
    int rc = check_wait(e, NULL, "ordo_wait_for_all", false);
    if (rc) return rc;
    engine_wait_pending(e, 0);
    rc = engine_report_failures(e);
    /* Every op is done for the engine; their GPU work must be, too. */
    char err[512];
    if (engine_device_sync(e, err, sizeof err)) rc = report_device_failure(rc, err);
    return rc;
}

/* ---- the process-wide engine ------------------------------------------------ */

/* Made once, on first use, and destroyed at exit, by destroy_default
 * alone: it is shared by whoever asked for it (the tensor layer, the Lua
 * package), so ordo_engine_destroy refuses it (engine_destroy_refused);
 * destroyed there, the exit handler would destroy it a second time. */
static _Atomic(ordo_engine *) default_engine;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void destroy_default(void) {
    /* Cleared first: the destroy below is then not refused. */
    engine_destroy_at_exit(atomic_exchange(&default_engine, NULL));
}

/* When libordo is unloaded by dlclose (plain luajit's lua_close, and the
 * launcher's, unload the library the FFI loaded) rather than at exit(),
 * the handler above runs from __cxa_finalize, after the library's
 * destructors -- among them the shell reaper's, which would leave the
 * engine waiting forever for a command still running.  That destructor
 * destroys the default engine first, through this. */
void engine_destroy_default_now(void) {
    if (atomic_load(&default_engine)) destroy_default();
}

static void create_default(void) {
    ordo_engine *e = ordo_engine_create(NULL);
    atomic_store(&default_engine, e);
    if (e) atexit(destroy_default);
}

ordo_engine *ordo_engine_default(void) {
    pthread_once(&default_once, create_default);
    return atomic_load(&default_engine);
}

bool engine_destroy_refused(const ordo_engine *e) {
    if (!e || e != atomic_load(&default_engine)) return false;
    set_error(ORDO_ERR_INVALID, "ordo_engine_destroy: the default engine is destroyed at exit, not by its users "
                                "(ordo_engine_default); the engine was left as it was");
    return true;
}
