/*
 * reduce.c - sum mean max min argmax argmin, over one dim or over all.
 *
 * Three ways to walk x, chosen by layout:
 *  - all dims (i0 = -1): one pass over x with the iterator, accumulating
 *    into a running state;
 *  - one dim that is x's innermost (smallest stride), or few outputs:
 *    each output reduces its own row (strategy A);
 *  - one dim that is not innermost, e.g. sum over the batch dim 0 of a
 *    row-major [N, C] (every bias gradient): a column walk per output would
 *    touch a new cache line per element, so instead the whole slice
 *    x[.., k, ..] is folded into an accumulator buffer for each k in turn
 *    (strategy B): x is read once, sequentially.
 *
 * Float sums accumulate in float64 (several partial sums, so the loop
 * vectorises and rounding error grows slowly); integer sums in 64 bits,
 * wrapping.  max/min propagate NaN; argmax/argmin take NaN as the extreme
 * (Torch's rule) and the first index on ties.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

const char *const cpu_reduce_names[] = {"sum", "mean", "max", "min", "argmax", "argmin"};

typedef struct red_ctx {
    int op;
    int64_t n, sd;  /* the reduced dim: length, x's stride in elements */
    int ydtype;
    int64_t ysize;
    /* running state of an all-dims reduction */
    double dacc;
    uint64_t iacc;
    cpu_scalar best;
    int64_t best_idx, pos;
    int have;
    int acc_int; /* strategy B: the accumulators are uint64 (else double) */
} red_ctx;

/* Stores a sum (float: dacc; integer: iacc) into one element of y. */
static void store_sum(const red_ctx *c, char *p, int is_int, double dacc, uint64_t iacc) {
    if (!is_int) {
        cpu_store_double(c->ydtype, p, c->op == CPU_RED_MEAN ? dacc / (double)c->n : dacc);
        return;
    }
    switch (c->ydtype) {
    case ORDO_F32: *(float *)p = (float)(int64_t)iacc; break;
    case ORDO_F64: *(double *)p = (double)(int64_t)iacc; break;
    case ORDO_I32: *(int32_t *)p = (int32_t)(uint32_t)iacc; break;
    case ORDO_I64: *(int64_t *)p = (int64_t)iacc; break;
    default: *(uint8_t *)p = (uint8_t)iacc; break;
    }
}

/* argmax's order: NaN above everything, the first NaN kept. */
#define BETTER_MAX(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define BETTER_MIN(v, b) ((v) < (b) || ((v) != (v) && (b) == (b)))

