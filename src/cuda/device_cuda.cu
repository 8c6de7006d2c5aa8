/*
 * device_cuda.cu - the CUDA implementation of the device interface (device.h).
 *
 * Thin on purpose: every decision about ordering lives in the engine
 * (var_events.c), which is tested on the simulated device; this file maps
 * each call to its CUDA runtime counterpart and turns cudaError_t into
 * messages that name the device.
 *
 * Streams are non-blocking (they never synchronise with the legacy default
 * stream) and events have timing disabled, which makes recording and
 * waiting on them cheapest; only the profiler's timing events
 * (timer_create) keep timestamps.
 *
 * Data-dependent kernel errors (kernels/cuda/cuda_internal.cuh) land in a
 * per-device error slot in mapped page-locked memory; whenever the host
 * synchronises (event_sync, device_sync) it reads the slot, and a set slot
 * fails that wait with the kernel's message, once.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../device.h"
#include "../ordo.h"
#include "../../kernels/cuda/cuda_internal.cuh"

/* A failed runtime call also sets the calling thread's last error (CUDA:
 * cudaGetLastError returns "the last error that has been produced by any of
 * the runtime calls in the same host thread"): it is cleared once reported
 * here, or the next op_check on this thread (a worker's next op, whose
 * launches were fine) would fail that op with it.  A sticky error (the
 * context lost) stays whatever is cleared: every later call reports it. */
#define CU_FAIL(call, dev, what)                                                                 \
    do {                                                                                         \
        cudaError_t rc_ = (call);                                                                \
        if (rc_ != cudaSuccess) {                                                                \
            cudaGetLastError();                                                                  \
            snprintf(err, errlen, "gpu(%d): %s: %s", (dev), (what), cudaGetErrorString(rc_));     \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

/* A machine with a CUDA driver whose devices cannot be used (a driver older
 * than this build's runtime, an HGX board whose fabric manager is not
 * running, a driver/library mismatch...) says why, once, on stderr: every
 * GPU context then reports only "no CUDA device available".  Silent where
 * there is no driver at all or no device (the usual machine without a GPU). */
static void cuda_say_why_none(cudaError_t rc) {
    int drv = 0, rt = 0;
    if (rc == cudaErrorNoDevice || cudaDriverGetVersion(&drv) != cudaSuccess || drv <= 0) return;
    cudaRuntimeGetVersion(&rt);
    fprintf(stderr,
            "ordo: the CUDA driver (for CUDA %d.%d) gives no usable device: %s (error %d; ordo's CUDA runtime is "
            "%d.%d); GPU contexts report \"no CUDA device available\"\n",
            drv / 1000, drv % 1000 / 10, cudaGetErrorString(rc), (int)rc, rt / 1000, rt % 1000 / 10);
}

static cudaError_t count_error;
static void cuda_say_why_none_once(void) { cuda_say_why_none(count_error); }

static int cuda_count(void) {
    static int cached = -1;
    if (cached < 0) {
        int n = 0;
        cudaError_t rc = cudaGetDeviceCount(&n);
        if (rc != cudaSuccess) {
            cudaGetLastError(); /* clear the sticky "no device" error */
            n = 0;
            static pthread_once_t once = PTHREAD_ONCE_INIT;
            count_error = rc;
            pthread_once(&once, cuda_say_why_none_once);
        }
        cached = n;
    }
    return cached;
}

/* ---- the error slots ------------------------------------------------------------ */

static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static cu_error_slot *slot_host[ORDO_MAX_DEVICES];
static cu_error_slot *slot_dev[ORDO_MAX_DEVICES];

extern "C" cu_error_slot *cu_error_slot_device(int dev) {
    pthread_mutex_lock(&slot_mu);
    if (!slot_dev[dev]) {
        void *h = NULL, *d = NULL;
        cudaSetDevice(dev);
        if (cudaHostAlloc(&h, sizeof(cu_error_slot), cudaHostAllocMapped) == cudaSuccess &&
            cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess) {
            memset(h, 0, sizeof(cu_error_slot));
            slot_host[dev] = (cu_error_slot *)h;
            slot_dev[dev] = (cu_error_slot *)d;
        } else {
            if (h) cudaFreeHost(h);
            cudaGetLastError(); /* (see CU_FAIL) */
        }
    }
    cu_error_slot *d = slot_dev[dev];
    pthread_mutex_unlock(&slot_mu);
    return d;
}

/* The checked ops' slots (kernels/cuda/error_slots.cu): mapped page-locked
 * memory, written by kernels through its device address. */
extern "C" int cu_slot_memory(int dev, size_t nbytes, void **host, void **devp) {
    int cur = -1;
    cudaGetDevice(&cur);
    cudaSetDevice(dev);
    void *h = NULL, *d = NULL;
    int rc = 1;
    if (cudaHostAlloc(&h, nbytes, cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess) {
        if (cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess) {
            *host = h, *devp = d, rc = 0;
        } else {
            cudaFreeHost(h);
        }
    }
    if (rc) cudaGetLastError(); /* not the next op's launch failure */
    if (cur >= 0 && cur != dev) cudaSetDevice(cur);
    return rc;
}

/* After a host sync: the first data-dependent error a kernel reported. */
static int take_kernel_error(int dev, char *err, size_t errlen) {
    volatile cu_error_slot *s = slot_host[dev];
    if (!s || s->code <= 0) return 0;
    const int n = snprintf(err, errlen, "gpu(%d): ", dev);
    if (n > 0 && (size_t)n < errlen) cu_error_format((const cu_error_slot *)s, err + n, errlen - (size_t)n);
    s->code = 0; /* reported once */
    return 1;
}

/* ---- streams and events ------------------------------------------------------------ */

static void cuda_use_device(int dev) {
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != dev) cudaSetDevice(dev);
}

static int cuda_stream_create(int dev, void **stream, char *err, size_t errlen) {
    cudaStream_t s;
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    CU_FAIL(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), dev, "cannot create a stream");
    *stream = (void *)s;
    return 0;
}

static void cuda_stream_destroy(int dev, void *stream) {
    cudaSetDevice(dev);
    if (cudaStreamDestroy((cudaStream_t)stream) != cudaSuccess) cudaGetLastError(); /* (see CU_FAIL) */
}

static int cuda_event_create(int dev, void **ev, char *err, size_t errlen) {
    cudaEvent_t e;
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    CU_FAIL(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), dev, "cannot create an event");
    *ev = (void *)e;
    return 0;
}

