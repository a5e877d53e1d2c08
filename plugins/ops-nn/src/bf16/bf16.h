/* bf16/bf16.h — bfloat16 kernels of the ops-nn pack: the kernel paths
 * (chosen at run time by CPUID, forced by MXP_BF16_KERNEL), a bf16 x bf16
 * -> fp32 GEMM over those paths, element conversions, and the bf16
 * Convolution and FullyConnected impls built on them.
 *
 * Paths, fastest first:
 *   amx         AMX tiles (TDPBF16PS), when CPUID shows amx_tile + amx_bf16,
 *               XCR0 enables tile state and the kernel grants it
 *               (arch_prctl ARCH_REQ_XCOMP_PERM);
 *   avx512bf16  VDPBF16PS on 512-bit vectors (CPUID avx512_bf16);
 *   avx512f     the same packed micro-kernel with each bf16 pair widened to
 *               fp32 by shifts and two FMAs (any AVX-512F CPU);
 *   fp32        convert both operands to fp32 and call the fp32 GEMM
 *               (OpenBLAS sgemm through nn_gemm_par): any x86-64.
 * "auto" (the default) takes the first the CPU has in that order (avx512f
 * before fp32: on a Sapphire-Rapids-class CPU without avx512_bf16 it ran
 * LeNet's FC layers ~2x and its convolutions ~1.2-1.3x faster than widening
 * to fp32 for OpenBLAS, CPU time measured side by side).  A path the
 * CPU lacks is never executed: forcing it fails with MXP_EUNSUPPORTED and a
 * message naming the missing feature.
 *
 * Numerics: every path multiplies bf16 values exactly and accumulates in
 * fp32 (the order differs between paths, so results agree within fp32
 * accumulation error, not bit for bit).  Results stored as bf16 are rounded
 * to nearest even once, from the fp32 accumulator. */
#ifndef NN_BF16_H
#define NN_BF16_H

#include "nn_common.h"

#include <stdatomic.h>

typedef enum nn_bf16_path {
    NN_BF16_FP32 = 0,
    NN_BF16_AVX512F = 1,
    NN_BF16_AVX512BF16 = 2,
    NN_BF16_AMX = 3,
    NN_BF16_N_PATHS = 4
} nn_bf16_path;

/* "fp32", "avx512f", "avx512bf16", "amx". */
const char *nn_bf16_path_name(int path);
/* 1 when this CPU (and OS) can run the path, else 0 with *why (static
 * text) saying which feature is missing. */
int nn_bf16_path_available(int path, const char **why);
/* The path to use now: MXP_BF16_KERNEL (auto|amx|avx512bf16|avx512f|fp32)
 * or the best available.  Fails (EUNSUPPORTED / EINVAL) for a forced path
 * the CPU lacks or an unknown name. */
int nn_bf16_path_select(int *out_path);

/* ----------------------------------------------------------- conversions */
static inline float nn_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Round to nearest even; NaN stays NaN (quieted, sign kept). */
static inline uint16_t nn_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
void nn_bf16_widen(const uint16_t *src, float *dst, int64_t n);
void nn_bf16_narrow(const float *src, uint16_t *dst, int64_t n);
/* dst = bf16(src) (req WRITE) or bf16(float(dst) + src) (req ADD). */
void nn_bf16_store(int32_t req, const float *src, uint16_t *dst, int64_t n);

/* ----------------------------------------------------------------- GEMM */
/* C = op(A)·op(B) (beta 0) or C += op(A)·op(B) (beta 1); A is m×k bf16
 * (stored k×m when ta), B is k×n bf16 (stored n×k when tb), C m×n fp32,
 * all row-major with leading dimensions in elements.  Runs on ctx's
 * parallel_for when given and the product is large.  Errors: ENOMEM. */
int nn_bf16_gemm(const mxp_op_ctx *ctx, int path, int ta, int tb, int64_t m, int64_t n, int64_t k,
                 const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int beta, float *c,
                 int64_t ldc);

/* A packed once for several products (a convolution's weight, used by
 * every sample): init packs op(A) (m×k) for `path`, gemm_apacked computes
 * C = A·op(B) (beta 0) or C += A·op(B) (beta 1) with B k×n (n×k when tb).
 * Errors: ENOMEM, EUNSUPPORTED (path unavailable). */
typedef struct nn_bf16_apack {
    int path;
    int64_t m, k;
    void *data;
} nn_bf16_apack;
int nn_bf16_apack_init(nn_bf16_apack *p, int path, int ta, int64_t m, int64_t k, const uint16_t *a, int64_t lda);
void nn_bf16_apack_free(nn_bf16_apack *p);
int nn_bf16_gemm_apacked(const mxp_op_ctx *ctx, const nn_bf16_apack *a, int tb, int64_t n, const uint16_t *b,
                         int64_t ldb, int beta, float *c, int64_t ldc);

/* Registration of the bf16 Convolution and FullyConnected impls (rank 512,
 * bfloat16 inputs only), called from pack.c. */
int nn_register_bf16(mxp_registrar *r);
/* A parallel job's status: the first failure among its chunks wins (later
 * ones are consequences). */
static inline void nn_bf16_job_fail(atomic_int *status, int rc) {
    int ok = MXP_OK;
    atomic_compare_exchange_strong(status, &ok, rc);
}

extern const mxp_op_impl nn_bf16_fc_impl, nn_bf16_conv_impl;
/* bf16_conv3x3.c: 3x3 / 1x1 stride 1-2 convolution without im2col on the
 * avx512bf16 path (impl "bf16_direct", rank 520), registered by pack.c. */
extern const mxp_op_impl nn_bf16_direct_conv_impl;
/* 1 when VDPBF16PS kernels may run now: the CPU has avx512_bf16 and
 * MXP_BF16_KERNEL is auto or names avx512bf16/amx (AMX CPUs have it too);
 * else 0 with why = "<impl>: <reason>" (why may be NULL). */
int nn_bf16_vdp_ready(const char *impl, char *why, size_t n);
/* bf16_direct's register-blocked product (avx512bf16 only): out[o][q] =
 * Σ_cp Σ_t wpk[(cp·ntaps + t)·nout + o] · in[cp·cps + q + off[t]], words
 * of bf16 pairs, fp32 out (ldo floats per row) for o < nout (a multiple
 * of 8) and q < Q rounded up to 16 (in must be readable that far). */
void nn_bf16_direct_fwd_kernel(const uint32_t *in, int64_t cps, int64_t ncp, const int64_t *off, int ntaps,
                               const uint32_t *wpk, int64_t nout, float *out, int64_t ldo, int64_t Q);
/* dst[c·ldd + r] = src[r·lds + c] (32-bit words) for c < ncols, r < rows
 * rounded up to 16, zero for r >= rows (avx512f; ldd >= that rounding). */
void nn_bf16_transpose_words(const uint32_t *src, int64_t rows, int64_t lds, int64_t ncols, uint32_t *dst,
                             int64_t ldd);
/* bf16_wino_row.c: 3x3 stride-1 convolution with F(2,3) along rows (impl
 * "bf16_wino_row"), registered by pack.c. */
extern const mxp_op_impl nn_bf16_wino_row_conv_impl;

#endif
