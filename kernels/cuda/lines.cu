/*
 * lines.cu - cumsum, cumprod (and its gradient) and sort along one dim on
 * the GPU: the twins of kernels/cpu/lines.c, with its checks
 * (cpu_check_lines), messages and results (KERNELS.md).
 *
 * One thread walks each line, as the CPU does: cumsum and cumprod
 * accumulate floats in float64 and integers in uint64 (wrapping); sort
 * copies the line into the outputs and heap-sorts (value, index) pairs
 * there.  Heapsort is not stable, but the index breaks every tie, so the
 * order is the CPU's stable one exactly, with NaN as the largest value.
 * Simple rather than fast: a line per thread suits many short lines (the
 * usual sort of scores per row); one long line runs on a single thread.
 */
#include "cuda_internal.cuh"
#include "cuda_strided.cuh"

namespace {

struct line_geom {
    nd_walk<3> w;                /* the kept dims: out0, out1 (or x), x */
    int64_t nlines, n;
    int64_t s0, s1, sx;          /* strides along the dim */
};

/* a running sum (PROD false) or product of each line */
template <typename T, typename ACC, bool PROD>
__global__ void scan_lines(T *y, const T *x, line_geom g) {
    CU_GRID_STRIDE(o, g.nlines) {
        int64_t off[3];
        nd_offsets(g.w, o, off);
        T *yr = y + off[0];
        const T *xr = x + off[2];
        ACC acc = PROD ? 1 : 0;
        for (int64_t i = 0; i < g.n; i++) {
            const ACC v = (ACC)xr[i * g.sx]; /* read before the write: y may be x */
            acc = PROD ? acc * v : acc + v;
            yr[i * g.s0] = (T)acc;
        }
    }
}

/* cumprod's gradient, as the CPU's (lines.c): S from the end into gx,
 * then the prefix products of x applied from the start */
template <typename T>
__global__ void cumprod_grad_lines(T *gx, const T *gy, const T *x, line_geom g) {
    CU_GRID_STRIDE(o, g.nlines) {
        int64_t off[3];
        nd_offsets(g.w, o, off);
        T *gr = gx + off[0];
        const T *gyr = gy + off[1];
        const T *xr = x + off[2];
        const int64_t n = g.n;
        double acc = 0;
        for (int64_t i = n - 1; i >= 0; i--) {
            acc = (double)gyr[i * g.s1] + (i + 1 < n ? (double)xr[(i + 1) * g.sx] * acc : 0);
            gr[i * g.s0] = (T)acc;
        }
        double left = 1;
        for (int64_t i = 0; i < n; i++) {
            gr[i * g.s0] = (T)(left * (double)gr[i * g.s0]);
            left *= (double)xr[i * g.sx];
        }
    }
}

/* the CPU's order: NaN largest, the index breaking ties */
template <typename T>
__device__ __forceinline__ bool before(T a, int64_t ia, T b, int64_t ib, bool down) {
    const bool an = a != a, bn = b != b;
    if (an != bn) return down ? an : bn;
    if (!an && a != b) return down ? a > b : a < b;
    return ia < ib;
}

template <typename T>
__device__ void sift(T *v, int64_t sv, int64_t *ix, int64_t si, int64_t root, int64_t end, bool down) {
    /* a max-heap in the sort's order: the element that goes last on top */
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end && before(v[child * sv], ix[child * si], v[(child + 1) * sv], ix[(child + 1) * si], down))
            child++;
        if (!before(v[root * sv], ix[root * si], v[child * sv], ix[child * si], down)) return;
        const T tv = v[root * sv];
        const int64_t ti = ix[root * si];
        v[root * sv] = v[child * sv];
        ix[root * si] = ix[child * si];
        v[child * sv] = tv;
        ix[child * si] = ti;
        root = child;
    }
}

template <typename T>
__global__ void sort_lines(T *y, int64_t *idx, const T *x, line_geom g, bool down) {
    CU_GRID_STRIDE(o, g.nlines) {
        int64_t off[3];
        nd_offsets(g.w, o, off);
        T *v = y + off[0];
        int64_t *ix = idx + off[1];
        const T *xr = x + off[2];
        const int64_t n = g.n, sv = g.s0, si = g.s1;
        for (int64_t i = 0; i < n; i++) { /* read whole before sorting: y may be x */
            v[i * sv] = xr[i * g.sx];
            ix[i * si] = i;
        }
        for (int64_t r = n / 2 - 1; r >= 0; r--) sift(v, sv, ix, si, r, n, down);
        for (int64_t end = n - 1; end > 0; end--) {
            const T tv = v[0];
            const int64_t ti = ix[0];
            v[0] = v[end * sv];
            ix[0] = ix[end * si];
            v[end * sv] = tv;
            ix[end * si] = ti;
            sift(v, sv, ix, si, 0, end, down);
        }
    }
}

