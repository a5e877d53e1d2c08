/* test_ops_ext.c — the ops of math_ext.c, shape_ext.c and index_ext.c
 * against tests/data/ops/ops_ext_cases.txt (numpy-computed by
 * gen_ops_ext_cases.py from MXNet's documented semantics): one row per op
 * and case, forward in float64 and float32, finite-difference gradients;
 * plus what a table cannot say (strided inputs, req add, errors). */
#include "common_test.h"
#include "op_table.h"

#define CASES MXP_SOURCE_DIR "/tests/data/ops/ops_ext_cases.txt"

TestSuite(ops_ext, .init = ob_setup, .fini = ob_teardown);

Test(ops_ext, reference_cases) {
    int n = ot_run_file(P, CASES, "ops-basic");
    cr_assert_geq(n, 90, "only %d cases ran", n);
}

/* A strided (transposed) input through the xop driver, and req add. */
Test(ops_ext, strided_input_and_req_add) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(3, 2));
    for (int i = 0; i < 6; i++) fh_set(&x, i, i + 1);
    int64_t tshape[2] = {2, 3}, tstr[2] = {1, 2};
    mxp_tensor in = fh_view(&x);
    in.shape = tshape;
    in.strides = tstr; /* x^T: [[1,3,5],[2,4,6]] */
    fh_arr y = fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(2, 6));
    for (int i = 0; i < 12; i++) fh_set(&y, i, 100);
    mxp_tensor out = fh_view(&y);
    cr_assert_eq(fh_forward_views(P, "tile", KW("reps", "(1, 2)"), 1, &in, 1, &out, MXP_REQ_ADD), 0, "%s",
                 fh_error());
    const double want[12] = {1, 3, 5, 1, 3, 5, 2, 4, 6, 2, 4, 6};
    for (int i = 0; i < 12; i++) cr_assert_eq(fh_get(&y, i), 100 + want[i], "[%d] = %g", i, fh_get(&y, i));
    fh_arr_free(&x);
    fh_arr_free(&y);
}

Test(ops_ext, bad_parameters_and_shapes_are_named) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3));
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    cr_assert_neq(fh_forward(P, "broadcast_to", KW("shape", "(4, 3)"), 1, &x, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "broadcast_to"), "%s", fh_error());
    cr_assert_neq(fh_forward(P, "squeeze", KW("axis", "(0,)"), 1, &x, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "squeeze"), "%s", fh_error());
    cr_assert_neq(fh_forward(P, "depth_to_space", KW("block_size", "2"), 1, &x, &n, out, MXP_REQ_WRITE), 0);
    fh_arr g[2] = {fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3)), fh_arr_from(MXP_DTYPE_F64, 2, SHAPE(1, 1), (double[]){7})};
    cr_assert_neq(fh_forward(P, "gather_nd", NULL, 2, g, &n, out, MXP_REQ_WRITE), 0);
    cr_assert(strstr(fh_error(), "out of range"), "%s", fh_error());
    fh_arr_free(&g[0]);
    fh_arr_free(&g[1]);
    fh_arr_free(&x);
    for (int i = 0; i < FH_MAX_IO; i++) fh_arr_free(&out[i]); /* allocated before forward failed */
}
