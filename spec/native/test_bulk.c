/*
 * test_bulk.c - bulking (ordo_set_bulk_size, ORDO_PROP_BULK, src/bulk.c).
 *
 * A bulk must be invisible to the thread that collects it: the same results,
 * order, failures, reports and versions as the same ops pushed one by one.
 * The random workload checks results and waits against a serial oracle on
 * every engine kind; test_errors.c runs its random failure oracle bulked
 * too.  Here: failures op by op inside one bulk, compared with the same
 * script unbulked; when a bulk is handed over (full, thread exit, the
 * thread's next call); a var deleted under a bulk; profiling; the settings.
 */
#include "harness.h"
#include "random_workload.h"

#include <stdbool.h>

static const int BULK = ORDO_PROP_NORMAL | ORDO_PROP_BULK;

static int push_bulk(ordo_engine *e, ordo_sync_fn fn, void *param, ordo_var *const *r, int nr, ordo_var *const *w,
                     int nw, const char *name) {
    return ordo_push_sync(e, fn, param, NULL, cpu_ctx(0), r, nr, w, nw, BULK, 0, name);
}

/* ---- the random workload ------------------------------------------------ */

static void run_bulk_workload(int kind) {
    static const int workers[] = {1, 2, 4};
    for (int i = 0; i < ARRAY_LEN(workers); i++) {
        double t0 = now_s();
        rw_run(kind, workers[i], RW_BULK, 5, scaled(10000, 1000), test_seed());
        printf("    %s bulk workers=%d: 5 x %ld ops in %.2f s\n", kind_str(kind), workers[i], scaled(10000, 1000),
               now_s() - t0);
    }
}

static void test_bulk_random_naive(void) { run_bulk_workload(ORDO_ENGINE_NAIVE); }
static void test_bulk_random_pooled(void) { run_bulk_workload(ORDO_ENGINE_POOLED); }
static void test_bulk_random_perdevice(void) { run_bulk_workload(ORDO_ENGINE_PER_DEVICE); }

/* ---- failures op by op ----------------------------------------------------- */

/* A scripted op: fails when it should, else adds 1 to every var it writes
 * (cells[]), and counts its runs. */
typedef struct {
    int fail;
    int nw;
    long *cells[2];
    atomic_int ran;
} sop;

static int sop_fn(const ordo_run_ctx *rc, void *param) {
    sop *o = (sop *)param;
    atomic_fetch_add(&o->ran, 1);
    if (o->fail) return ordo_fail(rc, "scripted failure");
    for (int i = 0; i < o->nw; i++) (*o->cells[i])++;
    return 0;
}

/* What a script left on one var: its wait, version and cell. */
typedef struct {
    int rc; /* wait_for_var */
    char msg[128];
    uint64_t version;
    long cell;
} var_out;

/* Waits for each of the n vars in order and reads what it holds. */
static void read_vars(ordo_engine *e, ordo_var *const *v, const long *cells, int n, var_out *out) {
    for (int i = 0; i < n; i++) {
        out[i].rc = ordo_wait_for_var(e, v[i]);
        if (out[i].rc) snprintf(out[i].msg, sizeof out[i].msg, "%s", ordo_last_error());
        out[i].version = ordo_var_version(v[i]);
        out[i].cell = cells[i];
    }
}

/* The bulked run of a script ended as the one pushed op by op: each op ran
 * as often, each var (named vname + index) has the same wait, version and
 * cell. */
static void check_as_alone(const char *kn, char vname, const int *ran_b, const int *ran_a, int nops,
                           const var_out *b, const var_out *a, int nvars) {
    for (int i = 0; i < nops; i++)
        CHECK_MSG(ran_b[i] == ran_a[i], "%s: op %d ran %d times bulked, %d alone", kn, i, ran_b[i], ran_a[i]);
    for (int i = 0; i < nvars; i++) {
        CHECK_MSG(b[i].rc == a[i].rc && !strcmp(b[i].msg, a[i].msg), "%s: wait %c%d: bulked %d '%s', alone %d '%s'",
                  kn, vname, i, b[i].rc, b[i].msg, a[i].rc, a[i].msg);
        CHECK_MSG(b[i].version == a[i].version, "%s: %c%d version bulked %llu, alone %llu", kn, vname, i,
                  (unsigned long long)b[i].version, (unsigned long long)a[i].version);
        CHECK_EQ_LONG(b[i].cell, a[i].cell);
    }
}

