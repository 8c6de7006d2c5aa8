/*
 * host_alloc.c - caching allocators for host memory: pageable blocks for
 * CPU tensors, and page-locked ("pinned") blocks for cpu_pinned tensors.
 *
 * Pageable: a freshly allocated large block comes from mmap, so every one
 * of its pages faults on first touch: for a 4 MB tensor that is ~1,000
 * faults, about the time of a 1024x1024 matmul's last tenth.  Tensor code
 * allocates and drops same-sized outputs step after step, so freed large
 * blocks are kept in size classes and handed out again with their pages
 * already mapped.  Blocks under 64 KiB are cached too, in a cache of their
 * own (16 MB at most, less if ORDO_HOST_CACHE_MB says so): the small tensors of a loop come and go at every
 * op, and glibc serves a 64-byte-aligned block on a slow path (memalign
 * has no per-thread cache; about 800 instructions for a 64-byte block,
 * more than the op that fills it).
 *
 * Pinned: page-locking memory (cudaHostAlloc) costs a system call and
 * page-table work of milliseconds, so every size is cached, from 512 bytes.
 *
 * Classes are 2^k, 1.25*2^k, 1.5*2^k and 1.75*2^k bytes (at most 25% of a
 * block unused).  Each cache holds at most ORDO_HOST_CACHE_MB (pageable) or
 * ORDO_PINNED_CACHE_MB (pinned) megabytes, 256 by default; beyond that,
 * freed blocks go back to the system, and an allocation the system refuses
 * empties the caches and asks once more.
 */
#include "host_alloc.h"

#include "device.h"
#include "internal.h" /* spin_lock */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NCLASSES (4 * 64)

typedef struct block { struct block *next; } block;

typedef struct cache {
    const char *env;  /* the size limit's environment variable */
    long default_mb;  /* the limit without it (the small cache: also its most) */
    int min_k;        /* smallest class is 2^min_k bytes */
    pthread_mutex_t mu;
    /* The small cache takes a spin lock instead (use_spin): it is taken
     * twice for every small tensor made and freed, to move one pointer, and
     * an uncontended pthread mutex cost ~50 instructions a lock and unlock
     * (of ~4,300 for r = a + b from Lua).  The others keep the mutex: their
     * emptying frees blocks (pinned ones through the CUDA runtime) under it. */
    spin_lock spin;
    bool use_spin;
    block *free_lists[NCLASSES];
    size_t cached, cap;
    int ready;
} cache;

static cache pageable = {.env = "ORDO_HOST_CACHE_MB", .default_mb = 256, .min_k = 16, .mu = PTHREAD_MUTEX_INITIALIZER};
/* ORDO_HOST_CACHE_MB limits it too (at most 16 MB), so that 0 turns both
 * caches off: the sanitizer and valgrind runs must see every block freed. */
static cache small = {.env = "ORDO_HOST_CACHE_MB", .default_mb = 16, .min_k = 6, .mu = PTHREAD_MUTEX_INITIALIZER,
                      .use_spin = true};
static cache pinned = {.env = "ORDO_PINNED_CACHE_MB", .default_mb = 256, .min_k = 9, .mu = PTHREAD_MUTEX_INITIALIZER};

static inline void cache_lock(cache *c) {
    if (c->use_spin) spin_lock_acquire(&c->spin);
    else pthread_mutex_lock(&c->mu);
}
static inline void cache_unlock(cache *c) {
    if (c->use_spin) spin_lock_release(&c->spin);
    else pthread_mutex_unlock(&c->mu);
}

#define SMALL_MAX ((size_t)1 << 16) /* pageable blocks below this go to the small cache */

static void drain_at_exit(void) { host_cache_empty(); }
static void register_drain(void) { atexit(drain_at_exit); }

static void init_locked(cache *c) {
    if (c->ready) return;
    c->ready = 1;
    const char *s = getenv(c->env);
    long mb = s && *s ? strtol(s, NULL, 10) : c->default_mb;
    if (c == &small && mb > c->default_mb) mb = c->default_mb;
    c->cap = mb > 0 ? (size_t)mb << 20 : 0;
    /* Pinned blocks are not freed at exit: the CUDA runtime may already be
     * torn down by then, and the system reclaims them anyway. */
    if (c == &pageable || c == &small) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, register_drain);
    }
}

/* The class of a size of at least 2^min_k, and that class's block size. */
static int size_class(const cache *c, size_t n, size_t *class_bytes) {
    /* k: the largest with 2^k <= n, at least min_k and at most 62 */
    int k = n ? 63 - __builtin_clzll((unsigned long long)n) : 0;
    if (k < c->min_k) k = c->min_k;
    if (k > 62) k = 62;
    size_t base = (size_t)1 << k, quarter = base >> 2;
    size_t sub = n > base ? (n - base + quarter - 1) / quarter : 0; /* 0..4 quarters above 2^k */
    if (sub == 4) {
        k++;
        sub = 0;
        base <<= 1;
        quarter <<= 1;
    }
    *class_bytes = base + sub * quarter;
    return k * 4 + (int)sub;
}

