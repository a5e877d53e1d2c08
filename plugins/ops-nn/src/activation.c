/* activation.c — Activation (MXNet 1.x): act_type relu, sigmoid, tanh,
 * softrelu, softsign.  Elementwise, f32/f64, split over the host's threads.
 * Backward reads the output (relu, sigmoid, tanh, softrelu) or the input
 * (softsign), as MXNet; forward and backward may run in place.
 * float32 relu (every conv/fc layer of a CNN, forward and backward) has
 * loops compiled for AVX-512, AVX2 and baseline x86-64 (target_clones,
 * chosen at load time; static behind plain calls, none under ASan, as in
 * conv/microkernel.c), and so have float32 tanh and sigmoid, computed
 * without libm (below); the other cases are plain loops.
 * bfloat16 (a mixed-precision graph, graph/amp.c): relu forward and
 * backward run on the bf16 values directly (a select per element, 16
 * lanes, no rounding: max(x, 0) and the masked dy are bf16 values); the
 * other act_types and req add widen to float32, run the float32 loops and
 * round once (bf16_via_f32.c). */
#include "nn_common.h"
#include "nn_simd.h"
#include "bf16_vec.h"
#include "bf16_via_f32.h"
#include "nn_exp.h"
#include <math.h>
#include <string.h>

/* o (=|+=) max(x, 0) written as a select (NaN -> 0, as the generic loop);
 * o may be x exactly (inplace). */
TC static void relu_fwd_f32(const float *x, float *o, int64_t n, int add) {
    if (add) for (int64_t i = 0; i < n; i++) o[i] += x[i] > 0 ? x[i] : 0;
    else for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0 ? x[i] : 0;
}
/* o (=|+=) y > 0 ? dy : 0; dy loaded unconditionally so it is a select;
 * o may be dy exactly (inplace). */
TC static void relu_bwd_f32(const float *y, const float *dy, float *o, int64_t n, int add) {
    if (add) for (int64_t i = 0; i < n; i++) { float g = dy[i]; o[i] += y[i] > 0 ? g : 0; }
    else for (int64_t i = 0; i < n; i++) { float g = dy[i]; o[i] = y[i] > 0 ? g : 0; }
}

/* bf16 relu: o = x > 0 ? x : +0 (NaN -> 0, as float32), o may be x. */
TC static void relu_fwd_bf16(const uint16_t *x, uint16_t *o, int64_t n) {
    const v16 z = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16 v = ldh16(x + i);
        i16v on = v > z, vi;
        memcpy(&vi, &v, sizeof vi);
        vi &= on;
        h16 h = __builtin_convertvector((w16)vi >> 16, h16);
        memcpy(o + i, &h, sizeof h);
    }
    for (; i < n; i++) o[i] = nn_bf16_to_f32(x[i]) > 0 ? x[i] : 0;
}
/* o = y > 0 ? dy : +0 on bf16; o may be dy. */
TC static void relu_bwd_bf16(const uint16_t *y, const uint16_t *dy, uint16_t *o, int64_t n) {
    const v16 z = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        i16v on = ldh16(y + i) > z;
        h16 g, m = __builtin_convertvector(on, h16);
        memcpy(&g, dy + i, sizeof g);
        g &= m;
        memcpy(o + i, &g, sizeof g);
    }
    for (; i < n; i++) o[i] = nn_bf16_to_f32(y[i]) > 0 ? dy[i] : 0;
}

/* float32 tanh and sigmoid without libm calls, so their loops vectorize
 * (libm's double tanh per element made tanh ~40x slower than relu: most of
 * a tanh LeNet's step).  Both rest on exp of a non-positive argument:
 * exp_nonpos_f32 (nn_exp.h, shared with softmax.c).
 * tanh: |x| < 0.55 by x + x^3 P(x^2) (degree 5 in x^2, same fit, 3e-11),
 * else (1 - e)/(1 + e) with e = exp(-2|x|), which has no cancellation
 * there; |x| >= 9 gives 1 (tanh(9) rounds to 1 in float).  sigmoid:
 * 1/(1 + e) or e/(1 + e) with e = exp(-|x|).  Measured against double
 * libm: within 4 ulp (tests/unit/ops_nn/test_activation.c); NaN stays NaN,
 * +-inf give +-1 (0 and 1). */
