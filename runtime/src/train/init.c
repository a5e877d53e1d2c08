/* init.c — parameter initializers (mx.init): zeros, ones, constant,
 * Uniform(scale), Normal(sigma), Xavier(rnd_type, factor_type, magnitude),
 * and name-pattern rules with MXNet's defaults (see mxplug/train.h).
 * Random kinds run the ops-basic ops _random_uniform / _random_normal, so
 * they draw from the runtime's Philox RNG in push order: reproducible for
 * a given mxp_random_seed and sequence of calls, whatever the threads.
 * Xavier's fans are MXNet's: (out, in, k...) -> in*prod(k), out*prod(k). */
#include "train/train.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mxp__train_fmt(char *buf, double v) {
    snprintf(buf, 32, "%.17g", v);
    return buf;
}

int mxp__train_invoke(const char *op, int n_in, mxp_ndarray *const *in, int n_out, mxp_ndarray **out,
                      const char *const *kv) {
    const char *keys[16], *vals[16];
    int n = 0;
    while (kv && kv[2 * n] && n < 16) {
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
        n++;
    }
    mxp_invoke_opts o;
    memset(&o, 0, sizeof o);
    if (n_out > 0 && out[0]) {
        o.has_device = 1;
        o.device = mxp_ndarray_device(out[0]);
    }
    int cap = n_out;
    return mxp_invoke_ex(op, n_in, in, &cap, out, n, keys, vals, &o);
}

mxp_init mxp_init_zeros(void) { return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_ZEROS}; }
mxp_init mxp_init_ones(void) { return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_ONES}; }
mxp_init mxp_init_constant(double value) { return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_CONSTANT, .value = value}; }
mxp_init mxp_init_uniform(double scale) { return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_UNIFORM, .scale = scale}; }
mxp_init mxp_init_normal(double sigma) { return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_NORMAL, .sigma = sigma}; }
mxp_init mxp_init_xavier(int rnd_type, int factor_type, double magnitude) {
    return (mxp_init){.struct_size = sizeof(mxp_init), .kind = MXP_INIT_XAVIER, .rnd_type = rnd_type, .factor_type = factor_type,
                      .magnitude = magnitude};
}

int mxp_init_xavier_fans(const int64_t *shape, int ndim, double *out_fan_in, double *out_fan_out) {
    if (out_fan_in) *out_fan_in = 0;
    if (out_fan_out) *out_fan_out = 0;
    if (!shape || ndim < 2)
        return mxp__error(MXP_EINVAL, "Xavier initializer cannot be applied to a %d-d array: it requires at "
                          "least 2D", ndim);
    double hw = 1;
    for (int d = 2; d < ndim; d++) hw *= (double)shape[d];
    if (out_fan_in) *out_fan_in = (double)shape[1] * hw;
    if (out_fan_out) *out_fan_out = (double)shape[0] * hw;
    return MXP_OK;
}

