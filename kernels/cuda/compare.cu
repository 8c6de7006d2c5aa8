/*
 * compare.cu - the CUDA comparisons eq ne lt le gt ge, tensor-tensor and
 * tensor-scalar (*_scalar), giving uint8 0/1: the GPU twins of those in
 * kernels/cpu/compare.c, with the same checks, messages and semantics
 * (KERNELS.md).  NaN compares unequal to everything.  A scalar is compared
 * in the tensor's precision for float32, exactly for integer tensors (the
 * host turns it into an integer bound, or into a constant result that
 * becomes a fill).  where and masked_fill, registered by compare.c on the
 * CPU, live in elementwise.cu here.
 */
#include <type_traits>

#include "cuda_internal.cuh"

#include "cuda_elementwise.cuh"

namespace {

enum { EQ, NE, LT, LE, GT, GE, NCMP };

template <int OP, typename T>
struct cmp_op {
    __device__ __forceinline__ uint8_t operator()(T a, T b) const {
        if constexpr (OP == EQ) return a == b;
        else if constexpr (OP == NE) return a != b;
        else if constexpr (OP == LT) return a < b;
        else if constexpr (OP == LE) return a <= b;
        else if constexpr (OP == GT) return a > b;
        else return a >= b;
    }
};

const char *const cmp_names[NCMP] = {"eq", "ne", "lt", "le", "gt", "ge"};
const char *const cmp_scalar_names[NCMP] = {"eq_scalar", "ne_scalar", "lt_scalar",
                                            "le_scalar", "gt_scalar", "ge_scalar"};

int check_u8_out(const ordo_run_ctx *rc, const char *name, const ordo_view *y) {
    if (y->dtype != ORDO_U8)
        return ordo_fail(rc, "%s: output must be uint8, got %s", name, ordo_dtype_name(y->dtype));
    return cpu_check_writable(rc, name, y);
}

/* ---- tensor-tensor ------------------------------------------------------------- */

template <int OP, typename T>
int launch_cmp(const ordo_run_ctx *rc, const char *name, const ordo_view *const *v) {
    const ew_map2<uint8_t, T, T, cmp_op<OP, T> > f = {(uint8_t *)v[0]->data, (const T *)v[1]->data,
                                                      (const T *)v[2]->data, {}};
    return ew_launch<3>(rc, name, v, f);
}

template <int OP>
int run_cmp(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    const char *name = cmp_names[OP];
    int r = cpu_check_args(rc, name, args, 2, 1);
    if (r) return r;
    const ordo_view *y = &args->out[0], *a = &args->in[0], *b = &args->in[1];
    if ((r = check_u8_out(rc, name, y))) return r;
    if (a->dtype != b->dtype)
        return ordo_fail(rc, "%s: dtype mismatch: a is %s but b is %s", name, ordo_dtype_name(a->dtype),
                         ordo_dtype_name(b->dtype));
    const ordo_view *v[3] = {y, a, b};
    static const char *const names[3] = {"out", "a", "b"};
    if ((r = cpu_check_same_shapes(rc, name, v, names, 3))) return r;
    CU_DISPATCH(rc, name, a->dtype, T, return launch_cmp<OP, T>(rc, name, v));
    return 0;
}

/* ---- tensor-scalar --------------------------------------------------------------- */

/* The CPU's int_cmp_bound (kernels/cpu/compare.c): an integer tensor
 * compared with a double scalar, exactly.  The comparison becomes one
 * against an integer bound (x < 2.5 is x < 3, x <= 2.5 is x <= 2), or a
 * constant when no integer can satisfy or fail it (x == 2.5, NaN, a bound
 * beyond int64); converting x to double instead would be wrong for int64
 * values past 2^53.  Returns -1 when *bound is to be compared with op, or
 * the constant result 0 / 1. */
int int_cmp_bound(double s, int op, int64_t *bound) {
    if (s != s) return op == NE;
    if (s < -9223372036854775808.0) return op == NE || op == GT || op == GE;
    if (s >= 9223372036854775808.0) return op == NE || op == LT || op == LE;
    /* doubles in [2^62, 2^63) are integers, so floor/ceil stay in range */
    const double f = floor(s), c = ceil(s);
    if (f == c) {
        *bound = (int64_t)f;
        return -1;
    }
    switch (op) {
    case EQ: return 0;
    case NE: return 1;
    case LT: *bound = (int64_t)c; break; /* x < 2.5  <=> x < 3 */
    case LE: *bound = (int64_t)f; break; /* x <= 2.5 <=> x <= 2 */
    case GT: *bound = (int64_t)f; break; /* x > 2.5  <=> x > 2 */
    default: *bound = (int64_t)c; break; /* x >= 2.5 <=> x >= 3 */
    }
    return -1;
}

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
    const char *name = cmp_scalar_names[OP];
    int r = cpu_check_args(rc, name, args, 1, 1);
    if (r) return r;
    if (args->nscalar < 1) return ordo_fail(rc, "%s: needs the scalar as scalar[0]", name);
    const ordo_view *y = &args->out[0], *a = &args->in[0];
    if ((r = check_u8_out(rc, name, y))) return r;
    const ordo_view *v[2] = {y, a};
    static const char *const names[2] = {"out", "a"};
    if ((r = cpu_check_same_shapes(rc, name, v, names, 2))) return r;

