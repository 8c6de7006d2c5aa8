/*
 * tensor_push.c - pushing registered kernels on tensors.
 *
 * The hot path (a Lua `c:add_(a)` on small tensors) is: resolve the kernel
 * through a per-id cache, gather its arguments and the op's vars, then
 * either run it at once (nothing in its way: run_now.c) or pack the
 * arguments into a parameter block from a pool and push that.  No
 * allocation per op once the pool is warm:
 * blocks are taken by the pushing thread from a thread-local list, which
 * refills by grabbing the whole shared free stack at once; workers return
 * blocks by pushing onto that stack (many pushers, one grab-all: no ABA).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* ordo_device_backend, fail_detached_take */
#include "tensor_internal.h"

/* ---- kernel ids ----------------------------------------------------------------- */

#define KMAX 512
#define KNAME (ORDO_KERNEL_NAME_MAX + 1) /* names up to 71 chars; a stride of 9 x 8 bytes spreads them over the engine's 8-slot name cache */

static _Alignas(64) char knames[KMAX][KNAME];
static bool kname_short[KMAX]; /* shorter than op names may be: pushed without interning */
static _Atomic(ordo_kernel_fn) kfns[KMAX][2]; /* [0] cpu, [1] gpu */
static atomic_int kcount; /* grows under kmu; read without it */
static pthread_mutex_t kmu = PTHREAD_MUTEX_INITIALIZER;

