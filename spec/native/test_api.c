/*
 * test_api.c - the rest of the public C API (src/ordo.h): versions, config
 * and environment, bad inputs, run-context fields, the default engine,
 * devices, thread-local errors and the profiler.
 */
#include "harness.h"
#include "test_util.h"

#include <ctype.h>
#include <signal.h>
#include <sys/resource.h>

static const char *const ENV_NAMES[] = {
    "ORDO_ENGINE_TYPE",        "ORDO_CPU_WORKER_NTHREADS", "ORDO_CPU_PRIORITY_NTHREADS",
    "ORDO_GPU_WORKER_NTHREADS", "ORDO_GPU_COPY_NTHREADS",  "ORDO_MAX_INFLIGHT",
    "ORDO_SPIN_US",            "ORDO_PROFILER_AUTOSTART",  "ORDO_PUSH_INLINE_AFTER",
    "ORDO_BULK_OP_MAX_NS",     "ORDO_RUN_NOW_MAX_ELEMENTS", "ORDO_PROFILER_MAX_EVENTS"};

static void clear_env(void) {
    for (int i = 0; i < ARRAY_LEN(ENV_NAMES); i++) unsetenv(ENV_NAMES[i]);
}

/* ------------------------------------------------------------------ */

static void test_var_version_counts_completed_writes(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e), *u = ordo_new_variable(e);
        CHECK_EQ_LONG(ordo_var_version(v), 0);
        for (int i = 1; i <= 50; i++) {
            CHECK_EQ_LONG(push_simple(e, noop_op, NULL, &u, 1, &v, 1, "w"), 0);
            CHECK_EQ_LONG(push_simple(e, noop_op, NULL, &v, 1, NULL, 0, "r"), 0);
            if (i % 10 == 0) {
                CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
                CHECK_EQ_LONG(ordo_var_version(v), i);
            }
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(ordo_var_version(v), 50);
        CHECK_EQ_LONG(ordo_var_version(u), 0); /* only read */
        /* an op that fails writes nothing: "completed writes" excludes it?
         * Not specified; not checked. */
        ordo_engine_destroy(e);
    }
}

/* Large var lists (beyond any inline storage) work. */
static void test_many_vars_in_one_op(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        enum { N = 300 };
        ordo_var *rs[N], *ws[N];
        for (int i = 0; i < N; i++) {
            rs[i] = ordo_new_variable(e);
            ws[i] = ordo_new_variable(e);
        }
        atomic_long n;
        atomic_init(&n, 0);
        for (int rep = 0; rep < 10; rep++)
            CHECK_EQ_LONG(push_simple(e, count_op, &n, rs, N, ws, N, "wide"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&n), 10);
        long bad = 0;
        for (int i = 0; i < N; i++) bad += ordo_var_version(ws[i]) != 10 || ordo_var_version(rs[i]) != 0;
        CHECK_EQ_LONG(bad, 0);
        ordo_engine_destroy(e);
    }
}

/* ------------------------------------------------------------------ */
/* Config                                                              */

static void test_engine_kind_names(void) {
    CHECK(ordo_engine_kind_name(ORDO_ENGINE_NAIVE) && !strcmp(ordo_engine_kind_name(ORDO_ENGINE_NAIVE), "naive"));
    CHECK(ordo_engine_kind_name(ORDO_ENGINE_POOLED) && !strcmp(ordo_engine_kind_name(ORDO_ENGINE_POOLED), "pooled"));
    CHECK(ordo_engine_kind_name(ORDO_ENGINE_PER_DEVICE) &&
          !strcmp(ordo_engine_kind_name(ORDO_ENGINE_PER_DEVICE), "perdevice"));
    (void)ordo_engine_kind_name(99); /* must not crash; value unspecified */
}

static void test_config_explicit(void) {
    clear_env();
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_POOLED;
    c.cpu_workers = 3;
    c.cpu_priority_workers = 2;
    c.max_inflight = 777;
    c.spin_us = 5;
    ordo_engine *e = ordo_engine_create(&c);
    CHECK(e != NULL);
    if (!e) return;
    ordo_engine_config got;
    memset(&got, 0xff, sizeof got);
    ordo_engine_get_config(e, &got);
    CHECK_EQ_LONG(got.kind, ORDO_ENGINE_POOLED);
    CHECK_EQ_LONG(got.cpu_workers, 3);
    CHECK_EQ_LONG(got.cpu_priority_workers, 2);
    CHECK_EQ_LONG(got.max_inflight, 777);
    CHECK_EQ_LONG(got.spin_us, 5);
    /* zero fields got their defaults */
    CHECK_EQ_LONG(got.gpu_workers, 2);
    CHECK_EQ_LONG(got.gpu_copy_workers, 1);
    CHECK_EQ_LONG(got.profiler_autostart, 0);
    ordo_engine_destroy(e);
}

static void test_config_defaults(void) {
    clear_env();
    ordo_engine *e = ordo_engine_create(NULL);
    CHECK(e != NULL);
    if (!e) return;
    ordo_engine_config got;
    ordo_engine_get_config(e, &got);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    long affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : cores;
    CHECK_EQ_LONG(got.kind, ORDO_ENGINE_PER_DEVICE);
    CHECK_MSG(got.cpu_workers == cores || got.cpu_workers == affinity,
              "cpu_workers %d, cores %ld (affinity %ld)", got.cpu_workers, cores, affinity);
    CHECK_EQ_LONG(got.cpu_priority_workers, 1);
    CHECK_EQ_LONG(got.gpu_workers, 2);
    CHECK_EQ_LONG(got.gpu_copy_workers, 1);
    CHECK_EQ_LONG(got.max_inflight, 8192);
    CHECK_EQ_LONG(got.spin_us, 50);
    CHECK_EQ_LONG(got.profiler_autostart, 0);
    CHECK_EQ_LONG(got.push_inline_after, 64);
    CHECK_EQ_LONG(got.bulk_op_max_ns, 500);
    ordo_engine_destroy(e);
}

/* The settings an engine made from the environment alone gets (zeroed
 * when it cannot be made, which the CHECK reports). */
static ordo_engine_config config_from_env(void) {
    ordo_engine_config got;
    memset(&got, 0, sizeof got);
    ordo_engine *e = ordo_engine_create(NULL);
    CHECK(e != NULL);
    if (e) {
        ordo_engine_get_config(e, &got);
        ordo_engine_destroy(e);
    }
    return got;
}