/* SFX, T, ACC (the sum's accumulator), IS_INT, LOWEST, HIGHEST */
#define DEF_REDUCE(SFX, T, ACC, IS_INT, LOWEST, HIGHEST)                                      \
    static ACC sum_row_##SFX(int64_t n, const T *x, int64_t s) {                             \
        ACC part[CPU_BLK] = {0};                                                             \
        ACC r = 0;                                                                           \
        int64_t i = 0;                                                                       \
        if (s == 1)                                                                          \
            for (; i + CPU_BLK <= n; i += CPU_BLK)                                           \
                for (int j = 0; j < CPU_BLK; j++) part[j] += (ACC)x[i + j];                  \
        for (; i < n; i++) r += (ACC)x[i * s];                                               \
        for (int j = 0; j < CPU_BLK; j++) r += part[j];                                      \
        return r;                                                                            \
    }                                                                                        \
    static T max_row_##SFX(int64_t n, const T *x, int64_t s) {                               \
        T m[CPU_BLK], r = LOWEST;                                                            \
        for (int j = 0; j < CPU_BLK; j++) m[j] = LOWEST;                                     \
        int64_t i = 0;                                                                       \
        if (s == 1)                                                                          \
            for (; i + CPU_BLK <= n; i += CPU_BLK)                                           \
                for (int j = 0; j < CPU_BLK; j++) m[j] = CPU_MAX(m[j], x[i + j]);            \
        for (; i < n; i++) r = CPU_MAX(r, x[i * s]);                                         \
        for (int j = 0; j < CPU_BLK; j++) r = CPU_MAX(r, m[j]);                              \
        return r;                                                                            \
    }                                                                                        \
    static T min_row_##SFX(int64_t n, const T *x, int64_t s) {                               \
        T m[CPU_BLK], r = HIGHEST;                                                           \
        for (int j = 0; j < CPU_BLK; j++) m[j] = HIGHEST;                                    \
        int64_t i = 0;                                                                       \
        if (s == 1)                                                                          \
            for (; i + CPU_BLK <= n; i += CPU_BLK)                                           \
                for (int j = 0; j < CPU_BLK; j++) m[j] = CPU_MIN(m[j], x[i + j]);            \
        for (; i < n; i++) r = CPU_MIN(r, x[i * s]);                                         \
        for (int j = 0; j < CPU_BLK; j++) r = CPU_MIN(r, m[j]);                              \
        return r;                                                                            \
    }                                                                                        \
    /* index of the first best element of a row (n >= 1) */                                 \
    static int64_t argmax_row_##SFX(int64_t n, const T *x, int64_t s) {                      \
        T b = x[0];                                                                          \
        int64_t bi = 0;                                                                      \
        for (int64_t i = 1; i < n; i++) {                                                    \
            const T v = x[i * s];                                                            \
            if (BETTER_MAX(v, b)) {                                                          \
                b = v;                                                                       \
                bi = i;                                                                      \
            }                                                                                \
        }                                                                                    \
        return bi;                                                                           \
    }                                                                                        \
    static int64_t argmin_row_##SFX(int64_t n, const T *x, int64_t s) {                      \
        T b = x[0];                                                                          \
        int64_t bi = 0;                                                                      \
        for (int64_t i = 1; i < n; i++) {                                                    \
            const T v = x[i * s];                                                            \
            if (BETTER_MIN(v, b)) {                                                          \
                b = v;                                                                       \
                bi = i;                                                                      \
            }                                                                                \
        }                                                                                    \
        return bi;                                                                           \
    }                                                                                        \
    /* strategy A: p[0] = y (any dtype for sums), p[1] = x; one output per element */       \
    static int rowA_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {          \
        const red_ctx *c = ctx;                                                              \
        const T *x = (const T *)p[1];                                                        \
        for (int64_t i = 0; i < n; i++) {                                                    \
            char *y = p[0] + i * s[0] * c->ysize;                                            \
            const T *xr = x + i * s[1];                                                      \
            switch (c->op) {                                                                 \
            case CPU_RED_SUM:                                                                      \
            case CPU_RED_MEAN: {                                                                   \
                const ACC acc = sum_row_##SFX(c->n, xr, c->sd);                              \
                if (IS_INT) store_sum(c, y, 1, 0, (uint64_t)acc);                            \
                else store_sum(c, y, 0, (double)acc, 0);                                     \
                break;                                                                       \
            }                                                                                \
            case CPU_RED_MAX: *(T *)y = max_row_##SFX(c->n, xr, c->sd); break;                     \
            case CPU_RED_MIN: *(T *)y = min_row_##SFX(c->n, xr, c->sd); break;                     \
            case CPU_RED_ARGMAX: *(int64_t *)y = argmax_row_##SFX(c->n, xr, c->sd); break;         \
            default: *(int64_t *)y = argmin_row_##SFX(c->n, xr, c->sd); break;              \
            }                                                                                \
        }                                                                                    \
        return 0;                                                                            \
    }                                                                                        \
    /* all dims: p[0] = x, rows arrive in logical order (argmax needs it) */                \
    static int all_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {           \
        red_ctx *c = ctx;                                                                    \
        const T *x = (const T *)p[0];                                                        \
        T *best = (T *)&c->best;                                                             \
        switch (c->op) {                                                                     \
        case CPU_RED_SUM:                                                                          \
        case CPU_RED_MEAN: {                                                                       \
            const ACC acc = sum_row_##SFX(n, x, s[0]);                                       \
            if (IS_INT) c->iacc += (uint64_t)acc;                                            \
            else c->dacc += (double)acc;                                                     \
            break;                                                                           \
        }                                                                                    \
        case CPU_RED_MAX: *best = CPU_MAX(*best, max_row_##SFX(n, x, s[0])); break;                \
        case CPU_RED_MIN: *best = CPU_MIN(*best, min_row_##SFX(n, x, s[0])); break;                \
        case CPU_RED_ARGMAX: {                                                                     \
            const int64_t i = argmax_row_##SFX(n, x, s[0]);                                  \
            if (!c->have || BETTER_MAX(x[i * s[0]], *best)) {                                \
                *best = x[i * s[0]];                                                         \
                c->best_idx = c->pos + i;                                                    \
                c->have = 1;                                                                 \
            }                                                                                \
            break;                                                                           \
        }                                                                                    \
        default: {                                                                           \
            const int64_t i = argmin_row_##SFX(n, x, s[0]);                                  \
            if (!c->have || BETTER_MIN(x[i * s[0]], *best)) {                                \
                *best = x[i * s[0]];                                                         \
                c->best_idx = c->pos + i;                                                    \
                c->have = 1;                                                                 \
            }                                                                                \
            break;                                                                           \
        }                                                                                    \
        }                                                                                    \
        c->pos += n;                                                                         \
        return 0;                                                                            \
    }                                                                                        \
    /* strategy B: fold one slice of x into the accumulators (p[0], contiguous) */          \
    static int slice_sum_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {     \
        (void)ctx;                                                                           \
        ACC *acc = (ACC *)p[0];                                                              \
        const T *x = (const T *)p[1];                                                        \
        int64_t i = 0;                                                                       \
        if (s[0] == 1 && s[1] == 1) {                                                        \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                         \
                ACC t[CPU_BLK];                                                              \
                for (int j = 0; j < CPU_BLK; j++) t[j] = acc[i + j] + (ACC)x[i + j];         \
                for (int j = 0; j < CPU_BLK; j++) acc[i + j] = t[j];                         \
            }                                                                                \
        }                                                                                    \
        for (; i < n; i++) acc[i * s[0]] += (ACC)x[i * s[1]];                                \
        return 0;                                                                            \
    }                                                                                        \
    static int slice_max_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {     \
        (void)ctx;                                                                           \
        T *acc = (T *)p[0];                                                                  \
        const T *x = (const T *)p[1];                                                        \
        for (int64_t i = 0; i < n; i++) acc[i * s[0]] = CPU_MAX(acc[i * s[0]], x[i * s[1]]); \
        return 0;                                                                            \
    }                                                                                        \
    static int slice_min_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {     \
        (void)ctx;                                                                           \
        T *acc = (T *)p[0];                                                                  \
        const T *x = (const T *)p[1];                                                        \
        for (int64_t i = 0; i < n; i++) acc[i * s[0]] = CPU_MIN(acc[i * s[0]], x[i * s[1]]); \
        return 0;                                                                            \
    }                                                                                        \
    /* strategy B for argmax/argmin: p[0] the best values, p[2] their indices */           \
    /* (contiguous), p[1] slice c->pos of x; slice 0 sets both */                            \
    static int slice_arg_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) {     \
        const red_ctx *c = ctx;                                                              \
        T *best = (T *)p[0];                                                                 \
        const T *x = (const T *)p[1];                                                        \
        int64_t *bi = (int64_t *)p[2];                                                       \
        const int64_t k = c->pos;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                    \
            const T v = x[i * s[1]], b = best[i * s[0]];                                     \
            if (k == 0 || (c->op == CPU_RED_ARGMAX ? BETTER_MAX(v, b) : BETTER_MIN(v, b))) { \
                best[i * s[0]] = v;                                                          \
                bi[i * s[2]] = k;                                                            \
            }                                                                                \
        }                                                                                    \
        return 0;                                                                            \
    }                                                                                        \
    static void init_best_##SFX(red_ctx *c) {                                                \
        T *b = (T *)&c->best;                                                                \
        *b = c->op == CPU_RED_MIN ? HIGHEST : LOWEST;                                              \
    }

