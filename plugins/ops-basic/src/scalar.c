/* scalar.c — array-with-scalar SimpleOps (MXP_SIMPLE_SCALAR: the host adds
 * the "scalar" parameter) with MXNet 1.x names: _plus_scalar,
 * _minus_scalar, _rminus_scalar, _mul_scalar, _div_scalar, _rdiv_scalar,
 * _power_scalar, _rpower_scalar, _maximum_scalar, _minimum_scalar and the
 * comparisons _equal_scalar ... _lesser_equal_scalar (0/1, zero gradient).
 * Gradient kernel inputs: A = out_grad, B = input (or output for
 * _rpower_scalar), s = scalar. */
#include <tgmath.h>

#include "common.h"

typedef struct sinfo {
    const ob_kernel *fwd, *bwd;
    int use;   /* gradient reads: 0 nothing, 1 the input, 2 the output */
} sinfo;

OB_KERNEL(k_plus, A[i] + s)
OB_KERNEL(k_minus, A[i] - s)
OB_KERNEL(k_rminus, s - A[i])
OB_KERNEL(k_mul, A[i] * s)
OB_KERNEL(k_div, A[i] / s)
OB_KERNEL(k_rdiv, s / A[i])
OB_KERNEL(k_power, pow(A[i], s))
OB_KERNEL(k_rpower, pow(s, A[i]))
OB_KERNEL(k_maximum, A[i] > s ? A[i] : s)
OB_KERNEL(k_minimum, A[i] < s ? A[i] : s)
OB_KERNEL(k_equal, A[i] == s)
OB_KERNEL(k_not_equal, A[i] != s)
OB_KERNEL(k_greater, A[i] > s)
OB_KERNEL(k_greater_equal, A[i] >= s)
OB_KERNEL(k_lesser, A[i] < s)
OB_KERNEL(k_lesser_equal, A[i] <= s)

OB_KERNEL(g_id, A[i])
OB_KERNEL(g_neg, -A[i])
OB_KERNEL(g_mul, A[i] * s)
OB_KERNEL(g_div, A[i] / s)
OB_KERNEL(g_rdiv, -A[i] * s / (B[i] * B[i]))
OB_KERNEL(g_power, A[i] * s * pow(B[i], s - (T)1))
OB_KERNEL(g_rpower, A[i] * B[i] * log(s))
OB_KERNEL(g_maximum, B[i] >= s ? A[i] : (T)0)
OB_KERNEL(g_minimum, B[i] <= s ? A[i] : (T)0)

static int s_forward(const mxp_simple_args *a) {
    const sinfo *si = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    const mxp_tensor *in[1] = {&a->in[0]};
    return ob_ew(a->ctx, 1, in, a->out, a->req, si->fwd, &e);
}

static int s_backward(const mxp_simple_grad_args *a) {
    const sinfo *si = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    const mxp_tensor *in[2] = {a->out_grad, si->use == 2 ? a->out : &a->in[0]};
    int n = si->use ? 2 : 1;
    if (n == 2 && (!in[1] || !in[1]->data))
        return ob_err(MXP_EINVAL, "ops-basic: scalar backward is missing its %s",
                      si->use == 2 ? "output" : "input");
    return ob_ew(a->ctx, n, in, &a->in_grad[0], a->req[0], si->bwd, &e);
}

#define SI(N, F, G, USE) static const sinfo si_##N = {&F, G, USE};
SI(plus, k_plus, &g_id, 0)
SI(minus, k_minus, &g_id, 0)
SI(rminus, k_rminus, &g_neg, 0)
SI(mul, k_mul, &g_mul, 0)
SI(div, k_div, &g_div, 0)
SI(rdiv, k_rdiv, &g_rdiv, 1)
SI(power, k_power, &g_power, 1)
SI(rpower, k_rpower, &g_rpower, 2)
SI(maximum, k_maximum, &g_maximum, 1)
SI(minimum, k_minimum, &g_minimum, 1)
SI(equal, k_equal, NULL, 0)
SI(not_equal, k_not_equal, NULL, 0)
SI(greater, k_greater, NULL, 0)
SI(greater_equal, k_greater_equal, NULL, 0)
SI(lesser, k_lesser, NULL, 0)
SI(lesser_equal, k_lesser_equal, NULL, 0)

#define AL(N, A) static const char *const al_##N[] = {A, NULL};
AL(plus, "_PlusScalar")
AL(minus, "_MinusScalar")
AL(rminus, "_RMinusScalar")
AL(mul, "_MulScalar")
AL(div, "_DivScalar")
AL(rdiv, "_RDivScalar")
AL(power, "_PowerScalar")
AL(rpower, "_RPowerScalar")
AL(maximum, "_MaximumScalar")
AL(minimum, "_MinimumScalar")
AL(equal, "_EqualScalar")
AL(not_equal, "_NotEqualScalar")
AL(greater, "_GreaterScalar")
AL(greater_equal, "_GreaterEqualScalar")
AL(lesser, "_LesserScalar")
AL(lesser_equal, "_LesserEqualScalar")

#define SDEF(N, GK, DOC)                                                               \
    { MXP_HEADER(mxp_simple_op_def), "_" #N "_scalar", al_##N, DOC, MXP_SIMPLE_SCALAR, GK, \
      ((GK) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD) | MXP_SIMPLE_INPLACE_BWD, \
      0, NULL, 0, 0, s_forward, (GK) == MXP_GRAD_ZERO ? NULL : s_backward, NULL, NULL,  \
      MXP_RANK_PRIMARY, 0, (void *)&si_##N }

static const mxp_simple_op_def scalar_defs[] = {
    SDEF(plus, MXP_GRAD_USES_OUT_GRAD, "x + scalar"),
    SDEF(minus, MXP_GRAD_USES_OUT_GRAD, "x - scalar"),
    SDEF(rminus, MXP_GRAD_USES_OUT_GRAD, "scalar - x"),
    SDEF(mul, MXP_GRAD_USES_OUT_GRAD, "x * scalar"),
    SDEF(div, MXP_GRAD_USES_OUT_GRAD, "x / scalar"),
    SDEF(rdiv, MXP_GRAD_USES_INPUT, "scalar / x"),
    SDEF(power, MXP_GRAD_USES_INPUT, "x ^ scalar"),
    SDEF(rpower, MXP_GRAD_USES_OUTPUT, "scalar ^ x"),
    SDEF(maximum, MXP_GRAD_USES_INPUT, "max(x, scalar)"),
    SDEF(minimum, MXP_GRAD_USES_INPUT, "min(x, scalar)"),
    SDEF(equal, MXP_GRAD_ZERO, "x == scalar (0/1)"),
    SDEF(not_equal, MXP_GRAD_ZERO, "x != scalar (0/1)"),
    SDEF(greater, MXP_GRAD_ZERO, "x > scalar (0/1)"),
    SDEF(greater_equal, MXP_GRAD_ZERO, "x >= scalar (0/1)"),
    SDEF(lesser, MXP_GRAD_ZERO, "x < scalar (0/1)"),
    SDEF(lesser_equal, MXP_GRAD_ZERO, "x <= scalar (0/1)"),
};

int ob_reg_scalar(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof scalar_defs / sizeof scalar_defs[0]; i++) {
        int rc = r->add_simple_op(r, &scalar_defs[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
