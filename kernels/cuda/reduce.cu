/*
 * reduce.cu - sum mean max min argmax argmin on the GPU: the twins of
 * kernels/cpu/reduce.c, with its checks, messages and results (KERNELS.md).
 *
 * Every reduction is seen as nout independent rows of n elements (the
 * reduced dim, stride sd), one output per row; a reduction over all dims is
 * one row over the whole of x.  Three kernels cover every layout:
 *  - red_rows: a group of G threads (G a power of two <= 256) per row, the
 *    lanes striding through the row and combining through shared memory.
 *    Taken when the reduced dim is x's innermost (consecutive lanes read
 *    consecutive addresses: softmax-like rows, sums over the last dim), for
 *    few outputs, and for all dims (one row; GEN = true when x does not
 *    coalesce into one strided row);
 *  - red_cols: one thread per output walking its row sequentially, taken
 *    when the reduced dim is not innermost (e.g. the bias gradient, a sum
 *    over dim 0 of a row-major [N, C]): consecutive threads then read
 *    consecutive addresses;
 *  - when there are too few rows to fill the GPU, either kernel splits each
 *    row into chunks (grid.y) that write partial states to scratch memory,
 *    and red_final combines them per output in chunk order.
 *
 * Float sums accumulate in float64 and integer sums in 64 bits (wrapping),
 * as on the CPU; the combining order is fixed by the launch shape, so a
 * result is deterministic and within an ulp or so of the CPU's.  max/min
 * propagate NaN; argmax/argmin treat NaN as the extreme and return the
 * first index on ties (partial states carry their index and combine by it).
 */
#include <type_traits>

#include "cuda_internal.cuh"
#include "cuda_strided.cuh"

namespace {

/* ---- strided walks ------------------------------------------------------------
 * NOP views of one shape walked together in row-major (logical) order: size-1
 * dims dropped, neighbours merged where every operand is contiguous across
 * them.  The logical order is kept, so a flat index stays meaningful (argmax
 * over all dims). */

/* ---- storing results (cpu_store_double and reduce.c's store_sum) --------------- */

__device__ __forceinline__ void store_double(int dt, char *p, double v) {
    switch (dt) {
    case ORDO_F32: *(float *)p = (float)v; break;
    case ORDO_F64: *(double *)p = v; break;
    /* float -> integer saturates, NaN -> 0: the CPU's own conversions */
    case ORDO_I32: *(int32_t *)p = cpu_sat_i32(v); break;
    case ORDO_I64: *(int64_t *)p = cpu_sat_i64(v); break;
    default: *(uint8_t *)p = cpu_sat_u8(v); break;
    }
}

/* an integer sum (mod 2^64) into any dtype: integers wrap, floats round */
__device__ __forceinline__ void store_int(int dt, char *p, unsigned long long v) {
    switch (dt) {
    case ORDO_F32: *(float *)p = (float)(long long)v; break;
    case ORDO_F64: *(double *)p = (double)(long long)v; break;
    case ORDO_I32: *(int32_t *)p = (int32_t)(uint32_t)v; break;
    case ORDO_I64: *(int64_t *)p = (int64_t)v; break;
    default: *(uint8_t *)p = (uint8_t)v; break;
    }
}

/* ---- the operations: state, identity, add, combine, store ---------------------- */

template <typename T> struct lim;
template <> struct lim<float> {
    static __device__ float lo() { return -INFINITY; }
    static __device__ float hi() { return INFINITY; }
};
template <> struct lim<double> {
    static __device__ double lo() { return -INFINITY; }
    static __device__ double hi() { return INFINITY; }
};
template <> struct lim<int32_t> {
    static __device__ int32_t lo() { return INT32_MIN; }
    static __device__ int32_t hi() { return INT32_MAX; }
};
template <> struct lim<int64_t> {
    static __device__ int64_t lo() { return INT64_MIN; }
    static __device__ int64_t hi() { return INT64_MAX; }
};
template <> struct lim<uint8_t> {
    static __device__ uint8_t lo() { return 0; }
    static __device__ uint8_t hi() { return UINT8_MAX; }
};

template <typename T> struct is_float_t { static const bool value = false; };
template <> struct is_float_t<float> { static const bool value = true; };
template <> struct is_float_t<double> { static const bool value = true; };

/* NaN-propagating max / min (CPU_MAX / CPU_MIN) */
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a < b || a != a) ? a : b; }

