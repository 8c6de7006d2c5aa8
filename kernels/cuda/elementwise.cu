/*
 * elementwise.cu - the CUDA binary arithmetic: add sub mul div pow maximum
 * minimum fmod, their tensor-scalar forms (y = a op s: *_scalar) and reversed
 * forms (y = s op a: rsub_scalar rdiv_scalar rpow_scalar), and the
 * selections where and masked_fill.  The GPU twins of
 * kernels/cpu/elementwise.c (and of where / masked_fill in
 * kernels/cpu/compare.c), with the same checks, messages and semantics
 * (KERNELS.md):
 *  - integer arithmetic wraps (two's complement), computed in the unsigned
 *    type because signed overflow is undefined; integer division truncates
 *    toward zero, INT_MIN / -1 wraps to INT_MIN;
 *  - an integer division by zero cannot fail the op without a host wait:
 *    the element gets 0 and the device error slot records the error, which
 *    the backend turns into the op's failure at the next host sync;
 *  - maximum / minimum propagate NaN (a NaN operand wins), as CPU_MAX/CPU_MIN;
 *  - the scalar of the scalar forms is converted on the host exactly as the
 *    CPU does and travels by value in the kernel's parameters.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

/* ---- per-element operations ----------------------------------------------------- */

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_FMOD };

/* pow and fmod are defined for floats only (the host fails other dtypes first). */
__device__ __forceinline__ float cu_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double cu_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float cu_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double cu_fmod(double a, double b) { return fmod(a, b); }

/* slot / kid: where an integer division by zero is reported (NULL when the
 * divisor cannot be 0: float dtypes, div_scalar whose scalar was checked). */
template <int OP, typename T>
struct arith_op {
    cu_error_slot *slot;
    int kid;
    __device__ __forceinline__ T operator()(T a, T b) const {
        typedef typename ew_uns<T>::type U;
        if constexpr (OP == B_MAX) {
            return (a > b || ew_isnan(a)) ? a : b;
        } else if constexpr (OP == B_MIN) {
            return (a < b || ew_isnan(a)) ? a : b;
        } else if constexpr (std::is_floating_point<T>::value) {
            if constexpr (OP == B_ADD) return a + b;
            else if constexpr (OP == B_SUB) return a - b;
            else if constexpr (OP == B_MUL) return a * b;
            else if constexpr (OP == B_DIV) return a / b;
            else if constexpr (OP == B_FMOD) return cu_fmod(a, b);
            else return cu_pow(a, b);
        } else {
            if constexpr (OP == B_ADD) return (T)((U)a + (U)b);
            else if constexpr (OP == B_SUB) return (T)((U)a - (U)b);
            else if constexpr (OP == B_MUL) return (T)((U)a * (U)b);
            else {
                static_assert(OP == B_DIV, "pow and fmod have no integer version");
                if (b == 0) {
                    cu_report(slot, CU_ERR_INT_DIV_ZERO, kid, 0, 0);
                    return 0;
                }
                /* -1 separately: MIN / -1 overflows (undefined); it wraps */
                if (std::is_signed<T>::value && b == (T)-1) return (T)(0 - (U)a);
                return (T)(a / b);
            }
        }
    }
};

/* ---- the binary kernels ---------------------------------------------------------- */

struct binop_info {
    const char *name, *scalar_name, *rscalar_name;
    bool int_div; /* integer dtypes: the scalar must fit the dtype, 0 fails */
};
const binop_info binops[] = {
    {"add", "add_scalar", NULL, false},
    {"sub", "sub_scalar", "rsub_scalar", false},
    {"mul", "mul_scalar", NULL, false},
    {"div", "div_scalar", "rdiv_scalar", true},
    {"pow", "pow_scalar", "rpow_scalar", false},
    {"maximum", NULL, NULL, false},
    {"minimum", NULL, NULL, false},
    {"fmod", "fmod_scalar", NULL, false},
};

/* The member of a cpu_scalar that holds a T. */
template <typename T>
T scalar_as(const cpu_scalar &s) {
    if constexpr (std::is_same<T, float>::value) return s.f32;
    else if constexpr (std::is_same<T, double>::value) return s.f64;
    else if constexpr (std::is_same<T, int32_t>::value) return s.i32;
    else if constexpr (std::is_same<T, int64_t>::value) return s.i64;
    else return s.u8;
}

/* mode 0: y = a op b; 1: y = a op s; 2: y = s op a. */
template <int OP, typename T>
int launch_binary(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int mode,
                  const cpu_scalar &s, cu_error_slot *slot, int kid) {
    typedef arith_op<OP, T> F;
    const F f = {slot, kid};
    T *y = (T *)args->out[0].data;
    const T *a = (const T *)args->in[0].data;
    if (mode == 0) {
        const ordo_view *v[3] = {&args->out[0], &args->in[0], &args->in[1]};
        const ew_map2<T, T, T, F> m = {y, a, (const T *)args->in[1].data, f};
        return ew_launch<3>(rc, name, v, m);
    }
    const ordo_view *v[2] = {&args->out[0], &args->in[0]};
    if (mode == 1) {
        const ew_map1<T, T, ew_bind_right<F, T> > m = {y, a, {f, scalar_as<T>(s)}};
        return ew_launch<2>(rc, name, v, m);
    }
    const ew_map1<T, T, ew_bind_left<F, T> > m = {y, a, {f, scalar_as<T>(s)}};
    return ew_launch<2>(rc, name, v, m);
}

