/* test_unary.c — ops-basic elementwise unary SimpleOps: forward against
 * plain libm loops (float32 and float64, dense and strided views, req add),
 * backward against central differences in float64. */
#include "common_test.h"

typedef struct ucase {
    const char *name;
    double (*ref)(double);
    double lo, hi;
    int diff;
} ucase;

static double r_abs(double x) { return fabs(x); }
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static double r_neg(double x) { return -x; }
static double r_rec(double x) { return 1 / x; }
static double r_sq(double x) { return x * x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_softsign(double x) { return x / (1 + fabs(x)); }

static const ucase cases[] = {
    {"abs", r_abs, -2, 2, 1},       {"sign", r_sign, -2, 2, 0},
    {"negative", r_neg, -2, 2, 1},  {"reciprocal", r_rec, 0.5, 2, 1},
    {"square", r_sq, -2, 2, 1},     {"sqrt", sqrt, 0.5, 3, 1},
    {"rsqrt", r_rsqrt, 0.5, 3, 1},  {"exp", exp, -2, 2, 1},
    {"log", log, 0.5, 3, 1},        {"log1p", log1p, -0.5, 2, 1},
    {"expm1", expm1, -2, 2, 1},     {"sin", sin, -3, 3, 1},
    {"cos", cos, -3, 3, 1},         {"tanh", tanh, -2, 2, 1},
    {"sigmoid", r_sigmoid, -3, 3, 1}, {"relu", r_relu, -2, 2, 1},
    {"softsign", r_softsign, -2, 2, 1}, {"erf", erf, -2, 2, 1},
    {"floor", floor, -3, 3, 0},     {"ceil", ceil, -3, 3, 0},
    {"round", round, -3, 3, 0},
};
#define NCASES (sizeof cases / sizeof cases[0])

TestSuite(unary, .init = ob_setup, .fini = ob_teardown);

Test(unary, forward_f32_f64_matches_libm) {
    for (size_t c = 0; c < NCASES; c++) {
        for (int dt = 0; dt < 2; dt++) {
            int32_t dtype = dt ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
            /* 1000 elements: long enough for the vector loop and its tail */
            fh_arr x = fh_arr_new(dtype, 2, SHAPE(25, 40));
            fh_fill_uniform(&x, 1 + c, cases[c].lo, cases[c].hi);
            fh_arr y = run1(cases[c].name, NULL, 1, &x);
            cr_assert_eq(y.dtype, dtype);
            cr_assert_eq(y.ndim, 2);
            for (int64_t i = 0; i < fh_numel(&x); i++) {
                double want = cases[c].ref(fh_get(&x, i));
                if (!dt) want = (float)want;
                cr_assert(close_to(fh_get(&y, i), want, dt ? 1e-12 : 1e-6, dt ? 1e-12 : 1e-5),
                          "%s[%lld] (%s) = %.9g, want %.9g", cases[c].name, (long long)i,
                          dt ? "f64" : "f32", fh_get(&y, i), want);
            }
            fh_arr_free(&x);
            fh_arr_free(&y);
        }
    }
}

Test(unary, backward_matches_finite_differences) {
    for (size_t c = 0; c < NCASES; c++) {
        if (!cases[c].diff) continue;
        fh_arr x = fh_arr_new(MXP_DTYPE_F64, 2, SHAPE(3, 5));
        fh_fill_uniform(&x, 7 + c, cases[c].lo, cases[c].hi);
        if (!strcmp(cases[c].name, "abs") || !strcmp(cases[c].name, "relu"))
            for (int64_t i = 0; i < 15; i++)   /* keep away from the kink */
                if (fabs(fh_get(&x, i)) < 0.05) fh_set(&x, i, 0.3);
        GRAD_OK(cases[c].name, NULL, 1, &x, 1);
        fh_arr_free(&x);
    }
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
