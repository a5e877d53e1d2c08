/* test_binary.c — elemwise_*, broadcast_* and *_scalar SimpleOps: forward
 * against plain loops (including aliases and numpy broadcasting), backward
 * against central differences, with broadcast gradients reduced to each
 * input's shape. */
#include "common_test.h"

typedef struct bcase {
    const char *ename, *bname, *alias;
    double (*ref)(double, double);
    int diff;
} bcase;

static double r_add(double a, double b) { return a + b; }
static double r_sub(double a, double b) { return a - b; }
static double r_mul(double a, double b) { return a * b; }
static double r_div(double a, double b) { return a / b; }
static double r_max(double a, double b) { return a > b ? a : b; }
static double r_min(double a, double b) { return a < b ? a : b; }
static double r_eq(double a, double b) { return a == b; }
static double r_ne(double a, double b) { return a != b; }
static double r_gt(double a, double b) { return a > b; }
static double r_ge(double a, double b) { return a >= b; }
static double r_lt(double a, double b) { return a < b; }
static double r_le(double a, double b) { return a <= b; }

static const bcase cases[] = {
    {"elemwise_add", "broadcast_add", "_plus", r_add, 1},
    {"elemwise_sub", "broadcast_sub", "_minus", r_sub, 1},
    {"elemwise_mul", "broadcast_mul", "_mul", r_mul, 1},
    {"elemwise_div", "broadcast_div", "_div", r_div, 1},
    {"_power", "broadcast_power", "_Power", pow, 1},
    {"_maximum", "broadcast_maximum", "_Maximum", r_max, 1},
    {"_minimum", "broadcast_minimum", "_Minimum", r_min, 1},
    {"_equal", "broadcast_equal", NULL, r_eq, 0},
    {"_not_equal", "broadcast_not_equal", NULL, r_ne, 0},
    {"_greater", "broadcast_greater", NULL, r_gt, 0},
    {"_greater_equal", "broadcast_greater_equal", NULL, r_ge, 0},
    {"_lesser", "broadcast_lesser", NULL, r_lt, 0},
    {"_lesser_equal", "broadcast_lesser_equal", NULL, r_le, 0},
};
#define NC (sizeof cases / sizeof cases[0])

TestSuite(binary, .init = ob_setup, .fini = ob_teardown);

/* Values on a coarse grid so comparisons hit equality sometimes. */
static void grid(fh_arr *a, uint64_t seed) {
    fh_fill_uniform(a, seed, 0.5, 3.0);
    for (int64_t i = 0; i < fh_numel(a); i++) fh_set(a, i, round(fh_get(a, i) * 4) / 4);
}

Test(binary, elemwise_forward) {
    for (size_t c = 0; c < NC; c++) {
        for (int dt = 0; dt < 2; dt++) {
            int32_t dtype = dt ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
            fh_arr in[2] = {fh_arr_new(dtype, 2, SHAPE(7, 9)), fh_arr_new(dtype, 2, SHAPE(7, 9))};
            grid(&in[0], 1);
            grid(&in[1], 2);
            const char *name = cases[c].alias && dt ? cases[c].alias : cases[c].ename;
            fh_arr y = run1(name, NULL, 2, in);
            for (int64_t i = 0; i < 63; i++) {
                double want = cases[c].ref(fh_get(&in[0], i), fh_get(&in[1], i));
                cr_assert(close_to(fh_get(&y, i), want, 1e-6, 1e-6), "%s[%lld] = %g want %g", name,
                          (long long)i, fh_get(&y, i), want);
            }
            fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&y);
        }
    }
}

Test(binary, broadcast_forward) {
    /* (4,1,5) op (3,1) -> (4,3,5) */
    for (size_t c = 0; c < NC; c++) {
        fh_arr in[2] = {fh_arr_new(MXP_DTYPE_F32, 3, SHAPE(4, 1, 5)), fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(3, 1))};
        grid(&in[0], 3);
        grid(&in[1], 4);
        fh_arr y = run1(cases[c].bname, NULL, 2, in);
        cr_assert_eq(y.ndim, 3);
        cr_assert(y.shape[0] == 4 && y.shape[1] == 3 && y.shape[2] == 5);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 5; k++) {
                    double want = cases[c].ref(fh_get(&in[0], i * 5 + k), fh_get(&in[1], j));
                    cr_assert(close_to(fh_get(&y, (i * 3 + j) * 5 + k), want, 1e-6, 1e-6), "%s", cases[c].bname);
                }
        fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&y);
    }
}

