/*
 * test_misuse.c - API calls handed what belongs elsewhere: a var of another
 * engine, a property or a var that a push would refuse given to
 * ordo_new_operator, a NULL done, the default engine given to
 * ordo_engine_destroy.  Each is refused with a message, and the engines
 * go on as they were: nothing runs, hangs, or touches freed memory (the
 * ASan and TSan builds run these too).
 */
#include <stdbool.h>

#include "harness.h"
#include "ordo_tensor.h"
#include "test_util.h"

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static void async_noop(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    (void)param;
    ordo_done_complete(done, NULL);
}

/* rc is ORDO_ERR_INVALID and the message says the var is another engine's. */
#define REFUSED(kn, expr)                                                                                  \
    do {                                                                                                   \
        int rc_ = (expr);                                                                                  \
        CHECK_MSG(rc_ == ORDO_ERR_INVALID && contains(ordo_last_error(), "belongs to another engine"),     \
                  "%s: %s = %d '%s'", kn, #expr, rc_, ordo_last_error());                                  \
    } while (0)

/* A var lives in its engine's slabs and queues: given to another engine it
 * was accepted, joined that engine's queues and pending counts (its waits
 * returned at once, its pending count went negative and its destroy hung),
 * and deleted there it went onto that engine's free list, to be handed out
 * again after its own engine had freed it.  Every entry point that takes a
 * var refuses one of another engine, bulked pushes included. */
static void test_var_of_another_engine(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        ordo_engine *a = make_engine(kind, 2), *b = make_engine(kind, 2);
        CHECK(a != NULL && b != NULL);
        if (!a || !b) {
            ordo_engine_destroy(a);
            ordo_engine_destroy(b);
            continue;
        }
        ordo_var *va = ordo_new_variable(a), *vb = ordo_new_variable(b);
        /* va stays busy on a meanwhile (not on naive: it would block this push) */
        gate_t g;
        gate_init(&g);
        bool gated = kind != ORDO_ENGINE_NAIVE;
        if (gated) CHECK_EQ_LONG(push_simple(a, gate_op, &g, NULL, 0, &va, 1, "gate"), 0);
        atomic_long ran;
        atomic_init(&ran, 0);
        ordo_var *mixed[2] = {vb, va};
        ordo_ctx cpu = cpu_ctx(0);
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, &va, 1, NULL, 0, ORDO_PROP_NORMAL, 0, "read"));
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, NULL, 0, &va, 1, ORDO_PROP_NORMAL, 0, "write"));
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, mixed, 2, NULL, 0, ORDO_PROP_NORMAL, 0, "mixed"));
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, NULL, 0, &va, 1, ORDO_PROP_ASYNC, 0, "launcher"));
        REFUSED(kn, ordo_push_async(b, async_noop, NULL, NULL, cpu, &va, 1, NULL, 0, ORDO_PROP_NORMAL, 0, "async"));
        /* a bulking thread's small pushes take a shorter path */
        int old_bulk = ordo_set_bulk_size(8);
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, &vb, 1, &va, 1, ORDO_PROP_BULK, 0, "bulked"));
        REFUSED(kn, ordo_push_sync(b, count_op, &ran, NULL, cpu, NULL, 0, &va, 1, ORDO_PROP_BULK, 0, "bulked1"));
        ordo_set_bulk_size(old_bulk);
        CHECK_EQ_LONG(ordo_bulk_flush(), 0);
        CHECK(ordo_new_operator(b, async_noop, NULL, NULL, &va, 1, NULL, 0, ORDO_PROP_NORMAL, "opr") == NULL);
        CHECK_MSG(contains(ordo_last_error(), "belongs to another engine"), "%s: '%s'", kn, ordo_last_error());
        REFUSED(kn, ordo_wait_for_var(b, va));
        REFUSED(kn, ordo_wait_to_write(b, va));
        REFUSED(kn, ordo_delete_variable(b, NULL, NULL, cpu, va));
        CHECK_EQ_LONG(ordo_engine_pending(b), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(b), 0);
        CHECK_EQ_LONG(atomic_load(&ran), 0);

        /* both engines go on as before */
        if (gated) gate_open(&g);
        CHECK_EQ_LONG(push_simple(a, count_op, &ran, NULL, 0, &va, 1, "on a"), 0);
        CHECK_EQ_LONG(push_simple(b, count_op, &ran, NULL, 0, &vb, 1, "on b"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(a, va), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(b, vb), 0);
        CHECK_EQ_LONG(atomic_load(&ran), 2);
        CHECK_EQ_LONG(ordo_var_version(va), gated ? 2 : 1);
        CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
        CHECK_EQ_LONG(ordo_delete_variable(a, NULL, NULL, cpu, va), 0);
        CHECK_EQ_LONG(ordo_delete_variable(b, NULL, NULL, cpu, vb), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(a), 0);
        ordo_engine_destroy(a);
        /* b's vars are all b's own: more than a slab of them, after a is gone */
        for (int i = 0; i < 300; i++) {
            ordo_var *v = ordo_new_variable(b);
            CHECK_EQ_LONG(push_simple(b, count_op, &ran, NULL, 0, &v, 1, "after"), 0);
            CHECK_EQ_LONG(ordo_delete_variable(b, NULL, NULL, cpu, v), 0);
        }
        CHECK_EQ_LONG(ordo_wait_for_all(b), 0);
        CHECK_EQ_LONG(atomic_load(&ran), 302);
        ordo_engine_destroy(b);
    }
}