/* GCC does not if-convert (so does not vectorize) a select whose arm holds
 * floating-point arithmetic while FP exceptions count as side effects;
 * these kernels never read the FP flags. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
static inline float tanh_f32(float x) {
    float a = x < 0 ? -x : x;
    float e = exp_nonpos_f32(-2.0f * (a < 9.0f ? a : 9.0f));
    float big = (1.0f - e) / (1.0f + e);
    float u = a * a;
    float q = 2.401628045e-3f;
    q = q * u - 8.419355129e-3f;
    q = q * u + 2.178471274e-2f;
    q = q * u - 5.395995446e-2f;
    q = q * u + 1.333329589e-1f;
    q = q * u - 3.333333278e-1f;
    float t = a < 0.55f ? a + a * u * q : big;
    t = x < 0 ? -t : t;
    return x == x ? t : x;
}

static inline float sigmoid_f32(float x) {
    float a = x < 0 ? -x : x;
    float e = exp_nonpos_f32(-(a < 87.0f ? a : 87.0f));
    float d = 1.0f / (1.0f + e);
    float s = x >= 0 ? d : e * d;
    return x == x ? s : x;
}

/* o (=|+=) tanh / sigmoid of x; o may be x exactly (inplace). */
TC static void tanh_fwd_f32(const float *x, float *o, int64_t n, int add) {
    if (add) for (int64_t i = 0; i < n; i++) o[i] += tanh_f32(x[i]);
    else for (int64_t i = 0; i < n; i++) o[i] = tanh_f32(x[i]);
}
TC static void sigmoid_fwd_f32(const float *x, float *o, int64_t n, int add) {
    if (add) for (int64_t i = 0; i < n; i++) o[i] += sigmoid_f32(x[i]);
    else for (int64_t i = 0; i < n; i++) o[i] = sigmoid_f32(x[i]);
}
#pragma GCC pop_options

enum { ACT_RELU, ACT_SIGMOID, ACT_SOFTRELU, ACT_SOFTSIGN, ACT_TANH };
static const char *const act_choices[] = {"relu", "sigmoid", "softrelu", "softsign", "tanh", NULL};

typedef struct act_params { int32_t act_type; int32_t pad; } act_params;

static const mxp_param_def act_schema[] = {
    NN_P("act_type", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, act_params, act_type, NULL, act_choices,
         "Activation function to be applied."),
};
static const char *const act_args[] = {"data", NULL};

