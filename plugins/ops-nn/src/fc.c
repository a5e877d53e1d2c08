/* fc.c — FullyConnected (MXNet 1.x): out = data · weightᵀ + bias.
 * Params num_hidden, no_bias, flatten.  With flatten=True data is viewed as
 * (N, prod(rest)); with flatten=False the last axis is contracted and the
 * leading axes kept.  Forward and backward are one GEMM each (f32 or f64)
 * honouring req through beta, split into blocks on ctx->parallel_for when
 * large (nn_gemm_par; OpenBLAS itself is single-threaded); small float32
 * products use the kernels of fc_kern.c (bias add fused) instead of BLAS;
 * no state, no workspace. */
#include "fc_kern.h"

typedef struct fc_params {
    int64_t num_hidden;
    int32_t no_bias;
    int32_t flatten;
} fc_params;

static const mxp_param_def fc_schema[] = {
    NN_PMIN("num_hidden", MXP_PARAM_INT, MXP_PARAM_REQUIRED, fc_params, num_hidden, NULL, 1, "Number of hidden units."),
    NN_P("no_bias", MXP_PARAM_BOOL, 0, fc_params, no_bias, "False", NULL, "Whether to disable bias."),
    NN_P("flatten", MXP_PARAM_BOOL, 0, fc_params, flatten, "True", NULL, "Whether to collapse all but the first axis of data."),
};

static int fc_list_args(mxp_list_names_args *a) {
    const fc_params *p = a->params;
    const char *n[] = {"data", "weight", "bias"};
    a->count = p->no_bias ? 2 : 3;
    for (uint32_t i = 0; i < a->count; i++) snprintf(a->names[i], MXP_NAME_MAX, "%s", n[i]);
    return MXP_OK;
}

static int fc_infer_shape(mxp_infer_shape_args *a) {
    const fc_params *p = a->params;
    mxp_shape *d = &a->in[0];
    if (d->ndim < 1) return MXP_EINCOMPLETE;
    int64_t k = 1;
    if (p->flatten) for (int i = 1; i < d->ndim; i++) k *= d->dims[i];
    else k = d->dims[d->ndim - 1];
    int64_t wd[2] = {p->num_hidden, k};
    mxp_shape w = nn_shape(2, wd);
    int st;
    if (k > 0 && (st = nn_shape_assign("FullyConnected", "weight", &a->in[1], &w)) < 0) return st;
    if (!p->no_bias) {
        mxp_shape b = nn_shape(1, &p->num_hidden);
        if ((st = nn_shape_assign("FullyConnected", "bias", &a->in[2], &b)) < 0) return st;
    }
    mxp_shape o;
    if (p->flatten) { int64_t od[2] = {d->dims[0], p->num_hidden}; o = nn_shape(2, od); }
    else { o = *d; o.dims[o.ndim - 1] = p->num_hidden; }
    if ((st = nn_shape_assign("FullyConnected", "output", &a->out[0], &o)) < 0) return st;
    if (k <= 0 || !nn_shape_known(d)) return MXP_EINCOMPLETE;
    return MXP_OK;
}

static void fc_dims(const fc_params *p, const mxp_tensor *x, int64_t *rows, int64_t *k) {
    int64_t n = mxp_tensor_numel(x);
    *k = p->flatten ? (x->ndim > 1 ? n / x->shape[0] : 1) : x->shape[x->ndim - 1];
    *rows = *k ? n / *k : 0;
}

