/*
 * copy.cu - the CUDA fill, copy (casts between any two dtypes) and arange:
 * the GPU twins of kernels/cpu/copy.c, with the same checks, messages and
 * results (KERNELS.md).
 *
 * copy is the workhorse of the tensor layer (contiguous(), to(dtype), cat
 * into narrowed views, broadcast materialisation), so besides the generic
 * elementwise path it has a memcpy for contiguous same-dtype copies and a
 * shared-memory tiled path for transposes, where the plain path would read
 * (or write) one element per 32-byte sector.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

/* ---- conversions -------------------------------------------------------------- */

/* One element of FROM as TO, by copy's rules: to float rounds to nearest,
 * float -> integer saturates (the CPU's cpu_sat_*, host and device
 * functions), integer -> integer wraps (two's complement, as the CPU's plain
 * C casts). */
template <typename TO, typename FROM>
__host__ __device__ __forceinline__ TO cu_cast(FROM x) {
    if constexpr (std::is_same<TO, FROM>::value) return x;
    else if constexpr (std::is_floating_point<TO>::value || !std::is_floating_point<FROM>::value) return (TO)x;
    else if constexpr (std::is_same<TO, int32_t>::value) return cpu_sat_i32((double)x);
    else if constexpr (std::is_same<TO, int64_t>::value) return cpu_sat_i64((double)x);
    else return cpu_sat_u8((double)x);
}

template <typename TO, typename FROM>
struct cast_op {
    __device__ __forceinline__ TO operator()(FROM x) const { return cu_cast<TO, FROM>(x); }
};

/* The unsigned type of an element size: same-dtype copies move bit patterns. */
template <int ES> struct bits_of;
template <> struct bits_of<1> { typedef uint8_t type; };
template <> struct bits_of<4> { typedef uint32_t type; };
template <> struct bits_of<8> { typedef uint64_t type; };

/* ---- fill ------------------------------------------------------------------------ */

int k_fill(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_scalar v;
    int r = cpu_check_fill(rc, a, &v);
    if (r) return r;
    return ew_fill(rc, "fill", &a->out[0], &v);
}

/* ---- copy ------------------------------------------------------------------------ */

/* A transpose: 32 x 32 tiles through shared memory, read along the input's
 * unit-stride dim (R, the layout's next-to-last) and written along the
 * output's (C, the last), both coalesced.  The layout's outer dims are
 * batches (blockIdx.z); each grid dim loops so no size exceeds the grid. */
#define TILE 32
#define TILE_ROWS 8

template <typename TO, typename TI>
__global__ void copy_tiled_kernel(TO *y, const TI *x, ew_layout<2> L, int64_t nbatch) {
    __shared__ TO tile[TILE][TILE + 1]; /* + 1: column reads hit distinct banks */
    const int nd = L.ndim;
    const int64_t R = L.shape[nd - 2], C = L.shape[nd - 1];
    const int64_t ys = L.strides[0][nd - 2], xs = L.strides[1][nd - 1]; /* the other two are 1 */
    const int64_t tilesR = (R + TILE - 1) / TILE, tilesC = (C + TILE - 1) / TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t b = blockIdx.z; b < nbatch; b += gridDim.z) {
        int64_t oy = 0, ox = 0, rest = b;
        for (int d = nd - 3; d >= 0; d--) {
            const int64_t c = rest % L.shape[d];
            rest /= L.shape[d];
            oy += c * L.strides[0][d];
            ox += c * L.strides[1][d];
        }
        /* every thread of the block runs the same iterations: the barriers are safe */
        for (int64_t tr = blockIdx.y; tr < tilesR; tr += gridDim.y)
            for (int64_t tc = blockIdx.x; tc < tilesC; tc += gridDim.x) {
                const int64_t r0 = tr * TILE, c0 = tc * TILE;
                for (int j = ty; j < TILE; j += TILE_ROWS) {
                    const int64_t rr = r0 + tx, cc = c0 + j;
                    if (rr < R && cc < C) tile[j][tx] = cu_cast<TO, TI>(x[ox + rr + cc * xs]);
                }
                __syncthreads();
                for (int j = ty; j < TILE; j += TILE_ROWS) {
                    const int64_t rr = r0 + j, cc = c0 + tx;
                    if (rr < R && cc < C) y[oy + rr * ys + cc] = tile[tx][j];
                }
                __syncthreads();
            }
    }
}

static inline unsigned grid_dim(int64_t n, int64_t cap) { return (unsigned)(n < 1 ? 1 : n > cap ? cap : n); }

