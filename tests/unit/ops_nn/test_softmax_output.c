/* test_softmax_output.c — SoftmaxOutput: forward softmax against float64,
 * loss gradient (p - onehot) * grad_scale / norm for normalization
 * null/batch/valid with use_ignore, label smoothing, multi_output and
 * preserve_shape label shapes (MXNet 1.9.1's: (N, d1) for plain 3-D data); out_grad is not read (MXP_OP_LOSS). */
#include <string.h>
#include "nn_test_util.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static void run(const char *kw, int mode /*0 plain,1 multi,2 preserve*/, double gs, int norm, int use_ignore, double alpha, int32_t dt) {
    fh_node n;
    int64_t d3[3] = {4, 5, 3};
    cr_assert_eq(fh_node_init(&n, pack, "SoftmaxOutput", "default", kw, dt), 0, "%s", fh_error());
    n.in_shape[0].ndim = 3; memcpy(n.in_shape[0].dims, d3, sizeof d3);
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    /* label shapes per mode */
    /* MXNet 1.9.1: without multi_output the label is the data shape without
     * its last axis; the gradient reads its first N entries. */
    if (mode == 0) { cr_assert_eq(n.in_shape[1].ndim, 2); cr_assert_eq(n.in_shape[1].dims[0], 4); cr_assert_eq(n.in_shape[1].dims[1], 5); }
    if (mode == 1) { cr_assert_eq(n.in_shape[1].ndim, 2); cr_assert_eq(n.in_shape[1].dims[1], 3); }
    if (mode == 2) { cr_assert_eq(n.in_shape[1].ndim, 2); cr_assert_eq(n.in_shape[1].dims[1], 5); }
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    int64_t O = mode == 2 ? 20 : 4, K = mode == 0 ? 15 : mode == 1 ? 5 : 3, S = mode == 1 ? 3 : 1;
    uint64_t r = 99;
    tu_fill(n.in[0], dt, 60, &r, -2, 2);
    int64_t nl = O * S;
    for (int64_t i = 0; i < nl; i++) tu_set(n.in[1], dt, i, (double)(i * 7 % K));
    if (use_ignore) tu_set(n.in[1], dt, 1, -1.0);
    double y[60], g[60];
    int64_t valid = 0;
    for (int64_t i = 0; i < nl; i++) valid += !(use_ignore && tu_get(n.in[1], dt, i) == -1.0);
    double nrm = norm == 1 ? 4 : norm == 2 ? (double)valid : 1;
    if (mode == 1 && norm != 2) nrm *= (double)S; /* MXNet: multi_output divides by the spatial size too */
    for (int64_t rr = 0; rr < nl; rr++) {
        int64_t o = rr / S, s = rr % S, base = o * K * S + s;
        double mx = -1e300, sum = 0;
        for (int64_t k = 0; k < K; k++) { double v = tu_get(n.in[0], dt, base + k * S); if (v > mx) mx = v; }
        for (int64_t k = 0; k < K; k++) sum += exp(tu_get(n.in[0], dt, base + k * S) - mx);
        double l = tu_get(n.in[1], dt, rr);
        for (int64_t k = 0; k < K; k++) {
            double p = exp(tu_get(n.in[0], dt, base + k * S) - mx) / sum;
            y[base + k * S] = p;
            double t = (k == (int64_t)l) ? 1 - alpha : alpha / (double)(K - 1);
            g[base + k * S] = (use_ignore && l == -1.0) ? 0 : gs / nrm * (p - t);
        }
    }
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    double tol = dt == MXP_DTYPE_F32 ? 1e-6 : 1e-13;
    cr_assert_leq(tu_relerr(n.out[0], dt, y, 60), tol, "%s", kw);
    cr_assert_eq(fh_node_backward(&n, NULL), 0, "%s", fh_error());
    cr_assert_leq(tu_relerr(n.in_grad[0], dt, g, 60), tol, "%s", kw);
    fh_node_free(&n);
}

