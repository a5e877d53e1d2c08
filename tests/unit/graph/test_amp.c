/* test_amp.c — mxp_symbol_amp_convert (bfloat16 mixed precision) on LeNet:
 * the cast nodes inserted (names, count, dtypes), arguments unchanged, the
 * input symbol untouched; then both nets bound with the same fp32 weights:
 * the converted one runs Convolution/FullyConnected on bf16 (their bf16
 * impl, proved by making its kernel choice fail), its outputs and fp32
 * weight gradients agree with the fp32 net's within bf16 tolerance. */
#include "../executor/exec_test_util.h"

#define LENET MXP_SOURCE_DIR "/examples/lenet/lenet-symbol.json"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(amp, lenet_casts_and_names) {
    mxp_symbol *s = NULL, *a = NULL;
    cr_assert_eq(mxp_symbol_load_file(LENET, &s), MXP_OK, "%s", mxp_last_error());
    char *before = NULL, *after = NULL, *js = NULL;
    cr_assert_eq(mxp_symbol_save_json(s, &before), MXP_OK);
    cr_assert_eq(mxp_symbol_amp_convert(s, MXP_DTYPE_BF16, 0, NULL, &a), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_save_json(s, &after), MXP_OK);
    cr_assert_str_eq(before, after, "the input symbol changed");
    cr_assert_eq(mxp_symbol_save_json(a, &js), MXP_OK);
    /* 4 low-precision ops x 3 inputs cast to bf16, 4 outputs cast back */
    cr_assert_eq(count(js, "\"amp_cast\""), 16, "%s", js);
    cr_assert_eq(count(js, "\"bfloat16\""), 12);
    cr_assert_eq(count(js, "\"float32\""), 4);
    const char *names[] = {"\"data_bfloat16\"", "\"conv1_weight_bfloat16\"", "\"pool1_output_bfloat16\"",
                           "\"flatten_output_bfloat16\"", "\"conv1_output_float32\"", "\"fc2_output_float32\""};
    for (int i = 0; i < 6; i++) cr_assert(strstr(js, names[i]), "no node %s in %s", names[i], js);
    int na = 0, nb = 0;
    const char *const *la = NULL, *const *lb = NULL;
    cr_assert_eq(mxp_symbol_list_arguments(s, &na, &la), MXP_OK);
    cr_assert_eq(mxp_symbol_list_arguments(a, &nb, &lb), MXP_OK);
    cr_assert_eq(na, nb);
    for (int i = 0; i < na; i++) cr_assert_str_eq(la[i], lb[i]);
    /* a converted JSON loads back (MXNet's amp_cast op) */
    mxp_symbol *r = NULL;
    cr_assert_eq(mxp_symbol_load_json(js, &r), MXP_OK, "%s", mxp_last_error());
    mxp_free(before); mxp_free(after); mxp_free(js);
    mxp_symbol_release(r); mxp_symbol_release(a); mxp_symbol_release(s);
    cr_assert_eq(mxp_symbol_amp_convert(NULL, MXP_DTYPE_BF16, 0, NULL, &a), MXP_EMISUSE);
}

Test(amp, refuses_non_low_precision_target) {
    mxp_symbol *s = NULL, *a = NULL;
    cr_assert_eq(mxp_symbol_load_file(LENET, &s), MXP_OK);
    cr_assert_eq(mxp_symbol_amp_convert(s, MXP_DTYPE_F64, 0, NULL, &a), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "float64"), "%s", mxp_last_error());
    cr_assert_null(a);
    mxp_symbol_release(s);
}

static mxp_executor *bind(mxp_symbol *s) {
    const char *names[2] = {"data", "softmax_label"};
    mxp_shape shapes[2] = {{4, 0, {6, 1, 28, 28}}, {1, 0, {6}}};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(s, et_cpu, 2, names, shapes, MXP_REQ_WRITE, 2, names, &ex), MXP_OK, "%s",
                 mxp_last_error());
    return ex;
}