static void test_config_from_environment(void) {
    clear_env();
    setenv("ORDO_ENGINE_TYPE", "pooled", 1);
    setenv("ORDO_CPU_WORKER_NTHREADS", "3", 1);
    setenv("ORDO_CPU_PRIORITY_NTHREADS", "2", 1);
    setenv("ORDO_GPU_WORKER_NTHREADS", "3", 1);
    setenv("ORDO_GPU_COPY_NTHREADS", "2", 1);
    setenv("ORDO_MAX_INFLIGHT", "1234", 1);
    setenv("ORDO_SPIN_US", "7", 1);
    setenv("ORDO_BULK_OP_MAX_NS", "400", 1);
    ordo_engine *e = ordo_engine_create(NULL);
    CHECK(e != NULL);
    if (e) {
        ordo_engine_config got;
        ordo_engine_get_config(e, &got);
        CHECK_EQ_LONG(got.kind, ORDO_ENGINE_POOLED);
        CHECK_EQ_LONG(got.cpu_workers, 3);
        CHECK_EQ_LONG(got.cpu_priority_workers, 2);
        CHECK_EQ_LONG(got.gpu_workers, 3);
        CHECK_EQ_LONG(got.gpu_copy_workers, 2);
        CHECK_EQ_LONG(got.max_inflight, 1234);
        CHECK_EQ_LONG(got.spin_us, 7);
        CHECK_EQ_LONG(got.bulk_op_max_ns, 400);
        ordo_engine_destroy(e);
    }
    /* negative: bulks always fill, whatever their ops cost */
    setenv("ORDO_BULK_OP_MAX_NS", "-1", 1);
    CHECK_EQ_LONG(config_from_env().bulk_op_max_ns, -1);
    /* a nonzero field wins over the environment, a zero one takes it */
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_NAIVE;
    c.max_inflight = 99;
    e = ordo_engine_create(&c);
    CHECK(e != NULL);
    if (e) {
        ordo_engine_config got;
        ordo_engine_get_config(e, &got);
        CHECK_EQ_LONG(got.kind, ORDO_ENGINE_NAIVE);
        CHECK_EQ_LONG(got.max_inflight, 99);
        CHECK_EQ_LONG(got.cpu_workers, 3);
        ordo_engine_destroy(e);
    }
    /* the environment is read at each create, not cached */
    setenv("ORDO_ENGINE_TYPE", "naive", 1);
    CHECK_EQ_LONG(config_from_env().kind, ORDO_ENGINE_NAIVE);
    setenv("ORDO_ENGINE_TYPE", "perdevice", 1);
    setenv("ORDO_CPU_WORKER_NTHREADS", "1", 1);
    e = ordo_engine_create(NULL);
    CHECK(e != NULL);
    if (e) {
        ordo_engine_config got;
        ordo_engine_get_config(e, &got);
        CHECK_EQ_LONG(got.kind, ORDO_ENGINE_PER_DEVICE);
        CHECK_EQ_LONG(got.cpu_workers, 1);
        /* and it works */
        ordo_var *v = ordo_new_variable(e);
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "x"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        ordo_engine_destroy(e);
    }
    clear_env();
}

/* Every ORDO_* setting is checked: a bad value fails the engine's creation
 * with a message naming the variable, the value and what it accepts;
 * before, each was silently replaced (ORDO_ENGINE_TYPE=bogus ran perdevice,
 * ORDO_CPU_WORKER_NTHREADS=abc the default, =0 one worker, ORDO_MAX_INFLIGHT=1
 * 16, ORDO_SIMULATED_GPUS=100 16 devices...).  Unset or empty: the default. */
