/* test_node_step.c — pre-created node steps (mxp__node_forward_step /
 * _backward_step): one engine op reused across many runs (new input data
 * is read at run time), rebuilt when the arrays, is_train or the node's
 * instance (hot swap) change; backward keeps the forward's instance until
 * the next forward; a step freed with pushes in flight completes them; a
 * bad array fails the push as on the plain path.  Results are checked
 * against the fixture's float64 reference (swap_test_util.h). */
#include "swap_test_util.h"

static void setup(void) {
    opx_setup();
    mxp_op_set_impl("Convolution", NULL);
}
static void teardown(void) {
    mxp_op_set_impl("Convolution", NULL);
    opx_teardown();
}
TestSuite(node_step, .init = setup, .fini = teardown);

#define NY (SW_N * SW_M * SW_H * SW_W)
#define NX (SW_N * SW_C * SW_H * SW_W)

static void expect_ref(sw_conv *c, mxp_ndarray *y, const char *what) {
    double *v = opx_read(y);
    double d = sw_maxdiff(v, c->ref, NY);
    cr_expect_leq(d, 1e-5, "%s: max diff %g vs float64 reference", what, d);
    free(v);
}

/* New values for x (same array): the reference follows. */
static void new_input(sw_conv *c, uint64_t seed) {
    opx_fill(c->x, NX, seed, -1, 1);
    float buf[NX];
    for (int i = 0; i < NX; i++) buf[i] = (float)(c->x[i] = (float)c->x[i]);
    cr_assert_eq(mxp_ndarray_sync_copy_from(c->in[0], buf, sizeof buf), MXP_OK);
    sw_reference(c);
}

Test(node_step, one_engine_op_serves_many_runs_and_reads_new_data_each_time) {
    sw_conv c;
    sw_init(&c);
    mxp__node_step *st = NULL;
    for (int r = 0; r < 30; r++) {
        if (r % 10 == 5) new_input(&c, 100 + (uint64_t)r);
        cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
        if (r % 10 == 5) expect_ref(&c, c.y, "after new input");
    }
    expect_ref(&c, c.y, "after 30 runs");
    cr_expect_eq(mxp__node_step_builds(st), 1, "built once, got %d", mxp__node_step_builds(st));
    /* Inference runs on another instance: one rebuild, then reuse again. */
    for (int r = 0; r < 3; r++)
        cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &c.y, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp__node_step_builds(st), 2);
    /* Another output array: rebuilt, and the result lands there. */
    int64_t sy[4] = {SW_N, SW_M, SW_H, SW_W};
    mxp_ndarray *y2 = opx_arr(MXP_DTYPE_F32, 4, sy, NULL);
    cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &y2, NULL, NULL, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp__node_step_builds(st), 3);
    expect_ref(&c, y2, "into a second output array");
    mxp__node_step_free(st);
    mxp_ndarray_release(y2);
    sw_free(&c);
}

