/* test_legacy_rules.c — MXNet's JSON upgrade and shape rules on fixtures
 * written here to look like what MXNet writes (tests/data/symbol/):
 *   - legacy_hidden_keys_0800.json: a 0.8 file ("param"/"attr", no
 *     mxnet_version, implicit BatchNorm aux states) whose hidden keys
 *     (ctx_group, lr_mult, wd_mult, force_mirroring, mirror_stage and
 *     {input}_lr_mult forms) must become __key__ attributes, and whose
 *     tuples carry Python 2 "L" suffixes, in params and in __shape__;
 *   - exported_fixed_size_10600.json: a 1.6 export whose data __shape__ is
 *     the export size, run at another size (the given shape wins), with a
 *     SoftmaxOutput over 4-D data and multi_output=False (label = data
 *     shape without its last axis, as MXNet 1.9.1 infers).
 * Expected values follow legacy_json_util.cc's rule, worked out by hand. */
#include "graph_test_util.h"

static mxp_symbol *load(const char *path) {
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_file(path, &s), MXP_OK, "%s", mxp_last_error());
    return s;
}

/* Attribute key of the internal output `entry` ("data", "conv1_output"). */
static void expect_attr(mxp_symbol *internals, const char *entry, const char *key, const char *want) {
    mxp_symbol *e = NULL;
    cr_assert_eq(mxp_symbol_output_by_name(internals, entry, &e), MXP_OK, "%s: %s", entry, mxp_last_error());
    const char *v = NULL;
    cr_assert_eq(mxp_symbol_attr(e, key, &v), MXP_OK);
    if (want) cr_expect(v && !strcmp(v, want), "%s.%s = %s, want %s", entry, key, v ? v : "(absent)", want);
    else cr_expect(v == NULL, "%s.%s = %s, want absent", entry, key, v);
    mxp_symbol_release(e);
}

static void infer(mxp_symbol *s, int n, const char *const *names, const mxp_shape *given, mxp_shape **as,
                  mxp_shape **os, int *complete) {
    int na, no;
    cr_assert_eq(mxp_symbol_infer_shape(s, n, names, given, &na, as, &no, os, NULL, NULL, complete), MXP_OK, "%s",
                 mxp_last_error());
}

static void expect_shape(const mxp_shape *got, int nd, const int64_t *want, const char *what) {
    cr_assert_eq(got->ndim, nd, "%s: ndim %d, want %d", what, got->ndim, nd);
    for (int i = 0; i < nd; i++)
        cr_expect_eq(got->dims[i], want[i], "%s: dim %d is %lld, want %lld", what, i, (long long)got->dims[i],
                     (long long)want[i]);
}

Test(legacy_rules, hidden_keys_become_attributes_as_mxnet_upgrades_them) {
    mxp_symbol *s = load(GT_FIXTURE("legacy_hidden_keys_0800.json"));
    mxp_symbol *in = NULL;
    cr_assert_eq(mxp_symbol_internals(s, &in), MXP_OK);
    /* Bare keys on a variable and on op nodes. */
    expect_attr(in, "data", "__ctx_group__", "stage1");
    expect_attr(in, "data", "__lr_mult__", "0.2");
    expect_attr(in, "data", "lr_mult", NULL);
    expect_attr(in, "conv1_output", "__ctx_group__", "stage1");
    expect_attr(in, "conv1_output", "__wd_mult__", "0.3");
    expect_attr(in, "conv1_output", "__mirror_stage__", "True");
    expect_attr(in, "relu1_output", "__force_mirroring__", "True");
    expect_attr(in, "fc1_output", "__lr_mult__", "0.01");
    /* {input}_key on an op node lands on that input's variable; the same
     * form on a variable itself stays a plain attribute. */
    expect_attr(in, "conv1_weight", "__lr_mult__", "2.5");
    expect_attr(in, "conv1_weight", "__wd_mult__", "0.3");
    expect_attr(in, "conv1_weight", "weight_lr_mult", "1.2");
    expect_attr(in, "conv1_bias", "__wd_mult__", "0.0");
    expect_attr(in, "conv1_bias", "__ctx_group__", "stage1");
    expect_attr(in, "bn1_gamma", "__lr_mult__", "0.0");
    expect_attr(in, "conv1_output", "weight_lr_mult", NULL);
    /* Pre-0.9 aux states were added. */
    int n;
    const char *const *names;
    cr_assert_eq(mxp_symbol_list_auxiliary_states(s, &n, &names), MXP_OK);
    gt_names_eq(n, names, (const char *const[]){"bn1_moving_mean", "bn1_moving_var", NULL});
    mxp_symbol_release(in);
    mxp_symbol_release(s);
}

