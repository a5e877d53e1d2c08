/* conv_gemm_rows.c — the gemm Convolution impl's path for layers whose
 * column matrix per sample is large (ResNet-like 3x3 on 28-56 px images,
 * strided 1x1): the output rows of each sample are cut into blocks whose
 * column buffer [K][rows*Wo] stays L2-resident in forward (~512 KiB), so
 * im2col's writes and the GEMM's reads of it never go to memory; backward
 * blocks are larger (>= 1024 pixels) because the weight-gradient GEMM
 * re-reads its C per block.
 *
 *   forward: items (sample, row block) on parallel_for, each im2col of its
 *     rows + one single-threaded GEMM writing y's rows in place (ld P),
 *     bias pre-filled and beta 1;
 *   backward: parts over whole samples (col2im of neighbouring row blocks
 *     adds into shared input rows, so one sample's blocks stay in one
 *     part, in order); per row block: im2col + dW^T GEMM into the part's
 *     partial (conv_gemm_partials: fixed parts, bitwise reproducible),
 *     then dx rows through the data-gradient GEMM and col2im.
 * Used from 4 samples up (backward parallelism is over samples); smaller
 * batches take the per-sample row-block loop of conv_gemm.c, which splits
 * each GEMM over the threads instead.  Column buffers come from the host
 * pool, not workspace. */
#include "conv_gemm.h"

#include <stdatomic.h>

/* Backward row blocks span at least this many output pixels (measured on
 * layers (c)/(d): below it the dW GEMM's C traffic dominates). */
#define CONV_ROWS_BWD_MIN_LD 1024
/* ... unless the column buffer would exceed this (huge K). */
#define CONV_ROWS_BWD_MAX_BYTES (8ull << 20)

typedef struct rowjob {
    int32_t dt, req, rq_dx, rq_dw, rq_db;
    const conv_geom *g;
    int64_t rb, nrb;          /* rows per block, blocks per sample */
    uint64_t es;
    const char *x, *w, *bias, *dy;
    char *y, *dx;
    conv_gemm_partials pt;
    atomic_int oom;
} rowjob;

static const char *xgroup(const rowjob *j, int64_t n, int64_t gr) {
    const conv_geom *g = j->g;
    return j->x + ((uint64_t)(n * g->C + gr * g->Cg) * (uint64_t)(g->H * g->W)) * j->es;
}

static void fwd_rows_range(void *arg, int64_t b, int64_t e) {
    rowjob *j = arg; const conv_geom *g = j->g;
    uint64_t es = j->es;
    char *col = nn_alloc((uint64_t)g->K * (uint64_t)(j->rb * g->Wo) * es);
    if (!col) { atomic_store(&j->oom, 1); return; }
    int add = j->req == MXP_REQ_ADD;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / j->nrb, r0 = (it % j->nrb) * j->rb, r1 = r0 + j->rb < g->Ho ? r0 + j->rb : g->Ho;
        int64_t ld = (r1 - r0) * g->Wo;
        for (int64_t gr = 0; gr < g->G; gr++) {
            conv_im2col(j->dt, g, xgroup(j, n, gr), 0, g->Cg, r0, r1, col, ld);
            char *yb = j->y + (uint64_t)((n * g->M + gr * g->Mg) * g->P + r0 * g->Wo) * es;
            if (j->bias)
                for (int64_t m = 0; m < g->Mg; m++) {
                    int64_t mo = gr * g->Mg + m;
                    double bv = j->dt == MXP_DTYPE_F32 ? ((const float *)j->bias)[mo] : ((const double *)j->bias)[mo];
                    conv_gemm_row_bias(j->dt, yb + (uint64_t)(m * g->P) * es, ld, bv, add);
                }
            nn_gemm(j->dt, 0, 0, g->Mg, ld, g->K, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * es, g->K,
                    col, ld, (j->bias || add) ? 1.0 : 0.0, yb, g->P);
        }
    }
    nn_free(col);
}

