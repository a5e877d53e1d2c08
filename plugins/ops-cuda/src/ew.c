/* ew.c — GPU implementations ("cuda", device gpu) of ops-basic's
 * elementwise ops: the unary ops (abs ... round), the equal-shape binary
 * ops (elemwise_add ... _lesser_equal), their broadcast_* twins and the
 * scalar ops.  The math is the functor headers' (functors/), the
 * kernels are ew_kernels.cu's; this file checks the configuration, maps
 * req to write/add, picks what backward reads as the op's declared
 * backward dependencies promise, and finishes the stream (cu_common.h).
 *
 * The scalar ops (_plus_scalar ... _lesser_equal_scalar, smooth_l1) read
 * their "scalar" by name (ABI 1.1 typed access).  Not here: clip.  Only contiguous
 * float32 tensors are accepted: `supports` refuses other dtypes with the
 * reason, forward/backward refuse strided views with an error. */
#include "cu_common.h"
#include "ew_kernels.h"

#include "functors/ew_binary.h"
#include "functors/ew_scalar.h"
#include "functors/ew_unary.h"

#include <string.h>

enum { FAM_UNARY, FAM_BINARY, FAM_BCAST, FAM_SCALAR };

typedef struct ew_info {
    const char *op;
    int family;
    int code;
} ew_info;

static const ew_info k_ops[] = {
    {"abs", FAM_UNARY, CU_U_ABS}, {"sign", FAM_UNARY, CU_U_SIGN},
    {"negative", FAM_UNARY, CU_U_NEGATIVE}, {"reciprocal", FAM_UNARY, CU_U_RECIPROCAL},
    {"square", FAM_UNARY, CU_U_SQUARE}, {"sqrt", FAM_UNARY, CU_U_SQRT},
    {"rsqrt", FAM_UNARY, CU_U_RSQRT}, {"exp", FAM_UNARY, CU_U_EXP},
    {"log", FAM_UNARY, CU_U_LOG}, {"log1p", FAM_UNARY, CU_U_LOG1P},
    {"expm1", FAM_UNARY, CU_U_EXPM1}, {"sin", FAM_UNARY, CU_U_SIN},
    {"cos", FAM_UNARY, CU_U_COS}, {"tanh", FAM_UNARY, CU_U_TANH},
    {"sigmoid", FAM_UNARY, CU_U_SIGMOID}, {"relu", FAM_UNARY, CU_U_RELU},
    {"softsign", FAM_UNARY, CU_U_SOFTSIGN}, {"erf", FAM_UNARY, CU_U_ERF},
    {"floor", FAM_UNARY, CU_U_FLOOR}, {"ceil", FAM_UNARY, CU_U_CEIL},
    {"round", FAM_UNARY, CU_U_ROUND},
    {"elemwise_add", FAM_BINARY, CU_B_ADD}, {"elemwise_sub", FAM_BINARY, CU_B_SUB},
    {"elemwise_mul", FAM_BINARY, CU_B_MUL}, {"elemwise_div", FAM_BINARY, CU_B_DIV},
    {"_power", FAM_BINARY, CU_B_POWER}, {"_maximum", FAM_BINARY, CU_B_MAXIMUM},
    {"_minimum", FAM_BINARY, CU_B_MINIMUM}, {"_equal", FAM_BINARY, CU_B_EQUAL},
    {"_not_equal", FAM_BINARY, CU_B_NOT_EQUAL}, {"_greater", FAM_BINARY, CU_B_GREATER},
    {"_greater_equal", FAM_BINARY, CU_B_GREATER_EQUAL}, {"_lesser", FAM_BINARY, CU_B_LESSER},
    {"_lesser_equal", FAM_BINARY, CU_B_LESSER_EQUAL},
    {"broadcast_add", FAM_BCAST, CU_B_ADD}, {"broadcast_sub", FAM_BCAST, CU_B_SUB},
    {"broadcast_mul", FAM_BCAST, CU_B_MUL}, {"broadcast_div", FAM_BCAST, CU_B_DIV},
    {"broadcast_power", FAM_BCAST, CU_B_POWER}, {"broadcast_maximum", FAM_BCAST, CU_B_MAXIMUM},
    {"broadcast_minimum", FAM_BCAST, CU_B_MINIMUM}, {"broadcast_equal", FAM_BCAST, CU_B_EQUAL},
    {"broadcast_not_equal", FAM_BCAST, CU_B_NOT_EQUAL}, {"broadcast_greater", FAM_BCAST, CU_B_GREATER},
    {"broadcast_greater_equal", FAM_BCAST, CU_B_GREATER_EQUAL}, {"broadcast_lesser", FAM_BCAST, CU_B_LESSER},
    {"broadcast_lesser_equal", FAM_BCAST, CU_B_LESSER_EQUAL},
    {"_plus_scalar", FAM_SCALAR, CU_S_PLUS}, {"_minus_scalar", FAM_SCALAR, CU_S_MINUS},
    {"_rminus_scalar", FAM_SCALAR, CU_S_RMINUS}, {"_mul_scalar", FAM_SCALAR, CU_S_MUL},
    {"_div_scalar", FAM_SCALAR, CU_S_DIV}, {"_rdiv_scalar", FAM_SCALAR, CU_S_RDIV},
    {"_power_scalar", FAM_SCALAR, CU_S_POWER}, {"_rpower_scalar", FAM_SCALAR, CU_S_RPOWER},
    {"_maximum_scalar", FAM_SCALAR, CU_S_MAXIMUM}, {"_minimum_scalar", FAM_SCALAR, CU_S_MINIMUM},
    {"_equal_scalar", FAM_SCALAR, CU_S_EQUAL}, {"_not_equal_scalar", FAM_SCALAR, CU_S_NOT_EQUAL},
    {"_greater_scalar", FAM_SCALAR, CU_S_GREATER}, {"_greater_equal_scalar", FAM_SCALAR, CU_S_GREATER_EQUAL},
    {"_lesser_scalar", FAM_SCALAR, CU_S_LESSER}, {"_lesser_equal_scalar", FAM_SCALAR, CU_S_LESSER_EQUAL},
    {"smooth_l1", FAM_SCALAR, CU_S_SMOOTH_L1},
};
#define N_OPS (sizeof k_ops / sizeof k_ops[0])

