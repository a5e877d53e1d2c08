/* metric.c — evaluation metrics (mx.metric): Accuracy, TopKAccuracy and
 * CrossEntropy, accumulated as (sum_metric, num_inst) and reported as
 * their ratio.  Computed on the host in double from float32 predictions
 * (after waiting for them); labels may be any real dtype and are
 * truncated to int as MXNet's astype('int32') does.  A batch's last `pad`
 * rows are excluded (mxplug addition for padded batches). */
#include "train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M_ACC, M_TOPK, M_CE };

struct mxp_metric {
    int kind;
    int top_k;
    double eps;
    double sum;
    int64_t num;
    char name[48];
};

int mxp_metric_create(const char *name, int n_kwargs, const char *const *keys, const char *const *vals,
                      mxp_metric **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_metric_create: out is NULL");
    *out = NULL;
    mxp_metric m = {.top_k = 1, .eps = 1e-12};
    if (!name) return mxp__error(MXP_EINVAL, "mxp_metric_create: name is NULL");
    if (!strcmp(name, "acc") || !strcmp(name, "accuracy")) m.kind = M_ACC;
    else if (!strcmp(name, "top_k_accuracy") || !strcmp(name, "top_k_acc")) m.kind = M_TOPK;
    else if (!strcmp(name, "ce") || !strcmp(name, "cross-entropy")) m.kind = M_CE;
    else return mxp__error(MXP_EINVAL, "metric '%s': unknown (acc, top_k_accuracy, ce)", name);
    for (int i = 0; i < n_kwargs; i++) {
        char *end;
        if (!keys || !vals || !keys[i] || !vals[i]) return mxp__error(MXP_EINVAL, "metric '%s': NULL kwarg", name);
        if (m.kind == M_TOPK && !strcmp(keys[i], "top_k")) {
            long v = strtol(vals[i], &end, 10);
            if (*end || end == vals[i] || v < 1) return mxp__error(MXP_EINVAL, "metric '%s': top_k '%s' must be >= 1", name, vals[i]);
            m.top_k = (int)v;
        } else if (m.kind == M_CE && !strcmp(keys[i], "eps")) {
            m.eps = strtod(vals[i], &end);
            if (*end || end == vals[i]) return mxp__error(MXP_EINVAL, "metric '%s': eps '%s' is not a number", name, vals[i]);
        } else {
            return mxp__error(MXP_EINVAL, "metric '%s': unknown parameter '%s'", name, keys[i]);
        }
    }
    if (m.kind == M_ACC) snprintf(m.name, sizeof m.name, "accuracy");
    else if (m.kind == M_TOPK) snprintf(m.name, sizeof m.name, "top_k_accuracy_%d", m.top_k);
    else snprintf(m.name, sizeof m.name, "cross-entropy");
    mxp_metric *p = malloc(sizeof *p);
    if (!p) return mxp__error_oom("metric");
    *p = m;
    mxp_metric_reset(p);
    *out = p;
    return MXP_OK;
}

void mxp_metric_free(mxp_metric *m) { free(m); }

void mxp_metric_reset(mxp_metric *m) {
    if (!m) return;
    m->sum = 0;
    m->num = 0;
}

int64_t mxp_metric_num_inst(const mxp_metric *m) { return m ? m->num : 0; }

int mxp_metric_get(const mxp_metric *m, const char **out_name, double *out_value) {
    if (out_name) *out_name = NULL;
    if (out_value) *out_value = NAN;
    if (!m) return mxp__error(MXP_EINVAL, "mxp_metric_get: NULL metric");
    if (out_name) *out_name = m->name;
    if (out_value) *out_value = m->num ? m->sum / (double)m->num : NAN;
    return MXP_OK;
}

