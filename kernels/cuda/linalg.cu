/*
 * linalg.cu - linalg_lu on the GPU: the LU factorisation with partial
 * pivoting behind ordo.linalg's solve, inv, det and slogdet, with the CPU
 * kernel's checks (cpu_check_linalg_lu), modes and messages
 * (kernels/cpu/linalg.c has the iparams).
 *
 * One block factorises one matrix at a time (blocks stride over the
 * batch), in double, in stream-ordered scratch: a row-major copy of A and
 * of B.  Each column j takes three steps between barriers: the pivot (a
 * block-wide reduction giving the first largest |a(i, j)|, i >= j, as the
 * CPU's scan does), the row swap, and the elimination, one thread per
 * element of the trailing rows.  Back substitution runs one thread per
 * column of B, each in the CPU's order.  det and slogdet take the CPU's
 * product of the pivots on one thread.  Every step rounds as the CPU's
 * (msub, madd: no fused multiply-adds), so the results are the CPU's bit
 * for bit (slogdet's log aside) and a matrix singular on one device is
 * singular on the other.  The gradients' modes (3 and 4)
 * have their own kernel, cofactor_kernel, with complete pivoting.
 *
 * A singular matrix (a zero pivot) fails solve and inv as on the CPU,
 * naming the first such matrix of the batch: blocks record the smallest
 * (matrix, column) they meet, and a one-thread kernel reports it in the
 * op's error slot, so the engine fails the op once its work has run.
 */
#include <math.h>

#include "cuda_internal.cuh"

namespace {

/* threads per block: a power of two, for the pivot's reduction */
const int LU_THREADS = 128;

/* Scratch for the matrices being factorised at once, all blocks together:
 * fewer blocks for big matrices, never under one. */
const int64_t LU_SCRATCH_BYTES = (int64_t)64 << 20;
const int64_t LU_MAX_BLOCKS = 1024;

/* "no singular matrix yet" for the smallest (matrix, column) key */
const unsigned long long NONE = ~0ULL;

struct lu_geom {
    int mode, nb;      /* 0 solve, 1 slogdet, 2 det, 3 and 4 their gradients; batch dims */
    int64_t n, k;      /* n x n matrices; B's columns (solve) */
    int64_t batch;     /* matrices */
};

/* The element offset of batch element b: row-major over the first nb dims
 * of v. */
__device__ int64_t batch_offset(const cu_view &v, int nb, int64_t b) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        const int64_t s = v.shape[d];
        off += (b % s) * v.strides[d];
        b /= s;
    }
    return off;
}

/* Keeps in (*v, *i) the larger value, the smaller row on a tie; a row of
 * -1 (no candidate) loses to any.  A NaN is never a candidate (w == w
 * fails): taken as a thread's first, it would win every later comparison
 * (none holds against a NaN) and hide the column's largest |a(i, j)| from
 * the reduction, where the CPU's scan passes over it. */
__device__ __forceinline__ void pivot_max(double *v, int64_t *i, double w, int64_t j) {
    if (j >= 0 && w == w && (*i < 0 || w > *v || (w == *v && j < *i))) *v = w, *i = j;
}

/* x - f y and x + f y, each step rounded as on the CPU (kernels/cpu/
 * linalg.c): nvcc contracts x - f * y into a fused multiply-add by default,
 * whose one rounding left 1.1e-16 where the CPU's elimination leaves an
 * exact 0 - {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}} was of full rank for
 * cofactor_kernel (slogdet's gradient finite, near 1e16, where the CPU's is
 * inf/NaN), and a singular matrix could pass solve or fail it on one device
 * only.  (The emulation is built with -ffp-contract=off, so it cannot show
 * this.) */
__device__ __forceinline__ double msub(double x, double f, double y) { return __dsub_rn(x, __dmul_rn(f, y)); }
__device__ __forceinline__ double madd(double x, double f, double y) { return __dadd_rn(x, __dmul_rn(f, y)); }

