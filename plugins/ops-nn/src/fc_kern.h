/* fc_kern.h — float32 GEMM kernels for FullyConnected's small products
 * (fc_kern.c says why and how). */
#ifndef NN_FC_KERN_H
#define NN_FC_KERN_H

#include "nn_common.h"

/* Row-major C[m x n] = op(A) . op(B) (+ C when accumulate) (+ bias[j] when
 * bias is not NULL), op(X) = X or X^T as BLAS's trans flags say.  Handles
 * (trans_a, trans_b) = (0, 1), (0, 0) and (1, 0) while B fits the kernels'
 * cache budget; returns 1 when it computed C, 0 when the caller must use
 * BLAS instead (nothing written then).  Splits large products over
 * ctx->parallel_for (ctx may be NULL: serial). */
int nn_sgemm_small(const mxp_op_ctx *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                   int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *bias);

#endif
