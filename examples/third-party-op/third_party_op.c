/* third_party_op.c — a pack written outside the mxplug tree, built only
 * from the installed plugin headers (pkg-config mxplug-plugin).
 *
 * It shows the two ways a third party extends the runtime:
 *   - a new op, `hardswish` (out = x * relu6(x + 3) / 6, MobileNetV3), with
 *     forward and backward;
 *   - a second implementation, `thirdparty`, of an op another pack defines:
 *     `relu` from ops-basic.  Its rank (MXP_RANK_MARGINAL) is below the
 *     default's, so `auto` keeps choosing ops-basic's unless the policy
 *     names it (`mxplug impl relu thirdparty`, MXP_IMPL_relu=thirdparty).
 * The relu impl follows the op's definition in ops-basic (a SimpleOp whose
 * gradient uses the output): backward reads out_grad and the output only.
 * Kernels: contiguous float32/float64; anything else is refused by
 * `supports` with a reason.  No symbol but mxp_plugin_v1 is exported. */
#include <mxp/plugin.h>

#include <stdio.h>

static const mxp_host *tp_host;

static int tp_supports(mxp_impl_query_args *a) {
    int32_t dt = a->n_in ? a->in_dtypes[0] : MXP_DTYPE_UNKNOWN;
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64) {
        if (a->reason) snprintf(a->reason, a->reason_size, "float32/float64 only (dtype %d)", (int)dt);
        return 0;
    }
    return 1;
}

static int tp_check(const char *op, const mxp_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++) {
        if (!ts[i]->data) return tp_host->set_error(MXP_EINVAL, "%s (third-party pack): missing tensor %d", op, i);
        if (!mxp_tensor_is_contiguous(ts[i]))
            return tp_host->set_error(MXP_EUNSUPPORTED, "%s (third-party pack): strided views unsupported", op);
        if (ts[i]->dtype != ts[0]->dtype || (ts[i]->dtype != MXP_DTYPE_F32 && ts[i]->dtype != MXP_DTYPE_F64))
            return tp_host->set_error(MXP_ETYPE, "%s (third-party pack): float32/float64 only", op);
    }
    return MXP_OK;
}

/* Elementwise y[i] (req) = f(a[i], b[i]) for float and double. */
#define TP_MAP(NAME, EXPR)                                                          \
    static void NAME(const mxp_tensor *ta, const mxp_tensor *tb, const mxp_tensor *ty, \
                     int32_t req) {                                                 \
        int64_t n = mxp_tensor_numel(ty);                                           \
        if (ty->dtype == MXP_DTYPE_F32) {                                           \
            typedef float T;                                                        \
            const T *A = mxp_tensor_ptr(ta), *B = tb ? mxp_tensor_ptr(tb) : NULL;   \
            T *Y = mxp_tensor_ptr(ty);                                              \
            for (int64_t i = 0; i < n; i++) {                                       \
                T a = A[i], b = B ? B[i] : (T)0, v = (EXPR);                        \
                (void)b;                                                            \
                Y[i] = req == MXP_REQ_ADD ? Y[i] + v : v;                           \
            }                                                                       \
        } else {                                                                    \
            typedef double T;                                                       \
            const T *A = mxp_tensor_ptr(ta), *B = tb ? mxp_tensor_ptr(tb) : NULL;   \
            T *Y = mxp_tensor_ptr(ty);                                              \
            for (int64_t i = 0; i < n; i++) {                                       \
                T a = A[i], b = B ? B[i] : (T)0, v = (EXPR);                        \
                (void)b;                                                            \
                Y[i] = req == MXP_REQ_ADD ? Y[i] + v : v;                           \
            }                                                                       \
        }                                                                           \
    }

/* hardswish(a) = a * clamp(a + 3, 0, 6) / 6 */
TP_MAP(tp_hardswish_map, a <= (T)-3 ? (T)0 : a >= (T)3 ? a : a * (a + (T)3) / (T)6)
/* d hardswish / da = 0 (a < -3), 1 (a > 3), (2a + 3) / 6 between; times b = out_grad */
TP_MAP(tp_hardswish_grad_map, a < (T)-3 ? (T)0 : a > (T)3 ? b : b * ((T)2 * a + (T)3) / (T)6)
/* relu(a) */
TP_MAP(tp_relu_map, a > (T)0 ? a : (T)0)
/* relu backward from the output a and out_grad b */
TP_MAP(tp_relu_grad_map, a > (T)0 ? b : (T)0)

/* ------------------------------------------------------------ hardswish */
static int tp_same_shape(mxp_infer_shape_args *a) {
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    return MXP_OK;
}

static const mxp_op_def tp_hardswish_def = {
    .hdr = MXP_HEADER(mxp_op_def),
    .name = "hardswish",
    .aliases = (const char *const[]){"hard_swish", NULL},
    .doc = "Hard swish: data * relu6(data + 3) / 6 (MobileNetV3).  From a third-party pack.",
    .arg_names = (const char *const[]){"data", NULL},
    .infer_shape = tp_same_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
};

static int tp_hardswish_forward(const mxp_forward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("hardswish", ts, 2);
    if (rc == MXP_OK) tp_hardswish_map(&a->in[0], NULL, &a->out[0], a->req[0]);
    return rc;
}

static int tp_hardswish_backward(const mxp_backward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out_grad[0], &a->in_grad[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("hardswish", ts, 3);
    if (rc == MXP_OK) tp_hardswish_grad_map(&a->in[0], &a->out_grad[0], &a->in_grad[0], a->req[0]);
    return rc;
}

static const mxp_op_impl tp_hardswish_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "hardswish", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY,
    .doc = "plain loop",
    .supports = tp_supports,
    .forward = tp_hardswish_forward,
    .backward = tp_hardswish_backward,
};

/* ------------------------------------------------------------ relu */
static int tp_relu_forward(const mxp_forward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("relu", ts, 2);
    if (rc == MXP_OK) tp_relu_map(&a->in[0], NULL, &a->out[0], a->req[0]);
    return rc;
}

static int tp_relu_backward(const mxp_backward_args *a) {
    const mxp_tensor *ts[] = {&a->out[0], &a->out_grad[0], &a->in_grad[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("relu", ts, 3);
    if (rc == MXP_OK) tp_relu_grad_map(&a->out[0], &a->out_grad[0], &a->in_grad[0], a->req[0]);
    return rc;
}

static const mxp_op_impl tp_relu_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "relu", .impl_name = "thirdparty", .device = "cpu",
    .rank = MXP_RANK_MARGINAL, /* below ops-basic's default: opt-in */
    .doc = "third-party relu (opt in with the policy)",
    .supports = tp_supports,
    .forward = tp_relu_forward,
    .backward = tp_relu_backward,
};

/* ------------------------------------------------------------ pack */
static int tp_init(const mxp_plugin_init_args *a) {
    tp_host = a->host;
    mxp_registrar *r = a->registrar;
    int rc = r->add_op(r, &tp_hardswish_def);
    if (rc == MXP_OK) rc = r->add_impl(r, &tp_hardswish_impl);
    if (rc == MXP_OK) rc = r->add_impl(r, &tp_relu_impl);
    return rc;
}

static const mxp_plugin_desc tp_desc = {
    .hdr = MXP_HEADER(mxp_plugin_desc),
    .min_host_minor = 0,
    .name = "thirdparty",
    .version = "1.0.0",
    .description = "Example third-party pack: hardswish, and a relu implementation",
    .license = "MIT",
    .init = tp_init,
};
MXP_PLUGIN_DEFINE(tp_desc)
