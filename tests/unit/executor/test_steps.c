/* test_steps.c — the executor runs each step as a pre-created engine op:
 * many forward/backward rounds build every step's op once, and the
 * gradients of the last round equal those of a fresh executor's first
 * round on the same values (bit for bit: same kernels, same order); a
 * train/inference switch rebuilds the forward steps (and drops the
 * backward steps' stale instance), reshape starts from new steps; caller
 * head gradients of another array rebuild only the head's backward step. */
#include "exec_test_util.h"

#include "executor/executor.h"

static int builds_of_kind(const mxp_executor *ex, int kind, int *n_steps) {
    const mxp__program *p = mxp__executor_program(ex);
    int total = 0, n = 0;
    for (int s = 0; s < p->n_steps; s++) {
        if (p->steps[s].kind != kind) continue;
        n++;
        total += mxp__node_step_builds(ex->steps[s]);
    }
    *n_steps = n;
    return total;
}

static void *grads_bytes(mxp_executor *ex, mxp_symbol *sym, const char *name) {
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    return et_bytes(et_arg(ex, sym, name, 1));
}

Test(steps, many_rounds_build_each_step_once_with_the_same_results) {
    mxp_symbol *sym = et_mlp(9, 4);
    mxp_shape d = {.ndim = 2, .dims = {6, 5}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 5, MXP_REQ_WRITE, "softmax_label", 4);
    for (int r = 0; r < 25; r++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    }
    int nf, nb;
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_FWD, &nf), nf, "forward steps built once each");
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_BWD, &nb), nb, "backward steps built once each");
    cr_assert_gt(nf, 0);
    cr_assert_gt(nb, 0);
    void *a = grads_bytes(ex, sym, "fc1_weight");
    /* Weights did not change (no optimizer): a fresh bind's first round agrees. */
    mxp_executor *ex2 = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 5, MXP_REQ_WRITE, "softmax_label", 4);
    cr_assert_eq(mxp_executor_forward(ex2, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex2, 0, NULL), MXP_OK, "%s", mxp_last_error());
    void *b = grads_bytes(ex2, sym, "fc1_weight");
    cr_expect(!memcmp(a, b, 9 * 5 * sizeof(float)), "round 25 vs a fresh executor's round 1");
    free(a);
    free(b);
    /* Inference forward: forward steps rebuilt; the backward steps' instance
     * is stale now and dropped, then rebuilt by the next training round. */
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_FWD, &nf), 2 * nf);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_FWD, &nf), 3 * nf);
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_BWD, &nb), 2 * nb);
    /* Reshape: new steps. */
    mxp_shape small[] = {{.ndim = 2, .dims = {3, 5}}, {.ndim = 1, .dims = {3}}};
    const char *nms[] = {"data", "softmax_label"};
    cr_assert_eq(mxp_executor_reshape(ex, 2, nms, small), MXP_OK, "%s", mxp_last_error());
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_FWD, &nf), nf, "reshape: built once since");
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_BWD, &nb), nb);
    mxp_executor_free(ex);
    mxp_executor_free(ex2);
    mxp_symbol_release(sym);
}

/* A head without a loss: backward reads the caller's head gradient. */
Test(steps, another_head_gradient_array_rebuilds_only_the_head_step) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc", 1, &data, "num_hidden=3", NULL);
    mxp_symbol *act = gt_op("Activation", "act", 1, &fc, "act_type=tanh", NULL);
    mxp_shape d = {.ndim = 2, .dims = {4, 5}};
    const char *nm[] = {"data"};
    mxp_executor *ex = et_bind(act, MXP_DTYPE_F32, 1, nm, &d, 9, MXP_REQ_WRITE, NULL, 1);
    mxp_shape hs = {.ndim = 2, .dims = {4, 3}};
    uint64_t seed = 4;
    mxp_ndarray *h1 = et_arr(MXP_DTYPE_F32, &hs, &seed, 1.0), *h2 = et_arr(MXP_DTYPE_F32, &hs, &seed, 1.0);
    int nf, nb;
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 1, r < 2 ? &h1 : &h2), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_FWD, &nf), nf);
    cr_expect_eq(builds_of_kind(ex, MXP_STEP_BWD, &nb), nb + 1, "only the step reading the head gradient");
    mxp_ndarray_release(h1);
    mxp_ndarray_release(h2);
    mxp_executor_free(ex);
    mxp_symbol_release(act);
    mxp_symbol_release(fc);
    mxp_symbol_release(data);
}
