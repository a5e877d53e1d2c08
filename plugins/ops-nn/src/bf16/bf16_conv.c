/* bf16/bf16_conv.c — 2-D NCHW Convolution on bfloat16 data, weight and bias
 * (impl "bf16", rank 512; every other dtype is refused so float32/64 keep
 * the gemm/direct/winograd impls).  im2col in bf16 (bf16_im2col.c), then
 * per block of samples and group one bf16 GEMM with fp32 accumulation
 * (bf16_gemm.c), the block's samples side by side as columns:
 *   forward   y  = W · col (+ bias)                     fp32, rounded once
 *   backward  dW = Σ_n dy_n · col_nᵀ, db = Σ dy          fp32 partial sums
 *             dx = col2im(Wᵀ · dy_n)                      fp32, rounded once
 * Forward blocks run on ctx->parallel_for.  Backward splits the samples
 * into at most 8 fixed chunks on ctx->parallel_for; each chunk keeps its
 * own fp32 partial dW/db, summed in chunk order afterwards, so the result
 * does not depend on the thread count.  Each group's weight is packed once
 * per call for the GEMM path in use (nn_bf16_apack).  Scratch comes from
 * nn_alloc (the host pool), not from a declared workspace. */
#include "bf16/bf16_im2col.h"

#include <stdatomic.h>
#include <stdlib.h>

static int conv_supports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes[i] != MXP_DTYPE_BF16) {
            snprintf(a->reason, a->reason_size, "bf16: input %u has dtype %d (bfloat16 only)", i, a->in_dtypes[i]);
            return 0;
        }
    if (a->in_shapes[0].ndim != 4) {
        snprintf(a->reason, a->reason_size, "bf16: 2-D convolution only");
        return 0;
    }
    return 1;
}

static int check(const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && t[i].dtype != MXP_DTYPE_BF16)
            return NN_ERR(MXP_ETYPE, "Convolution (bf16): tensor %u has dtype %d, expected bfloat16", i, t[i].dtype);
    return nn_check_contig("Convolution", t, n);
}

/* Samples per GEMM: a block of S samples is one product with n = S·P
 * columns (col[K][S·P], sample s at column s·P), so LeNet's small products
 * (conv1: K 25, P 576) pay the GEMM's per-call packing and tile stores once
 * per block.  S depends on the geometry only (col at most ~128K bf16
 * values), never on the thread count: each output column's sum is the same
 * whatever S is, and the weight gradient's chunks are fixed (below). */
static int64_t block_samples(const conv_geom *g) {
    int64_t s = (128 * 1024) / (g->K * g->P > 0 ? g->K * g->P : 1);
    return s < 1 ? 1 : s > 16 ? 16 : s;
}

typedef struct cjob {
    conv_geom g;
    int path;
    int64_t chunks, S;
    const uint16_t *x, *w, *bias, *dy;
    uint16_t *y, *dx;
    int32_t req_y, req_dx, want_dw, want_db;
    float *dw_part, *db_part;   /* [chunks][M*K], [chunks][M] */
    nn_bf16_apack *wpack;       /* [G]: W_g (forward) or W_gᵀ (backward), packed once */
    atomic_int rc;
} cjob;

/* Forward of sample blocks [b0, b1): y_g[Mg][S·P] = W_g · col[K][S·P]. */
static void fwd_chunk(void *arg, int64_t b0, int64_t b1) {
    cjob *j = arg;
    const conv_geom *g = &j->g;
    int64_t S = j->S, SP = S * g->P;
    uint16_t *col = nn_alloc((uint64_t)(g->K * SP) * 2u + 64);
    float *y = nn_alloc((uint64_t)(g->M * SP + g->M) * sizeof(float) + 64);
    if (!col || !y) nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16): out of memory"));
    float *bias = y ? y + g->M * SP : NULL;
    if (y && j->bias) nn_bf16_widen(j->bias, bias, g->M);
    for (int64_t blk = b0; blk < b1 && col && y && !atomic_load(&j->rc); blk++) {
        int64_t n0 = blk * S, ns = g->N - n0 < S ? g->N - n0 : S, np = ns * g->P;
        for (int64_t gi = 0; gi < g->G; gi++) {
            for (int64_t s = 0; s < ns; s++)
                nn_bf16_im2col(g, j->x + ((n0 + s) * g->C + gi * g->Cg) * g->H * g->W, col + s * g->P, np);
            int rc = nn_bf16_gemm_apacked(NULL, &j->wpack[gi], 0, np, col, np, 0, y + gi * g->Mg * np, np);
            if (rc) {
                nn_bf16_job_fail(&j->rc, rc);
                break;
            }
        }
        if (atomic_load(&j->rc)) break;
        for (int64_t s = 0; s < ns; s++)
            for (int64_t m = 0; m < g->M; m++) {
                float *row = y + m * np + s * g->P;
                if (j->bias) nn_f32_add_scalar(row, bias[m], g->P);
                nn_bf16_store(j->req_y, row, j->y + ((n0 + s) * g->M + m) * g->P, g->P);
            }
    }
    nn_free(col);
    nn_free(y);
}

