/*
 * var_events.c - ordering GPU work through the events left on vars.
 *
 * The dependency engine decides WHEN an op may start: after every
 * conflicting earlier op has completed (rules 1-2).  A GPU op, though,
 * "completes" for the engine as soon as its function has queued its work on
 * the worker's stream - waiting for the GPU there would cost a host sync
 * per op, which is what made MXNet's first engine slow.  The GPU work still
 * runs later, so the op leaves an event (dev_event.h) on every var it
 * touched, and the next user of the var orders itself after that event:
 *
 *   - an op on another stream queues a wait for the event on its own
 *     stream (cudaStreamWaitEvent: the GPU waits, the host does not);
 *   - an op on the same stream needs nothing: a stream runs in order;
 *   - a host-side op (a CPU kernel, a delete on the CPU) and a host wait
 *     block on the event before going on.
 *
 * Per var: the event of the last GPU write, and one event per stream of the
 * GPU reads since that write.  A reader orders itself after the write; a
 * writer after the write and every read (write-after-read: a copy stream
 * must not overwrite a buffer a compute stream is still reading).  Readers
 * of one stream keep only their latest event, since it covers the earlier
 * ones, so the list never grows past the number of streams.
 *
 * Locking: the engine's grant already keeps writers exclusive, but readers
 * run concurrently and each appends its event, so the state has its own
 * small lock.  CPU-only programs never create the state: one load per var
 * per op, and nothing else, is their whole cost.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_event.h"

typedef struct var_events var_events;
struct var_events {
    spin_lock lock;
    dev_event *write;  /* last GPU write, or the allocator's "block is free" event */
    dev_event **reads; /* GPU reads since that write, one per stream */
    int nreads, cap;
};

/* Set once any var carries an event: until then ops skip the scan. */
atomic_int var_events_in_use;

static var_events *state_of(ordo_var *v) {
    return atomic_load_explicit(&v->device_state, memory_order_acquire);
}

static var_events *state_get(ordo_var *v) {
    var_events *ve = state_of(v);
    if (ve) return ve;
    var_events *fresh = calloc(1, sizeof *fresh);
    if (!fresh) return NULL;
    var_events *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&v->device_state, &expected, fresh,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        free(fresh); /* a concurrent reader attached one first */
        return expected;
    }
    atomic_store_explicit(&var_events_in_use, 1, memory_order_release);
    return fresh;
}

/* Puts the events an op must respect on v into out (a reference each) and
 * returns how many; when they are more than cap, puts nothing and returns
 * the count needed, so the caller can retry with a bigger array. */
static int collect(var_events *ve, bool is_write, dev_event **out, int cap) {
    spin_lock_acquire(&ve->lock);
    int need = (ve->write ? 1 : 0) + (is_write ? ve->nreads : 0);
    if (need <= cap) {
        int n = 0;
        if (ve->write) dev_event_ref(out[n++] = ve->write);
        if (is_write)
            for (int i = 0; i < ve->nreads; i++) dev_event_ref(out[n++] = ve->reads[i]);
    }
    spin_lock_release(&ve->lock);
    return need;
}

/* collect() into *out, growing it from the caller's stack array *out of
 * *cap entries to the heap when needed; -1 when out of memory. */
static int collect_all(var_events *ve, bool is_write, dev_event **stack, dev_event ***out, int *cap) {
    for (;;) {
        int n = collect(ve, is_write, *out, *cap);
        if (n <= *cap) return n;
        dev_event **h = realloc(*out == stack ? NULL : *out, (size_t)n * sizeof *h);
        if (!h) return -1;
        *out = h;
        *cap = n;
    }
}

/* Drops every event of ve (a host writer has waited for all of them). */
static void clear(var_events *ve) {
    spin_lock_acquire(&ve->lock);
    dev_event *w = ve->write;
    ve->write = NULL;
    int n = ve->nreads;
    ve->nreads = 0;
    dev_event *small[8], **reads = n <= 8 ? small : malloc((size_t)n * sizeof *reads);
    if (reads && n) memcpy(reads, ve->reads, (size_t)n * sizeof *reads);
    spin_lock_release(&ve->lock);
    dev_event_unref(w);
    if (!reads) return; /* out of memory: leak the references, never a stale wait */
    for (int i = 0; i < n; i++) dev_event_unref(reads[i]);
    if (reads != small) free(reads);
}

