/* bf16_vec.h — 16 bfloat16 values at a time as float32 lanes, for the
 * memory-bound bf16 kernels (BatchNorm, ReLU): GCC vector extensions only,
 * so the same code compiles for AVX-512 (one VPMOVZXWD + shift to widen,
 * VPMOVDW to narrow), AVX2 and baseline x86-64 under nn_simd.h's TC, and
 * for any other target.  Narrowing rounds to nearest even and quiets NaN
 * (sign kept), the rule of nn_f32_to_bf16 (bf16/bf16.h), so vector and
 * scalar tails give the same bits. */
#ifndef NN_BF16_VEC_H
#define NN_BF16_VEC_H

#include "nn_simd.h"
#include "bf16/bf16.h"

#include <string.h>

typedef uint16_t h16 __attribute__((vector_size(32)));
typedef uint32_t w16 __attribute__((vector_size(64)));
typedef int32_t i16v __attribute__((vector_size(64)));

/* 16 bf16 values at p (any alignment) as float32.  Macros, not
 * functions: a function passing or returning a 64-byte vector warns
 * (-Wpsabi) in the baseline clone. */
#define ldh16(p) __extension__({                                              \
    h16 h_;                                                                   \
    memcpy(&h_, (p), sizeof h_);                                              \
    w16 w_ = __builtin_convertvector(h_, w16) << 16;                          \
    v16 f_;                                                                   \
    memcpy(&f_, &w_, sizeof f_);                                              \
    f_;                                                                       \
})

/* f rounded to bf16 (nearest even, NaN quieted), stored at p. */
#define sth16(p, f) do {                                                      \
    v16 v_ = (f);                                                             \
    w16 x_;                                                                   \
    memcpy(&x_, &v_, sizeof x_);                                              \
    w16 nan_ = (w16)((x_ & 0x7fffffffu) > 0x7f800000u);                       \
    w16 r_ = x_ + 0x7fffu + ((x_ >> 16) & 1u);                                \
    r_ = (r_ & ~nan_) | ((x_ | 0x400000u) & nan_);                            \
    h16 h_ = __builtin_convertvector(r_ >> 16, h16);                          \
    memcpy((p), &h_, sizeof h_);                                              \
} while (0)

#endif
