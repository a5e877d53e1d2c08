/* test_ops3d_graph.c — the 3-D, bilinear and float16 ops inside whole
 * graphs loaded from symbol JSON written the way MXNet 1.x writes it
 * ("attrs", string values): a small 3-D net (Convolution (3,3,3) ->
 * Pooling avg (2,2,2) -> global max Pooling -> FC -> SoftmaxOutput) infers
 * MXNet's shapes, chooses the `nd` impls on its own and its gradients agree
 * with central finite differences in float64; an UpSampling bilinear node
 * whose weight is a variable (num_args 1, as MXNet exports it) infers the
 * weight (C, 1, 4, 4), reproduces MXNet's documented output, and goes
 * through amp_cast to float16 and Cast back with the dtypes inferred. */
#include "exec_test_util.h"

static const char *net3d =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv1_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"conv1_bias\", \"inputs\": []},"
    "{\"op\": \"Convolution\", \"name\": \"conv1\", \"attrs\": {\"kernel\": \"(3, 3, 3)\", \"pad\": \"(1, 1, 1)\","
    " \"stride\": \"(1, 1, 1)\", \"num_filter\": \"3\"}, \"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"Activation\", \"name\": \"tanh1\", \"attrs\": {\"act_type\": \"tanh\"}, \"inputs\": [[3, 0, 0]]},"
    "{\"op\": \"Pooling\", \"name\": \"pool1\", \"attrs\": {\"kernel\": \"(2, 2, 2)\", \"stride\": \"(2, 2, 2)\","
    " \"pool_type\": \"avg\", \"pooling_convention\": \"full\"}, \"inputs\": [[4, 0, 0]]},"
    "{\"op\": \"Pooling\", \"name\": \"pool2\", \"attrs\": {\"global_pool\": \"True\", \"kernel\": \"(1, 1, 1)\","
    " \"pool_type\": \"max\"}, \"inputs\": [[5, 0, 0]]},"
    "{\"op\": \"Flatten\", \"name\": \"flat\", \"inputs\": [[6, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"3\"},"
    " \"inputs\": [[7, 0, 0], [8, 0, 0], [9, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"softmax_label\", \"inputs\": []},"
    "{\"op\": \"SoftmaxOutput\", \"name\": \"softmax\", \"inputs\": [[10, 0, 0], [11, 0, 0]]}],"
    " \"arg_nodes\": [0, 1, 2, 8, 9, 11], \"heads\": [[12, 0, 0]],"
    " \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

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

Test(ops3d_graph, conv3d_net_shapes_and_gradients) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_json(net3d, &sym), MXP_OK, "%s", mxp_last_error());
    mxp_shape d = {.ndim = 5, .dims = {2, 2, 5, 4, 3}};
    const char *nm[] = {"data"};
    int na, no, complete;
    mxp_shape *as, *os;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 1, nm, &d, &na, &as, &no, &os, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    /* MXNet: weight (num_filter, C, 3, 3, 3); fc sees 3 channels after the global pool */
    const mxp_shape w = as[1], fw = as[3];
    cr_assert_eq(w.ndim, 5);
    const int64_t wd[5] = {3, 2, 3, 3, 3};
    for (int i = 0; i < 5; i++) cr_assert_eq(w.dims[i], wd[i], "conv1_weight dim %d", i);
    cr_assert(fw.ndim == 2 && fw.dims[0] == 3 && fw.dims[1] == 3, "fc_weight (%lld,%lld)", (long long)fw.dims[0],
              (long long)fw.dims[1]);
    cr_assert(os[0].ndim == 2 && os[0].dims[0] == 2 && os[0].dims[1] == 3);
    free(as);
    free(os);
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F64, 1, nm, &d, 17, MXP_REQ_WRITE, "softmax_label", 3);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"conv1_weight", "conv1_bias", "data"};
    for (int k = 0; k < 3; k++) {
        mxp_ndarray *a = et_arg(ex, sym, names[k], 0), *g = et_arg(ex, sym, names[k], 1);
        double *gv = et_read(g), *av = et_read(a);
        int64_t n = mxp_ndarray_size(a), step = n > 24 ? n / 24 : 1;
        double gsum = 0;
        for (int64_t i = 0; i < n; i += step) {
            double keep = av[i];
            av[i] = keep + 1e-6; et_set(a, av);
            double lp = xent(ex, 3);
            av[i] = keep - 1e-6; et_set(a, av);
            double lm = xent(ex, 3);
            av[i] = keep; et_set(a, av);
            double fd = (lp - lm) / 2e-6;
            gsum += fabs(gv[i]);
            cr_expect(fabs(fd - gv[i]) <= 1e-5 * (1 + fabs(fd)), "%s[%lld]: analytic %.10g, numeric %.10g", names[k],
                      (long long)i, gv[i], fd);
        }
        cr_assert_gt(gsum, 0, "%s: all sampled gradients are zero", names[k]);
        free(gv);
        free(av);
    }
    mxp_executor_free(ex);
    mxp_symbol_release(sym);
}

