/* conv_gemm.c — Convolution impl "gemm": im2col + OpenBLAS GEMM (f32, f64),
 * forward and backward (data, weight, bias), any 2-D configuration
 * (padding, stride, dilation, groups).
 *
 * Blocking keeps the column buffer within min(workspace MB, 16 MiB):
 *   - 1x1 stride-1 unpadded kernels need no column buffer (data is the
 *     column matrix);
 *   - when one sample's column matrix is small (< 1 MiB; LeNet-like small
 *     C_in / small images / big batch) the batch is cut into blocks of s
 *     whole samples (col [K][s*P] + tmp [Mg][s*P] about 1 MiB, so both
 *     stay in L2) and the blocks are independent parallel_for items: each
 *     does im2col, one single-threaded GEMM and the scatter to NCHW (bias
 *     fused) for its samples.  Backward per block: gather dy, partial dW
 *     and db of the block (summed over blocks at the end, so no two
 *     threads write one value), dx through col2im into the block's own
 *     samples.  Buffers come from the host pool per chunk, not workspace;
 *   - otherwise one sample at a time, split over output rows when needed.
 * im2col/col2im and scatters run on ctx->parallel_for; each GEMM is split
 * into column/row blocks of single-threaded OpenBLAS calls on
 * ctx->parallel_for too (nn_gemm_par): OpenBLAS's own pool is switched off
 * at pack init because the runtime owns the cores (docs/engine.md). */
#include "conv.h"

#define CONV_WS_CAP (16ull << 20)
#define CONV_BATCH_BELOW (1ull << 20)
#define CONV_BLOCK_BYTES (1ull << 20) /* col + tmp of one sample block: L2-resident */

typedef struct gemm_plan {
    int one_by_one;
    int64_t sb;   /* > 0: samples per block, sample blocks on parallel_for */
    int64_t rb;   /* output rows per block (sb == 0)      */
    uint64_t ws;  /* bytes                                */
} gemm_plan;

static void plan_gemm(const conv_geom *g, const conv_params *p, int32_t dt, gemm_plan *pl) {
    uint64_t es = mxp_dtype_size(dt);
    uint64_t cap = (uint64_t)p->workspace << 20;
    if (cap > CONV_WS_CAP || cap == 0) cap = CONV_WS_CAP;
    memset(pl, 0, sizeof *pl);
    pl->one_by_one = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    pl->rb = g->Ho;
    if (pl->one_by_one) return;
    uint64_t col_sample = (uint64_t)g->K * (uint64_t)g->P * es;
    if (col_sample < CONV_BATCH_BELOW && g->N > 1) {
        /* blocks of s samples, about CONV_BLOCK_BYTES each, at least 4
         * blocks when N allows (two threads, dynamic balance) */
        uint64_t per = (uint64_t)(g->K + g->Mg) * (uint64_t)g->P * es;
        int64_t smax = (int64_t)(CONV_BLOCK_BYTES / per);
        if (smax < 1) smax = 1;
        int64_t nblk = (g->N + smax - 1) / smax;
        if (nblk < 4) nblk = g->N < 4 ? g->N : 4;
        pl->sb = (g->N + nblk - 1) / nblk;
        pl->ws = 0;
        return;
    }
    uint64_t row = (uint64_t)g->K * (uint64_t)g->Wo * es;
    int64_t rb = (int64_t)(cap / row);
    if (rb < 1) rb = 1;
    if (rb > g->Ho) rb = g->Ho;
    pl->rb = rb;
    pl->ws = row * (uint64_t)rb;
}

uint64_t conv_gemm_workspace_bytes(const conv_geom *g, const conv_params *p, int32_t dt) {
    gemm_plan pl; plan_gemm(g, p, dt, &pl); return pl.ws;
}

/* ---- parallel helpers over (sample-in-block, channel) items ---- */
typedef struct coljob {
    int32_t dt;
    const conv_geom *g;
    const char *x;      /* data of the block's first sample, group's first channel */
    char *dx;
    char *col;
    int64_t ld, r0, r1, nb_unused;
    uint64_t es;
} coljob;

