/* nn_ext.c — more MXNet 1.x layers, on the float64 driver (nn_dense.h):
 *   SoftmaxActivation (mode instance | channel),
 *   L2Normalization (eps, mode instance | channel | spatial; hidden output
 *     "norm" as in MXNet),
 *   LinearRegressionOutput / LogisticRegressionOutput / MAERegressionOutput
 *     (grad_scale; loss heads: dx = grad_scale / num_output * f(out - label),
 *     num_output = label size / batch, as MXNet's regression_output-inl.h),
 *   MakeLoss (grad_scale, valid_thresh, normalization null | batch | valid),
 *   Crop (num_args 1 | 2, offset, h_w, center_crop; inputs arg0, arg1),
 *   Pad (mode constant | edge | reflect, pad_width, constant_value; 4-D and
 *     5-D data, padding on the spatial axes only, as MXNet requires).
 * Shapes follow each op's MXNet FInferShape; gradients are checked by
 * finite differences in tests/unit/ops_nn/test_nn_ext.c. */
#include <math.h>

#include "nn_dense.h"

static const char *const data_args[] = {"data", NULL};
static const char *const data_label_args[] = {"data", "label", NULL};

static int known(const mxp_shape *s) { return nn_shape_known(s); }

/* ------------------------------------------------------- SoftmaxActivation */
typedef struct sa_params { int32_t mode, pad; } sa_params;
static const char *const sa_modes[] = {"instance", "channel", NULL};
static const mxp_param_def sa_schema[] = {
    NN_P("mode", MXP_PARAM_ENUM, 0, sa_params, mode, "instance", sa_modes,
         "instance: softmax over all but the first axis; channel: over axis 1 at each position."),
};

static int same_shape(mxp_infer_shape_args *a) {
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    return nn_shape_assign("op", "output", &a->out[0], &a->in[0]);
}

/* (O, K, S): softmax over K with stride S. */
static void sa_geom(const sa_params *p, const ndarr *x, int64_t *O, int64_t *K, int64_t *S) {
    *O = x->shape[0];
    *K = p->mode == 1 && x->nd > 1 ? x->shape[1] : x->n / x->shape[0];
    *S = x->n / (*O * *K);
}

static int sa_fwd(nd_io *io) {
    const sa_params *p = io->params;
    int64_t O, K, S;
    sa_geom(p, &io->in[0], &O, &K, &S);
    const double *x = io->in[0].v;
    double *y = io->out[0].v;
    for (int64_t o = 0; o < O; o++)
        for (int64_t s = 0; s < S; s++) {
            int64_t b = o * K * S + s;
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < K; k++) mx = fmax(mx, x[b + k * S]);
            for (int64_t k = 0; k < K; k++) sum += (y[b + k * S] = exp(x[b + k * S] - mx));
            for (int64_t k = 0; k < K; k++) y[b + k * S] /= sum;
        }
    return MXP_OK;
}

static int sa_bwd(nd_io *io) {
    const sa_params *p = io->params;
    int64_t O, K, S;
    sa_geom(p, &io->out[0], &O, &K, &S);
    const double *y = io->out[0].v, *dy = io->og[0].v;
    double *dx = io->ig[0].v;
    for (int64_t o = 0; o < O; o++)
        for (int64_t s = 0; s < S; s++) {
            int64_t b = o * K * S + s;
            double dot = 0;
            for (int64_t k = 0; k < K; k++) dot += dy[b + k * S] * y[b + k * S];
            for (int64_t k = 0; k < K; k++) dx[b + k * S] = y[b + k * S] * (dy[b + k * S] - dot);
        }
    return MXP_OK;
}
static const nd_info sa_info = {"SoftmaxActivation", sa_fwd, sa_bwd};

/* --------------------------------------------------------- L2Normalization */
typedef struct l2_params { double eps; int32_t mode, pad; } l2_params;
static const char *const l2_modes[] = {"channel", "instance", "spatial", NULL};
enum { L2_CHANNEL, L2_INSTANCE, L2_SPATIAL };
static const mxp_param_def l2_schema[] = {
    NN_P("eps", MXP_PARAM_FLOAT, 0, l2_params, eps, "1e-10", NULL, "A small constant for numerical stability."),
    NN_P("mode", MXP_PARAM_ENUM, 0, l2_params, mode, "instance", l2_modes,
         "instance: over all but axis 0; channel: over axis 1; spatial: over the axes after 1."),
};
static const char *const l2_outputs[] = {"output", "norm", NULL};

