/* bf16/bf16_gemm.c — C (fp32) = op(A)·op(B) over bfloat16 operands, on the
 * path bf16.h describes, plus the bf16 <-> fp32 array conversions.
 *
 * Packed paths (avx512f, avx512bf16, amx) share one layout for B: panels of
 * NR = 32 columns; in a panel, row q holds for each column j the pair
 * (B[2q][j], B[2q+1][j]) as one 32-bit word (low half first), which is the
 * operand layout of VDPBF16PS and of AMX's TDPBF16PS ("VNNI" pairs).  The
 * number of pair rows KP is k/2 rounded up, and for AMX up to a multiple of
 * 16 (one tile); the padding is zero, so it adds nothing to a sum.  A is packed per
 * panel of MR rows: pairs for the AVX-512 kernels (word [q][r]), plain rows
 * of 2·KP bf16 for AMX.  The AMX kernel writes an MR×NR fp32 tile that
 * the driver adds to or stores into C, clipped to m×n; the AVX-512 kernels
 * accumulate into C directly.
 *
 * The fp32 path widens both operands into scratch and calls OpenBLAS's
 * sgemm (nn_gemm_par): it is the portable path, not a bf16 kernel.
 * Work is split over row panels on ctx->parallel_for (B packed once, read
 * by all); each chunk packs its own A panel. */
#include "bf16/bf16.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>

#define NR 32
#define MR_AVX 8
#define MR_AMX 16

/* AMX kernel (bf16_amx.c): 16×32 tile from a 16-row A panel (rows of 2·kp
 * bf16) and a B panel of kp pair rows, kp a multiple of 16. */
void nn_bf16_amx_tile(const uint16_t *ap, const uint32_t *bp, int64_t kp, float *tile);

/* ------------------------------------------------------------ conversions */
__attribute__((target("avx512f,avx512bw")))
static void widen_512(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    for (; i < n; i++) dst[i] = nn_bf16_to_f32(src[i]);
}

void nn_bf16_widen(const uint16_t *src, float *dst, int64_t n) {
    if (nn_bf16_path_available(NN_BF16_AVX512F, NULL)) {
        widen_512(src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = nn_bf16_to_f32(src[i]);
}

/* Rounding to nearest even with integer lanes, NaN quieted: the same rule
 * as nn_f32_to_bf16, 16 at a time. */
__attribute__((target("avx512f,avx512bw")))
static void narrow_512(const float *src, uint16_t *dst, int64_t n) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), qbit = _mm512_set1_epi32(0x400000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs), inf);
        __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(x, 16), one)));
        r = _mm512_mask_or_epi32(r, nan, x, qbit);
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    for (; i < n; i++) dst[i] = nn_f32_to_bf16(src[i]);
}

