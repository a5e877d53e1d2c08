/* test_pooling.c — Pooling max/avg/sum, valid/full, pad, stride, global,
 * count_include_pad: forward against an independent float64 reference,
 * backward by float64 finite differences, output shapes. */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

typedef struct pc { const char *type; int k, s, p, full, global, cip; } pc;

static void ref_pool(const pc *c, const double *x, int N, int C, int H, int W, int Ho, int Wo, double *y) {
    int k0 = c->global ? H : c->k, k1 = c->global ? W : c->k, s = c->global ? 1 : c->s, p = c->global ? 0 : c->p;
    for (int n = 0; n < N * C; n++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double mx = -1e300, sum = 0; int cnt_pad = 0, cnt = 0;
        for (int i = 0; i < k0; i++) for (int j = 0; j < k1; j++) {
            int ih = oh * s - p + i, iw = ow * s - p + j;
            if (ih < H + p && iw < W + p) cnt_pad++;      /* inside the padded extent */
            if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
            double v = x[(n * H + ih) * W + iw];
            if (v > mx) mx = v;
            sum += v; cnt++;
        }
        double r = !strcmp(c->type, "max") ? mx : !strcmp(c->type, "sum") ? sum : sum / (c->cip ? cnt_pad : cnt);
        y[(n * Ho + oh) * Wo + ow] = r;
    }
}

Test(pooling, forward_and_fd, .init = setup, .fini = teardown) {
    pc cs[] = {
        {"max", 2, 2, 0, 0, 0, 1}, {"max", 3, 2, 1, 0, 0, 1}, {"avg", 3, 2, 1, 0, 0, 1}, {"avg", 3, 2, 1, 1, 0, 0},
        {"sum", 2, 1, 0, 0, 0, 1}, {"avg", 3, 3, 0, 1, 0, 1}, {"max", 3, 2, 1, 1, 0, 1}, {"avg", 1, 1, 0, 0, 1, 1},
        {"max", 1, 1, 0, 0, 1, 1}, {"max", 3, 3, 0, 0, 0, 1},
    };
    for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) for (int dti = 0; dti < 2; dti++) {
        const pc *c = &cs[t];
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        char kw[200];
        snprintf(kw, sizeof kw, "pool_type=%s kernel=(%d,%d) stride=(%d,%d) pad=(%d,%d) pooling_convention=%s global_pool=%s count_include_pad=%s",
                 c->type, c->k, c->k, c->s, c->s, c->p, c->p, c->full ? "full" : "valid", c->global ? "True" : "False", c->cip ? "True" : "False");
        int N = 2, C = 3, H = 9, W = 8;
        fh_node n; int64_t d[4] = {N, C, H, W};
        tu_node(&n, pack, "Pooling", kw, dt, 4, d, 1);
        int Ho, Wo;
        if (c->global) { Ho = Wo = 1; }
        else if (c->full) { Ho = 1 + (H + 2 * c->p - c->k + c->s - 1) / c->s; Wo = 1 + (W + 2 * c->p - c->k + c->s - 1) / c->s; }
        else { Ho = 1 + (H + 2 * c->p - c->k) / c->s; Wo = 1 + (W + 2 * c->p - c->k) / c->s; }
        cr_assert_eq(n.out_shape[0].dims[2], Ho, "%s", kw); cr_assert_eq(n.out_shape[0].dims[3], Wo, "%s", kw);
        uint64_t r = 17 + t;
        tu_fill(n.in[0], dt, N * C * H * W, &r, -1, 1);
        double *x = tu_to_f64(n.in[0], dt, N * C * H * W), *y = malloc(sizeof(double) * (size_t)(N * C * Ho * Wo));
        ref_pool(c, x, N, C, H, W, Ho, Wo, y);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
        cr_assert_leq(tu_relerr(n.out[0], dt, y, N * C * Ho * Wo), dt == MXP_DTYPE_F32 ? 1e-6 : 1e-14, "%s", kw);
        if (dt == MXP_DTYPE_F64) {
            tu_fill(n.out_grad[0], dt, N * C * Ho * Wo, &r, -1, 1);
            int check[1] = {1};
            tu_fd_check(&n, 1, check, 1e-6);
        }
        free(x); free(y);
        fh_node_free(&n);
    }
}

Test(pooling, params_and_shapes, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_lt(fh_node_init(&n, pack, "Pooling", "default", "pool_type=max", MXP_DTYPE_F32), 0); /* kernel needed */
    fh_node_free(&n);
    cr_assert_eq(fh_node_init(&n, pack, "Pooling", "default", "kernel=(5,5)", MXP_DTYPE_F32), 0);
    n.in_shape[0] = (mxp_shape){4, 0, {1, 1, 3, 3}};
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    fh_node_free(&n);
}

/* Max backward with non-overlapping windows that cover the data exactly
 * (the 2x2 stride-2 fast path): req write must overwrite every element of
 * a dx holding garbage, req add must accumulate; reference routes each
 * output gradient to the first maximum of its window. */
Test(pooling, max_disjoint_backward_req, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int N = 2, C = 3, H = 8, W = 6, Ho = 4, Wo = 3;
        fh_node n; int64_t d[4] = {N, C, H, W};
        tu_node(&n, pack, "Pooling", "pool_type=max kernel=(2,2) stride=(2,2)", dt, 4, d, 1);
        uint64_t r = 99;
        tu_fill(n.in[0], dt, N * C * H * W, &r, -1, 1);
        tu_fill(n.out_grad[0], dt, N * C * Ho * Wo, &r, -1, 1);
        double *ref = calloc((size_t)(N * C * H * W), sizeof(double));
        for (int pl = 0; pl < N * C; pl++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
            int best = -1; double v = 0;
            for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++) {
                int idx = (pl * H + 2 * oh + i) * W + 2 * ow + j;
                if (best < 0 || tu_get(n.in[0], dt, idx) > v) { v = tu_get(n.in[0], dt, idx); best = idx; }
            }
            ref[best] += tu_get(n.out_grad[0], dt, (pl * Ho + oh) * Wo + ow);
        }
        tu_fill(n.in_grad[0], dt, N * C * H * W, &r, 5, 6); /* garbage */
        cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
        cr_assert_leq(tu_relerr(n.in_grad[0], dt, ref, N * C * H * W), 1e-15);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_backward(&n, add), 0, "%s", fh_error());
        for (int i = 0; i < N * C * H * W; i++) ref[i] *= 2;
        cr_assert_leq(tu_relerr(n.in_grad[0], dt, ref, N * C * H * W), 1e-15);
        free(ref);
        fh_node_free(&n);
    }
}