    const double s = args->scalar[0];
    switch (a->dtype) {
    case ORDO_F32: /* compare in the tensor's precision, like Torch */
        return launch_cmp_scalar<OP, float>(rc, name, v, (float)s);
    case ORDO_F64: return launch_cmp_scalar<OP, double>(rc, name, v, s);
    default: break;
    }
    int64_t bound = 0;
    const int k = int_cmp_bound(s, OP, &bound);
    if (k >= 0) return fill_const(rc, name, y, k);
    if (a->dtype == ORDO_I64) return launch_cmp_scalar<OP, int64_t>(rc, name, v, bound);
    /* the bound may lie outside the dtype (x < 256 for uint8): the result
     * is then constant */
    const int64_t lo = a->dtype == ORDO_U8 ? 0 : INT32_MIN;
    const int64_t hi = a->dtype == ORDO_U8 ? 255 : INT32_MAX;
    if (bound > hi) return fill_const(rc, name, y, OP == LT || OP == LE || OP == NE);
    if (bound < lo) return fill_const(rc, name, y, OP == GT || OP == GE || OP == NE);
    if (a->dtype == ORDO_U8) return launch_cmp_scalar<OP, uint8_t>(rc, name, v, (uint8_t)bound);
    if (a->dtype == ORDO_I32) return launch_cmp_scalar<OP, int32_t>(rc, name, v, (int32_t)bound);
    return cpu_fail_dtype(rc, name, a->dtype);
}

#define DEF_CMP_KERNELS(OPN, OP)                                                                          \
    int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_cmp<OP>(rc, a); }          \
    int k_##OPN##_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_cmp_scalar<OP>(rc, a); }
DEF_CMP_KERNELS(eq, EQ)
DEF_CMP_KERNELS(ne, NE)
DEF_CMP_KERNELS(lt, LT)
DEF_CMP_KERNELS(le, LE)
DEF_CMP_KERNELS(gt, GT)
DEF_CMP_KERNELS(ge, GE)

} /* namespace */

extern "C" void cuda_register_compare(void) {
    static const cpu_kernel_entry t[] = {
        {"eq", k_eq},
        {"ne", k_ne},
        {"lt", k_lt},
        {"le", k_le},
        {"gt", k_gt},
        {"ge", k_ge},
        {"eq_scalar", k_eq_scalar},
        {"ne_scalar", k_ne_scalar},
        {"lt_scalar", k_lt_scalar},
        {"le_scalar", k_le_scalar},
        {"gt_scalar", k_gt_scalar},
        {"ge_scalar", k_ge_scalar},
    };
    CU_REGISTER_TABLE(t);
}
