/*
 * linalg.c - linalg_lu: LU factorisation with partial pivoting of each
 * square matrix of a batch (... x n x n), on a double copy, for
 * ordo.linalg (lua/ordo/linalg.lua):
 *
 *   iparam 0 = 0 (solve): in A, B (... x n x k, A's batch dims); out X,
 *       B's shape: A X = B for each matrix (inv solves against I).  A zero
 *       pivot (an exactly singular matrix) fails the op naming the matrix.
 *       A column with no nonzero candidate but a NaN takes the NaN as its
 *       pivot: a NaN in A gives NaN results in every mode, never a zero
 *       pivot.
 *   iparam 0 = 1 (slogdet): in A; out sign, logabs (A's batch dims):
 *       det A = sign * exp(logabs); a singular matrix gives 0 and -inf.
 *   iparam 0 = 2 (det): in A; out det (A's batch dims): the product of
 *       the pivots, with the permutation's sign; 0 for a singular matrix.
 *   iparam 0 = 3 (det's gradient): in A; out C (A's shape): the cofactor
 *       matrix adj(A)^T, which is det(A) A^-T for an invertible A and is
 *       defined for a singular one too (nonzero at rank n-1, zero below),
 *       from an LU with complete pivoting (cofactor() has the formulas).
 *   iparam 0 = 4 (slogdet's gradient): in A; out C (A's shape): A^-T; for
 *       a singular A, where log|det| is -inf and its gradient undefined,
 *       adj(A)^T / 0: +-inf where a cofactor is nonzero, NaN where it is 0.
 *       Modes 3 and 4 give NaN everywhere for an A holding a NaN, and never
 *       fail.
 *   iparam 1: the op's name in messages (0 linalg.solve, 1 linalg.inv,
 *       2 linalg.slogdet, 3 linalg.det).
 *
 * float32 and float64; float32 is factorised in double too.  The inputs
 * may be any strided views (transposed, expanded over the batch).  One
 * thread: the matrices are small in the uses this serves; no LAPACK.  The
 * checks (cpu_check_linalg_lu) are shared with the CUDA kernel
 * (kernels/cuda/linalg.cu), which follows the same algorithm.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

static const char *const op_names[4] = {"linalg.solve", "linalg.inv", "linalg.slogdet", "linalg.det"};

static double load(const ordo_view *v, const char *base, int64_t off) {
    return v->dtype == ORDO_F32 ? (double)((const float *)(const void *)base)[off]
                                : ((const double *)(const void *)base)[off];
}
static void store(const ordo_view *v, char *base, int64_t off, double x) {
    if (v->dtype == ORDO_F32) ((float *)(void *)base)[off] = (float)x;
    else ((double *)(void *)base)[off] = x;
}

/* The element offset of batch element b (row-major over the first nb dims
 * of v). */
static int64_t batch_offset(const ordo_view *v, int nb, int64_t b) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; d--) {
        const int64_t s = v->shape[d];
        off += (b % s) * v->strides[d];
        b /= s;
    }
    return off;
}

/* One elimination step of both LU modes, pivot j in place: the multipliers
 * into column j below the pivot, the trailing rows of a (n x n) and of b
 * (k columns) reduced by them; a zero multiplier is skipped (a NaN is not). */
static void eliminate_below(double *a, double *b, int64_t n, int64_t k, int64_t j) {
    const double piv = a[j * n + j];
    for (int64_t i = j + 1; i < n; i++) {
        const double f = a[i * n + j] / piv;
        if (f == 0) continue;
        a[i * n + j] = f;
        for (int64_t c = j + 1; c < n; c++) a[i * n + c] -= f * a[j * n + c];
        for (int64_t c = 0; c < k; c++) b[i * k + c] -= f * b[j * k + c];
    }
}

/* LU of a (n x n, row-major) with partial pivoting, the same row swaps and
 * eliminations applied to b (n x k, row-major; k may be 0).  Returns the
 * column of the first zero pivot (a singular matrix), else -1; *sign is the
 * permutation's parity (+1 or -1). */
static int64_t lu(double *a, double *b, int64_t n, int64_t k, int *sign) {
    *sign = 1;
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j;
        double best = fabs(a[j * n + j]);
        for (int64_t i = j + 1; i < n; i++) {
            const double v = fabs(a[i * n + j]);
            if (v > best) best = v, p = i;
        }
        if (a[p * n + j] == 0) {
            /* no nonzero pivot but a NaN: the NaN (a NaN in A gives NaN
             * results, never "singular", as when it sits on the diagonal) */
            for (int64_t i = j + 1; i < n && a[p * n + j] == 0; i++)
                if (isnan(a[i * n + j])) p = i;
            if (a[p * n + j] == 0) return j;
        }
        if (p != j) {
            for (int64_t c = 0; c < n; c++) {
                const double t = a[j * n + c];
                a[j * n + c] = a[p * n + c];
                a[p * n + c] = t;
            }
            for (int64_t c = 0; c < k; c++) {
                const double t = b[j * k + c];
                b[j * k + c] = b[p * k + c];
                b[p * k + c] = t;
            }
            *sign = -*sign;
        }
        eliminate_below(a, b, n, k, j);
    }
    return -1;
}