/* ordo_new_operator checks its property and vars as a push does: it took
 * ORDO_PROP_DELETE_VAR, which every push refuses, and on the threaded
 * engines a var whose delete was pushed but had not run yet (the naive
 * engine, whose delete has run, refused it): every push of such an
 * operator could only fail. */
static void test_new_operator_checks_like_push(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        atomic_long ran;
        atomic_init(&ran, 0);
        ordo_ctx cpu = cpu_ctx(0);
        static const int bad_props[] = {ORDO_PROP_DELETE_VAR, ORDO_PROP_DELETE_VAR | ORDO_PROP_NO_SKIP, 99, -1};
        for (int i = 0; i < (int)(sizeof bad_props / sizeof bad_props[0]); i++) {
            int prop = bad_props[i];
            int rc = ordo_push_sync(e, count_op, &ran, NULL, cpu, NULL, 0, &v, 1, prop, 0, "p");
            CHECK_MSG(rc == ORDO_ERR_INVALID, "%s: push with prop %d = %d", kn, prop, rc);
            char push_msg[256];
            snprintf(push_msg, sizeof push_msg, "%s", ordo_last_error());
            const char *why = strchr(push_msg, ':'); /* the same reason, after the function's name */
            ordo_opr *r = ordo_new_operator(e, async_noop, NULL, NULL, NULL, 0, &v, 1, prop, "p");
            CHECK_MSG(r == NULL, "%s: ordo_new_operator accepted prop %d", kn, prop);
            CHECK_MSG(why && contains(ordo_last_error(), why), "%s: prop %d: push said '%s', operator '%s'", kn, prop,
                      push_msg, ordo_last_error());
            if (r) ordo_delete_operator(e, r);
        }

        /* a var whose delete is pushed (and, but on naive, waits behind a gate) */
        gate_t g;
        gate_init(&g);
        bool gated = kind != ORDO_ENGINE_NAIVE;
        if (gated) CHECK_EQ_LONG(push_simple(e, gate_op, &g, NULL, 0, &v, 1, "gate"), 0);
        CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu, v), 0);
        CHECK_EQ_LONG(ordo_push_sync(e, count_op, &ran, NULL, cpu, &v, 1, NULL, 0, ORDO_PROP_NORMAL, 0, "late"),
                      ORDO_ERR_DELETED);
        ordo_opr *r = ordo_new_operator(e, async_noop, NULL, NULL, &v, 1, NULL, 0, ORDO_PROP_NORMAL, "late");
        CHECK_MSG(r == NULL && contains(ordo_last_error(), "deleted"), "%s: operator reading a deleted var: %p '%s'",
                  kn, (void *)r, ordo_last_error());
        if (r) ordo_delete_operator(e, r);
        r = ordo_new_operator(e, async_noop, NULL, NULL, NULL, 0, &v, 1, ORDO_PROP_NORMAL, "late");
        CHECK_MSG(r == NULL && contains(ordo_last_error(), "deleted"), "%s: operator writing a deleted var: %p '%s'",
                  kn, (void *)r, ordo_last_error());
        if (r) ordo_delete_operator(e, r);
        if (gated) gate_open(&g);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
        CHECK_EQ_LONG(atomic_load(&ran), 0);

        /* what a push takes, an operator takes */
        ordo_var *w = ordo_new_variable(e);
        r = ordo_new_operator(e, async_noop, NULL, NULL, NULL, 0, &w, 1, ORDO_PROP_NORMAL | ORDO_PROP_NO_SKIP, "ok");
        CHECK(r != NULL);
        if (r) {
            CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), 0);
            CHECK_EQ_LONG(ordo_wait_for_var(e, w), 0);
            CHECK_EQ_LONG(ordo_var_version(w), 1);
            ordo_delete_operator(e, r);
        }
        CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu, w), 0);
        ordo_engine_destroy(e);
    }
}

