/* conv_gemm.c — Convolution impl "gemm": im2col + OpenBLAS GEMM (f32, f64),
 * forward and backward (data, weight, bias), any 2-D configuration
 * (padding, stride, dilation, groups).  This file plans and dispatches
 * and runs the small-batch row-block loop; the batched loop structures
 * live in conv_gemm_blocks.c and conv_gemm_rows.c.
 *
 * Plans (conv_gemm_plan):
 *   - 1x1 stride-1 unpadded kernels need no column buffer (data is the
 *     column matrix): items (sample, pixel block) on parallel_for, at least
 *     ~8 items so two threads stay balanced (conv_gemm_blocks.c);
 *   - when one sample's column matrix is small (< 1 MiB; LeNet-like small
 *     C_in / small images / big batch) the batch is cut into near-equal
 *     blocks of whole samples sized so col + tmp stay about a quarter of
 *     a 1 MiB L2 (OpenBLAS's packed panels and the data need the rest;
 *     measured best on LeNet's layers), a multiple of 4 blocks (balanced
 *     over 2 or 4 threads), each block an independent parallel_for item
 *     (conv_gemm_blocks.c);
 *   - otherwise, from 4 samples: (sample, output-row block) items with an
 *     L2-sized column buffer per block (conv_gemm_rows.c);
 *   - otherwise (1-3 large samples) one sample at a time, split over
 *     output rows when the column buffer would exceed min(workspace MB,
 *     16 MiB): im2col/col2im on parallel_for over channels and each GEMM
 *     split into column/row blocks of single-threaded OpenBLAS calls
 *     (nn_gemm_par).
 * OpenBLAS's own pool is switched off at pack init because the runtime
 * owns the cores (docs/engine.md).  A null req on data skips the data
 * gradient entirely (the first layer's input never needs it). */
#include "conv_gemm.h"

#define CONV_WS_CAP (16ull << 20)
#define CONV_BATCH_BELOW (1ull << 20)
#define CONV_BLOCK_BYTES (256ull << 10) /* col + tmp of one sample block */
#define CONV_1X1_ITEMS 8                /* at least this many (sample, pixel block) items */
#define CONV_ROW_BYTES (512ull << 10)   /* column buffer of one row block (row items) */
#define CONV_ROWS_MIN_N 4               /* row items from this batch size */

void conv_gemm_plan(const conv_geom *g, const conv_params *p, int32_t dt, gemm_plan *pl) {
    uint64_t es = mxp_dtype_size(dt);
    uint64_t cap = (uint64_t)p->workspace << 20;
    if (cap > CONV_WS_CAP || cap == 0) cap = CONV_WS_CAP;
    memset(pl, 0, sizeof *pl);
    pl->one_by_one = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    pl->rb = g->Ho;
    if (pl->one_by_one) {
        int64_t npb = (CONV_1X1_ITEMS + g->N - 1) / g->N, maxpb = (g->P + 63) / 64;
        if (npb > maxpb) npb = maxpb;
        if (npb < 1) npb = 1;
        int64_t pb = (g->P + npb - 1) / npb;
        if (npb > 1) pb = (pb + 15) / 16 * 16; /* whole register tiles */
        pl->pb = pb; pl->npb = (g->P + pb - 1) / pb;
        return;
    }
    uint64_t col_sample = (uint64_t)g->K * (uint64_t)g->P * es;
    if (col_sample < CONV_BATCH_BELOW && g->N > 1) {
        uint64_t per = (uint64_t)(g->K + g->Mg) * (uint64_t)g->P * es;
        int64_t smax = (int64_t)(CONV_BLOCK_BYTES / per);
        if (smax < 1) smax = 1;
        int64_t nblk = (g->N + smax - 1) / smax;
        nblk = (nblk + 3) / 4 * 4;
        if (nblk > g->N) nblk = g->N;
        pl->nblk = nblk;
        return;
    }
    uint64_t row = (uint64_t)g->K * (uint64_t)g->Wo * es;
    if (g->N >= CONV_ROWS_MIN_N) {
        int64_t rb = (int64_t)(CONV_ROW_BYTES / row);
        if (rb < 1) rb = 1;
        if (rb > g->Ho) rb = g->Ho;
        pl->rows = 1; pl->rb = rb;
        return;
    }
    int64_t rb = (int64_t)(cap / row);
    if (rb < 1) rb = 1;
    if (rb > g->Ho) rb = g->Ho;
    pl->rb = rb;
    pl->ws = row * (uint64_t)rb;
}

