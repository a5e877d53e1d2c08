/* test_conv_nd.c — Convolution with 3-D (NCDHW) and 1-D (NCW) kernels, impl
 * "nd", against an independent float64 plain-loop reference: forward,
 * backward (data, weight, bias), req add/null, float64 finite differences,
 * MXNet's shape rules (5-D weight, per-axis output sizes, defaults filled
 * to the kernel's rank) and the refusals (2-D impls refuse 3-D kernels,
 * nd refuses 2-D, data rank must match the kernel's). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

/* Spatial dims are (D, H, W); a 1-D case has nd = 1 and uses only W. */
typedef struct cfg3 { int nd, N, C, M, G, in[3], k[3], s[3], p[3], d[3], no_bias; } cfg3;

static int odim(int in, int k, int s, int p, int d) { return (in + 2 * p - (d * (k - 1) + 1)) / s + 1; }

/* Full 3-D geometry of a case (1-D: depth and height 1). */
static void dims3(const cfg3 *c, int *in, int *k, int *s, int *p, int *d, int *o) {
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - c->nd), on = j >= 0;
        in[i] = on ? c->in[j] : 1; k[i] = on ? c->k[j] : 1; s[i] = on ? c->s[j] : 1;
        p[i] = on ? c->p[j] : 0; d[i] = on ? c->d[j] : 1;
        o[i] = odim(in[i], k[i], s[i], p[i], d[i]);
    }
}

/* y = conv(x, w) + b and its gradients, straight from the definition:
 * y[n][m][o] = b[m] + sum_{c, t} w[m][c][t] x[n][g*Cg + c][o*s - p + t*d]. */
static void ref(const cfg3 *c, const double *x, const double *w, const double *b, double *y,
                const double *dy, double *dx, double *dw, double *db) {
    int in[3], k[3], s[3], p[3], d[3], o[3];
    dims3(c, in, k, s, p, d, o);
    int Cg = c->C / c->G, Mg = c->M / c->G, X = in[0] * in[1] * in[2], P = o[0] * o[1] * o[2], T = k[0] * k[1] * k[2];
    if (dy) {
        memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * X));
        memset(dw, 0, sizeof(double) * (size_t)(c->M * Cg * T));
        memset(db, 0, sizeof(double) * (size_t)c->M);
    }
    for (int n = 0; n < c->N; n++) for (int m = 0; m < c->M; m++)
    for (int a0 = 0; a0 < o[0]; a0++) for (int a1 = 0; a1 < o[1]; a1++) for (int a2 = 0; a2 < o[2]; a2++) {
        int q = (a0 * o[1] + a1) * o[2] + a2, gr = m / Mg;
        double acc = b ? b[m] : 0, g = dy ? dy[(n * c->M + m) * P + q] : 0;
        if (dy) db[m] += g;
        for (int ci = 0; ci < Cg; ci++)
        for (int t0 = 0; t0 < k[0]; t0++) for (int t1 = 0; t1 < k[1]; t1++) for (int t2 = 0; t2 < k[2]; t2++) {
            int i0 = a0 * s[0] - p[0] + t0 * d[0], i1 = a1 * s[1] - p[1] + t1 * d[1], i2 = a2 * s[2] - p[2] + t2 * d[2];
            if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
            int xi = (n * c->C + gr * Cg + ci) * X + (i0 * in[1] + i1) * in[2] + i2;
            int wi = (m * Cg + ci) * T + (t0 * k[1] + t1) * k[2] + t2;
            acc += w[wi] * x[xi];
            if (dy) { dx[xi] += g * w[wi]; dw[wi] += g * x[xi]; }
        }
        if (y) y[(n * c->M + m) * P + q] = acc;
    }
}

static void tuple(char *buf, size_t n, const int *v, int nd) {
    if (nd == 1) snprintf(buf, n, "(%d,)", v[0]);
    else snprintf(buf, n, "(%d,%d,%d)", v[0], v[1], v[2]);
}
static void kwargs_of(const cfg3 *c, char *buf, size_t n) {
    char k[32], s[32], p[32], d[32];
    tuple(k, sizeof k, c->k, c->nd); tuple(s, sizeof s, c->s, c->nd);
    tuple(p, sizeof p, c->p, c->nd); tuple(d, sizeof d, c->d, c->nd);
    snprintf(buf, n, "kernel=%s stride=%s pad=%s dilate=%s num_filter=%d num_group=%d no_bias=%s", k, s, p, d, c->M,
             c->G, c->no_bias ? "True" : "False");
}

