/*
 * tensor.c - tensor descriptors: creation, views, shapes, broadcasting.
 *
 * Dims count from 0 in this file; messages print them counted from 1, as
 * the Lua front end's users see them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_internal.h"

/* ---- errors ------------------------------------------------------------------- */

static _Thread_local char terr[1024];
static _Thread_local int terr_code;

const char *ordo_tensor_error(void) { return terr; }
int ordo_tensor_error_code(void) { return terr_code; }

static int vset(int code, const char *fmt, va_list ap) {
    vsnprintf(terr, sizeof terr, fmt, ap);
    terr_code = code;
    return code;
}

int tensor_set_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vset(ORDO_ERR_INVALID, fmt, ap);
    va_end(ap);
    return rc;
}

int tensor_set_error_code(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vset(code, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- small helpers -------------------------------------------------------------- */

/* The name messages start with when the caller passed none: "(null): ..."
 * tells a user nothing. */
static const char *op_name(const char *op, const char *fallback) { return op ? op : fallback; }

/* A NULL tensor where one is needed: a message, never a crash.  True when
 * t is NULL. */
static bool null_tensor(const char *op, const ordo_tensor *t) {
    if (t) return false;
    tensor_set_error("%s: tensor is NULL", op);
    return true;
}

/* A size or index counted from 1, as messages print them, written out
 * without overflow: the value the caller passed may be INT64_MAX. */
static const char *from1(int64_t i, char *buf, size_t len) {
    if (i < 0) snprintf(buf, len, "%lld", (long long)i + 1);
    else snprintf(buf, len, "%llu", (unsigned long long)i + 1u);
    return buf;
}

char *ordo_tensor_shape_str(const ordo_tensor *t, char *buf, size_t len) {
    if (!buf || len == 0) return buf; /* no room even for the terminator */
    if (!t || t->ndim == 0) {
        snprintf(buf, len, "scalar");
        return buf;
    }
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, i ? "x%lld" : "%lld", (long long)t->shape[i]);
    return buf;
}

static const char *shp(const ordo_tensor *t, char *buf) { return ordo_tensor_shape_str(t, buf, 128); }

static const char *shape_arr_str(int ndim, const int64_t *shape, char *buf, size_t len) {
    ordo_tensor tmp;
    tmp.ndim = ndim;
    for (int i = 0; i < ndim && i < ORDO_MAX_DIMS; i++) tmp.shape[i] = shape[i];
    return ordo_tensor_shape_str(&tmp, buf, len);
}

/* Asked before multiplying sizes: the product of an empty shape's other
 * sizes may not fit (an empty tensor expanded to 2^40 x 2^40 is still
 * empty). */
static bool has_zero_size(int ndim, const int64_t *shape) {
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return true;
    return false;
}

/* The element count of a shape that fits (shape_fits, or a live tensor's). */
static int64_t shape_numel(int ndim, const int64_t *shape) {
    if (has_zero_size(ndim, shape)) return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* -1 for NULL: 0 would read as an empty tensor. */
int64_t ordo_tensor_numel(const ordo_tensor *t) {
    if (null_tensor("ordo_tensor_numel", t)) return -1;
    return shape_numel(t->ndim, t->shape);
}

int ordo_tensor_is_contiguous(const ordo_tensor *t) {
    if (null_tensor("ordo_tensor_is_contiguous", t)) return 0;
    if (has_zero_size(t->ndim, t->shape)) return 1;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

void *ordo_tensor_data(const ordo_tensor *t) {
    if (null_tensor("ordo_tensor_data", t) || !t->storage->data) return NULL;
    return (char *)t->storage->data + t->offset * (int64_t)ordo_dtype_size(t->dtype);
}

void tensor_to_view(const ordo_tensor *t, ordo_view *v) {
    v->data = t->storage->data ? (char *)t->storage->data + t->offset * (int64_t)ordo_dtype_size(t->dtype) : NULL;
    v->dtype = t->dtype;
    v->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        v->shape[i] = t->shape[i];
        v->strides[i] = t->strides[i];
    }
}

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        /* the product fits for a tensor with elements; an empty one may have
         * sizes whose product does not, and never uses its strides */
        if (shape[i] > 1 && s <= INT64_MAX / shape[i]) s *= shape[i];
    }
}

/* Whether a shape's element count, in bytes of dtype, fits int64 (sizes
 * not negative): the bound ordo_tensor_empty allocates under, which views
 * that grow a tensor (expand, as_strided) must keep too, for numel and
 * the kernels' index arithmetic never to overflow. */
