/* conv_pointwise_kern.c — the float32 kernels of Convolution impl
 * "pointwise" (1x1, stride 1, no padding; drivers in conv_pointwise.c):
 *
 *   pwk_pack:  one strip of PW_STRIP pixels of K rows (row stride lds)
 *              copied into a contiguous panel [K][PW_STRIP], zero past the
 *              image's last pixel, so the kernel's loads are sequential and
 *              stay in L1 across all output-row blocks of the strip;
 *   pwk_gemm:  mb <= PW_MB output rows x one strip, accumulated over K:
 *              weights packed [K][mb] and broadcast, two 16-pixel vectors
 *              per row — 24 accumulators in AVX-512 registers (forward, and
 *              the data gradient with the weights transposed); its
 *              pwk_gemm_pack form reads the strip in place and writes
 *              pwk_pack's panel as it goes;
 *   pwk_trans: a (rows x pixels) block of dy transposed to pixel-major
 *              [pixel][row] (16x16 tiles in registers), plus its row sums
 *              (the bias gradient);
 *   pwk_dw:    the weight gradient of up to PW_DWC input channels x 64
 *              output channels over a run of pixels: the transposed dy
 *              gives 4 vectors of output channels per pixel, each x value
 *              is broadcast; accumulators stay in registers over the whole
 *              run and are added to the caller's partial once.
 *
 * Each (mb) / (nmv, nc) shape is its own unrolled instance (accumulators
 * must live in registers), selected by a switch inside one function compiled
 * for AVX-512F, AVX2 and baseline x86-64 (target_clones, nn_simd.h; off
 * under ASan and clang) and reached through a plain wrapper.  The AVX-512
 * clone is the one tuned; the others are correct, not fast.  No bounds
 * checks: callers size every buffer. */
#include "conv_pointwise.h"
#include "nn_simd.h"

#define AI static inline __attribute__((always_inline))

/* ------------------------------------------------------------ pack */
TC static void pack_any(const float *src, int64_t lds, int64_t K, int64_t np, float *dst, int pf) {
    if (np == PW_STRIP) {
        for (int64_t k = 0; k < K; k++) {
            const float *s = src + k * lds;
            if (pf) { /* the strip after next: its lines arrive while this one computes */
                __builtin_prefetch(s + 2 * PW_STRIP, 0, 3);
                __builtin_prefetch(s + 2 * PW_STRIP + 16, 0, 3);
            }
            st16(dst + k * PW_STRIP, ld16(s));
            st16(dst + k * PW_STRIP + 16, ld16(s + 16));
        }
        return;
    }
    for (int64_t k = 0; k < K; k++) {
        const float *s = src + k * lds;
        float *d = dst + k * PW_STRIP;
        int64_t l = 0;
        for (; l < np; l++) d[l] = s[l];
        for (; l < PW_STRIP; l++) d[l] = 0.0f;
    }
}

void pwk_pack(const float *src, int64_t lds, int64_t K, int64_t np, float *dst, int pf) {
    pack_any(src, lds, K, np, dst, pf);
}

/* Strips side by side, copied row by row: each of the K rows is one
 * contiguous run of up to PW_WIDE_STRIPS * 32 pixels, which the hardware
 * prefetchers follow (a strip at a time, each row is two lines 12 KiB
 * from the next and every line waits its full memory latency). */
TC static void pack_wide_any(const float *src, int64_t lds, int64_t K, int64_t np, float *dst) {
    int64_t whole = np / PW_STRIP, rem = np - whole * PW_STRIP;
    for (int64_t k = 0; k < K; k++) {
        const float *s = src + k * lds;
        if (k + 4 < K) { /* the start of a later row: the prefetchers restart on each row */
            __builtin_prefetch(s + 4 * lds, 0, 3);
            __builtin_prefetch(s + 4 * lds + 16, 0, 3);
        }
        float *d = dst + k * PW_STRIP;
        for (int64_t t = 0; t < whole; t++, s += PW_STRIP, d += K * PW_STRIP) {
            st16(d, ld16(s));
            st16(d + 16, ld16(s + 16));
        }
        if (rem) {
            int64_t l = 0;
            for (; l < rem; l++) d[l] = s[l];
            for (; l < PW_STRIP; l++) d[l] = 0.0f;
        }
    }
}

void pwk_pack_wide(const float *src, int64_t lds, int64_t K, int64_t np, float *dst) {
    pack_wide_any(src, lds, K, np, dst);
}

