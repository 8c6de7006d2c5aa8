/*
 * test_backpressure.c - rule 9: past max_inflight pending ops, push blocks
 * until the engine catches up.
 *
 *  - 1,000,000 pushes with max_inflight = 1000: ordo_engine_pending(),
 *    sampled by the pushing thread after every push, never exceeds
 *    max_inflight + a small slack, and every op runs.  The first ops are held
 *    by a gate (opened by a timer thread), so without backpressure the
 *    pending count would certainly pass the limit.
 *  - pushes from inside a running op while over the limit must not block
 *    forever (the op holds the only worker: blocking would deadlock).
 *  - several threads pushing against the limit at once.
 */
#include "harness.h"
#include "test_util.h"

#define LIMIT 1000
/* Pending may exceed the limit by the pushes already past the check, a few
 * internal ops (waits) and ops pushed from inside ops. */
#define SLACK 64

typedef struct {
    long counter; /* guarded by the var the op writes */
} cell;

static int inc_cell(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    ((cell *)param)->counter++;
    return 0;
}

static void bp_run(int kind, int workers, long nops) {
    ordo_engine *e = make_engine_cfg(kind, workers, 0, LIMIT);
    CHECK(e != NULL);
    if (!e) return;
    ordo_engine_config got;
    ordo_engine_get_config(e, &got);
    CHECK_EQ_LONG(got.max_inflight, LIMIT);
    enum { NV = 64 };
    ordo_var *vars[NV];
    cell cells[NV];
    long expect[NV] = {0};
    memset(cells, 0, sizeof cells);
    for (int i = 0; i < NV; i++) vars[i] = ordo_new_variable(e);

    gate_t gate;
    gate_init(&gate);
    gate_timer_t timer;
    int gated = kind != ORDO_ENGINE_NAIVE; /* a gate would block naive's push itself */
    if (gated) {
        /* Hold var 0; the first 5000 ops all write var 0, so they pile up
         * behind the gate until the timer opens it. */
        CHECK_EQ_LONG(push_simple(e, gate_op, &gate, NULL, 0, &vars[0], 1, "gate"), 0);
        gate_open_later(&timer, &gate, 300);
    }
    rng_t g;
    rng_init(&g, test_seed() + 9);
    long max_pending = 0, push_errors = 0;
    double t0 = now_s();
    for (long i = 0; i < nops; i++) {
        int w = i < 5000 ? 0 : rng_range(&g, 0, NV - 1);
        int r = rng_range(&g, 0, NV - 1);
        expect[w]++;
        if (push_simple(e, inc_cell, &cells[w], &vars[r], r == w ? 0 : 1, &vars[w], 1, "bp"))
            push_errors++;
        long p = ordo_engine_pending(e);
        if (p > max_pending) max_pending = p;
    }
    double push_s = now_s() - t0;
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    double all_s = now_s() - t0;
    if (gated) gate_timer_join(&timer);
    CHECK_EQ_LONG(push_errors, 0);
    CHECK_MSG(max_pending <= LIMIT + SLACK, "%s: pending reached %ld with max_inflight %d",
              kind_str(kind), max_pending, LIMIT);
    long bad = 0;
    for (int i = 0; i < NV; i++) bad += cells[i].counter != expect[i];
    CHECK_MSG(bad == 0, "%s: %ld vars have the wrong number of increments", kind_str(kind), bad);
    CHECK_EQ_LONG(atomic_load(&gate.timed_out), 0);
    /* pending drains to zero once everything completed (bounded poll: the
     * count may be decremented just after the waiter was released) */
    double end = now_s() + 5;
    while (ordo_engine_pending(e) != 0 && now_s() < end) sleep_ms(1);
    CHECK_EQ_LONG(ordo_engine_pending(e), 0);
    printf("    %s, %d workers: %ld ops, max pending %ld, pushed in %.2f s, done in %.2f s "
           "(%.2f us/op)\n", kind_str(kind), workers, nops, max_pending, push_s, all_s,
           all_s * 1e6 / (double)nops);
    ordo_engine_destroy(e);
}

