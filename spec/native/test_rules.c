/*
 * test_rules.c - one or more targeted tests per rule of DESIGN.md section 2.
 *
 * Rule 5 (errors) lives in test_errors.c, rule 8 (threads pushing) in
 * test_threads.c, rule 9 (backpressure) in test_backpressure.c and rule 11
 * (destroy) in test_lifecycle.c; the rest is here:
 *   r1  read-after-write visibility, write-after-read order, concurrent reads
 *   r2  independent ops run concurrently
 *   r3  a var given twice / as read and write counts once, as a write
 *   r4  wait_for_var / wait_to_write wait for exactly what they should
 *   r6  delete_variable runs after earlier ops; pushes on a deleted var fail
 *   r7  waits from inside an op return ORDO_ERR_DEADLOCK at once
 *   r10 priorities in a single-worker pool and in the CPU priority pool
 *
 * "Runs concurrently" is shown without timing: two ops each wait (bounded)
 * until both are running at the same time, which only succeeds if the engine
 * really runs them together.  Ops that must stay blocked wait on gates
 * (test_util.h), which are always bounded so a broken engine fails instead
 * of hanging.
 */
#include "harness.h"
#include "test_util.h"

/* How long a "both are running" barrier waits before it gives up.  Generous:
 * it only has to cover thread wake-up, which under TSan or valgrind is slow. */
static double conc_wait_s(void) { return test_scale() < 1 ? 20.0 : 5.0; }

/* Engines with a thread pool: the concurrency tests do not apply to naive,
 * which runs every op inline in push. */
static const int THREADED_KINDS[2] = {ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};

/* ================================================================== */
/* Rule 1                                                              */

/* A chain of writers, each followed by 1..3 readers, on one var.  Readers
 * look at the value twice with a spin between, so a writer that starts
 * early (write-after-read broken) or a reader that starts early
 * (read-after-write broken) is seen. */
typedef struct {
    int *cell;
    int value;
    int spin_ns;
    atomic_int *bad;
} r1_param;

static int r1_writer(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r1_param *p = (r1_param *)param;
    spin_us(p->spin_ns / 1000.0);
    *p->cell = p->value;
    return 0;
}

static int r1_reader(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r1_param *p = (r1_param *)param;
    int a = *p->cell;
    spin_us(p->spin_ns / 1000.0);
    int b = *p->cell;
    if (a != p->value || b != p->value) atomic_fetch_add(p->bad, 1);
    return 0;
}

static void test_rule1_raw_and_war_order(void) {
    long n = scaled(2000, 200);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 4);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *x = ordo_new_variable(e);
        int cell = 0;
        atomic_int bad;
        atomic_init(&bad, 0);
        r1_param *ps = (r1_param *)calloc((size_t)n * 4, sizeof *ps);
        rng_t g;
        rng_init(&g, test_seed() + (uint64_t)kind);
        int np = 0, push_fail = 0;
        for (long i = 1; i <= n; i++) {
            r1_param *w = &ps[np++];
            *w = (r1_param){&cell, (int)i, rng_range(&g, 0, 3000), &bad};
            push_fail += push_simple(e, r1_writer, w, NULL, 0, &x, 1, "r1_writer") != 0;
            int nreaders = rng_range(&g, 1, 3);
            for (int r = 0; r < nreaders; r++) {
                r1_param *rp = &ps[np++];
                *rp = (r1_param){&cell, (int)i, rng_range(&g, 0, 3000), &bad};
                push_fail += push_simple(e, r1_reader, rp, &x, 1, NULL, 0, "r1_reader") != 0;
            }
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(push_fail, 0);
        CHECK_MSG(atomic_load(&bad) == 0, "%s: %d readers saw a value other than the last write "
                  "pushed before them", kind_str(kind), atomic_load(&bad));
        CHECK_EQ_LONG(cell, n);
        CHECK_EQ_LONG(ordo_var_version(x), n);
        ordo_engine_destroy(e);
        free(ps);
    }
}

/* W0 writes v; R1 and R2 read v; W2 writes v.  R1 and R2 must run at the
 * same time (each waits until both are running), see W0's value, and W2 must
 * start only after both finished. */
typedef struct {
    int *cell;
    atomic_int running, readers_done, both_seen, wrong_value, w2_saw_readers;
    int round;
} r1c_state;

static int r1c_w0(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r1c_state *s = (r1c_state *)param;
    *s->cell = s->round;
    return 0;
}

static int r1c_reader(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r1c_state *s = (r1c_state *)param;
    if (*s->cell != s->round) atomic_fetch_add(&s->wrong_value, 1);
    atomic_fetch_add(&s->running, 1);
    if (wait_until_at_least(&s->running, 2, conc_wait_s())) atomic_fetch_add(&s->both_seen, 1);
    atomic_fetch_add(&s->readers_done, 1);
    return 0;
}

static int r1c_w2(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r1c_state *s = (r1c_state *)param;
    atomic_store(&s->w2_saw_readers, atomic_load(&s->readers_done));
    *s->cell = -1;
    return 0;
}

