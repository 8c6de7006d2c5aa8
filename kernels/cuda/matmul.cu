/*
 * matmul.cu - y = a @ b on the GPU, 2-d (M x K)(K x N) or batched
 * (B x M x K)(B x K x N): the twin of kernels/cpu/matmul.c, with its
 * operands, checks and messages (KERNELS.md).  A 2-d operand beside a 3-d
 * one, or a batch dim of size 1, is shared by every batch (batch stride 0).
 *
 * float32/float64 go to cuBLAS (cublasSgemm / cublasDgemm, and their
 * StridedBatched forms for a batch) on the worker's stream.  cuBLAS is
 * column-major; a row-major matrix is the column-major view of its
 * transpose, so for a row-major y we ask cuBLAS for y^T = b^T a^T, i.e.
 * gemm(b, a) with m = N and n = M, and for a column-major y (a transposed
 * view) for y = a b directly.  Each input is then passed as it lies:
 * whichever of its two strides is 1 decides between CUBLAS_OP_N and
 * CUBLAS_OP_T, the other stride being the leading dim (matmul.c's
 * cpu_mat_operand, shared).  Only a matrix with no unit
 * stride (a stride-0 broadcast, every other column...) is first copied into
 * contiguous scratch memory from cudaMallocAsync on the stream, and an
 * output with no unit stride is computed into scratch and copied out.
 * Integer dtypes use a plain kernel, one thread per output element, with
 * 64-bit wrapping accumulation (the CPU's result).
 *
 * cuBLAS handles: one per (thread, device).  GPU workers are long-lived
 * threads that each own one stream per device, so a thread_local table
 * creates a handle the first time a thread multiplies on a device (the only
 * call here that may synchronise), sets the op's stream on it before every
 * call, and destroys its handles when the thread exits.
 *
 * The output must not overlap a or b (cuBLAS reads them while writing it).
 */
#include <cublas_v2.h>
#include <limits.h>
#include <pthread.h>

#include "cuda_internal.cuh"

