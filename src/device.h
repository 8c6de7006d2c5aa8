/*
 * device.h - what the engine and the storage layer need from a GPU backend
 * (the CPU needs nothing).
 *
 * Plain C with no atomics, so the CUDA backend (C++ under nvcc) can include
 * it.  Two backends implement it: CUDA (src/cuda/device_cuda.cu, compiled
 * when nvcc is found) and the simulated device (src/device_sim.c), where
 * streams are host threads running their work in order and device memory
 * is host memory.  The simulator exists so the engine's GPU scheduling -
 * streams, events, copies, the caching allocator - is tested on machines
 * without a GPU, under the sanitizers; it is chosen only on request
 * (ORDO_SIMULATED_GPUS=n, or ordo_device_use_simulated in native tests).
 *
 * The semantics are CUDA's: work queued on one stream runs in order; an
 * event records "everything queued on this stream so far"; a stream told to
 * wait for an event runs nothing queued after the wait until the event has
 * completed; event_sync blocks the calling host thread.  A stream, event or
 * allocation belongs to one device (dev_id).
 *
 * Every function returning int returns 0 on success, or nonzero with a
 * message in err naming the device ("gpu(0): ...").  Errors of work that
 * already ran asynchronously (a kernel fault) surface at the next
 * event_sync / device_sync, as in CUDA.
 */
#ifndef ORDO_DEVICE_H
#define ORDO_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DEV_COPY_H2D = 1, DEV_COPY_D2H = 2, DEV_COPY_D2D = 3 };

typedef struct device_backend {
    const char *name; /* "cuda" or "simulated" */
    int  (*count)(void); /* devices present; 0 when none */

    /* Makes dev_id the calling thread's current device (before an op's
     * function runs: kernels launch on the current device). */
    void (*use_device)(int dev_id);

    /* A stream for one worker thread. */
    int  (*stream_create)(int dev_id, void **stream, char *err, size_t errlen);
    void (*stream_destroy)(int dev_id, void *stream);

    /* Events: created once and reused (recording again moves them). */
    int  (*event_create)(int dev_id, void **ev, char *err, size_t errlen);
    void (*event_destroy)(int dev_id, void *ev);
    int  (*event_record)(int dev_id, void *ev, void *stream, char *err, size_t errlen);
    /* Work queued on stream after this call waits for ev (no host wait). */
    int  (*stream_wait_event)(int dev_id, void *stream, void *ev, char *err, size_t errlen);
    /* The host waits for ev; reports errors of the work it covers. */
    int  (*event_sync)(int dev_id, void *ev, char *err, size_t errlen);
    /* The host waits for ev and leaves the errors of the work it covers
     * to the next event_sync or device_sync (a checked op's own failure
     * comes from its check, not from the device's other work).  Reports
     * only a failure of the wait itself. */
    int  (*event_wait_quiet)(int dev_id, void *ev, char *err, size_t errlen);
    /* The host waits for all work on the device (wait_for_all, shutdown). */
    int  (*device_sync)(int dev_id, char *err, size_t errlen);
    /* The same, leaving the device's failures to the next event_sync or
     * device_sync (an engine destroyed: they may be another engine's
     * work's, to be reported by its waits).  Reports only a failure of the
     * wait itself. */
    int  (*device_sync_quiet)(int dev_id, char *err, size_t errlen);

    /* After an op's function queued its work on stream: launch errors
     * (bad configuration, no kernel image) are the op's failure. */
    int  (*op_check)(int dev_id, void *stream, char *err, size_t errlen);

    /* Runs fn(arg) on a host thread once everything queued on stream
     * before it has completed, in stream order.  fn must not call the
     * backend. */
    int  (*host_fn)(int dev_id, void *stream, void (*fn)(void *), void *arg, char *err, size_t errlen);

    /* Device memory.  mem_alloc returns 1 when the device is out of memory
     * (err says so), another nonzero value for other errors. */
    int  (*mem_alloc)(int dev_id, size_t nbytes, void **ptr, char *err, size_t errlen);
    void (*mem_free)(int dev_id, void *ptr);
    /* Bytes free and total on the device (total 0 when unknown). */
    void (*mem_info)(int dev_id, size_t *free_bytes, size_t *total_bytes);
    /* Page-locked host memory, so copies can run asynchronously. */
    int  (*host_alloc_pinned)(size_t nbytes, void **ptr, char *err, size_t errlen);
    void (*host_free_pinned)(void *ptr);

    /* Queues a copy of nbytes on stream (kind DEV_COPY_*). */
    int  (*memcpy_async)(int dev_id, void *dst, const void *src, size_t nbytes, int kind, void *stream,
                         char *err, size_t errlen);

    /* Timing, for the profiler only.  A timing event is an event that also
     * keeps when the device reached it; the engine's ordering events leave
     * that out (CUDA: cudaEventDisableTiming), because taking the timestamp
     * makes every record dearer.  It is recorded with event_record and
     * destroyed with event_destroy like any event. */
    int  (*timer_create)(int dev_id, void **ev, char *err, size_t errlen);
    /* The device time from start to end (two timing events of dev_id, both
     * recorded; end may come before start: negative) in *ns.  Waits for
     * both to complete.  Unlike event_sync it never reports failures of the
     * work they cover: those stay for the engine's next host wait, so that
     * reading a profile cannot take an op's error away from the wait that
     * must report it.  event_elapsed_ns(dev, ev, ev) is such a wait on ev. */
    int  (*event_elapsed_ns)(int dev_id, void *start, void *end, double *ns, char *err, size_t errlen);
} device_backend;