typedef struct {
    var_out x[6];
    int ran[8];
    int all_rc; /* wait_for_all afterwards */
} script_out;

/* Vars x0..x5.  A fails writing x0; B reads x0 writes x1 (skipped); C writes
 * x2 (independent, runs); D writes x0 only (meets x0's failure: skipped); E
 * fails writing x3 and x4; F reads x5 writes x5 (runs);
 * G reads x3 writes x2 (skipped: x2 ends failed, though C wrote it cleanly);
 * H writes x5 twice-listed (runs). */
static void run_script(int kind, int bulk_size, script_out *out) {
    memset(out, 0, sizeof *out);
    ordo_engine *e = make_engine(kind, 2);
    if (!e) return;
    ordo_var *x[6];
    for (int i = 0; i < 6; i++) x[i] = ordo_new_variable(e);
    long cells[6] = {0};
    sop ops[8];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 8; i++) atomic_init(&ops[i].ran, 0);
    ops[0].fail = 1;
    ops[4].fail = 1;
    ordo_set_bulk_size(bulk_size);
    struct { int nr, nw; int r[2], w[2]; const char *name; } s[8] = {
        {0, 1, {0}, {0}, "A"},    {1, 1, {0}, {1}, "B"}, {0, 1, {0}, {2}, "C"},       {0, 1, {0}, {0}, "D"},
        {0, 2, {0}, {3, 4}, "E"}, {1, 1, {5}, {5}, "F"}, {1, 1, {3}, {2}, "G"}, {0, 2, {0}, {5, 5}, "H"},
    };
    for (int k = 0; k < 8; k++) {
        ordo_var *r[2], *w[2];
        for (int j = 0; j < s[k].nr; j++) r[j] = x[s[k].r[j]];
        for (int j = 0; j < s[k].nw; j++) {
            w[j] = x[s[k].w[j]];
            ops[k].cells[j] = &cells[s[k].w[j]];
        }
        ops[k].nw = s[k].nw;
        CHECK_EQ_LONG(push_bulk(e, sop_fn, &ops[k], r, s[k].nr, w, s[k].nw, s[k].name), 0);
    }
    read_vars(e, x, cells, 6, out->x);
    out->all_rc = ordo_wait_for_all(e);
    for (int k = 0; k < 8; k++) out->ran[k] = atomic_load(&ops[k].ran);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

static void test_bulk_failures_as_alone(void) {
    for (int k = 1; k < 3; k++) {
        int kind = ALL_KINDS[k];
        script_out alone, bulked;
        run_script(kind, 0, &alone);
        run_script(kind, ORDO_BULK_MAX, &bulked);
        const char *kn = kind_str(kind);
        /* the script's own expectations (rule 5) */
        CHECK_MSG(alone.ran[0] == 1 && alone.ran[1] == 0 && alone.ran[2] == 1 && alone.ran[3] == 0 &&
                      alone.ran[4] == 1 && alone.ran[5] == 1 && alone.ran[6] == 0 && alone.ran[7] == 1,
                  "%s alone: ran %d%d%d%d%d%d%d%d", kn, alone.ran[0], alone.ran[1], alone.ran[2], alone.ran[3],
                  alone.ran[4], alone.ran[5], alone.ran[6], alone.ran[7]);
        /* x0: A's failure; x1 too (B skipped), reported already; x2: E's
         * failure through G, met first there; x3, x4: E's, reported */
        CHECK(alone.x[0].rc == ORDO_ERR_FAILED && strstr(alone.x[0].msg, "A: scripted failure"));
        CHECK_EQ_LONG(alone.x[1].rc, 0);
        CHECK(alone.x[2].rc == ORDO_ERR_FAILED && strstr(alone.x[2].msg, "E: scripted failure"));
        CHECK(alone.x[3].rc == 0 && alone.x[4].rc == 0 && alone.x[5].rc == 0);
        CHECK_EQ_LONG(alone.x[2].cell, 1);
        CHECK_EQ_LONG(alone.x[5].cell, 3);
        /* and the bulked run is the same, op by op and var by var */
        check_as_alone(kn, 'x', bulked.ran, alone.ran, 8, bulked.x, alone.x, 6);
        CHECK_EQ_LONG(bulked.all_rc, alone.all_rc);
    }
}

