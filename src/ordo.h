/*
 * ordo.h - the public C API of ordo.
 *
 * ordo runs operations by their data dependencies.  Every operation declares
 * the variables it reads and the ones it writes; two operations that share a
 * variable which at least one of them writes run in push order, everything
 * else may run in parallel on worker threads.  See DESIGN.md section 2 for
 * the numbered rules that the engine guarantees.
 *
 * All functions are thread-safe.  Functions that can fail return 0 on
 * success or one of the ORDO_ERR_* codes; ordo_last_error() then holds a
 * message for the calling thread.
 */
#ifndef ORDO_H
#define ORDO_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Devices                                                             */

enum {
    ORDO_CPU = 1,
    ORDO_GPU = 2,
    ORDO_CPU_PINNED = 3 /* host memory pinned for fast GPU copies; runs on cpu(dev_id) */
};

typedef struct { int dev_type; int dev_id; } ordo_ctx;

#define ORDO_MAX_DEVICES 64 /* per device type */

/* ------------------------------------------------------------------ */
/* Status codes                                                        */

enum {
    ORDO_OK = 0,
    ORDO_ERR_FAILED = 1,   /* an operation failed (rule 5); message has its error */
    ORDO_ERR_INVALID = 2,  /* a bad argument: NULL, negative count, bad context... */
    ORDO_ERR_DEADLOCK = 3, /* a wait was called from inside an operation (rule 7) */
    ORDO_ERR_DELETED = 4,  /* the variable has been deleted (rule 6) */
    ORDO_ERR_NO_DEVICE = 5,/* the device does not exist (e.g. no CUDA device) */
    ORDO_ERR_NOMEM = 6     /* out of memory */
};

/* ------------------------------------------------------------------ */
/* Engines                                                             */

typedef struct ordo_engine ordo_engine;
typedef struct ordo_var ordo_var;
typedef struct ordo_opr ordo_opr;
typedef struct ordo_done ordo_done;

enum {
    ORDO_ENGINE_NAIVE = 1,      /* runs each op inline in push (debugging): a push returns once its own
                                 * op has run (an async one: completed), whatever else is pending */
    ORDO_ENGINE_POOLED = 2,     /* one shared queue for all devices, plus copy workers */
    ORDO_ENGINE_PER_DEVICE = 3  /* a worker pool per device (default) */
};

/* A zero field takes the environment's value (ORDO_*), else the built-in
 * default; a nonzero field out of range fails ordo_engine_create, naming it. */
typedef struct ordo_engine_config {
    int kind;                 /* ORDO_ENGINE_*; env ORDO_ENGINE_TYPE=naive|pooled|perdevice */
    int cpu_workers;          /* per cpu(n) pool; env ORDO_CPU_WORKER_NTHREADS (default: cores) */
    int cpu_priority_workers; /* shared CPU priority pool; env ORDO_CPU_PRIORITY_NTHREADS (1) */
    int gpu_workers;          /* compute workers per GPU; env ORDO_GPU_WORKER_NTHREADS (2) */
    int gpu_copy_workers;     /* copy workers per GPU; env ORDO_GPU_COPY_NTHREADS (1) */
    int max_inflight;         /* pending ops before push blocks; env ORDO_MAX_INFLIGHT (8192) */
    int spin_us;              /* how long an idle worker spins before sleeping; env ORDO_SPIN_US (50) */
    int profiler_autostart;   /* env ORDO_PROFILER_AUTOSTART=1 */
    /* When this many ready ops per worker wait in a CPU pool's queue, push
     * runs a ready priority-0 op itself instead of queueing it, and a push
     * held by backpressure runs queued priority-0 ops instead of sleeping (a
     * pusher that far ahead gains nothing by waiting; libgomp does the same).
     * env ORDO_PUSH_INLINE_AFTER (64); negative: never. */
    int push_inline_after;
    /* While the engine's running mean of what a bulked op takes to run is
     * at least this, a thread's bulk (ordo_set_bulk_size) takes only ops
     * that wait for one of its ops (a chain); any other op starts a new
     * bulk, and a bulk of one op is pushed alone.  A bulk runs its ops one
     * after another on one worker, which pays for ops shorter than a push
     * and costs the parallelism of longer ones.  env ORDO_BULK_OP_MAX_NS
     * (500); 0 from the environment, or negative: always bulked. */
    int bulk_op_max_ns;
    /* A small tensor op (an elementwise kernel on at most this many
     * elements, its operands counted together) whose vars no op is using
     * or waiting for runs on the thread that pushes it, during the push:
     * its kernel costs less than handing it to a worker.  Never on the
     * naive engine, while profiling, or while the engine's bulked ops run
     * long (bulk_op_max_ns).  env ORDO_RUN_NOW_MAX_ELEMENTS (1024); 0 from
     * the environment, or negative: never. */
    int run_now_max_elements;
} ordo_engine_config;

