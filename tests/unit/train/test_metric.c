/* test_metric.c — metrics (runtime/src/train/metric.c) on hand-made
 * predictions with values worked out here: accuracy (argmax, and class-id
 * predictions), top-k, cross-entropy with eps 1e-12, pad rows ignored,
 * accumulation over batches, reset, names, errors. */
#include "train_test_util.h"

TestSuite(train_metric, .init = trt_setup, .fini = trt_teardown);

/* 4 samples, 3 classes. */
static const float P[12] = {0.1f, 0.7f, 0.2f,   /* argmax 1 */
                            0.5f, 0.3f, 0.2f,   /* argmax 0 */
                            0.2f, 0.3f, 0.5f,   /* argmax 2 */
                            0.4f, 0.35f, 0.25f};/* argmax 0 */
static const float L[4] = {1, 1, 2, 2};

Test(train_metric, accuracy_topk_ce) {
    int64_t ps[2] = {4, 3};
    mxp_ndarray *p = trt_f32(ps, 2, P), *l = trt_vec(4, L);
    mxp_metric *acc = NULL, *top2 = NULL, *ce = NULL;
    cr_assert_eq(mxp_metric_create("acc", 0, NULL, NULL, &acc), MXP_OK);
    const char *k[] = {"top_k"};
    const char *v[] = {"2"};
    cr_assert_eq(mxp_metric_create("top_k_accuracy", 1, k, v, &top2), MXP_OK);
    cr_assert_eq(mxp_metric_create("ce", 0, NULL, NULL, &ce), MXP_OK);
    const char *name;
    double val;
    cr_assert_eq(mxp_metric_get(acc, &name, &val), MXP_OK);
    cr_assert(isnan(val), "no instances yet");
    cr_assert_eq(mxp_metric_update(acc, 1, &l, &p, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_metric_update(top2, 1, &l, &p, 0), MXP_OK);
    cr_assert_eq(mxp_metric_update(ce, 1, &l, &p, 0), MXP_OK);
    mxp_metric_get(acc, &name, &val);
    cr_assert_str_eq(name, "accuracy");
    cr_assert_float_eq(val, 2.0 / 4, 1e-12);
    mxp_metric_get(top2, &name, &val);
    cr_assert_str_eq(name, "top_k_accuracy_2");
    /* top-2 sets: {1,2} {0,1} {2,1} {0,1}: labels 1,1,2 in, 2 out. */
    cr_assert_float_eq(val, 3.0 / 4, 1e-12);
    mxp_metric_get(ce, &name, &val);
    cr_assert_str_eq(name, "cross-entropy");
    double want = -(log(0.7f + 1e-12) + log(0.3f + 1e-12) + log(0.5f + 1e-12) + log(0.25f + 1e-12)) / 4;
    cr_assert_float_eq(val, want, 1e-9);
    /* Accumulate a second batch with 2 pad rows: only rows 0, 1 count. */
    cr_assert_eq(mxp_metric_update(acc, 1, &l, &p, 2), MXP_OK);
    mxp_metric_get(acc, NULL, &val);
    cr_assert_float_eq(val, 3.0 / 6, 1e-12);
    cr_assert_eq(mxp_metric_num_inst(acc), 6);
    mxp_metric_reset(acc);
    cr_assert_eq(mxp_metric_num_inst(acc), 0);
    mxp_metric_free(acc);
    mxp_metric_free(top2);
    mxp_metric_free(ce);
    mxp_ndarray_release(p);
    mxp_ndarray_release(l);
}

Test(train_metric, class_id_predictions_and_errors) {
    float ids[4] = {1, 0, 2, 2};
    mxp_ndarray *p = trt_vec(4, ids), *l = trt_vec(4, L);
    mxp_metric *acc = NULL;
    cr_assert_eq(mxp_metric_create("accuracy", 0, NULL, NULL, &acc), MXP_OK);
    cr_assert_eq(mxp_metric_update(acc, 1, &l, &p, 0), MXP_OK);
    double val;
    mxp_metric_get(acc, NULL, &val);
    cr_assert_float_eq(val, 3.0 / 4, 1e-12);
    /* Mismatched batch. */
    mxp_ndarray *l3 = trt_vec(3, L);
    cr_assert_eq(mxp_metric_update(acc, 1, &l3, &p, 0), MXP_ESHAPE);
    /* Label out of range. */
    int64_t ps[2] = {4, 3};
    mxp_ndarray *pp = trt_f32(ps, 2, P);
    float bad[4] = {0, 1, 3, 0};
    mxp_ndarray *lb = trt_vec(4, bad);
    cr_assert_eq(mxp_metric_update(acc, 1, &lb, &pp, 0), MXP_EINVAL);
    mxp_metric *m = NULL;
    cr_assert_eq(mxp_metric_create("f1", 0, NULL, NULL, &m), MXP_EINVAL);
    mxp_metric_free(acc);
    mxp_ndarray_release(p), mxp_ndarray_release(l), mxp_ndarray_release(l3), mxp_ndarray_release(pp), mxp_ndarray_release(lb);
}
