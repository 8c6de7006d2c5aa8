/*
 * kernel_registry.c - kernels by (name, device type), and the view helpers
 * of ordo_kernel.h.
 *
 * Every tensor op looks its kernel up, so lookup must be cheap and must not
 * contend: it takes no lock.  The table is an open-addressing hash table
 * whose slots are atomic pointers to entries that never move or die;
 * register (rare: startup, plus a user's own kernels) takes a mutex, fills
 * an empty slot with a release store, or, to grow, builds a bigger table
 * and publishes it with one release store.  A reader still probing the old
 * table sees a consistent, if older, set of entries, so old tables are kept
 * (linked from the new one: a few KiB for the life of the process) instead
 * of freed under a reader.  Replacing a kernel swaps the function pointer
 * inside the shared entry, so every table sees it.
 *
 * The built-in CPU kernels are registered once, by pthread_once, on the
 * first register or lookup; registering first means a user's kernel of the
 * same name replaces the built-in one instead of being overwritten later.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "ordo_kernel.h"

/* kernels/cpu/register.c, kernels/cuda/register.cu */
void ordo_cpu_kernels_register(void);
#if defined ORDO_WITH_CUDA || defined ORDO_CUDA_EMU
void ordo_cuda_kernels_register(void);
#endif

typedef struct kentry {
    uint64_t hash;
    int dev_type;
    _Atomic(ordo_kernel_fn) fn;
    char name[];
} kentry;

typedef struct ktable {
    size_t mask;          /* capacity - 1, capacity a power of two */
    struct ktable *older; /* the table this one replaced, kept for readers */
    _Atomic(kentry *) slot[];
} ktable;

#define KTABLE_MIN 256 /* the built-in kernels of two devices fit without growing */

static _Atomic(ktable *) g_table;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t g_count; /* entries, under g_mu */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* Set while this thread runs the built-in registration, whose calls to
 * ordo_kernel_register must not wait on the pthread_once they run inside. */
static _Thread_local int g_in_builtins;

static void register_builtins(void) {
    g_in_builtins = 1;
    ordo_cpu_kernels_register();
#if defined ORDO_WITH_CUDA || defined ORDO_CUDA_EMU
    ordo_cuda_kernels_register();
#endif
    g_in_builtins = 0;
}

static inline void ensure_builtins(void) {
    if (!g_in_builtins) pthread_once(&g_once, register_builtins);
}

/* Pinned host memory runs the CPU kernels. */
static inline int norm_dev(int dev_type) {
    switch (dev_type) {
    case ORDO_CPU:
    case ORDO_CPU_PINNED: return ORDO_CPU;
    case ORDO_GPU: return ORDO_GPU;
    default: return -1;
    }
}

/* FNV-1a over the name, the device type mixed in. */
static inline uint64_t khash(const char *name, int dev_type) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    h ^= (uint64_t)dev_type * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static ktable *table_new(size_t cap) {
    ktable *t = calloc(1, sizeof *t + cap * sizeof t->slot[0]);
    if (!t) return NULL;
    t->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) atomic_init(&t->slot[i], NULL);
    return t;
}

/* Under g_mu: puts e into t's first free slot of its probe sequence. */
static void table_put(ktable *t, kentry *e) {
    size_t i = e->hash & t->mask;
    while (atomic_load_explicit(&t->slot[i], memory_order_relaxed)) i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slot[i], e, memory_order_release);
}

ordo_kernel_fn ordo_kernel_lookup(const char *name, int dev_type) {
    const int dev = norm_dev(dev_type);
    if (!name || dev < 0) return NULL;
    ensure_builtins();
    ktable *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t) return NULL;
    const uint64_t h = khash(name, dev);
    for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
        kentry *e = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (!e) return NULL;
        if (e->hash == h && e->dev_type == dev && strcmp(e->name, name) == 0)
            return atomic_load_explicit(&e->fn, memory_order_acquire);
    }
}

