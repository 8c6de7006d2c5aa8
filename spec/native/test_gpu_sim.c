/*
 * test_gpu_sim.c - the engine's GPU scheduling on the simulated device.
 *
 * GPU ops complete for the engine as soon as their function has queued work
 * on a stream; the work itself runs later, and the ordering between streams
 * and with the host comes from the events left on vars (var_events.c).  The
 * simulated device (src/device_sim.c) runs each stream on its own thread
 * with random delays, so every ordering mistake - a missing stream wait, a
 * host op that does not block on the GPU, a copy overwriting a buffer that
 * a compute stream still reads - shows up as a wrong value.
 *
 * The main test is the random workload of test_random.c moved onto the
 * GPU: ops read 2..19 random vars and write one, and are placed at random
 * on the host (cpu(0)), on gpu(0) or gpu(1) compute workers, on their copy
 * workers (COPY_TO/FROM_GPU), on the GPU priority worker, or as async GPU
 * ops completed from another thread, or as checked GPU ops
 * (ordo_gpu_check_after), held back until the host has checked their work.
 * GPU ops run their body on the stream (backend host_fn), so the body runs
 * whenever the stream gets to it.  The result must equal the serial oracle
 * bit for bit, on every engine kind, and every check must run once, after
 * its op's body.
 */
#include "harness.h"
#include "test_util.h"

#include "../../src/device.h"
#include "../../src/ordo_kernel.h" /* ordo_gpu_check_after */

#define NVARS 100
#define MAX_READS 19

typedef struct {
    double *data;
    int nr;
    unsigned char r[MAX_READS];
    unsigned char w;
    int spin_ns;
} gop;

static atomic_long bodies_run;

static void gop_apply(const gop *p, double *data) {
    double s = 0;
    for (int i = 0; i < p->nr; i++) s += data[p->r[i]];
    data[p->w] = s / (p->nr + 1);
}

static void gop_body(void *arg) {
    gop *p = arg;
    gop_apply(p, p->data);
    spin_us(p->spin_ns / 1000.0);
    atomic_fetch_add(&bodies_run, 1);
    free(p);
}

/* Host ops run their body at once: the engine must have made the host wait
 * for every GPU write they read (and every GPU read of what they write). */
static int host_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    gop *copy = malloc(sizeof *copy);
    memcpy(copy, param, sizeof *copy);
    gop_body(copy);
    return 0;
}

/* GPU ops queue their body on the stream, as a kernel launch would; the
 * param is freed when the op completes, so the stream gets its own copy. */
static int gpu_fn(const ordo_run_ctx *rc, void *param) {
    gop *copy = malloc(sizeof *copy);
    memcpy(copy, param, sizeof *copy);
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, gop_body, copy, err, sizeof err))
        return ordo_fail(rc, "%s", err);
    return 0;
}

/* Checked GPU ops: the body marks its check's flag; the check, which the
 * engine runs once the op's work is done, finds it marked. */
typedef struct {
    gop op;
    atomic_int ran;
} checked_gop;

static atomic_long checks_run, checks_early;

static void checked_body(void *arg) {
    checked_gop *c = arg;
    gop_apply(&c->op, c->op.data);
    spin_us(c->op.spin_ns / 1000.0);
    atomic_fetch_add(&bodies_run, 1);
    atomic_store(&c->ran, 1);
}

static int check_ran(void *arg, char *err, size_t errlen) {
    checked_gop *c = arg;
    atomic_fetch_add(&checks_run, 1);
    int ran = atomic_load(&c->ran);
    if (!ran) atomic_fetch_add(&checks_early, 1);
    free(c);
    if (!ran) snprintf(err, errlen, "checked before its work ran");
    return !ran;
}

