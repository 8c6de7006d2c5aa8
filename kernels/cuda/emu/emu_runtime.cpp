/*
 * emu_runtime.cpp - runs ordo's CUDA kernels on the host: the launches,
 * the block scheduler, the stream-ordered memory calls, cuBLAS and the
 * kernels' error slots, over the simulated device (src/device_sim.c).
 * See README.md beside this file for what this checks and what it cannot.
 *
 * A launch is queued as one item on the simulated stream; when the stream
 * gets there, its host thread runs the grid block after block.  A block's
 * threads are coroutines (ucontext) on that thread: each runs until it
 * ends or reaches __syncthreads, and the barrier opens once every thread
 * still running is waiting at it.  A coroutine is entered the first time
 * with setcontext (which sets the signal mask: a system call) and switched
 * afterwards with _setjmp/_longjmp, which leave the mask alone and cost a
 * few dozen instructions; swapcontext would make two system calls per
 * switch.  Most kernels have no barrier at all, so the grid's first thread
 * runs alone first: if it ends without meeting a barrier, every other
 * thread is a plain call, and a barrier met later is reported as the
 * kernel's error (a barrier that not every thread of a block reaches is
 * undefined in CUDA).
 *
 * Order.  On a GPU the threads of a block between two barriers run in no
 * order the program may rely on; here they run one after another, so a
 * missing __syncthreads between a write to shared memory and another
 * thread's read of it gives the right answer in one order and the wrong
 * one in the other.  ORDO_EMU_THREAD_ORDER picks the order: forward
 * (threadIdx order, the default), reverse, or shuffle (a new permutation
 * per block and per barrier interval, from ORDO_EMU_SEED; the same seed
 * gives the same permutations).  The test suite runs the GPU specs in
 * forward and reverse order, and shuffled under the sanitizers.
 *
 * ThreadSanitizer (make check-cuda-emu-tsan).  Order can only show a race
 * whose outcome differs; a race detector sees the race itself.  In a TSan
 * build every GPU thread is a coroutine (no plain calls) and a TSan fiber,
 * switched to without synchronisation, so TSan takes the threads of a
 * block for concurrent ones; __syncthreads is a release by every arriving
 * thread and an acquire by every departing one (on one of two sync
 * objects by barrier parity: a thread that passes barrier k and reaches
 * k + 1 before another thread leaves k must not order the two).  A block
 * acquires what the stream thread did before it and releases what it did
 * to the stream thread after it, so blocks are ordered: their shared
 * memory is one thread-local variable here, one per block on a GPU.  What
 * TSan checks is therefore the threads of one block, against each other:
 * the races a missing or misplaced __syncthreads leaves.
 */
/* _longjmp between stacks is what the coroutines do; the fortified
 * longjmp would take it for a jump into a dead frame. */
#undef _FORTIFY_SOURCE
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cblas.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define EMU_TSAN 1
#else
#define EMU_TSAN 0
#endif

#include "cuda_runtime.h"
#include "cublas_v2.h"

#include "../cuda_internal.cuh"

extern "C" {
#include "device.h"
}

/* Functions that touch the scheduler's state, which the block's fibers
 * share without synchronisation (see the top of the file), are left out
 * of TSan's instrumentation; the kernels' own accesses are what it checks. */
#if EMU_TSAN
#define SCHEDULER __attribute__((no_sanitize_thread))
#else
#define SCHEDULER
#endif

namespace ordo_emu {
thread_local uint3 thread_idx_, block_idx_;
thread_local dim3 block_dim_, grid_dim_;
SCHEDULER uint3 thread_idx() { return thread_idx_; }
SCHEDULER uint3 block_idx() { return block_idx_; }
SCHEDULER dim3 block_dim() { return block_dim_; }
SCHEDULER dim3 grid_dim() { return grid_dim_; }
} // namespace ordo_emu

using ordo_emu::block_dim_;
using ordo_emu::block_idx_;
using ordo_emu::grid_dim_;
using ordo_emu::thread_idx_;