uint64_t conv_gemm_workspace_bytes(const conv_geom *g, const conv_params *p, int32_t dt) {
    gemm_plan pl; conv_gemm_plan(g, p, dt, &pl); return pl.ws;
}

/* ---- row-block path: parallel helpers over channel items ---- */
typedef struct coljob {
    int32_t dt;
    const conv_geom *g;
    const char *x;      /* the sample's data, group's first channel */
    char *dx;
    char *col;
    int64_t ld, r0, r1;
    uint64_t es;
} coljob;

static void im2col_range(void *arg, int64_t b, int64_t e) {
    const coljob *j = arg; const conv_geom *g = j->g;
    for (int64_t c = b; c < e; c++)
        conv_im2col(j->dt, g, j->x, c, c + 1, j->r0, j->r1, j->col + (uint64_t)(c * g->kh * g->kw * j->ld) * j->es, j->ld);
}
static void col2im_range(void *arg, int64_t b, int64_t e) {
    const coljob *j = arg; const conv_geom *g = j->g;
    for (int64_t c = b; c < e; c++)
        conv_col2im(j->dt, g, j->col + (uint64_t)(c * g->kh * g->kw * j->ld) * j->es, c, c + 1, j->r0, j->r1, j->ld, j->dx);
}

typedef struct biasjob { int32_t dt; const conv_geom *g; char *y; const char *b; } biasjob;
static void bias_range(void *arg, int64_t b, int64_t e) {
    const biasjob *j = arg; const conv_geom *g = j->g;
    uint64_t es = mxp_dtype_size(j->dt);
    for (int64_t it = b; it < e; it++) {
        int64_t m = it % g->M;
        double v = j->dt == MXP_DTYPE_F32 ? ((const float *)j->b)[m] : ((const double *)j->b)[m];
        conv_gemm_row_bias(j->dt, j->y + (uint64_t)(it * g->P) * es, g->P, v, 1);
    }
}

int conv_gemm_forward_impl(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in[0]);
    gemm_plan pl; conv_gemm_plan(&g, p, dt, &pl);
    if (a->ctx->workspace_bytes < pl.ws)
        return NN_ERR(MXP_EINVAL, "Convolution(gemm): workspace %llu bytes < %llu needed",
                      (unsigned long long)a->ctx->workspace_bytes, (unsigned long long)pl.ws);
    if (pl.one_by_one) return conv_gemm_fwd_1x1(a, &g, &pl, dt);
    if (pl.nblk > 0) return conv_gemm_fwd_blocks(a, &g, &pl, dt);
    if (pl.rows) return conv_gemm_fwd_rows(a, &g, &pl, dt);
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
            for (int64_t r0 = 0; r0 < g.Ho; r0 += pl.rb) {
                int64_t r1 = r0 + pl.rb < g.Ho ? r0 + pl.rb : g.Ho, ld = (r1 - r0) * g.Wo;
                coljob cj = { dt, &g, xg, NULL, col, ld, r0, r1, es };
                if ((st = nn_parallel(a->ctx, g.Cg, 1, im2col_range, &cj)) < 0) return st;
                if ((st = nn_gemm_par(a->ctx, dt, 0, 0, g.Mg, ld, g.K, 1.0, wg, g.K, col, ld, beta,
                                      yg + (uint64_t)(r0 * g.Wo) * es, g.P)) < 0) return st;
            }
        }
    }
    if (!p->no_bias) {
        biasjob bj = { dt, &g, y, nn_ptr(&a->in[2]) };
        return nn_parallel(a->ctx, g.N * g.M, 4, bias_range, &bj);
    }
    return MXP_OK;
}

typedef struct dbjob { int32_t dt, req; const conv_geom *g; const char *dy; char *db; } dbjob;
static void db_range(void *arg, int64_t b, int64_t e) {
    const dbjob *j = arg; const conv_geom *g = j->g;
    uint64_t es = mxp_dtype_size(j->dt);
    for (int64_t m = b; m < e; m++) {
        double acc = 0;
        for (int64_t n = 0; n < g->N; n++)
            acc += conv_gemm_row_sum(j->dt, j->dy + (uint64_t)((n * g->M + m) * g->P) * es, g->P);
        NN_TYPED(j->dt, T, NN_STORE(j->req, ((T *)j->db)[m], (T)acc););
    }
}

