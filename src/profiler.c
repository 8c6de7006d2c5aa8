/*
 * profiler.c - per-op timing, Chrome trace output and a summary table.
 *
 * Each worker records into its own buffer, so profiling adds no shared lock
 * to the hot path; ops that run on other threads (pushers, async
 * completions) share one buffer.  A buffer's spin lock is only contended
 * while a dump or summary reads it.
 *
 * GPU ops: the host side of a GPU op is its launch (its function queues
 * work on a stream and returns), so while profiling each GPU op (copies
 * too) also records a pair of timing events on its stream, one before its
 * function runs and one after (sched.c).  They are read only by a dump or
 * a summary, which may wait for the GPU; the hot path never does.  Device
 * time becomes host time through a reference event per device, recorded
 * once per profiling session by the first GPU op there (on an idle stream
 * of its own), which waits for it and notes now_ns(): an op's GPU start on
 * the host's timeline is t_ref + elapsed(ref, start).  (CUDA gives elapsed
 * times as float milliseconds, which lose precision over long spans, hence
 * a fresh reference per session rather than one forever.)
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#define PROF_FIRST_EVENTS 4096 /* a record buffer's first block, kept by clear */
/* Timing event pairs per device held by ops and by records not read yet;
 * past it GPU ops are recorded without their GPU side (each pair is two
 * driver objects until a dump or summary reads it). */
#define PROF_GPU_MAX_LIVE (1L << 17)
#define PROF_GPU_MAX_FREE 1024 /* pairs kept for reuse per device */
/* Trace tracks of GPU-side work: tid = this + the worker's host tid. */
#define PROF_GPU_TID 100000
/* Overlapping records of one buffer go on extra tracks ("lanes"): a
 * Chrome trace needs the events of a track to nest.  Lane k > 0 of the
 * track of a worker's tid w + 1 (0 to ORDO_MAX_WORKERS) has tid
 * PROF_LANE_TID + k * 4096 + w + 1, + 2048 for GPU-side tracks: small
 * enough for viewers that keep 32-bit tids up to half a million lanes. */
#define PROF_LANE_TID 1000000

typedef struct prof_ref {
    void *ev;        /* a timing event, recorded once */
    uint64_t t_host; /* now_ns() once the host saw it complete */
    int refs;        /* the device's current pointer + each pair; under the device's lock */
} prof_ref;

typedef struct prof_timer {
    struct prof_timer *next; /* free list; a list being released */
    void *start, *end;       /* timing events */
    prof_ref *ref;           /* while held */
    int dev;
    bool ended;              /* end recorded */
} prof_timer;

typedef struct prof_event {
    const char *name; /* interned */
    uint64_t t_ready, t_start, t_end;
    ordo_ctx dev;
    int worker;
    int status; /* 0 ok, 1 skipped (failed input), 2 failed */
    int gpu_state; /* 0 no GPU side, 1 timing events not read yet (gpu), 2 read */
    prof_timer *gpu;
    int64_t gpu_start; /* host timeline, ns */
    uint64_t gpu_dur;
} prof_event;

struct prof_buf {
    prof_buf *next_all;
    spin_lock lock;
    int worker_id;
    char label[64];
    prof_event *ev;
    size_t n, cap, dropped;
    uint64_t t_full; /* when the first record was dropped (dropped > 0) */
    ordo_ctx full_dev;
};

prof_buf *prof_buf_new(ordo_engine *e, int worker_id, ordo_ctx dev, const char *label) {
    (void)dev;
    prof_buf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->worker_id = worker_id;
    snprintf(b->label, sizeof b->label, "%s", label);
    pthread_mutex_lock(&e->prof_mu);
    b->next_all = e->prof_bufs;
    e->prof_bufs = b;
    pthread_mutex_unlock(&e->prof_mu);
    return b;
}

/* ---- GPU-side timing ------------------------------------------------------ */

/* Drops one reference to r; the event goes with the last one. */
static void ref_release(ordo_engine *e, int dev, prof_ref *r) {
    if (!r) return;
    prof_gpu_dev *g = &e->prof_gpu[dev];
    spin_lock_acquire(&g->lock);
    bool last = --r->refs == 0;
    spin_lock_release(&g->lock);
    if (last) {
        ordo_device_backend()->event_destroy(dev, r->ev);
        free(r);
    }
}

