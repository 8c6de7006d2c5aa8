/*
 * ordo_kernel.h - the native kernel ABI: what a kernel sees, and the registry.
 *
 * Kernels are plain C functions registered by name and device type.  The
 * tensor layer (src/tensor*.c, lua/ordo/) pushes a kernel as an engine op
 * whose reads are its inputs' storage vars and whose writes are its
 * outputs' storage vars; the kernel then runs on a worker thread and sees
 * only views: a data pointer (offset already applied), dtype, shape and
 * strides in elements.
 *
 * Conventions every kernel can rely on:
 *  - Broadcasting is resolved before the kernel: elementwise kernels get
 *    inputs and output of one shape, a broadcast dim having stride 0.
 *  - Inputs of an elementwise or reduction kernel share one dtype (the
 *    tensor layer casts first) unless the kernel's doc says otherwise.
 *  - Dims count from 0 here (Lua counts from 1; the tensor layer converts).
 *  - A kernel returns 0, or ordo_fail(rc, "...") naming what was wrong.
 *    A dtype it does not implement fails with "<name>: dtype X not
 *    implemented" rather than producing anything.
 */
#ifndef ORDO_KERNEL_H
#define ORDO_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "ordo.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { ORDO_F32 = 0, ORDO_F64 = 1, ORDO_I32 = 2, ORDO_I64 = 3, ORDO_U8 = 4, ORDO_NDTYPES = 5 };

#define ORDO_MAX_DIMS 8
#define ORDO_KERNEL_MAX_IN 4
#define ORDO_KERNEL_MAX_OUT 2
#define ORDO_KERNEL_MAX_SCALARS 8
#define ORDO_KERNEL_MAX_IPARAMS 12

typedef struct ordo_view {
    void *data; /* first element (storage base + offset) */
    int dtype;
    int ndim;   /* 0 = a scalar (one element) */
    int64_t shape[ORDO_MAX_DIMS];
    int64_t strides[ORDO_MAX_DIMS]; /* in elements; 0 on broadcast dims */
} ordo_view;

typedef struct ordo_kernel_args {
    int nin, nout, nscalar, niparam;
    ordo_view in[ORDO_KERNEL_MAX_IN];
    ordo_view out[ORDO_KERNEL_MAX_OUT];
    double scalar[ORDO_KERNEL_MAX_SCALARS];  /* e.g. fill value, pow exponent, alpha */
    int64_t iparam[ORDO_KERNEL_MAX_IPARAMS]; /* e.g. reduction dim, op code, seed */
} ordo_kernel_args;

typedef int (*ordo_kernel_fn)(const ordo_run_ctx *rc, const ordo_kernel_args *args);

/* Registers (or replaces) a kernel; 0 or ORDO_ERR_INVALID (a NULL or empty
 * name, one longer than ORDO_KERNEL_NAME_MAX characters, which the tensor
 * layer could never push, a NULL fn, a bad device type). Thread-safe. */
#define ORDO_KERNEL_NAME_MAX 71
int ordo_kernel_register(const char *name, int dev_type, ordo_kernel_fn fn);
/* NULL when no kernel of that name exists for that device type. */
ordo_kernel_fn ordo_kernel_lookup(const char *name, int dev_type);

/* Splitting one kernel's work: fn(lo, hi, ctx) runs over [lo, hi), in
 * chunks of grain items covering [0, n).  Called by a kernel running on a
 * CPU worker, it lets the idle workers of that worker's pool take chunks
 * beside it (only idle ones, each back to its own ops after its current
 * chunk); anywhere else, or when no worker is idle, the caller runs every
 * chunk itself.  Chunks run
 * concurrently in any order, so they must write disjoint memory.  Returns
 * once every chunk has run: 0, or the nonzero value of a failed chunk. */
typedef int (*ordo_chunk_fn)(int64_t lo, int64_t hi, void *ctx);
int ordo_parallel_for(int64_t n, int64_t grain, ordo_chunk_fn fn, void *ctx);

/* A check of a GPU op's work that only the host can make, once that work
 * has run: a kernel that finds an index out of range, say, writes what it
 * found to memory the host reads (kernels/cuda/cuda_internal.cuh).  Called
 * from a sync op's function running on a GPU, it makes the op complete
 * only after its GPU work has run and check(arg, err, errlen) has been
 * called on the host: a nonzero return fails the op with the message put
 * in err (rule 5: what it wrote carries the error, the ops that use it are
 * skipped, the wait that meets it reports it).  The ops that do not depend
 * on it go on meanwhile, and the worker queues its next op at once: only
 * its dependants wait, for one host round trip.  check runs exactly once,
 * on an engine thread, even when the op failed otherwise (then only to
 * release arg; its return is ignored).  At most one per op.  0, or
 * ORDO_ERR_INVALID (not in a sync op on a GPU, or a second one); then
 * check is not called. */
typedef int (*ordo_gpu_check_fn)(void *arg, char *err, size_t errlen);
int ordo_gpu_check_after(const ordo_run_ctx *rc, ordo_gpu_check_fn check, void *arg);

/* Helpers for kernels */
int64_t ordo_view_numel(const ordo_view *v);
int     ordo_view_is_contiguous(const ordo_view *v);
size_t  ordo_dtype_size(int dtype);
const char *ordo_dtype_name(int dtype); /* "float32", "float64", "int32", "int64", "uint8" */

#ifdef __cplusplus
}
#endif
#endif
