/*
 * conv.c - the native parts of 2-d convolution and max pooling:
 *
 *   im2col               x (N, C, H, W) -> cols (N, C*kh*kw, oh*ow)
 *   col2im               cols -> x (the adjoint: overlapping patches add up)
 *   max_pool2d           x -> y (N, C, oh, ow), indices (int64, flat in H*W)
 *   max_pool2d_backward  gy, indices -> gx (N, C, H, W)
 *
 * A convolution is then im2col plus one matrix product (the matmul kernel,
 * i.e. BLAS), as in Caffe and Torch's CPU path: the product does almost all
 * the arithmetic, and im2col is a copy that these loops keep close to
 * memory speed.
 *
 * iparams (im2col, col2im, max_pool2d): i0 kh, i1 kw, i2 stride h, i3
 * stride w, i4 padding h, i5 padding w, i6/i7 = dilation h/w (1 when
 * absent); max_pool2d also i8 = ceil_mode (0 when absent).  Output sizes
 * follow Torch:
 *   oh = (H + 2 ph - dh (kh - 1) - 1) / sh + 1    (floor)
 * rounded up in ceil_mode, less the last window if it would start past
 * the input and its left padding.  A kernel that does not fit the padded
 * input fails rather than producing an empty result.  Every view may have any strides (the
 * tensor layer passes transposed views to lay cols out for one big GEMM);
 * the fast paths are taken when the rows are contiguous.
 *
 * The kernels run on one engine worker each and start no threads.
 */
#include <string.h>

#include "cpu_internal.h"

/* (cpu_internal.h's, shared with the CUDA kernels) */
typedef cpu_conv_geom conv_geom;

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, int ceil_mode) {
    const int64_t span = d * (k - 1) + 1;
    if (!ceil_mode) return in + 2 * p < span ? -1 : (in + 2 * p - span) / s + 1;
    /* Rounded up (a window may then reach past the padding, as in Torch),
     * less a last window that would start past the input and its left
     * padding; the numerator may be negative: rounded toward -inf. */
    const int64_t num = in + 2 * p - span + s - 1;
    int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (out > 0 && (out - 1) * s >= in + p) out--;
    return out >= 1 ? out : -1;
}

/* Reads and checks the iparams; fills g's kernel fields.  with_ceil_mode:
 * i8 is read when present (pooling). */
static int read_params(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, int with_ceil_mode,
                       conv_geom *g) {
    if (a->niparam < 6)
        return ordo_fail(rc, "%s: needs 6 iparams (kh, kw, stride h, stride w, padding h, padding w), got %d", name,
                         a->niparam);
    g->kh = a->iparam[0];
    g->kw = a->iparam[1];
    g->sh = a->iparam[2];
    g->sw = a->iparam[3];
    g->ph = a->iparam[4];
    g->pw = a->iparam[5];
    g->dh = a->niparam > 6 ? a->iparam[6] : 1;
    g->dw = a->niparam > 7 ? a->iparam[7] : 1;
    g->ceil_mode = with_ceil_mode && a->niparam > 8 ? a->iparam[8] != 0 : 0;
    /* The bounds keep every product below fit in int64 with room to spare. */
    const int64_t LIM = (int64_t)1 << 24;
    if (g->kh < 1 || g->kw < 1 || g->kh > LIM || g->kw > LIM)
        return ordo_fail(rc, "%s: kernel size %lldx%lld must be positive and at most %lld", name, (long long)g->kh,
                         (long long)g->kw, (long long)LIM);
    if (g->sh < 1 || g->sw < 1 || g->sh > LIM || g->sw > LIM)
        return ordo_fail(rc, "%s: stride %lldx%lld must be positive and at most %lld", name, (long long)g->sh,
                         (long long)g->sw, (long long)LIM);
    if (g->ph < 0 || g->pw < 0 || g->ph > LIM || g->pw > LIM)
        return ordo_fail(rc, "%s: padding %lldx%lld must be >= 0 and at most %lld", name, (long long)g->ph,
                         (long long)g->pw, (long long)LIM);
    if (g->dh < 1 || g->dw < 1 || g->dh > LIM || g->dw > LIM)
        return ordo_fail(rc, "%s: dilation %lldx%lld must be positive and at most %lld", name, (long long)g->dh,
                         (long long)g->dw, (long long)LIM);
    return 0;
}

