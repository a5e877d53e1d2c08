/* cmd_score.c — `mxplug score`: evaluate a checkpoint on the test split of
 * an MNIST-format data set (DIR/t10k-*): accuracy and cross-entropy over
 * every sample (the last batch is padded by the iterator and the padding
 * is left out of both metrics).  The input layout follows the net (shape
 * inference, as `train` decides it).  Uses the inference binding of
 * model.c; the metrics are the training library's (mx.metric's
 * definitions). */
#include "model.h"
#include "device_opt.h"
#include "progress.h"

#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mxplug score --model PREFIX --epoch E --data mnist:DIR [--batch-size B]\n"
            "\n"
            "Evaluate a checkpoint on DIR/t10k-images-idx3-ubyte[.gz] and its labels:\n"
            "prints accuracy and cross-entropy.\n"
            "\n"
            "  --model PREFIX   checkpoint prefix (PREFIX-symbol.json, PREFIX-%%04d.params)\n"
            "  --epoch E        checkpoint number\n"
            "  --data mnist:DIR data directory\n"
            "  --batch-size B   samples per forward pass (default 256)\n"
            "  --device DEV     cpu (default) or gpu:N\n");
}

int cmd_score(int argc, char **argv) {
    const char *cmd = "score";
    const char *prefix = NULL, *data = NULL, *v;
    long long epoch = -1, bsz = 256;
    mxp_device dev = {MXP_DEV_CPU, 0};
    for (int i = 1; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_OK;
        }
#define OPT(name) ((r = cli_opt(cmd, argc, argv, &i, name, &v)) != 0)
        if (OPT("--model")) { if (r < 0) return CLI_USAGE; prefix = v; }
        else if (OPT("--device")) {
            if (r < 0 || cli_device_parse(cmd, v, &dev)) return CLI_USAGE;
        }
        else if (OPT("--data")) { if (r < 0) return CLI_USAGE; data = v; }
        else if (OPT("--epoch")) {
            if (r < 0 || cli_parse_int(cmd, "--epoch", v, 0, 100000, &epoch)) return CLI_USAGE;
        } else if (OPT("--batch-size")) {
            if (r < 0 || cli_parse_int(cmd, "--batch-size", v, 1, 1 << 20, &bsz)) return CLI_USAGE;
        } else
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
#undef OPT
    }
    if (!prefix) return cli_usage_error(cmd, "--model PREFIX is required");
    if (epoch < 0) return cli_usage_error(cmd, "--epoch E is required");
    if (!data) return cli_usage_error(cmd, "--data mnist:DIR is required");
    if (cli_device_check(cmd, dev)) return CLI_FAIL;
    char img[4096], lab[4096];
    int rc = cli_mnist_files(cmd, data, "t10k", img, lab, sizeof img);
    if (rc) return rc;

    cli_model m;
    mxp_iter *it = NULL;
    mxp_metric *acc = NULL, *ce = NULL;
    int st = CLI_FAIL, flat = 0;
    double t0 = progress_now();
    if (cli_model_load(prefix, (int)epoch, &m)) goto done;
    m.dev = dev;
    if (cli_net_input_layout(m.sym, bsz, 28, 28, &flat)) goto done;
    if (cli_mnist_iter(img, lab, bsz, flat, 0, 0, 1, &it)) goto done;
    mxp_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = flat ? 2 : 4;
    s.dims[0] = bsz;
    if (flat) s.dims[1] = 784;
    else s.dims[1] = 1, s.dims[2] = 28, s.dims[3] = 28;
    if (cli_model_bind(&m, &s)) goto done;
    if ((rc = mxp_metric_create("acc", 0, NULL, NULL, &acc)) || (rc = mxp_metric_create("ce", 0, NULL, NULL, &ce))) {
        cli_fail(rc, "creating metrics");
        goto done;
    }
    mxp_ndarray *dst = cli_model_data(&m);
    for (;;) {
        int has = 0;
        if ((rc = mxp_iter_next(it, &has))) {
            cli_fail(rc, "reading '%s'", img);
            goto done;
        }
        if (!has) break;
        mxp_ndarray *x = mxp_iter_data(it, 0), *y = mxp_iter_label(it, 0), *out;
        if ((rc = mxp_ndarray_copy(x, dst))) {
            cli_fail(rc, "feeding a batch");
            goto done;
        }
        if (cli_model_forward(&m, &out)) goto done;
        int pad = mxp_iter_pad(it);
        if ((rc = mxp_metric_update(acc, 1, &y, &out, pad)) || (rc = mxp_metric_update(ce, 1, &y, &out, pad))) {
            cli_fail(rc, "evaluating");
            goto done;
        }
    }
    double a = 0, c = 0;
    mxp_metric_get(acc, NULL, &a);
    mxp_metric_get(ce, NULL, &c);
    printf("score: %s epoch %lld on %s: accuracy=%.4f cross-entropy=%.4f samples=%lld time=%.1fs\n", prefix, epoch,
           img, a, c, (long long)mxp_metric_num_inst(acc), progress_now() - t0);
    st = CLI_OK;
done:
    mxp_metric_free(acc);
    mxp_metric_free(ce);
    mxp_iter_free(it);
    cli_model_free(&m);
    return st;
}
