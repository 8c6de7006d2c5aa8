/*
 * ordo_tensor.h - tensors on the engine: storages, descriptors, kernel pushes.
 *
 * A storage owns one block of 64-byte-aligned host memory (outside any
 * garbage-collected heap) and one engine var.  It is reference counted:
 * every tensor descriptor that views it holds one reference.  Dropping the
 * last reference frees the bytes through ordo_delete_variable, so the
 * memory goes only after every op pushed on the storage has run (rule 6).
 *
 * A tensor is a descriptor: dtype, up to ORDO_MAX_DIMS dims, shape, strides
 * in elements, offset in elements, device, and a storage.  Views (reshape,
 * transpose, narrow, expand...) are new descriptors sharing the storage and
 * so its var: an op writing a view is ordered with every op on the base.
 *
 * Every tensor op is one push of a registered kernel (ordo_kernel.h):
 * reads = the distinct storage vars of the inputs, writes = those of the
 * outputs, on the storages' engine.  Ops need no per-op reference on the
 * storages: a storage is deleted with ordo_delete_variable, which runs after
 * every op pushed on its var before (rule 6), and an op can only be pushed
 * while some descriptor still holds the storage.
 *
 * Errors: functions return NULL or a nonzero ORDO_ERR_* code and leave a
 * message in ordo_tensor_error() (thread-local).  Messages start with the
 * op name the caller passed (a view given none: its own, "narrow") and
 * name shapes and dims as Lua users see them (dims counted from 1, shapes
 * written 2x3).  A NULL tensor, shape or strides where one is needed is
 * such an error too, never a crash; ordo_tensor_free(NULL) is a no-op.
 *
 * Thread safety: storages and descriptors may be used from any thread; a
 * descriptor is not modified by any function here except ordo_tensor_free.
 */
#ifndef ORDO_TENSOR_H
#define ORDO_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "ordo.h"
#include "ordo_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Storage                                                             */

typedef struct ordo_storage {
    long refs;           /* atomic (GCC builtins); do not touch */
    void *data;          /* 64-byte aligned; NULL when nbytes is 0 */
    size_t nbytes;
    ordo_var *var;       /* orders every op on these bytes */
    ordo_engine *engine; /* the engine that owns var */
    ordo_ctx ctx;        /* where the bytes live */
    uint64_t writes;     /* ops pushed that write these bytes (atomic, relaxed):
                          * autograd checks that a tensor it saved for the
                          * backward pass was not changed in place since */
} ordo_storage;

/* A new storage of nbytes (uninitialised) with one reference. */
ordo_storage *ordo_storage_new(ordo_engine *e, ordo_ctx ctx, size_t nbytes);
void ordo_storage_retain(ordo_storage *s);
/* Drops a reference; the last one deletes the var, whose op frees the bytes. */
void ordo_storage_release(ordo_storage *s);

/* Memory accounting for garbage-collected front ends.  live = bytes not yet
 * freed; total = bytes ever allocated.  ordo_storage_gc_due() returns 1 (and
 * restarts the count) once the bytes allocated since the last time it
 * returned 1 exceed max(threshold, live bytes at that time, 4 x the front
 * end's heap): the caller should then run a full garbage collection.
 * threshold defaults to 64 MiB (env ORDO_GC_THRESHOLD_MB);
 * ordo_storage_set_gc_threshold changes it.  ordo_storage_gc_pace tells the
 * bytes of the front end's own heap after its collection, whose cost grows
 * with them: the pause between collections grows too (0: not counted).
 * Each GPU's allocations also count on their own: a collection is due once
 * they exceed max(threshold scaled by the device's size over 1 GiB when it
 * is smaller, its bytes referenced at the last collection, the heap term
 * capped at a quarter of the device). */
int64_t ordo_storage_live_bytes(void);
int64_t ordo_storage_live_count(void);
int64_t ordo_storage_total_bytes(void);
int     ordo_storage_gc_due(void);
void    ordo_storage_gc_done(void); /* call after the collection ran */
void    ordo_storage_gc_pace(int64_t heap_bytes);
void    ordo_storage_set_gc_threshold(int64_t bytes);

