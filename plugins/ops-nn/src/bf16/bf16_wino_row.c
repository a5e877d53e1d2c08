/* bf16/bf16_wino_row.c — Convolution impl "bf16_wino_row": bfloat16 3x3
 * kernels at stride 1 (pad <= 2, one group, no dilation) with Winograd
 * F(2,3) along each row, on VDPBF16PS (avx512bf16 only).
 *
 * Per output row pair of columns (2k, 2k+1) and kernel row i, the three
 * column taps g0..g2 over the four padded inputs d0..d3 = xpad[.][2k..2k+3]
 * become four products:
 *   V0 = d0 - d2   V1 = d1 + d2   V2 = d2 - d1   V3 = d1 - d3
 *   U0 = g0        U1 = (g0+g1+g2)/2   U2 = (g0-g1+g2)/2   U3 = g2
 *   y[2k] = M0 + M1 + M2,  y[2k+1] = M1 - M2 - M3,  Mb = Σ_c Σ_i Ub·Vb
 * so a layer costs 4·3 = 12 multiply-adds per output pair instead of 18,
 * and each Mb is a direct convolution over the kernel rows only: plane Vb
 * of row r, column pair k at r·K + k (K = ceil(Wo/2)), the three row taps at
 * offsets 0, K, 2K.  No column shift, hence no junk columns (bf16_direct's
 * flat grid computes 2 extra columns per row: 6% at 32 pixels, 20% at 8).
 * The Vb planes hold words of channel pairs (c, c+1), the products run
 * through bf16_direct's register-blocked kernel (nn_bf16_direct_fwd_kernel).
 *
 * Numerics: the transforms are computed in fp32 from exact bf16 inputs; Vb
 * (a sum of two bf16 values) and Ub are rounded to bf16 once (relative
 * error 2^-9 each), products accumulate in fp32, and each output is rounded
 * to bf16 once.  The coefficients are ±1 and 1/2, so the transform adds no
 * error growth beyond those roundings (F(4,3) and 2-D tiles would: their
 * points ±2 scale terms by up to 4 and 8).
 *
 * The data gradient of a stride-1 convolution is the same convolution of
 * dy with the kernels flipped and transposed (C <-> M) at pad 2 - p, so it
 * runs here too; so does the weight gradient, by the same row transform
 * (below: dW row i from four products dUb = Σ dMb·Vb). */
#include "bf16/bf16.h"
#include "conv/conv.h"

#include <immintrin.h>
#include <stdatomic.h>

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define NFREQ 4
#define SLACK 64 /* zero words after each plane: the kernel's 16-position overrun */

static int64_t up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* One convolution y[Cout][Ho][Wo] = conv3x3(x[Cin][H][W], pad (ph, pw)) per
 * sample, as laid out here. */
typedef struct rgeo {
    int64_t N, Cin, H, W, Cout, ph, pw, Ho, Wo;
    int64_t K, Kv;   /* column pairs per output row, rounded up to 16       */
    int64_t Hp;      /* padded input rows Ho + 2                            */
    int64_t ps;      /* words per frequency plane: Hp·K + SLACK             */
    int64_t ncp, Mp; /* input channel pairs, outputs rounded up to 8        */
    int64_t Q, ldq;  /* products per frequency Ho·K, row length up to 16    */
} rgeo;

static void rgeo_make(rgeo *r, int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t ph, int64_t pw) {
    r->N = N; r->Cin = Cin; r->H = H; r->W = W; r->Cout = Cout; r->ph = ph; r->pw = pw;
    r->Ho = H + 2 * ph - 2;
    r->Wo = W + 2 * pw - 2;
    r->K = (r->Wo + 1) / 2;
    r->Kv = up(r->K, 16);
    r->Hp = r->Ho + 2;
    r->ps = r->Hp * r->K + SLACK;
    r->ncp = (Cin + 1) / 2;
    r->Mp = up(Cout, 8);
    r->Q = r->Ho * r->K;
    r->ldq = up(r->Q, 16);
}

/* Per frequency b, the kernel's weights wpk[b][(cp·3 + i)·Mp + o] = words
 * (Ub[o][2cp][i], Ub[o][2cp+1][i]); w(o, c, i, j) reads the kernel (so the
 * data gradient passes its flipped transpose). */
typedef struct wsrc {
    const uint16_t *w;
    int64_t C, M; /* the layer's forward channels                          */
    int flip;     /* 0: w(o, c) = W[o][c]; 1: w(o, c) = W[c][o] rotated 180° */
} wsrc;

/* Reads the kernel in its stored order (filter after filter, contiguous)
 * and writes each transformed row into its half of a pair word (scattered
 * writes; reading the flipped transpose element by element was ~10% of the
 * 64-channel 8x8 layer's forward). */
