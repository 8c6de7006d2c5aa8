/*
 * unary.c - neg abs relu (signed dtypes) and exp log sqrt tanh sigmoid
 * (float dtypes): y = f(a), same dtype and shape.
 */
#include "cpu_internal.h"

/* Negating INT_MIN overflows; computed in the unsigned type it wraps to
 * INT_MIN as in NumPy and Torch, without undefined behaviour. */
#define DEF_SIGNED_OPS(SFX, T, UT)                                                     \
    static inline T neg_##SFX(T a) { return (T)(0 - (UT)a); }                         \
    static inline T abs_##SFX(T a) { return a < 0 ? (T)(0 - (UT)a) : a; }             \
    /* a < 0 rather than a > 0 ? a : 0, so NaN passes through as in Torch */         \
    static inline T relu_##SFX(T a) { return a < 0 ? (T)0 : a; }
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

void cpu_register_unary(void) {
    static const cpu_kernel_entry t[] = {
        {"neg", k_neg},   {"abs", k_abs},   {"relu", k_relu}, {"exp", k_exp},
        {"log", k_log},   {"sqrt", k_sqrt}, {"tanh", k_tanh}, {"sigmoid", k_sigmoid},
    };
    CPU_REGISTER_TABLE(t);
}
