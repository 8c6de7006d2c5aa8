/*
 * names.c - interned op names.
 *
 * An op's name must outlive the caller's string (a Lua string may be
 * collected while the op waits), and copying it into every op would cost a
 * cache line per op.  So names are interned per engine: each distinct name
 * is copied once, and a thread-local cache makes the usual case -- the same
 * name pushed again and again -- a pointer compare and a short strcmp.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMES_MAX 65536 /* distinct names kept; a runaway generator gets one shared name */

ORDO_HIDDEN _Thread_local name_cache tls_names;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static const char *intern_locked(ordo_engine *e, const char *name) {
    if (e->names_n * 2 >= e->names_cap) {
        size_t cap = e->names_cap ? e->names_cap * 2 : 256;
        char **t = calloc(cap, sizeof *t);
        if (!t) return NULL;
        for (size_t i = 0; i < e->names_cap; i++) {
            char *s = e->names[i];
            if (!s) continue;
            size_t j = hash_str(s) & (cap - 1);
            while (t[j]) j = (j + 1) & (cap - 1);
            t[j] = s;
        }
        free(e->names);
        e->names = t;
        e->names_cap = cap;
    }
    size_t j = hash_str(name) & (e->names_cap - 1);
    while (e->names[j]) {
        if (!strcmp(e->names[j], name)) return e->names[j];
        j = (j + 1) & (e->names_cap - 1);
    }
    if (e->names_n >= NAMES_MAX) return "(too many distinct op names)";
    char *copy = strdup(name);
    if (!copy) return NULL;
    e->names[j] = copy;
    e->names_n++;
    return copy;
}

/* A name missing from this thread's cache (engine_intern, internal.h):
 * interned under the lock, and cached in the slot the pointer hashes to. */
const char *engine_intern_miss(ordo_engine *e, const char *name, unsigned slot) {
    if (!name || !*name) return "";
    if (tls_names.uid != e->uid) {
        memset(&tls_names, 0, sizeof tls_names);
        tls_names.uid = e->uid;
    }
    char buf[ORDO_NAME_MAX]; /* longer names are kept truncated */
    snprintf(buf, sizeof buf, "%s", name);
    pthread_mutex_lock(&e->names_mu);
    const char *s = intern_locked(e, buf);
    pthread_mutex_unlock(&e->names_mu);
    if (!s) return "(out of memory)";
    tls_names.src[slot] = name;
    tls_names.interned[slot] = s;
    return s;
}

void engine_names_free(ordo_engine *e) {
    for (size_t i = 0; i < e->names_cap; i++) free(e->names[i]);
    free(e->names);
    e->names = NULL;
    e->names_cap = e->names_n = 0;
}