static void pack_weights(const rgeo *r, const wsrc *s, uint32_t *wpk) {
    int64_t per = r->ncp * 3 * r->Mp;
    uint16_t *h = (uint16_t *)wpk; /* half 0 of word i at 2i: little-endian x86 */
    memset(wpk, 0, (size_t)(NFREQ * per) * 4);
    for (int64_t a = 0; a < s->M; a++)
        for (int64_t b = 0; b < s->C; b++) {
            const uint16_t *f = s->w + (a * s->C + b) * 9;
            int64_t o = s->flip ? b : a, c = s->flip ? a : b;
            for (int64_t i = 0; i < 3; i++) {
                const uint16_t *row = f + 3 * (s->flip ? 2 - i : i);
                float g0 = nn_bf16_to_f32(row[s->flip ? 2 : 0]), g1 = nn_bf16_to_f32(row[1]);
                float g2 = nn_bf16_to_f32(row[s->flip ? 0 : 2]);
                int64_t at = 2 * ((c / 2 * 3 + i) * r->Mp + o) + c % 2;
                h[at] = nn_f32_to_bf16(g0);
                h[2 * per + at] = nn_f32_to_bf16((g0 + g1 + g2) * 0.5f);
                h[4 * per + at] = nn_f32_to_bf16((g0 - g1 + g2) * 0.5f);
                h[6 * per + at] = nn_f32_to_bf16(g2);
            }
        }
}

/* The mask of row[e0 .. e0+32) that lies in [0, W). */
static inline __mmask32 window_mask(int64_t W, int64_t e0) {
    int64_t lo = e0 < 0 ? -e0 : 0, hi = W - e0 < 32 ? W - e0 : 32;
    if (hi <= lo) return 0;
    return (__mmask32)((hi - lo == 32 ? 0xffffffffu : ((1u << (hi - lo)) - 1)) << lo);
}

/* 32 bf16 values row[e0 .. e0+32) with zeros outside [0, W) (the pad): a
 * masked load, so nothing outside the row is read.  (Copying each row into
 * a zero-padded buffer first cost more than the transform: the two loads
 * that follow overlap the copy's unaligned stores, and store-to-load
 * forwarding fails.) */
TGT static inline __m512i row_window(const uint16_t *row, int64_t W, int64_t e0) {
    __mmask32 m = window_mask(W, e0);
    return m ? _mm512_maskz_loadu_epi16(m, row + e0) : _mm512_setzero_si512();
}

/* The four frequencies of 16 column pairs from w0 = the padded row's
 * values 2k0.. and w1 = 2k0+2..: the 32-bit word of the padded row at 2k
 * holds (d0, d1) of pair k and the word after it (d2, d3), so the low half
 * shifted up and the high half masked are those values as fp32, with no
 * shuffle. */
TGT static inline void window_freqs(__m512i w0, __m512i w1, __m512 v[NFREQ]) {
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512 d0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), d1 = _mm512_castsi512_ps(_mm512_and_si512(w0, high));
    __m512 d2 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), d3 = _mm512_castsi512_ps(_mm512_and_si512(w1, high));
    v[0] = _mm512_sub_ps(d0, d2);
    v[1] = _mm512_add_ps(d1, d2);
    v[2] = _mm512_sub_ps(d2, d1);
    v[3] = _mm512_sub_ps(d1, d3);
}

/* The four frequencies of 16 column pairs k0.. of row (NULL: a zero row). */
TGT static inline void row_freqs(const uint16_t *row, int64_t W, int64_t pw, int64_t k0, __m512 v[NFREQ]) {
    __m512i w0 = row ? row_window(row, W, 2 * k0 - pw) : _mm512_setzero_si512();
    __m512i w1 = row ? row_window(row, W, 2 * k0 + 2 - pw) : _mm512_setzero_si512();
    window_freqs(w0, w1, v);
}

/* Pad 1 and rows of W = 2·K values, K dividing 16 (ResNet's 32/16/8
 * maps): pair k's (d0, d1) = (x[2k-1], x[2k]) and (d2, d3) = (x[2k+1],
 * x[2k+2]) are the 32-bit words at odd offsets 2k-1 and 2k+1 of the plane
 * read flat, so 16 pairs of any rows take two loads; the values that would
 * come from a neighbouring row (d0 at k = 0, d3 at k = K-1: the pad) are
 * masked off by a lane pattern that is the same for every 16 pairs.  (8x8
 * maps: 4 pairs per row, 12 of 16 lanes idle when read row by row.) */
typedef struct flat_rd {
    int64_t n, HW;          /* pairs per plane H·K, values per plane      */
    __mmask32 keep0, keep1; /* the lane pattern of the two loads          */
} flat_rd;

static int flat_init(flat_rd *f, const rgeo *r, int64_t K) {
    if (r->pw != 1 || r->ph != 1 || r->W != 2 * K || 16 % K) return 0;
    f->n = r->H * K;
    f->HW = r->H * r->W;
    f->keep0 = f->keep1 = 0;
    for (int l = 0; l < 16; l++) {
        f->keep0 |= (__mmask32)((l % K ? 3u : 2u) << (2 * l));
        f->keep1 |= (__mmask32)((l % K == K - 1 ? 1u : 3u) << (2 * l));
    }
    return 1;
}

/* The four frequencies of pairs f0 .. f0+16 of plane xc (flat index
 * h·K + k; zeros past n). */
TGT static inline void flat_freqs(const flat_rd *f, const uint16_t *xc, int64_t f0, __m512 v[NFREQ]) {
    __mmask32 m0 = window_mask(f->HW, 2 * f0 - 1) & f->keep0, m1 = window_mask(f->HW, 2 * f0 + 1) & f->keep1;
    window_freqs(_mm512_maskz_loadu_epi16(m0, xc + 2 * f0 - 1), _mm512_maskz_loadu_epi16(m1, xc + 2 * f0 + 1), v);
}

