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
 * in double.
 * _mxp_BatchNormReLU: BatchNorm followed by ReLU as one op (the executor's
 * fusion pass, runtime/src/executor/fuse.c, puts it where a BatchNorm's output
 * feeds only an Activation(relu)); same params, inputs, aux states and
 * outputs as BatchNorm, output = max(BatchNorm(x), 0).  float32: the affine
 * pass applies the max, and the backward's two passes take dy only where
 * x*sc + sh > 0, the mask recomputed from x, so the op saves the ReLU's
 * forward pass and backward pass and reads no more than BatchNorm.  sc, sh
 * are computed from the float32 mean/var (the saved outputs, or the moving
 * statistics), so the backward recomputes them, and the mask, exactly;
 * BatchNorm computes them from the double statistics (differences of an
 * ulp).  float64 runs BatchNorm's generic loops and masks with the output.
 * _mxp_BatchNormAddReLU: the same with a fourth argument, addend:
 * output = max(BatchNorm(x) + addend, 0) (the fusion pass's residual
 * pattern); its backward masks dy with the output and hands the masked dy
 * on as the addend's gradient.
 * bfloat16 (a mixed-precision graph, graph/amp.c): data, output and the
 * data gradient (and the addend and its gradient) are bf16, while gamma,
 * beta, the moving statistics, the saved mean/var and the gamma/beta
 * gradients are float32 (bn_infer_type says so; MXNet's and PyTorch's
 * mixed BatchNorm do the same); the passes are batchnorm_bf16.c's, with
 * the float32 path's coefficients and float32/double sums. */
#include "batchnorm_f32.h"
#include "batchnorm_bf16.h"
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

/* data and output share a dtype; the parameters, statistics and aux
 * states are float32 for bfloat16 data, else the data's dtype.  The data
 * dtype comes from data or output; when neither is known the parameters'
 * dtype is taken for it (the default rule's answer before bf16 support). */
static int bn_infer_type(mxp_infer_type_args *a) {
    int32_t d = a->in[0] >= 0 ? a->in[0] : a->out[0];
    for (uint32_t i = 1; i < a->n_in && d < 0; i++)
        if (i != 3 && a->in[i] >= 0) d = a->in[i];
    for (uint32_t i = 0; i < a->n_aux && d < 0; i++) d = a->aux[i];
    if (d < 0 && a->n_in > 3) d = a->in[3];
    if (d < 0) return MXP_EINCOMPLETE;
    int32_t pd = d == MXP_DTYPE_BF16 ? MXP_DTYPE_F32 : d;
    a->in[0] = d;
    a->out[0] = d;
    for (uint32_t i = 1; i < a->n_in; i++) a->in[i] = i == 3 ? d : pd;
    for (uint32_t i = 1; i < a->n_out; i++) a->out[i] = pd;
    for (uint32_t i = 0; i < a->n_aux; i++) a->aux[i] = pd;
    return MXP_OK;
}

/* Checks data dtype d (float32, float64 or bfloat16) and every present
 * tensor against it: data, output and the addend (index 3) in d, the
 * rest in float32 for bf16 data, else in d. */
static int bn_check_types(const char *op, int32_t d, const mxp_tensor *in, uint32_t n_in, const mxp_tensor *out,
                          uint32_t n_out, const mxp_tensor *aux, uint32_t n_aux) {
    if (d != MXP_DTYPE_F32 && d != MXP_DTYPE_F64 && d != MXP_DTYPE_BF16)
        return NN_ERR(MXP_ETYPE, "%s: data dtype %d not supported (float32, float64, bfloat16)", op, d);
    int32_t pd = d == MXP_DTYPE_BF16 ? MXP_DTYPE_F32 : d;
    for (uint32_t i = 0; i < n_in; i++)
        if (in[i].data && in[i].dtype != (i == 0 || i == 3 ? d : pd))
            return NN_ERR(MXP_ETYPE, "%s: input %u has dtype %d, expected %d (data %d)", op, i, in[i].dtype,
                          i == 0 || i == 3 ? d : pd, d);
    for (uint32_t i = 0; out && i < n_out; i++)
        if (out[i].data && out[i].dtype != (i == 0 ? d : pd))
            return NN_ERR(MXP_ETYPE, "%s: output %u has dtype %d, expected %d (data %d)", op, i, out[i].dtype,
                          i == 0 ? d : pd, d);
    for (uint32_t i = 0; aux && i < n_aux; i++)
        if (aux[i].data && aux[i].dtype != pd)
            return NN_ERR(MXP_ETYPE, "%s: aux state %u has dtype %d, expected %d (data %d)", op, i, aux[i].dtype, pd, d);
    return MXP_OK;
}

