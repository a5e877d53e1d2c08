/* deconv.c — Deconvolution (MXNet 1.x; 2-D NCHW, and 1-D NCW / 3-D NCDHW):
 * the transpose of Convolution, computed with the gemm convolution's code
 * for 2-D and conv_nd.c's for 1-D/3-D (f32/f64):
 *   forward        = conv backward-data  of x with weight W
 *   backward data  = conv forward        of dy with weight W
 *   backward W     = conv backward-weight with (data dy, out_grad x)
 * Weight (C_in, num_filter/num_group, k...); bias (num_filter), off by
 * default (no_bias=True as in MXNet).  Output size
 *   s*(in-1) + d*(k-1) + 1 - 2p + adj, or target_shape (then pad/adj are
 * derived as MXNet does).  adj must be < stride. */
#include "conv/conv.h"

typedef struct dc_params {
    mxp_param_shape kernel, stride, dilate, pad, adj, target_shape;
    int64_t num_filter, num_group, workspace;
    int32_t no_bias, cudnn_tune, cudnn_off, layout;
} dc_params;

static const char *const tune_choices[] = {"None", "off", "limited_workspace", "fastest", NULL};
static const char *const layout_choices[] = {"None", "NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", "NWC", NULL};

static const mxp_param_def dc_schema[] = {
    NN_P("kernel", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, dc_params, kernel, NULL, NULL, "Deconvolution kernel size: (w,), (h, w) or (d, h, w)."),
    NN_P("stride", MXP_PARAM_SHAPE, 0, dc_params, stride, "()", NULL, "The stride used for the corresponding convolution."),
    NN_P("dilate", MXP_PARAM_SHAPE, 0, dc_params, dilate, "()", NULL, "Dilation factor for each dimension."),
    NN_P("pad", MXP_PARAM_SHAPE, 0, dc_params, pad, "()", NULL, "The amount of implicit zero padding."),
    NN_P("adj", MXP_PARAM_SHAPE, 0, dc_params, adj, "()", NULL, "Adjustment for output shape."),
    NN_P("target_shape", MXP_PARAM_SHAPE, 0, dc_params, target_shape, "()", NULL, "Shape of the output tensor: one size per kernel dimension."),
    NN_PMIN("num_filter", MXP_PARAM_INT, MXP_PARAM_REQUIRED, dc_params, num_filter, NULL, 1, "Number of output filters."),
    NN_PMIN("num_group", MXP_PARAM_INT, 0, dc_params, num_group, "1", 1, "Number of groups partition."),
    NN_PMIN("workspace", MXP_PARAM_INT, 0, dc_params, workspace, "512", 0, "Maximum temporary workspace allowed (MB)."),
    NN_P("no_bias", MXP_PARAM_BOOL, 0, dc_params, no_bias, "True", NULL, "Whether to disable bias parameter."),
    NN_P("cudnn_tune", MXP_PARAM_ENUM, 0, dc_params, cudnn_tune, "None", tune_choices, "Whether to pick convolution algorithm by running performance test (ignored on CPU)."),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, dc_params, cudnn_off, "False", NULL, "Turn off cudnn (ignored on CPU)."),
    NN_P("layout", MXP_PARAM_ENUM, 0, dc_params, layout, "None", layout_choices, "Set layout; channel-first only (NCW, NCHW, NCDHW)."),
};

/* An empty stride/dilate/pad/adj gets v in each of the kernel's nd dims. */
static int fill_nd(mxp_param_shape *s, int nd, int64_t v, const char *what) {
    if (!s->has_value || s->ndim == 0) {
        s->has_value = 1; s->ndim = nd;
        for (int i = 0; i < nd; i++) s->dims[i] = v;
        return MXP_OK;
    }
    if (s->ndim != nd) return NN_ERR(MXP_EINVAL, "Deconvolution: %s must have %d elements like kernel, got %d", what, nd, s->ndim);
    return MXP_OK;
}