static void test_rule1_reads_between_writes_run_concurrently(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        int cell = 0;
        for (int round = 1; round <= 10; round++) {
            r1c_state s;
            memset(&s, 0, sizeof s);
            s.cell = &cell;
            s.round = round;
            CHECK_EQ_LONG(push_simple(e, r1c_w0, &s, NULL, 0, &v, 1, "w0"), 0);
            CHECK_EQ_LONG(push_simple(e, r1c_reader, &s, &v, 1, NULL, 0, "r1"), 0);
            CHECK_EQ_LONG(push_simple(e, r1c_reader, &s, &v, 1, NULL, 0, "r2"), 0);
            CHECK_EQ_LONG(push_simple(e, r1c_w2, &s, NULL, 0, &v, 1, "w2"), 0);
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            CHECK_MSG(atomic_load(&s.both_seen) == 2,
                      "%s round %d: the two readers never ran at the same time", kind_str(kind), round);
            CHECK_EQ_LONG(atomic_load(&s.wrong_value), 0);
            CHECK_EQ_LONG(atomic_load(&s.w2_saw_readers), 2);
            CHECK_EQ_LONG(cell, -1);
        }
        ordo_engine_destroy(e);
    }
}

/* ================================================================== */
/* Rule 2                                                              */

typedef struct {
    atomic_int running, both_seen;
} barrier2;

static int r2_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    barrier2 *b = (barrier2 *)param;
    atomic_fetch_add(&b->running, 1);
    if (wait_until_at_least(&b->running, 2, conc_wait_s())) atomic_fetch_add(&b->both_seen, 1);
    return 0;
}

static void r2_pair(int kind, int workers, ordo_ctx ca, ordo_ctx cb, const char *what) {
    ordo_engine *e = make_engine(kind, workers);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e), *r = ordo_new_variable(e);
    for (int round = 0; round < 5; round++) {
        barrier2 bar;
        memset(&bar, 0, sizeof bar);
        /* distinct written vars, and a shared var that both only read */
        CHECK_EQ_LONG(ordo_push_sync(e, r2_op, &bar, NULL, ca, &r, 1, &a, 1, 0, 0, "a"), 0);
        CHECK_EQ_LONG(ordo_push_sync(e, r2_op, &bar, NULL, cb, &r, 1, &b, 1, 0, 0, "b"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_MSG(atomic_load(&bar.both_seen) == 2, "%s %s round %d: independent ops never ran "
                  "at the same time", kind_str(kind), what, round);
    }
    ordo_engine_destroy(e);
}

static void test_rule2_independent_ops_run_concurrently(void) {
    r2_pair(ORDO_ENGINE_POOLED, 2, cpu_ctx(0), cpu_ctx(0), "same device");
    r2_pair(ORDO_ENGINE_PER_DEVICE, 2, cpu_ctx(0), cpu_ctx(0), "cpu(0) pool of 2");
    /* each cpu(n) has its own pool, so even 1 worker each gives concurrency */
    r2_pair(ORDO_ENGINE_PER_DEVICE, 1, cpu_ctx(0), cpu_ctx(1), "cpu(0) and cpu(1), 1 worker each");
}

/* An op on var a is not held up by a blocked op on var b. */
static void test_rule2_blocked_op_does_not_block_independent_ops(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e);
        gate_t gate;
        gate_init(&gate);
        gate_timer_t t;
        gate_open_later(&t, &gate, 10000); /* safety: never hang on the gate */
        atomic_long n;
        atomic_init(&n, 0);
        CHECK_EQ_LONG(push_simple(e, gate_op, &gate, NULL, 0, &b, 1, "gate"), 0);
        for (int i = 0; i < 100; i++)
            CHECK_EQ_LONG(push_simple(e, count_op, &n, NULL, 0, &a, 1, "count"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, a), 0);
        CHECK_EQ_LONG(atomic_load(&n), 100);
        CHECK_MSG(!atomic_load(&gate.open) && atomic_load(&gate.timed_out) == 0,
                  "%s: wait_for_var(a) only returned after the gate on b opened", kind_str(kind));
        gate_open(&gate);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        gate_timer_join(&t);
        ordo_engine_destroy(e);
    }
}

/* ================================================================== */
/* Rule 3                                                              */

static void test_rule3_version_counts_once(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        ordo_var *vv[3] = {v, v, v};
        CHECK_EQ_LONG(ordo_var_version(v), 0);
        /* read and write */
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, vv, 1, vv, 1, "rw"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 1);
        /* read twice and write: must not deadlock on itself */
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, vv, 2, vv, 1, "rrw"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 2);
        /* written twice */
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, vv, 2, "ww"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 3);
        /* read once, written three times */
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, vv, 1, vv, 3, "rwww"), 0);
        CHECK_EQ_LONG(ordo_wait_to_write(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 4);
        /* a plain read does not count */
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, vv, 1, NULL, 0, "r"), 0);
        CHECK_EQ_LONG(ordo_wait_to_write(e, v), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 4);
        ordo_engine_destroy(e);
    }
}