/* An operator keeps its vars.  One of them deleted after the operator was
 * made: its pushes failed while the var's block stayed free, but once a
 * new var reused the block (after a slab's worth of new vars) they
 * succeeded, on the new var -- an op ordered against whatever that var
 * now guards.  They stay refused, naming the operator and the var. */
static void test_operator_var_deleted_and_reused(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_ctx cpu = cpu_ctx(0);
        ordo_var *keep = ordo_new_variable(e), *v = ordo_new_variable(e);
        ordo_var *r2[2] = {keep, v};
        ordo_opr *r = ordo_new_operator(e, async_noop, NULL, NULL, r2, 2, NULL, 0, ORDO_PROP_NORMAL, "stale");
        CHECK(r != NULL);
        if (!r) continue;
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), 0);
        CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu, v), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), ORDO_ERR_DELETED);
        /* new vars until one takes v's block */
        enum { MAXV = 4096 };
        ordo_var **fresh = (ordo_var **)calloc(MAXV, sizeof *fresh);
        int n = 0;
        bool reused = false;
        while (n < MAXV && !reused) {
            fresh[n] = ordo_new_variable(e);
            reused = fresh[n++] == v;
        }
        CHECK_MSG(reused, "%s: no new var reused the deleted var's block in %d", kn, MAXV);
        int rc = ordo_push(e, r, cpu, 0);
        CHECK_MSG(rc == ORDO_ERR_DELETED && contains(ordo_last_error(), "stale") &&
                      contains(ordo_last_error(), "deleted"),
                  "%s: push of an operator whose var was deleted and reused: %d '%s'", kn, rc, ordo_last_error());
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 0); /* the new var was not written */
        ordo_delete_operator(e, r);
        for (int i = 0; i < n; i++) CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu, fresh[i]), 0);
        free(fresh);
        ordo_engine_destroy(e);
    }
}

/* ordo_done_complete(NULL, ...) has no op to complete: it returns, with a
 * message (it returns void), instead of reading through NULL. */
static void test_done_complete_null(void) {
    ordo_done_complete(NULL, "x");
    CHECK_MSG(contains(ordo_last_error(), "ordo_done_complete: done is NULL"), "'%s'", ordo_last_error());
    ordo_done_complete(NULL, NULL);
    CHECK(contains(ordo_last_error(), "done is NULL"));
}

/* The default engine is shared by whoever asked for it and destroyed at
 * exit.  Destroying it by hand freed it under every other user, and the
 * exit handler then freed it again (a double free).  ordo_engine_destroy
 * refuses it, with a message, and leaves it working; the exit handler
 * destroys it once (ASan would see a second time).  Runs last: the default
 * engine stays up until exit. */
static void test_default_engine_destroy_refused(void) {
    ordo_engine *e = ordo_engine_default();
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    atomic_long ran;
    atomic_init(&ran, 0);
    CHECK_EQ_LONG(push_simple(e, count_op, &ran, NULL, 0, &v, 1, "before"), 0);
    ordo_engine_destroy(e);
    bool refused = contains(ordo_last_error(), "default engine");
    CHECK_MSG(refused, "destroying the default engine: '%s'", ordo_last_error());
    if (!refused) return; /* e is freed: nothing more to check */
    CHECK(ordo_engine_default() == e);
    CHECK_EQ_LONG(push_simple(e, count_op, &ran, NULL, 0, &v, 1, "after"), 0);
    CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
    CHECK_EQ_LONG(atomic_load(&ran), 2);
    CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(NULL); /* still a no-op */
}

/* ---- operators deleted twice, by another engine, pushed after delete ---- */

static atomic_int opr_freed; /* param_free calls */
static void opr_param_free(void *p) {
    (void)p;
    atomic_fetch_add(&opr_freed, 1);
}

static atomic_int opr_runs;
static void async_count(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    (void)param;
    atomic_fetch_add(&opr_runs, 1);
    ordo_done_complete(done, NULL);
}

/* ordo_delete_operator ignored its engine and dropped the handle's
 * reference however often it was called: a second delete (or a delete of
 * a stale handle) freed the operator under its pushed runs -- a use after
 * free in the worker, a double free of its arrays -- and ordo_push of a
 * deleted operator read freed memory.  Each is refused with a message now,
 * and the operator's runs, its param_free (once) and the engine go on. */
