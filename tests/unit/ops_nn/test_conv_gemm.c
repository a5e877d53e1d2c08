/* test_conv_gemm.c — the gemm Convolution impl's own paths against an
 * independent float64 plain-loop reference (written here): the float32
 * im2col/col2im fast path (row widths 8/16/24 and odd ones, padding on
 * both axes, stride and dilation along H only — along W the generic path
 * runs, also checked), the sample-block path (ragged near-equal blocks,
 * groups, no bias), the row-item path (large columns), the 1x1 path (several pixel blocks per sample, a
 * ragged last block), req add / null per gradient (a null data gradient
 * leaves dx untouched and still gives dW/db), float64, and central finite
 * differences in float64 on the sample-block and 1x1 paths. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

typedef struct gcfg { int N, C, H, W, M, G, kh, kw, sh, sw, ph, pw, dh, dw, no_bias; } gcfg;

static int odim(int in, int k, int s, int p, int d) { return (in + 2 * p - (d * (k - 1) + 1)) / s + 1; }

/* y = conv(x, w) + b, and the three gradients of sum(y * dy), in float64. */
static void reference(const gcfg *c, const double *x, const double *w, const double *b, const double *dy,
                      double *y, double *dx, double *dw, double *db) {
    int Ho = odim(c->H, c->kh, c->sh, c->ph, c->dh), Wo = odim(c->W, c->kw, c->sw, c->pw, c->dw);
    int Cg = c->C / c->G, Mg = c->M / c->G;
    memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
    memset(dw, 0, sizeof(double) * (size_t)(c->M * Cg * c->kh * c->kw));
    memset(db, 0, sizeof(double) * (size_t)c->M);
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        int gr = m / Mg, yi = ((n * c->M + m) * Ho + oh) * Wo + ow;
        double acc = b ? b[m] : 0, g = dy[yi];
        db[m] += g;
        for (int ci = 0; ci < Cg; ci++) for (int ki = 0; ki < c->kh; ki++) for (int kj = 0; kj < c->kw; kj++) {
            int ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            int xi = ((n * c->C + gr * Cg + ci) * c->H + ih) * c->W + iw, wi = ((m * Cg + ci) * c->kh + ki) * c->kw + kj;
            acc += w[wi] * x[xi];
            dx[xi] += g * w[wi];
            dw[wi] += g * x[xi];
        }
        y[yi] = acc;
    }
}

static void kwargs(const gcfg *c, char *buf, size_t n) {
    snprintf(buf, n, "kernel=(%d,%d) stride=(%d,%d) pad=(%d,%d) dilate=(%d,%d) num_filter=%d num_group=%d no_bias=%s",
             c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->M, c->G, c->no_bias ? "True" : "False");
}

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

#define CHECK(got, ref, cnt, what) do { double e_ = tu_relerr((got), dt, (ref), (cnt)); \
    cr_assert(e_ <= tol, "%s %s N%d C%d H%d W%d M%d G%d: relerr %g", (what), kw, c->N, c->C, c->H, c->W, c->M, c->G, e_); } while (0)

/* Forward (write, add) and backward (write; add; null data; null weight)
 * of the gemm impl on c, against the reference. */
