/*
 * index.c - gather, index_select, and their adjoints scatter_add, index_add
 * (what autograd needs to send gradients back through the first two), and
 * scatter, scatter_add's walk storing instead of adding.
 *
 * gather and index_select are one loop: out[i] = x0[i + index[i] * sd],
 * where x0 is x with its stride along dim set to 0 (so the iterator walks
 * the other dims of x in step with the output) and index is, for
 * index_select, the 1-d index broadcast (stride 0) over every dim but dim.
 * scatter_add and index_add are the same walk with the assignment reversed
 * (y0[i + index[i] * sd] += src[i]); scatter stores (y0[..] = src[i]), in
 * the index's row-major order, so of repeated indices the last one wins.
 * Indices count from 0, or from the
 * base in iparam 1 (0 or 1: the Lua package passes its indices, which count
 * from 1, as they are, so no op converts them and an error names the index
 * and the dim as its user wrote them).  One out of range (negative
 * included) fails the op naming it; the adding kernels check every index
 * before touching y, so a failed op leaves y as it was.
 */
#include <string.h>

#include "cpu_internal.h"

typedef struct gather_ctx {
    int64_t extent; /* x's size along dim */
    int64_t sd;     /* x's stride along dim */
    int64_t base;   /* what the first index is: 0 or 1 */
    int64_t bad;    /* the offending index (as given) when the loop stops */
} gather_ctx;

/* p: out, index (int64), x0; moved by bit pattern, so by element size */
#define DEF_GATHER_LOOP(NAME, T)                                                      \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        gather_ctx *c = ctx;                                                         \
        T *y = (T *)p[0];                                                            \
        const int64_t *idx = (const int64_t *)p[1];                                  \
        const T *x = (const T *)p[2];                                                \
        for (int64_t i = 0; i < n; i++) {                                            \
            /* unsigned: no overflow for any index (INT64_MIN - 1), one compare */   \
            const int64_t v = idx[i * s[1]];                                         \
            const uint64_t k = (uint64_t)v - (uint64_t)c->base;                      \
            if (k >= (uint64_t)c->extent) {                                          \
                c->bad = v;                                                          \
                return 1;                                                            \
            }                                                                        \
            y[i * s[0]] = x[i * s[2] + (int64_t)k * c->sd];                          \
        }                                                                            \
        return 0;                                                                    \
    }
DEF_GATHER_LOOP(gather_1, uint8_t)
DEF_GATHER_LOOP(gather_4, uint32_t)
DEF_GATHER_LOOP(gather_8, uint64_t)

static cpu_loop_fn gather_loop(int dtype) {
    const size_t es = ordo_dtype_size(dtype);
    return es == 8 ? gather_8 : es == 4 ? gather_4 : gather_1;
}

int cpu_index_base(const ordo_kernel_args *a) { return a->niparam > 1 ? (int)a->iparam[1] : 0; }

/* iparam 1, when given, must be 0 or 1. */
static int check_base(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a) {
    if (a->niparam > 1 && a->iparam[1] != 0 && a->iparam[1] != 1)
        return ordo_fail(rc, "%s: iparam 1 (the first index) must be 0 or 1, got %lld", name,
                         (long long)a->iparam[1]);
    return 0;
}

/* An index out of range, named as its user counts (base 1: dims too). */
static int fail_range(const ordo_run_ctx *rc, const char *name, const gather_ctx *c, int dim) {
    return ordo_fail(rc, "%s: index %lld out of range for dim %d of size %lld%s", name, (long long)c->bad,
                     dim + (int)c->base, (long long)c->extent, c->base ? " (indices count from 1)" : "");
}

/* Common checks: dtypes, dim, base; returns 0 and sets *dim. */
static int index_prologue(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, int *dim) {
    int r = cpu_check_args(rc, name, a, 2, 1);
    if (r) return r;
    const ordo_view *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    if (idx->dtype != ORDO_I64)
        return ordo_fail(rc, "%s: index must be int64, got %s", name, ordo_dtype_name(idx->dtype));
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but out is %s", name,
                         ordo_dtype_name(x->dtype), ordo_dtype_name(y->dtype));
    const int64_t d = a->niparam > 0 ? a->iparam[0] : -1;
    if (a->niparam < 1 || d < 0 || d >= (x->ndim > 0 ? x->ndim : 1))
        return ordo_fail(rc, "%s: dim %lld out of range for x of %d dims", name, (long long)d, x->ndim);
    if ((r = check_base(rc, name, a))) return r;
    if ((r = cpu_check_writable(rc, name, y))) return r;
    *dim = (int)d;
    return 0;
}

