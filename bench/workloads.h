/*
 * workloads.h - what every engine benchmark runs, shared by the ordo program
 * and its peers (OpenMP, StarPU) so that all runtimes see the very same task
 * graphs, task bodies, sizes and repetition counts.
 *
 * Header-only on purpose: each peer is one translation unit built with its
 * own flags (-fopenmp, StarPU's pkg-config flags), and none of them should
 * have to link a helper object.
 *
 * Output protocol, one line per measurement, tab-separated, read by run.sh:
 *   R  <runtime> <workload> <tasks> <reps> <median_ns_per_task> <efficiency_%|->
 *      <busy_ns> <ns_per_task of every run, comma-separated, in run order>
 *   NA <runtime> <reason...>          the runtime could not be measured at all
 *   #  ...                            free-form comment, echoed by run.sh
 */
#ifndef ORDO_BENCH_WORKLOADS_H
#define ORDO_BENCH_WORKLOADS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every DAG task touches 3 distinct vars out of this many. */
#define BENCH_NVARS 1000
/* One seed for all runtimes: the "random" DAG is the same graph everywhere. */
#define BENCH_SEED 0x6f72646f2d646167ULL /* "ordo-dag" */
#define BENCH_MAX_REPS 64

/* The workloads, in table order.  busy_ns = 0 means an empty task body. */
enum { W_INDEP, W_CHAIN, W_DAG, W_DAG_1US, W_DAG_10US, W_COUNT };

typedef struct {
    const char *name;  /* key used in the R lines and by run.sh */
    int deps;          /* which dependency pattern: W_INDEP, W_CHAIN or W_DAG */
    long busy_ns;      /* task body: spin this long */
    long tasks;        /* tasks per timed run */
} bench_workload;

typedef struct {
    int reps;
    bench_workload w[W_COUNT];
} bench_params;

static inline long bench_env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v <= 0) ? dflt : v;
}

/*
 * Sizes.  The empty-task workloads use 1,000,000 tasks so that a run lasts
 * long enough (hundreds of ms) for timer and start-up noise not to matter.
 * The busy ones are sized to an ideal of ~0.1-0.25 s on 2 cores, which keeps
 * the whole `make bench` within its time budget.  BENCH_QUICK=1 is a smoke
 * run for testing the bench build itself: tiny sizes, one repetition.
 * BENCH_TASKS / BENCH_REPS override the defaults (BENCH_TASKS scales the
 * busy workloads proportionally).
 */
static inline bench_params bench_params_from_env(void)
{
    int quick = bench_env_long("BENCH_QUICK", 0) > 0;
    long n = bench_env_long("BENCH_TASKS", quick ? 20000 : 1000000);
    bench_params p;
    p.reps = (int)bench_env_long("BENCH_REPS", quick ? 1 : 5);
    if (p.reps > BENCH_MAX_REPS) p.reps = BENCH_MAX_REPS;
    p.w[W_INDEP]    = (bench_workload){"indep", W_INDEP, 0, n};
    p.w[W_CHAIN]    = (bench_workload){"chain", W_CHAIN, 0, n};
    p.w[W_DAG]      = (bench_workload){"dag", W_DAG, 0, n};
    p.w[W_DAG_1US]  = (bench_workload){"dag_1us", W_DAG, 1000, n / 5 > 0 ? n / 5 : 1};
    p.w[W_DAG_10US] = (bench_workload){"dag_10us", W_DAG, 10000, n / 20 > 0 ? n / 20 : 1};
    return p;
}