/* A cached block of class c_idx, or NULL. */
static void *cache_take(cache *c, int c_idx, size_t bytes) {
    cache_lock(c);
    init_locked(c);
    block *b = c->free_lists[c_idx];
    if (b) {
        c->free_lists[c_idx] = b->next;
        c->cached -= bytes;
    }
    cache_unlock(c);
    return b;
}

/* Keeps p if the cache has room (returns 1), else 0: the caller frees it. */
static int cache_put(cache *c, int c_idx, size_t bytes, void *p) {
    int kept = 0;
    cache_lock(c);
    init_locked(c);
    if (c->cached + bytes <= c->cap) {
        block *b = p;
        b->next = c->free_lists[c_idx];
        c->free_lists[c_idx] = b;
        c->cached += bytes;
        kept = 1;
    }
    cache_unlock(c);
    return kept;
}

static size_t cache_bytes(cache *c) {
    cache_lock(c);
    size_t n = c->cached;
    cache_unlock(c);
    return n;
}

/* ---- pageable ------------------------------------------------------------- */

/* The cache a pageable block of rounded bytes belongs to. */
static cache *pageable_cache(size_t rounded) { return rounded < SMALL_MAX ? &small : &pageable; }

void *host_alloc(size_t nbytes) {
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL;
    if (!rounded) rounded = 64;
    cache *pc = pageable_cache(rounded);
    size_t bytes;
    int c = size_class(pc, rounded, &bytes);
    void *b = cache_take(pc, c, bytes);
    if (b) return b;
    if ((b = aligned_alloc(64, bytes))) return b;
    /* Refused (a memory limit: ulimit -v, strict overcommit): the cached
     * blocks of other sizes are free memory the system may lend again. */
    if (host_cached_bytes() == 0) return NULL;
    host_cache_empty();
    return aligned_alloc(64, bytes);
}

void host_free(void *p, size_t nbytes) {
    if (!p) return;
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (!rounded) rounded = 64;
    cache *pc = pageable_cache(rounded);
    size_t bytes;
    int c = size_class(pc, rounded, &bytes);
    if (!cache_put(pc, c, bytes, p)) free(p);
}

size_t host_cached_bytes(void) { return cache_bytes(&pageable) + cache_bytes(&small); }

static void drain(cache *c) {
    cache_lock(c);
    for (int i = 0; i < NCLASSES; i++) {
        while (c->free_lists[i]) {
            block *b = c->free_lists[i];
            c->free_lists[i] = b->next;
            free(b);
        }
    }
    c->cached = 0;
    cache_unlock(c);
}

void host_cache_empty(void) {
    drain(&pageable);
    drain(&small);
}

/* ---- pinned ---------------------------------------------------------------- */

void *host_alloc_pinned(size_t nbytes, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    if (!b) {
        snprintf(err, errlen, "pinned host memory needs a CUDA device (none available)");
        return NULL;
    }
    size_t bytes;
    int c = size_class(&pinned, nbytes, &bytes);
    if (bytes < nbytes) {
        snprintf(err, errlen, "cannot allocate %zu bytes of pinned host memory", nbytes);
        return NULL;
    }
    void *p = cache_take(&pinned, c, bytes);
    if (p) return p;
    if (b->host_alloc_pinned(bytes, &p, err, errlen) == 0) return p;
    /* The cache may hold blocks of other sizes: give them back and retry. */
    if (host_pinned_cached_bytes() == 0) return NULL;
    host_pinned_cache_empty();
    return b->host_alloc_pinned(bytes, &p, err, errlen) == 0 ? p : NULL;
}

void host_free_pinned(void *p, size_t nbytes) {
    if (!p) return;
    size_t bytes;
    int c = size_class(&pinned, nbytes, &bytes);
    if (!cache_put(&pinned, c, bytes, p)) ordo_device_backend()->host_free_pinned(p);
}

size_t host_pinned_cached_bytes(void) { return cache_bytes(&pinned); }

void host_pinned_cache_empty(void) {
    const device_backend *b = ordo_device_backend();
    pthread_mutex_lock(&pinned.mu);
    for (int c = 0; c < NCLASSES; c++) {
        while (pinned.free_lists[c]) {
            block *x = pinned.free_lists[c];
            pinned.free_lists[c] = x->next;
            b->host_free_pinned(x);
        }
    }
    pinned.cached = 0;
    pthread_mutex_unlock(&pinned.mu);
}
