/* test_module.c — the Module (runtime/src/train/module.c) end to end on
 * Fashion-MNIST with the MLP of examples/mlp (784-128-64-10, relu,
 * SoftmaxOutput): one epoch of SGD with momentum, batch 64, fixed seed,
 * reaches >= 80% on the 10k test set (scored with padded batches ignored,
 * and cross-checked against predict); and a run checkpointed after epoch
 * 1 then resumed to epoch 2 ends with parameters bit-identical to an
 * uninterrupted 2-epoch run.  Skipped when the dataset is not installed. */
#include "train_test_util.h"

#define FASHION "/usr/share/datasets/fashion-mnist"
#define MLP_JSON MXP_SOURCE_DIR "/examples/mlp/mlp-symbol.json"

TestSuite(train_module, .init = trt_setup, .fini = trt_teardown, .timeout = 600);

static mxp_iter *fashion(int train, int shuffle) {
    const char *k[] = {"image", "label", "batch_size", "shuffle", "flat", "silent", "seed", "round_batch"};
    const char *v[] = {train ? FASHION "/train-images-idx3-ubyte.gz" : FASHION "/t10k-images-idx3-ubyte.gz",
                       train ? FASHION "/train-labels-idx1-ubyte.gz" : FASHION "/t10k-labels-idx1-ubyte.gz",
                       "64", shuffle ? "True" : "False", "True", "True", "3", train ? "False" : "True"};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("MNISTIter", 8, k, v, &it), MXP_OK, "%s", mxp_last_error());
    return it;
}

static mxp_module *mlp(void) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(MLP_JSON, &sym), MXP_OK, "%s", mxp_last_error());
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sym, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_symbol_release(sym);
    return m;
}

static const char *opt_k[] = {"learning_rate", "momentum", "wd"};
static const char *opt_v[] = {"0.02", "0.9", "0.0001"};

static mxp_fit_opts opts(int begin, int end, const mxp_init *init, const char *prefix) {
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.begin_epoch = begin;
    o.num_epoch = end;
    o.optimizer = "sgd";
    o.n_opt_kwargs = 3;
    o.opt_keys = opt_k;
    o.opt_vals = opt_v;
    o.seed = 42;
    o.initializer = init;
    o.eval_metric = "acc";
    o.checkpoint_prefix = prefix;
    return o;
}

static void epoch_cb(void *user, int epoch, const char *metric, double tv, double vv) {
    (void)user;
    fprintf(stderr, "epoch %d: train %s %.4f, val %.4f\n", epoch, metric, tv, vv);
}

Test(train_module, mlp_one_epoch_fashion_mnist_reaches_80_percent) {
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK)) cr_skip_test("Fashion-MNIST not installed");
    mxp_iter *tr = fashion(1, 1), *te = fashion(0, 0);
    mxp_module *m = mlp();
    mxp_init x = mxp_init_xavier(MXP_XAVIER_UNIFORM, MXP_XAVIER_AVG, 3.0);
    mxp_fit_opts o = opts(0, 1, &x, NULL);
    o.epoch_cb = epoch_cb;
    cr_assert_eq(mxp_module_fit(m, tr, NULL, &o), MXP_OK, "%s", mxp_last_error());
    double acc = 0;
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    cr_assert_eq(mxp_module_score(m, te, "acc", &acc), MXP_OK, "%s", mxp_last_error());
    fprintf(stderr, "test accuracy after 1 epoch: %.4f\n", acc);
    cr_assert_geq(acc, 0.80, "accuracy %.4f", acc);
    /* predict: 10000 rows (pad dropped), argmax agrees with score. */
    cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
    mxp_ndarray *pred = NULL;
    cr_assert_eq(mxp_module_predict(m, te, &pred), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_shape(pred)[0], 10000);
    cr_assert_eq(mxp_ndarray_shape(pred)[1], 10);
    float *p = trt_get(pred);
    /* Labels straight from the file. */
    mxp_iter *lab = fashion(0, 0);
    int correct = 0, row = 0, has = 0;
    while (mxp_iter_next(lab, &has) == MXP_OK && has) {
        float l[64];
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(lab, 0), l, sizeof l), MXP_OK);
        for (int j = 0; j < 64 - mxp_iter_pad(lab); j++, row++) {
            int best = 0;
            for (int c = 1; c < 10; c++)
                if (p[row * 10 + c] > p[row * 10 + best]) best = c;
            correct += best == (int)l[j];
        }
    }
    cr_assert_eq(row, 10000);
    cr_assert_float_eq((double)correct / 10000, acc, 1e-9);
    free(p);
    mxp_ndarray_release(pred);
    mxp_iter_free(lab);
    mxp_module_free(m);
    mxp_iter_free(tr);
    mxp_iter_free(te);
}