/* Mixed readers and rule-3 writers on one var: every writer must run alone
 * (no reader or writer in flight) and in push order; every reader must see
 * exactly the writers pushed before it. */
enum { R3_READ, R3_RW, R3_RRW, R3_WW, R3_RWW, R3_RR };

typedef struct {
    int *wcount;          /* writers run so far: guarded by the engine */
    atomic_int *readers, *writers, *overlap, *order_bad;
    int writers_before;   /* writers pushed before this op */
    int is_write;
    int spin_ns;
} r3_param;

static int r3_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r3_param *p = (r3_param *)param;
    if (p->is_write) {
        int w = atomic_fetch_add(p->writers, 1);
        if (w != 0 || atomic_load(p->readers) != 0) atomic_fetch_add(p->overlap, 1);
        if (*p->wcount != p->writers_before) atomic_fetch_add(p->order_bad, 1);
        spin_us(p->spin_ns / 1000.0);
        *p->wcount += 1;
        atomic_fetch_sub(p->writers, 1);
    } else {
        atomic_fetch_add(p->readers, 1);
        if (atomic_load(p->writers) != 0) atomic_fetch_add(p->overlap, 1);
        if (*p->wcount != p->writers_before) atomic_fetch_add(p->order_bad, 1);
        spin_us(p->spin_ns / 1000.0);
        atomic_fetch_sub(p->readers, 1);
    }
    return 0;
}

static void r3_mix(const int *types, int ntypes, const char *what) {
    long n = scaled(3000, 300);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 4);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        ordo_var *vv[3] = {v, v, v};
        int wcount = 0, nwriters = 0, push_fail = 0;
        atomic_int readers, writers, overlap, order_bad;
        atomic_init(&readers, 0);
        atomic_init(&writers, 0);
        atomic_init(&overlap, 0);
        atomic_init(&order_bad, 0);
        r3_param *ps = (r3_param *)calloc((size_t)n, sizeof *ps);
        rng_t g;
        rng_init(&g, test_seed() * 3 + (uint64_t)kind);
        for (long i = 0; i < n; i++) {
            int t = types[rng_range(&g, 0, ntypes - 1)];
            r3_param *p = &ps[i];
            *p = (r3_param){&wcount, &readers, &writers, &overlap, &order_bad, nwriters,
                            t != R3_READ, rng_range(&g, 0, 4000)};
            int nr = 0, nw = 0;
            switch (t) {
            case R3_READ: nr = 1; break;
            case R3_RW: nr = 1; nw = 1; break;
            case R3_RRW: nr = 2; nw = 1; break;
            case R3_WW: nw = 2; break;
            case R3_RWW: nr = 1; nw = 2; break;
            case R3_RR: nr = 2; break;
            }
            nwriters += p->is_write;
            push_fail += push_simple(e, r3_op, p, vv, nr, vv, nw, "r3") != 0;
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(push_fail, 0);
        CHECK_MSG(atomic_load(&overlap) == 0, "%s %s: %d ops overlapped a writer", kind_str(kind),
                  what, atomic_load(&overlap));
        CHECK_MSG(atomic_load(&order_bad) == 0, "%s %s: %d ops saw the wrong number of earlier "
                  "writers", kind_str(kind), what, atomic_load(&order_bad));
        CHECK_EQ_LONG(wcount, nwriters);
        CHECK_EQ_LONG(ordo_var_version(v), nwriters);
        ordo_engine_destroy(e);
        free(ps);
    }
}

static void test_rule3_read_and_write_is_one_serialised_write(void) {
    static const int types[] = {R3_READ, R3_READ, R3_READ, R3_RW, R3_RRW, R3_WW, R3_RWW};
    r3_mix(types, ARRAY_LEN(types), "read+write");
}

/* "A var given twice ... counts once, as a write": reads {v, v} alone makes
 * the op a writer of v (version +1, exclusive). */
static void test_rule3_duplicate_read_is_a_write(void) {
    static const int types[] = {R3_READ, R3_READ, R3_RR};
    r3_mix(types, ARRAY_LEN(types), "reads {v,v}");
}

/* ================================================================== */
/* Rule 4                                                              */

typedef struct {
    atomic_int count;
    int spin_ns;
} r4_chain;

static int r4_inc(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r4_chain *c = (r4_chain *)param;
    spin_us(c->spin_ns / 1000.0);
    atomic_fetch_add(&c->count, 1);
    return 0;
}