int var_events_before(op *o, void *stream, char *err, size_t errlen) {
    if (!atomic_load_explicit(&var_events_in_use, memory_order_acquire)) return 0;
    dev_event *stack[8], **evs = stack;
    int cap = 8, rc = 0;
    /* After a failure, keep ordering on the remaining events: a NO_SKIP op
     * still runs, and must not overtake the GPU work it depends on. */
    char more[256];
    /* A delete op (a storage freed, src/storage.c) is nobody's read: it
     * waits for the GPU work on its var without taking the device's
     * asynchronous failure, which belongs to the user's next wait on that
     * device -- taken here it failed the delete op, so the wait on the
     * failed tensor itself read its garbage without an error, and the
     * failure came up later, at wait_for_all, as "delete_variable: ...". */
    const bool quiet = (o->flags & OP_DELETE) != 0;
    for (int i = 0; i < o->nvars; i++) {
        ordo_var *v = o->vars[i];
        var_events *ve = state_of(v);
        if (!ve) continue;
        bool is_write = node_is_write(&o->nodes[i]);
        int n = collect_all(ve, is_write, stack, &evs, &cap);
        if (n < 0) {
            snprintf(err, errlen, "out of memory ordering GPU work");
            rc = 1;
            break;
        }
        for (int k = 0; k < n; k++) {
            char *msg = rc ? more : err;
            size_t len = rc ? sizeof more : errlen;
            int r = stream  ? dev_event_wait(evs[k], stream, msg, len)
                    : quiet ? dev_event_wait_quiet(evs[k], msg, len)
                            : dev_event_sync(evs[k], msg, len);
            if (r && !rc) rc = r;
            dev_event_unref(evs[k]);
        }
        /* A host op that writes v has now seen all of v's GPU work done. */
        if (!rc && !stream && is_write) clear(ve);
    }
    if (evs != stack) free(evs);
    return rc;
}

/* Attaches e to v as o's read or write; 0 or -1 out of memory. */
static int attach(ordo_var *v, bool is_write, dev_event *e) {
    var_events *ve = state_get(v);
    if (!ve) return -1;
    dev_event *drop_write = NULL, *drop_read = NULL;
    dev_event *small[8], **drop_reads = NULL;
    int ndrop = 0;
    spin_lock_acquire(&ve->lock);
    if (is_write) {
        drop_write = ve->write;
        ndrop = ve->nreads;
        drop_reads = ndrop <= 8 ? small : malloc((size_t)ndrop * sizeof *drop_reads);
        if (!drop_reads) {
            spin_lock_release(&ve->lock);
            return -1;
        }
        if (ndrop) memcpy(drop_reads, ve->reads, (size_t)ndrop * sizeof *drop_reads);
        ve->nreads = 0;
        dev_event_ref(e);
        ve->write = e;
    } else {
        int i = 0;
        while (i < ve->nreads && ve->reads[i]->stream != e->stream) i++;
        if (i == ve->cap) {
            int cap = ve->cap ? 2 * ve->cap : 4;
            dev_event **grown = realloc(ve->reads, (size_t)cap * sizeof *grown);
            if (!grown) {
                spin_lock_release(&ve->lock);
                return -1;
            }
            ve->reads = grown;
            ve->cap = cap;
        }
        if (i < ve->nreads) drop_read = ve->reads[i];
        else ve->nreads++;
        dev_event_ref(e);
        ve->reads[i] = e;
    }
    spin_lock_release(&ve->lock);
    dev_event_unref(drop_write);
    dev_event_unref(drop_read);
    for (int k = 0; k < ndrop; k++) dev_event_unref(drop_reads[k]);
    if (drop_reads && drop_reads != small) free(drop_reads);
    return 0;
}

int var_events_after(op *o, int dev_id, void *stream, dev_event **recorded, char *err, size_t errlen) {
    dev_event *e = dev_event_record(dev_id, stream, err, errlen);
    if (!e) return 1;
    int rc = 0;
    for (int i = 0; i < o->nvars; i++)
        if (attach(o->vars[i], node_is_write(&o->nodes[i]), e)) {
            snprintf(err, errlen, "out of memory ordering GPU work");
            rc = 1;
        }
    if (recorded) *recorded = e;
    else dev_event_unref(e);
    return rc;
}

int var_events_collect_for_wait(ordo_var *v, bool is_write, dev_event ***out, int *n) {
    *out = NULL;
    *n = 0;
    if (!atomic_load_explicit(&var_events_in_use, memory_order_acquire)) return 0;
    var_events *ve = state_of(v);
    if (!ve) return 0;
    dev_event *none[1], **evs = none;
    int cap = 0;
    int k = collect_all(ve, is_write, none, &evs, &cap);
    if (k < 0) return -1;
    *out = k ? evs : NULL;
    *n = k;
    return 0;
}

void var_events_seed(ordo_var *v, dev_event *ready) {
    if (!ready) return;
    if (attach(v, true, ready)) {
        /* Out of memory for the state: make the block safe the slow way. */
        char err[256];
        dev_event_sync(ready, err, sizeof err);
    }
}

void var_events_free(ordo_var *v) {
    var_events *ve = state_of(v);
    if (!ve) return;
    clear(ve);
    free(ve->reads);
    free(ve);
    atomic_store_explicit(&v->device_state, NULL, memory_order_relaxed);
}
