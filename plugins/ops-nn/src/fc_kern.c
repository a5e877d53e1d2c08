/* fc_kern.c — float32 GEMM kernels of our own for FullyConnected's small
 * products (the MLP's 64x784 . 784x128 and smaller), used instead of
 * OpenBLAS below a size limit.
 *
 * Why: the GEMMs of a small net are a few MFLOP each, and Debian's
 * OpenBLAS 0.3.21 does not recognise the CPUs these machines have had:
 * its DYNAMIC_ARCH picks the SSE3 "Prescott" kernels on the Intel one
 * (family 6 model 207) and the AVX2 "Haswell" ones on the AMD Zen 5
 * (family 26; openblas_get_corename()), never AVX-512, and it packs both
 * operands on every call.  These kernels need no packing and are
 * compiled for AVX-512F, AVX2 and baseline x86-64 (TC, nn_simd.h).
 *
 * Two register-blocked kernels cover the three products of FullyConnected:
 *   - "dot" (C = A . B^T, both operands row-major along k: forward
 *     Y = X . W^T): a 4x4 tile of C keeps 16 vector accumulators over k,
 *     reduced together at the end by a transposing tree of permutes (one
 *     vector of 16 sums; tiles at the edges repeat a row instead of
 *     running a narrower kernel);
 *   - "bcast" (C = op(A) . B with B row-major along n: backward dX = dY . W
 *     and dW = dY^T . X): an 8x32 tile of C keeps 16 accumulators, each
 *     k step loads two vectors of a row of B and broadcasts 8 scalars of A
 *     (A read through strides, so A^T costs nothing).
 * Tiny products (under 1 MFLOP) go to OpenBLAS when it runs AVX-512
 * kernels, which is faster there; MXP_FC_KERNEL=own|blas|auto overrides.
 * Both write C = acc (+ C when accumulating) (+ bias[j] when given), so
 * the forward's bias add and MXNet's req=add are fused in the store.
 * Work is split over ctx->parallel_for by tile rows when the product is
 * large enough to pay for a helper.  Not here: f64, strided C, other
 * transposes (FullyConnected does not need them); the caller falls back to
 * BLAS when nn_sgemm_small returns 0.
 * Invariant: a product is only handled when the CPU has AVX-512F (the
 * tiles need 32 vector registers) and either its B operand fits in about
 * half of L2 or, larger (LeNet's fc1 weight, 1.6 MB), A does: then C is
 * computed in blocks of columns, each B slice L2-resident while all of A
 * passes over it (OpenBLAS took ~50 GFLOP/s on fc1); otherwise it goes to
 * BLAS. */
#include "fc_kern.h"
#include "nn_simd.h"

#include <cblas.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AI static inline __attribute__((always_inline))

AI void store1(float *c, float v, int acc, const float *bias, int64_t j) {
    if (bias) v += bias[j];
    if (acc) v += *c;
    *c = v;
}

/* ------------------------------------------------------------ dot (A . B^T) */

typedef int32_t v16i __attribute__((vector_size(64)));

/* One level of the transposing reduction: x and y each hold G consecutive
 * lanes of partial sums for each of 16 / G accumulators; adding the two
 * halves of every group gives G / 2 lanes for each accumulator of x, then
 * of y, in one vector. */
#define RED_STEP(x, y, lo, hi) (__builtin_shuffle((x), (y), (lo)) + __builtin_shuffle((x), (y), (hi)))

/* out[l] = the sum of the 16 lanes of s[l]: 15 adds and 30
 * two-source permutes for all sixteen sums (vs ~9 operations per sum for
 * sixteen separate horizontal sums, which cost as much as the k loop
 * itself when k is 128). */
AI void reduce16x16(const v16 *s, float *out) {
    const v16i l1a = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23};
    const v16i l1b = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    const v16i l2a = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
    const v16i l2b = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};
    const v16i l3a = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29};
    const v16i l3b = {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31};
    const v16i l4a = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
    const v16i l4b = {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
    v16 c1[8], c2[4], c3[2];
    for (int q = 0; q < 8; q++) c1[q] = RED_STEP(s[2 * q], s[2 * q + 1], l1a, l1b);
    for (int q = 0; q < 4; q++) c2[q] = RED_STEP(c1[2 * q], c1[2 * q + 1], l2a, l2b);
    for (int q = 0; q < 2; q++) c3[q] = RED_STEP(c2[2 * q], c2[2 * q + 1], l3a, l3b);
    st16(out, RED_STEP(c3[0], c3[1], l4a, l4b));
}

/* C[i][j] for i < mr rows of A, j < nr rows of B (mr, nr <= 4), computed
 * as a whole 4x4 tile: a tile at the edge repeats its last row of A or B
 * (valid memory; the repeated sums are not stored), so the tails cost a
 * few wasted products instead of a slower kernel.  The k tail (k % 16) is
 * read as one zero-padded vector per row, and the sixteen sums come out of
 * reduce16x16 together (r[4i + j] = C[i][j]). */
