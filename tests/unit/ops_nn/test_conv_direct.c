/* test_conv_direct.c — Convolution impl "direct" on the shapes that steer
 * its stride-1 paths (conv_direct_fast.c): the column data gradient of
 * small images (with and without whole-vector pixel counts), the
 * full-correlation data gradient of padded layers, pads larger than the
 * kernel extent, dilation and groups, output-channel and pixel tails, row
 * blocks of a single large sample, 1x1 backward (and sources read in
 * place when they need no shifted copy), and weight gradients
 * accumulated over chunks of samples or of one sample's pixels.  Each is checked
 * against plain float64 loops written here (forward, data, weight and bias
 * gradients, req write/add/null), and one configuration's gradients
 * against central finite differences of the float64 forward. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

typedef struct dcfg { int N, C, H, W, M, G, kh, kw, ph, pw, dh, dw, no_bias; } dcfg;

static int odim(int in, int k, int p, int d) { return in + 2 * p - d * (k - 1); }

static void ref_fwd(const dcfg *c, const double *x, const double *w, const double *b, double *y) {
    int Ho = odim(c->H, c->kh, c->ph, c->dh), Wo = odim(c->W, c->kw, c->pw, c->dw), Cg = c->C / c->G, Mg = c->M / c->G;
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double acc = b ? b[m] : 0;
        for (int ci = 0; ci < Cg; ci++) for (int ki = 0; ki < c->kh; ki++) for (int kj = 0; kj < c->kw; kj++) {
            int ih = oh - c->ph + ki * c->dh, iw = ow - c->pw + kj * c->dw;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            acc += w[((m * Cg + ci) * c->kh + ki) * c->kw + kj] * x[((n * c->C + m / Mg * Cg + ci) * c->H + ih) * c->W + iw];
        }
        y[((n * c->M + m) * Ho + oh) * Wo + ow] = acc;
    }
}

static void ref_bwd(const dcfg *c, const double *x, const double *w, const double *dy, double *dx, double *dw, double *db) {
    int Ho = odim(c->H, c->kh, c->ph, c->dh), Wo = odim(c->W, c->kw, c->pw, c->dw), Cg = c->C / c->G, Mg = c->M / c->G;
    memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
    memset(dw, 0, sizeof(double) * (size_t)(c->M * Cg * c->kh * c->kw));
    memset(db, 0, sizeof(double) * (size_t)c->M);
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double g = dy[((n * c->M + m) * Ho + oh) * Wo + ow];
        db[m] += g;
        for (int ci = 0; ci < Cg; ci++) for (int ki = 0; ki < c->kh; ki++) for (int kj = 0; kj < c->kw; kj++) {
            int ih = oh - c->ph + ki * c->dh, iw = ow - c->pw + kj * c->dw;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            int64_t xi = ((n * c->C + m / Mg * Cg + ci) * c->H + ih) * c->W + iw, wi = ((m * Cg + ci) * c->kh + ki) * c->kw + kj;
            dx[xi] += g * w[wi];
            dw[wi] += g * x[xi];
        }
    }
}

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static void node_of(fh_node *n, const dcfg *c) {
    char kw[256];
    snprintf(kw, sizeof kw, "kernel=(%d,%d) pad=(%d,%d) dilate=(%d,%d) num_filter=%d num_group=%d no_bias=%s",
             c->kh, c->kw, c->ph, c->pw, c->dh, c->dw, c->M, c->G, c->no_bias ? "True" : "False");
    cr_assert_eq(fh_node_init(n, pack, "Convolution", "direct", kw, MXP_DTYPE_F32), 0, "%s", fh_error());
    n->in_shape[0] = (mxp_shape){4, 0, {c->N, c->C, c->H, c->W}};
    cr_assert_eq(fh_node_infer(n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(n, 1), 1, "direct refused %s: %s", kw, n->reason);
}

#define F32 MXP_DTYPE_F32
static void check(const dcfg *c, uint64_t seed) {
    const double tol = 1e-5;
    fh_node n;
    node_of(&n, c);
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], F32, nx, &seed, -1, 1);
    tu_fill(n.in[1], F32, nw, &seed, -1, 1);
    if (!c->no_bias) tu_fill(n.in[2], F32, c->M, &seed, -1, 1);
    tu_fill(n.out_grad[0], F32, ny, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], F32, nx), *w = tu_to_f64(n.in[1], F32, nw);
    double *b = c->no_bias ? NULL : tu_to_f64(n.in[2], F32, c->M), *dy = tu_to_f64(n.out_grad[0], F32, ny);
    double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * (size_t)c->M);
    ref_fwd(c, x, w, b, y);
    ref_bwd(c, x, w, dy, dx, dw, db);
    const char *what = "N C H W M G kh kw ph pw dh dw";
    #define CTX what, c->N, c->C, c->H, c->W, c->M, c->G, c->kh, c->kw, c->ph, c->pw, c->dh, c->dw
    #define FMT "%s = %d %d %d %d %d %d %d %d %d %d %d %d"

    /* forward: write over garbage, then add */
    tu_fill(n.out[0], F32, ny, &seed, 5, 9);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    double e = tu_relerr(n.out[0], F32, y, ny);
    cr_assert(e <= tol, "fwd " FMT ": relerr %g", CTX, e);
    int32_t add1[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add1), 0);
    for (int64_t i = 0; i < ny; i++) y[i] *= 2;
    e = tu_relerr(n.out[0], F32, y, ny);
    cr_assert(e <= tol, "fwd add " FMT ": relerr %g", CTX, e);

    /* backward: write over garbage */
    tu_fill(n.in_grad[0], F32, nx, &seed, 5, 9);
    tu_fill(n.in_grad[1], F32, nw, &seed, 5, 9);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    e = tu_relerr(n.in_grad[0], F32, dx, nx);
    cr_assert(e <= tol, "dx " FMT ": relerr %g", CTX, e);
    e = tu_relerr(n.in_grad[1], F32, dw, nw);
    cr_assert(e <= tol, "dw " FMT ": relerr %g", CTX, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], F32, db, c->M); cr_assert(e <= tol, "db " FMT ": %g", CTX, e); }

    /* add on every gradient doubles them */
    int32_t adds[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(fh_node_backward(&n, adds), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    for (int64_t i = 0; i < nw; i++) dw[i] *= 2;
    for (int i = 0; i < c->M; i++) db[i] *= 2;
    e = tu_relerr(n.in_grad[0], F32, dx, nx);
    cr_assert(e <= tol, "dx add " FMT ": relerr %g", CTX, e);
    e = tu_relerr(n.in_grad[1], F32, dw, nw);
    cr_assert(e <= tol, "dw add " FMT ": relerr %g", CTX, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], F32, db, c->M); cr_assert(e <= tol, "db add " FMT ": %g", CTX, e); }

    /* null data gradient: dx untouched while dW is written; null dW: dW untouched */
    memset(n.in_grad[0], 0, (size_t)nx * sizeof(float));
    int32_t nodx[3] = {MXP_REQ_NULL, MXP_REQ_WRITE, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodx), 0);
    for (int64_t i = 0; i < nx; i++) cr_assert_eq(((float *)n.in_grad[0])[i], 0.0f);
    for (int64_t i = 0; i < nw; i++) dw[i] /= 2;
    for (int i = 0; i < c->M; i++) db[i] /= 2;
    e = tu_relerr(n.in_grad[1], F32, dw, nw);
    cr_assert(e <= tol, "dw (no dx) " FMT ": relerr %g", CTX, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], F32, db, c->M); cr_assert(e <= tol, "db (no dx) " FMT ": %g", CTX, e); }
    /* null weight gradient: dW untouched, the bias gradient still written */
    memset(n.in_grad[1], 0, (size_t)nw * sizeof(float));
    if (!c->no_bias) tu_fill(n.in_grad[2], F32, c->M, &seed, 5, 9);
    int32_t nodw[3] = {MXP_REQ_WRITE, MXP_REQ_NULL, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodw), 0);
    for (int64_t i = 0; i < nw; i++) cr_assert_eq(((float *)n.in_grad[1])[i], 0.0f);
    for (int64_t i = 0; i < nx; i++) dx[i] /= 2;
    e = tu_relerr(n.in_grad[0], F32, dx, nx);
    cr_assert(e <= tol, "dx (no dw) " FMT ": relerr %g", CTX, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], F32, db, c->M); cr_assert(e <= tol, "db (no dw) " FMT ": %g", CTX, e); }

    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    fh_node_free(&n);
}

