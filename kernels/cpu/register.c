/*
 * register.c - the one entry point that registers every CPU kernel.
 *
 * The registry (src/kernel_registry.c) calls ordo_cpu_kernels_register once,
 * under pthread_once, before the first ordo_kernel_register or
 * ordo_kernel_lookup, so no user ever calls it; a kernel registered later by
 * a user under the same name replaces the built-in one.
 */
#include "cpu_internal.h"

void ordo_cpu_kernels_register(void) {
    cpu_register_copy();
    cpu_register_elementwise();
    cpu_register_compare();
    cpu_register_unary();
    cpu_register_reduce();
    cpu_register_softmax();
    cpu_register_lines();
    cpu_register_matmul();
    cpu_register_linalg();
    cpu_register_random();
    cpu_register_index();
    cpu_register_conv();
    cpu_register_optim();
}
