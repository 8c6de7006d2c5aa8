/*
 * test_random_async.c - random workloads against a serial oracle with async
 * ops and reusable operators (rules 1, 2, 3, 11).
 *
 * Async: every op is pushed with ordo_push_async and hands its ordo_done to
 * helper threads, which do the op's work and then call ordo_done_complete;
 * the engine must treat the op as running until then.  Operators: 64
 * operators with fixed var lists are each pushed many times (random ctx and
 * priority) and deleted while runs are still pending.  See random_workload.h.
 */
#include "harness.h"
#include "random_workload.h"

#define ROUNDS 5
#define NOPS 10000

static void run_all_workers(int kind, rw_variant var) {
    static const int workers[] = {1, 2, 4};
    for (int i = 0; i < ARRAY_LEN(workers); i++) {
        double t0 = now_s();
        rw_run(kind, workers[i], var, ROUNDS, scaled(NOPS, 1000), test_seed());
        printf("    %s %s workers=%d: %d x %ld ops in %.2f s\n", kind_str(kind), rw_variant_name(var),
               workers[i], ROUNDS, scaled(NOPS, 1000), now_s() - t0);
    }
}

#define RANDOM_TEST(var, kind)                                                         \
    static void test_random_##var##_##kind(void) {                                     \
        run_all_workers(ORDO_ENGINE_##kind, RW_##var);                                 \
    }

RANDOM_TEST(ASYNC, NAIVE)
RANDOM_TEST(ASYNC, POOLED)
RANDOM_TEST(ASYNC, PER_DEVICE)
RANDOM_TEST(OPERATORS, NAIVE)
RANDOM_TEST(OPERATORS, POOLED)
RANDOM_TEST(OPERATORS, PER_DEVICE)

int main(void) {
    printf("# seed %#llx (set ORDO_TEST_SEED to change), scale %g\n",
           (unsigned long long)test_seed(), test_scale());
    TEST(test_random_ASYNC_NAIVE);
    TEST(test_random_ASYNC_POOLED);
    TEST(test_random_ASYNC_PER_DEVICE);
    TEST(test_random_OPERATORS_NAIVE);
    TEST(test_random_OPERATORS_POOLED);
    TEST(test_random_OPERATORS_PER_DEVICE);
    return harness_end();
}
