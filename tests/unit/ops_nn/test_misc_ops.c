/* test_misc_ops.c — Embedding, UpSampling (nearest), LRN and
 * softmax_cross_entropy: forward against float64 references and backward by
 * float64 finite differences (Embedding's weight gradient against its
 * scatter-add definition). */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

Test(embedding, gather_scatter, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Embedding", "default", "input_dim=10 output_dim=4", MXP_DTYPE_F32), 0);
    n.in_shape[0] = (mxp_shape){2, 0, {3, 5}};
    cr_assert_eq(fh_node_infer(&n), 0);
    cr_assert_eq(n.out_shape[0].ndim, 3); cr_assert_eq(n.out_shape[0].dims[2], 4);
    cr_assert_eq(n.in_shape[1].dims[0], 10);
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    float *idx = n.in[0], *w = n.in[1];
    for (int i = 0; i < 15; i++) idx[i] = (float)((i * 7) % 12 - 1); /* includes -1 and 10, 11: clipped */
    for (int i = 0; i < 40; i++) w[i] = (float)i * 0.5f;
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    for (int i = 0; i < 15; i++) {
        int k = (int)idx[i]; k = k < 0 ? 0 : k > 9 ? 9 : k;
        for (int j = 0; j < 4; j++) cr_assert_eq(((float *)n.out[0])[i * 4 + j], w[k * 4 + j]);
    }
    uint64_t r = 1;
    tu_fill(n.out_grad[0], MXP_DTYPE_F32, 60, &r, -1, 1);
    cr_assert_eq(fh_node_backward(&n, NULL), 0);
    double dw[40] = {0};
    for (int i = 0; i < 15; i++) { int k = (int)idx[i]; k = k < 0 ? 0 : k > 9 ? 9 : k;
        for (int j = 0; j < 4; j++) dw[k * 4 + j] += ((float *)n.out_grad[0])[i * 4 + j]; }
    cr_assert_leq(tu_relerr(n.in_grad[1], MXP_DTYPE_F32, dw, 40), 1e-6);
    fh_node_free(&n);
}

Test(upsampling, nearest, .init = setup, .fini = teardown) {
    for (int mode = 0; mode < 2; mode++) {
        fh_node n;
        cr_assert_eq(fh_node_init(&n, pack, "UpSampling", "default",
                     mode ? "scale=2 sample_type=nearest num_args=2 multi_input_mode=sum" : "scale=2 sample_type=nearest num_args=2",
                     MXP_DTYPE_F64), 0, "%s", fh_error());
        cr_assert_eq(n.n_in, 2);
        n.in_shape[0] = (mxp_shape){4, 0, {2, 3, 4, 5}};
        n.in_shape[1] = (mxp_shape){4, 0, {2, 3, 2, (int64_t)(5.0 / 2 * 0) + 0}};
        n.in_shape[1].dims[2] = 8; n.in_shape[1].dims[3] = 10; /* scale 1 relative to output (8, 10) */
        cr_assert_eq(fh_node_infer(&n), 0, "%s", fh_error());
        cr_assert_eq(n.out_shape[0].dims[1], mode ? 3 : 6);
        cr_assert_eq(n.out_shape[0].dims[2], 8); cr_assert_eq(n.out_shape[0].dims[3], 10);
        cr_assert_eq(fh_node_alloc(&n, 1), 1);
        uint64_t r = 4;
        tu_fill(n.in[0], MXP_DTYPE_F64, 120, &r, -1, 1);
        tu_fill(n.in[1], MXP_DTYPE_F64, 480, &r, -1, 1);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        const double *a = n.in[0], *b = n.in[1], *y = n.out[0];
        int C = mode ? 3 : 6;
        for (int nn = 0; nn < 2; nn++) for (int c = 0; c < C; c++) for (int h = 0; h < 8; h++) for (int w = 0; w < 10; w++) {
            double e;
            if (mode) e = a[((nn * 3 + c) * 4 + h / 2) * 5 + w / 2] + b[((nn * 3 + c) * 8 + h) * 10 + w];
            else e = c < 3 ? a[((nn * 3 + c) * 4 + h / 2) * 5 + w / 2] : b[((nn * 3 + c - 3) * 8 + h) * 10 + w];
            cr_assert_eq(y[((nn * C + c) * 8 + h) * 10 + w], e);
        }
        tu_fill(n.out_grad[0], MXP_DTYPE_F64, fh_shape_numel(&n.out_shape[0]), &r, -1, 1);
        int check[2] = {1, 1};
        tu_fd_check(&n, 1, check, 1e-7);
        fh_node_free(&n);
    }
}

Test(lrn, forward_fd, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        int64_t d[4] = {2, 7, 3, 4};
        fh_node n;
        tu_node(&n, pack, "LRN", "nsize=3 alpha=0.1 beta=0.75 knorm=2", dt, 4, d, 1);
        uint64_t r = 5;
        tu_fill(n.in[0], dt, 168, &r, -2, 2);
        double y[168];
        for (int i = 0; i < 168; i++) {
            int c = (i / 12) % 7, base = i - c * 12;
            double s = 0;
            for (int k = c - 1; k <= c + 1; k++) if (k >= 0 && k < 7) { double v = tu_get(n.in[0], dt, base + k * 12); s += v * v; }
            y[i] = tu_get(n.in[0], dt, i) * pow(2 + 0.1 / 3 * s, -0.75);
        }
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_leq(tu_relerr(n.out[0], dt, y, 168), dt == MXP_DTYPE_F32 ? 1e-6 : 1e-13);
        if (dt == MXP_DTYPE_F64) {
            tu_fill(n.out_grad[0], dt, 168, &r, -1, 1);
            int check[1] = {1};
            tu_fd_check(&n, 1, check, 1e-6);
        }
        fh_node_free(&n);
    }
}

Test(softmax_cross_entropy, forward_fd, .init = setup, .fini = teardown) {
    fh_node n;
    int64_t d[2] = {5, 4};
    tu_node(&n, pack, "softmax_cross_entropy", "", MXP_DTYPE_F64, 2, d, 1);
    cr_assert_eq(n.in_shape[1].dims[0], 5); cr_assert_eq(n.out_shape[0].dims[0], 1);
    uint64_t r = 6;
    tu_fill(n.in[0], MXP_DTYPE_F64, 20, &r, -2, 2);
    double *x = n.in[0], *l = n.in[1], loss = 0;
    for (int i = 0; i < 5; i++) {
        l[i] = (double)((i * 3) % 4);
        double s = 0; for (int k = 0; k < 4; k++) s += exp(x[i * 4 + k]);
        loss += log(s) - x[i * 4 + (int)l[i]];
    }
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    cr_assert(fabs(((double *)n.out[0])[0] - loss) < 1e-12);
    ((double *)n.out_grad[0])[0] = 0.7;
    int check[2] = {1, 0};
    tu_fd_check(&n, 1, check, 1e-7);
    fh_node_free(&n);
}