static void cuda_event_destroy(int dev, void *ev) {
    cudaSetDevice(dev);
    if (cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess) cudaGetLastError(); /* (see CU_FAIL) */
}

/* A failed record is cleared from the thread's last error once reported:
 * the caller decides what it means (the engine fails the op; the profiler
 * drops a timing), and the next op_check on this thread must not report it
 * again as that op's launch failure. */
static int cuda_event_record(int dev, void *ev, void *stream, char *err, size_t errlen) {
    cudaError_t rc = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "gpu(%d): cannot record an event: %s", dev, cudaGetErrorString(rc));
        return 1;
    }
    return 0;
}

static int cuda_stream_wait_event(int dev, void *stream, void *ev, char *err, size_t errlen) {
    CU_FAIL(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)ev, 0), dev, "cannot wait for an event");
    return 0;
}

static int cuda_event_sync(int dev, void *ev, char *err, size_t errlen) {
    CU_FAIL(cudaEventSynchronize((cudaEvent_t)ev), dev, "GPU work failed");
    return take_kernel_error(dev, err, errlen);
}

static int cuda_event_wait_quiet(int dev, void *ev, char *err, size_t errlen) {
    CU_FAIL(cudaEventSynchronize((cudaEvent_t)ev), dev, "GPU work failed");
    return 0;
}

static int cuda_timer_create(int dev, void **ev, char *err, size_t errlen) {
    cudaEvent_t e;
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    CU_FAIL(cudaEventCreateWithFlags(&e, cudaEventDefault), dev, "cannot create a timing event");
    *ev = (void *)e;
    return 0;
}

/* cudaEventElapsedTime gives float milliseconds (about 0.5 us resolution).
 * The kernel error slot is not read here (device.h: reading a profile never
 * takes an op's error), and a failure is cleared from the calling thread's
 * last error, which belongs to its next op_check. */
