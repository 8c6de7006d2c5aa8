/*
 * cuda_elementwise.cuh - the strided elementwise launcher of the CUDA kernels.
 */
#ifndef ORDO_CUDA_ELEMENTWISE_CUH
#define ORDO_CUDA_ELEMENTWISE_CUH

#include <type_traits>

#include "cuda_internal.cuh"

/* ==== elementwise machinery =====================================================
 * Shared by copy.cu, elementwise.cu, compare.cu and unary.cu.  Everything sits
 * in an anonymous namespace so that the objects including it, linked into one
 * library, never share a template instantiation by name (no ODR clashes).
 *
 * An elementwise kernel is a functor f called once per element with o[k], the
 * element's offset (in elements) in operand k; operand 0 is the output.  The
 * host first simplifies the operands' common layout the way the CPU iterator
 * does (cpu_iter_init): size-1 dims are dropped, the dims are put in the
 * output's memory order (so that consecutive threads write consecutive
 * addresses whenever the output allows it) and dims contiguous in every
 * operand are merged.  All-contiguous operands then become one dim of unit
 * strides and take the plain-index kernel; anything else takes the strided
 * kernel, which splits the flat index into a multi-index once per element
 * and applies every operand's strides to it (cu_offset per operand would
 * repeat the divisions for each operand), in 32-bit arithmetic whenever the
 * element count allows (64-bit division costs several times more). */
namespace {

template <int N>
struct ew_layout {
    int ndim;                          /* after simplification; 0 = one element */
    int64_t shape[ORDO_MAX_DIMS];      /* shared by every operand */
    int64_t strides[N][ORDO_MAX_DIMS]; /* operand k's, in elements */
};

/* Simplifies the layout of v[0..N) (v[0] the output; every view has v[0]'s
 * shape, the caller checked) into *L, sets *numel; true when every operand
 * is contiguous (plain index i for all). */
template <int N>
inline bool ew_setup(const ordo_view *const *v, ew_layout<N> *L, int64_t *numel) {
    *L = ew_layout<N>(); /* zeroes the unused entries too */
    int perm[ORDO_MAX_DIMS], nd = 0;
    int64_t n = 1;
    for (int d = 0; d < v[0]->ndim; d++) {
        n *= v[0]->shape[d];
        if (v[0]->shape[d] != 1) perm[nd++] = d;
    }
    *numel = n;
    /* stable insertion sort, the output's largest stride first */
    for (int i = 1; i < nd; i++) {
        const int p = perm[i];
        int j = i;
        for (; j > 0 && v[0]->strides[perm[j - 1]] < v[0]->strides[p]; j--) perm[j] = perm[j - 1];
        perm[j] = p;
    }
    for (int i = 0; i < nd; i++) {
        const int d = perm[i], m = L->ndim;
        const int64_t sz = v[0]->shape[d];
        bool merge = m > 0;
        for (int k = 0; k < N && merge; k++) merge = L->strides[k][m - 1] == v[k]->strides[d] * sz;
        if (merge) { /* the outer dim steps exactly over this one in every operand */
            L->shape[m - 1] *= sz;
            for (int k = 0; k < N; k++) L->strides[k][m - 1] = v[k]->strides[d];
        } else {
            L->shape[m] = sz;
            for (int k = 0; k < N; k++) L->strides[k][m] = v[k]->strides[d];
            L->ndim = m + 1;
        }
    }
    bool contig = L->ndim <= 1;
    for (int k = 0; k < N && contig && L->ndim == 1; k++) contig = L->strides[k][0] == 1;
    return contig;
}

template <int N, class F>
__global__ void ew_contig_kernel(int64_t n, F f) {
    CU_GRID_STRIDE(i, n) {
        int64_t o[N];
#pragma unroll
        for (int k = 0; k < N; k++) o[k] = i;
        f(o);
    }
}

/* I: the unsigned type the flat index is split in (uint32_t when n fits). */
template <int N, typename I, class F>
__global__ void ew_strided_kernel(int64_t n, ew_layout<N> L, F f) {
    CU_GRID_STRIDE(i, n) {
        int64_t o[N];
#pragma unroll
        for (int k = 0; k < N; k++) o[k] = 0;
        I r = (I)i;
        for (int d = L.ndim - 1; d >= 0; d--) {
            const I s = (I)L.shape[d], q = r / s;
            const int64_t c = (int64_t)(r - q * s);
#pragma unroll
            for (int k = 0; k < N; k++) o[k] += c * L.strides[k][d];
            r = q;
        }
        f(o);
    }
}

/* Queues f over a simplified layout; 0 or the launch failure. */
template <int N, class F>
inline int ew_launch_layout(const ordo_run_ctx *rc, const char *name, const ew_layout<N> &L,
                            int64_t n, bool contig, const F &f) {
    if (n == 0) return 0;
    cudaStream_t st = cu_stream(rc);
    if (contig) ew_contig_kernel<N><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, f);
    else if (n <= (int64_t)UINT32_MAX) ew_strided_kernel<N, uint32_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, L, f);
    else ew_strided_kernel<N, uint64_t><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, L, f);
    return cu_check_launch(rc, name);
}

