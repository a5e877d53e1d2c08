/* test_gpu_ops.c — every gpu op of ops-cuda against the cpu implementation
 * on the same random data: a one-op graph is bound on cpu(0) and on
 * gpu(0) with equal arguments, run forward (training) and backward with
 * equal head gradients, and every output and argument gradient is
 * compared (|gpu - cpu| <= atol + rtol |cpu|).  Convolution runs with each
 * gpu impl (cudnn, direct) chosen through mxp_op_set_impl.  Optimizer
 * updates run through mxp_invoke on both devices, copies cpu -> gpu ->
 * gpu -> cpu must return the bytes, and Dropout seeded alike on both
 * devices must drop the same elements.
 * Without a GPU (or without the pack) every test skips, printing why. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Case tables leave the trailing aux fields of most rows zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define CUDA_SO MXP_BUILD_DIR "/plugins/libmxp-ops-cuda.so"
#define MAXA 6

static const mxp_device CPU = {MXP_DEV_CPU, 0};
static const mxp_device GPU = {MXP_DEV_GPU, 0};

static void need_gpu(void) {
    if (access(CUDA_SO, R_OK) != 0) {
        fprintf(stderr, "test_gpu_ops: skipped: ops-cuda was not built in this build tree (no nvcc, or SANITIZE set)\n");
        cr_skip_test("ops-cuda was not built in this build tree (no nvcc, or SANITIZE set)");
    }
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    int n = 0;
    int rc = mxp_device_count("gpu", &n);
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    if (n == 0) {
        fprintf(stderr, "test_gpu_ops: skipped: no GPU: the gpu device reports 0 devices (cudaGetDeviceCount)\n");
        cr_skip_test("no GPU: the gpu device reports 0 devices (cudaGetDeviceCount)");
    }
}

/* Deterministic values in [lo, hi) (splitmix64). */
static void fill(float *v, int64_t n, uint64_t seed, double lo, double hi) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s += 0x9E3779B97F4A7C15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        v[i] = (float)(lo + (hi - lo) * (double)(z >> 11) / 9007199254740992.0);
    }
}

typedef struct opcase {
    const char *op;
    const char *kw[16];        /* key, value, ..., NULL */
    int n_args;
    int64_t shapes[MAXA][4];   /* each arg's shape, 0-terminated */
    double lo, hi;
    int int_arg;               /* index of an integer-valued arg (labels), or -1 */
    int n_classes;             /* its values are in [0, n_classes) */
    int loss;                  /* head needs no gradient */
    double atol, rtol;
    int n_aux;                 /* aux states (BatchNorm), values in [0.5, 1.5) */
    int64_t aux_shapes[2][4];
} opcase;

static int ndim_of(const int64_t *s) {
    int n = 0;
    while (n < 4 && s[n]) n++;
    return n;
}

typedef struct result {
    int n_out, n_grad;
    float *out[4];
    int64_t out_n[4];
    float *grad[MAXA];
    int64_t grad_n[MAXA];
    float *aux[2];
    int64_t aux_n[2];
} result;

static void result_free(result *r) {
    for (int i = 0; i < r->n_out; i++) free(r->out[i]);
    for (int i = 0; i < r->n_grad; i++) free(r->grad[i]);
    free(r->aux[0]);
    free(r->aux[1]);
}

static float *to_host(mxp_ndarray *a, int64_t *n) {
    *n = mxp_ndarray_size(a);
    float *h = malloc((size_t)(*n ? *n : 1) * sizeof(float));
    cr_assert(h);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, h, (size_t)*n * sizeof(float)), MXP_OK, "%s", mxp_last_error());
    return h;
}

static mxp_ndarray *from_host(const float *v, const int64_t *shape, int nd, mxp_device dev) {
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, nd, MXP_DTYPE_F32, dev, &a), MXP_OK, "%s", mxp_last_error());
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, v, (size_t)n * sizeof(float)), MXP_OK, "%s", mxp_last_error());
    return a;
}

