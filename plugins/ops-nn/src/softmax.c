/* softmax.c — softmax and log_softmax (MXNet 1.x): params axis (default -1),
 * temperature (None = 1), dtype (accepted; output keeps the input dtype),
 * use_length (refused).  f32/f64, numerically stable (max subtracted,
 * accumulation in double).  Backward reads the output:
 *   softmax:     dx = y * (dy - sum(dy*y)) / T
 *   log_softmax: dx = (dy - exp(y) * sum(dy)) / T
 * Also provides nn_softmax_axis for SoftmaxOutput / softmax_cross_entropy.
 * float32 softmax (not log) over contiguous rows (the last axis: every
 * classifier's output) written, not added, runs smx_rows_f32 instead: exp
 * without libm in a vector loop, the row sum in double; within a few ulp
 * of the double path, plus the rounding of x - max to float (relative
 * |x - max| 2^-24: 1e-6 at -17, where the probability is 4e-8) (libm's double exp per element made SoftmaxOutput
 * 6 us of the MLP's 170 us training step, batch 64 x 10 classes). */
#include "nn_common.h"
#include "nn_exp.h"
#include "nn_simd.h"
#include <math.h>

typedef struct smx_params {
    int64_t axis;
    mxp_param_opt_float temperature;
    int32_t dtype, use_length;
} smx_params;

static const mxp_param_def smx_schema[] = {
    NN_P("axis", MXP_PARAM_INT, 0, smx_params, axis, "-1", NULL, "The axis along which to compute softmax."),
    NN_P("temperature", MXP_PARAM_OPT_FLOAT, 0, smx_params, temperature, "None", NULL, "Temperature parameter in softmax."),
    NN_P("dtype", MXP_PARAM_DTYPE, 0, smx_params, dtype, "None", NULL, "DType of the output (only the input dtype is supported)."),
    NN_P("use_length", MXP_PARAM_BOOL, 0, smx_params, use_length, "False", NULL, "Whether to use the length input as a mask (not supported)."),
};
static const char *const smx_args[] = {"data", NULL};

typedef struct sjob {
    int32_t dt, req, log_out;
    int64_t K, S;
    double invT;
    const void *x, *y, *dy;
    void *o;
} sjob;

static void smx_fwd_range(void *arg, int64_t b, int64_t e) {
    const sjob *j = arg;
    NN_TYPED(j->dt, T, for (int64_t r = b; r < e; r++) {
        int64_t o = r / j->S, s = r % j->S, base = o * j->K * j->S + s;
        const T *x = (const T *)j->x + base; T *y = (T *)j->o + base;
        double mx = -INFINITY;
        for (int64_t k = 0; k < j->K; k++) { double v = x[k * j->S] * j->invT; if (v > mx) mx = v; }
        double sum = 0;
        for (int64_t k = 0; k < j->K; k++) sum += exp(x[k * j->S] * j->invT - mx);
        double ls = log(sum);
        for (int64_t k = 0; k < j->K; k++) {
            double z = x[k * j->S] * j->invT - mx;
            T v = (T)(j->log_out ? z - ls : exp(z) / sum);
            NN_STORE(j->req, y[k * j->S], v);
        }
    });
}

/* Rows [b, e) of float32 softmax along contiguous rows of K, y = x
 * allowed: z = x / T - max, e = exp(z) into y (0 below -87, where e^z is
 * under float's normal range; NaN stays NaN, so a row with a NaN or +inf
 * is all NaN, as in the double path), y *= 1 / sum(e), the sum in double.
 * The max skips NaN as smx_fwd_range's does. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math") /* the selects vectorize: see activation.c */
