/* cmd_predict.c — `mxplug predict`: run a checkpoint (PREFIX-symbol.json +
 * PREFIX-%04d.params) on inputs from a .npy file or from an NDArray
 * .params file holding an array named "data", print the top classes of
 * each sample with their probabilities, optionally write the raw outputs
 * (output 0, (N, classes) float32) as .npy.
 *
 * Input conventions: axis 0 is the sample axis.  float32/float64 values
 * are fed as they are; uint8 images are scaled by 1/256 exactly as
 * MNISTIter scales pixels, so raw MNIST bytes give the same results as
 * training saw.  If the array's shape does not bind as given, the
 * per-sample part is tried flat (N, prod) and as one-channel images
 * (N,1,H,W) — an MLP takes (N,28,28) and LeNet takes (N,784) — and when
 * nothing fits the error names the shapes.  Samples run in batches of
 * --batch-size (the last one zero-padded; padding rows are dropped). */
#include "model.h"
#include "device_opt.h"
#include "npy.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mxplug predict --model PREFIX --epoch E --input FILE [options]\n"
            "\n"
            "Run a trained checkpoint on inputs and print the top classes per sample.\n"
            "\n"
            "  --model PREFIX     checkpoint prefix (PREFIX-symbol.json, PREFIX-%%04d.params)\n"
            "  --epoch E          checkpoint number\n"
            "  --input FILE       .npy array (float32, float64 or uint8; axis 0 = samples)\n"
            "                     or an NDArray .params file with an array named 'data'\n"
            "  --output FILE.npy  write the raw outputs (N, classes) as float32 .npy\n"
            "  --top K            classes to print per sample (default 3)\n"
            "  --batch-size B     samples per forward pass (default 256)\n"
            "  --device DEV       cpu (default) or gpu:N\n"
            "  --quiet            do not print per-sample lines\n");
}

/* The input as float32 host data. */
typedef struct input {
    float *x;
    int ndim;
    int64_t shape[MXP_MAX_NDIM];
    size_t count;
} input;

static int is_npy(const char *path) {
    FILE *f = fopen(path, "rb");
    char m[6] = {0};
    int ok = f && fread(m, 1, 6, f) == 6 && memcmp(m, "\x93NUMPY", 6) == 0;
    if (f) fclose(f);
    return ok;
}

static int read_input(const char *path, input *in) {
    memset(in, 0, sizeof *in);
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_err("predict: cannot open input '%s'", path);
        return CLI_FAIL;
    }
    fclose(f);
    if (is_npy(path)) {
        npy_array a;
        char err[512];
        int rc = npy_load(path, &a, err, sizeof err);
        if (rc) {
            cli_err("predict: input %s (%s)", err, mxp_status_name(rc));
            return CLI_FAIL;
        }
        in->x = malloc((a.count ? a.count : 1) * sizeof(float));
        if (!in->x) {
            npy_free(&a);
            cli_err("predict: out of memory");
            return CLI_FAIL;
        }
        npy_to_f32(&a, in->x);
        if (a.dtype == MXP_DTYPE_U8)
            for (size_t i = 0; i < a.count; i++) in->x[i] /= 256.0f;
        in->ndim = a.ndim;
        memcpy(in->shape, a.shape, sizeof a.shape);
        in->count = a.count;
        npy_free(&a);
        return CLI_OK;
    }
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    int rc = mxp_ndarray_load(path, &n, &arrs, &names);
    if (rc) {
        cli_fail(rc, "input '%s' is neither a .npy file nor an NDArray file", path);
        return CLI_FAIL;
    }
    int k = -1;
    for (int i = 0; names && i < n; i++)
        if (!strcmp(names[i], "data") || !strcmp(names[i], "arg:data")) k = i;
    if (k < 0) {
        cli_err("predict: NDArray file '%s' has no array named 'data' (%d arrays%s)", path, n,
                names ? "" : ", saved without names");
        mxp_ndarray_list_free(n, arrs, names);
        return CLI_FAIL;
    }
    mxp_ndarray *a = arrs[k];
    int dt = mxp_ndarray_dtype(a);
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64 && dt != MXP_DTYPE_U8) {
        cli_err("predict: array 'data' in '%s' has dtype %s; use float32, float64 or uint8", path, mxp_dtype_name(dt));
        mxp_ndarray_list_free(n, arrs, names);
        return CLI_FAIL;
    }
    npy_array tmp = {.dtype = dt, .ndim = mxp_ndarray_ndim(a), .count = (size_t)mxp_ndarray_size(a)};
    memcpy(tmp.shape, mxp_ndarray_shape(a), (size_t)tmp.ndim * sizeof(int64_t));
    tmp.data = malloc(mxp_ndarray_nbytes(a) + 1);
    in->x = malloc(tmp.count * sizeof(float) + 1);
    rc = tmp.data && in->x ? mxp_ndarray_sync_copy_to(a, tmp.data, mxp_ndarray_nbytes(a)) : MXP_ENOMEM;
    mxp_ndarray_list_free(n, arrs, names);
    if (rc) {
        npy_free(&tmp);
        return cli_fail(rc, "reading 'data' from '%s'", path);
    }
    npy_to_f32(&tmp, in->x);
    if (dt == MXP_DTYPE_U8)
        for (size_t i = 0; i < tmp.count; i++) in->x[i] /= 256.0f;
    in->ndim = tmp.ndim;
    memcpy(in->shape, tmp.shape, sizeof tmp.shape);
    in->count = tmp.count;
    npy_free(&tmp);
    return CLI_OK;
}