static void im2col_range(void *arg, int64_t b, int64_t e) {
    const coljob *j = arg; const conv_geom *g = j->g;
    for (int64_t it = b; it < e; it++) {
        int64_t s = it / g->Cg, c = it % g->Cg;
        conv_im2col(j->dt, g, j->x + (uint64_t)(s * g->C * g->H * g->W) * j->es, c, c + 1, j->r0, j->r1,
                    j->col + (uint64_t)(c * g->kh * g->kw * j->ld + s * g->P) * j->es, j->ld);
    }
}
static void col2im_range(void *arg, int64_t b, int64_t e) {
    const coljob *j = arg; const conv_geom *g = j->g;
    for (int64_t it = b; it < e; it++) {
        int64_t s = it / g->Cg, c = it % g->Cg;
        conv_col2im(j->dt, g, j->col + (uint64_t)(c * g->kh * g->kw * j->ld + s * g->P) * j->es, c, c + 1,
                    j->r0, j->r1, j->ld, j->dx + (uint64_t)(s * g->C * g->H * g->W) * j->es);
    }
}

typedef struct biasjob { int32_t dt; const conv_geom *g; char *y; const char *b; } biasjob;
static void bias_range(void *arg, int64_t b, int64_t e) {
    const biasjob *j = arg; const conv_geom *g = j->g;
    NN_TYPED(j->dt, T, for (int64_t it = b; it < e; it++) {
        T v = ((const T *)j->b)[it % g->M]; T *yy = (T *)j->y + it * g->P;
        for (int64_t q = 0; q < g->P; q++) yy[q] += v; });
}

/* ---- sample blocks (plan sb > 0): each block is one parallel_for item ---- */
typedef struct sbjob {
    int32_t dt, req, rq_dx, rq_dw, rq_db;
    const conv_geom *g;
    int64_t s;                 /* samples per block */
    uint64_t es;
    const char *x, *w, *bias, *dy;
    char *y, *dx;
    char *dwp, *dbp;           /* per-block partial dW [nblk][M][K], db [nblk][M] (f64) */
} sbjob;

/* im2col of samples [n0, n0+nb), group gr, into col [K][nb*P] */
static void block_im2col(const sbjob *j, int64_t n0, int64_t nb, int64_t gr, char *col) {
    const conv_geom *g = j->g;
    int64_t ld = nb * g->P;
    for (int64_t si = 0; si < nb; si++) {
        const char *xs = j->x + ((uint64_t)((n0 + si) * g->C + gr * g->Cg) * (uint64_t)(g->H * g->W)) * j->es;
        conv_im2col(j->dt, g, xs, 0, g->Cg, 0, g->Ho, col + (uint64_t)(si * g->P) * j->es, ld);
    }
}

static void fwd_block_range(void *arg, int64_t b, int64_t e) {
    const sbjob *j = arg; const conv_geom *g = j->g;
    uint64_t ldmax = (uint64_t)(j->s * g->P);
    char *col = nn_alloc((uint64_t)(g->K + g->Mg) * ldmax * j->es);
    if (!col) return; /* cannot report from a chunk; the host pool does not fail in practice */
    char *tmp = col + (uint64_t)g->K * ldmax * j->es;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t n0 = blk * j->s, nb = g->N - n0 < j->s ? g->N - n0 : j->s, ld = nb * g->P;
        for (int64_t gr = 0; gr < g->G; gr++) {
            block_im2col(j, n0, nb, gr, col);
            nn_gemm(j->dt, 0, 0, g->Mg, ld, g->K, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * j->es, g->K,
                    col, ld, 0.0, tmp, ld);
            NN_TYPED(j->dt, T,
                for (int64_t m = 0; m < g->Mg; m++) {
                    int64_t mo = gr * g->Mg + m;
                    T bv = j->bias ? ((const T *)j->bias)[mo] : (T)0;
                    for (int64_t si = 0; si < nb; si++) {
                        const T *t = (const T *)tmp + m * ld + si * g->P;
                        T *yy = (T *)j->y + ((n0 + si) * g->M + mo) * g->P;
                        if (j->req == MXP_REQ_ADD) for (int64_t q = 0; q < g->P; q++) yy[q] += t[q] + bv;
                        else for (int64_t q = 0; q < g->P; q++) yy[q] = t[q] + bv;
                    }
                });
        }
    }
    nn_free(col);
}