namespace {

/* ---- matrices: matmul.c's (cpu_mat and its helpers in cpu_internal.h) ---------- */

typedef cpu_mat mat;

/* How one operand is handed to gemm when the call is row-major (colmajor 0:
 * computing y^T) or column-major (computing y): in either case OP_N when
 * the matrix lies in the call's order, OP_T when it lies transposed. */
int operand(const mat *m, int colmajor, cublasOperation_t *op, int64_t *ld) {
    int t;
    if (!cpu_mat_operand(m, colmajor, &t, ld)) return 0;
    *op = t ? CUBLAS_OP_T : CUBLAS_OP_N;
    return 1;
}

/* ---- strided copies of batches of matrices ---------------------------------------------- */

struct mat3 {
    int64_t B, R, C;            /* batches, rows, cols */
    int64_t ds[3], ss[3];       /* destination and source strides (elements) */
};

/* dst[b, r, c] = src[b, r, c], or 0 when src is NULL; moved by bit pattern */
template <typename E>
__global__ void copy3_kernel(E *dst, const E *src, mat3 g, int64_t total) {
    CU_GRID_STRIDE(i, total) {
        const int64_t q = i / g.C, c = i - q * g.C, b = q / g.R, r = q - b * g.R;
        dst[b * g.ds[0] + r * g.ds[1] + c * g.ds[2]] = src ? src[b * g.ss[0] + r * g.ss[1] + c * g.ss[2]] : E(0);
    }
}

void copy3(cudaStream_t st, size_t es, void *dst, const void *src, const mat3 &g) {
    const int64_t total = g.B * g.R * g.C;
    if (total == 0) return;
    const unsigned nb = cu_blocks(total);
    switch (es) {
    case 8: copy3_kernel<uint64_t><<<nb, CU_THREADS, 0, st>>>((uint64_t *)dst, (const uint64_t *)src, g, total); break;
    case 4: copy3_kernel<uint32_t><<<nb, CU_THREADS, 0, st>>>((uint32_t *)dst, (const uint32_t *)src, g, total); break;
    default: copy3_kernel<uint8_t><<<nb, CU_THREADS, 0, st>>>((uint8_t *)dst, (const uint8_t *)src, g, total); break;
    }
}

/* ---- cuBLAS handles: one per (thread, device) ----------------------------------------------- */

/* The table is plain data, and a pthread key's destructor gives the handles
 * back when the thread exits.  A thread_local with a destructor would
 * register it through __cxa_thread_atexit at the thread's first matmul,
 * which takes the dynamic loader's lock - held by a main thread unloading
 * the library, whose destructor waits for the engine's pending ops, this
 * matmul among them: a deadlock at exit. */
struct handle_table {
    struct entry {
        int dev;
        cublasHandle_t h;
    } e[ORDO_MAX_DEVICES];
    int n;
};
thread_local handle_table t_handles;
pthread_key_t handles_key;
pthread_once_t handles_once = PTHREAD_ONCE_INIT;

void handles_release(void *arg) { /* the thread exits */
    handle_table *t = (handle_table *)arg;
    int cur = -1;
    cudaGetDevice(&cur);
    for (int i = 0; i < t->n; i++) {
        cudaSetDevice(t->e[i].dev);
        cublasSetStream(t->e[i].h, 0); /* the worker's stream may be gone already */
        cublasDestroy(t->e[i].h);
    }
    t->n = 0;
    if (cur >= 0) cudaSetDevice(cur);
    cudaGetLastError();
}

void handles_key_create(void) { pthread_key_create(&handles_key, handles_release); }

/* This thread's handle for the op's device, created on first use; 0 or the failure. */
int handle_for(const ordo_run_ctx *rc, cublasHandle_t *h) {
    const int dev = rc->ctx.dev_id;
    handle_table &t = t_handles;
    for (int i = 0; i < t.n; i++)
        if (t.e[i].dev == dev) {
            *h = t.e[i].h;
            return 0;
        }
    if (t.n == ORDO_MAX_DEVICES) return ordo_fail(rc, "matmul: too many cuBLAS handles in one thread");
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != dev) cudaSetDevice(dev); /* cuBLAS binds the current device */
    cublasStatus_t s = cublasCreate(h);
    if (s == CUBLAS_STATUS_ALLOC_FAILED) {
        /* The handle's workspace comes from CUDA, not from ordo's cache: on
         * a device full of cached blocks, give them back and try once more
         * (as cu_scratch_alloc does). */
        cudaGetLastError();
        dev_empty_cache_quiet(dev);
        s = cublasCreate(h);
    }
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaGetLastError();
        return ordo_fail(rc, "matmul: cannot create a cuBLAS handle on gpu(%d): %s", dev, cublasGetStatusString(s));
    }
    if (t.n == 0) { /* the thread's first handle: have them given back at its exit */
        pthread_once(&handles_once, handles_key_create);
        pthread_setspecific(handles_key, &t);
    }
    t.e[t.n].dev = dev;
    t.e[t.n].h = *h;
    t.n++;
    return 0;
}

/* ---- float32 / float64 through cuBLAS ---------------------------------------------------------- */

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *A,
                    int lda, long long sa, const float *B, int ldb, long long sb, float *C, int ldc, long long sc,
                    int batches) {
    const float one = 1.0f, zero = 0.0f;
    if (batches == 1) return cublasSgemm(h, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb, &zero, C, ldc, sc, batches);
}

cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const double *A,
                    int lda, long long sa, const double *B, int ldb, long long sb, double *C, int ldc, long long sc,
                    int batches) {
    const double one = 1.0, zero = 0.0;
    if (batches == 1) return cublasDgemm(h, ta, tb, m, n, k, &one, A, lda, B, ldb, &zero, C, ldc);
    return cublasDgemmStridedBatched(h, ta, tb, m, n, k, &one, A, lda, sa, B, ldb, sb, &zero, C, ldc, sc, batches);
}

/* Scratch buffers of one call, freed (stream-ordered) whatever happens. */
struct scratch {
    const ordo_run_ctx *rc;
    cudaStream_t st;
    void *p[3] = {NULL, NULL, NULL};
    int n = 0;
    void *get(size_t bytes) {
        void *q = NULL;
        if (cu_scratch_alloc(rc, &q, bytes)) return NULL;
        return p[n++] = q;
    }
    ~scratch() {
        for (int i = 0; i < n; i++) cu_scratch_free(rc, p[i]);
    }
};

