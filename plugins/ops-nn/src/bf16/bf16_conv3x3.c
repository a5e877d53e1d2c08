/* bf16/bf16_conv3x3.c — Convolution impl "bf16_direct": 3x3 (any pad up to
 * 2) and 1x1 (pad 0) kernels at stride 1 or 2, one group, no dilation, on
 * bfloat16 data with VDPBF16PS (ResNet-20's layers).  No im2col: each
 * sample is copied once into zero-padded planes and every product reads
 * those planes at per-tap offsets.
 *
 * Planes.  A stride-s input is split into s·s phase planes
 * phase(a,b)[r][c] = xpad[s·r + a][s·c + b] (one plane at stride 1), each
 * Wq = Wo + (kw-1)/sw wide, so that output (oh, ow) reads, for tap (i, j),
 * phase(i%sh, j%sw) at (oh + i/sh, ow + j/sw): a fixed offset from the
 * output's flat index q = oh·Wq + ow.  Every tap is then a contiguous
 * 16-position vector load; the columns ow >= Wo of the flat grid are junk,
 * computed and dropped.  VDPBF16PS multiplies bf16 pairs: the forward reads
 * planes whose 32-bit words hold input channels (c, c+1), the data gradient
 * planes of output-gradient channels (m, m+1), the weight gradient pairs of
 * neighbouring positions (q, q+1).
 *
 *   forward   y[o][q]  = Σ_cpair Σ_tap W(o, cpair, tap) · x(cpair, q + off)
 *             lanes = 16 positions, 8 output channels per register block;
 *   dx        per phase (a, b) of the padded dx, a stride-1 correlation of
 *             dy (pairs of channels, padded) with the taps i ≡ a, j ≡ b,
 *             flipped — the same kernel; a phase without taps is zero;
 *   dW        dW[c][tap][o] = Σ_q x(c, q + off) · dy[o][q], lanes = 16
 *             output channels, the reduction over position pairs (q, q+1)
 *             (dy transposed to [q/2][o] words, its junk columns zero).
 * All sums in fp32, each stored value rounded to bf16 once.  Samples are
 * split into chunks on ctx->parallel_for; the backward keeps per-chunk
 * fp32 partial dW/db summed in chunk order (thread-count independent).
 * Runs only on the avx512bf16 path (CPUID avx512_bf16); when
 * MXP_BF16_KERNEL forces another path, supports() refuses and a call that
 * reaches this impl anyway runs the generic bf16 impl. */
#include "bf16/bf16.h"
#include "conv/conv.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define FWD_NO 8      /* output channels per forward register block     */
#define FWD_NV 3      /* 16-position vectors per forward register block  */
#define SLACK 64      /* zero words after each plane: vector overrun     */
#define MAX_TAPS 9

static int64_t up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The geometry of one layer, as this impl lays it out. */
typedef struct dgeo {
    conv_geom g;
    int64_t nph;              /* phases sh*sw                                 */
    int64_t Hq, Wq, phs;      /* phase plane rows, width, stride (words)      */
    int64_t Q, ldq;           /* flat output grid Ho*Wq, rounded to 16         */
    int64_t ncp, Mp;          /* input channel pairs, outputs rounded to 8    */
    int ntaps;
    int64_t off[MAX_TAPS];    /* forward tap offsets (phase + row/col shift)  */
    /* data gradient */
    int64_t Ph, Pw, Hd, Wd, dps, mcp, Cp;
} dgeo;

/* Fills everything but d->g, which the caller set. */
static void dgeo_derive(dgeo *d) {
    const conv_geom *g = &d->g;
    d->nph = g->sh * g->sw;
    /* even, so that position pairs (q, q+1) of the weight gradient lie in one
     * row when Wo is even (one more junk column at stride 2) */
    d->Wq = up(g->Wo + (g->kw - 1) / g->sw, 2);
    d->Hq = g->Ho + (g->kh - 1) / g->sh;
    d->phs = d->Hq * d->Wq + SLACK;
    d->Q = g->Ho * d->Wq;
    d->ldq = up(d->Q, 16);
    d->ncp = (g->C + 1) / 2;
    d->Mp = up(g->M, FWD_NO);
    d->ntaps = (int)(g->kh * g->kw);
    for (int64_t i = 0; i < g->kh; i++)
        for (int64_t j = 0; j < g->kw; j++)
            d->off[i * g->kw + j] = ((i % g->sh) * g->sw + j % g->sw) * d->phs + (i / g->sh) * d->Wq + j / g->sw;
    /* dx: dy padded by Ph rows / Pw columns (the most taps a phase has,
     * minus one), wide enough for every phase's output columns. */
    d->Ph = (g->kh + g->sh - 1) / g->sh - 1;
    d->Pw = (g->kw + g->sw - 1) / g->sw - 1;
    int64_t rmax = (g->H - 1 + g->ph) / g->sh + 1, cmax = (g->W - 1 + g->pw) / g->sw + 1;
    d->Wd = (cmax > g->Wo ? cmax : g->Wo) + d->Pw;
    /* At stride 1 a row may read past its end into the next row's first Pw
     * columns, which are zero, so dy plus its left pad is wide enough
     * (8x8 maps: 10 columns instead of 11, 5 vectors per channel, not 6). */
    if (g->sh == 1 && g->sw == 1) d->Wd = g->Wo + d->Pw;
    d->Hd = (rmax > g->Ho ? rmax : g->Ho) + d->Ph + 1;
    d->dps = d->Hd * d->Wd + SLACK;
    d->mcp = (g->M + 1) / 2;
    d->Cp = up(g->C, FWD_NO);
}