/* sum and mean: float64 for floats, wrapping 64 bits for integers */
template <typename T, bool MEAN>
struct SumOp {
    typedef typename std::conditional<is_float_t<T>::value, double, unsigned long long>::type S;
    static __device__ S identity() { return 0; }
    static __device__ void add(S &s, T v, int64_t) {
        if (is_float_t<T>::value) s += (S)v;
        else s += (S)(long long)v; /* sign-extends, then wraps */
    }
    static __device__ S combine(S a, S b) { return a + b; }
    static __device__ void store(char *y, int ydt, S s, int64_t n) {
        if (is_float_t<T>::value) store_double(ydt, y, MEAN ? (double)s / (double)n : (double)s);
        else store_int(ydt, y, (unsigned long long)s);
    }
};

template <typename T, bool MAX>
struct ExtOp {
    typedef T S;
    static __device__ S identity() { return MAX ? lim<T>::lo() : lim<T>::hi(); }
    static __device__ void add(S &s, T v, int64_t) { s = MAX ? nan_max(s, v) : nan_min(s, v); }
    static __device__ S combine(S a, S b) { return MAX ? nan_max(a, b) : nan_min(a, b); }
    static __device__ void store(char *y, int, S s, int64_t) { *(T *)y = s; }
};

template <typename T>
struct ArgState {
    T v;
    int64_t i; /* -1: no element yet */
};

template <typename T, bool MAX>
struct ArgOp {
    typedef ArgState<T> S;
    /* NaN above everything (below for argmin), the first NaN kept */
    static __device__ bool better(T v, T b) {
        return MAX ? (v > b || (v != v && b == b)) : (v < b || (v != v && b == b));
    }
    static __device__ S identity() {
        S s;
        s.v = T();
        s.i = -1;
        return s;
    }
    /* elements arrive in increasing index order within a thread: only a
     * strictly better one replaces, so ties keep the first */
    static __device__ void add(S &s, T v, int64_t k) {
        if (s.i < 0 || better(v, s.v)) {
            s.v = v;
            s.i = k;
        }
    }
    /* states of disjoint index sets: the better value, else the lower index */
    static __device__ S combine(S a, S b) {
        if (a.i < 0) return b;
        if (b.i < 0) return a;
        if (better(b.v, a.v)) return b;
        if (better(a.v, b.v)) return a;
        return a.i <= b.i ? a : b;
    }
    static __device__ void store(char *y, int, S s, int64_t) { *(int64_t *)y = s.i; }
};

template <typename T, int OP> struct RedOp;
template <typename T> struct RedOp<T, CPU_RED_SUM> : SumOp<T, false> {};
template <typename T> struct RedOp<T, CPU_RED_MEAN> : SumOp<T, true> {};
template <typename T> struct RedOp<T, CPU_RED_MAX> : ExtOp<T, true> {};
template <typename T> struct RedOp<T, CPU_RED_MIN> : ExtOp<T, false> {};
template <typename T> struct RedOp<T, CPU_RED_ARGMAX> : ArgOp<T, true> {};
template <typename T> struct RedOp<T, CPU_RED_ARGMIN> : ArgOp<T, false> {};

/* ---- kernels -------------------------------------------------------------------- */

struct red_geom {
    nd_walk<2> w;   /* the kept dims: operand 0 = y, 1 = x (row starts) */
    nd_walk<1> rw;  /* GEN rows: x's elements of one row (all dims) */
    int64_t nout;   /* rows */
    int64_t n, sd;  /* row length, x's stride along it */
    int64_t chunk;  /* elements per split (grid.y) */
    int64_t ysize;
    int ydt;
};

/* part != NULL: write the split's partial state to part[split * nout + row]
 * instead of storing into y. */
template <typename T, int OP, bool GEN>
__global__ void __launch_bounds__(CU_THREADS) red_rows(const T *x, char *y, red_geom g, typename RedOp<T, OP>::S *part) {
    typedef RedOp<T, OP> R;
    typedef typename R::S S;
    __shared__ S sh[CU_THREADS];
    const int G = blockDim.x, lane = threadIdx.x, t = threadIdx.y * G + lane;
    const int64_t k0 = (int64_t)blockIdx.y * g.chunk, k1 = k0 + g.chunk < g.n ? k0 + g.chunk : g.n;
    /* the loop bound is uniform per block: every thread reaches every barrier */
    for (int64_t base = (int64_t)blockIdx.x * blockDim.y; base < g.nout; base += (int64_t)gridDim.x * blockDim.y) {
        const int64_t o = base + threadIdx.y;
        S s = R::identity();
        int64_t off[2] = {0, 0};
        if (o < g.nout) {
            nd_offsets(g.w, o, off);
            const T *xr = x + off[1];
            for (int64_t k = k0 + lane; k < k1; k += G) {
                int64_t xo;
                if (GEN) nd_offsets(g.rw, k, &xo);
                else xo = k * g.sd;
                R::add(s, xr[xo], k);
            }
        }
        sh[t] = s;
        __syncthreads();
        for (int h = G / 2; h > 0; h >>= 1) {
            if (lane < h) sh[t] = R::combine(sh[t], sh[t + h]);
            __syncthreads();
        }
        if (lane == 0 && o < g.nout) {
            if (part) part[(int64_t)blockIdx.y * g.nout + o] = sh[t];
            else R::store(y + off[0] * g.ysize, g.ydt, sh[t], g.n);
        }
        __syncthreads(); /* sh is reused by the next rows */
    }
}

