/*
 * test_profiler_gpu.c - GPU-side times in the profiler, on the simulated
 * device.
 *
 * A GPU op's function only queues work on a stream, so its host-side time
 * is its launch.  While profiling, the engine records a timing event on the
 * op's stream before and after its function (profiler.c), and the dump puts
 * the device time between them on a track of the stream, on the device's
 * row, placed on the host's timeline through a reference event.  These
 * tests give each op's stream work a known minimum duration (a host
 * function that busy-waits on the stream thread) and check, from the trace
 * and the summary: a GPU-side event per op on the gpu's row and on its
 * stream's track, no shorter than that minimum (zero or launch-sized
 * durations fail), starting no earlier than its launch and, behind a busy
 * stream, well after it; ops on one stream in order; copies on their own
 * track; nothing extra when profiling is off; clear and stop-while-running
 * give the timing events back (ASan and valgrind see any leak); an op's
 * errors, the asynchronous ones included, are reported by its wait exactly
 * as without the profiler, even when a dump reads the events first.
 */
#include "harness.h"
#include "test_util.h"

#include "../../src/device.h"

#include <stdbool.h>

#define KERNEL_US 2000.0 /* each slow_kernel's stream work */
#define COPY_US 1000.0   /* each slow_copy's */
#define SLACK_US 10.0    /* rounding of the trace's microseconds */

/* ---- ops whose stream work takes a known time ------------------------------------ */

static void spin_body(void *arg) {
    spin_us(*(const double *)arg);
}

/* Queues spin_body on the op's stream (param: the microseconds), as a
 * kernel launch would: the function returns at once. */
static int slow_gpu_fn(const ordo_run_ctx *rc, void *param) {
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, spin_body, param, err, sizeof err))
        return ordo_fail(rc, "%s", err);
    return 0;
}

static int host_fn_op(const ordo_run_ctx *rc, void *param) {
    (void)rc, (void)param;
    return 0;
}

static ordo_engine *gpu_engine(int kind, int gpu_workers) {
    ordo_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kind = kind;
    cfg.cpu_workers = 1;
    cfg.gpu_workers = gpu_workers;
    cfg.gpu_copy_workers = 1;
    ordo_engine *e = ordo_engine_create(&cfg);
    if (!e) fprintf(stderr, "    ordo_engine_create failed: %s\n", ordo_last_error());
    return e;
}

/* ---- reading the trace back --------------------------------------------------------- */

/* The dump writes one event per line; these tests read it line by line. */
typedef struct {
    char name[48], cat[8], status[12];
    int pid, tid;
    double ts, dur, launch;
} tev;

typedef struct {
    int pid, tid;
    char name[96];
} tname;

typedef struct {
    tev ev[512];
    int n;
    tname names[64];
    int nnames;
} trace_t;

static double num_after(const char *line, const char *key, double dflt) {
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : dflt;
}

static void str_after(const char *line, const char *key, char *out, size_t n) {
    out[0] = 0;
    const char *p = strstr(line, key);
    if (!p) return;
    p += strlen(key);
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < n) {
        out[i] = p[i];
        i++;
    }
    out[i] = 0;
}

static int read_trace(ordo_engine *e, trace_t *t) {
    memset(t, 0, sizeof *t);
    char path[] = "/tmp/ordo_prof_gpu_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    int rc = ordo_profiler_dump(e, path);
    FILE *f = fopen(path, "r");
    char line[1024];
    while (rc == 0 && f && fgets(line, sizeof line, f)) {
        if (strstr(line, "\"ph\":\"X\"") && t->n < ARRAY_LEN(t->ev)) {
            tev *x = &t->ev[t->n++];
            str_after(line, "\"name\":\"", x->name, sizeof x->name);
            str_after(line, "\"cat\":\"", x->cat, sizeof x->cat);
            str_after(line, "\"status\":\"", x->status, sizeof x->status);
            x->pid = (int)num_after(line, "\"pid\":", -1);
            x->tid = (int)num_after(line, "\"tid\":", -1);
            x->ts = num_after(line, "\"ts\":", -1);
            x->dur = num_after(line, "\"dur\":", -1);
            x->launch = num_after(line, "\"launch_us\":", -1);
        } else if (strstr(line, "\"thread_name\"") && t->nnames < ARRAY_LEN(t->names)) {
            tname *x = &t->names[t->nnames++];
            x->pid = (int)num_after(line, "\"pid\":", -1);
            x->tid = (int)num_after(line, "\"tid\":", -1);
            str_after(line, "\"args\":{\"name\":\"", x->name, sizeof x->name);
        }
    }
    if (f) fclose(f);
    unlink(path);
    return rc;
}