static int shape_ok(const conv_geom *g, char *why, size_t n) {
    if (g->G != 1) return snprintf(why, n, "bf16_direct: one group only (num_group %lld)", (long long)g->G), 0;
    if (g->dh != 1 || g->dw != 1) return snprintf(why, n, "bf16_direct: no dilation"), 0;
    if (g->sh < 1 || g->sh > 2 || g->sw < 1 || g->sw > 2)
        return snprintf(why, n, "bf16_direct: stride 1 or 2 only"), 0;
    int k3 = g->kh == 3 && g->kw == 3 && g->ph <= 2 && g->pw <= 2;
    int k1 = g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0;
    if (!k3 && !k1) return snprintf(why, n, "bf16_direct: 3x3 kernels with pad <= 2 or 1x1 without pad only"), 0;
    if (g->Ho < 1 || g->Wo < 1 || g->H * g->W > (1 << 20) || g->C > 4096 || g->M > 4096)
        return snprintf(why, n, "bf16_direct: map or channel count out of range"), 0;
    return 1;
}

int nn_bf16_vdp_ready(const char *impl, char *why, size_t n) {
    const char *miss = NULL;
    if (!nn_bf16_path_available(NN_BF16_AVX512BF16, &miss)) {
        if (why) snprintf(why, n, "%s: needs the avx512bf16 path (%s)", impl, miss ? miss : "unavailable");
        return 0;
    }
    const char *env = getenv("MXP_BF16_KERNEL");
    if (env && *env && strcasecmp(env, "auto") && strcasecmp(env, "avx512bf16") && strcasecmp(env, "amx")) {
        if (why) snprintf(why, n, "%s: MXP_BF16_KERNEL=%s forces another kernel path", impl, env);
        return 0;
    }
    return 1;
}
static int path_ok(char *why, size_t n) { return nn_bf16_vdp_ready("bf16_direct", why, n); }

static int dsupports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes[i] != MXP_DTYPE_BF16) {
            snprintf(a->reason, a->reason_size, "bf16_direct: input %u has dtype %d (bfloat16 only)", i,
                     a->in_dtypes[i]);
            return 0;
        }
    if (!conv_supports_2d(a, "bf16_direct")) return 0;
    if (a->in_shapes[0].ndim != 4) {
        snprintf(a->reason, a->reason_size, "bf16_direct: 2-D convolution only");
        return 0;
    }
    conv_geom g;
    conv_geom_init(&g, a->params, &a->in_shapes[0]);
    if (!shape_ok(&g, a->reason, a->reason_size)) return 0;
    return path_ok(a->reason, a->reason_size);
}

/* ------------------------------------------------------------ kernels */
/* out[o][q] for FWD_NO rows o and NV·16 positions q:
 * Σ_cp Σ_t wpk[(cp·ntaps + t)·ldw + o] · in[cp·cps + q + off[t]].
 * One function per NV (literal loop bounds, so the accumulators stay in
 * registers: 8·NV of them). */
