/* embedding.c — Embedding (MXNet 1.x): out[..., :] = weight[clip(data[...])]
 * with params input_dim, output_dim, dtype (weight/output dtype, float32 or
 * float64), sparse_grad (accepted; the gradient is dense).  Indices may be
 * float32/float64/int32/int64 and are clipped to [0, input_dim-1] like
 * MXNet.  Backward scatter-adds dy rows into the weight gradient; data gets
 * no gradient (written as zeros when requested). */
#include "nn_common.h"

typedef struct emb_params { int64_t input_dim, output_dim; int32_t dtype, sparse_grad; } emb_params;

static const mxp_param_def emb_schema[] = {
    NN_PMIN("input_dim", MXP_PARAM_INT, MXP_PARAM_REQUIRED, emb_params, input_dim, NULL, 1, "Vocabulary size of the input indices."),
    NN_PMIN("output_dim", MXP_PARAM_INT, MXP_PARAM_REQUIRED, emb_params, output_dim, NULL, 1, "Dimension of the embedding vectors."),
    NN_P("dtype", MXP_PARAM_DTYPE, 0, emb_params, dtype, "float32", NULL, "Data type of weight."),
    NN_P("sparse_grad", MXP_PARAM_BOOL, 0, emb_params, sparse_grad, "False", NULL, "Compute row_sparse gradient (dense here)."),
};
static const char *const emb_args[] = {"data", "weight", NULL};

static int emb_infer_shape(mxp_infer_shape_args *a) {
    const emb_params *p = a->params;
    mxp_shape *d = &a->in[0];
    int st;
    int64_t wd[2] = {p->input_dim, p->output_dim};
    mxp_shape w = nn_shape(2, wd);
    if ((st = nn_shape_assign("Embedding", "weight", &a->in[1], &w)) < 0) return st;
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    if (d->ndim + 1 > MXP_MAX_NDIM) return NN_ERR(MXP_ESHAPE, "Embedding: data has too many dimensions");
    mxp_shape o = *d; o.ndim = d->ndim + 1; o.dims[d->ndim] = p->output_dim;
    if ((st = nn_shape_assign("Embedding", "output", &a->out[0], &o)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

static int emb_infer_type(mxp_infer_type_args *a) {
    const emb_params *p = a->params;
    if (a->in[1] >= 0 && a->in[1] != p->dtype) return NN_ERR(MXP_ETYPE, "Embedding: weight dtype %d, dtype param %d", a->in[1], p->dtype);
    a->in[1] = p->dtype; a->out[0] = p->dtype;
    if (a->in[0] < 0) a->in[0] = MXP_DTYPE_F32;
    return MXP_OK;
}

static int64_t index_at(const mxp_tensor *t, int64_t i, int64_t hi) {
    const void *p = nn_ptr(t);
    double v;
    switch (t->dtype) {
    case MXP_DTYPE_F32: v = ((const float *)p)[i]; break;
    case MXP_DTYPE_F64: v = ((const double *)p)[i]; break;
    case MXP_DTYPE_I32: v = ((const int32_t *)p)[i]; break;
    default:            v = (double)((const int64_t *)p)[i]; break;
    }
    int64_t k = (int64_t)v;
    return k < 0 ? 0 : k > hi ? hi : k;
}

static int check_idx(const mxp_tensor *t) {
    int32_t d = t->dtype;
    if (d != MXP_DTYPE_F32 && d != MXP_DTYPE_F64 && d != MXP_DTYPE_I32 && d != MXP_DTYPE_I64)
        return NN_ERR(MXP_ETYPE, "Embedding: index dtype %d not supported", d);
    return MXP_OK;
}

static int emb_forward(const mxp_forward_args *a) {
    const emb_params *p = a->params; int st; int32_t dt;
    if ((st = check_idx(&a->in[0])) < 0 || (st = nn_check_float("Embedding", &a->in[1], 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("Embedding", a->in, 2)) < 0 || (st = nn_check_contig("Embedding", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t n = mxp_tensor_numel(&a->in[0]), D = p->output_dim;
    NN_TYPED(dt, T, const T *w = nn_ptr(&a->in[1]); T *y = nn_ptr(&a->out[0]);
        for (int64_t i = 0; i < n; i++) {
            const T *row = w + index_at(&a->in[0], i, p->input_dim - 1) * D;
            for (int64_t j = 0; j < D; j++) NN_STORE(a->req[0], y[i * D + j], row[j]);
        });
    return MXP_OK;
}

static int emb_backward(const mxp_backward_args *a) {
    const emb_params *p = a->params; int st;
    if ((st = check_idx(&a->in[0])) < 0) return st;
    if ((st = nn_check_contig("Embedding", a->in, 1)) < 0 || (st = nn_check_contig("Embedding", a->in_grad, 2)) < 0 ||
        (st = nn_check_contig("Embedding", a->out_grad, 1)) < 0) return st;
    int64_t n = mxp_tensor_numel(&a->in[0]), D = p->output_dim;
    int32_t dt = a->out_grad[0].dtype;
    if (a->req[0] == MXP_REQ_WRITE || a->req[0] == MXP_REQ_INPLACE)
        memset(nn_ptr(&a->in_grad[0]), 0, (size_t)n * mxp_dtype_size(a->in_grad[0].dtype));
    if (a->req[1] == MXP_REQ_NULL) return MXP_OK;
    NN_TYPED(dt, T, const T *dy = nn_ptr(&a->out_grad[0]); T *dw = nn_ptr(&a->in_grad[1]);
        if (a->req[1] != MXP_REQ_ADD) memset(dw, 0, (size_t)(p->input_dim * D) * sizeof(T));
        for (int64_t i = 0; i < n; i++) {
            T *row = dw + index_at(&a->in[0], i, p->input_dim - 1) * D;
            for (int64_t j = 0; j < D; j++) row[j] += dy[i * D + j];
        });
    return MXP_OK;
}

static const mxp_op_def emb_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Embedding", .doc = "Maps integer indices to vector representations (embeddings).",
    .params = emb_schema, .n_params = NN_COUNT(emb_schema), .params_size = sizeof(emb_params),
    .arg_names = emb_args, .infer_shape = emb_infer_shape, .infer_type = emb_infer_type,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
};
static const mxp_op_impl emb_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Embedding", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = emb_forward, .backward = emb_backward,
};

int nn_register_embedding(mxp_registrar *r) {
    int st = r->add_op(r, &emb_def);
    return st < 0 ? st : r->add_impl(r, &emb_impl);
}
