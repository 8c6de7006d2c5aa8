/*
 * dev_event.h - reference-counted device events: "the work queued on one
 * stream up to some point".
 *
 * The engine orders GPU ops across streams with these (DESIGN section 2):
 * when a GPU op's function has queued its work, the op completes at once
 * for the engine and leaves an event on the vars it touched; an op that
 * later uses such a var on another stream makes its stream wait for the
 * event (no host wait), and a host-side op or wait blocks on it.  The
 * caching device allocator (dev_alloc.h) hands out reused blocks with the
 * event after which their last user is done.
 *
 * An event is recorded once, when created, and never re-recorded while
 * referenced, so holders may wait on it at any time.  The backend's events
 * are recycled through a free list once the last reference goes.
 */
#ifndef ORDO_DEV_EVENT_H
#define ORDO_DEV_EVENT_H

#include <stddef.h>

#include "device.h"

typedef struct dev_event {
    int refs;       /* atomic (GCC builtins) */
    int dev_id;
    void *stream;   /* where it was recorded: waits from that stream are free */
    void *ev;       /* the backend's event */
    struct dev_event *next_free;
} dev_event;

/* A new event recorded on stream now (one reference); NULL with err filled
 * when the backend fails. */
dev_event *dev_event_record(int dev_id, void *stream, char *err, size_t errlen);
void dev_event_ref(dev_event *e);
void dev_event_unref(dev_event *e); /* NULL is fine */

/* Work queued on stream from now on waits for e; nothing to do when e was
 * recorded on that very stream (streams run in order). */
int dev_event_wait(dev_event *e, void *stream, char *err, size_t errlen);
/* The calling host thread waits for e. */
int dev_event_sync(dev_event *e, char *err, size_t errlen);
/* The same, leaving the errors of the work e covers to the next sync. */
int dev_event_wait_quiet(dev_event *e, char *err, size_t errlen);

/* Destroys the recycled backend events (at process exit, or in tests). */
void dev_event_pool_clear(void);

#endif