template <typename TO, typename TI>
int copy_cast(const ordo_run_ctx *rc, const ordo_view *y, const ordo_view *x) {
    const ordo_view *v[2] = {y, x};
    ew_layout<2> L;
    int64_t n;
    const bool contig = ew_setup<2>(v, &L, &n);
    if (n == 0) return 0;
    if (contig && std::is_same<TO, TI>::value) {
        /* an in-place copy of a view onto itself is harmless: nothing to do */
        if (y->data != x->data)
            cudaMemcpyAsync(y->data, x->data, (size_t)n * sizeof(TO), cudaMemcpyDeviceToDevice, cu_stream(rc));
        return cu_check_launch(rc, "copy");
    }
    const int nd = L.ndim;
    if (nd >= 2 && L.strides[0][nd - 1] == 1 && L.strides[1][nd - 2] == 1 &&
        L.shape[nd - 2] >= TILE / 2 && L.shape[nd - 1] >= TILE / 2) {
        const int64_t R = L.shape[nd - 2], C = L.shape[nd - 1], nbatch = n / (R * C);
        const dim3 grid(grid_dim((C + TILE - 1) / TILE, INT32_MAX), grid_dim((R + TILE - 1) / TILE, 65535),
                        grid_dim(nbatch, 65535));
        copy_tiled_kernel<TO, TI><<<grid, dim3(TILE, TILE_ROWS), 0, cu_stream(rc)>>>(
            (TO *)y->data, (const TI *)x->data, L, nbatch);
        return cu_check_launch(rc, "copy");
    }
    const ew_map1<TO, TI, cast_op<TO, TI> > f = {(TO *)y->data, (const TI *)x->data, {}};
    return ew_launch_layout<2>(rc, "copy", L, n, contig, f);
}

/* Same dtype: bit patterns are moved, one set of kernels per element size. */
template <typename TO, typename TI>
int copy_typed(const ordo_run_ctx *rc, const ordo_view *y, const ordo_view *x) {
    typedef typename bits_of<sizeof(TO)>::type W;
    if constexpr (std::is_same<TO, TI>::value) return copy_cast<W, W>(rc, y, x);
    else return copy_cast<TO, TI>(rc, y, x);
}

int k_copy(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_copy(rc, a);
    if (r) return r;
    const ordo_view *y = &a->out[0], *x = &a->in[0];
    CU_DISPATCH(rc, "copy", y->dtype, TO, CU_DISPATCH(rc, "copy", x->dtype, TI, return copy_typed<TO, TI>(rc, y, x)));
    return 0;
}

/* ---- arange ---------------------------------------------------------------------- */

/* y[i * s] = start + i * step.  __dmul_rn / __dadd_rn: never contracted into
 * an fma, so the doubles round exactly as the CPU's. */
template <typename T>
__global__ void arange_kernel(T *y, int64_t n, int64_t s, double start, double step, int64_t start_i,
                              int64_t step_i, bool integral) {
    CU_GRID_STRIDE(i, n) {
        T v;
        if constexpr (std::is_floating_point<T>::value) {
            v = (T)__dadd_rn(start, __dmul_rn((double)i, step));
        } else if (integral) { /* exact; unsigned so that int64 wraps as on the CPU */
            v = (T)((uint64_t)start_i + (uint64_t)i * (uint64_t)step_i);
        } else {
            v = cu_cast<T, double>(__dadd_rn(start, __dmul_rn((double)i, step)));
        }
        y[i * s] = v;
    }
}

int k_arange(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_arange_plan p;
    int r = cpu_check_arange(rc, a, &p);
    if (r || p.n == 0) return r;
    const ordo_view *y = &a->out[0];
    /* exact integer steps when start and step are integral */
    const int64_t start_i = p.integral ? (int64_t)p.start : 0, step_i = p.integral ? (int64_t)p.step : 0;
    CU_DISPATCH(rc, "arange", y->dtype, T,
                arange_kernel<T><<<cu_blocks(p.n), CU_THREADS, 0, cu_stream(rc)>>>(
                    (T *)y->data, p.n, p.stride, p.start, p.step, start_i, step_i, p.integral != 0));
    return cu_check_launch(rc, "arange");
}

} /* namespace */

extern "C" void cuda_register_copy(void) {
    static const cpu_kernel_entry t[] = {
        {"fill", k_fill},
        {"copy", k_copy},
        {"arange", k_arange},
    };
    CU_REGISTER_TABLE(t);
}
