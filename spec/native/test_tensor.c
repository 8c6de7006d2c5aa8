/*
 * test_tensor.c - the C tensor layer (src/ordo_tensor.h): storages, views,
 * pushes, hazards, the parameter pool under threads, engines created for
 * front ends, and memory accounting.  The Lua package has its busted specs
 * (spec/ *_spec.lua); this file checks what they cannot see: that every
 * byte is freed after its ops (valgrind, ASan), and that the pool and the
 * refcounts are race-free (TSan).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_util.h"
#include "ordo_tensor.h"

static const ordo_ctx CPU0 = {ORDO_CPU, 0};
static int K_fill, K_add, K_copy, K_sum, K_mul_scalar;

static ordo_tensor *vec(ordo_engine *e, int64_t n, float value) {
    int64_t shape[1] = {n};
    ordo_tensor *t = ordo_tensor_empty(e, ORDO_F32, 1, shape, CPU0);
    if (t) ordo_tensor_op1(K_fill, "fill_", t, NULL, value);
    return t;
}

static float at(const ordo_tensor *t, int64_t i) {
    return ((const float *)ordo_tensor_data(t))[i * t->strides[0]];
}

static void settle(void) {
    ordo_wait_for_all(ordo_engine_default());
}

/* A storage is freed after its pending ops, whoever drops it. */
static void test_storage_freed_after_ops(void) {
    settle();
    int64_t live0 = ordo_storage_live_count(), bytes0 = ordo_storage_live_bytes();
    ordo_tensor *acc = vec(NULL, 64, 0);
    long n = scaled(2000, 50);
    for (long i = 0; i < n; i++) {
        ordo_tensor *tmp = vec(NULL, 64, 1);
        CHECK(ordo_tensor_op2(K_add, "add_", acc, acc, tmp) == 0);
        ordo_tensor_free(tmp); /* its add may not have run yet */
    }
    CHECK(ordo_tensor_wait(acc) == 0);
    CHECK(at(acc, 0) == (float)n && at(acc, 63) == (float)n);
    ordo_tensor_free(acc);
    settle();
    CHECK_EQ_LONG(ordo_storage_live_count(), live0);
    CHECK_EQ_LONG(ordo_storage_live_bytes(), bytes0);
}

/* An op that holds its var until the test lets it go. */
static int hold_fn(const ordo_run_ctx *rc, void *p) {
    (void)rc;
    while (!atomic_load((atomic_int *)p)) sched_yield();
    return 0;
}

/* A perdevice engine with one CPU worker for the tensor layer;
 * run_now_max_elements as given (0: the default). */
static ordo_engine *one_worker_engine(int run_now_max_elements) {
    ordo_engine_config cfg = {0};
    cfg.kind = ORDO_ENGINE_PER_DEVICE;
    cfg.cpu_workers = 1;
    cfg.run_now_max_elements = run_now_max_elements;
    ordo_engine *e = ordo_tensor_engine_create(&cfg);
    CHECK(e != NULL);
    return e;
}

/* A storage with nothing pending is freed in the release itself; one with
 * an op queued on it, running on it, or in the releasing thread's bulk is
 * freed only after that op (engine_delete_idle, storage.c). */
static void test_storage_freed_at_once_when_idle(void) {
    /* Run-now off: else busy's fill runs at its push and nothing is pending. */
    ordo_engine *e = one_worker_engine(-1);
    if (!e) return;
    ordo_wait_for_all(e);
    const int64_t live0 = ordo_storage_live_count();
    /* The engine's only worker is busy: a delete op could not run now. */
    atomic_int go = 0;
    ordo_tensor *other = vec(e, 4, 0);
    ordo_var *ov = other->storage->var;
    CHECK(ordo_push_sync(e, hold_fn, &go, NULL, CPU0, NULL, 0, &ov, 1, ORDO_PROP_NORMAL, 0, "hold") == 0);

    ordo_tensor *idle = ordo_tensor_empty(e, ORDO_F32, 1, (int64_t[]){64}, CPU0);
    CHECK_EQ_LONG(ordo_storage_live_count(), live0 + 2);
    ordo_tensor_free(idle);
    CHECK_EQ_LONG(ordo_storage_live_count(), live0 + 1); /* at once */

    ordo_tensor *busy = vec(e, 64, 1); /* its fill waits behind the hold */
    ordo_tensor_free(busy);
    CHECK_EQ_LONG(ordo_storage_live_count(), live0 + 2); /* kept for its fill */

    ordo_set_bulk_size(16);
    ordo_tensor *bulked = ordo_tensor_empty(e, ORDO_F32, 1, (int64_t[]){64}, CPU0);
    CHECK(ordo_tensor_op1(K_fill, "fill_", bulked, NULL, 2) == 0); /* in this thread's bulk */
    ordo_tensor_free(bulked);
    CHECK_EQ_LONG(ordo_storage_live_count(), live0 + 3); /* kept for its fill */
    ordo_set_bulk_size(0);

    atomic_store(&go, 1);
    ordo_wait_for_all(e);
    ordo_tensor_free(other);
    ordo_tensor_engine_close(e);
    CHECK_EQ_LONG(ordo_storage_live_count(), live0);
}

/* A kernel that says where it ran: out[0] = the worker's id (-1 on a
 * thread that is not a worker), or a failure when the scalar is 1. */
