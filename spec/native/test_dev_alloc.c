/*
 * test_dev_alloc.c - the caching device allocator (src/dev_alloc.c), on the
 * simulated device.
 *
 * The simulator's device memory is host memory, so the tests write and
 * read blocks directly; its streams are host threads, so "work still
 * pending on a block" is a host function queued on a stream (a stand-in
 * for a kernel) that can be made slow.  Covered: reuse of a freed block
 * with its last-use event handed over and no device call; size classes
 * and their waste bound (tensors of 1 MiB or 2 MiB + 4 bytes once held
 * twice that) and best fit; no reuse of a block too large for the
 * request; the statistics; empty_cache and out of memory giving cached
 * blocks back only after their last use; the out-of-memory message and
 * its precision; bad device ids; and a
 * multi-threaded stress in which "kernels" on the streams verify every
 * block while the host reuses them, so a block handed out without its
 * event, or to two holders at once, shows up as a corrupted pattern (and
 * under TSan as a race).
 *
 * Each test starts from dev_alloc_shutdown(), which frees the allocator's
 * state and so restarts its statistics from zero.
 */
#include "harness.h"
#include "test_util.h"

#include "dev_alloc.h"
#include "dev_event.h"
#include "device.h"
#include "ordo_tensor.h"

#define MiB ((size_t)1 << 20)
#define NDEV 2

static const device_backend *B;
static char err[512];

static void fresh(void) {
    ordo_device_sim_configure(0, 0);
    dev_alloc_shutdown();
}

static ordo_gpu_memory_stats stats(int dev) {
    ordo_gpu_memory_stats s;
    memset(&s, 0, sizeof s);
    int rc = ordo_gpu_get_memory_stats(dev, &s);
    CHECK_MSG(rc == 0, "stats: %s", ordo_tensor_error());
    return s;
}

static void *new_stream(int dev) {
    void *s = NULL;
    int rc = B->stream_create(dev, &s, err, sizeof err);
    CHECK_MSG(rc == 0, "stream_create: %s", err);
    return s;
}

static int refs(dev_event *e) { return __atomic_load_n(&e->refs, __ATOMIC_ACQUIRE); }

/* A slow "kernel": sleeps, then marks that it finished. */
typedef struct {
    double ms;
    atomic_int done;
} slow_t;

static void slow_fn(void *arg) {
    slow_t *s = arg;
    sleep_ms(s->ms);
    atomic_store(&s->done, 1);
}

/* Queues slow work on stream and returns the event recorded after it. */
static dev_event *slow_event(int dev, void *stream, slow_t *s, double ms) {
    s->ms = ms;
    atomic_store(&s->done, 0);
    int rc = B->host_fn(dev, stream, slow_fn, s, err, sizeof err);
    CHECK_MSG(rc == 0, "host_fn: %s", err);
    dev_event *e = dev_event_record(dev, stream, err, sizeof err);
    CHECK_MSG(e != NULL, "dev_event_record: %s", err);
    return e;
}

static void *must_alloc(int dev, size_t n, dev_event **ready) {
    void *p = NULL;
    int rc = dev_alloc(dev, n, &p, ready, err, sizeof err);
    CHECK_MSG(rc == 0 && p != NULL, "dev_alloc(%d, %zu): rc %d: %s", dev, n, rc, err);
    return p;
}

/* ------------------------------------------------------------------ */

