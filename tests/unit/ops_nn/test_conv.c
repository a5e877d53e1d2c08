/* test_conv.c — Convolution impls (gemm, direct, winograd, pointwise, strip) against an
 * independent float64 plain-loop reference: forward, backward (data,
 * weight, bias), req add, shape inference (weight/bias filled, EINCOMPLETE
 * vs ESHAPE), float64 finite differences for gemm, and how many random
 * configurations each impl actually ran on.  Timings of the reference
 * layers (a)-(e) are bench/conv's job. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

typedef struct cfg { int N, C, H, W, M, G, kh, kw, sh, sw, ph, pw, dh, dw, no_bias; } cfg;

static int out_dim(int in, int k, int s, int p, int d) { return (in + 2 * p - (d * (k - 1) + 1)) / s + 1; }

/* Reference: y[n][m][oh][ow] = b[m] + sum_{c in group, ki, kj} w[m][c][ki][kj] x[n][g*Cg+c][ih][iw]. */
static void ref_forward(const cfg *c, const double *x, const double *w, const double *b, double *y) {
    int Ho = out_dim(c->H, c->kh, c->sh, c->ph, c->dh), Wo = out_dim(c->W, c->kw, c->sw, c->pw, c->dw);
    int Cg = c->C / c->G, Mg = c->M / c->G;
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double acc = b ? b[m] : 0;
        int gr = m / Mg;
        for (int ci = 0; ci < Cg; ci++) for (int ki = 0; ki < c->kh; ki++) for (int kj = 0; kj < c->kw; kj++) {
            int ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            acc += w[((m * Cg + ci) * c->kh + ki) * c->kw + kj] * x[((n * c->C + gr * Cg + ci) * c->H + ih) * c->W + iw];
        }
        y[((n * c->M + m) * Ho + oh) * Wo + ow] = acc;
    }
}
/* Reference backward: the same loops, distributing dy. */
static void ref_backward(const cfg *c, const double *x, const double *w, const double *dy,
                         double *dx, double *dw, double *db) {
    int Ho = out_dim(c->H, c->kh, c->sh, c->ph, c->dh), Wo = out_dim(c->W, c->kw, c->sw, c->pw, c->dw);
    int Cg = c->C / c->G, Mg = c->M / c->G;
    memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
    memset(dw, 0, sizeof(double) * (size_t)(c->M * Cg * c->kh * c->kw));
    memset(db, 0, sizeof(double) * (size_t)c->M);
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double g = dy[((n * c->M + m) * Ho + oh) * Wo + ow];
        int gr = m / Mg;
        db[m] += g;
        for (int ci = 0; ci < Cg; ci++) for (int ki = 0; ki < c->kh; ki++) for (int kj = 0; kj < c->kw; kj++) {
            int ih = oh * c->sh - c->ph + ki * c->dh, iw = ow * c->sw - c->pw + kj * c->dw;
            if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
            int64_t xi = ((n * c->C + gr * Cg + ci) * c->H + ih) * c->W + iw, wi = ((m * Cg + ci) * c->kh + ki) * c->kw + kj;
            dx[xi] += g * w[wi];
            dw[wi] += g * x[xi];
        }
    }
}

static void kwargs_of(const cfg *c, char *buf, size_t n) {
    snprintf(buf, n, "kernel=(%d,%d) stride=(%d,%d) pad=(%d,%d) dilate=(%d,%d) num_filter=%d num_group=%d no_bias=%s",
             c->kh, c->kw, c->sh, c->sw, c->ph, c->pw, c->dh, c->dw, c->M, c->G, c->no_bias ? "True" : "False");
}

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

