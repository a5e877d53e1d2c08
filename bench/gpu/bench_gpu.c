/* bench/gpu/bench_gpu.c — the mxplug side of `make bench-gpu`: on gpu(0),
 * Convolution forward and forward+backward times for ResNet-20's layer
 * shapes (batch 128, CIFAR layout) with each gpu impl (cudnn, direct), and
 * LeNet training samples/s (symbol from examples/lenet, batch 128, random
 * data held on the gpu, SGD momentum 0.9 through mxp_optimizer_update).
 * ResNet-20 training is not measured yet: there is no ResNet-20 symbol in
 * examples/ to load, and the line says so.  run.sh puts PyTorch's figures beside these.
 * Without a GPU it prints one "skipped" line and exits 0.
 * usage: bench_gpu LENET.json STEPS
 * prints: mxplug conv <layer> <fwd|fwdbwd> impl=<impl> ms=<median>
 *         mxplug train lenet sps=<x>
 *         mxplug train resnet20 skipped: <why> */
#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mxp_device GPU = {MXP_DEV_GPU, 0};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "bench-gpu: %s: %s\n", what, mxp_last_error());
    exit(1);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Fill an array with uniform values in [-1, 1) through a host buffer. */
static void fill_random(mxp_ndarray *a, unsigned seed) {
    int64_t n = mxp_ndarray_size(a);
    float *v = malloc((size_t)n * sizeof(float));
    if (!v) die("out of memory");
    srand(seed);
    for (int64_t i = 0; i < n; i++) v[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
    if (mxp_ndarray_sync_copy_from(a, v, (size_t)n * sizeof(float))) die("copy to gpu");
    free(v);
}

typedef struct layer {
    const char *name;
    int c, f, hw, stride;
} layer;

/* ResNet-20 (CIFAR) 3x3 convolutions: distinct shapes, batch 128. */
static const layer k_layers[] = {
    {"a", 16, 16, 32, 1}, {"b", 16, 32, 32, 2}, {"c", 32, 32, 16, 1}, {"d", 32, 64, 16, 2}, {"e", 64, 64, 8, 1},
};

static void bench_conv(const layer *l, const char *impl, int runs) {
    char nf[16], st[16];
    snprintf(nf, sizeof nf, "%d", l->f);
    snprintf(st, sizeof st, "(%d,%d)", l->stride, l->stride);
    const char *keys[5] = {"kernel", "num_filter", "pad", "stride", "no_bias"};
    const char *vals[5] = {"(3,3)", nf, "(1,1)", st, "True"};
    mxp_symbol *s;
    if (mxp_symbol_create("Convolution", "conv", 5, keys, vals, &s) || mxp_symbol_compose(s, NULL, 0, NULL, NULL))
        die("Convolution symbol");
    if (mxp_op_set_impl("Convolution", impl)) die("mxp_op_set_impl");
    mxp_shape shp;
    memset(&shp, 0, sizeof shp);
    shp.ndim = 4;
    shp.dims[0] = 128;
    shp.dims[1] = l->c;
    shp.dims[2] = shp.dims[3] = l->hw;
    const char *names[1] = {"conv_data"};
    mxp_executor *ex;
    if (mxp_executor_simple_bind(s, GPU, 1, names, &shp, MXP_REQ_WRITE, 0, NULL, &ex)) die("bind");
    int n_args;
    mxp_ndarray *const *args;
    mxp_executor_args(ex, &n_args, &args);
    for (int i = 0; i < n_args; i++) fill_random(args[i], 7 + (unsigned)i);
    for (int pass = 0; pass < 2; pass++) {
        double t[64];
        for (int r = 0; r < runs + 3; r++) {
            double t0 = now();
            if (mxp_executor_forward(ex, pass) || (pass && mxp_executor_backward(ex, 0, NULL)) || mxp_executor_wait(ex))
                die("run");
            if (r >= 3) t[r - 3] = (now() - t0) * 1e3;
        }
        qsort(t, (size_t)runs, sizeof t[0], cmp_d);
        printf("mxplug conv %s %s impl=%s ms=%.3f\n", l->name, pass ? "fwdbwd" : "fwd", impl, t[runs / 2]);
        fflush(stdout);
    }
    mxp_executor_free(ex);
    mxp_symbol_release(s);
    mxp_op_set_impl("Convolution", "auto");
}

static void bench_lenet(const char *json_path, int steps) {
    mxp_symbol *s;
    FILE *f = fopen(json_path, "rb");
    if (!f) {
        fprintf(stderr, "bench-gpu: cannot open %s\n", json_path);
        exit(1);
    }
    static char json[1 << 20];
    size_t n = fread(json, 1, sizeof json - 1, f);
    fclose(f);
    json[n] = 0;
    if (mxp_symbol_load_json(json, &s)) die("LeNet symbol");
    mxp_shape shapes[2];
    memset(shapes, 0, sizeof shapes);
    shapes[0].ndim = 4;
    shapes[0].dims[0] = 128;
    shapes[0].dims[1] = 1;
    shapes[0].dims[2] = shapes[0].dims[3] = 28;
    shapes[1].ndim = 1;
    shapes[1].dims[0] = 128;
    const char *names[2] = {"data", "softmax_label"};
    mxp_executor *ex;
    if (mxp_executor_simple_bind(s, GPU, 2, names, shapes, MXP_REQ_WRITE, 2, names, &ex)) die("bind LeNet");
    int n_args;
    mxp_ndarray *const *args, *const *grads;
    const char *const *arg_names;
    mxp_executor_args(ex, &n_args, &args);
    mxp_executor_grads(ex, &n_args, &grads);
    mxp_symbol_list_arguments(s, &n_args, &arg_names);
    mxp_init xav = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0), zero = mxp_init_zeros();
    for (int i = 0; i < n_args; i++) {
        if (!strcmp(arg_names[i], "softmax_label")) {
            float lab[128];
            for (int k = 0; k < 128; k++) lab[k] = (float)(k % 10);
            if (mxp_ndarray_sync_copy_from(args[i], lab, sizeof lab)) die("labels");
        } else if (!strcmp(arg_names[i], "data")) {
            fill_random(args[i], 3);
        } else {
            size_t len = strlen(arg_names[i]);
            int bias = len >= 5 && !strcmp(arg_names[i] + len - 5, "_bias");
            if (mxp_init_array(bias ? &zero : &xav, args[i])) die("init");
        }
    }
    const char *ok[3] = {"learning_rate", "momentum", "rescale_grad"};
    const char *ov[3] = {"0.01", "0.9", "0.0078125"};
    mxp_optimizer *opt;
    if (mxp_optimizer_create("sgd", 3, ok, ov, &opt)) die("optimizer");
    double t0 = 0;
    for (int step = 0; step < steps + 5; step++) {
        if (step == 5) {
            if (mxp_executor_wait(ex)) die("warm-up");
            t0 = now();
        }
        if (mxp_executor_forward(ex, 1) || mxp_executor_backward(ex, 0, NULL)) die("step");
        for (int i = 0; i < n_args; i++)
            if (grads[i] && mxp_optimizer_update(opt, i, arg_names[i], args[i], grads[i])) die("update");
    }
    if (mxp_executor_wait(ex)) die("training");
    for (int i = 0; i < n_args; i++) mxp_ndarray_wait_to_read(args[i]);
    double dt = now() - t0;
    printf("mxplug train lenet sps=%.1f\n", (double)steps * 128.0 / dt);
    mxp_optimizer_free(opt);
    mxp_executor_free(ex);
    mxp_symbol_release(s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench_gpu LENET.json STEPS\n");
        return 2;
    }
    if (mxp_registry_init()) die("registry");
    int n = 0;
    if (mxp_device_count("gpu", &n) != MXP_OK) {
        printf("bench-gpu: skipped: no gpu device: %s\n", mxp_last_error());
        return 0;
    }
    if (n == 0) {
        printf("bench-gpu: skipped: no GPU (cudaGetDeviceCount reports 0 devices or no driver)\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof k_layers / sizeof k_layers[0]; i++) {
        bench_conv(&k_layers[i], "cudnn", 20);
        bench_conv(&k_layers[i], "direct", 5);
    }
    bench_lenet(argv[1], atoi(argv[2]));
    printf("mxplug train resnet20 skipped: no ResNet-20 symbol in examples/ to train yet\n");
    return 0;
}