static void test_operator_delete_misuse(void) {
    for (int k = 0; k < ARRAY_LEN(ALL_KINDS); k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        ordo_engine *e = make_engine(kind, 2), *e2 = make_engine(kind, 1);
        if (!e || !e2) return;
        ordo_ctx cpu = cpu_ctx(0);
        ordo_var *v = ordo_new_variable(e);
        atomic_store(&opr_freed, 0);
        atomic_store(&opr_runs, 0);

        ordo_delete_operator(NULL, NULL);
        CHECK_MSG(contains(ordo_last_error(), "engine is NULL"), "%s: '%s'", kn, ordo_last_error());
        ordo_delete_operator(e, NULL);
        CHECK_MSG(contains(ordo_last_error(), "operator is NULL"), "%s: '%s'", kn, ordo_last_error());

        ordo_opr *r = ordo_new_operator(e, async_count, NULL, opr_param_free, NULL, 0, &v, 1, 0, "counted");
        CHECK(r != NULL);
        if (!r) return;
        /* Held back behind a gate (not on the naive engine, whose push
         * runs the gate inline), so the deletes meet runs in flight. */
        gate_t g;
        gate_init(&g);
        bool gated = kind != ORDO_ENGINE_NAIVE;
        if (gated) CHECK_EQ_LONG(push_simple(e, gate_op, &g, NULL, 0, &v, 1, "gate"), 0);
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), 0);
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), 0);

        ordo_delete_operator(e2, r); /* not e2's: refused, r untouched */
        CHECK_MSG(contains(ordo_last_error(), "belongs to another engine"), "%s: '%s'", kn, ordo_last_error());
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), 0);

        ordo_delete_operator(e, r);
        CHECK_MSG(!contains(ordo_last_error(), "already deleted"), "%s: first delete: '%s'", kn, ordo_last_error());
        ordo_delete_operator(e, r);
        CHECK_MSG(contains(ordo_last_error(), "already deleted"), "%s: second delete: '%s'", kn, ordo_last_error());
        int rc = ordo_push(e, r, cpu, 0);
        CHECK_MSG(rc == ORDO_ERR_DELETED && contains(ordo_last_error(), "was deleted"), "%s: push after delete: %d '%s'",
                  kn, rc, ordo_last_error());
        if (gated) CHECK_EQ_LONG(atomic_load(&opr_freed), 0); /* its runs still hold it */
        gate_open(&g);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&opr_runs), 3);
        CHECK_EQ_LONG(atomic_load(&opr_freed), 1);
        CHECK_EQ_LONG(ordo_var_version(v), 3 + (gated ? 1 : 0));
        /* Freed: its handle still refused (the engine keeps the block). */
        ordo_delete_operator(e, r);
        CHECK_MSG(contains(ordo_last_error(), "already deleted"), "%s: delete after free: '%s'", kn, ordo_last_error());
        CHECK_EQ_LONG(ordo_push(e, r, cpu, 0), ORDO_ERR_DELETED);
        CHECK_EQ_LONG(atomic_load(&opr_freed), 1);
        /* A new operator (on the freed block, as likely as not) works. */
        ordo_opr *r2 = ordo_new_operator(e, async_count, NULL, opr_param_free, NULL, 0, &v, 1, 0, "again");
        CHECK(r2 != NULL);
        CHECK_EQ_LONG(ordo_push(e, r2, cpu, 0), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(atomic_load(&opr_runs), 4);
        ordo_delete_operator(e, r2);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&opr_freed), 2);
        CHECK_EQ_LONG(atomic_load(&g.timed_out), 0);
        ordo_engine_destroy(e);
        ordo_engine_destroy(e2);
    }
}

/* ---- ordo_done_complete called twice ---- */

static char second_msg[256]; /* written by the op's thread, read once second_done is set */
static atomic_int second_done;
static void async_twice(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    (void)param;
    ordo_done_complete(done, NULL);
    ordo_done_complete(done, "the second call's error");
    snprintf(second_msg, sizeof second_msg, "%s", ordo_last_error());
    atomic_store(&second_done, 1); /* after the op completed: a wait does not order this */
}

static ordo_done *_Atomic later_done;
static void async_later(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    (void)param;
    atomic_store(&later_done, done);
}

/* A second ordo_done_complete for one run finished the op again: it ran
 * its vars' completion twice (a write counted twice, the next op granted
 * early), took an error after the op had retired (the next wait reported
 * a failure nothing had), and on a reused op block completed another op.
 * It is refused now, with a message, and changes nothing. */
