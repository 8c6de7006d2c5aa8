/*
 * profiler.c - per-op timing, Chrome trace output and a summary table.
 *
 * Each worker records into its own buffer, so profiling adds no shared lock
 * to the hot path; ops that run on other threads (pushers, async
 * completions) share one buffer.  A buffer's spin lock is only contended
 * while a dump or summary reads it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define PROF_MAX_EVENTS_PER_BUF (8u << 20)

typedef struct prof_event {
    const char *name; /* interned */
    uint64_t t_ready, t_start, t_end;
    ordo_ctx dev;
    int worker;
    int status; /* 0 ok, 1 skipped (failed input), 2 failed */
} prof_event;

struct prof_buf {
    prof_buf *next_all;
    spin_lock lock;
    int worker_id;
    char label[64];
    prof_event *ev;
    size_t n, cap, dropped;
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

void prof_record(ordo_engine *e, worker *w, const op *o, uint64_t t_end, int status) {
    prof_buf *b = w ? w->prof : e->prof_shared;
    if (!b) return;
    spin_lock_acquire(&b->lock);
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        prof_event *ev = cap <= PROF_MAX_EVENTS_PER_BUF ? realloc(b->ev, cap * sizeof *ev) : NULL;
        if (!ev) {
            b->dropped++;
            spin_lock_release(&b->lock);
            return;
        }
        b->ev = ev;
        b->cap = cap;
    }
    prof_event *x = &b->ev[b->n++];
    x->name = o->name;
    x->t_start = o->t_start ? o->t_start : t_end;
    x->t_ready = o->t_ready ? o->t_ready : x->t_start;
    x->t_end = t_end;
    x->dev = o->ctx;
    x->worker = w ? w->id : -1;
    x->status = status;
    spin_lock_release(&b->lock);
}

void prof_free_all(ordo_engine *e) {
    for (prof_buf *b = e->prof_bufs, *next; b; b = next) {
        next = b->next_all;
        free(b->ev);
        free(b);
    }
    e->prof_bufs = NULL;
}

int ordo_profiler_start(ordo_engine *e) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_start: engine is NULL");
    pthread_mutex_lock(&e->prof_mu);
    if (!e->prof_t0) e->prof_t0 = now_ns();
    pthread_mutex_unlock(&e->prof_mu);
    atomic_store(&e->profiling, 1);
    return ORDO_OK;
}

int ordo_profiler_stop(ordo_engine *e) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_stop: engine is NULL");
    atomic_store(&e->profiling, 0);
    return ORDO_OK;
}

void ordo_profiler_clear(ordo_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->prof_mu);
    for (prof_buf *b = e->prof_bufs; b; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        b->n = 0;
        b->dropped = 0;
        spin_lock_release(&b->lock);
    }
    e->prof_t0 = atomic_load(&e->profiling) ? now_ns() : 0;
    pthread_mutex_unlock(&e->prof_mu);
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Trace rows: one "process" per device, one "thread" per worker. */
static int dev_pid(ordo_ctx d) { return d.dev_type == ORDO_GPU ? 1000 + d.dev_id : d.dev_id; }

static const char *dev_label(ordo_ctx d, char *buf, size_t n) {
    snprintf(buf, n, "%s(%d)", d.dev_type == ORDO_GPU ? "gpu" : d.dev_type == ORDO_CPU_PINNED ? "cpu_pinned" : "cpu",
             d.dev_id);
    return buf;
}

