/* dot.c — dot and batch_dot (transpose_a, transpose_b; forward_stype
 * accepted for JSON compatibility, dense only) on OpenBLAS cblas_?gemm,
 * float32 and float64.
 *
 * dot follows MXNet 1.x's shape rule: lhs is viewed as a matrix
 * (prod(shape[:-1]), shape[-1]) — or (shape[0], prod(shape[1:])) with
 * transpose_a — and rhs likewise, and the output shape is the
 * concatenation of the non-contracted parts ((1,) for 1-D · 1-D).
 * batch_dot multiplies (B, M, K) x (B, K, N) slice by slice.
 * Operands that are not dense are first copied to dense host buffers;
 * req add uses beta = 1; a non-dense output gets a temporary.
 * Threads: the runtime owns the cores (docs/engine.md, "BLAS inside
 * packs").  OpenBLAS's own pool would run inside engine workers that
 * already occupy the cores and oversubscribe them, so registration makes
 * OpenBLAS single-threaded (process-wide, once) and a large product is cut
 * into 2-4 independent column/row blocks of C, each one single-threaded
 * cblas call on a ctx->parallel_for chunk. */
#include <cblas.h>

#include "common.h"

typedef struct dot_param {
    int32_t transpose_a, transpose_b;
    int32_t forward_stype;
} dot_param;

static const char *const stypes[] = {"None", "default", "row_sparse", "csr", NULL};

/* Row-major C(M,N) = beta C + op(A) op(B); A stored (M,K) or (K,M) if ta. */
static void gemm(int32_t dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A,
                 const void *B, double beta, void *C) {
    int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N), ldc = (int)N;
    if (M == 0 || N == 0) return;
    if (dt == MXP_DTYPE_F32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0f, A, lda > 0 ? lda : 1, B, ldb > 0 ? ldb : 1,
                    (float)beta, C, ldc > 0 ? ldc : 1);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0, A, lda > 0 ? lda : 1, B, ldb > 0 ? ldb : 1,
                    beta, C, ldc > 0 ? ldc : 1);
}

/* C split into blocks on parallel_for: fewer, larger blocks (2-4) because
 * each block re-packs the shared operand; below ~6 MFLOP one call. */
#define DOT_PAR_MIN_FLOP 3.0e6
typedef struct gemm_job {
    int32_t dt; int ta, tb, by_cols;
    int64_t M, N, K, step;
    const char *A, *B;
    double beta;
    char *C;
} gemm_job;

static void gemm_block(int32_t dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int lda,
                       const void *B, int ldb, double beta, void *C, int ldc) {
    if (dt == MXP_DTYPE_F32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0f, A, lda, B, ldb, (float)beta, C, ldc);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)M, (int)N, (int)K, 1.0, A, lda, B, ldb, beta, C, ldc);
}

static void gemm_range(void *arg, int64_t b, int64_t e) {
    const gemm_job *j = arg;
    size_t es = mxp_dtype_size(j->dt);
    int lda = (int)(j->ta ? j->M : j->K), ldb = (int)(j->tb ? j->K : j->N), ldc = (int)j->N;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t ext = j->by_cols ? j->N : j->M;
        int64_t s0 = blk * j->step, s1 = s0 + j->step < ext ? s0 + j->step : ext;
        if (s0 >= s1) continue;
        if (j->by_cols)   /* columns s0..s1 of op(B) and C */
            gemm_block(j->dt, j->ta, j->tb, j->M, s1 - s0, j->K, j->A, lda,
                       j->B + (size_t)(j->tb ? s0 * ldb : s0) * es, ldb, j->beta, j->C + (size_t)s0 * es, ldc);
        else              /* rows s0..s1 of op(A) and C */
            gemm_block(j->dt, j->ta, j->tb, s1 - s0, j->N, j->K, j->A + (size_t)(j->ta ? s0 : s0 * lda) * es, lda,
                       j->B, ldb, j->beta, j->C + (size_t)(s0 * ldc) * es, ldc);
    }
}

/* gemm() on the host's threads when it is large enough. */
static void gemm_par(const mxp_op_ctx *ctx, int32_t dt, int ta, int tb, int64_t M, int64_t N, int64_t K,
                     const void *A, const void *B, double beta, void *C) {
    double flop = 2.0 * (double)M * (double)N * (double)K;
    int by_cols = N >= M;
    int64_t ext = by_cols ? N : M, unit = by_cols ? 16 : 8;
    if (!ctx || !ctx->parallel_for || K == 0 || flop < 2 * DOT_PAR_MIN_FLOP || ext < 2 * unit) {
        gemm(dt, ta, tb, M, N, K, A, B, beta, C);
        return;
    }
    int64_t nblk = flop >= 8 * DOT_PAR_MIN_FLOP ? 4 : 2;
    int64_t step = ((ext + nblk - 1) / nblk + unit - 1) / unit * unit;
    gemm_job j = { dt, ta, tb, by_cols, M, N, K, step, A, B, beta, C };
    ctx->parallel_for(ctx, (ext + step - 1) / step, 1, gemm_range, &j);
}