DEF_REDUCE(f32, float, double, 0, -INFINITY, INFINITY)
DEF_REDUCE(f64, double, double, 0, -INFINITY, INFINITY)
DEF_REDUCE(i32, int32_t, uint64_t, 1, INT32_MIN, INT32_MAX)
DEF_REDUCE(i64, int64_t, uint64_t, 1, INT64_MIN, INT64_MAX)
DEF_REDUCE(u8, uint8_t, uint64_t, 1, 0, UINT8_MAX)

typedef struct red_type {
    cpu_loop_fn rowA, all, slice_sum, slice_max, slice_min, slice_arg;
    void (*init_best)(red_ctx *);
    int is_int;
} red_type;

#define RT(SFX, IS_INT)                                                                                  \
    {rowA_##SFX, all_##SFX, slice_sum_##SFX, slice_max_##SFX, slice_min_##SFX, slice_arg_##SFX, init_best_##SFX, \
     IS_INT}
static const red_type red_types[ORDO_NDTYPES] = {
    RT(f32, 0), RT(f64, 0), RT(i32, 1), RT(i64, 1), RT(u8, 1),
};

/* strategy B's last step: p[0] = y, p[1] = the accumulators */
static int store_sums(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    const red_ctx *c = ctx;
    for (int64_t i = 0; i < n; i++) {
        char *y = p[0] + i * s[0] * c->ysize;
        const char *a = p[1] + i * s[1] * 8;
        double d;
        uint64_t u;
        memcpy(&d, a, 8);
        memcpy(&u, a, 8);
        store_sum(c, y, c->acc_int, d, u);
    }
    return 0;
}

