/*
 * bulk.c - small ops handed to the engine together ("bulking").
 *
 * An engine push costs a few hundred nanoseconds of bookkeeping and a
 * hand-off between cores, while a kernel on 16 floats costs about 30.  A
 * thread that opts in (ordo_set_bulk_size) lets the engine collect its small
 * CPU sync ops (pushed with ORDO_PROP_BULK) into one engine op that runs them
 * in push order: one push and one hand-off per bulk instead of per op.
 * MXNet's engine bulks imperative small ops the same way.
 *
 * What must not change is what the ops mean:
 *  - order: the bulk is pushed before anything else this thread pushes,
 *    waits on or deletes (every public entry point calls bulk_flush_mine
 *    first), so this thread's ops keep their push order (rule 1);
 *  - failures (rule 5), op by op: the bulk op runs even on failed inputs
 *    (NO_SKIP) and skips inside it each op that meets a failed var, exactly
 *    as the engine skips a lone op: a var that an earlier op of the bulk
 *    failed counts as failed for the later ones.  Each var ends with the
 *    failure it would have had after the ops pushed one by one (finish_op
 *    asks bulk_var_failure), and each fresh failure is named after its op
 *    and recorded for wait_for_all;
 *  - versions: a var's version grows by the number of ops that wrote it.
 *
 * A bulk is a thread's own until it is pushed, so collecting takes no lock.
 * Its vars are kept in a small table, in the order they first came; each
 * op's uses are indexes into it, and the bulk op's vars are the table as it
 * is, so the two share indexes.  They are not sorted by address: lock_vars
 * (push.c) tries them in any order and sorts only when one is busy.  The
 * table also finds the vars an op names twice (bulk_append_rw), so an op
 * from ordo_push_sync joins a bulk without the sort that merges repeats
 * for a lone op.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BULK_MAX_OP_USES 16  /* vars of one op that may join a bulk */
#define USE_WRITE 0x80       /* a use byte: var index | USE_WRITE */
#define HASH_SLOTS 256       /* power of two, at least twice BULK_MAX_VARS */

_Static_assert(BULK_MAX_VARS < USE_WRITE, "a var's index must fit a use byte beside USE_WRITE");

/* An op of the bulk: 24 bytes, so that 16 fill 6 cache lines -- every line
 * of a bulk moves from the pushing core to a worker's and back.  Its
 * function and param_free are a pair in the bulk's small table of them
 * (a loop pushes the same kernel again and again). */
typedef struct bulk_entry {
    void *param;
    const char *name; /* interned */
    unsigned short use0;
    unsigned char nuse, fnx, no_skip;
} bulk_entry;

_Static_assert(sizeof(bulk_entry) <= 24, "a bulk entry grew past 24 bytes");

typedef struct bulk_fns {
    ordo_sync_fn fn;
    void (*param_free)(void *);
} bulk_fns;

typedef struct bulk {
    struct bulk *next_free;
    ordo_engine *engine;
    ordo_ctx ctx;
    int nent, nvars, nuse, nfns;
    bool chain_only; /* started while ops ran long (the pace): takes only ops that wait for one of its own */
    bulk_entry ent[ORDO_BULK_MAX];
    bulk_fns fns[ORDO_BULK_MAX]; /* distinct (fn, param_free) pairs of the entries */
    unsigned char use[ORDO_BULK_MAX * BULK_MAX_OP_USES];
    ordo_var *vars[BULK_MAX_VARS]; /* also the bulk op's var array, and: */
    dep_node nodes[BULK_MAX_VARS]; /* its nodes (lent: no allocation per bulk) */
    bool var_w[BULK_MAX_VARS];
    unsigned char slot[HASH_SLOTS]; /* open addressing on the var's address: index + 1, 0 = empty */
    /* Filled by bulk_run for finish_op: */
    unsigned short writes[BULK_MAX_VARS];
    failure *fail[BULK_MAX_VARS]; /* references */
    bool made[BULK_MAX_VARS];     /* the var's made, then whether an op of the bulk wrote it without failing */
} bulk;