/* An op that meets two failures passes one on: the same one bulked as
 * alone.  Alone, it was the failure of its first var by address (a push
 * sorts its vars); in a bulk, the first in the order the op named them.
 * So the wait on what it wrote reported another op's message, and the
 * other failure was left for a later wait. */
static void two_failures_met(int kind, int bulk_size, char *msg, size_t len, int *rc_out) {
    ordo_engine *e = make_engine(kind, 2);
    if (!e) return;
    ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e), *out = ordo_new_variable(e),
             *out2 = ordo_new_variable(e);
    ordo_var *lo = a < b ? a : b, *hi = a < b ? b : a;
    sop f_lo = {1, 0, {NULL, NULL}, 0}, f_hi = {1, 0, {NULL, NULL}, 0}, m = {0, 0, {NULL, NULL}, 0},
        m2 = {0, 0, {NULL, NULL}, 0};
    ordo_set_bulk_size(bulk_size);
    CHECK_EQ_LONG(ordo_push_sync(e, sop_fn, &f_lo, NULL, cpu_ctx(0), NULL, 0, &lo, 1, BULK, 0, "F_lo"), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, sop_fn, &f_hi, NULL, cpu_ctx(0), NULL, 0, &hi, 1, BULK, 0, "F_hi"), 0);
    ordo_var *hi_lo[2] = {hi, lo}; /* named high address first */
    CHECK_EQ_LONG(ordo_push_sync(e, sop_fn, &m, NULL, cpu_ctx(0), hi_lo, 2, &out, 1, BULK, 0, "M"), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, sop_fn, &m2, NULL, cpu_ctx(0), hi_lo, 2, &out2, 1, BULK, 0, "M2"), 0);
    *rc_out = ordo_wait_for_var(e, out);
    snprintf(msg, len, "%s", *rc_out ? ordo_last_error() : "");
    ordo_set_bulk_size(0);
    while (ordo_wait_for_all(e) == ORDO_ERR_FAILED) {}
    CHECK_EQ_LONG(atomic_load(&m.ran) + atomic_load(&m2.ran), 0);
    ordo_engine_destroy(e);
}

static void test_bulk_two_failures_met_as_alone(void) {
    for (int k = 1; k < 3; k++) {
        int kind = ALL_KINDS[k];
        char alone[256] = "", bulked[256] = "";
        int rc_alone = -1, rc_bulked = -1;
        two_failures_met(kind, 0, alone, sizeof alone, &rc_alone);
        two_failures_met(kind, ORDO_BULK_MAX, bulked, sizeof bulked, &rc_bulked);
        CHECK_EQ_LONG(rc_alone, ORDO_ERR_FAILED);
        CHECK_EQ_LONG(rc_bulked, ORDO_ERR_FAILED);
        CHECK_MSG(strstr(alone, "F_lo:") != NULL, "%s alone: '%s'", kind_str(kind), alone);
        CHECK_MSG(strcmp(alone, bulked) == 0, "%s: alone reported '%s', bulked '%s'", kind_str(kind), alone, bulked);
    }
}

/* ---- ops that repeat their predecessor's uses ---------------------------------- */

/* bulk_append lets an op whose vars and their use equal its predecessor's
 * share its use bytes, and bulk_run skips the failure bookkeeping until a
 * failure is met.  A run of such ops -- clean, then one failing, then ones
 * that must be skipped, one NO_SKIP, then a writer of other vars that makes
 * them clean again -- must end exactly as it does unbulked. */
enum { REP_OPS = 12, REP_VARS = 3 };

typedef struct {
    int ran[REP_OPS];
    var_out y[REP_VARS];
} rep_out;

