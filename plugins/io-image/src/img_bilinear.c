/* img_bilinear.c — fused bilinear resize + mirror + normalisation into
 * CHW planes (see img_bilinear.h for the arithmetic).  Per output row: the
 * two source rows it blends get their horizontal sums computed once each
 * (a source row shared by consecutive output rows is kept, not redone),
 * as c planes of int32 in output-column order (mirror is a reversed tap
 * table, free), then each channel's vertical blend, rounding and affine
 * map run as one vector loop writing the output plane row.  Does not
 * handle nearest or area resizing (img_resize.c does).  Invariant: the box
 * is inside src and at least 1x1; reads stay inside the box. */
#include "img_bilinear.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IMG_X86 1
#endif

#define WB 11
#define WONE (1 << WB)
#define ROUND (1 << (2 * WB - 1))

int img_bilinear_init(img_bilinear *b, int dw, int dh, int c) {
    memset(b, 0, sizeof *b);
    b->dw = dw;
    b->dh = dh;
    b->c = c;
    size_t nx = (size_t)dw, ny = (size_t)dh;
    b->xo0 = malloc(sizeof(int32_t) * (5 * nx + 2 * ny + 2 * (size_t)c * nx));
    if (!b->xo0) return -1;
    b->xo1 = b->xo0 + nx;
    b->xw0 = b->xo1 + nx;
    b->xw1 = b->xw0 + nx;
    b->xwp = b->xw1 + nx;
    b->yi = b->xwp + nx;
    b->yw = b->yi + ny;
    b->rows = b->yw + ny;
    return 0;
}

void img_bilinear_fini(img_bilinear *b) {
    free(b->xo0);
    memset(b, 0, sizeof *b);
}

/* Columns [x0, dw) of one source row's horizontal sums, c planes of dw
 * (output order). */
static void horizontal_scalar(const img_bilinear *b, const uint8_t *row, int32_t *h, int x0) {
    int dw = b->dw;
    const int32_t *o0 = b->xo0, *o1 = b->xo1, *w0 = b->xw0, *w1 = b->xw1;
    if (b->c == 3) {
        int32_t *h0 = h, *h1 = h + dw, *h2 = h + 2 * dw;
        for (int x = x0; x < dw; x++) {
            const uint8_t *p = row + o0[x], *q = row + o1[x];
            int32_t a = w0[x], w = w1[x];
            h0[x] = p[0] * a + q[0] * w;
            h1[x] = p[1] * a + q[1] * w;
            h2[x] = p[2] * a + q[2] * w;
        }
        return;
    }
    for (int k = 0; k < b->c; k++) {
        int32_t *hk = h + (size_t)k * (size_t)dw;
        for (int x = x0; x < dw; x++) hk[x] = row[o0[x] + k] * w0[x] + row[o1[x] + k] * w1[x];
    }
}

#ifdef IMG_X86
/* RGB: a dword gathered at each tap holds the pixel's three bytes (and one
 * past it, ignored); per channel the two taps' bytes become a 16-bit pair
 * (first tap low) that one madd multiplies by the weight pair.  Returns
 * the first column left to the scalar loop. */
__attribute__((target("avx2"))) static int horizontal3_avx2(const img_bilinear *b, const uint8_t *row, int32_t *h) {
    int dw = b->dw, x = 0;
    const __m256i lo = _mm256_set1_epi32(0xFF), hi = _mm256_set1_epi32(0xFF0000);
    for (; x + 8 <= dw; x += 8) {
        __m256i g0 = _mm256_i32gather_epi32((const int *)row, _mm256_loadu_si256((const __m256i *)(b->xo0 + x)), 1);
        __m256i g1 = _mm256_i32gather_epi32((const int *)row, _mm256_loadu_si256((const __m256i *)(b->xo1 + x)), 1);
        __m256i wp = _mm256_loadu_si256((const __m256i *)(b->xwp + x));
        __m256i c0 = _mm256_or_si256(_mm256_and_si256(g0, lo), _mm256_and_si256(_mm256_slli_epi32(g1, 16), hi));
        __m256i c1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g0, 8), lo),
                                     _mm256_and_si256(_mm256_slli_epi32(g1, 8), hi));
        __m256i c2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(g0, 16), lo), _mm256_and_si256(g1, hi));
        _mm256_storeu_si256((__m256i *)(h + x), _mm256_madd_epi16(c0, wp));
        _mm256_storeu_si256((__m256i *)(h + dw + x), _mm256_madd_epi16(c1, wp));
        _mm256_storeu_si256((__m256i *)(h + 2 * dw + x), _mm256_madd_epi16(c2, wp));
    }
    return x;
}