int ordo_tensor_kernel_id(const char *name) {
    if (!name || !*name || strlen(name) >= KNAME) {
        tensor_set_error("kernel name '%s' is empty or longer than %d characters", name ? name : "(null)", KNAME - 1);
        return -1;
    }
    pthread_mutex_lock(&kmu);
    int id = -1;
    int n = atomic_load_explicit(&kcount, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (!strcmp(knames[i], name)) {
            id = i;
            break;
        }
    if (id < 0 && n < KMAX) {
        id = n;
        strcpy(knames[id], name);
        kname_short[id] = strlen(name) < ORDO_NAME_MAX;
        atomic_store_explicit(&kcount, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&kmu);
    if (id < 0) tensor_set_error("too many distinct kernel names (at most %d)", KMAX);
    return id;
}

static int kid_valid(int kid) { return kid >= 0 && kid < atomic_load_explicit(&kcount, memory_order_acquire); }

const char *ordo_tensor_kernel_name(int kid) { return kid_valid(kid) ? knames[kid] : NULL; }

void tensor_kernel_replaced(const char *name, int dev_type, ordo_kernel_fn fn) {
    pthread_mutex_lock(&kmu);
    int n = atomic_load_explicit(&kcount, memory_order_relaxed);
    for (int i = 0; i < n; i++)
        if (!strcmp(knames[i], name)) atomic_store_explicit(&kfns[i][dev_type == ORDO_GPU], fn, memory_order_release);
    pthread_mutex_unlock(&kmu);
}

static ordo_kernel_fn kernel_fn(int kid, int dev_type) {
    int slot = dev_type == ORDO_GPU;
    ordo_kernel_fn fn = atomic_load_explicit(&kfns[kid][slot], memory_order_acquire);
    if (!fn) {
        fn = ordo_kernel_lookup(knames[kid], slot ? ORDO_GPU : ORDO_CPU);
        if (fn) atomic_store_explicit(&kfns[kid][slot], fn, memory_order_release);
    }
    return fn;
}

static int device_simulated(void);

/* What a push on dev_type would run: the simulated GPU runs the CPU kernels. */
int ordo_tensor_kernel_available(int kid, int dev_type) {
    if (dev_type == ORDO_GPU && device_simulated()) dev_type = ORDO_CPU;
    return kid_valid(kid) && kernel_fn(kid, dev_type) != NULL;
}

void ordo_tensor_kernel_cache_clear(void) {
    for (int i = 0; i < KMAX; i++) {
        atomic_store(&kfns[i][0], NULL);
        atomic_store(&kfns[i][1], NULL);
    }
}

/* ---- parameter blocks --------------------------------------------------------------- */

/* A kernel's arguments travel packed: each view as its data pointer, then
 * only its ndim sizes and strides, then the scalars and iparams.  An
 * elementwise op on 1-dim tensors fills 2 cache lines of the block instead
 * of the 7 that an ordo_kernel_args would touch -- and each of them moves
 * from the pushing core to a worker's core and back with every op.  The
 * worker unpacks them onto its stack (kp_unpack). */
#define NVIEWS (ORDO_KERNEL_MAX_IN + ORDO_KERNEL_MAX_OUT)

typedef union kword {
    int64_t i;
    double d;
    void *p;
} kword;

typedef struct kparam {
    struct kparam *next;
    ordo_kernel_fn fn;
    unsigned char nin, nout, nscalar, niparam;
    unsigned char ndim[NVIEWS], dtype[NVIEWS];
    kword word[NVIEWS * (1 + 2 * ORDO_MAX_DIMS) + ORDO_KERNEL_MAX_SCALARS + ORDO_KERNEL_MAX_IPARAMS];
} kparam;

static void kp_head(kparam *p, ordo_kernel_fn fn, int nin, int nout, int nscalar, int niparam) {
    p->fn = fn;
    p->nin = (unsigned char)nin;
    p->nout = (unsigned char)nout;
    p->nscalar = (unsigned char)nscalar;
    p->niparam = (unsigned char)niparam;
}

/* View i (inputs, then outputs) at w; returns where the next one goes.
 * Inlined into kp_pack, where each call is the bulk of a small op's
 * packing (as a call it cost more than the work). */
static ORDO_ALWAYS_INLINE kword *kp_view(kparam *p, kword *w, int i, void *data, int dtype, int nd, const int64_t *shape,
                      const int64_t *strides) {
    p->ndim[i] = (unsigned char)nd;
    p->dtype[i] = (unsigned char)dtype;
    (w++)->p = data;
    if (nd == 1) { /* the commonest, without the loop's overhead */
        w[0].i = shape[0];
        w[1].i = strides[0];
        return w + 2;
    }
    /* One loop for both: as two, gcc makes each a call to memcpy, which
     * for the usual 1 or 2 dims costs more than the copy. */
    for (int d = 0; d < nd; d++) {
        w[d].i = shape[d];
        w[nd + d].i = strides[d];
    }
    return w + 2 * nd;
}

static void kp_pack(kparam *p, ordo_kernel_fn fn, const ordo_kernel_args *a) {
    kp_head(p, fn, a->nin, a->nout, a->nscalar, a->niparam);
    kword *w = p->word;
    for (int i = 0; i < a->nin + a->nout; i++) {
        const ordo_view *v = i < a->nin ? &a->in[i] : &a->out[i - a->nin];
        w = kp_view(p, w, i, v->data, v->dtype, v->ndim, v->shape, v->strides);
    }
    for (int i = 0; i < a->nscalar; i++) (w++)->d = a->scalar[i];
    for (int i = 0; i < a->niparam; i++) (w++)->i = a->iparam[i];
}

static void kp_unpack(const kparam *p, ordo_kernel_args *a) {
    a->nin = p->nin;
    a->nout = p->nout;
    a->nscalar = p->nscalar;
    a->niparam = p->niparam;
    const kword *w = p->word;
    for (int i = 0; i < a->nin + a->nout; i++) {
        ordo_view *v = i < a->nin ? &a->in[i] : &a->out[i - a->nin];
        int nd = p->ndim[i];
        v->ndim = nd;
        v->dtype = p->dtype[i];
        v->data = (w++)->p;
        if (nd == 1) { /* the commonest, without the loops' overhead */
            v->shape[0] = w[0].i;
            v->strides[0] = w[1].i;
            w += 2;
            continue;
        }
        for (int d = 0; d < nd; d++) v->shape[d] = w[d].i;
        w += nd;
        for (int d = 0; d < nd; d++) v->strides[d] = w[d].i;
        w += nd;
    }
    for (int i = 0; i < a->nscalar; i++) a->scalar[i] = (w++)->d;
    for (int i = 0; i < a->niparam; i++) a->iparam[i] = (w++)->i;
}

/* Blocks freed on a thread (a worker, after the op ran) gather in a
 * thread-local batch and are published to the shared stack BATCH at a time,
 * so the cache line of the shared stack moves once per BATCH ops, not per op.
 * A thread's unpublished batch goes to the shared stack when the thread
 * exits.  The shared stack keeps at most POOL_MAX blocks; beyond, freed. */
#define BATCH 32
#define POOL_MAX 8192

static _Atomic(kparam *) pool_head;
static atomic_long pool_n;
/* This thread's blocks: one struct, reached through one pinned pointer per
 * function (TLS_PIN, internal.h). */
static _Thread_local struct kp_local {
    kparam *free;             /* blocks this thread takes from */
    kparam *ret, *ret_tail;   /* blocks this thread freed */
    int ret_n;
    int registered;           /* flush_at_exit armed for this thread */
} tl_kp;
/* This thread's memo of repeated small ops (MEMO_SLOTS of them), made at
 * its first small op, freed with its blocks at its exit. */
typedef struct op_memo op_memo;
static _Thread_local op_memo *tl_memo;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void publish(kparam *head, kparam *tail, long n) {
    if (atomic_load_explicit(&pool_n, memory_order_relaxed) >= POOL_MAX) {
        while (head) {
            kparam *next = head->next;
            free(head);
            head = next;
        }
        return;
    }
    atomic_fetch_add_explicit(&pool_n, n, memory_order_relaxed);
    kparam *h = atomic_load_explicit(&pool_head, memory_order_relaxed);
    do tail->next = h;
    while (!atomic_compare_exchange_weak_explicit(&pool_head, &h, head, memory_order_release, memory_order_relaxed));
}

static void flush_at_exit(void *unused) {
    (void)unused;
    struct kp_local *t = &tl_kp;
    if (t->ret) publish(t->ret, t->ret_tail, t->ret_n);
    t->ret = t->ret_tail = NULL;
    t->ret_n = 0;
    while (t->free) {
        kparam *next = t->free->next;
        free(t->free);
        t->free = next;
    }
    free(tl_memo);
    tl_memo = NULL;
}

static void make_exit_key(void) { pthread_key_create(&exit_key, flush_at_exit); }

static void arm_exit_flush(void) {
    pthread_once(&exit_once, make_exit_key);
    pthread_setspecific(exit_key, (void *)1);
    tl_kp.registered = 1;
}

static kparam *kp_get(void) {
    struct kp_local *t = &tl_kp;
    TLS_PIN(t);
    kparam *p = t->free;
    if (!t->registered) arm_exit_flush();
    if (!p && t->ret) { /* this thread's own returns (naive engine, errors) */
        p = t->ret;
        t->ret = t->ret_tail = NULL;
        t->ret_n = 0;
    }
    if (!p && atomic_load_explicit(&pool_head, memory_order_relaxed)) {
        /* The whole stack: the count goes to 0 without walking the blocks
         * (each one a cache miss, freed on a worker's core).  A publish
         * racing with this may go uncounted, so POOL_MAX is a soft bound. */
        p = atomic_exchange_explicit(&pool_head, NULL, memory_order_acquire);
        atomic_store_explicit(&pool_n, 0, memory_order_relaxed);
    }
    if (p) {
        t->free = p->next;
        if (t->free) {
            __builtin_prefetch(t->free, 1);
            __builtin_prefetch((char *)t->free + 64, 1);
        }
        return p;
    }
    /* Line-aligned: a small op's arguments then fill 2 lines, not 3. */
    p = aligned_alloc(64, (sizeof *p + 63) & ~(size_t)63);
    if (!p) tensor_set_error_code(ORDO_ERR_NOMEM, "out of memory");
    return p;
}

static void kp_put(void *param) {
    kparam *p = param;
    struct kp_local *t = &tl_kp;
    TLS_PIN(t);
    if (!t->registered) arm_exit_flush(); /* first use on this thread: flush at its exit */
    if (!t->ret) t->ret_tail = p;
    p->next = t->ret;
    t->ret = p;
    if (++t->ret_n >= BATCH) {
        publish(t->ret, t->ret_tail, t->ret_n);
        t->ret = NULL;
        t->ret_n = 0;
    }
}

static int run_kernel(const ordo_run_ctx *rc, void *param) {
    const kparam *p = param;
    ordo_kernel_args a;
    kp_unpack(p, &a);
    return p->fn(rc, &a);
}

/* ---- the simulated GPU ------------------------------------------------------------------ */

/* Whether GPU pushes run the CPU kernels on the simulated device's streams
 * (run_kernel_sim).  Not in the CUDA emulation build (make CUDA=emu): there
 * the GPU kernels are kernels/cuda's, compiled for the host, and they queue
 * their grids on the simulated streams themselves (kernels/cuda/emu).
 * Asked per GPU push (a cached answer would be a data race between pushing
 * threads for a saving of one short strcmp). */
static int device_simulated(void) {
#ifdef ORDO_CUDA_EMU
    return 0;
#endif
    const device_backend *b = ordo_device_backend();
    return b && !strcmp(b->name, "simulated");
}

typedef struct sim_launch {
    ordo_kernel_fn fn;
    ordo_kernel_args a;
    ordo_run_ctx rc;
    int dev;
    bool checked; /* the op's own failure: the body leaves it here for check_sim_launch */
    bool failed;  /* (checked) the kernel failed */
    char *msg;    /* (checked) with this message (NULL: no memory for it) */
} sim_launch;

/* The kernels whose CUDA versions find data-dependent errors on the device
 * and write them to their op's error slot (kernels/cuda: cu_error_slot_op):
 * an index out of range, an integer division by zero, a singular matrix, a
 * value outside check_range's bounds.  On the simulated device their ops
 * are checked too (ordo_gpu_check_after), so their failure is the op's own
 * as on a GPU and on the CPU; the other kernels' failures stay the
 * device's, as a faulting kernel's would (checking every op would make each
 * one's dependants wait for its work, hiding the races the device is here
 * to find). */
static bool sim_kernel_checked(int kid, const ordo_kernel_args *a) {
    static const char *const always[] = {"gather", "index_select", "scatter_add", "scatter", "index_add",
                                         "max_pool2d_backward", "linalg_lu", "check_range"};
    static const char *const int_div[] = {"div", "div_scalar", "rdiv_scalar"};
    const char *name = knames[kid];
    for (size_t i = 0; i < sizeof always / sizeof *always; i++)
        if (!strcmp(name, always[i])) return true;
    if (a->nin < 1 || a->in[0].dtype == ORDO_F32 || a->in[0].dtype == ORDO_F64) return false;
    for (size_t i = 0; i < sizeof int_div / sizeof *int_div; i++)
        if (!strcmp(name, int_div[i])) return true;
    return false;
}

/* On the stream's thread, when the stream gets to it: like a CUDA kernel,
 * the op completed long ago, so a failure travels as the stream's
 * asynchronous error (reported by the next host wait), not the op's --
 * unless the op is checked: then it waits for its check. */
static void sim_kernel_body(void *arg) {
    sim_launch *l = arg;
    int bad = l->fn(&l->rc, &l->a) != 0;
    const char *msg = bad ? fail_detached_take() : NULL;
    if (l->checked) {
        /* read by the check once the stream has passed this item */
        l->failed = bad;
        if (bad) l->msg = strdup(msg ? msg : "a kernel failed");
        return;
    }
    if (bad) ordo_device_sim_inject_error(l->rc.stream, msg ? msg : "a kernel failed");
    free(l);
}

/* A checked op's check, once its stream has run the kernel (gpu_check.c):
 * the kernel's failure is the op's own, named as a GPU's slot names it. */
static int check_sim_launch(void *arg, char *err, size_t errlen) {
    sim_launch *l = arg;
    const bool bad = l->failed;
    if (bad) snprintf(err, errlen, "%s on gpu(%d)", l->msg ? l->msg : "a kernel failed", l->dev);
    free(l->msg);
    free(l);
    return bad;
}

/* The op's function: queue the CPU kernel on the stream, as a launch would. */
static int run_kernel_sim_common(const ordo_run_ctx *rc, void *param, bool checked) {
    kparam *p = param;
    sim_launch *l = malloc(sizeof *l);
    if (!l) return ordo_fail(rc, "out of memory queuing a kernel");
    l->fn = p->fn;
    kp_unpack(p, &l->a);
    l->rc = *rc;
    l->rc.op_ = NULL; /* ordo_fail then keeps the message for fail_detached_take */
    l->dev = rc->ctx.dev_id;
    l->checked = checked;
    l->failed = false;
    l->msg = NULL;
    /* the check owns l from here: it runs once whatever happens next */
    if (checked && ordo_gpu_check_after(rc, check_sim_launch, l) != 0) {
        free(l);
        return ordo_fail(rc, "%s", ordo_last_error());
    }
    char err[256];
    if (ordo_device_backend()->host_fn(rc->ctx.dev_id, rc->stream, sim_kernel_body, l, err, sizeof err)) {
        if (!checked) free(l);
        return ordo_fail(rc, "%s", err);
    }
    return 0;
}

static int run_kernel_sim(const ordo_run_ctx *rc, void *param) { return run_kernel_sim_common(rc, param, false); }
static int run_kernel_sim_checked(const ordo_run_ctx *rc, void *param) {
    return run_kernel_sim_common(rc, param, true);
}

/* ---- checks ----------------------------------------------------------------------------- */

static const char *dev_str(ordo_ctx c, char *buf) {
    snprintf(buf, 32, "%s(%d)", c.dev_type == ORDO_GPU ? "gpu" : c.dev_type == ORDO_CPU_PINNED ? "cpu_pinned" : "cpu",
             c.dev_id);
    return buf;
}

static int same_device(ordo_ctx a, ordo_ctx b) {
    int ta = a.dev_type == ORDO_CPU_PINNED ? ORDO_CPU : a.dev_type;
    int tb = b.dev_type == ORDO_CPU_PINNED ? ORDO_CPU : b.dev_type;
    return ta == tb && a.dev_id == b.dev_id;
}

/* ordo_dtype_size without a call: the small-op path computes addresses
 * with it on every push. */
static const unsigned char dtype_bytes[ORDO_NDTYPES] = {4, 8, 4, 8, 1};

static void *tensor_data(const ordo_tensor *t) {
    return t->storage->data ? (char *)t->storage->data + t->offset * dtype_bytes[t->dtype] : NULL;
}

/* in's strides broadcast to out's shape (NumPy rules); false when its
 * shape does not broadcast. */
static inline bool bcast_strides(const ordo_tensor *in, const ordo_tensor *out, int64_t *strides) {
    int lead = out->ndim - in->ndim;
    if (lead < 0) return false;
    for (int i = 0; i < out->ndim; i++) {
        int j = i - lead;
        if (j < 0) strides[i] = 0;
        else if (in->shape[j] == out->shape[i]) strides[i] = in->strides[j];
        else if (in->shape[j] == 1) strides[i] = 0;
        else return false;
    }
    return true;
}

/* in's view broadcast to out's shape. */
static int bcast_view(const char *op, const ordo_tensor *in, const ordo_tensor *out, ordo_view *v) {
    if (bcast_strides(in, out, v->strides)) {
        v->data = tensor_data(in);
        v->dtype = in->dtype;
        v->ndim = out->ndim;
        for (int i = 0; i < out->ndim; i++) v->shape[i] = out->shape[i];
        return 0;
    }
    char b1[128], b2[128];
    return tensor_set_error("%s: shape %s cannot be broadcast to %s", op, ordo_tensor_shape_str(in, b1, sizeof b1),
                            ordo_tensor_shape_str(out, b2, sizeof b2));
}

static void elem_range(const ordo_tensor *t, int64_t *lo, int64_t *hi) {
    *lo = *hi = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        int64_t span = (t->shape[i] - 1) * t->strides[i];
        if (span < 0) *lo += span;
        else *hi += span;
    }
}

static int same_view(const ordo_tensor *a, const ordo_tensor *b) {
    if (a->offset != b->offset || a->ndim != b->ndim || a->dtype != b->dtype) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) return 0;
    return 1;
}

