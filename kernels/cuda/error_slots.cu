/*
 * error_slots.cu - the error slots of checked ops: one per op whose kernels
 * can find a data-dependent error (an index out of range, an integer
 * division by zero), so that the error is the op's own (rule 5).
 *
 * cu_error_slot_op(rc) gives the running op a zeroed slot and registers
 * its check with the engine (ordo_gpu_check_after): once the op's GPU work
 * has run, the check reads the slot on the host, turns a set code into the
 * op's failure, and returns the slot to the pool.  Slots live in memory
 * both sides reach without a copy (mapped page-locked memory on a real
 * GPU, host memory under the emulation: cu_slot_memory, given by each
 * backend), in chunks that are never freed, so a slot stays valid for as
 * long as a kernel may write it.
 *
 * Built with the CUDA backend and with its host emulation alike.
 */
#include <pthread.h>
#include <string.h>

#include "cuda_internal.cuh"

namespace {

struct slot_ref {
    cu_error_slot *host; /* where the host reads it */
    cu_error_slot *dev;  /* where kernels write it */
    int dev_id;
    slot_ref *next;      /* the free list, or the chunk list's next chunk */
};

/* Slots per chunk: a chunk is one allocation of page-locked memory, which
 * is dear to make, so they come many at a time. */
const int CHUNK = 256;

pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
slot_ref *free_slots[ORDO_MAX_DEVICES];

/* A new chunk of slots for dev_id on its free list; false when the memory
 * cannot be had. */
bool grow(int dev_id) {
    void *host = NULL, *dev = NULL;
    if (cu_slot_memory(dev_id, CHUNK * sizeof(cu_error_slot), &host, &dev)) return false;
    slot_ref *refs = (slot_ref *)calloc(CHUNK, sizeof(slot_ref));
    if (!refs) return false; /* (the slot memory stays with the backend, unused) */
    memset(host, 0, CHUNK * sizeof(cu_error_slot));
    for (int i = 0; i < CHUNK; i++) {
        refs[i].host = (cu_error_slot *)host + i;
        refs[i].dev = (cu_error_slot *)dev + i;
        refs[i].dev_id = dev_id;
        refs[i].next = i + 1 < CHUNK ? &refs[i + 1] : free_slots[dev_id];
    }
    free_slots[dev_id] = refs;
    return true;
}

slot_ref *take(int dev_id) {
    pthread_mutex_lock(&pool_mu);
    slot_ref *r = free_slots[dev_id];
    if (!r && grow(dev_id)) r = free_slots[dev_id];
    if (r) free_slots[dev_id] = r->next;
    pthread_mutex_unlock(&pool_mu);
    return r;
}

void give_back(slot_ref *r) {
    memset(r->host, 0, sizeof *r->host);
    pthread_mutex_lock(&pool_mu);
    r->next = free_slots[r->dev_id];
    free_slots[r->dev_id] = r;
    pthread_mutex_unlock(&pool_mu);
}

/* The engine calls this once the op's GPU work has run (gpu_check.c), so
 * the kernels' writes are visible and no kernel writes the slot again. */
int check_slot(void *arg, char *err, size_t errlen) {
    slot_ref *r = (slot_ref *)arg;
    const cu_error_slot s = *r->host;
    const int dev_id = r->dev_id;
    give_back(r);
    if (s.code <= 0) return 0;
    /* "<kernel>: what it found on gpu(N)": the kernel's name first, as the
     * op's other failures start, so the engine prefixes only an op pushed
     * under another name (Embedding's index_select) */
    cu_error_format(&s, err, errlen);
    const size_t n = strlen(err);
    if (n < errlen) snprintf(err + n, errlen - n, " on gpu(%d)", dev_id);
    return 1;
}

} /* namespace */

extern "C" cu_error_slot *cu_error_slot_op(const ordo_run_ctx *rc) {
    slot_ref *r = take(rc->ctx.dev_id);
    if (!r) {
        ordo_fail(rc, "gpu(%d): no memory for the op's error slot", rc->ctx.dev_id);
        return NULL;
    }
    if (ordo_gpu_check_after(rc, check_slot, r) != 0) {
        give_back(r);
        ordo_fail(rc, "%s", ordo_last_error());
        return NULL;
    }
    return r->dev;
}