/* Dense pointer to t's data: t itself, or a host copy in *tmp. */
static int dense_in(const mxp_tensor *t, void **tmp, const void **out) {
    *tmp = NULL;
    if (mxp_tensor_is_contiguous(t)) { *out = ob_base(t); return MXP_OK; }
    int64_t n = mxp_tensor_numel(t);
    *tmp = ob_host->alloc_host((uint64_t)n * mxp_dtype_size(t->dtype) + 1);
    if (!*tmp) return ob_err(MXP_ENOMEM, "dot: no memory for a dense copy");
    mxp_tensor d = *t;
    d.data = *tmp;
    d.byte_offset = 0;
    d.strides = NULL;
    *out = *tmp;
    return ob_copy(t, &d, MXP_REQ_WRITE);
}

/* Output: gemm into t directly (dense), or into a temp copied back with req. */
typedef struct dense_out {
    void *ptr, *tmp;
    double beta;
} dense_out;

static int out_begin(const mxp_tensor *t, int req, dense_out *o) {
    o->tmp = NULL;
    o->beta = req == MXP_REQ_ADD ? 1.0 : 0.0;
    if (mxp_tensor_is_contiguous(t)) { o->ptr = ob_base(t); return MXP_OK; }
    o->tmp = ob_host->alloc_host((uint64_t)mxp_tensor_numel(t) * mxp_dtype_size(t->dtype) + 1);
    if (!o->tmp) return ob_err(MXP_ENOMEM, "dot: no memory for the output");
    o->ptr = o->tmp;
    o->beta = 0.0;
    return MXP_OK;
}

static int out_end(const mxp_tensor *t, int req, dense_out *o) {
    int rc = MXP_OK;
    if (o->tmp) {
        mxp_tensor d = *t;
        d.data = o->tmp;
        d.byte_offset = 0;
        d.strides = NULL;
        rc = ob_copy(&d, t, req);
        ob_host->free_host(o->tmp);
    }
    return rc;
}

/* lhs as (rows, cols) stored; M/K from transpose flag. */
typedef struct dims3 {
    int64_t M, N, K, B;
} dims3;

static int dot_dims(const dot_param *p, int nl, const int64_t *ls, int nr, const int64_t *rs, dims3 *d) {
    if (nl < 1 || nr < 1) return ob_err(MXP_ESHAPE, "dot: operands must have rank >= 1");
    int64_t lK = p->transpose_a ? ls[0] : ls[nl - 1];
    int64_t lM = p->transpose_a ? ob_numel(nl - 1, ls + 1) : ob_numel(nl - 1, ls);
    int64_t rK = p->transpose_b ? rs[nr - 1] : rs[0];
    int64_t rN = p->transpose_b ? ob_numel(nr - 1, rs) : ob_numel(nr - 1, rs + 1);
    if (lK != rK) return ob_err(MXP_ESHAPE, "dot: contracted dims differ: %lld vs %lld", (long long)lK, (long long)rK);
    d->M = lM; d->N = rN; d->K = lK; d->B = 1;
    return MXP_OK;
}

static int dot_shape(mxp_infer_shape_args *a) {
    const dot_param *p = a->params;
    const mxp_shape *l = &a->in[0], *r = &a->in[1];
    if (!ob_shape_known(l) || !ob_shape_known(r)) return MXP_EINCOMPLETE;
    dims3 d;
    int rc = dot_dims(p, l->ndim, l->dims, r->ndim, r->dims, &d);
    if (rc) return rc;
    mxp_shape *o = &a->out[0];
    o->ndim = 0;
    if (l->ndim == 1 && r->ndim == 1) { o->ndim = 1; o->dims[0] = 1; return MXP_OK; }
    int nl = l->ndim - 1, nr = r->ndim - 1;
    if (nl + nr > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "dot: result rank too large");
    for (int i = 0; i < nl; i++) o->dims[o->ndim++] = p->transpose_a ? l->dims[i + 1] : l->dims[i];
    for (int i = 0; i < nr; i++) o->dims[o->ndim++] = p->transpose_b ? r->dims[i] : r->dims[i + 1];
    if (o->ndim == 0) { o->ndim = 1; o->dims[0] = 1; }
    return MXP_OK;
}

