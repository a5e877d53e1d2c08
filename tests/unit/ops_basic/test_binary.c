/* test_binary.c — elemwise_*, broadcast_* and *_scalar SimpleOps: a table
 * (op_table.h) of forward against plain loops (including aliases and numpy
 * broadcasting) and of backward against central differences, with
 * broadcast gradients reduced to each input's shape; then what a row
 * cannot say (a bias gradient by hand, scalar ops and their old aliases). */
#include "common_test.h"
#include "op_table.h"

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

/* Values on a coarse grid (quarters in [0.5, 3]) so comparisons hit
 * equality sometimes. */
static void grid(fh_arr *in, int n_in) {
    for (int k = 0; k < n_in; k++)
        for (int64_t i = 0; i < fh_numel(&in[k]); i++) fh_set(&in[k], i, round(fh_get(&in[k], i) * 4) / 4);
}

/* Per op: elemwise forward (7,9) in float32 and float64, its alias in
 * float64, broadcast forward (4,1,5) op (3,1) in float32; differentiable
 * ops also get float64 finite differences of both inputs, elemwise (3,4)
 * and broadcast (2,1,4) op (3,1). */
#define TOL .atol32 = 1e-6, .rtol32 = 1e-6, .atol64 = 1e-6, .rtol64 = 1e-6
#define FWD(e, b, fn)                                                                                      \
    {.op = e, .n_in = 2, .in = {OT_SHAPE(7, 9), OT_SHAPE(7, 9)}, .lo = 0.5, .hi = 3, .seed = 1, .binary = fn, \
     .prep = grid, TOL},                                                                                   \
    {.op = b, .n_in = 2, .in = {OT_SHAPE(4, 1, 5), OT_SHAPE(3, 1)}, .lo = 0.5, .hi = 3, .seed = 3,         \
     .binary = fn, .prep = grid, .dtypes = OT_F32, .out_shape = OT_SHAPE(4, 3, 5), TOL}
#define ALIAS(a, fn)                                                                                       \
    {.op = a, .n_in = 2, .in = {OT_SHAPE(7, 9), OT_SHAPE(7, 9)}, .lo = 0.5, .hi = 3, .seed = 1, .binary = fn, \
     .prep = grid, .dtypes = OT_F64, TOL}
#define GRAD(e, b, fn)                                                                                     \
    {.op = e, .n_in = 2, .in = {OT_SHAPE(3, 4), OT_SHAPE(3, 4)}, .lo = 0.5, .hi = 2, .seed = 5, .binary = fn, \
     .dtypes = OT_F64, .fd_mask = 3},                                                                      \
    {.op = b, .n_in = 2, .in = {OT_SHAPE(2, 1, 4), OT_SHAPE(3, 1)}, .lo = 0.5, .hi = 2, .seed = 7,         \
     .binary = fn, .dtypes = OT_F64, .fd_mask = 3}

static const ot_row rows[] = {
    FWD("elemwise_add", "broadcast_add", r_add),   ALIAS("_plus", r_add),   GRAD("elemwise_add", "broadcast_add", r_add),
    FWD("elemwise_sub", "broadcast_sub", r_sub),   ALIAS("_minus", r_sub),  GRAD("elemwise_sub", "broadcast_sub", r_sub),
    FWD("elemwise_mul", "broadcast_mul", r_mul),   ALIAS("_mul", r_mul),    GRAD("elemwise_mul", "broadcast_mul", r_mul),
    FWD("elemwise_div", "broadcast_div", r_div),   ALIAS("_div", r_div),    GRAD("elemwise_div", "broadcast_div", r_div),
    FWD("_power", "broadcast_power", pow),         ALIAS("_Power", pow),    GRAD("_power", "broadcast_power", pow),
    FWD("_maximum", "broadcast_maximum", r_max),   ALIAS("_Maximum", r_max), GRAD("_maximum", "broadcast_maximum", r_max),
    FWD("_minimum", "broadcast_minimum", r_min),   ALIAS("_Minimum", r_min), GRAD("_minimum", "broadcast_minimum", r_min),
    FWD("_equal", "broadcast_equal", r_eq),
    FWD("_not_equal", "broadcast_not_equal", r_ne),
    FWD("_greater", "broadcast_greater", r_gt),
    FWD("_greater_equal", "broadcast_greater_equal", r_ge),
    FWD("_lesser", "broadcast_lesser", r_lt),
    FWD("_lesser_equal", "broadcast_lesser_equal", r_le),
};

TestSuite(binary, .init = ob_setup, .fini = ob_teardown);

Test(binary, table) {
    int runs = ot_run(P, rows, OT_LEN(rows));
    cr_assert_eq(runs, 13 * 3 + 7 * 3, "%d runs", runs);
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
        fh_fill_uniform(&x, 9 + c, 0.5, 3.0);
        grid(&x, 1);
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
