/* conv_gemm_blocks.c — the batched loop structures of the gemm Convolution
 * impl, where the work is a list of independent items run on
 * ctx->parallel_for, each item calling single-threaded GEMMs:
 *
 *   - sample blocks (small column matrices: LeNet-like layers): the batch
 *     is cut into nblk near-equal blocks of whole samples (block k holds
 *     samples [k*N/nblk, (k+1)*N/nblk)).  Forward per block: im2col of the
 *     block into col [K][nb*P], one GEMM into tmp [Mg][nb*P], scatter to
 *     NCHW with the bias fused.  Backward per block: gather dy into tmp,
 *     bias partial sums, im2col + one GEMM for the weight-gradient
 *     partial, one GEMM + col2im into the block's own samples for dx.
 *     With one-sample blocks or >= 256 output pixels per sample the GEMMs
 *     instead run per sample on y and dy in place (no tmp copies).
 *   - 1x1 stride-1 unpadded kernels: the data is the column matrix, so an
 *     item is (sample, pixel block) and GEMMs read x and write y/dx in
 *     place (ld = P).  Forward pre-fills y with the bias and runs the GEMM
 *     with beta 1 (one pass over y instead of BLAS's zeroing plus a bias
 *     pass).  Backward walks the item's pixels in L2-sized sub-blocks so
 *     the dy sub-block read by the weight-gradient GEMM is still cached
 *     for the data-gradient GEMM.
 *
 * Weight/bias gradients: the items are cut into CONV_GRAD_PARTS fixed
 * parts (the parallel_for items of backward), each accumulated into its
 * own partial (dW in T, db in double) and summed in part order at the
 * end, so no two threads write one value and the result is the same
 * whatever the thread count or chunking (conv_gemm.h: conv_gemm_partials,
 * also used by conv_gemm_rows.c).  Scratch comes from the host pool per
 * chunk or part; an allocation failure is reported as ENOMEM after the
 * loop. */
#include "conv_gemm.h"

#include <stdatomic.h>

/* ------------------------------------------------ gradient partials */
int conv_gemm_partials_init(conv_gemm_partials *pt, int64_t nitems, const conv_geom *g, uint64_t es) {
    pt->nitems = nitems;
    pt->Mg = g->Mg; pt->K = g->K;
    pt->db_bytes = ((uint64_t)g->M * sizeof(double) + 63) & ~(uint64_t)63;
    pt->bytes = pt->db_bytes + (uint64_t)(g->M * g->K) * es;
    pt->slot = nn_alloc((uint64_t)nitems * sizeof(char *));
    if (!pt->slot) return NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for gradient partials");
    memset(pt->slot, 0, (size_t)nitems * sizeof(char *));
    return MXP_OK;
}

/* A zeroed partial for part q (NULL: no memory). */
char *conv_gemm_partials_take(conv_gemm_partials *pt, int64_t q) {
    char *p = nn_alloc(pt->bytes);
    if (p) memset(p, 0, pt->bytes);
    pt->slot[q] = p;
    return p;
}

/* acc[i] += every later partial's [i], in part order (contiguous, vectorizable). */
typedef struct redjob { int32_t dt; const conv_gemm_partials *pt; int64_t first; } redjob;
static void reduce_range(void *arg, int64_t b, int64_t e) {
    const redjob *j = arg; const conv_gemm_partials *pt = j->pt;
    NN_TYPED(j->dt, T,
        T *acc = (T *)(pt->slot[j->first] + pt->db_bytes);
        for (int64_t s = j->first + 1; s < pt->nitems; s++) {
            if (!pt->slot[s]) continue;
            const T *p = (const T *)(pt->slot[s] + pt->db_bytes);
            for (int64_t i = b; i < e; i++) acc[i] += p[i];
        });
}