/* words (bf16(lo[l]), bf16(hi[l])), rounded to nearest even: one
 * two-vector conversion (lo in the low 16 values), one word interleave. */
TGT static inline __m512i pair_words(__m512 lo, __m512 hi) {
    const __m512i il = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                        21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(il, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* V[cp][b][r·K + k] for every channel pair, padded row r and pair k < K. */
TGT static void input_transform(const rgeo *r, const uint16_t *x, uint32_t *V) {
    int64_t HW = r->H * r->W;
    flat_rd fr;
    if (flat_init(&fr, r, r->K)) {
        for (int64_t cp = 0; cp < r->ncp; cp++) {
            const uint16_t *x0 = x + 2 * cp * HW, *x1 = 2 * cp + 1 < r->Cin ? x0 + HW : NULL;
            uint32_t *Vc = V + cp * NFREQ * r->ps;
            for (int b = 0; b < NFREQ; b++) { /* the pad rows, the slack */
                memset(Vc + b * r->ps, 0, (size_t)r->K * 4);
                memset(Vc + b * r->ps + (r->H + 1) * r->K, 0, (size_t)r->K * 4 + SLACK * 4);
            }
            for (int64_t f0 = 0; f0 < fr.n; f0 += 16) {
                __mmask16 m = fr.n - f0 >= 16 ? 0xffff : (__mmask16)((1u << (fr.n - f0)) - 1);
                __m512 v0[NFREQ], v1[NFREQ] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                                               _mm512_setzero_ps()};
                flat_freqs(&fr, x0, f0, v0);
                if (x1) flat_freqs(&fr, x1, f0, v1);
                for (int b = 0; b < NFREQ; b++)
                    _mm512_mask_storeu_epi32(Vc + b * r->ps + r->K + f0, m, pair_words(v0[b], v1[b]));
            }
        }
        return;
    }
    for (int64_t cp = 0; cp < r->ncp; cp++) {
        const uint16_t *x0 = x + 2 * cp * HW, *x1 = 2 * cp + 1 < r->Cin ? x0 + HW : NULL;
        uint32_t *Vc = V + cp * NFREQ * r->ps;
        for (int64_t row = 0; row < r->Hp; row++) {
            int64_t h = row - r->ph;
            if (h < 0 || h >= r->H) {
                for (int b = 0; b < NFREQ; b++) memset(Vc + b * r->ps + row * r->K, 0, (size_t)r->K * 4);
                continue;
            }
            for (int64_t k0 = 0; k0 < r->K; k0 += 16) {
                __mmask16 m = r->K - k0 >= 16 ? 0xffff : (__mmask16)((1u << (r->K - k0)) - 1);
                __m512 v0[NFREQ], v1[NFREQ];
                row_freqs(x0 + h * r->W, r->W, r->pw, k0, v0);
                row_freqs(x1 ? x1 + h * r->W : NULL, r->W, r->pw, k0, v1);
                for (int b = 0; b < NFREQ; b++)
                    _mm512_mask_storeu_epi32(Vc + b * r->ps + row * r->K + k0, m, pair_words(v0[b], v1[b]));
            }
        }
        for (int b = 0; b < NFREQ; b++) memset(Vc + b * r->ps + r->Hp * r->K, 0, SLACK * 4);
    }
}

/* y[o][oh][2k] = M0+M1+M2 (+bias), y[o][oh][2k+1] = M1-M2-M3, rounded to
 * bf16 once (req add: bf16(y + value)). */
TGT static void output_transform(const rgeo *r, const float *M, const uint16_t *bias, int32_t req, uint16_t *y) {
    const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
    int64_t fs = r->Mp * r->ldq;
    for (int64_t o = 0; o < r->Cout; o++) {
        __m512 bv = _mm512_set1_ps(bias ? nn_bf16_to_f32(bias[o]) : 0.f);
        for (int64_t oh = 0; oh < r->Ho; oh++) {
            const float *m = M + o * r->ldq + oh * r->K;
            uint16_t *yr = y + (o * r->Ho + oh) * r->Wo;
            for (int64_t k0 = 0; k0 < r->K; k0 += 16) {
                __mmask16 km = r->K - k0 >= 16 ? 0xffff : (__mmask16)((1u << (r->K - k0)) - 1);
                __m512 m0 = _mm512_maskz_loadu_ps(km, m + k0), m1 = _mm512_maskz_loadu_ps(km, m + fs + k0);
                __m512 m2 = _mm512_maskz_loadu_ps(km, m + 2 * fs + k0), m3 = _mm512_maskz_loadu_ps(km, m + 3 * fs + k0);
                __m512 e = _mm512_add_ps(_mm512_add_ps(m0, m1), _mm512_add_ps(m2, bv));
                __m512 od = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(m1, m2), m3), bv);
                __m512 out[2] = {_mm512_permutex2var_ps(e, lo_idx, od), _mm512_permutex2var_ps(e, hi_idx, od)};
                for (int half = 0; half < 2; half++) {
                    int64_t c0 = 2 * k0 + 16 * half, n = r->Wo - c0;
                    if (n <= 0) break;
                    __mmask16 ks = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
                    __m512 v = out[half];
                    if (req == MXP_REQ_ADD) {
                        __m512i old = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(ks, yr + c0));
                        v = _mm512_add_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(old, 16)));
                    }
                    _mm256_mask_storeu_epi16(yr + c0, ks, (__m256i)_mm512_cvtneps_pbh(v));
                }
            }
        }
    }
}

