/* conv_winograd_wgrad.c — weight and bias gradients of the winograd
 * Convolution impl (float32, 3x3, stride 1, pad <= 2; see conv_winograd.c).
 *
 * Weight gradient in the winograd domain: with the forward tile
 * y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A, the gradient of g is Gᵀ[Σ_tiles (A dy Aᵀ) ⊙
 * (Bᵀ d B)]G.  Per chunk of output tiles and group:
 *   Vt[xi][t][c]  = (Bᵀ d B)[xi]      lane = input channel (16 at a time)
 *   D[xi][mb][t][i] = (A dy Aᵀ)[xi]   lane = output channel, stored as
 *                                     8-channel blocks for broadcasting
 *   dU[xi][m][c] += Σ_t D · Vt        36 GEMMs (8 x Cg, K = tiles) with the
 *                                     same register-blocked kernel as forward
 * or, up to 32 channels a group (use_tl), with the tiles in the lanes:
 *   V[xi][c][t], D[xi][m][t]          the forward's input transform and the
 *                                     dy transform, lane = tile
 *   dU[xi][m][c] += Σ_t D · V         4x4 blocks of (m, c), 16 tiles per
 *                                     FMA, one lane reduction per block and
 *                                     chunk (conv_winograd_tlkern.c)
 * The chunks are cut into WGRAD_PARTS fixed contiguous ranges (fewer when
 * there are fewer chunks), each accumulated into its own dU by whichever
 * thread runs it, so no two threads write one value; the partitions are
 * summed in part order and transformed back (Gᵀ dU G) at the end, in
 * parallel over output channels.  The summation order therefore depends
 * neither on scheduling nor on the thread count: the gradient is bitwise
 * reproducible (a resumed training run continues exactly).
 * Bias gradient: per output channel, sums of dy in 16 float lanes per
 * plane (tiles in the lanes: of frequency (1,1) of A dy Aᵀ, the tile's
 * sum), added across samples (chunks) in double. */
#include "conv.h"
#include "conv_winograd.h"

/* multiplications, not divisions (no -ffast-math to turn them into each other) */
#define K6 (1.0f / 6.0f)
#define K12 (1.0f / 12.0f)
#define K24 (1.0f / 24.0f)

#include "nn_simd.h"

#include <stdatomic.h>

/* Fixed partition count: enough items for 2-4 threads; fixed so that the
 * sum order (and so every bit of dW) is the same whatever the threads. */
#define WGRAD_PARTS 4


typedef struct gjob {
    const wplan *p;
    const float *x, *dy;
    float *part;            /* [P][G][36][Mgp][Cgp] */
    double *dbp;            /* [P][M] bias-gradient partials, or NULL */
    int64_t Cgp, nmb2;      /* Cg padded to 16; 8-filter blocks rounded up to even */
    uint64_t part_n;        /* floats per partition */
    int64_t nparts;
    atomic_int failed;      /* an item could not get its scratch */
} gjob;

/* Partition `part`'s weight-gradient sums (and bias sums, or NULL),
 * zeroed: each partition accumulates into its own. */
static float *part_begin(const gjob *j, int64_t part, double **db) {
    float *dU = j->part + part * j->part_n;
    *db = j->dbp ? j->dbp + part * j->p->M : NULL;
    memset(dU, 0, j->part_n * sizeof(float));
    if (*db) memset(*db, 0, (size_t)j->p->M * sizeof(double));
    return dU;
}

/* Transforms of one sample's run of tiles [i0, i1) in the chunk, group g:
 * Vt[xi][i][c] (lanes = 16 input channels) and D[xi][mb][i][8] (lanes = 16
 * filters, split into two 8-blocks).  The run's rows of 16 channel planes
 * are staged zero-padded at a time, so the gathers need no bounds checks;
 * stx holds 16 x wino_max_rows rows of Wp, sty 16 x as many rows of Wq. */