namespace {

/* ---- errors -------------------------------------------------------------------- */

thread_local cudaError_t t_last_error = cudaSuccess;

void set_error(cudaError_t e) {
    if (t_last_error == cudaSuccess) t_last_error = e;
}

/* Queues fn(arg) on the stream (the simulated device runs it on the
 * stream's thread in stream order). */
cudaError_t on_stream(cudaStream_t st, void (*fn)(void *), void *arg) {
    char err[256];
    if (!st) return cudaErrorInvalidValue; /* ordo queues everything on a worker's stream */
    if (ordo_device_backend()->host_fn(ordo_device_sim_stream_device((void *)st), (void *)st, fn, arg, err, sizeof err))
        return cudaErrorLaunchFailure;
    return cudaSuccess;
}

/* ---- the kernels' error slots (device_cuda.cu's, in host memory) ------------------- */

cu_error_slot slots[ORDO_MAX_DEVICES];

/* After a grid on gpu(dev), on the stream's thread: an error its kernels
 * reported becomes the stream's asynchronous failure (the next host wait
 * on the device gets it), as the CUDA backend turns the slot into the
 * failure of its next sync.  (-1: another grid is writing the slot; the
 * grid after it will find the code.) */
void take_slot_error(cudaStream_t st, int dev) {
    cu_error_slot *s = &slots[dev];
    if (__atomic_load_n(&s->code, __ATOMIC_ACQUIRE) <= 0) return;
    char msg[256];
    cu_error_format(s, msg, sizeof msg); /* the simulated device names itself */
    __atomic_store_n(&s->code, 0, __ATOMIC_RELEASE);
    ordo_device_sim_inject_error((void *)st, msg);
}

/* ---- the order of a block's threads --------------------------------------------------- */

enum order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE, ORDER_BAD };

struct order_setting {
    order_kind kind;
    uint64_t seed;
};

order_setting read_order_setting() {
    order_setting o = {ORDER_FORWARD, 1};
    const char *s = getenv("ORDO_EMU_THREAD_ORDER");
    if (s && *s) {
        if (!strcmp(s, "forward")) o.kind = ORDER_FORWARD;
        else if (!strcmp(s, "reverse")) o.kind = ORDER_REVERSE;
        else if (!strcmp(s, "shuffle")) o.kind = ORDER_SHUFFLE;
        else o.kind = ORDER_BAD;
    }
    const char *seed = getenv("ORDO_EMU_SEED");
    if (seed && *seed) {
        char *end;
        o.seed = strtoull(seed, &end, 10);
        if (*end) o.kind = ORDER_BAD;
    }
    return o;
}

/* Read once, at the first grid; a bad value fails every grid (the message
 * names the variables), so a typo cannot pass for a run in that order. */
const order_setting &order_of_threads() {
    static const order_setting o = read_order_setting();
    return o;
}

/* splitmix64: the permutations' random numbers. */
uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- ThreadSanitizer's view of the GPU threads (see the top of the file) ----------------- */

#if EMU_TSAN
void *tsan_fiber_new() { return __tsan_create_fiber(0); }
void tsan_fiber_delete(void *f) { if (f) __tsan_destroy_fiber(f); }
void tsan_switch(void *f) { __tsan_switch_to_fiber(f, __tsan_switch_to_fiber_no_sync); }
void *tsan_current() { return __tsan_get_current_fiber(); }
void tsan_acquire(void *a) { __tsan_acquire(a); }
void tsan_release(void *a) { __tsan_release(a); }
#else
void *tsan_fiber_new() { return nullptr; }
void tsan_fiber_delete(void *) {}
void tsan_switch(void *) {}
void *tsan_current() { return nullptr; }
void tsan_acquire(void *) {}
void tsan_release(void *) {}
#endif

/* Sync objects for one block (TSan keys them by address; a new block gets
 * fresh ones, so nothing orders it after the previous block's barriers). */
struct block_sync {
    char barrier[2]; /* by barrier parity */
};

/* ---- the block scheduler ------------------------------------------------------------ */

enum { T_RUNNABLE, T_AT_BARRIER, T_DONE };

const size_t STACK_BYTES = 256 * 1024; /* reserved, touched only as used */

struct coro {
    ucontext_t ctx; /* its first entry */
    jmp_buf env;    /* where it waits at a barrier */
    void *stack = nullptr;
    int state = T_DONE;
    bool started = false;
    uint3 idx;
    unsigned barriers = 0;         /* barriers passed in this block */
    const char *site_file = nullptr; /* the __syncthreads it waits at (the compiler may duplicate a */
    int site_line = 0;               /* call, so its place in the source, not its return address) */
    void *tsan_fiber = nullptr;    /* (TSan builds) this coroutine's fiber */
};