typedef struct rjob {
    rgeo r;
    const uint16_t *x, *bias;
    uint16_t *y;
    int32_t req;
    const uint32_t *wpk;
    atomic_int rc;
} rjob;

static void conv_samples(void *arg, int64_t n0, int64_t n1) {
    rjob *j = arg;
    const rgeo *r = &j->r;
    uint32_t *V = nn_alloc((uint64_t)(r->ncp * NFREQ * r->ps) * 4u + 64);
    float *M = nn_alloc((uint64_t)(NFREQ * r->Mp * r->ldq) * 4u + 64);
    if (!V || !M) nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16_wino_row): out of memory"));
    const int64_t off[3] = {0, r->K, 2 * r->K};
    int64_t wper = r->ncp * 3 * r->Mp;
    for (int64_t n = n0; n < n1 && V && M && !atomic_load(&j->rc); n++) {
        input_transform(r, j->x + n * r->Cin * r->H * r->W, V);
        for (int b = 0; b < NFREQ; b++)
            nn_bf16_direct_fwd_kernel(V + b * r->ps, NFREQ * r->ps, r->ncp, off, 3, j->wpk + b * wper, r->Mp,
                                      M + b * r->Mp * r->ldq, r->ldq, r->Q);
        output_transform(r, M, j->bias, j->req, j->y + n * r->Cout * r->Ho * r->Wo);
    }
    nn_free(V);
    nn_free(M);
}

/* y (req) = conv3x3 of x with the kernels s describes, pad (ph, pw). */
static int run_conv(const mxp_op_ctx *ctx, const rgeo *r, const wsrc *s, const uint16_t *x, const uint16_t *bias,
                    uint16_t *y, int32_t req) {
    rjob j;
    memset(&j, 0, sizeof j);
    j.r = *r;
    j.x = x;
    j.bias = bias;
    j.y = y;
    j.req = req;
    atomic_init(&j.rc, MXP_OK);
    uint32_t *wpk = nn_alloc((uint64_t)(NFREQ * r->ncp * 3 * r->Mp) * 4u + 64);
    if (!wpk) return NN_ERR(MXP_ENOMEM, "Convolution (bf16_wino_row): out of memory");
    pack_weights(r, s, wpk);
    j.wpk = wpk;
    int rc = nn_parallel(ctx, r->N, 1, conv_samples, &j);
    nn_free(wpk);
    return rc ? rc : atomic_load(&j.rc);
}

/* ------------------------------------------------------ weight gradient */
/* dW[o][c][i][j] = Σ_n Σ_oh Σ_ow dy[o][oh][ow]·xpad[c][oh+i][ow+j].  The
 * forward's column pair k is y0 = M0+M1+M2, y1 = M1-M2-M3 with Mb = Ub·Vb
 * per kernel row, so the gradient of Mb is dM0 = dy0, dM1 = dy0+dy1,
 * dM2 = dy0-dy1, dM3 = -dy1 (dy0, dy1 = dy[o][oh][2k], [2k+1]; zero past
 * Wo) and
 *   dUb[o][c][i] = Σ_n Σ_oh Σ_k dMb[o][oh][k]·Vb[c][oh+i][k]
 *   dW[.][i][0] = dU0 + (dU1+dU2)/2, [1] = (dU1-dU2)/2, [2] = (dU1+dU2)/2 + dU3
 * (Ub's transpose): 12 products per column pair and kernel row instead of
 * 18, and no junk columns beyond rounding K up to even.  The products:
 * lanes = 16 input channels (Vb transposed to words [row·Kq/2 + k/2][c]),
 * a broadcast word of dMb (o, column pairs k, k+1 of one row: planes as
 * computed) per output, the reduction over those pairs; one broadcast
 * serves the three kernel rows, which are Kq/2 words apart.  (Output
 * channels on the lanes, broadcasting Vb, was bf16_direct's layout: one
 * broadcast per VDPBF16PS at 16 outputs, 32x32 layer 0.82 against 0.70-0.76
 * CPU-ms.)  dM1, dM2 and every Vb are rounded to
 * bf16 once (sums of two bf16 values), as the forward rounds Vb and Ub.
 * Per-chunk fp32 partials summed in chunk order (thread-count independent),
 * as bf16_direct's. */
/* dst[0 .. n) = bf16(v[0 .. n)), n <= 16 (masked when n < 16). */
TGT static inline void store_bf16x16(uint16_t *dst, int64_t n, __m512 v) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    if (n >= 16) _mm256_storeu_si256((void *)dst, h);
    else _mm256_mask_storeu_epi16(dst, (__mmask16)((1u << n) - 1), h);
}