#define FWD_BLOCK(NV)                                                                                          \
    TGT static void fwd_block_##NV(const uint32_t *in, int64_t cps, int64_t ncp, const int64_t *off, int ntaps,  \
                                   const uint32_t *wpk, int64_t ldw, float *out, int64_t ldo) {                 \
        __m512 acc[FWD_NO][NV];                                                                                \
        _Pragma("GCC unroll 32") for (int o = 0; o < FWD_NO; o++)                                              \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[o][v] = _mm512_setzero_ps();               \
        for (int64_t cp = 0; cp < ncp; cp++) {                                                                 \
            const uint32_t *xc = in + cp * cps, *wc = wpk + cp * ntaps * ldw;                                   \
            for (int t = 0; t < ntaps; t++) {                                                                  \
                const uint32_t *xp = xc + off[t], *wt = wc + t * ldw;                                          \
                __m512bh xv[NV];                                                                               \
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) xv[v] =                                    \
                    (__m512bh)_mm512_loadu_si512(xp + 16 * v);                                                 \
                _Pragma("GCC unroll 32") for (int o = 0; o < FWD_NO; o++) {                                    \
                    __m512bh wb = (__m512bh)_mm512_set1_epi32((int)wt[o]);                                     \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[o][v] =                            \
                        _mm512_dpbf16_ps(acc[o][v], wb, xv[v]);                                                \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 32") for (int o = 0; o < FWD_NO; o++)                                              \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) _mm512_storeu_ps(out + o * ldo + 16 * v, acc[o][v]); \
    }
FWD_BLOCK(1)
FWD_BLOCK(2)
FWD_BLOCK(3)

/* out[o][q], o < nout (a multiple of FWD_NO), q < Q rounded up to 16
 * (declared in bf16.h as nn_bf16_direct_fwd_kernel: bf16_wino_row.c runs
 * its per-frequency products through it). */
TGT void nn_bf16_direct_fwd_kernel(const uint32_t *in, int64_t cps, int64_t ncp, const int64_t *off, int ntaps,
                           const uint32_t *wpk, int64_t nout, float *out, int64_t ldo, int64_t Q) {
    for (int64_t o0 = 0; o0 < nout; o0 += FWD_NO)
        for (int64_t q0 = 0; q0 < Q; q0 += 16 * FWD_NV) {
            int64_t nv = (Q - q0 + 15) / 16;
            const uint32_t *x = in + q0;
            float *y = out + o0 * ldo + q0;
            if (nv >= 3) fwd_block_3(x, cps, ncp, off, ntaps, wpk + o0, nout, y, ldo);
            else if (nv == 2) fwd_block_2(x, cps, ncp, off, ntaps, wpk + o0, nout, y, ldo);
            else fwd_block_1(x, cps, ncp, off, ntaps, wpk + o0, nout, y, ldo);
        }
}

/* dW partial dw[c][t][o] += Σ_qp x(c, 2qp + off[t] .. +1) · dyt[qp][o] for
 * CB channels, NT taps and NOV 16-output vectors; xs planes of 16-bit
 * values, cs apart per channel; dw rows ldc taps apart per channel. */
#define WGRAD_BLOCK(NT, CB, NOV)                                                                               \
    TGT static void wgrad_##NT##_##CB##_##NOV(const uint16_t *xs, int64_t cs, const int64_t *off,               \
                                              const uint32_t *dyt, int64_t Mp16, int64_t nqp, float *dw) {      \
        __m512 acc[CB][NT][NOV];                                                                               \
        _Pragma("GCC unroll 8") for (int c = 0; c < CB; c++)                                                   \
        _Pragma("GCC unroll 9") for (int t = 0; t < NT; t++)                                                   \
        _Pragma("GCC unroll 2") for (int v = 0; v < NOV; v++) acc[c][t][v] = _mm512_setzero_ps();           \
        for (int64_t qp = 0; qp < nqp; qp++) {                                                                 \
            __m512bh d[NOV];                                                                                   \
            _Pragma("GCC unroll 2") for (int v = 0; v < NOV; v++) d[v] =                                        \
                (__m512bh)_mm512_loadu_si512(dyt + qp * Mp16 + 16 * v);                                        \
            _Pragma("GCC unroll 8") for (int c = 0; c < CB; c++) {                                             \
                const uint16_t *xc = xs + c * cs + 2 * qp;                                                     \
                _Pragma("GCC unroll 9") for (int t = 0; t < NT; t++) {                                         \
                    uint32_t pair;                                                                             \
                    memcpy(&pair, xc + off[t], 4);                                                             \
                    __m512bh xb = (__m512bh)_mm512_set1_epi32((int)pair);                                      \
                    _Pragma("GCC unroll 2") for (int v = 0; v < NOV; v++) acc[c][t][v] =                        \
                        _mm512_dpbf16_ps(acc[c][t][v], xb, d[v]);                                              \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int c = 0; c < CB; c++)                                                   \
        _Pragma("GCC unroll 9") for (int t = 0; t < NT; t++)                                                   \
        _Pragma("GCC unroll 2") for (int v = 0; v < NOV; v++) {                                              \
            float *p = dw + (c * NT + t) * Mp16 + 16 * v;                                                      \
            _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), acc[c][t][v]));                              \
        }                                                                                                      \
    }
WGRAD_BLOCK(9, 1, 2)
WGRAD_BLOCK(9, 2, 1)
WGRAD_BLOCK(9, 1, 1)
WGRAD_BLOCK(1, 4, 2)
WGRAD_BLOCK(1, 4, 1)
WGRAD_BLOCK(1, 1, 2)
WGRAD_BLOCK(1, 1, 1)

/* dw[c][t][o] (ntaps·Mp16 floats per channel) for all C channels. */
TGT static void wgrad_kernel(const uint16_t *xs, int64_t cs, int64_t C, const int64_t *off, int ntaps,
                             const uint32_t *dyt, int64_t Mp16, int64_t nqp, float *dw) {
    for (int64_t o0 = 0; o0 < Mp16; o0 += 16) {
        int two = o0 + 32 <= Mp16;
        const uint32_t *dv = dyt + o0;
        int64_t c = 0, per = ntaps * Mp16;
        if (ntaps == 9) {
            if (two)
                for (; c < C; c++) wgrad_9_1_2(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
            else {
                for (; c + 2 <= C; c += 2) wgrad_9_2_1(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
                for (; c < C; c++) wgrad_9_1_1(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
            }
        } else if (two) {
            for (; c + 4 <= C; c += 4) wgrad_1_4_2(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
            for (; c < C; c++) wgrad_1_1_2(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
        } else {
            for (; c + 4 <= C; c += 4) wgrad_1_4_1(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
            for (; c < C; c++) wgrad_1_1_1(xs + c * cs, cs, off, dv, Mp16, nqp, dw + c * per + o0);
        }
        if (two) o0 += 16;
    }
}

/* ------------------------------------------------------------- layouts */
/* row[c] = (s0[sw·c], s1[sw·c]) for c < n (s1 NULL: high halves zero),
 * sw 1 or 2: 16 words per step.  At stride 2 the 31 values a step spans
 * are read with a 16-bit mask, never the 32nd (it may lie past the data). */
TGT static void pair_row(uint32_t *row, const uint16_t *s0, const uint16_t *s1, int64_t n, int64_t sw) {
    const __m512i low = _mm512_set1_epi32(0xffff);
    int64_t c = 0;
    if (sw == 1 && s1)
        for (; c + 16 <= n; c += 16) {
            __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(s0 + c)));
            __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(s1 + c)));
            _mm512_storeu_si512(row + c, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    else if (sw == 2 && s1)
        for (; c + 16 <= n; c += 16) {
            __m512i v0 = _mm512_maskz_loadu_epi16(0x7fffffff, s0 + 2 * c);
            __m512i v1 = _mm512_maskz_loadu_epi16(0x7fffffff, s1 + 2 * c);
            _mm512_storeu_si512(row + c, _mm512_or_si512(_mm512_and_si512(v0, low), _mm512_slli_epi32(v1, 16)));
        }
    for (; c < n; c++) row[c] = s0[c * sw] | (s1 ? (uint32_t)s1[c * sw] << 16 : 0);
}

/* row[c] = s[2c] for c < n, 16 values per step (as pair_row). */
TGT static void plain_row_s2(uint16_t *row, const uint16_t *s, int64_t n) {
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        _mm256_storeu_si256((void *)(row + c), _mm512_cvtepi32_epi16(_mm512_maskz_loadu_epi16(0x7fffffff, s + 2 * c)));
    for (; c < n; c++) row[c] = s[2 * c];
}

/* row[c] = s[c] for c < n: masked 32-value copies (a memcpy call per row
 * cost more than the copy itself for 8-32 value rows). */
TGT static void plain_row_s1(uint16_t *row, const uint16_t *s, int64_t n) {
    for (int64_t c = 0; c < n; c += 32) {
        __mmask32 m = n - c >= 32 ? 0xffffffffu : (__mmask32)((1u << (n - c)) - 1);
        _mm512_mask_storeu_epi16(row + c, m, _mm512_maskz_loadu_epi16(m, s + c));
    }
}

/* Phase planes of one sample: words (x[2cp], x[2cp+1]) when paired, else
 * 16-bit values of channel c, each plane group d->nph·d->phs apart.
 * fresh = 1 writes the zeros too (pad rows and columns, the slack);
 * fresh = 0 writes only the values from x, over a dst an earlier call with
 * the same d and paired filled: the zeros are at the same places for
 * every sample and still stand.  (ResNet-20's 16->32 stride-2 forward,
 * one thread: 0.74-0.75 -> 0.65-0.66 CPU-ms; the plain planes of the
 * weight gradient cost the same as before, their time is the copy's
 * stores and the first reads of x.) */
TGT static void split_phases(const dgeo *d, const uint16_t *x, int paired, void *dst, int fresh) {
    const conv_geom *g = &d->g;
    int64_t nplanes = paired ? d->ncp : g->C, cs = d->nph * d->phs;
    for (int64_t cp = 0; cp < nplanes; cp++)
        for (int64_t a = 0; a < g->sh; a++)
            for (int64_t b = 0; b < g->sw; b++) {
                if (a >= g->kh || b >= g->kw) continue; /* no tap reads it (1x1 at stride 2) */
                int64_t base = cp * cs + (a * g->sw + b) * d->phs;
                const uint16_t *x0 = paired ? x + 2 * cp * g->H * g->W : x + cp * g->H * g->W;
                const uint16_t *x1 = paired && 2 * cp + 1 < g->C ? x0 + g->H * g->W : NULL;
                for (int64_t r = 0; r < d->Hq; r++) {
                    int64_t h = g->sh * r + a - g->ph;
                    /* columns c whose w = sw·c + b - pw lies in [0, W) */
                    int64_t c0 = g->pw - b > 0 ? (g->pw - b + g->sw - 1) / g->sw : 0;
                    int64_t c1 = (g->W - 1 + g->pw - b) / g->sw + 1;
                    if (c1 > d->Wq) c1 = d->Wq;
                    if (h < 0 || h >= g->H || c0 >= c1) c0 = c1 = 0;
                    int64_t src = c1 > c0 ? h * g->W + g->sw * c0 + b - g->pw : 0; /* first value read */
                    if (paired) {
                        uint32_t *row = (uint32_t *)dst + base + r * d->Wq;
                        if (fresh) for (int64_t c = 0; c < c0; c++) row[c] = 0;
                        const uint16_t *s0 = x0 + src, *s1 = x1 ? x1 + src : NULL;
                        pair_row(row + c0, s0, s1, c1 - c0, g->sw);
                        if (fresh) for (int64_t c = c1 > c0 ? c1 : c0; c < d->Wq; c++) row[c] = 0;
                    } else {
                        uint16_t *row = (uint16_t *)dst + base + r * d->Wq;
                        if (fresh) for (int64_t c = 0; c < c0; c++) row[c] = 0;
                        const uint16_t *s0 = x0 + src;
                        if (g->sw == 1) plain_row_s1(row + c0, s0, c1 - c0);
                        else plain_row_s2(row + c0, s0, c1 - c0);
                        if (fresh) for (int64_t c = c1 > c0 ? c1 : c0; c < d->Wq; c++) row[c] = 0;
                    }
                }
                if (!fresh) continue;
                if (paired) memset((uint32_t *)dst + base + d->Hq * d->Wq, 0, SLACK * 4);
                else memset((uint16_t *)dst + base + d->Hq * d->Wq, 0, SLACK * 2);
            }
}

/* dy of one sample as words (dy[2mp], dy[2mp+1]) in planes Hd x Wd, dy at
 * row Ph, column Pw, zero elsewhere. */
static void pad_dy_pairs(const dgeo *d, const uint16_t *dy, uint32_t *dst) {
    const conv_geom *g = &d->g;
    for (int64_t mp = 0; mp < d->mcp; mp++) {
        uint32_t *pl = dst + mp * d->dps;
        memset(pl, 0, (size_t)d->dps * 4);
        const uint16_t *s0 = dy + 2 * mp * g->P, *s1 = 2 * mp + 1 < g->M ? s0 + g->P : NULL;
        for (int64_t r = 0; r < g->Ho; r++) {
            uint32_t *row = pl + (r + d->Ph) * d->Wd + d->Pw;
            for (int64_t c = 0; c < g->Wo; c++)
                row[c] = s0[r * g->Wo + c] | (s1 ? (uint32_t)s1[r * g->Wo + c] << 16 : 0);
        }
    }
}

/* r[j] <- column j of the 16x16 matrix of 32-bit words whose rows are r[i]:
 * unpacks within 128-bit lanes, then two rounds of lane shuffles. */
TGT static inline void transpose16x16(__m512i r[16]) {
    __m512i t[16], u[4];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* r[i+m] lane L: rows i..i+3 of column 4L+m */
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        u[0] = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
        u[1] = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xee);
        u[2] = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
        u[3] = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xee);
        t[m] = _mm512_shuffle_i32x4(u[0], u[2], 0x88);
        t[4 + m] = _mm512_shuffle_i32x4(u[0], u[2], 0xdd);
        t[8 + m] = _mm512_shuffle_i32x4(u[1], u[3], 0x88);
        t[12 + m] = _mm512_shuffle_i32x4(u[1], u[3], 0xdd);
    }
    for (int j = 0; j < 16; j++) r[j] = t[j];
}

/* dst[c·ldd + r] = src[r·lds + c] for c < ncols and r < rows rounded up
 * to 16 (zero for r >= rows): 16x16 blocks in registers (bf16.h). */
TGT void nn_bf16_transpose_words(const uint32_t *src, int64_t rows, int64_t lds, int64_t ncols, uint32_t *dst,
                                 int64_t ldd) {
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        int64_t nr = rows - r0 < 16 ? rows - r0 : 16;
        for (int64_t c0 = 0; c0 < ncols; c0 += 16) {
            int64_t nc = ncols - c0 < 16 ? ncols - c0 : 16;
            __mmask16 k = nc == 16 ? 0xffff : (__mmask16)((1u << nc) - 1);
            __m512i v[16];
            for (int i = 0; i < 16; i++)
                v[i] = i < nr ? _mm512_maskz_loadu_epi32(k, src + (r0 + i) * lds + c0) : _mm512_setzero_si512();
            transpose16x16(v);
            for (int64_t c = 0; c < nc; c++) _mm512_storeu_si512(dst + (c0 + c) * ldd + r0, v[c]);
        }
    }
}

/* dy of one sample transposed to words dyt[qp][o] = (dy[o][2qp], dy[o][2qp+1])
 * over the flat grid q = oh·Wq + ow (zero at junk columns and o >= M).
 * With Wo even (Wq is) a pair is one 32-bit word of a dy row: blocks of 16
 * channels x 16 words are transposed in registers; otherwise element by
 * element. */
TGT static void transpose_dy(const dgeo *d, const uint16_t *dy, uint16_t *dyt, int64_t Mp16, int64_t nqp) {
    const conv_geom *g = &d->g;
    memset(dyt, 0, (size_t)(nqp * Mp16) * 4);
    if (g->Wo % 2 == 0) {
        const uint32_t *w = (const uint32_t *)dy; /* dy words: channel o at o·P/2 */
        uint32_t *t = (uint32_t *)dyt;
        int64_t half = g->P / 2, wr = g->Wo / 2;
        for (int64_t o0 = 0; o0 < g->M; o0 += 16) {
            int64_t nch = g->M - o0 < 16 ? g->M - o0 : 16;
            for (int64_t oh = 0; oh < g->Ho; oh++)
                for (int64_t k0 = 0; k0 < wr; k0 += 16) {
                    int64_t nk = wr - k0 < 16 ? wr - k0 : 16;
                    __mmask16 k = nk == 16 ? 0xffff : (__mmask16)((1u << nk) - 1);
                    __m512i r[16];
                    for (int i = 0; i < 16; i++)
                        r[i] = i < nch ? _mm512_maskz_loadu_epi32(k, w + (o0 + i) * half + oh * wr + k0)
                                       : _mm512_setzero_si512();
                    transpose16x16(r);
                    for (int64_t c = 0; c < nk; c++) _mm512_storeu_si512(t + (oh * d->Wq / 2 + k0 + c) * Mp16 + o0, r[c]);
                }
        }
        return;
    }
    for (int64_t o = 0; o < g->M; o++)
        for (int64_t oh = 0; oh < g->Ho; oh++)
            for (int64_t ow = 0; ow < g->Wo; ow++) {
                int64_t q = oh * d->Wq + ow;
                dyt[((q >> 1) * Mp16 + o) * 2 + (q & 1)] = dy[(o * g->Ho + oh) * g->Wo + ow];
            }
}

static uint32_t pair16(uint16_t lo, uint16_t hi) { return lo | (uint32_t)hi << 16; }

/* Forward weights: wpk[cp][t][o] = (W[o][2cp][t], W[o][2cp+1][t]), o < Mp. */
static void pack_fwd(const dgeo *d, const uint16_t *w, uint32_t *wpk) {
    const conv_geom *g = &d->g;
    int nt = d->ntaps;
    for (int64_t cp = 0; cp < d->ncp; cp++)
        for (int t = 0; t < nt; t++)
            for (int64_t o = 0; o < d->Mp; o++) {
                uint16_t lo = 0, hi = 0;
                if (o < g->M) {
                    lo = w[(o * g->C + 2 * cp) * nt + t];
                    if (2 * cp + 1 < g->C) hi = w[(o * g->C + 2 * cp + 1) * nt + t];
                }
                wpk[(cp * nt + t) * d->Mp + o] = pair16(lo, hi);
            }
}

/* dst[i] = bf16(src[i] + add), rounded to nearest even with NaN quieted
 * exactly as nn_f32_to_bf16 (req write only; 16 values per step, masked
 * at the end). */
TGT static void row_to_bf16(const float *src, float add, uint16_t *dst, int64_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), qbit = _mm512_set1_epi32(0x400000);
    const __m512 a = _mm512_set1_ps(add);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512i x = _mm512_castps_si512(_mm512_add_ps(_mm512_maskz_loadu_ps(k, src + i), a));
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs), inf);
        __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(half, _mm512_and_si512(_mm512_srli_epi32(x, 16), one)));
        r = _mm512_mask_or_epi32(r, nan, x, qbit);
        _mm256_mask_storeu_epi16(dst + i, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
}

