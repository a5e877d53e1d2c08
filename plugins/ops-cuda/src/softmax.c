/* softmax.c — GPU implementations of ops-nn's softmax and SoftmaxOutput:
 * the softmax itself is cuDNN's (cudnnSoftmaxForward, ACCURATE, CHANNEL
 * mode on an (O, K, S, 1) view: softmax over K for every (o, s)), softmax's
 * backward is cudnnSoftmaxBackward, and SoftmaxOutput's loss gradient
 *   dx = grad_scale / norm * (p - onehot_smoothed(label)), 0 on ignored rows
 * (norm 1, N, or the number of valid labels; with multi_output also times
 * the spatial size, except for 'valid') is a kernel (nn_kernels.cu).
 * Parameters are read by name through the host's typed parameter access.
 * Refused here (with the reason): softmax with a temperature other than 1
 * or use_length, and dtypes other than float32. */
#include "cu_handles.h"
#include "nn_kernels.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const float k_one = 1.0f, k_zero = 0.0f;

/* A (O, K, S, 1) NCHW float descriptor. */
static int oks_desc(int64_t O, int64_t K, int64_t S, cudnnTensorDescriptor_t *out, const char *where) {
    *out = NULL;
    if (O > INT_MAX || K > INT_MAX || S > INT_MAX || O * K * S > INT_MAX)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: %lld x %lld x %lld exceeds cuDNN's int dimensions", where,
                                    (long long)O, (long long)K, (long long)S);
    CUDNN_TRY(cudnnCreateTensorDescriptor(out), where);
    cudnnStatus_t st = cudnnSetTensor4dDescriptor(*out, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)O, (int)K, (int)S, 1);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnnDestroyTensorDescriptor(*out);
        *out = NULL;
        return cu_dnn_fail(st, "cudnnSetTensor4dDescriptor", where);
    }
    return MXP_OK;
}

static int f32_only(mxp_impl_query_args *a, const char *op) {
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "%s on gpu: only float32 (input %u is dtype %d)", op, i, (int)a->in_dtypes[i]);
    return 1;
}

static int check(const mxp_tensor *t, const char *op, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %s must be a contiguous float32 array", op, what);
    return MXP_OK;
}

/* ------------------------------------------------------------ softmax */
/* (O, K, S) of softmax over `axis` of t. */
static int smx_split(const mxp_op_params *p, const mxp_tensor *t, int64_t *O, int64_t *K, int64_t *S) {
    int64_t axis = 0;
    int rc = mxp_param_get_int(g_cu_host, p, "axis", &axis);
    if (rc) return rc;
    int64_t ax = axis < 0 ? axis + t->ndim : axis;
    if (ax < 0 || ax >= t->ndim)
        return g_cu_host->set_error(MXP_EINVAL, "gpu op 'softmax': axis %lld out of range for %d-D data",
                                    (long long)axis, (int)t->ndim);
    *O = 1;
    *S = 1;
    *K = t->shape[ax];
    for (int i = 0; i < ax; i++) *O *= t->shape[i];
    for (int i = (int)ax + 1; i < t->ndim; i++) *S *= t->shape[i];
    return MXP_OK;
}

static int smx_supports(mxp_impl_query_args *a) {
    const mxp_op_params *p = mxp_impl_query_op_params(a);
    if (!p) return cu_refuse(a, "softmax on gpu: the host gives no parameter record (ABI 1.1 needed)");
    mxp_param_opt_float t;
    int32_t use_length = 0;
    int rc = mxp_param_get_opt_float(g_cu_host, p, "temperature", &t);
    if (!rc) rc = mxp_param_get_bool(g_cu_host, p, "use_length", &use_length);
    if (rc) return rc;
    if (t.has_value && t.value != 1.0) return cu_refuse(a, "softmax on gpu: only temperature 1 (cuDNN's softmax)");
    if (use_length) return cu_refuse(a, "softmax on gpu: use_length is not supported");
    return f32_only(a, "softmax");
}

static int smx_forward(const mxp_forward_args *a) {
    const char *where = "gpu op 'softmax' forward";
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check(&a->in[0], "softmax", "data");
    if (!rc) rc = check(&a->out[0], "softmax", "output");
    int64_t O, K, S;
    if (!rc) rc = smx_split(mxp_forward_op_params(a), &a->in[0], &O, &K, &S);
    cudnnHandle_t h;
    if (!rc) rc = cu_dnn_handle(a->ctx->device.id, a->ctx->stream, &h);
    cudnnTensorDescriptor_t d = NULL;
    if (!rc) rc = oks_desc(O, K, S, &d, where);
    if (rc) return rc;
    cudnnStatus_t st = cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &k_one, d,
                                           mxp_tensor_ptr(&a->in[0]), req == MXP_REQ_ADD ? &k_one : &k_zero, d,
                                           mxp_tensor_ptr(&a->out[0]));
    cudnnDestroyTensorDescriptor(d);
    if (st != CUDNN_STATUS_SUCCESS) return cu_dnn_fail(st, "cudnnSoftmaxForward", where);
    return cu_finish(a->ctx->stream, where);
}

