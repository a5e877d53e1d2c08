/* conv_strip_bwd.c — the backward pass of Convolution impl "strip"
 * (conv_strip.c): float32 2-D convolutions with output rows of at most 32
 * pixels (LeNet's 5x5 layers), any stride, padding, dilation and groups.
 *
 * Both gradients run on register kernels over chunks of whole output rows
 * (a chunk's column matrix col[K][Q], K = Cg*kh*kw, at most SB_COL_BYTES):
 *   - weight gradient (and bias): pwk_dw (conv_pointwise_kern.c) keeps a
 *     64 x 6 block of sums in registers over the chunk's pixels, vectors
 *     along M or along K, whichever wastes fewer lanes.  Along M, dy is
 *     transposed to pixel-major dyT[Q][Mgp] (its row sums are the bias
 *     gradient, in double) and col is broadcast, built by im2col or, for
 *     an unpadded stride-1 layer, read in place from the input by
 *     sbk_dw_direct (conv_strip_kern.c).  Along K, col is transposed to
 *     colT[Q][Kp] and dy's rows are broadcast.  Along pixels (unpadded
 *     stride-1 layers with few output channels, LeNet's conv1: 20 of 32
 *     lanes along M, 576 of 672 along pixels), dy is laid out at the
 *     input's row pitch and each tap is a shifted view of the input rows
 *     (sbk_dw_pitch): 16 lane partials per weight, reduced at the end.
 *     Where it copies no more and wastes no more lanes (conv1 again), the
 *     same kernel reads dy in place and kw shifted copies of the input
 *     rows instead (chunk_by_shift).  The (sample, chunk) items
 *     are split into SB_PARTS fixed parts, each summed into its own
 *     partial, and the partials are added in part order, so the result is
 *     bitwise the same whatever the thread count.
 *   - data gradient: per (sample, group) and input channel, the channel's
 *     kh*kw rows of dcol = W^T dy by pwk_gemm (W^T packed in near-equal
 *     blocks of at most PW_MB rows of one channel, dy packed 32 pixels at
 *     a time), then added into dx by col2im while they are in L1; a
 *     sample's rows are written by one item only.
 * This replaces gemm's whole-batch OpenBLAS calls (on LeNet's conv2 its
 * packing costs as much as the product) and direct's gradients.
 * MXP_STRIP_DW=d|m|k|p|s forces the in-place, M, K, pixel or shifted path (tests).
 * The pixel path reads input columns that only meet dy's zero padding, so
 * an inf/NaN in the input can turn more weight-gradient entries NaN than
 * the exact sum would (the gradient is non-finite either way).
 * Not here: float64 (strip refuses it), rows wider than 32 pixels. */
#include "conv_pointwise.h"
#include "conv_strip.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SB_PARTS 8                /* weight-gradient parts (fixed)                       */
#define SB_COL_BYTES (192 << 10)  /* a column chunk: L2-resident beside dyT and the partial */

static int64_t sb_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t sb_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* Output rows per chunk (at least 1), and a chunk's column stride: its
 * pixels rounded up to whole 32-pixel strips. */
static int64_t chunk_rows(const conv_geom *g) {
    int64_t q = SB_COL_BYTES / (int64_t)sizeof(float) / sb_max(1, g->K);
    return sb_max(1, sb_min(g->Ho, q / g->Wo));
}
static int64_t chunk_ld(const conv_geom *g) { return (chunk_rows(g) * g->Wo + PW_STRIP - 1) / PW_STRIP * PW_STRIP; }

/* ------------------------------------------------------ weight gradient */
typedef struct sbdw {
    const conv_geom *g;
    const float *x, *dy;
    int64_t Mgp, Kp, rows, ldq, nq, T, nparts;
    int direct;   /* by M, input read in place (stride 1, no padding): no im2col */
    int by_k;     /* vectors along K (partials [nparts][G][Mg][Kp]), else along M ([nparts][G][K][Mgp]) */
    int by_p;     /* vectors along pixels (direct only; partials [nparts][G][Mg][K][16]) */
    int shift;    /* by_p with dy read in place and kw-shifted copies of the input (chunk_by_shift) */
    int64_t Lp, Xs; /* by_p: dy row stride (the chunk's pixels at pitch W, rounded up to 16), input rows per channel;
                     * shift: Xs is one shifted plane's stride */
    float *part;
    double *dbp;  /* [nparts][M] or NULL */
    int want_dw;
    atomic_int no_memory;
    int64_t *xoff;  /* direct along M: tap k's input offset ci*H*W + ki*dh*W + kj*dw, [K] */
} sbdw;

