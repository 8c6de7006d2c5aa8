/*
 * kernel_test.h - what the kernel tests (test_kernels.c, test_conv_kernels.c)
 * share: a seeded generator, mismatch counting, and two ways to run a
 * kernel: call() directly with a bare run context, and run_engine() as an
 * engine op, whose failure (EXPECT_FAIL) must name the kernel and the
 * problem.  Included after harness.h and test_util.h; everything is static
 * (each test binary is one translation unit).  The test sets g_eng.
 */
#ifndef ORDO_KERNEL_TEST_H
#define ORDO_KERNEL_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ordo_kernel.h"

static rng_t R;
static ordo_engine *g_eng;
static long g_bad; /* mismatches in the running test */

static int64_t rnd(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next(&R) % (uint64_t)(hi - lo + 1)); }

/* Reports a mismatch (the first 12 of a test are printed); END() fails the
 * test if there was any. */
#define BAD(...)                                                                       \
    do {                                                                               \
        if (g_bad++ < 12) {                                                            \
            fprintf(stderr, "    mismatch %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)
static void begin(void) { g_bad = 0; }
#define END() CHECK_MSG(g_bad == 0, "%ld mismatches", g_bad)

static ordo_kernel_args args0(void) {
    ordo_kernel_args a;
    memset(&a, 0, sizeof a);
    return a;
}

/* Empty arguments for a kernel of nin inputs and nout outputs. */
static ordo_kernel_args args_n(int nin, int nout) {
    ordo_kernel_args a = args0();
    a.nin = nin;
    a.nout = nout;
    return a;
}

/* Calls the CPU kernel directly; -999 (and a mismatch) if there is none. */
static int call(const char *name, const ordo_kernel_args *a) {
    ordo_kernel_fn fn = ordo_kernel_lookup(name, ORDO_CPU);
    if (!fn) {
        BAD("no CPU kernel named %s", name);
        return -999;
    }
    ordo_run_ctx rc = {{ORDO_CPU, 0}, NULL, -1, NULL, NULL};
    return fn(&rc, a);
}

typedef struct tramp_t {
    ordo_kernel_fn fn;
    ordo_kernel_args a;
} tramp_t;

static int tramp(const ordo_run_ctx *rc, void *p) {
    tramp_t *t = p;
    return t->fn(rc, &t->a);
}

/* Runs the kernel as an op on g_eng; returns the wait's code, msg its error. */
static int run_engine(const char *name, const ordo_kernel_args *a, char *msg, size_t nmsg) {
    tramp_t t = {ordo_kernel_lookup(name, ORDO_CPU), *a};
    if (!t.fn) return -999;
    ordo_var *v = ordo_new_variable(g_eng);
    ordo_push_sync(g_eng, tramp, &t, NULL, cpu_ctx(0), NULL, 0, &v, 1, ORDO_PROP_NORMAL, 0, name);
    int rc = ordo_wait_for_var(g_eng, v);
    snprintf(msg, nmsg, "%s", rc ? ordo_last_error() : "");
    ordo_delete_variable(g_eng, NULL, NULL, cpu_ctx(0), v);
    return rc;
}

/* The kernel run through the engine must fail with a message holding substr. */
#define EXPECT_FAIL(name, a, substr)                                                     \
    do {                                                                                 \
        char msg_[512];                                                                  \
        int rc_ = run_engine(name, a, msg_, sizeof msg_);                                \
        CHECK_MSG(rc_ == ORDO_ERR_FAILED && strstr(msg_, substr) && strstr(msg_, name),  \
                  "%s: rc %d, message '%s', wanted '%s'", name, rc_, msg_, substr);      \
    } while (0)

#endif
