/*
 * gpu_peer.cu - the plain-CUDA peer of bench/gpu_bench.lua: the same GPU
 * work with no engine, no Lua, no ordo.
 *
 *   gpu_peer [MATMUL_N [ADD_N [CHAIN_N [REPS [CHAIN_REPS]]]]]
 *            defaults 4096 268435456 100000 20 5
 *
 *  (a) cublasSgemm, MATMUL_N^3 float32, row-major C = A B (asked of cuBLAS
 *      as C^T = B^T A^T, as kernels/cuda/matmul.cu does), default math mode:
 *        matmulN_ms       one sgemm between two events, median of REPS
 *        matmulN_host_ms  one sgemm + cudaStreamSynchronize, host clock, median
 *        matmulN_x10_ms   10 sgemms back to back between events, per sgemm, median
 *                         of max(3, (REPS + 3) / 4) runs
 *  (b) bandwidth over ADD_N floats (1 GiB at the default):
 *        copy_gbs  cudaMemcpy device to device, bytes read + written / time, median
 *        add_gbs   c[i] += a[i] (c read, a read, c written: 3 x the bytes) / time,
 *                  median; add_ms its time.  The kernel is shaped like ordo's
 *                  contiguous elementwise kernel (kernels/cuda/cuda_elementwise.cuh):
 *                  256 threads, ceil(n / 256) blocks capped at 65535 * 8, a
 *                  grid-stride loop with a 64-bit index.
 *  (c) CHAIN_N launches of that add kernel on 16 floats (c += a), one
 *      stream, then one cudaStreamSynchronize, host clock:
 *        chain_ops_per_s  launches per second, median of CHAIN_REPS runs
 *
 * Every measurement is preceded by warm-up runs.  Output: one line per
 * figure, "peer <key> <value>", flushed as it is measured, and first
 * "peer device <name>" and "peer device_info ...".  Without a usable CUDA
 * device (cudaGetDeviceCount fails or gives 0) it prints one line,
 * "GPU benchmarks skipped: no CUDA device available", and exits 0.
 * Any other CUDA or cuBLAS failure: a message on stderr, exit status 1.
 *
 * Built by bench/Makefile (nvcc ... -lcublas) when nvcc is found.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "gpu_peer: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                    __LINE__);                                                                      \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

#define CKB(call)                                                                                   \
    do {                                                                                            \
        cublasStatus_t s_ = (call);                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
            fprintf(stderr, "gpu_peer: %s failed: %s (%s:%d)\n", #call, cublasGetStatusString(s_), __FILE__, \
                    __LINE__);                                                                      \
            exit(1);                                                                                \
        }                                                                                           \
    } while (0)

static const int THREADS = 256; /* CU_THREADS */

static unsigned blocks_for(int64_t n) { /* cu_blocks */
    int64_t b = (n + THREADS - 1) / THREADS;
    if (b < 1) b = 1;
    if (b > 65535 * 8) b = 65535 * 8;
    return (unsigned)b;
}

__global__ void add_inplace(int64_t n, float *c, const float *a) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
        c[i] = c[i] + a[i];
}

/* Values in [0, 1) from a hash of the index: no cuRAND needed. */
__global__ void fill_hash(int64_t n, float *p, uint32_t seed) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        p[i] = (float)(x >> 8) * (1.0f / 16777216.0f);
    }
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static float *dev_floats(int64_t n, uint32_t seed, cudaStream_t st) {
    float *p = nullptr;
    CK(cudaMalloc(&p, (size_t)n * sizeof(float)));
    fill_hash<<<blocks_for(n), THREADS, 0, st>>>(n, p, seed);
    CK(cudaGetLastError());
    return p;
}