static void transform_run(const gjob *j, int64_t g, const wtile *tl, int64_t i0, int64_t i1, int64_t rows,
                          float *Vt, float *D, float *stx, float *sty, double *db) {
    const wplan *p = j->p;
    int64_t tc = p->tc, Cgp = j->Cgp, Wp = wino_stage_w(p), Wq = 4 * p->tw + 4, R = wino_max_rows(p);
    int64_t n = tl[i0].n, plane = p->H * p->W, oplane = p->Ho * p->Wo, orows = rows - 2;
    const float *src[16];
    for (int64_t c0 = 0; c0 < Cgp; c0 += 16) {
        for (int64_t l = 0; l < 16; l++) {
            if (c0 + l < p->Cg)
                wino_stage(j->x + (n * p->C + g * p->Cg + c0 + l) * plane, p->H, p->W, tl[i0].ih, p->pw, (int)rows, Wp,
                           stx + l * R * Wp, c0 == 0);
            else memset(stx + l * R * Wp, 0, (size_t)(rows * Wp) * sizeof(float));
        }
        for (int64_t l = 0; l < 16 && c0 + 16 + l < p->Cg; l++)
            wino_prefetch_rows(j->x + (n * p->C + g * p->Cg + c0 + 16 + l) * plane, p->H, p->W, tl[i0].ih, rows);
        for (int64_t i = i0; i < i1; i++) {
            for (int64_t l = 0; l < 16; l++) src[l] = stx + (l * R + tl[i].srow) * Wp + tl[i].ow;
            wino_in_tf16(src, Wp, Vt + i * Cgp + c0, tc * Cgp);
        }
    }
    for (int64_t m0 = 0; m0 < p->Mgp; m0 += 16) {
        for (int64_t l = 0; l < 16; l++) {
            if (m0 + l < p->Mg)
                wino_stage(j->dy + (n * p->M + g * p->Mg + m0 + l) * oplane, p->Ho, p->Wo, tl[i0].oh, 0, (int)orows, Wq,
                           sty + l * R * Wq, m0 == 0);
            else memset(sty + l * R * Wq, 0, (size_t)(orows * Wq) * sizeof(float));
        }
        for (int64_t l = 0; db && l < 16 && m0 + l < p->Mg; l++) { /* Σ dy over the run's own 4x4 tiles */
            double acc = 0;
            for (int64_t i = i0; i < i1; i++) {
                const float *b = sty + (l * R + tl[i].srow) * Wq + tl[i].ow;
                float f = 0.0f;
                for (int r = 0; r < 4; r++, b += Wq) f += (b[0] + b[1]) + (b[2] + b[3]);
                acc += f;
            }
            db[g * p->Mg + m0 + l] += acc;
        }
        for (int64_t l = 0; l < 16 && m0 + 16 + l < p->Mg; l++)
            wino_prefetch_rows(j->dy + (n * p->M + g * p->Mg + m0 + 16 + l) * oplane, p->Ho, p->Wo, tl[i0].oh, orows);
        for (int64_t i = i0; i < i1; i++) {
            for (int64_t l = 0; l < 16; l++) src[l] = sty + (l * R + tl[i].srow) * Wq + tl[i].ow;
            wino_dy_tf16(src, Wq, D + ((m0 / 8) * tc + i) * 8, tc * 8, j->nmb2 * tc * 8);
        }
    }
}