int ordo_profiler_dump(ordo_engine *e, const char *path) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: engine is NULL");
    if (!path) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: path is NULL");
    FILE *f = fopen(path, "w");
    if (!f) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: cannot open '%s' for writing", path);
    pthread_mutex_lock(&e->prof_mu);
    uint64_t t0 = e->prof_t0;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    bool first = true;
    /* Name each (device, worker) row once: devices x workers is small. */
    bool named_dev[2][ORDO_MAX_DEVICES] = {{false}};
    for (prof_buf *b = e->prof_bufs; b; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        bool named_here[2][ORDO_MAX_DEVICES] = {{false}};
        for (size_t i = 0; i < b->n; i++) {
            prof_event *x = &b->ev[i];
            int gi = x->dev.dev_type == ORDO_GPU;
            int di = x->dev.dev_id >= 0 && x->dev.dev_id < ORDO_MAX_DEVICES ? x->dev.dev_id : 0;
            char dl[32];
            if (!named_dev[gi][di]) {
                named_dev[gi][di] = true;
                fprintf(f, "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"%s\"}}",
                        first ? "" : ",\n", dev_pid(x->dev), dev_label(x->dev, dl, sizeof dl));
                first = false;
            }
            if (!named_here[gi][di]) {
                named_here[gi][di] = true;
                fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
                        dev_pid(x->dev), b->worker_id + 1);
                json_string(f, b->label);
                fputs("}}", f);
            }
            uint64_t ts = x->t_start > t0 ? x->t_start - t0 : 0;
            fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"op\",\"name\":");
            json_string(f, x->name[0] ? x->name : "(unnamed)");
            fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"queue_wait_us\":%.3f,\"status\":\"%s\"}}",
                    dev_pid(x->dev), b->worker_id + 1, ts / 1e3, (x->t_end - x->t_start) / 1e3,
                    (x->t_start - x->t_ready) / 1e3, x->status == 0 ? "ok" : x->status == 1 ? "skipped" : "failed");
        }
        spin_lock_release(&b->lock);
    }
    fputs("\n]}\n", f);
    pthread_mutex_unlock(&e->prof_mu);
    if (fclose(f) != 0) return set_error(ORDO_ERR_INVALID, "ordo_profiler_dump: error writing '%s'", path);
    return ORDO_OK;
}

typedef struct { char name[ORDO_NAME_MAX]; long count; uint64_t total, min, max, wait; } prof_row;

static int row_cmp(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}

int ordo_profiler_summary(ordo_engine *e, FILE *out) {
    if (!e) return set_error(ORDO_ERR_INVALID, "ordo_profiler_summary: engine is NULL");
    if (!out) return set_error(ORDO_ERR_INVALID, "ordo_profiler_summary: output is NULL");
    size_t nrows = 0, cap = 16;
    prof_row *rows = malloc(cap * sizeof *rows);
    if (!rows) return set_error(ORDO_ERR_NOMEM, "ordo_profiler_summary: out of memory");
    size_t dropped = 0;
    pthread_mutex_lock(&e->prof_mu);
    for (prof_buf *b = e->prof_bufs; b; b = b->next_all) {
        spin_lock_acquire(&b->lock);
        dropped += b->dropped;
        for (size_t i = 0; i < b->n; i++) {
            prof_event *x = &b->ev[i];
            const char *name = x->name[0] ? x->name : "(unnamed)";
            /* Few distinct names in practice; a linear scan keeps this simple. */
            size_t r = 0;
            while (r < nrows && strcmp(rows[r].name, name) != 0) r++;
            if (r == nrows) {
                if (nrows == cap) {
                    prof_row *g = realloc(rows, (cap *= 2) * sizeof *rows);
                    if (!g) break;
                    rows = g;
                }
                memset(&rows[r], 0, sizeof rows[r]);
                snprintf(rows[r].name, sizeof rows[r].name, "%s", name);
                rows[r].min = UINT64_MAX;
                nrows++;
            }
            uint64_t d = x->t_end - x->t_start;
            rows[r].count++;
            rows[r].total += d;
            rows[r].wait += x->t_start - x->t_ready;
            if (d < rows[r].min) rows[r].min = d;
            if (d > rows[r].max) rows[r].max = d;
        }
        spin_lock_release(&b->lock);
    }
    pthread_mutex_unlock(&e->prof_mu);
    qsort(rows, nrows, sizeof *rows, row_cmp);
    fprintf(out, "%-24s %10s %12s %10s %10s %10s %12s\n", "op", "count", "total ms", "min us", "max us", "mean us",
            "queue us/op");
    for (size_t r = 0; r < nrows; r++) {
        prof_row *x = &rows[r];
        fprintf(out, "%-24s %10ld %12.3f %10.3f %10.3f %10.3f %12.3f\n", x->name, x->count, x->total / 1e6,
                x->min / 1e3, x->max / 1e3, x->total / 1e3 / (double)x->count, x->wait / 1e3 / (double)x->count);
    }
    if (dropped) fprintf(out, "(%zu events dropped: profiler buffer full)\n", dropped);
    free(rows);
    return ORDO_OK;
}
