/* exec_test_util.h — helpers for the executor tests (header-only): arrays
 * from a deterministic generator, reading arrays back as doubles, binding
 * with every argument given, the MLP and LeNet symbols. */
#ifndef MXP_TEST_EXEC_UTIL_H
#define MXP_TEST_EXEC_UTIL_H

#include "../graph/graph_test_util.h"

#include <math.h>

static const mxp_device et_cpu = {MXP_DEV_CPU, 0};

/* Deterministic values in [-1, 1). */
static inline double et_val(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*st >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

static inline mxp_ndarray *et_arr(int dt, const mxp_shape *s, uint64_t *seed, double scale) {
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(s->dims, s->ndim, dt, et_cpu, &a), MXP_OK, "%s", mxp_last_error());
    int64_t n = mxp_ndarray_size(a);
    size_t bytes = mxp_ndarray_nbytes(a);
    void *buf = malloc(bytes + 8);
    for (int64_t i = 0; i < n; i++) {
        double v = seed ? et_val(seed) * scale : scale;
        if (dt == MXP_DTYPE_F64) ((double *)buf)[i] = v;
        else ((float *)buf)[i] = (float)v;
    }
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, buf, bytes), MXP_OK);
    free(buf);
    return a;
}

static inline double *et_read(mxp_ndarray *a) {
    int64_t n = mxp_ndarray_size(a);
    size_t bytes = mxp_ndarray_nbytes(a);
    void *buf = malloc(bytes + 8);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, buf, bytes), MXP_OK, "%s", mxp_last_error());
    double *d = malloc(((size_t)n + 1) * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = mxp_ndarray_dtype(a) == MXP_DTYPE_F64 ? ((double *)buf)[i] : ((float *)buf)[i];
    free(buf);
    return d;
}

static inline void et_set(mxp_ndarray *a, const double *v) {
    int64_t n = mxp_ndarray_size(a);
    size_t bytes = mxp_ndarray_nbytes(a);
    void *buf = malloc(bytes + 8);
    for (int64_t i = 0; i < n; i++) {
        if (mxp_ndarray_dtype(a) == MXP_DTYPE_F64) ((double *)buf)[i] = v[i];
        else ((float *)buf)[i] = (float)v[i];
    }
    cr_assert_eq(mxp_ndarray_sync_copy_from(a, buf, bytes), MXP_OK);
    free(buf);
}

/* Raw bytes of an array (for bit-identity). */
static inline void *et_bytes(mxp_ndarray *a) {
    size_t bytes = mxp_ndarray_nbytes(a);
    void *buf = malloc(bytes + 8);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, buf, bytes), MXP_OK, "%s", mxp_last_error());
    return buf;
}

/* FC(hidden)->relu->FC(classes)->SoftmaxOutput named fc1/relu1/fc2/softmax. */
static inline mxp_symbol *et_mlp(int hidden, int classes) {
    char h[32], c[32];
    snprintf(h, sizeof h, "num_hidden=%d", hidden);
    snprintf(c, sizeof c, "num_hidden=%d", classes);
    mxp_symbol *data = gt_var("data");
    mxp_symbol *fc1 = gt_op("FullyConnected", "fc1", 1, &data, h, NULL);
    mxp_symbol *act = gt_op("Activation", "relu1", 1, &fc1, "act_type=relu", NULL);
    mxp_symbol *fc2 = gt_op("FullyConnected", "fc2", 1, &act, c, NULL);
    mxp_symbol *sm = gt_op("SoftmaxOutput", "softmax", 1, &fc2, NULL);
    mxp_symbol_release(data);
    mxp_symbol_release(fc1);
    mxp_symbol_release(act);
    mxp_symbol_release(fc2);
    return sm;
}

/* Bind sym with random arguments (labels in [0, classes)) of dtype dt,
 * gradients for every argument except `no_grad` (by name), req `req`,
 * aux states zero (moving var one). */
static inline mxp_executor *et_bind(mxp_symbol *sym, int dt, int n_known, const char *const *names,
                                    const mxp_shape *shapes, uint64_t seed, int req, const char *label,
                                    int classes) {
    int na, nx, complete;
    mxp_shape *as, *xs;
    cr_assert_eq(mxp_symbol_infer_shape(sym, n_known, names, shapes, &na, &as, NULL, NULL, &nx, &xs, &complete), MXP_OK,
                 "%s", mxp_last_error());
    cr_assert_eq(complete, 1);
    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &na, &an), MXP_OK);
    mxp_ndarray *args[64] = {0}, *grads[64] = {0}, *aux[16] = {0};
    int reqs[64];
    uint64_t st = seed;
    for (int i = 0; i < na; i++) {
        int is_label = label && !strcmp(an[i], label);
        args[i] = et_arr(dt, &as[i], is_label ? NULL : &st, is_label ? 0.0 : 0.5);
        if (is_label) {
            int64_t n = mxp_ndarray_size(args[i]);
            double *v = malloc((size_t)n * sizeof *v);
            for (int64_t k = 0; k < n; k++) v[k] = (double)((k * 7 + 3) % classes);
            et_set(args[i], v);
            free(v);
        }
        reqs[i] = is_label ? MXP_REQ_NULL : req;
        if (reqs[i] != MXP_REQ_NULL) grads[i] = et_arr(dt, &as[i], NULL, 0.0);
    }
    for (int i = 0; i < nx; i++) aux[i] = et_arr(dt, &xs[i], NULL, i % 2 ? 1.0 : 0.0);
    mxp_executor *ex = NULL;
    cr_assert_eq(mxp_executor_bind(sym, et_cpu, na, args, grads, reqs, nx, aux, &ex), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < na; i++) {
        mxp_ndarray_release(args[i]);
        mxp_ndarray_release(grads[i]);
    }
    for (int i = 0; i < nx; i++) mxp_ndarray_release(aux[i]);
    free(as);
    free(xs);
    return ex;
}

static inline mxp_ndarray *et_arg(mxp_executor *ex, mxp_symbol *sym, const char *name, int grad) {
    int n;
    const char *const *an;
    cr_assert_eq(mxp_symbol_list_arguments(sym, &n, &an), MXP_OK);
    mxp_ndarray *const *a;
    int m;
    cr_assert_eq(grad ? mxp_executor_grads(ex, &m, &a) : mxp_executor_args(ex, &m, &a), MXP_OK);
    for (int i = 0; i < n; i++)
        if (!strcmp(an[i], name)) return a[i];
    cr_assert_fail("no argument '%s'", name);
    return NULL;
}

#endif /* MXP_TEST_EXEC_UTIL_H */