/* Sums the partials into dW/db (req) and frees them. */
int conv_gemm_partials_finish(conv_gemm_partials *pt, const mxp_backward_args *a, const conv_geom *g, int32_t dt,
                           int32_t rq_dw, int32_t rq_db) {
    int st = MXP_OK;
    int64_t first = 0;
    while (first < pt->nitems && !pt->slot[first]) first++;
    if (rq_dw != MXP_REQ_NULL && first < pt->nitems) {
        redjob r = { dt, pt, first };
        st = nn_parallel(a->ctx, g->M * g->K, 4096, reduce_range, &r);
        /* dW[gr][m][k] (req) = acc[gr][k][m] */
        int64_t Mg = g->Mg, K = g->K;
        if (st == MXP_OK) NN_TYPED(dt, T,
            T *d = nn_ptr(&a->in_grad[1]);
            const T *acc = (const T *)(pt->slot[first] + pt->db_bytes);
            for (int64_t gr = 0; gr < g->G; gr++) for (int64_t m = 0; m < Mg; m++) {
                T *dr = d + (gr * Mg + m) * K;
                const T *ac = acc + gr * Mg * K + m;
                if (rq_dw == MXP_REQ_ADD) for (int64_t k = 0; k < K; k++) dr[k] += ac[k * Mg];
                else for (int64_t k = 0; k < K; k++) dr[k] = ac[k * Mg];
            });
    }
    if (st == MXP_OK && rq_db != MXP_REQ_NULL)
        NN_TYPED(dt, T, T *db = nn_ptr(&a->in_grad[2]);
            for (int64_t m = 0; m < g->M; m++) {
                double acc = 0;
                for (int64_t s = 0; s < pt->nitems; s++)
                    if (pt->slot[s]) acc += ((const double *)pt->slot[s])[m];
                NN_STORE(rq_db, db[m], (T)acc);
            });
    for (int64_t s = 0; s < pt->nitems; s++) nn_free(pt->slot[s]);
    nn_free(pt->slot);
    return st;
}

/* ------------------------------------------------------ sample blocks */
typedef struct sbjob {
    int32_t dt, req, rq_dx, rq_dw, rq_db;
    const conv_geom *g;
    int64_t nblk, smax;        /* blocks, largest block (samples) */
    int per_sample;            /* GEMMs per sample on y/dy in place (no tmp) */
    uint64_t es;
    const char *x, *w, *bias, *dy;
    char *y, *dx;
    conv_gemm_partials pt;
    atomic_int oom;
} sbjob;

/* From this many output pixels per sample (or with one-sample blocks,
 * where the block's GEMM is the sample's), the GEMMs run per sample on y
 * and dy in place: each is big enough on its own, and the scatter/gather
 * through tmp (a copy of y or dy) would cost more than the extra calls. */
#define CONV_PER_SAMPLE_P 256

static int64_t block_start(const sbjob *j, int64_t blk) { return blk * j->g->N / j->nblk; }

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
    sbjob *j = arg; const conv_geom *g = j->g;
    uint64_t ldmax = (uint64_t)(j->smax * g->P), es = j->es;
    char *col = nn_alloc((uint64_t)(g->K + g->Mg) * ldmax * es);
    if (!col) { atomic_store(&j->oom, 1); return; }
    char *tmp = col + (uint64_t)g->K * ldmax * es;
    int add = j->req == MXP_REQ_ADD;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t n0 = block_start(j, blk), nb = block_start(j, blk + 1) - n0, ld = nb * g->P;
        for (int64_t gr = 0; gr < g->G; gr++) {
            const char *wg = j->w + (uint64_t)(gr * g->Mg * g->K) * es;
            block_im2col(j, n0, nb, gr, col);
            if (j->per_sample) {
                for (int64_t si = 0; si < nb; si++) {
                    char *ys = j->y + (uint64_t)(((n0 + si) * g->M + gr * g->Mg) * g->P) * es;
                    if (j->bias)
                        for (int64_t m = 0; m < g->Mg; m++) {
                            int64_t mo = gr * g->Mg + m;
                            double bv = j->dt == MXP_DTYPE_F32 ? ((const float *)j->bias)[mo] : ((const double *)j->bias)[mo];
                            conv_gemm_row_bias(j->dt, ys + (uint64_t)(m * g->P) * es, g->P, bv, add);
                        }
                    nn_gemm(j->dt, 0, 0, g->Mg, g->P, g->K, 1.0, wg, g->K, col + (uint64_t)(si * g->P) * es, ld,
                            (j->bias || add) ? 1.0 : 0.0, ys, g->P);
                }
                continue;
            }
            nn_gemm(j->dt, 0, 0, g->Mg, ld, g->K, 1.0, wg, g->K, col, ld, 0.0, tmp, ld);
            for (int64_t m = 0; m < g->Mg; m++) {
                int64_t mo = gr * g->Mg + m;
                double bv = !j->bias ? 0.0 : j->dt == MXP_DTYPE_F32 ? ((const float *)j->bias)[mo]
                                                                   : ((const double *)j->bias)[mo];
                for (int64_t si = 0; si < nb; si++)
                    conv_gemm_row_out(j->dt, j->y + (uint64_t)(((n0 + si) * g->M + mo) * g->P) * es,
                                      tmp + (uint64_t)(m * ld + si * g->P) * es, g->P, bv, add);
            }
        }
    }
    nn_free(col);
}

