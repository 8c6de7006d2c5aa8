/*
 * test_threads.c - rule 8: several threads pushing at once.
 *
 * Four threads push at the same time on overlapping vars (a shared set plus a
 * few private vars each), every op touching a random subset in random order
 * and random roles.  Checked for every engine kind:
 *   - no deadlock (watchdog);
 *   - mutual exclusion: while an op that writes v runs, no other op that
 *     reads or writes v runs (in-flight counters per var; readers may overlap
 *     each other);
 *   - per-thread push order: for two ops of the same thread that share a var
 *     one of them writes, the earlier one finished before the later started
 *     (tickets from a global clock, no timing);
 *   - ordo_var_version of each var = number of ops that wrote it.
 * Plus the targeted case: thread A pushes (reads x, writes y), thread B
 * (reads y, writes x) and both-write ops in opposite var order, in a tight
 * loop with waits.
 */
#include <stdbool.h>

#include "harness.h"
#include "test_util.h"

#define MT_THREADS 4
#define MT_SHARED 12
#define MT_PRIVATE 4
#define MT_NVARS (MT_SHARED + MT_THREADS * MT_PRIVATE)
#define MT_MAXV 5

typedef struct {
    atomic_int readers, writers;
} inflight;

static inflight g_inflight[MT_NVARS];
static atomic_long g_overlaps;

typedef struct {
    int n;                 /* vars in the op's lists (with duplicates) */
    unsigned char v[MT_MAXV];
    unsigned char w[MT_MAXV]; /* 1 = given as write */
    /* effective roles after rule 3 (distinct vars) */
    int nd;
    unsigned char dv[MT_MAXV], dw[MT_MAXV];
    int spin_ns;
    atomic_long start, end;
} mt_op;

static void mt_roles(mt_op *o) {
    o->nd = 0;
    for (int i = 0; i < o->n; i++) {
        int j;
        for (j = 0; j < o->nd; j++)
            if (o->dv[j] == o->v[i]) break;
        if (j == o->nd) {
            o->dv[o->nd] = o->v[i];
            o->dw[o->nd] = o->w[i];
            o->nd++;
        } else {
            o->dw[j] = 1; /* given twice: a write (rule 3) */
        }
    }
}

static int mt_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    mt_op *o = (mt_op *)param;
    atomic_store(&o->start, ticket());
    for (int i = 0; i < o->nd; i++) {
        inflight *f = &g_inflight[o->dv[i]];
        if (o->dw[i]) {
            int w = atomic_fetch_add(&f->writers, 1);
            if (w != 0 || atomic_load(&f->readers) != 0) atomic_fetch_add(&g_overlaps, 1);
        } else {
            atomic_fetch_add(&f->readers, 1);
            if (atomic_load(&f->writers) != 0) atomic_fetch_add(&g_overlaps, 1);
        }
    }
    spin_us(o->spin_ns / 1000.0);
    for (int i = 0; i < o->nd; i++) {
        inflight *f = &g_inflight[o->dv[i]];
        if (o->dw[i]) atomic_fetch_sub(&f->writers, 1);
        else atomic_fetch_sub(&f->readers, 1);
    }
    atomic_store(&o->end, ticket());
    return 0;
}

typedef struct {
    ordo_engine *e;
    int kind;
    int tid;
    long nops;
    ordo_var **vars;
    mt_op *ops;
    uint64_t seed;
    long push_errors;
    atomic_int *go;
    bool bulk; /* bulking, so most pushes become bulk ops of many vars */
} mt_thread;

static void *mt_pusher(void *p) {
    mt_thread *t = (mt_thread *)p;
    rng_t g;
    rng_init(&g, t->seed);
    if (t->bulk) ordo_set_bulk_size(rng_range(&g, 2, ORDO_BULK_MAX));
    while (!atomic_load(t->go)) sched_yield(); /* start all pushers together */
    for (long i = 0; i < t->nops; i++) {
        mt_op *o = &t->ops[i];
        o->n = rng_range(&g, 1, MT_MAXV);
        for (int k = 0; k < o->n; k++) {
            /* mostly shared vars, sometimes this thread's private ones */
            if (rng_range(&g, 0, 3) == 0)
                o->v[k] = (unsigned char)(MT_SHARED + t->tid * MT_PRIVATE + rng_range(&g, 0, MT_PRIVATE - 1));
            else
                o->v[k] = (unsigned char)rng_range(&g, 0, MT_SHARED - 1);
            o->w[k] = rng_range(&g, 0, 2) == 0;
            /* A var repeated in the lists is given at least once as a write
             * here: read+write and write+write count once as a write (rule 3)
             * whatever one makes of a var given twice as a read only, which
             * test_rules.c checks on its own. */
            for (int j = 0; j < k; j++)
                if (o->v[j] == o->v[k]) o->w[k] = 1;
        }
        mt_roles(o);
        o->spin_ns = rng_range(&g, 0, 3000);
        ordo_var *r[MT_MAXV], *w[MT_MAXV];
        int nr = 0, nw = 0;
        for (int k = 0; k < o->n; k++) {
            if (o->w[k]) w[nw++] = t->vars[o->v[k]];
            else r[nr++] = t->vars[o->v[k]];
        }
        ordo_ctx ctx = cpu_ctx(t->kind == ORDO_ENGINE_PER_DEVICE ? rng_range(&g, 0, 1) : 0);
        int prio = rng_range(&g, -2, 2), prop = ORDO_PROP_NORMAL;
        if (t->bulk) { /* bulks of up to 64 ops, cut short by a priority or a device switch */
            prop |= ORDO_PROP_BULK;
            if (rng_range(&g, 0, 15)) prio = 0;
        }
        if (ordo_push_sync(t->e, mt_fn, o, NULL, ctx, r, nr, w, nw, prop, prio, "mt") != 0)
            t->push_errors++;
        /* now and then a thread waits on a var while the others keep pushing */
        if (i % 997 == 996) {
            int v = o->v[0];
            if (ordo_wait_for_var(t->e, t->vars[v]) != 0) t->push_errors++;
        }
    }
    if (t->bulk) ordo_set_bulk_size(0); /* hands the last bulk over */
    return NULL;
}

