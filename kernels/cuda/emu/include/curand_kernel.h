/*
 * curand_kernel.h (emulation) - the Philox4x32-10 generator of cuRAND's
 * device API as kernels/cuda/random.cu uses it, for the emulation library
 * (see ../README.md).  Written from the published algorithm (Salmon et al.,
 * SC'11) and cuRAND's documented semantics: curand_init(seed, subsequence,
 * offset) keys the generator with the seed, puts the subsequence in the
 * counter's high 64 bits and skips offset 32-bit outputs; curand4 returns
 * the four words of the current counter and moves to the next.
 */
#ifndef ORDO_EMU_CURAND_KERNEL_H
#define ORDO_EMU_CURAND_KERNEL_H

#include "cuda_runtime.h"

struct curandStatePhilox4_32_10_t {
    uint4 ctr;
    uint2 key;
    uint4 output; /* philox(ctr, key) */
    unsigned state; /* words of output already used (0..3) */
};

static inline void ordo_emu_philox_round(uint4 &c, const uint2 &k) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c.x, p1 = (uint64_t)0xCD9E8D57u * c.z;
    const uint4 r = {(unsigned)(p1 >> 32) ^ c.y ^ k.x, (unsigned)p1, (unsigned)(p0 >> 32) ^ c.w ^ k.y, (unsigned)p0};
    c = r;
}

static inline uint4 ordo_emu_philox10(uint4 c, uint2 k) {
    for (int i = 0; i < 10; i++) {
        if (i) k.x += 0x9E3779B9u, k.y += 0xBB67AE85u;
        ordo_emu_philox_round(c, k);
    }
    return c;
}

/* 128-bit counter += n (n fits 64 bits) */
static inline void ordo_emu_ctr_add(uint4 &c, unsigned long long n) {
    const unsigned long long lo = ((unsigned long long)c.y << 32 | c.x), nlo = lo + n;
    unsigned long long hi = ((unsigned long long)c.w << 32 | c.z) + (nlo < lo);
    c.x = (unsigned)nlo, c.y = (unsigned)(nlo >> 32), c.z = (unsigned)hi, c.w = (unsigned)(hi >> 32);
}

static inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                               curandStatePhilox4_32_10_t *s) {
    s->key.x = (unsigned)seed;
    s->key.y = (unsigned)(seed >> 32);
    s->ctr.x = s->ctr.y = 0;
    s->ctr.z = (unsigned)subsequence;
    s->ctr.w = (unsigned)(subsequence >> 32);
    ordo_emu_ctr_add(s->ctr, offset / 4);
    s->state = (unsigned)(offset % 4);
    s->output = ordo_emu_philox10(s->ctr, s->key);
}

static inline uint4 curand4(curandStatePhilox4_32_10_t *s) {
    const uint4 cur = s->output;
    ordo_emu_ctr_add(s->ctr, 1);
    const uint4 next = ordo_emu_philox10(s->ctr, s->key);
    s->output = next;
    if (s->state == 0) return cur;
    const unsigned w[8] = {cur.x, cur.y, cur.z, cur.w, next.x, next.y, next.z, next.w};
    const unsigned o = s->state;
    const uint4 r = {w[o], w[o + 1], w[o + 2], w[o + 3]};
    return r;
}

#endif
