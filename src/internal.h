/*
 * internal.h - the engine's private structures, shared by the files of src/.
 *
 * How an op travels through the engine:
 *
 *   push ──> one dep_node per distinct var, appended to each var's queue
 *            (all vars locked at once, so a push is atomic over its vars:
 *            rule 8; lock_vars in push.c says in which order)
 *        ──> when every node is granted, the op is "ready" and goes to the
 *            ready queue of the pool its context and property select
 *        ──> a worker runs it (or the worker that released it runs it at
 *            once, skipping the queue), then completes each var, which
 *            grants the next nodes and may make further ops ready.
 *
 * A var grants either one writer or any number of readers (var.c).
 */
#ifndef ORDO_INTERNAL_H
#define ORDO_INTERNAL_H

/* For the thread-local variables shared between the library's files: not
 * exported, so that in libordo.so a function reaches all of them through
 * one lookup of the library's thread-local block (the local-dynamic model)
 * instead of a __tls_get_addr call per variable -- a small op's push reads
 * five of them. */
#if defined(__GNUC__)
#define ORDO_HIDDEN __attribute__((visibility("hidden"), tls_model("local-dynamic")))
#else
#define ORDO_HIDDEN
#endif
/* Keeps a pointer to thread-local data in a register: gcc treats the
 * address as a constant and computes it again in every branch, each time a
 * __tls_get_addr call in the shared library.  The empty asm hides where the
 * pointer came from. */
#if defined(__GNUC__)
#define TLS_PIN(p) __asm__("" : "+r"(p))
#else
#define TLS_PIN(p) ((void)0)
#endif
/* For the helpers of the hot paths (a small op's push above all) that gcc
 * would otherwise call once their caller grew past its inlining budget,
 * and for loops whose bound is small and known. */
#if defined(__GNUC__)
#define ORDO_ALWAYS_INLINE __attribute__((always_inline)) inline
#define ORDO_PRAGMA(x) _Pragma(#x)
#define ORDO_UNROLL(n) ORDO_PRAGMA(GCC unroll n)
#else
#define ORDO_ALWAYS_INLINE inline
#define ORDO_UNROLL(n)
#endif

#include "device.h"
#include "ordo.h"
#include "ordo_kernel.h" /* ordo_chunk_fn */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>

#define ORDO_NAME_MAX 32
#define OP_INLINE_VARS 3
#define ORDO_MAX_WORKERS 1024

typedef struct op op;
typedef struct pool pool;
typedef struct worker worker;

/* ---- errors (error.c) ---------------------------------------------- */

/* One failure.  Shared (refcounted) by every var it has spread to, so that
 * reporting it once marks it reported everywhere (rule 5). */
typedef struct failure {
    atomic_int refs;
    /* 0 until a wait reports it, then the engine's report epoch of that
     * report (ordo_engine.report_epoch): an op pushed before the report
     * still meets the failure, one pushed after it does not (failure_meets). */
    atomic_uint_least64_t reported;
    struct failure *next; /* engine's list of failures, oldest first */
    char msg[];
} failure;

failure *failure_new(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
failure *failure_vnew(const char *fmt, va_list ap);
void failure_ref(failure *f);
void failure_unref(failure *f);
/* f named after the op it starts at ("name: msg"), unless its message
 * names it already; takes over the caller's reference to f. */
failure *failure_named(failure *f, const char *name);
/* Marks f reported, at a new report epoch of e; true when this call is the
 * one that reported it. */
bool failure_claim(ordo_engine *e, failure *f);
static inline bool failure_reported(const failure *f) {
    return atomic_load_explicit(&f->reported, memory_order_acquire) != 0;
}
/* Whether f, carried by a var, fails an op pushed at report epoch `pushed`
 * (op.epoch): unless f was reported before that push.  A report makes the
 * vars usable again for what is pushed after it; an op pushed before it is
 * skipped whenever it runs, as it would have been at its push (rule 5). */
static inline bool failure_meets(const failure *f, uint64_t pushed) {
    uint64_t at = atomic_load_explicit(&f->reported, memory_order_acquire);
    return at == 0 || at > pushed;
}
int  set_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The op_ of an ordo_run_ctx for a function run outside any op (run_now.c):
 * ordo_fail leaves its failure in *slot (a reference), which the caller
 * sets to NULL first.  Tagged in the low bit, which an op's address (a
 * line-aligned block) never has. */
static inline void *fail_slot_ctx(failure **slot) { return (void *)((uintptr_t)slot | 1); }

/* ---- spin lock ------------------------------------------------------ */

/* Tells the core we are spinning (frees resources for its sibling thread). */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Var locks guard a few pointer moves, so a spin lock beats a mutex; it
 * yields after a while because a preempted holder on 2 cores is common. */
typedef struct { atomic_int v; } spin_lock;
void spin_lock_contended(spin_lock *l);
static inline void spin_lock_acquire(spin_lock *l) {
    if (!atomic_exchange_explicit(&l->v, 1, memory_order_acquire)) return;
    spin_lock_contended(l);
}
/* Takes the lock only if it is free now; never waits. */
static ORDO_ALWAYS_INLINE bool spin_lock_try(spin_lock *l) {
    return !atomic_load_explicit(&l->v, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->v, 1, memory_order_acquire);
}
static inline void spin_lock_release(spin_lock *l) {
    atomic_store_explicit(&l->v, 0, memory_order_release);
}