/* ------------------------------------------------------------ gemm */
/* One line of the next packed group into L2 every 1 << shift iterations,
 * row by row along each row's run (the L2 streamer then runs ahead along
 * the row, so most of these find their line already on its way), spread
 * over the kernels' FMAs: x is read from memory while the kernels compute
 * instead of while pwk_pack_wide waits on it. */
AI void pf_step(pwk_pf *pf, int64_t k) {
    if ((k & ((1 << pf->shift) - 1)) || !pf->left) return;
    __builtin_prefetch(pf->row + pf->col, 0, 2);
    pf->left--;
    pf->col += 16;
    if (pf->col >= pf->ncol) {
        pf->col = 0;
        pf->row += pf->ld;
    }
}

/* The in-place read of a strip (pwk_gemm_pack) asks for its row PW_PFD
 * iterations ahead into L1 (prefetcht0).  Each row is two lines a whole
 * row pitch after the previous row's, which the L1 prefetchers do not
 * follow, and pwk_pf's L2 prefetch has not always arrived: in layer (e)'s
 * forward ~20% of the perf samples sat on these two loads, none with it.
 * 16 rows ahead beat 4, 8 and 32 in alternating runs (issue 19, 2026-11-26). */
#ifndef PW_PFD
#define PW_PFD 16
#endif
AI void pf_l1(const float *row) {
    __builtin_prefetch(row, 0, 3);
    __builtin_prefetch(row + 16, 0, 3);
}

AI void gemm_body(const int MB, const float *a, const float *b, int64_t ldb, float *pan, int64_t K, float *c,
                  int64_t ldc, const float *bias, int add, pwk_pf *pf) {
    v16 acc[PW_MB][2];
#pragma GCC unroll 12
    for (int i = 0; i < MB; i++) {
        float bv = bias ? bias[i] : 0.0f;
        acc[i][0] = (v16){0} + bv;
        acc[i][1] = (v16){0} + bv;
    }
    for (int64_t k = 0; k < K; k++) {
        if (pf) pf_step(pf, k);
        if (PW_PFD && pan && k + PW_PFD < K) pf_l1(b + (k + PW_PFD) * ldb);
        v16 v0 = ld16(b + k * ldb), v1 = ld16(b + k * ldb + 16);
        if (pan) {
            st16(pan + k * PW_STRIP, v0);
            st16(pan + k * PW_STRIP + 16, v1);
        }
        const float *w = a + k * MB;
#pragma GCC unroll 12
        for (int i = 0; i < MB; i++) {
            float s = w[i];
            acc[i][0] += s * v0;
            acc[i][1] += s * v1;
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MB; i++) {
        float *o = c + i * ldc;
        if (add) {
            st16(o, ld16(o) + acc[i][0]);
            st16(o + 16, ld16(o + 16) + acc[i][1]);
        } else {
            st16(o, acc[i][0]);
            st16(o + 16, acc[i][1]);
        }
    }
}

/* pan == NULL: b is a packed panel (ldb PW_STRIP); else b is the strip in
 * place (row stride ldb), copied to pan as it is read (pwk_gemm_pack). */
#define G1(MB) case MB: \
    if (pan) gemm_body(MB, a, b, ldb, pan, K, c, ldc, bias, add, pf); \
    else gemm_body(MB, a, b, PW_STRIP, NULL, K, c, ldc, bias, add, pf); \
    break;

TC static void gemm_any(int mb, const float *a, const float *b, int64_t ldb, float *pan, int64_t K, float *c,
                        int64_t ldc, const float *bias, int add, pwk_pf *pf) {
    switch (mb) {
        G1(1) G1(2) G1(3) G1(4) G1(5) G1(6) G1(7) G1(8) G1(9) G1(10) G1(11) G1(12)
        default: break;
    }
}

/* The streaming-store variant: AVX-512F only (compiled for it by a target
 * attribute, called only after a CPUID check), whole 64-byte lines that
 * bypass the cache.  A normal store first reads each output line from
 * memory (write-allocate): for the data gradient of a 256->64 layer that
 * is as many bytes again as it writes. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#include <immintrin.h>
#define PW_HAVE_NT 1
__attribute__((target("avx512f"), always_inline)) static inline void gemm_nt_body(const int MB, const float *a,
                                                                                 const float *b, int64_t ldb,
                                                                                 float *pan, int64_t K, float *c,
                                                                                 int64_t ldc, const float *bias,
                                                                                 pwk_pf *pf) {
    __m512 acc[PW_MB][2];
#pragma GCC unroll 12
    for (int i = 0; i < MB; i++) {
        __m512 bv = _mm512_set1_ps(bias ? bias[i] : 0.0f);
        acc[i][0] = bv;
        acc[i][1] = bv;
    }
    for (int64_t k = 0; k < K; k++) {
        if (pf) pf_step(pf, k);
        if (PW_PFD && pan && k + PW_PFD < K) pf_l1(b + (k + PW_PFD) * ldb);
        __m512 v0 = _mm512_loadu_ps(b + k * ldb), v1 = _mm512_loadu_ps(b + k * ldb + 16);
        if (pan) {
            _mm512_storeu_ps(pan + k * PW_STRIP, v0);
            _mm512_storeu_ps(pan + k * PW_STRIP + 16, v1);
        }
        const float *w = a + k * MB;
#pragma GCC unroll 12
        for (int i = 0; i < MB; i++) {
            __m512 s = _mm512_set1_ps(w[i]);
            acc[i][0] = _mm512_fmadd_ps(s, v0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(s, v1, acc[i][1]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MB; i++) {
        _mm512_stream_ps(c + i * ldc, acc[i][0]);
        _mm512_stream_ps(c + i * ldc + 16, acc[i][1]);
    }
}

#define N1(MB) case MB: \
    if (pan) gemm_nt_body(MB, a, b, ldb, pan, K, c, ldc, bias, pf); \
    else gemm_nt_body(MB, a, b, PW_STRIP, NULL, K, c, ldc, bias, pf); \
    break;

__attribute__((target("avx512f"))) static void gemm_nt(int mb, const float *a, const float *b, int64_t ldb, float *pan,
                                                       int64_t K, float *c, int64_t ldc, const float *bias,
                                                       pwk_pf *pf) {
    switch (mb) {
        N1(1) N1(2) N1(3) N1(4) N1(5) N1(6) N1(7) N1(8) N1(9) N1(10) N1(11) N1(12)
        default: break;
    }
}

__attribute__((target("avx512f"))) static void fence_nt(void) { _mm_sfence(); }
#endif

void pwk_stream_fence(void) {
#ifdef PW_HAVE_NT
    if (pwk_have_stream()) fence_nt();
#endif
}

int pwk_have_stream(void) {
#ifdef PW_HAVE_NT
    return __builtin_cpu_supports("avx512f") ? 1 : 0; /* reads libgcc's cached CPUID */
#else
    return 0;
#endif
}