static int gpu_checked_fn(const ordo_run_ctx *rc, void *param) {
    checked_gop *c = malloc(sizeof *c);
    memcpy(&c->op, param, sizeof c->op);
    atomic_init(&c->ran, 0);
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, checked_body, c, err, sizeof err)) {
        free(c);
        return ordo_fail(rc, "%s", err);
    }
    if (ordo_gpu_check_after(rc, check_ran, c) != ORDO_OK) return ordo_fail(rc, "%s", ordo_last_error());
    return 0;
}

static completer_t *async_completer;
static void nothing(void *arg) { (void)arg; }
static void gpu_async_fn(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    int rv = gpu_fn(rc, param);
    completer_submit(async_completer, done, nothing, NULL, rv ? "queueing failed" : NULL, 2);
}

typedef struct {
    int kind, workers, gpu_workers, copy_workers;
} sim_cfg;

static ordo_engine *sim_engine(sim_cfg c) {
    ordo_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kind = c.kind;
    cfg.cpu_workers = c.workers;
    cfg.gpu_workers = c.gpu_workers;
    cfg.gpu_copy_workers = c.copy_workers;
    ordo_engine *e = ordo_engine_create(&cfg);
    if (!e) fprintf(stderr, "    ordo_engine_create failed: %s\n", ordo_last_error());
    return e;
}

static void random_gpu_round(sim_cfg c, int rounds, long nops, uint64_t seed) {
    rng_t g;
    rng_init(&g, seed ^ ((uint64_t)c.kind << 40) ^ ((uint64_t)c.workers << 32) ^ ((uint64_t)c.gpu_workers << 48));
    ordo_engine *e = sim_engine(c);
    CHECK(e != NULL);
    if (!e) return;
    completer_t comp;
    completer_start(&comp, 2);
    async_completer = &comp;
    ordo_var *vars[NVARS];
    for (int i = 0; i < NVARS; i++) vars[i] = ordo_new_variable(e);
    double *data = malloc(sizeof(double) * NVARS), *oracle = malloc(sizeof(double) * NVARS);
    long bad = 0, push_errors = 0, placed[8] = {0}, checked = 0;
    atomic_store(&checks_run, 0);
    atomic_store(&checks_early, 0);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < NVARS; i++) data[i] = oracle[i] = 1.0 + (double)rng_range(&g, 0, 1 << 20) / (1 << 20);
        atomic_store(&bodies_run, 0);
        for (long i = 0; i < nops; i++) {
            gop op;
            op.data = data;
            op.nr = rng_range(&g, 2, MAX_READS);
            for (int k = 0; k < op.nr; k++) op.r[k] = (unsigned char)rng_range(&g, 0, NVARS - 1);
            op.w = (unsigned char)rng_range(&g, 0, NVARS - 1);
            op.spin_ns = rng_range(&g, 0, 3) * 1000;
            gop_apply(&op, oracle);
            ordo_var *r[MAX_READS], *w[1] = {vars[op.w]};
            for (int k = 0; k < op.nr; k++) r[k] = vars[op.r[k]];
            int where = rng_range(&g, 0, 7), rc;
            placed[where]++;
            ordo_ctx gpu = {ORDO_GPU, rng_range(&g, 0, 1)};
            gop *p = malloc(sizeof *p);
            *p = op;
            switch (where) {
            case 0: /* host */
                rc = ordo_push_sync(e, host_fn, p, free, cpu_ctx(0), r, op.nr, w, 1, ORDO_PROP_NORMAL, 0, "host");
                break;
            case 1: case 2: /* compute workers */
                rc = ordo_push_sync(e, gpu_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_NORMAL, 0, "gpu");
                break;
            case 3:
                rc = ordo_push_sync(e, gpu_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_COPY_TO_GPU, 0, "h2d");
                break;
            case 4:
                rc = ordo_push_sync(e, gpu_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_COPY_FROM_GPU, 0, "d2h");
                break;
            case 5:
                rc = ordo_push_sync(e, gpu_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_GPU_PRIORITIZED,
                                    rng_range(&g, -3, 3), "gpu-prio");
                break;
            case 6:
                rc = ordo_push_async(e, gpu_async_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_NORMAL, 0, "gpu-async");
                break;
            default:
                rc = ordo_push_sync(e, gpu_checked_fn, p, free, gpu, r, op.nr, w, 1, ORDO_PROP_NORMAL, 0, "checked");
                checked += rc == ORDO_OK;
                break;
            }
            if (rc != ORDO_OK) {
                push_errors++;
                free(p);
            }
        }
        /* A host wait on one var must see its GPU writes done... */
        int probe = rng_range(&g, 0, NVARS - 1);
        CHECK_EQ_LONG(ordo_wait_for_var(e, vars[probe]), ORDO_OK);
        /* ...and wait_for_all every op's GPU work. */
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(atomic_load(&bodies_run), nops);
        for (int i = 0; i < NVARS; i++)
            if (data[i] != oracle[i]) bad++;
    }
    CHECK_EQ_LONG(push_errors, 0);
    CHECK_MSG(bad == 0, "%ld values differ from the serial oracle", bad);
    CHECK_EQ_LONG(atomic_load(&checks_run), checked);
    CHECK_EQ_LONG(atomic_load(&checks_early), 0);
    for (int i = 0; i < NVARS; i++) ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), vars[i]);
    ordo_engine_destroy(e);
    completer_stop(&comp);
    free(data);
    free(oracle);
}

