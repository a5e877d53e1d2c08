/* test_conv_winograd.c — the Convolution impl "winograd" (F(4x4,3x3),
 * float32) against an independent float64 plain-loop reference: forward,
 * backward (data, weight, bias) with req write / add / null, on shapes that
 * exercise its tiling (ragged 4x4 tiles, several chunks of tiles, pads 0-2
 * with ph != pw, groups, channel counts that are not multiples of 8 or 16,
 * maps 32 and 48 wide, whose 8-tile runs take the row-kernel transforms,
 * and 16 wide, whose 4-tile runs take the 4-run ones).
 * The reference's own gradients are checked against central finite
 * differences in float64, so a wrong reference cannot pass wrong code.
 * Also: which configurations `supports` refuses, and that it says why.
 * Tolerance: norm-wise relative error 1e-4 (the winograd accuracy rule). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

typedef struct wcfg { int N, C, H, W, M, G, ph, pw, no_bias; } wcfg;

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static int odim(int in, int p) { return in + 2 * p - 2; }

/* y[n][m][oh][ow] = b[m] + Σ_{c in group, a, e} w[m][c][a][e] x[n][g*Cg+c][oh-ph+a][ow-pw+e] */
static void ref_fwd(const wcfg *c, const double *x, const double *w, const double *b, double *y) {
    int Ho = odim(c->H, c->ph), Wo = odim(c->W, c->pw), Cg = c->C / c->G, Mg = c->M / c->G;
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++)
        for (int ow = 0; ow < Wo; ow++) {
            double acc = b ? b[m] : 0;
            for (int ci = 0; ci < Cg; ci++) for (int a = 0; a < 3; a++) for (int e = 0; e < 3; e++) {
                int ih = oh - c->ph + a, iw = ow - c->pw + e;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                acc += w[((m * Cg + ci) * 3 + a) * 3 + e] * x[((n * c->C + (m / Mg) * Cg + ci) * c->H + ih) * c->W + iw];
            }
            y[((n * c->M + m) * Ho + oh) * Wo + ow] = acc;
        }
}

static void ref_bwd(const wcfg *c, const double *x, const double *w, const double *dy, double *dx, double *dw,
                    double *db) {
    int Ho = odim(c->H, c->ph), Wo = odim(c->W, c->pw), Cg = c->C / c->G, Mg = c->M / c->G;
    memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
    memset(dw, 0, sizeof(double) * (size_t)(c->M * Cg * 9));
    memset(db, 0, sizeof(double) * (size_t)c->M);
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++)
        for (int ow = 0; ow < Wo; ow++) {
            double g = dy[((n * c->M + m) * Ho + oh) * Wo + ow];
            db[m] += g;
            for (int ci = 0; ci < Cg; ci++) for (int a = 0; a < 3; a++) for (int e = 0; e < 3; e++) {
                int ih = oh - c->ph + a, iw = ow - c->pw + e;
                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                int64_t xi = ((n * c->C + (m / Mg) * Cg + ci) * c->H + ih) * c->W + iw, wi = ((m * Cg + ci) * 3 + a) * 3 + e;
                dx[xi] += g * w[wi];
                dw[wi] += g * x[xi];
            }
        }
}

static void kwargs(const wcfg *c, char *buf, size_t n) {
    snprintf(buf, n, "kernel=(3,3) pad=(%d,%d) num_filter=%d num_group=%d no_bias=%s", c->ph, c->pw, c->M, c->G,
             c->no_bias ? "True" : "False");
}

