/*
 * lines.c - ops that walk x line by line along one dim, where each output
 * element depends on the elements before it in its line: cumsum and
 * cumprod (a running sum, product), cumprod's gradient, sort (values
 * and the int64 indices they came from), topk (sort's first k of each
 * line, without the sort) and kthvalue (sort's k-th, by a selection).
 *
 * Both iterate over the kept dims (x without dim) and run one line per
 * element there, strided along dim, one thread: the lines are independent
 * but these ops are rare in a step and short, so the parallel split is not
 * worth its set-up here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* The plan for views v (out0, out1 or g, x) along iparam 0's dim, once
 * their shapes are known to match. */
static int plan_lines(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                      const ordo_view *const *v, cpu_line_plan *pl) {
    const ordo_view *x = v[2];
    const int64_t d = args->niparam > 0 ? args->iparam[0] : -1;
    if (args->niparam < 1 || d < 0 || d >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "%s: dim %lld out of range for x of %d dims", name, (long long)d, x->ndim);
    pl->dim = (int)d;
    for (int k = 0; k < 3; k++) {
        pl->kept[k] = *v[k];
        pl->step[k] = 0;
        if (x->ndim > 0) {
            pl->step[k] = v[k]->strides[d];
            cpu_view_drop_dim(v[k], pl->dim, &pl->kept[k]);
        }
    }
    pl->n = x->ndim > 0 ? x->shape[d] : 1; /* a 0-d x is one line of one element */
    return 0;
}

int cpu_check_lines(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int nout,
                    cpu_line_plan *pl) {
    int r = cpu_check_args(rc, name, args, 1, nout);
    if (r) return r;
    const ordo_view *x = &args->in[0];
    const ordo_view *v[3] = {&args->out[0], nout > 1 ? &args->out[1] : x, x};
    static const char *const names[3] = {"out", "indices", "x"};
    if (args->out[0].dtype != x->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but out is %s", name, ordo_dtype_name(x->dtype),
                         ordo_dtype_name(args->out[0].dtype));
    if (nout > 1 && args->out[1].dtype != ORDO_I64)
        return ordo_fail(rc, "%s: indices must be int64, got %s", name, ordo_dtype_name(args->out[1].dtype));
    if ((r = cpu_check_same_shapes(rc, name, v, names, 3))) return r;
    for (int k = 0; k < nout; k++)
        if ((r = cpu_check_writable(rc, name, &args->out[k]))) return r;
    return plan_lines(rc, name, args, v, pl);
}

int cpu_check_lines_grad(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                         cpu_line_plan *pl) {
    int r = cpu_check_args(rc, name, args, 2, 1);
    if (r) return r;
    const ordo_view *v[3] = {&args->out[0], &args->in[1], &args->in[0]};
    static const char *const names[3] = {"gx", "g", "x"};
    const int dt = args->in[0].dtype;
    if (dt != ORDO_F32 && dt != ORDO_F64) return ordo_fail(rc, "%s: dtype %s not implemented", name, ordo_dtype_name(dt));
    for (int k = 0; k < 2; k++)
        if (v[k]->dtype != dt)
            return ordo_fail(rc, "%s: dtype mismatch: x is %s but %s is %s", name, ordo_dtype_name(dt), names[k],
                             ordo_dtype_name(v[k]->dtype));
    if ((r = cpu_check_same_shapes(rc, name, v, names, 3))) return r;
    if ((r = cpu_check_writable(rc, name, &args->out[0]))) return r;
    return plan_lines(rc, name, args, v, pl);
}

/* ---- cumsum, cumprod --------------------------------------------------------------- */

/* Floats accumulate in double (as Torch's CPU cumsum does), integers in
 * their unsigned 64-bit type, so that overflow wraps instead of being
 * undefined (a product too: unsigned multiplication is two's complement's
 * modulo 2^64). */
#define DEF_SCAN(NAME, SFX, T, ACC, TO, INIT, STEP)                                      \
    static int NAME##_##SFX(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {   \
        const cpu_line_plan *pl = ctx;                                                     \
        const int64_t n = pl->n, sy = pl->step[0], sx = pl->step[2];                     \
        for (int64_t r = 0; r < cnt; r++) {                                              \
            T *y = (T *)p[0] + r * s[0];                                                 \
            const T *x = (const T *)p[2] + r * s[2];                                     \
            ACC acc = INIT;                                                              \
            for (int64_t i = 0; i < n; i++) {                                            \
                acc = acc STEP (ACC)x[i * sx]; /* read before the write: y may be x */   \
                y[i * sy] = TO(acc);                                                     \
            }                                                                            \
        }                                                                                \
        return 0;                                                                        \
    }