static void test_bad_device_ids(void) {
    fresh();
    void *p = (void *)1;
    dev_event *ready = (dev_event *)1;
    CHECK_EQ_LONG(dev_alloc(-1, 100, &p, &ready, err, sizeof err), ORDO_ERR_INVALID);
    CHECK(p == NULL && ready == NULL);
    CHECK_MSG(strstr(err, "gpu(-1)") != NULL, "%s", err);
    CHECK_EQ_LONG(dev_alloc(ORDO_MAX_DEVICES, 100, &p, &ready, err, sizeof err), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(dev_alloc(NDEV, 100, &p, &ready, err, sizeof err), ORDO_ERR_NO_DEVICE);
    CHECK_MSG(strcmp(err, "gpu(2) does not exist (2 devices)") == 0, "%s", err);
    CHECK(p == NULL);

    ordo_gpu_memory_stats s;
    CHECK_EQ_LONG(ordo_gpu_get_memory_stats(5, &s), ORDO_ERR_NO_DEVICE);
    CHECK_EQ_LONG(ordo_tensor_error_code(), ORDO_ERR_NO_DEVICE);
    CHECK_MSG(strstr(ordo_tensor_error(), "gpu(5) does not exist") != NULL, "%s", ordo_tensor_error());
    CHECK_EQ_LONG(ordo_gpu_get_memory_stats(-3, &s), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(ordo_gpu_get_memory_stats(0, NULL), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(ordo_gpu_empty_cache(-1), ORDO_ERR_INVALID);
    CHECK_EQ_LONG(ordo_gpu_empty_cache(NDEV), ORDO_ERR_NO_DEVICE);
    CHECK_EQ_LONG(ordo_gpu_empty_cache(1), 0);
    CHECK_EQ_LONG(dev_empty_cache(7, err, sizeof err), ORDO_ERR_NO_DEVICE);

    /* A pointer the allocator never gave out is refused (with a message on
     * stderr), and the event passed with it is still released. */
    void *stream = new_stream(0);
    dev_event *e = dev_event_record(0, stream, err, sizeof err);
    CHECK(e != NULL);
    if (e) {
        dev_event_ref(e);
        CHECK_EQ_LONG(refs(e), 2);
        static char not_a_block[64];
        dev_free(0, not_a_block, e);
        CHECK_EQ_LONG(refs(e), 1);
        dev_free(-1, not_a_block, NULL); /* no state for that device: refused too */
        dev_event_unref(e);
    }
    s = stats(0);
    CHECK_EQ_LONG(s.allocated_bytes, 0);
    CHECK_EQ_LONG(s.reserved_bytes, 0);
    dev_free(0, NULL, NULL); /* NULL is fine */
    B->stream_destroy(0, stream);
}

static void test_reuse_hands_over_event(void) {
    fresh();
    void *stream = new_stream(0);
    dev_event *ready = (dev_event *)1;
    void *p = must_alloc(0, 1000, &ready);
    CHECK(ready == NULL); /* fresh memory: nothing to wait for */
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.num_device_allocs, 1);
    CHECK_EQ_LONG(s.cache_misses, 1);
    CHECK_EQ_LONG(s.cache_hits, 0);

    /* Freed with its last-use event: the next request of that size gets the
     * same block and that very event (the allocator's reference). */
    slow_t slow;
    dev_event *ev = slow_event(0, stream, &slow, 20);
    dev_free(0, p, ev);
    CHECK_EQ_LONG(refs(ev), 1);
    void *q = must_alloc(0, 1000, &ready);
    CHECK(q == p);
    CHECK(ready == ev);
    s = stats(0);
    CHECK_EQ_LONG(s.num_device_allocs, 1);
    CHECK_EQ_LONG(s.cache_hits, 1);
    CHECK_EQ_LONG(s.cache_misses, 1);
    if (ready) {
        CHECK_EQ_LONG(dev_event_sync(ready, err, sizeof err), 0);
        CHECK_EQ_LONG(atomic_load(&slow.done), 1);
        dev_event_unref(ready);
    }

    /* Freed with no event: handed out with none. */
    dev_free(0, q, NULL);
    q = must_alloc(0, 900, &ready);
    CHECK(q == p && ready == NULL);

    /* ready NULL: the allocator waits for the event itself. */
    ev = slow_event(0, stream, &slow, 30);
    dev_free(0, q, ev);
    q = must_alloc(0, 1000, NULL);
    CHECK(q == p);
    CHECK_EQ_LONG(atomic_load(&slow.done), 1);
    dev_free(0, q, NULL);

    /* Of two same-size blocks, the one freed first comes back first. */
    void *a = must_alloc(0, 4096, &ready), *b = must_alloc(0, 4096, &ready);
    dev_free(0, b, NULL);
    dev_free(0, a, NULL);
    CHECK(must_alloc(0, 4096, &ready) == b);
    CHECK(must_alloc(0, 4096, &ready) == a);
    dev_free(0, a, NULL);
    dev_free(0, b, NULL);
    s = stats(0);
    CHECK_EQ_LONG(s.num_device_allocs, 3);
    CHECK_EQ_LONG(s.num_device_frees, 0);
    B->stream_destroy(0, stream);
}

static void test_size_rounding(void) {
    fresh();
    CHECK_EQ_LONG(dev_alloc_block_size(0), 512);
    CHECK_EQ_LONG(dev_alloc_block_size(1), 512);
    CHECK_EQ_LONG(dev_alloc_block_size(512), 512);
    CHECK_EQ_LONG(dev_alloc_block_size(513), 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(MiB - 512), MiB - 512);
    CHECK_EQ_LONG(dev_alloc_block_size(MiB - 511), MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(MiB - 4), MiB); /* 0.999996 MiB */
    CHECK_EQ_LONG(dev_alloc_block_size(MiB), MiB);
    /* From 1 MiB, eight classes per power of two. */
    CHECK_EQ_LONG(dev_alloc_block_size(MiB + 1), MiB + 128 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(MiB + 128 * 1024), MiB + 128 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(2 * MiB - 1), 2 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(2 * MiB), 2 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(2 * MiB + 1), 2 * MiB + 256 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(2 * MiB + 4), 2 * MiB + 256 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(3 * MiB + 7), 3 * MiB + 256 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(4 * MiB + 1), 4 * MiB + 512 * 1024);
    CHECK_EQ_LONG(dev_alloc_block_size(8 * MiB + 1), 9 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(15 * MiB + 1), 16 * MiB);
    /* From 16 MiB, 2 MiB multiples. */
    CHECK_EQ_LONG(dev_alloc_block_size(16 * MiB + 1), 18 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(33 * MiB), 34 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(1024 * MiB + 1), 1026 * MiB);
    CHECK_EQ_LONG(dev_alloc_block_size(SIZE_MAX), 0);
    CHECK_EQ_LONG(dev_alloc_block_size(SIZE_MAX - 2 * MiB), SIZE_MAX - 2 * MiB + 1);

    dev_event *ready;
    void *p = NULL;
    CHECK_EQ_LONG(dev_alloc(0, SIZE_MAX - 5, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK(p == NULL);

    void *a = must_alloc(0, 1, &ready);
    CHECK_EQ_LONG(stats(0).allocated_bytes, 512);
    void *z = must_alloc(0, 0, &ready); /* a real, distinct block */
    CHECK(z != NULL && z != a);
    void *c = must_alloc(0, 513, &ready);
    CHECK_EQ_LONG(stats(0).allocated_bytes, 2048);
    dev_free(0, c, NULL);
    /* Small blocks are reused only within their exact 512-byte class. */
    CHECK(must_alloc(0, 600, &ready) == c); /* 600 -> 1024 */
    dev_free(0, c, NULL);
    void *d = must_alloc(0, 1500, &ready); /* 1536: the 1024 block is too small */
    CHECK(d != c);
    void *e = must_alloc(0, 400, &ready); /* 512: the 1024 block is not its class */
    CHECK(e != c);
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.num_device_allocs, 5);
    CHECK_EQ_LONG(s.cache_hits, 1);
    CHECK_EQ_LONG(s.allocated_bytes, 512 + 512 + 1536 + 512);
    CHECK_EQ_LONG(s.reserved_bytes, 512 + 512 + 1536 + 512 + 1024);
    dev_free(0, a, NULL);
    dev_free(0, z, NULL);
    dev_free(0, d, NULL);
    dev_free(0, e, NULL);
}

/* The waste bound, for every size just below, at and just past each class
 * boundary, and for random sizes: a block is a multiple of 512 bytes, at
 * most 511 bytes larger than its request below 1 MiB, and from 1 MiB less
 * than an eighth and less than 2 MiB larger, and never past the request's
 * next multiple of 2 MiB (cudaMalloc's page).  A block size is its own
 * class, and classes grow with the request. */
static void check_class(size_t n, long *bad) {
    size_t b = dev_alloc_block_size(n), m = n ? n : 1;
    int ok = b >= m && b % 512 == 0 && dev_alloc_block_size(b) == b;
    if (m < MiB) ok = ok && b - m < 512;
    else ok = ok && b - m < 2 * MiB && (b - m) * 8 < m && b <= (m + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    if (n && dev_alloc_block_size(n - 1) > b) ok = 0;
    if (!ok && (*bad)++ < 5) CHECK_MSG(0, "block size %zu for a request of %zu bytes", b, n);
}

static void test_size_classes_bound_waste(void) {
    long bad = 0;
    for (size_t n = 0; n < 4096; n++) check_class(n, &bad);
    /* The class boundaries up to 64 GiB, found by walking the classes. */
    long classes = 0;
    for (size_t c = 512; c <= ((size_t)64 << 30); c = dev_alloc_block_size(c + 1), classes++) {
        for (size_t d = 0; d < 3; d++) {
            check_class(c - d, &bad);
            check_class(c + d, &bad);
        }
        if (c >= MiB && c < 16 * MiB) {
            /* eight classes per power of two: the next one is c + c/8 rounded down to its power's step */
            size_t p = (size_t)1 << (63 - __builtin_clzll(c));
            CHECK_MSG(dev_alloc_block_size(c + 1) == c + p / 8, "class after %zu: %zu", c, dev_alloc_block_size(c + 1));
        }
    }
    CHECK_EQ_LONG(classes, 2047 + 32 + (64 * 1024 - 16) / 2 + 1);
    rng_t g;
    rng_init(&g, test_seed());
    for (int i = 0; i < 100000; i++) {
        int bits = rng_range(&g, 1, 40);
        check_class((size_t)rng_next(&g) & (((size_t)1 << bits) - 1), &bad);
    }
    CHECK_EQ_LONG(bad, 0);
}

/* Tensors of 1 MiB, or just under, held 2 MiB each, and ones of 2 MiB + 4
 * bytes 4 MiB.  Filling a 40 MiB device: 40 of 1 MiB fit (32 of them in
 * 32 MiB), and 17 of 2 MiB + 4 bytes (2.25 MiB blocks), and
 * allocated_bytes says what they hold. */
static int fill(int dev, size_t n, void **p, int max) {
    int k = 0;
    dev_event *ready;
    while (k < max && dev_alloc(dev, n, &p[k], &ready, err, sizeof err) == 0) k++;
    return k;
}

static void test_waste_fits_device(void) {
    fresh();
    ordo_device_sim_configure(0, 40 * MiB);
    dev_event *ready;
    void *p[64];
    for (int i = 0; i < 32; i++) p[i] = must_alloc(0, i % 2 ? MiB : MiB - 4, &ready);
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.allocated_bytes, 32 * MiB);
    CHECK_EQ_LONG(s.oom_retries, 0);
    CHECK_EQ_LONG(fill(0, MiB, p + 32, 32), 8);
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 1.0 MiB (40.0 MiB in use by tensors, 0 B cached; "
                          "device: 0 B free of 40.0 MiB)") == 0,
              "%s", err);
    for (int i = 0; i < 40; i++) dev_free(0, p[i], NULL);
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);

    CHECK_EQ_LONG(fill(0, 2 * MiB + 4, p, 64), 17);
    s = stats(0);
    CHECK_EQ_LONG(s.allocated_bytes, 17 * (2 * MiB + 256 * 1024)); /* 38.25 MiB */
    CHECK_EQ_LONG(s.reserved_bytes, s.allocated_bytes);
    /* The 18th: the message names the block the request was rounded to. */
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 2.0 MiB (rounded to 2.2 MiB; 38.2 MiB in use by "
                          "tensors, 0 B cached; device: 1.8 MiB free of 40.0 MiB)") == 0,
              "%s", err);
    for (int i = 0; i < 17; i++) dev_free(0, p[i], NULL);

    /* Reuse stays within a class: a freed 1.125 MiB block serves any
     * request from 1 MiB + 1 byte to 1.125 MiB; a 1 MiB block is too small
     * for 1 MiB + 1 byte. */
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
    void *a = must_alloc(0, MiB + 100, &ready), *b = must_alloc(0, MiB, &ready);
    dev_free(0, a, NULL);
    dev_free(0, b, NULL);
    CHECK(must_alloc(0, MiB + 128 * 1024, &ready) == a);
    CHECK(must_alloc(0, MiB - 300, &ready) == b);
    dev_free(0, b, NULL);
    void *c = must_alloc(0, MiB + 1, &ready);
    CHECK(c != a && c != b);
    s = stats(0);
    CHECK_EQ_LONG(s.allocated_bytes, 2 * (MiB + 128 * 1024));
    dev_free(0, a, NULL);
    dev_free(0, c, NULL);
    fresh();
}

