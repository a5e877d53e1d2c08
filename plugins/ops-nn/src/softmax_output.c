/* softmax_output.c — SoftmaxOutput (MXNet 1.x; alias Softmax): softmax
 * forward plus the cross-entropy gradient as a loss head (MXP_OP_LOSS:
 * out_grad is ignored).  Params grad_scale, ignore_label, use_ignore,
 * normalization null/batch/valid, multi_output (softmax over axis 1, label
 * (N, d1, ...)), preserve_shape (softmax over the last axis), smooth_alpha,
 * out_grad (accepted).  Label values are class indices stored as floats
 * (f32/f64, like the data).
 *   dx = grad_scale / norm * (p - onehot_smoothed(label)), 0 on ignored rows
 * where norm = 1 (null), N (batch) or max(#valid labels, 1) (valid), and
 * with multi_output also times the spatial size S = d2*d3*... for null and
 * batch (MXNet 1.9.1 softmax_output-inl.h). */
#include "nn_common.h"
#include <math.h>

static const char *const norm_choices[] = {"null", "batch", "valid", NULL};
enum { NORM_NULL, NORM_BATCH, NORM_VALID };

typedef struct so_params {
    double grad_scale, ignore_label, smooth_alpha;
    int32_t multi_output, use_ignore, preserve_shape, normalization, out_grad, pad;
} so_params;

static const mxp_param_def so_schema[] = {
    NN_P("grad_scale", MXP_PARAM_FLOAT, 0, so_params, grad_scale, "1", NULL, "Scales the gradient by a float factor."),
    NN_P("ignore_label", MXP_PARAM_FLOAT, 0, so_params, ignore_label, "-1", NULL, "The instances whose labels == ignore_label are ignored (with use_ignore)."),
    NN_P("multi_output", MXP_PARAM_BOOL, 0, so_params, multi_output, "False", NULL, "Softmax over axis 1 for each position (label (n, d1, ...))."),
    NN_P("use_ignore", MXP_PARAM_BOOL, 0, so_params, use_ignore, "False", NULL, "If set, ignore_label instances get no gradient."),
    NN_P("preserve_shape", MXP_PARAM_BOOL, 0, so_params, preserve_shape, "False", NULL, "Softmax over the last axis."),
    NN_P("normalization", MXP_PARAM_ENUM, 0, so_params, normalization, "null", norm_choices, "Normalizes the gradient."),
    NN_P("out_grad", MXP_PARAM_BOOL, 0, so_params, out_grad, "False", NULL, "Multiplies gradient with output gradient element-wise (not supported)."),
    NN_P("smooth_alpha", MXP_PARAM_FLOAT, 0, so_params, smooth_alpha, "0", NULL, "Label smoothing: alpha spread over the non-target classes."),
};
static const char *const so_args[] = {"data", "label", NULL};

static int so_check_params(mxp_check_params_args *a) {
    const so_params *p = a->params;
    if (p->out_grad) return NN_ERR(MXP_EUNSUPPORTED, "SoftmaxOutput: out_grad=True is not supported");
    return MXP_OK;
}

/* (O, K, S) of the softmax and the label shape for a data shape. */
static void so_split(const so_params *p, const int64_t *d, int nd, int64_t *O, int64_t *K, int64_t *S) {
    *O = 1; *K = 1; *S = 1;
    if (p->preserve_shape) { for (int i = 0; i < nd - 1; i++) *O *= d[i]; *K = d[nd - 1]; }
    else if (p->multi_output) { *O = d[0]; *K = nd > 1 ? d[1] : 1; for (int i = 2; i < nd; i++) *S *= d[i]; }
    else { *O = d[0]; for (int i = 1; i < nd; i++) *K *= d[i]; }
}

static int so_infer_shape(mxp_infer_shape_args *a) {
    const so_params *p = a->params;
    mxp_shape *d = &a->in[0];
    char b1[160], b2[160];
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    int st;
    if ((st = nn_shape_assign("SoftmaxOutput", "output", &a->out[0], d)) < 0) return st;
    mxp_shape l; memset(&l, 0, sizeof l);
    /* MXNet 1.9.1 (SoftmaxOutputShape): without multi_output the label is
     * the data shape without its last axis, (n,) for 2-D data, (n, a, b)
     * for (n, a, b, c) data, whatever preserve_shape says. */
    if (p->multi_output && !p->preserve_shape) { l.ndim = d->ndim - 1; l.dims[0] = d->dims[0]; for (int i = 2; i < d->ndim; i++) l.dims[i - 1] = d->dims[i]; }
    else { l.ndim = d->ndim - 1; for (int i = 0; i < l.ndim; i++) l.dims[i] = d->dims[i]; }
    mxp_shape *ls = &a->in[1];
    if (ls->ndim >= 0 && nn_shape_known(ls) && nn_shape_known(d)) {
        /* accept any label shape with the expected element count (e.g. (n, d1*d2) for multi_output) */
        if (nn_shape_numel(ls) != nn_shape_numel(&l) || ls->dims[0] != d->dims[0])
            return NN_ERR(MXP_ESHAPE, "SoftmaxOutput: label shape %s does not match data %s (expected %s)",
                          nn_shape_str(ls, b1, sizeof b1), nn_shape_str(d, b2, sizeof b2), nn_shape_str(&l, b2, sizeof b2));
    } else if ((st = nn_shape_assign("SoftmaxOutput", "label", ls, &l)) < 0) return st;
    return nn_shape_known(d) && nn_shape_known(ls) ? MXP_OK : MXP_EINCOMPLETE;
}

