/* test_join.c — Concat, stack, SliceChannel: values and gradients. */
#include "common_test.h"

TestSuite(join, .init = ob_setup, .fini = ob_teardown);

Test(join, concat_stack_split) {
    fh_arr in[3] = {fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3)), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 1)),
                    fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 2))};
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < fh_numel(&in[k]); i++) fh_set(&in[k], i, 100 * k + i);
    fh_arr y = run1("concat", KW("num_args", "3"), 3, in);  /* dim defaults to 1 */
    cr_assert(y.ndim == 2 && y.shape[0] == 2 && y.shape[1] == 6);
    double want[12] = {0, 1, 2, 100, 200, 201, 3, 4, 5, 101, 202, 203};
    for (int i = 0; i < 12; i++) cr_assert_eq(fh_get(&y, i), want[i], "concat[%d]", i);
    GRAD_OK("Concat", KW("num_args", "3", "dim", "-1"), 3, in, 7);
    fh_arr_free(&y);

    fh_arr s[2] = {fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3)), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3))};
    fh_fill_uniform(&s[0], 1, -1, 1);
    fh_fill_uniform(&s[1], 2, -1, 1);
    y = run1("stack", KW("num_args", "2", "axis", "1"), 2, s);
    cr_assert(y.ndim == 3 && y.shape[0] == 2 && y.shape[1] == 2 && y.shape[2] == 3);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 3; j++)
                cr_assert_eq(fh_get(&y, (i * 2 + k) * 3 + j), fh_get(&s[k], i * 3 + j));
    GRAD_OK("stack", KW("num_args", "2", "axis", "-1"), 2, s, 3);
    fh_arr_free(&y);

    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, SHAPE(2, 4, 3));
    fh_fill_uniform(&x, 3, -1, 1);
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n = 0;
    cr_assert_eq(fh_forward(P, "split", KW("num_outputs", "2"), 1, &x, &n, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert_eq(n, 2);
    cr_assert(out[1].ndim == 3 && out[1].shape[1] == 2);
    cr_assert_eq(fh_get(&out[1], 0), fh_get(&x, 6));
    for (int i = 0; i < n; i++) fh_arr_free(&out[i]);
    n = 0;
    cr_assert_eq(fh_forward(P, "SliceChannel", KW("num_outputs", "3", "axis", "2", "squeeze_axis", "True"),
                            1, &x, &n, out, MXP_REQ_WRITE), 0, "%s", fh_error());
    cr_assert(n == 3 && out[2].ndim == 2 && out[2].shape[0] == 2 && out[2].shape[1] == 4);
    cr_assert_eq(fh_get(&out[2], 1), fh_get(&x, 5));
    for (int i = 0; i < n; i++) fh_arr_free(&out[i]);
    GRAD_OK("SliceChannel", KW("num_outputs", "2", "axis", "1"), 1, &x, 1);
    GRAD_OK("SliceChannel", KW("num_outputs", "3", "axis", "-1", "squeeze_axis", "1"), 1, &x, 1);
    for (int k = 0; k < 3; k++) fh_arr_free(&in[k]);
    fh_arr_free(&s[0]); fh_arr_free(&s[1]); fh_arr_free(&x);
}