static void test_rule9_million_pushes_bounded_pooled(void) {
    bp_run(ORDO_ENGINE_POOLED, 2, scaled(1000000, 50000));
}

static void test_rule9_million_pushes_bounded_perdevice(void) {
    bp_run(ORDO_ENGINE_PER_DEVICE, 2, scaled(1000000, 50000));
}

static void test_rule9_million_pushes_bounded_naive(void) {
    bp_run(ORDO_ENGINE_NAIVE, 1, scaled(1000000, 50000));
}

/* A parent op pushes many children from inside itself while the engine is
 * over its limit.  With one worker the children cannot run until the parent
 * returns, so a push that blocked here would never wake. */
typedef struct {
    ordo_engine *e;
    ordo_var *chain;
    int nchildren;
    int *log;      /* children append their index: guarded by `chain` */
    int nlog;
    atomic_int push_errors, parent_done;
} parent_state;

typedef struct {
    parent_state *s;
    int idx;
} child_param;

static int child_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    child_param *c = (child_param *)param;
    c->s->log[c->s->nlog++] = c->idx;
    return 0;
}

static int parent_op(const ordo_run_ctx *rc, void *param) {
    parent_state *s = (parent_state *)param;
    for (int i = 0; i < s->nchildren; i++) {
        child_param *c = (child_param *)malloc(sizeof *c);
        c->s = s;
        c->idx = i;
        if (ordo_push_sync(s->e, child_op, c, free, rc->ctx, NULL, 0, &s->chain, 1,
                           ORDO_PROP_NORMAL, 0, "child") != 0) {
            atomic_fetch_add(&s->push_errors, 1);
            free(c);
        }
    }
    atomic_store(&s->parent_done, 1);
    return 0;
}

static void test_rule9_push_inside_op_over_limit_does_not_block(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine_cfg(kind, 1, 1, 100);
        CHECK(e != NULL);
        if (!e) continue;
        parent_state s;
        memset(&s, 0, sizeof s);
        s.e = e;
        s.chain = ordo_new_variable(e);
        s.nchildren = 1000;
        s.log = (int *)calloc((size_t)s.nchildren, sizeof(int));
        ordo_var *pv = ordo_new_variable(e);
        /* fill up to the limit first, on the same single worker */
        atomic_long n;
        atomic_init(&n, 0);
        CHECK_EQ_LONG(push_simple(e, parent_op, &s, NULL, 0, &pv, 1, "parent"), 0);
        for (int i = 0; i < 300; i++) CHECK_EQ_LONG(push_simple(e, count_op, &n, NULL, 0, &pv, 1, "fill"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&s.parent_done), 1);
        CHECK_EQ_LONG(atomic_load(&s.push_errors), 0);
        CHECK_EQ_LONG(atomic_load(&n), 300);
        CHECK_EQ_LONG(s.nlog, s.nchildren);
        int order_bad = 0;
        for (int i = 0; i < s.nlog; i++) order_bad += s.log[i] != i;
        CHECK_MSG(order_bad == 0, "%s: children ran out of push order", kind_str(kind));
        CHECK_EQ_LONG(ordo_var_version(s.chain), s.nchildren);
        ordo_engine_destroy(e);
        free(s.log);
    }
}

/* The same from async ops (which may run in the thread that made them
 * ready) and from the CPU priority pool. */
static void parent_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    parent_op(rc, param);
    ordo_done_complete(done, NULL);
}

