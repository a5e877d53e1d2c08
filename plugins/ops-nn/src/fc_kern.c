/* fc_kern.c — float32 GEMM kernels of our own for FullyConnected's small
 * products (the MLP's 64x784 . 784x128 and smaller), used instead of
 * OpenBLAS below a size limit.
 *
 * Why: the GEMMs of a small net are a few MFLOP each, and Debian's
 * OpenBLAS 0.3.21 does not recognise this machine's CPU (family 6 model
 * 207): its DYNAMIC_ARCH picks the SSE3 "Prescott" kernels, and it packs
 * both operands on every call.  These kernels need no packing and are
 * compiled for AVX-512F, AVX2 and baseline x86-64 (TC, nn_simd.h).
 *
 * Two register-blocked kernels cover the three products of FullyConnected:
 *   - "dot" (C = A . B^T, both operands row-major along k: forward
 *     Y = X . W^T): a 4x4 tile of C keeps 16 vector accumulators over k,
 *     reduced horizontally at the end;
 *   - "bcast" (C = op(A) . B with B row-major along n: backward dX = dY . W
 *     and dW = dY^T . X): an 8x32 tile of C keeps 16 accumulators, each
 *     k step loads two vectors of a row of B and broadcasts 8 scalars of A
 *     (A read through strides, so A^T costs nothing).
 * Both write C = acc (+ C when accumulating) (+ bias[j] when given), so
 * the forward's bias add and MXNet's req=add are fused in the store.
 * Work is split over ctx->parallel_for by tile rows when the product is
 * large enough to pay for a helper.  Not here: f64, strided C, other
 * transposes (FullyConnected does not need them); the caller falls back to
 * BLAS when nn_sgemm_small returns 0.
 * Invariant: a product is only handled when its B operand fits in about
 * half of L2 (no cache blocking here) and the CPU has AVX-512F (the tiles
 * need 32 vector registers); otherwise it goes to BLAS. */
#include "fc_kern.h"
#include "nn_simd.h"

#include <stdatomic.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))

AI float hsum16(v16 v) {
    v8 a, b;
    memcpy(&a, &v, sizeof a);
    memcpy(&b, (char *)&v + sizeof a, sizeof b);
    a += b;
    v4 c, d;
    memcpy(&c, &a, sizeof c);
    memcpy(&d, (char *)&a + sizeof c, sizeof d);
    c += d;
    return (c[0] + c[2]) + (c[1] + c[3]);
}

AI void store1(float *c, float v, int acc, const float *bias, int64_t j) {
    if (bias) v += bias[j];
    if (acc) v += *c;
    *c = v;
}

/* ------------------------------------------------------------ dot (A . B^T) */

/* C[i][j] for i < MR rows of A, j < NR rows of B, MR, NR <= 4. */
AI void dot_tile(int MR, int NR, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t k, float *c,
                 int64_t ldc, int acc, const float *bias, int64_t j0) {
    v16 s[4][4];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) s[i][j] = (v16){0};
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        v16 av[4], bv[4];
        for (int i = 0; i < MR; i++) av[i] = ld16(a + i * lda + p);
        for (int j = 0; j < NR; j++) bv[j] = ld16(b + j * ldb + p);
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) s[i][j] += av[i] * bv[j];
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float v = hsum16(s[i][j]);
            for (int64_t q = p; q < k; q++) v += a[i * lda + q] * b[j * ldb + q];
            store1(c + i * ldc + j, v, acc, bias, j0 + j);
        }
}

typedef struct gemm_args {
    int64_t m, n, k;
    const float *a, *b;
    int64_t lda, ldb;     /* dot: row strides; bcast: a(i,p) = a[i*lda + p*a_cs], b row stride ldb */
    int64_t a_cs;
    float *c;
    int64_t ldc;
    int acc;
    const float *bias;
} gemm_args;

enum { DOT_MR = 4, DOT_NR = 4, BC_MR = 8, BC_NR = 32 };

/* Rows [i0, i1) of C (multiples of DOT_MR except at m). */
TC static void dot_rows(const gemm_args *g, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i += DOT_MR) {
        int64_t mr = g->m - i < DOT_MR ? g->m - i : DOT_MR;
        const float *a = g->a + i * g->lda;
        float *c = g->c + i * g->ldc;
        int64_t j = 0;
        if (mr == DOT_MR) {
            for (; j + DOT_NR <= g->n; j += DOT_NR)
                dot_tile(4, 4, a, g->lda, g->b + j * g->ldb, g->ldb, g->k, c + j, g->ldc, g->acc, g->bias, j);
            for (; j < g->n; j++)
                dot_tile(4, 1, a, g->lda, g->b + j * g->ldb, g->ldb, g->k, c + j, g->ldc, g->acc, g->bias, j);
        } else {
            for (int64_t r = 0; r < mr; r++) {
                for (j = 0; j + DOT_NR <= g->n; j += DOT_NR)
                    dot_tile(1, 4, a + r * g->lda, g->lda, g->b + j * g->ldb, g->ldb, g->k, c + r * g->ldc + j,
                             g->ldc, g->acc, g->bias, j);
                for (; j < g->n; j++)
                    dot_tile(1, 1, a + r * g->lda, g->lda, g->b + j * g->ldb, g->ldb, g->k, c + r * g->ldc + j,
                             g->ldc, g->acc, g->bias, j);
            }
        }
    }
}

/* ------------------------------------------------------------ bcast (op(A) . B) */

