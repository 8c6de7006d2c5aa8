/*
 * engine_bench.c - ordo's side of the engine benchmark: the workloads of
 * workloads.h pushed to one ordo engine.
 *
 *   engine_bench <naive|pooled|perdevice> <cpu_workers> [BULK]
 *
 * One engine kind and worker count per process, so that one configuration's
 * threads (spinning workers, say) never steal the cores of the next one, and
 * a crash or hang in one configuration cannot take the others down with it.
 *
 * Threads: the main thread pushes; pooled and perdevice add cpu_workers
 * worker threads (plus a CPU priority pool thread that stays idle here).  So
 * cpu_workers=1 is 2 busy threads, the same as OpenMP's 2 threads of which
 * one creates the tasks; cpu_workers=2 is 3 busy threads on the 2 cores, the
 * same as StarPU with STARPU_NCPU=2 plus its submitting main thread.
 *
 * Timed: from the first push to the return of ordo_wait_for_all; creating
 * the engine and the vars is not counted (nor is the peers' set-up).
 *
 * Every task is ordo_push_sync with a trivial function (the same
 * bench_busy(0) body the peers run) on ctx {ORDO_CPU, 0}.  The extra
 * workload "chain_op" is the chain pushed through one reusable operator
 * (ordo_new_operator + ordo_push), which skips per-push argument handling;
 * the peers have no such thing, so run.sh compares it to their chain.
 *
 * With BULK (1..64), the pushing thread bulks (ordo_set_bulk_size(BULK))
 * and the tasks are pushed with ORDO_PROP_BULK: up to BULK consecutive tasks
 * become one engine op that runs them in push order (src/bulk.c).  The
 * peers have nothing alike, and a bulk runs its tasks one after the other
 * on one worker, so this is a column of its own, not a replacement.
 *
 * max_inflight is the engine's default (ORDO_MAX_INFLIGHT, else 65536), the
 * setting users get; BENCH_MAX_INFLIGHT=N overrides it.  A "never blocks"
 * window (N above the task count) looks fairer but measures something else:
 * with a million ops in flight every op is cold in cache by the time a
 * worker reaches it, and the empty-task rows get 2-3x slower, not faster.
 */
#include "ordo.h"
#include "workloads.h"

static long g_busy_ns; /* task body length, read by every task */

static int task_fn(const ordo_run_ctx *rc, void *param)
{
    (void)rc;
    bench_busy(*(const long *)param);
    return 0;
}

static void op_fn(const ordo_run_ctx *rc, void *param, ordo_done *done)
{
    (void)rc;
    bench_busy(*(const long *)param);
    ordo_done_complete(done, NULL);
}

static ordo_var *g_v[BENCH_NVARS];
static int g_prop = ORDO_PROP_NORMAL; /* | ORDO_PROP_BULK when bulking */
static const ordo_ctx CPU0 = {ORDO_CPU, 0};

/* Completed writes over all vars: a check, outside the timed region, that
 * the engine really ran every task it was given. */
static uint64_t total_versions(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < BENCH_NVARS; i++) sum += ordo_var_version(g_v[i]);
    return sum;
}

#define BENCH_LOST_WRITES (-1) /* run_once: fewer writes completed than pushed */

/* One timed run; returns 0 and the time in *ns, an ordo error code, or
 * BENCH_LOST_WRITES. */
static int run_once(ordo_engine *e, const bench_workload *w, const bench_dag *d, int use_op,
                    uint64_t *ns)
{
    const uint64_t versions_before = total_versions();
    const long n = w->tasks;
    int rc = 0;
    ordo_opr *op = NULL;
    g_busy_ns = w->busy_ns;
    if (use_op) {
        op = ordo_new_operator(e, op_fn, &g_busy_ns, NULL, NULL, 0, &g_v[0], 1,
                               ORDO_PROP_NORMAL, "chain_op");
        if (!op) return ORDO_ERR_FAILED;
    }
    uint64_t t0 = bench_now_ns();
    if (use_op) {
        for (long i = 0; i < n && rc == 0; i++) rc = ordo_push(e, op, CPU0, 0);
    } else {
        switch (w->deps) {
        case W_INDEP:
            for (long i = 0; i < n && rc == 0; i++)
                rc = ordo_push_sync(e, task_fn, &g_busy_ns, NULL, CPU0, NULL, 0, NULL, 0,
                                    g_prop, 0, "indep");
            break;
        case W_CHAIN:
            for (long i = 0; i < n && rc == 0; i++)
                rc = ordo_push_sync(e, task_fn, &g_busy_ns, NULL, CPU0, NULL, 0, &g_v[0], 1,
                                    g_prop, 0, "chain");
            break;
        default: /* W_DAG */
            for (long i = 0; i < n && rc == 0; i++) {
                ordo_var *r[2] = {g_v[d->r0[i]], g_v[d->r1[i]]};
                rc = ordo_push_sync(e, task_fn, &g_busy_ns, NULL, CPU0, r, 2, &g_v[d->w[i]], 1,
                                    g_prop, 0, "dag");
            }
            break;
        }
    }
    int wrc = ordo_wait_for_all(e);
    uint64_t t1 = bench_now_ns();
    if (op) ordo_delete_operator(e, op);
    *ns = t1 - t0;
    if (rc || wrc) return rc ? rc : wrc;
    uint64_t writes = w->deps == W_INDEP ? 0 : (uint64_t)n;
    return total_versions() - versions_before == writes ? 0 : BENCH_LOST_WRITES;
}

