/*
 * softmax.c - softmax and log_softmax along one dim (float dtypes).
 *
 * Numerically stable: the row's max is subtracted before exp, so no exp
 * overflows, and log_softmax is x - max - log(sum exp(x - max)) rather than
 * log(softmax), which would underflow to -inf.  Sums accumulate in double.
 * As in reduce.c, a dim that is not x's innermost is processed slice by
 * slice (max, then sum, then output, each a sequential pass over x) instead
 * of one strided column walk per row.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct sm_ctx {
    int log;                 /* log_softmax */
    int64_t n, sx, sy;       /* the dim: length, strides of x and y */
} sm_ctx;

#define DEF_SOFTMAX(SFX, T, EXP)                                                      \
    /* a contiguous row (the common case): blocked so that float32 vectorises */          \
    static void row_contig_##SFX(int64_t n, const T *x, T *y, int lg) {                    \
        T mv[CPU_BLK], m = x[0];                                                           \
        double part[CPU_BLK] = {0}, sum = 0;                                               \
        int64_t i = 0;                                                                     \
        for (int j = 0; j < CPU_BLK; j++) mv[j] = x[0];                                    \
        for (; i + CPU_BLK <= n; i += CPU_BLK)                                             \
            for (int j = 0; j < CPU_BLK; j++) mv[j] = CPU_MAX(mv[j], x[i + j]);            \
        for (; i < n; i++) m = CPU_MAX(m, x[i]);                                           \
        for (int j = 0; j < CPU_BLK; j++) m = CPU_MAX(m, mv[j]);                           \
        /* softmax writes exp(x - m) as it sums; y may be x (in place): each block */       \
        /* is read before it is written */                                                  \
        for (i = 0; i + CPU_BLK <= n; i += CPU_BLK) {                                      \
            T t[CPU_BLK];                                                                  \
            for (int j = 0; j < CPU_BLK; j++) t[j] = EXP(x[i + j] - m);                    \
            for (int j = 0; j < CPU_BLK; j++) part[j] += t[j];                             \
            if (!lg)                                                                       \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                         \
        }                                                                                  \
        for (; i < n; i++) {                                                               \
            const T e = EXP(x[i] - m);                                                     \
            sum += e;                                                                      \
            if (!lg) y[i] = e;                                                             \
        }                                                                                  \
        for (int j = 0; j < CPU_BLK; j++) sum += part[j];                                  \
        if (lg) {                                                                          \
            const T lse = (T)log(sum);                                                     \
            for (i = 0; i + CPU_BLK <= n; i += CPU_BLK) {                                  \
                T t[CPU_BLK];                                                              \
                for (int j = 0; j < CPU_BLK; j++) t[j] = (x[i + j] - m) - lse;             \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                         \
            }                                                                              \
            for (; i < n; i++) y[i] = (x[i] - m) - lse;                                    \
        } else {                                                                           \
            const T inv = (T)(1.0 / sum);                                                  \
            for (i = 0; i < n; i++) y[i] *= inv;                                           \
        }                                                                                  \
    }                                                                                      \
    /* strategy A: one row per element of the kept dims; p[0] = y, p[1] = x */             \
    static int rows_##SFX(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {      \
        const sm_ctx *c = ctx;                                                             \
        const int64_t n = c->n, sx = c->sx, sy = c->sy;                                    \
        for (int64_t r = 0; r < cnt; r++) {                                                \
            T *y = (T *)p[0] + r * s[0];                                                   \
            const T *x = (const T *)p[1] + r * s[1];                                       \
            if (sx == 1 && sy == 1) {                                                      \
                row_contig_##SFX(n, x, y, c->log);                                         \
                continue;                                                                  \
            }                                                                              \
            T m = x[0];                                                                    \
            for (int64_t i = 1; i < n; i++) m = CPU_MAX(m, x[i * sx]);                     \
            double sum = 0;                                                                \
            if (c->log) {                                                                  \
                for (int64_t i = 0; i < n; i++) sum += EXP(x[i * sx] - m);                 \
                const T lse = (T)log(sum);                                                 \
                for (int64_t i = 0; i < n; i++) y[i * sy] = (x[i * sx] - m) - lse;         \
            } else {                                                                       \
                /* y may be x itself (in place): each element is read before written */    \
                for (int64_t i = 0; i < n; i++) {                                          \
                    const T e = EXP(x[i * sx] - m);                                        \
                    y[i * sy] = e;                                                         \
                    sum += e;                                                              \
                }                                                                          \
                const T inv = (T)(1.0 / sum);                                              \
                for (int64_t i = 0; i < n; i++) y[i * sy] *= inv;                          \
            }                                                                              \
        }                                                                                  \
        return 0;                                                                          \
    }                                                                                      \
    /* strategy B, pass 1: p[0] = max (T buffer), p[1] = x slice */                        \
    static int smax_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                         \
        T *m = (T *)p[0];                                                                  \
        const T *x = (const T *)p[1];                                                      \
        int64_t i = 0;                                                                     \
        if (s[0] == 1 && s[1] == 1)                                                        \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                       \
                T t[CPU_BLK];                                                              \
                for (int j = 0; j < CPU_BLK; j++) t[j] = CPU_MAX(m[i + j], x[i + j]);      \
                for (int j = 0; j < CPU_BLK; j++) m[i + j] = t[j];                         \
            }                                                                              \
        for (; i < n; i++) m[i * s[0]] = CPU_MAX(m[i * s[0]], x[i * s[1]]);                \
        return 0;                                                                          \
    }                                                                                      \
    /* pass 2: p[0] = sum (double buffer), p[1] = max, p[2] = x slice */                   \
    static int ssum_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                         \
        double *sum = (double *)p[0];                                                      \
        const T *m = (const T *)p[1], *x = (const T *)p[2];                                \
        int64_t i = 0;                                                                     \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1)                                           \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                       \
                T t[CPU_BLK];                                                              \
                for (int j = 0; j < CPU_BLK; j++) t[j] = EXP(x[i + j] - m[i + j]);         \
                for (int j = 0; j < CPU_BLK; j++) sum[i + j] += t[j];                      \
            }                                                                              \
        for (; i < n; i++) sum[i * s[0]] += EXP(x[i * s[2]] - m[i * s[1]]);                \
        return 0;                                                                          \
    }                                                                                      \
    /* pass 3: p[0] = y slice, p[1] = x slice, p[2] = max, p[3] = 1/sum or log(sum) */     \
    static int sout_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        const sm_ctx *c = ctx;                                                             \
        T *y = (T *)p[0];                                                                  \
        const T *x = (const T *)p[1], *m = (const T *)p[2];                                \
        const double *f = (const double *)p[3];                                            \
        int64_t i = 0;                                                                     \
        if (!c->log && s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1)                   \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                       \
                T t[CPU_BLK];                                                              \
                for (int j = 0; j < CPU_BLK; j++)                                          \
                    t[j] = EXP(x[i + j] - m[i + j]) * (T)f[i + j];                         \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                         \
            }                                                                              \
        if (c->log)                                                                        \
            for (; i < n; i++) y[i * s[0]] = (x[i * s[1]] - m[i * s[2]]) - (T)f[i * s[3]]; \
        else                                                                               \
            for (; i < n; i++) y[i * s[0]] = EXP(x[i * s[1]] - m[i * s[2]]) * (T)f[i * s[3]]; \
        return 0;                                                                          \
    }
