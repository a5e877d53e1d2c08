/* reduce_ext.c — more MXNet 1.x ops on the float64 driver (xop.h):
 *   nansum / nanprod (axis, keepdims, exclude): sum / product treating NaN
 *     as 0 / 1; gradients og (0 at NaN) and og * product of the others;
 *   moments (axes, keepdims): mean and (biased) variance, two outputs;
 *   amp_cast (dtype): AMP's cast, its gradient cast back to the input;
 *   _contrib_div_sqrt_dim: x / sqrt(last dim), as transformer exports use;
 *   _contrib_arange_like (start, step, repeat, axis): start + step *
 *     floor(i / repeat) shaped like the input (or its axis), no gradient.
 * The reductions share one "which output element does input element k
 * feed" map over the reduced axes. */
#include <math.h>

#include "xop.h"

static const char *const data_arg[] = {"data", NULL};

/* ------------------------------------------------------- reduction geometry */
typedef struct red_param {
    mxp_param_shape axis;
    int32_t keepdims, exclude;
} red_param;

/* mask[d] = 1 when axis d is reduced. */
static int red_mask(const mxp_param_shape *axes, int exclude, int nd, int *mask, const char *op) {
    for (int d = 0; d < nd; d++) mask[d] = !axes->has_value || axes->ndim == 0 ? 1 : 0;
    if (axes->has_value && axes->ndim > 0) {
        for (int i = 0; i < axes->ndim; i++) {
            int64_t a;
            if (xop_axis(axes->dims[i], nd, &a))
                return ob_err(MXP_EINVAL, "%s: axis %lld out of range for rank %d", op, (long long)axes->dims[i], nd);
            mask[a] = 1;
        }
        if (exclude)
            for (int d = 0; d < nd; d++) mask[d] = !mask[d];
    }
    return MXP_OK;
}

static int red_out_shape(const mxp_shape *d, const int *mask, int keepdims, mxp_shape *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < d->ndim; i++) {
        if (!mask[i]) o->dims[o->ndim++] = d->dims[i];
        else if (keepdims) o->dims[o->ndim++] = 1;
    }
    if (o->ndim == 0) o->dims[o->ndim++] = 1;
    return MXP_OK;
}

/* Output element of every input element, into map[0..n). */
static void red_map(const xarr *x, const int *mask, int64_t *map) {
    int64_t c[MXP_MAX_NDIM] = {0};
    for (int64_t k = 0; k < x->n; k++) {
        int64_t o = 0;
        for (int d = 0; d < x->nd; d++)
            if (!mask[d]) o = o * x->shape[d] + c[d];
        map[k] = o;
        for (int d = x->nd - 1; d >= 0 && ++c[d] == x->shape[d]; d--) c[d] = 0;
    }
}

static int64_t *map_of(const xarr *x, const int *mask) {
    int64_t *m = ob_host->alloc_host((uint64_t)(x->n ? x->n : 1) * sizeof *m);
    if (m) red_map(x, mask, m);
    return m;
}

static int nan_shape(mxp_infer_shape_args *a) {
    const red_param *p = a->params;
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    int mask[MXP_MAX_NDIM];
    int rc = red_mask(&p->axis, p->exclude, a->in[0].ndim, mask, "nansum");
    if (!rc) rc = red_out_shape(&a->in[0], mask, p->keepdims, &a->out[0]);
    return rc;
}

static int nan_run(xop_io *io, int prod, int back) {
    const red_param *p = io->params;
    const xarr *x = &io->in[0];
    int mask[MXP_MAX_NDIM];
    int rc = red_mask(&p->axis, p->exclude, x->nd, mask, prod ? "nanprod" : "nansum");
    if (rc) return rc;
    int64_t *m = map_of(x, mask);
    if (!m) return ob_err(MXP_ENOMEM, "ops-basic: out of memory");
    if (!back) {
        xarr *o = &io->out[0];
        for (int64_t i = 0; i < o->n; i++) o->v[i] = prod ? 1.0 : 0.0;
        for (int64_t k = 0; k < x->n; k++)
            if (!isnan(x->v[k])) o->v[m[k]] = prod ? o->v[m[k]] * x->v[k] : o->v[m[k]] + x->v[k];
    } else {
        for (int64_t k = 0; k < x->n; k++) {
            if (isnan(x->v[k])) continue;
            double g = io->og[0].v[m[k]];
            if (prod) /* product of the other non-NaN members of k's group */
                for (int64_t j = 0; j < x->n; j++)
                    if (j != k && m[j] == m[k] && !isnan(x->v[j])) g *= x->v[j];
            io->ig[0].v[k] = g;
        }
    }
    ob_host->free_host(m);
    return MXP_OK;
}
static int nansum_f(xop_io *io) { return nan_run(io, 0, 0); }
static int nansum_b(xop_io *io) { return nan_run(io, 0, 1); }
static int nanprod_f(xop_io *io) { return nan_run(io, 1, 0); }
static int nanprod_b(xop_io *io) { return nan_run(io, 1, 1); }
static const xop_info nansum_info = {nansum_f, nansum_b};
static const xop_info nanprod_info = {nanprod_f, nanprod_b};