/* Copies the nb batches of m (batch stride *sb) into contiguous scratch and
 * makes m describe the copy; false when out of memory. */
bool pack(scratch &sc, size_t es, mat *m, int64_t *sb, int64_t nb) {
    void *d = sc.get((size_t)(nb * m->rows * m->cols) * es);
    if (!d) return false;
    mat3 g = {nb, m->rows, m->cols, {m->rows * m->cols, m->cols, 1}, {*sb, m->rs, m->cs}};
    copy3(sc.st, es, d, m->p, g);
    m->p = (char *)d;
    m->rs = m->cols;
    m->cs = 1;
    *sb = nb > 1 ? m->rows * m->cols : 0;
    return true;
}

template <typename T>
int gemm_float(const ordo_run_ctx *rc, mat A, int64_t sba, mat Bm, int64_t sbb, mat Y, int64_t sby, int64_t B, int64_t K) {
    const size_t es = sizeof(T);
    const int64_t M = Y.rows, N = Y.cols;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return ordo_fail(rc, "matmul: dims %lld x %lld x %lld too large for BLAS", (long long)M, (long long)K,
                         (long long)N);
    cublasHandle_t h;
    int r = handle_for(rc, &h);
    if (r) return r;
    scratch sc;
    sc.rc = rc;
    sc.st = cu_stream(rc);

    int64_t ldy = 0, lda = 0, ldb = 0, sbw = sby;
    int colmajor = 0;
    cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N; /* set by operand() below */
    mat Yw = Y; /* where gemm writes */
    if (!cpu_mat_row_major(&Yw, &ldy)) {
        if (cpu_mat_col_major(&Yw, &ldy)) {
            colmajor = 1;
        } else { /* no unit stride: compute into contiguous scratch, copy out after */
            if (!(Yw.p = (char *)sc.get((size_t)(B * M * N) * es))) goto oom;
            Yw.rs = N;
            Yw.cs = 1;
            sbw = M * N;
            cpu_mat_row_major(&Yw, &ldy);
        }
    }
    if (!operand(&A, colmajor, &ta, &lda)) {
        if (!pack(sc, es, &A, &sba, sba ? B : 1)) goto oom;
        operand(&A, colmajor, &ta, &lda);
    }
    if (!operand(&Bm, colmajor, &tb, &ldb)) {
        if (!pack(sc, es, &Bm, &sbb, sbb ? B : 1)) goto oom;
        operand(&Bm, colmajor, &tb, &ldb);
    }
    {
        cublasStatus_t s = cublasSetStream(h, sc.st);
        /* batchCount is an int: batches beyond it in slices */
        for (int64_t b0 = 0; b0 < B && s == CUBLAS_STATUS_SUCCESS; b0 += INT_MAX) {
            const int nb = (int)(B - b0 < INT_MAX ? B - b0 : INT_MAX);
            const T *ap = (const T *)A.p + b0 * sba, *bp = (const T *)Bm.p + b0 * sbb;
            T *yp = (T *)Yw.p + b0 * sbw;
            for (int attempt = 0; attempt < 2; attempt++) {
                if (!colmajor) /* y^T (N x M, column-major) = b^T a^T */
                    s = gemm(h, tb, ta, (int)N, (int)M, (int)K, bp, (int)ldb, sbb, ap, (int)lda, sba, yp, (int)ldy,
                             sbw, nb);
                else /* y (M x N, column-major) = a b */
                    s = gemm(h, ta, tb, (int)M, (int)N, (int)K, ap, (int)lda, sba, bp, (int)ldb, sbb, yp, (int)ldy,
                             sbw, nb);
                /* A workspace cuBLAS takes at a call (a stream's first, on some
                 * versions) is refused before anything runs: after the cache
                 * is given back the call is whole to redo. */
                if (s != CUBLAS_STATUS_ALLOC_FAILED || attempt) break;
                cudaGetLastError();
                dev_empty_cache_quiet(rc->ctx.dev_id);
            }
        }
        if (s != CUBLAS_STATUS_SUCCESS) {
            cudaGetLastError();
            return ordo_fail(rc, "matmul: cuBLAS %s failed: %s", es == 4 ? "sgemm" : "dgemm", cublasGetStatusString(s));
        }
    }
    if (Yw.p != Y.p) { /* unpack the scratch result into the strided output */
        mat3 g = {B, M, N, {sby, Y.rs, Y.cs}, {M * N, N, 1}};
        copy3(sc.st, es, Y.p, Yw.p, g);
    }
    return cu_check_launch(rc, "matmul");
oom:
    return ordo_fail(rc, "matmul: out of memory for a packed copy (%lld x %lld x %lld)", (long long)M, (long long)K,
                     (long long)N);
}

