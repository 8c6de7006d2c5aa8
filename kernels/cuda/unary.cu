/*
 * unary.cu - the CUDA unary maps y = f(a), same dtype and shape: neg abs
 * relu sign square (signed dtypes: f32 f64 i32 i64) and exp log sqrt tanh
 * sigmoid sin cos log1p expm1 rsqrt reciprocal floor ceil round trunc tan
 * asin acos atan sinh cosh asinh acosh atanh erf erfc erfinv (float dtypes).  The GPU twins of kernels/cpu/unary.c, with the same
 * checks, messages and semantics (KERNELS.md): neg / abs of INT_MIN wrap
 * to INT_MIN, relu lets NaN through, sigmoid never overflows.  float32 uses
 * CUDA's float functions (expf, logf...), which may differ from the CPU's
 * in the last ulp.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

enum { U_NEG, U_ABS, U_RELU, U_SIGN, U_SQUARE, U_EXP, U_LOG, U_SQRT, U_TANH, U_SIGMOID,
       U_SIN, U_COS, U_LOG1P, U_EXPM1, U_RSQRT, U_RECIPROCAL, U_FLOOR, U_CEIL, U_ROUND, U_TRUNC,
       U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH, U_ERF, U_ERFC, U_ERFINV };

/* The float functions by precision (float: the f-suffixed intrinsics). */
__device__ __forceinline__ float cu_exp(float a) { return expf(a); }
__device__ __forceinline__ double cu_exp(double a) { return exp(a); }
__device__ __forceinline__ float cu_log(float a) { return logf(a); }
__device__ __forceinline__ double cu_log(double a) { return log(a); }
__device__ __forceinline__ float cu_sqrt(float a) { return sqrtf(a); }
__device__ __forceinline__ double cu_sqrt(double a) { return sqrt(a); }
__device__ __forceinline__ float cu_tanh(float a) { return tanhf(a); }
__device__ __forceinline__ double cu_tanh(double a) { return tanh(a); }
__device__ __forceinline__ float cu_sin(float a) { return sinf(a); }
__device__ __forceinline__ double cu_sin(double a) { return sin(a); }
__device__ __forceinline__ float cu_cos(float a) { return cosf(a); }
__device__ __forceinline__ double cu_cos(double a) { return cos(a); }
__device__ __forceinline__ float cu_log1p(float a) { return log1pf(a); }
__device__ __forceinline__ double cu_log1p(double a) { return log1p(a); }
__device__ __forceinline__ float cu_expm1(float a) { return expm1f(a); }
__device__ __forceinline__ double cu_expm1(double a) { return expm1(a); }
__device__ __forceinline__ float cu_floor(float a) { return floorf(a); }
__device__ __forceinline__ double cu_floor(double a) { return floor(a); }
__device__ __forceinline__ float cu_ceil(float a) { return ceilf(a); }
__device__ __forceinline__ double cu_ceil(double a) { return ceil(a); }
/* halves to even, as the CPU's rint */
__device__ __forceinline__ float cu_round(float a) { return rintf(a); }
__device__ __forceinline__ double cu_round(double a) { return rint(a); }
__device__ __forceinline__ float cu_trunc(float a) { return truncf(a); }
__device__ __forceinline__ double cu_trunc(double a) { return trunc(a); }