void nn_bf16_narrow(const float *src, uint16_t *dst, int64_t n) {
    if (nn_bf16_path_available(NN_BF16_AVX512F, NULL)) {
        narrow_512(src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = nn_f32_to_bf16(src[i]);
}

void nn_bf16_store(int32_t req, const float *src, uint16_t *dst, int64_t n) {
    if (req == MXP_REQ_NULL) return;
    if (req != MXP_REQ_ADD) {
        nn_bf16_narrow(src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = nn_f32_to_bf16(nn_bf16_to_f32(dst[i]) + src[i]);
}

/* ------------------------------------------------------------ AVX-512 kernels */
/* The AVX-512 kernels accumulate an 8×32 block of C in registers, starting
 * from C itself (beta 1) or zero, and store it straight into C, clipped to
 * rows × cols by masks: no tile buffer and no second pass over C. */
#define KERN_ARGS const uint32_t *ap, const uint32_t *bp, int64_t kp, float *cp, int64_t ldc, int rows, int cols, int beta

#define KERN_INIT                                                                                      \
    __m512 c[MR_AVX][2];                                                                               \
    const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);                          \
    const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);   \
    for (int r = 0; r < MR_AVX; r++) {                                                                 \
        int load = beta && r < rows;                                                                   \
        c[r][0] = load ? _mm512_maskz_loadu_ps(m0, cp + r * ldc) : _mm512_setzero_ps();                \
        c[r][1] = load ? _mm512_maskz_loadu_ps(m1, cp + r * ldc + 16) : _mm512_setzero_ps();           \
    }

#define KERN_STORE                                                                                     \
    for (int r = 0; r < MR_AVX; r++)                                                                   \
        if (r < rows) {                                                                                \
            _mm512_mask_storeu_ps(cp + r * ldc, m0, c[r][0]);                                          \
            _mm512_mask_storeu_ps(cp + r * ldc + 16, m1, c[r][1]);                                     \
        }

/* For each pair row q, C[r][j] += a.lo·b.lo + a.hi·b.hi, with the halves
 * widened to fp32 by shifts (exact) and two FMAs. */
__attribute__((target("avx512f,avx512bw")))
static void kern_avx512f(KERN_ARGS) {
    KERN_INIT
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    for (int64_t q = 0; q < kp; q++) {
        __m512i b0 = _mm512_loadu_si512(bp + q * NR), b1 = _mm512_loadu_si512(bp + q * NR + 16);
        __m512 b0l = _mm512_castsi512_ps(_mm512_slli_epi32(b0, 16)), b0h = _mm512_castsi512_ps(_mm512_and_si512(b0, hi));
        __m512 b1l = _mm512_castsi512_ps(_mm512_slli_epi32(b1, 16)), b1h = _mm512_castsi512_ps(_mm512_and_si512(b1, hi));
        const uint32_t *aq = ap + q * MR_AVX;
        for (int r = 0; r < MR_AVX; r++) {
            uint32_t lo = aq[r] << 16, hw = aq[r] & 0xffff0000u;
            float fl, fh;
            memcpy(&fl, &lo, 4);
            memcpy(&fh, &hw, 4);
            __m512 al = _mm512_set1_ps(fl), ah = _mm512_set1_ps(fh);
            c[r][0] = _mm512_fmadd_ps(ah, b0h, _mm512_fmadd_ps(al, b0l, c[r][0]));
            c[r][1] = _mm512_fmadd_ps(ah, b1h, _mm512_fmadd_ps(al, b1l, c[r][1]));
        }
    }
    KERN_STORE
}

/* The same block with VDPBF16PS (one instruction per pair row and vector).
 * Compiled always, executed only when CPUID shows avx512_bf16. */
__attribute__((target("avx512f,avx512bw,avx512bf16")))
static void kern_avx512bf16(KERN_ARGS) {
    KERN_INIT
    for (int64_t q = 0; q < kp; q++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + q * NR), b1 = (__m512bh)_mm512_loadu_si512(bp + q * NR + 16);
        const uint32_t *aq = ap + q * MR_AVX;
        for (int r = 0; r < MR_AVX; r++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)aq[r]);
            c[r][0] = _mm512_dpbf16_ps(c[r][0], a, b0);
            c[r][1] = _mm512_dpbf16_ps(c[r][1], a, b1);
        }
    }
    KERN_STORE
}

/* ------------------------------------------------------------ packing */
static inline uint16_t at(const uint16_t *x, int trans, int64_t ld, int64_t i, int64_t j) {
    return trans ? x[j * ld + i] : x[i * ld + j];
}

/* 16×16 transpose of 32-bit words: r[i] holds row i, on return r[e] holds
 * column e (unpack within 128-bit lanes, then move whole lanes). */
__attribute__((target("avx512f")))
static inline void transpose16_epi32(__m512i r[16]) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    /* b[4i+c], lane L: element 4L+c of rows 4i..4i+3 */
    for (int c = 0; c < 4; c++) {
        __m512i u0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x88), u1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xdd);
        __m512i v0 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x88), v1 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(u0, v0, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(u1, v1, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(u0, v0, 0xdd);
        r[12 + c] = _mm512_shuffle_i32x4(u1, v1, 0xdd);
    }
}

static inline __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1); }
static inline __mmask32 mask32(int64_t n) { return n >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (n > 0 ? n : 0)) - 1); }