static int shape_fits(int ndim, const int64_t *shape, int dtype) {
    if (has_zero_size(ndim, shape)) return 1;
    int64_t numel = 1, es = (int64_t)ordo_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (numel > (INT64_MAX / es) / shape[i]) return 0;
        numel *= shape[i];
    }
    return 1;
}

static atomic_uint_least64_t next_desc_id = 1;

/* Freed descriptors kept for reuse, per thread.  Every new tensor makes
 * one, and the Lua collector frees them in bursts (finalizers are not run
 * on a compiled trace: a loop of ops runs them in tens of thousands at a
 * time), past glibc's per-thread cache of 7 blocks: a 168-byte block then
 * takes glibc's slow paths, ~200 instructions for a malloc and as many for
 * its free, a tenth of r = a + b from Lua.  The threads keep up to
 * DESC_CACHE_MAX of them together (11.5 MB; a burst of 16,384 or 32,768
 * overflowed in such a loop), each thread its own list, given back at the
 * thread's exit, at the process's exit (the main thread's) and by
 * ordo_host_empty_cache (the calling thread's).  ORDO_HOST_CACHE_MB=0
 * turns it off with the host caches: the sanitizer and valgrind runs must
 * see every descriptor freed. */
#define DESC_CACHE_MAX 65536

typedef struct desc_free { struct desc_free *next; } desc_free;
typedef struct desc_cache {
    desc_free *head;
    long n;
    bool armed; /* the thread's exit empties it */
} desc_cache;
static _Thread_local desc_cache dcache;
/* Its address taken once per call: in a shared library every access to a
 * thread-local may be a call of __tls_get_addr (as TLS_PIN, internal.h). */
#if defined(__GNUC__)
#define DCACHE_PIN(p) __asm__("" : "+r"(p))
#else
#define DCACHE_PIN(p) ((void)0)
#endif
static atomic_long dcache_total; /* over all threads */
static atomic_int dcache_mode;   /* 0: not read yet, 1: on, -1: off */
static pthread_key_t dcache_key;
static pthread_once_t dcache_once = PTHREAD_ONCE_INIT;

void tensor_desc_cache_empty(void) {
    desc_cache *dc = &dcache;
    DCACHE_PIN(dc);
    while (dc->head) {
        desc_free *d = dc->head;
        dc->head = d->next;
        free(d);
    }
    atomic_fetch_sub_explicit(&dcache_total, dc->n, memory_order_relaxed);
    dc->n = 0;
}

long tensor_desc_cached(void) { return atomic_load(&dcache_total); }

static void dcache_thread_exit(void *arg) {
    (void)arg;
    tensor_desc_cache_empty();
    dcache.armed = false; /* a free from a later destructor arms it again */
}
/* The main thread's, once the program is done with Lua (lua_close frees
 * its tensors before exit); whatever is freed after goes straight back. */
static void dcache_at_exit(void) {
    atomic_store(&dcache_mode, -1);
    tensor_desc_cache_empty();
}
static void dcache_init(void) {
    const char *s = getenv("ORDO_HOST_CACHE_MB");
    bool on = !(s && *s && strtol(s, NULL, 10) <= 0) && pthread_key_create(&dcache_key, dcache_thread_exit) == 0;
    if (on) atexit(dcache_at_exit);
    atomic_store(&dcache_mode, on ? 1 : -1);
}

/* Every descriptor gets an id of its own: one freed and another made at
 * its address are told apart (tensor_push.c's memo of repeated ops). */
