/* bf16_via_f32.h — running a float32 forward/backward on bfloat16 tensors
 * (bf16_via_f32.c): for the ops of a mixed-precision graph whose bf16 cost
 * is not worth a kernel of their own (pooling, the non-ReLU activations,
 * req add).  Every bf16 tensor is widened to float32 scratch, the float32
 * callback runs on the copies (outputs written, never added), and each
 * bf16 output is rounded once into place honouring the caller's req.
 * Inputs and outputs may alias (inplace): inputs are widened before any
 * output is stored.  Tensors of other dtypes pass through unchanged. */
#ifndef NN_BF16_VIA_F32_H
#define NN_BF16_VIA_F32_H

#include "nn_common.h"

int nn_bf16_via_f32_forward(const mxp_forward_args *a, int (*fn)(const mxp_forward_args *));
int nn_bf16_via_f32_backward(const mxp_backward_args *a, int (*fn)(const mxp_backward_args *));

#endif
