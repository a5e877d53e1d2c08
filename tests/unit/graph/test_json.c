/* test_json.c — MXNet symbol JSON: the two hand-written LeNet+BatchNorm
 * fixtures (current layout, and the pre-0.9 legacy layout with param/attr
 * keys and implicit aux states) load to the same argument / aux / output
 * names; saving reproduces the current-layout fixture exactly (compared as
 * JSON values); round trips are stable; errors name what is wrong. */
#include "graph_test_util.h"

#include <jansson.h>

#include <unistd.h>

static const char *const lenet_args[] = {"data", "conv1_weight", "conv1_bias", "bn1_gamma", "bn1_beta",
                                         "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "softmax_label",
                                         NULL};
static const char *const lenet_aux[] = {"bn1_moving_mean", "bn1_moving_var", NULL};

static mxp_symbol *load(const char *path) {
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_file(path, &s), MXP_OK, "%s", mxp_last_error());
    return s;
}

static void check_lenet(mxp_symbol *s) {
    gt_list_eq(mxp_symbol_list_arguments, s, lenet_args);
    gt_list_eq(mxp_symbol_list_auxiliary_states, s, lenet_aux);
    gt_list_eq(mxp_symbol_list_outputs, s, (const char *const[]){"softmax_output", NULL});
    /* Shapes: conv 5x5x8 on 28x28 -> 24x24, pool -> 12x12, 8*144 = 1152. */
    mxp_shape d = {.ndim = 4, .dims = {64, 1, 28, 28}};
    const char *nm[] = {"data"};
    int na, no, nx, complete;
    mxp_shape *as, *os, *xs;
    cr_assert_eq(mxp_symbol_infer_shape(s, 1, nm, &d, &na, &as, &no, &os, &nx, &xs, &complete), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(complete, 1);
    cr_assert_eq(as[1].ndim, 4);
    cr_assert_eq(as[1].dims[0], 8);
    cr_assert_eq(as[1].dims[1], 1);
    cr_assert_eq(as[1].dims[2], 5);
    cr_assert_eq(as[5].dims[0], 32);
    cr_assert_eq(as[5].dims[1], 1152);
    cr_assert_eq(as[9].ndim, 1);
    cr_assert_eq(as[9].dims[0], 64);
    cr_assert_eq(os[0].dims[0], 64);
    cr_assert_eq(os[0].dims[1], 10);
    cr_assert_eq(nx, 2);
    cr_assert_eq(xs[0].ndim, 1);
    cr_assert_eq(xs[0].dims[0], 8);
    free(as);
    free(os);
    free(xs);
}

Test(json, current_fixture_loads) {
    mxp_symbol *s = load(GT_FIXTURE("lenet_bn.json"));
    check_lenet(s);
    /* Variable attributes survive: __shape__ with an unknown batch dim. */
    mxp_symbol *in = NULL, *d = NULL;
    cr_assert_eq(mxp_symbol_internals(s, &in), MXP_OK);
    cr_assert_eq(mxp_symbol_output_by_name(in, "data", &d), MXP_OK);
    const char *v = NULL;
    cr_assert_eq(mxp_symbol_attr(d, "__shape__", &v), MXP_OK);
    cr_assert_str_eq(v, "(0, 1, 28, 28)");
    mxp_symbol_release(d);
    mxp_symbol_release(in);
    mxp_symbol_release(s);
}

Test(json, legacy_fixture_loads_with_aux_upgrade) {
    mxp_symbol *s = load(GT_FIXTURE("lenet_bn_legacy.json"));
    check_lenet(s);
    /* "attr" merged into attrs. */
    mxp_symbol *in = NULL, *b = NULL;
    cr_assert_eq(mxp_symbol_internals(s, &in), MXP_OK);
    cr_assert_eq(mxp_symbol_output_by_name(in, "fc1_bias", &b), MXP_OK);
    const char *v = NULL;
    cr_assert_eq(mxp_symbol_attr(b, "__wd_mult__", &v), MXP_OK);
    cr_assert_str_eq(v, "0.0");
    /* Saved again, it is in the current layout with aux states as inputs. */
    char *js = NULL;
    cr_assert_eq(mxp_symbol_save_json(s, &js), MXP_OK);
    json_error_t err;
    json_t *root = json_loads(js, 0, &err);
    cr_assert(root);
    json_t *nodes = json_object_get(root, "nodes");
    json_t *bn = NULL;
    for (size_t i = 0; i < json_array_size(nodes); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(nodes, i), "name")), "bn1"))
            bn = json_array_get(nodes, i);
    cr_assert(bn);
    cr_assert_eq(json_array_size(json_object_get(bn, "inputs")), 5);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(json_object_get(root, "attrs"), "mxnet_version"), 1)),
                 10901);
    json_decref(root);
    free(js);
    mxp_symbol_release(b);
    mxp_symbol_release(in);
    mxp_symbol_release(s);
}

