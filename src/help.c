/*
 * help.c - idle workers helping with one large op (ordo_parallel_for).
 *
 * The engine runs each op on one worker.  A large elementwise op on one
 * core leaves memory bandwidth unused that a second core would draw (here,
 * two cores adding 64 MB arrays move 1.8x what one does), while the pool's
 * other workers sit idle.  So a kernel may split its work into chunks with
 * ordo_parallel_for, and the idle workers of its own pool take chunks
 * beside it.  Only idle workers help: a worker that has ops to run runs
 * them, and when no worker is idle the kernel runs every chunk itself.
 *
 * Each ready queue has one help slot.  The op's worker (the owner) fills
 * it, opens it by making its generation odd, wakes sleepers, and takes
 * chunks with everybody else; then it closes the slot (generation even)
 * and waits until no helper is inside a chunk.  A helper counts itself in
 * (active), then checks that the generation is still the one it saw: if
 * so, the owner will wait for it, and the slot's fields -- and the owner's
 * stack that they point into -- stay valid until it counts itself out.
 *
 * Nothing here waits on anything but chunks that are running, so helping
 * can never deadlock; a kernel that calls ordo_parallel_for outside a
 * worker (the naive engine, a GPU stream thread, a chunk itself) simply
 * runs the chunks in order.
 */
#include "internal.h"

#include <sched.h>

/* Helping costs a wake-up (a few microseconds): not for small loops. */
#define HELP_MIN_CHUNKS 2

/* The owner takes chunks until none is left; a helper also leaves when
 * ops arrive in its queue (q given): they are its work, the chunks are not. */
static int run_chunks(help_slot *h, ready_queue *q, int64_t n, int64_t grain, ordo_chunk_fn fn, void *ctx) {
    int rc = 0;
    for (;;) {
        if (q && atomic_load_explicit(&q->size, memory_order_relaxed) > 0) return rc;
        /* In chunk numbers, so that no product or sum passes n: a grain
         * near INT64_MAX must not overflow (undefined behaviour). */
        int64_t k = atomic_fetch_add(&h->next, 1);
        if (k > (n - 1) / grain) return rc;
        int64_t lo = k * grain;
        int64_t hi = n - lo > grain ? lo + grain : n;
        int r = fn(lo, hi, ctx);
        if (r && !rc) rc = r;
    }
}

int ordo_parallel_for(int64_t n, int64_t grain, ordo_chunk_fn fn, void *ctx) {
    if (!fn) return set_error(ORDO_ERR_INVALID, "ordo_parallel_for: fn is NULL");
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    worker *w = tls_worker;
    pool *p = w ? w->pool : NULL;
    if (!p || p->size < 2 || (n - 1) / grain + 1 < HELP_MIN_CHUNKS ||
        (p->kind != POOL_CPU && p->kind != POOL_CPU_PRIORITY && p->kind != POOL_SHARED))
        return fn(0, n, ctx);
    ready_queue *q = &p->q;
    help_slot *h = &q->help;
    bool free_slot = false;
    if (!atomic_compare_exchange_strong(&h->owned, &free_slot, true)) return fn(0, n, ctx); /* another op's */

    h->n = n;
    h->grain = grain;
    h->fn = fn;
    h->ctx = ctx;
    atomic_store(&h->next, 0);
    atomic_store(&h->rc, 0);
    uint64_t gen = atomic_load(&h->gen) + 1; /* odd: open */
    atomic_store(&h->gen, gen);
    if (atomic_load(&q->sleepers) > 0) {
        pthread_mutex_lock(&q->sleep_mu);
        pthread_cond_broadcast(&q->cv);
        pthread_mutex_unlock(&q->sleep_mu);
    }

    int rc = run_chunks(h, NULL, n, grain, fn, ctx);
    atomic_store(&h->gen, gen + 1); /* even: closed */
    for (int i = 0; atomic_load(&h->active) > 0; i++) {
        if ((i & 63) == 63) sched_yield(); /* a helper finishing a chunk on a busy core */
        else cpu_relax();
    }
    int hrc = atomic_load(&h->rc);
    atomic_store(&h->owned, false);
    return rc ? rc : hrc;
}

void help_run(ready_queue *q) {
    help_slot *h = &q->help;
    uint64_t gen = atomic_load(&h->gen);
    if (!(gen & 1)) return;
    atomic_fetch_add(&h->active, 1);
    if (atomic_load(&h->gen) == gen) { /* still that job: its owner waits for us */
        int rc = run_chunks(h, q, h->n, h->grain, h->fn, h->ctx);
        if (rc) {
            int none = 0;
            atomic_compare_exchange_strong(&h->rc, &none, rc);
        }
    }
    atomic_fetch_sub(&h->active, 1);
}
