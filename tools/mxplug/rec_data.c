/* rec_data.c — `rec:PREFIX` for `mxplug train` (rec_data.h): ImageRecordIter
 * kwargs from the command's options.  Pixels are scaled by 1/256 unless
 * --aug sets scale (the same range as mnist:, which uses MNISTIter's
 * 1/256).  Validation never augments randomly: centre crop, no mirror. */
#include "rec_data.h"
#include "cli_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_KW 40

int cli_is_rec_spec(const char *spec) { return spec && !strncmp(spec, "rec:", 4); }

static int64_t count_records(const char *rec, const char *idx) {
    mxp_recordio *r = NULL;
    int rc = mxp_recordio_open_read(rec, idx, &r);
    if (rc) return cli_fail(rc, "opening '%s'", rec), -1;
    int64_t n = 0;
    if (idx) {
        uint64_t k = 0;
        mxp_recordio_keys(r, NULL, &k);
        n = (int64_t)k;
    } else {
        const void *d;
        uint64_t len;
        int has = 1;
        while (has && (rc = mxp_recordio_read_next(r, &d, &len, &has)) == MXP_OK) n += has;
        if (rc) n = -1, cli_fail(rc, "reading '%s'", rec);
    }
    mxp_recordio_close(r);
    return n;
}

static int make_iter(const char *cmd, const char *rec, const char *idx, const cli_rec_opts *o, int64_t batch,
                     uint64_t seed, int training, mxp_iter **out) {
    const char *keys[MAX_KW], *vals[MAX_KW];
    char shape[160], bs[32], sd[32];
    /* C,H,W parsed here (a long value was cut to fit before), then
     * written back in full. */
    mxp_shape ds;
    if (cli_parse_dims(cmd, "--data-shape", o->data_shape, 1, 3, 3, &ds)) return CLI_USAGE;
    snprintf(shape, sizeof shape, "(%lld,%lld,%lld)", (long long)ds.dims[0], (long long)ds.dims[1],
             (long long)ds.dims[2]);
    snprintf(bs, sizeof bs, "%lld", (long long)batch);
    snprintf(sd, sizeof sd, "%lld", (long long)(seed & 0x7fffffffffffffffull));
    int n = 0;
    keys[n] = "path_imgrec", vals[n++] = rec;
    if (idx) keys[n] = "path_imgidx", vals[n++] = idx;
    keys[n] = "data_shape", vals[n++] = shape;
    keys[n] = "batch_size", vals[n++] = bs;
    keys[n] = "verbose", vals[n++] = "False";
    keys[n] = "seed", vals[n++] = sd;
    keys[n] = "shuffle", vals[n++] = training ? "True" : "False";
    if (training && o->rand_crop) keys[n] = "rand_crop", vals[n++] = "True";
    if (training && o->rand_mirror) keys[n] = "rand_mirror", vals[n++] = "True";
    int has_scale = 0;
    char *aug = NULL;
    int n_aug = 0;
    if (o->aug) {
        int rc = cli_parse_kv_list(cmd, "--aug", o->aug, &aug, keys + n, vals + n, MAX_KW - 1 - n, &n_aug);
        if (rc) {
            free(aug);
            return rc;
        }
    }
    for (int i = n; i < n + n_aug; i++)
        if (!strcmp(keys[i], "scale")) has_scale = 1;
    n += n_aug;
    if (!has_scale) keys[n] = "scale", vals[n++] = "0.00390625";
    int rc = mxp_iter_create("ImageRecordIter", n, keys, vals, out);
    free(aug);
    if (rc) return cli_fail(rc, "creating ImageRecordIter over '%s'", rec);
    return CLI_OK;
}

int cli_rec_iters(const char *cmd, const char *spec, const cli_rec_opts *o, int64_t batch, uint64_t seed,
                  mxp_iter **train, mxp_iter **val, int64_t *n_train) {
    *train = *val = NULL;
    *n_train = 0;
    int kind;
    const char *prefix;
    if (cli_parse_data_spec(cmd, spec, &kind, &prefix)) return CLI_USAGE;
    if (kind != CLI_DATA_REC)
        return cli_usage_error(cmd, "--data '%s': expected rec:PREFIX (PREFIX_train.rec, PREFIX_val.rec)", spec);
    if (!o->data_shape) return cli_usage_error(cmd, "--data rec:PREFIX needs --data-shape C,H,W (e.g. 3,32,32)");
    mxp_shape ds;
    if (cli_parse_dims(cmd, "--data-shape", o->data_shape, 1, 3, 3, &ds)) return CLI_USAGE;
    char rec[4096], idx[4096], vrec[4096], vidx[4096];
    snprintf(rec, sizeof rec, "%s_train.rec", spec + 4);
    snprintf(idx, sizeof idx, "%s_train.idx", spec + 4);
    snprintf(vrec, sizeof vrec, "%s_val.rec", spec + 4);
    snprintf(vidx, sizeof vidx, "%s_val.idx", spec + 4);
    if (access(rec, R_OK) != 0) {
        cli_err("%s: --data %s: '%s' not found (make it with `mxplug im2rec`)", cmd, spec, rec);
        return CLI_FAIL;
    }
    const char *ti = access(idx, R_OK) == 0 ? idx : NULL;
    *n_train = count_records(rec, ti);
    if (*n_train < 0) return CLI_FAIL;
    int rc = make_iter(cmd, rec, ti, o, batch, seed, 1, train);
    if (rc == CLI_OK && access(vrec, R_OK) == 0)
        rc = make_iter(cmd, vrec, access(vidx, R_OK) == 0 ? vidx : NULL, o, batch, 0, 0, val);
    if (rc != CLI_OK) {
        mxp_iter_free(*train);
        *train = NULL;
    }
    return rc;
}