/* ------------------------------------------------------------------ */
/* Tensor descriptors                                                  */

/* Made only by the functions below (never by hand, never copied), and
 * never changed once made: a view with another shape is a new descriptor
 * (ordo_tensor_as_strided).  The push relies on it: it remembers the
 * arguments it checked for a repeated op by the descriptors' ids. */
typedef struct ordo_tensor {
    ordo_storage *storage;
    int64_t offset;  /* in elements */
    int32_t dtype;   /* ORDO_F32 ... ORDO_U8 */
    int32_t ndim;    /* 0 = a scalar (one element) */
    ordo_ctx ctx;    /* = storage->ctx */
    int64_t shape[ORDO_MAX_DIMS];
    int64_t strides[ORDO_MAX_DIMS]; /* in elements */
    uint64_t id;     /* this descriptor's own, never given to another */
} ordo_tensor;

/* A contiguous tensor with a new storage (uninitialised); e NULL = default engine. */
ordo_tensor *ordo_tensor_empty(ordo_engine *e, int dtype, int ndim, const int64_t *shape, ordo_ctx ctx);
/* The same with the device as two ints: LuaJIT compiles FFI calls whose
 * arguments are scalars and pointers, not a struct passed by value, so
 * this is the form the Lua package calls. */
ordo_tensor *ordo_tensor_empty_on(ordo_engine *e, int dtype, int ndim, const int64_t *shape,
                                  int dev_type, int dev_id);
/* A tensor of t's shape, dtype and device with a new storage (on cpu(n)
 * for a cpu_pinned t: results of ops are not pinned). */
ordo_tensor *ordo_tensor_empty_like(const ordo_tensor *t, int dtype);
/* A new descriptor on t's storage; checks that every element lies inside it. */
ordo_tensor *ordo_tensor_as_strided(const ordo_tensor *t, int ndim, const int64_t *shape,
                                    const int64_t *strides, int64_t offset);
/* A new descriptor equal to t (shares the storage). */
ordo_tensor *ordo_tensor_alias(const ordo_tensor *t);
/* Releases t's storage reference and frees the descriptor (NULL is fine). */
void ordo_tensor_free(ordo_tensor *t);

int64_t ordo_tensor_numel(const ordo_tensor *t);         /* -1 for NULL (0 is an empty tensor) */
int     ordo_tensor_is_contiguous(const ordo_tensor *t); /* 0 for NULL */
/* Pointer to element 0 (storage data + offset); valid on CPU storages only,
 * and only meaningful after waiting for the storage's var. */
void   *ordo_tensor_data(const ordo_tensor *t);
/* Tells the engine that the host wrote t's storage through that pointer
 * (on a fresh storage, or after ordo_wait_to_write): its value exists, so
 * an in-place op on it that fails later leaves it readable, as an op's
 * successful write would (README rule 5's void vars).  NULL is ignored. */
void    ordo_tensor_host_written(const ordo_tensor *t);

/* Views (NULL + message on error).  `op` names the caller in messages
 * (NULL: the view's own name).
 * dims here count from 0; messages print them from 1. */
ordo_tensor *ordo_tensor_view(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape);
ordo_tensor *ordo_tensor_transpose(const char *op, const ordo_tensor *t, int d1, int d2);
ordo_tensor *ordo_tensor_permute(const char *op, const ordo_tensor *t, int ndim, const int64_t *perm);
ordo_tensor *ordo_tensor_narrow(const char *op, const ordo_tensor *t, int dim, int64_t start, int64_t len);
ordo_tensor *ordo_tensor_select(const char *op, const ordo_tensor *t, int dim, int64_t index);
ordo_tensor *ordo_tensor_expand(const char *op, const ordo_tensor *t, int ndim, const int64_t *shape);
ordo_tensor *ordo_tensor_unsqueeze(const char *op, const ordo_tensor *t, int dim);
ordo_tensor *ordo_tensor_squeeze(const char *op, const ordo_tensor *t, int dim); /* dim -1: all size-1 dims */

/* NumPy broadcasting of a's and b's shapes into out_shape (ORDO_MAX_DIMS
 * entries); returns the result's ndim, or -1 with a message
 * "<op>: shapes 2x3 and 4x5 cannot be broadcast". */
