/*
 * test_random.c - random workloads against a serial oracle (rules 1, 2, 3).
 *
 * For every engine kind and 1, 2 and 4 cpu workers: ROUNDS rounds of NOPS
 * random ops over 100 vars; results must equal the serial computation bit
 * for bit (see random_workload.h).  Variants: one write per op; several
 * writes per op; ops spread over cpu(0..3) (each cpu(n) has its own pool in
 * the per-device engine); random priorities with some CPU_PRIORITIZED ops.
 * Async ops and reusable operators are in test_random_async.c.
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

RANDOM_TEST(PLAIN, NAIVE)
RANDOM_TEST(PLAIN, POOLED)
RANDOM_TEST(PLAIN, PER_DEVICE)
RANDOM_TEST(MULTIWRITE, NAIVE)
RANDOM_TEST(MULTIWRITE, POOLED)
RANDOM_TEST(MULTIWRITE, PER_DEVICE)
RANDOM_TEST(DEVICES, NAIVE)
RANDOM_TEST(DEVICES, POOLED)
RANDOM_TEST(DEVICES, PER_DEVICE)
RANDOM_TEST(PRIORITY, NAIVE)
RANDOM_TEST(PRIORITY, POOLED)
RANDOM_TEST(PRIORITY, PER_DEVICE)

int main(void) {
    printf("# seed %#llx (set ORDO_TEST_SEED to change), scale %g\n",
           (unsigned long long)test_seed(), test_scale());
    TEST(test_random_PLAIN_NAIVE);
    TEST(test_random_PLAIN_POOLED);
    TEST(test_random_PLAIN_PER_DEVICE);
    TEST(test_random_MULTIWRITE_NAIVE);
    TEST(test_random_MULTIWRITE_POOLED);
    TEST(test_random_MULTIWRITE_PER_DEVICE);
    TEST(test_random_DEVICES_NAIVE);
    TEST(test_random_DEVICES_POOLED);
    TEST(test_random_DEVICES_PER_DEVICE);
    TEST(test_random_PRIORITY_NAIVE);
    TEST(test_random_PRIORITY_POOLED);
    TEST(test_random_PRIORITY_PER_DEVICE);
    return harness_end();
}
