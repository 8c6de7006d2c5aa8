/*
 * tensor_bench_c.c - the C peers of bench/tensor_bench.lua.
 *
 *   tensor_bench_c kernel_add16 N     the registered "add" kernel called directly, N times, 16 floats
 *   tensor_bench_c push_add16 N [BULK] ordo_tensor_op2(add) from C through the engine (then one wait),
 *                                     this thread bulking BULK ops (ordo_set_bulk_size; default 0, off)
 *   tensor_bench_c push_add16_turns N  the same over 64 pairs (c, a) in turn: each push is of other
 *                                     tensors than the last 63, none found in the push's memo
 *   tensor_bench_c binary_add16 N [BULK] c = a + b through ordo_tensor_binary, a new tensor each
 *                                     time, freed 1,000 ops later (as a GC would); bulking as above
 *   tensor_bench_c sgemm N REPS       cblas_sgemm on NxN float32, best of REPS (OpenBLAS's threads)
 *   tensor_bench_c sgemm1 N REPS      the same on one thread (as ordo's matmul kernel runs it)
 *   tensor_bench_c sgemm1_fresh_out N REPS
 *                                     the same, each rep writing into freshly mapped pages (an
 *                                     output tensor allocated before the allocator caches any)
 *   tensor_bench_c copy N REPS        a plain copy loop over N floats, best of REPS
 *   tensor_bench_c add N REPS         a plain c[i] += a[i] loop over N floats, best of REPS
 *
 * Each prints one line "name value unit" that tensor_bench.lua reads.
 * Built by tensor_bench.lua itself (cc -O3 ... build/libordo.a -lopenblas).
 */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ordo_tensor.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* A 16-float cpu(0) tensor on the default engine, filled with v. */
static ordo_tensor *filled16(float v) {
    int64_t shape[1] = {16};
    ordo_ctx cpu = {ORDO_CPU, 0};
    ordo_tensor *t = ordo_tensor_empty(NULL, ORDO_F32, 1, shape, cpu);
    if (!t) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    ordo_tensor_op1(ordo_tensor_kernel_id("fill"), "fill_", t, NULL, v);
    return t;
}