/* Per-thread order: for each var, walk the thread's ops in push order. */
static long mt_check_order(mt_thread *t) {
    long bad = 0;
    for (int v = 0; v < MT_NVARS; v++) {
        long last_write_end = 0, max_read_end = 0;
        for (long i = 0; i < t->nops; i++) {
            mt_op *o = &t->ops[i];
            int role = -1;
            for (int k = 0; k < o->nd; k++)
                if (o->dv[k] == v) role = o->dw[k];
            if (role < 0) continue;
            long s = atomic_load(&o->start), e = atomic_load(&o->end);
            if (s <= last_write_end) bad++;
            if (role == 1) {
                if (s <= max_read_end) bad++;
                last_write_end = e;
                max_read_end = 0;
            } else if (e > max_read_end) {
                max_read_end = e;
            }
        }
    }
    return bad;
}

static void mt_run(int kind, bool bulk) {
    long nops = scaled(20000, 2000);
    ordo_engine *e = make_engine(kind, 2);
    CHECK(e != NULL);
    if (!e) return;
    ordo_var *vars[MT_NVARS];
    for (int i = 0; i < MT_NVARS; i++) vars[i] = ordo_new_variable(e);
    memset(g_inflight, 0, sizeof g_inflight);
    atomic_store(&g_overlaps, 0);
    atomic_int go;
    atomic_init(&go, 0);
    mt_thread th[MT_THREADS];
    pthread_t pt[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++) {
        th[t] = (mt_thread){e, kind, t, nops, vars, (mt_op *)calloc((size_t)nops, sizeof(mt_op)),
                            test_seed() + 77 * (uint64_t)t + (uint64_t)kind, 0, &go, bulk};
        pthread_create(&pt[t], NULL, mt_pusher, &th[t]);
    }
    double t0 = now_s();
    atomic_store(&go, 1);
    for (int t = 0; t < MT_THREADS; t++) pthread_join(pt[t], NULL);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    double dt = now_s() - t0;
    CHECK_MSG(atomic_load(&g_overlaps) == 0, "%s: %ld times an op ran while a conflicting op was "
              "running", kind_str(kind), atomic_load(&g_overlaps));
    long writes[MT_NVARS] = {0}, not_run = 0, bad_order = 0, perr = 0;
    for (int t = 0; t < MT_THREADS; t++) {
        perr += th[t].push_errors;
        for (long i = 0; i < nops; i++) {
            mt_op *o = &th[t].ops[i];
            if (!atomic_load(&o->end)) not_run++;
            for (int k = 0; k < o->nd; k++) writes[o->dv[k]] += o->dw[k];
        }
        bad_order += mt_check_order(&th[t]);
    }
    CHECK_EQ_LONG(perr, 0);
    CHECK_EQ_LONG(not_run, 0);
    CHECK_MSG(bad_order == 0, "%s: %ld per-thread ordering violations", kind_str(kind), bad_order);
    long vbad = 0;
    for (int v = 0; v < MT_NVARS; v++) vbad += (long)ordo_var_version(vars[v]) != writes[v];
    CHECK_MSG(vbad == 0, "%s: %ld vars with a wrong version", kind_str(kind), vbad);
    printf("    %s%s: %d threads x %ld ops in %.2f s\n", kind_str(kind), bulk ? ", bulking" : "", MT_THREADS, nops, dt);
    ordo_engine_destroy(e);
    for (int t = 0; t < MT_THREADS; t++) free(th[t].ops);
}

static void test_rule8_threads_pushing_naive(void) { mt_run(ORDO_ENGINE_NAIVE, false); }
static void test_rule8_threads_pushing_pooled(void) { mt_run(ORDO_ENGINE_POOLED, false); }
static void test_rule8_threads_pushing_perdevice(void) { mt_run(ORDO_ENGINE_PER_DEVICE, false); }
/* Bulks are pushed with their vars in no particular order, locked by trying
 * (push.c, lock_vars): several threads' bulks on overlapping vars must still
 * neither deadlock nor reorder. */