TC static void smx_rows_f32(const float *x, float *y, int64_t b, int64_t e, int64_t K, float invT) {
    for (int64_t r = b; r < e; r++) {
        const float *xr = x + r * K;
        float *yr = y + r * K;
        float mx = -INFINITY;
        for (int64_t k = 0; k < K; k++) {
            float v = xr[k] * invT;
            mx = v > mx ? v : mx;
        }
        for (int64_t k = 0; k < K; k++) {
            float z = xr[k] * invT - mx;
            float ex = exp_nonpos_f32(z >= -87.0f ? z : -87.0f);
            yr[k] = z >= -87.0f ? ex : z != z ? z : 0.0f;
        }
        double sum = 0;
        for (int64_t k = 0; k < K; k++) sum += yr[k];
        float inv = (float)(1.0 / sum);
        for (int64_t k = 0; k < K; k++) yr[k] *= inv;
    }
}
#pragma GCC pop_options

static void smx_rows_f32_range(void *arg, int64_t b, int64_t e) {
    const sjob *j = arg;
    smx_rows_f32(j->x, j->o, b, e, j->K, (float)j->invT);
}

int nn_softmax_axis(const mxp_op_ctx *ctx, int32_t dt, const void *x, void *y, int32_t req,
                    int64_t O, int64_t K, int64_t S, double temperature, int log_out) {
    sjob j = { dt, req, log_out, K, S, 1.0 / temperature, x, NULL, NULL, y };
    if (dt == MXP_DTYPE_F32 && S == 1 && !log_out && req != MXP_REQ_ADD)
        return nn_parallel(ctx, O, 64, smx_rows_f32_range, &j);
    return nn_parallel(ctx, O * S, 64, smx_fwd_range, &j);
}

static void smx_bwd_range(void *arg, int64_t b, int64_t e) {
    const sjob *j = arg;
    NN_TYPED(j->dt, T, for (int64_t r = b; r < e; r++) {
        int64_t o = r / j->S, s = r % j->S, base = o * j->K * j->S + s;
        const T *y = (const T *)j->y + base, *dy = (const T *)j->dy + base; T *dx = (T *)j->o + base;
        double acc = 0;
        if (j->log_out) for (int64_t k = 0; k < j->K; k++) acc += dy[k * j->S];
        else for (int64_t k = 0; k < j->K; k++) acc += (double)dy[k * j->S] * y[k * j->S];
        for (int64_t k = 0; k < j->K; k++) {
            int64_t i = k * j->S;
            T v = (T)(j->log_out ? (dy[i] - exp((double)y[i]) * acc) * j->invT : y[i] * (dy[i] - acc) * j->invT);
            NN_STORE(j->req, dx[i], v);
        }
    });
}

static int smx_axis(const smx_params *p, int ndim, int64_t *axis) {
    int64_t ax = p->axis < 0 ? p->axis + ndim : p->axis;
    if (ax < 0 || ax >= ndim) return NN_ERR(MXP_EINVAL, "softmax: axis %lld out of range for %d-D data", (long long)p->axis, ndim);
    *axis = ax;
    return MXP_OK;
}

static void split(const int64_t *shape, int ndim, int64_t ax, int64_t *O, int64_t *K, int64_t *S) {
    *O = 1; *S = 1; *K = shape[ax];
    for (int i = 0; i < ax; i++) *O *= shape[i];
    for (int i = (int)ax + 1; i < ndim; i++) *S *= shape[i];
}

static int smx_check_params(mxp_check_params_args *a) {
    const smx_params *p = a->params;
    if (p->use_length) return NN_ERR(MXP_EUNSUPPORTED, "softmax: use_length is not supported");
    if (p->temperature.has_value && p->temperature.value == 0) return NN_ERR(MXP_EINVAL, "softmax: temperature must be nonzero");
    return MXP_OK;
}

