/*
 * cuda_strided.cuh - walking NOP strided views of one shape in row-major
 * order on the GPU (the reductions, softmax, random and index kernels).
 *
 * The host drops size-1 dims and merges dims that are contiguous in every
 * operand (as the CPU iterator does); the device then splits a flat index
 * once per element and applies each operand's strides.  In an anonymous
 * namespace: each .cu file gets its own copy, so template instances never
 * clash by name at link time.
 */
#ifndef ORDO_CUDA_STRIDED_CUH
#define ORDO_CUDA_STRIDED_CUH

#include "cuda_internal.cuh"

namespace {

template <int NOP>
struct nd_walk {
    int ndim;
    bool small; /* numel < 2^32: offsets in 32-bit arithmetic (64-bit division costs more) */
    int64_t shape[ORDO_MAX_DIMS];
    int64_t st[NOP][ORDO_MAX_DIMS];
};

template <int NOP>
nd_walk<NOP> nd_walk_of(int ndim, const int64_t *shape, const int64_t *const *strides) {
    nd_walk<NOP> w = nd_walk<NOP>();
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        if (shape[d] == 1) continue;
        const int m = w.ndim;
        bool merge = m > 0;
        for (int k = 0; k < NOP && merge; k++) merge = w.st[k][m - 1] == strides[k][d] * shape[d];
        if (merge) {
            w.shape[m - 1] *= shape[d];
            for (int k = 0; k < NOP; k++) w.st[k][m - 1] = strides[k][d];
        } else {
            w.shape[m] = shape[d];
            for (int k = 0; k < NOP; k++) w.st[k][m] = strides[k][d];
            w.ndim = m + 1;
        }
    }
    w.small = numel < ((int64_t)1 << 32);
    return w;
}

/* off[k] = operand k's offset (elements) of the i-th element. */
template <int NOP>
__device__ __forceinline__ void nd_offsets(const nd_walk<NOP> &w, int64_t i, int64_t *off) {
    for (int k = 0; k < NOP; k++) off[k] = 0;
    if (w.small) {
        uint32_t j = (uint32_t)i;
        for (int d = w.ndim - 1; d > 0; d--) {
            const uint32_t s = (uint32_t)w.shape[d], q = j / s;
            for (int k = 0; k < NOP; k++) off[k] += (int64_t)(j - q * s) * w.st[k][d];
            j = q;
        }
        i = j;
    } else {
        for (int d = w.ndim - 1; d > 0; d--) {
            const int64_t q = i / w.shape[d];
            for (int k = 0; k < NOP; k++) off[k] += (i - q * w.shape[d]) * w.st[k][d];
            i = q;
        }
    }
    if (w.ndim > 0)
        for (int k = 0; k < NOP; k++) off[k] += i * w.st[k][0];
}

} // namespace

#endif
