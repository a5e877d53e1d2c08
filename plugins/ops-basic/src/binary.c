/* binary.c — elementwise binary SimpleOps in two flavours with MXNet 1.x
 * names: equal-shape (elemwise_add/_sub/_mul/_div, _power, _maximum,
 * _minimum, _equal, _not_equal, _greater, _greater_equal, _lesser,
 * _lesser_equal) and numpy-broadcasting (broadcast_add ... broadcast_lesser_equal).
 *
 * Both flavours share kernels: for BROADCAST the host hands inputs shaped
 * like the output with stride 0 on broadcast dimensions (ob_ew's chunk path
 * gathers them) and reduces the full-shape gradients we write back to each
 * input's shape.  Gradient kernel inputs: A = out_grad, B = lhs, C = rhs.
 * Backward writes in_grad[1] before in_grad[0] because out_grad may share
 * in_grad[0]'s memory (MXP_SIMPLE_INPLACE_BWD).  Comparisons produce 0/1 in
 * the input dtype and have zero gradient. */
#include <tgmath.h>

#include "common.h"

typedef struct binfo {
    const ob_kernel *fwd, *gl, *gr;
} binfo;

OB_KERNEL(k_add, A[i] + B[i])
OB_KERNEL(k_sub, A[i] - B[i])
OB_KERNEL(k_mul, A[i] * B[i])
OB_KERNEL(k_div, A[i] / B[i])
OB_KERNEL(k_power, pow(A[i], B[i]))
OB_KERNEL(k_maximum, A[i] > B[i] ? A[i] : B[i])
OB_KERNEL(k_minimum, A[i] < B[i] ? A[i] : B[i])
OB_KERNEL(k_equal, A[i] == B[i])
OB_KERNEL(k_not_equal, A[i] != B[i])
OB_KERNEL(k_greater, A[i] > B[i])
OB_KERNEL(k_greater_equal, A[i] >= B[i])
OB_KERNEL(k_lesser, A[i] < B[i])
OB_KERNEL(k_lesser_equal, A[i] <= B[i])

OB_KERNEL(g_id, A[i])
OB_KERNEL(g_neg, -A[i])
OB_KERNEL(g_mul_l, A[i] * C[i])
OB_KERNEL(g_mul_r, A[i] * B[i])
OB_KERNEL(g_div_l, A[i] / C[i])
OB_KERNEL(g_div_r, -A[i] * B[i] / (C[i] * C[i]))
OB_KERNEL(g_power_l, A[i] * C[i] * pow(B[i], C[i] - (T)1))
OB_KERNEL(g_power_r, A[i] * pow(B[i], C[i]) * log(B[i]))
OB_KERNEL(g_max_l, B[i] >= C[i] ? A[i] : (T)0)
OB_KERNEL(g_max_r, B[i] < C[i] ? A[i] : (T)0)
OB_KERNEL(g_min_l, B[i] <= C[i] ? A[i] : (T)0)
OB_KERNEL(g_min_r, B[i] > C[i] ? A[i] : (T)0)

static const binfo bi_add = {&k_add, &g_id, &g_id};
static const binfo bi_sub = {&k_sub, &g_id, &g_neg};
static const binfo bi_mul = {&k_mul, &g_mul_l, &g_mul_r};
static const binfo bi_div = {&k_div, &g_div_l, &g_div_r};
static const binfo bi_power = {&k_power, &g_power_l, &g_power_r};
static const binfo bi_maximum = {&k_maximum, &g_max_l, &g_max_r};
static const binfo bi_minimum = {&k_minimum, &g_min_l, &g_min_r};
static const binfo bi_equal = {&k_equal, NULL, NULL};
static const binfo bi_not_equal = {&k_not_equal, NULL, NULL};
static const binfo bi_greater = {&k_greater, NULL, NULL};
static const binfo bi_greater_equal = {&k_greater_equal, NULL, NULL};
static const binfo bi_lesser = {&k_lesser, NULL, NULL};
static const binfo bi_lesser_equal = {&k_lesser_equal, NULL, NULL};

static int b_forward(const mxp_simple_args *a) {
    const binfo *b = a->user_data;
    ob_env e = {0};
    const mxp_tensor *in[2] = {&a->in[0], &a->in[1]};
    return ob_ew(a->ctx, 2, in, a->out, a->req, b->fwd, &e);
}

static int b_backward(const mxp_simple_grad_args *a) {
    const binfo *b = a->user_data;
    ob_env e = {0};
    /* add/sub read only out_grad; the rest read both inputs */
    const mxp_tensor *in[3] = {a->out_grad, &a->in[0], &a->in[1]};
    int n = b->gl == &g_id ? 1 : 3;
    if (n == 3 && (!a->in[0].data || !a->in[1].data))
        return ob_err(MXP_EINVAL, "ops-basic: binary backward needs both inputs");
    int rc = ob_ew(a->ctx, n, in, &a->in_grad[1], a->req[1], b->gr, &e);
    /* add's lhs gradient is out_grad itself: when the planner gave it
     * out_grad's storage (the backward inplace pair), it is already there
     * (a residual add's backward then copies one tensor, not two) */
    if (b->gl == &g_id && a->req[0] != MXP_REQ_ADD && a->in_grad[0].data &&
        a->in_grad[0].data == a->out_grad->data && a->in_grad[0].byte_offset == a->out_grad->byte_offset &&
        !a->in_grad[0].strides && !a->out_grad->strides && a->in_grad[0].dtype == a->out_grad->dtype)
        return rc;
    if (rc == MXP_OK) rc = ob_ew(a->ctx, n, in, &a->in_grad[0], a->req[0], b->gl, &e);
    return rc;
}