static int parse_kind(const char *s)
{
    if (!strcmp(s, "naive")) return ORDO_ENGINE_NAIVE;
    if (!strcmp(s, "pooled")) return ORDO_ENGINE_POOLED;
    if (!strcmp(s, "perdevice")) return ORDO_ENGINE_PER_DEVICE;
    return 0;
}

int main(int argc, char **argv)
{
    int kind = argc > 1 ? parse_kind(argv[1]) : 0;
    int workers = argc > 2 ? atoi(argv[2]) : 0;
    int bulk = argc > 3 ? atoi(argv[3]) : 0;
    if (!kind || workers <= 0 || bulk < 0 || bulk > ORDO_BULK_MAX) {
        fprintf(stderr, "usage: %s naive|pooled|perdevice CPU_WORKERS [BULK 1..%d]\n", argv[0], ORDO_BULK_MAX);
        return 2;
    }
    /* The naive engine has no workers: label it without a worker count. */
    char label[64];
    if (kind == ORDO_ENGINE_NAIVE)
        snprintf(label, sizeof label, "ordo-naive");
    else if (bulk)
        snprintf(label, sizeof label, "ordo-%s-w%d-b%d", argv[1], workers, bulk);
    else
        snprintf(label, sizeof label, "ordo-%s-w%d", argv[1], workers);
    if (bulk) {
        ordo_set_bulk_size(bulk);
        g_prop |= ORDO_PROP_BULK;
    }

    bench_params p = bench_params_from_env();
    bench_dag d;
    if (bench_dag_make(&d, p.w[W_DAG].tasks) != 0) {
        printf("NA\t%s\tout of memory making the DAG\n", label);
        return 0;
    }

    ordo_engine_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kind = kind;
    cfg.cpu_workers = workers;
    cfg.cpu_priority_workers = 1;
    cfg.max_inflight = (int)bench_env_long("BENCH_MAX_INFLIGHT", 0); /* 0: engine default */
    ordo_engine *e = ordo_engine_create(&cfg);
    if (!e) {
        printf("NA\t%s\tordo_engine_create failed: %s\n", label, ordo_last_error());
        bench_dag_free(&d);
        return 0;
    }
    ordo_engine_get_config(e, &cfg);
    printf("#\t%s: kind=%s cpu_workers=%d cpu_priority_workers=%d max_inflight=%d spin_us=%d "
           "push_inline_after=%d%s\n",
           label, ordo_engine_kind_name(cfg.kind), cfg.cpu_workers, cfg.cpu_priority_workers,
           cfg.max_inflight, cfg.spin_us, cfg.push_inline_after, bulk > 0 ? "" : " (not bulking)");
    if (bulk > 0)
        printf("#\t%s: bulks of %d, bulk_op_max_ns=%d\n", label, bulk, cfg.bulk_op_max_ns);

    for (int i = 0; i < BENCH_NVARS; i++) {
        g_v[i] = ordo_new_variable(e);
        if (!g_v[i]) {
            printf("NA\t%s\tordo_new_variable failed: %s\n", label, ordo_last_error());
            ordo_engine_destroy(e);
            bench_dag_free(&d);
            return 0;
        }
    }

    /* The table's order, with chain_op right after chain. */
    for (int k = 0; k < W_COUNT; k++) {
        for (int use_op = 0; use_op <= (k == W_CHAIN); use_op++) {
            bench_workload w = p.w[k];
            if (use_op) w.name = "chain_op";
            if (!bench_selected(w.name)) continue;
            uint64_t t[BENCH_MAX_REPS];
            int rc = 0;
            for (int r = 0; r < p.reps && rc == 0; r++) rc = run_once(e, &w, &d, use_op, &t[r]);
            if (rc == BENCH_LOST_WRITES) {
                printf("NA\t%s\t%s: var versions grew by less than the writes pushed\n", label,
                       w.name);
                continue;
            }
            if (rc != 0) {
                printf("NA\t%s\t%s: error %d: %s\n", label, w.name, rc, ordo_last_error());
                continue;
            }
            bench_report(label, &w, p.reps, t);
        }
    }

    ordo_engine_destroy(e); /* deletes the vars too (rule 11) */
    bench_dag_free(&d);
    return 0;
}