/* Best fit over the classes from 1 MiB: the smallest cached block of at
 * least the request's class, across the change of step at 16 MiB and
 * across a word of the bitmap (lists 63 and 64: 78 and 80 MiB). */
static void test_best_fit_classes(void) {
    fresh();
    dev_event *ready;
    size_t sizes[] = {2 * MiB + 512 * 1024, 2 * MiB + 256 * 1024, 15 * MiB, 16 * MiB, 18 * MiB, 80 * MiB};
    void *p[6];
    for (int i = 0; i < 6; i++) p[i] = must_alloc(0, sizes[i], &ready);
    for (int i = 0; i < 6; i++) dev_free(0, p[i], NULL);
    CHECK(must_alloc(0, 2 * MiB + 1, &ready) == p[1]);          /* 2.25 before 2.5 */
    CHECK(must_alloc(0, 2 * MiB + 1, &ready) == p[0]);          /* then 2.5 */
    CHECK(must_alloc(0, 16 * MiB + 1, &ready) == p[4]);         /* 18 MiB: 15 and 16 too small */
    CHECK(must_alloc(0, 15 * MiB + 1, &ready) == p[3]);         /* 16 MiB */
    CHECK(must_alloc(0, 14 * MiB + 1, &ready) == p[2]);         /* 15 MiB */
    CHECK(must_alloc(0, 77 * MiB, &ready) == p[5]);             /* 78 MiB class, 80 MiB block */
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.cache_hits, 6);
    CHECK_EQ_LONG(s.num_device_allocs, 6);
    CHECK_EQ_LONG(s.allocated_bytes, s.reserved_bytes);
    for (int i = 0; i < 6; i++) dev_free(0, p[i], NULL);
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
}

