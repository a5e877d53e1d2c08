/* bf16_convert.c — contiguous float32 <-> bfloat16 array conversion for
 * ob_copy (Cast, amp_cast and every other copy between the two dtypes):
 * float32 -> bf16 rounds to nearest even and keeps NaN a (quiet) NaN with
 * its sign, bit for bit the rule of the scalar ob_store; bf16 -> float32
 * is exact.  Branch-free loops the compiler vectorises, one clone per ISA
 * (target_clones, resolved at load; static behind plain wrappers so no
 * resolver is exported). */
#include "common.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define OB_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OB_CLONES
#endif

OB_CLONES static void narrow(const uint32_t *restrict src, uint16_t *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x = src[i];
        uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
        uint32_t quiet = x | 0x400000u;
        dst[i] = (uint16_t)(((x & 0x7fffffffu) > 0x7f800000u ? quiet : rounded) >> 16);
    }
}

OB_CLONES static void widen(const uint16_t *restrict src, uint32_t *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = (uint32_t)src[i] << 16;
}

void ob_f32_to_bf16_n(const void *src, void *dst, int64_t n) { narrow(src, dst, n); }
void ob_bf16_to_f32_n(const void *src, void *dst, int64_t n) { widen(src, dst, n); }