static void run_repeats(int kind, int bulk_size, rep_out *out) {
    memset(out, 0, sizeof *out);
    ordo_engine *e = make_engine(kind, 2);
    if (!e) return;
    ordo_var *y[REP_VARS];
    for (int i = 0; i < REP_VARS; i++) y[i] = ordo_new_variable(e);
    long cells[REP_VARS] = {0};
    sop ops[REP_OPS];
    memset(ops, 0, sizeof ops);
    /* r: the var read (-1: none), w0/w1: the vars written (-1: none) */
    struct { int r, w0, w1, fail, no_skip; const char *name; } s[REP_OPS] = {
        {1, 0, -1, 0, 0, "P1"}, {1, 0, -1, 0, 0, "P2"}, {1, 0, -1, 0, 0, "P3"}, /* clean repeats */
        {0, 1, -1, 0, 0, "Q"},                                                /* same vars, uses swapped */
        {1, 0, -1, 1, 0, "F1"},                                               /* fails writing y0 */
        {1, 0, -1, 0, 0, "S1"}, {1, 0, -1, 0, 0, "S2"},                       /* meet y0's failure: skipped */
        {1, 0, -1, 0, 1, "N"},                                                /* NO_SKIP: runs, clears y0 */
        {1, 0, -1, 0, 0, "P4"},                                               /* clean again */
        {-1, 2, 2, 0, 0, "W1"}, {-1, 2, 2, 0, 0, "W2"},                       /* a var listed twice */
        {1, 0, -1, 0, 0, "P5"},
    };
    ordo_set_bulk_size(bulk_size);
    for (int k = 0; k < REP_OPS; k++) {
        atomic_init(&ops[k].ran, 0);
        ops[k].fail = s[k].fail;
        ordo_var *r[1], *w[2];
        int nr = 0, nw = 0;
        if (s[k].r >= 0) r[nr++] = y[s[k].r];
        if (s[k].w0 >= 0) ops[k].cells[nw] = &cells[s[k].w0], w[nw++] = y[s[k].w0];
        if (s[k].w1 >= 0) ops[k].cells[nw] = &cells[s[k].w1], w[nw++] = y[s[k].w1];
        ops[k].nw = nw;
        int prop = BULK | (s[k].no_skip ? ORDO_PROP_NO_SKIP : 0);
        CHECK_EQ_LONG(ordo_push_sync(e, sop_fn, &ops[k], NULL, cpu_ctx(0), r, nr, w, nw, prop, 0, s[k].name), 0);
    }
    read_vars(e, y, cells, REP_VARS, out->y);
    ordo_wait_for_all(e); /* F1's failure, reported */
    for (int k = 0; k < REP_OPS; k++) out->ran[k] = atomic_load(&ops[k].ran);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

static void test_bulk_repeated_uses_as_alone(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        rep_out alone, bulked;
        run_repeats(kind, 0, &alone);
        run_repeats(kind, ORDO_BULK_MAX, &bulked);
        /* the script's own expectations: S1 and S2 skipped, everything else ran */
        for (int i = 0; i < REP_OPS; i++)
            CHECK_MSG(alone.ran[i] == (i == 5 || i == 6 ? 0 : 1), "%s alone: op %d ran %d times", kn, i,
                      alone.ran[i]);
        CHECK_EQ_LONG(alone.y[0].cell, 6); /* P1-P3, N, P4, P5 */
        CHECK_EQ_LONG(alone.y[1].cell, 1); /* Q */
        CHECK_EQ_LONG(alone.y[2].cell, 4); /* W1, W2: 2 each */
        check_as_alone(kn, 'y', bulked.ran, alone.ran, REP_OPS, bulked.y, alone.y, REP_VARS);
    }
}

/* ---- when a bulk is handed over --------------------------------------------- */

static int tally_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_int *)param, 1);
    return 0;
}

typedef struct {
    ordo_engine *e;
    ordo_var *v;
    atomic_int *count;
    int n;
} pusher_arg;

static void *push_then_exit(void *arg) {
    pusher_arg *a = (pusher_arg *)arg;
    ordo_set_bulk_size(ORDO_BULK_MAX);
    for (int i = 0; i < a->n; i++) push_bulk(a->e, tally_op, a->count, NULL, 0, &a->v, 1, "exit_op");
    return NULL; /* no flush: the thread's exit hands the bulk over */
}

static void *wait_all_thread(void *arg) {
    ordo_wait_for_all((ordo_engine *)arg);
    return NULL;
}

