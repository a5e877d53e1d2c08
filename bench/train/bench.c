/* bench/train/bench.c — the mxplug side of `make bench-train`: train a net
 * from symbol JSON on Fashion-MNIST held in memory and report training
 * speed and test accuracy (run.sh puts it next to PyTorch's figures).
 *
 * Same setup as torch_train.py: pixels / 256 (MNISTIter's scaling), batch
 * 64, a fresh shuffle per epoch, the short last batch dropped
 * (NDArrayIter, last_batch discard), SGD momentum 0.9, lr 0.01 with
 * rescale_grad 1/64 (Module's default = mean loss), lr x0.1 for the
 * epochs from LR_DECAY_EPOCH (8, 0-based) on — a MultiFactorScheduler step
 * at update 8 * batches-per-epoch; without it LeNet ends its 10 epochs
 * still noisy at ~90.8% on both sides, with it ~91.5% — weights
 * Xavier(gaussian, in, 2) = N(0, 2/fan_in), biases 0, running train
 * accuracy per batch.  The training loop is mxp_module_fit; its time runs
 * from the end of the first batch (binding and initialization excluded)
 * to the end of fit, over all batches but the first.  Test accuracy:
 * mxp_module_score on the 10,000 t10k images.  Memory: a training binding
 * of the same net (simple_bind, gradients for parameters only) reports
 * planned intermediate storage vs allocating every value separately.
 *
 * With BENCH_SHARE_DIR set (run.sh sets it), the parameters are
 * initialized first (a fit of no epochs) and written there with every
 * batch's sample order (share_start), so PyTorch can run the identical
 * experiment; the timed fit then starts from those parameters.
 *
 * BENCH_INPUT pads the images (ResNet-20: 32 x 32), TRAIN_LIMIT trains on
 * the first N images only (input_side, make_iter), LR_STEPS replaces the
 * lr schedule's steps (updates, comma-separated; run.sh sets it for
 * ResNet-20).  BENCH_DUMP=DIR writes the trained parameters and aux states
 * to DIR/mxplug.{txt,bin} before scoring (diagnosis: compare_params.py).
 * BENCH_BATCH_TRACE=N prints the speed of every N batches to stderr with
 * its CLOCK_MONOTONIC time (diagnosis: a run's speed changed mid-process
 * when the host moved the vCPUs apart, docs/engine.md).
 *
 * usage: bench NET.json DATA_DIR EPOCHS [SEED]
 * prints: mxplug sps=<x> acc=<a> time=<s> train_acc=<b> mem_planned=<B> mem_naive=<B> first=<s>
 * (first: the fit's start to the end of its first batch, tuning included,
 * outside the timed span as torch_train.py's first batch is) */
#include <mxplug.h>
#include <mxplug/executor.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* The lr schedule both sides use (torch_train.py: LR_DECAY_EPOCH). */
#define LR_DECAY_EPOCH 8

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what) {
    fprintf(stderr, "bench-train: %s: %s\n", what, mxp_last_error());
    exit(1);
}

/* An IDX file (plain or gzipped) as float32 (pixels / 256 or labels). */
static float *load_idx(const char *dir, const char *base, int64_t *n, int64_t *item, int scale) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, base);
    if (access(path, R_OK)) snprintf(path, sizeof path, "%s/%s.gz", dir, base);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench-train: cannot open %s\n", path);
        exit(1);
    }
    unsigned char h[4], d[4];
    if (gzread(f, h, 4) != 4) { fprintf(stderr, "bench-train: %s: truncated header\n", path); exit(1); }
    int nd = h[3];
    int64_t dims[4] = {1, 1, 1, 1};
    for (int i = 0; i < nd && i < 4; i++) {
        if (gzread(f, d, 4) != 4) { fprintf(stderr, "bench-train: %s: truncated header\n", path); exit(1); }
        dims[i] = (int64_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
    }
    *n = dims[0];
    *item = dims[1] * dims[2];
    size_t total = (size_t)(*n * *item);
    unsigned char *raw = malloc(total);
    float *out = malloc(total * sizeof(float));
    if (!raw || !out || gzread(f, raw, (unsigned)total) != (int)total) {
        fprintf(stderr, "bench-train: short read in %s\n", path);
        exit(1);
    }
    gzclose(f);
    for (size_t i = 0; i < total; i++) out[i] = scale ? raw[i] / 256.0f : raw[i];
    free(raw);
    return out;
}

