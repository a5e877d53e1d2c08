/* test_deconv_nd.c — Deconvolution with 3-D (NCDHW) and 1-D (NCW) kernels
 * (run on conv_nd.c's passes): output shapes (MXNet's
 * s*(in-1) + d*(k-1) + 1 - 2p + adj per axis, target_shape), forward
 * against an independent scatter-form float64 reference (groups, stride,
 * dilation, bias), req add, float64 finite differences for data, weight
 * and bias, and the rank checks. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = fh_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

/* nd = 3: spatial (D, H, W); nd = 1: only in[2], k[2], ... are used. */
typedef struct dcfg { int nd, N, C, M, G, in[3], k[3], s[3], p[3], d[3], adj[3], bias; } dcfg;

static void full3(const dcfg *c, int *in, int *k, int *s, int *p, int *d, int *o) {
    for (int i = 0; i < 3; i++) {
        int on = c->nd == 3 || i == 2;
        in[i] = on ? c->in[i] : 1; k[i] = on ? c->k[i] : 1; s[i] = on ? c->s[i] : 1;
        p[i] = on ? c->p[i] : 0; d[i] = on ? c->d[i] : 1;
        o[i] = s[i] * (in[i] - 1) + d[i] * (k[i] - 1) + 1 - 2 * p[i] + (on ? c->adj[i] : 0);
    }
}

/* y[n][g*Mg+m][o] += x[n][c][i] * w[c][m][t] where o = i*s - p + t*d. */
static void ref(const dcfg *c, const double *x, const double *w, const double *b, double *y) {
    int in[3], k[3], s[3], p[3], d[3], o[3];
    full3(c, in, k, s, p, d, o);
    int Cg = c->C / c->G, Mg = c->M / c->G, O = o[0] * o[1] * o[2], X = in[0] * in[1] * in[2], T = k[0] * k[1] * k[2];
    for (int i = 0; i < c->N * c->M * O; i++) y[i] = b ? b[(i / O) % c->M] : 0;
    for (int n = 0; n < c->N; n++) for (int ci = 0; ci < c->C; ci++) for (int q = 0; q < X; q++) {
        int i0 = q / (in[1] * in[2]), i1 = q / in[2] % in[1], i2 = q % in[2], g = ci / Cg;
        double xv = x[(n * c->C + ci) * X + q];
        for (int m = 0; m < Mg; m++)
        for (int t0 = 0; t0 < k[0]; t0++) for (int t1 = 0; t1 < k[1]; t1++) for (int t2 = 0; t2 < k[2]; t2++) {
            int a0 = i0 * s[0] - p[0] + t0 * d[0], a1 = i1 * s[1] - p[1] + t1 * d[1], a2 = i2 * s[2] - p[2] + t2 * d[2];
            if (a0 < 0 || a0 >= o[0] || a1 < 0 || a1 >= o[1] || a2 < 0 || a2 >= o[2]) continue;
            y[(n * c->M + g * Mg + m) * O + (a0 * o[1] + a1) * o[2] + a2] +=
                xv * w[(ci * Mg + m) * T + (t0 * k[1] + t1) * k[2] + t2];
        }
    }
}

static void tup(char *buf, size_t n, const dcfg *c, const int *v) {
    if (c->nd == 1) snprintf(buf, n, "(%d,)", v[2]);
    else snprintf(buf, n, "(%d,%d,%d)", v[0], v[1], v[2]);
}