/* Forward, forward add, backward, backward add, backward without dx. */
static void check_cfg(const wcfg *c, uint64_t seed) {
    const double tol = 1e-4;
    char kw[200]; kwargs(c, kw, sizeof kw);
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "winograd", kw, MXP_DTYPE_F32), 0, "%s", fh_error());
    n.in_shape[0] = (mxp_shape){4, 0, {c->N, c->C, c->H, c->W}};
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "winograd refused %s: %s", kw, n.reason);
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], MXP_DTYPE_F32, nx, &seed, -1, 1);
    tu_fill(n.in[1], MXP_DTYPE_F32, nw, &seed, -1, 1);
    if (!c->no_bias) tu_fill(n.in[2], MXP_DTYPE_F32, c->M, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], MXP_DTYPE_F32, nx), *w = tu_to_f64(n.in[1], MXP_DTYPE_F32, nw);
    double *b = c->no_bias ? NULL : tu_to_f64(n.in[2], MXP_DTYPE_F32, c->M);
    double *y = malloc(sizeof(double) * (size_t)ny);
    ref_fwd(c, x, w, b, y);
    /* garbage in the output must not leak into a write */
    for (int64_t i = 0; i < ny; i++) ((float *)n.out[0])[i] = 1e30f;
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    double e = tu_relerr(n.out[0], MXP_DTYPE_F32, y, ny);
    cr_assert(e <= tol, "fwd %s N%d C%d H%d W%d: relerr %g", kw, c->N, c->C, c->H, c->W, e);
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add), 0);
    for (int64_t i = 0; i < ny; i++) y[i] *= 2;
    e = tu_relerr(n.out[0], MXP_DTYPE_F32, y, ny);
    cr_assert(e <= tol, "fwd add %s: relerr %g", kw, e);

    tu_fill(n.out_grad[0], MXP_DTYPE_F32, ny, &seed, -1, 1);
    double *dy = tu_to_f64(n.out_grad[0], MXP_DTYPE_F32, ny);
    double *dx = malloc(sizeof(double) * (size_t)nx), *dw = malloc(sizeof(double) * (size_t)nw);
    double *db = malloc(sizeof(double) * (size_t)c->M);
    ref_bwd(c, x, w, dy, dx, dw, db);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    e = tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, nx);
    cr_assert(e <= tol, "dx %s N%d C%d H%d W%d: relerr %g", kw, c->N, c->C, c->H, c->W, e);
    e = tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dw, nw);
    cr_assert(e <= tol, "dw %s N%d C%d H%d W%d: relerr %g", kw, c->N, c->C, c->H, c->W, e);
    if (!c->no_bias) {
        e = tu_relerr(n.in_grad[2], MXP_DTYPE_F32, db, c->M);
        cr_assert(e <= tol, "db %s: relerr %g", kw, e);
    }
    int32_t adds[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(fh_node_backward(&n, adds), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    for (int64_t i = 0; i < nw; i++) dw[i] *= 2;
    for (int i = 0; i < c->M; i++) db[i] *= 2;
    e = tu_relerr(n.in_grad[0], MXP_DTYPE_F32, dx, nx);
    cr_assert(e <= tol, "dx add %s: relerr %g", kw, e);
    e = tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dw, nw);
    cr_assert(e <= tol, "dw add %s: relerr %g", kw, e);
    if (!c->no_bias) {
        e = tu_relerr(n.in_grad[2], MXP_DTYPE_F32, db, c->M);
        cr_assert(e <= tol, "db add %s: relerr %g", kw, e);
    }
    /* no data gradient: dx untouched, dw and db still written */
    for (int64_t i = 0; i < nx; i++) ((float *)n.in_grad[0])[i] = 7.0f;
    for (int64_t i = 0; i < nw; i++) dw[i] /= 2;
    int32_t nodx[3] = {MXP_REQ_NULL, MXP_REQ_WRITE, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodx), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) cr_assert_eq(((float *)n.in_grad[0])[i], 7.0f);
    e = tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dw, nw);
    cr_assert(e <= tol, "dw without dx %s: relerr %g", kw, e);
    if (!c->no_bias) { /* bias gradient alone (it is otherwise summed in the weight-gradient pass) */
        for (int i = 0; i < c->M; i++) db[i] /= 2;
        for (int64_t i = 0; i < nw; i++) ((float *)n.in_grad[1])[i] = 5.0f;
        int32_t onlydb[3] = {MXP_REQ_NULL, MXP_REQ_NULL, MXP_REQ_WRITE};
        cr_assert_eq(fh_node_backward(&n, onlydb), 0, "%s", fh_error());
        for (int64_t i = 0; i < nw; i++) cr_assert_eq(((float *)n.in_grad[1])[i], 5.0f);
        e = tu_relerr(n.in_grad[2], MXP_DTYPE_F32, db, c->M);
        cr_assert(e <= tol, "db alone %s: relerr %g", kw, e);
    }
    free(x); free(w); free(b); free(y); free(dy); free(dx); free(dw); free(db);
    fh_node_free(&n);
}

/* The reference's gradients against central differences of
 * L = Σ y·dy in float64 (so the reference itself is checked). */