/* B stored k×n (not transposed): pair row q of a panel interleaves rows 2q
 * and 2q+1, 32 columns at a time. */
__attribute__((target("avx512f,avx512bw")))
static void pack_b_rows_512(const uint16_t *b, int64_t ldb, int64_t k, int64_t n, int64_t kp, uint32_t *bp) {
    const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                            37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
    int64_t np = (n + NR - 1) / NR;
    for (int64_t p = 0; p < np; p++) {
        uint32_t *dst = bp + p * kp * NR;
        __mmask32 m = mask32(n - p * NR);
        const uint16_t *col = b + p * NR;
        for (int64_t q = 0; q < kp; q++) {
            __m512i r0 = 2 * q < k ? _mm512_maskz_loadu_epi16(m, col + 2 * q * ldb) : _mm512_setzero_si512();
            __m512i r1 = 2 * q + 1 < k ? _mm512_maskz_loadu_epi16(m, col + (2 * q + 1) * ldb) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + q * NR, _mm512_permutex2var_epi16(r0, lo_idx, r1));
            _mm512_storeu_si512(dst + q * NR + 16, _mm512_permutex2var_epi16(r0, hi_idx, r1));
        }
    }
}

/* B stored n×k (transposed): pair (B[2q][j], B[2q+1][j]) is the 32-bit
 * word q of stored row j, so a panel is a transpose of 32-bit words, 16×16
 * at a time.  An odd k's last pair (high half 0) and the zero padding up to
 * kp are written separately. */
__attribute__((target("avx512f,avx512bw")))
static void pack_b_words_512(const uint16_t *b, int64_t ldb, int64_t k, int64_t n, int64_t kp, uint32_t *bp) {
    int64_t np = (n + NR - 1) / NR, kfull = k / 2;
    for (int64_t p = 0; p < np; p++) {
        uint32_t *dst = bp + p * kp * NR;
        for (int64_t half = 0; half < 2; half++) {
            int64_t j0 = p * NR + half * 16, rows = n - j0 < 16 ? n - j0 : 16;
            for (int64_t q0 = 0; q0 < kfull; q0 += 16) {
                __m512i r[16];
                __mmask16 m = mask16(kfull - q0);
                for (int64_t t = 0; t < 16; t++)
                    r[t] = t < rows ? _mm512_maskz_loadu_epi32(m, b + (j0 + t) * ldb + 2 * q0) : _mm512_setzero_si512();
                transpose16_epi32(r);
                for (int64_t e = 0; e < 16 && q0 + e < kfull; e++) _mm512_storeu_si512(dst + (q0 + e) * NR + half * 16, r[e]);
            }
        }
        for (int64_t q = kfull; q < kp; q++)
            for (int64_t j = 0; j < NR; j++) {
                int64_t col = p * NR + j;
                dst[q * NR + j] = 2 * q < k && col < n ? b[col * ldb + 2 * q] : 0;
            }
    }
}

/* B (k×n logical) into panels of NR columns × kp pair rows. */
static void pack_b(const uint16_t *b, int tb, int64_t ldb, int64_t k, int64_t n, int64_t kp, uint32_t *bp) {
    if (tb) pack_b_words_512(b, ldb, k, n, kp, bp);
    else pack_b_rows_512(b, ldb, k, n, kp, bp);
}

/* Rows [i0, i0+MR_AVX) of A stored m×k (not transposed) as pair words
 * [q][r]: word q of each row, transposed; a 16×16 transpose takes the 8 rows
 * at pair rows q0.. and q0+16.., giving two pair rows per output vector. */
