/* pooling.c — the GPU implementation ("cudnn", device gpu) of ops-nn's
 * Pooling through cuDNN 9: 2-D NCHW float32, max (CUDNN_POOLING_MAX_
 * DETERMINISTIC) and avg (count_include_pad picks cuDNN's include/exclude
 * padding mode), global_pool, kernel/stride/pad.  The 'valid' convention
 * is cuDNN's; 'full' is accepted only where it gives the same output size,
 * and sum/lp pooling are refused (cuDNN has neither).
 * ops-nn's Pooling backward keeps only the input (not the output), and
 * cudnnPoolingBackward needs both: backward recomputes the output into the
 * workspace first (workspace = one output).  Parameters are read by name
 * through the host's typed parameter access. */
#include "cu_handles.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

typedef struct pool_cfg {
    int n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
    cudnnPoolingMode_t mode;
} pool_cfg;

static int refuse(char *reason, uint32_t size, const char *msg) {
    if (reason && size) snprintf(reason, size, "Pooling on gpu: %s", msg);
    return 0;
}

static int pair(const mxp_op_params *p, const char *name, int64_t dflt, int64_t v[2]) {
    mxp_param_shape s;
    int rc = mxp_param_get_shape(g_cu_host, p, name, &s);
    if (rc) return rc;
    v[0] = v[1] = dflt;
    if (s.has_value && s.ndim == 2) {
        v[0] = s.dims[0];
        v[1] = s.dims[1];
    } else if (s.has_value && s.ndim != 0) {
        return 2;
    }
    return MXP_OK;
}

/* 1 supported, 0 refused (reason), < 0 error. */
static int pool_read(const mxp_op_params *p, const mxp_shape *in, const mxp_shape *out, pool_cfg *g, char *reason,
                     uint32_t reason_size) {
    memset(g, 0, sizeof *g);
    if (!p) return refuse(reason, reason_size, "the host gives no parameter record (ABI 1.1 needed)");
    const char *type = NULL, *conv = NULL, *layout = NULL;
    int32_t global = 0, cip = 1;
    int rc;
    if ((rc = mxp_param_get_enum(g_cu_host, p, "pool_type", &type)) ||
        (rc = mxp_param_get_enum(g_cu_host, p, "pooling_convention", &conv)) ||
        (rc = mxp_param_get_enum(g_cu_host, p, "layout", &layout)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "global_pool", &global)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "count_include_pad", &cip)))
        return rc;
    if (strcmp(type, "max") && strcmp(type, "avg")) return refuse(reason, reason_size, "only max and avg pooling (cuDNN)");
    if (strcmp(layout, "None") && strcmp(layout, "NCHW")) return refuse(reason, reason_size, "only NCHW layout");
    if (in->ndim != 4 || out->ndim != 4) return refuse(reason, reason_size, "data must be 4-D NCHW");
    for (int i = 0; i < 4; i++)
        if (in->dims[i] <= 0 || in->dims[i] > INT_MAX || out->dims[i] <= 0 || out->dims[i] > INT_MAX)
            return refuse(reason, reason_size, "a dimension is 0 or exceeds INT_MAX");
    g->n = (int)in->dims[0];
    g->c = (int)in->dims[1];
    g->h = (int)in->dims[2];
    g->w = (int)in->dims[3];
    int64_t k[2], s[2], pd[2];
    if (global) {
        k[0] = g->h;
        k[1] = g->w;
        s[0] = s[1] = 1;
        pd[0] = pd[1] = 0;
    } else {
        mxp_param_shape ks;
        if ((rc = mxp_param_get_shape(g_cu_host, p, "kernel", &ks))) return rc;
        if (ks.ndim != 2) return refuse(reason, reason_size, "kernel must be 2-D");
        k[0] = ks.dims[0];
        k[1] = ks.dims[1];
        if ((rc = pair(p, "stride", 1, s)) < 0 || (rc == 0 && (rc = pair(p, "pad", 0, pd)) < 0)) return rc;
        if (rc) return refuse(reason, reason_size, "stride and pad must have 2 entries");
    }
    for (int i = 0; i < 2; i++)
        if (k[i] < 1 || s[i] < 1 || pd[i] < 0 || k[i] > INT_MAX || s[i] > INT_MAX || pd[i] > INT_MAX)
            return refuse(reason, reason_size, "kernel and stride must be >= 1, pad >= 0");
    g->kh = (int)k[0];
    g->kw = (int)k[1];
    g->sh = (int)s[0];
    g->sw = (int)s[1];
    g->ph = (int)pd[0];
    g->pw = (int)pd[1];
    g->oh = (int)out->dims[2];
    g->ow = (int)out->dims[3];
    int64_t vh = 1 + ((int64_t)g->h + 2 * g->ph - g->kh) / g->sh, vw = 1 + ((int64_t)g->w + 2 * g->pw - g->kw) / g->sw;
    if (vh != g->oh || vw != g->ow || out->dims[0] != g->n || out->dims[1] != g->c)
        return refuse(reason, reason_size, strcmp(conv, "valid") ? "this 'full' pooling gives another size than cuDNN's"
                                                                 : "output shape disagrees with the parameters");
    g->mode = !strcmp(type, "max") ? CUDNN_POOLING_MAX_DETERMINISTIC
              : cip ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    return 1;
}

