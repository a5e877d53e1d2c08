/* conv_winograd_kern.c — vector kernels of the winograd Convolution impl:
 * the F(4x4,3x3) transforms of 16 tiles (or channels) at once, gathering
 * them from 16 row pointers with in-register transposes, the 8-filter
 * weight transform and the 8 x 16n register-blocked product (see
 * conv_winograd.h for the contracts).  No layout knowledge here: callers
 * say where each lane's rows are and where each frequency goes.
 *
 * Written with GCC vector extensions (64-byte vectors) and compiled for
 * AVX-512F, AVX2 and baseline x86-64 through target_clones, like
 * microkernel.c: the clones are static behind plain wrappers (a non-static
 * target_clones function would export its resolver), and under ASan or
 * clang they are plain functions.  The FMAs rely on pack.mk's
 * -ffp-contract=fast (-std=c11 alone turns contraction off). */
#include "conv_winograd.h"
#include "nn_simd.h"

#define LD(p) (*(const v16u *)(const void *)(p))
#define ST(p, v) (*(v16u *)(void *)(p) = (v))

/* r = Bᵀ d for one column of 6: the rows of Bᵀ are
 *   [4 0 -5 0 1 0] [0 -4 -4 1 1 0] [0 4 -4 -1 1 0]
 *   [0 -2 -1 2 1 0] [0 2 -1 -2 1 0] [0 4 0 -5 0 1] */
#define BT6(d0, d1, d2, d3, d4, d5, r0, r1, r2, r3, r4, r5) do { \
    v16 a_ = (d4) - 4.0f * (d2), b_ = (d3) - 4.0f * (d1);          \
    v16 c_ = (d4) - (d2), e_ = 2.0f * ((d3) - (d1));                \
    r0 = 4.0f * (d0) - 5.0f * (d2) + (d4);                          \
    r1 = a_ + b_; r2 = a_ - b_; r3 = c_ + e_; r4 = c_ - e_;         \
    r5 = 4.0f * (d1) - 5.0f * (d3) + (d5);                          \
} while (0)

/* o = Aᵀ m for 6 values: rows [1 1 1 1 1 0] [0 1 -1 2 -2 0] [0 1 1 4 4 0]
 * [0 1 -1 8 -8 1] */
#define AT4(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3) do { \
    v16 a_ = (m1) + (m2), b_ = (m1) - (m2), c_ = (m3) + (m4), d_ = (m3) - (m4); \
    o0 = (m0) + a_ + c_; o1 = b_ + 2.0f * d_; o2 = a_ + 4.0f * c_; o3 = b_ + 8.0f * d_ + (m5); \
} while (0)

/* o = A y for 4 values (A = (Aᵀ)ᵀ, 6x4) */
#define A6(y0, y1, y2, y3, o0, o1, o2, o3, o4, o5) do { \
    v16 e_ = (y0) + (y2), f_ = (y1) + (y3), g_ = (y0) + 4.0f * (y2), h_ = 2.0f * (y1) + 8.0f * (y3); \
    o0 = (y0); o1 = e_ + f_; o2 = e_ - f_; o3 = g_ + h_; o4 = g_ - h_; o5 = (y3); \
} while (0)

/* One 8 x (16*NV) block of C: 8*NV accumulators stay in registers over the
 * whole K loop (24 of the 32 zmm registers for NV = 3). */
#define GEMM_BLOCK(NV) do { \
    v16 c[8][NV]; \
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) \
            c[i][v] = acc ? (v16)LD(C + i * ldc + j + 16 * v) : (v16){0}; \
    for (int64_t k = 0; k < K; k++) { \
        const float *a = A + k * 8, *b = B + k * ldb + j; \
        v16 bv[NV]; \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) bv[v] = LD(b + 16 * v); \
        _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) \
            _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) c[i][v] += a[i] * bv[v]; \
    } \
    _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) \
        _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++) ST(C + i * ldc + j + 16 * v, c[i][v]); \
} while (0)