static void test_best_fit_large(void) {
    fresh();
    dev_event *ready;
    void *a = must_alloc(0, 6 * MiB, &ready);
    void *b = must_alloc(0, 8 * MiB, &ready);
    void *c = must_alloc(0, 16 * MiB, &ready);
    dev_free(0, c, NULL);
    dev_free(0, b, NULL);
    dev_free(0, a, NULL);
    /* 4 MiB fits in 6 and 8 (at most twice its size): the smallest wins. */
    CHECK(must_alloc(0, 4 * MiB, &ready) == a);
    CHECK(must_alloc(0, 4 * MiB + 7, &ready) == b); /* -> 4.5 MiB; 8 <= 2 x 4.5 */
    /* 16 MiB is more than twice 4 MiB: not taken, the device is asked. */
    void *n = must_alloc(0, 4 * MiB, &ready);
    CHECK(n != c && n != a && n != b);
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.num_device_allocs, 4);
    CHECK_EQ_LONG(s.cache_hits, 2);
    CHECK_EQ_LONG(s.cache_misses, 4);
    /* ... and is reused by a request it fits (8 MiB + 1 -> 9 MiB; 16 <= 2 x 9),
     * not by one it does not (7 MiB + 1 -> 7.5 MiB; 16 > 2 x 7.5). */
    void *m = must_alloc(0, 7 * MiB + 1, &ready);
    CHECK(m != c);
    CHECK(must_alloc(0, 8 * MiB + 1, &ready) == c);
    dev_free(0, m, NULL);
    s = stats(0);
    CHECK_EQ_LONG(s.allocated_bytes, (6 + 8 + 4 + 16) * MiB); /* counted at block size */
    CHECK_EQ_LONG(s.reserved_bytes, s.allocated_bytes + 7 * MiB + 512 * 1024); /* m is cached */
    /* A large request never takes a larger small block, nor the reverse. */
    dev_free(0, n, NULL);
    void *small = must_alloc(0, 512 * 1024, &ready);
    CHECK(small != n);
    dev_free(0, small, NULL);
    void *l = must_alloc(0, 2 * MiB, &ready); /* 4 MiB block is within 2x: taken */
    CHECK(l == n);
    dev_free(0, l, NULL);
    dev_free(0, a, NULL);
    dev_free(0, b, NULL);
    dev_free(0, c, NULL);
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
    s = stats(0);
    CHECK_EQ_LONG(s.reserved_bytes, 0);
    CHECK_EQ_LONG(s.num_device_frees, s.num_device_allocs);
}

