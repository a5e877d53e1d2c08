/* test_pooling_fast.c — the non-overlapping max-pooling fast path (2x2
 * stride 2 and other kernel == stride windows without pad): forward and
 * backward against an independent float64 reference on shapes that
 * exercise every branch of the kernels — rows whose window count is a
 * multiple of the 4-window vector step, rows with a remainder, rows shorter
 * than one step, odd H/W whose last row/column no window covers (their
 * gradient must be 0 under req write, untouched under req add) — with
 * values drawn from a few levels so windows hold ties.  Tie rule (MXNet's
 * and the generic path's): a window's gradient goes to its first maximum
 * in row-major window order; every other element of the window gets 0.
 * Padding and overlapping windows take the generic path and are compared
 * against the same reference. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

typedef struct pcase { int N, C, H, W, k, s, p; } pcase;

/* y = max over each window clipped to the data; g routes dy to the first
 * maximum (row-major scan, strict >) of each window. */
static void ref_max(const pcase *c, int Ho, int Wo, const double *x, const double *dy, double *y, double *g) {
    memset(g, 0, sizeof(double) * (size_t)(c->N * c->C * c->H * c->W));
    for (int pl = 0; pl < c->N * c->C; pl++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        int best = -1; double v = 0;
        for (int i = 0; i < c->k; i++) for (int j = 0; j < c->k; j++) {
            int h = oh * c->s - c->p + i, w = ow * c->s - c->p + j;
            if (h < 0 || w < 0 || h >= c->H || w >= c->W) continue;
            int idx = (pl * c->H + h) * c->W + w;
            if (best < 0 || x[idx] > v) { v = x[idx]; best = idx; }
        }
        int o = (pl * Ho + oh) * Wo + ow;
        y[o] = v;
        g[best] += dy[o];
    }
}

static void run_case(const pcase *c, int32_t dt, uint64_t seed) {
    char kw[160];
    snprintf(kw, sizeof kw, "pool_type=max kernel=(%d,%d) stride=(%d,%d) pad=(%d,%d)", c->k, c->k, c->s, c->s, c->p, c->p);
    fh_node n; int64_t d[4] = {c->N, c->C, c->H, c->W};
    tu_node(&n, pack, "Pooling", kw, dt, 4, d, 1);
    int Ho = (int)n.out_shape[0].dims[2], Wo = (int)n.out_shape[0].dims[3];
    cr_assert_eq(Ho, 1 + (c->H + 2 * c->p - c->k) / c->s);
    cr_assert_eq(Wo, 1 + (c->W + 2 * c->p - c->k) / c->s);
    int64_t nx = (int64_t)c->N * c->C * c->H * c->W, ny = (int64_t)c->N * c->C * Ho * Wo;
    uint64_t r = seed;
    /* 5 levels in [-1, 1): plenty of ties inside 2x2 windows */
    for (int64_t i = 0; i < nx; i++) tu_set(n.in[0], dt, i, (double)(int)fh_rand(&r, -2, 3) * 0.5);
    tu_fill(n.out_grad[0], dt, ny, &r, -1, 1);
    double *x = tu_to_f64(n.in[0], dt, nx), *dy = tu_to_f64(n.out_grad[0], dt, ny);
    double *y = malloc(sizeof(double) * (size_t)ny), *g = malloc(sizeof(double) * (size_t)nx);
    ref_max(c, Ho, Wo, x, dy, y, g);

    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++)
        cr_assert_eq(tu_get(n.out[0], dt, i), y[i], "%s %dx%d forward [%lld]", kw, c->H, c->W, (long long)i);
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++)
        cr_assert_eq(tu_get(n.out[0], dt, i), 2 * y[i], "%s forward add [%lld]", kw, (long long)i);

    tu_fill(n.in_grad[0], dt, nx, &r, 5, 6);            /* garbage: write must replace all */
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    /* overlapping windows sum several gradients into one element (in the
     * kernel's dtype): compare with a rounding tolerance, not exactly */
    double tol = dt == MXP_DTYPE_F32 ? 1e-6 : 1e-14;
    for (int64_t i = 0; i < nx; i++)
        cr_assert(fabs(tu_get(n.in_grad[0], dt, i) - g[i]) <= tol * (1 + fabs(g[i])),
                  "%s %dx%d backward [%lld]: %g vs %g", kw, c->H, c->W, (long long)i, tu_get(n.in_grad[0], dt, i), g[i]);
    for (int64_t i = 0; i < nx; i++) tu_set(n.in_grad[0], dt, i, 0.25);
    cr_assert_eq(fh_node_backward(&n, add), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++)
        cr_assert(fabs(tu_get(n.in_grad[0], dt, i) - (0.25 + g[i])) <= tol * (1 + fabs(g[i])),
                  "%s backward add [%lld]", kw, (long long)i);
    free(x); free(dy); free(y); free(g);
    fh_node_free(&n);
}

