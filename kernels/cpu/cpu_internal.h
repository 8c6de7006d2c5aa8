/*
 * cpu_internal.h - shared helpers of the CPU kernels (the .c files beside it).
 *
 * The heart of it is a strided N-d iterator in the style of NumPy's ufunc
 * loops: up to CPU_MAX_OPS operands of one shape are walked together.  The
 * iterator first drops size-1 dims, orders the dims so that the first
 * operand (the output) is walked in memory order, and merges dims that are
 * contiguous in every operand.  A contiguous tensor therefore becomes one
 * 1-d row however many dims it has, and the "inner loop" a kernel supplies
 * sees (n, pointers, element strides) for each row.  Inner loops test for
 * unit strides and run a tight loop in that case, a strided one otherwise.
 *
 * Note for whoever edits this header: the top-level Makefile only tracks
 * src/ headers as dependencies, so after changing this file run `make clean`
 * (or touch the .c files here) before building.
 */
#ifndef ORDO_CPU_INTERNAL_H
#define ORDO_CPU_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ordo_kernel.h"

/* where: out, cond, x, y; gather: out, index, x. */
#define CPU_MAX_OPS 4

/* Inner loop over one row of n elements.  p[k] points at the row's first
 * element of operand k, s[k] is operand k's stride in elements (0 for a
 * broadcast operand).  Returns 0, or nonzero to stop the iteration (the
 * kernel then reports the reason it left in ctx). */
typedef int (*cpu_loop_fn)(int64_t n, char *const *p, const int64_t *s, void *ctx);

typedef struct cpu_iter {
    int nop;
    int nd;        /* dims after coalescing, >= 1 */
    int64_t numel; /* 0: run does nothing */
    int64_t shape[ORDO_MAX_DIMS];                    /* outermost first */
    int64_t stride[CPU_MAX_OPS][ORDO_MAX_DIMS];      /* in elements */
    int64_t bstride[CPU_MAX_OPS][ORDO_MAX_DIMS];     /* in bytes */
    char *ptr[CPU_MAX_OPS]; /* base pointers; callers may move them between runs */
} cpu_iter;

/* Keep the logical (row-major) order of the dims instead of reordering them
 * by the first operand's strides: for kernels whose result depends on the
 * visiting order (flat argmax indices, random streams). */
#define CPU_ITER_KEEP_ORDER 1

/* Sets up an iteration of nop operands over one shape.  strides[k] are
 * operand k's strides (elements) for the ndim dims, esize[k] its element
 * size in bytes. */
void cpu_iter_init(cpu_iter *it, int nop, int ndim, const int64_t *shape, char *const *ptr,
                   const int *esize, const int64_t *const *strides, int flags);
/* The same for views that all have v[0]'s shape (the caller checked it). */
void cpu_iter_init_views(cpu_iter *it, int nop, const ordo_view *const *v, int flags);
/* Calls fn for every row; returns the first nonzero value fn returned. */
int cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx);
/* The same for elementwise loops (operand 0 the output, rows independent,
 * ctx only read): an iteration of CPU_PAR_MIN elements or more is split
 * into chunks of about CPU_PAR_GRAIN that the pool's idle workers share
 * (ordo_parallel_for).  Large elementwise ops are bound by memory
 * bandwidth, which a second core nearly doubles here. */
#define CPU_PAR_GRAIN 32768
#define CPU_PAR_MIN (4 * CPU_PAR_GRAIN)
int cpu_iter_run_parallel(const cpu_iter *it, cpu_loop_fn fn, void *ctx);
/* fn over n items of inner elements each: split as above when there are
 * CPU_PAR_MIN elements or more, else fn(0, n, ctx) at once. */
int cpu_parallel_for(int64_t n, int64_t inner, ordo_chunk_fn fn, void *ctx);

/* numel when the nop views are well formed, all of v[0]'s shape, non-empty
 * and each dense in row-major order (one run with unit strides); else -1.
 * A kernel that gets a count may call its loop once with unit strides, after
 * checking what its full path checks beyond the views (dtypes, counts). */
int64_t cpu_dense_numel(int nop, const ordo_view *const *v);
/* The strides a loop gets for such a run. */
extern const int64_t cpu_unit_strides[CPU_MAX_OPS];
/* 1 when args exists and holds at least nin inputs and nout outputs, within
 * the limits (what cpu_check_args checks before the views). */
static inline int cpu_args_fit(const ordo_kernel_args *a, int nin, int nout) {
    return a && a->nin >= nin && a->nout >= nout && a->nin <= ORDO_KERNEL_MAX_IN &&
           a->nout <= ORDO_KERNEL_MAX_OUT;
}