Test(conv_winograd, reference_matches_finite_differences) {
    wcfg c = {2, 3, 6, 5, 4, 1, 1, 2, 0};
    int Ho = odim(c.H, c.ph), Wo = odim(c.W, c.pw);
    int64_t nx = c.N * c.C * c.H * c.W, nw = c.M * c.C * 9, ny = c.N * c.M * Ho * Wo;
    double *x = malloc(sizeof(double) * (size_t)nx), *w = malloc(sizeof(double) * (size_t)nw), b[4];
    double *dy = malloc(sizeof(double) * (size_t)ny), *y = malloc(sizeof(double) * (size_t)ny);
    double *dx = malloc(sizeof(double) * (size_t)nx), *dw = malloc(sizeof(double) * (size_t)nw), db[4];
    uint64_t r = 11;
    for (int64_t i = 0; i < nx; i++) x[i] = fh_rand(&r, -1, 1);
    for (int64_t i = 0; i < nw; i++) w[i] = fh_rand(&r, -1, 1);
    for (int i = 0; i < 4; i++) b[i] = fh_rand(&r, -1, 1);
    for (int64_t i = 0; i < ny; i++) dy[i] = fh_rand(&r, -1, 1);
    ref_bwd(&c, x, w, dy, dx, dw, db);
    const double h = 1e-6;
    double *vars[3] = {x, w, b}, *grads[3] = {dx, dw, db};
    int64_t cnt[3] = {nx, nw, 4};
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < cnt[k]; i += 3) {
            double save = vars[k][i], lp = 0, lm = 0;
            vars[k][i] = save + h; ref_fwd(&c, x, w, b, y);
            for (int64_t q = 0; q < ny; q++) lp += y[q] * dy[q];
            vars[k][i] = save - h; ref_fwd(&c, x, w, b, y);
            for (int64_t q = 0; q < ny; q++) lm += y[q] * dy[q];
            vars[k][i] = save;
            double fd = (lp - lm) / (2 * h);
            cr_assert(fabs(fd - grads[k][i]) <= 1e-6 * (1 + fabs(fd)), "input %d elem %lld: fd %.9g analytic %.9g", k,
                      (long long)i, fd, grads[k][i]);
        }
    }
    free(x); free(w); free(dy); free(y); free(dx); free(dw);
}

Test(conv_winograd, agrees_with_reference, .init = setup, .fini = teardown, .timeout = 120) {
    const wcfg cfgs[] = {
        {1, 1, 3, 3, 1, 1, 0, 0, 0},     /* one output pixel                     */
        {2, 3, 9, 11, 5, 1, 1, 1, 0},    /* ragged tiles both ways               */
        {1, 4, 7, 6, 3, 1, 2, 0, 1},     /* pad 2 / 0 (data gradient pads 0 / 2) */
        {2, 6, 10, 13, 10, 2, 0, 2, 0},  /* groups, Mg not a multiple of 8       */
        {3, 20, 17, 19, 24, 1, 1, 1, 0}, /* Cg > 16 (not a multiple), 3 blocks of 8 filters, 
                                            several chunks of tiles             */
        {2, 17, 30, 29, 9, 1, 1, 2, 1},  /* many tiles, odd channel counts       */
        {4, 32, 8, 8, 40, 1, 1, 1, 0},   /* 5 filter blocks, Cg a multiple of 16 */
        {3, 6, 21, 18, 5, 1, 1, 1, 0},   /* tiles-in-lanes weight gradient: 6 chunks
                                            of 16 tiles, the last ragged (10), both
                                            channel counts padded to 8 */
        {2, 16, 32, 32, 16, 1, 1, 1, 1}, /* ResNet-20's 16-channel layer (tiles in
                                            the lanes, chunks of many tiles)     */
        {5, 64, 32, 32, 8, 1, 1, 1, 0},  /* 320 tiles: 5 chunks re-cut into 7 of 48
                                            (wino_plan_make's multiple-of-4 rule)  */
        {2, 5, 10, 48, 6, 1, 1, 1, 0},   /* rows of 12 tiles: runs of 8 adjacent
                                            tiles by the row kernels
                                            (wino_in_tf16_rows8 / dy_tf16_rows8),
                                            the groups that straddle tile rows by
                                            the 16-pointer gathers             */
        {2, 32, 16, 16, 32, 1, 1, 1, 1}, /* ResNet-20's 32-channel layer: rows of 4
                                            tiles, every group four runs of 4
                                            (wino_in_tf16_rows4 / dy_tf16_rows4) */
        {3, 5, 13, 16, 7, 1, 1, 1, 0},   /* rows of 4 with ragged bottom tiles  */
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) check_cfg(&cfgs[i], 100 + i);
}

Test(conv_winograd, refuses_what_it_cannot_do, .init = setup, .fini = teardown) {
    struct { const char *kw; int32_t dt; const char *why; } cases[] = {
        {"kernel=(5,5) num_filter=4", MXP_DTYPE_F32, "3x3"},
        {"kernel=(3,2) num_filter=4", MXP_DTYPE_F32, "3x3"},
        {"kernel=(3,3) stride=(2,1) num_filter=4", MXP_DTYPE_F32, "stride"},
        {"kernel=(3,3) dilate=(1,2) num_filter=4", MXP_DTYPE_F32, "dilation"},
        {"kernel=(3,3) pad=(3,1) num_filter=4", MXP_DTYPE_F32, "pad"},
        {"kernel=(3,3) num_filter=4", MXP_DTYPE_F64, "float32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "Convolution", "winograd", cases[i].kw, cases[i].dt), 0, "%s", fh_error());
        n.in_shape[0] = (mxp_shape){4, 0, {2, 3, 12, 12}};
        cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
        cr_assert_eq(fh_node_alloc(&n, 1), 0, "winograd accepted %s", cases[i].kw);
        cr_assert(strstr(n.reason, cases[i].why), "reason for %s: '%s'", cases[i].kw, n.reason);
        fh_node_free(&n);
    }
}