ORDO_HIDDEN _Thread_local bulk *tls_bulk;
ORDO_HIDDEN _Thread_local int tls_bulk_size;

/* Bulk blocks are reused: a worker frees each one on another core, and a
 * malloc/free of 5 KB across threads costs more than the ops it carries.
 * Workers push spent blocks on a shared stack; a bulking thread takes the
 * whole stack at once when its own list runs dry (pushes and grab-alls
 * only: no ABA).  The count is approximate: it only caps the cache. */
#define FREE_MAX 256
static _Atomic(bulk *) free_stack;
static atomic_int free_n;
static _Thread_local bulk *tl_free;

static bulk *bulk_alloc(void) {
    bulk *b = tl_free;
    if (!b && atomic_load_explicit(&free_stack, memory_order_relaxed)) {
        b = atomic_exchange_explicit(&free_stack, NULL, memory_order_acquire);
        atomic_store_explicit(&free_n, 0, memory_order_relaxed);
    }
    if (b) {
        tl_free = b->next_free;
        return b;
    }
    return malloc(sizeof *b);
}

static void bulk_free(bulk *b) {
    if (atomic_load_explicit(&free_n, memory_order_relaxed) >= FREE_MAX) {
        free(b);
        return;
    }
    atomic_fetch_add_explicit(&free_n, 1, memory_order_relaxed);
    bulk *h = atomic_load_explicit(&free_stack, memory_order_relaxed);
    do b->next_free = h;
    while (!atomic_compare_exchange_weak_explicit(&free_stack, &h, b, memory_order_release, memory_order_relaxed));
}

/* A thread that exits with ops collected hands them over. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static _Thread_local bool exit_armed;

static void flush_at_exit(void *unused) {
    (void)unused;
    ordo_bulk_flush();
    while (tl_free) { /* this thread's spare blocks: back to the shared stack */
        bulk *b = tl_free;
        tl_free = b->next_free;
        bulk_free(b);
    }
}

static void make_exit_key(void) { pthread_key_create(&exit_key, flush_at_exit); }

int ordo_set_bulk_size(int n) {
    int old = tls_bulk_size;
    if (n < 0 || n > ORDO_BULK_MAX) {
        set_error(ORDO_ERR_INVALID, "ordo_set_bulk_size: %d is out of range 0..%d; %d is used", n, ORDO_BULK_MAX,
                  n < 0 ? 0 : ORDO_BULK_MAX);
        n = n < 0 ? 0 : ORDO_BULK_MAX;
    }
    if (n < old) ordo_bulk_flush();
    if (n > 0 && !exit_armed) {
        pthread_once(&exit_once, make_exit_key);
        pthread_setspecific(exit_key, (void *)1);
        exit_armed = true;
    }
    tls_bulk_size = n;
    return old;
}

int ordo_get_bulk_size(void) { return tls_bulk_size; }

/* ---- pace ------------------------------------------------------------------ */

/* A bulk runs its ops one after another on one worker.  That pays for ops
 * of tens of nanoseconds, whose push costs more than they do, and loses
 * the parallelism of ops of a microsecond and up, which would have run side
 * by side on the workers (make bench's random DAG of 1 us tasks: 40%
 * efficiency bulked, 60% alone).  Small bulks are no middle way: the
 * engine's window of ops in flight (max_inflight) then holds thousands of
 * bulk blocks, cold in cache by the time they run (that DAG with 300 ns
 * tasks in bulks of 2 took twice as long per task as with no bulks).  So
 * bulks are not cut to a size.  Instead the engine keeps a running mean of
 * what a bulked op takes (e->bulk_pace, in 1/16 ns), and while that is at
 * least bulk_op_max_ns (bulk_paced_out) a bulk started then holds only
 * a chain: an op that waits for none of the bulk's ops would have run beside
 * them, so it hands the bulk over and starts a new one (bulk_append); an
 * op that waits for one of them anyway joins it, as a chain loses nothing
 * by bulking (a training step's ops on one tensor, say).  A bulk of one op
 * is pushed alone and timed too (OP_PACED), so the mean comes back down
 * when the ops get small again.  The default limit, 500 ns, sits between
 * the two: a 16-float add from Lua takes 60-90 ns in a bulk, and a Lua
 * push of one op alone costs about 250.  Reading the clock costs about 30
 * ns, so each thread times only one run in PACE_SAMPLE of bulks and of
 * such ops. */