/* ---- checks shared by the kernels ------------------------------------ */

/* 0 when the view is well formed (ndim 0..8, shapes >= 0, dtype known,
 * data non-NULL when it has elements); else fails the op naming kernel and
 * what ("x", "out"...). */
int cpu_check_view(const ordo_run_ctx *rc, const char *kernel, const char *what, const ordo_view *v);
/* Checks nin/nout and every view; 0 or the failure. */
int cpu_check_args(const ordo_run_ctx *rc, const char *kernel, const ordo_kernel_args *a, int nin,
                   int nout);
int cpu_same_shape(const ordo_view *a, const ordo_view *b);
/* "[2, 3]" into buf (for messages). */
const char *cpu_shape_str(const ordo_view *v, char *buf, size_t n);
/* Fails unless every view in v has v[0]'s shape; names the pair that differs. */
int cpu_check_same_shapes(const ordo_run_ctx *rc, const char *kernel, const ordo_view *const *v,
                          const char *const *names, int n);
/* An output whose stride is 0 on a dim of size > 1 would be written several
 * times per element: the tensor layer must never hand one to a kernel. */
int cpu_check_writable(const ordo_run_ctx *rc, const char *kernel, const ordo_view *v);
int cpu_fail_dtype(const ordo_run_ctx *rc, const char *kernel, int dtype);
/* *o = v without dim d (the view of everything a reduction over d keeps). */
void cpu_view_drop_dim(const ordo_view *v, int d, ordo_view *o);
/* Row-major element strides for shape (for scratch buffers). */
void cpu_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);

static inline int cpu_dtype_is_float(int dt) { return dt == ORDO_F32 || dt == ORDO_F64; }

/* v as an error message shows it (%g): a NaN without its sign bit, which
 * Lua's 0/0 sets, so that it reads "nan" and not "-nan". */
static inline double cpu_shown(double v) { return isnan(v) ? fabs(v) : v; }

/* ---- scalar conversions ----------------------------------------------- */

/* Marks the few pure helpers here that the CUDA kernels (kernels/cuda/,
 * which include this header) also call from device code, so that both
 * devices convert with one definition; plain static inline in C. */
#ifdef __CUDACC__
#define CPU_HOST_DEVICE __host__ __device__
#else
#define CPU_HOST_DEVICE
#endif

/* Float -> integer conversions truncate toward zero and saturate at the
 * target's range, NaN giving 0: a plain C cast is undefined behaviour out of
 * range, and saturation is what a user expects from to(int32).  Integer ->
 * integer conversions wrap (two's complement), as in C, NumPy and Torch. */
CPU_HOST_DEVICE static inline int32_t cpu_sat_i32(double v) {
    if (!(v == v)) return 0;
    if (v <= -2147483648.0) return INT32_MIN;
    if (v >= 2147483647.0) return INT32_MAX;
    return (int32_t)v;
}
CPU_HOST_DEVICE static inline int64_t cpu_sat_i64(double v) {
    if (!(v == v)) return 0;
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775808.0) return INT64_MAX; /* 2^63 is the first double past max */
    return (int64_t)v;
}
CPU_HOST_DEVICE static inline uint8_t cpu_sat_u8(double v) {
    if (!(v == v) || v <= 0) return 0;
    if (v >= 255.0) return 255;
    return (uint8_t)v;
}

/* A scalar in the kernel args, converted to a dtype, for the kernels that
 * hand it to a loop as a stride-0 operand. */
typedef union cpu_scalar {
    float f32;
    double f64;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
} cpu_scalar;

/* How fill-like kernels (fill, masked_fill, arange) convert their double:
 * integer dtypes truncate toward zero, and a NaN or a value outside the
 * dtype's range fails (named with kernel) rather than saturating silently. */
int cpu_scalar_fill_value(const ordo_run_ctx *rc, const char *kernel, int dtype, double v,
                          cpu_scalar *out);
/* Stores v (already checked or saturated) into one element of dtype. */
void cpu_store_double(int dtype, void *p, double v);
double cpu_load_double(int dtype, const void *p);

/* NaN-propagating max / min (a NaN operand wins, as in torch.maximum and
 * torch.max); for integers the a != a test folds away. */
#define CPU_MAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define CPU_MIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))

/* ---- a vectorisable expf ----------------------------------------------- */

static inline uint32_t cpu_fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float cpu_bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* c ? a : b by bit masks: gcc -O2 does not if-convert float ternaries in a
 * loop, and one branch per element keeps the whole loop scalar. */