/* One elimination step of both LU modes, by the whole block, pivot j in
 * place: the multipliers into column j below the pivot, then the trailing
 * rows of a (columns after j, n x n) and of b (k columns), one thread per
 * element, a zero multiplier skipped as on the CPU. */
__device__ void eliminate_below(double *a, double *b, int64_t n, int64_t k, int64_t j, int tid, int nt) {
    const double piv = a[j * n + j];
    for (int64_t i = j + 1 + tid; i < n; i += nt) a[i * n + j] /= piv;
    __syncthreads();
    const int64_t w = n - j - 1 + k, rows = n - j - 1;
    for (int64_t t = tid; t < rows * w; t += nt) {
        const int64_t i = j + 1 + t / w, c = t % w;
        const double f = a[i * n + j];
        if (f == 0) continue;
        if (c < n - j - 1) a[i * n + j + 1 + c] = msub(a[i * n + j + 1 + c], f, a[j * n + j + 1 + c]);
        else b[i * k + (c - (n - j - 1))] = msub(b[i * k + (c - (n - j - 1))], f, b[j * k + (c - (n - j - 1))]);
    }
    __syncthreads();
}

/* scratch: per block, n*n doubles for A, then n*k for B */
template <typename T>
__global__ void lu_kernel(cu_view A, cu_view B, cu_view O0, cu_view O1, lu_geom g, double *scratch,
                          unsigned long long *first_singular) {
    __shared__ double best[LU_THREADS];
    __shared__ int64_t best_row[LU_THREADS];
    __shared__ int64_t pivot_row, zero_col;
    __shared__ int sign;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int64_t n = g.n, k = g.k;
    double *a = scratch + (int64_t)blockIdx.x * (n * n + n * k);
    double *b = a + n * n;
    const int64_t ar = A.strides[g.nb], ac = A.strides[g.nb + 1];
    for (int64_t e = blockIdx.x; e < g.batch; e += gridDim.x) {
        const T *pa = (const T *)A.data + batch_offset(A, g.nb, e);
        for (int64_t t = tid; t < n * n; t += nt) a[t] = (double)pa[(t / n) * ar + (t % n) * ac];
        if (g.mode == 0) {
            const T *pb = (const T *)B.data + batch_offset(B, g.nb, e);
            const int64_t br = B.strides[g.nb], bc = B.strides[g.nb + 1];
            for (int64_t t = tid; t < n * k; t += nt) b[t] = (double)pb[(t / k) * br + (t % k) * bc];
        }
        if (tid == 0) sign = 1, zero_col = -1;
        __syncthreads();
        for (int64_t j = 0; j < n; j++) {
            /* the pivot: the first largest |a(i, j)|, NaNs never chosen
             * (no comparison holds for them), as the CPU's scan */
            double bv = -1;
            int64_t bi = -1;
            for (int64_t i = j + tid; i < n; i += nt) pivot_max(&bv, &bi, fabs(a[i * n + j]), i);
            best[tid] = bv, best_row[tid] = bi;
            __syncthreads();
            for (int s = nt / 2; s > 0; s >>= 1) {
                if (tid < s) {
                    double v = best[tid];
                    int64_t i = best_row[tid];
                    pivot_max(&v, &i, best[tid + s], best_row[tid + s]);
                    best[tid] = v, best_row[tid] = i;
                }
                __syncthreads();
            }
            if (tid == 0) {
                /* a NaN on the diagonal stays the pivot, as on the CPU */
                const double d = a[j * n + j];
                int64_t p = best_row[0] < 0 || d != d ? j : best_row[0];
                /* no nonzero pivot but a NaN: the NaN, as on the CPU */
                for (int64_t i = j + 1; i < n && a[p * n + j] == 0; i++)
                    if (a[i * n + j] != a[i * n + j]) p = i;
                if (a[p * n + j] == 0) zero_col = j;
                else if (p != j) sign = -sign;
                pivot_row = p;
            }
            __syncthreads();
            if (zero_col >= 0) break; /* (the same for the whole block) */
            const int64_t p = pivot_row;
            if (p != j) {
                for (int64_t c = tid; c < n; c += nt) {
                    const double t = a[j * n + c];
                    a[j * n + c] = a[p * n + c], a[p * n + c] = t;
                }
                for (int64_t c = tid; c < k; c += nt) {
                    const double t = b[j * k + c];
                    b[j * k + c] = b[p * k + c], b[p * k + c] = t;
                }
            }
            __syncthreads();
            eliminate_below(a, b, n, k, j, tid, nt);
        }
        if (g.mode == 2) {
            if (tid == 0) {
                double det = 0;
                if (zero_col < 0) {
                    det = sign;
                    for (int64_t i = 0; i < n; i++) det *= a[i * n + i];
                }
                ((T *)O0.data)[cu_offset(O0, e)] = (T)det;
            }
        } else if (g.mode == 1) {
            if (tid == 0) {
                double s = sign, la = 0;
                if (zero_col >= 0) {
                    s = 0, la = -INFINITY;
                } else {
                    for (int64_t i = 0; i < n; i++) {
                        const double u = a[i * n + i];
                        if (u < 0) s = -s;
                        la += log(fabs(u));
                    }
                    if (la != la) s = NAN; /* a NaN in A */
                }
                ((T *)O0.data)[cu_offset(O0, e)] = (T)s;
                ((T *)O1.data)[cu_offset(O1, e)] = (T)la;
            }
        } else if (zero_col >= 0) {
            if (tid == 0) {
                const unsigned long long key = (unsigned long long)(e * n + zero_col);
                unsigned long long old = cu_load_relaxed(first_singular);
                while (key < old) {
                    const unsigned long long seen = atomicCAS(first_singular, old, key);
                    if (seen == old) break;
                    old = seen;
                }
            }
        } else {
            /* back substitution, one thread per column of B, into X */
            T *px = (T *)O0.data + batch_offset(O0, g.nb, e);
            const int64_t xr = O0.strides[g.nb], xc = O0.strides[g.nb + 1];
            for (int64_t c = tid; c < k; c += nt) {
                for (int64_t i = n - 1; i >= 0; i--) {
                    const double piv = a[i * n + i];
                    double s = b[i * k + c];
                    for (int64_t j = i + 1; j < n; j++) s = msub(s, a[i * n + j], b[j * k + c]);
                    b[i * k + c] = s / piv;
                }
                for (int64_t i = 0; i < n; i++) px[i * xr + c * xc] = (T)b[i * k + c];
            }
        }
        __syncthreads(); /* the scratch is the next matrix's */
    }
}