static int fc_forward(const mxp_forward_args *a) {
    const fc_params *p = a->params;
    int32_t dt; int st;
    if ((st = nn_check_float("FullyConnected", a->in, a->n_in, &dt)) < 0) return st;
    if ((st = nn_check_contig("FullyConnected", a->in, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("FullyConnected", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t rows, k, h = p->num_hidden;
    fc_dims(p, &a->in[0], &rows, &k);
    void *y = nn_ptr(&a->out[0]);
    /* Small f32 products: our kernel, bias add fused (fc_kern.c). */
    if (dt == MXP_DTYPE_F32 &&
        nn_sgemm_small(a->ctx, 0, 1, rows, h, k, nn_ptr(&a->in[0]), k, nn_ptr(&a->in[1]), k,
                       a->req[0] == MXP_REQ_ADD, y, h, p->no_bias ? NULL : nn_ptr(&a->in[2])))
        return MXP_OK;
    nn_gemm_par(a->ctx, dt, 0, 1, rows, h, k, 1.0, nn_ptr(&a->in[0]), k, nn_ptr(&a->in[1]), k,
            a->req[0] == MXP_REQ_ADD ? 1.0 : 0.0, y, h);
    if (!p->no_bias)
        NN_TYPED(dt, T, const T *b = nn_ptr(&a->in[2]); T *o = y;
            for (int64_t r = 0; r < rows; r++) for (int64_t j = 0; j < h; j++) o[r * h + j] += b[j];);
    return MXP_OK;
}

static int fc_backward(const mxp_backward_args *a) {
    const fc_params *p = a->params;
    int32_t dt = a->out_grad[0].dtype; int st;
    if ((st = nn_check_contig("FullyConnected", a->in_grad, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("FullyConnected", a->in, a->n_in)) < 0) return st;
    if ((st = nn_check_contig("FullyConnected", a->out_grad, 1)) < 0) return st;
    int64_t rows, k, h = p->num_hidden;
    fc_dims(p, &a->in[0], &rows, &k);
    const void *dy = nn_ptr(&a->out_grad[0]);
    int f32 = dt == MXP_DTYPE_F32;
    if (a->req[0] != MXP_REQ_NULL &&  /* dx = dy · W */
        !(f32 && nn_sgemm_small(a->ctx, 0, 0, rows, k, h, dy, h, nn_ptr(&a->in[1]), k, a->req[0] == MXP_REQ_ADD,
                                nn_ptr(&a->in_grad[0]), k, NULL)))
        nn_gemm_par(a->ctx, dt, 0, 0, rows, k, h, 1.0, dy, h, nn_ptr(&a->in[1]), k,
                a->req[0] == MXP_REQ_ADD ? 1.0 : 0.0, nn_ptr(&a->in_grad[0]), k);
    if (a->req[1] != MXP_REQ_NULL &&  /* dW = dyᵀ · x */
        !(f32 && nn_sgemm_small(a->ctx, 1, 0, h, k, rows, dy, h, nn_ptr(&a->in[0]), k, a->req[1] == MXP_REQ_ADD,
                                nn_ptr(&a->in_grad[1]), k, NULL)))
        nn_gemm_par(a->ctx, dt, 1, 0, h, k, rows, 1.0, dy, h, nn_ptr(&a->in[0]), k,
                a->req[1] == MXP_REQ_ADD ? 1.0 : 0.0, nn_ptr(&a->in_grad[1]), k);
    if (!p->no_bias && a->n_in > 2 && a->req[2] != MXP_REQ_NULL)
        NN_TYPED(dt, T, const T *g = dy; T *db = nn_ptr(&a->in_grad[2]);
            if (a->req[2] != MXP_REQ_ADD) memset(db, 0, (size_t)h * sizeof(T));
            for (int64_t r = 0; r < rows; r++) for (int64_t j = 0; j < h; j++) db[j] += g[r * h + j];);
    return MXP_OK;
}

static const char *const fc_aliases[] = {"_npx_fully_connected", NULL};

static const mxp_op_def fc_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "FullyConnected", .aliases = fc_aliases,
    .doc = "Applies a linear transformation: Y = XW^T + b.",
    .params = fc_schema, .n_params = NN_COUNT(fc_schema), .params_size = sizeof(fc_params),
    .list_args = fc_list_args, .infer_shape = fc_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
};

static const mxp_op_impl fc_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "FullyConnected", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .doc = "OpenBLAS sgemm/dgemm",
    .forward = fc_forward, .backward = fc_backward,
};

int nn_register_fc(mxp_registrar *r) {
    int st = r->add_op(r, &fc_def);
    return st < 0 ? st : r->add_impl(r, &fc_impl);
}