/* LU with complete pivoting of a (n x n, row-major): P A Q = L U, with
 * b = L^-1 P (b starts as I) and q[c] the column of A that is column c of
 * A Q (kept as doubles in the scratch).  It stops at a zero pivot: the
 * trailing submatrix is all zero then, so the rank is the pivots before
 * it, and returns that rank; *sign is det(P) det(Q). */
static int64_t lu_full(double *a, double *b, double *q, int64_t n, int *sign) {
    *sign = 1;
    for (int64_t i = 0; i < n * n; i++) b[i] = 0;
    for (int64_t i = 0; i < n; i++) b[i * n + i] = 1, q[i] = (double)i;
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j, pc = j;
        double best = fabs(a[j * n + j]);
        for (int64_t i = j; i < n; i++)
            for (int64_t c = j; c < n; c++) {
                const double v = fabs(a[i * n + c]);
                if (v > best) best = v, p = i, pc = c;
            }
        if (best == 0) return j;
        if (p != j) {
            for (int64_t c = 0; c < n; c++) {
                double t = a[j * n + c];
                a[j * n + c] = a[p * n + c], a[p * n + c] = t;
                t = b[j * n + c];
                b[j * n + c] = b[p * n + c], b[p * n + c] = t;
            }
            *sign = -*sign;
        }
        if (pc != j) {
            for (int64_t i = 0; i < n; i++) {
                const double t = a[i * n + j];
                a[i * n + j] = a[i * n + pc], a[i * n + pc] = t;
            }
            const double t = q[j];
            q[j] = q[pc], q[pc] = t;
            *sign = -*sign;
        }
        eliminate_below(a, b, n, n, j);
    }
    return n;
}

/* Modes 3 and 4 for one matrix: a (n x n, row-major) in; C = adj(A)^T
 * (mode 3) or A^-T (mode 4) out in c (n x n, row-major); b (n x n) and v
 * (3n) scratch.  With P A Q = L U (complete pivoting, so that the zero
 * pivots are the trailing ones and count the rank's deficit), adj(A) =
 * det(P) det(Q) Q adj(U) L^-1 P, where L^-1 P is b: adj(U) is det(U) U^-1
 * for an invertible U; for U of rank n-1 (only its last pivot zero) it is
 * alpha x e_n^T, alpha the product of the other pivots and x the null
 * vector of U with x_n = 1; below rank n-1 it is 0. */
static void cofactor(double *a, double *b, double *v, double *c, int64_t n, int mode) {
    for (int64_t i = 0; i < n * n; i++)
        if (isnan(a[i])) {
            for (int64_t t = 0; t < n * n; t++) c[t] = NAN;
            return;
        }
    double *q = v, *x = v + n;
    int sign;
    const int64_t rank = lu_full(a, b, q, n, &sign);
    if (rank == n) {
        double s = 1;
        if (mode == 3) {
            s = sign;
            for (int64_t i = 0; i < n; i++) s *= a[i * n + i];
        }
        /* U X = L^-1 P: X = Q^-1 A^-1 in place in b, so row r of X is row
         * q[r] of A^-1 and column q[r] of C = s A^-T */
        for (int64_t i = n - 1; i >= 0; i--) {
            const double piv = a[i * n + i];
            for (int64_t col = 0; col < n; col++) {
                double t = b[i * n + col];
                for (int64_t j = i + 1; j < n; j++) t -= a[i * n + j] * b[j * n + col];
                b[i * n + col] = t / piv;
            }
        }
        for (int64_t r = 0; r < n; r++) {
            const int64_t qr = (int64_t)q[r];
            for (int64_t col = 0; col < n; col++) c[col * n + qr] = s * b[r * n + col];
        }
        return;
    }
    if (rank < n - 1) { /* every cofactor is 0 */
        for (int64_t t = 0; t < n * n; t++) c[t] = mode == 3 ? 0 : NAN;
        return;
    }
    /* rank n-1: adj(A) = sign alpha (Q x) (e_n^T b), and C its transpose */
    const int64_t k = n - 1;
    double alpha = sign;
    for (int64_t i = 0; i < k; i++) alpha *= a[i * n + i];
    x[k] = 1;
    for (int64_t i = k - 1; i >= 0; i--) {
        double t = a[i * n + k];
        for (int64_t m = i + 1; m < k; m++) t += a[i * n + m] * x[m];
        x[i] = -t / a[i * n + i];
    }
    for (int64_t r = 0; r < n; r++) {
        const int64_t qr = (int64_t)q[r];
        for (int64_t i = 0; i < n; i++) {
            const double t = alpha * x[r] * b[k * n + i];
            c[i * n + qr] = mode == 3 ? t : t == 0 ? NAN : copysign(INFINITY, t);
        }
    }
}