/* Modes 3 (det's gradient, adj(A)^T) and 4 (slogdet's, A^-T; adj(A)^T / 0
 * at a singular A): the CPU's cofactor() (kernels/cpu/linalg.c has the
 * formulas), an LU with complete pivoting P A Q = L U against b = I, which
 * becomes L^-1 P.  The pivot is the first largest |a(i, c)|, i, c >= j, in
 * row-major order, as the CPU's scan; a zero pivot ends the factorisation
 * (the trailing submatrix is all zero: the rank is j).  scratch: per
 * block, n*n doubles for A, n*n for b, n for the column permutation q, n
 * for the null vector x. */
template <typename T>
__global__ void cofactor_kernel(cu_view A, cu_view C, lu_geom g, double *scratch) {
    __shared__ double best[LU_THREADS];
    __shared__ int64_t best_idx[LU_THREADS];
    __shared__ int64_t prow, pcol, rank;
    __shared__ int sign, has_nan;
    __shared__ double scale;
    const int tid = threadIdx.x, nt = blockDim.x;
    const int64_t n = g.n;
    double *a = scratch + (int64_t)blockIdx.x * (2 * n * n + 2 * n);
    double *b = a + n * n, *q = b + n * n, *x = q + n;
    const int64_t ar = A.strides[g.nb], ac = A.strides[g.nb + 1];
    const int64_t cr = C.strides[g.nb], cc = C.strides[g.nb + 1];
    for (int64_t e = blockIdx.x; e < g.batch; e += gridDim.x) {
        const T *pa = (const T *)A.data + batch_offset(A, g.nb, e);
        T *pc = (T *)C.data + batch_offset(C, g.nb, e);
        for (int64_t t = tid; t < n * n; t += nt) {
            a[t] = (double)pa[(t / n) * ar + (t % n) * ac];
            b[t] = t / n == t % n ? 1 : 0;
        }
        for (int64_t t = tid; t < n; t += nt) q[t] = (double)t;
        __syncthreads();
        if (tid == 0) {
            sign = 1, rank = n, has_nan = 0;
            for (int64_t t = 0; t < n * n; t++)
                if (a[t] != a[t]) has_nan = 1;
        }
        __syncthreads();
        if (has_nan) {
            for (int64_t t = tid; t < n * n; t += nt) pc[(t / n) * cr + (t % n) * cc] = (T)NAN;
            __syncthreads();
            continue;
        }
        for (int64_t j = 0; j < n; j++) {
            const int64_t m = n - j;
            double bv = -1;
            int64_t bi = -1;
            for (int64_t t = tid; t < m * m; t += nt) pivot_max(&bv, &bi, fabs(a[(j + t / m) * n + j + t % m]), t);
            best[tid] = bv, best_idx[tid] = bi;
            __syncthreads();
            for (int s = nt / 2; s > 0; s >>= 1) {
                if (tid < s) {
                    double v = best[tid];
                    int64_t i = best_idx[tid];
                    pivot_max(&v, &i, best[tid + s], best_idx[tid + s]);
                    best[tid] = v, best_idx[tid] = i;
                }
                __syncthreads();
            }
            if (tid == 0) {
                /* a NaN on the diagonal stays the pivot, as the CPU's scan
                 * starts from it (A holds no NaN, but inf - inf makes one
                 * on the way).  Else the diagonal is a candidate, so
                 * best_idx[0] >= 0: without this test, a trailing block all
                 * NaN left the reduction's "no candidate" (-1), decoded as
                 * a pivot at (j, j - 1) or (j - 1, j), and the swap mixed
                 * L into U (finite gradients where the CPU gives NaN). */
                const double d = a[j * n + j];
                if (d != d) {
                    prow = j, pcol = j;
                } else if (best[0] == 0) {
                    rank = j;
                } else {
                    prow = j + best_idx[0] / m, pcol = j + best_idx[0] % m;
                    if (prow != j) sign = -sign;
                    if (pcol != j) {
                        sign = -sign;
                        const double t = q[j];
                        q[j] = q[pcol], q[pcol] = t;
                    }
                }
            }
            __syncthreads();
            if (rank < n) break; /* (the same for the whole block) */
            const int64_t p = prow, pq = pcol;
            if (p != j)
                for (int64_t c = tid; c < n; c += nt) {
                    double t = a[j * n + c];
                    a[j * n + c] = a[p * n + c], a[p * n + c] = t;
                    t = b[j * n + c];
                    b[j * n + c] = b[p * n + c], b[p * n + c] = t;
                }
            __syncthreads();
            if (pq != j)
                for (int64_t i = tid; i < n; i += nt) {
                    const double t = a[i * n + j];
                    a[i * n + j] = a[i * n + pq], a[i * n + pq] = t;
                }
            __syncthreads();
            eliminate_below(a, b, n, n, j, tid, nt);
        }
        const int64_t r = rank;
        if (r == n) {
            if (tid == 0) {
                double s = 1;
                if (g.mode == 3) {
                    s = sign;
                    for (int64_t i = 0; i < n; i++) s *= a[i * n + i];
                }
                scale = s;
            }
            __syncthreads();
            /* U X = b, one thread per column of b, in the CPU's order: row
             * i of X is row q[i] of A^-1, column q[i] of C = scale A^-T */
            const double s = scale;
            for (int64_t col = tid; col < n; col += nt) {
                for (int64_t i = n - 1; i >= 0; i--) {
                    double t = b[i * n + col];
                    for (int64_t j = i + 1; j < n; j++) t = msub(t, a[i * n + j], b[j * n + col]);
                    b[i * n + col] = t / a[i * n + i];
                }
                for (int64_t i = 0; i < n; i++) pc[col * cr + (int64_t)q[i] * cc] = (T)(s * b[i * n + col]);
            }
        } else if (r == n - 1) {
            /* adj(A) = sign alpha (Q x) (e_n^T b), C its transpose */
            const int64_t k = n - 1;
            if (tid == 0) {
                double alpha = sign;
                for (int64_t i = 0; i < k; i++) alpha *= a[i * n + i];
                x[k] = 1;
                for (int64_t i = k - 1; i >= 0; i--) {
                    double t = a[i * n + k];
                    for (int64_t m = i + 1; m < k; m++) t = madd(t, a[i * n + m], x[m]);
                    x[i] = -t / a[i * n + i];
                }
                scale = alpha;
            }
            __syncthreads();
            for (int64_t t = tid; t < n * n; t += nt) {
                const int64_t rr = t / n, i = t % n;
                const double v = scale * x[rr] * b[k * n + i];
                pc[i * cr + (int64_t)q[rr] * cc] = (T)(g.mode == 3 ? v : v == 0 ? NAN : copysign(INFINITY, v));
            }
        } else {
            for (int64_t t = tid; t < n * n; t += nt) pc[(t / n) * cr + (t % n) * cc] = (T)(g.mode == 3 ? 0 : NAN);
        }
        __syncthreads(); /* the scratch is the next matrix's */
    }
}