static void part_range(void *arg, int64_t b, int64_t e) {
    gjob *j = arg; const wplan *p = j->p;
    int64_t tc = p->tc, Cgp = j->Cgp, Wp = wino_stage_w(p), Wq = 4 * p->tw + 4;
    uint64_t nV = 36ull * (uint64_t)(tc * Cgp), nD = 36ull * (uint64_t)(j->nmb2 * tc * 8);
    uint64_t nS = (uint64_t)(16 * wino_max_rows(p) * (Wp + Wq));
    float *buf = nn_alloc((nV + nD + nS) * sizeof(float) + (uint64_t)tc * sizeof(wtile));
    if (!buf) { /* an item cannot return a status: wino_weight_grad reports it */
        atomic_store(&j->failed, 1);
        return;
    }
    float *Vt = buf, *D = Vt + nV, *stx = D + nD, *sty = stx + 16 * wino_max_rows(p) * Wp;
    wtile *tl = (wtile *)(void *)(sty + 16 * wino_max_rows(p) * Wq);
    for (int64_t part = b; part < e; part++) {
        double *db;
        float *dU = part_begin(j, part, &db);
        int64_t ch1 = (part + 1) * p->nchunk / j->nparts;
        for (int64_t ch = part * p->nchunk / j->nparts; ch < ch1; ch++) {
            int64_t t0 = ch * tc, nt = p->T - t0 < tc ? p->T - t0 : tc;
            wino_tiles_decode(p, t0, nt, tl);
            for (int64_t g = 0; g < p->G; g++) {
                for (int64_t i0 = 0, i1, rows; i0 < nt; i0 = i1) {
                    i1 = wino_run_end(tl, i0, nt, &rows);
                    transform_run(j, g, tl, i0, i1, rows, Vt, D, stx, sty, db);
                }
                for (int xi = 0; xi < 36; xi++)
                    for (int64_t mb = 0; mb < p->nmb; mb++)
                        wino_gemm8(nt, D + (xi * j->nmb2 + mb) * tc * 8, Vt + xi * tc * Cgp, Cgp,
                                   dU + ((g * 36 + xi) * p->Mgp + mb * 8) * Cgp, Cgp, Cgp, 1);
            }
        }
    }
    nn_free(buf);
}

/* ---- tiles in the lanes (few channels) ----
 * Per chunk and group: V[xi][Cb][ld] by the forward's input transform
 * (lane = tile), D[xi][Mb][ld] the same way from dy (padded lanes gather a
 * zero tile, so they add nothing), then per frequency the 4x4-blocked
 * product of conv_winograd_tlkern.c into the part's dU.  The bias
 * gradient is Σ_t D[7][m][t]: frequency (1,1) of A dy Aᵀ is the tile's sum
 * (row 1 of A is all ones). */
static void dy_chunk(const gjob *j, int64_t g, const wtile *tl, int64_t nt, int64_t ld, int64_t Mb, float *D,
                     float *st, const float **tp, const float *zero) {
    const wplan *p = j->p;
    int64_t Wq = 4 * p->tw + 4, oplane = p->Ho * p->Wo;
    const float *src[16];
    for (int64_t m = 0; m < p->Mg; m++) {
        float *dst = st;
        for (int64_t i = 0, e, rows; i < nt; i = e) {
            e = wino_run_end(tl, i, nt, &rows);
            rows -= 2; /* 4-row output tiles where the input's are 6 */
            wino_stage(j->dy + (tl[i].n * p->M + g * p->Mg + m) * oplane, p->Ho, p->Wo, tl[i].oh, 0, (int)rows, Wq, dst,
                       m == 0);
            if (m == 0) for (int64_t k = i; k < e; k++) tp[k] = dst + tl[k].srow * Wq + tl[k].ow;
            dst += rows * Wq;
        }
        if (m + 1 < p->Mg)
            for (int64_t i = 0, e, rows; i < nt; i = e) {
                e = wino_run_end(tl, i, nt, &rows);
                wino_prefetch_rows(j->dy + (tl[i].n * p->M + g * p->Mg + m + 1) * oplane, p->Ho, p->Wo, tl[i].oh, rows - 2);
            }
        for (int64_t l0 = 0; l0 < ld; l0 += 16) {
            /* runs of 8 or 4 adjacent tiles: as in wino_input_chunk */
            if (l0 + 16 <= nt && wino_runs_of(tp + l0, 8)) {
                wino_dy_tf16_rows8(tp[l0], tp[l0 + 8], Wq, D + m * ld + l0, 8, Mb * ld);
                continue;
            }
            if (l0 + 16 <= nt && wino_runs_of(tp + l0, 4)) {
                const float *run[4] = { tp[l0], tp[l0 + 4], tp[l0 + 8], tp[l0 + 12] };
                wino_dy_tf16_rows4(run, Wq, D + m * ld + l0, 8, Mb * ld);
                continue;
            }
            for (int64_t l = 0; l < 16; l++) src[l] = l0 + l < nt ? tp[l0 + l] : zero;
            wino_dy_tf16(src, Wq, D + m * ld + l0, 8, Mb * ld);
        }
    }
}