static int batch_dims(const dot_param *p, const mxp_tensor *l, const mxp_tensor *r, dims3 *d) {
    if (l->ndim != 3 || r->ndim != 3) return ob_err(MXP_ESHAPE, "batch_dot: operands must be 3-D");
    int64_t lK = p->transpose_a ? l->shape[1] : l->shape[2], lM = p->transpose_a ? l->shape[2] : l->shape[1];
    int64_t rK = p->transpose_b ? r->shape[2] : r->shape[1], rN = p->transpose_b ? r->shape[1] : r->shape[2];
    if (lK != rK || l->shape[0] != r->shape[0])
        return ob_err(MXP_ESHAPE, "batch_dot: (%lld,%lld,%lld) and (%lld,%lld,%lld) do not match",
                      (long long)l->shape[0], (long long)l->shape[1], (long long)l->shape[2],
                      (long long)r->shape[0], (long long)r->shape[1], (long long)r->shape[2]);
    d->B = l->shape[0]; d->M = lM; d->N = rN; d->K = lK;
    return MXP_OK;
}

static int batch_shape(mxp_infer_shape_args *a) {
    const mxp_shape *l = &a->in[0], *r = &a->in[1];
    if (!ob_shape_known(l) || !ob_shape_known(r)) return MXP_EINCOMPLETE;
    mxp_tensor lt = {.ndim = l->ndim, .shape = l->dims}, rt = {.ndim = r->ndim, .shape = r->dims};
    dims3 d;
    int rc = batch_dims(a->params, &lt, &rt, &d);
    if (rc) return rc;
    int64_t o[3] = {d.B, d.M, d.N};
    ob_shape_set(&a->out[0], 3, o);
    return MXP_OK;
}

static int check_float(const mxp_tensor *t, const char *op) {
    if (t->dtype != MXP_DTYPE_F32 && t->dtype != MXP_DTYPE_F64)
        return ob_err(MXP_ETYPE, "%s: dtype %d unsupported (float32/float64 only)", op, t->dtype);
    return MXP_OK;
}

/* One (batched) product: C[b] (req) = op(A[b]) op(B[b]). */
static int product(const mxp_op_ctx *ctx, int32_t dt, int ta, int tb, const dims3 *d, const mxp_tensor *A,
                   const mxp_tensor *Bt, const mxp_tensor *C, int req) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    void *ta_buf = NULL, *tb_buf = NULL;
    const void *pa, *pb;
    dense_out o = {0};
    int rc = dense_in(A, &ta_buf, &pa);
    if (!rc) rc = dense_in(Bt, &tb_buf, &pb);
    if (!rc) rc = out_begin(C, req, &o);
    if (!rc) {
        size_t es = mxp_dtype_size(dt);
        for (int64_t b = 0; b < d->B; b++)
            gemm_par(ctx, dt, ta, tb, d->M, d->N, d->K, (const char *)pa + (size_t)(b * d->M * d->K) * es,
                 (const char *)pb + (size_t)(b * d->K * d->N) * es, o.beta,
                 (char *)o.ptr + (size_t)(b * d->M * d->N) * es);
        rc = out_end(C, req, &o);
    }
    if (ta_buf) ob_host->free_host(ta_buf);
    if (tb_buf) ob_host->free_host(tb_buf);
    return rc;
}

static int do_forward(const mxp_forward_args *a, int batch) {
    const dot_param *p = a->params;
    const mxp_tensor *l = &a->in[0], *r = &a->in[1];
    const char *op = batch ? "batch_dot" : "dot";
    int rc = check_float(l, op);
    if (!rc) rc = check_float(r, op);
    if (!rc && (l->dtype != r->dtype || a->out[0].dtype != l->dtype))
        rc = ob_err(MXP_ETYPE, "%s: operand dtypes differ", op);
    if (rc) return rc;
    dims3 d;
    rc = batch ? batch_dims(p, l, r, &d) : dot_dims(p, l->ndim, l->shape, r->ndim, r->shape, &d);
    if (rc) return rc;
    return product(a->ctx, l->dtype, p->transpose_a, p->transpose_b, &d, l, r, &a->out[0], a->req[0]);
}

/* Gradients (G = out_grad, stored (M,N)):
 *   dA = G op(B)^T stored (M,K), or its transpose op(B) G^T stored (K,M)
 *   dB = op(A)^T G stored (K,N), or its transpose G^T op(A) stored (N,K) */
