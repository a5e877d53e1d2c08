/* test_errors.c — a kernel failing inside a bound graph surfaces from
 * mxp_executor_wait with the node's name (and the op's message), and
 * nodes downstream of it are skipped; uses the op_invoke fixture pack's
 * fxi_fail (forward always fails), set up as in tests/unit/op. */
#include "../op/op_test_util.h"

#include "../graph/graph_test_util.h"

TestSuite(exec_errors, .init = opx_setup, .fini = opx_teardown);

Test(exec_errors, kernel_failure_names_the_node) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *t = gt_op("Activation", "first", 1, &x, "act_type=tanh", NULL);
    mxp_symbol *f = gt_op("fxi_fail", "boom", 1, &t, NULL);
    mxp_symbol *after = gt_op("Activation", "after", 1, &f, "act_type=relu", NULL);
    int64_t sh[1] = {6};
    mxp_ndarray *xa = opx_arr(MXP_DTYPE_F32, 1, sh, (double[]){1, 2, 3, 4, 5, 6});
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(after, opx_cpu, 1, &xa, NULL, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int rc = mxp_executor_wait(ex);
    cr_assert_neq(rc, MXP_OK);
    const char *m = mxp_last_error();
    cr_assert(strstr(m, "'boom'") && strstr(m, "deliberate failure"), "%s", m);
    /* Raised once: the executor is usable again (and fails again). */
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK);
    cr_assert_neq(mxp_executor_wait(ex), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "'boom'"), "%s", mxp_last_error());
    mxp_executor_free(ex);
    mxp_ndarray_release(xa);
    mxp_symbol_release(after);
    mxp_symbol_release(f);
    mxp_symbol_release(t);
    mxp_symbol_release(x);
}

/* The engine's own record (what any wait on the data raises, without the
 * executor's attribution) names the graph node, not only its op: two nodes
 * of the same op are told apart. */
Test(exec_errors, engine_error_names_the_node_and_op) {
    mxp_symbol *x = gt_var("x");
    mxp_symbol *ok = gt_op("Activation", "fine", 1, &x, "act_type=tanh", NULL);
    mxp_symbol *f1 = gt_op("fxi_fail", "first_fail", 1, &x, NULL);
    mxp_symbol *f2 = gt_op("fxi_fail", "second_fail", 1, &ok, NULL);
    mxp_symbol *parts[2] = {f1, f2};
    mxp_symbol *grp = NULL;
    cr_assert_eq(mxp_symbol_group(2, parts, &grp), MXP_OK, "%s", mxp_last_error());
    int64_t sh[1] = {4};
    mxp_ndarray *xa = opx_arr(MXP_DTYPE_F32, 1, sh, (double[]){1, 2, 3, 4});
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(grp, opx_cpu, 1, &xa, NULL, NULL, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int n = 0;
    mxp_ndarray *const *outs = NULL;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &outs), MXP_OK);
    cr_assert_eq(n, 2);
    cr_assert_neq(mxp_ndarray_wait_to_read(outs[1]), MXP_OK);
    const char *m = mxp_last_error();
    cr_assert(strstr(m, "op 'second_fail (fxi_fail)' failed") && !strstr(m, "first_fail"), "%s", m);
    cr_assert_neq(mxp_ndarray_wait_to_read(outs[0]), MXP_OK);
    m = mxp_last_error();
    cr_assert(strstr(m, "op 'first_fail (fxi_fail)' failed") && strstr(m, "deliberate failure"), "%s", m);
    mxp_executor_free(ex);
    mxp_ndarray_release(xa);
    mxp_symbol_release(grp);
    mxp_symbol_release(f2);
    mxp_symbol_release(f1);
    mxp_symbol_release(ok);
    mxp_symbol_release(x);
}