static void test_bulk_handed_over(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    ordo_var *v = ordo_new_variable(e), *u = ordo_new_variable(e);
    atomic_int count;
    atomic_init(&count, 0);

    /* full: pushed at once, so another thread's wait covers it */
    ordo_set_bulk_size(4);
    for (int i = 0; i < 4; i++) CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "full"), 0);
    pthread_t t;
    pthread_create(&t, NULL, wait_all_thread, e);
    pthread_join(t, NULL);
    CHECK_EQ_LONG(atomic_load(&count), 4);
    CHECK_EQ_LONG(ordo_var_version(v), 4);

    /* not full: the thread's next engine call hands it over first */
    ordo_set_bulk_size(ORDO_BULK_MAX);
    for (int i = 0; i < 3; i++) CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "partial"), 0);
    CHECK(ordo_engine_pending(e) >= 0); /* flushes */
    pthread_create(&t, NULL, wait_all_thread, e);
    pthread_join(t, NULL);
    CHECK_EQ_LONG(atomic_load(&count), 7);

    /* an op pushed alone goes after the bulk (same var: rule 1 order) */
    for (int i = 0; i < 3; i++) CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &u, 1, "before"), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, tally_op, &count, NULL, cpu_ctx(0), NULL, 0, &u, 1, ORDO_PROP_NORMAL, 0, "alone"),
                  0);
    CHECK_EQ_LONG(ordo_wait_for_var(e, u), 0);
    CHECK_EQ_LONG(ordo_var_version(u), 4);

    /* ordo_bulk_flush; lowering the size flushes too */
    for (int i = 0; i < 2; i++) CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "flushed"), 0);
    CHECK_EQ_LONG(ordo_bulk_flush(), 0);
    CHECK_EQ_LONG(ordo_bulk_flush(), 0); /* nothing left: a no-op */
    CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "lowered"), 0);
    CHECK_EQ_LONG(ordo_set_bulk_size(0), ORDO_BULK_MAX);
    pthread_create(&t, NULL, wait_all_thread, e);
    pthread_join(t, NULL);
    CHECK_EQ_LONG(atomic_load(&count), 14);

    /* a thread that exits with ops collected */
    pusher_arg a = {e, v, &count, 5};
    pthread_create(&t, NULL, push_then_exit, &a);
    pthread_join(t, NULL);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&count), 19);
    CHECK_EQ_LONG(ordo_var_version(v), 15);
    ordo_engine_destroy(e);
}

/* A delete of this thread's own var hands the bulk over first: the delete's
 * function sees every op of the bulk done. */
static int delete_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_store((atomic_int *)param + 1, atomic_load((atomic_int *)param));
    return 0;
}

static void test_bulk_delete_and_destroy(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    atomic_int seen[2];
    atomic_init(&seen[0], 0);
    atomic_init(&seen[1], -1);
    ordo_var *v = ordo_new_variable(e);
    ordo_set_bulk_size(ORDO_BULK_MAX);
    for (int i = 0; i < 5; i++) push_bulk(e, tally_op, &seen[0], NULL, 0, &v, 1, "before_delete");
    CHECK_EQ_LONG(ordo_delete_variable(e, delete_fn, seen, cpu_ctx(0), v), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&seen[1]), 5);

    /* destroy on the bulking thread runs what it collected (rule 11) */
    atomic_int count;
    atomic_init(&count, 0);
    ordo_var *u = ordo_new_variable(e);
    for (int i = 0; i < 3; i++) push_bulk(e, tally_op, &count, NULL, 0, &u, 1, "before_destroy");
    ordo_engine_destroy(e);
    CHECK_EQ_LONG(atomic_load(&count), 3);
    ordo_set_bulk_size(0);
}

/* Another thread deletes a var while this thread's bulk still holds an op
 * on it: the op is dropped, its param freed, its error left for
 * wait_for_all; the other ops of the bulk still run. */
static atomic_int freed_params;
static void free_param(void *p) {
    (void)p;
    atomic_fetch_add(&freed_params, 1);
}

typedef struct {
    ordo_engine *e;
    ordo_var *v;
} delete_arg;

static void *delete_thread(void *arg) {
    delete_arg *a = (delete_arg *)arg;
    ordo_delete_variable(a->e, NULL, NULL, cpu_ctx(0), a->v);
    ordo_wait_for_all(a->e); /* the var's slot is dead once its delete ran */
    return NULL;
}

