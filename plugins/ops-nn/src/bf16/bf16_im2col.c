/* bf16/bf16_im2col.c — see bf16_im2col.h.  A stride-1 output row reads one
 * contiguous run of an input row: lanes ow in [lo, hi) read
 * x[ow - pw + j·dw], the others are zero (im2col) or untouched (col2im).
 * One masked load/store covers 32 bf16 (16 fp32) lanes; masked-off lanes
 * touch no memory, so the run's edges need no separate code. */
#include "bf16/bf16_im2col.h"

#include <immintrin.h>

static int have_avx512(void) { return nn_bf16_path_available(NN_BF16_AVX512F, NULL); }

/* Output columns [lo, hi) whose input column ow·sw + j·dw - pw lies
 * inside the row. */
static void valid_cols(const conv_geom *g, int64_t j, int64_t *lo, int64_t *hi) {
    int64_t off = j * g->dw - g->pw, sw = g->sw; /* w = ow·sw + off */
    *lo = off < 0 ? (-off + sw - 1) / sw : 0;
    *hi = g->W - off > 0 ? (g->W - off + sw - 1) / sw : 0;
    if (*hi > g->Wo) *hi = g->Wo;
    if (*hi < *lo) *hi = *lo;
}

/* Lanes t of a vector starting at o0 with lo <= o0 + t < hi (width <= 32). */
static inline uint32_t lanes(int64_t o0, int64_t lo, int64_t hi, int width) {
    int64_t a = lo - o0, b = hi - o0;
    if (a < 0) a = 0;
    if (b > width) b = width;
    if (b <= a) return 0;
    return (uint32_t)(((1ull << b) - 1) & ~((1ull << a) - 1));
}

/* Stride-1 rows.  When a row fits one vector (Wo <= 32), its read mask is
 * the same for every output row of a kernel column, and each output row is
 * stored whole (32 lanes): the lanes past Wo land where the next output row
 * or a later sample goes and are overwritten by it; only the last rows of a
 * sample's run (fewer than 32 values left in it) are stored masked. */
__attribute__((target("avx512f,avx512bw")))
static void im2col_s1_512(const conv_geom *g, const uint16_t *x, uint16_t *col, int64_t ld) {
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                uint16_t *row = col + ((c * g->kh + i) * g->kw + j) * ld;
                int64_t lo, hi, off = j * g->dw - g->pw;
                valid_cols(g, j, &lo, &hi);
                const uint16_t *plane = x + c * g->H * g->W + off;
                if (g->Wo <= 32) {
                    __mmask32 read = (__mmask32)lanes(0, lo, hi, 32);
                    for (int64_t oh = 0; oh < g->Ho; oh++) {
                        int64_t h = oh * g->sh - g->ph + i * g->dh, left = g->P - oh * g->Wo;
                        __m512i v = h >= 0 && h < g->H ? _mm512_maskz_loadu_epi16(read, plane + h * g->W)
                                                       : _mm512_setzero_si512();
                        if (left >= 32) _mm512_storeu_si512(row + oh * g->Wo, v);
                        else _mm512_mask_storeu_epi16(row + oh * g->Wo, (__mmask32)((1u << left) - 1), v);
                    }
                    continue;
                }
                for (int64_t oh = 0; oh < g->Ho; oh++) {
                    int64_t h = oh * g->sh - g->ph + i * g->dh;
                    uint16_t *dst = row + oh * g->Wo;
                    int inside = h >= 0 && h < g->H;
                    const uint16_t *src = plane + (inside ? h : 0) * g->W;
                    for (int64_t o0 = 0; o0 < g->Wo; o0 += 32) {
                        __mmask32 keep = (__mmask32)lanes(o0, 0, g->Wo, 32);
                        __mmask32 read = inside ? (__mmask32)lanes(o0, lo, hi, 32) : 0;
                        __m512i v = _mm512_maskz_loadu_epi16(read, src + o0);
                        _mm512_mask_storeu_epi16(dst + o0, keep, v);
                    }
                }
            }
}

/* Output rows of at most 32 values, any stride: R output rows (R·Wo <= 32)
 * of a col row come from R input rows sh·W apart, all inside a 64-value
 * window (two loads) that one VPERMT2W rearranges (picking every sw-th
 * value); lanes outside the input (padding) are zeroed by the permute's
 * mask.  Loads are masked to the channel's plane.  Stores use the same
 * overwrite rule as im2col_s1_512. */
/* Output rows per vector for im2col_rows_512, 0 when it does not apply:
 * lane r·Wo + ow reads window offset r·sh·W + ow·sw, all within 64. */