static int host_doubles(mxp_ndarray *a, double **out) {
    *out = NULL;
    int64_t n = mxp_ndarray_size(a);
    int dt = mxp_ndarray_dtype(a);
    int rc = mxp_ndarray_wait_to_read(a);
    if (rc) return rc;
    const void *p = mxp_ndarray_data(a);
    void *copy = NULL;
    if (!p && n) { /* a device array (a GPU output): read a host copy */
        size_t bytes = mxp_ndarray_nbytes(a);
        if (!(copy = malloc(bytes))) return mxp__error_oom("metric");
        if ((rc = mxp_ndarray_sync_copy_to(a, copy, bytes))) {
            free(copy);
            return mxp__error_prefix(rc, "metric: reading the array back to the host");
        }
        p = copy;
    }
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        free(copy);
        return mxp__error_oom("metric");
    }
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case MXP_DTYPE_F32: v[i] = ((const float *)p)[i]; break;
        case MXP_DTYPE_F64: v[i] = ((const double *)p)[i]; break;
        case MXP_DTYPE_I32: v[i] = ((const int32_t *)p)[i]; break;
        case MXP_DTYPE_I64: v[i] = (double)((const int64_t *)p)[i]; break;
        case MXP_DTYPE_U8: v[i] = ((const uint8_t *)p)[i]; break;
        default: free(v); free(copy); return mxp__error(MXP_ETYPE, "metric: unsupported dtype %s", mxp_dtype_name(dt));
        }
    }
    free(copy);
    *out = v;
    return MXP_OK;
}

static int update_one(mxp_metric *m, mxp_ndarray *label, mxp_ndarray *pred, int pad) {
    int64_t N = mxp_ndarray_ndim(label) >= 1 ? mxp_ndarray_shape(label)[0] : 1;
    int64_t nl = mxp_ndarray_size(label), np = mxp_ndarray_size(pred);
    if (mxp_ndarray_ndim(pred) < 1 || mxp_ndarray_shape(pred)[0] != N || nl != N)
        return mxp__error(MXP_ESHAPE, "metric '%s': label has %lld entries, prediction's first axis %lld "
                          "(labels must be (N) or (N,1))", m->name, (long long)nl,
                          (long long)(mxp_ndarray_ndim(pred) ? mxp_ndarray_shape(pred)[0] : -1));
    int64_t C = N ? np / N : 0;
    int same = np == nl; /* MXNet: pred already holds class ids */
    if (same && m->kind != M_ACC)
        return mxp__error(MXP_ESHAPE, "metric '%s': prediction must be (N, classes)", m->name);
    if (pad < 0 || pad > N) return mxp__error(MXP_EINVAL, "metric '%s': pad %d outside [0, %lld]", m->name, pad, (long long)N);
    double *l = NULL, *p = NULL;
    int rc = host_doubles(label, &l);
    if (rc == MXP_OK) rc = host_doubles(pred, &p);
    if (rc != MXP_OK) {
        free(l);
        free(p);
        return rc;
    }
    int64_t use = N - pad;
    for (int64_t i = 0; i < use && rc == MXP_OK; i++) {
        int64_t y = (int64_t)l[i];
        const double *row = p + i * C;
        if (same) {
            m->sum += (int64_t)row[0] == y;
            continue;
        }
        if (y < 0 || y >= C) {
            rc = mxp__error(MXP_EINVAL, "metric '%s': label %lld outside [0, %lld)", m->name, (long long)y, (long long)C);
            break;
        }
        if (m->kind == M_ACC) {
            int64_t best = 0;
            for (int64_t c = 1; c < C; c++)
                if (row[c] > row[best]) best = c;
            m->sum += best == y;
        } else if (m->kind == M_TOPK) {
            int64_t greater = 0;
            for (int64_t c = 0; c < C; c++) greater += row[c] > row[y];
            m->sum += greater < m->top_k;
        } else {
            m->sum += -log(row[y] + m->eps);
        }
    }
    if (rc == MXP_OK) m->num += use;
    free(l);
    free(p);
    return rc;
}

int mxp_metric_update(mxp_metric *m, int n, mxp_ndarray *const *labels, mxp_ndarray *const *preds, int pad) {
    if (!m || n < 0 || (n && (!labels || !preds))) return mxp__error(MXP_EINVAL, "mxp_metric_update: bad argument");
    for (int i = 0; i < n; i++) {
        int rc = update_one(m, labels[i], preds[i], pad);
        if (rc) return rc;
    }
    return MXP_OK;
}

void mxp__metric_totals(const mxp_metric *m, double *out_sum, int64_t *out_num) {
    *out_sum = m->sum;
    *out_num = m->num;
}

void mxp__metric_set_totals(mxp_metric *m, double sum, int64_t num) {
    m->sum = sum;
    m->num = num;
}