static fh_pack *pack;
static void setup(void) { pack = fh_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static void init_node(fh_node *n, const char *impl, const cfg3 *c, int32_t dt) {
    char kw[256]; kwargs_of(c, kw, sizeof kw);
    cr_assert_eq(fh_node_init(n, pack, "Convolution", impl, kw, dt), 0, "%s: %s", kw, fh_error());
    n->in_shape[0].ndim = c->nd + 2;
    n->in_shape[0].dims[0] = c->N; n->in_shape[0].dims[1] = c->C;
    for (int i = 0; i < c->nd; i++) n->in_shape[0].dims[2 + i] = c->in[i];
    cr_assert_eq(fh_node_infer(n), MXP_OK, "%s: %s", kw, fh_error());
}

static void run_case(const cfg3 *c, int32_t dt, double tol, uint64_t seed) {
    fh_node n;
    init_node(&n, "nd", c, dt);
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "nd refused: %s", n.reason);
    int64_t nx = fh_shape_numel(&n.in_shape[0]), nw = fh_shape_numel(&n.in_shape[1]), ny = fh_shape_numel(&n.out_shape[0]);
    tu_fill(n.in[0], dt, nx, &seed, -1, 1);
    tu_fill(n.in[1], dt, nw, &seed, -1, 1);
    if (!c->no_bias) tu_fill(n.in[2], dt, c->M, &seed, -1, 1);
    tu_fill(n.out_grad[0], dt, ny, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], dt, nx), *w = tu_to_f64(n.in[1], dt, nw), *dy = tu_to_f64(n.out_grad[0], dt, ny);
    double *b = c->no_bias ? NULL : tu_to_f64(n.in[2], dt, c->M);
    double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    double *dw = malloc(sizeof(double) * (size_t)nw), *db = malloc(sizeof(double) * (size_t)c->M);
    ref(c, x, w, b, y, dy, dx, dw, db);
    char kw[256]; kwargs_of(c, kw, sizeof kw);

    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    double e = tu_relerr(n.out[0], dt, y, ny);
    cr_assert(e <= tol, "fwd %s: relerr %g", kw, e);
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++) y[i] *= 2;
    e = tu_relerr(n.out[0], dt, y, ny);
    cr_assert(e <= tol, "fwd add %s: relerr %g", kw, e);

    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    e = tu_relerr(n.in_grad[0], dt, dx, nx); cr_assert(e <= tol, "dx %s: relerr %g", kw, e);
    e = tu_relerr(n.in_grad[1], dt, dw, nw); cr_assert(e <= tol, "dw %s: relerr %g", kw, e);
    if (!c->no_bias) { e = tu_relerr(n.in_grad[2], dt, db, c->M); cr_assert(e <= tol, "db %s: relerr %g", kw, e); }
    int32_t adds[3] = {MXP_REQ_ADD, MXP_REQ_ADD, MXP_REQ_ADD};
    cr_assert_eq(fh_node_backward(&n, adds), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    for (int64_t i = 0; i < nw; i++) dw[i] *= 2;
    e = tu_relerr(n.in_grad[0], dt, dx, nx); cr_assert(e <= tol, "dx add %s: relerr %g", kw, e);
    e = tu_relerr(n.in_grad[1], dt, dw, nw); cr_assert(e <= tol, "dw add %s: relerr %g", kw, e);
    /* null req on data: dx untouched, dW still written */
    memset(n.in_grad[0], 0, (size_t)nx * mxp_dtype_size(dt));
    int32_t nodx[3] = {MXP_REQ_NULL, MXP_REQ_WRITE, MXP_REQ_WRITE};
    cr_assert_eq(fh_node_backward(&n, nodx), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) cr_assert_eq(tu_get(n.in_grad[0], dt, i), 0.0);
    for (int64_t i = 0; i < nw; i++) dw[i] /= 2;
    e = tu_relerr(n.in_grad[1], dt, dw, nw); cr_assert(e <= tol, "dw (dx null) %s: relerr %g", kw, e);
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
    fh_node_free(&n);
}