/* The first singular matrix, if any, as the op's failure (CU_ERR_SINGULAR:
 * for a single matrix a is the column, else the matrix; b the batch). */
__global__ void lu_report_kernel(const unsigned long long *first_singular, int64_t n, int64_t batch, int kid,
                                 cu_error_slot *slot) {
    const unsigned long long key = *first_singular;
    if (key == NONE) return;
    const long long e = (long long)(key / (unsigned long long)n), z = (long long)(key % (unsigned long long)n);
    cu_report(slot, CU_ERR_SINGULAR, kid, batch == 1 ? z : e, batch);
}

/* Blocks for a batch whose matrices take per bytes of scratch each. */
int64_t lu_blocks(int64_t per, int64_t batch) {
    int64_t blocks = LU_SCRATCH_BYTES / per;
    if (blocks < 1) blocks = 1;
    if (blocks > LU_MAX_BLOCKS) blocks = LU_MAX_BLOCKS;
    if (blocks > batch) blocks = batch;
    return blocks;
}

/* The scratch of *blocks matrices (per bytes each) and extra bytes; on a
 * device without that much free, fewer blocks (halved down to one: the
 * blocks stride over the batch, so any count works): a batch's up to 64
 * MiB must not fail an op whose one matrix fits.  0, or 1 when even one
 * block's does not fit. */