/* Could an op reading x while writing o read an element o already wrote? */
static int hazard(const ordo_tensor *x, const ordo_tensor *o, int elementwise) {
    if (x->storage != o->storage || x->storage->nbytes == 0) return 0;
    if (ordo_tensor_numel(x) == 0 || ordo_tensor_numel(o) == 0) return 0;
    if (elementwise && same_view(x, o)) return 0;
    size_t ex = ordo_dtype_size(x->dtype), eo = ordo_dtype_size(o->dtype);
    int64_t xl, xh, ol, oh;
    elem_range(x, &xl, &xh);
    elem_range(o, &ol, &oh);
    /* in bytes, dtypes may differ (copy) */
    int64_t xlb = xl * (int64_t)ex, xhb = (xh + 1) * (int64_t)ex, olb = ol * (int64_t)eo, ohb = (oh + 1) * (int64_t)eo;
    return xlb < ohb && olb < xhb;
}

/* An output where two elements share memory (an expanded view). */
static int self_overlapping(const ordo_tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->shape[i] > 1) return 1;
    return 0;
}

/* An output whose elements may share memory: a stride of 0, or windows
 * of unfold that overlap (x:unfold(1, 3, 2): element 3 of window 1 is
 * element 1 of window 2).  Taken by stride from the smallest, each dim's
 * stride must pass every offset the dims before it reach, else two index
 * tuples may meet.  (A sufficient test: every view the API makes without
 * overlap passes it.)  Row-major views pass in one walk, without the sort. */