static ordo_tensor *desc_new(void) {
    desc_cache *dc = &dcache;
    DCACHE_PIN(dc);
    ordo_tensor *t = (ordo_tensor *)dc->head;
    if (t) {
        dc->head = dc->head->next;
        dc->n--;
        atomic_fetch_sub_explicit(&dcache_total, 1, memory_order_relaxed);
    } else if (!(t = malloc(sizeof *t))) {
        tensor_set_error_code(ORDO_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->id = atomic_fetch_add_explicit(&next_desc_id, 1, memory_order_relaxed);
    return t;
}

static void desc_free_block(ordo_tensor *t) {
    desc_cache *dc = &dcache;
    DCACHE_PIN(dc);
    int mode = atomic_load_explicit(&dcache_mode, memory_order_relaxed);
    if (mode == 0) {
        pthread_once(&dcache_once, dcache_init);
        mode = atomic_load(&dcache_mode);
    }
    if (mode > 0 && atomic_load_explicit(&dcache_total, memory_order_relaxed) < DESC_CACHE_MAX &&
        (dc->armed || (dc->armed = pthread_setspecific(dcache_key, dc) == 0))) {
        atomic_fetch_add_explicit(&dcache_total, 1, memory_order_relaxed);
        desc_free *d = (desc_free *)t;
        d->next = dc->head;
        dc->head = d;
        dc->n++;
        return;
    }
    free(t);
}

/* ---- creation -------------------------------------------------------------------- */

ordo_tensor *ordo_tensor_empty(ordo_engine *e, int dtype, int ndim, const int64_t *shape, ordo_ctx ctx) {
    if (dtype < 0 || dtype >= ORDO_NDTYPES) {
        tensor_set_error("unknown dtype %d", dtype);
        return NULL;
    }
    if (ndim < 0 || ndim > ORDO_MAX_DIMS) {
        tensor_set_error("%d dims (at most %d supported)", ndim, ORDO_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape) {
        tensor_set_error("ordo_tensor_empty: shape is NULL for %d dims", ndim);
        return NULL;
    }
    size_t es = ordo_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char b[128];
            tensor_set_error("negative size %lld in shape %s", (long long)shape[i], shape_arr_str(ndim, shape, b, sizeof b));
            return NULL;
        }
    }
    if (!shape_fits(ndim, shape, dtype)) { /* an empty shape fits, whatever its other sizes */
        char b[128];
        /* a bad argument, not a lack of memory: no amount of freeing helps */
        tensor_set_error("shape %s is too large", shape_arr_str(ndim, shape, b, sizeof b));
        return NULL;
    }
    int64_t numel = shape_numel(ndim, shape);
    ordo_tensor *t = desc_new();
    if (!t) return NULL;
    t->storage = ordo_storage_new(e, ctx, (size_t)numel * es);
    if (!t->storage) {
        desc_free_block(t);
        return NULL;
    }
    t->offset = 0;
    t->dtype = dtype;
    t->ndim = ndim;
    t->ctx = ctx;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    contiguous_strides(ndim, shape, t->strides);
    return t;
}

ordo_tensor *ordo_tensor_empty_on(ordo_engine *e, int dtype, int ndim, const int64_t *shape,
                                  int dev_type, int dev_id) {
    ordo_ctx ctx = {dev_type, dev_id};
    return ordo_tensor_empty(e, dtype, ndim, shape, ctx);
}

ordo_tensor *ordo_tensor_empty_like(const ordo_tensor *t, int dtype) {
    if (null_tensor("ordo_tensor_empty_like", t)) return NULL;
    return ordo_tensor_empty(t->storage->engine, dtype, t->ndim, t->shape, tensor_result_ctx(t->ctx));
}

ordo_tensor *ordo_tensor_alias(const ordo_tensor *t) {
    if (null_tensor("ordo_tensor_alias", t)) return NULL;
    ordo_tensor *r = desc_new();
    if (!r) return NULL;
    uint64_t id = r->id;
    *r = *t;
    r->id = id;
    ordo_storage_retain(t->storage);
    return r;
}

/* A view of t's storage, not checked (the callers compute it from t). */
static ordo_tensor *view_of(const ordo_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                            int64_t offset) {
    ordo_tensor *r = desc_new();
    if (!r) return NULL;
    r->storage = t->storage;
    r->offset = offset;
    r->dtype = t->dtype;
    r->ndim = ndim;
    r->ctx = t->ctx;
    for (int i = 0; i < ndim; i++) {
        r->shape[i] = shape[i];
        r->strides[i] = strides[i];
    }
    ordo_storage_retain(t->storage);
    return r;
}

ordo_tensor *ordo_tensor_as_strided(const ordo_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                                    int64_t offset) {
    if (null_tensor("as_strided", t)) return NULL;
    if (ndim < 0 || ndim > ORDO_MAX_DIMS) {
        tensor_set_error("as_strided: %d dims (at most %d supported)", ndim, ORDO_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && (!shape || !strides)) {
        tensor_set_error("as_strided: %s is NULL for %d dims", shape ? "strides" : "shape", ndim);
        return NULL;
    }
    int64_t lo = offset, hi = offset, numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            tensor_set_error("as_strided: negative size %lld", (long long)shape[i]);
            return NULL;
        }
        if (shape[i] > 1 && (strides[i] > INT64_MAX / (shape[i] - 1) || strides[i] < -(INT64_MAX / (shape[i] - 1)))) {
            tensor_set_error("as_strided: size %lld with stride %lld reaches past any storage", (long long)shape[i],
                             (long long)strides[i]);
            return NULL;
        }
    }
    if (!shape_fits(ndim, shape, t->dtype)) {
        char b[128];
        tensor_set_error("as_strided: shape %s is too large", shape_arr_str(ndim, shape, b, sizeof b));
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        numel *= shape[i];
        if (shape[i] > 0) {
            int64_t span = (shape[i] - 1) * strides[i];
            if (span < 0) lo += span;
            else hi += span;
        }
    }
    int64_t cap = (int64_t)(t->storage->nbytes / ordo_dtype_size(t->dtype));
    if (numel > 0 && (lo < 0 || hi >= cap)) {
        tensor_set_error("as_strided: the view reaches elements %lld..%lld outside its storage of %lld elements",
                         (long long)lo, (long long)hi, (long long)cap);
        return NULL;
    }
    return view_of(t, ndim, shape, strides, offset);
}

