/* test_symbol.c — symbol construction: variables, op symbols validated
 * against the schema, compose by position and by name, auto-named
 * variables as MXNet names them ({node}_{arg}, aux states included),
 * list_* names, groups, internals, outputs by name, attributes, copies. */
#include "graph_test_util.h"

static const char *const *names_of(int (*fn)(mxp_symbol *, int *, const char *const **), mxp_symbol *s, int *n) {
    const char *const *out = NULL;
    cr_assert_eq(fn(s, n, &out), MXP_OK, "%s", mxp_last_error());
    return out;
}

static mxp_symbol *mlp(void) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc1 = gt_op("FullyConnected", "fc1", 1, &data, "num_hidden=16", NULL);
    mxp_symbol *act = gt_op("Activation", "relu1", 1, &fc1, "act_type=relu", NULL);
    mxp_symbol *fc2 = gt_op("FullyConnected", "fc2", 1, &act, "num_hidden=4", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc2, NULL);
    mxp_symbol_release(data);
    mxp_symbol_release(fc1);
    mxp_symbol_release(act);
    mxp_symbol_release(fc2);
    return sm;
}

Test(symbol, mlp_names_as_mxnet) {
    mxp_symbol *sm = mlp();
    int n;
    const char *const *a = names_of(mxp_symbol_list_arguments, sm, &n);
    gt_names_eq(n, a, (const char *const[]){"data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
                                            "softmax_label", NULL});
    const char *const *o = names_of(mxp_symbol_list_outputs, sm, &n);
    gt_names_eq(n, o, (const char *const[]){"softmax_output", NULL});
    const char *const *x = names_of(mxp_symbol_list_auxiliary_states, sm, &n);
    cr_assert_eq(n, 0);
    (void)x;
    cr_assert_str_eq(mxp_symbol_name(sm), "softmax");
    mxp_symbol_release(sm);
}

Test(symbol, batchnorm_aux_states_are_inputs) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *bn = gt_op("BatchNorm", "bn", 1, &data, "fix_gamma=False", NULL);
    int n;
    const char *const *a = names_of(mxp_symbol_list_arguments, bn, &n);
    gt_names_eq(n, a, (const char *const[]){"data", "bn_gamma", "bn_beta", NULL});
    gt_list_eq(mxp_symbol_list_auxiliary_states, bn, (const char *const[]){"bn_moving_mean", "bn_moving_var", NULL});
    /* One visible output; the hidden mean/var are not listed. */
    gt_list_eq(mxp_symbol_list_outputs, bn, (const char *const[]){"bn_output", NULL});
    cr_assert_eq(mxp_symbol_num_outputs(bn), 1);
    mxp_symbol_release(bn);
    mxp_symbol_release(data);
}

Test(symbol, compose_by_name_and_auto_variables) {
    mxp_symbol *x = gt_var("x"), *w = gt_var("w");
    mxp_symbol *fc = NULL;
    const char *k[] = {"num_hidden"}, *v[] = {"3"};
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc", 1, k, v, &fc), MXP_OK, "%s", mxp_last_error());
    mxp_symbol *args[] = {w, x};
    const char *an[] = {"weight", "data"};
    cr_assert_eq(mxp_symbol_compose(fc, NULL, 2, an, args), MXP_OK, "%s", mxp_last_error());
    gt_list_eq(mxp_symbol_list_arguments, fc, (const char *const[]){"x", "w", "fc_bias", NULL});
    /* Composing again is an error (not atomic any more, no variable named so). */
    mxp_symbol *y = gt_var("y");
    const char *bad[] = {"nonexistent"};
    cr_assert_eq(mxp_symbol_compose(fc, NULL, 1, bad, &y), MXP_OK); /* no such variable: nothing replaced */
    gt_list_eq(mxp_symbol_list_arguments, fc, (const char *const[]){"x", "w", "fc_bias", NULL});
    /* Unknown input name on an atomic symbol. */
    mxp_symbol *fc2 = NULL;
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc2", 1, k, v, &fc2), MXP_OK);
    cr_assert_eq(mxp_symbol_compose(fc2, NULL, 1, bad, &y), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "nonexistent") && strstr(mxp_last_error(), "fc2"), "%s", mxp_last_error());
    /* Too many positional arguments. */
    mxp_symbol *many[] = {x, w, y, y};
    cr_assert_eq(mxp_symbol_compose(fc2, NULL, 4, NULL, many), MXP_EINVAL);
    mxp_symbol_release(fc2);
    mxp_symbol_release(fc);
    mxp_symbol_release(x);
    mxp_symbol_release(w);
    mxp_symbol_release(y);
}

Test(symbol, compose_graph_replaces_variables_in_a_copy) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc", 1, &data, "num_hidden=2", NULL);
    mxp_symbol *z = gt_var("z");
    mxp_symbol *act = gt_op("Activation", "act", 1, &z, "act_type=tanh", NULL);
    mxp_symbol *net = mxp_symbol_retain(fc);
    mxp_symbol *c = NULL;
    cr_assert_eq(mxp_symbol_copy(net, &c), MXP_OK);
    const char *an[] = {"data"};
    cr_assert_eq(mxp_symbol_compose(c, NULL, 1, an, &act), MXP_OK, "%s", mxp_last_error());
    gt_list_eq(mxp_symbol_list_arguments, c, (const char *const[]){"z", "fc_weight", "fc_bias", NULL});
    /* The original is untouched. */
    gt_list_eq(mxp_symbol_list_arguments, fc, (const char *const[]){"data", "fc_weight", "fc_bias", NULL});
    mxp_symbol_release(c);
    mxp_symbol_release(net);
    mxp_symbol_release(fc);
    mxp_symbol_release(act);
    mxp_symbol_release(z);
    mxp_symbol_release(data);
}

