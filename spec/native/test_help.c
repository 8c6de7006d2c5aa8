/*
 * test_help.c - idle workers helping with a large op (ordo_parallel_for,
 * src/help.c).
 *
 * What must hold: every chunk of [0, n) runs exactly once, whoever runs it;
 * the call returns only after all of them ran (their writes visible to the
 * caller); a failed chunk's value comes back; helping never deadlocks --
 * not with two ops of one pool splitting at once, not with a chunk that
 * splits again, not with ops arriving while workers help -- and the
 * results equal a serial run.  Run under TSan and ASan by `make check`.
 */
#include "harness.h"
#include "test_util.h"

#include "ordo_kernel.h"

/* ---- chunk functions ------------------------------------------------------ */

typedef struct {
    int64_t n;
    atomic_int *hits;   /* hits[i]: how many chunks covered item i */
    atomic_long chunks; /* chunks run */
    int fail_at;        /* a chunk containing this item returns 7 (-1: none) */
    int nested;         /* each chunk splits again (serially: see help.c) */
} cover;

static int cover_chunk(int64_t lo, int64_t hi, void *arg) {
    cover *c = arg;
    atomic_fetch_add(&c->chunks, 1);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
    if (c->fail_at >= lo && c->fail_at < hi) return 7;
    return 0;
}

static int nested_inner(int64_t lo, int64_t hi, void *arg) {
    (void)lo, (void)hi, (void)arg;
    return 0;
}

static int nested_chunk(int64_t lo, int64_t hi, void *arg) {
    int r = cover_chunk(lo, hi, arg);
    return r ? r : ordo_parallel_for(hi - lo, 1, nested_inner, NULL);
}

static cover *cover_new(int64_t n) {
    cover *c = calloc(1, sizeof *c);
    c->n = n;
    c->hits = calloc((size_t)n, sizeof *c->hits);
    c->fail_at = -1;
    return c;
}

static void cover_free(cover *c) {
    free(c->hits);
    free(c);
}

static int covered_once(const cover *c) {
    for (int64_t i = 0; i < c->n; i++)
        if (atomic_load(&c->hits[i]) != 1) return 0;
    return 1;
}

/* ---- an op that splits its work ------------------------------------------------ */

typedef struct {
    cover *c;
    int64_t grain;
    atomic_int rc;
} split_op;

static int split_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    split_op *s = param;
    atomic_store(&s->rc, ordo_parallel_for(s->c->n, s->grain, s->c->nested ? nested_chunk : cover_chunk, s->c));
    return 0;
}

static void push_split(ordo_engine *e, split_op *s, ordo_var *v) {
    CHECK(ordo_push_sync(e, split_fn, s, NULL, cpu_ctx(0), NULL, 0, &v, 1, ORDO_PROP_NORMAL, 0, "split") == ORDO_OK);
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_help_outside_a_worker_runs_in_order(void) {
    cover *c = cover_new(1000);
    CHECK(ordo_parallel_for(1000, 10, cover_chunk, c) == 0);
    CHECK(covered_once(c));
    CHECK_EQ_LONG(atomic_load(&c->chunks), 1); /* one call over everything */
    CHECK(ordo_parallel_for(0, 10, cover_chunk, c) == 0);
    CHECK(ordo_parallel_for(-5, 10, cover_chunk, c) == 0);
    /* no function: refused, not called */
    CHECK(ordo_parallel_for(10, 1, NULL, NULL) == ORDO_ERR_INVALID && strstr(ordo_last_error(), "fn is NULL"));
    CHECK_EQ_LONG(atomic_load(&c->chunks), 1);
    cover_free(c);
}

static void test_help_every_chunk_once(void) {
    static const int workers[] = {1, 2, 4};
    for (int w = 0; w < ARRAY_LEN(workers); w++) {
        ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, workers[w]);
        ordo_var *v = ordo_new_variable(e);
        for (int round = 0; round < 20; round++) {
            int64_t n = 1000 + round * 7919;
            int64_t grain = 1 + round * 37;
            cover *c = cover_new(n);
            split_op s = {c, grain, 0};
            push_split(e, &s, v);
            CHECK(ordo_wait_for_var(e, v) == ORDO_OK);
            CHECK_MSG(covered_once(c), "workers=%d n=%lld grain=%lld", workers[w], (long long)n, (long long)grain);
            CHECK_EQ_LONG(atomic_load(&c->chunks) >= 1, 1);
            CHECK_EQ_LONG(atomic_load(&s.rc), 0);
            cover_free(c);
        }
        ordo_engine_destroy(e);
    }
}