TC static void gemm8(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t n, int acc) {
    int64_t j = 0;
    for (; j + 48 <= n; j += 48) GEMM_BLOCK(3);
    if (n - j == 32) GEMM_BLOCK(2);
    else if (n - j == 16) GEMM_BLOCK(1);
}

/* Perfect shuffles (zip) of two vectors: the building block of the
 * in-register transposes below (vpermt2ps on AVX-512). */
#define ZLO(a, b) __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define ZHI(a, b) __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
/* The low (high) 8 lanes of a and of b, side by side; P4(o): lanes o,
 * o+4, ..., o+28 of a vector pair (a stride-4 phase of 32 floats). */
#define HALVES_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23)
#define HALVES_HI(a, b) __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31)
/* d[k], d[k + 1]: the low and the high halves of a and b side by side. */
#define PUT_HALVES(d, k, a, b) do { (d)[k] = HALVES_LO(a, b); (d)[(k) + 1] = HALVES_HI(a, b); } while (0)
#define P4(o) 0 + (o), 4 + (o), 8 + (o), 12 + (o), 16 + (o), 20 + (o), 24 + (o), 28 + (o)

/* The input transform's arithmetic once the 6x6 tiles are gathered into
 * d (d[i*6 + j]: row i, column j, one lane per tile): Bᵀ d B, frequency
 * f stored at out + f*os.  Shared by the two gathers below. */
#define IN_TF_FINISH(d, out, os) do {                                                                              \
    v16 t_[36];                                                                                                    \
    _Pragma("GCC unroll 16") for (int j_ = 0; j_ < 6; j_++)                                                        \
        BT6(d[0 * 6 + j_], d[1 * 6 + j_], d[2 * 6 + j_], d[3 * 6 + j_], d[4 * 6 + j_], d[5 * 6 + j_],              \
            t_[0 * 6 + j_], t_[1 * 6 + j_], t_[2 * 6 + j_], t_[3 * 6 + j_], t_[4 * 6 + j_], t_[5 * 6 + j_]);        \
    _Pragma("GCC unroll 16") for (int i_ = 0; i_ < 6; i_++) {                                                      \
        v16 r0_, r1_, r2_, r3_, r4_, r5_;                                                                          \
        BT6(t_[i_ * 6 + 0], t_[i_ * 6 + 1], t_[i_ * 6 + 2], t_[i_ * 6 + 3], t_[i_ * 6 + 4], t_[i_ * 6 + 5],        \
            r0_, r1_, r2_, r3_, r4_, r5_);                                                                         \
        float *o_ = (out) + (int64_t)(i_ * 6) * (os);                                                              \
        ST(o_, r0_); ST(o_ + (os), r1_); ST(o_ + 2 * (os), r2_);                                                   \
        ST(o_ + 3 * (os), r3_); ST(o_ + 4 * (os), r4_); ST(o_ + 5 * (os), r5_);                                    \
    }                                                                                                              \
} while (0)

/* Gather + transform: row i of lane l's 6x6 tile is src[l] + i*rs (8
 * floats readable).  Per row: two lanes per vector, then three zip rounds
 * and a last zip give the columns with one lane per tile: ~38 shuffles
 * instead of 96 scalar loads and stores. */
TC static void in_tf16(const float *const *src, int64_t rs, float *out, int64_t os) {
    v16 d[36];
    _Pragma("GCC unroll 16") for (int i = 0; i < 6; i++) {
        v16 r[8], n[8];
        _Pragma("GCC unroll 16") for (int q = 0; q < 8; q++) {
            v8 lo = *(const v8u *)(const void *)(src[2 * q] + i * rs), hi = *(const v8u *)(const void *)(src[2 * q + 1] + i * rs);
            r[q] = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        }
        _Pragma("GCC unroll 16") for (int round = 0; round < 3; round++) {
            _Pragma("GCC unroll 16") for (int k = 0; k < 4; k++) { n[2 * k] = ZLO(r[k], r[k + 4]); n[2 * k + 1] = ZHI(r[k], r[k + 4]); }
            _Pragma("GCC unroll 16") for (int k = 0; k < 8; k++) r[k] = n[k];
        }
        _Pragma("GCC unroll 16") for (int k = 0; k < 3; k++) { d[i * 6 + 2 * k] = ZLO(r[k], r[k + 4]); d[i * 6 + 2 * k + 1] = ZHI(r[k], r[k + 4]); }
    }
    IN_TF_FINISH(d, out, os);
}