Test(conv_direct, stride1_paths_match_reference, .init = setup, .fini = teardown, .timeout = 120) {
    static const dcfg cases[] = {
        /* N  C   H   W   M  G kh kw ph pw dh dw nb */
        {3, 1, 28, 28, 20, 1, 5, 5, 0, 0, 1, 1, 0},   /* layer (a): column dx, 576 pixels */
        {2, 20, 12, 12, 50, 1, 5, 5, 0, 0, 1, 1, 0},  /* layer (b): column dx, 64 pixels  */
        {2, 4, 10, 9, 6, 1, 4, 4, 0, 0, 1, 1, 1},     /* column dx, 42 pixels (tail)     */
        {2, 7, 13, 11, 13, 1, 3, 3, 1, 1, 1, 1, 0},   /* padded: full-correlation dx      */
        {2, 6, 15, 17, 9, 3, 3, 2, 2, 1, 2, 1, 0},    /* groups, dilation, pads          */
        {1, 3, 5, 6, 4, 1, 2, 2, 3, 3, 1, 1, 0},      /* pad beyond the kernel extent    */
        {2, 17, 9, 7, 11, 1, 1, 1, 0, 0, 1, 1, 0},    /* 1x1 backward                    */
        {1, 3, 40, 70, 33, 1, 3, 3, 0, 1, 1, 1, 0},   /* one sample: row blocks          */
        {2, 5, 9, 8, 1, 1, 3, 3, 1, 1, 1, 1, 0},      /* one output channel              */
        {2, 2, 8, 30, 16, 2, 3, 5, 1, 2, 1, 1, 1},    /* groups with 8 filters each      */
        {12, 16, 30, 29, 12, 1, 3, 3, 0, 0, 1, 1, 0}, /* dW in sample chunks (5 + 5 + 2) */
        {2, 64, 40, 40, 8, 1, 3, 3, 0, 1, 1, 1, 0},   /* dW one sample per chunk         */
        {1, 256, 60, 60, 4, 1, 3, 3, 0, 0, 1, 1, 1},  /* dW in pixel pieces (> 8 MiB)    */
        {2, 24, 8, 8, 20, 1, 1, 1, 0, 0, 1, 1, 0},    /* 1x1, whole vectors: x and dy read in place */
        {2, 12, 4, 8, 6, 3, 1, 1, 0, 0, 1, 1, 1},     /* the same with groups            */
        {2, 5, 10, 16, 7, 1, 3, 1, 0, 0, 1, 1, 0},    /* one column tap: x read in place  */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i], 100 + i);
}