static int smx_backward(const mxp_backward_args *a) {
    const char *where = "gpu op 'softmax' backward";
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check(&a->out[0], "softmax", "output");
    if (!rc) rc = check(&a->out_grad[0], "softmax", "out_grad");
    if (!rc) rc = check(&a->in_grad[0], "softmax", "data gradient");
    int64_t O, K, S;
    if (!rc) rc = smx_split(mxp_backward_op_params(a), &a->out[0], &O, &K, &S);
    cudnnHandle_t h;
    if (!rc) rc = cu_dnn_handle(a->ctx->device.id, a->ctx->stream, &h);
    cudnnTensorDescriptor_t d = NULL;
    if (!rc) rc = oks_desc(O, K, S, &d, where);
    if (rc) return rc;
    cudnnStatus_t st = cudnnSoftmaxBackward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &k_one, d,
                                            mxp_tensor_ptr(&a->out[0]), d, mxp_tensor_ptr(&a->out_grad[0]),
                                            req == MXP_REQ_ADD ? &k_one : &k_zero, d, mxp_tensor_ptr(&a->in_grad[0]));
    cudnnDestroyTensorDescriptor(d);
    if (st != CUDNN_STATUS_SUCCESS) return cu_dnn_fail(st, "cudnnSoftmaxBackward", where);
    return cu_finish(a->ctx->stream, where);
}

/* ------------------------------------------------------ SoftmaxOutput */
typedef struct so_cfg {
    double grad_scale, ignore_label, smooth_alpha;
    int32_t multi_output, use_ignore, preserve_shape;
    const char *normalization;
} so_cfg;

static int so_read(const mxp_op_params *p, so_cfg *c) {
    int rc;
    if ((rc = mxp_param_get_float(g_cu_host, p, "grad_scale", &c->grad_scale)) ||
        (rc = mxp_param_get_float(g_cu_host, p, "ignore_label", &c->ignore_label)) ||
        (rc = mxp_param_get_float(g_cu_host, p, "smooth_alpha", &c->smooth_alpha)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "multi_output", &c->multi_output)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "use_ignore", &c->use_ignore)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "preserve_shape", &c->preserve_shape)) ||
        (rc = mxp_param_get_enum(g_cu_host, p, "normalization", &c->normalization)))
        return rc;
    return MXP_OK;
}

/* (O, K, S) as ops-nn splits the data for SoftmaxOutput. */
static void so_split(const so_cfg *c, const mxp_tensor *t, int64_t *O, int64_t *K, int64_t *S) {
    *O = 1;
    *K = 1;
    *S = 1;
    int nd = t->ndim;
    if (c->preserve_shape) {
        for (int i = 0; i < nd - 1; i++) *O *= t->shape[i];
        *K = nd > 0 ? t->shape[nd - 1] : 1;
    } else if (c->multi_output) {
        *O = t->shape[0];
        *K = nd > 1 ? t->shape[1] : 1;
        for (int i = 2; i < nd; i++) *S *= t->shape[i];
    } else {
        *O = nd > 0 ? t->shape[0] : 1;
        for (int i = 1; i < nd; i++) *K *= t->shape[i];
    }
}

static int so_supports(mxp_impl_query_args *a) {
    if (!mxp_impl_query_op_params(a))
        return cu_refuse(a, "SoftmaxOutput on gpu: the host gives no parameter record (ABI 1.1 needed)");
    return f32_only(a, "SoftmaxOutput");
}

static int so_forward(const mxp_forward_args *a) {
    const char *where = "gpu op 'SoftmaxOutput' forward";
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    so_cfg c;
    int rc = check(&a->in[0], "SoftmaxOutput", "data");
    if (!rc) rc = check(&a->out[0], "SoftmaxOutput", "output");
    if (!rc) rc = so_read(mxp_forward_op_params(a), &c);
    cudnnHandle_t h;
    if (!rc) rc = cu_dnn_handle(a->ctx->device.id, a->ctx->stream, &h);
    int64_t O, K, S;
    if (!rc) so_split(&c, &a->in[0], &O, &K, &S);
    cudnnTensorDescriptor_t d = NULL;
    if (!rc) rc = oks_desc(O, K, S, &d, where);
    if (rc) return rc;
    cudnnStatus_t st = cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &k_one, d,
                                           mxp_tensor_ptr(&a->in[0]), req == MXP_REQ_ADD ? &k_one : &k_zero, d,
                                           mxp_tensor_ptr(&a->out[0]));
    cudnnDestroyTensorDescriptor(d);
    if (st != CUDNN_STATUS_SUCCESS) return cu_dnn_fail(st, "cudnnSoftmaxForward", where);
    return cu_finish(a->ctx->stream, where);
}