static void test_rule4_wait_for_var_sees_earlier_writes(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e), *u = ordo_new_variable(e);
        for (int round = 1; round <= 20; round++) {
            r4_chain cv = {0}, cu = {0};
            atomic_init(&cv.count, 0);
            atomic_init(&cu.count, 0);
            cv.spin_ns = 20000;
            cu.spin_ns = 20000;
            for (int i = 0; i < 20; i++) {
                CHECK_EQ_LONG(push_simple(e, r4_inc, &cv, NULL, 0, &v, 1, "v"), 0);
                CHECK_EQ_LONG(push_simple(e, r4_inc, &cu, NULL, 0, &u, 1, "u"), 0);
            }
            int which = round % 2;
            int rc = which ? ordo_wait_for_var(e, v) : ordo_wait_to_write(e, v);
            int seen = atomic_load(&cv.count);
            CHECK_EQ_LONG(rc, 0);
            CHECK_MSG(seen == 20, "%s: %s(v) returned after %d of 20 earlier writes", kind_str(kind),
                      which ? "wait_for_var" : "wait_to_write", seen);
            CHECK_EQ_LONG(ordo_var_version(v), round * 20);
            /* the cu ops still refer to the stack struct: finish them */
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        }
        ordo_engine_destroy(e);
    }
}

typedef struct {
    gate_t gate;
    atomic_int done;
} gated;

static int gated_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    gated *g = (gated *)param;
    gate_pass(&g->gate);
    atomic_store(&g->done, 1);
    return 0;
}

static int set_flag_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_store((atomic_int *)param, 1);
    return 0;
}

/* wait_for_var waits for writes only: a blocked earlier reader does not hold
 * it up.  wait_to_write, on the other hand, must wait for that reader. */
static void test_rule4_wait_for_var_does_not_wait_for_readers(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        gated r;
        gate_init(&r.gate);
        atomic_init(&r.done, 0);
        atomic_int w_done;
        atomic_init(&w_done, 0);
        gate_timer_t t;
        gate_open_later(&t, &r.gate, 5000); /* safety net if the wait blocks */
        CHECK_EQ_LONG(push_simple(e, set_flag_op, &w_done, NULL, 0, &v, 1, "w"), 0);
        CHECK_EQ_LONG(push_simple(e, gated_op, &r, &v, 1, NULL, 0, "gated_reader"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        int reader_done = atomic_load(&r.done);
        CHECK_EQ_LONG(atomic_load(&w_done), 1);
        CHECK_MSG(reader_done == 0, "%s: wait_for_var waited for an earlier reader", kind_str(kind));
        gate_open(&r.gate);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        gate_timer_join(&t);
        ordo_engine_destroy(e);
    }
}

static void test_rule4_wait_to_write_waits_for_readers(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        gated r1, r2;
        gate_init(&r1.gate);
        gate_init(&r2.gate);
        atomic_init(&r1.done, 0);
        atomic_init(&r2.done, 0);
        gate_timer_t t1, t2;
        CHECK_EQ_LONG(push_simple(e, gated_op, &r1, &v, 1, NULL, 0, "gated_reader1"), 0);
        CHECK_EQ_LONG(push_simple(e, gated_op, &r2, &v, 1, NULL, 0, "gated_reader2"), 0);
        gate_open_later(&t1, &r1.gate, 50);
        gate_open_later(&t2, &r2.gate, 150);
        CHECK_EQ_LONG(ordo_wait_to_write(e, v), 0);
        int d1 = atomic_load(&r1.done), d2 = atomic_load(&r2.done);
        CHECK_MSG(d1 && d2, "%s: wait_to_write returned before earlier readers finished (%d, %d)",
                  kind_str(kind), d1, d2);
        /* wait_to_write is a wait, not a write */
        CHECK_EQ_LONG(ordo_var_version(v), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        gate_timer_join(&t1);
        gate_timer_join(&t2);
        ordo_engine_destroy(e);
    }
}

/* An op pushed (by another thread) after wait_for_var started does not hold
 * the wait up, even though it writes the same var and is blocked. */
typedef struct {
    ordo_engine *e;
    ordo_var *v;
    gated w1, g;
    atomic_int main_waiting, main_returned, push_rc;
} r4_later;

static void *r4_later_thread(void *p) {
    r4_later *s = (r4_later *)p;
    while (!atomic_load(&s->main_waiting)) sched_yield();
    /* the main thread is inside wait_for_var by now (valgrind runs one
     * thread at a time, so give it longer there) */
    sleep_ms(under_valgrind() ? 1500 : 300);
    atomic_store(&s->push_rc, push_simple(s->e, gated_op, &s->g, NULL, 0, &s->v, 1, "later"));
    gate_open(&s->w1.gate);
    /* keep the later op blocked until the wait returned (bounded) */
    double end = now_s() + 10;
    while (!atomic_load(&s->main_returned) && now_s() < end) sleep_ms(1);
    gate_open(&s->g.gate);
    return NULL;
}

static void test_rule4_wait_for_var_ignores_later_ops(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        r4_later s;
        memset(&s, 0, sizeof s);
        s.e = e;
        s.v = ordo_new_variable(e);
        gate_init(&s.w1.gate);
        gate_init(&s.g.gate);
        CHECK_EQ_LONG(push_simple(e, gated_op, &s.w1, NULL, 0, &s.v, 1, "earlier"), 0);
        pthread_t th;
        pthread_create(&th, NULL, r4_later_thread, &s);
        atomic_store(&s.main_waiting, 1);
        int rc = ordo_wait_for_var(e, s.v);
        int later_done = atomic_load(&s.g.done), earlier_done = atomic_load(&s.w1.done);
        atomic_store(&s.main_returned, 1);
        pthread_join(th, NULL);
        CHECK_EQ_LONG(rc, 0);
        CHECK_EQ_LONG(earlier_done, 1);
        CHECK_MSG(later_done == 0, "%s: wait_for_var waited for an op pushed after it",
                  kind_str(kind));
        CHECK_EQ_LONG(atomic_load(&s.push_rc), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&s.g.done), 1);
        CHECK_EQ_LONG(atomic_load(&s.w1.gate.timed_out) + atomic_load(&s.g.gate.timed_out), 0);
        ordo_engine_destroy(e);
    }
}

