/*
 * compare.c - eq ne lt le gt ge (tensor and scalar forms) giving uint8 0/1,
 * the selections that consume such masks: where, masked_fill, and
 * check_range, a copy that fails on a value out of bounds.
 */
#include <string.h>

#include "cpu_internal.h"

#define CMP_EQ(a, b) ((a) == (b))
#define CMP_NE(a, b) ((a) != (b))
#define CMP_LT(a, b) ((a) < (b))
#define CMP_LE(a, b) ((a) <= (b))
#define CMP_GT(a, b) ((a) > (b))
#define CMP_GE(a, b) ((a) >= (b))

/* y (u8) = OP(a, b); the same fast paths as the arithmetic loops. */
#define DEF_CMP_LOOP(NAME, T, OP)                                                     \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                   \
        uint8_t *y = (uint8_t *)p[0];                                                \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                          \
        int64_t i = 0;                                                               \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                   \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                uint8_t t[CPU_BLK];                                                  \
                for (int j = 0; j < CPU_BLK; j++) t[j] = (uint8_t)OP(a[i + j], b[i + j]); \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = (uint8_t)OP(a[i], b[i]);                       \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                            \
            const T bv = *b;                                                         \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                uint8_t t[CPU_BLK];                                                  \
                for (int j = 0; j < CPU_BLK; j++) t[j] = (uint8_t)OP(a[i + j], bv);  \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = (uint8_t)OP(a[i], bv);                         \
        } else {                                                                     \
            for (; i < n; i++) y[i * s[0]] = (uint8_t)OP(a[i * s[1]], b[i * s[2]]);  \
        }                                                                            \
        return 0;                                                                    \
    }

