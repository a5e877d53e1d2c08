/* conv_strip.h — shared by the two files of Convolution impl "strip":
 * conv_strip.c (forward, the impl's table), conv_strip_bwd.c (backward)
 * and conv_strip_kern.c (its weight-gradient kernel).
 * Only these two files include it. */
#ifndef NN_CONV_STRIP_H
#define NN_CONV_STRIP_H

#include "conv_pointwise.h"

/* Near-equal row blocks of at most PW_MB: block b of nb covers
 * [b*base + min(b, extra), ...) with base = R/nb, extra = R%nb, so no
 * block runs a thin tail (50 -> 5 x 10). */
typedef struct st_rowblocks { int64_t nb, base, extra; } st_rowblocks;
static inline st_rowblocks st_row_blocks(int64_t R) {
    st_rowblocks rb;
    rb.nb = (R + PW_MB - 1) / PW_MB;
    rb.base = R / rb.nb;
    rb.extra = R % rb.nb;
    return rb;
}
static inline int64_t st_rb_start(const st_rowblocks *rb, int64_t b) { return b * rb->base + (b < rb->extra ? b : rb->extra); }
static inline int64_t st_rb_size(const st_rowblocks *rb, int64_t b) { return rb->base + (b < rb->extra); }

/* Weight-gradient block of an unpadded stride-1 layer (conv_strip_kern.c):
 * out[c*ldo + m] += sum_{r<rows, ow<Wo} dyT[(r*Wo + ow)*ldt + m] * xr[c][r*W + ow]
 * for m < 16*nmv (nmv 1..4), c < nc (1..PW_DWC). */
void sbk_dw_direct(int nmv, int nc, const float *dyT, int64_t ldt, const float *const *xr, int64_t W, int64_t rows,
                   int64_t Wo, float *out, int64_t ldo);

/* Weight-gradient block along pixels (conv_strip_kern.c), for layers
 * whose output channels fill vectors poorly (LeNet's conv1: 20 of 32):
 * acc[i*ldm + t*16 + l] += sum_{v<nv} dyp[i*ldd + 16v + l] * xs[t*tstep + 16v + l]
 * for i < mb (1..4), t < tb (1..6), l < 16 (lane partials, reduced by
 * the caller). */
#define SBK_PMB 4
#define SBK_PTB 6
void sbk_dw_pitch(int mb, int tb, const float *dyp, int64_t ldd, const float *xs, int64_t tstep, int64_t nv, float *acc,
                  int64_t ldm);

/* dy rows at the input's row pitch W for sbk_dw_pitch: dst[m*ldd + r*W + c]
 * = src[m*lds + r*Wo + c] (c < Wo), zero past Wo and from (rows-1)*W + Wo
 * up to Lp; db (may be NULL): db[m] += the sum of that row (Lp a multiple of 16). */
void sbk_pitch_rows(const float *src, int64_t lds, int64_t Mg, int64_t rows, int64_t Wo, int64_t W, int64_t Lp,
                    float *dst, int64_t ldd, double *db);
/* db[m] += sum_{p<np} src[m*lds + p] (16 float lanes, then in double). */
void sbk_rowsums(const float *src, int64_t lds, int64_t Mg, int64_t np, double *db);

/* The backward pass (conv_strip_bwd.c): data, weight and bias gradients,
 * each by its req; g from the data gradient's shape. */
int st_backward_run(const mxp_backward_args *a, const conv_geom *g);

#endif
