/* nn_test_util.h — helpers shared by the ops_nn tests (header-only, static):
 * random fills, norm-wise relative error, and typed element access. */
#ifndef NN_TEST_UTIL_H
#define NN_TEST_UTIL_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <mxp/types.h>
#include "nn_harness.h"

static inline double tu_get(const void *p, int32_t dt, int64_t i) {
    return dt == MXP_DTYPE_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void tu_set(void *p, int32_t dt, int64_t i, double v) {
    if (dt == MXP_DTYPE_F32) ((float *)p)[i] = (float)v; else ((double *)p)[i] = v;
}
static inline void tu_fill(void *p, int32_t dt, int64_t n, uint64_t *rng, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) tu_set(p, dt, i, nnh_rand(rng, lo, hi));
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