/* Runs impl on cfg with f32/f64; returns 0 when refused, 1 when checked. */
static int run_cfg(const char *impl, const cfg *c, int32_t dt, double tol, uint64_t seed) {
    char kw[256]; kwargs_of(c, kw, sizeof kw);
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", impl, kw, dt), 0, "%s", fh_error());
    int64_t ds[4] = {c->N, c->C, c->H, c->W};
    n.in_shape[0].ndim = 4; memcpy(n.in_shape[0].dims, ds, sizeof ds);
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    int s = fh_node_alloc(&n, 1);
    cr_assert(s >= 0);
    if (s == 0) { cr_assert(n.reason[0], "%s refused without a reason", impl); fh_node_free(&n); return 0; }
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], dt, nx, &seed, -1, 1);
    tu_fill(n.in[1], dt, nw, &seed, -1, 1);
    if (!c->no_bias) tu_fill(n.in[2], dt, c->M, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], dt, nx), *w = tu_to_f64(n.in[1], dt, nw);
    double *b = c->no_bias ? NULL : tu_to_f64(n.in[2], dt, c->M);
    double *y = malloc(sizeof(double) * (size_t)ny);
    ref_forward(c, x, w, b, y);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    double e = tu_relerr(n.out[0], dt, y, ny);
    cr_assert(e <= tol, "%s fwd %s N%d C%d H%d W%d: relerr %g", impl, kw, c->N, c->C, c->H, c->W, e);
    /* req add: out = previous + conv */
    double *y2 = malloc(sizeof(double) * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) { y2[i] = 2 * y[i]; }
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add), 0);
    e = tu_relerr(n.out[0], dt, y2, ny);
    cr_assert(e <= tol, "%s fwd add %s: relerr %g", impl, kw, e);
    /* backward */
    tu_fill(n.out_grad[0], dt, ny, &seed, -1, 1);
    double *dy = tu_to_f64(n.out_grad[0], dt, ny);
    double *dx = malloc(sizeof(double) * (size_t)nx), *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * (size_t)c->M);
    ref_backward(c, x, w, dy, dx, dw, db);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    e = tu_relerr(n.in_grad[0], dt, dx, nx);
    cr_assert(e <= tol, "%s bwd dx %s N%d C%d H%d W%d: relerr %g", impl, kw, c->N, c->C, c->H, c->W, e);
    e = tu_relerr(n.in_grad[1], dt, dw, nw);
    cr_assert(e <= tol, "%s bwd dw %s: relerr %g", impl, kw, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], dt, db, c->M); cr_assert(e <= tol, "%s bwd db: %g", impl, e); }
    /* backward with req add on every grad: doubles them */
    int32_t adds[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(fh_node_backward(&n, adds), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    for (int64_t i = 0; i < nw; i++) dw[i] *= 2;
    e = tu_relerr(n.in_grad[0], dt, dx, nx);
    cr_assert(e <= tol, "%s bwd add dx %s: relerr %g", impl, kw, e);
    e = tu_relerr(n.in_grad[1], dt, dw, nw);
    cr_assert(e <= tol, "%s bwd add dw %s: relerr %g", impl, kw, e);
    /* req null on data: dx untouched */
    memset(n.in_grad[0], 0, (size_t)nx * mxp_dtype_size(dt));
    int32_t nodx[3] = {MXP_REQ_NULL, MXP_REQ_WRITE, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodx), 0);
    for (int64_t i = 0; i < nx; i++) cr_assert_eq(tu_get(n.in_grad[0], dt, i), 0.0);
    free(x); free(w); free(b); free(y); free(y2); free(dy); free(dx); free(dw); free(db);
    fh_node_free(&n);
    return 1;
}