static void bwd_block_range(void *arg, int64_t b, int64_t e) {
    const sbjob *j = arg; const conv_geom *g = j->g;
    uint64_t ldmax = (uint64_t)(j->s * g->P);
    char *col = nn_alloc((uint64_t)(g->K + g->Mg) * ldmax * j->es);
    if (!col) return;
    char *tmp = col + (uint64_t)g->K * ldmax * j->es;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t n0 = blk * j->s, nb = g->N - n0 < j->s ? g->N - n0 : j->s, ld = nb * g->P;
        for (int64_t gr = 0; gr < g->G; gr++) {
            /* tmp [Mg][nb*P] = dy of the block's samples, this group */
            NN_TYPED(j->dt, T,
                for (int64_t m = 0; m < g->Mg; m++) for (int64_t si = 0; si < nb; si++)
                    memcpy((T *)tmp + m * ld + si * g->P, (const T *)j->dy + ((n0 + si) * g->M + gr * g->Mg + m) * g->P,
                           (size_t)g->P * sizeof(T));
                if (j->rq_db != MXP_REQ_NULL)
                    for (int64_t m = 0; m < g->Mg; m++) {
                        double acc = 0; const T *t = (const T *)tmp + m * ld;
                        for (int64_t q = 0; q < ld; q++) acc += t[q];
                        ((double *)j->dbp)[blk * g->M + gr * g->Mg + m] = acc;
                    });
            if (j->rq_dw != MXP_REQ_NULL) {
                block_im2col(j, n0, nb, gr, col);
                nn_gemm(j->dt, 0, 1, g->Mg, g->K, ld, 1.0, tmp, ld, col, ld, 0.0,
                        j->dwp + (uint64_t)((blk * g->M + gr * g->Mg) * g->K) * j->es, g->K);
            }
            if (j->rq_dx != MXP_REQ_NULL) {
                nn_gemm(j->dt, 1, 0, g->K, ld, g->Mg, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * j->es, g->K,
                        tmp, ld, 0.0, col, ld);
                for (int64_t si = 0; si < nb; si++) {
                    char *dxs = j->dx + ((uint64_t)((n0 + si) * g->C + gr * g->Cg) * (uint64_t)(g->H * g->W)) * j->es;
                    if (j->rq_dx != MXP_REQ_ADD) memset(dxs, 0, (size_t)(g->Cg * g->H * g->W) * j->es);
                    conv_col2im(j->dt, g, col + (uint64_t)(si * g->P) * j->es, 0, g->Cg, 0, g->Ho, ld, dxs);
                }
            }
        }
    }
    nn_free(col);
}

/* dw[i] (req) = sum over blocks of the partials */
typedef struct redjob { int32_t dt, req; int64_t nblk, n; const char *part; char *dst; } redjob;
static void reduce_range(void *arg, int64_t b, int64_t e) {
    const redjob *j = arg;
    NN_TYPED(j->dt, T,
        T *d = (T *)j->dst; const T *p = (const T *)j->part;
        for (int64_t i = b; i < e; i++) {
            T acc = j->req == MXP_REQ_ADD ? d[i] : (T)0;
            for (int64_t k = 0; k < j->nblk; k++) acc += p[k * j->n + i];
            d[i] = acc;
        });
}

static int gemm_forward_blocks(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt) {
    const conv_params *p = a->params;
    sbjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.req = a->req[0]; j.g = g; j.s = pl->sb; j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    j.y = nn_ptr(&a->out[0]);
    return nn_parallel(a->ctx, (g->N + j.s - 1) / j.s, 1, fwd_block_range, &j);
}

static int gemm_backward_blocks(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                                int32_t rq_dx, int32_t rq_dw, int32_t rq_db) {
    sbjob j; memset(&j, 0, sizeof j);
    int64_t nblk = (g->N + pl->sb - 1) / pl->sb;
    j.dt = dt; j.rq_dx = rq_dx; j.rq_dw = rq_dw; j.rq_db = rq_db; j.g = g; j.s = pl->sb; j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = nn_ptr(&a->in_grad[0]);
    uint64_t dwn = (uint64_t)(g->M * g->K);
    char *part = nn_alloc((uint64_t)nblk * (dwn * j.es + (uint64_t)g->M * sizeof(double)));
    if (!part) return NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for per-block gradients");
    /* Bias partials (double) first, so they are 8-byte aligned whatever the
     * size of the float dW partials that follow. */
    j.dbp = part; j.dwp = part + (uint64_t)nblk * (uint64_t)g->M * sizeof(double);
    int st = nn_parallel(a->ctx, nblk, 1, bwd_block_range, &j);
    if (st == MXP_OK && rq_dw != MXP_REQ_NULL) {
        redjob r = { dt, rq_dw, nblk, (int64_t)dwn, j.dwp, nn_ptr(&a->in_grad[1]) };
        st = nn_parallel(a->ctx, (int64_t)dwn, 4096, reduce_range, &r);
    }
    if (st == MXP_OK && rq_db != MXP_REQ_NULL)
        NN_TYPED(dt, T, T *db = nn_ptr(&a->in_grad[2]); const double *pb = (const double *)j.dbp;
            for (int64_t m = 0; m < g->M; m++) {
                double acc = 0;
                for (int64_t k = 0; k < nblk; k++) acc += pb[k * g->M + m];
                NN_STORE(rq_db, db[m], (T)acc);
            });
    nn_free(part);
    return st;
}

