/* test_module_load.c — Module use without fit (runtime/src/train/
 * module.c): mxp_module_create's default names (NULL label names with
 * n_label 1 mean {"softmax_label"}, with 0 no label, with 2 an error;
 * observed through the parameter count of the MLP of examples/mlp), and a
 * fresh module that only loads a checkpoint scores and predicts exactly
 * (bit for bit) as the module that trained and saved it.  The data part is
 * skipped when Fashion-MNIST is not installed. */
#include "train_test_util.h"

#define FASHION "/usr/share/datasets/fashion-mnist"
#define MLP_JSON MXP_SOURCE_DIR "/examples/mlp/mlp-symbol.json"

TestSuite(train_module_load, .init = trt_setup, .fini = trt_teardown, .timeout = 600);

static mxp_symbol *mlp_sym(void) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(MLP_JSON, &sym), MXP_OK, "%s", mxp_last_error());
    return sym;
}

static mxp_module *mlp(void) {
    mxp_symbol *sym = mlp_sym();
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sym, 1, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_symbol_release(sym);
    return m;
}

Test(train_module_load, null_label_names_follow_the_count) {
    mxp_symbol *sym = mlp_sym();
    mxp_module *m = NULL;
    /* MLP arguments: data, fc1..fc3 weight+bias (6), softmax_label. */
    cr_assert_eq(mxp_module_create(sym, 1, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_module_num_params(m), 6, "softmax_label must be the label, not a parameter");
    for (int i = 0; i < 6; i++) cr_assert_str_neq(mxp_module_param_name(m, i), "softmax_label");
    mxp_module_free(m);
    m = NULL;
    cr_assert_eq(mxp_module_create(sym, 1, NULL, 0, NULL, &m), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_module_num_params(m), 7, "no label: softmax_label is an ordinary argument");
    cr_assert_str_eq(mxp_module_param_name(m, 6), "softmax_label");
    mxp_module_free(m);
    m = NULL;
    cr_assert_eq(mxp_module_create(sym, 1, NULL, 2, NULL, &m), MXP_EINVAL);
    cr_assert_null(m);
    cr_assert_eq(mxp_module_create(sym, 2, NULL, 1, NULL, &m), MXP_EINVAL);
    cr_assert_eq(mxp_module_create(sym, 1, NULL, -1, NULL, &m), MXP_EINVAL);
    cr_assert_null(m);
    mxp_symbol_release(sym);
}

static mxp_iter *fashion(int train) {
    const char *k[] = {"image", "label", "batch_size", "shuffle", "flat", "silent", "seed", "round_batch"};
    const char *v[] = {train ? FASHION "/train-images-idx3-ubyte.gz" : FASHION "/t10k-images-idx3-ubyte.gz",
                       train ? FASHION "/train-labels-idx1-ubyte.gz" : FASHION "/t10k-labels-idx1-ubyte.gz",
                       "64", train ? "True" : "False", "True", "True", "3", train ? "False" : "True"};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("MNISTIter", 8, k, v, &it), MXP_OK, "%s", mxp_last_error());
    return it;
}

static float *predict(mxp_module *m, mxp_iter *te, size_t *nbytes) {
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    mxp_ndarray *pred = NULL;
    cr_assert_eq(mxp_module_predict(m, te, &pred), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_shape(pred)[0], 10000);
    cr_assert_eq(mxp_ndarray_shape(pred)[1], 10);
    *nbytes = mxp_ndarray_nbytes(pred);
    float *v = trt_get(pred);
    mxp_ndarray_release(pred);
    return v;
}

Test(train_module_load, fresh_module_scores_and_predicts_a_checkpoint) {
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK)) cr_skip_test("Fashion-MNIST not installed");
    char pa[128];
    snprintf(pa, sizeof pa, "%s/a", trt_dir);
    mxp_iter *tr = fashion(1), *te = fashion(0);

    /* Nothing trained or loaded: a clear misuse error, not a crash. */
    mxp_module *b = mlp();
    double acc_b = 0;
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    cr_assert_eq(mxp_module_score(b, te, "acc", &acc_b), MXP_EMISUSE);
    cr_assert(isnan(acc_b));
    cr_assert_neq(mxp_module_load_checkpoint(b, pa, 1, 0), MXP_OK, "no checkpoint written yet");

    /* Train one epoch and checkpoint it (a-0001). */
    mxp_module *a = mlp();
    static const char *ok[] = {"learning_rate", "momentum"}, *ov[] = {"0.05", "0.9"};
    mxp_init x = mxp_init_xavier(MXP_XAVIER_UNIFORM, MXP_XAVIER_AVG, 3.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.num_epoch = 1;
    o.n_opt_kwargs = 2;
    o.opt_keys = ok;
    o.opt_vals = ov;
    o.seed = 7;
    o.initializer = &x;
    o.checkpoint_prefix = pa;
    cr_assert_eq(mxp_module_fit(a, tr, NULL, &o), MXP_OK, "%s", mxp_last_error());
    double acc_a = 0;
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    cr_assert_eq(mxp_module_score(a, te, "acc", &acc_a), MXP_OK, "%s", mxp_last_error());
    cr_assert_geq(acc_a, 0.75, "trained accuracy %.4f", acc_a);
    size_t na = 0, nb = 0;
    float *pa_v = predict(a, te, &na);

    /* The fresh module: load only, then score and predict (twice for
     * predict: the binding is reused and reloaded). */
    cr_assert_eq(mxp_module_load_checkpoint(b, pa, 1, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    cr_assert_eq(mxp_module_score(b, te, "acc", &acc_b), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(acc_b, acc_a, "loaded %.6f vs trained %.6f", acc_b, acc_a);
    for (int rep = 0; rep < 2; rep++) {
        float *pb_v = predict(b, te, &nb);
        cr_assert_eq(nb, na);
        cr_assert_eq(memcmp(pa_v, pb_v, na), 0, "predictions differ from the training module's");
        free(pb_v);
    }
    /* Row sums of the softmax outputs are 1: real values, not zeros. */
    double s = 0;
    for (int j = 0; j < 10; j++) s += pa_v[j];
    cr_assert_float_eq(s, 1.0, 1e-4);
    free(pa_v);
    mxp_module_free(a);
    mxp_module_free(b);
    mxp_iter_free(tr);
    mxp_iter_free(te);
}
