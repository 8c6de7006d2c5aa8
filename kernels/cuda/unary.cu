/*
 * unary.cu - the CUDA unary maps y = f(a), same dtype and shape: neg abs
 * relu (signed dtypes: f32 f64 i32 i64) and exp log sqrt tanh sigmoid
 * (float dtypes).  The GPU twins of kernels/cpu/unary.c, with the same
 * checks, messages and semantics (KERNELS.md): neg / abs of INT_MIN wrap
 * to INT_MIN, relu lets NaN through, sigmoid never overflows.  float32 uses
 * CUDA's float functions (expf, logf...), which may differ from the CPU's
 * in the last ulp.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

enum { U_NEG, U_ABS, U_RELU, U_EXP, U_LOG, U_SQRT, U_TANH, U_SIGMOID };

/* The float functions by precision (float: the f-suffixed intrinsics). */
__device__ __forceinline__ float cu_exp(float a) { return expf(a); }
__device__ __forceinline__ double cu_exp(double a) { return exp(a); }
__device__ __forceinline__ float cu_log(float a) { return logf(a); }
__device__ __forceinline__ double cu_log(double a) { return log(a); }
__device__ __forceinline__ float cu_sqrt(float a) { return sqrtf(a); }
__device__ __forceinline__ double cu_sqrt(double a) { return sqrt(a); }
__device__ __forceinline__ float cu_tanh(float a) { return tanhf(a); }
__device__ __forceinline__ double cu_tanh(double a) { return tanh(a); }

template <int OP, typename T>
struct un_op {
    __device__ __forceinline__ T operator()(T a) const {
        typedef typename ew_uns<T>::type U;
        /* negation in the unsigned type: INT_MIN wraps to INT_MIN, no UB */
        if constexpr (OP == U_NEG) return (T)(0 - (U)a);
        else if constexpr (OP == U_ABS) return a < 0 ? (T)(0 - (U)a) : a;
        /* a < 0 rather than a > 0 ? a : 0, so NaN passes through as in Torch */
        else if constexpr (OP == U_RELU) return a < 0 ? (T)0 : a;
        else if constexpr (OP == U_EXP) return cu_exp(a);
        else if constexpr (OP == U_LOG) return cu_log(a);
        else if constexpr (OP == U_SQRT) return cu_sqrt(a);
        else if constexpr (OP == U_TANH) return cu_tanh(a);
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
    const bool signed_op = OP == U_NEG || OP == U_ABS || OP == U_RELU; /* else float only */
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

} /* namespace */

extern "C" void cuda_register_unary(void) {
    static const cpu_kernel_entry t[] = {
        {"neg", k_neg},   {"abs", k_abs},   {"relu", k_relu}, {"exp", k_exp},
        {"log", k_log},   {"sqrt", k_sqrt}, {"tanh", k_tanh}, {"sigmoid", k_sigmoid},
    };
    CU_REGISTER_TABLE(t);
}
