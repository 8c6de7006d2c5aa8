/*
 * var.c - the per-variable dependency queue.
 *
 * A var grants access to the nodes appended to it, in push order, under two
 * states: any number of granted readers, or one granted writer.  A node that
 * cannot be granted waits in the var's queue.  Invariant: a non-empty queue
 * always starts with a node that is blocked, i.e. either a writer is active,
 * or readers are active and the head is a write.  So completing a read can
 * only release a write, and completing a write releases the run of reads at
 * the head, or the single write at the head.
 *
 * Granting a node decrements its op's wait count; the op whose count reaches
 * zero is ready and goes on a ready_list that the caller dispatches after it
 * has dropped the var's lock.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static inline void grant(dep_node *n, ready_list *rl) {
    op *o = node_op(n);
    /* A count of 1 means this is o's last grant: nobody else can touch the
     * count any more, so the atomic decrement (the common case: an op
     * waiting on one var) is not needed. */
    if (atomic_load_explicit(&o->wait, memory_order_acquire) == 1 ||
        atomic_fetch_sub_explicit(&o->wait, 1, memory_order_acq_rel) == 1) {
        o->next = NULL;
        if (rl->tail) rl->tail->next = o;
        else rl->head = o;
        rl->tail = o;
    }
}

bool var_append(ordo_var *v, dep_node *n) {
    n->next = NULL;
    if (!v->head && !v->writer_active && (!node_is_write(n) || v->nreaders == 0)) {
        if (node_is_write(n)) v->writer_active = true;
        else v->nreaders++;
        return true;
    }
    if (v->tail) v->tail->next = n;
    else v->head = n;
    v->tail = n;
    return false;
}

void var_complete(ordo_var *v, bool is_write, ready_list *rl) {
    if (is_write) {
        v->writer_active = false;
    } else if (--v->nreaders > 0) {
        return;
    }
    dep_node *n = v->head;
    if (!n) return;
    if (node_is_write(n)) {
        if (v->nreaders == 0) {
            v->head = n->next;
            if (!v->head) v->tail = NULL;
            v->writer_active = true;
            grant(n, rl);
        }
        return;
    }
    /* Only a completed write can leave reads at the head: release them all. */
    while (n && !node_is_write(n)) {
        dep_node *next = n->next;
        v->nreaders++;
        grant(n, rl);
        n = next;
    }
    v->head = n;
    if (!n) v->tail = NULL;
}

/* Vars come from slabs owned by the engine, so a stale pointer still points
 * at readable memory whose magic says VAR_DEAD (rule 6's "never a hang"). */

ordo_var *var_alloc(ordo_engine *e) {
    spin_lock_acquire(&e->mem_mu);
    if (!e->var_free) {
        ordo_var *block = engine_slab_alloc(&e->var_slabs, VARS_PER_SLAB * sizeof(ordo_var));
        if (!block) {
            spin_lock_release(&e->mem_mu);
            return NULL;
        }
        for (int i = 0; i < VARS_PER_SLAB; i++) {
            atomic_init(&block[i].magic, VAR_DEAD);
            atomic_init(&block[i].gen, 0);
            block[i].engine = e; /* for good: a slab's vars never move to another engine */
            block[i].next_free = NULL;
            if (e->var_free_tail) e->var_free_tail->next_free = &block[i];
            else e->var_free = &block[i];
            e->var_free_tail = &block[i];
        }
    }
    ordo_var *v = e->var_free;
    e->var_free = v->next_free;
    if (!e->var_free) e->var_free_tail = NULL;
    spin_lock_release(&e->mem_mu);

    atomic_store_explicit(&v->lock.v, 0, memory_order_relaxed);
    atomic_store_explicit(&v->version, 0, memory_order_relaxed);
    v->deleted = false;
    v->writer_active = false;
    v->nreaders = 0;
    v->head = v->tail = NULL;
    v->fail = NULL;
    v->made = false;
    atomic_store_explicit(&v->device_state, NULL, memory_order_relaxed);
    v->next_free = NULL;
    atomic_fetch_add_explicit(&v->gen, 1, memory_order_relaxed);
    atomic_store_explicit(&v->magic, VAR_LIVE, memory_order_release);
    return v;
}

void var_free(ordo_engine *e, ordo_var *v) {
    var_events_free(v);
    failure_unref(v->fail);
    v->fail = NULL;
    atomic_store_explicit(&v->magic, VAR_DEAD, memory_order_release);
    /* First in, first out: a freed var is reused as late as possible, so a
     * stale handle keeps reading VAR_DEAD for long. */
    v->next_free = NULL;
    spin_lock_acquire(&e->mem_mu);
    if (e->var_free_tail) e->var_free_tail->next_free = v;
    else e->var_free = v;
    e->var_free_tail = v;
    spin_lock_release(&e->mem_mu);
}

int ordo_var_failed(ordo_var *v) {
    if (!v) return set_error(ORDO_ERR_INVALID, "ordo_var_failed: variable is NULL");
    if (atomic_load_explicit(&v->magic, memory_order_acquire) != VAR_LIVE)
        return set_error(ORDO_ERR_DELETED, "ordo_var_failed: variable %p was deleted", (void *)v);
    /* Set by the last write's finish (sched.c finish_op); after a wait for
     * v no write is in flight, so it is settled. */
    const failure *f = v->fail;
    if (!f) return 0;
    return set_error(ORDO_ERR_FAILED, "%s", f->msg);
}

void var_host_written(ordo_var *v) {
    /* No op holds v's grant (the caller waited to write, or nothing was
     * ever pushed on it); the push of the next op orders this store
     * before the worker that reads it. */
    if (v) v->made = true;
}

uint64_t ordo_var_version(ordo_var *v) {
    if (!v) {
        set_error(ORDO_ERR_INVALID, "ordo_var_version: variable is NULL");
        return 0;
    }
    if (atomic_load_explicit(&v->magic, memory_order_acquire) != VAR_LIVE) {
        set_error(ORDO_ERR_DELETED, "ordo_var_version: variable %p was deleted", (void *)v);
        return 0;
    }
    return atomic_load_explicit(&v->version, memory_order_acquire);
}