/* ---- vars (var.c) ---------------------------------------------------- */

/* A node is one op's claim on one var.  The op pointer's low bit says
 * whether the claim is a write (ops are 64-byte aligned). */
typedef struct dep_node {
    struct dep_node *next; /* next waiting node in the var's queue */
    uintptr_t op_w;
} dep_node;

static inline struct op *node_op(const dep_node *n) { return (struct op *)(n->op_w & ~(uintptr_t)1); }
static inline bool node_is_write(const dep_node *n) { return n->op_w & 1; }

#define VAR_LIVE 0x6f72646fu /* "ordo" */
#define VAR_DEAD 0xdeadbeefu

struct ordo_var {
    spin_lock lock;
    bool deleted;          /* a delete op was pushed; later pushes fail */
    bool writer_active;    /* a granted write has not completed */
    int nreaders;          /* granted reads not completed */
    dep_node *head, *tail; /* nodes waiting for a grant, in push order */
    atomic_uint_least64_t version;
    failure *fail;         /* error carried by the data; guarded by the grant */
    /* Some op wrote it without failing: its data exists.  A var that
     * carries a failure and was never made is void -- the op that was to
     * make it failed -- and stays failed for what reads it (var_void).
     * Guarded by the grant, as fail. */
    bool made;
    _Atomic(struct var_events *) device_state; /* GPU events on it (var_events.c) */
    /* A line of its own, written only when the var is made or freed: every
     * push reads magic (is the var live?), and on the line above, which the
     * workers write as ops complete, that read missed in the pusher's cache
     * for most vars of a random DAG. */
    _Alignas(64) atomic_uint magic;
    /* How many times the block was handed out (var_alloc): a handle kept
     * past the var's delete (an operator's) tells its var from a new one
     * that reuses the block. */
    atomic_uint gen;
    /* The engine whose slabs hold the var, set when its slab is made and
     * never changed: a var handed to another engine's push or wait would
     * join that engine's pending counts and free lists (a hang, then a
     * use after free), so every entry point compares it with its engine.
     * On magic's line, which the push reads anyway: one compare, no miss. */
    ordo_engine *engine;
    ordo_var *next_free;
};

/* A list of ops made ready while completing; dispatched after unlocking. */
typedef struct ready_list { op *head, *tail; } ready_list;

/* Append a node under the var's lock; returns true when granted at once. */
bool var_append(ordo_var *v, dep_node *n);
/* Complete a granted node under the var's lock; ready ops go to rl. */
/* v carries a failure and holds no data: every op meant to make it failed
 * or was skipped.  Unlike a var whose data an in-place op failed to change
 * (kernels fail before writing), reading it gives nothing, so ops that
 * only read it are skipped even after the failure was reported, and a
 * data wait (a tensor's read) reports it again (rule 5's void vars). */
static inline bool var_void(const ordo_var *v) { return v->fail && !v->made; }

void var_complete(ordo_var *v, bool is_write, ready_list *rl);

ordo_var *var_alloc(ordo_engine *e);
/* The host wrote v's data itself (ordo_tensor_host_written): v is made. */
void var_host_written(ordo_var *v);
void var_free(ordo_engine *e, ordo_var *v);

/* ---- ops -------------------------------------------------------------- */

enum {
    OP_SYNC = 1 << 0,     /* fn is an ordo_sync_fn */
    OP_WAIT = 1 << 1,     /* internal: a waiter's signal (wait.c) */
    OP_DELETE = 1 << 2,   /* frees its single var when done */
    OP_RUN_HERE = 1 << 3, /* runs in whichever thread makes it ready */
    OP_NO_VERSION = 1 << 4,/* its writes do not count as writes (wait_to_write) */
    OP_BULK = 1 << 5,     /* runs a bulk of ops (bulk.c); param is the bulk */
    OP_PACED = 1 << 6,    /* a bulkable op pushed alone: its run time feeds the bulk pace */
    OP_WAIT_DATA = 1 << 7 /* a wait that also fails on a void var already reported (wait.c) */
};

struct ordo_opr {
    ordo_engine *engine;
    const char *name;
    ordo_async_fn fn;
    void *param;
    void (*param_free)(void *);
    int prop;
    int nvars;
    ordo_var **vars;
    unsigned *gens; /* each var's gen when the operator was made */
    bool *is_write;
    atomic_int refs; /* 1 for the handle + 1 per pushed run in flight */
    /* OPR_LIVE from ordo_new_operator until it is freed, then OPR_DEAD: a
     * freed operator's block stays the engine's (engine.opr_dead) until a
     * new operator takes it or the engine is destroyed, so a stale handle
     * -- a second ordo_delete_operator, an ordo_push after the delete --
     * reads this instead of freed memory. */
    atomic_uint magic;
    atomic_bool deleted; /* ordo_delete_operator has been called */
    struct ordo_opr *prev, *next; /* the engine's live operators (engine.oprs, under mem_mu) */
};
#define OPR_LIVE 0x6f707231u
#define OPR_DEAD 0x6f707264u
/* Drops a reference to r; the last one frees it (param_free too). */
void opr_unref(ordo_opr *r);
/* At destroy, once nothing is pending: frees the operators never deleted. */
void engine_free_operators(ordo_engine *e);