Test(binary, gradients_elemwise_and_broadcast) {
    for (size_t c = 0; c < NC; c++) {
        if (!cases[c].diff) continue;
        fh_arr e[2] = {fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 4)), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 4))};
        fh_fill_uniform(&e[0], 5, 0.5, 2.0);
        fh_fill_uniform(&e[1], 6, 0.6, 2.1);
        GRAD_OK(cases[c].ename, NULL, 2, e, 3);
        fh_arr b[2] = {fh_arr_new(MXP_DTYPE_F64, 3, SHAPE(2, 1, 4)), fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 1))};
        fh_fill_uniform(&b[0], 7, 0.5, 2.0);
        fh_fill_uniform(&b[1], 8, 0.6, 2.1);
        GRAD_OK(cases[c].bname, NULL, 2, b, 3);
        fh_arr_free(&e[0]); fh_arr_free(&e[1]); fh_arr_free(&b[0]); fh_arr_free(&b[1]);
    }
}

Test(binary, broadcast_add_bias_gradient_is_column_sum) {
    double xv[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
    fh_arr in[2] = {fh_arr_from(MXP_DTYPE_F64, 2, SHAPE(2, 3), xv), fh_arr_from(MXP_DTYPE_F64, 1, SHAPE(3), bv)};
    fh_arr y = run1("broadcast_plus", NULL, 2, in);
    double ogv[6] = {1, 2, 3, 4, 5, 6};
    fh_arr og = fh_arr_from(MXP_DTYPE_F64, 2, SHAPE(2, 3), ogv);
    fh_arr g[2];
    memset(g, 0, sizeof g);
    cr_assert_eq(fh_backward(P, "broadcast_add", NULL, 2, in, 1, &y, &og, g, NULL), 0);
    cr_assert_eq(g[1].ndim, 1);
    cr_assert_eq(fh_get(&g[1], 0), 5.0);
    cr_assert_eq(fh_get(&g[1], 1), 7.0);
    cr_assert_eq(fh_get(&g[1], 2), 9.0);
    for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&g[0], i), ogv[i]);
    fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&y); fh_arr_free(&og);
    fh_arr_free(&g[0]); fh_arr_free(&g[1]);
}

typedef struct scase {
    const char *name;
    double (*ref)(double, double);  /* (x, s) */
    int diff;
} scase;
static double r_rsub(double x, double s) { return s - x; }
static double r_rdiv(double x, double s) { return s / x; }
static double r_rpow(double x, double s) { return pow(s, x); }
static const scase scases[] = {
    {"_plus_scalar", r_add, 1},   {"_minus_scalar", r_sub, 1}, {"_rminus_scalar", r_rsub, 1},
    {"_mul_scalar", r_mul, 1},    {"_div_scalar", r_div, 1},   {"_rdiv_scalar", r_rdiv, 1},
    {"_power_scalar", pow, 1},    {"_rpower_scalar", r_rpow, 1}, {"_maximum_scalar", r_max, 1},
    {"_minimum_scalar", r_min, 1}, {"_equal_scalar", r_eq, 0}, {"_not_equal_scalar", r_ne, 0},
    {"_greater_scalar", r_gt, 0}, {"_greater_equal_scalar", r_ge, 0},
    {"_lesser_scalar", r_lt, 0},  {"_lesser_equal_scalar", r_le, 0},
};

Test(binary, scalar_ops_forward_and_gradient) {
    for (size_t c = 0; c < sizeof scases / sizeof scases[0]; c++) {
        fh_arr x = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(5, 3));
        grid(&x, 9 + c);
        fh_arr y = run1(scases[c].name, KW("scalar", "1.5"), 1, &x);
        for (int64_t i = 0; i < 15; i++) {
            double want = scases[c].ref(fh_get(&x, i), 1.5);
            cr_assert(close_to(fh_get(&y, i), want, 1e-12, 1e-12), "%s(%g) = %g want %g",
                      scases[c].name, fh_get(&x, i), fh_get(&y, i), want);
        }
        fh_arr_free(&y);
        if (scases[c].diff) {
            fh_fill_uniform(&x, 40 + c, 0.3, 2.9);  /* off the 1.5 kink */
            for (int64_t i = 0; i < 15; i++)
                if (fabs(fh_get(&x, i) - 1.5) < 0.01) fh_set(&x, i, 1.7);
            GRAD_OK(scases[c].name, KW("scalar", "1.5"), 1, &x, 1);
        }
        fh_arr_free(&x);
    }
    /* the MXNet 0.x alias */
    fh_arr x = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(3));
    fh_arr y = run1("_PlusScalar", KW("scalar", "2"), 1, &x);
    cr_assert_eq(fh_get(&y, 2), 2.0);
    fh_arr_free(&x); fh_arr_free(&y);
}
