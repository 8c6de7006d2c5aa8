/*
 * compare.cu - the CUDA comparisons eq ne lt le gt ge, tensor-tensor and
 * tensor-scalar (*_scalar), giving uint8 0/1: the GPU twins of those in
 * kernels/cpu/compare.c, with the same checks, messages and semantics
 * (KERNELS.md).  NaN compares unequal to everything.  A scalar is compared
 * in the tensor's precision for float32, exactly for integer tensors (the
 * host turns it into an integer bound, or into a constant result that
 * becomes a fill).  where and masked_fill, registered by compare.c on the
 * CPU, live in elementwise.cu here; check_range is here, as there.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

template <int OP, typename T>
struct cmp_op {
    __device__ __forceinline__ uint8_t operator()(T a, T b) const {
        if constexpr (OP == CPU_CMP_EQ) return a == b;
        else if constexpr (OP == CPU_CMP_NE) return a != b;
        else if constexpr (OP == CPU_CMP_LT) return a < b;
        else if constexpr (OP == CPU_CMP_LE) return a <= b;
        else if constexpr (OP == CPU_CMP_GT) return a > b;
        else return a >= b;
    }
};

/* ---- tensor-tensor ------------------------------------------------------------- */

template <int OP, typename T>
int launch_cmp(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v) {
    const ew_map2<uint8_t, T, T, cmp_op<OP, T> > f = {(uint8_t *)v[0]->data, (const T *)v[1]->data,
                                                      (const T *)v[2]->data, {}};
    return ew_launch<3>(rc, name, v, f);
}

template <int OP>
int run_cmp(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_cmp(rc, args, OP);
    if (r) return r;
    const char *name = cpu_cmp_names[OP];
    const ordo_view *v[3] = {&args->out[0], &args->in[0], &args->in[1]};
    CU_DISPATCH(rc, name, args->in[0].dtype, T, return launch_cmp<OP, T>(rc, name, v));
    return 0;
}

/* ---- tensor-scalar --------------------------------------------------------------- */

template <int OP, typename T>
int launch_cmp_scalar(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v, T s) {
    typedef cmp_op<OP, T> F;
    const ew_map1<uint8_t, T, ew_bind_right<F, T> > f = {(uint8_t *)v[0]->data, (const T *)v[1]->data, {F(), s}};
    return ew_launch<2>(rc, name, v, f);
}

/* y = c everywhere: a comparison no element can change. */
int fill_const(const ordo_run_ctx *rc, const char *name, const ordo_view *y, int c) {
    const uint8_t b = (uint8_t)c;
    return ew_fill(rc, name, y, &b);
}

template <int OP>
int run_cmp_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_cmp_scalar(rc, args, OP);
    if (r) return r;
    const char *name = cpu_cmp_scalar_names[OP];
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    const ordo_view *v[2] = {y, a};
    const double s = args->scalar[0];
    switch (a->dtype) {
    case ORDO_F32: /* compare in the tensor's precision, like Torch */
        return launch_cmp_scalar<OP, float>(rc, name, v, (float)s);
    case ORDO_F64: return launch_cmp_scalar<OP, double>(rc, name, v, s);
    default: break;
    }
    int64_t bound = 0;
    const int k = cpu_cmp_int_bound(a->dtype, s, OP, &bound);
    if (k >= 0) return fill_const(rc, name, y, k);
    if (a->dtype == ORDO_I64) return launch_cmp_scalar<OP, int64_t>(rc, name, v, bound);
    if (a->dtype == ORDO_U8) return launch_cmp_scalar<OP, uint8_t>(rc, name, v, (uint8_t)bound);
    if (a->dtype == ORDO_I32) return launch_cmp_scalar<OP, int32_t>(rc, name, v, (int32_t)bound);
    return cpu_fail_dtype(rc, name, a->dtype);
}

#define DEF_CMP_KERNELS(OPN, OP)                                                                          \
    int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_cmp<OP>(rc, a); }          \
    int k_##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_cmp_scalar<OP>(rc, a); }
CPU_CMP_OPS(DEF_CMP_KERNELS)

/* ---- check_range ------------------------------------------------------------------ */

/* out = x; an element below lo, above hi or NaN is reported to the op's
 * error slot (the first to get there wins), which fails the op once its
 * work has run (gpu_check.c): the checked copy then carries the failure. */
template <typename T>
__global__ void check_range_kernel(const T *x, T *y, int64_t n, double lo, double hi, int kid, cu_error_slot *slot) {
    CU_GRID_STRIDE(i, n) {
        const T v = x[i];
        y[i] = v;
        if (!((double)v >= lo && (double)v <= hi)) {
            const double d = (double)v;
            long long bits;
            memcpy(&bits, &d, sizeof bits);
            cu_report(slot, CU_ERR_OUT_OF_BOUNDS, kid, (long long)i + 1, bits);
        }
    }
}

int k_check_range(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int64_t n;
    double lo, hi;
    int r = cpu_check_check_range(rc, args, &n, &lo, &hi);
    if (r || n == 0) return r;
    cu_error_slot *slot = cu_error_slot_op(rc);
    if (!slot) return 1; /* (the op failed, saying why) */
    const int kid = cu_error_kernel_id("check_range");
    cudaStream_t st = cu_stream(rc);
    CU_DISPATCH_FLOAT(rc, "check_range", args->in[0].dtype, T,
                      check_range_kernel<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(
                          (const T *)args->in[0].data, (T *)args->out[0].data, n, lo, hi, kid, slot));
    return cu_check_launch(rc, "check_range");
}

} /* namespace */

/* the table's rows: eq..ge, then eq_scalar..ge_scalar */
#define CMP_ENTRY(OPN, OP) {#OPN, k_##OPN},
#define CMP_SCALAR_ENTRY(OPN, OP) {#OPN "_scalar", k_##OPN##_scalar},
extern "C" void cuda_register_compare(void) {
    static const cpu_kernel_entry t[] = {
        CPU_CMP_OPS(CMP_ENTRY) CPU_CMP_OPS(CMP_SCALAR_ENTRY)
        {"check_range", k_check_range},
    };
    CU_REGISTER_TABLE(t);
}
