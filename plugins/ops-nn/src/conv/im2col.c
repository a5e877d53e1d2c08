/* im2col.c — im2col / col2im for 2-D NCHW convolution (f32, f64), over a
 * channel range and an output-row range so callers can bound the column
 * buffer and split the work across threads.  Column row (c,ki,kj), column
 * (oh-r0)*Wo+ow; rows of col are ld elements apart.  Zero padding is written
 * explicitly; stride-1 rows are copied with memcpy between the pad edges. */
#include "conv.h"

#define IM2COL_BODY(T) do { \
    const T *x = xv; T *col = colv; int64_t nr = r1 - r0; (void)nr; \
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
        T *dst = col + (((c - c0) * g->kh + ki) * g->kw + kj) * ld; \
        int64_t jo = kj * g->dw - g->pw; \
        int64_t lo = 0, hi = g->Wo; /* ow with 0 <= ow*sw + jo < W */ \
        if (jo < 0) lo = (-jo + g->sw - 1) / g->sw; \
        if (g->W - jo <= 0) hi = 0; else if ((g->W - jo + g->sw - 1) / g->sw < hi) hi = (g->W - jo + g->sw - 1) / g->sw; \
        if (lo > hi) lo = hi; \
        for (int64_t oh = r0; oh < r1; oh++, dst += g->Wo) { \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh; \
            if (ih < 0 || ih >= g->H) { memset(dst, 0, (size_t)g->Wo * sizeof(T)); continue; } \
            const T *src = x + (c * g->H + ih) * g->W; \
            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0; \
            if (g->sw == 1) { \
                /* short rows (small images): an inline loop, not a memcpy call per row */ \
                if (hi - lo <= 32) for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow + jo]; \
                else if (hi > lo) memcpy(dst + lo, src + lo + jo, (size_t)(hi - lo) * sizeof(T)); } \
            else for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw + jo]; \
            for (int64_t ow = hi; ow < g->Wo; ow++) dst[ow] = 0; \
        } \
    } } while (0)

#define COL2IM_BODY(T) do { \
    const T *col = colv; T *dx = dxv; \
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
        const T *src = col + (((c - c0) * g->kh + ki) * g->kw + kj) * ld; \
        int64_t jo = kj * g->dw - g->pw; \
        int64_t lo = 0, hi = g->Wo; \
        if (jo < 0) lo = (-jo + g->sw - 1) / g->sw; \
        if (g->W - jo <= 0) hi = 0; else if ((g->W - jo + g->sw - 1) / g->sw < hi) hi = (g->W - jo + g->sw - 1) / g->sw; \
        if (lo > hi) lo = hi; \
        for (int64_t oh = r0; oh < r1; oh++, src += g->Wo) { \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh; \
            if (ih < 0 || ih >= g->H) continue; \
            T *d = dx + (c * g->H + ih) * g->W; \
            for (int64_t ow = lo; ow < hi; ow++) d[ow * g->sw + jo] += src[ow]; \
        } \
    } } while (0)

void conv_im2col(int32_t dt, const conv_geom *g, const void *xv, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, void *colv, int64_t ld) {
    if (dt == MXP_DTYPE_F32) IM2COL_BODY(float); else IM2COL_BODY(double);
}

void conv_col2im(int32_t dt, const conv_geom *g, const void *colv, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, int64_t ld, void *dxv) {
    if (dt == MXP_DTYPE_F32) COL2IM_BODY(float); else COL2IM_BODY(double);
}
