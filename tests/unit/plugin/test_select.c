/* test_select.c — implementation choice: auto (rank, supports refusal,
 * ties), fixed names, and the precedence API > env > user config > auto;
 * SimpleOp broadcast shape inference through the expanded definition. */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

static char *g_dir;

static void setup(void) {
    g_dir = tu_tmpdir();
    char *m = tu_psel_manifest(g_dir);
    setenv("MXP_MANIFEST", m, 1);
    free(m);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    unsetenv("MXP_IMPL_psel_scale");
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
}
static void teardown(void) {
    mxp_registry_shutdown();
    tu_rmrf(g_dir);
    free(g_dir);
}
TestSuite(select, .init = setup, .fini = teardown);

/* Choose for psel_scale with n elements and factor. */
static const char *choose(int64_t n, const char *factor, int *rc_out) {
    struct mxp_op *op = mxp__registry_find_op("psel_scale");
    cr_assert(op);
    const mxp_op_def *def;
    cr_assert_eq(mxp__op_ensure_def(op, &def), MXP_OK, "%s", mxp_last_error());
    void *params;
    const char *k[] = {"factor"}, *v[] = {factor};
    cr_assert_eq(mxp__op_params_new(def, k, v, 1, &params), MXP_OK, "%s", mxp_last_error());
    mxp_shape in = {1, 0, {n}}, out = in;
    int32_t dt = MXP_DTYPE_F32;
    mxp_select_query q = {params, {MXP_DEV_CPU, 0}, "cpu", 1, 1, 0, 0, &in, &out, NULL, &dt, &dt, NULL, NULL, NULL};
    mxp_impl_ref *ref = NULL;
    int rc = mxp__select_impl(op, &q, &ref, NULL);
    mxp__op_params_free(def, params);
    if (rc_out) *rc_out = rc;
    if (rc) return NULL;
    static char name[64];
    snprintf(name, sizeof name, "%s", ref->impl->impl_name);
    mxp__impl_ref_release(ref);
    return name;
}

Test(select, auto_highest_rank_that_accepts) {
    cr_expect_str_eq(choose(10, "2", NULL), "fast");
    cr_expect_str_eq(choose(1000, "2", NULL), "mid");  /* fast refuses > 100 elements */
    cr_expect_str_eq(choose(1000, "0", NULL), "slow"); /* mid refuses factor 0 */
    const char *pol, *src;
    cr_assert_eq(mxp_op_policy("psel_scale", &pol, &src), MXP_OK);
    cr_expect_str_eq(pol, "auto");
    cr_expect_str_eq(src, "default");
}

/* MXP_SUPPORTS_FALLBACK (ABI 1.3): auto takes an impl that answers it
 * only when none accepts outright (the highest-ranked fallback then); a
 * policy naming it takes it; explain says which answered what. */
Test(select, auto_takes_a_fallback_only_when_none_accepts_outright) {
    cr_expect_str_eq(choose(80, "2", NULL), "mid");    /* fast: fallback above 50; mid accepts */
    cr_expect_str_eq(choose(80, "0", NULL), "slow");   /* mid refuses factor 0; slow accepts (even) */
    cr_expect_str_eq(choose(81, "0", NULL), "fast");   /* fast and slow both fallbacks: the higher rank */
    cr_expect_str_eq(choose(1001, "0", NULL), "slow"); /* fast and mid refuse; slow's fallback runs it */
    cr_expect_str_eq(choose(10, "2", NULL), "fast");
    cr_assert_eq(mxp_op_set_impl("psel_scale", "fast"), MXP_OK);
    cr_expect_str_eq(choose(80, "2", NULL), "fast");   /* named: a fallback runs */
    cr_assert_eq(mxp_op_set_impl("psel_scale", "auto"), MXP_OK);
    char *rep = NULL;
    const char *shapes[] = {"data=81"};
    const char *k[] = {"factor"}, *v[] = {"0"};
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, k, v, 1, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "accepts as a fallback (more than 50 elements)"), "%s", rep);
    cr_expect(strstr(rep, "CHOSEN (the highest-ranked fallback"), "%s", rep);
    free(rep);
}

Test(select, fixed_impl_and_refusal_reason) {
    cr_assert_eq(mxp_op_set_impl("psel_scale", "fast"), MXP_OK);
    int rc;
    cr_expect_null(choose(1000, "2", &rc));
    cr_expect_eq(rc, MXP_EUNSUPPORTED);
    cr_expect(strstr(mxp_last_error(), "more than 100 elements"), "%s", mxp_last_error());
    cr_expect_eq(mxp_op_set_impl("psel_scale", "nonesuch"), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "'slow'"), "%s", mxp_last_error());
}