struct scheduler {
    jmp_buf main; /* the scheduler, while a coroutine runs */
    coro threads[1024];
    unsigned order[1024]; /* the order the block's threads run in, this interval */
    uint64_t random_state = 0;
    coro *cur = nullptr;
    ordo_emu::grid_job *job = nullptr;
    bool plain = false;      /* threads are plain calls: a barrier is an error */
    const char *error = nullptr;
    void *tsan_main = nullptr;     /* (TSan builds) the stream thread's own fiber */
    block_sync *sync = nullptr;    /* (TSan builds) the running block's */
    char block_start = 0, block_end = 0; /* (TSan builds) sync objects around a block */
    ~scheduler() {
        for (coro &c : threads) {
            if (c.stack) munmap(c.stack, STACK_BYTES);
            tsan_fiber_delete(c.tsan_fiber);
        }
    }
};

/* One per stream thread, made at its first grid and deleted by a pthread
 * key's destructor when the thread exits.  (A thread_local object with a
 * destructor would register it through __cxa_thread_atexit, under the
 * dynamic loader's lock: see kernels/cuda/matmul.cu's cuBLAS handles.) */
thread_local scheduler *t_sched;
pthread_key_t sched_key;
pthread_once_t sched_once = PTHREAD_ONCE_INIT;

void sched_delete(void *s) { delete (scheduler *)s; }
void sched_key_create(void) { pthread_key_create(&sched_key, sched_delete); }

SCHEDULER scheduler *this_thread_scheduler() {
    if (!t_sched) {
        t_sched = new scheduler();
        pthread_once(&sched_once, sched_key_create);
        pthread_setspecific(sched_key, t_sched);
    }
    return t_sched;
}

[[noreturn]] SCHEDULER void thread_entry() {
    scheduler *s = t_sched;
    tsan_acquire(&s->block_start);
    s->job->run_thread();
    coro *c = s->cur;
    c->state = T_DONE;
    if (EMU_TSAN) { /* an ended thread has arrived at every later barrier */
        tsan_release(&s->sync->barrier[c->barriers % 2]);
        tsan_release(&s->block_end);
    }
    tsan_switch(s->tsan_main);
    _longjmp(s->main, 1);
}

/* Runs c until it waits at a barrier or ends. */
SCHEDULER void resume(scheduler *s, coro &c) {
    s->cur = &c;
    thread_idx_ = c.idx;
    if (_setjmp(s->main)) return; /* back from the coroutine */
    if (EMU_TSAN && !c.tsan_fiber) c.tsan_fiber = tsan_fiber_new();
    tsan_switch(c.tsan_fiber);
    if (c.started) _longjmp(c.env, 1);
    c.started = true;
    setcontext(&c.ctx);
}

SCHEDULER bool start_thread(coro &c, uint3 idx) {
    if (!c.stack) {
        c.stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (c.stack == MAP_FAILED) {
            c.stack = nullptr;
            return false;
        }
    }
#if defined(__SANITIZE_ADDRESS__)
    /* (make check-cuda-emu) a thread left by _longjmp leaves its frames'
     * redzones poisoned on the stack the next thread reuses */
    ASAN_UNPOISON_MEMORY_REGION(c.stack, STACK_BYTES);
#endif
    getcontext(&c.ctx);
    c.ctx.uc_stack.ss_sp = c.stack;
    c.ctx.uc_stack.ss_size = STACK_BYTES;
    c.ctx.uc_link = nullptr; /* thread_entry never returns */
    makecontext(&c.ctx, thread_entry, 0);
    c.idx = idx;
    c.state = T_RUNNABLE;
    c.started = false;
    c.barriers = 0;
    return true;
}

SCHEDULER uint3 idx_of(unsigned i, dim3 b) { return uint3{i % b.x, i / b.x % b.y, i / (b.x * b.y)}; }

/* The grid's order of a block's n threads: forward, reverse, or forward
 * as the start of each block's shuffles. */
SCHEDULER void fill_order(scheduler *s, unsigned n) {
    const bool reverse = order_of_threads().kind == ORDER_REVERSE;
    for (unsigned i = 0; i < n; i++) s->order[i] = reverse ? n - 1 - i : i;
}