int conv_gemm_forward_impl(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in[0]);
    gemm_plan pl; plan_gemm(&g, p, dt, &pl);
    if (a->ctx->workspace_bytes < pl.ws)
        return NN_ERR(MXP_EINVAL, "Convolution(gemm): workspace %llu bytes < %llu needed",
                      (unsigned long long)a->ctx->workspace_bytes, (unsigned long long)pl.ws);
    if (pl.sb > 0) return gemm_forward_blocks(a, &g, &pl, dt);
    uint64_t es = mxp_dtype_size(dt);
    const char *x = nn_ptr(&a->in[0]), *w = nn_ptr(&a->in[1]);
    char *y = nn_ptr(&a->out[0]);
    char *col = a->ctx->workspace;
    double beta = a->req[0] == MXP_REQ_ADD ? 1.0 : 0.0;
    uint64_t xs = (uint64_t)(g.C * g.H * g.W), ys = (uint64_t)(g.M * g.P);
    for (int64_t n0 = 0; n0 < g.N; n0++) {
        for (int64_t gr = 0; gr < g.G; gr++) {
            const char *xg = x + ((uint64_t)n0 * xs + (uint64_t)(gr * g.Cg * g.H * g.W)) * es;
            const char *wg = w + (uint64_t)(gr * g.Mg * g.K) * es;
            char *yg = y + ((uint64_t)n0 * ys + (uint64_t)(gr * g.Mg * g.P)) * es;
            if (pl.one_by_one) {
                nn_gemm_par(a->ctx, dt, 0, 0, g.Mg, g.P, g.K, 1.0, wg, g.K, xg, g.P, beta, yg, g.P);
            } else {
                for (int64_t r0 = 0; r0 < g.Ho; r0 += pl.rb) {
                    int64_t r1 = r0 + pl.rb < g.Ho ? r0 + pl.rb : g.Ho, ld = (r1 - r0) * g.Wo;
                    coljob cj = { dt, &g, xg, NULL, col, ld, r0, r1, 0, es };
                    nn_parallel(a->ctx, g.Cg, 1, im2col_range, &cj);
                    nn_gemm_par(a->ctx, dt, 0, 0, g.Mg, ld, g.K, 1.0, wg, g.K, col, ld, beta,
                            yg + (uint64_t)(r0 * g.Wo) * es, g.P);
                }
            }
        }
        if (pl.one_by_one) continue;
    }
    if (!p->no_bias) {
        biasjob bj = { dt, &g, y, nn_ptr(&a->in[2]) };
        nn_parallel(a->ctx, g.N * g.M, 4, bias_range, &bj);
    }
    return MXP_OK;
}

typedef struct dbjob { int32_t dt, req; const conv_geom *g; const char *dy; char *db; } dbjob;
static void db_range(void *arg, int64_t b, int64_t e) {
    const dbjob *j = arg; const conv_geom *g = j->g;
    NN_TYPED(j->dt, T, for (int64_t m = b; m < e; m++) {
        double acc = 0;
        for (int64_t n = 0; n < g->N; n++) { const T *d = (const T *)j->dy + (n * g->M + m) * g->P;
            for (int64_t q = 0; q < g->P; q++) acc += d[q]; }
        NN_STORE(j->req, ((T *)j->db)[m], (T)acc); });
}