/* Records a reference on a stream of its own, idle, so the wait is short
 * and does not hold the op behind the work queued on its stream; NULL when
 * a call fails.  The host sees the event complete after the device reached
 * it, so times placed from it may come late by the wait's latency, never
 * early: an op's GPU side never starts before its launch. */
static prof_ref *ref_new(const device_backend *B, int dev) {
    char err[256];
    double ns;
    void *stream = NULL;
    prof_ref *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (B->stream_create(dev, &stream, err, sizeof err)) {
        free(r);
        return NULL;
    }
    bool ok = !B->timer_create(dev, &r->ev, err, sizeof err);
    /* elapsed(ref, ref) is a wait that leaves the device's errors alone */
    if (ok && (B->event_record(dev, r->ev, stream, err, sizeof err) ||
               B->event_elapsed_ns(dev, r->ev, r->ev, &ns, err, sizeof err))) {
        B->event_destroy(dev, r->ev);
        ok = false;
    }
    r->t_host = now_ns();
    B->stream_destroy(dev, stream);
    if (!ok) {
        free(r);
        return NULL;
    }
    r->refs = 1; /* the device's pointer */
    return r;
}

static void timer_destroy(const device_backend *B, prof_timer *t) {
    if (t->start) B->event_destroy(t->dev, t->start);
    if (t->end) B->event_destroy(t->dev, t->end);
    free(t);
}

/* A pair goes back for reuse (or is destroyed past PROF_GPU_MAX_FREE) and
 * lets go of its reference; dropped counts a GPU side that was lost. */
static void timer_release(ordo_engine *e, prof_timer *t, bool dropped) {
    int dev = t->dev;
    prof_gpu_dev *g = &e->prof_gpu[dev];
    prof_ref *r = t->ref;
    t->ref = NULL;
    t->ended = false;
    spin_lock_acquire(&g->lock);
    g->live--;
    if (dropped) g->dropped++;
    bool keep = g->nfree < PROF_GPU_MAX_FREE;
    if (keep) {
        t->next = g->free;
        g->free = t;
        g->nfree++;
    }
    spin_lock_release(&g->lock); /* t may be someone else's from here if kept */
    ref_release(e, dev, r);
    if (!keep) timer_destroy(ordo_device_backend(), t);
}

void prof_gpu_begin(ordo_engine *e, op *o) {
    const device_backend *B = ordo_device_backend();
    int dev = o->ctx.dev_id;
    prof_gpu_dev *g = &e->prof_gpu[dev];
    char err[256];
    spin_lock_acquire(&g->lock);
    /* The first GPU op of the session makes the reference while holding
     * the lock: the device's other workers wait for it (once), so that
     * every start they record comes after it. */
    if (!g->ref && g->live < PROF_GPU_MAX_LIVE) g->ref = ref_new(B, dev);
    prof_ref *r = g->ref;
    if (!r || g->live >= PROF_GPU_MAX_LIVE) {
        g->dropped++;
        spin_lock_release(&g->lock);
        return;
    }
    r->refs++;
    g->live++;
    prof_timer *t = g->free;
    if (t) {
        g->free = t->next;
        g->nfree--;
    }
    spin_lock_release(&g->lock);
    if (!t && (t = calloc(1, sizeof *t))) {
        t->dev = dev;
        if (B->timer_create(dev, &t->start, err, sizeof err) || B->timer_create(dev, &t->end, err, sizeof err)) {
            timer_destroy(B, t);
            t = NULL;
        }
    }
    if (t) t->ref = r;
    if (!t || B->event_record(dev, t->start, o->stream, err, sizeof err)) {
        if (t) {
            timer_release(e, t, true);
        } else {
            spin_lock_acquire(&g->lock);
            g->live--;
            g->dropped++;
            spin_lock_release(&g->lock);
            ref_release(e, dev, r);
        }
        return;
    }
    o->prof_gpu = t;
}

void prof_gpu_end(ordo_engine *e, op *o) {
    prof_timer *t = o->prof_gpu;
    char err[256];
    if (ordo_device_backend()->event_record(t->dev, t->end, o->stream, err, sizeof err)) {
        o->prof_gpu = NULL;
        timer_release(e, t, true);
        return;
    }
    t->ended = true;
}

void prof_gpu_drop(ordo_engine *e, op *o) {
    timer_release(e, o->prof_gpu, false);
    o->prof_gpu = NULL;
}

/* Next GPU op on each device makes a new reference (ordo_profiler_start
 * and clear, under prof_mu). */