/* (shuffle) a new permutation of s->order for the next barrier interval. */
SCHEDULER void next_order(scheduler *s, unsigned n) {
    if (order_of_threads().kind != ORDER_SHUFFLE) return;
    for (unsigned i = n - 1; i > 0; i--) { /* Fisher-Yates */
        const unsigned j = (unsigned)(next_random(&s->random_state) % (i + 1));
        const unsigned t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
}

/* A block's permutations depend on the seed and the block alone, so that
 * a failure found with a seed comes back with it. */
SCHEDULER void start_block_order(scheduler *s, unsigned n) {
    if (order_of_threads().kind != ORDER_SHUFFLE) return;
    s->random_state = order_of_threads().seed ^
                      (((uint64_t)block_idx_.z * grid_dim_.y + block_idx_.y) * grid_dim_.x + block_idx_.x) * 0xD1B54A32D192ED03ull;
    fill_order(s, n);
    next_order(s, n);
}

/* Runs one block's threads as coroutines until all have ended, interval
 * after interval in s->order (set for the first one); probe, when not
 * UINT_MAX, is a thread started already (the grid's first, now waiting at
 * a barrier). */
SCHEDULER void run_block_coro(scheduler *s, unsigned nthreads, unsigned probe) {
    for (unsigned i = 0; i < nthreads; i++)
        if (i != probe && !start_thread(s->threads[i], idx_of(i, block_dim_))) {
            s->error = "cannot map a coroutine stack";
            return;
        }
    for (;;) {
        for (unsigned k = 0; k < nthreads; k++) {
            coro &c = s->threads[s->order[k]];
            if (c.state == T_RUNNABLE) resume(s, c);
        }
        /* every thread still running waits: the barrier opens (threads that
         * ended count as arrived, as on the GPUs ordo targets) - if they
         * all wait at one __syncthreads: CUDA allows one in conditional
         * code only where the condition is the same for the whole block */
        unsigned waiting = 0;
        const coro *first = nullptr;
        for (unsigned i = 0; i < nthreads; i++)
            if (s->threads[i].state == T_AT_BARRIER) {
                const coro &c = s->threads[i];
                if (first && (c.site_line != first->site_line || strcmp(c.site_file, first->site_file))) {
                    s->error = "the threads of a block wait at different __syncthreads (a barrier in code not "
                               "every thread runs: undefined in CUDA)";
                    return;
                }
                if (!first) first = &c;
                s->threads[i].state = T_RUNNABLE;
                waiting++;
            }
        if (!waiting) return;
        next_order(s, nthreads);
    }
}

/* The block's threads as plain calls, in s->order, from its k-th on. */
SCHEDULER void run_block_plain(scheduler *s, unsigned nthreads, unsigned k) {
    for (; k < nthreads && !s->error; k++) {
        thread_idx_ = idx_of(s->order[k], block_dim_);
        s->job->run_thread();
    }
}

/* (TSan builds) fresh sync objects for one block, freed after it. */
struct block_sync_guard {
    scheduler *s;
    explicit block_sync_guard(scheduler *s_) : s(s_) {
        if (EMU_TSAN) s->sync = new block_sync();
    }
    ~block_sync_guard() {
        delete s->sync;
        s->sync = nullptr;
    }
};

/* The order of a grid's blocks, which no kernel may rely on either: the
 * i-th block run is block perm(i) (x fastest) - forward, reverse, or for
 * shuffle an affine permutation a * i + c mod n (a coprime to n) drawn
 * from the seed and the grid's shape, so a seed gives the same order. */
struct block_order {
    uint64_t n, a = 1, c = 0;
    bool reverse = false;
    block_order(dim3 g) : n((uint64_t)g.x * g.y * g.z) {
        const order_setting &o = order_of_threads();
        reverse = o.kind == ORDER_REVERSE;
        if (o.kind != ORDER_SHUFFLE || n < 2) return;
        uint64_t st = o.seed ^ (n * 0x9E3779B97F4A7C15ull);
        c = next_random(&st) % n;
        for (;;) {
            a = next_random(&st) % n;
            uint64_t x = a, y = n; /* gcd */
            while (y) {
                const uint64_t t = x % y;
                x = y;
                y = t;
            }
            if (a && x == 1) break;
        }
    }
    uint64_t operator()(uint64_t i) const {
        if (reverse) return n - 1 - i;
        return (uint64_t)(((unsigned __int128)a * i + c) % n);
    }
};

/* On the stream's thread: the whole grid, then the error slots. */
SCHEDULER void run_grid(void *arg) {
    ordo_emu::grid_job *job = (ordo_emu::grid_job *)arg;
    scheduler *s = this_thread_scheduler(); /* kept for the thread's life: its stacks are reused */
    s->job = job;
    s->error = nullptr;
    s->plain = false;
    grid_dim_ = job->grid;
    block_dim_ = job->block;
    const unsigned nthreads = job->block.x * job->block.y * job->block.z;
    if (order_of_threads().kind == ORDER_BAD)
        s->error = "ORDO_EMU_THREAD_ORDER must be forward, reverse or shuffle, and ORDO_EMU_SEED a decimal number";
    if (EMU_TSAN) s->tsan_main = tsan_current();
    fill_order(s, nthreads);
    bool first = true;
    const block_order perm(job->grid);
    const uint64_t gx = job->grid.x, gxy = gx * job->grid.y;
    for (uint64_t i = 0; i < perm.n && !s->error; i++) {
        const uint64_t b = perm(i);
        block_idx_ = uint3{(unsigned)(b % gx), (unsigned)(b / gx % job->grid.y), (unsigned)(b / gxy)};
        start_block_order(s, nthreads);
        block_sync_guard block_sync_of_this_block(s);
        tsan_release(&s->block_start);
        if (EMU_TSAN && !first) { /* every thread a fiber: no plain calls */
            run_block_coro(s, nthreads, UINT_MAX);
        } else if (first) {
            first = false;
            /* the grid's first thread alone: does the kernel use barriers? */
            const unsigned probe = s->order[0];
            if (!start_thread(s->threads[probe], idx_of(probe, block_dim_))) {
                s->error = "cannot map a coroutine stack";
                break;
            }
            resume(s, s->threads[probe]);
            if (s->threads[probe].state == T_DONE && !EMU_TSAN) {
                s->plain = true;
                run_block_plain(s, nthreads, 1);
            } else { /* it waits at a barrier: the others join it as coroutines */
                run_block_coro(s, nthreads, probe);
            }
        } else if (s->plain) {
            run_block_plain(s, nthreads, 0);
        } else {
            run_block_coro(s, nthreads, UINT_MAX);
        }
        tsan_acquire(&s->block_end);
    }
    if (s->error) {
        char msg[256];
        snprintf(msg, sizeof msg, "emulated CUDA kernel: %s", s->error);
        ordo_device_sim_inject_error((void *)job->stream, msg);
    }
    take_slot_error(job->stream, job->dev);
    s->job = nullptr;
    delete job;
}

} // namespace