typedef struct bnjob {
    const bn_params *p;
    int32_t dt, req, req_g, req_b, batch_stats;
    int relu;               /* _mxp_BatchNormReLU */
    const void *res, *yout; /* _mxp_BatchNormAddReLU: addend; the output (backward's mask) */
    void *dres;             /* its gradient (req_r) */
    int32_t req_r;
    int64_t O, C, S;
    const void *x, *gamma, *beta, *dy;
    void *y, *mean, *var, *mm, *mv, *dx, *dg, *db;
} bnjob;

/* ---------------------------------------------------- float32 (batchnorm_f32.c) */
/* The forward's per-channel scale and shift: y = x*sc + sh. */
static void bn_coeffs(const bn_params *p, const float *gamma, const float *beta, int64_t c, double mean, double var,
                      float *sc, float *sh) {
    double g = p->fix_gamma ? 1.0 : gamma[c];
    double k = g / sqrt(var + p->eps);
    *sc = (float)k;
    *sh = (float)(beta[c] - mean * k);
}

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
    const int half = j->dt == MXP_DTYPE_BF16;
    if (j->batch_stats) {
        st = half ? nn_bnh_stats(ctx, j->x, j->O, C, j->S, mean, var) : nn_bnf_stats(ctx, j->x, j->O, C, j->S, mean, var);
        for (int64_t c = 0; c < C && st >= 0; c++) {
            mm[c] = (float)(mm[c] * p->momentum + mean[c] * (1 - p->momentum));
            mv[c] = (float)(mv[c] * p->momentum + var[c] * (1 - p->momentum));
        }
    } else
        for (int64_t c = 0; c < C; c++) mean[c] = mm[c], var[c] = mv[c];
    for (int64_t c = 0; c < C && st >= 0; c++) {
        if (j->mean) ((float *)j->mean)[c] = (float)mean[c];
        if (j->var) ((float *)j->var)[c] = (float)var[c];
        if (j->relu) mean[c] = (float)mean[c], var[c] = (float)var[c]; /* what the backward sees */
        bn_coeffs(p, j->gamma, j->beta, c, mean[c], var[c], &sc[c], &sh[c]);
    }
    if (st >= 0 && j->req != MXP_REQ_NULL)
        st = half ? nn_bnh_apply(ctx, j->x, j->res, j->y, j->O, C, j->S, sc, sh, j->req == MXP_REQ_ADD, j->relu)
                  : nn_bnf_apply(ctx, j->x, j->res, j->y, j->O, C, j->S, sc, sh, j->req == MXP_REQ_ADD, j->relu);
    nn_free(mean);
    return st;
}

/* batch stats: dx = g*inv*(dy - sdy/cnt - (x-mean)*inv*dgamma/cnt), i.e.
 * A*dy + B*(x - mean) + K; global stats: g*inv*dy. */
