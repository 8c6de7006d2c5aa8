/*
 * dev_alloc.h - the caching device allocator: device memory for GPU tensor
 * storage (dev_alloc.c).
 *
 * Device memory is allocated through the backend (device.h) and, once its
 * user frees it, kept for reuse together with the event after which the
 * last user's work is done.  A reused block comes back with that event:
 * the new user's first use must wait for it (a stream wait, no host wait),
 * which is what makes reuse safe without synchronising at free time.
 *
 * Process-wide, per device, thread-safe.  Every function works on any
 * backend, the simulated device included.
 */
#ifndef ORDO_DEV_ALLOC_H
#define ORDO_DEV_ALLOC_H

#include <stddef.h>

#include "dev_event.h"
#include "ordo_tensor.h" /* ordo_gpu_memory_stats */

/* nbytes of device memory on dev_id into *ptr (never NULL on success; 0
 * bytes get a block too).  *ready is the event the caller's first use must
 * wait for - the caller takes over its reference - or NULL when the memory
 * is fresh or nothing was pending on it.  ready may be NULL: the host then
 * waits for the event here.  Returns 0, or ORDO_ERR_INVALID (bad dev_id),
 * ORDO_ERR_NO_DEVICE, ORDO_ERR_NOMEM, ORDO_ERR_FAILED (another backend
 * error) with a message in err. */
int dev_alloc(int dev_id, size_t nbytes, void **ptr, dev_event **ready, char *err, size_t errlen);

/* Returns ptr (from dev_alloc on dev_id; NULL is fine) to the cache.
 * last_use is the event after which the work of its user is done, or NULL
 * when nothing is pending on the block; the allocator keeps that reference
 * and hands it to the block's next user.  Never waits (it takes the
 * device's lock for a few steps only), so any thread may call it, a
 * stream callback included. */
void dev_free(int dev_id, void *ptr, dev_event *last_use);

/* Gives every cached block of dev_id back to the device, each after its
 * event.  0, or an error code with a message in err (the blocks are freed
 * even when a wait reports an earlier asynchronous failure). */
int dev_empty_cache(int dev_id, char *err, size_t errlen);
/* The same for a retry inside an op (a kernel's scratch memory, a cuBLAS
 * handle or workspace refused): the waits leave the device's pending
 * failure to the engine's next wait, as dev_alloc's own retry does (taken
 * here it was lost, and the failed op's tensor read its garbage without an
 * error).  0, or 1 when dev_id has no allocator state. */
int dev_empty_cache_quiet(int dev_id);

/* The block size nbytes is rounded to (0 when that overflows), its size
 * class: under 1 MiB a multiple of 512 bytes; from 1 MiB to 16 MiB the
 * next of eight steps per power of two (1, 1.125, 1.25 ... 1.875, 2, 2.25
 * ... MiB); from 16 MiB a multiple of 2 MiB.  So at most 511 bytes more
 * than nbytes below 1 MiB, and from 1 MiB less than nbytes / 8 and less
 * than 2 MiB more.  The device is asked for this size, and the statistics
 * count it. */
size_t dev_alloc_block_size(size_t nbytes);

/* The statistics of dev_id; 0, or an error code with a message in err. */
int dev_alloc_stats(int dev_id, ordo_gpu_memory_stats *out, char *err, size_t errlen);

/* Frees the cached blocks of every device, and the allocator's own state
 * of every device that has no block in use (its statistics restart from
 * zero).  For process exit and tests: call it when no other thread uses
 * the allocator, and before dev_event_pool_clear (it releases events). */
void dev_alloc_shutdown(void);

#endif
