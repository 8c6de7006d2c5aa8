/*
 * dev_alloc.c - the caching device allocator.
 *
 * cudaMalloc and cudaFree cost tens of microseconds to milliseconds, and
 * cudaFree synchronises the whole device: a training step that allocates
 * and drops a few hundred tensors would spend more time there than in its
 * kernels, and lose all overlap between host and device.  Tensor code asks
 * for the same sizes step after step, so a freed block is kept and handed
 * to the next request that fits; in steady state the backend is never
 * called.
 *
 * Reuse without synchronisation.  When a storage is freed, the engine has
 * only *queued* the work that uses it; the GPU may still be reading it.  The
 * block is therefore cached together with the event recorded after that
 * work (dev_event.h), and whoever gets the block next receives the event and
 * makes its stream wait for it - a wait on the device, free when both uses
 * are on one stream.  The host waits for an event only when the memory goes
 * back to the device (empty_cache, out of memory, shutdown).
 *
 * Sizes.  A request is rounded up to a size class, so that blocks are
 * interchangeable between requests of slightly different sizes:
 *  - under 1 MiB, to a multiple of 512 bytes (2047 classes);
 *  - from 1 MiB to 16 MiB, to the next of eight steps per power of two:
 *    1 MiB, 1.125, 1.25, ... 1.875, 2, 2.25, ... 3.75, 4, 4.5, ... 15, 16
 *    (steps of 128 KiB below 2 MiB, 256 KiB below 4, 512 KiB below 8 and
 *    1 MiB below 16);
 *  - from 16 MiB up, to a multiple of 2 MiB.
 * So a block is never more than 511 bytes larger than its request below
 * 1 MiB, and from 1 MiB up less than an eighth (12.5%) larger and less
 * than 2 MiB larger: 1 MiB + 1 byte takes 1.125 MiB, 2 MiB + 4 bytes
 * 2.25 MiB, 16 MiB + 1 byte 18 MiB, 1 GiB + 1 byte 1 GiB + 2 MiB.  The
 * backend is asked for the block size, so this is real memory, and the
 * statistics count it.  Eight classes per power of two bound that waste
 * while sizes that vary a little from step to step (the last batch, a
 * sequence length) still share blocks; 2 MiB steps from 16 MiB up keep
 * the absolute waste of big tensors small.  Every multiple of 2 MiB is a
 * class boundary, so a block never spans more of the 2 MiB pages in which
 * cudaMalloc maps large allocations than its request would.
 *
 * Reuse.  A small request takes a cached block of exactly its class; a
 * large one the smallest cached block of at least its class and at most
 * twice it - a larger block would waste more than it saves, and stays
 * cached for a request it fits better.  So a block in use can be up to
 * twice the request's class while there are cached blocks (a request
 * that misses is given its own class, and once the device runs out the
 * cache is emptied: the retry gets the exact class).  Among blocks of one
 * size the one freed longest ago is taken: its event has most likely
 * completed, so the new user's stream waits for nothing (the most
 * recently freed one would make it wait for work just queued, possibly on
 * another stream).
 *
 * Data structures, per device, under one mutex held only for O(1) steps:
 *  - small blocks (< 1 MiB) in 2047 FIFO lists, one per 512-byte class;
 *  - large blocks in one FIFO list per class up to about 8 GiB (32
 *    classes below 16 MiB, then one per 2 MiB), with a bitmap of the
 *    non-empty lists so that best fit is a scan of at most a few 64-bit
 *    words; larger blocks in one unsorted list (there are few);
 *  - blocks in use in a hash table by pointer, since dev_free gets only
 *    the pointer.
 * The backend (mem_alloc, mem_free, event waits) is called without the
 * mutex: cudaMalloc may take milliseconds and an event wait as long as the
 * GPU's queue, and neither must stall other threads' hits and frees.
 *
 * Out of memory.  When the device refuses an allocation, the cache of that
 * device is emptied (each block after its event) and the allocation tried
 * once more - always, even when this thread had nothing to give back:
 * another thread's release may have finished meanwhile, and on a real GPU
 * another process or library may have freed memory.  oom_retries counts
 * these retries, one per refusal by the device.  Emptying runs outside
 * the mutex, so another thread that runs out of memory meanwhile waits for
 * the release in progress instead of failing while memory is about to
 * come back.  Above this, the front end collects garbage (freeing
 * unreachable tensors) and calls the allocator again.
 *
 * AddressSanitizer.  Rounding hides a kernel that reads or writes a little
 * past its tensor's end: the bytes are inside the block.  In an ASan build
 * on the simulated device (device memory is host memory there: make check,
 * and the CUDA emulation's make check-cuda-emu), the bytes of a block past
 * the request are poisoned, so such an access is reported.  A reused block
 * is poisoned for its new request only after its last user's work is done
 * (a host wait, in those builds alone): that work may still touch bytes
 * the new request does not cover.
 */