static int bn_backward_f32(const mxp_op_ctx *ctx, const bnjob *j) {
    const bn_params *p = j->p;
    int64_t C = j->C;
    double *sdy = nn_alloc((uint64_t)C * (2 * sizeof(double) + 5 * sizeof(float)));
    if (!sdy) return NN_ERR(MXP_ENOMEM, "BatchNorm: out of memory (%lld channels)", (long long)C);
    double *sdyx = sdy + C, cnt = (double)(j->O * j->S);
    float *A = (float *)(sdyx + C), *B = A + C, *K = B + C, *msc = NULL, *msh = NULL;
    const float *mean = j->mean, *var = j->var;
    if (j->relu) { /* the forward's sc, sh: the ReLU's mask */
        msc = K + C; msh = msc + C;
        for (int64_t c = 0; c < C; c++) bn_coeffs(p, j->gamma, j->beta, c, mean[c], var[c], &msc[c], &msh[c]);
    }
    const int half = j->dt == MXP_DTYPE_BF16;
    const size_t esize = half ? sizeof(uint16_t) : sizeof(float);
    const void *dy = j->dy;
    void *gtmp = NULL;
    int st;
    if (j->yout) { /* add + ReLU: g = dy masked by the output, into the addend's gradient when it is written */
        void *g = j->req_r == MXP_REQ_WRITE ? j->dres : NULL;
        uint64_t n = (uint64_t)(j->O * C * j->S);
        if (!g && !(g = gtmp = nn_alloc((n ? n : 1) * esize))) {
            nn_free(sdy);
            return NN_ERR(MXP_ENOMEM, "BatchNorm: out of memory (%llu values)", (unsigned long long)n);
        }
        st = half ? nn_bnh_dsums_ymask(ctx, j->x, j->dy, j->yout, g, j->O, C, j->S, mean, sdy, sdyx)
                  : nn_bnf_dsums_ymask(ctx, j->x, j->dy, j->yout, g, j->O, C, j->S, mean, sdy, sdyx);
        if (j->req_r == MXP_REQ_ADD && half) nn_bnh_add_into(j->dres, g, (int64_t)n);
        else if (j->req_r == MXP_REQ_ADD)
            for (uint64_t i = 0; i < n; i++) ((float *)j->dres)[i] += ((const float *)g)[i];
        dy = g;
    } else
        st = half ? nn_bnh_dsums(ctx, j->x, j->dy, j->O, C, j->S, mean, msc, msh, sdy, sdyx)
                  : nn_bnf_dsums(ctx, j->x, j->dy, j->O, C, j->S, mean, msc, msh, sdy, sdyx);
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
        st = half ? nn_bnh_dx(ctx, j->x, dy, j->dx, j->O, C, j->S, mean, A, B, K, msc, msh, j->req == MXP_REQ_ADD)
                  : nn_bnf_dx(ctx, j->x, dy, j->dx, j->O, C, j->S, mean, A, B, K, msc, msh, j->req == MXP_REQ_ADD);
    nn_free(gtmp);
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
    dt = a->in[0].dtype;
    if ((st = bn_check_types("BatchNorm", dt, a->in, 3, a->out, a->n_out, a->aux, a->n_aux)) < 0) return st;
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
    if (dt != MXP_DTYPE_F64) return bn_forward_f32(a->ctx, &j);
    return nn_parallel(a->ctx, j.C, 1, bn_fwd_range, &j);
}

static int bn_backward(const mxp_backward_args *a) {
    const bn_params *p = a->params; int st;
    if ((st = nn_check_contig("BatchNorm", a->in, 3)) < 0 || (st = nn_check_contig("BatchNorm", a->in_grad, 3)) < 0 ||
        (st = nn_check_contig("BatchNorm", a->out_grad, 1)) < 0) return st;
    int32_t dt = a->out_grad[0].dtype;
    if ((st = bn_check_types("BatchNorm", dt, a->in, 3, NULL, 0, NULL, 0)) < 0 ||
        (st = bn_check_types("BatchNorm", dt, a->in_grad, 3, NULL, 0, NULL, 0)) < 0) return st;
    bnjob j; memset(&j, 0, sizeof j);
    j.p = p; j.dt = dt; j.req = a->req[0]; j.req_g = a->req[1]; j.req_b = a->req[2];
    if ((st = bn_prepare(p, &a->in[0], &j)) < 0) return st;
    j.batch_stats = a->ctx->is_train && !p->use_global_stats;
    j.x = nn_ptr(&a->in[0]); j.gamma = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    if (j.batch_stats) { j.mean = nn_ptr(&a->out[1]); j.var = nn_ptr(&a->out[2]); }
    else { j.mean = nn_ptr(&a->aux[0]); j.var = nn_ptr(&a->aux[1]); }
    if (!j.mean || !j.var) return NN_ERR(MXP_EINVAL, "BatchNorm: backward needs the saved mean/var");
    j.dx = nn_ptr(&a->in_grad[0]); j.dg = nn_ptr(&a->in_grad[1]); j.db = nn_ptr(&a->in_grad[2]);
    if (j.dt != MXP_DTYPE_F64) return bn_backward_f32(a->ctx, &j);
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
    .infer_shape = bn_infer_shape, .infer_type = bn_infer_type,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA,
    .declare_backward = bn_declare_backward,
    .n_visible_outputs = 1,
};
static const mxp_op_impl bn_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "BatchNorm", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = bn_forward, .backward = bn_backward,
};

