/*
 * tensor_copy.c - copies between host and GPU memory, and between GPUs.
 *
 * A kernel sees one device's memory, so a copy across the host/GPU border
 * is a plain byte copy (cudaMemcpyAsync) between two contiguous buffers of
 * one dtype, pushed as a COPY_TO_GPU / COPY_FROM_GPU op: the GPU's copy
 * workers run it on their own streams, so transfers overlap with compute
 * (DESIGN section 2).  Everything else a copy may involve - a cast, a
 * broadcast, strides - is done by the device's own copy kernel on one side:
 *
 *     src --(copy kernel on src's device, if needed)--> contiguous, dst's dtype
 *         --(byte copy across)--> contiguous on dst's device
 *         --(copy kernel on dst's device, if dst is not contiguous)--> dst
 *
 * The temporaries are released at once: their storage is freed by the
 * engine after the ops pushed on them (rule 6).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tensor_internal.h"

typedef struct byte_copy {
    void *dst;
    const void *src;
    size_t nbytes;
    int kind;
} byte_copy;

static int byte_copy_op(const ordo_run_ctx *rc, void *param) {
    byte_copy *c = param;
    char err[256];
    if (ordo_device_backend()->memcpy_async(rc->ctx.dev_id, c->dst, c->src, c->nbytes, c->kind, rc->stream, err,
                                            sizeof err))
        return ordo_fail(rc, "%s", err);
    return 0;
}

static void *data_of(const ordo_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)ordo_dtype_size(t->dtype);
}

/* dst and src contiguous, one dtype, one element count. */
static int push_byte_copy(const char *op, ordo_tensor *dst, ordo_tensor *src) {
    byte_copy *c = malloc(sizeof *c);
    if (!c) return tensor_set_error_code(ORDO_ERR_NOMEM, "%s: out of memory", op);
    c->dst = data_of(dst);
    c->src = data_of(src);
    c->nbytes = (size_t)ordo_tensor_numel(dst) * ordo_dtype_size(dst->dtype);
    ordo_ctx ctx;
    int prop;
    if (src->ctx.dev_type != ORDO_GPU) { /* host -> gpu */
        ctx = dst->ctx;
        prop = ORDO_PROP_COPY_TO_GPU;
        c->kind = DEV_COPY_H2D;
    } else if (dst->ctx.dev_type != ORDO_GPU) { /* gpu -> host */
        ctx = src->ctx;
        prop = ORDO_PROP_COPY_FROM_GPU;
        c->kind = DEV_COPY_D2H;
    } else { /* gpu -> gpu: the destination's copy stream pulls */
        ctx = dst->ctx;
        prop = ORDO_PROP_COPY_TO_GPU;
        c->kind = DEV_COPY_D2D;
    }
    ordo_var *r = src->storage->var, *w = dst->storage->var;
    int rc = ordo_push_sync(dst->storage->engine, byte_copy_op, c, free, ctx, &r, r == w ? 0 : 1, &w, 1, prop, 0,
                            c->kind == DEV_COPY_H2D ? "copy_to_gpu" : c->kind == DEV_COPY_D2H ? "copy_from_gpu" : "copy_gpu");
    if (rc != ORDO_OK) {
        free(c);
        return tensor_set_error_code(rc, "%s: %s", op, ordo_last_error());
    }
    __atomic_add_fetch(&dst->storage->writes, 1, __ATOMIC_RELAXED);
    return ORDO_OK;
}

static int plain(const ordo_tensor *t, const ordo_tensor *like) {
    if (t->dtype != like->dtype || t->ndim != like->ndim || !ordo_tensor_is_contiguous(t)) return 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != like->shape[i]) return 0;
    return 1;
}

int tensor_copy_across(int kid_copy, const char *op, int flags, ordo_tensor *dst, ordo_tensor *src) {
    if (src->storage->engine != dst->storage->engine)
        return tensor_set_error("%s: the tensors belong to different engines", op);
    ordo_tensor *staged = src, *landing = dst, *tmp1 = NULL, *tmp2 = NULL;
    int rc = ORDO_OK;
    if (!plain(src, dst)) { /* cast, broadcast or gather on the source's device */
        tmp1 = ordo_tensor_empty(src->storage->engine, dst->dtype, dst->ndim, dst->shape, src->ctx);
        if (!tmp1) return ordo_tensor_error_code() ? ordo_tensor_error_code() : ORDO_ERR_NOMEM;
        rc = ordo_tensor_push(kid_copy, op, flags & ORDO_TP_BROADCAST, &src, 1, &tmp1, 1, NULL, 0, NULL, 0);
        staged = tmp1;
    }
    if (rc == ORDO_OK && !ordo_tensor_is_contiguous(dst)) {
        tmp2 = ordo_tensor_empty(dst->storage->engine, dst->dtype, dst->ndim, dst->shape, dst->ctx);
        if (!tmp2) rc = ordo_tensor_error_code() ? ordo_tensor_error_code() : ORDO_ERR_NOMEM;
        landing = tmp2;
    }
    if (rc == ORDO_OK && ordo_tensor_numel(dst) > 0) rc = push_byte_copy(op, landing, staged);
    if (rc == ORDO_OK && tmp2) rc = ordo_tensor_push(kid_copy, op, 0, &tmp2, 1, &dst, 1, NULL, 0, NULL, 0);
    ordo_tensor_free(tmp1);
    ordo_tensor_free(tmp2);
    return rc;
}