#define PACE_SAMPLE 8
static _Thread_local unsigned pace_tick;

uint64_t bulk_pace_start(const ordo_engine *e) {
    return ++pace_tick % PACE_SAMPLE == 0 && e->cfg.bulk_op_max_ns > 0 ? now_ns() : 0;
}

void bulk_pace_note(ordo_engine *e, uint64_t t0, int nops) {
    if (!t0 || nops <= 0) return;
    uint64_t sample = ((now_ns() - t0) << 4) / (uint64_t)nops;
    unsigned old = atomic_load_explicit(&e->bulk_pace, memory_order_relaxed);
    /* A sample may be the clock of a thread that lost its core in the
     * middle (three threads on two cores is the usual case): one such
     * sample, a whole time slice, must not stop the bulking.  So a sample
     * counts for at most twice the mean plus twice the limit: it takes two
     * samples in a row to go from tiny ops to pushing alone. */
    uint64_t cap = 2 * (uint64_t)old + ((uint64_t)e->cfg.bulk_op_max_ns << 5);
    if (sample > cap) sample = cap;
    if (sample > UINT32_MAX / 2) sample = UINT32_MAX / 2;
    /* A mean over about the last 4 samples; concurrent notes may lose one,
     * which only slows the mean down. */
    long next = (long)old + ((long)sample - (long)old) / 4;
    atomic_store_explicit(&e->bulk_pace, (unsigned)next, memory_order_relaxed);
}

/* ---- collecting ---------------------------------------------------------- */

/* Vars sit in slabs, a few dozen bytes apart: drop the low bits, fold the rest. */
static unsigned hash_slot(const ordo_var *v) {
    uintptr_t x = (uintptr_t)v >> 6;
    return (unsigned)((x ^ (x >> 7) ^ (x >> 14)) & (HASH_SLOTS - 1));
}

/* The slot that holds v, or the empty one where v would go. */
static unsigned char *find_slot(bulk *b, const ordo_var *v) {
    unsigned h = hash_slot(v);
    while (b->slot[h] && b->vars[b->slot[h] - 1] != v) h = (h + 1) & (HASH_SLOTS - 1);
    return &b->slot[h];
}

/* The index of (fn, param_free) in b's table of pairs, added if new. */
static int fns_index(bulk *b, ordo_sync_fn fn, void (*param_free)(void *)) {
    for (int x = b->nfns - 1; x >= 0; x--) /* the last pair first: usually the one */
        if (b->fns[x].fn == fn && b->fns[x].param_free == param_free) return x;
    b->fns[b->nfns] = (bulk_fns){fn, param_free};
    return b->nfns++;
}

bool bulk_has_var(const ordo_var *v) {
    bulk *b = tls_bulk;
    return b && *find_slot(b, v) != 0;
}

/* Whether an op with these uses must wait for an op already in b: it
 * writes a var b uses, or reads one b writes. */
static bool uses_depend(bulk *b, const var_use *uses, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char s = *find_slot(b, uses[i].v);
        if (s && (uses[i].w || b->var_w[s - 1])) return true;
    }
    return false;
}

static bool rw_depends(bulk *b, const bulk_rw *rw) {
    for (int i = 0; i < rw->nreads; i++) {
        unsigned char s = *find_slot(b, rw->reads[i]);
        if (s && b->var_w[s - 1]) return true;
    }
    for (int i = 0; i < rw->nwrites; i++)
        if (*find_slot(b, rw->writes[i])) return true;
    return false;
}

