/* test_pooling.c — Pooling max/avg/sum, valid/full, pad, stride, global,
 * count_include_pad: a table (op_table.h, every impl) of forward against
 * an independent float64 reference with output shapes, and backward by
 * float64 finite differences; parameter errors; max backward's req
 * write/add on the disjoint-window fast path. */
#include <string.h>
#include "nn_test_util.h"
#include "op_table.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

typedef struct pc { const char *type; int k, s, p, full, global, cip; } pc;

/* Independent float64 pooling of an (N, C, H, W) input; checks the output
 * shape against MXNet's valid/full conventions first. */
static void ref_pool(const ot_ref_args *a) {
    const pc *c = a->data;
    const fh_arr *in = &a->in[0];
    fh_arr *out = &a->out[0];
    int N = (int)in->shape[0], C = (int)in->shape[1], H = (int)in->shape[2], W = (int)in->shape[3];
    int Ho, Wo;
    if (c->global) Ho = Wo = 1;
    else if (c->full) { Ho = 1 + (H + 2 * c->p - c->k + c->s - 1) / c->s; Wo = 1 + (W + 2 * c->p - c->k + c->s - 1) / c->s; }
    else { Ho = 1 + (H + 2 * c->p - c->k) / c->s; Wo = 1 + (W + 2 * c->p - c->k) / c->s; }
    cr_assert(out->ndim == 4 && out->shape[2] == Ho && out->shape[3] == Wo, "%s k%d s%d p%d: output %lldx%lld, want %dx%d",
              c->type, c->k, c->s, c->p, (long long)out->shape[2], (long long)out->shape[3], Ho, Wo);
    int k0 = c->global ? H : c->k, k1 = c->global ? W : c->k, s = c->global ? 1 : c->s, p = c->global ? 0 : c->p;
    for (int n = 0; n < N * C; n++) for (int oh = 0; oh < Ho; oh++) for (int ow = 0; ow < Wo; ow++) {
        double mx = -1e300, sum = 0; int cnt_pad = 0, cnt = 0;
        for (int i = 0; i < k0; i++) for (int j = 0; j < k1; j++) {
            int ih = oh * s - p + i, iw = ow * s - p + j;
            if (ih < H + p && iw < W + p) cnt_pad++;      /* inside the padded extent */
            if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
            double v = fh_get(in, (n * H + ih) * W + iw);
            if (v > mx) mx = v;
            sum += v; cnt++;
        }
        double r = !strcmp(c->type, "max") ? mx : !strcmp(c->type, "sum") ? sum : sum / (c->cip ? cnt_pad : cnt);
        fh_set(out, (n * Ho + oh) * Wo + ow, r);
    }
}

/* One row per case: forward in float32 and float64 on (2, 3, 9, 8), float64
 * finite differences of the data. */
#define POOL(t, k, s, p, conv, full, glob, cip)                                                              \
    {.op = "Pooling",                                                                                        \
     .kw = {"pool_type", t, "kernel", "(" #k "," #k ")", "stride", "(" #s "," #s ")", "pad", "(" #p "," #p ")", \
            "pooling_convention", conv, "global_pool", glob ? "True" : "False", "count_include_pad",          \
            cip ? "True" : "False", NULL},                                                                   \
     .n_in = 1, .in = {OT_SHAPE(2, 3, 9, 8)}, .lo = -1, .hi = 1, .seed = 17, .ref = ref_pool,                 \
     .ref_data = &(const pc){t, k, s, p, full, glob, cip}, .atol32 = 1e-6, .rtol32 = 1e-6, .atol64 = 1e-14,     \
     .rtol64 = 1e-14, .fd_mask = 1, .fd_atol = 1e-6, .fd_rtol = 1e-6}

static const ot_row rows[] = {
    POOL("max", 2, 2, 0, "valid", 0, 0, 1), POOL("max", 3, 2, 1, "valid", 0, 0, 1), POOL("avg", 3, 2, 1, "valid", 0, 0, 1),
    POOL("avg", 3, 2, 1, "full", 1, 0, 0),  POOL("sum", 2, 1, 0, "valid", 0, 0, 1), POOL("avg", 3, 3, 0, "full", 1, 0, 1),
    POOL("max", 3, 2, 1, "full", 1, 0, 1),  POOL("avg", 1, 1, 0, "valid", 0, 1, 1), POOL("max", 1, 1, 0, "valid", 0, 1, 1),
    POOL("max", 3, 3, 0, "valid", 0, 0, 1),
};

Test(pooling, table, .init = setup, .fini = teardown) {
    int runs = ot_run(pack, rows, OT_LEN(rows));
    cr_assert_geq(runs, 10 * 2, "%d runs", runs);
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