__attribute__((target("avx512f,avx512bw")))
static void pack_a_words_512(const uint16_t *a, int64_t lda, int64_t m, int64_t k, int64_t kp, int64_t i0,
                             uint32_t *ap) {
    int64_t kfull = k / 2, rows = m - i0 < MR_AVX ? m - i0 : MR_AVX;
    for (int64_t q0 = 0; q0 < kfull; q0 += 32) {
        __m512i r[16];
        __mmask16 m0 = mask16(kfull - q0), m1 = mask16(kfull - q0 - 16);
        for (int64_t t = 0; t < MR_AVX; t++) {
            const uint16_t *row = a + (i0 + t) * lda + 2 * q0;
            r[t] = t < rows ? _mm512_maskz_loadu_epi32(m0, row) : _mm512_setzero_si512();
            r[8 + t] = t < rows && m1 ? _mm512_maskz_loadu_epi32(m1, row + 32) : _mm512_setzero_si512();
        }
        transpose16_epi32(r);
        for (int64_t e = 0; e < 16; e++) {
            if (q0 + e < kfull) _mm256_storeu_si256((__m256i *)(ap + (q0 + e) * MR_AVX), _mm512_castsi512_si256(r[e]));
            if (q0 + 16 + e < kfull)
                _mm256_storeu_si256((__m256i *)(ap + (q0 + 16 + e) * MR_AVX), _mm512_extracti64x4_epi64(r[e], 1));
        }
    }
    for (int64_t q = kfull; q < kp; q++)
        for (int64_t r = 0; r < MR_AVX; r++)
            ap[q * MR_AVX + r] = 2 * q < k && r < rows ? a[(i0 + r) * lda + 2 * q] : 0;
}

/* Rows [i0, i0+MR_AVX) of A as pair words [q][r]. */
static void pack_a_pairs(const uint16_t *a, int ta, int64_t lda, int64_t m, int64_t k, int64_t kp, int64_t i0,
                         uint32_t *ap) {
    if (!ta) {
        pack_a_words_512(a, lda, m, k, kp, i0, ap);
        return;
    }
    for (int64_t q = 0; q < kp; q++)
        for (int64_t r = 0; r < MR_AVX; r++) {
            int64_t i = i0 + r, k0 = 2 * q;
            uint32_t lo = i < m && k0 < k ? at(a, ta, lda, i, k0) : 0;
            uint32_t hi = i < m && k0 + 1 < k ? at(a, ta, lda, i, k0 + 1) : 0;
            ap[q * MR_AVX + r] = lo | hi << 16;
        }
}

/* Rows [i0, i0+MR_AMX) of A as plain rows of 2·kp bf16. */
static void pack_a_rows(const uint16_t *a, int ta, int64_t lda, int64_t m, int64_t k, int64_t kp, int64_t i0,
                        uint16_t *ap) {
    for (int64_t r = 0; r < MR_AMX; r++)
        for (int64_t kk = 0; kk < 2 * kp; kk++) {
            int64_t i = i0 + r;
            ap[r * 2 * kp + kk] = i < m && kk < k ? at(a, ta, lda, i, kk) : 0;
        }
}

/* ------------------------------------------------------------ driver */
typedef struct gjob {
    int path, ta, tb, beta, mr;
    int64_t m, n, k, kp, lda, ldc;
    const uint16_t *a;
    const void *apacked; /* all row panels of A packed, or NULL */
    const uint32_t *bp;
    float *c;
    atomic_int rc;
} gjob;

static void run_panels(void *arg, int64_t p0, int64_t p1) {
    gjob *j = arg;
    int64_t np = (j->n + NR - 1) / NR;
    void *own = j->apacked ? NULL : nn_alloc((uint64_t)j->kp * (uint64_t)j->mr * 4u), *ap = own;
    float tile[MR_AMX * NR];
    if (!j->apacked && !own) {
        atomic_store(&j->rc, MXP_ENOMEM);
        return;
    }
    for (int64_t rp = p0; rp < p1; rp++) {
        int64_t i0 = rp * j->mr, rows = j->m - i0 < j->mr ? j->m - i0 : j->mr;
        if (j->apacked) ap = (char *)j->apacked + (size_t)(rp * j->kp * j->mr) * 4u;
        else if (j->path == NN_BF16_AMX) pack_a_rows(j->a, j->ta, j->lda, j->m, j->k, j->kp, i0, ap);
        else pack_a_pairs(j->a, j->ta, j->lda, j->m, j->k, j->kp, i0, ap);
        for (int64_t p = 0; p < np; p++) {
            const uint32_t *bp = j->bp + p * j->kp * NR;
            int64_t j0 = p * NR, cols = j->n - j0 < NR ? j->n - j0 : NR;
            float *cblk = j->c + i0 * j->ldc + j0;
            if (j->path == NN_BF16_AVX512BF16) {
                kern_avx512bf16(ap, bp, j->kp, cblk, j->ldc, (int)rows, (int)cols, j->beta);
                continue;
            }
            if (j->path == NN_BF16_AVX512F) {
                kern_avx512f(ap, bp, j->kp, cblk, j->ldc, (int)rows, (int)cols, j->beta);
                continue;
            }
            nn_bf16_amx_tile(ap, bp, j->kp, tile);
            for (int64_t r = 0; r < rows; r++) {
                float *crow = j->c + (i0 + r) * j->ldc + j0;
                const float *t = tile + r * NR;
                if (j->beta) for (int64_t q = 0; q < cols; q++) crow[q] += t[q];
                else memcpy(crow, t, (size_t)cols * sizeof(float));
            }
        }
    }
    nn_free(own);
}