static inline float cpu_fsel(int c, float a, float b) {
    const uint32_t m = 0u - (uint32_t)c;
    return cpu_bitsf((cpu_fbits(a) & m) | (cpu_fbits(b) & ~m));
}

/* expf for float32 kernels (exp, sigmoid, softmax).  Why not libm: a call
 * per element keeps the loop scalar; this branch-free version (Cephes'
 * polynomial, Cody-Waite reduction, 2^n built from bits in two halves so
 * that subnormal results and overflow to inf come out right) vectorises and
 * runs ~3x faster.  Checked against exp() in double over every float in
 * [-110, 90]: at most 1 ulp from the correctly rounded result; NaN, +-inf,
 * overflow and underflow as libm. */
static inline float cpu_expf(float x) {
    float xc = cpu_fsel(x > -104.0f, x, -104.0f); /* NaN -> -104, result fixed below */
    xc = cpu_fsel(xc < 88.8f, xc, 88.8f);
    const float t = xc * 1.44269504088896341f + 12582912.0f; /* + 1.5 * 2^23 rounds to integer */
    const float nf = t - 12582912.0f;
    const float r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t n = (int32_t)nf, n1 = n / 2, n2 = n - n1; /* n in [-150, 128] */
    const float res = p * cpu_bitsf((uint32_t)(n1 + 127) << 23) * cpu_bitsf((uint32_t)(n2 + 127) << 23);
    return cpu_fsel(x != x, x, res);
}

/* ---- one tiny loop shared by several files ---------------------------- */

/* Fills the view's elements with the bytes of *value (esize bytes each). */
void cpu_fill_view(const ordo_view *v, const void *value);

/* ---- argument checks shared with the CUDA kernels ---------------------- */

/* Each kernel's host-side validation, defined beside its CPU kernel and
 * called by both the CPU kernel and its CUDA twin (in kernels/cuda/), so
 * that the two devices accept the same arguments and fail with the same
 * messages in the same order.  Each returns 0 or the ordo_fail result and,
 * on success, fills the out parameters with what the checks derived. */

/* copy.c.  fill: *v is the value as an element of out's dtype. */
int cpu_check_fill(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_scalar *v);
/* copy: out and x of one shape, any two dtypes; out writable. */
int cpu_check_copy(const ordo_run_ctx *rc, const ordo_kernel_args *a);
/* arange: out[i] = start + i * step over the 1-d out. */
typedef struct cpu_arange_plan {
    double start, step;
    int64_t n, stride; /* out's length (0: nothing to do) and stride */
    int integral;      /* integer out, integral start and step: exact integer steps */
} cpu_arange_plan;
int cpu_check_arange(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_arange_plan *p);

/* elementwise.c: the binary arithmetic kernels.  mode 0: y = a op b;
 * 1: y = a op s; 2: y = s op a.  float_only: the op has no integer version
 * (pow); int_div: integer division (the scalar must fit the dtype, and
 * mode 1's must not be 0).  *s: the scalar as an element of a's dtype
 * (modes 1 and 2; zeroed for mode 0). */
int cpu_check_binary(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int mode,
                     int float_only, int int_div, cpu_scalar *s);

/* compare.c: eq ne lt le gt ge, indexing cpu_cmp_names (and the *_scalar
 * forms' cpu_cmp_scalar_names). */
enum { CPU_CMP_EQ, CPU_CMP_NE, CPU_CMP_LT, CPU_CMP_LE, CPU_CMP_GT, CPU_CMP_GE, CPU_CMP_N };
/* X(name, op) for each comparison, in that order: both devices define and
 * register their kernels name and name_scalar from it. */
#define CPU_CMP_OPS(X) \
    X(eq, CPU_CMP_EQ) X(ne, CPU_CMP_NE) X(lt, CPU_CMP_LT) X(le, CPU_CMP_LE) X(gt, CPU_CMP_GT) X(ge, CPU_CMP_GE)
extern const char *const cpu_cmp_names[CPU_CMP_N];
extern const char *const cpu_cmp_scalar_names[CPU_CMP_N];
int cpu_check_cmp(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op);
int cpu_check_cmp_scalar(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op);
/* An integer tensor of dtype compared (op) with the double s, exactly:
 * -1 when the comparison is x op *bound (*bound within the dtype's range),
 * else the constant result 0 / 1 (no element can change it). */
int cpu_cmp_int_bound(int dtype, double s, int op, int64_t *bound);
int cpu_check_where(const ordo_run_ctx *rc, const ordo_kernel_args *args);
/* check_range: x and out float, one dtype and shape, both contiguous (one
 * flat run of *n elements); *lo, *hi the bounds s0, s1. */