/* (O, K, S): each norm covers K elements of stride S. */
static void l2_geom(const l2_params *p, const int64_t *d, int nd, int64_t *O, int64_t *K, int64_t *S) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    if (p->mode == L2_INSTANCE) *O = d[0], *K = n / d[0], *S = 1;
    else if (p->mode == L2_CHANNEL) *O = d[0], *K = d[1], *S = n / (d[0] * d[1]);
    else *O = d[0] * d[1], *K = n / (d[0] * d[1]), *S = 1;
}

static int l2_shape(mxp_infer_shape_args *a) {
    const l2_params *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    if (d->ndim < 2) return NN_ERR(MXP_ESHAPE, "L2Normalization: data needs at least 2 dims");
    if (p->mode == L2_SPATIAL && d->ndim < 3) return NN_ERR(MXP_ESHAPE, "L2Normalization: spatial mode needs 3+ dims");
    a->out[0] = *d;
    mxp_shape nrm;
    memset(&nrm, 0, sizeof nrm);
    if (p->mode == L2_INSTANCE) nrm.ndim = 1, nrm.dims[0] = d->dims[0];
    else if (p->mode == L2_CHANNEL) {
        nrm.ndim = d->ndim - 1;
        nrm.dims[0] = d->dims[0];
        for (int i = 2; i < d->ndim; i++) nrm.dims[i - 1] = d->dims[i];
    } else nrm.ndim = 2, nrm.dims[0] = d->dims[0], nrm.dims[1] = d->dims[1];
    a->out[1] = nrm;
    return MXP_OK;
}

static int l2_fwd(nd_io *io) {
    const l2_params *p = io->params;
    int64_t O, K, S;
    l2_geom(p, io->in[0].shape, io->in[0].nd, &O, &K, &S);
    const double *x = io->in[0].v;
    for (int64_t o = 0; o < O; o++)
        for (int64_t s = 0; s < S; s++) {
            int64_t b = o * K * S + s;
            double ss = 0;
            for (int64_t k = 0; k < K; k++) ss += x[b + k * S] * x[b + k * S];
            double nrm = sqrt(ss + p->eps);
            io->out[1].v[o * S + s] = nrm;
            for (int64_t k = 0; k < K; k++) io->out[0].v[b + k * S] = x[b + k * S] / nrm;
        }
    return MXP_OK;
}

/* y = x / n, n = sqrt(sum x^2 + eps): dx = (dy - y * sum(dy * y)) / n. */
static int l2_bwd(nd_io *io) {
    const l2_params *p = io->params;
    int64_t O, K, S;
    l2_geom(p, io->in[0].shape, io->in[0].nd, &O, &K, &S);
    const double *x = io->in[0].v, *dy = io->og[0].v;
    for (int64_t o = 0; o < O; o++)
        for (int64_t s = 0; s < S; s++) {
            int64_t b = o * K * S + s;
            double ss = 0, dot = 0;
            for (int64_t k = 0; k < K; k++) ss += x[b + k * S] * x[b + k * S];
            double nrm = sqrt(ss + p->eps);
            for (int64_t k = 0; k < K; k++) dot += dy[b + k * S] * x[b + k * S] / nrm;
            for (int64_t k = 0; k < K; k++) io->ig[0].v[b + k * S] = (dy[b + k * S] - x[b + k * S] / nrm * dot) / nrm;
        }
    return MXP_OK;
}
static const nd_info l2_info = {"L2Normalization", l2_fwd, l2_bwd};

/* ------------------------------------------------------- regression outputs */
typedef struct reg_params { double grad_scale; } reg_params;
static const mxp_param_def reg_schema[] = {
    NN_P("grad_scale", MXP_PARAM_FLOAT, 0, reg_params, grad_scale, "1", NULL, "Scale the gradient by a float factor"),
};
enum { REG_LINEAR, REG_LOGISTIC, REG_MAE };