/* Samples [n0, n1) into one partial (part; NULL when neither dW nor db). */
static void bwd_rows_samples(rowjob *j, int64_t n0, int64_t n1, char *part) {
    const conv_geom *g = j->g;
    uint64_t es = j->es;
    char *col = nn_alloc((uint64_t)g->K * (uint64_t)(j->rb * g->Wo) * es);
    if (!col) { atomic_store(&j->oom, 1); return; }
    double *dbp = (double *)(void *)part;
    char *dwp = part ? part + j->pt.db_bytes : NULL;
    for (int64_t n = n0; n < n1; n++) {
        for (int64_t gr = 0; gr < g->G; gr++) {
            const char *wg = j->w + (uint64_t)(gr * g->Mg * g->K) * es;
            const char *dyg = j->dy + (uint64_t)((n * g->M + gr * g->Mg) * g->P) * es;
            char *dxg = j->dx ? j->dx + ((uint64_t)(n * g->C + gr * g->Cg) * (uint64_t)(g->H * g->W)) * es : NULL;
            if (j->rq_db != MXP_REQ_NULL)
                for (int64_t m = 0; m < g->Mg; m++)
                    dbp[gr * g->Mg + m] += conv_gemm_row_sum(j->dt, dyg + (uint64_t)(m * g->P) * es, g->P);
            if (j->rq_dx != MXP_REQ_NULL && j->rq_dx != MXP_REQ_ADD)
                memset(dxg, 0, (size_t)((uint64_t)(g->Cg * g->H * g->W) * es));
            for (int64_t r0 = 0; r0 < g->Ho; r0 += j->rb) {
                int64_t r1 = r0 + j->rb < g->Ho ? r0 + j->rb : g->Ho, ld = (r1 - r0) * g->Wo;
                const char *dyb = dyg + (uint64_t)(r0 * g->Wo) * es;
                if (j->rq_dw != MXP_REQ_NULL) {
                    conv_im2col(j->dt, g, xgroup(j, n, gr), 0, g->Cg, r0, r1, col, ld);
                    nn_gemm(j->dt, 0, 1, g->K, g->Mg, ld, 1.0, col, ld, dyb, g->P, 1.0,
                            dwp + (uint64_t)(gr * g->Mg * g->K) * es, g->Mg);
                }
                if (j->rq_dx != MXP_REQ_NULL) {
                    nn_gemm(j->dt, 1, 0, g->K, ld, g->Mg, 1.0, wg, g->K, dyb, g->P, 0.0, col, ld);
                    conv_col2im(j->dt, g, col, 0, g->Cg, r0, r1, ld, dxg);
                }
            }
        }
    }
    nn_free(col);
}

static void bwd_rows_range(void *arg, int64_t qb, int64_t qe) {
    rowjob *j = arg;
    for (int64_t q = qb; q < qe; q++) {
        char *part = NULL;
        if (j->rq_dw != MXP_REQ_NULL || j->rq_db != MXP_REQ_NULL) {
            part = conv_gemm_partials_take(&j->pt, q);
            if (!part) { atomic_store(&j->oom, 1); return; }
        }
        bwd_rows_samples(j, q * j->g->N / j->pt.nitems, (q + 1) * j->g->N / j->pt.nitems, part);
    }
}

int conv_gemm_fwd_rows(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt) {
    const conv_params *p = a->params;
    rowjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.req = a->req[0]; j.g = g; j.rb = pl->rb; j.nrb = (g->Ho + pl->rb - 1) / pl->rb;
    j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    j.y = nn_ptr(&a->out[0]);
    atomic_init(&j.oom, 0);
    int st = nn_parallel(a->ctx, g->N * j.nrb, 1, fwd_rows_range, &j);
    if (st == MXP_OK && atomic_load(&j.oom))
        st = NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for the column buffer");
    return st;
}

int conv_gemm_bwd_rows(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                       int32_t rq_dx, int32_t rq_dw, int32_t rq_db) {
    rowjob j; memset(&j, 0, sizeof j);
    j.dt = dt; j.rq_dx = rq_dx; j.rq_dw = rq_dw; j.rq_db = rq_db; j.g = g;
    /* backward blocks of at least CONV_ROWS_BWD_MIN_LD columns: the
     * weight-gradient GEMM reads and writes its whole C (K x Mg) per block */
    j.rb = (CONV_ROWS_BWD_MIN_LD + g->Wo - 1) / g->Wo;
    int64_t rb_cap = (int64_t)(CONV_ROWS_BWD_MAX_BYTES / ((uint64_t)g->K * (uint64_t)g->Wo * mxp_dtype_size(dt)));
    if (j.rb > rb_cap) j.rb = rb_cap;
    if (j.rb < pl->rb) j.rb = pl->rb;
    if (j.rb > g->Ho) j.rb = g->Ho;
    j.nrb = (g->Ho + j.rb - 1) / j.rb; j.es = mxp_dtype_size(dt);
    j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = rq_dx != MXP_REQ_NULL ? nn_ptr(&a->in_grad[0]) : NULL;
    atomic_init(&j.oom, 0);
    int st = conv_gemm_partials_init(&j.pt, g->N < CONV_GRAD_PARTS ? g->N : CONV_GRAD_PARTS, g, j.es);
    if (st < 0) return st;
    st = nn_parallel(a->ctx, j.pt.nitems, 1, bwd_rows_range, &j);
    if (st == MXP_OK && atomic_load(&j.oom))
        st = NN_ERR(MXP_ENOMEM, "Convolution(gemm): no memory for the column buffer or gradient partials");
    int st2 = conv_gemm_partials_finish(&j.pt, a, g, dt, st == MXP_OK ? rq_dw : MXP_REQ_NULL,
                                        st == MXP_OK ? rq_db : MXP_REQ_NULL);
    return st < 0 ? st : st2;
}