static void gemm_dispatch(int mb, const float *a, const float *b, int64_t ldb, float *pan, int64_t K, float *c,
                          int64_t ldc, const float *bias, int add, pwk_pf *pf) {
    if (pf && !pf->left) pf = NULL;
#ifdef PW_HAVE_NT
    if (add == 2) {
        gemm_nt(mb, a, b, ldb, pan, K, c, ldc, bias, pf);
        return;
    }
#endif
    gemm_any(mb, a, b, ldb, pan, K, c, ldc, bias, add != 0, pf);
}

void pwk_gemm_pf(int mb, const float *a, const float *b, int64_t K, float *c, int64_t ldc, const float *bias, int add,
                 pwk_pf *pf) {
    gemm_dispatch(mb, a, b, PW_STRIP, NULL, K, c, ldc, bias, add, pf);
}

void pwk_gemm_pack(int mb, const float *a, const float *src, int64_t lds, float *pan, int64_t K, float *c, int64_t ldc,
                   const float *bias, int add, pwk_pf *pf) {
    gemm_dispatch(mb, a, src, lds, pan, K, c, ldc, bias, add, pf);
}

void pwk_gemm(int mb, const float *a, const float *b, int64_t K, float *c, int64_t ldc, const float *bias, int add) {
    pwk_gemm_pf(mb, a, b, K, c, ldc, bias, add, NULL);
}

/* ------------------------------------------------------- transpose */
/* 16x16 in registers: four butterfly stages, stage s exchanging bit s of
 * the row index with bit s of the column index (rows i and i+s swap their
 * off-diagonal s-blocks). */