/* Every op crosses from the pushing thread to a worker and its block comes
 * back for reuse, so each cache line it spans travels twice per op.  The
 * fields of an op with no more than two vars fit the first two lines. */
struct op {
    /* line 0: scheduling and the function */
    _Alignas(64) op *next; /* ready list / queue / free list link */
    atomic_int wait; /* nodes not yet granted (set by push_prepared) */
    short flags;
    short prop;
    int priority;
    int nvars;
    ordo_ctx ctx;
    union {
        pool *pool;      /* while live: the pool that runs it */
        op *next_batch;  /* while free: the next batch of free ops (engine.c) */
    };
    union { ordo_sync_fn sync; ordo_async_fn async; } fn; /* OP_SYNC says which */
    void *param;
    failure *fail; /* set by ordo_fail / ordo_done_complete */
    /* line 1: completion and the first vars */
    void (*param_free)(void *);
    ordo_opr *opr;
    ordo_var **vars;   /* vars_inline, malloc'ed when more than OP_INLINE_VARS, or a bulk's */
    dep_node *nodes;   /* nodes_inline, likewise */
    ordo_var *vars_inline[OP_INLINE_VARS];
    dep_node nodes_inline[OP_INLINE_VARS];
    /* rarely touched */
    ordo_engine *engine;
    const char *name; /* interned: lives as long as the engine */
    uint64_t seq;     /* push order, ties in the priority heap */
    uint64_t epoch;   /* the engine's report epoch at its push (failure_meets) */
    uint64_t t_ready, t_start; /* profiler, ns */
    void *stream;     /* GPU ops: the stream their function queued work on */
    struct prof_timer *prof_gpu; /* profiler: timing events around its GPU work, or NULL */
    struct op_settle *settle;    /* naive engine: the pusher waiting for this op, or NULL */
    ordo_gpu_check_fn gpu_check; /* ordo_gpu_check_after: a host check once its GPU work has run, or NULL */
    void *gpu_check_arg;
    struct dev_event *gpu_check_ev; /* while with the checker: the end of its GPU work */
    /* An async op: 1 from its function's call until ordo_done_complete,
     * which takes it; a second call finds 0 and is refused (op blocks stay
     * the engine's, so reading it is safe after the op has finished). */
    atomic_int awaiting_done;
};

/* A naive engine's pusher waiting for its own op to finish (push.c): a
 * naive push returns once its op has run, async ones too, whose
 * ordo_done_complete may come later from any thread.  Lives on the
 * pusher's stack; finish_op signals it once the op has retired, and the
 * pusher takes mu before it returns, so the signaller is done with it. */
typedef struct op_settle {
    atomic_int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} op_settle;
void op_settle_signal(op_settle *s);

/* Whether o's var and node arrays are its own to free (a bulk lends its). */
static inline bool op_owns_arrays(const op *o) {
    return o->vars != o->vars_inline && !(o->flags & OP_BULK);
}

/* The message of the last ordo_fail called on this thread with no op
 * (rc->op_ NULL), once; NULL when none (error.c). */
const char *fail_detached_take(void);

/* ---- GPU ordering through events on vars (var_events.c) -------------- */

struct dev_event;
struct var_events;
extern atomic_int var_events_in_use;
/* Before o runs: its stream waits for the GPU work o depends on, or, when
 * stream is NULL (a host-side op), the calling thread does.  0, or 1 with
 * err filled (an asynchronous GPU failure, out of memory). */
int  var_events_before(op *o, void *stream, char *err, size_t errlen);
/* After a GPU op queued its work on stream: records one event there and
 * leaves it on o's vars; *recorded (if not NULL) gets a reference. */
int  var_events_after(op *o, int dev_id, void *stream, struct dev_event **recorded, char *err, size_t errlen);
/* The events a host wait on v must block on (references; free the array). */
int  var_events_collect_for_wait(ordo_var *v, bool is_write, struct dev_event ***out, int *n);
/* A new var's bytes are reusable only after ready (the caching allocator's
 * "last user done" event); takes no reference from the caller. */
void var_events_seed(ordo_var *v, struct dev_event *ready);
void var_events_free(ordo_var *v);

/* ---- checked GPU ops (gpu_check.c) ------------------------------------ */

/* After the function of an op that called ordo_gpu_check_after, and after
 * gpu_op_done: either runs the check here (the naive engine, which waited
 * for the op's GPU work already, or when the op's end cannot be marked by
 * an event) and returns false, or hands the op to the engine's checker
 * thread, which finishes it (sched_finish_checked) once its work has run,
 * and returns true: the caller must not touch o again. */
bool gpu_check_defer(ordo_engine *e, op *o);
/* At destroy, once no op is pending: stops and joins the checker thread. */
void gpu_checker_free(ordo_engine *e);
/* Finishes a checked op on the checker thread, as ordo_done_complete
 * finishes an async op from a foreign thread (sched.c). */
void sched_finish_checked(ordo_engine *e, op *o);

/* ---- ready queues, pools and workers (sched.c) ----------------------- */

/* A large op's chunks offered to the queue's idle workers (help.c). */
typedef struct help_slot {
    atomic_bool owned;          /* an op's worker is using the slot */
    atomic_uint_least64_t gen;  /* odd while chunks are offered */
    atomic_int active;          /* helpers inside the current job */
    atomic_llong next;          /* the next chunk to take */
    atomic_int rc;              /* the first failure of a helper's chunk */
    int64_t n, grain;           /* written by the owner before gen turns odd */
    ordo_chunk_fn fn;
    void *ctx;
} help_slot;

