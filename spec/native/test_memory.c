/*
 * test_memory.c - a million ops in bounded memory, and no leaks from var /
 * operator / engine churn.
 *
 * RSS is read from /proc/self/statm after a warm-up (so the engine's pools
 * and the allocator's arenas already exist) and again after the workload;
 * growth must stay under RSS_LIMIT.  With max_inflight at its default
 * (8192), a correct engine holds at most that many op blocks at once, far
 * below the limit, whereas an engine that never recycles op blocks grows by
 * ~100+ bytes per op (>100 MB per million).  Under ASan/TSan (shadow memory,
 * quarantine) and valgrind RSS says nothing, so there the workloads run
 * scaled down without the RSS assertion and the leak checkers do the work.
 */
#include "harness.h"
#include "test_util.h"
#include "host_alloc.h"
#include "tensor_internal.h"

#define RSS_LIMIT (64L << 20)

static int rss_meaningful(void) { return !TEST_UNDER_SANITIZER && !under_valgrind(); }

static void check_rss(long before, long after, const char *what) {
    double mb = (double)(after - before) / (1 << 20);
    printf("    %s: RSS %.1f MB -> %.1f MB (%+.1f MB)\n", what, before / 1048576.0, after / 1048576.0, mb);
    if (!rss_meaningful()) return;
    CHECK(before > 0 && after > 0);
    CHECK_MSG(after - before < RSS_LIMIT, "%s: RSS grew by %.1f MB (limit %ld MB)", what, mb,
              RSS_LIMIT >> 20);
}

/* Host blocks (tensor storages), small ones too, are cached for reuse,
 * 64-byte aligned, and given back by host_cache_empty; with
 * ORDO_HOST_CACHE_MB=0 (the sanitizer and valgrind runs) none is kept, so
 * that a use after free is still caught. */
static void test_small_host_blocks_cached(void) {
    const char *env = getenv("ORDO_HOST_CACHE_MB");
    const int cache_on = !(env && *env && atol(env) == 0);
    host_cache_empty();
    CHECK_EQ_LONG((long)host_cached_bytes(), 0);
    static const size_t sizes[] = {1, 64, 65, 100, 1000, 4096, 65535};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = host_alloc(sizes[i]);
        CHECK(p && ((uintptr_t)p & 63) == 0);
        if (!p) continue;
        memset(p, 0xab, sizes[i]); /* the whole size is usable (ASan checks) */
        host_free(p, sizes[i]);
        char *q = host_alloc(sizes[i]);
        if (cache_on) CHECK_MSG(q == p, "a freed block of %zu bytes was not reused", sizes[i]);
        host_free(q, sizes[i]);
    }
    if (cache_on) CHECK(host_cached_bytes() > 0);
    else CHECK_EQ_LONG((long)host_cached_bytes(), 0);
    host_cache_empty();
    CHECK_EQ_LONG((long)host_cached_bytes(), 0);
}

/* Freed tensor descriptors are kept for reuse by the thread that freed
 * them (tensor.c: the collector frees thousands at once, past glibc's
 * fast paths), each reused one with an id of its own (the memo of repeated
 * ops tells descriptors apart by it); ordo_host_empty_cache gives them
 * back, and with ORDO_HOST_CACHE_MB=0 none is kept. */
static void *free_descriptors(void *arg) {
    ordo_tensor **t = arg;
    for (int i = 0; i < 100; i++) ordo_tensor_free(t[i]);
    return NULL; /* its cache goes at its exit (the leak checkers' runs have it off: see above) */
}

static void test_descriptors_cached(void) {
    const char *env = getenv("ORDO_HOST_CACHE_MB");
    const int cache_on = !(env && *env && atol(env) == 0);
    enum { N = 1000 };
    static ordo_tensor *t[N];
    static uint64_t ids[N];
    const int64_t shape[1] = {4};
    const ordo_ctx cpu0 = {ORDO_CPU, 0};
    ordo_host_empty_cache();
    const long before = tensor_desc_cached(); /* other threads' (none in this test) */
    for (int i = 0; i < N; i++) {
        t[i] = ordo_tensor_empty(NULL, ORDO_F32, 1, shape, cpu0);
        CHECK(t[i] != NULL);
        if (!t[i]) return;
        ids[i] = t[i]->id;
    }
    for (int i = 0; i < N; i++) ordo_tensor_free(t[i]);
    CHECK_EQ_LONG(tensor_desc_cached() - before, cache_on ? N : 0);
    uint64_t max_id = 0;
    for (int i = 0; i < N; i++) max_id = ids[i] > max_id ? ids[i] : max_id;
    for (int i = 0; i < N; i++) {
        t[i] = ordo_tensor_empty(NULL, ORDO_F32, 1, shape, cpu0);
        CHECK(t[i] != NULL);
        if (!t[i]) return;
        CHECK(t[i]->id > max_id); /* reused or not, a new id */
        CHECK_EQ_LONG(t[i]->shape[0], 4);
    }
    CHECK_EQ_LONG(tensor_desc_cached() - before, 0);
    /* freed on another thread: kept there, and given back at its exit */
    pthread_t th;
    CHECK_EQ_LONG(pthread_create(&th, NULL, free_descriptors, t), 0);
    pthread_join(th, NULL);
    CHECK_EQ_LONG(tensor_desc_cached() - before, 0);
    for (int i = 100; i < N; i++) ordo_tensor_free(t[i]);
    CHECK_EQ_LONG(tensor_desc_cached() - before, cache_on ? N - 100 : 0);
    ordo_host_empty_cache();
    CHECK_EQ_LONG(tensor_desc_cached() - before, 0);
}

