/* batchnorm_rows.h — what BatchNorm's float32 (batchnorm_f32.c) and
 * bfloat16 (batchnorm_bf16.c) passes share over an (O, C, S) tensor seen
 * as O*C rows of S values: the chunking of rows for nn_parallel, the
 * per-channel sums of per-row pair sums (added over o in a fixed order, so
 * the result does not depend on the thread count), and the shifted
 * moments turned into mean and variance. */
#ifndef NN_BATCHNORM_ROWS_H
#define NN_BATCHNORM_ROWS_H

#include "nn_common.h"

/* Rows per parallel chunk: about 16384 values, at least one row. */
int64_t nn_bn_grain_rows(int64_t S);

/* Runs fn(pass, ...) over O*C rows; fn writes row r's two sums to
 * (*part)[2r], (*part)[2r+1] (the scratch is allocated here, set in *part
 * for fn to find, and freed); then s0[c], s1[c] = their sums over o.
 * who names the op in the out-of-memory error. */
int nn_bn_row_sums(const mxp_op_ctx *ctx, int64_t O, int64_t C, int64_t S, nn_range_fn fn, void *pass,
                   double **part, double *s0, double *s1, const char *who);

/* mean[c], var[c] hold sum(x - shift[c]) and sum((x - shift[c])^2) over
 * n values: turns them into the mean and the (biased, >= 0) variance. */
void nn_bn_moments_finish(int64_t n, int64_t C, const float *shift, double *mean, double *var);

#endif
