/*
 * elementwise.c - binary arithmetic: add sub mul div pow maximum minimum
 * fmod, their tensor-scalar forms (y = a op s) and reversed forms (y = s op
 * a).
 *
 * A scalar form runs the same loop as the tensor form, with the scalar as a
 * stride-0 operand pointing at a local: one set of loops, and the loops'
 * "b has stride 0" fast path makes it as fast as a dedicated loop.
 *
 * Integer arithmetic wraps (two's complement) like NumPy and Torch; it is
 * computed in the unsigned type because signed overflow is undefined in C
 * (and UBSan would rightly complain).  Integer division truncates toward
 * zero; INT_MIN / -1 wraps to INT_MIN; division by zero fails the op.
 */
#include <string.h>

#include "cpu_internal.h"

/* ---- per-dtype element operations ------------------------------------- */

#define DEF_ARITH(SFX, T, UT)                                                                   \
    static inline T add_##SFX(T a, T b) { return (T)((UT)a + (UT)b); }                          \
    static inline T sub_##SFX(T a, T b) { return (T)((UT)a - (UT)b); }                          \
    static inline T mul_##SFX(T a, T b) { return (T)((UT)a * (UT)b); }                          \
    /* NaN propagates (a NaN operand wins), as in torch.maximum */                             \
    static inline T max_##SFX(T a, T b) { return CPU_MAX(a, b); }                               \
    static inline T min_##SFX(T a, T b) { return CPU_MIN(a, b); }
DEF_ARITH(f32, float, float)
DEF_ARITH(f64, double, double)
DEF_ARITH(i32, int32_t, uint32_t)
DEF_ARITH(i64, int64_t, uint64_t)
/* uint8 operands promote to int, whose range holds every sum and product of
 * two bytes; the cast back wraps. */
DEF_ARITH(u8, uint8_t, unsigned)

static inline float div_f32(float a, float b) { return a / b; }
static inline double div_f64(double a, double b) { return a / b; }
static inline float pow_f32(float a, float b) { return powf(a, b); }
static inline double pow_f64(double a, double b) { return pow(a, b); }
/* C's fmod is exact (the remainder of the true quotient), where a - trunc(a
 * / b) * b loses the remainder once a / b passes the mantissa. */
static inline float fmod_f32(float a, float b) { return fmodf(a, b); }
static inline double fmod_f64(double a, double b) { return fmod(a, b); }

/* ---- loops ------------------------------------------------------------ */

/* y = OP(a, b) with fast paths for all-contiguous rows and for one operand
 * broadcast along the row (a scalar, a bias row...). */
#define DEF_BIN_LOOP(NAME, T, OP)                                                     \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                   \
        T *y = (T *)p[0];                                                            \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                          \
        int64_t i = 0;                                                               \
        if (s[0] == 1 && s[1] == 1 && s[2] == 1) {                                   \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                T t[CPU_BLK];                                                        \
                for (int j = 0; j < CPU_BLK; j++) t[j] = OP(a[i + j], b[i + j]);     \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = OP(a[i], b[i]);                                \
        } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {                            \
            const T bv = *b;                                                         \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                T t[CPU_BLK];                                                        \
                for (int j = 0; j < CPU_BLK; j++) t[j] = OP(a[i + j], bv);           \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = OP(a[i], bv);                                  \
        } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {                            \
            const T av = *a;                                                         \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                T t[CPU_BLK];                                                        \
                for (int j = 0; j < CPU_BLK; j++) t[j] = OP(av, b[i + j]);           \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = OP(av, b[i]);                                  \
        } else {                                                                     \
            for (; i < n; i++) y[i * s[0]] = OP(a[i * s[1]], b[i * s[2]]);           \
        }                                                                            \
        return 0;                                                                    \
    }

