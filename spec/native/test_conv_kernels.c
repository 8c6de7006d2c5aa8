/*
 * test_conv_kernels.c - the convolution and pooling kernels of
 * kernels/cpu/conv.c (im2col, col2im, max_pool2d, max_pool2d_backward).
 *
 * Each kernel is called directly (ordo_kernel_lookup + a run context with
 * no op) on random geometries - kernel 1 to 4, stride 1 to 3, padding up
 * to what the kernel allows, dilation 1 to 2, planes from 1x1 up, empty
 * batches - and on views that are contiguous, transposed, padded or offset,
 * and compared element by element with plain loops written here from the
 * definitions (Torch's output-size formula, zero padding for im2col, -inf
 * padding and first-index ties and NaN propagation for max pooling).
 * Moves (im2col, max_pool2d values and indices) must match exactly; col2im
 * and the pool backward add in the kernel's order, so they match exactly
 * too, and im2col/col2im are also checked to be adjoint (<im2col x, c> =
 * <x, col2im c>).  The failures (bad shapes, dtypes, params, indices) run
 * through the engine, which must report the op failed with a message
 * naming the kernel and the problem.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_util.h"
#include "kernel_test.h"

/* ------------------------------------------------------------------ */
/* Views over their own buffers                                        */

typedef struct tv {
    ordo_view v;
    char *base;
    size_t nbytes;
} tv;

/* A view of shape over a fresh zeroed buffer; with any_layout, a random
 * memory order of the dims, padding after some dims and an offset. */
static tv tv_new(int dtype, int ndim, const int64_t *shape, int any_layout) {
    tv t;
    memset(&t, 0, sizeof t);
    t.v.dtype = dtype;
    t.v.ndim = ndim;
    int perm[ORDO_MAX_DIMS];
    for (int d = 0; d < ndim; d++) perm[d] = d, t.v.shape[d] = shape[d];
    if (any_layout && rnd(0, 1))
        for (int d = ndim - 1; d > 0; d--) {
            int j = (int)rnd(0, d), x = perm[d];
            perm[d] = perm[j];
            perm[j] = x;
        }
    int64_t stride = any_layout && rnd(0, 4) == 0 ? 2 : 1;
    for (int k = ndim - 1; k >= 0; k--) {
        int d = perm[k];
        t.v.strides[d] = stride;
        int64_t pad = any_layout && rnd(0, 3) == 0 ? rnd(1, 3) : 0;
        stride *= (shape[d] > 0 ? shape[d] : 1) + pad;
    }
    int64_t maxoff = 0, numel = 1;
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        if (shape[d] > 0) maxoff += (shape[d] - 1) * t.v.strides[d];
    }
    int64_t off = any_layout ? rnd(0, 3) : 0;
    size_t es = ordo_dtype_size(dtype);
    t.nbytes = (size_t)(off + (numel ? maxoff + 1 : 1)) * es;
    t.base = calloc(1, t.nbytes);
    t.v.data = t.base + off * (int64_t)es;
    return t;
}

static void tv_free(tv *t) { free(t->base); }

static int64_t off4(const ordo_view *v, int64_t a, int64_t b, int64_t c, int64_t d) {
    return a * v->strides[0] + b * v->strides[1] + c * v->strides[2] + d * v->strides[3];
}
static int64_t off3(const ordo_view *v, int64_t a, int64_t b, int64_t c) {
    return a * v->strides[0] + b * v->strides[1] + c * v->strides[2];
}

static double ld(const ordo_view *v, int64_t off) {
    const char *p = (const char *)v->data + off * (int64_t)ordo_dtype_size(v->dtype);
    switch (v->dtype) {
    case ORDO_F32: return *(const float *)p;
    case ORDO_F64: return *(const double *)p;
    case ORDO_I32: return *(const int32_t *)p;
    case ORDO_I64: return (double)*(const int64_t *)p;
    default: return *(const uint8_t *)p;
    }
}
static void st(const ordo_view *v, int64_t off, double x) {
    char *p = (char *)v->data + off * (int64_t)ordo_dtype_size(v->dtype);
    switch (v->dtype) {
    case ORDO_F32: *(float *)p = (float)x; break;
    case ORDO_F64: *(double *)p = x; break;
    case ORDO_I32: *(int32_t *)p = (int32_t)x; break;
    case ORDO_I64: *(int64_t *)p = (int64_t)x; break;
    default: *(uint8_t *)p = (uint8_t)x; break;
    }
}

/* Fills every slot of the buffer: small random values, exactly
 * representable (multiples of 1/8 in [-4, 4], or 0..255 for uint8) so that
 * ties happen and sums of a few are exact; nan_every > 0 plants NaNs. */
