/* conv_kernels.h — C-callable launchers of the hand-written direct
 * convolution kernels (conv_kernels.cu) for the "direct" gpu impl: 2-D
 * NCHW float32 with groups, stride, dilation, padding.  Each output value
 * of a pass is computed by one thread as a plain loop over its inputs, so
 * the result does not depend on launch geometry (no atomics).  `add`
 * selects dst += over dst =.  Return the launch's cudaError_t as an int. */
#ifndef OPS_CUDA_CONV_KERNELS_H
#define OPS_CUDA_CONV_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuk_conv {
    int32_t n, c, h, w, f, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow;
} cuk_conv;

/* y[n][f][oy][ox] (=|+=) sum_{c in group, ky, kx} x * w (+ bias[f] when b). */
int cuk_conv_fwd(void *stream, const cuk_conv *g, const float *x, const float *w, const float *b, float *y, int add);
/* dx[n][c][iy][ix] (=|+=) sum over the (f, ky, kx) whose output reads it. */
int cuk_conv_bwd_data(void *stream, const cuk_conv *g, const float *dy, const float *w, float *dx, int add);
/* dw[f][c][ky][kx] (=|+=) sum_{n, oy, ox} dy * x. */
int cuk_conv_bwd_filter(void *stream, const cuk_conv *g, const float *dy, const float *x, float *dw, int add);
/* db[f] (=|+=) sum_{n, oy, ox} dy. */
int cuk_conv_bwd_bias(void *stream, const cuk_conv *g, const float *dy, float *db, int add);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_CONV_KERNELS_H */
