/* math_ext.c — more elementwise SimpleOps with MXNet 1.x names, on the same
 * kernel machinery as unary.c / binary.c / scalar.c (ob_ew over typed
 * contiguous loops, strided and other-dtype views through gathered chunks):
 *   unary: tan, arcsin, arccos, arctan, sinh, cosh, arcsinh, arccosh,
 *     arctanh, log2, log10, cbrt, rcbrt, degrees, radians, log_sigmoid,
 *     mish, hard_sigmoid (alpha, beta), _copy (identity), BlockGrad
 *     (stop_gradient: zero gradient), zeros_like, ones_like, trunc, fix,
 *     rint, logical_not (the last four 0-gradient);
 *   binary, equal-shape and broadcast: _hypot / broadcast_hypot, _mod /
 *     broadcast_mod (Python's sign-of-divisor modulo, 0 where the divisor
 *     is 0, as mshadow_op::mod), _logical_and / _or / _xor and their
 *     broadcast_logical_* forms (0/1, zero gradient);
 *   scalar: _hypot_scalar, _mod_scalar, _rmod_scalar, _logical_and_scalar,
 *     _logical_or_scalar, _logical_xor_scalar.
 * Gradient kernel inputs: A = out_grad, B = input (or output where the op
 * says so), C = rhs for binary ops; s = the scalar.  Not here: gamma and
 * gammaln (their gradient needs digamma, which libm lacks). */
#include <tgmath.h>

#include "common.h"

/* ---------------------------------------------------------------- unary */
typedef struct xu {
    const ob_kernel *fwd, *bwd;
    int use_out;      /* gradient kernel reads the output                  */
    int hard_sigmoid; /* params are hs_param                               */
} xu;

typedef struct hs_param {
    double alpha, beta;
} hs_param;

#define PI_ 3.14159265358979323846
#define SIG(x) ((T)1 / ((T)1 + exp(-(x))))
#define SOFTPLUS(x) ((x) > (T)20 ? (x) : log1p(exp(x)))

OB_KERNEL(k_tan, tan(A[i]))
OB_KERNEL(g_tan, A[i] * ((T)1 + B[i] * B[i]))
OB_KERNEL(k_arcsin, asin(A[i]))
OB_KERNEL(g_arcsin, A[i] / sqrt((T)1 - B[i] * B[i]))
OB_KERNEL(k_arccos, acos(A[i]))
OB_KERNEL(g_arccos, -A[i] / sqrt((T)1 - B[i] * B[i]))
OB_KERNEL(k_arctan, atan(A[i]))
OB_KERNEL(g_arctan, A[i] / ((T)1 + B[i] * B[i]))
OB_KERNEL(k_sinh, sinh(A[i]))
OB_KERNEL(g_sinh, A[i] * cosh(B[i]))
OB_KERNEL(k_cosh, cosh(A[i]))
OB_KERNEL(g_cosh, A[i] * sinh(B[i]))
OB_KERNEL(k_arcsinh, asinh(A[i]))
OB_KERNEL(g_arcsinh, A[i] / sqrt(B[i] * B[i] + (T)1))
OB_KERNEL(k_arccosh, acosh(A[i]))
OB_KERNEL(g_arccosh, A[i] / sqrt(B[i] * B[i] - (T)1))
OB_KERNEL(k_arctanh, atanh(A[i]))
OB_KERNEL(g_arctanh, A[i] / ((T)1 - B[i] * B[i]))
OB_KERNEL(k_log2, log2(A[i]))
OB_KERNEL(g_log2, A[i] / (B[i] * (T)0.69314718055994530942))
OB_KERNEL(k_log10, log10(A[i]))
OB_KERNEL(g_log10, A[i] / (B[i] * (T)2.30258509299404568402))
OB_KERNEL(k_cbrt, cbrt(A[i]))
OB_KERNEL(g_cbrt, A[i] / ((T)3 * B[i] * B[i]))
OB_KERNEL(k_rcbrt, (T)1 / cbrt(A[i]))
OB_KERNEL(g_rcbrt, (T)(-1.0 / 3.0) * A[i] / (B[i] * cbrt(B[i])))
OB_KERNEL(k_degrees, A[i] * (T)(180.0 / PI_))
OB_KERNEL(g_degrees, A[i] * (T)(180.0 / PI_))
OB_KERNEL(k_radians, A[i] * (T)(PI_ / 180.0))
OB_KERNEL(g_radians, A[i] * (T)(PI_ / 180.0))
OB_KERNEL(k_log_sigmoid, -SOFTPLUS(-A[i]))
OB_KERNEL(g_log_sigmoid, A[i] * SIG(-B[i]))
OB_KERNEL(k_mish, A[i] * tanh(SOFTPLUS(A[i])))
OB_KERNEL(g_mish, A[i] * (tanh(SOFTPLUS(B[i])) +
                          B[i] * SIG(B[i]) * ((T)1 - tanh(SOFTPLUS(B[i])) * tanh(SOFTPLUS(B[i])))))