static void tv_rand(tv *t, int nan_every) {
    size_t es = ordo_dtype_size(t->v.dtype), n = t->nbytes / es;
    for (size_t i = 0; i < n; i++) {
        char *p = t->base + i * es;
        double x = (double)rnd(-32, 32) / 8;
        if (nan_every && rnd(0, nan_every - 1) == 0) x = NAN;
        switch (t->v.dtype) {
        case ORDO_F32: *(float *)p = (float)x; break;
        case ORDO_F64: *(double *)p = x; break;
        case ORDO_I32: *(int32_t *)p = (int32_t)rnd(-20, 20); break;
        case ORDO_I64: *(int64_t *)p = rnd(-20, 20); break;
        default: *(uint8_t *)p = (uint8_t)rnd(0, 255); break;
        }
    }
}

static int same_val(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* ------------------------------------------------------------------ */
/* Geometry                                                            */

typedef struct geom {
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} geom;

static int64_t osize(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (n + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* A random geometry whose (dilated) kernel fits the padded input;
 * pool: no dilation and padding <= kernel / 2. */
static geom rand_geom(int pool) {
    geom g;
    for (;;) {
        g.N = rnd(0, 9) == 0 ? 0 : rnd(1, 3);
        g.C = rnd(1, 3);
        g.kh = rnd(1, 4);
        g.kw = rnd(1, 4);
        g.sh = rnd(1, 3);
        g.sw = rnd(1, 3);
        g.dh = pool ? 1 : rnd(1, 2);
        g.dw = pool ? 1 : rnd(1, 2);
        g.ph = rnd(0, pool ? g.kh / 2 : 2);
        g.pw = rnd(0, pool ? g.kw / 2 : 2);
        g.H = rnd(0, 3) == 0 ? rnd(1, 3) : rnd(4, 11);
        g.W = rnd(0, 5) == 0 ? rnd(1, 3) : rnd(4, 40); /* long rows: the chunked pool loop */
        if (rnd(0, 7) == 0) g.W = rnd(60, 140);
        if (g.H + 2 * g.ph >= g.dh * (g.kh - 1) + 1 && g.W + 2 * g.pw >= g.dw * (g.kw - 1) + 1) break;
    }
    g.oh = osize(g.H, g.kh, g.sh, g.ph, g.dh);
    g.ow = osize(g.W, g.kw, g.sw, g.pw, g.dw);
    return g;
}

static void set_params(ordo_kernel_args *a, const geom *g, int dilation) {
    int64_t p[8] = {g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
    a->niparam = dilation ? 8 : 6;
    memcpy(a->iparam, p, sizeof p);
}

/* cols of shape (N, C*kh*kw, oh*ow); layout 0 contiguous, 1 the
 * (C*kh*kw, N, oh*ow) layout conv2d's one-GEMM form uses, 2 random. */
static tv cols_new(int dt, const geom *g, int layout) {
    int64_t rows = g->C * g->kh * g->kw, L = g->oh * g->ow;
    if (layout == 1) {
        int64_t s[3] = {rows, g->N, L};
        tv t = tv_new(dt, 3, s, 0);
        t.v.shape[0] = g->N;
        t.v.shape[1] = rows;
        int64_t s0 = t.v.strides[0];
        t.v.strides[0] = t.v.strides[1];
        t.v.strides[1] = s0;
        return t;
    }
    int64_t s[3] = {g->N, rows, L};
    return tv_new(dt, 3, s, layout == 2);
}

/* ------------------------------------------------------------------ */
/* im2col / col2im                                                     */

/* The input element under tap (ki, kj) of output (oy, ox), or 0 (padding). */
static double ref_tap(const geom *g, const ordo_view *x, int64_t n, int64_t c, int64_t ki, int64_t kj, int64_t oy,
                      int64_t ox, int *inside) {
    int64_t iy = oy * g->sh - g->ph + ki * g->dh, ix = ox * g->sw - g->pw + kj * g->dw;
    *inside = iy >= 0 && iy < g->H && ix >= 0 && ix < g->W;
    return *inside ? ld(x, off4(x, n, c, iy, ix)) : 0;
}

static void kernel_im2col_matches_reference(void) {
    begin();
    const int dts[2] = {ORDO_F32, ORDO_F64};
    for (int trial = 0; trial < 300; trial++) {
        geom g = rand_geom(0);
        int dt = dts[trial % 2];
        int64_t xs[4] = {g.N, g.C, g.H, g.W};
        tv x = tv_new(dt, 4, xs, 1);
        tv_rand(&x, 0);
        tv y = cols_new(dt, &g, (int)rnd(0, 2));
        memset(y.base, 0xff, y.nbytes); /* every element must be written */
        ordo_kernel_args a = args0();
        a.nin = a.nout = 1;
        a.in[0] = x.v;
        a.out[0] = y.v;
        set_params(&a, &g, g.dh != 1 || g.dw != 1 || rnd(0, 1));
        int rc = call("im2col", &a);
        if (rc) BAD("im2col failed (%d) on trial %d", rc, trial);
        for (int64_t n = 0; n < g.N && !rc; n++)
            for (int64_t c = 0; c < g.C; c++)
                for (int64_t ki = 0; ki < g.kh; ki++)
                    for (int64_t kj = 0; kj < g.kw; kj++)
                        for (int64_t oy = 0; oy < g.oh; oy++)
                            for (int64_t ox = 0; ox < g.ow; ox++) {
                                int in;
                                double want = ref_tap(&g, &x.v, n, c, ki, kj, oy, ox, &in);
                                int64_t row = (c * g.kh + ki) * g.kw + kj;
                                double got = ld(&y.v, off3(&y.v, n, row, oy * g.ow + ox));
                                if (!same_val(got, want))
                                    BAD("im2col %s trial %d: [%lld, %lld, %lld] = %g, want %g", ordo_dtype_name(dt),
                                        trial, (long long)n, (long long)row, (long long)(oy * g.ow + ox), got, want);
                            }
        tv_free(&x);
        tv_free(&y);
    }
    END();
}

static void kernel_col2im_matches_reference_and_is_adjoint(void) {
    begin();
    const int dts[2] = {ORDO_F32, ORDO_F64};
    for (int trial = 0; trial < 300; trial++) {
        geom g = rand_geom(0);
        int dt = dts[trial % 2];
        int64_t xs[4] = {g.N, g.C, g.H, g.W};
        tv c = cols_new(dt, &g, (int)rnd(0, 2));
        tv_rand(&c, 0);
        tv x = tv_new(dt, 4, xs, 1);
        for (size_t i = 0; i < x.nbytes; i++) x.base[i] = (char)0xff; /* NaN: must be overwritten */
        tv ref = tv_new(ORDO_F64, 4, xs, 0);
        ordo_kernel_args a = args0();
        a.nin = a.nout = 1;
        a.in[0] = c.v;
        a.out[0] = x.v;
        set_params(&a, &g, 1);
        int rc = call("col2im", &a);
        if (rc) BAD("col2im failed (%d) on trial %d", rc, trial);
        /* reference: the kernel's order of additions, so exact */
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t ch = 0; ch < g.C; ch++)
                for (int64_t ki = 0; ki < g.kh; ki++)
                    for (int64_t kj = 0; kj < g.kw; kj++)
                        for (int64_t oy = 0; oy < g.oh; oy++)
                            for (int64_t ox = 0; ox < g.ow; ox++) {
                                int64_t iy = oy * g.sh - g.ph + ki * g.dh, ix = ox * g.sw - g.pw + kj * g.dw;
                                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                                int64_t row = (ch * g.kh + ki) * g.kw + kj;
                                double v = ld(&c.v, off3(&c.v, n, row, oy * g.ow + ox));
                                int64_t o = off4(&ref.v, n, ch, iy, ix);
                                /* float32: round each partial sum as the kernel does */
                                double s = ld(&ref.v, o) + v;
                                st(&ref.v, o, dt == ORDO_F32 ? (double)(float)s : s);
                            }
        double dot_cx = 0, dot_xc = 0;
        for (int64_t n = 0; n < g.N && !rc; n++)
            for (int64_t ch = 0; ch < g.C; ch++)
                for (int64_t i = 0; i < g.H; i++)
                    for (int64_t j = 0; j < g.W; j++) {
                        double got = ld(&x.v, off4(&x.v, n, ch, i, j)), want = ld(&ref.v, off4(&ref.v, n, ch, i, j));
                        if (got != want)
                            BAD("col2im %s trial %d: [%lld, %lld, %lld, %lld] = %g, want %g", ordo_dtype_name(dt), trial,
                                (long long)n, (long long)ch, (long long)i, (long long)j, got, want);
                        /* adjoint: <x0, col2im c> with x0 = the index pattern below */
                        dot_xc += got * (double)((n * 7 + ch * 5 + i * 3 + j) % 11 - 5);
                    }
        /* <im2col x0, c>: x0's taps summed against c */
        for (int64_t n = 0; n < g.N && !rc; n++)
            for (int64_t ch = 0; ch < g.C; ch++)
                for (int64_t ki = 0; ki < g.kh; ki++)
                    for (int64_t kj = 0; kj < g.kw; kj++)
                        for (int64_t oy = 0; oy < g.oh; oy++)
                            for (int64_t ox = 0; ox < g.ow; ox++) {
                                int64_t iy = oy * g.sh - g.ph + ki * g.dh, ix = ox * g.sw - g.pw + kj * g.dw;
                                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                                int64_t row = (ch * g.kh + ki) * g.kw + kj;
                                dot_cx += ld(&c.v, off3(&c.v, n, row, oy * g.ow + ox)) *
                                          (double)((n * 7 + ch * 5 + iy * 3 + ix) % 11 - 5);
                            }
        if (fabs(dot_cx - dot_xc) > 1e-9 * (1 + fabs(dot_cx)))
            BAD("col2im trial %d is not im2col's adjoint: %.17g vs %.17g", trial, dot_cx, dot_xc);
        tv_free(&c);
        tv_free(&x);
        tv_free(&ref);
    }
    END();
}

/* A 1x1 kernel, stride 1, no padding: im2col is a reshape, col2im its inverse. */
static void kernel_im2col_identity_cases(void) {
    begin();
    geom g = {2, 3, 5, 7, 1, 1, 1, 1, 0, 0, 1, 1, 5, 7};
    int64_t xs[4] = {2, 3, 5, 7};
    tv x = tv_new(ORDO_F32, 4, xs, 0), back = tv_new(ORDO_F32, 4, xs, 0);
    tv_rand(&x, 0);
    tv c = cols_new(ORDO_F32, &g, 0);
    ordo_kernel_args a = args0();
    a.nin = a.nout = 1;
    a.in[0] = x.v;
    a.out[0] = c.v;
    set_params(&a, &g, 0);
    CHECK_EQ_LONG(call("im2col", &a), 0);
    CHECK(memcmp(x.base, c.base, x.nbytes) == 0);
    a.in[0] = c.v;
    a.out[0] = back.v;
    CHECK_EQ_LONG(call("col2im", &a), 0);
    CHECK(memcmp(x.base, back.base, x.nbytes) == 0);
    tv_free(&x);
    tv_free(&back);
    tv_free(&c);
    END();
}

/* ------------------------------------------------------------------ */
/* max_pool2d                                                          */

static void ref_pool(const geom *g, const ordo_view *x, int64_t n, int64_t c, int64_t oy, int64_t ox, double *best,
                     int64_t *bi) {
    *best = -INFINITY;
    *bi = -1;
    for (int64_t ki = 0; ki < g->kh; ki++)
        for (int64_t kj = 0; kj < g->kw; kj++) {
            int64_t iy = oy * g->sh - g->ph + ki, ix = ox * g->sw - g->pw + kj;
            if (iy < 0 || iy >= g->H || ix < 0 || ix >= g->W) continue;
            double v = ld(x, off4(x, n, c, iy, ix));
            if (*bi < 0 || (!isnan(*best) && (v > *best || isnan(v)))) {
                *best = v;
                *bi = iy * g->W + ix;
            }
        }
}

static void kernel_max_pool2d_matches_reference(void) {
    begin();
    const int dts[5] = {ORDO_F32, ORDO_F64, ORDO_I32, ORDO_I64, ORDO_U8};
    for (int trial = 0; trial < 400; trial++) {
        geom g = rand_geom(1);
        int dt = dts[trial % 5];
        int64_t xs[4] = {g.N, g.C, g.H, g.W}, ys[4] = {g.N, g.C, g.oh, g.ow};
        tv x = tv_new(dt, 4, xs, 1);
        /* a few trials with NaNs (one in 5 or one in 40 elements) */
        tv_rand(&x, (dt == ORDO_F32 || dt == ORDO_F64) && trial % 3 == 0 ? (trial % 2 ? 5 : 40) : 0);
        tv y = tv_new(dt, 4, ys, 1), ix = tv_new(ORDO_I64, 4, ys, 1);
        ordo_kernel_args a = args_n(1, 2);
        a.in[0] = x.v;
        a.out[0] = y.v;
        a.out[1] = ix.v;
        set_params(&a, &g, 0);
        int rc = call("max_pool2d", &a);
        if (rc) BAD("max_pool2d failed (%d) on trial %d", rc, trial);
        for (int64_t n = 0; n < g.N && !rc; n++)
            for (int64_t c = 0; c < g.C; c++)
                for (int64_t oy = 0; oy < g.oh; oy++)
                    for (int64_t ox = 0; ox < g.ow; ox++) {
                        double want;
                        int64_t wi;
                        ref_pool(&g, &x.v, n, c, oy, ox, &want, &wi);
                        double got = ld(&y.v, off4(&y.v, n, c, oy, ox));
                        int64_t gi = *((int64_t *)ix.v.data + off4(&ix.v, n, c, oy, ox));
                        if (!same_val(got, want) || gi != wi)
                            BAD("max_pool2d %s trial %d k %lldx%lld s %lldx%lld p %lldx%lld: [%lld, %lld, %lld, %lld] = "
                                "%g at %lld, want %g at %lld",
                                ordo_dtype_name(dt), trial, (long long)g.kh, (long long)g.kw, (long long)g.sh,
                                (long long)g.sw, (long long)g.ph, (long long)g.pw, (long long)n, (long long)c,
                                (long long)oy, (long long)ox, got, (long long)gi, want, (long long)wi);
                    }
        tv_free(&x);
        tv_free(&y);
        tv_free(&ix);
    }
    END();
}

static void kernel_max_pool2d_backward_matches_reference(void) {
    begin();
    for (int trial = 0; trial < 300; trial++) {
        geom g = rand_geom(1);
        int dt = trial % 2 ? ORDO_F64 : ORDO_F32;
        int64_t xs[4] = {g.N, g.C, g.H, g.W}, ys[4] = {g.N, g.C, g.oh, g.ow};
        tv x = tv_new(dt, 4, xs, 0);
        tv_rand(&x, 0);
        tv y = tv_new(dt, 4, ys, 0), ix = tv_new(ORDO_I64, 4, ys, trial % 3 == 0);
        ordo_kernel_args a = args_n(1, 2);
        a.in[0] = x.v;
        a.out[0] = y.v;
        a.out[1] = ix.v;
        set_params(&a, &g, 0);
        CHECK_EQ_LONG(call("max_pool2d", &a), 0);
        tv gy = tv_new(dt, 4, ys, 1), gx = tv_new(dt, 4, xs, 1), ref = tv_new(ORDO_F64, 4, xs, 0);
        tv_rand(&gy, 0);
        for (size_t i = 0; i < gx.nbytes; i++) gx.base[i] = (char)0xff; /* fully written */
        ordo_kernel_args b = args_n(2, 1);
        b.in[0] = gy.v;
        b.in[1] = ix.v;
        b.out[0] = gx.v;
        int rc = call("max_pool2d_backward", &b);
        if (rc) BAD("max_pool2d_backward failed (%d) on trial %d", rc, trial);
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t c = 0; c < g.C; c++)
                for (int64_t oy = 0; oy < g.oh; oy++)
                    for (int64_t ox = 0; ox < g.ow; ox++) {
                        int64_t k = *((int64_t *)ix.v.data + off4(&ix.v, n, c, oy, ox));
                        int64_t o = off4(&ref.v, n, c, k / g.W, k % g.W);
                        double s = ld(&ref.v, o) + ld(&gy.v, off4(&gy.v, n, c, oy, ox));
                        st(&ref.v, o, dt == ORDO_F32 ? (double)(float)s : s);
                    }
        for (int64_t n = 0; n < g.N && !rc; n++)
            for (int64_t c = 0; c < g.C; c++)
                for (int64_t i = 0; i < g.H; i++)
                    for (int64_t j = 0; j < g.W; j++) {
                        double got = ld(&gx.v, off4(&gx.v, n, c, i, j)), want = ld(&ref.v, off4(&ref.v, n, c, i, j));
                        if (got != want)
                            BAD("max_pool2d_backward trial %d: [%lld, %lld, %lld, %lld] = %g, want %g", trial,
                                (long long)n, (long long)c, (long long)i, (long long)j, got, want);
                    }
        tv_free(&x);
        tv_free(&y);
        tv_free(&ix);
        tv_free(&gy);
        tv_free(&gx);
        tv_free(&ref);
    }
    END();
}

/* Hand-checked cases: a 4x4 plane pooled 2x2 (stride 2, and stride 1 where
 * the windows overlap and the backward adds up), padding, NaN, ties. */
static void kernel_max_pool2d_known_values(void) {
    begin();
    double xv[16] = {1, 5, 2, 0, 3, 4, 7, 7, 9, 8, NAN, 6, 0, 9, 1, 2};
    int64_t xs[4] = {1, 1, 4, 4}, ys[4] = {1, 1, 2, 2};
    tv x = tv_new(ORDO_F64, 4, xs, 0), y = tv_new(ORDO_F64, 4, ys, 0), ix = tv_new(ORDO_I64, 4, ys, 0);
    memcpy(x.v.data, xv, sizeof xv);
    ordo_kernel_args a = args_n(1, 2);
    a.in[0] = x.v;
    a.out[0] = y.v;
    a.out[1] = ix.v;
    a.niparam = 6;
    int64_t p[6] = {2, 2, 2, 2, 0, 0};
    memcpy(a.iparam, p, sizeof p);
    CHECK_EQ_LONG(call("max_pool2d", &a), 0);
    const double *yd = y.v.data;
    const int64_t *id = ix.v.data;
    CHECK(yd[0] == 5 && id[0] == 1);
    CHECK(yd[1] == 7 && id[1] == 6); /* tie 7, 7: the first */
    CHECK(yd[2] == 9 && id[2] == 8); /* tie 9 at 8 and 13 */
    CHECK(isnan(yd[3]) && id[3] == 10);
    /* padding 1, kernel 3, stride 2 on the same plane: 2x2 outputs */
    p[0] = p[1] = 3;
    p[4] = p[5] = 1;
    memcpy(a.iparam, p, sizeof p);
    xv[10] = -1;
    memcpy(x.v.data, xv, sizeof xv);
    CHECK_EQ_LONG(call("max_pool2d", &a), 0);
    CHECK(yd[0] == 5 && id[0] == 1);
    CHECK(yd[1] == 7 && id[1] == 6);
    CHECK(yd[2] == 9 && id[2] == 8);
    CHECK(yd[3] == 9 && id[3] == 13);
    /* all -inf: the index is still a real element of the window */
    for (int i = 0; i < 16; i++) ((double *)x.v.data)[i] = -INFINITY;
    CHECK_EQ_LONG(call("max_pool2d", &a), 0);
    CHECK(id[0] == 0 && id[1] == 1 && id[2] == 4 && id[3] == 5);
    tv_free(&x);
    tv_free(&y);
    tv_free(&ix);
    END();
}

/* ------------------------------------------------------------------ */
/* Failures                                                            */

static void conv_kernels_fail_clearly(void) {
    int64_t xs[4] = {2, 3, 5, 5}, cs[3] = {2, 27, 9}, ys[4] = {2, 3, 2, 2};
    tv x = tv_new(ORDO_F32, 4, xs, 0), c = tv_new(ORDO_F32, 3, cs, 0), xd = tv_new(ORDO_F64, 4, xs, 0);
    tv xi = tv_new(ORDO_I32, 4, xs, 0), ci = tv_new(ORDO_I32, 3, cs, 0);
    tv y = tv_new(ORDO_F32, 4, ys, 0), ix = tv_new(ORDO_I64, 4, ys, 0), ix32 = tv_new(ORDO_I32, 4, ys, 0);
    ordo_kernel_args a = args0();
    a.nin = a.nout = 1;
    a.in[0] = x.v;
    a.out[0] = c.v;
    a.niparam = 6;
    int64_t good[6] = {3, 3, 1, 1, 0, 0};
    memcpy(a.iparam, good, sizeof good);
    char msg[256];
    CHECK_EQ_LONG(run_engine("im2col", &a, msg, sizeof msg), 0);

    ordo_kernel_args b = a;
    b.niparam = 4;
    EXPECT_FAIL("im2col", &b, "needs 6 iparams");
    b = a;
    b.iparam[2] = 0;
    EXPECT_FAIL("im2col", &b, "stride 0x1 must be positive");
    b = a;
    b.iparam[4] = -1;
    EXPECT_FAIL("im2col", &b, "padding -1x0 must be >= 0");
    b = a;
    b.iparam[0] = 0;
    EXPECT_FAIL("im2col", &b, "kernel size 0x3 must be positive");
    b = a;
    b.niparam = 8;
    b.iparam[6] = 0;
    b.iparam[7] = 1;
    EXPECT_FAIL("im2col", &b, "dilation 0x1 must be positive");
    b = a;
    b.iparam[0] = 7;
    EXPECT_FAIL("im2col", &b, "kernel 7x3 (dilation 1x1) is larger than the padded input 5x5");
    b = a;
    b.niparam = 8;
    b.iparam[6] = 3;
    b.iparam[7] = 1;
    EXPECT_FAIL("im2col", &b, "larger than the padded input"); /* 3x3 dilated by 3 spans 7 */
    b = a;
    b.iparam[2] = 2; /* stride 2x1: 2x3 outputs, so cols needs 6 columns */
    EXPECT_FAIL("im2col", &b, "gives cols [2, 27, 6] (N, C*kh*kw, oh*ow with oh 2, ow 3), got cols [2, 27, 9]");
    b = a;
    b.in[0] = xd.v;
    EXPECT_FAIL("im2col", &b, "dtype mismatch: x is float64 but cols is float32");
    b = a;
    b.in[0] = xi.v;
    b.out[0] = ci.v;
    EXPECT_FAIL("im2col", &b, "dtype int32 not implemented");
    b = a;
    b.in[0] = c.v;
    EXPECT_FAIL("im2col", &b, "x must be 4-d (N, C, H, W), got [2, 27, 9]");
    b = a;
    b.out[0].strides[2] = 0;
    EXPECT_FAIL("im2col", &b, "stride 0");
    b = a;
    b.nin = 0;
    EXPECT_FAIL("im2col", &b, "takes 1 inputs and 1 outputs");

    /* col2im: the same checks with the roles swapped */
    b = a;
    b.in[0] = c.v;
    b.out[0] = x.v;
    CHECK_EQ_LONG(run_engine("col2im", &b, msg, sizeof msg), 0);
    b.iparam[1] = 2;
    EXPECT_FAIL("col2im", &b, "shape mismatch");
    b.iparam[1] = 3;
    b.out[0].strides[0] = 0;
    EXPECT_FAIL("col2im", &b, "stride 0");
    b.out[0] = xd.v;
    EXPECT_FAIL("col2im", &b, "dtype mismatch");

    /* max_pool2d */
    ordo_kernel_args p = args_n(1, 2);
    p.in[0] = x.v;
    p.out[0] = y.v;
    p.out[1] = ix.v;
    p.niparam = 6;
    int64_t pg[6] = {2, 2, 2, 2, 0, 0};
    memcpy(p.iparam, pg, sizeof pg);
    CHECK_EQ_LONG(run_engine("max_pool2d", &p, msg, sizeof msg), 0);
    ordo_kernel_args q = p;
    q.iparam[4] = 2;
    EXPECT_FAIL("max_pool2d", &q, "padding 2x0 must be at most half the kernel 2x2");
    q = p;
    q.out[1] = ix32.v;
    EXPECT_FAIL("max_pool2d", &q, "indices must be int64, got int32");
    q = p;
    q.out[0] = ix.v;
    EXPECT_FAIL("max_pool2d", &q, "dtype mismatch: x is float32 but out is int64");
    q = p;
    q.iparam[2] = q.iparam[3] = 1; /* 4x4 outputs expected */
    EXPECT_FAIL("max_pool2d", &q, "gives out [2, 3, 4, 4]");
    q = p;
    q.iparam[0] = 6;
    EXPECT_FAIL("max_pool2d", &q, "larger than the padded input");
    q = p;
    q.nout = 1;
    EXPECT_FAIL("max_pool2d", &q, "takes 1 inputs and 2 outputs");

    /* max_pool2d_backward */
    ordo_kernel_args r = args_n(2, 1);
    r.in[0] = y.v;
    r.in[1] = ix.v;
    r.out[0] = x.v;
    CHECK_EQ_LONG(run_engine("max_pool2d_backward", &r, msg, sizeof msg), 0);
    ((int64_t *)ix.v.data)[5] = 25; /* plane 5x5: 0..24 */
    memset(x.base, 0x11, x.nbytes);
    EXPECT_FAIL("max_pool2d_backward", &r, "index 25 out of range for a 5x5 plane");
    CHECK(((unsigned char *)x.base)[0] == 0x11); /* untouched */
    ((int64_t *)ix.v.data)[5] = -1;
    EXPECT_FAIL("max_pool2d_backward", &r, "index -1 out of range");
    ((int64_t *)ix.v.data)[5] = 0;
    ordo_kernel_args s = r;
    s.in[1] = ix32.v;
    EXPECT_FAIL("max_pool2d_backward", &s, "indices must be int64");
    s = r;
    s.out[0] = xd.v;
    EXPECT_FAIL("max_pool2d_backward", &s, "dtype mismatch");
    s = r;
    s.in[0] = x.v;
    EXPECT_FAIL("max_pool2d_backward", &s, "shape mismatch");
    s = r;
    s.in[0] = ix32.v;
    s.out[0] = xi.v;
    EXPECT_FAIL("max_pool2d_backward", &s, "dtype int32 not implemented");

    tv *all[] = {&x, &c, &xd, &xi, &ci, &y, &ix, &ix32};
    for (int i = 0; i < ARRAY_LEN(all); i++) tv_free(all[i]);
}

/* Empty batches and empty channel counts do nothing and succeed. */
static void conv_kernels_empty(void) {
    int64_t xs[4] = {0, 3, 5, 5}, cs[3] = {0, 27, 9}, ys[4] = {0, 3, 2, 2};
    tv x = tv_new(ORDO_F32, 4, xs, 0), c = tv_new(ORDO_F32, 3, cs, 0);
    tv y = tv_new(ORDO_F32, 4, ys, 0), ix = tv_new(ORDO_I64, 4, ys, 0);
    ordo_kernel_args a = args0();
    a.nin = a.nout = 1;
    a.in[0] = x.v;
    a.out[0] = c.v;
    a.niparam = 6;
    int64_t p[6] = {3, 3, 1, 1, 0, 0};
    memcpy(a.iparam, p, sizeof p);
    CHECK_EQ_LONG(call("im2col", &a), 0);
    a.in[0] = c.v;
    a.out[0] = x.v;
    CHECK_EQ_LONG(call("col2im", &a), 0);
    ordo_kernel_args q = args_n(1, 2);
    q.in[0] = x.v;
    q.out[0] = y.v;
    q.out[1] = ix.v;
    q.niparam = 6;
    int64_t pp[6] = {2, 2, 2, 2, 0, 0};
    memcpy(q.iparam, pp, sizeof pp);
    CHECK_EQ_LONG(call("max_pool2d", &q), 0);
    ordo_kernel_args r = args_n(2, 1);
    r.in[0] = y.v;
    r.in[1] = ix.v;
    r.out[0] = x.v;
    CHECK_EQ_LONG(call("max_pool2d_backward", &r), 0);
    tv_free(&x);
    tv_free(&c);
    tv_free(&y);
    tv_free(&ix);
}

/* Several convolution ops at once on engine workers (as a training step
 * runs them): each gives what it gives alone. */
typedef struct job {
    tramp_t t;
    tv x, c, ref;
    ordo_var *v;
} job;

static void conv_kernels_concurrent_on_engine_workers(void) {
    begin();
    ordo_engine *e = make_engine(ORDO_ENGINE_PER_DEVICE, 2);
    CHECK(e != NULL);
    if (!e) return;
    enum { NJ = 6 };
    job j[NJ];
    for (int i = 0; i < NJ; i++) {
        geom g = {3, 4, 12 + i, 13, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0};
        g.oh = osize(g.H, 3, 1, 1, 1);
        g.ow = osize(g.W, 3, 1, 1, 1);
        int64_t xs[4] = {g.N, g.C, g.H, g.W};
        j[i].x = tv_new(ORDO_F32, 4, xs, 0);
        tv_rand(&j[i].x, 0);
        j[i].c = cols_new(ORDO_F32, &g, 0);
        j[i].ref = cols_new(ORDO_F32, &g, 0);
        j[i].t.fn = ordo_kernel_lookup("im2col", ORDO_CPU);
        j[i].t.a = args0();
        j[i].t.a.nin = j[i].t.a.nout = 1;
        j[i].t.a.in[0] = j[i].x.v;
        j[i].t.a.out[0] = j[i].ref.v;
        set_params(&j[i].t.a, &g, 0);
        CHECK_EQ_LONG(call("im2col", &j[i].t.a), 0);
        j[i].t.a.out[0] = j[i].c.v;
        j[i].v = ordo_new_variable(e);
    }
    for (int round = 0; round < 4; round++)
        for (int i = 0; i < NJ; i++)
            CHECK_EQ_LONG(ordo_push_sync(e, tramp, &j[i].t, NULL, cpu_ctx(0), NULL, 0, &j[i].v, 1, ORDO_PROP_NORMAL,
                                         0, "im2col"),
                          0);
    CHECK_EQ_LONG(ordo_wait_for_all(e), 0);
    for (int i = 0; i < NJ; i++) {
        if (memcmp(j[i].c.base, j[i].ref.base, j[i].c.nbytes)) BAD("im2col %d differs on a worker", i);
        ordo_delete_variable(e, NULL, NULL, cpu_ctx(0), j[i].v);
        tv_free(&j[i].x);
        tv_free(&j[i].c);
        tv_free(&j[i].ref);
    }
    ordo_engine_destroy(e);
    END();
}

static void registry_has_the_conv_kernels(void) {
    const char *names[] = {"im2col", "col2im", "max_pool2d", "max_pool2d_backward"};
    for (int i = 0; i < ARRAY_LEN(names); i++) {
        CHECK_MSG(ordo_kernel_lookup(names[i], ORDO_CPU) != NULL, "%s missing", names[i]);
        CHECK(ordo_kernel_lookup(names[i], ORDO_CPU_PINNED) == ordo_kernel_lookup(names[i], ORDO_CPU));
    }
}

int main(void) {
    rng_init(&R, test_seed());
    g_eng = make_engine(ORDO_ENGINE_PER_DEVICE, 1);
    if (!g_eng) return 1;
    TEST(registry_has_the_conv_kernels);
    TEST(kernel_im2col_matches_reference);
    TEST(kernel_col2im_matches_reference_and_is_adjoint);
    TEST(kernel_im2col_identity_cases);
    TEST(kernel_max_pool2d_matches_reference);
    TEST(kernel_max_pool2d_backward_matches_reference);
    TEST(kernel_max_pool2d_known_values);
    TEST(conv_kernels_fail_clearly);
    TEST(conv_kernels_empty);
    TEST(conv_kernels_concurrent_on_engine_workers);
    ordo_engine_destroy(g_eng);
    return harness_end();
}