SCHEDULER void ordo_emu_syncthreads(const char *file, int line) {
    scheduler *s = t_sched;
    if (!s || !s->cur) return;
    if (s->plain) {
        s->error = "__syncthreads reached in a block although the grid's first thread ended without one "
                   "(a barrier not every thread reaches is undefined)";
        return;
    }
    coro *c = s->cur;
    c->state = T_AT_BARRIER;
    c->site_file = file;
    c->site_line = line;
    if (EMU_TSAN) tsan_release(&s->sync->barrier[c->barriers % 2]);
    if (!_setjmp(c->env)) {
        tsan_switch(s->tsan_main);
        _longjmp(s->main, 1);
    }
    /* the barrier opened: what every thread did before it is visible */
    if (EMU_TSAN) tsan_acquire(&s->sync->barrier[c->barriers % 2]);
    c->barriers++;
}

void ordo_emu::submit(grid_job *job, cudaStream_t st, size_t smem) {
    const dim3 g = job->grid, b = job->block;
    const unsigned long long nthreads = (unsigned long long)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || g.x > 2147483647u || g.y > 65535 || g.z > 65535 || !nthreads || nthreads > 1024 ||
        b.z > 64 || smem > 48 * 1024) {
        set_error(cudaErrorInvalidConfiguration);
        delete job;
        return;
    }
    job->stream = st;
    job->dev = st ? ordo_device_sim_stream_device((void *)st) : 0;
    /* CUDA: "a kernel launch will fail if it is issued to a stream that is
     * not associated to the current device" */
    if (st && job->dev != ordo_device_sim_current_device()) {
        set_error(cudaErrorInvalidResourceHandle);
        delete job;
        return;
    }
    const cudaError_t e = on_stream(st, run_grid, job);
    if (e != cudaSuccess) {
        set_error(e);
        delete job;
    }
}

/* ---- the error slots' host side --------------------------------------------------- */

extern "C" cu_error_slot *cu_error_slot_device(int dev) { return &slots[dev]; }