Test(json, save_reproduces_the_fixture_and_round_trips) {
    mxp_symbol *s = load(GT_FIXTURE("lenet_bn.json"));
    char *js = NULL, *js2 = NULL;
    cr_assert_eq(mxp_symbol_save_json(s, &js), MXP_OK, "%s", mxp_last_error());
    json_error_t err;
    json_t *want = json_load_file(GT_FIXTURE("lenet_bn.json"), 0, &err), *got = json_loads(js, 0, &err);
    cr_assert(want && got);
    cr_assert(json_equal(want, got), "saved JSON differs from the fixture:\n%s", js);
    json_decref(want);
    json_decref(got);
    mxp_symbol *s2 = NULL;
    cr_assert_eq(mxp_symbol_load_json(js, &s2), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_save_json(s2, &js2), MXP_OK);
    cr_assert_str_eq(js, js2);
    /* Attributes are written sorted. */
    const char *a = strstr(js, "\"kernel\""), *b = strstr(js, "\"num_filter\"");
    cr_assert(a && b && a < b);
    /* Through a file too. */
    char path[] = "/tmp/mxp-sym-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(mxp_symbol_save_file(s2, path), MXP_OK);
    mxp_symbol *s3 = load(path);
    unlink(path);
    check_lenet(s3);
    mxp_symbol_release(s3);
    free(js);
    free(js2);
    mxp_symbol_release(s2);
    mxp_symbol_release(s);
}

Test(json, built_symbol_round_trip_keeps_multi_output_entries) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *bn = gt_op("BatchNorm", "bn", 1, &data, "fix_gamma=False", NULL);
    mxp_symbol *sq = gt_op("elemwise_mul", "sq", 2, (mxp_symbol *[]){bn, bn}, NULL);
    char *js = NULL;
    cr_assert_eq(mxp_symbol_save_json(sq, &js), MXP_OK);
    /* BatchNorm has 3 outputs: node_row_ptr steps by 3 over it. */
    json_error_t err;
    json_t *root = json_loads(js, 0, &err);
    json_t *rp = json_object_get(root, "node_row_ptr");
    size_t n = json_array_size(rp);
    cr_assert_eq(n, 8); /* 6 variables/ops before sq + sq + leading 0 */
    cr_assert_eq(json_integer_value(json_array_get(rp, 6)) - json_integer_value(json_array_get(rp, 5)), 3);
    json_decref(root);
    mxp_symbol *back = NULL;
    cr_assert_eq(mxp_symbol_load_json(js, &back), MXP_OK, "%s", mxp_last_error());
    gt_list_eq(mxp_symbol_list_arguments, back, (const char *const[]){"data", "bn_gamma", "bn_beta", NULL});
    gt_list_eq(mxp_symbol_list_auxiliary_states, back, (const char *const[]){"bn_moving_mean", "bn_moving_var", NULL});
    gt_list_eq(mxp_symbol_list_outputs, back, (const char *const[]){"sq_output", NULL});
    free(js);
    mxp_symbol_release(back);
    mxp_symbol_release(sq);
    mxp_symbol_release(bn);
    mxp_symbol_release(data);
}

Test(json, errors_name_the_cause) {
    mxp_symbol *s = (mxp_symbol *)1;
    const char *unknown = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
                          " {\"op\": \"Frobnicate\", \"name\": \"frob1\", \"inputs\": [[0, 0, 0]]}],"
                          " \"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}";
    cr_assert_eq(mxp_symbol_load_json(unknown, &s), MXP_ENOENT);
    cr_assert_null(s);
    cr_assert(strstr(mxp_last_error(), "frob1") && strstr(mxp_last_error(), "Frobnicate"), "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_load_json("{\"nodes\": [", &s), MXP_EFORMAT);
    cr_assert_eq(mxp_symbol_load_json("{\"nodes\": [], \"heads\": [[3, 0, 0]]}", &s), MXP_EFORMAT);
    const char *bad_in = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
                         " {\"op\": \"Activation\", \"name\": \"a\", \"attrs\": {\"act_type\": \"relu\"},"
                         " \"inputs\": [[0, 0, 0], [0, 0, 0]]}], \"arg_nodes\": [0], \"heads\": [[1, 0, 0]],"
                         " \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";
    cr_assert_eq(mxp_symbol_load_json(bad_in, &s), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "'a'"), "%s", mxp_last_error());
    const char *bad_param = "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
                            " {\"op\": \"Activation\", \"name\": \"a\", \"attrs\": {\"act_type\": \"sigmoidal\"},"
                            " \"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}";
    cr_assert_eq(mxp_symbol_load_json(bad_param, &s), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "act_type"), "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_load_file("/nonexistent/x.json", &s), MXP_EIO);
}
