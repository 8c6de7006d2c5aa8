/*
 * conv.cu - the native parts of 2-d convolution and max pooling on the GPU:
 * the twins of kernels/cpu/conv.c, with its operands, index maths, padding
 * and dilation rules, checks and messages (KERNELS.md):
 *
 *   im2col               x (N, C, H, W) -> cols (N, C*kh*kw, oh*ow)
 *   col2im               cols -> x (the adjoint: overlapping patches add up)
 *   max_pool2d           x -> y (N, C, oh, ow), indices (int64, flat in H*W)
 *   max_pool2d_backward  gy, indices -> gx (N, C, H, W)
 *
 * One thread per element of the side that is written, so that no two
 * threads write one element where it can be avoided:
 *  - im2col: per column element (zero in the padding);
 *  - col2im: per image element, which gathers its (at most kh*kw) taps in
 *    the CPU's (ki, kj) order: no atomics, no separate zero fill, and the
 *    same sums as the CPU bit for bit;
 *  - max_pool2d: per output, scanning its window in the CPU's order (first
 *    index on ties, the first NaN wins);
 *  - max_pool2d_backward: per gradient element, adding into gx with
 *    atomics (overlapping windows may pick one input; the windows are not
 *    known here), after a check kernel has reported any index outside the
 *    plane to the device's error slot; the zero fill and the adds read the
 *    slot once per block and write nothing after an error, so a failed op
 *    leaves gx unchanged.
 * Flat indices are split into coordinates in 32-bit arithmetic when the
 * element count allows it (64-bit division costs several times more).
 */
#include "cuda_internal.cuh"

namespace {

/* (conv.c's geometry and checks: cpu_conv_geom and cpu_check_* in
 * cpu_internal.h) */
typedef cpu_conv_geom conv_geom;

/* ---- device helpers ------------------------------------------------------------------ */

/* A 4-d view's strides, by value. */
struct st4 {
    int64_t s[4];
};
st4 st4_of(const ordo_view *v) {
    st4 r;
    for (int d = 0; d < 4; d++) r.s[d] = v->ndim > d ? v->strides[d] : 0;
    return r;
}

/* splits flat index i over (d0, d1, d2, d3) = sizes, row-major; IT is the
 * arithmetic type (uint32_t when the count fits) */
template <typename IT>
__device__ __forceinline__ void split4(int64_t i, IT n1, IT n2, IT n3, int64_t *c) {
    IT j = (IT)i, q = j / n3;
    c[3] = (int64_t)(j - q * n3);
    j = q;
    q = j / n2;
    c[2] = (int64_t)(j - q * n2);
    j = q;
    q = j / n1;
    c[1] = (int64_t)(j - q * n1);
    c[0] = (int64_t)q;
}

/* ---- im2col ----------------------------------------------------------------------------- */

/* cols[n, (c*kh + ki)*kw + kj, oy*ow + ox] = x[n, c, oy*sh - ph + ki*dh, ox*sw - pw + kj*dw] */
template <typename T, typename IT>
__global__ void im2col_kernel(const T *x, T *cols, conv_geom g, st4 xs, st4 cs, int64_t total) {
    const IT rows = (IT)(g.C * g.kh * g.kw), L = (IT)(g.oh * g.ow), ow = (IT)g.ow, kh = (IT)g.kh, kw = (IT)g.kw;
    CU_GRID_STRIDE(i, total) {
        const IT j = (IT)i, q = j / L, l = j - q * L, n = q / rows, row = q - n * rows; /* i = (n, row, l) */
        const IT oy = l / ow, ox = l - oy * ow;
        const IT t = row / kw, kj = row - t * kw, c = t / kh, ki = t - c * kh; /* row = (c, ki, kj) */
        const int64_t iy = (int64_t)oy * g.sh - g.ph + (int64_t)ki * g.dh;
        const int64_t ix = (int64_t)ox * g.sw - g.pw + (int64_t)kj * g.dw;
        T v = 0;
        if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W)
            v = x[(int64_t)n * xs.s[0] + (int64_t)c * xs.s[1] + iy * xs.s[2] + ix * xs.s[3]];
        cols[(int64_t)n * cs.s[0] + (int64_t)row * cs.s[1] + (int64_t)l * cs.s[2]] = v;
    }
}

