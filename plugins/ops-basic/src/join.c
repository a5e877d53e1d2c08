/* join.c — joining and splitting with MXNet 1.x names and parameters:
 * Concat / concat (num_args, dim), stack (axis, num_args) and
 * SliceChannel / split (num_outputs, axis, squeeze_axis).
 * Inputs of Concat/stack are named arg0..argN-1 and outputs of SliceChannel
 * output0..outputN-1, as MXNet lists them.  Each piece is a strided view of
 * the joined array (offset along the axis; for stack the axis removed), so
 * forward and backward are ob_copy calls honouring req. */
#include <stdio.h>

#include "common.h"

typedef struct join_param {
    int64_t num;     /* num_args / num_outputs */
    int64_t axis;    /* dim / axis */
    int32_t squeeze_axis;
} join_param;

static int list_args_n(mxp_list_names_args *a) {
    const join_param *p = a->params;
    if (p->num > a->capacity) return ob_err(MXP_EINVAL, "num_args %lld too large", (long long)p->num);
    for (int64_t i = 0; i < p->num; i++) snprintf(a->names[i], MXP_NAME_MAX, "arg%lld", (long long)i);
    a->count = (uint32_t)p->num;
    return MXP_OK;
}

static int list_outputs_n(mxp_list_names_args *a) {
    const join_param *p = a->params;
    if (p->num > a->capacity) return ob_err(MXP_EINVAL, "num_outputs %lld too large", (long long)p->num);
    for (int64_t i = 0; i < p->num; i++) snprintf(a->names[i], MXP_NAME_MAX, "output%lld", (long long)i);
    a->count = (uint32_t)p->num;
    return MXP_OK;
}

static int norm_axis(int64_t axis, int nd, int64_t *out, const char *op) {
    int64_t a = axis < 0 ? axis + nd : axis;
    if (a < 0 || a >= nd) return ob_err(MXP_EINVAL, "%s: axis %lld invalid for rank %d", op, (long long)axis, nd);
    *out = a;
    return MXP_OK;
}

/* View of t restricted to [off, off+len) along axis; drop the axis when
 * `drop` (len must be 1). */
static void piece(ob_view *v, const mxp_tensor *t, int axis, int64_t off, int64_t len, int drop) {
    ob_view_of(v, t);
    v->t.byte_offset += (uint64_t)(off * v->strides[axis] * (int64_t)mxp_dtype_size(t->dtype));
    v->shape[axis] = len;
    if (drop) {
        for (int d = axis; d < t->ndim - 1; d++) {
            v->shape[d] = v->shape[d + 1];
            v->strides[d] = v->strides[d + 1];
        }
        v->t.ndim--;
    }
}

/* --------------------------------------------------------------- Concat */
static int concat_shape(mxp_infer_shape_args *a) {
    const join_param *p = a->params;
    if ((int64_t)a->n_in != p->num) return ob_err(MXP_EINVAL, "Concat: %u inputs, num_args %lld", a->n_in, (long long)p->num);
    for (uint32_t i = 0; i < a->n_in; i++) if (!ob_shape_known(&a->in[i])) return MXP_EINCOMPLETE;
    int nd = a->in[0].ndim;
    int64_t ax = 0;
    int rc = norm_axis(p->axis, nd, &ax, "Concat");
    if (rc) return rc;
    mxp_shape o = a->in[0];
    o.dims[ax] = 0;
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (a->in[i].ndim != nd) return ob_err(MXP_ESHAPE, "Concat: input %u has rank %d, not %d", i, a->in[i].ndim, nd);
        for (int d = 0; d < nd; d++)
            if (d != ax && a->in[i].dims[d] != a->in[0].dims[d])
                return ob_err(MXP_ESHAPE, "Concat: input %u dim %d is %lld, not %lld", i, d,
                              (long long)a->in[i].dims[d], (long long)a->in[0].dims[d]);
        o.dims[ax] += a->in[i].dims[ax];
    }
    a->out[0] = o;
    return MXP_OK;
}

static int concat_fwd(const mxp_forward_args *a) {
    const join_param *p = a->params;
    int64_t ax = 0, off = 0;
    int rc = norm_axis(p->axis, a->out[0].ndim, &ax, "Concat");
    for (uint32_t i = 0; i < a->n_in && !rc; i++) {
        ob_view v;
        piece(&v, &a->out[0], (int)ax, off, a->in[i].shape[ax], 0);
        rc = ob_copy(&a->in[i], &v.t, a->req[0]);
        off += a->in[i].shape[ax];
    }
    return rc;
}

