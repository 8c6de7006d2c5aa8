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

struct conv_geom {
    int64_t N, C, H, W; /* input */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t oh, ow; /* output plane */
};

/* ---- conv.c's parameter checks ------------------------------------------------- */

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    const int64_t span = d * (k - 1) + 1;
    if (in + 2 * p < span) return -1;
    return (in + 2 * p - span) / s + 1;
}

int read_params(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, int with_dilation, conv_geom *g) {
    if (a->niparam < 6)
        return ordo_fail(rc, "%s: needs 6 iparams (kh, kw, stride h, stride w, padding h, padding w), got %d", name,
                         a->niparam);
    g->kh = a->iparam[0];
    g->kw = a->iparam[1];
    g->sh = a->iparam[2];
    g->sw = a->iparam[3];
    g->ph = a->iparam[4];
    g->pw = a->iparam[5];
    g->dh = with_dilation && a->niparam > 6 ? a->iparam[6] : 1;
    g->dw = with_dilation && a->niparam > 7 ? a->iparam[7] : 1;
    const int64_t LIM = (int64_t)1 << 24;
    if (g->kh < 1 || g->kw < 1 || g->kh > LIM || g->kw > LIM)
        return ordo_fail(rc, "%s: kernel size %lldx%lld must be positive", name, (long long)g->kh, (long long)g->kw);
    if (g->sh < 1 || g->sw < 1 || g->sh > LIM || g->sw > LIM)
        return ordo_fail(rc, "%s: stride %lldx%lld must be positive", name, (long long)g->sh, (long long)g->sw);
    if (g->ph < 0 || g->pw < 0 || g->ph > LIM || g->pw > LIM)
        return ordo_fail(rc, "%s: padding %lldx%lld must be >= 0", name, (long long)g->ph, (long long)g->pw);
    if (g->dh < 1 || g->dw < 1 || g->dh > LIM || g->dw > LIM)
        return ordo_fail(rc, "%s: dilation %lldx%lld must be positive", name, (long long)g->dh, (long long)g->dw);
    return 0;
}

int read_input(const ordo_run_ctx *rc, const char *name, const char *what, const ordo_view *x, conv_geom *g) {
    char sx[160];
    if (x->ndim != 4)
        return ordo_fail(rc, "%s: %s must be 4-d (N, C, H, W), got %s", name, what, cpu_shape_str(x, sx, sizeof sx));
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->oh = out_size(g->H, g->kh, g->sh, g->ph, g->dh);
    g->ow = out_size(g->W, g->kw, g->sw, g->pw, g->dw);
    if (g->oh < 1 || g->ow < 1)
        return ordo_fail(rc, "%s: kernel %lldx%lld (dilation %lldx%lld) is larger than the padded input %lldx%lld "
                             "(%s %s, padding %lldx%lld)",
                         name, (long long)g->kh, (long long)g->kw, (long long)g->dh, (long long)g->dw,
                         (long long)(g->H + 2 * g->ph), (long long)(g->W + 2 * g->pw), what,
                         cpu_shape_str(x, sx, sizeof sx), (long long)g->ph, (long long)g->pw);
    return 0;
}

int check_pair(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, const ordo_view *x,
               const ordo_view *cols, conv_geom *g) {
    int r;
    if ((r = read_params(rc, name, a, 1, g))) return r;
    if (x->dtype != cols->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but cols is %s", name, ordo_dtype_name(x->dtype),
                         ordo_dtype_name(cols->dtype));
    if (!cpu_dtype_is_float(x->dtype)) return cpu_fail_dtype(rc, name, x->dtype);
    if ((r = read_input(rc, name, "x", x, g))) return r;
    const int64_t rows = g->C * g->kh * g->kw, L = g->oh * g->ow;
    if (cols->ndim != 3 || cols->shape[0] != g->N || cols->shape[1] != rows || cols->shape[2] != L) {
        char sx[160], sc[160];
        return ordo_fail(rc, "%s: shape mismatch: x %s with kernel %lldx%lld gives cols [%lld, %lld, %lld] (N, C*kh*kw, "
                             "oh*ow with oh %lld, ow %lld), got cols %s",
                         name, cpu_shape_str(x, sx, sizeof sx), (long long)g->kh, (long long)g->kw, (long long)g->N,
                         (long long)rows, (long long)L, (long long)g->oh, (long long)g->ow,
                         cpu_shape_str(cols, sc, sizeof sc));
    }
    return 0;
}

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
    int r = cpu_check_args(rc, "im2col", a, 1, 1);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0];
    conv_geom g;
    if ((r = check_pair(rc, "im2col", a, x, y, &g))) return r;
    if ((r = cpu_check_writable(rc, "im2col", y))) return r;
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
    int r = cpu_check_args(rc, "col2im", a, 1, 1);
    if (r) return r;
    const ordo_view *cols = &a->in[0], *x = &a->out[0];
    conv_geom g;
    if ((r = check_pair(rc, "col2im", a, x, cols, &g))) return r;
    if ((r = cpu_check_writable(rc, "col2im", x))) return r;
    const int64_t total = ordo_view_numel(x);
    if (total == 0) return 0;
    /* cols is never empty here: x has elements and oh, ow >= 1 */
    if (x->dtype == ORDO_F64) col2im_launch<double>(cu_stream(rc), cols, x, g, total);
    else col2im_launch<float>(cu_stream(rc), cols, x, g, total);
    return cu_check_launch(rc, "col2im");
}