/* ------------------------------------------------------------- forward */
typedef struct djob {
    dgeo d;
    const uint16_t *x, *w, *bias, *dy;
    uint16_t *y, *dx;
    int32_t req_y, req_dx, want_dw, want_db;
    const uint32_t *wpk;       /* forward weights                            */
    const uint32_t *wpk_ph[4]; /* data-gradient weights per dx phase          */
    int ntap_ph[4];
    int64_t off_ph[4][MAX_TAPS], base_ph[4], r0_ph[4], r1_ph[4], c0_ph[4], c1_ph[4];
    int64_t chunks;
    float *dw_part, *db_part;  /* [chunks][C·ntaps·Mp16], [chunks][M]        */
    int64_t Mp16;
    atomic_int rc;
} djob;

static void fwd_samples(void *arg, int64_t n0, int64_t n1) {
    djob *j = arg;
    const dgeo *d = &j->d;
    const conv_geom *g = &d->g;
    uint32_t *xi = nn_alloc((uint64_t)(d->ncp * d->nph * d->phs) * 4u + 64);
    float *tmp = nn_alloc((uint64_t)(d->Mp * d->ldq) * 4u + 64);
    float *yf = nn_alloc((uint64_t)(g->M * g->P) * 4u + 64);
    if (!xi || !tmp || !yf) nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16_direct): out of memory"));
    for (int64_t n = n0; n < n1 && xi && tmp && yf && !atomic_load(&j->rc); n++) {
        split_phases(d, j->x + n * g->C * g->H * g->W, 1, xi, n == n0);
        nn_bf16_direct_fwd_kernel(xi, d->nph * d->phs, d->ncp, d->off, d->ntaps, j->wpk, d->Mp, tmp, d->ldq, d->Q);
        uint16_t *yn = j->y + n * g->M * g->P;
        for (int64_t o = 0; o < g->M; o++) { /* drop the junk columns, add the bias */
            float b = j->bias ? nn_bf16_to_f32(j->bias[o]) : 0.f;
            for (int64_t oh = 0; oh < g->Ho; oh++) {
                const float *t = tmp + o * d->ldq + oh * d->Wq;
                if (j->req_y != MXP_REQ_ADD) {
                    row_to_bf16(t, b, yn + (o * g->Ho + oh) * g->Wo, g->Wo);
                    continue;
                }
                float *r = yf + (o * g->Ho + oh) * g->Wo;
                for (int64_t ow = 0; ow < g->Wo; ow++) r[ow] = t[ow] + b;
            }
        }
        if (j->req_y == MXP_REQ_ADD) nn_bf16_store(j->req_y, yf, yn, g->M * g->P);
    }
    nn_free(xi);
    nn_free(tmp);
    nn_free(yf);
}