static int run_gather_loop(const ordo_run_ctx *rc, const char *name, const ordo_view *y,
                           const ordo_view *idx, const ordo_view *x0, const ordo_view *x, int dim, int base) {
    gather_ctx c = {x->ndim ? x->shape[dim] : 1, x->ndim ? x->strides[dim] : 0, base, 0};
    const ordo_view *v[3] = {y, idx, x0};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, 0);
    if (cpu_iter_run(&it, gather_loop(x->dtype), &c)) return fail_range(rc, name, &c, dim);
    return 0;
}

/* index_select's and index_add's walk over the shape of `over`: *idx0 the
 * 1-d index along dim, broadcast over the other dims, and *v0 the view v
 * (x, or the y added into) with v's strides except along dim, where the
 * index moves it. */
static void spread_index(const ordo_view *over, const ordo_view *idx, const ordo_view *v, int dim,
                         ordo_view *idx0, ordo_view *v0) {
    *idx0 = *over;
    *v0 = *over;
    idx0->dtype = ORDO_I64;
    idx0->data = idx->data;
    v0->dtype = v->dtype;
    v0->data = v->data;
    for (int d = 0; d < over->ndim; d++) {
        idx0->strides[d] = d == dim ? idx->strides[0] : 0;
        v0->strides[d] = d == dim ? 0 : v->strides[d];
    }
}

int cpu_check_gather(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *x0) {
    int r;
    if ((r = index_prologue(rc, "gather", a, dim))) return r;
    const ordo_view *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    const int d0 = *dim;
    char sx[160], si[160], sy[160];
    int ok = idx->ndim == x->ndim && cpu_same_shape(idx, y);
    for (int d = 0; ok && d < x->ndim; d++)
        if (d != d0 && idx->shape[d] > x->shape[d]) ok = 0;
    if (!ok)
        return ordo_fail(rc, "gather: shape mismatch: x %s, index %s, out %s (index needs x's dims, "
                             "each no larger than x's except dim %d; out has index's shape)",
                         cpu_shape_str(x, sx, sizeof sx), cpu_shape_str(idx, si, sizeof si),
                         cpu_shape_str(y, sy, sizeof sy), d0);
    *x0 = *x; /* x over index's shape, not moving along dim */
    memcpy(x0->shape, idx->shape, sizeof x0->shape);
    if (x0->ndim) x0->strides[d0] = 0;
    return 0;
}

static int k_gather(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view x0;
    if ((r = cpu_check_gather(rc, a, &dim, &x0))) return r;
    return run_gather_loop(rc, "gather", &a->out[0], &a->in[1], &x0, &a->in[0], dim, cpu_index_base(a));
}

int cpu_check_index_select(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *idx0,
                           ordo_view *x0) {
    int r;
    if ((r = index_prologue(rc, "index_select", a, dim))) return r;
    const ordo_view *x = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    const int d0 = *dim;
    char sx[160], si[160], sy[160];
    if (x->ndim == 0) return ordo_fail(rc, "index_select: x must have at least one dim");
    int ok = idx->ndim == 1 && y->ndim == x->ndim;
    for (int d = 0; ok && d < y->ndim; d++)
        if (y->shape[d] != (d == d0 ? idx->shape[0] : x->shape[d])) ok = 0;
    if (!ok)
        return ordo_fail(rc, "index_select: shape mismatch: x %s, index %s, out %s (index must be "
                             "1-d; out is x with dim %d of index's length)",
                         cpu_shape_str(x, sx, sizeof sx), cpu_shape_str(idx, si, sizeof si),
                         cpu_shape_str(y, sy, sizeof sy), d0);
    spread_index(y, idx, x, d0, idx0, x0); /* both over out's shape */
    return 0;
}

static int k_index_select(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view iv, x0;
    if ((r = cpu_check_index_select(rc, a, &dim, &iv, &x0))) return r;
    return run_gather_loop(rc, "index_select", &a->out[0], &iv, &x0, &a->in[0], dim, cpu_index_base(a));
}

/* ---- scatter_add, index_add ---------------------------------------------- */

