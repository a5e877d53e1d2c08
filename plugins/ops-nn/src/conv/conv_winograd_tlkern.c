/* conv_winograd_tlkern.c — the per-frequency product of the winograd
 * weight gradient with the tiles in the vector lanes (conv_winograd_wgrad.c
 * runs it for layers with few channels):
 *   dU[m][c] += Σ_t D[m][t] · V[c][t]
 * for one frequency, D and V rows holding one channel's transformed tiles.
 * The channel-in-lanes product (wino_gemm8 with 16 input channels as the
 * vector) needs 9 loads per 8 FMAs at 16 channels and is load-bound; here
 * a 4x4 block of (m, c) pairs keeps 16 accumulators of 16 tiles each in
 * registers, 8 loads per 16 FMAs, and reduces them across the lanes once
 * per block (a 4-round transpose-add tree, 15 adds) at the end of the
 * tile loop.  So the cost of the reduction shrinks with the chunk's tile
 * count, and the caller's chunks are long.
 *
 * No layout knowledge beyond that: the caller pads both channel counts to
 * multiples of 4 with zero rows (or rows whose product is zero) and the
 * tile count to a multiple of 16.  Compiled for AVX-512F, AVX2 and
 * baseline x86-64 through target_clones (nn_simd.h); -ffp-contract=fast
 * (pack.mk) turns the multiply-adds into FMAs. */
#include "conv_winograd.h"
#include "nn_simd.h"

#define LD(p) (*(const v16u *)(const void *)(p))

/* Lane q of *out = Σ over the lanes of a[q] (q < 16).  Pointers, not a
 * v16 return value: the baseline clone would change the ABI. */
#define SH(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
static inline __attribute__((always_inline)) void hsum16(const v16 *a, v16 *out) {
    v16 b[8], c[4], d[2];
    for (int k = 0; k < 8; k++) /* lanes 0-7: a[k]'s halves, 8-15: a[k+8]'s */
        b[k] = SH(a[k], a[k + 8], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               SH(a[k], a[k + 8], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    for (int k = 0; k < 4; k++) /* quarters: a[k], a[k+4], a[k+8], a[k+12] */
        c[k] = SH(b[k], b[k + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
               SH(b[k], b[k + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    for (int k = 0; k < 2; k++) /* pairs: a[k], a[k+2], ..., a[k+14] */
        d[k] = SH(c[k], c[k + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
               SH(c[k], c[k + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    *out = SH(d[0], d[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
           SH(d[0], d[1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}

TC static void tl_product(int64_t Mb, int64_t Cb, int64_t ld, const float *D, const float *V, float *dU, int64_t ldu) {
    for (int64_t m0 = 0; m0 < Mb; m0 += 4)
        for (int64_t c0 = 0; c0 < Cb; c0 += 4) {
            const float *d = D + m0 * ld, *v = V + c0 * ld;
            v16 acc[16];
            _Pragma("GCC unroll 16") for (int q = 0; q < 16; q++) acc[q] = (v16){0};
            for (int64_t k = 0; k < ld; k += 16) {
                v16 a[4], b[4];
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) { a[i] = LD(d + i * ld + k); b[i] = LD(v + i * ld + k); }
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)
                    _Pragma("GCC unroll 4") for (int jj = 0; jj < 4; jj++) acc[i * 4 + jj] += a[i] * b[jj];
            }
            v16 s;
            hsum16(acc, &s);
            float *u = dU + m0 * ldu + c0;
            *(v4u *)(void *)u += __builtin_shufflevector(s, s, 0, 1, 2, 3);
            *(v4u *)(void *)(u + ldu) += __builtin_shufflevector(s, s, 4, 5, 6, 7);
            *(v4u *)(void *)(u + 2 * ldu) += __builtin_shufflevector(s, s, 8, 9, 10, 11);
            *(v4u *)(void *)(u + 3 * ldu) += __builtin_shufflevector(s, s, 12, 13, 14, 15);
        }
}

void wino_tl_product(int64_t Mb, int64_t Cb, int64_t ld, const float *D, const float *V, float *dU, int64_t ldu) {
    tl_product(Mb, Cb, ld, D, V, dU, ldu);
}