/* Blocks over 8 GiB live in a list of their own; the simulator maps them
 * without touching their pages, but sanitizers and valgrind would not. */
static void test_best_fit_huge(void) {
    if (TEST_UNDER_SANITIZER || under_valgrind()) SKIP("9 GiB blocks under a sanitizer or valgrind");
    fresh();
    dev_event *ready;
    void *a = NULL, *b = NULL;
    if (dev_alloc(0, 12ull << 30, &a, &ready, err, sizeof err) ||
        dev_alloc(0, 9ull << 30, &b, &ready, err, sizeof err)) {
        dev_free(0, a, NULL);
        SKIP("the host cannot map 21 GiB of address space");
    }
    dev_free(0, a, NULL);
    dev_free(0, b, NULL);
    CHECK(must_alloc(0, 8ull << 30, &ready) == b); /* 9 fits better than 12 */
    CHECK(must_alloc(0, 6ull << 30, &ready) == a); /* 12 <= 2 x 6 */
    dev_free(0, a, NULL);
    void *c = must_alloc(0, 5ull << 30, &ready);   /* 12 > 2 x 5 */
    CHECK(c != a);
    dev_free(0, b, NULL);
    dev_free(0, c, NULL);
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.cache_hits, 2);
    CHECK_EQ_LONG(s.num_device_allocs, 3);
    CHECK_EQ_LONG(s.reserved_bytes, (12ll + 9 + 5) << 30);
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
}

static void test_statistics(void) {
    fresh();
    dev_event *ready;
    void *a = must_alloc(1, MiB + 1, &ready); /* 1.125 MiB */
    void *b = must_alloc(1, 100, &ready);     /* 512 */
    void *c = must_alloc(1, 4 * MiB, &ready);
    ordo_gpu_memory_stats s = stats(1);
    int64_t all = 5 * MiB + 128 * 1024 + 512;
    CHECK_EQ_LONG(s.allocated_bytes, all);
    CHECK_EQ_LONG(s.reserved_bytes, all);
    CHECK_EQ_LONG(s.peak_allocated_bytes, all);
    CHECK_EQ_LONG(s.peak_reserved_bytes, all);
    CHECK_EQ_LONG(s.num_device_allocs, 3);
    CHECK_EQ_LONG(s.cache_misses, 3);
    CHECK_EQ_LONG(stats(0).num_device_allocs, 0); /* per device */

    dev_free(1, c, NULL);
    s = stats(1);
    CHECK_EQ_LONG(s.allocated_bytes, MiB + 128 * 1024 + 512);
    CHECK_EQ_LONG(s.reserved_bytes, all);
    CHECK_EQ_LONG(s.peak_allocated_bytes, all);

    c = must_alloc(1, 3 * MiB, &ready); /* the cached 4 MiB block */
    s = stats(1);
    CHECK_EQ_LONG(s.cache_hits, 1);
    CHECK_EQ_LONG(s.cache_misses, 3);
    CHECK_EQ_LONG(s.num_device_allocs, 3);
    CHECK_EQ_LONG(s.allocated_bytes, all);

    dev_free(1, a, NULL);
    dev_free(1, c, NULL);
    void *d = must_alloc(1, 10 * MiB, &ready); /* nothing fits: reserved grows */
    s = stats(1);
    CHECK_EQ_LONG(s.allocated_bytes, 10 * MiB + 512);
    CHECK_EQ_LONG(s.reserved_bytes, all + 10 * MiB);
    CHECK_EQ_LONG(s.peak_allocated_bytes, 10 * MiB + 512);
    CHECK_EQ_LONG(s.peak_reserved_bytes, all + 10 * MiB);

    CHECK_EQ_LONG(ordo_gpu_empty_cache(1), 0);
    s = stats(1);
    CHECK_EQ_LONG(s.reserved_bytes, s.allocated_bytes);
    CHECK_EQ_LONG(s.num_device_frees, 2);
    CHECK_EQ_LONG(s.peak_reserved_bytes, all + 10 * MiB);
    dev_free(1, b, NULL);
    dev_free(1, d, NULL);
    CHECK_EQ_LONG(ordo_gpu_empty_cache(1), 0);
    s = stats(1);
    CHECK_EQ_LONG(s.allocated_bytes, 0);
    CHECK_EQ_LONG(s.reserved_bytes, 0);
    CHECK_EQ_LONG(s.num_device_frees, s.num_device_allocs);
    CHECK_EQ_LONG(s.cache_hits + s.cache_misses, 5);
    CHECK_EQ_LONG(s.oom_retries, 0);
    CHECK_EQ_LONG(ordo_tensor_sizeof("ordo_gpu_memory_stats"), sizeof(ordo_gpu_memory_stats));
}

