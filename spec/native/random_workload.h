/*
 * random_workload.h - random dependency workloads checked against a serial
 * oracle (used by test_random.c and test_random_async.c).
 *
 * A round is NOPS ops over NVARS vars (double data[NVARS]).  Each op reads
 * 2..19 random vars (duplicates allowed) and writes one or more, doing
 *     v = (data[r0] + data[r1] + ...) / (nreads + 1);  data[w] = v for each w
 * and spinning 1..9 us.  The serial oracle applies the same ops in push order
 * with the same order of summation, so a correct engine (rules 1-3) produces
 * bit-identical doubles; any op that runs early, late or concurrently with a
 * conflicting op changes some value.  ordo_var_version must also equal the
 * number of ops that wrote each var, where by rule 3 a var given twice (even
 * twice as a read) is written, once; and every param must have been freed
 * by engine_destroy.
 */
#ifndef ORDO_RANDOM_WORKLOAD_H
#define ORDO_RANDOM_WORKLOAD_H

#include "test_util.h"

#define RW_NVARS 100
#define RW_MAX_READS 19
#define RW_MAX_WRITES 3
#define RW_NDEVICES 4

typedef enum {
    RW_PLAIN,      /* one write per op, everything on cpu(0) */
    RW_MULTIWRITE, /* 1..3 writes per op (duplicates allowed) */
    RW_DEVICES,    /* ctx = cpu(0..3) or cpu_pinned(0..3) at random */
    RW_PRIORITY,   /* random priorities, some ops CPU_PRIORITIZED */
    RW_ASYNC,      /* push_async, completed by helper threads */
    RW_OPERATORS,  /* reusable operators: new_operator / push / delete_operator */
    RW_BULK        /* the pushing thread bulks (ordo_set_bulk_size): most ops ORDO_PROP_BULK, on
                    * cpu(0..1), 1..19 reads; waits on random vars mid-round check each var's
                    * value against the oracle at that point of the push order */
} rw_variant;

static inline const char *rw_variant_name(rw_variant v) {
    static const char *n[] = {"plain", "multiwrite", "devices", "priority", "async", "operators", "bulk"};
    return n[v];
}

/* One op's description; also its param (a malloc'd copy, freed by param_free). */
typedef struct {
    double *data;
    int nr, nw;
    int spin_ns;
    unsigned char r[RW_MAX_READS];
    unsigned char w[RW_MAX_WRITES];
    /* placement (not needed by the op itself) */
    ordo_ctx ctx;
    int prop, prio;
    int opr; /* RW_OPERATORS: index of the operator this push runs */
} rw_op;

static atomic_long rw_freed;  /* params freed by the engine */
static atomic_long rw_ran;    /* op bodies executed */

static inline void rw_apply(const rw_op *p, double *data) {
    double s = 0;
    for (int i = 0; i < p->nr; i++) s += data[p->r[i]];
    double v = s / (p->nr + 1);
    for (int i = 0; i < p->nw; i++) data[p->w[i]] = v;
}

static inline void rw_body(const rw_op *p) {
    rw_apply(p, p->data);
    spin_us(p->spin_ns / 1000.0);
    atomic_fetch_add(&rw_ran, 1);
}

static inline int rw_sync_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    rw_body((const rw_op *)param);
    return 0;
}

static inline void rw_param_free(void *p) {
    atomic_fetch_add(&rw_freed, 1);
    free(p);
}

/* Async ops: the body runs on a completer thread, then it completes. */
static completer_t *rw_completer;
static inline void rw_work(void *arg) { rw_body((const rw_op *)arg); }
static inline void rw_async_fn(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    completer_submit(rw_completer, done, rw_work, param, NULL, 0);
}

/* Operators run inline and complete at once. */
static inline void rw_operator_fn(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    rw_body((const rw_op *)param);
    ordo_done_complete(done, NULL);
}

static inline void rw_gen(rng_t *g, rw_op *o, double *data, rw_variant var) {
    memset(o, 0, sizeof *o);
    o->data = data;
    o->nr = rng_range(g, var == RW_BULK ? 1 : 2, RW_MAX_READS);
    for (int i = 0; i < o->nr; i++) o->r[i] = (unsigned char)rng_range(g, 0, RW_NVARS - 1);
    o->nw = var == RW_MULTIWRITE || var == RW_OPERATORS ? rng_range(g, 1, RW_MAX_WRITES) : 1;
    for (int i = 0; i < o->nw; i++) o->w[i] = (unsigned char)rng_range(g, 0, RW_NVARS - 1);
    o->spin_ns = rng_range(g, 1, 9) * 1000;
    o->ctx = cpu_ctx(0);
    o->prop = ORDO_PROP_NORMAL;
    o->prio = 0;
}