int cpu_check_check_range(const ordo_run_ctx *rc, const ordo_kernel_args *args, int64_t *n, double *lo,
                          double *hi);
/* *val: the fill value as an element of out's dtype. */
int cpu_check_masked_fill(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_scalar *val);

/* unary.c: y = f(a); int_ok: the op takes int32/int64 too (neg abs relu). */
int cpu_check_unary(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int int_ok);

/* reduce.c: the reductions, indexing cpu_reduce_names. */
enum { CPU_RED_SUM, CPU_RED_MEAN, CPU_RED_MAX, CPU_RED_MIN, CPU_RED_ARGMAX, CPU_RED_ARGMIN };
/* X(name, op) for each reduction, in that order (as CPU_CMP_OPS). */
#define CPU_REDUCE_OPS(X)                                                    \
    X(sum, CPU_RED_SUM) X(mean, CPU_RED_MEAN) X(max, CPU_RED_MAX) X(min, CPU_RED_MIN) \
    X(argmax, CPU_RED_ARGMAX) X(argmin, CPU_RED_ARGMIN)
extern const char *const cpu_reduce_names[];
typedef struct cpu_reduce_plan {
    int all;          /* over all dims: one output */
    int dim;          /* else the reduced dim */
    ordo_view xo, yo; /* (dim) x without dim; y without it (or as given when squeezed) */
    int64_t n;        /* elements per output: the dim's length, or x's numel */
    int64_t nout;     /* outputs; 0: nothing to do */
} cpu_reduce_plan;
int cpu_check_reduce(const ordo_run_ctx *rc, const ordo_kernel_args *args, int op, cpu_reduce_plan *p);
/* Whether dim d has the smallest |stride| among x's dims of size > 1: its
 * rows are then read sequentially. */
int cpu_dim_is_innermost(const ordo_view *x, int d);

/* softmax.c: softmax / log_softmax (name) along one dim, seen as nout rows
 * of n elements. */
typedef struct cpu_softmax_plan {
    int dim;
    ordo_view xo, yo;  /* x and y without dim: the rows' starts */
    int64_t n, sx, sy; /* row length; x's and y's strides along it (a 0-d x: one row of 1) */
    int64_t nout;
    int inner;         /* dim is x's innermost (cpu_dim_is_innermost) */
} cpu_softmax_plan;
int cpu_check_softmax(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                      cpu_softmax_plan *p);

/* lines.c: cumsum, cumprod and sort walk x line by line along iparam 0's dim.
 * out[0] has x's shape and dtype; with nout 2, out[1] is int64 indices of
 * that shape.  kept[k] is out0, out1 (x when nout is 1) and x without the
 * dim (where each line starts), step[k] their strides along it. */
typedef struct cpu_line_plan {
    int dim;
    int64_t n;          /* elements per line (a 0-d x: one line of 1) */
    ordo_view kept[3];
    int64_t step[3];
} cpu_line_plan;
int cpu_check_lines(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, int nout,
                    cpu_line_plan *pl);
/* cumprod_backward's: in x and g, out gx, one float dtype and shape;
 * kept[k] is gx, g and x without the dim. */
int cpu_check_lines_grad(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args,
                         cpu_line_plan *pl);

/* matmul.c.  One matrix of a view: rows x cols with element strides rs, cs. */
typedef struct cpu_mat {
    char *p;
    int64_t rows, cols, rs, cs;
} cpu_mat;
/* Can BLAS read m as row-major (unit column stride) / column-major (unit row
 * stride)?  1 and *ld (the leading dim, an int >= max(1, cols / rows)). */
int cpu_mat_row_major(const cpu_mat *m, int64_t *ld);
int cpu_mat_col_major(const cpu_mat *m, int64_t *ld);
/* How m is handed to a gemm of the given order (colmajor 0: row-major):
 * 1 with *transposed = 0 when it lies in that order, 1 when it lies
 * transposed; 0 when it has no unit stride (it must be packed first). */
int cpu_mat_operand(const cpu_mat *m, int colmajor, int *transposed, int64_t *ld);
typedef struct cpu_matmul_plan {
    cpu_mat a, b, y;       /* the first batch's matrices */
    int64_t sba, sbb, sby; /* batch strides (0 for an operand shared by every batch) */
    int64_t B, M, K, N;
} cpu_matmul_plan;
int cpu_check_matmul(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_matmul_plan *p);

