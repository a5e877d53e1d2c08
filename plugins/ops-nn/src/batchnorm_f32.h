/* batchnorm_f32.h — BatchNorm's float32 passes over an (O, C, S) tensor
 * (batchnorm_f32.c), shared by BatchNorm (batchnorm.c).  Every pass walks
 * the rows (o, c) of S values in memory order, split over the host's
 * threads; per-channel reductions are summed per row, then over o in a
 * fixed order, so results do not depend on the thread count. */
#ifndef NN_BATCHNORM_F32_H
#define NN_BATCHNORM_F32_H

#include "nn_common.h"

/* Batch mean and biased variance of each channel of x (one pass). */
int nn_bnf_stats(const mxp_op_ctx *ctx, const float *x, int64_t O, int64_t C, int64_t S, double *mean, double *var);
/* y (=|+=, add) x * sc[c] + sh[c]. */
int nn_bnf_apply(const mxp_op_ctx *ctx, const float *x, float *y, int64_t O, int64_t C, int64_t S, const float *sc,
                 const float *sh, int add);
/* sdy[c] = sum of dy, sdyx[c] = sum of dy * (x - mean[c]) (one pass). */
int nn_bnf_dsums(const mxp_op_ctx *ctx, const float *x, const float *dy, int64_t O, int64_t C, int64_t S,
                 const float *mean, double *sdy, double *sdyx);
/* dx (=|+=, add) a[c] * dy + b[c] * (x - mean[c]) + k[c]. */
int nn_bnf_dx(const mxp_op_ctx *ctx, const float *x, const float *dy, float *dx, int64_t O, int64_t C, int64_t S,
              const float *mean, const float *a, const float *b, const float *k, int add);

#endif