static int dc_check_params(mxp_check_params_args *a) {
    dc_params *p = a->params;
    int st;
    int nd = p->kernel.has_value ? p->kernel.ndim : 0;
    if (nd < 1 || nd > 3)
        return NN_ERR(MXP_EUNSUPPORTED, "Deconvolution: only 1-D, 2-D and 3-D kernels are supported (kernel has %d dims)", nd);
    /* layout_choices 1..3: NCW, NCHW, NCDHW, the channel-first layout of each rank */
    if (p->layout != 0 && p->layout != nd)
        return NN_ERR(MXP_EUNSUPPORTED, "Deconvolution: layout %s does not fit a %d-D kernel (%s only)",
                      layout_choices[p->layout], nd, layout_choices[nd]);
    if ((st = fill_nd(&p->stride, nd, 1, "stride")) < 0 || (st = fill_nd(&p->dilate, nd, 1, "dilate")) < 0 ||
        (st = fill_nd(&p->pad, nd, 0, "pad")) < 0 || (st = fill_nd(&p->adj, nd, 0, "adj")) < 0) return st;
    if (p->target_shape.has_value && p->target_shape.ndim != 0 && p->target_shape.ndim != nd)
        return NN_ERR(MXP_EINVAL, "Deconvolution: target_shape must have %d elements like kernel", nd);
    for (int i = 0; i < nd; i++) {
        if (p->kernel.dims[i] < 1 || p->stride.dims[i] < 1 || p->dilate.dims[i] < 1 || p->pad.dims[i] < 0 || p->adj.dims[i] < 0)
            return NN_ERR(MXP_EINVAL, "Deconvolution: kernel/stride/dilate >= 1, pad/adj >= 0");
        if (p->adj.dims[i] >= p->stride.dims[i])
            return NN_ERR(MXP_EINVAL, "Deconvolution: adj %lld must be smaller than stride %lld",
                          (long long)p->adj.dims[i], (long long)p->stride.dims[i]);
    }
    if (p->num_filter % p->num_group) return NN_ERR(MXP_EINVAL, "Deconvolution: num_filter not divisible by num_group");
    return MXP_OK;
}

/* pad/adj/out for spatial dim i of input size in */
static void dc_dim(const dc_params *p, int i, int64_t in, int64_t *pad, int64_t *out) {
    int64_t k = p->dilate.dims[i] * (p->kernel.dims[i] - 1) + 1, s = p->stride.dims[i];
    if (p->target_shape.has_value && p->target_shape.ndim == p->kernel.ndim && p->target_shape.dims[i] > 0) {
        int64_t total = s * (in - 1) + k - p->target_shape.dims[i];
        if (total < 0) total = 0;
        *pad = (total + 1) / 2;
        *out = s * (in - 1) + k - 2 * *pad + total % 2;
    } else {
        *pad = p->pad.dims[i];
        *out = s * (in - 1) + k - 2 * *pad + p->adj.dims[i];
    }
}

static int dc_list_args(mxp_list_names_args *a) {
    const dc_params *p = a->params;
    const char *n[] = {"data", "weight", "bias"};
    a->count = p->no_bias ? 2 : 3;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", n[i]);
    return MXP_OK;
}