/* MXNet: a label of unknown shape becomes (N,) for (N, 1) data, else the
 * data's shape; a given label needs the data's batch and element count. */
static int reg_shape(mxp_infer_shape_args *a) {
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    a->out[0] = *d;
    mxp_shape *l = &a->in[1];
    char b1[96], b2[96];
    if (l->ndim < 0) {
        *l = *d;
        if (d->ndim == 2 && d->dims[1] == 1) l->ndim = 1;
    } else if (known(l) && (l->dims[0] != d->dims[0] || nn_shape_numel(l) != nn_shape_numel(d))) {
        return NN_ERR(MXP_ESHAPE, "RegressionOutput: label %s does not fit data %s", nn_shape_str(l, b1, sizeof b1),
                      nn_shape_str(d, b2, sizeof b2));
    }
    return known(l) ? MXP_OK : MXP_EINCOMPLETE;
}

static int reg_fwd_kind(nd_io *io, int kind) {
    for (int64_t i = 0; i < io->in[0].n; i++) {
        double x = io->in[0].v[i];
        io->out[0].v[i] = kind == REG_LOGISTIC ? 1 / (1 + exp(-x)) : x;
    }
    return MXP_OK;
}
static int reg_bwd_kind(nd_io *io, int kind) {
    const reg_params *p = io->params;
    const ndarr *y = &io->out[0], *l = &io->in[1];
    double scale = p->grad_scale / (double)(l->n / l->shape[0]);
    for (int64_t i = 0; i < y->n; i++) {
        double d = y->v[i] - l->v[i];
        io->ig[0].v[i] = scale * (kind == REG_MAE ? (double)((d > 0) - (d < 0)) : d);
    }
    return MXP_OK;
}
static int lin_f(nd_io *io) { return reg_fwd_kind(io, REG_LINEAR); }
static int lin_b(nd_io *io) { return reg_bwd_kind(io, REG_LINEAR); }
static int log_f(nd_io *io) { return reg_fwd_kind(io, REG_LOGISTIC); }
static int log_b(nd_io *io) { return reg_bwd_kind(io, REG_LOGISTIC); }
static int mae_f(nd_io *io) { return reg_fwd_kind(io, REG_MAE); }
static int mae_b(nd_io *io) { return reg_bwd_kind(io, REG_MAE); }
static const nd_info lin_info = {"LinearRegressionOutput", lin_f, lin_b};
static const nd_info log_info = {"LogisticRegressionOutput", log_f, log_b};
static const nd_info mae_info = {"MAERegressionOutput", mae_f, mae_b};

static int reg_declare_backward(mxp_backward_deps_args *a) {
    a->need_in[0] = 0;
    a->need_in[1] = 1;
    a->need_out[0] = 1;
    a->need_out_grad[0] = 0;
    return MXP_OK;
}

/* ----------------------------------------------------------------- MakeLoss */
typedef struct ml_params { double grad_scale, valid_thresh; int32_t normalization, pad; } ml_params;
static const char *const ml_norms[] = {"null", "batch", "valid", NULL};
static const mxp_param_def ml_schema[] = {
    NN_P("grad_scale", MXP_PARAM_FLOAT, 0, ml_params, grad_scale, "1", NULL, "Gradient scale as a supplement to unary and binary operators"),
    NN_P("valid_thresh", MXP_PARAM_FLOAT, 0, ml_params, valid_thresh, "0", NULL, "Elements greater than valid_thresh count as valid (normalization=valid)."),
    NN_P("normalization", MXP_PARAM_ENUM, 0, ml_params, normalization, "null", ml_norms, "How to normalize the gradient: null, batch or valid."),
};
static int ml_fwd(nd_io *io) {
    memcpy(io->out[0].v, io->in[0].v, (size_t)io->in[0].n * sizeof(double));
    return MXP_OK;
}
static int ml_bwd(nd_io *io) {
    const ml_params *p = io->params;
    const ndarr *y = &io->out[0];
    double g = p->grad_scale;
    if (p->normalization == 1) g /= (double)y->shape[0];
    else if (p->normalization == 2) {
        int64_t valid = 0;
        for (int64_t i = 0; i < y->n; i++) valid += y->v[i] > p->valid_thresh;
        g /= (double)(valid > 0 ? valid : 1);
    }
    for (int64_t i = 0; i < io->ig[0].n; i++) io->ig[0].v[i] = g;
    return MXP_OK;
}
static const nd_info ml_info = {"MakeLoss", ml_fwd, ml_bwd};
static int ml_declare_backward(mxp_backward_deps_args *a) {
    a->need_in[0] = 0;
    a->need_out[0] = 1;
    a->need_out_grad[0] = 0;
    return MXP_OK;
}

