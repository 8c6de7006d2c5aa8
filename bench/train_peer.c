/*
 * train_peer.c - the C peer of bench/train_bench.lua: the same training
 * step of the same MLP (784-512-256-10, ReLU, softmax cross-entropy, Adam),
 * written directly with cblas_sgemm and plain loops, one thread, no engine,
 * no temporaries: the "no overhead" floor that ordo's step is measured
 * against.
 *
 *   train_peer PARAMS DATA CHECK WARMUP STEPS RUNS [BLAS_THREADS]
 *
 * PARAMS and DATA are files in ordo's parameter format (Module:save: the
 * text line "ORDO-PARAMS 2" (or 1), then per tensor a line "name dtype ndim dims... [crc32=x]"
 * and its bytes, then "end"), written by train_bench.lua's prep step:
 * PARAMS holds the model's initial weights (1.weight 512x784, 1.bias,
 * 3.weight, 3.bias, 5.weight, 5.bias: nn.Sequential numbers the ReLUs 2 and
 * 4), DATA the batches (x: NB x B x 784 float32, y: NB*B int64 class
 * indices counted from 1).  Batch i of the run is batch (i-1) mod NB.
 *
 * It trains CHECK steps from those weights and prints the loss of the
 * first and the last of them, then WARMUP more steps, then RUNS timed runs
 * of STEPS steps each, and prints one line per run:
 *
 *   L <step> <loss>            loss of that step (mean over the batch)
 *   R <images/s>               one timed run
 *
 * BLAS_THREADS (default 1) goes to openblas_set_num_threads; run it with
 * OPENBLAS_NUM_THREADS set to the same number so that OpenBLAS does not
 * start a pool it will not use.
 *
 * The arithmetic follows ordo's ops (lua/ordo/nn, lua/ordo/optim.lua), in
 * float32: y = x W^T + b; cross-entropy = mean(logsumexp(z) - z[y]);
 * Adam m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
 * p -= lr/c1 * m / (sqrt(v / c2) + eps), c_k = 1 - b_k^t.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);

enum { NL = 3 };                           /* linear layers */
static const int DIMS[NL + 1] = {784, 512, 256, 10};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "train_peer: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) die("out of memory", NULL);
    memset(p, 0, n);
    return p;
}

/* ---------------------------------------------------------------- files */

typedef struct {
    char name[64], dtype[16];
    int ndim;
    int64_t dims[8], numel;
    void *data;
} entry;

/* Reads every tensor of an ordo parameter file; returns how many (at most max). */
static int read_params(const char *path, entry *out, int max) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    char line[512];
    /* version 2 ends each header line with " crc32=xxxxxxxx", which the
     * sscanf below leaves unread: the checksum is ordo.load's to check */
    if (!fgets(line, sizeof line, f) || (strcmp(line, "ORDO-PARAMS 1\n") != 0 && strcmp(line, "ORDO-PARAMS 2\n") != 0))
        die("not an ordo parameter file", path);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strcmp(line, "end\n")) {
            fclose(f);
            return n;
        }
        if (n == max) die("too many tensors in", path);
        entry *e = &out[n];
        int pos = 0;
        if (sscanf(line, "%63s %15s %d%n", e->name, e->dtype, &e->ndim, &pos) != 3 || e->ndim < 0 || e->ndim > 8)
            die("bad header line in", path);
        e->numel = 1;
        for (int i = 0; i < e->ndim; i++) {
            int used = 0;
            long long d;
            if (sscanf(line + pos, "%lld%n", &d, &used) != 1) die("bad header line in", path);
            pos += used;
            e->dims[i] = d;
            e->numel *= d;
        }
        size_t esize = !strcmp(e->dtype, "float32") ? 4 : !strcmp(e->dtype, "int64") ? 8 : 0;
        if (!esize) die("unexpected dtype (float32 or int64 only)", e->dtype);
        e->data = xalloc((size_t)e->numel * esize);
        if (fread(e->data, esize, (size_t)e->numel, f) != (size_t)e->numel) die("truncated file", path);
        n++;
    }
    die("no end line in", path);
    return 0;
}

