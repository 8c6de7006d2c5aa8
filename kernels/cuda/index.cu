/*
 * index.cu - gather, index_select and their adjoints scatter_add, index_add,
 * and scatter (scatter_add storing instead of adding) on the GPU: the twins of kernels/cpu/index.c, with its operands, checks
 * and messages (KERNELS.md).
 *
 * As on the CPU, gather and index_select are one walk,
 *   out[i] = x0[i + index[i] * sd],
 * x0 being x with its stride along dim set to 0 (so it moves with the
 * output over the other dims) and index, for index_select, the 1-d index
 * broadcast (stride 0) over every dim but dim; scatter_add and index_add
 * are the same walk reversed, y0[i + index[i] * sd] += src[i], and scatter
 * stores, y0[i + index[i] * sd] = src[i].  One thread per element of the
 * walk.
 *
 * Indices count from the base in iparam 1 (0 or 1; index.c), and are
 * reported as given.
 *
 * Indices depend on the data, so an out-of-range one (negative included)
 * cannot fail the op from the host without a wait: the kernel reports it
 * through the device's error slot (CU_ERR_INDEX_RANGE, the index and the
 * size of the dim) and the op fails at the next host synchronisation.
 * gather/index_select skip such elements.  scatter_add/index_add/scatter must leave
 * y unchanged when any index is bad: a check kernel first reports every
 * bad index to the slot, then the add kernel, queued behind it on the same
 * stream, reads the slot once per block and writes nothing if it holds an
 * error.
 *
 * Repeated indices add up through atomics (float, double, int32 and int64
 * natively - int64 as unsigned long long, the same bits under two's
 * complement wrapping - and uint8 by compare-and-swap on its aligned 32-bit
 * word).  Integer sums are exact; float sums of repeated indices may differ
 * from the CPU's in the last bits, as the order of the additions is not
 * fixed on the GPU.  Of repeated indices in scatter, which source's store
 * lands last is unspecified on the GPU (the CPU's is the last in row-major
 * order); each element gets one of them whole.
 */
#include "cuda_internal.cuh"
#include "cuda_strided.cuh"

