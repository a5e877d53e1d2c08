/* conv.h — shared declarations of the Convolution op family: the parameter
 * struct (MXNet 1.x ConvolutionParam), the resolved 2-D geometry every impl
 * computes on, im2col/col2im, and the three impls (gemm, direct, winograd).
 * The op definition accepts 1-D, 2-D and 3-D kernels (NCW, NCHW, NCDHW);
 * the 2-D impls refuse other ranks in `supports` and conv_nd.c serves 1-D
 * and 3-D. */
#ifndef NN_CONV_H
#define NN_CONV_H

#include "nn_common.h"

typedef struct conv_params {
    mxp_param_shape kernel, stride, dilate, pad;
    int64_t num_filter, num_group, workspace;
    int32_t no_bias, cudnn_tune, cudnn_off, layout;
} conv_params;

typedef struct conv_geom {
    int64_t N, C, H, W;      /* data                                      */
    int64_t M, G;            /* num_filter, num_group                     */
    int64_t Cg, Mg;          /* per group                                 */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t Ho, Wo, P, K;    /* P = Ho*Wo, K = Cg*kh*kw                   */
    int no_bias;
} conv_geom;

/* Geometry from params and the data shape (4-D). */
void conv_geom_init(conv_geom *g, const conv_params *p, const mxp_shape *data);
void conv_geom_from_tensor(conv_geom *g, const conv_params *p, const mxp_tensor *data);
/* Common argument checks of forward/backward (dtype, contiguity). */
int conv_check_fwd(const mxp_forward_args *a, int32_t *dtype);
int conv_check_bwd(const mxp_backward_args *a, int32_t *dtype);

/* im2col of one sample's channels [c0,c1) (relative to x, which points at
 * the group's first channel), output rows [r0,r1), into col with row
 * stride ld (elements), column offset 0.  f32/f64 by dtype. */
void conv_im2col(int32_t dt, const conv_geom *g, const void *x, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, void *col, int64_t ld);
/* Accumulating inverse: dx += col2im(col). */
void conv_col2im(int32_t dt, const conv_geom *g, const void *col, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, int64_t ld, void *dx);

/* gemm impl entry points reused by Deconvolution (deconv.c), whose forward
 * is a convolution's data gradient and whose backward is its forward. */
uint64_t conv_gemm_workspace_bytes(const conv_geom *g, const conv_params *p, int32_t dt);
int conv_gemm_backward_impl(const mxp_backward_args *a, int skip_dx);
int conv_gemm_forward_impl(const mxp_forward_args *a);

/* 8 output channels x 16 positions, float32 (microkernel.c; the direct
 * impl's 1x1 path). */
void conv_mk_8x16(const float *x, int64_t plane, int64_t Cg, int64_t nk, const int64_t *off,
                  const float *wpk, float *out, int64_t ld);

extern const mxp_op_impl conv_gemm_impl, conv_direct_impl, conv_winograd_impl;
extern const mxp_op_impl conv_pointwise_impl; /* conv_pointwise.c: 1x1 stride 1 */
extern const mxp_op_impl conv_nd_impl;        /* conv_nd.c: 1-D and 3-D kernels */
extern const mxp_op_impl conv_strip_impl;     /* conv_strip.c: output rows <= 32 pixels */
/* conv_nd.c's passes, reused by Deconvolution like the gemm ones above
 * (the data gradient is skipped by a null req[0]). */
int conv_nd_forward_impl(const mxp_forward_args *a);
int conv_nd_backward_impl(const mxp_backward_args *a);

/* The 2-D impls' `supports` check: 1 for a 2-D kernel, else 0 with a reason
 * naming the impl. */
static inline int conv_supports_2d(mxp_impl_query_args *a, const char *impl) {
    const conv_params *p = a->params;
    if (p->kernel.ndim == 2) return 1;
    snprintf(a->reason, a->reason_size, "%s: 2-D kernels only (kernel has %d dims; impl nd serves 1-D/3-D)", impl,
             p->kernel.ndim);
    return 0;
}

#endif
