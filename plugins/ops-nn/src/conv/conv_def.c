/* conv_def.c — the Convolution op definition (MXNet 1.x): schema with
 * MXNet's names and defaults, parameter normalisation (default stride 1,
 * dilate 1, pad 0), argument lists (no_bias drops "bias") and shape
 * inference (weight (num_filter, C/num_group, k...), bias (num_filter)).
 * 1-D NCW, 2-D NCHW and 3-D NCDHW (the kernel's rank picks; data must have
 * two more dims).  The impls live in conv_gemm.c, conv_direct.c,
 * conv_pointwise.c, conv_winograd.c (2-D) and conv_nd.c (1-D, 3-D); this
 * file registers all of them. */
#include "conv.h"

static const char *const tune_choices[] = {"None", "off", "limited_workspace", "fastest", NULL};
static const char *const layout_choices[] = {"None", "NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", "NWC", NULL};

static const mxp_param_def conv_schema[] = {
    NN_P("kernel", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, conv_params, kernel, NULL, NULL, "Convolution kernel size: (w,), (h, w) or (d, h, w)."),
    NN_P("stride", MXP_PARAM_SHAPE, 0, conv_params, stride, "()", NULL, "Convolution stride: (h, w). Defaults to 1 for each dimension."),
    NN_P("dilate", MXP_PARAM_SHAPE, 0, conv_params, dilate, "()", NULL, "Convolution dilate: (h, w). Defaults to 1 for each dimension."),
    NN_P("pad", MXP_PARAM_SHAPE, 0, conv_params, pad, "()", NULL, "Zero pad for convolution: (h, w). Defaults to no padding."),
    NN_PMIN("num_filter", MXP_PARAM_INT, MXP_PARAM_REQUIRED, conv_params, num_filter, NULL, 1, "Convolution filter (channel) number."),
    NN_PMIN("num_group", MXP_PARAM_INT, 0, conv_params, num_group, "1", 1, "Number of group partitions."),
    NN_PMIN("workspace", MXP_PARAM_INT, 0, conv_params, workspace, "1024", 0, "Maximum temporary workspace allowed (MB)."),
    NN_P("no_bias", MXP_PARAM_BOOL, 0, conv_params, no_bias, "False", NULL, "Whether to disable bias parameter."),
    NN_P("cudnn_tune", MXP_PARAM_ENUM, 0, conv_params, cudnn_tune, "None", tune_choices, "Whether to pick convolution algo by running performance test (accepted, ignored on CPU)."),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, conv_params, cudnn_off, "False", NULL, "Turn off cudnn for this layer (accepted, ignored on CPU)."),
    NN_P("layout", MXP_PARAM_ENUM, 0, conv_params, layout, "None", layout_choices, "Set layout for input, output and weight: NCW, NCHW or NCDHW (channel-first) only."),
};

/* A stride/dilate/pad left empty gets `v` in each of the kernel's nd
 * dimensions (MXNet's rule); a given one must have nd elements. */
static int fill_default(mxp_param_shape *s, int nd, int64_t v, const char *what) {
    if (!s->has_value || s->ndim == 0) {
        s->has_value = 1; s->ndim = nd;
        for (int i = 0; i < nd; i++) s->dims[i] = v;
        return MXP_OK;
    }
    if (s->ndim != nd)
        return NN_ERR(MXP_EINVAL, "Convolution: %s must have %d elements like kernel, got %d", what, nd, s->ndim);
    return MXP_OK;
}

static int conv_check_params(mxp_check_params_args *a) {
    conv_params *p = a->params;
    int nd = p->kernel.has_value ? p->kernel.ndim : 0;
    if (nd < 1 || nd > 3)
        return NN_ERR(MXP_EUNSUPPORTED, "Convolution: only 1-D, 2-D and 3-D kernels are supported (kernel has %d dims)", nd);
    /* layout_choices: 1 NCW, 2 NCHW, 3 NCDHW are the channel-first layouts of rank 1..3 */
    if (p->layout != 0 && p->layout != nd)
        return NN_ERR(MXP_EUNSUPPORTED, "Convolution: layout %s not supported with a %d-D kernel (%s only)",
                      layout_choices[p->layout], nd, layout_choices[nd]);
    int st;
    if ((st = fill_default(&p->stride, nd, 1, "stride")) < 0 || (st = fill_default(&p->dilate, nd, 1, "dilate")) < 0 ||
        (st = fill_default(&p->pad, nd, 0, "pad")) < 0) return st;
    for (int i = 0; i < nd; i++) {
        if (p->kernel.dims[i] < 1 || p->stride.dims[i] < 1 || p->dilate.dims[i] < 1 || p->pad.dims[i] < 0)
            return NN_ERR(MXP_EINVAL, "Convolution: kernel, stride and dilate must be >= 1 and pad >= 0");
    }
    if (p->num_filter % p->num_group)
        return NN_ERR(MXP_EINVAL, "Convolution: num_filter %lld not divisible by num_group %lld",
                      (long long)p->num_filter, (long long)p->num_group);
    return MXP_OK;
}

static int conv_list_args(mxp_list_names_args *a) {
    const conv_params *p = a->params;
    const char *n[] = {"data", "weight", "bias"};
    a->count = p->no_bias ? 2 : 3;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", n[i]);
    return MXP_OK;
}