/* Does the op with these uses use exactly the vars, and the same way, as
 * the op whose use bytes start at use? */
static bool same_uses(const bulk *b, const unsigned char *use, const var_use *uses, int n) {
    for (int j = 0; j < n; j++)
        if (b->vars[use[j] & ~USE_WRITE] != uses[j].v || !(use[j] & USE_WRITE) != !uses[j].w) return false;
    return true;
}

/* A fresh bulk for (e, ctx), this thread's from now on; NULL without memory.
 * Inline: out of line, it made bulk_append's 0- and 1-var pushes slower
 * (paired runs), though it only runs once a bulk. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline bulk *bulk_start(ordo_engine *e, ordo_ctx ctx) {
    bulk *b = bulk_alloc();
    if (!b) return NULL;
    b->engine = e;
    atomic_fetch_add_explicit(&e->open_bulks, 1, memory_order_relaxed);
    b->ctx = ctx;
    b->nent = b->nvars = b->nuse = b->nfns = 0;
    b->chain_only = bulk_paced_out(e); /* read once a bulk, not once an op */
    memset(b->slot, 0, sizeof b->slot);
    tls_bulk = b;
    return b;
}

/* The op's entry, its use bytes at use0 (n of them) in place. */
static inline void add_entry(bulk *b, ordo_sync_fn fn, void *param, void (*param_free)(void *), int use0, int n,
                             int prop, const char *name, int size) {
    int x = fns_index(b, fn, param_free);
    bulk_entry *en = &b->ent[b->nent++];
    en->param = param;
    en->name = name;
    en->use0 = (unsigned short)use0;
    en->nuse = (unsigned char)n;
    en->fnx = (unsigned char)x;
    en->no_skip = (prop & ORDO_PROP_NO_SKIP) != 0;
    if (b->nent >= size) ordo_bulk_flush();
}

bool bulk_append(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                 const var_use *uses, int n, int prop, const char *name) {
    /* The thread-locals read up front, where one lookup serves them all. */
    bulk *b = tls_bulk;
    const int size = tls_bulk_size;
    if (size <= 0 || tls_thread.in_op || tls_worker || n > BULK_MAX_OP_USES) return false;
    if (b && (b->engine != e || b->ctx.dev_id != ctx.dev_id)) {
        ordo_bulk_flush();
        b = NULL;
    }
    /* Ops that run long (the pace) keep a bulk to a chain: one that waits
     * for none of its ops would have run beside them, so it starts anew. */
    if (b && b->chain_only && !uses_depend(b, uses, n)) {
        ordo_bulk_flush();
        b = NULL;
    }
    /* A loop pushes the same op on the same tensors again and again
     * (x:add_(y) in a loop, a chain of in-place updates): an op whose uses
     * are its predecessor's shares their use bytes, and its vars are in the
     * table already. */
    int use0 = -1;
    if (b && b->nent > 0) {
        const bulk_entry *pe = &b->ent[b->nent - 1];
        if (pe->nuse == n && same_uses(b, &b->use[pe->use0], uses, n)) use0 = pe->use0;
    }
    if (use0 < 0) {
        /* Each use's slot is looked up once: the lookup both counts the
         * vars new to the bulk (is there room?) and says where they go. */
        unsigned char *slot[BULK_MAX_OP_USES];
        if (b) {
            int fresh = 0;
            for (int i = 0; i < n; i++) fresh += *(slot[i] = find_slot(b, uses[i].v)) == 0;
            if (b->nvars + fresh > BULK_MAX_VARS) {
                ordo_bulk_flush();
                b = NULL;
            }
        }
        if (!b) {
            if (!(b = bulk_start(e, ctx))) return false; /* pushed alone: no worse than without bulking */
            for (int i = 0; i < n; i++) slot[i] = &b->slot[hash_slot(uses[i].v)];
        }
        use0 = b->nuse;
        for (int i = 0; i < n; i++) {
            ordo_var *v = uses[i].v;
            unsigned char *s = slot[i];
            /* An empty slot found above is still v's place unless an
             * earlier var of this op took it; then probe again. */
            if (*s && b->vars[*s - 1] != v) s = find_slot(b, v);
            int k = *s - 1;
            if (k < 0) {
                k = b->nvars++;
                b->vars[k] = v;
                b->var_w[k] = false;
                *s = (unsigned char)(k + 1);
            }
            b->var_w[k] |= uses[i].w;
            b->use[b->nuse++] = (unsigned char)(k | (uses[i].w ? USE_WRITE : 0));
        }
    }
    add_entry(b, fn, param, param_free, use0, n, prop, name, size);
    return true;
}

