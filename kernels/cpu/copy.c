/*
 * copy.c - fill, copy (with casts between any two dtypes), arange.
 *
 * copy is the workhorse of the tensor layer: contiguous(), to(dtype), cat
 * (copies into narrowed views of the output) and every broadcast
 * materialisation go through it, so same-dtype copies of contiguous rows
 * become memmove and every dtype pair has its own typed loop.
 */
#include <string.h>

#include "cpu_internal.h"

/* ---- fill ---------------------------------------------------------------- */

int cpu_check_fill(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_scalar *v) {
    int r = cpu_check_args(rc, "fill", a, 0, 1);
    if (r) return r;
    const ordo_view *y = &a->out[0];
    if ((r = cpu_check_writable(rc, "fill", y))) return r;
    if (a->nscalar < 1) return ordo_fail(rc, "fill: needs the value as scalar[0]");
    return cpu_scalar_fill_value(rc, "fill", y->dtype, a->scalar[0], v);
}

static int k_fill(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_scalar v;
    int r = cpu_check_fill(rc, a, &v);
    if (r) return r;
    cpu_fill_view(&a->out[0], &v);
    return 0;
}

/* ---- copy ---------------------------------------------------------------- */

/* Same dtype: by element size, the bytes are moved as they are. */
#define DEF_MOVE_LOOP(NAME, T)                                                       \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                  \
        T *y = (T *)p[0];                                                           \
        const T *x = (const T *)p[1];                                               \
        if (s[0] == 1 && s[1] == 1) {                                               \
            /* memmove: an in-place copy of a view onto itself is harmless */       \
            if ((const void *)y != (const void *)x) memmove(y, x, (size_t)n * sizeof(T)); \
        } else if (s[1] == 0) {                                                     \
            const T v = *x;                                                         \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = v;                        \
        } else {                                                                    \
            for (int64_t i = 0; i < n; i++) y[i * s[0]] = x[i * s[1]];              \
        }                                                                           \
        return 0;                                                                   \
    }
DEF_MOVE_LOOP(move_1, uint8_t)
DEF_MOVE_LOOP(move_4, uint32_t)
DEF_MOVE_LOOP(move_8, uint64_t)

/* Conversions (see cpu_internal.h for why float -> int saturates). */
#define CV_PLAIN(TO, x) ((TO)(x))
#define CV_SAT_I32(TO, x) cpu_sat_i32((double)(x))
#define CV_SAT_I64(TO, x) cpu_sat_i64((double)(x))
#define CV_SAT_U8(TO, x) cpu_sat_u8((double)(x))

#define DEF_CAST_LOOP(NAME, TO, FROM, CV)                                            \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {       \
        (void)ctx;                                                                  \
        TO *y = (TO *)p[0];                                                         \
        const FROM *x = (const FROM *)p[1];                                         \
        int64_t i = 0;                                                              \
        if (s[0] == 1 && s[1] == 1) {                                               \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                \
                TO t[CPU_BLK];                                                      \
                for (int j = 0; j < CPU_BLK; j++) t[j] = CV(TO, x[i + j]);          \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                  \
            }                                                                       \
            for (; i < n; i++) y[i] = CV(TO, x[i]);                                 \
        } else {                                                                    \
            for (; i < n; i++) y[i * s[0]] = CV(TO, x[i * s[1]]);                   \
        }                                                                           \
        return 0;                                                                   \
    }

/* to float32 */
DEF_CAST_LOOP(cast_f64_f32, float, double, CV_PLAIN)
DEF_CAST_LOOP(cast_i32_f32, float, int32_t, CV_PLAIN)
DEF_CAST_LOOP(cast_i64_f32, float, int64_t, CV_PLAIN)
DEF_CAST_LOOP(cast_u8_f32, float, uint8_t, CV_PLAIN)
/* to float64 */
DEF_CAST_LOOP(cast_f32_f64, double, float, CV_PLAIN)
DEF_CAST_LOOP(cast_i32_f64, double, int32_t, CV_PLAIN)
DEF_CAST_LOOP(cast_i64_f64, double, int64_t, CV_PLAIN)
DEF_CAST_LOOP(cast_u8_f64, double, uint8_t, CV_PLAIN)
/* to int32 */
DEF_CAST_LOOP(cast_f32_i32, int32_t, float, CV_SAT_I32)
DEF_CAST_LOOP(cast_f64_i32, int32_t, double, CV_SAT_I32)
DEF_CAST_LOOP(cast_i64_i32, int32_t, int64_t, CV_PLAIN)
DEF_CAST_LOOP(cast_u8_i32, int32_t, uint8_t, CV_PLAIN)
/* to int64 */
DEF_CAST_LOOP(cast_f32_i64, int64_t, float, CV_SAT_I64)
DEF_CAST_LOOP(cast_f64_i64, int64_t, double, CV_SAT_I64)
DEF_CAST_LOOP(cast_i32_i64, int64_t, int32_t, CV_PLAIN)
DEF_CAST_LOOP(cast_u8_i64, int64_t, uint8_t, CV_PLAIN)
/* to uint8 */
DEF_CAST_LOOP(cast_f32_u8, uint8_t, float, CV_SAT_U8)
DEF_CAST_LOOP(cast_f64_u8, uint8_t, double, CV_SAT_U8)
DEF_CAST_LOOP(cast_i32_u8, uint8_t, int32_t, CV_PLAIN)
DEF_CAST_LOOP(cast_i64_u8, uint8_t, int64_t, CV_PLAIN)