/* ================================================================== */
/* Rule 6                                                              */

typedef struct {
    gate_t *gate;
    atomic_long end_ticket;
} r6_rec;

static int r6_gated(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r6_rec *r = (r6_rec *)param;
    if (r->gate) gate_pass(r->gate);
    spin_us(200);
    atomic_store(&r->end_ticket, ticket());
    return 0;
}

typedef struct {
    atomic_long start_ticket;
    atomic_int runs;
    ordo_ctx ctx;
    int magic;
} r6_del;

static int r6_delete_fn(const ordo_run_ctx *rc, void *param) {
    r6_del *d = (r6_del *)param;
    atomic_store(&d->start_ticket, ticket());
    d->ctx = rc->ctx;
    atomic_fetch_add(&d->runs, 1);
    return d->magic == 0x5eed ? 0 : 1;
}

static int is_deleted_rc(int rc) { return rc == ORDO_ERR_DELETED || rc == ORDO_ERR_INVALID; }

static void test_rule6_delete_runs_after_earlier_ops(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 4);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e), *other = ordo_new_variable(e);
        gate_t gate;
        gate_init(&gate);
        r6_rec w1 = {&gate, 0}, r1 = {&gate, 0}, r2 = {&gate, 0}, w2 = {NULL, 0};
        CHECK_EQ_LONG(push_simple(e, r6_gated, &w1, NULL, 0, &v, 1, "w1"), 0);
        CHECK_EQ_LONG(push_simple(e, r6_gated, &r1, &v, 1, &other, 1, "r1"), 0);
        CHECK_EQ_LONG(push_simple(e, r6_gated, &r2, &v, 1, NULL, 0, "r2"), 0);
        CHECK_EQ_LONG(push_simple(e, r6_gated, &w2, &other, 1, &v, 1, "w2"), 0);
        r6_del d;
        memset(&d, 0, sizeof d);
        d.magic = 0x5eed;
        CHECK_EQ_LONG(ordo_delete_variable(e, r6_delete_fn, &d, cpu_ctx(1), v), 0);
        /* pushes on v after the delete: rejected, and their fns never run */
        atomic_int ran;
        atomic_init(&ran, 0);
        int rc1 = push_simple(e, set_flag_op, &ran, &v, 1, NULL, 0, "after_delete_read");
        int rc2 = push_simple(e, set_flag_op, &ran, NULL, 0, &v, 1, "after_delete_write");
        CHECK_MSG(is_deleted_rc(rc1), "%s: read push on a deleted var returned %d", kind_str(kind), rc1);
        CHECK_MSG(is_deleted_rc(rc2), "%s: write push on a deleted var returned %d", kind_str(kind), rc2);
        CHECK(strlen(ordo_last_error()) > 0);
        sleep_ms(20);
        CHECK_MSG(atomic_load(&d.runs) == 0, "%s: delete fn ran before earlier (blocked) ops",
                  kind_str(kind));
        gate_open(&gate);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&d.runs), 1);
        long t = atomic_load(&d.start_ticket);
        CHECK(t > atomic_load(&w1.end_ticket));
        CHECK(t > atomic_load(&r1.end_ticket));
        CHECK(t > atomic_load(&r2.end_ticket));
        CHECK(t > atomic_load(&w2.end_ticket));
        CHECK(atomic_load(&w2.end_ticket) > atomic_load(&r1.end_ticket));
        CHECK(atomic_load(&w2.end_ticket) > atomic_load(&r2.end_ticket));
        CHECK_EQ_LONG(d.ctx.dev_type, ORDO_CPU);
        CHECK_EQ_LONG(d.ctx.dev_id, 1);
        CHECK_EQ_LONG(atomic_load(&ran), 0);
        CHECK_EQ_LONG(atomic_load(&gate.timed_out), 0);
        /* other vars are unaffected */
        atomic_long n;
        atomic_init(&n, 0);
        CHECK_EQ_LONG(push_simple(e, count_op, &n, &other, 1, &other, 1, "other"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, other), 0);
        CHECK_EQ_LONG(atomic_load(&n), 1);
        ordo_engine_destroy(e);
    }
}