Test(softmax_output, gradients, .init = setup, .fini = teardown) {
    for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        run("", 0, 1, 0, 0, 0, dt);
        run("grad_scale=0.5 normalization=batch", 0, 0.5, 1, 0, 0, dt);
        run("use_ignore=True normalization=valid", 0, 1, 2, 1, 0, dt);
        run("multi_output=True", 1, 1, 0, 0, 0, dt);
        run("multi_output=True use_ignore=True normalization=valid grad_scale=2", 1, 2, 2, 1, 0, dt);
        run("preserve_shape=True smooth_alpha=0.1", 2, 1, 0, 0, 0.1, dt);
    }
}

Test(softmax_output, label_shape_errors, .init = setup, .fini = teardown) {
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "Softmax", "default", "", MXP_DTYPE_F32), 0); /* alias */
    cr_assert_str_eq(n.def->name, "SoftmaxOutput");
    cr_assert(n.def->flags & MXP_OP_LOSS);
    n.in_shape[0] = (mxp_shape){2, 0, {8, 10}};
    n.in_shape[1] = (mxp_shape){1, 0, {7}};
    cr_assert_eq(fh_node_infer(&n), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "(7)") && strstr(fh_error(), "(8,10)"), "%s", fh_error());
    fh_node_free(&n);
}

/* The float32 row kernel (softmax.c smx_rows_f32: rows along the last axis,
 * written): rows of 37 (vector tails) over a range wide enough that many
 * exponents fall below -87 (flushed to 0, as double exp rounds to float
 * there) against double softmax, element by element, within 5 ulp plus
 * what rounding z = x - max to float costs (relative |z| 2^-24: the float
 * path's one inherent error, ~2.9e-6 at z = -69); a row holding -inf
 * has 0 there, a row holding NaN is all NaN, as the double path gives. */
Test(softmax_output, f32_rows_wide_range, .init = setup, .fini = teardown) {
    enum { O = 9, K = 37 };
    fh_node n;
    cr_assert_eq(fh_node_init(&n, pack, "SoftmaxOutput", "default", "", MXP_DTYPE_F32), 0, "%s", fh_error());
    n.in_shape[0] = (mxp_shape){2, 0, {O, K}};
    cr_assert_eq(fh_node_infer(&n), MXP_OK, "%s", fh_error());
    cr_assert_eq(fh_node_alloc(&n, 1), 1);
    float *x = n.in[0], *lab = n.in[1];
    uint64_t r = 7;
    for (int64_t i = 0; i < O * K; i++) x[i] = (float)fh_rand(&r, -120, 60);
    for (int64_t i = 0; i < O; i++) lab[i] = (float)(i % K);
    x[2 * K + 5] = -INFINITY;
    x[3 * K + 11] = NAN;
    for (int64_t k = 0; k < K; k++) x[4 * K + k] = (float)(k % 3) - 1.0f; /* a narrow row */
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0, "%s", fh_error());
    const float *y = n.out[0];
    for (int64_t o = 0; o < O; o++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < K; k++) if (x[o * K + k] > mx) mx = x[o * K + k];
        for (int64_t k = 0; k < K; k++) sum += exp((double)x[o * K + k] - mx);
        for (int64_t k = 0; k < K; k++) {
            double want = exp((double)x[o * K + k] - mx) / sum;
            float got = y[o * K + k];
            if (o == 3) {
                cr_assert(isnan(got), "row with NaN: [%lld] = %g", (long long)k, got);
                continue;
            }
            double z = (double)x[o * K + k] - mx;
            if (isinf(z)) {
                cr_assert_eq(got, 0.0f, "exp(-inf): [%lld][%lld] = %g", (long long)o, (long long)k, got);
                continue;
            }
            cr_assert(fabs(got - want) <= (6e-7 + fabs(z) * 0x1p-24) * want + 1e-37, "[%lld][%lld] = %.9g, want %.9g", (long long)o,
                      (long long)k, got, want);
        }
    }
    fh_node_free(&n);
}