#include "dev_alloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "ordo.h"
#include "tensor_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#define SMALL_ALIGN ((size_t)512)
#define LARGE_MIN_LOG2 20
#define LARGE_MIN ((size_t)1 << LARGE_MIN_LOG2) /* from here on, eight classes per power of two */
#define LARGE_STEPS_LOG2 3            /* ... that is 2^3 */
#define LARGE_ALIGN ((size_t)2 << 20) /* the largest step, reached at 16 MiB */
#define MID_MAX ((size_t)16 << 20)    /* from here on, 2 MiB multiples */
#define NSMALL ((int)(LARGE_MIN / SMALL_ALIGN) - 1) /* classes 512 .. 1 MiB - 512 */
#define NMID 32                                      /* classes 1 MiB .. 15 MiB (4 powers of two x 8) */
#define NLARGE 4160                                  /* lists for 1 MiB .. 8270 MiB (65 bitmap words) */
#define USED_BUCKETS0 256

typedef struct block {
    void *ptr;
    size_t size;        /* rounded; what the backend allocated */
    dev_event *ready;   /* while cached: the last user's event (may be NULL) */
    struct block *next; /* in a cache list or a hash chain */
} block;

typedef struct {
    block *head, *tail;
} fifo;

typedef struct dev_state {
    pthread_mutex_t mu;
    pthread_cond_t released;  /* a release of cached blocks finished */
    int releasing;            /* threads giving cached blocks back right now */

    block **used;             /* blocks in use, hashed by pointer */
    size_t used_mask, nused;

    size_t ncached;
    fifo small[NSMALL];
    fifo large[NLARGE];
    uint64_t large_bits[NLARGE / 64]; /* bit i: large[i] is not empty */
    block *huge;                      /* cached blocks larger than the last list's class */

    ordo_gpu_memory_stats st;
} dev_state;

/* Created at a device's first use and kept until dev_alloc_shutdown; the
 * pointer is read without a lock on every call. */
static _Atomic(dev_state *) devs[ORDO_MAX_DEVICES];
static pthread_mutex_t devs_mu = PTHREAD_MUTEX_INITIALIZER;

