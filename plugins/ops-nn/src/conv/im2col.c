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
 *   - float32 with stride 2 along W (downsampling layers): rows split
 *     into even/odd phase rows once, then the same vector copies (in
 *     registers for ResNet's 32->16 and 16->8 px 3x3 rows);
 *   - everything else (float64, other strides, dilation along W): the
 *     plain per-element loops below.
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

/* ------------------------------------------------- float32, W stride 2 */
/* Stride 2 along W (ResNet's downsampling 3x3 layers): each input row is
 * split once into its even and odd columns, two phase rows with zero
 * borders, after which the segment of every kj is one contiguous run of a
 * phase row, row[2*ow + jo] = P[jo & 1][ow + (jo - (jo & 1)) / 2], moved
 * with the vector copies above; col2im sums the kj segments of a row into
 * the phase rows and interleaves them back into dx once.  (Per element,
 * the strided loops below cost more than the GEMMs they feed.)  Rows
 * wider than the phase rows' capacity take the generic loops. */
#define S2_CAP 1024 /* phase row capacity (columns of one parity)        */
#define S2_PAD 16   /* zero border each side: |floor(jo / 2)| <= S2_PAD */
#define S2_LEN (S2_PAD + S2_CAP + S2_PAD + 16) /* + 16: whole-vector zeroing */

/* floor(j / 2) */
static inline int64_t half_floor(int64_t j) { return (j - (j & 1)) / 2; }

/* [lo, hi): the columns of a phase row that the kj segments read and the
 * rows (columns [0, ceil(W/2))) write. */
static inline void s2_span(const conv_geom *g, int64_t *lo, int64_t *hi) {
    *lo = half_floor(-g->pw);
    *hi = half_floor(g->kw - 1 - g->pw) + g->Wo;
    if (*lo > 0) *lo = 0;
    if (*hi < (g->W + 1) / 2) *hi = (g->W + 1) / 2;
}

static int s2_fits(const conv_geom *g) {
    int64_t bmin = half_floor(-g->pw), bmax = half_floor(g->kw - 1 - g->pw);
    return g->sw == 2 && g->dw == 1 && (g->W + 1) / 2 <= S2_CAP && bmin >= -S2_PAD && bmax + g->Wo <= S2_CAP + S2_PAD;
}

/* copy_f32 with ResNet's output widths (16 and 8) as single moves: the
 * general loop becomes a memmove call, which costs more than the copy. */
static inline __attribute__((always_inline)) void copy_seg(float *d, const float *s, int64_t n) {
    if (n == 16) STV(v16, d, LDV(v16, s));
    else if (n == 8) STV(v8, d, LDV(v8, s));
    else copy_f32(d, s, n);
}
static inline __attribute__((always_inline)) void add_seg(float *d, const float *s, int64_t n) {
    if (n == 16) STV(v16, d, LDV(v16, d) + LDV(v16, s));
    else if (n == 8) STV(v8, d, LDV(v8, d) + LDV(v8, s));
    else add_f32(d, s, n);
}

/* E[j] = s[2j], O[j] = s[2j+1] for j < W/2, and E[W/2] = s[W-1] for odd W. */
static inline __attribute__((always_inline)) void deinterleave(const float *s, int64_t W, float *E, float *O) {
    int64_t no = W / 2, j = 0;
    for (; j + 16 <= no; j += 16) {
        v16 a = LDV(v16, s + 2 * j), b = LDV(v16, s + 2 * j + 16);
        STV(v16, E + j, __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
        STV(v16, O + j, __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
    }
    for (; j < no; j++) { E[j] = s[2 * j]; O[j] = s[2 * j + 1]; }
    if (W & 1) E[no] = s[W - 1];
}

/* d[2j] += E[j], d[2j+1] += O[j] (and the odd W's last column). */
static inline __attribute__((always_inline)) void interleave_add(float *d, int64_t W, const float *E, const float *O) {
    int64_t no = W / 2, j = 0;
    for (; j + 16 <= no; j += 16) {
        v16 e = LDV(v16, E + j), o = LDV(v16, O + j);
        STV(v16, d + 2 * j, LDV(v16, d + 2 * j) + __builtin_shufflevector(e, o, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                                                           21, 6, 22, 7, 23));
        STV(v16, d + 2 * j + 16, LDV(v16, d + 2 * j + 16) + __builtin_shufflevector(e, o, 8, 24, 9, 25, 10, 26, 11, 27,
                                                                                     12, 28, 13, 29, 14, 30, 15, 31));
    }
    for (; j < no; j++) { d[2 * j] += E[j]; d[2 * j + 1] += O[j]; }
    if (W & 1) d[W - 1] += E[no];
}

TC static void im2col_f32_s2(const conv_geom *g, const float *x, int64_t c0, int64_t c1,
                             int64_t r0, int64_t r1, float *col, int64_t ld) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, kw = g->kw, sh = g->sh, ph = g->ph, pw = g->pw,
                  dh = g->dh;
    float buf[2][S2_LEN];
    float *P[2] = {buf[0] + S2_PAD, buf[1] + S2_PAD};
    /* zero the span the kj segments read; the rows only ever write
     * columns [0, ceil(W/2)) of it */
    int64_t lo, hi;
    s2_span(g, &lo, &hi);
    zero_f32(P[0] + lo, hi - lo);
    zero_f32(P[1] + lo, hi - lo);
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        float *dst = col + ((c - c0) * kh + ki) * kw * ld;
        for (int64_t kj = 0; kj < kw; kj++) {
            zero_f32(dst + kj * ld, (v0 - r0) * Wo);
            zero_f32(dst + kj * ld + (v1 - r0) * Wo, (r1 - v1) * Wo);
        }
        for (int64_t oh = v0; oh < v1; oh++) {
            deinterleave(x + (c * H + oh * sh + off) * W, W, P[0], P[1]);
            for (int64_t kj = 0; kj < kw; kj++) {
                int64_t jo = kj - pw, q = jo & 1;
                copy_seg(dst + kj * ld + (oh - r0) * Wo, P[q] + half_floor(jo), Wo);
            }
        }
    }
}

/* ResNet's downsampling layers (3-wide kernel, pad 1, W = 2*Wo with Wo 16
 * or 8) in registers: a row is one or two vectors, its phases two
 * shuffles, and the three kj segments are E, O and O moved one lane right
 * (jo = -1, 0, 1 -> P[1] at -1, P[0] at 0, P[1] at 0).  Through memory,
 * each segment load right after the phase-row stores it overlaps waits
 * for them (a failed store forward), which cost more than the copies. */
static int s2_reg_fits(const conv_geom *g) {
    return g->sw == 2 && g->dw == 1 && g->kw == 3 && g->pw == 1 &&
           ((g->W == 32 && g->Wo == 16) || (g->W == 16 && g->Wo == 8));
}
#define EVENS 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define ODDS 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#define LO8(v) __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)

TC static void im2col_f32_s2r(const conv_geom *g, const float *x, int64_t c0, int64_t c1,
                              int64_t r0, int64_t r1, float *col, int64_t ld) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, sh = g->sh, ph = g->ph, dh = g->dh;
    const v16 Z = {0};
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        float *dst = col + ((c - c0) * kh + ki) * 3 * ld;
        for (int64_t kj = 0; kj < 3; kj++) {
            zero_f32(dst + kj * ld, (v0 - r0) * Wo);
            zero_f32(dst + kj * ld + (v1 - r0) * Wo, (r1 - v1) * Wo);
        }
        for (int64_t oh = v0; oh < v1; oh++) {
            const float *s = x + (c * H + oh * sh + off) * W;
            float *d = dst + (oh - r0) * Wo;
            v16 a = LDV(v16, s), b = W == 32 ? (v16)LDV(v16, s + 16) : Z;
            v16 E = __builtin_shufflevector(a, b, EVENS), O = __builtin_shufflevector(a, b, ODDS);
            v16 Om = __builtin_shufflevector(Z, O, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
            if (Wo == 16) { STV(v16, d, Om); STV(v16, d + ld, E); STV(v16, d + 2 * ld, O); }
            else { STV(v8, d, LO8(Om)); STV(v8, d + ld, LO8(E)); STV(v8, d + 2 * ld, LO8(O)); }
        }
    }
}