static int cuda_event_elapsed_ns(int dev, void *start, void *end, double *ns, char *err, size_t errlen) {
    float ms = 0;
    cudaError_t rc = cudaEventSynchronize((cudaEvent_t)start);
    if (rc == cudaSuccess) rc = cudaEventSynchronize((cudaEvent_t)end);
    if (rc == cudaSuccess) rc = cudaEventElapsedTime(&ms, (cudaEvent_t)start, (cudaEvent_t)end);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "gpu(%d): cannot read a timing event: %s", dev, cudaGetErrorString(rc));
        return 1;
    }
    *ns = (double)ms * 1e6;
    return 0;
}

static int cuda_device_sync(int dev, char *err, size_t errlen) {
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    CU_FAIL(cudaDeviceSynchronize(), dev, "GPU work failed");
    return take_kernel_error(dev, err, errlen);
}

static int cuda_device_sync_quiet(int dev, char *err, size_t errlen) {
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    CU_FAIL(cudaDeviceSynchronize(), dev, "GPU work failed");
    return 0; /* the kernel error slot stays for the next sync */
}

static int cuda_op_check(int dev, void *stream, char *err, size_t errlen) {
    (void)stream;
    CU_FAIL(cudaGetLastError(), dev, "kernel launch failed");
    return 0;
}

static int cuda_host_fn(int dev, void *stream, void (*fn)(void *), void *arg, char *err, size_t errlen) {
    CU_FAIL(cudaLaunchHostFunc((cudaStream_t)stream, fn, arg), dev, "cannot queue a host function");
    return 0;
}

/* ---- memory -------------------------------------------------------------------------- */

static int cuda_mem_alloc(int dev, size_t nbytes, void **ptr, char *err, size_t errlen) {
    CU_FAIL(cudaSetDevice(dev), dev, "cannot select the device");
    cudaError_t rc = cudaMalloc(ptr, nbytes ? nbytes : 1);
    if (rc == cudaErrorMemoryAllocation) {
        cudaGetLastError(); /* not sticky: clear it */
        snprintf(err, errlen, "gpu(%d): out of memory", dev);
        return 1;
    }
    CU_FAIL(rc, dev, "cannot allocate device memory");
    return 0;
}

/* cudaFree may return an earlier asynchronous launch's error: nobody's to
 * report here, and no launch failure of this thread's next op (CU_FAIL). */
static void cuda_mem_free(int dev, void *ptr) {
    cudaSetDevice(dev);
    if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

static void cuda_mem_info(int dev, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = 0;
    if (cudaSetDevice(dev) != cudaSuccess || cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
        cudaGetLastError();
        *free_bytes = *total_bytes = 0;
    }
}

static int cuda_host_alloc_pinned(size_t nbytes, void **ptr, char *err, size_t errlen) {
    cudaError_t rc = cudaHostAlloc(ptr, nbytes ? nbytes : 1, cudaHostAllocPortable);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cannot allocate %zu bytes of pinned host memory: %s", nbytes, cudaGetErrorString(rc));
        return 1;
    }
    return 0;
}

static void cuda_host_free_pinned(void *ptr) {
    if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError(); /* (see CU_FAIL) */
}

static int cuda_memcpy_async(int dev, void *dst, const void *src, size_t nbytes, int kind, void *stream,
                             char *err, size_t errlen) {
    cudaMemcpyKind k = kind == DEV_COPY_H2D ? cudaMemcpyHostToDevice
                     : kind == DEV_COPY_D2H ? cudaMemcpyDeviceToHost
                                            : cudaMemcpyDeviceToDevice;
    CU_FAIL(cudaMemcpyAsync(dst, src, nbytes, k, (cudaStream_t)stream), dev, "copy failed");
    return 0;
}

extern "C" const device_backend ordo_cuda_backend = {
    "cuda",
    cuda_count,
    cuda_use_device,
    cuda_stream_create,
    cuda_stream_destroy,
    cuda_event_create,
    cuda_event_destroy,
    cuda_event_record,
    cuda_stream_wait_event,
    cuda_event_sync,
    cuda_event_wait_quiet,
    cuda_device_sync,
    cuda_device_sync_quiet,
    cuda_op_check,
    cuda_host_fn,
    cuda_mem_alloc,
    cuda_mem_free,
    cuda_mem_info,
    cuda_host_alloc_pinned,
    cuda_host_free_pinned,
    cuda_memcpy_async,
    cuda_timer_create,
    cuda_event_elapsed_ns,
};
