/*
 * dev_event.c - reference-counted device events over the backend's events.
 *
 * Creating a CUDA event costs about as much as a small kernel launch, and
 * the engine records one per GPU op, so wrappers (and the backend events
 * inside them) are recycled through a free list.  Recycling is safe because
 * a wrapper returns to the list only when nobody holds it: no stream wait
 * or host wait can still name it, and CUDA captures an event's state at
 * the moment cudaStreamWaitEvent is called, not when the wait runs.
 */
#include "dev_event.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_event *pool_head;

dev_event *dev_event_record(int dev_id, void *stream, char *err, size_t errlen) {
    const device_backend *b = ordo_device_backend();
    if (!b) {
        snprintf(err, errlen, "gpu(%d): no CUDA device available", dev_id);
        return NULL;
    }
    dev_event *e = NULL;
    pthread_mutex_lock(&pool_mu);
    for (dev_event **pp = &pool_head; *pp; pp = &(*pp)->next_free)
        if ((*pp)->dev_id == dev_id) {
            e = *pp;
            *pp = e->next_free;
            break;
        }
    pthread_mutex_unlock(&pool_mu);
    if (!e) {
        if (!(e = calloc(1, sizeof *e))) {
            snprintf(err, errlen, "gpu(%d): out of memory for an event", dev_id);
            return NULL;
        }
        e->dev_id = dev_id;
        if (b->event_create(dev_id, &e->ev, err, errlen)) {
            free(e);
            return NULL;
        }
    }
    if (b->event_record(dev_id, e->ev, stream, err, errlen)) {
        b->event_destroy(dev_id, e->ev);
        free(e);
        return NULL;
    }
    e->stream = stream;
    e->next_free = NULL;
    __atomic_store_n(&e->refs, 1, __ATOMIC_RELEASE);
    return e;
}

void dev_event_ref(dev_event *e) { __atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED); }

void dev_event_unref(dev_event *e) {
    if (!e || __atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_lock(&pool_mu);
    e->next_free = pool_head;
    pool_head = e;
    pthread_mutex_unlock(&pool_mu);
}

int dev_event_wait(dev_event *e, void *stream, char *err, size_t errlen) {
    if (e->stream == stream) return 0;
    return ordo_device_backend()->stream_wait_event(e->dev_id, stream, e->ev, err, errlen);
}

int dev_event_sync(dev_event *e, char *err, size_t errlen) {
    return ordo_device_backend()->event_sync(e->dev_id, e->ev, err, errlen);
}

int dev_event_wait_quiet(dev_event *e, char *err, size_t errlen) {
    return ordo_device_backend()->event_wait_quiet(e->dev_id, e->ev, err, errlen);
}

void dev_event_pool_clear(void) {
    const device_backend *b = ordo_device_backend();
    pthread_mutex_lock(&pool_mu);
    dev_event *e = pool_head;
    pool_head = NULL;
    pthread_mutex_unlock(&pool_mu);
    while (e) {
        dev_event *next = e->next_free;
        if (b) b->event_destroy(e->dev_id, e->ev);
        free(e);
        e = next;
    }
}
