/*
 * harness.h - a tiny test harness for ordo's native tests.
 *
 * Each spec/native/test_*.c is its own program: it calls RUN() for each test
 * function and returns harness_end(), which prints "N passed, N failed" (the
 * line spec/run_tests.sh adds up).  CHECK failures are reported with file and
 * line and mark the current test failed; the test keeps running.
 */
#ifndef ORDO_HARNESS_H
#define ORDO_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int harness_passed, harness_failed, harness_skipped, harness_cur_failed, harness_cur_skipped;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "    FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            harness_cur_failed = 1;                                                    \
        }                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                           \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "    FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            harness_cur_failed = 1;                                                    \
        }                                                                              \
    } while (0)

#define CHECK_EQ_LONG(a, b)                                                            \
    do {                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                            \
        if (a_ != b_) {                                                                \
            fprintf(stderr, "    FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__,     \
                    __LINE__, #a, #b, a_, b_);                                         \
            harness_cur_failed = 1;                                                    \
        }                                                                              \
    } while (0)

/* Skip the current test visibly (counted as skipped, never as passed). */
#define SKIP(why)                                                                      \
    do {                                                                               \
        printf("    skipped: %s\n", why);                                              \
        harness_cur_skipped = 1;                                                       \
        return;                                                                        \
    } while (0)

static double harness_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void harness_run(const char *name, void (*fn)(void)) {
    double t0 = harness_now();
    harness_cur_failed = 0;
    harness_cur_skipped = 0;
    fn();
    double ms = (harness_now() - t0) * 1e3;
    if (harness_cur_failed) {
        harness_failed++;
        printf("not ok - %s (%.0f ms)\n", name, ms);
    } else if (harness_cur_skipped) {
        harness_skipped++;
        printf("skip   - %s\n", name);
    } else {
        harness_passed++;
        printf("ok     - %s (%.0f ms)\n", name, ms);
    }
    fflush(stdout);
}

#define RUN(fn) harness_run(#fn, fn)

static int harness_end(void) {
    printf("%d passed, %d failed, %d skipped\n", harness_passed, harness_failed, harness_skipped);
    return harness_failed ? 1 : 0;
}

#endif