/* ---- integers: plain kernel ------------------------------------------------------------------ */

struct igeom {
    int64_t M, N, K;
    int64_t a[3], b[3], y[3]; /* batch, row, col strides */
};

/* y[.., i, j] = sum_k a[.., i, k] * b[.., k, j], accumulated modulo 2^64
 * and wrapped to the dtype: the same result as wrapping after every step */
template <typename T>
__global__ void igemm_kernel(const T *a, const T *b, T *y, igeom g, int64_t total) {
    CU_GRID_STRIDE(i, total) {
        const int64_t q = i / g.N, j = i - q * g.N, bt = q / g.M, r = q - bt * g.M;
        const T *ar = a + bt * g.a[0] + r * g.a[1];
        const T *bc = b + bt * g.b[0] + j * g.b[2];
        unsigned long long acc = 0;
        for (int64_t k = 0; k < g.K; k++)
            acc += (unsigned long long)(long long)ar[k * g.a[2]] * (unsigned long long)(long long)bc[k * g.b[1]];
        y[bt * g.y[0] + r * g.y[1] + j * g.y[2]] = (T)acc;
    }
}

int k_matmul(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    cpu_matmul_plan pl;
    int r = cpu_check_matmul(rc, args, &pl);
    if (r) return r;
    const ordo_view *a = &args->in[0];
    const mat A = pl.a, Bm = pl.b, Y = pl.y;
    const int64_t sba = pl.sba, sbb = pl.sbb, sby = pl.sby, B = pl.B, M = pl.M, K = pl.K, N = pl.N;
    if (B == 0 || M == 0 || N == 0) return 0;
    const size_t es = ordo_dtype_size(a->dtype);
    cudaStream_t st = cu_stream(rc);
    if (K == 0) { /* an empty sum: zeros, which gemm might not write */
        mat3 g = {B, M, N, {sby, Y.rs, Y.cs}, {0, 0, 0}};
        copy3(st, es, Y.p, NULL, g);
        return cu_check_launch(rc, "matmul");
    }
    switch (a->dtype) {
    case ORDO_F32: return gemm_float<float>(rc, A, sba, Bm, sbb, Y, sby, B, K);
    case ORDO_F64: return gemm_float<double>(rc, A, sba, Bm, sbb, Y, sby, B, K);
    default: break;
    }
    igeom g = {M, N, K, {sba, A.rs, A.cs}, {sbb, Bm.rs, Bm.cs}, {sby, Y.rs, Y.cs}};
    const int64_t total = B * M * N;
    const unsigned nb = cu_blocks(total);
    switch (a->dtype) {
    case ORDO_I32: igemm_kernel<int32_t><<<nb, CU_THREADS, 0, st>>>((const int32_t *)A.p, (const int32_t *)Bm.p, (int32_t *)Y.p, g, total); break;
    case ORDO_I64: igemm_kernel<int64_t><<<nb, CU_THREADS, 0, st>>>((const int64_t *)A.p, (const int64_t *)Bm.p, (int64_t *)Y.p, g, total); break;
    default: igemm_kernel<uint8_t><<<nb, CU_THREADS, 0, st>>>((const uint8_t *)A.p, (const uint8_t *)Bm.p, (uint8_t *)Y.p, g, total); break;
    }
    return cu_check_launch(rc, "matmul");
}

} // namespace

extern "C" void cuda_register_matmul(void) {
    static const cpu_kernel_entry t[] = {
        {"matmul", k_matmul},
    };
    CU_REGISTER_TABLE(t);
}