Test(conv_nd, matches_reference_3d_and_1d, .init = setup, .fini = teardown, .timeout = 120) {
    const cfg3 cases[] = {
        /* nd N  C  M  G  in          k        s        p        d        no_bias */
        {3, 2, 3, 4, 1, {5, 6, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 0}, /* 3-D ResNet-style */
        {3, 1, 4, 6, 2, {6, 5, 8}, {3, 2, 3}, {2, 1, 2}, {1, 0, 2}, {1, 2, 1}, 1}, /* stride, dilation, groups */
        {3, 3, 2, 3, 1, {4, 7, 5}, {1, 1, 1}, {1, 2, 1}, {0, 0, 0}, {1, 1, 1}, 0}, /* 1x1x1, strided */
        {3, 9, 2, 2, 1, {3, 4, 4}, {2, 2, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, 0}, /* more samples than parts */
        {1, 2, 3, 5, 1, {0, 0, 0}, {3, 0, 0}, {1, 0, 0}, {1, 0, 0}, {1, 0, 0}, 0}, /* filled below: 1-D */
        {1, 3, 4, 4, 4, {0, 0, 0}, {5, 0, 0}, {2, 0, 0}, {2, 0, 0}, {2, 0, 0}, 1}, /* 1-D depthwise */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg3 c = cases[i];
        if (c.nd == 1) c.in[0] = 17 + (int)i;
        run_case(&c, MXP_DTYPE_F32, 1e-5, 11 + i);
        run_case(&c, MXP_DTYPE_F64, 1e-12, 23 + i);
    }
}

/* A column matrix too big for one chunk: positions are cut into chunks
 * (chunk boundaries inside output rows and depth planes). */
Test(conv_nd, chunked_columns, .init = setup, .fini = teardown, .timeout = 120) {
    cfg3 c = {3, 2, 16, 4, 1, {9, 14, 15}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 0};
    run_case(&c, MXP_DTYPE_F32, 1e-5, 5); /* K = 432: 606 positions per 1 MiB chunk, P = 1890 */
}

Test(conv_nd, finite_differences, .init = setup, .fini = teardown) {
    cfg3 c = {3, 2, 2, 3, 1, {3, 4, 3}, {2, 3, 2}, {1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 0};
    c.d[2] = 1;
    fh_node n;
    init_node(&n, "nd", &c, MXP_DTYPE_F64);
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "%s", n.reason);
    uint64_t seed = 3;
    for (uint32_t k = 0; k < 3; k++) tu_fill(n.in[k], MXP_DTYPE_F64, fh_shape_numel(&n.in_shape[k]), &seed, -1, 1);
    tu_fill(n.out_grad[0], MXP_DTYPE_F64, fh_shape_numel(&n.out_shape[0]), &seed, -1, 1);
    int check[3] = {1, 1, 1};
    tu_fd_check(&n, 1, check, 1e-6);
    fh_node_free(&n);
}

static void expect_shape(const mxp_shape *s, int nd, const int64_t *d) {
    cr_assert_eq(s->ndim, nd);
    for (int i = 0; i < nd; i++) cr_assert_eq(s->dims[i], d[i], "dim %d: %lld vs %lld", i, (long long)s->dims[i], (long long)d[i]);
}

Test(conv_nd, shape_rules, .init = setup, .fini = teardown) {
    /* MXNet: weight (num_filter, C/num_group, kd, kh, kw); out per axis
     * floor((in + 2p - d(k-1) - 1)/s) + 1; stride/dilate/pad default to 1/1/0 */
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3) num_filter=8 pad=(1,1,1) stride=(2,1,2)",
                               MXP_DTYPE_F32), 0, "%s", fh_error());
    n.in_shape[0].ndim = 5;
    int64_t d[5] = {2, 4, 16, 7, 9};
    memcpy(n.in_shape[0].dims, d, sizeof d);
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    expect_shape(&n.in_shape[1], 5, (int64_t[]){8, 4, 3, 3, 3});
    expect_shape(&n.in_shape[2], 1, (int64_t[]){8});
    expect_shape(&n.out_shape[0], 5, (int64_t[]){2, 8, 8, 7, 5});
    fh_node_free(&n);
    /* 1-D, dilated, no bias */
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,) dilate=(2,) num_filter=5 no_bias=True",
                               MXP_DTYPE_F32), 0, "%s", fh_error());
    n.in_shape[0].ndim = 3; n.in_shape[0].dims[0] = 1; n.in_shape[0].dims[1] = 2; n.in_shape[0].dims[2] = 10;
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(n.n_in, 2);
    expect_shape(&n.in_shape[1], 3, (int64_t[]){5, 2, 3});
    expect_shape(&n.out_shape[0], 3, (int64_t[]){1, 5, 6});
    fh_node_free(&n);
    /* 4-D data under a 3-D kernel: ESHAPE naming both */
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3) num_filter=8", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, d, sizeof(int64_t) * 4);
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "5-D NCDHW"), "%s", fh_error());
    fh_node_free(&n);
    /* kernel larger than the padded data */
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3) num_filter=8", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 5;
    memcpy(n.in_shape[0].dims, (int64_t[]){1, 1, 2, 5, 5}, sizeof d);
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "depth"), "%s", fh_error());
    fh_node_free(&n);
    /* a stride with the wrong number of elements, a 4-D kernel, a layout of another rank */
    cr_assert_neq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3) stride=(2,2) num_filter=8", MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "stride must have 3 elements"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
    cr_assert_neq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3,3) num_filter=8", MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "kernel has 4 dims"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
    cr_assert_neq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3,3) layout=NCHW num_filter=8", MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "NCDHW only"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
}

/* Each impl keeps to its ranks and says why it refuses. */
Test(conv_nd, impls_refuse_other_ranks, .init = setup, .fini = teardown) {
    const char *two_d[] = {"gemm", "direct", "winograd", "pointwise"};
    cfg3 c = {3, 1, 2, 2, 1, {4, 4, 4}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1};
    for (int i = 0; i < 4; i++) {
        fh_node n;
        init_node(&n, two_d[i], &c, MXP_DTYPE_F32);
        cr_assert_eq(fh_node_alloc(&n, 1), 0, "%s accepted a 3-D kernel", two_d[i]);
        cr_assert(strstr(n.reason, "2-D kernels only"), "%s: %s", two_d[i], n.reason);
        fh_node_free(&n);
    }
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Convolution", "nd", "kernel=(3,3) num_filter=2", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, (int64_t[]){1, 2, 5, 5}, 4 * sizeof(int64_t));
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 0);
    cr_assert(strstr(n.reason, "1-D and 3-D kernels only"), "%s", n.reason);
    fh_node_free(&n);
}