/* Backward of chunk c's samples, in blocks of S: dy_g of the block gathered
 * as dyc[Mg][S·P], then dW_g += dyc · colᵀ and dcol = W_gᵀ · dyc. */
static void bwd_chunk(void *arg, int64_t c0, int64_t c1) {
    cjob *j = arg;
    const conv_geom *g = &j->g;
    int64_t S = j->S, SP = S * g->P, CHW = g->C * g->H * g->W;
    uint16_t *col = nn_alloc((uint64_t)(g->K * SP + g->Mg * SP) * 2u + 64);
    float *dcol = nn_alloc((uint64_t)(g->K * SP + S * CHW) * sizeof(float) + 64);
    if (!col || !dcol) nn_bf16_job_fail(&j->rc, NN_ERR(MXP_ENOMEM, "Convolution (bf16): out of memory"));
    uint16_t *dyc = col ? col + g->K * SP : NULL;
    float *dx = dcol ? dcol + g->K * SP : NULL;
    for (int64_t c = c0; c < c1 && col && dcol; c++) {
        float *dw = j->dw_part + c * g->M * g->K, *db = j->db_part + c * g->M;
        int64_t cn0 = c * g->N / j->chunks, cn1 = (c + 1) * g->N / j->chunks;
        for (int64_t n0 = cn0; n0 < cn1 && !atomic_load(&j->rc); n0 += S) {
            int64_t ns = cn1 - n0 < S ? cn1 - n0 : S, np = ns * g->P;
            if (j->dx) memset(dx, 0, (size_t)(ns * CHW) * sizeof(float));
            for (int64_t gi = 0; gi < g->G; gi++) {
                for (int64_t m = 0; m < g->Mg; m++)
                    for (int64_t s = 0; s < ns; s++)
                        memcpy(dyc + m * np + s * g->P, j->dy + ((n0 + s) * g->M + gi * g->Mg + m) * g->P,
                               (size_t)g->P * 2u);
                int rc = MXP_OK;
                if (j->want_dw) {
                    for (int64_t s = 0; s < ns; s++)
                        nn_bf16_im2col(g, j->x + ((n0 + s) * g->C + gi * g->Cg) * g->H * g->W, col + s * g->P, np);
                    rc = nn_bf16_gemm(NULL, j->path, 0, 1, g->Mg, g->K, np, dyc, np, col, np, 1,
                                      dw + gi * g->Mg * g->K, g->K);
                }
                if (!rc && j->dx) {
                    rc = nn_bf16_gemm_apacked(NULL, &j->wpack[gi], 0, np, dyc, np, 0, dcol, np);
                    for (int64_t s = 0; s < ns && !rc; s++)
                        nn_bf16_col2im_f32(g, dcol + s * g->P, np, dx + s * CHW + gi * g->Cg * g->H * g->W);
                }
                if (rc) {
                    nn_bf16_job_fail(&j->rc, rc);
                    break;
                }
            }
            if (atomic_load(&j->rc)) break;
            for (int64_t s = 0; s < ns; s++) {
                const uint16_t *dyn = j->dy + (n0 + s) * g->M * g->P;
                if (j->want_db)
                    for (int64_t m = 0; m < g->M; m++) db[m] += nn_bf16_row_sum(dyn + m * g->P, g->P);
                if (j->dx) nn_bf16_store(j->req_dx, dx + s * CHW, j->dx + (n0 + s) * CHW, CHW);
            }
        }
    }
    nn_free(col);
    nn_free(dcol);
}

/* Each group's weight packed once for all samples: W_g (Mg×K) for the
 * forward product, W_gᵀ (K×Mg) for the data gradient. */
static int pack_weights(cjob *j, int transposed) {
    const conv_geom *g = &j->g;
    j->wpack = calloc((size_t)g->G, sizeof *j->wpack);
    if (!j->wpack) return NN_ERR(MXP_ENOMEM, "Convolution (bf16): out of memory");
    for (int64_t gi = 0; gi < g->G; gi++) {
        const uint16_t *wg = j->w + gi * g->Mg * g->K;
        int rc = transposed ? nn_bf16_apack_init(&j->wpack[gi], j->path, 1, g->K, g->Mg, wg, g->K)
                            : nn_bf16_apack_init(&j->wpack[gi], j->path, 0, g->Mg, g->K, wg, g->K);
        if (rc) return rc; /* free_weights releases what was packed */
    }
    return MXP_OK;
}