/* C99's inverse, hyperbolic and error functions, as the CPU's */
__device__ __forceinline__ float cu_tan(float a) { return tanf(a); }
__device__ __forceinline__ double cu_tan(double a) { return tan(a); }
__device__ __forceinline__ float cu_asin(float a) { return asinf(a); }
__device__ __forceinline__ double cu_asin(double a) { return asin(a); }
__device__ __forceinline__ float cu_acos(float a) { return acosf(a); }
__device__ __forceinline__ double cu_acos(double a) { return acos(a); }
__device__ __forceinline__ float cu_atan(float a) { return atanf(a); }
__device__ __forceinline__ double cu_atan(double a) { return atan(a); }
__device__ __forceinline__ float cu_sinh(float a) { return sinhf(a); }
__device__ __forceinline__ double cu_sinh(double a) { return sinh(a); }
__device__ __forceinline__ float cu_cosh(float a) { return coshf(a); }
__device__ __forceinline__ double cu_cosh(double a) { return cosh(a); }
__device__ __forceinline__ float cu_asinh(float a) { return asinhf(a); }
__device__ __forceinline__ double cu_asinh(double a) { return asinh(a); }
__device__ __forceinline__ float cu_acosh(float a) { return acoshf(a); }
__device__ __forceinline__ double cu_acosh(double a) { return acosh(a); }
__device__ __forceinline__ float cu_atanh(float a) { return atanhf(a); }
__device__ __forceinline__ double cu_atanh(double a) { return atanh(a); }
__device__ __forceinline__ float cu_erf(float a) { return erff(a); }
__device__ __forceinline__ double cu_erf(double a) { return erf(a); }
__device__ __forceinline__ float cu_erfc(float a) { return erfcf(a); }
__device__ __forceinline__ double cu_erfc(double a) { return erfc(a); }
/* CUDA's: +-inf at +-1, NaN beyond, as the CPU's (kernels/cpu/erfinv.h) */
__device__ __forceinline__ float cu_erfinv(float a) { return erfinvf(a); }
__device__ __forceinline__ double cu_erfinv(double a) { return erfinv(a); }
template <int OP, typename T>
struct un_op {
    __device__ __forceinline__ T operator()(T a) const {
        typedef typename ew_uns<T>::type U;
        /* negation in the unsigned type: INT_MIN wraps to INT_MIN, no UB */
        if constexpr (OP == U_NEG) return (T)(0 - (U)a);
        /* a <= 0: abs(-0.0) is +0.0, as C's fabs and the CPU */
        else if constexpr (OP == U_ABS) return a <= 0 ? (T)(0 - (U)a) : a;
        /* a < 0 rather than a > 0 ? a : 0, so NaN passes through as in Torch */
        else if constexpr (OP == U_RELU) return a < 0 ? (T)0 : a;
        /* sign: NaN stays NaN, as on the CPU; square wraps in the unsigned type */
        else if constexpr (OP == U_SIGN) return a > 0 ? (T)1 : a < 0 ? (T)-1 : a;
        else if constexpr (OP == U_SQUARE) {
            if constexpr (std::is_floating_point<T>::value) return a * a;
            else return (T)((U)a * (U)a);
        }
        else if constexpr (OP == U_EXP) return cu_exp(a);
        else if constexpr (OP == U_LOG) return cu_log(a);
        else if constexpr (OP == U_SQRT) return cu_sqrt(a);
        else if constexpr (OP == U_TANH) return cu_tanh(a);
        else if constexpr (OP == U_SIN) return cu_sin(a);
        else if constexpr (OP == U_COS) return cu_cos(a);
        else if constexpr (OP == U_LOG1P) return cu_log1p(a);
        else if constexpr (OP == U_EXPM1) return cu_expm1(a);
        else if constexpr (OP == U_RSQRT) return (T)1 / cu_sqrt(a); /* the CPU's 1 / sqrt, not rsqrtf's approximation */
        else if constexpr (OP == U_RECIPROCAL) return (T)1 / a;
        else if constexpr (OP == U_FLOOR) return cu_floor(a);
        else if constexpr (OP == U_CEIL) return cu_ceil(a);
        else if constexpr (OP == U_ROUND) return cu_round(a);
        else if constexpr (OP == U_TRUNC) return cu_trunc(a);
        else if constexpr (OP == U_TAN) return cu_tan(a);
        else if constexpr (OP == U_ASIN) return cu_asin(a);
        else if constexpr (OP == U_ACOS) return cu_acos(a);
        else if constexpr (OP == U_ATAN) return cu_atan(a);
        else if constexpr (OP == U_SINH) return cu_sinh(a);
        else if constexpr (OP == U_COSH) return cu_cosh(a);
        else if constexpr (OP == U_ASINH) return cu_asinh(a);
        else if constexpr (OP == U_ACOSH) return cu_acosh(a);
        else if constexpr (OP == U_ATANH) return cu_atanh(a);
        else if constexpr (OP == U_ERF) return cu_erf(a);
        else if constexpr (OP == U_ERFC) return cu_erfc(a);
        else if constexpr (OP == U_ERFINV) return cu_erfinv(a);
        else if constexpr (std::is_same<T, float>::value) {
            /* exp of -|a| only, so it never overflows (the naive
             * 1 / (1 + exp(-a)) is inf / inf for large negative a written
             * the other way); the CPU's float32 formula; NaN gives NaN */
            const float e = expf(-fabsf(a)), s = 1.0f / (1.0f + e);
            return a >= 0 ? s : e * s;
        } else { /* the CPU's float64 formula */
            if (a >= 0) return 1.0 / (1.0 + exp(-a));
            const double e = exp(a);
            return e / (1.0 + e);
        }
    }
};

