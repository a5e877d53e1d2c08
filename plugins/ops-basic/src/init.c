/* init.c — array creation with MXNet 1.x names and parameters: _zeros,
 * _ones, _full (value) — shape, ctx, dtype — and _arange (start, stop,
 * step, repeat, infer_range, ctx, dtype).  No inputs, no gradient.  `ctx`
 * is accepted for symbol JSON compatibility; the host places the output. */
#include <math.h>

#include "common.h"

typedef struct init_param {
    mxp_param_shape shape;
    const char *ctx;
    int32_t dtype;
    double value;
    double start, step;
    mxp_param_opt_float stop;
    int64_t repeat;
    int32_t infer_range;
} init_param;

enum { I_ZEROS, I_ONES, I_FULL, I_ARANGE };

static int64_t arange_len(const init_param *p) {
    double start = p->stop.has_value ? p->start : 0.0;
    double stop = p->stop.has_value ? p->stop.value : p->start;
    double n = ceil((stop - start) / p->step);
    return n > 0 ? (int64_t)n * p->repeat : 0;
}

static int init_shape(mxp_infer_shape_args *a) {
    const init_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    mxp_shape *o = &a->out[0];
    if (kind == I_ARANGE) {
        if (p->step == 0) return ob_err(MXP_EINVAL, "_arange: step is 0");
        if (p->infer_range && !p->stop.has_value) return MXP_EINCOMPLETE;
        o->ndim = 1;
        o->dims[0] = arange_len(p);
        return MXP_OK;
    }
    if (p->shape.ndim > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "%s: rank too large", kind == I_FULL ? "_full" : "_zeros");
    o->ndim = p->shape.ndim;
    for (int i = 0; i < p->shape.ndim; i++) {
        if (p->shape.dims[i] < 0) return ob_err(MXP_ESHAPE, "init: negative dim %lld", (long long)p->shape.dims[i]);
        o->dims[i] = p->shape.dims[i];
    }
    return ob_shape_known(o) ? MXP_OK : MXP_EINCOMPLETE;
}

static int init_type(mxp_infer_type_args *a) {
    const init_param *p = a->params;
    a->out[0] = p->dtype;
    return MXP_OK;
}

static int init_fwd(const mxp_forward_args *a) {
    const init_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_tensor *y = &a->out[0];
    if (kind != I_ARANGE)
        return ob_fill(y, kind == I_ZEROS ? 0.0 : kind == I_ONES ? 1.0 : p->value, a->req[0]);
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    double start = p->stop.has_value ? p->start : 0.0;
    ob_it it;
    ob_it_init(&it, y, 0);
    int64_t n = mxp_tensor_numel(y);
    uint32_t os = mxp_dtype_size(y->dtype);
    for (int64_t i = 0; i < n; i++, ob_it_next(&it))
        ob_store_req(ob_base(y) + it.off * os, y->dtype, start + (double)(i / p->repeat) * p->step, a->req[0]);
    return MXP_OK;
}

#define SHAPE_P MXP_PARAM("shape", MXP_PARAM_SHAPE, 0, init_param, shape, "()", 0, 0, NULL, "Output shape")
#define CTX_P MXP_PARAM("ctx", MXP_PARAM_STRING, 0, init_param, ctx, "", 0, 0, NULL, \
    "Context (accepted for compatibility; the host places outputs)")
#define DTYPE_P MXP_PARAM("dtype", MXP_PARAM_DTYPE, 0, init_param, dtype, "float32", 0, 0, NULL, "Output dtype")

static const mxp_param_def zeros_params[] = {SHAPE_P, CTX_P, DTYPE_P};
static const mxp_param_def full_params[] = {
    SHAPE_P, CTX_P, DTYPE_P,
    MXP_PARAM("value", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, init_param, value, NULL, 0, 0, NULL, "Fill value"),
};
static const mxp_param_def arange_params[] = {
    MXP_PARAM("start", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, init_param, start, NULL, 0, 0, NULL,
              "Start (or stop when stop is None)"),
    MXP_PARAM("stop", MXP_PARAM_OPT_FLOAT, 0, init_param, stop, "None", 0, 0, NULL, "Stop (exclusive)"),
    MXP_PARAM("step", MXP_PARAM_FLOAT, 0, init_param, step, "1", 0, 0, NULL, "Spacing"),
    MXP_PARAM("repeat", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, init_param, repeat, "1", 1, 0, NULL,
              "Times each value repeats"),
    MXP_PARAM("infer_range", MXP_PARAM_BOOL, 0, init_param, infer_range, "False", 0, 0, NULL,
              "Infer stop from the output shape (needs stop; otherwise incomplete)"),
    CTX_P, DTYPE_P,
};

static const char *const no_args[] = {NULL};
#define IDEF(NAME, PARAMS, NP, KIND, DOC)                                                  \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = PARAMS,           \
      .n_params = NP, .params_size = sizeof(init_param), .infer_shape = init_shape,        \
      .arg_names = no_args, .infer_type = init_type, .flags = MXP_OP_NO_GRADIENT, .user_data = (void *)(intptr_t)(KIND) }

static const mxp_op_def init_defs[] = {
    IDEF("_zeros", zeros_params, 3, I_ZEROS, "Array of zeros."),
    IDEF("_ones", zeros_params, 3, I_ONES, "Array of ones."),
    IDEF("_full", full_params, 4, I_FULL, "Array filled with value."),
    IDEF("_arange", arange_params, 7, I_ARANGE, "Evenly spaced values in [start, stop)."),
};

static const mxp_op_impl init_impls[] = {
    OB_IMPL_UD("_zeros", init_fwd, NULL, (intptr_t)I_ZEROS),
    OB_IMPL_UD("_ones", init_fwd, NULL, (intptr_t)I_ONES),
    OB_IMPL_UD("_full", init_fwd, NULL, (intptr_t)I_FULL),
    OB_IMPL_UD("_arange", init_fwd, NULL, (intptr_t)I_ARANGE),
};

int ob_reg_init(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof init_defs / sizeof init_defs[0]; i++) {
        int rc = ob_add_op(r, &init_defs[i], &init_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