static void shape_str(const mxp_shape *s, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < s->ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    if (k < cap) snprintf(buf + k, cap - k, ")");
}

/* Bind with the input's shape, else flat, else (N,1,H,W); *bound: the
 * shape that bound (batch = bsz). */
static int bind_for(cli_model *m, const input *in, int64_t bsz, mxp_shape *bound) {
    mxp_shape cand[3];
    int nc = 0;
    int64_t per = 1;
    for (int i = 1; i < in->ndim; i++) per *= in->shape[i];
    memset(cand, 0, sizeof cand);
    cand[nc].ndim = in->ndim;
    for (int i = 0; i < in->ndim; i++) cand[nc].dims[i] = in->shape[i];
    cand[nc++].dims[0] = bsz;
    if (in->ndim != 2) {
        cand[nc].ndim = 2;
        cand[nc].dims[0] = bsz;
        cand[nc++].dims[1] = per;
    }
    int64_t h = 0, w = 0;
    if (in->ndim == 3) h = in->shape[1], w = in->shape[2];
    else if (in->ndim == 2 && per == 784) h = w = 28;
    if (h) {
        cand[nc].ndim = 4;
        cand[nc].dims[0] = bsz;
        cand[nc].dims[1] = 1;
        cand[nc].dims[2] = h;
        cand[nc++].dims[3] = w;
    }
    char tried[256] = "";
    for (int c = 0; c < nc; c++) {
        if (!cli_model_fits(m, &cand[c])) {
            char s[96];
            shape_str(&cand[c], s, sizeof s);
            size_t k = strlen(tried);
            snprintf(tried + k, sizeof tried - k, "%s%s", k ? ", " : "", s);
            continue;
        }
        *bound = cand[c];
        return cli_model_bind(m, &cand[c]);
    }
    char s[96];
    mxp_shape whole = {.ndim = in->ndim};
    for (int i = 0; i < in->ndim; i++) whole.dims[i] = in->shape[i];
    shape_str(&whole, s, sizeof s);
    cli_err("predict: input of shape %s does not fit the net's 'data' input and the checkpoint's parameters (tried %s): %s",
            s, tried, mxp_last_error()[0] ? mxp_last_error() : "shape inference leaves some shapes unknown");
    return CLI_FAIL;
}

int cmd_predict(int argc, char **argv) {
    const char *cmd = "predict";
    const char *prefix = NULL, *inpath = NULL, *outpath = NULL, *v;
    long long epoch = -1, top = 3, bsz = 256;
    mxp_device dev = {MXP_DEV_CPU, 0};
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        int r;
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return CLI_OK;
        }
