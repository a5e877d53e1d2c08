/* test_activation.c — Activation (relu, sigmoid, tanh, softrelu, softsign):
 * a table (op_table.h, every impl of the op) of forward against libm
 * formulas in float32 and float64 and of finite differences of the
 * backward in float64; then float32 and float64 backward against the
 * float64 analytic derivative with req write and add, and the float32
 * kernels' own loops and accuracy. */
#include <string.h>
#include "nn_test_util.h"
#include "op_table.h"

static fh_pack *pack;
static void setup(void) { pack = nn_load("ops-nn"); cr_assert(pack, "%s", fh_error()); }
static void teardown(void) { fh_unload(pack); }

static double f(int t, double x) {
    switch (t) { case 0: return x > 0 ? x : 0; case 1: return 1 / (1 + exp(-x)); case 2: return tanh(x);
    case 3: return log(1 + exp(x)); default: return x / (1 + fabs(x)); }
}
static double df(int t, double x) {
    switch (t) { case 0: return x > 0; case 1: { double s = 1 / (1 + exp(-x)); return s * (1 - s); }
    case 2: return 1 - tanh(x) * tanh(x); case 3: return 1 / (1 + exp(-x)); default: return 1 / ((1 + fabs(x)) * (1 + fabs(x))); }
}
static const char *names[] = {"relu", "sigmoid", "tanh", "softrelu", "softsign"};

static double f_relu(double x) { return f(0, x); }
static double f_sigmoid(double x) { return f(1, x); }
static double f_tanh(double x) { return f(2, x); }
static double f_softrelu(double x) { return f(3, x); }
static double f_softsign(double x) { return f(4, x); }

/* relu's kink at 0 is no place for finite differences. */
static void off_kink(fh_arr *in, int n_in) {
    (void)n_in;
    for (int64_t i = 0; i < fh_numel(&in[0]); i++)
        if (fabs(fh_get(&in[0], i)) < 1e-3) fh_set(&in[0], i, 0.5);
}

#define ACT(t, fn)                                                                                         \
    {.op = "Activation", .kw = {"act_type", t, NULL}, .n_in = 1, .in = {OT_SHAPE(37, 41)}, .lo = -4, .hi = 4, \
     .seed = 9, .unary = fn, .atol32 = 2e-6, .rtol32 = 2e-6},                                              \
    {.op = "Activation", .kw = {"act_type", t, NULL}, .n_in = 1, .in = {OT_SHAPE(50)}, .lo = -3, .hi = 3,  \
     .seed = 3, .unary = fn, .dtypes = OT_F64, .fd_mask = 1, .fd_atol = 1e-6, .fd_rtol = 1e-6, .prep = off_kink}

static const ot_row rows[] = {
    ACT("relu", f_relu), ACT("sigmoid", f_sigmoid), ACT("tanh", f_tanh), ACT("softrelu", f_softrelu),
    ACT("softsign", f_softsign),
};

Test(activation, table, .init = setup, .fini = teardown) {
    int runs = ot_run(pack, rows, OT_LEN(rows));
    cr_assert_geq(runs, 5 * 3, "%d runs", runs);
}

Test(activation, backward_matches_derivative, .init = setup, .fini = teardown) {
    for (int t = 0; t < 5; t++) for (int dti = 0; dti < 2; dti++) {
        int32_t dt = dti ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        char kw[64]; snprintf(kw, sizeof kw, "act_type=%s", names[t]);
        fh_node n; int64_t d[2] = {37, 41};
        tu_node(&n, pack, "Activation", kw, dt, 2, d, 1);
        int64_t cnt = 37 * 41;
        uint64_t r = 9 + (uint64_t)t;
        tu_fill(n.in[0], dt, cnt, &r, -4, 4);
        tu_fill(n.out_grad[0], dt, cnt, &r, -1, 1);
        double *dx = malloc(sizeof(double) * (size_t)cnt);
        for (int64_t i = 0; i < cnt; i++) dx[i] = df(t, tu_get(n.in[0], dt, i)) * tu_get(n.out_grad[0], dt, i);
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        cr_assert_eq(fh_node_backward(&n, NULL), 0);
        cr_assert_leq(tu_relerr(n.in_grad[0], dt, dx, cnt), dt == MXP_DTYPE_F32 ? 1e-5 : 1e-10, "%s bwd", names[t]);
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_backward(&n, add), 0);
        for (int64_t i = 0; i < cnt; i++) dx[i] *= 2;
        cr_assert_leq(tu_relerr(n.in_grad[0], dt, dx, cnt), dt == MXP_DTYPE_F32 ? 1e-5 : 1e-10, "%s bwd add", names[t]);
        free(dx);
        fh_node_free(&n);
    }
}
/* float32 relu has its own vector loops: a length split into several
 * parallel chunks with a ragged end, forward write and add, backward write
 * and add, exact against the float64 reference (relu is exact in float). */