/* Sets N, C, H, W from the 4-d view x and oh, ow from them; fails when x is
 * not 4-d or the (dilated) kernel does not fit the padded input. */
static int read_input(const ordo_run_ctx *rc, const char *name, const char *what, const ordo_view *x, conv_geom *g) {
    char sx[160];
    if (x->ndim != 4)
        return ordo_fail(rc, "%s: %s must be 4-d (N, C, H, W), got %s", name, what, cpu_shape_str(x, sx, sizeof sx));
    g->N = x->shape[0];
    g->C = x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->oh = out_size(g->H, g->kh, g->sh, g->ph, g->dh, g->ceil_mode);
    g->ow = out_size(g->W, g->kw, g->sw, g->pw, g->dw, g->ceil_mode);
    if (g->oh < 1 || g->ow < 1)
        return ordo_fail(rc, "%s: kernel %lldx%lld (dilation %lldx%lld) is larger than the padded input %lldx%lld "
                             "(%s %s, padding %lldx%lld)",
                         name, (long long)g->kh, (long long)g->kw, (long long)g->dh, (long long)g->dw,
                         (long long)(g->H + 2 * g->ph), (long long)(g->W + 2 * g->pw), what,
                         cpu_shape_str(x, sx, sizeof sx), (long long)g->ph, (long long)g->pw);
    return 0;
}

/* The first ox whose input column ox*s + off is >= 0, and the end of those
 * whose column is < W, clamped to [0, ow]. */
static void valid_range(int64_t off, int64_t s, int64_t W, int64_t ow, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = W - off <= 0 ? 0 : (W - off + s - 1) / s;
    if (a > ow) a = ow;
    if (b > ow) b = ow;
    if (b < a) b = a;
    *lo = a;
    *hi = b;
}

/* ---- im2col --------------------------------------------------------------- */

/* im2col moves elements without arithmetic: one loop per element size. */
#define DEF_IM2COL(SFX, T)                                                                          \
    static void im2col_##SFX(const conv_geom *g, const ordo_view *x, const ordo_view *y) {           \
        const int64_t xs0 = x->strides[0], xs1 = x->strides[1], xs2 = x->strides[2], xs3 = x->strides[3]; \
        const int64_t ys0 = y->strides[0], ys1 = y->strides[1], ys2 = y->strides[2];                 \
        const int64_t ow = g->ow, sx = g->sw * xs3;                                                   \
        for (int64_t n = 0; n < g->N; n++)                                                            \
            for (int64_t c = 0; c < g->C; c++) {                                                      \
                const T *xp = (const T *)x->data + n * xs0 + c * xs1;                                 \
                for (int64_t ki = 0; ki < g->kh; ki++)                                                \
                    for (int64_t kj = 0; kj < g->kw; kj++) {                                          \
                        const int64_t row = (c * g->kh + ki) * g->kw + kj;                            \
                        T *yp = (T *)y->data + n * ys0 + row * ys1;                                   \
                        const int64_t off = kj * g->dw - g->pw;                                       \
                        int64_t lo, hi;                                                               \
                        valid_range(off, g->sw, g->W, ow, &lo, &hi);                                  \
                        for (int64_t oy = 0; oy < g->oh; oy++) {                                      \
                            const int64_t iy = oy * g->sh - g->ph + ki * g->dh;                       \
                            T *d = yp + oy * ow * ys2;                                                \
                            if (iy < 0 || iy >= g->H) {                                               \
                                if (ys2 == 1) memset(d, 0, (size_t)ow * sizeof(T));                   \
                                else for (int64_t i = 0; i < ow; i++) d[i * ys2] = 0;                 \
                                continue;                                                             \
                            }                                                                         \
                            /* s: the first real element (never a pointer before x) */               \
                            const T *s = hi > lo ? xp + iy * xs2 + (lo * g->sw + off) * xs3 : xp;     \
                            if (ys2 == 1) {                                                           \
                                if (lo > 0) memset(d, 0, (size_t)lo * sizeof(T));                     \
                                if (hi < ow) memset(d + hi, 0, (size_t)(ow - hi) * sizeof(T));        \
                                if (sx == 1)                                                          \
                                    memcpy(d + lo, s, (size_t)(hi - lo) * sizeof(T));                 \
                                else                                                                  \
                                    for (int64_t i = lo; i < hi; i++) d[i] = s[(i - lo) * sx];        \
                            } else {                                                                  \
                                for (int64_t i = 0; i < lo; i++) d[i * ys2] = 0;                      \
                                for (int64_t i = lo; i < hi; i++) d[i * ys2] = s[(i - lo) * sx];      \
                                for (int64_t i = hi; i < ow; i++) d[i * ys2] = 0;                     \
                            }                                                                         \
                        }                                                                             \
                    }                                                                                 \
            }                                                                                         \
    }