AI void dot_tile44(int64_t mr, int64_t nr, const float *a0, int64_t lda, const float *b0, int64_t ldb, int64_t k,
                   float *c, int64_t ldc, int acc, const float *bias, int64_t j0) {
    const float *a[4], *b[4];
    for (int i = 0; i < 4; i++) a[i] = a0 + (i < mr ? i : mr - 1) * lda;
    for (int j = 0; j < 4; j++) b[j] = b0 + (j < nr ? j : nr - 1) * ldb;
    v16 s[16];
    for (int t = 0; t < 16; t++) s[t] = (v16){0};
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        v16 av[4], bv[4];
        for (int i = 0; i < 4; i++) av[i] = ld16(a[i] + p);
        for (int j = 0; j < 4; j++) bv[j] = ld16(b[j] + p);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) s[4 * i + j] += av[i] * bv[j];
    }
    if (p < k) {
        float ta[4][16] = {{0}}, tb[4][16] = {{0}};
        size_t tail = (size_t)(k - p) * sizeof(float);
        for (int i = 0; i < 4; i++) memcpy(ta[i], a[i] + p, tail);
        for (int j = 0; j < 4; j++) memcpy(tb[j], b[j] + p, tail);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) s[4 * i + j] += ld16(ta[i]) * ld16(tb[j]);
    }
    float r[16];
    reduce16x16(s, r);
    for (int64_t i = 0; i < mr; i++)
        for (int64_t j = 0; j < nr; j++) store1(c + i * ldc + j, r[4 * i + j], acc, bias, j0 + j);
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
        for (int64_t j = 0; j < g->n; j += DOT_NR) {
            int64_t nr = g->n - j < DOT_NR ? g->n - j : DOT_NR;
            dot_tile44(mr, nr, a, g->lda, g->b + j * g->ldb, g->ldb, g->k, c + j, g->ldc, g->acc, g->bias, j);
        }
    }
}

/* ------------------------------------------------------------ bcast (op(A) . B) */

/* C[i][j0 .. j0 + 16*NV) for i < MR; only the columns from jfirst on are
 * stored (a column tail recomputes the last whole vector of C, see
 * bc_rows). */
AI void bc_tile(int MR, int NV, const gemm_args *g, int64_t i, int64_t j0, int64_t jfirst) {
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
        if (jfirst > j0) { /* the column tail: NV == 1 */
            float t[16];
            st16(t, s[r][0]);
            for (int64_t q = jfirst - j0; q < 16; q++) store1(c + q, t[q], g->acc, g->bias, j0 + q);
            continue;
        }
        for (int v = 0; v < NV; v++) {
            v16 t = s[r][v];
            if (g->bias) t += ld16(g->bias + j0 + 16 * v);
            if (g->acc) t += ld16(c + 16 * v);
            st16(c + 16 * v, t);
        }
    }
}