static double relerr(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) { num += (a[i] - b[i]) * (a[i] - b[i]); den += b[i] * b[i]; }
    return sqrt(num / (den > 0 ? den : 1));
}

Test(amp, lenet_bf16_matches_fp32) {
    mxp_symbol *s = NULL, *a = NULL;
    cr_assert_eq(mxp_symbol_load_file(LENET, &s), MXP_OK);
    cr_assert_eq(mxp_symbol_amp_convert(s, MXP_DTYPE_BF16, 0, NULL, &a), MXP_OK);
    mxp_executor *e32 = bind(s), *e16 = bind(a);
    int n = 0, m = 0;
    mxp_ndarray *const *args32 = NULL, *const *args16 = NULL;
    cr_assert_eq(mxp_executor_args(e32, &n, &args32), MXP_OK);
    cr_assert_eq(mxp_executor_args(e16, &m, &args16), MXP_OK);
    cr_assert_eq(n, m);
    uint64_t seed = 42;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(mxp_ndarray_dtype(args16[i]), MXP_DTYPE_F32, "argument %d is not an fp32 master copy", i);
        int64_t k = mxp_ndarray_size(args32[i]);
        double *v = malloc((size_t)k * sizeof *v), fan = (double)k / mxp_ndarray_shape(args32[i])[0];
        int is_label = i == n - 1;
        for (int64_t j = 0; j < k; j++) v[j] = is_label ? (double)(j % 10) : et_val(&seed) * (i == 0 ? 1.0 : sqrt(3.0 / fan));
        et_set(args32[i], v);
        et_set(args16[i], v);
        free(v);
    }
    for (int t = 0; t < 2; t++) {
        mxp_executor *ex = t ? e16 : e32;
        cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    }
    mxp_ndarray *const *o32, *const *o16, *const *g32, *const *g16;
    int no;
    cr_assert_eq(mxp_executor_outputs(e32, &no, &o32), MXP_OK);
    cr_assert_eq(mxp_executor_outputs(e16, &no, &o16), MXP_OK);
    double *p32 = et_read(o32[0]), *p16 = et_read(o16[0]);
    for (int64_t j = 0; j < mxp_ndarray_size(o32[0]); j++)
        cr_assert(fabs(p32[j] - p16[j]) < 2e-2, "probability %lld: fp32 %g, bf16 %g", (long long)j, p32[j], p16[j]);
    free(p32); free(p16);
    cr_assert_eq(mxp_executor_grads(e32, &n, &g32), MXP_OK);
    cr_assert_eq(mxp_executor_grads(e16, &n, &g16), MXP_OK);
    for (int i = 1; i < n - 1; i++) { /* weights and biases */
        cr_assert_not_null(g16[i]);
        cr_assert_eq(mxp_ndarray_dtype(g16[i]), MXP_DTYPE_F32);
        double *a32 = et_read(g32[i]), *a16 = et_read(g16[i]);
        double e = relerr(a16, a32, mxp_ndarray_size(g32[i]));
        /* bf16 rounding of every activation and data gradient compounds
         * layer by layer (measured: 0.4% at fc2, 4-5% at fc1/conv2, 12% at
         * conv1, where ReLU masks also flip); a wrong gradient is off by ~100% */
        cr_assert_lt(e, i >= n - 3 ? 2e-2 : 0.2, "gradient of argument %d: relative error %g against fp32", i, e);
        free(a32); free(a16);
    }
    /* the bf16 impl is what ran: a bad kernel name makes it fail */
    setenv("MXP_BF16_KERNEL", "avx9000", 1);
    int rc = mxp_executor_forward(e16, 0);
    if (!rc) rc = mxp_executor_wait(e16);
    cr_assert_neq(rc, MXP_OK);
    cr_assert(strstr(mxp_last_error(), "MXP_BF16_KERNEL"), "%s", mxp_last_error());
    unsetenv("MXP_BF16_KERNEL");
    mxp_executor_free(e32); mxp_executor_free(e16);
    mxp_symbol_release(s); mxp_symbol_release(a);
}
