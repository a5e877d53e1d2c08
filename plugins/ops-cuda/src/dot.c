/* dot.c — GPU implementations ("cublas", device gpu) of ops-basic's dot and
 * batch_dot: the same shape rule and gradient products as the CPU impl
 * (lhs viewed as (prod(shape[:-1]), shape[-1]), or (shape[0],
 * prod(shape[1:])) with transpose_a, rhs likewise; batch_dot slice by
 * slice), each product one cuBLAS strided-batched SGEMM.  A row-major
 *   C (M x N) = op(A) op(B)     (lda = ta ? M : K, ldb = tb ? K : N, ldc = N)
 * is the column-major Cᵀ = op(B)ᵀ op(A)ᵀ, i.e.
 *   gemm(opB, opA, N, M, K, B ldb, A lda, C N).
 * transpose_a / transpose_b are read by name (typed parameter access).
 * Contiguous float32 only; sizes must fit cuBLAS's int dimensions. */
#include "cu_handles.h"

#include <limits.h>
#include <string.h>

typedef struct dims3 {
    int64_t M, N, K, B;
} dims3;

static int64_t numel_of(int n, const int64_t *s) {
    int64_t v = 1;
    for (int i = 0; i < n; i++) v *= s[i];
    return v;
}

static int dims_of(int batch, int ta, int tb, const mxp_tensor *l, const mxp_tensor *r, dims3 *d) {
    const char *op = batch ? "batch_dot" : "dot";
    if (batch) {
        if (l->ndim != 3 || r->ndim != 3)
            return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'batch_dot': operands must be 3-D");
        d->B = l->shape[0];
        d->K = ta ? l->shape[1] : l->shape[2];
        d->M = ta ? l->shape[2] : l->shape[1];
        d->N = tb ? r->shape[1] : r->shape[2];
        if ((tb ? r->shape[2] : r->shape[1]) != d->K || r->shape[0] != d->B)
            return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'batch_dot': operand shapes do not match");
    } else {
        if (l->ndim < 1 || r->ndim < 1) return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'dot': operands must have rank >= 1");
        d->B = 1;
        d->K = ta ? l->shape[0] : l->shape[l->ndim - 1];
        d->M = ta ? numel_of(l->ndim - 1, l->shape + 1) : numel_of(l->ndim - 1, l->shape);
        d->N = tb ? numel_of(r->ndim - 1, r->shape) : numel_of(r->ndim - 1, r->shape + 1);
        if ((tb ? r->shape[r->ndim - 1] : r->shape[0]) != d->K)
            return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'dot': contracted dims differ");
    }
    if (d->M > INT_MAX || d->N > INT_MAX || d->K > INT_MAX || d->B > INT_MAX)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': sizes exceed cuBLAS's int dimensions", op);
    return MXP_OK;
}

static const float k_one = 1.0f, k_zero = 0.0f;

/* C[b] (=|+=) op(A[b]) op(B[b]), row-major, d->B slices. */
static int product(cublasHandle_t h, const char *op, int ta, int tb, const dims3 *d, const float *A, const float *B,
                   float *C, int32_t req) {
    if (req == MXP_REQ_NULL) return MXP_OK;
    int M = (int)d->M, N = (int)d->N, K = (int)d->K;
    int lda = ta ? M : K, ldb = tb ? K : N;
    if (M == 0 || N == 0 || d->B == 0) return MXP_OK;
    CUBLAS_TRY(cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                                         &k_one, B, ldb, (long long)d->K * d->N, A, lda, (long long)d->M * d->K,
                                         req == MXP_REQ_ADD ? &k_one : &k_zero, C, N, (long long)d->M * d->N,
                                         (int)d->B),
               op);
    return MXP_OK;
}

static int flags(const mxp_op_params *p, int *ta, int *tb) {
    int32_t a = 0, b = 0;
    int rc = mxp_param_get_bool(g_cu_host, p, "transpose_a", &a);
    if (!rc) rc = mxp_param_get_bool(g_cu_host, p, "transpose_b", &b);
    *ta = a;
    *tb = b;
    return rc;
}

static int check(const mxp_tensor *t, const char *op, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %s must be a contiguous float32 array", op, what);
    return MXP_OK;
}

