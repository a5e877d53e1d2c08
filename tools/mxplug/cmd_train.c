/* cmd_train.c — `mxplug train`: train a network in MXNet symbol JSON on
 * an MNIST-format data set with the training library's Module
 * (mxp_module_fit), reporting progress (progress.c) and writing an MXNet
 * checkpoint after every epoch:
 *   PREFIX-symbol.json, PREFIX-%04d.params (arg:/aux:), PREFIX-%04d.states
 * where %04d is the number of epochs done (MXNet's do_checkpoint).
 *
 * Data: `mnist:DIR` = DIR/train-* for training (shuffled by --seed and the
 * epoch), DIR/t10k-* for validation.  The input layout (flat (N,784) or
 * image (N,1,28,28)) follows the net: shape inference decides, --flat /
 * --no-flat override.  --load-epoch E resumes from PREFIX's epoch-E
 * checkpoint (parameters, optimizer states, RNG position) and trains
 * epochs E+1..--epochs.
 * `rec:PREFIX` (rec_data.c): image records PREFIX_train.rec / _val.rec read
 * by ImageRecordIter with --data-shape and the augmentation options.
 * --kv-store trains through a KVStore; with a dist_* type every worker
 * (one process each, started by mpirun) reads part `rank` of `num_workers`
 * of MNIST data and only rank 0 prints and writes checkpoints; with
 * dist_async the last MXP_KV_NUM_SERVERS ranks only serve (run_server).
 * --device gpu:N binds the module on a GPU (device_opt.c checks it first:
 * without one, one clear error and exit status 1). */
#include "model.h"
#include "device_opt.h"
#include "curves.h"
#include "progress.h"
#include "rec_data.h"
#include "pack_stats.h"

#include <float.h>
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <limits.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mxplug train --net FILE.json --data mnist:DIR [options]\n"
            "\n"
            "Train a network (MXNet symbol JSON) on MNIST-format IDX files.\n"
            "\n"
            "  --net FILE          network, e.g. examples/lenet/lenet-symbol.json\n"
            "  --data mnist:DIR    DIR/train-images-idx3-ubyte[.gz] etc.; t10k-* validates\n"
            "  --data rec:PREFIX   image records PREFIX_train.rec (+ PREFIX_val.rec), see im2rec;\n"
            "                      with --data-shape C,H,W, --rand-crop, --rand-mirror and\n"
            "                      --aug key=value,... (more ImageRecordIter parameters)\n"
            "  --epochs N          train until N epochs are done (default 10)\n"
            "  --batch-size B      (default 64)\n"
            "  --optimizer NAME    sgd (default) or adam\n"
            "  --lr X              learning rate (default 0.01 for sgd, 0.001 for adam)\n"
            "  --momentum M        sgd momentum (default 0.9)\n"
            "  --wd W              weight decay (default 0)\n"
            "  --lr-factor F       multiply the learning rate by F at each --lr-step-epochs\n"
            "                      epoch (MXNet's MultiFactorScheduler; default 0.1)\n"
            "  --lr-step-epochs L  comma-separated epochs after which the rate drops, e.g. 1,2\n"
            "  --allow-nan         go on when the loss or weights become NaN/inf (default: stop\n"
            "                      with an error naming the epoch and batch, saving nothing)\n"
            "  --seed S            initialization and shuffling seed (default 0)\n"
            "  --model-prefix P    write P-symbol.json, P-%%04d.params, P-%%04d.states\n"
            "                      after every epoch (default: the net's base name, in\n"
            "                      the current directory)\n"
            "  --load-epoch E      resume from P's epoch-E checkpoint\n"
            "  --plot FILE.svg     draw train/validation metric and samples/s per epoch\n"
            "  --log-json FILE     one JSON object per epoch, one per line\n"
            "  --flat | --no-flat  force (N,784) / (N,1,28,28) input (default: inferred)\n"
            "  --no-progress       no live progress bar even on a terminal\n"
            "  --stats             at the end, per pack: calls and time of each implementation\n"
            "                      that ran, and the counters the pack publishes\n"
            "  --profile FILE      write a Chrome-trace JSON of the training (chrome://tracing,\n"
            "                      ui.perfetto.dev): ops per engine worker, queue waits,\n"
            "                      copies, memory, data loading; other ranks: FILE.rankN\n"
            "  --profile-summary   at the end, the per-op table (calls, total/mean/min/max\n"
            "                      ms, %% of wall time per op and implementation)\n"
            "  --frequent N        without a terminal: a Speedometer line every N batches\n"
            "                      (default 50; also every 10 s; 0: none)\n"
            "  --impl OP=POLICY    implementation of an op for this run, e.g.\n"
            "                      Convolution=direct or Convolution=winograd,auto\n"
            "                      (repeatable; as MXP_IMPL_<OP>, checked at start)\n"
            "  --device DEV        cpu (default) or gpu:N: where parameters, gradients and\n"
            "                      the network's ops live (batches are copied in)\n"
            "  --dtype T           float32 (default) or bfloat16: Convolution and\n"
            "                      FullyConnected on bf16 activations and weights (amp_cast\n"
            "                      around them), fp32 master weights, optimizer and the\n"
            "                      other ops; kernel path by CPUID or MXP_BF16_KERNEL\n"
            "  --kv-store TYPE     local, device, dist_sync, dist_sync_device, dist_async:\n"
            "                      train through a KVStore; with dist_* start one process\n"
            "                      per worker under mpirun (each reads its shard, --batch-size\n"
            "                      is per worker, rank 0 prints and checkpoints); dist_async\n"
            "                      also needs server ranks: the last MXP_KV_NUM_SERVERS\n"
            "                      (default 1) serve\n"
            "  --shard MODE        how workers split MNIST data: strided (default: one global\n"
            "                      order per epoch, worker k takes every n-th sample from k, so\n"
            "                      n workers x B train exactly as 1 worker x n*B) or contiguous\n"
            "                      (MXNet's num_parts slices, each shuffled by itself)\n"
            "\n"
            "One line per epoch on stdout (train metric, validation accuracy, time,\n"
            "samples/s); on a terminal a live bar on stderr as well.\n");
}