typedef struct ready_queue {
    spin_lock lock;            /* guards the FIFO and the heap: a few pointer moves */
    op *fifo_head, *fifo_tail; /* priority 0, in push order */
    op **heap;                 /* other priorities: max-heap on (priority, -seq) */
    int heap_n, heap_cap;
    atomic_int size;
    atomic_int heap_size;
    atomic_int spinners;
    atomic_int sleepers;       /* workers asleep (or about to be) on cv */
    atomic_bool stop;
    pthread_mutex_t sleep_mu;  /* only for sleeping and waking */
    pthread_cond_t cv;
    help_slot help;            /* chunks of a large op offered to idle workers (help.c) */
} ready_queue;

/* Whether q's help slot offers chunks (a hint; inline: an idle worker's
 * spin loop asks it), and taking them (help.c). */
static inline bool help_open(ready_queue *q) {
    return atomic_load_explicit(&q->help.gen, memory_order_relaxed) & 1;
}
void help_run(ready_queue *q);

enum pool_kind { POOL_CPU, POOL_CPU_PRIORITY, POOL_GPU, POOL_GPU_COPY, POOL_GPU_PRIORITY, POOL_SHARED, POOL_SHARED_COPY };

struct pool {
    ordo_engine *engine;
    enum pool_kind kind;
    ordo_ctx ctx;   /* the device the pool serves (dev_type 0 for shared pools) */
    ready_queue q;
    int size;     /* workers it is meant to have */
    int nworkers; /* workers started */
    worker *workers;
};

typedef struct op_cache { op *head; int n; } op_cache;

typedef struct prof_buf prof_buf;

struct worker {
    /* Ops this worker retired.  Each worker counts on its own cache line, so
     * the count of pending ops costs no shared write per op. */
    _Alignas(64) atomic_long retired;
    _Alignas(64) ordo_engine *engine;
    pool *pool;
    pthread_t thread;
    int id;
    op_cache cache;
    prof_buf *prof;
    void *streams[ORDO_MAX_DEVICES]; /* GPU streams, created lazily per device */
};

int  pool_start(ordo_engine *e, pool *p, enum pool_kind kind, ordo_ctx ctx, int nworkers);
void pool_signal_stop(pool *p);
void pool_join(pool *p);
void pool_free(pool *p); /* after every pool was joined */
void queue_push(ready_queue *q, op *o);
op  *queue_take_fifo(ready_queue *q);

/* Runs a ready op and everything it makes ready that may run here. */
void run_ready(ordo_engine *e, op *o);
/* Hands ready ops to their pools (or runs the ones that run here). */
void dispatch_list(ordo_engine *e, ready_list *rl);

/* ---- engine (engine.c) ----------------------------------------------- */

typedef struct slab { struct slab *next; } slab;

/* The profiler's GPU-side timing on one device (profiler.c), under lock:
 * the reference event that ties device time to host time, and timing
 * event pairs kept for reuse. */
typedef struct prof_gpu_dev {
    spin_lock lock;
    struct prof_ref *ref;     /* this session's reference; NULL until a GPU op makes it */
    struct prof_timer *free;  /* pairs for reuse */
    int nfree;
    long live;                /* pairs held by ops and unread records */
    long dropped;             /* GPU sides dropped (too many unread, or a timing call failed) */
} prof_gpu_dev;

struct ordo_engine {
    ordo_engine_config cfg;
    uint64_t uid; /* tells thread-local caches which engine they belong to */
    /* Counts failure reports (failure_claim); read by every push (op.epoch),
     * written only when a wait reports a failure: on the line of cfg,
     * which pushes read anyway. */
    atomic_uint_least64_t report_epoch;

    /* pending = pushed - retired_other - every worker's retired (engine.c) */
    _Alignas(64) atomic_long pushed;
    atomic_long retired_seen;   /* pushed - pending when last computed: backpressure */
    _Alignas(64) atomic_long retired_other; /* ops retired on non-worker threads */
    _Alignas(64) atomic_long external;      /* foreign threads inside ordo_done_complete */
    atomic_uint_least64_t seq;
    _Atomic(worker *) all_workers[ORDO_MAX_WORKERS];
    atomic_int nall_workers;
    long low_mark;           /* backpressure releases pushers at this level */
    pthread_mutex_t idle_mu; /* wait_for_all and backpressure sleep here */
    pthread_cond_t idle_cv;
    /* Set by a thread about to sleep until pending reaches 0 (wake_zero) or
     * the low mark (wake_low); the retiring thread that sees the level
     * reached clears it and wakes the sleepers, once per sleep. */
    _Alignas(64) atomic_int wake_zero;
    atomic_int wake_low;
    /* What a bulked op takes to run, a running mean in 1/16 ns (bulk.c):
     * read by bulking threads once a bulk, written now and then (sampled
     * runs) by the threads that run bulks. */
    _Alignas(64) atomic_uint bulk_pace;