DEF_IM2COL(4, uint32_t)
DEF_IM2COL(8, uint64_t)

/* Checks shared by im2col and col2im: x is the 4-d image side, cols the
 * 3-d column side (N, C*kh*kw, oh*ow). */
static int check_pair(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, const ordo_view *x,
                      const ordo_view *cols, conv_geom *g) {
    int r;
    if ((r = read_params(rc, name, a, 0, g))) return r;
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

int cpu_check_im2col(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g) {
    int r = cpu_check_args(rc, "im2col", a, 1, 1);
    if (r) return r;
    if ((r = check_pair(rc, "im2col", a, &a->in[0], &a->out[0], g))) return r;
    return cpu_check_writable(rc, "im2col", &a->out[0]);
}

static int k_im2col(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_im2col(rc, a, &g);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0];
    if (ordo_view_numel(y) == 0) return 0;
    if (ordo_dtype_size(x->dtype) == 8) im2col_8(&g, x, y);
    else im2col_4(&g, x, y);
    return 0;
}

/* ---- col2im --------------------------------------------------------------- */

/* d[i] += s[i] for contiguous rows, in blocks of CPU_BLK so that gcc -O2
 * vectorises it (see CPU_BLK in cpu_internal.h); d and s never overlap. */
#define DEF_ADD_ROW(SFX, T)                                                      \
    static void add_row_##SFX(T *d, const T *s, int64_t n) {                     \
        int64_t i = 0;                                                           \
        for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
            T t[CPU_BLK];                                                        \
            for (int k = 0; k < CPU_BLK; k++) t[k] = d[i + k] + s[i + k];         \
            for (int k = 0; k < CPU_BLK; k++) d[i + k] = t[k];                    \
        }                                                                        \
        for (; i < n; i++) d[i] += s[i];                                         \
    }
DEF_ADD_ROW(f32, float)
DEF_ADD_ROW(f64, double)

#define DEF_COL2IM(SFX, T)                                                                          \
    static void col2im_##SFX(const conv_geom *g, const ordo_view *cols, const ordo_view *x) {        \
        const int64_t xs0 = x->strides[0], xs1 = x->strides[1], xs2 = x->strides[2], xs3 = x->strides[3]; \
        const int64_t cs0 = cols->strides[0], cs1 = cols->strides[1], cs2 = cols->strides[2];        \
        const int64_t ow = g->ow, sx = g->sw * xs3;                                                   \
        for (int64_t n = 0; n < g->N; n++)                                                            \
            for (int64_t c = 0; c < g->C; c++) {                                                      \
                T *xp = (T *)x->data + n * xs0 + c * xs1;                                             \
                for (int64_t ki = 0; ki < g->kh; ki++)                                                \
                    for (int64_t kj = 0; kj < g->kw; kj++) {                                          \
                        const int64_t row = (c * g->kh + ki) * g->kw + kj;                            \
                        const T *cp = (const T *)cols->data + n * cs0 + row * cs1;                    \
                        const int64_t off = kj * g->dw - g->pw;                                       \
                        int64_t lo, hi;                                                               \
                        valid_range(off, g->sw, g->W, ow, &lo, &hi);                                  \
                        for (int64_t oy = 0; oy < g->oh; oy++) {                                      \
                            const int64_t iy = oy * g->sh - g->ph + ki * g->dh;                       \
                            if (iy < 0 || iy >= g->H || lo == hi) continue;                           \
                            const T *s = cp + (oy * ow + lo) * cs2;                                   \
                            T *d = xp + iy * xs2 + (lo * g->sw + off) * xs3;                          \
                            if (cs2 == 1 && sx == 1)                                                  \
                                add_row_##SFX(d, s, hi - lo);                                         \
                            else                                                                      \
                                for (int64_t i = 0; i < hi - lo; i++) d[i * sx] += s[i * cs2];        \
                        }                                                                             \
                    }                                                                                 \
            }                                                                                         \
    }
DEF_COL2IM(f32, float)
DEF_COL2IM(f64, double)