ordo_engine *ordo_engine_create(const ordo_engine_config *cfg); /* cfg NULL: from environment */
ordo_engine *ordo_engine_default(void);                        /* process-wide engine */
/* Waits, joins, frees.  From inside an op it would wait for that op: it
 * is refused then (ORDO_ERR_DEADLOCK as ordo_last_error) and does nothing.
 * The default engine is refused too (ORDO_ERR_INVALID as ordo_last_error):
 * it is shared by whoever asked for it and destroyed at exit.  So are an
 * engine that tensor storages (ordo_tensor.h) still use -- free them first
 * -- and one made by ordo_tensor_engine_create (ordo_tensor_engine_close
 * destroys it once its last tensor is freed). */
void         ordo_engine_destroy(ordo_engine *e);
/* The configuration in force after defaults were applied (all zero, with
 * the message, for a NULL engine). */
void         ordo_engine_get_config(ordo_engine *e, ordo_engine_config *out);
const char  *ordo_engine_kind_name(int kind);                  /* "naive", "pooled", "perdevice" */

/* ------------------------------------------------------------------ */
/* Operations                                                          */

/* Runtime information handed to every operation. */
typedef struct ordo_run_ctx {
    ordo_ctx ctx;        /* the device the op runs for */
    void *stream;        /* cudaStream_t on GPU, NULL on CPU */
    int worker_id;       /* engine-wide worker index, -1 on a non-worker thread */
    ordo_engine *engine;
    void *op_;           /* internal: the running op */
} ordo_run_ctx;

typedef int  (*ordo_sync_fn)(const ordo_run_ctx *rc, void *param);   /* 0 = ok */
typedef void (*ordo_async_fn)(const ordo_run_ctx *rc, void *param, ordo_done *done);

/* Finish an async op; error NULL = ok.  Call exactly once, from any thread.
 * done NULL completes nothing: the call only sets ordo_last_error(); so
 * does a second call for the same run (ORDO_ERR_INVALID, "already
 * completed"), as long as no newer op has taken the finished op's place. */
