/*
 * device.c - which GPU backend the engine uses.
 *
 * The CUDA backend (src/cuda/) is compiled only when nvcc is found; without
 * it, the engine has no GPU backend and every GPU context gets a clear
 * "no CUDA device available" error at push.
 */
#include "internal.h"

#ifdef ORDO_WITH_CUDA
extern const device_backend ordo_cuda_backend;
const device_backend *ordo_gpu_backend = &ordo_cuda_backend;
#else
const device_backend *ordo_gpu_backend = NULL;
#endif