static int scalar_of(const ew_info *e, const mxp_op_params *p, float *out);

static float *fptr(const mxp_tensor *t) { return t && t->data ? (float *)mxp_tensor_ptr(t) : NULL; }
static int is_add(const int32_t *req, uint32_t i) { return req && req[i] == MXP_REQ_ADD; }
static int is_null(const int32_t *req, uint32_t i) { return req && req[i] == MXP_REQ_NULL; }

static int ew_supports(mxp_impl_query_args *a) {
    const ew_info *e = a->user_data;
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in_dtypes && a->in_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "%s on gpu: only float32 (input %u is dtype %d)", e->op, i, (int)a->in_dtypes[i]);
    for (uint32_t i = 0; i < a->n_out; i++)
        if (a->out_dtypes && a->out_dtypes[i] != MXP_DTYPE_F32)
            return cu_refuse(a, "%s on gpu: only float32 (output is dtype %d)", e->op, (int)a->out_dtypes[i]);
    return 1;
}

static int check_tensors(const ew_info *e, const mxp_tensor *t, uint32_t n, const char *what) {
    for (uint32_t i = 0; i < n; i++) {
        if (!t[i].data) continue;
        if (t[i].dtype != MXP_DTYPE_F32)
            return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %s %u has dtype %d, only float32 runs on the gpu",
                                        e->op, what, i, (int)t[i].dtype);
        if (!mxp_tensor_is_contiguous(&t[i]))
            return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op '%s': %s %u is a strided view; the gpu kernels need "
                                        "contiguous arrays", e->op, what, i);
        if (t[i].device.type != MXP_DEV_GPU)
            return g_cu_host->set_error(MXP_EDEVICE, "gpu op '%s': %s %u is on device type %d, not the gpu", e->op,
                                        what, i, (int)t[i].device.type);
    }
    return MXP_OK;
}

/* Broadcast geometry of inputs a and b to output y (shapes as the host's
 * broadcast shape inference gives them). */
static int bcast_of(const ew_info *e, const mxp_tensor *a, const mxp_tensor *b, const mxp_tensor *y, cuk_bcast *g) {
    memset(g, 0, sizeof *g);
    if (y->ndim > CUK_MAX_NDIM || a->ndim > y->ndim || b->ndim > y->ndim)
        return g_cu_host->set_error(MXP_ESHAPE, "gpu op '%s': ranks %d, %d -> %d are not a broadcast", e->op,
                                    (int)a->ndim, (int)b->ndim, (int)y->ndim);
    g->ndim = y->ndim;
    const mxp_tensor *in[2] = {a, b};
    int64_t *st[2] = {g->lhs_st, g->rhs_st};
    for (int k = 0; k < 2; k++) {
        int64_t s = 1;
        for (int d = y->ndim - 1; d >= 0; d--) {
            int kd = in[k]->ndim - y->ndim + d;
            int64_t dim = kd >= 0 ? in[k]->shape[kd] : 1;
            if (dim != y->shape[d] && dim != 1)
                return g_cu_host->set_error(MXP_ESHAPE, "gpu op '%s': input %d dimension %d is %lld, output's is %lld",
                                            e->op, k, d, (long long)dim, (long long)y->shape[d]);
            st[k][d] = dim == y->shape[d] ? s : 0;
            s *= dim;
        }
    }
    for (int d = 0; d < y->ndim; d++) g->shape[d] = y->shape[d];
    return MXP_OK;
}