    pthread_mutex_t fail_mu; /* failures not yet reported, oldest first */
    failure *fail_head, *fail_tail;
    long fail_n, fail_prune_at; /* the list's length; when to drop the reported ones next */
    /* Unreported failures dropped from the list: ones no var or op held any
     * more (only wait_for_all could report them), past the oldest such one,
     * which stays.  wait_for_all counts them among the others it reports. */
    long fail_dropped;

    _Atomic(struct gpu_checker *) checker; /* checked GPU ops waiting for their work (gpu_check.c) */
    atomic_uint_least64_t gpu_used; /* bit d: a stream of gpu(d) was created for this engine */
    void *naive_streams[ORDO_MAX_DEVICES]; /* naive engine: one stream per device, under pool_mu */
    pthread_mutex_t pool_mu; /* lazy creation of per-device pools */
    _Atomic(pool *) cpu_pools[ORDO_MAX_DEVICES];
    _Atomic(pool *) gpu_pools[ORDO_MAX_DEVICES];
    _Atomic(pool *) gpu_copy_pools[ORDO_MAX_DEVICES];
    _Atomic(pool *) gpu_prio_pools[ORDO_MAX_DEVICES];
    pool *cpu_prio_pool;
    pool *shared_pool, *shared_copy_pool;
    atomic_int next_worker_id;

    /* op and var blocks, and the list of operators: a few pointer moves
     * each time (a slab's allocation, rarely), so a spin lock; a pthread
     * mutex cost ~50 instructions a lock and unlock, twice per new tensor
     * from Lua (its storage's var made and freed) */
    spin_lock mem_mu;
    ordo_opr *oprs;         /* live operators: destroy frees those never deleted (rule 11) */
    atomic_int open_bulks;  /* threads' bulks collecting ops for it (bulk.c): ordo_engine_destroy refuses while any is */
    atomic_long storages;   /* live ordo_storages on it (storage.c): ordo_engine_destroy refuses while any is */
    ordo_opr *opr_dead;     /* freed operators' blocks, for reuse (struct ordo_opr's magic); next links them */
    slab *op_slabs, *var_slabs;
    op *op_batches; /* free ops, in chains of OP_BATCH linked by next_batch */
    ordo_var *var_free, *var_free_tail;

    pthread_mutex_t names_mu; /* interned op names (names.c) */
    char **names;
    size_t names_cap, names_n;

    /* profiler (profiler.c) */
    atomic_int profiling;
    pthread_mutex_t prof_mu;
    prof_buf *prof_bufs;  /* every buffer, workers' and the shared one */
    prof_buf *prof_shared;/* events from non-worker threads */
    uint64_t prof_t0;
    size_t prof_max_events; /* records per buffer: ORDO_PROFILER_MAX_EVENTS, else PROF_MAX_EVENTS */
    prof_gpu_dev prof_gpu[ORDO_MAX_DEVICES];
};

/* A stable copy of an op name, shared by every op of that name (names.c).
 * Inline, the thread-local cache's hit: the same name pushed again and
 * again, the usual case, is a pointer compare and a short string compare
 * with no call (a call with its frame had cost as much as the compare). */
#define NAME_CACHE_SLOTS 8
typedef struct name_cache {
    uint64_t uid; /* the engine whose names these are */
    const char *src[NAME_CACHE_SLOTS];      /* the caller's pointer... */
    const char *interned[NAME_CACHE_SLOTS]; /* ...and its interned copy */
} name_cache;
extern ORDO_HIDDEN _Thread_local name_cache tls_names;
const char *engine_intern_miss(ordo_engine *e, const char *name, unsigned slot);
static inline const char *engine_intern(ordo_engine *e, const char *name) {
    /* Fibonacci hashing (top 3 bits: 8 slots), so names laid out at any
     * regular stride spread over the slots. */
    unsigned slot = (unsigned)(((uint64_t)(uintptr_t)name * 0x9e3779b97f4a7c15u) >> 61);
    const char *hit = tls_names.interned[slot];
    /* The pointer alone proves nothing (a caller may reuse its buffer for
     * another name), so the text is compared too: strncmp(hit, name,
     * ORDO_NAME_MAX - 1) == 0, inlined.  name is NULL or "" only on a miss
     * (the miss path never caches those). */
    if (hit && tls_names.src[slot] == name && tls_names.uid == e->uid) {
        int i = 0;
        while (hit[i] == name[i]) { /* hit ends within ORDO_NAME_MAX bytes */
            if (!hit[i]) return hit;
            i++;
        }
        if (i == ORDO_NAME_MAX - 1) return hit; /* a long name, kept cut short */
    }
    return engine_intern_miss(e, name, slot);
}
void engine_names_free(ordo_engine *e);

op  *op_alloc(ordo_engine *e);
void op_free(ordo_engine *e, op *o);
void *engine_slab_alloc(slab **list, size_t size); /* caller holds mem_mu */
#define VARS_PER_SLAB 256

/* Waits until at most target ops are pending (no failure reporting). */
void engine_wait_pending(ordo_engine *e, long target);
int  start_cpu_pool(ordo_engine *e, int dev_id);
/* A fresh op with no vars, function or param yet (push.c). */
op  *op_new(ordo_engine *e, int flags, int prop, int priority, ordo_ctx ctx, const char *name);
/* Appends a prepared op to its vars and runs or queues it (push.c). */
int  push_prepared(ordo_engine *e, op *o, const char *fn);