/* Bind c on dev, forward (train) and backward; copy everything back. */
static void run_case(const opcase *c, mxp_device dev, result *r) {
    memset(r, 0, sizeof *r);
    int nkw = 0;
    const char *keys[8], *vals[8];
    for (int i = 0; c->kw[2 * i]; i++, nkw++) {
        keys[i] = c->kw[2 * i];
        vals[i] = c->kw[2 * i + 1];
    }
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_create(c->op, "node", nkw, keys, vals, &s), MXP_OK, "%s: %s", c->op, mxp_last_error());
    cr_assert_eq(mxp_symbol_compose(s, NULL, 0, NULL, NULL), MXP_OK, "%s: %s", c->op, mxp_last_error());
    mxp_ndarray *args[MAXA], *grads[MAXA];
    int reqs[MAXA];
    for (int i = 0; i < c->n_args; i++) {
        int nd = ndim_of(c->shapes[i]);
        int64_t n = 1;
        for (int k = 0; k < nd; k++) n *= c->shapes[i][k];
        float *v = malloc((size_t)n * sizeof(float));
        cr_assert(v);
        fill(v, n, 11 + (uint64_t)i, c->lo, c->hi);
        if (i == c->int_arg)
            for (int64_t k = 0; k < n; k++) v[k] = (float)((int64_t)(k * 7 + 3) % c->n_classes);
        args[i] = from_host(v, c->shapes[i], nd, dev);
        free(v);
        grads[i] = NULL;
        reqs[i] = MXP_REQ_NULL;
        if (i != c->int_arg) {
            cr_assert_eq(mxp_ndarray_create(c->shapes[i], nd, MXP_DTYPE_F32, dev, &grads[i]), MXP_OK, "%s",
                         mxp_last_error());
            reqs[i] = MXP_REQ_WRITE;
        }
    }
    mxp_ndarray *aux[2] = {NULL, NULL};
    for (int i = 0; i < c->n_aux; i++) {
        int nd = ndim_of(c->aux_shapes[i]);
        float v[64];
        fill(v, 64, 51 + (uint64_t)i, 0.5, 1.5);
        aux[i] = from_host(v, c->aux_shapes[i], nd, dev);
    }
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(s, dev, c->n_args, args, grads, reqs, c->n_aux, aux, &ex), MXP_OK, "%s on %s: %s", c->op,
                 dev.type == MXP_DEV_GPU ? "gpu" : "cpu", mxp_last_error());
    cr_assert_eq(mxp_executor_forward(ex, 1), MXP_OK, "%s", mxp_last_error());
    int n_out = 0;
    mxp_ndarray *const *outs = NULL;
    cr_assert_eq(mxp_executor_outputs(ex, &n_out, &outs), MXP_OK);
    mxp_ndarray *heads[4] = {NULL, NULL, NULL, NULL};
    if (!c->loss) {
        for (int i = 0; i < n_out && i < 4; i++) {
            int64_t n = mxp_ndarray_size(outs[i]);
            float *v = malloc((size_t)n * sizeof(float));
            cr_assert(v);
            fill(v, n, 101 + (uint64_t)i, -1, 1);
            heads[i] = from_host(v, mxp_ndarray_shape(outs[i]), mxp_ndarray_ndim(outs[i]), dev);
            free(v);
        }
    }
    cr_assert_eq(mxp_executor_backward(ex, c->loss ? 0 : n_out, c->loss ? NULL : heads), MXP_OK, "%s",
                 mxp_last_error());
    cr_assert_eq(mxp_executor_wait(ex), MXP_OK, "%s on %s: %s", c->op, dev.type == MXP_DEV_GPU ? "gpu" : "cpu",
                 mxp_last_error());
    r->n_out = n_out < 4 ? n_out : 4;
    for (int i = 0; i < r->n_out; i++) r->out[i] = to_host(outs[i], &r->out_n[i]);
    r->n_grad = c->n_args;
    for (int i = 0; i < c->n_args; i++) r->grad[i] = grads[i] ? to_host(grads[i], &r->grad_n[i]) : NULL;
    for (int i = 0; i < c->n_aux; i++) {
        r->aux[i] = to_host(aux[i], &r->aux_n[i]);
        mxp_ndarray_release(aux[i]);
    }
    for (int i = 0; i < 4; i++) mxp_ndarray_release(heads[i]);
    for (int i = 0; i < c->n_args; i++) {
        mxp_ndarray_release(args[i]);
        mxp_ndarray_release(grads[i]);
    }
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}