static int may_overlap(const ordo_tensor *t) {
    int64_t reach = 0;
    int d = t->ndim - 1;
    for (; d >= 0; d--) {
        const int64_t k = t->shape[d], st = t->strides[d] < 0 ? -t->strides[d] : t->strides[d];
        if (k <= 1) continue;
        if (st <= reach) break;
        reach += (k - 1) * st;
    }
    if (d < 0) return 0;
    int64_t sz[ORDO_MAX_DIMS], sd[ORDO_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        const int64_t k = t->shape[i], st = t->strides[i] < 0 ? -t->strides[i] : t->strides[i];
        if (k <= 1) continue;
        if (st == 0) return 1;
        int j = n++;
        for (; j > 0 && sd[j - 1] > st; j--) sz[j] = sz[j - 1], sd[j] = sd[j - 1];
        sz[j] = k, sd[j] = st;
    }
    reach = 0;
    for (int i = 0; i < n; i++) {
        if (sd[i] <= reach) return 1;
        reach += (sz[i] - 1) * sd[i];
    }
    return 0;
}

/* An output no op may write: its elements share memory.  Sets the error. */
static int check_writable(const char *op, const ordo_tensor *t) {
    if (ordo_tensor_numel(t) <= 1) return 0;
    char b[128];
    if (self_overlapping(t))
        return tensor_set_error("%s: cannot write into an expanded view (shape %s with a stride of 0): several "
                                "elements share one memory location; use contiguous() first",
                                op, ordo_tensor_shape_str(t, b, sizeof b));
    if (!may_overlap(t)) return 0;
    char sb[160];
    int at = 0;
    for (int d = 0; d < t->ndim && at < (int)sizeof sb; d++)
        at += snprintf(sb + at, sizeof sb - (size_t)at, "%s%lld", d ? ", " : "", (long long)t->strides[d]);
    return tensor_set_error("%s: cannot write into a view whose elements overlap in memory (shape %s, strides (%s), "
                            "as overlapping unfold windows): several elements share one memory location; use "
                            "contiguous() first",
                            op, ordo_tensor_shape_str(t, b, sizeof b), sb);
}

/* ---- the push ---------------------------------------------------------------------------- */

/* Ops this small may be bulked (ordo_set_bulk_size): their kernel costs
 * less than the push, so running a few back to back on one worker loses
 * no parallelism worth having.  Counted over every operand: a reduction
 * of a large tensor to a scalar is not small. */
#define BULK_MAX_ELEMENTS 16384

static int small_op(const ordo_kernel_args *a, int dev_type) {
    if (dev_type != ORDO_CPU) return 0;
    int64_t n = 0;
    for (int i = 0; i < a->nin + a->nout; i++) {
        const ordo_view *v = i < a->nin ? &a->in[i] : &a->out[i - a->nin];
        int64_t k = 1;
        for (int d = 0; d < v->ndim; d++) k *= v->shape[d];
        n += k;
        if (n > BULK_MAX_ELEMENTS) return 0;
    }
    return 1;
}