/* Only the runs named in BENCH_ONLY (comma list of workload names) run; all if unset. */
static inline int bench_selected(const char *name)
{
    const char *only = getenv("BENCH_ONLY");
    if (!only || !*only) return 1;
    size_t n = strlen(name);
    for (const char *s = only; (s = strstr(s, name)) != NULL; s += n)
        if ((s == only || s[-1] == ',') && (s[n] == ',' || s[n] == '\0')) return 1;
    return 0;
}

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The busy task body.  It spins on the clock rather than a calibrated loop:
 * clock_gettime is a vDSO call (~20-40 ns), small against 1 us, and the task
 * then lasts the requested wall time even when frequency scaling or a noisy
 * neighbour changes how fast a loop runs - which is what the ideal-time
 * formula assumes.  The empty body (ns = 0) returns at once.
 */
static inline void bench_busy(long ns)
{
    if (ns <= 0) return;
    uint64_t end = bench_now_ns() + (uint64_t)ns;
    while (bench_now_ns() < end) {
    }
}

/* splitmix64: tiny, good enough, and the same sequence on every compiler. */
static inline uint64_t bench_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/*
 * The random DAG: task i reads vars r0[i], r1[i] and writes w[i].  The three
 * are distinct so that no runtime has to decide what "read and write the
 * same var in one task" means (ordo folds it to a write, OpenMP forbids
 * overlapping list items in some versions, StarPU merges duplicate handles):
 * every runtime gets exactly 2 reads and 1 write per task.
 */
typedef struct {
    long n;
    uint16_t *r0, *r1, *w; /* BENCH_NVARS < 65536 */
} bench_dag;

static inline int bench_dag_make(bench_dag *d, long n)
{
    d->n = n;
    d->r0 = malloc((size_t)n * sizeof *d->r0);
    d->r1 = malloc((size_t)n * sizeof *d->r1);
    d->w = malloc((size_t)n * sizeof *d->w);
    if (!d->r0 || !d->r1 || !d->w) return -1;
    uint64_t s = BENCH_SEED;
    for (long i = 0; i < n; i++) {
        unsigned a = (unsigned)(bench_rand(&s) % BENCH_NVARS), b, c;
        do b = (unsigned)(bench_rand(&s) % BENCH_NVARS); while (b == a);
        do c = (unsigned)(bench_rand(&s) % BENCH_NVARS); while (c == a || c == b);
        d->r0[i] = (uint16_t)a;
        d->r1[i] = (uint16_t)b;
        d->w[i] = (uint16_t)c;
    }
    return 0;
}

static inline void bench_dag_free(bench_dag *d)
{
    free(d->r0);
    free(d->r1);
    free(d->w);
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Median of the run times: the machine has 2 cores and is noisy, so one
 * slow run (a neighbour, a page-fault storm on first use) must not count. */
static inline uint64_t bench_median(uint64_t *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, bench_cmp_u64);
    return (n % 2) ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/*
 * Print one result line: the median, and every run's time so that run.sh
 * can pool the runs of several processes (it runs each program more than
 * once, interleaved with the others, and reports the median of all runs).
 * Efficiency is reported for busy workloads only: ideal time = tasks *
 * task_time / 2 cores (the machine's 2 cores, whatever the runtime's thread
 * count), so 100% means no overhead and no idle core.
 */
static inline void bench_report(const char *runtime, const bench_workload *w, int reps,
                                const uint64_t *t)
{
    uint64_t sorted[BENCH_MAX_REPS];
    memcpy(sorted, t, (size_t)reps * sizeof *t);
    uint64_t median_ns = bench_median(sorted, reps);
    double per = (double)median_ns / (double)w->tasks;
    printf("R\t%s\t%s\t%ld\t%d\t%.1f\t", runtime, w->name, w->tasks, reps, per);
    if (w->busy_ns > 0)
        printf("%.1f", 100.0 * (double)w->tasks * (double)w->busy_ns / 2.0 / (double)median_ns);
    else
        printf("-");
    printf("\t%ld\t", w->busy_ns);
    for (int r = 0; r < reps; r++)
        printf("%s%.1f", r ? "," : "", (double)t[r] / (double)w->tasks);
    printf("\n");
    fflush(stdout);
}

#endif /* ORDO_BENCH_WORKLOADS_H */