static int ew_forward(const mxp_forward_args *a) {
    const ew_info *e = a->user_data;
    if (is_null(a->req, 0)) return MXP_OK;
    int rc = check_tensors(e, a->in, a->n_in, "input");
    if (!rc) rc = check_tensors(e, a->out, 1, "output");
    if (rc) return rc;
    void *s = a->ctx->stream;
    int add = is_add(a->req, 0);
    const mxp_tensor *y = &a->out[0];
    int64_t n = mxp_tensor_numel(y);
    int st;
    const char *kernel;
    if (e->family == FAM_UNARY) {
        kernel = "unary forward";
        st = cuk_unary_fwd(s, e->code, fptr(&a->in[0]), fptr(y), n, add);
    } else if (e->family == FAM_SCALAR) {
        float sc;
        if ((rc = scalar_of(e, mxp_forward_op_params(a), &sc))) return rc;
        kernel = "scalar forward";
        st = cuk_scalar_fwd(s, e->code, fptr(&a->in[0]), sc, fptr(y), n, add);
    } else if (e->family == FAM_BINARY) {
        kernel = "binary forward";
        st = cuk_binary_fwd(s, e->code, fptr(&a->in[0]), fptr(&a->in[1]), fptr(y), n, add);
    } else {
        cuk_bcast g;
        rc = bcast_of(e, &a->in[0], &a->in[1], y, &g);
        if (rc) return rc;
        kernel = "broadcast forward";
        st = cuk_bcast_fwd(s, e->code, &g, fptr(&a->in[0]), fptr(&a->in[1]), fptr(y), add);
    }
    rc = cu_check_launch(st, kernel, e->op);
    return rc ? rc : cu_finish(s, e->op);
}

/* The "scalar" parameter the host's SimpleOp expansion gives scalar ops. */
static int scalar_of(const ew_info *e, const mxp_op_params *p, float *out) {
    double v = 0;
    int rc = mxp_param_get_float(g_cu_host, p, "scalar", &v);
    if (rc) return rc;
    (void)e;
    *out = (float)v;
    return MXP_OK;
}

static int need(const ew_info *e, const float *p, const char *what) {
    if (p) return MXP_OK;
    return g_cu_host->set_error(MXP_EINVAL, "gpu op '%s': backward is missing its %s", e->op, what);
}

static int unary_backward(const mxp_backward_args *a, const ew_info *e) {
    void *s = a->ctx->stream;
    const mxp_tensor *dx = &a->in_grad[0];
    int64_t n = mxp_tensor_numel(dx);
    int add = is_add(a->req, 0);
    if (cu_unary_grad_is_zero(e->code)) {
        if (add) return MXP_OK;
        return cu_check_launch(cuk_fill(s, fptr(dx), 0.0f, n, 0), "fill", e->op);
    }
    const float *dy = fptr(&a->out_grad[0]);
    int uses_out = cu_unary_grad_uses_output(e->code);
    const float *v = e->code == CU_U_NEGATIVE ? NULL : uses_out ? fptr(&a->out[0]) : fptr(&a->in[0]);
    int rc = need(e, dy, "out_grad");
    if (!rc && e->code != CU_U_NEGATIVE) rc = need(e, v, uses_out ? "output" : "input");
    if (rc) return rc;
    return cu_check_launch(cuk_unary_bwd(s, e->code, dy, v, fptr(dx), n, add), "unary backward", e->op);
}

static int scalar_backward(const mxp_backward_args *a, const ew_info *e) {
    void *s = a->ctx->stream;
    const mxp_tensor *dx = &a->in_grad[0];
    int64_t n = mxp_tensor_numel(dx);
    int add = is_add(a->req, 0);
    if (cu_scalar_grad_is_zero(e->code)) {
        if (add) return MXP_OK;
        return cu_check_launch(cuk_fill(s, fptr(dx), 0.0f, n, 0), "fill", e->op);
    }
    float sc;
    int rc = scalar_of(e, mxp_backward_op_params(a), &sc);
    if (rc) return rc;
    const float *dy = fptr(&a->out_grad[0]), *v = NULL;
    rc = need(e, dy, "out_grad");
    if (!rc && cu_scalar_grad_uses_value(e->code)) {
        int uses_out = cu_scalar_grad_uses_output(e->code);
        v = uses_out ? fptr(&a->out[0]) : fptr(&a->in[0]);
        rc = need(e, v, uses_out ? "output" : "input");
    }
    if (rc) return rc;
    return cu_check_launch(cuk_scalar_bwd(s, e->code, dy, v, sc, fptr(dx), n, add), "scalar backward", e->op);
}

