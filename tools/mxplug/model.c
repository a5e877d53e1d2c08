/* model.c — shared pieces of `mxplug train`, `predict` and `score` (see
 * model.h): option parsing, the mnist:DIR data source, the input layout
 * decision and an inference binding of a checkpoint.
 *
 * The inference binding is the executor directly (simple_bind with only
 * the data shape, no gradients), not the training library's Module: a
 * checkpoint is evaluated without an optimizer, labels or initializer,
 * and parameters are copied from PREFIX-%04d.params by name. */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* ------------------------------------------------------------ options */
int cli_opt(const char *cmd, int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option '%s' needs a value", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

/* ------------------------------------------------------------ data */
/* A path cut to fit `cap` would name another file: 0 (not found) then. */
static int find_file(const char *dir, const char *base, char *out, size_t cap) {
    if ((size_t)snprintf(out, cap, "%s/%s", dir, base) < cap && access(out, R_OK) == 0) return 1;
    return (size_t)snprintf(out, cap, "%s/%s.gz", dir, base) < cap && access(out, R_OK) == 0;
}

int cli_mnist_files(const char *cmd, const char *spec, const char *split, char *images, char *labels, size_t cap) {
    int kind;
    const char *dir;
    if (cli_parse_data_spec(cmd, spec, &kind, &dir)) return CLI_USAGE;
    if (kind != CLI_DATA_MNIST)
        return cli_usage_error(cmd, "--data '%s': expected mnist:DIR (a directory of MNIST IDX files)", spec);
    char ib[128], lb[128];
    snprintf(ib, sizeof ib, "%s-images-idx3-ubyte", split);
    snprintf(lb, sizeof lb, "%s-labels-idx1-ubyte", split);
    if (!find_file(dir, ib, images, cap)) {
        cli_err("%s: no %s or %s.gz in '%s'", cmd, ib, ib, dir);
        return CLI_FAIL;
    }
    if (!find_file(dir, lb, labels, cap)) {
        cli_err("%s: no %s or %s.gz in '%s'", cmd, lb, lb, dir);
        return CLI_FAIL;
    }
    return CLI_OK;
}

int64_t cli_idx_count(const char *path) {
    gzFile f = gzopen(path, "rb"); /* reads plain files too */
    unsigned char h[8];
    int got = f ? gzread(f, h, 8) : -1;
    if (f) gzclose(f);
    if (got != 8 || h[0] != 0 || h[1] != 0) {
        cli_err("'%s' is not an IDX file", path);
        return -1;
    }
    return (int64_t)h[4] << 24 | (int64_t)h[5] << 16 | (int64_t)h[6] << 8 | (int64_t)h[7];
}

int cli_mnist_iter(const char *images, const char *labels, int64_t batch, int flat, int shuffle, uint64_t seed,
                   int round_batch, mxp_iter **out) {
    return cli_mnist_iter_part(images, labels, batch, flat, shuffle, seed, round_batch, 1, 0, NULL, out);
}

int cli_mnist_iter_part(const char *images, const char *labels, int64_t batch, int flat, int shuffle, uint64_t seed,
                        int round_batch, int num_parts, int part_index, const char *shard, mxp_iter **out) {
    char bs[32], sd[32], np[16], pi[16];
    snprintf(bs, sizeof bs, "%lld", (long long)batch);
    snprintf(sd, sizeof sd, "%lld", (long long)(seed & 0x7fffffffffffffffull));
    snprintf(np, sizeof np, "%d", num_parts);
    snprintf(pi, sizeof pi, "%d", part_index);
    const char *keys[] = {"image", "label", "batch_size", "flat", "shuffle", "seed", "round_batch", "silent",
                          "num_parts", "part_index", "shard"};
    const char *vals[] = {images, labels, bs, flat ? "True" : "False", shuffle ? "True" : "False", sd,
                          round_batch ? "True" : "False", "True", np, pi, shard};
    int rc = mxp_iter_create("MNISTIter", shard ? 11 : 10, keys, vals, out);
    if (rc) return cli_fail(rc, "creating MNISTIter over '%s'", images);
    return CLI_OK;
}

int cli_net_input_layout(mxp_symbol *sym, int64_t batch, int rows, int cols, int *out_flat) {
    const char *name = "data";
    mxp_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = 2;
    s.dims[0] = batch;
    s.dims[1] = (int64_t)rows * cols;
    int complete = 0;
    if (mxp_symbol_infer_shape(sym, 1, &name, &s, NULL, NULL, NULL, NULL, NULL, NULL, &complete) == MXP_OK &&
        complete) {
        *out_flat = 1;
        return CLI_OK;
    }
    s.ndim = 4;
    s.dims[1] = 1;
    s.dims[2] = rows;
    s.dims[3] = cols;
    int rc = mxp_symbol_infer_shape(sym, 1, &name, &s, NULL, NULL, NULL, NULL, NULL, NULL, &complete);
    if (rc) return cli_fail(rc, "the net takes neither (N,%d) nor (N,1,%d,%d) input", rows * cols, rows, cols);
    if (!complete) {
        cli_err("shapes of the net cannot all be inferred from its data input (N,1,%d,%d)", rows, cols);
        return CLI_FAIL;
    }
    *out_flat = 0;
    return CLI_OK;
}

/* ------------------------------------------------------------ inference */
int cli_model_load(const char *prefix, int epoch, cli_model *m) {
    memset(m, 0, sizeof *m);
    m->data_index = -1;
    char path[PATH_MAX];
    int rc = mxp_checkpoint_path(prefix, epoch, "symbol", path, sizeof path);
    if (rc == MXP_OK && access(path, R_OK) != 0) {
        cli_err("checkpoint '%s' (epoch %d): cannot read '%s': %s", prefix, epoch, path, strerror(errno));
        return CLI_FAIL;
    }
    if (rc == MXP_OK) rc = mxp_symbol_load_file(path, &m->sym);
    if (rc) return cli_fail(rc, "loading '%s'", path);
    rc = mxp_checkpoint_path(prefix, epoch, "params", path, sizeof path);
    if (rc == MXP_OK && access(path, R_OK) != 0) {
        cli_err("checkpoint '%s' (epoch %d): cannot read '%s': %s", prefix, epoch, path, strerror(errno));
        return CLI_FAIL;
    }
    if (rc == MXP_OK)
        rc = mxp_checkpoint_load_params(prefix, epoch, &m->n_arg, &m->arg_names, &m->args, &m->n_aux, &m->aux_names,
                                        &m->auxs);
    if (rc) return cli_fail(rc, "loading '%s'", path);
    return CLI_OK;
}

static mxp_ndarray *find_param(char **names, mxp_ndarray **arrays, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return arrays[i];
    return NULL;
}

int cli_model_fits(cli_model *m, const mxp_shape *shape) {
    int n = 1 + m->n_arg + m->n_aux, complete = 0, rc = MXP_OK;
    const char **names = calloc((size_t)n, sizeof *names);
    mxp_shape *shapes = calloc((size_t)n, sizeof *shapes);
    if (!names || !shapes) rc = MXP_ENOMEM;
    if (rc == MXP_OK) {
        names[0] = "data";
        shapes[0] = *shape;
        int na;
        const char *const *an;
        rc = mxp_symbol_list_arguments(m->sym, &na, &an);
        int k = 1;
        /* Only entries that are arguments of the net (extra ones are ignored
         * as MXNet's allow_extra does). */
        for (int i = 0; rc == MXP_OK && i < m->n_arg; i++)
            for (int j = 0; j < na; j++)
                if (!strcmp(an[j], m->arg_names[i])) {
                    names[k] = m->arg_names[i];
                    shapes[k].ndim = mxp_ndarray_ndim(m->args[i]);
                    memcpy(shapes[k].dims, mxp_ndarray_shape(m->args[i]), (size_t)shapes[k].ndim * sizeof(int64_t));
                    k++;
                    break;
                }
        if (rc == MXP_OK)
            rc = mxp_symbol_infer_shape(m->sym, k, names, shapes, NULL, NULL, NULL, NULL, NULL, NULL, &complete);
    }
    free(names);
    free(shapes);
    return rc == MXP_OK && complete;
}

int cli_model_bind(cli_model *m, const mxp_shape *shape) {
    const mxp_device dev = m->dev.type ? m->dev : (mxp_device){MXP_DEV_CPU, 0};
    const char *name = "data";
    mxp_executor_free(m->ex);
    m->ex = NULL;
    int rc = mxp_executor_simple_bind(m->sym, dev, 1, &name, shape, MXP_REQ_NULL, 0, NULL, &m->ex);
    if (rc) return cli_fail(rc, "binding the net to data of %d dims", shape->ndim);
    m->batch = shape->dims[0];
    int na, nx;
    const char *const *an, *const *xn;
    mxp_ndarray *const *aa, *const *xa;
    if ((rc = mxp_symbol_list_arguments(m->sym, &na, &an)) || (rc = mxp_executor_args(m->ex, &na, &aa)))
        return cli_fail(rc, "listing arguments");
    for (int i = 0; i < na; i++) {
        if (!strcmp(an[i], "data")) {
            m->data_index = i;
            continue;
        }
        mxp_ndarray *src = find_param(m->arg_names, m->args, m->n_arg, an[i]);
        if (!src) {
            /* Labels are not parameters: left as bound (unused in inference). */
            size_t l = strlen(an[i]);
            if (l >= 6 && !strcmp(an[i] + l - 6, "_label")) continue;
            cli_err("checkpoint lacks parameter '%s' of the net", an[i]);
            return CLI_FAIL;
        }
        if ((rc = mxp_ndarray_copy(src, aa[i]))) return cli_fail(rc, "parameter '%s'", an[i]);
    }
    if ((rc = mxp_symbol_list_auxiliary_states(m->sym, &nx, &xn)) || (rc = mxp_executor_aux(m->ex, &nx, &xa)))
        return cli_fail(rc, "listing aux states");
    for (int i = 0; i < nx; i++) {
        mxp_ndarray *src = find_param(m->aux_names, m->auxs, m->n_aux, xn[i]);
        if (!src) {
            cli_err("checkpoint lacks aux state '%s' of the net", xn[i]);
            return CLI_FAIL;
        }
        if ((rc = mxp_ndarray_copy(src, xa[i]))) return cli_fail(rc, "aux state '%s'", xn[i]);
    }
    if (m->data_index < 0) {
        cli_err("the net has no input named 'data'");
        return CLI_FAIL;
    }
    if ((rc = mxp_executor_wait(m->ex))) return cli_fail(rc, "loading parameters");
    return CLI_OK;
}

mxp_ndarray *cli_model_data(cli_model *m) {
    int n;
    mxp_ndarray *const *a;
    if (!m->ex || m->data_index < 0 || mxp_executor_args(m->ex, &n, &a) || m->data_index >= n) return NULL;
    return a[m->data_index];
}

int cli_model_forward(cli_model *m, mxp_ndarray **out) {
    *out = NULL;
    int n, rc = mxp_executor_forward(m->ex, 0);
    mxp_ndarray *const *o;
    if (rc == MXP_OK) rc = mxp_executor_wait(m->ex);
    if (rc == MXP_OK) rc = mxp_executor_outputs(m->ex, &n, &o);
    if (rc) return cli_fail(rc, "forward");
    if (n < 1) {
        cli_err("the net has no output");
        return CLI_FAIL;
    }
    if ((rc = mxp_ndarray_wait_to_read(o[0]))) return cli_fail(rc, "forward");
    *out = o[0];
    return CLI_OK;
}

void cli_model_free(cli_model *m) {
    if (!m) return;
    mxp_executor_free(m->ex);
    mxp_ndarray_list_free(m->n_arg, m->args, m->arg_names);
    mxp_ndarray_list_free(m->n_aux, m->auxs, m->aux_names);
    mxp_symbol_release(m->sym);
    memset(m, 0, sizeof *m);
}
