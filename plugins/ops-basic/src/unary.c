/* unary.c — elementwise unary SimpleOps with MXNet 1.x names: abs, sign,
 * negative, reciprocal, square, sqrt, rsqrt, exp, log, log1p, expm1, sin,
 * cos, tanh, sigmoid, relu, softsign, erf, floor, ceil, round, clip
 * (a_min, a_max) and smooth_l1 (scalar = sigma).
 *
 * Each op is a forward kernel and (unless its gradient is zero) a gradient
 * kernel, both typed loops over contiguous float/double (common.h); ob_ew
 * runs them directly on dense arrays and through gathered chunks on strided
 * views and other dtypes.  Gradient kinds follow the seed: backward reads
 * the output for exp/sqrt/tanh/sigmoid/relu (so forward may run in place),
 * the input for the rest.  Gradient kernel inputs: A = out_grad, B = input
 * or output.  Not here: numerically fused variants (log_softmax etc.). */
#include <tgmath.h>

#include "common.h"

typedef struct uinfo {
    const ob_kernel *fwd, *bwd;
    int clip;          /* params are clip_param */
    int use_out;       /* gradient kernel reads the output, not the input */
} uinfo;

typedef struct clip_param {
    double a_min, a_max;
} clip_param;

#define SGN(x) ((T)(((x) > 0) - ((x) < 0)))

OB_KERNEL(k_abs, fabs(A[i]))
OB_KERNEL(g_abs, A[i] * SGN(B[i]))
OB_KERNEL(k_sign, SGN(A[i]))
OB_KERNEL(k_negative, -A[i])
OB_KERNEL(g_negative, -A[i])
OB_KERNEL(k_reciprocal, (T)1 / A[i])
OB_KERNEL(g_reciprocal, -A[i] / (B[i] * B[i]))
OB_KERNEL(k_square, A[i] * A[i])
OB_KERNEL(g_square, (T)2 * B[i] * A[i])
OB_KERNEL(k_sqrt, sqrt(A[i]))
OB_KERNEL(g_sqrt, A[i] / ((T)2 * B[i]))
OB_KERNEL(k_rsqrt, (T)1 / sqrt(A[i]))
OB_KERNEL(g_rsqrt, (T)-0.5 * A[i] / (B[i] * sqrt(B[i])))
OB_KERNEL(k_exp, exp(A[i]))
OB_KERNEL(g_exp, A[i] * B[i])
OB_KERNEL(k_log, log(A[i]))
OB_KERNEL(g_log, A[i] / B[i])
OB_KERNEL(k_log1p, log1p(A[i]))
OB_KERNEL(g_log1p, A[i] / ((T)1 + B[i]))
OB_KERNEL(k_expm1, expm1(A[i]))
OB_KERNEL(g_expm1, A[i] * exp(B[i]))
OB_KERNEL(k_sin, sin(A[i]))
OB_KERNEL(g_sin, A[i] * cos(B[i]))
OB_KERNEL(k_cos, cos(A[i]))
OB_KERNEL(g_cos, -A[i] * sin(B[i]))
OB_KERNEL(k_tanh, tanh(A[i]))
OB_KERNEL(g_tanh, A[i] * ((T)1 - B[i] * B[i]))
OB_KERNEL(k_sigmoid, (T)1 / ((T)1 + exp(-A[i])))
OB_KERNEL(g_sigmoid, A[i] * B[i] * ((T)1 - B[i]))
OB_KERNEL(k_relu, A[i] > (T)0 ? A[i] : (T)0)
OB_KERNEL(g_relu, B[i] > (T)0 ? A[i] : (T)0)
OB_KERNEL(k_softsign, A[i] / ((T)1 + fabs(A[i])))
OB_KERNEL(g_softsign, A[i] / (((T)1 + fabs(B[i])) * ((T)1 + fabs(B[i]))))
OB_KERNEL(k_erf, erf(A[i]))
OB_KERNEL(g_erf, A[i] * (T)1.1283791670955126 * exp(-B[i] * B[i]))
OB_KERNEL(k_floor, floor(A[i]))
OB_KERNEL(k_ceil, ceil(A[i]))
OB_KERNEL(k_round, round(A[i]))
OB_KERNEL(k_clip, A[i] < (T)e->a ? (T)e->a : A[i] > (T)e->b ? (T)e->b : A[i])
OB_KERNEL(g_clip, (B[i] >= (T)e->a && B[i] <= (T)e->b) ? A[i] : (T)0)
/* MXNet's smooth_l1 with sigma = scalar: 0.5 (sigma x)^2 for |x| < 1/sigma^2,
 * |x| - 0.5/sigma^2 otherwise. */
OB_KERNEL(k_smooth_l1, fabs(A[i]) < (T)1 / (s * s) ? (T)0.5 * s * s * A[i] * A[i]
                                                   : fabs(A[i]) - (T)0.5 / (s * s))
OB_KERNEL(g_smooth_l1, A[i] * (B[i] > (T)1 / (s * s) ? (T)1
                               : B[i] < (T)-1 / (s * s) ? (T)-1 : s * s * B[i]))

static int u_forward(const mxp_simple_args *a) {
    const uinfo *u = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    if (u->clip) {
        const clip_param *p = a->params;
        e.a = p->a_min;
        e.b = p->a_max;
    }
    const mxp_tensor *in[1] = {&a->in[0]};
    return ob_ew(a->ctx, 1, in, a->out, a->req, u->fwd, &e);
}

/* Backward for USES_INPUT and USES_OUTPUT kinds alike: B is whichever of
 * input/output the host passed (the other has data NULL). */