static void test_config_environment_rejects_bad_values(void) {
    static const struct {
        const char *name, *value, *expect;
    } bad[] = {
        {"ORDO_ENGINE_TYPE", "bogus", "naive, pooled or perdevice"},
        {"ORDO_CPU_WORKER_NTHREADS", "abc", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", "-3", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", "99999999999", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", "0", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", "5000", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", "2x", "from 1 to 1024"},
        {"ORDO_CPU_WORKER_NTHREADS", " 2", "from 1 to 1024"},
        {"ORDO_CPU_PRIORITY_NTHREADS", "0", "from 1 to 1024"},
        {"ORDO_GPU_WORKER_NTHREADS", "x", "from 1 to 1024"},
        {"ORDO_GPU_COPY_NTHREADS", "-1", "from 1 to 1024"},
        {"ORDO_MAX_INFLIGHT", "0", "from 16 to"},
        {"ORDO_MAX_INFLIGHT", "1", "from 16 to"},
        {"ORDO_SPIN_US", "abc", "from 0 to 1000000"},
        {"ORDO_SPIN_US", "-1", "from 0 to 1000000"},
        {"ORDO_PROFILER_AUTOSTART", "yes", "0 or 1"},
        {"ORDO_PROFILER_AUTOSTART", "2", "0 or 1"},
        {"ORDO_PUSH_INLINE_AFTER", "-abc", "(0 or negative: never)"},
        {"ORDO_BULK_OP_MAX_NS", "1.5", "always bulked"},
        {"ORDO_RUN_NOW_MAX_ELEMENTS", "lots", "never"},
        {"ORDO_SIMULATED_GPUS", "100", "from 0 to 16"},
        {"ORDO_SIMULATED_GPUS", "two", "from 0 to 16"},
        {"ORDO_SIMULATED_GPU_MEM_MB", "-5", "no limit"},
        {"ORDO_SIMULATED_GPU_MEM_MB", "abc", "no limit"},
        {"ORDO_SIMULATED_GPU_DELAY_NS", "-1", "from 0 to"},
        {"ORDO_GC_THRESHOLD_MB", "abc", "from 1 to"},
        {"ORDO_GC_THRESHOLD_MB", "0", "from 1 to"},
        {"ORDO_HOST_CACHE_MB", "-1", "from 0 to"},
        {"ORDO_PINNED_CACHE_MB", "lots", "from 0 to"},
        {"ORDO_BLAS_THREADS", "0", "from 1 to"},
        {"ORDO_PROFILER_MAX_EVENTS", "0", "from 1 to 8388608 (records per worker thread)"},
        {"ORDO_PROFILER_MAX_EVENTS", "9000000", "from 1 to 8388608"},
        {"ORDO_PROFILER_MAX_EVENTS", "lots", "from 1 to 8388608"},
    };
    clear_env();
    for (int i = 0; i < ARRAY_LEN(bad); i++) {
        setenv(bad[i].name, bad[i].value, 1);
        ordo_engine *e = ordo_engine_create(NULL);
        CHECK_MSG(e == NULL, "%s=%s: the engine was created", bad[i].name, bad[i].value);
        if (e) {
            ordo_engine_destroy(e);
        } else {
            char head[128];
            snprintf(head, sizeof head, "%s=%s: expected ", bad[i].name, bad[i].value);
            const char *err = ordo_last_error();
            CHECK_MSG(strstr(err, head) && strstr(err, bad[i].expect), "%s=%s: message \"%s\"", bad[i].name,
                      bad[i].value, err);
        }
        /* an explicit config does not read the engine's variables; the
         * library's own (storage, caches, BLAS, devices) it still does */
        unsetenv(bad[i].name);
    }
    /* empty is unset */
    for (int i = 0; i < ARRAY_LEN(ENV_NAMES); i++) setenv(ENV_NAMES[i], "", 1);
    ordo_engine_config got = config_from_env();
    CHECK_EQ_LONG(got.kind, ORDO_ENGINE_PER_DEVICE);
    CHECK_EQ_LONG(got.max_inflight, 8192);
    CHECK_EQ_LONG(got.spin_us, 50);
    clear_env();
    /* the documented edges: 0 spins not at all; 0 from the environment is
     * "never" for the three signed settings, read back as -1; a config's
     * max_inflight below 16 counts as 16 */
    setenv("ORDO_SPIN_US", "0", 1);
    setenv("ORDO_PUSH_INLINE_AFTER", "0", 1);
    setenv("ORDO_BULK_OP_MAX_NS", "0", 1);
    setenv("ORDO_RUN_NOW_MAX_ELEMENTS", "-7", 1);
    setenv("ORDO_PROFILER_AUTOSTART", "0", 1);
    got = config_from_env();
    CHECK_EQ_LONG(got.spin_us, 0);
    CHECK_EQ_LONG(got.push_inline_after, -1);
    CHECK_EQ_LONG(got.bulk_op_max_ns, -1);
    CHECK_EQ_LONG(got.run_now_max_elements, -1);
    CHECK_EQ_LONG(got.profiler_autostart, 0);
    clear_env();
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_NAIVE;
    c.max_inflight = 1;
    ordo_engine *e = ordo_engine_create(&c);
    CHECK(e != NULL);
    if (e) {
        ordo_engine_get_config(e, &got);
        CHECK_EQ_LONG(got.max_inflight, 16);
        ordo_engine_destroy(e);
    }
}

/* A config field set out of range is refused, naming the field; it was
 * taken for "use the environment" (kind 99, cpu_workers -3) or accepted
 * unbounded (spin_us INT_MAX made destroy wait out the spin). */
static void test_config_fields_rejects_bad_values(void) {
    clear_env();
    static const struct {
        int which, value;
        const char *expect;
    } bad[] = {
        {0, 99, "config.kind = 99"},           {0, -1, "config.kind = -1"},
        {1, -3, "config.cpu_workers = -3"},    {2, -1, "config.cpu_priority_workers = -1"},
        {3, 2000, "config.gpu_workers = 2000"}, {5, 1 << 30, "config.max_inflight"},
        {6, 2147483647, "config.spin_us"},     {7, 2, "config.profiler_autostart = 2"},
    };
    for (int i = 0; i < ARRAY_LEN(bad); i++) {
        ordo_engine_config c;
        memset(&c, 0, sizeof c);
        int *fields[] = {&c.kind, &c.cpu_workers, &c.cpu_priority_workers, &c.gpu_workers, &c.gpu_copy_workers,
                         &c.max_inflight, &c.spin_us, &c.profiler_autostart};
        *fields[bad[i].which] = bad[i].value;
        ordo_engine *e = ordo_engine_create(&c);
        CHECK_MSG(e == NULL, "%s: the engine was created", bad[i].expect);
        if (e) ordo_engine_destroy(e);
        else CHECK_MSG(strstr(ordo_last_error(), bad[i].expect), "message \"%s\"", ordo_last_error());
    }
}

static int destroy_probe_nop(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (void)param;
    return 0;
}

/* A spinning idle worker notices the stop: destroy took the whole spin_us
 * (a second at the largest setting). */
static void test_destroy_does_not_wait_out_the_spin(void) {
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.spin_us = 1000000;
    ordo_engine *e = ordo_engine_create(&c);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_push_sync(e, destroy_probe_nop, NULL, NULL, (ordo_ctx){ORDO_CPU, 0}, NULL, 0, &v, 1,
                                 ORDO_PROP_NORMAL, 0, "nop"),
                  ORDO_OK);
    CHECK_EQ_LONG(ordo_wait_for_var(e, v), ORDO_OK); /* a worker now spins for a second */
    long t0 = now_ms();
    ordo_engine_destroy(e);
    long ms = now_ms() - t0;
    CHECK_MSG(ms < 500, "destroy took %ld ms with spin_us = 1000000", ms);
}

/* ordo_engine_destroy from inside one of the engine's ops would wait for
 * that op forever: refused with ORDO_ERR_DEADLOCK as the thread's error,
 * and the engine runs on. */
static int destroy_inside(const ordo_run_ctx *rc, void *param) {
    int *code = param;
    ordo_engine_destroy(rc->engine);
    *code = strstr(ordo_last_error(), "ordo_engine_destroy: called from inside an operation") ? 1 : -1;
    return 0;
}

static void test_destroy_inside_an_op_is_refused(void) {
    static const int kinds[] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
    for (int k = 0; k < 3; k++) {
        ordo_engine_config c;
        memset(&c, 0, sizeof c);
        c.kind = kinds[k];
        ordo_engine *e = ordo_engine_create(&c);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        int code = 0;
        CHECK_EQ_LONG(ordo_push_sync(e, destroy_inside, &code, NULL, (ordo_ctx){ORDO_CPU, 0}, NULL, 0, &v, 1,
                                     ORDO_PROP_NORMAL, 0, "destroy_inside"),
                      ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), ORDO_OK);
        CHECK_MSG(code == 1, "%s: destroy inside an op was not refused (%d)", ordo_engine_kind_name(kinds[k]), code);
        ordo_delete_variable(e, NULL, NULL, (ordo_ctx){ORDO_CPU, 0}, v);
        ordo_engine_destroy(e);
    }
}

/* More workers than an engine holds: the message keeps the cause
 * (pool_start's "more than 1024 worker threads") and names the settings
 * and where they came from; it said only "cannot start worker threads". */
static void test_too_many_workers_named(void) {
    /* 1020 workers start before the priority pool fails: past valgrind's
     * thread limit (500) */
    if (under_valgrind()) SKIP("starts 1020 threads, past valgrind's limit");
    clear_env();
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = ORDO_ENGINE_PER_DEVICE;
    c.cpu_workers = 1020;
    setenv("ORDO_CPU_PRIORITY_NTHREADS", "10", 1);
    ordo_engine *e = ordo_engine_create(&c);
    CHECK(e == NULL);
    if (e) ordo_engine_destroy(e);
    const char *err = ordo_last_error();
    CHECK_MSG(strstr(err, "more than 1024 worker threads") && strstr(err, "cpu_workers = 1020 from the config") &&
                  strstr(err, "cpu_priority_workers = 10 from ORDO_CPU_PRIORITY_NTHREADS"),
              "message \"%s\"", err);
    clear_env();
    /* and a later engine is fine */
    e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (e) ordo_engine_destroy(e);
}

/* ------------------------------------------------------------------ */
/* Bad inputs                                                          */

static int must_not_run(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_int *)param, 1);
    return 0;
}

static void must_not_run_async(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    atomic_fetch_add((atomic_int *)param, 1);
    ordo_done_complete(done, NULL);
}

static int has_message(void) {
    const char *m = ordo_last_error();
    return m && *m;
}

/* Clears the thread's last error by provoking a different one, so that each
 * check sees the message of its own call. */