/* in: cols; out: x, fully written (zeroed, then every patch added). */
int cpu_check_col2im(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g) {
    int r = cpu_check_args(rc, "col2im", a, 1, 1);
    if (r) return r;
    if ((r = check_pair(rc, "col2im", a, &a->out[0], &a->in[0], g))) return r;
    return cpu_check_writable(rc, "col2im", &a->out[0]);
}

static int k_col2im(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_col2im(rc, a, &g);
    if (r) return r;
    const ordo_view *cols = &a->in[0], *x = &a->out[0];
    if (ordo_view_numel(x) == 0) return 0;
    static const double zero = 0; /* all-zero bits: 0.0 in float32 and float64 */
    cpu_fill_view(x, &zero);
    if (ordo_view_numel(cols) == 0) return 0;
    if (x->dtype == ORDO_F64) col2im_f64(&g, cols, x);
    else col2im_f32(&g, cols, x);
    return 0;
}

/* ---- max_pool2d ----------------------------------------------------------- */

/* Padding counts as -inf (never the max).  NaN propagates: the first NaN of
 * a window wins, as in Torch.  Ties keep the first index (row-major in the
 * window).  A window's taps are start + k d (dilation d); the check refuses
 * a geometry where some window has no real tap, so every window has a max.
 *
 * The loops run by taps over a chunk of POOL_CHUNK outputs of one row,
 * not window by window: the windows of a row are independent, so each tap
 * updates POOL_CHUNK running maxima with no dependency between them.  For
 * floats the update is branch-free (bit-mask selects; gcc compiles a
 * float ternary to a branch, mispredicted half the time on real data) and
 * ignores NaN, only noting whether one was seen; the rare chunk with a NaN
 * is then redone by the exact loop.  Together 4x faster than a plain
 * window-by-window loop on 2x2 pools (3.7 against 15 ms for 64x64x28x28). */
#define POOL_CHUNK 64

/* The first tap at or after 0 of a window whose taps are start + k d. */
static inline int64_t first_tap(int64_t start, int64_t d) {
    return start >= 0 ? start : start + (-start + d - 1) / d * d;
}

/* Whether every window along one dim (n inputs, out windows) has a tap in [0, n). */
static int every_window_real(int64_t n, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
    for (int64_t o = 0; o < out; o++) {
        const int64_t start = o * s - p, t = first_tap(start, d);
        if (t >= n || t > start + (k - 1) * d) return 0;
    }
    return 1;
}

/* The arguments of one chunk: outputs [o0, o0 + m) of the row whose windows
 * span input rows [y0, y1). */
typedef struct pool_chunk {
    const conv_geom *g;
    const char *xp; /* the plane */
    int64_t xs2, xs3, y0, y1, o0, m;
} pool_chunk;

/* Starts every output of the chunk at the first real element of its window. */
#define POOL_INIT(T)                                                                  \
    for (int64_t i = 0; i < pc->m; i++) {                                             \
        const int64_t x0 = first_tap((pc->o0 + i) * g->sw - g->pw, g->dw);           \
        best[i] = ((const T *)pc->xp)[pc->y0 * pc->xs2 + x0 * pc->xs3];               \
        bi[i] = pc->y0 * g->W + x0;                                                   \
    }

/* Every tap of the chunk in window order; the body (the macro's last
 * argument) updates best[i], bi[i] from v (the tap) and at (its flat index). */
#define POOL_TAPS(T, ...)                                                            \
    const int inside = pc->o0 * g->sw - g->pw >= 0 &&                             \
                       (pc->o0 + pc->m - 1) * g->sw - g->pw + (g->kw - 1) * g->dw + 1 <= g->W; \
    for (int64_t iy = pc->y0; iy < pc->y1; iy += g->dh) {                             \
        const T *row = (const T *)pc->xp + iy * pc->xs2;                              \
        for (int64_t kj = 0; kj < g->kw; kj++) {                                      \
            int64_t lo = 0, hi = pc->m; /* the outputs whose tap kj is real */    \
            if (!inside) /* its divisions cost as much as a 2x2 window */         \
                valid_range(pc->o0 * g->sw + kj * g->dw - g->pw, g->sw, g->W, pc->m, &lo, &hi);\
            for (int64_t i = lo; i < hi; i++) {                                       \
                const int64_t col = (pc->o0 + i) * g->sw + kj * g->dw - g->pw;        \
                const T v = row[col * pc->xs3];                                       \
                const int64_t at = iy * g->W + col;                                   \
                __VA_ARGS__                                                           \
            }                                                                         \
        }                                                                             \
    }

