/* conv_strip_kern.c — the weight-gradient kernel of Convolution impl
 * "strip" (conv_strip_bwd.c) for unpadded stride-1 layers: the column
 * matrix is read straight from the input, no im2col.
 *
 * out[c*ldo + m] += sum over output rows r < rows and columns ow < Wo of
 *     dyT[(r*Wo + ow)*ldt + m] * xr[c][r*W + ow]
 * for m < 16*nmv (nmv 1..4) and c < nc (1..PW_DWC): xr[c] points at tap
 * c's first input pixel (channel, row offset ki*dh, column offset kj*dw),
 * so with stride 1 and no padding every pixel it reads exists.  A block of
 * 16*nmv x nc sums stays in AVX-512 registers over the whole chunk, dy's
 * vectors loaded once per pixel and the input broadcast (the pointwise
 * impl's pwk_dw with a 2-D walk instead of a contiguous column row).
 * Other CPUs take the same code through target_clones (correct, not
 * tuned). */
#include "conv_strip.h"
#include "nn_simd.h"

#define AI static inline __attribute__((always_inline))

AI void xdw_body(const int NMV, const int NC, const float *dyT, int64_t ldt, const float *const *xr, int64_t W,
                 int64_t rows, int64_t Wo, float *out, int64_t ldo) {
    v16 acc[4][PW_DWC];
#pragma GCC unroll 4
    for (int j = 0; j < NMV; j++)
#pragma GCC unroll 6
        for (int c = 0; c < NC; c++) acc[j][c] = (v16){0};
    for (int64_t r = 0; r < rows; r++) {
        const float *d = dyT + r * Wo * ldt;
        int64_t xo = r * W;
        for (int64_t ow = 0; ow < Wo; ow++) {
            v16 dv[4];
#pragma GCC unroll 4
            for (int j = 0; j < NMV; j++) dv[j] = ld16(d + ow * ldt + 16 * j);
#pragma GCC unroll 6
            for (int c = 0; c < NC; c++) {
                float s = xr[c][xo + ow];
#pragma GCC unroll 4
                for (int j = 0; j < NMV; j++) acc[j][c] += s * dv[j];
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

#define X1(NMV, NC) case (NMV) * 8 + (NC): xdw_body(NMV, NC, dyT, ldt, xr, W, rows, Wo, out, ldo); break;
#define XROW(NMV) X1(NMV, 1) X1(NMV, 2) X1(NMV, 3) X1(NMV, 4) X1(NMV, 5) X1(NMV, 6)

TC static void xdw_any(int nmv, int nc, const float *dyT, int64_t ldt, const float *const *xr, int64_t W,
                       int64_t rows, int64_t Wo, float *out, int64_t ldo) {
    switch (nmv * 8 + nc) {
        XROW(1) XROW(2) XROW(3) XROW(4)
        default: break;
    }
}

void sbk_dw_direct(int nmv, int nc, const float *dyT, int64_t ldt, const float *const *xr, int64_t W, int64_t rows,
                   int64_t Wo, float *out, int64_t ldo) {
    xdw_any(nmv, nc, dyT, ldt, xr, W, rows, Wo, out, ldo);
}