Test(activation, relu_f32_chunks_req, .init = setup, .fini = teardown) {
    fh_node n; int64_t d[1] = {70001};
    tu_node(&n, pack, "Activation", "act_type=relu", MXP_DTYPE_F32, 1, d, 1);
    uint64_t r = 21;
    tu_fill(n.in[0], MXP_DTYPE_F32, d[0], &r, -1, 1);
    tu_fill(n.out_grad[0], MXP_DTYPE_F32, d[0], &r, -1, 1);
    int32_t add[1] = {MXP_REQ_ADD};
    cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
    cr_assert_eq(fh_node_forward(&n, 1, add), 0);
    for (int64_t i = 0; i < d[0]; i++) {
        double x = tu_get(n.in[0], MXP_DTYPE_F32, i);
        cr_assert_eq(tu_get(n.out[0], MXP_DTYPE_F32, i), x > 0 ? 2 * x : 0, "fwd [%lld]", (long long)i);
    }
    tu_fill(n.in_grad[0], MXP_DTYPE_F32, d[0], &r, 5, 6);   /* garbage: write replaces */
    cr_assert_eq(fh_node_backward(&n, NULL), 0);
    cr_assert_eq(fh_node_backward(&n, add), 0);
    for (int64_t i = 0; i < d[0]; i++) {
        double y = tu_get(n.out[0], MXP_DTYPE_F32, i), g = tu_get(n.out_grad[0], MXP_DTYPE_F32, i);
        cr_assert_eq(tu_get(n.in_grad[0], MXP_DTYPE_F32, i), y > 0 ? 2 * g : 0, "bwd [%lld]", (long long)i);
    }
    fh_node_free(&n);
}

/* float32 tanh and sigmoid are computed without libm (activation.c): every
 * 4099th float bit pattern over the whole line (both signs, denormals to
 * 1e38, +-inf; NaN must stay NaN), plus the points where the tanh formula
 * switches (|x| = 0.55, 9) and their neighbours, against libm in float64,
 * within 4 units in the last place of the float result (sigmoid values
 * below 1e-37, which the float result rounds to about 0, within 1e-37);
 * then req add doubles each result exactly. */
static double ulps(float got, double ref) {
    float r = (float)ref;
    double ulp = fabs((double)nextafterf(r, INFINITY) - (double)r);
    if (ulp == 0 || !isfinite(ulp)) ulp = 1e-45;
    return fabs((double)got - ref) / ulp;
}

Test(activation, tanh_sigmoid_f32_within_4_ulp, .init = setup, .fini = teardown) {
    enum { N = 1048576 + 32 };
    static float xs[N];
    int64_t cnt = 0;
    for (uint64_t b = 0; b < 0x100000000ull && cnt < N - 32; b += 4099) {
        uint32_t u = (uint32_t)b;
        float v;
        memcpy(&v, &u, sizeof v);
        xs[cnt++] = v;
    }
    const float edges[] = {0.55f, 9.0f, 87.0f, 0.0f, INFINITY};
    for (int k = 0; k < 5; k++) {
        xs[cnt++] = edges[k], xs[cnt++] = -edges[k];
        xs[cnt++] = nextafterf(edges[k], 0), xs[cnt++] = nextafterf(edges[k], INFINITY);
    }
    xs[cnt++] = NAN;
    const char *types[2] = {"act_type=tanh", "act_type=sigmoid"};
    for (int t = 0; t < 2; t++) {
        fh_node n; int64_t d[1] = {cnt};
        tu_node(&n, pack, "Activation", types[t], MXP_DTYPE_F32, 1, d, 1);
        memcpy(n.in[0], xs, (size_t)cnt * sizeof(float));
        cr_assert_eq(fh_node_forward(&n, 1, NULL), 0);
        const float *y = n.out[0];
        for (int64_t i = 0; i < cnt; i++) {
            double x = xs[i];
            if (isnan(x)) {
                cr_assert(isnan(y[i]), "%s(NaN) = %g", types[t], y[i]);
                continue;
            }
            double ref = t == 0 ? tanh(x) : 1 / (1 + exp(-x));
            if (t == 1 && ref < 1e-37) {
                cr_assert_leq(fabs(y[i] - ref), 1e-37, "sigmoid(%g) = %g", x, y[i]);
                continue;
            }
            double e = ulps(y[i], ref);
            cr_assert_leq(e, 4.0, "%s(%.9g) = %.9g, libm %.9g: %.1f ulp", types[t], x, y[i], ref, e);
        }
        static float first[N];
        memcpy(first, y, (size_t)cnt * sizeof(float));
        int32_t add[1] = {MXP_REQ_ADD};
        cr_assert_eq(fh_node_forward(&n, 1, add), 0);
        for (int64_t i = 0; i < cnt; i++)
            if (!isnan(xs[i])) cr_assert_eq(y[i], 2 * first[i], "%s add at x = %g", types[t], (double)xs[i]);
        fh_node_free(&n);
    }
}
