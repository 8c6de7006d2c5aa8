/*
 * iter.c - the strided N-d iterator and the checks every CPU kernel shares.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_internal.h"

void cpu_iter_init(cpu_iter *it, int nop, int ndim, const int64_t *shape, char *const *ptr,
                   const int *esize, const int64_t *const *strides, int flags) {
    it->nop = nop;
    for (int k = 0; k < nop; k++) it->ptr[k] = ptr[k];

    /* Keep the dims that matter: size-1 dims never move a pointer. */
    int perm[ORDO_MAX_DIMS];
    int nd = 0;
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) numel = 0;
    if (numel == 0) { /* nothing to visit; the other sizes may not even multiply within int64 */
        it->numel = it->shape[0] = 0;
        for (int k = 0; k < nop; k++) it->stride[k][0] = it->bstride[k][0] = 0;
        it->nd = 1;
        return;
    }
    for (int d = 0; d < ndim; d++) {
        numel *= shape[d];
        if (shape[d] != 1) perm[nd++] = d;
    }
    it->numel = numel;

    /* Walk the output in memory order: sort the dims by the first operand's
     * stride, largest outermost (stable insertion sort; at most 8 dims).  A
     * transposed output is then written sequentially, and merging below
     * finds runs that are contiguous in a permuted order. */
    if (!(flags & CPU_ITER_KEEP_ORDER)) {
        const int64_t *s0 = strides[0];
        for (int i = 1; i < nd; i++) {
            int d = perm[i];
            int64_t key = s0[d] < 0 ? -s0[d] : s0[d];
            int j = i - 1;
            while (j >= 0) {
                int64_t kj = s0[perm[j]] < 0 ? -s0[perm[j]] : s0[perm[j]];
                if (kj >= key) break;
                perm[j + 1] = perm[j];
                j--;
            }
            perm[j + 1] = d;
        }
    }

    /* Merge dim i into the next inner one when every operand steps through
     * them as one run: stride[outer] == stride[inner] * shape[inner]. */
    int out = 0;
    for (int i = 0; i < nd; i++) {
        int d = perm[i];
        if (out > 0) {
            int merge = 1;
            int prev = out - 1;
            for (int k = 0; k < nop && merge; k++)
                if (it->stride[k][prev] != strides[k][d] * shape[d]) merge = 0;
            if (merge) {
                it->shape[prev] *= shape[d];
                for (int k = 0; k < nop; k++) it->stride[k][prev] = strides[k][d];
                continue;
            }
        }
        it->shape[out] = shape[d];
        for (int k = 0; k < nop; k++) it->stride[k][out] = strides[k][d];
        out++;
    }
    if (out == 0) { /* one element: a row of length 1 with unit strides */
        it->shape[0] = 1;
        for (int k = 0; k < nop; k++) it->stride[k][0] = 1;
        out = 1;
    }
    it->nd = out;
    for (int k = 0; k < nop; k++)
        for (int d = 0; d < out; d++) it->bstride[k][d] = it->stride[k][d] * esize[k];
}

void cpu_iter_init_views(cpu_iter *it, int nop, const ordo_view *const *v, int flags) {
    const int64_t dense = cpu_dense_numel(nop, v);
    if (dense > 0) { /* what the general set-up below comes to for these */
        it->nop = nop;
        it->nd = 1;
        it->numel = it->shape[0] = dense;
        for (int k = 0; k < nop; k++) {
            it->ptr[k] = (char *)v[k]->data;
            it->stride[k][0] = 1;
            it->bstride[k][0] = (int64_t)ordo_dtype_size(v[k]->dtype);
        }
        return;
    }
    char *ptr[CPU_MAX_OPS];
    int esize[CPU_MAX_OPS];
    const int64_t *strides[CPU_MAX_OPS];
    for (int k = 0; k < nop; k++) {
        ptr[k] = (char *)v[k]->data;
        esize[k] = (int)ordo_dtype_size(v[k]->dtype);
        strides[k] = v[k]->strides;
    }
    cpu_iter_init(it, nop, v[0]->ndim, v[0]->shape, ptr, esize, strides, flags);
}

int cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx) {
    if (it->numel == 0) return 0;
    const int nd = it->nd, nop = it->nop;
    const int64_t n = it->shape[nd - 1];
    int64_t s[CPU_MAX_OPS];
    char *p[CPU_MAX_OPS];
    for (int k = 0; k < nop; k++) {
        s[k] = it->stride[k][nd - 1];
        p[k] = it->ptr[k];
    }
    if (nd == 1) return fn(n, p, s, ctx);

    int64_t idx[ORDO_MAX_DIMS] = {0};
    for (;;) {
        int rc = fn(n, p, s, ctx);
        if (rc) return rc;
        int d = nd - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < it->shape[d]) {
                for (int k = 0; k < nop; k++) p[k] += it->bstride[k][d];
                break;
            }
            idx[d] = 0;
            for (int k = 0; k < nop; k++) p[k] -= it->bstride[k][d] * (it->shape[d] - 1);
        }
        if (d < 0) return 0;
    }
}

/* Most small ops in a training loop or a REPL meet operands that are plain
 * dense arrays of one shape: for them the general set-up above (dims sorted,
 * merged, byte strides) is most of the op's cost, so they take this test
 * instead.  It only says yes when every check a kernel makes on the views
 * would pass, so the kernel's errors still come from its full path. */
const int64_t cpu_unit_strides[CPU_MAX_OPS] = {1, 1, 1, 1};

int64_t cpu_dense_numel(int nop, const ordo_view *const *v) {
    const int nd = v[0]->ndim;
    if (nd < 0 || nd > ORDO_MAX_DIMS) return -1;
    for (int k = 0; k < nop; k++)
        if (v[k]->ndim != nd || !v[k]->data || (unsigned)v[k]->dtype >= ORDO_NDTYPES) return -1;
    int64_t numel = 1;
    for (int d = nd - 1; d >= 0; d--) {
        const int64_t n = v[0]->shape[d];
        if (n < 1) return -1; /* empty tensors take the full path */
        for (int k = 0; k < nop; k++)
            if (v[k]->shape[d] != n || (n > 1 && v[k]->strides[d] != numel)) return -1;
        numel *= n;
    }
    return numel;
}

/* ---- rows split among idle workers ------------------------------------- */

typedef struct par_job {
    const cpu_iter *it;
    cpu_loop_fn fn;
    void *ctx;
    int64_t inner; /* elements in one step of the outermost dim */
} par_job;

/* Items lo..hi of the outermost dim (elements when there is one dim). */
static int par_chunk(int64_t lo, int64_t hi, void *arg) {
    const par_job *j = arg;
    cpu_iter sub = *j->it;
    sub.shape[0] = hi - lo;
    sub.numel = (hi - lo) * j->inner;
    for (int k = 0; k < sub.nop; k++) sub.ptr[k] += lo * sub.bstride[k][0];
    return cpu_iter_run(&sub, j->fn, j->ctx);
}

int cpu_parallel_for(int64_t n, int64_t inner, ordo_chunk_fn fn, void *ctx) {
    if (n * inner < CPU_PAR_MIN) return fn(0, n, ctx);
    int64_t grain = CPU_PAR_GRAIN / inner;
    return ordo_parallel_for(n, grain > 0 ? grain : 1, fn, ctx);
}

int cpu_iter_run_parallel(const cpu_iter *it, cpu_loop_fn fn, void *ctx) {
    if (it->numel < CPU_PAR_MIN) return cpu_iter_run(it, fn, ctx);
    for (int d = 0; d < it->nd; d++) /* an output written twice through a stride of 0: in order */
        if (it->stride[0][d] == 0 && it->shape[d] > 1) return cpu_iter_run(it, fn, ctx);
    par_job j = {it, fn, ctx, it->numel / it->shape[0]};
    return cpu_parallel_for(it->shape[0], j.inner, par_chunk, &j);
}

/* ---- checks ------------------------------------------------------------ */