Test(pooling_fast, max2x2_shapes_ties_req, .init = setup, .fini = teardown) {
    const pcase cs[] = {
        {2, 3, 24, 24, 2, 2, 0},   /* LeNet pool1 rows: 12 windows = 3 vector steps */
        {3, 5, 8, 8, 2, 2, 0},     /* LeNet pool2 rows: 4 windows = 1 step */
        {2, 3, 6, 22, 2, 2, 0},    /* 11 windows: 2 steps + 3 remainder */
        {2, 2, 4, 6, 2, 2, 0},     /* 3 windows: remainder only */
        {2, 3, 9, 11, 2, 2, 0},    /* odd: last row and column uncovered */
        {1, 2, 7, 19, 2, 2, 0},    /* odd, 9 windows */
        {2, 2, 9, 12, 3, 3, 0},    /* generic disjoint (3x3/3) */
        {2, 2, 9, 10, 3, 3, 0},    /* generic disjoint, uncovered column */
        {2, 2, 8, 8, 2, 2, 1},     /* pad: generic path */
        {2, 2, 9, 9, 3, 2, 0},     /* overlapping: generic path */
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
        run_case(&cs[t], MXP_DTYPE_F32, 100 + t);
        run_case(&cs[t], MXP_DTYPE_F64, 200 + t);
    }
}

/* All-equal windows: every gradient must land on the window's top-left
 * element; a window whose maximum is only in its last element routes there. */
Test(pooling_fast, max2x2_tie_rule_explicit, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        fh_node n; int64_t d[4] = {1, 1, 2, 10};
        tu_node(&n, pack, "Pooling", "pool_type=max kernel=(2,2) stride=(2,2)", dt, 4, d, 1);
        /* windows 0-3 (vector step) and 4 (remainder): constant, last, middle ties, first, constant */
        const double row0[10] = {1, 1,  0, 0,  0, 3,  7, 0,  -2, -2};
        const double row1[10] = {1, 1,  0, 5,  3, 3,  0, 7,  -2, -2};
        const int winner[5] = {0, 13, 5, 6, 8};   /* flat index of each window's gradient */
        for (int i = 0; i < 10; i++) { tu_set(n.in[0], dt, i, row0[i]); tu_set(n.in[0], dt, 10 + i, row1[i]); }
        for (int i = 0; i < 5; i++) tu_set(n.out_grad[0], dt, i, i + 1);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        const double ymax[5] = {1, 5, 3, 7, -2};
        for (int i = 0; i < 5; i++) cr_assert_eq(tu_get(n.out[0], dt, i), ymax[i], "window %d", i);
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        for (int i = 0; i < 20; i++) {
            double want = 0;
            for (int w = 0; w < 5; w++) if (winner[w] == i) want = w + 1;
            cr_assert_eq(tu_get(n.in_grad[0], dt, i), want, "dtype %d element %d", dt, i);
        }
        fh_node_free(&n);
    }
}

/* Forward keeps the first of equal maxima, so even the sign of a zero is
 * that of the scalar scan in window order (r0[0], r0[1], r1[0], r1[1]):
 * checked on the vector step (windows 0-3) and the remainder (window 4). */
Test(pooling_fast, max2x2_forward_signed_zero_order, .init = setup, .fini = teardown) {
    fh_node n; int64_t d[4] = {1, 1, 2, 10};
    tu_node(&n, pack, "Pooling", "pool_type=max kernel=(2,2) stride=(2,2)", MXP_DTYPE_F32, 4, d, 1);
    const float row0[10] = {-1, -1,  -0.0f, 0.0f,  0.0f, -0.0f,  -1, 0.0f,  -1, -1};
    const float row1[10] = {-0.0f, 0.0f,  -1, -1,  -1, -1,  -0.0f, -1,  0.0f, -0.0f};
    const int neg[5] = {1, 1, 0, 0, 0};   /* sign bit of each window's result */
    memcpy(n.in[0], row0, sizeof row0);
    memcpy((float *)n.in[0] + 10, row1, sizeof row1);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    for (int i = 0; i < 5; i++) {
        float v = ((float *)n.out[0])[i];
        cr_assert(v == 0 && !!signbit(v) == neg[i], "window %d: %g sign %d", i, v, !!signbit(v));
    }
    fh_node_free(&n);
}
