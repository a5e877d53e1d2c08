/* softmax_ce.c — softmax_cross_entropy (MXNet 1.x): data (N, K), label (N,)
 * class indices (float); output (1,) = sum_n -log softmax(data_n)[label_n].
 * Backward: d data = (softmax(data) - onehot(label)) * out_grad[0]; label
 * gets zeros.  f32/f64; labels are clipped to [0, K-1]. */
#include "nn_common.h"
#include <math.h>

static const char *const ce_args[] = {"data", "label", NULL};

static int ce_infer_shape(mxp_infer_shape_args *a) {
    char b1[160], b2[160];
    mxp_shape *d = &a->in[0];
    int st;
    int64_t one = 1;
    mxp_shape o = nn_shape(1, &one);
    if ((st = nn_shape_assign("softmax_cross_entropy", "output", &a->out[0], &o)) < 0) return st;
    if (d->ndim < 0) return MXP_EINCOMPLETE;
    if (d->ndim != 2) return NN_ERR(MXP_ESHAPE, "softmax_cross_entropy: data must be 2-D, got %s", nn_shape_str(d, b1, sizeof b1));
    mxp_shape l = nn_shape(1, &d->dims[0]);
    if (a->in[1].ndim >= 0 && (a->in[1].ndim != 1 || (a->in[1].dims[0] && d->dims[0] && a->in[1].dims[0] != d->dims[0])))
        return NN_ERR(MXP_ESHAPE, "softmax_cross_entropy: label shape %s does not match data %s",
                      nn_shape_str(&a->in[1], b1, sizeof b1), nn_shape_str(d, b2, sizeof b2));
    if ((st = nn_shape_assign("softmax_cross_entropy", "label", &a->in[1], &l)) < 0) return st;
    return nn_shape_known(d) ? MXP_OK : MXP_EINCOMPLETE;
}

static double lab(const mxp_tensor *t, int64_t i) {
    return t->dtype == MXP_DTYPE_F32 ? ((const float *)nn_ptr(t))[i] : ((const double *)nn_ptr(t))[i];
}

static int ce_forward(const mxp_forward_args *a) {
    int st; int32_t dt;
    if ((st = nn_check_float("softmax_cross_entropy", a->in, 2, &dt)) < 0) return st;
    if ((st = nn_check_contig("softmax_cross_entropy", a->in, 2)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int64_t N = a->in[0].shape[0], K = a->in[0].shape[1];
    double loss = 0;
    NN_TYPED(dt, T, const T *x = nn_ptr(&a->in[0]);
        for (int64_t n = 0; n < N; n++) {
            double mx = -INFINITY, s = 0;
            for (int64_t k = 0; k < K; k++) if (x[n * K + k] > mx) mx = x[n * K + k];
            for (int64_t k = 0; k < K; k++) s += exp(x[n * K + k] - mx);
            int64_t l = (int64_t)lab(&a->in[1], n); l = l < 0 ? 0 : l >= K ? K - 1 : l;
            loss += -(x[n * K + l] - mx - log(s));
        }
        NN_STORE(a->req[0], ((T *)nn_ptr(&a->out[0]))[0], (T)loss););
    return MXP_OK;
}

static int ce_backward(const mxp_backward_args *a) {
    int st;
    if ((st = nn_check_contig("softmax_cross_entropy", a->in, 2)) < 0 || (st = nn_check_contig("softmax_cross_entropy", a->in_grad, 2)) < 0) return st;
    int32_t dt = a->in[0].dtype;
    int64_t N = a->in[0].shape[0], K = a->in[0].shape[1];
    if (a->req[0] != MXP_REQ_NULL)
        NN_TYPED(dt, T, const T *x = nn_ptr(&a->in[0]); T *dx = nn_ptr(&a->in_grad[0]);
            double g = ((const T *)nn_ptr(&a->out_grad[0]))[0];
            for (int64_t n = 0; n < N; n++) {
                double mx = -INFINITY, s = 0;
                for (int64_t k = 0; k < K; k++) if (x[n * K + k] > mx) mx = x[n * K + k];
                for (int64_t k = 0; k < K; k++) s += exp(x[n * K + k] - mx);
                int64_t l = (int64_t)lab(&a->in[1], n); l = l < 0 ? 0 : l >= K ? K - 1 : l;
                for (int64_t k = 0; k < K; k++) {
                    T v = (T)(g * (exp(x[n * K + k] - mx) / s - (k == l)));
                    NN_STORE(a->req[0], dx[n * K + k], v);
                }
            });
    if (a->req[1] == MXP_REQ_WRITE || a->req[1] == MXP_REQ_INPLACE)
        memset(nn_ptr(&a->in_grad[1]), 0, (size_t)N * mxp_dtype_size(a->in_grad[1].dtype));
    return MXP_OK;
}

static const mxp_op_def ce_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "softmax_cross_entropy",
    .doc = "Calculate cross entropy of softmax output and one-hot label (summed over the batch).",
    .arg_names = ce_args, .infer_shape = ce_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
};
static const mxp_op_impl ce_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "softmax_cross_entropy", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = ce_forward, .backward = ce_backward,
};

int nn_register_softmax_ce(mxp_registrar *r) {
    int st = r->add_op(r, &ce_def);
    return st < 0 ? st : r->add_impl(r, &ce_impl);
}