static uint64_t part_size(const sbdw *j) {
    if (j->by_p) return (uint64_t)(j->g->G * j->g->Mg * j->g->K * 16);
    return (uint64_t)(j->g->G * (j->by_k ? j->g->Mg * j->Kp : j->g->K * j->Mgp));
}

/* Vectors along M: dyT[Q][Mgp] (row sums = bias), col[K][ldq] broadcast;
 * partial dW^T [K][Mgp]. */
static void chunk_by_m(const sbdw *j, int64_t n, int64_t gr, int64_t r0, int64_t r1, const float *dys, float *col,
                       float *dyT, float *pt, double *db) {
    const conv_geom *g = j->g;
    int64_t np = (r1 - r0) * g->Wo;
    pwk_trans(dys, g->P, g->Mg, np, dyT, j->Mgp, db ? db + gr * g->Mg : NULL);
    if (!j->want_dw) return;
    float *pg = pt + gr * g->K * j->Mgp;
    if (j->direct) { /* the column matrix read in place: tap k of pixel (r, ow) is xr[k][r*W + ow] */
        const float *xs = j->x + (n * g->C + gr * g->Cg) * g->H * g->W + r0 * g->W;
        for (int64_t k0 = 0; k0 < g->K; k0 += PW_DWC) {
            int nc = (int)sb_min(PW_DWC, g->K - k0);
            const float *xr[PW_DWC];
            for (int c = 0; c < nc; c++) xr[c] = xs + j->xoff[k0 + c];
            for (int64_t m0 = 0; m0 < j->Mgp; m0 += PW_DWM)
                sbk_dw_direct((int)sb_min(PW_DWM, j->Mgp - m0) / 16, nc, dyT + m0, j->Mgp, xr, g->W, r1 - r0, g->Wo,
                              pg + k0 * j->Mgp + m0, j->Mgp);
        }
        return;
    }
    conv_im2col(MXP_DTYPE_F32, g, j->x + (n * g->C + gr * g->Cg) * g->H * g->W, 0, g->Cg, r0, r1, col, j->ldq);
    for (int64_t k0 = 0; k0 < g->K; k0 += PW_DWC) {
        int nc = (int)sb_min(PW_DWC, g->K - k0);
        for (int64_t m0 = 0; m0 < j->Mgp; m0 += PW_DWM) {
            int nmv = (int)sb_min(PW_DWM, j->Mgp - m0) / 16;
            const float *pf = m0 == 0 && k0 + 2 * PW_DWC <= g->K ? col + (k0 + PW_DWC) * j->ldq : NULL;
            pwk_dw(nmv, nc, dyT + m0, j->Mgp, col + k0 * j->ldq, j->ldq, np, pg + k0 * j->Mgp + m0, j->Mgp, pf);
        }
    }
}

/* Row sums of dy (Mg rows of np pixels at stride P) into db, in double. */
static void dy_rowsums(const float *dys, int64_t P, int64_t Mg, int64_t np, double *db) {
    sbk_rowsums(dys, P, Mg, np, db);
}

/* Vectors along K: colT[Q][Kp] (the column matrix transposed), dy rows
 * broadcast; partial dW [Mg][Kp].  For each 64-column slice of colT (L1
 * resident over the chunk) every block of at most PW_DWC output channels
 * runs, the blocks near-equal (50 -> 5 x 6 + 4 x 5). */
