/* dropout.c — Dropout (MXNet 1.x): params p (0.5), mode training/always,
 * axes (mask shared along these axes), cudnn_off.  Outputs output and mask
 * (mask visible only internally).  When active (is_train or mode=always,
 * p > 0) the mask is Bernoulli(1-p)/(1-p) drawn with host->rng_bernoulli_f32
 * from the op's reserved RNG range (MXP_RESOURCE_RANDOM), so results are
 * reproducible for a given seed and push order; otherwise the op is the
 * identity and the mask is 1.  Backward: dx = dy * mask.  f32/f64. */
#include "nn_common.h"

typedef struct do_params { double p; mxp_param_shape axes; int32_t mode, cudnn_off; } do_params;
static const char *const do_modes[] = {"training", "always", NULL};

static const mxp_param_def do_schema[] = {
    MXP_PARAM("p", MXP_PARAM_FLOAT, MXP_PARAM_HAS_MIN | MXP_PARAM_HAS_MAX, do_params, p, "0.5", 0, 1, NULL, "Fraction of the input that gets dropped out during training time."),
    NN_P("mode", MXP_PARAM_ENUM, 0, do_params, mode, "training", do_modes, "Whether to only turn on dropout during training or to also turn on for inference."),
    NN_P("axes", MXP_PARAM_SHAPE, 0, do_params, axes, "()", NULL, "Axes for variational dropout kernel."),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, do_params, cudnn_off, "False", NULL, "Whether to turn off cudnn (ignored on CPU)."),
};
static const char *const do_args[] = {"data", NULL};
static const char *const do_outs[] = {"output", "mask", NULL};

static int do_infer_shape(mxp_infer_shape_args *a) {
    int st;
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE;
    if ((st = nn_shape_assign("Dropout", "output", &a->out[0], &a->in[0])) < 0 ||
        (st = nn_shape_assign("Dropout", "mask", &a->out[1], &a->in[0])) < 0) return st;
    return nn_shape_known(&a->in[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

static int do_forward(const mxp_forward_args *a) {
    const do_params *p = a->params; int32_t dt; int st;
    if ((st = nn_check_float("Dropout", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("Dropout", a->in, 1)) < 0 || (st = nn_check_contig("Dropout", a->out, 2)) < 0) return st;
    const mxp_tensor *x = &a->in[0];
    int64_t n = mxp_tensor_numel(x);
    int active = (a->ctx->is_train || p->mode == 1) && p->p > 0;
    void *y = nn_ptr(&a->out[0]), *mask = nn_ptr(&a->out[1]);
    const void *xp = nn_ptr(x);
    if (!active) {
        NN_TYPED(dt, T, const T *xx = xp; T *yy = y; T *mm = mask;
            if (a->req[0] != MXP_REQ_NULL) for (int64_t i = 0; i < n; i++) NN_STORE(a->req[0], yy[i], xx[i]);
            if (mm && a->req[1] != MXP_REQ_NULL) for (int64_t i = 0; i < n; i++) mm[i] = 1;);
        return MXP_OK;
    }
    if (!a->ctx->rng || !nn_host->rng_bernoulli_f32)
        return NN_ERR(MXP_EINVAL, "Dropout: no random resource (MXP_RESOURCE_RANDOM) in the op context");
    if (!mask) return NN_ERR(MXP_EINVAL, "Dropout: the mask output is required when dropout is active");
    /* mask shape: data shape with the `axes` dimensions set to 1 */
    int64_t ms[MXP_MAX_NDIM], mn = 1;
    for (int i = 0; i < x->ndim; i++) ms[i] = x->shape[i];
    if (p->axes.has_value) for (int k = 0; k < p->axes.ndim; k++) {
        int64_t ax = p->axes.dims[k] < 0 ? p->axes.dims[k] + x->ndim : p->axes.dims[k];
        if (ax < 0 || ax >= x->ndim) return NN_ERR(MXP_EINVAL, "Dropout: axes element %lld out of range", (long long)p->axes.dims[k]);
        ms[ax] = 1;
    }
    for (int i = 0; i < x->ndim; i++) mn *= ms[i];
    float *bits = nn_alloc((uint64_t)mn * sizeof(float));
    if (!bits) return NN_ERR(MXP_ENOMEM, "Dropout: no memory for the mask");
    if ((st = nn_host->rng_bernoulli_f32(a->ctx->rng, (float)(1.0 - p->p), bits, (uint64_t)mn)) < 0) { nn_free(bits); return st; }
    double scale = 1.0 / (1.0 - p->p);
    NN_TYPED(dt, T, const T *xx = xp; T *yy = y; T *mm = mask;
        for (int64_t i = 0; i < n; i++) {
            int64_t mi = i;
            if (mn != n) { /* broadcast index into the reduced mask */
                int64_t rem = i, idx = 0, mul = 1;
                for (int d = x->ndim - 1; d >= 0; d--) { int64_t c = rem % x->shape[d]; rem /= x->shape[d];
                    if (ms[d] != 1) idx += c * mul; mul *= ms[d]; }
                mi = idx;
            }
            T m = (T)(bits[mi] * scale);
            mm[i] = m;
            if (a->req[0] != MXP_REQ_NULL) NN_STORE(a->req[0], yy[i], xx[i] * m);
        });
    nn_free(bits);
    return MXP_OK;
}

static int do_backward(const mxp_backward_args *a) {
    int st;
    if ((st = nn_check_contig("Dropout", a->out_grad, 1)) < 0 || (st = nn_check_contig("Dropout", a->in_grad, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t n = mxp_tensor_numel(&a->in_grad[0]);
    if (!a->out[1].data) return NN_ERR(MXP_EINVAL, "Dropout: backward needs the mask");
    NN_TYPED(a->out_grad[0].dtype, T, const T *dy = nn_ptr(&a->out_grad[0]); const T *m = nn_ptr(&a->out[1]);
        T *dx = nn_ptr(&a->in_grad[0]);
        for (int64_t i = 0; i < n; i++) NN_STORE(a->req[0], dx[i], dy[i] * m[i]););
    return MXP_OK;
}

static int do_declare_backward(mxp_backward_deps_args *a) {
    a->need_out[0] = 0; a->need_out[1] = 1; a->need_out_grad[1] = 0; a->need_in[0] = 0;
    return MXP_OK;
}

static const mxp_op_def do_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Dropout", .doc = "Applies dropout operation to input array.",
    .params = do_schema, .n_params = NN_COUNT(do_schema), .params_size = sizeof(do_params),
    .arg_names = do_args, .output_names = do_outs, .infer_shape = do_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_OUT_DATA, .declare_backward = do_declare_backward,
    .resources = MXP_RESOURCE_RANDOM, .n_visible_outputs = 1,
};
static const mxp_op_impl do_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Dropout", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = do_forward, .backward = do_backward,
};

int nn_register_dropout(mxp_registrar *r) {
    int st = r->add_op(r, &do_def);
    return st < 0 ? st : r->add_impl(r, &do_impl);
}