static const char *track_name(const trace_t *t, int pid, int tid) {
    for (int i = 0; i < t->nnames; i++)
        if (t->names[i].pid == pid && t->names[i].tid == tid) return t->names[i].name;
    return "";
}

static int count_events(const trace_t *t, const char *name, const char *cat) {
    int n = 0;
    for (int i = 0; i < t->n; i++) n += !strcmp(t->ev[i].name, name) && !strcmp(t->ev[i].cat, cat);
    return n;
}

static char *summary_of(ordo_engine *e) {
    FILE *f = tmpfile();
    if (!f) return NULL;
    char *s = NULL;
    if (ordo_profiler_summary(e, f) == 0) {
        long n = ftell(f);
        rewind(f);
        s = calloc(1, (size_t)n + 1);
        if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    }
    fclose(f);
    return s;
}

/* The GPU-side line of name in a summary: its count and min us (-1 when the
 * summary has no GPU-side block or no such line there). */
static void summary_gpu_row(const char *sum, const char *name, long *count, double *min_us) {
    *count = -1;
    *min_us = -1;
    const char *p = sum ? strstr(sum, "GPU-side") : NULL;
    size_t len = strlen(name);
    while (p && (p = strchr(p, '\n'))) {
        p++;
        if (!strncmp(p, name, len) && p[len] == ' ') {
            double total_ms;
            if (sscanf(p + len, "%ld %lf %lf", count, &total_ms, min_us) != 3) *count = -1;
            return;
        }
    }
}

/* ---- the backend's timing events ------------------------------------------------------ */

