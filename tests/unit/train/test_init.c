/* test_init.c — initializers (runtime/src/train/init.c): Xavier's fan
 * computation for FC and conv weights as MXNet does it, ranges and spread
 * of uniform / gaussian draws, reproducibility under mxp_random_seed, and
 * name-pattern rules with MXNet's defaults and user overrides. */
#include "train_test_util.h"

TestSuite(train_init, .init = trt_setup, .fini = trt_teardown);

Test(train_init, xavier_fans_fc_and_conv) {
    double fi, fo;
    int64_t fc[2] = {128, 784};
    cr_assert_eq(mxp_init_xavier_fans(fc, 2, &fi, &fo), MXP_OK);
    cr_assert_eq(fi, 784.0);
    cr_assert_eq(fo, 128.0);
    int64_t conv[4] = {20, 3, 5, 7};
    cr_assert_eq(mxp_init_xavier_fans(conv, 4, &fi, &fo), MXP_OK);
    cr_assert_eq(fi, 3.0 * 35);
    cr_assert_eq(fo, 20.0 * 35);
    int64_t vec[1] = {10};
    cr_assert_eq(mxp_init_xavier_fans(vec, 1, &fi, &fo), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "at least 2D"), "%s", mxp_last_error());
}

static void moments(const float *v, int n, double *mean, double *sd, double *maxabs) {
    double s = 0, s2 = 0, m = 0;
    for (int i = 0; i < n; i++) {
        s += v[i];
        s2 += (double)v[i] * v[i];
        if (fabs(v[i]) > m) m = fabs(v[i]);
    }
    *mean = s / n;
    *sd = sqrt(s2 / n - *mean * *mean);
    *maxabs = m;
}

Test(train_init, xavier_uniform_and_gaussian_ranges) {
    int64_t shp[4] = {64, 16, 3, 3}; /* fan_in 144, fan_out 576 */
    int n = 64 * 16 * 9;
    mxp_ndarray *w = trt_f32(shp, 4, NULL);
    struct { int rnd, factor; double fan; } cases[] = {
        {MXP_XAVIER_UNIFORM, MXP_XAVIER_AVG, (144.0 + 576.0) / 2}, {MXP_XAVIER_UNIFORM, MXP_XAVIER_IN, 144.0},
        {MXP_XAVIER_UNIFORM, MXP_XAVIER_OUT, 576.0}, {MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 144.0}};
    for (int c = 0; c < 4; c++) {
        mxp_init x = mxp_init_xavier(cases[c].rnd, cases[c].factor, 2.0);
        cr_assert_eq(mxp_init_array(&x, w), MXP_OK, "%s", mxp_last_error());
        float *v = trt_get(w);
        double mean, sd, maxabs, scale = sqrt(2.0 / cases[c].fan);
        moments(v, n, &mean, &sd, &maxabs);
        if (cases[c].rnd == MXP_XAVIER_UNIFORM) {
            cr_assert_leq(maxabs, scale, "case %d", c);
            cr_assert_gt(maxabs, 0.95 * scale, "case %d: the range is used", c);
            cr_assert_float_eq(sd, scale / sqrt(3.0), 0.05 * scale, "case %d sd %g", c, sd);
        } else {
            cr_assert_float_eq(sd, scale, 0.05 * scale, "gaussian sd %g vs %g", sd, scale);
            cr_assert_gt(maxabs, 2.5 * scale);
        }
        cr_assert_float_eq(mean, 0.0, 0.05 * scale);
        free(v);
    }
    mxp_ndarray_release(w);
}