static int fail(int code, char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(int code, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* floor(log2(n)), n > 0. */
static int log2_floor(size_t n) { return 63 - __builtin_clzll((unsigned long long)n); }

size_t dev_alloc_block_size(size_t nbytes) {
    if (nbytes > SIZE_MAX - LARGE_ALIGN) return 0;
    size_t n = nbytes ? nbytes : 1;
    size_t r = (n + SMALL_ALIGN - 1) & ~(SMALL_ALIGN - 1);
    if (r < LARGE_MIN) return r;
    /* The step of r's power of two, at most 2 MiB.  (Rounding r rather
     * than n gives the same result - every step is a multiple of 512 - and
     * keeps n's power of two from being one below 1 MiB.) */
    size_t step = (size_t)1 << (log2_floor(r) - LARGE_STEPS_LOG2);
    if (step > LARGE_ALIGN) step = LARGE_ALIGN;
    return (r + step - 1) & ~(step - 1);
}

/* The large list of the largest class <= size (size >= 1 MiB); for a class
 * that is its own list.  May be NLARGE or more: the huge list's sizes.
 * Increasing with size, so that best fit is a scan upwards. */
static size_t large_index(size_t size) {
    if (size < MID_MAX) {
        const size_t steps = (size_t)1 << LARGE_STEPS_LOG2;
        int e = log2_floor(size);                  /* 20 .. 23 */
        size_t k = size >> (e - LARGE_STEPS_LOG2); /* 8 .. 15 */
        return (size_t)(e - LARGE_MIN_LOG2) * steps + k - steps;
    }
    return NMID + (size - MID_MAX) / LARGE_ALIGN;
}

/* ---- AddressSanitizer's view of a block (see the top of the file) ----------------- */

#if defined(__SANITIZE_ADDRESS__)
static int guard_tails(void) {
    const device_backend *b = ordo_device_backend();
    return b && !strcmp(b->name, "simulated");
}

/* The first nbytes of the block usable, rounded up to 4, the rest of it
 * poisoned.  (A byte atomic on the GPU is a compare-and-swap of the 4-byte
 * word that holds the byte - kernels/cuda/index.cu - legal inside the
 * allocation: blocks are whole multiples of 512 bytes.) */
static void guard_tail(void *ptr, size_t nbytes, size_t size) {
    const size_t usable = (nbytes + 3) & ~(size_t)3;
    ASAN_UNPOISON_MEMORY_REGION(ptr, usable);
    ASAN_POISON_MEMORY_REGION((char *)ptr + usable, size - usable);
}

static void unguard(void *ptr, size_t size) { ASAN_UNPOISON_MEMORY_REGION(ptr, size); }
#else
static int guard_tails(void) { return 0; }
static void guard_tail(void *ptr, size_t nbytes, size_t size) { (void)ptr, (void)nbytes, (void)size; }
static void unguard(void *ptr, size_t size) { (void)ptr, (void)size; }
#endif

/* "512.0 MiB": for messages. */
static const char *human(size_t n, char *buf, size_t len) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (n < 1024) {
        snprintf(buf, len, "%zu B", n);
        return buf;
    }
    double v = (double)n / 1024;
    int u = 0;
    while (v >= 1023.95 && u < 4) v /= 1024, u++; /* 1048572 is "1.0 MiB", not "1024.0 KiB" */
    snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

/* ---- device state --------------------------------------------------------------- */

static int get_state(int dev_id, dev_state **out, char *err, size_t errlen) {
    *out = NULL;
    if (dev_id < 0 || dev_id >= ORDO_MAX_DEVICES)
        return fail(ORDO_ERR_INVALID, err, errlen, "gpu(%d): invalid device id", dev_id);
    dev_state *d = atomic_load_explicit(&devs[dev_id], memory_order_acquire);
    if (d) {
        *out = d;
        return 0;
    }
    /* First use of this device: check it exists (once; later calls see the
     * state and never ask the backend). */
    const device_backend *b = ordo_device_backend();
    int n = b ? b->count() : 0;
    if (n <= 0) return fail(ORDO_ERR_NO_DEVICE, err, errlen, "gpu(%d): no CUDA device available", dev_id);
    if (dev_id >= n)
        return fail(ORDO_ERR_NO_DEVICE, err, errlen, "gpu(%d) does not exist (%d device%s)", dev_id, n,
                    n == 1 ? "" : "s");
    pthread_mutex_lock(&devs_mu);
    d = atomic_load_explicit(&devs[dev_id], memory_order_relaxed);
    if (!d && (d = calloc(1, sizeof *d))) {
        if (!(d->used = calloc(USED_BUCKETS0, sizeof *d->used))) {
            free(d);
            d = NULL;
        } else {
            d->used_mask = USED_BUCKETS0 - 1;
            pthread_mutex_init(&d->mu, NULL);
            pthread_cond_init(&d->released, NULL);
            atomic_store_explicit(&devs[dev_id], d, memory_order_release);
        }
    }
    pthread_mutex_unlock(&devs_mu);
    if (!d) return fail(ORDO_ERR_NOMEM, err, errlen, "gpu(%d): out of host memory for the allocator", dev_id);
    *out = d;
    return 0;
}

/* ---- blocks in use -------------------------------------------------------------- */

static size_t hash_ptr(const void *p, size_t mask) {
    uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 31)) & mask;
}