int lu_scratch_alloc(const ordo_run_ctx *rc, void **mem, int64_t *blocks, int64_t per, int64_t extra) {
    for (;;) {
        if (!cu_scratch_alloc(rc, mem, (size_t)(extra + *blocks * per))) return 0;
        if (*blocks == 1) return 1;
        *blocks = (*blocks + 1) / 2;
    }
}

/* Modes 3 and 4 (cofactor_kernel): never a failure of the matrices */
int cofactor_launch(const ordo_run_ctx *rc, const ordo_kernel_args *args, const cpu_linalg_plan *p, lu_geom g) {
    const int64_t per = p->n > 0 ? (2 * p->n * p->n + 2 * p->n) * (int64_t)sizeof(double) : 8;
    int64_t blocks = lu_blocks(per, p->batch);
    void *mem = NULL;
    if (lu_scratch_alloc(rc, &mem, &blocks, per, 0))
        return ordo_fail(rc, "%s: out of GPU memory for the scratch of one %lld x %lld matrix (%lld bytes)", p->name,
                         (long long)p->n, (long long)p->n, (long long)per);
    cudaStream_t st = cu_stream(rc);
    const cu_view a = cu_view_of(&args->in[0]), c = cu_view_of(&args->out[0]);
    if (args->in[0].dtype == ORDO_F64)
        cofactor_kernel<double><<<(unsigned)blocks, LU_THREADS, 0, st>>>(a, c, g, (double *)mem);
    else
        cofactor_kernel<float><<<(unsigned)blocks, LU_THREADS, 0, st>>>(a, c, g, (double *)mem);
    const int r = cu_check_launch(rc, p->name);
    cu_scratch_free(rc, mem);
    return r;
}

