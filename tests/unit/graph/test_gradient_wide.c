/* test_gradient_wide.c — the gradient program has no fixed per-node limit
 * (issue 10 §4: graph/gradient.c refused nodes with more than 1,024 inputs,
 * and the node runtime's name lists stopped at 1,024): add_n over 5,001
 * inputs (5,000 variables, x0 used twice) binds, runs forward and
 * differentiates.  Expected values come from the definition, not the
 * runtime: out = sum of the inputs, d out / d x_i = head_grad times the
 * number of times x_i is an input (x0's two contributions go through a SUM
 * step). */
#include "graph_test_util.h"

#define N_VARS 5000
#define N_IN (N_VARS + 1)

static const mxp_device cpu = {MXP_DEV_CPU, 0};

Test(gradient_wide, add_n_of_5000_arrays_builds_and_differentiates, .timeout = 300) {
    mxp_symbol **vars = calloc(N_IN, sizeof *vars);
    cr_assert(vars);
    char name[32];
    for (int i = 0; i < N_VARS; i++) {
        snprintf(name, sizeof name, "x%d", i);
        vars[i] = gt_var(name);
    }
    vars[N_VARS] = vars[0];
    char num[32];
    snprintf(num, sizeof num, "num_args=%d", N_IN);
    mxp_symbol *sum = gt_op("add_n", "sum", N_IN, vars, num, NULL);
    int n_args = 0;
    const char *const *args = NULL;
    cr_assert_eq(mxp_symbol_list_arguments(sum, &n_args, &args), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(n_args, N_VARS, "x0 is one argument however often it is used");

    const char **names = calloc(N_VARS, sizeof *names);
    mxp_shape *shapes = calloc(N_VARS, sizeof *shapes);
    cr_assert(names && shapes);
    for (int i = 0; i < N_VARS; i++) {
        names[i] = args[i];
        shapes[i].ndim = 1;
        shapes[i].dims[0] = 3;
    }
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(sum, cpu, N_VARS, names, shapes, MXP_REQ_WRITE, 0, NULL, &ex), MXP_OK,
                 "%s", mxp_last_error());
    int na = 0, ng = 0, no = 0;
    mxp_ndarray *const *arr = NULL, *const *grads = NULL, *const *outs = NULL;
    cr_assert_eq(mxp_executor_args(ex, &na, &arr), MXP_OK);
    cr_assert_eq(mxp_executor_grads(ex, &ng, &grads), MXP_OK);
    cr_assert_eq(na, N_VARS);
    cr_assert_eq(ng, N_VARS);
    /* x_i = (i, -i, 0.5) in float32 (exact); the argument order is x0..x4999. */
    double want[3] = {0, 0, 0};
    for (int i = 0; i < N_VARS; i++) {
        float v[3] = {(float)i, (float)-i, 0.5f};
        cr_assert_eq(mxp_ndarray_sync_copy_from(arr[i], v, sizeof v), MXP_OK, "%s", mxp_last_error());
        int uses = i == 0 ? 2 : 1;
        for (int k = 0; k < 3; k++) want[k] += uses * (double)v[k];
    }
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    int64_t hs[1] = {3};
    mxp_ndarray *head = NULL;
    cr_assert_eq(mxp_ndarray_create(hs, 1, MXP_DTYPE_F32, cpu, &head), MXP_OK);
    float hg[3] = {1.0f, -2.0f, 0.25f};
    cr_assert_eq(mxp_ndarray_sync_copy_from(head, hg, sizeof hg), MXP_OK);
    cr_assert_eq(mxp_executor_backward(ex, 1, &head), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());

    cr_assert_eq(mxp_executor_outputs(ex, &no, &outs), MXP_OK);
    cr_assert_eq(no, 1);
    float got[3];
    cr_assert_eq(mxp_ndarray_sync_copy_to(outs[0], got, sizeof got), MXP_OK);
    /* float32 sums of integers below 2^24 in any order are exact. */
    for (int k = 0; k < 3; k++) cr_expect_eq((double)got[k], want[k], "out[%d]: %g vs %g", k, got[k], want[k]);
    for (int i = 0; i < N_VARS; i++) {
        float g[3];
        cr_assert_eq(mxp_ndarray_sync_copy_to(grads[i], g, sizeof g), MXP_OK);
        int uses = i == 0 ? 2 : 1;
        for (int k = 0; k < 3; k++)
            if (g[k] != uses * hg[k]) cr_assert_fail("grad x%d[%d] = %g, want %g", i, k, g[k], uses * hg[k]);
    }
    mxp_ndarray_release(head);
    mxp_executor_free(ex);
    mxp_symbol_release(sum);
    for (int i = 0; i < N_VARS; i++) mxp_symbol_release(vars[i]);
    free(vars);
    free(names);
    free(shapes);
}
