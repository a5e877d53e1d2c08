/* upsampling_bilinear.h — UpSampling's sample_type='bilinear' path
 * (upsampling_bilinear.c), called from upsampling.c. */
#ifndef NN_UPSAMPLING_BILINEAR_H
#define NN_UPSAMPLING_BILINEAR_H

#include "nn_common.h"

/* MXNet's kernel size for an integer scale: 2*scale - scale%2. */
static inline int64_t nn_up_bilinear_kernel(int64_t scale) { return 2 * scale - scale % 2; }
/* Workspace of the gemm convolution calls for data `in` (N, C, H, W). */
uint64_t nn_up_bilinear_workspace(int64_t scale, const mxp_shape *in, int32_t dtype);
/* in = {data (N,C,H,W), weight (C,1,k,k)}, out = (N, C, H*scale, W*scale). */
int nn_up_bilinear_forward(const mxp_forward_args *a, int64_t scale);
int nn_up_bilinear_backward(const mxp_backward_args *a, int64_t scale);

#endif