static void run_configs(int kind) {
    static const sim_cfg cfgs[] = {{0, 1, 1, 1}, {0, 2, 2, 1}, {0, 4, 2, 2}};
    for (int i = 0; i < ARRAY_LEN(cfgs); i++) {
        sim_cfg c = cfgs[i];
        c.kind = kind;
        double t0 = now_s();
        long nops = scaled(3000, 300);
        random_gpu_round(c, 3, nops, test_seed());
        printf("    %s cpu=%d gpu=%d copy=%d: 3 x %ld ops in %.2f s\n", kind_str(kind), c.workers, c.gpu_workers,
               c.copy_workers, nops, now_s() - t0);
    }
}

static void test_random_gpu_naive(void) { run_configs(ORDO_ENGINE_NAIVE); }
static void test_random_gpu_pooled(void) { run_configs(ORDO_ENGINE_POOLED); }
static void test_random_gpu_perdevice(void) { run_configs(ORDO_ENGINE_PER_DEVICE); }

/* ---- no host sync per op ---------------------------------------------------------- */

typedef struct {
    atomic_int *done;
    double ms;
} slow_arg;

static void slow_body(void *arg) {
    slow_arg *a = arg;
    sleep_ms(a->ms);
    atomic_fetch_add(a->done, 1);
    free(a);
}

static atomic_int slow_done;
static int slow_gpu_fn(const ordo_run_ctx *rc, void *param) {
    slow_arg *a = malloc(sizeof *a);
    a->done = &slow_done;
    a->ms = *(double *)param;
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, slow_body, a, err, sizeof err))
        return ordo_fail(rc, "%s", err);
    return 0;
}

/* A chain of GPU ops on one var: the engine retires each op as soon as it is
 * queued (pending drops to 0 while the stream is still busy), the stream
 * runs them in order, and a wait on the var returns only after the last. */
static void test_gpu_ops_complete_without_host_sync(void) {
    sim_cfg c = {ORDO_ENGINE_PER_DEVICE, 1, 1, 1};
    ordo_engine *e = sim_engine(c);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    ordo_ctx gpu = {ORDO_GPU, 0};
    static double ms = 5;
    atomic_store(&slow_done, 0);
    const int n = 40;
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, &ms, NULL, gpu, NULL, 0, &v, 1, 0, 0, "slow"), ORDO_OK);
    while (ordo_engine_pending(e) > 0 && now_s() - t0 < 10) sleep_ms(0.2);
    int done_when_retired = atomic_load(&slow_done);
    CHECK_MSG(done_when_retired < n / 2, "the engine waited for the GPU: %d of %d bodies done when all ops had retired",
              done_when_retired, n);
    CHECK_EQ_LONG(ordo_wait_for_var(e, v), ORDO_OK);
    CHECK_EQ_LONG(atomic_load(&slow_done), n);
    CHECK_EQ_LONG((long)ordo_var_version(v), n);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_engine_destroy(e);
}