/* The same along a dim that is not x's innermost: a line per output there
 * walks a column, a new cache line per element (cumsum(1) of a 2048 x 2048
 * matrix took 20 times cumsum(2)), so instead x is read slice by slice
 * along the dim, each slice folded into accumulators (ACC, contiguous, one
 * per line: p[1]) and stored into y's slice (p[0]); p[2] is x's slice. */
#define DEF_SCAN_SLICE(NAME, SFX, T, ACC, TO, STEP)                                                \
    static int NAME##_slice_##SFX(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {     \
        (void)ctx;                                                                                 \
        T *y = (T *)p[0];                                                                          \
        ACC *acc = (ACC *)p[1];                                                                    \
        const T *x = (const T *)p[2];                                                              \
        for (int64_t i = 0; i < cnt; i++) {                                                        \
            const ACC a = acc[i * s[1]] STEP (ACC)x[i * s[2]]; /* read before the write: y may be x */ \
            acc[i * s[1]] = a;                                                                     \
            y[i * s[0]] = TO(a);                                                                   \
        }                                                                                          \
        return 0;                                                                                  \
    }
#define AS_F32(a) ((float)(a))
#define AS_F64(a) (a)
#define AS_I32(a) ((int32_t)(uint32_t)(a))
#define AS_I64(a) ((int64_t)(a))
#define AS_U8(a) ((uint8_t)(a))
#define DEF_SCANS(NAME, INIT, STEP)                                 \
    DEF_SCAN(NAME, f32, float, double, AS_F32, INIT, STEP)          \
    DEF_SCAN(NAME, f64, double, double, AS_F64, INIT, STEP)         \
    DEF_SCAN(NAME, i32, int32_t, uint64_t, AS_I32, INIT, STEP)      \
    DEF_SCAN(NAME, i64, int64_t, uint64_t, AS_I64, INIT, STEP)      \
    DEF_SCAN(NAME, u8, uint8_t, uint64_t, AS_U8, INIT, STEP)        \
    DEF_SCAN_SLICE(NAME, f32, float, double, AS_F32, STEP)          \
    DEF_SCAN_SLICE(NAME, f64, double, double, AS_F64, STEP)         \
    DEF_SCAN_SLICE(NAME, i32, int32_t, uint64_t, AS_I32, STEP)      \
    DEF_SCAN_SLICE(NAME, i64, int64_t, uint64_t, AS_I64, STEP)      \
    DEF_SCAN_SLICE(NAME, u8, uint8_t, uint64_t, AS_U8, STEP)
DEF_SCANS(cumsum, 0, +)
DEF_SCANS(cumprod, 1, *)

/* slices: the DEF_SCAN_SLICE loops; init: the running value's start (0 or
 * 1), a double for float x, else an integer */
static int run_scan(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                    const cpu_loop_fn *loops, const cpu_loop_fn *slices, int init) {
    cpu_line_plan pl;
    int r = cpu_check_lines(rc, name, args, 1, &pl);
    if (r) return r;
    if (ordo_view_numel(&args->in[0]) == 0) return 0;
    const ordo_view *x = &args->in[0];
    const int64_t nlines = ordo_view_numel(&pl.kept[2]);
    cpu_iter it;
    if (x->ndim == 0 || cpu_dim_is_innermost(x, pl.dim) || nlines < 8) {
        const ordo_view *v[3] = {&pl.kept[0], &pl.kept[1], &pl.kept[2]};
        cpu_iter_init_views(&it, 3, v, 0);
        return cpu_iter_run(&it, loops[x->dtype], &pl);
    }
    /* slice by slice, one accumulator per line (8 bytes: double or uint64) */
    char *acc = malloc((size_t)nlines * 8);
    if (!acc) return ordo_fail(rc, "%s: out of memory for %lld accumulators", name, (long long)nlines);
    const int is_float = x->dtype == ORDO_F32 || x->dtype == ORDO_F64;
    for (int64_t i = 0; i < nlines; i++) {
        if (is_float) ((double *)acc)[i] = init;
        else ((uint64_t *)acc)[i] = (uint64_t)init;
    }
    const ordo_view *y = &pl.kept[0], *xs = &pl.kept[2];
    int64_t as[ORDO_MAX_DIMS];
    cpu_contiguous_strides(xs->ndim, xs->shape, as);
    const int es = (int)ordo_dtype_size(x->dtype);
    char *ptr[3] = {y->data, acc, xs->data};
    int esz[3] = {es, 8, es};
    const int64_t *st[3] = {y->strides, as, xs->strides};
    cpu_iter_init(&it, 3, xs->ndim, xs->shape, ptr, esz, st, 0);
    for (int64_t k = 0; k < pl.n; k++) {
        it.ptr[0] = (char *)y->data + k * pl.step[0] * es;
        it.ptr[2] = (char *)xs->data + k * pl.step[2] * es;
        cpu_iter_run(&it, slices[x->dtype], NULL);
    }
    free(acc);
    return 0;
}