static void test_rule9_push_inside_async_and_priority_ops(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine_cfg(kind, 1, 1, 50);
        CHECK(e != NULL);
        if (!e) continue;
        parent_state s1, s2;
        memset(&s1, 0, sizeof s1);
        memset(&s2, 0, sizeof s2);
        s1.e = s2.e = e;
        s1.chain = ordo_new_variable(e);
        s2.chain = ordo_new_variable(e);
        s1.nchildren = s2.nchildren = 500;
        s1.log = (int *)calloc(500, sizeof(int));
        s2.log = (int *)calloc(500, sizeof(int));
        ordo_var *p1 = ordo_new_variable(e), *p2 = ordo_new_variable(e);
        CHECK_EQ_LONG(ordo_push_async(e, parent_async, &s1, NULL, cpu_ctx(0), NULL, 0, &p1, 1,
                                      ORDO_PROP_ASYNC, 0, "parent_async"), 0);
        CHECK_EQ_LONG(ordo_push_sync(e, parent_op, &s2, NULL, cpu_ctx(0), NULL, 0, &p2, 1,
                                     ORDO_PROP_CPU_PRIORITIZED, 0, "parent_prio"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(s1.nlog + s2.nlog, 1000);
        CHECK_EQ_LONG(atomic_load(&s1.push_errors) + atomic_load(&s2.push_errors), 0);
        ordo_engine_destroy(e);
        free(s1.log);
        free(s2.log);
    }
}

/* Four threads push against a small limit at once.  Here ordo_engine_pending
 * is not a usable probe: a sampling thread preempted while reading it sees
 * other threads' pushes but not the retirements before them, so it may
 * overstate (never understate) the count.  The test keeps its own count
 * instead: pushes started (read first) minus op bodies finished (read
 * second), which can only understate the true number in flight at any
 * instant, so a value above the limit is a real excess.  It overstates by
 * at most the threads blocked inside push and the ops whose body finished
 * but that have not retired yet (a few each). */
typedef struct {
    ordo_engine *e;
    ordo_var *v;
    long n;
    atomic_long *started, *finished;
    long max_inflight;
    long errors;
} bp_thread;

static int bp_body(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_long *)param, 1);
    return 0;
}

static void *bp_thread_main(void *p) {
    bp_thread *t = (bp_thread *)p;
    for (long i = 0; i < t->n; i++) {
        atomic_fetch_add(t->started, 1);
        if (push_simple(t->e, bp_body, t->finished, NULL, 0, &t->v, 1, "bp_mt")) {
            t->errors++;
            atomic_fetch_add(t->finished, 1);
        }
        long st = atomic_load(t->started);
        long fin = atomic_load(t->finished);
        if (st - fin > t->max_inflight) t->max_inflight = st - fin;
    }
    return NULL;
}

static void test_rule9_threads_pushing_against_limit(void) {
    long n = scaled(100000, 10000);
    for (int k = 1; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine_cfg(kind, 2, 0, 200);
        CHECK(e != NULL);
        if (!e) continue;
        atomic_long started, finished;
        atomic_init(&started, 0);
        atomic_init(&finished, 0);
        bp_thread th[4];
        pthread_t pt[4];
        for (int t = 0; t < 4; t++) {
            th[t] = (bp_thread){e, ordo_new_variable(e), n, &started, &finished, 0, 0};
            pthread_create(&pt[t], NULL, bp_thread_main, &th[t]);
        }
        long maxp = 0, errors = 0;
        for (int t = 0; t < 4; t++) {
            pthread_join(pt[t], NULL);
            if (th[t].max_inflight > maxp) maxp = th[t].max_inflight;
            errors += th[t].errors;
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(errors, 0);
        CHECK_EQ_LONG(atomic_load(&finished), 4 * n);
        CHECK_MSG(maxp <= 200 + SLACK, "%s: %ld ops in flight with max_inflight 200", kind_str(kind), maxp);
        printf("    %s: 4 threads x %ld ops, at most %ld in flight (limit 200)\n", kind_str(kind), n, maxp);
        ordo_engine_destroy(e);
    }
}

int main(void) {
    printf("# seed %#llx, scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_rule9_million_pushes_bounded_naive);
    TEST(test_rule9_million_pushes_bounded_pooled);
    TEST(test_rule9_million_pushes_bounded_perdevice);
    TEST_T(test_rule9_push_inside_op_over_limit_does_not_block, 60);
    TEST_T(test_rule9_push_inside_async_and_priority_ops, 60);
    TEST(test_rule9_threads_pushing_against_limit);
    return harness_end();
}