static int rows_per_vector(const conv_geom *g) {
    if (g->Wo > 32 || g->kw > 16 || (g->Wo - 1) * g->sw + 1 > 64) return 0;
    int64_t r = 32 / g->Wo;
    while (r > 1 && (r - 1) * g->sh * g->W + (g->Wo - 1) * g->sw + 1 > 64) r--;
    return (int)r;
}

/* Loop order c, i, row block, j: a block's row mask depends on (i, block)
 * only and a kernel column's lane mask on j only, so both are computed
 * outside the innermost loop; each col row still gets its blocks in
 * ascending order, as the overwrite rule needs. */
__attribute__((target("avx512f,avx512bw")))
static void im2col_rows_512(const conv_geom *g, int R, const uint16_t *x, uint16_t *col, int64_t ld) {
    /* Lane t = r·Wo + ow reads window offset r·sh·W + ow·sw = t·sw + r·(sh·W - Wo·sw):
     * built in a register, not a stack array (a 64-byte aligned stack array
     * is stored with VMOVDQA64, which faults on ASan's fake stack frames
     * under detect_stack_use_after_return).  Lanes past R·Wo are never kept. */
    const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                                          12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i idx = _mm512_mullo_epi16(iota, _mm512_set1_epi16((short)g->sw));
    const __m512i row_step = _mm512_set1_epi16((short)(g->sh * g->W - g->Wo * g->sw));
    for (int r = 1; r < R; r++)
        idx = _mm512_mask_add_epi16(idx, (__mmask32)~((1u << (r * g->Wo)) - 1), idx, row_step);
    uint32_t cols[16];
    for (int64_t j = 0; j < g->kw; j++) {
        int64_t lo, hi;
        valid_cols(g, j, &lo, &hi);
        cols[j] = 0;
        for (int r = 0; r < R; r++) cols[j] |= lanes(0, lo, hi, 32) << (r * g->Wo);
    }
    const int64_t plane_n = g->H * g->W;
    const uint32_t one_row = (uint32_t)((1ull << g->Wo) - 1);
    for (int64_t c = 0; c < g->Cg; c++) {
        const uint16_t *plane = x + c * plane_n;
        for (int64_t i = 0; i < g->kh; i++) {
            uint16_t *rows_i = col + (c * g->kh + i) * g->kw * ld;
            for (int64_t oh0 = 0; oh0 < g->Ho; oh0 += R) {
                int64_t h0 = oh0 * g->sh - g->ph + i * g->dh, left = g->P - oh0 * g->Wo;
                uint32_t rows = 0;
                for (int r = 0; r < R && oh0 + r < g->Ho; r++)
                    if (h0 + r * g->sh >= 0 && h0 + r * g->sh < g->H) rows |= one_row << (r * g->Wo);
                __mmask32 store = left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1);
                for (int64_t j = 0; j < g->kw; j++) {
                    uint16_t *dst = rows_i + j * ld + oh0 * g->Wo;
                    __mmask32 keep = (__mmask32)(cols[j] & rows);
                    __m512i v = _mm512_setzero_si512();
                    if (keep) {
                        int64_t d = h0 * g->W + j * g->dw - g->pw; /* window start in the plane */
                        __mmask32 l0 = 0xffffffffu, l1 = 0xffffffffu;
                        if (d < 0 || d + 64 > plane_n) {
                            l0 = (__mmask32)lanes(d, 0, plane_n, 32);
                            l1 = (__mmask32)lanes(d + 32, 0, plane_n, 32);
                        }
                        __m512i w0 = _mm512_maskz_loadu_epi16(l0, plane + d), w1 = _mm512_maskz_loadu_epi16(l1, plane + d + 32);
                        v = _mm512_maskz_permutex2var_epi16(keep, w0, idx, w1);
                    }
                    _mm512_mask_storeu_epi16(dst, store, v);
                }
            }
        }
    }
}

static void im2col_any(const conv_geom *g, const uint16_t *x, uint16_t *col, int64_t ld) {
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                uint16_t *row = col + ((c * g->kh + i) * g->kw + j) * ld;
                for (int64_t oh = 0; oh < g->Ho; oh++) {
                    int64_t h = oh * g->sh - g->ph + i * g->dh;
                    uint16_t *dst = row + oh * g->Wo;
                    if (h < 0 || h >= g->H) {
                        memset(dst, 0, (size_t)g->Wo * 2);
                        continue;
                    }
                    const uint16_t *src = x + (c * g->H + h) * g->W;
                    for (int64_t ow = 0; ow < g->Wo; ow++) {
                        int64_t w = ow * g->sw - g->pw + j * g->dw;
                        dst[ow] = w >= 0 && w < g->W ? src[w] : 0;
                    }
                }
            }
}