/* ---- small ops --------------------------------------------------------------------------- */

#define NOT_SMALL (-1)

/* A device as one word: two compares become one. */
static inline uint64_t ctx_word(ordo_ctx c) {
    uint64_t w;
    memcpy(&w, &c, sizeof w);
    return w;
}

/* The first element of t, which has one at least (its storage has bytes). */
static inline void *first_element(const ordo_tensor *t) {
    return (char *)t->storage->data + t->offset * dtype_bytes[t->dtype];
}

/* The end of a small op's push, its arguments checked: run here and now
 * when engine_run_now_begin said so (now; the vars' locks are held), else
 * handed to the engine.  Always inline: as a call, its frame cost a tenth
 * of a small op. */
static ORDO_ALWAYS_INLINE int push_checked(int kid, const char *op, ordo_kernel_fn fn, ordo_tensor *out,
                               const ordo_kernel_args *a, const var_use *uses, int n, bool now,
                               thread_ops *thread) {
    ordo_engine *e = out->storage->engine;
    if (now) {
        failure *f = NULL;
        const ordo_run_ctx rc = {out->ctx, NULL, -1, e, fail_slot_ctx(&f)};
        const run_now_held held = {uses, n};
        thread->in_op++;
        thread->run_now_held = &held;
        int rv = fn(&rc, a);
        thread->run_now_held = NULL;
        thread->in_op--;
        if (rv != 0 || f) engine_run_now_failed(e, uses, n, rv, f, knames[kid]);
        else {
            uses[0].v->made = true; /* (its lock is still held: the op's grant) */
            engine_run_now_end(uses, n);
        }
    } else {
        kparam *p = kp_get();
        if (!p) return NOT_SMALL; /* the general path reports it */
        kp_pack(p, fn, a);
        /* knames never change once set: the op's name needs no interning */
        int rc = engine_push_trusted(e, run_kernel, p, kp_put, out->ctx, uses, n, ORDO_PROP_NORMAL | ORDO_PROP_BULK,
                                     knames[kid], kname_short[kid]);
        if (rc != ORDO_OK) {
            kp_put(p);
            return tensor_set_error_code(rc, "%s: %s", op, ordo_last_error());
        }
    }
    __atomic_add_fetch(&out->storage->writes, 1, __ATOMIC_RELAXED);
    return ORDO_OK;
}

/* ---- repeated ops ------------------------------------------------------------------------- */

/* A loop that repeats an op on the same tensors (an update of a buffer in
 * place, a step of an iterative method) would check the same descriptors
 * and write the same arguments on every push, and on 16 floats that costs
 * more than the kernel.  Descriptors never change once made and each has
 * an id of its own (ordo_tensor.h), so a push whose kernel, output, inputs
 * and ids are those of an op this thread pushed before has the arguments
 * checked and written then: a small per-thread table keeps them.  What can
 * change in between is still read on every push: the kernel registered
 * under the name, the engine's settings, the vars' state. */
#define MEMO_SLOTS 16 /* direct-mapped by output and kernel */
#define MEMO_MAX_IN 3

struct op_memo {
    uint32_t key; /* memo_key(kid, nin, nscalar); 0: empty */
    int nuses;
    const ordo_tensor *out, *in[MEMO_MAX_IN];
    uint64_t out_id, in_id[MEMO_MAX_IN];
    ordo_kernel_fn fn;
    int64_t work; /* elements over all operands: against run_now_max_elements */
    var_use uses[MEMO_MAX_IN + 1];
    ordo_kernel_args args;
};

static op_memo *memo_table(void) {
    op_memo *m = aligned_alloc(64, (MEMO_SLOTS * sizeof *m + 63) & ~(size_t)63);
    if (!m) return NULL; /* pushes go on without */
    for (int i = 0; i < MEMO_SLOTS; i++) m[i].key = 0;
    if (!tl_kp.registered) arm_exit_flush();
    return tl_memo = m;
}

/* Never 0: nin + 1 > 0 in the low bits.  self0: made by a push whose
 * caller knew in[0] is out (push_small). */
static inline uint32_t memo_key(int kid, int nin, int nscalar, bool self0) {
    return (uint32_t)kid << 9 | (uint32_t)self0 << 8 | (uint32_t)nscalar << 4 | (uint32_t)(nin + 1);
}

static inline op_memo *memo_slot(op_memo *table, int kid, const ordo_tensor *out) {
    return &table[(((uintptr_t)out >> 4) ^ (unsigned)kid) & (MEMO_SLOTS - 1)];
}

static ORDO_ALWAYS_INLINE bool memo_hit(const op_memo *m, int kid, ordo_kernel_fn fn, ordo_tensor *const *in, int nin,
                            const ordo_tensor *out, int nscalar, bool self0) {
    if (m->key != memo_key(kid, nin, nscalar, self0) || m->out != out || m->out_id != out->id || m->fn != fn)
        return false;
    ORDO_UNROLL(ORDO_KERNEL_MAX_IN)
    for (int i = self0 ? 1 : 0; i < nin; i++) /* a NULL input never matches: none is kept */
        if (m->in[i] != in[i] || m->in_id[i] != in[i]->id) return false;
    return true;
}

/* ---- the small-op path ----------------------------------------------------------------- */

/* Most pushes from Lua are elementwise ops on small tensors of one cpu(n):
 * their kernel costs about as much as the push, so the push is kept short.
 * push_small takes exactly the ops that need none of the general path's
 * special cases (a registered CPU kernel, no pinned memory, no output
 * written through a stride of 0, no input that shares memory with the
 * output other than as the very same view, inputs that broadcast) and
 * returns NOT_SMALL, having changed nothing, for every other op: the general
 * path then pushes it, or names what is wrong with it.  self0: the caller
 * knows in[0] is out (an in-place op), so the compiler does too.  Always
 * inline: into ordo_tensor_op2, where nin is 2 and the operand loops unroll. */