line_geom geom_of(const cpu_line_plan &pl) {
    line_geom g = line_geom();
    g.n = pl.n;
    g.s0 = pl.step[0];
    g.s1 = pl.step[1];
    g.sx = pl.step[2];
    g.nlines = ordo_view_numel(&pl.kept[2]);
    const int64_t *st[3] = {pl.kept[0].strides, pl.kept[1].strides, pl.kept[2].strides};
    g.w = nd_walk_of<3>(pl.kept[2].ndim, pl.kept[2].shape, st);
    return g;
}

template <typename T, typename ACC, bool PROD>
void launch_scan(const ordo_run_ctx *rc, const ordo_kernel_args *a, const line_geom &g) {
    scan_lines<T, ACC, PROD><<<cu_blocks(g.nlines), CU_THREADS, 0, cu_stream(rc)>>>(
        (T *)a->out[0].data, (const T *)a->in[0].data, g);
}

template <bool PROD>
int run_scan(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a) {
    cpu_line_plan pl;
    int r = cpu_check_lines(rc, name, a, 1, &pl);
    if (r) return r;
    if (ordo_view_numel(&a->in[0]) == 0) return 0;
    const line_geom g = geom_of(pl);
    switch (a->in[0].dtype) {
    case ORDO_F32: launch_scan<float, double, PROD>(rc, a, g); break;
    case ORDO_F64: launch_scan<double, double, PROD>(rc, a, g); break;
    case ORDO_I32: launch_scan<int32_t, uint64_t, PROD>(rc, a, g); break;
    case ORDO_I64: launch_scan<int64_t, uint64_t, PROD>(rc, a, g); break;
    default: launch_scan<uint8_t, uint64_t, PROD>(rc, a, g); break;
    }
    return cu_check_launch(rc, name);
}

int k_cumsum(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_scan<false>(rc, "cumsum", a); }
int k_cumprod(const ordo_run_ctx *rc, const ordo_kernel_args *a) { return run_scan<true>(rc, "cumprod", a); }

template <typename T>
void launch_cumprod_grad(const ordo_run_ctx *rc, const ordo_kernel_args *a, const line_geom &g) {
    cumprod_grad_lines<T><<<cu_blocks(g.nlines), CU_THREADS, 0, cu_stream(rc)>>>(
        (T *)a->out[0].data, (const T *)a->in[1].data, (const T *)a->in[0].data, g);
}

int k_cumprod_backward(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_line_plan pl;
    int r = cpu_check_lines_grad(rc, "cumprod_backward", a, &pl);
    if (r) return r;
    if (ordo_view_numel(&a->in[0]) == 0) return 0;
    const line_geom g = geom_of(pl);
    if (a->in[0].dtype == ORDO_F32) launch_cumprod_grad<float>(rc, a, g);
    else launch_cumprod_grad<double>(rc, a, g);
    return cu_check_launch(rc, "cumprod_backward");
}

template <typename T>
void launch_sort(const ordo_run_ctx *rc, const ordo_kernel_args *a, const line_geom &g, bool down) {
    sort_lines<T><<<cu_blocks(g.nlines), CU_THREADS, 0, cu_stream(rc)>>>(
        (T *)a->out[0].data, (int64_t *)a->out[1].data, (const T *)a->in[0].data, g, down);
}

int k_sort(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    cpu_line_plan pl;
    int r = cpu_check_lines(rc, "sort", a, 2, &pl);
    if (r) return r;
    if (a->niparam < 2 || (a->iparam[1] != 0 && a->iparam[1] != 1))
        return ordo_fail(rc, "sort: iparam 1 (descending) must be 0 or 1");
    if (ordo_view_numel(&a->in[0]) == 0) return 0;
    const line_geom g = geom_of(pl);
    const bool down = a->iparam[1] != 0;
    switch (a->in[0].dtype) {
    case ORDO_F32: launch_sort<float>(rc, a, g, down); break;
    case ORDO_F64: launch_sort<double>(rc, a, g, down); break;
    case ORDO_I32: launch_sort<int32_t>(rc, a, g, down); break;
    case ORDO_I64: launch_sort<int64_t>(rc, a, g, down); break;
    default: launch_sort<uint8_t>(rc, a, g, down); break;
    }
    return cu_check_launch(rc, "sort");
}

} // namespace

extern "C" void cuda_register_lines(void) {
    static const cpu_kernel_entry t[] = {
        {"cumsum", k_cumsum},
        {"cumprod", k_cumprod},
        {"cumprod_backward", k_cumprod_backward},
        {"sort", k_sort},
    };
    CU_REGISTER_TABLE(t);
}