#define DEF_POOL_EXACT(SFX, T)                                                                      \
    static void pool_exact_##SFX(const pool_chunk *pc, T *best, int64_t *bi) {                       \
        const conv_geom *g = pc->g;                                                                   \
        POOL_INIT(T)                                                                                  \
        POOL_TAPS(T, {                                                                                \
            const T b = best[i];                                                                      \
            /* larger, or the first NaN (best still a number) */                                      \
            if ((v > b) | ((v != v) & (b == b))) {                                                    \
                best[i] = v;                                                                          \
                bi[i] = at;                                                                           \
            }                                                                                         \
        })                                                                                            \
    }
DEF_POOL_EXACT(f32, float)
DEF_POOL_EXACT(f64, double)
DEF_POOL_EXACT(i32, int32_t)
DEF_POOL_EXACT(i64, int64_t)
DEF_POOL_EXACT(u8, uint8_t)

/* Returns 1 when a NaN was seen (the caller redoes the chunk exactly). */
#define DEF_POOL_FAST(SFX, T, U)                                                                    \
    static int pool_fast_##SFX(const pool_chunk *pc, T *best, int64_t *bi) {                         \
        const conv_geom *g = pc->g;                                                                   \
        int nan = 0;                                                                                  \
        POOL_INIT(T)                                                                                  \
        POOL_TAPS(T, {                                                                                \
            const T b = best[i];                                                                      \
            const int gt = v > b;                                                                     \
            nan |= v != v;                                                                            \
            U uv, ub;                                                                                 \
            memcpy(&uv, &v, sizeof uv);                                                               \
            memcpy(&ub, &b, sizeof ub);                                                               \
            const U m = (U)0 - (U)gt;                                                                 \
            const U r = (uv & m) | (ub & ~m);                                                         \
            memcpy(&best[i], &r, sizeof r);                                                           \
            const uint64_t m64 = (uint64_t)0 - (uint64_t)gt;                                          \
            bi[i] = (int64_t)(((uint64_t)at & m64) | ((uint64_t)bi[i] & ~m64));                       \
        })                                                                                            \
        return nan;                                                                                   \
    }
DEF_POOL_FAST(f32, float, uint32_t)
DEF_POOL_FAST(f64, double, uint64_t)

#define POOL_FAST_OR_EXACT_f32(pc, b, i) (pool_fast_f32(pc, b, i) ? (pool_exact_f32(pc, b, i), 0) : 0)
#define POOL_FAST_OR_EXACT_f64(pc, b, i) (pool_fast_f64(pc, b, i) ? (pool_exact_f64(pc, b, i), 0) : 0)
#define POOL_FAST_OR_EXACT_i32(pc, b, i) (pool_exact_i32(pc, b, i), 0)
#define POOL_FAST_OR_EXACT_i64(pc, b, i) (pool_exact_i64(pc, b, i), 0)
#define POOL_FAST_OR_EXACT_u8(pc, b, i) (pool_exact_u8(pc, b, i), 0)

#define DEF_MAXPOOL(SFX, T)                                                                         \
    static void maxpool_##SFX(const conv_geom *g, const ordo_view *x, const ordo_view *y,            \
                              const ordo_view *ix) {                                                 \
        T best[POOL_CHUNK];                                                                          \
        int64_t bi[POOL_CHUNK];                                                                      \
        pool_chunk pc = {g, NULL, x->strides[2], x->strides[3], 0, 0, 0, 0};                          \
        for (int64_t n = 0; n < g->N; n++)                                                            \
            for (int64_t c = 0; c < g->C; c++) {                                                      \
                pc.xp = (const char *)((const T *)x->data + n * x->strides[0] + c * x->strides[1]);   \
                T *yp = (T *)y->data + n * y->strides[0] + c * y->strides[1];                         \
                int64_t *ip = (int64_t *)ix->data + n * ix->strides[0] + c * ix->strides[1];          \
                for (int64_t oy = 0; oy < g->oh; oy++) {                                              \
                    const int64_t start = oy * g->sh - g->ph;                                         \
                    pc.y0 = first_tap(start, g->dh);                                                  \
                    pc.y1 = start + (g->kh - 1) * g->dh + 1;                                          \
                    if (pc.y1 > g->H) pc.y1 = g->H;                                                   \
                    for (pc.o0 = 0; pc.o0 < g->ow; pc.o0 += POOL_CHUNK) {                             \
                        pc.m = g->ow - pc.o0 < POOL_CHUNK ? g->ow - pc.o0 : POOL_CHUNK;               \
                        (void)POOL_FAST_OR_EXACT_##SFX(&pc, best, bi);                                \
                        for (int64_t i = 0; i < pc.m; i++) {                                          \
                            yp[oy * y->strides[2] + (pc.o0 + i) * y->strides[3]] = best[i];           \
                            ip[oy * ix->strides[2] + (pc.o0 + i) * ix->strides[3]] = bi[i];           \
                        }                                                                             \
                    }                                                                                 \
                }                                                                                     \
            }                                                                                         \
    }
