/* test_shape.c — transpose, Reshape (MXNet special-code table), expand_dims,
 * Flatten, slice, slice_axis: shapes, values, gradients. */
#include "common_test.h"

TestSuite(shape, .init = ob_setup, .fini = ob_teardown);

static fh_arr iota(int32_t dt, int nd, const int64_t *shape) {
    fh_arr a = fh_arr_new(dt, nd, shape);
    for (int64_t i = 0; i < fh_numel(&a); i++) fh_set(&a, i, (double)i);
    return a;
}

/* The examples of MXNet's Reshape documentation. */
Test(shape, reshape_special_codes_table) {
    struct { int nd; int64_t in[4]; const char *shape; int rev; int ond; int64_t out[5]; } t[] = {
        {3, {2, 3, 4}, "(4,0,2)", 0, 3, {4, 3, 2}},
        {3, {2, 3, 4}, "(2,0,0)", 0, 3, {2, 3, 4}},
        {3, {2, 3, 4}, "(6,1,-1)", 0, 3, {6, 1, 4}},
        {3, {2, 3, 4}, "(3,-1,8)", 0, 3, {3, 1, 8}},
        {3, {2, 3, 4}, "(-1,)", 0, 1, {24}},
        {3, {2, 3, 4}, "(-2,)", 0, 3, {2, 3, 4}},
        {3, {2, 3, 4}, "(2,-2)", 0, 3, {2, 3, 4}},
        {3, {2, 3, 4}, "(-2,1,1)", 0, 5, {2, 3, 4, 1, 1}},
        {4, {2, 3, 4, 5}, "(-3,4)", 0, 2, {6, 4}},  /* wrong numel: expect failure */
        {4, {2, 3, 4, 5}, "(-3,-3)", 0, 2, {6, 20}},
        {3, {2, 3, 4}, "(0,-3)", 0, 2, {2, 12}},
        {3, {2, 3, 4}, "(-3,-2)", 0, 2, {6, 4}},
        {3, {2, 3, 4}, "(-4,1,2,-2)", 0, 4, {1, 2, 3, 4}},
        {3, {2, 3, 4}, "(2,-4,-1,3,-2)", 0, 4, {2, 1, 3, 4}},
        {3, {10, 5, 4}, "(-1,0)", 0, 2, {40, 5}},  /* MXNet docs */
        {3, {10, 5, 4}, "(-1,0)", 1, 2, {50, 4}},
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        fh_arr x = iota(MXP_DTYPE_F32, t[k].nd, t[k].in);
        fh_arr out[2] = {{0}};
        int n;
        int rc = fh_forward(P, "Reshape", KW("shape", t[k].shape, "reverse", t[k].rev ? "True" : "False"),
                            1, &x, &n, out, MXP_REQ_WRITE);
        if (k == 8) { cr_assert_neq(rc, 0, "(2,3,4,5) -> (-3,4) must fail"); fh_arr_free(&x); continue; }
        cr_assert_eq(rc, 0, "case %zu %s: %s", k, t[k].shape, fh_error());
        cr_assert_eq(out[0].ndim, t[k].ond, "case %zu rank %d", k, out[0].ndim);
        for (int d = 0; d < t[k].ond; d++)
            cr_assert_eq(out[0].shape[d], t[k].out[d], "case %zu %s dim %d = %lld", k, t[k].shape, d,
                         (long long)out[0].shape[d]);
        for (int64_t i = 0; i < fh_numel(&x); i++) cr_assert_eq(fh_get(&out[0], i), (double)i);
        fh_arr_free(&x);
        fh_arr_free(&out[0]);
    }
    fh_arr x = iota(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4));
    GRAD_OK("reshape", KW("shape", "(-1, 0)", "reverse", "True"), 1, &x, 1);
    fh_arr_free(&x);
}

Test(shape, transpose_values_and_gradient) {
    fh_arr x = iota(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4));
    fh_arr y = run1("transpose", KW("axes", "(1,2,0)"), 1, &x);
    cr_assert(y.shape[0] == 3 && y.shape[1] == 4 && y.shape[2] == 2);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++)
                cr_assert_eq(fh_get(&y, (i * 4 + j) * 2 + k), fh_get(&x, (k * 3 + i) * 4 + j));
    fh_arr_free(&y);
    y = run1("transpose", NULL, 1, &x);  /* reverse */
    cr_assert(y.shape[0] == 4 && y.shape[2] == 2);
    cr_assert_eq(fh_get(&y, 1), fh_get(&x, 12));
    fh_arr_free(&y);
    GRAD_OK("transpose", KW("axes", "(2,0,1)"), 1, &x, 1);
    fh_arr_free(&x);
}

Test(shape, expand_dims_flatten) {
    fh_arr x = iota(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4));
    fh_arr y = run1("expand_dims", KW("axis", "-1"), 1, &x);
    cr_assert(y.ndim == 4 && y.shape[3] == 1);
    fh_arr_free(&y);
    y = run1("expand_dims", KW("axis", "1"), 1, &x);
    cr_assert(y.ndim == 4 && y.shape[1] == 1 && y.shape[2] == 3);
    fh_arr_free(&y);
    y = run1("flatten", NULL, 1, &x);
    cr_assert(y.ndim == 2 && y.shape[0] == 2 && y.shape[1] == 12);
    cr_assert_eq(fh_get(&y, 23), 23.0);
    fh_arr_free(&y);
    GRAD_OK("Flatten", NULL, 1, &x, 1);
    GRAD_OK("expand_dims", KW("axis", "0"), 1, &x, 1);
    fh_arr_free(&x);
}

Test(shape, slice_and_slice_axis) {
    fh_arr x = iota(MXP_DTYPE_F64, 2, SHAPE(5, 6));
    fh_arr y = run1("slice", KW("begin", "(1, None)", "end", "(4, 5)", "step", "(2, 2)"), 1, &x);
    cr_assert(y.ndim == 2 && y.shape[0] == 2 && y.shape[1] == 3, "(%lld,%lld)", (long long)y.shape[0], (long long)y.shape[1]);
    double want[6] = {6, 8, 10, 18, 20, 22};
    for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&y, i), want[i]);
    fh_arr_free(&y);
    y = run1("slice", KW("begin", "(None,)", "end", "(None,)", "step", "(-2,)"), 1, &x);
    cr_assert(y.shape[0] == 3 && y.shape[1] == 6);
    cr_assert_eq(fh_get(&y, 0), 24.0);   /* rows 4, 2, 0 */
    cr_assert_eq(fh_get(&y, 6), 12.0);
    fh_arr_free(&y);
    y = run1("crop", KW("begin", "(-2, 1)", "end", "(None, -1)"), 1, &x);
    cr_assert(y.shape[0] == 2 && y.shape[1] == 4);
    cr_assert_eq(fh_get(&y, 0), 19.0);
    fh_arr_free(&y);
    y = run1("slice_axis", KW("axis", "1", "begin", "-3", "end", "None"), 1, &x);
    cr_assert(y.shape[0] == 5 && y.shape[1] == 3);
    cr_assert_eq(fh_get(&y, 0), 3.0);
    cr_assert_eq(fh_get(&y, 4), 10.0);
    fh_arr_free(&y);
    GRAD_OK("slice", KW("begin", "(1, None)", "end", "(4, 5)", "step", "(2, -2)"), 1, &x, 1);
    GRAD_OK("slice_axis", KW("axis", "0", "begin", "1", "end", "3"), 1, &x, 1);
    fh_arr_free(&x);
}
