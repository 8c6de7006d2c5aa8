/*
 * run_now.c - a small op run by the thread that pushes it, during the push.
 *
 * Handing an op to a worker costs the pushing thread a few dozen
 * nanoseconds even in a bulk (bulk.c), and the worker as much again to
 * take it, while a kernel on 16 floats runs in about 25.  So when nothing
 * is using or waiting for any of an op's vars -- the usual case for a loop
 * of small in-place updates once the engine has caught up -- the op has
 * nothing to wait for, and the cheapest place to run it is here and now.
 *
 * The rules hold as they would for a worker that was granted every var at
 * the push:
 *  - the vars' locks are held from the check until the op is done, so no
 *    op pushed by another thread meanwhile gets a grant in between (rule 8:
 *    a push is atomic over its vars); that thread queues behind the lock,
 *    for as long as a small kernel runs;
 *  - an op of this thread's own bulk not yet handed over would come first
 *    (rule 1), so a var that bulk uses is not idle;
 *  - a var that carries a failure is not idle either: the general path
 *    skips the op and passes the failure on (rule 5);
 *  - a kernel that fails leaves its failure on the vars it wrote, recorded
 *    for wait_for_all, named after the op, as finish_op would;
 *  - versions count the write.
 * Locks are only tried, never waited for: a var another thread holds is
 * busy, and the op takes the general path, so this adds no lock order.
 * The kernel runs as inside an op (tls_thread.in_op): a wait from inside
 * it is refused, and so is a push from inside it onto one of the vars
 * whose locks this thread holds (push_prepared; engine_delete_idle leaves
 * such a var alone): on a worker that push would queue, here it would wait
 * for this very thread.
 */
#include "internal.h"

bool run_now_holds_any(ordo_var *const *vars, int n) {
    const run_now_held *h = tls_thread.run_now_held;
    for (int i = 0; h && i < n; i++)
        for (int j = 0; j < h->n; j++)
            if (vars[i] == h->uses[j].v) return true;
    return false;
}

void engine_run_now_unlock(const var_use *uses, int n) {
    for (int i = 0; i < n; i++) spin_lock_release(&uses[i].v->lock);
}

bool engine_run_now_bulk_has(const var_use *uses, int n) {
    for (int i = 0; i < n; i++)
        if (bulk_has_var(uses[i].v)) return true;
    return false;
}

void engine_run_now_failed(ordo_engine *e, const var_use *uses, int n, int rv, failure *f, const char *name) {
    /* As in bulk_run: a failure left by ordo_fail, or a nonzero return. */
    if (!f) f = failure_new("failed (returned %d)", rv);
    if (f) {
        f = failure_named(f, name);
        engine_record_failure(e, f);
    }
    for (int i = 0; i < n; i++) {
        ordo_var *v = uses[i].v;
        if (uses[i].w && f) { /* the var had none (engine_run_now_begin) */
            failure_ref(f);
            v->fail = f;
        }
    }
    if (f) failure_unref(f);
    engine_run_now_end(uses, n);
}