DEF_SOFTMAX(f32, float, cpu_expf)
DEF_SOFTMAX(f64, double, exp)

int cpu_check_softmax(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                      cpu_softmax_plan *p) {
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0];
    if (!cpu_dtype_is_float(x->dtype)) return cpu_fail_dtype(rc, name, x->dtype);
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but out is %s", name,
                         ordo_dtype_name(x->dtype), ordo_dtype_name(y->dtype));
    const ordo_view *v2[2] = {y, x};
    static const char *const names[2] = {"out", "x"};
    if ((r = cpu_check_same_shapes(rc, name, v2, names, 2))) return r;
    if ((r = cpu_check_writable(rc, name, y))) return r;
    const int64_t d = args->niparam > 0 ? args->iparam[0] : -1;
    if (args->niparam < 1 || d < 0 || d >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "%s: dim %lld out of range for x of %d dims", name, (long long)d, x->ndim);
    p->dim = (int)d;
    p->xo = *x;
    p->yo = *y;
    p->n = 1; /* a 0-d x is one row of one element */
    p->sx = p->sy = 0;
    if (x->ndim > 0) {
        p->n = x->shape[d];
        p->sx = x->strides[d];
        p->sy = y->strides[d];
        cpu_view_drop_dim(x, p->dim, &p->xo);
        cpu_view_drop_dim(y, p->dim, &p->yo);
    }
    p->nout = ordo_view_numel(&p->xo);
    p->inner = x->ndim == 0 || cpu_dim_is_innermost(x, p->dim);
    return 0;
}