static void chunk_by_k(const sbdw *j, int64_t n, int64_t gr, int64_t r0, int64_t r1, const float *dys, float *col,
                       float *colT, float *pt, double *db) {
    const conv_geom *g = j->g;
    int64_t np = (r1 - r0) * g->Wo;
    if (db) dy_rowsums(dys, g->P, g->Mg, np, db + gr * g->Mg);
    if (!j->want_dw) return;
    conv_im2col(MXP_DTYPE_F32, g, j->x + (n * g->C + gr * g->Cg) * g->H * g->W, 0, g->Cg, r0, r1, col, j->ldq);
    pwk_trans(col, j->ldq, g->K, np, colT, j->Kp, NULL);
    float *pg = pt + gr * g->Mg * j->Kp;
    int64_t nb = (g->Mg + PW_DWC - 1) / PW_DWC, base = g->Mg / nb, extra = g->Mg % nb;
    for (int64_t k0 = 0; k0 < j->Kp; k0 += PW_DWM) {
        int nmv = (int)sb_min(PW_DWM, j->Kp - k0) / 16;
        for (int64_t blk = 0, m0 = 0; blk < nb; blk++) {
            int nc = (int)(base + (blk < extra));
            pwk_dw(nmv, nc, colT + k0, j->Kp, dys + m0 * g->P, g->P, np, pg + m0 * j->Kp + k0, j->Kp, NULL);
            m0 += nc;
        }
    }
}

/* n near-equal blocks of at most `most` covering `total`: block k has
 * base + (k < ext) items (the pixel paths' channel and tap blocks). */
typedef struct even_split {
    int64_t n, base, ext;
} even_split;
static even_split split_even(int64_t total, int64_t most) {
    int64_t n = (total + most - 1) / most;
    return (even_split){n, total / n, total % n};
}
static int split_size(even_split s, int64_t k) { return (int)(s.base + (k < s.ext)); }

/* Vectors along pixels at the input's row pitch: dyp[Mg][Lp] holds the
 * chunk's dy rows at pitch W (zero past Wo and past the chunk), xb[Cg][Xs]
 * its input rows (zero past them), so tap (ci, ki, kj) of every pixel is
 * xb[ci] shifted by ki*dh*W + kj*dw; partial: lane sums [G][Mg][K][16].
 * Blocks: near-equal groups of at most SBK_PMB channels x SBK_PTB taps of
 * one kernel row. */
static void chunk_by_p(const sbdw *j, int64_t n, int64_t gr, int64_t r0, int64_t r1, const float *dys, float *buf,
                       float *pt, double *db) {
    const conv_geom *g = j->g;
    const int64_t W = g->W, rows = r1 - r0;
    const int64_t L = (rows - 1) * W + g->Wo, Lp = (L + 15) / 16 * 16, xrows = rows + (g->kh - 1) * g->dh;
    float *dyp = buf, *xb = buf + g->Mg * j->Lp;
    sbk_pitch_rows(dys, g->P, g->Mg, rows, g->Wo, W, Lp, dyp, j->Lp, db ? db + gr * g->Mg : NULL); /* + bias */
    if (!j->want_dw) return;
    /* Reads reach xrows*W + 14 at most (the last vector of the last tap). */
    const float *xs = j->x + ((n * g->C + gr * g->Cg) * g->H + r0) * W;
    for (int64_t c = 0; c < g->Cg; c++) {
        memcpy(xb + c * j->Xs, xs + c * g->H * W, (size_t)(xrows * W) * sizeof(float));
        memset(xb + c * j->Xs + xrows * W, 0, 16 * sizeof(float));
    }
    float *pg = pt + gr * g->Mg * g->K * 16;
    const int64_t nk = g->kh * g->kw, nv = Lp / 16;
    const even_split ms = split_even(g->Mg, SBK_PMB), ts = split_even(g->kw, SBK_PTB);
    for (int64_t mbk = 0, m0 = 0; mbk < ms.n; mbk++) {
        int mb = split_size(ms, mbk);
        for (int64_t ci = 0; ci < g->Cg; ci++)
            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t tbk = 0, kj0 = 0; tbk < ts.n; tbk++) {
                    int tb = split_size(ts, tbk);
                    int64_t k0 = ci * nk + ki * g->kw + kj0;
                    sbk_dw_pitch(mb, tb, dyp + m0 * j->Lp, j->Lp, xb + ci * j->Xs + ki * g->dh * W + kj0 * g->dw,
                                 g->dw, nv, pg + (m0 * g->K + k0) * 16, g->K * 16);
                    kj0 += tb;
                }
        m0 += mb;
    }
}

