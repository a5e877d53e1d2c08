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
#include <sys/wait.h>

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
    mxp_ndarray_release(xa);
    mxp_ndarray_release(ya);
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
    mxp_symbol_release(sm);
    mxp_symbol_release(fc);
    mxp_symbol_release(data);
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

/* ------------------------------------------------------------ §2 checkpoints */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    char *b = calloc(1, 1 << 20);
    cr_assert(b);
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

/* A hard link to the old file keeps the old content when the file is
 * replaced by rename, and sees the new content when rewritten in place. */
Test(fit_errors, symbol_json_is_replaced_not_rewritten) {
    char path[512], link_path[512];
    snprintf(path, sizeof path, "%s/net-symbol.json", trt_dir);
    snprintf(link_path, sizeof link_path, "%s/old-symbol.json", trt_dir);
    mxp_symbol *a = gt_var("first_var");
    mxp_symbol *b = gt_var("second_var");
    cr_assert_eq(mxp_symbol_save_file(a, path), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(link(path, link_path), 0);
    cr_assert_eq(mxp_symbol_save_file(b, path), MXP_OK, "%s", mxp_last_error());
    char *old = slurp(link_path), *cur = slurp(path);
    cr_assert(strstr(old, "first_var") && !strstr(old, "second_var"), "the old file was rewritten in place: %s", old);
    cr_assert(strstr(cur, "second_var"), "%s", cur);
    free(old);
    free(cur);
    mxp_symbol_release(a);
    mxp_symbol_release(b);
}

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

/* .states is written before .params: when the .states cannot be written,
 * no .params of that epoch appears (--load-epoch would find it alone). */
Test(fit_errors, params_never_without_states) {
    char prefix[256], states[512], params[512];
    snprintf(prefix, sizeof prefix, "%s/set", trt_dir);
    snprintf(states, sizeof states, "%s-0001.states", prefix);
    snprintf(params, sizeof params, "%s-0001.params", prefix);
    cr_assert_eq(mkdir(states, 0700), 0); /* the rename onto it fails */
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, prefix);
    int rc = mxp_module_fit(m, it, NULL, &o);
    cr_assert_neq(rc, MXP_OK, "saving onto a directory must fail");
    cr_assert(strstr(mxp_last_error(), "set-0001.states"), "%s", mxp_last_error());
    cr_assert(!file_exists(params), "a .params was written without its .states");
    mxp_module_free(m);
    mxp_iter_free(it);
}

static int batches_seen;
static void count_batch(void *user, int epoch, int64_t nbatch, const char *metric, double value) {
    (void)user, (void)epoch, (void)nbatch, (void)metric, (void)value;
    batches_seen++;
}

Test(fit_errors, bad_model_prefix_fails_before_training) {
    const char *bad[] = {"/nonexistent-mxplug-dir/sub/model", NULL};
    char ro[256];
    snprintf(ro, sizeof ro, "%s/readonly", trt_dir);
    cr_assert_eq(mkdir(ro, 0500), 0);
    char ro_prefix[300];
    snprintf(ro_prefix, sizeof ro_prefix, "%s/model", ro);
    if (geteuid() != 0) bad[1] = ro_prefix; /* root writes anywhere */
    const char *why[] = {"No such file or directory", "Permission denied"};
    for (int k = 0; k < 2 && bad[k]; k++) {
        mxp_module *m = fc_module(4);
        mxp_iter *it = data_iter(16, 4, 1.0f);
        mxp_fit_opts o = fit_opts(0, 1, ok_vals, bad[k]);
        o.batch_cb = count_batch;
        batches_seen = 0;
        cr_assert_neq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "prefix %s", bad[k]);
        cr_assert_eq(batches_seen, 0, "trained %d batches before reporting the prefix", batches_seen);
        cr_assert(strstr(mxp_last_error(), bad[k]) && strstr(mxp_last_error(), why[k]), "%s", mxp_last_error());
        mxp_module_free(m);
        mxp_iter_free(it);
    }
    /* A name longer than the file system allows. */
    char longp[600];
    int n = snprintf(longp, sizeof longp, "%s/", trt_dir);
    memset(longp + n, 'x', 300);
    longp[n + 300] = 0;
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, longp);
    o.batch_cb = count_batch;
    batches_seen = 0;
    cr_assert_neq(mxp_module_fit(m, it, NULL, &o), MXP_OK);
    cr_assert_eq(batches_seen, 0);
    cr_assert(strstr(mxp_last_error(), "File name too long"), "%s", mxp_last_error());
    mxp_module_free(m);
    mxp_iter_free(it);
}