/* The CPU's checks (cpu_check_binary), then the launch. */
template <int OP>
int run_binary(const ordo_run_ctx *rc, const ordo_kernel_args *args, int mode) {
    const binop_info &op = binops[OP];
    const char *name = mode == 0 ? op.name : mode == 1 ? op.scalar_name : op.rscalar_name;
    cpu_scalar s;
    int r = cpu_check_binary(rc, name, args, mode, OP == B_POW || OP == B_FMOD, op.int_div, &s);
    if (r) return r;
    const ordo_view *a = &args->in[0];
    /* the error slot only where a zero divisor can reach the device:
     * div and rdiv_scalar on integers (div_scalar's 0 failed above) */
    cu_error_slot *slot = NULL;
    int kid = 0;
    if (op.int_div && mode != 1 && !cpu_dtype_is_float(a->dtype)) {
        slot = cu_error_slot_op(rc);
        if (!slot) return 1; /* (the op failed, saying why) */
        kid = cu_error_kernel_id(name);
    }
    if constexpr (OP == B_POW || OP == B_FMOD) {
        CU_DISPATCH_FLOAT(rc, name, a->dtype, T, return launch_binary<OP, T>(rc, name, args, mode, s, slot, kid));
    } else {
        CU_DISPATCH(rc, name, a->dtype, T, return launch_binary<OP, T>(rc, name, args, mode, s, slot, kid));
    }
    return 0;
}

#define DEF_KERNELS(OP, OPN)                                                                   \
    int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_binary<OP>(rc, a, 0); }
#define DEF_SKERNEL(OP, OPN)                                                                   \
    int k_##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_binary<OP>(rc, a, 1); }
#define DEF_RKERNEL(OP, OPN)                                                                   \
    int k_r##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_binary<OP>(rc, a, 2); }
DEF_KERNELS(B_ADD, add)
DEF_KERNELS(B_SUB, sub)
DEF_KERNELS(B_MUL, mul)
DEF_KERNELS(B_DIV, div)
DEF_KERNELS(B_POW, pow)
DEF_KERNELS(B_MAX, maximum)
DEF_KERNELS(B_MIN, minimum)
DEF_KERNELS(B_FMOD, fmod)
DEF_SKERNEL(B_ADD, add)
DEF_SKERNEL(B_SUB, sub)
DEF_SKERNEL(B_MUL, mul)
DEF_SKERNEL(B_DIV, div)
DEF_SKERNEL(B_POW, pow)
DEF_SKERNEL(B_FMOD, fmod)
DEF_RKERNEL(B_SUB, sub)
DEF_RKERNEL(B_DIV, div)
DEF_RKERNEL(B_POW, pow)

/* ---- where, masked_fill ---------------------------------------------------------- */

/* Selection by bit pattern, so by element size (W: uint8/32/64_t).
 * Operands: out, cond, x, y. */
template <typename W>
struct where_f {
    W *out;
    const uint8_t *c;
    const W *x, *y;
    __device__ __forceinline__ void operator()(const int64_t *o) const { out[o[0]] = c[o[1]] ? x[o[2]] : y[o[3]]; }
};
/* Operands: out, mask, x; the value by value. */
template <typename W>
struct masked_fill_f {
    W *out;
    const uint8_t *m;
    const W *x;
    W v;
    __device__ __forceinline__ void operator()(const int64_t *o) const { out[o[0]] = m[o[1]] ? v : x[o[2]]; }
};

template <typename W>
int launch_where(const ordo_run_ctx *rc, const ordo_view *const *v) {
    const where_f<W> f = {(W *)v[0]->data, (const uint8_t *)v[1]->data, (const W *)v[2]->data,
                          (const W *)v[3]->data};
    return ew_launch<4>(rc, "where", v, f);
}

int k_where(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_where(rc, args);
    if (r) return r;
    const ordo_view *v[4] = {&args->out[0], &args->in[0], &args->in[1], &args->in[2]};
    switch (ordo_dtype_size(args->out[0].dtype)) {
    case 8: return launch_where<uint64_t>(rc, v);
    case 4: return launch_where<uint32_t>(rc, v);
    default: return launch_where<uint8_t>(rc, v);
    }
}

template <typename W>
int launch_masked_fill(const ordo_run_ctx *rc, const ordo_view *const *v, const cpu_scalar &val) {
    masked_fill_f<W> f = {(W *)v[0]->data, (const uint8_t *)v[1]->data, (const W *)v[2]->data, 0};
    memcpy(&f.v, &val, sizeof(W)); /* the value's bits: every cpu_scalar member starts at byte 0 */
    return ew_launch<3>(rc, "masked_fill", v, f);
}

int k_masked_fill(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_scalar val;
    int r = cpu_check_masked_fill(rc, args, &val);
    if (r) return r;
    const ordo_view *v[3] = {&args->out[0], &args->in[1], &args->in[0]}; /* out, mask, x */
    switch (ordo_dtype_size(args->out[0].dtype)) {
    case 8: return launch_masked_fill<uint64_t>(rc, v, val);
    case 4: return launch_masked_fill<uint32_t>(rc, v, val);
    default: return launch_masked_fill<uint8_t>(rc, v, val);
    }
}

} /* namespace */

extern "C" void cuda_register_elementwise(void) {
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
        {"where", k_where},
        {"masked_fill", k_masked_fill},
    };
    CU_REGISTER_TABLE(t);
}
