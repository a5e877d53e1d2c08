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
/* y (=|+=, add) x * sc[c] + sh[c]; relu: max of that and 0; res not
 * NULL: max(x * sc[c] + sh[c] + res, 0) (relu implied). */
int nn_bnf_apply(const mxp_op_ctx *ctx, const float *x, const float *res, float *y, int64_t O, int64_t C, int64_t S,
                 const float *sc, const float *sh, int add, int relu);
/* g = dy where y > 0 else 0 (written), sdy[c] = sum of g,
 * sdyx[c] = sum of g * (x - mean[c]) (one pass). */
int nn_bnf_dsums_ymask(const mxp_op_ctx *ctx, const float *x, const float *dy, const float *y, float *g, int64_t O,
                       int64_t C, int64_t S, const float *mean, double *sdy, double *sdyx);
/* sdy[c] = sum of dy, sdyx[c] = sum of dy * (x - mean[c]) (one pass).
 * msc/msh not NULL: dy counts only where x * msc[c] + msh[c] > 0 (the
 * gradient through a ReLU applied by nn_bnf_apply with sc = msc, sh = msh:
 * the same expression, so the same mask). */
int nn_bnf_dsums(const mxp_op_ctx *ctx, const float *x, const float *dy, int64_t O, int64_t C, int64_t S,
                 const float *mean, const float *msc, const float *msh, double *sdy, double *sdyx);
/* dx (=|+=, add) a[c] * dy + b[c] * (x - mean[c]) + k[c]; dy masked as in
 * nn_bnf_dsums when msc/msh are not NULL. */
int nn_bnf_dx(const mxp_op_ctx *ctx, const float *x, const float *dy, float *dx, int64_t O, int64_t C, int64_t S,
              const float *mean, const float *a, const float *b, const float *k, const float *msc, const float *msh,
              int add);

#endif