Test(fit_errors, stale_temporaries_of_dead_runs_are_removed) {
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) _exit(0);
    cr_assert_eq(waitpid(child, NULL, 0), child);
    char prefix[256], dead[512], live[512], other[512];
    snprintf(prefix, sizeof prefix, "%s/run", trt_dir);
    snprintf(dead, sizeof dead, "%s-0003.params.tmp.%ld.0", prefix, (long)child);
    snprintf(live, sizeof live, "%s-0003.states.tmp.%ld.1", prefix, (long)getppid());
    snprintf(other, sizeof other, "%s/run2-0001.params.tmp.%ld.0", trt_dir, (long)child);
    const char *files[] = {dead, live, other};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(files[i], "w");
        cr_assert(f);
        fputs("partial", f);
        fclose(f);
    }
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, prefix);
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "%s", mxp_last_error());
    cr_assert(!file_exists(dead), "the temporary of a dead run was left behind");
    cr_assert(file_exists(live), "a temporary of a running process was removed");
    cr_assert(file_exists(other), "a temporary of another prefix was removed");
    mxp_module_free(m);
    mxp_iter_free(it);
}

/* ------------------------------------------------------------ §4 no silent wrong results */

/* Rewrite PREFIX-0001.params with fc_weight (4,3) stored as (3,4): same
 * element count, transposed shape. */
static void transpose_weight(const char *prefix) {
    int na, nx;
    char **an, **xn;
    mxp_ndarray **aa, **xa;
    cr_assert_eq(mxp_checkpoint_load_params(prefix, 1, &na, &an, &aa, &nx, &xn, &xa), MXP_OK, "%s", mxp_last_error());
    int found = 0;
    for (int i = 0; i < na; i++) {
        if (strcmp(an[i], "fc_weight")) continue;
        cr_assert_eq(mxp_ndarray_shape(aa[i])[0], 4);
        int64_t t[2] = {3, 4};
        mxp_ndarray *r = NULL;
        cr_assert_eq(mxp_ndarray_reshape(aa[i], t, 2, &r), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray_release(aa[i]);
        aa[i] = r;
        found = 1;
    }
    cr_assert(found);
    cr_assert_eq(mxp_checkpoint_save_params(prefix, 1, na, (const char *const *)an, aa, nx, (const char *const *)xn, xa),
                 MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_list_free(na, aa, an);
    mxp_ndarray_list_free(nx, xa, xn);
}

Test(fit_errors, transposed_checkpoint_parameter_is_refused) {
    const char *prefix = train_one("transposed");
    transpose_weight(prefix);
    /* resume (fit) */
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(16, 4, 1.0f);
    cr_assert_eq(mxp_module_load_checkpoint(m, prefix, 1, 0), MXP_OK, "%s", mxp_last_error());
    mxp_fit_opts o = fit_opts(1, 2, ok_vals, NULL);
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_ESHAPE, "resume accepted a transposed fc_weight");
    cr_assert(strstr(mxp_last_error(), "fc_weight") && strstr(mxp_last_error(), "(3, 4)") &&
                  strstr(mxp_last_error(), "(4, 3)"),
              "%s", mxp_last_error());
    mxp_module_free(m);
    /* score (inference binding) */
    m = fc_module(4);
    cr_assert_eq(mxp_module_load_checkpoint(m, prefix, 1, 0), MXP_OK, "%s", mxp_last_error());
    double acc = 0;
    cr_assert_eq(mxp_module_score(m, it, "acc", &acc), MXP_ESHAPE, "score accepted a transposed fc_weight");
    cr_assert(strstr(mxp_last_error(), "fc_weight"), "%s", mxp_last_error());
    mxp_module_free(m);
    mxp_iter_free(it);
}

Test(fit_errors, an_epoch_without_batches_is_an_error_not_a_checkpoint) {
    char prefix[256], params[512];
    snprintf(prefix, sizeof prefix, "%s/empty", trt_dir);
    snprintf(params, sizeof params, "%s-0001.params", prefix);
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(3, 4, 1.0f); /* 3 samples, batch 4, last batch discarded */
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, prefix);
    cr_assert_neq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "an epoch with no batch trained");
    cr_assert(strstr(mxp_last_error(), "no batch"), "%s", mxp_last_error());
    cr_assert(!file_exists(params), "an untrained model was saved as a checkpoint");
    mxp_module_free(m);
    mxp_iter_free(it);
}