static void view1(ordo_view *v, float *p, int64_t n) {
    memset(v, 0, sizeof *v);
    v->data = p;
    v->dtype = ORDO_F32;
    v->ndim = 1;
    v->shape[0] = n;
    v->strides[0] = 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s kernel_add16|push_add16|push_add16_turns|binary_add16|sgemm|sgemm1|sgemm1_fresh_out|copy|add N [REPS]\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 5;

    if (!strcmp(mode, "kernel_add16")) {
        ordo_kernel_fn fn = ordo_kernel_lookup("add", ORDO_CPU);
        if (!fn) return 1;
        float a[16], c[16];
        for (int i = 0; i < 16; i++) a[i] = 1, c[i] = 0;
        ordo_kernel_args args;
        memset(&args, 0, sizeof args);
        args.nin = 2;
        args.nout = 1;
        view1(&args.in[0], c, 16);
        view1(&args.in[1], a, 16);
        view1(&args.out[0], c, 16);
        ordo_run_ctx rc = {{ORDO_CPU, 0}, NULL, -1, NULL, NULL};
        for (long i = 0; i < 10000; i++) fn(&rc, &args);
        double t0 = now();
        for (long i = 0; i < n; i++) fn(&rc, &args);
        double t1 = now();
        printf("kernel_add16 %.1f ns/op (c[0] = %.0f)\n", (t1 - t0) / (double)n * 1e9, c[0]);
        return 0;
    }
    if (!strcmp(mode, "push_add16")) {
        ordo_tensor *a = filled16(1), *c = filled16(0);
        int kadd = ordo_tensor_kernel_id("add");
        ordo_set_bulk_size(argc > 3 ? atoi(argv[3]) : 0);
        for (int i = 0; i < 10000; i++) ordo_tensor_op2(kadd, "add_", c, c, a);
        ordo_wait_for_all(ordo_engine_default());
        double t0 = now();
        for (long i = 0; i < n; i++) ordo_tensor_op2(kadd, "add_", c, c, a);
        ordo_tensor_wait(c);
        double t1 = now();
        printf("push_add16 %.1f ns/op (c[0] = %.0f)\n", (t1 - t0) / (double)n * 1e9, *(float *)ordo_tensor_data(c));
        ordo_tensor_free(a);
        ordo_tensor_free(c);
        return 0;
    }
    if (!strcmp(mode, "push_add16_turns")) {
        enum { PAIRS = 64 };
        ordo_tensor *a[PAIRS], *c[PAIRS];
        for (int j = 0; j < PAIRS; j++) a[j] = filled16(1), c[j] = filled16(0);
        int kadd = ordo_tensor_kernel_id("add");
        for (int i = 0; i < 10000; i++) ordo_tensor_op2(kadd, "add_", c[i % PAIRS], c[i % PAIRS], a[i % PAIRS]);
        ordo_wait_for_all(ordo_engine_default());
        double t0 = now();
        for (long i = 0; i < n; i++) ordo_tensor_op2(kadd, "add_", c[i % PAIRS], c[i % PAIRS], a[i % PAIRS]);
        ordo_wait_for_all(ordo_engine_default());
        double t1 = now();
        printf("push_add16_turns %.1f ns/op (c[0] = %.0f)\n", (t1 - t0) / (double)n * 1e9,
               *(float *)ordo_tensor_data(c[0]));
        for (int j = 0; j < PAIRS; j++) ordo_tensor_free(a[j]), ordo_tensor_free(c[j]);
        return 0;
    }
    if (!strcmp(mode, "binary_add16")) {
        /* c = a + b into a new tensor each time, dropped 1,000 ops later
         * (as a garbage collector would drop it: after its op has run). */
        enum { LAG = 1000 };
        ordo_tensor *a = filled16(1), *b = filled16(2);
        int kadd = ordo_tensor_kernel_id("add");
        ordo_set_bulk_size(argc > 3 ? atoi(argv[3]) : 0);
        ordo_tensor *ring[LAG] = {0};
        double t0 = 0;
        for (long i = 0; i < n + 10000; i++) {
            if (i == 10000) { /* warmed up */
                ordo_wait_for_all(ordo_engine_default());
                t0 = now();
            }
            ordo_tensor *c = ordo_tensor_binary(kadd, "add", a, b, ORDO_F32);
            if (!c) return 1;
            ordo_tensor_free(ring[i % LAG]);
            ring[i % LAG] = c;
        }
        ordo_wait_for_all(ordo_engine_default());
        double t1 = now();
        float v = *(float *)ordo_tensor_data(ring[0]);
        for (int i = 0; i < LAG; i++) ordo_tensor_free(ring[i]);
        printf("binary_add16 %.1f ns/op (c[0] = %.0f)\n", (t1 - t0) / (double)n * 1e9, v);
        ordo_tensor_free(a);
        ordo_tensor_free(b);
        return 0;
    }
    if (!strcmp(mode, "sgemm") || !strcmp(mode, "sgemm1") || !strcmp(mode, "sgemm1_fresh_out")) {
        const int fresh = !strcmp(mode, "sgemm1_fresh_out");
        if (strcmp(mode, "sgemm")) openblas_set_num_threads(1);
        const size_t bytes = (size_t)n * n * 4;
        float *a = xalloc(bytes), *b = xalloc(bytes), *c = xalloc(bytes);
        for (long i = 0; i < n * n; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f, c[i] = 0;
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) {
            /* mmap, not malloc: glibc may hand back pages it already touched */
            float *out = fresh ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : c;
            if (out == MAP_FAILED) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            double t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n,
                        0.0f, out, (int)n);
            double t = now() - t0;
            if (fresh) munmap(out, bytes);
            if (r > 0 && t < best) best = t; /* the first run warms up BLAS's threads */
        }
        printf("%s %.3f ms\n", mode, best * 1e3);
        free(a), free(b), free(c);
        return 0;
    }
    if (!strcmp(mode, "copy") || !strcmp(mode, "add")) {
        /* restrict + -O3: the loops vectorize and are bound by memory, not by the core */
        float *restrict a = xalloc((size_t)n * 4), *restrict c = xalloc((size_t)n * 4);
        for (long i = 0; i < n; i++) a[i] = (float)i, c[i] = 0;
        int add = !strcmp(mode, "add");
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            if (add)
                for (long i = 0; i < n; i++) c[i] += a[i];
            else
                for (long i = 0; i < n; i++) c[i] = a[i];
            __asm__ volatile("" ::"r"(c) : "memory");
            double t = now() - t0;
            if (t < best) best = t;
        }
        /* bytes moved: copy reads 1 array and writes 1, add reads 2 and writes 1 */
        double bytes = (add ? 3.0 : 2.0) * (double)n * 4;
        printf("%s %.3f ms %.2f GB/s\n", mode, best * 1e3, bytes / best / 1e9);
        free(a), free(c);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