static void test_sim_timing_events(void) {
    const device_backend *b = ordo_device_backend();
    char err[256];
    void *s, *t0, *t1, *plain, *never;
    static const double us = 3000;
    CHECK_EQ_LONG(b->stream_create(0, &s, err, sizeof err), 0);
    CHECK_EQ_LONG(b->timer_create(0, &t0, err, sizeof err), 0);
    CHECK_EQ_LONG(b->timer_create(0, &t1, err, sizeof err), 0);
    CHECK_EQ_LONG(b->timer_create(0, &never, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_create(0, &plain, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(0, t0, s, err, sizeof err), 0);
    CHECK_EQ_LONG(b->host_fn(0, s, spin_body, (void *)&us, err, sizeof err), 0);
    /* a fault on the stream: reading the times must leave it to event_sync */
    CHECK_EQ_LONG(ordo_device_sim_inject_error(s, "fault between the timers (injected)"), 0);
    CHECK_EQ_LONG(b->event_record(0, t1, s, err, sizeof err), 0);
    CHECK_EQ_LONG(b->event_record(0, plain, s, err, sizeof err), 0);
    double ns = -1, back = 1, zero = -1;
    CHECK_EQ_LONG(b->event_elapsed_ns(0, t0, t1, &ns, err, sizeof err), 0); /* waits for t1 */
    CHECK_MSG(ns >= us * 1e3, "elapsed %.0f ns, the stream spun %.0f ns between the records", ns, us * 1e3);
    CHECK_EQ_LONG(b->event_elapsed_ns(0, t1, t0, &back, err, sizeof err), 0);
    CHECK_MSG(back == -ns, "elapsed backwards %.0f ns, forwards %.0f ns", back, ns);
    CHECK_EQ_LONG(b->event_elapsed_ns(0, t1, t1, &zero, err, sizeof err), 0);
    CHECK(zero == 0);
    CHECK(b->event_elapsed_ns(0, t0, plain, &ns, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "not created for timing"), "message: %s", err);
    CHECK(b->event_elapsed_ns(0, t0, never, &ns, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "never recorded"), "message: %s", err);
    /* the fault is still there for the host wait, once */
    CHECK(b->event_sync(0, plain, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "fault between the timers"), "message: %s", err);
    CHECK_EQ_LONG(b->event_sync(0, plain, err, sizeof err), 0);
    b->event_destroy(0, t0);
    b->event_destroy(0, t1);
    b->event_destroy(0, never);
    b->event_destroy(0, plain);
    b->stream_destroy(0, s);
}

/* ---- the trace and the summary --------------------------------------------------------- */

#define NKERNELS 6
#define NCOPIES 2

static void gpu_side_round(int kind) {
    ordo_engine *e = gpu_engine(kind, 2);
    CHECK(e != NULL);
    if (!e) return;
    static const double kus = KERNEL_US, cus = COPY_US;
    ordo_var *v[NKERNELS + NCOPIES + 2];
    for (int i = 0; i < ARRAY_LEN(v); i++) v[i] = ordo_new_variable(e);
    ordo_ctx g0 = {ORDO_GPU, 0}, g1 = {ORDO_GPU, 1};
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    /* independent ops: two compute streams, so each queues several */
    for (int i = 0; i < NKERNELS; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, (void *)&kus, NULL, g0, NULL, 0, &v[i], 1, 0, 0, "slow_kernel"),
                      ORDO_OK);
    for (int i = 0; i < NCOPIES; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, (void *)&cus, NULL, g0, NULL, 0, &v[NKERNELS + i], 1,
                                     ORDO_PROP_COPY_TO_GPU, 0, "slow_copy"),
                      ORDO_OK);
    CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, (void *)&kus, NULL, g1, NULL, 0, &v[NKERNELS + NCOPIES], 1, 0, 0,
                                 "gpu1_kernel"),
                  ORDO_OK);
    CHECK_EQ_LONG(ordo_push_sync(e, host_fn_op, NULL, NULL, cpu_ctx(0), &v[0], 1, &v[NKERNELS + NCOPIES + 1], 1, 0,
                                 0, "host_reader"),
                  ORDO_OK);
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);

    static trace_t t;
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    const char *k = kind_str(kind);
    CHECK_EQ_LONG(count_events(&t, "slow_kernel", "op"), NKERNELS);
    CHECK_MSG(count_events(&t, "slow_kernel", "gpu") == NKERNELS, "%s: %d GPU-side slow_kernel events", k,
              count_events(&t, "slow_kernel", "gpu"));
    CHECK_EQ_LONG(count_events(&t, "slow_copy", "gpu"), NCOPIES);
    CHECK_EQ_LONG(count_events(&t, "gpu1_kernel", "gpu"), 1);
    CHECK_EQ_LONG(count_events(&t, "host_reader", "op"), 1);
    CHECK_EQ_LONG(count_events(&t, "host_reader", "gpu"), 0);

    double most_behind = 0;
    int copy_tid = -1, kernel_tid = -1;
    for (int i = 0; i < t.n; i++) {
        const tev *x = &t.ev[i];
        if (strcmp(x->cat, "gpu")) continue;
        bool copy = !strcmp(x->name, "slow_copy"), other = !strcmp(x->name, "gpu1_kernel");
        double min_us = copy ? COPY_US : KERNEL_US;
        CHECK_MSG(x->pid == (other ? 1001 : 1000), "%s: %s on pid %d", k, x->name, x->pid);
        const char *track = track_name(&t, x->pid, x->tid);
        CHECK_MSG(strstr(track, other ? "gpu(1) stream of " : "gpu(0) stream of "), "%s: %s on track '%s'", k,
                  x->name, track);
        if (kind != ORDO_ENGINE_NAIVE && copy) CHECK_MSG(strstr(track, "copy"), "%s: a copy on track '%s'", k, track);
        if (copy) copy_tid = x->tid;
        else if (!other) kernel_tid = x->tid;
        CHECK_MSG(x->dur >= min_us - SLACK_US, "%s: %s lasted %.3f us on the GPU, its stream work %.0f us", k,
                  x->name, x->dur, min_us);
        CHECK_MSG(x->launch >= 0 && x->ts >= x->launch - SLACK_US, "%s: %s starts on the GPU at %.3f, launched at %.3f",
                  k, x->name, x->ts, x->launch);
        if (x->ts - x->launch > most_behind) most_behind = x->ts - x->launch;
        /* its launch is the host-side event of the same name at launch_us */
        int launches = 0;
        for (int j = 0; j < t.n; j++)
            launches += !strcmp(t.ev[j].cat, "op") && !strcmp(t.ev[j].name, x->name) &&
                        t.ev[j].ts > x->launch - 0.002 && t.ev[j].ts < x->launch + 0.002 &&
                        strstr(track_name(&t, t.ev[j].pid, t.ev[j].tid), "stream of") == NULL;
        CHECK_MSG(launches >= 1, "%s: no host-side %s at launch_us %.3f", k, x->name, x->launch);
        /* one stream runs one thing at a time: the GPU sides on a track never overlap */
        for (int j = 0; j < t.n; j++) {
            const tev *y = &t.ev[j];
            if (j == i || strcmp(y->cat, "gpu") || y->pid != x->pid || y->tid != x->tid) continue;
            bool apart = y->ts >= x->ts + x->dur - SLACK_US || x->ts >= y->ts + y->dur - SLACK_US;
            CHECK_MSG(apart, "%s: %s [%.3f +%.3f] and %s [%.3f +%.3f] overlap on one stream", k, x->name, x->ts,
                      x->dur, y->name, y->ts, y->dur);
        }
    }
    if (kind != ORDO_ENGINE_NAIVE) {
        /* the engine does not wait for the GPU: behind a busy stream the
         * work starts long after its launch (which a trace of launch times
         * relabelled as GPU times would not show) */
        CHECK_MSG(most_behind >= KERNEL_US, "%s: no GPU op started more than %.0f us after its launch (at most %.3f)",
                  k, KERNEL_US, most_behind);
        CHECK_MSG(copy_tid != kernel_tid, "%s: copies and kernels on one track", k);
    }

    char *sum = summary_of(e);
    CHECK(sum != NULL);
    long n = -1;
    double min_us = -1;
    summary_gpu_row(sum, "slow_kernel", &n, &min_us);
    CHECK_MSG(n == NKERNELS && min_us >= KERNEL_US - SLACK_US, "%s: GPU-side slow_kernel row: count %ld, min %.3f us:\n%s",
              k, n, min_us, sum ? sum : "");
    summary_gpu_row(sum, "slow_copy", &n, &min_us);
    CHECK_MSG(n == NCOPIES && min_us >= COPY_US - SLACK_US, "%s: GPU-side slow_copy row: count %ld, min %.3f us:\n%s",
              k, n, min_us, sum ? sum : "");
    summary_gpu_row(sum, "host_reader", &n, &min_us);
    CHECK_MSG(n == -1, "%s: a host op in the GPU-side table:\n%s", k, sum ? sum : "");
    /* the host-side table keeps its place and columns */
    CHECK_MSG(sum && !strncmp(sum, "op ", 3) && strstr(sum, "queue us/op\n"), "%s: summary header:\n%s", k,
              sum ? sum : "");
    CHECK_MSG(sum && strstr(sum, "host_reader") < strstr(sum, "GPU-side"), "%s: the host table comes first:\n%s", k,
              sum ? sum : "");
    free(sum);
    for (int i = 0; i < ARRAY_LEN(v); i++) ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v[i]);
    ordo_engine_destroy(e);
}