static int check(const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype != MXP_DTYPE_BF16)
            return NN_ERR(MXP_ETYPE, "Convolution (bf16_direct): tensor %u has dtype %d, expected bfloat16", i,
                          t[i].dtype);
    return nn_check_contig("Convolution", t, n);
}

/* Re-checks at run time what supports() promised; 0 = run here. */
static int runnable(const conv_params *p, const mxp_tensor *x) {
    if (x->ndim != 4 || !path_ok(NULL, 0)) return 0;
    conv_geom g;
    conv_geom_from_tensor(&g, p, x);
    char why[160];
    return shape_ok(&g, why, sizeof why);
}

static int dforward(const mxp_forward_args *a) {
    int rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->out, 1);
    if (rc) return rc;
    if (!runnable(a->params, &a->in[0])) return nn_bf16_conv_impl.forward(a);
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    djob j;
    memset(&j, 0, sizeof j);
    conv_geom_from_tensor(&j.d.g, a->params, &a->in[0]);
    dgeo_derive(&j.d);
    const conv_geom *g = &j.d.g;
    j.x = nn_ptr(&a->in[0]);
    j.w = nn_ptr(&a->in[1]);
    j.bias = !g->no_bias && a->n_in > 2 ? nn_ptr(&a->in[2]) : NULL;
    j.y = nn_ptr(&a->out[0]);
    j.req_y = a->req[0];
    atomic_init(&j.rc, MXP_OK);
    uint32_t *wpk = nn_alloc((uint64_t)(j.d.ncp * j.d.ntaps * j.d.Mp) * 4u + 64);
    if (!wpk) return NN_ERR(MXP_ENOMEM, "Convolution (bf16_direct): out of memory");
    pack_fwd(&j.d, j.w, wpk);
    j.wpk = wpk;
    rc = nn_parallel(a->ctx, g->N, 1, fwd_samples, &j);
    nn_free(wpk);
    return rc ? rc : atomic_load(&j.rc);
}

