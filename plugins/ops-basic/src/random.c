/* random.c — _random_uniform (low, high) and _random_normal (loc, scale)
 * with shape, ctx and dtype ('None' = float32, float16, float32, float64)
 * as MXNet 1.x names them (aliases uniform / random_uniform, normal /
 * random_normal).  Numbers come from the host's generator through the op's
 * reserved counter range (MXP_RESOURCE_RANDOM, ctx->rng), so results do
 * not depend on scheduling.  No inputs, no gradient. */
#include "common.h"

typedef struct rand_param {
    double a, b;             /* low/high or loc/scale */
    mxp_param_shape shape;
    const char *ctx;
    int32_t dtype;           /* index into rand_dtypes */
} rand_param;

static const char *const rand_dtypes[] = {"None", "float16", "float32", "float64", NULL};
static const int32_t rand_dtype_val[] = {MXP_DTYPE_F32, MXP_DTYPE_F16, MXP_DTYPE_F32, MXP_DTYPE_F64};

enum { RND_UNIFORM, RND_NORMAL };

static int rand_shape(mxp_infer_shape_args *a) {
    const rand_param *p = a->params;
    if (p->shape.ndim > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "random: rank too large");
    a->out[0].ndim = p->shape.ndim;
    for (int i = 0; i < p->shape.ndim; i++) a->out[0].dims[i] = p->shape.dims[i];
    return ob_shape_known(&a->out[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

static int rand_type(mxp_infer_type_args *a) {
    const rand_param *p = a->params;
    a->out[0] = rand_dtype_val[p->dtype];
    return MXP_OK;
}

static int rand_check(mxp_check_params_args *a) {
    const rand_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    if (kind == RND_UNIFORM && p->b < p->a) return ob_err(MXP_EINVAL, "_random_uniform: high %g < low %g", p->b, p->a);
    if (kind == RND_NORMAL && p->b < 0) return ob_err(MXP_EINVAL, "_random_normal: scale %g < 0", p->b);
    return MXP_OK;
}

static int rand_fwd(const mxp_forward_args *a) {
    const rand_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_tensor *y = &a->out[0];
    int req = a->req[0];
    if (req == MXP_REQ_NULL) return MXP_OK;
    if (!a->ctx->rng) return ob_err(MXP_EINTERNAL, "random: no generator in the op context");
    uint64_t n = (uint64_t)mxp_tensor_numel(y);
    int f64 = y->dtype == MXP_DTYPE_F64;
    if (!f64 && y->dtype != MXP_DTYPE_F32 && y->dtype != MXP_DTYPE_F16)
        return ob_err(MXP_ETYPE, "random: dtype %d unsupported", y->dtype);
    int direct = (y->dtype == MXP_DTYPE_F32 || f64) && req != MXP_REQ_ADD && mxp_tensor_is_contiguous(y);
    void *buf = direct ? ob_base(y) : ob_host->alloc_host(n * (f64 ? 8 : 4) + 1);
    if (!buf) return ob_err(MXP_ENOMEM, "random: no memory for %llu numbers", (unsigned long long)n);
    int rc;
    if (f64)
        rc = kind == RND_UNIFORM ? ob_host->rng_uniform_f64(a->ctx->rng, p->a, p->b, buf, n)
                                 : ob_host->rng_normal_f64(a->ctx->rng, p->a, p->b, buf, n);
    else
        rc = kind == RND_UNIFORM ? ob_host->rng_uniform_f32(a->ctx->rng, (float)p->a, (float)p->b, buf, n)
                                 : ob_host->rng_normal_f32(a->ctx->rng, (float)p->a, (float)p->b, buf, n);
    if (!rc && !direct) {
        int64_t shape1[1] = {(int64_t)n};
        mxp_tensor src = *y;
        src.data = buf;
        src.byte_offset = 0;
        src.dtype = f64 ? MXP_DTYPE_F64 : MXP_DTYPE_F32;
        src.ndim = 1;
        src.shape = shape1;
        src.strides = NULL;
        rc = ob_copy(&src, y, req);
    }
    if (!direct) ob_host->free_host(buf);
    return rc;
}

#define TAIL_P                                                                              \
    MXP_PARAM("shape", MXP_PARAM_SHAPE, 0, rand_param, shape, "()", 0, 0, NULL, "Output shape"), \
    MXP_PARAM("ctx", MXP_PARAM_STRING, 0, rand_param, ctx, "", 0, 0, NULL,                   \
              "Context (accepted for compatibility)"),                                       \
    MXP_PARAM("dtype", MXP_PARAM_ENUM, 0, rand_param, dtype, "None", 0, 0, rand_dtypes,      \
              "Output dtype; None means float32")

static const mxp_param_def uniform_params[] = {
    MXP_PARAM("low", MXP_PARAM_FLOAT, 0, rand_param, a, "0", 0, 0, NULL, "Lower bound"),
    MXP_PARAM("high", MXP_PARAM_FLOAT, 0, rand_param, b, "1", 0, 0, NULL, "Upper bound (exclusive)"),
    TAIL_P,
};
static const mxp_param_def normal_params[] = {
    MXP_PARAM("loc", MXP_PARAM_FLOAT, 0, rand_param, a, "0", 0, 0, NULL, "Mean"),
    MXP_PARAM("scale", MXP_PARAM_FLOAT, 0, rand_param, b, "1", 0, 0, NULL, "Standard deviation"),
    TAIL_P,
};

static const char *const al_uniform[] = {"uniform", "random_uniform", NULL};
static const char *const al_normal[] = {"normal", "random_normal", NULL};
static const char *const no_args[] = {NULL};

static const mxp_op_def rand_defs[] = {
    { .hdr = MXP_HEADER(mxp_op_def), .name = "_random_uniform", .aliases = al_uniform,
      .doc = "Uniform samples in [low, high).", .params = uniform_params, .n_params = 5,
      .params_size = sizeof(rand_param), .arg_names = no_args, .infer_shape = rand_shape,
      .infer_type = rand_type, .flags = MXP_OP_NO_GRADIENT, .resources = MXP_RESOURCE_RANDOM,
      .check_params = rand_check, .user_data = (void *)(intptr_t)RND_UNIFORM },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "_random_normal", .aliases = al_normal,
      .doc = "Normal samples with mean loc and standard deviation scale.", .params = normal_params,
      .n_params = 5, .params_size = sizeof(rand_param), .arg_names = no_args,
      .infer_shape = rand_shape, .infer_type = rand_type, .flags = MXP_OP_NO_GRADIENT,
      .resources = MXP_RESOURCE_RANDOM, .check_params = rand_check,
      .user_data = (void *)(intptr_t)RND_NORMAL },
};

static const mxp_op_impl rand_impls[] = {
    OB_IMPL_UD("_random_uniform", rand_fwd, NULL, (intptr_t)RND_UNIFORM),
    OB_IMPL_UD("_random_normal", rand_fwd, NULL, (intptr_t)RND_NORMAL),
};

int ob_reg_random(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof rand_defs / sizeof rand_defs[0]; i++) {
        int rc = ob_add_op(r, &rand_defs[i], &rand_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