static int smx_infer_shape(mxp_infer_shape_args *a) {
    const smx_params *p = a->params;
    int st;
    if (a->in[0].ndim >= 0) {
        int64_t ax = 0;
        if ((st = smx_axis(p, a->in[0].ndim, &ax)) < 0) return st;
        if ((st = nn_shape_assign("softmax", "output", &a->out[0], &a->in[0])) < 0) return st;
    } else if (a->out[0].ndim >= 0 && (st = nn_shape_assign("softmax", "data", &a->in[0], &a->out[0])) < 0) return st;
    return nn_shape_known(&a->in[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

static int run_fwd(const mxp_forward_args *a, int log_out) {
    const smx_params *p = a->params; int32_t dt; int st;
    if ((st = nn_check_float("softmax", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("softmax", a->in, 1)) < 0 || (st = nn_check_contig("softmax", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t ax = 0, O, K, S;
    if ((st = smx_axis(p, a->in[0].ndim, &ax)) < 0) return st;
    split(a->in[0].shape, a->in[0].ndim, ax, &O, &K, &S);
    double T = p->temperature.has_value ? p->temperature.value : 1.0;
    return nn_softmax_axis(a->ctx, dt, nn_ptr(&a->in[0]), nn_ptr(&a->out[0]), a->req[0], O, K, S, T, log_out);
}
static int run_bwd(const mxp_backward_args *a, int log_out) {
    const smx_params *p = a->params; int st;
    if ((st = nn_check_contig("softmax", a->out, 1)) < 0 || (st = nn_check_contig("softmax", a->out_grad, 1)) < 0 ||
        (st = nn_check_contig("softmax", a->in_grad, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t ax = 0, O, K, S;
    if ((st = smx_axis(p, a->out[0].ndim, &ax)) < 0) return st;
    split(a->out[0].shape, a->out[0].ndim, ax, &O, &K, &S);
    double T = p->temperature.has_value ? p->temperature.value : 1.0;
    sjob j = { a->out[0].dtype, a->req[0], log_out, K, S, 1.0 / T, NULL, nn_ptr(&a->out[0]), nn_ptr(&a->out_grad[0]), nn_ptr(&a->in_grad[0]) };
    return nn_parallel(a->ctx, O * S, 64, smx_bwd_range, &j);
}
static int softmax_fwd(const mxp_forward_args *a) { return run_fwd(a, 0); }
static int softmax_bwd(const mxp_backward_args *a) { return run_bwd(a, 0); }
static int log_softmax_fwd(const mxp_forward_args *a) { return run_fwd(a, 1); }
static int log_softmax_bwd(const mxp_backward_args *a) { return run_bwd(a, 1); }

static const mxp_inplace_pair smx_inplace[] = {{0, 0}};
static const char *const softmax_aliases[] = {"_npx_softmax", NULL};
static const char *const log_softmax_aliases[] = {"_npx_log_softmax", NULL};

#define SMX_DEF(NAME, ALIASES, DOC) { \
    .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .aliases = ALIASES, .doc = DOC, \
    .params = smx_schema, .n_params = NN_COUNT(smx_schema), .params_size = sizeof(smx_params), \
    .arg_names = smx_args, .infer_shape = smx_infer_shape, \
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_OUT_DATA, \
    .forward_inplace = smx_inplace, .n_forward_inplace = 1, \
    .check_params = smx_check_params }

static const mxp_op_def softmax_def = SMX_DEF("softmax", softmax_aliases, "Applies the softmax function along an axis.");
static const mxp_op_def log_softmax_def = SMX_DEF("log_softmax", log_softmax_aliases, "Computes the log softmax along an axis.");
static const mxp_op_impl softmax_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "softmax", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = softmax_fwd, .backward = softmax_bwd };
static const mxp_op_impl log_softmax_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "log_softmax", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = log_softmax_fwd, .backward = log_softmax_bwd };

int nn_register_softmax(mxp_registrar *r) {
    int st;
    if ((st = r->add_op(r, &softmax_def)) < 0 || (st = r->add_impl(r, &softmax_impl)) < 0) return st;
    if ((st = r->add_op(r, &log_softmax_def)) < 0 || (st = r->add_impl(r, &log_softmax_impl)) < 0) return st;
    return MXP_OK;
}
