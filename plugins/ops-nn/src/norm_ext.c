/* norm_ext.c — InstanceNorm (eps), LayerNorm (axis, eps, output_mean_var)
 * and GroupNorm (num_groups, eps, output_mean_var) with MXNet 1.x names,
 * shapes and hidden outputs, on the float64 driver (nn_dense.h).
 *
 * One kernel: the data viewed as (O, K, I), statistics over K (stride I)
 * for each (o, i); the affine parameter of element (o, k, i) is
 * gamma[k] (LayerNorm: per element of the axis) or gamma[o % G] (per
 * instance channel, or per group).  Hidden outputs follow MXNet:
 * InstanceNorm (output, mean, var) with mean/var (N, C); LayerNorm and
 * GroupNorm (output, mean, std) with the data shape reduced on the axis,
 * and (N, G).  Backward recomputes the statistics from the input.
 *   y = gamma * (x - mean) / sqrt(var + eps) + beta   (var biased)
 *   dx = (g dy - mean(g dy) - xhat mean(g dy xhat)) / sqrt(var + eps)
 * output_mean_var=True (mean and std visible) is refused: the host's
 * visible-output count is fixed per op. */
#include <math.h>

#include "nn_dense.h"

enum { NORM_INSTANCE, NORM_LAYER, NORM_GROUP };

typedef struct norm_params {
    double eps;
    int64_t axis, num_groups;
    int32_t output_mean_var, kind;
} norm_params;

static const char *const norm_args[] = {"data", "gamma", "beta", NULL};
static const char *const in_outputs[] = {"output", "mean", "var", NULL};
static const char *const ln_outputs[] = {"output", "mean", "std", NULL};

typedef struct geom {
    int64_t O, K, I, G; /* G: gamma index is o % G, or 0 for gamma[k] */
} geom;

static geom geom_of(int kind, const norm_params *p, const int64_t *d, int nd) {
    geom g = {1, 1, 1, 0};
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= d[i];
    if (kind == NORM_INSTANCE) g.O = d[0] * d[1], g.K = n / g.O, g.G = d[1];
    else if (kind == NORM_GROUP) g.O = d[0] * p->num_groups, g.K = n / g.O, g.G = p->num_groups;
    else {
        int ax = (int)(p->axis < 0 ? p->axis + nd : p->axis);
        for (int i = 0; i < ax; i++) g.O *= d[i];
        g.K = d[ax];
        g.I = n / (g.O * g.K);
    }
    return g;
}