int ordo_kernel_register(const char *name, int dev_type, ordo_kernel_fn fn) {
    const int dev = norm_dev(dev_type);
    if (!name || !*name) return set_error(ORDO_ERR_INVALID, "ordo_kernel_register: empty kernel name");
    /* A longer name could be registered but never pushed (ordo_tensor_kernel_id refuses it). */
    if (strlen(name) > ORDO_KERNEL_NAME_MAX)
        return set_error(ORDO_ERR_INVALID, "ordo_kernel_register: kernel name '%.24s...' is %zu characters long "
                         "(at most %d)", name, strlen(name), ORDO_KERNEL_NAME_MAX);
    if (!fn) return set_error(ORDO_ERR_INVALID, "ordo_kernel_register(%s): NULL function", name);
    if (dev < 0)
        return set_error(ORDO_ERR_INVALID, "ordo_kernel_register(%s): bad device type %d", name, dev_type);
    ensure_builtins();
    const uint64_t h = khash(name, dev);
    pthread_mutex_lock(&g_mu);
    ktable *t = atomic_load_explicit(&g_table, memory_order_relaxed);
    if (t) { /* replace? */
        for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
            kentry *e = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
            if (!e) break;
            if (e->hash == h && e->dev_type == dev && strcmp(e->name, name) == 0) {
                atomic_store_explicit(&e->fn, fn, memory_order_release);
                pthread_mutex_unlock(&g_mu);
                tensor_kernel_replaced(name, dev, fn);
                return 0;
            }
        }
    }
    /* grow at half full, so probe runs stay short */
    if (!t || (g_count + 1) * 2 > t->mask + 1) {
        const size_t cap = t ? (t->mask + 1) * 2 : KTABLE_MIN;
        ktable *nt = table_new(cap);
        if (!nt) {
            pthread_mutex_unlock(&g_mu);
            return set_error(ORDO_ERR_NOMEM, "ordo_kernel_register(%s): out of memory", name);
        }
        if (t)
            for (size_t i = 0; i <= t->mask; i++) {
                kentry *e = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
                if (e) table_put(nt, e);
            }
        nt->older = t;
        atomic_store_explicit(&g_table, nt, memory_order_release);
        t = nt;
    }
    const size_t len = strlen(name);
    kentry *e = malloc(sizeof *e + len + 1);
    if (!e) {
        pthread_mutex_unlock(&g_mu);
        return set_error(ORDO_ERR_NOMEM, "ordo_kernel_register(%s): out of memory", name);
    }
    e->hash = h;
    e->dev_type = dev;
    atomic_init(&e->fn, fn);
    memcpy(e->name, name, len + 1);
    table_put(t, e);
    g_count++;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* ---- view helpers -------------------------------------------------------- */

int64_t ordo_view_numel(const ordo_view *v) {
    if (!v) return 0;
    /* a zero size first: the other sizes of an empty view may not multiply within int64 */
    for (int d = 0; d < v->ndim && d < ORDO_MAX_DIMS; d++)
        if (v->shape[d] == 0) return 0;
    int64_t n = 1;
    for (int d = 0; d < v->ndim && d < ORDO_MAX_DIMS; d++) n *= v->shape[d];
    return n;
}

/* Row-major contiguous; the strides of size-1 dims do not matter, and a view
 * with no elements is contiguous. */
int ordo_view_is_contiguous(const ordo_view *v) {
    if (!v || v->ndim < 0 || v->ndim > ORDO_MAX_DIMS) return 0;
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] == 0) return 1;
    int64_t expect = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != expect) return 0;
        expect *= v->shape[d];
    }
    return 1;
}

size_t ordo_dtype_size(int dtype) {
    switch (dtype) {
    case ORDO_F32: return 4;
    case ORDO_F64: return 8;
    case ORDO_I32: return 4;
    case ORDO_I64: return 8;
    case ORDO_U8: return 1;
    default: return 0;
    }
}

const char *ordo_dtype_name(int dtype) {
    switch (dtype) {
    case ORDO_F32: return "float32";
    case ORDO_F64: return "float64";
    case ORDO_I32: return "int32";
    case ORDO_I64: return "int64";
    case ORDO_U8: return "uint8";
    default: return "unknown";
    }
}