static void test_done_complete_twice(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        const char *kn = kind_str(kind);
        ordo_engine *e = make_engine(kind, 2);
        if (!e) return;
        ordo_ctx cpu = cpu_ctx(0);
        ordo_var *v = ordo_new_variable(e);
        second_msg[0] = 0;
        atomic_store(&second_done, 0);
        CHECK_EQ_LONG(ordo_push_async(e, async_twice, NULL, NULL, cpu, NULL, 0, &v, 1, 0, 0, "twice"), 0);
        int rc = ordo_wait_for_var(e, v);
        while (!atomic_load(&second_done)) sched_yield();
        CHECK_MSG(rc == 0, "%s: the second call failed the op: %d '%s'", kn, rc, ordo_last_error());
        CHECK_MSG(contains(second_msg, "already completed"), "%s: second call: '%s'", kn, second_msg);
        CHECK_EQ_LONG(ordo_var_version(v), 1);
        CHECK_EQ_LONG(ordo_var_failed(v), 0);

        if (kind != ORDO_ENGINE_NAIVE) { /* a naive push waits for the completion made here */
            atomic_store(&later_done, NULL);
            CHECK_EQ_LONG(ordo_push_async(e, async_later, NULL, NULL, cpu, NULL, 0, &v, 1, 0, 0, "later"), 0);
            atomic_long ran;
            atomic_init(&ran, 0);
            CHECK_EQ_LONG(push_simple(e, count_op, &ran, &v, 1, NULL, 0, "reader"), 0);
            ordo_done *d;
            while (!(d = atomic_load(&later_done))) sched_yield();
            ordo_done_complete(d, NULL);
            CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
            ordo_done_complete(d, "late");
            CHECK_MSG(contains(ordo_last_error(), "already completed"), "%s: '%s'", kn, ordo_last_error());
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            CHECK_EQ_LONG(atomic_load(&ran), 1);
            CHECK_EQ_LONG(ordo_var_version(v), 2);
        }
        CHECK_EQ_LONG(ordo_engine_pending(e), 0);
        CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu, v), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        ordo_engine_destroy(e);
    }
}

/* ---- an engine destroyed under its tensors ---- */

/* ordo_engine_destroy freed an engine whose tensors were still alive: the
 * next use of a tensor -- or its ordo_tensor_free, which deletes the
 * storage's var on the engine -- touched freed memory.  Destroy is refused
 * while storages use the engine (and for an engine of
 * ordo_tensor_engine_create, which ordo_tensor_engine_close ends), with a
 * message; once the tensors are freed, destroy works. */
static void test_destroy_under_tensors_refused(void) {
    ordo_ctx cpu = cpu_ctx(0);
    int64_t shape[1] = {16};
    int kfill = ordo_tensor_kernel_id("fill");
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    if (!e) return;
    ordo_tensor *t = ordo_tensor_empty(e, ORDO_F32, 1, shape, cpu);
    CHECK(t != NULL);
    if (!t) return;
    ordo_engine_destroy(e);
    CHECK_MSG(contains(ordo_last_error(), "1 tensor storage still uses this engine"), "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_tensor_op1(kfill, "fill", t, NULL, 2.5), 0);
    CHECK_EQ_LONG(ordo_tensor_wait(t), 0);
    CHECK(((float *)ordo_tensor_data(t))[15] == 2.5f);
    ordo_tensor_free(t);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    ordo_engine_destroy(e); /* nothing left on it: destroyed (ASan/LSan check) */

    ordo_engine *te = ordo_tensor_engine_create(NULL);
    CHECK(te != NULL);
    if (!te) return;
    t = ordo_tensor_empty(te, ORDO_F32, 1, shape, cpu);
    ordo_engine_destroy(te);
    CHECK_MSG(contains(ordo_last_error(), "ordo_tensor_engine_close"), "'%s'", ordo_last_error());
    ordo_tensor_engine_close(te); /* lives on for t */
    /* A second close dropped t's reference and destroyed the engine
     * under t: refused now, with a message. */
    ordo_tensor_engine_close(te);
    CHECK_MSG(contains(ordo_tensor_error(), "closed already"), "'%s'", ordo_tensor_error());
    CHECK_EQ_LONG(ordo_tensor_op1(kfill, "fill", t, NULL, 1.0), 0);
    CHECK_EQ_LONG(ordo_tensor_wait(t), 0);
    CHECK(((float *)ordo_tensor_data(t))[0] == 1.0f);
    ordo_tensor_free(t); /* the last one: the engine goes with it */
    ordo_engine *plain = make_engine(ORDO_ENGINE_NAIVE, 1);
    ordo_tensor_engine_close(plain); /* not a tensor engine: nothing but the message */
    CHECK_MSG(contains(ordo_tensor_error(), "not made by ordo_tensor_engine_create"), "'%s'", ordo_tensor_error());
    ordo_engine_destroy(plain);
}

/* ---- an engine destroyed under another thread's bulk ---- */

typedef struct bulker_arg {
    ordo_engine *e;
    ordo_var *v;
    atomic_int stage; /* 1: ops collected; 2: may exit */
} bulker_arg;

static int bulk_noop(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (void)param;
    return 0;
}

static void *bulker_main(void *p) {
    bulker_arg *a = p;
    ordo_set_bulk_size(16);
    for (int i = 0; i < 3; i++)
        ordo_push_sync(a->e, bulk_noop, NULL, NULL, cpu_ctx(0), NULL, 0, &a->v, 1, ORDO_PROP_BULK, 0, "bulked");
    atomic_store(&a->stage, 1);
    while (atomic_load(&a->stage) != 2) sched_yield();
    return NULL; /* its bulk is handed over as it exits */
}

/* Destroyed while another thread's bulk held ops for it, the engine was
 * freed, and that thread's flush at exit pushed into freed memory.  The
 * destroy is refused now, with a message; once that thread has handed
 * its bulk over, the ops run and destroy works. */
static void test_destroy_under_other_threads_bulk_refused(void) {
    bulker_arg a;
    a.e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    if (!a.e) return;
    a.v = ordo_new_variable(a.e);
    atomic_init(&a.stage, 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, bulker_main, &a) == 0);
    while (atomic_load(&a.stage) != 1) sched_yield();
    ordo_engine_destroy(a.e);
    CHECK_MSG(contains(ordo_last_error(), "other thread still collects ops for this engine"), "'%s'",
              ordo_last_error());
    atomic_store(&a.stage, 2);
    pthread_join(th, NULL);
    CHECK_EQ_LONG(ordo_wait_for_var(a.e, a.v), 0);
    CHECK_EQ_LONG(ordo_var_version(a.v), 3);
    ordo_engine_destroy(a.e);
}