Test(train_module, resume_from_epoch_1_is_bit_identical) {
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK)) cr_skip_test("Fashion-MNIST not installed");
    char pa[128], pb[128];
    snprintf(pa, sizeof pa, "%s/a", trt_dir);
    snprintf(pb, sizeof pb, "%s/b", trt_dir);
    mxp_init x = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);

    /* Uninterrupted: epochs 0 and 1, checkpoints a-0001 and a-0002. */
    mxp_iter *tr = fashion(1, 1);
    mxp_module *a = mlp();
    mxp_fit_opts o = opts(0, 2, &x, pa);
    cr_assert_eq(mxp_module_fit(a, tr, NULL, &o), MXP_OK, "%s", mxp_last_error());
    mxp_iter_free(tr);

    /* Interrupted after epoch 1: a new module resumes from a-0001. */
    tr = fashion(1, 1);
    mxp_module *b = mlp();
    cr_assert_eq(mxp_module_load_checkpoint(b, pa, 1, 1), MXP_OK, "%s", mxp_last_error());
    mxp_fit_opts ob = opts(1, 2, &x, pb);
    cr_assert_eq(mxp_module_fit(b, tr, NULL, &ob), MXP_OK, "%s", mxp_last_error());
    mxp_iter_free(tr);

    cr_assert_eq(mxp_module_num_params(a), 6);
    for (int i = 0; i < mxp_module_num_params(a); i++) {
        const char *name = mxp_module_param_name(a, i);
        mxp_ndarray *wa = mxp_module_param(a, name), *wb = mxp_module_param(b, name);
        cr_assert(wa && wb, "%s", name);
        float *va = trt_get(wa), *vb = trt_get(wb);
        cr_assert_eq(memcmp(va, vb, mxp_ndarray_nbytes(wa)), 0, "parameter %s differs after resume", name);
        free(va);
        free(vb);
    }
    /* The epoch-2 checkpoints agree too, and differ from epoch 1's. */
    int na1, nx1, na2, nx2;
    char **an1, **xn1, **an2, **xn2;
    mxp_ndarray **aa1, **xa1, **aa2, **xa2;
    cr_assert_eq(mxp_checkpoint_load_params(pa, 2, &na1, &an1, &aa1, &nx1, &xn1, &xa1), MXP_OK);
    cr_assert_eq(mxp_checkpoint_load_params(pb, 2, &na2, &an2, &aa2, &nx2, &xn2, &xa2), MXP_OK);
    cr_assert_eq(na1, 6);
    cr_assert_eq(na2, 6);
    for (int i = 0; i < na1; i++) {
        cr_assert_str_eq(an1[i], an2[i]);
        float *v1 = trt_get(aa1[i]), *v2 = trt_get(aa2[i]);
        cr_assert_eq(memcmp(v1, v2, mxp_ndarray_nbytes(aa1[i])), 0, "%s", an1[i]);
        free(v1);
        free(v2);
    }
    char sym[256];
    snprintf(sym, sizeof sym, "%s-symbol.json", pa);
    cr_assert_eq(access(sym, R_OK), 0);
    mxp_ndarray_list_free(na1, aa1, an1);
    mxp_ndarray_list_free(nx1, xa1, xn1);
    mxp_ndarray_list_free(na2, aa2, an2);
    mxp_ndarray_list_free(nx2, xa2, xn2);
    mxp_module_free(a);
    mxp_module_free(b);
}