static void test_gpu_side_naive(void) { gpu_side_round(ORDO_ENGINE_NAIVE); }
static void test_gpu_side_pooled(void) { gpu_side_round(ORDO_ENGINE_POOLED); }
static void test_gpu_side_perdevice(void) { gpu_side_round(ORDO_ENGINE_PER_DEVICE); }

/* ---- off, stop, clear ------------------------------------------------------------------- */

static void push_kernels(ordo_engine *e, ordo_var *v, int n, const char *name) {
    static const double us = 200;
    for (int i = 0; i < n; i++)
        CHECK_EQ_LONG(ordo_push_sync(e, slow_gpu_fn, (void *)&us, NULL, (ordo_ctx){ORDO_GPU, 0}, NULL, 0, &v, 1, 0, 0,
                                     name),
                      ORDO_OK);
}

static void test_off_records_nothing(void) {
    ordo_engine *e = gpu_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    static trace_t t;
    push_kernels(e, v, 4, "never_profiled");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(t.n, 0);
    CHECK_EQ_LONG(t.nnames, 0);
    char *sum = summary_of(e);
    CHECK_MSG(sum && !strstr(sum, "GPU-side") && !strstr(sum, "never_profiled"), "summary:\n%s", sum ? sum : "");
    free(sum);

    /* on for some, off for the next: only the first ones, both sides */
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    push_kernels(e, v, 3, "profiled");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    push_kernels(e, v, 3, "after_stop");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(count_events(&t, "profiled", "op"), 3);
    CHECK_EQ_LONG(count_events(&t, "profiled", "gpu"), 3);
    CHECK_EQ_LONG(count_events(&t, "after_stop", "op") + count_events(&t, "after_stop", "gpu"), 0);
    /* read once, kept: a second dump and the summary give the same */
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(count_events(&t, "profiled", "gpu"), 3);
    long n;
    double min_us;
    sum = summary_of(e);
    summary_gpu_row(sum, "profiled", &n, &min_us);
    CHECK_MSG(n == 3 && min_us >= 200 - SLACK_US, "summary:\n%s", sum ? sum : "");
    CHECK_MSG(sum && !strstr(sum, "without GPU-side"), "summary:\n%s", sum ? sum : "");
    free(sum);

    /* clear drops them; a new session on the same engine works again */
    ordo_profiler_clear(e);
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(t.n, 0);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    push_kernels(e, v, 2, "second_session");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    /* cleared while profiling, with records not read yet */
    ordo_profiler_clear(e);
    push_kernels(e, v, 2, "after_clear");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(count_events(&t, "second_session", "gpu"), 0);
    CHECK_EQ_LONG(count_events(&t, "after_clear", "gpu"), 2);
    for (int i = 0; i < t.n; i++)
        if (!strcmp(t.ev[i].cat, "gpu"))
            CHECK_MSG(t.ev[i].ts >= t.ev[i].launch - SLACK_US && t.ev[i].dur >= 200 - SLACK_US,
                      "after clear: GPU side at %.3f +%.3f, launched at %.3f", t.ev[i].ts, t.ev[i].dur,
                      t.ev[i].launch);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_engine_destroy(e);
}

