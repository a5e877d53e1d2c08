/* upsampling_bilinear.c — UpSampling with sample_type='bilinear' (MXNet
 * 1.x): a depthwise Deconvolution with the weight as the second input,
 * kernel 2s - s%2, stride s, pad ceil((s-1)/2), num_group = num_filter =
 * channels, no bias, so the output is exactly (N, C, H*s, W*s).  The
 * weight is an ordinary input (mx.init.Bilinear usually fills it); nothing
 * here assumes bilinear values.  Like Deconvolution (deconv.c) it runs on
 * the gemm convolution's code (f32/f64):
 *   forward        = conv backward-data of x (as dy) with W
 *   backward data  = conv forward of dy with W
 *   backward W     = conv backward-weight with data dy and out_grad x. */
#include "upsampling_bilinear.h"
#include "conv/conv.h"

/* The convolution whose transpose this is: data (N, C, H*s, W*s) ->
 * output (N, C, H, W), depthwise. */
static void conv_of(int64_t scale, int64_t C, conv_params *c) {
    memset(c, 0, sizeof *c);
    int64_t k = nn_up_bilinear_kernel(scale), pad = scale / 2; /* = ceil((s-1)/2) for integer s */
    mxp_param_shape *sh[4] = {&c->kernel, &c->stride, &c->pad, &c->dilate};
    int64_t v[4] = {k, scale, pad, 1};
    for (int i = 0; i < 4; i++) { sh[i]->has_value = 1; sh[i]->ndim = 2; sh[i]->dims[0] = sh[i]->dims[1] = v[i]; }
    c->num_filter = C; c->num_group = C; c->no_bias = 1; c->workspace = 512;
}

uint64_t nn_up_bilinear_workspace(int64_t scale, const mxp_shape *in, int32_t dtype) {
    conv_params cp; conv_of(scale, in->dims[1], &cp);
    int64_t od[4] = {in->dims[0], in->dims[1], in->dims[2] * scale, in->dims[3] * scale};
    mxp_shape o = nn_shape(4, od);
    conv_geom g; conv_geom_init(&g, &cp, &o);
    return conv_gemm_workspace_bytes(&g, &cp, dtype);
}

static mxp_tensor no_data(const mxp_tensor *like, int32_t dtype) {
    mxp_tensor t = *like; t.data = NULL; t.byte_offset = 0; t.dtype = dtype; t.strides = NULL;
    return t;
}

static int check(const mxp_tensor *t, uint32_t n) {
    int st;
    if ((st = nn_check_float("UpSampling", t, n, NULL)) < 0) return st;
    return nn_check_contig("UpSampling", t, n);
}

int nn_up_bilinear_forward(const mxp_forward_args *a, int64_t scale) {
    int st;
    if ((st = check(a->in, 2)) < 0 || (st = check(a->out, 1)) < 0) return st;
    if (a->out[0].dtype != a->in[0].dtype) return NN_ERR(MXP_ETYPE, "UpSampling: output dtype differs from data");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int32_t dt = a->in[0].dtype;
    conv_params cp; conv_of(scale, a->in[0].shape[1], &cp);
    mxp_tensor in[2] = { no_data(&a->out[0], dt), a->in[1] };
    mxp_tensor ig[2] = { a->out[0], no_data(&a->in[1], dt) };
    int32_t req[2] = { a->req[0], MXP_REQ_NULL };
    mxp_backward_args b; memset(&b, 0, sizeof b);
    b.hdr = a->hdr; b.hdr.struct_size = sizeof b;
    b.ctx = a->ctx; b.params = &cp; b.n_in = 2; b.n_out = 1;
    b.out_grad = &a->in[0]; b.in = in; b.in_grad = ig; b.req = req;
    return conv_gemm_backward_impl(&b, 0);
}

int nn_up_bilinear_backward(const mxp_backward_args *a, int64_t scale) {
    int st;
    if ((st = check(a->in, 2)) < 0 || (st = check(a->out_grad, 1)) < 0) return st;
    if ((st = nn_check_contig("UpSampling", a->in_grad, 2)) < 0) return st;
    int32_t dt = a->out_grad[0].dtype;
    if (a->in[0].dtype != dt) return NN_ERR(MXP_ETYPE, "UpSampling: output gradient dtype differs from data");
    conv_params cp; conv_of(scale, a->in[0].shape[1], &cp);
    if (a->req[0] != MXP_REQ_NULL) { /* dx = conv(dy, W) */
        mxp_tensor in[2] = { a->out_grad[0], a->in[1] };
        int32_t req[1] = { a->req[0] };
        mxp_forward_args f; memset(&f, 0, sizeof f);
        f.hdr = a->hdr; f.hdr.struct_size = sizeof f;
        f.ctx = a->ctx; f.params = &cp; f.n_in = 2; f.n_out = 1;
        f.in = in; f.out = &a->in_grad[0]; f.req = req;
        if ((st = conv_gemm_forward_impl(&f)) < 0) return st;
    }
    if (a->req[1] != MXP_REQ_NULL) { /* dW: the convolution's weight gradient, data dy, out_grad x */
        mxp_tensor in[2] = { a->out_grad[0], a->in[1] };
        mxp_tensor ig[2] = { no_data(&a->out_grad[0], dt), a->in_grad[1] };
        int32_t req[2] = { MXP_REQ_NULL, a->req[1] };
        mxp_backward_args b; memset(&b, 0, sizeof b);
        b.hdr = a->hdr; b.hdr.struct_size = sizeof b;
        b.ctx = a->ctx; b.params = &cp; b.n_in = 2; b.n_out = 1;
        b.out_grad = &a->in[0]; b.in = in; b.in_grad = ig; b.req = req;
        if ((st = conv_gemm_backward_impl(&b, 1)) < 0) return st;
    }
    return MXP_OK;
}