static const char *const al_add[] = {"_add", "_plus", "_Plus", NULL};
static const char *const al_sub[] = {"_sub", "_minus", "_Minus", NULL};
static const char *const al_mul[] = {"_mul", "_Mul", NULL};
static const char *const al_div[] = {"_div", "_Div", NULL};
static const char *const al_power[] = {"_Power", NULL};
static const char *const al_maximum[] = {"_Maximum", NULL};
static const char *const al_minimum[] = {"_Minimum", NULL};
static const char *const al_equal[] = {"_Equal", NULL};
static const char *const al_not_equal[] = {"_Not_Equal", NULL};
static const char *const al_greater[] = {"_Greater", NULL};
static const char *const al_greater_equal[] = {"_Greater_Equal", NULL};
static const char *const al_lesser[] = {"_Lesser", NULL};
static const char *const al_lesser_equal[] = {"_Lesser_Equal", NULL};
static const char *const al_badd[] = {"broadcast_plus", NULL};
static const char *const al_bsub[] = {"broadcast_minus", NULL};

#define BDEF_F(NAME, ALIASES, KIND, GK, INFO, DOC, XFLAGS)                             \
    { MXP_HEADER(mxp_simple_op_def), NAME, ALIASES, DOC, KIND, GK,                     \
      ((GK) == MXP_GRAD_USES_INPUT ? 0u : MXP_SIMPLE_INPLACE_FWD) | MXP_SIMPLE_INPLACE_BWD | (XFLAGS), \
      0, NULL, 0, 0, b_forward, (GK) == MXP_GRAD_ZERO ? NULL : b_backward,              \
      NULL, NULL, MXP_RANK_PRIMARY, 0, (void *)&INFO }
#define BDEF(NAME, ALIASES, KIND, GK, INFO, DOC) BDEF_F(NAME, ALIASES, KIND, GK, INFO, DOC, 0u)
#define PAIR(ENAME, EAL, BNAME, BAL, GK, INFO, WHAT)                                   \
    BDEF(ENAME, EAL, MXP_SIMPLE_BINARY, GK, INFO, WHAT " of two arrays of equal shape."), \
    BDEF(BNAME, BAL, MXP_SIMPLE_BROADCAST, GK, INFO, WHAT " with numpy broadcasting.")

static const mxp_simple_op_def binary_defs[] = {
    /* elemwise_add's gradient is out_grad for both inputs: the executor
     * passes it on without a backward step (MXP_SIMPLE_IDENTITY_GRAD);
     * broadcast_add's sums over the broadcast axes. */
    BDEF_F("elemwise_add", al_add, MXP_SIMPLE_BINARY, MXP_GRAD_USES_OUT_GRAD, bi_add, "lhs + rhs of two arrays of equal shape.",
           MXP_SIMPLE_IDENTITY_GRAD),
    BDEF("broadcast_add", al_badd, MXP_SIMPLE_BROADCAST, MXP_GRAD_USES_OUT_GRAD, bi_add, "lhs + rhs with numpy broadcasting."),
    PAIR("elemwise_sub", al_sub, "broadcast_sub", al_bsub, MXP_GRAD_USES_OUT_GRAD, bi_sub, "lhs - rhs"),
    PAIR("elemwise_mul", al_mul, "broadcast_mul", NULL, MXP_GRAD_USES_INPUT, bi_mul, "lhs * rhs"),
    PAIR("elemwise_div", al_div, "broadcast_div", NULL, MXP_GRAD_USES_INPUT, bi_div, "lhs / rhs"),
    PAIR("_power", al_power, "broadcast_power", NULL, MXP_GRAD_USES_INPUT, bi_power, "lhs ^ rhs"),
    PAIR("_maximum", al_maximum, "broadcast_maximum", NULL, MXP_GRAD_USES_INPUT, bi_maximum,
         "max(lhs, rhs)"),
    PAIR("_minimum", al_minimum, "broadcast_minimum", NULL, MXP_GRAD_USES_INPUT, bi_minimum,
         "min(lhs, rhs)"),
    PAIR("_equal", al_equal, "broadcast_equal", NULL, MXP_GRAD_ZERO, bi_equal, "lhs == rhs (0/1)"),
    PAIR("_not_equal", al_not_equal, "broadcast_not_equal", NULL, MXP_GRAD_ZERO, bi_not_equal,
         "lhs != rhs (0/1)"),
    PAIR("_greater", al_greater, "broadcast_greater", NULL, MXP_GRAD_ZERO, bi_greater,
         "lhs > rhs (0/1)"),
    PAIR("_greater_equal", al_greater_equal, "broadcast_greater_equal", NULL, MXP_GRAD_ZERO,
         bi_greater_equal, "lhs >= rhs (0/1)"),
    PAIR("_lesser", al_lesser, "broadcast_lesser", NULL, MXP_GRAD_ZERO, bi_lesser,
         "lhs < rhs (0/1)"),
    PAIR("_lesser_equal", al_lesser_equal, "broadcast_lesser_equal", NULL, MXP_GRAD_ZERO,
         bi_lesser_equal, "lhs <= rhs (0/1)"),
};

int ob_reg_binary(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof binary_defs / sizeof binary_defs[0]; i++) {
        int rc = r->add_simple_op(r, &binary_defs[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