typedef struct train_ctx {
    progress prog;
    curves curves; /* --plot / --log-json (curves.c) */
} train_ctx;

static void on_batch(void *user, int epoch, int64_t nbatch, const char *metric, double value) {
    train_ctx *c = user;
    progress_batch(&c->prog, epoch, nbatch, metric, value);
}

static void on_epoch(void *user, int epoch, const char *metric, double train_value, double val_value) {
    train_ctx *c = user;
    double t0 = c->prog.train_seconds;
    int64_t n0 = c->prog.train_samples;
    progress_epoch_end(&c->prog, epoch, metric, train_value, val_value);
    curves_epoch(&c->curves, epoch, metric, train_value, val_value, c->prog.train_seconds - t0,
                 c->prog.train_samples - n0);
}

/* Default prefix: the net file's base name without "-symbol.json" /
 * ".json", in the current directory (never next to the net, which is often
 * a file under version control). */
static void default_prefix(const char *net, char *buf, size_t cap) {
    const char *base = strrchr(net, '/');
    snprintf(buf, cap, "%s", base ? base + 1 : net);
    size_t n = strlen(buf);
    if (n > 12 && !strcmp(buf + n - 12, "-symbol.json")) buf[n - 12] = 0;
    else if (n > 5 && !strcmp(buf + n - 5, ".json")) buf[n - 5] = 0;
}

enum { MAX_STEP_EPOCHS = 64 };