/* Vectors along pixels with dy read in place: the chunk's input rows are
 * copied kw times, copy kj holding x shifted left by kj*dw and cropped to
 * the output width (xs[ci][kj][r*Wo + ow] = x[ci][r0 + r][ow + kj*dw],
 * the direct impl's layout), so tap (ci, ki, kj) of pixel p = r*Wo + ow is
 * xs[ci][kj][p + ki*dh*Wo] and dy's own rows line up with it: no lane
 * wasted on the gap between Wo and W, and a copy of Cg*kw input rows
 * instead of Mg dy rows (LeNet's conv1: 1 x 5 x 28 x 24 floats per sample
 * instead of 20 x 24 x 28).  A last vector that runs past the chunk takes
 * dy from a zero-padded copy (tail), and each plane has 16 zeros of slack
 * after its rows, so padded lanes multiply zero by zero.  Same partials
 * and blocks as chunk_by_p. */
static void chunk_by_shift(const sbdw *j, int64_t n, int64_t gr, int64_t r0, int64_t r1, const float *dys, float *buf,
                           float *pt, double *db) {
    const conv_geom *g = j->g;
    const int64_t rows = r1 - r0, np = rows * g->Wo, xrows = rows + (g->kh - 1) * g->dh;
    if (db) sbk_rowsums(dys, g->P, g->Mg, np, db + gr * g->Mg);
    if (!j->want_dw) return;
    const int64_t S = j->Xs, nvf = np / 16, rem = np % 16;
    float *xsh = buf, *tail = buf + g->Cg * g->kw * S; /* tail: [Mg][16] */
    const float *xs = j->x + ((n * g->C + gr * g->Cg) * g->H + r0) * g->W;
    for (int64_t c = 0; c < g->Cg; c++)
        for (int64_t kj = 0; kj < g->kw; kj++) {
            float *d = xsh + (c * g->kw + kj) * S;
            const float *src = xs + c * g->H * g->W + kj * g->dw;
            for (int64_t r = 0; r < xrows; r++) memcpy(d + r * g->Wo, src + r * g->W, (size_t)g->Wo * sizeof(float));
            memset(d + xrows * g->Wo, 0, (size_t)(S - xrows * g->Wo) * sizeof(float));
        }
    if (rem)
        for (int64_t m = 0; m < g->Mg; m++) {
            memcpy(tail + m * 16, dys + m * g->P + nvf * 16, (size_t)rem * sizeof(float));
            memset(tail + m * 16 + rem, 0, (size_t)(16 - rem) * sizeof(float));
        }
    float *pg = pt + gr * g->Mg * g->K * 16;
    const int64_t nk = g->kh * g->kw;
    const even_split ms = split_even(g->Mg, SBK_PMB), ts = split_even(g->kw, SBK_PTB);
    for (int64_t mbk = 0, m0 = 0; mbk < ms.n; mbk++) {
        int mb = split_size(ms, mbk);
        for (int64_t ci = 0; ci < g->Cg; ci++)
            for (int64_t ki = 0; ki < g->kh; ki++)
                for (int64_t tbk = 0, kj0 = 0; tbk < ts.n; tbk++) {
                    int tb = split_size(ts, tbk);
                    int64_t k0 = ci * nk + ki * g->kw + kj0;
                    const float *xt = xsh + (ci * g->kw + kj0) * S + ki * g->dh * g->Wo;
                    float *acc = pg + (m0 * g->K + k0) * 16;
                    if (nvf) sbk_dw_pitch(mb, tb, dys + m0 * g->P, g->P, xt, S, nvf, acc, g->K * 16);
                    if (rem) sbk_dw_pitch(mb, tb, tail + m0 * 16, 16, xt + nvf * 16, S, 1, acc, g->K * 16);
                    kj0 += tb;
                }
        m0 += mb;
    }
}

