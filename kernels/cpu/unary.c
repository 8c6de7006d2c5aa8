/*
 * unary.c - y = f(a), same dtype and shape: neg abs relu sign square
 * (signed dtypes) and exp log sqrt tanh sigmoid sin cos log1p expm1 rsqrt
 * reciprocal floor ceil round trunc tan asin acos atan sinh cosh asinh
 * acosh atanh erf erfc erfinv (float dtypes).
 */
#include "cpu_internal.h"
#include "erfinv.h"

/* Negating INT_MIN overflows; computed in the unsigned type it wraps to
 * INT_MIN as in NumPy and Torch, without undefined behaviour.  abs negates
 * zero too (a <= 0), so abs(-0.0) is +0.0 as C's fabs, Torch and NumPy. */
#define DEF_SIGNED_OPS(SFX, T, UT)                                                     \
    static inline T neg_##SFX(T a) { return (T)(0 - (UT)a); }                         \
    static inline T abs_##SFX(T a) { return a <= 0 ? (T)(0 - (UT)a) : a; }            \
    /* a < 0 rather than a > 0 ? a : 0, so NaN passes through as in Torch */         \
    static inline T relu_##SFX(T a) { return a < 0 ? (T)0 : a; }
/* sign: -1, 0 or 1 (NaN stays NaN, as NumPy; Torch gives 0); square in the unsigned
 * type, so an overflowing integer wraps instead of being undefined. */
#define DEF_SIGNED_OPS2(SFX, T, UT)                                                    \
    static inline T sign_##SFX(T a) { return a > 0 ? (T)1 : a < 0 ? (T)-1 : a; }      \
    static inline T square_##SFX(T a) { return (T)((UT)a * (UT)a); }
DEF_SIGNED_OPS2(i32, int32_t, uint32_t)
DEF_SIGNED_OPS2(i64, int64_t, uint64_t)
static inline float sign_f32(float a) { return a > 0 ? 1.0f : a < 0 ? -1.0f : a; }
static inline double sign_f64(double a) { return a > 0 ? 1.0 : a < 0 ? -1.0 : a; }
static inline float square_f32(float a) { return a * a; }
static inline double square_f64(double a) { return a * a; }
DEF_SIGNED_OPS(f32, float, float)
DEF_SIGNED_OPS(f64, double, double)
DEF_SIGNED_OPS(i32, int32_t, uint32_t)
DEF_SIGNED_OPS(i64, int64_t, uint64_t)

static inline float exp_f32(float a) { return cpu_expf(a); }
static inline double exp_f64(double a) { return exp(a); }
static inline float log_f32(float a) { return logf(a); }
static inline double log_f64(double a) { return log(a); }
static inline float sqrt_f32(float a) { return sqrtf(a); }
static inline double sqrt_f64(double a) { return sqrt(a); }
static inline float tanh_f32(float a) { return tanhf(a); }
static inline double tanh_f64(double a) { return tanh(a); }
static inline float sin_f32(float a) { return sinf(a); }
static inline double sin_f64(double a) { return sin(a); }
static inline float cos_f32(float a) { return cosf(a); }
static inline double cos_f64(double a) { return cos(a); }
static inline float log1p_f32(float a) { return log1pf(a); }
static inline double log1p_f64(double a) { return log1p(a); }
static inline float expm1_f32(float a) { return expm1f(a); }
static inline double expm1_f64(double a) { return expm1(a); }
static inline float rsqrt_f32(float a) { return 1.0f / sqrtf(a); }
static inline double rsqrt_f64(double a) { return 1.0 / sqrt(a); }
static inline float reciprocal_f32(float a) { return 1.0f / a; }
static inline double reciprocal_f64(double a) { return 1.0 / a; }
static inline float floor_f32(float a) { return floorf(a); }
static inline double floor_f64(double a) { return floor(a); }
static inline float ceil_f32(float a) { return ceilf(a); }
static inline double ceil_f64(double a) { return ceil(a); }
/* halves to even, as Torch and NumPy round (rint in the default rounding mode) */
static inline float round_f32(float a) { return rintf(a); }
static inline double round_f64(double a) { return rint(a); }
static inline float trunc_f32(float a) { return truncf(a); }
static inline double trunc_f64(double a) { return trunc(a); }
/* C99's <math.h>: the inverse, hyperbolic and error functions */
static inline float tan_f32(float a) { return tanf(a); }
static inline double tan_f64(double a) { return tan(a); }
static inline float asin_f32(float a) { return asinf(a); }
static inline double asin_f64(double a) { return asin(a); }
static inline float acos_f32(float a) { return acosf(a); }
static inline double acos_f64(double a) { return acos(a); }
static inline float atan_f32(float a) { return atanf(a); }
static inline double atan_f64(double a) { return atan(a); }
static inline float sinh_f32(float a) { return sinhf(a); }
static inline double sinh_f64(double a) { return sinh(a); }
static inline float cosh_f32(float a) { return coshf(a); }
static inline double cosh_f64(double a) { return cosh(a); }
static inline float asinh_f32(float a) { return asinhf(a); }
static inline double asinh_f64(double a) { return asinh(a); }
static inline float acosh_f32(float a) { return acoshf(a); }
static inline double acosh_f64(double a) { return acosh(a); }
static inline float atanh_f32(float a) { return atanhf(a); }
static inline double atanh_f64(double a) { return atanh(a); }
static inline float erf_f32(float a) { return erff(a); }
static inline double erf_f64(double a) { return erf(a); }
static inline float erfc_f32(float a) { return erfcf(a); }
static inline double erfc_f64(double a) { return erfc(a); }
/* erfinv: erfinv.h (shared with the CUDA emulation's erfinv) */
static inline double erfinv_f64(double a) { return ordo_erfinv(a); }
static inline float erfinv_f32(float a) { return (float)erfinv_f64((double)a); }