template <typename T>
void im2col_launch(cudaStream_t st, const ordo_view *x, const ordo_view *y, const conv_geom &g, int64_t total) {
    const unsigned nb = cu_blocks(total);
    if (total < ((int64_t)1 << 32))
        im2col_kernel<T, uint32_t><<<nb, CU_THREADS, 0, st>>>((const T *)x->data, (T *)y->data, g, st4_of(x), st4_of(y), total);
    else
        im2col_kernel<T, uint64_t><<<nb, CU_THREADS, 0, st>>>((const T *)x->data, (T *)y->data, g, st4_of(x), st4_of(y), total);
}

int k_im2col(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_im2col(rc, a, &g);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0];
    const int64_t total = ordo_view_numel(y);
    if (total == 0) return 0;
    if (x->dtype == ORDO_F64) im2col_launch<double>(cu_stream(rc), x, y, g, total);
    else im2col_launch<float>(cu_stream(rc), x, y, g, total);
    return cu_check_launch(rc, "im2col");
}

/* ---- col2im ------------------------------------------------------------------------------- */

/* x[n, c, iy, ix] = the sum of its taps, in (ki, kj) order from 0: the CPU
 * zero-fills x and then adds the taps in that order, so the sums agree */
template <typename T, typename IT>
__global__ void col2im_kernel(const T *cols, T *x, conv_geom g, st4 cs, st4 xs, int64_t total) {
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)g.C, (IT)g.H, (IT)g.W, c4);
        const int64_t n = c4[0], c = c4[1], iy = c4[2], ix = c4[3];
        const T *cp = cols + n * cs.s[0];
        T acc = 0;
        for (int64_t ki = 0; ki < g.kh; ki++) {
            const int64_t ty = iy + g.ph - ki * g.dh; /* = oy * sh for a tap */
            if (ty < 0) break;                        /* only decreases with ki */
            const int64_t oy = ty / g.sh;
            if (oy * g.sh != ty || oy >= g.oh) continue;
            for (int64_t kj = 0; kj < g.kw; kj++) {
                const int64_t tx = ix + g.pw - kj * g.dw;
                if (tx < 0) break;
                const int64_t ox = tx / g.sw;
                if (ox * g.sw != tx || ox >= g.ow) continue;
                acc += cp[((c * g.kh + ki) * g.kw + kj) * cs.s[1] + (oy * g.ow + ox) * cs.s[2]];
            }
        }
        x[n * xs.s[0] + c * xs.s[1] + iy * xs.s[2] + ix * xs.s[3]] = acc;
    }
}

template <typename T>
void col2im_launch(cudaStream_t st, const ordo_view *cols, const ordo_view *x, const conv_geom &g, int64_t total) {
    const unsigned nb = cu_blocks(total);
    if (total < ((int64_t)1 << 32))
        col2im_kernel<T, uint32_t><<<nb, CU_THREADS, 0, st>>>((const T *)cols->data, (T *)x->data, g, st4_of(cols), st4_of(x), total);
    else
        col2im_kernel<T, uint64_t><<<nb, CU_THREADS, 0, st>>>((const T *)cols->data, (T *)x->data, g, st4_of(cols), st4_of(x), total);
}

/* in: cols; out: x, fully written */
int k_col2im(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_col2im(rc, a, &g);
    if (r) return r;
    const ordo_view *cols = &a->in[0], *x = &a->out[0];
    const int64_t total = ordo_view_numel(x);
    if (total == 0) return 0;
    /* cols is never empty here: x has elements and oh, ow >= 1 */
    if (x->dtype == ORDO_F64) col2im_launch<double>(cu_stream(rc), cols, x, g, total);
    else col2im_launch<float>(cu_stream(rc), cols, x, g, total);
    return cu_check_launch(rc, "col2im");
}

/* ---- max_pool2d ------------------------------------------------------------------------------ */

/* Padding is never chosen (the window's taps start + k d are clipped to the
 * image; the shared check refuses a window without a real tap).  The window
 * is scanned row by row from its first real tap: a larger value, or the
 * first NaN while the best is still a number, replaces the best. */
__device__ inline int64_t first_tap(int64_t start, int64_t d) {
    return start >= 0 ? start : start + (-start + d - 1) / d * d;
}