/* ---- write after read across streams --------------------------------------------- */

typedef struct {
    double *src;
    double *seen;
} read_arg;

static void read_body(void *arg) {
    read_arg *a = arg;
    sleep_ms(20); /* a long read: a writer that does not wait for it would overtake it */
    *a->seen = *a->src;
    free(a);
}

static int gpu_read_fn(const ordo_run_ctx *rc, void *param) {
    read_arg *a = malloc(sizeof *a);
    *a = *(read_arg *)param;
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, read_body, a, err, sizeof err))
        return ordo_fail(rc, "%s", err);
    return 0;
}

static int host_write_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    *(double *)param = 2.0;
    return 0;
}

static void test_write_waits_for_gpu_readers(void) {
    sim_cfg c = {ORDO_ENGINE_PER_DEVICE, 2, 2, 1};
    ordo_engine *e = sim_engine(c);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e), *out1 = ordo_new_variable(e), *out2 = ordo_new_variable(e);
    double x = 1.0, seen1 = 0, seen2 = 0;
    read_arg a1 = {&x, &seen1}, a2 = {&x, &seen2};
    ordo_ctx gpu = {ORDO_GPU, 0};
    /* two readers (maybe on two streams), then a host writer, then a copy-stream writer */
    CHECK_EQ_LONG(ordo_push_sync(e, gpu_read_fn, &a1, NULL, gpu, &v, 1, &out1, 1, 0, 0, "read1"), ORDO_OK);
    CHECK_EQ_LONG(ordo_push_sync(e, gpu_read_fn, &a2, NULL, gpu, &v, 1, &out2, 1, ORDO_PROP_COPY_FROM_GPU, 0, "read2"),
                  ORDO_OK);
    CHECK_EQ_LONG(ordo_push_sync(e, host_write_fn, &x, NULL, cpu_ctx(0), NULL, 0, &v, 1, 0, 0, "write"), ORDO_OK);
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK(seen1 == 1.0);
    CHECK(seen2 == 1.0);
    CHECK(x == 2.0);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), out1);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), out2);
    ordo_engine_destroy(e);
}

/* ---- asynchronous GPU failures ------------------------------------------------------ */

static int failing_gpu_fn(const ordo_run_ctx *rc, void *param) {
    (void)param;
    return ordo_device_sim_inject_error(rc->stream, "illegal memory access (injected)") ? ordo_fail(rc, "inject") : 0;
}

/* A kernel fault shows after the op completed for the engine: the first
 * host wait that covers it reports it, once, and the engine goes on. */
static void test_async_gpu_failure_reported_once(void) {
    for (int kind = ORDO_ENGINE_NAIVE; kind <= ORDO_ENGINE_PER_DEVICE; kind++) {
        sim_cfg c = {kind, 1, 1, 1};
        ordo_engine *e = sim_engine(c);
        CHECK(e != NULL);
        if (!e) return;
        ordo_var *v = ordo_new_variable(e);
        ordo_ctx gpu = {ORDO_GPU, 0};
        int rc = ordo_push_sync(e, failing_gpu_fn, NULL, NULL, gpu, NULL, 0, &v, 1, 0, 0, "faulty_kernel");
        int w = ordo_wait_for_var(e, v);
        if (kind == ORDO_ENGINE_NAIVE) {
            /* naive waits at each GPU op: the fault fails the op itself */
            CHECK_EQ_LONG(rc, ORDO_OK);
            CHECK_EQ_LONG(w, ORDO_ERR_FAILED);
        } else {
            CHECK_EQ_LONG(rc, ORDO_OK);
            CHECK_EQ_LONG(w, ORDO_ERR_FAILED);
        }
        CHECK_MSG(strstr(ordo_last_error(), "illegal memory access"), "message: %s", ordo_last_error());
        CHECK_EQ_LONG(ordo_wait_for_var(e, v), ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        /* still works */
        atomic_store(&slow_done, 0);
        static double ms = 1;
        CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, &ms, NULL, gpu, NULL, 0, &v, 1, 0, 0, "after"), ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(atomic_load(&slow_done), 1);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
        ordo_engine_destroy(e);
    }
}