void ordo_done_complete(ordo_done *done, const char *error);
/* Set the running op's error message; returns nonzero so `return ordo_fail(...)` works. */
int  ordo_fail(const ordo_run_ctx *rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Properties (prop).  ORDO_PROP_NO_SKIP is a flag that may be or-ed with the others. */
enum {
    ORDO_PROP_NORMAL = 0,
    ORDO_PROP_COPY_FROM_GPU = 1,  /* runs on the device's copy workers */
    ORDO_PROP_COPY_TO_GPU = 2,
    ORDO_PROP_CPU_PRIORITIZED = 3,/* runs on the shared CPU priority pool */
    ORDO_PROP_ASYNC = 4,          /* cheap launcher: runs in the thread that makes it ready; on the
                                   * host it does not wait for its vars' GPU work (a marker must
                                   * never block that thread): read GPU-written data elsewhere */
    ORDO_PROP_DELETE_VAR = 5,     /* used by ordo_delete_variable */
    ORDO_PROP_GPU_PRIORITIZED = 6,/* runs on the GPU's priority worker */
    ORDO_PROP_NO_SKIP = 0x100,    /* run even when an input carries an error */
    ORDO_PROP_BULK = 0x200        /* a small sync op that may be bulked (see Bulking below) */
};

/* A var belongs to the engine that made it.  Every call that takes an
 * engine and vars (pushes, ordo_new_operator, waits, ordo_delete_variable)
 * refuses a var of another engine: ORDO_ERR_INVALID, "variable belongs to
 * another engine". */
ordo_var *ordo_new_variable(ordo_engine *e);

/* param_free (may be NULL) is called once with param after the op has
 * run, been skipped (rule 5) or been dropped.  A push that is refused
 * (nonzero return) takes nothing: param stays the caller's, and
 * param_free is not called; the same for ordo_new_operator returning NULL. */
int ordo_push_sync(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                   ordo_ctx ctx, ordo_var *const *reads, int nreads,
                   ordo_var *const *writes, int nwrites, int prop, int priority, const char *name);
int ordo_push_async(ordo_engine *e, ordo_async_fn fn, void *param, void (*param_free)(void *),
                    ordo_ctx ctx, ordo_var *const *reads, int nreads,
                    ordo_var *const *writes, int nwrites, int prop, int priority, const char *name);

/* A reusable operator: the vars are fixed, each ordo_push runs it once more.
 * Its property and vars are checked as a push checks them (NULL, with the
 * message, for what a push would refuse: ORDO_PROP_DELETE_VAR, a var of
 * another engine, a var whose delete was pushed). */
ordo_opr *ordo_new_operator(ordo_engine *e, ordo_async_fn fn, void *param, void (*param_free)(void *),
                            ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites,
                            int prop, const char *name);
/* ORDO_ERR_DELETED when one of the operator's vars was deleted since it was
 * made (also once a new var has taken that var's memory), or when the
 * operator itself was deleted. */
int  ordo_push(ordo_engine *e, ordo_opr *op, ordo_ctx ctx, int priority);
/* Frees the operator (and calls param_free) once its pushed runs have
 * finished.  ordo_engine_destroy frees the operators never deleted (and
 * calls their param_free), as it frees the vars never deleted.  Refused,
 * with the message in ordo_last_error(): a NULL engine or operator, an
 * operator of another engine (ORDO_ERR_INVALID), one already deleted
 * (ORDO_ERR_DELETED; the engine keeps a deleted operator's block until a
 * new operator reuses it, so a stale handle is caught until then). */
void ordo_delete_operator(ordo_engine *e, ordo_opr *op);

/* Runs fn (may be NULL) after every earlier op on v, then frees v (rule 6).
 * On a GPU context, "after" is in stream order: fn runs once the earlier
 * ops have queued their work, with rc->stream made to wait for all of it,
 * so device memory is released stream-ordered (an event recorded on
 * rc->stream marks when it is really free).  On the CPU, fn runs after the
 * GPU work on v has finished. */
int ordo_delete_variable(ordo_engine *e, ordo_sync_fn fn, void *param, ordo_ctx ctx, ordo_var *v);

/* The waits: 0, or an error code with the message in ordo_last_error().
 * A failure is reported as its op named it ("gather: index 5 out of
 * range..."); a GPU's asynchronous failure the wait met names the device
 * first ("gpu(0): div: integer division by zero"), after the wait's own
 * failure when it has one too ("...; gpu(1): ...").  ordo_wait_for_all
 * reports the oldest unreported failure and how many more there were
 * ("... (and 3 more failures)"); of those only it can report (nothing
 * holds them any more), the engine keeps the oldest and a count. */
int ordo_wait_for_var(ordo_engine *e, ordo_var *v);  /* rule 4 */
int ordo_wait_to_write(ordo_engine *e, ordo_var *v); /* also waits for earlier readers */
int ordo_wait_for_all(ordo_engine *e);               /* reports the first unreported failure */

const char *ordo_last_error(void);     /* thread-local message of the last failure */
/* Number of completed writes; 0, with the message, for NULL or a deleted var. */
uint64_t    ordo_var_version(ordo_var *v);
/* Whether v's bytes are the result of a failed op: ORDO_ERR_FAILED, with
 * the failure's message in ordo_last_error(), when the last write of v
 * failed or was skipped for a failed input (rule 5), even after a wait has
 * reported that failure (a report lets later ops use v again; its bytes
 * are still not what the failed op should have written); 0 when the last
 * write succeeded (or v was never written).  It does not wait: call it
 * after a wait for v.  ORDO_ERR_INVALID / ORDO_ERR_DELETED for NULL or a
 * deleted var.  ordo.save uses it to refuse to write such bytes. */
int         ordo_var_failed(ordo_var *v);

/* Number of ops pushed and not yet completed (0, with the message, for NULL). */
long ordo_engine_pending(ordo_engine *e);

/* ------------------------------------------------------------------ */
/* Bulking                                                             */

/* A thread that sets a bulk size lets the engine collect its small ops --
 * ordo_push_sync with ORDO_PROP_BULK or-ed into a NORMAL prop, priority 0,
 * on a cpu(n) context -- and hand them over as one op that runs them in push
 * order: one hand-off to a worker per bulk instead of one per op.  For the
 * pushing thread nothing else changes: every other push, wait, delete,
 * pending count, profiler call or engine destroy made by this thread hands
 * the bulk over first, so rules 1-6 hold as if each op had been pushed
 * alone (each op of a bulk that meets a failed var is skipped alone, each
 * var ends with the failure it would have had, versions count every write;
 * the pending count and backpressure count a bulk's ops one by one).
 * Other threads see the ops once the bulk is handed over: when it is full,
 * at this thread's next engine call, at ordo_bulk_flush or when the thread
 * exits.  Not bulked: the naive engine, ops while the engine is profiling,
 * ops pushed from inside an op.  A pushed op whose var another thread
 * deletes before the bulk is handed over is dropped, and its error is
 * reported by the next ordo_wait_for_all.  Destroy an engine from the
 * thread that bulks on it, or flush that thread first: while another
 * thread's bulk holds ops for it, ordo_engine_destroy is refused
 * (ORDO_ERR_INVALID as ordo_last_error) and the engine runs on. */
#define ORDO_BULK_MAX 64
/* This thread: 0 (off, the default) .. ORDO_BULK_MAX; returns the old size.
 * A size out of range is clamped to it, with the message in ordo_last_error(). */
int ordo_set_bulk_size(int n);
int ordo_get_bulk_size(void);
int ordo_bulk_flush(void);     /* hands this thread's bulk over now; 0 or the first push error */

/* ------------------------------------------------------------------ */
/* Profiler                                                            */

int  ordo_profiler_start(ordo_engine *e);
int  ordo_profiler_stop(ordo_engine *e);
/* GPU ops also get their GPU-side times (timing events on their stream):
 * in the trace on a track per stream ("cat":"gpu"), in the summary as a
 * second table.  Both read those events and may wait for the GPU. */
int  ordo_profiler_dump(ordo_engine *e, const char *path);  /* Chrome trace JSON */
int  ordo_profiler_summary(ordo_engine *e, FILE *out);      /* table per op name */
void ordo_profiler_clear(ordo_engine *e);

/* ------------------------------------------------------------------ */
/* Devices at run time                                                 */

int ordo_gpu_count(void);  /* 0 when built without CUDA or no device is present */

/* ------------------------------------------------------------------ */
/* Files                                                               */

#define ORDO_FILE_NONE 0    /* nothing at the path */
#define ORDO_FILE_REGULAR 1
#define ORDO_FILE_DIR 2
#define ORDO_FILE_OTHER 3   /* a device, FIFO or socket */
/* What path names, following symbolic links (stat(2)): one of the above, or
 * -1 with the reason in ordo_last_error() (no permission to look...).
 * *mode (when mode is not NULL) gets its permission bits (07777), 0 when
 * there is nothing.  ordo.save replaces only regular files. */
int ordo_file_kind(const char *path, unsigned *mode);
/* CRC-32 of n bytes at data, continuing crc (0 to start): zlib's crc32(),
 * the checksum ordo.save writes per tensor and ordo.load checks. */
uint32_t ordo_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* ORDO_H */