#define DEF_CMP_LOOPS(OPN, OP)                                                        \
    DEF_CMP_LOOP(OPN##_f32, float, OP)                                               \
    DEF_CMP_LOOP(OPN##_f64, double, OP)                                              \
    DEF_CMP_LOOP(OPN##_i32, int32_t, OP)                                             \
    DEF_CMP_LOOP(OPN##_i64, int64_t, OP)                                             \
    DEF_CMP_LOOP(OPN##_u8, uint8_t, OP)
DEF_CMP_LOOPS(eq, CMP_EQ)
DEF_CMP_LOOPS(ne, CMP_NE)
DEF_CMP_LOOPS(lt, CMP_LT)
DEF_CMP_LOOPS(le, CMP_LE)
DEF_CMP_LOOPS(gt, CMP_GT)
DEF_CMP_LOOPS(ge, CMP_GE)

#define LOOPS(OPN) {OPN##_f32, OPN##_f64, OPN##_i32, OPN##_i64, OPN##_u8}
static const cpu_loop_fn cmp_loops[CPU_CMP_N][ORDO_NDTYPES] = {
    LOOPS(eq), LOOPS(ne), LOOPS(lt), LOOPS(le), LOOPS(gt), LOOPS(ge),
};
const char *const cpu_cmp_names[CPU_CMP_N] = {"eq", "ne", "lt", "le", "gt", "ge"};
const char *const cpu_cmp_scalar_names[CPU_CMP_N] = {"eq_scalar", "ne_scalar", "lt_scalar",
                                                     "le_scalar", "gt_scalar", "ge_scalar"};

static int check_u8_out(const ordo_run_ctx *rc, const char *name, const ordo_view *y) {
    if (y->dtype != ORDO_U8)
        return ordo_fail(rc, "%s: output must be uint8, got %s", name, ordo_dtype_name(y->dtype));
    return cpu_check_writable(rc, name, y);
}

int cpu_check_cmp(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    const char *name = cpu_cmp_names[op];
    int r = cpu_check_args(rc, name, args, 2, 1);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0], *b = &args->in[1];
    if ((r = check_u8_out(rc, name, y))) return r;
    if (a->dtype != b->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: a is %s but b is %s", name,
                         ordo_dtype_name(a->dtype), ordo_dtype_name(b->dtype));
    const ordo_view *v[3] = {y, a, b};
    static const char *const names[3] = {"out", "a", "b"};
    return cpu_check_same_shapes(rc, name, v, names, 3);
}

static int run_cmp(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    if (cpu_args_fit(args, 2, 1)) { /* see cpu_dense_numel */
        const ordo_view *v[3] = {&args->out[0], &args->in[0], &args->in[1]};
        const int64_t n = cpu_dense_numel(3, v);
        const int dt = v[1]->dtype;
        if (n > 0 && n < CPU_PAR_MIN && v[0]->dtype == ORDO_U8 && v[2]->dtype == dt) {
            char *p[3] = {(char *)v[0]->data, (char *)v[1]->data, (char *)v[2]->data};
            cmp_loops[op][dt](n, p, cpu_unit_strides, NULL);
            return 0;
        }
    }
    int r = cpu_check_cmp(rc, args, op);
    if (r) return r;
    const ordo_view *v[3] = {&args->out[0], &args->in[0], &args->in[1]};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, 0);
    cpu_iter_run_parallel(&it, cmp_loops[op][args->in[0].dtype], NULL);
    return 0;
}

/* An integer tensor compared with a double scalar, exactly: the comparison
 * becomes one against an integer bound (x < 2.5 is x < 3, x <= 2.5 is
 * x <= 2), or a constant when no integer can satisfy or fail it (x == 2.5,
 * NaN, a bound beyond int64).  Converting x to double instead would be wrong
 * for int64 values past 2^53.  Returns -1 when *bound is to be compared
 * with op, or the constant result 0 / 1. */
static int int_cmp_bound(double s, int op, int64_t *bound) {
    if (s != s) return op == CPU_CMP_NE;
    if (s < -9223372036854775808.0) return op == CPU_CMP_NE || op == CPU_CMP_GT || op == CPU_CMP_GE;
    if (s >= 9223372036854775808.0) return op == CPU_CMP_NE || op == CPU_CMP_LT || op == CPU_CMP_LE;
    /* Doubles in [2^62, 2^63) are integers, so floor/ceil stay in range. */
    const double f = floor(s), c = ceil(s);
    if (f == c) {
        *bound = (int64_t)f;
        return -1;
    }
    switch (op) {
    case CPU_CMP_EQ: return 0;
    case CPU_CMP_NE: return 1;
    case CPU_CMP_LT: *bound = (int64_t)c; break; /* x < 2.5  <=> x < 3 */
    case CPU_CMP_LE: *bound = (int64_t)f; break; /* x <= 2.5 <=> x <= 2 */
    case CPU_CMP_GT: *bound = (int64_t)f; break; /* x > 2.5  <=> x > 2 */
    default: *bound = (int64_t)c; break;         /* x >= 2.5 <=> x >= 3 */
    }
    return -1;
}

int cpu_cmp_int_bound(int dtype, double s, int op, int64_t *bound) {
    const int k = int_cmp_bound(s, op, bound);
    if (k >= 0 || dtype == ORDO_I64) return k;
    /* the bound may lie outside the dtype (x < 256 for uint8): the result
     * is then constant (x < b, x <= b true; x > b, x >= b false; eq false) */
    const int64_t lo = dtype == ORDO_U8 ? 0 : INT32_MIN;
    const int64_t hi = dtype == ORDO_U8 ? 255 : INT32_MAX;
    if (*bound > hi) return op == CPU_CMP_LT || op == CPU_CMP_LE || op == CPU_CMP_NE;
    if (*bound < lo) return op == CPU_CMP_GT || op == CPU_CMP_GE || op == CPU_CMP_NE;
    return -1;
}

int cpu_check_cmp_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    const char *name = cpu_cmp_scalar_names[op];
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    if (args->nscalar < 1) return ordo_fail(rc, "%s: needs the scalar as scalar[0]", name);
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    if ((r = check_u8_out(rc, name, y))) return r;
    const ordo_view *v2[2] = {y, a};
    static const char *const names[2] = {"out", "a"};
    return cpu_check_same_shapes(rc, name, v2, names, 2);
}

static int run_cmp_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    int r = cpu_check_cmp_scalar(rc, args, op);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    const double s = args->scalar[0];
    cpu_scalar sc;
    memset(&sc, 0, sizeof sc);
    switch (a->dtype) {
    case ORDO_F32: sc.f32 = (float)s; break; /* compare in the tensor's precision, like Torch */
    case ORDO_F64: sc.f64 = s; break;
    default: {
        int64_t bound = 0;
        const int k = cpu_cmp_int_bound(a->dtype, s, op, &bound);
        if (k >= 0) { /* constant result */
            const uint8_t c = (uint8_t)k;
            cpu_fill_view(y, &c);
            return 0;
        }
        if (a->dtype == ORDO_I64) sc.i64 = bound;
        else if (a->dtype == ORDO_U8) sc.u8 = (uint8_t)bound;
        else sc.i32 = (int32_t)bound;
        break;
    }
    }
    ordo_view sv = *a;
    sv.data = &sc;
    for (int d = 0; d < sv.ndim; d++) sv.strides[d] = 0;
    const ordo_view *v[3] = {y, a, &sv};
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, 0);
    cpu_iter_run_parallel(&it, cmp_loops[op][a->dtype], NULL);
    return 0;
}