static void prof_gpu_new_session(ordo_engine *e) {
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        prof_gpu_dev *g = &e->prof_gpu[d];
        spin_lock_acquire(&g->lock);
        prof_ref *r = g->ref;
        g->ref = NULL;
        spin_lock_release(&g->lock);
        ref_release(e, d, r);
    }
}

typedef struct gpu_read {
    size_t i;
    prof_timer *t;
    int64_t start;
    uint64_t dur;
    bool ok;
} gpu_read;

/* Reads the timing events of the records not read yet and gives their
 * pairs back.  Under prof_mu (so no clear runs meanwhile and indices stay);
 * the reads may wait for the GPU, so no buffer lock is held then. */
static void prof_gpu_read_all(ordo_engine *e) {
    for (prof_buf *b = e->prof_bufs; b; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        size_t n = 0;
        for (size_t i = 0; i < b->n; i++) n += b->ev[i].gpu_state == 1;
        gpu_read *rd = n ? malloc(n * sizeof *rd) : NULL;
        if (rd) {
            n = 0;
            for (size_t i = 0; i < b->n; i++)
                if (b->ev[i].gpu_state == 1) rd[n++] = (gpu_read){.i = i, .t = b->ev[i].gpu};
        }
        spin_lock_release(&b->lock);
        if (!rd) continue; /* none, or out of memory: read at the next dump */
        const device_backend *B = ordo_device_backend();
        char err[256];
        for (size_t k = 0; k < n; k++) {
            prof_timer *t = rd[k].t;
            double a, d;
            rd[k].ok = !B->event_elapsed_ns(t->dev, t->ref->ev, t->start, &a, err, sizeof err) &&
                       !B->event_elapsed_ns(t->dev, t->start, t->end, &d, err, sizeof err) && d >= 0;
            if (rd[k].ok) {
                rd[k].start = (int64_t)t->ref->t_host + (int64_t)a;
                rd[k].dur = (uint64_t)d;
            }
        }
        spin_lock_acquire(&b->lock);
        for (size_t k = 0; k < n; k++) {
            prof_event *x = &b->ev[rd[k].i];
            x->gpu = NULL;
            x->gpu_state = rd[k].ok ? 2 : 0;
            x->gpu_start = rd[k].start;
            x->gpu_dur = rd[k].dur;
        }
        spin_lock_release(&b->lock);
        for (size_t k = 0; k < n; k++) timer_release(e, rd[k].t, !rd[k].ok);
        free(rd);
    }
}

/* Takes the unread pairs out of b's records as a list (b locked). */
static prof_timer *take_timers_locked(prof_buf *b) {
    prof_timer *list = NULL;
    for (size_t i = 0; i < b->n; i++) {
        prof_event *x = &b->ev[i];
        if (x->gpu_state != 1) continue;
        x->gpu->next = list;
        list = x->gpu;
        x->gpu = NULL;
        x->gpu_state = 0;
    }
    return list;
}

static void release_list(ordo_engine *e, prof_timer *list) {
    for (prof_timer *t = list, *next; t; t = next) {
        next = t->next;
        timer_release(e, t, false);
    }
}

/* ---- records ------------------------------------------------------------- */

void prof_record(ordo_engine *e, worker *w, op *o, uint64_t t_end, int status) {
    prof_buf *b = w ? w->prof : e->prof_shared;
    prof_timer *t = o->prof_gpu;
    o->prof_gpu = NULL;
    if (!o->t_start) { /* it started before the profiler did: its time is not known (a record of
                        * 0 us at its end would be a wrong one) */
        if (t) timer_release(e, t, false);
        return;
    }
    if (t && !t->ended) { /* its work was never queued behind the end */
        timer_release(e, t, true);
        t = NULL;
    }
    if (!b) {
        if (t) timer_release(e, t, true);
        return;
    }
    spin_lock_acquire(&b->lock);
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : PROF_FIRST_EVENTS;
        if (cap > e->prof_max_events) cap = e->prof_max_events;
        prof_event *ev = cap > b->cap ? realloc(b->ev, cap * sizeof *ev) : NULL;
        if (!ev) {
            if (!b->dropped++) {
                b->t_full = t_end;
                b->full_dev = o->ctx;
            }
            spin_lock_release(&b->lock);
            if (t) timer_release(e, t, true);
            return;
        }
        b->ev = ev;
        b->cap = cap;
    }
    prof_event *x = &b->ev[b->n++];
    x->name = o->name;
    x->t_start = o->t_start;
    x->t_ready = o->t_ready ? o->t_ready : x->t_start;
    x->t_end = t_end;
    x->dev = o->ctx;
    x->worker = w ? w->id : -1;
    x->status = status;
    x->gpu_state = t ? 1 : 0;
    x->gpu = t;
    spin_lock_release(&b->lock);
}

