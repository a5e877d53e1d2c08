/* upsampling.c — UpSampling (MXNet 1.x).  sample_type=bilinear takes
 * inputs (data, weight) and runs as a depthwise Deconvolution in
 * upsampling_bilinear.c; this file has the op definition and nearest.
 * Nearest: inputs arg0..arg{n-1}
 * (num_args); every input is enlarged to the first input's size times
 * `scale` (input i by out_H / H_i) and the results concatenated along
 * channels (multi_input_mode=concat) or summed (sum, equal channels).
 * f32/f64; backward sums each output gradient block back to its source
 * pixel. */
#include "upsampling_bilinear.h"

static const char *const up_types[] = {"bilinear", "nearest", NULL};
static const char *const up_modes[] = {"concat", "sum", NULL};

typedef struct up_params {
    int64_t scale, num_filter, num_args, workspace;
    int32_t sample_type, multi_input_mode;
} up_params;

static const mxp_param_def up_schema[] = {
    NN_PMIN("scale", MXP_PARAM_INT, MXP_PARAM_REQUIRED, up_params, scale, NULL, 1, "Up sampling scale."),
    NN_P("num_filter", MXP_PARAM_INT, 0, up_params, num_filter, "0", NULL, "Input filter (bilinear only)."),
    NN_P("sample_type", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, up_params, sample_type, NULL, up_types, "Upsampling method."),
    NN_P("multi_input_mode", MXP_PARAM_ENUM, 0, up_params, multi_input_mode, "concat", up_modes, "How to handle multiple input."),
    NN_PMIN("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED, up_params, num_args, NULL, 1, "Number of inputs to be upsampled."),
    NN_P("workspace", MXP_PARAM_INT, 0, up_params, workspace, "512", NULL, "Tmp workspace for deconvolution (MB)."),
};

enum { UP_BILINEAR, UP_NEAREST };

static int up_check_params(mxp_check_params_args *a) {
    const up_params *p = a->params;
    if (p->sample_type == UP_BILINEAR && p->num_filter < 1)
        return NN_ERR(MXP_EINVAL, "UpSampling: bilinear needs num_filter = the data's channel count (got %lld)",
                      (long long)p->num_filter);
    if (p->num_args > 7) return NN_ERR(MXP_EUNSUPPORTED, "UpSampling: at most 7 inputs");
    return MXP_OK;
}

static int up_list_args(mxp_list_names_args *a) {
    const up_params *p = a->params;
    if (p->sample_type == UP_BILINEAR) { /* MXNet: always (data, weight), whatever num_args says */
        snprintf(a->names[0], MXP_NAME_MAX, "data");
        snprintf(a->names[1], MXP_NAME_MAX, "weight");
        a->count = 2;
        return MXP_OK;
    }
    if ((uint32_t)p->num_args > a->capacity) return NN_ERR(MXP_EINVAL, "UpSampling: too many inputs");
    for (int64_t i = 0; i < p->num_args; i++) snprintf(a->names[i], MXP_NAME_MAX, "arg%lld", (long long)i);
    a->count = (uint32_t)p->num_args;
    return MXP_OK;
}

static int up_infer_shape(mxp_infer_shape_args *a) {
    const up_params *p = a->params;
    char b1[160], b2[160];
    if (p->sample_type == UP_BILINEAR) { /* weight (C, 1, k, k); output (N, C, H*s, W*s) */
        const mxp_shape *d = &a->in[0];
        if (!nn_shape_known(d)) return MXP_EINCOMPLETE;
        if (d->ndim != 4) return NN_ERR(MXP_ESHAPE, "UpSampling: bilinear data must be 4-D NCHW, got %s", nn_shape_str(d, b1, sizeof b1));
        if (d->dims[1] != p->num_filter)
            return NN_ERR(MXP_ESHAPE, "UpSampling: bilinear num_filter %lld must equal the data's channels (data %s)",
                          (long long)p->num_filter, nn_shape_str(d, b1, sizeof b1));
        int64_t k = nn_up_bilinear_kernel(p->scale), wd[4] = {d->dims[1], 1, k, k};
        int64_t od[4] = {d->dims[0], d->dims[1], d->dims[2] * p->scale, d->dims[3] * p->scale};
        mxp_shape w = nn_shape(4, wd), o = nn_shape(4, od);
        int st = nn_shape_assign("UpSampling", "weight", &a->in[1], &w);
        return st < 0 ? st : nn_shape_assign("UpSampling", "output", &a->out[0], &o);
    }
    for (uint32_t i = 0; i < a->n_in; i++) if (!nn_shape_known(&a->in[i])) return MXP_EINCOMPLETE;
    const mxp_shape *s0 = &a->in[0];
    if (s0->ndim != 4) return NN_ERR(MXP_ESHAPE, "UpSampling: inputs must be 4-D NCHW, got %s", nn_shape_str(s0, b1, sizeof b1));
    int64_t oh = s0->dims[2] * p->scale, ow = s0->dims[3] * p->scale, C = 0;
    for (uint32_t i = 0; i < a->n_in; i++) {
        const mxp_shape *s = &a->in[i];
        if (s->ndim != 4 || s->dims[0] != s0->dims[0] || oh % s->dims[2] || ow % s->dims[3] ||
            oh / s->dims[2] != ow / s->dims[3] ||
            (p->multi_input_mode == 1 && s->dims[1] != s0->dims[1]))
            return NN_ERR(MXP_ESHAPE, "UpSampling: input %u shape %s incompatible with arg0 %s", i,
                          nn_shape_str(s, b1, sizeof b1), nn_shape_str(s0, b2, sizeof b2));
        C = p->multi_input_mode == 1 ? s0->dims[1] : C + s->dims[1];
    }
    int64_t od[4] = {s0->dims[0], C, oh, ow};
    mxp_shape o = nn_shape(4, od);
    return nn_shape_assign("UpSampling", "output", &a->out[0], &o);
}

static int up_run(const mxp_op_ctx *ctx, const up_params *p, uint32_t n_in, const mxp_tensor *in,
                  const mxp_tensor *out, const int32_t *req, int backward) {
    (void)ctx;
    const mxp_tensor *o = out;
    int64_t N = o->shape[0], C = o->shape[1], OH = o->shape[2], OW = o->shape[3], c0 = 0;
    int32_t dt = o->dtype;
    if (!backward && req[0] != MXP_REQ_ADD && p->multi_input_mode == 1)
        memset(nn_ptr(o), 0, (size_t)mxp_tensor_numel(o) * mxp_dtype_size(dt));
    for (uint32_t i = 0; i < n_in; i++) {
        const mxp_tensor *t = &in[i];
        int32_t rq = backward ? req[i] : (p->multi_input_mode == 1 ? MXP_REQ_ADD : req[0]);
        if (rq == MXP_REQ_NULL) { if (p->multi_input_mode == 0) c0 += t->shape[1]; continue; }
        int64_t Ci = t->shape[1], H = t->shape[2], W = t->shape[3], s = OH / H;
        int64_t cbase = p->multi_input_mode == 0 ? c0 : 0;
        NN_TYPED(dt, T, T *src = nn_ptr(t); T *dst = nn_ptr(o);
            for (int64_t n = 0; n < N; n++) for (int64_t c = 0; c < Ci; c++) {
                T *op = dst + ((n * C + cbase + c) * OH) * OW;
                T *ip = src + ((n * Ci + c) * H) * W;
                if (!backward) {
                    for (int64_t y = 0; y < OH; y++) for (int64_t x = 0; x < OW; x++) NN_STORE(rq, op[y * OW + x], ip[(y / s) * W + x / s]);
                } else {
                    for (int64_t y = 0; y < H; y++) for (int64_t x = 0; x < W; x++) {
                        double acc = 0;
                        for (int64_t u = 0; u < s; u++) for (int64_t v = 0; v < s; v++) acc += op[(y * s + u) * OW + x * s + v];
                        NN_STORE(rq, ip[y * W + x], (T)acc);
                    }
                }
            });
        c0 += Ci;
    }
    return MXP_OK;
}

static int up_forward(const mxp_forward_args *a) {
    const up_params *p = a->params;
    if (p->sample_type == UP_BILINEAR) return nn_up_bilinear_forward(a, p->scale);
    int st; int32_t dt;
    if ((st = nn_check_float("UpSampling", a->in, a->n_in, &dt)) < 0) return st;
    if ((st = nn_check_contig("UpSampling", a->in, a->n_in)) < 0 || (st = nn_check_contig("UpSampling", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    return up_run(a->ctx, a->params, a->n_in, a->in, &a->out[0], a->req, 0);
}
static int up_backward(const mxp_backward_args *a) {
    const up_params *p = a->params;
    if (p->sample_type == UP_BILINEAR) return nn_up_bilinear_backward(a, p->scale);
    int st;
    if ((st = nn_check_contig("UpSampling", a->in_grad, a->n_in)) < 0 || (st = nn_check_contig("UpSampling", a->out_grad, 1)) < 0) return st;
    return up_run(a->ctx, a->params, a->n_in, a->in_grad, &a->out_grad[0], a->req, 1);
}

/* Nearest's backward needs only the output gradient; bilinear's needs the
 * data (weight gradient) and the weight (data gradient). */
static int up_declare_backward(mxp_backward_deps_args *a) {
    const up_params *p = a->params;
    for (uint32_t i = 0; i < a->n_in; i++) a->need_in[i] = p->sample_type == UP_BILINEAR;
    return MXP_OK;
}

static int up_workspace(mxp_impl_query_args *a) {
    const up_params *p = a->params;
    a->workspace_bytes = p->sample_type == UP_BILINEAR
        ? nn_up_bilinear_workspace(p->scale, &a->in_shapes[0], a->in_dtypes[0]) : 0;
    return MXP_OK;
}

static const mxp_op_def up_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "UpSampling",
    .doc = "Upsamples the given input data (nearest; bilinear as a depthwise deconvolution with a weight input).",
    .params = up_schema, .n_params = NN_COUNT(up_schema), .params_size = sizeof(up_params),
    .list_args = up_list_args, .infer_shape = up_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .declare_backward = up_declare_backward,
    .resources = MXP_RESOURCE_TEMP_SPACE, .check_params = up_check_params,
};
static const mxp_op_impl up_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "UpSampling", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .workspace = up_workspace, .forward = up_forward, .backward = up_backward,
};

int nn_register_upsampling(mxp_registrar *r) {
    int st = r->add_op(r, &up_def);
    return st < 0 ? st : r->add_impl(r, &up_impl);
}
