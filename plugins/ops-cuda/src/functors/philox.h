/* philox.h — Philox4x32-10 (Salmon et al., SC'11) as a functor compiled by
 * nvcc and by the C compiler, and the Bernoulli draw the host's CPU
 * generator makes from it (runtime/src/resource/philox.c): value i of a
 * stream (key, first block counter c) is word i % 4 of the block function
 * at counter c + i / 4 (64-bit counter in words 0-1, words 2-3 zero), and a
 * Bernoulli(p) draw is 1 when (double)value < p * 2^32.  A gpu kernel that
 * computes value i this way produces the same numbers as the CPU does for
 * the same stream, so one seed gives one dropout mask on either device.
 * tests/unit/cuda/test_functors.c checks it against the runtime's. */
#ifndef OPS_CUDA_PHILOX_H
#define OPS_CUDA_PHILOX_H

#include "fn_common.h"

#include <stdint.h>

CUFN void cu_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                           uint32_t out[4]) {
    for (int r = 0; r < 10; r++) {
        if (r) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Value i of the stream (key, first block counter). */
CUFN uint32_t cu_philox_value(uint64_t key, uint64_t counter, uint64_t i) {
    uint64_t ctr = counter + (i >> 2);
    uint32_t v[4];
    cu_philox4x32_10((uint32_t)ctr, (uint32_t)(ctr >> 32), 0u, 0u, (uint32_t)key, (uint32_t)(key >> 32), v);
    return v[i & 3];
}

/* 1 with probability p: threshold = p * 2^32 computed by the caller in
 * double from the float p the CPU passes (see ops-nn's Dropout). */
CUFN int cu_bernoulli(uint32_t value, double threshold) { return (double)value < threshold; }

#endif /* OPS_CUDA_PHILOX_H */