static int pool_supports(mxp_impl_query_args *a) {
    if (a->n_in < 1 || a->n_out < 1 || !a->in_shapes || !a->out_shapes)
        return refuse(a->reason, a->reason_size, "shapes are needed");
    if ((a->in_dtypes && a->in_dtypes[0] != MXP_DTYPE_F32)) return refuse(a->reason, a->reason_size, "only float32");
    pool_cfg g;
    return pool_read(mxp_impl_query_op_params(a), &a->in_shapes[0], &a->out_shapes[0], &g, a->reason, a->reason_size);
}

/* Backward recomputes the output: one output of workspace. */
static int pool_workspace(mxp_impl_query_args *a) {
    a->workspace_bytes = 0;
    if (a->n_out < 1 || !a->out_shapes || a->out_shapes[0].ndim < 0) return MXP_OK;
    uint64_t n = 1;
    for (int i = 0; i < a->out_shapes[0].ndim; i++) n *= (uint64_t)a->out_shapes[0].dims[i];
    a->workspace_bytes = n * sizeof(float);
    return MXP_OK;
}

typedef struct pool_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t pool;
} pool_descs;

static void descs_free(pool_descs *d) {
    if (d->x) cudnnDestroyTensorDescriptor(d->x);
    if (d->y) cudnnDestroyTensorDescriptor(d->y);
    if (d->pool) cudnnDestroyPoolingDescriptor(d->pool);
    memset(d, 0, sizeof *d);
}

static int descs_make(const pool_cfg *g, pool_descs *d, const char *where) {
    memset(d, 0, sizeof *d);
    CUDNN_TRY(cudnnCreateTensorDescriptor(&d->x), where);
    CUDNN_TRY(cudnnCreateTensorDescriptor(&d->y), where);
    CUDNN_TRY(cudnnCreatePoolingDescriptor(&d->pool), where);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c, g->h, g->w), where);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, g->n, g->c, g->oh, g->ow), where);
    CUDNN_TRY(cudnnSetPooling2dDescriptor(d->pool, g->mode, CUDNN_NOT_PROPAGATE_NAN, g->kh, g->kw, g->ph, g->pw, g->sh,
                                          g->sw),
              where);
    return MXP_OK;
}

static const float k_one = 1.0f, k_zero = 0.0f;