/* A var of an op being added by bulk_append_rw: its index in the table
 * (added if new), its use byte written unless the op has it already. */
static inline void add_use(bulk *b, int use0, ordo_var *v, bool w) {
    unsigned char *s = find_slot(b, v);
    int k = *s - 1;
    if (k < 0) { /* new to the bulk, so new to the op */
        k = b->nvars++;
        b->vars[k] = v;
        b->var_w[k] = false;
        *s = (unsigned char)(k + 1);
    } else {
        for (int j = use0; j < b->nuse; j++)
            if ((b->use[j] & ~USE_WRITE) == k) { /* named twice by the op: one use, a write (rule 3) */
                b->use[j] |= USE_WRITE;
                b->var_w[k] = true;
                return;
            }
    }
    b->var_w[k] |= w;
    b->use[b->nuse++] = (unsigned char)(k | (w ? USE_WRITE : 0));
}

/* How many distinct vars of the op the bulk does not have yet. */
static int count_fresh(bulk *b, ordo_var *const *reads, int nreads, ordo_var *const *writes, int nwrites) {
    ordo_var *seen[2 * BULK_MAX_OP_USES];
    int fresh = 0;
    for (int i = 0; i < nreads + nwrites; i++) {
        ordo_var *v = i < nreads ? reads[i] : writes[i - nreads];
        if (*find_slot(b, v)) continue;
        int j = 0;
        while (j < fresh && seen[j] != v) j++;
        if (j == fresh) seen[fresh++] = v;
    }
    return fresh;
}

bool bulk_append_rw(ordo_engine *e, ordo_sync_fn fn, void *param, void (*param_free)(void *), ordo_ctx ctx,
                    const bulk_rw *rw, int prop, const char *name) {
    ordo_var *const *reads = rw->reads, *const *writes = rw->writes;
    const int nreads = rw->nreads, nwrites = rw->nwrites;
    bulk *b = tls_bulk;
    const int size = tls_bulk_size;
    const int n = nreads + nwrites;
    if (size <= 0 || tls_thread.in_op || tls_worker || n > BULK_MAX_OP_USES) return false;
    if (b && (b->engine != e || b->ctx.dev_id != ctx.dev_id)) {
        ordo_bulk_flush();
        b = NULL;
    }
    if (b && b->chain_only && !rw_depends(b, rw)) { /* long ops: a bulk is a chain (bulk_append) */
        ordo_bulk_flush();
        b = NULL;
    }
    /* Room: the exact count only when the quick bound says it may be short. */
    if (b && b->nvars + n > BULK_MAX_VARS && b->nvars + count_fresh(b, reads, nreads, writes, nwrites) > BULK_MAX_VARS) {
        ordo_bulk_flush();
        b = NULL;
    }
    /* An op that names its predecessor's vars, in the same order and the
     * same way (a loop, a chain of updates), shares its use bytes: no
     * lookups. */
    if (b && b->nent > 0) {
        const bulk_entry *pe = &b->ent[b->nent - 1];
        const unsigned char *use = &b->use[pe->use0];
        bool same = pe->nuse == n;
        for (int i = 0; same && i < n; i++) {
            ordo_var *v = i < nreads ? reads[i] : writes[i - nreads];
            same = b->vars[use[i] & ~USE_WRITE] == v && !(use[i] & USE_WRITE) == (i < nreads);
        }
        if (same) {
            add_entry(b, fn, param, param_free, pe->use0, n, prop, name, size);
            return true;
        }
    }
    if (!b && !(b = bulk_start(e, ctx))) return false;
    const int use0 = b->nuse;
    for (int i = 0; i < nreads; i++) add_use(b, use0, reads[i], false);
    for (int i = 0; i < nwrites; i++) add_use(b, use0, writes[i], true);
    add_entry(b, fn, param, param_free, use0, b->nuse - use0, prop, name, size);
    return true;
}