namespace {

/* ---- strided walks (as in reduce.cu): NOP views of one shape in row-major
 * order, size-1 dims dropped, dims contiguous in every operand merged ---- */

/* The walk of views that all have v[0]'s shape. */
template <int NOP>
nd_walk<NOP> nd_walk_views(const ordo_view *const *v) {
    const int64_t *st[NOP];
    for (int k = 0; k < NOP; k++) st[k] = v[k]->strides;
    return nd_walk_of<NOP>(v[0]->ndim, v[0]->shape, st);
}

/* The add kernels' blocks each read the slot (mapped host memory) once:
 * a grid-stride loop over at most this many blocks keeps those reads few. */
#define ADD_MAX_BLOCKS 2048u

/* ---- gather, index_select --------------------------------------------------------- */

struct idx_geom {
    int64_t n;      /* elements of the walk */
    int64_t extent; /* size of the indexed dim */
    int64_t sd;     /* stride of the indexed dim */
    int64_t base;   /* the value of the first index: 0 or 1 */
    int kid;        /* the kernel's id in the error slot */
};

/* walk operands: 0 = out, 1 = index, 2 = x0; moved by bit pattern (E = an
 * unsigned type of the element's size) */
template <typename E>
__global__ void gather_kernel(E *y, const int64_t *idx, const E *x, nd_walk<3> w, idx_geom g, cu_error_slot *slot) {
    CU_GRID_STRIDE(i, g.n) {
        int64_t off[3];
        nd_offsets(w, i, off);
        /* unsigned: no overflow for any index, and one compare catches negatives too */
        const int64_t v = idx[off[1]];
        const uint64_t k = (uint64_t)v - (uint64_t)g.base;
        if (k >= (uint64_t)g.extent) {
            cu_report(slot, CU_ERR_INDEX_RANGE, g.kid, v, g.extent);
            continue;
        }
        y[off[0]] = x[off[2] + (int64_t)k * g.sd];
    }
}

int run_gather(const ordo_run_ctx *rc, const char *name, const ordo_view *y, const ordo_view *idx,
               const ordo_view *x0, const ordo_view *x, int dim, int base) {
    idx_geom g;
    g.base = base;
    g.n = ordo_view_numel(y);
    if (g.n == 0) return 0;
    g.extent = x->ndim ? x->shape[dim] : 1;
    g.sd = x->ndim ? x->strides[dim] : 0;
    g.kid = cu_error_kernel_id(name);
    const ordo_view *v[3] = {y, idx, x0};
    const nd_walk<3> w = nd_walk_views<3>(v);
    cu_error_slot *slot = cu_error_slot_op(rc);
    if (!slot) return 1; /* (the op failed, saying why) */
    cudaStream_t st = cu_stream(rc);
    const unsigned nb = cu_blocks(g.n);
    const int64_t *ip = (const int64_t *)idx->data;
    switch (ordo_dtype_size(x->dtype)) {
    case 8: gather_kernel<uint64_t><<<nb, CU_THREADS, 0, st>>>((uint64_t *)y->data, ip, (const uint64_t *)x->data, w, g, slot); break;
    case 4: gather_kernel<uint32_t><<<nb, CU_THREADS, 0, st>>>((uint32_t *)y->data, ip, (const uint32_t *)x->data, w, g, slot); break;
    default: gather_kernel<uint8_t><<<nb, CU_THREADS, 0, st>>>((uint8_t *)y->data, ip, (const uint8_t *)x->data, w, g, slot); break;
    }
    return cu_check_launch(rc, name);
}

/* index.c's checks (cpu_check_gather, cpu_check_index_select), which
 * also derive the walk's views, then the launch */
int k_gather(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view x0;
    if ((r = cpu_check_gather(rc, a, &dim, &x0))) return r;
    return run_gather(rc, "gather", &a->out[0], &a->in[1], &x0, &a->in[0], dim, cpu_index_base(a));
}

int k_index_select(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view iv, x0;
    if ((r = cpu_check_index_select(rc, a, &dim, &iv, &x0))) return r;
    return run_gather(rc, "index_select", &a->out[0], &iv, &x0, &a->in[0], dim, cpu_index_base(a));
}

/* ---- scatter_add, index_add -------------------------------------------------------- */

/* y += v with wrapping integer arithmetic, concurrently with other threads */
__device__ __forceinline__ void atomic_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ __forceinline__ void atomic_add(int64_t *p, int64_t v) {
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ void atomic_add(uint8_t *p, uint8_t v) {
    /* no byte atomics: CAS on the aligned word holding the byte */
    unsigned int *w = (unsigned int *)((uintptr_t)p & ~(uintptr_t)3);
    const unsigned sh = (unsigned)((uintptr_t)p & 3) * 8;
    unsigned int old = cu_load_relaxed(w), assumed;
    do {
        assumed = old;
        const unsigned b = ((assumed >> sh) + v) & 0xffu;
        old = atomicCAS(w, assumed, (assumed & ~(0xffu << sh)) | (b << sh));
    } while (old != assumed);
}

/* reports every index outside [base, base + extent) (walk over the index alone) */
__global__ void check_index_kernel(const int64_t *idx, nd_walk<1> w, idx_geom g, cu_error_slot *slot) {
    CU_GRID_STRIDE(i, g.n) {
        int64_t off;
        nd_offsets(w, i, &off);
        const int64_t v = idx[off];
        if ((uint64_t)v - (uint64_t)g.base >= (uint64_t)g.extent) cu_report(slot, CU_ERR_INDEX_RANGE, g.kid, v, g.extent);
    }
}

/* walk operands: 0 = index, 1 = src, 2 = y0; writes nothing once the slot
 * holds an error (the check kernel ran before, on the same stream).  SET:
 * stores (scatter; T then an unsigned type of the element's size, moved by
 * bit pattern, and of repeated indices one wins), else adds (scatter_add). */
template <bool SET, typename T>
__global__ void scatter_kernel(const int64_t *idx, const T *src, T *y, nd_walk<3> w, idx_geom g,
                               const cu_error_slot *slot) {
    __shared__ int failed;
    if (threadIdx.x == 0) failed = cu_load_relaxed(&slot->code);
    __syncthreads();
    if (failed) return;
    CU_GRID_STRIDE(i, g.n) {
        int64_t off[3];
        nd_offsets(w, i, off);
        const uint64_t k = (uint64_t)idx[off[0]] - (uint64_t)g.base;
        if (k >= (uint64_t)g.extent) continue; /* never written; reported by the check */
        if constexpr (SET) cu_store_racy(y + off[2] + (int64_t)k * g.sd, src[off[1]]);
        else atomic_add(y + off[2] + (int64_t)k * g.sd, src[off[1]]);
    }
}

/* chk: the indices to check (the index view itself); idx, src0 and y0 have
 * one shape (the walk's); set: store (scatter) instead of add. */
int run_scatter(const ordo_run_ctx *rc, const char *name, const ordo_view *chk, const ordo_view *idx,
                const ordo_view *src0, const ordo_view *y0, const ordo_view *y, int dim, int base, bool set) {
    idx_geom g;
    g.base = base;
    g.extent = y->ndim ? y->shape[dim] : 1;
    g.sd = y->ndim ? y->strides[dim] : 0;
    g.kid = cu_error_kernel_id(name);
    cu_error_slot *slot = cu_error_slot_op(rc);
    if (!slot) return 1; /* (the op failed, saying why) */
    cudaStream_t st = cu_stream(rc);
    g.n = ordo_view_numel(chk);
    if (g.n > 0) {
        const ordo_view *vc[1] = {chk};
        check_index_kernel<<<cu_blocks(g.n), CU_THREADS, 0, st>>>((const int64_t *)chk->data, nd_walk_views<1>(vc), g,
                                                                  slot);
    }
    g.n = ordo_view_numel(idx);
    if (g.n > 0) {
        const ordo_view *v[3] = {idx, src0, y0};
        const nd_walk<3> w = nd_walk_views<3>(v);
        unsigned nb = cu_blocks(g.n);
        if (nb > ADD_MAX_BLOCKS) nb = ADD_MAX_BLOCKS;
        const int64_t *ip = (const int64_t *)idx->data;
        if (set) {
            switch (ordo_dtype_size(y->dtype)) {
            case 8: scatter_kernel<true, uint64_t><<<nb, CU_THREADS, 0, st>>>(ip, (const uint64_t *)src0->data, (uint64_t *)y0->data, w, g, slot); break;
            case 4: scatter_kernel<true, uint32_t><<<nb, CU_THREADS, 0, st>>>(ip, (const uint32_t *)src0->data, (uint32_t *)y0->data, w, g, slot); break;
            default: scatter_kernel<true, uint8_t><<<nb, CU_THREADS, 0, st>>>(ip, (const uint8_t *)src0->data, (uint8_t *)y0->data, w, g, slot); break;
            }
        } else {
            CU_DISPATCH(rc, name, y->dtype, T,
                        scatter_kernel<false, T><<<nb, CU_THREADS, 0, st>>>(ip, (const T *)src0->data, (T *)y0->data, w, g, slot));
        }
    }
    return cu_check_launch(rc, name);
}

/* index.c's checks (cpu_check_scatter_add, cpu_check_scatter,
 * cpu_check_index_add), then the launches */
int k_scatter_add(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view src0, y0;
    if ((r = cpu_check_scatter_add(rc, a, &dim, &src0, &y0))) return r;
    return run_scatter(rc, "scatter_add", &a->in[1], &a->in[1], &src0, &y0, &a->out[0], dim, cpu_index_base(a),
                       false);
}

int k_scatter(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view src0, y0;
    if ((r = cpu_check_scatter(rc, a, &dim, &src0, &y0))) return r;
    return run_scatter(rc, "scatter", &a->in[1], &a->in[1], &src0, &y0, &a->out[0], dim, cpu_index_base(a), true);
}

int k_index_add(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int dim, r;
    ordo_view iv, y0;
    if ((r = cpu_check_index_add(rc, a, &dim, &iv, &y0))) return r;
    /* the 1-d index is checked once, not once per element of src */
    return run_scatter(rc, "index_add", &a->in[1], &iv, &a->in[0], &y0, &a->out[0], dim, cpu_index_base(a), false);
}

} // namespace

extern "C" void cuda_register_index(void) {
    static const cpu_kernel_entry t[] = {
        {"gather", k_gather},
        {"index_select", k_index_select},
        {"scatter_add", k_scatter_add},
        {"scatter", k_scatter},
        {"index_add", k_index_add},
    };
    CU_REGISTER_TABLE(t);
}