typedef struct wgeo {
    rgeo r;          /* the forward's geometry                                */
    int64_t Kq;      /* column pairs per row rounded up to even               */
    int64_t vps;     /* 16-bit values per Vb plane: Hp·Kq                     */
    int64_t nqp;     /* position pairs per sample and channel: Ho·Kq/2         */
    int64_t dps;     /* 16-bit values per dMb plane: 2·nqp                    */
    int64_t Cp16;    /* input channels rounded up to 16                       */
    int64_t per;     /* floats per chunk: 4·Cout·3·Cp16 (dU) + Cout (db)       */
    int64_t chunks;
} wgeo;

/* Vb[c][row][k] (plane (b·Cin + c)·vps) for every padded row and k < Kq. */
TGT static void wgrad_input(const wgeo *w, const uint16_t *x, uint16_t *V) {
    const rgeo *r = &w->r;
    flat_rd fr;
    if (flat_init(&fr, r, w->Kq)) { /* flat_rd's comment */
        for (int64_t c = 0; c < r->Cin; c++) {
            const uint16_t *xc = x + c * fr.HW;
            for (int b = 0; b < NFREQ; b++) { /* the pad rows */
                uint16_t *pl = V + (b * r->Cin + c) * w->vps;
                memset(pl, 0, (size_t)w->Kq * 2);
                memset(pl + (r->H + 1) * w->Kq, 0, (size_t)w->Kq * 2);
            }
            for (int64_t f0 = 0; f0 < fr.n; f0 += 16) {
                __m512 v[NFREQ];
                flat_freqs(&fr, xc, f0, v);
                for (int b = 0; b < NFREQ; b++)
                    store_bf16x16(V + (b * r->Cin + c) * w->vps + w->Kq + f0, fr.n - f0, v[b]);
            }
        }
        return;
    }
    for (int64_t c = 0; c < r->Cin; c++)
        for (int64_t k0 = 0; k0 < w->Kq; k0 += 16) { /* the pad masks are the same in every row */
            int64_t e0 = 2 * k0 - r->pw;
            __mmask32 m0 = window_mask(r->W, e0), m1 = window_mask(r->W, e0 + 2);
            for (int64_t row = 0; row < r->Hp; row++) {
                int64_t h = row - r->ph;
                __m512 v[NFREQ];
                if (h >= 0 && h < r->H) {
                    const uint16_t *xr = x + (c * r->H + h) * r->W + e0;
                    window_freqs(_mm512_maskz_loadu_epi16(m0, xr), _mm512_maskz_loadu_epi16(m1, xr + 2), v);
                } else
                    for (int b = 0; b < NFREQ; b++) v[b] = _mm512_setzero_ps();
                for (int b = 0; b < NFREQ; b++)
                    store_bf16x16(V + (b * r->Cin + c) * w->vps + row * w->Kq + k0, w->Kq - k0, v[b]);
            }
        }
}

/* dMb[o][oh·Kq + k] (16-bit, plane (b·Cout + o)·dps) of one sample, and
 * db[o] += Σ dy (one fp32 vector per channel, reduced in a fixed order;
 * db NULL: not wanted).  Columns past Wo read as zero (the masked window),
 * so k >= K gives dM = 0. */
/* dM0..3 of 16 column pairs, words wv = (dy0, dy1); returns sum + dy0 + dy1. */
TGT static inline __m512 dy_freqs(__m512i wv, __m512 f[NFREQ], __m512 sum) {
    __m512 d0 = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
    __m512 d1 = _mm512_castsi512_ps(_mm512_and_si512(wv, _mm512_set1_epi32((int)0xffff0000u)));
    f[0] = d0;
    f[1] = _mm512_add_ps(d0, d1);
    f[2] = _mm512_sub_ps(d0, d1);
    f[3] = _mm512_sub_ps(_mm512_setzero_ps(), d1);
    return _mm512_add_ps(sum, f[1]);
}

TGT static void wgrad_dy(const wgeo *w, const uint16_t *dy, uint16_t *P, float *db) {
    const rgeo *r = &w->r;
    /* Wo = 2·Kq (Wo a multiple of 4: ResNet's maps): each dy plane, read
     * as words, is the grid of column pairs with no gap, so the transform
     * runs over it flat, 16 pairs per step however short the rows (8x8
     * maps: 4 per row). */
    int flat = r->Wo == 2 * w->Kq;
    int64_t nflat = r->Ho * w->Kq;
    for (int64_t o = 0; o < r->Cout && flat; o++) {
        __m512 sum = _mm512_setzero_ps();
        const uint32_t *dw = (const uint32_t *)(dy + o * r->Ho * r->Wo);
        for (int64_t f0 = 0; f0 < nflat; f0 += 16) {
            __mmask16 m = nflat - f0 >= 16 ? 0xffff : (__mmask16)((1u << (nflat - f0)) - 1);
            __m512 f[NFREQ];
            sum = dy_freqs(_mm512_maskz_loadu_epi32(m, dw + f0), f, sum);
            for (int b = 0; b < NFREQ; b++) store_bf16x16(P + (b * r->Cout + o) * w->dps + f0, nflat - f0, f[b]);
        }
        if (db) db[o] += _mm512_reduce_add_ps(sum);
    }
    for (int64_t o = 0; o < r->Cout && !flat; o++) {
        __m512 sum = _mm512_setzero_ps();
        for (int64_t k0 = 0; k0 < w->Kq; k0 += 16) {
            __mmask32 m = window_mask(r->Wo, 2 * k0); /* the same in every row */
            for (int64_t oh = 0; oh < r->Ho; oh++) {
                __m512 f[NFREQ];
                sum = dy_freqs(_mm512_maskz_loadu_epi16(m, dy + (o * r->Ho + oh) * r->Wo + 2 * k0), f, sum);
                for (int b = 0; b < NFREQ; b++)
                    store_bf16x16(P + (b * r->Cout + o) * w->dps + oh * w->Kq + k0, w->Kq - k0, f[b]);
            }
        }
        if (db) db[o] += _mm512_reduce_add_ps(sum);
    }
}

