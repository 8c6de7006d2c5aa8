/*
 * host_alloc.h - host memory for tensor storage: 64-byte aligned, with large
 * blocks cached for reuse (host_alloc.c).
 */
#ifndef ORDO_HOST_ALLOC_H
#define ORDO_HOST_ALLOC_H

#include <stddef.h>

void *host_alloc(size_t nbytes);            /* NULL when out of memory */
void  host_free(void *p, size_t nbytes);    /* nbytes as given to host_alloc */
size_t host_cached_bytes(void);             /* bytes kept for reuse */
void  host_cache_empty(void);               /* returns them to the system */

#endif