template <typename T, typename IT>
__global__ void maxpool_kernel(const T *x, T *y, int64_t *ix, conv_geom g, st4 xs, st4 ys, st4 is, int64_t total) {
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)g.C, (IT)g.oh, (IT)g.ow, c4);
        const int64_t n = c4[0], c = c4[1], oy = c4[2], ox = c4[3];
        const int64_t top = oy * g.sh - g.ph, left = ox * g.sw - g.pw; /* the window's first taps */
        const int64_t y0 = first_tap(top, g.dh), x0 = first_tap(left, g.dw);
        int64_t y1 = top + (g.kh - 1) * g.dh + 1, x1 = left + (g.kw - 1) * g.dw + 1;
        if (y1 > g.H) y1 = g.H;
        if (x1 > g.W) x1 = g.W;
        const T *xp = x + n * xs.s[0] + c * xs.s[1];
        T best = xp[y0 * xs.s[2] + x0 * xs.s[3]];
        int64_t bi = y0 * g.W + x0;
        for (int64_t iy = y0; iy < y1; iy += g.dh) {
            const T *row = xp + iy * xs.s[2];
            for (int64_t jx = x0; jx < x1; jx += g.dw) {
                const T v = row[jx * xs.s[3]];
                if (v > best || (v != v && best == best)) {
                    best = v;
                    bi = iy * g.W + jx;
                }
            }
        }
        y[n * ys.s[0] + c * ys.s[1] + oy * ys.s[2] + ox * ys.s[3]] = best;
        ix[n * is.s[0] + c * is.s[1] + oy * is.s[2] + ox * is.s[3]] = bi;
    }
}

template <typename T>
void maxpool_launch(cudaStream_t st, const ordo_view *x, const ordo_view *y, const ordo_view *ix, const conv_geom &g,
                    int64_t total) {
    const unsigned nb = cu_blocks(total);
    if (total < ((int64_t)1 << 32))
        maxpool_kernel<T, uint32_t><<<nb, CU_THREADS, 0, st>>>((const T *)x->data, (T *)y->data, (int64_t *)ix->data, g,
                                                               st4_of(x), st4_of(y), st4_of(ix), total);
    else
        maxpool_kernel<T, uint64_t><<<nb, CU_THREADS, 0, st>>>((const T *)x->data, (T *)y->data, (int64_t *)ix->data, g,
                                                               st4_of(x), st4_of(y), st4_of(ix), total);
}

int k_max_pool2d(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_max_pool2d(rc, a, &g);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
    const int64_t total = ordo_view_numel(y);
    if (total == 0) return 0;
    CU_DISPATCH(rc, "max_pool2d", x->dtype, T, maxpool_launch<T>(cu_stream(rc), x, y, ix, g, total));
    return cu_check_launch(rc, "max_pool2d");
}

/* ---- max_pool2d_backward ---------------------------------------------------------------------- */

/* The guarded kernels' blocks each read the slot (mapped host memory) once:
 * a grid-stride loop over at most this many blocks keeps those reads few. */
#define GUARDED_MAX_BLOCKS 2048u

/* true (for the whole block) when the error slot holds an error */
__device__ __forceinline__ bool slot_failed(const cu_error_slot *slot) {
    __shared__ int failed;
    if (threadIdx.x == 0) failed = cu_load_relaxed(&slot->code);
    __syncthreads();
    return failed != 0;
}

struct pool_bw {
    int64_t C, oh, ow; /* gy / indices (N, C, oh, ow) */
    int64_t H, W;      /* gx plane */
    int kid;
};

/* reports every index outside the H x W plane */
template <typename IT>
__global__ void poolbw_check_kernel(const int64_t *ix, pool_bw p, st4 is, int64_t total, cu_error_slot *slot) {
    const uint64_t plane = (uint64_t)(p.H * p.W);
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)p.C, (IT)p.oh, (IT)p.ow, c4);
        const int64_t k = ix[c4[0] * is.s[0] + c4[1] * is.s[1] + c4[2] * is.s[2] + c4[3] * is.s[3]];
        if ((uint64_t)k >= plane) cu_report(slot, CU_ERR_INDEX_RANGE, p.kid, k, (long long)plane);
    }
}

template <typename T, typename IT>
__global__ void poolbw_zero_kernel(T *gx, pool_bw p, st4 xs, int64_t total, const cu_error_slot *slot) {
    if (slot_failed(slot)) return;
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)p.C, (IT)p.H, (IT)p.W, c4);
        gx[c4[0] * xs.s[0] + c4[1] * xs.s[1] + c4[2] * xs.s[2] + c4[3] * xs.s[3]] = 0;
    }
}