/* The checked ops' slots (error_slots.cu): host memory is the device's.
 * Kept in a list so that leak checkers see them reachable. */
struct slot_chunk {
    slot_chunk *next;
};
slot_chunk *slot_chunks;
pthread_mutex_t slot_chunks_mu = PTHREAD_MUTEX_INITIALIZER;

extern "C" int cu_slot_memory(int dev, size_t nbytes, void **host, void **devp) {
    (void)dev;
    slot_chunk *c = (slot_chunk *)calloc(1, sizeof(slot_chunk) + nbytes + 16);
    if (!c) return 1;
    pthread_mutex_lock(&slot_chunks_mu);
    c->next = slot_chunks;
    slot_chunks = c;
    pthread_mutex_unlock(&slot_chunks_mu);
    *host = *devp = (char *)c + 16; /* (aligned as malloc aligns) */
    return 0;
}

/* ---- runtime API ------------------------------------------------------------------ */

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulation: no stream given, or the stream is gone)";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle (emulation: a launch on a stream of another device than the current one)";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

/* The current device is the simulated device's, which the engine's
 * use_device and the backend's other calls select as the CUDA backend's do. */
cudaError_t cudaGetDevice(int *dev) {
    *dev = ordo_device_sim_current_device();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
    if (ordo_device_sim_set_current_device(dev)) return set_error(cudaErrorInvalidDevice), cudaErrorInvalidDevice;
    return cudaSuccess;
}

namespace {
struct memset_args {
    void *p;
    int v;
    size_t n;
};
void run_memset(void *arg) {
    memset_args *m = (memset_args *)arg;
    memset(m->p, m->v, m->n);
    delete m;
}
} // namespace

cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t st) {
    if (n == 0) return cudaSuccess;
    memset_args *m = new memset_args{p, value, n};
    const cudaError_t e = on_stream(st, run_memset, m);
    if (e != cudaSuccess) {
        delete m;
        set_error(e);
    }
    return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, cudaStream_t st) {
    char err[256];
    if (!st) return set_error(cudaErrorInvalidValue), cudaErrorInvalidValue;
    const int k = kind == cudaMemcpyHostToDevice ? DEV_COPY_H2D : kind == cudaMemcpyDeviceToHost ? DEV_COPY_D2H : DEV_COPY_D2D;
    if (ordo_device_backend()->memcpy_async(ordo_device_sim_stream_device((void *)st), dst, src, n, k, (void *)st, err,
                                            sizeof err))
        return set_error(cudaErrorLaunchFailure), cudaErrorLaunchFailure;
    return cudaSuccess;
}

/* Stream-ordered scratch from the simulated device's memory, as CUDA's
 * comes from the device's (so a full device refuses it, with
 * ORDO_SIMULATED_GPU_MEM_MB), freed when the stream gets to the free
 * (after every kernel queued before it). */
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t st) {
    char err[256];
    if (!st) return set_error(cudaErrorInvalidValue), cudaErrorInvalidValue;
    if (ordo_device_backend()->mem_alloc(ordo_device_sim_stream_device((void *)st), n, p, err, sizeof err)) {
        *p = nullptr;
        return set_error(cudaErrorMemoryAllocation), cudaErrorMemoryAllocation;
    }
    return cudaSuccess;
}

namespace {
struct free_args {
    int dev;
    void *p;
};
void run_free(void *arg) {
    free_args *f = (free_args *)arg;
    ordo_device_backend()->mem_free(f->dev, f->p);
    delete f;
}
} // namespace

cudaError_t cudaFreeAsync(void *p, cudaStream_t st) {
    if (!st) return set_error(cudaErrorInvalidValue), cudaErrorInvalidValue;
    free_args *f = new free_args{ordo_device_sim_stream_device((void *)st), p};
    const cudaError_t e = on_stream(st, run_free, f);
    if (e != cudaSuccess) {
        delete f;
        set_error(e);
    }
    return e;
}

/* ---- cuBLAS ------------------------------------------------------------------------ */

struct ordo_emu_cublas {
    cudaStream_t st;
    int dev;         /* a handle is bound to the device current at its creation */
    void *workspace; /* NULL, or what ORDO_EMU_CUBLAS_WORKSPACE_MB asked for */
};

