/* rnn_param_concat.c — MXNet's _rnn_param_concat: the Concat that Gluon's
 * fused RNN layers (gluon/rnn/rnn_layer.py) put in front of the RNN op to
 * join the per-layer weights, each reshaped to (-1,), into the packed
 * `parameters` vector.  Params num_args and dim (ConcatParam; default dim
 * 1 as Concat's, Gluon passes 0); inputs arg0..argN-1.
 *
 * What differs from Concat is shape inference (MXNet's RNNParamConcatShape
 * in nn/concat.cc): when the output's length along `dim` is known (the RNN
 * op infers it from the data shape) and one or two inputs have an unknown
 * length there, they get the remainder (split evenly between two), so a
 * layer whose input size was deferred still infers.
 * Forward copies each input's slab into place and backward copies the
 * slabs of the output gradient back (req honoured); any dtype, contiguous
 * tensors only. */
#include "nn_common.h"

typedef struct rpc_params { int64_t num_args, dim; } rpc_params;

static const mxp_param_def rpc_schema[] = {
    NN_PMIN("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED, rpc_params, num_args, NULL, 1, "Number of inputs to be concated."),
    NN_P("dim", MXP_PARAM_INT, 0, rpc_params, dim, "1", NULL, "the dimension to be concated."),
};

static int rpc_list_args(mxp_list_names_args *a) {
    const rpc_params *p = a->params;
    if (p->num_args > a->capacity)
        return NN_ERR(MXP_EINVAL, "_rnn_param_concat: num_args %lld too large", (long long)p->num_args);
    for (int64_t i = 0; i < p->num_args; i++) snprintf(a->names[i], MXP_NAME_MAX, "arg%lld", (long long)i);
    a->count = (uint32_t)p->num_args;
    return MXP_OK;
}

static int rpc_axis(const rpc_params *p, int ndim, int64_t *axis) {
    int64_t ax = p->dim < 0 ? p->dim + ndim : p->dim;
    if (ax < 0 || ax >= ndim)
        return NN_ERR(MXP_EINVAL, "_rnn_param_concat: dim %lld invalid for rank %d", (long long)p->dim, ndim);
    *axis = ax;
    return MXP_OK;
}

static int rpc_infer_shape(mxp_infer_shape_args *a) {
    const rpc_params *p = a->params;
    char b1[96];
    if ((int64_t)a->n_in != p->num_args)
        return NN_ERR(MXP_EINVAL, "_rnn_param_concat: %u inputs, num_args %lld", a->n_in, (long long)p->num_args);
    /* The shape every input and the output share, the axis left unknown. */
    mxp_shape common;
    memset(&common, 0, sizeof common);
    common.ndim = -1;
    int64_t axis = -1, size = 0;
    int n_unknown = 0, unknown[2] = {0, 0}, st; /* more than 2 unknown: wait for more shapes */
    for (uint32_t i = 0; i <= a->n_in; i++) {
        const mxp_shape *s = i < a->n_in ? &a->in[i] : &a->out[0];
        if (s->ndim <= 0) {
            if (i < a->n_in) { /* rank unknown: its length too */
                if (n_unknown < 2) unknown[n_unknown] = (int)i;
                n_unknown++;
            }
            continue;
        }
        if ((st = rpc_axis(p, s->ndim, &axis)) < 0) return st;
        mxp_shape t = *s;
        if (i < a->n_in) {
            if (t.dims[axis] <= 0) {
                if (n_unknown < 2) unknown[n_unknown] = (int)i;
                n_unknown++;
            } else size += t.dims[axis];
        }
        t.dims[axis] = 0;
        if (common.ndim < 0) common = t;
        else if ((st = nn_shape_assign("_rnn_param_concat", i < a->n_in ? "input" : "output", &common, &t)) < 0)
            return st;
    }
    if (common.ndim < 0) return MXP_EINCOMPLETE;
    for (uint32_t i = 0; i < a->n_in; i++) {
        mxp_shape t = common;
        t.dims[axis] = a->in[i].ndim > 0 ? a->in[i].dims[axis] : 0;
        if ((st = nn_shape_assign("_rnn_param_concat", "input", &a->in[i], &t)) < 0) return st;
    }
    mxp_shape o = common;
    o.dims[axis] = n_unknown ? 0 : size;
    if ((st = nn_shape_assign("_rnn_param_concat", "output", &a->out[0], &o)) < 0) return st;
    if (n_unknown && n_unknown <= 2 && a->out[0].dims[axis] > 0) {
        int64_t rest = a->out[0].dims[axis] - size;
        if (rest <= 0 || rest % n_unknown)
            return NN_ERR(MXP_ESHAPE, "_rnn_param_concat: output %s leaves %lld for %d unknown inputs",
                          nn_shape_str(&a->out[0], b1, sizeof b1), (long long)rest, n_unknown);
        for (int k = 0; k < n_unknown; k++) a->in[unknown[k]].dims[axis] = rest / n_unknown;
    }
    for (uint32_t i = 0; i < a->n_in; i++) if (!nn_shape_known(&a->in[i])) return MXP_EINCOMPLETE;
    return nn_shape_known(&a->out[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

/* Copies between the joined array and input i's slab: to_joined 1 in
 * forward, 0 in backward; req applies to the destination. */
static int rpc_copy(const mxp_tensor *joined, const mxp_tensor *parts, uint32_t n, int64_t axis, int to_joined,
                    const int32_t *req) {
    uint32_t es = mxp_dtype_size(joined->dtype);
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; d++) outer *= joined->shape[d];
    for (int d = (int)axis + 1; d < joined->ndim; d++) inner *= joined->shape[d];
    int64_t jrow = joined->shape[axis] * inner, off = 0;
    char *jp = nn_ptr(joined);
    for (uint32_t i = 0; i < n; i++) {
        int64_t len = parts[i].shape[axis] * inner;
        char *pp = nn_ptr(&parts[i]);
        int32_t r = req[to_joined ? 0 : i];
        if (pp && r != MXP_REQ_NULL) {
            if (r == MXP_REQ_ADD && joined->dtype != MXP_DTYPE_F32 && joined->dtype != MXP_DTYPE_F64)
                return NN_ERR(MXP_EUNSUPPORTED, "_rnn_param_concat: req add needs float32/float64");
            for (int64_t o = 0; o < outer; o++) {
                char *src = to_joined ? pp + (uint64_t)(o * len) * es : jp + (uint64_t)(o * jrow + off) * es;
                char *dst = to_joined ? jp + (uint64_t)(o * jrow + off) * es : pp + (uint64_t)(o * len) * es;
                if (r != MXP_REQ_ADD) memmove(dst, src, (size_t)len * es);
                else if (joined->dtype == MXP_DTYPE_F32)
                    for (int64_t k = 0; k < len; k++) ((float *)dst)[k] += ((const float *)src)[k];
                else for (int64_t k = 0; k < len; k++) ((double *)dst)[k] += ((const double *)src)[k];
            }
        }
        off += len;
    }
    return MXP_OK;
}

static int rpc_forward(const mxp_forward_args *a) {
    int64_t axis = 0;
    int st;
    if ((st = nn_check_contig("_rnn_param_concat", a->in, a->n_in)) < 0 ||
        (st = nn_check_contig("_rnn_param_concat", a->out, 1)) < 0 || (st = rpc_axis(a->params, a->out[0].ndim, &axis)) < 0)
        return st;
    return rpc_copy(&a->out[0], a->in, a->n_in, axis, 1, a->req);
}

static int rpc_backward(const mxp_backward_args *a) {
    int64_t axis = 0;
    int st;
    if ((st = nn_check_contig("_rnn_param_concat", a->in_grad, a->n_in)) < 0 ||
        (st = nn_check_contig("_rnn_param_concat", a->out_grad, 1)) < 0 ||
        (st = rpc_axis(a->params, a->out_grad[0].ndim, &axis)) < 0)
        return st;
    return rpc_copy(&a->out_grad[0], a->in_grad, a->n_in, axis, 0, a->req);
}

static const mxp_op_def rpc_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "_rnn_param_concat",
    .doc = "Concat for Gluon's fused RNN parameters; infers unknown input lengths from the output's.",
    .params = rpc_schema, .n_params = NN_COUNT(rpc_schema), .params_size = sizeof(rpc_params),
    .list_args = rpc_list_args, .infer_shape = rpc_infer_shape, .backward_deps = MXP_BWD_OUT_GRAD,
};

static const mxp_op_impl rpc_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "_rnn_param_concat", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = rpc_forward, .backward = rpc_backward,
};

int nn_register_rnn_param_concat(mxp_registrar *r) {
    int st = r->add_op(r, &rpc_def);
    return st < 0 ? st : r->add_impl(r, &rpc_impl);
}
