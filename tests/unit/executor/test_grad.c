/* test_grad.c — gradients of whole graphs against central finite
 * differences in float64: an MLP (FC -> relu -> FC -> SoftmaxOutput, loss
 * = cross-entropy), a shared input (x*x + x: both contributions summed),
 * BatchNorm inside a graph; grad_req add and null; head gradients. */
#include "exec_test_util.h"

/* Cross-entropy of the softmax output for labels (k*7+3) % classes. */
static double xent(mxp_executor *ex, int classes) {
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    double *p = et_read(o[0]);
    int64_t rows = mxp_ndarray_size(o[0]) / classes;
    double l = 0;
    for (int64_t r = 0; r < rows; r++) l -= log(p[r * classes + (r * 7 + 3) % classes]);
    free(p);
    return l;
}

/* Compare analytic gradients of `names` with central differences. */
static void check_fd(mxp_executor *ex, mxp_symbol *sym, const char *const *names, int classes, double tol) {
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    for (int k = 0; names[k]; k++) {
        mxp_ndarray *a = et_arg(ex, sym, names[k], 0), *g = et_arg(ex, sym, names[k], 1);
        double *gv = et_read(g), *av = et_read(a);
        int64_t n = mxp_ndarray_size(a);
        double eps = 1e-6;
        for (int64_t i = 0; i < n; i++) {
            double keep = av[i];
            av[i] = keep + eps;
            et_set(a, av);
            double lp = xent(ex, classes);
            av[i] = keep - eps;
            et_set(a, av);
            double lm = xent(ex, classes);
            av[i] = keep;
            et_set(a, av);
            double fd = (lp - lm) / (2 * eps);
            cr_expect(fabs(fd - gv[i]) <= tol * (1 + fabs(fd)), "%s[%lld]: analytic %.10g, numeric %.10g", names[k],
                      (long long)i, gv[i], fd);
        }
        free(gv);
        free(av);
    }
}

Test(grad, mlp_matches_finite_differences_f64) {
    mxp_symbol *sym = et_mlp(5, 3);
    mxp_shape d = {.ndim = 2, .dims = {4, 6}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F64, 1, nm, &d, 11, MXP_REQ_WRITE, "softmax_label", 3);
    check_fd(ex, sym, (const char *const[]){"data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", NULL}, 3, 1e-5);
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

Test(grad, batchnorm_graph_matches_finite_differences_f64) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc1 = gt_op("FullyConnected", "fc1", 1, &data, "num_hidden=4", NULL);
    mxp_symbol *bn = gt_op("BatchNorm", "bn", 1, &fc1, "fix_gamma=False", NULL);
    mxp_symbol *fc2 = gt_op("FullyConnected", "fc2", 1, &bn, "num_hidden=3", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc2, NULL);
    mxp_shape d = {.ndim = 2, .dims = {5, 3}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sm, MXP_DTYPE_F64, 1, nm, &d, 5, MXP_REQ_WRITE, "softmax_label", 3);
    /* Training-mode loss (batch statistics) is what backward differentiates. */
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"fc1_weight", "bn_gamma", "bn_beta", "fc2_weight", NULL};
    for (int k = 0; names[k]; k++) {
        mxp_ndarray *a = et_arg(ex, sm, names[k], 0), *g = et_arg(ex, sm, names[k], 1);
        double *gv = et_read(g), *av = et_read(a);
        for (int64_t i = 0; i < mxp_ndarray_size(a); i++) {
            double keep = av[i], l[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                av[i] = keep + (sgn ? -1e-6 : 1e-6);
                et_set(a, av);
                cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
                int n;
                mxp_ndarray *const *o;
                mxp_executor_outputs(ex, &n, &o);
                double *p = et_read(o[0]);
                l[sgn] = 0;
                for (int r = 0; r < 5; r++) l[sgn] -= log(p[r * 3 + (r * 7 + 3) % 3]);
                free(p);
            }
            av[i] = keep;
            et_set(a, av);
            double fd = (l[0] - l[1]) / 2e-6;
            cr_expect(fabs(fd - gv[i]) <= 1e-5 * (1 + fabs(fd)), "%s[%lld]: analytic %.10g numeric %.10g", names[k],
                      (long long)i, gv[i], fd);
        }
        free(gv);
        free(av);
    }
    mxp_executor_free(ex);
    mxp_symbol_release(sm);
    mxp_symbol_release(fc2);
    mxp_symbol_release(bn);
    mxp_symbol_release(fc1);
    mxp_symbol_release(data);
}