static void part_range_tl(void *arg, int64_t b, int64_t e) {
    gjob *j = arg; const wplan *p = j->p;
    int64_t tc = p->tc, Cgp = j->Cgp, Mb = (p->Mg + 3) / 4 * 4, Cb = (p->Cg + 3) / 4 * 4;
    int64_t Wq = 4 * p->tw + 4, R = wino_max_rows(p);
    uint64_t nV = 36ull * (uint64_t)(Cb * tc), nD = 36ull * (uint64_t)(Mb * tc);
    uint64_t nS = (uint64_t)(R * (wino_stage_w(p) + Wq)), nZ = (uint64_t)(4 * Wq);
    float *buf = nn_alloc((nV + nD + nS + nZ) * sizeof(float) + (uint64_t)tc * (sizeof(wtile) + sizeof(float *)));
    if (!buf) { /* an item cannot return a status: wino_weight_grad reports it */
        atomic_store(&j->failed, 1);
        return;
    }
    float *V = buf, *D = V + nV, *stx = D + nD, *sty = stx + R * wino_stage_w(p), *zero = sty + R * Wq;
    wtile *tl = (wtile *)(void *)(zero + nZ);
    const float **tp = (const float **)(void *)(tl + tc);
    /* channel rows beyond Cg / Mg are never written: zero them once (only
     * them: every other row is rewritten, all ld lanes, for each chunk, and
     * zeroing the whole 1.5 MiB of V and D per item cost ~1% of a ResNet-20
     * training step) */
    for (int xi = 0; xi < 36; xi++) {
        if (Cb > p->Cg) memset(V + (xi * Cb + p->Cg) * tc, 0, (size_t)((Cb - p->Cg) * tc) * sizeof(float));
        if (Mb > p->Mg) memset(D + (xi * Mb + p->Mg) * tc, 0, (size_t)((Mb - p->Mg) * tc) * sizeof(float));
    }
    memset(zero, 0, nZ * sizeof(float));
    for (int64_t part = b; part < e; part++) {
        double *db;
        float *dU = part_begin(j, part, &db);
        int64_t ch1 = (part + 1) * p->nchunk / j->nparts;
        for (int64_t ch = part * p->nchunk / j->nparts; ch < ch1; ch++) {
            /* ld = tc even for a short last chunk: the rows keep their
             * places, so the padded channel rows stay zero */
            int64_t t0 = ch * tc, nt = p->T - t0 < tc ? p->T - t0 : tc, ld = tc;
            wino_tiles_decode(p, t0, nt, tl);
            for (int64_t g = 0; g < p->G; g++) {
                wino_input_chunk(p, j->x, g, tl, nt, ld, Cb, V, stx, tp);
                dy_chunk(j, g, tl, nt, ld, Mb, D, sty, tp, zero);
                for (int64_t m = 0; db && m < p->Mg; m++) {
                    const float *s = D + (7 * Mb + m) * ld;
                    v16 acc = {0};
                    for (int64_t t = 0; t < ld; t += 16) acc += *(const v16u *)(const void *)(s + t);
                    float f = 0.0f;
                    for (int l = 0; l < 16; l++) f += acc[l];
                    db[g * p->Mg + m] += f;
                }
                for (int xi = 0; xi < 36; xi++)
                    wino_tl_product(Mb, Cb, ld, D + xi * Mb * ld, V + xi * Cb * ld,
                                    dU + (g * 36 + xi) * p->Mgp * Cgp, Cgp);
            }
        }
    }
    nn_free(buf);
}