#define EXPECT_RC(call, ok_expr, what)                                                 \
    do {                                                                               \
        int rc_ = (call);                                                              \
        CHECK_MSG(ok_expr(rc_), "%s: %s returned %d", kind_str(kind), what, rc_);      \
        CHECK_MSG(has_message(), "%s: %s left no ordo_last_error message", kind_str(kind), what); \
    } while (0)

static int is_invalid(int rc) { return rc == ORDO_ERR_INVALID; }
static int is_nodev(int rc) { return rc == ORDO_ERR_NO_DEVICE; }
static int is_invalid_or_nodev(int rc) { return rc == ORDO_ERR_INVALID || rc == ORDO_ERR_NO_DEVICE; }

static void test_bad_inputs_return_errors(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        ordo_var *withnull[2] = {v, NULL};
        atomic_int ran;
        atomic_init(&ran, 0);
        ordo_ctx c0 = cpu_ctx(0);
        ordo_ctx bad7 = {7, 0}, bad0 = {0, 0}, negid = {ORDO_CPU, -1}, bigid = {ORDO_CPU, ORDO_MAX_DEVICES};

        EXPECT_RC(ordo_push_sync(NULL, must_not_run, &ran, NULL, c0, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid, "push_sync(NULL engine)");
        EXPECT_RC(ordo_push_sync(e, NULL, &ran, NULL, c0, NULL, 0, &v, 1, 0, 0, "x"), is_invalid,
                  "push_sync(NULL fn)");
        EXPECT_RC(ordo_push_async(e, NULL, &ran, NULL, c0, NULL, 0, &v, 1, 0, 0, "x"), is_invalid,
                  "push_async(NULL fn)");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, &v, -1, NULL, 0, 0, 0, "x"),
                  is_invalid, "nreads -1");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, NULL, 0, &v, -2, 0, 0, "x"),
                  is_invalid, "nwrites -2");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, NULL, 1, &v, 1, 0, 0, "x"),
                  is_invalid, "reads NULL with nreads 1");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, withnull, 2, NULL, 0, 0, 0, "x"),
                  is_invalid, "NULL var in reads");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, NULL, 0, withnull, 2, 0, 0, "x"),
                  is_invalid, "NULL var in writes");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, bad7, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid, "dev_type 7");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, bad0, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid, "dev_type 0");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, negid, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid_or_nodev, "dev_id -1");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, bigid, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid_or_nodev, "dev_id ORDO_MAX_DEVICES");
        EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, c0, NULL, 0, &v, 1, 99, 0, "x"),
                  is_invalid, "prop 99");
        EXPECT_RC(ordo_push_async(e, must_not_run_async, &ran, NULL, bad7, NULL, 0, &v, 1, 0, 0, "x"),
                  is_invalid, "push_async dev_type 7");
        if (ordo_gpu_count() == 0) {
            ordo_ctx gpu = {ORDO_GPU, 0};
            EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, gpu, NULL, 0, &v, 1, 0, 0, "x"),
                      is_nodev, "GPU ctx without a GPU");
        } else {
            ordo_ctx gpu = {ORDO_GPU, ordo_gpu_count()};
            EXPECT_RC(ordo_push_sync(e, must_not_run, &ran, NULL, gpu, NULL, 0, &v, 1, 0, 0, "x"),
                      is_invalid_or_nodev, "gpu(count) ctx");
        }
        /* operators */
        CHECK(ordo_new_operator(e, NULL, NULL, NULL, NULL, 0, &v, 1, 0, "x") == NULL);
        CHECK(has_message());
        CHECK(ordo_new_operator(NULL, must_not_run_async, NULL, NULL, NULL, 0, &v, 1, 0, "x") == NULL);
        CHECK(ordo_new_operator(e, must_not_run_async, NULL, NULL, withnull, 2, NULL, 0, 0, "x") == NULL);
        CHECK(ordo_new_operator(e, must_not_run_async, NULL, NULL, NULL, -1, NULL, 0, 0, "x") == NULL);
        EXPECT_RC(ordo_push(e, NULL, c0, 0), is_invalid, "push(NULL operator)");
        ordo_opr *op = ordo_new_operator(e, must_not_run_async, &ran, NULL, NULL, 0, &v, 1, 0, "ok");
        CHECK(op != NULL);
        if (op) {
            EXPECT_RC(ordo_push(e, op, bad7, 0), is_invalid, "push(operator, dev_type 7)");
            EXPECT_RC(ordo_push(NULL, op, c0, 0), is_invalid, "push(NULL engine, operator)");
            ordo_delete_operator(e, op);
        }
        ordo_delete_operator(e, NULL); /* no-op, must not crash */
        /* vars and waits */
        CHECK(ordo_new_variable(NULL) == NULL);
        EXPECT_RC(ordo_delete_variable(e, NULL, NULL, c0, NULL), is_invalid, "delete_variable(NULL var)");
        EXPECT_RC(ordo_delete_variable(NULL, NULL, NULL, c0, v), is_invalid, "delete_variable(NULL engine)");
        EXPECT_RC(ordo_delete_variable(e, NULL, NULL, bad7, v), is_invalid, "delete_variable(dev_type 7)");
        EXPECT_RC(ordo_wait_for_var(e, NULL), is_invalid, "wait_for_var(NULL var)");
        EXPECT_RC(ordo_wait_for_var(NULL, v), is_invalid, "wait_for_var(NULL engine)");
        EXPECT_RC(ordo_wait_to_write(e, NULL), is_invalid, "wait_to_write(NULL var)");
        EXPECT_RC(ordo_wait_for_all(NULL), is_invalid, "wait_for_all(NULL engine)");

        /* nothing rejected ever ran, and the engine is still usable: the
         * var survived the bad delete_variable calls */
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&ran), 0);
        atomic_long n;
        atomic_init(&n, 0);
        CHECK_EQ_LONG(push_simple(e, count_op, &n, NULL, 0, &v, 1, "good"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(atomic_load(&n), 1);
        CHECK_EQ_LONG(ordo_var_version(v), 1);
        /* ops with no vars at all and NULL names are fine */
        CHECK_EQ_LONG(ordo_push_sync(e, count_op, &n, NULL, c0, NULL, 0, NULL, 0, 0, 0, NULL), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(atomic_load(&n), 2);
        ordo_engine_destroy(e);
    }
    ordo_engine_destroy(NULL); /* no-op */
}

/* The calls that return no error code (void, a count, a version) still
 * say what was wrong with their arguments in ordo_last_error(), instead of
 * returning as if all were well: a NULL engine's pending count read 0
 * ("nothing pending"), a NULL engine's config left the caller's struct as
 * it was, a bulk size of 1000 or -3 was clamped without a word. */
static int last_error_has(const char *sub) { return strstr(ordo_last_error(), sub) != NULL; }
static void provoke_other_error(void) { (void)ordo_wait_for_all(NULL); }

static void test_calls_without_a_code_leave_a_message(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    provoke_other_error();
    CHECK_EQ_LONG(ordo_engine_pending(NULL), 0);
    CHECK_MSG(last_error_has("ordo_engine_pending: engine is NULL"), "'%s'", ordo_last_error());
    provoke_other_error();
    CHECK_EQ_LONG((long)ordo_var_version(NULL), 0);
    CHECK_MSG(last_error_has("ordo_var_version: variable is NULL"), "'%s'", ordo_last_error());
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    provoke_other_error();
    CHECK_EQ_LONG((long)ordo_var_version(v), 0);
    CHECK_MSG(last_error_has("ordo_var_version: variable") && last_error_has("deleted"), "'%s'", ordo_last_error());
    ordo_engine_config c;
    memset(&c, 0x5a, sizeof c);
    provoke_other_error();
    ordo_engine_get_config(NULL, &c);
    CHECK_MSG(last_error_has("ordo_engine_get_config: engine is NULL"), "'%s'", ordo_last_error());
    CHECK_EQ_LONG(c.kind, 0); /* zeroed, not left as garbage */
    CHECK_EQ_LONG(c.cpu_workers, 0);
    provoke_other_error();
    ordo_engine_get_config(e, NULL);
    CHECK_MSG(last_error_has("ordo_engine_get_config: out is NULL"), "'%s'", ordo_last_error());
    provoke_other_error();
    ordo_profiler_clear(NULL);
    CHECK_MSG(last_error_has("ordo_profiler_clear: engine is NULL"), "'%s'", ordo_last_error());
    int old = ordo_set_bulk_size(0);
    provoke_other_error();
    CHECK_EQ_LONG(ordo_set_bulk_size(1000), 0);
    CHECK_MSG(last_error_has("ordo_set_bulk_size: 1000") && last_error_has("64"), "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_get_bulk_size(), ORDO_BULK_MAX); /* clamped, as before */
    provoke_other_error();
    ordo_set_bulk_size(-3);
    CHECK_MSG(last_error_has("ordo_set_bulk_size: -3"), "'%s'", ordo_last_error());
    CHECK_EQ_LONG(ordo_get_bulk_size(), 0);
    ordo_set_bulk_size(old);
    ordo_engine_destroy(e);
}

/* ordo_last_error is thread-local. */
static void *read_last_error(void *p) {
    const char *m = ordo_last_error();
    snprintf((char *)p, 256, "%s", m ? m : "");
    return NULL;
}

static void test_last_error_is_thread_local(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    CHECK_EQ_LONG(ordo_wait_for_var(e, NULL), ORDO_ERR_INVALID);
    char mine[256], theirs[256];
    snprintf(mine, sizeof mine, "%s", ordo_last_error());
    CHECK(mine[0] != 0);
    pthread_t th;
    pthread_create(&th, NULL, read_last_error, theirs);
    pthread_join(th, NULL);
    CHECK_MSG(strcmp(theirs, mine) != 0 || mine[0] == 0, "another thread sees this thread's error '%s'",
              theirs);
    CHECK(strcmp(ordo_last_error(), mine) == 0); /* still there for this thread */
    ordo_engine_destroy(e);
}

/* ------------------------------------------------------------------ */
/* Run context                                                         */

#define MAX_SEEN 64

typedef struct {
    ordo_engine *e;
    ordo_ctx want;
    atomic_int bad_ctx, bad_engine, bad_stream;
    pthread_mutex_t mu;
    int nseen;
    pthread_t threads[MAX_SEEN];
    int ids[MAX_SEEN];
    atomic_int id_conflict, negative_id;
} rc_state;

static int rc_probe(const ordo_run_ctx *rc, void *param) {
    rc_state *s = (rc_state *)param;
    if (rc->ctx.dev_type != s->want.dev_type || rc->ctx.dev_id != s->want.dev_id)
        atomic_fetch_add(&s->bad_ctx, 1);
    if (rc->engine != s->e) atomic_fetch_add(&s->bad_engine, 1);
    if (rc->stream != NULL) atomic_fetch_add(&s->bad_stream, 1);
    if (rc->worker_id < 0) atomic_fetch_add(&s->negative_id, 1);
    pthread_mutex_lock(&s->mu);
    int found = 0;
    for (int i = 0; i < s->nseen; i++) {
        if (pthread_equal(s->threads[i], pthread_self())) {
            found = 1;
            if (s->ids[i] != rc->worker_id) atomic_fetch_add(&s->id_conflict, 1);
        } else if (s->ids[i] == rc->worker_id && rc->worker_id >= 0) {
            atomic_fetch_add(&s->id_conflict, 1); /* two threads, one id */
        }
    }
    if (!found && s->nseen < MAX_SEEN) {
        s->threads[s->nseen] = pthread_self();
        s->ids[s->nseen++] = rc->worker_id;
    }
    pthread_mutex_unlock(&s->mu);
    spin_us(5);
    return 0;
}

static void test_run_ctx_fields(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 3);
        CHECK(e != NULL);
        if (!e) continue;
        for (int dev = 0; dev < 3; dev++) {
            rc_state s;
            memset(&s, 0, sizeof s);
            pthread_mutex_init(&s.mu, NULL);
            s.e = e;
            s.want = cpu_ctx(dev);
            ordo_var *vs[8];
            for (int i = 0; i < 8; i++) vs[i] = ordo_new_variable(e);
            for (int i = 0; i < 400; i++)
                CHECK_EQ_LONG(ordo_push_sync(e, rc_probe, &s, NULL, s.want, NULL, 0, &vs[i % 8], 1,
                                             i % 5 == 0 ? ORDO_PROP_CPU_PRIORITIZED : 0, 0, "probe"), 0);
            CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
            CHECK_EQ_LONG(atomic_load(&s.bad_ctx), 0);
            CHECK_EQ_LONG(atomic_load(&s.bad_engine), 0);
            CHECK_EQ_LONG(atomic_load(&s.bad_stream), 0);
            CHECK_MSG(atomic_load(&s.id_conflict) == 0, "%s: worker ids are not one per thread",
                      kind_str(kind));
            if (kind == ORDO_ENGINE_NAIVE) {
                /* naive runs ops inline on the pushing thread, a non-worker */
                CHECK_EQ_LONG(s.nseen, 1);
                CHECK(pthread_equal(s.threads[0], pthread_self()));
                CHECK_EQ_LONG(s.ids[0], -1);
            } else {
                CHECK_MSG(atomic_load(&s.negative_id) == 0, "%s: %d ops on workers got worker_id < 0",
                          kind_str(kind), atomic_load(&s.negative_id));
                for (int i = 0; i < s.nseen; i++) CHECK(!pthread_equal(s.threads[i], pthread_self()));
            }
            pthread_mutex_destroy(&s.mu);
        }
        ordo_engine_destroy(e);
    }
}

