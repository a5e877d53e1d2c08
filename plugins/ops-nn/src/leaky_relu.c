/* leaky_relu.c — LeakyReLU (MXNet 1.x): act_type leaky (default), elu,
 * prelu (learned gamma per channel of axis 1, or one shared value), selu,
 * gelu (erf form); rrelu is refused.  Params slope (0.25), lower_bound,
 * upper_bound (rrelu only).  f32/f64, forward and backward (data and, for
 * prelu, gamma). */
#include "nn_common.h"
#include <math.h>

enum { LR_ELU, LR_GELU, LR_LEAKY, LR_PRELU, LR_RRELU, LR_SELU };
static const char *const lr_types[] = {"elu", "gelu", "leaky", "prelu", "rrelu", "selu", NULL};
#define SELU_L 1.0507009873554804934193349852946
#define SELU_A 1.6732632423543772848170429916717

typedef struct lr_params { double slope, lower_bound, upper_bound; int32_t act_type, pad; } lr_params;

static const mxp_param_def lr_schema[] = {
    NN_P("act_type", MXP_PARAM_ENUM, 0, lr_params, act_type, "leaky", lr_types, "Activation function to be applied."),
    NN_P("slope", MXP_PARAM_FLOAT, 0, lr_params, slope, "0.25", NULL, "Init slope for the activation (for leaky and elu)."),
    NN_P("lower_bound", MXP_PARAM_FLOAT, 0, lr_params, lower_bound, "0.125", NULL, "Lower bound of random slope (rrelu)."),
    NN_P("upper_bound", MXP_PARAM_FLOAT, 0, lr_params, upper_bound, "0.334", NULL, "Upper bound of random slope (rrelu)."),
};

static int lr_check_params(mxp_check_params_args *a) {
    const lr_params *p = a->params;
    if (p->act_type == LR_RRELU) return NN_ERR(MXP_EUNSUPPORTED, "LeakyReLU: act_type 'rrelu' is not implemented");
    return MXP_OK;
}

static int lr_list_args(mxp_list_names_args *a) {
    const lr_params *p = a->params;
    snprintf(a->names[0], MXP_NAME_MAX, "data");
    a->count = 1;
    if (p->act_type == LR_PRELU) { snprintf(a->names[1], MXP_NAME_MAX, "gamma"); a->count = 2; }
    return MXP_OK;
}