/* dU[o][i][c] += Σ_qp pair(p[o·lp + qp]) · vt[(qp + i·kh)·Cp16 + c] for OB
 * outputs o, the three kernel rows i and NCV 16-channel vectors c: lanes =
 * input channels, so each broadcast pair of dM serves 3·NCV VDPBF16PS
 * (channels can be on the lanes because Vb is transposed, dMb is not).
 * With NCV = 4 the 12 input vectors would not fit beside 24 accumulators:
 * they are loaded per kernel row and the pairs broadcast again per row. */
#define WGRAD_BLOCK(OB, NCV)                                                                                   \
    TGT static void wgrad_##OB##_##NCV(const uint32_t *vt, int64_t Cp16, int64_t kh, const uint32_t *p,        \
                                       int64_t lp, int64_t nqp, int add, float *du) {                           \
        __m512 acc[OB][3][NCV];                                                                                \
        _Pragma("GCC unroll 8") for (int o = 0; o < OB; o++)                                                   \
        _Pragma("GCC unroll 3") for (int i = 0; i < 3; i++)                                                    \
        _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) acc[o][i][v] = _mm512_setzero_ps();           \
        for (int64_t qp = 0; qp < nqp; qp++) {                                                                 \
            if (NCV <= 2) {                                                                                    \
                __m512bh xv[3][NCV];                                                                           \
                _Pragma("GCC unroll 3") for (int i = 0; i < 3; i++)                                            \
                _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) xv[i][v] =                                \
                    (__m512bh)_mm512_loadu_si512(vt + (qp + i * kh) * Cp16 + 16 * v);                          \
                _Pragma("GCC unroll 8") for (int o = 0; o < OB; o++) {                                         \
                    __m512bh pb = (__m512bh)_mm512_set1_epi32((int)p[o * lp + qp]);                            \
                    _Pragma("GCC unroll 3") for (int i = 0; i < 3; i++)                                        \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) acc[o][i][v] =                        \
                        _mm512_dpbf16_ps(acc[o][i][v], pb, xv[i][v]);                                          \
                }                                                                                              \
            } else                                                                                             \
                _Pragma("GCC unroll 3") for (int i = 0; i < 3; i++) {                                          \
                    __m512bh xv[NCV];                                                                          \
                    _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) xv[v] =                               \
                        (__m512bh)_mm512_loadu_si512(vt + (qp + i * kh) * Cp16 + 16 * v);                      \
                    _Pragma("GCC unroll 8") for (int o = 0; o < OB; o++) {                                     \
                        __m512bh pb = (__m512bh)_mm512_set1_epi32((int)p[o * lp + qp]);                        \
                        _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) acc[o][i][v] =                    \
                            _mm512_dpbf16_ps(acc[o][i][v], pb, xv[v]);                                         \
                    }                                                                                          \
                }                                                                                              \
        }                                                                                                      \
        _Pragma("GCC unroll 8") for (int o = 0; o < OB; o++)                                                   \
        _Pragma("GCC unroll 3") for (int i = 0; i < 3; i++)                                                    \
        _Pragma("GCC unroll 4") for (int v = 0; v < NCV; v++) {                                              \
            float *d = du + (o * 3 + i) * Cp16 + 16 * v;                                                       \
            _mm512_storeu_ps(d, add ? _mm512_add_ps(_mm512_loadu_ps(d), acc[o][i][v]) : acc[o][i][v]);          \
        }                                                                                                      \
    }
WGRAD_BLOCK(2, 4)
WGRAD_BLOCK(1, 4)
WGRAD_BLOCK(4, 2)
WGRAD_BLOCK(1, 2)
WGRAD_BLOCK(8, 1)
WGRAD_BLOCK(1, 1)

/* dU[o][i][c] (3·Cp16 floats per output; add = 0: written, 1: added to)
 * for o < M, c < Cp16: channel
 * blocks of 64, 32 or 16 with 2, 4 or 8 outputs per call (24
 * accumulators), one output per call for the last few. */