/* Blocks [b, e) into one partial (part; NULL when neither dW nor db). */
static void bwd_blocks(sbjob *j, int64_t b, int64_t e, char *part) {
    const conv_geom *g = j->g;
    uint64_t ldmax = (uint64_t)(j->smax * g->P), es = j->es;
    char *col = nn_alloc((uint64_t)(g->K + g->Mg) * ldmax * es);
    if (!col) { atomic_store(&j->oom, 1); return; }
    char *tmp = col + (uint64_t)g->K * ldmax * es;
    double *dbp = (double *)(void *)part;
    char *dwp = part ? part + j->pt.db_bytes : NULL;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t n0 = block_start(j, blk), nb = block_start(j, blk + 1) - n0, ld = nb * g->P;
        for (int64_t gr = 0; gr < g->G; gr++) {
            const char *wg = j->w + (uint64_t)(gr * g->Mg * g->K) * es;
            char *dwg = dwp ? dwp + (uint64_t)(gr * g->Mg * g->K) * es : NULL;
            /* dy of the block: gathered into tmp [Mg][nb*P], or read in place
             * per sample (ld P) */
            if (!j->per_sample)
                for (int64_t m = 0; m < g->Mg; m++) for (int64_t si = 0; si < nb; si++)
                    memcpy(tmp + (uint64_t)(m * ld + si * g->P) * es,
                           j->dy + (uint64_t)(((n0 + si) * g->M + gr * g->Mg + m) * g->P) * es, (size_t)((uint64_t)g->P * es));
            if (j->rq_db != MXP_REQ_NULL)
                for (int64_t m = 0; m < g->Mg; m++) {
                    double acc = 0;
                    if (!j->per_sample) acc = conv_gemm_row_sum(j->dt, tmp + (uint64_t)(m * ld) * es, ld);
                    else for (int64_t si = 0; si < nb; si++)
                        acc += conv_gemm_row_sum(j->dt, j->dy + (uint64_t)(((n0 + si) * g->M + gr * g->Mg + m) * g->P) * es, g->P);
                    dbp[gr * g->Mg + m] += acc;
                }
            /* dW^T [K][Mg] += col dy^T: BLAS transposes the smaller dy when
             * packing, not col (~8% faster on LeNet's conv2 shape) */
            if (j->rq_dw != MXP_REQ_NULL) {
                block_im2col(j, n0, nb, gr, col);
                if (j->per_sample)
                    for (int64_t si = 0; si < nb; si++)
                        nn_gemm(j->dt, 0, 1, g->K, g->Mg, g->P, 1.0, col + (uint64_t)(si * g->P) * es, ld,
                                j->dy + (uint64_t)(((n0 + si) * g->M + gr * g->Mg) * g->P) * es, g->P, 1.0, dwg, g->Mg);
                else
                    nn_gemm(j->dt, 0, 1, g->K, g->Mg, ld, 1.0, col, ld, tmp, ld, 1.0, dwg, g->Mg);
            }
            if (j->rq_dx != MXP_REQ_NULL) {
                if (j->per_sample)
                    for (int64_t si = 0; si < nb; si++)
                        nn_gemm(j->dt, 1, 0, g->K, g->P, g->Mg, 1.0, wg, g->K,
                                j->dy + (uint64_t)(((n0 + si) * g->M + gr * g->Mg) * g->P) * es, g->P, 0.0,
                                col + (uint64_t)(si * g->P) * es, ld);
                else
                    nn_gemm(j->dt, 1, 0, g->K, ld, g->Mg, 1.0, wg, g->K, tmp, ld, 0.0, col, ld);
                for (int64_t si = 0; si < nb; si++) {
                    char *dxs = j->dx + ((uint64_t)((n0 + si) * g->C + gr * g->Cg) * (uint64_t)(g->H * g->W)) * es;
                    if (j->rq_dx != MXP_REQ_ADD) memset(dxs, 0, (size_t)((uint64_t)(g->Cg * g->H * g->W) * es));
                    conv_col2im(j->dt, g, col + (uint64_t)(si * g->P) * es, 0, g->Cg, 0, g->Ho, ld, dxs);
                }
            }
        }
    }
    nn_free(col);
}

