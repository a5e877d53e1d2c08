/* test_ctc_graph.c — CTCLoss inside a bound graph (MakeLoss(CTCLoss(data,
 * label, data_lengths))), as a training script uses it: the gradient the
 * executor's backward gives the data, which goes through CTCLoss's hidden
 * gradient output written by the training forward, equals central
 * differences of the summed loss computed by inference forwards. */
#include "exec_test_util.h"

Test(ctc_graph, data_gradient_matches_finite_differences) {
    mxp_symbol *data = gt_var("data"), *label = gt_var("label"), *len = gt_var("len");
    mxp_symbol *in[3] = {data, label, len};
    mxp_symbol *ctc = gt_op("CTCLoss", "ctc", 3, in, "use_data_lengths=True", "blank_label=last", NULL);
    mxp_symbol *loss = gt_op("MakeLoss", "loss", 1, &ctc, NULL);
    gt_list_eq(mxp_symbol_list_arguments, loss, (const char *const[]){"data", "label", "len", NULL});
    const int64_t T = 5, N = 2, C = 4;
    const mxp_shape sd = {3, 0, {T, N, C}}, sl = {2, 0, {N, 3}}, sn = {1, 0, {N}};
    uint64_t st = 9;
    mxp_ndarray *args[3] = {et_arr(MXP_DTYPE_F64, &sd, &st, 1.5), et_arr(MXP_DTYPE_F64, &sl, NULL, 0),
                            et_arr(MXP_DTYPE_F64, &sn, NULL, 0)};
    et_set(args[1], (const double[]){0, 0, 2, 1, -1, -1}); /* blank 3; "0 0 2" and "1" */
    et_set(args[2], (const double[]){5, 3});
    mxp_ndarray *grads[3] = {et_arr(MXP_DTYPE_F64, &sd, NULL, 0), NULL, NULL};
    int reqs[3] = {MXP_REQ_WRITE, MXP_REQ_NULL, MXP_REQ_NULL};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(loss, et_cpu, 3, args, grads, reqs, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK);
    double *g = et_read(grads[0]), *x = et_read(args[0]);
    const double eps = 1e-6;
    for (int64_t i = 0; i < T * N * C; i++) {
        double f[2];
        for (int s = 0; s < 2; s++) {
            double keep = x[i];
            x[i] = keep + (s ? -eps : eps);
            et_set(args[0], x);
            x[i] = keep;
            cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
            int n;
            mxp_ndarray *const *o;
            cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
            double *l = et_read(o[0]);
            f[s] = l[0] + l[1];
            free(l);
        }
        double fd = (f[0] - f[1]) / (2 * eps);
        cr_assert(fabs(g[i] - fd) <= 1e-6 + 1e-5 * fabs(fd), "d loss / d data[%lld] = %.9g, differences give %.9g",
                  (long long)i, g[i], fd);
        if ((i / C) % N == 1 && i / (C * N) >= 3) cr_assert_eq(g[i], 0.0, "past example 1's length");
    }
    free(g), free(x);
    mxp_executor_free(ex);
    for (int i = 0; i < 3; i++) mxp_ndarray_release(args[i]), mxp_ndarray_release(grads[i]);
    mxp_symbol_release(loss), mxp_symbol_release(ctc), mxp_symbol_release(data), mxp_symbol_release(label);
    mxp_symbol_release(len);
}