/* p: index (int64), src, y0 (y not moving along dim); y0[k * sd] += src */
#define DEF_SCATTER_LOOP(NAME, T, UT)                                                 \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        const gather_ctx *c = ctx;                                                   \
        const int64_t *idx = (const int64_t *)p[0];                                  \
        const T *src = (const T *)p[1];                                              \
        T *y = (T *)p[2];                                                            \
        for (int64_t i = 0; i < n; i++) {                                            \
            T *d = y + i * s[2] + (idx[i * s[0]] - c->base) * c->sd;                 \
            *d = (T)((UT)*d + (UT)src[i * s[1]]);                                    \
        }                                                                            \
        return 0;                                                                    \
    }
DEF_SCATTER_LOOP(scatter_f32, float, float)
DEF_SCATTER_LOOP(scatter_f64, double, double)
DEF_SCATTER_LOOP(scatter_i32, int32_t, uint32_t)
DEF_SCATTER_LOOP(scatter_i64, int64_t, uint64_t)
DEF_SCATTER_LOOP(scatter_u8, uint8_t, unsigned)
static const cpu_loop_fn scatter_loops[ORDO_NDTYPES] = {scatter_f32, scatter_f64, scatter_i32,
                                                        scatter_i64, scatter_u8};

/* p: index (int64), src, y0; y0[k * sd] = src, moved by bit pattern, in
 * the walk's order (the last of repeated indices wins) */
#define DEF_SET_LOOP(NAME, T)                                                         \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        const gather_ctx *c = ctx;                                                   \
        const int64_t *idx = (const int64_t *)p[0];                                  \
        const T *src = (const T *)p[1];                                              \
        T *y = (T *)p[2];                                                            \
        for (int64_t i = 0; i < n; i++)                                              \
            y[i * s[2] + (idx[i * s[0]] - c->base) * c->sd] = src[i * s[1]];         \
        return 0;                                                                    \
    }
DEF_SET_LOOP(set_1, uint8_t)
DEF_SET_LOOP(set_4, uint32_t)
DEF_SET_LOOP(set_8, uint64_t)

static cpu_loop_fn set_loop(int dtype) {
    const size_t es = ordo_dtype_size(dtype);
    return es == 8 ? set_8 : es == 4 ? set_4 : set_1;
}

/* p: index; stops at the first index outside [base, base + extent) */
static int check_index_loop(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    gather_ctx *c = ctx;
    const int64_t *idx = (const int64_t *)p[0];
    for (int64_t i = 0; i < n; i++) {
        const int64_t v = idx[i * s[0]];
        if ((uint64_t)v - (uint64_t)c->base >= (uint64_t)c->extent) { /* as the gather loop */
            c->bad = v;
            return 1;
        }
    }
    return 0;
}

/* in: src, index; out: y (read and written).  Checks dtypes and dim. */
static int add_prologue(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, int *dim) {
    int r = cpu_check_args(rc, name, a, 2, 1);
    if (r) return r;
    const ordo_view *src = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    if (idx->dtype != ORDO_I64)
        return ordo_fail(rc, "%s: index must be int64, got %s", name, ordo_dtype_name(idx->dtype));
    if (y->dtype != src->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: src is %s but out is %s", name,
                         ordo_dtype_name(src->dtype), ordo_dtype_name(y->dtype));
    const int64_t d = a->niparam > 0 ? a->iparam[0] : -1;
    if (a->niparam < 1 || d < 0 || d >= (y->ndim > 0 ? y->ndim : 1))
        return ordo_fail(rc, "%s: dim %lld out of range for out of %d dims", name, (long long)d, y->ndim);
    if ((r = check_base(rc, name, a))) return r;
    if ((r = cpu_check_writable(rc, name, y))) return r;
    *dim = (int)d;
    return 0;
}

/* idx, src0 and y0 all have one shape (the walk's); loop: the add (or
 * store) of the walk's elements. */
static int run_scatter(const ordo_run_ctx *rc, const char *name, const ordo_view *idx, const ordo_view *src0,
                       const ordo_view *y0, const ordo_view *y, int dim, int base, cpu_loop_fn loop) {
    gather_ctx c = {y->ndim ? y->shape[dim] : 1, y->ndim ? y->strides[dim] : 0, base, 0};
    cpu_iter it;
    const ordo_view *vi[1] = {idx};
    cpu_iter_init_views(&it, 1, vi, 0);
    if (cpu_iter_run(&it, check_index_loop, &c)) return fail_range(rc, name, &c, dim);
    /* Logical order, so that repeated indices add up in one fixed order
     * (scatter: the last in row-major order is stored last). */
    const ordo_view *v[3] = {idx, src0, y0};
    cpu_iter_init_views(&it, 3, v, CPU_ITER_KEEP_ORDER);
    cpu_iter_run(&it, loop, &c);
    return 0;
}