/* Doubles the table once it holds more blocks than buckets; when the
 * bigger table cannot be had, the chains just get longer. */
static void used_insert(dev_state *d, block *b) {
    if (d->nused > d->used_mask) {
        size_t nb = (d->used_mask + 1) * 2;
        block **t = calloc(nb, sizeof *t);
        if (t) {
            for (size_t i = 0; i <= d->used_mask; i++) {
                while (d->used[i]) {
                    block *x = d->used[i];
                    d->used[i] = x->next;
                    size_t h = hash_ptr(x->ptr, nb - 1);
                    x->next = t[h];
                    t[h] = x;
                }
            }
            free(d->used);
            d->used = t;
            d->used_mask = nb - 1;
        }
    }
    size_t h = hash_ptr(b->ptr, d->used_mask);
    b->next = d->used[h];
    d->used[h] = b;
    d->nused++;
}

static block *used_remove(dev_state *d, void *ptr) {
    for (block **pp = &d->used[hash_ptr(ptr, d->used_mask)]; *pp; pp = &(*pp)->next) {
        block *b = *pp;
        if (b->ptr != ptr) continue;
        *pp = b->next;
        b->next = NULL;
        d->nused--;
        return b;
    }
    return NULL;
}

/* ---- the cache ------------------------------------------------------------------ */

static void fifo_push(fifo *f, block *b) {
    b->next = NULL;
    if (f->tail) f->tail->next = b;
    else f->head = b;
    f->tail = b;
}

static block *fifo_pop(fifo *f) {
    block *b = f->head;
    if (b && !(f->head = b->next)) f->tail = NULL;
    return b;
}

static void cache_put(dev_state *d, block *b) {
    if (b->size < LARGE_MIN) {
        fifo_push(&d->small[b->size / SMALL_ALIGN - 1], b);
    } else if (large_index(b->size) < NLARGE) {
        size_t i = large_index(b->size);
        fifo_push(&d->large[i], b);
        d->large_bits[i / 64] |= (uint64_t)1 << (i % 64);
    } else {
        b->next = d->huge;
        d->huge = b;
    }
    d->ncached++;
}

/* The first non-empty large list in [lo, hi], or -1. */
static long first_large(const dev_state *d, size_t lo, size_t hi) {
    for (size_t w = lo / 64; w <= hi / 64; w++) {
        uint64_t bits = d->large_bits[w];
        if (w == lo / 64) bits &= ~(uint64_t)0 << (lo % 64);
        if (w == hi / 64 && hi % 64 != 63) bits &= ((uint64_t)2 << (hi % 64)) - 1;
        if (bits) return (long)(w * 64 + (size_t)__builtin_ctzll(bits));
    }
    return -1;
}

/* The best cached block for a request of size (rounded), taken out of the
 * cache, or NULL. */
static block *cache_take(dev_state *d, size_t size) {
    if (!d->ncached) return NULL;
    block *b = NULL;
    if (size < LARGE_MIN) {
        b = fifo_pop(&d->small[size / SMALL_ALIGN - 1]);
    } else {
        size_t max = size <= SIZE_MAX / 2 ? 2 * size : SIZE_MAX;
        size_t lo = large_index(size), hi = large_index(max);
        if (lo < NLARGE) {
            long i = first_large(d, lo, hi < NLARGE ? hi : NLARGE - 1);
            if (i >= 0) {
                b = fifo_pop(&d->large[i]);
                if (!d->large[i].head) d->large_bits[i / 64] &= ~((uint64_t)1 << (i % 64));
            }
        }
        if (!b && hi >= NLARGE) {
            block **best = NULL;
            for (block **pp = &d->huge; *pp; pp = &(*pp)->next)
                if ((*pp)->size >= size && (*pp)->size <= max && (!best || (*pp)->size < (*best)->size)) best = pp;
            if (best) {
                b = *best;
                *best = b->next;
            }
        }
    }
    if (b) {
        b->next = NULL;
        d->ncached--;
    }
    return b;
}