/* ---- checked GPU ops ---------------------------------------------------------------- */

/* A check that fails (the kernel found a bad index, say), on the op's own
 * slot: a heap int its body sets on the stream. */
typedef struct {
    int *slot;
    int set_to;
    double ms;
} slot_arg;

static void slot_body(void *arg) {
    slot_arg *a = arg;
    sleep_ms(a->ms);
    *a->slot = a->set_to;
    free(a);
}

static atomic_long slot_checks;
static int check_slot(void *arg, char *err, size_t errlen) {
    int *slot = arg;
    int v = *slot;
    free(slot);
    atomic_fetch_add(&slot_checks, 1);
    if (v) snprintf(err, errlen, "bad_index: index %d out of range on gpu(0)", v);
    return v != 0;
}

/* param: the value the body writes to the slot (0: no error), and how long
 * the body takes */
static int slot_gpu_fn(const ordo_run_ctx *rc, void *param) {
    const slot_arg *p = param;
    int *slot = calloc(1, sizeof *slot);
    slot_arg *a = malloc(sizeof *a);
    *a = *p;
    a->slot = slot;
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, slot_body, a, err, sizeof err)) {
        free(a);
        free(slot);
        return ordo_fail(rc, "%s", err);
    }
    int r = ordo_gpu_check_after(rc, check_slot, slot);
    if (r != ORDO_OK) free(slot);
    return r == ORDO_OK ? 0 : ordo_fail(rc, "%s", ordo_last_error());
}

static atomic_long dependant_runs;
static int count_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc, (void)param;
    atomic_fetch_add(&dependant_runs, 1);
    return 0;
}

/* A second check in one op, and a check from a CPU op, are refused. */
static int twice_fn(const ordo_run_ctx *rc, void *param) {
    int *slot1 = calloc(1, sizeof *slot1), *slot2 = calloc(1, sizeof *slot2);
    int *result = param;
    result[0] = ordo_gpu_check_after(rc, check_slot, slot1);
    result[1] = ordo_gpu_check_after(rc, check_slot, slot2);
    if (result[0] != ORDO_OK) free(slot1);
    if (result[1] != ORDO_OK) free(slot2);
    return 0;
}

/* Rule 5 for a failure found only on the device: the failing op's outputs
 * carry it, its dependants are skipped, a wait on other work does not take
 * it, it is reported once; every check runs exactly once, also at destroy. */