static int k_cumsum(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    static const cpu_loop_fn loops[ORDO_NDTYPES] = {cumsum_f32, cumsum_f64, cumsum_i32, cumsum_i64, cumsum_u8};
    static const cpu_loop_fn slices[ORDO_NDTYPES] = {cumsum_slice_f32, cumsum_slice_f64, cumsum_slice_i32,
                                                     cumsum_slice_i64, cumsum_slice_u8};
    return run_scan(rc, "cumsum", args, loops, slices, 0);
}

static int k_cumprod(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    static const cpu_loop_fn loops[ORDO_NDTYPES] = {cumprod_f32, cumprod_f64, cumprod_i32, cumprod_i64,
                                                    cumprod_u8};
    static const cpu_loop_fn slices[ORDO_NDTYPES] = {cumprod_slice_f32, cumprod_slice_f64, cumprod_slice_i32,
                                                     cumprod_slice_i64, cumprod_slice_u8};
    return run_scan(rc, "cumprod", args, loops, slices, 1);
}

/* cumprod's gradient without dividing by x, so exact where x has zeros:
 * with y[k] = x[0] * .. * x[k], gx[i] = L[i] * S[i], where L[i] = x[0] *
 * .. * x[i-1] and S[i] = g[i] + x[i+1] * S[i+1] (S[n-1] = g[n-1]).  S is
 * built from the end of the line into gx, then L applied from the start;
 * both in double.  gx must not overlap x or g (the tensor layer reads an
 * input that overlaps an output from a copy). */
#define DEF_CUMPROD_GRAD(SFX, T)                                                                  \
    static int cumprod_grad_##SFX(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {     \
        const cpu_line_plan *pl = ctx;                                                             \
        const int64_t n = pl->n, so = pl->step[0], sg = pl->step[1], sx = pl->step[2];           \
        for (int64_t r = 0; r < cnt; r++) {                                                      \
            T *gx = (T *)p[0] + r * s[0];                                                        \
            const T *g = (const T *)p[1] + r * s[1];                                             \
            const T *x = (const T *)p[2] + r * s[2];                                             \
            double acc = 0;                                                                      \
            for (int64_t i = n - 1; i >= 0; i--) {                                               \
                acc = (double)g[i * sg] + (i + 1 < n ? (double)x[(i + 1) * sx] * acc : 0);       \
                gx[i * so] = (T)acc;                                                             \
            }                                                                                    \
            double left = 1;                                                                     \
            for (int64_t i = 0; i < n; i++) {                                                    \
                gx[i * so] = (T)(left * (double)gx[i * so]);                                     \
                left *= (double)x[i * sx];                                                       \
            }                                                                                    \
        }                                                                                        \
        return 0;                                                                                \
    }
DEF_CUMPROD_GRAD(f32, float)
DEF_CUMPROD_GRAD(f64, double)

/* in x, g; out gx (all of x's shape and float dtype); iparam 0 the dim. */
static int k_cumprod_backward(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_line_plan pl;
    int r = cpu_check_lines_grad(rc, "cumprod_backward", args, &pl);
    if (r) return r;
    if (ordo_view_numel(&args->in[0]) == 0) return 0;
    const ordo_view *v[3] = {&pl.kept[0], &pl.kept[1], &pl.kept[2]};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, 0);
    return cpu_iter_run(&it, args->in[0].dtype == ORDO_F32 ? cumprod_grad_f32 : cumprod_grad_f64, &pl);
}

/* ---- sort ------------------------------------------------------------------------- */