/* y[..index[i]..] += src[i] (scatter: = src[i]) along dim; index has y's
 * ndim and is no larger than src in any dim, nor than y except along dim. */
static int check_scatter(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a, int *dim,
                         ordo_view *src0, ordo_view *y0) {
    int r;
    if ((r = add_prologue(rc, name, a, dim))) return r;
    const ordo_view *src = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    const int d0 = *dim;
    char ss[160], si[160], sy[160];
    int ok = idx->ndim == y->ndim && src->ndim == y->ndim;
    for (int d = 0; ok && d < y->ndim; d++)
        if (idx->shape[d] > src->shape[d] || (d != d0 && idx->shape[d] > y->shape[d])) ok = 0;
    if (!ok)
        return ordo_fail(rc, "%s: shape mismatch: src %s, index %s, out %s (index needs out's "
                             "dims, each no larger than src's, nor than out's except dim %d)",
                         name, cpu_shape_str(src, ss, sizeof ss), cpu_shape_str(idx, si, sizeof si),
                         cpu_shape_str(y, sy, sizeof sy), d0);
    *src0 = *src; /* over index's shape */
    *y0 = *y;
    memcpy(src0->shape, idx->shape, sizeof src0->shape);
    memcpy(y0->shape, idx->shape, sizeof y0->shape);
    if (y0->ndim) y0->strides[d0] = 0;
    return 0;
}

int cpu_check_scatter_add(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *src0,
                          ordo_view *y0) {
    return check_scatter(rc, "scatter_add", a, dim, src0, y0);
}

int cpu_check_scatter(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *src0,
                      ordo_view *y0) {
    return check_scatter(rc, "scatter", a, dim, src0, y0);
}

static int k_scatter_add(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view src0, y0;
    if ((r = cpu_check_scatter_add(rc, a, &dim, &src0, &y0))) return r;
    return run_scatter(rc, "scatter_add", &a->in[1], &src0, &y0, &a->out[0], dim, cpu_index_base(a),
                       scatter_loops[a->out[0].dtype]);
}

static int k_scatter(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view src0, y0;
    if ((r = cpu_check_scatter(rc, a, &dim, &src0, &y0))) return r;
    return run_scatter(rc, "scatter", &a->in[1], &src0, &y0, &a->out[0], dim, cpu_index_base(a),
                       set_loop(a->out[0].dtype));
}

/* y[.., index[j], ..] += src[.., j, ..] along dim; index is 1-d. */
int cpu_check_index_add(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *idx0,
                        ordo_view *y0) {
    int r;
    if ((r = add_prologue(rc, "index_add", a, dim))) return r;
    const ordo_view *src = &a->in[0], *idx = &a->in[1], *y = &a->out[0];
    const int d0 = *dim;
    char ss[160], si[160], sy[160];
    if (y->ndim == 0) return ordo_fail(rc, "index_add: out must have at least one dim");
    int ok = idx->ndim == 1 && src->ndim == y->ndim;
    for (int d = 0; ok && d < y->ndim; d++)
        if (src->shape[d] != (d == d0 ? idx->shape[0] : y->shape[d])) ok = 0;
    if (!ok)
        return ordo_fail(rc, "index_add: shape mismatch: src %s, index %s, out %s (index must be 1-d; "
                             "src is out with dim %d of index's length)",
                         cpu_shape_str(src, ss, sizeof ss), cpu_shape_str(idx, si, sizeof si),
                         cpu_shape_str(y, sy, sizeof sy), d0);
    spread_index(src, idx, y, d0, idx0, y0); /* both over src's shape */
    return 0;
}

static int k_index_add(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view iv, y0;
    if ((r = cpu_check_index_add(rc, a, &dim, &iv, &y0))) return r;
    return run_scatter(rc, "index_add", &iv, &a->in[0], &y0, &a->out[0], dim, cpu_index_base(a),
                       scatter_loops[a->out[0].dtype]);
}

void cpu_register_index(void) {
    static const cpu_kernel_entry t[] = {
        {"gather", k_gather},
        {"index_select", k_index_select},
        {"scatter_add", k_scatter_add},
        {"scatter", k_scatter},
        {"index_add", k_index_add},
    };
    CPU_REGISTER_TABLE(t);
}
