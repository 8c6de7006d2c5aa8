/*
 * test_util.h - helpers shared by ordo's native tests (spec/native/test_*.c).
 *
 * Included after harness.h.  Everything here is static: each test binary is a
 * single translation unit.
 *
 *  - TEST(fn)       RUN(fn) under a watchdog: a test that has not finished
 *                   after ORDO_TEST_TIMEOUT seconds (default 300; TEST_T(fn, s)
 *                   gives a shorter limit) is reported as failed ("hung")
 *                   with a summary line, and the binary exits, so a deadlock
 *                   fails CI instead of hanging it.
 *  - test_scale()   ORDO_TEST_SCALE (default 1): the runner sets it below 1
 *                   under sanitizers and valgrind to shrink op counts.
 *  - gates          ops that block until the test opens them, always bounded
 *                   (a gate never blocks more than GATE_MAX_S seconds; a gate
 *                   that times out is counted, and the tests check the count).
 *  - spin_us()      a busy wait: nanosleep of 1 us really sleeps ~50 us of
 *                   timer slack, which would make 10,000-op rounds crawl.
 *  - make_engine()  an engine of a given kind and worker count.
 *
 * Ops never call CHECK themselves: the harness's flags are plain ints owned
 * by the main thread (touching them from workers would be a data race under
 * TSan).  Ops record into atomics; the main thread checks afterwards.
 */
#ifndef ORDO_TEST_UTIL_H
#define ORDO_TEST_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ordo.h"

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ */
/* Sanitizer detection: RSS-based assertions make no sense under ASan
 * (quarantine) or TSan (shadow memory), so those tests relax there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_UNDER_SANITIZER 1
#endif
#endif
#ifndef TEST_UNDER_SANITIZER
#define TEST_UNDER_SANITIZER 0
#endif

/* ------------------------------------------------------------------ */
/* Scale and time                                                      */

static inline double test_scale(void) {
    static double s = -1;
    if (s < 0) {
        const char *v = getenv("ORDO_TEST_SCALE");
        double d = v ? atof(v) : 1.0;
        if (!(d > 0)) d = 1.0;
        if (d > 1) d = 1.0;
        s = d;
    }
    return s;
}

/* n scaled by ORDO_TEST_SCALE, never below lo (so every test still does
 * enough work to be meaningful even at scale 0.05). */
static inline long scaled(long n, long lo) {
    long v = (long)(n * test_scale());
    return v < lo ? lo : v;
}

/* Valgrind serialises threads; some generous "did not hang" bounds are
 * stretched when the runner says we are under it. */
static inline int under_valgrind(void) {
    const char *v = getenv("ORDO_TEST_VALGRIND");
    return v && *v && *v != '0';
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void spin_us(double us) {
    double end = now_s() + us * 1e-6;
    while (now_s() < end) {
    }
}

static inline void sleep_ms(double ms) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)((ms - ts.tv_sec * 1000.0) * 1e6);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Spin (yielding) until *flag >= target or max_s pass; returns 1 on success.
 * Used for "both ops are running at once" barriers. */
