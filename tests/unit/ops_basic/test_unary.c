/* test_unary.c — ops-basic elementwise unary SimpleOps: a table (op_table.h)
 * of forward against plain libm loops in float32 and float64 on 1000
 * elements (long enough for the vector loop and its tail) and of backward
 * against central differences in float64; then strided views, req add,
 * zero-gradient ops and what a row cannot say. */
#include "common_test.h"
#include "op_table.h"

static double r_abs(double x) { return fabs(x); }
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static double r_neg(double x) { return -x; }
static double r_rec(double x) { return 1 / x; }
static double r_sq(double x) { return x * x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_softsign(double x) { return x / (1 + fabs(x)); }

/* Keep abs and relu away from their kink at 0 for finite differences. */
static void off_zero(fh_arr *in, int n_in) {
    (void)n_in;
    for (int64_t i = 0; i < fh_numel(&in[0]); i++)
        if (fabs(fh_get(&in[0], i)) < 0.05) fh_set(&in[0], i, 0.3);
}

/* Forward: (25, 40), float32 and float64.  Gradient: (3, 5), float64. */
#define FWD(name, fn, a, b) {.op = name, .n_in = 1, .in = {OT_SHAPE(25, 40)}, .lo = a, .hi = b, .unary = fn}
#define GRAD(name, fn, a, b, ...)                                                                          \
    {.op = name, .n_in = 1, .in = {OT_SHAPE(3, 5)}, .lo = a, .hi = b, .seed = 7, .unary = fn,              \
     .dtypes = OT_F64, .fd_mask = 1, __VA_ARGS__}

static const ot_row rows[] = {
    FWD("abs", r_abs, -2, 2),        GRAD("abs", r_abs, -2, 2, .prep = off_zero),
    FWD("sign", r_sign, -2, 2),
    FWD("negative", r_neg, -2, 2),   GRAD("negative", r_neg, -2, 2),
    FWD("reciprocal", r_rec, 0.5, 2), GRAD("reciprocal", r_rec, 0.5, 2),
    FWD("square", r_sq, -2, 2),      GRAD("square", r_sq, -2, 2),
    FWD("sqrt", sqrt, 0.5, 3),       GRAD("sqrt", sqrt, 0.5, 3),
    FWD("rsqrt", r_rsqrt, 0.5, 3),   GRAD("rsqrt", r_rsqrt, 0.5, 3),
    FWD("exp", exp, -2, 2),          GRAD("exp", exp, -2, 2),
    FWD("log", log, 0.5, 3),         GRAD("log", log, 0.5, 3),
    FWD("log1p", log1p, -0.5, 2),    GRAD("log1p", log1p, -0.5, 2),
    FWD("expm1", expm1, -2, 2),      GRAD("expm1", expm1, -2, 2),
    FWD("sin", sin, -3, 3),          GRAD("sin", sin, -3, 3),
    FWD("cos", cos, -3, 3),          GRAD("cos", cos, -3, 3),
    FWD("tanh", tanh, -2, 2),        GRAD("tanh", tanh, -2, 2),
    FWD("sigmoid", r_sigmoid, -3, 3), GRAD("sigmoid", r_sigmoid, -3, 3),
    FWD("relu", r_relu, -2, 2),      GRAD("relu", r_relu, -2, 2, .prep = off_zero),
    FWD("softsign", r_softsign, -2, 2), GRAD("softsign", r_softsign, -2, 2),
    FWD("erf", erf, -2, 2),          GRAD("erf", erf, -2, 2),
    FWD("floor", floor, -3, 3),
    FWD("ceil", ceil, -3, 3),
    FWD("round", round, -3, 3),
};

TestSuite(unary, .init = ob_setup, .fini = ob_teardown);

Test(unary, table) {
    int runs = ot_run(P, rows, OT_LEN(rows));
    cr_assert_eq(runs, 21 * 2 + 17, "%d runs", runs);
}
Test(unary, zero_gradient_ops_write_zero) {
    const char *ops[] = {"sign", "floor", "ceil", "round"};
    for (int k = 0; k < 4; k++) {
        fh_arr x = fh_arr_new(MXP_DTYPE_F64, 1, SHAPE(6));
        fh_fill_uniform(&x, 3, -2, 2);
        fh_arr y = run1(ops[k], NULL, 1, &x);
        fh_arr og = fh_arr_clone(&y);
        for (int i = 0; i < 6; i++) fh_set(&og, i, 1.0);
        fh_arr g = fh_arr_new(MXP_DTYPE_F64, 1, SHAPE(6));
        for (int i = 0; i < 6; i++) fh_set(&g, i, 9.0);
        cr_assert_eq(fh_backward(P, ops[k], NULL, 1, &x, 1, &y, &og, &g, NULL), 0);
        for (int i = 0; i < 6; i++) cr_assert_eq(fh_get(&g, i), 0.0, "%s", ops[k]);
        fh_arr_free(&x); fh_arr_free(&y); fh_arr_free(&og); fh_arr_free(&g);
    }
}

Test(unary, clip_and_smooth_l1) {
    double xv[] = {-3, -1, -0.2, 0, 0.2, 0.9, 1.5, 4};
    fh_arr x = fh_arr_from(MXP_DTYPE_F64, 1, SHAPE(8), xv);
    fh_arr y = run1("clip", KW("a_min", "-1", "a_max", "1"), 1, &x);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(fh_get(&y, i), xv[i] < -1 ? -1 : xv[i] > 1 ? 1 : xv[i]);
    fh_arr_free(&y);
    double xg[] = {-3, -0.5, 0.2, 0.7, 1.5, 4, -2, 0.1};
    fh_arr xx = fh_arr_from(MXP_DTYPE_F64, 1, SHAPE(8), xg);
    GRAD_OK("clip", KW("a_min", "-1", "a_max", "1"), 1, &xx, 1);
    /* smooth_l1, sigma = 2: quadratic inside |x| < 0.25 */
    y = run1("smooth_l1", KW("scalar", "2"), 1, &x);
    for (int i = 0; i < 8; i++) {
        double a = fabs(xv[i]);
        double want = a < 0.25 ? 0.5 * 4 * xv[i] * xv[i] : a - 0.125;
        cr_assert(close_to(fh_get(&y, i), want, 1e-12, 0), "smooth_l1(%g)", xv[i]);
    }
    GRAD_OK("smooth_l1", KW("scalar", "2"), 1, &xx, 1);
    fh_arr_free(&y); fh_arr_free(&x); fh_arr_free(&xx);
    fh_arr z = fh_arr_new(MXP_DTYPE_F64, 1, SHAPE(2));
    fh_arr o[2] = {{0}};
    int n_out;
    cr_assert_neq(fh_forward(P, "clip", KW("a_min", "0"), 1, &z, &n_out, o, MXP_REQ_WRITE), 0,
                  "a_max is required");
    fh_arr_free(&z);
}

Test(unary, strided_views_and_req_add) {
    /* x is 6x4; feed its transpose view (4x6, strides (1,4)) and write into
     * every other element of a 4x12 buffer (strides (12,2)). */
    fh_arr x = fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(6, 4));
    fh_fill_uniform(&x, 5, -2, 2);
    fh_arr ob = fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(4, 12));
    for (int i = 0; i < 48; i++) fh_set(&ob, i, 100.0);
    int64_t ishape[2] = {4, 6}, istr[2] = {1, 4}, ostr[2] = {12, 2};
    mxp_tensor ti = fh_view(&x), to = fh_view(&ob);
    ti.shape = ishape; ti.strides = istr; ti.ndim = 2;
    to.shape = ishape; to.strides = ostr;
    cr_assert_eq(fh_forward_views(P, "exp", NULL, 1, &ti, 1, &to, MXP_REQ_ADD), 0, "%s",
                 fh_error());
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 12; c++) {
            double got = fh_get(&ob, r * 12 + c);
            double want = c % 2 ? 100.0 : 100.0 + (float)exp(fh_get(&x, (c / 2) * 4 + r));
            cr_assert(close_to(got, want, 1e-4, 1e-6), "(%d,%d) = %g want %g", r, c, got, want);
        }
    fh_arr_free(&x);
    fh_arr_free(&ob);
}

Test(unary, int32_goes_through_double_path) {
    double xv[] = {-3, -1, 0, 2, 5};
    fh_arr x = fh_arr_from(MXP_DTYPE_I32, 1, SHAPE(5), xv);
    fh_arr y = run1("square", NULL, 1, &x);
    cr_assert_eq(y.dtype, MXP_DTYPE_I32);
    for (int i = 0; i < 5; i++) cr_assert_eq(fh_get(&y, i), xv[i] * xv[i]);
    fh_arr_free(&x); fh_arr_free(&y);
}

Test(unary, large_array_uses_parallel_chunks) {
    fh_arr x = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(200003));
    fh_fill_uniform(&x, 11, -5, 5);
    fh_arr y = run1("relu", NULL, 1, &x);
    for (int64_t i = 0; i < 200003; i++) {
        double v = fh_get(&x, i);
        cr_assert_eq(fh_get(&y, i), v > 0 ? v : 0);
    }
    fh_arr_free(&x); fh_arr_free(&y);
}
