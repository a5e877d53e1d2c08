/* test_functors.c — the ops-cuda functor headers (plugins/ops-cuda/src/
 * functors/), compiled here by the C compiler exactly as nvcc compiles them
 * into the GPU kernels, against ops-basic's own CPU kernels (a separate
 * implementation) on random float32 data: unary, binary, scalar and
 * reduce families, forward and backward, the optimizer updates, and the
 * Philox generator and Bernoulli mapping of the gpu Dropout against the
 * runtime's CPU generator.  Needs no GPU and no nvcc: the
 * headers are plain C when __CUDACC__ is not defined. */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "fake_host.h"

#include "../../../plugins/ops-cuda/src/functors/ew_binary.h"
#include "../../../plugins/ops-cuda/src/functors/ew_scalar.h"
#include "../../../plugins/ops-cuda/src/functors/ew_unary.h"
#include "../../../plugins/ops-cuda/src/functors/optim.h"
#include "../../../plugins/ops-cuda/src/functors/philox.h"
#include "resource/resource.h"
#include "../../../plugins/ops-cuda/src/functors/reduce.h"

static fh_pack *P;

static void setup(void) {
    P = fh_load("ops-basic");
    cr_assert(P, "load ops-basic: %s", fh_error());
}
static void teardown(void) { fh_unload(P); }

TestSuite(functors, .init = setup, .fini = teardown);

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define N 96

/* float32 results of two implementations: a few ulp apart at most. */
static int close_f(double got, double want) {
    if (isnan(got) && isnan(want)) return 1;
    if (isinf(got) || isinf(want)) return got == want;
    return fabs(got - want) <= 1e-6 + 2e-6 * fabs(want);
}

static fh_arr rand_arr(uint64_t seed, double lo, double hi) {
    fh_arr a = fh_arr_new(MXP_DTYPE_F32, 2, SHAPE(8, 12));
    fh_fill_uniform(&a, seed, lo, hi);
    return a;
}