template <typename T, int OP>
__global__ void red_cols(const T *x, char *y, red_geom g, typename RedOp<T, OP>::S *part) {
    typedef RedOp<T, OP> R;
    const int64_t k0 = (int64_t)blockIdx.y * g.chunk, k1 = k0 + g.chunk < g.n ? k0 + g.chunk : g.n;
    CU_GRID_STRIDE(o, g.nout) {
        int64_t off[2];
        nd_offsets(g.w, o, off);
        const T *xr = x + off[1];
        typename R::S s = R::identity();
        for (int64_t k = k0; k < k1; k++) R::add(s, xr[k * g.sd], k);
        if (part) part[(int64_t)blockIdx.y * g.nout + o] = s;
        else R::store(y + off[0] * g.ysize, g.ydt, s, g.n);
    }
}

/* combines the nsplit partial states of each output, in split order */
template <typename T, int OP>
__global__ void red_final(char *y, red_geom g, const typename RedOp<T, OP>::S *part, int64_t nsplit) {
    typedef RedOp<T, OP> R;
    CU_GRID_STRIDE(o, g.nout) {
        typename R::S s = part[o];
#pragma unroll 4
        for (int64_t j = 1; j < nsplit; j++) s = R::combine(s, part[j * g.nout + o]);
        int64_t off[2];
        nd_offsets(g.w, o, off);
        R::store(y + off[0] * g.ysize, g.ydt, s, g.n);
    }
}

/* ---- launching ------------------------------------------------------------------- */

enum { SHAPE_ROWS, SHAPE_COLS };

/* Launches one reduction; how = SHAPE_ROWS or SHAPE_COLS, gen = rows
 * through g.rw (all dims of a non-coalescing x). */
template <typename T, int OP>
int launch(const ordo_run_ctx *rc, const char *name, const void *xp, void *yp, red_geom &g, int how, bool gen) {
    typedef typename RedOp<T, OP>::S S;
    cudaStream_t st = cu_stream(rc);
    const T *x = (const T *)xp;
    char *y = (char *)yp;
    int64_t nsplit = 1;
    int G = 1;
    unsigned gx;
    if (how == SHAPE_ROWS) {
        while (G < CU_THREADS && (int64_t)G * 4 < g.n) G *= 2; /* >= 4 elements per lane */
        const int64_t groups = (g.nout + CU_THREADS / G - 1) / (CU_THREADS / G);
        /* too few rows for ~1024 blocks: split long rows (>= 16 elements per lane) */
        if (groups < 1024 && g.n > (int64_t)G * 16) {
            const int64_t want = (1024 + groups - 1) / groups, most = g.n / ((int64_t)G * 16);
            nsplit = want < most ? want : most;
        }
        gx = (unsigned)(groups < 65535 * 8 ? groups : 65535 * 8);
    } else {
        /* too few outputs for ~2^18 threads: split rows (>= 32 elements per thread) */
        if (g.nout < ((int64_t)1 << 18) && g.n > 64) {
            const int64_t want = (((int64_t)1 << 18) + g.nout - 1) / g.nout, most = g.n / 32;
            nsplit = want < most ? want : most;
            if (nsplit > 4096) nsplit = 4096;
        }
        gx = cu_blocks(g.nout);
    }
    if (nsplit > 65535) nsplit = 65535;
    if (nsplit < 1) nsplit = 1;
    g.chunk = (g.n + nsplit - 1) / nsplit;
    if (g.chunk < 1) g.chunk = 1;
    nsplit = g.n > 0 ? (g.n + g.chunk - 1) / g.chunk : 1;

    S *part = NULL;
    if (nsplit > 1) {
        const size_t bytes = (size_t)nsplit * (size_t)g.nout * sizeof(S);
        if (cu_scratch_alloc(rc, (void **)&part, bytes))
            return ordo_fail(rc, "%s: out of device memory for %lld partial results", name,
                             (long long)(nsplit * g.nout));
    }
    const dim3 grid(gx, (unsigned)nsplit);
    if (how == SHAPE_ROWS) {
        const dim3 block((unsigned)G, (unsigned)(CU_THREADS / G));
        if (gen) red_rows<T, OP, true><<<grid, block, 0, st>>>(x, y, g, part);
        else red_rows<T, OP, false><<<grid, block, 0, st>>>(x, y, g, part);
    } else {
        red_cols<T, OP><<<grid, CU_THREADS, 0, st>>>(x, y, g, part);
    }
    if (part) red_final<T, OP><<<cu_blocks(g.nout), CU_THREADS, 0, st>>>(y, g, part, nsplit);
    const int r = cu_check_launch(rc, name);
    cu_scratch_free(rc, part);
    return r;
}