static int where_fn(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    if (a->scalar[0] == 1) return ordo_fail(rc, "asked to fail");
    *(float *)a->out[0].data = (float)rc->worker_id;
    return 0;
}

static int push_where(ordo_tensor *t, double fail) {
    return ordo_tensor_op1(ordo_tensor_kernel_id("test_where"), "test_where", t, NULL, fail);
}

/* A small op whose vars nothing uses runs at its push, on the pushing
 * thread (run_now.c); one whose var is busy waits for it on a worker, in
 * push order; failures and versions are those of an op run by a worker. */
static void test_run_now(void) {
    CHECK(ordo_kernel_register("test_where", ORDO_CPU, where_fn) == 0);
    ordo_engine *e = one_worker_engine(0);
    if (!e) return;
    ordo_engine_config got;
    ordo_engine_get_config(e, &got);
    CHECK_EQ_LONG(got.run_now_max_elements, 1024); /* the default */
    ordo_tensor *t = vec(e, 1, 5);
    ordo_wait_for_all(e);
    ordo_var *tv = t->storage->var;
    uint64_t v0 = ordo_var_version(tv);
    CHECK(push_where(t, 0) == 0);
    CHECK_EQ_LONG(at(t, 0), -1);                /* done already, on this thread */
    CHECK_EQ_LONG(ordo_var_version(tv), v0 + 1); /* a write counted */

    /* Busy: the op waits behind the hold, on the worker. */
    atomic_int go = 0;
    CHECK(ordo_push_sync(e, hold_fn, &go, NULL, CPU0, NULL, 0, &tv, 1, ORDO_PROP_NORMAL, 0, "hold") == 0);
    CHECK(push_where(t, 0) == 0);
    CHECK_EQ_LONG(ordo_var_version(tv), v0 + 1);
    atomic_store(&go, 1);
    CHECK(ordo_tensor_wait(t) == 0);
    CHECK(at(t, 0) >= 0);
    CHECK_EQ_LONG(ordo_var_version(tv), v0 + 3); /* the hold and the op */

    /* A failure at the push is raised at the wait that meets it, once,
     * named after its op; the engine and the tensor stay usable. */
    CHECK(push_where(t, 1) == 0);
    CHECK(ordo_tensor_wait(t) != 0);
    CHECK(strstr(ordo_tensor_error(), "test_where: asked to fail") != NULL);
    CHECK(ordo_tensor_wait(t) == 0);
    /* An op on a failed var is not run now: it is skipped as rule 5 says. */
    ordo_tensor *u = vec(e, 1, 7);
    ordo_wait_for_all(e);
    CHECK(push_where(t, 1) == 0);
    ordo_tensor_op2(K_add, "add_", u, u, t);
    CHECK(ordo_tensor_wait(u) != 0);
    CHECK(ordo_wait_for_all(e) == 0); /* the failure u met was reported there */
    CHECK_EQ_LONG(at(u, 0), 7);
    ordo_tensor_op1(K_fill, "fill_", t, NULL, 3); /* writing anew clears it */
    CHECK(ordo_tensor_wait(t) == 0 && at(t, 0) == 3);
    ordo_tensor_free(u);
    ordo_tensor_free(t);
    ordo_tensor_engine_close(e);

    /* Turned off (negative), and too large an op: a worker runs it. */
    e = one_worker_engine(-1);
    if (!e) return;
    t = vec(e, 1, 5);
    CHECK(push_where(t, 0) == 0 && ordo_tensor_wait(t) == 0 && at(t, 0) >= 0);
    ordo_tensor_free(t);
    ordo_tensor_engine_close(e);
    e = one_worker_engine(2); /* where_fn's op counts 1 element */
    if (!e) return;
    t = vec(e, 1, 5);
    ordo_wait_for_all(e);
    CHECK(push_where(t, 0) == 0 && at(t, 0) == -1);
    ordo_tensor *big = vec(e, 3, 5);
    ordo_wait_for_all(e);
    CHECK(push_where(big, 0) == 0 && ordo_tensor_wait(big) == 0 && at(big, 0) >= 0);
    ordo_tensor_free(big);
    ordo_tensor_free(t);
    ordo_tensor_engine_close(e);
}

/* The memo of repeated small ops (tensor_push.c) keys on descriptors'
 * ids: a descriptor freed and another made, at the same address or not,
 * never reuses the arguments checked for the first; a kernel registered
 * anew under the name is the one that runs. */
static int set_one_fn(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    (void)rc;
    *(float *)a->out[0].data = 1;
    return 0;
}
static int set_two_fn(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    (void)rc;
    *(float *)a->out[0].data = 2;
    return 0;
}