/* Profiling stops while a GPU op runs: it is not recorded and its timing
 * events go back (a leak would show under ASan at destroy); records left
 * unread at destroy are freed too. */
static atomic_int release_gate, gated_entered;
static int gated_gpu_fn(const ordo_run_ctx *rc, void *param) {
    atomic_store(&gated_entered, 1);
    double end = now_s() + 10;
    while (!atomic_load(&release_gate) && now_s() < end) sched_yield();
    return slow_gpu_fn(rc, param);
}

static void test_stop_while_running_and_destroy_unread(void) {
    ordo_engine *e = gpu_engine(ORDO_ENGINE_PER_DEVICE, 1);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *v = ordo_new_variable(e);
    static const double us = 100;
    atomic_store(&release_gate, 0);
    atomic_store(&gated_entered, 0);
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    CHECK_EQ_LONG(ordo_push_sync(e, gated_gpu_fn, (void *)&us, NULL, (ordo_ctx){ORDO_GPU, 0}, NULL, 0, &v, 1, 0, 0,
                                 "gated"),
                  ORDO_OK);
    CHECK(wait_until_at_least(&gated_entered, 1, 10));
    CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
    atomic_store(&release_gate, 1);
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    static trace_t t;
    CHECK_EQ_LONG(read_trace(e, &t), 0);
    CHECK_EQ_LONG(count_events(&t, "gated", "op") + count_events(&t, "gated", "gpu"), 0);
    /* unread at destroy */
    CHECK_EQ_LONG(ordo_profiler_start(e), 0);
    push_kernels(e, v, 5, "unread");
    CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
    ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), v);
    ordo_engine_destroy(e);
}