/* Waiting on a var whose delete is pending returns an error, not a hang. */
static void test_rule6_wait_on_deleted_var_fails(void) {
    for (int k = 0; k < 2; k++) {
        int kind = THREADED_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        gated w;
        gate_init(&w.gate);
        atomic_init(&w.done, 0);
        CHECK_EQ_LONG(push_simple(e, gated_op, &w, NULL, 0, &v, 1, "w"), 0);
        CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v), 0);
        gate_timer_t t;
        gate_open_later(&t, &w.gate, 200);
        int rc1 = ordo_wait_for_var(e, v);
        int rc2 = ordo_wait_to_write(e, v);
        CHECK_MSG(is_deleted_rc(rc1), "%s: wait_for_var on a deleted var returned %d", kind_str(kind), rc1);
        CHECK_MSG(is_deleted_rc(rc2), "%s: wait_to_write on a deleted var returned %d", kind_str(kind), rc2);
        gate_timer_join(&t);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&w.done), 1);
        ordo_engine_destroy(e);
    }
}

/* After the delete has run: pushes, waits and a second delete on the stale
 * handle are errors (rule 6 "at least in debug builds"), never a hang. */
static void test_rule6_use_after_delete_completed(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        atomic_long n;
        atomic_init(&n, 0);
        CHECK_EQ_LONG(push_simple(e, count_op, &n, NULL, 0, &v, 1, "w"), 0);
        r6_del d;
        memset(&d, 0, sizeof d);
        d.magic = 0x5eed;
        CHECK_EQ_LONG(ordo_delete_variable(e, r6_delete_fn, &d, cpu_ctx(0), v), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&d.runs), 1);
        CHECK(atomic_load(&d.start_ticket) > 0);
        int rc = push_simple(e, count_op, &n, NULL, 0, &v, 1, "stale");
        CHECK_MSG(is_deleted_rc(rc), "%s: push on a deleted var returned %d", kind_str(kind), rc);
        rc = ordo_wait_for_var(e, v);
        CHECK_MSG(is_deleted_rc(rc), "%s: wait_for_var on a deleted var returned %d", kind_str(kind), rc);
        rc = ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
        CHECK_MSG(is_deleted_rc(rc), "%s: deleting twice returned %d", kind_str(kind), rc);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&n), 1);
        ordo_engine_destroy(e);
    }
}

/* ================================================================== */
/* Rule 7                                                              */

typedef struct {
    ordo_engine *e;
    ordo_var *own, *idle, *rd;
    atomic_int rc_own, rc_idle, rc_ww, rc_all, has_msg, ran;
    atomic_long max_us;
} r7_rec;

static void r7_do_waits(r7_rec *s) {
    double t0 = now_s();
    atomic_store(&s->rc_own, ordo_wait_for_var(s->e, s->own));
    atomic_store(&s->has_msg, ordo_last_error() && strlen(ordo_last_error()) > 0);
    atomic_store(&s->rc_idle, ordo_wait_for_var(s->e, s->idle));
    atomic_store(&s->rc_ww, ordo_wait_to_write(s->e, s->rd));
    atomic_store(&s->rc_all, ordo_wait_for_all(s->e));
    atomic_store(&s->max_us, (long)((now_s() - t0) * 1e6));
    atomic_fetch_add(&s->ran, 1);
}

static int r7_sync(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r7_do_waits((r7_rec *)param);
    return 0;
}

static void r7_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    r7_do_waits((r7_rec *)param);
    ordo_done_complete(done, NULL);
}

static void r7_check(r7_rec *s, const char *kind, const char *how) {
    CHECK_MSG(atomic_load(&s->ran) == 1, "%s %s: op ran %d times", kind, how, atomic_load(&s->ran));
    CHECK_MSG(atomic_load(&s->rc_own) == ORDO_ERR_DEADLOCK, "%s %s: wait_for_var(own var) = %d",
              kind, how, atomic_load(&s->rc_own));
    CHECK_MSG(atomic_load(&s->rc_idle) == ORDO_ERR_DEADLOCK, "%s %s: wait_for_var(idle var) = %d",
              kind, how, atomic_load(&s->rc_idle));
    CHECK_MSG(atomic_load(&s->rc_ww) == ORDO_ERR_DEADLOCK, "%s %s: wait_to_write = %d", kind, how,
              atomic_load(&s->rc_ww));
    CHECK_MSG(atomic_load(&s->rc_all) == ORDO_ERR_DEADLOCK, "%s %s: wait_for_all = %d", kind, how,
              atomic_load(&s->rc_all));
    CHECK_MSG(atomic_load(&s->has_msg), "%s %s: no ordo_last_error message", kind, how);
    printf("    %s %s: four in-op waits took %ld us\n", kind, how, atomic_load(&s->max_us));
}

