/*
 * matmul.c - y = a @ b, 2-d (M x K)(K x N) or batched (B x M x K)(B x K x N);
 * a 2-d operand beside a 3-d one, or a batch dim of size 1, is shared by
 * every batch (stride 0).
 *
 * float32/float64 go to OpenBLAS (cblas_sgemm / cblas_dgemm) on the views'
 * own memory whenever each matrix has a unit stride in one of its two dims:
 * a row-major view is passed as is, a column-major one (a transpose) as
 * CblasTrans with the other stride as leading dim, and an output that is
 * column-major makes the whole call column-major.  Only a matrix with no
 * unit stride (e.g. a stride-0 broadcast, or every other column) is first
 * copied into a contiguous scratch buffer.  Integer dtypes use plain loops
 * with wrapping arithmetic.
 *
 * The output must not overlap a or b (BLAS reads them while writing it).
 *
 * Threads: parallelism comes from the engine (independent ops run on its
 * workers at once), so BLAS is told to run each call on the calling worker
 * alone (ORDO_BLAS_THREADS=n overrides, e.g. for one big product on an
 * otherwise idle machine).  OpenBLAS's own pool would otherwise put
 * cores x workers threads on the cores, and its spin-waits are invisible to
 * ThreadSanitizer, which then reports its writes as races.
 */
#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* (cpu_internal.h's, shared with the CUDA matmul) */
typedef cpu_mat mat;

int cpu_mat_row_major(const cpu_mat *m, int64_t *ld) {
    const int64_t need = m->cols > 1 ? m->cols : 1;
    if (m->cols > 1 && m->cs != 1) return 0; /* strides of size-1 dims never matter */
    if (m->rows <= 1) {
        *ld = need;
        return 1;
    }
    if (m->rs < need || m->rs > INT_MAX) return 0;
    *ld = m->rs;
    return 1;
}

int cpu_mat_col_major(const cpu_mat *m, int64_t *ld) {
    const int64_t need = m->rows > 1 ? m->rows : 1;
    if (m->rows > 1 && m->rs != 1) return 0;
    if (m->cols <= 1) {
        *ld = need;
        return 1;
    }
    if (m->cs < need || m->cs > INT_MAX) return 0;
    *ld = m->cs;
    return 1;
}

int cpu_mat_operand(const cpu_mat *m, int colmajor, int *transposed, int64_t *ld) {
    if (colmajor ? cpu_mat_col_major(m, ld) : cpu_mat_row_major(m, ld)) {
        *transposed = 0;
        return 1;
    }
    if (colmajor ? cpu_mat_row_major(m, ld) : cpu_mat_col_major(m, ld)) {
        *transposed = 1;
        return 1;
    }
    return 0;
}

/* Copies m into dst, row-major contiguous, and makes m describe dst. */
static void pack(mat *m, char *dst, int64_t es) {
    for (int64_t i = 0; i < m->rows; i++)
        for (int64_t j = 0; j < m->cols; j++)
            memcpy(dst + (i * m->cols + j) * es, m->p + (i * m->rs + j * m->cs) * es, (size_t)es);
    m->p = dst;
    m->rs = m->cols;
    m->cs = 1;
}

/* How one operand is handed to gemm in the given order. */
static int operand(const mat *m, int colmajor, enum CBLAS_TRANSPOSE *tr, int64_t *ld) {
    int t;
    if (!cpu_mat_operand(m, colmajor, &t, ld)) return 0;
    *tr = t ? CblasTrans : CblasNoTrans;
    return 1;
}

/* Scratch for packed copies, grown on demand and reused across batches. */
typedef struct scratch {
    char *a, *b, *y;
} scratch;

