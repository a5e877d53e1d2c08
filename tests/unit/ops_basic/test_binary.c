/* test_binary.c — elemwise_*, broadcast_* and *_scalar SimpleOps: a table
 * (op_table.h) of forward against plain loops (including aliases and numpy
 * broadcasting) and of backward against central differences, with
 * broadcast gradients reduced to each input's shape, and a table of the
 * *_scalar ops; then what a row cannot say (a bias gradient by hand, an
 * old alias). */
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

/* *_scalar ops: out = fn(x, scalar) with the row's "scalar" kwarg. */
typedef struct sref { double (*fn)(double, double); } sref;
static void ref_scalar(const ot_ref_args *a) {
    const sref *r = a->data;
    double s = 0;
    for (int k = 0; a->kw[k]; k += 2)
        if (!strcmp(a->kw[k], "scalar")) s = atof(a->kw[k + 1]);
    for (int64_t i = 0; i < fh_numel(&a->in[0]); i++) fh_set(&a->out[0], i, r->fn(fh_get(&a->in[0], i), s));
}
static double r_rsub(double x, double s) { return s - x; }
static double r_rdiv(double x, double s) { return s / x; }
static double r_rpow(double x, double s) { return pow(s, x); }

/* Keep x off the scalar (1.5), the kink of max/min, for finite differences. */
static void off_scalar(fh_arr *in, int n_in) {
    (void)n_in;
    for (int64_t i = 0; i < fh_numel(&in[0]); i++)
        if (fabs(fh_get(&in[0], i) - 1.5) < 0.01) fh_set(&in[0], i, 1.7);
}

/* Forward (5,3) on the grid in float64; differentiable ops also get
 * finite differences on [0.3, 2.9). */
#define SFWD(name, f)                                                                                      \
    {.op = name, .kw = {"scalar", "1.5", NULL}, .n_in = 1, .in = {OT_SHAPE(5, 3)}, .lo = 0.5, .hi = 3,       \
     .seed = 9, .ref = ref_scalar, .ref_data = &(const sref){f}, .prep = grid, .dtypes = OT_F64}
#define SGRAD(name, f)                                                                                     \
    SFWD(name, f), {.op = name, .kw = {"scalar", "1.5", NULL}, .n_in = 1, .in = {OT_SHAPE(5, 3)}, .lo = 0.3, \
                    .hi = 2.9, .seed = 40, .ref = ref_scalar, .ref_data = &(const sref){f}, .prep = off_scalar, \
                    .dtypes = OT_F64, .fd_mask = 1}

static const ot_row scalar_rows[] = {
    SGRAD("_plus_scalar", r_add),   SGRAD("_minus_scalar", r_sub), SGRAD("_rminus_scalar", r_rsub),
    SGRAD("_mul_scalar", r_mul),    SGRAD("_div_scalar", r_div),   SGRAD("_rdiv_scalar", r_rdiv),
    SGRAD("_power_scalar", pow),    SGRAD("_rpower_scalar", r_rpow), SGRAD("_maximum_scalar", r_max),
    SGRAD("_minimum_scalar", r_min), SFWD("_equal_scalar", r_eq),  SFWD("_not_equal_scalar", r_ne),
    SFWD("_greater_scalar", r_gt),  SFWD("_greater_equal_scalar", r_ge),
    SFWD("_lesser_scalar", r_lt),   SFWD("_lesser_equal_scalar", r_le),
};

Test(binary, scalar_table) {
    int runs = ot_run(P, scalar_rows, OT_LEN(scalar_rows));
    cr_assert_eq(runs, 16 + 10, "%d runs", runs);
    /* the MXNet 0.x alias */
    fh_arr x = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(3));
    fh_arr y = run1("_PlusScalar", KW("scalar", "2"), 1, &x);
    cr_assert_eq(fh_get(&y, 2), 2.0);
    fh_arr_free(&x); fh_arr_free(&y);
}
