/* test_index.c — take (clip/wrap/raise, scatter-add gradient), one_hot,
 * where (full and row condition). */
#include "common_test.h"

TestSuite(index, .init = ob_setup, .fini = ob_teardown);

Test(index, take_modes_and_gradient) {
    fh_arr a = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(4, 3));
    for (int i = 0; i < 12; i++) fh_set(&a, i, i);
    double iv[3] = {2, -1, 5};
    fh_arr in[2] = {a, fh_arr_from(MXP_DTYPE_F64, 1, SHAPE(3), iv)};
    fh_arr y = run1("take", NULL, 2, in);  /* clip: rows 2, 0, 3 */
    cr_assert(y.ndim == 2 && y.shape[0] == 3 && y.shape[1] == 3);
    double want[9] = {6, 7, 8, 0, 1, 2, 9, 10, 11};
    for (int i = 0; i < 9; i++) cr_assert_eq(fh_get(&y, i), want[i]);
    fh_arr_free(&y);
    y = run1("take", KW("mode", "wrap"), 2, in);  /* rows 2, 3, 1 */
    cr_assert_eq(fh_get(&y, 3), 9.0);
    cr_assert_eq(fh_get(&y, 6), 3.0);
    fh_arr_free(&y);
    y = run1("take", KW("axis", "1"), 2, in);  /* cols 2, 0, 2 */
    cr_assert(y.shape[0] == 4 && y.shape[1] == 3);
    cr_assert_eq(fh_get(&y, 3), 5.0);
    cr_assert_eq(fh_get(&y, 4), 3.0);
    fh_arr_free(&y);
    fh_arr o[2] = {{0}};
    int n;
    cr_assert_neq(fh_forward(P, "take", KW("mode", "raise"), 2, in, &n, o, MXP_REQ_WRITE), 0);
    fh_arr_free(&o[0]);
    /* duplicate indices accumulate */
    double dv[4] = {1, 1, 3, 1};
    fh_arr in2[2] = {a, fh_arr_from(MXP_DTYPE_F64, 2, SHAPE(2, 2), dv)};
    GRAD_OK("take", NULL, 2, in2, 1);
    GRAD_OK("take", KW("axis", "-1"), 2, in2, 1);
    fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&in2[1]);
}

Test(index, one_hot) {
    double iv[3] = {1, 0, 3};
    fh_arr ix = fh_arr_from(MXP_DTYPE_F32, 1, SHAPE(3), iv);
    fh_arr y = run1("one_hot", KW("depth", "3", "on_value", "5", "off_value", "-1", "dtype", "int32"), 1, &ix);
    cr_assert(y.ndim == 2 && y.shape[1] == 3 && y.dtype == MXP_DTYPE_I32);
    double want[9] = {-1, 5, -1, 5, -1, -1, -1, -1, -1};
    for (int i = 0; i < 9; i++) cr_assert_eq(fh_get(&y, i), want[i], "[%d]", i);
    fh_arr_free(&y); fh_arr_free(&ix);
}

Test(index, where_full_and_rows) {
    double cv[6] = {1, 0, 2, 0, 0, 1};
    fh_arr in[3] = {fh_arr_from(MXP_DTYPE_F64, 2, SHAPE(2, 3), cv), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3)),
                    fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(2, 3))};
    fh_fill_uniform(&in[1], 1, -1, 1);
    fh_fill_uniform(&in[2], 2, -1, 1);
    fh_arr y = run1("where", NULL, 3, in);
    for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&y, i), cv[i] ? fh_get(&in[1], i) : fh_get(&in[2], i));
    fh_arr_free(&y);
    GRAD_OK("where", NULL, 3, in, 6);
    double rv[2] = {0, 1};
    fh_arr rin[3] = {fh_arr_from(MXP_DTYPE_F32, 1, SHAPE(2), rv), in[1], in[2]};
    y = run1("where", NULL, 3, rin);
    for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&y, i), i >= 3 ? fh_get(&in[1], i) : fh_get(&in[2], i));
    fh_arr_free(&y);
    for (int k = 0; k < 3; k++) fh_arr_free(&in[k]);
    fh_arr_free(&rin[0]);
}