/* ---- a random misuse fuzz ---- */

static atomic_long fuzz_ran;
static int fuzz_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (void)param;
    atomic_fetch_add(&fuzz_ran, 1);
    return 0;
}
static void fuzz_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    atomic_fetch_add(&fuzz_ran, 1);
    ordo_done_complete(done, NULL);
    if (param) ordo_done_complete(done, "a second completion"); /* refused */
}

static unsigned fuzz_rand(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(*st >> 33);
}

#define FUZZ_NV 6
#define FUZZ_NO 3

/* An error code comes with a message. */
#define FUZZ_RC(what, expr)                                                                                    \
    do {                                                                                                       \
        int rc_ = (expr);                                                                                      \
        if (rc_ != 0 && (rc_ < ORDO_ERR_FAILED || rc_ > ORDO_ERR_NOMEM || !ordo_last_error()[0])) {             \
            CHECK_MSG(0, "%s (step %d): rc %d with message '%s'", what, step, rc_, ordo_last_error());         \
            bad++;                                                                                             \
        }                                                                                                      \
    } while (0)

/* Random calls on two engines, most of them wrong: vars and operators of
 * the other engine, deleted ones (deleted again, pushed, waited on), NULL
 * and negative counts, NULL entries, bad contexts and properties, bulk
 * sizes out of range, profiler calls in any order, async ops completed
 * twice.  Every call returns 0 or an error code with a message, nothing
 * crashes or hangs (ASan, TSan), and afterwards both engines still run
 * ops and are destroyed clean. */