static void test_bulk_var_deleted_by_another_thread(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    ordo_var *v = ordo_new_variable(e), *u = ordo_new_variable(e);
    atomic_int count;
    atomic_init(&count, 0);
    atomic_store(&freed_params, 0);
    ordo_set_bulk_size(ORDO_BULK_MAX);
    CHECK_EQ_LONG(ordo_push_sync(e, tally_op, &count, free_param, cpu_ctx(0), NULL, 0, &u, 1, BULK, 0, "ok_op"), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, tally_op, &count, free_param, cpu_ctx(0), NULL, 0, &v, 1, BULK, 0, "lost_op"), 0);
    delete_arg a = {e, v};
    pthread_t t;
    pthread_create(&t, NULL, delete_thread, &a);
    pthread_join(t, NULL);
    CHECK_EQ_LONG(ordo_bulk_flush(), ORDO_ERR_DELETED);
    int rc = ordo_wait_for_all(e);
    CHECK_EQ_LONG(rc, ORDO_ERR_FAILED);
    CHECK_MSG(strstr(ordo_last_error(), "lost_op: not run") && strstr(ordo_last_error(), "deleted"), "message '%s'",
              ordo_last_error());
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&count), 1);
    CHECK_EQ_LONG(ordo_var_version(u), 1);
    CHECK_EQ_LONG(atomic_load(&freed_params), 2);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

/* The pending count, and so backpressure (rule 9), counts a bulk's ops one
 * by one: a bulk must not let 16 times max_inflight ops pile up. */