OB_KERNEL(k_hard_sigmoid, fmin(fmax((T)e->a * A[i] + (T)e->b, (T)0), (T)1))
OB_KERNEL(g_hard_sigmoid, ((T)e->a * B[i] + (T)e->b > (T)0 && (T)e->a * B[i] + (T)e->b < (T)1) ? A[i] * (T)e->a : (T)0)
OB_KERNEL(k_copy, A[i])
OB_KERNEL(g_copy, A[i])
OB_KERNEL(k_zeros, (T)0)
OB_KERNEL(k_ones, (T)1)
OB_KERNEL(k_trunc, trunc(A[i]))
OB_KERNEL(k_rint, rint(A[i]))
OB_KERNEL(k_logical_not, (T)(A[i] == (T)0))

static int xu_forward(const mxp_simple_args *a) {
    const xu *u = a->user_data;
    ob_env e = {0};
    if (u->hard_sigmoid) {
        const hs_param *p = a->params;
        e.a = p->alpha;
        e.b = p->beta;
    }
    const mxp_tensor *in[1] = {&a->in[0]};
    return ob_ew(a->ctx, 1, in, a->out, a->req, u->fwd, &e);
}

static int xu_backward(const mxp_simple_grad_args *a) {
    const xu *u = a->user_data;
    ob_env e = {0};
    if (u->hard_sigmoid) {
        const hs_param *p = a->params;
        e.a = p->alpha;
        e.b = p->beta;
    }
    const mxp_tensor *in[2] = {a->out_grad, u->use_out ? a->out : &a->in[0]};
    int n = u->bwd == &g_copy || u->bwd == &g_degrees || u->bwd == &g_radians ? 1 : 2;
    if (n == 2 && (!in[1] || !in[1]->data))
        return ob_err(MXP_EINVAL, "ops-basic: unary backward is missing its %s", u->use_out ? "output" : "input");
    return ob_ew(a->ctx, n, in, &a->in_grad[0], a->req[0], u->bwd, &e);
}

#define XU(N, F, G, OUT, HS) static const xu xu_##N = {&F, G, OUT, HS};
XU(tan, k_tan, &g_tan, 1, 0)
XU(arcsin, k_arcsin, &g_arcsin, 0, 0)
XU(arccos, k_arccos, &g_arccos, 0, 0)
XU(arctan, k_arctan, &g_arctan, 0, 0)
XU(sinh, k_sinh, &g_sinh, 0, 0)
XU(cosh, k_cosh, &g_cosh, 0, 0)
XU(arcsinh, k_arcsinh, &g_arcsinh, 0, 0)
XU(arccosh, k_arccosh, &g_arccosh, 0, 0)
XU(arctanh, k_arctanh, &g_arctanh, 0, 0)
XU(log2, k_log2, &g_log2, 0, 0)
XU(log10, k_log10, &g_log10, 0, 0)
XU(cbrt, k_cbrt, &g_cbrt, 1, 0)
XU(rcbrt, k_rcbrt, &g_rcbrt, 0, 0)
XU(degrees, k_degrees, &g_degrees, 0, 0)
XU(radians, k_radians, &g_radians, 0, 0)
XU(log_sigmoid, k_log_sigmoid, &g_log_sigmoid, 0, 0)
XU(mish, k_mish, &g_mish, 0, 0)
XU(hard_sigmoid, k_hard_sigmoid, &g_hard_sigmoid, 0, 1)
XU(_copy, k_copy, &g_copy, 0, 0)
XU(BlockGrad, k_copy, NULL, 0, 0)
XU(zeros_like, k_zeros, NULL, 0, 0)
XU(ones_like, k_ones, NULL, 0, 0)
XU(trunc, k_trunc, NULL, 0, 0)
XU(fix, k_trunc, NULL, 0, 0)
XU(rint, k_rint, NULL, 0, 0)
XU(logical_not, k_logical_not, NULL, 0, 0)

