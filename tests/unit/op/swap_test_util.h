/* swap_test_util.h — Convolution fixtures shared by the hot-swap tests
 * (test_hot_swap.c, test_reload_concurrency.c; header-only, each test is
 * its own binary): one small 3x3/pad-1 configuration that every impl
 * (gemm, direct, winograd) accepts, deterministic inputs, a node for it,
 * and an independent float64 plain-loop reference of the forward pass.
 * Sizes are small so OpenBLAS stays on the calling thread (TSan). */
#ifndef MXP_TEST_SWAP_UTIL_H
#define MXP_TEST_SWAP_UTIL_H

#include "op_test_util.h"

#include "op/op.h"

#define SW_N 2
#define SW_C 4
#define SW_H 10
#define SW_W 10
#define SW_M 8
#define SW_K 3

static const char *const sw_keys[] = {"kernel", "pad", "num_filter"};
static const char *const sw_vals[] = {"(3, 3)", "(1, 1)", "8"};

typedef struct sw_conv {
    mxp__node *nd;
    mxp_ndarray *in[3];   /* data, weight, bias */
    mxp_ndarray *y;
    double x[SW_N * SW_C * SW_H * SW_W], w[SW_M * SW_C * SW_K * SW_K], b[SW_M];
    double ref[SW_N * SW_M * SW_H * SW_W];
} sw_conv;

/* y = conv(x, w) + b in float64, plain loops (pad 1, stride 1). */
static inline void sw_reference(sw_conv *c) {
    for (int n = 0; n < SW_N; n++)
        for (int m = 0; m < SW_M; m++)
            for (int i = 0; i < SW_H; i++)
                for (int j = 0; j < SW_W; j++) {
                    double s = c->b[m];
                    for (int ch = 0; ch < SW_C; ch++)
                        for (int u = 0; u < SW_K; u++)
                            for (int v = 0; v < SW_K; v++) {
                                int hi = i + u - 1, wj = j + v - 1;
                                if (hi < 0 || hi >= SW_H || wj < 0 || wj >= SW_W) continue;
                                s += c->x[((n * SW_C + ch) * SW_H + hi) * SW_W + wj] *
                                     c->w[((m * SW_C + ch) * SW_K + u) * SW_K + v];
                            }
                    c->ref[((n * SW_M + m) * SW_H + i) * SW_W + j] = s;
                }
}

static inline void sw_init(sw_conv *c) {
    memset(c, 0, sizeof *c);
    opx_fill(c->x, SW_N * SW_C * SW_H * SW_W, 21, -1, 1);
    opx_fill(c->w, SW_M * SW_C * SW_K * SW_K, 22, -0.5, 0.5);
    opx_fill(c->b, SW_M, 23, -0.1, 0.1);
    /* Round inputs to float32 so the reference sees what the kernels see. */
    for (size_t i = 0; i < sizeof c->x / sizeof c->x[0]; i++) c->x[i] = (float)c->x[i];
    for (size_t i = 0; i < sizeof c->w / sizeof c->w[0]; i++) c->w[i] = (float)c->w[i];
    for (size_t i = 0; i < sizeof c->b / sizeof c->b[0]; i++) c->b[i] = (float)c->b[i];
    sw_reference(c);
    int64_t sx[4] = {SW_N, SW_C, SW_H, SW_W}, sw[4] = {SW_M, SW_C, SW_K, SW_K}, sb[1] = {SW_M},
            sy[4] = {SW_N, SW_M, SW_H, SW_W};
    c->in[0] = opx_arr(MXP_DTYPE_F32, 4, sx, c->x);
    c->in[1] = opx_arr(MXP_DTYPE_F32, 4, sw, c->w);
    c->in[2] = opx_arr(MXP_DTYPE_F32, 1, sb, c->b);
    c->y = opx_arr(MXP_DTYPE_F32, 4, sy, NULL);
    cr_assert_eq(mxp__node_create("Convolution", 3, sw_keys, sw_vals, &c->nd), MXP_OK, "%s", mxp_last_error());
    mxp_shape is[3], os = {.ndim = -1};
    int32_t it[3] = {MXP_DTYPE_F32, MXP_DTYPE_F32, MXP_DTYPE_F32}, ot = MXP_DTYPE_UNKNOWN;
    for (int i = 0; i < 3; i++) {
        is[i].ndim = mxp_ndarray_ndim(c->in[i]);
        for (int k = 0; k < is[i].ndim; k++) is[i].dims[k] = mxp_ndarray_shape(c->in[i])[k];
    }
    cr_assert_eq(mxp__node_infer(c->nd, is, it, &os, &ot, NULL, NULL), MXP_OK, "%s", mxp_last_error());
}

static inline void sw_free(sw_conv *c) {
    mxp__node_free(c->nd);
    for (int i = 0; i < 3; i++) mxp_ndarray_release(c->in[i]);
    mxp_ndarray_release(c->y);
}

/* Largest |a - b| / (1 + |b|) over n values. */
static inline double sw_maxdiff(const double *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]) / (1 + fabs(b[i]));
        if (d > m || d != d) m = d != d ? INFINITY : d;
    }
    return m;
}

#endif