/* ------------------------------------------------------------------ */

static void test_default_engine(void) {
    ordo_engine *a = ordo_engine_default(), *b = ordo_engine_default();
    CHECK(a != NULL);
    CHECK(a == b);
    if (!a) return;
    ordo_var *v = ordo_new_variable(a);
    atomic_long n;
    atomic_init(&n, 0);
    for (int i = 0; i < 100; i++) CHECK_EQ_LONG(push_simple(a, count_op, &n, NULL, 0, &v, 1, "d"), 0);
    CHECK_EQ_LONG(ordo_wait_for_var(a, v), 0);
    CHECK_EQ_LONG(atomic_load(&n), 100);
    CHECK_EQ_LONG(ordo_delete_variable(a, NULL, NULL, cpu_ctx(0), v), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(a), 0);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */

static int pinned_probe(const ordo_run_ctx *rc, void *param) {
    *(ordo_ctx *)param = rc->ctx;
    return 0;
}

typedef struct {
    atomic_int ran, stream_null;
    ordo_ctx ctx;
} gpu_probe;

static int gpu_probe_fn(const ordo_run_ctx *rc, void *param) {
    gpu_probe *p = (gpu_probe *)param;
    if (!rc->stream) atomic_fetch_add(&p->stream_null, 1);
    p->ctx = rc->ctx;
    atomic_fetch_add(&p->ran, 1);
    return 0;
}

static void test_devices(void) {
    int ngpu = ordo_gpu_count();
    CHECK(ngpu >= 0);
    printf("    ordo_gpu_count() = %d\n", ngpu);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        /* pinned host memory runs on cpu(dev_id) */
        ordo_ctx seen = {0, 0}, pinned = {ORDO_CPU_PINNED, 1};
        CHECK_EQ_LONG(ordo_push_sync(e, pinned_probe, &seen, NULL, pinned, NULL, 0, &v, 1, 0, 0, "pinned"), 0);
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
        CHECK_EQ_LONG(seen.dev_id, 1);
        CHECK(seen.dev_type == ORDO_CPU_PINNED || seen.dev_type == ORDO_CPU);
        for (int g = 0; g < ngpu && g < 2; g++) {
            gpu_probe p;
            memset(&p, 0, sizeof p);
            ordo_ctx gc = {ORDO_GPU, g};
            static const int props[] = {ORDO_PROP_NORMAL, ORDO_PROP_COPY_TO_GPU, ORDO_PROP_COPY_FROM_GPU,
                                        ORDO_PROP_GPU_PRIORITIZED};
            for (int i = 0; i < ARRAY_LEN(props); i++)
                CHECK_EQ_LONG(ordo_push_sync(e, gpu_probe_fn, &p, NULL, gc, NULL, 0, &v, 1, props[i], 0,
                                             "gpu_probe"), 0);
            CHECK_EQ_LONG(ordo_wait_for_var(e, v), 0);
            CHECK_EQ_LONG(atomic_load(&p.ran), ARRAY_LEN(props));
            CHECK_MSG(atomic_load(&p.stream_null) == 0, "%s: GPU op got a NULL stream", kind_str(kind));
            CHECK_EQ_LONG(p.ctx.dev_type, ORDO_GPU);
            CHECK_EQ_LONG(p.ctx.dev_id, g);
        }
        ordo_engine_destroy(e);
    }
    if (ngpu == 0) printf("    (no GPU: GPU ops were checked for ORDO_ERR_NO_DEVICE in bad inputs)\n");
}