static void test_misuse_fuzz(void) {
    int steps = (int)(3000 * test_scale());
    if (steps < 300) steps = 300;
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *es[2] = {make_engine(kind, 2), make_engine(kind, 1)};
        if (!es[0] || !es[1]) return;
        ordo_var *vars[2][FUZZ_NV];
        ordo_opr *oprs[2][FUZZ_NO];
        for (int x = 0; x < 2; x++) {
            for (int i = 0; i < FUZZ_NV; i++) vars[x][i] = ordo_new_variable(es[x]);
            for (int i = 0; i < FUZZ_NO; i++) oprs[x][i] = NULL;
        }
        uint64_t st = 0x9e3779b97f4a7c15ull + (uint64_t)k;
        int bad = 0;
        for (int step = 0; step < steps && bad < 5; step++) {
            int x = fuzz_rand(&st) % 2;
            ordo_engine *e = es[fuzz_rand(&st) % 8 == 0 ? 1 - x : x]; /* now and then the other engine */
            ordo_var *pick[8];
            int n = (int)(fuzz_rand(&st) % 5) - (fuzz_rand(&st) % 10 == 0 ? 3 : 0); /* sometimes negative */
            for (int i = 0; i < 8; i++) {
                unsigned r = fuzz_rand(&st) % 20;
                pick[i] = r == 0 ? NULL : vars[r == 1 ? 1 - x : x][fuzz_rand(&st) % FUZZ_NV];
            }
            ordo_ctx ctx = cpu_ctx(0);
            if (fuzz_rand(&st) % 10 == 0) {
                ctx.dev_type = (int)(fuzz_rand(&st) % 5);
                ctx.dev_id = (int)(fuzz_rand(&st) % 70) - 2;
            }
            int prop = fuzz_rand(&st) % 6 == 0 ? (int)(fuzz_rand(&st) % 12) - 2 : ORDO_PROP_NORMAL;
            if (fuzz_rand(&st) % 3 == 0) prop |= ORDO_PROP_BULK;
            int nr = n < 0 ? n : n / 2, nw = n < 0 ? 0 : n - n / 2;
            ordo_var *const *rs = fuzz_rand(&st) % 15 == 0 ? NULL : pick;
            switch (fuzz_rand(&st) % 13) {
            case 0:
            case 1:
                FUZZ_RC("push_sync", ordo_push_sync(e, fuzz_op, NULL, NULL, ctx, rs, nr, pick + 4, nw, prop, 0, "f"));
                break;
            case 2:
                FUZZ_RC("push_async", ordo_push_async(e, fuzz_async, fuzz_rand(&st) % 4 == 0 ? (void *)1 : NULL, NULL,
                                                      ctx, rs, nr, pick + 4, nw, prop & ~ORDO_PROP_BULK, 0, "a"));
                break;
            case 3: {
                int slot = fuzz_rand(&st) % FUZZ_NO;
                ordo_opr *r = ordo_new_operator(e, fuzz_async, NULL, NULL, rs, nr, pick + 4, nw,
                                                prop & ~ORDO_PROP_BULK, "o");
                if (!r && !ordo_last_error()[0]) {
                    CHECK_MSG(0, "new_operator (step %d): NULL without a message", step);
                    bad++;
                }
                if (r) {
                    int owner = e == es[0] ? 0 : 1;
                    if (oprs[owner][slot]) ordo_delete_operator(e, oprs[owner][slot]);
                    oprs[owner][slot] = r;
                }
                break;
            }
            case 4: {
                ordo_opr *r = oprs[fuzz_rand(&st) % 2][fuzz_rand(&st) % FUZZ_NO];
                FUZZ_RC("push", ordo_push(e, r, ctx, 0));
                break;
            }
            case 5: /* deletes, twice now and then: the handle is kept */
                ordo_delete_operator(e, oprs[fuzz_rand(&st) % 2][fuzz_rand(&st) % FUZZ_NO]);
                break;
            case 6: {
                int slot = fuzz_rand(&st) % FUZZ_NV;
                FUZZ_RC("delete_variable", ordo_delete_variable(e, NULL, NULL, ctx, vars[x][slot]));
                if (fuzz_rand(&st) % 2) vars[x][slot] = ordo_new_variable(es[x]); /* else keep the stale handle */
                break;
            }
            case 7:
                if (pick[0]) FUZZ_RC("wait_for_var", fuzz_rand(&st) % 2 ? ordo_wait_for_var(e, pick[0])
                                                                      : ordo_wait_to_write(e, pick[0]));
                break;
            case 8:
                ordo_set_bulk_size((int)(fuzz_rand(&st) % 100) - 10);
                if (fuzz_rand(&st) % 2) FUZZ_RC("bulk_flush", ordo_bulk_flush());
                break;
            case 9:
                switch (fuzz_rand(&st) % 4) {
                case 0: FUZZ_RC("profiler_start", ordo_profiler_start(e)); break;
                case 1: FUZZ_RC("profiler_stop", ordo_profiler_stop(e)); break;
                case 2: ordo_profiler_clear(e); break;
                default: FUZZ_RC("profiler_summary", ordo_profiler_summary(e, NULL)); break;
                }
                break;
            case 10:
                (void)ordo_wait_for_all(e); /* may report a failure: any code is fine */
                break;
            case 11:
                if (pick[0]) {
                    (void)ordo_var_version(pick[0]);
                    /* ordo_var_failed reads what the last write left: after a wait only */
                    int w = ordo_wait_to_write(e, pick[0]);
                    if (w != ORDO_OK && w != ORDO_ERR_FAILED) break;
                    int rc = ordo_var_failed(pick[0]);
                    if (rc && !ordo_last_error()[0]) {
                        CHECK_MSG(0, "var_failed (step %d): %d without a message", step, rc);
                        bad++;
                    }
                }
                break;
            default:
                if (fuzz_rand(&st) % 4 == 0) ordo_done_complete(NULL, NULL);
                FUZZ_RC("pending", ordo_engine_pending(e) < 0 ? ORDO_ERR_INVALID : 0);
                break;
            }
        }
        ordo_set_bulk_size(0);
        CHECK_EQ_LONG(ordo_bulk_flush(), 0);
        for (int x = 0; x < 2; x++) (void)ordo_wait_for_all(es[x]); /* both: fuzz_ran counts either's ops */
        for (int x = 0; x < 2; x++) {
            CHECK_EQ_LONG(ordo_wait_for_all(es[x]), 0);
            CHECK_EQ_LONG(ordo_engine_pending(es[x]), 0);
            ordo_profiler_stop(es[x]);
            /* Still working. */
            ordo_var *v = ordo_new_variable(es[x]);
            long before = atomic_load(&fuzz_ran);
            CHECK_EQ_LONG(push_simple(es[x], fuzz_op, NULL, NULL, 0, &v, 1, "after"), 0);
            CHECK_EQ_LONG(ordo_wait_for_var(es[x], v), 0);
            CHECK_EQ_LONG(atomic_load(&fuzz_ran), before + 1);
            for (int i = 0; i < FUZZ_NO; i++)
                if (oprs[x][i]) ordo_delete_operator(es[x], oprs[x][i]); /* some already deleted: refused */
            CHECK_EQ_LONG(ordo_wait_for_all(es[x]), 0);
            ordo_engine_destroy(es[x]);
        }
    }
}

