/* test_hot_swap.c — switching Convolution's implementation with
 * mxp_op_set_impl between two forwards of one node: the next forward runs
 * on the newly named impl (mxp__node_impl_name) and gives the same result
 * (1e-5, 1e-4 where winograd is involved; and each matches an independent
 * float64 reference); a switch between a forward and its backward does not
 * take effect until the next forward (backward runs on the forward's
 * instance), and gradients agree across impls; 'tune' on a node picks the
 * impl its cache records. */
#include "swap_test_util.h"

static void setup(void) {
    opx_setup();
    mxp_op_set_impl("Convolution", NULL);
}
static void teardown(void) {
    mxp_op_set_impl("Convolution", NULL);
    opx_teardown();
}
TestSuite(hot_swap, .init = setup, .fini = teardown);

static double *forward(sw_conv *c, int is_train) {
    cr_assert_eq(mxp__node_forward(c->nd, c->in, &c->y, NULL, NULL, is_train), MXP_OK, "%s", mxp_last_error());
    return opx_read(c->y);
}

Test(hot_swap, set_impl_between_forwards_changes_the_impl_used) {
    sw_conv c;
    sw_init(&c);
    const size_t ny = SW_N * SW_M * SW_H * SW_W;
    const char *seq[] = {"gemm", "direct", "winograd", "gemm", "winograd", "direct"};
    double *prev = NULL;
    const char *prev_name = NULL;
    for (size_t s = 0; s < sizeof seq / sizeof seq[0]; s++) {
        cr_assert_eq(mxp_op_set_impl("Convolution", seq[s]), MXP_OK, "%s", mxp_last_error());
        double *y = forward(&c, 0);
        cr_assert_str_eq(mxp__node_impl_name(c.nd), seq[s], "after set_impl('%s')", seq[s]);
        double tol = !strcmp(seq[s], "winograd") ? 1e-4 : 1e-5;
        double dref = sw_maxdiff(y, c.ref, ny);
        cr_expect_leq(dref, tol, "%s vs float64 reference: %g", seq[s], dref);
        if (prev) {
            if (prev_name && !strcmp(prev_name, "winograd")) tol = 1e-4;
            double d = sw_maxdiff(y, prev, ny);
            cr_expect_leq(d, tol, "%s vs %s: %g", seq[s], prev_name, d);
        }
        free(prev);
        prev = y;
        prev_name = seq[s];
    }
    free(prev);
    /* Back to auto: the highest rank that accepts (winograd, for this
     * 3x3 stride-1 float32 layer). */
    cr_assert_eq(mxp_op_set_impl("Convolution", NULL), MXP_OK);
    free(forward(&c, 0));
    cr_expect_str_eq(mxp__node_impl_name(c.nd), "winograd");
    sw_free(&c);
}

/* Backward with data, weight and bias gradients for out_grad og. */
static void backward(sw_conv *c, mxp_ndarray *og, mxp_ndarray **ig) {
    cr_assert_eq(mxp__node_backward(c->nd, &og, c->in, &c->y, ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
}

Test(hot_swap, switch_between_forward_and_backward_waits_for_the_next_forward) {
    sw_conv c;
    sw_init(&c);
    int64_t sy[4] = {SW_N, SW_M, SW_H, SW_W};
    double g[SW_N * SW_M * SW_H * SW_W];
    opx_fill(g, SW_N * SW_M * SW_H * SW_W, 31, -1, 1);
    mxp_ndarray *og = opx_arr(MXP_DTYPE_F32, 4, sy, g);
    mxp_ndarray *ig[3], *ig2[3];
    for (int i = 0; i < 3; i++) {
        ig[i] = opx_arr(MXP_DTYPE_F32, mxp_ndarray_ndim(c.in[i]), mxp_ndarray_shape(c.in[i]), NULL);
        ig2[i] = opx_arr(MXP_DTYPE_F32, mxp_ndarray_ndim(c.in[i]), mxp_ndarray_shape(c.in[i]), NULL);
    }
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK);
    free(forward(&c, 1));
    cr_assert_str_eq(mxp__node_impl_name(c.nd), "gemm");
    /* Requested between forward and backward: backward stays on gemm. */
    cr_assert_eq(mxp_op_set_impl("Convolution", "direct"), MXP_OK);
    backward(&c, og, ig);
    cr_expect_str_eq(mxp__node_impl_name(c.nd), "gemm", "backward must not re-select");
    /* The next forward switches; its backward agrees with gemm's. */
    free(forward(&c, 1));
    cr_expect_str_eq(mxp__node_impl_name(c.nd), "direct");
    backward(&c, og, ig2);
    for (int i = 0; i < 3; i++) {
        double *a = opx_read(ig[i]), *b = opx_read(ig2[i]);
        double d = sw_maxdiff(b, a, (size_t)mxp_ndarray_size(ig[i]));
        cr_expect_leq(d, 1e-5, "gradient of input %d: direct vs gemm %g", i, d);
        free(a);
        free(b);
    }
    for (int i = 0; i < 3; i++) {
        mxp_ndarray_release(ig[i]);
        mxp_ndarray_release(ig2[i]);
    }
    mxp_ndarray_release(og);
    sw_free(&c);
}

Test(hot_swap, tune_policy_on_a_node_uses_the_cached_choice) {
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", opx_dir);
    setenv("XDG_CACHE_HOME", cache, 1);
    sw_conv c;
    sw_init(&c);
    cr_assert_eq(mxp_op_set_impl("Convolution", "tune"), MXP_OK);
    double *y = forward(&c, 0);
    const char *name = mxp__node_impl_name(c.nd);
    cr_assert(name);
    char chosen[64];
    snprintf(chosen, sizeof chosen, "%s", name);
    cr_expect_leq(sw_maxdiff(y, c.ref, SW_N * SW_M * SW_H * SW_W), 1e-4);
    free(y);
    char path[256];
    snprintf(path, sizeof path, "%s/mxplug/tune.yaml", cache);
    FILE *f = fopen(path, "r");
    cr_assert(f, "tune wrote no cache at %s", path);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char want[96];
    snprintf(want, sizeof want, "choice: \"%s\"", chosen);
    cr_expect(strstr(text, want), "node ran '%s' but the cache says:\n%s", chosen, text);
    cr_expect(strstr(text, "impls=direct,gemm,strip,winograd|"), "%s", text);
    unsetenv("XDG_CACHE_HOME");
    sw_free(&c);
}