/* The transform of in_tf16 for two runs of 8 horizontally adjacent tiles:
 * lane l < 8 is the tile at a + 4*l, lane 8 + l the one at b + 4*l (rows
 * rs apart, 36 floats readable per row).  The columns come from whole-row
 * loads by stride-4 permutes (phase j of 8 tiles = columns 4*l + j): per
 * row 6 permutes and 6 half-swaps, 72 shuffles for the 16 tiles against
 * in_tf16's ~228 (one pair of lanes per load, then transposes), which on
 * ResNet-20's 32x32 layers left the shuffle port the bottleneck of the
 * input side.  Same arithmetic as in_tf16, so the same results. */
TC static void in_tf16_rows8(const float *a, const float *b, int64_t rs, float *out, int64_t os) {
    v16 d[36];
    _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) {
        const float *ra = a + i * rs, *rb = b + i * rs;
        v16 a0 = LD(ra), a1 = LD(ra + 16), a2 = LD(ra + 4), a3 = LD(ra + 20);
        v16 b0 = LD(rb), b1 = LD(rb + 16), b2 = LD(rb + 4), b3 = LD(rb + 20);
        /* lanes 0-7: phase j, 8-15: phase j+1, of a's or b's 8 tiles */
        v16 xa01 = __builtin_shufflevector(a0, a1, P4(0), P4(1)), xb01 = __builtin_shufflevector(b0, b1, P4(0), P4(1));
        v16 xa23 = __builtin_shufflevector(a0, a1, P4(2), P4(3)), xb23 = __builtin_shufflevector(b0, b1, P4(2), P4(3));
        v16 xa45 = __builtin_shufflevector(a2, a3, P4(0), P4(1)), xb45 = __builtin_shufflevector(b2, b3, P4(0), P4(1));
        PUT_HALVES(d, i * 6 + 0, xa01, xb01);
        PUT_HALVES(d, i * 6 + 2, xa23, xb23);
        PUT_HALVES(d, i * 6 + 4, xa45, xb45);
    }
    IN_TF_FINISH(d, out, os);
}

/* Q4(o): lanes o, o+4, o+8, o+12 (phase o of 4 tiles in one vector; o + 16
 * picks from the second operand of a shuffle). */
#define Q4(o) 0 + (o), 4 + (o), 8 + (o), 12 + (o)

/* The transform of in_tf16 for four runs of 4 horizontally adjacent tiles
 * (every group of a 16-wide map, such as ResNet-20's 32-channel stage):
 * lane 4*r + l is the tile at p[r] + 4*l (rows rs apart, 20 floats
 * readable per row).  Per row and run two loads (columns 0-15 and 4-19);
 * phase j of a run's 4 tiles is lanes j, j+4, j+8, j+12 of one of them, two
 * runs' phase pairs come from one two-source permute, and half-swaps put
 * the four runs side by side: 72 shuffles for the 16 tiles against
 * in_tf16's ~228.  Same arithmetic as in_tf16, so the same results. */