static cfg random_cfg(uint64_t *r, int i) {
    cfg c;
    c.G = (fh_rand(r, 0, 1) < 0.25) ? 2 : 1;
    c.N = 1 + (int)fh_rand(r, 0, 3);
    c.C = c.G * (1 + (int)fh_rand(r, 0, 5));
    c.M = c.G * (1 + (int)fh_rand(r, 0, 6));
    c.kh = 1 + (int)fh_rand(r, 0, 5); c.kw = 1 + (int)fh_rand(r, 0, 5);
    c.sh = 1 + (fh_rand(r, 0, 1) < 0.3); c.sw = 1 + (fh_rand(r, 0, 1) < 0.3);
    c.dh = 1 + (fh_rand(r, 0, 1) < 0.2); c.dw = 1 + (fh_rand(r, 0, 1) < 0.2);
    c.ph = (int)fh_rand(r, 0, 3); c.pw = (int)fh_rand(r, 0, 3);
    c.H = c.dh * (c.kh - 1) + 1 + (int)fh_rand(r, 0, 12);
    c.W = c.dw * (c.kw - 1) + 1 + (int)fh_rand(r, 0, 20);
    c.no_bias = fh_rand(r, 0, 1) < 0.3;
    if (i % 3 == 0) { /* a winograd-eligible configuration every third time */
        c.kh = c.kw = 3; c.sh = c.sw = 1; c.dh = c.dw = 1; c.ph = c.pw = i % 2; c.G = 1;
        c.C = 1 + (int)fh_rand(r, 0, 6); c.M = 1 + (int)fh_rand(r, 0, 6);
        c.H = 3 + (int)fh_rand(r, 0, 13); c.W = 3 + (int)fh_rand(r, 0, 17);
    }
    if (i % 5 == 1) { c.kh = c.kw = 1; c.sh = c.sw = 1; c.ph = c.pw = 0; } /* 1x1 */
    return c;
}

static int pointwise_cfg(const cfg *c) { return c->kh == 1 && c->kw == 1 && c->ph == 0 && c->pw == 0; }

/* strip: output rows of at most 32 pixels. */
/* What winograd accepts (groups too, but the configurations here that
 * exercise it have none). */
static int wino_cfg(const cfg *c) {
    return c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 && c->ph <= 2 && c->pw <= 2 &&
           c->G == 1;
}
static int strip_cfg(const cfg *c) { return out_dim(c->W, c->kw, c->sw, c->pw, c->dw) <= 32; }

