/*
 * test_saturation.c - push runs ready ops itself when a CPU pool is flooded.
 *
 * push_inline_after (ordo.h): past that many queued ready ops per worker, a
 * ready priority-0 op is run by the pushing thread.  These tests pin down
 * when that may happen and when it must not: never below the threshold,
 * never when disabled, never for ops with a priority (rule 10 keeps holding),
 * and results stay equal to the serial order on shared vars (rule 1).
 */
#include "harness.h"
#include "test_util.h"

#include "ordo.h"

typedef struct {
    atomic_int on_pusher;
    atomic_int on_worker;
} where_counts;

static int record_where(const ordo_run_ctx *rc, void *param) {
    where_counts *w = param;
    if (rc->worker_id < 0) atomic_fetch_add(&w->on_pusher, 1);
    else atomic_fetch_add(&w->on_worker, 1);
    return 0;
}

static ordo_engine *engine_with(int kind, int workers, int inline_after) {
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.cpu_workers = workers;
    c.push_inline_after = inline_after;
    return ordo_engine_create(&c);
}

/* Gate the only worker, then push n independent ops: how many ran on the pusher? */
static int ran_on_pusher(int kind, int inline_after, int n, int priority) {
    ordo_engine *e = engine_with(kind, 1, inline_after);
    CHECK(e != NULL);
    if (!e) return -1;
    gate_t g;
    gate_init(&g);
    ordo_var *gv = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_sync(e, gate_op, &g, NULL, cpu_ctx(0), NULL, 0, &gv, 1, 0, 0, "gate"), 0);
    sleep_ms(20); /* let the worker enter the gate */
    where_counts w;
    atomic_init(&w.on_pusher, 0);
    atomic_init(&w.on_worker, 0);
    for (int i = 0; i < n; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, record_where, &w, NULL, cpu_ctx(0), NULL, 0, NULL, 0, 0, priority, "x"), 0);
    int pusher = atomic_load(&w.on_pusher);
    gate_open(&g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&w.on_pusher) + atomic_load(&w.on_worker), n);
    ordo_engine_destroy(e);
    return pusher;
}

static void test_saturated_pool_runs_on_pusher(void) {
    int kinds[2] = {ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
    for (int k = 0; k < 2; k++) {
        /* 64 per worker may wait in the queue; the rest run on the pusher. */
        int p = ran_on_pusher(kinds[k], 64, 1000, 0);
        CHECK_MSG(p == 1000 - 64, "%s: %d of 1000 ran on the pusher, expected %d", kind_str(kinds[k]), p, 1000 - 64);
    }
}

static void test_below_threshold_never_inline(void) {
    int p = ran_on_pusher(ORDO_ENGINE_PER_DEVICE, 64, 64, 0);
    CHECK_EQ_LONG(p, 0);
}

static void test_disabled_never_inline(void) {
    int p = ran_on_pusher(ORDO_ENGINE_PER_DEVICE, -1, 1000, 0);
    CHECK_EQ_LONG(p, 0);
    setenv("ORDO_PUSH_INLINE_AFTER", "-1", 1);
    p = ran_on_pusher(ORDO_ENGINE_PER_DEVICE, 0, 1000, 0);
    unsetenv("ORDO_PUSH_INLINE_AFTER");
    CHECK_EQ_LONG(p, 0);
}

static void test_prioritised_ops_never_inline(void) {
    int p = ran_on_pusher(ORDO_ENGINE_PER_DEVICE, 64, 1000, 3);
    CHECK_EQ_LONG(p, 0);
}

/* A threshold near INT_MAX times the pool's workers overflowed an int (a
 * negative product: every push "saturated"), so every op ran on the
 * pusher.  Both workers gated; nothing may run on the pusher. */
static void test_huge_threshold_never_inline(void) {
    ordo_engine *e = engine_with(ORDO_ENGINE_PER_DEVICE, 2, (1 << 30) + 1);
    CHECK(e != NULL);
    if (!e) return;
    gate_t g;
    gate_init(&g);
    ordo_var *gv[2] = {ordo_new_variable(e), ordo_new_variable(e)};
    for (int i = 0; i < 2; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, gate_op, &g, NULL, cpu_ctx(0), NULL, 0, &gv[i], 1, 0, 0, "gate"), 0);
    for (int i = 0; i < 200 && atomic_load(&g.entered) < 2; i++) sleep_ms(1);
    where_counts w;
    atomic_init(&w.on_pusher, 0);
    atomic_init(&w.on_worker, 0);
    for (int i = 0; i < 100; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, record_where, &w, NULL, cpu_ctx(0), NULL, 0, NULL, 0, 0, 0, "x"), 0);
    int pusher = atomic_load(&w.on_pusher);
    gate_open(&g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(pusher, 0);
    CHECK_EQ_LONG(atomic_load(&w.on_worker), 100);
    CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
    ordo_engine_destroy(e);
}