/* BENCH_INPUT=S (S >= 28): images zero-padded to S x S, centred (ResNet-20
 * takes 32 x 32); TRAIN_LIMIT=N: only the first N training images (a short
 * timing run of a slow net).  torch_train.py reads the same variables. */
static int input_side(void) {
    const char *v = getenv("BENCH_INPUT");
    int s = v && *v ? atoi(v) : 28;
    if (s < 28 || s > 1024) {
        fprintf(stderr, "bench-train: BENCH_INPUT=%s must be in [28, 1024]\n", v);
        exit(2);
    }
    return s;
}

static float *pad_images(float *x, int64_t n, int side) {
    if (side == 28) return x;
    int off = (side - 28) / 2;
    float *p = calloc((size_t)(n * side * side), sizeof *p);
    if (!p) { fprintf(stderr, "bench-train: out of memory padding images\n"); exit(1); }
    for (int64_t i = 0; i < n; i++)
        for (int r = 0; r < 28; r++)
            memcpy(p + (i * side + r + off) * side + off, x + (i * 28 + r) * 28, 28 * sizeof *p);
    free(x);
    return p;
}

static mxp_iter *make_iter(const char *dir, const char *split, int flat, int shuffle, uint64_t seed, int last,
                           int64_t *n_samples) {
    char ib[64], lb[64];
    snprintf(ib, sizeof ib, "%s-images-idx3-ubyte", split);
    snprintf(lb, sizeof lb, "%s-labels-idx1-ubyte", split);
    int64_t n, item, nl, one;
    float *x = load_idx(dir, ib, &n, &item, 1);
    float *y = load_idx(dir, lb, &nl, &one, 0);
    const char *limit = getenv("TRAIN_LIMIT");
    if (!strcmp(split, "train") && limit && atoll(limit) > 0 && atoll(limit) < n) n = atoll(limit);
    int side = flat ? 28 : input_side();
    if (!flat) {
        x = pad_images(x, n, side);
        item = (int64_t)side * side;
    }
    *n_samples = n;
    const mxp_device cpu = {MXP_DEV_CPU, 0};
    int64_t xs[4] = {n, 1, side, side}, fs[2] = {n, item}, ys[1] = {n};
    mxp_ndarray *xa, *ya;
    if (mxp_ndarray_create(flat ? fs : xs, flat ? 2 : 4, MXP_DTYPE_F32, cpu, &xa) ||
        mxp_ndarray_sync_copy_from(xa, x, (size_t)(n * item) * sizeof(float)) ||
        mxp_ndarray_create(ys, 1, MXP_DTYPE_F32, cpu, &ya) || mxp_ndarray_sync_copy_from(ya, y, (size_t)n * sizeof(float)))
        die("loading data");
    free(x);
    free(y);
    mxp_iter *it;
    if (mxp_iter_create_ndarray(1, &xa, 1, &ya, 64, shuffle, seed, last, &it)) die("NDArrayIter");
    mxp_ndarray_release(xa);
    mxp_ndarray_release(ya);
    return it;
}

typedef struct timing {
    double t_first;   /* end of the first batch */
    int64_t batches;
    double train_acc;
    int64_t trace_every; /* BENCH_BATCH_TRACE=N: the rate of every N batches on stderr */
    double t_trace;
} timing;

static void on_batch(void *user, int epoch, int64_t nbatch, const char *metric, double value) {
    (void)metric;
    (void)value;
    timing *t = user;
    if (epoch == 0 && nbatch == 1) t->t_first = t->t_trace = now();
    t->batches++;
    if (t->trace_every > 0 && t->t_first > 0 && t->batches > 1 && (t->batches - 1) % t->trace_every == 0) {
        double tn = now();
        fprintf(stderr, "batch %lld t=%.3f sps=%.0f\n", (long long)t->batches, tn, (double)(t->trace_every * 64) / (tn - t->t_trace));
        t->t_trace = tn;
    }
}

static void on_epoch(void *user, int epoch, const char *metric, double train_value, double val_value) {
    (void)epoch;
    (void)metric;
    (void)val_value;
    ((timing *)user)->train_acc = train_value;
}

/* Write the module's parameters to DIR/PREFIX.txt (name and shape per
 * line) + DIR/PREFIX.bin (float32 values in that order); with_aux adds
 * every BatchNorm's moving_mean / moving_var (named after its *_gamma). */