Test(conv, impls_agree_with_reference, .init = setup, .fini = teardown, .timeout = 240) {
    const char *impls[] = {"gemm", "direct", "winograd", "pointwise", "strip"};
    const double tols[] = {1e-5, 1e-5, 1e-4, 1e-5, 1e-5};
    int ran[5] = {0}, eligible_wino = 0, eligible_pw = 0, eligible_strip = 0;
    const int NCFG = 36;
    uint64_t r = 42;
    for (int i = 0; i < NCFG; i++) {
        cfg c = random_cfg(&r, i);
        eligible_wino += wino_cfg(&c);
        eligible_pw += pointwise_cfg(&c);
        eligible_strip += strip_cfg(&c);
        for (int k = 0; k < 5; k++) ran[k] += run_cfg(impls[k], &c, MXP_DTYPE_F32, tols[k], 1000 + (uint64_t)i);
    }
    /* a few larger fixed layers, including the padded 3x3 and 1x1 shapes */
    cfg fixed[] = {
        {2, 16, 15, 17, 24, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0},
        {2, 32, 9, 9, 16, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {3, 1, 28, 28, 20, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {2, 8, 12, 12, 10, 2, 5, 5, 1, 1, 0, 0, 1, 1, 1},
        {1, 12, 20, 19, 8, 1, 3, 3, 1, 1, 2, 2, 1, 1, 0},
        /* batches the gemm impl cuts into several sample blocks (ragged
         * last block, groups, no_bias) */
        {21, 4, 10, 11, 6, 2, 3, 2, 1, 1, 1, 0, 1, 1, 0},
        {9, 6, 12, 12, 10, 1, 5, 5, 1, 1, 0, 0, 1, 1, 1},
        /* pointwise: a ragged last pixel strip (63 and 169 pixels), output
         * rows not a multiple of its 12-row blocks, more than 64 output
         * channels (two weight-gradient channel blocks, the second
         * partial), groups, no_bias, and more chunks than parts */
        {2, 40, 9, 7, 30, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {3, 24, 6, 11, 36, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        {2, 70, 13, 13, 80, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {5, 16, 30, 31, 8, 1, 1, 1, 1, 1, 0, 0, 2, 2, 0},
        /* pointwise, items of several wide-packed strip groups (the next
         * group, or the next item's first, prefetched meanwhile): 277
         * strips in 16 items of 18 (two groups of 9) and a ragged last
         * item; groups with 35-strip items (3 groups) and a 26-pixel last
         * strip, no_bias */
        {1, 20, 94, 94, 13, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {1, 12, 90, 97, 14, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        /* pointwise, strided (gathered subsample, scattered data
         * gradient): ResNet's 1x1 stride-2 shortcut at small size, odd
         * sizes, unequal strides, groups, bias */
        {3, 16, 16, 16, 32, 1, 1, 1, 2, 2, 0, 0, 1, 1, 1},
        {2, 6, 9, 11, 10, 2, 1, 1, 2, 3, 0, 0, 1, 1, 0},
        {2, 5, 7, 7, 4, 1, 1, 1, 3, 3, 0, 0, 1, 1, 0},
        /* strip: LeNet's conv2 shape on 3 samples (32-pixel strips of 4
         * rows, 50 channels in 5 blocks of 10), a ragged last strip (3 rows
         * of 10), a stride-2 layer, one 32-wide row per strip */
        {3, 20, 12, 12, 50, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {2, 6, 11, 12, 13, 1, 3, 3, 1, 1, 1, 0, 1, 1, 0},
        {2, 5, 17, 15, 7, 1, 5, 5, 2, 2, 1, 1, 1, 1, 1},
        {1, 4, 5, 34, 6, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0},
        /* strip's weight gradient along M with more than 64 output
         * channels (its part sums run 64 channels at a time: 64 + 6) */
        {2, 6, 12, 12, 70, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        /* stride 2 along W (im2col's phase-row path): ResNet's
         * downsampling 3x3 shapes (16 -> 8 and 32 -> 16 px rows, in
         * registers; rows pad 2 on 7 rows), an odd width of 37 (one 16-pair vector
         * and a tail) with a 5-wide kernel, stride 2 in W only, and a pad
         * wider than half the (even) kernel */
        {2, 16, 16, 16, 32, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1},
        {2, 4, 32, 32, 8, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0},
        {1, 3, 7, 16, 5, 1, 3, 3, 2, 2, 2, 1, 1, 1, 0},
        {2, 3, 9, 37, 4, 1, 3, 5, 1, 2, 1, 2, 1, 1, 0},
        {1, 2, 6, 35, 3, 1, 2, 4, 2, 2, 0, 3, 1, 1, 0},
        /* refused by strip: 33-pixel output rows */
        {1, 2, 3, 35, 3, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        eligible_wino += wino_cfg(&fixed[i]);
        eligible_pw += pointwise_cfg(&fixed[i]);
        eligible_strip += strip_cfg(&fixed[i]);
        for (int k = 0; k < 5; k++) ran[k] += run_cfg(impls[k], &fixed[i], MXP_DTYPE_F32, tols[k], 77 + i);
    }
    int total = NCFG + (int)(sizeof fixed / sizeof fixed[0]);
    cr_assert_eq(ran[0], total, "gemm ran %d of %d", ran[0], total);
    cr_assert_eq(ran[1], total, "direct ran %d of %d", ran[1], total);
    cr_assert_eq(ran[2], eligible_wino, "winograd ran %d, eligible %d", ran[2], eligible_wino);
    cr_assert_eq(ran[3], eligible_pw, "pointwise ran %d, eligible %d", ran[3], eligible_pw);
    cr_assert(eligible_wino >= 12);
    cr_assert(eligible_pw >= 10, "only %d pointwise configurations", eligible_pw);
    cr_assert_eq(ran[4], eligible_strip, "strip ran %d, eligible %d", ran[4], eligible_strip);
    cr_assert(eligible_strip < total, "no configuration strip refuses");
}

Test(conv, gemm_float64, .init = setup, .fini = teardown) {
    uint64_t r = 7;
    for (int i = 0; i < 8; i++) {
        cfg c = random_cfg(&r, i);
        cr_assert_eq(run_cfg("gemm", &c, MXP_DTYPE_F64, 1e-12, 5 + (uint64_t)i), 1);
    }
}

/* Central finite differences in float64 of L = sum(y * dy) for the gemm impl. */
Test(conv, gemm_finite_differences, .init = setup, .fini = teardown) {
    cfg c = {2, 4, 7, 6, 6, 2, 3, 2, 2, 1, 1, 0, 1, 2, 0};
    char kw[256]; kwargs_of(&c, kw, sizeof kw);
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "gemm", kw, MXP_DTYPE_F64), 0);
    n.in_shape[0] = (mxp_shape){4, 0, {c.N, c.C, c.H, c.W}};
    cr_assert_eq(fh_node_infer(&n), 0);
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    uint64_t r = 3;
    for (int k = 0; k < 3; k++) tu_fill(n.in[k], MXP_DTYPE_F64, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
    int64_t ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.out_grad[0], MXP_DTYPE_F64, ny, &r, -1, 1);
    cr_assert_eq(fh_node_backward(&n, NULL), 0);
    const double h = 1e-6;
    for (int k = 0; k < 3; k++) {
        double *v = n.in[k], *g = n.in_grad[k];
        int64_t cnt = fh_shape_numel(&n.in_shape[k]);
        for (int64_t i = 0; i < cnt; i += 3) {
            double save = v[i], lp = 0, lm = 0;
            v[i] = save + h; fh_node_forward(&n, 1, NULL);
            for (int64_t q = 0; q < ny; q++) lp += ((double *)n.out[0])[q] * ((double *)n.out_grad[0])[q];
            v[i] = save - h; fh_node_forward(&n, 1, NULL);
            for (int64_t q = 0; q < ny; q++) lm += ((double *)n.out[0])[q] * ((double *)n.out_grad[0])[q];
            v[i] = save;
            double fd = (lp - lm) / (2 * h);
            cr_assert(fabs(fd - g[i]) <= 1e-6 * (1 + fabs(fd)), "input %d elem %lld: fd %g analytic %g", k, (long long)i, fd, g[i]);
        }
    }
    fh_node_free(&n);
}

Test(conv, shape_inference, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "gemm", "kernel=(5,5) num_filter=20 pad=(1,2) stride=(2,1)", MXP_DTYPE_F32), 0);
    cr_assert_eq(n.n_in, 3);
    cr_assert_eq(fh_node_infer(&n), MXP_EINCOMPLETE);
    n.in_shape[0] = (mxp_shape){4, 0, {8, 3, 28, 27}};
    cr_assert_eq(fh_node_infer(&n), MXP_OK);
    cr_assert_eq(n.in_shape[1].ndim, 4);
    cr_assert_eq(n.in_shape[1].dims[0], 20); cr_assert_eq(n.in_shape[1].dims[1], 3);
    cr_assert_eq(n.in_shape[1].dims[2], 5); cr_assert_eq(n.in_shape[1].dims[3], 5);
    cr_assert_eq(n.in_shape[2].dims[0], 20);
    cr_assert_eq(n.out_shape[0].dims[2], (28 + 2 - 5) / 2 + 1);
    cr_assert_eq(n.out_shape[0].dims[3], (27 + 4 - 5) / 1 + 1);
    /* inconsistent weight: ESHAPE naming both shapes */
    n.in_shape[1] = (mxp_shape){4, 0, {20, 4, 5, 5}};
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "(20,4,5,5)") && strstr(fh_error(), "(20,3,5,5)"), "%s", fh_error());
    fh_node_free(&n);
    /* no_bias drops bias; winograd refuses 5x5 with a reason */
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "winograd", "kernel=(5,5) num_filter=4 no_bias=True", MXP_DTYPE_F32), 0);
    cr_assert_eq(n.n_in, 2);
    n.in_shape[0] = (mxp_shape){4, 0, {1, 2, 9, 9}};
    cr_assert_eq(fh_node_infer(&n), MXP_OK);
    cr_assert_eq(fh_node_alloc(&n, 0), 0);
    cr_assert(strstr(n.reason, "3x3"), "%s", n.reason);
    fh_node_free(&n);
    /* bad params */
    cr_assert_lt(fh_node_init(&n, pack, "Convolution", "gemm", "kernel=(3,3) num_filter=6 num_group=4", MXP_DTYPE_F32), 0);
    fh_node_free(&n);
    cr_assert_lt(fh_node_init(&n, pack, "Convolution", "gemm", "kernel=(3,3,3,3) num_filter=6", MXP_DTYPE_F32), 0);
    fh_node_free(&n);
}

/* strip (float32 only): central differences of L = sum(y * dy), summed in
 * float64 from the float32 outputs, against its backward for data, weight
 * and bias.  The layer is linear in each input, so a large step (0.25)
 * leaves only float32 rounding.  Ragged strips (Wo 7: 28 and 14 pixels)
 * and both backward paths (stride 1: direct's, stride 2: gemm's). */
static void strip_fd(const char *kw, int64_t N, int64_t C, int64_t H, int64_t W) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "strip", kw, MXP_DTYPE_F32), 0, "%s", fh_error());
    n.in_shape[0] = (mxp_shape){4, 0, {N, C, H, W}};
    cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "strip refused %s: %s", kw, n.reason);
    uint64_t r = 11;
    for (int k = 0; k < 3; k++) tu_fill(n.in[k], MXP_DTYPE_F32, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
    int64_t ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.out_grad[0], MXP_DTYPE_F32, ny, &r, -1, 1);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    const float h = 0.25f;
    for (int k = 0; k < 3; k++) {
        float *v = n.in[k], *g = n.in_grad[k];
        int64_t cnt = fh_shape_numel(&n.in_shape[k]);
        for (int64_t i = 0; i < cnt; i += 1 + cnt / 40) {
            float save = v[i];
            double l[2];
            for (int s = 0; s < 2; s++) {
                v[i] = save + (s ? -h : h);
                cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
                l[s] = 0;
                for (int64_t q = 0; q < ny; q++) l[s] += (double)((float *)n.out[0])[q] * ((float *)n.out_grad[0])[q];
            }
            v[i] = save;
            double fd = (l[0] - l[1]) / (2.0 * h);
            cr_assert(fabs(fd - g[i]) <= 1e-3 * (1 + fabs(fd)), "%s input %d elem %lld: fd %.7g analytic %.7g", kw, k,
                      (long long)i, fd, (double)g[i]);
        }
    }
    fh_node_free(&n);
}

