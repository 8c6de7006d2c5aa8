/*
 * device.h - what the engine needs from a GPU backend (the CPU needs nothing).
 *
 * Plain C with no atomics, so the CUDA backend (C++ under nvcc) can include
 * it.  The backend is chosen at build time in device.c.
 */
#ifndef ORDO_DEVICE_H
#define ORDO_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct device_backend {
    int  (*count)(void); /* devices present; 0 when none */
    /* A stream for one worker thread; 0 = ok, else err is filled. */
    int  (*stream_create)(int dev_id, void **stream, char *err, size_t errlen);
    void (*stream_destroy)(int dev_id, void *stream);
    /* After a GPU op's function returned: make its queued work complete
     * before the op's vars are released.  0 = ok, else err is filled. */
    int  (*op_finish)(int dev_id, void *stream, char *err, size_t errlen);
} device_backend;

extern const device_backend *ordo_gpu_backend; /* NULL without CUDA */

#ifdef __cplusplus
}
#endif
#endif