/* C[i][j0 .. j0 + 16*NV) for i < MR. */
AI void bc_tile(int MR, int NV, const gemm_args *g, int64_t i, int64_t j0) {
    v16 s[BC_MR][2];
    for (int r = 0; r < MR; r++)
        for (int v = 0; v < NV; v++) s[r][v] = (v16){0};
    const float *a = g->a + i * g->lda, *b = g->b + j0;
    const int64_t lda = g->lda, cs = g->a_cs, ldb = g->ldb;
    for (int64_t p = 0; p < g->k; p++) {
        const float *bp = b + p * ldb, *ap = a + p * cs;
        v16 b0 = ld16(bp), b1 = b0;
        if (NV > 1) b1 = ld16(bp + 16);
        for (int r = 0; r < MR; r++) {
            float x = ap[r * lda];
            s[r][0] += x * b0;
            if (NV > 1) s[r][1] += x * b1;
        }
    }
    for (int r = 0; r < MR; r++) {
        float *c = g->c + (i + r) * g->ldc + j0;
        for (int v = 0; v < NV; v++) {
            v16 t = s[r][v];
            if (g->bias) t += ld16(g->bias + j0 + 16 * v);
            if (g->acc) t += ld16(c + 16 * v);
            st16(c + 16 * v, t);
        }
    }
}

/* Columns of C past the last whole vector: one at a time. */
AI void bc_scalar_col(const gemm_args *g, int64_t i, int64_t mr, int64_t j) {
    for (int64_t r = 0; r < mr; r++) {
        const float *a = g->a + (i + r) * g->lda;
        float v = 0;
        for (int64_t p = 0; p < g->k; p++) v += a[p * g->a_cs] * g->b[p * g->ldb + j];
        store1(g->c + (i + r) * g->ldc + j, v, g->acc, g->bias, j);
    }
}

TC static void bc_rows(const gemm_args *g, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i += BC_MR) {
        int64_t mr = g->m - i < BC_MR ? g->m - i : BC_MR;
        int64_t j = 0;
        if (mr == BC_MR) {
            for (; j + BC_NR <= g->n; j += BC_NR) bc_tile(8, 2, g, i, j);
            for (; j + 16 <= g->n; j += 16) bc_tile(8, 1, g, i, j);
        } else {
            for (int64_t r = 0; r < mr; r++) {
                for (j = 0; j + BC_NR <= g->n; j += BC_NR) bc_tile(1, 2, g, i + r, j);
                for (; j + 16 <= g->n; j += 16) bc_tile(1, 1, g, i + r, j);
            }
        }
        for (; j < g->n; j++) bc_scalar_col(g, i, mr, j);
    }
}

/* ------------------------------------------------------------ driver */

/* The tiles are sized for 32 vector registers of 16 floats (AVX-512):
 * with 16 registers (AVX2) their accumulators spill and OpenBLAS, which
 * recognises those CPUs, is the faster choice. */
static int wide_vectors(void) {
#if defined(__x86_64__)
    /* Atomic: engine workers ask at once (a plain static was a data race
     * under TSan); relaxed is enough, every thread computes the same value. */
    static _Atomic int v = -1;
    int c = atomic_load_explicit(&v, memory_order_relaxed);
    if (c < 0) {
        c = __builtin_cpu_supports("avx512f") ? 1 : 0;
        atomic_store_explicit(&v, c, memory_order_relaxed);
    }
    return c;
#else
    return 0;
#endif
}

typedef struct par_job {
    const gemm_args *g;
    int dot;
    int64_t rows_per_unit;
} par_job;

static void par_range(void *arg, int64_t b, int64_t e) {
    const par_job *j = arg;
    int64_t i0 = b * j->rows_per_unit, i1 = e * j->rows_per_unit;
    if (i1 > j->g->m) i1 = j->g->m;
    if (j->dot) dot_rows(j->g, i0, i1);
    else bc_rows(j->g, i0, i1);
}

/* Below this a parallel_for costs more than it saves (a helper wake-up is
 * ~10 µs on a VM; 1 MFLOP is ~10 µs of one core here). */
#define PAR_MIN_FLOP 3.0e6
/* B operand size handled without cache blocking. */
#define MAX_B_BYTES (1u << 20)

int nn_sgemm_small(const mxp_op_ctx *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                   int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *bias) {
    if (m <= 0 || n <= 0 || k <= 0 || (trans_a && trans_b) || !wide_vectors()) return 0;
    if ((uint64_t)n * (uint64_t)k * sizeof(float) > MAX_B_BYTES || m > 4096) return 0;
    gemm_args g = {m, n, k, a, b, lda, ldb, 1, c, ldc, accumulate, bias};
    int dot = trans_b;
    if (!dot && trans_a) { /* a(i,p) = A[p*lda + i] */
        g.lda = 1;
        g.a_cs = lda;
    } else if (!dot) {
        g.a_cs = 1;
    }
    int64_t unit = dot ? DOT_MR : BC_MR;
    int64_t units = (m + unit - 1) / unit;
    double flop = 2.0 * (double)m * (double)n * (double)k;
    par_job j = {&g, dot, unit};
    if (flop >= PAR_MIN_FLOP && units > 1) {
        /* Chunks of at least PAR_MIN_FLOP / 2 each. */
        int64_t grain = (int64_t)((double)units * (PAR_MIN_FLOP / 2) / flop) + 1;
        nn_parallel(ctx, units, grain, par_range, &j);
    } else {
        par_range(&j, 0, units);
    }
    return 1;
}
