/*
 * optim.cu - the fused optimiser updates adam_step and sgd_step on the GPU:
 * the twins of kernels/cpu/optim.c, with its operands, checks, messages and
 * formulas (KERNELS.md).
 *
 *   adam_step: in g; out p, state (2 x n: m then v); scalars lr/c1, beta1,
 *     beta2, eps, weight_decay, 1/c2
 *   sgd_step: in g; out p [, buf]; scalars lr, momentum, weight_decay,
 *     nesterov (0/1), first (1: buf = g')
 *
 * Every operand is contiguous (checked), so a kernel is one flat loop, one
 * thread per element, memory-bound.  The arithmetic goes through the
 * round-to-nearest intrinsics (__fmul_rn ...) in the CPU's order of
 * operations: they keep nvcc from contracting a * b + c into an FMA, so a
 * step computes bit for bit what the CPU computes (gcc, with no FMA in the
 * baseline x86-64 target, rounds every operation), and CPU and GPU training
 * runs stay in step.
 */
#include "cuda_internal.cuh"

namespace {

/* IEEE single operations, one rounding each */
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float dvd(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float sqr(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double dvd(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ double sqr(double a) { return __dsqrt_rn(a); }

/* the scalars converted to T on the host, as the CPU loop does before its loop */
template <typename T>
struct adam_k {
    T step, b1, b2, eps, wd, inv_c2, nb1, nb2;
};

template <typename T>
__global__ void adam_kernel(int64_t n, T *p, const T *g, T *m, T *v, adam_k<T> c) {
    CU_GRID_STRIDE(i, n) {
        const T pi = p[i];
        const T gi = add(g[i], mul(c.wd, pi));
        const T mi = add(mul(c.b1, m[i]), mul(c.nb1, gi));
        const T vi = add(mul(c.b2, v[i]), mul(mul(c.nb2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        p[i] = sub(pi, dvd(mul(c.step, mi), add(sqr(mul(vi, c.inv_c2)), c.eps)));
    }
}

template <typename T>
struct sgd_k {
    T lr, mom, wd;
    int nesterov, first;
};

template <typename T>
__global__ void sgd_plain_kernel(int64_t n, T *p, const T *g, sgd_k<T> c) {
    CU_GRID_STRIDE(i, n) {
        const T pi = p[i];
        p[i] = sub(pi, mul(c.lr, add(g[i], mul(c.wd, pi))));
    }
}

template <typename T>
__global__ void sgd_momentum_kernel(int64_t n, T *p, const T *g, T *buf, sgd_k<T> c) {
    CU_GRID_STRIDE(i, n) {
        const T pi = p[i];
        const T gi = add(g[i], mul(c.wd, pi));
        const T b = c.first ? gi : add(mul(c.mom, buf[i]), gi);
        buf[i] = b;
        p[i] = sub(pi, mul(c.lr, c.nesterov ? add(gi, mul(c.mom, b)) : b));
    }
}

template <typename T>
void adam_launch(cudaStream_t st, int64_t n, void *p, const void *g, void *state, const double *sc) {
    adam_k<T> c;
    c.step = (T)sc[0];
    c.b1 = (T)sc[1];
    c.b2 = (T)sc[2];
    c.eps = (T)sc[3];
    c.wd = (T)sc[4];
    c.inv_c2 = (T)sc[5];
    c.nb1 = (T)(1 - sc[1]);
    c.nb2 = (T)(1 - sc[2]);
    T *s = (T *)state;
    adam_kernel<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, (T *)p, (const T *)g, s, s + n, c);
}

int k_adam_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_adam_step(rc, a);
    if (r) return r;
    const int64_t n = ordo_view_numel(&a->out[0]);
    if (n == 0) return 0;
    if (a->out[0].dtype == ORDO_F32)
        adam_launch<float>(cu_stream(rc), n, a->out[0].data, a->in[0].data, a->out[1].data, a->scalar);
    else
        adam_launch<double>(cu_stream(rc), n, a->out[0].data, a->in[0].data, a->out[1].data, a->scalar);
    return cu_check_launch(rc, "adam_step");
}

template <typename T>
void sgd_launch(cudaStream_t st, int64_t n, void *p, const void *g, void *buf, const double *sc) {
    sgd_k<T> c;
    c.lr = (T)sc[0];
    c.mom = (T)sc[1];
    c.wd = (T)sc[2];
    c.nesterov = sc[3] != 0;
    c.first = sc[4] != 0;
    if (c.mom == 0) /* as the CPU: momentum 0 (in T) never touches buf */
        sgd_plain_kernel<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, (T *)p, (const T *)g, c);
    else
        sgd_momentum_kernel<T><<<cu_blocks(n), CU_THREADS, 0, st>>>(n, (T *)p, (const T *)g, (T *)buf, c);
}

int k_sgd_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_sgd_step(rc, a);
    if (r) return r;
    const int64_t n = ordo_view_numel(&a->out[0]);
    if (n == 0) return 0;
    void *buf = a->nout > 1 ? a->out[1].data : NULL;
    if (a->out[0].dtype == ORDO_F32) sgd_launch<float>(cu_stream(rc), n, a->out[0].data, a->in[0].data, buf, a->scalar);
    else sgd_launch<double>(cu_stream(rc), n, a->out[0].data, a->in[0].data, buf, a->scalar);
    return cu_check_launch(rc, "sgd_step");
}

} // namespace

extern "C" void cuda_register_optim(void) {
    static const cpu_kernel_entry t[] = {{"adam_step", k_adam_step}, {"sgd_step", k_sgd_step}};
    CU_REGISTER_TABLE(t);
}