#define DEF_BIN_LOOPS_ALL(OPN)                                                        \
    DEF_BIN_LOOP(OPN##_loop_f32, float, OPN##_f32)                                   \
    DEF_BIN_LOOP(OPN##_loop_f64, double, OPN##_f64)                                  \
    DEF_BIN_LOOP(OPN##_loop_i32, int32_t, OPN##_i32)                                 \
    DEF_BIN_LOOP(OPN##_loop_i64, int64_t, OPN##_i64)                                 \
    DEF_BIN_LOOP(OPN##_loop_u8, uint8_t, OPN##_u8)
DEF_BIN_LOOPS_ALL(add)
DEF_BIN_LOOPS_ALL(sub)
DEF_BIN_LOOPS_ALL(mul)
DEF_BIN_LOOPS_ALL(max)
DEF_BIN_LOOPS_ALL(min)
DEF_BIN_LOOP(div_loop_f32, float, div_f32)
DEF_BIN_LOOP(div_loop_f64, double, div_f64)
DEF_BIN_LOOP(pow_loop_f32, float, pow_f32)
DEF_BIN_LOOP(pow_loop_f64, double, pow_f64)
DEF_BIN_LOOP(fmod_loop_f32, float, fmod_f32)
DEF_BIN_LOOP(fmod_loop_f64, double, fmod_f64)

/* Integer division does not vectorise anyway, so one strided loop; returns
 * 1 at the first zero divisor (the kernel turns that into the message). */
#define DEF_IDIV_LOOP(NAME, T, UT, SIGNED)                                            \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                   \
        T *y = (T *)p[0];                                                            \
        const T *a = (const T *)p[1], *b = (const T *)p[2];                          \
        for (int64_t i = 0; i < n; i++) {                                            \
            const T x = a[i * s[1]], d = b[i * s[2]];                                \
            if (d == 0) return 1;                                                    \
            /* -1 separately: MIN / -1 overflows (undefined in C); it wraps */       \
            if (SIGNED && d == (T)-1) y[i * s[0]] = (T)(0 - (UT)x);                  \
            else y[i * s[0]] = (T)(x / d);                                           \
        }                                                                            \
        return 0;                                                                    \
    }
DEF_IDIV_LOOP(div_loop_i32, int32_t, uint32_t, 1)
DEF_IDIV_LOOP(div_loop_i64, int64_t, uint64_t, 1)
DEF_IDIV_LOOP(div_loop_u8, uint8_t, unsigned, 0)

/* ---- kernels ------------------------------------------------------------ */

typedef struct binop {
    const char *name, *scalar_name, *rscalar_name;
    int int_div;     /* integer dtypes: scalar must fit the dtype, 0 fails */
    int float_only;  /* no integer loops */
    cpu_loop_fn loops[ORDO_NDTYPES];
} binop;

#define LOOPS_ALL(OPN) {OPN##_loop_f32, OPN##_loop_f64, OPN##_loop_i32, OPN##_loop_i64, OPN##_loop_u8}
static const binop op_add = {"add", "add_scalar", NULL, 0, 0, LOOPS_ALL(add)};
static const binop op_sub = {"sub", "sub_scalar", "rsub_scalar", 0, 0, LOOPS_ALL(sub)};
static const binop op_mul = {"mul", "mul_scalar", NULL, 0, 0, LOOPS_ALL(mul)};
static const binop op_div = {"div", "div_scalar", "rdiv_scalar", 1, 0, LOOPS_ALL(div)};
static const binop op_pow = {"pow", "pow_scalar", "rpow_scalar", 0, 1, {pow_loop_f32, pow_loop_f64, NULL, NULL, NULL}};
static const binop op_max = {"maximum", NULL, NULL, 0, 0, LOOPS_ALL(max)};
static const binop op_min = {"minimum", NULL, NULL, 0, 0, LOOPS_ALL(min)};
static const binop op_fmod = {"fmod", "fmod_scalar", NULL, 0, 1, {fmod_loop_f32, fmod_loop_f64, NULL, NULL, NULL}};

/* The scalar s as an element of dtype.  Float dtypes round it to the dtype
 * (as Torch does).  Integer dtypes need an integer scalar: a fractional one
 * means the tensor layer forgot to promote to float, and truncating would
 * silently change the result (x * 0.5 would become x * 0).  For add, sub
 * and mul any int64 wraps like the arithmetic; for div it must fit. */
static int scalar_operand(const ordo_run_ctx *rc, const char *name, int dtype, double s, int fit,
                          cpu_scalar *out) {
    if (dtype == ORDO_F32) {
        out->f32 = (float)s;
        return 0;
    }
    if (dtype == ORDO_F64) {
        out->f64 = s;
        return 0;
    }
    if (!(s == trunc(s)))
        return ordo_fail(rc, "%s: scalar %g is not an integer; %s tensors take integer scalars "
                             "(promote to float first)",
                         name, cpu_shown(s), ordo_dtype_name(dtype));
    if (fit) return cpu_scalar_fill_value(rc, name, dtype, s, out);
    if (!(s >= -9223372036854775808.0 && s < 9223372036854775808.0))
        return ordo_fail(rc, "%s: scalar %g does not fit in int64", name, cpu_shown(s));
    int64_t v = (int64_t)s;
    switch (dtype) {
    case ORDO_I32: out->i32 = (int32_t)(uint32_t)(uint64_t)v; break;
    case ORDO_I64: out->i64 = v; break;
    default: out->u8 = (uint8_t)(uint64_t)v; break;
    }
    return 0;
}

static int dtype_mismatch(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v,
                          const char *const *names, int n) {
    for (int i = 1; i < n; i++)
        if (v[i]->dtype != v[0]->dtype)
            return ordo_fail(rc, "%s: dtype mismatch: %s is %s but %s is %s", name, names[0],
                             ordo_dtype_name(v[0]->dtype), names[i], ordo_dtype_name(v[i]->dtype));
    return 0;
}

/* The checks in this order on both devices (see cpu_internal.h). */
int cpu_check_binary(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int mode,
                     int float_only, int int_div, cpu_scalar *s) {
    memset(s, 0, sizeof *s);
    int r = cpu_check_args(rc, name, args, mode == 0 ? 2 : 1, 1);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    if (mode != 0) {
        if (args->nscalar < 1) return ordo_fail(rc, "%s: needs the scalar as scalar[0]", name);
        if (float_only && !cpu_dtype_is_float(a->dtype)) return cpu_fail_dtype(rc, name, a->dtype);
        if ((r = scalar_operand(rc, name, a->dtype, args->scalar[0], int_div, s))) return r;
        if (int_div && !cpu_dtype_is_float(a->dtype) && mode == 1 && cpu_load_double(a->dtype, s) == 0)
            return ordo_fail(rc, "%s: integer division by zero", name);
    }
    /* v[2] is only looked at in mode 0 */
    const ordo_view *v[3] = {y, a, &args->in[1]};
    static const char *const tnames[3] = {"out", "a", "b"};
    static const char *const snames[3] = {"out", "a", "scalar"};
    const int nv = mode ? 2 : 3;
    if ((r = dtype_mismatch(rc, name, v, mode ? snames : tnames, nv))) return r;
    if ((r = cpu_check_same_shapes(rc, name, v, mode ? snames : tnames, nv))) return r;
    if ((r = cpu_check_writable(rc, name, y))) return r;
    if (float_only && !cpu_dtype_is_float(a->dtype)) return cpu_fail_dtype(rc, name, a->dtype);
    return 0;
}

/* mode 0: y = a op b; 1: y = a op s; 2: y = s op a. */
static int run_binary(const ordo_run_ctx *rc, const ordo_kernel_args *args, const binop *op, int mode) {
    if (cpu_args_fit(args, mode == 0 ? 2 : 1, 1)) { /* see cpu_dense_numel */
        const ordo_view *v[3] = {&args->out[0], &args->in[0], &args->in[1]};
        const int64_t n = cpu_dense_numel(mode == 0 ? 3 : 2, v);
        const int dt = v[0]->dtype;
        cpu_scalar s;
        char *p[3] = {(char *)v[0]->data, (char *)v[1]->data, NULL}; /* in[1] only in mode 0 */
        const int64_t *st = cpu_unit_strides;
        static const int64_t scalar_right[3] = {1, 1, 0}, scalar_left[3] = {1, 0, 1};
        int fast = n > 0 && n < CPU_PAR_MIN && v[1]->dtype == dt && op->loops[dt];
        if (fast && mode == 0) {
            fast = v[2]->dtype == dt;
            p[2] = (char *)v[2]->data;
        } else if (fast) { /* float scalars only: integer ones have range checks */
            fast = args->nscalar >= 1 && cpu_dtype_is_float(dt);
            if (dt == ORDO_F32) s.f32 = (float)args->scalar[0];
            else s.f64 = args->scalar[0];
            p[3 - mode] = (char *)&s; /* y = a op s, or y = s op a */
            p[mode] = (char *)v[1]->data;
            st = mode == 1 ? scalar_right : scalar_left;
        }
        if (fast) {
            if (op->loops[dt](n, p, st, NULL))
                return ordo_fail(rc, "%s: integer division by zero", op->name);
            return 0;
        }
    }
    const char *name = mode == 0 ? op->name : mode == 1 ? op->scalar_name : op->rscalar_name;
    cpu_scalar s;
    int r = cpu_check_binary(rc, name, args, mode, op->float_only, op->int_div, &s);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0], *b = &args->in[1];
    ordo_view sv; /* the scalar as a stride-0 view of a's shape */
    if (mode != 0) {
        sv = *a;
        sv.data = &s;
        for (int d = 0; d < sv.ndim; d++) sv.strides[d] = 0;
        b = &sv;
    }
    const ordo_view *v[3] = {y, a, b};
    if (mode == 2) { /* s op a: the scalar becomes the left operand */
        v[1] = b;
        v[2] = a;
    }
    cpu_iter it;
    cpu_iter_init_views(&it, 3, v, 0);
    if (cpu_iter_run_parallel(&it, op->loops[a->dtype], NULL))
        return ordo_fail(rc, "%s: integer division by zero", name);
    return 0;
}

#define DEF_KERNELS(OPV, OPN)                                                                \
    static int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) {                  \
        return run_binary(rc, a, &OPV, 0);                                                   \
    }
#define DEF_SKERNEL(OPV, OPN)                                                                \
    static int k_##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) {         \
        return run_binary(rc, a, &OPV, 1);                                                   \
    }
#define DEF_RKERNEL(OPV, OPN)                                                                \
    static int k_r##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) {        \
        return run_binary(rc, a, &OPV, 2);                                                   \
    }