/* At engine destroy: every op has finished and the GPUs are idle. */
void prof_free_all(ordo_engine *e) {
    for (prof_buf *b = e->prof_bufs, *next; b; b = next) {
        next = b->next_all;
        release_list(e, take_timers_locked(b));
        free(b->ev);
        free(b);
    }
    e->prof_bufs = NULL;
    prof_gpu_new_session(e); /* the references go */
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        prof_gpu_dev *g = &e->prof_gpu[d];
        for (prof_timer *t = g->free, *next; t; t = next) {
            next = t->next;
            timer_destroy(ordo_device_backend(), t);
        }
        g->free = NULL;
        g->nfree = 0;
    }
}

int ordo_profiler_start(ordo_engine *e) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_start: engine is NULL");
    bulk_flush_mine(); /* ops pushed before the start are not profiled one by one */
    pthread_mutex_lock(&e->prof_mu);
    if (!e->prof_t0) e->prof_t0 = now_ns();
    if (!atomic_load(&e->profiling)) prof_gpu_new_session(e);
    pthread_mutex_unlock(&e->prof_mu);
    atomic_store(&e->profiling, 1);
    return ORDO_OK;
}

int ordo_profiler_stop(ordo_engine *e) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_stop: engine is NULL");
    bulk_flush_mine();
    atomic_store(&e->profiling, 0);
    return ORDO_OK;
}

void ordo_profiler_clear(ordo_engine *e) {
    if (!e) {
        set_error(ORDO_ERR_INVALID, "ordo_profiler_clear: engine is NULL");
        return;
    }
    pthread_mutex_lock(&e->prof_mu);
    for (prof_buf *b = e->prof_bufs; b; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        prof_timer *unread = take_timers_locked(b);
        b->n = 0;
        b->dropped = 0;
        /* a long session's records (up to PROF_MAX_EVENTS of them,
         * hundreds of MB per worker) go back to the system; a buffer grown
         * no further than its first block keeps it */
        prof_event *ev = NULL;
        if (b->cap > PROF_FIRST_EVENTS) {
            ev = b->ev;
            b->ev = NULL;
            b->cap = 0;
        }
        spin_lock_release(&b->lock);
        free(ev);
        release_list(e, unread);
    }
    prof_gpu_new_session(e);
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        spin_lock_acquire(&e->prof_gpu[d].lock);
        e->prof_gpu[d].dropped = 0;
        spin_lock_release(&e->prof_gpu[d].lock);
    }
    e->prof_t0 = atomic_load(&e->profiling) ? now_ns() : 0;
    pthread_mutex_unlock(&e->prof_mu);
}

/* The length of the well-formed UTF-8 sequence at s (1 to 4 bytes), or 0
 * when the bytes there are not one: a stray continuation byte, a sequence
 * cut short (a name cut at ORDO_NAME_MAX - 1 bytes may end in one), an
 * overlong form, a surrogate, or past U+10FFFF (RFC 3629). */
static int utf8_len(const unsigned char *s) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0; /* stops at the terminating NUL too */
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) || (c == 0xF0 && s[1] < 0x90) ||
        (c == 0xF4 && s[1] >= 0x90))
        return 0;
    return n;
}

/* A name as text both outputs can hold: well-formed UTF-8 as it is, any
 * other byte as the four characters \xHH (so the bytes stay visible:
 * U+FFFD would hide which they were), control characters as \n, \t, \r
 * or \xHH (one row per name in the summary).  Writes at most n - 1
 * characters and the NUL; returns the number of characters (columns) it
 * takes, for padding. */
static int printable_name(char *out, size_t n, const char *name) {
    size_t k = 0;
    int cols = 0;
    for (const unsigned char *s = (const unsigned char *)name; *s;) {
        char esc[8];
        const char *piece = esc;
        size_t len;
        int l = utf8_len(s);
        if (l > 1 || (l == 1 && *s >= 0x20 && *s != 0x7f)) {
            piece = (const char *)s;
            len = (size_t)l;
        } else {
            const char *named = *s == '\n' ? "\\n" : *s == '\t' ? "\\t" : *s == '\r' ? "\\r" : NULL;
            if (named) len = (size_t)snprintf(esc, sizeof esc, "%s", named);
            else len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *s);
            l = 1;
        }
        if (k + len >= n) break;
        memcpy(out + k, piece, len);
        k += len;
        cols += piece == esc ? (int)len : 1;
        s += l;
    }
    out[k] = '\0';
    return cols;
}