#define DEF_CMP_KERNELS(OPN, OP)                                                      \
    static int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) {          \
        return run_cmp(rc, a, OP);                                                   \
    }                                                                                \
    static int k_##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) { \
        return run_cmp_scalar(rc, a, OP);                                            \
    }
CPU_CMP_OPS(DEF_CMP_KERNELS)

/* ---- where, masked_fill ------------------------------------------------- */

/* p: out, cond, x, y.  Selection by bit pattern, so by element size. */
#define DEF_WHERE_LOOP(NAME, T)                                                       \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                   \
        T *o = (T *)p[0];                                                            \
        const uint8_t *c = (const uint8_t *)p[1];                                    \
        const T *x = (const T *)p[2], *y = (const T *)p[3];                          \
        int64_t i = 0;                                                               \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                      \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                T t[CPU_BLK];                                                        \
                for (int j = 0; j < CPU_BLK; j++) t[j] = c[i + j] ? x[i + j] : y[i + j]; \
                for (int j = 0; j < CPU_BLK; j++) o[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) o[i] = c[i] ? x[i] : y[i];                            \
        } else {                                                                     \
            for (; i < n; i++) o[i * s[0]] = c[i * s[1]] ? x[i * s[2]] : y[i * s[3]]; \
        }                                                                            \
        return 0;                                                                    \
    }
DEF_WHERE_LOOP(where_1, uint8_t)
DEF_WHERE_LOOP(where_4, uint32_t)
DEF_WHERE_LOOP(where_8, uint64_t)

static cpu_loop_fn where_loop(int dtype) {
    size_t es = ordo_dtype_size(dtype);
    return es == 8 ? where_8 : es == 4 ? where_4 : where_1;
}

int cpu_check_where(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_args(rc, "where", args, 3, 1);
    if (r) return r;
    const ordo_view *o = &args->out[0], *c = &args->in[0], *x = &args->in[1], *y = &args->in[2];
    if (c->dtype != ORDO_U8)
        return ordo_fail(rc, "where: cond must be uint8, got %s", ordo_dtype_name(c->dtype));
    if (x->dtype != o->dtype || y->dtype != o->dtype)
        return ordo_fail(rc, "where: dtype mismatch: x %s, y %s, out %s", ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype), ordo_dtype_name(o->dtype));
    const ordo_view *v[4] = {o, c, x, y};
    static const char *const names[4] = {"out", "cond", "x", "y"};
    if ((r = cpu_check_same_shapes(rc, "where", v, names, 4))) return r;
    return cpu_check_writable(rc, "where", o);
}

static int k_where(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_where(rc, args);
    if (r) return r;
    const ordo_view *v[4] = {&args->out[0], &args->in[0], &args->in[1], &args->in[2]};
    cpu_iter it;
    cpu_iter_init_views(&it, 4, v, 0);
    cpu_iter_run_parallel(&it, where_loop(args->out[0].dtype), NULL);
    return 0;
}

int cpu_check_masked_fill(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_scalar *val) {
    int r = cpu_check_args(rc, "masked_fill", args, 2, 1);
    if (r) return r;
    const ordo_view *o = &args->out[0], *x = &args->in[0], *m = &args->in[1];
    if (args->nscalar < 1) return ordo_fail(rc, "masked_fill: needs the value as scalar[0]");
    if (m->dtype != ORDO_U8)
        return ordo_fail(rc, "masked_fill: mask must be uint8, got %s", ordo_dtype_name(m->dtype));
    if (x->dtype != o->dtype)
        return ordo_fail(rc, "masked_fill: dtype mismatch: x is %s but out is %s",
                         ordo_dtype_name(x->dtype), ordo_dtype_name(o->dtype));
    const ordo_view *v3[3] = {o, m, x};
    static const char *const names[3] = {"out", "mask", "x"};
    if ((r = cpu_check_same_shapes(rc, "masked_fill", v3, names, 3))) return r;
    if ((r = cpu_check_writable(rc, "masked_fill", o))) return r;
    return cpu_scalar_fill_value(rc, "masked_fill", o->dtype, args->scalar[0], val);
}

