/*
 * tensor_internal.h - shared by storage.c, tensor.c and tensor_push.c.
 */
#ifndef ORDO_TENSOR_INTERNAL_H
#define ORDO_TENSOR_INTERNAL_H

#include "ordo_tensor.h"

/* Sets ordo_tensor_error(); returns ORDO_ERR_INVALID (or code). */
int tensor_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int tensor_set_error_code(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A copy between host and GPU memory or between GPUs (tensor_copy.c):
 * dst = src with kernel kid_copy's casting and broadcasting (flags). */
int tensor_copy_across(int kid_copy, const char *op, int flags, ordo_tensor *dst, ordo_tensor *src);

/* Where the results of ops on a tensor of ctx live: its device, except
 * that results of ops on pinned tensors are ordinary cpu(n) tensors
 * (pinned memory is for staging GPU copies, and scarce), as in PyTorch. */
static inline ordo_ctx tensor_result_ctx(ordo_ctx ctx) {
    if (ctx.dev_type == ORDO_CPU_PINNED) ctx.dev_type = ORDO_CPU;
    return ctx;
}

/* Frees the calling thread's cache of freed descriptors (tensor.c);
 * tensor_desc_cached: how many the threads keep together. */
void tensor_desc_cache_empty(void);
long tensor_desc_cached(void);

/* A view of t for a kernel (offset applied). */
void tensor_to_view(const ordo_tensor *t, ordo_view *v);

#endif
