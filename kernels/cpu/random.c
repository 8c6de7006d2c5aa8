/*
 * random.c - seed, uniform, normal, bernoulli.
 *
 * The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11; the generator of cuRAND and Torch's CUDA
 * backend).  It is counter-based: block c of the stream is a pure function
 * philox(key, c), so the whole generator state fits in the 32-byte uint8
 * view the tensor layer keeps (out[1] of every random kernel), and a CUDA
 * kernel can compute element i of a call in parallel and get the same bits
 * as this sequential loop.
 *
 * State (32 bytes, host byte order):
 *   [0, 8)   key: the seed
 *   [8, 16)  counter: 128-bit blocks used so far
 *   [16, 24) magic "ordoPhx1" (a state never seeded fails instead of
 *            silently generating from an all-zero key)
 *   [24, 32) reserved, 0
 *
 * A call of n elements reads the stream from block `counter` on, element i
 * taking words [i*w, (i+1)*w) (4 words per block, word j of block b being
 * lane j of philox(key, {b_lo, b_hi, 0, 0})), then adds the blocks it used
 * to counter.  Elements are taken in the output's logical row-major order,
 * so results depend only on the seed and the order of calls, never on the
 * output's strides.  Words per element:
 *   uniform f32: 1, u = (w >> 8) * 2^-24
 *   uniform f64: 2, u = ((w0 << 32 | w1) >> 11) * 2^-53
 *   normal:      one block per pair of elements (Box-Muller):
 *                u1 = (((w0 << 32 | w1) >> 11) + 1) * 2^-53 in (0, 1],
 *                u2 = ((w2 << 32 | w3) >> 11) * 2^-53,
 *                r = sqrt(-2 ln u1); element 2j = r cos(2 pi u2),
 *                element 2j+1 = r sin(2 pi u2) (the odd last one is dropped)
 *   bernoulli:   1, y = (w * 2^-32 < p)
 */
#include <string.h>

#include "cpu_internal.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static const char state_magic[8] = {'o', 'r', 'd', 'o', 'P', 'h', 'x', '1'};