/* ---- kernel names the tensor layer cannot push ---- */

static int kernel_noop(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    (void)rc;
    (void)a;
    return 0;
}

/* ordo_kernel_register took a name of any length, but the tensor layer's
 * ids (ordo_tensor_kernel_id) take at most ORDO_KERNEL_NAME_MAX
 * characters: such a kernel was registered and could never be pushed.
 * It is refused at registration now, naming the limit; a name of exactly
 * the limit registers and pushes. */
static void test_kernel_name_too_long_refused(void) {
    char name[ORDO_KERNEL_NAME_MAX + 2];
    memset(name, 'k', sizeof name - 1);
    name[sizeof name - 1] = 0; /* ORDO_KERNEL_NAME_MAX + 1 characters */
    int rc = ordo_kernel_register(name, ORDO_CPU, kernel_noop);
    CHECK_MSG(rc == ORDO_ERR_INVALID && contains(ordo_last_error(), "characters long (at most 71)"), "%d '%s'", rc,
              ordo_last_error());
    CHECK(ordo_kernel_lookup(name, ORDO_CPU) == NULL);
    name[ORDO_KERNEL_NAME_MAX] = 0; /* exactly the limit */
    CHECK_EQ_LONG(ordo_kernel_register(name, ORDO_CPU, kernel_noop), 0);
    int kid = ordo_tensor_kernel_id(name);
    CHECK(kid >= 0);
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    if (!e || kid < 0) return;
    int64_t shape[1] = {2};
    ordo_tensor *t = ordo_tensor_empty(e, ORDO_F32, 1, shape, cpu_ctx(0));
    CHECK_EQ_LONG(ordo_tensor_push(kid, "long", 0, NULL, 0, &t, 1, NULL, 0, NULL, 0), 0);
    CHECK_EQ_LONG(ordo_tensor_wait(t), 0);
    ordo_tensor_free(t);
    ordo_engine_destroy(e);
}

/* ---- who owns param after a refused push ---- */

static atomic_int pf_calls;
static void count_free(void *p) {
    (void)p;
    atomic_fetch_add(&pf_calls, 1);
}

/* As ordo.h says: a refused push leaves param the caller's (param_free is
 * not called, so the caller may free it, once); an accepted op's
 * param_free runs once, whether it ran, failed or was skipped. */
static void test_refused_push_keeps_param(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    ordo_ctx bad = {9, 0};
    atomic_store(&pf_calls, 0);
    CHECK_EQ_LONG(ordo_push_sync(e, bulk_noop, NULL, count_free, bad, NULL, 0, &v, 1, 0, 0, "x"), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(ordo_push_async(e, async_noop, NULL, count_free, cpu_ctx(0), NULL, -1, &v, 1, 0, 0, "x"),
                  ORDO_ERR_INVALID);
    CHECK(ordo_new_operator(e, async_noop, NULL, count_free, NULL, 0, &v, 1, ORDO_PROP_DELETE_VAR, "x") == NULL);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&pf_calls), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, bulk_noop, NULL, count_free, cpu_ctx(0), NULL, 0, &v, 1, 0, 0, "ok"), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(atomic_load(&pf_calls), 1);
    ordo_engine_destroy(e);
}

int main(void) {
    TEST_T(test_var_of_another_engine, 60);
    TEST_T(test_new_operator_checks_like_push, 60);
    TEST_T(test_operator_var_deleted_and_reused, 60);
    TEST(test_done_complete_null);
    TEST_T(test_operator_delete_misuse, 60);
    TEST_T(test_done_complete_twice, 60);
    TEST_T(test_destroy_under_tensors_refused, 60);
    TEST_T(test_destroy_under_other_threads_bulk_refused, 60);
    TEST_T(test_misuse_fuzz, 240);
    TEST_T(test_kernel_name_too_long_refused, 60);
    TEST_T(test_refused_push_keeps_param, 60);
    TEST_T(test_default_engine_destroy_refused, 60);
    return harness_end();
}