static entry *find(entry *es, int n, const char *name, const char *dtype, int ndim) {
    for (int i = 0; i < n; i++) {
        if (!strcmp(es[i].name, name)) {
            if (strcmp(es[i].dtype, dtype) || es[i].ndim != ndim) die("unexpected dtype or shape for", name);
            return &es[i];
        }
    }
    die("missing tensor", name);
    return NULL;
}

/* ---------------------------------------------------------------- model */

typedef struct {
    int nin, nout;
    float *w, *b;         /* nout x nin, nout */
    float *gw, *gb;       /* gradients */
    float *mw, *vw, *mb, *vb; /* Adam's moments */
} layer;

static layer L[NL];
static float *act[NL + 1];  /* act[0] = the batch; act[l] = output of layer l (after ReLU for l < NL) */
static float *dact[NL + 1]; /* gradient of the loss w.r.t. act[l] (dact[NL]: w.r.t. the logits) */

static float forward_backward(const float *x, const int64_t *y, int B) {
    act[0] = (float *)x;
    for (int l = 0; l < NL; l++) {
        const layer *ly = &L[l];
        float *o = act[l + 1];
        /* o = in W^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, ly->nout, ly->nin, 1.0f, act[l], ly->nin, ly->w,
                    ly->nin, 0.0f, o, ly->nout);
        for (int i = 0; i < B; i++) {
            float *r = o + (size_t)i * ly->nout;
            if (l < NL - 1) {
                for (int j = 0; j < ly->nout; j++) {
                    const float v = r[j] + ly->b[j];
                    r[j] = v > 0.0f ? v : 0.0f;
                }
            } else {
                for (int j = 0; j < ly->nout; j++) r[j] += ly->b[j];
            }
        }
    }
    /* softmax cross-entropy, mean over the batch; dlogits = (softmax - onehot) / B */
    const int C = DIMS[NL];
    double loss = 0;
    for (int i = 0; i < B; i++) {
        const float *z = act[NL] + (size_t)i * C;
        float *dz = dact[NL] + (size_t)i * C;
        float m = z[0];
        for (int j = 1; j < C; j++) m = z[j] > m ? z[j] : m;
        float s = 0.0f;
        for (int j = 0; j < C; j++) {
            dz[j] = expf(z[j] - m);
            s += dz[j];
        }
        const float lse = m + logf(s);
        const int t = (int)(y[i] - 1);
        loss += lse - z[t];
        const float inv = 1.0f / (s * (float)B);
        for (int j = 0; j < C; j++) dz[j] *= inv;
        dz[t] -= 1.0f / (float)B;
    }
    for (int l = NL - 1; l >= 0; l--) {
        layer *ly = &L[l];
        const float *g = dact[l + 1];
        /* ReLU: the gradient passes where the output was > 0 */
        if (l < NL - 1) {
            float *gm = dact[l + 1];
            const float *a = act[l + 1];
            for (size_t k = 0; k < (size_t)B * ly->nout; k++) gm[k] = a[k] > 0.0f ? gm[k] : 0.0f;
        }
        /* gW = g^T in (nout x nin), gb = column sums of g */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ly->nout, ly->nin, B, 1.0f, g, ly->nout, act[l], ly->nin,
                    0.0f, ly->gw, ly->nin);
        for (int j = 0; j < ly->nout; j++) ly->gb[j] = 0.0f;
        for (int i = 0; i < B; i++) {
            const float *r = g + (size_t)i * ly->nout;
            for (int j = 0; j < ly->nout; j++) ly->gb[j] += r[j];
        }
        /* d input = g W (not needed for the batch itself) */
        if (l > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, ly->nin, ly->nout, 1.0f, g, ly->nout, ly->w,
                        ly->nin, 0.0f, dact[l], ly->nin);
    }
    return (float)(loss / B);
}

static const float LR = 1e-3f, B1 = 0.9f, B2 = 0.999f, EPS = 1e-8f;

static void adam(float *p, const float *g, float *m, float *v, size_t n, float step, float ic2, float eps) {
    for (size_t k = 0; k < n; k++) {
        m[k] = B1 * m[k] + (1.0f - B1) * g[k];
        v[k] = B2 * v[k] + (1.0f - B2) * g[k] * g[k];
        p[k] -= m[k] / (sqrtf(v[k] * ic2) + eps) * step;
    }
}

