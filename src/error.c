/*
 * error.c - failures carried by vars, and the thread-local last error.
 *
 * A failure is created once, where an op fails, and then shared by every var
 * the failure spreads to (rule 5).  Its `reported` flag is what makes a
 * failure surface at exactly one wait: whichever wait claims it first
 * reports it, and every later wait sees it as already reported and clean.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *ordo_last_error(void) { return last_error; }

int set_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

failure *failure_vnew(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) n = 0;
    failure *f = malloc(sizeof *f + (size_t)n + 1);
    if (!f) return NULL;
    atomic_init(&f->refs, 1);
    atomic_init(&f->reported, 0);
    f->next = NULL;
    vsnprintf(f->msg, (size_t)n + 1, fmt, ap);
    return f;
}

failure *failure_new(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    failure *f = failure_vnew(fmt, ap);
    va_end(ap);
    return f;
}

void failure_ref(failure *f) { atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed); }

void failure_unref(failure *f) {
    if (f && atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) free(f);
}

bool failure_claim(ordo_engine *e, failure *f) {
    if (atomic_load(&f->reported)) return false;
    /* The epoch is taken before the flag is set: an op pushed after this
     * report (by this thread, or one that saw the report) reads a later
     * epoch than every op pushed before it. */
    uint64_t at = atomic_fetch_add(&e->report_epoch, 1) + 1, none = 0;
    return atomic_compare_exchange_strong(&f->reported, &none, at);
}

/* Whether msg starts with the op's name: "name: ...".  A name of
 * ORDO_NAME_MAX - 1 bytes may be a longer one cut short: a message that
 * starts with it names the op already. */
static bool starts_with_name(const char *msg, const char *name, size_t nlen) {
    return !strncmp(msg, name, nlen) && (msg[nlen] == ':' || nlen >= ORDO_NAME_MAX - 1);
}

failure *failure_named(failure *f, const char *name) {
    size_t nlen = strlen(name);
    if (!f->msg[0]) {
        /* ordo_fail(rc, "") or ordo_done_complete(done, ""): a failure all
         * the same, which must still say something ("name: " did not). */
        failure *said = failure_new("%s%sfailed (with an empty error message)", name, name[0] ? ": " : "");
        if (!said) return f;
        failure_unref(f);
        return said;
    }
    if (!name[0] || starts_with_name(f->msg, name, nlen)) return f;
    /* A GPU's failure found at the op (the naive engine waits for each
     * one) names the device, then the op: "gpu(0): gather: ..." (it was
     * "gather: gpu(0): gather: ..."). */
    const char *dev_end = !strncmp(f->msg, "gpu(", 4) ? strstr(f->msg, "): ") : NULL;
    if (dev_end && dev_end - f->msg < 16 && starts_with_name(dev_end + 3, name, nlen)) return f;
    failure *named = failure_new("%s: %s", name, f->msg);
    if (!named) return f;
    failure_unref(f);
    return named;
}

/* ordo_fail outside any op (a kernel run later by the simulated GPU's
 * stream): the message waits here for fail_detached_take. */
static _Thread_local char detached_msg[512];
static _Thread_local int detached_set;

const char *fail_detached_take(void) {
    if (!detached_set) return NULL;
    detached_set = 0;
    return detached_msg;
}

int ordo_fail(const ordo_run_ctx *rc, const char *fmt, ...) {
    if (!rc) return ORDO_ERR_FAILED;
    if (!fmt) fmt = "failed (ordo_fail was given no message)"; /* NULL is no printf format */
    if (!rc->op_) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detached_msg, sizeof detached_msg, fmt, ap);
        va_end(ap);
        detached_set = 1;
        return ORDO_ERR_FAILED;
    }
    /* An op's failure, or a function run with no op (fail_slot_ctx). */
    failure **slot = ((uintptr_t)rc->op_ & 1) ? (failure **)((uintptr_t)rc->op_ & ~(uintptr_t)1)
                                               : &((op *)rc->op_)->fail;
    va_list ap;
    va_start(ap, fmt);
    failure *f = failure_vnew(fmt, ap);
    va_end(ap);
    if (f) {
        failure_unref(*slot); /* the last message wins */
        *slot = f;
    }
    return ORDO_ERR_FAILED;
}