static void dw_range(void *arg, int64_t b, int64_t e) {
    sbdw *j = arg;
    const conv_geom *g = j->g;
    float *col = j->want_dw && !j->direct ? nn_alloc((uint64_t)(g->K * j->ldq) * sizeof(float)) : NULL;
    uint64_t nbuf = j->shift  ? (uint64_t)(g->Cg * g->kw * j->Xs + g->Mg * 16)
                    : j->by_p ? (uint64_t)(g->Mg * j->Lp + g->Cg * j->Xs)
                              : (uint64_t)(j->ldq * (j->by_k ? j->Kp : j->Mgp));
    float *dyT = nn_alloc(nbuf * sizeof(float)); /* or colT, or by_p's dyp and input rows, or shift's planes and tail */
    if (!dyT || (j->want_dw && !j->direct && !col)) { /* an item cannot return a status: the driver reports it */
        atomic_store(&j->no_memory, 1);
        nn_free(col);
        nn_free(dyT);
        return;
    }
    uint64_t psz = part_size(j);
    for (int64_t q = b; q < e; q++) {
        float *pt = j->part + (uint64_t)q * psz;
        double *db = j->dbp ? j->dbp + q * g->M : NULL;
        if (j->want_dw) memset(pt, 0, psz * sizeof(float));
        if (db) memset(db, 0, (size_t)g->M * sizeof(double));
        for (int64_t t = q * j->T / j->nparts; t < (q + 1) * j->T / j->nparts; t++) {
            int64_t n = t / j->nq, r0 = (t % j->nq) * j->rows, r1 = sb_min(g->Ho, r0 + j->rows);
            int64_t p0 = r0 * g->Wo;
            for (int64_t gr = 0; gr < g->G; gr++) {
                const float *dys = j->dy + (n * g->M + gr * g->Mg) * g->P + p0;
                if (j->shift) chunk_by_shift(j, n, gr, r0, r1, dys, dyT, pt, db);
                else if (j->by_p) chunk_by_p(j, n, gr, r0, r1, dys, dyT, pt, db);
                else if (j->by_k) chunk_by_k(j, n, gr, r0, r1, dys, col, dyT, pt, db);
                else chunk_by_m(j, n, gr, r0, r1, dys, col, dyT, pt, db);
            }
        }
    }
    nn_free(col);
    nn_free(dyT);
}

typedef struct sbsum {
    const sbdw *j;
    float *dw;
    int32_t req;
    int64_t kb, nkb; /* K columns per item, items per group */
} sbsum;

/* dW[gr][m][k] = sum over parts, in part order, for items (group, k block). */
static void sum_range(void *arg, int64_t b, int64_t e) {
    const sbsum *s = arg;
    const sbdw *j = s->j;
    const conv_geom *g = j->g;
    uint64_t psz = part_size(j);
    for (int64_t it = b; it < e; it++) {
        int64_t gr = it / s->nkb, k0 = (it % s->nkb) * s->kb, k1 = sb_min(g->K, k0 + s->kb);
        if (j->by_p) { /* each part's 16 lanes, then the parts, in order */
            for (int64_t m = 0; m < g->Mg; m++)
                for (int64_t k = k0; k < k1; k++) {
                    const float *src = j->part + ((gr * g->Mg + m) * g->K + k) * 16;
                    float v = 0.0f;
                    for (int64_t q = 0; q < j->nparts; q++) {
                        float t = 0.0f;
                        for (int l = 0; l < 16; l++) t += src[(uint64_t)q * psz + (uint64_t)l];
                        v += t;
                    }
                    NN_STORE(s->req, s->dw[(gr * g->Mg + m) * g->K + k], v);
                }
            continue;
        }
        if (j->by_k) {
            for (int64_t m = 0; m < g->Mg; m++) {
                const float *src = j->part + (gr * g->Mg + m) * j->Kp;
                for (int64_t k = k0; k < k1; k++) {
                    float v = 0.0f;
                    for (int64_t q = 0; q < j->nparts; q++) v += src[(uint64_t)q * psz + k];
                    NN_STORE(s->req, s->dw[(gr * g->Mg + m) * g->K + k], v);
                }
            }
            continue;
        }
        /* Along M: each part's row of Mg sums is contiguous, so the sums
         * of up to 64 m at a time run as vectors (parts still added in
         * order, from 0, per element: the same bits as one m at a time),
         * then go to dW's column k. */
        for (int64_t k = k0; k < k1; k++) {
            const float *src = j->part + (gr * g->K + k) * j->Mgp;
            for (int64_t m0 = 0; m0 < g->Mg; m0 += 64) {
                int64_t nm = sb_min(64, g->Mg - m0);
                float v[64];
                for (int64_t i = 0; i < nm; i++) v[i] = 0.0f;
                for (int64_t q = 0; q < j->nparts; q++) {
                    const float *sq = src + (uint64_t)q * psz + m0;
                    for (int64_t i = 0; i < nm; i++) v[i] += sq[i];
                }
                for (int64_t i = 0; i < nm; i++) NN_STORE(s->req, s->dw[(gr * g->Mg + m0 + i) * g->K + k], v[i]);
            }
        }
    }
}