typedef struct rjob { const gjob *j; int64_t P; float *dw; int32_t req; atomic_int failed; } rjob;

/* dw[g*Mg+m][c] = Gᵀ (Σ_parts dU[g][·][m][c]) G for items (g, m); the
 * partition sums run along contiguous channel rows first. */
static void reduce_range(void *arg, int64_t b, int64_t e) {
    const rjob *r = arg; const gjob *j = r->j; const wplan *p = j->p;
    int64_t Cgp = j->Cgp;
    float *u = nn_alloc(36ull * (uint64_t)Cgp * sizeof(float));
    if (!u) {
        atomic_store(&((rjob *)arg)->failed, 1);
        return;
    }
    for (int64_t it = b; it < e; it++) {
        int64_t g = it / p->Mg, m = it % p->Mg;
        for (int xi = 0; xi < 36; xi++) {
            float *ux = u + xi * Cgp;
            const float *s0 = j->part + ((g * 36 + xi) * p->Mgp + m) * Cgp;
            memcpy(ux, s0, (size_t)p->Cg * sizeof(float));
            for (int64_t q = 1; q < r->P; q++) {
                const float *sq = s0 + q * j->part_n;
                for (int64_t c = 0; c < p->Cg; c++) ux[c] += sq[c];
            }
        }
        for (int64_t c = 0; c < p->Cg; c++) {
            float t[6][3];
            for (int i = 0; i < 6; i++) { /* t = u G (6x3) */
                float v0 = u[(i * 6 + 0) * Cgp + c], v1 = u[(i * 6 + 1) * Cgp + c], v2 = u[(i * 6 + 2) * Cgp + c];
                float v3 = u[(i * 6 + 3) * Cgp + c], v4 = u[(i * 6 + 4) * Cgp + c], v5 = u[(i * 6 + 5) * Cgp + c];
                t[i][0] = v0 * 0.25f - v1 * K6 - v2 * K6 + v3 * K24 + v4 * K24;
                t[i][1] = -v1 * K6 + v2 * K6 + v3 * K12 - v4 * K12;
                t[i][2] = -v1 * K6 - v2 * K6 + v3 * K6 + v4 * K6 + v5;
            }
            float *d = r->dw + ((g * p->Mg + m) * p->Cg + c) * 9;
            for (int q = 0; q < 3; q++) { /* dW = Gᵀ t */
                float k0 = t[0][q] * 0.25f - t[1][q] * K6 - t[2][q] * K6 + t[3][q] * K24 + t[4][q] * K24;
                float k1 = -t[1][q] * K6 + t[2][q] * K6 + t[3][q] * K12 - t[4][q] * K12;
                float k2 = -t[1][q] * K6 - t[2][q] * K6 + t[3][q] * K6 + t[4][q] * K6 + t[5][q];
                NN_STORE(r->req, d[q], k0);
                NN_STORE(r->req, d[3 + q], k1);
                NN_STORE(r->req, d[6 + q], k2);
            }
        }
    }
    nn_free(u);
}

/* Chunk size: a chunk's transforms (Vt and D, 36*4*(Cgp + 2*8*nmb2/2)
 * bytes per tile) and a partition's dU share the L2 when dU is small;
 * when dU cannot stay in L2 anyway it streams once per chunk, so the chunk
 * is made big enough (K = tc per load/store of dU) while Vt and D still
 * fit. */
/* Tiles in the lanes up to 32 channels a group, where the channel-in-lanes
 * product was the slower: forward+backward of ResNet-20's 16-channel 32x32
 * layer (batch 64, one thread, fastest of 25 runs) 8.3-9.3 -> 7.0-7.6 ms,
 * of its 32-channel 16x16 layer 5.2-5.4 -> 4.5-4.7 ms; at 64 channels on
 * 8x8 the other way round (3.7-3.8 against 4.0-4.2 ms). */
static int use_tl(const wplan *p) { return p->Cg <= 32 && p->Mg <= 32; }