static int store_same(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    const red_ctx *c = ctx;
    for (int64_t i = 0; i < n; i++)
        memcpy(p[0] + i * s[0] * c->ysize, p[1] + i * s[1] * c->ysize, (size_t)c->ysize);
    return 0;
}

int cpu_dim_is_innermost(const ordo_view *x, int d) {
    const int64_t sd = x->strides[d] < 0 ? -x->strides[d] : x->strides[d];
    for (int i = 0; i < x->ndim; i++) {
        if (i == d || x->shape[i] <= 1) continue;
        const int64_t si = x->strides[i] < 0 ? -x->strides[i] : x->strides[i];
        if (si < sd) return 0;
    }
    return 1;
}

int cpu_check_reduce(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op, cpu_reduce_plan *p) {
    const char *name = cpu_reduce_names[op];
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0];
    const int is_arg = op == CPU_RED_ARGMAX || op == CPU_RED_ARGMIN;

    /* dtypes */
    if (op == CPU_RED_MEAN && !cpu_dtype_is_float(x->dtype)) return cpu_fail_dtype(rc, name, x->dtype);
    if (op == CPU_RED_MEAN && !cpu_dtype_is_float(y->dtype))
        return ordo_fail(rc, "mean: output must be float32 or float64, got %s", ordo_dtype_name(y->dtype));
    if ((op == CPU_RED_MAX || op == CPU_RED_MIN) && y->dtype != x->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but out is %s", name,
                         ordo_dtype_name(x->dtype), ordo_dtype_name(y->dtype));
    if (is_arg && y->dtype != ORDO_I64)
        return ordo_fail(rc, "%s: output must be int64, got %s", name, ordo_dtype_name(y->dtype));

    /* dim and output shape */
    const int64_t dim = args->niparam > 0 ? args->iparam[0] : -1;
    char bx[160], by[160];
    if (dim < -1 || dim >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "%s: dim %lld out of range for x of %d dims", name, (long long)dim, x->ndim);
    /* an empty sum is 0 (mean: NaN); the other reductions have no value for it */
    const int empty_ok = op == CPU_RED_SUM || op == CPU_RED_MEAN;
    p->all = dim == -1 || x->ndim == 0;
    if (p->all) {
        if (ordo_view_numel(y) != 1)
            return ordo_fail(rc, "%s: output %s must have one element for a reduction over all dims",
                             name, cpu_shape_str(y, by, sizeof by));
        p->n = ordo_view_numel(x);
        p->nout = 1;
        if (p->n == 0 && !empty_ok)
            return ordo_fail(rc, "%s: reduction of an empty tensor %s", name, cpu_shape_str(x, bx, sizeof bx));
        return 0;
    }

    const int d = p->dim = (int)dim;
    cpu_view_drop_dim(x, d, &p->xo);
    int shape_ok;
    if (y->ndim == x->ndim) {
        cpu_view_drop_dim(y, d, &p->yo);
        shape_ok = y->shape[d] == 1 && cpu_same_shape(&p->xo, &p->yo);
    } else {
        p->yo = *y; /* the reduced dim squeezed out */
        shape_ok = cpu_same_shape(&p->xo, &p->yo);
    }
    if (!shape_ok)
        return ordo_fail(rc, "%s: output %s does not match x %s reduced over dim %d", name,
                         cpu_shape_str(y, by, sizeof by), cpu_shape_str(x, bx, sizeof bx), d);
    if ((r = cpu_check_writable(rc, name, &p->yo))) return r;
    p->n = x->shape[d];
    p->nout = ordo_view_numel(&p->yo);
    if (p->nout > 0 && p->n == 0 && !empty_ok)
        return ordo_fail(rc, "%s: reduction over dim %d of size 0 (x %s)", name, d,
                         cpu_shape_str(x, bx, sizeof bx));
    return 0;
}