/* A JSON string (RFC 8259): quotes, backslashes and control characters
 * escaped, well-formed UTF-8 as it is, and any other byte as the text
 * \xHH (JSON strings hold characters, not bytes; U+FFFD would hide which
 * byte it was).  One raw invalid byte makes the whole trace unreadable to
 * every viewer. */
static void json_string(FILE *f, const char *str) {
    fputc('"', f);
    for (const unsigned char *s = (const unsigned char *)str; *s;) {
        int l = utf8_len(s);
        if (l == 0) {
            fprintf(f, "\\\\x%02x", *s); /* JSON for a backslash, then xHH */
            l = 1;
        } else if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if (*s == '\n' || *s == '\t') {
            fputs(*s == '\n' ? "\\n" : "\\t", f);
        } else if (*s < 0x20) {
            fprintf(f, "\\u%04x", *s);
        } else {
            fwrite(s, 1, (size_t)l, f);
        }
        s += l;
    }
    fputc('"', f);
}

/* Trace rows: one "process" per device, one "thread" per worker; on a GPU
 * also one per worker's stream (PROF_GPU_TID + the worker's), where the
 * GPU-side times of its ops go.  Records of one buffer that overlap
 * without nesting (the shared buffer's, from many threads; async ops,
 * which finish on another thread than the one that started them) go on
 * more tracks of that row, its lanes (PROF_LANE_TID). */
static int dev_pid(ordo_ctx d) { return d.dev_type == ORDO_GPU ? 1000 + d.dev_id : d.dev_id; }

static const char *dev_label(ordo_ctx d, char *buf, size_t n) {
    snprintf(buf, n, "%s(%d)", d.dev_type == ORDO_GPU ? "gpu" : d.dev_type == ORDO_CPU_PINNED ? "cpu_pinned" : "cpu",
             d.dev_id);
    return buf;
}

/* A record's interval on the trace's timeline, in ns from t0 (an op that
 * started before a clear is cut there): its host side, or its GPU side. */
static void span_of(const prof_event *x, uint64_t t0, bool gpu, uint64_t *s, uint64_t *t) {
    if (gpu) {
        int64_t g = x->gpu_start - (int64_t)t0;
        *s = g > 0 ? (uint64_t)g : 0;
        *t = *s + x->gpu_dur;
    } else {
        *s = x->t_start > t0 ? x->t_start - t0 : 0;
        *t = x->t_end > t0 ? x->t_end - t0 : 0;
        if (*t < *s) *t = *s;
    }
}

typedef struct {
    const prof_event *ev;
    uint64_t t0;
    bool gpu;
} span_order;

/* By device, then start, the longer first (an event before those it
 * contains), then record order. */
static int span_cmp(const void *a, const void *b, void *arg) {
    const span_order *c = arg;
    const prof_event *x = &c->ev[*(const uint32_t *)a], *y = &c->ev[*(const uint32_t *)b];
    int px = dev_pid(x->dev), py = dev_pid(y->dev);
    if (px != py) return px < py ? -1 : 1;
    uint64_t xs, xt, ys, yt;
    span_of(x, c->t0, c->gpu, &xs, &xt);
    span_of(y, c->t0, c->gpu, &ys, &yt);
    if (xs != ys) return xs < ys ? -1 : 1;
    if (xt != yt) return xt > yt ? -1 : 1;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* A lane: the ends of its open events, outermost first. */
typedef struct {
    uint64_t *end;
    size_t n, cap;
    bool named;
} prof_lane;

typedef struct {
    prof_lane *l;
    size_t n, cap;
} prof_lanes;

static void lanes_reset(prof_lanes *ls) {
    for (size_t k = 0; k < ls->n; k++) {
        ls->l[k].n = 0;
        ls->l[k].named = false;
    }
}

static void lanes_free(prof_lanes *ls) {
    for (size_t k = 0; k < ls->cap; k++) free(ls->l[k].end);
    free(ls->l);
}

/* The lane an event [s, t] goes on, taken in start order: the first whose
 * open events have all ended by s, or (nest) whose innermost open event
 * contains it; -1 when out of memory. */
static long lane_place(prof_lanes *ls, uint64_t s, uint64_t t, bool nest) {
    size_t k = 0;
    for (; k < ls->n; k++) {
        prof_lane *l = &ls->l[k];
        while (l->n && l->end[l->n - 1] <= s) l->n--;
        if (!l->n || (nest && t <= l->end[l->n - 1])) break;
    }
    if (k == ls->n) {
        if (ls->n == ls->cap) {
            size_t cap = ls->cap ? ls->cap * 2 : 4;
            prof_lane *g = realloc(ls->l, cap * sizeof *g);
            if (!g) return -1;
            memset(g + ls->cap, 0, (cap - ls->cap) * sizeof *g);
            ls->l = g;
            ls->cap = cap;
        }
        ls->n++;
    }
    prof_lane *l = &ls->l[k];
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        uint64_t *g = realloc(l->end, cap * sizeof *g);
        if (!g) return -1;
        l->end = g;
        l->cap = cap;
    }
    l->end[l->n++] = t;
    return (long)k;
}