/* A real handle takes device memory at its creation (its workspace: some
 * MiB), through CUDA and not through ordo's cache, and fails with
 * CUBLAS_STATUS_ALLOC_FAILED on a device that cache has filled.  With
 * ORDO_EMU_CUBLAS_WORKSPACE_MB set (a decimal number of MiB, read at each
 * cublasCreate) the emulated one does too; unset or 0, it takes none, so
 * that the specs' memory figures are the cache's alone. */
static size_t emu_workspace_bytes() {
    const char *s = getenv("ORDO_EMU_CUBLAS_WORKSPACE_MB");
    if (!s || !*s) return 0;
    char *end;
    const unsigned long mb = strtoul(s, &end, 10);
    return *end || mb > 4096 ? 0 : (size_t)mb << 20;
}

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    const int dev = ordo_device_sim_current_device();
    void *ws = nullptr;
    const size_t n = emu_workspace_bytes();
    char err[256];
    if (n && ordo_device_backend()->mem_alloc(dev, n, &ws, err, sizeof err)) return CUBLAS_STATUS_ALLOC_FAILED;
    *h = new ordo_emu_cublas{nullptr, dev, ws};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (h && h->workspace) ordo_device_backend()->mem_free(h->dev, h->workspace);
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->st = st;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

namespace {

/* One gemm call (batches of them), its scalars copied at the call as
 * cuBLAS reads host-pointer scalars before returning. */
template <typename T>
struct gemm_call {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batches;
    long long sa, sb, sc;
    T alpha, beta;
    const T *A, *B;
    T *C;
};

CBLAS_TRANSPOSE trans_of(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

void host_gemm(const gemm_call<float> &g, int b) {
    cblas_sgemm(CblasColMajor, trans_of(g.ta), trans_of(g.tb), g.m, g.n, g.k, g.alpha, g.A + b * g.sa, g.lda,
                g.B + b * g.sb, g.ldb, g.beta, g.C + b * g.sc, g.ldc);
}
void host_gemm(const gemm_call<double> &g, int b) {
    cblas_dgemm(CblasColMajor, trans_of(g.ta), trans_of(g.tb), g.m, g.n, g.k, g.alpha, g.A + b * g.sa, g.lda,
                g.B + b * g.sb, g.ldb, g.beta, g.C + b * g.sc, g.ldc);
}

template <typename T>
void run_gemm(void *arg) {
    gemm_call<T> *g = (gemm_call<T> *)arg;
    if (g->m && g->n)
        for (int b = 0; b < g->batches; b++) host_gemm(*g, b);
    delete g;
}

int imax(int a, int b) { return a > b ? a : b; }

/* cuBLAS's argument checks (column-major: A is m x k after op, lda >= its
 * stored rows; likewise B and C), then the call queued on the handle's stream. */
template <typename T>
cublasStatus_t gemm_queue(cublasHandle_t h, const gemm_call<T> &g) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    const int arows = g.ta == CUBLAS_OP_N ? g.m : g.k, brows = g.tb == CUBLAS_OP_N ? g.k : g.n;
    if (g.m < 0 || g.n < 0 || g.k < 0 || g.batches < 0 || g.lda < imax(1, arows) || g.ldb < imax(1, brows) ||
        g.ldc < imax(1, g.m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!h->st) return CUBLAS_STATUS_EXECUTION_FAILED; /* ordo always sets the worker's stream */
    /* its kernels would go to a stream of another device than its own */
    if (ordo_device_sim_stream_device((void *)h->st) != h->dev) return CUBLAS_STATUS_EXECUTION_FAILED;
    gemm_call<T> *q = new gemm_call<T>(g);
    if (on_stream(h->st, run_gemm<T>, q) != cudaSuccess) {
        delete q;
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    return gemm_queue(h, gemm_call<float>{ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, *alpha, *beta, A, B, C});
}

cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc) {
    return gemm_queue(h, gemm_call<double>{ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, *alpha, *beta, A, B, C});
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sa,
                                         const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                         long long sc, int batches) {
    return gemm_queue(h, gemm_call<float>{ta, tb, m, n, k, lda, ldb, ldc, batches, sa, sb, sc, *alpha, *beta, A, B, C});
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *A, int lda, long long sa,
                                         const double *B, int ldb, long long sb, const double *beta, double *C,
                                         int ldc, long long sc, int batches) {
    return gemm_queue(h,
                      gemm_call<double>{ta, tb, m, n, k, lda, ldb, ldc, batches, sa, sb, sc, *alpha, *beta, A, B, C});
}
