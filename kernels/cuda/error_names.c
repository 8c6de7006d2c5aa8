/*
 * error_names.c - numbers the names of the kernels that report
 * data-dependent errors through a GPU's error slot (cu_report in
 * cuda_internal.cuh), so the slot holds a small int, and gives the names
 * back for the message.  Shared by the CUDA backend (src/cuda/device_cuda.cu)
 * and its host emulation (emu/emu_runtime.cpp); built with either.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* declared for C++ in cuda_internal.cuh */
int cu_error_kernel_id(const char *kernel);
const char *cu_error_kernel_name(int id);

#define MAX_NAMES 256

static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static char names[MAX_NAMES][48]; /* written once each, never changed */
static int nnames;

/* The number of kernel's name, given out at its first call; -1 when the
 * table is full (the message then says "a kernel"). */
int cu_error_kernel_id(const char *kernel) {
    pthread_mutex_lock(&names_mu);
    int id = 0;
    while (id < nnames && strcmp(names[id], kernel)) id++;
    if (id == nnames && id < MAX_NAMES) {
        snprintf(names[id], sizeof names[id], "%s", kernel);
        nnames++;
    }
    pthread_mutex_unlock(&names_mu);
    return id < MAX_NAMES ? id : -1;
}

const char *cu_error_kernel_name(int id) {
    pthread_mutex_lock(&names_mu);
    const char *name = id >= 0 && id < nnames ? names[id] : "a kernel";
    pthread_mutex_unlock(&names_mu);
    return name;
}