Test(conv, strip_finite_differences, .init = setup, .fini = teardown) {
    strip_fd("kernel=(3,3) pad=(1,0) num_filter=7", 2, 3, 6, 9);
    strip_fd("kernel=(3,3) stride=(2,2) pad=(1,1) num_filter=5", 2, 4, 9, 9);
}

/* strip's weight gradient with vectors along pixels (MXP_STRIP_DW=p, the
 * default for LeNet's conv1): float64 references (write, add, data req
 * null) on LeNet's conv1, groups with dilation, channel blocks of 4 and 3
 * and a no-bias layer, two row chunks per sample with a 7-wide kernel (two
 * tap blocks), an 8-wide dilated kernel, then finite differences.
 * Criterion runs each test in its own process, so the setting stays here. */
Test(conv, strip_pixel_weight_gradient, .init = setup, .fini = teardown) {
    cr_assert_eq(setenv("MXP_STRIP_DW", "p", 1), 0);
    cfg cs[] = {
        {3, 1, 28, 28, 20, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {2, 4, 14, 13, 10, 2, 3, 3, 1, 1, 0, 0, 2, 2, 1},
        {2, 2, 60, 34, 30, 1, 5, 7, 1, 1, 0, 0, 1, 1, 0},
        {2, 3, 9, 8, 7, 1, 2, 3, 1, 1, 0, 0, 1, 1, 0},
        {1, 2, 10, 30, 6, 1, 2, 8, 1, 1, 0, 0, 1, 2, 0}, /* two tap blocks, dilated */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        cr_assert_eq(run_cfg("strip", &cs[i], MXP_DTYPE_F32, 1e-5, 300 + i), 1, "strip refused config %zu", i);
    strip_fd("kernel=(5,5) num_filter=6", 2, 1, 12, 11);
    strip_fd("kernel=(3,2) dilate=(1,2) num_filter=5", 2, 2, 7, 9);
}

/* strip's weight gradient along pixels on kw-shifted input planes with dy
 * read in place (MXP_STRIP_DW=s, the default for LeNet's conv1): float64
 * references on LeNet's conv1 (576 pixels, whole vectors), ragged chunks
 * whose last vector takes dy from the zero-padded tail (7x7 = 49 and
 * 5x11 = 55 pixels), groups with dilation, channel blocks of 4 and 3, a
 * no-bias layer, a 7-wide kernel (two tap blocks) over two row chunks
 * (138 rows: 123 + 15), then finite differences. */
Test(conv, strip_shifted_weight_gradient, .init = setup, .fini = teardown) {
    cr_assert_eq(setenv("MXP_STRIP_DW", "s", 1), 0);
    cfg cs[] = {
        {3, 1, 28, 28, 20, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {2, 3, 11, 11, 7, 1, 5, 5, 1, 1, 0, 0, 1, 1, 0},
        {2, 4, 14, 13, 10, 2, 3, 3, 1, 1, 0, 0, 2, 2, 1},
        {2, 2, 7, 13, 6, 1, 3, 3, 1, 1, 0, 0, 1, 1, 0},
        {1, 2, 140, 34, 6, 1, 3, 7, 1, 1, 0, 0, 1, 1, 0}, /* two row chunks, two tap blocks */
        {1, 2, 10, 30, 5, 1, 2, 8, 1, 1, 0, 0, 1, 2, 0}, /* dilated 8-wide kernel */
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        cr_assert_eq(run_cfg("strip", &cs[i], MXP_DTYPE_F32, 1e-5, 400 + i), 1, "strip refused config %zu", i);
    strip_fd("kernel=(5,5) num_filter=6", 2, 1, 12, 11);
    strip_fd("kernel=(3,2) dilate=(1,2) num_filter=5", 2, 2, 7, 9);
}

/* pointwise with two threads: its items (groups of strips) are taken one
 * at a time from a shared counter, each call up to its chunk's share, and
 * every item after a call's first is packed by its strips' first row-block
 * kernel (the fake host's one-thread chunks are single items, which never
 * take that path).  Several items per call, a ragged last strip in a later
 * item, output rows past a 12-row block, groups, the data gradient's
 * transposed pass, no_bias. */
Test(conv, pointwise_two_threads, .init = setup, .fini = teardown) {
    cfg shapes[] = {
        {1, 20, 94, 94, 13, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        {2, 12, 90, 97, 14, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        {2, 70, 45, 23, 30, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
        /* items capped by their input's bytes (128 KiB): 300 input
         * channels give 3-strip items, 14 strips a sample (a ragged
         * 4-pixel last strip) in 5 items; the data gradient's 300 rows
         * over 13 channels keep 16-strip items */
        {2, 300, 20, 21, 13, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1},
        /* over 1024 input channels: one strip an item */
        {1, 1100, 6, 11, 5, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0},
    };
    fh_set_threads(2);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        cr_assert_eq(run_cfg("pointwise", &shapes[i], MXP_DTYPE_F32, 1e-5, 500 + i), 1);
    fh_set_threads(1);
}
