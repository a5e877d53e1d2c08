/* test_fit_mults.c — variables' __lr_mult__ / __wd_mult__ reach the
 * optimizer through mxp_module_fit (MXNet's Optimizer(sym=...) rule): a
 * 0.8-style file whose FullyConnected node carries "weight_lr_mult": "0"
 * (upgraded to __lr_mult__ on fc_weight) trains with fc_weight frozen at
 * its initial value while fc_bias moves; and lr 0.5 with __lr_mult__ 0.5 on
 * every parameter ends bit-identical to lr 0.25 without multipliers. */
#include "train_test_util.h"

static const char *const legacy_json =
    "{\"nodes\": ["
    " {\"op\": \"null\", \"param\": {}, \"name\": \"data\", \"inputs\": [], \"backward_source_id\": -1},"
    " {\"op\": \"null\", \"param\": {}, \"name\": \"fc_weight\", \"inputs\": [], \"backward_source_id\": -1},"
    " {\"op\": \"null\", \"param\": {}, \"name\": \"fc_bias\", \"inputs\": [], \"backward_source_id\": -1},"
    " {\"op\": \"FullyConnected\", \"param\": {\"num_hidden\": \"4\", \"no_bias\": \"False\"}, \"name\": \"fc\","
    "  \"inputs\": [[0, 0], [1, 0], [2, 0]], \"backward_source_id\": -1, \"attr\": {\"weight_lr_mult\": \"0\"}},"
    " {\"op\": \"null\", \"param\": {}, \"name\": \"softmax_label\", \"inputs\": [], \"backward_source_id\": -1},"
    " {\"op\": \"SoftmaxOutput\", \"param\": {}, \"name\": \"softmax\", \"inputs\": [[3, 0], [4, 0]],"
    "  \"backward_source_id\": -1}],"
    " \"arg_nodes\": [0, 1, 2, 4], \"heads\": [[5, 0]]}";

static mxp_iter *data_iter(void) {
    int64_t xs[2] = {16, 3}, ys[1] = {16};
    float x[16 * 3], y[16];
    for (int i = 0; i < 16 * 3; i++) x[i] = (float)((i * 37 % 19) - 9) / 9.0f;
    for (int i = 0; i < 16; i++) y[i] = (float)(i % 4);
    mxp_ndarray *xa = trt_f32(xs, 2, x), *ya = trt_f32(ys, 1, y);
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(1, &xa, 1, &ya, 4, 0, 0, MXP_LAST_BATCH_DISCARD, &it), MXP_OK, "%s",
                 mxp_last_error());
    mxp_ndarray_release(xa);
    mxp_ndarray_release(ya);
    return it;
}

/* fc_weight (12) then fc_bias (4) after `epochs` epochs at lr. */
static void train(mxp_symbol *sym, int epochs, const char *lr, float *out) {
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sym, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_iter *it = data_iter();
    const char *k[] = {"learning_rate", "momentum"}, *v[] = {lr, "0.9"};
    mxp_init init = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.num_epoch = epochs;
    o.n_opt_kwargs = 2;
    o.opt_keys = k;
    o.opt_vals = v;
    o.seed = 7;
    o.initializer = &init;
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_module_param(m, "fc_weight"), out, 12 * sizeof *out), MXP_OK);
    cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_module_param(m, "fc_bias"), out + 12, 4 * sizeof *out), MXP_OK);
    mxp_module_free(m);
    mxp_iter_free(it);
}

TestSuite(fit_mults, .init = trt_setup, .fini = trt_teardown);

Test(fit_mults, legacy_weight_lr_mult_zero_freezes_the_weight) {
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_json(legacy_json, &s), MXP_OK, "%s", mxp_last_error());
    float init[16], trained[16];
    train(s, 0, "0.5", init);
    train(s, 2, "0.5", trained);
    cr_expect(!memcmp(init, trained, 12 * sizeof *init), "fc_weight moved despite weight_lr_mult 0");
    cr_expect(memcmp(init + 12, trained + 12, 4 * sizeof *init) != 0, "fc_bias did not move");
    mxp_symbol_release(s);
}

Test(fit_mults, lr_mult_scales_the_learning_rate) {
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_load_json(legacy_json, &s), MXP_OK, "%s", mxp_last_error());
    mxp_symbol *in = NULL, *w = NULL, *b = NULL;
    cr_assert_eq(mxp_symbol_internals(s, &in), MXP_OK);
    cr_assert_eq(mxp_symbol_output_by_name(in, "fc_weight", &w), MXP_OK);
    cr_assert_eq(mxp_symbol_output_by_name(in, "fc_bias", &b), MXP_OK);
    float half[16], quarter[16];
    cr_assert_eq(mxp_symbol_set_attr(w, "__lr_mult__", "1"), MXP_OK);
    train(s, 2, "0.25", quarter);
    cr_assert_eq(mxp_symbol_set_attr(w, "__lr_mult__", "0.5"), MXP_OK);
    cr_assert_eq(mxp_symbol_set_attr(b, "__lr_mult__", "0.5"), MXP_OK);
    train(s, 2, "0.5", half);
    cr_expect(!memcmp(half, quarter, sizeof half), "lr 0.5 x lr_mult 0.5 differs from lr 0.25");
    mxp_symbol_release(w);
    mxp_symbol_release(b);
    mxp_symbol_release(in);
    mxp_symbol_release(s);
}