template <int OP, typename T>
int launch_unary(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v) {
    const ew_map1<T, T, un_op<OP, T> > f = {(T *)v[0]->data, (const T *)v[1]->data, {}};
    return ew_launch<2>(rc, name, v, f);
}

/* The CPU's checks (cpu_check_unary), then the launch. */
template <int OP>
int run_unary(const ordo_run_ctx *rc, const ordo_kernel_args *args, const char *name) {
    const bool signed_op = OP == U_NEG || OP == U_ABS || OP == U_RELU || OP == U_SIGN || OP == U_SQUARE; /* else float only */
    int r = cpu_check_unary(rc, name, args, signed_op);
    if (r) return r;
    const ordo_view *v[2] = {&args->out[0], &args->in[0]};
    const int dt = args->in[0].dtype;
    switch (dt) {
    case ORDO_F32: return launch_unary<OP, float>(rc, name, v);
    case ORDO_F64: return launch_unary<OP, double>(rc, name, v);
    default: break;
    }
    if constexpr (signed_op) {
        if (dt == ORDO_I32) return launch_unary<OP, int32_t>(rc, name, v);
        if (dt == ORDO_I64) return launch_unary<OP, int64_t>(rc, name, v);
    }
    return cpu_fail_dtype(rc, name, dt);
}

#define DEF_UN_KERNEL(OPN, OP) \
    int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_unary<OP>(rc, a, #OPN); }
DEF_UN_KERNEL(neg, U_NEG)
DEF_UN_KERNEL(abs, U_ABS)
DEF_UN_KERNEL(relu, U_RELU)
DEF_UN_KERNEL(exp, U_EXP)
DEF_UN_KERNEL(log, U_LOG)
DEF_UN_KERNEL(sqrt, U_SQRT)
DEF_UN_KERNEL(tanh, U_TANH)
DEF_UN_KERNEL(sigmoid, U_SIGMOID)
DEF_UN_KERNEL(sign, U_SIGN)
DEF_UN_KERNEL(square, U_SQUARE)
DEF_UN_KERNEL(sin, U_SIN)
DEF_UN_KERNEL(cos, U_COS)
DEF_UN_KERNEL(log1p, U_LOG1P)
DEF_UN_KERNEL(expm1, U_EXPM1)
DEF_UN_KERNEL(rsqrt, U_RSQRT)
DEF_UN_KERNEL(reciprocal, U_RECIPROCAL)
DEF_UN_KERNEL(floor, U_FLOOR)
DEF_UN_KERNEL(ceil, U_CEIL)
DEF_UN_KERNEL(round, U_ROUND)
DEF_UN_KERNEL(trunc, U_TRUNC)
DEF_UN_KERNEL(tan, U_TAN)
DEF_UN_KERNEL(asin, U_ASIN)
DEF_UN_KERNEL(acos, U_ACOS)
DEF_UN_KERNEL(atan, U_ATAN)
DEF_UN_KERNEL(sinh, U_SINH)
DEF_UN_KERNEL(cosh, U_COSH)
DEF_UN_KERNEL(asinh, U_ASINH)
DEF_UN_KERNEL(acosh, U_ACOSH)
DEF_UN_KERNEL(atanh, U_ATANH)
DEF_UN_KERNEL(erf, U_ERF)
DEF_UN_KERNEL(erfc, U_ERFC)
DEF_UN_KERNEL(erfinv, U_ERFINV)

} /* namespace */

extern "C" void cuda_register_unary(void) {
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
    CU_REGISTER_TABLE(t);
}
