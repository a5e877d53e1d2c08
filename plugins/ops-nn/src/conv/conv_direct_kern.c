/* conv_direct_kern.c — the float32 register-blocked kernels of the direct
 * convolution's stride-1 path (conv_direct_fast.c):
 *
 *   dk_fwd: mb output channels x nv vectors of 16 pixels, accumulated over
 *     input channels and taps from an input whose every tap is a contiguous
 *     load at x + c*cs + off[k] (the kw-shifted layout of conv_direct_fast.c);
 *     weights packed [c][k][mb] so each tap broadcasts mb scalars.
 *   dk_dw: mb rows of dy x kb rows of (shifted) x, dot products along
 *     pixels summed over samples: the weight gradient as a GEMM whose
 *     operands are both contiguous along the reduction.
 *
 * Every (mb, nv) / (mb, kb) pair is its own fully unrolled instance (the
 * accumulators must live in registers), selected by a switch inside one
 * function; that function is compiled for AVX-512F, AVX2 and baseline x86-64
 * (target_clones, resolved at load) and reached through a plain wrapper (see
 * microkernel.c for why the clones stay static).  Under ASan the clones are
 * off.  No bounds checks here: callers guarantee every load is inside their
 * buffers (slack after each row). */
#include "conv_direct_fast.h"
#include "nn_simd.h"

#define AI static inline __attribute__((always_inline))
#define ld8(p) (*(const v8u *)(const void *)(p))
#define st8(p, v) (*(v8u *)(void *)(p) = (v))

