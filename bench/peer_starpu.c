/*
 * peer_starpu.c - the StarPU peer of the ordo engine benchmark: the same
 * workloads (workloads.h) as StarPU tasks made with starpu_task_insert, with
 * STARPU_R / STARPU_RW access modes on variable handles (StarPU's implicit
 * "sequential consistency" dependencies - the same model as ordo's vars).
 *
 * StarPU settings, each only when the environment does not already set it
 * (run.sh does), so that a user can try other schedulers by hand:
 *   STARPU_NCPU=2           two CPU workers; the main thread submits, so this
 *                           is 3 threads, like ordo with cpu_workers=2
 *   STARPU_SCHED=eager      one central queue: the cheapest scheduler, and no
 *                           performance model is consulted
 *   STARPU_CALIBRATE=0      never calibrate (no perf models on our codelets anyway)
 *   STARPU_SILENT=1         no banner / warnings mixed into the result lines
 *   STARPU_NCUDA=0, STARPU_NOPENCL=0, STARPU_NMPI_MS=0   CPU only, like the others
 *   STARPU_HOME             a scratch dir (run.sh), so nothing lands in ~/.starpu
 *
 * Timed: from the first starpu_task_insert to the return of
 * starpu_task_wait_for_all; starpu_init and handle registration are not.
 * If starpu_init fails (e.g. no usable CPU in a container), print an NA line
 * with the reason and exit 0, so the rest of the bench still runs.
 */
#include <errno.h>
#include <starpu.h>

#include "workloads.h"

/* Task body length for the current workload; written before the tasks are
 * submitted, so StarPU's queue locks order it before every read. */
static long g_busy_ns;

static void body(void *buffers[], void *cl_arg)
{
    (void)buffers;
    (void)cl_arg;
    bench_busy(g_busy_ns);
}

/* One codelet per dependency pattern: StarPU wants the buffer count and
 * access modes fixed in the codelet. */
static struct starpu_codelet cl_indep = {
    .where = STARPU_CPU, .cpu_funcs = {body}, .nbuffers = 0, .name = "indep"};
static struct starpu_codelet cl_chain = {
    .where = STARPU_CPU, .cpu_funcs = {body}, .nbuffers = 1, .modes = {STARPU_RW},
    .name = "chain"};
static struct starpu_codelet cl_dag = {
    .where = STARPU_CPU, .cpu_funcs = {body}, .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_RW}, .name = "dag"};

static long g_vars[BENCH_NVARS];
static starpu_data_handle_t g_h[BENCH_NVARS];

/* Returns the run time, or 0 when a submission failed (reported by the caller). */
static uint64_t run_once(const bench_workload *w, const bench_dag *d, int *err)
{
    const long n = w->tasks;
    int rc = 0;
    g_busy_ns = w->busy_ns;
    uint64_t t0 = bench_now_ns();
    switch (w->deps) {
    case W_INDEP:
        for (long i = 0; i < n && rc == 0; i++) rc = starpu_task_insert(&cl_indep, 0);
        break;
    case W_CHAIN:
        for (long i = 0; i < n && rc == 0; i++)
            rc = starpu_task_insert(&cl_chain, STARPU_RW, g_h[0], 0);
        break;
    default: /* W_DAG */
        for (long i = 0; i < n && rc == 0; i++)
            rc = starpu_task_insert(&cl_dag, STARPU_R, g_h[d->r0[i]], STARPU_R, g_h[d->r1[i]],
                                    STARPU_RW, g_h[d->w[i]], 0);
        break;
    }
    starpu_task_wait_for_all();
    uint64_t t1 = bench_now_ns();
    *err = rc;
    return t1 - t0;
}

int main(void)
{
    setenv("STARPU_NCPU", "2", 0);
    setenv("STARPU_SCHED", "eager", 0);
    setenv("STARPU_CALIBRATE", "0", 0);
    setenv("STARPU_SILENT", "1", 0);
    setenv("STARPU_NCUDA", "0", 0);
    setenv("STARPU_NOPENCL", "0", 0);
    setenv("STARPU_NMPI_MS", "0", 0);

    bench_params p = bench_params_from_env();
    bench_dag d;
    if (bench_dag_make(&d, p.w[W_DAG].tasks) != 0) {
        printf("NA\tstarpu\tout of memory making the DAG\n");
        return 0;
    }

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncuda = 0;
    conf.nopencl = 0;
    int rc = starpu_init(&conf);
    if (rc != 0) {
        printf("NA\tstarpu\tstarpu_init failed: %s (%d)%s\n", strerror(-rc), rc,
               rc == -ENODEV ? " - no worker could be started" : "");
        bench_dag_free(&d);
        return 0;
    }
    int major, minor, release;
    starpu_get_version(&major, &minor, &release);
    printf("#\tstarpu: %d.%d.%d, %u CPU workers (STARPU_NCPU), scheduler %s\n", major, minor,
           release, starpu_cpu_worker_get_count(), getenv("STARPU_SCHED"));

    for (int i = 0; i < BENCH_NVARS; i++)
        starpu_variable_data_register(&g_h[i], STARPU_MAIN_RAM, (uintptr_t)&g_vars[i],
                                      sizeof g_vars[i]);

    for (int k = 0; k < W_COUNT; k++) {
        const bench_workload *w = &p.w[k];
        if (!bench_selected(w->name)) continue;
        uint64_t t[BENCH_MAX_REPS];
        int err = 0;
        for (int r = 0; r < p.reps && err == 0; r++) t[r] = run_once(w, &d, &err);
        if (err != 0) {
            printf("NA\tstarpu\t%s: starpu_task_insert failed: %s (%d)\n", w->name,
                   strerror(-err), err);
            continue;
        }
        bench_report("starpu", w, p.reps, t);
    }

    for (int i = 0; i < BENCH_NVARS; i++) starpu_data_unregister(g_h[i]);
    starpu_shutdown();
    bench_dag_free(&d);
    return 0;
}