DEF_MAXPOOL(f32, float)
DEF_MAXPOOL(f64, double)
DEF_MAXPOOL(i32, int32_t)
DEF_MAXPOOL(i64, int64_t)
DEF_MAXPOOL(u8, uint8_t)

static int pool_shapes_ok(const conv_geom *g, const ordo_view *v) {
    return v->ndim == 4 && v->shape[0] == g->N && v->shape[1] == g->C && v->shape[2] == g->oh && v->shape[3] == g->ow;
}

int cpu_check_max_pool2d(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g) {
    int r = cpu_check_args(rc, "max_pool2d", a, 1, 2);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
    if ((r = read_params(rc, "max_pool2d", a, 1, g))) return r;
    if (g->ph > g->kh / 2 || g->pw > g->kw / 2)
        return ordo_fail(rc, "max_pool2d: padding %lldx%lld must be at most half the kernel %lldx%lld",
                         (long long)g->ph, (long long)g->pw, (long long)g->kh, (long long)g->kw);
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "max_pool2d: dtype mismatch: x is %s but out is %s", ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype));
    if (ix->dtype != ORDO_I64)
        return ordo_fail(rc, "max_pool2d: indices must be int64, got %s", ordo_dtype_name(ix->dtype));
    if ((r = read_input(rc, "max_pool2d", "x", x, g))) return r;
    if (!every_window_real(g->H, g->oh, g->kh, g->sh, g->ph, g->dh) ||
        !every_window_real(g->W, g->ow, g->kw, g->sw, g->pw, g->dw))
        return ordo_fail(rc, "max_pool2d: a window of kernel %lldx%lld (dilation %lldx%lld, padding %lldx%lld) "
                             "over input %lldx%lld holds only padding",
                         (long long)g->kh, (long long)g->kw, (long long)g->dh, (long long)g->dw, (long long)g->ph,
                         (long long)g->pw, (long long)g->H, (long long)g->W);
    if (!pool_shapes_ok(g, y) || !pool_shapes_ok(g, ix)) {
        char sx[160], sy[160], si[160];
        return ordo_fail(rc, "max_pool2d: shape mismatch: x %s gives out [%lld, %lld, %lld, %lld], got out %s and "
                             "indices %s",
                         cpu_shape_str(x, sx, sizeof sx), (long long)g->N, (long long)g->C, (long long)g->oh,
                         (long long)g->ow, cpu_shape_str(y, sy, sizeof sy), cpu_shape_str(ix, si, sizeof si));
    }
    if ((r = cpu_check_writable(rc, "max_pool2d", y))) return r;
    return cpu_check_writable(rc, "max_pool2d", ix);
}

static int k_max_pool2d(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    conv_geom g;
    int r = cpu_check_max_pool2d(rc, a, &g);
    if (r) return r;
    const ordo_view *x = &a->in[0], *y = &a->out[0], *ix = &a->out[1];
    if (ordo_view_numel(y) == 0) return 0;
    switch (x->dtype) {
    case ORDO_F32: maxpool_f32(&g, x, y, ix); break;
    case ORDO_F64: maxpool_f64(&g, x, y, ix); break;
    case ORDO_I32: maxpool_i32(&g, x, y, ix); break;
    case ORDO_I64: maxpool_i64(&g, x, y, ix); break;
    default: maxpool_u8(&g, x, y, ix); break;
    }
    return 0;
}

/* ---- max_pool2d_backward -------------------------------------------------- */