/* An allocation the system refuses gives the cached blocks back to it and
 * asks once more (under a memory limit they are what is left), and fails
 * with NULL only then. */
static void test_refused_host_block_empties_cache(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("    (skipped: the sanitizers' allocators abort on a request of 2^62 bytes)\n");
#else
    const char *env = getenv("ORDO_HOST_CACHE_MB");
    const int cache_on = !(env && *env && atol(env) == 0);
    host_cache_empty();
    host_free(host_alloc(1 << 20), 1 << 20);
    host_free(host_alloc(100), 100);
    if (cache_on) CHECK(host_cached_bytes() >= (1 << 20));
    CHECK(host_alloc((size_t)1 << 62) == NULL);
    CHECK_EQ_LONG((long)host_cached_bytes(), 0);
    char *p = host_alloc(1 << 20); /* and it works on */
    CHECK(p != NULL);
    host_free(p, 1 << 20);
    host_cache_empty();
#endif
}

static atomic_long mem_freed;

static void mem_free(void *p) {
    atomic_fetch_add(&mem_freed, 1);
    free(p);
}

typedef struct {
    long *cell;
    char pad[48];
} mem_param;

static int mem_fn(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (*((mem_param *)param)->cell)++;
    return 0;
}

static long push_batch(ordo_engine *e, ordo_var **vars, int nv, long *cells, long n, rng_t *g) {
    long errors = 0;
    for (long i = 0; i < n; i++) {
        int w = rng_range(g, 0, nv - 1);
        ordo_var *r[2] = {vars[rng_range(g, 0, nv - 1)], vars[rng_range(g, 0, nv - 1)]};
        mem_param *p = (mem_param *)malloc(sizeof *p);
        p->cell = &cells[w];
        if (ordo_push_sync(e, mem_fn, p, mem_free, cpu_ctx(0), r, rng_range(g, 0, 2), &vars[w], 1,
                           i % 10 == 0 ? ORDO_PROP_CPU_PRIORITIZED : 0, (int)(i % 3), "mem")) {
            errors++;
            free(p);
        }
    }
    return errors;
}

static void million(int kind) {
    long n = scaled(1000000, 20000);
    ordo_engine *e = make_engine(kind, 2);
    CHECK(e != NULL);
    if (!e) return;
    enum { NV = 100 };
    ordo_var *vars[NV];
    long cells[NV] = {0};
    for (int i = 0; i < NV; i++) vars[i] = ordo_new_variable(e);
    rng_t g;
    rng_init(&g, test_seed() + 4);
    atomic_store(&mem_freed, 0);
    /* warm-up: a full max_inflight's worth of blocks gets allocated here */
    long errors = push_batch(e, vars, NV, cells, 100000 < n ? 100000 : n, &g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    long before = rss_bytes();
    double t0 = now_s();
    errors += push_batch(e, vars, NV, cells, n, &g);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    double dt = now_s() - t0;
    long after = rss_bytes();
    CHECK_EQ_LONG(errors, 0);
    long total = 0;
    for (int i = 0; i < NV; i++) total += cells[i];
    long pushed = n + (100000 < n ? 100000 : n);
    CHECK_EQ_LONG(total, pushed);
    char what[96];
    snprintf(what, sizeof what, "%s, %ld ops (%.2f s, %.2f us/op)", kind_str(kind), n, dt, dt * 1e6 / (double)n);
    check_rss(before, after, what);
    ordo_engine_destroy(e);
    CHECK_EQ_LONG(atomic_load(&mem_freed), pushed);
}

static void test_million_ops_bounded_memory_naive(void) { million(ORDO_ENGINE_NAIVE); }
static void test_million_ops_bounded_memory_pooled(void) { million(ORDO_ENGINE_POOLED); }
static void test_million_ops_bounded_memory_perdevice(void) { million(ORDO_ENGINE_PER_DEVICE); }

/* Vars created, used and deleted in a loop: memory stays flat. */
static int del_count(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_long *)param, 1);
    return 0;
}