static int do_backward(const mxp_backward_args *a, int batch) {
    const dot_param *p = a->params;
    const mxp_tensor *l = &a->in[0], *r = &a->in[1], *g = &a->out_grad[0];
    dims3 d;
    int rc = batch ? batch_dims(p, l, r, &d) : dot_dims(p, l->ndim, l->shape, r->ndim, r->shape, &d);
    if (rc) return rc;
    int ta = p->transpose_a, tb = p->transpose_b;
    dims3 da, db;
    if (!ta) {   /* dA (M,K) = G (M,N) x op(B)^T (N,K) */
        da = (dims3){d.M, d.K, d.N, d.B};
        rc = product(a->ctx, l->dtype, 0, !tb, &da, g, r, &a->in_grad[0], a->req[0]);
    } else {     /* dA^T (K,M) = op(B) (K,N) x G^T (N,M) */
        da = (dims3){d.K, d.M, d.N, d.B};
        rc = product(a->ctx, l->dtype, tb, 1, &da, r, g, &a->in_grad[0], a->req[0]);
    }
    if (rc) return rc;
    if (!tb) {   /* dB (K,N) = op(A)^T (K,M) x G (M,N) */
        db = (dims3){d.K, d.N, d.M, d.B};
        rc = product(a->ctx, l->dtype, !ta, 0, &db, l, g, &a->in_grad[1], a->req[1]);
    } else {     /* dB^T (N,K) = G^T (N,M) x op(A) (M,K) */
        db = (dims3){d.N, d.K, d.M, d.B};
        rc = product(a->ctx, l->dtype, 1, ta, &db, g, l, &a->in_grad[1], a->req[1]);
    }
    return rc;
}

static int dot_fwd(const mxp_forward_args *a) { return do_forward(a, 0); }
static int dot_bwd(const mxp_backward_args *a) { return do_backward(a, 0); }
static int bdot_fwd(const mxp_forward_args *a) { return do_forward(a, 1); }
static int bdot_bwd(const mxp_backward_args *a) { return do_backward(a, 1); }

static int dot_check(mxp_check_params_args *a) {
    const dot_param *p = a->params;
    if (p->forward_stype >= 2)
        return ob_err(MXP_EUNSUPPORTED, "dot: forward_stype '%s' (sparse) is not supported",
                      stypes[p->forward_stype]);
    return MXP_OK;
}

static const mxp_param_def dot_params[] = {
    MXP_PARAM("transpose_a", MXP_PARAM_BOOL, 0, dot_param, transpose_a, "False", 0, 0, NULL,
              "Use the transpose of lhs"),
    MXP_PARAM("transpose_b", MXP_PARAM_BOOL, 0, dot_param, transpose_b, "False", 0, 0, NULL,
              "Use the transpose of rhs"),
    MXP_PARAM("forward_stype", MXP_PARAM_ENUM, 0, dot_param, forward_stype, "None", 0, 0, stypes,
              "Output storage type (dense only here)"),
};

static const char *const lr_args[] = {"lhs", "rhs", NULL};

static const mxp_op_def dot_defs[] = {
    { .hdr = MXP_HEADER(mxp_op_def), .name = "dot",
      .doc = "Matrix product of lhs and rhs (N-D operands are flattened around the contracted axis).",
      .params = dot_params, .n_params = 3, .params_size = sizeof(dot_param), .arg_names = lr_args,
      .infer_shape = dot_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
      .check_params = dot_check },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "batch_dot",
      .doc = "Batched matrix product of 3-D arrays (B,M,K) x (B,K,N).",
      .params = dot_params, .n_params = 3, .params_size = sizeof(dot_param), .arg_names = lr_args,
      .infer_shape = batch_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
      .check_params = dot_check },
};

static const mxp_op_impl dot_impls[] = {
    { MXP_HEADER(mxp_op_impl), "dot", "blas", "cpu", MXP_RANK_PRIMARY, 0, "OpenBLAS gemm",
      NULL, NULL, NULL, dot_fwd, dot_bwd, NULL, NULL },
    { MXP_HEADER(mxp_op_impl), "batch_dot", "blas", "cpu", MXP_RANK_PRIMARY, 0,
      "OpenBLAS gemm per batch", NULL, NULL, NULL, bdot_fwd, bdot_bwd, NULL, NULL },
};

int ob_reg_dot(mxp_registrar *r) {
    /* Registration runs once at pack init: make OpenBLAS single-threaded
     * here (process-wide) so no BLAS pool ever runs inside engine workers;
     * gemm_par gets both cores through parallel_for instead. */
    openblas_set_num_threads(1);
    for (size_t i = 0; i < sizeof dot_defs / sizeof dot_defs[0]; i++) {
        int rc = ob_add_op(r, &dot_defs[i], &dot_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