Test(symbol, schema_validation_and_unknown_op) {
    mxp_symbol *s = (mxp_symbol *)1;
    const char *k[] = {"num_hiden"}, *v[] = {"3"};
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc", 1, k, v, &s), MXP_EINVAL);
    cr_assert_null(s);
    cr_assert(strstr(mxp_last_error(), "num_hiden") && strstr(mxp_last_error(), "FullyConnected"), "%s",
              mxp_last_error());
    const char *k2[] = {"num_hidden"}, *v2[] = {"many"};
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc", 1, k2, v2, &s), MXP_EINVAL);
    cr_assert_eq(mxp_symbol_create("NoSuchOp", "x", 0, NULL, NULL, &s), MXP_ENOENT);
    cr_assert(strstr(mxp_last_error(), "NoSuchOp"), "%s", mxp_last_error());
    /* Missing required parameter. */
    cr_assert_neq(mxp_symbol_create("FullyConnected", "fc", 0, NULL, NULL, &s), MXP_OK);
    mxp_symbol_release(NULL);
}

Test(symbol, auto_names_and_uncomposed_use) {
    const char *k[] = {"act_type"}, *v[] = {"relu"};
    mxp_symbol *a = NULL, *b = NULL;
    cr_assert_eq(mxp_symbol_create("Activation", NULL, 1, k, v, &a), MXP_OK);
    cr_assert_eq(mxp_symbol_create("Activation", NULL, 1, k, v, &b), MXP_OK);
    const char *na = mxp_symbol_name(a), *nb = mxp_symbol_name(b);
    cr_assert(!strncmp(na, "activation", 10) && !strncmp(nb, "activation", 10), "%s %s", na, nb);
    cr_assert_str_neq(na, nb);
    /* Never composed: its input becomes "{node}_data". */
    int n;
    const char *const *args = names_of(mxp_symbol_list_arguments, a, &n);
    char want[128];
    snprintf(want, sizeof want, "%s_data", na);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(args[0], want);
    mxp_symbol_release(a);
    mxp_symbol_release(b);
}

Test(symbol, group_internals_outputs_by_name) {
    mxp_symbol *sm = mlp();
    mxp_symbol *data = gt_var("extra");
    mxp_symbol *parts[] = {sm, data};
    mxp_symbol *g = NULL;
    cr_assert_eq(mxp_symbol_group(2, parts, &g), MXP_OK);
    gt_list_eq(mxp_symbol_list_outputs, g, (const char *const[]){"softmax_output", "extra", NULL});
    cr_assert_null(mxp_symbol_name(g));
    mxp_symbol *in = NULL;
    cr_assert_eq(mxp_symbol_internals(sm, &in), MXP_OK);
    gt_list_eq(mxp_symbol_list_outputs, in, (const char *const[]){"data", "fc1_weight", "fc1_bias", "fc1_output", "relu1_output", "fc2_weight",
                                      "fc2_bias", "fc2_output", "softmax_label", "softmax_output", NULL});
    mxp_symbol *r = NULL;
    cr_assert_eq(mxp_symbol_output_by_name(in, "relu1_output", &r), MXP_OK);
    gt_list_eq(mxp_symbol_list_arguments, r, (const char *const[]){"data", "fc1_weight", "fc1_bias", NULL});
    mxp_symbol *o = NULL;
    cr_assert_eq(mxp_symbol_output(g, 1, &o), MXP_OK);
    cr_assert_str_eq(mxp_symbol_name(o), "extra");
    mxp_symbol_release(o);
    cr_assert_eq(mxp_symbol_output(g, 2, &o), MXP_EINVAL);
    cr_assert_null(o);
    cr_assert_eq(mxp_symbol_output_by_name(in, "nope", &o), MXP_ENOENT);
    mxp_symbol_release(o);
    mxp_symbol_release(r);
    mxp_symbol_release(in);
    mxp_symbol_release(g);
    mxp_symbol_release(data);
    mxp_symbol_release(sm);
}

Test(symbol, attributes) {
    mxp_symbol *w = gt_var("w");
    cr_assert_eq(mxp_symbol_set_attr(w, "__lr_mult__", "0.5"), MXP_OK);
    cr_assert_eq(mxp_symbol_set_attr(w, "__shape__", "(0, 3)"), MXP_OK);
    cr_assert_eq(mxp_symbol_set_attr(w, "__lr_mult__", "2"), MXP_OK);
    const char *v = NULL;
    cr_assert_eq(mxp_symbol_attr(w, "__lr_mult__", &v), MXP_OK);
    cr_assert_str_eq(v, "2");
    cr_assert_eq(mxp_symbol_attr(w, "__wd_mult__", &v), MXP_OK);
    cr_assert_null(v);
    cr_assert_eq(mxp_symbol_set_attr(w, "lr_mult", "1"), MXP_EINVAL);
    /* Attributes travel with the node into composed graphs. */
    mxp_symbol *fc = NULL;
    const char *k[] = {"num_hidden", "__init__"}, *vv[] = {"2", "[\"zero\", {}]"};
    cr_assert_eq(mxp_symbol_create("FullyConnected", "fc", 2, k, vv, &fc), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_attr(fc, "__init__", &v), MXP_OK);
    cr_assert_str_eq(v, "[\"zero\", {}]");
    cr_assert_eq(mxp_symbol_attr(fc, "num_hidden", &v), MXP_OK);
    cr_assert_str_eq(v, "2");
    mxp_symbol_release(fc);
    mxp_symbol_release(w);
}
