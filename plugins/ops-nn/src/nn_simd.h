/* nn_simd.h — what the pack's vector kernels share: GCC vector types of
 * float32 (aligned, and unaligned "u" variants for loads/stores at any
 * float offset), TC, the function-multiversioning attribute, and a
 * 16-lane sum in a fixed order.
 *
 * TC compiles a static kernel for AVX-512F, AVX2 and baseline x86-64 and
 * picks one at load time by CPU features, so the pack needs no -march and
 * loads on any x86-64.  Put it on static functions only, behind a plain
 * wrapper: a non-static target_clones function gets an exported (weak,
 * default-visibility) resolver despite -fvisibility=hidden, which
 * check-exports rejects.  Empty (one generic build) under AddressSanitizer
 * and with clang. */
#ifndef NN_SIMD_H
#define NN_SIMD_H

#include <string.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
#define TC __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TC
#endif

typedef float v16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4u __attribute__((vector_size(16), aligned(4), may_alias));

#define ld16(p) (*(const v16u *)(const void *)(p))
#define st16(p, v) (*(v16u *)(void *)(p) = (v))

/* The sum of v's 16 lanes: halves, then quarters, then pairs, the same
 * order in every clone and caller, so a sum does not depend on which
 * clone the CPU picked. */
static inline float nn_fold16(v16 v) {
    v8 a, b;
    memcpy(&a, &v, sizeof a);
    memcpy(&b, (const char *)&v + sizeof a, sizeof b);
    a += b;
    v4 c, d;
    memcpy(&c, &a, sizeof c);
    memcpy(&d, (const char *)&a + sizeof c, sizeof d);
    c += d;
    return (c[0] + c[2]) + (c[1] + c[3]);
}

#endif