int cpu_fail_dtype(const ordo_run_ctx *rc, const char *kernel, int dtype) {
    return ordo_fail(rc, "%s: dtype %s not implemented", kernel, ordo_dtype_name(dtype));
}

int cpu_check_view(const ordo_run_ctx *rc, const char *kernel, const char *what, const ordo_view *v) {
    if (v->ndim < 0 || v->ndim > ORDO_MAX_DIMS)
        return ordo_fail(rc, "%s: %s has %d dims (0 to %d allowed)", kernel, what, v->ndim,
                         ORDO_MAX_DIMS);
    if (v->dtype < 0 || v->dtype >= ORDO_NDTYPES)
        return ordo_fail(rc, "%s: %s has unknown dtype %d", kernel, what, v->dtype);
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] < 0)
            return ordo_fail(rc, "%s: %s has negative size %lld in dim %d", kernel, what,
                             (long long)v->shape[d], d);
    if (!v->data && ordo_view_numel(v) > 0)
        return ordo_fail(rc, "%s: %s has no data", kernel, what);
    return 0;
}

int cpu_check_args(const ordo_run_ctx *rc, const char *kernel, const ordo_kernel_args *a, int nin,
                   int nout) {
    if (!a) return ordo_fail(rc, "%s: no arguments", kernel);
    if (a->nin < nin || a->nout < nout || a->nin > ORDO_KERNEL_MAX_IN || a->nout > ORDO_KERNEL_MAX_OUT)
        return ordo_fail(rc, "%s: takes %d inputs and %d outputs, got %d and %d", kernel, nin, nout,
                         a->nin, a->nout);
    static const char *const in_names[] = {"in[0]", "in[1]", "in[2]", "in[3]"};
    static const char *const out_names[] = {"out[0]", "out[1]"};
    for (int i = 0; i < nin; i++) {
        int r = cpu_check_view(rc, kernel, in_names[i], &a->in[i]);
        if (r) return r;
    }
    for (int i = 0; i < nout; i++) {
        int r = cpu_check_view(rc, kernel, out_names[i], &a->out[i]);
        if (r) return r;
    }
    return 0;
}