/* Queues f over the views v[0..N) (v[0] the output). */
template <int N, class F>
inline int ew_launch(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v, const F &f) {
    ew_layout<N> L;
    int64_t n;
    const bool contig = ew_setup<N>(v, &L, &n);
    return ew_launch_layout<N>(rc, name, L, n, contig, f);
}

/* y = f(a) and y = f(a, b), the functors most kernels need. */
template <typename TY, typename TA, class F>
struct ew_map1 {
    TY *y;
    const TA *a;
    F f;
    __device__ __forceinline__ void operator()(const int64_t *o) const { y[o[0]] = f(a[o[1]]); }
};
template <typename TY, typename TA, typename TB, class F>
struct ew_map2 {
    TY *y;
    const TA *a;
    const TB *b;
    F f;
    __device__ __forceinline__ void operator()(const int64_t *o) const { y[o[0]] = f(a[o[1]], b[o[2]]); }
};

/* A binary op with a scalar operand bound: f(x, s) and f(s, x).  The
 * scalar travels by value in the kernel's parameters, so the scalar forms
 * run the unary skeleton and need no device memory. */
template <class F, typename T>
struct ew_bind_right {
    F f;
    T s;
    __device__ __forceinline__ auto operator()(T x) const { return f(x, s); }
};
template <class F, typename T>
struct ew_bind_left {
    F f;
    T s;
    __device__ __forceinline__ auto operator()(T x) const { return f(s, x); }
};

/* Stores one bit pattern (W: an unsigned type of the element's size). */
template <typename W>
struct ew_fill_f {
    W *y;
    W v;
    __device__ __forceinline__ void operator()(const int64_t *o) const { y[o[0]] = v; }
};

/* Fills view y with the element whose bytes are at value (by bit pattern,
 * as cpu_fill_view).  A contiguous view whose value repeats one byte (zeros
 * above all) becomes a cudaMemsetAsync. */
[[maybe_unused]] inline int ew_fill(const ordo_run_ctx *rc, const char *name, const ordo_view *y, const void *value) {
    const size_t es = ordo_dtype_size(y->dtype);
    uint8_t b[8] = {0};
    memcpy(b, value, es);
    const ordo_view *v[1] = {y};
    ew_layout<1> L;
    int64_t n;
    const bool contig = ew_setup<1>(v, &L, &n);
    if (n == 0) return 0;
    bool bytes_equal = true;
    for (size_t i = 1; i < es; i++) bytes_equal = bytes_equal && b[i] == b[0];
    if (contig && bytes_equal) {
        cudaMemsetAsync(y->data, b[0], (size_t)n * es, cu_stream(rc));
        return cu_check_launch(rc, name);
    }
    if (es == 8) {
        ew_fill_f<uint64_t> f = {(uint64_t *)y->data, 0};
        memcpy(&f.v, b, 8);
        return ew_launch_layout<1>(rc, name, L, n, contig, f);
    }
    if (es == 4) {
        ew_fill_f<uint32_t> f = {(uint32_t *)y->data, 0};
        memcpy(&f.v, b, 4);
        return ew_launch_layout<1>(rc, name, L, n, contig, f);
    }
    ew_fill_f<uint8_t> f = {(uint8_t *)y->data, b[0]};
    return ew_launch_layout<1>(rc, name, L, n, contig, f);
}

/* The unsigned type integer arithmetic wraps in (uint8 promotes to unsigned
 * int, whose range holds every sum and product of two bytes); floats are
 * their own. */
template <typename T> struct ew_uns { typedef T type; };
template <> struct ew_uns<int32_t> { typedef uint32_t type; };
template <> struct ew_uns<int64_t> { typedef uint64_t type; };
template <> struct ew_uns<uint8_t> { typedef unsigned type; };

/* NaN test that folds away for integers (CPU_MAX's a != a, without the
 * compiler's "self-comparison" remarks for integer types). */
template <typename T>
__host__ __device__ __forceinline__ bool ew_isnan(T x) {
    if constexpr (std::is_floating_point<T>::value) return x != x;
    else return false;
}

} /* namespace */
/* ==== end of the elementwise machinery ========================================= */

#endif