/* ------------------------------------------------ _mxp_BatchNormReLU */
/* y (=|+=) max(t, 0) for n values of dtype dt (float64 path). */
static void relu_put_f64(const double *t, double *y, int64_t n, int32_t req) {
    for (int64_t i = 0; i < n; i++) { double v = t[i] > 0 ? t[i] : 0.0; NN_STORE(req, y[i], v); }
}

/* Forward of both fused ops: BatchNorm with max(., 0) (and, when
 * n_in == 4, the addend in[3] added first) in its affine pass for float32;
 * float64 runs BatchNorm into scratch and adds/clips after. */
static int fused_forward(const mxp_forward_args *a, const char *name, uint32_t n_in) {
    const bn_params *p = a->params; int32_t dt; int st;
    const int has_res = n_in == 4;
    dt = a->in[0].dtype;
    if ((st = bn_check_types(name, dt, a->in, n_in, a->out, a->n_out, a->aux, a->n_aux)) < 0) return st;
    /* the addend is read as a flat array on both paths */
    if (has_res && ((st = nn_check_contig(name, a->in, n_in)) < 0 || (st = nn_check_contig(name, a->out, a->n_out)) < 0))
        return st;
    if (dt != MXP_DTYPE_F64 || a->req[0] == MXP_REQ_NULL) {
        if (!has_res && ((st = nn_check_contig(name, a->in, n_in)) < 0 ||
                         (st = nn_check_contig(name, a->out, a->n_out)) < 0)) return st;
        bnjob j; memset(&j, 0, sizeof j);
        j.p = p; j.dt = dt; j.req = a->req[0]; j.relu = !has_res;
        if ((st = bn_prepare(p, &a->in[0], &j)) < 0) return st;
        j.batch_stats = a->ctx->is_train && !p->use_global_stats;
        j.x = nn_ptr(&a->in[0]); j.gamma = nn_ptr(&a->in[1]); j.beta = nn_ptr(&a->in[2]);
        if (has_res) j.res = nn_ptr(&a->in[3]);
        j.y = nn_ptr(&a->out[0]);
        j.mean = a->n_out > 1 && a->req[1] != MXP_REQ_NULL ? nn_ptr(&a->out[1]) : NULL;
        j.var = a->n_out > 2 && a->req[2] != MXP_REQ_NULL ? nn_ptr(&a->out[2]) : NULL;
        j.mm = nn_ptr(&a->aux[0]); j.mv = nn_ptr(&a->aux[1]);
        if (dt != MXP_DTYPE_F64) return bn_forward_f32(a->ctx, &j);
        return nn_parallel(a->ctx, j.C, 1, bn_fwd_range, &j);
    }
    int64_t n = mxp_tensor_numel(&a->out[0]);
    double *t = nn_alloc((uint64_t)(n > 0 ? n : 1) * sizeof(double));
    if (!t) return NN_ERR(MXP_ENOMEM, "%s: out of memory (%lld values)", name, (long long)n);
    mxp_tensor out[3]; int32_t req[3];
    for (uint32_t i = 0; i < a->n_out && i < 3; i++) out[i] = a->out[i], req[i] = a->req[i];
    out[0].data = t; out[0].byte_offset = 0; out[0].strides = NULL; req[0] = MXP_REQ_WRITE;
    mxp_forward_args b = *a;
    b.out = out; b.req = req;
    st = bn_forward(&b);
    if (st >= 0) {
        if (has_res) {
            const double *r = nn_ptr(&a->in[3]);
            for (int64_t i = 0; i < n; i++) t[i] += r[i];
        }
        relu_put_f64(t, nn_ptr(&a->out[0]), n, a->req[0]);
    }
    nn_free(t);
    return st;
}

