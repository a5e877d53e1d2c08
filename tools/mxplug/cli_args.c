/* cli_args.c — strict parsing of the option values mxplug's commands share
 * (cli_args.h).  Pure functions of their strings; errors go through
 * cli_usage_error.  mxp_size_of_shape (public API, no registry) is the one
 * overflow check for shapes. */
#include "cli_args.h"

#include <mxplug/fileio.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_int(const char *cmd, const char *what, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_usage_error(cmd, "%s: '%s' is not an integer in [%lld, %lld]", what, s, lo, hi);
    *out = v;
    return CLI_OK;
}

int cli_parse_double(const char *cmd, const char *what, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* ERANGE on underflow (1e-320) still gives a usable value; overflow
     * gives inf, which no option accepts. */
    if (end == s || *end) return cli_usage_error(cmd, "%s: '%s' is not a number", what, s);
    if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1))
        return cli_usage_error(cmd, "%s: '%s' is not a finite number", what, s);
    *out = v;
    return CLI_OK;
}

/* cli_parse_dims; messages show `shown` (the whole option value). */
static int parse_dims(const char *cmd, const char *what, const char *shown, const char *s, long long lo, int min_ndim,
                      int max_ndim, mxp_shape *out) {
    memset(out, 0, sizeof *out);
    if (max_ndim > MXP_MAX_NDIM) max_ndim = MXP_MAX_NDIM;
    for (const char *p = s; *p;) {
        if (*p < '0' || *p > '9')
            return cli_usage_error(cmd, "%s '%s': dimensions are integers >= %lld separated by ','", what, shown, lo);
        char *e;
        errno = 0;
        long long v = strtoll(p, &e, 10);
        if (errno == ERANGE || v < lo || (*e && *e != ','))
            return cli_usage_error(cmd, "%s '%s': dimensions are integers >= %lld separated by ','", what, shown, lo);
        if (out->ndim == max_ndim)
            return cli_usage_error(cmd, "%s '%s': more than %d dimensions", what, shown, max_ndim);
        out->dims[out->ndim++] = v;
        p = e;
        if (*p == ',') {
            p++;
            if (!*p) return cli_usage_error(cmd, "%s '%s': a dimension is missing after the last ','", what, shown);
        }
    }
    if (out->ndim < min_ndim)
        return cli_usage_error(cmd, "%s '%s': %d dimension(s), expected %s%d", what, shown, out->ndim,
                               min_ndim == max_ndim ? "" : "at least ", min_ndim);
    return CLI_OK;
}

int cli_parse_dims(const char *cmd, const char *what, const char *s, long long lo, int min_ndim, int max_ndim,
                   mxp_shape *out) {
    return parse_dims(cmd, what, s, s, lo, min_ndim, max_ndim, out);
}

int cli_parse_shape_arg(const char *cmd, const char *arg, size_t elem_size, size_t extra, char *name,
                        size_t name_cap, mxp_shape *out) {
    memset(out, 0, sizeof *out);
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return cli_usage_error(cmd, "--shape wants NAME=d1,d2,..., got '%s'", arg);
    if ((size_t)(eq - arg) >= name_cap)
        return cli_usage_error(cmd, "--shape '%s': the name is longer than %zu bytes", arg, name_cap - 1);
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    int rc = parse_dims(cmd, "bad shape", arg, eq + 1, 0, 0, MXP_MAX_NDIM, out);
    if (rc) return rc;
    if (mxp_size_of_shape(name, out->dims, out->ndim, elem_size, extra, NULL, NULL))
        return cli_usage_error(cmd, "bad shape '%s': %s", arg, mxp_last_error());
    return CLI_OK;
}

int cli_parse_kv_arg(const char *cmd, const char *opt, const char *arg, char **key, const char **val) {
    *key = NULL;
    *val = NULL;
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) return cli_usage_error(cmd, "%s wants KEY=VALUE, got '%s'", opt, arg);
    if (!(*key = strndup(arg, (size_t)(eq - arg)))) {
        cli_err("%s: out of memory", cmd);
        return CLI_FAIL;
    }
    *val = eq + 1;
    return CLI_OK;
}

int cli_parse_kv_list(const char *cmd, const char *opt, const char *s, char **copy, const char **keys,
                      const char **vals, int cap, int *n) {
    *n = 0;
    if (!(*copy = strdup(s))) {
        cli_err("%s: out of memory", cmd);
        return CLI_FAIL;
    }
    for (char *save = NULL, *kv = strtok_r(*copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv) return cli_usage_error(cmd, "%s '%s': expected key=value[,key=value...]", opt, s);
        if (*n >= cap) return cli_usage_error(cmd, "%s '%s': more than %d key=value items", opt, s, cap);
        *eq = 0;
        keys[*n] = kv;
        vals[(*n)++] = eq + 1;
    }
    return CLI_OK;
}

int cli_parse_data_spec(const char *cmd, const char *spec, int *kind, const char **path) {
    *kind = 0;
    *path = NULL;
    if (!strncmp(spec, "mnist:", 6)) *kind = CLI_DATA_MNIST, *path = spec + 6;
    else if (!strncmp(spec, "rec:", 4)) *kind = CLI_DATA_REC, *path = spec + 4;
    if (!*kind || !**path) {
        *kind = 0;
        *path = NULL;
        return cli_usage_error(cmd, "--data '%s': expected mnist:DIR (MNIST IDX files) or rec:PREFIX (image records)",
                               spec);
    }
    if (strlen(*path) > CLI_DATA_PATH_MAX) {
        *kind = 0;
        *path = NULL;
        return cli_usage_error(cmd, "--data: the path is longer than %d bytes", CLI_DATA_PATH_MAX);
    }
    return CLI_OK;
}