/* Random placement for one push (devices / priorities variants). */
static inline void rw_place(rng_t *g, rw_variant var, int devices, ordo_ctx *ctx, int *prop, int *prio) {
    *ctx = cpu_ctx(0);
    *prop = ORDO_PROP_NORMAL;
    *prio = 0;
    if (devices) {
        ctx->dev_id = rng_range(g, 0, RW_NDEVICES - 1);
        /* pinned host memory is documented to run on cpu(dev_id) */
        if (rng_range(g, 0, 9) == 0) ctx->dev_type = ORDO_CPU_PINNED;
    }
    if (var == RW_BULK) {
        ctx->dev_id = rng_range(g, 0, 9) == 0; /* a switch of device hands the bulk over */
        if (rng_range(g, 0, 4)) *prop |= ORDO_PROP_BULK;
    }
    if (var == RW_PRIORITY || var == RW_OPERATORS) {
        *prio = rng_range(g, -5, 5);
        if (var == RW_PRIORITY && rng_range(g, 0, 9) == 0) *prop = ORDO_PROP_CPU_PRIORITIZED;
    }
}

typedef struct {
    long mismatches, first_bad;
    double got, want;
    long push_errors, wait_rc, version_bad;
} rw_result;

/* Runs `rounds` rounds of `nops` ops on a fresh engine; returns failures via
 * CHECKs in the caller's test. */