Test(select, precedence_api_env_config_auto) {
    uint64_t g0 = mxp_registry_generation();
    cr_assert_eq(mxp_config_set_impl("psel_scale", "slow"), MXP_OK, "%s", mxp_last_error());
    cr_expect_gt(mxp_registry_generation(), g0);
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s/mxplug/config.yaml", getenv("XDG_CONFIG_HOME") ? getenv("XDG_CONFIG_HOME") : "");
    const char *pol, *src;
    if (getenv("XDG_CONFIG_HOME")) {
        cr_expect_eq(access(cfg, F_OK), 0, "config not written at %s", cfg);
        mxp_op_policy("psel_scale", &pol, &src);
        cr_expect_str_eq(pol, "slow");
        cr_expect_str_eq(src, "config");
        cr_expect_str_eq(choose(10, "2", NULL), "slow");
    }
    setenv("MXP_IMPL_psel_scale", "mid", 1);
    mxp_op_policy("psel_scale", &pol, &src);
    cr_expect_str_eq(pol, "mid");
    cr_expect_str_eq(src, "env");
    cr_expect_str_eq(choose(10, "2", NULL), "mid");
    cr_assert_eq(mxp_op_set_impl("psel_scale_alias", "fast"), MXP_OK);
    mxp_op_policy("psel_scale", &pol, &src);
    cr_expect_str_eq(pol, "fast");
    cr_expect_str_eq(src, "api");
    cr_expect_str_eq(choose(10, "2", NULL), "fast");
    cr_assert_eq(mxp_op_set_impl("psel_scale", NULL), MXP_OK);
    cr_expect_str_eq(choose(10, "2", NULL), "mid");
    unsetenv("MXP_IMPL_psel_scale");
    cr_assert_eq(mxp_config_set_impl("psel_scale", NULL), MXP_OK);
    mxp_op_policy("psel_scale", &pol, &src);
    cr_expect_str_eq(src, "default");
    cr_expect_str_eq(choose(10, "2", NULL), "fast");
}

/* tune itself is tested in test_tune.c; here: it chooses among the
 * candidates that accept, and explain says so. */
Test(select, tune_chooses_an_accepting_impl_and_explains) {
    char cache[1024];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    setenv("XDG_CACHE_HOME", cache, 1);
    cr_assert_eq(mxp_op_set_impl("psel_scale", "tune"), MXP_OK);
    const char *got = choose(1000, "2", NULL);
    cr_expect(!strcmp(got, "mid") || !strcmp(got, "slow"), "%s ('fast' refuses 1000 elements)", got);
    char *rep = NULL;
    const char *shapes[] = {"data=1000"};
    cr_assert_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, NULL, NULL, 0, &rep), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(rep, "more than 100 elements"), "%s", rep);
    cr_expect(strstr(rep, "CHOSEN (tune: "), "%s", rep);
    free(rep);
    unsetenv("XDG_CACHE_HOME");
}

/* explain's shapes are parsed strictly (issue 12 §6, found by
 * tests/fuzz/fuzz_cli_args via `mxplug info --why --shape`): a negative
 * dimension, a 9th one, junk after a number or a size that overflows was
 * dropped or cut silently and explained a different configuration. */