static int gemm_fp32(const mxp_op_ctx *ctx, int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                     int64_t lda, const uint16_t *b, int64_t ldb, int beta, float *c, int64_t ldc) {
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    float *af = nn_alloc((uint64_t)(ar * ac + br * bc) * sizeof(float) + 64);
    if (!af) return NN_ERR(MXP_ENOMEM, "bf16 gemm: out of memory for %lld fp32 values", (long long)(ar * ac + br * bc));
    float *bf = af + ar * ac;
    for (int64_t r = 0; r < ar; r++) nn_bf16_widen(a + r * lda, af + r * ac, ac);
    for (int64_t r = 0; r < br; r++) nn_bf16_widen(b + r * ldb, bf + r * bc, bc);
    int rc = nn_gemm_par(ctx, MXP_DTYPE_F32, ta, tb, m, n, k, 1.0, af, ac, bf, bc, beta ? 1.0 : 0.0, c, ldc);
    nn_free(af);
    return rc;
}

static int64_t pair_rows(int path, int64_t k) {
    int64_t kp = (k + 1) / 2;
    return path == NN_BF16_AMX ? (kp + 15) / 16 * 16 : kp; /* AMX: whole tiles of 16 pair rows */
}

static int gemm_packed_paths(const mxp_op_ctx *ctx, int path, int ta, int tb, int64_t m, int64_t n, int64_t k,
                             const uint16_t *a, int64_t lda, const void *apacked, const uint16_t *b, int64_t ldb,
                             int beta, float *c, int64_t ldc) {
    int64_t kp = pair_rows(path, k), np = (n + NR - 1) / NR;
    uint32_t *bp = nn_alloc((uint64_t)(np * kp * NR) * 4u);
    if (!bp) return NN_ERR(MXP_ENOMEM, "bf16 gemm: out of memory packing B (%lld x %lld)", (long long)k, (long long)n);
    pack_b(b, tb, ldb, k, n, kp, bp);
    gjob j = {.path = path, .ta = ta, .tb = tb, .beta = beta, .mr = path == NN_BF16_AMX ? MR_AMX : MR_AVX,
              .m = m, .n = n, .k = k, .kp = kp, .lda = lda, .ldc = ldc, .a = a, .apacked = apacked, .bp = bp, .c = c};
    atomic_init(&j.rc, MXP_OK);
    int64_t panels = (m + j.mr - 1) / j.mr;
    double flops_per_panel = 2.0 * (double)j.mr * (double)(np * NR) * (double)(2 * kp);
    int64_t grain = (int64_t)(2e6 / flops_per_panel) + 1; /* ~2 MFLOP per chunk at least */
    int rc = nn_parallel(ctx, panels, grain, run_panels, &j);
    nn_free(bp);
    if (rc) return rc;
    rc = atomic_load(&j.rc);
    return rc ? NN_ERR(rc, "bf16 gemm: out of memory packing A") : MXP_OK;
}

static int trivial(int64_t m, int64_t n, int64_t k, int beta, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return 1;
    if (k > 0) return 0;
    if (!beta) for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, (size_t)n * sizeof(float));
    return 1;
}