/* random.c.  seed: out[0] is the 32-byte generator state. */
int cpu_check_seed(const ordo_run_ctx *rc, const ordo_kernel_args *args);
/* uniform, normal, bernoulli: out[0] the values, out[1] the generator
 * state (its seeding is checked where the state's bytes can be read). */
int cpu_check_rng_outputs(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args);
/* Then each kernel's dtype and scalars. */
int cpu_check_uniform(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *lo, double *hi);
int cpu_check_normal(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *mean, double *sd);
int cpu_check_bernoulli(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *p);

/* index.c.  Each derives the views of its walk: gather out[i] =
 * x0[i + index[i] * sd], scatter_add / index_add y0[i + index[i] * sd] +=
 * src[i] (x0 / y0 not moving along dim; index_select's and index_add's
 * idx0 the 1-d index broadcast over the other dims). */
int cpu_check_gather(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *x0);
int cpu_check_index_select(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *idx0,
                           ordo_view *x0);
int cpu_check_scatter_add(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *src0,
                          ordo_view *y0);
/* scatter: scatter_add's operands and checks (its name in the messages);
 * y0[i + index[i] * sd] = src[i] */
int cpu_check_scatter(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *src0,
                      ordo_view *y0);
int cpu_check_index_add(const ordo_run_ctx *rc, const ordo_kernel_args *a, int *dim, ordo_view *idx0,
                        ordo_view *y0);
/* The value of the first index (iparam 1: 0 or 1, checked by the above; 0
 * when not given). */
int cpu_index_base(const ordo_kernel_args *a);

/* conv.c: the geometry of a 2-d convolution or pooling window. */
typedef struct cpu_conv_geom {
    int64_t N, C, H, W; /* input */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int ceil_mode;  /* pooling: the output rounded up (Torch's ceil_mode) */
    int64_t oh, ow; /* output plane */
} cpu_conv_geom;
int cpu_check_im2col(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g);
int cpu_check_col2im(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g);
int cpu_check_max_pool2d(const ordo_run_ctx *rc, const ordo_kernel_args *a, cpu_conv_geom *g);
/* (the indices' range depends on the data: checked by each device) */
int cpu_check_max_pool2d_backward(const ordo_run_ctx *rc, const ordo_kernel_args *a);

/* optim.c */
int cpu_check_adam_step(const ordo_run_ctx *rc, const ordo_kernel_args *a);
int cpu_check_sgd_step(const ordo_run_ctx *rc, const ordo_kernel_args *a);

/* linalg.c: linalg_lu's checks, shared by its CUDA kernel.  The mode
 * (0 solve, 1 slogdet, 2 det, 3 det's gradient, 4 slogdet's), the op's
 * name for messages, the batch dims (nb, batch matrices of n x n) and k,
 * B's columns (0 for 1 and 2; n for 3 and 4, which factorise against I). */
typedef struct {
    int mode, nb;
    const char *name;
    int64_t n, k, batch;
} cpu_linalg_plan;
int cpu_check_linalg_lu(const ordo_run_ctx *rc, const ordo_kernel_args *args, cpu_linalg_plan *p);

/* ---- registration ------------------------------------------------------ */

void cpu_register_copy(void);
void cpu_register_elementwise(void);
void cpu_register_compare(void);
void cpu_register_unary(void);
void cpu_register_reduce(void);
void cpu_register_softmax(void);
void cpu_register_lines(void);
void cpu_register_matmul(void);
void cpu_register_linalg(void);
void cpu_register_random(void);
void cpu_register_index(void);
void cpu_register_conv(void);
void cpu_register_optim(void);

typedef struct cpu_kernel_entry {
    const char *name;
    ordo_kernel_fn fn;
} cpu_kernel_entry;

void cpu_register_table(const cpu_kernel_entry *t, int n);
#define CPU_REGISTER_TABLE(t) cpu_register_table((t), (int)(sizeof(t) / sizeof((t)[0])))

/* Called once by the registry (src/kernel_registry.c) before the first
 * register or lookup. */
void ordo_cpu_kernels_register(void);

/* Contiguous loops run in blocks of CPU_BLK elements: compute the block
 * into a local array, then store it.  Why: gcc 12 at -O2 vectorises only
 * loops whose vector code replaces the scalar code entirely (no alias
 * checks, no epilogue), so a plain y[i] = a[i] + b[i] over unknown n with a
 * y that may alias a (in-place ops) stays scalar.  A fixed-size block that
 * reads all its inputs before writing any output needs no alias check, so
 * it becomes SIMD code without restrict, pragmas or -O3. */
#define CPU_BLK 8

#endif
