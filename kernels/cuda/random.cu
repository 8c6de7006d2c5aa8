/*
 * random.cu - seed, uniform, normal, bernoulli on the GPU: the twins of
 * kernels/cpu/random.c, with its operands (the generator state is out[1], a
 * contiguous uint8 view of 32 elements, read and written), checks and
 * messages (KERNELS.md).
 *
 * The state keeps the CPU's layout, here in device memory:
 *   [0, 8) key = the seed, [8, 16) counter = 128-bit Philox blocks used so
 *   far, [16, 24) the magic "ordoPhx1" written by seed, [24, 32) zero.
 * The host never reads it (that would be a host wait): each launch reads
 * key and counter inside the kernel, and a second one-thread kernel on the
 * same stream advances the counter afterwards (the stream orders the two,
 * so the next random op sees the new counter).
 *
 * Numbers come from cuRAND's device API, Philox4_32_10: a thread takes
 * 128-bit block j of the call, curand_init(key, subsequence 0, offset
 * 4 * (counter + j)) then curand4 - i.e. philox(key, {b_lo, b_hi, 0, 0})
 * with b = counter + j, exactly the block random.c computes for the same
 * elements.  With random.c's mapping of words to elements (uniform f32 and
 * bernoulli: 4 elements per block, uniform f64 and normal: 2) and its
 * formulas evaluated with the same roundings (the _rn intrinsics keep nvcc
 * from fusing a + u * b), uniform and bernoulli give bit for bit the CPU's
 * numbers for the same seed and call order, and normal the same up to the
 * last-ulp differences of log/sin/cos between the two libms.
 *
 * An unseeded state (no magic) is found on the device: the kernel writes
 * nothing, leaves the counter as it is and reports CU_ERR_UNSEEDED through
 * the device's error slot (see below).
 */
#include <curand_kernel.h>

#include "cuda_internal.cuh"
#include "cuda_strided.cuh"