/* exp of -|a| only, so it never overflows (the naive 1 / (1 + exp(-a))
 * is fine for a >= 0 but inf / inf for large negative a written the other
 * way); float32 branch-free so that the loop vectorises. */
static inline float sigmoid_f32(float a) {
    const float e = cpu_expf(-fabsf(a)), s = 1.0f / (1.0f + e);
    return cpu_fsel(a >= 0, s, e * s);
}
static inline double sigmoid_f64(double a) {
    if (a >= 0) return 1.0 / (1.0 + exp(-a));
    const double e = exp(a);
    return e / (1.0 + e);
}

#define DEF_UN_LOOP(NAME, T, OP)                                                      \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {        \
        (void)ctx;                                                                   \
        T *y = (T *)p[0];                                                            \
        const T *a = (const T *)p[1];                                                \
        int64_t i = 0;                                                               \
        if (s[0] == 1 && s[1] == 1) {                                                \
            for (; i + CPU_BLK <= n; i += CPU_BLK) {                                 \
                T t[CPU_BLK];                                                        \
                for (int j = 0; j < CPU_BLK; j++) t[j] = OP(a[i + j]);               \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = t[j];                   \
            }                                                                        \
            for (; i < n; i++) y[i] = OP(a[i]);                                      \
        } else {                                                                     \
            for (; i < n; i++) y[i * s[0]] = OP(a[i * s[1]]);                        \
        }                                                                            \
        return 0;                                                                    \
    }

