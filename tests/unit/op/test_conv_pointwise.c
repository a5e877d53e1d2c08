/* test_conv_pointwise.c — Convolution impl "pointwise" (1x1, stride 1) run
 * through the node runtime, whose arrays are 64-byte aligned: the path on
 * which whole strips of the output are written with streaming stores
 * (tests/unit/ops_nn/test_conv.c covers the other paths on unaligned
 * harness buffers).  Forward, data, weight and bias gradients against a
 * float64 plain-loop reference, on an image whose pixel count is a
 * multiple of 16 (streaming stores) and one that is not (ragged last
 * strip), with more than 64 output channels (two weight-gradient blocks). */
#include "op_test_util.h"

#include "op/op.h"

#include <math.h>

TestSuite(conv_pointwise, .init = opx_setup, .fini = opx_teardown, .timeout = 120);

typedef struct layer { int N, C, H, W, M; } layer;

static double relerr(const double *got, const double *want, int64_t n) {
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        e += (got[i] - want[i]) * (got[i] - want[i]);
        r += want[i] * want[i];
    }
    return sqrt(e / (r > 0 ? r : 1));
}

static void check_layer(const layer *L) {
    int64_t P = (int64_t)L->H * L->W;
    int64_t nx = L->N * L->C * P, nw = (int64_t)L->M * L->C, ny = L->N * L->M * P;
    double *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *b = malloc(L->M * sizeof *b);
    double *dy = malloc(ny * sizeof *dy), *y = calloc(ny, sizeof *y), *dx = calloc(nx, sizeof *dx);
    double *dw = calloc(nw, sizeof *dw), *db = calloc(L->M, sizeof *db);
    cr_assert(x && w && b && dy && y && dx && dw && db);
    opx_fill(x, nx, 1, -1, 1);
    opx_fill(w, nw, 2, -0.5, 0.5);
    opx_fill(b, L->M, 3, -0.2, 0.2);
    opx_fill(dy, ny, 4, -1, 1);
    for (int64_t i = 0; i < nx; i++) x[i] = (float)x[i]; /* the inputs the impl sees */
    for (int64_t i = 0; i < nw; i++) w[i] = (float)w[i];
    for (int64_t i = 0; i < L->M; i++) b[i] = (float)b[i];
    for (int64_t i = 0; i < ny; i++) dy[i] = (float)dy[i];
    for (int n = 0; n < L->N; n++)
        for (int m = 0; m < L->M; m++)
            for (int c = 0; c < L->C; c++) {
                double wv = w[m * L->C + c];
                const double *xr = x + ((int64_t)n * L->C + c) * P, *dyr = dy + ((int64_t)n * L->M + m) * P;
                double *yr = y + ((int64_t)n * L->M + m) * P, *dxr = dx + ((int64_t)n * L->C + c) * P;
                double s = 0;
                for (int64_t p = 0; p < P; p++) {
                    yr[p] += wv * xr[p];
                    dxr[p] += wv * dyr[p];
                    s += dyr[p] * xr[p];
                }
                dw[m * L->C + c] += s;
            }
    for (int n = 0; n < L->N; n++)
        for (int m = 0; m < L->M; m++)
            for (int64_t p = 0; p < P; p++) {
                y[((int64_t)n * L->M + m) * P + p] += b[m];
                db[m] += dy[((int64_t)n * L->M + m) * P + p];
            }

    int64_t sx[4] = {L->N, L->C, L->H, L->W}, sw[4] = {L->M, L->C, 1, 1}, sb[1] = {L->M}, sy[4] = {L->N, L->M, L->H, L->W};
    mxp_ndarray *arg[3] = {opx_arr(MXP_DTYPE_F32, 4, sx, x), opx_arr(MXP_DTYPE_F32, 4, sw, w),
                           opx_arr(MXP_DTYPE_F32, 1, sb, b)};
    mxp_ndarray *grad[3] = {opx_arr(MXP_DTYPE_F32, 4, sx, NULL), opx_arr(MXP_DTYPE_F32, 4, sw, NULL),
                            opx_arr(MXP_DTYPE_F32, 1, sb, NULL)};
    mxp_ndarray *out = opx_arr(MXP_DTYPE_F32, 4, sy, NULL), *og = opx_arr(MXP_DTYPE_F32, 4, sy, dy);
    char nf[16];
    snprintf(nf, sizeof nf, "%d", L->M);
    const char *keys[] = {"kernel", "num_filter"}, *vals[] = {"(1, 1)", nf};
    mxp__node *node = NULL;
    cr_assert_eq(mxp_op_set_impl("Convolution", "pointwise"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_create("Convolution", 2, keys, vals, &node), MXP_OK, "%s", mxp_last_error());
    mxp_shape is[3], os = {.ndim = -1};
    int32_t it[3] = {MXP_DTYPE_F32, MXP_DTYPE_F32, MXP_DTYPE_F32}, ot = MXP_DTYPE_UNKNOWN;
    const int64_t *shapes[3] = {sx, sw, sb};
    const int nd[3] = {4, 4, 1};
    for (int i = 0; i < 3; i++) {
        is[i].ndim = nd[i];
        for (int k = 0; k < nd[i]; k++) is[i].dims[k] = shapes[i][k];
    }
    cr_assert_eq(mxp__node_infer(node, is, it, &os, &ot, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_forward(node, arg, &out, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_backward(node, &og, arg, &out, grad, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(node), "pointwise");
    double *gy = opx_read(out), *gdx = opx_read(grad[0]), *gdw = opx_read(grad[1]), *gdb = opx_read(grad[2]);
    cr_expect_leq(relerr(gy, y, ny), 1e-5, "N%d C%d %dx%d M%d: forward relerr %g", L->N, L->C, L->H, L->W, L->M,
                  relerr(gy, y, ny));
    cr_expect_leq(relerr(gdx, dx, nx), 1e-5, "data gradient relerr %g", relerr(gdx, dx, nx));
    cr_expect_leq(relerr(gdw, dw, nw), 1e-5, "weight gradient relerr %g", relerr(gdw, dw, nw));
    cr_expect_leq(relerr(gdb, db, L->M), 1e-5, "bias gradient relerr %g", relerr(gdb, db, L->M));
    mxp__node_free(node);
    mxp_op_set_impl("Convolution", NULL);
    for (int i = 0; i < 3; i++) {
        mxp_ndarray_release(arg[i]);
        mxp_ndarray_release(grad[i]);
    }
    mxp_ndarray_release(out);
    mxp_ndarray_release(og);
    free(gy); free(gdx); free(gdw); free(gdb);
    free(x); free(w); free(b); free(dy); free(y); free(dx); free(dw); free(db);
}

Test(conv_pointwise, streaming_strips_match_reference) {
    layer L = {3, 40, 16, 20, 76}; /* 320 pixels: whole aligned strips */
    check_layer(&L);
}

Test(conv_pointwise, ragged_strips_match_reference) {
    layer L = {2, 19, 15, 15, 13}; /* 225 pixels: a ragged last strip */
    check_layer(&L);
}