Test(fit_errors, non_finite_hyper_parameters_are_refused) {
    const char *bad[][2] = {{"learning_rate", "inf"}, {"learning_rate", "nan"}, {"wd", "inf"},
                            {"momentum", "-inf"}, {"rescale_grad", "nan"}, {"learning_rate", "1e999"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mxp_optimizer *opt = NULL;
        const char *k = bad[i][0], *v = bad[i][1];
        cr_assert_eq(mxp_optimizer_create("sgd", 1, &k, &v, &opt), MXP_EINVAL, "%s=%s accepted", k, v);
        cr_assert_null(opt);
        cr_assert(strstr(mxp_last_error(), k) && strstr(mxp_last_error(), "finite"), "%s", mxp_last_error());
    }
}

static const char *huge_lr[] = {"1e30", "0"};

Test(fit_errors, a_diverged_run_stops_naming_epoch_and_batch) {
    char prefix[256], params[512];
    snprintf(prefix, sizeof prefix, "%s/diverged", trt_dir);
    snprintf(params, sizeof params, "%s-0001.params", prefix);
    mxp_module *m = fc_module(4);
    mxp_iter *it = data_iter(32, 4, 1e10f);
    mxp_fit_opts o = fit_opts(0, 1, huge_lr, prefix);
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_EINVAL, "a run whose weights became NaN succeeded");
    cr_assert(strstr(mxp_last_error(), "epoch 0") && strstr(mxp_last_error(), "batch"), "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "allow_nan"), "%s", mxp_last_error());
    cr_assert(!file_exists(params), "NaN weights were saved");
    mxp_module_free(m);
    /* The user's choice: continue anyway. */
    m = fc_module(4);
    o.allow_nan = 1;
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_OK, "%s", mxp_last_error());
    cr_assert(file_exists(params));
    mxp_module_free(m);
    mxp_iter_free(it);
}

Test(fit_errors, duplicate_argument_names_fail_at_bind) {
    mxp_symbol *data = gt_var("data");
    mxp_symbol *w1 = gt_var("w"), *b1 = gt_var("b1");
    mxp_symbol *w2 = gt_var("w"), *b2 = gt_var("b2"); /* a second node named 'w' */
    mxp_symbol *a1[3] = {data, w1, b1};
    mxp_symbol *fc1 = gt_op("FullyConnected", "fc1", 3, a1, "num_hidden=3", NULL);
    mxp_symbol *a2[3] = {fc1, w2, b2};
    mxp_symbol *fc2 = gt_op("FullyConnected", "fc2", 3, a2, "num_hidden=4", NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc2, NULL);
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sm, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_iter *it = data_iter(16, 4, 1.0f);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, NULL);
    cr_assert_eq(mxp_module_fit(m, it, NULL, &o), MXP_EINVAL, "two variables named 'w' were bound");
    cr_assert(strstr(mxp_last_error(), "'w'") && strstr(mxp_last_error(), "fc1") && strstr(mxp_last_error(), "fc2"),
              "%s", mxp_last_error());
    mxp_module_free(m);
    mxp_iter_free(it);
    mxp_symbol *all[] = {sm, fc2, fc1, b2, w2, b1, w1, data};
    for (int i = 0; i < 8; i++) mxp_symbol_release(all[i]);
}