static inline void rw_run(int kind, int workers, rw_variant var, int rounds, long nops, uint64_t seed) {
    rng_t g;
    rng_init(&g, seed ^ ((uint64_t)kind << 40) ^ ((uint64_t)workers << 32) ^ ((uint64_t)var << 48));
    atomic_store(&rw_freed, 0);
    atomic_store(&rw_ran, 0);
    ordo_engine *e = make_engine(kind, workers);
    CHECK(e != NULL);
    if (!e) return;
    completer_t comp;
    if (var == RW_ASYNC) {
        completer_start(&comp, 2);
        rw_completer = &comp;
    }
    ordo_var *vars[RW_NVARS];
    for (int i = 0; i < RW_NVARS; i++) vars[i] = ordo_new_variable(e);
    for (int i = 0; i < RW_NVARS; i++) CHECK(vars[i] != NULL);

    double *data = (double *)malloc(sizeof(double) * RW_NVARS);
    double *oracle = (double *)malloc(sizeof(double) * RW_NVARS);
    double *at_push = (double *)malloc(sizeof(double) * RW_NVARS); /* the oracle up to the op pushed last */
    long wait_checks = 0, wait_bad = 0;
    long expect_version[RW_NVARS] = {0};
    rw_op *ops = (rw_op *)malloc(sizeof(rw_op) * (size_t)nops);
    int devices = var == RW_DEVICES || var == RW_OPERATORS || var == RW_ASYNC;

    /* Reusable operators: a fixed pool, each pushed many times. */
    enum { NOPR = 64 };
    ordo_opr *oprs[NOPR];
    rw_op *opr_desc[NOPR];
    long pushes = 0, push_errors = 0, bad_rounds = 0;

    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < RW_NVARS; i++) data[i] = oracle[i] = 1.0 + (double)rng_range(&g, 0, 1 << 20) / (1 << 20);
        memcpy(at_push, data, sizeof(double) * RW_NVARS);
        if (var == RW_BULK) ordo_set_bulk_size(rng_range(&g, 1, ORDO_BULK_MAX));
        if (var == RW_OPERATORS) {
            for (int k = 0; k < NOPR; k++) {
                rw_op *o = (rw_op *)malloc(sizeof *o);
                rw_gen(&g, o, data, var);
                ordo_var *r[RW_MAX_READS], *w[RW_MAX_WRITES];
                for (int i = 0; i < o->nr; i++) r[i] = vars[o->r[i]];
                for (int i = 0; i < o->nw; i++) w[i] = vars[o->w[i]];
                opr_desc[k] = o;
                oprs[k] = ordo_new_operator(e, rw_operator_fn, o, rw_param_free, r, o->nr, w, o->nw,
                                            ORDO_PROP_NORMAL, "rw_operator");
                CHECK(oprs[k] != NULL);
                if (!oprs[k]) { /* keep the oracle honest: never push it */
                    free(o);
                    opr_desc[k] = NULL;
                }
            }
        }
        for (long i = 0; i < nops; i++) {
            if (var == RW_OPERATORS) {
                int k;
                do k = rng_range(&g, 0, NOPR - 1);
                while (!opr_desc[k]);
                ops[i] = *opr_desc[k];
                ops[i].opr = k;
            } else {
                rw_gen(&g, &ops[i], data, var);
            }
            rw_place(&g, var, devices, &ops[i].ctx, &ops[i].prop, &ops[i].prio);
        }
        /* Serial oracle, and the expected versions (rule 3: once per op). */
        for (long i = 0; i < nops; i++) {
            rw_apply(&ops[i], oracle);
            /* rule 3: the op writes each var of its write list, and each var
             * given twice anywhere (here: twice among the reads); once each */
            unsigned char nread[RW_NVARS] = {0}, counted[RW_NVARS] = {0};
            for (int k = 0; k < ops[i].nr; k++) nread[ops[i].r[k]]++;
            for (int k = 0; k < ops[i].nw; k++)
                if (!counted[ops[i].w[k]]++) expect_version[ops[i].w[k]]++;
            for (int k = 0; k < ops[i].nr; k++)
                if (nread[ops[i].r[k]] >= 2 && !counted[ops[i].r[k]]++) expect_version[ops[i].r[k]]++;
        }
        for (long i = 0; i < nops; i++) {
            rw_op *o = &ops[i];
            int rc;
            if (var == RW_OPERATORS) {
                rc = ordo_push(e, oprs[o->opr], o->ctx, o->prio);
            } else {
                rw_op *p = (rw_op *)malloc(sizeof *p);
                *p = *o;
                ordo_var *r[RW_MAX_READS], *w[RW_MAX_WRITES];
                for (int k = 0; k < o->nr; k++) r[k] = vars[o->r[k]];
                for (int k = 0; k < o->nw; k++) w[k] = vars[o->w[k]];
                if (var == RW_ASYNC)
                    rc = ordo_push_async(e, rw_async_fn, p, rw_param_free, o->ctx, r, o->nr, w,
                                         o->nw, o->prop, o->prio, "rw_async");
                else
                    rc = ordo_push_sync(e, rw_sync_fn, p, rw_param_free, o->ctx, r, o->nr, w, o->nw,
                                        o->prop, o->prio, "rw_sync");
                if (rc != 0) free(p); /* ownership of a rejected param is ours */
            }
            pushes++;
            if (rc != 0 && push_errors++ < 3)
                fprintf(stderr, "    push %ld failed: rc=%d %s\n", i, rc, ordo_last_error());
            if (var == RW_BULK) {
                /* Every op this thread pushed so far that writes v is done
                 * after the wait, and none pushed later has started writing
                 * it: v must hold the oracle's value at this point. */
                rw_apply(o, at_push);
                if (rng_range(&g, 0, 199) == 0) {
                    int v = rng_range(&g, 0, RW_NVARS - 1);
                    int wrc = ordo_wait_for_var(e, vars[v]);
                    wait_checks++;
                    if (wrc != 0 || data[v] != at_push[v]) {
                        if (wait_bad++ < 3)
                            fprintf(stderr, "    after op %ld, wait_for_var(%d) = %d, value %.17g, want %.17g\n", i, v,
                                    wrc, data[v], at_push[v]);
                    }
                }
            }
        }
        if (var == RW_OPERATORS) {
            /* Deleted while their runs are still pending: the engine must
             * free them only once those runs have finished. */
            for (int k = 0; k < NOPR; k++)
                if (oprs[k]) ordo_delete_operator(e, oprs[k]);
        }
        if (var == RW_BULK) ordo_set_bulk_size(0);
        int wrc = ordo_wait_for_all(e);
        CHECK_MSG(wrc == 0, "%s/%s/%d round %d: wait_for_all = %d (%s)", kind_str(kind),
                  rw_variant_name(var), workers, round, wrc, ordo_last_error());
        long bad = 0, first = -1;
        for (int i = 0; i < RW_NVARS; i++)
            if (data[i] != oracle[i] && bad++ == 0) first = i;
        if (bad) {
            bad_rounds++;
            fprintf(stderr, "    %s/%s/%d workers round %d: %ld of %d vars differ from the serial "
                            "oracle (first: var %ld = %.17g, want %.17g)\n",
                    kind_str(kind), rw_variant_name(var), workers, round, bad, RW_NVARS, first,
                    data[first], oracle[first]);
        }
        long vbad = 0;
        for (int i = 0; i < RW_NVARS; i++)
            if ((long)ordo_var_version(vars[i]) != expect_version[i] && vbad++ == 0)
                fprintf(stderr, "    %s/%s/%d round %d: var %d version %llu, want %ld\n",
                        kind_str(kind), rw_variant_name(var), workers, round, i,
                        (unsigned long long)ordo_var_version(vars[i]), expect_version[i]);
        CHECK(vbad == 0);
    }
    CHECK_MSG(bad_rounds == 0, "%s/%s/%d workers: %ld of %d rounds wrong", kind_str(kind),
              rw_variant_name(var), workers, bad_rounds, rounds);
    CHECK_EQ_LONG(push_errors, 0);
    CHECK_EQ_LONG(wait_bad, 0);
    if (var == RW_BULK) CHECK(wait_checks > 0);
    CHECK_EQ_LONG(atomic_load(&rw_ran), pushes);
    /* Half the variants delete their vars, the others leave them to
     * engine_destroy (which must free them too, rule 11). */
    if (var == RW_PLAIN || var == RW_MULTIWRITE || var == RW_ASYNC || var == RW_BULK) {
        for (int i = 0; i < RW_NVARS; i++) {
            int rc = ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), vars[i]);
            CHECK_EQ_LONG(rc, 0);
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    }
    ordo_engine_destroy(e);
    /* rule 11: every param freed, operators included, once destroy returns */
    long want_freed = var == RW_OPERATORS ? (long)rounds * NOPR : pushes;
    CHECK_EQ_LONG(atomic_load(&rw_freed), want_freed);
    if (var == RW_ASYNC) completer_stop(&comp);
    free(ops);
    free(data);
    free(oracle);
    free(at_push);
}

#endif