/* Strategy B for argmax/argmin (a column walk per output, strategy A, was
 * 15 times slower on a large x): the best values and their indices, laid
 * out row-major over the kept dims, updated slice by slice in the order of
 * the reduced dim, so that ties keep the first index. */
static int arg_slices(const ordo_run_ctx *rc, const char *name, const red_type *rt, red_ctx *c,
                      const ordo_view *xo, const ordo_view *yo) {
    const int64_t nout = ordo_view_numel(yo), es = (int64_t)ordo_dtype_size(xo->dtype);
    char *best = malloc((size_t)(nout * es));
    int64_t *bi = malloc((size_t)nout * sizeof *bi);
    if (!best || !bi) {
        free(best);
        free(bi);
        return ordo_fail(rc, "%s: out of memory for %lld accumulators", name, (long long)nout);
    }
    int64_t as[ORDO_MAX_DIMS];
    cpu_contiguous_strides(xo->ndim, xo->shape, as);
    char *ptr[3] = {best, xo->data, (char *)bi};
    int esz[3] = {(int)es, (int)es, 8};
    const int64_t *st[3] = {as, xo->strides, as};
    cpu_iter it;
    cpu_iter_init(&it, 3, xo->ndim, xo->shape, ptr, esz, st, 0);
    const int64_t step = c->sd * es;
    for (c->pos = 0; c->pos < c->n; c->pos++) {
        it.ptr[1] = (char *)xo->data + c->pos * step;
        cpu_iter_run(&it, rt->slice_arg, c);
    }
    char *ptr2[2] = {yo->data, (char *)bi};
    int esz2[2] = {8, 8};
    const int64_t *st2[2] = {yo->strides, as};
    cpu_iter_init(&it, 2, yo->ndim, yo->shape, ptr2, esz2, st2, 0);
    cpu_iter_run(&it, store_same, c); /* c->ysize is 8: int64 indices */
    free(best);
    free(bi);
    return 0;
}