/* ------------------------------------------------------------ backward */
/* Data-gradient taps and weights of each phase (a, b) of the padded dx:
 * the taps i ≡ a (mod sh), j ≡ b (mod sw), flipped, read from the padded
 * dy planes; wpk[mp][t][c] = (W[2mp][c][i][j], W[2mp+1][c][i][j]). */
static int pack_dx(djob *j, uint32_t *store) {
    const dgeo *d = &j->d;
    const conv_geom *g = &d->g;
    for (int64_t a = 0; a < g->sh; a++)
        for (int64_t b = 0; b < g->sw; b++) {
            int ph = (int)(a * g->sw + b);
            int64_t ua = a < g->kh ? (g->kh - a + g->sh - 1) / g->sh : 0;
            int64_t ub = b < g->kw ? (g->kw - b + g->sw - 1) / g->sw : 0;
            j->ntap_ph[ph] = (int)(ua * ub);
            j->r0_ph[ph] = g->ph > a ? (g->ph - a + g->sh - 1) / g->sh : 0;
            j->r1_ph[ph] = g->H - 1 + g->ph - a >= 0 ? (g->H - 1 + g->ph - a) / g->sh + 1 : 0;
            j->c0_ph[ph] = g->pw > b ? (g->pw - b + g->sw - 1) / g->sw : 0;
            j->c1_ph[ph] = g->W - 1 + g->pw - b >= 0 ? (g->W - 1 + g->pw - b) / g->sw + 1 : 0;
            j->base_ph[ph] = j->r0_ph[ph] * d->Wd + j->c0_ph[ph];
            uint32_t *wpk = store + (int64_t)ph * d->mcp * MAX_TAPS * d->Cp;
            j->wpk_ph[ph] = wpk;
            for (int64_t vr = 0; vr < ua; vr++)
                for (int64_t vc = 0; vc < ub; vc++) {
                    int64_t t = vr * ub + vc, i = a + g->sh * (ua - 1 - vr), jj = b + g->sw * (ub - 1 - vc);
                    j->off_ph[ph][t] = (d->Ph - ua + 1 + vr) * d->Wd + (d->Pw - ub + 1 + vc);
                    for (int64_t mp = 0; mp < d->mcp; mp++)
                        for (int64_t c = 0; c < d->Cp; c++) {
                            uint16_t lo = 0, hi = 0;
                            if (c < g->C) {
                                lo = j->w[((2 * mp * g->C + c) * g->kh + i) * g->kw + jj];
                                if (2 * mp + 1 < g->M) hi = j->w[(((2 * mp + 1) * g->C + c) * g->kh + i) * g->kw + jj];
                            }
                            wpk[(mp * ua * ub + t) * d->Cp + c] = pair16(lo, hi);
                        }
                }
        }
    return MXP_OK;
}