/* Deletes v at once, on this thread, when no op is queued on it, none of
 * this thread's bulk uses it, it has no GPU work and no profile is being
 * taken; true when done (the caller then frees what v guarded itself),
 * false when the caller must push the delete (ordo_delete_variable).  For
 * the tensor layer's storages: most are dropped by the GC long after their
 * last op ran, and a delete op costs a push and a hand-off. */
bool engine_delete_idle(ordo_engine *e, ordo_var *v);

/* One var of a push and whether the push writes it (push.c). */
typedef struct { ordo_var *v; bool w; } var_use;
/* Sorted by address (the order lock_vars falls back to) and deduplicated: a var given
 * twice -- even as two reads -- or as read and write counts once, as a
 * write (rule 3).  out has room for nreads + nwrites.  Inline: every push
 * calls it, most with a handful of vars. */
int collect_vars_many(ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites, var_use *out);
static inline int collect_vars(ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites,
                               var_use *out) {
    int n = nreads + nwrites, m = 0;
    if (n > 16) return collect_vars_many(reads, nreads, writes, nwrites, out);
    /* A push's few vars are sorted as words, address | write bit (vars are
     * 8-byte aligned), and var_use pairs are only written: moving a pair
     * just after its two fields were stored stalls on store forwarding,
     * and that stall was a tenth of a small tensor op's push. */
    uintptr_t key[16];
    for (int i = 0; i < nreads; i++) key[i] = (uintptr_t)reads[i];
    for (int i = 0; i < nwrites; i++) key[nreads + i] = (uintptr_t)writes[i] | 1u;
    for (int i = 1; i < n; i++) {
        uintptr_t x = key[i];
        int j = i - 1;
        while (j >= 0 && key[j] > x) {
            key[j + 1] = key[j];
            j--;
        }
        key[j + 1] = x;
    }
    for (int i = 0; i < n; i++) {
        ordo_var *v = (ordo_var *)(key[i] & ~(uintptr_t)1);
        if (m > 0 && out[m - 1].v == v) out[m - 1].w = true; /* the write sorts after the read */
        else out[m++] = (var_use){v, (key[i] & 1) != 0};
    }
    return m;
}
/* Pushes a sync (sfn) or async (afn) op on uses (distinct; sorted unless
 * a bulk's): the end of every push.  lent_vars and lent_nodes: arrays of n
 * the op uses as its own (a bulk's, which outlive the op), or NULL. */
int  push_uses(ordo_engine *e, int flags, ordo_sync_fn sfn, ordo_async_fn afn, void *param,
               void (*param_free)(void *), ordo_ctx ctx, const var_use *uses, int n, int prop, int priority,
               const char *name, const char *fname, ordo_var **lent_vars, dep_node *lent_nodes);

/* ---- bulks (bulk.c) -------------------------------------------------- */

struct bulk;
extern ORDO_HIDDEN _Thread_local struct bulk *tls_bulk; /* this thread's bulk being collected, or NULL */
extern ORDO_HIDDEN _Thread_local int tls_bulk_size;
/* Adds a sync op to this thread's bulk; false when it cannot go there (the
 * thread does not bulk, is a worker or runs an op, too many vars, no
 * memory), and the caller pushes it alone. */
bool bulk_append(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                 const var_use *uses, int n, int prop, const char *name);
/* Whether this thread's bulk being collected has an op on v. */
bool bulk_has_var(const ordo_var *v);
/* bulk_append for an op's vars as ordo_push_sync takes them (live, at most
 * 16 in all, in any order, repeats allowed: a repeat is a write, rule 3):
 * the bulk's table of vars, which it keeps anyway, finds the repeats, so
 * they need no sorting first. */
typedef struct bulk_rw { /* (in one struct: fewer arguments on the stack, per push) */
    ordo_var *const *reads, *const *writes;
    int nreads, nwrites;
} bulk_rw;
bool bulk_append_rw(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                    const bulk_rw *rw, int prop, const char *name);
/* Whether this push may join a bulk: a small sync op for a CPU worker, and
 * nothing that needs it to be an op of its own.  Whether this thread bulks
 * (not a worker, not inside an op, a bulk size set) bulk_append asks. */
static inline bool engine_bulkable(ordo_engine *e, ordo_sync_fn sfn, ordo_ctx ctx, int prop, int priority) {
    return (prop & ORDO_PROP_BULK) && sfn && priority == 0 &&
           (prop & ~(ORDO_PROP_BULK | ORDO_PROP_NO_SKIP)) == ORDO_PROP_NORMAL && ctx.dev_type == ORDO_CPU &&
           e->cfg.kind != ORDO_ENGINE_NAIVE && !atomic_load_explicit(&e->profiling, memory_order_relaxed);
}
/* engine_push_trusted's push of an op that did not join a bulk (push.c). */
int engine_push_trusted_alone(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                              ordo_ctx ctx, const var_use *uses, int n, int prop, const char *name,
                              bool short_name);
/* ordo_push_sync for a caller that has done its checks (the tensor layer's
 * small ops): ctx valid, every var live, uses distinct (in any order: a
 * small op's few are sorted by lock_vars if need be), prop without
 * DELETE_VAR, and a name that lives
 * as long as the process; short_name: it is shorter than ORDO_NAME_MAX, so
 * it needs no interning (a longer one is interned, to be cut where every op
 * name is).  Bulked as ordo_push_sync would bulk it.  Inline: the bulked
 * case is most small ops' whole push, and goes straight to bulk_append. */