/* ---- running --------------------------------------------------------------- */

static void set_fail(failure **slot, failure *f) {
    if (*slot == f) return;
    if (f) failure_ref(f);
    failure_unref(*slot);
    *slot = f;
}

static int bulk_run(const ordo_run_ctx *rc, void *param) {
    bulk *b = param;
    op *o = rc->op_;
    ordo_engine *e = rc->engine;
    /* A failure the engine gave the op before it ran (GPU work it waited
     * for failed): every op of the bulk meets it, as each would alone. */
    failure *before = o->fail;
    o->fail = NULL;
    if (before) engine_record_failure(e, before);
    /* clean: no failure met so far, so no op is skipped and no var's
     * failure changes -- the usual case, which skips that bookkeeping. */
    bool clean = !before;
    const uint64_t t0 = bulk_pace_start(e);
    for (int i = 0; i < b->nvars; i++) {
        failure *f = b->vars[i]->fail; /* ours to read: the op holds every var's grant */
        b->made[i] = b->vars[i]->made;
        /* reported before the bulk was pushed: no op meets it, unless the
         * var is void (an op that only reads it does, as alone: sched.c) */
        if (f && !failure_meets(f, o->epoch) && b->made[i]) f = NULL;
        b->fail[i] = NULL;
        set_fail(&b->fail[i], f);
        b->writes[i] = 0;
        if (f) clean = false;
    }
    for (int k = 0; k < b->nent; k++) {
        const bulk_entry *en = &b->ent[k];
        if (k + 1 < b->nent) { /* the next op's parameters, read while this one runs */
            __builtin_prefetch(b->ent[k + 1].param);
            __builtin_prefetch((char *)b->ent[k + 1].param + 64);
        }
        const unsigned char *use = &b->use[en->use0];
        failure *f = NULL;
        if (!clean) {
            if ((f = before)) failure_ref(f);
            /* of two, the failure of the var of lower address, as alone (sched.c) */
            const ordo_var *at = NULL;
            for (int j = 0; !before && !en->no_skip && j < en->nuse; j++) {
                int vi = use[j] & ~USE_WRITE;
                failure *vf = b->fail[vi];
                if (vf && (!f || b->vars[vi] < at) &&
                    (failure_meets(vf, o->epoch) || (!b->made[vi] && !(use[j] & USE_WRITE)))) {
                    f = b->fail[vi];
                    at = b->vars[vi];
                }
            }
            if (f && !before) failure_ref(f);
        }
        if (!f || en->no_skip) {
            if (f) failure_unref(f); /* (a call saved per op: f is nearly always NULL) */
            ordo_run_ctx erc = *rc;
            int rv = b->fns[en->fnx].fn(&erc, en->param); /* ordo_fail sets o->fail */
            f = o->fail;
            o->fail = NULL;
            if (rv != 0 && !f) f = failure_new("failed (returned %d)", rv);
            if (f) {
                f = failure_named(f, en->name);
                engine_record_failure(e, f);
                clean = false;
            }
        }
        for (int j = 0; j < en->nuse; j++) {
            if (!(use[j] & USE_WRITE)) continue;
            int i = use[j] & ~USE_WRITE;
            b->writes[i]++;
            if (!f) b->made[i] = true;
            if (!clean) set_fail(&b->fail[i], f);
        }
        if (f) failure_unref(f);
    }
    bulk_pace_note(e, t0, b->nent);
    failure_unref(before);
    return 0;
}