template <typename T, typename IT>
__global__ void poolbw_add_kernel(const T *gy, const int64_t *ix, T *gx, pool_bw p, st4 gs, st4 is, st4 xs,
                                  int64_t total, const cu_error_slot *slot) {
    if (slot_failed(slot)) return;
    const uint64_t plane = (uint64_t)(p.H * p.W);
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)p.C, (IT)p.oh, (IT)p.ow, c4);
        const int64_t k = ix[c4[0] * is.s[0] + c4[1] * is.s[1] + c4[2] * is.s[2] + c4[3] * is.s[3]];
        if ((uint64_t)k >= plane) continue; /* reported by the check */
        const int64_t ky = k / p.W, kx = k - ky * p.W;
        atomicAdd(gx + c4[0] * xs.s[0] + c4[1] * xs.s[1] + ky * xs.s[2] + kx * xs.s[3],
                  gy[c4[0] * gs.s[0] + c4[1] * gs.s[1] + c4[2] * gs.s[2] + c4[3] * gs.s[3]]);
    }
}

template <typename T, typename IT>
void poolbw_launch(cudaStream_t st, const ordo_view *gy, const ordo_view *ix, const ordo_view *gx, const pool_bw &p,
                   int64_t ngy, int64_t ngx, cu_error_slot *slot) {
    if (ngy > 0)
        poolbw_check_kernel<IT><<<cu_blocks(ngy), CU_THREADS, 0, st>>>((const int64_t *)ix->data, p, st4_of(ix), ngy, slot);
    if (ngx == 0) return;
    unsigned nb = cu_blocks(ngx);
    poolbw_zero_kernel<T, IT><<<nb < GUARDED_MAX_BLOCKS ? nb : GUARDED_MAX_BLOCKS, CU_THREADS, 0, st>>>(
        (T *)gx->data, p, st4_of(gx), ngx, slot);
    if (ngy == 0) return;
    nb = cu_blocks(ngy);
    poolbw_add_kernel<T, IT><<<nb < GUARDED_MAX_BLOCKS ? nb : GUARDED_MAX_BLOCKS, CU_THREADS, 0, st>>>(
        (const T *)gy->data, (const int64_t *)ix->data, (T *)gx->data, p, st4_of(gy), st4_of(ix), st4_of(gx), ngy, slot);
}

/* in: gy (N, C, oh, ow), indices (int64, same shape); out: gx (N, C, H, W) */
int k_max_pool2d_backward(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    const char *name = "max_pool2d_backward";
    int r = cpu_check_max_pool2d_backward(rc, a);
    if (r) return r;
    const ordo_view *gy = &a->in[0], *ix = &a->in[1], *gx = &a->out[0];
    pool_bw p;
    p.C = gy->shape[1];
    p.oh = gy->shape[2];
    p.ow = gy->shape[3];
    p.H = gx->shape[2];
    p.W = gx->shape[3];
    p.kid = cu_error_kernel_id(name);
    const int64_t ngy = ordo_view_numel(gy), ngx = ordo_view_numel(gx);
    if (ngy == 0 && ngx == 0) return 0;
    cu_error_slot *slot = cu_error_slot_op(rc);
    if (!slot) return 1; /* (the op failed, saying why) */
    const bool small = ngy < ((int64_t)1 << 32) && ngx < ((int64_t)1 << 32);
    cudaStream_t st = cu_stream(rc);
    if (gx->dtype == ORDO_F64) {
        if (small) poolbw_launch<double, uint32_t>(st, gy, ix, gx, p, ngy, ngx, slot);
        else poolbw_launch<double, uint64_t>(st, gy, ix, gx, p, ngy, ngx, slot);
    } else {
        if (small) poolbw_launch<float, uint32_t>(st, gy, ix, gx, p, ngy, ngx, slot);
        else poolbw_launch<float, uint64_t>(st, gy, ix, gx, p, ngy, ngx, slot);
    }
    return cu_check_launch(rc, name);
}

} // namespace

extern "C" void cuda_register_conv(void) {
    static const cpu_kernel_entry t[] = {
        {"im2col", k_im2col},
        {"col2im", k_col2im},
        {"max_pool2d", k_max_pool2d},
        {"max_pool2d_backward", k_max_pool2d_backward},
    };
    CU_REGISTER_TABLE(t);
}