static int t_adam; /* steps taken */

static float train_step(const float *x, const int64_t *y, int B) {
    const float loss = forward_backward(x, y, B);
    t_adam++;
    const double c1 = 1.0 - pow(B1, t_adam), c2 = 1.0 - pow(B2, t_adam);
    const float step = (float)(LR / c1), ic2 = (float)(1.0 / c2);
    for (int l = 0; l < NL; l++) {
        layer *ly = &L[l];
        adam(ly->w, ly->gw, ly->mw, ly->vw, (size_t)ly->nout * ly->nin, step, ic2, EPS);
        adam(ly->b, ly->gb, ly->mb, ly->vb, (size_t)ly->nout, step, ic2, EPS);
    }
    return loss;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s PARAMS DATA CHECK WARMUP STEPS RUNS [BLAS_THREADS]\n", argv[0]);
        return 2;
    }
    const int check = atoi(argv[3]), warmup = atoi(argv[4]), steps = atoi(argv[5]), runs = atoi(argv[6]);
    const int threads = argc > 7 ? atoi(argv[7]) : 1;
    openblas_set_num_threads(threads > 0 ? threads : 1);

    entry pe[16], de[4];
    const int np = read_params(argv[1], pe, 16), nd = read_params(argv[2], de, 4);
    static const char *names[NL] = {"1", "3", "5"};
    for (int l = 0; l < NL; l++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "%s.weight", names[l]);
        snprintf(bn, sizeof bn, "%s.bias", names[l]);
        entry *w = find(pe, np, wn, "float32", 2), *b = find(pe, np, bn, "float32", 1);
        layer *ly = &L[l];
        ly->nin = DIMS[l];
        ly->nout = DIMS[l + 1];
        if (w->dims[0] != ly->nout || w->dims[1] != ly->nin || b->dims[0] != ly->nout) die("unexpected shape of", wn);
        const size_t nw = (size_t)ly->nout * ly->nin, nb = (size_t)ly->nout;
        ly->w = w->data;
        ly->b = b->data;
        ly->gw = xalloc(nw * 4);
        ly->mw = xalloc(nw * 4);
        ly->vw = xalloc(nw * 4);
        ly->gb = xalloc(nb * 4);
        ly->mb = xalloc(nb * 4);
        ly->vb = xalloc(nb * 4);
    }
    entry *xe = find(de, nd, "x", "float32", 3), *ye = find(de, nd, "y", "int64", 1);
    const int NB = (int)xe->dims[0], B = (int)xe->dims[1];
    if (xe->dims[2] != DIMS[0] || ye->dims[0] != (int64_t)NB * B) die("unexpected data shape", argv[2]);
    for (int64_t i = 0; i < ye->numel; i++) {
        const int64_t c = ((int64_t *)ye->data)[i];
        if (c < 1 || c > DIMS[NL]) die("class index out of range in", argv[2]);
    }
    for (int l = 1; l <= NL; l++) {
        act[l] = xalloc((size_t)B * DIMS[l] * 4);
        dact[l] = xalloc((size_t)B * DIMS[l] * 4);
    }
    const float *X = xe->data;
    const int64_t *Y = ye->data;
    long it = 0; /* steps taken: step it uses batch it mod NB */
#define STEP() (it++, train_step(X + (size_t)((it - 1) % NB) * B * DIMS[0], Y + (size_t)((it - 1) % NB) * B, B))

    for (int s = 1; s <= check; s++) {
        const float loss = STEP();
        if (s == 1 || s == check) printf("L %d %.9g\n", s, loss);
    }
    fflush(stdout);
    for (int s = 0; s < warmup; s++) STEP();
    volatile float sink = 0;
    for (int r = 0; r < runs; r++) {
        const double t0 = now();
        for (int s = 0; s < steps; s++) sink += STEP();
        const double t1 = now();
        printf("R %.1f\n", (double)steps * B / (t1 - t0));
        fflush(stdout);
    }
    (void)sink;
    return 0;
}