static void free_weights(cjob *j) {
    if (!j->wpack) return;
    for (int64_t gi = 0; gi < j->g.G; gi++) nn_bf16_apack_free(&j->wpack[gi]);
    free(j->wpack);
    j->wpack = NULL;
}

static int conv_forward(const mxp_forward_args *a) {
    int path, rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->out, 1);
    if (!rc && a->in[0].ndim != 4) rc = NN_ERR(MXP_ESHAPE, "Convolution (bf16): data must be 4-D");
    if (!rc) rc = nn_bf16_path_select(&path);
    if (rc || a->req[0] == MXP_REQ_NULL) return rc;
    cjob j;
    memset(&j, 0, sizeof j);
    conv_geom_from_tensor(&j.g, a->params, &a->in[0]);
    j.path = path;
    j.x = nn_ptr(&a->in[0]);
    j.w = nn_ptr(&a->in[1]);
    j.bias = !j.g.no_bias && a->n_in > 2 ? nn_ptr(&a->in[2]) : NULL;
    j.y = nn_ptr(&a->out[0]);
    j.req_y = a->req[0];
    atomic_init(&j.rc, MXP_OK);
    if ((rc = pack_weights(&j, 0)) != MXP_OK) {
        free_weights(&j);
        return rc;
    }
    j.S = block_samples(&j.g);
    rc = nn_parallel(a->ctx, (j.g.N + j.S - 1) / j.S, 1, fwd_chunk, &j);
    free_weights(&j);
    return rc ? rc : atomic_load(&j.rc);
}

static int conv_backward(const mxp_backward_args *a) {
    int path, rc = check(a->in, a->n_in);
    if (!rc) rc = check(a->in_grad, a->n_in);
    if (!rc) rc = check(a->out_grad, 1);
    if (!rc) rc = nn_bf16_path_select(&path);
    if (rc) return rc;
    cjob j;
    memset(&j, 0, sizeof j);
    conv_geom_from_tensor(&j.g, a->params, &a->in[0]);
    const conv_geom *g = &j.g;
    j.path = path;
    j.x = nn_ptr(&a->in[0]);
    j.w = nn_ptr(&a->in[1]);
    j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = a->req[0] != MXP_REQ_NULL ? nn_ptr(&a->in_grad[0]) : NULL;
    j.req_dx = a->req[0];
    j.want_dw = a->req[1] != MXP_REQ_NULL;
    j.want_db = !g->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL;
    j.chunks = g->N < 8 ? g->N : 8;
    j.S = block_samples(g);
    atomic_init(&j.rc, MXP_OK);
    if (j.chunks < 1) return MXP_OK;
    j.dw_part = nn_alloc((uint64_t)(j.chunks * (g->M * g->K + g->M)) * sizeof(float) + 64);
    if (!j.dw_part) return NN_ERR(MXP_ENOMEM, "Convolution (bf16): out of memory for weight gradients");
    memset(j.dw_part, 0, (size_t)(j.chunks * (g->M * g->K + g->M)) * sizeof(float));
    j.db_part = j.dw_part + j.chunks * g->M * g->K;
    if (j.dx && (rc = pack_weights(&j, 1)) != MXP_OK) {
        free_weights(&j);
        nn_free(j.dw_part);
        return rc;
    }
    rc = nn_parallel(a->ctx, j.chunks, 1, bwd_chunk, &j);
    free_weights(&j);
    if (!rc) rc = atomic_load(&j.rc);
    for (int64_t c = 1; c < j.chunks && !rc; c++) { /* chunk order: thread-count independent */
        for (int64_t i = 0; i < g->M * g->K; i++) j.dw_part[i] += j.dw_part[c * g->M * g->K + i];
        for (int64_t i = 0; i < g->M; i++) j.db_part[i] += j.db_part[c * g->M + i];
    }
    if (!rc && j.want_dw) nn_bf16_store(a->req[1], j.dw_part, nn_ptr(&a->in_grad[1]), g->M * g->K);
    if (!rc && j.want_db) nn_bf16_store(a->req[2], j.db_part, nn_ptr(&a->in_grad[2]), g->M);
    nn_free(j.dw_part);
    return rc;
}

const mxp_op_impl nn_bf16_conv_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "bf16", .device = "cpu",
    .rank = 512, .doc = "bfloat16 im2col + GEMM, fp32 accumulation (AMX / AVX512-BF16 / fp32 path, MXP_BF16_KERNEL)",
    .supports = conv_supports, .forward = conv_forward, .backward = conv_backward,
};

int nn_register_bf16(mxp_registrar *r) {
    int st = r->add_impl(r, &nn_bf16_fc_impl);
    return st < 0 ? st : r->add_impl(r, &nn_bf16_conv_impl);
}
