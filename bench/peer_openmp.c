/*
 * peer_openmp.c - the OpenMP peer of the ordo engine benchmark: the same
 * workloads (workloads.h) as OpenMP tasks with `depend` clauses, run by gcc's
 * libgomp.  Thread count comes from OMP_NUM_THREADS (run.sh sets 2): one
 * thread creates the tasks inside `single`, the other runs them, and the
 * creator runs tasks too whenever it waits (taskwait, or when libgomp's
 * queue is full and it throttles task creation).
 *
 * Timed: from the first task creation to the end of `taskwait`, inside one
 * parallel region, so thread-team start-up is not counted (ordo's engine
 * creation and StarPU's starpu_init are not counted either).
 */
#include <omp.h>

#include "workloads.h"

/* Dependence keys.  OpenMP tracks dependences by address, so the vars are
 * just distinct memory locations; the tasks never touch them. */
static long g_vars[BENCH_NVARS];

static uint64_t run_once(const bench_workload *w, const bench_dag *d)
{
    uint64_t t0 = 0, t1 = 0;
    const long n = w->tasks, busy = w->busy_ns;
#pragma omp parallel
#pragma omp single
    {
        t0 = bench_now_ns();
        switch (w->deps) {
        case W_INDEP:
            for (long i = 0; i < n; i++) {
#pragma omp task firstprivate(busy)
                bench_busy(busy);
            }
            break;
        case W_CHAIN:
            for (long i = 0; i < n; i++) {
#pragma omp task firstprivate(busy) depend(inout : g_vars[0])
                bench_busy(busy);
            }
            break;
        default: /* W_DAG */
            for (long i = 0; i < n; i++) {
#pragma omp task firstprivate(busy) depend(in : g_vars[d->r0[i]], g_vars[d->r1[i]]) \
    depend(inout : g_vars[d->w[i]])
                bench_busy(busy);
            }
            break;
        }
#pragma omp taskwait
        t1 = bench_now_ns();
    }
    return t1 - t0;
}

int main(void)
{
    bench_params p = bench_params_from_env();
    bench_dag d;
    if (bench_dag_make(&d, p.w[W_DAG].tasks) != 0) {
        printf("NA\topenmp\tout of memory making the DAG\n");
        return 0;
    }
    printf("#\topenmp: libgomp, %d threads (OMP_NUM_THREADS), _OPENMP=%d\n",
           omp_get_max_threads(), _OPENMP);
    for (int k = 0; k < W_COUNT; k++) {
        const bench_workload *w = &p.w[k];
        if (!bench_selected(w->name)) continue;
        uint64_t t[BENCH_MAX_REPS];
        for (int r = 0; r < p.reps; r++) t[r] = run_once(w, &d);
        bench_report("openmp", w, p.reps, t);
    }
    bench_dag_free(&d);
    return 0;
}