static void check_cfg(const gcfg *c, int32_t dt, double tol, uint64_t seed) {
    char kw[256]; kwargs(c, kw, sizeof kw);
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "gemm", kw, dt), 0, "%s", fh_error());
    n.in_shape[0] = (mxp_shape){4, 0, {c->N, c->C, c->H, c->W}};
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "gemm refused %s: %s", kw, n.reason);
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], dt, nx, &seed, -1, 1);
    tu_fill(n.in[1], dt, nw, &seed, -1, 1);
    if (!c->no_bias) tu_fill(n.in[2], dt, c->M, &seed, -1, 1);
    tu_fill(n.out_grad[0], dt, ny, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], dt, nx), *w = tu_to_f64(n.in[1], dt, nw), *dy = tu_to_f64(n.out_grad[0], dt, ny);
    double *b = c->no_bias ? NULL : tu_to_f64(n.in[2], dt, c->M);
    double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * (size_t)c->M);
    reference(c, x, w, b, dy, y, dx, dw, db);

    /* forward over garbage, then req add doubles it */
    for (int64_t i = 0; i < ny; i++) tu_set(n.out[0], dt, i, 1e3);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    CHECK(n.out[0], y, ny, "fwd");
    int32_t add1[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add1), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++) y[i] *= 2;
    CHECK(n.out[0], y, ny, "fwd add");

    /* backward over garbage */
    for (int64_t i = 0; i < nx; i++) tu_set(n.in_grad[0], dt, i, -7);
    for (int64_t i = 0; i < nw; i++) tu_set(n.in_grad[1], dt, i, -7);
    if (!c->no_bias) for (int i = 0; i < c->M; i++) tu_set(n.in_grad[2], dt, i, -7);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    CHECK(n.in_grad[0], dx, nx, "dx");
    CHECK(n.in_grad[1], dw, nw, "dw");
    if (!c->no_bias) CHECK(n.in_grad[2], db, c->M, "db");

    /* req add on every gradient doubles them */
    int32_t adds[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(fh_node_backward(&n, adds), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    for (int64_t i = 0; i < nw; i++) dw[i] *= 2;
    for (int i = 0; i < c->M; i++) db[i] *= 2;
    CHECK(n.in_grad[0], dx, nx, "dx add");
    CHECK(n.in_grad[1], dw, nw, "dw add");
    if (!c->no_bias) CHECK(n.in_grad[2], db, c->M, "db add");

    /* null data gradient: dx untouched (garbage stays), dW and db written */
    for (int64_t i = 0; i < nx; i++) tu_set(n.in_grad[0], dt, i, 5);
    int32_t nodx[3] = {MXP_REQ_NULL, MXP_REQ_WRITE, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodx), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) cr_assert_eq(tu_get(n.in_grad[0], dt, i), 5.0, "dx written under req null");
    for (int64_t i = 0; i < nw; i++) dw[i] /= 2;
    for (int i = 0; i < c->M; i++) db[i] /= 2;
    CHECK(n.in_grad[1], dw, nw, "dw (dx null)");
    if (!c->no_bias) CHECK(n.in_grad[2], db, c->M, "db (dx null)");

    /* null weight gradient: dW untouched, dx written */
    for (int64_t i = 0; i < nw; i++) tu_set(n.in_grad[1], dt, i, 3);
    int32_t nodw[3] = {MXP_REQ_WRITE, MXP_REQ_NULL, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodw), 0, "%s", fh_error());
    for (int64_t i = 0; i < nw; i++) cr_assert_eq(tu_get(n.in_grad[1], dt, i), 3.0, "dw written under req null");
    for (int64_t i = 0; i < nx; i++) dx[i] /= 2;
    CHECK(n.in_grad[0], dx, nx, "dx (dw null)");

    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    fh_node_free(&n);
}

/* Row widths the float32 fast path specializes (8, 16, 24) and generic
 * ones, with padding on both axes and H stride/dilation; the row-block
 * path (one sample, large column) and the sample-block path both run. */