static int random_fill(mxp_ndarray *arr, int normal, double a, double b) {
    char shape[256], va[32], vb[32];
    int ndim = mxp_ndarray_ndim(arr);
    const int64_t *s = mxp_ndarray_shape(arr);
    size_t off = 0;
    off += (size_t)snprintf(shape + off, sizeof shape - off, "(");
    for (int d = 0; d < ndim && off < sizeof shape; d++)
        off += (size_t)snprintf(shape + off, sizeof shape - off, "%lld%s", (long long)s[d], ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    if (off < sizeof shape) snprintf(shape + off, sizeof shape - off, ")");
    const char *dt = mxp_dtype_name(mxp_ndarray_dtype(arr));
    const char *kv[] = {normal ? "loc" : "low", mxp__train_fmt(va, a), normal ? "scale" : "high",
                        mxp__train_fmt(vb, b), "shape", shape, "dtype", dt ? dt : "float32", NULL};
    mxp_ndarray *out[1] = {arr};
    return mxp__train_invoke(normal ? "_random_normal" : "_random_uniform", 0, NULL, 1, out, kv);
}

/* The 1.0 layout of mxp_init (struct_size 0 reads as it). */
#define INIT_V1 MXP__SIZE_THROUGH(mxp_init, magnitude)

int mxp_init_array(const mxp_init *caller, mxp_ndarray *arr) {
    if (!caller || !arr || mxp_ndarray_is_none(arr)) return mxp__error(MXP_EINVAL, "mxp_init_array: NULL or none array");
    mxp_init copy;
    mxp__app_struct_in(&copy, sizeof copy, caller, INIT_V1);
    const mxp_init *init = &copy;
    switch (init->kind) {
    case MXP_INIT_ZEROS: return mxp_ndarray_fill(arr, 0.0);
    case MXP_INIT_ONES: return mxp_ndarray_fill(arr, 1.0);
    case MXP_INIT_CONSTANT: return mxp_ndarray_fill(arr, init->value);
    case MXP_INIT_UNIFORM: return random_fill(arr, 0, -init->scale, init->scale);
    case MXP_INIT_NORMAL: return random_fill(arr, 1, 0.0, init->sigma);
    case MXP_INIT_XAVIER: {
        double fi, fo;
        int rc = mxp_init_xavier_fans(mxp_ndarray_shape(arr), mxp_ndarray_ndim(arr), &fi, &fo);
        if (rc) return rc;
        double factor = init->factor_type == MXP_XAVIER_IN ? fi : init->factor_type == MXP_XAVIER_OUT ? fo : (fi + fo) / 2.0;
        if (init->factor_type < MXP_XAVIER_AVG || init->factor_type > MXP_XAVIER_OUT)
            return mxp__error(MXP_EINVAL, "Xavier: factor_type %d is not avg, in or out", init->factor_type);
        if (!(factor > 0)) return mxp__error(MXP_EINVAL, "Xavier: zero fan for an empty array");
        double scale = sqrt(init->magnitude / factor);
        if (init->rnd_type == MXP_XAVIER_UNIFORM) return random_fill(arr, 0, -scale, scale);
        if (init->rnd_type == MXP_XAVIER_GAUSSIAN) return random_fill(arr, 1, 0.0, scale);
        return mxp__error(MXP_EINVAL, "Xavier: rnd_type %d is not uniform or gaussian", init->rnd_type);
    }
    default: return mxp__error(MXP_EINVAL, "mxp_init_array: unknown initializer kind %d", init->kind);
    }
}

/* ------------------------------------------------------------ rules */

typedef struct rule {
    char *pattern;
    mxp_init init;
} rule;

struct mxp_init_rules {
    rule *user;   /* tried last-added first */
    int n_user;
    rule defaults[8];
};

int mxp_init_rules_create(const mxp_init *weight_init, mxp_init_rules **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_init_rules_create: out is NULL");
    *out = NULL;
    if (!weight_init) return mxp__error(MXP_EINVAL, "mxp_init_rules_create: weight initializer is NULL");
    mxp_init_rules *r = calloc(1, sizeof *r);
    if (!r) return mxp__error_oom("init rules");
    static const char *zeros[] = {"*bias", "*beta", "*moving_mean", "*moving_inv_var", "*moving_avg"};
    r->defaults[0].pattern = (char *)"*weight";
    mxp__app_struct_in(&r->defaults[0].init, sizeof r->defaults[0].init, weight_init, INIT_V1);
    for (int i = 0; i < 5; i++) r->defaults[1 + i] = (rule){(char *)zeros[i], mxp_init_zeros()};
    r->defaults[6] = (rule){(char *)"*gamma", mxp_init_ones()};
    r->defaults[7] = (rule){(char *)"*moving_var", mxp_init_ones()};
    *out = r;
    return MXP_OK;
}

int mxp_init_rules_add(mxp_init_rules *rules, const char *pattern, const mxp_init *init) {
    if (!rules || !pattern || !init) return mxp__error(MXP_EINVAL, "mxp_init_rules_add: NULL argument");
    rule *u = realloc(rules->user, (size_t)(rules->n_user + 1) * sizeof *u);
    if (!u) return mxp__error_oom("init rules");
    rules->user = u;
    u[rules->n_user].pattern = strdup(pattern);
    if (!u[rules->n_user].pattern) return mxp__error_oom("init rules");
    mxp__app_struct_in(&u[rules->n_user].init, sizeof u[rules->n_user].init, init, INIT_V1);
    rules->n_user++;
    return MXP_OK;
}

void mxp_init_rules_free(mxp_init_rules *rules) {
    if (!rules) return;
    for (int i = 0; i < rules->n_user; i++) free(rules->user[i].pattern);
    free(rules->user);
    free(rules);
}

const mxp_init *mxp_init_rules_find(const mxp_init_rules *rules, const char *name) {
    if (!rules || !name) {
        mxp__error(MXP_EINVAL, "mxp_init_rules_find: NULL argument");
        return NULL;
    }
    for (int i = rules->n_user - 1; i >= 0; i--)
        if (!fnmatch(rules->user[i].pattern, name, 0)) return &rules->user[i].init;
    for (int i = 0; i < 8; i++)
        if (!fnmatch(rules->defaults[i].pattern, name, 0)) return &rules->defaults[i].init;
    mxp__error(MXP_ENOENT, "initializer: unknown initialization pattern for '%s' (no rule matches; default rules "
               "cover *weight, *bias, *gamma, *beta, *moving_mean, *moving_var)", name);
    return NULL;
}

int mxp_init_rules_apply(const mxp_init_rules *rules, const char *name, mxp_ndarray *arr) {
    const mxp_init *in = mxp_init_rules_find(rules, name);
    if (!in) return MXP_ENOENT;
    int rc = mxp_init_array(in, arr);
    if (rc) return mxp__error_prefix(rc, "initializing '%s'", name);
    return MXP_OK;
}
