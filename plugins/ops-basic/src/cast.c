/* cast.c — Cast / cast (dtype): convert elementwise to another dtype
 * (through double; integer targets saturate, NaN becomes 0).  The gradient
 * converts out_grad back to the input's dtype. */
#include "common.h"

typedef struct cast_param {
    int32_t dtype;
} cast_param;

static int cast_shape(mxp_infer_shape_args *a) {
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    return MXP_OK;
}

static int cast_type(mxp_infer_type_args *a) {
    const cast_param *p = a->params;
    a->out[0] = p->dtype;
    return a->in[0] < 0 ? MXP_EINCOMPLETE : MXP_OK;
}

static int cast_fwd(const mxp_forward_args *a) { return ob_copy(&a->in[0], &a->out[0], a->req[0]); }
static int cast_bwd(const mxp_backward_args *a) {
    return ob_copy(&a->out_grad[0], &a->in_grad[0], a->req[0]);
}

static const mxp_param_def cast_params[] = {
    MXP_PARAM("dtype", MXP_PARAM_DTYPE, MXP_PARAM_REQUIRED, cast_param, dtype, NULL, 0, 0, NULL,
              "Target dtype"),
};
static const char *const al_cast[] = {"cast", NULL};
static const char *const data_arg[] = {"data", NULL};

static const mxp_op_def cast_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Cast", .aliases = al_cast,
    .doc = "Convert to another dtype.", .params = cast_params, .n_params = 1,
    .params_size = sizeof(cast_param), .arg_names = data_arg, .infer_shape = cast_shape,
    .infer_type = cast_type, .backward_deps = MXP_BWD_OUT_GRAD,
};
static const mxp_op_impl cast_impl = OB_IMPL("Cast", cast_fwd, cast_bwd);

int ob_reg_cast(mxp_registrar *r) { return ob_add_op(r, &cast_def, &cast_impl); }
