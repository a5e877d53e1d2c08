/* batchnorm.c — BatchNorm (MXNet 1.x): inputs data, gamma, beta; aux
 * moving_mean, moving_var; outputs output, mean, var (mean/var are the
 * batch statistics used, var biased; only output is visible — see the
 * n_visible_outputs note in the report).  Params eps (1e-3), momentum
 * (0.9), fix_gamma (True: gamma treated as 1, its gradient 0),
 * use_global_stats, output_mean_var, axis (1), cudnn_off, and the
 * quantisation calib ranges (accepted).  f32/f64.
 * Training forward (is_train && !use_global_stats) normalises with batch
 * statistics and updates the aux states in place:
 *   moving = moving * momentum + batch * (1 - momentum)
 * otherwise the moving statistics are used.  float64 computes in double
 * throughout, per channel in parallel.  float32 (every BatchNorm of a CNN
 * such as ResNet-20) runs batchnorm_f32.c's passes over rows in memory
 * order: forward = one statistics pass (shifted sums) + one affine pass
 * y = x*sc + sh; backward = one pass for the two sums + one element pass
 * dx = A*dy + B*(x - mean) + K, with the per-channel scalars computed here
 * in double. */
#include "batchnorm_f32.h"
#include <math.h>

typedef struct bn_params {
    double eps, momentum;
    mxp_param_opt_float min_calib_range, max_calib_range;
    int64_t axis;
    int32_t fix_gamma, use_global_stats, output_mean_var, cudnn_off;
} bn_params;

static const mxp_param_def bn_schema[] = {
    NN_P("eps", MXP_PARAM_FLOAT, 0, bn_params, eps, "0.001", NULL, "Epsilon to prevent div 0."),
    NN_P("momentum", MXP_PARAM_FLOAT, 0, bn_params, momentum, "0.9", NULL, "Momentum for moving average."),
    NN_P("fix_gamma", MXP_PARAM_BOOL, 0, bn_params, fix_gamma, "True", NULL, "Fix gamma while training."),
    NN_P("use_global_stats", MXP_PARAM_BOOL, 0, bn_params, use_global_stats, "False", NULL, "Whether use global moving statistics instead of local batch-norm."),
    NN_P("output_mean_var", MXP_PARAM_BOOL, 0, bn_params, output_mean_var, "False", NULL, "Output the mean and inverse std."),
    NN_P("axis", MXP_PARAM_INT, 0, bn_params, axis, "1", NULL, "Specify which shape axis the channel is specified."),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, bn_params, cudnn_off, "False", NULL, "Do not select CUDNN operator (ignored on CPU)."),
    NN_P("min_calib_range", MXP_PARAM_OPT_FLOAT, 0, bn_params, min_calib_range, "None", NULL, "Minimum calibration value (quantisation; ignored)."),
    NN_P("max_calib_range", MXP_PARAM_OPT_FLOAT, 0, bn_params, max_calib_range, "None", NULL, "Maximum calibration value (quantisation; ignored)."),
};
static const char *const bn_args[] = {"data", "gamma", "beta", NULL};
static const char *const bn_outs[] = {"output", "mean", "var", NULL};
static const char *const bn_aux[] = {"moving_mean", "moving_var", NULL};

static int bn_axis(const bn_params *p, int nd, int64_t *ax) {
    int64_t a = p->axis < 0 ? p->axis + nd : p->axis;
    if (a < 0 || a >= nd) return NN_ERR(MXP_EINVAL, "BatchNorm: axis %lld out of range for %d-D data", (long long)p->axis, nd);
    *ax = a; return MXP_OK;
}