static inline int engine_push_trusted(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *),
                                      ordo_ctx ctx, const var_use *uses, int n, int prop, const char *name,
                                      bool short_name) {
    if (short_name && engine_bulkable(e, fn, ctx, prop, 0)) {
        if (bulk_append(e, fn, param, param_free, ctx, uses, n, prop & ~ORDO_PROP_BULK, name)) return ORDO_OK;
        prop &= ~ORDO_PROP_BULK; /* tried: the general path need not try again */
    }
    return engine_push_trusted_alone(e, fn, param, param_free, ctx, uses, n, prop, name, short_name);
}
/* Every public entry point calls this first: this thread's ops are handed
 * over before whatever it does next. */
static inline void bulk_flush_mine(void) {
    if (tls_bulk) ordo_bulk_flush();
}
/* For finish_op: the failure var i of a finished bulk op ends with (no
 * reference), and how many of its ops wrote it. */
failure *bulk_var_failure(const op *o, int i);
unsigned bulk_var_writes(const op *o, int i);
/* Whether var i was made before the bulk or by one of its ops (var_void). */
bool bulk_var_made(const op *o, int i);
/* How many pushed ops o stands for in the pending count: a bulk's ops
 * count one by one, so backpressure (rule 9) bounds ops, not bulks. */
int bulk_op_count(const op *o);
static inline long op_weight(const op *o) { return (o->flags & OP_BULK) ? bulk_op_count(o) : 1; }
/* The distinct vars one bulk may hold: its op locks them unsorted
 * (lock_vars, push.c, sorts at most this many when one is busy). */
#define BULK_MAX_VARS 127
/* Timing for the bulk pace (bulk.c): a start time, or 0 when this run is
 * not sampled; then the note that nops ops ran since t0 (none when t0 is 0). */
uint64_t bulk_pace_start(const ordo_engine *e);
void bulk_pace_note(ordo_engine *e, uint64_t t0, int nops);
/* Whether e's bulked ops run long, by its running mean: a bulk started now
 * takes only a chain, and no op runs at its push (run_now.c). */
/* always inline: into engine_run_now_begin, as a call it cost 6 instructions of a small op */
static ORDO_ALWAYS_INLINE bool bulk_paced_out(const ordo_engine *e) {
    long max = e->cfg.bulk_op_max_ns;
    return max > 0 && atomic_load_explicit(&e->bulk_pace, memory_order_relaxed) >= (unsigned long)max << 4;
}
/* The flags of a bulkable op pushed alone: timed for the pace when this
 * thread bulks. */
static inline int bulk_alone_flags(const ordo_engine *e) {
    return tls_bulk_size > 0 && e->cfg.bulk_op_max_ns > 0 ? OP_PACED : 0;
}

/* True, with the message set, when e is the default engine, which only
 * the exit handler destroys (wait.c): ordo_engine_destroy returns at once. */
bool engine_destroy_refused(const ordo_engine *e);
/* ordo_engine_destroy without its refusals for tensors still alive: the
 * default engine at exit, whose tensors are never freed then. */
void engine_destroy_at_exit(ordo_engine *e);
/* Whether e was made by ordo_tensor_engine_create and not yet closed (storage.c). */
bool storage_engine_is_front(const ordo_engine *e);
/* Destroys the default engine now, if it exists (its exit handler then
 * finds nothing to do): for the shell reaper's destructor, which must not
 * stop while the engine still waits for commands (wait.c). */
void engine_destroy_default_now(void);

/* The host waits for every GPU this engine used (engine.c). */
int  engine_device_sync(ordo_engine *e, char *err, size_t errlen);
/* ordo_wait_for_var for a read of v's data (the tensor layer's reads): a
 * void var fails it every time, not once (var_void, wait.c). */
int  engine_wait_for_data(ordo_engine *e, ordo_var *v);
/* Reports the oldest unreported failure, marks all reported (wait_for_all). */
int  engine_report_failures(ordo_engine *e);

typedef struct waiter waiter;
/* wait.c: wakes the waiter with the failure it must report and the GPU
 * events it must still block on (references it takes over). */
void waiter_signal(waiter *wt, failure *f, struct dev_event **evs, int nevs, bool evs_oom);

/* Called once an op has fully completed, by the thread that completed it;
 * count is how many pushed ops it stands for (a bulk: its ops). */
void engine_op_retired(ordo_engine *e, worker *w, long count);
/* Ops pushed and not yet retired, exact at some instant during the call. */
long engine_pending(ordo_engine *e);
void engine_record_failure(ordo_engine *e, failure *f);

extern ORDO_HIDDEN _Thread_local worker *tls_worker;
/* The vars whose locks this thread holds while a kernel runs at its push
 * (run_now.c; its caller sets them around the kernel). */
typedef struct run_now_held {
    const var_use *uses;
    int n;
} run_now_held;
/* What this thread is running, in one struct: one thread-local address
 * for the small-op push to keep (TLS_PIN).  in_op: how deep in op
 * functions, or a kernel run at its push; run_now_held: that kernel's vars,
 * or NULL. */
typedef struct thread_ops {
    int in_op;
    const run_now_held *run_now_held;
} thread_ops;
extern ORDO_HIDDEN _Thread_local thread_ops tls_thread;