Test(node_step, hot_swap_rebuilds_at_the_next_forward_and_backward_keeps_the_forward_instance) {
    sw_conv c;
    sw_init(&c);
    int64_t sy[4] = {SW_N, SW_M, SW_H, SW_W};
    double g[NY];
    opx_fill(g, NY, 31, -1, 1);
    mxp_ndarray *og = opx_arr(MXP_DTYPE_F32, 4, sy, g);
    mxp_ndarray *ig[3], *ref_ig[3];
    for (int i = 0; i < 3; i++) {
        ig[i] = opx_arr(MXP_DTYPE_F32, mxp_ndarray_ndim(c.in[i]), mxp_ndarray_shape(c.in[i]), NULL);
        ref_ig[i] = opx_arr(MXP_DTYPE_F32, mxp_ndarray_ndim(c.in[i]), mxp_ndarray_shape(c.in[i]), NULL);
    }
    mxp__node_step *fw = NULL, *bw = NULL;
    cr_assert_eq(mxp_op_set_impl("Convolution", "gemm"), MXP_OK);
    cr_assert_eq(mxp__node_forward_step(c.nd, &fw, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp__node_backward_step(c.nd, &bw, &og, c.in, &c.y, ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    /* The plain path on the same instance: what the steps must reproduce. */
    cr_assert_eq(mxp__node_backward(c.nd, &og, c.in, &c.y, ref_ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp__node_impl_name(c.nd), "gemm");
    /* Swap between forward and backward: backward stays on gemm, no rebuild. */
    cr_assert_eq(mxp_op_set_impl("Convolution", "direct"), MXP_OK);
    cr_assert_eq(mxp__node_backward_step(c.nd, &bw, &og, c.in, &c.y, ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp__node_step_builds(bw), 1);
    cr_expect_str_eq(mxp__node_impl_name(c.nd), "gemm", "backward must not re-select");
    for (int i = 0; i < 3; i++) {
        double *a = opx_read(ig[i]), *b = opx_read(ref_ig[i]);
        int64_t n = mxp_ndarray_size(ig[i]);
        for (int64_t k = 0; k < n; k++) cr_assert_eq(a[k], b[k], "gradient %d[%lld] differs from the plain push", i, (long long)k);
        free(a);
        free(b);
    }
    cr_expect(!mxp__node_step_stale(c.nd, bw));
    /* The next forward re-selects: a new engine op on the direct impl. */
    cr_assert_eq(mxp__node_forward_step(c.nd, &fw, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(mxp__node_impl_name(c.nd), "direct");
    cr_expect_eq(mxp__node_step_builds(fw), 2);
    expect_ref(&c, c.y, "direct after the swap");
    cr_expect(mxp__node_step_stale(c.nd, bw), "the backward step still holds the gemm instance");
    mxp__node_step_reset(bw);
    cr_expect(!mxp__node_step_stale(c.nd, bw));
    cr_assert_eq(mxp__node_backward_step(c.nd, &bw, &og, c.in, &c.y, ig, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp__node_step_builds(bw), 2);
    for (int i = 0; i < 3; i++) {
        double *a = opx_read(ig[i]), *b = opx_read(ref_ig[i]);
        cr_expect_leq(sw_maxdiff(a, b, (size_t)mxp_ndarray_size(ig[i])), 1e-5, "gradient %d: direct vs gemm", i);
        free(a);
        free(b);
    }
    mxp__node_step_free(fw);
    mxp__node_step_free(bw);
    for (int i = 0; i < 3; i++) {
        mxp_ndarray_release(ig[i]);
        mxp_ndarray_release(ref_ig[i]);
    }
    mxp_ndarray_release(og);
    sw_free(&c);
}

Test(node_step, freed_with_pushes_in_flight_completes_them) {
    sw_conv c;
    sw_init(&c);
    mxp__node_step *st = NULL;
    for (int r = 0; r < 20; r++)
        cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    mxp__node_step_free(st);
    mxp__node_free(c.nd); /* the engine keeps the template and its instance */
    c.nd = NULL;
    expect_ref(&c, c.y, "after freeing the step and the node");
    sw_free(&c);
}

Test(node_step, a_bad_array_fails_the_push_like_the_plain_path) {
    sw_conv c;
    sw_init(&c);
    mxp__node_step *st = NULL;
    cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    int64_t bad[4] = {SW_N, SW_M, SW_H, SW_W + 1};
    mxp_ndarray *yb = opx_arr(MXP_DTYPE_F32, 4, bad, NULL);
    int rc = mxp__node_forward_step(c.nd, &st, c.in, &yb, NULL, NULL, 1);
    cr_expect_eq(rc, MXP_ESHAPE);
    cr_expect(strstr(mxp_last_error(), "Convolution") != NULL, "%s", mxp_last_error());
    /* The step still works on good arrays. */
    cr_assert_eq(mxp__node_forward_step(c.nd, &st, c.in, &c.y, NULL, NULL, 1), MXP_OK, "%s", mxp_last_error());
    expect_ref(&c, c.y, "after a refused push");
    mxp__node_step_free(st);
    mxp_ndarray_release(yb);
    sw_free(&c);
}