static int run_reduce(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    const char *name = cpu_reduce_names[op];
    cpu_reduce_plan pl;
    int r = cpu_check_reduce(rc, args, op, &pl);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0];
    const red_type *rt = &red_types[x->dtype];
    const int is_arg = op == CPU_RED_ARGMAX || op == CPU_RED_ARGMIN;
    red_ctx c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.ydtype = y->dtype;
    c.ysize = (int64_t)ordo_dtype_size(y->dtype);
    c.n = pl.n;

    if (pl.all) {
        rt->init_best(&c);
        cpu_iter it;
        const ordo_view *v[1] = {x};
        cpu_iter_init_views(&it, 1, v, is_arg ? CPU_ITER_KEEP_ORDER : 0);
        cpu_iter_run(&it, rt->all, &c);
        switch (op) {
        case CPU_RED_SUM:
        case CPU_RED_MEAN: store_sum(&c, y->data, rt->is_int, c.dacc, c.iacc); break;
        case CPU_RED_MAX:
        case CPU_RED_MIN: memcpy(y->data, &c.best, (size_t)c.ysize); break;
        default: *(int64_t *)y->data = c.best_idx; break;
        }
        return 0;
    }

    const int d = pl.dim;
    const ordo_view xo = pl.xo, yo = pl.yo;
    c.sd = x->strides[d];
    const int64_t nout = pl.nout;
    if (nout == 0) return 0;
    if (c.n == 0) { /* sum or mean (the check failed the others) */
        cpu_scalar v;
        cpu_scalar_fill_value(rc, name, y->dtype, 0, &v);
        if (op == CPU_RED_MEAN) { /* 0 / 0, as Torch gives */
            if (y->dtype == ORDO_F32) v.f32 = NAN;
            else v.f64 = NAN;
        }
        cpu_fill_view(&yo, &v);
        return 0;
    }

    const ordo_view *v[2] = {&yo, &xo};
    cpu_iter it;
    if (cpu_dim_is_innermost(x, d) || nout < 8) {
        cpu_iter_init_views(&it, 2, v, 0);
        cpu_iter_run(&it, rt->rowA, &c);
        return 0;
    }
    if (is_arg) return arg_slices(rc, name, rt, &c, &xo, &yo);

    /* Strategy B: accumulators laid out row-major over the kept dims. */
    const int sum = op == CPU_RED_SUM || op == CPU_RED_MEAN;
    const int64_t aes = sum ? 8 : (int64_t)ordo_dtype_size(x->dtype);
    char *acc = malloc((size_t)(nout * aes));
    if (!acc) return ordo_fail(rc, "%s: out of memory for %lld accumulators", name, (long long)nout);
    ordo_view av;
    memset(&av, 0, sizeof av);
    av.ndim = xo.ndim;
    memcpy(av.shape, xo.shape, sizeof av.shape);
    cpu_contiguous_strides(av.ndim, av.shape, av.strides);
    if (sum) {
        memset(acc, 0, (size_t)(nout * aes)); /* 0.0 and integer 0 are both all-zero bits */
    } else {
        rt->init_best(&c);
        for (int64_t i = 0; i < nout; i++) memcpy(acc + i * aes, &c.best, (size_t)aes);
    }
    char *ptr[2] = {acc, xo.data};
    int esz[2] = {(int)aes, (int)ordo_dtype_size(x->dtype)};
    const int64_t *st[2] = {av.strides, xo.strides};
    cpu_iter_init(&it, 2, xo.ndim, xo.shape, ptr, esz, st, 0);
    cpu_loop_fn fold = sum ? rt->slice_sum : op == CPU_RED_MAX ? rt->slice_max : rt->slice_min;
    const int64_t step = c.sd * esz[1];
    for (int64_t k = 0; k < c.n; k++) {
        it.ptr[1] = (char *)xo.data + k * step;
        cpu_iter_run(&it, fold, NULL);
    }
    /* acc -> y */
    char *ptr2[2] = {yo.data, acc};
    int esz2[2] = {(int)c.ysize, (int)aes};
    const int64_t *st2[2] = {yo.strides, av.strides};
    cpu_iter_init(&it, 2, yo.ndim, yo.shape, ptr2, esz2, st2, 0);
    c.acc_int = rt->is_int;
    cpu_iter_run(&it, sum ? store_sums : store_same, &c);
    free(acc);
    return 0;
}

#define DEF_RED_KERNEL(OPN, OP)                                                        \
    static int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) {           \
        return run_reduce(rc, a, OP);                                                 \
    }
CPU_REDUCE_OPS(DEF_RED_KERNEL)

#define RED_ENTRY(OPN, OP) {#OPN, k_##OPN},
void cpu_register_reduce(void) {
    static const cpu_kernel_entry t[] = {CPU_REDUCE_OPS(RED_ENTRY)};
    CPU_REGISTER_TABLE(t);
}