static void test_rule8_threads_bulking_pooled(void) { mt_run(ORDO_ENGINE_POOLED, true); }
static void test_rule8_threads_bulking_perdevice(void) { mt_run(ORDO_ENGINE_PER_DEVICE, true); }

/* Thread A: reads x, writes y.  Thread B: reads y, writes x.  Plus ops that
 * write both, given as (x, y) by A and (y, x) by B.  A push that locked its
 * vars one at a time in list order would deadlock here. */
typedef struct {
    ordo_engine *e;
    ordo_var *first, *second;
    long n;
    atomic_long *count;
    long errors;
} xy_thread;

static void *xy_main(void *p) {
    xy_thread *t = (xy_thread *)p;
    ordo_var *both[2] = {t->first, t->second};
    for (long i = 0; i < t->n; i++) {
        int rc;
        if (i % 3 == 0)
            rc = push_simple(t->e, count_op, t->count, NULL, 0, both, 2, "xy_both");
        else
            rc = push_simple(t->e, count_op, t->count, &t->first, 1, &t->second, 1, "xy");
        if (rc) t->errors++;
        if (i % 1000 == 999 && ordo_wait_for_var(t->e, t->first) != 0) t->errors++;
        if (i % 1500 == 1499 && ordo_wait_to_write(t->e, t->second) != 0) t->errors++;
    }
    return NULL;
}

static void test_rule8_opposite_var_order_no_deadlock(void) {
    long n = scaled(20000, 2000);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *x = ordo_new_variable(e), *y = ordo_new_variable(e);
        atomic_long ca, cb;
        atomic_init(&ca, 0);
        atomic_init(&cb, 0);
        xy_thread a = {e, x, y, n, &ca, 0}, b = {e, y, x, n, &cb, 0};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, xy_main, &a);
        pthread_create(&tb, NULL, xy_main, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(a.errors + b.errors, 0);
        CHECK_EQ_LONG(atomic_load(&ca), n);
        CHECK_EQ_LONG(atomic_load(&cb), n);
        /* every op of A writes y, every op of B writes x; the both-write ops
         * write the other var too */
        long both = (n + 2) / 3;
        CHECK_EQ_LONG(ordo_var_version(y), n + both);
        CHECK_EQ_LONG(ordo_var_version(x), n + both);
        ordo_engine_destroy(e);
    }
}

/* Many threads create vars, push on them and delete them concurrently with
 * pushes on shared vars. */
typedef struct {
    ordo_engine *e;
    ordo_var *shared;
    long n;
    atomic_long *count;
    long errors;
} churn_thread;

static void *churn_main(void *p) {
    churn_thread *t = (churn_thread *)p;
    for (long i = 0; i < t->n; i++) {
        ordo_var *v = ordo_new_variable(t->e);
        if (!v) {
            t->errors++;
            continue;
        }
        ordo_var *rw[2] = {t->shared, v};
        if (push_simple(t->e, count_op, t->count, rw, 1, &v, 1, "churn_w")) t->errors++;
        if (push_simple(t->e, count_op, t->count, rw, 2, NULL, 0, "churn_r")) t->errors++;
        if (ordo_delete_variable(t->e, NULL, NULL, cpu_ctx(0), v)) t->errors++;
        if (i % 64 == 0 && push_simple(t->e, count_op, t->count, NULL, 0, &t->shared, 1, "churn_s"))
            t->errors++;
    }
    return NULL;
}

static void test_rule8_threads_creating_and_deleting_vars(void) {
    long n = scaled(10000, 1000);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *shared = ordo_new_variable(e);
        atomic_long count;
        atomic_init(&count, 0);
        churn_thread th[MT_THREADS];
        pthread_t pt[MT_THREADS];
        for (int t = 0; t < MT_THREADS; t++) {
            th[t] = (churn_thread){e, shared, n, &count, 0};
            pthread_create(&pt[t], NULL, churn_main, &th[t]);
        }
        long errors = 0;
        for (int t = 0; t < MT_THREADS; t++) {
            pthread_join(pt[t], NULL);
            errors += th[t].errors;
        }
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        CHECK_EQ_LONG(errors, 0);
        long per = 2 * n + (n + 63) / 64;
        CHECK_EQ_LONG(atomic_load(&count), MT_THREADS * per);
        CHECK_EQ_LONG(ordo_var_version(shared), MT_THREADS * ((n + 63) / 64));
        ordo_engine_destroy(e);
    }
}

int main(void) {
    printf("# seed %#llx, scale %g\n", (unsigned long long)test_seed(), test_scale());
    TEST(test_rule8_threads_pushing_naive);
    TEST(test_rule8_threads_pushing_pooled);
    TEST(test_rule8_threads_pushing_perdevice);
    TEST(test_rule8_threads_bulking_pooled);
    TEST(test_rule8_threads_bulking_perdevice);
    TEST(test_rule8_opposite_var_order_no_deadlock);
    TEST(test_rule8_threads_creating_and_deleting_vars);
    return harness_end();
}