static void test_push_memo(void) {
    ordo_engine *e = one_worker_engine(0);
    if (!e) return;
    /* Ids: every descriptor its own, an alias too. */
    ordo_tensor *a16 = vec(e, 16, 1), *c = vec(e, 16, 0);
    ordo_tensor *alias = ordo_tensor_alias(c);
    CHECK(alias && alias->id != c->id && a16->id != c->id);
    ordo_tensor_free(alias);
    ordo_wait_for_all(e);
    for (int i = 0; i < 3; i++) CHECK(ordo_tensor_op2(K_add, "add_", c, c, a16) == 0);
    CHECK(at(c, 0) == 3 && at(c, 15) == 3);
    /* Freed and made again, larger then smaller: malloc gives the freed
     * address back at once (glibc's cache of its size), and every element
     * of the new tensor is written, none beyond it. */
    const ordo_tensor *old = c;
    const uint64_t old_id = c->id;
    ordo_tensor_free(c);
    ordo_tensor *a32 = vec(e, 32, 1), *c32 = vec(e, 32, 0);
    ordo_wait_for_all(e);
    int reused = c32 == old || a32 == old;
    for (int i = 0; i < 2; i++) CHECK(ordo_tensor_op2(K_add, "add_", c32, c32, a32) == 0);
    CHECK(at(c32, 0) == 2 && at(c32, 31) == 2);
    ordo_tensor_free(c32);
    ordo_tensor *a4 = vec(e, 4, 1), *c4 = vec(e, 4, 0);
    ordo_wait_for_all(e);
    reused |= c4 == old || a4 == old;
    CHECK(c4->id != old_id);
    for (int i = 0; i < 2; i++) CHECK(ordo_tensor_op2(K_add, "add_", c4, c4, a4) == 0);
    CHECK(at(c4, 0) == 2 && at(c4, 3) == 2);
    if (!reused) printf("note: no address was reused; the ids were checked, the reuse was not\n");
    /* Another view of the same storage at the same address: a transposed
     * input is read through its own strides. */
    ordo_tensor *m = ordo_tensor_empty(e, ORDO_F32, 2, (int64_t[]){2, 2}, CPU0);
    ordo_tensor *src = ordo_tensor_empty(e, ORDO_F32, 2, (int64_t[]){2, 2}, CPU0);
    CHECK(ordo_tensor_op1(K_fill, "fill_", m, NULL, 0) == 0);
    float *sd = ordo_tensor_data(src);
    ordo_wait_for_all(e);
    for (int i = 0; i < 4; i++) sd[i] = (float)i;
    CHECK(ordo_tensor_op2(K_add, "add_", m, m, src) == 0);
    ordo_tensor *srct = ordo_tensor_transpose("t", src, 0, 1);
    CHECK(srct != NULL);
    CHECK(ordo_tensor_op2(K_add, "add_", m, m, srct) == 0);
    ordo_wait_for_all(e);
    const float *md = ordo_tensor_data(m);
    CHECK(md[0] == 0 && md[1] == 1 + 2 && md[2] == 2 + 1 && md[3] == 6);
    ordo_tensor_free(srct);
    ordo_tensor_free(src);
    ordo_tensor_free(m);

    /* A kernel registered anew under its name runs from the next push on. */
    CHECK(ordo_kernel_register("test_memo_set", ORDO_CPU, set_one_fn) == 0);
    int kid = ordo_tensor_kernel_id("test_memo_set");
    ordo_tensor *t = vec(e, 1, 0);
    ordo_wait_for_all(e);
    for (int i = 0; i < 2; i++) CHECK(ordo_tensor_op2(kid, "test_memo_set", t, t, t) == 0);
    CHECK(at(t, 0) == 1);
    CHECK(ordo_kernel_register("test_memo_set", ORDO_CPU, set_two_fn) == 0);
    CHECK(ordo_tensor_op2(kid, "test_memo_set", t, t, t) == 0);
    CHECK(ordo_tensor_wait(t) == 0 && at(t, 0) == 2);
    ordo_tensor_free(t);
    ordo_tensor_free(a4);
    ordo_tensor_free(c4);
    ordo_tensor_free(a32);
    ordo_tensor_free(a16);
    ordo_tensor_engine_close(e);
}

/* A kernel run at its push holds its vars' locks: from inside it, a push
 * onto one of them and a wait are refused (they would wait for this very
 * thread), a push onto other tensors goes through; on a worker the same
 * push queues behind the kernel's op. */
static ordo_tensor *g_nest_self, *g_nest_other, *g_nest_one;
static int g_nest_rc_self, g_nest_rc_other, g_nest_rc_wait, g_nest_rc_twait;
static char g_nest_err[256], g_nest_twait_err[256];
static int nest_fn(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    (void)a;
    g_nest_rc_self = ordo_tensor_op2(K_add, "add_", g_nest_self, g_nest_self, g_nest_one);
    snprintf(g_nest_err, sizeof g_nest_err, "%s", g_nest_rc_self ? ordo_tensor_error() : "");
    g_nest_rc_other = ordo_tensor_op2(K_add, "add_", g_nest_other, g_nest_other, g_nest_one);
    g_nest_rc_wait = ordo_wait_for_var(rc->engine, g_nest_other->storage->var);
    g_nest_rc_twait = ordo_tensor_wait(g_nest_other);
    snprintf(g_nest_twait_err, sizeof g_nest_twait_err, "%s", g_nest_rc_twait ? ordo_tensor_error() : "");
    return 0;
}