/* Takes every cached block out, as one list; the caller gives them back
 * to the device (release_blocks).  Counted as freed from here on, so the
 * statistics stay "reserved = allocated + cached". */
static block *cache_take_all(dev_state *d) {
    block *list = d->huge;
    d->huge = NULL;
    if (d->ncached) {
        for (int i = 0; i < NSMALL; i++) {
            block *b;
            while ((b = fifo_pop(&d->small[i]))) b->next = list, list = b;
        }
        for (int w = 0; w < NLARGE / 64; w++) {
            while (d->large_bits[w]) {
                int i = w * 64 + __builtin_ctzll(d->large_bits[w]);
                block *b;
                while ((b = fifo_pop(&d->large[i]))) b->next = list, list = b;
                d->large_bits[w] &= ~((uint64_t)1 << (i % 64));
            }
        }
    }
    for (block *b = list; b; b = b->next) {
        d->st.reserved_bytes -= (int64_t)b->size;
        d->st.num_device_frees++;
    }
    d->ncached = 0;
    return list;
}

/* Gives blocks back to the device, each once its last user's work is done
 * (the memory may still be read by a kernel in flight).  A wait that
 * reports an asynchronous failure does not stop the free: the failed work
 * is over either way.  Returns the number of such failures, the first one
 * in err.  With err NULL (an allocation's retry, shutdown: nobody to tell)
 * the waits leave the device's failure to the user's next wait: taken
 * there, it was lost, and the failed tensor read its garbage without an
 * error. */
static int release_blocks(int dev_id, block *list, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    int failures = 0;
    char buf[256];
    while (list) {
        block *x = list;
        list = x->next;
        if (x->ready) {
            int bad = err ? dev_event_sync(x->ready, buf, sizeof buf) : dev_event_wait_quiet(x->ready, buf, sizeof buf);
            if (bad && failures++ == 0 && err && errlen)
                snprintf(err, errlen, "%s", buf);
            dev_event_unref(x->ready);
        }
        if (guard_tails()) unguard(x->ptr, x->size);
        b->mem_free(dev_id, x->ptr);
        free(x);
    }
    return failures;
}

/* Empties the cache of d; then waits until no other thread is still giving
 * blocks back, so that the device has all of it.  Returns the number of
 * failed event waits (message in err). */