void nn_bf16_im2col(const conv_geom *g, const uint16_t *x, uint16_t *col, int64_t ld) {
    int R = have_avx512() ? rows_per_vector(g) : 0;
    if (R > 1 || (R == 1 && g->sw != 1)) im2col_rows_512(g, R, x, col, ld);
    else if (g->sw == 1 && have_avx512()) im2col_s1_512(g, x, col, ld); /* one load per row */
    else im2col_any(g, x, col, ld);
}

/* Gathering rather than scattering: each 16-wide piece of a dx row is
 * loaded once, gets every (i, j) term as a masked load from dcol, and is
 * stored once.  (Adding row by row into dx, as col2im_any does, makes the
 * next j's load overlap the previous j's unaligned store one element over,
 * which stalls store-to-load forwarding: col2im took 12% of a LeNet step.) */
__attribute__((target("avx512f,avx512bw")))
static void col2im_s1_512(const conv_geom *g, const float *dcol, int64_t ld, float *dx) {
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t h = 0; h < g->H; h++) {
            float *dst = dx + (c * g->H + h) * g->W;
            for (int64_t w0 = 0; w0 < g->W; w0 += 16) {
                __mmask16 keep = (__mmask16)lanes(w0, 0, g->W, 16);
                __mmask16 cols[16]; /* lanes of kernel column j (kw <= 16) */
                for (int64_t j = 0; j < g->kw; j++) {
                    int64_t off = j * g->dw - g->pw;
                    cols[j] = (__mmask16)lanes(w0, off, g->Wo + off, 16) & keep;
                }
                __m512 acc = _mm512_maskz_loadu_ps(keep, dst + w0);
                for (int64_t i = 0; i < g->kh; i++) {
                    int64_t t = h + g->ph - i * g->dh; /* oh·sh */
                    if (t < 0 || t % g->sh) continue;
                    int64_t oh = t / g->sh;
                    if (oh >= g->Ho) continue;
                    const float *src = dcol + (c * g->kh + i) * g->kw * ld + oh * g->Wo + w0 + g->pw;
                    for (int64_t j = 0; j < g->kw; j++, src += ld - g->dw) /* w = ow + j·dw - pw */
                        acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(cols[j], src));
                }
                _mm512_mask_storeu_ps(dst + w0, keep, acc);
            }
        }
}

static void col2im_any(const conv_geom *g, const float *dcol, int64_t ld, float *dx) {
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t i = 0; i < g->kh; i++)
            for (int64_t j = 0; j < g->kw; j++) {
                const float *row = dcol + ((c * g->kh + i) * g->kw + j) * ld;
                for (int64_t oh = 0; oh < g->Ho; oh++) {
                    int64_t h = oh * g->sh - g->ph + i * g->dh;
                    if (h < 0 || h >= g->H) continue;
                    float *dst = dx + (c * g->H + h) * g->W;
                    for (int64_t ow = 0; ow < g->Wo; ow++) {
                        int64_t w = ow * g->sw - g->pw + j * g->dw;
                        if (w >= 0 && w < g->W) dst[w] += row[oh * g->Wo + ow];
                    }
                }
            }
}

void nn_bf16_col2im_f32(const conv_geom *g, const float *dcol, int64_t ld, float *dx) {
    if (g->sw == 1 && g->kw <= 16 && have_avx512()) col2im_s1_512(g, dcol, ld, dx);
    else col2im_any(g, dcol, ld, dx);
}

__attribute__((target("avx512f,avx512bw")))
static float row_sum_512(const uint16_t *x, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask32 m = (__mmask32)(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1);
        __m512i v = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16(m, x + i)));
        acc = _mm512_add_ps(acc, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    return _mm512_reduce_add_ps(acc);
}

float nn_bf16_row_sum(const uint16_t *x, int64_t n) {
    if (have_avx512()) return row_sum_512(x, n);
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += nn_bf16_to_f32(x[i]);
    return s;
}

__attribute__((target("avx512f")))
static void add_scalar_512(float *x, float v, int64_t n) {
    __m512 b = _mm512_set1_ps(v);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_add_ps(_mm512_loadu_ps(x + i), b));
    for (; i < n; i++) x[i] += v;
}

void nn_f32_add_scalar(float *x, float v, int64_t n) {
    if (have_avx512()) {
        add_scalar_512(x, v, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) x[i] += v;
}