static int u_backward(const mxp_simple_grad_args *a) {
    const uinfo *u = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    if (u->clip) {
        const clip_param *p = a->params;
        e.a = p->a_min;
        e.b = p->a_max;
    }
    /* Pick by the op's gradient kind, not by which pointer is non-NULL:
     * the ABI does not promise that unused entries are NULL-data. */
    const mxp_tensor *in[2] = {a->out_grad, u->use_out ? a->out : &a->in[0]};
    int n = u->bwd == &g_negative ? 1 : 2;
    if (n == 2 && (!in[1] || !in[1]->data))
        return ob_err(MXP_EINVAL, "ops-basic: unary backward is missing its %s",
                      u->use_out ? "output" : "input");
    return ob_ew(a->ctx, n, in, &a->in_grad[0], a->req[0], u->bwd, &e);
}

static const mxp_param_def clip_params[] = {
    MXP_PARAM("a_min", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, clip_param, a_min, NULL, 0, 0, NULL,
              "Minimum value"),
    MXP_PARAM("a_max", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, clip_param, a_max, NULL, 0, 0, NULL,
              "Maximum value"),
};

#define U(NAME, F, G) static const uinfo ui_##NAME = {&F, G, 0, 0};
#define UO(NAME, F, G) static const uinfo ui_##NAME = {&F, G, 0, 1};
U(abs, k_abs, &g_abs)
U(sign, k_sign, NULL)
U(negative, k_negative, &g_negative)
U(reciprocal, k_reciprocal, &g_reciprocal)
U(square, k_square, &g_square)
UO(sqrt, k_sqrt, &g_sqrt)
U(rsqrt, k_rsqrt, &g_rsqrt)
UO(exp, k_exp, &g_exp)
U(log, k_log, &g_log)
U(log1p, k_log1p, &g_log1p)
U(expm1, k_expm1, &g_expm1)
U(sin, k_sin, &g_sin)
U(cos, k_cos, &g_cos)
UO(tanh, k_tanh, &g_tanh)
UO(sigmoid, k_sigmoid, &g_sigmoid)
UO(relu, k_relu, &g_relu)
U(softsign, k_softsign, &g_softsign)
U(erf, k_erf, &g_erf)
U(floor, k_floor, NULL)
U(ceil, k_ceil, NULL)
U(round, k_round, NULL)
U(smooth_l1, k_smooth_l1, &g_smooth_l1)
static const uinfo ui_clip = {&k_clip, &g_clip, 1, 0};

/* Inplace: forward may overwrite its input unless backward reads it;
 * out_grad may always become in_grad (elementwise). */
#define FWD_IP(gk) ((gk) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD)
#define SDEF(NAME, KIND, GK, DOC)                                                     \
    { MXP_HEADER(mxp_simple_op_def), #NAME, NULL, DOC, KIND, GK,                      \
      FWD_IP(GK) | MXP_SIMPLE_INPLACE_BWD, 0, NULL, 0, 0, u_forward,                  \
      (GK) == MXP_GRAD_ZERO ? NULL : u_backward, NULL, NULL, MXP_RANK_PRIMARY, 0,     \
      (void *)&ui_##NAME }

static const mxp_simple_op_def unary_defs[] = {
    SDEF(abs, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise absolute value."),
    SDEF(sign, MXP_SIMPLE_UNARY, MXP_GRAD_ZERO, "Elementwise sign (-1, 0, 1)."),
    SDEF(negative, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUT_GRAD, "Elementwise -x."),
    SDEF(reciprocal, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise 1/x."),
    SDEF(square, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise x^2."),
    SDEF(sqrt, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUTPUT, "Elementwise square root."),
    SDEF(rsqrt, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise 1/sqrt(x)."),
    SDEF(exp, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUTPUT, "Elementwise e^x."),
    SDEF(log, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise natural logarithm."),
    SDEF(log1p, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise log(1 + x)."),
    SDEF(expm1, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise e^x - 1."),
    SDEF(sin, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise sine."),
    SDEF(cos, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise cosine."),
    SDEF(tanh, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUTPUT, "Elementwise hyperbolic tangent."),
    SDEF(sigmoid, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUTPUT, "Elementwise 1/(1+e^-x)."),
    SDEF(relu, MXP_SIMPLE_UNARY, MXP_GRAD_USES_OUTPUT, "Elementwise max(x, 0)."),
    SDEF(softsign, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise x/(1+|x|)."),
    SDEF(erf, MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, "Elementwise Gauss error function."),
    SDEF(floor, MXP_SIMPLE_UNARY, MXP_GRAD_ZERO, "Elementwise floor."),
    SDEF(ceil, MXP_SIMPLE_UNARY, MXP_GRAD_ZERO, "Elementwise ceiling."),
    SDEF(round, MXP_SIMPLE_UNARY, MXP_GRAD_ZERO, "Elementwise round, halves away from 0."),
    SDEF(smooth_l1, MXP_SIMPLE_SCALAR, MXP_GRAD_USES_INPUT,
         "Smooth L1 loss elementwise, sigma = scalar."),
    { MXP_HEADER(mxp_simple_op_def), "clip", NULL,
      "Clip values to [a_min, a_max]; gradient passes where a_min <= x <= a_max.",
      MXP_SIMPLE_UNARY, MXP_GRAD_USES_INPUT, MXP_SIMPLE_INPLACE_BWD, 0, clip_params, 2,
      sizeof(clip_param), u_forward, u_backward, NULL, NULL, MXP_RANK_PRIMARY, 0,
      (void *)&ui_clip },
};

int ob_reg_unary(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof unary_defs / sizeof unary_defs[0]; i++) {
        int rc = r->add_simple_op(r, &unary_defs[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
