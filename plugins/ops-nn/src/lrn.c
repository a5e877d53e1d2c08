/* lrn.c — LRN (MXNet 1.x), cross-channel local response normalisation:
 *   norm[c] = knorm + alpha/nsize * sum_{|c'-c| <= nsize/2} x[c']^2
 *   y[c]    = x[c] * norm[c]^-beta
 * Params alpha (1e-4), beta (0.75), knorm (2), nsize (required, odd).
 * Outputs output and tmp_norm (internal, kept for backward).  f32/f64,
 * parallel over (n, pixel rows). */
#include "nn_common.h"
#include <math.h>

typedef struct lrn_params { double alpha, beta, knorm; int64_t nsize; } lrn_params;

static const mxp_param_def lrn_schema[] = {
    NN_P("alpha", MXP_PARAM_FLOAT, 0, lrn_params, alpha, "0.0001", NULL, "The variance scaling parameter."),
    NN_P("beta", MXP_PARAM_FLOAT, 0, lrn_params, beta, "0.75", NULL, "The power parameter."),
    NN_P("knorm", MXP_PARAM_FLOAT, 0, lrn_params, knorm, "2", NULL, "The parameter k."),
    NN_PMIN("nsize", MXP_PARAM_INT, MXP_PARAM_REQUIRED, lrn_params, nsize, NULL, 1, "Normalization window width in elements."),
};
static const char *const lrn_args[] = {"data", NULL};
static const char *const lrn_outs[] = {"output", "tmp_norm", NULL};

static int lrn_check_params(mxp_check_params_args *a) {
    const lrn_params *p = a->params;
    if (p->nsize % 2 == 0) return NN_ERR(MXP_EINVAL, "LRN: nsize must be odd, got %lld", (long long)p->nsize);
    return MXP_OK;
}

static int lrn_infer_shape(mxp_infer_shape_args *a) {
    char b[160];
    int st;
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE;
    if (a->in[0].ndim != 4) return NN_ERR(MXP_ESHAPE, "LRN: data must be 4-D NCHW, got %s", nn_shape_str(&a->in[0], b, sizeof b));
    if ((st = nn_shape_assign("LRN", "output", &a->out[0], &a->in[0])) < 0 ||
        (st = nn_shape_assign("LRN", "tmp_norm", &a->out[1], &a->in[0])) < 0) return st;
    return nn_shape_known(&a->in[0]) ? MXP_OK : MXP_EINCOMPLETE;
}

typedef struct ljob { const lrn_params *p; int32_t dt, req; int64_t C, P; const void *x, *dy, *norm; void *y, *nrm, *dx; } ljob;

static void lrn_fwd_range(void *arg, int64_t b, int64_t e) {
    const ljob *j = arg; const lrn_params *p = j->p; int64_t h = p->nsize / 2;
    NN_TYPED(j->dt, T, for (int64_t it = b; it < e; it++) {
        int64_t n = it / j->P, q = it % j->P;
        const T *x = (const T *)j->x + n * j->C * j->P + q; T *y = j->y ? (T *)j->y + n * j->C * j->P + q : NULL;
        T *nr = (T *)j->nrm + n * j->C * j->P + q;
        (void)y;
        for (int64_t c = 0; c < j->C; c++) {
            double s = 0;
            for (int64_t k = c - h; k <= c + h; k++) if (k >= 0 && k < j->C) s += (double)x[k * j->P] * x[k * j->P];
            double nv = p->knorm + p->alpha / (double)p->nsize * s;
            nr[c * j->P] = (T)nv;
            if (j->y) NN_STORE(j->req, y[c * j->P], (T)(x[c * j->P] * pow(nv, -p->beta)));
        }
    });
}

static void lrn_bwd_range(void *arg, int64_t b, int64_t e) {
    const ljob *j = arg; const lrn_params *p = j->p; int64_t h = p->nsize / 2;
    NN_TYPED(j->dt, T, for (int64_t it = b; it < e; it++) {
        int64_t n = it / j->P, q = it % j->P, off = n * j->C * j->P + q;
        const T *x = (const T *)j->x + off, *dy = (const T *)j->dy + off, *nr = (const T *)j->norm + off;
        T *dx = (T *)j->dx + off;
        for (int64_t c = 0; c < j->C; c++) {
            double acc = 0;
            for (int64_t k = c - h; k <= c + h; k++) if (k >= 0 && k < j->C)
                acc += (double)dy[k * j->P] * x[k * j->P] * pow((double)nr[k * j->P], -p->beta - 1);
            double v = dy[c * j->P] * pow((double)nr[c * j->P], -p->beta) - 2 * p->alpha * p->beta / (double)p->nsize * x[c * j->P] * acc;
            NN_STORE(j->req, dx[c * j->P], (T)v);
        }
    });
}

static int lrn_forward(const mxp_forward_args *a) {
    int st; int32_t dt;
    if ((st = nn_check_float("LRN", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("LRN", a->in, 1)) < 0 || (st = nn_check_contig("LRN", a->out, 2)) < 0) return st;
    if (!a->out[1].data) return NN_ERR(MXP_EINVAL, "LRN: tmp_norm output required");
    const int64_t *s = a->in[0].shape;
    ljob j = { a->params, dt, a->req[0], s[1], s[2] * s[3], nn_ptr(&a->in[0]), NULL, NULL, nn_ptr(&a->out[0]), nn_ptr(&a->out[1]), NULL };
    if (j.req == MXP_REQ_NULL) j.y = NULL; /* tmp_norm is still computed for backward */
    return nn_parallel(a->ctx, s[0] * j.P, 256, lrn_fwd_range, &j);
}

static int lrn_backward(const mxp_backward_args *a) {
    int st;
    if ((st = nn_check_contig("LRN", a->in, 1)) < 0 || (st = nn_check_contig("LRN", a->out, 2)) < 0 ||
        (st = nn_check_contig("LRN", a->in_grad, 1)) < 0 || (st = nn_check_contig("LRN", a->out_grad, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    const int64_t *s = a->in[0].shape;
    ljob j = { a->params, a->out_grad[0].dtype, a->req[0], s[1], s[2] * s[3], nn_ptr(&a->in[0]), nn_ptr(&a->out_grad[0]),
               nn_ptr(&a->out[1]), NULL, NULL, nn_ptr(&a->in_grad[0]) };
    return nn_parallel(a->ctx, s[0] * j.P, 256, lrn_bwd_range, &j);
}

static int lrn_declare_backward(mxp_backward_deps_args *a) {
    a->need_out[0] = 0; a->need_out[1] = 1; a->need_out_grad[1] = 0;
    return MXP_OK;
}

static const mxp_op_def lrn_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "LRN", .doc = "Applies local response normalization to the input.",
    .params = lrn_schema, .n_params = NN_COUNT(lrn_schema), .params_size = sizeof(lrn_params),
    .arg_names = lrn_args, .output_names = lrn_outs, .infer_shape = lrn_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA, .declare_backward = lrn_declare_backward,
    .n_visible_outputs = 1, .check_params = lrn_check_params,
};
static const mxp_op_impl lrn_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "LRN", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .forward = lrn_forward, .backward = lrn_backward,
};

int nn_register_lrn(mxp_registrar *r) {
    int st = r->add_op(r, &lrn_def);
    return st < 0 ? st : r->add_impl(r, &lrn_impl);
}
