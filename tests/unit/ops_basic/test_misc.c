/* test_misc.c — Cast, _zeros/_ones/_full/_arange, _random_uniform/_normal,
 * ElementWiseSum, optimizer updates (against the MXNet formulas written
 * out in plain loops), and the registered op inventory. */
#include "common_test.h"

TestSuite(misc, .init = ob_setup, .fini = ob_teardown);

Test(misc, cast) {
    double v[4] = {-1.7, 2.5, 300, 1e10};
    fh_arr x = fh_arr_from(MXP_DTYPE_F64, 1, SHAPE(4), v);
    fh_arr y = run1("cast", KW("dtype", "int32"), 1, &x);
    cr_assert_eq(y.dtype, MXP_DTYPE_I32);
    cr_assert_eq(fh_get(&y, 0), -1.0);
    cr_assert_eq(fh_get(&y, 1), 2.0);
    cr_assert_eq(fh_get(&y, 3), 2147483647.0);  /* saturates */
    fh_arr_free(&y);
    y = run1("Cast", KW("dtype", "uint8"), 1, &x);
    cr_assert_eq(fh_get(&y, 2), 255.0);
    fh_arr_free(&y);
    GRAD_OK("Cast", KW("dtype", "float32"), 1, &x, 0);  /* req/add path only */
    fh_arr_free(&x);
}

Test(misc, init_ops) {
    fh_arr y = run1("_zeros", KW("shape", "(2,3)"), 0, NULL);
    cr_assert(y.ndim == 2 && y.shape[1] == 3 && y.dtype == MXP_DTYPE_F32);
    for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&y, i), 0.0);
    fh_arr_free(&y);
    y = run1("_ones", KW("shape", "(4,)", "dtype", "int64"), 0, NULL);
    cr_assert(y.dtype == MXP_DTYPE_I64 && fh_get(&y, 3) == 1.0);
    fh_arr_free(&y);
    y = run1("_full", KW("shape", "(2,2)", "value", "7.5", "ctx", "cpu(0)"), 0, NULL);
    cr_assert_eq(fh_get(&y, 3), 7.5);
    fh_arr_free(&y);
    y = run1("_arange", KW("start", "5"), 0, NULL);
    cr_assert(y.ndim == 1 && y.shape[0] == 5 && fh_get(&y, 4) == 4.0);
    fh_arr_free(&y);
    y = run1("_arange", KW("start", "1", "stop", "2", "step", "0.25", "repeat", "2", "dtype", "float64"), 0, NULL);
    cr_assert(y.shape[0] == 8 && y.dtype == MXP_DTYPE_F64);
    double want[8] = {1, 1, 1.25, 1.25, 1.5, 1.5, 1.75, 1.75};
    for (int i = 0; i < 8; i++) cr_assert_eq(fh_get(&y, i), want[i]);
    fh_arr_free(&y);
}

Test(misc, random_moments) {
    fh_arr y = run1("_random_uniform", KW("low", "-2", "high", "4", "shape", "(100,100)"), 0, NULL);
    cr_assert_eq(y.dtype, MXP_DTYPE_F32);
    double s = 0;
    for (int i = 0; i < 10000; i++) {
        double v = fh_get(&y, i);
        cr_assert(v >= -2 && v < 4);
        s += v;
    }
    cr_assert(fabs(s / 10000 - 1.0) < 0.1, "mean %g", s / 10000);
    fh_arr_free(&y);
    y = run1("random_normal", KW("loc", "3", "scale", "2", "shape", "(20000,)", "dtype", "float64"), 0, NULL);
    cr_assert_eq(y.dtype, MXP_DTYPE_F64);
    double m = 0, v2 = 0;
    for (int i = 0; i < 20000; i++) m += fh_get(&y, i);
    m /= 20000;
    for (int i = 0; i < 20000; i++) v2 += (fh_get(&y, i) - m) * (fh_get(&y, i) - m);
    v2 /= 20000;
    cr_assert(fabs(m - 3) < 0.1 && fabs(sqrt(v2) - 2) < 0.1, "mean %g sd %g", m, sqrt(v2));
    fh_arr_free(&y);
    fh_arr o[2] = {{0}};
    int n;
    cr_assert_neq(fh_forward(P, "_random_uniform", KW("low", "2", "high", "1"), 0, NULL, &n, o, MXP_REQ_WRITE), 0);
}

Test(misc, elementwise_sum) {
    fh_arr in[6];
    for (int k = 0; k < 6; k++) {
        in[k] = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 3));
        fh_fill_uniform(&in[k], 10 + k, -1, 1);
    }
    fh_arr y = run1("add_n", KW("num_args", "6"), 6, in);
    for (int i = 0; i < 9; i++) {
        double s = 0;
        for (int k = 0; k < 6; k++) s += fh_get(&in[k], i);
        cr_assert(close_to(fh_get(&y, i), s, 1e-12, 1e-12));
    }
    fh_arr_free(&y);
    GRAD_OK("ElementWiseSum", KW("num_args", "6"), 6, in, 63);
    for (int k = 0; k < 6; k++) fh_arr_free(&in[k]);
}

static double clipg(double g, double c) { return c >= 0 ? (g > c ? c : g < -c ? -c : g) : g; }