static const char *net_up =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"up_weight\", \"attrs\": {\"__init__\": \"[\\\"bilinear\\\", {}]\","
    " \"__lr_mult__\": \"0.0\"}, \"inputs\": []},"
    "{\"op\": \"UpSampling\", \"name\": \"up\", \"attrs\": {\"num_args\": \"1\", \"num_filter\": \"2\","
    " \"sample_type\": \"bilinear\", \"scale\": \"2\", \"workspace\": \"512\"}, \"inputs\": [[0, 0, 0], [1, 0, 0]]},"
    "{\"op\": \"amp_cast\", \"name\": \"to16\", \"attrs\": {\"dtype\": \"float16\"}, \"inputs\": [[2, 0, 0]]},"
    "{\"op\": \"Cast\", \"name\": \"to32\", \"attrs\": {\"dtype\": \"float32\"}, \"inputs\": [[3, 0, 0]]}],"
    " \"arg_nodes\": [0, 1], \"heads\": [[4, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

Test(ops3d_graph, bilinear_upsampling_and_float16_casts) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_json(net_up, &sym), MXP_OK, "%s", mxp_last_error());
    int na;
    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &na, &an), MXP_OK);
    cr_assert_eq(na, 2);
    cr_assert_str_eq(an[1], "up_weight");
    mxp_shape d = {.ndim = 4, .dims = {1, 2, 3, 3}};
    const char *nm[] = {"data"};
    int no, complete;
    mxp_shape *as, *os;
    cr_assert_eq(mxp_symbol_infer_shape(sym, 1, nm, &d, &na, &as, &no, &os, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    const int64_t wd[4] = {2, 1, 4, 4}, od[4] = {1, 2, 6, 6};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(as[1].dims[i], wd[i], "up_weight dim %d", i);
        cr_assert_eq(os[0].dims[i], od[i], "output dim %d", i);
    }
    int *at, *ot, n_at, n_ot;
    const int f32 = MXP_DTYPE_F32;
    cr_assert_eq(mxp_symbol_infer_type(sym, 1, nm, &f32, &n_at, &at, &n_ot, &ot, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(at[1], MXP_DTYPE_F32);
    cr_assert_eq(ot[0], MXP_DTYPE_F32);
    free(at);
    free(ot);
    /* MXNet's documented example, per channel: ones data, ones weight */
    mxp_ndarray *args[2] = {et_arr(MXP_DTYPE_F32, &as[0], NULL, 1.0), et_arr(MXP_DTYPE_F32, &as[1], NULL, 1.0)};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, 2, args, NULL, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int n;
    mxp_ndarray *const *o;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &o), MXP_OK);
    cr_assert_eq(mxp_ndarray_dtype(o[0]), MXP_DTYPE_F32);
    double *y = et_read(o[0]);
    const double doc[6] = {1, 2, 2, 2, 2, 1};
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < 6; r++)
            for (int q = 0; q < 6; q++)
                cr_assert_eq(y[(c * 6 + r) * 6 + q], doc[r] * doc[q], "channel %d (%d,%d) = %g", c, r, q,
                             y[(c * 6 + r) * 6 + q]);
    free(y);
    mxp_executor_free(ex);
    mxp_ndarray_release(args[0]);
    mxp_ndarray_release(args[1]);
    free(as);
    free(os);
    mxp_symbol_release(sym);
}