static int gemm_float(const ordo_run_ctx *rc, int dtype, mat A, mat Bm, mat Y, int64_t K, scratch *sc) {
    const int64_t es = (int64_t)ordo_dtype_size(dtype);
    const int64_t M = Y.rows, N = Y.cols;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return ordo_fail(rc, "matmul: dims %lld x %lld x %lld too large for BLAS", (long long)M,
                         (long long)K, (long long)N);
    int64_t ldy = 0, lda = 0, ldb = 0;
    int colmajor = 0;
    mat Yw = Y; /* where gemm writes */
    if (!cpu_mat_row_major(&Yw, &ldy)) {
        if (cpu_mat_col_major(&Yw, &ldy)) {
            colmajor = 1;
        } else {
            if (!sc->y && !(sc->y = malloc((size_t)(M * N * es)))) goto oom;
            Yw.p = sc->y;
            Yw.rs = N;
            Yw.cs = 1;
            cpu_mat_row_major(&Yw, &ldy);
        }
    }
    enum CBLAS_TRANSPOSE ta = CblasNoTrans, tb = CblasNoTrans;

    if (!operand(&A, colmajor, &ta, &lda)) {
        if (!sc->a && !(sc->a = malloc((size_t)(M * K * es)))) goto oom;
        pack(&A, sc->a, es);
        operand(&A, colmajor, &ta, &lda);
    }
    if (!operand(&Bm, colmajor, &tb, &ldb)) {
        if (!sc->b && !(sc->b = malloc((size_t)(K * N * es)))) goto oom;
        pack(&Bm, sc->b, es);
        operand(&Bm, colmajor, &tb, &ldb);
    }
    const enum CBLAS_ORDER order = colmajor ? CblasColMajor : CblasRowMajor;
    if (dtype == ORDO_F32)
        cblas_sgemm(order, ta, tb, (int)M, (int)N, (int)K, 1.0f, (const float *)A.p, (int)lda,
                    (const float *)Bm.p, (int)ldb, 0.0f, (float *)Yw.p, (int)ldy);
    else
        cblas_dgemm(order, ta, tb, (int)M, (int)N, (int)K, 1.0, (const double *)A.p, (int)lda,
                    (const double *)Bm.p, (int)ldb, 0.0, (double *)Yw.p, (int)ldy);
    if (Yw.p != Y.p) /* unpack the scratch result into the strided output */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                memcpy(Y.p + (i * Y.rs + j * Y.cs) * es, Yw.p + (i * N + j) * es, (size_t)es);
    return 0;
oom:
    return ordo_fail(rc, "matmul: out of memory for a packed copy (%lld x %lld x %lld)",
                     (long long)M, (long long)K, (long long)N);
}

/* Integers: y[i, :] = sum_k a[i, k] * b[k, :], accumulated modulo 2^64 in a
 * row buffer (so a strided y is written once per element), then wrapped to
 * the dtype: the same result as wrapping after every operation. */
#define DEF_IGEMM(SFX, T)                                                                   \
    static void igemm_##SFX(mat A, mat Bm, mat Y, int64_t K, uint64_t *acc) {               \
        const int64_t M = Y.rows, N = Y.cols;                                               \
        for (int64_t i = 0; i < M; i++) {                                                   \
            for (int64_t j = 0; j < N; j++) acc[j] = 0;                                     \
            for (int64_t k = 0; k < K; k++) {                                               \
                const uint64_t av = (uint64_t)(int64_t)((const T *)A.p)[i * A.rs + k * A.cs]; \
                const T *br = (const T *)Bm.p + k * Bm.rs;                                  \
                if (Bm.cs == 1)                                                             \
                    for (int64_t j = 0; j < N; j++) acc[j] += av * (uint64_t)(int64_t)br[j]; \
                else                                                                        \
                    for (int64_t j = 0; j < N; j++)                                         \
                        acc[j] += av * (uint64_t)(int64_t)br[j * Bm.cs];                    \
            }                                                                               \
            T *yr = (T *)Y.p + i * Y.rs;                                                    \
            for (int64_t j = 0; j < N; j++) yr[j * Y.cs] = (T)acc[j];                       \
        }                                                                                   \
    }
DEF_IGEMM(i32, int32_t)
DEF_IGEMM(i64, int64_t)
DEF_IGEMM(u8, uint8_t)

/* The last two dims of v as a matrix, and the batch stride (0 when 2-d or
 * the batch dim has size 1: shared by every batch). */
static mat mat_of(const ordo_view *v, int64_t *bstride) {
    const int nd = v->ndim;
    mat m = {v->data, v->shape[nd - 2], v->shape[nd - 1], v->strides[nd - 2], v->strides[nd - 1]};
    *bstride = nd == 3 && v->shape[0] > 1 ? v->strides[0] : 0;
    return m;
}