Test(conv_gemm, im2col_fast_path_widths, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg cs[] = {
        /* N  C  H   W   M  G kh kw sh sw ph pw dh dw nb */
        {3, 2, 12, 12, 5, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},  /* Wo 8 */
        {2, 3, 20, 20, 4, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},  /* Wo 16 */
        {2, 1, 28, 28, 6, 1, 5, 5, 1, 1, 0, 0, 1, 1, 1},  /* Wo 24 (LeNet conv1) */
        {2, 3, 9, 13, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0},   /* Wo 13, W pad edges */
        {2, 2, 11, 45, 3, 1, 3, 4, 2, 1, 2, 3, 1, 1, 0},  /* Wo 48, H stride 2 */
        {1, 3, 14, 7, 5, 1, 3, 3, 1, 1, 2, 2, 2, 1, 0},   /* H dilation, wide pad */
        {2, 2, 6, 5, 3, 1, 5, 7, 1, 1, 1, 4, 1, 1, 0},    /* kernel wider than W: all-pad rows */
        {2, 4, 10, 11, 6, 2, 3, 2, 2, 1, 1, 0, 1, 1, 1},  /* groups */
        {2, 3, 10, 15, 4, 1, 3, 3, 1, 2, 1, 1, 1, 2, 0},  /* W stride/dilation: generic path */
        {1, 64, 20, 18, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0}, /* row-block path (large column) */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_cfg(&cs[i], MXP_DTYPE_F32, 1e-5, 11 + i);
}

/* Batches cut into near-equal sample blocks: block counts that do not
 * divide N, groups, no bias; LeNet's layers at a small batch. */
Test(conv_gemm, sample_blocks, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg cs[] = {
        {7, 2, 12, 12, 5, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {13, 20, 12, 12, 10, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {9, 1, 28, 28, 20, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {10, 4, 8, 9, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {5, 3, 7, 8, 4, 1, 2, 2, 2, 1, 0, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_cfg(&cs[i], MXP_DTYPE_F32, 1e-5, 31 + i);
}

/* 1x1: one sample split into several pixel blocks with a ragged last one
 * (P = 143), a batch of a few samples, groups, no bias. */
Test(conv_gemm, one_by_one, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg cs[] = {
        {1, 16, 11, 13, 8, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {3, 24, 9, 9, 12, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {2, 8, 7, 10, 6, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        {9, 5, 4, 4, 7, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {1, 32, 40, 40, 16, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0}, /* P 1600: 8 pixel blocks */
        {8, 512, 4, 40, 16, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0}, /* wide C: backward sub-blocks */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_cfg(&cs[i], MXP_DTYPE_F32, 1e-5, 51 + i);
}

/* Large column matrices from 4 samples: (sample, row block) items with a
 * ragged last row block, groups, H stride and dilation with padding. */
Test(conv_gemm, row_items, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg cs[] = {
        {4, 36, 40, 40, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0},  /* ragged row blocks, backward too */
        {5, 72, 30, 30, 8, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {4, 64, 33, 30, 6, 1, 3, 3, 2, 1, 2, 1, 2, 1, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_cfg(&cs[i], MXP_DTYPE_F32, 1e-5, 61 + i);
    check_cfg(&cs[0], MXP_DTYPE_F64, 1e-12, 64);
}

Test(conv_gemm, float64_paths, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg cs[] = {
        {7, 2, 12, 12, 5, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {1, 16, 11, 13, 8, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {2, 3, 9, 13, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0},
        {1, 64, 20, 18, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) check_cfg(&cs[i], MXP_DTYPE_F64, 1e-12, 71 + i);
}

/* Central differences in float64 of L = sum(y * dy) w.r.t. every third
 * element of data, weight and bias. */
static void fd_check(const gcfg *c, uint64_t seed) {
    char kw[256]; kwargs(c, kw, sizeof kw);
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "gemm", kw, MXP_DTYPE_F64), 0);
    n.in_shape[0] = (mxp_shape){4, 0, {c->N, c->C, c->H, c->W}};
    cr_assert_eq(fh_node_infer(&n), 0);
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    int nin = c->no_bias ? 2 : 3;
    for (int k = 0; k < nin; k++) tu_fill(n.in[k], MXP_DTYPE_F64, fh_shape_numel(&n.in_shape[k]), &seed, -1, 1);
    tu_fill(n.out_grad[0], MXP_DTYPE_F64, fh_shape_numel(&n.out_shape[0]), &seed, -1, 1);
    const int check[3] = {1, 1, nin > 2};
    tu_fd_check_every(&n, 1, check, 1e-6, 3);
    fh_node_free(&n);
}

Test(conv_gemm, finite_differences, .init = setup, .fini = teardown, .timeout = 120) {
    gcfg sb = {5, 2, 6, 7, 3, 1, 3, 3, 1, 1, 1, 0, 1, 1, 0};  /* sample blocks */
    gcfg px = {1, 6, 5, 7, 4, 2, 1, 1, 1, 1, 0, 0, 1, 1, 0};  /* 1x1 */
    fd_check(&sb, 5);
    fd_check(&px, 6);
}