TGT static void wgrad_kernel(const uint32_t *vt, int64_t Cp16, int64_t kh, const uint32_t *p, int64_t lp,
                             int64_t M, int64_t nqp, int add, float *du) {
    for (int64_t c0 = 0; c0 < Cp16;) {
        const uint32_t *v = vt + c0;
        float *d = du + c0;
        int64_t o = 0, s = 3 * Cp16;
        if (c0 + 64 <= Cp16) {
            for (; o + 2 <= M; o += 2) wgrad_2_4(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            for (; o < M; o++) wgrad_1_4(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            c0 += 64;
        } else if (c0 + 32 <= Cp16) {
            for (; o + 4 <= M; o += 4) wgrad_4_2(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            for (; o < M; o++) wgrad_1_2(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            c0 += 32;
        } else {
            for (; o + 8 <= M; o += 8) wgrad_8_1(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            for (; o < M; o++) wgrad_1_1(v, Cp16, kh, p + o * lp, lp, nqp, add, d + o * s);
            c0 += 16;
        }
    }
}

typedef struct wjob {
    wgeo w;
    const uint16_t *x, *dy;
    int want_dw, want_db;
    float *part; /* [chunks][per] */
    atomic_int rc;
} wjob;

static void wgrad_chunks(void *arg, int64_t c0, int64_t c1) {
    wjob *j = arg;
    const wgeo *w = &j->w;
    const rgeo *r = &w->r;
    uint16_t *V = j->want_dw ? nn_alloc((uint64_t)(NFREQ * r->Cin * w->vps) * 2u + 64) : NULL;
    uint16_t *P = nn_alloc((uint64_t)(NFREQ * r->Cout * w->dps) * 2u + 64);
    int64_t nvw = r->Hp * w->Kq / 2; /* words per Vb plane row of the transpose */
    uint32_t *T = j->want_dw ? nn_alloc((uint64_t)(nvw * w->Cp16) * 4u + 64) : NULL;
    if (!P || (j->want_dw && (!V || !T))) {
        nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16_wino_row): out of memory for gradients"));
        c1 = c0;
    }
    int64_t du = NFREQ * r->Cout * 3 * w->Cp16;
    for (int64_t ch = c0; ch < c1 && !atomic_load(&j->rc); ch++) {
        float *dU = j->part + ch * w->per, *db = j->want_db ? dU + du : NULL;
        int64_t n0 = ch * r->N / w->chunks; /* its first sample writes dU, the others add to it */
        for (int64_t n = n0; n < (ch + 1) * r->N / w->chunks; n++) {
            wgrad_dy(w, j->dy + n * r->Cout * r->Ho * r->Wo, P, db);
            if (!j->want_dw) continue;
            wgrad_input(w, j->x + n * r->Cin * r->H * r->W, V);
            for (int b = 0; b < NFREQ; b++) {
                nn_bf16_transpose_words((const uint32_t *)(V + b * r->Cin * w->vps), r->Cin, w->vps / 2, nvw, T,
                                        w->Cp16);
                wgrad_kernel(T, w->Cp16, w->Kq / 2, (const uint32_t *)(P + b * r->Cout * w->dps), w->dps / 2, r->Cout,
                             w->nqp, n > n0, dU + b * r->Cout * 3 * w->Cp16);
            }
        }
    }
    nn_free(V);
    nn_free(P);
    nn_free(T);
}

/* dW (req[1]) and db (req[2], when bias) of a stride-1 3x3 convolution. */
static int run_wgrad(const mxp_backward_args *a, const conv_geom *g) {
    wjob j;
    memset(&j, 0, sizeof j);
    wgeo *w = &j.w;
    rgeo_make(&w->r, g->N, g->C, g->H, g->W, g->M, g->ph, g->pw);
    w->Kq = up(w->r.K, 2);
    w->vps = w->r.Hp * w->Kq;
    w->nqp = w->r.Ho * w->Kq / 2;
    w->dps = 2 * w->nqp;
    w->Cp16 = up(g->C, 16);
    w->per = NFREQ * g->M * 3 * w->Cp16 + g->M;
    w->chunks = g->N < 8 ? g->N : 8;
    j.x = nn_ptr(&a->in[0]);
    j.dy = nn_ptr(&a->out_grad[0]);
    j.want_dw = a->req[1] != MXP_REQ_NULL;
    j.want_db = !g->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL;
    if ((!j.want_dw && !j.want_db) || w->chunks < 1) return MXP_OK;
    atomic_init(&j.rc, MXP_OK);
    int64_t K = g->C * 9;
    float *buf = nn_alloc((uint64_t)(w->chunks * w->per + g->M * K) * 4u + 64);
    if (!buf) return NN_ERR(MXP_ENOMEM, "Convolution (bf16_wino_row): out of memory for gradients");
    for (int64_t c = 0; c < w->chunks; c++) memset(buf + c * w->per + w->per - g->M, 0, (size_t)g->M * 4); /* db */
    j.part = buf;
    int rc = nn_parallel(a->ctx, w->chunks, 1, wgrad_chunks, &j);
    if (!rc) rc = atomic_load(&j.rc);
    for (int64_t c = 1; c < w->chunks && !rc; c++) /* chunk order: thread-count independent */
        for (int64_t i = 0; i < w->per; i++) buf[i] += buf[c * w->per + i];
    if (!rc && j.want_dw) {
        float *dw = buf + w->chunks * w->per;
        int64_t fs = g->M * 3 * w->Cp16; /* dU[b][o][i][c] */
        for (int64_t o = 0; o < g->M; o++)
            for (int64_t c = 0; c < g->C; c++)
                for (int64_t i = 0; i < 3; i++) {
                    const float *u = buf + (o * 3 + i) * w->Cp16 + c;
                    float s = 0.5f * (u[fs] + u[2 * fs]), d = 0.5f * (u[fs] - u[2 * fs]);
                    float *row = dw + (o * g->C + c) * 9 + i * 3;
                    row[0] = u[0] + s;
                    row[1] = d;
                    row[2] = s + u[3 * fs];
                }
        nn_bf16_store(a->req[1], dw, nn_ptr(&a->in_grad[1]), g->M * K);
    }
    if (!rc && j.want_db) nn_bf16_store(a->req[2], buf + NFREQ * g->M * 3 * w->Cp16, nn_ptr(&a->in_grad[2]), g->M);
    nn_free(buf);
    return rc;
}

/* ------------------------------------------------------------- the impl */
static int shape_ok(const conv_geom *g, char *why, size_t n) {
    if (g->G != 1) return snprintf(why, n, "bf16_wino_row: one group only (num_group %lld)", (long long)g->G), 0;
    if (g->kh != 3 || g->kw != 3) return snprintf(why, n, "bf16_wino_row: 3x3 kernels only"), 0;
    if (g->sh != 1 || g->sw != 1) return snprintf(why, n, "bf16_wino_row: stride 1 only"), 0;
    if (g->dh != 1 || g->dw != 1) return snprintf(why, n, "bf16_wino_row: no dilation"), 0;
    if (g->ph > 2 || g->pw > 2) return snprintf(why, n, "bf16_wino_row: pad <= 2 only"), 0;
    if (g->Ho < 1 || g->Wo < 1 || g->H * g->W > (1 << 20) || g->C > 4096 || g->M > 4096)
        return snprintf(why, n, "bf16_wino_row: map or channel count out of range"), 0;
    return 1;
}

static int rsupports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes[i] != MXP_DTYPE_BF16) {
            snprintf(a->reason, a->reason_size, "bf16_wino_row: input %u has dtype %d (bfloat16 only)", i,
                     a->in_dtypes[i]);
            return 0;
        }
    if (!conv_supports_2d(a, "bf16_wino_row")) return 0;
    if (a->in_shapes[0].ndim != 4) {
        snprintf(a->reason, a->reason_size, "bf16_wino_row: 2-D convolution only");
        return 0;
    }
    conv_geom g;
    conv_geom_init(&g, a->params, &a->in_shapes[0]);
    if (!shape_ok(&g, a->reason, a->reason_size)) return 0;
    return nn_bf16_vdp_ready("bf16_wino_row", a->reason, a->reason_size);
}

static int check(const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype != MXP_DTYPE_BF16)
            return NN_ERR(MXP_ETYPE, "Convolution (bf16_wino_row): tensor %u has dtype %d, expected bfloat16", i,
                          t[i].dtype);
    return nn_check_contig("Convolution", t, n);
}

/* Re-checks at run time what supports() promised; 0 = run the generic bf16
 * impl instead (MXP_BF16_KERNEL changed after binding). */
static int runnable(const conv_params *p, const mxp_tensor *x, conv_geom *g) {
    if (x->ndim != 4 || !nn_bf16_vdp_ready("bf16_wino_row", NULL, 0)) return 0;
    conv_geom_from_tensor(g, p, x);
    char why[160];
    return shape_ok(g, why, sizeof why);
}

static int rforward(const mxp_forward_args *a) {
    int rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->out, 1);
    if (rc) return rc;
    conv_geom g;
    if (!runnable(a->params, &a->in[0], &g)) return nn_bf16_conv_impl.forward(a);
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    rgeo r;
    rgeo_make(&r, g.N, g.C, g.H, g.W, g.M, g.ph, g.pw);
    wsrc s = {nn_ptr(&a->in[1]), g.C, g.M, 0};
    const uint16_t *bias = !g.no_bias && a->n_in > 2 ? nn_ptr(&a->in[2]) : NULL;
    return run_conv(a->ctx, &r, &s, nn_ptr(&a->in[0]), bias, nn_ptr(&a->out[0]), a->req[0]);
}