template <typename T>
int launch_op(const ordo_run_ctx *rc, int op, const void *x, void *y, red_geom &g, int how, bool gen) {
    const char *name = cpu_reduce_names[op];
    switch (op) {
    case CPU_RED_SUM: return launch<T, CPU_RED_SUM>(rc, name, x, y, g, how, gen);
    case CPU_RED_MEAN:
        if constexpr (is_float_t<T>::value) return launch<T, CPU_RED_MEAN>(rc, name, x, y, g, how, gen);
        else return cpu_fail_dtype(rc, name, ORDO_I32); /* unreachable: checked before */
    case CPU_RED_MAX: return launch<T, CPU_RED_MAX>(rc, name, x, y, g, how, gen);
    case CPU_RED_MIN: return launch<T, CPU_RED_MIN>(rc, name, x, y, g, how, gen);
    case CPU_RED_ARGMAX: return launch<T, CPU_RED_ARGMAX>(rc, name, x, y, g, how, gen);
    default: return launch<T, CPU_RED_ARGMIN>(rc, name, x, y, g, how, gen);
    }
}

/* reduce.c's checks (cpu_check_reduce), then the launch. */
int run_reduce(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op) {
    const char *name = cpu_reduce_names[op];
    cpu_reduce_plan pl;
    int r = cpu_check_reduce(rc, args, op, &pl);
    if (r) return r;
    const ordo_view *x = &args->in[0], *y = &args->out[0];
    red_geom g = red_geom();
    g.ydt = y->dtype;
    g.ysize = (int64_t)ordo_dtype_size(y->dtype);
    int how = SHAPE_ROWS;
    bool gen = false;

    if (pl.all) {
        /* one row: x in logical order (argmax's flat index), coalesced */
        const int64_t *xs[1] = {x->strides};
        g.rw = nd_walk_of<1>(x->ndim, x->shape, xs);
        g.nout = 1;
        g.n = pl.n;
        g.sd = g.rw.ndim == 1 ? g.rw.st[0][0] : 0;
        gen = g.rw.ndim > 1;
        how = pl.n == 0 ? SHAPE_COLS : SHAPE_ROWS; /* nothing to read: store the identity */
    } else {
        const int d = pl.dim;
        g.n = pl.n;
        g.sd = x->strides[d];
        g.nout = pl.nout;
        if (g.nout == 0) return 0;
        const int64_t *st[2] = {pl.yo.strides, pl.xo.strides};
        g.w = nd_walk_of<2>(pl.xo.ndim, pl.xo.shape, st);
        /* rows for an innermost dim or few outputs; sum of nothing (0, or NaN
         * for mean) is the identity stored by the column kernel */
        how = g.n > 0 && (cpu_dim_is_innermost(x, d) || g.nout < 64) ? SHAPE_ROWS : SHAPE_COLS;
    }

    CU_DISPATCH(rc, name, x->dtype, T, return launch_op<T>(rc, op, x->data, y->data, g, how, gen));
    return 0;
}

#define DEF_RED_KERNEL(OPN, OP) \
    int k_##OPN(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_reduce(rc, a, OP); }
CPU_REDUCE_OPS(DEF_RED_KERNEL)

} // namespace

#define RED_ENTRY(OPN, OP) {#OPN, k_##OPN},
extern "C" void cuda_register_reduce(void) {
    static const cpu_kernel_entry t[] = {CPU_REDUCE_OPS(RED_ENTRY)};
    CU_REGISTER_TABLE(t);
}