static int act_infer_shape(mxp_infer_shape_args *a) {
    int st;
    if (a->in[0].ndim >= 0 && (st = nn_shape_assign("Activation", "output", &a->out[0], &a->in[0])) < 0) return st;
    if (a->out[0].ndim >= 0 && (st = nn_shape_assign("Activation", "data", &a->in[0], &a->out[0])) < 0) return st;
    return nn_shape_known(&a->in[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

static int act_declare_backward(mxp_backward_deps_args *a) {
    const act_params *p = a->params;
    a->need_in[0] = p->act_type == ACT_SOFTSIGN;
    a->need_out[0] = p->act_type != ACT_SOFTSIGN;
    return MXP_OK;
}

typedef struct act_job {
    int32_t type, dt, req;
    const void *x, *y, *dy;
    void *o;
} act_job;

static void act_fwd_range(void *arg, int64_t b, int64_t e) {
    const act_job *j = arg;
    if (j->dt == MXP_DTYPE_BF16) { /* relu, req write/inplace (act_forward) */
        relu_fwd_bf16((const uint16_t *)j->x + b, (uint16_t *)j->o + b, e - b);
        return;
    }
    if (j->type == ACT_RELU && j->dt == MXP_DTYPE_F32) {
        relu_fwd_f32((const float *)j->x + b, (float *)j->o + b, e - b, j->req == MXP_REQ_ADD);
        return;
    }
    if ((j->type == ACT_TANH || j->type == ACT_SIGMOID) && j->dt == MXP_DTYPE_F32) {
        (j->type == ACT_TANH ? tanh_fwd_f32 : sigmoid_fwd_f32)((const float *)j->x + b, (float *)j->o + b, e - b,
                                                              j->req == MXP_REQ_ADD);
        return;
    }
    NN_TYPED(j->dt, T, const T *x = j->x; T *o = j->o;
        switch (j->type) {
        case ACT_RELU: /* req hoisted out of the loop so both loops vectorize */
            if (j->req == MXP_REQ_ADD) for (int64_t i = b; i < e; i++) o[i] += x[i] > 0 ? x[i] : 0;
            else for (int64_t i = b; i < e; i++) o[i] = x[i] > 0 ? x[i] : 0;
            break;
        case ACT_SIGMOID:  for (int64_t i = b; i < e; i++) { T v = (T)(1 / (1 + exp(-(double)x[i]))); NN_STORE(j->req, o[i], v); } break;
        case ACT_TANH:     for (int64_t i = b; i < e; i++) { T v = (T)tanh((double)x[i]); NN_STORE(j->req, o[i], v); } break;
        case ACT_SOFTRELU: for (int64_t i = b; i < e; i++) { double t = x[i];
            T v = (T)(t > 20 ? t : log1p(exp(t))); NN_STORE(j->req, o[i], v); } break;
        case ACT_SOFTSIGN: for (int64_t i = b; i < e; i++) { T v = x[i] / (1 + (x[i] < 0 ? -x[i] : x[i])); NN_STORE(j->req, o[i], v); } break;
        });
}

static void act_bwd_range(void *arg, int64_t b, int64_t e) {
    const act_job *j = arg;
    if (j->dt == MXP_DTYPE_BF16) {
        relu_bwd_bf16((const uint16_t *)j->y + b, (const uint16_t *)j->dy + b, (uint16_t *)j->o + b, e - b);
        return;
    }
    if (j->type == ACT_RELU && j->dt == MXP_DTYPE_F32) {
        relu_bwd_f32((const float *)j->y + b, (const float *)j->dy + b, (float *)j->o + b, e - b,
                     j->req == MXP_REQ_ADD);
        return;
    }
    NN_TYPED(j->dt, T, const T *y = j->y; const T *x = j->x; const T *dy = j->dy; T *o = j->o;
        switch (j->type) {
        case ACT_RELU:
            /* dy loaded unconditionally: a select, so the loop vectorizes */
            if (j->req == MXP_REQ_ADD) for (int64_t i = b; i < e; i++) { T g = dy[i]; o[i] += y[i] > 0 ? g : 0; }
            else for (int64_t i = b; i < e; i++) { T g = dy[i]; o[i] = y[i] > 0 ? g : 0; }
            break;
        case ACT_SIGMOID:  for (int64_t i = b; i < e; i++) { T v = dy[i] * y[i] * (1 - y[i]); NN_STORE(j->req, o[i], v); } break;
        case ACT_TANH:     for (int64_t i = b; i < e; i++) { T v = dy[i] * (1 - y[i] * y[i]); NN_STORE(j->req, o[i], v); } break;
        case ACT_SOFTRELU: for (int64_t i = b; i < e; i++) { T v = (T)(dy[i] * -expm1(-(double)y[i])); NN_STORE(j->req, o[i], v); } break;
        case ACT_SOFTSIGN: for (int64_t i = b; i < e; i++) { T d = 1 + (x[i] < 0 ? -x[i] : x[i]); T v = dy[i] / (d * d); NN_STORE(j->req, o[i], v); } break;
        });
}

static int act_forward(const mxp_forward_args *a) {
    const act_params *p = a->params; int st; int32_t dt;
    if (a->in[0].dtype == MXP_DTYPE_BF16 && (p->act_type != ACT_RELU || a->req[0] == MXP_REQ_ADD ||
                                             a->out[0].dtype != MXP_DTYPE_BF16))
        return nn_bf16_via_f32_forward(a, act_forward);
    if (a->in[0].dtype == MXP_DTYPE_BF16) dt = MXP_DTYPE_BF16;
    else if ((st = nn_check_float("Activation", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("Activation", a->in, 1)) < 0 || (st = nn_check_contig("Activation", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    act_job j = { p->act_type, dt, a->req[0], nn_ptr(&a->in[0]), NULL, NULL, nn_ptr(&a->out[0]) };
    return nn_parallel(a->ctx, mxp_tensor_numel(&a->in[0]), 1 << 15, act_fwd_range, &j);
}

static int act_backward(const mxp_backward_args *a) {
    const act_params *p = a->params; int st;
    if (a->out_grad[0].dtype == MXP_DTYPE_BF16 &&
        (p->act_type != ACT_RELU || a->req[0] == MXP_REQ_ADD || a->in_grad[0].dtype != MXP_DTYPE_BF16 ||
         !a->out[0].data || a->out[0].dtype != MXP_DTYPE_BF16))
        return nn_bf16_via_f32_backward(a, act_backward);
    if ((st = nn_check_contig("Activation", a->in_grad, 1)) < 0 || (st = nn_check_contig("Activation", a->out_grad, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    act_job j = { p->act_type, a->out_grad[0].dtype, a->req[0], nn_ptr(&a->in[0]), nn_ptr(&a->out[0]),
                  nn_ptr(&a->out_grad[0]), nn_ptr(&a->in_grad[0]) };
    return nn_parallel(a->ctx, mxp_tensor_numel(&a->out_grad[0]), 1 << 15, act_bwd_range, &j);
}

static const mxp_inplace_pair act_inplace[] = {{0, 0}};

static const mxp_op_def act_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Activation",
    .doc = "Applies an activation function element-wise to the input.",
    .params = act_schema, .n_params = NN_COUNT(act_schema), .params_size = sizeof(act_params),
    .arg_names = act_args, .infer_shape = act_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_OUT_DATA | MXP_BWD_IN_DATA,
    .declare_backward = act_declare_backward,
    .forward_inplace = act_inplace, .n_forward_inplace = 1,
    .backward_inplace = act_inplace, .n_backward_inplace = 1,
};
static const mxp_op_impl act_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Activation", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = act_forward, .backward = act_backward,
};

int nn_register_activation(mxp_registrar *r) {
    int st = r->add_op(r, &act_def);
    return st < 0 ? st : r->add_impl(r, &act_impl);
}