static int dw_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *x, const float *dy, float *dw,
                  int32_t req_dw, float *db, int32_t req_db) {
    sbdw j = {g, x, dy, (g->Mg + 15) / 16 * 16, (g->K + 15) / 16 * 16, chunk_rows(g), chunk_ld(g), 0, 0, 0, 0, 0, 0, 0,
              0, 0, NULL, NULL, req_dw != MXP_REQ_NULL, 0, NULL};
    /* Vectors along K when that wastes clearly fewer lanes (LeNet: conv2
     * 500/512 vs 50/64, conv1 25/32 vs 20/32); the transpose of the column
     * matrix it needs costs a few percent of the products. */
    j.by_k = (double)g->K / (double)j.Kp > (double)g->Mg / (double)j.Mgp + 0.1;
    /* An unpadded stride-1 layer skips im2col (and colT's transpose) altogether:
     * vectors along M reading the input in place (LeNet's conv1 and conv2). */
    j.direct = g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    if (j.direct) j.by_k = 0;
    /* Vectors along pixels where that wastes clearly fewer lanes than along
     * M (LeNet's conv1: 576 of 672 vs 20 of 32; conv2 stays along M: 64 of
     * 96 vs 50 of 64) and the lane partials stay small.  A chunk's dy and
     * input rows at pitch W fit SB_COL_BYTES. */
    int64_t prow = sb_max(1, sb_min(g->Ho, SB_COL_BYTES / (int64_t)sizeof(float) / ((g->Mg + g->Cg) * g->W)));
    int64_t plp = ((prow - 1) * g->W + g->Wo + 15) / 16 * 16, pmb = (g->Mg + SBK_PMB - 1) / SBK_PMB;
    int p_ok = j.direct && g->Mg * g->K <= 4096;
    double eff_p = (double)(prow * g->Wo) / (double)plp * (double)g->Mg / (double)(pmb * SBK_PMB);
    j.by_p = p_ok && eff_p > (double)g->Mg / (double)j.Mgp + 0.1;
    /* Along pixels, the shifted input planes (chunk_by_shift) rather than dy
     * at the input's pitch where they copy no more floats and waste no
     * more lanes (LeNet's conv1: 3,360 vs 13,440 floats per sample, 576 of
     * 576 lanes vs 576 of 672).  A chunk's planes fit SB_COL_BYTES. */
    int64_t srow = sb_max(1, sb_min(g->Ho, (SB_COL_BYTES / (int64_t)sizeof(float) / sb_max(1, g->Cg * g->kw * g->Wo)) -
                                               (g->kh - 1) * g->dh));
    double eff_s = (double)(srow * g->Wo) / (double)((srow * g->Wo + 15) / 16 * 16) * (double)g->Mg /
                   (double)(pmb * SBK_PMB);
    int64_t copy_s = g->Cg * g->kw * (srow + (g->kh - 1) * g->dh) * g->Wo * (g->Ho / srow);
    int64_t copy_p = g->Mg * prow * g->W * (g->Ho / prow);
    j.shift = j.by_p && eff_s >= eff_p && copy_s <= copy_p;
    const char *force = getenv("MXP_STRIP_DW"); /* m, k, d (direct), p (pixels) or s (shifted): tests and comparisons */
    if (force && *force) {
        j.by_k = force[0] == 'k';
        j.by_p = p_ok && (force[0] == 'p' || force[0] == 's');
        j.shift = j.by_p && force[0] == 's';
        j.direct = j.direct && (force[0] == 'd' || j.by_p);
    }
    if (j.shift) {
        j.rows = srow;
        j.Xs = (srow + (g->kh - 1) * g->dh) * g->Wo + 16;
    } else if (j.by_p) {
        j.rows = prow;
        j.Lp = plp;
        j.Xs = (prow + (g->kh - 1) * g->dh) * g->W + 16;
    }
    j.nq = (g->Ho + j.rows - 1) / j.rows;
    j.T = g->N * j.nq;
    j.nparts = sb_min(SB_PARTS, j.T);
    uint64_t psz = part_size(&j);
    if (j.want_dw && j.direct && !j.by_p && !j.by_k) { /* tap offsets once, not two divisions per tap per chunk */
        j.xoff = nn_alloc((uint64_t)g->K * sizeof(int64_t));
        if (!j.xoff) return NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for %lld tap offsets", (long long)g->K);
        const int64_t nk = g->kh * g->kw;
        for (int64_t k = 0; k < g->K; k++) {
            int64_t ci = k / nk, t = k % nk;
            j.xoff[k] = ci * g->H * g->W + (t / g->kw) * g->dh * g->W + (t % g->kw) * g->dw;
        }
    }
    if (j.want_dw) j.part = nn_alloc((uint64_t)j.nparts * psz * sizeof(float));
    if (req_db != MXP_REQ_NULL) j.dbp = nn_alloc((uint64_t)(j.nparts * g->M) * sizeof(double));
    if ((j.want_dw && !j.part) || (req_db != MXP_REQ_NULL && !j.dbp)) {
        nn_free(j.part);
        nn_free(j.dbp);
        nn_free(j.xoff);
        return NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for %lld weight-gradient partials",
                      (long long)j.nparts);
    }
    int st = nn_parallel(ctx, j.nparts, 1, dw_range, &j);
    if (st >= 0 && atomic_load(&j.no_memory))
        st = NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for a %lld x %lld column chunk", (long long)g->K,
                    (long long)j.ldq);
    if (st >= 0 && j.want_dw) {
        sbsum s = {&j, dw, req_dw, 64, (g->K + 63) / 64};
        st = nn_parallel(ctx, g->G * s.nkb, 1, sum_range, &s);
    }
    if (st >= 0 && req_db != MXP_REQ_NULL)
        for (int64_t m = 0; m < g->M; m++) {
            double v = 0;
            for (int64_t q = 0; q < j.nparts; q++) v += j.dbp[q * g->M + m];
            NN_STORE(req_db, db[m], (float)v);
        }
    nn_free(j.part);
    nn_free(j.dbp);
    nn_free(j.xoff);
    return st;
}

