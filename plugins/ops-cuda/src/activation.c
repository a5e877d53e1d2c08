/* activation.c — the GPU implementation ("cuda", device gpu) of ops-nn's
 * Activation for act_type relu, sigmoid, tanh and softsign, on the shared
 * unary functor kernels (functors/ew_unary.h, tested against the CPU).
 * Not cuDNN: ops-nn's Activation keeps only the output for the backward of
 * relu/sigmoid/tanh (the input's memory may be reused), and
 * cudnnActivationBackward takes the input too; the functors' gradients read
 * exactly what ops-nn keeps (output; input for softsign).  softrelu is
 * refused with the reason.  act_type is read by name (typed parameter
 * access).  Contiguous float32 only. */
#include "cu_common.h"
#include "ew_kernels.h"

#include "functors/ew_unary.h"

#include <string.h>

/* The unary op code of act_type, or -1 (with the name in *name). */
static int act_code(const mxp_op_params *p, const char **name, int *rc) {
    *name = NULL;
    *rc = mxp_param_get_enum(g_cu_host, p, "act_type", name);
    if (*rc) return -1;
    if (!strcmp(*name, "relu")) return CU_U_RELU;
    if (!strcmp(*name, "sigmoid")) return CU_U_SIGMOID;
    if (!strcmp(*name, "tanh")) return CU_U_TANH;
    if (!strcmp(*name, "softsign")) return CU_U_SOFTSIGN;
    return -1;
}

static int act_supports(mxp_impl_query_args *a) {
    const mxp_op_params *p = mxp_impl_query_op_params(a);
    if (!p) return cu_refuse(a, "Activation on gpu: the host gives no parameter record (ABI 1.1 needed)");
    const char *name;
    int rc;
    if (act_code(p, &name, &rc) < 0) return rc ? rc : cu_refuse(a, "Activation on gpu: act_type '%s' is not supported", name);
    if ((a->in_dtypes && a->in_dtypes[0] != MXP_DTYPE_F32) || (a->out_dtypes && a->out_dtypes[0] != MXP_DTYPE_F32))
        return cu_refuse(a, "Activation on gpu: only float32");
    return 1;
}

static int check(const mxp_tensor *t, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Activation': %s must be a contiguous float32 array", what);
    return MXP_OK;
}

static int act_forward(const mxp_forward_args *a) {
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    const char *name;
    int rc;
    int op = act_code(mxp_forward_op_params(a), &name, &rc);
    if (op < 0) return rc ? rc : g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Activation': act_type '%s'", name);
    if ((rc = check(&a->in[0], "data")) || (rc = check(&a->out[0], "output"))) return rc;
    rc = cu_check_launch(cuk_unary_fwd(a->ctx->stream, op, mxp_tensor_ptr(&a->in[0]), mxp_tensor_ptr(&a->out[0]),
                                       mxp_tensor_numel(&a->out[0]), req == MXP_REQ_ADD),
                         "unary forward", "Activation");
    return rc ? rc : cu_finish(a->ctx->stream, "gpu op 'Activation' forward");
}

static int act_backward(const mxp_backward_args *a) {
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (req == MXP_REQ_NULL) return MXP_OK;
    const char *name;
    int rc;
    int op = act_code(mxp_backward_op_params(a), &name, &rc);
    if (op < 0) return rc ? rc : g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Activation': act_type '%s'", name);
    const mxp_tensor *v = cu_unary_grad_uses_output(op) ? &a->out[0] : &a->in[0];
    if ((rc = check(&a->out_grad[0], "out_grad")) || (rc = check(v, cu_unary_grad_uses_output(op) ? "output" : "data")) ||
        (rc = check(&a->in_grad[0], "data gradient")))
        return rc;
    rc = cu_check_launch(cuk_unary_bwd(a->ctx->stream, op, mxp_tensor_ptr(&a->out_grad[0]), mxp_tensor_ptr(v),
                                       mxp_tensor_ptr(&a->in_grad[0]), mxp_tensor_numel(&a->in_grad[0]),
                                       req == MXP_REQ_ADD),
                         "unary backward", "Activation");
    return rc ? rc : cu_finish(a->ctx->stream, "gpu op 'Activation' backward");
}

static const mxp_op_impl g_act_impl = {
    MXP_HEADER(mxp_op_impl), "Activation", "cuda", "gpu", MXP_RANK_PRIMARY, 0,
    "CUDA functor kernels: relu, sigmoid, tanh, softsign (float32)",
    act_supports, NULL, NULL, act_forward, act_backward, NULL, NULL,
};

int cu_reg_activation(mxp_registrar *r) { return r->add_impl(r, &g_act_impl); }