/* --------------------------------------------------------------------- Crop */
typedef struct crop_params {
    int64_t num_args;
    mxp_param_shape offset, h_w;
    int32_t center_crop, pad;
} crop_params;
static const mxp_param_def crop_schema[] = {
    NN_PMIN("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED, crop_params, num_args, NULL, 1,
            "Number of inputs: 1 (crop to h_w) or 2 (crop to the second input's height and width)."),
    NN_P("offset", MXP_PARAM_SHAPE, 0, crop_params, offset, "(0,0)", NULL, "crop offset coordinate: (y, x)"),
    NN_P("h_w", MXP_PARAM_SHAPE, 0, crop_params, h_w, "(0,0)", NULL, "crop height and width: (h, w)"),
    NN_P("center_crop", MXP_PARAM_BOOL, 0, crop_params, center_crop, "False", NULL,
         "If true, crop at the center, else at offset."),
};
static int crop_check(mxp_check_params_args *a) {
    const crop_params *p = a->params;
    if (p->num_args != 1 && p->num_args != 2) return NN_ERR(MXP_EINVAL, "Crop: num_args must be 1 or 2, got %lld", (long long)p->num_args);
    if (p->offset.ndim != 2 || p->h_w.ndim != 2) return NN_ERR(MXP_EINVAL, "Crop: offset and h_w need two values");
    return MXP_OK;
}
static int crop_list_args(mxp_list_names_args *a) {
    const crop_params *p = a->params;
    a->count = (uint32_t)p->num_args;
    if (a->capacity < a->count) return MXP_EINVAL;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "arg%u", i);
    return MXP_OK;
}
/* Output (h, w) and top-left (y0, x0) for data (N, C, H, W). */
static int crop_geom(const crop_params *p, const int64_t *d, const int64_t *like, int64_t *h, int64_t *w, int64_t *y0,
                     int64_t *x0) {
    *h = p->num_args == 2 ? like[2] : p->h_w.dims[0];
    *w = p->num_args == 2 ? like[3] : p->h_w.dims[1];
    *y0 = p->center_crop ? (d[2] - *h) / 2 : p->offset.dims[0];
    *x0 = p->center_crop ? (d[3] - *w) / 2 : p->offset.dims[1];
    if (*h < 1 || *w < 1 || *y0 < 0 || *x0 < 0 || *y0 + *h > d[2] || *x0 + *w > d[3])
        return NN_ERR(MXP_ESHAPE, "Crop: a %lldx%lld window at (%lld, %lld) does not fit %lldx%lld data", (long long)*h,
                      (long long)*w, (long long)*y0, (long long)*x0, (long long)d[2], (long long)d[3]);
    return MXP_OK;
}
static int crop_shape(mxp_infer_shape_args *a) {
    const crop_params *p = a->params;
    if (!known(&a->in[0]) || (p->num_args == 2 && !known(&a->in[1]))) return MXP_EINCOMPLETE;
    if (a->in[0].ndim != 4 || (p->num_args == 2 && a->in[1].ndim != 4))
        return NN_ERR(MXP_ESHAPE, "Crop: inputs must be 4-D (N, C, H, W)");
    int64_t h, w, y0, x0;
    int rc = crop_geom(p, a->in[0].dims, p->num_args == 2 ? a->in[1].dims : NULL, &h, &w, &y0, &x0);
    if (rc) return rc;
    a->out[0] = a->in[0];
    a->out[0].dims[2] = h;
    a->out[0].dims[3] = w;
    return MXP_OK;
}
static int crop_run(nd_io *io, int back) {
    const crop_params *p = io->params;
    const ndarr *d = back ? &io->ig[0] : &io->in[0];
    const ndarr *o = back ? &io->og[0] : &io->out[0];
    int64_t h, w, y0, x0;
    int rc = crop_geom(p, d->shape, p->num_args == 2 ? (back ? io->ig[1].shape : io->in[1].shape) : NULL, &h, &w, &y0, &x0);
    if (rc) return rc;
    int64_t NC = d->shape[0] * d->shape[1], H = d->shape[2], W = d->shape[3];
    for (int64_t c = 0; c < NC; c++)
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) {
                int64_t di = (c * H + y0 + y) * W + x0 + x, oi = (c * h + y) * w + x;
                if (back) io->ig[0].v[di] += o->v[oi];
                else io->out[0].v[oi] = d->v[di];
            }
    return MXP_OK;
}
static int crop_f(nd_io *io) { return crop_run(io, 0); }
static int crop_b(nd_io *io) { return crop_run(io, 1); }
static const nd_info crop_info = {"Crop", crop_f, crop_b};

