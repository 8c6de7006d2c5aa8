/*
 * optim.c - fused optimiser updates: adam_step, sgd_step.
 *
 * An optimiser step written with elementwise ops costs a dozen pushes and
 * five temporaries per parameter, each a pass over memory; these kernels do
 * the whole update in one pass, so a training step's update is one op per
 * parameter.  They update in place: the parameter and the optimiser state
 * are outputs (written), the gradient an input.  Every operand must be
 * contiguous (ordo.optim falls back to plain ops otherwise), one float
 * dtype.
 *
 *   adam_step: in g; out p, state (2 x n: row 0 = m, row 1 = v)
 *     scalars lr/c1 (step size), beta1, beta2, eps, weight_decay, 1/c2
 *     where c1 = 1 - beta1^t and c2 = 1 - beta2^t (bias corrections):
 *     g' = g + wd p; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
 *     p -= step * m / (sqrt(v / c2) + eps)
 *   sgd_step: in g; out p [, buf (n)] (no buf: momentum must be 0)
 *     scalars lr, momentum, weight_decay, nesterov (0/1), first (1: buf = g')
 *     g' = g + wd p; buf = momentum buf + g' (or g' on the first step);
 *     d = nesterov ? g' + momentum buf : buf (g' without momentum); p -= lr d
 */
#include <stdbool.h>

#include "cpu_internal.h"

static int check_operands(const ordo_run_ctx *rc, const char *name, const ordo_kernel_args *a,
                          int64_t state_rows, int nscalar) {
    int r;
    if ((r = cpu_check_args(rc, name, a, 1, a->nout == 1 && state_rows == 0 ? 1 : 2))) return r;
    if (a->nscalar < nscalar) {
        ordo_fail(rc, "%s: expected %d scalars, got %d", name, nscalar, a->nscalar);
        return ORDO_ERR_INVALID;
    }
    const ordo_view *g = &a->in[0], *p = &a->out[0], *s = a->nout > 1 ? &a->out[1] : p;
    if (a->nout == 1) state_rows = 1; /* no state: p stands in, checked like one */
    int64_t n = ordo_view_numel(p);
    if (p->dtype != ORDO_F32 && p->dtype != ORDO_F64) return cpu_fail_dtype(rc, name, p->dtype);
    if (g->dtype != p->dtype || s->dtype != p->dtype) {
        ordo_fail(rc, "%s: dtype mismatch: param %s, grad %s, state %s", name, ordo_dtype_name(p->dtype),
                  ordo_dtype_name(g->dtype), ordo_dtype_name(s->dtype));
        return ORDO_ERR_INVALID;
    }
    if (ordo_view_numel(g) != n || ordo_view_numel(s) != state_rows * n) {
        ordo_fail(rc, "%s: sizes differ: param %lld, grad %lld, state %lld (expected %lld)", name, (long long)n,
                  (long long)ordo_view_numel(g), (long long)ordo_view_numel(s), (long long)(state_rows * n));
        return ORDO_ERR_INVALID;
    }
    if (!ordo_view_is_contiguous(g) || !ordo_view_is_contiguous(p) || !ordo_view_is_contiguous(s)) {
        ordo_fail(rc, "%s: param, grad and state must be contiguous", name);
        return ORDO_ERR_INVALID;
    }
    return 0;
}

#define DEF_ADAM(T, SQRT)                                                                              \
    static void adam_##T(int64_t n, T *restrict p, const T *restrict g, T *restrict m, T *restrict v,  \
                         const double *sc) {                                                           \
        const T step = (T)sc[0], b1 = (T)sc[1], b2 = (T)sc[2], eps = (T)sc[3], wd = (T)sc[4];         \
        const T inv_c2 = (T)sc[5], nb1 = (T)(1 - sc[1]), nb2 = (T)(1 - sc[2]);                        \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i] + wd * p[i];                                                                   \
            T mi = b1 * m[i] + nb1 * gi;                                                               \
            T vi = b2 * v[i] + nb2 * gi * gi;                                                          \
            m[i] = mi;                                                                                 \
            v[i] = vi;                                                                                 \
            p[i] -= step * mi / (SQRT(vi * inv_c2) + eps);                                             \
        }                                                                                              \
    }