static int run_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *args, int lg) {
    const char *name = lg ? "log_softmax" : "softmax";
    cpu_softmax_plan pl;
    int r = cpu_check_softmax(rc, name, args, &pl);
    if (r) return r;
    const ordo_view *x = &args->in[0];
    if (ordo_view_numel(x) == 0) return 0;

    const int is32 = x->dtype == ORDO_F32;
    const int64_t es = (int64_t)ordo_dtype_size(x->dtype);
    sm_ctx c = {lg, pl.n, pl.sx, pl.sy};
    const ordo_view xo = pl.xo, yo = pl.yo;
    const int64_t nout = pl.nout;
    cpu_iter it;
    if (pl.inner || nout < 8) {
        const ordo_view *v[2] = {&yo, &xo};
        cpu_iter_init_views(&it, 2, v, 0);
        cpu_iter_run(&it, is32 ? rows_f32 : rows_f64, &c);
        return 0;
    }

    /* Strategy B: max (T) and sum (double) buffers, row-major over the kept dims. */
    char *m = malloc((size_t)(nout * es));
    double *sum = calloc((size_t)nout, sizeof *sum);
    if (!m || !sum) {
        free(m);
        free(sum);
        return ordo_fail(rc, "%s: out of memory for %lld row buffers", name, (long long)nout);
    }
    for (int64_t i = 0; i < nout; i++) {
        if (is32) ((float *)m)[i] = -INFINITY;
        else ((double *)m)[i] = -INFINITY;
    }
    int64_t bs[ORDO_MAX_DIMS];
    cpu_contiguous_strides(xo.ndim, xo.shape, bs);
    const int64_t xstep = c.sx * es, ystep = c.sy * es;

    { /* pass 1: max */
        char *ptr[2] = {m, xo.data};
        int esz[2] = {(int)es, (int)es};
        const int64_t *st[2] = {bs, xo.strides};
        cpu_iter_init(&it, 2, xo.ndim, xo.shape, ptr, esz, st, 0);
        for (int64_t k = 0; k < c.n; k++) {
            it.ptr[1] = (char *)xo.data + k * xstep;
            cpu_iter_run(&it, is32 ? smax_f32 : smax_f64, &c);
        }
    }
    { /* pass 2: sum of exp(x - max) */
        char *ptr[3] = {(char *)sum, m, xo.data};
        int esz[3] = {8, (int)es, (int)es};
        const int64_t *st[3] = {bs, bs, xo.strides};
        cpu_iter_init(&it, 3, xo.ndim, xo.shape, ptr, esz, st, 0);
        for (int64_t k = 0; k < c.n; k++) {
            it.ptr[2] = (char *)xo.data + k * xstep;
            cpu_iter_run(&it, is32 ? ssum_f32 : ssum_f64, &c);
        }
    }
    for (int64_t i = 0; i < nout; i++) sum[i] = lg ? log(sum[i]) : 1.0 / sum[i];
    { /* pass 3: output */
        char *ptr[4] = {yo.data, xo.data, m, (char *)sum};
        int esz[4] = {(int)es, (int)es, (int)es, 8};
        const int64_t *st[4] = {yo.strides, xo.strides, bs, bs};
        cpu_iter_init(&it, 4, xo.ndim, xo.shape, ptr, esz, st, 0);
        for (int64_t k = 0; k < c.n; k++) {
            it.ptr[0] = (char *)yo.data + k * ystep;
            it.ptr[1] = (char *)xo.data + k * xstep;
            cpu_iter_run(&it, is32 ? sout_f32 : sout_f64, &c);
        }
    }
    free(m);
    free(sum);
    return 0;
}

static int k_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_softmax(rc, a, 0); }
static int k_log_softmax(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_softmax(rc, a, 1); }

void cpu_register_softmax(void) {
    static const cpu_kernel_entry t[] = {
        {"softmax", k_softmax},
        {"log_softmax", k_log_softmax},
    };
    CPU_REGISTER_TABLE(t);
}
