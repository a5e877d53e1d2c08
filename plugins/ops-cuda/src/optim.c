/* optim.c — GPU implementations ("cuda", device gpu) of ops-basic's
 * optimizer updates: sgd_update, sgd_mom_update, adam_update and
 * rmsprop_update, one fused kernel pass each (optim_kernels.cu, math in
 * functors/optim.h).  Hyperparameters are read by name through the host's
 * typed parameter access (ABI 1.1), never from ops-basic's private struct.
 * Inputs: weight, grad, then the states (mom | mean, var | n), updated in
 * place as the ops' mutate_inputs declare; the output is the new weight,
 * normally the weight array itself (forward inplace).  Contiguous float32
 * arrays of one element count only. */
#include "cu_common.h"
#include "optim_kernels.h"

#include <string.h>

typedef struct opt_info {
    const char *op;
    int kind;
    uint32_t n_in; /* weight, grad and the states */
} opt_info;

static const opt_info k_opts[] = {
    {"sgd_update", CUK_OPT_SGD, 2},
    {"sgd_mom_update", CUK_OPT_MOM, 3},
    {"adam_update", CUK_OPT_ADAM, 4},
    {"rmsprop_update", CUK_OPT_RMS, 3},
};
#define N_OPTS (sizeof k_opts / sizeof k_opts[0])

static int opt_supports(mxp_impl_query_args *a) {
    const opt_info *o = a->user_data;
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "%s on gpu: only float32 (input %u is dtype %d)", o->op, i, (int)a->in_dtypes[i]);
    return 1;
}

/* Read the float hyperparameters of o from the op's parameter record. */
static int read_hp(const opt_info *o, const mxp_op_params *p, cu_opt_hp *h) {
    memset(h, 0, sizeof *h);
    h->clip = -1.0f;
    h->f = -1.0f;
    struct { const char *name; float *dst; } keys[8];
    int n = 0;
    keys[n].name = "lr"; keys[n++].dst = &h->lr;
    keys[n].name = "wd"; keys[n++].dst = &h->wd;
    keys[n].name = "rescale_grad"; keys[n++].dst = &h->rescale;
    keys[n].name = "clip_gradient"; keys[n++].dst = &h->clip;
    switch (o->kind) {
    case CUK_OPT_MOM:
        keys[n].name = "momentum"; keys[n++].dst = &h->d;
        break;
    case CUK_OPT_ADAM:
        keys[n].name = "beta1"; keys[n++].dst = &h->d;
        keys[n].name = "beta2"; keys[n++].dst = &h->e2;
        keys[n].name = "epsilon"; keys[n++].dst = &h->f;
        break;
    case CUK_OPT_RMS:
        keys[n].name = "gamma1"; keys[n++].dst = &h->d;
        keys[n].name = "epsilon"; keys[n++].dst = &h->e2;
        keys[n].name = "clip_weights"; keys[n++].dst = &h->f;
        break;
    default: break;
    }
    for (int i = 0; i < n; i++) {
        double v = 0;
        int rc = mxp_param_get_float(g_cu_host, p, keys[i].name, &v);
        if (rc) return rc;
        *keys[i].dst = (float)v;
    }
    return MXP_OK;
}

static int opt_forward(const mxp_forward_args *a) {
    const opt_info *o = a->user_data;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (a->n_in < o->n_in || a->n_out < 1)
        return g_cu_host->set_error(MXP_EINVAL, "gpu op '%s': %u inputs and %u outputs, expected %u and 1", o->op,
                                    a->n_in, a->n_out, o->n_in);
    cu_opt_hp h;
    int rc = read_hp(o, mxp_forward_op_params(a), &h);
    if (rc) return rc;
    int64_t n = mxp_tensor_numel(&a->in[0]);
    for (uint32_t i = 0; i < o->n_in; i++)
        if (!cu_all_f32_contig(&a->in[i], 1) || !a->in[i].data || mxp_tensor_numel(&a->in[i]) != n)
            return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': input %u must be a contiguous float32 array "
                                        "of %lld elements", o->op, i, (long long)n);
    if (req != MXP_REQ_NULL && (!cu_all_f32_contig(&a->out[0], 1) || mxp_tensor_numel(&a->out[0]) != n))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': the output must be a contiguous float32 array "
                                    "of %lld elements", o->op, (long long)n);
    float *s1 = o->n_in > 2 ? mxp_tensor_ptr(&a->in[2]) : NULL;
    float *s2 = o->n_in > 3 ? mxp_tensor_ptr(&a->in[3]) : NULL;
    void *s = a->ctx->stream;
    rc = cu_check_launch(cuk_optimizer(s, o->kind, &h, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->in[1]), s1, s2,
                                       req == MXP_REQ_NULL ? NULL : (float *)mxp_tensor_ptr(&a->out[0]), n,
                                       req == MXP_REQ_ADD),
                         "optimizer update", o->op);
    return rc ? rc : cu_finish(s, o->op);
}

static mxp_op_impl g_opt_impls[N_OPTS];

int cu_reg_optim(mxp_registrar *r) {
    for (size_t i = 0; i < N_OPTS; i++) {
        mxp_op_impl *im = &g_opt_impls[i];
        memset(im, 0, sizeof *im);
        im->hdr = (mxp_header)MXP_HEADER(mxp_op_impl);
        im->op_name = k_opts[i].op;
        im->impl_name = "cuda";
        im->device = "gpu";
        im->rank = MXP_RANK_PRIMARY;
        im->doc = "fused CUDA update kernel (float32, contiguous)";
        im->supports = opt_supports;
        im->forward = opt_forward;
        im->user_data = (void *)&k_opts[i];
        int rc = r->add_impl(r, im);
        if (rc) return rc;
    }
    return MXP_OK;
}