static int check_path(int path) {
    const char *why = NULL;
    if (!nn_bf16_path_available(path, &why))
        return NN_ERR(MXP_EUNSUPPORTED, "bf16 gemm: path %s: %s", nn_bf16_path_name(path), why);
    return MXP_OK;
}

int nn_bf16_gemm(const mxp_op_ctx *ctx, int path, int ta, int tb, int64_t m, int64_t n, int64_t k,
                 const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int beta, float *c,
                 int64_t ldc) {
    if (trivial(m, n, k, beta, c, ldc)) return MXP_OK;
    int rc = check_path(path);
    if (rc) return rc;
    if (path == NN_BF16_FP32) return gemm_fp32(ctx, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return gemm_packed_paths(ctx, path, ta, tb, m, n, k, a, lda, NULL, b, ldb, beta, c, ldc);
}

/* ------------------------------------------------------------ packed A */
int nn_bf16_apack_init(nn_bf16_apack *p, int path, int ta, int64_t m, int64_t k, const uint16_t *a, int64_t lda) {
    memset(p, 0, sizeof *p);
    int rc = check_path(path);
    if (rc) return rc;
    p->path = path;
    p->m = m;
    p->k = k;
    if (path == NN_BF16_FP32) { /* A widened to fp32, row-major m×k */
        float *f = nn_alloc((uint64_t)(m * k) * sizeof(float) + 64);
        if (!f) return NN_ERR(MXP_ENOMEM, "bf16 gemm: out of memory widening A (%lld x %lld)", (long long)m, (long long)k);
        for (int64_t i = 0; i < m; i++)
            for (int64_t q = 0; q < k; q++) f[i * k + q] = nn_bf16_to_f32(at(a, ta, lda, i, q));
        p->data = f;
        return MXP_OK;
    }
    int mr = path == NN_BF16_AMX ? MR_AMX : MR_AVX;
    int64_t kp = pair_rows(path, k), panels = (m + mr - 1) / mr;
    void *d = nn_alloc((uint64_t)(panels * kp * mr) * 4u);
    if (!d) return NN_ERR(MXP_ENOMEM, "bf16 gemm: out of memory packing A (%lld x %lld)", (long long)m, (long long)k);
    for (int64_t rp = 0; rp < panels; rp++) {
        void *dst = (char *)d + (size_t)(rp * kp * mr) * 4u;
        if (path == NN_BF16_AMX) pack_a_rows(a, ta, lda, m, k, kp, rp * mr, dst);
        else pack_a_pairs(a, ta, lda, m, k, kp, rp * mr, dst);
    }
    p->data = d;
    return MXP_OK;
}

void nn_bf16_apack_free(nn_bf16_apack *p) {
    if (!p) return;
    nn_free(p->data);
    p->data = NULL;
}

int nn_bf16_gemm_apacked(const mxp_op_ctx *ctx, const nn_bf16_apack *a, int tb, int64_t n, const uint16_t *b,
                         int64_t ldb, int beta, float *c, int64_t ldc) {
    int64_t m = a->m, k = a->k;
    if (trivial(m, n, k, beta, c, ldc)) return MXP_OK;
    if (a->path != NN_BF16_FP32)
        return gemm_packed_paths(ctx, a->path, 0, tb, m, n, k, NULL, 0, a->data, b, ldb, beta, c, ldc);
    int64_t br = tb ? n : k, bc = tb ? k : n;
    float *bf = nn_alloc((uint64_t)(br * bc) * sizeof(float) + 64);
    if (!bf) return NN_ERR(MXP_ENOMEM, "bf16 gemm: out of memory for %lld fp32 values", (long long)(br * bc));
    for (int64_t r = 0; r < br; r++) nn_bf16_widen(b + r * ldb, bf + r * bc, bc);
    int rc = nn_gemm_par(ctx, MXP_DTYPE_F32, 0, tb, m, n, k, 1.0, a->data, k, bf, bc, beta ? 1.0 : 0.0, c, ldc);
    nn_free(bf);
    return rc;
}
