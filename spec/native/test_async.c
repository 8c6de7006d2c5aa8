/*
 * test_async.c - async ops: ordo_push_async, ordo_done_complete from other
 * threads, ORDO_PROP_ASYNC, and reusable operators.
 *
 * An async op is running from the moment its fn is called until
 * ordo_done_complete is called (from any thread); the dependency rules hold
 * across that whole interval.  Random async workloads against the serial
 * oracle are in test_random_async.c.
 */
#include "harness.h"
#include "test_util.h"

static completer_t *g_comp;

/* A chain of async writers on v interleaved with async readers.  Writers
 * append to a log (guarded by v); readers check the log length equals the
 * number of writers pushed before them, twice with a pause between (so a
 * writer that starts while the reader is still running is caught). */
typedef struct {
    int *log, *nlog;
    int idx;        /* writer: its index; reader: writers before it */
    int is_write;
    atomic_int *bad;
} chain_op;

static void chain_work(void *arg) {
    chain_op *c = (chain_op *)arg;
    if (c->is_write) {
        if (*c->nlog != c->idx) atomic_fetch_add(c->bad, 1);
        c->log[(*c->nlog)++] = c->idx;
    } else {
        int a = *c->nlog;
        spin_us(20);
        int b = *c->nlog;
        if (a != c->idx || b != c->idx) atomic_fetch_add(c->bad, 1);
    }
}

static void chain_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    completer_submit(g_comp, done, chain_work, param, NULL, ((chain_op *)param)->idx % 3 ? 0 : 30);
}

static void test_async_completed_from_other_threads(void) {
    int n = (int)scaled(2000, 300);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        completer_t comp;
        completer_start(&comp, 3);
        g_comp = &comp;
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (e) {
            ordo_var *v = ordo_new_variable(e);
            int *log = (int *)calloc((size_t)n, sizeof(int));
            int nlog = 0;
            atomic_int bad;
            atomic_init(&bad, 0);
            chain_op *ops = (chain_op *)calloc((size_t)n * 3, sizeof *ops);
            int nops = 0, perr = 0;
            for (int i = 0; i < n; i++) {
                chain_op *w = &ops[nops++];
                *w = (chain_op){log, &nlog, i, 1, &bad};
                perr += ordo_push_async(e, chain_async, w, NULL, cpu_ctx(0), NULL, 0, &v, 1, 0, 0, "w") != 0;
                for (int r = 0; r < 2; r++) {
                    chain_op *rd = &ops[nops++];
                    *rd = (chain_op){log, &nlog, i + 1, 0, &bad};
                    perr += ordo_push_async(e, chain_async, rd, NULL, cpu_ctx(0), &v, 1, NULL, 0, 0, 0, "r") != 0;
                }
            }
            CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
            CHECK_EQ_LONG(nlog, n);
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            CHECK_EQ_LONG(perr, 0);
            CHECK_MSG(atomic_load(&bad) == 0, "%s: %d async ops saw the wrong writers", kind_str(kind),
                      atomic_load(&bad));
            CHECK_EQ_LONG(ordo_var_version(v), n);
            ordo_engine_destroy(e);
            free(log);
            free(ops);
        }
        completer_stop(&comp);
    }
}

/* An async op that completes 100 ms later from another thread: ops that
 * depend on it wait; wait_for_var waits for the completion, not the fn's
 * return. */
typedef struct {
    atomic_int completed;
    atomic_int dependent_saw_incomplete;
} slow_state;

static void slow_work(void *arg) { atomic_store(&((slow_state *)arg)->completed, 1); }

static void slow_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    completer_submit(g_comp, done, slow_work, param, NULL, 100000);
}

static int dependent_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    slow_state *s = (slow_state *)param;
    if (!atomic_load(&s->completed)) atomic_store(&s->dependent_saw_incomplete, 1);
    return 0;
}

static void test_async_op_runs_until_done_complete(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        completer_t comp;
        completer_start(&comp, 1);
        g_comp = &comp;
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (e) {
            ordo_var *v = ordo_new_variable(e), *out = ordo_new_variable(e);
            slow_state s;
            atomic_init(&s.completed, 0);
            atomic_init(&s.dependent_saw_incomplete, 0);
            CHECK_EQ_LONG(ordo_push_async(e, slow_async, &s, NULL, cpu_ctx(0), NULL, 0, &v, 1, 0, 0, "slow"), 0);
            CHECK_EQ_LONG(push_simple(e, dependent_op, &s, &v, 1, &out, 1, "reader"), 0);
            CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
            CHECK_MSG(atomic_load(&s.completed), "%s: wait_for_var returned before done_complete",
                      kind_str(kind));
            CHECK_EQ_LONG(ordo_wait_for_var(e, out), 0);
            CHECK_MSG(!atomic_load(&s.dependent_saw_incomplete),
                      "%s: a reader ran before the async writer completed", kind_str(kind));
            CHECK_EQ_LONG(ordo_var_version(v), 1);
            ordo_engine_destroy(e);
        }
        completer_stop(&comp);
    }
}