/* [to][from]; the diagonal is the plain move. */
static const cpu_loop_fn cast_loops[ORDO_NDTYPES][ORDO_NDTYPES] = {
    [ORDO_F32] = {move_4, cast_f64_f32, cast_i32_f32, cast_i64_f32, cast_u8_f32},
    [ORDO_F64] = {cast_f32_f64, move_8, cast_i32_f64, cast_i64_f64, cast_u8_f64},
    [ORDO_I32] = {cast_f32_i32, cast_f64_i32, move_4, cast_i64_i32, cast_u8_i32},
    [ORDO_I64] = {cast_f32_i64, cast_f64_i64, cast_i32_i64, move_8, cast_u8_i64},
    [ORDO_U8] = {cast_f32_u8, cast_f64_u8, cast_i32_u8, cast_i64_u8, move_1},
};

/* A same-dtype copy whose output rows are contiguous while the input's unit
 * stride is on the next dim out (a transpose being made contiguous) reads
 * one element per cache line in the plain row loop.  Copying 32 x 32 tiles
 * instead keeps the tile's input lines in L1 until every element of them
 * has been used. */
#define TILE 32
#define DEF_TILE_COPY(NAME, T)                                                               \
    static void NAME(char *yp, const char *xp, int64_t R, int64_t C, int64_t ys0, int64_t xs1) { \
        T *y = (T *)yp;                                                                     \
        const T *x = (const T *)xp;                                                         \
        for (int64_t i0 = 0; i0 < R; i0 += TILE)                                            \
            for (int64_t j0 = 0; j0 < C; j0 += TILE) {                                      \
                const int64_t i1 = i0 + TILE < R ? i0 + TILE : R;                           \
                const int64_t j1 = j0 + TILE < C ? j0 + TILE : C;                           \
                for (int64_t i = i0; i < i1; i++)                                           \
                    for (int64_t j = j0; j < j1; j++) y[i * ys0 + j] = x[i + j * xs1];      \
            }                                                                               \
    }
DEF_TILE_COPY(tile_1, uint8_t)
DEF_TILE_COPY(tile_4, uint32_t)
DEF_TILE_COPY(tile_8, uint64_t)

/* The iterator's last two dims as tiles, the outer ones by odometer.
 * Returns 0 when the layout is not that of a transpose. */
static int copy_transposed(const cpu_iter *it, size_t es) {
    const int nd = it->nd;
    if (nd < 2) return 0;
    const int64_t R = it->shape[nd - 2], C = it->shape[nd - 1];
    if (it->stride[0][nd - 1] != 1 || it->stride[1][nd - 2] != 1 || it->stride[1][nd - 1] == 1 ||
        R < TILE / 2 || C < TILE / 2)
        return 0;
    void (*tile)(char *, const char *, int64_t, int64_t, int64_t, int64_t) =
        es == 8 ? tile_8 : es == 4 ? tile_4 : tile_1;
    const int64_t ys0 = it->stride[0][nd - 2], xs1 = it->stride[1][nd - 1];
    int64_t idx[ORDO_MAX_DIMS] = {0};
    char *yp = it->ptr[0], *xp = it->ptr[1];
    for (;;) {
        tile(yp, xp, R, C, ys0, xs1);
        int d = nd - 3;
        for (; d >= 0; d--) {
            if (++idx[d] < it->shape[d]) {
                yp += it->bstride[0][d];
                xp += it->bstride[1][d];
                break;
            }
            idx[d] = 0;
            yp -= it->bstride[0][d] * (it->shape[d] - 1);
            xp -= it->bstride[1][d] * (it->shape[d] - 1);
        }
        if (d < 0) return 1;
    }
}

int cpu_check_copy(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_args(rc, "copy", a, 1, 1);
    if (r) return r;
    const ordo_view *v[2] = {&a->out[0], &a->in[0]};
    static const char *const names[2] = {"out", "x"};
    if ((r = cpu_check_same_shapes(rc, "copy", v, names, 2))) return r;
    return cpu_check_writable(rc, "copy", &a->out[0]);
}