DEF_KERNELS(op_add, add)
DEF_KERNELS(op_sub, sub)
DEF_KERNELS(op_mul, mul)
DEF_KERNELS(op_div, div)
DEF_KERNELS(op_pow, pow)
DEF_KERNELS(op_max, maximum)
DEF_KERNELS(op_min, minimum)
DEF_KERNELS(op_fmod, fmod)
DEF_SKERNEL(op_add, add)
DEF_SKERNEL(op_sub, sub)
DEF_SKERNEL(op_mul, mul)
DEF_SKERNEL(op_div, div)
DEF_SKERNEL(op_pow, pow)
DEF_SKERNEL(op_fmod, fmod)
DEF_RKERNEL(op_sub, sub)
DEF_RKERNEL(op_div, div)
DEF_RKERNEL(op_pow, pow)

void cpu_register_elementwise(void) {
    static const cpu_kernel_entry t[] = {
        {"add", k_add},
        {"sub", k_sub},
        {"mul", k_mul},
        {"div", k_div},
        {"pow", k_pow},
        {"maximum", k_maximum},
        {"minimum", k_minimum},
        {"fmod", k_fmod},
        {"add_scalar", k_add_scalar},
        {"sub_scalar", k_sub_scalar},
        {"mul_scalar", k_mul_scalar},
        {"div_scalar", k_div_scalar},
        {"pow_scalar", k_pow_scalar},
        {"fmod_scalar", k_fmod_scalar},
        {"rsub_scalar", k_rsub_scalar},
        {"rdiv_scalar", k_rdiv_scalar},
        {"rpow_scalar", k_rpow_scalar},
    };
    CPU_REGISTER_TABLE(t);
}
