/* test_gpu_train.c — training through the Module on the gpu device:
 *   - on every machine with the pack: mxp_module_set_device(gpu(N)) is
 *     refused for a GPU that does not exist (MXP_EDEVICE naming gpu(N)),
 *     accepted for one that does;
 *   - with a GPU: the same seed gives bit-identical initial weights on cpu
 *     and gpu (initializers run on the host, weights are copied), and
 *     LeNet trained for 150 batches of 64 Fashion-MNIST images follows the
 *     CPU's per-batch training accuracy and ends within a few points of
 *     its test accuracy (float sums in another order: close, not equal);
 *     the MLP the same over a whole epoch.
 * Without a GPU (or the pack, or the data) the GPU tests skip saying why. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_host.h"

#define CUDA_SO FH_PACK_PATH("ops-cuda")
#define FASHION "/usr/share/datasets/fashion-mnist"

static const mxp_device CPU = {MXP_DEV_CPU, 0};
static const mxp_device GPU = {MXP_DEV_GPU, 0};

TestSuite(gpu_train, .timeout = 900);

/* The number of GPUs, after loading the registry; skips without the pack. */
static int gpus(void) {
    if (access(CUDA_SO, R_OK) != 0) {
        fprintf(stderr, "test_gpu_train: skipped: ops-cuda was not built in this build tree (no nvcc, or SANITIZE set)\n");
        cr_skip_test("ops-cuda was not built in this build tree (no nvcc, or SANITIZE set)");
    }
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    int n = -1;
    cr_assert_eq(mxp_device_count("gpu", &n), MXP_OK, "%s", mxp_last_error());
    return n;
}

static void need_gpu_and_data(void) {
    if (gpus() == 0) {
        fprintf(stderr, "test_gpu_train: skipped: no GPU: the gpu device reports 0 devices (cudaGetDeviceCount)\n");
        cr_skip_test("no GPU: the gpu device reports 0 devices (cudaGetDeviceCount)");
    }
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK)) cr_skip_test("Fashion-MNIST not installed");
}

static mxp_module *module_of(const char *json) {
    mxp_symbol *sym = NULL;
    cr_assert_eq(mxp_symbol_load_file(json, &sym), MXP_OK, "%s", mxp_last_error());
    mxp_module *m = NULL;
    cr_assert_eq(mxp_module_create(sym, 0, NULL, 1, NULL, &m), MXP_OK, "%s", mxp_last_error());
    mxp_symbol_release(sym);
    return m;
}

/* Fashion-MNIST, batch 64; parts > 1: the first of `parts` shards. */
static mxp_iter *fashion(int train, int flat, int parts) {
    char np[16];
    snprintf(np, sizeof np, "%d", parts);
    const char *k[] = {"image", "label", "batch_size", "shuffle", "flat", "silent", "seed", "round_batch",
                       "num_parts", "part_index"};
    const char *v[] = {train ? FASHION "/train-images-idx3-ubyte.gz" : FASHION "/t10k-images-idx3-ubyte.gz",
                       train ? FASHION "/train-labels-idx1-ubyte.gz" : FASHION "/t10k-labels-idx1-ubyte.gz",
                       "64", train ? "True" : "False", flat ? "True" : "False", "True", "5",
                       train ? "False" : "True", np, "0"};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("MNISTIter", 10, k, v, &it), MXP_OK, "%s", mxp_last_error());
    return it;
}

typedef struct curve {
    double acc[2048];
    int n;
} curve;

static void on_batch(void *user, int epoch, int64_t nbatch, const char *metric, double value) {
    (void)epoch;
    (void)metric;
    curve *c = user;
    if (nbatch >= 1 && nbatch <= 2048) {
        c->acc[nbatch - 1] = value;
        if (nbatch > c->n) c->n = (int)nbatch;
    }
}

static const char *opt_k[] = {"learning_rate", "momentum", "wd"};
static const char *opt_v[] = {"0.05", "0.9", "0.0001"};

/* Train json on dev for `epochs` epochs (0: bind and initialize only);
 * returns the module, the batch curve in *c and the test accuracy. */
static mxp_module *train_on(const char *json, mxp_device dev, int flat, int parts, int epochs, curve *c, double *acc) {
    mxp_module *m = module_of(json);
    if (dev.type != MXP_DEV_CPU) cr_assert_eq(mxp_module_set_device(m, dev), MXP_OK, "%s", mxp_last_error());
    mxp_iter *tr = fashion(1, flat, parts), *te = fashion(0, flat, 1);
    mxp_init x = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = (uint32_t)sizeof o;
    o.num_epoch = epochs;
    o.optimizer = "sgd";
    o.n_opt_kwargs = 3;
    o.opt_keys = opt_k;
    o.opt_vals = opt_v;
    o.seed = 11;
    o.initializer = &x;
    o.eval_metric = "acc";
    o.batch_cb = on_batch;
    o.user = c;
    cr_assert_eq(mxp_module_fit(m, tr, NULL, &o), MXP_OK, "%s", mxp_last_error());
    *acc = NAN;
    if (epochs > 0) {
        cr_assert_eq(mxp_iter_set_epoch(te, 0), MXP_OK);
        cr_assert_eq(mxp_module_score(m, te, "acc", acc), MXP_OK, "%s", mxp_last_error());
    }
    mxp_iter_free(tr);
    mxp_iter_free(te);
    return m;
}