/* Columns of C past the last whole vector when n < 16: one at a time. */
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
            for (; j + BC_NR <= g->n; j += BC_NR) bc_tile(8, 2, g, i, j, j);
            for (; j + 16 <= g->n; j += 16) bc_tile(8, 1, g, i, j, j);
            if (j < g->n && g->n >= 16) bc_tile(8, 1, g, i, g->n - 16, j), j = g->n;
        } else {
            for (int64_t r = 0; r < mr; r++) {
                for (j = 0; j + BC_NR <= g->n; j += BC_NR) bc_tile(1, 2, g, i + r, j, j);
                for (; j + 16 <= g->n; j += 16) bc_tile(1, 1, g, i + r, j, j);
                if (j < g->n && g->n >= 16) bc_tile(1, 1, g, i + r, g->n - 16, j), j = g->n;
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

/* Does the loaded OpenBLAS run AVX-512 kernels?  (Its DYNAMIC_ARCH build
 * picks them from OPENBLAS_CORETYPE, which the runtime sets from CPUID:
 * runtime/src/base/blas_coretype.c.)  Then it beats these kernels on tiny
 * products (below TINY_FLOP: its small-matrix paths skip packing, and our
 * tiles waste lanes on 10-wide outputs); with its SSE3 "Prescott" kernels
 * it does not. */
static int blas_is_avx512(void) {
    static _Atomic int v = -1; /* atomic for the same reason as wide_vectors */
    int c = atomic_load_explicit(&v, memory_order_relaxed);
    if (c < 0) {
        const char *name = openblas_get_corename();
        c = name && (!strcasecmp(name, "SkylakeX") || !strcasecmp(name, "Cooperlake") ||
                     !strcasecmp(name, "SapphireRapids"));
        atomic_store_explicit(&v, c, memory_order_relaxed);
    }
    return c;
}

/* MXP_FC_KERNEL: auto (default: the faster by the rules here), own (these
 * kernels wherever they apply; the tests use it to cover them), blas
 * (never these kernels).  Read once per process. */
enum { POLICY_AUTO = 0, POLICY_OWN = 1, POLICY_BLAS = 2 };
static int kernel_policy(void) {
    static _Atomic int v = -1;
    int c = atomic_load_explicit(&v, memory_order_relaxed);
    if (c < 0) {
        const char *e = getenv("MXP_FC_KERNEL");
        c = e && !strcmp(e, "own") ? POLICY_OWN : e && !strcmp(e, "blas") ? POLICY_BLAS : POLICY_AUTO;
        atomic_store_explicit(&v, c, memory_order_relaxed);
    }
    return c;
}

typedef struct par_job {
    const gemm_args *g;
    int dot;
    int64_t rows_per_unit; /* by rows: rows of C per unit; by columns: 0 */
    int64_t cols_per_blk, nblk; /* by columns: the last block takes the remainder */
} par_job;

/* Columns [j0, j1) of C over all its rows: the same tiles on a slice of B
 * (dot: rows j0.. of B; bcast: columns j0.. of B), so every element of C
 * is summed exactly as without the split. */
static void col_block(const par_job *j, int64_t blk) {
    gemm_args s = *j->g;
    int64_t j0 = blk * j->cols_per_blk, j1 = blk + 1 == j->nblk ? s.n : j0 + j->cols_per_blk;
    s.n = j1 - j0;
    s.b += j->dot ? j0 * s.ldb : j0;
    s.c += j0;
    if (s.bias) s.bias += j0;
    if (j->dot) dot_rows(&s, 0, s.m);
    else bc_rows(&s, 0, s.m);
}

static void par_range(void *arg, int64_t b, int64_t e) {
    const par_job *j = arg;
    if (!j->rows_per_unit) {
        for (int64_t blk = b; blk < e; blk++) col_block(j, blk);
        return;
    }
    int64_t i0 = b * j->rows_per_unit, i1 = e * j->rows_per_unit;
    if (i1 > j->g->m) i1 = j->g->m;
    if (j->dot) dot_rows(j->g, i0, i1);
    else bc_rows(j->g, i0, i1);
}

/* Below this a parallel_for costs more than it saves (a helper wake-up is
 * ~10 µs on a VM; 1 MFLOP is ~10 µs of one core here). */
#define PAR_MIN_FLOP 3.0e6
/* B operand size handled without cache blocking: the tiles walk all of B
 * for each block of rows of C. */
#define MAX_B_BYTES (1u << 20)
/* A larger B (LeNet's fc1: 500x800, 1.6 MB) is cut into blocks of columns
 * of C, each a slice of B of at most BLK_B_BYTES that stays in L2 while
 * every row of A passes over it; A is read once per block, so it must be
 * small (MAX_A_BYTES).  Each block is at least 16 columns wide (the bcast
 * tiles' tail) and a multiple of 16. */
#define BLK_B_BYTES (256u << 10)
#define MAX_A_BYTES (1u << 20)
/* Below this an AVX-512 OpenBLAS is the faster (measured on the MLP's and
 * LeNet's shapes: 64x10x64 1.2 vs 0.5-0.9 us, 64x10x500 7.7 vs 4.6 us; from
 * 64x64x128 = 1 MFLOP on these kernels are as fast or faster). */
#define TINY_FLOP 1.0e6

int nn_sgemm_small(const mxp_op_ctx *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const float *a,
                   int64_t lda, const float *b, int64_t ldb, int accumulate, float *c, int64_t ldc, const float *bias) {
    if (m <= 0 || n <= 0 || k <= 0 || (trans_a && trans_b) || !wide_vectors()) return 0;
    if (m > 4096) return 0;
    int by_cols = (uint64_t)n * (uint64_t)k * sizeof(float) > MAX_B_BYTES;
    if (by_cols && (uint64_t)m * (uint64_t)k * sizeof(float) > MAX_A_BYTES) return 0;
    int policy = kernel_policy();
    double flop = 2.0 * (double)m * (double)n * (double)k;
    if (policy == POLICY_BLAS || (policy == POLICY_AUTO && flop < TINY_FLOP && blas_is_avx512())) return 0;
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
    par_job j = {&g, dot, unit, 0, 0};
    if (by_cols) {
        int64_t cols = (int64_t)(BLK_B_BYTES / sizeof(float)) / k / 16 * 16;
        j.rows_per_unit = 0;
        j.cols_per_blk = cols < 16 ? 16 : cols;
        j.nblk = n / j.cols_per_blk; /* >= 1: B over MAX_B_BYTES has n*k > 4 x the block's */
        if (j.nblk < 1) j.nblk = 1;
        units = j.nblk;
    }
    if (flop >= PAR_MIN_FLOP && units > 1) {
        /* Chunks of at least PAR_MIN_FLOP / 2 each. */
        int64_t grain = (int64_t)((double)units * (PAR_MIN_FLOP / 2) / flop) + 1;
        nn_parallel(ctx, units, grain, par_range, &j);
    } else {
        par_range(&j, 0, units);
    }
    return 1;
}