Test(fit_errors, duplicate_params_names_keep_the_last_like_mxnet) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s/dup", trt_dir);
    float one = 1.0f, two = 2.0f;
    mxp_ndarray *a = trt_vec(1, &one), *b = trt_vec(1, &two);
    const char *names[] = {"w", "w"};
    mxp_ndarray *arrs[] = {a, b};
    cr_assert_eq(mxp_checkpoint_save_params(prefix, 1, 2, names, arrs, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    int na, nx;
    char **an, **xn;
    mxp_ndarray **aa, **xa;
    cr_assert_eq(mxp_checkpoint_load_params(prefix, 1, &na, &an, &aa, &nx, &xn, &xa), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(na, 1, "both entries named 'w' were kept");
    float *v = trt_get(aa[0]);
    cr_assert_eq(v[0], 2.0f, "the first 'w' was kept; MXNet keeps the last");
    free(v);
    mxp_ndarray_list_free(na, aa, an);
    mxp_ndarray_list_free(nx, xa, xn);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}

/* ------------------------------------------------------------ §3 bounded memory */

/* A .states entry renamed count:5000000 (index far beyond what the file can
 * describe) is refused before anything is allocated for it. */
Test(fit_errors, states_index_is_bounded_by_the_file) {
    const char *prefix = train_one("states");
    char path[512];
    snprintf(path, sizeof path, "%s-0001.states", prefix);
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    cr_assert_eq(mxp_ndarray_load(path, &n, &arrs, &names), MXP_OK, "%s", mxp_last_error());
    int renamed = 0;
    for (int i = 0; i < n && !renamed; i++)
        if (!strcmp(names[i], "count:0")) {
            free(names[i]);
            names[i] = strdup("count:5000000");
            renamed = 1;
        }
    cr_assert(renamed);
    cr_assert_eq(mxp_ndarray_save(path, n, arrs, (const char *const *)names), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_list_free(n, arrs, names);
    mxp_random_seed(7);
    const char *k[] = {"learning_rate", "momentum"}, *v[] = {"0.1", "0"};
    mxp_optimizer *opt = NULL;
    cr_assert_eq(mxp_optimizer_create("sgd", 2, k, v, &opt), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_optimizer_load_states(opt, path), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "count:5000000") && strstr(mxp_last_error(), "larger than"), "%s",
              mxp_last_error());
    mxp_optimizer_free(opt);
}

/* ------------------------------------------------------------ §5 messages */

static mxp_iter *iter_of(int n, int feat, int label_mod, int label_add) {
    int64_t xs[2] = {n, feat}, ys[1] = {n};
    float x[64 * 8], y[64];
    for (int i = 0; i < n * feat; i++) x[i] = (float)((i * 37 % 19) - 9) / 9.0f;
    for (int i = 0; i < n; i++) y[i] = (float)(i % label_mod + (i == n - 1 ? label_add : 0));
    mxp_ndarray *xa = trt_f32(xs, 2, x), *ya = trt_f32(ys, 1, y);
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(1, &xa, 1, &ya, 4, 0, 0, MXP_LAST_BATCH_DISCARD, &it), MXP_OK, "%s",
                 mxp_last_error());
    mxp_ndarray_release(xa);
    mxp_ndarray_release(ya);
    return it;
}

Test(fit_errors, validation_shapes_differing_from_training_are_named) {
    mxp_module *m = fc_module(4);
    mxp_iter *tr = iter_of(16, 3, 4, 0), *va = iter_of(16, 4, 4, 0);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, NULL);
    cr_assert_eq(mxp_module_fit(m, tr, va, &o), MXP_ESHAPE);
    const char *e = mxp_last_error();
    cr_assert(strstr(e, "validation") && strstr(e, "(4, 4)") && strstr(e, "(4, 3)") && strstr(e, "fc_weight"), "%s", e);
    mxp_module_free(m);
    mxp_iter_free(tr);
    mxp_iter_free(va);
}

Test(fit_errors, a_label_out_of_range_says_training_or_validation) {
    mxp_module *m = fc_module(4);
    mxp_iter *tr = iter_of(16, 3, 4, 3), *ok = iter_of(16, 3, 4, 0);
    mxp_fit_opts o = fit_opts(0, 1, ok_vals, NULL);
    cr_assert_neq(mxp_module_fit(m, tr, NULL, &o), MXP_OK, "label 6 of 4 classes trained");
    cr_assert(strstr(mxp_last_error(), "training data") && strstr(mxp_last_error(), "batch 4"), "%s", mxp_last_error());
    mxp_module_free(m);
    m = fc_module(4);
    cr_assert_neq(mxp_module_fit(m, ok, tr, &o), MXP_OK, "label 6 of 4 classes scored");
    cr_assert(strstr(mxp_last_error(), "validation data"), "%s", mxp_last_error());
    mxp_module_free(m);
    mxp_iter_free(tr);
    mxp_iter_free(ok);
}

/* A .params whose array count is 2^62: the message used to say "needs at
 * least 0 bytes" (count * 4 wrapped). */
Test(fit_errors, huge_params_count_message_does_not_wrap) {
    char path[256];
    snprintf(path, sizeof path, "%s/huge.params", trt_dir);
    uint64_t hdr[3] = {0x112, 0, (uint64_t)1 << 62};
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite(hdr, 8, 3, f);
    fclose(f);
    int n;
    mxp_ndarray **a;
    char **names;
    cr_assert_eq(mxp_ndarray_load(path, &n, &a, &names), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "array count 4611686018427387904") &&
                  strstr(mxp_last_error(), "more than 2^64"),
              "%s", mxp_last_error());
}