static int run(const mxp_op_params *p, const mxp_op_ctx *ctx, const mxp_tensor *x, const mxp_tensor *yt, const mxp_tensor *dy,
               const mxp_tensor *dx, int32_t req, int backward) {
    const char *where = backward ? "gpu op 'Pooling' (cudnn) backward" : "gpu op 'Pooling' (cudnn) forward";
    if (req == MXP_REQ_NULL) return MXP_OK;
    const mxp_tensor *ts[3] = {x, backward ? dy : yt, backward ? dx : NULL};
    for (int i = 0; i < 3; i++)
        if (ts[i] && (!ts[i]->data || !cu_all_f32_contig(ts[i], 1)))
            return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: data, output and gradients must be contiguous float32 "
                                        "arrays (data is needed by backward)", where);
    mxp_shape in, out;
    memset(&in, 0, sizeof in);
    memset(&out, 0, sizeof out);
    const mxp_tensor *ot = backward ? dy : yt;
    in.ndim = x->ndim;
    out.ndim = ot->ndim;
    for (int i = 0; i < x->ndim && i < MXP_MAX_NDIM; i++) in.dims[i] = x->shape[i];
    for (int i = 0; i < ot->ndim && i < MXP_MAX_NDIM; i++) out.dims[i] = ot->shape[i];
    pool_cfg g;
    char reason[256] = "";
    int rc = pool_read(p, &in, &out, &g, reason, sizeof reason);
    if (rc == 0) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: %s", where, reason);
    if (rc < 0) return rc;
    cudnnHandle_t h;
    if ((rc = cu_dnn_handle(ctx->device.id, ctx->stream, &h))) return rc;
    pool_descs d;
    rc = descs_make(&g, &d, where);
    if (!rc && !backward) {
        cudnnStatus_t st = cudnnPoolingForward(h, d.pool, &k_one, d.x, mxp_tensor_ptr(x), req == MXP_REQ_ADD ? &k_one : &k_zero,
                                               d.y, mxp_tensor_ptr(yt));
        if (st != CUDNN_STATUS_SUCCESS) rc = cu_dnn_fail(st, "cudnnPoolingForward", where);
    } else if (!rc) {
        uint64_t ybytes = (uint64_t)mxp_tensor_numel(dy) * sizeof(float);
        if (!ctx->workspace || ctx->workspace_bytes < ybytes) {
            rc = g_cu_host->set_error(MXP_EINVAL, "%s: needs %llu workspace bytes to recompute the output, got %llu", where,
                                      (unsigned long long)ybytes, (unsigned long long)ctx->workspace_bytes);
        } else {
            cudnnStatus_t st = cudnnPoolingForward(h, d.pool, &k_one, d.x, mxp_tensor_ptr(x), &k_zero, d.y, ctx->workspace);
            if (st != CUDNN_STATUS_SUCCESS) rc = cu_dnn_fail(st, "cudnnPoolingForward (recompute)", where);
            if (!rc) {
                st = cudnnPoolingBackward(h, d.pool, &k_one, d.y, ctx->workspace, d.y, mxp_tensor_ptr(dy), d.x,
                                          mxp_tensor_ptr(x), req == MXP_REQ_ADD ? &k_one : &k_zero, d.x, mxp_tensor_ptr(dx));
                if (st != CUDNN_STATUS_SUCCESS) rc = cu_dnn_fail(st, "cudnnPoolingBackward", where);
            }
        }
    }
    descs_free(&d);
    return rc ? rc : cu_finish(ctx->stream, where);
}

static int pool_forward(const mxp_forward_args *a) {
    return run(mxp_forward_op_params(a), a->ctx, &a->in[0], &a->out[0], NULL, NULL, a->req ? a->req[0] : MXP_REQ_WRITE, 0);
}

static int pool_backward(const mxp_backward_args *a) {
    return run(mxp_backward_op_params(a), a->ctx, &a->in[0], NULL, &a->out_grad[0], &a->in_grad[0],
               a->req ? a->req[0] : MXP_REQ_WRITE, 1);
}

static const mxp_op_impl g_pool_impl = {
    MXP_HEADER(mxp_op_impl), "Pooling", "cudnn", "gpu", MXP_RANK_PRIMARY, 0,
    "cuDNN pooling: max, avg (2-D NCHW float32)", pool_supports, pool_workspace, NULL, pool_forward, pool_backward, NULL,
    NULL,
};

int cu_reg_pooling(mxp_registrar *r) { return r->add_impl(r, &g_pool_impl); }