/* ------------------------------------------------------------------ */
/* Profiler                                                            */

static char *slurp(FILE *f) {
    fflush(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0) return NULL;
    char *buf = (char *)malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    return buf;
}

static char *slurp_path(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = slurp(f);
    fclose(f);
    return s;
}

/* e's profiler trace as ordo_profiler_dump writes it (through a temporary
 * file, removed), or NULL after a failed check. */
static char *dump_trace(ordo_engine *e) {
    char path[] = "/tmp/ordo_prof_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    close(fd);
    CHECK_EQ_LONG(ordo_profiler_dump(e, path), 0);
    char *trace = slurp_path(path);
    CHECK(trace != NULL);
    unlink(path);
    return trace;
}

/* A small JSON validator: the dump must load in chrome://tracing/Perfetto. */
static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *json_string(const char *p) {
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (!*p || !strchr("\"\\/bfnrtu", *p)) return NULL;
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *json_value(const char *p, int depth) {
    if (depth > 64) return NULL;
    p = json_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = json_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = json_string(json_ws(p));
                if (!p) return NULL;
                p = json_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = json_value(p, depth + 1);
            if (!p) return NULL;
            p = json_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            return *p == close ? p + 1 : NULL;
        }
    }
    if (*p == '"') return json_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    char *end;
    strtod(p, &end);
    return end == p ? NULL : end;
}

static int json_valid(const char *s) {
    const char *p = json_value(s, 0);
    return p && *json_ws(p) == 0;
}

/* Does the line of `text` that mentions `name` also hold the count `n` as a
 * separate number? */
static int summary_has_count(const char *text, const char *name, long n) {
    const char *p = text;
    while ((p = strstr(p, name)) != NULL) {
        const char *ls = p;
        while (ls > text && ls[-1] != '\n') ls--;
        const char *le = strchr(p, '\n');
        if (!le) le = p + strlen(p);
        /* tokens after the name on this line */
        for (const char *q = p + strlen(name); q < le;) {
            while (q < le && !isdigit((unsigned char)*q)) q++;
            const char *ts = q;
            while (q < le && (isdigit((unsigned char)*q) || *q == '.')) q++;
            if (q > ts && (ts == ls || !isalnum((unsigned char)ts[-1]))) {
                if (strtol(ts, NULL, 10) == n && !memchr(ts, '.', (size_t)(q - ts))) return 1;
            }
        }
        p = le;
    }
    return 0;
}

