/* test_impl_choice.c — choosing implementations per node and by preference
 * list (issue 11 §3), with ops-nn's Convolution (gemm, direct, winograd;
 * winograd takes 3x3 stride-1 kernels only):
 *   - "winograd,auto" runs winograd on a 3x3 layer and the best other impl
 *     on a 5x5 layer of the same net, where "winograd" alone fails;
 *   - a node attribute __impl__ in symbol JSON and mxp_executor_set_impl
 *     choose one node's impl; set_impl takes effect at the next forward,
 *     never between a forward and its backward;
 *   - misspelled names are refused up front with the valid names
 *     (mxp_op_policy_check, mxp_registry_check_policies, __impl__);
 *   - every choice computes the same values (compared with the op's auto
 *     choice on the same inputs). */
#include "../op/op_test_util.h"

#include "executor/executor.h"
#include "plugin/plugin_impl.h" /* mxp__registry_bump */

static void setup(void) {
    opx_setup();
    unsetenv("MXP_IMPL_Convolution");
    mxp_op_set_impl("Convolution", NULL);
}
static void teardown(void) {
    unsetenv("MXP_IMPL_Convolution");
    mxp_op_set_impl("Convolution", NULL);
    opx_teardown();
}
TestSuite(impl_choice, .init = setup, .fini = teardown);

/* data -> c3 (3x3, pad 1) -> c5 (5x5, pad 2); attrs of c3/c5 injected. */
static mxp_symbol *two_convs(const char *c3_extra, const char *c5_extra) {
    char json[4096];
    snprintf(json, sizeof json,
             "{\"nodes\": ["
             "{\"op\": \"null\", \"name\": \"data\", \"inputs\": []},"
             "{\"op\": \"null\", \"name\": \"c3_weight\", \"inputs\": []},"
             "{\"op\": \"null\", \"name\": \"c3_bias\", \"inputs\": []},"
             "{\"op\": \"Convolution\", \"name\": \"c3\", \"attrs\": {\"kernel\": \"(3, 3)\", \"pad\": \"(1, 1)\","
             " \"num_filter\": \"4\"%s}, \"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
             "{\"op\": \"null\", \"name\": \"c5_weight\", \"inputs\": []},"
             "{\"op\": \"null\", \"name\": \"c5_bias\", \"inputs\": []},"
             "{\"op\": \"Convolution\", \"name\": \"c5\", \"attrs\": {\"kernel\": \"(5, 5)\", \"pad\": \"(2, 2)\","
             " \"num_filter\": \"4\"%s}, \"inputs\": [[3, 0, 0], [4, 0, 0], [5, 0, 0]]}"
             "], \"arg_nodes\": [0, 1, 2, 4, 5], \"heads\": [[6, 0, 0]]}",
             c3_extra ? c3_extra : "", c5_extra ? c5_extra : "");
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_json(json, &s), MXP_OK, "%s", mxp_last_error());
    return s;
}

static mxp_executor *bind_filled(mxp_symbol *s) {
    const char *names[] = {"data"};
    mxp_shape shapes[1] = {{.ndim = 4, .dims = {2, 3, 8, 8}}};
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_simple_bind(s, opx_cpu, 1, names, shapes, MXP_REQ_WRITE, 1, names, &ex), MXP_OK, "%s",
                 mxp_last_error());
    int n;
    mxp_ndarray *const *args;
    cr_assert_eq(mxp_executor_args(ex, &n, &args), MXP_OK);
    for (int i = 0; i < n; i++) {
        int64_t len = mxp_ndarray_size(args[i]);
        double *v = malloc(sizeof(double) * (size_t)len);
        float *f = malloc(sizeof(float) * (size_t)len);
        opx_fill(v, len, 10 + (uint64_t)i, -1, 1);
        for (int64_t k = 0; k < len; k++) f[k] = (float)v[k];
        cr_assert_eq(mxp_ndarray_sync_copy_from(args[i], f, sizeof(float) * (size_t)len), MXP_OK);
        free(v);
        free(f);
    }
    return ex;
}

static const char *impl_of(mxp_executor *ex, const char *node) {
    return mxp__node_impl_name(mxp__executor_node(ex, node));
}

static float *output(mxp_executor *ex, int64_t *len) {
    int n;
    mxp_ndarray *const *outs;
    cr_assert_eq(mxp_executor_outputs(ex, &n, &outs), MXP_OK);
    *len = mxp_ndarray_size(outs[0]);
    float *f = malloc(sizeof(float) * (size_t)*len);
    cr_assert_eq(mxp_ndarray_sync_copy_to(outs[0], f, sizeof(float) * (size_t)*len), MXP_OK, "%s", mxp_last_error());
    return f;
}

static void expect_close(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) cr_assert_float_eq(a[i], b[i], 1e-3, "[%lld] %g vs %g", (long long)i, a[i], b[i]);
}

Test(impl_choice, preference_list_uses_winograd_where_it_applies) {
    mxp_symbol *s = two_convs(NULL, NULL);
    mxp_executor *ex = bind_filled(s);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    int64_t n;
    float *ref = output(ex, &n);
    /* winograd alone cannot run the 5x5 layer. */
    setenv("MXP_IMPL_Convolution", "winograd", 1);
    mxp__registry_bump();
    cr_expect_neq(mxp_executor_forward(ex, 0), MXP_OK);
    cr_expect(strstr(mxp_last_error(), "c5"), "%s", mxp_last_error());
    /* "winograd,auto": winograd on c3, the best other impl on c5. */
    setenv("MXP_IMPL_Convolution", "winograd,auto", 1);
    mxp__registry_bump();
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(impl_of(ex, "c3"), "winograd");
    cr_expect_str_neq(impl_of(ex, "c5"), "winograd");
    float *got = output(ex, &n);
    expect_close(got, ref, n);
    free(got);
    free(ref);
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}