typedef struct {
    FILE *f;
    bool first;
    bool named_dev[2][ORDO_MAX_DEVICES];
} dump_state;

/* The row of device d, named once per dump. */
static void name_process(dump_state *st, ordo_ctx d) {
    int gi = d.dev_type == ORDO_GPU;
    int di = d.dev_id >= 0 && d.dev_id < ORDO_MAX_DEVICES ? d.dev_id : 0;
    char dl[32];
    if (st->named_dev[gi][di]) return;
    st->named_dev[gi][di] = true;
    fprintf(st->f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"%s\"}}",
            st->first ? "" : ",\n", dev_pid(d), dev_label(d, dl, sizeof dl));
    st->first = false;
}

/* One buffer's records (b locked), the host sides or the GPU sides, each
 * on the first lane of its row where it fits; false when out of memory. */
static bool dump_buf(dump_state *st, prof_buf *b, uint64_t t0, bool gpu, prof_lanes *ls) {
    FILE *f = st->f;
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) n += !gpu || b->ev[i].gpu_state == 2;
    if (!n) return true;
    uint32_t *order = malloc(n * sizeof *order);
    if (!order) return false;
    n = 0;
    for (size_t i = 0; i < b->n; i++)
        if (!gpu || b->ev[i].gpu_state == 2) order[n++] = (uint32_t)i;
    span_order c = {b->ev, t0, gpu};
    qsort_r(order, n, sizeof *order, span_cmp, &c);
    /* the host sides of a worker's ops nest (an op run inline inside
     * another); other threads' records and a stream's work do not */
    bool nest = !gpu && b->worker_id >= 0;
    int pid = -1;
    for (size_t j = 0; j < n; j++) {
        const prof_event *x = &b->ev[order[j]];
        char dl[32], tl[160];
        if (dev_pid(x->dev) != pid) { /* a row's lanes are its own */
            pid = dev_pid(x->dev);
            lanes_reset(ls);
            name_process(st, x->dev);
        }
        uint64_t s, t;
        span_of(x, t0, gpu, &s, &t);
        long k = lane_place(ls, s, t, nest);
        if (k < 0) {
            free(order);
            return false;
        }
        long tid = k == 0 ? (gpu ? PROF_GPU_TID : 0) + b->worker_id + 1
                          : PROF_LANE_TID + k * 4096L + (gpu ? 2048 : 0) + b->worker_id + 1;
        if (!ls->l[k].named) {
            ls->l[k].named = true;
            int len = gpu ? snprintf(tl, sizeof tl, "%s stream of %s", dev_label(x->dev, dl, sizeof dl), b->label)
                          : snprintf(tl, sizeof tl, "%s", b->label);
            if (k > 0 && len >= 0 && (size_t)len < sizeof tl)
                snprintf(tl + len, sizeof tl - (size_t)len, ", lane %ld", k + 1);
            fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":", pid,
                    tid);
            json_string(f, tl);
            fputs("}}", f);
        }
        const char *status = x->status == 0 ? "ok" : x->status == 1 ? "skipped" : "failed";
        fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", gpu ? "gpu" : "op");
        json_string(f, x->name[0] ? x->name : "(unnamed)");
        /* whole ns as us with 3 decimals: exact, so ts + dur is the end */
        fprintf(f, ",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,\"dur\":%.3f,\"args\":{", pid, tid, s / 1e3, (t - s) / 1e3);
        if (gpu) {
            uint64_t ls0, lt0;
            span_of(x, t0, false, &ls0, &lt0);
            fprintf(f, "\"launch_us\":%.3f", ls0 / 1e3);
        } else {
            fprintf(f, "\"queue_wait_us\":%.3f", (x->t_start - x->t_ready) / 1e3);
        }
        fprintf(f, ",\"status\":\"%s\"}}", status);
    }
    free(order);
    return true;
}

