/* test_fit_schedule.c — mxp_fit_opts' learning-rate schedule
 * (MultiFactorScheduler: n_lr_steps / lr_steps / lr_factor) reaches the
 * optimizer: with a step after update 2 and factor 0, the weights stop
 * moving after the second batch, so a 4-batch epoch ends exactly where a
 * 2-batch run without a schedule ends (momentum is 0, so nothing carries
 * over); without the schedule, 4 batches move further.  Tiny FC net on
 * in-memory data (NDArrayIter, no shuffle). */
#include "train_test_util.h"

#include "../graph/graph_test_util.h"

static mxp_iter *data_iter(int n_samples) {
    int64_t xs[2] = {n_samples, 3}, ys[1] = {n_samples};
    float x[64 * 3], y[64];
    for (int i = 0; i < n_samples * 3; i++) x[i] = (float)((i * 37 % 19) - 9) / 9.0f;
    for (int i = 0; i < n_samples; i++) y[i] = (float)(i % 4);
    mxp_ndarray *xa = trt_f32(xs, 2, x), *ya = trt_f32(ys, 1, y);
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(1, &xa, 1, &ya, 4, 0, 0, MXP_LAST_BATCH_DISCARD, &it), MXP_OK, "%s",
                 mxp_last_error());
    mxp_ndarray_release(xa);
    mxp_ndarray_release(ya);
    return it;
}

/* fc weights after one epoch over n_samples (batch 4), with the schedule
 * {step, factor} when step >= 0.  Caller frees. */
static float *train(int n_samples, int64_t step, double factor) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc", 1, &data, "num_hidden=4", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc, NULL);
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sm, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_iter *it = data_iter(n_samples);
    const char *k[] = {"learning_rate", "momentum"}, *v[] = {"0.5", "0"};
    mxp_init init = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.num_epoch = 1;
    o.n_opt_kwargs = 2;
    o.opt_keys = k;
    o.opt_vals = v;
    o.seed = 7;
    o.initializer = &init;
    if (step >= 0) {
        o.n_lr_steps = 1;
        o.lr_steps = &step;
        o.lr_factor = factor;
    }
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "%s", mxp_last_error());
    float *w = malloc(12 * sizeof *w);
    cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_module_param(m, "fc_weight"), w, 12 * sizeof *w), MXP_OK);
    mxp_module_free(m);
    mxp_iter_free(it);
    mxp_symbol_release(sm);
    mxp_symbol_release(fc);
    mxp_symbol_release(data);
    return w;
}

TestSuite(fit_schedule, .init = trt_setup, .fini = trt_teardown);

Test(fit_schedule, a_step_to_zero_lr_freezes_the_weights_from_that_update_on) {
    float *two = train(8, -1, 1.0);       /* 2 batches, no schedule */
    float *four = train(16, -1, 1.0);     /* 4 batches, no schedule */
    float *frozen = train(16, 2, 0.0);    /* 4 batches, lr 0 after update 2 */
    cr_expect(!memcmp(frozen, two, 12 * sizeof *two), "updates 3 and 4 ran at lr 0: same as 2 batches");
    cr_expect(memcmp(four, two, 12 * sizeof *two) != 0, "without the schedule batches 3 and 4 move the weights");
    free(two);
    free(four);
    free(frozen);
}