static void write_params(mxp_module *mod, const char *dir, const char *prefix, int with_aux) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.txt", dir, prefix);
    FILE *txt = fopen(path, "w");
    snprintf(path, sizeof path, "%s/%s.bin", dir, prefix);
    FILE *bin = fopen(path, "wb");
    if (!txt || !bin) { fprintf(stderr, "bench-train: cannot write in %s\n", dir); exit(1); }
    int np = mxp_module_num_params(mod);
    for (int i = 0; i < np * (with_aux ? 3 : 1); i++) {
        const char *name = mxp_module_param_name(mod, i % np);
        char aux[512];
        if (i >= np) { /* the aux states of a *_gamma */
            size_t l = strlen(name);
            if (l < 6 || strcmp(name + l - 6, "_gamma")) continue;
            snprintf(aux, sizeof aux, "%.*s_%s", (int)(l - 6), name, i < 2 * np ? "moving_mean" : "moving_var");
            name = aux;
        }
        mxp_ndarray *a = mxp_module_param(mod, name);
        if (!a) { fprintf(stderr, "bench-train: no parameter or aux state '%s'\n", name); exit(1); }
        int64_t n = mxp_ndarray_size(a);
        float *v = malloc((size_t)n * sizeof *v);
        if (!v || mxp_ndarray_sync_copy_to(a, v, (size_t)n * sizeof *v)) die("reading a parameter");
        fprintf(txt, "%s", name);
        for (int k = 0; k < mxp_ndarray_ndim(a); k++) fprintf(txt, " %lld", (long long)mxp_ndarray_shape(a)[k]);
        fprintf(txt, "\n");
        if (fwrite(v, sizeof *v, (size_t)n, bin) != (size_t)n) {
            fprintf(stderr, "bench-train: writing %s/%s.bin failed\n", dir, prefix);
            exit(1);
        }
        free(v);
    }
    if (fclose(txt) || fclose(bin)) { fprintf(stderr, "bench-train: writing %s/%s failed\n", dir, prefix); exit(1); }
}

/* Write what the PyTorch side needs to run the identical experiment into
 * DIR: params.txt / params.bin (write_params: the initial values) and
 * order.bin (int32 sample indices of every batch of every epoch, as the
 * training iterator will produce them). */
