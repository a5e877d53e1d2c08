/* im2col.c — im2col / col2im for 2-D NCHW convolution (f32, f64), over a
 * channel range and an output-row range so callers can bound the column
 * buffer and split the work across threads.  Column row (c,ki,kj), column
 * (oh-r0)*Wo+ow; rows of col are ld elements apart.  Zero padding is written
 * explicitly.
 *
 * Two paths with identical results (col2im adds in the same order):
 *   - float32 with unit stride and dilation along W (every LeNet/ResNet
 *     layer): each (c,ki,kj,oh) row segment is one run of contiguous
 *     elements between two pad edges, moved with 16/8/4-wide vector
 *     loads/stores (GCC vector extensions, compiled per ISA by
 *     target_clones) and a scalar tail; pad edges and out-of-range rows
 *     are zeroed per segment, not tested per element;
 *   - everything else (float64, stride or dilation along W): the plain
 *     per-element loops below.
 * The edge bounds lo/hi (first/one-past-last ow whose input column is in
 * range) are computed once per (kj) for all rows. */
#include "conv.h"
#include "nn_simd.h"

#define LDV(T, p) (*(const T##u *)(const void *)(p))
#define STV(T, p, v) (*(T##u *)(void *)(p) = (v))

/* [lo, hi): the ow whose input column ow*sw + jo lies in [0, W). */
static inline void col_edges(const conv_geom *g, int64_t jo, int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = g->Wo;
    if (jo < 0) l = (-jo + g->sw - 1) / g->sw;
    if (g->W - jo <= 0) h = 0;
    else if ((g->W - jo + g->sw - 1) / g->sw < h) h = (g->W - jo + g->sw - 1) / g->sw;
    if (l > h) l = h;
    *lo = l; *hi = h;
}

/* ------------------------------------------------ float32, unit W stride */
/* col_edges for sw == 1 without the divisions (an idiv per (c,ki,kj) cost
 * more than LeNet's 8-wide row copies themselves). */
static inline void col_edges_unit(int64_t Wo, int64_t W, int64_t jo, int64_t *lo, int64_t *hi) {
    int64_t l = jo < 0 ? -jo : 0, h = W - jo < Wo ? W - jo : Wo;
    if (h < 0) h = 0;
    if (l > h) l = h;
    *lo = l; *hi = h;
}

static inline __attribute__((always_inline)) void copy_f32(float *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) STV(v16, d + i, LDV(v16, s + i));
    if (i + 8 <= n) { STV(v8, d + i, LDV(v8, s + i)); i += 8; }
    if (i + 4 <= n) { STV(v4, d + i, LDV(v4, s + i)); i += 4; }
    for (; i < n; i++) d[i] = s[i];
}
static inline __attribute__((always_inline)) void zero_f32(float *d, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) STV(v16, d + i, (v16){0});
    if (i + 8 <= n) { STV(v8, d + i, (v8){0}); i += 8; }
    if (i + 4 <= n) { STV(v4, d + i, (v4){0}); i += 4; }
    for (; i < n; i++) d[i] = 0;
}
static inline __attribute__((always_inline)) void add_f32(float *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) STV(v16, d + i, LDV(v16, d + i) + LDV(v16, s + i));
    if (i + 8 <= n) { STV(v8, d + i, LDV(v8, d + i) + LDV(v8, s + i)); i += 8; }
    if (i + 4 <= n) { STV(v4, d + i, LDV(v4, d + i) + LDV(v4, s + i)); i += 4; }
    for (; i < n; i++) d[i] += s[i];
}

/* Rows [r0, r1) split into the ones whose input row ih = oh*sh - ph + ki*dh
 * lies in [0, H) — a contiguous range [*v0, *v1) — and the rest. */
static inline void valid_rows(int64_t r0, int64_t r1, int64_t sh, int64_t off, int64_t H, int64_t *v0, int64_t *v1) {
    /* off = ki*dh - ph; need 0 <= oh*sh + off <= H-1 */
    int64_t lo, hi;
    if (sh == 1) { lo = off >= 0 ? 0 : -off; hi = H - off < 0 ? 0 : H - off; }
    else { lo = off >= 0 ? 0 : (-off + sh - 1) / sh; hi = H - 1 - off < 0 ? 0 : (H - 1 - off) / sh + 1; }
    if (lo < r0) lo = r0;
    if (lo > r1) lo = r1;
    if (hi > r1) hi = r1;
    if (hi < lo) hi = lo;
    *v0 = lo; *v1 = hi;
}

/* rows x n elements, dst rows dn apart, src rows sn apart; the width
 * dispatch is outside the row loop (LeNet rows are 8 or 24 wide). */
static inline __attribute__((always_inline)) void copy_rows(float *d, const float *s, int64_t rows, int64_t n,
                                                            int64_t dn, int64_t sn) {
    if (n == 8) for (int64_t r = 0; r < rows; r++, d += dn, s += sn) STV(v8, d, LDV(v8, s));
    else if (n == 16) for (int64_t r = 0; r < rows; r++, d += dn, s += sn) STV(v16, d, LDV(v16, s));
    else if (n == 24)
        for (int64_t r = 0; r < rows; r++, d += dn, s += sn) { STV(v16, d, LDV(v16, s)); STV(v8, d + 16, LDV(v8, s + 16)); }
    else for (int64_t r = 0; r < rows; r++, d += dn, s += sn) copy_f32(d, s, n);
}
static inline __attribute__((always_inline)) void add_rows(float *d, const float *s, int64_t rows, int64_t n,
                                                           int64_t dn, int64_t sn) {
    if (n == 8) for (int64_t r = 0; r < rows; r++, d += dn, s += sn) STV(v8, d, LDV(v8, d) + LDV(v8, s));
    else if (n == 16) for (int64_t r = 0; r < rows; r++, d += dn, s += sn) STV(v16, d, LDV(v16, d) + LDV(v16, s));
    else for (int64_t r = 0; r < rows; r++, d += dn, s += sn) add_f32(d, s, n);
}