/* The backend in use: CUDA when built with it, the simulator when asked
 * for, else NULL (every GPU context then fails with "no CUDA device
 * available").  Chosen once, at the first call. */
const device_backend *ordo_device_backend(void);

/* Native tests: make the simulated device with ndev GPUs the backend.
 * Call before anything touches a GPU context. */
void ordo_device_use_simulated(int ndev);
/* The simulated backend itself (device_sim.c). */
const device_backend *ordo_device_sim_backend(int ndev);
/* Simulated device tuning for tests: delay_ns of busy work before each
 * queued item on a stream (0 = none), to widen race windows; a memory
 * limit per device in bytes (0 = unlimited) to test out-of-memory paths. */
void ordo_device_sim_configure(unsigned delay_ns, size_t mem_limit);
/* An asynchronous failure on a simulated stream, as a faulting kernel
 * raises it: the device keeps msg, and the first host wait on the device
 * after the stream got there reports it, once.  0 = done. */
int ordo_device_sim_inject_error(void *stream, const char *msg);
/* The device a simulated stream belongs to. */
int ordo_device_sim_stream_device(void *stream);
/* The calling thread's current simulated device (CUDA's cudaGetDevice; 0
 * until selected), and selecting one (cudaSetDevice: 1 when dev does not
 * exist).  The backend's calls select their device as the CUDA backend's
 * do; the CUDA emulation checks its launches against it. */
int ordo_device_sim_current_device(void);
int ordo_device_sim_set_current_device(int dev);
/* The host waits for the work before a simulated event, and leaves the
 * device's pending failure to the engine's next wait (event_sync would
 * report it): for the allocator's AddressSanitizer guard (dev_alloc.c). */
void ordo_device_sim_event_wait_quiet(void *ev);
/* The simulated device's ORDO_SIMULATED_GPU* variables checked (device_sim.c):
 * engine creation calls it so that a bad value fails the engine instead of
 * giving no simulated GPU; *ngpus gets the count.  0, or -1 with err. */
int device_sim_env_check(int *ngpus, char *err, size_t errlen);
/* An ORDO_* integer setting read and checked (engine.c; device_sim.c reads
 * its variables with it): 0 when unset or empty (out untouched), 1 with
 * *out in lo..hi, -1 with a message naming the variable, its value and the
 * range (plus note) in err when err is not NULL. */
int config_env_long(const char *name, long lo, long hi, const char *note, long *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