Test(select, explain_refuses_malformed_shapes) {
    const char *bad[][2] = {{"data=4,-3", "integers >= 0"},
                            {"data=1,2,3,4,5,6,7,8,9", "more than 8 dimensions"},
                            {"data=2,x", "integers >= 0"},
                            {"data=2,", "integers >= 0"},
                            {"data=4611686018427387904,4", "data=4611686018427387904,4"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *rep = NULL;
        const char *shapes[] = {bad[i][0]};
        cr_expect_eq(mxp_op_explain("psel_scale", "cpu", shapes, 1, NULL, NULL, 0, &rep), MXP_EINVAL, "%s", bad[i][0]);
        cr_expect(strstr(mxp_last_error(), bad[i][1]), "%s: %s", bad[i][0], mxp_last_error());
        free(rep);
    }
}

Test(select, simple_broadcast_shape_inference) {
    mxp_shape a = {3, 0, {4, 1, 5}}, b = {2, 0, {3, 1}}, o;
    cr_assert_eq(mxp__simple_broadcast_shape(&a, &b, &o), MXP_OK);
    cr_expect_eq(o.ndim, 3);
    cr_expect_eq(o.dims[0], 4);
    cr_expect_eq(o.dims[1], 3);
    cr_expect_eq(o.dims[2], 5);
    mxp_shape c = {1, 0, {4}}, d = {2, 0, {2, 3}};
    cr_expect_eq(mxp__simple_broadcast_shape(&c, &d, &o), MXP_ESHAPE);
    cr_expect(strstr(mxp_last_error(), "(4,)") && strstr(mxp_last_error(), "(2, 3)"), "%s", mxp_last_error());
    /* Through the expanded definition of a loaded SimpleOp. */
    struct mxp_op *op = mxp__registry_find_op("psel_badd");
    const mxp_op_def *def;
    cr_assert_eq(mxp__op_ensure_def(op, &def), MXP_OK, "%s", mxp_last_error());
    mxp_shape in[2] = {{2, 0, {2, 1}}, {1, 0, {3}}}, out[1] = {{-1, 0, {0}}};
    mxp_infer_shape_args ia = {MXP_HEADER(mxp_infer_shape_args), NULL, def->user_data, 2, 1, 0, 0, in, out, NULL};
    cr_assert_eq(def->infer_shape(&ia), MXP_OK, "%s", mxp_last_error());
    cr_expect_eq(out[0].ndim, 2);
    cr_expect_eq(out[0].dims[0], 2);
    cr_expect_eq(out[0].dims[1], 3);
    in[1].ndim = -1;
    cr_expect_eq(def->infer_shape(&ia), MXP_EINCOMPLETE);
}

/* Broadcast forward/backward adapters on raw tensors. */
Test(select, simple_broadcast_forward_backward) {
    struct mxp_op *op = mxp__registry_find_op("psel_badd");
    const mxp_op_def *def;
    cr_assert_eq(mxp__op_ensure_def(op, &def), MXP_OK);
    mxp_impl_ref *ref;
    cr_assert_eq(mxp__impl_ref_acquire(op->impls[0], &ref), MXP_OK, "%s", mxp_last_error());
    float l[2] = {1, 2}, r[3] = {10, 20, 30}, o[6], og[6] = {1, 2, 3, 4, 5, 6}, gl[2] = {100, 100}, gr[3], ws[12];
    int64_t sl[2] = {2, 1}, sr[1] = {3}, so[2] = {2, 3};
    mxp_tensor t[2] = {{MXP_HEADER(mxp_tensor), l, 0, MXP_DTYPE_F32, 2, sl, NULL, {1, 0}, 0},
                       {MXP_HEADER(mxp_tensor), r, 0, MXP_DTYPE_F32, 1, sr, NULL, {1, 0}, 0}};
    mxp_tensor to = {MXP_HEADER(mxp_tensor), o, 0, MXP_DTYPE_F32, 2, so, NULL, {1, 0}, 0};
    int32_t req = MXP_REQ_WRITE;
    mxp_op_ctx ctx = {.hdr = MXP_HEADER(mxp_op_ctx), .device = {1, 0}, .workspace = ws, .workspace_bytes = sizeof ws};
    mxp_forward_args fa = {MXP_HEADER(mxp_forward_args), &ctx, NULL, NULL, ref->impl->user_data, 2, 1, 0, 0, t, &to, NULL, &req, NULL};
    cr_assert_eq(ref->impl->forward(&fa), MXP_OK, "%s", mxp_last_error());
    float expect[6] = {11, 21, 31, 12, 22, 32};
    for (int i = 0; i < 6; i++) cr_expect_float_eq(o[i], expect[i], 0);
    mxp_tensor tog = to;
    tog.data = og;
    mxp_tensor ig[2] = {t[0], t[1]};
    ig[0].data = gl;
    ig[1].data = gr;
    int32_t reqs[2] = {MXP_REQ_ADD, MXP_REQ_WRITE};
    mxp_backward_args ba = {MXP_HEADER(mxp_backward_args), &ctx, NULL, NULL, ref->impl->user_data, 2, 1, 0, 0,
                            &tog, t, &to, ig, NULL, reqs, NULL};
    cr_assert_eq(ref->impl->backward(&ba), MXP_OK, "%s", mxp_last_error());
    /* d lhs (2,1): row sums added to 100; d rhs (3): column sums. */
    cr_expect_float_eq(gl[0], 100 + 1 + 2 + 3, 0);
    cr_expect_float_eq(gl[1], 100 + 4 + 5 + 6, 0);
    cr_expect_float_eq(gr[0], 1 + 4, 0);
    cr_expect_float_eq(gr[1], 2 + 5, 0);
    cr_expect_float_eq(gr[2], 3 + 6, 0);
    mxp__impl_ref_release(ref);
}
