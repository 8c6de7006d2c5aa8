/*
 * cuda_runtime.h (emulation) - the part of the CUDA runtime and of the
 * device language that ordo's CUDA kernels use, for compiling them as host
 * C++ (see ../README.md).  Only built into the emulation library
 * (make CUDA=emu); the real toolkit's header is never mixed with this one.
 *
 * Device code becomes host code: __global__/__device__ vanish, a block's
 * threads are coroutines on one host thread (so __shared__ is a
 * thread-local static and __syncthreads a switch back to the block's
 * scheduler), and a launch K<<<grid, block, smem, stream>>>(args), which
 * the build rewrites to ordo_emu::launch_cfg(...).run(...), queues the whole
 * grid on the simulated device's stream (src/device_sim.c).
 */
#ifndef ORDO_EMU_CUDA_RUNTIME_H
#define ORDO_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__
#define __shared__ static thread_local
#define __constant__
#define __launch_bounds__(...)

/* CUDA's erfinv / erfinvf, which the host's libm lacks: the CPU kernel's */
#include "../../../cpu/erfinv.h"
static inline double erfinv(double a) { return ordo_erfinv(a); }
static inline float erfinvf(float a) { return (float)ordo_erfinv((double)a); }

/* ---- types ------------------------------------------------------------------ */

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 { unsigned x, y, z; };
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };

typedef struct ordo_emu_stream *cudaStream_t; /* a simulated stream */

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchFailure = 719
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

/* ---- the built-in variables: set per coroutine by the block scheduler ----- */

namespace ordo_emu {
extern thread_local uint3 thread_idx_, block_idx_;
extern thread_local dim3 block_dim_, grid_dim_;
uint3 thread_idx();
uint3 block_idx();
dim3 block_dim();
dim3 grid_dim();
} // namespace ordo_emu

#if defined(__SANITIZE_THREAD__)
/* (make check-cuda-emu-tsan) read through functions ThreadSanitizer does
 * not watch: the scheduler sets them between the fibers it switches
 * without synchronising them, which TSan would take for races. */
#define threadIdx (ordo_emu::thread_idx())
#define blockIdx (ordo_emu::block_idx())
#define blockDim (ordo_emu::block_dim())
#define gridDim (ordo_emu::grid_dim())
#else
#define threadIdx ordo_emu::thread_idx_
#define blockIdx ordo_emu::block_idx_
#define blockDim ordo_emu::block_dim_
#define gridDim ordo_emu::grid_dim_
#endif

/* ---- runtime API ------------------------------------------------------------- */

cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t st);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t st);
cudaError_t cudaFreeAsync(void *p, cudaStream_t st);

/* ---- device functions -------------------------------------------------------- */

/* file and line: where the barrier is (the threads of a block must all
 * wait at the same one) */
void ordo_emu_syncthreads(const char *file, int line);
#define __syncthreads() ordo_emu_syncthreads(__FILE__, __LINE__)
#if defined(__SANITIZE_THREAD__)
/* TSan does not model fences; the kernels fence only before an atomic,
 * which is sequentially consistent here and orders the writes anyway. */
static inline void __threadfence_system(void) {}
#else
static inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

/* The block's threads share one host thread, but two streams (two host
 * threads) may run kernels on one buffer: the atomics are real ones. */
static inline int atomicCAS(int *p, int expected, int desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline unsigned atomicCAS(unsigned *p, unsigned expected, unsigned desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long expected,
                                           unsigned long long desired) {
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}
static inline int atomicExch(int *p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <typename F, typename W>
static inline F ordo_emu_atomic_add_float(F *p, F v) {
    static_assert(sizeof(F) == sizeof(W), "word size");
    W old = __atomic_load_n((W *)p, __ATOMIC_SEQ_CST), nw;
    F f;
    do {
        memcpy(&f, &old, sizeof f);
        const F sum = f + v;
        memcpy(&nw, &sum, sizeof nw);
    } while (!__atomic_compare_exchange_n((W *)p, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    return f;
}
static inline float atomicAdd(float *p, float v) { return ordo_emu_atomic_add_float<float, uint32_t>(p, v); }
static inline double atomicAdd(double *p, double v) { return ordo_emu_atomic_add_float<double, uint64_t>(p, v); }

/* Bit casts and the explicitly rounded arithmetic (the emulation library is
 * built with -ffp-contract=off, so nothing is fused behind their back). */
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }

/* ---- launches ----------------------------------------------------------------- */

namespace ordo_emu {

/* One launch: run_thread runs the kernel for the thread the built-in
 * variables name. */
struct grid_job {
    dim3 grid, block;
    cudaStream_t stream;
    int dev;
    virtual void run_thread() = 0;
    virtual ~grid_job() {}
};

/* Checks the configuration as CUDA does (a bad one sets the last error and
 * runs nothing), then queues the job on the stream; the stream's thread
 * deletes it after the grid ran. */
void submit(grid_job *job, cudaStream_t st, size_t smem);

struct launch_cfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t st;
    launch_cfg(dim3 g, dim3 b, size_t s = 0, cudaStream_t stream = 0) : grid(g), block(b), smem(s), st(stream) {}

    /* k: a generic lambda calling the kernel with its arguments; the
     * arguments are evaluated now and copied, as a launch copies them into
     * the kernel's parameters. */
    template <class K, class... A>
    void run(K k, A &&...args) const {
        struct job : grid_job {
            K k;
            std::tuple<typename std::decay<A>::type...> a;
            job(K k_, A &&...x) : k(k_), a(std::forward<A>(x)...) {}
            void run_thread() override { std::apply(k, a); }
        };
        /* CUDA copies a launch's arguments into a parameter buffer of at
         * most 4 KiB (32,764 bytes from CUDA 12.1 on Volta and later, which
         * the build need not have): a larger one does not compile there */
        static_assert(sizeof(std::tuple<typename std::decay<A>::type...>) <= 4096,
                      "kernel arguments over 4 KiB: pass a pointer to device memory instead");
        job *j = new job(k, std::forward<A>(args)...);
        j->grid = grid;
        j->block = block;
        submit(j, st, smem);
    }
};

} // namespace ordo_emu

#endif