void ordo_tensor_free(ordo_tensor *t) {
    if (!t) return;
    ordo_storage_release(t->storage);
    desc_free_block(t);
}

/* ---- views -------------------------------------------------------------------------- */

static int check_dim(const char *op, const ordo_tensor *t, int dim, int extra) {
    int n = t->ndim + extra;
    if (dim < 0 || dim >= n) {
        char b[128];
        /* dim + 1 in long long: dim may be INT_MAX */
        if (n == 0)
            return tensor_set_error("%s: dim %lld out of range: the tensor has no dims (shape %s)", op,
                                    (long long)dim + 1, shp(t, b));
        return tensor_set_error("%s: dim %lld out of range for a %d-d tensor of shape %s (expected 1..%d)", op,
                                (long long)dim + 1, t->ndim, shp(t, b), n);
    }
    return 0;
}

/* Strides for viewing t as shape without copying (PyTorch's computeStride);
 * 0 if impossible. */
static int view_strides(const ordo_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
    int64_t numel = ordo_tensor_numel(t);
    if (numel == 0 || t->ndim == 0 || ordo_tensor_is_contiguous(t)) {
        contiguous_strides(ndim, shape, strides);
        return 1;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = t->strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        if (d == 0 || (t->shape[d - 1] != 1 && t->strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return 0;
            if (d > 0) {
                chunk_base = t->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

ordo_tensor *ordo_tensor_view(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape_in) {
    char b1[128], b2[128];
    op = op_name(op, "view");
    if (null_tensor(op, t)) return NULL;
    if (ndim < 0 || ndim > ORDO_MAX_DIMS) {
        tensor_set_error("%s: %d dims (at most %d supported)", op, ndim, ORDO_MAX_DIMS);
        return NULL;
    }
    if (ndim > 0 && !shape_in) {
        tensor_set_error("%s: shape is NULL for %d dims", op, ndim);
        return NULL;
    }
    int64_t shape[ORDO_MAX_DIMS], known = 1, numel = ordo_tensor_numel(t);
    int infer = -1, zero = 0, overflow = 0; /* a product past int64 can match no tensor */
    for (int i = 0; i < ndim; i++) {
        shape[i] = shape_in[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                tensor_set_error("%s: only one size may be -1, got shape %s", op, shape_arr_str(ndim, shape_in, b1, sizeof b1));
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            tensor_set_error("%s: negative size %lld in shape %s", op, (long long)shape[i],
                             shape_arr_str(ndim, shape_in, b1, sizeof b1));
            return NULL;
        } else if (shape[i] == 0) {
            zero = 1;
        } else if (overflow || known > INT64_MAX / shape[i]) {
            overflow = 1;
        } else {
            known *= shape[i];
        }
    }
    if (zero) known = 0;
    else if (overflow) {
        tensor_set_error("%s: shape %s is invalid for a tensor of %lld elements (shape %s)", op,
                         shape_arr_str(ndim, shape_in, b1, sizeof b1), (long long)numel, shp(t, b2));
        return NULL;
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            tensor_set_error("%s: shape %s is invalid for a tensor of %lld elements (shape %s)", op,
                             shape_arr_str(ndim, shape_in, b1, sizeof b1), (long long)numel, shp(t, b2));
            return NULL;
        }
        shape[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        tensor_set_error("%s: shape %s is invalid for a tensor of %lld elements (shape %s)", op,
                         shape_arr_str(ndim, shape_in, b1, sizeof b1), (long long)numel, shp(t, b2));
        return NULL;
    }
    int64_t strides[ORDO_MAX_DIMS];
    if (!view_strides(t, ndim, shape, strides)) {
        tensor_set_error_code(ORDO_TERR_NOT_VIEWABLE,
                              "%s: a tensor of shape %s with these strides cannot be viewed as %s without a copy; "
                              "use reshape, or contiguous() first",
                              op, shp(t, b1), shape_arr_str(ndim, shape, b2, sizeof b2));
        return NULL;
    }
    return view_of(t, ndim, shape, strides, t->offset);
}

ordo_tensor *ordo_tensor_transpose(const char *op, const ordo_tensor *t, int d1, int d2) {
    op = op_name(op, "transpose");
    if (null_tensor(op, t) || check_dim(op, t, d1, 0) || check_dim(op, t, d2, 0)) return NULL;
    int64_t shape[ORDO_MAX_DIMS], strides[ORDO_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        shape[i] = t->shape[i];
        strides[i] = t->strides[i];
    }
    shape[d1] = t->shape[d2];
    strides[d1] = t->strides[d2];
    shape[d2] = t->shape[d1];
    strides[d2] = t->strides[d1];
    return view_of(t, t->ndim, shape, strides, t->offset);
}

ordo_tensor *ordo_tensor_permute(const char *op, const ordo_tensor *t, int ndim, const int64_t *perm) {
    char b[128];
    op = op_name(op, "permute");
    if (null_tensor(op, t)) return NULL;
    if (ndim > 0 && !perm) {
        tensor_set_error("%s: perm is NULL for %d dims", op, ndim);
        return NULL;
    }
    if (ndim != t->ndim) {
        tensor_set_error("%s: %d dims given for a %d-d tensor of shape %s", op, ndim, t->ndim, shp(t, b));
        return NULL;
    }
    int seen[ORDO_MAX_DIMS] = {0};
    int64_t shape[ORDO_MAX_DIMS], strides[ORDO_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int64_t p = perm[i];
        if (p < 0 || p >= ndim || seen[p]) {
            tensor_set_error("%s: dims must be a permutation of 1..%d (got %s at position %d)", op, ndim,
                             from1(p, b, sizeof b), i + 1);
            return NULL;
        }
        seen[p] = 1;
        shape[i] = t->shape[p];
        strides[i] = t->strides[p];
    }
    return view_of(t, ndim, shape, strides, t->offset);
}

ordo_tensor *ordo_tensor_narrow(const char *op, const ordo_tensor *t, int dim, int64_t start, int64_t len) {
    char b[128], s1[32];
    op = op_name(op, "narrow");
    if (null_tensor(op, t) || check_dim(op, t, dim, 0)) return NULL;
    if (start < 0 || len < 0 || start > t->shape[dim] || len > t->shape[dim] - start) { /* no start + len overflow */
        tensor_set_error("%s: start %s and length %lld out of range for dim %d of size %lld (shape %s)", op,
                         from1(start, s1, sizeof s1), (long long)len, dim + 1, (long long)t->shape[dim], shp(t, b));
        return NULL;
    }
    int64_t shape[ORDO_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[dim] = len;
    return view_of(t, t->ndim, shape, t->strides, t->offset + (len > 0 ? start * t->strides[dim] : 0));
}

ordo_tensor *ordo_tensor_select(const char *op, const ordo_tensor *t, int dim, int64_t index) {
    char b[128], s1[32];
    op = op_name(op, "select");
    if (null_tensor(op, t) || check_dim(op, t, dim, 0)) return NULL;
    if (index < 0 || index >= t->shape[dim]) {
        tensor_set_error("%s: index %s out of range for dim %d of size %lld (shape %s)", op,
                         from1(index, s1, sizeof s1), dim + 1, (long long)t->shape[dim], shp(t, b));
        return NULL;
    }
    int64_t shape[ORDO_MAX_DIMS], strides[ORDO_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == dim) continue;
        shape[n] = t->shape[i];
        strides[n++] = t->strides[i];
    }
    return view_of(t, n, shape, strides, t->offset + index * t->strides[dim]);
}

ordo_tensor *ordo_tensor_expand(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape_in) {
    char b1[128], b2[128];
    op = op_name(op, "expand");
    if (null_tensor(op, t)) return NULL;
    if (ndim > 0 && !shape_in) {
        tensor_set_error("%s: shape is NULL for %d dims", op, ndim);
        return NULL;
    }
    if (ndim < t->ndim || ndim > ORDO_MAX_DIMS) {
        tensor_set_error("%s: cannot expand shape %s to %s (%s)", op, shp(t, b1),
                         shape_arr_str(ndim, shape_in, b2, sizeof b2),
                         ndim > ORDO_MAX_DIMS ? "too many dims" : "fewer dims than the tensor");
        return NULL;
    }
    int64_t shape[ORDO_MAX_DIMS] = {0}, strides[ORDO_MAX_DIMS] = {0}; /* zeroed: gcc cannot see ndim covers them */
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        int64_t want = shape_in[i];
        if (j < 0) {
            if (want < 0) {
                tensor_set_error("%s: size -1 is not allowed for a new leading dim (expanding %s to %s)", op, shp(t, b1),
                                 shape_arr_str(ndim, shape_in, b2, sizeof b2));
                return NULL;
            }
            shape[i] = want;
            strides[i] = 0;
        } else if (want == -1 || want == t->shape[j]) {
            shape[i] = t->shape[j];
            strides[i] = t->strides[j];
        } else if (t->shape[j] == 1 && want >= 0) {
            shape[i] = want;
            strides[i] = 0;
        } else {
            tensor_set_error("%s: cannot expand shape %s to %s (dim %d has size %lld, expected %lld or 1)", op,
                             shp(t, b1), shape_arr_str(ndim, shape_in, b2, sizeof b2), j + 1,
                             (long long)t->shape[j], (long long)want);
            return NULL;
        }
    }
    if (!shape_fits(ndim, shape, t->dtype)) {
        tensor_set_error("%s: cannot expand shape %s to %s (too many elements)", op, shp(t, b1),
                         shape_arr_str(ndim, shape, b2, sizeof b2));
        return NULL;
    }
    return view_of(t, ndim, shape, strides, t->offset);
}

ordo_tensor *ordo_tensor_unsqueeze(const char *op, const ordo_tensor *t, int dim) {
    op = op_name(op, "unsqueeze");
    if (null_tensor(op, t)) return NULL;
    if (t->ndim >= ORDO_MAX_DIMS) {
        tensor_set_error("%s: a tensor has at most %d dims", op, ORDO_MAX_DIMS);
        return NULL;
    }
    if (check_dim(op, t, dim, 1)) return NULL;
    int64_t shape[ORDO_MAX_DIMS], strides[ORDO_MAX_DIMS];
    int n = 0;
    for (int i = 0; i <= t->ndim; i++) {
        if (i == dim) {
            shape[n] = 1;
            strides[n++] = i < t->ndim ? t->strides[i] * t->shape[i] : 1;
        }
        if (i < t->ndim) {
            shape[n] = t->shape[i];
            strides[n++] = t->strides[i];
        }
    }
    return view_of(t, n, shape, strides, t->offset);
}

ordo_tensor *ordo_tensor_squeeze(const char *op, const ordo_tensor *t, int dim) {
    op = op_name(op, "squeeze");
    if (null_tensor(op, t) || (dim >= 0 && check_dim(op, t, dim, 0))) return NULL;
    int64_t shape[ORDO_MAX_DIMS], strides[ORDO_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 1 && (dim < 0 || dim == i)) continue;
        shape[n] = t->shape[i];
        strides[n++] = t->strides[i];
    }
    return view_of(t, n, shape, strides, t->offset);
}

int ordo_tensor_broadcast_shape(const char *op, const ordo_tensor *a, const ordo_tensor *b, int64_t *out) {
    op = op_name(op, "broadcast");
    if (null_tensor(op, a) || null_tensor(op, b)) return -1;
    if (!out) {
        tensor_set_error("%s: out_shape is NULL", op);
        return -1;
    }
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa == sb || sb == 1) out[i] = sa;
        else if (sa == 1) out[i] = sb;
        else {
            char b1[128], b2[128];
            tensor_set_error("%s: shapes %s and %s cannot be broadcast (dim %d of the result: sizes %lld and %lld)", op,
                             shp(a, b1), shp(b, b2), i + 1, (long long)sa, (long long)sb);
            return -1;
        }
    }
    return n;
}