#define SH(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
AI void tr16(v16 *r) {
    for (int i = 0; i < 16; i += 2) {
        v16 a = r[i], b = r[i + 1];
        r[i] = SH(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
        r[i + 1] = SH(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    }
    for (int i = 0; i < 16; i++)
        if (!(i & 2)) {
            v16 a = r[i], b = r[i + 2];
            r[i] = SH(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            r[i + 2] = SH(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
        }
    for (int i = 0; i < 16; i++)
        if (!(i & 4)) {
            v16 a = r[i], b = r[i + 4];
            r[i] = SH(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            r[i + 4] = SH(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
        }
    for (int i = 0; i < 8; i++) {
        v16 a = r[i], b = r[i + 8];
        r[i] = SH(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        r[i + 8] = SH(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    }
}

TC static void trans_any(const float *src, int64_t lds, int64_t R, int64_t np, float *dst, int64_t ldt, double *rowsum) {
    int64_t Rp = (R + 15) / 16 * 16;
    for (int64_t r0 = 0; r0 < Rp; r0 += 16) {
        int64_t p0 = 0, nr = R - r0 < 16 ? R - r0 : 16; /* rows past R are zero */
        /* the row sums from the transposed vectors (lane i = row r0 + i):
         * one accumulator, where 16 (one per row) spilled to the stack */
        v16 sum = {0};
        for (; p0 + 16 <= np; p0 += 16) {
            v16 t[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                t[i] = (v16){0};
                if (i < nr) t[i] = ld16(src + (r0 + i) * lds + p0);
            }
            tr16(t);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) st16(dst + (p0 + i) * ldt + r0, t[i]);
            sum += ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7])) +
                   (((t[8] + t[9]) + (t[10] + t[11])) + ((t[12] + t[13]) + (t[14] + t[15])));
        }
        if (rowsum && p0)
            for (int i = 0; i < nr; i++) rowsum[r0 + i] += sum[i];
        for (int64_t r = r0; r < r0 + 16; r++) { /* ragged pixels */
            const float *s = src + r * lds;
            double acc = 0;
            for (int64_t p = p0; p < np; p++) {
                float v = r < R ? s[p] : 0.0f;
                dst[p * ldt + r] = v;
                acc += v;
            }
            if (r < R && rowsum) rowsum[r] += acc;
        }
    }
}

void pwk_trans(const float *src, int64_t lds, int64_t R, int64_t np, float *dst, int64_t ldt, double *rowsum) {
    trans_any(src, lds, R, np, dst, ldt, rowsum);
}

/* ------------------------------------------------------------- dW */
AI void dw_body(const int NMV, const int NC, const float *dyT, int64_t ldt, const float *x, int64_t ldx, int64_t np,
                float *out, int64_t ldo, const float *xpf) {
    v16 acc[4][PW_DWC];
#pragma GCC unroll 4
    for (int j = 0; j < NMV; j++)
#pragma GCC unroll 6
        for (int c = 0; c < NC; c++) acc[j][c] = (v16){0};
    for (int64_t p0 = 0; p0 < np; p0 += 16) {
        if (xpf) /* the next channel block's rows, a line ahead of use */
#pragma GCC unroll 6
            for (int c = 0; c < PW_DWC; c++) __builtin_prefetch(xpf + c * ldx + p0, 0, 3);
        int64_t p1 = p0 + 16 < np ? p0 + 16 : np;
        for (int64_t p = p0; p < p1; p++) {
            v16 d[4];
#pragma GCC unroll 4
            for (int j = 0; j < NMV; j++) d[j] = ld16(dyT + p * ldt + 16 * j);
#pragma GCC unroll 6
            for (int c = 0; c < NC; c++) {
                float s = x[c * ldx + p];
#pragma GCC unroll 4
                for (int j = 0; j < NMV; j++) acc[j][c] += s * d[j];
            }
        }
    }
#pragma GCC unroll 6
    for (int c = 0; c < NC; c++)
#pragma GCC unroll 4
        for (int j = 0; j < NMV; j++) {
            float *o = out + c * ldo + 16 * j;
            st16(o, ld16(o) + acc[j][c]);
        }
}

#define D1(NMV, NC) case (NMV) * 8 + (NC): dw_body(NMV, NC, dyT, ldt, x, ldx, np, out, ldo, xpf); break;
#define DROW(NMV) D1(NMV, 1) D1(NMV, 2) D1(NMV, 3) D1(NMV, 4) D1(NMV, 5) D1(NMV, 6)

TC static void dw_any(int nmv, int nc, const float *dyT, int64_t ldt, const float *x, int64_t ldx, int64_t np,
                      float *out, int64_t ldo, const float *xpf) {
    switch (nmv * 8 + nc) {
        DROW(1) DROW(2) DROW(3) DROW(4)
        default: break;
    }
}

void pwk_dw(int nmv, int nc, const float *dyT, int64_t ldt, const float *x, int64_t ldx, int64_t np, float *out,
            int64_t ldo, const float *xpf) {
    dw_any(nmv, nc, dyT, ldt, x, ldx, np, out, ldo, xpf);
}