static fh_arr forward1(const char *op, const char *const *kw, int n_in, const fh_arr *in) {
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    int rc = fh_forward(P, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    cr_assert_eq(rc, 0, "%s forward: %s", op, fh_error());
    for (int i = 1; i < n_out; i++) fh_arr_free(&out[i]);
    return out[0];
}

static void backward(const char *op, const char *const *kw, int n_in, const fh_arr *in, const fh_arr *out,
                     const fh_arr *og, fh_arr *grads) {
    for (int i = 0; i < n_in; i++) grads[i] = fh_arr_new(MXP_DTYPE_F32, in[i].ndim, in[i].shape);
    int rc = fh_backward(P, op, kw, n_in, in, 1, out, og, grads, NULL);
    cr_assert_eq(rc, 0, "%s backward: %s", op, fh_error());
}

typedef struct ucase {
    const char *name;
    int op;
    double lo, hi;
} ucase;

static const ucase k_unary[] = {
    {"abs", CU_U_ABS, -2, 2},          {"sign", CU_U_SIGN, -2, 2},
    {"negative", CU_U_NEGATIVE, -2, 2}, {"reciprocal", CU_U_RECIPROCAL, 0.5, 2},
    {"square", CU_U_SQUARE, -2, 2},     {"sqrt", CU_U_SQRT, 0.5, 3},
    {"rsqrt", CU_U_RSQRT, 0.5, 3},      {"exp", CU_U_EXP, -2, 2},
    {"log", CU_U_LOG, 0.5, 3},          {"log1p", CU_U_LOG1P, -0.5, 2},
    {"expm1", CU_U_EXPM1, -2, 2},       {"sin", CU_U_SIN, -3, 3},
    {"cos", CU_U_COS, -3, 3},           {"tanh", CU_U_TANH, -2, 2},
    {"sigmoid", CU_U_SIGMOID, -3, 3},   {"relu", CU_U_RELU, -2, 2},
    {"softsign", CU_U_SOFTSIGN, -2, 2}, {"erf", CU_U_ERF, -2, 2},
    {"floor", CU_U_FLOOR, -3, 3},       {"ceil", CU_U_CEIL, -3, 3},
    {"round", CU_U_ROUND, -3, 3},
};

Test(functors, unary_forward_and_gradient_match_ops_basic) {
    cr_assert_eq(sizeof k_unary / sizeof k_unary[0], (size_t)CU_U_COUNT, "every unary op code is tested");
    for (size_t c = 0; c < sizeof k_unary / sizeof k_unary[0]; c++) {
        const ucase *u = &k_unary[c];
        fh_arr x = rand_arr(10 + c, u->lo, u->hi);
        fh_arr y = forward1(u->name, NULL, 1, &x);
        for (int64_t i = 0; i < fh_numel(&x); i++)
            cr_assert(close_f(cu_unary_fwd(u->op, (float)fh_get(&x, i)), fh_get(&y, i)), "%s(%.9g): functor %.9g, ops-basic %.9g",
                      u->name, fh_get(&x, i), cu_unary_fwd(u->op, (float)fh_get(&x, i)), fh_get(&y, i));
        fh_arr og = rand_arr(100 + c, -1, 1);
        fh_arr g;
        backward(u->name, NULL, 1, &x, &y, &og, &g);
        const fh_arr *v = cu_unary_grad_uses_output(u->op) ? &y : &x;
        for (int64_t i = 0; i < fh_numel(&x); i++) {
            float want = (float)fh_get(&g, i);
            float got = cu_unary_grad_is_zero(u->op) ? 0.0f
                                                      : cu_unary_bwd(u->op, (float)fh_get(&og, i), (float)fh_get(v, i));
            cr_assert(close_f(got, want), "%s' at %.9g: functor %.9g, ops-basic %.9g", u->name, fh_get(&x, i), got, want);
        }
        fh_arr_free(&x); fh_arr_free(&y); fh_arr_free(&og); fh_arr_free(&g);
    }
}

typedef struct bcase {
    const char *name;
    int op;
    double lo, hi;
} bcase;

static const bcase k_binary[] = {
    {"elemwise_add", CU_B_ADD, -2, 2},   {"elemwise_sub", CU_B_SUB, -2, 2},
    {"elemwise_mul", CU_B_MUL, -2, 2},   {"elemwise_div", CU_B_DIV, 0.5, 2},
    {"_power", CU_B_POWER, 0.5, 2},      {"_maximum", CU_B_MAXIMUM, -2, 2},
    {"_minimum", CU_B_MINIMUM, -2, 2},   {"_equal", CU_B_EQUAL, -2, 2},
    {"_not_equal", CU_B_NOT_EQUAL, -2, 2}, {"_greater", CU_B_GREATER, -2, 2},
    {"_greater_equal", CU_B_GREATER_EQUAL, -2, 2}, {"_lesser", CU_B_LESSER, -2, 2},
    {"_lesser_equal", CU_B_LESSER_EQUAL, -2, 2},
};

Test(functors, binary_forward_and_gradients_match_ops_basic) {
    cr_assert_eq(sizeof k_binary / sizeof k_binary[0], (size_t)CU_B_COUNT, "every binary op code is tested");
    for (size_t c = 0; c < sizeof k_binary / sizeof k_binary[0]; c++) {
        const bcase *b = &k_binary[c];
        fh_arr in[2] = {rand_arr(20 + c, b->lo, b->hi), rand_arr(40 + c, b->lo, b->hi)};
        /* Ties matter for comparisons and max/min: make every 4th pair equal. */
        for (int64_t i = 0; i < fh_numel(&in[0]); i += 4) fh_set(&in[1], i, fh_get(&in[0], i));
        fh_arr y = forward1(b->name, NULL, 2, in);
        for (int64_t i = 0; i < fh_numel(&y); i++) {
            float got = cu_binary_fwd(b->op, (float)fh_get(&in[0], i), (float)fh_get(&in[1], i));
            cr_assert(close_f(got, fh_get(&y, i)), "%s[%lld]: functor %.9g, ops-basic %.9g", b->name, (long long)i, got,
                      fh_get(&y, i));
        }
        fh_arr og = rand_arr(60 + c, -1, 1);
        fh_arr g[2];
        backward(b->name, NULL, 2, in, &y, &og, g);
        for (int64_t i = 0; i < fh_numel(&y); i++) {
            float dy = (float)fh_get(&og, i), av = (float)fh_get(&in[0], i), bv = (float)fh_get(&in[1], i);
            float gl = cu_binary_grad_is_zero(b->op) ? 0.0f : cu_binary_bwd_lhs(b->op, dy, av, bv);
            float gr = cu_binary_grad_is_zero(b->op) ? 0.0f : cu_binary_bwd_rhs(b->op, dy, av, bv);
            cr_assert(close_f(gl, fh_get(&g[0], i)), "%s d/dlhs[%lld]: functor %.9g, ops-basic %.9g", b->name,
                      (long long)i, gl, fh_get(&g[0], i));
            cr_assert(close_f(gr, fh_get(&g[1], i)), "%s d/drhs[%lld]: functor %.9g, ops-basic %.9g", b->name,
                      (long long)i, gr, fh_get(&g[1], i));
        }
        fh_arr_free(&in[0]); fh_arr_free(&in[1]); fh_arr_free(&y); fh_arr_free(&og);
        fh_arr_free(&g[0]); fh_arr_free(&g[1]);
    }
}

typedef struct scase {
    const char *name;
    int op;
    const char *scalar;
    double lo, hi;
} scase;

static const scase k_scalar[] = {
    {"_plus_scalar", CU_S_PLUS, "0.75", -2, 2},      {"_minus_scalar", CU_S_MINUS, "0.75", -2, 2},
    {"_rminus_scalar", CU_S_RMINUS, "0.75", -2, 2},  {"_mul_scalar", CU_S_MUL, "-1.5", -2, 2},
    {"_div_scalar", CU_S_DIV, "1.5", -2, 2},         {"_rdiv_scalar", CU_S_RDIV, "1.5", 0.5, 2},
    {"_power_scalar", CU_S_POWER, "1.7", 0.5, 2},    {"_rpower_scalar", CU_S_RPOWER, "1.7", -2, 2},
    {"_maximum_scalar", CU_S_MAXIMUM, "0.25", -1, 1}, {"_minimum_scalar", CU_S_MINIMUM, "0.25", -1, 1},
    {"_equal_scalar", CU_S_EQUAL, "0.5", -1, 1},     {"_not_equal_scalar", CU_S_NOT_EQUAL, "0.5", -1, 1},
    {"_greater_scalar", CU_S_GREATER, "0.5", -1, 1}, {"_greater_equal_scalar", CU_S_GREATER_EQUAL, "0.5", -1, 1},
    {"_lesser_scalar", CU_S_LESSER, "0.5", -1, 1},   {"_lesser_equal_scalar", CU_S_LESSER_EQUAL, "0.5", -1, 1},
    {"smooth_l1", CU_S_SMOOTH_L1, "1.5", -1.5, 1.5},
};

Test(functors, scalar_forward_and_gradient_match_ops_basic) {
    cr_assert_eq(sizeof k_scalar / sizeof k_scalar[0], (size_t)CU_S_COUNT, "every scalar op code is tested");
    for (size_t c = 0; c < sizeof k_scalar / sizeof k_scalar[0]; c++) {
        const scase *sc = &k_scalar[c];
        const char *const kw[] = {"scalar", sc->scalar, NULL};
        float s = strtof(sc->scalar, NULL);
        fh_arr x = rand_arr(80 + c, sc->lo, sc->hi);
        /* Hit the ties of comparisons and max/min exactly. */
        for (int64_t i = 0; i < fh_numel(&x); i += 5) fh_set(&x, i, s);
        fh_arr y = forward1(sc->name, kw, 1, &x);
        for (int64_t i = 0; i < fh_numel(&x); i++) {
            float got = cu_scalar_fwd(sc->op, (float)fh_get(&x, i), s);
            cr_assert(close_f(got, fh_get(&y, i)), "%s(%.9g, %s): functor %.9g, ops-basic %.9g", sc->name, fh_get(&x, i),
                      sc->scalar, got, fh_get(&y, i));
        }
        fh_arr og = rand_arr(120 + c, -1, 1);
        fh_arr g;
        backward(sc->name, kw, 1, &x, &y, &og, &g);
        const fh_arr *v = cu_scalar_grad_uses_output(sc->op) ? &y : &x;
        for (int64_t i = 0; i < fh_numel(&x); i++) {
            float got = cu_scalar_grad_is_zero(sc->op) ? 0.0f
                                                        : cu_scalar_bwd(sc->op, (float)fh_get(&og, i), (float)fh_get(v, i), s);
            cr_assert(close_f(got, fh_get(&g, i)), "%s' at %.9g: functor %.9g, ops-basic %.9g", sc->name, fh_get(&x, i),
                      got, fh_get(&g, i));
        }
        fh_arr_free(&x); fh_arr_free(&y); fh_arr_free(&og); fh_arr_free(&g);
    }
}

typedef struct rcase {
    const char *name;
    const char *ord;
    int op;
} rcase;

static const rcase k_reduce[] = {
    {"sum", NULL, CU_R_SUM}, {"mean", NULL, CU_R_MEAN}, {"max", NULL, CU_R_MAX}, {"min", NULL, CU_R_MIN},
    {"prod", NULL, CU_R_PROD}, {"norm", "1", CU_R_NORM1}, {"norm", "2", CU_R_NORM2},
};

/* Rows of an 8x12 array reduced over axis 1 with the functors, against
 * ops-basic's reduce with axis=1; then the gradient per element. */
Test(functors, reduce_forward_and_gradient_match_ops_basic) {
    cr_assert_eq(sizeof k_reduce / sizeof k_reduce[0], (size_t)CU_R_COUNT, "every reduce op code is tested");
    for (size_t c = 0; c < sizeof k_reduce / sizeof k_reduce[0]; c++) {
        const rcase *r = &k_reduce[c];
        const char *const kw_axis[] = {"axis", "1", NULL};
        const char *const kw_ord[] = {"axis", "1", "ord", r->ord, NULL};
        const char *const *kw = r->ord ? kw_ord : kw_axis;
        fh_arr x = rand_arr(140 + c, 0.5, 1.5);
        if (r->op == CU_R_MAX || r->op == CU_R_MIN) fh_set(&x, 13, fh_get(&x, 14)); /* a tie in row 1 */
        if (r->op == CU_R_NORM1) fh_set(&x, 3, -fh_get(&x, 3));
        fh_arr y = forward1(r->name, kw, 1, &x);
        cr_assert_eq(fh_numel(&y), 8);
        for (int row = 0; row < 8; row++) {
            double acc = cu_reduce_init(r->op);
            for (int k = 0; k < 12; k++) acc = cu_reduce_step(r->op, acc, (float)fh_get(&x, row * 12 + k));
            float got = cu_reduce_final(r->op, acc, 12);
            cr_assert(close_f(got, fh_get(&y, row)), "%s%s row %d: functor %.9g, ops-basic %.9g", r->name,
                      r->ord ? r->ord : "", row, got, fh_get(&y, row));
        }
        fh_arr og = fh_arr_new(MXP_DTYPE_F32, 1, SHAPE(8));
        fh_fill_uniform(&og, 160 + c, -1, 1);
        fh_arr g;
        backward(r->name, kw, 1, &x, &y, &og, &g);
        for (int64_t i = 0; i < 96; i++) {
            int row = (int)(i / 12);
            float got = cu_reduce_bwd(r->op, (float)fh_get(&og, row), (float)fh_get(&x, i), (float)fh_get(&y, row), 12);
            cr_assert(close_f(got, fh_get(&g, i)), "%s%s' [%lld]: functor %.9g, ops-basic %.9g", r->name,
                      r->ord ? r->ord : "", (long long)i, got, fh_get(&g, i));
        }
        fh_arr_free(&x); fh_arr_free(&y); fh_arr_free(&og); fh_arr_free(&g);
    }
}

/* The merge step the GPU's tree reduction uses agrees with a serial pass. */
Test(functors, reduce_merge_of_halves_equals_serial) {
    float v[10] = {0.5f, 1.25f, -3.0f, 2.0f, NAN, 0.75f, 1.5f, -0.25f, 4.0f, 1.0f};
    for (int op = 0; op < CU_R_COUNT; op++) {
        for (int with_nan = 0; with_nan < 2; with_nan++) {
            double serial = cu_reduce_init(op), lo = cu_reduce_init(op), hi = cu_reduce_init(op);
            for (int i = 0; i < 10; i++) {
                if (i == 4 && !with_nan) continue;
                serial = cu_reduce_step(op, serial, v[i]);
                if (i < 5) lo = cu_reduce_step(op, lo, v[i]);
                else hi = cu_reduce_step(op, hi, v[i]);
            }
            double merged = cu_reduce_merge(op, lo, hi);
            cr_assert(close_f(merged, serial) || (isnan(merged) && isnan(serial)), "op %d nan %d: merged %.9g serial %.9g",
                      op, with_nan, merged, serial);
        }
    }
}

/* Optimizer updates: new weight and states from functors/optim.h against
 * ops-basic's sgd_update, sgd_mom_update, adam_update, rmsprop_update
 * (states are updated in place by the op). */
Test(functors, optimizer_updates_match_ops_basic) {
    static const struct {
        const char *op;
        int n_in;
        const char *kw[16];
        cu_opt_hp hp;
    } k_opts[] = {
        {"sgd_update", 2, {"lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "0.3", NULL},
         {0.1f, 0.01f, 0.5f, 0.3f, 0, 0, 0}},
        {"sgd_mom_update", 3, {"lr", "0.1", "momentum", "0.9", "wd", "0.01", NULL}, {0.1f, 0.01f, 1.0f, -1.0f, 0.9f, 0, 0}},
        {"adam_update", 4, {"lr", "0.01", "beta1", "0.8", "beta2", "0.9", "epsilon", "1e-6", "wd", "0.001", NULL},
         {0.01f, 0.001f, 1.0f, -1.0f, 0.8f, 0.9f, 1e-6f}},
        {"rmsprop_update", 3, {"lr", "0.01", "gamma1", "0.9", "clip_weights", "0.5", "epsilon", "1e-8", NULL},
         {0.01f, 0.0f, 1.0f, -1.0f, 0.9f, 1e-8f, 0.5f}},
    };
    for (size_t c = 0; c < sizeof k_opts / sizeof k_opts[0]; c++) {
        fh_arr in[4], init[4];
        for (int i = 0; i < k_opts[c].n_in; i++) {
            in[i] = rand_arr(200 + c * 8 + (size_t)i, i >= 2 ? 0.0 : -1.0, 1.0);
            init[i] = fh_arr_clone(&in[i]);
        }
        fh_arr y = forward1(k_opts[c].op, k_opts[c].kw, k_opts[c].n_in, in);
        const cu_opt_hp *h = &k_opts[c].hp;
        for (int64_t i = 0; i < N; i++) {
            float w = (float)fh_get(&init[0], i), g = (float)fh_get(&init[1], i), nw, s1 = 0, s2 = 0;
            switch (c) {
            case 0: nw = cu_sgd_w(h, w, g); break;
            case 1: s1 = cu_sgd_mom_m(h, (float)fh_get(&init[2], i), w, g); nw = w + s1; break;
            case 2:
                s1 = cu_adam_mean(h, (float)fh_get(&init[2], i), w, g);
                s2 = cu_adam_var(h, (float)fh_get(&init[3], i), w, g);
                nw = cu_adam_w(h, w, s1, s2);
                break;
            default: s1 = cu_rms_n(h, (float)fh_get(&init[2], i), w, g); nw = cu_rms_w(h, w, g, s1); break;
            }
            cr_assert(close_f(nw, fh_get(&y, i)), "%s weight[%lld]: functor %.9g, ops-basic %.9g", k_opts[c].op,
                      (long long)i, nw, fh_get(&y, i));
            if (k_opts[c].n_in > 2)
                cr_assert(close_f(s1, fh_get(&in[2], i)), "%s state 2 [%lld]: functor %.9g, ops-basic %.9g",
                          k_opts[c].op, (long long)i, s1, fh_get(&in[2], i));
            if (k_opts[c].n_in > 3)
                cr_assert(close_f(s2, fh_get(&in[3], i)), "%s state 3 [%lld]: functor %.9g, ops-basic %.9g",
                          k_opts[c].op, (long long)i, s2, fh_get(&in[3], i));
        }
        for (int i = 0; i < k_opts[c].n_in; i++) {
            fh_arr_free(&in[i]);
            fh_arr_free(&init[i]);
        }
        fh_arr_free(&y);
    }
}

/* The device's Philox functor gives the CPU generator's numbers for the same
 * stream (runtime/src/resource/philox.c), and the Bernoulli mapping the
 * dropout kernel uses gives the CPU's draws: same seed, same mask. */
Test(functors, philox_and_bernoulli_match_the_cpu_generator) {
    mxp_rng_stream s = {{0x12345678u, 0x9abcdef0u}, (1ull << 32) - 3, 4096}; /* counter crosses 2^32 */
    uint64_t key = (uint64_t)s.key[0] | (uint64_t)s.key[1] << 32;
    uint32_t cpu[1000];
    cr_assert_eq(mxp__rng_u32(&s, 0, 1000, cpu), MXP_OK);
    for (uint64_t i = 0; i < 1000; i++)
        cr_assert_eq(cu_philox_value(key, s.counter, i), cpu[i], "value %llu: functor %u, cpu %u", (unsigned long long)i,
                     cu_philox_value(key, s.counter, i), cpu[i]);
    float keep = (float)(1.0 - 0.3), draws[1000];
    cr_assert_eq(mxp__rng_bernoulli_f32(&s, 0, 1000, keep, draws), MXP_OK);
    int ones = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        int got = cu_bernoulli(cu_philox_value(key, s.counter, i), (double)keep * 4294967296.0);
        cr_assert_eq((float)got, draws[i], "draw %llu", (unsigned long long)i);
        ones += got;
    }
    cr_assert(ones > 600 && ones < 800, "keep rate %d / 1000 for p 0.7", ones);
}