static void bwd_block_range(void *arg, int64_t qb, int64_t qe) {
    sbjob *j = arg;
    for (int64_t q = qb; q < qe; q++) {
        char *part = NULL;
        if (j->rq_dw != MXP_REQ_NULL || j->rq_db != MXP_REQ_NULL) {
            part = conv_gemm_partials_take(&j->pt, q);
            if (!part) { atomic_store(&j->oom, 1); return; }
        }
        bwd_blocks(j, q * j->nblk / j->pt.nitems, (q + 1) * j->nblk / j->pt.nitems, part);
    }
}

int conv_gemm_fwd_blocks(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt) {
    const conv_params *p = a->params;
    sbjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.req = a->req[0]; j.g = g; j.nblk = pl->nblk; j.smax = (g->N + pl->nblk - 1) / pl->nblk;
    j.per_sample = g->P >= CONV_PER_SAMPLE_P || j.smax == 1;
    j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    j.y = nn_ptr(&a->out[0]);
    atomic_init(&j.oom, 0);
    int st = nn_parallel(a->ctx, j.nblk, 1, fwd_block_range, &j);
    if (st == MXP_OK && atomic_load(&j.oom))
        st = NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for the column buffer");
    return st;
}

int conv_gemm_bwd_blocks(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                         int32_t rq_dx, int32_t rq_dw, int32_t rq_db) {
    sbjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.rq_dx = rq_dx; j.rq_dw = rq_dw; j.rq_db = rq_db; j.g = g;
    j.nblk = pl->nblk; j.smax = (g->N + pl->nblk - 1) / pl->nblk; j.es = mxp_dtype_size(dt);
    j.per_sample = g->P >= CONV_PER_SAMPLE_P || j.smax == 1;
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = nn_ptr(&a->in_grad[0]);
    atomic_init(&j.oom, 0);
    int st = conv_gemm_partials_init(&j.pt, j.nblk < CONV_GRAD_PARTS ? j.nblk : CONV_GRAD_PARTS, g, j.es);
    if (st < 0) return st;
    st = nn_parallel(a->ctx, j.pt.nitems, 1, bwd_block_range, &j);
    if (st == MXP_OK && atomic_load(&j.oom))
        st = NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for the column buffer or gradient partials");
    int st2 = conv_gemm_partials_finish(&j.pt, a, g, dt, st == MXP_OK ? rq_dw : MXP_REQ_NULL, st == MXP_OK ? rq_db : MXP_REQ_NULL);
    return st < 0 ? st : st2;
}

/* ------------------------------------------------------------------ 1x1 */
/* Backward pixel sub-block: dy [Mg][sub] + x [Cg][sub] + dx [Cg][sub] about
 * half of a 1 MiB L2. */
#define CONV_1X1_SUB_BYTES (512u << 10)

typedef struct pxjob {
    int32_t dt, req, rq_dx, rq_dw, rq_db;
    const conv_geom *g;
    int64_t pb, npb, sub;
    uint64_t es;
    const char *x, *w, *bias, *dy;
    char *y, *dx;
    conv_gemm_partials pt;
    atomic_int oom;
} pxjob;

static void fwd_1x1_range(void *arg, int64_t b, int64_t e) {
    pxjob *j = arg; const conv_geom *g = j->g;
    uint64_t es = j->es;
    int add = j->req == MXP_REQ_ADD;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / j->npb, p0 = (it % j->npb) * j->pb, np = g->P - p0 < j->pb ? g->P - p0 : j->pb;
        for (int64_t gr = 0; gr < g->G; gr++) {
            char *yb = j->y + (uint64_t)((n * g->M + gr * g->Mg) * g->P + p0) * es;
            if (j->bias)
                for (int64_t m = 0; m < g->Mg; m++) {
                    int64_t mo = gr * g->Mg + m;
                    double bv = j->dt == MXP_DTYPE_F32 ? ((const float *)j->bias)[mo] : ((const double *)j->bias)[mo];
                    conv_gemm_row_bias(j->dt, yb + (uint64_t)(m * g->P) * es, np, bv, add);
                }
            nn_gemm(j->dt, 0, 0, g->Mg, np, g->Cg, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * es, g->K,
                    j->x + (uint64_t)((n * g->C + gr * g->Cg) * g->P + p0) * es, g->P,
                    (j->bias || add) ? 1.0 : 0.0, yb, g->P);
        }
    }
}