/* -------------------------------------------------------- data gradient */
typedef struct sbdx {
    const conv_geom *g;
    const float *dy, *apk;  /* apk: W^T, block (gr, ci, r0) at (gr*K + ci*nk + r0)*Mg, [m][mbs] */
    float *dx;
    int64_t rows, ldq, nq;
    st_rowblocks rb;        /* the kh*kw rows of one input channel in near-equal blocks */
    int add;
    atomic_int no_memory;
} sbdx;

/* Per (sample, group) and chunk of output rows: dy's strips packed once,
 * then one input channel at a time, its kh*kw rows of dcol = W^T dy
 * (L1-sized: 25 x 64 floats for LeNet's conv2) and at once their
 * col2im into dx, instead of all K rows of dcol (128 KiB, out of L1)
 * before one col2im pass.  Every dcol element is the same sum in the same
 * order, and col2im adds a channel's rows in the same order, so dx is
 * bitwise what the whole-K order gave. */
static void dx_range(void *arg, int64_t b, int64_t e) {
    sbdx *j = arg;
    const conv_geom *g = j->g;
    const int64_t nk = g->kh * g->kw;
    float *dcol = nn_alloc((uint64_t)(nk * j->ldq) * sizeof(float));
    float *panel = nn_alloc((uint64_t)(g->Mg * j->ldq) * sizeof(float));
    if (!dcol || !panel) {
        atomic_store(&j->no_memory, 1);
        nn_free(dcol);
        nn_free(panel);
        return;
    }
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / g->G, gr = it % g->G;
        float *dxs = j->dx + (n * g->C + gr * g->Cg) * g->H * g->W;
        if (!j->add) memset(dxs, 0, (size_t)(g->Cg * g->H * g->W) * sizeof(float));
        for (int64_t c = 0; c < j->nq; c++) {
            int64_t r0 = c * j->rows, r1 = sb_min(g->Ho, r0 + j->rows), np = (r1 - r0) * g->Wo;
            const float *dys = j->dy + (n * g->M + gr * g->Mg) * g->P + r0 * g->Wo;
            for (int64_t l0 = 0; l0 < np; l0 += PW_STRIP)
                pwk_pack(dys + l0, g->P, g->Mg, sb_min(PW_STRIP, np - l0), panel + l0 * g->Mg, 0);
            for (int64_t ci = 0; ci < g->Cg; ci++) {
                for (int64_t blk = 0; blk < j->rb.nb; blk++) {
                    int64_t k0 = st_rb_start(&j->rb, blk);
                    const float *a = j->apk + (gr * g->K + ci * nk + k0) * g->Mg;
                    for (int64_t l0 = 0; l0 < np; l0 += PW_STRIP)
                        pwk_gemm((int)st_rb_size(&j->rb, blk), a, panel + l0 * g->Mg, g->Mg, dcol + k0 * j->ldq + l0,
                                 j->ldq, NULL, 0);
                }
                conv_col2im(MXP_DTYPE_F32, g, dcol, ci, ci + 1, r0, r1, j->ldq, dxs);
            }
        }
    }
    nn_free(dcol);
    nn_free(panel);
}