static int k_copy(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    if (cpu_args_fit(a, 1, 1)) { /* see cpu_dense_numel */
        const ordo_view *v[2] = {&a->out[0], &a->in[0]};
        const int64_t n = cpu_dense_numel(2, v);
        if (n > 0 && n < CPU_PAR_MIN) {
            char *p[2] = {(char *)v[0]->data, (char *)v[1]->data};
            cast_loops[v[0]->dtype][v[1]->dtype](n, p, cpu_unit_strides, NULL);
            return 0;
        }
    }
    int r = cpu_check_copy(rc, a);
    if (r) return r;
    const ordo_view *y = &a->out[0], *x = &a->in[0];
    const ordo_view *v[2] = {y, x};
    cpu_iter it;
    cpu_iter_init_views(&it, 2, v, 0);
    if (it.numel == 0) return 0;
    if (y->dtype == x->dtype && copy_transposed(&it, ordo_dtype_size(y->dtype))) return 0;
    cpu_iter_run_parallel(&it, cast_loops[y->dtype][x->dtype], NULL);
    return 0;
}

/* ---- arange -------------------------------------------------------------- */

int cpu_check_arange(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_arange_plan *p) {
    int r = cpu_check_args(rc, "arange", a, 0, 1);
    if (r) return r;
    const ordo_view *y = &a->out[0];
    if (a->nscalar < 2) return ordo_fail(rc, "arange: needs start and step as scalar[0], scalar[1]");
    if (y->ndim != 1) return ordo_fail(rc, "arange: output must be 1-d, got %d dims", y->ndim);
    if ((r = cpu_check_writable(rc, "arange", y))) return r;
    const double start = a->scalar[0], step = a->scalar[1];
    p->start = start;
    p->step = step;
    p->n = y->shape[0];
    p->stride = y->strides[0];
    p->integral = 0;
    if (p->n == 0) return 0;
    const double last = start + (double)(p->n - 1) * step;
    if (!isfinite(start) || !isfinite(step) || !isfinite(last))
        return ordo_fail(rc, "arange: start %g, step %g give non-finite values", cpu_shown(start), cpu_shown(step));
    if (cpu_dtype_is_float(y->dtype)) return 0;
    /* Integer dtypes: both ends must fit (the values are monotonic between). */
    cpu_scalar lo, hi;
    if ((r = cpu_scalar_fill_value(rc, "arange", y->dtype, start, &lo))) return r;
    if ((r = cpu_scalar_fill_value(rc, "arange", y->dtype, last, &hi))) return r;
    /* Exact in integers when start and step are integers (int64 values past
     * 2^53 would lose digits in double); truncated doubles otherwise. */
    p->integral = start == trunc(start) && step == trunc(step) && fabs(step) < 9.2e18;
    return 0;
}

static int k_arange(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_arange_plan pl;
    int r = cpu_check_arange(rc, a, &pl);
    if (r) return r;
    const ordo_view *y = &a->out[0];
    const double start = pl.start, step = pl.step;
    const int64_t n = pl.n, s = pl.stride;
    const int integral = pl.integral;
    if (n == 0) return 0;
    switch (y->dtype) {
    case ORDO_F32: {
        float *p = y->data;
        for (int64_t i = 0; i < n; i++) p[i * s] = (float)(start + (double)i * step);
        return 0;
    }
    case ORDO_F64: {
        double *p = y->data;
        for (int64_t i = 0; i < n; i++) p[i * s] = start + (double)i * step;
        return 0;
    }
    case ORDO_I32: {
        int32_t *p = y->data;
        for (int64_t i = 0; i < n; i++)
            p[i * s] = integral ? (int32_t)((int64_t)start + i * (int64_t)step)
                                : cpu_sat_i32(start + (double)i * step);
        return 0;
    }
    case ORDO_I64: {
        int64_t *p = y->data;
        for (int64_t i = 0; i < n; i++)
            p[i * s] = integral ? (int64_t)((uint64_t)(int64_t)start + (uint64_t)i * (uint64_t)(int64_t)step)
                                : cpu_sat_i64(start + (double)i * step);
        return 0;
    }
    case ORDO_U8: {
        uint8_t *p = y->data;
        for (int64_t i = 0; i < n; i++)
            p[i * s] = integral ? (uint8_t)((int64_t)start + i * (int64_t)step)
                                : cpu_sat_u8(start + (double)i * step);
        return 0;
    }
    default: return cpu_fail_dtype(rc, "arange", y->dtype);
    }
}

void cpu_register_copy(void) {
    static const cpu_kernel_entry t[] = {
        {"fill", k_fill},
        {"copy", k_copy},
        {"arange", k_arange},
    };
    CPU_REGISTER_TABLE(t);
}