static inline int wait_until_at_least(atomic_int *flag, int target, double max_s) {
    double end = now_s() + max_s;
    while (atomic_load(flag) < target) {
        if (now_s() > end) return 0;
        sched_yield();
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Random numbers: xorshift64*, seeded per test so failures reproduce. */

typedef struct { uint64_t s; } rng_t;

static inline uint64_t test_seed(void) {
    const char *v = getenv("ORDO_TEST_SEED");
    return v ? strtoull(v, NULL, 0) : 0x9E3779B97F4A7C15ull;
}

static inline void rng_init(rng_t *r, uint64_t seed) {
    r->s = seed ? seed : 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_next(rng_t *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [lo, hi] inclusive. */
static inline int rng_range(rng_t *r, int lo, int hi) {
    return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* ------------------------------------------------------------------ */
/* Watchdog                                                            */

static _Atomic(const char *) wd_test_name;
static atomic_long wd_limit_s = 0; /* per-test override of the timeout */
static atomic_long wd_deadline_ms; /* 0 = disarmed */
static pthread_t wd_thread;
static int wd_started;

static inline long now_ms(void) { return (long)(now_s() * 1000); }

static inline double wd_timeout_s(void) {
    const char *v = getenv("ORDO_TEST_TIMEOUT");
    double t = v ? atof(v) : 300;
    return t > 0 ? t : 300;
}

static atomic_int wd_stop;

static inline void *wd_main(void *arg) {
    (void)arg;
    while (!atomic_load(&wd_stop)) {
        sleep_ms(50);
        long d = atomic_load(&wd_deadline_ms);
        if (d && now_ms() > d) {
            /* The main thread is stuck: report the hung test as failed with
             * the summary line the runner parses, then leave at once (exit()
             * would run atexit handlers that may touch the hung engine). */
            const char *name = atomic_load(&wd_test_name);
            printf("not ok - %s (watchdog: no result after %ld s; deadlock or hang)\n",
                   name ? name : "?", atomic_load(&wd_limit_s));
            printf("%d passed, %d failed, %d skipped\n", harness_passed, harness_failed + 1,
                   harness_skipped);
            fflush(stdout);
            fflush(stderr);
            _exit(3);
        }
    }
    return NULL;
}

/* Joined at exit so that valgrind sees no thread left behind. */
static inline void wd_shutdown(void) {
    atomic_store(&wd_stop, 1);
    pthread_join(wd_thread, NULL);
}

static inline void wd_arm(const char *name, double limit_s) {
    if (!wd_started && pthread_create(&wd_thread, NULL, wd_main, NULL) == 0) {
        wd_started = 1;
        atexit(wd_shutdown);
    }
    /* A per-test limit is for tests whose failure mode is a deadlock: they
     * should fail in a minute, not after the global timeout.  Valgrind runs
     * threads one at a time, so it gets ten times longer. */
    if (limit_s <= 0 || limit_s > wd_timeout_s()) limit_s = wd_timeout_s();
    if (under_valgrind()) limit_s *= 10;
    atomic_store(&wd_test_name, name);
    atomic_store(&wd_limit_s, (long)limit_s);
    atomic_store(&wd_deadline_ms, now_ms() + (long)(limit_s * 1000));
}

static inline void wd_disarm(void) { atomic_store(&wd_deadline_ms, 0); }

#define TEST_T(fn, limit_s)                                                            \
    do {                                                                               \
        wd_arm(#fn, limit_s);                                                          \
        RUN(fn);                                                                       \
        wd_disarm();                                                                   \
    } while (0)
#define TEST(fn) TEST_T(fn, 0)

/* ------------------------------------------------------------------ */
/* Engines                                                             */

static __attribute__((unused)) const int ALL_KINDS[3] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};

static inline const char *kind_str(int kind) {
    switch (kind) {
    case ORDO_ENGINE_NAIVE: return "naive";
    case ORDO_ENGINE_POOLED: return "pooled";
    case ORDO_ENGINE_PER_DEVICE: return "perdevice";
    default: return "?";
    }
}

static inline ordo_engine *make_engine_cfg(int kind, int cpu_workers, int prio_workers, int max_inflight) {
    ordo_engine_config c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.cpu_workers = cpu_workers;
    c.cpu_priority_workers = prio_workers;
    c.max_inflight = max_inflight;
    /* Bulks fill whatever their ops cost: the oracles' ops sleep for
     * microseconds, which would otherwise make the engine push them alone
     * (bulk_op_max_ns) and leave the bulk paths untested. */
    c.bulk_op_max_ns = -1;
    ordo_engine *e = ordo_engine_create(&c);
    if (!e)
        fprintf(stderr, "    ordo_engine_create(%s, %d workers) failed: %s\n", kind_str(kind),
                cpu_workers, ordo_last_error());
    return e;
}

static inline ordo_engine *make_engine(int kind, int cpu_workers) {
    return make_engine_cfg(kind, cpu_workers, 0, 0);
}

static inline ordo_ctx cpu_ctx(int id) {
    ordo_ctx c = {ORDO_CPU, id};
    return c;
}

/* ------------------------------------------------------------------ */
/* Gates: an op that blocks until the test opens the gate.             */

#define GATE_MAX_S 20.0

typedef struct {
    atomic_int open;
    atomic_int entered;   /* how many gate ops have started waiting */
    atomic_int timed_out; /* gate ops that gave up: the test must fail */
} gate_t;

static inline void gate_init(gate_t *g) {
    atomic_init(&g->open, 0);
    atomic_init(&g->entered, 0);
    atomic_init(&g->timed_out, 0);
}

static inline void gate_open(gate_t *g) { atomic_store(&g->open, 1); }

static inline void gate_pass(gate_t *g) {
    atomic_fetch_add(&g->entered, 1);
    double end = now_s() + GATE_MAX_S;
    while (!atomic_load(&g->open)) {
        if (now_s() > end) {
            atomic_fetch_add(&g->timed_out, 1);
            return;
        }
        sleep_ms(0.05);
    }
}

/* A sync op that passes the gate in param. */
static inline int gate_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    gate_pass((gate_t *)param);
    return 0;
}

/* Open a gate from another thread after a delay (so a test whose main thread
 * blocks in a wait still sees the gate open, and never hangs on it). */
typedef struct {
    gate_t *g;
    double delay_ms;
    pthread_t th;
} gate_timer_t;

static inline void *gate_timer_main(void *p) {
    gate_timer_t *t = (gate_timer_t *)p;
    /* polls, so that joining a timer whose gate the test already opened
     * does not sit out the whole delay */
    double end = now_s() + t->delay_ms / 1000.0;
    while (!atomic_load(&t->g->open) && now_s() < end) sleep_ms(1);
    gate_open(t->g);
    return NULL;
}

static inline void gate_open_later(gate_timer_t *t, gate_t *g, double delay_ms) {
    t->g = g;
    t->delay_ms = delay_ms;
    pthread_create(&t->th, NULL, gate_timer_main, t);
}

static inline void gate_timer_join(gate_timer_t *t) { pthread_join(t->th, NULL); }

/* ------------------------------------------------------------------ */
/* Small op helpers                                                    */

/* A global ticket clock: ops take a ticket when they start and when they end,
 * so tests can check "A ended before B started" without timing. */
static atomic_long g_ticket;
static inline long ticket(void) { return atomic_fetch_add(&g_ticket, 1) + 1; }

/* An op that does nothing. */
static inline int noop_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    (void)param;
    return 0;
}

/* An op that increments the atomic_long in param. */
static inline int count_op(const ordo_run_ctx *rc, void *param) {
    (void)rc;
    atomic_fetch_add((atomic_long *)param, 1);
    return 0;
}

static inline int push_simple(ordo_engine *e, ordo_sync_fn fn, void *param, ordo_var *const *r, int nr,
                       ordo_var *const *w, int nw, const char *name) {
    return ordo_push_sync(e, fn, param, NULL, cpu_ctx(0), r, nr, w, nw, ORDO_PROP_NORMAL, 0, name);
}

/* Threads of this process, from /proc/self/status (for "destroy joins"). */
static inline int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    fclose(f);
    return n;
}

/* Resident set size in bytes, from /proc/self/statm. */
static inline long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long size = 0, res = 0;
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
    fclose(f);
    return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

/* ------------------------------------------------------------------ */
/* Completer: helper threads that finish async ops.  An async op hands its
 * ordo_done to the completer; a helper thread does the op's work and then
 * calls ordo_done_complete, i.e. completion comes from a thread the engine
 * does not own (the way a callback from an I/O library or a CUDA host
 * callback would). */

typedef struct cjob {
    ordo_done *done;
    void (*work)(void *arg);
    void *arg;
    const char *error; /* passed to ordo_done_complete (NULL = ok) */
    double delay_us;   /* spin before completing */
    struct cjob *next;
} cjob_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cjob_t *head, *tail;
    int stop;
    int n;
    pthread_t th[8];
    atomic_long completed;
} completer_t;

static inline void *completer_main(void *p) {
    completer_t *c = (completer_t *)p;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->head && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
        cjob_t *j = c->head;
        if (!j) { /* stop requested and queue drained */
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        c->head = j->next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->mu);
        if (j->delay_us > 0) spin_us(j->delay_us);
        if (j->work) j->work(j->arg);
        ordo_done *d = j->done;
        const char *err = j->error;
        free(j);
        atomic_fetch_add(&c->completed, 1);
        ordo_done_complete(d, err);
    }
}

static inline void completer_start(completer_t *c, int nthreads) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    atomic_init(&c->completed, 0);
    if (nthreads > ARRAY_LEN(c->th)) nthreads = ARRAY_LEN(c->th);
    c->n = nthreads;
    for (int i = 0; i < nthreads; i++) pthread_create(&c->th[i], NULL, completer_main, c);
}

static inline void completer_submit(completer_t *c, ordo_done *done, void (*work)(void *), void *arg,
                             const char *error, double delay_us) {
    cjob_t *j = (cjob_t *)calloc(1, sizeof *j);
    if (!j) abort();
    j->done = done;
    j->work = work;
    j->arg = arg;
    j->error = error;
    j->delay_us = delay_us;
    pthread_mutex_lock(&c->mu);
    if (c->tail) c->tail->next = j;
    else c->head = j;
    c->tail = j;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Finishes every queued job, then joins the helper threads. */
static inline void completer_stop(completer_t *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->n; i++) pthread_join(c->th[i], NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

#endif