static void philox4x32_10(const uint32_t in[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = in[0], c1 = in[1], c2 = in[2], c3 = in[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        const uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        const uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

typedef struct rng {
    uint32_t key[2];
    uint64_t base;      /* the state's counter when the call began */
    uint64_t cached;    /* block held in words (UINT64_MAX: none) */
    uint32_t words[4];
    int64_t pos;        /* next element, in logical order */
    double a, b;        /* low, high - low | mean, std | p */
    double high;        /* uniform: exclusive upper bound */
} rng;

static inline const uint32_t *rng_block(rng *g, uint64_t blk) {
    if (blk != g->cached) {
        const uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), 0, 0};
        philox4x32_10(ctr, g->key, g->words);
        g->cached = blk;
    }
    return g->words;
}

/* word wi of this call's stream */
static inline uint32_t rng_word(rng *g, uint64_t wi) { return rng_block(g, g->base + wi / 4)[wi % 4]; }

static inline double u53(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1.0p-53;
}

/* element i of a normal stream */
static inline double normal_at(rng *g, uint64_t i) {
    const uint32_t *w = rng_block(g, g->base + i / 2);
    const double u1 = (double)(((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1) * 0x1.0p-53;
    const double u2 = u53(w[2], w[3]);
    const double r = sqrt(-2.0 * log(u1));
    const double t = 6.283185307179586476925 * u2;
    return r * (i % 2 ? sin(t) : cos(t));
}

/* Clamps a uniform draw that rounding pushed onto high back into [low, high). */
#define UNIFORM_FIX(T, NEXT, v, g)                                                   \
    do {                                                                            \
        if ((double)(v) >= (g)->high && (g)->b > 0) {                               \
            v = NEXT((T)(g)->high, (T)-INFINITY);                                   \
            if ((double)(v) < (g)->a) v = (T)(g)->a;                                \
        }                                                                           \
    } while (0)

static int uniform_f32(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    rng *g = ctx;
    float *y = (float *)p[0];
    for (int64_t i = 0; i < n; i++, g->pos++) {
        const double u = (double)(rng_word(g, (uint64_t)g->pos) >> 8) * 0x1.0p-24;
        float v = (float)(g->a + u * g->b);
        UNIFORM_FIX(float, nextafterf, v, g);
        y[i * s[0]] = v;
    }
    return 0;
}

static int uniform_f64(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    rng *g = ctx;
    double *y = (double *)p[0];
    for (int64_t i = 0; i < n; i++, g->pos++) {
        const uint64_t w = 2 * (uint64_t)g->pos;
        double v = g->a + u53(rng_word(g, w), rng_word(g, w + 1)) * g->b;
        UNIFORM_FIX(double, nextafter, v, g);
        y[i * s[0]] = v;
    }
    return 0;
}

static int normal_f32(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    rng *g = ctx;
    float *y = (float *)p[0];
    for (int64_t i = 0; i < n; i++, g->pos++) y[i * s[0]] = (float)(g->a + g->b * normal_at(g, (uint64_t)g->pos));
    return 0;
}

static int normal_f64(int64_t n, char *const *p, const int64_t *s, void *ctx) {
    rng *g = ctx;
    double *y = (double *)p[0];
    for (int64_t i = 0; i < n; i++, g->pos++) y[i * s[0]] = g->a + g->b * normal_at(g, (uint64_t)g->pos);
    return 0;
}

#define DEF_BERNOULLI(SFX, T)                                                         \
    static int bernoulli_##SFX(int64_t n, char *const *p, const int64_t *s, void *ctx) { \
        rng *g = ctx;                                                                \
        T *y = (T *)p[0];                                                            \
        for (int64_t i = 0; i < n; i++, g->pos++)                                    \
            y[i * s[0]] = (T)((double)rng_word(g, (uint64_t)g->pos) * 0x1.0p-32 < g->a); \
        return 0;                                                                    \
    }
DEF_BERNOULLI(f32, float)
DEF_BERNOULLI(f64, double)
DEF_BERNOULLI(i32, int32_t)
DEF_BERNOULLI(i64, int64_t)
DEF_BERNOULLI(u8, uint8_t)

/* ---- state ---------------------------------------------------------------- */

static int check_state(const ordo_run_ctx *rc, const char *name, const ordo_view *g) {
    if (g->dtype != ORDO_U8 || ordo_view_numel(g) != 32 || !ordo_view_is_contiguous(g))
        return ordo_fail(rc, "%s: generator state must be a contiguous uint8 view of 32 elements "
                             "(got %s, %lld elements)",
                         name, ordo_dtype_name(g->dtype), (long long)ordo_view_numel(g));
    return 0;
}

int cpu_check_seed(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_args(rc, "seed", args, 0, 1);
    if (r) return r;
    if ((r = check_state(rc, "seed", &args->out[0]))) return r;
    if (args->niparam < 1) return ordo_fail(rc, "seed: needs the seed as iparam[0]");
    return 0;
}

static int k_seed(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    int r = cpu_check_seed(rc, args);
    if (r) return r;
    unsigned char st[32] = {0};
    const uint64_t key = (uint64_t)args->iparam[0], ctr = 0;
    memcpy(st, &key, 8);
    memcpy(st + 8, &ctr, 8);
    memcpy(st + 16, state_magic, 8);
    memcpy(args->out[0].data, st, 32);
    return 0;
}

int cpu_check_rng_outputs(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args) {
    int r = cpu_check_args(rc, name, args, 0, 2);
    if (r) return r;
    if ((r = check_state(rc, name, &args->out[1]))) return r;
    return cpu_check_writable(rc, name, &args->out[0]);
}

/* Checks y and the generator (out[1]) and loads the state into g. */
static int rng_begin(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *args, rng *g) {
    int r = cpu_check_rng_outputs(rc, name, args);
    if (r) return r;
    const unsigned char *st = args->out[1].data;
    if (memcmp(st + 16, state_magic, 8) != 0)
        return ordo_fail(rc, "%s: generator state was never seeded (run the seed kernel on it first)", name);
    uint64_t key;
    memcpy(&key, st, 8);
    memcpy(&g->base, st + 8, 8);
    g->key[0] = (uint32_t)key;
    g->key[1] = (uint32_t)(key >> 32);
    g->cached = UINT64_MAX;
    g->pos = 0;
    return 0;
}

/* Fills y in logical order, then advances the state's counter by the
 * blocks used (words_per_elem / 4 per element, rounded up per call). */
static int rng_run(const ordo_kernel_args *args, rng *g, cpu_loop_fn fn, uint64_t words_per_elem) {
    const ordo_view *y = &args->out[0];
    const ordo_view *v[1] = {y};
    cpu_iter it;
    cpu_iter_init_views(&it, 1, v, CPU_ITER_KEEP_ORDER);
    cpu_iter_run(&it, fn, g);
    const uint64_t n = (uint64_t)ordo_view_numel(y);
    const uint64_t blocks = (n * words_per_elem + 3) / 4;
    const uint64_t ctr = g->base + blocks;
    memcpy((unsigned char *)args->out[1].data + 8, &ctr, 8);
    return 0;
}

/* uniform and normal: a float out and two scalars (what names them). */
static int float_out_two_scalars(const ordo_run_ctx *rc, const char *name, const char *what,
                                 const ordo_kernel_args *args, double *s0, double *s1) {
    const int dt = args->out[0].dtype;
    if (!cpu_dtype_is_float(dt)) return cpu_fail_dtype(rc, name, dt);
    if (args->nscalar < 2) return ordo_fail(rc, "%s: needs %s as scalar[0], scalar[1]", name, what);
    *s0 = args->scalar[0];
    *s1 = args->scalar[1];
    return 0;
}

int cpu_check_uniform(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *lo, double *hi) {
    int r = float_out_two_scalars(rc, "uniform", "low and high", args, lo, hi);
    if (r) return r;
    if (!isfinite(*lo) || !isfinite(*hi) || !(*lo <= *hi) || !isfinite(*hi - *lo))
        return ordo_fail(rc, "uniform: bad range [%g, %g)", cpu_shown(*lo), cpu_shown(*hi));
    return 0;
}

static int k_uniform(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    rng g;
    double lo, hi;
    int r = rng_begin(rc, "uniform", args, &g);
    if (r || (r = cpu_check_uniform(rc, args, &lo, &hi))) return r;
    g.a = lo;
    g.b = hi - lo;
    g.high = hi;
    return args->out[0].dtype == ORDO_F32 ? rng_run(args, &g, uniform_f32, 1) : rng_run(args, &g, uniform_f64, 2);
}

int cpu_check_normal(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *mean, double *sd) {
    int r = float_out_two_scalars(rc, "normal", "mean and std", args, mean, sd);
    if (r) return r;
    if (!isfinite(*mean) || !isfinite(*sd) || *sd < 0)
        return ordo_fail(rc, "normal: bad mean %g or std %g", cpu_shown(*mean), cpu_shown(*sd));
    return 0;
}

static int k_normal(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    rng g;
    double mean, sd;
    int r = rng_begin(rc, "normal", args, &g);
    if (r || (r = cpu_check_normal(rc, args, &mean, &sd))) return r;
    g.a = mean;
    g.b = sd;
    return rng_run(args, &g, args->out[0].dtype == ORDO_F32 ? normal_f32 : normal_f64, 2);
}

int cpu_check_bernoulli(const ordo_run_ctx *rc, const ordo_kernel_args *args, double *p) {
    if (args->nscalar < 1) return ordo_fail(rc, "bernoulli: needs p as scalar[0]");
    *p = args->scalar[0];
    if (!(*p >= 0 && *p <= 1)) return ordo_fail(rc, "bernoulli: p %g is not in [0, 1]", cpu_shown(*p));
    return 0;
}

static int k_bernoulli(const ordo_run_ctx *rc, const ordo_kernel_args *args) {
    rng g;
    double p = 0; /* set by cpu_check_bernoulli when it returns 0 */
    int r = rng_begin(rc, "bernoulli", args, &g);
    if (r || (r = cpu_check_bernoulli(rc, args, &p))) return r;
    g.a = p;
    static const cpu_loop_fn loops[ORDO_NDTYPES] = {bernoulli_f32, bernoulli_f64, bernoulli_i32,
                                                    bernoulli_i64, bernoulli_u8};
    return rng_run(args, &g, loops[args->out[0].dtype], 1);
}

void cpu_register_random(void) {
    static const cpu_kernel_entry t[] = {
        {"seed", k_seed},
        {"uniform", k_uniform},
        {"normal", k_normal},
        {"bernoulli", k_bernoulli},
    };
    CPU_REGISTER_TABLE(t);
}