Test(impl_choice, node_attribute_and_executor_set_impl) {
    mxp_symbol *s = two_convs(", \"__impl__\": \"direct\"", NULL);
    mxp_executor *ex = bind_filled(s);
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(impl_of(ex, "c3"), "direct", "__impl__ in the JSON chooses c3's impl");
    const char *c5_auto = impl_of(ex, "c5");
    cr_assert(c5_auto);
    int64_t n;
    float *ref = output(ex, &n);
    /* Between a forward and its backward the switch waits. */
    cr_assert_eq(mxp_executor_set_impl(ex, "c5", "direct"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(impl_of(ex, "c5"), c5_auto, "no switch between forward and backward");
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(impl_of(ex, "c5"), "direct");
    cr_expect_str_eq(impl_of(ex, "c3"), "direct");
    float *got = output(ex, &n);
    expect_close(got, ref, n);
    free(got);
    /* NULL: back to the op's policy. */
    cr_assert_eq(mxp_executor_set_impl(ex, "c5", NULL), MXP_OK);
    cr_assert_eq(mxp_executor_forward(ex, 0), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(impl_of(ex, "c5"), c5_auto);
    /* Mistakes. */
    cr_expect_eq(mxp_executor_set_impl(ex, "c5", "winogard"), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "winogard") && strstr(mxp_last_error(), "valid: "), "%s", mxp_last_error());
    cr_expect_eq(mxp_executor_set_impl(ex, "c7", "direct"), MXP_ENOENT);
    free(ref);
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}

Test(impl_choice, misspellings_are_refused_with_the_valid_names) {
    cr_expect_eq(mxp_op_policy_check("Convolution", "winograd,auto"), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(mxp_op_policy_check("Convolution", "direct"), MXP_OK);
    cr_expect_eq(mxp_op_policy_check("Convolution", "winogard,auto"), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "'winogard'") && strstr(mxp_last_error(), "gemm"), "%s", mxp_last_error());
    cr_expect_eq(mxp_op_policy_check("Convolution", "auto,gemm"), MXP_EINVAL);
    cr_expect_eq(mxp_op_set_impl("Convolution", "gem"), MXP_EINVAL);
    setenv("MXP_IMPL_Convolution", "gemmm", 1);
    cr_expect_eq(mxp_registry_check_policies(), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "MXP_IMPL_Convolution") && strstr(mxp_last_error(), "gemmm"), "%s",
              mxp_last_error());
    unsetenv("MXP_IMPL_Convolution");
    setenv("MXP_IMPL_Convolutoin", "gemm", 1);
    cr_expect_eq(mxp_registry_check_policies(), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "Convolutoin"), "%s", mxp_last_error());
    unsetenv("MXP_IMPL_Convolutoin");
    cr_expect_eq(mxp_registry_check_policies(), MXP_OK, "%s", mxp_last_error());
    /* A misspelled __impl__ fails at bind, naming the node's op. */
    mxp_symbol *s = two_convs(", \"__impl__\": \"drect\"", NULL);
    const char *names[] = {"data"};
    mxp_shape shapes[1] = {{.ndim = 4, .dims = {2, 3, 8, 8}}};
    mxp_executor *ex = NULL;
    cr_expect_neq(mxp_executor_simple_bind(s, opx_cpu, 1, names, shapes, MXP_REQ_WRITE, 1, names, &ex), MXP_OK);
    cr_expect(strstr(mxp_last_error(), "__impl__") && strstr(mxp_last_error(), "drect"), "%s", mxp_last_error());
    mxp_symbol_release(s);
    /* An unknown op names where ops come from. */
    cr_expect_eq(mxp_symbol_load_json("{\"nodes\": [{\"op\": \"null\", \"name\": \"d\", \"inputs\": []}, {\"op\": "
                                      "\"NoSuchOp\", \"name\": \"x\", \"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0], "
                                      "\"heads\": [[1, 0, 0]]}", &s), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "NoSuchOp") && strstr(mxp_last_error(), "MXP_PLUGIN_PATH"), "%s",
              mxp_last_error());
}

/* The runtime counts each impl's calls (mxp_op_impl_stats): two nodes on
 * "direct", three forwards and one backward. */
static int impl_index(const mxp_op *op, const char *name) {
    for (int k = 0; k < mxp_op_impl_count(op); k++)
        if (!strcmp(mxp_op_impl_name(op, k), name) && !strcmp(mxp_op_impl_device(op, k), "cpu")) return k;
    return -1;
}

Test(impl_choice, per_impl_call_counts) {
    mxp_symbol *s = two_convs(", \"__impl__\": \"direct\"", ", \"__impl__\": \"direct\"");
    mxp_executor *ex = bind_filled(s);
    const mxp_op *op = mxp_op_find("Convolution");
    int k = impl_index(op, "direct");
    cr_assert_geq(k, 0);
    uint64_t f0, b0, f1, b1;
    double fm, bm;
    cr_assert_eq(mxp_op_impl_stats(op, k, &f0, &b0, &fm, &bm), MXP_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(mxp_executor_forward(ex, i == 2), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(ex, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_op_impl_stats(op, k, &f1, &b1, &fm, &bm), MXP_OK);
    cr_expect_eq(f1 - f0, 6, "forward calls %llu", (unsigned long long)(f1 - f0));
    cr_expect_eq(b1 - b0, 2, "backward calls %llu", (unsigned long long)(b1 - b0));
    cr_expect(fm > 0 && bm > 0, "times %g, %g ms", fm, bm);
    cr_expect_eq(mxp_op_impl_stats(op, 999, &f1, &b1, &fm, &bm), MXP_EINVAL);
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}