static void test_run_now_nested_push(void) {
    CHECK(ordo_kernel_register("test_nest", ORDO_CPU, nest_fn) == 0);
    int kid = ordo_tensor_kernel_id("test_nest");
    for (int run_now = 1; run_now >= 0; run_now--) {
        ordo_engine *e = one_worker_engine(run_now ? 0 : -1);
        if (!e) return;
        g_nest_self = vec(e, 1, 0);
        g_nest_other = vec(e, 1, 0);
        g_nest_one = vec(e, 1, 1);
        ordo_wait_for_all(e);
        CHECK(ordo_tensor_op1(kid, "test_nest", g_nest_self, NULL, 0) == 0);
        CHECK(ordo_wait_for_all(e) == 0);
        CHECK(g_nest_rc_other == 0 && at(g_nest_other, 0) == 1);
        CHECK(g_nest_rc_wait == ORDO_ERR_DEADLOCK);
        /* named as called (it said ordo_wait_for_var) */
        CHECK(g_nest_rc_twait == ORDO_ERR_DEADLOCK);
        CHECK_MSG(strstr(g_nest_twait_err, "ordo_tensor_wait called from inside an operation") != NULL, "'%s'",
                  g_nest_twait_err);
        if (run_now) {
            CHECK(g_nest_rc_self == ORDO_ERR_DEADLOCK);
            CHECK(strstr(g_nest_err, "pushed from inside a kernel run at its push") != NULL);
            CHECK(at(g_nest_self, 0) == 0);
        } else {
            CHECK(g_nest_rc_self == 0 && at(g_nest_self, 0) == 1);
        }
        /* usable afterwards */
        CHECK(ordo_tensor_op2(K_add, "add_", g_nest_self, g_nest_self, g_nest_one) == 0);
        CHECK(ordo_tensor_wait(g_nest_self) == 0 && at(g_nest_self, 0) == (run_now ? 1 : 2));
        ordo_tensor_free(g_nest_self);
        ordo_tensor_free(g_nest_other);
        ordo_tensor_free(g_nest_one);
        ordo_tensor_engine_close(e);
    }
}

