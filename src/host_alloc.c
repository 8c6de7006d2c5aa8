/*
 * host_alloc.c - a caching allocator for large host blocks.
 *
 * A freshly allocated large block comes from mmap, so every one of its pages
 * faults on first touch: for a 4 MB tensor that is ~1,000 faults, about the
 * time of a 1024x1024 matmul's last tenth.  Tensor code allocates and drops
 * same-sized outputs step after step, so freed large blocks are kept in size
 * classes and handed out again with their pages already mapped.
 *
 * Classes are 2^k, 1.25*2^k, 1.5*2^k and 1.75*2^k bytes (at most 25% of a
 * block unused); blocks under 64 KiB go straight to the C allocator, which
 * already reuses them well.  The cache holds at most ORDO_HOST_CACHE_MB
 * (default 256) megabytes; beyond that, freed blocks go back to the system.
 */
#include "host_alloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SMALL_MAX (64u << 10)
#define NCLASSES (4 * 64)

typedef struct block { struct block *next; } block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *free_lists[NCLASSES];
static size_t cached, cache_cap;
static int ready;

static void drain_at_exit(void) { host_cache_empty(); }

static void init_locked(void) {
    if (ready) return;
    ready = 1;
    const char *s = getenv("ORDO_HOST_CACHE_MB");
    long mb = s && *s ? strtol(s, NULL, 10) : 256;
    cache_cap = mb > 0 ? (size_t)mb << 20 : 0;
    atexit(drain_at_exit);
}

/* The class of a large size, and that class's block size. */
static int size_class(size_t n, size_t *class_bytes) {
    int k = 16; /* n >= SMALL_MAX = 2^16 */
    while (k < 62 && ((size_t)1 << (k + 1)) <= n) k++;
    size_t base = (size_t)1 << k, quarter = base >> 2;
    size_t sub = (n - base + quarter - 1) / quarter; /* 0..4 quarters above 2^k */
    if (sub == 4) {
        k++;
        sub = 0;
        base <<= 1;
        quarter <<= 1;
    }
    *class_bytes = base + sub * quarter;
    return k * 4 + (int)sub;
}

void *host_alloc(size_t nbytes) {
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL;
    if (rounded < SMALL_MAX) return aligned_alloc(64, rounded ? rounded : 64);
    size_t bytes;
    int c = size_class(rounded, &bytes);
    pthread_mutex_lock(&mu);
    init_locked();
    block *b = free_lists[c];
    if (b) {
        free_lists[c] = b->next;
        cached -= bytes;
    }
    pthread_mutex_unlock(&mu);
    return b ? (void *)b : aligned_alloc(64, bytes);
}

void host_free(void *p, size_t nbytes) {
    if (!p) return;
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < SMALL_MAX) {
        free(p);
        return;
    }
    size_t bytes;
    int c = size_class(rounded, &bytes);
    pthread_mutex_lock(&mu);
    init_locked();
    if (cached + bytes <= cache_cap) {
        block *b = p;
        b->next = free_lists[c];
        free_lists[c] = b;
        cached += bytes;
        p = NULL;
    }
    pthread_mutex_unlock(&mu);
    free(p);
}

size_t host_cached_bytes(void) {
    pthread_mutex_lock(&mu);
    size_t n = cached;
    pthread_mutex_unlock(&mu);
    return n;
}

void host_cache_empty(void) {
    pthread_mutex_lock(&mu);
    for (int c = 0; c < NCLASSES; c++) {
        while (free_lists[c]) {
            block *b = free_lists[c];
            free_lists[c] = b->next;
            free(b);
        }
    }
    cached = 0;
    pthread_mutex_unlock(&mu);
}