static int dx_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *w, const float *dy, float *dx, int add) {
    const int64_t nk = g->kh * g->kw;
    sbdx j = {g, dy, NULL, dx, chunk_rows(g), chunk_ld(g), 0, st_row_blocks(nk), add, 0};
    j.nq = (g->Ho + j.rows - 1) / j.rows;
    float *apk = nn_alloc((uint64_t)(g->G * g->K * g->Mg) * sizeof(float));
    if (!apk) return NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for transposed weights");
    for (int64_t gr = 0; gr < g->G; gr++)
        for (int64_t ci = 0; ci < g->Cg; ci++)
            for (int64_t blk = 0; blk < j.rb.nb; blk++) {
                int64_t k0 = ci * nk + st_rb_start(&j.rb, blk), mbs = st_rb_size(&j.rb, blk);
                float *dst = apk + (gr * g->K + k0) * g->Mg;
                for (int64_t m = 0; m < g->Mg; m++)
                    for (int64_t i = 0; i < mbs; i++) dst[m * mbs + i] = w[(gr * g->Mg + m) * g->K + k0 + i];
            }
    j.apk = apk;
    int st = nn_parallel(ctx, g->N * g->G, 1, dx_range, &j);
    if (st >= 0 && atomic_load(&j.no_memory))
        st = NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for a %lld x %lld column chunk", (long long)nk,
                    (long long)j.ldq);
    nn_free(apk);
    return st;
}

/* ------------------------------------------------------------------ entry */
int st_backward_run(const mxp_backward_args *a, const conv_geom *g) {
    const conv_params *p = a->params;
    int32_t req_dx = a->req[0], req_dw = a->req[1];
    int32_t req_db = (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    const float *dy = nn_ptr(&a->out_grad[0]);
    int st = MXP_OK;
    if (req_dw != MXP_REQ_NULL || req_db != MXP_REQ_NULL) {
        st = dw_run(a->ctx, g, nn_ptr(&a->in[0]), dy, req_dw != MXP_REQ_NULL ? nn_ptr(&a->in_grad[1]) : NULL,
                    req_dw, req_db != MXP_REQ_NULL ? nn_ptr(&a->in_grad[2]) : NULL, req_db);
        if (st < 0) return st;
    }
    if (req_dx != MXP_REQ_NULL)
        st = dx_run(a->ctx, g, nn_ptr(&a->in[1]), dy, nn_ptr(&a->in_grad[0]), req_dx == MXP_REQ_ADD);
    return st;
}