static const mxp_param_def hs_params[] = {
    MXP_PARAM("alpha", MXP_PARAM_FLOAT, 0, hs_param, alpha, "0.2", 0, 0, NULL, "Slope of hard sigmoid"),
    MXP_PARAM("beta", MXP_PARAM_FLOAT, 0, hs_param, beta, "0.5", 0, 0, NULL, "Bias of hard sigmoid."),
};
static const char *const al_copy[] = {"identity", NULL};
static const char *const al_blockgrad[] = {"stop_gradient", NULL};

#define XFWD_IP(gk) ((gk) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD)
#define XDEF_P(NAME, ALIASES, GK, PARAMS, NP, PSIZE, DOC)                                 \
    { MXP_HEADER(mxp_simple_op_def), #NAME, ALIASES, DOC, MXP_SIMPLE_UNARY, GK,          \
      XFWD_IP(GK) | MXP_SIMPLE_INPLACE_BWD, 0, PARAMS, NP, PSIZE, xu_forward,             \
      (GK) == MXP_GRAD_ZERO ? NULL : xu_backward, NULL, NULL, MXP_RANK_PRIMARY, 0,        \
      (void *)&xu_##NAME }
#define XDEF(NAME, GK, DOC) XDEF_P(NAME, NULL, GK, NULL, 0, 0, DOC)

static const mxp_simple_op_def xunary_defs[] = {
    XDEF(tan, MXP_GRAD_USES_OUTPUT, "Elementwise tangent."),
    XDEF(arcsin, MXP_GRAD_USES_INPUT, "Elementwise inverse sine."),
    XDEF(arccos, MXP_GRAD_USES_INPUT, "Elementwise inverse cosine."),
    XDEF(arctan, MXP_GRAD_USES_INPUT, "Elementwise inverse tangent."),
    XDEF(sinh, MXP_GRAD_USES_INPUT, "Elementwise hyperbolic sine."),
    XDEF(cosh, MXP_GRAD_USES_INPUT, "Elementwise hyperbolic cosine."),
    XDEF(arcsinh, MXP_GRAD_USES_INPUT, "Elementwise inverse hyperbolic sine."),
    XDEF(arccosh, MXP_GRAD_USES_INPUT, "Elementwise inverse hyperbolic cosine."),
    XDEF(arctanh, MXP_GRAD_USES_INPUT, "Elementwise inverse hyperbolic tangent."),
    XDEF(log2, MXP_GRAD_USES_INPUT, "Elementwise base-2 logarithm."),
    XDEF(log10, MXP_GRAD_USES_INPUT, "Elementwise base-10 logarithm."),
    XDEF(cbrt, MXP_GRAD_USES_OUTPUT, "Elementwise cube root."),
    XDEF(rcbrt, MXP_GRAD_USES_INPUT, "Elementwise 1/cbrt(x)."),
    XDEF(degrees, MXP_GRAD_USES_OUT_GRAD, "Radians to degrees."),
    XDEF(radians, MXP_GRAD_USES_OUT_GRAD, "Degrees to radians."),
    XDEF(log_sigmoid, MXP_GRAD_USES_INPUT, "Elementwise log(sigmoid(x))."),
    XDEF(mish, MXP_GRAD_USES_INPUT, "Elementwise x * tanh(softplus(x))."),
    XDEF_P(hard_sigmoid, NULL, MXP_GRAD_USES_INPUT, hs_params, 2, sizeof(hs_param),
           "Elementwise clip(alpha * x + beta, 0, 1)."),
    XDEF_P(_copy, al_copy, MXP_GRAD_USES_OUT_GRAD, NULL, 0, 0, "Returns a copy of the input."),
    XDEF_P(BlockGrad, al_blockgrad, MXP_GRAD_ZERO, NULL, 0, 0,
           "Passes the input through; no gradient flows back."),
    XDEF(zeros_like, MXP_GRAD_ZERO, "Zeros shaped like the input."),
    XDEF(ones_like, MXP_GRAD_ZERO, "Ones shaped like the input."),
    XDEF(trunc, MXP_GRAD_ZERO, "Elementwise truncation toward zero."),
    XDEF(fix, MXP_GRAD_ZERO, "Elementwise rounding toward zero."),
    XDEF(rint, MXP_GRAD_ZERO, "Elementwise rounding to the nearest integer (ties to even)."),
    XDEF(logical_not, MXP_GRAD_ZERO, "Elementwise !x (0/1)."),
};

/* --------------------------------------------------------------- binary */
/* Python's modulo (result takes the divisor's sign), 0 for a 0 divisor. */
static inline double pymod(double a, double b) {
    if (b == 0) return 0;
    double r = fmod(a, b);
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

OB_KERNEL(k_hypot, hypot(A[i], B[i]))
OB_KERNEL(k_mod, (T)pymod((double)A[i], (double)B[i]))
OB_KERNEL(k_land, (T)(A[i] != (T)0 && B[i] != (T)0))
OB_KERNEL(k_lor, (T)(A[i] != (T)0 || B[i] != (T)0))
OB_KERNEL(k_lxor, (T)((A[i] != (T)0) != (B[i] != (T)0)))
OB_KERNEL(g_hypot_l, A[i] * B[i] / hypot(B[i], C[i]))
OB_KERNEL(g_hypot_r, A[i] * C[i] / hypot(B[i], C[i]))
OB_KERNEL(g_mod_l, A[i])
OB_KERNEL(g_mod_r, C[i] == (T)0 ? (T)0 : -A[i] * floor(B[i] / C[i]))

typedef struct xb {
    const ob_kernel *fwd, *gl, *gr;
} xb;
static const xb xb_hypot = {&k_hypot, &g_hypot_l, &g_hypot_r};
static const xb xb_mod = {&k_mod, &g_mod_l, &g_mod_r};
static const xb xb_land = {&k_land, NULL, NULL};
static const xb xb_lor = {&k_lor, NULL, NULL};
static const xb xb_lxor = {&k_lxor, NULL, NULL};

static int xb_forward(const mxp_simple_args *a) {
    const xb *b = a->user_data;
    ob_env e = {0};
    const mxp_tensor *in[2] = {&a->in[0], &a->in[1]};
    return ob_ew(a->ctx, 2, in, a->out, a->req, b->fwd, &e);
}

/* in_grad[1] first: out_grad may share in_grad[0]'s memory. */
static int xb_backward(const mxp_simple_grad_args *a) {
    const xb *b = a->user_data;
    ob_env e = {0};
    if (!a->in[0].data || !a->in[1].data) return ob_err(MXP_EINVAL, "ops-basic: binary backward is missing its inputs");
    const mxp_tensor *in[3] = {a->out_grad, &a->in[0], &a->in[1]};
    int rc = a->req[1] == MXP_REQ_NULL ? MXP_OK : ob_ew(a->ctx, 3, in, &a->in_grad[1], a->req[1], b->gr, &e);
    if (rc == MXP_OK && a->req[0] != MXP_REQ_NULL) rc = ob_ew(a->ctx, 3, in, &a->in_grad[0], a->req[0], b->gl, &e);
    return rc;
}

#define XB(NAME, KIND, GK, INFO, DOC)                                                      \
    { MXP_HEADER(mxp_simple_op_def), NAME, NULL, DOC, KIND, GK,                            \
      ((GK) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD) | MXP_SIMPLE_INPLACE_BWD, \
      0, NULL, 0, 0, xb_forward, (GK) == MXP_GRAD_ZERO ? NULL : xb_backward, NULL, NULL,   \
      MXP_RANK_PRIMARY, 0, (void *)&INFO }
#define XPAIR(ENAME, BNAME, GK, INFO, WHAT)                                               \
    XB(ENAME, MXP_SIMPLE_BINARY, GK, INFO, WHAT " of two arrays of equal shape."),        \
    XB(BNAME, MXP_SIMPLE_BROADCAST, GK, INFO, WHAT " with numpy broadcasting.")

static const mxp_simple_op_def xbinary_defs[] = {
    XPAIR("_hypot", "broadcast_hypot", MXP_GRAD_USES_INPUT, xb_hypot, "sqrt(lhs^2 + rhs^2)"),
    XPAIR("_mod", "broadcast_mod", MXP_GRAD_USES_INPUT, xb_mod, "lhs mod rhs (sign of rhs)"),
    XPAIR("_logical_and", "broadcast_logical_and", MXP_GRAD_ZERO, xb_land, "lhs && rhs (0/1)"),
    XPAIR("_logical_or", "broadcast_logical_or", MXP_GRAD_ZERO, xb_lor, "lhs || rhs (0/1)"),
    XPAIR("_logical_xor", "broadcast_logical_xor", MXP_GRAD_ZERO, xb_lxor, "lhs xor rhs (0/1)"),
};

/* --------------------------------------------------------------- scalar */
OB_KERNEL(k_hypot_s, hypot(A[i], s))
OB_KERNEL(g_hypot_s, A[i] * B[i] / hypot(B[i], s))
OB_KERNEL(k_mod_s, (T)pymod((double)A[i], (double)s))
OB_KERNEL(g_mod_s, A[i])
OB_KERNEL(k_rmod_s, (T)pymod((double)s, (double)A[i]))
OB_KERNEL(g_rmod_s, B[i] == (T)0 ? (T)0 : -A[i] * floor(s / B[i]))
OB_KERNEL(k_land_s, (T)(A[i] != (T)0 && s != (T)0))
OB_KERNEL(k_lor_s, (T)(A[i] != (T)0 || s != (T)0))
OB_KERNEL(k_lxor_s, (T)((A[i] != (T)0) != (s != (T)0)))

typedef struct xs {
    const ob_kernel *fwd, *bwd;
    int use_in;
} xs;
static const xs xs_hypot = {&k_hypot_s, &g_hypot_s, 1};
static const xs xs_mod = {&k_mod_s, &g_mod_s, 0};
static const xs xs_rmod = {&k_rmod_s, &g_rmod_s, 1};
static const xs xs_land = {&k_land_s, NULL, 0};
static const xs xs_lor = {&k_lor_s, NULL, 0};
static const xs xs_lxor = {&k_lxor_s, NULL, 0};

static int xs_forward(const mxp_simple_args *a) {
    const xs *x = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    const mxp_tensor *in[1] = {&a->in[0]};
    return ob_ew(a->ctx, 1, in, a->out, a->req, x->fwd, &e);
}

static int xs_backward(const mxp_simple_grad_args *a) {
    const xs *x = a->user_data;
    ob_env e = {0};
    e.s = a->scalar;
    const mxp_tensor *in[2] = {a->out_grad, &a->in[0]};
    if (x->use_in && !a->in[0].data) return ob_err(MXP_EINVAL, "ops-basic: scalar backward is missing its input");
    return ob_ew(a->ctx, x->use_in ? 2 : 1, in, &a->in_grad[0], a->req[0], x->bwd, &e);
}

#define XS(NAME, GK, INFO, DOC)                                                            \
    { MXP_HEADER(mxp_simple_op_def), NAME, NULL, DOC, MXP_SIMPLE_SCALAR, GK,               \
      ((GK) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD) | MXP_SIMPLE_INPLACE_BWD, \
      0, NULL, 0, 0, xs_forward, (GK) == MXP_GRAD_ZERO ? NULL : xs_backward, NULL, NULL,   \
      MXP_RANK_PRIMARY, 0, (void *)&INFO }

static const mxp_simple_op_def xscalar_defs[] = {
    XS("_hypot_scalar", MXP_GRAD_USES_INPUT, xs_hypot, "sqrt(x^2 + scalar^2)"),
    XS("_mod_scalar", MXP_GRAD_USES_OUT_GRAD, xs_mod, "x mod scalar"),
    XS("_rmod_scalar", MXP_GRAD_USES_INPUT, xs_rmod, "scalar mod x"),
    XS("_logical_and_scalar", MXP_GRAD_ZERO, xs_land, "x && scalar (0/1)"),
    XS("_logical_or_scalar", MXP_GRAD_ZERO, xs_lor, "x || scalar (0/1)"),
    XS("_logical_xor_scalar", MXP_GRAD_ZERO, xs_lxor, "x xor scalar (0/1)"),
};

int ob_reg_math_ext(mxp_registrar *r) {
    const mxp_simple_op_def *tables[] = {xunary_defs, xbinary_defs, xscalar_defs};
    const size_t counts[] = {sizeof xunary_defs / sizeof xunary_defs[0], sizeof xbinary_defs / sizeof xbinary_defs[0],
                             sizeof xscalar_defs / sizeof xscalar_defs[0]};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < counts[t]; i++) {
            int rc = r->add_simple_op(r, &tables[t][i]);
            if (rc) return rc;
        }
    return MXP_OK;
}