static void put(const char *key, double v) {
    printf("peer %s %.6g\n", key, v);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const int64_t mm_n = argc > 1 ? atoll(argv[1]) : 4096;
    const int64_t add_n = argc > 2 ? atoll(argv[2]) : (int64_t)256 << 20;
    const long chain_n = argc > 3 ? atol(argv[3]) : 100000;
    const int reps = argc > 4 ? atoi(argv[4]) : 20;
    const int chain_reps = argc > 5 ? atoi(argv[5]) : 5;
    if (mm_n < 1 || mm_n > 46340 || add_n < 1 || chain_n < 1 || reps < 1 || chain_reps < 1) {
        fprintf(stderr, "usage: %s [MATMUL_N [ADD_N [CHAIN_N [REPS [CHAIN_REPS]]]]]\n", argv[0]);
        return 2;
    }

    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        printf("GPU benchmarks skipped: no CUDA device available\n");
        return 0;
    }
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("peer device %s\n", prop.name);
    printf("peer device_info sm_%d%d, %d SMs, %.1f GiB\n", prop.major, prop.minor, prop.multiProcessorCount,
           (double)prop.totalGlobalMem / (1 << 30));
    printf("peer sizes matmul_n=%lld add_n=%lld chain_n=%ld reps=%d chain_reps=%d\n", (long long)mm_n,
           (long long)add_n, chain_n, reps, chain_reps);
    fflush(stdout);

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    char key[64];

    /* ---- (a) sgemm ---- */
    {
        const int n = (int)mm_n;
        const int64_t nn = mm_n * mm_n;
        float *A = dev_floats(nn, 1, st), *B = dev_floats(nn, 2, st), *Cm = nullptr;
        CK(cudaMalloc(&Cm, (size_t)nn * sizeof(float)));
        cublasHandle_t h;
        CKB(cublasCreate(&h));
        CKB(cublasSetStream(h, st));
        const float one = 1.0f, zero = 0.0f;
        /* row-major C = A B is column-major C^T = B^T A^T: gemm(B, A) */
        auto sgemm = [&]() { CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, n, A, n, &zero, Cm, n)); };
        for (int i = 0; i < 3; i++) sgemm();
        CK(cudaStreamSynchronize(st));

        std::vector<double> ev, host, x10;
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, st));
            sgemm();
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ev.push_back(ms);
        }
        for (int r = 0; r < reps; r++) {
            const double t0 = now_s();
            sgemm();
            CK(cudaStreamSynchronize(st));
            host.push_back((now_s() - t0) * 1e3);
        }
        for (int r = 0; r < std::max(3, (reps + 3) / 4); r++) {
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < 10; i++) sgemm();
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            x10.push_back(ms / 10);
        }
        snprintf(key, sizeof key, "matmul%lld_ms", (long long)mm_n);
        put(key, median(ev));
        snprintf(key, sizeof key, "matmul%lld_host_ms", (long long)mm_n);
        put(key, median(host));
        snprintf(key, sizeof key, "matmul%lld_x10_ms", (long long)mm_n);
        put(key, median(x10));
        CKB(cublasDestroy(h));
        CK(cudaFree(A));
        CK(cudaFree(B));
        CK(cudaFree(Cm));
    }

    /* ---- (b) copy and add bandwidth ---- */
    {
        const size_t bytes = (size_t)add_n * sizeof(float);
        float *a = dev_floats(add_n, 3, st), *c = dev_floats(add_n, 4, st);
        CK(cudaStreamSynchronize(st));
        /* cudaMemcpy (not Async) as asked: it runs on the legacy default stream */
        for (int i = 0; i < 3; i++) CK(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaDeviceSynchronize());
        std::vector<double> copy;
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, 0));
            CK(cudaMemcpy(c, a, bytes, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            copy.push_back(2.0 * (double)bytes / (ms * 1e-3) / 1e9);
        }
        put("copy_gbs", median(copy));

        const unsigned nb = blocks_for(add_n);
        for (int i = 0; i < 3; i++) add_inplace<<<nb, THREADS, 0, st>>>(add_n, c, a);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(st));
        std::vector<double> add, add_ms;
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(e0, st));
            add_inplace<<<nb, THREADS, 0, st>>>(add_n, c, a);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            CK(cudaGetLastError());
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            add_ms.push_back(ms);
            add.push_back(3.0 * (double)bytes / (ms * 1e-3) / 1e9);
        }
        put("add_gbs", median(add));
        put("add_ms", median(add_ms));
        CK(cudaFree(a));
        CK(cudaFree(c));
    }

    /* ---- (c) a chain of tiny launches on one stream ---- */
    {
        float *a = dev_floats(16, 5, st), *c = dev_floats(16, 6, st);
        const unsigned nb = blocks_for(16);
        for (int i = 0; i < 10000; i++) add_inplace<<<nb, THREADS, 0, st>>>(16, c, a);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(st));
        std::vector<double> ops;
        for (int r = 0; r < chain_reps; r++) {
            const double t0 = now_s();
            for (long i = 0; i < chain_n; i++) add_inplace<<<nb, THREADS, 0, st>>>(16, c, a);
            CK(cudaStreamSynchronize(st));
            const double t = now_s() - t0;
            CK(cudaGetLastError());
            ops.push_back((double)chain_n / t);
        }
        put("chain_ops_per_s", median(ops));
        CK(cudaFree(a));
        CK(cudaFree(c));
    }

    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(st));
    return 0;
}
