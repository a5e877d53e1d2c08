/* conv_direct.c — Convolution on the gpu with the hand-written direct
 * kernels of conv_kernels.cu ("direct"): the second gpu implementation, so
 * mxp_op_set_impl, MXP_IMPL_Convolution and `tune` choose between gpu
 * impls as they do between cpu ones.  Ranked below "cudnn".  Same
 * configurations as cudnn (2-D NCHW float32, read through conv_cfg); no
 * workspace, no library handle: one kernel launch per pass. */
#include "conv_cfg.h"
#include "conv_kernels.h"

#include <stdlib.h>
#include <string.h>

static int direct_supports(mxp_impl_query_args *a) {
    conv_cfg cfg;
    return conv_cfg_query(a, &cfg, a->reason, a->reason_size);
}

static int direct_create(mxp_impl_query_args *a) {
    char reason[256] = "";
    conv_cfg cfg;
    int rc = conv_cfg_query(a, &cfg, reason, sizeof reason);
    if (rc == 0) return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Convolution' (direct): %s", reason);
    if (rc < 0) return rc;
    cuk_conv *g = calloc(1, sizeof *g);
    if (!g) return g_cu_host->set_error(MXP_ENOMEM, "gpu op 'Convolution' (direct): out of memory");
    *g = (cuk_conv){cfg.n, cfg.c, cfg.h, cfg.w, cfg.f, cfg.kh, cfg.kw, cfg.sh, cfg.sw, cfg.ph, cfg.pw, cfg.dh, cfg.dw,
                    cfg.groups, cfg.oh, cfg.ow};
    a->state = g;
    return MXP_OK;
}

static void direct_destroy(const mxp_destroy_args *a) { free(a->state); }

static int check(const mxp_tensor *t, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Convolution' (direct): %s must be a contiguous float32 "
                                    "array", what);
    return MXP_OK;
}

static int direct_forward(const mxp_forward_args *a) {
    const cuk_conv *g = a->state;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (!g) return g_cu_host->set_error(MXP_EINVAL, "gpu op 'Convolution' (direct): no state");
    if (req == MXP_REQ_NULL) return MXP_OK;
    int has_bias = a->n_in > 2;
    int rc = check(&a->in[0], "data");
    if (!rc) rc = check(&a->in[1], "weight");
    if (!rc && has_bias) rc = check(&a->in[2], "bias");
    if (!rc) rc = check(&a->out[0], "output");
    if (rc) return rc;
    rc = cu_check_launch(cuk_conv_fwd(a->ctx->stream, g, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in[1]),
                                      has_bias ? (const float *)mxp_tensor_ptr(&a->in[2]) : NULL,
                                      mxp_tensor_ptr(&a->out[0]), req == MXP_REQ_ADD),
                         "direct forward", "Convolution");
    return rc ? rc : cu_finish(a->ctx->stream, "gpu op 'Convolution' (direct) forward");
}

static int direct_backward(const mxp_backward_args *a) {
    const cuk_conv *g = a->state;
    if (!g) return g_cu_host->set_error(MXP_EINVAL, "gpu op 'Convolution' (direct): no state");
    const int32_t *req = a->req;
    void *s = a->ctx->stream;
    int rc = check(&a->out_grad[0], "out_grad");
    const float *dy = rc ? NULL : mxp_tensor_ptr(&a->out_grad[0]);
    if (!rc && req[0] != MXP_REQ_NULL && !(rc = check(&a->in[1], "weight")))
        rc = cu_check_launch(cuk_conv_bwd_data(s, g, dy, mxp_tensor_ptr(&a->in[1]), mxp_tensor_ptr(&a->in_grad[0]),
                                               req[0] == MXP_REQ_ADD),
                             "direct backward data", "Convolution");
    if (!rc && req[1] != MXP_REQ_NULL && !(rc = check(&a->in[0], "data")))
        rc = cu_check_launch(cuk_conv_bwd_filter(s, g, dy, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in_grad[1]),
                                                 req[1] == MXP_REQ_ADD),
                             "direct backward filter", "Convolution");
    if (!rc && a->n_in > 2 && req[2] != MXP_REQ_NULL)
        rc = cu_check_launch(cuk_conv_bwd_bias(s, g, dy, mxp_tensor_ptr(&a->in_grad[2]), req[2] == MXP_REQ_ADD),
                             "direct backward bias", "Convolution");
    return rc ? rc : cu_finish(s, "gpu op 'Convolution' (direct) backward");
}

static const mxp_op_impl g_conv_direct = {
    MXP_HEADER(mxp_op_impl), "Convolution", "direct", "gpu", MXP_RANK_SECONDARY, 0,
    "hand-written direct CUDA kernels (2-D NCHW float32)",
    direct_supports, NULL, direct_create, direct_forward, direct_backward, direct_destroy, NULL,
};

int cu_reg_conv_direct(mxp_registrar *r) { return r->add_impl(r, &g_conv_direct); }