static void bwd_chunks(void *arg, int64_t c0, int64_t c1) {
    djob *j = arg;
    const dgeo *d = &j->d;
    const conv_geom *g = &d->g;
    int64_t nqp = (d->Q + 1) / 2, CHW = g->C * g->H * g->W;
    int64_t ldd = up((d->Hd - d->Ph - 1) * d->Wd, 16);
    uint16_t *xs = j->want_dw ? nn_alloc((uint64_t)(g->C * d->nph * d->phs) * 2u + 64) : NULL;
    uint16_t *dyt = j->want_dw ? nn_alloc((uint64_t)(nqp * j->Mp16) * 4u + 64) : NULL;
    uint32_t *dyp = j->dx ? nn_alloc((uint64_t)(d->mcp * d->dps) * 4u + 64) : NULL;
    float *tmp = j->dx ? nn_alloc((uint64_t)(d->Cp * ldd + CHW) * 4u + 64) : NULL;
    if ((j->want_dw && (!xs || !dyt)) || (j->dx && (!dyp || !tmp))) {
        nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16_direct): out of memory"));
        c1 = c0;
    }
    float *dxf = tmp ? tmp + d->Cp * ldd : NULL;
    int xs_filled = 0; /* split_phases wrote xs's zeros once */
    for (int64_t ch = c0; ch < c1 && !atomic_load(&j->rc); ch++) {
        float *dw = j->dw_part + ch * g->C * d->ntaps * j->Mp16, *db = j->db_part + ch * g->M;
        for (int64_t n = ch * g->N / j->chunks; n < (ch + 1) * g->N / j->chunks; n++) {
            const uint16_t *dyn = j->dy + n * g->M * g->P;
            if (j->want_dw) {
                split_phases(d, j->x + n * CHW, 0, xs, !xs_filled);
                xs_filled = 1;
                transpose_dy(d, dyn, dyt, j->Mp16, nqp);
                wgrad_kernel(xs, d->nph * d->phs, g->C, d->off, d->ntaps, (const uint32_t *)dyt, j->Mp16, nqp, dw);
            }
            if (j->want_db)
                for (int64_t m = 0; m < g->M; m++) { /* 16 partial sums: vectorisable, fixed order */
                    float part[16] = {0};
                    const uint16_t *row = dyn + m * g->P;
                    int64_t p = 0;
                    for (; p + 16 <= g->P; p += 16)
                        for (int k = 0; k < 16; k++) part[k] += nn_bf16_to_f32(row[p + k]);
                    for (; p < g->P; p++) part[p % 16] += nn_bf16_to_f32(row[p]);
                    float s = 0;
                    for (int k = 0; k < 16; k++) s += part[k];
                    db[m] += s;
                }
            if (!j->dx) continue;
            pad_dy_pairs(d, dyn, dyp);
            /* stride 1, req write: the one phase covers dx, rounded row by row */
            int direct = g->sh == 1 && g->sw == 1 && j->req_dx != MXP_REQ_ADD;
            if (!direct) memset(dxf, 0, (size_t)CHW * 4);
            for (int64_t a = 0; a < g->sh; a++)
                for (int64_t b = 0; b < g->sw; b++) {
                    int ph = (int)(a * g->sw + b);
                    int64_t nr = j->r1_ph[ph] - j->r0_ph[ph], nc = j->c1_ph[ph] - j->c0_ph[ph];
                    if (!j->ntap_ph[ph] || nr <= 0 || nc <= 0) continue;
                    nn_bf16_direct_fwd_kernel(dyp + j->base_ph[ph], d->dps, d->mcp, j->off_ph[ph], j->ntap_ph[ph], j->wpk_ph[ph],
                               d->Cp, tmp, ldd, nr * d->Wd);
                    for (int64_t c = 0; c < g->C; c++)
                        for (int64_t r = 0; r < nr; r++) {
                            const float *t = tmp + c * ldd + r * d->Wd;
                            if (direct) { /* rows r0.. are dx rows 0.. (and columns) at stride 1 */
                                row_to_bf16(t, 0.f, j->dx + n * CHW + (c * g->H + j->r0_ph[ph] + r - g->ph) * g->W +
                                                        j->c0_ph[ph] - g->pw, nc);
                                continue;
                            }
                            float *dst = dxf + (c * g->H + g->sh * (j->r0_ph[ph] + r) + a - g->ph) * g->W +
                                         g->sw * j->c0_ph[ph] + b - g->pw;
                            if (g->sw == 1) memcpy(dst, t, (size_t)nc * 4);
                            else
                                for (int64_t q = 0; q < nc; q++) dst[q * g->sw] = t[q];
                        }
                }
            if (!direct) nn_bf16_store(j->req_dx, dxf, j->dx + n * CHW, CHW);
        }
    }
    nn_free(xs);
    nn_free(dyt);
    nn_free(dyp);
    nn_free(tmp);
}