int ordo_profiler_dump(ordo_engine *e, const char *path) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: engine is NULL");
    if (!path) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: path is NULL");
    FILE *f = fopen(path, "w");
    if (!f)
        return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: cannot open '%s' for writing: %s", path,
                         strerror(errno));
    struct stat sb;
    bool regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    dump_state st = {.f = f, .first = true};
    prof_lanes lanes = {NULL, 0, 0};
    bool oom = false;
    size_t dropped = 0;
    long gpu_dropped = 0;
    pthread_mutex_lock(&e->prof_mu);
    prof_gpu_read_all(e);
    uint64_t t0 = e->prof_t0;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    for (prof_buf *b = e->prof_bufs; b && !oom; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        oom = !dump_buf(&st, b, t0, false, &lanes) || !dump_buf(&st, b, t0, true, &lanes);
        if (!oom && b->dropped) {
            /* where the buffer filled, on its row: from there on its ops
             * are missing */
            dropped += b->dropped;
            name_process(&st, b->full_dev);
            fprintf(f, "%s{\"ph\":\"i\",\"s\":\"t\",\"name\":\"profiler buffer full: %zu events dropped\","
                       "\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"args\":{\"dropped\":%zu}}",
                    st.first ? "" : ",\n", b->dropped, dev_pid(b->full_dev), b->worker_id + 1,
                    (b->t_full > t0 ? b->t_full - t0 : 0) / 1e3, b->dropped);
            st.first = false;
        }
        spin_lock_release(&b->lock);
    }
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        spin_lock_acquire(&e->prof_gpu[d].lock);
        gpu_dropped += e->prof_gpu[d].dropped;
        spin_lock_release(&e->prof_gpu[d].lock);
    }
    pthread_mutex_unlock(&e->prof_mu);
    lanes_free(&lanes);
    fprintf(f, "\n],\"otherData\":{\"dropped_events\":%zu,\"gpu_ops_without_gpu_times\":%ld}}\n", dropped,
            gpu_dropped);
    /* a trace cut short is no trace: the file goes (a regular file only:
     * never a device or a pipe named by the path) */
    int err = ferror(f) ? errno : 0;
    if (fclose(f) != 0 && !err) err = errno;
    if (oom || err) {
        if (regular) remove(path);
        if (oom) return set_error(ORDO_ERR_NOMEM, "ordo_profiler_dump: out of memory writing '%s'", path);
        return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: error writing '%s': %s", path,
                         strerror(err ? err : EIO));
    }
    return ORDO_OK;
}

/* A name in the summary's first column, 24 characters wide: printable
 * (a newline would break the table; UTF-8 counts one column a character). */
typedef struct { char name[ORDO_NAME_MAX]; long count; uint64_t total, min, max, wait; } prof_row;
typedef struct { prof_row *rows; size_t n, cap; } prof_table;

static void summary_name(FILE *out, const char *name, int width) {
    char buf[4 * ORDO_NAME_MAX + 16];
    int cols = printable_name(buf, sizeof buf, name);
    fprintf(out, "%s%*s", buf, cols < width ? width - cols : 0, "");
}

/* The name column: 24 wide, or as wide as the widest name (up to 31
 * characters, more with escapes) so that the numbers stay in columns. */
static int name_width(const prof_table *t, int width) {
    char buf[4 * ORDO_NAME_MAX + 16];
    for (size_t r = 0; r < t->n; r++) {
        int cols = printable_name(buf, sizeof buf, t->rows[r].name);
        if (cols > width) width = cols;
    }
    return width;
}

static int row_cmp(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}


/* Adds duration d (and queue wait) to name's row; false when out of memory.
 * Few distinct names in practice; a linear scan keeps this simple. */