static long var_churn(ordo_engine *e, long n, ordo_var *shared, atomic_long *deleted, atomic_long *ran) {
    long errors = 0;
    for (long i = 0; i < n; i++) {
        ordo_var *v = ordo_new_variable(e);
        if (!v) {
            errors++;
            continue;
        }
        ordo_var *rs[2] = {shared, v};
        errors += push_simple(e, count_op, ran, &shared, 1, &v, 1, "churn_w") != 0;
        errors += push_simple(e, count_op, ran, rs, 2, NULL, 0, "churn_r") != 0;
        errors += ordo_delete_variable(e, del_count, deleted, cpu_ctx(0), v) != 0;
        if (i % 10000 == 9999) errors += ordo_wait_for_all(e) != 0;
    }
    return errors;
}

static void test_var_create_delete_loop(void) {
    long n = scaled(300000, 10000);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *shared = ordo_new_variable(e);
        atomic_long deleted, ran;
        atomic_init(&deleted, 0);
        atomic_init(&ran, 0);
        long errors = var_churn(e, n / 10, shared, &deleted, &ran);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        long before = rss_bytes();
        double t0 = now_s();
        errors += var_churn(e, n, shared, &deleted, &ran);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        double dt = now_s() - t0;
        long after = rss_bytes();
        CHECK_EQ_LONG(errors, 0);
        CHECK_EQ_LONG(atomic_load(&deleted), n + n / 10);
        CHECK_EQ_LONG(atomic_load(&ran), 2 * (n + n / 10));
        char what[96];
        snprintf(what, sizeof what, "%s, %ld vars created and deleted (%.2f s)", kind_str(kind), n, dt);
        check_rss(before, after, what);
        ordo_engine_destroy(e);
    }
}

/* Operators created, pushed and deleted in a loop. */
static void opr_fn(const ordo_run_ctx *rc, void *param, ordo_done *done) {
    (void)rc;
    atomic_fetch_add((atomic_long *)param, 1);
    ordo_done_complete(done, NULL);
}

static long opr_churn(ordo_engine *e, long n, ordo_var **vs, atomic_long *ran) {
    long errors = 0;
    for (long i = 0; i < n; i++) {
        ordo_opr *op = ordo_new_operator(e, opr_fn, ran, NULL, &vs[i % 8], 1, &vs[(i + 3) % 8], 1, 0, "churn");
        if (!op) {
            errors++;
            continue;
        }
        errors += ordo_push(e, op, cpu_ctx(0), 0) != 0;
        errors += ordo_push(e, op, cpu_ctx(0), 1) != 0;
        ordo_delete_operator(e, op);
    }
    return errors;
}

static void test_operator_create_delete_loop(void) {
    long n = scaled(100000, 5000);
    for (int k = 0; k < 3; k++) {
        int kind = ALL_KINDS[k];
        ordo_engine *e = make_engine(kind, 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *vs[8];
        for (int i = 0; i < 8; i++) vs[i] = ordo_new_variable(e);
        atomic_long ran;
        atomic_init(&ran, 0);
        long errors = opr_churn(e, n / 10, vs, &ran);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        long before = rss_bytes();
        errors += opr_churn(e, n, vs, &ran);
        CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
        long after = rss_bytes();
        CHECK_EQ_LONG(errors, 0);
        CHECK_EQ_LONG(atomic_load(&ran), 2 * (n + n / 10));
        char what[96];
        snprintf(what, sizeof what, "%s, %ld operators", kind_str(kind), n);
        check_rss(before, after, what);
        ordo_engine_destroy(e);
    }
}

/* Engines created and destroyed in a loop: memory stays flat. */
static void test_engine_create_destroy_loop(void) {
    long n = scaled(200, 20);
    long before = 0;
    for (long i = 0; i < n; i++) {
        if (i == n / 10) before = rss_bytes();
        ordo_engine *e = make_engine(ALL_KINDS[i % 3], 2);
        CHECK(e != NULL);
        if (!e) continue;
        ordo_var *v = ordo_new_variable(e);
        CHECK_EQ_LONG(push_simple(e, noop_op, NULL, NULL, 0, &v, 1, "x"), 0);
        ordo_engine_destroy(e);
    }
    check_rss(before, rss_bytes(), "engine create/destroy loop");
}

int main(void) {
    printf("# seed %#llx, scale %g, RSS checks %s\n", (unsigned long long)test_seed(), test_scale(),
           rss_meaningful() ? "on" : "off (sanitizer or valgrind)");
    TEST(test_small_host_blocks_cached);
    TEST(test_refused_host_block_empties_cache);
    TEST(test_descriptors_cached);
    TEST(test_million_ops_bounded_memory_naive);
    TEST(test_million_ops_bounded_memory_pooled);
    TEST(test_million_ops_bounded_memory_perdevice);
    TEST(test_var_create_delete_loop);
    TEST(test_operator_create_delete_loop);
    TEST(test_engine_create_destroy_loop);
    return harness_end();
}