TC static void in_tf16_rows4(const float *const *p, int64_t rs, float *out, int64_t os) {
    v16 d[36];
    _Pragma("GCC unroll 6") for (int i = 0; i < 6; i++) {
        const float *ra = p[0] + i * rs, *rb = p[1] + i * rs, *rc = p[2] + i * rs, *rd = p[3] + i * rs;
        v16 a0 = LD(ra), a1 = LD(ra + 4), b0 = LD(rb), b1 = LD(rb + 4);
        v16 c0 = LD(rc), c1 = LD(rc + 4), e0 = LD(rd), e1 = LD(rd + 4);
        /* lanes 0-3: phase j of run a (c), 4-7 of b (d), 8-11 phase j+1 of a (c), 12-15 of b (d) */
        v16 ab01 = __builtin_shufflevector(a0, b0, Q4(0), Q4(16), Q4(1), Q4(17));
        v16 cd01 = __builtin_shufflevector(c0, e0, Q4(0), Q4(16), Q4(1), Q4(17));
        v16 ab23 = __builtin_shufflevector(a0, b0, Q4(2), Q4(18), Q4(3), Q4(19));
        v16 cd23 = __builtin_shufflevector(c0, e0, Q4(2), Q4(18), Q4(3), Q4(19));
        v16 ab45 = __builtin_shufflevector(a1, b1, Q4(0), Q4(16), Q4(1), Q4(17));
        v16 cd45 = __builtin_shufflevector(c1, e1, Q4(0), Q4(16), Q4(1), Q4(17));
        PUT_HALVES(d, i * 6 + 0, ab01, cd01);
        PUT_HALVES(d, i * 6 + 2, ab23, cd23);
        PUT_HALVES(d, i * 6 + 4, ab45, cd45);
    }
    IN_TF_FINISH(d, out, os);
}

/* Output transform with a row-major result: out[r*64 + l*4 + c] =
 * (Aᵀ M A)[r][c] of lane l, so row r of 16 consecutive tiles is 64
 * contiguous floats (two zip rounds per row instead of the four of a full
 * 16x16 transpose). */
TC static void out_tf16r(const float *in, int64_t is, float *out) {
    v16 t[24], r[16];
    _Pragma("GCC unroll 16") for (int j = 0; j < 6; j++) {
        v16 m0 = LD(in + (0 * 6 + j) * is), m1 = LD(in + (1 * 6 + j) * is), m2 = LD(in + (2 * 6 + j) * is);
        v16 m3 = LD(in + (3 * 6 + j) * is), m4 = LD(in + (4 * 6 + j) * is), m5 = LD(in + (5 * 6 + j) * is);
        AT4(m0, m1, m2, m3, m4, m5, t[0 * 6 + j], t[1 * 6 + j], t[2 * 6 + j], t[3 * 6 + j]);
    }
    _Pragma("GCC unroll 16") for (int q = 0; q < 4; q++)
        AT4(t[q * 6 + 0], t[q * 6 + 1], t[q * 6 + 2], t[q * 6 + 3], t[q * 6 + 4], t[q * 6 + 5],
            r[q * 4 + 0], r[q * 4 + 1], r[q * 4 + 2], r[q * 4 + 3]);
    _Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
        /* a: c0/c2 of tiles 0-7, b: of tiles 8-15; c, d: c1/c3 */
        v16 a = ZLO(r[q * 4 + 0], r[q * 4 + 2]), b = ZHI(r[q * 4 + 0], r[q * 4 + 2]);
        v16 c = ZLO(r[q * 4 + 1], r[q * 4 + 3]), d = ZHI(r[q * 4 + 1], r[q * 4 + 3]);
        float *o = out + q * 64;
        ST(o, ZLO(a, c)); ST(o + 16, ZHI(a, c)); ST(o + 32, ZLO(b, d)); ST(o + 48, ZHI(b, d));
    }
}

/* The dy transform's arithmetic once the 4x4 tiles are gathered into d
 * (d[i*4 + c]: row i, column c, one lane per tile): A d Aᵀ, lanes 0-7 of
 * frequency f to lo + f*os, lanes 8-15 to lo + hi + f*os.  Shared by the
 * two gathers below. */