__attribute__((target("avx512f,avx512bw"))) static int horizontal3_avx512(const img_bilinear *b, const uint8_t *row,
                                                                         int32_t *h) {
    int dw = b->dw, x = 0;
    const __m512i lo = _mm512_set1_epi32(0xFF), hi = _mm512_set1_epi32(0xFF0000);
    for (; x + 16 <= dw; x += 16) {
        __m512i g0 = _mm512_i32gather_epi32(_mm512_loadu_si512(b->xo0 + x), row, 1);
        __m512i g1 = _mm512_i32gather_epi32(_mm512_loadu_si512(b->xo1 + x), row, 1);
        __m512i wp = _mm512_loadu_si512(b->xwp + x);
        __m512i c0 = _mm512_or_si512(_mm512_and_si512(g0, lo), _mm512_and_si512(_mm512_slli_epi32(g1, 16), hi));
        __m512i c1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(g0, 8), lo),
                                     _mm512_and_si512(_mm512_slli_epi32(g1, 8), hi));
        __m512i c2 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(g0, 16), lo), _mm512_and_si512(g1, hi));
        _mm512_storeu_si512(h + x, _mm512_madd_epi16(c0, wp));
        _mm512_storeu_si512(h + dw + x, _mm512_madd_epi16(c1, wp));
        _mm512_storeu_si512(h + 2 * dw + x, _mm512_madd_epi16(c2, wp));
    }
    return x;
}
#endif

/* One source row's horizontal sums.  The gathers read the byte after each
 * tap's pixel: allowed unless the row is the image's last and the box
 * reaches its right edge (then that byte is past the buffer). */
static void horizontal(const img_bilinear *b, const uint8_t *row, int32_t *h, int isa, int gather_ok) {
    int x = 0;
#ifdef IMG_X86
    if (b->c == 3 && gather_ok) {
        if (isa == 2) x = horizontal3_avx512(b, row, h);
        else if (isa == 1) x = horizontal3_avx2(b, row, h);
    }
#else
    (void)isa;
    (void)gather_ok;
#endif
    horizontal_scalar(b, row, h, x);
}

/* Vertical blend of two rows of sums, rounded to 8 bits, affine-mapped. */
static void vertical_scalar(const int32_t *t, const int32_t *u, int32_t wt, int32_t wu, int n, float m, float a,
                            float *out) {
    for (int x = 0; x < n; x++) {
        int32_t v = (t[x] * wt + u[x] * wu + ROUND) >> (2 * WB);
        out[x] = (float)v * m + a;
    }
}

#ifdef IMG_X86
__attribute__((target("avx2"))) static void vertical_avx2(const int32_t *t, const int32_t *u, int32_t wt, int32_t wu,
                                                          int n, float m, float a, float *out) {
    __m256i WT = _mm256_set1_epi32(wt), WU = _mm256_set1_epi32(wu), R = _mm256_set1_epi32(ROUND);
    __m256 M = _mm256_set1_ps(m), A = _mm256_set1_ps(a);
    int x = 0;
    for (; x + 8 <= n; x += 8) {
        __m256i s = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(t + x)), WT),
                                     _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(u + x)), WU));
        __m256i v = _mm256_srai_epi32(_mm256_add_epi32(s, R), 2 * WB);
        _mm256_storeu_ps(out + x, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), M), A));
    }
    vertical_scalar(t + x, u + x, wt, wu, n - x, m, a, out + x);
}

__attribute__((target("avx512f"))) static void vertical_avx512(const int32_t *t, const int32_t *u, int32_t wt,
                                                               int32_t wu, int n, float m, float a, float *out) {
    __m512i WT = _mm512_set1_epi32(wt), WU = _mm512_set1_epi32(wu), R = _mm512_set1_epi32(ROUND);
    __m512 M = _mm512_set1_ps(m), A = _mm512_set1_ps(a);
    for (int x = 0; x < n; x += 16) {
        __mmask16 k = n - x >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - x)) - 1);
        __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, t + x), WT),
                                     _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, u + x), WU));
        __m512i v = _mm512_srai_epi32(_mm512_add_epi32(s, R), 2 * WB);
        _mm512_mask_storeu_ps(out + x, k, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), M), A));
    }
}
#endif

static void vertical_u8(const int32_t *t, const int32_t *u, int32_t wt, int32_t wu, int n, uint8_t *out) {
    for (int x = 0; x < n; x++) out[x] = (uint8_t)((t[x] * wt + u[x] * wu + ROUND) >> (2 * WB));
}