failure *bulk_var_failure(const op *o, int i) { return ((const bulk *)o->param)->fail[i]; }

unsigned bulk_var_writes(const op *o, int i) { return ((const bulk *)o->param)->writes[i]; }
bool bulk_var_made(const op *o, int i) { return ((const bulk *)o->param)->made[i]; }

int bulk_op_count(const op *o) { return ((const bulk *)o->param)->nent; }

/* After the bulk ran, or when it is dropped: every op's param goes. */
static void bulk_release(void *param) {
    bulk *b = param;
    for (int k = 0; k < b->nent; k++) {
        void (*param_free)(void *) = b->fns[b->ent[k].fnx].param_free;
        if (param_free) param_free(b->ent[k].param);
    }
    for (int i = 0; i < b->nvars; i++) failure_unref(b->fail[i]);
    bulk_free(b);
}

/* ---- handing over ------------------------------------------------------------ */

/* A bulk of one op, or one that could not be pushed as one op (a var was
 * deleted by another thread, or no memory): its ops are pushed one by one,
 * and one that cannot be is dropped, its failure left for the next
 * wait_for_all. */
static int push_each(bulk *b) {
    ordo_engine *e = b->engine;
    int first_rc = ORDO_OK;
    for (int k = 0; k < b->nent; k++) {
        bulk_entry *en = &b->ent[k];
        var_use uses[BULK_MAX_OP_USES]; /* in collect_vars' order: by address */
        for (int j = 0; j < en->nuse; j++) {
            unsigned char u = b->use[en->use0 + j];
            uses[j] = (var_use){b->vars[u & ~USE_WRITE], (u & USE_WRITE) != 0};
        }
        int prop = ORDO_PROP_NORMAL | (en->no_skip ? ORDO_PROP_NO_SKIP : 0);
        const bulk_fns *fns = &b->fns[en->fnx];
        int rc = push_uses(e, bulk_alone_flags(e), fns->fn, NULL, en->param, fns->param_free, b->ctx, uses,
                           en->nuse, prop, 0, en->name, "ordo_bulk_flush", NULL, NULL);
        if (rc == ORDO_OK) continue;
        if (!first_rc) first_rc = rc;
        failure *f = failure_new("%s: not run: %s", en->name[0] ? en->name : "op", ordo_last_error());
        if (f) {
            engine_record_failure(e, f);
            failure_unref(f);
        }
        if (fns->param_free) fns->param_free(en->param);
    }
    bulk_free(b);
    return first_rc;
}

static int bulk_hand_over(bulk *b);

int ordo_bulk_flush(void) {
    bulk *b = tls_bulk;
    if (!b) return ORDO_OK;
    tls_bulk = NULL; /* before pushing: the push must not flush again */
    ordo_engine *e = b->engine;
    int rc = bulk_hand_over(b);
    atomic_fetch_sub_explicit(&e->open_bulks, 1, memory_order_release); /* e may be destroyed from here on */
    return rc;
}

/* ordo_bulk_flush's push of b, a bulk no longer this thread's. */
static int bulk_hand_over(bulk *b) {
    if (b->nent == 1) return push_each(b); /* one op: pushed as itself, under its own name */
    ordo_engine *e = b->engine;
    var_use uses[BULK_MAX_VARS];
    for (int i = 0; i < b->nvars; i++) {
        uses[i] = (var_use){b->vars[i], b->var_w[i]};
        b->fail[i] = NULL; /* in case it never runs; bulk_release unrefs the failures */
        b->writes[i] = 0;
        b->made[i] = false;
    }
    int rc = push_uses(e, OP_BULK, bulk_run, NULL, b, bulk_release, b->ctx, uses, b->nvars,
                            ORDO_PROP_NORMAL | ORDO_PROP_NO_SKIP, 0, engine_intern(e, "bulk"), "ordo_bulk_flush",
                            b->vars, b->nodes);
    return rc == ORDO_OK ? ORDO_OK : push_each(b);
}