#define DY_TF_FINISH(d, lo, hi, os) do {                                                                           \
    v16 t_[24];                                                                                                    \
    _Pragma("GCC unroll 4") for (int c_ = 0; c_ < 4; c_++)                                                         \
        A6(d[0 * 4 + c_], d[1 * 4 + c_], d[2 * 4 + c_], d[3 * 4 + c_],                                             \
           t_[0 * 4 + c_], t_[1 * 4 + c_], t_[2 * 4 + c_], t_[3 * 4 + c_], t_[4 * 4 + c_], t_[5 * 4 + c_]);        \
    _Pragma("GCC unroll 6") for (int i_ = 0; i_ < 6; i_++) {                                                       \
        v16 o_[6];                                                                                                 \
        A6(t_[i_ * 4 + 0], t_[i_ * 4 + 1], t_[i_ * 4 + 2], t_[i_ * 4 + 3], o_[0], o_[1], o_[2], o_[3], o_[4], o_[5]); \
        _Pragma("GCC unroll 6") for (int j_ = 0; j_ < 6; j_++) {                                                   \
            float *dst_ = (lo) + (int64_t)(i_ * 6 + j_) * (os);                                                    \
            *(v8u *)(void *)dst_ = __builtin_shufflevector(o_[j_], o_[j_], 0, 1, 2, 3, 4, 5, 6, 7);                \
            *(v8u *)(void *)(dst_ + (hi)) = __builtin_shufflevector(o_[j_], o_[j_], 8, 9, 10, 11, 12, 13, 14, 15); \
        }                                                                                                          \
    }                                                                                                              \
} while (0)

/* dy gather + transform: row r of lane l's 4x4 tile is src[l] + r*rs (8
 * floats readable); lanes 0-7 of frequency xi go to lo + xi*os, lanes
 * 8-15 to lo + hi + xi*os (two 8-channel blocks of the weight gradient). */
TC static void dy_tf16(const float *const *src, int64_t rs, float *lo, int64_t hi, int64_t os) {
    v16 d[16];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        v16 r[8], n[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
            v8 a = *(const v8u *)(const void *)(src[2 * q] + i * rs), b = *(const v8u *)(const void *)(src[2 * q + 1] + i * rs);
            r[q] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        }
        _Pragma("GCC unroll 3") for (int round = 0; round < 3; round++) {
            _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) { n[2 * k] = ZLO(r[k], r[k + 4]); n[2 * k + 1] = ZHI(r[k], r[k + 4]); }
            _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) r[k] = n[k];
        }
        _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++) { d[i * 4 + 2 * k] = ZLO(r[k], r[k + 4]); d[i * 4 + 2 * k + 1] = ZHI(r[k], r[k + 4]); }
    }
    DY_TF_FINISH(d, lo, hi, os);
}

/* dy_tf16 for two runs of 8 horizontally adjacent 4x4 tiles (lane l < 8
 * at a + 4*l, lane 8 + l at b + 4*l; rows rs apart, 32 floats readable
 * per row): the columns by stride-4 permutes of whole rows, 32 shuffles
 * for the 16 tiles against dy_tf16's ~144.  Same arithmetic. */
TC static void dy_tf16_rows8(const float *a, const float *b, int64_t rs, float *lo, int64_t hi, int64_t os) {
    v16 d[16];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        const float *ra = a + i * rs, *rb = b + i * rs;
        v16 a0 = LD(ra), a1 = LD(ra + 16), b0 = LD(rb), b1 = LD(rb + 16);
        v16 xa01 = __builtin_shufflevector(a0, a1, P4(0), P4(1)), xb01 = __builtin_shufflevector(b0, b1, P4(0), P4(1));
        v16 xa23 = __builtin_shufflevector(a0, a1, P4(2), P4(3)), xb23 = __builtin_shufflevector(b0, b1, P4(2), P4(3));
        PUT_HALVES(d, i * 4 + 0, xa01, xb01);
        PUT_HALVES(d, i * 4 + 2, xa23, xb23);
    }
    DY_TF_FINISH(d, lo, hi, os);
}

/* dy_tf16 for four runs of 4 horizontally adjacent 4x4 tiles (lane
 * 4*r + l at p[r] + 4*l; rows rs apart, 16 floats readable per row): one
 * load per row and run, 32 shuffles for the 16 tiles against dy_tf16's
 * ~144.  Same arithmetic. */
