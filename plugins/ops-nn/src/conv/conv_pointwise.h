/* conv_pointwise.h — Convolution impl "pointwise" (1x1, stride 1, no
 * padding, float32): the drivers (conv_pointwise.c) and their kernels
 * (conv_pointwise_kern.c).  Only these two files include it. */
#ifndef NN_CONV_POINTWISE_H
#define NN_CONV_POINTWISE_H

#include "conv.h"

#define PW_STRIP 32 /* pixels per packed strip: two 16-float vectors       */
#define PW_MB 12    /* output rows per gemm kernel call                      */
#define PW_DWC 6    /* input channels per weight-gradient kernel call       */
#define PW_DWM 64   /* output channels per weight-gradient kernel call (4 vectors) */

/* dst[k*PW_STRIP + l] = src[k*lds + l] for k < K, l < np (<= PW_STRIP), 0 for l >= np.
 * pf: also prefetch the same rows two strips on (a hint; the caller says
 * whether those pixels exist). */
void pwk_pack(const float *src, int64_t lds, int64_t K, int64_t np, float *dst, int pf);
/* np (<= PW_WIDE_STRIPS * PW_STRIP) pixels of K rows as ceil(np / PW_STRIP)
 * panels of pwk_pack's layout one after another: panel t at dst + t*K*PW_STRIP
 * holds pixels t*PW_STRIP.. (zero past np). */
#define PW_WIDE_STRIPS 16
void pwk_pack_wide(const float *src, int64_t lds, int64_t K, int64_t np, float *dst);
/* c[i*ldc + l] (= or +=) bias[i] + sum_{k<K} a[k*mb + i] * b[k*PW_STRIP + l]
 * for i < mb (1..PW_MB), l < PW_STRIP; bias may be NULL.  add: 0 store,
 * 1 add, 2 store bypassing the cache (only when pwk_have_stream(), c
 * 64-byte aligned and ldc a multiple of 16). */
void pwk_gemm(int mb, const float *a, const float *b, int64_t K, float *c, int64_t ldc, const float *bias, int add);
/* A prefetch cursor for pwk_gemm_pf: `left` more lines, walking rows of
 * ncol floats (row stride ld) from (row, col) in 16-float lines, one every
 * 1 << shift iterations of the kernel's K loop (hints only: any address). */
typedef struct pwk_pf {
    const float *row;
    int64_t col, ncol, ld, left;
    int shift;
} pwk_pf;
/* pwk_gemm, also prefetching into L2 and advancing pf (may be NULL). */
void pwk_gemm_pf(int mb, const float *a, const float *b, int64_t K, float *c, int64_t ldc, const float *bias, int add,
                 pwk_pf *pf);
/* pwk_gemm_pf on a whole strip (PW_STRIP pixels) read in place, K rows of
 * stride lds from src, that also copies it into pan in pwk_pack's layout
 * as it goes: the strip's first row block packs it for the others, so the
 * copy overlaps that block's FMAs instead of running as a pass of its own. */
void pwk_gemm_pack(int mb, const float *a, const float *src, int64_t lds, float *pan, int64_t K, float *c, int64_t ldc,
                   const float *bias, int add, pwk_pf *pf);
/* 1 when pwk_gemm's streaming stores (add 2) are available: AVX-512F. */
int pwk_have_stream(void);
/* Orders the streaming stores made so far before later stores (sfence):
 * each parallel range that used add 2 calls it before it returns. */
void pwk_stream_fence(void);
/* dst[p*ldt + r] = src[r*lds + p] for p < np, r < R; zero for R <= r < R
 * rounded up to 16.  rowsum[r] += sum_p src[r*lds + p] when rowsum is not NULL. */
void pwk_trans(const float *src, int64_t lds, int64_t R, int64_t np, float *dst, int64_t ldt, double *rowsum);
/* out[c*ldo + m] += sum_{p<np} dyT[p*ldt + m] * x[c*ldx + p] for m < 16*nmv
 * (nmv 1..4), c < nc (1..PW_DWC).  xpf (may be NULL): PW_DWC rows at
 * stride ldx to prefetch (np rounded up to 16 of them; a hint only). */
void pwk_dw(int nmv, int nc, const float *dyT, int64_t ldt, const float *x, int64_t ldx, int64_t np, float *out,
            int64_t ldo, const float *xpf);

#endif