static int bnr_forward(const mxp_forward_args *a) { return fused_forward(a, "_mxp_BatchNormReLU", 3); }

/* Backward of both fused ops (n_in 4: with the addend): float32 in
 * BatchNorm's two passes with the mask (from x for the ReLU pair, from the
 * output with the addend, whose gradient is the masked dy); float64 masks
 * dy by the output, writes it as the addend's gradient, then runs
 * BatchNorm's backward on it. */
static int fused_backward(const mxp_backward_args *a, const char *name, uint32_t n_in) {
    const bn_params *p = a->params; int st;
    const int has_res = n_in == 4;
    if ((st = nn_check_contig(name, a->in, n_in)) < 0 || (st = nn_check_contig(name, a->in_grad, n_in)) < 0 ||
        (st = nn_check_contig(name, a->out_grad, 1)) < 0) return st;
    int32_t dt = a->out_grad[0].dtype;
    if ((st = bn_check_types(name, dt, a->in, n_in, NULL, 0, NULL, 0)) < 0 ||
        (st = bn_check_types(name, dt, a->in_grad, n_in, NULL, 0, NULL, 0)) < 0) return st;
    const void *yout = nn_ptr(&a->out[0]);
    if (!yout && (has_res || dt == MXP_DTYPE_F64)) return NN_ERR(MXP_EINVAL, "%s: backward needs the output", name);
    if (dt != MXP_DTYPE_F64) {
        bnjob j; memset(&j, 0, sizeof j);
        j.p = p; j.dt = dt; j.req = a->req[0]; j.req_g = a->req[1]; j.req_b = a->req[2]; j.relu = !has_res;
        if ((st = bn_prepare(p, &a->in[0], &j)) < 0) return st;
        j.batch_stats = a->ctx->is_train && !p->use_global_stats;
        j.x = nn_ptr(&a->in[0]); j.gamma = nn_ptr(&a->in[1]); j.beta = nn_ptr(&a->in[2]);
        j.dy = nn_ptr(&a->out_grad[0]);
        if (has_res) { j.req_r = a->req[3]; j.yout = yout; j.dres = nn_ptr(&a->in_grad[3]); }
        if (j.batch_stats) { j.mean = nn_ptr(&a->out[1]); j.var = nn_ptr(&a->out[2]); }
        else { j.mean = nn_ptr(&a->aux[0]); j.var = nn_ptr(&a->aux[1]); }
        if (!j.mean || !j.var || (!has_res && !j.beta)) return NN_ERR(MXP_EINVAL, "%s: backward needs the saved mean/var", name);
        j.dx = nn_ptr(&a->in_grad[0]); j.dg = nn_ptr(&a->in_grad[1]); j.db = nn_ptr(&a->in_grad[2]);
        return bn_backward_f32(a->ctx, &j);
    }
    const double *y = yout, *dy = nn_ptr(&a->out_grad[0]);
    int64_t n = mxp_tensor_numel(&a->out_grad[0]);
    double *g = nn_alloc((uint64_t)(n > 0 ? n : 1) * sizeof(double));
    if (!g) return NN_ERR(MXP_ENOMEM, "%s: out of memory (%lld values)", name, (long long)n);
    for (int64_t i = 0; i < n; i++) g[i] = y[i] > 0 ? dy[i] : 0.0;
    if (has_res && a->req[3] != MXP_REQ_NULL) {
        double *dr = nn_ptr(&a->in_grad[3]);
        for (int64_t i = 0; i < n; i++) NN_STORE(a->req[3], dr[i], g[i]);
    }
    mxp_tensor og = a->out_grad[0];
    og.data = g; og.byte_offset = 0; og.strides = NULL;
    mxp_backward_args b = *a;
    b.out_grad = &og;
    st = bn_backward(&b);
    nn_free(g);
    return st;
}