static ORDO_ALWAYS_INLINE int push_small(int kid, const char *op, ordo_tensor *const *in, int nin, ordo_tensor *out,
                             const double *scalars, int nscalar, bool self0) {
    if (out->ctx.dev_type != ORDO_CPU) return NOT_SMALL;
    ordo_kernel_fn fn = kernel_fn(kid, ORDO_CPU);
    if (!fn) return NOT_SMALL;
    const ordo_storage *os = out->storage;
    ordo_engine *e = os->engine;

    /* This thread's state, read together (engine_run_now_begin says why).
     * Workers and ops never run an op at its push, nor use the memo: an op
     * pushed from inside a kernel run at its push must not overwrite the
     * arguments that kernel is reading. */
    thread_ops *thread = &tls_thread; /* set while a kernel runs here (push_checked) */
    TLS_PIN(thread);
    const bool may_run_now = !thread->in_op && !tls_worker && e->cfg.run_now_max_elements > 0;
    struct bulk *const bulk = tls_bulk;
    op_memo *table = tl_memo;
    op_memo *m = NULL;
    if (may_run_now && nin <= MEMO_MAX_IN) {
        if (!table) table = memo_table();
        if (table) {
            m = memo_slot(table, kid, out);
            if (memo_hit(m, kid, fn, in, nin, out, nscalar, self0)) {
                for (int i = 0; i < nscalar; i++) m->args.scalar[i] = scalars[i];
                bool now = m->work <= e->cfg.run_now_max_elements && engine_run_now_begin(e, m->uses, m->nuses, bulk);
                return push_checked(kid, op, fn, out, &m->args, m->uses, m->nuses, now, thread);
            }
            m->key = 0; /* filled below, kept only once it is all checked */
        }
    }

    /* The op's vars first, reading the tensors only.  When they are idle
     * their locks are taken before the kernel's arguments are written: a
     * locked instruction waits for every store before it to reach the
     * cache, and the arguments are a few dozen stores. */
    const uint64_t ctx = ctx_word(out->ctx);
    var_use stack_uses[ORDO_KERNEL_MAX_IN + 1], *uses = m ? m->uses : stack_uses;
    int n = 1;
    uses[0] = (var_use){os->var, true};
    int self = self0 ? 0 : -1; /* the first input that is out itself */
    ORDO_UNROLL(ORDO_KERNEL_MAX_IN)
    for (int i = self0 ? 1 : 0; i < nin; i++) {
        const ordo_tensor *t = in[i];
        if (t == out) { /* an in-place op's self: checked as the output */
            if (self < 0) self = i;
            continue;
        }
        if (!t) return NOT_SMALL;
        const ordo_storage *s = t->storage;
        if (s->engine != e || ctx_word(t->ctx) != ctx || (s == os && !same_view(t, out))) return NOT_SMALL;
        ordo_var *var = s->var;
        int j = 0;
        while (j < n && uses[j].v != var) j++;
        if (j == n) uses[n++] = (var_use){var, false};
    }
    bool now = may_run_now && engine_run_now_begin(e, uses, n, bulk);

    /* The kernel's arguments. */
    ordo_kernel_args stack_args, *a = m ? &m->args : &stack_args;
    a->nin = nin;
    a->nout = 1;
    a->nscalar = nscalar;
    a->niparam = 0;
    ordo_view *ov = &a->out[0];
    /* An in-place op's self has the output's view, written with it;
     * without one, out[1] takes it. */
    ordo_view *sv = self >= 0 ? &a->in[self] : &a->out[1];
    const int nd = out->ndim;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) {
        const int64_t k = out->shape[d], st = out->strides[d];
        if (st == 0 && k > 1) goto not_small;
        numel *= k;
        ov->shape[d] = sv->shape[d] = k;
        ov->strides[d] = sv->strides[d] = st;
    }
    /* Empty tensors go the general way: every tensor here has a first element. */
    const int64_t work = numel * (nin + 1);
    if (numel == 0 || work > BULK_MAX_ELEMENTS || may_overlap(out)) goto not_small;
    ov->data = sv->data = first_element(out);
    ov->dtype = sv->dtype = out->dtype;
    ov->ndim = sv->ndim = nd;
    ORDO_UNROLL(ORDO_KERNEL_MAX_IN)
    for (int i = self0 ? 1 : 0; i < nin; i++) {
        const ordo_tensor *t = in[i];
        ordo_view *v = &a->in[i];
        if (v == sv) continue;
        if (t->ndim == nd) { /* the commonest: broadcasting only through dims of 1 */
            for (int d = 0; d < nd; d++) {
                const int64_t k = t->shape[d];
                if (k == ov->shape[d]) v->strides[d] = t->strides[d];
                else if (k == 1) v->strides[d] = 0;
                else goto not_small; /* the general path names the shapes */
                v->shape[d] = ov->shape[d];
            }
        } else {
            if (!bcast_strides(t, out, v->strides)) goto not_small;
            for (int d = 0; d < nd; d++) v->shape[d] = ov->shape[d];
        }
        v->data = first_element(t);
        v->dtype = t->dtype;
        v->ndim = nd;
    }
    for (int i = 0; i < nscalar; i++) a->scalar[i] = scalars[i];
    if (m) { /* all checked: kept for the next push of this op */
        m->nuses = n;
        m->out = out;
        m->out_id = out->id;
        for (int i = 0; i < nin; i++) {
            m->in[i] = in[i];
            m->in_id[i] = in[i]->id;
        }
        m->fn = fn;
        m->work = work;
        m->key = memo_key(kid, nin, nscalar, self0);
    }
    if (now && work > e->cfg.run_now_max_elements) {
        engine_run_now_unlock(uses, n);
        now = false;
    }
    return push_checked(kid, op, fn, out, a, uses, n, now, thread);

not_small:
    if (now) engine_run_now_unlock(uses, n);
    return NOT_SMALL;
}

static atomic_int kid_copy = -1;

/* Every push the small-op path did not take: checks it all and names what
 * is wrong.  kid is valid and op named. */
