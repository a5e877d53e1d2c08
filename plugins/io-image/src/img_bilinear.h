/* img_bilinear.h — the augmenter's last step in one pass: bilinear resize
 * of a box of an 8-bit HWC image to the sample size, left-right mirror,
 * and HWC -> CHW with the per-channel affine map (v - mean) * scale / std
 * into float planes (or raw uint8 planes).
 *
 * Definition (the same as img_resize's bilinear, bit for bit): OpenCV's
 * half-pixel-centre mapping f = (d + 0.5) * n_src / n_dst - 0.5, clamped
 * to [0, n_src - 1]; taps k = floor(f), k + 1 (the last column/row repeats
 * at the edge) with the second weight w = round(frac(f) * 2048) and the
 * first 2048 - w; the four products are summed exactly in integers and the
 * pixel is v = (sum + 2^21) >> 22, an 8-bit value.  Because the sum is
 * exact, computing it separably (each source row's horizontal taps once,
 * then the vertical blend) gives the same v as the interleaved form.
 * Float output is (float)v * mul_k + add_k (mul = scale / std,
 * add = -mean * mul), a product then a sum, as the scalar code rounds it.
 *
 * The horizontal taps (RGB: two dword gathers per 8 or 16 columns, a
 * 16-bit multiply-add per channel) and the vertical blend + normalisation
 * run on AVX-512 (F+BW) or AVX2 when the CPU has them (chosen once at run
 * time) and on scalar loops otherwise; all three give identical bytes.  An img_bilinear holds one thread's tap
 * tables and two row buffers sized at init: no allocation per image. */
#ifndef MXP_IO_IMAGE_IMG_BILINEAR_H
#define MXP_IO_IMAGE_IMG_BILINEAR_H

#include "img_codec.h"

#include <stdint.h>

typedef struct img_bilinear {
    int dw, dh, c;
    int32_t *xo0, *xo1;  /* dw: byte offsets of the two taps in a box row */
    int32_t *xw0, *xw1;  /* dw: their weights (sum 2048)                  */
    int32_t *xwp;        /* dw: both as int16 pairs (xw0 low, xw1 high)   */
    int32_t *yi, *yw;    /* dh: first source row, second row's weight     */
    int32_t *rows;       /* 2 rows of c planes of dw horizontal sums      */
} img_bilinear;

/* Scratch for dw x dh outputs of c (1 or 3) channels.  0, or -1 (memory). */
int img_bilinear_init(img_bilinear *b, int dw, int dh, int c);
void img_bilinear_fini(img_bilinear *b);

/* Resize box [x, y, w, h] (inside src, src->c == b->c) to b's size,
 * mirrored when mirror, into dst: c planes of dh x dw, float
 * (v * mul[k] + add[k]) when out_u8 is 0, else uint8 v. */
void img_bilinear_chw(img_bilinear *b, const img_u8 *src, const int box[4], int mirror, const float *mul,
                      const float *add, int out_u8, void *dst);

/* Which vertical kernel runs: 2 AVX-512F, 1 AVX2, 0 scalar.  The isa
 * argument of the _isa variant forces one (tests compare them); one the
 * CPU lacks falls back to the best it has. */
int img_bilinear_isa(void);
void img_bilinear_chw_isa(img_bilinear *b, const img_u8 *src, const int box[4], int mirror, const float *mul,
                          const float *add, int out_u8, void *dst, int isa);

#endif /* MXP_IO_IMAGE_IMG_BILINEAR_H */