AI void fwd_body(const int MB, const int NV, const float *x, int64_t cs, int64_t Cin, int64_t nk,
                 const int64_t *off, const float *wpk, const float *bias, float *out, int64_t ldo, int add) {
    v16 acc[DK_MB_MAX][DK_NV_MAX];
#pragma GCC unroll 8
    for (int i = 0; i < MB; i++) {
        float b = bias ? bias[i] : 0.0f;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[i][j] = (v16){0} + b;
    }
    for (int64_t c = 0; c < Cin; c++) {
        const float *xc = x + c * cs;
        const float *wc = wpk + c * nk * MB;
        for (int64_t k = 0; k < nk; k++) {
            const float *xk = xc + off[k];
            const float *w = wc + k * MB;
            v16 v[DK_NV_MAX];
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) v[j] = ld16(xk + 16 * j);
#pragma GCC unroll 8
            for (int i = 0; i < MB; i++) {
                float s = w[i];
#pragma GCC unroll 4
                for (int j = 0; j < NV; j++) acc[i][j] += s * v[j];
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MB; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) {
            float *o = out + i * ldo + 16 * j;
            if (add) st16(o, ld16(o) + acc[i][j]);
            else st16(o, acc[i][j]);
        }
}

#define F1(MB, NV) case (MB) * 8 + (NV): fwd_body(MB, NV, x, cs, Cin, nk, off, wpk, bias, out, ldo, add); break;
#define FROW(MB) F1(MB, 1) F1(MB, 2) F1(MB, 3) F1(MB, 4)

TC static void fwd_any(int mb, int nv, const float *x, int64_t cs, int64_t Cin, int64_t nk, const int64_t *off,
                       const float *wpk, const float *bias, float *out, int64_t ldo, int add) {
    switch (mb * 8 + nv) {
        FROW(1) FROW(2) FROW(3) FROW(4) FROW(5) FROW(6)
        F1(7, 1) F1(7, 2) F1(7, 3) F1(8, 1) F1(8, 2) F1(8, 3)
        default: break;
    }
}

void dk_fwd(int mb, int nv, const float *x, int64_t cs, int64_t Cin, int64_t nk, const int64_t *off,
            const float *wpk, const float *bias, float *out, int64_t ldo, int add) {
    fwd_any(mb, nv, x, cs, Cin, nk, off, wpk, bias, out, ldo, add);
}

/* Sum of the 16 lanes as a halving tree (4 shuffles and adds instead of 15
 * dependent scalar adds; the order differs from a serial sum only by
 * float rounding). */
AI float hsum16(v16 s) {
    v8 a = __builtin_shufflevector(s, s, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(s, s, 8, 9, 10, 11, 12, 13, 14, 15);
    v4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
    return (b[0] + b[2]) + (b[1] + b[3]);
}

AI void dw_body(const int MB, const int KB, const float *dy, int64_t ldy, int64_t dys, const float *x,
                const int64_t *roff, int64_t xs, int64_t N, int64_t nvec, float *res) {
    v16 acc[DK_DWM_MAX][DK_DWK_MAX];
#pragma GCC unroll 4
    for (int i = 0; i < MB; i++)
#pragma GCC unroll 6
        for (int r = 0; r < KB; r++) acc[i][r] = (v16){0};
    for (int64_t n = 0; n < N; n++) {
        const float *dn = dy + n * dys, *xn = x + n * xs;
        const float *xr[DK_DWK_MAX];
#pragma GCC unroll 6
        for (int r = 0; r < KB; r++) xr[r] = xn + roff[r];
        for (int64_t q = 0; q < 16 * nvec; q += 16) {
            v16 a[DK_DWM_MAX];
#pragma GCC unroll 4
            for (int i = 0; i < MB; i++) a[i] = ld16(dn + i * ldy + q);
#pragma GCC unroll 6
            for (int r = 0; r < KB; r++) {
                v16 b = ld16(xr[r] + q);
#pragma GCC unroll 4
                for (int i = 0; i < MB; i++) acc[i][r] += a[i] * b;
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MB; i++)
#pragma GCC unroll 6
        for (int r = 0; r < KB; r++) res[i * DK_DWK_MAX + r] = hsum16(acc[i][r]);
}

#define W1(MB, KB) case (MB) * 8 + (KB): dw_body(MB, KB, dy, ldy, dys, x, roff, xs, N, nvec, res); break;
#define WROW(MB) W1(MB, 1) W1(MB, 2) W1(MB, 3) W1(MB, 4) W1(MB, 5) W1(MB, 6)

TC static void dw_any(int mb, int kb, const float *dy, int64_t ldy, int64_t dys, const float *x, const int64_t *roff,
                      int64_t xs, int64_t N, int64_t nvec, float *res) {
    switch (mb * 8 + kb) {
        WROW(1) WROW(2) WROW(3) WROW(4)
        default: break;
    }
}

void dk_dw(int mb, int kb, const float *dy, int64_t ldy, int64_t dys, const float *x, const int64_t *roff,
           int64_t xs, int64_t N, int64_t nvec, float *res) {
    dw_any(mb, kb, dy, ldy, dys, x, roff, xs, N, nvec, res);
}

/* dx[(oh - ph + ki*dh)*W + ow - pw + kj*dw] += dcol[r*ldc + oh*Wo + ow] for the
 * rows r = (c, ki, kj) of one group (dx at its first channel), skipping
 * positions outside the image: the column-to-image step of the column data
 * gradient.  Rows are short (the output width), so the clones matter here
 * too: each segment becomes a few wide adds. */
TC static void col2im_any(float *dx, const float *dcol, int64_t ldc, int64_t K, int64_t kh, int64_t kw, int64_t H,
                          int64_t W, int64_t Ho, int64_t Wo, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    int64_t nk = kh * kw, Cg = K / nk;
    /* rows visited tap-major, channel-minor: consecutive segments land in
     * different planes, so a segment never reloads the partly overlapping
     * one just stored (a failed store-to-load forward costs more than the add) */
    for (int64_t t = 0; t < K; t++) {
        int64_t c = t % Cg, k = t / Cg, ki = k / kw, kj = k % kw, r = c * nk + k;
        int64_t owa = pw - kj * dw > 0 ? pw - kj * dw : 0, owz = W + pw - kj * dw < Wo ? W + pw - kj * dw : Wo;
        float *dxc = dx + c * H * W + (kj * dw - pw);
        const float *row = dcol + r * ldc;
        for (int64_t oh = 0; oh < Ho; oh++) {
            int64_t ih = oh - ph + ki * dh;
            if (ih < 0 || ih >= H) continue;
            float *d = dxc + ih * W + owa;
            const float *s = row + oh * Wo + owa;
            int64_t n = owz - owa, i = 0; /* explicit widths: no vectorizer prologue per short segment */
            for (; i + 16 <= n; i += 16) st16(d + i, ld16(d + i) + ld16(s + i));
            for (; i + 8 <= n; i += 8) st8(d + i, ld8(d + i) + ld8(s + i));
            for (; i < n; i++) d[i] += s[i];
        }
    }
}

void dk_col2im(float *dx, const float *dcol, int64_t ldc, int64_t K, int64_t kh, int64_t kw, int64_t H, int64_t W,
               int64_t Ho, int64_t Wo, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
    col2im_any(dx, dcol, ldc, K, kh, kw, H, W, Ho, Wo, ph, pw, dh, dw);
}

/* The kw-shifted copies (see conv_direct_fast.c).  Rows are short (the
 * output width), so each is copied with explicit wide moves. */
TC static void shift_any(float *buf, const float *src, int64_t Ct, int64_t Hs, int64_t Ws, int64_t top, int64_t left,
                         int64_t r0, int64_t R, int64_t Wout, int64_t kw, int64_t dw, int64_t S) {
    for (int64_t c = 0; c < Ct; c++) {
        const float *sc = src + c * Hs * Ws;
        for (int64_t kj = 0; kj < kw; kj++) {
            float *d = buf + (c * kw + kj) * S;
            int64_t col0 = kj * dw - left; /* source column of ow = 0 */
            int64_t a = -col0 > 0 ? -col0 : 0, z = Ws - col0 < Wout ? Ws - col0 : Wout;
            if (a > Wout) a = Wout;
            if (z < a) z = a;
            int64_t rb = top - r0, re = Hs + top - r0; /* rows r in [rb, re) have a source row */
            if (rb < 0) rb = 0;
            if (rb > R) rb = R;
            if (re > R) re = R;
            if (re < rb) re = rb;
            if (a == 0 && z == Wout && rb == 0 && re == R && Wout == 8) {
                /* every row inside the source, 8 wide (LeNet's conv2 forward):
                 * two rows per 16-float store, no per-row edge logic */
                const float *sr = sc + (r0 - top) * Ws + col0;
                int64_t r = 0;
                for (; r + 2 <= R; r += 2, sr += 2 * Ws) {
                    v8 lo = ld8(sr), hi = ld8(sr + Ws);
                    st16(d + r * 8, __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
                }
                if (r < R) st8(d + r * 8, ld8(sr));
                for (int64_t l = R * 8; l < S; l += 8) st8(d + l, (v8){0});
                continue;
            }
            memset(d, 0, (size_t)(rb * Wout) * sizeof(float));
            for (int64_t r = rb; r < re; r++) {
                float *dr = d + r * Wout;
                const float *sr = sc + (r0 + r - top) * Ws + col0;
                for (int64_t ow = 0; ow < a; ow++) dr[ow] = 0.0f;
                int64_t ow = a;
                for (; ow + 16 <= z; ow += 16) st16(dr + ow, ld16(sr + ow));
                for (; ow + 8 <= z; ow += 8) st8(dr + ow, ld8(sr + ow));
                for (; ow < z; ow++) dr[ow] = sr[ow];
                for (ow = z; ow < Wout; ow++) dr[ow] = 0.0f;
            }
            memset(d + re * Wout, 0, (size_t)(S - re * Wout) * sizeof(float));
        }
    }
}

void dk_shift(float *buf, const float *src, int64_t Ct, int64_t Hs, int64_t Ws, int64_t top, int64_t left,
              int64_t r0, int64_t R, int64_t Wout, int64_t kw, int64_t dw, int64_t S) {
    shift_any(buf, src, Ct, Hs, Ws, top, left, r0, R, Wout, kw, dw, S);
}
