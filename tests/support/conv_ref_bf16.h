/* conv_ref_bf16.h — float64 reference of a 2-D NCHW Convolution (forward,
 * data, weight and bias gradients) on bfloat16 values, for the tests of the
 * bf16 Convolution impls (test_bf16, test_bf16_conv3x3).  Every product of
 * two bf16 values is exact in double; beside each reference value it sums
 * the magnitudes of its terms, from which a test derives its rounding
 * tolerance. */
#ifndef CONV_REF_BF16_H
#define CONV_REF_BF16_H

#include <stdint.h>

typedef struct conv_ref_geom {
    int64_t N, C, H, W;  /* input                                  */
    int64_t M, k, s, p;  /* filters, square kernel, stride, pad     */
    int64_t G, d;        /* groups, dilation (both >= 1)            */
    int64_t Ho, Wo;      /* output map                              */
} conv_ref_geom;

/* ref and mag hold ny + nx + nw + M doubles each, zeroed by the caller,
 * laid out y | dx | dW | db (ny = N·M·Ho·Wo, nx = N·C·H·W,
 * nw = M·(C/G)·k·k); b may be NULL (no bias: y starts at 0). */
void conv_ref_bf16(const conv_ref_geom *c, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                   const uint16_t *dy, double *ref, double *mag);

/* Element i of a bf16 array, exactly, as a double. */
double bf16_at(const uint16_t *p, int64_t i);

/* n bf16 values uniform in [-1, 1) (fh_rand, truncated to bf16). */
void bf16_fill_uniform(void *p, int64_t n, uint64_t *rng);

/* Does this CPU have avx512_bf16 (CPUID leaf 7: avx512f, subleaf 1 bit 5)? */
int cpu_has_avx512bf16(void);

#endif
