/*
 * softmax.cu - softmax and log_softmax along one dim on the GPU (float
 * dtypes): the twins of kernels/cpu/softmax.c, with its checks, messages
 * and formulas (KERNELS.md).
 *
 * Numerically stable as on the CPU: the row's max m is subtracted before
 * exp, the sum of exp(x - m) accumulates in float64, softmax is
 * exp(x - m) * (1 / sum) and log_softmax (x - m) - log(sum).
 *
 * The tensor is nout independent rows of n elements (the dim).  When the
 * dim is x's innermost (the usual last-dim softmax) or there are few rows,
 * a group of G lanes (G a power of two <= 256) shares a row: lanes stride
 * through it, so consecutive lanes read consecutive addresses, and the max
 * and the sum are combined in shared memory; the row is then read three
 * times (max, sum, output), from L1/L2 after the first.  Otherwise (a dim
 * that is not innermost, e.g. softmax over dim 0 of a row-major [N, C]) one
 * thread walks each row sequentially: consecutive threads then read
 * consecutive addresses.
 *
 * In place (y the very view x) is safe: each element is read and then
 * written by the same thread, after the row's max and sum are complete.
 */
#include "cuda_internal.cuh"
#include "cuda_strided.cuh"

namespace {

/* ---- strided walks (as in reduce.cu): NOP views of one shape in row-major
 * order, size-1 dims dropped, dims contiguous in every operand merged ---- */

/* ---- the row maths ---------------------------------------------------------------- */

__device__ __forceinline__ float ex(float v) { return expf(v); }
__device__ __forceinline__ double ex(double v) { return exp(v); }

/* NaN-propagating max (CPU_MAX): a NaN in the row makes the row NaN, as on the CPU */
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

struct sm_geom {
    nd_walk<2> w;      /* the kept dims: operand 0 = y, 1 = x (row starts) */
    int64_t nout;      /* rows */
    int64_t n, sx, sy; /* row length; x's and y's strides along it */
};

/* G = blockDim.x lanes per row, blockDim.y rows per block */
template <typename T, bool LOG>
__global__ void __launch_bounds__(CU_THREADS) sm_rows(const T *x, T *y, sm_geom g) {
    __shared__ T shm[CU_THREADS];
    __shared__ double shs[CU_THREADS];
    const int G = blockDim.x, lane = threadIdx.x, row0 = threadIdx.y * G, t = row0 + lane;
    /* the loop bound is uniform per block: every thread reaches every barrier */
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < g.nout; base += (int64_t)gridDim.x * blockDim.y) {
        const int64_t o = base + threadIdx.y;
        const bool live = o < g.nout;
        int64_t off[2] = {0, 0};
        if (live) nd_offsets(g.w, o, off);
        const T *xr = x + off[1];
        T *yr = y + off[0];

        T m = -INFINITY;
        if (live)
            for (int64_t k = lane; k < g.n; k += G) m = nan_max(m, xr[k * g.sx]);
        shm[t] = m;
        __syncthreads();
        for (int h = G / 2; h > 0; h >>= 1) {
            if (lane < h) shm[t] = nan_max(shm[t], shm[t + h]);
            __syncthreads();
        }
        m = shm[row0];

        double s = 0;
        if (live)
            for (int64_t k = lane; k < g.n; k += G) s += (double)ex(xr[k * g.sx] - m);
        shs[t] = s;
        __syncthreads();
        for (int h = G / 2; h > 0; h >>= 1) {
            if (lane < h) shs[t] += shs[t + h];
            __syncthreads();
        }
        s = shs[row0];

        if (live) {
            if (LOG) {
                const T lse = (T)log(s);
                for (int64_t k = lane; k < g.n; k += G) yr[k * g.sy] = (xr[k * g.sx] - m) - lse;
            } else {
                const T inv = (T)(1.0 / s);
                for (int64_t k = lane; k < g.n; k += G) yr[k * g.sy] = ex(xr[k * g.sx] - m) * inv;
            }
        }
        __syncthreads(); /* shm / shs are reused by the next rows */
    }
}

/* one thread per row */
template <typename T, bool LOG>
__global__ void sm_cols(const T *x, T *y, sm_geom g) {
    CU_GRID_STRIDE(o, g.nout) {
        int64_t off[2];
        nd_offsets(g.w, o, off);
        const T *xr = x + off[1];
        T *yr = y + off[0];
        T m = xr[0];
        for (int64_t k = 1; k < g.n; k++) m = nan_max(m, xr[k * g.sx]);
        double s = 0;
        for (int64_t k = 0; k < g.n; k++) s += (double)ex(xr[k * g.sx] - m);
        if (LOG) {
            const T lse = (T)log(s);
            for (int64_t k = 0; k < g.n; k++) yr[k * g.sy] = (xr[k * g.sx] - m) - lse;
        } else {
            const T inv = (T)(1.0 / s);
            for (int64_t k = 0; k < g.n; k++) yr[k * g.sy] = ex(xr[k * g.sx] - m) * inv;
        }
    }
}

template <typename T>
void launch(cudaStream_t st, const void *x, void *y, const sm_geom &g, bool rows, bool lg) {
    const T *xp = (const T *)x;
    T *yp = (T *)y;
    if (rows) {
        int G = 1;
        while (G < CU_THREADS && (int64_t)G * 4 < g.n) G *= 2; /* >= 4 elements per lane */
        const int64_t groups = (g.nout + CU_THREADS / G - 1) / (CU_THREADS / G);
        const unsigned gx = (unsigned)(groups < 65535 * 8 ? groups : 65535 * 8);
        const dim3 block((unsigned)G, (unsigned)(CU_THREADS / G));
        if (lg) sm_rows<T, true><<<gx, block, 0, st>>>(xp, yp, g);
        else sm_rows<T, false><<<gx, block, 0, st>>>(xp, yp, g);
    } else {
        if (lg) sm_cols<T, true><<<cu_blocks(g.nout), CU_THREADS, 0, st>>>(xp, yp, g);
        else sm_cols<T, false><<<cu_blocks(g.nout), CU_THREADS, 0, st>>>(xp, yp, g);
    }
}

int run_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *args, int lg) {
    const char *name = lg ? "log_softmax" : "softmax";
    cpu_softmax_plan pl;
    int r = cpu_check_softmax(rc, name, args, &pl);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0];
    if (ordo_view_numel(x) == 0) return 0;

    sm_geom g = sm_geom();
    g.n = pl.n;
    g.sx = pl.sx;
    g.sy = pl.sy;
    g.nout = pl.nout;
    const int64_t *st[2] = {pl.yo.strides, pl.xo.strides};
    g.w = nd_walk_of<2>(pl.xo.ndim, pl.xo.shape, st);
    const bool rows = pl.inner || g.nout < 1024;
    if (x->dtype == ORDO_F32) launch<float>(cu_stream(rc), x->data, y->data, g, rows, lg);
    else launch<double>(cu_stream(rc), x->data, y->data, g, rows, lg);
    return cu_check_launch(rc, name);
}

int k_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_softmax(rc, a, 0); }
int k_log_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_softmax(rc, a, 1); }

} // namespace

extern "C" void cuda_register_softmax(void) {
    static const cpu_kernel_entry t[] = {
        {"softmax", k_softmax},
        {"log_softmax", k_log_softmax},
    };
    CU_REGISTER_TABLE(t);
}