static void test_rule7_wait_inside_op_returns_deadlock(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *own = ordo_new_variable(e), *idle = ordo_new_variable(e), *rd = ordo_new_variable(e);
        /* sync op */
        r7_rec s;
        memset(&s, 0, sizeof s);
        s.e = e, s.own = own, s.idle = idle, s.rd = rd;
        CHECK_EQ_LONG(push_simple(e, r7_sync, &s, &rd, 1, &own, 1, "r7_sync"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0); /* the op itself did not fail */
        r7_check(&s, kind_str(kind), "sync op");
        /* async op */
        r7_rec a;
        memset(&a, 0, sizeof a);
        a.e = e, a.own = own, a.idle = idle, a.rd = rd;
        CHECK_EQ_LONG(ordo_push_async(e, r7_async, &a, NULL, cpu_ctx(0), &rd, 1, &own, 1,
                                      ORDO_PROP_NORMAL, 0, "r7_async"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        r7_check(&a, kind_str(kind), "async op");
        /* a priority-pool op */
        r7_rec p;
        memset(&p, 0, sizeof p);
        p.e = e, p.own = own, p.idle = idle, p.rd = rd;
        CHECK_EQ_LONG(ordo_push_sync(e, r7_sync, &p, NULL, cpu_ctx(0), &rd, 1, &own, 1,
                                     ORDO_PROP_CPU_PRIORITIZED, 0, "r7_prio"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        r7_check(&p, kind_str(kind), "CPU_PRIORITIZED op");
        /* a reusable operator */
        r7_rec o;
        memset(&o, 0, sizeof o);
        o.e = e, o.own = own, o.idle = idle, o.rd = rd;
        ordo_opr *opr = ordo_new_operator(e, r7_async, &o, NULL, &rd, 1, &own, 1, 0, "r7_opr");
        CHECK(opr != NULL);
        if (opr) {
            CHECK_EQ_LONG(ordo_push(e, opr, cpu_ctx(0), 0), 0);
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            r7_check(&o, kind_str(kind), "operator");
            ordo_delete_operator(e, opr);
        }
        /* the same thread can wait normally afterwards (the naive engine ran
         * the ops on this very thread) */
        CHECK_EQ_LONG(ordo_wait_for_var(e, own), 0);
        CHECK_EQ_LONG(ordo_wait_to_write(e, rd), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        ordo_engine_destroy(e);
    }
}

/* The delete function of ordo_delete_variable is an op too. */
typedef struct {
    ordo_engine *e;
    ordo_var *other;
    atomic_int rc1, rc2, ran;
} r7_del;

static int r7_delete_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r7_del *d = (r7_del *)param;
    atomic_store(&d->rc1, ordo_wait_for_all(d->e));
    atomic_store(&d->rc2, ordo_wait_for_var(d->e, d->other));
    atomic_store(&d->ran, 1);
    return 0;
}

static void test_rule7_wait_inside_delete_fn_returns_deadlock(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        r7_del d;
        memset(&d, 0, sizeof d);
        d.e = e;
        d.other = ordo_new_variable(e);
        ordo_var *v = ordo_new_variable(e);
        CHECK_EQ_LONG(ordo_delete_variable(e, r7_delete_fn, &d, cpu_ctx(0), v), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&d.ran), 1);
        CHECK_EQ_LONG(atomic_load(&d.rc1), ORDO_ERR_DEADLOCK);
        CHECK_EQ_LONG(atomic_load(&d.rc2), ORDO_ERR_DEADLOCK);
        ordo_engine_destroy(e);
    }
}

/* ================================================================== */
/* Rule 10                                                             */

typedef struct {
    atomic_int *next;
    int *order; /* order[k] = position at which op k ran */
    int k;
} r10_param;

static int r10_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    r10_param *p = (r10_param *)param;
    p->order[p->k] = atomic_fetch_add(p->next, 1);
    return 0;
}

/* Blocks the single worker of the pool with a gate op, pushes ops with the
 * given priorities on independent vars, opens the gate and returns in
 * `ran` the op indices in the order they ran. */
static int r10_run(int kind, int prop, const int *prios, int n, int *ran) {
    ordo_engine *e = make_engine_cfg(kind, 1, 1, 0);
    CHECK(e != NULL);
    if (!e) return 0;
    gate_t gate;
    gate_init(&gate);
    ordo_var *gv = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_sync(e, gate_op, &gate, NULL, cpu_ctx(0), NULL, 0, &gv, 1, prop, 0, "gate"), 0);
    /* the gate op must be running (not queued) before the others arrive */
    CHECK(wait_until_at_least(&gate.entered, 1, 10.0));
    atomic_int next;
    atomic_init(&next, 0);
    int *order = (int *)calloc((size_t)n, sizeof(int));
    r10_param *ps = (r10_param *)calloc((size_t)n, sizeof *ps);
    ordo_var **vs = (ordo_var **)calloc((size_t)n, sizeof *vs);
    for (int k = 0; k < n; k++) {
        vs[k] = ordo_new_variable(e);
        ps[k] = (r10_param){&next, order, k};
        CHECK_EQ_LONG(ordo_push_sync(e, r10_op, &ps[k], NULL, cpu_ctx(0), NULL, 0, &vs[k], 1, prop,
                                     prios[k], "prio"), 0);
    }
    gate_open(&gate);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&next), n);
    CHECK_EQ_LONG(atomic_load(&gate.timed_out), 0);
    for (int k = 0; k < n; k++) ran[k] = -1;
    for (int k = 0; k < n; k++)
        if (order[k] >= 0 && order[k] < n) ran[order[k]] = k;
    ordo_engine_destroy(e);
    free(order);
    free(ps);
    free(vs);
    return 1;
}