int conv_gemm_backward_impl(const mxp_backward_args *a, int skip_dx) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in_grad[0]);
    gemm_plan pl; plan_gemm(&g, p, dt, &pl);
    if (a->ctx->workspace_bytes < pl.ws)
        return NN_ERR(MXP_EINVAL, "Convolution(gemm): workspace %llu bytes < %llu needed",
                      (unsigned long long)a->ctx->workspace_bytes, (unsigned long long)pl.ws);
    uint64_t es = mxp_dtype_size(dt);
    int32_t rq_dx = skip_dx ? MXP_REQ_NULL : a->req[0], rq_dw = a->req[1];
    if (pl.sb > 0)
        return gemm_backward_blocks(a, &g, &pl, dt, rq_dx, rq_dw,
                                    (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL);
    const char *x = nn_ptr(&a->in[0]), *w = nn_ptr(&a->in[1]), *dy = nn_ptr(&a->out_grad[0]);
    char *dx = nn_ptr(&a->in_grad[0]), *dw = nn_ptr(&a->in_grad[1]);
    char *col = a->ctx->workspace;
    uint64_t xs = (uint64_t)(g.C * g.H * g.W), ys = (uint64_t)(g.M * g.P);
    if (rq_dx != MXP_REQ_NULL && rq_dx != MXP_REQ_ADD && !pl.one_by_one) memset(dx, 0, xs * (uint64_t)g.N * es);
    if (rq_dw != MXP_REQ_NULL && rq_dw != MXP_REQ_ADD) memset(dw, 0, (uint64_t)(g.M * g.K) * es);
    if (rq_dx != MXP_REQ_NULL || rq_dw != MXP_REQ_NULL) {
        for (int64_t n0 = 0; n0 < g.N; n0++) {
            for (int64_t gr = 0; gr < g.G; gr++) {
                uint64_t xo = (uint64_t)n0 * xs + (uint64_t)(gr * g.Cg * g.H * g.W);
                const char *xg = x + xo * es;
                char *dxg = dx ? dx + xo * es : NULL;
                const char *wg = w + (uint64_t)(gr * g.Mg * g.K) * es;
                char *dwg = dw ? dw + (uint64_t)(gr * g.Mg * g.K) * es : NULL;
                const char *dyg = dy + ((uint64_t)n0 * ys + (uint64_t)(gr * g.Mg * g.P)) * es;
                if (pl.one_by_one) {
                    if (rq_dw != MXP_REQ_NULL)
                        nn_gemm_par(a->ctx, dt, 0, 1, g.Mg, g.Cg, g.P, 1.0, dyg, g.P, xg, g.P, 1.0, dwg, g.Cg);
                    if (rq_dx != MXP_REQ_NULL)
                        nn_gemm_par(a->ctx, dt, 1, 0, g.Cg, g.P, g.Mg, 1.0, wg, g.K, dyg, g.P,
                                rq_dx == MXP_REQ_ADD ? 1.0 : 0.0, dxg, g.P);
                } else {
                    for (int64_t r0 = 0; r0 < g.Ho; r0 += pl.rb) {
                        int64_t r1 = r0 + pl.rb < g.Ho ? r0 + pl.rb : g.Ho, ld = (r1 - r0) * g.Wo;
                        const char *dyr = dyg + (uint64_t)(r0 * g.Wo) * es;
                        coljob cj = { dt, &g, xg, dxg, col, ld, r0, r1, 0, es };
                        if (rq_dw != MXP_REQ_NULL) {
                            nn_parallel(a->ctx, g.Cg, 1, im2col_range, &cj);
                            nn_gemm_par(a->ctx, dt, 0, 1, g.Mg, g.K, ld, 1.0, dyr, g.P, col, ld, 1.0, dwg, g.K);
                        }
                        if (rq_dx != MXP_REQ_NULL) {
                            nn_gemm_par(a->ctx, dt, 1, 0, g.K, ld, g.Mg, 1.0, wg, g.K, dyr, g.P, 0.0, col, ld);
                            nn_parallel(a->ctx, g.Cg, 1, col2im_range, &cj);
                        }
                    }
                }
            }
        }
    }
    if (!p->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL) {
        dbjob bj = { dt, a->req[2], &g, dy, nn_ptr(&a->in_grad[2]) };
        nn_parallel(a->ctx, g.M, 1, db_range, &bj);
    }
    return MXP_OK;
}

static int gemm_forward(const mxp_forward_args *a) { return conv_gemm_forward_impl(a); }
static int gemm_backward(const mxp_backward_args *a) { return conv_gemm_backward_impl(a, 0); }

static int gemm_workspace(mxp_impl_query_args *a) {
    conv_geom g; conv_geom_init(&g, a->params, &a->in_shapes[0]);
    a->workspace_bytes = conv_gemm_workspace_bytes(&g, a->params, a->in_dtypes[0]);
    return MXP_OK;
}

static int gemm_supports(mxp_impl_query_args *a) {
    if (a->in_dtypes[0] != MXP_DTYPE_F32 && a->in_dtypes[0] != MXP_DTYPE_F64) {
        snprintf(a->reason, a->reason_size, "gemm: dtype %d not supported (float32, float64)", a->in_dtypes[0]);
        return 0;
    }
    return 1;
}

const mxp_op_impl conv_gemm_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "gemm", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .doc = "im2col + OpenBLAS GEMM, batched/row-blocked column buffer",
    .supports = gemm_supports, .workspace = gemm_workspace,
    .forward = gemm_forward, .backward = gemm_backward,
};
