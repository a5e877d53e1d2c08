/* nn_exp.h — exp of a non-positive float32 without libm, for loops that
 * must vectorize (activation.c's tanh and sigmoid, softmax.c's float32
 * rows): y = n ln2 + r (n = round(y / ln2), ln2 in two parts so r is exact
 * to float, |r| <= ln2/2), e^r by a degree-6 polynomial (relative error
 * 2.6e-9 in exact arithmetic; coefficients fitted by weighted least
 * squares on Chebyshev nodes), times 2^n built in the exponent bits.
 * Invariant: the argument is in [-87, 0] (callers clamp it; a NaN or a
 * smaller value would build a wrong exponent). */
#ifndef NN_EXP_H
#define NN_EXP_H

#include <stdint.h>
#include <string.h>

/* Compiled as its callers' vector loops are (no-trapping-math: see
 * activation.c), so GCC inlines it into them. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
static inline float exp_nonpos_f32(float y) { /* y in [-87, 0] */
    /* n = round(y / ln2) by adding 1.5 * 2^23 (the low bits then hold n). */
    float t = y * 1.44269504088896341f + 12582912.0f;
    int32_t tb;
    memcpy(&tb, &t, sizeof tb);
    int32_t n = tb - 0x4B400000;
    float fn = t - 12582912.0f;
    float r = (y - fn * 0.693145751953125f) - fn * 1.42860676533018e-06f;
    float p = 1.382942059e-3f;
    p = p * r + 8.37477152e-3f;
    p = p * r + 4.166835803e-2f;
    p = p * r + 1.666642083e-1f;
    p = p * r + 4.999999149e-1f;
    p = p * r + 1.000000036f;
    p = p * r + 1.0f;
    int32_t bits = (n + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
#pragma GCC pop_options

#endif