/* Labels that are not ignored (normalization 'valid'): counted on the host
 * from a copy of the labels, which are one float per row. */
static int count_valid(const so_cfg *c, const mxp_tensor *label, void *stream, int64_t rows, int64_t *out) {
    *out = rows;
    if (!c->use_ignore) return MXP_OK;
    float *host = malloc((size_t)(rows ? rows : 1) * sizeof *host);
    if (!host) return g_cu_host->set_error(MXP_ENOMEM, "gpu op 'SoftmaxOutput': out of memory for %lld labels", (long long)rows);
    cudaError_t e = cudaMemcpyAsync(host, mxp_tensor_ptr(label), (size_t)rows * sizeof *host, cudaMemcpyDeviceToHost,
                                    (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e != cudaSuccess) {
        free(host);
        return cu_fail(e, "cudaMemcpyAsync", "gpu op 'SoftmaxOutput' label count");
    }
    int64_t n = 0;
    for (int64_t r = 0; r < rows; r++)
        if (!((double)host[r] == c->ignore_label)) n++;
    free(host);
    *out = n;
    return MXP_OK;
}

static int so_backward(const mxp_backward_args *a) {
    const char *where = "gpu op 'SoftmaxOutput' backward";
    so_cfg c;
    int rc = check(&a->out[0], "SoftmaxOutput", "output");
    if (!rc) rc = check(&a->in[1], "SoftmaxOutput", "label");
    if (!rc) rc = so_read(mxp_backward_op_params(a), &c);
    if (rc) return rc;
    int64_t O, K, S;
    so_split(&c, &a->out[0], &O, &K, &S);
    if (mxp_tensor_numel(&a->in[1]) != O * S)
        return g_cu_host->set_error(MXP_ESHAPE, "%s: %lld labels for %lld rows", where,
                                    (long long)mxp_tensor_numel(&a->in[1]), (long long)(O * S));
    void *s = a->ctx->stream;
    if (a->req[0] != MXP_REQ_NULL) {
        if ((rc = check(&a->in_grad[0], "SoftmaxOutput", "data gradient"))) return rc;
        double norm = 1.0;
        if (c.normalization && !strcmp(c.normalization, "batch")) {
            norm = (double)a->out[0].shape[0];
        } else if (c.normalization && !strcmp(c.normalization, "valid")) {
            int64_t valid = 0;
            if ((rc = count_valid(&c, &a->in[1], s, O * S, &valid))) return rc;
            norm = (double)(valid > 0 ? valid : 1);
        }
        /* As ops-nn (and MXNet): multi_output also divides by the spatial
         * size S, except for 'valid', whose count covers every position. */
        int is_valid = c.normalization && !strcmp(c.normalization, "valid");
        if (c.multi_output && !c.preserve_shape && !is_valid) norm *= (double)S;
        cuk_softmax_ce c2 = {O, K, S, (float)(c.grad_scale / norm), (float)(1.0 - c.smooth_alpha),
                             K > 1 ? (float)(c.smooth_alpha / (double)(K - 1)) : 0.0f, c.use_ignore,
                             (float)c.ignore_label};
        rc = cu_check_launch(cuk_softmax_ce_grad(s, &c2, mxp_tensor_ptr(&a->out[0]), mxp_tensor_ptr(&a->in[1]),
                                                 mxp_tensor_ptr(&a->in_grad[0]), a->req[0] == MXP_REQ_ADD),
                             "softmax cross-entropy gradient", "SoftmaxOutput");
        if (rc) return rc;
    }
    if (a->n_in > 1 && (a->req[1] == MXP_REQ_WRITE || a->req[1] == MXP_REQ_INPLACE) && a->in_grad[1].data)
        CU_TRY(cudaMemsetAsync(mxp_tensor_ptr(&a->in_grad[1]), 0,
                               (size_t)mxp_tensor_numel(&a->in_grad[1]) * mxp_dtype_size(a->in_grad[1].dtype),
                               (cudaStream_t)s),
               where);
    return cu_finish(s, where);
}

static const mxp_op_impl g_softmax_impls[] = {
    {MXP_HEADER(mxp_op_impl), "softmax", "cudnn", "gpu", MXP_RANK_PRIMARY, 0, "cuDNN softmax (float32)",
     smx_supports, NULL, NULL, smx_forward, smx_backward, NULL, NULL},
    {MXP_HEADER(mxp_op_impl), "SoftmaxOutput", "cudnn", "gpu", MXP_RANK_PRIMARY, 0,
     "cuDNN softmax, CUDA cross-entropy gradient (float32)", so_supports, NULL, NULL, so_forward, so_backward, NULL,
     NULL},
};

int cu_reg_softmax(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof g_softmax_impls / sizeof g_softmax_impls[0]; i++) {
        int rc = r->add_impl(r, &g_softmax_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