/* A line is copied into (value, index) pairs, sorted, and written back.
 * Stable (ties keep their order: the index breaks them), NaN sorts as the
 * largest value, as in Torch and NumPy. */
typedef struct sort_pair {
    double v; /* every dtype fits: int64 values in the specs' range, and exactly up to 2^53 */
    int64_t i;
} sort_pair;

/* int64 values beyond 2^53 would tie in a double: those lines sort on the
 * integers themselves. */
typedef struct sort_pair_i64 {
    int64_t v, i;
} sort_pair_i64;

static int cmp_up(const void *a, const void *b) {
    const sort_pair *x = a, *y = b;
    const int xn = isnan(x->v), yn = isnan(y->v);
    if (xn != yn) return xn - yn;
    if (!xn && x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_down(const void *a, const void *b) {
    const sort_pair *x = a, *y = b;
    const int xn = isnan(x->v), yn = isnan(y->v);
    if (xn != yn) return yn - xn; /* NaN first: the largest */
    if (!xn && x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_i64_up(const void *a, const void *b) {
    const sort_pair_i64 *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_i64_down(const void *a, const void *b) {
    const sort_pair_i64 *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

typedef struct sort_ctx {
    cpu_line_plan pl;
    int dtype, descending;
    void *buf; /* one line of pairs */
} sort_ctx;

static int sort_lines(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {
    const sort_ctx *c = ctx;
    const int dt = c->dtype;
    const int64_t n = c->pl.n, es = (int64_t)ordo_dtype_size(dt);
    const int64_t sy = c->pl.step[0] * es, si = c->pl.step[1], sx = c->pl.step[2] * es;
    for (int64_t r = 0; r < cnt; r++) {
        char *y = p[0] + r * s[0] * es;
        int64_t *idx = (int64_t *)p[1] + r * s[1];
        const char *x = p[2] + r * s[2] * es;
        if (dt == ORDO_I64) {
            sort_pair_i64 *b = c->buf;
            for (int64_t i = 0; i < n; i++) b[i] = (sort_pair_i64){*(const int64_t *)(x + i * sx), i};
            qsort(b, (size_t)n, sizeof *b, c->descending ? cmp_i64_down : cmp_i64_up);
            for (int64_t i = 0; i < n; i++) {
                *(int64_t *)(y + i * sy) = b[i].v;
                idx[i * si] = b[i].i;
            }
            continue;
        }
        sort_pair *b = c->buf;
        for (int64_t i = 0; i < n; i++) b[i] = (sort_pair){cpu_load_double(dt, x + i * sx), i};
        qsort(b, (size_t)n, sizeof *b, c->descending ? cmp_down : cmp_up);
        for (int64_t i = 0; i < n; i++) {
            cpu_store_double(dt, y + i * sy, b[i].v); /* exact: the values came from dt */
            idx[i * si] = b[i].i;
        }
    }
    return 0;
}

/* out[0] values (x's dtype), out[1] int64 indices along dim; iparam 0 the
 * dim, iparam 1 descending (0 or 1).  x is read whole into the buffer
 * before its line is written, so the values may be written over x. */
static int k_sort(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    sort_ctx c;
    int r = cpu_check_lines(rc, "sort", args, 2, &c.pl);
    if (r) return r;
    if (args->niparam < 2 || (args->iparam[1] != 0 && args->iparam[1] != 1))
        return ordo_fail(rc, "sort: iparam 1 (descending) must be 0 or 1");
    if (args->out[1].data == args->in[0].data && ordo_view_numel(&args->in[0]) > 0)
        return ordo_fail(rc, "sort: the indices must not overlap x");
    if (ordo_view_numel(&args->in[0]) == 0) return 0;
    c.dtype = args->in[0].dtype;
    c.descending = (int)args->iparam[1];
    c.buf = malloc((size_t)c.pl.n * sizeof(sort_pair));
    if (!c.buf) return ordo_fail(rc, "sort: out of memory for a line of %lld elements", (long long)c.pl.n);
    const ordo_view *v[3] = {&c.pl.kept[0], &c.pl.kept[1], &c.pl.kept[2]};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, CPU_ITER_KEEP_ORDER);
    r = cpu_iter_run(&it, sort_lines, &c);
    free(c.buf);
    return r;
}

/* ---- topk -------------------------------------------------------------------------- */

/* The first k of each line in sort's order (iparam 2: descending, as topk's
 * largest), without sorting the line: a heap holds the k best seen so far,
 * its root the one that would come last of them, so each element costs at
 * most log k compares and moves (n log k), and the k kept are sorted at the
 * end.  sort's comparisons (cmp_*), so the order is sort's exactly: NaN the
 * largest, ties by index. */
typedef union topk_pair {
    sort_pair d;
    sort_pair_i64 q;
} topk_pair;

typedef int (*pair_cmp)(const void *, const void *);

typedef struct topk_ctx {
    cpu_line_plan pl;
    int dtype;
    int64_t k, ostep[2]; /* the outputs' strides along dim (k long) */
    pair_cmp cmp;
    topk_pair *heap; /* k pairs */
} topk_ctx;

/* a comes after b (the heap's order: the root comes after all others) */
static inline int after(pair_cmp cmp, const topk_pair *a, const topk_pair *b) { return cmp(a, b) > 0; }

static void heap_down(topk_pair *h, int64_t m, int64_t i, pair_cmp cmp) {
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= m) return;
        if (c + 1 < m && after(cmp, &h[c + 1], &h[c])) c++;
        if (!after(cmp, &h[c], &h[i])) return;
        const topk_pair t = h[c];
        h[c] = h[i];
        h[i] = t;
        i = c;
    }
}

static void heap_up(topk_pair *h, int64_t i, pair_cmp cmp) {
    while (i > 0) {
        const int64_t up = (i - 1) / 2;
        if (!after(cmp, &h[i], &h[up])) return;
        const topk_pair t = h[up];
        h[up] = h[i];
        h[i] = t;
        i = up;
    }
}

static int topk_lines(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {
    const topk_ctx *c = ctx;
    const int dt = c->dtype;
    const int64_t n = c->pl.n, k = c->k, es = (int64_t)ordo_dtype_size(dt);
    const int64_t sy = c->ostep[0] * es, si = c->ostep[1], sx = c->pl.step[2] * es;
    topk_pair *h = c->heap;
    for (int64_t r = 0; r < cnt; r++) {
        char *y = p[0] + r * s[0] * es;
        int64_t *idx = (int64_t *)p[1] + r * s[1];
        const char *x = p[2] + r * s[2] * es;
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            topk_pair e;
            if (dt == ORDO_I64) e.q = (sort_pair_i64){*(const int64_t *)(x + i * sx), i};
            else e.d = (sort_pair){cpu_load_double(dt, x + i * sx), i};
            if (m < k) {
                h[m] = e;
                heap_up(h, m++, c->cmp);
            } else if (after(c->cmp, &h[0], &e)) {
                h[0] = e;
                heap_down(h, m, 0, c->cmp);
            }
        }
        qsort(h, (size_t)m, sizeof *h, c->cmp);
        for (int64_t i = 0; i < m; i++) {
            if (dt == ORDO_I64) {
                *(int64_t *)(y + i * sy) = h[i].q.v;
                idx[i * si] = h[i].q.i;
            } else {
                cpu_store_double(dt, y + i * sy, h[i].d.v); /* exact: the values came from dt */
                idx[i * si] = h[i].d.i;
            }
        }
    }
    return 0;
}

/* in x; out[0] values (x's dtype), out[1] int64 indices along dim (from 0),
 * both x's shape but k along dim; iparam 0 the dim, 1 k (0..n), 2 largest
 * (1: sort's descending order, 0: ascending). */
static int k_topk(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_args(rc, "topk", args, 1, 2);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0], *ix = &args->out[1];
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "topk: dtype mismatch: x is %s but out is %s", ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype));
    if (ix->dtype != ORDO_I64) return ordo_fail(rc, "topk: indices must be int64, got %s", ordo_dtype_name(ix->dtype));
    if (args->niparam < 3 || (args->iparam[2] != 0 && args->iparam[2] != 1))
        return ordo_fail(rc, "topk: iparam 2 (largest) must be 0 or 1");
    const int64_t d = args->iparam[0];
    if (d < 0 || d >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "topk: dim %lld out of range for x of %d dims", (long long)d, x->ndim);
    const int64_t n = x->ndim > 0 ? x->shape[d] : 1, k = args->iparam[1];
    if (k < 0 || k > n) return ordo_fail(rc, "topk: k %lld out of range for a line of %lld", (long long)k, (long long)n);
    char sx[160], sy[160], si[160];
    int ok = y->ndim == x->ndim && ix->ndim == x->ndim;
    for (int j = 0; ok && j < x->ndim; j++)
        if (y->shape[j] != (j == d ? k : x->shape[j]) || ix->shape[j] != y->shape[j]) ok = 0;
    if (!ok)
        return ordo_fail(rc, "topk: shape mismatch: x %s, out %s, indices %s (x's shape with %lld along dim %lld)",
                         cpu_shape_str(x, sx, sizeof sx), cpu_shape_str(y, sy, sizeof sy),
                         cpu_shape_str(ix, si, sizeof si), (long long)k, (long long)d);
    if ((r = cpu_check_writable(rc, "topk", y)) || (r = cpu_check_writable(rc, "topk", ix))) return r;
    if (ix->data == x->data && ordo_view_numel(ix) > 0) return ordo_fail(rc, "topk: the indices must not overlap x");
    if (k == 0 || ordo_view_numel(x) == 0) return 0;
    topk_ctx c;
    const ordo_view *v[3] = {y, ix, x};
    if ((r = plan_lines(rc, "topk", args, v, &c.pl))) return r;
    c.dtype = x->dtype;
    c.k = k;
    c.ostep[0] = x->ndim > 0 ? y->strides[d] : 0;
    c.ostep[1] = x->ndim > 0 ? ix->strides[d] : 0;
    c.cmp = x->dtype == ORDO_I64 ? (args->iparam[2] ? cmp_i64_down : cmp_i64_up) : (args->iparam[2] ? cmp_down : cmp_up);
    c.heap = malloc((size_t)k * sizeof *c.heap);
    if (!c.heap) return ordo_fail(rc, "topk: out of memory for %lld elements", (long long)k);
    const ordo_view *kv[3] = {&c.pl.kept[0], &c.pl.kept[1], &c.pl.kept[2]};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, kv, CPU_ITER_KEEP_ORDER);
    r = cpu_iter_run(&it, topk_lines, &c);
    free(c.heap);
    return r;
}