static int concat_bwd(const mxp_backward_args *a) {
    const join_param *p = a->params;
    int64_t ax = 0, off = 0;
    int rc = norm_axis(p->axis, a->out_grad[0].ndim, &ax, "Concat");
    for (uint32_t i = 0; i < a->n_in && !rc; i++) {
        ob_view v;
        piece(&v, &a->out_grad[0], (int)ax, off, a->in_grad[i].shape[ax], 0);
        rc = ob_copy(&v.t, &a->in_grad[i], a->req[i]);
        off += a->in_grad[i].shape[ax];
    }
    return rc;
}

/* ---------------------------------------------------------------- stack */
static int stack_shape(mxp_infer_shape_args *a) {
    const join_param *p = a->params;
    if ((int64_t)a->n_in != p->num) return ob_err(MXP_EINVAL, "stack: %u inputs, num_args %lld", a->n_in, (long long)p->num);
    for (uint32_t i = 0; i < a->n_in; i++) if (!ob_shape_known(&a->in[i])) return MXP_EINCOMPLETE;
    int nd = a->in[0].ndim;
    if (nd + 1 > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "stack: rank too large");
    int64_t ax = 0;
    int rc = norm_axis(p->axis, nd + 1, &ax, "stack");
    if (rc) return rc;
    for (uint32_t i = 1; i < a->n_in; i++) {
        if (a->in[i].ndim != nd) return ob_err(MXP_ESHAPE, "stack: input %u has rank %d, not %d", i, a->in[i].ndim, nd);
        for (int d = 0; d < nd; d++)
            if (a->in[i].dims[d] != a->in[0].dims[d])
                return ob_err(MXP_ESHAPE, "stack: input %u dim %d is %lld, not %lld", i, d,
                              (long long)a->in[i].dims[d], (long long)a->in[0].dims[d]);
    }
    mxp_shape *o = &a->out[0];
    o->ndim = nd + 1;
    for (int d = 0, j = 0; d < nd + 1; d++) o->dims[d] = d == ax ? (int64_t)a->n_in : a->in[0].dims[j++];
    return MXP_OK;
}

static int stack_fwd(const mxp_forward_args *a) {
    const join_param *p = a->params;
    int64_t ax = 0;
    int rc = norm_axis(p->axis, a->out[0].ndim, &ax, "stack");
    for (uint32_t i = 0; i < a->n_in && !rc; i++) {
        ob_view v;
        piece(&v, &a->out[0], (int)ax, i, 1, 1);
        rc = ob_copy(&a->in[i], &v.t, a->req[0]);
    }
    return rc;
}

static int stack_bwd(const mxp_backward_args *a) {
    const join_param *p = a->params;
    int64_t ax = 0;
    int rc = norm_axis(p->axis, a->out_grad[0].ndim, &ax, "stack");
    for (uint32_t i = 0; i < a->n_in && !rc; i++) {
        ob_view v;
        piece(&v, &a->out_grad[0], (int)ax, i, 1, 1);
        rc = ob_copy(&v.t, &a->in_grad[i], a->req[i]);
    }
    return rc;
}

/* --------------------------------------------------------- SliceChannel */
static int split_shape(mxp_infer_shape_args *a) {
    const join_param *p = a->params;
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    int64_t ax = 0;
    int rc = norm_axis(p->axis, in->ndim, &ax, "SliceChannel");
    if (rc) return rc;
    if (p->num < 1 || in->dims[ax] % p->num)
        return ob_err(MXP_ESHAPE, "SliceChannel: dim %lld of size %lld not divisible into %lld",
                      (long long)ax, (long long)in->dims[ax], (long long)p->num);
    int64_t len = in->dims[ax] / p->num;
    if (p->squeeze_axis && len != 1)
        return ob_err(MXP_ESHAPE, "SliceChannel: squeeze_axis needs num_outputs == dim %lld", (long long)in->dims[ax]);
    for (uint32_t i = 0; i < a->n_out; i++) {
        mxp_shape *o = &a->out[i];
        *o = *in;
        o->dims[ax] = len;
        if (p->squeeze_axis) {
            for (int d = (int)ax; d < in->ndim - 1; d++) o->dims[d] = in->dims[d + 1];
            o->ndim--;
        }
    }
    return MXP_OK;
}