static int binary_backward(const mxp_backward_args *a, const ew_info *e) {
    void *s = a->ctx->stream;
    float *dl = is_null(a->req, 0) ? NULL : fptr(&a->in_grad[0]);
    float *dr = is_null(a->req, 1) ? NULL : fptr(&a->in_grad[1]);
    int add_l = is_add(a->req, 0), add_r = is_add(a->req, 1);
    if (cu_binary_grad_is_zero(e->code)) {
        int rc = MXP_OK;
        if (dl && !add_l)
            rc = cu_check_launch(cuk_fill(s, dl, 0.0f, mxp_tensor_numel(&a->in_grad[0]), 0), "fill", e->op);
        if (!rc && dr && !add_r)
            rc = cu_check_launch(cuk_fill(s, dr, 0.0f, mxp_tensor_numel(&a->in_grad[1]), 0), "fill", e->op);
        return rc;
    }
    const float *dy = fptr(&a->out_grad[0]);
    const float *x0 = NULL, *x1 = NULL;
    int rc = need(e, dy, "out_grad");
    if (!rc && cu_binary_grad_uses_inputs(e->code)) {
        x0 = fptr(&a->in[0]);
        x1 = fptr(&a->in[1]);
        rc = need(e, x0, "lhs");
        if (!rc) rc = need(e, x1, "rhs");
    }
    if (rc) return rc;
    if (e->family == FAM_BINARY)
        return cu_check_launch(cuk_binary_bwd(s, e->code, dy, x0, x1, dl, add_l, dr, add_r,
                                              mxp_tensor_numel(&a->out_grad[0])),
                               "binary backward", e->op);
    /* Broadcast: each gradient sums over its input's broadcast dimensions.
     * The gradients never share memory with out_grad (no inplace option
     * for broadcast ops), so the order does not matter. */
    cuk_bcast g;
    rc = bcast_of(e, &a->in_grad[0], &a->in_grad[1], &a->out_grad[0], &g);
    if (rc) return rc;
    if (dr) rc = cu_check_launch(cuk_bcast_bwd(s, e->code, &g, dy, x0, x1, 1, dr, add_r), "broadcast backward", e->op);
    if (!rc && dl)
        rc = cu_check_launch(cuk_bcast_bwd(s, e->code, &g, dy, x0, x1, 0, dl, add_l), "broadcast backward", e->op);
    return rc;
}

static int ew_backward(const mxp_backward_args *a) {
    const ew_info *e = a->user_data;
    int rc = check_tensors(e, a->out_grad, a->n_out, "out_grad");
    if (!rc) rc = check_tensors(e, a->in, a->n_in, "input");
    if (!rc) rc = check_tensors(e, a->out, a->n_out, "output");
    if (!rc) rc = check_tensors(e, a->in_grad, a->n_in, "input gradient");
    if (rc) return rc;
    if (e->family == FAM_UNARY || e->family == FAM_SCALAR) {
        if (is_null(a->req, 0)) return MXP_OK;
        rc = e->family == FAM_UNARY ? unary_backward(a, e) : scalar_backward(a, e);
    } else {
        rc = binary_backward(a, e);
    }
    return rc ? rc : cu_finish(a->ctx->stream, e->op);
}

static mxp_op_impl g_impls[N_OPS];

int cu_reg_elemwise(mxp_registrar *r) {
    for (size_t i = 0; i < N_OPS; i++) {
        mxp_op_impl *im = &g_impls[i];
        memset(im, 0, sizeof *im);
        im->hdr = (mxp_header)MXP_HEADER(mxp_op_impl);
        im->op_name = k_ops[i].op;
        im->impl_name = "cuda";
        im->device = "gpu";
        im->rank = MXP_RANK_PRIMARY;
        im->doc = "CUDA kernel (float32, contiguous)";
        im->supports = ew_supports;
        im->forward = ew_forward;
        im->backward = ew_backward;
        im->user_data = (void *)&k_ops[i];
        int rc = r->add_impl(r, im);
        if (rc) return rc;
    }
    return MXP_OK;
}
