/*
 * cuda_internal.cuh - shared helpers of the CUDA kernels (the .cu files beside it).
 *
 * A CUDA kernel registered with ordo_kernel_register(name, ORDO_GPU, fn) is
 * a host function with the CPU kernels' ABI (src/ordo_kernel.h): it runs on
 * a GPU worker thread, sees the same views (their data pointers are device
 * pointers), validates them on the host with the CPU kernels' checks
 * (kernels/cpu/cpu_internal.h: same messages on both devices), and queues
 * its work on the worker's stream, rc->stream.  It never synchronises: the
 * engine orders ops across streams with CUDA events (DESIGN section 2).
 *
 * Errors that depend on the data (an index out of range, an integer
 * division by zero) are found only on the device.  A kernel that can find
 * one takes its op's own error slot (cu_error_slot_op, error_slots.cu) and
 * reports there (cu_report); the engine holds the op back until its work
 * has run and the host has read the slot (ordo_gpu_check_after), so the
 * failure is that op's: its outputs carry it, its dependants are skipped.
 * The device-wide slot (cu_error_slot_device) is for the random kernels'
 * "never seeded" misuse alone, which is not worth a check per random op:
 * it fails the next host wait on the device, as CUDA reports asynchronous
 * errors, but without losing the context.
 */
#ifndef ORDO_CUDA_INTERNAL_CUH
#define ORDO_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

extern "C" {
#include "../cpu/cpu_internal.h"
}

/* ---- the worker's stream ------------------------------------------------ */

static inline cudaStream_t cu_stream(const ordo_run_ctx *rc) { return (cudaStream_t)rc->stream; }

/* After queuing kernels: a launch error (bad configuration, no kernel image
 * for this GPU) fails the op, naming the kernel. */
static inline int cu_check_launch(const ordo_run_ctx *rc, const char *kernel) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    return ordo_fail(rc, "%s: CUDA launch failed: %s", kernel, cudaGetErrorString(e));
}

/* Stream-ordered scratch memory for a kernel (cudaMallocAsync on the op's
 * stream; give it back with cudaFreeAsync on the same stream).  It comes
 * from the device memory that the caching allocator (src/dev_alloc.c) may
 * hold in cached blocks: on a full device those go back to CUDA
 * (dev_empty_cache_quiet: not ordo_gpu_empty_cache, whose waits report the
 * device's pending failure, another op's, which would then be lost) and
 * the allocation is tried once more, as a tensor's allocation is.  0, or
 * nonzero with the thread's last error cleared (an out-of-memory is no
 * launch failure of the op's). */
extern "C" int dev_empty_cache_quiet(int dev_id);
static inline int cu_scratch_alloc(const ordo_run_ctx *rc, void **p, size_t bytes) {
    cudaError_t e = cudaMallocAsync(p, bytes, cu_stream(rc));
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        dev_empty_cache_quiet(rc->ctx.dev_id);
        e = cudaMallocAsync(p, bytes, cu_stream(rc));
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return 1;
    }
    return 0;
}

/* Gives scratch from cu_scratch_alloc back (stream-ordered).  A failure is
 * cleared from the thread: left there, it would fail the worker's next op,
 * another op's (a broken context is sticky and still reported by that
 * op's own calls). */
static inline void cu_scratch_free(const ordo_run_ctx *rc, void *p) {
    if (p && cudaFreeAsync(p, cu_stream(rc)) != cudaSuccess) cudaGetLastError();
}

/* ---- views on the device -------------------------------------------------- */

/* An ordo_view passed to a kernel by value (a few hundred bytes of kernel
 * parameters; the limit is 4 KiB). */
struct cu_view {
    char *data;
    int ndim;
    int64_t shape[ORDO_MAX_DIMS];
    int64_t strides[ORDO_MAX_DIMS]; /* elements */
};

