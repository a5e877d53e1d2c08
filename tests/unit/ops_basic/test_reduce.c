/* test_reduce.c — sum/mean/max/min/prod/norm with axis, keepdims and
 * exclude, argmax/argmin, against plain loops; gradients by central
 * differences. */
#include "common_test.h"

TestSuite(reduce, .init = ob_setup, .fini = ob_teardown);

/* Reference over a (2,3,4) array: reduce the axes with bit set in mask. */
static double ref_reduce(const fh_arr *x, int mask, const char *op, int i0, int i1, int i2) {
    double acc = !strcmp(op, "prod") ? 1 : !strcmp(op, "max") ? -INFINITY : !strcmp(op, "min") ? INFINITY : 0;
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) {
                if (!(mask & 1) && a != i0) continue;
                if (!(mask & 2) && b != i1) continue;
                if (!(mask & 4) && c != i2) continue;
                double v = fh_get(x, (a * 3 + b) * 4 + c);
                n++;
                if (!strcmp(op, "sum") || !strcmp(op, "mean")) acc += v;
                else if (!strcmp(op, "prod")) acc *= v;
                else if (!strcmp(op, "max")) acc = v > acc ? v : acc;
                else if (!strcmp(op, "min")) acc = v < acc ? v : acc;
                else if (!strcmp(op, "norm")) acc += v * v;
            }
    if (!strcmp(op, "mean")) acc /= n;
    if (!strcmp(op, "norm")) acc = sqrt(acc);
    return acc;
}

Test(reduce, axes_keepdims_exclude) {
    const char *ops[] = {"sum", "mean", "max", "min", "prod", "norm"};
    struct { const char *axis; int exclude; int mask; } ax[] = {
        {"None", 0, 7}, {"1", 0, 2}, {"(0,2)", 0, 5}, {"-1", 0, 4}, {"1", 1, 5}, {"(0,)", 1, 6}, {"()", 0, 7},
    };
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4));
    fh_fill_uniform(&x, 3, 0.5, 1.5);
    for (int o = 0; o < 6; o++)
        for (size_t k = 0; k < sizeof ax / sizeof ax[0]; k++)
            for (int keep = 0; keep < 2; keep++) {
                int is_norm = !strcmp(ops[o], "norm");  /* MXNet's norm has no exclude */
                if (is_norm && ax[k].exclude) continue;
                const char *kw[] = {"axis", ax[k].axis, "keepdims", keep ? "True" : "False",
                                    is_norm ? NULL : "exclude", ax[k].exclude ? "True" : "False", NULL};
                fh_arr y = run1(ops[o], kw, 1, &x);
                int m = ax[k].mask;
                int64_t full[3] = {2, 3, 4}, want_nd = 0, want[3];
                for (int d = 0; d < 3; d++) {
                    if (!(m & (1 << d))) want[want_nd++] = full[d];
                    else if (keep) want[want_nd++] = 1;
                }
                if (want_nd == 0) { want_nd = 1; want[0] = 1; }
                cr_assert_eq(y.ndim, want_nd, "%s axis=%s keep=%d rank", ops[o], ax[k].axis, keep);
                for (int d = 0; d < want_nd; d++) cr_assert_eq(y.shape[d], want[d]);
                int64_t idx = 0;
                for (int a = 0; a < ((m & 1) ? 1 : 2); a++)
                    for (int b = 0; b < ((m & 2) ? 1 : 3); b++)
                        for (int c = 0; c < ((m & 4) ? 1 : 4); c++) {
                            double w = ref_reduce(&x, m, ops[o], a, b, c);
                            cr_assert(close_to(fh_get(&y, idx), w, 1e-12, 1e-12), "%s axis=%s excl=%d [%lld]: %g want %g",
                                      ops[o], ax[k].axis, ax[k].exclude, (long long)idx, fh_get(&y, idx), w);
                            idx++;
                        }
                fh_arr_free(&y);
            }
    fh_arr_free(&x);
}

Test(reduce, gradients) {
    const char *ops[] = {"sum", "mean", "max", "min", "prod", "norm"};
    fh_arr x = fh_arr_new(MXP_DTYPE_F64, 3, SHAPE(2, 3, 4));
    fh_fill_uniform(&x, 5, 0.5, 1.5);  /* distinct values: max/min unique */
    for (int o = 0; o < 6; o++) {
        GRAD_OK(ops[o], KW("axis", "(0,2)"), 1, &x, 1);
        if (strcmp(ops[o], "norm"))
            GRAD_OK(ops[o], KW("axis", "1", "keepdims", "True", "exclude", "True"), 1, &x, 1);
        else
            GRAD_OK(ops[o], KW("axis", "(0,2)", "keepdims", "True"), 1, &x, 1);
        GRAD_OK(ops[o], NULL, 1, &x, 1);
    }
    GRAD_OK("norm", KW("ord", "1", "axis", "1"), 1, &x, 1);
    fh_arr_free(&x);
}

Test(reduce, argmax_argmin_and_float32_sum) {
    double v[6] = {3, 9, 1, 4, -2, 8};
    fh_arr x = fh_arr_from(MXP_DTYPE_F32, 2, SHAPE(2, 3), v);
    fh_arr y = run1("argmax", KW("axis", "1"), 1, &x);
    cr_assert_eq(y.ndim, 1);
    cr_assert_eq(y.dtype, MXP_DTYPE_F32);
    cr_assert_eq(fh_get(&y, 0), 1.0);
    cr_assert_eq(fh_get(&y, 1), 2.0);
    fh_arr_free(&y);
    y = run1("argmin", KW("axis", "0", "keepdims", "True"), 1, &x);
    cr_assert(y.ndim == 2 && y.shape[0] == 1 && y.shape[1] == 3);
    cr_assert_eq(fh_get(&y, 0), 0.0);
    cr_assert_eq(fh_get(&y, 1), 1.0);
    cr_assert_eq(fh_get(&y, 2), 0.0);
    fh_arr_free(&y);
    y = run1("argmax", NULL, 1, &x);  /* flattened */
    cr_assert_eq(fh_get(&y, 0), 1.0);
    fh_arr_free(&y);
    y = run1("sum_axis", KW("axis", "0"), 1, &x);
    cr_assert_eq(fh_get(&y, 0), 7.0);
    cr_assert_eq(fh_get(&y, 2), 9.0);
    fh_arr_free(&y);
    fh_arr z = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(1));
    fh_arr o[2] = {{0}};
    int n;
    cr_assert_neq(fh_forward(P, "sum", KW("axis", "3"), 1, &x, &n, o, MXP_REQ_WRITE), 0, "bad axis");
    fh_arr_free(&z);
    fh_arr_free(&x);
}