static int conv_infer_shape(mxp_infer_shape_args *a) {
    static const char *const layouts[] = {"", "NCW", "NCHW", "NCDHW"};
    static const char *const axes[3][3] = {{"width"}, {"height", "width"}, {"depth", "height", "width"}};
    const conv_params *p = a->params;
    int nd = p->kernel.ndim;
    mxp_shape *d = &a->in[0];
    char b1[160];
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    if (d->ndim != nd + 2)
        return NN_ERR(MXP_ESHAPE, "Convolution: a %d-D kernel needs %d-D %s data, got %s", nd, nd + 2, layouts[nd],
                      nn_shape_str(d, b1, sizeof b1));
    int64_t C = d->dims[1];
    if (C > 0 && C % p->num_group)
        return NN_ERR(MXP_ESHAPE, "Convolution: data %s has %lld channels, not divisible by num_group %lld",
                      nn_shape_str(d, b1, sizeof b1), (long long)C, (long long)p->num_group);
    int st;
    int64_t wd[5] = {p->num_filter, C / p->num_group};
    for (int i = 0; i < nd; i++) wd[2 + i] = p->kernel.dims[i];
    mxp_shape w = nn_shape(nd + 2, wd);
    if ((st = nn_shape_assign("Convolution", "weight", &a->in[1], &w)) < 0) return st;
    if (C == 0 && a->in[1].dims[1] > 0) d->dims[1] = a->in[1].dims[1] * p->num_group; /* C from weight */
    if (!p->no_bias) {
        mxp_shape b = nn_shape(1, &p->num_filter);
        if ((st = nn_shape_assign("Convolution", "bias", &a->in[2], &b)) < 0) return st;
    }
    int64_t od[5] = {d->dims[0], p->num_filter, 0, 0, 0};
    for (int i = 0; i < nd; i++) {
        int64_t in = d->dims[2 + i];
        if (in == 0) continue;
        int64_t ext = p->dilate.dims[i] * (p->kernel.dims[i] - 1) + 1;
        if (in + 2 * p->pad.dims[i] < ext)
            return NN_ERR(MXP_ESHAPE, "Convolution: kernel %s (dilated extent %lld) larger than padded data %s",
                          axes[nd - 1][i], (long long)ext, nn_shape_str(d, b1, sizeof b1));
        od[2 + i] = nn_conv_out(in, p->kernel.dims[i], p->stride.dims[i], p->pad.dims[i], p->dilate.dims[i]);
    }
    mxp_shape o = nn_shape(nd + 2, od);
    if ((st = nn_shape_assign("Convolution", "output", &a->out[0], &o)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

void conv_geom_init(conv_geom *g, const conv_params *p, const mxp_shape *d) {
    memset(g, 0, sizeof *g);
    g->N = d->dims[0]; g->C = d->dims[1]; g->H = d->dims[2]; g->W = d->dims[3];
    g->M = p->num_filter; g->G = p->num_group; g->Cg = g->C / g->G; g->Mg = g->M / g->G;
    g->kh = p->kernel.dims[0]; g->kw = p->kernel.dims[1];
    g->sh = p->stride.dims[0]; g->sw = p->stride.dims[1];
    g->ph = p->pad.dims[0]; g->pw = p->pad.dims[1];
    g->dh = p->dilate.dims[0]; g->dw = p->dilate.dims[1];
    g->Ho = nn_conv_out(g->H, g->kh, g->sh, g->ph, g->dh);
    g->Wo = nn_conv_out(g->W, g->kw, g->sw, g->pw, g->dw);
    g->P = g->Ho * g->Wo; g->K = g->Cg * g->kh * g->kw;
    g->no_bias = p->no_bias;
}

void conv_geom_from_tensor(conv_geom *g, const conv_params *p, const mxp_tensor *t) {
    mxp_shape s = nn_shape(t->ndim, t->shape);
    conv_geom_init(g, p, &s);
}

int conv_check_fwd(const mxp_forward_args *a, int32_t *dt) {
    int st;
    if ((st = nn_check_float("Convolution", a->in, a->n_in, dt)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->in, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->out, 1)) < 0) return st;
    if (a->in[0].ndim != 4) return NN_ERR(MXP_ESHAPE, "Convolution: data must be 4-D");
    return MXP_OK;
}

int conv_check_bwd(const mxp_backward_args *a, int32_t *dt) {
    int st;
    if ((st = nn_check_float("Convolution", a->out_grad, 1, dt)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->in, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->in_grad, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->out_grad, 1)) < 0) return st;
    return MXP_OK;
}

static const mxp_op_def conv_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Convolution",
    .doc = "Compute N-D convolution on (N+2)-D input (1-D NCW, 2-D NCHW, 3-D NCDHW).",
    .params = conv_schema, .n_params = NN_COUNT(conv_schema), .params_size = sizeof(conv_params),
    .list_args = conv_list_args, .infer_shape = conv_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
    .resources = MXP_RESOURCE_TEMP_SPACE,
    .check_params = conv_check_params,
};

int nn_register_conv(mxp_registrar *r) {
    int st;
    if ((st = r->add_op(r, &conv_def)) < 0) return st;
    if ((st = r->add_impl(r, &conv_gemm_impl)) < 0) return st;
    if ((st = r->add_impl(r, &conv_direct_impl)) < 0) return st;
    if ((st = r->add_impl(r, &conv_pointwise_impl)) < 0) return st;
    if ((st = r->add_impl(r, &conv_nd_impl)) < 0) return st;
    if ((st = r->add_impl(r, &conv_strip_impl)) < 0) return st;
    return r->add_impl(r, &conv_winograd_impl);
}
