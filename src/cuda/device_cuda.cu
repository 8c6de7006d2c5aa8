/*
 * device_cuda.cu - the CUDA side of the engine's device interface.
 *
 * Each GPU worker owns a non-blocking stream, created lazily on the worker
 * thread the first time it runs an op for that device.  An op's kernels are
 * queued on the worker's stream; op_finish makes their completion the op's
 * completion.
 *
 * Today op_finish waits on an event recorded after the op (one host wait
 * per GPU op).  The event-based scheme of DESIGN.md section 2 -- vars
 * carrying the event of their last GPU write, dependents on other streams
 * calling cudaStreamWaitEvent, the host waiting only when the CPU reads --
 * plugs in here and in var.device_state; it arrives with the CUDA tensor
 * backend, where it can be tested on a GPU.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "../device.h"

static int cuda_count(void) {
    static int cached = -1;
    if (cached < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            cudaGetLastError(); /* clear the sticky "no device" error */
            n = 0;
        }
        cached = n;
    }
    return cached;
}

static int cuda_stream_create(int dev_id, void **stream, char *err, size_t errlen) {
    cudaStream_t s;
    cudaError_t rc = cudaSetDevice(dev_id);
    if (rc == cudaSuccess) rc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (rc != cudaSuccess) {
        snprintf(err, errlen, "gpu(%d): cannot create a CUDA stream: %s", dev_id, cudaGetErrorString(rc));
        return 1;
    }
    *stream = (void *)s;
    return 0;
}

static void cuda_stream_destroy(int dev_id, void *stream) {
    cudaSetDevice(dev_id);
    cudaStreamDestroy((cudaStream_t)stream);
}

static int cuda_op_finish(int dev_id, void *stream, char *err, size_t errlen) {
    cudaEvent_t ev;
    cudaError_t rc = cudaSetDevice(dev_id);
    if (rc == cudaSuccess) rc = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (rc == cudaSuccess) {
        rc = cudaEventRecord(ev, (cudaStream_t)stream);
        if (rc == cudaSuccess) rc = cudaEventSynchronize(ev);
        cudaEventDestroy(ev);
    }
    if (rc != cudaSuccess) {
        snprintf(err, errlen, "gpu(%d): %s", dev_id, cudaGetErrorString(rc));
        return 1;
    }
    return 0;
}

extern "C" const device_backend ordo_cuda_backend = {
    cuda_count,
    cuda_stream_create,
    cuda_stream_destroy,
    cuda_op_finish,
};
