/* conv_direct_fast.h — the stride-1 path of Convolution impl "direct"
 * (conv_direct_fast.c: drivers; conv_direct_kern.c: register kernels).
 * float32 only; callers check the dtype and the 256-tap limit. */
#ifndef NN_CONV_DIRECT_FAST_H
#define NN_CONV_DIRECT_FAST_H

#include "conv.h"

#define DK_MB_MAX 8  /* output channels per forward kernel call          */
#define DK_NV_MAX 4  /* 16-pixel vectors per forward kernel call         */
#define DK_DWM_MAX 4 /* dy rows per weight-gradient kernel call           */
#define DK_DWK_MAX 6 /* (channel, tap) rows per weight-gradient call      */

/* out[i*ldo + l] (= or +=) bias[i] + sum_{c<Cin, k<nk} wpk[(c*nk + k)*mb + i] * x[c*cs + off[k] + l]
 * for i < mb, l < 16*nv; bias may be NULL.  mb <= 8, nv <= 4, mb*nv <= 24. */
void dk_fwd(int mb, int nv, const float *x, int64_t cs, int64_t Cin, int64_t nk, const int64_t *off,
            const float *wpk, const float *bias, float *out, int64_t ldo, int add);
/* res[i*DK_DWK_MAX + r] = sum_{n<N, q<16*nvec} dy[n*dys + i*ldy + q] * x[n*xs + roff[r] + q]
 * for i < mb <= 4, r < kb <= 6. */
void dk_dw(int mb, int kb, const float *dy, int64_t ldy, int64_t dys, const float *x, const int64_t *roff,
           int64_t xs, int64_t N, int64_t nvec, float *res);

/* buf[c][kj][r*Wout + ow] = V[c][r0 + r][ow + kj*dw] for c < Ct, kj < kw, r < R,
 * where V is src (Ct planes of Hs x Ws) shifted down by top and right by
 * left, zero outside; each (c, kj) plane has stride S >= R*Wout and its
 * slack after R*Wout is zeroed. */
void dk_shift(float *buf, const float *src, int64_t Ct, int64_t Hs, int64_t Ws, int64_t top, int64_t left,
              int64_t r0, int64_t R, int64_t Wout, int64_t kw, int64_t dw, int64_t S);
/* dx += col2im(dcol) for one group: rows r = (c, ki, kj) of dcol (row
 * stride ldc, Ho*Wo pixels each) added at (oh - ph + ki*dh, ow - pw + kj*dw). */
void dk_col2im(float *dx, const float *dcol, int64_t ldc, int64_t K, int64_t kh, int64_t kw, int64_t H, int64_t W,
               int64_t Ho, int64_t Wo, int64_t ph, int64_t pw, int64_t dh, int64_t dw);

/* Stride-1 forward / backward (data, weight, bias gradients). */
int dfast_forward(const mxp_forward_args *a, const conv_geom *g);
int dfast_backward(const mxp_backward_args *a, const conv_geom *g);
/* Workspace bytes dfast_backward needs (forward needs none). */
uint64_t dfast_workspace(const conv_geom *g, int is_train);

#endif