/* --lr-step-epochs "1,3,5": strictly increasing epochs >= 1. */
static int parse_step_epochs(const char *cmd, const char *v, int64_t *out, int *n) {
    const char *p = v;
    *n = 0;
    for (;;) {
        char *end = NULL;
        errno = 0;
        long long e = strtoll(p, &end, 10);
        if (end == p || errno || e < 1 || e > 100000 || (*end && *end != ','))
            return cli_usage_error(cmd, "--lr-step-epochs '%s': use increasing epoch numbers >= 1, e.g. 1,2", v);
        if (*n == MAX_STEP_EPOCHS) return cli_usage_error(cmd, "--lr-step-epochs '%s': at most %d epochs", v, MAX_STEP_EPOCHS);
        if (*n && e <= out[*n - 1]) return cli_usage_error(cmd, "--lr-step-epochs '%s': epochs must increase", v);
        out[(*n)++] = e;
        if (!*end) return 0;
        p = end + 1;
    }
}

/* True when the checkpoint's PREFIX-symbol.json is the net file itself:
 * writing it would overwrite the user's input. */
static int prefix_overwrites_net(const char *prefix, const char *net) {
    char sym[4096], a[PATH_MAX], b[PATH_MAX];
    snprintf(sym, sizeof sym, "%s-symbol.json", prefix);
    if (!realpath(sym, a) || !realpath(net, b)) return 0;
    return strcmp(a, b) == 0;
}

/* --profile FILE (rank r > 0 of several: FILE.rankR) and --profile-summary. */
static int profile_report(FILE *out, const char *file, int summary, int rank, int workers) {
    int st = CLI_OK, rc;
    if (file) {
        char path[4096];
        if (workers > 1 && rank > 0) snprintf(path, sizeof path, "%s.rank%d", file, rank);
        else snprintf(path, sizeof path, "%s", file);
        if ((rc = mxp_profiler_dump_file(path))) {
            cli_fail(rc, "writing the profile");
            st = CLI_FAIL;
        } else {
            fprintf(out, "train: profile written to %s (open it in chrome://tracing or ui.perfetto.dev)\n", path);
        }
    }
    if (summary) {
        char *table = NULL;
        if ((rc = mxp_profiler_dumps(0, &table))) {
            cli_fail(rc, "the profile table");
            return CLI_FAIL;
        }
        fputs(table, out);
        mxp_free(table);
    }
    return st;
}

int cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    const char *net = NULL, *data = NULL, *opt = "sgd", *prefix = NULL, *v;
    const char *plot = NULL, *log_json = NULL;
    long long epochs = 10, batch = 64, seed = 0, load_epoch = -1, frequent = 50;
    double lr = NAN, momentum = 0.9, wd = 0, lr_factor = 0.1;
    int64_t step_epochs[MAX_STEP_EPOCHS];
    int n_step_epochs = 0;
    const char *shard = "strided";
    const char *impls[32];
    int n_impl = 0;
    int stats = 0, profile_summary = 0;
    const char *profile = NULL;
    int flat = -1, live = -1, allow_nan = 0;
    cli_rec_opts ro = {0};
    const char *kv_type = NULL;
    mxp_device dev = {MXP_DEV_CPU, 0};
    const char *dtype_name = "float32";
    for (int i = 1; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_OK;
        }
