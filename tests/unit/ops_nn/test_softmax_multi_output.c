/* test_softmax_multi_output.c — SoftmaxOutput with multi_output=True on
 * (N, K, H, W) data follows MXNet 1.9.1 (src/operator/softmax_output-inl.h):
 * the gradient is grad_scale / (normalization == 'valid' ? 1 : H*W) /
 * valid_cnt * (p - onehot), valid_cnt = 1 (null), N (batch) or the number of
 * labels != ignore_label, at least 1 (valid).  The reference is independent
 * of the pack's formula: the derivative of the summed cross-entropy
 * -sum log p[label] by central differences in float64, scaled by MXNet's
 * factor.  Before the fix the pack never divided by H*W (the gradient was
 * H*W times MXNet's for null and batch). */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

enum { N = 2, K = 3, H = 2, W = 3, S = H * W };

/* -sum over (n, s) of log softmax(x[n, :, s])[label[n, s]], ignored labels skipped. */
static double cross_entropy(const double *x, const double *lab, int use_ignore) {
    double l = 0;
    for (int n = 0; n < N; n++)
        for (int s = 0; s < S; s++) {
            double y = lab[n * S + s];
            if (use_ignore && y == -1.0) continue;
            double mx = -1e300, sum = 0;
            for (int k = 0; k < K; k++) mx = fmax(mx, x[(n * K + k) * S + s]);
            for (int k = 0; k < K; k++) sum += exp(x[(n * K + k) * S + s] - mx);
            l -= x[(n * K + (int)y) * S + s] - mx - log(sum);
        }
    return l;
}

static void check(const char *kw, double grad_scale, int norm, int use_ignore) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "SoftmaxOutput", "default", kw, MXP_DTYPE_F64), 0, "%s", fh_error());
    int64_t d[4] = {N, K, H, W};
    n.in_shape[0].ndim = 4;
    memcpy(n.in_shape[0].dims, d, sizeof d);
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    uint64_t r = 7;
    tu_fill(n.in[0], MXP_DTYPE_F64, N * K * S, &r, -2, 2);
    double *lab = n.in[1];
    int valid = 0;
    for (int i = 0; i < N * S; i++) {
        lab[i] = (double)((i * 5 + 1) % K);
        if (use_ignore && (i == 2 || i == 7)) lab[i] = -1.0;
        valid += !(use_ignore && lab[i] == -1.0);
    }
    double mx_scale = grad_scale / (norm == 2 ? 1.0 : (double)S) /
                      (norm == 0 ? 1.0 : norm == 1 ? (double)N : (double)(valid ? valid : 1));
    double ref[N * K * S];
    double *x = n.in[0];
    const double h = 1e-6;
    for (int i = 0; i < N * K * S; i++) {
        double save = x[i];
        x[i] = save + h;
        double lp = cross_entropy(x, lab, use_ignore);
        x[i] = save - h;
        double lm = cross_entropy(x, lab, use_ignore);
        x[i] = save;
        ref[i] = mx_scale * (lp - lm) / (2 * h);
    }
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    double err = tu_relerr(n.in_grad[0], MXP_DTYPE_F64, ref, N * K * S);
    cr_assert_leq(err, 1e-7, "%s: relative error %g against MXNet's scaling (pack/ref at 0: %g / %g)", kw, err,
                  ((double *)n.in_grad[0])[0], ref[0]);
    fh_node_free(&n);
}

Test(softmax_multi_output, gradient_scale_matches_mxnet, .init = setup, .fini = teardown) {
    check("multi_output=True", 1.0, 0, 0);
    check("multi_output=True normalization=null grad_scale=0.5", 0.5, 0, 0);
    check("multi_output=True normalization=batch", 1.0, 1, 0);
    check("multi_output=True normalization=batch grad_scale=3", 3.0, 1, 0);
    check("multi_output=True normalization=valid use_ignore=True", 1.0, 2, 1);
    check("multi_output=True normalization=valid use_ignore=True grad_scale=2", 2.0, 2, 1);
}