static void compare(const opcase *c, const char *what, int idx, const float *cpu, const float *gpu, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        cr_assert(d <= c->atol + c->rtol * fabs((double)cpu[i]), "%s %s %d [%lld]: gpu %.9g, cpu %.9g", c->op, what, idx,
                  (long long)i, gpu[i], cpu[i]);
    }
}

static void check_case(const opcase *c, const char *gpu_impl) {
    result rc_, rg;
    run_case(c, CPU, &rc_);
    if (gpu_impl) cr_assert_eq(mxp_op_set_impl(c->op, gpu_impl), MXP_OK, "%s", mxp_last_error());
    run_case(c, GPU, &rg);
    if (gpu_impl) mxp_op_set_impl(c->op, "auto");
    cr_assert_eq(rc_.n_out, rg.n_out);
    for (int i = 0; i < rc_.n_out; i++) {
        cr_assert_eq(rc_.out_n[i], rg.out_n[i]);
        compare(c, "output", i, rc_.out[i], rg.out[i], rc_.out_n[i]);
    }
    for (int i = 0; i < c->n_args; i++)
        if (rc_.grad[i]) compare(c, "gradient", i, rc_.grad[i], rg.grad[i], rc_.grad_n[i]);
    for (int i = 0; i < c->n_aux; i++) compare(c, "aux state", i, rc_.aux[i], rg.aux[i], rc_.aux_n[i]);
    result_free(&rc_);
    result_free(&rg);
}

#define KW(...) {__VA_ARGS__, NULL}
#define SH(...) {__VA_ARGS__}