static bool table_add(prof_table *t, const char *name, uint64_t d, uint64_t wait) {
    size_t r = 0;
    while (r < t->n && strcmp(t->rows[r].name, name) != 0) r++;
    if (r == t->n) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 16;
            prof_row *g = realloc(t->rows, cap * sizeof *g);
            if (!g) return false;
            t->rows = g;
            t->cap = cap;
        }
        memset(&t->rows[r], 0, sizeof t->rows[r]);
        snprintf(t->rows[r].name, sizeof t->rows[r].name, "%s", name);
        t->rows[r].min = UINT64_MAX;
        t->n++;
    }
    prof_row *x = &t->rows[r];
    x->count++;
    x->total += d;
    x->wait += wait;
    if (d < x->min) x->min = d;
    if (d > x->max) x->max = d;
    return true;
}

/* The table of host-side times as before, then, when GPU ops were
 * profiled, a second one of their GPU-side times (from the timing events)
 * under its own heading, so readers of the first table see no change. */
int ordo_profiler_summary(ordo_engine *e, FILE *out) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_summary: engine is NULL");
    if (!out) return set_error(ORDO_ERR_INVALID, "ordo_profiler_summary: output is NULL");
    prof_table host = {NULL, 0, 0}, gpu = {NULL, 0, 0};
    bool oom = false;
    size_t dropped = 0, failed = 0, skipped = 0;
    long gpu_dropped = 0;
    pthread_mutex_lock(&e->prof_mu);
    prof_gpu_read_all(e);
    for (prof_buf *b = e->prof_bufs; b && !oom; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        dropped += b->dropped;
        for (size_t i = 0; i < b->n && !oom; i++) {
            prof_event *x = &b->ev[i];
            const char *name = x->name[0] ? x->name : "(unnamed)";
            failed += x->status == 2;
            skipped += x->status == 1;
            oom = !table_add(&host, name, x->t_end - x->t_start, x->t_start - x->t_ready) ||
                  (x->gpu_state == 2 && !table_add(&gpu, name, x->gpu_dur, 0));
        }
        spin_lock_release(&b->lock);
    }
    for (int d = 0; d < ORDO_MAX_DEVICES; d++) {
        spin_lock_acquire(&e->prof_gpu[d].lock);
        gpu_dropped += e->prof_gpu[d].dropped;
        spin_lock_release(&e->prof_gpu[d].lock);
    }
    pthread_mutex_unlock(&e->prof_mu);
    if (oom) {
        free(host.rows);
        free(gpu.rows);
        return set_error(ORDO_ERR_NOMEM, "ordo_profiler_summary: out of memory");
    }
    if (host.n) qsort(host.rows, host.n, sizeof *host.rows, row_cmp);
    int w = name_width(&gpu, name_width(&host, 24));
    fprintf(out, "%-*s %10s %12s %10s %10s %10s %12s\n", w, "op", "count", "total ms", "min us", "max us", "mean us",
            "queue us/op");
    for (size_t r = 0; r < host.n; r++) {
        prof_row *x = &host.rows[r];
        summary_name(out, x->name, w);
        fprintf(out, " %10ld %12.3f %10.3f %10.3f %10.3f %12.3f\n", x->count, x->total / 1e6, x->min / 1e3,
                x->max / 1e3, x->total / 1e3 / (double)x->count, x->wait / 1e3 / (double)x->count);
    }
    /* a skipped op's row shows it as a run of next to nothing */
    if (failed || skipped)
        fprintf(out, "(failed: %zu, skipped for a failed input: %zu; counted in the rows above, "
                     "args.status in the trace names them)\n", failed, skipped);
    if (dropped) fprintf(out, "(%zu events dropped: profiler buffer full)\n", dropped);
    if (gpu.n) {
        qsort(gpu.rows, gpu.n, sizeof *gpu.rows, row_cmp);
        fprintf(out, "\nGPU-side (from events on the streams; the table above has the host side, the launch)\n");
        fprintf(out, "%-*s %10s %12s %10s %10s %10s\n", w, "gpu op", "count", "total ms", "min us", "max us",
                "mean us");
        for (size_t r = 0; r < gpu.n; r++) {
            prof_row *x = &gpu.rows[r];
            summary_name(out, x->name, w);
            fprintf(out, " %10ld %12.3f %10.3f %10.3f %10.3f\n", x->count, x->total / 1e6, x->min / 1e3,
                    x->max / 1e3, x->total / 1e3 / (double)x->count);
        }
    }
    if (gpu_dropped)
        fprintf(out, "(%ld GPU ops without GPU-side times: a timing call failed, or too many unread)\n", gpu_dropped);
    free(host.rows);
    free(gpu.rows);
    return ORDO_OK;
}