void wino_wgrad_plan(wplan *p) {
    if (use_tl(p)) {
        int64_t tile = 36 * 4 * ((p->Cg + 3) / 4 * 4 + (p->Mg + 3) / 4 * 4);
        wino_plan_make(p, p->N, p->C, p->H, p->W, p->M, p->G, p->ph, p->pw, 1536ll << 10, tile);
        return;
    }
    int64_t Cgp = (p->Cg + 15) / 16 * 16, Mg16 = (p->Mg + 15) / 16 * 16;
    int64_t du = 36 * 4 * p->G * p->Mgp * Cgp, tile = 36 * 4 * (Cgp + Mg16);
    int64_t budget = du > (1ll << 20) ? (1200ll << 10) : (1600ll << 10) - du;
    wino_plan_make(p, p->N, p->C, p->H, p->W, p->M, p->G, p->ph, p->pw, budget, tile);
}

int wino_weight_grad(const mxp_op_ctx *ctx, const wplan *p, const float *x, const float *dy, float *dw, int32_t req,
                     float *db, int32_t rq_db) {
    gjob j;
    memset(&j, 0, sizeof j);
    j.p = p; j.x = x; j.dy = dy; j.Cgp = (p->Cg + 15) / 16 * 16; j.nmb2 = (p->nmb + 1) / 2 * 2;
    j.part_n = 36ull * (uint64_t)(p->G * p->Mgp * j.Cgp);
    int64_t P = p->nchunk < WGRAD_PARTS ? p->nchunk : WGRAD_PARTS;
    j.nparts = P;
    /* double partials first: 8-byte aligned whatever part_n is */
    uint64_t dbn = db ? (uint64_t)(P * p->M) : 0;
    char *mem = nn_alloc(dbn * sizeof(double) + (uint64_t)P * j.part_n * sizeof(float));
    if (!mem) return NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for weight-gradient partials");
    j.dbp = db ? (double *)(void *)mem : NULL;
    j.part = (float *)(void *)(mem + dbn * sizeof(double));
    int st = nn_parallel(ctx, P, 1, use_tl(p) ? part_range_tl : part_range, &j);
    if (st == MXP_OK && !atomic_load(&j.failed)) {
        rjob r = { &j, P, dw, req, 0 };
        st = nn_parallel(ctx, p->G * p->Mg, 4, reduce_range, &r);
        if (st == MXP_OK && atomic_load(&r.failed)) atomic_store(&j.failed, 1);
    }
    if (st == MXP_OK && atomic_load(&j.failed))
        st = NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for weight-gradient scratch");
    if (st == MXP_OK && db)
        for (int64_t m = 0; m < p->M; m++) {
            double acc = 0;
            for (int64_t q = 0; q < P; q++) acc += j.dbp[q * p->M + m];
            NN_STORE(rq_db, db[m], (float)acc);
        }
    nn_free(mem);
    return st;
}

typedef struct bjob { int64_t N, M, P; const float *dy; float *db; int32_t req; } bjob;

static void bias_range(void *arg, int64_t b, int64_t e) {
    const bjob *j = arg;
    for (int64_t m = b; m < e; m++) {
        double acc = 0;
        for (int64_t n = 0; n < j->N; n++) {
            const float *s = j->dy + (n * j->M + m) * j->P;
            v16 v = {0};
            int64_t q = 0;
            for (; q + 16 <= j->P; q += 16) v += *(const v16u *)(const void *)(s + q);
            float f = 0.0f;
            for (; q < j->P; q++) f += s[q];
            for (int l = 0; l < 16; l++) f += v[l];
            acc += f;
        }
        NN_STORE(j->req, j->db[m], (float)acc);
    }
}

int wino_bias_grad(const mxp_op_ctx *ctx, int64_t N, int64_t M, int64_t P, const float *dy, float *db, int32_t req) {
    bjob j = { N, M, P, dy, db, req };
    return nn_parallel(ctx, M, 4, bias_range, &j);
}