static const opcase k_cases[] = {
    {"relu", KW(NULL), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"sigmoid", KW(NULL), 1, {SH(4, 5, 6)}, -3, 3, -1, 0, 0, 1e-6, 1e-5},
    {"tanh", KW(NULL), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"exp", KW(NULL), 1, {SH(33)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"log", KW(NULL), 1, {SH(33)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"sqrt", KW(NULL), 1, {SH(33)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"square", KW(NULL), 1, {SH(33)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"elemwise_add", KW(NULL), 2, {SH(3, 7), SH(3, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"elemwise_sub", KW(NULL), 2, {SH(3, 7), SH(3, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"elemwise_mul", KW(NULL), 2, {SH(3, 7), SH(3, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"elemwise_div", KW(NULL), 2, {SH(3, 7), SH(3, 7)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"_maximum", KW(NULL), 2, {SH(3, 7), SH(3, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"broadcast_add", KW(NULL), 2, {SH(2, 3, 4), SH(3, 1)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"broadcast_mul", KW(NULL), 2, {SH(2, 3, 4), SH(1, 4)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"broadcast_div", KW(NULL), 2, {SH(5, 1), SH(1, 6)}, 0.5, 2, -1, 0, 0, 1e-5, 1e-5},
    {"broadcast_sub", KW(NULL), 2, {SH(4, 6), SH(6)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"_plus_scalar", KW("scalar", "0.5"), 1, {SH(5, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"_rdiv_scalar", KW("scalar", "1.5"), 1, {SH(5, 7)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"_power_scalar", KW("scalar", "1.7"), 1, {SH(5, 7)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"_rpower_scalar", KW("scalar", "1.7"), 1, {SH(5, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"smooth_l1", KW("scalar", "1.5"), 1, {SH(5, 7)}, -1.5, 1.5, -1, 0, 0, 1e-6, 1e-5},
    {"Flatten", KW(NULL), 1, {SH(2, 3, 4)}, -2, 2, -1, 0, 0, 0, 0},
    {"Reshape", KW("shape", "(4, 6)"), 1, {SH(2, 3, 4)}, -2, 2, -1, 0, 0, 0, 0},
    {"FullyConnected", KW("num_hidden", "6"), 3, {SH(4, 10), SH(6, 10), SH(6)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"FullyConnected", KW("num_hidden", "5", "no_bias", "True"), 2, {SH(3, 2, 4), SH(5, 8)}, -1, 1, -1, 0, 0, 1e-5,
     1e-4},
    {"dot", KW(NULL), 2, {SH(4, 6), SH(6, 5)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"dot", KW("transpose_a", "True", "transpose_b", "True"), 2, {SH(6, 4), SH(5, 6)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"dot", KW("transpose_b", "True"), 2, {SH(2, 3, 6), SH(5, 6)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"batch_dot", KW(NULL), 2, {SH(3, 4, 6), SH(3, 6, 5)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"batch_dot", KW("transpose_a", "True"), 2, {SH(3, 6, 4), SH(3, 6, 5)}, -1, 1, -1, 0, 0, 1e-5, 1e-4},
    {"BatchNorm", KW("fix_gamma", "False"), 3, {SH(4, 3, 5, 5), SH(3), SH(3)}, -1, 1, -1, 0, 0, 1e-5, 1e-4, 2,
     {SH(3), SH(3)}},
    {"BatchNorm", KW("axis", "-1", "momentum", "0.7"), 3, {SH(6, 10), SH(10), SH(10)}, -1, 1, -1, 0, 0, 1e-5, 1e-4, 2,
     {SH(10), SH(10)}},
    {"Activation", KW("act_type", "relu"), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"Activation", KW("act_type", "tanh"), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"Activation", KW("act_type", "sigmoid"), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"Activation", KW("act_type", "softsign"), 1, {SH(4, 5, 6)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"Pooling", KW("kernel", "(2,2)", "stride", "(2,2)", "pool_type", "max"), 1, {SH(2, 3, 8, 8)}, -2, 2, -1, 0, 0,
     1e-6, 1e-5},
    {"Pooling", KW("kernel", "(3,3)", "stride", "(2,2)", "pad", "(1,1)", "pool_type", "avg"), 1, {SH(2, 3, 9, 9)}, -2,
     2, -1, 0, 0, 1e-6, 1e-5},
    {"Pooling", KW("kernel", "(3,3)", "stride", "(2,2)", "pad", "(1,1)", "pool_type", "avg", "count_include_pad",
                   "False"),
     1, {SH(2, 3, 9, 9)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"Pooling", KW("kernel", "(1,1)", "global_pool", "True", "pool_type", "avg"), 1, {SH(2, 4, 5, 5)}, -2, 2, -1, 0,
     0, 1e-6, 1e-5},
    {"softmax", KW("axis", "1"), 1, {SH(4, 5, 3)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"SoftmaxOutput", KW(NULL), 2, {SH(8, 10), SH(8)}, -2, 2, 1, 10, 1, 1e-6, 1e-5},
    {"SoftmaxOutput", KW("normalization", "valid", "use_ignore", "True", "ignore_label", "3"), 2, {SH(8, 10), SH(8)},
     -2, 2, 1, 10, 1, 1e-6, 1e-5},
    {"SoftmaxOutput", KW("multi_output", "True", "normalization", "batch"), 2, {SH(2, 5, 3, 4), SH(2, 3, 4)}, -2, 2, 1,
     5, 1, 1e-6, 1e-5},
    {"ElementWiseSum", KW("num_args", "3"), 3, {SH(4, 5), SH(4, 5), SH(4, 5)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"sum", KW("axis", "(1,)", "keepdims", "True"), 1, {SH(3, 4, 5)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"sum", KW(NULL), 1, {SH(3, 4, 5)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"mean", KW("axis", "(0, 2)"), 1, {SH(3, 4, 5)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"mean", KW("axis", "(1,)", "exclude", "True"), 1, {SH(3, 4, 5)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"max", KW("axis", "(0,)"), 1, {SH(6, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"min", KW("axis", "(1,)"), 1, {SH(6, 7)}, -2, 2, -1, 0, 0, 1e-6, 1e-5},
    {"prod", KW("axis", "(1,)"), 1, {SH(4, 3)}, 0.5, 2, -1, 0, 0, 1e-6, 1e-5},
    {"norm", KW(NULL), 1, {SH(4, 6)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"norm", KW("ord", "1", "axis", "(1,)"), 1, {SH(4, 6)}, -2, 2, -1, 0, 0, 1e-5, 1e-5},
    {"clip", KW("a_min", "-0.5", "a_max", "0.7"), 1, {SH(5, 7)}, -2, 2, -1, 0, 0, 0, 0},
};

Test(gpu_ops, every_op_matches_the_cpu_forward_and_backward) {
    need_gpu();
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) check_case(&k_cases[i], NULL);
}

static const opcase k_convs[] = {
    {"Convolution", KW("kernel", "(3,3)", "num_filter", "4", "pad", "(1,1)"), 3, {SH(2, 3, 8, 8), SH(4, 3, 3, 3), SH(4)},
     -1, 1, -1, 0, 0, 1e-4, 1e-4},
    {"Convolution", KW("kernel", "(3,3)", "num_filter", "6", "stride", "(2,2)", "dilate", "(2,2)", "num_group", "2",
                       "no_bias", "True"),
     2, {SH(2, 4, 11, 11), SH(6, 2, 3, 3)}, -1, 1, -1, 0, 0, 1e-4, 1e-4},
    {"Convolution", KW("kernel", "(5,5)", "num_filter", "8"), 3, {SH(3, 1, 12, 12), SH(8, 1, 5, 5), SH(8)}, -1, 1, -1,
     0, 0, 1e-4, 1e-4},
    /* cuDNN's algorithms timed (cudnnFind); the direct impl ignores it. */
    {"Convolution", KW("kernel", "(3,3)", "num_filter", "8", "pad", "(1,1)", "cudnn_tune", "fastest"), 3,
     {SH(4, 3, 16, 16), SH(8, 3, 3, 3), SH(8)}, -1, 1, -1, 0, 0, 1e-4, 1e-4},
    {"Convolution", KW("kernel", "(3,3)", "num_filter", "8", "cudnn_tune", "limited_workspace", "workspace", "1"), 3,
     {SH(4, 3, 16, 16), SH(8, 3, 3, 3), SH(8)}, -1, 1, -1, 0, 0, 1e-4, 1e-4},
};

Test(gpu_ops, convolution_cudnn_and_direct_match_the_cpu) {
    need_gpu();
    const char *impls[2] = {"cudnn", "direct"};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof k_convs / sizeof k_convs[0]; i++) check_case(&k_convs[i], impls[k]);
}

/* Optimizer updates through mxp_invoke: weight output and states. */
Test(gpu_ops, optimizer_updates_match_the_cpu) {
    need_gpu();
    static const struct {
        const char *op;
        int n_in;
        const char *kw[14];
    } k_opts[] = {
        {"sgd_update", 2, {"lr", "0.1", "wd", "0.01", "rescale_grad", "0.5", "clip_gradient", "0.3", NULL}},
        {"sgd_mom_update", 3, {"lr", "0.1", "momentum", "0.9", "wd", "0.01", NULL}},
        {"adam_update", 4, {"lr", "0.01", "beta1", "0.8", "beta2", "0.9", "epsilon", "1e-6", "wd", "0.001", NULL}},
        {"rmsprop_update", 3, {"lr", "0.01", "gamma1", "0.9", "clip_weights", "0.5", NULL}},
    };
    int64_t shape[2] = {7, 9};
    for (size_t c = 0; c < sizeof k_opts / sizeof k_opts[0]; c++) {
        float *res[2][5];
        for (int d = 0; d < 2; d++) {
            mxp_device dev = d ? GPU : CPU;
            mxp_ndarray *in[4];
            for (int i = 0; i < k_opts[c].n_in; i++) {
                float v[63];
                fill(v, 63, 31 + (uint64_t)i, i >= 2 ? 0.0 : -1.0, 1.0);
                in[i] = from_host(v, shape, 2, dev);
            }
            int nkw = 0;
            const char *keys[7], *vals[7];
            for (; k_opts[c].kw[2 * nkw]; nkw++) {
                keys[nkw] = k_opts[c].kw[2 * nkw];
                vals[nkw] = k_opts[c].kw[2 * nkw + 1];
            }
            int n_out = 1;
            mxp_ndarray *out[1] = {NULL};
            cr_assert_eq(mxp_invoke(k_opts[c].op, k_opts[c].n_in, in, &n_out, out, nkw, keys, vals), MXP_OK, "%s: %s",
                         k_opts[c].op, mxp_last_error());
            int64_t n;
            res[d][0] = to_host(out[0], &n);
            for (int i = 2; i < k_opts[c].n_in; i++) res[d][i] = to_host(in[i], &n);
            mxp_ndarray_release(out[0]);
            for (int i = 0; i < k_opts[c].n_in; i++) mxp_ndarray_release(in[i]);
        }
        opcase cc = {k_opts[c].op, {NULL}, 0, {{0}}, 0, 0, -1, 0, 0, 1e-6, 1e-5};
        compare(&cc, "new weight", 0, res[0][0], res[1][0], 63);
        for (int i = 2; i < k_opts[c].n_in; i++) compare(&cc, "state", i, res[0][i], res[1][i], 63);
        free(res[0][0]);
        free(res[1][0]);
        for (int i = 2; i < k_opts[c].n_in; i++) {
            free(res[0][i]);
            free(res[1][i]);
        }
    }
}

Test(gpu_ops, copies_between_host_and_devices_keep_the_bytes) {
    need_gpu();
    float v[1000], back[1000];
    fill(v, 1000, 5, -100, 100);
    int64_t shape[1] = {1000};
    mxp_ndarray *g1 = from_host(v, shape, 1, GPU), *g2 = NULL, *c = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, GPU, &g2), MXP_OK);
    cr_assert_eq(mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, CPU, &c), MXP_OK);
    cr_assert_eq(mxp_ndarray_copy(g1, g2), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_copy(g2, c), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_ndarray_sync_copy_to(c, back, sizeof back), MXP_OK);
    cr_assert_eq(memcmp(v, back, sizeof v), 0);
    mxp_ndarray_release(g1);
    mxp_ndarray_release(g2);
    mxp_ndarray_release(c);
}

/* Same seed, same dropout mask on either device: the gpu kernel expands
 * the op's Philox range with the CPU's mapping. */
Test(gpu_ops, dropout_masks_are_equal_across_devices) {
    need_gpu();
    int64_t shape[2] = {37, 53};
    float x[37 * 53], got[2][37 * 53];
    fill(x, 37 * 53, 9, 0.5, 1.5);
    for (int d = 0; d < 2; d++) {
        mxp_device dev = d ? GPU : CPU;
        cr_assert_eq(mxp_random_seed_device(dev, 42), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray *in = from_host(x, shape, 2, dev), *out[1] = {NULL};
        mxp_invoke_opts o;
        memset(&o, 0, sizeof o);
        o.is_train = 1;
        const char *keys[1] = {"p"}, *vals[1] = {"0.3"};
        int n_out = 1;
        cr_assert_eq(mxp_invoke_ex("Dropout", 1, &in, &n_out, out, 1, keys, vals, &o), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(mxp_ndarray_sync_copy_to(out[0], got[d], sizeof got[d]), MXP_OK);
        mxp_ndarray_release(in);
        mxp_ndarray_release(out[0]);
    }
    int dropped = 0;
    for (int i = 0; i < 37 * 53; i++) {
        cr_assert_eq(got[0][i], got[1][i], "element %d: cpu %.9g gpu %.9g", i, got[0][i], got[1][i]);
        dropped += got[0][i] == 0.0f;
    }
    cr_assert(dropped > 0 && dropped < 37 * 53, "some but not all elements dropped (%d)", dropped);
}