int ordo_tensor_broadcast_shape(const char *op, const ordo_tensor *a, const ordo_tensor *b, int64_t *out_shape);

/* Writes "2x3" ("scalar" for 0 dims) into buf; returns buf. */
char *ordo_tensor_shape_str(const ordo_tensor *t, char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* Kernels and pushes                                                  */

/* A small integer for a kernel name, interned once (front ends resolve
 * their kernels at load time).  The kernel itself is looked up in the
 * registry at the first push per device type and cached; -1 on a bad name. */
int ordo_tensor_kernel_id(const char *name);
const char *ordo_tensor_kernel_name(int kid);
/* 1 if a push on dev_type (ORDO_CPU, ORDO_GPU) would find kernel kid (on the
 * simulated GPU: the CPU kernel, which it runs). */
int ordo_tensor_kernel_available(int kid, int dev_type);
/* Forgets the cached kernel functions, which are looked up again at their
 * next push.  ordo_kernel_register of a name already used updates its
 * cached function itself. */
void ordo_tensor_kernel_cache_clear(void);

/* Flags for ordo_tensor_push. */
enum {
    ORDO_TP_BROADCAST = 1, /* inputs broadcast to out[0]'s shape (elementwise kernels) */
    ORDO_TP_SAME_DTYPE = 2, /* inputs share one dtype (checked) */
    ORDO_TP_CROSS_DEVICE = 4, /* tensors may be on different CPU devices (host memory: copies) */
    ORDO_TP_NAMED = 8 /* the engine op is named op, not after its kernel: a failure when the kernel
                         runs reads "op: <the kernel's message>", and the profiler shows op */
};

/* Pushes kernel kid: inputs and outputs as views, scalars, iparams.  All
 * tensors must share one device and one engine; the op runs on out[0]'s
 * device (or in[0]'s when nout is 0).  An input that shares a storage with
 * an output through a different, overlapping view is first copied, so
 * in-place ops never read what they have already written.  0 or an error
 * code with ordo_tensor_error() set; nothing is pushed on error. */
int ordo_tensor_push(int kid, const char *op, int flags,
                     ordo_tensor *const *in, int nin, ordo_tensor *const *out, int nout,
                     const double *scalars, int nscalar, const int64_t *iparams, int niparam);

/* Hot-path forms with fixed arity, broadcasting inputs to out's shape:
 *   op1: out = k(a; s0)        (unary and tensor-scalar kernels, fill with a NULL)
 *   op2: out = k(a, b)         (binary kernels)
 *   op3: out = k(a, b, c)      (where)
 * For elementwise kernels only: they push with ORDO_TP_BROADCAST, and the
 * kernel sees each input as a view of out's shape (strides 0 where it
 * broadcasts).  The built-in kernels of other kinds check their arguments
 * and fail, but a user's kernel cannot tell: push those with
 * ordo_tensor_push and flags without ORDO_TP_BROADCAST. */
int ordo_tensor_op1(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, double s0);
int ordo_tensor_op2(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b);
int ordo_tensor_op3(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b,
                    ordo_tensor *c);
/* out-of-place binary: a new tensor of the broadcast shape and dtype out_dtype. */
ordo_tensor *ordo_tensor_binary(int kid, const char *op, ordo_tensor *a, ordo_tensor *b, int out_dtype);

/* Waits for t's storage (every earlier write of it); 0 or an error code,
 * with the message in ordo_tensor_error().  A failure is reported once, as
 * by ordo_wait_for_var, except for a storage whose value was never
 * computed (every op meant to write it failed or was skipped: a void var,
 * README rule 5): every wait on it fails, "(reported before: ...)", until
 * an op writes it. */
int ordo_tensor_wait(const ordo_tensor *t);

/* The thread-local message (and code) of the last failed call here.  The
 * code is an ORDO_ERR_* or ORDO_TERR_NOT_VIEWABLE (ordo_tensor_view: the
 * strides do not allow the shape without a copy). */
enum { ORDO_TERR_NOT_VIEWABLE = 100 };
const char *ordo_tensor_error(void);
int ordo_tensor_error_code(void);

/* ------------------------------------------------------------------ */
/* GPU memory                                                          */

/* The caching device allocator's counters for one GPU, in bytes and calls
 * since the process first used that device.  Blocks are counted at their
 * rounded size: its size class (512-byte multiples below 1 MiB, eight steps
 * per power of two up to 16 MiB, 2 MiB multiples above). */
typedef struct ordo_gpu_memory_stats {
    int64_t allocated_bytes;      /* in blocks held by tensors */
    int64_t reserved_bytes;       /* allocated + cached for reuse: what the device has given */
    int64_t peak_allocated_bytes; /* highest allocated_bytes so far */
    int64_t peak_reserved_bytes;  /* highest reserved_bytes so far */
    int64_t num_device_allocs;    /* blocks obtained from the device (cudaMalloc) */
    int64_t num_device_frees;     /* blocks given back to it (cudaFree) */
    int64_t cache_hits;           /* allocations served from the cache */
    int64_t cache_misses;         /* allocations that had to ask the device */
    int64_t oom_retries;          /* allocations the device refused, each retried once after emptying the cache */
} ordo_gpu_memory_stats;

/* Fills *out for GPU dev_id.  (Not named ordo_gpu_memory_stats: in C a
 * function cannot share its name with the typedef.)  0, or ORDO_ERR_INVALID
 * / ORDO_ERR_NO_DEVICE with ordo_tensor_error() set. */
int ordo_gpu_get_memory_stats(int dev_id, ordo_gpu_memory_stats *out);
/* Gives GPU dev_id's cached blocks back to the device (after the work
 * still pending on them), for other processes or libraries to use.  0, or
 * an error code with ordo_tensor_error() set. */
int ordo_gpu_empty_cache(int dev_id);

/* Freed host (cpu) blocks kept for reuse (at most ORDO_HOST_CACHE_MB,
 * default 256, plus up to 16 MB of blocks under 64 KiB), and giving them
 * back to the system (ordo_host_empty_cache also frees the descriptors
 * the calling thread keeps for reuse).  An allocation the system refuses
 * empties the cache and retries by itself. */
int64_t ordo_host_cached_bytes(void);
void    ordo_host_empty_cache(void);

/* Pinned (page-locked) host memory, the storage of cpu_pinned tensors:
 * copies from and to it run asynchronously on the GPU's copy streams.
 * Bytes held by live cpu_pinned storages, and bytes of freed blocks kept
 * for reuse (at most ORDO_PINNED_CACHE_MB, default 256). */
int64_t ordo_pinned_live_bytes(void);
int64_t ordo_pinned_cached_bytes(void);
/* Gives the cached pinned blocks back to the system. */
void    ordo_pinned_empty_cache(void);

/* ------------------------------------------------------------------ */
/* Engines for front ends                                              */

/* Engines created here are reference counted by the storages on them, so a
 * front end may close its handle while tensors still live: the engine is
 * destroyed when it is closed and its last storage is gone.  Closing one
 * twice, or an engine not made here, does nothing but set
 * ordo_tensor_error(). */
ordo_engine *ordo_tensor_engine_create(const ordo_engine_config *cfg);
void         ordo_tensor_engine_close(ordo_engine *e);
/* Engines made by ordo_tensor_engine_create not destroyed yet (open, or
 * closed with storages left on them): a front end with a garbage
 * collector collects when they pile up (their threads are not seen by it). */
int          ordo_tensor_engines_live(void);
/* sizeof of a public struct by name ("ordo_engine_config", "ordo_tensor",
 * "ordo_storage", "ordo_view", "ordo_kernel_args", "ordo_ctx",
 * "ordo_run_ctx", "ordo_gpu_memory_stats"), 0 if
 * unknown: front ends that redeclare the structs (LuaJIT's ffi.cdef) check
 * their copies against the library at load. */
size_t ordo_tensor_sizeof(const char *type_name);

/* The profiler summary as a malloc'd string (free with ordo_tensor_free_str). */
char *ordo_tensor_profiler_summary(ordo_engine *e);
void  ordo_tensor_free_str(char *s);

#ifdef __cplusplus
}
#endif
#endif