static void test_checked_gpu_op_failure_is_its_own(void) {
    for (int kind = ORDO_ENGINE_NAIVE; kind <= ORDO_ENGINE_PER_DEVICE; kind++) {
        sim_cfg c = {kind, 2, 2, 1};
        ordo_engine *e = sim_engine(c);
        CHECK(e != NULL);
        if (!e) return;
        atomic_store(&slot_checks, 0);
        atomic_store(&dependant_runs, 0);
        ordo_ctx gpu = {ORDO_GPU, 0};
        ordo_var *bad = ordo_new_variable(e), *built = ordo_new_variable(e), *other = ordo_new_variable(e);
        static const slot_arg failing = {NULL, 7, 20}, fine = {NULL, 0, 1};
        CHECK_EQ_LONG(ordo_push_sync(e, slot_gpu_fn, (void *)&failing, NULL, gpu, NULL, 0, &bad, 1, 0, 0, "gather"),
                      ORDO_OK);
        CHECK_EQ_LONG(ordo_push_sync(e, count_fn, NULL, NULL, gpu, &bad, 1, &built, 1, 0, 0, "built"), ORDO_OK);
        CHECK_EQ_LONG(ordo_push_sync(e, slot_gpu_fn, (void *)&fine, NULL, gpu, NULL, 0, &other, 1, 0, 0, "fine"),
                      ORDO_OK);
        /* the other op's wait does not take the failure */
        CHECK_EQ_LONG(ordo_wait_for_var(e, other), ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_var(e, built), ORDO_ERR_FAILED);
        CHECK_MSG(strstr(ordo_last_error(), "bad_index: index 7 out of range on gpu(0)") != NULL, "message: %s",
                  ordo_last_error());
        CHECK_MSG(strstr(ordo_last_error(), "gather: bad_index") != NULL, "the op's name: %s", ordo_last_error());
        CHECK_EQ_LONG(atomic_load(&dependant_runs), 0); /* skipped */
        CHECK_EQ_LONG(ordo_wait_for_var(e, bad), ORDO_OK); /* reported once */
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(ordo_var_version(bad), 1);

        int result[2] = {-1, -1};
        CHECK_EQ_LONG(ordo_push_sync(e, twice_fn, result, NULL, gpu, NULL, 0, &other, 1, 0, 0, "twice"), ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(result[0], ORDO_OK);
        CHECK_EQ_LONG(result[1], ORDO_ERR_INVALID);
        result[0] = result[1] = -1;
        CHECK_EQ_LONG(ordo_push_sync(e, twice_fn, result, NULL, cpu_ctx(0), NULL, 0, &other, 1, 0, 0, "cpu"), ORDO_OK);
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(result[0], ORDO_ERR_INVALID);
        CHECK_EQ_LONG(atomic_load(&slot_checks), 3);

        /* checked ops still in flight at destroy are checked and finished */
        for (int i = 0; i < 20; i++)
            ordo_push_sync(e, slot_gpu_fn, (void *)&fine, NULL, gpu, NULL, 0, &other, 1, 0, 0, "late");
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), bad);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), built);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), other);
        ordo_engine_destroy(e);
        CHECK_EQ_LONG(atomic_load(&slot_checks), 23);
    }
}

/* ---- devices --------------------------------------------------------------------- */

static void test_gpu_contexts_checked(void) {
    ordo_engine *e = sim_engine((sim_cfg){ORDO_ENGINE_PER_DEVICE, 1, 1, 1});
    CHECK(e != NULL);
    if (!e) return;
    CHECK_EQ_LONG(ordo_gpu_count(), 2);
    ordo_var *v = ordo_new_variable(e);
    static double ms = 0;
    ordo_ctx bad = {ORDO_GPU, 2};
    CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, &ms, NULL, bad, NULL, 0, &v, 1, 0, 0, "x"), ORDO_ERR_NO_DEVICE);
    CHECK_MSG(strstr(ordo_last_error(), "gpu(2) does not exist"), "message: %s", ordo_last_error());
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_engine_destroy(e);
}

/* Destroying the engine finishes the GPU work its ops queued (rule 11). */
static void test_destroy_finishes_gpu_work(void) {
    ordo_engine *e = sim_engine((sim_cfg){ORDO_ENGINE_PER_DEVICE, 1, 2, 1});
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    static double ms = 3;
    atomic_store(&slow_done, 0);
    for (int i = 0; i < 10; i++)
        ordo_push_sync(e, slow_gpu_fn, &ms, NULL, (ordo_ctx){ORDO_GPU, i & 1}, NULL, 0, &v, 1, 0, 0, "slow");
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_engine_destroy(e);
    CHECK_EQ_LONG(atomic_load(&slow_done), 10);
}