static int dbackward(const mxp_backward_args *a) {
    int rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->in_grad, a->n_in);
    if (!rc) rc = check(a->out_grad, 1);
    if (rc) return rc;
    if (!runnable(a->params, &a->in[0])) return nn_bf16_conv_impl.backward(a);
    djob j;
    memset(&j, 0, sizeof j);
    conv_geom_from_tensor(&j.d.g, a->params, &a->in[0]);
    dgeo_derive(&j.d);
    const dgeo *d = &j.d;
    const conv_geom *g = &d->g;
    j.x = nn_ptr(&a->in[0]);
    j.w = nn_ptr(&a->in[1]);
    j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = a->req[0] != MXP_REQ_NULL ? nn_ptr(&a->in_grad[0]) : NULL;
    j.req_dx = a->req[0];
    j.want_dw = a->req[1] != MXP_REQ_NULL;
    j.want_db = !g->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL;
    j.chunks = g->N < 8 ? g->N : 8;
    j.Mp16 = up(g->M, 16);
    atomic_init(&j.rc, MXP_OK);
    if (j.chunks < 1) return MXP_OK;
    int64_t per = g->C * d->ntaps * j.Mp16;
    uint64_t part = (uint64_t)(j.chunks * (per + g->M)) * 4u;
    uint64_t wdx = j.dx ? (uint64_t)(d->nph * d->mcp * MAX_TAPS * d->Cp) * 4u : 0;
    float *buf = nn_alloc(part + wdx + (uint64_t)(g->M * g->C * d->ntaps) * 4u + 64);
    if (!buf) return NN_ERR(MXP_ENOMEM, "Convolution (bf16_direct): out of memory for gradients");
    memset(buf, 0, (size_t)part);
    j.dw_part = buf;
    j.db_part = buf + j.chunks * per;
    uint32_t *wdx_store = (uint32_t *)(j.db_part + j.chunks * g->M);
    float *dw_out = (float *)(wdx_store + wdx / 4);
    if (j.dx) pack_dx(&j, wdx_store);
    rc = nn_parallel(a->ctx, j.chunks, 1, bwd_chunks, &j);
    if (!rc) rc = atomic_load(&j.rc);
    for (int64_t c = 1; c < j.chunks && !rc; c++) { /* chunk order: thread-count independent */
        for (int64_t i = 0; i < per; i++) j.dw_part[i] += j.dw_part[c * per + i];
        for (int64_t i = 0; i < g->M; i++) j.db_part[i] += j.db_part[c * g->M + i];
    }
    if (!rc && j.want_dw) {
        int64_t K = g->C * d->ntaps; /* dw_part[c][t][o] -> dW[o][c][t] */
        for (int64_t o = 0; o < g->M; o++)
            for (int64_t k = 0; k < K; k++) dw_out[o * K + k] = j.dw_part[k * j.Mp16 + o];
        nn_bf16_store(a->req[1], dw_out, nn_ptr(&a->in_grad[1]), g->M * K);
    }
    if (!rc && j.want_db) nn_bf16_store(a->req[2], j.db_part, nn_ptr(&a->in_grad[2]), g->M);
    nn_free(buf);
    return rc;
}

const mxp_op_impl nn_bf16_direct_conv_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "bf16_direct", .device = "cpu",
    .rank = 520,
    .doc = "bfloat16 3x3 / 1x1 convolution at stride 1-2 without im2col: phase planes of channel pairs, "
           "VDPBF16PS (avx512bf16 only), fp32 accumulation",
    .supports = dsupports, .forward = dforward, .backward = dbackward,
};
