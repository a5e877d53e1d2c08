/* batchnorm.c — the GPU implementation ("cuda", device gpu) of ops-nn's
 * BatchNorm, with ops-nn's exact semantics (not cuDNN's, whose running
 * variance is unbiased and whose saved statistics are inverse deviations):
 * outputs output, mean, var (the batch statistics used, var biased), aux
 * moving_mean and moving_var updated in training (moving = moving *
 * momentum + batch * (1 - momentum)), fix_gamma, use_global_stats, any
 * channel axis.  Kernels: bn_kernels.cu.  Parameters (eps, momentum,
 * fix_gamma, use_global_stats, axis) are read by name.  Contiguous float32
 * only. */
#include "bn_kernels.h"
#include "cu_common.h"

#include <string.h>

typedef struct bn_cfg {
    double eps, momentum;
    int32_t fix_gamma, use_global;
    int64_t axis;
} bn_cfg;

static int bn_read(const mxp_op_params *p, bn_cfg *c) {
    int rc;
    if ((rc = mxp_param_get_float(g_cu_host, p, "eps", &c->eps)) ||
        (rc = mxp_param_get_float(g_cu_host, p, "momentum", &c->momentum)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "fix_gamma", &c->fix_gamma)) ||
        (rc = mxp_param_get_bool(g_cu_host, p, "use_global_stats", &c->use_global)) ||
        (rc = mxp_param_get_int(g_cu_host, p, "axis", &c->axis)))
        return rc;
    return MXP_OK;
}

/* (O, C, S) around the channel axis of x. */
static int bn_geom(const bn_cfg *c, const mxp_tensor *x, cuk_bn *k) {
    int64_t ax = c->axis < 0 ? c->axis + x->ndim : c->axis;
    if (ax < 0 || ax >= x->ndim)
        return g_cu_host->set_error(MXP_EINVAL, "gpu op 'BatchNorm': axis %lld out of range for %d-D data",
                                    (long long)c->axis, (int)x->ndim);
    k->O = 1;
    k->S = 1;
    k->C = x->shape[ax];
    for (int i = 0; i < ax; i++) k->O *= x->shape[i];
    for (int i = (int)ax + 1; i < x->ndim; i++) k->S *= x->shape[i];
    k->eps = c->eps;
    k->momentum = c->momentum;
    k->fix_gamma = c->fix_gamma;
    return MXP_OK;
}

static int bn_supports(mxp_impl_query_args *a) {
    if (!mxp_impl_query_op_params(a))
        return cu_refuse(a, "BatchNorm on gpu: the host gives no parameter record (ABI 1.1 needed)");
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32) return cu_refuse(a, "BatchNorm on gpu: only float32");
    return 1;
}

static int check(const mxp_tensor *t, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'BatchNorm': %s must be a contiguous float32 array", what);
    return MXP_OK;
}

static float *out_or_null(const mxp_tensor *t, uint32_t n, uint32_t i, const int32_t *req) {
    return i < n && req[i] != MXP_REQ_NULL && t[i].data ? (float *)mxp_tensor_ptr(&t[i]) : NULL;
}

static int bn_forward(const mxp_forward_args *a) {
    const char *where = "gpu op 'BatchNorm' forward";
    bn_cfg c;
    cuk_bn k;
    memset(&k, 0, sizeof k);
    int rc = bn_read(mxp_forward_op_params(a), &c);
    if (!rc) rc = bn_geom(&c, &a->in[0], &k);
    if (rc) return rc;
    if (a->n_in < 3 || a->n_aux < 2)
        return g_cu_host->set_error(MXP_EINVAL, "%s: needs data, gamma, beta and two aux states", where);
    const char *names[3] = {"data", "gamma", "beta"};
    for (int i = 0; i < 3; i++)
        if ((rc = check(&a->in[i], names[i]))) return rc;
    if ((rc = check(&a->aux[0], "moving_mean")) || (rc = check(&a->aux[1], "moving_var"))) return rc;
    for (uint32_t i = 0; i < a->n_out; i++)
        if (a->req[i] != MXP_REQ_NULL && (rc = check(&a->out[i], "output"))) return rc;
    k.batch_stats = a->ctx->is_train && !c.use_global;
    k.req = a->req[0];
    rc = cu_check_launch(cuk_bn_fwd(a->ctx->stream, &k, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in[1]),
                                    mxp_tensor_ptr(&a->in[2]), out_or_null(a->out, a->n_out, 0, a->req),
                                    out_or_null(a->out, a->n_out, 1, a->req), out_or_null(a->out, a->n_out, 2, a->req),
                                    mxp_tensor_ptr(&a->aux[0]), mxp_tensor_ptr(&a->aux[1])),
                         "batchnorm forward", "BatchNorm");
    return rc ? rc : cu_finish(a->ctx->stream, where);
}

static int bn_backward(const mxp_backward_args *a) {
    const char *where = "gpu op 'BatchNorm' backward";
    bn_cfg c;
    cuk_bn k;
    memset(&k, 0, sizeof k);
    int rc = bn_read(mxp_backward_op_params(a), &c);
    if (!rc) rc = bn_geom(&c, &a->in[0], &k);
    if (rc) return rc;
    k.batch_stats = a->ctx->is_train && !c.use_global;
    const mxp_tensor *mean = k.batch_stats ? &a->out[1] : &a->aux[0], *var = k.batch_stats ? &a->out[2] : &a->aux[1];
    if ((rc = check(&a->in[0], "data")) || (rc = check(&a->in[1], "gamma")) || (rc = check(&a->out_grad[0], "out_grad")) ||
        (rc = check(mean, "saved mean")) || (rc = check(var, "saved var")))
        return rc;
    for (uint32_t i = 0; i < 3 && i < a->n_in; i++)
        if (a->req[i] != MXP_REQ_NULL && (rc = check(&a->in_grad[i], "gradient"))) return rc;
    k.req = a->req[0];
    k.req_g = a->req[1];
    k.req_b = a->req[2];
    rc = cu_check_launch(cuk_bn_bwd(a->ctx->stream, &k, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in[1]),
                                    mxp_tensor_ptr(&a->out_grad[0]), mxp_tensor_ptr(mean), mxp_tensor_ptr(var),
                                    out_or_null(a->in_grad, a->n_in, 0, a->req),
                                    out_or_null(a->in_grad, a->n_in, 1, a->req),
                                    out_or_null(a->in_grad, a->n_in, 2, a->req)),
                         "batchnorm backward", "BatchNorm");
    return rc ? rc : cu_finish(a->ctx->stream, where);
}

static const mxp_op_impl g_bn_impl = {
    MXP_HEADER(mxp_op_impl), "BatchNorm", "cuda", "gpu", MXP_RANK_PRIMARY, 0,
    "CUDA kernels, one block per channel, ops-nn's statistics (float32)", bn_supports, NULL, NULL, bn_forward,
    bn_backward, NULL, NULL,
};

int cu_reg_batchnorm(mxp_registrar *r) { return r->add_impl(r, &g_bn_impl); }
