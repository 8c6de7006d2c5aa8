/*
 * register.cu - the one entry point that registers every CUDA kernel.
 *
 * The registry (src/kernel_registry.c) calls ordo_cuda_kernels_register once,
 * right after the CPU kernels, in builds with CUDA.  Registering needs no
 * GPU: without one, GPU contexts fail before any kernel is looked up.
 */
#include "cuda_internal.cuh"

extern "C" {
void cuda_register_copy(void);
void cuda_register_elementwise(void);
void cuda_register_compare(void);
void cuda_register_unary(void);
void cuda_register_reduce(void);
void cuda_register_softmax(void);
void cuda_register_lines(void);
void cuda_register_matmul(void);
void cuda_register_linalg(void);
void cuda_register_random(void);
void cuda_register_index(void);
void cuda_register_conv(void);
void cuda_register_optim(void);

void ordo_cuda_kernels_register(void) {
    cuda_register_copy();
    cuda_register_elementwise();
    cuda_register_compare();
    cuda_register_unary();
    cuda_register_reduce();
    cuda_register_softmax();
    cuda_register_lines();
    cuda_register_matmul();
    cuda_register_linalg();
    cuda_register_random();
    cuda_register_index();
    cuda_register_conv();
    cuda_register_optim();
}
}
