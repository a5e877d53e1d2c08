/* batchnorm_bf16.h — BatchNorm's bfloat16 passes over an (O, C, S) tensor
 * (batchnorm_bf16.c): the same passes and contracts as batchnorm_f32.h's
 * nn_bnf_* functions, with the data (x, y, dy, dx, the residual and the
 * output mask) stored as bfloat16 while the statistics, the per-channel
 * coefficients and every sum stay float32/float64 (MXNet's and PyTorch's
 * mixed-precision BatchNorm).  Each stored value is rounded to bf16 once,
 * from float32. */
#ifndef NN_BATCHNORM_BF16_H
#define NN_BATCHNORM_BF16_H

#include "nn_common.h"

int nn_bnh_stats(const mxp_op_ctx *ctx, const uint16_t *x, int64_t O, int64_t C, int64_t S, double *mean, double *var);
int nn_bnh_apply(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *res, uint16_t *y, int64_t O, int64_t C,
                 int64_t S, const float *sc, const float *sh, int add, int relu);
int nn_bnh_dsums_ymask(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, const uint16_t *y, uint16_t *g,
                       int64_t O, int64_t C, int64_t S, const float *mean, double *sdy, double *sdyx);
int nn_bnh_dsums(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, int64_t O, int64_t C, int64_t S,
                 const float *mean, const float *msc, const float *msh, double *sdy, double *sdyx);
int nn_bnh_dx(const mxp_op_ctx *ctx, const uint16_t *x, const uint16_t *dy, uint16_t *dx, int64_t O, int64_t C,
              int64_t S, const float *mean, const float *a, const float *b, const float *k, const float *msc,
              const float *msh, int add);
/* dst = bf16(dst + src) elementwise (the addend's gradient under req add). */
void nn_bnh_add_into(uint16_t *dst, const uint16_t *src, int64_t n);

#endif