/* The geometry is copied into locals: the may_alias vector stores would
 * otherwise force a reload of every g-> field after each store. */
TC static void im2col_f32_unit(const conv_geom *g, const float *x, int64_t c0, int64_t c1,
                               int64_t r0, int64_t r1, float *col, int64_t ld) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, kw = g->kw, sh = g->sh, ph = g->ph, pw = g->pw,
                  dh = g->dh;
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        for (int64_t kj = 0; kj < kw; kj++) {
            float *dst = col + (((c - c0) * kh + ki) * kw + kj) * ld;
            const int64_t jo = kj - pw;
            int64_t lo, hi;
            col_edges_unit(Wo, W, jo, &lo, &hi);
            zero_f32(dst, (v0 - r0) * Wo);
            zero_f32(dst + (v1 - r0) * Wo, (r1 - v1) * Wo);
            if (v1 <= v0) continue;
            float *d = dst + (v0 - r0) * Wo;
            const float *s = x + (c * H + v0 * sh + off) * W + jo + lo;
            if (lo == 0 && hi == Wo) { copy_rows(d, s, v1 - v0, Wo, Wo, sh * W); continue; }
            for (int64_t oh = v0; oh < v1; oh++, d += Wo, s += sh * W) {
                for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;
                copy_f32(d + lo, s, hi - lo);
                for (int64_t ow = hi; ow < Wo; ow++) d[ow] = 0;
            }
        }
    }
}

TC static void col2im_f32_unit(const conv_geom *g, const float *col, int64_t c0, int64_t c1,
                               int64_t r0, int64_t r1, int64_t ld, float *dx) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, kw = g->kw, sh = g->sh, ph = g->ph, pw = g->pw,
                  dh = g->dh;
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        if (v1 <= v0) continue;
        for (int64_t kj = 0; kj < kw; kj++) {
            const int64_t jo = kj - pw;
            int64_t lo, hi;
            col_edges_unit(Wo, W, jo, &lo, &hi);
            const float *s = col + (((c - c0) * kh + ki) * kw + kj) * ld + (v0 - r0) * Wo + lo;
            add_rows(dx + (c * H + v0 * sh + off) * W + jo + lo, s, v1 - v0, hi - lo, sh * W, Wo);
        }
    }
}

/* ------------------------------------------------------ generic (any T) */
#define IM2COL_BODY(T) do { \
    const T *x = xv; T *col = colv; \
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
        T *dst = col + (((c - c0) * g->kh + ki) * g->kw + kj) * ld; \
        int64_t jo = kj * g->dw - g->pw, lo, hi; \
        col_edges(g, jo, &lo, &hi); \
        for (int64_t oh = r0; oh < r1; oh++, dst += g->Wo) { \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh; \
            if (ih < 0 || ih >= g->H) { memset(dst, 0, (size_t)g->Wo * sizeof(T)); continue; } \
            const T *src = x + (c * g->H + ih) * g->W; \
            for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0; \
            for (int64_t ow = lo; ow < hi; ow++) dst[ow] = src[ow * g->sw + jo]; \
            for (int64_t ow = hi; ow < g->Wo; ow++) dst[ow] = 0; \
        } \
    } } while (0)

#define COL2IM_BODY(T) do { \
    const T *col = colv; T *dx = dxv; \
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < g->kh; ki++) for (int64_t kj = 0; kj < g->kw; kj++) { \
        const T *src = col + (((c - c0) * g->kh + ki) * g->kw + kj) * ld; \
        int64_t jo = kj * g->dw - g->pw, lo, hi; \
        col_edges(g, jo, &lo, &hi); \
        for (int64_t oh = r0; oh < r1; oh++, src += g->Wo) { \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh; \
            if (ih < 0 || ih >= g->H) continue; \
            T *d = dx + (c * g->H + ih) * g->W; \
            for (int64_t ow = lo; ow < hi; ow++) d[ow * g->sw + jo] += src[ow]; \
        } \
    } } while (0)

void conv_im2col(int32_t dt, const conv_geom *g, const void *xv, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, void *colv, int64_t ld) {
    if (dt == MXP_DTYPE_F32 && g->sw == 1 && g->dw == 1) im2col_f32_unit(g, xv, c0, c1, r0, r1, colv, ld);
    else if (dt == MXP_DTYPE_F32) IM2COL_BODY(float);
    else IM2COL_BODY(double);
}

void conv_col2im(int32_t dt, const conv_geom *g, const void *colv, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, int64_t ld, void *dxv) {
    if (dt == MXP_DTYPE_F32 && g->sw == 1 && g->dw == 1) col2im_f32_unit(g, colv, c0, c1, r0, r1, ld, dxv);
    else if (dt == MXP_DTYPE_F32) COL2IM_BODY(float);
    else COL2IM_BODY(double);
}