/* ------------------------------------------------------------------ moments */
typedef struct mom_param {
    mxp_param_shape axes;
    int32_t keepdims, pad;
} mom_param;
static const char *const mom_outputs[] = {"mean", "var", NULL};

static int mom_shape(mxp_infer_shape_args *a) {
    const mom_param *p = a->params;
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    int mask[MXP_MAX_NDIM];
    int rc = red_mask(&p->axes, 0, a->in[0].ndim, mask, "moments");
    if (!rc) rc = red_out_shape(&a->in[0], mask, p->keepdims, &a->out[0]);
    if (!rc) a->out[1] = a->out[0];
    return rc;
}

static int mom_run(xop_io *io, int back) {
    const mom_param *p = io->params;
    const xarr *x = &io->in[0];
    int mask[MXP_MAX_NDIM];
    int rc = red_mask(&p->axes, 0, x->nd, mask, "moments");
    if (rc) return rc;
    int64_t *m = map_of(x, mask);
    int64_t no = back ? io->og[0].n : io->out[0].n;
    double *mean = ob_host->alloc_host((uint64_t)(no ? no : 1) * 2 * sizeof(double));
    if (!m || !mean) {
        if (m) ob_host->free_host(m);
        if (mean) ob_host->free_host(mean);
        return ob_err(MXP_ENOMEM, "ops-basic: out of memory");
    }
    double *var = mean + no, cnt = (double)(x->n / no);
    memset(mean, 0, (size_t)no * 2 * sizeof(double));
    for (int64_t k = 0; k < x->n; k++) mean[m[k]] += x->v[k] / cnt;
    for (int64_t k = 0; k < x->n; k++) var[m[k]] += (x->v[k] - mean[m[k]]) * (x->v[k] - mean[m[k]]) / cnt;
    if (!back) {
        memcpy(io->out[0].v, mean, (size_t)no * sizeof(double));
        memcpy(io->out[1].v, var, (size_t)no * sizeof(double));
    } else {
        for (int64_t k = 0; k < x->n; k++) {
            double gm = io->og[0].v ? io->og[0].v[m[k]] : 0, gv = io->og[1].v ? io->og[1].v[m[k]] : 0;
            io->ig[0].v[k] = gm / cnt + gv * 2 * (x->v[k] - mean[m[k]]) / cnt;
        }
    }
    ob_host->free_host(m);
    ob_host->free_host(mean);
    return MXP_OK;
}
static int mom_f(xop_io *io) { return mom_run(io, 0); }
static int mom_b(xop_io *io) { return mom_run(io, 1); }
static const xop_info mom_info = {mom_f, mom_b};

/* ----------------------------------------------------------------- amp_cast */
typedef struct amp_param {
    int32_t dtype, pad;
} amp_param;
static int same_shape(mxp_infer_shape_args *a) {
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    return MXP_OK;
}
/* Both ways, as MXNet's elementwise shape: a weight's shape inferred by the
 * op that reads the cast (Convolution) reaches the fp32 variable behind it. */
static int amp_shape(mxp_infer_shape_args *a) {
    if (!ob_shape_known(&a->in[0]) && ob_shape_known(&a->out[0])) a->in[0] = a->out[0];
    return same_shape(a);
}
static int amp_type(mxp_infer_type_args *a) {
    const amp_param *p = a->params;
    a->out[0] = p->dtype;
    return a->in[0] < 0 ? MXP_EINCOMPLETE : MXP_OK;
}
/* Straight dtype copies (ob_copy: vectorised between float32 and bfloat16,
 * the mixed-precision training path), not through the float64 driver. */
static int amp_fwd(const mxp_forward_args *a) { return ob_copy(&a->in[0], &a->out[0], a->req[0]); }
static int amp_bwd(const mxp_backward_args *a) { return ob_copy(&a->out_grad[0], &a->in_grad[0], a->req[0]); }

/* ---------------------------------------------------- _contrib_div_sqrt_dim */
static int dsd_f(xop_io *io) {
    double s = sqrt((double)io->in[0].shape[io->in[0].nd - 1]);
    for (int64_t i = 0; i < io->in[0].n; i++) io->out[0].v[i] = io->in[0].v[i] / s;
    return MXP_OK;
}
static int dsd_b(xop_io *io) {
    double s = sqrt((double)io->og[0].shape[io->og[0].nd - 1]);
    for (int64_t i = 0; i < io->og[0].n; i++) io->ig[0].v[i] = io->og[0].v[i] / s;
    return MXP_OK;
}
static const xop_info dsd_info = {dsd_f, dsd_b};