static int dot_supports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32) return cu_refuse(a, "dot on gpu: only float32");
    if (!mxp_impl_query_op_params(a)) return cu_refuse(a, "dot on gpu: the host gives no parameter record (ABI 1.1 needed)");
    return 1;
}

static int dot_forward(const mxp_forward_args *a) {
    int batch = a->user_data != NULL;
    const char *op = batch ? "gpu op 'batch_dot' forward" : "gpu op 'dot' forward";
    int ta, tb, rc = flags(mxp_forward_op_params(a), &ta, &tb);
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (rc || req == MXP_REQ_NULL) return rc;
    if ((rc = check(&a->in[0], op, "lhs")) || (rc = check(&a->in[1], op, "rhs")) || (rc = check(&a->out[0], op, "output")))
        return rc;
    dims3 d;
    cublasHandle_t h;
    if ((rc = dims_of(batch, ta, tb, &a->in[0], &a->in[1], &d)) || (rc = cu_blas_handle(a->ctx->device.id, a->ctx->stream, &h)))
        return rc;
    rc = product(h, op, ta, tb, &d, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in[1]), mxp_tensor_ptr(&a->out[0]), req);
    return rc ? rc : cu_finish(a->ctx->stream, op);
}

/* As the CPU impl: with G = out_grad (M, N),
 *   dA = G op(B)ᵀ (M,K), or op(B) Gᵀ stored (K,M) with transpose_a;
 *   dB = op(A)ᵀ G (K,N), or Gᵀ op(A) stored (N,K) with transpose_b. */
static int dot_backward(const mxp_backward_args *a) {
    int batch = a->user_data != NULL;
    const char *op = batch ? "gpu op 'batch_dot' backward" : "gpu op 'dot' backward";
    int ta, tb, rc = flags(mxp_backward_op_params(a), &ta, &tb);
    if (rc) return rc;
    if ((rc = check(&a->out_grad[0], op, "out_grad")) || (rc = check(&a->in[0], op, "lhs")) ||
        (rc = check(&a->in[1], op, "rhs")))
        return rc;
    for (int i = 0; i < 2; i++)
        if (a->req[i] != MXP_REQ_NULL && (rc = check(&a->in_grad[i], op, "gradient"))) return rc;
    dims3 d;
    cublasHandle_t h;
    if ((rc = dims_of(batch, ta, tb, &a->in[0], &a->in[1], &d)) || (rc = cu_blas_handle(a->ctx->device.id, a->ctx->stream, &h)))
        return rc;
    const float *A = mxp_tensor_ptr(&a->in[0]), *B = mxp_tensor_ptr(&a->in[1]), *G = mxp_tensor_ptr(&a->out_grad[0]);
    float *dA = mxp_tensor_ptr(&a->in_grad[0]), *dB = mxp_tensor_ptr(&a->in_grad[1]);
    dims3 da, db;
    if (!ta) {
        da = (dims3){d.M, d.K, d.N, d.B};
        rc = product(h, op, 0, !tb, &da, G, B, dA, a->req[0]);
    } else {
        da = (dims3){d.K, d.M, d.N, d.B};
        rc = product(h, op, tb, 1, &da, B, G, dA, a->req[0]);
    }
    if (rc) return rc;
    if (!tb) {
        db = (dims3){d.K, d.N, d.M, d.B};
        rc = product(h, op, !ta, 0, &db, A, G, dB, a->req[1]);
    } else {
        db = (dims3){d.N, d.K, d.M, d.B};
        rc = product(h, op, 1, ta, &db, G, A, dB, a->req[1]);
    }
    return rc ? rc : cu_finish(a->ctx->stream, op);
}

static const mxp_op_impl g_dot_impls[] = {
    {MXP_HEADER(mxp_op_impl), "dot", "cublas", "gpu", MXP_RANK_PRIMARY, 0, "cuBLAS SGEMM (float32, contiguous)",
     dot_supports, NULL, NULL, dot_forward, dot_backward, NULL, NULL},
    {MXP_HEADER(mxp_op_impl), "batch_dot", "cublas", "gpu", MXP_RANK_PRIMARY, 0,
     "cuBLAS strided-batched SGEMM (float32, contiguous)", dot_supports, NULL, NULL, dot_forward, dot_backward, NULL,
     (void *)1},
};

int cu_reg_dot(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof g_dot_impls / sizeof g_dot_impls[0]; i++) {
        int rc = r->add_impl(r, &g_dot_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