/* Saturation must not break ordering: a flood of ready ops mixed with a
 * chain of writes to one var still equals the serial result. */
typedef struct { long *acc; long k; } step_p;
static int step(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    step_p *s = param;
    *s->acc = *s->acc * 3 % 1000003 + s->k;
    return 0;
}

static void test_saturation_keeps_order(void) {
    ordo_engine *e = engine_with(ORDO_ENGINE_PER_DEVICE, 1, 4);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    long acc = 1, ref = 1;
    long n = scaled(20000, 2000);
    step_p *ps = calloc((size_t)n, sizeof *ps);
    for (long i = 0; i < n; i++) {
        ps[i] = (step_p){&acc, i};
        ref = ref * 3 % 1000003 + i;
        CHECK_EQ_LONG(ordo_push_sync(e, step, &ps[i], NULL, cpu_ctx(0), NULL, 0, &v, 1, 0, 0, "step"), 0);
        CHECK_EQ_LONG(ordo_push_sync(e, noop_op, NULL, NULL, cpu_ctx(0), NULL, 0, NULL, 0, 0, 0, "flood"), 0);
    }
    CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
    CHECK_EQ_LONG(acc, ref);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e);
    free(ps);
}

/* A pusher held by backpressure runs queued ops instead of sleeping: with
 * the only worker gated, 1000 ops still all run before the gate opens. */
static void test_backpressure_pusher_helps(void) {
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_PER_DEVICE;
    c.cpu_workers = 1;
    c.max_inflight = 100;
    c.push_inline_after = 100000; /* no inline runs at push: only backpressure helps */
    ordo_engine *e = ordo_engine_create(&c);
    CHECK(e != NULL);
    if (!e) return;
    gate_t g;
    gate_init(&g);
    ordo_var *gv = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_sync(e, gate_op, &g, NULL, cpu_ctx(0), NULL, 0, &gv, 1, 0, 0, "gate"), 0);
    sleep_ms(20);
    where_counts w;
    atomic_init(&w.on_pusher, 0);
    atomic_init(&w.on_worker, 0);
    double t0 = now_s();
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, record_where, &w, NULL, cpu_ctx(0), NULL, 0, NULL, 0, 0, 0, "x"), 0);
    double took = now_s() - t0;
    int pusher = atomic_load(&w.on_pusher);
    CHECK_MSG(pusher >= 1000 - 100, "%d of 1000 ran on the pusher", pusher);
    CHECK_MSG(took < GATE_MAX_S / 2, "pushing took %.1f s: the pusher slept behind the gate", took);
    CHECK(ordo_engine_pending(e) <= 101);
    gate_open(&g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&w.on_pusher) + atomic_load(&w.on_worker), 1000);
    ordo_engine_destroy(e);

    /* Disabled: nothing runs on the pusher; it waits for the worker. */
    c.push_inline_after = -1;
    e = ordo_engine_create(&c);
    gate_init(&g);
    gv = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_sync(e, gate_op, &g, NULL, cpu_ctx(0), NULL, 0, &gv, 1, 0, 0, "gate"), 0);
    gate_timer_t t;
    gate_open_later(&t, &g, 200);
    atomic_init(&w.on_pusher, 0);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, record_where, &w, NULL, cpu_ctx(0), NULL, 0, NULL, 0, 0, 0, "x"), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&w.on_pusher), 0);
    gate_timer_join(&t);
    ordo_engine_destroy(e);
}

int main(void) {
    printf("# seed %#llx, scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_saturated_pool_runs_on_pusher);
    TEST(test_below_threshold_never_inline);
    TEST(test_disabled_never_inline);
    TEST(test_prioritised_ops_never_inline);
    TEST(test_huge_threshold_never_inline);
    TEST(test_saturation_keeps_order);
    TEST(test_backpressure_pusher_helps);
    wd_shutdown();
    return harness_end();
}