static void test_profiler_dump_and_summary(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e), *u = ordo_new_variable(e);
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "before_start_op"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(ordo_profiler_start(e), 0);
        for (int i = 0; i < 3; i++) CHECK_EQ_LONG(push_simple(e, noop_op, NULL, &u, 1, &v, 1, "alpha_op"), 0);
        for (int i = 0; i < 5; i++)
            CHECK_EQ_LONG(ordo_push_sync(e, noop_op, NULL, NULL, cpu_ctx(1), &v, 1, &u, 1,
                                         ORDO_PROP_CPU_PRIORITIZED, 0, "beta_op"), 0);
        CHECK_EQ_LONG(ordo_push_async(e, (ordo_async_fn)NULL, NULL, NULL, cpu_ctx(0), NULL, 0, NULL, 0,
                                      0, 0, "invalid") != 0, 1);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "after_stop_op"), 0);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);

        char *trace = dump_trace(e);
        if (trace) {
            CHECK(strstr(trace, "traceEvents") != NULL);
            CHECK(strstr(trace, "alpha_op") != NULL);
            CHECK(strstr(trace, "beta_op") != NULL);
            CHECK_MSG(strstr(trace, "after_stop_op") == NULL, "%s: op pushed after stop was traced",
                      kind_str(kind));
            CHECK_MSG(strstr(trace, "before_start_op") == NULL, "%s: op run before start was traced",
                      kind_str(kind));
            CHECK_MSG(json_valid(trace), "%s: the trace is not valid JSON", kind_str(kind));
            free(trace);
        }

        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (f) {
            CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
            char *sum = slurp(f);
            CHECK(sum != NULL);
            if (sum) {
                CHECK_MSG(summary_has_count(sum, "alpha_op", 3), "%s: summary lacks 'alpha_op ... 3':\n%s",
                          kind_str(kind), sum);
                CHECK_MSG(summary_has_count(sum, "beta_op", 5), "%s: summary lacks 'beta_op ... 5':\n%s",
                          kind_str(kind), sum);
                free(sum);
            }
            fclose(f);
        }
        /* clear: the next summary no longer lists them */
        ordo_profiler_clear(e);
        f = tmpfile();
        if (f) {
            CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
            char *sum = slurp(f);
            if (sum) {
                CHECK_MSG(strstr(sum, "alpha_op") == NULL, "%s: alpha_op still listed after clear",
                          kind_str(kind));
                free(sum);
            }
            fclose(f);
        }
        /* dumping to a path that cannot be written is an error, not a crash */
        CHECK(ordo_profiler_dump(e, "/nonexistent-dir/x/trace.json") != 0);
        CHECK_MSG(strstr(ordo_last_error(), "ordo_profiler_dump: cannot open '/nonexistent-dir/x/trace.json' for "
                                            "writing: No such file or directory") != NULL,
                  "'%s'", ordo_last_error());
        ordo_engine_destroy(e);
    }
}

/* Is s well-formed UTF-8 (RFC 3629)? */
static int utf8_valid(const char *str) {
    for (const unsigned char *s = (const unsigned char *)str; *s;) {
        unsigned c = *s;
        int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!n) return 0;
        for (int i = 1; i < n; i++)
            if ((s[i] & 0xC0) != 0x80) return 0;
        if (n > 1 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) || (c == 0xF0 && s[1] < 0x90) ||
                      (c == 0xF4 && s[1] >= 0x90)))
            return 0;
        s += n;
    }
    return 1;
}

/* Op names are the user's bytes: the trace must stay JSON (UTF-8, no raw
 * control characters) whatever they are, and the summary one row per
 * name.  Before, bytes >= 0x80 went into the trace as they were (a name
 * "bad\xff\xfeutf" made it unreadable) and a newline split a summary row. */
static void test_profiler_odd_names(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    static const char *const names[] = {"bad\xff\xfeutf", "two\nlines", "h\xc3\xa9llo", "cut\xe2\x82", "tab\tq\"b\\"};
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    for (int i = 0; i < ARRAY_LEN(names); i++)
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, names[i]), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    char *trace = dump_trace(e);
    if (trace) {
        CHECK_MSG(utf8_valid(trace), "the trace is not UTF-8");
        CHECK_MSG(json_valid(trace), "the trace is not valid JSON");
        /* invalid bytes as the text \xHH, valid UTF-8 as it is, control
         * characters and quotes escaped */
        CHECK(strstr(trace, "\"bad\\\\xff\\\\xfeutf\"") != NULL);
        CHECK(strstr(trace, "\"two\\nlines\"") != NULL);
        CHECK(strstr(trace, "\"h\xc3\xa9llo\"") != NULL);
        CHECK(strstr(trace, "\"cut\\\\xe2\\\\x82\"") != NULL);
        CHECK(strstr(trace, "\"tab\\tq\\\"b\\\\\"") != NULL);
        free(trace);
    }
    FILE *f = tmpfile();
    if (f) {
        CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
        char *sum = slurp(f);
        if (sum) {
            /* the header and one row per name, each count on its row */
            int rows = 0;
            for (const char *p = sum; *p; p++) rows += *p == '\n';
            CHECK_MSG(rows == 1 + ARRAY_LEN(names), "summary rows: %d\n%s", rows, sum);
            CHECK_MSG(summary_has_count(sum, "bad\\xff\\xfeutf", 1), "summary:\n%s", sum);
            CHECK_MSG(summary_has_count(sum, "two\\nlines", 1), "summary:\n%s", sum);
            CHECK_MSG(summary_has_count(sum, "h\xc3\xa9llo", 1), "summary:\n%s", sum);
            CHECK_MSG(utf8_valid(sum), "summary is not UTF-8:\n%s", sum);
            free(sum);
        }
        fclose(f);
    }
    ordo_engine_destroy(e);
}

/* A full record buffer: the summary, and the trace too, say how many
 * records were dropped (before, the trace held what fitted and said
 * nothing: a user read a truncated profile as the whole run).
 * ORDO_PROFILER_MAX_EVENTS lowers the limit (8,388,608 per thread). */
static void test_profiler_buffer_full(void) {
    clear_env();
    setenv("ORDO_PROFILER_MAX_EVENTS", "100", 1);
    ordo_engine *e = make_engine(ORDO_ENGINE_NAIVE, 1);
    unsetenv("ORDO_PROFILER_MAX_EVENTS");
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    for (int i = 0; i < 150; i++) CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "fill_op"), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    FILE *f = tmpfile();
    if (f) {
        CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
        char *sum = slurp(f);
        if (sum) {
            CHECK_MSG(summary_has_count(sum, "fill_op", 100), "summary:\n%s", sum);
            CHECK_MSG(strstr(sum, "(50 events dropped: profiler buffer full)") != NULL, "summary:\n%s", sum);
            free(sum);
        }
        fclose(f);
    }
    char *trace = dump_trace(e);
    if (trace) {
        CHECK_MSG(json_valid(trace), "the trace is not valid JSON");
        CHECK_MSG(strstr(trace, "\"name\":\"profiler buffer full: 50 events dropped\"") != NULL, "%s",
                  trace + (strlen(trace) > 400 ? strlen(trace) - 400 : 0));
        CHECK(strstr(trace, "\"otherData\":{\"dropped_events\":50,") != NULL);
        free(trace);
    }
    /* clear starts counting again */
    ordo_profiler_clear(e);
    trace = dump_trace(e);
    if (trace) {
        CHECK(strstr(trace, "buffer full") == NULL);
        CHECK(strstr(trace, "\"dropped_events\":0,") != NULL);
        free(trace);
    }
    ordo_engine_destroy(e);
}

/* A dump that cannot be written to the end (a full disk; here a file
 * size limit) says why, and leaves no half trace behind; before, the
 * message had no reason and the cut file stayed. */