static int dc_infer_shape(mxp_infer_shape_args *a) {
    const dc_params *p = a->params;
    mxp_shape *d = &a->in[0];
    char b1[160];
    int st;
    int nd = p->kernel.ndim;
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    if (d->ndim != nd + 2)
        return NN_ERR(MXP_ESHAPE, "Deconvolution: a %d-D kernel needs %d-D data, got %s", nd, nd + 2, nn_shape_str(d, b1, sizeof b1));
    if (d->dims[1] > 0 && d->dims[1] % p->num_group)
        return NN_ERR(MXP_ESHAPE, "Deconvolution: data %s channels not divisible by num_group", nn_shape_str(d, b1, sizeof b1));
    int64_t wd[5] = {d->dims[1], p->num_filter / p->num_group};
    for (int i = 0; i < nd; i++) wd[2 + i] = p->kernel.dims[i];
    mxp_shape w = nn_shape(nd + 2, wd);
    if ((st = nn_shape_assign("Deconvolution", "weight", &a->in[1], &w)) < 0) return st;
    if (!p->no_bias) {
        mxp_shape b = nn_shape(1, &p->num_filter);
        if ((st = nn_shape_assign("Deconvolution", "bias", &a->in[2], &b)) < 0) return st;
    }
    int64_t od[5] = {d->dims[0], p->num_filter, 0, 0, 0}, pad;
    for (int i = 0; i < nd; i++) if (d->dims[2 + i] > 0) {
        dc_dim(p, i, d->dims[2 + i], &pad, &od[2 + i]);
        if (od[2 + i] < 1) return NN_ERR(MXP_ESHAPE, "Deconvolution: empty output for data %s", nn_shape_str(d, b1, sizeof b1));
    }
    mxp_shape o = nn_shape(nd + 2, od);
    if ((st = nn_shape_assign("Deconvolution", "output", &a->out[0], &o)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

/* The equivalent convolution's params (data = deconv output). */
static void conv_of(const dc_params *p, const int64_t *in_shape, conv_params *c) {
    memset(c, 0, sizeof *c);
    c->kernel = p->kernel; c->stride = p->stride; c->dilate = p->dilate; c->pad = p->pad;
    int64_t out;
    for (int i = 0; i < p->kernel.ndim; i++) dc_dim(p, i, in_shape[2 + i], &c->pad.dims[i], &out);
    c->num_filter = in_shape[1]; c->num_group = p->num_group; c->workspace = p->workspace; c->no_bias = 1;
}

static mxp_tensor view(const mxp_tensor *like, void *data, int32_t dtype) {
    mxp_tensor t = *like; t.data = data; t.byte_offset = 0; t.dtype = dtype; t.strides = NULL;
    return t;
}

typedef struct dbj { int32_t dt, req; int64_t N, M, P; const void *dy; void *db; const void *b; void *y; } dbj;

static int dc_forward(const mxp_forward_args *a) {
    const dc_params *p = a->params; int st; int32_t dt;
    if ((st = nn_check_float("Deconvolution", a->in, a->n_in, &dt)) < 0) return st;
    if ((st = nn_check_contig("Deconvolution", a->in, a->n_in)) < 0 || (st = nn_check_contig("Deconvolution", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_params cp; conv_of(p, a->in[0].shape, &cp);
    mxp_tensor in[2] = { view(&a->out[0], NULL, dt), a->in[1] };
    mxp_tensor ig[2] = { a->out[0], view(&a->in[1], NULL, dt) };
    int32_t req[2] = { a->req[0], MXP_REQ_NULL };
    mxp_backward_args b; memset(&b, 0, sizeof b);
    b.hdr = a->hdr; b.hdr.struct_size = sizeof b;
    b.ctx = a->ctx; b.params = &cp; b.n_in = 2; b.n_out = 1;
    b.out_grad = &a->in[0]; b.in = in; b.in_grad = ig; b.req = req;
    if ((st = p->kernel.ndim == 2 ? conv_gemm_backward_impl(&b, 0) : conv_nd_backward_impl(&b)) < 0) return st;
    if (!p->no_bias) {
        const int64_t *s = a->out[0].shape;
        int64_t P = 1;
        for (int i = 2; i < a->out[0].ndim; i++) P *= s[i];
        NN_TYPED(dt, T, const T *bias = nn_ptr(&a->in[2]); T *y = nn_ptr(&a->out[0]);
            for (int64_t n = 0; n < s[0]; n++) for (int64_t m = 0; m < s[1]; m++) {
                T *yy = y + (n * s[1] + m) * P;
                for (int64_t q = 0; q < P; q++) yy[q] += bias[m];
            });
    }
    return MXP_OK;
}

static int dc_backward(const mxp_backward_args *a) {
    const dc_params *p = a->params; int st;
    if ((st = nn_check_contig("Deconvolution", a->in, a->n_in)) < 0 || (st = nn_check_contig("Deconvolution", a->in_grad, a->n_in)) < 0 ||
        (st = nn_check_contig("Deconvolution", a->out_grad, 1)) < 0) return st;
    int32_t dt = a->out_grad[0].dtype;
    conv_params cp; conv_of(p, a->in[0].shape, &cp);
    if (a->req[0] != MXP_REQ_NULL) { /* dx = conv(dy, W) */
        mxp_tensor in[2] = { a->out_grad[0], a->in[1] };
        int32_t req[1] = { a->req[0] };
        mxp_forward_args f; memset(&f, 0, sizeof f);
        f.hdr = a->hdr; f.hdr.struct_size = sizeof f;
        f.ctx = a->ctx; f.params = &cp; f.n_in = 2; f.n_out = 1;
        f.in = in; f.out = &a->in_grad[0]; f.req = req;
        if ((st = p->kernel.ndim == 2 ? conv_gemm_forward_impl(&f) : conv_nd_forward_impl(&f)) < 0) return st;
    }
    if (a->req[1] != MXP_REQ_NULL) { /* dW: conv weight grad with data = dy, out_grad = x */
        mxp_tensor in[2] = { a->out_grad[0], a->in[1] };
        mxp_tensor ig[2] = { view(&a->out_grad[0], NULL, dt), a->in_grad[1] };
        int32_t req[2] = { MXP_REQ_NULL, a->req[1] };
        mxp_backward_args b; memset(&b, 0, sizeof b);
        b.hdr = a->hdr; b.hdr.struct_size = sizeof b;
        b.ctx = a->ctx; b.params = &cp; b.n_in = 2; b.n_out = 1;
        b.out_grad = &a->in[0]; b.in = in; b.in_grad = ig; b.req = req;
        if ((st = p->kernel.ndim == 2 ? conv_gemm_backward_impl(&b, 1) : conv_nd_backward_impl(&b)) < 0) return st;
    }
    if (!p->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL) {
        const int64_t *s = a->out_grad[0].shape;
        int64_t P = 1;
        for (int i = 2; i < a->out_grad[0].ndim; i++) P *= s[i];
        NN_TYPED(dt, T, const T *dy = nn_ptr(&a->out_grad[0]); T *db = nn_ptr(&a->in_grad[2]);
            for (int64_t m = 0; m < s[1]; m++) {
                double acc = 0;
                for (int64_t n = 0; n < s[0]; n++) { const T *d = dy + (n * s[1] + m) * P; for (int64_t q = 0; q < P; q++) acc += d[q]; }
                NN_STORE(a->req[2], db[m], (T)acc);
            });
    }
    return MXP_OK;
}

static int dc_workspace(mxp_impl_query_args *a) {
    const dc_params *p = a->params;
    const mxp_shape *d = &a->in_shapes[0];
    a->workspace_bytes = 0;
    if (p->kernel.ndim != 2) return MXP_OK; /* conv_nd.c takes its scratch from the host pool */
    conv_params cp; conv_of(p, d->dims, &cp);
    conv_geom g; conv_geom_init(&g, &cp, &a->out_shapes[0]);
    a->workspace_bytes = conv_gemm_workspace_bytes(&g, &cp, a->in_dtypes[0]);
    return MXP_OK;
}

static const mxp_op_def dc_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Deconvolution",
    .doc = "Computes 1-D, 2-D or 3-D transposed convolution (aka fractionally strided convolution).",
    .params = dc_schema, .n_params = NN_COUNT(dc_schema), .params_size = sizeof(dc_params),
    .list_args = dc_list_args, .infer_shape = dc_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
    .resources = MXP_RESOURCE_TEMP_SPACE, .check_params = dc_check_params,
};
static const mxp_op_impl dc_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Deconvolution", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .doc = "via the gemm (2-D) or nd (1-D/3-D) convolution: col2im / im2col + OpenBLAS",
    .workspace = dc_workspace, .forward = dc_forward, .backward = dc_backward,
};

int nn_register_deconv(mxp_registrar *r) {
    int st = r->add_op(r, &dc_def);
    return st < 0 ? st : r->add_impl(r, &dc_impl);
}