DEF_ADAM(float, sqrtf)
DEF_ADAM(double, sqrt)

int cpu_check_adam_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    return check_operands(rc, "adam_step", a, 2, 6);
}

/* An update of a large parameter is split among the pool's idle workers
 * (cpu_parallel_for): every element is updated on its own, so the split
 * changes nothing but the time. */
typedef struct update_job {
    const ordo_kernel_args *a;
    int64_t n;
} update_job;

static int split_update(const ordo_kernel_args *a, int64_t n, ordo_chunk_fn chunk) {
    update_job j = {a, n};
    return cpu_parallel_for(n, 1, chunk, &j);
}

/* Elements lo..hi of the parameter, its gradient and its state rows. */
static int adam_chunk(int64_t lo, int64_t hi, void *arg) {
    const update_job *j = arg;
    const ordo_kernel_args *a = j->a;
    if (a->out[0].dtype == ORDO_F32) {
        float *s = a->out[1].data;
        adam_float(hi - lo, (float *)a->out[0].data + lo, (const float *)a->in[0].data + lo, s + lo, s + j->n + lo,
                   a->scalar);
    } else {
        double *s = a->out[1].data;
        adam_double(hi - lo, (double *)a->out[0].data + lo, (const double *)a->in[0].data + lo, s + lo,
                    s + j->n + lo, a->scalar);
    }
    return 0;
}

static int k_adam_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_adam_step(rc, a);
    if (r) return r;
    return split_update(a, ordo_view_numel(&a->out[0]), adam_chunk);
}

#define DEF_SGD(T)                                                                                     \
    static void sgd_##T(int64_t n, T *restrict p, const T *restrict g, T *restrict buf,                \
                        const double *sc) {                                                            \
        const T lr = (T)sc[0], mom = (T)sc[1], wd = (T)sc[2];                                          \
        const int nesterov = sc[3] != 0, first = sc[4] != 0;                                           \
        if (mom == 0) {                                                                                \
            for (int64_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);                           \
            return;                                                                                    \
        }                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                              \
            T gi = g[i] + wd * p[i];                                                                   \
            T b = first ? gi : mom * buf[i] + gi;                                                      \
            buf[i] = b;                                                                                \
            p[i] -= lr * (nesterov ? gi + mom * b : b);                                                \
        }                                                                                              \
    }
DEF_SGD(float)
DEF_SGD(double)

int cpu_check_sgd_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = check_operands(rc, "sgd_step", a, a->nout == 1 ? 0 : 1, 5);
    if (r) return r;
    if (a->nout == 1 && a->scalar[1] != 0) {
        ordo_fail(rc, "sgd_step: momentum %g needs a buffer (a second output)", cpu_shown(a->scalar[1]));
        return ORDO_ERR_INVALID;
    }
    return 0;
}

static int sgd_chunk(int64_t lo, int64_t hi, void *arg) {
    const update_job *j = arg;
    const ordo_kernel_args *a = j->a;
    bool buf = a->nout > 1;
    if (a->out[0].dtype == ORDO_F32)
        sgd_float(hi - lo, (float *)a->out[0].data + lo, (const float *)a->in[0].data + lo,
                  buf ? (float *)a->out[1].data + lo : NULL, a->scalar);
    else
        sgd_double(hi - lo, (double *)a->out[0].data + lo, (const double *)a->in[0].data + lo,
                   buf ? (double *)a->out[1].data + lo : NULL, a->scalar);
    return 0;
}

static int k_sgd_step(const ordo_run_ctx *rc, const ordo_kernel_args *a) {
    int r = cpu_check_sgd_step(rc, a);
    if (r) return r;
    return split_update(a, ordo_view_numel(&a->out[0]), sgd_chunk);
}

void cpu_register_optim(void) {
    static const cpu_kernel_entry t[] = {{"adam_step", k_adam_step}, {"sgd_step", k_sgd_step}};
    CPU_REGISTER_TABLE(t);
}