#define DEF_SIGNED_LOOPS(OPN)                                                          \
    DEF_UN_LOOP(OPN##_loop_f32, float, OPN##_f32)                                     \
    DEF_UN_LOOP(OPN##_loop_f64, double, OPN##_f64)                                    \
    DEF_UN_LOOP(OPN##_loop_i32, int32_t, OPN##_i32)                                   \
    DEF_UN_LOOP(OPN##_loop_i64, int64_t, OPN##_i64)
#define DEF_FLOAT_LOOPS(OPN)                                                           \
    DEF_UN_LOOP(OPN##_loop_f32, float, OPN##_f32)                                     \
    DEF_UN_LOOP(OPN##_loop_f64, double, OPN##_f64)
DEF_SIGNED_LOOPS(neg)
DEF_SIGNED_LOOPS(abs)
DEF_SIGNED_LOOPS(relu)
DEF_FLOAT_LOOPS(exp)
DEF_FLOAT_LOOPS(log)
DEF_FLOAT_LOOPS(sqrt)
DEF_FLOAT_LOOPS(tanh)
DEF_FLOAT_LOOPS(sigmoid)
DEF_SIGNED_LOOPS(sign)
DEF_SIGNED_LOOPS(square)
DEF_FLOAT_LOOPS(sin)
DEF_FLOAT_LOOPS(cos)
DEF_FLOAT_LOOPS(log1p)
DEF_FLOAT_LOOPS(expm1)
DEF_FLOAT_LOOPS(rsqrt)
DEF_FLOAT_LOOPS(reciprocal)
DEF_FLOAT_LOOPS(floor)
DEF_FLOAT_LOOPS(ceil)
DEF_FLOAT_LOOPS(round)
DEF_FLOAT_LOOPS(trunc)
DEF_FLOAT_LOOPS(tan)
DEF_FLOAT_LOOPS(asin)
DEF_FLOAT_LOOPS(acos)
DEF_FLOAT_LOOPS(atan)
DEF_FLOAT_LOOPS(sinh)
DEF_FLOAT_LOOPS(cosh)
DEF_FLOAT_LOOPS(asinh)
DEF_FLOAT_LOOPS(acosh)
DEF_FLOAT_LOOPS(atanh)
DEF_FLOAT_LOOPS(erf)
DEF_FLOAT_LOOPS(erfc)
DEF_FLOAT_LOOPS(erfinv)

typedef struct unop {
    const char *name;
    int int_ok; /* has int32/int64 loops */
    cpu_loop_fn loops[ORDO_NDTYPES];
} unop;

/* an unop's int_ok and loops: ops on signed dtypes, ops on float dtypes */
#define SIGNED(OPN) 1, {OPN##_loop_f32, OPN##_loop_f64, OPN##_loop_i32, OPN##_loop_i64, NULL}
#define FLOAT(OPN) 0, {OPN##_loop_f32, OPN##_loop_f64, NULL, NULL, NULL}

int cpu_check_unary(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int int_ok) {
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    const int dt = a->dtype;
    if (!(cpu_dtype_is_float(dt) || (int_ok && (dt == ORDO_I32 || dt == ORDO_I64))))
        return cpu_fail_dtype(rc, name, dt);
    if (y->dtype != dt)
        return ordo_fail(rc, "%s: dtype mismatch: a is %s but out is %s", name, ordo_dtype_name(dt),
                         ordo_dtype_name(y->dtype));
    const ordo_view *v[2] = {y, a};
    static const char *const names[2] = {"out", "a"};
    if ((r = cpu_check_same_shapes(rc, name, v, names, 2))) return r;
    return cpu_check_writable(rc, name, y);
}

static int run_unary(const ordo_run_ctx *rc, const ordo_kernel_args *args, const unop *op) {
    if (cpu_args_fit(args, 1, 1)) { /* see cpu_dense_numel */
        const ordo_view *v[2] = {&args->out[0], &args->in[0]};
        const int64_t n = cpu_dense_numel(2, v);
        const int dt = v[1]->dtype;
        if (n > 0 && n < CPU_PAR_MIN && v[0]->dtype == dt && op->loops[dt]) {
            char *p[2] = {(char *)v[0]->data, (char *)v[1]->data};
            op->loops[dt](n, p, cpu_unit_strides, NULL);
            return 0;
        }
    }
    int r = cpu_check_unary(rc, op->name, args, op->int_ok);
    if (r) return r;
    const ordo_view *v[2] = {&args->out[0], &args->in[0]};
    cpu_iter it;
    cpu_iter_init_views(&it, 2, v, 0);
    cpu_iter_run_parallel(&it, op->loops[args->in[0].dtype], NULL);
    return 0;
}

#define DEF_UN_KERNEL(OPN, LOOPS)                                                      \
    static int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) {           \
        static const unop op = {#OPN, LOOPS(OPN)};                                    \
        return run_unary(rc, a, &op);                                                 \
    }
DEF_UN_KERNEL(neg, SIGNED)
DEF_UN_KERNEL(abs, SIGNED)
DEF_UN_KERNEL(relu, SIGNED)
DEF_UN_KERNEL(exp, FLOAT)
DEF_UN_KERNEL(log, FLOAT)
DEF_UN_KERNEL(sqrt, FLOAT)
DEF_UN_KERNEL(tanh, FLOAT)
DEF_UN_KERNEL(sigmoid, FLOAT)
DEF_UN_KERNEL(sign, SIGNED)
DEF_UN_KERNEL(square, SIGNED)
DEF_UN_KERNEL(sin, FLOAT)
DEF_UN_KERNEL(cos, FLOAT)
DEF_UN_KERNEL(log1p, FLOAT)
DEF_UN_KERNEL(expm1, FLOAT)
DEF_UN_KERNEL(rsqrt, FLOAT)
DEF_UN_KERNEL(reciprocal, FLOAT)
DEF_UN_KERNEL(floor, FLOAT)
DEF_UN_KERNEL(ceil, FLOAT)
DEF_UN_KERNEL(round, FLOAT)
DEF_UN_KERNEL(trunc, FLOAT)
DEF_UN_KERNEL(tan, FLOAT)
DEF_UN_KERNEL(asin, FLOAT)
DEF_UN_KERNEL(acos, FLOAT)
DEF_UN_KERNEL(atan, FLOAT)
DEF_UN_KERNEL(sinh, FLOAT)
DEF_UN_KERNEL(cosh, FLOAT)
DEF_UN_KERNEL(asinh, FLOAT)
DEF_UN_KERNEL(acosh, FLOAT)
DEF_UN_KERNEL(atanh, FLOAT)
DEF_UN_KERNEL(erf, FLOAT)
DEF_UN_KERNEL(erfc, FLOAT)
DEF_UN_KERNEL(erfinv, FLOAT)

void cpu_register_unary(void) {
    static const cpu_kernel_entry t[] = {
        {"neg", k_neg},   {"abs", k_abs},   {"relu", k_relu}, {"exp", k_exp},
        {"log", k_log},   {"sqrt", k_sqrt}, {"tanh", k_tanh}, {"sigmoid", k_sigmoid},
        {"sign", k_sign}, {"square", k_square}, {"sin", k_sin}, {"cos", k_cos},
        {"log1p", k_log1p}, {"expm1", k_expm1}, {"rsqrt", k_rsqrt}, {"reciprocal", k_reciprocal},
        {"floor", k_floor}, {"ceil", k_ceil}, {"round", k_round}, {"trunc", k_trunc},
        {"tan", k_tan},   {"asin", k_asin}, {"acos", k_acos}, {"atan", k_atan},
        {"sinh", k_sinh}, {"cosh", k_cosh}, {"asinh", k_asinh}, {"acosh", k_acosh},
        {"atanh", k_atanh}, {"erf", k_erf}, {"erfc", k_erfc}, {"erfinv", k_erfinv},
    };
    CPU_REGISTER_TABLE(t);
}