static int rbackward(const mxp_backward_args *a) {
    int rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->in_grad, a->n_in);
    if (!rc) rc = check(a->out_grad, 1);
    if (rc) return rc;
    conv_geom g;
    if (!runnable(a->params, &a->in[0], &g)) return nn_bf16_conv_impl.backward(a);
    if (a->n_in > 1) {
        rc = run_wgrad(a, &g);
        if (rc) return rc;
    }
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    /* dx = conv3x3(dy, W flipped and transposed), pad 2 - p */
    rgeo r;
    rgeo_make(&r, g.N, g.M, g.Ho, g.Wo, g.C, 2 - g.ph, 2 - g.pw);
    wsrc s = {nn_ptr(&a->in[1]), g.C, g.M, 1};
    return run_conv(a->ctx, &r, &s, nn_ptr(&a->out_grad[0]), NULL, nn_ptr(&a->in_grad[0]), a->req[0]);
}

const mxp_op_impl nn_bf16_wino_row_conv_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "bf16_wino_row", .device = "cpu",
    .rank = 525,
    .doc = "bfloat16 3x3 stride-1 convolution with Winograd F(2,3) along rows: 12 instead of 18 multiply-adds per "
           "output pair, VDPBF16PS (avx512bf16 only), fp32 accumulation; data and weight gradients the same way",
    .supports = rsupports, .forward = rforward, .backward = rbackward,
};
