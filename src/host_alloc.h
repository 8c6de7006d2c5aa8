/*
 * host_alloc.h - host memory for tensor storage: 64-byte aligned, with large
 * blocks cached for reuse; and page-locked (pinned) host memory for fast,
 * asynchronous GPU copies, every size cached (host_alloc.c).
 */
#ifndef ORDO_HOST_ALLOC_H
#define ORDO_HOST_ALLOC_H

#include <stddef.h>

void *host_alloc(size_t nbytes);            /* NULL when out of memory */
void  host_free(void *p, size_t nbytes);    /* nbytes as given to host_alloc */
size_t host_cached_bytes(void);             /* bytes kept for reuse */
void  host_cache_empty(void);               /* returns them to the system */

/* Pinned memory comes from the GPU backend; NULL with err filled when there
 * is none or it is out of pinned memory. */
void *host_alloc_pinned(size_t nbytes, char *err, size_t errlen);
void  host_free_pinned(void *p, size_t nbytes); /* nbytes as given */
size_t host_pinned_cached_bytes(void);
void  host_pinned_cache_empty(void);

#endif