int cpu_check_linalg_lu(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_linalg_plan *p) {
    const char *kn = "linalg_lu";
    if (!args || args->niparam < 2 || args->iparam[0] < 0 || args->iparam[0] > 4 || args->iparam[1] < 0 ||
        args->iparam[1] > 3)
        return ordo_fail(rc,
                         "%s: iparams must be the mode (0 solve, 1 slogdet, 2 det, 3 and 4 their gradients) and the "
                         "name (0..3)",
                         kn);
    const int mode = (int)args->iparam[0];
    const char *name = op_names[args->iparam[1]];
    const int nout = mode == 1 ? 2 : 1;
    int r = cpu_check_args(rc, name, args, mode == 0 ? 2 : 1, nout);
    if (r) return r;
    const ordo_view *A = &args->in[0];
    const int dt = A->dtype;
    if (!cpu_dtype_is_float(dt))
        return ordo_fail(rc, "%s: expected float32 or float64 matrices, got %s", name, ordo_dtype_name(dt));
    char s1[160], s2[160];
    if (A->ndim < 2 || A->shape[A->ndim - 1] != A->shape[A->ndim - 2])
        return ordo_fail(rc, "%s: A must be a square matrix or a batch of them (... x n x n), got shape %s", name,
                         cpu_shape_str(A, s1, sizeof s1));
    const int nb = A->ndim - 2;
    const int64_t n = A->shape[nb];
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) batch *= A->shape[d];
    int64_t k = 0;
    if (mode == 0) {
        const ordo_view *B = &args->in[1], *X = &args->out[0];
        if (B->dtype != dt || X->dtype != dt)
            return ordo_fail(rc, "%s: dtype mismatch: A is %s, B %s, X %s", name, ordo_dtype_name(dt),
                             ordo_dtype_name(B->dtype), ordo_dtype_name(X->dtype));
        int ok = B->ndim == A->ndim && B->shape[nb] == n;
        for (int d = 0; ok && d < nb; d++) ok = B->shape[d] == A->shape[d];
        if (!ok)
            return ordo_fail(rc, "%s: B of shape %s does not fit A of shape %s (expected its batch dims and %lld rows)",
                             name, cpu_shape_str(B, s1, sizeof s1), cpu_shape_str(A, s2, sizeof s2), (long long)n);
        if (!cpu_same_shape(B, X))
            return ordo_fail(rc, "%s: X of shape %s must have B's shape %s", name, cpu_shape_str(X, s1, sizeof s1),
                             cpu_shape_str(B, s2, sizeof s2));
        if ((r = cpu_check_writable(rc, name, X))) return r;
        k = B->shape[nb + 1];
    } else if (mode >= 3) {
        const ordo_view *C = &args->out[0];
        if (C->dtype != dt)
            return ordo_fail(rc, "%s: dtype mismatch: A is %s but the gradient is %s", name, ordo_dtype_name(dt),
                             ordo_dtype_name(C->dtype));
        if (!cpu_same_shape(A, C))
            return ordo_fail(rc, "%s: the gradient of shape %s must have A's shape %s", name,
                             cpu_shape_str(C, s1, sizeof s1), cpu_shape_str(A, s2, sizeof s2));
        if ((r = cpu_check_writable(rc, name, C))) return r;
        k = n; /* (b = I: the factorisation's L^-1 P) */
    } else {
        for (int o = 0; o < nout; o++) {
            const ordo_view *v = &args->out[o];
            if (v->dtype != dt)
                return ordo_fail(rc, "%s: dtype mismatch: A is %s but out %d is %s", name, ordo_dtype_name(dt), o + 1,
                                 ordo_dtype_name(v->dtype));
            int ok = v->ndim == nb;
            for (int d = 0; ok && d < nb; d++) ok = v->shape[d] == A->shape[d];
            if (!ok)
                return ordo_fail(rc, "%s: out %d of shape %s must be A's batch dims (A is %s)", name, o + 1,
                                 cpu_shape_str(v, s1, sizeof s1), cpu_shape_str(A, s2, sizeof s2));
            if ((r = cpu_check_writable(rc, name, v))) return r;
        }
    }
    /* the scratch of one matrix: n*n for A's factors, n*k for B (modes 3
     * and 4: n*n more for C and 3n for two vectors and a permutation) */
    if (n > 0 && (n > INT64_MAX / 32 / n || (k > 0 && n > (INT64_MAX / 32 - n * n) / k)))
        return ordo_fail(rc, "%s: matrices of %lld x %lld are too large", name, (long long)n, (long long)n);
    p->mode = mode, p->nb = nb, p->name = name, p->n = n, p->k = k, p->batch = batch;
    return 0;
}