/* empty_cache gives blocks back to the device, each only after the work
 * pending on it has finished. */
static void test_empty_cache_returns_memory(void) {
    fresh();
    ordo_device_sim_configure(0, 64 * MiB);
    void *stream = new_stream(0);
    dev_event *ready;
    void *keep = must_alloc(0, 8 * MiB, &ready);
    void *a = must_alloc(0, 16 * MiB, &ready);
    void *b = must_alloc(0, 1000, &ready);
    slow_t slow;
    dev_free(0, a, slow_event(0, stream, &slow, 200));
    dev_free(0, b, NULL);
    size_t fr, total;
    B->mem_info(0, &fr, &total);
    CHECK_EQ_LONG(total, 64 * MiB);
    CHECK_EQ_LONG(fr, 64 * MiB - 24 * MiB - 1024);
    CHECK_EQ_LONG(atomic_load(&slow.done), 0);
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
    CHECK_EQ_LONG(atomic_load(&slow.done), 1); /* waited for the last use */
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.reserved_bytes, s.allocated_bytes);
    CHECK_EQ_LONG(s.allocated_bytes, 8 * MiB);
    CHECK_EQ_LONG(s.num_device_frees, 2);
    B->mem_info(0, &fr, &total);
    CHECK_EQ_LONG(fr, 56 * MiB);
    /* Empty again: nothing to do. */
    CHECK_EQ_LONG(dev_empty_cache(0, err, sizeof err), 0);
    CHECK_EQ_LONG(stats(0).num_device_frees, 2);
    dev_free(0, keep, NULL);
    B->stream_destroy(0, stream);
    fresh();
}