static int so_forward(const mxp_forward_args *a) {
    const so_params *p = a->params; int32_t dt; int st;
    if ((st = nn_check_float("SoftmaxOutput", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("SoftmaxOutput", a->in, 2)) < 0 || (st = nn_check_contig("SoftmaxOutput", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t O, K, S;
    so_split(p, a->in[0].shape, a->in[0].ndim, &O, &K, &S);
    return nn_softmax_axis(a->ctx, dt, nn_ptr(&a->in[0]), nn_ptr(&a->out[0]), a->req[0], O, K, S, 1.0, 0);
}

static int so_backward(const mxp_backward_args *a) {
    const so_params *p = a->params; int st;
    if ((st = nn_check_contig("SoftmaxOutput", a->in_grad, 2)) < 0 || (st = nn_check_contig("SoftmaxOutput", a->out, 1)) < 0 ||
        (st = nn_check_contig("SoftmaxOutput", &a->in[1], 1)) < 0) return st;
    int32_t dt = a->out[0].dtype, lt = a->in[1].dtype;
    if (lt != MXP_DTYPE_F32 && lt != MXP_DTYPE_F64) return NN_ERR(MXP_ETYPE, "SoftmaxOutput: label dtype must be float32/float64");
    int64_t O, K, S;
    so_split(p, a->out[0].shape, a->out[0].ndim, &O, &K, &S);
    const void *lab = nn_ptr(&a->in[1]);
    /* Without multi_output MXNet's gradient reads the first N labels of a
     * label shaped like the data without its last axis (SoftmaxGrad over
     * the (N, rest) view), so a larger label is accepted, a smaller one not. */
    if (mxp_tensor_numel(&a->in[1]) < O * S)
        return NN_ERR(MXP_ESHAPE, "SoftmaxOutput: the gradient needs %lld labels (one per softmax row), the label has %lld",
                      (long long)(O * S), (long long)mxp_tensor_numel(&a->in[1]));
    if (a->req[0] != MXP_REQ_NULL) {
        int64_t valid = 0;
        for (int64_t r = 0; r < O * S; r++) {
            double l = lt == MXP_DTYPE_F32 ? ((const float *)lab)[r] : ((const double *)lab)[r];
            if (!(p->use_ignore && l == p->ignore_label)) valid++;
        }
        double norm = p->normalization == NORM_BATCH ? (double)a->out[0].shape[0]
                    : p->normalization == NORM_VALID ? (double)(valid > 0 ? valid : 1) : 1.0;
        /* multi_output: MXNet (softmax_output-inl.h) also divides by the
         * spatial size S, except for 'valid', whose count covers every
         * position already. */
        if (p->multi_output && !p->preserve_shape && p->normalization != NORM_VALID) norm *= (double)S;
        double scale = p->grad_scale / norm;
        double on = 1.0 - p->smooth_alpha, off = K > 1 ? p->smooth_alpha / (double)(K - 1) : 0.0;
        NN_TYPED(dt, T, const T *y = nn_ptr(&a->out[0]); T *dx = nn_ptr(&a->in_grad[0]);
            for (int64_t r = 0; r < O * S; r++) {
                int64_t o = r / S, s = r % S, base = o * K * S + s;
                double l = lt == MXP_DTYPE_F32 ? ((const float *)lab)[r] : ((const double *)lab)[r];
                int ignore = p->use_ignore && l == p->ignore_label;
                int64_t li = (int64_t)l;
                for (int64_t k = 0; k < K; k++) {
                    double t = (k == li) ? on : off;
                    T v = ignore ? 0 : (T)(scale * (y[base + k * S] - t));
                    NN_STORE(a->req[0], dx[base + k * S], v);
                }
            });
    }
    if (a->req[1] == MXP_REQ_WRITE || a->req[1] == MXP_REQ_INPLACE)
        memset(nn_ptr(&a->in_grad[1]), 0, (size_t)mxp_tensor_numel(&a->in_grad[1]) * mxp_dtype_size(a->in_grad[1].dtype));
    return MXP_OK;
}

static int so_declare_backward(mxp_backward_deps_args *a) {
    a->need_in[0] = 0; a->need_in[1] = 1; a->need_out[0] = 1;
    return MXP_OK;
}

static int so_infer_type(mxp_infer_type_args *a) {
    int32_t dt = a->in[0] >= 0 ? a->in[0] : a->out[0];
    if (dt < 0) return MXP_EINCOMPLETE;
    a->in[0] = dt; a->out[0] = dt;
    if (a->in[1] < 0) a->in[1] = dt;
    return MXP_OK;
}

static const char *const so_aliases[] = {"Softmax", NULL};
static const mxp_inplace_pair so_inplace[] = {{0, 0}};

static const mxp_op_def so_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "SoftmaxOutput", .aliases = so_aliases,
    .doc = "Computes the gradient of cross entropy loss with respect to softmax output.",
    .params = so_schema, .n_params = NN_COUNT(so_schema), .params_size = sizeof(so_params),
    .arg_names = so_args, .infer_shape = so_infer_shape, .infer_type = so_infer_type,
    .flags = MXP_OP_LOSS, .backward_deps = MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA,
    .declare_backward = so_declare_backward,
    .forward_inplace = so_inplace, .n_forward_inplace = 1,
    .check_params = so_check_params,
};
static const mxp_op_impl so_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "SoftmaxOutput", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = so_forward, .backward = so_backward,
};

int nn_register_softmax_output(mxp_registrar *r) {
    int st = r->add_op(r, &so_def);
    return st < 0 ? st : r->add_impl(r, &so_impl);
}