/* Views share the storage and its var; writes through them are ordered. */
static void test_views(void) {
    int64_t shape[2] = {3, 4};
    ordo_tensor *a = ordo_tensor_empty(NULL, ORDO_F32, 2, shape, CPU0);
    ordo_tensor_op1(K_fill, "fill_", a, NULL, 1);
    ordo_tensor *t = ordo_tensor_transpose("t", a, 0, 1);
    ordo_tensor *row = ordo_tensor_narrow("narrow", t, 0, 1, 2); /* columns 2..3 of a */
    CHECK(t && row);
    CHECK(t->storage == a->storage && row->storage == a->storage);
    CHECK(!ordo_tensor_is_contiguous(t));
    ordo_tensor_op1(K_fill, "fill_", row, NULL, 5);
    ordo_tensor_free(t); /* the views' descriptors go; the storage stays */
    int64_t flat[1] = {12};
    ordo_tensor *v = ordo_tensor_view("view", a, 1, flat);
    CHECK(v != NULL);
    CHECK(ordo_tensor_wait(v) == 0);
    float expect[12] = {1, 5, 5, 1, 1, 5, 5, 1, 1, 5, 5, 1};
    for (int i = 0; i < 12; i++) CHECK(at(v, i) == expect[i]);
    /* a transposed tensor cannot be viewed flat without a copy */
    ordo_tensor *tt = ordo_tensor_transpose("t", a, 0, 1);
    CHECK(ordo_tensor_view("view", tt, 1, flat) == NULL);
    CHECK(ordo_tensor_error_code() == ORDO_TERR_NOT_VIEWABLE);
    CHECK(strstr(ordo_tensor_error(), "4x3") != NULL);
    /* bounds */
    int64_t big[1] = {13}, one[1] = {1};
    CHECK(ordo_tensor_as_strided(a, 1, big, one, 0) == NULL);
    /* shapes whose element count (or span) would overflow int64: refused, not wrapped */
    int64_t huge2[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, zero2[2] = {0, 0}, wide[1] = {(int64_t)1 << 62};
    int64_t far[1] = {(int64_t)1 << 62};
    CHECK(ordo_tensor_as_strided(a, 2, huge2, zero2, 0) == NULL);
    CHECK(strstr(ordo_tensor_error(), "too large") != NULL);
    int64_t three[1] = {3}; /* 2 * 2^62 overflows */
    CHECK(ordo_tensor_as_strided(a, 1, three, far, 0) == NULL);
    CHECK(strstr(ordo_tensor_error(), "past any storage") != NULL);
    ordo_tensor *col = ordo_tensor_view("view", a, 2, (int64_t[2]){12, 1});
    CHECK(col != NULL);
    CHECK(ordo_tensor_expand("expand", col, 2, (int64_t[2]){12, wide[0]}) == NULL);
    CHECK(strstr(ordo_tensor_error(), "too many elements") != NULL);
    ordo_tensor *ok = ordo_tensor_expand("expand", col, 2, (int64_t[2]){12, 1000});
    CHECK(ok != NULL && ordo_tensor_numel(ok) == 12000);
    ordo_tensor_free(ok);
    /* a view's sizes whose product passes int64: refused as not matching, not wrapped into a match */
    CHECK(ordo_tensor_view("reshape", a, 2, (int64_t[2]){(int64_t)1 << 40, (int64_t)1 << 40}) == NULL);
    CHECK(strstr(ordo_tensor_error(), "invalid for a tensor of 12 elements") != NULL);
    CHECK(ordo_tensor_view("view", a, 3, (int64_t[3]){-1, (int64_t)1 << 40, (int64_t)1 << 40}) == NULL);
    /* an empty tensor viewed with huge other sizes: 0 elements, counted without overflow */
    int64_t none[1] = {0};
    ordo_tensor *no_rows = ordo_tensor_narrow("narrow", col, 0, 0, 0);
    ordo_tensor *empty = ordo_tensor_view("view", no_rows, 1, none);
    CHECK(no_rows != NULL && empty != NULL);
    ordo_tensor_free(no_rows);
    ordo_tensor *wide0 = ordo_tensor_view("view", empty, 3, (int64_t[3]){(int64_t)1 << 40, (int64_t)1 << 40, 0});
    CHECK(wide0 != NULL && ordo_tensor_numel(wide0) == 0);
    ordo_tensor_free(wide0);
    ordo_tensor_free(empty);
    /* a narrow whose start + length passes int64: out of range, not wrapped into range */
    CHECK(ordo_tensor_narrow("narrow", a, 0, (int64_t)1 << 62, (int64_t)1 << 62) == NULL);
    CHECK(strstr(ordo_tensor_error(), "out of range") != NULL);
    ordo_tensor_free(col);
    CHECK(ordo_tensor_narrow("narrow", a, 1, 3, 2) == NULL);
    CHECK(strstr(ordo_tensor_error(), "narrow") && strstr(ordo_tensor_error(), "3x4"));
    CHECK(ordo_tensor_transpose("transpose", a, 0, 2) == NULL);
    CHECK(strstr(ordo_tensor_error(), "dim 3"));
    ordo_tensor_free(tt);
    ordo_tensor_free(row);
    ordo_tensor_free(v);
    ordo_tensor_free(a);
}

/* Shape errors name the op and both shapes, and push nothing. */
static void test_errors(void) {
    int64_t s23[2] = {2, 3}, s45[2] = {4, 5};
    ordo_tensor *a = ordo_tensor_empty(NULL, ORDO_F32, 2, s23, CPU0);
    ordo_tensor *b = ordo_tensor_empty(NULL, ORDO_F32, 2, s45, CPU0);
    uint64_t v0 = ordo_var_version(a->storage->var);
    CHECK(ordo_tensor_binary(K_add, "add", a, b, ORDO_F32) == NULL);
    CHECK(strstr(ordo_tensor_error(), "add: shapes 2x3 and 4x5 cannot be broadcast") != NULL);
    CHECK(ordo_tensor_op2(K_add, "add_", a, a, b) != 0);
    CHECK(strstr(ordo_tensor_error(), "add_: shape 4x5 cannot be broadcast to 2x3") != NULL);
    CHECK(ordo_tensor_push(-1, "x", 0, &a, 1, &a, 1, NULL, 0, NULL, 0) != 0);
    int unknown = ordo_tensor_kernel_id("no_such_kernel");
    CHECK(ordo_tensor_op1(unknown, "frob", a, NULL, 0) != 0);
    CHECK(strstr(ordo_tensor_error(), "no kernel 'no_such_kernel'") != NULL);
    int64_t neg[1] = {-2};
    CHECK(ordo_tensor_empty(NULL, ORDO_F32, 1, neg, CPU0) == NULL);
    CHECK(ordo_tensor_empty(NULL, 9, 1, s23, CPU0) == NULL);
    /* too large, and empty whatever the order of its sizes (a zero last still makes 0 elements) */
    int64_t huge[2] = {(int64_t)1 << 62, 4}, empty_huge[3] = {(int64_t)1 << 62, (int64_t)1 << 62, 0};
    CHECK(ordo_tensor_empty(NULL, ORDO_F32, 2, huge, CPU0) == NULL);
    CHECK(strstr(ordo_tensor_error(), "too large") != NULL);
    ordo_tensor *nothing = ordo_tensor_empty(NULL, ORDO_F32, 3, empty_huge, CPU0);
    CHECK(nothing != NULL && ordo_tensor_numel(nothing) == 0 && ordo_tensor_is_contiguous(nothing));
    ordo_tensor_free(nothing);
    ordo_ctx gpu = {ORDO_GPU, 0};
    if (ordo_gpu_count() == 0) {
        CHECK(ordo_tensor_empty(NULL, ORDO_F32, 1, s23, gpu) == NULL);
        CHECK(strstr(ordo_tensor_error(), "no CUDA device available") != NULL);
    }
    settle();
    CHECK_EQ_LONG(ordo_var_version(a->storage->var), v0); /* nothing ran on a */
    ordo_tensor_free(a);
    ordo_tensor_free(b);
}

/* NULL where a tensor, shape or name is expected: NULL or an error code
 * with a message, never a crash (each of these dereferenced it before);
 * a view given no op name says which view failed, not "(null)"; and
 * messages print a 1-based start or index without overflowing (start
 * INT64_MAX + 1 was undefined behaviour). */
static void test_null_arguments(void) {
    int64_t s23[2] = {2, 3}, st[2] = {3, 1};
    ordo_tensor *t = ordo_tensor_empty(NULL, ORDO_F32, 2, s23, CPU0);
    CHECK(t != NULL);
    if (!t) return;
#define EXPECT_NULL(expr, text)                                                                          \
    do {                                                                                                 \
        CHECK((expr) == NULL);                                                                           \
        CHECK_MSG(strstr(ordo_tensor_error(), text) != NULL, "%s: '%s'", #expr, ordo_tensor_error());    \
    } while (0)
    EXPECT_NULL(ordo_tensor_empty(NULL, ORDO_F32, 2, NULL, CPU0), "shape is NULL");
    EXPECT_NULL(ordo_tensor_empty_on(NULL, ORDO_F32, 1, NULL, ORDO_CPU, 0), "shape is NULL");
    ordo_tensor *scalar = ordo_tensor_empty(NULL, ORDO_F32, 0, NULL, CPU0); /* no dims: no shape needed */
    CHECK(scalar != NULL && ordo_tensor_numel(scalar) == 1);
    ordo_tensor_free(scalar);
    EXPECT_NULL(ordo_tensor_empty_like(NULL, ORDO_F32), "tensor is NULL");
    EXPECT_NULL(ordo_tensor_as_strided(NULL, 2, s23, st, 0), "tensor is NULL");
    EXPECT_NULL(ordo_tensor_as_strided(t, 2, NULL, st, 0), "shape is NULL");
    EXPECT_NULL(ordo_tensor_as_strided(t, 2, s23, NULL, 0), "strides is NULL");
    EXPECT_NULL(ordo_tensor_alias(NULL), "tensor is NULL");
    EXPECT_NULL(ordo_tensor_data(NULL), "tensor is NULL");
    EXPECT_NULL(ordo_tensor_view("view", NULL, 1, s23), "view: tensor is NULL");
    EXPECT_NULL(ordo_tensor_view("view", t, 2, NULL), "view: shape is NULL");
    EXPECT_NULL(ordo_tensor_transpose("t", NULL, 0, 1), "t: tensor is NULL");
    EXPECT_NULL(ordo_tensor_permute("p", NULL, 2, st), "p: tensor is NULL");
    EXPECT_NULL(ordo_tensor_permute("p", t, 2, NULL), "p: perm is NULL");
    EXPECT_NULL(ordo_tensor_narrow("n", NULL, 0, 0, 1), "n: tensor is NULL");
    EXPECT_NULL(ordo_tensor_select("s", NULL, 0, 0), "s: tensor is NULL");
    EXPECT_NULL(ordo_tensor_expand("e", NULL, 2, s23), "e: tensor is NULL");
    EXPECT_NULL(ordo_tensor_expand("e", t, 2, NULL), "e: shape is NULL");
    EXPECT_NULL(ordo_tensor_unsqueeze("u", NULL, 0), "u: tensor is NULL");
    EXPECT_NULL(ordo_tensor_squeeze("q", NULL, -1), "q: tensor is NULL");
    EXPECT_NULL(ordo_tensor_binary(K_add, "add", NULL, t, ORDO_F32), "add: NULL tensor");
    /* no op name: the message names the view, or the kernel */
    EXPECT_NULL(ordo_tensor_view(NULL, t, 1, (int64_t[]){7}), "view: shape 7 is invalid");
    EXPECT_NULL(ordo_tensor_transpose(NULL, t, 0, 5), "transpose: dim 6 out of range");
    EXPECT_NULL(ordo_tensor_permute(NULL, t, 2, (int64_t[]){0, 0}), "permute: dims must be");
    EXPECT_NULL(ordo_tensor_narrow(NULL, t, 1, 2, 5), "narrow: start 3 and length 5");
    EXPECT_NULL(ordo_tensor_select(NULL, t, 0, 2), "select: index 3 out of range");
    EXPECT_NULL(ordo_tensor_expand(NULL, t, 2, (int64_t[]){5, 3}), "expand: cannot expand");
    EXPECT_NULL(ordo_tensor_unsqueeze(NULL, t, 9), "unsqueeze: dim 10 out of range");
    EXPECT_NULL(ordo_tensor_squeeze(NULL, t, 7), "squeeze: dim 8 out of range");
    int64_t big[2] = {5, 3};
    ordo_tensor *b = ordo_tensor_empty(NULL, ORDO_F32, 2, big, CPU0);
    EXPECT_NULL(ordo_tensor_binary(K_add, NULL, t, b, ORDO_F32), "add: shapes 2x3 and 5x3 cannot be broadcast");
    ordo_tensor_free(b);
    /* 1-based positions past INT64_MAX and INT_MAX, printed exactly */
    EXPECT_NULL(ordo_tensor_narrow("n", t, 1, INT64_MAX, 1), "n: start 9223372036854775808 and length 1");
    EXPECT_NULL(ordo_tensor_select("s", t, 1, INT64_MAX), "s: index 9223372036854775808 out of range");
    EXPECT_NULL(ordo_tensor_narrow("n", t, 1, -1, 1), "n: start 0 and length 1");
    EXPECT_NULL(ordo_tensor_permute("p", t, 2, (int64_t[]){INT64_MAX, 0}), "got 9223372036854775808 at position 1");
    EXPECT_NULL(ordo_tensor_transpose("t", t, INT32_MAX, 0), "t: dim 2147483648 out of range");
#undef EXPECT_NULL
    CHECK_EQ_LONG(ordo_tensor_numel(NULL), -1);
    CHECK(strstr(ordo_tensor_error(), "tensor is NULL") != NULL);
    CHECK_EQ_LONG(ordo_tensor_is_contiguous(NULL), 0);
    CHECK(ordo_tensor_wait(NULL) == ORDO_ERR_INVALID);
    CHECK(strstr(ordo_tensor_error(), "wait: tensor is NULL") != NULL);
    int64_t out_shape[ORDO_MAX_DIMS];
    CHECK_EQ_LONG(ordo_tensor_broadcast_shape("bc", NULL, t, out_shape), -1);
    CHECK(strstr(ordo_tensor_error(), "bc: tensor is NULL") != NULL);
    CHECK_EQ_LONG(ordo_tensor_broadcast_shape("bc", t, t, NULL), -1);
    CHECK(ordo_tensor_op1(K_fill, "fill_", NULL, NULL, 1.0) != 0);
    CHECK_MSG(strstr(ordo_tensor_error(), "fill_: output 1 is NULL") != NULL, "'%s'", ordo_tensor_error());
    char buf[8];
    CHECK(ordo_tensor_shape_str(t, buf, 0) == buf); /* no room: nothing written */
    CHECK(ordo_tensor_shape_str(t, NULL, 8) == NULL);
    ordo_tensor_free(NULL);
    ordo_tensor_free(t);
    settle();
}

/* An input aliasing the output through another view is read from a copy. */
static void test_hazard_copy(void) {
    ordo_tensor *a = vec(NULL, 8, 0);
    /* a = 0..7 */
    int k_arange = ordo_tensor_kernel_id("arange");
    double sc[2] = {0, 1};
    CHECK(ordo_tensor_push(k_arange, "arange", 0, NULL, 0, &a, 1, sc, 2, NULL, 0) == 0);
    ordo_tensor *lo = ordo_tensor_narrow("narrow", a, 0, 0, 7), *hi = ordo_tensor_narrow("narrow", a, 0, 1, 7);
    CHECK(ordo_tensor_op1(K_copy, "copy_", hi, lo, 0) == 0); /* shift right by one */
    CHECK(ordo_tensor_wait(a) == 0);
    float expect[8] = {0, 0, 1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 8; i++) CHECK(at(a, i) == expect[i]);
    /* an expanded output is refused */
    int64_t s[2] = {3, 8};
    ordo_tensor *e = ordo_tensor_expand("expand", a, 2, s);
    CHECK(e && ordo_tensor_op1(K_fill, "fill_", e, NULL, 1) != 0);
    CHECK(strstr(ordo_tensor_error(), "expanded") != NULL);
    ordo_tensor_free(e);
    ordo_tensor_free(lo);
    ordo_tensor_free(hi);
    ordo_tensor_free(a);
}

/* Several threads push at once: the parameter pool and refcounts hold. */
typedef struct {
    ordo_tensor *shared;
    float result;
    long n;
} thread_arg;

static void *pusher(void *p) {
    thread_arg *ta = p;
    ordo_tensor *mine = vec(NULL, 16, 0);
    for (long i = 0; i < ta->n; i++) {
        ordo_tensor *view = ordo_tensor_alias(ta->shared);
        ordo_tensor_op2(K_add, "add_", mine, mine, view);
        ordo_tensor_free(view);
        if (i % 64 == 0) ordo_tensor_op1(K_mul_scalar, "mul_", mine, mine, 1.0);
    }
    ordo_tensor_wait(mine);
    ta->result = at(mine, 15);
    ordo_tensor_free(mine);
    return NULL;
}

static void test_threads(void) {
    ordo_tensor *shared = vec(NULL, 16, 1);
    enum { T = 4 };
    pthread_t th[T];
    thread_arg args[T];
    long n = scaled(20000, 200);
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){shared, -1, n};
        pthread_create(&th[i], NULL, pusher, &args[i]);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) CHECK(args[i].result == (float)n);
    ordo_tensor_free(shared);
    settle();
}

