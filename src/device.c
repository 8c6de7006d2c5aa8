/*
 * device.c - which GPU backend the process uses.
 *
 * CUDA when the library was built with it (src/cuda/, compiled when nvcc is
 * found).  The simulated device (device_sim.c) only on request: the
 * environment variable ORDO_SIMULATED_GPUS=n, or a native test calling
 * ordo_device_use_simulated before anything touched a GPU context.  Without
 * either, there is no backend and every GPU context fails with "no CUDA
 * device available".  The choice is made once, at the first call, so every
 * stream, event and block in the process comes from one backend.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

#ifdef ORDO_WITH_CUDA
extern const device_backend ordo_cuda_backend;
#endif

static const device_backend *chosen;
static int sim_request; /* GPUs asked for by ordo_device_use_simulated */
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
    /* A bad ORDO_SIMULATED_GPUS gives no simulated device here (0); every
     * engine creation fails on it with the message (engine.c). */
    int n = sim_request;
    if (!n) device_sim_env_check(&n, NULL, 0);
    if (n > 0) {
        chosen = ordo_device_sim_backend(n);
        return;
    }
#ifdef ORDO_WITH_CUDA
    chosen = &ordo_cuda_backend;
#endif
}

const device_backend *ordo_device_backend(void) {
    pthread_once(&choose_once, choose);
    return chosen;
}

void ordo_device_use_simulated(int ndev) {
    sim_request = ndev > 0 ? ndev : 1;
    pthread_once(&choose_once, choose);
}