/* Items [b, e) into one partial (part; NULL when neither dW nor db). */
static void bwd_1x1_items(pxjob *j, int64_t b, int64_t e, char *part) {
    const conv_geom *g = j->g;
    uint64_t es = j->es;
    double *dbp = (double *)(void *)part;
    char *dwp = part ? part + j->pt.db_bytes : NULL;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / j->npb, p0 = (it % j->npb) * j->pb, p1 = p0 + j->pb < g->P ? p0 + j->pb : g->P;
        for (int64_t gr = 0; gr < g->G; gr++) {
            for (int64_t s0 = p0; s0 < p1; s0 += j->sub) {
                int64_t ns = p1 - s0 < j->sub ? p1 - s0 : j->sub;
                const char *dyb = j->dy + (uint64_t)((n * g->M + gr * g->Mg) * g->P + s0) * es;
                uint64_t xo = (uint64_t)((n * g->C + gr * g->Cg) * g->P + s0) * es;
                if (j->rq_db != MXP_REQ_NULL)
                    for (int64_t m = 0; m < g->Mg; m++)
                        dbp[gr * g->Mg + m] += conv_gemm_row_sum(j->dt, dyb + (uint64_t)(m * g->P) * es, ns);
                /* dW^T [Cg][Mg] += x_sub dy_sub^T: BLAS then transposes the
                 * smaller dy sub-block when packing, not x (~7% faster) */
                if (j->rq_dw != MXP_REQ_NULL)
                    nn_gemm(j->dt, 0, 1, g->Cg, g->Mg, ns, 1.0, j->x + xo, g->P, dyb, g->P, 1.0,
                            dwp + (uint64_t)(gr * g->Mg * g->K) * es, g->Mg);
                if (j->rq_dx != MXP_REQ_NULL)
                    nn_gemm(j->dt, 1, 0, g->Cg, ns, g->Mg, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * es, g->K,
                            dyb, g->P, j->rq_dx == MXP_REQ_ADD ? 1.0 : 0.0, j->dx + xo, g->P);
            }
        }
    }
}

static void bwd_1x1_range(void *arg, int64_t qb, int64_t qe) {
    pxjob *j = arg;
    int64_t nitems = j->g->N * j->npb;
    for (int64_t q = qb; q < qe; q++) {
        char *part = NULL;
        if (j->rq_dw != MXP_REQ_NULL || j->rq_db != MXP_REQ_NULL) {
            part = conv_gemm_partials_take(&j->pt, q);
            if (!part) { atomic_store(&j->oom, 1); return; }
        }
        bwd_1x1_items(j, q * nitems / j->pt.nitems, (q + 1) * nitems / j->pt.nitems, part);
    }
}

int conv_gemm_fwd_1x1(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt) {
    const conv_params *p = a->params;
    pxjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.req = a->req[0]; j.g = g; j.pb = pl->pb; j.npb = pl->npb; j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    j.y = nn_ptr(&a->out[0]);
    atomic_init(&j.oom, 0);
    return nn_parallel(a->ctx, g->N * j.npb, 1, fwd_1x1_range, &j);
}

int conv_gemm_bwd_1x1(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                      int32_t rq_dx, int32_t rq_dw, int32_t rq_db) {
    pxjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.rq_dx = rq_dx; j.rq_dw = rq_dw; j.rq_db = rq_db; j.g = g;
    j.pb = pl->pb; j.npb = pl->npb; j.es = mxp_dtype_size(dt);
    uint64_t col_bytes = (uint64_t)(g->Mg + 2 * g->Cg) * j.es;
    j.sub = (int64_t)(CONV_1X1_SUB_BYTES / col_bytes) / 16 * 16;
    if (j.sub < 16) j.sub = 16;
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = nn_ptr(&a->in_grad[0]);
    atomic_init(&j.oom, 0);
    int64_t nitems = g->N * j.npb;
    int st = conv_gemm_partials_init(&j.pt, nitems < CONV_GRAD_PARTS ? nitems : CONV_GRAD_PARTS, g, j.es);
    if (st < 0) return st;
    st = nn_parallel(a->ctx, j.pt.nitems, 1, bwd_1x1_range, &j);
    if (st == MXP_OK && atomic_load(&j.oom))
        st = NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for gradient partials");
    int st2 = conv_gemm_partials_finish(&j.pt, a, g, dt, st == MXP_OK ? rq_dw : MXP_REQ_NULL, st == MXP_OK ? rq_db : MXP_REQ_NULL);
    return st < 0 ? st : st2;
}
