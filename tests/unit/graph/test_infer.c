/* test_infer.c — shape and type inference over whole graphs: weights
 * filled from data and params, information flowing backward (a known
 * output or sibling determines an input), incomplete results reported as
 * such (not errors), inconsistent ones as MXP_ESHAPE naming node, op and
 * both shapes; __shape__ with unknown dims; dtypes propagated. */
#include "graph_test_util.h"

static mxp_symbol *fc_net(void) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc1", 1, &data, "num_hidden=10", NULL);
    mxp_symbol *act = gt_op("Activation", "relu1", 1, &fc, "act_type=relu", NULL);
    mxp_symbol_release(data);
    mxp_symbol_release(fc);
    return act;
}

Test(infer, weights_filled_from_data_and_params) {
    mxp_symbol *s = fc_net();
    mxp_shape d = {.ndim = 2, .dims = {4, 7}};
    int na, no, complete;
    mxp_shape *as, *os;
    cr_assert_eq(mxp_symbol_infer_shape(s, 1, NULL, &d, &na, &as, &no, &os, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    cr_assert_eq(na, 3);
    cr_assert(as[1].ndim == 2 && as[1].dims[0] == 10 && as[1].dims[1] == 7);
    cr_assert(as[2].ndim == 1 && as[2].dims[0] == 10);
    cr_assert(os[0].ndim == 2 && os[0].dims[0] == 4 && os[0].dims[1] == 10);
    free(as);
    free(os);
    mxp_symbol_release(s);
}

Test(infer, incomplete_is_not_an_error) {
    mxp_symbol *s = fc_net();
    int na, complete = -1;
    mxp_shape *as;
    cr_assert_eq(mxp_symbol_infer_shape(s, 0, NULL, NULL, &na, &as, NULL, NULL, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 0);
    cr_assert_eq(na, 3);
    cr_assert(as[0].ndim < 0 || !as[0].dims[0]);
    free(as);
    /* Unknown batch dim through __shape__: still incomplete, no error; the
     * weight is known all the same. */
    mxp_symbol *in = NULL, *d = NULL;
    cr_assert_eq(mxp_symbol_internals(s, &in), MXP_OK);
    cr_assert_eq(mxp_symbol_output_by_name(in, "data", &d), MXP_OK);
    cr_assert_eq(mxp_symbol_set_attr(d, "__shape__", "(0, 7)"), MXP_OK);
    cr_assert_eq(mxp_symbol_infer_shape(s, 0, NULL, NULL, &na, &as, NULL, NULL, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 0);
    cr_assert(as[1].ndim == 2 && as[1].dims[0] == 10 && as[1].dims[1] == 7, "weight %d (%lld, %lld)", as[1].ndim,
              (long long)as[1].dims[0], (long long)as[1].dims[1]);
    free(as);
    /* Giving the batch dim completes it. */
    mxp_shape full = {.ndim = 2, .dims = {3, 7}};
    const char *nm[] = {"data"};
    cr_assert_eq(mxp_symbol_infer_shape(s, 1, nm, &full, NULL, NULL, NULL, NULL, NULL, NULL, &complete), MXP_OK);
    cr_assert_eq(complete, 1);
    mxp_symbol_release(d);
    mxp_symbol_release(in);
    mxp_symbol_release(s);
}

Test(infer, inconsistent_names_node_op_and_shapes) {
    mxp_symbol *s = fc_net();
    const char *nm[] = {"data", "fc1_weight"};
    mxp_shape sh[] = {{.ndim = 2, .dims = {4, 7}}, {.ndim = 2, .dims = {10, 6}}};
    int complete;
    int rc = mxp_symbol_infer_shape(s, 2, nm, sh, NULL, NULL, NULL, NULL, NULL, NULL, &complete);
    cr_assert_eq(rc, MXP_ESHAPE);
    const char *m = mxp_last_error();
    cr_assert(strstr(m, "fc1") && strstr(m, "FullyConnected"), "%s", m);
    cr_assert((strstr(m, "(10, 6)") || strstr(m, "(10,6)")) && (strstr(m, "(10, 7)") || strstr(m, "(10,7)")), "%s", m);
    /* Not an argument name. */
    const char *bad[] = {"nope"};
    cr_assert_eq(mxp_symbol_infer_shape(s, 1, bad, sh, NULL, NULL, NULL, NULL, NULL, NULL, &complete), MXP_EINVAL);
    mxp_symbol_release(s);
}

Test(infer, backward_flow_from_sibling) {
    /* a + b with only b known: a gets b's shape (elemwise ops fill inputs). */
    mxp_symbol *a = gt_var("a"), *b = gt_var("b");
    mxp_symbol *sum = gt_op("elemwise_add", "sum", 2, (mxp_symbol *[]){a, b}, NULL);
    mxp_symbol *t = gt_op("Activation", "t", 1, &sum, "act_type=tanh", NULL);
    const char *nm[] = {"b"};
    mxp_shape sb = {.ndim = 3, .dims = {2, 3, 4}};
    int na, complete;
    mxp_shape *as;
    cr_assert_eq(mxp_symbol_infer_shape(t, 1, nm, &sb, &na, &as, NULL, NULL, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    cr_assert(as[0].ndim == 3 && as[0].dims[2] == 4);
    free(as);
    mxp_symbol_release(t);
    mxp_symbol_release(sum);
    mxp_symbol_release(a);
    mxp_symbol_release(b);
}

Test(infer, dtypes_propagate_and_conflict) {
    mxp_symbol *s = fc_net();
    int dt = MXP_DTYPE_F64, na, no, complete;
    int *at, *ot;
    cr_assert_eq(mxp_symbol_infer_type(s, 1, NULL, &dt, &na, &at, &no, &ot, NULL, NULL, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    for (int i = 0; i < na; i++) cr_assert_eq(at[i], MXP_DTYPE_F64);
    cr_assert_eq(ot[0], MXP_DTYPE_F64);
    free(at);
    free(ot);
    const char *nm[] = {"data", "fc1_weight"};
    int dts[] = {MXP_DTYPE_F64, MXP_DTYPE_F32};
    cr_assert_eq(mxp_symbol_infer_type(s, 2, nm, dts, NULL, NULL, NULL, NULL, NULL, NULL, &complete), MXP_ETYPE);
    cr_assert(strstr(mxp_last_error(), "fc1"), "%s", mxp_last_error());
    mxp_symbol_release(s);
}
