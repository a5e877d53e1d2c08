/* test_pooling_nd.c — Pooling over 3-D (NCDHW) and 1-D (NCW) data, impl
 * "nd", against a float64 reference written per kernel tap (MXNet's rules:
 * taps in [-p, in + p) count in the avg divisor with count_include_pad,
 * taps in [0, in) give the values; valid = floor, full = ceil output
 * sizes; global_pool = the whole spatial extent): forward, backward
 * (max: the first maximum in (d, h, w) order), req add, float64 finite
 * differences, shape inference and the impls' refusals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "fake_host.h"
#include "nn_test_util.h"

typedef struct pcfg {
    int nd, N, C, in[3], k[3], s[3], p[3];
    const char *type;  /* max, avg, sum */
    int full, cip, global;
} pcfg;

static fh_pack *pack;
static void setup(void) { pack = fh_load("ops-nn"); cr_assert(pack, "load: %s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static void geom(const pcfg *c, int *in, int *k, int *s, int *p, int *o) {
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - c->nd), on = j >= 0;
        in[i] = on ? c->in[j] : 1;
        k[i] = !on ? 1 : c->global ? in[i] : c->k[j];
        s[i] = on && !c->global ? c->s[j] : 1;
        p[i] = on && !c->global ? c->p[j] : 0;
        int span = in[i] + 2 * p[i] - k[i];
        o[i] = 1 + (c->full ? (span + s[i] - 1) / s[i] : span / s[i]);
    }
}

static void ref(const pcfg *c, const double *x, double *y, const double *dy, double *dx) {
    int in[3], k[3], s[3], p[3], o[3];
    geom(c, in, k, s, p, o);
    int X = in[0] * in[1] * in[2], Y = o[0] * o[1] * o[2];
    if (dy) memset(dx, 0, sizeof(double) * (size_t)(c->N * c->C * X));
    for (int pl = 0; pl < c->N * c->C; pl++)
    for (int q0 = 0; q0 < o[0]; q0++) for (int q1 = 0; q1 < o[1]; q1++) for (int q2 = 0; q2 < o[2]; q2++) {
        int q = (q0 * o[1] + q1) * o[2] + q2, qq[3] = {q0, q1, q2};
        double sum = 0, best = 0; int arg = -1, n_pad = 1, n_in = 1;
        for (int i = 0; i < 3; i++) { /* taps per axis inside the padded extent / the data */
            int cp = 0, ci = 0;
            for (int t = 0; t < k[i]; t++) {
                int pos = qq[i] * s[i] - p[i] + t;
                cp += pos < in[i] + p[i];
                ci += pos >= 0 && pos < in[i];
            }
            n_pad *= cp; n_in *= ci;
        }
        for (int t0 = 0; t0 < k[0]; t0++) for (int t1 = 0; t1 < k[1]; t1++) for (int t2 = 0; t2 < k[2]; t2++) {
            int a = q0 * s[0] - p[0] + t0, b = q1 * s[1] - p[1] + t1, e = q2 * s[2] - p[2] + t2;
            if (a < 0 || a >= in[0] || b < 0 || b >= in[1] || e < 0 || e >= in[2]) continue;
            int xi = pl * X + (a * in[1] + b) * in[2] + e;
            sum += x[xi];
            if (arg < 0 || x[xi] > best) { best = x[xi]; arg = xi; }
        }
        int div = c->cip ? n_pad : n_in;
        double v = !strcmp(c->type, "max") ? best : !strcmp(c->type, "sum") ? sum : (div ? sum / div : 0);
        y[pl * Y + q] = v;
        if (!dy) continue;
        double g = dy[pl * Y + q];
        if (!strcmp(c->type, "max")) { if (arg >= 0) dx[arg] += g; continue; }
        double share = !strcmp(c->type, "sum") ? g : (div ? g / div : 0);
        for (int t0 = 0; t0 < k[0]; t0++) for (int t1 = 0; t1 < k[1]; t1++) for (int t2 = 0; t2 < k[2]; t2++) {
            int a = q0 * s[0] - p[0] + t0, b = q1 * s[1] - p[1] + t1, e = q2 * s[2] - p[2] + t2;
            if (a < 0 || a >= in[0] || b < 0 || b >= in[1] || e < 0 || e >= in[2]) continue;
            dx[pl * X + (a * in[1] + b) * in[2] + e] += share;
        }
    }
}