int k_linalg_lu(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_linalg_plan p;
    int r = cpu_check_linalg_lu(rc, args, &p);
    if (r) return r;
    if (p.batch == 0) return 0;
    const ordo_view *A = &args->in[0];
    lu_geom g;
    g.mode = p.mode, g.nb = p.nb, g.n = p.n, g.k = p.k, g.batch = p.batch;
    if (p.mode >= 3) return cofactor_launch(rc, args, &p, g);
    cu_error_slot *slot = NULL;
    if (p.mode == 0 && !(slot = cu_error_slot_op(rc))) return 1; /* (the op failed, saying why) */
    /* (0 x 0 matrices need no scratch: det 1, slogdet (1, 0), an empty X) */
    const int64_t per = p.n > 0 ? (p.n * p.n + p.n * p.k) * (int64_t)sizeof(double) : 8;
    int64_t blocks = lu_blocks(per, p.batch);
    /* the key first, then the doubles (8-byte aligned either way) */
    void *mem = NULL;
    if (lu_scratch_alloc(rc, &mem, &blocks, per, 8))
        return ordo_fail(rc, "%s: out of GPU memory for the scratch of one %lld x %lld matrix (%lld bytes)", p.name,
                         (long long)p.n, (long long)p.n, (long long)per);
    unsigned long long *first_singular = (unsigned long long *)mem;
    double *scratch = (double *)((char *)mem + 8);
    cudaStream_t st = cu_stream(rc);
    const cu_view a = cu_view_of(A), b = cu_view_of(p.mode == 0 ? &args->in[1] : A),
                  o0 = cu_view_of(&args->out[0]), o1 = cu_view_of(&args->out[p.mode == 1 ? 1 : 0]);
    cudaMemsetAsync(first_singular, 0xff, 8, st);
    if (A->dtype == ORDO_F64)
        lu_kernel<double><<<(unsigned)blocks, LU_THREADS, 0, st>>>(a, b, o0, o1, g, scratch, first_singular);
    else
        lu_kernel<float><<<(unsigned)blocks, LU_THREADS, 0, st>>>(a, b, o0, o1, g, scratch, first_singular);
    if (slot) lu_report_kernel<<<1, 1, 0, st>>>(first_singular, p.n, p.batch, cu_error_kernel_id(p.name), slot);
    r = cu_check_launch(rc, p.name);
    cu_scratch_free(rc, mem);
    return r;
}

} // namespace

extern "C" void cuda_register_linalg(void) {
    static const cpu_kernel_entry t[] = {
        {"linalg_lu", k_linalg_lu},
    };
    CU_REGISTER_TABLE(t);
}