static int split_fwd(const mxp_forward_args *a) {
    const join_param *p = a->params;
    int64_t ax = 0;
    int rc = norm_axis(p->axis, a->in[0].ndim, &ax, "SliceChannel");
    if (rc) return rc;
    int64_t len = a->in[0].shape[ax] / p->num;
    for (uint32_t i = 0; i < a->n_out && !rc; i++) {
        ob_view v;
        piece(&v, &a->in[0], (int)ax, i * len, len, p->squeeze_axis);
        rc = ob_copy(&v.t, &a->out[i], a->req[i]);
    }
    return rc;
}

static int split_bwd(const mxp_backward_args *a) {
    const join_param *p = a->params;
    const mxp_tensor *g = &a->in_grad[0];
    int64_t ax = 0;
    int rc = norm_axis(p->axis, g->ndim, &ax, "SliceChannel");
    if (rc) return rc;
    int64_t len = g->shape[ax] / p->num;
    for (uint32_t i = 0; i < a->n_out && !rc; i++) {
        ob_view v;
        piece(&v, g, (int)ax, i * len, len, p->squeeze_axis);
        /* an output whose gradient is absent contributes zeros */
        if (a->out_grad[i].data) rc = ob_copy(&a->out_grad[i], &v.t, a->req[0]);
        else rc = ob_fill(&v.t, 0.0, a->req[0]);
    }
    return rc;
}

/* --------------------------------------------------------- registration */
static const mxp_param_def concat_params[] = {
    MXP_PARAM("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, join_param, num,
              NULL, 1, 0, NULL, "Number of inputs"),
    MXP_PARAM("dim", MXP_PARAM_INT, 0, join_param, axis, "1", 0, 0, NULL, "Axis to join along"),
};
static const mxp_param_def stack_params[] = {
    MXP_PARAM("axis", MXP_PARAM_INT, 0, join_param, axis, "0", 0, 0, NULL, "Position of the new axis"),
    MXP_PARAM("num_args", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, join_param, num,
              NULL, 1, 0, NULL, "Number of inputs"),
};
static const mxp_param_def split_params[] = {
    MXP_PARAM("num_outputs", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, join_param, num,
              NULL, 1, 0, NULL, "Number of equal pieces"),
    MXP_PARAM("axis", MXP_PARAM_INT, 0, join_param, axis, "1", 0, 0, NULL, "Axis to split"),
    MXP_PARAM("squeeze_axis", MXP_PARAM_BOOL, 0, join_param, squeeze_axis, "False", 0, 0, NULL,
              "Drop the split axis (pieces must have size 1 there)"),
};

static const char *const al_concat[] = {"concat", NULL};
static const char *const al_split[] = {"split", NULL};
static const char *const data_arg[] = {"data", NULL};

static const mxp_op_def join_defs[] = {
    { .hdr = MXP_HEADER(mxp_op_def), .name = "Concat", .aliases = al_concat,
      .doc = "Join num_args arrays along dim.", .params = concat_params, .n_params = 2,
      .params_size = sizeof(join_param), .list_args = list_args_n, .infer_shape = concat_shape,
      .backward_deps = MXP_BWD_OUT_GRAD },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "stack", .doc = "Join arrays along a new axis.",
      .params = stack_params, .n_params = 2, .params_size = sizeof(join_param),
      .list_args = list_args_n, .infer_shape = stack_shape, .backward_deps = MXP_BWD_OUT_GRAD },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "SliceChannel", .aliases = al_split,
      .doc = "Split an array into num_outputs equal pieces along axis.", .params = split_params,
      .n_params = 3, .params_size = sizeof(join_param), .arg_names = data_arg,
      .list_outputs = list_outputs_n, .infer_shape = split_shape,
      .backward_deps = MXP_BWD_OUT_GRAD },
};

static const mxp_op_impl join_impls[] = {
    OB_IMPL("Concat", concat_fwd, concat_bwd),
    OB_IMPL("stack", stack_fwd, stack_bwd),
    OB_IMPL("SliceChannel", split_fwd, split_bwd),
};

int ob_reg_join(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof join_defs / sizeof join_defs[0]; i++) {
        int rc = ob_add_op(r, &join_defs[i], &join_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
