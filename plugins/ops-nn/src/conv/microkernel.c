/* microkernel.c — the float32 8x16 register-blocked kernel of the direct
 * convolution's 1x1 path (taps at offsets `off`; the stride-1 k>1 paths
 * have their own kernels in conv_direct_kern.c, winograd in
 * conv_winograd_kern.c):
 *   out[i*ld + l] = sum_c sum_k wpk[(c*nk + k)*8 + i] * x[c*plane + off[k] + l]
 * for i < 8, l < 16.  Compiled for AVX-512F, AVX2 and baseline x86-64
 * (target_clones), chosen at load time by CPU features.  The clones are
 * static behind a plain wrapper: a non-static target_clones function gets
 * an exported (weak, default-visibility) resolver despite
 * -fvisibility=hidden, which check-exports rejects. */
#include "conv.h"
#include "nn_simd.h"

TC static void mk_8x16(const float *x, int64_t plane, int64_t Cg, int64_t nk, const int64_t *off,
                       const float *wpk, float *out, int64_t ld) {
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    for (int64_t c = 0; c < Cg; c++) {
        const float *xc = x + c * plane;
        const float *wc = wpk + c * nk * 8;
        for (int64_t k = 0; k < nk; k++) {
            v16 v = ld16(xc + off[k]);
            const float *w = wc + k * 8;
            a0 += w[0] * v; a1 += w[1] * v; a2 += w[2] * v; a3 += w[3] * v;
            a4 += w[4] * v; a5 += w[5] * v; a6 += w[6] * v; a7 += w[7] * v;
        }
    }
    st16(out, a0); st16(out + ld, a1); st16(out + 2 * ld, a2); st16(out + 3 * ld, a3);
    st16(out + 4 * ld, a4); st16(out + 5 * ld, a5); st16(out + 6 * ld, a6); st16(out + 7 * ld, a7);
}

void conv_mk_8x16(const float *x, int64_t plane, int64_t Cg, int64_t nk, const int64_t *off,
                  const float *wpk, float *out, int64_t ld) {
    mk_8x16(x, plane, Cg, nk, off, wpk, out, ld);
}
