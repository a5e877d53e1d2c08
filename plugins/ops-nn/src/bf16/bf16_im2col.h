/* bf16/bf16_im2col.h — data movement around the bf16 convolution's GEMMs:
 * im2col of bf16 data, col2im of the fp32 data gradient, row sums and bias
 * adds.  With avx512f/avx512bw, im2col runs as masked AVX-512 loads,
 * permutes and stores (output rows of at most 32 values: any stride,
 * padding, dilation; longer rows: stride 1), col2im as masked loads for
 * stride 1 in w; other cases, and CPUs without AVX-512, take the
 * element-wise loops (same results: these
 * copy and add, they do not reorder sums, except nn_bf16_row_sum whose
 * order depends only on the CPU's features, never on thread count). */
#ifndef NN_BF16_IM2COL_H
#define NN_BF16_IM2COL_H

#include "bf16/bf16.h"
#include "conv/conv.h"

/* col[K][P] (row stride ld elements) of one sample's group, x pointing at
 * the group's first channel. */
void nn_bf16_im2col(const conv_geom *g, const uint16_t *x, uint16_t *col, int64_t ld);
/* dx[Cg][H][W] += col2im(dcol), dcol K rows of P values, row stride ld. */
void nn_bf16_col2im_f32(const conv_geom *g, const float *dcol, int64_t ld, float *dx);
/* Σ x[i] in fp32. */
float nn_bf16_row_sum(const uint16_t *x, int64_t n);
/* x[i] += v. */
void nn_f32_add_scalar(float *x, float v, int64_t n);

#endif