/* masked_fill is where(mask, value, x) with the value as a stride-0 view. */
static int k_masked_fill(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_scalar val;
    int r = cpu_check_masked_fill(rc, args, &val);
    if (r) return r;
    const ordo_view *o = &args->out[0], *x = &args->in[0], *m = &args->in[1];
    ordo_view sv = *x;
    sv.data = &val;
    for (int d = 0; d < sv.ndim; d++) sv.strides[d] = 0;
    const ordo_view *v[4] = {o, m, &sv, x};
    cpu_iter it;
    cpu_iter_init_views(&it, 4, v, 0);
    cpu_iter_run_parallel(&it, where_loop(o->dtype), NULL);
    return 0;
}

/* the table's rows: eq..ge, then eq_scalar..ge_scalar */
#define CMP_ENTRY(OPN, OP) {#OPN, k_##OPN},
#define CMP_SCALAR_ENTRY(OPN, OP) {#OPN "_scalar", k_##OPN##_scalar},
/* ---- check_range ------------------------------------------------------------ */

/* out = x, failing when an element of x is below s0, above s1 or NaN.  An
 * op that must refuse some values (binary_cross_entropy's probabilities)
 * reads the checked copy: a bad value then fails it at run time, with no
 * host wait, and whatever reads the copy is skipped and carries the
 * failure (rule 5).  x is scanned before anything is written. */
int cpu_check_check_range(const ordo_run_ctx *rc, const ordo_kernel_args *args, int64_t *n, double *lo,
                          double *hi) {
    const char *name = "check_range";
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    const ordo_view *y = &args->out[0], *x = &args->in[0];
    if (!cpu_dtype_is_float(x->dtype)) return cpu_fail_dtype(rc, name, x->dtype);
    if (y->dtype != x->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: x is %s but out is %s", name, ordo_dtype_name(x->dtype),
                         ordo_dtype_name(y->dtype));
    const ordo_view *v[2] = {y, x};
    static const char *const names[2] = {"out", "x"};
    if ((r = cpu_check_same_shapes(rc, name, v, names, 2))) return r;
    if (args->nscalar < 2) return ordo_fail(rc, "%s: needs 2 scalars (low, high), got %d", name, args->nscalar);
    *lo = args->scalar[0];
    *hi = args->scalar[1];
    if (!(*lo <= *hi)) return ordo_fail(rc, "%s: bounds [%g, %g] are empty", name, *lo, *hi);
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++) count *= x->shape[d];
    *n = count == 0 ? 0 : cpu_dense_numel(2, v);
    if (*n < 0) return ordo_fail(rc, "%s: x and out must be contiguous", name);
    return 0;
}

#define DEF_CHECK_RANGE(SFX, T)                                                                         static int check_range_##SFX(const ordo_run_ctx *rc, const T *x, T *y, int64_t n, double lo, double hi) {         for (int64_t i = 0; i < n; i++)                                                                          if (!(x[i] >= lo && x[i] <= hi)) /* (NaN too) */                                                         return ordo_fail(rc, "check_range: value %g at element %lld is outside [%g, %g]",                                    (double)x[i], (long long)i + 1, lo, hi);                                    memcpy(y, x, (size_t)n * sizeof(T));                                                                return 0;                                                                                        }
DEF_CHECK_RANGE(f32, float)
DEF_CHECK_RANGE(f64, double)

static int k_check_range(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int64_t n;
    double lo, hi;
    int r = cpu_check_check_range(rc, args, &n, &lo, &hi);
    if (r || n == 0) return r;
    if (args->in[0].dtype == ORDO_F32)
        return check_range_f32(rc, (const float *)args->in[0].data, (float *)args->out[0].data, n, lo, hi);
    return check_range_f64(rc, (const double *)args->in[0].data, (double *)args->out[0].data, n, lo, hi);
}

void cpu_register_compare(void) {
    static const cpu_kernel_entry t[] = {
        CPU_CMP_OPS(CMP_ENTRY) CPU_CMP_OPS(CMP_SCALAR_ENTRY)
        {"where", k_where},
        {"masked_fill", k_masked_fill},
        {"check_range", k_check_range},
    };
    CPU_REGISTER_TABLE(t);
}