/* Stable sort by priority, descending: the order a priority queue must give. */
static void r10_expected(const int *prios, int n, int *want) {
    for (int k = 0; k < n; k++) want[k] = k;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && prios[want[j]] > prios[want[j - 1]]; j--) {
            int t = want[j];
            want[j] = want[j - 1];
            want[j - 1] = t;
        }
}

static void r10_case(int kind, int prop, const char *what) {
    static const int fixed[6] = {0, 5, -3, 10, 5, 1};
    int ran[64], want[64];
    if (r10_run(kind, prop, fixed, 6, ran)) {
        r10_expected(fixed, 6, want); /* 10, 5, 5, 1, 0, -3 */
        int ok = !memcmp(ran, want, sizeof(int) * 6);
        CHECK_MSG(ok, "%s: ran priorities %d %d %d %d %d %d, want 10 5 5 1 0 -3", what,
                  fixed[ran[0] < 0 ? 0 : ran[0]], fixed[ran[1] < 0 ? 0 : ran[1]],
                  fixed[ran[2] < 0 ? 0 : ran[2]], fixed[ran[3] < 0 ? 0 : ran[3]],
                  fixed[ran[4] < 0 ? 0 : ran[4]], fixed[ran[5] < 0 ? 0 : ran[5]]);
        /* the two priority-5 ops in push order */
        CHECK(ran[1] == 1 && ran[2] == 4);
    }
    /* 64 random priorities, many equal */
    int prios[64];
    rng_t g;
    rng_init(&g, test_seed() + 10);
    for (int k = 0; k < 64; k++) prios[k] = rng_range(&g, -4, 4);
    if (r10_run(kind, prop, prios, 64, ran)) {
        r10_expected(prios, 64, want);
        int bad = -1;
        for (int k = 0; k < 64 && bad < 0; k++)
            if (ran[k] != want[k]) bad = k;
        CHECK_MSG(bad < 0, "%s: 64 random priorities: position %d ran op %d (prio %d), want op %d "
                  "(prio %d)", what, bad, bad < 0 ? 0 : ran[bad], bad < 0 || ran[bad] < 0 ? 0 : prios[ran[bad]],
                  bad < 0 ? 0 : want[bad], bad < 0 ? 0 : prios[want[bad]]);
    }
}

static void test_rule10_priority_order_cpu_pool(void) {
    r10_case(ORDO_ENGINE_PER_DEVICE, ORDO_PROP_NORMAL, "perdevice cpu(0) pool, 1 worker");
}

static void test_rule10_priority_order_cpu_priority_pool(void) {
    r10_case(ORDO_ENGINE_PER_DEVICE, ORDO_PROP_CPU_PRIORITIZED, "perdevice CPU priority pool, 1 worker");
}

static void test_rule10_priority_order_pooled(void) {
    r10_case(ORDO_ENGINE_POOLED, ORDO_PROP_NORMAL, "pooled shared queue, 1 worker");
}

int main(void) {
    printf("# seed %#llx, scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_rule1_raw_and_war_order);
    TEST(test_rule1_reads_between_writes_run_concurrently);
    TEST(test_rule2_independent_ops_run_concurrently);
    TEST(test_rule2_blocked_op_does_not_block_independent_ops);
    TEST(test_rule3_version_counts_once);
    TEST(test_rule3_read_and_write_is_one_serialised_write);
    TEST(test_rule3_duplicate_read_is_a_write);
    TEST(test_rule4_wait_for_var_sees_earlier_writes);
    TEST(test_rule4_wait_for_var_does_not_wait_for_readers);
    TEST(test_rule4_wait_to_write_waits_for_readers);
    TEST(test_rule4_wait_for_var_ignores_later_ops);
    TEST(test_rule6_delete_runs_after_earlier_ops);
    TEST(test_rule6_wait_on_deleted_var_fails);
    TEST(test_rule6_use_after_delete_completed);
    TEST_T(test_rule7_wait_inside_op_returns_deadlock, 60);
    TEST_T(test_rule7_wait_inside_delete_fn_returns_deadlock, 60);
    TEST(test_rule10_priority_order_cpu_pool);
    TEST(test_rule10_priority_order_cpu_priority_pool);
    TEST(test_rule10_priority_order_pooled);
    return harness_end();
}