/* Gradients of L = sum(y * dy) from the float32 impl against central
 * differences of the float64 reference forward (no shared code with the
 * impl or with ref_bwd). */
Test(conv_direct, gradients_match_finite_differences, .init = setup, .fini = teardown) {
    const dcfg c = {2, 3, 7, 8, 5, 1, 3, 2, 1, 0, 1, 2, 0};
    fh_node n;
    node_of(&n, &c);
    uint64_t seed = 11;
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], F32, nx, &seed, -1, 1);
    tu_fill(n.in[1], F32, nw, &seed, -1, 1);
    tu_fill(n.in[2], F32, c.M, &seed, -1, 1);
    tu_fill(n.out_grad[0], F32, ny, &seed, -1, 1);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    double *v[3] = {tu_to_f64(n.in[0], F32, nx), tu_to_f64(n.in[1], F32, nw), tu_to_f64(n.in[2], F32, c.M)};
    double *dy = tu_to_f64(n.out_grad[0], F32, ny), *y = malloc(sizeof(double) * (size_t)ny);
    int64_t cnt[3] = {nx, nw, c.M};
    const double h = 1e-4;
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < cnt[k]; i += 1 + cnt[k] / 40) {
            double save = v[k][i], l[2];
            for (int s = 0; s < 2; s++) {
                v[k][i] = save + (s ? -h : h);
                ref_fwd(&c, v[0], v[1], v[2], y);
                l[s] = 0;
                for (int64_t q = 0; q < ny; q++) l[s] += y[q] * dy[q];
            }
            v[k][i] = save;
            double fd = (l[0] - l[1]) / (2 * h), got = ((float *)n.in_grad[k])[i];
            cr_assert(fabs(fd - got) <= 1e-4 * (1 + fabs(fd)), "input %d elem %lld: fd %.9g direct %.9g", k,
                      (long long)i, fd, got);
        }
    for (int k = 0; k < 3; k++) free(v[k]);
    free(dy); free(y);
    fh_node_free(&n);
}