static int bn_infer_shape(mxp_infer_shape_args *a) {
    const bn_params *p = a->params;
    mxp_shape *d = &a->in[0];
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    int64_t ax = 0; int st;
    if ((st = bn_axis(p, d->ndim, &ax)) < 0) return st;
    mxp_shape c = nn_shape(1, &d->dims[ax]);
    if (d->dims[ax] > 0) {
        if ((st = nn_shape_assign("BatchNorm", "gamma", &a->in[1], &c)) < 0 ||
            (st = nn_shape_assign("BatchNorm", "beta", &a->in[2], &c)) < 0 ||
            (st = nn_shape_assign("BatchNorm", "mean", &a->out[1], &c)) < 0 ||
            (st = nn_shape_assign("BatchNorm", "var", &a->out[2], &c)) < 0 ||
            (st = nn_shape_assign("BatchNorm", "moving_mean", &a->aux[0], &c)) < 0 ||
            (st = nn_shape_assign("BatchNorm", "moving_var", &a->aux[1], &c)) < 0) return st;
    }
    if ((st = nn_shape_assign("BatchNorm", "output", &a->out[0], d)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

typedef struct bnjob {
    const bn_params *p;
    int32_t dt, req, req_g, req_b, batch_stats;
    int64_t O, C, S;
    const void *x, *gamma, *beta, *dy;
    void *y, *mean, *var, *mm, *mv, *dx, *dg, *db;
} bnjob;

/* ---------------------------------------------------- float32 (batchnorm_f32.c) */
/* Per-channel scalars of the forward (sc, sh) or the backward (A, B, K)
 * are computed here in double, the passes over the data there. */
static int bn_forward_f32(const mxp_op_ctx *ctx, const bnjob *j) {
    const bn_params *p = j->p;
    int64_t C = j->C;
    double *mean = nn_alloc((uint64_t)C * (2 * sizeof(double) + 2 * sizeof(float)));
    if (!mean) return NN_ERR(MXP_ENOMEM, "BatchNorm: out of memory (%lld channels)", (long long)C);
    double *var = mean + C;
    float *sc = (float *)(var + C), *sh = sc + C;
    int st = MXP_OK;
    float *mm = j->mm, *mv = j->mv;
    if (j->batch_stats) {
        st = nn_bnf_stats(ctx, j->x, j->O, C, j->S, mean, var);
        for (int64_t c = 0; c < C && st >= 0; c++) {
            mm[c] = (float)(mm[c] * p->momentum + mean[c] * (1 - p->momentum));
            mv[c] = (float)(mv[c] * p->momentum + var[c] * (1 - p->momentum));
        }
    } else
        for (int64_t c = 0; c < C; c++) mean[c] = mm[c], var[c] = mv[c];
    for (int64_t c = 0; c < C && st >= 0; c++) {
        if (j->mean) ((float *)j->mean)[c] = (float)mean[c];
        if (j->var) ((float *)j->var)[c] = (float)var[c];
        double g = p->fix_gamma ? 1.0 : ((const float *)j->gamma)[c], be = ((const float *)j->beta)[c];
        double k = g / sqrt(var[c] + p->eps);
        sc[c] = (float)k;
        sh[c] = (float)(be - mean[c] * k);
    }
    if (st >= 0 && j->req != MXP_REQ_NULL) st = nn_bnf_apply(ctx, j->x, j->y, j->O, C, j->S, sc, sh, j->req == MXP_REQ_ADD);
    nn_free(mean);
    return st;
}

/* batch stats: dx = g*inv*(dy - sdy/cnt - (x-mean)*inv*dgamma/cnt), i.e.
 * A*dy + B*(x - mean) + K; global stats: g*inv*dy. */
static int bn_backward_f32(const mxp_op_ctx *ctx, const bnjob *j) {
    const bn_params *p = j->p;
    int64_t C = j->C;
    double *sdy = nn_alloc((uint64_t)C * (2 * sizeof(double) + 3 * sizeof(float)));
    if (!sdy) return NN_ERR(MXP_ENOMEM, "BatchNorm: out of memory (%lld channels)", (long long)C);
    double *sdyx = sdy + C, cnt = (double)(j->O * j->S);
    float *A = (float *)(sdyx + C), *B = A + C, *K = B + C;
    const float *mean = j->mean, *var = j->var;
    int st = nn_bnf_dsums(ctx, j->x, j->dy, j->O, C, j->S, mean, sdy, sdyx);
    for (int64_t c = 0; c < C && st >= 0; c++) {
        double inv = 1.0 / sqrt((double)var[c] + p->eps);
        double g = p->fix_gamma ? 1.0 : ((const float *)j->gamma)[c];
        double dgamma = sdyx[c] * inv;
        if (j->req_b != MXP_REQ_NULL) NN_STORE(j->req_b, ((float *)j->db)[c], (float)sdy[c]);
        if (j->req_g != MXP_REQ_NULL) NN_STORE(j->req_g, ((float *)j->dg)[c], (float)(p->fix_gamma ? 0.0 : dgamma));
        A[c] = (float)(g * inv);
        B[c] = j->batch_stats ? (float)(-g * inv * inv * dgamma / cnt) : 0.0f;
        K[c] = j->batch_stats ? (float)(-g * inv * sdy[c] / cnt) : 0.0f;
    }
    if (st >= 0 && j->req != MXP_REQ_NULL)
        st = nn_bnf_dx(ctx, j->x, j->dy, j->dx, j->O, C, j->S, mean, A, B, K, j->req == MXP_REQ_ADD);
    nn_free(sdy);
    return st;
}

/* ------------------------------------------------------ generic (f64) */
static void bn_fwd_range(void *arg, int64_t b, int64_t e) {
    const bnjob *j = arg; const bn_params *p = j->p;
    NN_TYPED(j->dt, T, for (int64_t c = b; c < e; c++) {
        const T *x = j->x; T *y = j->y;
        double mean, var, cnt = (double)(j->O * j->S);
        if (j->batch_stats) {
            double s = 0, s2 = 0;
            for (int64_t o = 0; o < j->O; o++) { const T *xr = x + (o * j->C + c) * j->S;
                for (int64_t i = 0; i < j->S; i++) s += xr[i]; }
            mean = s / cnt;
            for (int64_t o = 0; o < j->O; o++) { const T *xr = x + (o * j->C + c) * j->S;
                for (int64_t i = 0; i < j->S; i++) { double d = xr[i] - mean; s2 += d * d; } }
            var = s2 / cnt;
            T *mm = j->mm, *mv = j->mv;
            mm[c] = (T)(mm[c] * p->momentum + mean * (1 - p->momentum));
            mv[c] = (T)(mv[c] * p->momentum + var * (1 - p->momentum));
        } else { mean = ((const T *)j->mm)[c]; var = ((const T *)j->mv)[c]; }
        if (j->mean) ((T *)j->mean)[c] = (T)mean;
        if (j->var) ((T *)j->var)[c] = (T)var;
        double g = p->fix_gamma ? 1.0 : ((const T *)j->gamma)[c], be = ((const T *)j->beta)[c];
        double sc = g / sqrt(var + p->eps), sh = be - mean * sc;
        if (j->req != MXP_REQ_NULL)
            for (int64_t o = 0; o < j->O; o++) { const T *xr = x + (o * j->C + c) * j->S; T *yr = y + (o * j->C + c) * j->S;
                for (int64_t i = 0; i < j->S; i++) { T v = (T)(xr[i] * sc + sh); NN_STORE(j->req, yr[i], v); } }
    });
}

static void bn_bwd_range(void *arg, int64_t b, int64_t e) {
    const bnjob *j = arg; const bn_params *p = j->p;
    NN_TYPED(j->dt, T, for (int64_t c = b; c < e; c++) {
        const T *x = j->x, *dy = j->dy;
        double mean = ((const T *)j->mean)[c], var = ((const T *)j->var)[c], cnt = (double)(j->O * j->S);
        double inv = 1.0 / sqrt(var + p->eps);
        double g = p->fix_gamma ? 1.0 : ((const T *)j->gamma)[c];
        double sdy = 0, sdyx = 0;
        for (int64_t o = 0; o < j->O; o++) { int64_t base = (o * j->C + c) * j->S;
            for (int64_t i = 0; i < j->S; i++) { sdy += dy[base + i]; sdyx += dy[base + i] * (x[base + i] - mean); } }
        double dgamma = sdyx * inv;
        if (j->req_b != MXP_REQ_NULL) NN_STORE(j->req_b, ((T *)j->db)[c], (T)sdy);
        if (j->req_g != MXP_REQ_NULL) NN_STORE(j->req_g, ((T *)j->dg)[c], (T)(p->fix_gamma ? 0.0 : dgamma));
        if (j->req == MXP_REQ_NULL) continue;
        T *dx = j->dx;
        for (int64_t o = 0; o < j->O; o++) { int64_t base = (o * j->C + c) * j->S;
            for (int64_t i = 0; i < j->S; i++) {
                double v;
                if (j->batch_stats) {
                    double xh = (x[base + i] - mean) * inv;
                    v = g * inv * (dy[base + i] - sdy / cnt - xh * dgamma / cnt);
                } else v = g * inv * dy[base + i];
                NN_STORE(j->req, dx[base + i], (T)v);
            } }
    });
}

static int bn_prepare(const bn_params *p, const mxp_tensor *x, bnjob *j) {
    int64_t ax = 0; int st;
    if ((st = bn_axis(p, x->ndim, &ax)) < 0) return st;
    j->O = 1; j->S = 1; j->C = x->shape[ax];
    for (int i = 0; i < ax; i++) j->O *= x->shape[i];
    for (int i = (int)ax + 1; i < x->ndim; i++) j->S *= x->shape[i];
    return MXP_OK;
}

static int bn_forward(const mxp_forward_args *a) {
    const bn_params *p = a->params; int32_t dt; int st;
    if ((st = nn_check_float("BatchNorm", a->in, 3, &dt)) < 0) return st;
    if ((st = nn_check_contig("BatchNorm", a->in, 3)) < 0 || (st = nn_check_contig("BatchNorm", a->out, a->n_out)) < 0) return st;
    bnjob j; memset(&j, 0, sizeof j);
    j.p = p; j.dt = dt; j.req = a->req[0];
    if ((st = bn_prepare(p, &a->in[0], &j)) < 0) return st;
    j.batch_stats = a->ctx->is_train && !p->use_global_stats;
    j.x = nn_ptr(&a->in[0]); j.gamma = nn_ptr(&a->in[1]); j.beta = nn_ptr(&a->in[2]);
    j.y = nn_ptr(&a->out[0]);
    j.mean = a->n_out > 1 && a->req[1] != MXP_REQ_NULL ? nn_ptr(&a->out[1]) : NULL;
    j.var = a->n_out > 2 && a->req[2] != MXP_REQ_NULL ? nn_ptr(&a->out[2]) : NULL;
    j.mm = nn_ptr(&a->aux[0]); j.mv = nn_ptr(&a->aux[1]);
    if (dt == MXP_DTYPE_F32) return bn_forward_f32(a->ctx, &j);
    return nn_parallel(a->ctx, j.C, 1, bn_fwd_range, &j);
}

static int bn_backward(const mxp_backward_args *a) {
    const bn_params *p = a->params; int st;
    if ((st = nn_check_contig("BatchNorm", a->in, 3)) < 0 || (st = nn_check_contig("BatchNorm", a->in_grad, 3)) < 0 ||
        (st = nn_check_contig("BatchNorm", a->out_grad, 1)) < 0) return st;
    bnjob j; memset(&j, 0, sizeof j);
    j.p = p; j.dt = a->out_grad[0].dtype; j.req = a->req[0]; j.req_g = a->req[1]; j.req_b = a->req[2];
    if ((st = bn_prepare(p, &a->in[0], &j)) < 0) return st;
    j.batch_stats = a->ctx->is_train && !p->use_global_stats;
    j.x = nn_ptr(&a->in[0]); j.gamma = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    if (j.batch_stats) { j.mean = nn_ptr(&a->out[1]); j.var = nn_ptr(&a->out[2]); }
    else { j.mean = nn_ptr(&a->aux[0]); j.var = nn_ptr(&a->aux[1]); }
    if (!j.mean || !j.var) return NN_ERR(MXP_EINVAL, "BatchNorm: backward needs the saved mean/var");
    j.dx = nn_ptr(&a->in_grad[0]); j.dg = nn_ptr(&a->in_grad[1]); j.db = nn_ptr(&a->in_grad[2]);
    if (j.dt == MXP_DTYPE_F32) return bn_backward_f32(a->ctx, &j);
    return nn_parallel(a->ctx, j.C, 1, bn_bwd_range, &j);
}

static int bn_declare_backward(mxp_backward_deps_args *a) {
    a->need_out[0] = 0;
    for (uint32_t i = 1; i < a->n_out; i++) a->need_out_grad[i] = 0;
    return MXP_OK;
}

static const mxp_op_def bn_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "BatchNorm", .doc = "Batch normalization.",
    .params = bn_schema, .n_params = NN_COUNT(bn_schema), .params_size = sizeof(bn_params),
    .arg_names = bn_args, .output_names = bn_outs, .aux_names = bn_aux,
    .infer_shape = bn_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA,
    .declare_backward = bn_declare_backward,
    .n_visible_outputs = 1,
};
static const mxp_op_impl bn_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "BatchNorm", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = bn_forward, .backward = bn_backward,
};

int nn_register_batchnorm(mxp_registrar *r) {
    int st = r->add_op(r, &bn_def);
    return st < 0 ? st : r->add_impl(r, &bn_impl);
}