/* Tensors keep an engine created for a front end alive after its handle is closed. */
static void test_engine_lifetime(void) {
    ordo_engine_config cfg = {0};
    cfg.kind = ORDO_ENGINE_POOLED;
    cfg.cpu_workers = 2;
    ordo_engine *e = ordo_tensor_engine_create(&cfg);
    CHECK(e != NULL);
    if (!e) return;
    ordo_tensor *a = vec(e, 100, 2), *b = vec(e, 100, 3);
    ordo_tensor *c = ordo_tensor_binary(K_add, "add", a, b, ORDO_F32);
    ordo_tensor *d = vec(NULL, 100, 0);
    CHECK(ordo_tensor_op2(K_add, "add", d, a, b) != 0); /* d is on another engine */
    CHECK(strstr(ordo_tensor_error(), "engines") != NULL);
    ordo_tensor_engine_close(e); /* the handle goes; a, b, c still work */
    ordo_tensor_free(a);
    ordo_tensor_free(b);
    CHECK(c && ordo_tensor_wait(c) == 0);
    CHECK(c && at(c, 99) == 5);
    int64_t shape[1] = {1};
    ordo_tensor *s = ordo_tensor_empty(e, ORDO_F32, 1, shape, CPU0);
    int64_t all = -1;
    CHECK(ordo_tensor_push(K_sum, "sum", 0, &c, 1, &s, 1, NULL, 0, &all, 1) == 0);
    CHECK(ordo_tensor_wait(s) == 0 && at(s, 0) == 500);
    ordo_tensor_free(s);
    ordo_tensor_free(c); /* the engine is destroyed here */
    ordo_tensor_free(d);
}