/* ORDO_PROP_ASYNC: "a cheap launcher: runs in the thread that makes it
 * ready".  Pushed with nothing to wait for, that is the pushing thread; and
 * ordering still holds when it has to wait. */
typedef struct {
    pthread_t th;
    int worker_id;
    atomic_int ran;
    int *cell;
    int expect;
    atomic_int *bad;
} launcher_state;

static void launcher(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    launcher_state *s = (launcher_state *)param;
    s->th = pthread_self();
    s->worker_id = rc->worker_id;
    if (s->cell) {
        if (*s->cell != s->expect) atomic_fetch_add(s->bad, 1);
        (*s->cell)++;
    }
    atomic_store(&s->ran, 1);
    ordo_done_complete(done, NULL);
}

static void test_async_prop_async_launcher(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        launcher_state s;
        memset(&s, 0, sizeof s);
        CHECK_EQ_LONG(ordo_push_async(e, launcher, &s, NULL, cpu_ctx(0), NULL, 0, &v, 1,
                                      ORDO_PROP_ASYNC, 0, "launcher"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(atomic_load(&s.ran), 1);
        CHECK_MSG(pthread_equal(s.th, pthread_self()),
                  "%s: a ready ORDO_PROP_ASYNC op did not run in the pushing thread", kind_str(kind));
        /* a chain mixing ASYNC launchers and normal ops keeps its order */
        int cell = 0;
        atomic_int bad;
        atomic_init(&bad, 0);
        enum { N = 2000 };
        launcher_state *ls = (launcher_state *)calloc(N, sizeof *ls);
        for (int i = 0; i < N; i++) {
            ls[i].cell = &cell;
            ls[i].expect = i;
            ls[i].bad = &bad;
            CHECK_EQ_LONG(ordo_push_async(e, launcher, &ls[i], NULL, cpu_ctx(i % 2), NULL, 0, &v, 1,
                                          i % 2 ? ORDO_PROP_ASYNC : ORDO_PROP_NORMAL, 0, "mix"), 0);
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(cell, N);
        CHECK_EQ_LONG(atomic_load(&bad), 0);
        free(ls);
        ordo_engine_destroy(e);
    }
}

/* Thousands of async ops outstanding at once, completed by four threads in
 * whatever order they like (independent vars). */
static void count_work(void *arg) { atomic_fetch_add((atomic_long *)arg, 1); }

static void many_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    completer_submit(g_comp, done, count_work, param, NULL, 0);
}

static void test_async_many_outstanding(void) {
    long n = scaled(20000, 2000);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        completer_t comp;
        completer_start(&comp, 4);
        g_comp = &comp;
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (e) {
            enum { NV = 256 };
            ordo_var *vs[NV];
            for (int i = 0; i < NV; i++) vs[i] = ordo_new_variable(e);
            atomic_long count;
            atomic_init(&count, 0);
            long perr = 0;
            for (long i = 0; i < n; i++)
                perr += ordo_push_async(e, many_async, &count, NULL, cpu_ctx((int)(i % 2)), &vs[(i * 7) % NV],
                                        1, &vs[i % NV], 1, 0, (int)(i % 4), "many") != 0;
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            CHECK_EQ_LONG(perr, 0);
            CHECK_EQ_LONG(atomic_load(&count), n);
            ordo_engine_destroy(e);
        }
        completer_stop(&comp);
    }
}

/* Reusable operators: the same operator pushed many times runs each time, in
 * push order against its own vars; different ctx and priority per push. */
typedef struct {
    int *cell;
    int runs; /* guarded by the operator's written var */
    ordo_ctx last_ctx;
} opr_state;

static void opr_fn(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    opr_state *s = (opr_state *)param;
    (*s->cell)++;
    s->runs++;
    s->last_ctx = rc->ctx;
    ordo_done_complete(done, NULL);
}

static void opr_fn_later(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    opr_state *s = (opr_state *)param;
    s->last_ctx = rc->ctx;
    completer_submit(g_comp, done, NULL, NULL, NULL, 0); /* completes from another thread */
}

