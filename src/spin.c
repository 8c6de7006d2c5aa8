/* spin.c - the var lock: spin briefly, then yield the core to the holder. */
#include "internal.h"

#include <sched.h>


void spin_lock_contended(spin_lock *l) {
    for (int spins = 0;; spins++) {
        if (!atomic_load_explicit(&l->v, memory_order_relaxed) &&
            !atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
            return;
        if (spins < 64) cpu_relax();
        else sched_yield();
    }
}