namespace {

/* Error-slot code for "generator state was never seeded (run the seed kernel
 * on it first)": cuda_internal.cuh has no code for it yet; the next free
 * number, to be added there (as CU_ERR_UNSEEDED) with its message. */

/* ---- strided walks (as in reduce.cu): a view in row-major order, size-1
 * dims dropped, contiguous dims merged; logical order kept, so element e of
 * the call is the e-th element of y whatever its strides ---- */

/* ---- the state ---------------------------------------------------------------- */

__constant__ unsigned char d_magic[8] = {'o', 'r', 'd', 'o', 'P', 'h', 'x', '1'};

/* Host byte order is little-endian on every machine CUDA runs on; the state
 * is read and written bytewise anyway (the view need not be 8-byte aligned). */
__device__ __forceinline__ unsigned long long load_u64(const uint8_t *p) {
    unsigned long long v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* key and counter; false when the state was never seeded */
__device__ __forceinline__ bool load_state(const uint8_t *g, unsigned long long *key, unsigned long long *ctr) {
    for (int i = 0; i < 8; i++)
        if (g[16 + i] != d_magic[i]) return false;
    *key = load_u64(g);
    *ctr = load_u64(g + 8);
    return true;
}

__global__ void seed_kernel(uint8_t *g, unsigned long long key) {
    const int t = threadIdx.x; /* one thread per byte */
    if (t < 8) g[t] = (uint8_t)(key >> (8 * t));
    else if (t < 16) g[t] = 0; /* counter */
    else if (t < 24) g[t] = d_magic[t - 16];
    else if (t < 32) g[t] = 0;
}

/* adds the call's blocks to the counter, after the generating kernel */
__global__ void advance_kernel(uint8_t *g, unsigned long long blocks) {
    unsigned long long key, ctr;
    if (!load_state(g, &key, &ctr)) return;
    ctr += blocks;
    for (int i = 0; i < 8; i++) g[8 + i] = (uint8_t)(ctr >> (8 * i));
}

/* ---- generating ------------------------------------------------------------------ */

enum { K_UNIFORM, K_NORMAL, K_BERNOULLI };

struct rng_params {
    nd_walk<1> w; /* y */
    int64_t n;    /* elements */
    double a, b;  /* low, high - low | mean, std | p */
    double high;  /* uniform: exclusive upper bound */
};

__device__ __forceinline__ double u53(uint32_t hi, uint32_t lo) {
    return (double)((((unsigned long long)hi << 32) | lo) >> 11) * 0x1.0p-53;
}

/* nextafter(v, -inf) by bits (v finite here; the host's constexpr nextafter
 * shadows the device one in overload resolution) */
__device__ __forceinline__ float next_down(float v) {
    if (v == 0) return -__int_as_float(1); /* the negative smallest subnormal */
    const int b = __float_as_int(v);
    return __int_as_float(v > 0 ? b - 1 : b + 1);
}
__device__ __forceinline__ double next_down(double v) {
    if (v == 0) return -__longlong_as_double(1);
    const long long b = __double_as_longlong(v);
    return __longlong_as_double(v > 0 ? b - 1 : b + 1);
}

/* low + u * (high - low), rounded as on the CPU, then clamped below high
 * when rounding reached it (random.c's UNIFORM_FIX) */
template <typename T>
__device__ __forceinline__ T uniform_of(double u, const rng_params &p) {
    T v = (T)__dadd_rn(p.a, __dmul_rn(u, p.b));
    if ((double)v >= p.high && p.b > 0) {
        v = next_down((T)p.high);
        if ((double)v < p.a) v = (T)p.a;
    }
    return v;
}

/* Elements per 128-bit block: 4 for one word per element, 2 for two. */
template <typename T, int KIND>
struct per_block {
    static const int value = (KIND == K_BERNOULLI || (KIND == K_UNIFORM && sizeof(T) == 4)) ? 4 : 2;
};

template <typename T, int KIND>
__global__ void rng_kernel(T *y, const uint8_t *g, rng_params p, int64_t nblocks, cu_error_slot *slot, int kid) {
    constexpr int EPB = per_block<T, KIND>::value;
    unsigned long long key, ctr;
    if (!load_state(g, &key, &ctr)) {
        if (blockIdx.x == 0 && threadIdx.x == 0) cu_report(slot, CU_ERR_UNSEEDED, kid, 0, 0);
        return;
    }
    CU_GRID_STRIDE(j, nblocks) {
        curandStatePhilox4_32_10_t s;
        curand_init(key, 0ull, 4ull * (ctr + (unsigned long long)j), &s); /* block ctr + j, lane 0 */
        const uint4 w = curand4(&s);
        const uint32_t word[4] = {w.x, w.y, w.z, w.w};
        T v[4] = {T(), T(), T(), T()};
        if constexpr (KIND == K_UNIFORM && EPB == 4) {
            for (int l = 0; l < 4; l++) v[l] = uniform_of<T>((double)(word[l] >> 8) * 0x1.0p-24, p);
        } else if constexpr (KIND == K_UNIFORM) {
            v[0] = uniform_of<T>(u53(word[0], word[1]), p);
            v[1] = uniform_of<T>(u53(word[2], word[3]), p);
        } else if constexpr (KIND == K_NORMAL) { /* Box-Muller on the block's two 53-bit uniforms */
            const double u1 = (double)(((((unsigned long long)word[0] << 32) | word[1]) >> 11) + 1) * 0x1.0p-53;
            const double u2 = u53(word[2], word[3]);
            const double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586476925 * u2;
            double sn, cs;
            sincos(t, &sn, &cs);
            v[0] = (T)__dadd_rn(p.a, __dmul_rn(p.b, r * cs));
            v[1] = (T)__dadd_rn(p.a, __dmul_rn(p.b, r * sn));
        } else {
            for (int l = 0; l < 4; l++) v[l] = (T)((double)word[l] * 0x1.0p-32 < p.a);
        }
        for (int l = 0; l < EPB; l++) {
            const int64_t e = j * EPB + l;
            if (e >= p.n) break;
            int64_t off;
            nd_offsets(p.w, e, &off);
            y[off] = v[l];
        }
    }
}

/* 0, or the op failed: no device error slot (its mapped page-locked
 * memory refused), where an unseeded state's report would write through a
 * null pointer - an illegal address, which loses the CUDA context. */
template <typename T, int KIND>
int rng_launch(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, rng_params &p) {
    cu_error_slot *slot = cu_error_slot_device(rc->ctx.dev_id);
    if (!slot) return ordo_fail(rc, "%s: cannot allocate gpu(%d)'s error slot (mapped page-locked memory)", name, rc->ctx.dev_id);
    const ordo_view *y = &args->out[0];
    uint8_t *g = (uint8_t *)args->out[1].data;
    const int64_t *ys[1] = {y->strides};
    p.w = nd_walk_of<1>(y->ndim, y->shape, ys);
    p.n = ordo_view_numel(y);
    const int EPB = per_block<T, KIND>::value;
    const int64_t nblocks = (p.n + EPB - 1) / EPB; /* random.c's ceil(n * words / 4) */
    cudaStream_t st = cu_stream(rc);
    /* launched even for n = 0: it reports an unseeded state */
    rng_kernel<T, KIND><<<cu_blocks(nblocks), CU_THREADS, 0, st>>>(
        (T *)y->data, g, p, nblocks, slot, cu_error_kernel_id(name));
    if (nblocks > 0) advance_kernel<<<1, 1, 0, st>>>(g, (unsigned long long)nblocks);
    return 0;
}

/* ---- host side: random.c's checks, then the launches -------------------------------- */

int k_seed(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_seed(rc, args);
    if (r) return r;
    seed_kernel<<<1, 32, 0, cu_stream(rc)>>>((uint8_t *)args->out[0].data, (unsigned long long)args->iparam[0]);
    return cu_check_launch(rc, "seed");
}

/* (the state's seeding is checked on the device: its bytes are there) */
int k_uniform(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    double lo, hi;
    int r = cpu_check_rng_outputs(rc, "uniform", args);
    if (r || (r = cpu_check_uniform(rc, args, &lo, &hi))) return r;
    rng_params p = rng_params();
    p.a = lo;
    p.b = hi - lo;
    p.high = hi;
    r = args->out[0].dtype == ORDO_F32 ? rng_launch<float, K_UNIFORM>(rc, "uniform", args, p)
                                       : rng_launch<double, K_UNIFORM>(rc, "uniform", args, p);
    return r ? r : cu_check_launch(rc, "uniform");
}

int k_normal(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    double mean, sd;
    int r = cpu_check_rng_outputs(rc, "normal", args);
    if (r || (r = cpu_check_normal(rc, args, &mean, &sd))) return r;
    rng_params p = rng_params();
    p.a = mean;
    p.b = sd;
    r = args->out[0].dtype == ORDO_F32 ? rng_launch<float, K_NORMAL>(rc, "normal", args, p)
                                       : rng_launch<double, K_NORMAL>(rc, "normal", args, p);
    return r ? r : cu_check_launch(rc, "normal");
}

int k_bernoulli(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    double pr;
    int r = cpu_check_rng_outputs(rc, "bernoulli", args);
    if (r || (r = cpu_check_bernoulli(rc, args, &pr))) return r;
    rng_params p = rng_params();
    p.a = pr;
    CU_DISPATCH(rc, "bernoulli", args->out[0].dtype, T, r = rng_launch<T, K_BERNOULLI>(rc, "bernoulli", args, p));
    return r ? r : cu_check_launch(rc, "bernoulli");
}

} // namespace

extern "C" void cuda_register_random(void) {
    static const cpu_kernel_entry t[] = {
        {"seed", k_seed},
        {"uniform", k_uniform},
        {"normal", k_normal},
        {"bernoulli", k_bernoulli},
    };
    CU_REGISTER_TABLE(t);
}