static int push_general(int kid, const char *op, int flags, ordo_tensor *const *in, int nin,
                        ordo_tensor *const *out, int nout, const double *scalars, int nscalar,
                        const int64_t *iparams, int niparam) {
    char b1[32], b2[32];
    if (nin < 0 || nin > ORDO_KERNEL_MAX_IN || nout < 0 || nout > ORDO_KERNEL_MAX_OUT || nscalar < 0 ||
        nscalar > ORDO_KERNEL_MAX_SCALARS || niparam < 0 || niparam > ORDO_KERNEL_MAX_IPARAMS)
        return tensor_set_error("%s: %d inputs, %d outputs, %d scalars, %d iparams (at most %d, %d, %d, %d)", op, nin,
                                nout, nscalar, niparam, ORDO_KERNEL_MAX_IN, ORDO_KERNEL_MAX_OUT,
                                ORDO_KERNEL_MAX_SCALARS, ORDO_KERNEL_MAX_IPARAMS);
    if ((nin && !in) || (nout && !out) || (nscalar && !scalars) || (niparam && !iparams))
        return tensor_set_error("%s: NULL argument array", op);
    if ((flags & ORDO_TP_BROADCAST) && nout == 0) return tensor_set_error("%s: broadcasting needs an output", op);
    const ordo_tensor *ref = nout ? out[0] : nin ? in[0] : NULL;
    if (!ref) return nout + nin ? tensor_set_error("%s: %s 1 is NULL", op, nout ? "output" : "input")
                                : tensor_set_error("%s: no tensors", op);
    if ((flags & ORDO_TP_CROSS_DEVICE) && nin == 1 && nout == 1 && in[0] && out[0] &&
        !same_device(in[0]->ctx, out[0]->ctx) &&
        (in[0]->ctx.dev_type == ORDO_GPU || out[0]->ctx.dev_type == ORDO_GPU)) {
        if (kid_copy < 0) kid_copy = ordo_tensor_kernel_id("copy");
        if (kid == kid_copy)
            return check_writable(op, out[0]) ? ORDO_ERR_INVALID : tensor_copy_across(kid, op, flags, out[0], in[0]);
    }
    for (int i = 0; i < nin + nout; i++) {
        const ordo_tensor *t = i < nin ? in[i] : out[i - nin];
        if (!t) return tensor_set_error("%s: %s %d is NULL", op, i < nin ? "input" : "output", i < nin ? i + 1 : i - nin + 1);
        if (t->storage->engine != ref->storage->engine)
            return tensor_set_error("%s: the tensors belong to different engines", op);
        if (!same_device(t->ctx, ref->ctx) &&
            !((flags & ORDO_TP_CROSS_DEVICE) && t->ctx.dev_type != ORDO_GPU && ref->ctx.dev_type != ORDO_GPU))
            return tensor_set_error("%s: expected all tensors on one device, got %s and %s", op, dev_str(ref->ctx, b1),
                                    dev_str(t->ctx, b2));
    }
    for (int i = 0; i < nout; i++)
        if (check_writable(op, out[i])) return ORDO_ERR_INVALID;
    if ((flags & ORDO_TP_SAME_DTYPE) && nin > 1)
        for (int i = 1; i < nin; i++)
            if (in[i]->dtype != in[0]->dtype)
                return tensor_set_error("%s: expected inputs of one dtype, got %s and %s", op,
                                        ordo_dtype_name(in[0]->dtype), ordo_dtype_name(in[i]->dtype));

    int dev_type = ref->ctx.dev_type == ORDO_GPU ? ORDO_GPU : ORDO_CPU;
    /* The simulated GPU's memory is host memory: it runs the CPU kernels,
     * on its streams (run_kernel_sim). */
    int simulated = dev_type == ORDO_GPU && device_simulated();
    ordo_kernel_fn fn = kernel_fn(kid, simulated ? ORDO_CPU : dev_type);
    if (!fn && dev_type == ORDO_GPU && kernel_fn(kid, ORDO_CPU))
        return tensor_set_error("%s: kernel '%s' is not implemented for gpu", op, knames[kid]);
    if (!fn)
        return tensor_set_error("%s: no kernel '%s' registered for %s", op, knames[kid],
                                dev_type == ORDO_GPU ? "gpu" : "cpu");

    ordo_kernel_args args, *a = &args;
    a->nin = nin;
    a->nout = nout;
    a->nscalar = nscalar;
    a->niparam = niparam;

    /* Views first: a shape error must push nothing. */
    for (int i = 0; i < nin; i++) {
        if (flags & ORDO_TP_BROADCAST) {
            if (bcast_view(op, in[i], out[0], &a->in[i])) return ORDO_ERR_INVALID;
        } else {
            tensor_to_view(in[i], &a->in[i]);
        }
    }
    for (int i = 0; i < nout; i++) tensor_to_view(out[i], &a->out[i]);
    for (int i = 0; i < nscalar; i++) a->scalar[i] = scalars[i];
    for (int i = 0; i < niparam; i++) a->iparam[i] = iparams[i];

    /* Inputs that alias an output through another view are read from a copy. */
    ordo_tensor *tmp[ORDO_KERNEL_MAX_IN];
    const ordo_tensor *src[ORDO_KERNEL_MAX_IN];
    kparam *p = NULL;
    int ntmp = 0, rc = ORDO_OK;
    for (int i = 0; i < nin; i++) {
        src[i] = in[i];
        for (int j = 0; j < nout; j++) {
            if (!hazard(in[i], out[j], (flags & ORDO_TP_BROADCAST) != 0)) continue;
            if (kid_copy < 0) kid_copy = ordo_tensor_kernel_id("copy");
            ordo_tensor *t = ordo_tensor_empty(in[i]->storage->engine, in[i]->dtype, in[i]->ndim, in[i]->shape,
                                               tensor_result_ctx(in[i]->ctx));
            ordo_tensor *x = in[i];
            if (!t || (rc = ordo_tensor_push(kid_copy, op, 0, &x, 1, &t, 1, NULL, 0, NULL, 0)) != ORDO_OK) {
                if (!rc) rc = ordo_tensor_error_code();
                ordo_tensor_free(t);
                goto fail;
            }
            tmp[ntmp++] = t;
            src[i] = t;
            if (flags & ORDO_TP_BROADCAST) bcast_view(op, t, out[0], &a->in[i]);
            else tensor_to_view(t, &a->in[i]);
            break;
        }
    }

    ordo_var *reads[ORDO_KERNEL_MAX_IN], *writes[ORDO_KERNEL_MAX_OUT];
    int nr = 0;
    for (int i = 0; i < nin; i++) {
        ordo_var *v = src[i]->storage->var;
        int dup = 0;
        for (int k = 0; k < nr; k++) dup |= reads[k] == v;
        if (!dup) reads[nr++] = v;
    }
    for (int i = 0; i < nout; i++) writes[i] = out[i]->storage->var;
    ordo_ctx ctx = ref->ctx;
    if (ctx.dev_type == ORDO_CPU_PINNED) ctx.dev_type = ORDO_CPU;
    if (!(p = kp_get())) {
        rc = ORDO_ERR_NOMEM;
        goto fail;
    }
    kp_pack(p, fn, a);
    rc = ordo_push_sync(ref->storage->engine,
                        !simulated ? run_kernel : sim_kernel_checked(kid, a) ? run_kernel_sim_checked : run_kernel_sim,
                        p, kp_put, ctx, reads, nr,
                        writes, nout, ORDO_PROP_NORMAL | (small_op(a, dev_type) ? ORDO_PROP_BULK : 0), 0,
                        (flags & ORDO_TP_NAMED) ? op : knames[kid]);
    if (rc != ORDO_OK) {
        tensor_set_error_code(rc, "%s: %s", op, ordo_last_error());
        goto fail;
    }
    for (int i = 0; i < nout; i++) __atomic_add_fetch(&out[i]->storage->writes, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < ntmp; i++) ordo_tensor_free(tmp[i]);
    return ORDO_OK;
fail:
    if (p) kp_put(p);
    for (int i = 0; i < ntmp; i++) ordo_tensor_free(tmp[i]);
    return rc ? rc : ORDO_ERR_INVALID;
}