static int norm_shape_kind(mxp_infer_shape_args *a, int kind) {
    const norm_params *p = a->params;
    if (!nn_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    const char *op = kind == NORM_INSTANCE ? "InstanceNorm" : kind == NORM_LAYER ? "LayerNorm" : "GroupNorm";
    mxp_shape pshape, stat;
    memset(&pshape, 0, sizeof pshape);
    memset(&stat, 0, sizeof stat);
    pshape.ndim = 1;
    if (kind == NORM_LAYER) {
        int64_t ax;
        if (nd_axis(p->axis, d->ndim, &ax))
            return NN_ERR(MXP_EINVAL, "LayerNorm: axis %lld out of range for %d-D data", (long long)p->axis, d->ndim);
        pshape.dims[0] = d->dims[ax];
        stat = *d;
        stat.dims[ax] = 1;
    } else {
        if (d->ndim < 3) return NN_ERR(MXP_ESHAPE, "%s: data needs at least 3 dims (N, C, ...)", op);
        if (kind == NORM_GROUP && (p->num_groups < 1 || d->dims[1] % p->num_groups))
            return NN_ERR(MXP_ESHAPE, "GroupNorm: %lld channels do not split into %lld groups", (long long)d->dims[1],
                          (long long)p->num_groups);
        pshape.dims[0] = kind == NORM_GROUP ? p->num_groups : d->dims[1];
        stat.ndim = 2;
        stat.dims[0] = d->dims[0];
        stat.dims[1] = pshape.dims[0];
    }
    int st;
    if ((st = nn_shape_assign(op, "gamma", &a->in[1], &pshape)) < 0 || (st = nn_shape_assign(op, "beta", &a->in[2], &pshape)) < 0)
        return st;
    a->out[0] = *d;
    a->out[1] = stat;
    a->out[2] = stat;
    return MXP_OK;
}

static int in_shape(mxp_infer_shape_args *a) { return norm_shape_kind(a, NORM_INSTANCE); }
static int ln_shape(mxp_infer_shape_args *a) { return norm_shape_kind(a, NORM_LAYER); }
static int gn_shape(mxp_infer_shape_args *a) { return norm_shape_kind(a, NORM_GROUP); }

static void stats(const geom *g, const double *x, int64_t o, int64_t i, double eps, double *mean, double *var) {
    double s = 0, ss = 0;
    int64_t b = o * g->K * g->I + i;
    for (int64_t k = 0; k < g->K; k++) s += x[b + k * g->I];
    *mean = s / (double)g->K;
    for (int64_t k = 0; k < g->K; k++) {
        double d = x[b + k * g->I] - *mean;
        ss += d * d;
    }
    *var = ss / (double)g->K;
    (void)eps;
}

static int norm_fwd_kind(nd_io *io, int kind) {
    const norm_params *p = io->params;
    geom g = geom_of(kind, p, io->in[0].shape, io->in[0].nd);
    const double *x = io->in[0].v, *gamma = io->in[1].v, *beta = io->in[2].v;
    for (int64_t o = 0; o < g.O; o++)
        for (int64_t i = 0; i < g.I; i++) {
            double mean, var;
            stats(&g, x, o, i, p->eps, &mean, &var);
            double inv = 1 / sqrt(var + p->eps);
            io->out[1].v[o * g.I + i] = mean;
            io->out[2].v[o * g.I + i] = kind == NORM_INSTANCE ? var : sqrt(var + p->eps);
            int64_t b = o * g.K * g.I + i;
            for (int64_t k = 0; k < g.K; k++) {
                int64_t gi = g.G ? o % g.G : k;
                io->out[0].v[b + k * g.I] = gamma[gi] * (x[b + k * g.I] - mean) * inv + beta[gi];
            }
        }
    return MXP_OK;
}

static int norm_bwd_kind(nd_io *io, int kind) {
    const norm_params *p = io->params;
    geom g = geom_of(kind, p, io->in[0].shape, io->in[0].nd);
    const double *x = io->in[0].v, *gamma = io->in[1].v, *dy = io->og[0].v;
    for (int64_t o = 0; o < g.O; o++)
        for (int64_t i = 0; i < g.I; i++) {
            double mean, var;
            stats(&g, x, o, i, p->eps, &mean, &var);
            double inv = 1 / sqrt(var + p->eps), m1 = 0, m2 = 0;
            int64_t b = o * g.K * g.I + i;
            for (int64_t k = 0; k < g.K; k++) {
                int64_t e = b + k * g.I, gi = g.G ? o % g.G : k;
                double xhat = (x[e] - mean) * inv, gdy = gamma[gi] * dy[e];
                m1 += gdy;
                m2 += gdy * xhat;
                io->ig[1].v[gi] += dy[e] * xhat;
                io->ig[2].v[gi] += dy[e];
            }
            m1 /= (double)g.K;
            m2 /= (double)g.K;
            for (int64_t k = 0; k < g.K; k++) {
                int64_t e = b + k * g.I, gi = g.G ? o % g.G : k;
                double xhat = (x[e] - mean) * inv;
                io->ig[0].v[e] = (gamma[gi] * dy[e] - m1 - xhat * m2) * inv;
            }
        }
    return MXP_OK;
}

static int in_f(nd_io *io) { return norm_fwd_kind(io, NORM_INSTANCE); }
static int in_b(nd_io *io) { return norm_bwd_kind(io, NORM_INSTANCE); }
static int ln_f(nd_io *io) { return norm_fwd_kind(io, NORM_LAYER); }
static int ln_b(nd_io *io) { return norm_bwd_kind(io, NORM_LAYER); }
static int gn_f(nd_io *io) { return norm_fwd_kind(io, NORM_GROUP); }
static int gn_b(nd_io *io) { return norm_bwd_kind(io, NORM_GROUP); }
static const nd_info in_info = {"InstanceNorm", in_f, in_b};
static const nd_info ln_info = {"LayerNorm", ln_f, ln_b};
static const nd_info gn_info = {"GroupNorm", gn_f, gn_b};

static int norm_check(mxp_check_params_args *a) {
    const norm_params *p = a->params;
    if (p->output_mean_var)
        return NN_ERR(MXP_EUNSUPPORTED, "output_mean_var=True is not supported (mean and std stay hidden outputs)");
    return MXP_OK;
}

static const mxp_param_def in_schema[] = {
    NN_P("eps", MXP_PARAM_FLOAT, 0, norm_params, eps, "0.001", NULL,
         "An epsilon parameter to prevent division by 0."),
};
static const mxp_param_def ln_schema[] = {
    NN_P("axis", MXP_PARAM_INT, 0, norm_params, axis, "-1", NULL, "The axis to perform layer normalization."),
    NN_P("eps", MXP_PARAM_FLOAT, 0, norm_params, eps, "1e-05", NULL, "An epsilon parameter to prevent division by 0."),
    NN_P("output_mean_var", MXP_PARAM_BOOL, 0, norm_params, output_mean_var, "False", NULL,
         "Output the mean and std calculated along the given axis (not supported)."),
};
static const mxp_param_def gn_schema[] = {
    NN_PMIN("num_groups", MXP_PARAM_INT, 0, norm_params, num_groups, "1", 1, "Total number of groups."),
    NN_P("eps", MXP_PARAM_FLOAT, 0, norm_params, eps, "1e-05", NULL, "An epsilon parameter to prevent division by 0."),
    NN_P("output_mean_var", MXP_PARAM_BOOL, 0, norm_params, output_mean_var, "False", NULL,
         "Output the mean and std calculated along the given axis (not supported)."),
};

#define NORMDEF(NAME, DOC, SCHEMA, OUTS, SHAPE)                                                     \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = SCHEMA,                    \
      .n_params = NN_COUNT(SCHEMA), .params_size = sizeof(norm_params), .arg_names = norm_args,     \
      .output_names = OUTS, .infer_shape = SHAPE, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, \
      .n_visible_outputs = 1, .check_params = norm_check }

static const mxp_op_def defs[] = {
    NORMDEF("InstanceNorm", "Applies instance normalization to the n-dimensional input array.", in_schema, in_outputs,
            in_shape),
    NORMDEF("LayerNorm", "Layer normalization over an axis.", ln_schema, ln_outputs, ln_shape),
    NORMDEF("GroupNorm", "Group normalization: channels split into num_groups groups.", gn_schema, ln_outputs,
            gn_shape),
};
static const mxp_op_impl impls[] = {
    ND_IMPL("InstanceNorm", in_info), ND_IMPL("LayerNorm", ln_info), ND_IMPL("GroupNorm", gn_info),
};

int nn_register_norm_ext(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int st = r->add_op(r, &defs[i]);
        if (st < 0 || (st = r->add_impl(r, &impls[i])) < 0) return st;
    }
    return MXP_OK;
}