/* ---- the simulated device keeps CUDA's event semantics ------------------------------ */

/* cudaStreamWaitEvent waits for the record made before the call; recording
 * the event again (the engine recycles events) must not release that wait.
 * The first record sits behind slow work on stream a; the event is then
 * recorded again on an idle stream c: stream b's work must still wait for a. */
static atomic_int slow_stage;
static void stage_slow(void *arg) {
    (void)arg;
    sleep_ms(30);
    atomic_store(&slow_stage, 1);
}
static void stage_check(void *arg) { *(int *)arg = atomic_load(&slow_stage); }

static void test_sim_wait_survives_event_rerecord(void) {
    const device_backend *b = ordo_device_backend();
    char err[256];
    void *sa, *sb, *sc, *ev;
    CHECK_EQ_LONG(b->stream_create(0, &sa, err, sizeof err), 0);
    CHECK_EQ_LONG(b->stream_create(0, &sb, err, sizeof err), 0);
    CHECK_EQ_LONG(b->stream_create(0, &sc, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_create(0, &ev, err, sizeof err), 0);
    atomic_store(&slow_stage, 0);
    int seen = -1;
    CHECK_EQ_LONG(b->host_fn(0, sa, stage_slow, NULL, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(0, ev, sa, err, sizeof err), 0);
    CHECK_EQ_LONG(b->stream_wait_event(0, sb, ev, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(0, ev, sc, err, sizeof err), 0); /* completes at once */
    CHECK_EQ_LONG(b->host_fn(0, sb, stage_check, &seen, err, sizeof err), 0);
    CHECK_EQ_LONG(b->device_sync(0, err, sizeof err), 0);
    CHECK_EQ_LONG(seen, 1);
    b->event_destroy(0, ev);
    b->stream_destroy(0, sa);
    b->stream_destroy(0, sb);
    b->stream_destroy(0, sc);
}

/* As CUDA, an event belongs to the device it was made on: recording it on a
 * stream of another device fails (cudaEventRecord: invalid resource handle),
 * and so does the elapsed time between timing events of two devices, while
 * a stream may wait for another device's event.  The calls that select a
 * device in the CUDA backend (cudaSetDevice) select it here, per thread:
 * the CUDA emulation fails a kernel launch on a stream of another device
 * than the current one, as CUDA does. */
static void test_sim_events_keep_to_their_device(void) {
    const device_backend *b = ordo_device_backend();
    char err[256] = "";
    void *s0, *s1, *e0, *e1, *t0, *t1;
    CHECK_EQ_LONG(b->stream_create(0, &s0, err, sizeof err), 0);
    CHECK_EQ_LONG(ordo_device_sim_current_device(), 0);
    CHECK_EQ_LONG(b->stream_create(1, &s1, err, sizeof err), 0);
    CHECK_EQ_LONG(ordo_device_sim_current_device(), 1);
    b->use_device(0);
    CHECK_EQ_LONG(ordo_device_sim_current_device(), 0);
    CHECK_EQ_LONG(ordo_device_sim_set_current_device(2), 1); /* no gpu(2): unchanged */
    CHECK_EQ_LONG(ordo_device_sim_current_device(), 0);
    CHECK_EQ_LONG(b->event_create(0, &e0, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_create(1, &e1, err, sizeof err), 0);
    CHECK_EQ_LONG(ordo_device_sim_current_device(), 1);

    CHECK_EQ_LONG(b->event_record(0, e0, s1, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "cannot record an event: an event of gpu(0) on a stream of gpu(1)") != NULL, "%s", err);
    CHECK_EQ_LONG(b->event_record(1, e1, s0, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "an event of gpu(1) on a stream of gpu(0)") != NULL, "%s", err);
    CHECK_EQ_LONG(b->event_record(0, e0, s0, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(1, e1, s1, err, sizeof err), 0);
    CHECK_EQ_LONG(b->stream_wait_event(1, s1, e0, err, sizeof err), 0); /* across devices: fine */
    CHECK_EQ_LONG(b->device_sync(1, err, sizeof err), 0);

    double ns = 0;
    CHECK_EQ_LONG(b->timer_create(0, &t0, err, sizeof err), 0);
    CHECK_EQ_LONG(b->timer_create(1, &t1, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(0, t0, s0, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(1, t1, s1, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_elapsed_ns(0, t0, t1, &ns, err, sizeof err), 1);
    CHECK_MSG(strstr(err, "between events of gpu(0) and gpu(1)") != NULL, "%s", err);
    CHECK_EQ_LONG(b->event_elapsed_ns(0, t0, t0, &ns, err, sizeof err), 0);

    b->event_destroy(0, t0);
    b->event_destroy(1, t1);
    b->event_destroy(0, e0);
    b->event_destroy(1, e1);
    b->stream_destroy(0, s0);
    b->stream_destroy(1, s1);
}

/* A device sync while another thread destroys a stream of that device (the
 * profiler drops its timing streams so, while the engine of an earlier
 * test is destroyed by the collector): the sync must not wait for the
 * stream's thread once that thread has left.  It did -- the thread exited
 * still marked busy, and the sync, holding the device's stream list, waited
 * for it for ever while the destroyer waited for the list.  A hang here is
 * reported by the watchdog. */
typedef struct {
    atomic_int stop;
    long syncs;
} sync_loop_arg;

static void *sync_loop(void *arg) {
    sync_loop_arg *a = arg;
    char err[256];
    while (!atomic_load(&a->stop)) {
        if (ordo_device_backend()->device_sync(0, err, sizeof err) == 0) a->syncs++;
    }
    return NULL;
}

static void test_sim_sync_races_stream_destroy(void) {
    const device_backend *b = ordo_device_backend();
    ordo_device_sim_configure(0, 0); /* no delays: as many destroys as can be while the syncs run */
    sync_loop_arg a = {0};
    pthread_t t;
    CHECK_EQ_LONG(pthread_create(&t, NULL, sync_loop, &a), 0);
    char err[256];
    long rounds = scaled(3000, 300);
    for (long i = 0; i < rounds; i++) {
        void *s;
        if (b->stream_create(0, &s, err, sizeof err)) {
            CHECK_MSG(0, "stream_create: %s", err);
            break;
        }
        b->host_fn(0, s, nothing, NULL, err, sizeof err);
        b->stream_destroy(0, s);
    }
    atomic_store(&a.stop, 1);
    pthread_join(t, NULL);
    printf("    %ld streams destroyed during %ld device syncs\n", rounds, a.syncs);
    CHECK(a.syncs > 0);
    ordo_device_sim_configure(TEST_UNDER_SANITIZER ? 5000 : 20000, 0);
}

int main(void) {
    ordo_device_use_simulated(2);
    /* Streams drift up to 20 us per item against each other and the host. */
    ordo_device_sim_configure(TEST_UNDER_SANITIZER ? 5000 : 20000, 0);
    printf("# seed %#llx (set ORDO_TEST_SEED to change), scale %g; simulated GPUs: %d\n",
           (unsigned long long)test_seed(), test_scale(), ordo_gpu_count());
    TEST(test_sim_wait_survives_event_rerecord);
    TEST(test_sim_events_keep_to_their_device);
    TEST_T(test_sim_sync_races_stream_destroy, 60);
    TEST(test_gpu_contexts_checked);
    TEST(test_gpu_ops_complete_without_host_sync);
    TEST(test_write_waits_for_gpu_readers);
    TEST(test_async_gpu_failure_reported_once);
    TEST(test_destroy_finishes_gpu_work);
    TEST(test_checked_gpu_op_failure_is_its_own);
    TEST(test_random_gpu_naive);
    TEST(test_random_gpu_pooled);
    TEST(test_random_gpu_perdevice);
    return harness_end();
}