/* ---------------------------------------------------------------------- Pad */
typedef struct pad_params {
    int32_t mode, pad;
    mxp_param_shape pad_width;
    double constant_value;
} pad_params;
static const char *const pad_modes[] = {"constant", "edge", "reflect", NULL};
enum { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT };
static const mxp_param_def pad_schema[] = {
    NN_P("mode", MXP_PARAM_ENUM, 0, pad_params, mode, "constant", pad_modes, "Padding type: constant, edge or reflect."),
    NN_P("pad_width", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, pad_params, pad_width, NULL, NULL,
         "(before, after) pairs per axis, 2 * ndim values; the first four must be 0."),
    NN_P("constant_value", MXP_PARAM_FLOAT, 0, pad_params, constant_value, "0", NULL, "The value used for padding when mode is constant."),
};
static int pad_shape(mxp_infer_shape_args *a) {
    const pad_params *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    if (d->ndim != 4 && d->ndim != 5) return NN_ERR(MXP_ESHAPE, "Pad: data must be 4-D or 5-D, got %d-D", d->ndim);
    if (p->pad_width.ndim != 2 * d->ndim)
        return NN_ERR(MXP_EINVAL, "Pad: pad_width has %d values, %d-D data needs %d", p->pad_width.ndim, d->ndim, 2 * d->ndim);
    for (int i = 0; i < 4; i++)
        if (p->pad_width.dims[i]) return NN_ERR(MXP_EINVAL, "Pad: the batch and channel axes cannot be padded");
    a->out[0] = *d;
    for (int i = 2; i < d->ndim; i++) {
        int64_t lo = p->pad_width.dims[2 * i], hi = p->pad_width.dims[2 * i + 1];
        if (lo < 0 || hi < 0) return NN_ERR(MXP_EINVAL, "Pad: negative padding");
        if (p->mode == PAD_REFLECT && (lo >= d->dims[i] || hi >= d->dims[i]))
            return NN_ERR(MXP_EINVAL, "Pad: reflect padding %lld/%lld needs it smaller than the axis (%lld)",
                          (long long)lo, (long long)hi, (long long)d->dims[i]);
        a->out[0].dims[i] = d->dims[i] + lo + hi;
    }
    return MXP_OK;
}
/* Source index along an axis of size n for output position q (-1: constant). */
static int64_t pad_src(int mode, int64_t q, int64_t lo, int64_t n) {
    int64_t i = q - lo;
    if (i >= 0 && i < n) return i;
    if (mode == PAD_CONSTANT) return -1;
    if (mode == PAD_EDGE) return i < 0 ? 0 : n - 1;
    return i < 0 ? -i : 2 * (n - 1) - i; /* reflect without repeating the edge */
}
static int pad_run(nd_io *io, int back) {
    const pad_params *p = io->params;
    const ndarr *d = back ? &io->ig[0] : &io->in[0], *o = back ? &io->og[0] : &io->out[0];
    int nd = d->nd;
    int64_t oc[MXP_MAX_NDIM] = {0};
    for (int64_t k = 0; k < o->n; k++) {
        int64_t src = 0, ok = 1;
        for (int i = 0; i < nd && ok; i++) {
            int64_t s = i < 2 ? oc[i] : pad_src(p->mode, oc[i], p->pad_width.dims[2 * i], d->shape[i]);
            if (s < 0) ok = 0;
            src = src * d->shape[i] + s;
        }
        if (back) { if (ok) io->ig[0].v[src] += o->v[k]; }
        else io->out[0].v[k] = ok ? d->v[src] : p->constant_value;
        for (int i = nd - 1; i >= 0 && ++oc[i] == o->shape[i]; i--) oc[i] = 0;
    }
    return MXP_OK;
}
static int pad_f(nd_io *io) { return pad_run(io, 0); }
static int pad_b(nd_io *io) { return pad_run(io, 1); }
static const nd_info pad_info = {"Pad", pad_f, pad_b};