/* A kernel failing at run time fails the wait on its output: its value was
 * never computed, so every wait fails until an op writes it. */
static void test_runtime_failure(void) {
    int64_t shape[1] = {4};
    ordo_tensor *a = ordo_tensor_empty(NULL, ORDO_I32, 1, shape, CPU0);
    ordo_tensor *z = ordo_tensor_empty(NULL, ORDO_I32, 1, shape, CPU0);
    ordo_tensor_op1(K_fill, "fill_", a, NULL, 6);
    ordo_tensor_op1(K_fill, "fill_", z, NULL, 0);
    int k_div = ordo_tensor_kernel_id("div");
    ordo_tensor *q = ordo_tensor_binary(k_div, "div", a, z, ORDO_I32);
    CHECK(q != NULL);
    CHECK(ordo_tensor_wait(q) != 0);
    CHECK(strstr(ordo_tensor_error(), "div") != NULL);
    CHECK(ordo_tensor_wait(q) != 0); /* reported before, but q holds nothing */
    CHECK(strstr(ordo_tensor_error(), "reported before") != NULL);
    ordo_tensor_op1(K_fill, "fill_", q, NULL, 1);
    CHECK(ordo_tensor_wait(q) == 0 && ((int32_t *)ordo_tensor_data(q))[3] == 1);
    ordo_tensor_free(a);
    ordo_tensor_free(z);
    ordo_tensor_free(q);
}