static int bnr_backward(const mxp_backward_args *a) { return fused_backward(a, "_mxp_BatchNormReLU", 3); }

/* As BatchNorm's, but the backward also reads the output (the float64
 * path masks with it; float32 recomputes the mask). */
static int bnr_declare_backward(mxp_backward_deps_args *a) {
    for (uint32_t i = 1; i < a->n_out; i++) a->need_out_grad[i] = 0;
    return MXP_OK;
}

static const mxp_op_def bnr_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "_mxp_BatchNormReLU",
    .doc = "BatchNorm followed by ReLU in one op (made by the executor's fusion pass).",
    .params = bn_schema, .n_params = NN_COUNT(bn_schema), .params_size = sizeof(bn_params),
    .arg_names = bn_args, .output_names = bn_outs, .aux_names = bn_aux,
    .infer_shape = bn_infer_shape, .infer_type = bn_infer_type,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA,
    .declare_backward = bnr_declare_backward,
    .n_visible_outputs = 1,
};
static const mxp_op_impl bnr_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "_mxp_BatchNormReLU", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = bnr_forward, .backward = bnr_backward,
};

/* --------------------------------------------- _mxp_BatchNormAddReLU */
/* Inputs data, gamma, beta, addend; output max(BatchNorm(data) + addend,
 * 0).  The residual block's end (conv -> BN -> + shortcut -> ReLU) in one
 * op: the forward's affine pass adds and clips, the backward masks dy
 * with the output in its sums pass and writes the masked dy as the
 * addend's gradient, which the dx pass reads. */
static const char *const bnar_args[] = {"data", "gamma", "beta", "addend", NULL};

static int bnar_infer_shape(mxp_infer_shape_args *a) {
    int st;
    if (a->in[0].ndim < 0 && a->in[3].ndim >= 0) a->in[0] = a->in[3];
    if ((st = bn_infer_shape(a)) < 0 && st != MXP_EINCOMPLETE) return st;
    int s2 = a->in[0].ndim >= 0 ? nn_shape_assign("_mxp_BatchNormAddReLU", "addend", &a->in[3], &a->in[0]) : MXP_OK;
    return s2 < 0 ? s2 : st;
}

static int bnar_forward(const mxp_forward_args *a) { return fused_forward(a, "_mxp_BatchNormAddReLU", 4); }

static int bnar_backward(const mxp_backward_args *a) { return fused_backward(a, "_mxp_BatchNormAddReLU", 4); }

/* The addend is not read by the backward (the output gives the mask). */
static int bnar_declare_backward(mxp_backward_deps_args *a) {
    for (uint32_t i = 1; i < a->n_out; i++) a->need_out_grad[i] = 0;
    if (a->n_in > 3) a->need_in[3] = 0;
    return MXP_OK;
}

static const mxp_op_def bnar_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "_mxp_BatchNormAddReLU",
    .doc = "max(BatchNorm(data) + addend, 0) in one op (made by the executor's fusion pass).",
    .params = bn_schema, .n_params = NN_COUNT(bn_schema), .params_size = sizeof(bn_params),
    .arg_names = bnar_args, .output_names = bn_outs, .aux_names = bn_aux,
    .infer_shape = bnar_infer_shape, .infer_type = bn_infer_type,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA,
    .declare_backward = bnar_declare_backward,
    .n_visible_outputs = 1,
};
static const mxp_op_impl bnar_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "_mxp_BatchNormAddReLU", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = bnar_forward, .backward = bnar_backward,
};

int nn_register_batchnorm(mxp_registrar *r) {
    int st = r->add_op(r, &bn_def);
    if (st >= 0) st = r->add_impl(r, &bn_impl);
    if (st >= 0) st = r->add_op(r, &bnr_def);
    if (st >= 0) st = r->add_impl(r, &bnr_impl);
    if (st >= 0) st = r->add_op(r, &bnar_def);
    return st < 0 ? st : r->add_impl(r, &bnar_impl);
}