/* ----------------------------------------------------- _contrib_arange_like */
typedef struct al_param {
    double start, step;
    int64_t repeat;
    mxp_param_opt_int axis;
} al_param;
static int al_shape(mxp_infer_shape_args *a) {
    const al_param *p = a->params;
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    if (!p->axis.has_value) {
        a->out[0] = a->in[0];
        return MXP_OK;
    }
    int64_t ax;
    if (xop_axis(p->axis.value, a->in[0].ndim, &ax))
        return ob_err(MXP_EINVAL, "_contrib_arange_like: axis %lld out of range", (long long)p->axis.value);
    memset(&a->out[0], 0, sizeof a->out[0]);
    a->out[0].ndim = 1;
    a->out[0].dims[0] = a->in[0].dims[ax];
    return MXP_OK;
}
static int al_f(xop_io *io) {
    const al_param *p = io->params;
    for (int64_t i = 0; i < io->out[0].n; i++) io->out[0].v[i] = p->start + p->step * (double)(i / p->repeat);
    return MXP_OK;
}
static const xop_info al_info = {al_f, NULL};

/* ------------------------------------------------------------- registration */
static const mxp_param_def red_params[] = {
    MXP_PARAM("axis", MXP_PARAM_SHAPE, 0, red_param, axis, "None", 0, 0, NULL,
              "The axis or axes along which to perform the reduction (None: all)."),
    MXP_PARAM("keepdims", MXP_PARAM_BOOL, 0, red_param, keepdims, "False", 0, 0, NULL,
              "If this is set to True, the reduced axes are left in the result as dimension with size one."),
    MXP_PARAM("exclude", MXP_PARAM_BOOL, 0, red_param, exclude, "False", 0, 0, NULL,
              "Whether to perform reduction on axis that are NOT in axis instead."),
};
static const mxp_param_def mom_params[] = {
    MXP_PARAM("axes", MXP_PARAM_SHAPE, 0, mom_param, axes, "None", 0, 0, NULL, "Array of ints. Axes along which to compute moments."),
    MXP_PARAM("keepdims", MXP_PARAM_BOOL, 0, mom_param, keepdims, "False", 0, 0, NULL,
              "produce moments with the same dimensionality as the input."),
};
static const mxp_param_def amp_params[] = {
    MXP_PARAM("dtype", MXP_PARAM_DTYPE, MXP_PARAM_REQUIRED, amp_param, dtype, NULL, 0, 0, NULL, "Output data type."),
};
static const mxp_param_def al_params[] = {
    MXP_PARAM("start", MXP_PARAM_FLOAT, 0, al_param, start, "0", 0, 0, NULL, "Start of interval."),
    MXP_PARAM("step", MXP_PARAM_FLOAT, 0, al_param, step, "1", 0, 0, NULL, "Spacing between values."),
    MXP_PARAM("repeat", MXP_PARAM_INT, MXP_PARAM_HAS_MIN, al_param, repeat, "1", 1, 0, NULL,
              "The repeating time of all elements."),
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, al_param, axis, "None", 0, 0, NULL,
              "Arange elements according to the size of a certain axis of input array (None: the whole shape)."),
};

#define NP_(A) ((uint32_t)(sizeof(A) / sizeof((A)[0])))
static const mxp_op_def defs[] = {
    { .hdr = MXP_HEADER(mxp_op_def), .name = "nansum", .doc = "Computes the sum of array elements over given axes treating NaN as zero.",
      .params = red_params, .n_params = NP_(red_params), .params_size = sizeof(red_param), .arg_names = data_arg,
      .infer_shape = nan_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "nanprod", .doc = "Computes the product of array elements over given axes treating NaN as one.",
      .params = red_params, .n_params = NP_(red_params), .params_size = sizeof(red_param), .arg_names = data_arg,
      .infer_shape = nan_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "moments", .doc = "Calculate the mean and variance of data.",
      .params = mom_params, .n_params = NP_(mom_params), .params_size = sizeof(mom_param), .arg_names = data_arg,
      .output_names = mom_outputs, .infer_shape = mom_shape, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "amp_cast", .doc = "Cast function between low precision float/FP32 used by AMP.",
      .params = amp_params, .n_params = NP_(amp_params), .params_size = sizeof(amp_param), .arg_names = data_arg,
      .infer_shape = amp_shape, .infer_type = amp_type, .backward_deps = MXP_BWD_OUT_GRAD },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "_contrib_div_sqrt_dim", .doc = "Rescale the input by the square root of the channel dimension.",
      .arg_names = data_arg, .infer_shape = same_shape, .backward_deps = MXP_BWD_OUT_GRAD },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "_contrib_arange_like", .doc = "Return an array with evenly spaced values, shaped like the input.",
      .params = al_params, .n_params = NP_(al_params), .params_size = sizeof(al_param), .arg_names = data_arg,
      .infer_shape = al_shape, .backward_deps = MXP_BWD_OUT_GRAD },
};
static const mxp_op_impl impls[] = {
    XOP_IMPL("nansum", nansum_info), XOP_IMPL("nanprod", nanprod_info), XOP_IMPL("moments", mom_info),
    OB_IMPL("amp_cast", amp_fwd, amp_bwd), XOP_IMPL("_contrib_div_sqrt_dim", dsd_info),
    XOP_IMPL("_contrib_arange_like", al_info),
};

int ob_reg_reduce_ext(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int rc = ob_add_op(r, &defs[i], &impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