/* ---- errors behave as without the profiler ------------------------------------------------ */

static int faulting_gpu_fn(const ordo_run_ctx *rc, void *param) {
    (void)param;
    return ordo_device_sim_inject_error(rc->stream, "illegal memory access (injected)") ? ordo_fail(rc, "inject") : 0;
}

static int launch_failing_gpu_fn(const ordo_run_ctx *rc, void *param) {
    (void)param;
    return ordo_fail(rc, "bad launch configuration (test)");
}

static void test_errors_unchanged(void) {
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = gpu_engine(kind, 1);
        CHECK(e != NULL);
        if (!e) return;
        ordo_var *a = ordo_new_variable(e), *b = ordo_new_variable(e);
        ordo_ctx g = {ORDO_GPU, 0};
        CHECK_EQ_LONG(ordo_profiler_start(e), 0);
        CHECK_EQ_LONG(ordo_push_sync(e, faulting_gpu_fn, NULL, NULL, g, NULL, 0, &a, 1, 0, 0, "faulty_kernel"),
                      ORDO_OK);
        CHECK_EQ_LONG(ordo_push_sync(e, launch_failing_gpu_fn, NULL, NULL, g, NULL, 0, &b, 1, 0, 0, "bad_launch"),
                      ORDO_OK);
        double t0 = now_s();
        while (ordo_engine_pending(e) > 0 && now_s() - t0 < 10) sleep_ms(0.2);
        /* reading the profile first waits for the events, and must leave
         * the fault to the wait */
        static trace_t t;
        CHECK_EQ_LONG(read_trace(e, &t), 0);
        char *sum = summary_of(e);
        free(sum);
        CHECK_EQ_LONG(ordo_wait_for_var(e, a), ORDO_ERR_FAILED);
        CHECK_MSG(strstr(ordo_last_error(), "illegal memory access"), "%s: message: %s", kind_str(kind),
                  ordo_last_error());
        CHECK_EQ_LONG(ordo_wait_for_var(e, a), ORDO_OK); /* once */
        CHECK_EQ_LONG(ordo_wait_for_var(e, b), ORDO_ERR_FAILED);
        CHECK_MSG(strstr(ordo_last_error(), "bad launch configuration"), "%s: message: %s", kind_str(kind),
                  ordo_last_error());
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        int failed = 0;
        for (int i = 0; i < t.n; i++)
            failed += !strcmp(t.ev[i].name, "bad_launch") && !strcmp(t.ev[i].status, "failed");
        CHECK_MSG(failed >= 1, "%s: bad_launch not marked failed in the trace", kind_str(kind));
        /* and the engine still works, profiled */
        push_kernels(e, a, 2, "after_errors");
        CHECK_EQ_LONG(ordo_wait_for_all(e), ORDO_OK);
        CHECK_EQ_LONG(ordo_profiler_stop(e), 0);
        CHECK_EQ_LONG(read_trace(e, &t), 0);
        CHECK_EQ_LONG(count_events(&t, "after_errors", "gpu"), 2);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), a);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), b);
        ordo_engine_destroy(e);
    }
}

int main(void) {
    ordo_device_use_simulated(2);
    /* Streams drift up to 20 us per item against each other and the host. */
    ordo_device_sim_configure(20000, 0);
    printf("# simulated GPUs: %d\n", ordo_gpu_count());
    TEST(test_sim_timing_events);
    TEST(test_gpu_side_naive);
    TEST(test_gpu_side_pooled);
    TEST(test_gpu_side_perdevice);
    TEST(test_off_records_nothing);
    TEST(test_stop_while_running_and_destroy_unread);
    TEST(test_errors_unchanged);
    return harness_end();
}