static void test_out_of_memory(void) {
    fresh();
    ordo_device_sim_configure(0, 8 * MiB);
    void *stream = new_stream(0);
    dev_event *ready;
    void *a = must_alloc(0, 4 * MiB, &ready);
    void *b = must_alloc(0, 2 * MiB, &ready);
    slow_t slow;
    dev_free(0, a, slow_event(0, stream, &slow, 50));
    dev_free(0, b, NULL);

    /* 6 MiB fits no cached block and not beside them: the cache is given
     * back (after a's last use) and the retry succeeds. */
    void *c = must_alloc(0, 6 * MiB - 3, &ready);
    CHECK(ready == NULL);
    CHECK_EQ_LONG(atomic_load(&slow.done), 1);
    ordo_gpu_memory_stats s = stats(0);
    CHECK_EQ_LONG(s.oom_retries, 1);
    CHECK_EQ_LONG(s.num_device_allocs, 3);
    CHECK_EQ_LONG(s.num_device_frees, 2);
    CHECK_EQ_LONG(s.allocated_bytes, 6 * MiB);
    CHECK_EQ_LONG(s.reserved_bytes, 6 * MiB);
    CHECK_EQ_LONG(s.peak_reserved_bytes, 6 * MiB);

    /* Really exhausted: nothing cached to give back; retried all the same
     * (on a real GPU another process may have freed memory), and counted. */
    void *p = (void *)1;
    ready = (dev_event *)1;
    CHECK_EQ_LONG(dev_alloc(0, 4 * MiB, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK(p == NULL && ready == NULL);
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 4.0 MiB (6.0 MiB in use by tensors, 0 B cached; "
                          "device: 2.0 MiB free of 8.0 MiB)") == 0,
              "message: %s", err);
    s = stats(0);
    CHECK_EQ_LONG(s.oom_retries, 2);
    CHECK_EQ_LONG(s.allocated_bytes, 6 * MiB);
    CHECK_EQ_LONG(s.num_device_allocs, 3);

    /* A cached block that does not fit is given back for one that does. */
    void *small = must_alloc(0, 100 * 1024, &ready);
    dev_free(0, small, NULL);
    p = must_alloc(0, 2 * MiB, &ready); /* 6 + 0.1 + 2 > 8 */
    s = stats(0);
    CHECK_EQ_LONG(s.oom_retries, 3);
    CHECK_EQ_LONG(s.reserved_bytes, 8 * MiB);
    void *q = NULL;
    CHECK_EQ_LONG(dev_alloc(0, 1, &q, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK_MSG(strstr(err, "allocating 1 B (rounded to 512 B; 8.0 MiB in use by tensors, 0 B cached; device: 0 B free "
                          "of 8.0 MiB)"),
              "message: %s", err);
    CHECK_EQ_LONG(stats(0).oom_retries, 4);
    dev_free(0, p, NULL);
    dev_free(0, c, NULL);
    B->stream_destroy(0, stream);
    fresh();
}

/* The message gives bytes where the request, or its block, and the free
 * memory would print the same ("allocating 8.0 MiB ... 8.0 MiB free"). */
static void test_out_of_memory_message_precision(void) {
    fresh();
    ordo_device_sim_configure(0, 8 * MiB);
    dev_event *ready;
    void *tiny = must_alloc(0, 100, &ready); /* 512 B: 8 MiB - 512 B free */
    void *p = NULL;
    CHECK_EQ_LONG(dev_alloc(0, 8 * MiB, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 8388608 bytes (512 B in use by tensors, 0 B cached; "
                          "device: 8388096 bytes free of 8.0 MiB)") == 0,
              "message: %s", err);
    void *m = must_alloc(0, MiB - 512, &ready); /* 7 MiB free */
    CHECK_EQ_LONG(dev_alloc(0, 7 * MiB + 1, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 7340033 bytes (rounded to 7864320 bytes; 1.0 MiB in use "
                          "by tensors, 0 B cached; device: 7340032 bytes free of 8.0 MiB)") == 0,
              "message: %s", err);
    /* Just under a unit prints in that unit. */
    CHECK_EQ_LONG(dev_alloc(0, 8 * MiB - 4, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK_MSG(strstr(err, "allocating 8.0 MiB (1.0 MiB in use by tensors") != NULL, "message: %s", err);
    /* Numbers that print differently stay short. */
    CHECK_EQ_LONG(dev_alloc(0, 7 * MiB + 512 * 1024, &p, &ready, err, sizeof err), ORDO_ERR_NOMEM);
    CHECK_MSG(strcmp(err, "gpu(0): out of memory allocating 7.5 MiB (1.0 MiB in use by tensors, 0 B cached; "
                          "device: 7.0 MiB free of 8.0 MiB)") == 0,
              "message: %s", err);
    CHECK(p == NULL);
    dev_free(0, tiny, NULL);
    dev_free(0, m, NULL);
    fresh();
}

/* ------------------------------------------------------------------ */
/* Stress: threads allocate, fill and free blocks of random sizes while
 * "kernels" on their streams check the blocks after the host freed them. */

#define SLOTS 16
#define NTHREADS 4

static atomic_long bad_on_stream; /* a stream-side check saw a block overwritten */

typedef struct {
    unsigned char *p;
    size_t n;
    unsigned char v;
} check_arg;

/* 1 when every byte of p[0..n) is v (p[0] == v and the block equals itself
 * shifted by one). */
static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
    return p[0] == v && (n == 1 || memcmp(p, p + 1, n - 1) == 0);
}

static void stream_check(void *arg) {
    check_arg *c = arg;
    if (!all_bytes(c->p, c->n, c->v)) atomic_fetch_add(&bad_on_stream, 1);
    free(c);
}

static void stream_fill(void *arg) {
    check_arg *c = arg;
    memset(c->p, c->v, c->n);
    free(c);
}

static int queue(int dev, void *stream, void (*fn)(void *), unsigned char *p, size_t n, unsigned char v) {
    check_arg *c = malloc(sizeof *c);
    if (!c) return 1;
    c->p = p, c->n = n, c->v = v;
    char e[256];
    if (B->host_fn(dev, stream, fn, c, e, sizeof e)) {
        free(c);
        return 1;
    }
    return 0;
}

typedef struct {
    int id, dev;
    long ops;
    long allocs, nomem, errors, bad_on_host;
    char first_error[256];
} stress_arg;

static void *stress_main(void *arg) {
    stress_arg *t = arg;
    rng_t g;
    rng_init(&g, test_seed() + 77 * (uint64_t)t->id);
    char e[256];
    void *stream = NULL;
    if (B->stream_create(t->dev, &stream, e, sizeof e)) {
        t->errors++;
        snprintf(t->first_error, sizeof t->first_error, "%s", e);
        return NULL;
    }
    struct {
        unsigned char *p;
        size_t n;
        int on_stream; /* filled by the stream, not the host */
    } slot[SLOTS];
    memset(slot, 0, sizeof slot);
    for (long i = 0; i < t->ops + SLOTS; i++) {
        /* The last SLOTS rounds free whatever is still held. */
        int k = i < t->ops ? rng_range(&g, 0, SLOTS - 1) : (int)(i - t->ops);
        unsigned char v = (unsigned char)(1 + t->id * SLOTS + k); /* distinct per holder */
        if (slot[k].p) {
            /* Host-filled blocks are checked here; every block is checked
             * again by a "kernel" queued on the stream, which may run after
             * the block went back to the cache - its event protects it. */
            if (!slot[k].on_stream && !all_bytes(slot[k].p, slot[k].n, v)) t->bad_on_host++;
            dev_event *last = NULL;
            if (slot[k].on_stream || rng_range(&g, 0, 3) != 0) {
                if (queue(t->dev, stream, stream_check, slot[k].p, slot[k].n, v)) t->errors++;
                if (!(last = dev_event_record(t->dev, stream, e, sizeof e))) {
                    t->errors++;
                    B->device_sync(t->dev, e, sizeof e); /* nothing may be pending without an event */
                }
            }
            dev_free(t->dev, slot[k].p, last);
            slot[k].p = NULL;
            continue;
        }
        if (i >= t->ops) continue;
        size_t n = rng_range(&g, 0, 4) == 0 ? (size_t)rng_range(&g, 1 << 20, 6 << 20)
                                            : (size_t)rng_range(&g, 1, 64 << 10);
        void *p = NULL;
        dev_event *ready = NULL;
        int rc = dev_alloc(t->dev, n, &p, &ready, e, sizeof e);
        if (rc == ORDO_ERR_NOMEM) {
            t->nomem++;
            continue;
        }
        if (rc) {
            if (!t->errors++) snprintf(t->first_error, sizeof t->first_error, "%s", e);
            continue;
        }
        t->allocs++;
        slot[k].p = p;
        slot[k].n = n;
        slot[k].on_stream = rng_range(&g, 0, 1);
        if (slot[k].on_stream) {
            /* Device-side first use: the stream waits for the previous
             * user's event, then "a kernel" fills the block. */
            if (ready && dev_event_wait(ready, stream, e, sizeof e)) t->errors++;
            if (queue(t->dev, stream, stream_fill, p, n, v)) t->errors++;
        } else {
            if (ready && dev_event_sync(ready, e, sizeof e)) t->errors++;
            memset(p, v, n);
        }
        dev_event_unref(ready);
    }
    B->stream_destroy(t->dev, stream); /* runs what is still queued */
    return NULL;
}

static void test_threads_stress(void) {
    fresh();
    /* Tight enough that the cache often has to be given back. */
    ordo_device_sim_configure(2000, 48 * MiB);
    atomic_store(&bad_on_stream, 0);
    stress_arg t[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].id = i;
        t[i].dev = i % NDEV;
        t[i].ops = scaled(10000, 500);
        CHECK(pthread_create(&th[i], NULL, stress_main, &t[i]) == 0);
    }
    long allocs = 0, nomem = 0, attempts[NDEV] = {0};
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(t[i].errors == 0, "thread %d: %ld errors, first: %s", i, t[i].errors, t[i].first_error);
        CHECK_EQ_LONG(t[i].bad_on_host, 0);
        allocs += t[i].allocs;
        nomem += t[i].nomem;
        attempts[t[i].dev] += t[i].allocs + t[i].nomem;
    }
    CHECK_EQ_LONG(atomic_load(&bad_on_stream), 0);
    long retries = 0;
    for (int d = 0; d < NDEV; d++) {
        ordo_gpu_memory_stats s = stats(d);
        CHECK_EQ_LONG(s.allocated_bytes, 0);
        CHECK_EQ_LONG(s.cache_hits + s.cache_misses, attempts[d]);
        CHECK(s.peak_reserved_bytes <= (int64_t)(48 * MiB));
        CHECK(s.peak_allocated_bytes <= s.peak_reserved_bytes);
        CHECK(s.num_device_allocs - s.num_device_frees > 0 || s.reserved_bytes == 0);
        retries += s.oom_retries;
        printf("    gpu(%d): %ld hits, %ld misses, %ld device allocs, %ld retries after OOM, peak %.1f MiB\n", d,
               (long)s.cache_hits, (long)s.cache_misses, (long)s.num_device_allocs, (long)s.oom_retries,
               (double)s.peak_reserved_bytes / MiB);
        CHECK_EQ_LONG(dev_empty_cache(d, err, sizeof err), 0);
        s = stats(d);
        CHECK_EQ_LONG(s.reserved_bytes, 0);
        CHECK_EQ_LONG(s.num_device_frees, s.num_device_allocs);
        size_t fr, total;
        B->mem_info(d, &fr, &total);
        CHECK_EQ_LONG(fr, total); /* every byte back on the device */
    }
    printf("    %d threads: %ld blocks held and checked, %ld retries after out of memory, %ld failed\n", NTHREADS,
           allocs, retries, nomem);
    CHECK(allocs > nomem);
    fresh();
}

int main(void) {
    ordo_device_use_simulated(NDEV);
    B = ordo_device_backend();
    if (!B || strcmp(B->name, "simulated") != 0) {
        printf("not ok - the simulated device is not the backend\n");
        printf("0 passed, 1 failed, 0 skipped\n");
        return 1;
    }
    TEST_T(test_bad_device_ids, 60);
    TEST_T(test_reuse_hands_over_event, 60);
    TEST_T(test_size_rounding, 60);
    TEST_T(test_size_classes_bound_waste, 60);
    TEST_T(test_waste_fits_device, 60);
    TEST_T(test_best_fit_classes, 60);
    TEST_T(test_best_fit_large, 60);
    TEST_T(test_best_fit_huge, 60);
    TEST_T(test_statistics, 60);
    TEST_T(test_empty_cache_returns_memory, 60);
    TEST_T(test_out_of_memory, 60);
    TEST_T(test_out_of_memory_message_precision, 60);
    TEST_T(test_threads_stress, 240);
    dev_alloc_shutdown();
    dev_event_pool_clear();
    return harness_end();
}