/* y = x*x + x: dy/dx = 2x + 1, both uses of x summed. */
static mxp_symbol *shared_input(void) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *sq = gt_op("elemwise_mul", "sq", 2, (mxp_symbol *[]){x, x}, NULL);
    mxp_symbol *y = gt_op("elemwise_add", "y", 2, (mxp_symbol *[]){sq, x}, NULL);
    mxp_symbol_release(x);
    mxp_symbol_release(sq);
    return y;
}

Test(grad, shared_input_contributions_are_summed) {
    mxp_symbol *y = shared_input();
    mxp_shape s = {.ndim = 2, .dims = {3, 4}};
    uint64_t seed = 3;
    mxp_ndarray *x = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0), *gx = et_arr(MXP_DTYPE_F64, &s, NULL, 0.0);
    mxp_ndarray *hg = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0);
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(y, et_cpu, 1, &x, &gx, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 1, &hg), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    double *xv = et_read(x), *gv = et_read(gx), *hv = et_read(hg);
    for (int i = 0; i < 12; i++) cr_expect(fabs(gv[i] - hv[i] * (2 * xv[i] + 1)) < 1e-12, "%d: %g", i, gv[i]);
    /* A SUM step exists in the program (x is used three times). */
    int n;
    mxp_ndarray *const *o;
    mxp_executor_outputs(ex, &n, &o);
    double *yv = et_read(o[0]);
    for (int i = 0; i < 12; i++) cr_expect(fabs(yv[i] - (xv[i] * xv[i] + xv[i])) < 1e-12);
    /* Without a head gradient the head gets ones. */
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK);
    free(gv);
    gv = et_read(gx);
    for (int i = 0; i < 12; i++) cr_expect(fabs(gv[i] - (2 * xv[i] + 1)) < 1e-12);
    free(xv);
    free(gv);
    free(hv);
    free(yv);
    mxp_executor_free(ex);
    mxp_ndarray_release(x);
    mxp_ndarray_release(gx);
    mxp_ndarray_release(hg);
    mxp_symbol_release(y);
}

Test(grad, grad_req_add_and_null) {
    mxp_symbol *y = shared_input();
    mxp_symbol *w = gt_var("w");
    mxp_symbol *z = gt_op("elemwise_mul", "z", 2, (mxp_symbol *[]){y, w}, NULL);
    mxp_shape s = {.ndim = 1, .dims = {5}};
    uint64_t seed = 9;
    mxp_ndarray *x = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0), *wa = et_arr(MXP_DTYPE_F64, &s, &seed, 1.0);
    mxp_ndarray *gx = et_arr(MXP_DTYPE_F64, &s, NULL, 0.25), *gw = et_arr(MXP_DTYPE_F64, &s, NULL, 7.0);
    mxp_ndarray *args[] = {x, wa}, *grads[] = {gx, gw};
    int reqs[] = {MXP_REQ_ADD, MXP_REQ_NULL};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(z, et_cpu, 2, args, grads, reqs, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    for (int rep = 0; rep < 2; rep++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK);
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    double *xv = et_read(x), *wv = et_read(wa), *gxv = et_read(gx), *gwv = et_read(gw);
    for (int i = 0; i < 5; i++) {
        cr_expect(fabs(gxv[i] - (0.25 + 2 * wv[i] * (2 * xv[i] + 1))) < 1e-12, "%d: %g", i, gxv[i]);
        cr_expect_eq(gwv[i], 7.0, "null req must not touch the array");
    }
    free(xv);
    free(wv);
    free(gxv);
    free(gwv);
    mxp_executor_free(ex);
    mxp_ndarray_release(x);
    mxp_ndarray_release(wa);
    mxp_ndarray_release(gx);
    mxp_ndarray_release(gw);
    mxp_symbol_release(z);
    mxp_symbol_release(w);
    mxp_symbol_release(y);
}