/* ------------------------------------------------------------- registration */
static const char *const pad_aliases[] = {"pad", NULL};

#define NDEF(NAME, ALIASES, DOC, SCHEMA, PT, ARGS, SHAPE) \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .aliases = ALIASES, .doc = DOC, .params = SCHEMA, \
      .n_params = NN_COUNT(SCHEMA), .params_size = PT, .arg_names = ARGS, .infer_shape = SHAPE, \
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA }
#define REGDEF(NAME, DOC) \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = reg_schema, \
      .n_params = NN_COUNT(reg_schema), .params_size = sizeof(reg_params), .arg_names = data_label_args, \
      .infer_shape = reg_shape, .flags = MXP_OP_LOSS, .backward_deps = MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA, \
      .declare_backward = reg_declare_backward }

static const mxp_op_def defs[] = {
    NDEF("SoftmaxActivation", NULL, "Applies softmax activation to input (instance: per example; channel: per position).",
         sa_schema, sizeof(sa_params), data_args, same_shape),
    { .hdr = MXP_HEADER(mxp_op_def), .name = "L2Normalization",
      .doc = "Normalize the input array using the L2 norm.", .params = l2_schema, .n_params = NN_COUNT(l2_schema),
      .params_size = sizeof(l2_params), .arg_names = data_args, .output_names = l2_outputs, .infer_shape = l2_shape,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .n_visible_outputs = 1 },
    REGDEF("LinearRegressionOutput", "Computes and optimizes for squared loss during backward propagation."),
    REGDEF("LogisticRegressionOutput", "Applies a logistic function to the input; logistic loss gradient in backward."),
    REGDEF("MAERegressionOutput", "Computes mean absolute error of the input; its gradient in backward."),
    { .hdr = MXP_HEADER(mxp_op_def), .name = "MakeLoss",
      .doc = "Makes its input a loss head: backward sends grad_scale (normalized) as the gradient.",
      .params = ml_schema, .n_params = NN_COUNT(ml_schema), .params_size = sizeof(ml_params), .arg_names = data_args,
      .infer_shape = same_shape, .flags = MXP_OP_LOSS, .backward_deps = MXP_BWD_OUT_DATA,
      .declare_backward = ml_declare_backward },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "Crop",
      .doc = "Crops the 2-D spatial window of (N, C, H, W) data, to h_w or to a second input's size.",
      .params = crop_schema, .n_params = NN_COUNT(crop_schema), .params_size = sizeof(crop_params),
      .list_args = crop_list_args, .infer_shape = crop_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
      .check_params = crop_check },
    NDEF("Pad", pad_aliases, "Pads an input array with a constant or edge values of the array.", pad_schema,
         sizeof(pad_params), data_args, pad_shape),
};
static const mxp_op_impl impls[] = {
    ND_IMPL("SoftmaxActivation", sa_info), ND_IMPL("L2Normalization", l2_info),
    ND_IMPL("LinearRegressionOutput", lin_info), ND_IMPL("LogisticRegressionOutput", log_info),
    ND_IMPL("MAERegressionOutput", mae_info), ND_IMPL("MakeLoss", ml_info),
    ND_IMPL("Crop", crop_info), ND_IMPL("Pad", pad_info),
};

int nn_register_ext(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int st = r->add_op(r, &defs[i]);
        if (st < 0 || (st = r->add_impl(r, &impls[i])) < 0) return st;
    }
    return MXP_OK;
}