static void test_async_operator_reuse(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        completer_t comp;
        completer_start(&comp, 2);
        g_comp = &comp;
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (e) {
            ordo_var *v = ordo_new_variable(e), *r = ordo_new_variable(e);
            int cell = 0;
            opr_state s = {&cell, 0, {0, 0}};
            ordo_opr *op = ordo_new_operator(e, opr_fn, &s, NULL, &r, 1, &v, 1, 0, "reused");
            opr_state s2 = {&cell, 0, {0, 0}};
            ordo_opr *op2 = ordo_new_operator(e, opr_fn_later, &s2, NULL, &v, 1, &r, 1, 0, "reused2");
            CHECK(op && op2);
            if (op && op2) {
                for (int i = 0; i < 1000; i++) {
                    CHECK_EQ_LONG(ordo_push(e, op, cpu_ctx(i % 3), i % 5 - 2), 0);
                    if (i % 10 == 0) CHECK_EQ_LONG(ordo_push(e, op2, cpu_ctx(1), 0), 0);
                }
                CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
                CHECK_EQ_LONG(s.runs, 1000);
                CHECK_EQ_LONG(cell, 1000);
                CHECK_EQ_LONG(ordo_var_version(v), 1000);
                CHECK_EQ_LONG(ordo_var_version(r), 100);
                CHECK_EQ_LONG(s.last_ctx.dev_id, 999 % 3);
                CHECK_EQ_LONG(s2.last_ctx.dev_id, 1);
                ordo_delete_operator(e, op);
                ordo_delete_operator(e, op2);
            }
            ordo_engine_destroy(e);
        }
        completer_stop(&comp);
    }
}

/* The thread that completes an async op pushes ops of its own first and
 * waits for them, before it calls ordo_done_complete.  A naive push
 * returns once its own op has run -- async ones once completed -- and not
 * later: it once waited until the whole engine was idle, so the completer's
 * push waited for the async op that only the completer would complete (a
 * deadlock, on the naive engine only). */
typedef struct {
    ordo_engine *e;
    ordo_var *other;
    _Atomic(ordo_done *) done; /* handed over by the async op's function */
    atomic_long other_ran;
    atomic_int push_rc, ran_at_return, wait_rc, completed;
} completer_first;

static void *completer_first_main(void *p) {
    completer_first *c = (completer_first *)p;
    while (!atomic_load(&c->done)) sleep_ms(1);
    atomic_store(&c->push_rc, push_simple(c->e, count_op, &c->other_ran, NULL, 0, &c->other, 1, "completer's own"));
    atomic_store(&c->ran_at_return, (int)atomic_load(&c->other_ran));
    atomic_store(&c->wait_rc, ordo_wait_for_var(c->e, c->other));
    sleep_ms(20); /* the async op's pusher is waiting meanwhile, on the naive engine */
    atomic_store(&c->completed, 1);
    ordo_done_complete(atomic_load(&c->done), NULL);
    return NULL;
}

static void completer_first_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    atomic_store(&((completer_first *)param)->done, done);
}

static void test_async_completer_pushes_first(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *a = ordo_new_variable(e);
        completer_first c;
        memset(&c, 0, sizeof c);
        c.e = e;
        c.other = ordo_new_variable(e);
        atomic_init(&c.other_ran, 0);
        atomic_init(&c.push_rc, -1);
        atomic_init(&c.ran_at_return, -1);
        atomic_init(&c.wait_rc, -1);
        atomic_init(&c.completed, 0);
        atomic_init(&c.done, NULL);
        pthread_t th;
        if (pthread_create(&th, NULL, completer_first_main, &c) != 0) {
            CHECK(0);
            ordo_engine_destroy(e);
            continue;
        }
        CHECK_EQ_LONG(ordo_push_async(e, completer_first_async, &c, NULL, cpu_ctx(0), NULL, 0, &a, 1,
                                      ORDO_PROP_NORMAL, 0, "async"), 0);
        if (kind == ORDO_ENGINE_NAIVE) {
            /* returned once its own op completed, and nothing is left pending */
            CHECK_MSG(atomic_load(&c.completed) == 1, "naive push_async returned before its op completed");
            CHECK_EQ_LONG(ordo_engine_pending(e), 0);
        }
        CHECK_EQ_LONG(ordo_wait_for_var(e, a), 0);
        CHECK_EQ_LONG(atomic_load(&c.completed), 1);
        CHECK_EQ_LONG(atomic_load(&c.push_rc), 0);
        if (kind == ORDO_ENGINE_NAIVE) CHECK_EQ_LONG(atomic_load(&c.ran_at_return), 1);
        CHECK_EQ_LONG(atomic_load(&c.wait_rc), 0);
        CHECK_EQ_LONG(atomic_load(&c.other_ran), 1);
        pthread_join(th, NULL);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        ordo_engine_destroy(e);
    }
}

int main(void) {
    printf("# seed %#llx, scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_async_completed_from_other_threads);
    TEST(test_async_op_runs_until_done_complete);
    TEST(test_async_prop_async_launcher);
    TEST(test_async_many_outstanding);
    TEST(test_async_operator_reuse);
    TEST_T(test_async_completer_pushes_first, 30);
    return harness_end();
}