TC static void dy_tf16_rows4(const float *const *p, int64_t rs, float *lo, int64_t hi, int64_t os) {
    v16 d[16];
    _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
        v16 a = LD(p[0] + i * rs), b = LD(p[1] + i * rs), c = LD(p[2] + i * rs), e = LD(p[3] + i * rs);
        v16 ab01 = __builtin_shufflevector(a, b, Q4(0), Q4(16), Q4(1), Q4(17));
        v16 cd01 = __builtin_shufflevector(c, e, Q4(0), Q4(16), Q4(1), Q4(17));
        v16 ab23 = __builtin_shufflevector(a, b, Q4(2), Q4(18), Q4(3), Q4(19));
        v16 cd23 = __builtin_shufflevector(c, e, Q4(2), Q4(18), Q4(3), Q4(19));
        PUT_HALVES(d, i * 4 + 0, ab01, cd01);
        PUT_HALVES(d, i * 4 + 2, ab23, cd23);
    }
    DY_TF_FINISH(d, lo, hi, os);
}

void wino_dy_tf16_rows4(const float *const *p, int64_t rs, float *lo, int64_t hi, int64_t os) {
    dy_tf16_rows4(p, rs, lo, hi, os);
}
void wino_dy_tf16(const float *const *src, int64_t rs, float *lo, int64_t hi, int64_t os) { dy_tf16(src, rs, lo, hi, os); }
void wino_dy_tf16_rows8(const float *a, const float *b, int64_t rs, float *lo, int64_t hi, int64_t os) {
    dy_tf16_rows8(a, b, rs, lo, hi, os);
}
/* u = G g for 3 values: rows [1/4 0 0] [-1/6 -1/6 -1/6] [-1/6 1/6 -1/6]
 * [1/24 1/12 1/6] [1/24 -1/12 1/6] [0 0 1] */
#define G6(g0, g1, g2, u0, u1, u2, u3, u4, u5) do { \
    u0 = 0.25f * (g0); u1 = -((g0) + (g1) + (g2)) * (1.0f / 6.0f); u2 = -((g0) - (g1) + (g2)) * (1.0f / 6.0f); \
    u3 = (g0) * (1.0f / 24.0f) + (g1) * (1.0f / 12.0f) + (g2) * (1.0f / 6.0f); \
    u4 = (g0) * (1.0f / 24.0f) - (g1) * (1.0f / 12.0f) + (g2) * (1.0f / 6.0f); u5 = (g2); \
} while (0)

TC static void wt_tf8(const float *k, float *dst, int64_t xs) {
    v8 g[9], t[6][3], u[6][6];
    for (int q = 0; q < 9; q++) g[q] = *(const v8u *)(const void *)(k + q * 8);
    for (int c = 0; c < 3; c++) G6(g[c], g[3 + c], g[6 + c], t[0][c], t[1][c], t[2][c], t[3][c], t[4][c], t[5][c]);
    for (int r = 0; r < 6; r++) G6(t[r][0], t[r][1], t[r][2], u[r][0], u[r][1], u[r][2], u[r][3], u[r][4], u[r][5]);
    for (int xi = 0; xi < 36; xi++) *(v8u *)(void *)(dst + xi * xs) = u[xi / 6][xi % 6];
}

void wino_wt_tf8(const float *k, float *dst, int64_t xs) { wt_tf8(k, dst, xs); }
void wino_in_tf16(const float *const *src, int64_t rs, float *out, int64_t os) { in_tf16(src, rs, out, os); }
void wino_in_tf16_rows8(const float *a, const float *b, int64_t rs, float *out, int64_t os) {
    in_tf16_rows8(a, b, rs, out, os);
}
void wino_in_tf16_rows4(const float *const *p, int64_t rs, float *out, int64_t os) { in_tf16_rows4(p, rs, out, os); }
void wino_out_tf16r(const float *in, int64_t is, float *out) { out_tf16r(in, is, out); }
void wino_gemm8(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t n, int acc) {
    gemm8(K, A, B, ldb, C, ldc, n, acc);
}