/* gx[n, c] is zeroed, then gx[n, c].flat[idx[n, c, i, j]] += gy[n, c, i, j]
 * in row-major order of (i, j): overlapping windows add up. */
#define DEF_POOL_BW(SFX, T)                                                                         \
    static void poolbw_##SFX(const ordo_view *gy, const ordo_view *ix, const ordo_view *gx) {         \
        const int64_t W = gx->shape[3], oh = gy->shape[2], ow = gy->shape[3];                         \
        const int64_t gs2 = gy->strides[2], gs3 = gy->strides[3], is2 = ix->strides[2], is3 = ix->strides[3]; \
        const int64_t xs2 = gx->strides[2], xs3 = gx->strides[3];                                     \
        /* a contiguous plane takes the flat index as is: no division per element */                 \
        const int flat = xs3 == 1 && (xs2 == W || gx->shape[2] == 1);                                 \
        for (int64_t n = 0; n < gy->shape[0]; n++)                                                    \
            for (int64_t c = 0; c < gy->shape[1]; c++) {                                              \
                const T *gp = (const T *)gy->data + n * gy->strides[0] + c * gy->strides[1];          \
                const int64_t *ip = (const int64_t *)ix->data + n * ix->strides[0] + c * ix->strides[1]; \
                T *xp = (T *)gx->data + n * gx->strides[0] + c * gx->strides[1];                      \
                for (int64_t i = 0; i < oh; i++) {                                                    \
                    const T *g = gp + i * gs2;                                                        \
                    const int64_t *k = ip + i * is2;                                                  \
                    if (flat && gs3 == 1 && is3 == 1)                                                 \
                        for (int64_t j = 0; j < ow; j++) xp[k[j]] += g[j];                            \
                    else                                                                              \
                        for (int64_t j = 0; j < ow; j++) {                                            \
                            const int64_t kj = k[j * is3];                                            \
                            xp[flat ? kj : (kj / W) * xs2 + (kj % W) * xs3] += g[j * gs3];            \
                        }                                                                             \
                }                                                                                     \
            }                                                                                         \
    }
DEF_POOL_BW(f32, float)
DEF_POOL_BW(f64, double)

/* in: gy (N, C, oh, ow), indices (int64, same shape); out: gx (N, C, H, W).
 * Every index is checked before gx is touched: a failed op leaves gx as it
 * was. */
int cpu_check_max_pool2d_backward(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
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
    return cpu_check_writable(rc, name, gx);
}

static int k_max_pool2d_backward(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    const char *name = "max_pool2d_backward";
    int r = cpu_check_max_pool2d_backward(rc, a);
    if (r) return r;
    const ordo_view *gy = &a->in[0], *ix = &a->in[1], *gx = &a->out[0];
    const int64_t plane = gx->shape[2] * gx->shape[3];
    const int64_t is2 = ix->strides[2], is3 = ix->strides[3];
    for (int64_t n = 0; n < ix->shape[0]; n++)
        for (int64_t c = 0; c < ix->shape[1]; c++)
            for (int64_t i = 0; i < ix->shape[2]; i++) {
                const int64_t *k = (const int64_t *)ix->data + n * ix->strides[0] + c * ix->strides[1] + i * is2;
                /* one unsigned compare catches negatives too; no branch per element */
                uint64_t bad = 0;
                for (int64_t j = 0; j < ix->shape[3]; j++) bad |= (uint64_t)k[j * is3] >= (uint64_t)plane;
                if (!bad) continue;
                for (int64_t j = 0;; j++)
                    if ((uint64_t)k[j * is3] >= (uint64_t)plane)
                        return ordo_fail(rc, "%s: index %lld out of range for a %lldx%lld plane", name,
                                         (long long)k[j * is3], (long long)gx->shape[2], (long long)gx->shape[3]);
            }
    if (ordo_view_numel(gx) == 0) return 0;
    static const double zero = 0;
    cpu_fill_view(gx, &zero);
    if (gx->dtype == ORDO_F64) poolbw_f64(gy, ix, gx);
    else poolbw_f32(gy, ix, gx);
    return 0;
}

void cpu_register_conv(void) {
    static const cpu_kernel_entry t[] = {
        {"im2col", k_im2col},
        {"col2im", k_col2im},
        {"max_pool2d", k_max_pool2d},
        {"max_pool2d_backward", k_max_pool2d_backward},
    };
    CPU_REGISTER_TABLE(t);
}
