/* test_deconv.c — Deconvolution: output shapes (pad, adj, target_shape),
 * forward against an independent scatter-form float64 reference (groups,
 * stride, dilation, bias), req add, and float64 finite differences for
 * data, weight and bias. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

typedef struct dcfg { int N, C, H, W, M, G, k, s, p, d, adj, bias; } dcfg;

static void ref(const dcfg *c, int Ho, int Wo, const double *x, const double *w, const double *b, double *y) {
    int Cg = c->C / c->G, Mg = c->M / c->G;
    for (int i = 0; i < c->N * c->M * Ho * Wo; i++) y[i] = b ? b[(i / (Ho * Wo)) % c->M] : 0;
    for (int n = 0; n < c->N; n++) for (int ci = 0; ci < c->C; ci++) for (int h = 0; h < c->H; h++) for (int ww = 0; ww < c->W; ww++) {
        int g = ci / Cg;
        double xv = x[((n * c->C + ci) * c->H + h) * c->W + ww];
        for (int mg = 0; mg < Mg; mg++) for (int ki = 0; ki < c->k; ki++) for (int kj = 0; kj < c->k; kj++) {
            int oh = h * c->s - c->p + ki * c->d, ow = ww * c->s - c->p + kj * c->d;
            if (oh < 0 || ow < 0 || oh >= Ho || ow >= Wo) continue;
            y[((n * c->M + g * Mg + mg) * Ho + oh) * Wo + ow] += xv * w[((ci * Mg + mg) * c->k + ki) * c->k + kj];
        }
    }
}

Test(deconv, forward_fd, .init = setup, .fini = teardown) {
    dcfg cs[] = {{2, 3, 5, 4, 4, 1, 3, 2, 1, 1, 1, 1}, {1, 4, 4, 5, 6, 2, 2, 1, 0, 2, 0, 0}, {2, 2, 3, 3, 3, 1, 4, 2, 1, 1, 0, 1},
                 {1, 1, 6, 6, 2, 1, 1, 1, 0, 1, 0, 1}};
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) for (int dti = 0; dti < 2; dti++) {
        const dcfg *c = &cs[t];
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        char kw[256];
        snprintf(kw, sizeof kw, "kernel=(%d,%d) stride=(%d,%d) pad=(%d,%d) dilate=(%d,%d) adj=(%d,%d) num_filter=%d num_group=%d no_bias=%s",
                 c->k, c->k, c->s, c->s, c->p, c->p, c->d, c->d, c->adj, c->adj, c->M, c->G, c->bias ? "False" : "True");
        int64_t d[4] = {c->N, c->C, c->H, c->W};
        fh_node n;
        tu_node(&n, pack, "Deconvolution", kw, dt, 4, d, 1);
        int Ho = c->s * (c->H - 1) + c->d * (c->k - 1) + 1 - 2 * c->p + c->adj;
        int Wo = c->s * (c->W - 1) + c->d * (c->k - 1) + 1 - 2 * c->p + c->adj;
        cr_assert_eq(n.out_shape[0].dims[2], Ho); cr_assert_eq(n.out_shape[0].dims[3], Wo);
        cr_assert_eq(n.in_shape[1].dims[0], c->C); cr_assert_eq(n.in_shape[1].dims[1], c->M / c->G);
        uint64_t r = 3 + t;
        for (uint32_t k = 0; k < n.n_in; k++) tu_fill(n.in[k], dt, fh_shape_numel(&n.in_shape[k]), &r, -1, 1);
        int64_t ny = fh_shape_numel(&n.out_shape[0]);
        double *x = tu_to_f64(n.in[0], dt, fh_shape_numel(&n.in_shape[0])), *w = tu_to_f64(n.in[1], dt, fh_shape_numel(&n.in_shape[1]));
        double *b = c->bias ? tu_to_f64(n.in[2], dt, c->M) : NULL, *y = malloc(sizeof(double) * (size_t)ny);
        ref(c, Ho, Wo, x, w, b, y);
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

Test(deconv, target_shape, .init = setup, .fini = teardown) {
    fh_node n;
    int64_t d[4] = {1, 2, 7, 7};
    tu_node(&n, pack, "Deconvolution", "kernel=(4,4) stride=(2,2) num_filter=3 target_shape=(14,14)", MXP_DTYPE_F32, 4, d, 1);
    cr_assert_eq(n.out_shape[0].dims[2], 14); cr_assert_eq(n.out_shape[0].dims[3], 14);
    cr_assert_eq(n.n_in, 2); /* no_bias defaults to True */
    fh_node_free(&n);
    cr_assert_lt(fh_node_init(&n, pack, "Deconvolution", "default", "kernel=(3,3) stride=(2,2) adj=(2,2) num_filter=2", MXP_DTYPE_F32), 0);
    fh_node_free(&n);
}