int cpu_check_matmul(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_matmul_plan *p) {
    int r = cpu_check_args(rc, "matmul", args, 2, 1);
    if (r) return r;
    const ordo_view *a = &args->in[0], *b = &args->in[1], *y = &args->out[0];
    char sa[160], sb[160], sy[160];
    if (a->dtype != b->dtype || a->dtype != y->dtype)
        return ordo_fail(rc, "matmul: dtype mismatch: a %s, b %s, out %s", ordo_dtype_name(a->dtype),
                         ordo_dtype_name(b->dtype), ordo_dtype_name(y->dtype));
    if (a->ndim < 2 || a->ndim > 3 || b->ndim < 2 || b->ndim > 3)
        return ordo_fail(rc, "matmul: a %s and b %s must be 2-d or 3-d", cpu_shape_str(a, sa, sizeof sa),
                         cpu_shape_str(b, sb, sizeof sb));
    const int batched = a->ndim == 3 || b->ndim == 3;
    const int64_t B = batched ? (a->ndim == 3 && a->shape[0] != 1 ? a->shape[0]
                                 : b->ndim == 3 ? b->shape[0] : 1)
                              : 1;
    p->a = mat_of(a, &p->sba);
    p->b = mat_of(b, &p->sbb);
    const int64_t M = p->a.rows, K = p->a.cols, N = p->b.cols;
    const int bad_batch = (a->ndim == 3 && a->shape[0] != B && a->shape[0] != 1) ||
                          (b->ndim == 3 && b->shape[0] != B && b->shape[0] != 1);
    const int bad_out = y->ndim != (batched ? 3 : 2) || (batched && y->shape[0] != B) ||
                        y->shape[y->ndim - 2] != M || y->shape[y->ndim - 1] != N;
    if (p->b.rows != K || bad_batch || bad_out)
        return ordo_fail(rc, "matmul: shape mismatch: a %s, b %s, out %s", cpu_shape_str(a, sa, sizeof sa),
                         cpu_shape_str(b, sb, sizeof sb), cpu_shape_str(y, sy, sizeof sy));
    if ((r = cpu_check_writable(rc, "matmul", y))) return r;
    p->y = mat_of(y, &p->sby);
    if (batched) p->sby = y->strides[0]; /* every batch of y is written */
    p->B = B;
    p->M = M;
    p->K = K;
    p->N = N;
    return 0;
}

static int k_matmul(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_matmul_plan pl;
    int r = cpu_check_matmul(rc, args, &pl);
    if (r) return r;
    const ordo_view *a = &args->in[0], *y = &args->out[0];
    const mat A = pl.a, Bm = pl.b, Y = pl.y;
    const int64_t sba = pl.sba, sbb = pl.sbb, sby = pl.sby, B = pl.B, M = pl.M, K = pl.K, N = pl.N;
    if (B == 0 || M == 0 || N == 0) return 0;
    if (K == 0) { /* an empty sum: zeros, which gemm might not write */
        static const uint64_t zero = 0;
        cpu_fill_view(y, &zero);
        return 0;
    }
    const int64_t es = (int64_t)ordo_dtype_size(a->dtype);

    if (cpu_dtype_is_float(a->dtype)) {
        scratch sc = {NULL, NULL, NULL};
        r = 0;
        for (int64_t i = 0; i < B && !r; i++) {
            mat Ai = A, Bi = Bm, Yi = Y;
            Ai.p += i * sba * es;
            Bi.p += i * sbb * es;
            Yi.p += i * sby * es;
            r = gemm_float(rc, a->dtype, Ai, Bi, Yi, K, &sc);
        }
        free(sc.a);
        free(sc.b);
        free(sc.y);
        return r;
    }
    uint64_t *acc = malloc((size_t)N * sizeof *acc);
    if (!acc) return ordo_fail(rc, "matmul: out of memory for a row of %lld", (long long)N);
    for (int64_t i = 0; i < B; i++) {
        mat Ai = A, Bi = Bm, Yi = Y;
        Ai.p += i * sba * es;
        Bi.p += i * sbb * es;
        Yi.p += i * sby * es;
        switch (a->dtype) {
        case ORDO_I32: igemm_i32(Ai, Bi, Yi, K, acc); break;
        case ORDO_I64: igemm_i64(Ai, Bi, Yi, K, acc); break;
        default: igemm_u8(Ai, Bi, Yi, K, acc); break;
        }
    }
    free(acc);
    return 0;
}

/* OpenBLAS's own; declared here too so that a netlib cblas.h still builds
 * (the Makefile links -lopenblas either way). */
void openblas_set_num_threads(int num_threads);

void cpu_register_matmul(void) {
    const char *env = getenv("ORDO_BLAS_THREADS");
    const int n = env ? atoi(env) : 1;
    openblas_set_num_threads(n > 0 ? n : 1);
    static const cpu_kernel_entry t[] = {
        {"matmul", k_matmul},
    };
    CPU_REGISTER_TABLE(t);
}