static int empty_and_wait(int dev_id, dev_state *d, char *err, size_t errlen) {
    pthread_mutex_lock(&d->mu);
    block *list = cache_take_all(d);
    if (list) d->releasing++;
    pthread_mutex_unlock(&d->mu);
    if (!list) {
        pthread_mutex_lock(&d->mu);
        while (d->releasing) pthread_cond_wait(&d->released, &d->mu);
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    int failures = release_blocks(dev_id, list, err, errlen);
    pthread_mutex_lock(&d->mu);
    d->releasing--;
    pthread_cond_broadcast(&d->released);
    while (d->releasing) pthread_cond_wait(&d->released, &d->mu);
    pthread_mutex_unlock(&d->mu);
    return failures;
}

/* ---- allocation ----------------------------------------------------------------- */

/* "gpu(0): out of memory allocating 4.0 MiB (60.0 MiB in use by tensors,
 * 0 B cached; device: 3.5 MiB free of 64.0 MiB)".  When the request was
 * rounded to a block that prints differently, the block is named too
 * ("allocating 2.0 MiB (rounded to 2.2 MiB; ...").  When the request or
 * its block would print the same as the free memory although they differ
 * ("allocating 4.0 MiB ... 4.0 MiB free"), those numbers are given in
 * bytes, so the message shows why the device refused. */
static int oom_message(int dev_id, size_t nbytes, size_t size, const ordo_gpu_memory_stats *st, size_t dev_free,
                       size_t dev_total, char *err, size_t errlen) {
    char req[48], blk[48], in_use[32], cached[32], fr[48], total[32], rounded[80] = "";
    human(nbytes, req, sizeof req);
    human(size, blk, sizeof blk);
    human(dev_free, fr, sizeof fr);
    if (dev_total && ((size != dev_free && !strcmp(blk, fr)) || (nbytes != dev_free && !strcmp(req, fr)))) {
        snprintf(req, sizeof req, "%zu bytes", nbytes);
        snprintf(blk, sizeof blk, "%zu bytes", size);
        snprintf(fr, sizeof fr, "%zu bytes", dev_free);
    }
    if (strcmp(req, blk)) snprintf(rounded, sizeof rounded, "rounded to %s; ", blk);
    human((size_t)st->allocated_bytes, in_use, sizeof in_use);
    human((size_t)(st->reserved_bytes - st->allocated_bytes), cached, sizeof cached);
    if (dev_total)
        return fail(ORDO_ERR_NOMEM, err, errlen,
                    "gpu(%d): out of memory allocating %s (%s%s in use by tensors, %s cached; device: %s free of %s)",
                    dev_id, req, rounded, in_use, cached, fr, human(dev_total, total, sizeof total));
    return fail(ORDO_ERR_NOMEM, err, errlen, "gpu(%d): out of memory allocating %s (%s%s in use by tensors, %s cached)",
                dev_id, req, rounded, in_use, cached);
}

/* Hands the block's event to the caller, or (ready NULL) waits for it. */
static void hand_over(dev_event *ev, dev_event **ready) {
    if (ready) {
        *ready = ev;
    } else if (ev) {
        char buf[256];
        dev_event_wait_quiet(ev, buf, sizeof buf); /* a failure belongs to the previous user's op: left for its wait */
        dev_event_unref(ev);
    }
}

int dev_alloc(int dev_id, size_t nbytes, void **ptr, dev_event **ready, char *err, size_t errlen) {
    *ptr = NULL;
    if (ready) *ready = NULL;
    dev_state *d;
    int rc = get_state(dev_id, &d, err, errlen);
    if (rc) return rc;
    size_t size = dev_alloc_block_size(nbytes);
    if (!size) return fail(ORDO_ERR_NOMEM, err, errlen, "gpu(%d): out of memory allocating %zu bytes", dev_id, nbytes);

    pthread_mutex_lock(&d->mu);
    block *b = cache_take(d, size);
    if (b) {
        d->st.cache_hits++;
        used_insert(d, b);
        d->st.allocated_bytes += (int64_t)b->size;
        if (d->st.allocated_bytes > d->st.peak_allocated_bytes) d->st.peak_allocated_bytes = d->st.allocated_bytes;
        dev_event *ev = b->ready;
        b->ready = NULL;
        *ptr = b->ptr;
        pthread_mutex_unlock(&d->mu);
        if (guard_tails()) {
            if (ev) ordo_device_sim_event_wait_quiet(ev->ev);
            guard_tail(b->ptr, nbytes, b->size);
        }
        hand_over(ev, ready);
        return 0;
    }
    d->st.cache_misses++;
    pthread_mutex_unlock(&d->mu);

    /* A miss: ask the device (without the lock: see the top of the file).
     * The block record first, so that no failure after the device call
     * has to give memory back. */
    if (!(b = malloc(sizeof *b)))
        return fail(ORDO_ERR_NOMEM, err, errlen, "gpu(%d): out of host memory for a block record", dev_id);
    const device_backend *be = ordo_device_backend();
    char buf[256];
    int brc = be->mem_alloc(dev_id, size, &b->ptr, buf, sizeof buf);
    if (brc == 1) {
        /* Out of memory: give the cache back and retry, once (see the top
         * of the file for why even with nothing to give back). */
        empty_and_wait(dev_id, d, NULL, 0);
        pthread_mutex_lock(&d->mu);
        d->st.oom_retries++;
        pthread_mutex_unlock(&d->mu);
        brc = be->mem_alloc(dev_id, size, &b->ptr, buf, sizeof buf);
    }
    if (brc) {
        free(b);
        if (brc != 1) return fail(ORDO_ERR_FAILED, err, errlen, "%s", buf);
        ordo_gpu_memory_stats st;
        pthread_mutex_lock(&d->mu);
        st = d->st;
        pthread_mutex_unlock(&d->mu);
        size_t dev_free_bytes = 0, dev_total = 0;
        be->mem_info(dev_id, &dev_free_bytes, &dev_total);
        return oom_message(dev_id, nbytes, size, &st, dev_free_bytes, dev_total, err, errlen);
    }

    b->size = size;
    b->ready = NULL;
    if (guard_tails()) guard_tail(b->ptr, nbytes, size);
    pthread_mutex_lock(&d->mu);
    used_insert(d, b);
    d->st.num_device_allocs++;
    d->st.allocated_bytes += (int64_t)size;
    d->st.reserved_bytes += (int64_t)size;
    if (d->st.allocated_bytes > d->st.peak_allocated_bytes) d->st.peak_allocated_bytes = d->st.allocated_bytes;
    if (d->st.reserved_bytes > d->st.peak_reserved_bytes) d->st.peak_reserved_bytes = d->st.reserved_bytes;
    pthread_mutex_unlock(&d->mu);
    *ptr = b->ptr;
    return 0;
}

void dev_free(int dev_id, void *ptr, dev_event *last_use) {
    if (!ptr) {
        dev_event_unref(last_use);
        return;
    }
    dev_state *d = dev_id >= 0 && dev_id < ORDO_MAX_DEVICES
                       ? atomic_load_explicit(&devs[dev_id], memory_order_acquire)
                       : NULL;
    block *b = NULL;
    if (d) {
        pthread_mutex_lock(&d->mu);
        if ((b = used_remove(d, ptr))) {
            b->ready = last_use;
            d->st.allocated_bytes -= (int64_t)b->size;
            cache_put(d, b);
        }
        pthread_mutex_unlock(&d->mu);
    }
    if (!b) {
        /* A caller's bug (a double free, a wrong device).  Caching the
         * pointer would hand one block to two users, so refuse it loudly;
         * aborting would take a whole interactive session down with it. */
        fprintf(stderr, "ordo: dev_free: %p is not a block in use on gpu(%d) (double free?); ignored\n", ptr,
                dev_id);
        dev_event_unref(last_use);
    }
}

int dev_empty_cache(int dev_id, char *err, size_t errlen) {
    dev_state *d;
    int rc = get_state(dev_id, &d, err, errlen);
    if (rc) return rc;
    return empty_and_wait(dev_id, d, err, errlen) ? ORDO_ERR_FAILED : 0;
}

int dev_empty_cache_quiet(int dev_id) {
    dev_state *d;
    char err[256];
    if (get_state(dev_id, &d, err, sizeof err)) return 1;
    empty_and_wait(dev_id, d, NULL, 0);
    return 0;
}

int dev_alloc_stats(int dev_id, ordo_gpu_memory_stats *out, char *err, size_t errlen) {
    dev_state *d;
    int rc = get_state(dev_id, &d, err, errlen);
    if (rc) return rc;
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    pthread_mutex_unlock(&d->mu);
    return 0;
}

void dev_alloc_shutdown(void) {
    for (int i = 0; i < ORDO_MAX_DEVICES; i++) {
        dev_state *d = atomic_load_explicit(&devs[i], memory_order_acquire);
        if (!d) continue;
        empty_and_wait(i, d, NULL, 0);
        /* Blocks still in use keep their records (and the state) alive:
         * their users may still free them. */
        if (d->nused) continue;
        atomic_store_explicit(&devs[i], NULL, memory_order_release);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->released);
        free(d->used);
        free(d);
    }
}

/* ---- public --------------------------------------------------------------------- */

int ordo_gpu_get_memory_stats(int dev_id, ordo_gpu_memory_stats *out) {
    char err[256];
    if (!out) return tensor_set_error("gpu memory stats: NULL output");
    int rc = dev_alloc_stats(dev_id, out, err, sizeof err);
    return rc ? tensor_set_error_code(rc, "%s", err) : 0;
}

int ordo_gpu_empty_cache(int dev_id) {
    char err[256];
    int rc = dev_empty_cache(dev_id, err, sizeof err);
    return rc ? tensor_set_error_code(rc, "%s", err) : 0;
}
