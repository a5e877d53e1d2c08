/* nn_test_util.h — helpers shared by the ops_nn tests (header-only, static):
 * random fills, norm-wise relative error, and typed element access. */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <mxp/types.h>
#include "fake_host.h"

/* The ops-nn tests run on a fake host with 2 threads, so blocked kernels
 * split their work as on a 2-core machine. */
static inline fh_pack *nn_load(const char *name) {
    fh_set_threads(2);
    return fh_load(name);
}

static inline double tu_get(const void *p, int32_t dt, int64_t i) {
    return dt == MXP_DTYPE_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void tu_set(void *p, int32_t dt, int64_t i, double v) {
    if (dt == MXP_DTYPE_F32) ((float *)p)[i] = (float)v; else ((double *)p)[i] = v;
}
static inline void tu_fill(void *p, int32_t dt, int64_t n, uint64_t *rng, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) tu_set(p, dt, i, fh_rand(rng, lo, hi));
}
/* Reads an array of dtype dt into a new double array. */
static inline double *tu_to_f64(const void *p, int32_t dt, int64_t n) {
    double *d = malloc((size_t)(n ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = tu_get(p, dt, i);
    return d;
}
/* ||got - ref|| / max(||ref||, tiny) with got in dtype dt. */
static inline double tu_relerr(const void *got, int32_t dt, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) { double d = tu_get(got, dt, i) - ref[i]; num += d * d; den += ref[i] * ref[i]; }
    return sqrt(num) / (den > 1e-300 ? sqrt(den) : 1.0);
}
#endif

#include <criterion/criterion.h>

/* Loss L = sum_i out0[i] * out_grad0[i]; central differences of L against
 * the analytic in_grad of every input k with check[k] set.  The node must be
 * float64, allocated and filled (inputs and out_grad[0]). */
static inline double tu_loss(fh_node *n) {
    int64_t ny = fh_shape_numel(&n->out_shape[0]);
    double l = 0;
    for (int64_t q = 0; q < ny; q++) l += ((double *)n->out[0])[q] * ((double *)n->out_grad[0])[q];
    return l;
}
/* every: check each every-th element; 0 = about 60 elements per input. */
static inline void tu_fd_check_every(fh_node *n, int is_train, const int *check, double tol, int64_t every) {
    cr_assert_eq(fh_node_forward(n, is_train, NULL), 0, "%s", fh_error());
    cr_assert_eq(fh_node_backward(n, NULL), 0, "%s", fh_error());
    const double h = 1e-6;
    for (uint32_t k = 0; k < n->n_in; k++) {
        if (!check[k]) continue;
        double *v = n->in[k], *g = n->in_grad[k];
        int64_t cnt = fh_shape_numel(&n->in_shape[k]), step = every > 0 ? every : cnt > 60 ? cnt / 60 : 1;
        for (int64_t i = 0; i < cnt; i += step) {
            double save = v[i];
            v[i] = save + h; cr_assert_eq(fh_node_forward(n, is_train, NULL), 0);
            double lp = tu_loss(n);
            v[i] = save - h; fh_node_forward(n, is_train, NULL);
            double lm = tu_loss(n);
            v[i] = save;
            double fd = (lp - lm) / (2 * h);
            cr_assert(fabs(fd - g[i]) <= tol * (1 + fabs(fd)), "%s input %u elem %lld: fd %.9g analytic %.9g",
                      n->def->name, k, (long long)i, fd, g[i]);
        }
    }
}
static inline void tu_fd_check(fh_node *n, int is_train, const int *check, double tol) {
    tu_fd_check_every(n, is_train, check, tol, 0);
}
/* init + set data shape + infer + alloc, asserting success. */
static inline void tu_node(fh_node *n, fh_pack *p, const char *op, const char *kw, int32_t dt,
                           int nd, const int64_t *dims, int is_train) {
    cr_assert_eq(fh_node_init(n, p, op, "default", kw, dt), 0, "%s: %s", op, fh_error());
    n->in_shape[0].ndim = nd;
    for (int i = 0; i < nd; i++) n->in_shape[0].dims[i] = dims[i];
    cr_assert_eq(fh_node_infer(n), MXP_OK, "%s infer: %s", op, fh_error());
    cr_assert_eq(fh_node_alloc(n, is_train), 1, "%s alloc: %s", op, n->reason);
}
