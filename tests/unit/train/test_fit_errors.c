/* test_fit_errors.c — mxp_module_fit's error paths (issue 12 §1, §4):
 *   - an error return leaves nothing running on the engine (resuming from
 *     a truncated .params used to return with initializers still queued,
 *     and the caller's registry shutdown then freed code they ran);
 *   - a checkpoint parameter whose shape differs from the bound one (same
 *     element count, transposed) is refused, naming both shapes;
 *   - an epoch with no batch is an error, never a saved checkpoint;
 *   - non-finite hyper-parameters are refused; a non-finite loss or weight
 *     stops training with the epoch and batch named, unless allow_nan.
 * Tiny FC net (3 inputs, 4 classes) on in-memory data (NDArrayIter). */
#include "train_test_util.h"

#include "../graph/graph_test_util.h"
#include "engine/engine.h"

#include <stdatomic.h>
#include <sys/stat.h>

TestSuite(fit_errors, .init = trt_setup, .fini = trt_teardown, .timeout = 120);

static mxp_iter *data_iter(int n_samples, int batch, float scale) {
    int64_t xs[2] = {n_samples, 3}, ys[1] = {n_samples};
    float x[64 * 3], y[64];
    cr_assert(n_samples <= 64);
    for (int i = 0; i < n_samples * 3; i++) x[i] = scale * (float)((i * 37 % 19) - 9) / 9.0f;
    for (int i = 0; i < n_samples; i++) y[i] = (float)(i % 4);
    mxp_ndarray *xa = trt_f32(xs, 2, x), *ya = trt_f32(ys, 1, y);
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(1, &xa, 1, &ya, batch, 0, 0, MXP_LAST_BATCH_DISCARD, &it), MXP_OK, "%s",
                 mxp_last_error());
    mxp_ndarray_free(xa);
    mxp_ndarray_free(ya);
    return it;
}

/* data -> FullyConnected(num_hidden=hidden) -> SoftmaxOutput. */
static mxp_module *fc_module(int hidden) {
    char nh[32];
    snprintf(nh, sizeof nh, "num_hidden=%d", hidden);
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc = gt_op("FullyConnected", "fc", 1, &data, nh, NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc, NULL);
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sm, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_symbol_free(sm);
    mxp_symbol_free(fc);
    mxp_symbol_free(data);
    return m;
}

static const char *lr_k[] = {"learning_rate", "momentum"};

static mxp_fit_opts fit_opts(int begin, int end, const char *const *vals, const char *prefix) {
    static mxp_init init;
    init = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.begin_epoch = begin;
    o.num_epoch = end;
    o.n_opt_kwargs = 2;
    o.opt_keys = lr_k;
    o.opt_vals = vals;
    o.seed = 7;
    o.initializer = &init;
    o.checkpoint_prefix = prefix;
    return o;
}

static const char *ok_vals[] = {"0.1", "0"};

/* Train one epoch into DIR/PREFIX-0001.*; returns the prefix (static). */
static const char *train_one(const char *name) {
    static char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/%s", trt_dir, name);
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, prefix);
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "%s", mxp_last_error());
    mxp_module_free(m);
    mxp_iter_free(it);
    return prefix;
}

static atomic_int slow_done;
static int slow_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    usleep(300 * 1000);
    atomic_store(&slow_done, 1);
    return MXP_OK;
}

Test(fit_errors, failed_resume_leaves_nothing_running) {
    const char *prefix = train_one("trunc");
    char path[512];
    snprintf(path, sizeof path, "%s-0001.params", prefix);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - 7), 0);

    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    cr_assert_eq(mxp_module_load_checkpoint(m, prefix, 1, 0), MXP_OK, "%s", mxp_last_error());
    /* Work queued before the call that is still running when fit fails:
     * fit must not return before everything queued has completed. */
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp_engine_push_args a = {0};
    a.sync_fn = slow_fn;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "slow";
    atomic_store(&slow_done, 0);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK, "%s", mxp_last_error());
    mxp_fit_opts o = fit_opts(1, 2, ok_vals, NULL);
    int rc = mxp_module_fit(m, it, NULL, &o);
    cr_assert_neq(rc, MXP_OK, "a truncated .params must fail the resume");
    cr_assert(strstr(mxp_last_error(), "trunc"), "the message names the file: %s", mxp_last_error());
    cr_assert_eq(mxp__engine_in_flight(), 0, "fit returned an error with work still queued on the engine");
    cr_assert_eq(atomic_load(&slow_done), 1);
    mxp_engine_delete_var(v);
    mxp_module_free(m);
    mxp_iter_free(it);
}