int ordo_tensor_push(int kid, const char *op, int flags, ordo_tensor *const *in, int nin, ordo_tensor *const *out,
                     int nout, const double *scalars, int nscalar, const int64_t *iparams, int niparam) {
    if (!op) op = kid_valid(kid) ? knames[kid] : "push";
    if (!kid_valid(kid)) return tensor_set_error("%s: unknown kernel id %d", op, kid);
    if (flags == ORDO_TP_BROADCAST && nout == 1 && out && out[0] && nin >= 0 && nin <= ORDO_KERNEL_MAX_IN &&
        (!nin || in) && nscalar >= 0 && nscalar <= ORDO_KERNEL_MAX_SCALARS && (!nscalar || scalars) && niparam == 0) {
        int rc = push_small(kid, op, in, nin, out[0], scalars, nscalar, false);
        if (rc != NOT_SMALL) return rc;
    }
    return push_general(kid, op, flags, in, nin, out, nout, scalars, nscalar, iparams, niparam);
}

int ordo_tensor_op1(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, double s0) {
    return ordo_tensor_push(kid, op, ORDO_TP_BROADCAST, &a, a ? 1 : 0, &out, 1, &s0, 1, NULL, 0);
}

int ordo_tensor_op2(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b) {
    ordo_tensor *in[2] = {a, b};
    /* The commonest push from Lua (c:add_(a) and the like): push_small with
     * its operand count known, so that its loops unroll. */
    if (kid_valid(kid) && op && out && a && b) {
        /* c:add_(x) and every in-place op: its self known at compile time */
        int rc = out == a ? push_small(kid, op, in, 2, out, NULL, 0, true) : push_small(kid, op, in, 2, out, NULL, 0, false);
        return rc != NOT_SMALL ? rc : push_general(kid, op, ORDO_TP_BROADCAST, in, 2, &out, 1, NULL, 0, NULL, 0);
    }
    return ordo_tensor_push(kid, op, ORDO_TP_BROADCAST, in, 2, &out, 1, NULL, 0, NULL, 0);
}

int ordo_tensor_op3(int kid, const char *op, ordo_tensor *out, ordo_tensor *a, ordo_tensor *b, ordo_tensor *c) {
    ordo_tensor *in[3] = {a, b, c};
    return ordo_tensor_push(kid, op, ORDO_TP_BROADCAST, in, 3, &out, 1, NULL, 0, NULL, 0);
}

ordo_tensor *ordo_tensor_binary(int kid, const char *op, ordo_tensor *a, ordo_tensor *b, int out_dtype) {
    int64_t shape[ORDO_MAX_DIMS];
    if (!op) op = kid_valid(kid) ? knames[kid] : "binary"; /* as ordo_tensor_push names it */
    if (!a || !b) {
        tensor_set_error("%s: NULL tensor", op);
        return NULL;
    }
    int n = ordo_tensor_broadcast_shape(op, a, b, shape);
    if (n < 0) return NULL;
    ordo_tensor *out = ordo_tensor_empty(a->storage->engine, out_dtype, n, shape, tensor_result_ctx(a->ctx));
    if (!out) return NULL;
    if (ordo_tensor_op2(kid, op, out, a, b) != ORDO_OK) {
        ordo_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- waits, profiler ---------------------------------------------------------------------- */

int ordo_tensor_wait(const ordo_tensor *t) {
    if (!t) return tensor_set_error("wait: tensor is NULL");
    int rc = engine_wait_for_data(t->storage->engine, t->storage->var);
    if (rc) tensor_set_error_code(rc, "%s", ordo_last_error());
    return rc;
}

void ordo_tensor_host_written(const ordo_tensor *t) {
    if (t) var_host_written(t->storage->var);
}

char *ordo_tensor_profiler_summary(ordo_engine *e) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    ordo_profiler_summary(e ? e : ordo_engine_default(), f);
    fclose(f);
    return buf;
}

void ordo_tensor_free_str(char *s) { free(s); }

size_t ordo_tensor_sizeof(const char *type_name) {
    static const struct {
        const char *name;
        size_t size;
    } t[] = {
        {"ordo_engine_config", sizeof(ordo_engine_config)}, {"ordo_tensor", sizeof(ordo_tensor)},
        {"ordo_storage", sizeof(ordo_storage)},             {"ordo_view", sizeof(ordo_view)},
        {"ordo_kernel_args", sizeof(ordo_kernel_args)},     {"ordo_ctx", sizeof(ordo_ctx)},
        {"ordo_run_ctx", sizeof(ordo_run_ctx)},             {"ordo_gpu_memory_stats", sizeof(ordo_gpu_memory_stats)},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (type_name && !strcmp(t[i].name, type_name)) return t[i].size;
    return 0;
}