static inline cu_view cu_view_of(const ordo_view *v) {
    cu_view c;
    c.data = (char *)v->data;
    c.ndim = v->ndim;
    for (int d = 0; d < ORDO_MAX_DIMS; d++) {
        c.shape[d] = d < v->ndim ? v->shape[d] : 1;
        c.strides[d] = d < v->ndim ? v->strides[d] : 0;
    }
    return c;
}

/* Element offset (in elements) of the i-th element in row-major order. */
__host__ __device__ static inline int64_t cu_offset(const cu_view &v, int64_t i) {
    int64_t off = 0;
    for (int d = v.ndim - 1; d >= 0; d--) {
        int64_t s = v.shape[d];
        off += (i % s) * v.strides[d];
        i /= s;
    }
    return off;
}

/* ---- launch shapes ---------------------------------------------------------- */

#define CU_THREADS 256

/* Blocks for a grid-stride loop over n elements: enough to fill the GPU,
 * never more than the grid allows. */
static inline unsigned cu_blocks(int64_t n) {
    int64_t b = (n + CU_THREADS - 1) / CU_THREADS;
    if (b < 1) b = 1;
    if (b > 65535 * 8) b = 65535 * 8;
    return (unsigned)b;
}

#define CU_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

/* ---- dtype dispatch ---------------------------------------------------------- */

/* Runs the statement with T bound to the C type of dtype; default: fails. */
#define CU_DISPATCH(rc, kernel, dtype, T, ...)                      \
    switch (dtype) {                                                \
    case ORDO_F32: { typedef float T; __VA_ARGS__; } break;         \
    case ORDO_F64: { typedef double T; __VA_ARGS__; } break;        \
    case ORDO_I32: { typedef int32_t T; __VA_ARGS__; } break;       \
    case ORDO_I64: { typedef int64_t T; __VA_ARGS__; } break;       \
    case ORDO_U8: { typedef uint8_t T; __VA_ARGS__; } break;        \
    default: return cpu_fail_dtype((rc), (kernel), (dtype));        \
    }

#define CU_DISPATCH_FLOAT(rc, kernel, dtype, T, ...)                \
    switch (dtype) {                                                \
    case ORDO_F32: { typedef float T; __VA_ARGS__; } break;         \
    case ORDO_F64: { typedef double T; __VA_ARGS__; } break;        \
    default: return cpu_fail_dtype((rc), (kernel), (dtype));        \
    }

/* ---- data-dependent errors ---------------------------------------------------- */

enum {
    CU_ERR_NONE = 0,
    CU_ERR_INDEX_RANGE = 1,   /* a = index, b = size of the dim */
    CU_ERR_INT_DIV_ZERO = 2,  /* integer division by zero */
    CU_ERR_VALUE_RANGE = 3,   /* a value does not fit the dtype */
    CU_ERR_UNSEEDED = 4,      /* a random kernel got a generator state never seeded */
    CU_ERR_OUT_OF_BOUNDS = 5, /* check_range: a = element (from 1), b = the value's double bits */
    CU_ERR_SINGULAR = 6       /* linalg: a zero pivot; b = matrices, a = the column (b 1) or the matrix (from 0) */
};

/* One per device, in mapped page-locked host memory: kernels write it
 * through its device address, the host reads it without a copy. */
struct cu_error_slot {
    int code;       /* first error wins (atomicCAS from 0) */
    int kernel;     /* which kernel: an index into the names given to cu_error_name */
    long long a, b; /* details, see the codes */
};

/* Numbers a kernel name for the slot (interned once per name), and the
 * name of a number (kernels/cuda/error_names.c). */
extern "C" int cu_error_kernel_id(const char *kernel);
extern "C" const char *cu_error_kernel_name(int id);

/* The message of a set slot, as the op's failure reports it after the
 * device's name ("gpu(0): "). */