uint64_t now_ns(void);

/* ordo_kernel_register replaced the function of a kernel: the tensor
 * layer's copy of it (tensor_push.c) follows. */
void tensor_kernel_replaced(const char *name, int dev_type, ordo_kernel_fn fn);

/* ---- running a small op at its push (run_now.c) ------------------------ */

/* Inline: these are most of a small op's push, and as calls their frames
 * cost as much as their work.  The rest is in run_now.c, with the why. */
void engine_run_now_unlock(const var_use *uses, int n);
bool engine_run_now_bulk_has(const var_use *uses, int n);

/* Whether one of vars is held by a kernel this thread runs at its push
 * (tls_thread.run_now_held): a push onto it would wait for this thread
 * forever, so push_prepared refuses it. */
bool run_now_holds_any(ordo_var *const *vars, int n);

/* Whether v may be used now, its lock held by the caller: no op holds a
 * grant that conflicts, none waits, and no failure or GPU work rides on it. */
static ORDO_ALWAYS_INLINE bool var_idle_for(const ordo_var *v, bool w) {
    /* fail is written by a granted writer outside the lock (finish_op):
     * read only once none is granted.  Then one test for two pointers. */
    if (v->head || v->deleted || v->writer_active || (w && v->nreaders)) return false;
    return !((uintptr_t)v->fail | (uintptr_t)atomic_load_explicit(&v->device_state, memory_order_relaxed));
}

/* With uses distinct, the op's one write first and then its reads (n at
 * most RUN_NOW_MAX_USES): true when the op may run on this thread now --
 * no op uses or waits for its vars, none of this thread's bulk does, none
 * carries a failure, no profile is being taken, the engine's ops are short
 * (the pace) -- and then the vars' locks are held until
 * engine_run_now_end, or engine_run_now_failed when the op failed, or
 * engine_run_now_unlock when it did not run.  The caller has checked that
 * this thread is no worker and runs no op (tls_worker, tls_thread.in_op)
 * and passes tls_bulk: in libordo.so each thread-local read that the
 * compiler does not merge with the others is a call to __tls_get_addr.
 * The op's function runs with op_ = fail_slot_ctx(&f), f NULL before,
 * tls_thread.in_op raised (a wait inside it is refused, as inside any op)
 * and tls_thread.run_now_held set; engine_run_now_failed takes what it
 * returned (rv), f (a reference) and the op's name. */
#define RUN_NOW_MAX_USES 5
static ORDO_ALWAYS_INLINE bool engine_run_now_begin(ordo_engine *e, const var_use *uses, int n, struct bulk *bulk) {
    if (e->cfg.kind == ORDO_ENGINE_NAIVE || atomic_load_explicit(&e->profiling, memory_order_relaxed) ||
        bulk_paced_out(e))
        return false;
    if (bulk && engine_run_now_bulk_has(uses, n)) return false;
    ORDO_UNROLL(RUN_NOW_MAX_USES) /* with the bound known, each var costs a compare with n, not a loop's round */
    for (int i = 0; i < RUN_NOW_MAX_USES && i < n; i++) {
        ordo_var *v = uses[i].v;
        if (!spin_lock_try(&v->lock)) {
            engine_run_now_unlock(uses, i);
            return false;
        }
        if (!var_idle_for(v, i == 0)) {
            engine_run_now_unlock(uses, i + 1);
            return false;
        }
    }
    return true;
}
static ORDO_ALWAYS_INLINE void engine_run_now_end(const var_use *uses, int n) {
    /* Only a granted writer changes the version, and the lock makes this
     * thread the only one: a release store, for readers. */
    ordo_var *w = uses[0].v;
    atomic_store_explicit(&w->version, atomic_load_explicit(&w->version, memory_order_relaxed) + 1,
                          memory_order_release);
    spin_lock_release(&w->lock);
    ORDO_UNROLL(RUN_NOW_MAX_USES)
    for (int i = 1; i < RUN_NOW_MAX_USES && i < n; i++) spin_lock_release(&uses[i].v->lock);
}
void engine_run_now_failed(ordo_engine *e, const var_use *uses, int n, int rv, failure *f, const char *name);

/* ---- profiler (profiler.c) --------------------------------------------- */

/* Records a buffer holds at most (ORDO_PROFILER_MAX_EVENTS may lower it):
 * past it the summary and the trace count the records dropped. */
#define PROF_MAX_EVENTS (8L << 20)
prof_buf *prof_buf_new(ordo_engine *e, int worker_id, ordo_ctx dev, const char *label);
/* Takes o->prof_gpu (NULL after), whether it keeps the record or not. */
void prof_record(ordo_engine *e, worker *w, op *o, uint64_t t_end, int status);
void prof_free_all(ordo_engine *e);
/* GPU-side timing of a GPU op, while profiling: gpu_begin records a timing
 * event on the op's stream just before its function runs (o->prof_gpu),
 * gpu_end one after its work was queued.  A timing call that fails drops
 * the GPU side of the record, never the op.  gpu_drop frees o->prof_gpu
 * when no record takes it (profiling stopped while the op ran). */
void prof_gpu_begin(ordo_engine *e, op *o);
void prof_gpu_end(ordo_engine *e, op *o);
void prof_gpu_drop(ordo_engine *e, op *o);



#endif