static int detect_isa(void) {
#ifdef IMG_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return 2;
    if (__builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

int img_bilinear_isa(void) {
    static atomic_int cached = -1;
    int isa = atomic_load_explicit(&cached, memory_order_relaxed);
    if (isa < 0) {
        isa = detect_isa();
        atomic_store_explicit(&cached, isa, memory_order_relaxed);
    }
    return isa;
}

typedef struct row_src {
    const uint8_t *base; /* the box's first pixel */
    size_t stride;
    int isa;
    int last_row;        /* box row that is the image's last, when the box
                          * reaches the right edge; else -1 */
} row_src;

/* The cache slot holding source row r, filling the slot not holding
 * `keep` when r is in neither. */
static int row_slot(const img_bilinear *b, int32_t cached[2], int r, int keep, const row_src *rs) {
    if (cached[0] == r) return 0;
    if (cached[1] == r) return 1;
    int s = cached[0] == keep ? 1 : 0;
    horizontal(b, rs->base + (size_t)r * rs->stride, b->rows + (size_t)s * (size_t)b->c * (size_t)b->dw, rs->isa,
               r != rs->last_row);
    cached[s] = r;
    return s;
}

void img_bilinear_chw_isa(img_bilinear *b, const img_u8 *src, const int box[4], int mirror, const float *mul,
                          const float *add, int out_u8, void *dst, int isa) {
    int c = b->c, dw = b->dw, dh = b->dh, bw = box[2], bh = box[3];
    int best = img_bilinear_isa();
    if (isa > best) isa = best;
    /* Column taps as byte offsets, in output order (mirror reverses it). */
    img_bilinear_taps(dw, bw, b->xo0, b->xw1);
    if (mirror)
        for (int x = 0, y = dw - 1; x < y; x++, y--) {
            int32_t t = b->xo0[x];
            b->xo0[x] = b->xo0[y];
            b->xo0[y] = t;
            t = b->xw1[x];
            b->xw1[x] = b->xw1[y];
            b->xw1[y] = t;
        }
    for (int x = 0; x < dw; x++) {
        int k = b->xo0[x];
        int k1 = k + 1 < bw ? k + 1 : k;
        b->xo0[x] = k * c;
        b->xo1[x] = k1 * c;
        b->xw0[x] = WONE - b->xw1[x];
        b->xwp[x] = (int32_t)((uint32_t)b->xw0[x] | (uint32_t)b->xw1[x] << 16);
    }
    img_bilinear_taps(dh, bh, b->yi, b->yw);
    size_t stride = (size_t)src->w * (size_t)c, plane = (size_t)dh * (size_t)dw;
    row_src rs = {src->px + (size_t)box[1] * stride + (size_t)box[0] * (size_t)c, stride, isa,
                  box[0] + bw == src->w ? src->h - 1 - box[1] : -1};
    int32_t cached[2] = {-1, -1};
    for (int y = 0; y < dh; y++) {
        int r0 = b->yi[y], wy = b->yw[y];
        int r1 = wy ? r0 + 1 : -1; /* wy > 0 only when r0 + 1 < bh */
        int s0 = row_slot(b, cached, r0, r1, &rs);
        int s1 = r1 >= 0 ? row_slot(b, cached, r1, r0, &rs) : s0;
        for (int k = 0; k < c; k++) {
            const int32_t *t = b->rows + ((size_t)s0 * (size_t)c + (size_t)k) * (size_t)dw;
            const int32_t *u = b->rows + ((size_t)s1 * (size_t)c + (size_t)k) * (size_t)dw;
            size_t at = (size_t)k * plane + (size_t)y * (size_t)dw;
            if (out_u8) {
                vertical_u8(t, u, WONE - wy, wy, dw, (uint8_t *)dst + at);
                continue;
            }
            float *o = (float *)dst + at;
#ifdef IMG_X86
            if (isa == 2) {
                vertical_avx512(t, u, WONE - wy, wy, dw, mul[k], add[k], o);
                continue;
            }
            if (isa == 1) {
                vertical_avx2(t, u, WONE - wy, wy, dw, mul[k], add[k], o);
                continue;
            }
#endif
            vertical_scalar(t, u, WONE - wy, wy, dw, mul[k], add[k], o);
        }
    }
}

void img_bilinear_chw(img_bilinear *b, const img_u8 *src, const int box[4], int mirror, const float *mul,
                      const float *add, int out_u8, void *dst) {
    img_bilinear_chw_isa(b, src, box, mirror, mul, add, out_u8, dst, 2);
}