Test(deconv_nd, forward_and_gradients, .init = setup, .fini = teardown) {
    const dcfg cs[] = {
        {3, 2, 3, 4, 1, {3, 4, 3}, {3, 3, 3}, {2, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 0}, 1},
        {3, 1, 4, 2, 2, {2, 3, 4}, {2, 3, 2}, {1, 2, 2}, {0, 1, 0}, {2, 1, 1}, {0, 1, 1}, 0},
        {1, 2, 2, 3, 1, {0, 0, 7}, {0, 0, 4}, {0, 0, 2}, {0, 0, 1}, {0, 0, 1}, {0, 0, 1}, 1},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) for (int dti = 0; dti < 2; dti++) {
        const dcfg *c = &cs[t];
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        char k[32], s[32], p[32], d[32], a[32], kw[320];
        tup(k, sizeof k, c, c->k); tup(s, sizeof s, c, c->s); tup(p, sizeof p, c, c->p);
        tup(d, sizeof d, c, c->d); tup(a, sizeof a, c, c->adj);
        snprintf(kw, sizeof kw, "kernel=%s stride=%s pad=%s dilate=%s adj=%s num_filter=%d num_group=%d no_bias=%s", k, s,
                 p, d, a, c->M, c->G, c->bias ? "False" : "True");
        int in[3], kk[3], ss[3], pp[3], dd[3], o[3];
        full3(c, in, kk, ss, pp, dd, o);
        int64_t dims[5] = {c->N, c->C, in[0], in[1], in[2]};
        if (c->nd == 1) dims[2] = in[2];
        fh_node n;
        tu_node(&n, pack, "Deconvolution", kw, dt, c->nd + 2, dims, 1);
        for (int i = 0; i < c->nd; i++)
            cr_assert_eq(n.out_shape[0].dims[2 + i], o[3 - c->nd + i], "%s: output dim %d", kw, 2 + i);
        cr_assert_eq(n.in_shape[1].ndim, c->nd + 2);
        cr_assert_eq(n.in_shape[1].dims[0], c->C);
        cr_assert_eq(n.in_shape[1].dims[1], c->M / c->G);
        uint64_t r = 5 + t;
        for (uint32_t q = 0; q < n.n_in; q++) tu_fill(n.in[q], dt, fh_shape_numel(&n.in_shape[q]), &r, -1, 1);
        int64_t ny = fh_shape_numel(&n.out_shape[0]);
        double *x = tu_to_f64(n.in[0], dt, fh_shape_numel(&n.in_shape[0])), *w = tu_to_f64(n.in[1], dt, fh_shape_numel(&n.in_shape[1]));
        double *b = c->bias ? tu_to_f64(n.in[2], dt, c->M) : NULL, *y = malloc(sizeof(double) * (size_t)ny);
        ref(c, x, w, b, y);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        double tol = dt == MXP_DTYPE_F32 ? 1e-5 : 1e-13;
        cr_assert_leq(tu_relerr(n.out[0], dt, y, ny), tol, "%s", kw);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_forward(&n, 1, add), 0);
        for (int64_t i = 0; i < ny; i++) y[i] *= 2;
        cr_assert_leq(tu_relerr(n.out[0], dt, y, ny), tol, "%s add", kw);
        if (dt == MXP_DTYPE_F64) {
            tu_fill(n.out_grad[0], dt, ny, &r, -1, 1);
            int check[3] = {1, 1, 1};
            tu_fd_check(&n, 1, check, 1e-6);
        }
        free(x); free(w); free(b); free(y);
        fh_node_free(&n);
    }
}

Test(deconv_nd, shapes_and_rank_checks, .init = setup, .fini = teardown) {
    fh_node n;
    /* target_shape (one size per axis) derives pad as MXNet does */
    cr_assert_eq(fh_node_init(&n, pack, "Deconvolution", "default",
                               "kernel=(4,4,4) stride=(2,2,2) target_shape=(8,10,12) num_filter=3", MXP_DTYPE_F32), 0,
                 "%s", fh_error());
    n.in_shape[0].ndim = 5;
    memcpy(n.in_shape[0].dims, (int64_t[]){1, 2, 4, 5, 6}, 5 * sizeof(int64_t));
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    const int64_t want[5] = {1, 3, 8, 10, 12};
    for (int i = 0; i < 5; i++) cr_assert_eq(n.out_shape[0].dims[i], want[i], "dim %d", i);
    fh_node_free(&n);
    cr_assert_eq(fh_node_init(&n, pack, "Deconvolution", "default", "kernel=(3,3,3) num_filter=3", MXP_DTYPE_F32), 0);
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, (int64_t[]){1, 2, 4, 5}, 4 * sizeof(int64_t));
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "needs 5-D data"), "%s", fh_error());
    fh_node_free(&n);
    cr_assert_neq(fh_node_init(&n, pack, "Deconvolution", "default", "kernel=(3,3,3) adj=(1,1) stride=(2,2,2) num_filter=3",
                                MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "adj must have 3 elements"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
    cr_assert_neq(fh_node_init(&n, pack, "Deconvolution", "default", "kernel=(3,3,3,3) num_filter=3", MXP_DTYPE_F32), 0);
    cr_assert(strstr(fh_error(), "kernel has 4 dims"), "%s", fh_error());
    fh_node_free(&n); /* a failed init keeps its parsed params */
}