static void test_help_failed_chunk_returned(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    ordo_var *v = ordo_new_variable(e);
    for (int at = 0; at < 100000; at += 9973) {
        cover *c = cover_new(100000);
        c->fail_at = at;
        split_op s = {c, 1000, 0};
        push_split(e, &s, v);
        CHECK(ordo_wait_for_var(e, v) == ORDO_OK);
        CHECK_EQ_LONG(atomic_load(&s.rc), 7);
        CHECK(covered_once(c)); /* a failure does not stop the other chunks */
        cover_free(c);
    }
    ordo_engine_destroy(e);
}

/* Several ops of one pool split at once (one gets the help slot, the others
 * run alone), chunks split again, and small ops keep arriving. */
static int small_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_long *)param, 1);
    return 0;
}

static void test_help_contended_nested_and_interleaved(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 4);
    enum { NOPS = 24 };
    ordo_var *vars[NOPS];
    split_op s[NOPS];
    atomic_long small = 0;
    ordo_var *sv = ordo_new_variable(e);
    for (int i = 0; i < NOPS; i++) {
        vars[i] = ordo_new_variable(e);
        s[i].c = cover_new(20000 + 1000 * i);
        s[i].c->nested = i % 3 == 0;
        s[i].grain = 64 + i;
        atomic_init(&s[i].rc, -1);
    }
    long nsmall = scaled(2000, 200);
    for (int i = 0; i < NOPS; i++) {
        push_split(e, &s[i], vars[i]);
        for (long k = 0; k < nsmall / NOPS; k++)
            CHECK(ordo_push_sync(e, small_fn, &small, NULL, cpu_ctx(0), NULL, 0, &sv, 1, ORDO_PROP_NORMAL, 0,
                                 "small") == ORDO_OK);
    }
    CHECK(ordo_wait_for_all(e) == ORDO_OK);
    for (int i = 0; i < NOPS; i++) {
        CHECK_MSG(covered_once(s[i].c), "op %d", i);
        CHECK_EQ_LONG(atomic_load(&s[i].rc), 0);
        cover_free(s[i].c);
    }
    CHECK_EQ_LONG(atomic_load(&small), nsmall / NOPS * NOPS);
    ordo_engine_destroy(e);
}

/* Two engines' pools, each with an op splitting: pools do not share slots. */
static void test_help_two_engines(void) {
    ordo_engine *e1 = make_engine(ORDO_ENGINE_PER_DEVICE, 2), *e2 = make_engine(ORDO_ENGINE_POOLED, 2);
    ordo_var *v1 = ordo_new_variable(e1), *v2 = ordo_new_variable(e2);
    for (int r = 0; r < 10; r++) {
        cover *c1 = cover_new(50000), *c2 = cover_new(60000);
        split_op s1 = {c1, 500, 0}, s2 = {c2, 700, 0};
        push_split(e1, &s1, v1);
        push_split(e2, &s2, v2);
        CHECK(ordo_wait_for_all(e1) == ORDO_OK);
        CHECK(ordo_wait_for_all(e2) == ORDO_OK);
        CHECK(covered_once(c1));
        CHECK(covered_once(c2));
        cover_free(c1);
        cover_free(c2);
    }
    ordo_engine_destroy(e1);
    ordo_engine_destroy(e2);
}

/* The pool's idle worker does take chunks: the first chunk waits (bounded)
 * until another thread is inside a chunk too. */
