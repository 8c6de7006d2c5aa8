/* spin.c - the var lock: spin briefly, then yield the core to the holder. */
#include "internal.h"

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

void spin_lock_contended(spin_lock *l) {
    for (int spins = 0;; spins++) {
        if (!atomic_load_explicit(&l->v, memory_order_relaxed) &&
            !atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
            return;
        if (spins < 64) cpu_relax();
        else sched_yield();
    }
}