/* ---- kthvalue ---------------------------------------------------------------------- */

/* The element at place k (from 0) of each line in sort's ascending order,
 * without sorting it: a quickselect over (value, index) pairs (O(n) on
 * average), by sort's comparisons, a strict order (ties by index), so the
 * element and its index are sort's exactly.  A selection that splits badly
 * too often sorts what is left instead (n log n at worst).  iparam 2 = 1
 * (median): a line holding NaN gives the last of sort's order (its NaN of
 * the highest index), as the median of such a line is NaN. */
static inline void pair_swap(topk_pair *a, int64_t i, int64_t j) {
    const topk_pair t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static void select_place(topk_pair *a, int64_t n, int64_t k, pair_cmp cmp) {
    int64_t lo = 0, hi = n - 1;
    int budget = 2 * 64; /* splits before falling back to a sort */
    while (hi > lo) {
        if (--budget == 0) {
            qsort(a + lo, (size_t)(hi - lo + 1), sizeof *a, cmp);
            return;
        }
        const int64_t mid = lo + (hi - lo) / 2; /* the median of three as the pivot */
        if (cmp(&a[mid], &a[lo]) < 0) pair_swap(a, mid, lo);
        if (cmp(&a[hi], &a[lo]) < 0) pair_swap(a, hi, lo);
        if (cmp(&a[hi], &a[mid]) < 0) pair_swap(a, hi, mid);
        const topk_pair p = a[mid];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (cmp(&a[i], &p) < 0) i++;
            while (cmp(&a[j], &p) > 0) j--;
            if (i <= j) pair_swap(a, i++, j--);
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return; /* a[k] is the pivot, in its place */
    }
}

static int kth_lines(int64_t cnt, char *const *p, const int64_t *s, void *ctx) {
    const topk_ctx *c = ctx; /* k: the place; heap: a line of pairs; ostep unused */
    const int dt = c->dtype;
    const int64_t n = c->pl.n, es = (int64_t)ordo_dtype_size(dt), sx = c->pl.step[2] * es;
    const int nan_last = c->ostep[0] != 0 && (dt == ORDO_F32 || dt == ORDO_F64);
    topk_pair *a = c->heap;
    for (int64_t r = 0; r < cnt; r++) {
        char *y = p[0] + r * s[0] * es;
        int64_t *idx = (int64_t *)p[1] + r * s[1];
        const char *x = p[2] + r * s[2] * es;
        if (dt == ORDO_I64) {
            for (int64_t i = 0; i < n; i++) a[i].q = (sort_pair_i64){*(const int64_t *)(x + i * sx), i};
        } else {
            int64_t last_nan = -1;
            for (int64_t i = 0; i < n; i++) {
                a[i].d = (sort_pair){cpu_load_double(dt, x + i * sx), i};
                if (nan_last && isnan(a[i].d.v)) last_nan = i;
            }
            if (last_nan >= 0) {
                cpu_store_double(dt, y, a[last_nan].d.v);
                *idx = last_nan;
                continue;
            }
        }
        select_place(a, n, c->k, c->cmp);
        if (dt == ORDO_I64) {
            *(int64_t *)y = a[c->k].q.v;
            *idx = a[c->k].q.i;
        } else {
            cpu_store_double(dt, y, a[c->k].d.v); /* exact: the values came from dt */
            *idx = a[c->k].d.i;
        }
    }
    return 0;
}

/* in x; out[0] values (x's dtype), out[1] int64 indices along dim (from
 * 0), both x's shape with 1 along dim; iparam 0 the dim, 1 the place k
 * (0..n-1), 2 median (0/1: a line with NaN gives its last NaN). */
static int k_kthvalue(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_args(rc, "kthvalue", args, 1, 2);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0], *ix = &args->out[1];
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "kthvalue: dtype mismatch: x is %s but out is %s", ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype));
    if (ix->dtype != ORDO_I64)
        return ordo_fail(rc, "kthvalue: indices must be int64, got %s", ordo_dtype_name(ix->dtype));
    if (args->niparam < 3 || (args->iparam[2] != 0 && args->iparam[2] != 1))
        return ordo_fail(rc, "kthvalue: iparam 2 (median) must be 0 or 1");
    const int64_t d = args->iparam[0];
    if (d < 0 || d >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "kthvalue: dim %lld out of range for x of %d dims", (long long)d, x->ndim);
    const int64_t n = x->ndim > 0 ? x->shape[d] : 1, k = args->iparam[1];
    if (k < 0 || k >= n)
        return ordo_fail(rc, "kthvalue: place %lld out of range for a line of %lld", (long long)k, (long long)n);
    char sx[160], sy[160], si[160];
    int ok = y->ndim == x->ndim && ix->ndim == x->ndim;
    for (int j = 0; ok && j < x->ndim; j++)
        if (y->shape[j] != (j == d ? 1 : x->shape[j]) || ix->shape[j] != y->shape[j]) ok = 0;
    if (!ok)
        return ordo_fail(rc, "kthvalue: shape mismatch: x %s, out %s, indices %s (x's shape with 1 along dim %lld)",
                         cpu_shape_str(x, sx, sizeof sx), cpu_shape_str(y, sy, sizeof sy),
                         cpu_shape_str(ix, si, sizeof si), (long long)d);
    if ((r = cpu_check_writable(rc, "kthvalue", y)) || (r = cpu_check_writable(rc, "kthvalue", ix))) return r;
    if (ordo_view_numel(x) == 0) return 0;
    topk_ctx c;
    const ordo_view *v[3] = {y, ix, x};
    if ((r = plan_lines(rc, "kthvalue", args, v, &c.pl))) return r;
    c.dtype = x->dtype;
    c.k = k;
    c.ostep[0] = args->iparam[2];
    c.ostep[1] = 0;
    c.cmp = x->dtype == ORDO_I64 ? cmp_i64_up : cmp_up;
    c.heap = malloc((size_t)n * sizeof *c.heap);
    if (!c.heap) return ordo_fail(rc, "kthvalue: out of memory for a line of %lld elements", (long long)n);
    const ordo_view *kv[3] = {&c.pl.kept[0], &c.pl.kept[1], &c.pl.kept[2]};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, kv, CPU_ITER_KEEP_ORDER);
    r = cpu_iter_run(&it, kth_lines, &c);
    free(c.heap);
    return r;
}

void cpu_register_lines(void) {
    static const cpu_kernel_entry t[] = {
        {"cumsum", k_cumsum},
        {"cumprod", k_cumprod},
        {"cumprod_backward", k_cumprod_backward},
        {"sort", k_sort},
        {"topk", k_topk},
        {"kthvalue", k_kthvalue},
    };
    CPU_REGISTER_TABLE(t);
}