static float *host_copy(mxp_ndarray *a) {
    float *v = malloc(mxp_ndarray_nbytes(a));
    cr_assert(v);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, v, mxp_ndarray_nbytes(a)), MXP_OK, "%s", mxp_last_error());
    return v;
}

Test(gpu_train, set_device_refuses_a_missing_gpu_and_accepts_a_present_one) {
    int n = gpus();
    mxp_module *m = module_of(MXP_SOURCE_DIR "/examples/mlp/mlp-symbol.json");
    int rc = mxp_module_set_device(m, (mxp_device){MXP_DEV_GPU, n});
    cr_expect_eq(rc, MXP_EDEVICE, "gpu(%d) of %d: rc %d", n, n, rc);
    char want[32];
    snprintf(want, sizeof want, "gpu(%d)", n);
    cr_expect(strstr(mxp_last_error(), want) != NULL, "message: %s", mxp_last_error());
    if (n == 0) cr_expect(strstr(mxp_last_error(), "no CUDA device") != NULL, "message: %s", mxp_last_error());
    cr_expect_eq(mxp_module_device(m).type, MXP_DEV_CPU, "a refused device must not stick");
    if (n > 0) {
        cr_expect_eq(mxp_module_set_device(m, GPU), MXP_OK, "%s", mxp_last_error());
        cr_expect_eq(mxp_module_device(m).type, MXP_DEV_GPU);
    }
    mxp_module_free(m);
    mxp_registry_shutdown();
}

Test(gpu_train, same_seed_gives_identical_initial_weights_on_cpu_and_gpu) {
    need_gpu_and_data();
    curve c0 = {0}, c1 = {0};
    double a0, a1;
    const char *json = MXP_SOURCE_DIR "/examples/lenet/lenet-symbol.json";
    mxp_module *mc = train_on(json, CPU, 0, 1, 0, &c0, &a0), *mg = train_on(json, GPU, 0, 1, 0, &c1, &a1);
    cr_assert_eq(mxp_module_num_params(mc), mxp_module_num_params(mg));
    for (int i = 0; i < mxp_module_num_params(mc); i++) {
        const char *name = mxp_module_param_name(mc, i);
        mxp_ndarray *pc = mxp_module_param(mc, name), *pg = mxp_module_param(mg, name);
        cr_assert(pc && pg, "%s", name);
        cr_assert_eq(mxp_ndarray_device(pg).type, MXP_DEV_GPU, "%s lives on the gpu", name);
        float *vc = host_copy(pc), *vg = host_copy(pg);
        cr_expect_eq(memcmp(vc, vg, mxp_ndarray_nbytes(pc)), 0, "initial %s differs between cpu and gpu", name);
        free(vc);
        free(vg);
    }
    mxp_module_free(mc);
    mxp_module_free(mg);
    mxp_registry_shutdown();
}

/* LeNet, 150 batches (a 1/6 shard of the training set, one epoch). */
Test(gpu_train, lenet_follows_the_cpu_curve) {
    need_gpu_and_data();
    curve cc = {0}, cg = {0};
    double acc_c, acc_g;
    const char *json = MXP_SOURCE_DIR "/examples/lenet/lenet-symbol.json";
    mxp_module *mc = train_on(json, CPU, 0, 6, 1, &cc, &acc_c);
    mxp_module *mg = train_on(json, GPU, 0, 6, 1, &cg, &acc_g);
    cr_assert_eq(cc.n, cg.n, "batches: cpu %d gpu %d", cc.n, cg.n);
    cr_assert_geq(cc.n, 100);
    double worst = 0;
    for (int i = 9; i < cc.n; i++) worst = fmax(worst, fabs(cc.acc[i] - cg.acc[i]));
    fprintf(stderr, "lenet: %d batches, running train accuracy cpu %.4f gpu %.4f (largest gap %.4f), test cpu %.4f gpu %.4f\n",
            cc.n, cc.acc[cc.n - 1], cg.acc[cg.n - 1], worst, acc_c, acc_g);
    cr_expect_leq(worst, 0.03, "running accuracy gap %.4f", worst);
    cr_expect_leq(fabs(acc_c - acc_g), 0.03, "test accuracy cpu %.4f gpu %.4f", acc_c, acc_g);
    cr_expect_geq(acc_g, 0.6, "gpu LeNet test accuracy %.4f after 150 batches", acc_g);
    mxp_module_free(mc);
    mxp_module_free(mg);
    mxp_registry_shutdown();
}

Test(gpu_train, mlp_epoch_matches_the_cpu) {
    need_gpu_and_data();
    curve cc = {0}, cg = {0};
    double acc_c, acc_g;
    const char *json = MXP_SOURCE_DIR "/examples/mlp/mlp-symbol.json";
    mxp_module *mc = train_on(json, CPU, 1, 1, 1, &cc, &acc_c);
    mxp_module *mg = train_on(json, GPU, 1, 1, 1, &cg, &acc_g);
    fprintf(stderr, "mlp: test accuracy cpu %.4f gpu %.4f\n", acc_c, acc_g);
    cr_expect_leq(fabs(acc_c - acc_g), 0.02, "test accuracy cpu %.4f gpu %.4f", acc_c, acc_g);
    cr_expect_geq(acc_g, 0.8, "gpu MLP test accuracy %.4f", acc_g);
    mxp_module_free(mc);
    mxp_module_free(mg);
    mxp_registry_shutdown();
}