Test(misc, optimizers_match_mxnet_formulas) {
    const int n = 7;
    fh_arr w = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7)), g = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7));
    fh_fill_uniform(&w, 1, -1, 1);
    fh_fill_uniform(&g, 2, -3, 3);
    double lr = 0.1, wd = 0.01, rs = 0.5, clip = 1.0;
    /* sgd_update, output bound to the weight itself (req inplace) */
    fh_arr w1 = fh_arr_clone(&w);
    fh_arr in[4] = {w1, g};
    fh_arr out[2] = {w1};
    int no;
    cr_assert_eq(fh_forward(P, "sgd_update", KW("lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "1"),
                            2, in, &no, out, MXP_REQ_INPLACE), 0, "%s", fh_error());
    for (int i = 0; i < n; i++) {
        double want = (1 - lr * wd) * fh_get(&w, i) - lr * clipg(rs * fh_get(&g, i), clip);
        cr_assert(close_to(fh_get(&w1, i), want, 1e-6, 1e-5), "sgd[%d]", i);
    }
    /* sgd_mom_update, two steps */
    fh_arr w2 = fh_arr_clone(&w), mom = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7));
    double rw[7], rm[7] = {0};
    for (int i = 0; i < n; i++) rw[i] = fh_get(&w, i);
    for (int step = 0; step < 2; step++) {
        fh_arr min[3] = {w2, g, mom};
        fh_arr mout[2] = {w2};
        cr_assert_eq(fh_forward(P, "sgd_mom_update", KW("lr", "0.1", "momentum", "0.9", "wd", "0.01"), 3, min, &no,
                                mout, MXP_REQ_INPLACE), 0, "%s", fh_error());
        for (int i = 0; i < n; i++) {
            rm[i] = 0.9 * rm[i] - lr * wd * rw[i] - lr * fh_get(&g, i);
            rw[i] += rm[i];
            cr_assert(close_to(fh_get(&w2, i), rw[i], 1e-6, 1e-5) && close_to(fh_get(&mom, i), rm[i], 1e-6, 1e-5));
        }
    }
    /* adam_update */
    fh_arr w3 = fh_arr_clone(&w), mean = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7)), var = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7));
    fh_arr ain[4] = {w3, g, mean, var};
    fh_arr aout[2] = {w3};
    cr_assert_eq(fh_forward(P, "adam_update", KW("lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "1"),
                            4, ain, &no, aout, MXP_REQ_INPLACE), 0, "%s", fh_error());
    for (int i = 0; i < n; i++) {
        double gg = clipg(rs * fh_get(&g, i) + wd * fh_get(&w, i), clip);
        double m = 0.1 * gg, v = 0.001 * gg * gg;
        double want = fh_get(&w, i) - lr * m / (sqrt(v) + 1e-8);
        cr_assert(close_to(fh_get(&mean, i), m, 1e-6, 1e-5) && close_to(fh_get(&var, i), v, 1e-7, 1e-4));
        cr_assert(close_to(fh_get(&w3, i), want, 1e-5, 1e-4), "adam[%d] %g want %g", i, fh_get(&w3, i), want);
    }
    /* rmsprop_update, output into a separate array (req write) */
    fh_arr nst = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(7));
    for (int i = 0; i < n; i++) fh_set(&nst, i, 0.5);
    fh_arr rin[3] = {w, g, nst};
    fh_arr rout[2] = {{0}};
    cr_assert_eq(fh_forward(P, "rmsprop_update", KW("lr", "0.1", "gamma1", "0.9", "clip_weights", "0.5"), 3, rin, &no,
                            rout, MXP_REQ_WRITE), 0, "%s", fh_error());
    for (int i = 0; i < n; i++) {
        double gg = fh_get(&g, i), nn = 0.1 * gg * gg + 0.9 * 0.5;
        double want = fh_get(&w, i) - lr * gg / sqrt(nn + 1e-8);
        want = want > 0.5 ? 0.5 : want < -0.5 ? -0.5 : want;
        cr_assert(close_to(fh_get(&nst, i), nn, 1e-6, 1e-5));
        cr_assert(close_to(fh_get(&rout[0], i), want, 1e-6, 1e-5), "rmsprop[%d]", i);
    }
    fh_arr_free(&rout[0]);
    fh_arr_free(&w); fh_arr_free(&g); fh_arr_free(&w1); fh_arr_free(&w2); fh_arr_free(&mom);
    fh_arr_free(&w3); fh_arr_free(&mean); fh_arr_free(&var); fh_arr_free(&nst);
}

/* Every op has an impl (SimpleOps carry their own); names are unique. */
Test(misc, inventory) {
    int n_ops = fh_n_ops(P), n_simple = fh_n_simple(P);
    /* 99 before, + 72 of math_ext.c / shape_ext.c / index_ext.c / reduce_ext.c. */
    cr_assert_eq(n_ops + n_simple, 171, "ops %d + simple %d", n_ops, n_simple);
    for (int i = 0; i < n_ops; i++)
        cr_assert(fh_impl(P, fh_op_at(P, i)->name, NULL), "%s has no impl", fh_op_at(P, i)->name);
    const char *must[] = {"_plus", "_add", "_minus", "_sub", "_mul", "_div", "broadcast_plus", "reshape",
                          "flatten", "concat", "split", "add_n", "cast", "sum_axis", "uniform", "normal",
                          "flip", "SwapAxis", "broadcast_axes", "identity", "stop_gradient", NULL};
    for (int i = 0; must[i]; i++)
        cr_assert(fh_op_def(P, must[i]) || fh_simple(P, must[i]), "alias %s missing", must[i]);
}