Test(train_init, uniform_normal_and_seed_reproducibility) {
    int64_t n = 5000;
    mxp_ndarray *a = trt_vec(n, NULL), *b = trt_vec(n, NULL);
    mxp_init u = mxp_init_uniform(0.07), g = mxp_init_normal(0.5);
    mxp_random_seed(11);
    cr_assert_eq(mxp_init_array(&u, a), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_init_array(&g, b), MXP_OK);
    float *a1 = trt_get(a), *b1 = trt_get(b);
    double mean, sd, maxabs;
    moments(a1, (int)n, &mean, &sd, &maxabs);
    cr_assert_leq(maxabs, 0.07);
    cr_assert_float_eq(sd, 0.07 / sqrt(3.0), 0.003);
    moments(b1, (int)n, &mean, &sd, &maxabs);
    cr_assert_float_eq(sd, 0.5, 0.03);
    /* Same seed, same calls: same numbers. */
    mxp_random_seed(11);
    cr_assert_eq(mxp_init_array(&u, a), MXP_OK);
    cr_assert_eq(mxp_init_array(&g, b), MXP_OK);
    float *a2 = trt_get(a), *b2 = trt_get(b);
    cr_assert_eq(memcmp(a1, a2, (size_t)n * 4), 0);
    cr_assert_eq(memcmp(b1, b2, (size_t)n * 4), 0);
    /* Another seed: other numbers. */
    mxp_random_seed(12);
    cr_assert_eq(mxp_init_array(&u, a), MXP_OK);
    float *a3 = trt_get(a);
    cr_assert_neq(memcmp(a1, a3, (size_t)n * 4), 0);
    free(a1), free(a2), free(a3), free(b1), free(b2);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}

Test(train_init, rules_mxnet_defaults_and_overrides) {
    mxp_init x = mxp_init_xavier(MXP_XAVIER_UNIFORM, MXP_XAVIER_AVG, 3.0);
    mxp_init_rules *r = NULL;
    cr_assert_eq(mxp_init_rules_create(&x, &r), MXP_OK);
    struct { const char *name; int kind; } want[] = {
        {"fc1_weight", MXP_INIT_XAVIER}, {"fc1_bias", MXP_INIT_ZEROS}, {"bn0_gamma", MXP_INIT_ONES},
        {"bn0_beta", MXP_INIT_ZEROS}, {"bn0_moving_mean", MXP_INIT_ZEROS}, {"bn0_moving_var", MXP_INIT_ONES}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mxp_init *in = mxp_init_rules_find(r, want[i].name);
        cr_assert(in, "%s", want[i].name);
        cr_assert_eq(in->kind, want[i].kind, "%s", want[i].name);
    }
    cr_assert_null(mxp_init_rules_find(r, "data"));
    cr_assert(strstr(mxp_last_error(), "'data'"), "%s", mxp_last_error());
    /* User rules win, the last added first. */
    mxp_init c1 = mxp_init_constant(0.25), c2 = mxp_init_constant(-2.0);
    cr_assert_eq(mxp_init_rules_add(r, "fc*_bias", &c1), MXP_OK);
    cr_assert_eq(mxp_init_rules_add(r, "fc2_*", &c2), MXP_OK);
    int64_t n = 4;
    mxp_ndarray *b1 = trt_vec(n, NULL), *b2 = trt_vec(n, NULL), *g = trt_vec(n, NULL), *mv = trt_vec(n, NULL);
    cr_assert_eq(mxp_init_rules_apply(r, "fc1_bias", b1), MXP_OK);
    cr_assert_eq(mxp_init_rules_apply(r, "fc2_bias", b2), MXP_OK);
    cr_assert_eq(mxp_init_rules_apply(r, "bn_gamma", g), MXP_OK);
    cr_assert_eq(mxp_init_rules_apply(r, "bn_moving_var", mv), MXP_OK);
    float *v1 = trt_get(b1), *v2 = trt_get(b2), *vg = trt_get(g), *vm = trt_get(mv);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(v1[i], 0.25f);
        cr_assert_eq(v2[i], -2.0f);
        cr_assert_eq(vg[i], 1.0f);
        cr_assert_eq(vm[i], 1.0f);
    }
    /* Xavier on a vector is refused, with the name in the message. */
    cr_assert_eq(mxp_init_rules_apply(r, "odd_weight", b1), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "odd_weight"), "%s", mxp_last_error());
    free(v1), free(v2), free(vg), free(vm);
    mxp_ndarray_release(b1), mxp_ndarray_release(b2), mxp_ndarray_release(g), mxp_ndarray_release(mv);
    mxp_init_rules_free(r);
}