static int lr_infer_shape(mxp_infer_shape_args *a) {
    const lr_params *p = a->params;
    mxp_shape *d = &a->in[0];
    int st;
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    if ((st = nn_shape_assign("LeakyReLU", "output", &a->out[0], d)) < 0) return st;
    if (p->act_type == LR_PRELU) {
        int64_t c = d->ndim > 1 ? d->dims[1] : 1;
        mxp_shape g = nn_shape(1, &c);
        /* a single shared slope (1,) is accepted too */
        if (!(a->in[1].ndim == 1 && a->in[1].dims[0] == 1) && (st = nn_shape_assign("LeakyReLU", "gamma", &a->in[1], &g)) < 0) return st;
    }
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

typedef struct lrjob {
    int32_t dt, type, req, req_g;
    double slope;
    int64_t n, C, S, gn; /* channel c of element i: (i / S) % C */
    const void *x, *y, *dy, *gamma;
    void *o, *dg;
} lrjob;

static void lr_fwd_range(void *arg, int64_t b, int64_t e) {
    const lrjob *j = arg;
    NN_TYPED(j->dt, T, const T *x = j->x; T *y = j->o; const T *g = j->gamma;
        for (int64_t i = b; i < e; i++) {
            double v = x[i], r;
            switch (j->type) {
            case LR_LEAKY: r = v > 0 ? v : j->slope * v; break;
            case LR_ELU:   r = v > 0 ? v : j->slope * expm1(v); break;
            case LR_SELU:  r = SELU_L * (v > 0 ? v : SELU_A * expm1(v)); break;
            case LR_GELU:  r = 0.5 * v * (1 + erf(v * M_SQRT1_2)); break;
            default:       r = v > 0 ? v : (double)g[j->gn == 1 ? 0 : (i / j->S) % j->C] * v; break;
            }
            NN_STORE(j->req, y[i], (T)r);
        });
}

static void lr_bwd_range(void *arg, int64_t b, int64_t e) {
    const lrjob *j = arg;
    NN_TYPED(j->dt, T, const T *x = j->x; const T *dy = j->dy; T *dx = j->o; const T *g = j->gamma;
        for (int64_t i = b; i < e; i++) {
            double v = x[i], d;
            switch (j->type) {
            case LR_LEAKY: d = v > 0 ? 1 : j->slope; break;
            case LR_ELU:   d = v > 0 ? 1 : j->slope * exp(v); break;
            case LR_SELU:  d = SELU_L * (v > 0 ? 1 : SELU_A * exp(v)); break;
            case LR_GELU:  d = 0.5 * (1 + erf(v * M_SQRT1_2)) + v * exp(-0.5 * v * v) * 0.3989422804014327; break;
            default:       d = v > 0 ? 1 : (double)g[j->gn == 1 ? 0 : (i / j->S) % j->C]; break;
            }
            NN_STORE(j->req, dx[i], (T)(dy[i] * d));
        });
}

static void lr_setup(const lr_params *p, const mxp_tensor *x, const mxp_tensor *gamma, lrjob *j) {
    j->type = p->act_type; j->slope = p->slope; j->n = mxp_tensor_numel(x);
    j->C = x->ndim > 1 ? x->shape[1] : 1; j->S = 1;
    for (int i = 2; i < x->ndim; i++) j->S *= x->shape[i];
    j->gn = gamma ? mxp_tensor_numel(gamma) : 0;
}

static int lr_forward(const mxp_forward_args *a) {
    const lr_params *p = a->params; int32_t dt; int st;
    if ((st = nn_check_float("LeakyReLU", a->in, a->n_in, &dt)) < 0) return st;
    if ((st = nn_check_contig("LeakyReLU", a->in, a->n_in)) < 0 || (st = nn_check_contig("LeakyReLU", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    lrjob j; memset(&j, 0, sizeof j);
    lr_setup(p, &a->in[0], p->act_type == LR_PRELU ? &a->in[1] : NULL, &j);
    j.dt = dt; j.req = a->req[0]; j.x = nn_ptr(&a->in[0]); j.o = nn_ptr(&a->out[0]);
    j.gamma = p->act_type == LR_PRELU ? nn_ptr(&a->in[1]) : NULL;
    return nn_parallel(a->ctx, j.n, 1 << 14, lr_fwd_range, &j);
}

static int lr_backward(const mxp_backward_args *a) {
    const lr_params *p = a->params; int st;
    if ((st = nn_check_contig("LeakyReLU", a->in, a->n_in)) < 0 || (st = nn_check_contig("LeakyReLU", a->in_grad, a->n_in)) < 0 ||
        (st = nn_check_contig("LeakyReLU", a->out_grad, 1)) < 0) return st;
    lrjob j; memset(&j, 0, sizeof j);
    int prelu = p->act_type == LR_PRELU;
    lr_setup(p, &a->in[0], prelu ? &a->in[1] : NULL, &j);
    j.dt = a->out_grad[0].dtype; j.req = a->req[0]; j.x = nn_ptr(&a->in[0]); j.dy = nn_ptr(&a->out_grad[0]);
    j.o = nn_ptr(&a->in_grad[0]); j.gamma = prelu ? nn_ptr(&a->in[1]) : NULL;
    if (a->req[0] != MXP_REQ_NULL && (st = nn_parallel(a->ctx, j.n, 1 << 14, lr_bwd_range, &j)) < 0) return st;
    if (prelu && a->req[1] != MXP_REQ_NULL) {
        NN_TYPED(j.dt, T, const T *x = j.x; const T *dy = j.dy; T *dg = nn_ptr(&a->in_grad[1]);
            double acc[4096]; double *s = j.gn <= 4096 ? acc : NULL;
            if (!s) return NN_ERR(MXP_EUNSUPPORTED, "LeakyReLU: prelu with more than 4096 channels");
            memset(s, 0, sizeof(double) * (size_t)j.gn);
            for (int64_t i = 0; i < j.n; i++) if (x[i] <= 0) s[j.gn == 1 ? 0 : (i / j.S) % j.C] += (double)dy[i] * x[i];
            for (int64_t c = 0; c < j.gn; c++) NN_STORE(a->req[1], dg[c], (T)s[c]););
    }
    return MXP_OK;
}

static const mxp_op_def lr_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "LeakyReLU",
    .doc = "Applies Leaky rectified linear unit activation element-wise to the input.",
    .params = lr_schema, .n_params = NN_COUNT(lr_schema), .params_size = sizeof(lr_params),
    .list_args = lr_list_args, .infer_shape = lr_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
    .check_params = lr_check_params,
};
static const mxp_op_impl lr_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "LeakyReLU", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = lr_forward, .backward = lr_backward,
};

int nn_register_leaky_relu(mxp_registrar *r) {
    int st = r->add_op(r, &lr_def);
    return st < 0 ? st : r->add_impl(r, &lr_impl);
}