#define OPT(name) ((r = cli_opt(cmd, argc, argv, &i, name, &v)) != 0)
        if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (OPT("--model")) { if (r < 0) return CLI_USAGE; prefix = v; }
        else if (OPT("--device")) {
            if (r < 0 || cli_device_parse(cmd, v, &dev)) return CLI_USAGE;
        }
        else if (OPT("--input")) { if (r < 0) return CLI_USAGE; inpath = v; }
        else if (OPT("--output")) { if (r < 0) return CLI_USAGE; outpath = v; }
        else if (OPT("--epoch")) {
            if (r < 0 || cli_parse_int(cmd, "--epoch", v, 0, 100000, &epoch)) return CLI_USAGE;
        } else if (OPT("--top")) {
            if (r < 0 || cli_parse_int(cmd, "--top", v, 1, 1000000, &top)) return CLI_USAGE;
        } else if (OPT("--batch-size")) {
            if (r < 0 || cli_parse_int(cmd, "--batch-size", v, 1, 1 << 20, &bsz)) return CLI_USAGE;
        } else
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
#undef OPT
    }
    if (!prefix) return cli_usage_error(cmd, "--model PREFIX is required");
    if (epoch < 0) return cli_usage_error(cmd, "--epoch E is required");
    if (!inpath) return cli_usage_error(cmd, "--input FILE is required");
    if (cli_device_check(cmd, dev)) return CLI_FAIL;

    input in;
    cli_model m;
    memset(&m, 0, sizeof m);
    float *outbuf = NULL;
    int st = CLI_FAIL;
    if (read_input(inpath, &in)) return CLI_FAIL;
    if (in.ndim < 1 || in.shape[0] < 1) {
        cli_err("predict: input '%s' has no samples (axis 0 is the sample axis; a %d-d array was given)", inpath,
                in.ndim);
        goto done;
    }
    for (int i = 1; i < in.ndim; i++)
        if (in.shape[i] == 0) {
            /* Shape inference would read the 0 as "unknown" and fail without
             * a reason: say what is wrong first. */
            cli_err("predict: input '%s' is empty: dimension %d of its shape is 0", inpath, i);
            goto done;
        }
    if (cli_model_load(prefix, (int)epoch, &m)) goto done;
    m.dev = dev;
    int64_t n = in.shape[0], per = (int64_t)(in.count / (size_t)n);
    if (bsz > n) bsz = n;
    mxp_shape bound;
    if (bind_for(&m, &in, bsz, &bound)) goto done;
    mxp_ndarray *dst = cli_model_data(&m);
    int64_t classes = 0;
    float *chunk = calloc((size_t)(bsz * per), sizeof(float));
    if (!chunk) goto done;
    for (int64_t b0 = 0; b0 < n; b0 += bsz) {
        int64_t k = n - b0 < bsz ? n - b0 : bsz;
        memset(chunk, 0, (size_t)(bsz * per) * sizeof(float));
        memcpy(chunk, in.x + b0 * per, (size_t)(k * per) * sizeof(float));
        int rc = mxp_ndarray_sync_copy_from(dst, chunk, (size_t)(bsz * per) * sizeof(float));
        if (rc) {
            cli_fail(rc, "feeding the input");
            free(chunk);
            goto done;
        }
        mxp_ndarray *out;
        if (cli_model_forward(&m, &out)) {
            free(chunk);
            goto done;
        }
        if (mxp_ndarray_dtype(out) != MXP_DTYPE_F32 || mxp_ndarray_ndim(out) != 2) {
            cli_err("predict: the net's output is not a (batch, classes) float32 array");
            free(chunk);
            goto done;
        }
        if (!outbuf) {
            classes = mxp_ndarray_shape(out)[1];
            outbuf = malloc((size_t)(n * classes) * sizeof(float) + (size_t)(bsz * classes) * sizeof(float));
            if (!outbuf) {
                free(chunk);
                goto done;
            }
        }
        /* Copy the whole batch (into slack at the end when padded). */
        rc = mxp_ndarray_sync_copy_to(out, outbuf + b0 * classes, (size_t)(bsz * classes) * sizeof(float));
        if (rc) {
            cli_fail(rc, "reading outputs");
            free(chunk);
            goto done;
        }
    }
    free(chunk);
    char bs[96];
    shape_str(&bound, bs, sizeof bs);
    printf("predict: %lld samples, input %s per batch, %lld classes\n", (long long)n, bs, (long long)classes);
    if (!quiet) {
        int64_t kk = top < classes ? top : classes;
        for (int64_t s = 0; s < n; s++) {
            const float *p = outbuf + s * classes;
            printf("%lld:", (long long)s);
            /* Selection of the kk largest: kk is small. */
            int64_t used[64];
            int64_t nu = kk < 64 ? kk : 64;
            for (int64_t t = 0; t < nu; t++) {
                int64_t best = -1;
                for (int64_t c = 0; c < classes; c++) {
                    int taken = 0;
                    for (int64_t u = 0; u < t; u++) taken |= used[u] == c;
                    if (!taken && (best < 0 || p[c] > p[best])) best = c;
                }
                used[t] = best;
                printf("  %lld (%.4f)", (long long)best, p[best]);
            }
            printf("\n");
        }
    }
    if (outpath) {
        char err[512];
        int64_t shp[2] = {n, classes};
        int rc = npy_save(outpath, MXP_DTYPE_F32, 2, shp, outbuf, err, sizeof err);
        if (rc) {
            cli_err("predict: %s", err);
            goto done;
        }
        printf("predict: wrote %s (%lld, %lld) float32\n", outpath, (long long)n, (long long)classes);
    }
    st = CLI_OK;
done:
    free(outbuf);
    free(in.x);
    cli_model_free(&m);
    return st;
}