int conv_gemm_backward_impl(const mxp_backward_args *a, int skip_dx) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in_grad[0]);
    gemm_plan pl; conv_gemm_plan(&g, p, dt, &pl);
    if (a->ctx->workspace_bytes < pl.ws)
        return NN_ERR(MXP_EINVAL, "Convolution(gemm): workspace %llu bytes < %llu needed",
                      (unsigned long long)a->ctx->workspace_bytes, (unsigned long long)pl.ws);
    uint64_t es = mxp_dtype_size(dt);
    int32_t rq_dx = skip_dx ? MXP_REQ_NULL : a->req[0], rq_dw = a->req[1];
    int32_t rq_db = (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    if (pl.one_by_one) return conv_gemm_bwd_1x1(a, &g, &pl, dt, rq_dx, rq_dw, rq_db);
    if (pl.nblk > 0) return conv_gemm_bwd_blocks(a, &g, &pl, dt, rq_dx, rq_dw, rq_db);
    if (pl.rows) return conv_gemm_bwd_rows(a, &g, &pl, dt, rq_dx, rq_dw, rq_db);
    const char *x = nn_ptr(&a->in[0]), *w = nn_ptr(&a->in[1]), *dy = nn_ptr(&a->out_grad[0]);
    char *dx = nn_ptr(&a->in_grad[0]), *dw = nn_ptr(&a->in_grad[1]);
    char *col = a->ctx->workspace;
    uint64_t xs = (uint64_t)(g.C * g.H * g.W), ys = (uint64_t)(g.M * g.P);
    if (rq_dx != MXP_REQ_NULL && rq_dx != MXP_REQ_ADD) memset(dx, 0, xs * (uint64_t)g.N * es);
    if (rq_dw != MXP_REQ_NULL && rq_dw != MXP_REQ_ADD) memset(dw, 0, (uint64_t)(g.M * g.K) * es);
    for (int64_t n0 = 0; n0 < g.N && (rq_dx != MXP_REQ_NULL || rq_dw != MXP_REQ_NULL); n0++) {
        for (int64_t gr = 0; gr < g.G; gr++) {
            uint64_t xo = (uint64_t)n0 * xs + (uint64_t)(gr * g.Cg * g.H * g.W);
            const char *xg = x + xo * es;
            char *dxg = dx ? dx + xo * es : NULL;
            const char *wg = w + (uint64_t)(gr * g.Mg * g.K) * es;
            char *dwg = dw ? dw + (uint64_t)(gr * g.Mg * g.K) * es : NULL;
            const char *dyg = dy + ((uint64_t)n0 * ys + (uint64_t)(gr * g.Mg * g.P)) * es;
            for (int64_t r0 = 0; r0 < g.Ho; r0 += pl.rb) {
                int64_t r1 = r0 + pl.rb < g.Ho ? r0 + pl.rb : g.Ho, ld = (r1 - r0) * g.Wo;
                const char *dyr = dyg + (uint64_t)(r0 * g.Wo) * es;
                coljob cj = { dt, &g, xg, dxg, col, ld, r0, r1, es };
                if (rq_dw != MXP_REQ_NULL) {
                    if ((st = nn_parallel(a->ctx, g.Cg, 1, im2col_range, &cj)) < 0) return st;
                    if ((st = nn_gemm_par(a->ctx, dt, 0, 1, g.Mg, g.K, ld, 1.0, dyr, g.P, col, ld, 1.0, dwg, g.K)) < 0)
                        return st;
                }
                if (rq_dx != MXP_REQ_NULL) {
                    if ((st = nn_gemm_par(a->ctx, dt, 1, 0, g.K, ld, g.Mg, 1.0, wg, g.K, dyr, g.P, 0.0, col, ld)) < 0)
                        return st;
                    if ((st = nn_parallel(a->ctx, g.Cg, 1, col2im_range, &cj)) < 0) return st;
                }
            }
        }
    }
    if (rq_db != MXP_REQ_NULL) {
        dbjob bj = { dt, rq_db, &g, dy, nn_ptr(&a->in_grad[2]) };
        return nn_parallel(a->ctx, g.M, 1, db_range, &bj);
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
    if (!conv_supports_2d(a, "gemm")) return 0;
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