/* ---- max_pool2d ------------------------------------------------------------------------------ */

/* Padding is never chosen (the window is clipped to the image; Torch's rule
 * padding <= kernel / 2 leaves every window a real element).  The window is
 * scanned row by row from its first real element: a larger value, or the
 * first NaN while the best is still a number, replaces the best. */
template <typename T, typename IT>
__global__ void maxpool_kernel(const T *x, T *y, int64_t *ix, conv_geom g, st4 xs, st4 ys, st4 is, int64_t total) {
    CU_GRID_STRIDE(i, total) {
        int64_t c4[4];
        split4<IT>(i, (IT)g.C, (IT)g.oh, (IT)g.ow, c4);
        const int64_t n = c4[0], c = c4[1], oy = c4[2], ox = c4[3];
        int64_t y0 = oy * g.sh - g.ph, y1 = y0 + g.kh, x0 = ox * g.sw - g.pw, x1 = x0 + g.kw;
        if (y0 < 0) y0 = 0;
        if (y1 > g.H) y1 = g.H;
        if (x0 < 0) x0 = 0;
        if (x1 > g.W) x1 = g.W;
        const T *xp = x + n * xs.s[0] + c * xs.s[1];
        T best = xp[y0 * xs.s[2] + x0 * xs.s[3]];
        int64_t bi = y0 * g.W + x0;
        for (int64_t iy = y0; iy < y1; iy++) {
            const T *row = xp + iy * xs.s[2];
            for (int64_t jx = x0; jx < x1; jx++) {
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

int pool_shapes_ok(const conv_geom *g, const ordo_view *v) {
    return v->ndim == 4 && v->shape[0] == g->N && v->shape[1] == g->C && v->shape[2] == g->oh && v->shape[3] == g->ow;
}

int k_max_pool2d(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_args(rc, "max_pool2d", a, 1, 2);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
    conv_geom g;
    if ((r = read_params(rc, "max_pool2d", a, 0, &g))) return r;
    if (g.ph > g.kh / 2 || g.pw > g.kw / 2)
        return ordo_fail(rc, "max_pool2d: padding %lldx%lld must be at most half the kernel %lldx%lld", (long long)g.ph,
                         (long long)g.pw, (long long)g.kh, (long long)g.kw);
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "max_pool2d: dtype mismatch: x is %s but out is %s", ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype));
    if (ix->dtype != ORDO_I64)
        return ordo_fail(rc, "max_pool2d: indices must be int64, got %s", ordo_dtype_name(ix->dtype));
    if ((r = read_input(rc, "max_pool2d", "x", x, &g))) return r;
    if (!pool_shapes_ok(&g, y) || !pool_shapes_ok(&g, ix)) {
        char sx[160], sy[160], si[160];
        return ordo_fail(rc, "max_pool2d: shape mismatch: x %s gives out [%lld, %lld, %lld, %lld], got out %s and "
                             "indices %s",
                         cpu_shape_str(x, sx, sizeof sx), (long long)g.N, (long long)g.C, (long long)g.oh,
                         (long long)g.ow, cpu_shape_str(y, sy, sizeof sy), cpu_shape_str(ix, si, sizeof si));
    }
    if ((r = cpu_check_writable(rc, "max_pool2d", y)) || (r = cpu_check_writable(rc, "max_pool2d", ix))) return r;
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
    if (threadIdx.x == 0) failed = *(volatile const int *)&slot->code;
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
    int r = cpu_check_args(rc, name, a, 2, 1);
    if (r) return r;
    const ordo_view *gy = &a->in[0], *ix = &a->in[1], *gx = &a->out[0];
    char s1[160], s2[160], s3[160];
    if (gy->dtype != gx->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: grad is %s but out is %s", name, ordo_dtype_name(gy->dtype),
                         ordo_dtype_name(gx->dtype));
    if (!cpu_dtype_is_float(gy->dtype)) return cpu_fail_dtype(rc, name, gy->dtype);
    if (ix->dtype != ORDO_I64)
        return ordo_fail(rc, "%s: indices must be int64, got %s", name, ordo_dtype_name(ix->dtype));
    if (gy->ndim != 4 || gx->ndim != 4 || !cpu_same_shape(gy, ix) || gy->shape[0] != gx->shape[0] ||
        gy->shape[1] != gx->shape[1])
        return ordo_fail(rc, "%s: shape mismatch: grad %s, indices %s, out %s (grad and indices (N, C, oh, ow), "
                             "out (N, C, H, W))",
                         name, cpu_shape_str(gy, s1, sizeof s1), cpu_shape_str(ix, s2, sizeof s2),
                         cpu_shape_str(gx, s3, sizeof s3));
    if ((r = cpu_check_writable(rc, name, gx))) return r;
    pool_bw p;
    p.C = gy->shape[1];
    p.oh = gy->shape[2];
    p.ow = gy->shape[3];
    p.H = gx->shape[2];
    p.W = gx->shape[3];
    p.kid = cu_error_kernel_id(name);
    const int64_t ngy = ordo_view_numel(gy), ngx = ordo_view_numel(gx);
    if (ngy == 0 && ngx == 0) return 0;
    cu_error_slot *slot = cu_error_slot_device(rc->ctx.dev_id);
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