typedef struct {
    atomic_int inside, first_done, met;
} meet;

static int meet_chunk(int64_t lo, int64_t hi, void *arg) {
    (void)hi;
    meet *m = arg;
    atomic_fetch_add(&m->inside, 1);
    if (lo == 0) {
        double t0 = now_s();
        while (atomic_load(&m->inside) < 2 && now_s() - t0 < 20) sched_yield();
        atomic_store(&m->met, atomic_load(&m->inside) >= 2);
    }
    return 0;
}

typedef struct {
    meet m;
} meet_op;

static int meet_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    meet_op *o = param;
    return ordo_parallel_for(2, 1, meet_chunk, &o->m);
}

static void test_help_idle_worker_takes_chunks(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    ordo_var *v = ordo_new_variable(e);
    for (int r = 0; r < 5; r++) {
        meet_op o;
        memset(&o, 0, sizeof o);
        CHECK(ordo_push_sync(e, meet_fn, &o, NULL, cpu_ctx(0), NULL, 0, &v, 1, ORDO_PROP_NORMAL, 0, "meet") ==
              ORDO_OK);
        CHECK(ordo_wait_for_var(e, v) == ORDO_OK);
        CHECK_MSG(atomic_load(&o.m.met), "round %d: no idle worker took the second chunk", r);
    }
    ordo_engine_destroy(e);
}

/* Chunk bounds near INT64_MAX: n + grain - 1 and next * grain overflowed
 * (undefined behaviour: the ASan+UBSan build aborts) for a grain past half
 * of n when a worker offered the chunks.  Computed in chunk numbers now. */
typedef struct {
    atomic_llong calls, covered;
    atomic_int bad;
} huge_cover;

static int huge_chunk(int64_t lo, int64_t hi, void *ctx) {
    huge_cover *c = ctx;
    if (lo < 0 || hi <= lo) atomic_store(&c->bad, 1);
    atomic_fetch_add(&c->calls, 1);
    atomic_fetch_add(&c->covered, hi - lo);
    return 0;
}

typedef struct {
    int64_t n, grain;
    huge_cover *c;
    atomic_int rc;
} huge_op;

static int huge_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    huge_op *h = param;
    atomic_store(&h->rc, ordo_parallel_for(h->n, h->grain, huge_chunk, h->c));
    return 0;
}

static void test_help_huge_bounds(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 4);
    ordo_var *v = ordo_new_variable(e);
    const int64_t grains[] = {INT64_MAX / 2 + 1, INT64_MAX / 3, INT64_MAX - 1, INT64_MAX};
    for (int i = 0; i < ARRAY_LEN(grains); i++) {
        huge_cover c;
        atomic_init(&c.calls, 0);
        atomic_init(&c.covered, 0);
        atomic_init(&c.bad, 0);
        huge_op h = {INT64_MAX, grains[i], &c, 0};
        CHECK(ordo_push_sync(e, huge_fn, &h, NULL, cpu_ctx(0), NULL, 0, &v, 1, ORDO_PROP_NORMAL, 0, "huge") == 0);
        CHECK(ordo_wait_for_var(e, v) == ORDO_OK);
        CHECK_EQ_LONG(atomic_load(&h.rc), 0);
        CHECK_EQ_LONG(atomic_load(&c.bad), 0);
        CHECK_EQ_LONG(atomic_load(&c.covered), INT64_MAX); /* every index once, whoever ran the chunks */
    }
    ordo_engine_destroy(e);
}

int main(void) {
    TEST_T(test_help_huge_bounds, 60);
    printf("# scale %g\n", test_scale());
    TEST_T(test_help_outside_a_worker_runs_in_order, 60);
    TEST_T(test_help_every_chunk_once, 120);
    TEST_T(test_help_failed_chunk_returned, 60);
    TEST_T(test_help_idle_worker_takes_chunks, 120);
    TEST_T(test_help_contended_nested_and_interleaved, 120);
    TEST_T(test_help_two_engines, 60);
    return harness_end();
}