static void tuple(char *buf, size_t n, const int *v, int nd) {
    if (nd == 1) snprintf(buf, n, "(%d,)", v[0]);
    else snprintf(buf, n, "(%d,%d,%d)", v[0], v[1], v[2]);
}

static void init_node(fh_node *n, const char *impl, const pcfg *c, int32_t dt) {
    char kw[256], k[32], s[32], p[32];
    tuple(k, sizeof k, c->k, c->nd); tuple(s, sizeof s, c->s, c->nd); tuple(p, sizeof p, c->p, c->nd);
    if (c->global) snprintf(kw, sizeof kw, "global_pool=True pool_type=%s", c->type);
    else snprintf(kw, sizeof kw, "kernel=%s stride=%s pad=%s pool_type=%s pooling_convention=%s count_include_pad=%s", k, s,
                  p, c->type, c->full ? "full" : "valid", c->cip ? "True" : "False");
    cr_assert_eq(fh_node_init(n, pack, "Pooling", impl, kw, dt), 0, "%s: %s", kw, fh_error());
    n->in_shape[0].ndim = c->nd + 2;
    n->in_shape[0].dims[0] = c->N; n->in_shape[0].dims[1] = c->C;
    for (int i = 0; i < c->nd; i++) n->in_shape[0].dims[2 + i] = c->in[i];
    cr_assert_eq(fh_node_infer(n), MXP_OK, "%s: %s", kw, fh_error());
}

static void run_case(const pcfg *c, int32_t dt, double tol, uint64_t seed) {
    fh_node n;
    init_node(&n, "nd", c, dt);
    cr_assert_eq(fh_node_alloc(&n, 1), 1, "nd refused: %s", n.reason);
    int in[3], k[3], s[3], p[3], o[3];
    geom(c, in, k, s, p, o);
    int64_t nx = fh_shape_numel(&n.in_shape[0]), ny = fh_shape_numel(&n.out_shape[0]);
    cr_assert_eq(ny, (int64_t)c->N * c->C * o[0] * o[1] * o[2], "output shape");
    tu_fill(n.in[0], dt, nx, &seed, -1, 1);
    tu_fill(n.out_grad[0], dt, ny, &seed, -1, 1);
    double *x = tu_to_f64(n.in[0], dt, nx), *dy = tu_to_f64(n.out_grad[0], dt, ny);
    double *y = malloc(sizeof(double) * (size_t)ny), *dx = malloc(sizeof(double) * (size_t)nx);
    ref(c, x, y, dy, dx);
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    double e = tu_relerr(n.out[0], dt, y, ny);
    cr_assert(e <= tol, "%s nd%d fwd: relerr %g", c->type, c->nd, e);
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, add), 0, "%s", fh_error());
    for (int64_t i = 0; i < ny; i++) y[i] *= 2;
    e = tu_relerr(n.out[0], dt, y, ny);
    cr_assert(e <= tol, "%s nd%d fwd add: relerr %g", c->type, c->nd, e);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    e = tu_relerr(n.in_grad[0], dt, dx, nx);
    cr_assert(e <= tol, "%s nd%d bwd: relerr %g", c->type, c->nd, e);
    cr_assert_eq(fh_node_backward(&n, add), 0, "%s", fh_error());
    for (int64_t i = 0; i < nx; i++) dx[i] *= 2;
    e = tu_relerr(n.in_grad[0], dt, dx, nx);
    cr_assert(e <= tol, "%s nd%d bwd add: relerr %g", c->type, c->nd, e);
    free(x); free(dy); free(y); free(dx);
    fh_node_free(&n);
}