static int k_linalg_lu(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_linalg_plan p;
    const int r = cpu_check_linalg_lu(rc, args, &p);
    if (r) return r;
    const int mode = p.mode, nb = p.nb;
    const char *name = p.name;
    const int64_t n = p.n, k = p.k, batch = p.batch;
    const ordo_view *A = &args->in[0], *B = mode == 0 ? &args->in[1] : NULL;
    const int dt = A->dtype;
    if (batch == 0) return 0;
    const int64_t extra = mode >= 3 ? n * n + 3 * n : 0;
    double *a = malloc((size_t)(n * n + n * k + extra + 1) * sizeof *a);
    if (!a) return ordo_fail(rc, "%s: out of memory for a %lld x %lld matrix", name, (long long)n, (long long)n);
    double *b = a + n * n;
    const int64_t ar = A->strides[nb], ac = A->strides[nb + 1];
    for (int64_t e = 0; e < batch; e++) {
        const char *pa = (const char *)A->data + batch_offset(A, nb, e) * (int64_t)ordo_dtype_size(dt);
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < n; c++) a[i * n + c] = load(A, pa, i * ar + c * ac);
        if (mode >= 3) {
            double *cm = b + n * n;
            cofactor(a, b, cm + n * n, cm, n, mode);
            const ordo_view *C = &args->out[0];
            char *pc = (char *)C->data + batch_offset(C, nb, e) * (int64_t)ordo_dtype_size(dt);
            const int64_t cr = C->strides[nb], cc = C->strides[nb + 1];
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) store(C, pc, i * cr + j * cc, cm[i * n + j]);
            continue;
        }
        if (mode == 2) {
            int sign;
            double det = 0;
            if (lu(a, NULL, n, 0, &sign) < 0) {
                det = sign;
                for (int64_t i = 0; i < n; i++) det *= a[i * n + i];
            }
            const ordo_view *o = &args->out[0];
            store(o, o->data, batch_offset(o, nb, e), det);
            continue;
        }
        if (mode == 1) {
            int sign;
            const int64_t z = lu(a, NULL, n, 0, &sign);
            double s = sign, la = 0;
            if (z >= 0) {
                s = 0, la = -INFINITY;
            } else {
                for (int64_t i = 0; i < n; i++) {
                    const double u = a[i * n + i];
                    if (u < 0) s = -s;
                    la += log(fabs(u));
                }
                if (isnan(la)) s = NAN; /* a NaN in A */
            }
            const ordo_view *so = &args->out[0], *lo = &args->out[1];
            store(so, so->data, batch_offset(so, nb, e), s);
            store(lo, lo->data, batch_offset(lo, nb, e), la);
            continue;
        }
        const char *pb = (const char *)B->data + batch_offset(B, nb, e) * (int64_t)ordo_dtype_size(dt);
        const int64_t br = B->strides[nb], bc = B->strides[nb + 1];
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < k; c++) b[i * k + c] = load(B, pb, i * br + c * bc);
        int sign;
        const int64_t z = lu(a, b, n, k, &sign);
        if (z >= 0) {
            free(a);
            if (batch == 1)
                return ordo_fail(rc, "%s: the matrix is singular (a zero pivot in column %lld)", name,
                                 (long long)z + 1);
            return ordo_fail(rc, "%s: matrix %lld of the batch (of %lld, counting from 1) is singular", name,
                             (long long)e + 1, (long long)batch);
        }
        /* back substitution, in place in b */
        for (int64_t i = n - 1; i >= 0; i--) {
            const double piv = a[i * n + i];
            for (int64_t c = 0; c < k; c++) {
                double s = b[i * k + c];
                for (int64_t j = i + 1; j < n; j++) s -= a[i * n + j] * b[j * k + c];
                b[i * k + c] = s / piv;
            }
        }
        const ordo_view *X = &args->out[0];
        char *px = (char *)X->data + batch_offset(X, nb, e) * (int64_t)ordo_dtype_size(dt);
        const int64_t xr = X->strides[nb], xc = X->strides[nb + 1];
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < k; c++) store(X, px, i * xr + c * xc, b[i * k + c]);
    }
    free(a);
    return 0;
}

void cpu_register_linalg(void) {
    static const cpu_kernel_entry t[] = {
        {"linalg_lu", k_linalg_lu},
    };
    CPU_REGISTER_TABLE(t);
}