static void test_profiler_dump_write_error(void) {
    ordo_engine *e = make_engine(ORDO_ENGINE_NAIVE, 1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    for (int i = 0; i < 200; i++) CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "some_op"), 0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    char path[] = "/tmp/ordo_prof_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    struct rlimit old;
    CHECK_EQ_LONG(getrlimit(RLIMIT_FSIZE, &old), 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {4096, old.rlim_max};
    CHECK_EQ_LONG(setrlimit(RLIMIT_FSIZE, &small), 0);
    int rc = ordo_profiler_dump(e, path);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    CHECK(rc != 0);
    CHECK_MSG(strstr(ordo_last_error(), "ordo_profiler_dump: error writing '") != NULL &&
                  strstr(ordo_last_error(), "': File too large") != NULL,
              "'%s'", ordo_last_error());
    CHECK_MSG(access(path, F_OK) != 0, "the cut trace %s is still there", path);
    /* the engine and the records are intact: the next dump writes them */
    CHECK_EQ_LONG(ordo_profiler_dump(e, path), 0);
    char *trace = slurp_path(path);
    CHECK(trace != NULL);
    if (trace) {
        CHECK(json_valid(trace));
        int n = 0;
        for (const char *p = trace; (p = strstr(p, "\"some_op\"")) != NULL; p++) n++;
        CHECK_EQ_LONG(n, 200);
        free(trace);
    }
    unlink(path);
    ordo_engine_destroy(e);
}

/* Profiling many ops from several threads, then destroy without dumping:
 * no crash, no leak. */
static void *prof_pusher(void *p) {
    ordo_engine *e = (ordo_engine *)p;
    ordo_var *v = ordo_new_variable(e);
    for (int i = 0; i < 5000; i++) push_simple(e, noop_op, NULL, NULL, 0, &v, 1, i % 2 ? "odd_op" : "even_op");
    return NULL;
}

static void test_profiler_threads_and_autostart(void) {
    clear_env();
    setenv("ORDO_PROFILER_AUTOSTART", "1", 1);
    ordo_engine *e = ordo_engine_create(NULL);
    unsetenv("ORDO_PROFILER_AUTOSTART");
    CHECK(e != NULL);
    if (!e) return;
    ordo_engine_config got;
    ordo_engine_get_config(e, &got);
    CHECK_EQ_LONG(got.profiler_autostart, 1);
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, prof_pusher, e);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    FILE *f = tmpfile();
    if (f) {
        CHECK_EQ_LONG(ordo_profiler_summary(e, f), 0);
        char *sum = slurp(f);
        if (sum) {
            CHECK_MSG(summary_has_count(sum, "odd_op", 7500), "autostart summary:\n%s", sum);
            CHECK_MSG(summary_has_count(sum, "even_op", 7500), "autostart summary:\n%s", sum);
            free(sum);
        }
        fclose(f);
    }
    ordo_engine_destroy(e);
}

static int returns_one_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (void)param;
    return 1;
}

/* Push a failing op named by buf, then wait: the error must name it as buf
 * says now.  prop: ORDO_PROP_BULK or not. */
static void check_failure_named(ordo_engine *e, ordo_var *v, const char *buf, const char *want, int prop,
                                const char *what) {
    CHECK_EQ_LONG(ordo_push_sync(e, returns_one_op, NULL, NULL, cpu_ctx(0), NULL, 0, &v, 1, prop, 0, buf), 0);
    CHECK(ordo_wait_for_all(e) != 0);
    const char *err = ordo_last_error();
    char head[64];
    snprintf(head, sizeof head, "%s: ", want); /* the whole name, followed by what went wrong */
    CHECK_MSG(strstr(err, head) != NULL, "%s: error \"%s\" does not name the op \"%s\"", what, err, want);
}

/* Op names are interned behind a cache keyed by the caller's pointer: a
 * buffer reused for another name must give the new name, a name that only
 * grows by a letter must not be taken for the shorter one, and a name past
 * ORDO_NAME_MAX - 1 characters is cut there, again and again alike. */
static void test_op_names_from_a_reused_buffer(void) {
    static const char long_name[] = "a_name_longer_than_the_limit_of_thirty_one";
    char cut[32];
    memcpy(cut, long_name, 31); /* its first 31 characters */
    cut[31] = 0;
    for (int k = 0; k < 3; k++) {
        for (int bulked = 0; bulked <= 1; bulked++) {
            char what[64];
            snprintf(what, sizeof what, "%s%s", kind_str(ALL_KINDS[k]), bulked ? ", bulked" : "");
            int old_size = ordo_set_bulk_size(bulked ? 16 : 0);
            int prop = bulked ? ORDO_PROP_BULK : ORDO_PROP_NORMAL;
            ordo_engine *e = make_engine(ALL_KINDS[k], 2);
            CHECK(e != NULL);
            if (!e) {
                ordo_set_bulk_size(old_size);
                continue;
            }
            ordo_var *v = ordo_new_variable(e);
            char buf[64];
            strcpy(buf, "first_name");
            CHECK_EQ_LONG(ordo_push_sync(e, noop_op, NULL, NULL, cpu_ctx(0), NULL, 0, &v, 1, prop, 0, buf), 0);
            check_failure_named(e, v, buf, "first_name", prop, what);
            strcpy(buf, "second");
            check_failure_named(e, v, buf, "second", prop, what);
            strcpy(buf, "secondo"); /* "second" and one more letter */
            check_failure_named(e, v, buf, "secondo", prop, what);
            strcpy(buf, "sec");
            check_failure_named(e, v, buf, "sec", prop, what);
            strcpy(buf, long_name);
            check_failure_named(e, v, buf, cut, prop, what);
            check_failure_named(e, v, buf, cut, prop, what); /* from the cache this time */
            buf[40] = 'X'; /* past the cut: the same op name */
            check_failure_named(e, v, buf, cut, prop, what);
            buf[3] = 'X'; /* within it: another */
            cut[3] = 'X';
            check_failure_named(e, v, buf, cut, prop, what);
            cut[3] = long_name[3];
            ordo_engine_destroy(e);
            ordo_set_bulk_size(old_size);
        }
    }
}

int main(void) {
    clear_env();
    TEST(test_var_version_counts_completed_writes);
    TEST(test_many_vars_in_one_op);
    TEST(test_engine_kind_names);
    TEST(test_config_explicit);
    TEST(test_config_defaults);
    TEST(test_config_from_environment);
    TEST(test_config_environment_rejects_bad_values);
    TEST(test_config_fields_rejects_bad_values);
    TEST(test_destroy_inside_an_op_is_refused);
    TEST(test_destroy_does_not_wait_out_the_spin);
    TEST(test_too_many_workers_named);
    TEST_T(test_bad_inputs_return_errors, 60);
    TEST(test_calls_without_a_code_leave_a_message);
    TEST(test_last_error_is_thread_local);
    TEST(test_run_ctx_fields);
    TEST(test_default_engine);
    TEST(test_devices);
    TEST(test_profiler_dump_and_summary);
    TEST(test_profiler_threads_and_autostart);
    TEST(test_profiler_odd_names);
    TEST(test_profiler_buffer_full);
    TEST(test_profiler_dump_write_error);
    TEST(test_op_names_from_a_reused_buffer);
    return harness_end();
}