/* Allocating and dropping big storages stays bounded: the memory of
 * released storages waits for the engine, and allocation waits for it. */
static void test_memory_bounded(void) {
    settle();
    int64_t max_live = 0;
    long n = scaled(1500, 100);
    ordo_tensor *acc = vec(NULL, 1, 0);
    for (long i = 0; i < n; i++) {
        ordo_tensor *big = vec(NULL, 262144, 1); /* 1 MiB, filled by an op */
        ordo_tensor *first = ordo_tensor_narrow("narrow", big, 0, 0, 1);
        ordo_tensor_op2(K_add, "add_", acc, acc, first);
        ordo_tensor_free(first);
        ordo_tensor_free(big);
        int64_t live = ordo_storage_live_bytes();
        if (live > max_live) max_live = live;
    }
    CHECK(ordo_tensor_wait(acc) == 0 && at(acc, 0) == (float)n);
    ordo_tensor_free(acc);
    /* 2 x 64 MiB waiting to be freed, plus what is referenced */
    CHECK_MSG(max_live < ((int64_t)200 << 20), "max live %lld MB", (long long)(max_live >> 20));
    settle();
}

/* How many collections gc_due asks for over 10 MiB of new tensors, with
 * the front end's heap at `heap` bytes. */
static int collections_over_10_mib(int64_t heap) {
    while (ordo_storage_gc_due()) ordo_storage_gc_done();
    ordo_storage_gc_pace(heap);
    int due = 0;
    for (int i = 0; i < 40; i++) {
        ordo_tensor *t = vec(NULL, 65536, 0); /* 256 KiB */
        if (ordo_storage_gc_due()) {
            due++;
            ordo_storage_gc_done();
        }
        ordo_tensor_free(t);
    }
    return due;
}

static void test_gc_pacing(void) {
    ordo_storage_set_gc_threshold((int64_t)1 << 20);
    int due = collections_over_10_mib(0);
    CHECK(due >= 5 && due <= 12); /* about every 1 MiB of 10 MiB */
    ordo_storage_set_gc_threshold((int64_t)64 << 20);
    settle();
}

/* A front end whose heap is large (a long autograd graph) collects less
 * often: each collection walks that heap.  With a 1 MiB threshold and a
 * 1 MiB heap the pause is 4 MiB; with the heap back at 0, 1 MiB again. */
static void test_gc_pacing_by_heap(void) {
    ordo_storage_set_gc_threshold((int64_t)1 << 20);
    int big = collections_over_10_mib((int64_t)1 << 20);
    CHECK_MSG(big >= 1 && big <= 3, "%d collections with a 1 MiB heap", big); /* every 4 MiB */
    int none = collections_over_10_mib(0);
    CHECK_MSG(none >= 5 && none <= 12, "%d collections without a heap", none);
    CHECK(collections_over_10_mib(-5) >= 5); /* a negative heap counts as none */
    ordo_storage_gc_pace(0);
    ordo_storage_set_gc_threshold((int64_t)64 << 20);
    settle();
}

int main(void) {
    K_fill = ordo_tensor_kernel_id("fill");
    K_add = ordo_tensor_kernel_id("add");
    K_copy = ordo_tensor_kernel_id("copy");
    K_sum = ordo_tensor_kernel_id("sum");
    K_mul_scalar = ordo_tensor_kernel_id("mul_scalar");
    TEST(test_storage_freed_after_ops);
    TEST(test_storage_freed_at_once_when_idle);
    TEST(test_run_now);
    TEST(test_push_memo);
    TEST(test_run_now_nested_push);
    TEST(test_views);
    TEST(test_errors);
    TEST(test_null_arguments);
    TEST(test_hazard_copy);
    TEST(test_threads);
    TEST(test_engine_lifetime);
    TEST(test_runtime_failure);
    TEST(test_memory_bounded);
    TEST(test_gc_pacing);
    TEST(test_gc_pacing_by_heap);
    wd_shutdown();
    return harness_end();
}