Test(pooling_nd, matches_reference, .init = setup, .fini = teardown) {
    const char *types[] = {"max", "avg", "sum"};
    const pcfg shapes[] = {
        /* nd N C  in          k          s          p        type full cip global */
        {3, 2, 3, {6, 7, 5}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 0, 0, 1, 0}, /* 3-D ResNet pool */
        {3, 1, 2, {5, 6, 7}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 0, 1, 1, 0}, /* full, padded */
        {3, 1, 2, {5, 6, 7}, {3, 2, 3}, {2, 1, 3}, {1, 0, 1}, 0, 1, 0, 0}, /* count_include_pad off */
        {3, 2, 2, {3, 4, 5}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, 0, 0, 1, 1}, /* global */
        {1, 2, 3, {11}, {3}, {2}, {1}, 0, 1, 1, 0},
        {1, 1, 2, {10}, {4}, {3}, {2}, 0, 0, 0, 0},
        {1, 2, 2, {9}, {1}, {1}, {0}, 0, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 3; t++) {
            pcfg c = shapes[i];
            c.type = types[t];
            run_case(&c, MXP_DTYPE_F32, 1e-6, 100 + i * 3 + (uint64_t)t);
            run_case(&c, MXP_DTYPE_F64, 1e-13, 200 + i * 3 + (uint64_t)t);
        }
}

Test(pooling_nd, finite_differences, .init = setup, .fini = teardown) {
    const char *types[] = {"max", "avg", "sum"};
    for (int t = 0; t < 3; t++) {
        pcfg c = {3, 1, 2, {4, 5, 4}, {2, 3, 2}, {2, 2, 1}, {1, 1, 0}, types[t], 1, 0, 0};
        fh_node n;
        init_node(&n, "nd", &c, MXP_DTYPE_F64);
        cr_assert_eq(fh_node_alloc(&n, 1), 1, "%s", n.reason);
        uint64_t seed = 9 + (uint64_t)t;
        tu_fill(n.in[0], MXP_DTYPE_F64, fh_shape_numel(&n.in_shape[0]), &seed, -1, 1);
        tu_fill(n.out_grad[0], MXP_DTYPE_F64, fh_shape_numel(&n.out_shape[0]), &seed, -1, 1);
        int check[1] = {1};
        tu_fd_check_every(&n, 1, check, 1e-6, 1);
        fh_node_free(&n);
    }
}

Test(pooling_nd, shapes_and_refusals, .init = setup, .fini = teardown) {
    fh_node n;
    /* valid vs full on a 3-D kernel: depth 7, k 2, s 2 -> 3 (valid) / 4 (full) */
    const char *conv[] = {"valid", "full"};
    for (int f = 0; f < 2; f++) {
        char kw[160];
        snprintf(kw, sizeof kw, "kernel=(2,3,3) stride=(2,2,2) pooling_convention=%s", conv[f]);
        cr_assert_eq(fh_node_init(&n, pack, "Pooling", "nd", kw, MXP_DTYPE_F32), 0, "%s", fh_error());
        n.in_shape[0].ndim = 5;
        memcpy(n.in_shape[0].dims, (int64_t[]){2, 3, 7, 8, 9}, 5 * sizeof(int64_t));
        cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
        int64_t want[2][5] = {{2, 3, 3, 3, 4}, {2, 3, 4, 4, 4}};
        cr_assert_eq(n.out_shape[0].ndim, 5);
        for (int i = 0; i < 5; i++) cr_assert_eq(n.out_shape[0].dims[i], want[f][i], "%s dim %d", conv[f], i);
        fh_node_free(&n);
    }
    /* a 3-D kernel on 4-D data, a 2-element stride with a 3-D kernel */
    cr_assert_eq(fh_node_init(&n, pack, "Pooling", "nd", "kernel=(2,2,2)", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, (int64_t[]){2, 3, 7, 8}, 4 * sizeof(int64_t));
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "5-D NCDHW"), "%s", fh_error());
    fh_node_free(&n);
    cr_assert_neq(fh_node_init(&n, pack, "Pooling", "nd", "kernel=(2,2,2) stride=(2,2)", MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "stride must have 3 elements"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
    /* default keeps 2-D, nd keeps 1-D/3-D */
    pcfg c = {3, 1, 1, {4, 4, 4}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, "max", 0, 1, 0};
    init_node(&n, "default", &c, MXP_DTYPE_F32);
    cr_assert_eq(fh_node_alloc(&n, 1), 0);
    cr_assert(strstr(n.reason, "2-D"), "%s", n.reason);
    fh_node_free(&n);
    cr_assert_eq(fh_node_init(&n, pack, "Pooling", "nd", "kernel=(2,2)", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, (int64_t[]){1, 1, 4, 4}, 4 * sizeof(int64_t));
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 0);
    cr_assert(strstr(n.reason, "1-D (NCW) and 3-D"), "%s", n.reason);
    fh_node_free(&n);
}
