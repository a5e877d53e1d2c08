/* fc.c — the GPU implementation ("cublas", device gpu) of ops-nn's
 * FullyConnected: out = data · weightᵀ + bias, one cuBLAS SGEMM per
 * product.  It needs no parameter values: the weight's shape (num_hidden,
 * K) gives num_hidden and K (so flatten=True and False alike: data is
 * rows x K with rows = numel(data) / K), and the bias is present exactly
 * when the node has three inputs (no_bias drops it from the arguments).
 *
 * Row-major matrices are column-major transposes, so with cuBLAS
 * (column-major) Yᵀ (H x N) = W (H x K) · Xᵀ (K x N) is
 *   gemm(T, N, H, N, K, W lda=K, X ldb=K, Y ldc=H);
 * backward:  dXᵀ (K x N) = Wᵀ · dYᵀ : gemm(N, N, K, N, H, W K, dY H, dX K)
 *            dWᵀ (K x H) = Xᵀ · dY  : gemm(N, T, K, H, N, X K, dY H, dW K)
 *            db = column sums of dY (a kernel).
 * req write/inplace is beta 0, req add beta 1.  Contiguous float32 only;
 * matrix sizes must fit cuBLAS's int dimensions (checked). */
#include "cu_handles.h"
#include "ew_kernels.h"

#include <limits.h>
#include <string.h>

static int fc_supports(mxp_impl_query_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "FullyConnected on gpu: only float32 (input %u is dtype %d)", i, (int)a->in_dtypes[i]);
    return 1;
}

typedef struct fc_dims {
    int n, k, h; /* rows, inner size, hidden units */
} fc_dims;

static int dims_of(const mxp_tensor *x, const mxp_tensor *w, fc_dims *d) {
    if (w->ndim != 2)
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'FullyConnected': weight has rank %d, expected 2", (int)w->ndim);
    int64_t h = w->shape[0], k = w->shape[1], numel = mxp_tensor_numel(x);
    if (k <= 0 || numel % k != 0)
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op 'FullyConnected': %lld data elements are not rows of %lld",
                                    (long long)numel, (long long)k);
    int64_t n = numel / k;
    if (n > INT_MAX || k > INT_MAX || h > INT_MAX)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'FullyConnected': %lld x %lld x %lld exceeds cuBLAS's int "
                                    "dimensions", (long long)n, (long long)k, (long long)h);
    d->n = (int)n;
    d->k = (int)k;
    d->h = (int)h;
    return MXP_OK;
}

static int check_all(const mxp_tensor *t, uint32_t n, const char *what) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && !cu_all_f32_contig(&t[i], 1))
            return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'FullyConnected': %s %u must be a contiguous float32 "
                                        "array", what, i);
    return MXP_OK;
}

static const float k_one = 1.0f, k_zero = 0.0f;

static int fc_forward(const mxp_forward_args *a) {
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check_all(a->in, a->n_in, "input");
    if (!rc) rc = check_all(a->out, 1, "output");
    fc_dims d;
    if (!rc) rc = dims_of(&a->in[0], &a->in[1], &d);
    if (rc) return rc;
    void *s = a->ctx->stream;
    cublasHandle_t hb;
    rc = cu_blas_handle(a->ctx->device.id, s, &hb);
    if (rc) return rc;
    float *y = mxp_tensor_ptr(&a->out[0]);
    const float *x = mxp_tensor_ptr(&a->in[0]), *w = mxp_tensor_ptr(&a->in[1]);
    CUBLAS_TRY(cublasSgemm(hb, CUBLAS_OP_T, CUBLAS_OP_N, d.h, d.n, d.k, &k_one, w, d.k, x, d.k,
                           req == MXP_REQ_ADD ? &k_one : &k_zero, y, d.h),
               "gpu op 'FullyConnected' forward");
    if (a->n_in > 2 && a->in[2].data) {
        rc = cu_check_launch(cuk_bias_rows(s, y, mxp_tensor_ptr(&a->in[2]), d.n, d.h), "bias add", "FullyConnected");
        if (rc) return rc;
    }
    return cu_finish(s, "FullyConnected forward");
}

static int fc_backward(const mxp_backward_args *a) {
    int rc = check_all(a->out_grad, 1, "out_grad");
    if (!rc) rc = check_all(a->in, a->n_in, "input");
    if (!rc) rc = check_all(a->in_grad, a->n_in, "input gradient");
    fc_dims d;
    if (!rc) rc = dims_of(a->in[0].data ? &a->in[0] : &a->in_grad[0], &a->in[1], &d);
    if (rc) return rc;
    void *s = a->ctx->stream;
    cublasHandle_t hb;
    rc = cu_blas_handle(a->ctx->device.id, s, &hb);
    if (rc) return rc;
    const float *dy = mxp_tensor_ptr(&a->out_grad[0]);
    const int32_t *req = a->req;
    if (req[0] != MXP_REQ_NULL) {
        if (!a->in[1].data)
            return g_cu_host->set_error(MXP_EINVAL, "gpu op 'FullyConnected': backward is missing the weight");
        CUBLAS_TRY(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_N, d.k, d.n, d.h, &k_one, mxp_tensor_ptr(&a->in[1]), d.k, dy,
                               d.h, req[0] == MXP_REQ_ADD ? &k_one : &k_zero, mxp_tensor_ptr(&a->in_grad[0]), d.k),
                   "gpu op 'FullyConnected' data gradient");
    }
    if (req[1] != MXP_REQ_NULL) {
        if (!a->in[0].data)
            return g_cu_host->set_error(MXP_EINVAL, "gpu op 'FullyConnected': backward is missing the data");
        CUBLAS_TRY(cublasSgemm(hb, CUBLAS_OP_N, CUBLAS_OP_T, d.k, d.h, d.n, &k_one, mxp_tensor_ptr(&a->in[0]), d.k, dy,
                               d.h, req[1] == MXP_REQ_ADD ? &k_one : &k_zero, mxp_tensor_ptr(&a->in_grad[1]), d.k),
                   "gpu op 'FullyConnected' weight gradient");
    }
    if (a->n_in > 2 && req[2] != MXP_REQ_NULL) {
        rc = cu_check_launch(cuk_col_sum(s, mxp_tensor_ptr(&a->in_grad[2]), dy, d.n, d.h, req[2] == MXP_REQ_ADD),
                             "bias gradient", "FullyConnected");
        if (rc) return rc;
    }
    return cu_finish(s, "FullyConnected backward");
}

static const mxp_op_impl g_fc_impl = {
    MXP_HEADER(mxp_op_impl), "FullyConnected", "cublas", "gpu", MXP_RANK_PRIMARY, 0,
    "cuBLAS SGEMM (float32, contiguous)", fc_supports, NULL, NULL, fc_forward, fc_backward, NULL, NULL,
};

int cu_reg_fc(mxp_registrar *r) { return r->add_impl(r, &g_fc_impl); }