#define OPT(name) ((r = cli_opt(cmd, argc, argv, &i, name, &v)) != 0)
        if (!strcmp(argv[i], "--flat")) flat = 1;
        else if (!strcmp(argv[i], "--no-flat")) flat = 0;
        else if (!strcmp(argv[i], "--no-progress")) live = 0;
        else if (!strcmp(argv[i], "--stats")) stats = 1;
        else if (!strcmp(argv[i], "--profile-summary")) profile_summary = 1;
        else if (OPT("--profile")) { if (r < 0) return CLI_USAGE; profile = v; }
        else if (!strcmp(argv[i], "--allow-nan")) allow_nan = 1;
        else if (!strcmp(argv[i], "--rand-crop")) ro.rand_crop = 1;
        else if (!strcmp(argv[i], "--rand-mirror")) ro.rand_mirror = 1;
        else if (OPT("--data-shape")) { if (r < 0) return CLI_USAGE; ro.data_shape = v; }
        else if (OPT("--aug")) { if (r < 0) return CLI_USAGE; ro.aug = v; }
        else if (OPT("--net")) { if (r < 0) return CLI_USAGE; net = v; }
        else if (OPT("--frequent")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_int(cmd, "--frequent", v, 0, INT64_MAX, &frequent)) return CLI_USAGE;
        }
        else if (OPT("--impl")) {
            if (r < 0) return CLI_USAGE;
            if (n_impl == (int)(sizeof impls / sizeof *impls)) return cli_usage_error(cmd, "too many --impl options");
            if (!strchr(v, '=') || v[0] == '=') return cli_usage_error(cmd, "--impl '%s': use OP=POLICY", v);
            impls[n_impl++] = v;
        }
        else if (OPT("--data")) { if (r < 0) return CLI_USAGE; data = v; }
        else if (OPT("--optimizer")) { if (r < 0) return CLI_USAGE; opt = v; }
        else if (OPT("--model-prefix")) { if (r < 0) return CLI_USAGE; prefix = v; }
        else if (OPT("--plot")) { if (r < 0) return CLI_USAGE; plot = v; }
        else if (OPT("--log-json")) { if (r < 0) return CLI_USAGE; log_json = v; }
        else if (OPT("--kv-store")) { if (r < 0) return CLI_USAGE; kv_type = v; }
        else if (OPT("--shard")) {
            if (r < 0) return CLI_USAGE;
            if (strcmp(v, "strided") && strcmp(v, "contiguous"))
                return cli_usage_error(cmd, "--shard '%s': use strided or contiguous", v);
            shard = v;
        }
        else if (OPT("--device")) {
            if (r < 0 || cli_device_parse(cmd, v, &dev)) return CLI_USAGE;
        }
        else if (OPT("--dtype")) { if (r < 0) return CLI_USAGE; dtype_name = v; }
        else if (OPT("--epochs")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_int(cmd, "--epochs", v, 1, 100000, &epochs)) return CLI_USAGE;
        } else if (OPT("--batch-size")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_int(cmd, "--batch-size", v, 1, 1 << 20, &batch)) return CLI_USAGE;
        } else if (OPT("--seed")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_int(cmd, "--seed", v, 0, INT64_MAX, &seed)) return CLI_USAGE;
        } else if (OPT("--load-epoch")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_int(cmd, "--load-epoch", v, 0, 100000, &load_epoch)) return CLI_USAGE;
        } else if (OPT("--lr")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_double(cmd, "--lr", v, &lr)) return CLI_USAGE;
            if (!(lr > 0)) return cli_usage_error(cmd, "--lr must be a positive number");
            /* The optimizers compute in float32: below its smallest normal
             * value the rate is denormal or 0, i.e. no training. */
            if (lr < FLT_MIN)
                return cli_usage_error(cmd, "--lr %s: below %g, the smallest normal float32 the optimizer "
                                       "computes in", v, (double)FLT_MIN);
        } else if (OPT("--momentum")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_double(cmd, "--momentum", v, &momentum)) return CLI_USAGE;
            if (momentum < 0 || momentum >= 1) return cli_usage_error(cmd, "--momentum must be in [0, 1)");
        } else if (OPT("--lr-factor")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_double(cmd, "--lr-factor", v, &lr_factor)) return CLI_USAGE;
            if (!(lr_factor > 0 && lr_factor <= 1)) return cli_usage_error(cmd, "--lr-factor must be in (0, 1]");
        } else if (OPT("--lr-step-epochs")) {
            if (r < 0) return CLI_USAGE;
            if (parse_step_epochs(cmd, v, step_epochs, &n_step_epochs)) return CLI_USAGE;
        } else if (OPT("--wd")) {
            if (r < 0) return CLI_USAGE;
            if (cli_parse_double(cmd, "--wd", v, &wd)) return CLI_USAGE;
            if (wd < 0) return cli_usage_error(cmd, "--wd must be >= 0");
            if (wd > 0 && wd < FLT_MIN)
                return cli_usage_error(cmd, "--wd %s: below %g, the smallest normal float32 (use 0 for none)", v,
                                       (double)FLT_MIN);
        } else
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
#undef OPT
    }
    if (!net) return cli_usage_error(cmd, "--net FILE.json is required");
    if (strcmp(dtype_name, "float32") && strcmp(dtype_name, "bfloat16"))
        return cli_usage_error(cmd, "--dtype '%s': use float32 or bfloat16", dtype_name);
    if (!data) return cli_usage_error(cmd, "--data mnist:DIR is required");
    if (strcmp(opt, "sgd") && strcmp(opt, "adam"))
        return cli_usage_error(cmd, "--optimizer '%s': use sgd or adam", opt);
    if (isnan(lr)) lr = !strcmp(opt, "adam") ? 0.001 : 0.01;
    char prefix_buf[4096];
    if (!prefix) {
        default_prefix(net, prefix_buf, sizeof prefix_buf);
        prefix = prefix_buf;
    }
    if (prefix_overwrites_net(prefix, net))
        return cli_usage_error(cmd, "--model-prefix '%s' would overwrite the net file '%s' with "
                               "'%s-symbol.json'; choose another prefix", prefix, net, prefix);
    if (load_epoch >= epochs)
        return cli_usage_error(cmd, "--load-epoch %lld: nothing to train with --epochs %lld", load_epoch, epochs);

    char timg[4096], tlab[4096], vimg[4096], vlab[4096];
    /* Implementation choices, checked before anything trains: a misspelled
     * name is reported now, with the valid ones. */
    for (int i = 0; i < n_impl; i++) {
        char op_name[256];
        const char *eq = strchr(impls[i], '=');
        snprintf(op_name, sizeof op_name, "%.*s", (int)(eq - impls[i]), impls[i]);
        int irc = mxp_op_set_impl(op_name, eq + 1);
        if (irc) {
            cli_fail(irc, "--impl %s", impls[i]);
            return CLI_USAGE;
        }
    }
    int prc = mxp_registry_check_policies();
    if (prc) {
        cli_fail(prc, "implementation policy");
        return CLI_USAGE;
    }
    if (cli_device_check(cmd, dev)) return CLI_FAIL;
    int rec = cli_is_rec_spec(data), rc;
    int64_t n_train = 0;
    if (!rec) {
        if ((rc = cli_mnist_files(cmd, data, "train", timg, tlab, sizeof timg))) return rc;
        if ((rc = cli_mnist_files(cmd, data, "t10k", vimg, vlab, sizeof vimg))) return rc;
        n_train = cli_idx_count(tlab);
        if (n_train < 0) return CLI_FAIL;
    }

    mxp_symbol *sym = NULL;
    mxp_module *mod = NULL;
    mxp_iter *train = NULL, *val = NULL;
    int st = CLI_FAIL;
    train_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    mxp_kvstore *kv = NULL;
    FILE *quiet = NULL, *out = stdout;
    int rank = 0, workers = 1;
    if (kv_type && (rc = mxp_kvstore_create(kv_type, 0, NULL, NULL, &kv))) {
        cli_fail(rc, "creating kvstore '%s'", kv_type);
        return CLI_FAIL;
    }
    if (kv && mxp_kvstore_is_server(kv)) { /* dist_async: the last ranks serve */
        fprintf(stderr, "train: kvstore %s: this process is server %d; serving until the workers finish\n", kv_type,
                mxp_kvstore_rank(kv));
        if ((rc = mxp_kvstore_run_server(kv))) {
            cli_fail(rc, "kvstore server");
            fflush(NULL);
            _exit(CLI_FAIL); /* freeing the store would wait for the workers */
        }
        mxp_kvstore_free(kv);
        return CLI_OK;
    }
    int val_split = 1; /* dist_sync sums the validation metric over workers */
    if (kv) {
        rank = mxp_kvstore_rank(kv);
        workers = mxp_kvstore_num_workers(kv);
        val_split = mxp_kvstore_updates_on_servers(kv) ? 1 : workers; /* dist_async: each validates on all */
        if (rank != 0) { /* only rank 0 reports progress */
            if (!(quiet = fopen("/dev/null", "w"))) {
                cli_err("cannot open /dev/null");
                goto done;
            }
            out = quiet;
            live = 0;
        }
    }
    if ((rc = mxp_symbol_load_file(net, &sym))) {
        cli_fail(rc, "loading net '%s'", net);
        goto done;
    }
    if (!strcmp(dtype_name, "bfloat16")) { /* mixed precision: amp_cast around Conv/FC */
        mxp_symbol *amp = NULL;
        if ((rc = mxp_symbol_amp_convert(sym, MXP_DTYPE_BF16, 0, NULL, &amp))) {
            cli_fail(rc, "converting '%s' to bfloat16", net);
            goto done;
        }
        mxp_symbol_release(sym);
        sym = amp;
    }
    if (rec) {
        flat = 0;
        if (cli_rec_iters(cmd, data, &ro, batch, (uint64_t)seed, &train, &val, &n_train)) goto done;
    } else {
        if (flat < 0 && cli_net_input_layout(sym, batch, 28, 28, &flat)) goto done;
        if (cli_mnist_iter_part(timg, tlab, batch, flat, 1, (uint64_t)seed, 0, workers, rank, shard, &train)) goto done;
        if (cli_mnist_iter_part(vimg, vlab, batch, flat, 0, 0, 1, val_split, val_split > 1 ? rank : 0, NULL, &val)) goto done;
    }
    static const char *const data_names[] = {"data"}, *const label_names[] = {"softmax_label"};
    if ((rc = mxp_module_create(sym, 1, data_names, 1, label_names, &mod))) {
        cli_fail(rc, "creating the module");
        goto done;
    }
    if (dev.type != MXP_DEV_CPU && (rc = mxp_module_set_device(mod, dev))) {
        char dn[32];
        cli_fail(rc, "placing the module on %s", cli_device_str(dev, dn, sizeof dn));
        goto done;
    }
    /* dist_async: the optimizer states live on the servers, which start
     * from zero states; the parameters resume. */
    int load_states = !(kv && mxp_kvstore_updates_on_servers(kv));
    if (load_epoch >= 0 && (rc = mxp_module_load_checkpoint(mod, prefix, (int)load_epoch, load_states))) {
        cli_fail(rc, "resuming from '%s' epoch %lld", prefix, load_epoch);
        goto done;
    }
    char lr_s[32], mom_s[32], wd_s[32];
    snprintf(lr_s, sizeof lr_s, "%.17g", lr);
    snprintf(mom_s, sizeof mom_s, "%.17g", momentum);
    snprintf(wd_s, sizeof wd_s, "%.17g", wd);
    const char *keys[3] = {"learning_rate", "wd", "momentum"};
    const char *vals[3] = {lr_s, wd_s, mom_s};
    /* MXNet's train_mnist.py initializer: Xavier(rnd_type='gaussian',
     * factor_type='in', magnitude=2). */
    mxp_init xavier = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    int64_t begin = load_epoch >= 0 ? load_epoch : 0;
    progress_init(&ctx.prog, live, out, stderr, (int)epochs, batch, n_train / workers / batch);
    curves_init(&ctx.curves, rank == 0 ? plot : NULL, rank == 0 ? log_json : NULL, net);
    ctx.prog.frequent = frequent;
    mxp_fit_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.struct_size = (uint32_t)sizeof fo; /* else fields after allow_nan (kvstore) are dropped */
    fo.begin_epoch = (int)begin;
    fo.num_epoch = (int)epochs;
    fo.optimizer = opt;
    fo.n_opt_kwargs = !strcmp(opt, "sgd") ? 3 : 2;
    fo.opt_keys = keys;
    fo.opt_vals = vals;
    fo.seed = (uint64_t)seed;
    fo.initializer = &xavier;
    fo.eval_metric = "acc";
    fo.checkpoint_prefix = prefix;
    fo.batch_cb = on_batch;
    fo.epoch_cb = on_epoch;
    fo.user = &ctx;
    fo.allow_nan = allow_nan;
    fo.kvstore = kv;
    /* Steps in updates: an epoch is floor(samples per worker / batch)
     * updates for MNIST (a short last batch is dropped) and the ceiling for
     * records (round_batch pads it), as the iterators give them. */
    int64_t per_worker = n_train / workers, epoch_updates = rec ? (per_worker + batch - 1) / batch : per_worker / batch;
    int64_t lr_steps[MAX_STEP_EPOCHS];
    for (int j = 0; j < n_step_epochs; j++) lr_steps[j] = step_epochs[j] * epoch_updates;
    fo.n_lr_steps = n_step_epochs;
    fo.lr_steps = lr_steps;
    fo.lr_factor = lr_factor;
    if (kv)
        fprintf(out, "train: kvstore %s, worker %d of %d, %lld samples per worker per epoch\n", kv_type, rank,
                workers, (long long)(n_train / workers));
    fprintf(out, "train: %s on %s (%lld samples, %s input), %s lr=%g%s, batch %lld, epochs %lld..%lld -> %s-%04lld.params\n",
           net, strchr(data, ':') + 1, (long long)n_train, rec ? ro.data_shape : flat ? "flat" : "1x28x28", opt, lr,
           !strcmp(opt, "sgd") ? (momentum > 0 ? " momentum" : "") : "", batch, (long long)begin + 1, epochs, prefix,
           epochs);
    if (!strcmp(opt, "sgd") && momentum > 0) fprintf(out, "train: momentum=%g wd=%g seed=%lld\n", momentum, wd, seed);
    if (n_step_epochs) {
        fprintf(out, "train: lr x%g after epoch", lr_factor);
        for (int j = 0; j < n_step_epochs; j++) fprintf(out, "%s%lld", j ? "," : " ", (long long)step_epochs[j]);
        fprintf(out, " (%lld updates per epoch)\n", (long long)epoch_updates);
    }
    if (dev.type != MXP_DEV_CPU) {
        char dn[32];
        fprintf(out, "train: device %s\n", cli_device_str(dev, dn, sizeof dn));
    }
    fflush(out);
    progress_epoch_begin(&ctx.prog);
    if ((profile || profile_summary) && (rc = mxp_profiler_start())) {
        cli_fail(rc, "starting the profiler");
        goto done;
    }
    rc = mxp_module_fit(mod, train, val, &fo);
    progress_clear(&ctx.prog);
    if (profile || profile_summary) {
        mxp_engine_wait_for_all();
        mxp_profiler_stop();
        if (profile_report(out, profile, profile_summary, rank, workers) != CLI_OK && !rc) {
            st = CLI_FAIL;
            goto done;
        }
    }
    if (rc) {
        /* The runtime says which epoch, batch and iterator; the files are
         * known only here. */
        if (rec) cli_fail(rc, "training on %s (PREFIX_train.rec, validation PREFIX_val.rec)", data);
        else cli_fail(rc, "training on %s + %s (validation: %s + %s)", timg, tlab, vimg, vlab);
        if (kv && strncmp(kv_type, "dist", 4) == 0) {
            /* Freeing a dist store is collective: the other workers would
             * wait for this one.  Exit now; mpirun ends the job. */
            fflush(NULL);
            _exit(CLI_FAIL);
        }
        goto done;
    }
    if (ctx.prog.train_seconds > 0)
        fprintf(out, "train: done, %lld epochs in %.1fs of training (%.0f samples/s); checkpoint %s-%04lld.params\n",
               epochs - (long long)begin, ctx.prog.train_seconds,
               (double)ctx.prog.train_samples / ctx.prog.train_seconds, prefix, epochs);
    /* Per pack: its impls' calls and time, and its own counters. */
    if (stats && cli_pack_stats(out, "train: ", NULL) != MXP_OK)
        cli_err("train: reading pack statistics: %s", mxp_last_error());
    st = ctx.curves.failed ? CLI_FAIL : CLI_OK;
done:
    curves_free(&ctx.curves);
    mxp_kvstore_free(kv);
    if (quiet) fclose(quiet);
    mxp_module_free(mod);
    mxp_iter_free(train);
    mxp_iter_free(val);
    mxp_symbol_release(sym);
    return st;
}