static void share_start(mxp_module *mod, const char *dir, int flat, const char *data_dir, uint64_t seed,
                        int epochs) {
    char path[4096];
    write_params(mod, dir, "params", 0);
    int64_t n;
    mxp_iter *it = make_iter(data_dir, "train", flat, 1, seed, MXP_LAST_BATCH_DISCARD, &n);
    snprintf(path, sizeof path, "%s/order.bin", dir);
    FILE *ord = fopen(path, "wb");
    if (!ord) { fprintf(stderr, "bench-train: cannot write %s\n", path); exit(1); }
    for (int e = 0; e < epochs; e++) {
        int has = 0;
        if (mxp_iter_set_epoch(it, (uint64_t)e)) die("set_epoch");
        while (mxp_iter_next(it, &has) == MXP_OK && has) {
            int64_t k;
            const uint64_t *idx = mxp_iter_index(it, &k);
            if (!idx) { fprintf(stderr, "bench-train: NDArrayIter reports no indices\n"); exit(1); }
            for (int64_t j = 0; j < k; j++) {
                int32_t v = (int32_t)idx[j];
                if (fwrite(&v, sizeof v, 1, ord) != 1) {
                    fprintf(stderr, "bench-train: writing %s failed\n", path);
                    exit(1);
                }
            }
        }
    }
    fclose(ord);
    mxp_iter_free(it);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s NET.json DATA_DIR EPOCHS [SEED]\n", argv[0]);
        return 2;
    }
    const char *json = argv[1], *dir = argv[2];
    int epochs = atoi(argv[3]);
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    mxp_symbol *sym;
    if (mxp_symbol_load_file(json, &sym)) die(json);
    const char *dtype = getenv("BENCH_DTYPE"); /* bfloat16: as mxplug train --dtype bfloat16 */
    if (dtype && !strcmp(dtype, "bfloat16")) {
        mxp_symbol *amp = NULL;
        if (mxp_symbol_amp_convert(sym, MXP_DTYPE_BF16, 0, NULL, &amp)) die("bfloat16 conversion");
        mxp_symbol_release(sym);
        sym = amp;
    }
    /* Flat input if the net infers with (64, 784) (the MLP), else images. */
    const char *dn = "data";
    mxp_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = 2;
    s.dims[0] = 64;
    s.dims[1] = 784;
    int complete = 0, flat = mxp_symbol_infer_shape(sym, 1, &dn, &s, NULL, NULL, NULL, NULL, NULL, NULL, &complete) == MXP_OK && complete;
    if (!flat) {
        s.ndim = 4;
        s.dims[1] = 1;
        s.dims[2] = s.dims[3] = input_side();
    }

    /* Planned vs naive training memory of this net at batch 64. */
    uint64_t planned = 0, naive = 0;
    {
        const char *no_grad[] = {"data", "softmax_label"};
        mxp_executor *ex;
        const mxp_device cpu = {MXP_DEV_CPU, 0};
        if (mxp_executor_simple_bind(sym, cpu, 1, &dn, &s, MXP_REQ_WRITE, 2, no_grad, &ex)) die("simple_bind");
        mxp_executor_memory(ex, &planned, &naive);
        mxp_executor_free(ex);
    }

    int64_t n_train, n_test;
    mxp_iter *train = make_iter(dir, "train", flat, 1, seed, MXP_LAST_BATCH_DISCARD, &n_train);
    mxp_iter *test = make_iter(dir, "t10k", flat, 0, 0, MXP_LAST_BATCH_PAD, &n_test); /* every sample scored */
    mxp_module *mod;
    const char *data_names[] = {"data"}, *label_names[] = {"softmax_label"};
    if (mxp_module_create(sym, 1, data_names, 1, label_names, &mod)) die("module");
    const char *keys[] = {"learning_rate", "momentum"}, *vals[] = {"0.01", "0.9"};
    mxp_init xavier = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    timing t = {0};
    const char *trace = getenv("BENCH_BATCH_TRACE");
    if (trace) t.trace_every = atoll(trace);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.num_epoch = epochs;
    o.optimizer = "sgd";
    o.n_opt_kwargs = 2;
    o.opt_keys = keys;
    o.opt_vals = vals;
    o.seed = seed;
    o.initializer = &xavier;
    o.eval_metric = "acc";
    o.batch_cb = on_batch;
    o.epoch_cb = on_epoch;
    o.user = &t;
    /* lr x0.1 from epoch LR_DECAY_EPOCH on (0-based), in updates, or at
     * the updates LR_STEPS lists (comma-separated; torch_train.py reads it
     * too). */
    int64_t lr_steps[16] = {(int64_t)LR_DECAY_EPOCH * (n_train / 64)};
    const char *ls = getenv("LR_STEPS");
    if (ls && *ls) {
        char *end = (char *)ls;
        while (*end && o.n_lr_steps < 16) {
            lr_steps[o.n_lr_steps++] = strtoll(end, &end, 10);
            if (*end == ',') end++;
            else if (*end) break;
        }
        if (*end || !o.n_lr_steps) {
            fprintf(stderr, "bench-train: LR_STEPS=%s: want up to 16 comma-separated update counts\n", ls);
            return 2;
        }
    } else if (epochs > LR_DECAY_EPOCH)
        o.n_lr_steps = 1;
    o.lr_steps = lr_steps;
    o.lr_factor = 0.1;
    const char *share = getenv("BENCH_SHARE_DIR");
    if (share && *share) {
        /* Initialize (a fit of no epochs), then hand the start to PyTorch. */
        o.num_epoch = 0;
        if (mxp_module_fit(mod, train, NULL, &o)) die("fit (initialization)");
        o.num_epoch = epochs;
        share_start(mod, share, flat, dir, seed, epochs);
    }
    double t_fit = now();
    if (mxp_module_fit(mod, train, NULL, &o)) die("fit");
    double t_end = now();
    double el = t_end - t.t_first;
    double sps = el > 0 ? (double)((t.batches - 1) * 64) / el : 0;
    double acc = 0;
    const char *dump = getenv("BENCH_DUMP"); /* diagnosis: the trained parameters and aux states */
    if (dump && *dump) write_params(mod, dump, "mxplug", 1);
    if (mxp_iter_set_epoch(test, 0) || mxp_module_score(mod, test, "acc", &acc)) die("score");
    printf("mxplug sps=%.0f acc=%.4f time=%.1f train_acc=%.4f mem_planned=%llu mem_naive=%llu first=%.3f\n", sps, acc,
           el, t.train_acc, (unsigned long long)planned, (unsigned long long)naive, t.t_first - t_fit);
    mxp_module_free(mod);
    mxp_iter_free(train);
    mxp_iter_free(test);
    mxp_symbol_release(sym);
    return 0;
}