/* The inverse: O[i] += seg0[i+1] + seg2[i], E[i] += seg1[i], then both
 * interleaved into the dx row. */
TC static void col2im_f32_s2r(const conv_geom *g, const float *col, int64_t c0, int64_t c1,
                              int64_t r0, int64_t r1, int64_t ld, float *dx) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, sh = g->sh, ph = g->ph, dh = g->dh;
    const v16 Z = {0};
    const v8 Z8 = {0};
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        const float *src = col + ((c - c0) * kh + ki) * 3 * ld;
        for (int64_t oh = v0; oh < v1; oh++) {
            const float *sr = src + (oh - r0) * Wo;
            float *d = dx + (c * H + oh * sh + off) * W;
            v16 s0, s1, s2;
            if (Wo == 16) { s0 = LDV(v16, sr); s1 = LDV(v16, sr + ld); s2 = LDV(v16, sr + 2 * ld); }
            else {
                v8 t0 = LDV(v8, sr), t1 = LDV(v8, sr + ld), t2 = LDV(v8, sr + 2 * ld);
                s0 = __builtin_shufflevector(t0, Z8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                s1 = __builtin_shufflevector(t1, Z8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                s2 = __builtin_shufflevector(t2, Z8, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            }
            v16 O = __builtin_shufflevector(s0, Z, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16) + s2, E = s1;
            STV(v16, d, LDV(v16, d) + __builtin_shufflevector(E, O, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
            if (Wo == 16)
                STV(v16, d + 16, LDV(v16, d + 16) + __builtin_shufflevector(E, O, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13,
                                                                             29, 14, 30, 15, 31));
        }
    }
}

/* GCC: the short zeroing loop below must stay vector stores, not become a
 * memset call per row. */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_MEMSET_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NO_MEMSET_IDIOM
#endif
TC NO_MEMSET_IDIOM static void col2im_f32_s2(const conv_geom *g, const float *col, int64_t c0, int64_t c1,
                             int64_t r0, int64_t r1, int64_t ld, float *dx) {
    const int64_t Wo = g->Wo, W = g->W, H = g->H, kh = g->kh, kw = g->kw, sh = g->sh, ph = g->ph, pw = g->pw,
                  dh = g->dh;
    float buf[2][S2_LEN];
    float *P[2] = {buf[0] + S2_PAD, buf[1] + S2_PAD};
    /* the span of the phase rows that the kj segments and the interleave touch */
    int64_t lo, hi;
    s2_span(g, &lo, &hi);
    for (int64_t c = c0; c < c1; c++) for (int64_t ki = 0; ki < kh; ki++) {
        int64_t v0, v1, off = ki * dh - ph;
        valid_rows(r0, r1, sh, off, H, &v0, &v1);
        const float *src = col + ((c - c0) * kh + ki) * kw * ld;
        for (int64_t oh = v0; oh < v1; oh++) {
            /* the kj segments land in the phase rows, borders included
             * (what falls there is outside the row and dropped) */
            for (int64_t i = lo; i < hi; i += 16) { STV(v16, P[0] + i, (v16){0}); STV(v16, P[1] + i, (v16){0}); }
            for (int64_t kj = 0; kj < kw; kj++) {
                int64_t jo = kj - pw, q = jo & 1;
                add_seg(P[q] + half_floor(jo), src + kj * ld + (oh - r0) * Wo, Wo);
            }
            interleave_add(dx + (c * H + oh * sh + off) * W, W, P[0], P[1]);
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
    else if (dt == MXP_DTYPE_F32 && s2_reg_fits(g)) im2col_f32_s2r(g, xv, c0, c1, r0, r1, colv, ld);
    else if (dt == MXP_DTYPE_F32 && s2_fits(g)) im2col_f32_s2(g, xv, c0, c1, r0, r1, colv, ld);
    else if (dt == MXP_DTYPE_F32) IM2COL_BODY(float);
    else IM2COL_BODY(double);
}

void conv_col2im(int32_t dt, const conv_geom *g, const void *colv, int64_t c0, int64_t c1,
                 int64_t r0, int64_t r1, int64_t ld, void *dxv) {
    if (dt == MXP_DTYPE_F32 && g->sw == 1 && g->dw == 1) col2im_f32_unit(g, colv, c0, c1, r0, r1, ld, dxv);
    else if (dt == MXP_DTYPE_F32 && s2_reg_fits(g)) col2im_f32_s2r(g, colv, c0, c1, r0, r1, ld, dxv);
    else if (dt == MXP_DTYPE_F32 && s2_fits(g)) col2im_f32_s2(g, colv, c0, c1, r0, r1, ld, dxv);
    else if (dt == MXP_DTYPE_F32) COL2IM_BODY(float);
    else COL2IM_BODY(double);
}