int cpu_same_shape(const ordo_view *a, const ordo_view *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

const char *cpu_shape_str(const ordo_view *v, char *buf, size_t n) {
    size_t at = 0;
    int w = snprintf(buf, n, "[");
    at = w > 0 ? (size_t)w : 0;
    for (int d = 0; d < v->ndim && d < ORDO_MAX_DIMS && at < n; d++) {
        w = snprintf(buf + at, n - at, d ? ", %lld" : "%lld", (long long)v->shape[d]);
        if (w > 0) at += (size_t)w;
    }
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

int cpu_check_same_shapes(const ordo_run_ctx *rc, const char *kernel, const ordo_view *const *v,
                          const char *const *names, int n) {
    for (int i = 1; i < n; i++)
        if (!cpu_same_shape(v[0], v[i])) {
            char b0[160], b1[160];
            return ordo_fail(rc, "%s: shape mismatch: %s is %s but %s is %s", kernel, names[0],
                             cpu_shape_str(v[0], b0, sizeof b0), names[i],
                             cpu_shape_str(v[i], b1, sizeof b1));
        }
    return 0;
}

int cpu_check_writable(const ordo_run_ctx *rc, const char *kernel, const ordo_view *v) {
    if (ordo_view_numel(v) == 0) return 0; /* nothing is written */
    for (int d = 0; d < v->ndim; d++)
        if (v->strides[d] == 0 && v->shape[d] > 1)
            return ordo_fail(rc, "%s: output has stride 0 in dim %d (a broadcast view cannot be written)",
                             kernel, d);
    return 0;
}

void cpu_view_drop_dim(const ordo_view *v, int d, ordo_view *o) {
    *o = *v;
    o->ndim = 0;
    for (int i = 0; i < v->ndim; i++) {
        if (i == d) continue;
        o->shape[o->ndim] = v->shape[i];
        o->strides[o->ndim] = v->strides[i];
        o->ndim++;
    }
}

void cpu_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

/* ---- scalars ----------------------------------------------------------- */

int cpu_scalar_fill_value(const ordo_run_ctx *rc, const char *kernel, int dtype, double v,
                          cpu_scalar *out) {
    switch (dtype) {
    case ORDO_F32: out->f32 = (float)v; return 0;
    case ORDO_F64: out->f64 = v; return 0;
    default: break;
    }
    double lo, hi; /* hi is exclusive: the first double past the range */
    switch (dtype) {
    case ORDO_I32: lo = -2147483648.0; hi = 2147483648.0; break;
    case ORDO_I64: lo = -9223372036854775808.0; hi = 9223372036854775808.0; break;
    case ORDO_U8: lo = 0; hi = 256; break;
    default: return cpu_fail_dtype(rc, kernel, dtype);
    }
    double t = trunc(v);
    if (!(t >= lo && t < hi))
        return ordo_fail(rc, "%s: value %g does not fit in %s", kernel, cpu_shown(v), ordo_dtype_name(dtype));
    switch (dtype) {
    case ORDO_I32: out->i32 = (int32_t)t; break;
    case ORDO_I64: out->i64 = (int64_t)t; break;
    default: out->u8 = (uint8_t)t; break;
    }
    return 0;
}

void cpu_store_double(int dtype, void *p, double v) {
    switch (dtype) {
    case ORDO_F32: *(float *)p = (float)v; break;
    case ORDO_F64: *(double *)p = v; break;
    case ORDO_I32: *(int32_t *)p = cpu_sat_i32(v); break;
    case ORDO_I64: *(int64_t *)p = cpu_sat_i64(v); break;
    case ORDO_U8: *(uint8_t *)p = cpu_sat_u8(v); break;
    default: break;
    }
}

double cpu_load_double(int dtype, const void *p) {
    switch (dtype) {
    case ORDO_F32: return *(const float *)p;
    case ORDO_F64: return *(const double *)p;
    case ORDO_I32: return *(const int32_t *)p;
    case ORDO_I64: return (double)*(const int64_t *)p;
    case ORDO_U8: return *(const uint8_t *)p;
    default: return 0;
    }
}

/* ---- fill -------------------------------------------------------------- */

#define DEF_FILL_LOOP(NAME, T)                                                      \
    static int NAME(int64_t n, char *const *p, const int64_t *s, void *ctx) {      \
        T *y = (T *)p[0];                                                          \
        const T v = *(const T *)ctx;                                               \
        int64_t i = 0;                                                             \
        if (s[0] == 1) {                                                           \
            for (; i + CPU_BLK <= n; i += CPU_BLK)                                 \
                for (int j = 0; j < CPU_BLK; j++) y[i + j] = v;                    \
            for (; i < n; i++) y[i] = v;                                           \
        } else {                                                                   \
            for (; i < n; i++) y[i * s[0]] = v;                                    \
        }                                                                          \
        return 0;                                                                  \
    }
DEF_FILL_LOOP(fill_1, uint8_t)
DEF_FILL_LOOP(fill_4, uint32_t)
DEF_FILL_LOOP(fill_8, uint64_t)

void cpu_fill_view(const ordo_view *v, const void *value) {
    size_t es = ordo_dtype_size(v->dtype);
    /* Copy the value into a word of its own size: it may be unaligned or a
     * different type in the caller, and filling is by bit pattern. */
    uint64_t w8 = 0;
    uint32_t w4 = 0;
    uint8_t w1 = 0;
    void *w = es == 8 ? (void *)&w8 : es == 4 ? (void *)&w4 : (void *)&w1;
    memcpy(w, value, es);
    cpu_iter it;
    const ordo_view *vv[1] = {v};
    cpu_iter_init_views(&it, 1, vv, 0);
    cpu_iter_run_parallel(&it, es == 8 ? fill_8 : es == 4 ? fill_4 : fill_1, w);
}

/* ---- registration ------------------------------------------------------- */

void cpu_register_table(const cpu_kernel_entry *t, int n) {
    for (int i = 0; i < n; i++) ordo_kernel_register(t[i].name, ORDO_CPU, t[i].fn);
}