static void test_bulk_pending_counts_ops(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    ordo_var *v = ordo_new_variable(e);
    gate_t g;
    gate_init(&g);
    CHECK_EQ_LONG(push_simple(e, gate_op, &g, NULL, 0, &v, 1, "gate"), 0);
    ordo_set_bulk_size(ORDO_BULK_MAX);
    atomic_int count;
    atomic_init(&count, 0);
    for (int i = 0; i < 10; i++) CHECK_EQ_LONG(push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "behind_gate"), 0);
    CHECK_EQ_LONG(ordo_engine_pending(e), 11); /* hands the bulk over, then counts */
    gate_open(&g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(ordo_engine_pending(e), 0);
    CHECK_EQ_LONG(atomic_load(&count), 10);
    CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

/* ---- what is not bulked, and the settings ----------------------------------- */

static void test_bulk_not_while_profiling(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    ordo_var *v = ordo_new_variable(e);
    atomic_int count;
    atomic_init(&count, 0);
    ordo_set_bulk_size(ORDO_BULK_MAX);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    for (int i = 0; i < 10; i++) push_bulk(e, tally_op, &count, NULL, 0, &v, 1, "profiled_op");
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
    fclose(f);
    /* each op has its own row: 10 of them, and no bulk */
    const char *row = strstr(buf, "profiled_op");
    CHECK(row != NULL);
    CHECK_MSG(row && strtol(row + strlen("profiled_op"), NULL, 10) == 10, "summary:\n%s", buf);
    CHECK(strstr(buf, "bulk") == NULL);
    free(buf);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

static void test_bulk_settings(void) {
    CHECK_EQ_LONG(ordo_get_bulk_size(), 0); /* off unless asked for */
    CHECK_EQ_LONG(ordo_set_bulk_size(8), 0);
    CHECK_EQ_LONG(ordo_get_bulk_size(), 8);
    CHECK_EQ_LONG(ordo_set_bulk_size(1000), 8);
    CHECK_EQ_LONG(ordo_get_bulk_size(), ORDO_BULK_MAX);
    CHECK_EQ_LONG(ordo_set_bulk_size(-3), ORDO_BULK_MAX);
    CHECK_EQ_LONG(ordo_get_bulk_size(), 0);
    /* a bad push is refused at once, bulked or not */
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    ordo_set_bulk_size(ORDO_BULK_MAX);
    CHECK_EQ_LONG(ordo_push_sync(e, NULL, NULL, NULL, cpu_ctx(0), NULL, 0, NULL, 0, BULK, 0, "x"), ORDO_ERR_INVALID);
    ordo_var *bad = NULL;
    CHECK_EQ_LONG(ordo_push_sync(e, tally_op, NULL, NULL, cpu_ctx(0), &bad, 1, NULL, 0, BULK, 0, "x"), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(ordo_push_sync(e, tally_op, NULL, NULL, cpu_ctx(0), NULL, 0, NULL, 0, BULK | 77, 0, "x"),
                  ORDO_ERR_INVALID);
    /* an op with more vars than a bulk takes per op is pushed alone */
    ordo_var *many[20];
    atomic_int count;
    atomic_init(&count, 0);
    for (int i = 0; i < 20; i++) many[i] = ordo_new_variable(e);
    CHECK_EQ_LONG(push_bulk(e, tally_op, &count, many, 19, many + 19, 1, "wide"), 0);
    CHECK_EQ_LONG(push_bulk(e, tally_op, &count, many, 2, many + 2, 1, "narrow"), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&count), 2);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

/* ---- a bulk's table of vars fills ----------------------------------------- */

typedef struct {
    const double *r0, *r1; /* NULL: a one-var op, w += 1 */
    double *w;
} cell_op;

static int cell_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    cell_op *o = (cell_op *)param;
    if (o->r0) *o->w = (*o->r0 + *o->r1) / 3 + 1;
    else *o->w += 1;
    return 0;
}

/* Ops over 400 vars fill a bulk's table of vars (127) long before 64 ops:
 * each time the bulk must be handed over and a new one started, through
 * both ways an op joins a bulk (one var; two or more).  Checked against
 * the same ops run in order. */
static void test_bulk_var_table_full(void) {
    enum { NV = 400, NOPS = 20000 };
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var **vars = malloc(NV * sizeof *vars);
    double *cell = malloc(NV * sizeof *cell), *oracle = malloc(NV * sizeof *oracle);
    cell_op *ops = malloc(NOPS * sizeof *ops);
    rng_t g;
    rng_init(&g, test_seed() ^ 0x7ab1e);
    for (int i = 0; i < NV; i++) {
        vars[i] = ordo_new_variable(e);
        cell[i] = oracle[i] = (double)i;
    }
    ordo_set_bulk_size(ORDO_BULK_MAX);
    for (int k = 0; k < NOPS; k++) {
        int w = (int)rng_range(&g, 0, NV - 1);
        if (rng_range(&g, 0, 3) == 0) {
            ops[k] = (cell_op){NULL, NULL, &cell[w]};
            oracle[w] += 1;
            CHECK_EQ_LONG(push_bulk(e, cell_fn, &ops[k], NULL, 0, &vars[w], 1, "one"), 0);
        } else {
            int a = (int)rng_range(&g, 0, NV - 1), b = (int)rng_range(&g, 0, NV - 1);
            ops[k] = (cell_op){&cell[a], &cell[b], &cell[w]};
            oracle[w] = (oracle[a] + oracle[b]) / 3 + 1;
            ordo_var *r[2] = {vars[a], vars[b]};
            CHECK_EQ_LONG(push_bulk(e, cell_fn, &ops[k], r, 2, &vars[w], 1, "three"), 0);
        }
    }
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    long bad = 0;
    for (int i = 0; i < NV; i++) bad += cell[i] != oracle[i];
    CHECK_MSG(bad == 0, "%ld of %d vars differ from the serial run", bad, NV);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
    free(vars);
    free(cell);
    free(oracle);
    free(ops);
}

/* ---- the pace: ops that run long are pushed alone ----------------------------- */

/* An op that notes the engine op it ran in (a bulk's ops share one), and
 * spins spin_us first, or waits at a gate. */
typedef struct {
    gate_t *gate;
    double spin_us;
    void *ran_in;
} paced_t;

static int paced_op(const ordo_run_ctx *rc, void *param) {
    paced_t *p = (paced_t *)param;
    p->ran_in = rc->op_;
    if (p->gate) gate_pass(p->gate);
    if (p->spin_us > 0) spin_us(p->spin_us);
    return 0;
}

static ordo_engine *pace_engine(int op_max_ns) {
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_PER_DEVICE;
    c.cpu_workers = 2;
    c.bulk_op_max_ns = op_max_ns;
    return ordo_engine_create(&c);
}

/* Whether two bulkable ops pushed back to back become one engine op.  The
 * first waits at a gate until both are pushed, so that pushed alone they
 * are two live ops at once, never one op block reused. */
static bool pushed_together(ordo_engine *e, ordo_var *a, ordo_var *b) {
    gate_t g;
    gate_init(&g);
    paced_t first = {&g, 0, NULL}, second = {NULL, 0, NULL};
    CHECK_EQ_LONG(push_bulk(e, paced_op, &first, NULL, 0, &a, 1, "first"), 0);
    CHECK_EQ_LONG(push_bulk(e, paced_op, &second, NULL, 0, &b, 1, "second"), 0);
    gate_open(&g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
    CHECK(first.ran_in != NULL && second.ran_in != NULL);
    return first.ran_in == second.ran_in;
}

/* Rounds of n bulkable ops of spin_us each on vars[0..nv), then a wait. */
static void push_round(ordo_engine *e, ordo_var **vars, int nv, int n, double us) {
    paced_t *ops = calloc((size_t)n, sizeof *ops);
    for (int i = 0; i < n; i++) {
        ops[i].spin_us = us;
        CHECK_EQ_LONG(push_bulk(e, paced_op, &ops[i], NULL, 0, &vars[i % nv], 1, "round"), 0);
    }
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    for (int i = 0; i < n; i++) CHECK(ops[i].ran_in != NULL);
    free(ops);
}

/* Ops that run longer than bulk_op_max_ns are pushed alone, so that they
 * can run side by side, but for chains (an op that must wait for an op of
 * the bulk anyway joins it); when the ops are short again, bulks come back. */
static void test_bulk_pace(void) {
    /* 20 us: well above what an empty op takes even under valgrind */
    ordo_engine *e = pace_engine(20000);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *vars[8];
    for (int i = 0; i < 8; i++) vars[i] = ordo_new_variable(e);
    ordo_set_bulk_size(16);
    CHECK_MSG(pushed_together(e, vars[0], vars[1]), "a fresh engine bulks");

    /* The engine times one bulk in 8 per thread: a few rounds of 50 us ops
     * teach it that they are long. */
    int rounds = 0;
    bool together = true;
    while (together && rounds < 200) {
        push_round(e, vars, 8, 64, 50);
        together = pushed_together(e, vars[0], vars[1]);
        rounds++;
    }
    CHECK_MSG(!together, "50 us ops still bulked after %d rounds of 64", rounds);
    printf("    long ops pushed alone after %d round(s) of 64\n", rounds);
    /* ...unless they form a chain: the second op waits for the first
     * anyway, so bulking them costs no parallelism. */
    CHECK_MSG(pushed_together(e, vars[0], vars[0]), "a chain of long ops is still bulked");

    /* Pushed alone, ops are still timed (one in 8), so empty ones bring
     * the mean down and bulks back. */
    rounds = 0;
    while (!together && rounds < 1000) {
        push_round(e, vars, 8, 64, 0);
        together = pushed_together(e, vars[0], vars[1]);
        rounds++;
    }
    CHECK_MSG(together, "empty ops still pushed alone after %d rounds of 64", rounds);
    printf("    empty ops bulked again after %d round(s) of 64\n", rounds);
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);

    /* A negative bulk_op_max_ns: bulks fill whatever their ops take. */
    e = pace_engine(-1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e);
    ordo_set_bulk_size(16);
    for (int r = 0; r < 20; r++) push_round(e, &a, 1, 64, 50);
    CHECK_MSG(pushed_together(e, a, b), "bulk_op_max_ns -1 still bulks long ops");
    ordo_set_bulk_size(0);
    ordo_engine_destroy(e);
}

int main(void) {
    printf("# seed %#llx (set ORDO_TEST_SEED to change), scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_bulk_random_naive);
    TEST(test_bulk_random_pooled);
    TEST(test_bulk_random_perdevice);
    TEST_T(test_bulk_failures_as_alone, 60);
    TEST_T(test_bulk_repeated_uses_as_alone, 60);
    TEST_T(test_bulk_two_failures_met_as_alone, 60);
    TEST_T(test_bulk_handed_over, 60);
    TEST_T(test_bulk_delete_and_destroy, 60);
    TEST_T(test_bulk_var_deleted_by_another_thread, 60);
    TEST_T(test_bulk_pending_counts_ops, 60);
    TEST_T(test_bulk_not_while_profiling, 60);
    TEST_T(test_bulk_settings, 60);
    TEST_T(test_bulk_var_table_full, 60);
    TEST_T(test_bulk_pace, 120);
    return harness_end();
}