static inline void cu_error_format(const cu_error_slot *s, char *err, size_t errlen) {
    const char *name = cu_error_kernel_name(s->kernel);
    switch (s->code) {
    case CU_ERR_INDEX_RANGE:
        snprintf(err, errlen, "%s: index %lld out of range for a dim of size %lld", name, s->a, s->b);
        break;
    case CU_ERR_INT_DIV_ZERO: snprintf(err, errlen, "%s: integer division by zero", name); break;
    case CU_ERR_VALUE_RANGE:
        snprintf(err, errlen, "%s: value %lld does not fit the dtype", name, s->a);
        break;
    case CU_ERR_UNSEEDED:
        snprintf(err, errlen, "%s: generator state was never seeded (run the seed kernel on it first)", name);
        break;
    case CU_ERR_OUT_OF_BOUNDS: {
        double v;
        memcpy(&v, &s->b, sizeof v);
        snprintf(err, errlen, "%s: value %g at element %lld is outside the bounds", name, v, s->a);
        break;
    }
    case CU_ERR_SINGULAR: /* the CPU kernel's messages (kernels/cpu/linalg.c) */
        if (s->b == 1) snprintf(err, errlen, "%s: the matrix is singular (a zero pivot in column %lld)", name, s->a + 1);
        else
            snprintf(err, errlen, "%s: matrix %lld of the batch (of %lld, counting from 1) is singular", name, s->a + 1,
                     s->b);
        break;
    default: snprintf(err, errlen, "%s failed (code %d)", name, s->code);
    }
}

/* A relaxed atomic load of a value other threads change with atomics.  On
 * the GPU a volatile load is one (PTX: ld.volatile is ld.relaxed.sys); in
 * C++, which the host emulation compiles this as, it is a plain load and a
 * data race to ThreadSanitizer (make check-cuda-emu-tsan). */
template <typename T>
__device__ __forceinline__ T cu_load_relaxed(const T *p) {
#if defined(ORDO_CUDA_EMU)
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#else
    return *(volatile const T *)p;
#endif
}

/* A store that other threads may make to the same place at once (a
 * scatter's repeated index: one of the values wins).  On the GPU a plain
 * store, which is whole for an aligned word; in C++, which the host
 * emulation compiles this as, a race of plain stores is undefined and a
 * data race to ThreadSanitizer: a relaxed atomic store there. */
template <typename T>
__device__ __forceinline__ void cu_store_racy(T *p, T v) {
#if defined(ORDO_CUDA_EMU)
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#else
    *p = v;
#endif
}

/* The device address of gpu(dev)'s slot (created at the first call). */
extern "C" cu_error_slot *cu_error_slot_device(int dev_id);
/* The running op's own slot (a zeroed one, checked by the engine once the
 * op's work has run); NULL, with the op failed, when none can be had: the
 * kernel then returns nonzero at once.  One call per op. */
extern "C" cu_error_slot *cu_error_slot_op(const ordo_run_ctx *rc);
/* Memory for nbytes of slots that kernels on gpu(dev) write and the host
 * reads without a copy: *host for the host, *dev for kernels.  Never freed.
 * 0, or nonzero when it cannot be had (device_cuda.cu, emu_runtime.cpp). */
extern "C" int cu_slot_memory(int dev_id, size_t nbytes, void **host, void **dev);

__device__ static inline void cu_report(cu_error_slot *slot, int code, int kernel, long long a, long long b) {
    if (atomicCAS(&slot->code, 0, -1) == 0) { /* -1: being written */
        slot->kernel = kernel;
        slot->a = a;
        slot->b = b;
        __threadfence_system();
        atomicExch(&slot->code, code);
    }
}

/* ---- registration --------------------------------------------------------------- */

/* Each .cu file registers its kernels for ORDO_GPU with a function named
 * cuda_register_<file>(); register.cu calls them all. */
static inline void cu_register_table(const cpu_kernel_entry *t, int n) {
    for (int i = 0; i < n; i++) ordo_kernel_register(t[i].name, ORDO_GPU, t[i].fn);
}
#define CU_REGISTER_TABLE(t) cu_register_table((t), (int)(sizeof(t) / sizeof((t)[0])))

#endif