Test(legacy_rules, python2_long_tuples_in_shape_attributes_and_params) {
    mxp_symbol *s = load(GT_FIXTURE("legacy_hidden_keys_0800.json"));
    mxp_shape *as, *os;
    int complete;
    /* Nothing given: data's __shape__ "(16L, 3L, 12L, 12L)" drives it all;
     * kernel "(3L, 3L)" pad "(1L, 1L)" keep 12x12, pooling halves it. */
    infer(s, 0, NULL, NULL, &as, &os, &complete);
    cr_assert_eq(complete, 1);
    expect_shape(&as[0], 4, (int64_t[]){16, 3, 12, 12}, "data");
    expect_shape(&as[1], 4, (int64_t[]){8, 3, 3, 3}, "conv1_weight");
    expect_shape(&as[5], 2, (int64_t[]){10, 8 * 6 * 6}, "fc1_weight");
    expect_shape(&os[0], 2, (int64_t[]){16, 10}, "softmax_output");
    mxp_free(as);
    mxp_free(os);
    mxp_symbol_release(s);
}

Test(legacy_rules, a_given_shape_wins_over_shape_attribute) {
    mxp_symbol *s = load(GT_FIXTURE("legacy_hidden_keys_0800.json"));
    mxp_shape *as, *os;
    int complete;
    const char *nm[] = {"data"};
    mxp_shape d = {.ndim = 4, .dims = {2, 3, 10, 10}};
    infer(s, 1, nm, &d, &as, &os, &complete);
    cr_assert_eq(complete, 1);
    expect_shape(&as[0], 4, (int64_t[]){2, 3, 10, 10}, "data");
    expect_shape(&as[5], 2, (int64_t[]){10, 8 * 5 * 5}, "fc1_weight");
    expect_shape(&as[7], 1, (int64_t[]){2}, "softmax_label");
    mxp_free(as);
    mxp_free(os);
    mxp_symbol_release(s);
}

Test(legacy_rules, exported_detector_runs_at_another_size_with_4d_softmax_label) {
    mxp_symbol *s = load(GT_FIXTURE("exported_fixed_size_10600.json"));
    mxp_shape *as, *os;
    int complete;
    const char *nm[] = {"data"};
    mxp_shape d = {.ndim = 4, .dims = {1, 3, 48, 40}};
    infer(s, 1, nm, &d, &as, &os, &complete);
    cr_assert_eq(complete, 1);
    expect_shape(&as[0], 4, (int64_t[]){1, 3, 48, 40}, "data");
    expect_shape(&as[3], 3, (int64_t[]){1, 4, 48}, "cls_label");
    expect_shape(&os[0], 4, (int64_t[]){1, 4, 48, 40}, "cls_prob_output");
    mxp_free(as);
    mxp_free(os);
    /* Without a given shape the export size applies. */
    infer(s, 0, NULL, NULL, &as, &os, &complete);
    cr_assert_eq(complete, 1);
    expect_shape(&as[3], 3, (int64_t[]){16, 4, 64}, "cls_label");
    mxp_free(as);
    mxp_free(os);
    mxp_symbol_release(s);
}

Test(legacy_rules, errors_name_the_key_and_the_node) {
    /* {input}_lr_mult whose input is no variable: MXNet fails re-parsing. */
    const char *js =
        "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
        " {\"op\": \"Activation\", \"name\": \"a\", \"param\": {\"act_type\": \"relu\"}, \"inputs\": [[0, 0]]},"
        " {\"op\": \"Activation\", \"name\": \"b\", \"param\": {\"act_type\": \"relu\"},"
        "  \"attr\": {\"data_lr_mult\": \"2\"}, \"inputs\": [[1, 0]]}], \"heads\": [[2, 0]]}";
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_json(js, &s), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "'b'") && strstr(mxp_last_error(), "data_lr_mult"), "%s", mxp_last_error());
    /* A malformed __shape__ is named. */
    const char *js2 = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"attrs\": {\"__shape__\": \"(2L, 3L\"},"
                      " \"inputs\": []}, {\"op\": \"relu\", \"name\": \"r\", \"inputs\": [[0, 0, 0]]}],"
                      " \"heads\": [[1, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";
    cr_assert_eq(mxp_symbol_load_json(js2, &s), MXP_OK, "%s", mxp_last_error());
    int complete;
    cr_assert_eq(mxp_symbol_infer_shape(s, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &complete), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "'x'") && strstr(mxp_last_error(), "(2L, 3L"), "%s", mxp_last_error());
    mxp_symbol_release(s);
    /* Files of the current version are not upgraded: lr_mult stays a
     * parameter, which the op does not have. */
    const char *js3 = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
                      " {\"op\": \"Activation\", \"name\": \"a\", \"attrs\": {\"act_type\": \"relu\", \"lr_mult\": \"2\"},"
                      " \"inputs\": [[0, 0, 0]]}], \"heads\": [[1, 0, 0]],"
                      " \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";
    cr_assert_neq(mxp_symbol_load_json(js3, &s), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "lr_mult"), "%s", mxp_last_error());
}
