/* reduce.c — reductions with MXNet 1.x names and parameters: sum (alias
 * sum_axis), mean, max (max_axis), min (min_axis), prod, norm (ord 1 or 2)
 * over `axis` (tuple or None = all) with keepdims and exclude, and
 * argmax / argmin over an optional int axis (None = flattened) with
 * keepdims.  As in MXNet 1.x, reducing everything without keepdims gives
 * shape (1,), and argmax/argmin return indices in the input's dtype.
 *
 * The input is split into kept and reduced dimensions (rplan); each output
 * element accumulates in double over its reduced sub-block, reading through
 * strides, so views need no copy.  Backward visits every input element once,
 * so req write and add are both honoured element by element.
 * Gradients: sum/mean broadcast out_grad; max/min send it to every element
 * equal to the result (MXNet's convention); prod uses out/in; norm x/|x|
 * (ord 2) or sign(x) (ord 1); argmax/argmin have zero gradient. */
#include <math.h>

#include "common.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_NORM, R_ARGMAX, R_ARGMIN };

typedef struct red_param {
    mxp_param_shape axis;
    int32_t keepdims, exclude;
    int64_t ord;                /* norm */
    int32_t out_dtype;          /* norm: index into norm_dtypes */
    mxp_param_opt_int iaxis;    /* argmax/argmin */
} red_param;

static const char *const norm_dtypes[] = {"None", "float16", "float32", "float64", "int32",
                                          "int64", "int8", NULL};
static const int32_t norm_dtype_val[] = {-1, MXP_DTYPE_F16, MXP_DTYPE_F32, MXP_DTYPE_F64,
                                         MXP_DTYPE_I32, MXP_DTYPE_I64, MXP_DTYPE_I8};

static int is_arg(int kind) { return kind == R_ARGMAX || kind == R_ARGMIN; }

/* mask[d] = 1 when dimension d is reduced. */
static int reduce_mask(const red_param *p, int kind, int nd, uint8_t *mask) {
    memset(mask, 0, MXP_MAX_NDIM);
    if (is_arg(kind)) {
        if (!p->iaxis.has_value) {
            for (int d = 0; d < nd; d++) mask[d] = 1;
            return MXP_OK;
        }
        int64_t a = p->iaxis.value < 0 ? p->iaxis.value + nd : p->iaxis.value;
        if (a < 0 || a >= nd)
            return ob_err(MXP_EINVAL, "axis %lld out of range for rank %d", (long long)p->iaxis.value, nd);
        mask[a] = 1;
        return MXP_OK;
    }
    if (!p->axis.has_value || p->axis.ndim == 0) {
        /* None or (): every axis (exclude of nothing is everything too) */
        for (int d = 0; d < nd; d++) mask[d] = 1;
        return MXP_OK;
    }
    for (int i = 0; i < p->axis.ndim; i++) {
        int64_t a = p->axis.dims[i] < 0 ? p->axis.dims[i] + nd : p->axis.dims[i];
        if (a < 0 || a >= nd)
            return ob_err(MXP_EINVAL, "axis %lld out of range for rank %d", (long long)p->axis.dims[i], nd);
        if (mask[a]) return ob_err(MXP_EINVAL, "axis %lld given twice", (long long)p->axis.dims[i]);
        mask[a] = 1;
    }
    if (p->exclude)
        for (int d = 0; d < nd; d++) mask[d] = !mask[d];
    return MXP_OK;
}

static int keepdims_of(const red_param *p) { return p->keepdims; }

static int red_infer_shape(mxp_infer_shape_args *a) {
    const red_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    uint8_t mask[MXP_MAX_NDIM];
    int rc = reduce_mask(p, kind, in->ndim, mask);
    if (rc) return rc;
    mxp_shape *o = &a->out[0];
    o->ndim = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (!mask[d]) o->dims[o->ndim++] = in->dims[d];
        else if (keepdims_of(p)) o->dims[o->ndim++] = 1;
    }
    if (o->ndim == 0) { o->ndim = 1; o->dims[0] = 1; }
    return MXP_OK;
}

static int norm_infer_type(mxp_infer_type_args *a) {
    const red_param *p = a->params;
    if (a->in[0] < 0) return MXP_EINCOMPLETE;
    a->out[0] = p->out_dtype > 0 ? norm_dtype_val[p->out_dtype] : a->in[0];
    return MXP_OK;
}

/* Kept / reduced split of one tensor's strides. */
typedef struct rplan {
    int nk, nr;
    int64_t kshape[MXP_MAX_NDIM], rshape[MXP_MAX_NDIM];
    int64_t kst[MXP_MAX_NDIM], rst[MXP_MAX_NDIM];
    int64_t nkept, nred;
} rplan;

static void rplan_build(rplan *pl, const mxp_tensor *t, const uint8_t *mask) {
    ob_view v;
    ob_view_of(&v, t);
    pl->nk = pl->nr = 0;
    pl->nkept = pl->nred = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (mask[d]) {
            pl->rshape[pl->nr] = v.shape[d];
            pl->rst[pl->nr++] = v.strides[d];
            pl->nred *= v.shape[d];
        } else {
            pl->kshape[pl->nk] = v.shape[d];
            pl->kst[pl->nk++] = v.strides[d];
            pl->nkept *= v.shape[d];
        }
    }
}

static int64_t unravel_off(int64_t lin, int n, const int64_t *shape, const int64_t *st) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % shape[d]) * st[d];
        lin /= shape[d];
    }
    return off;
}

static double reduce_one(int kind, int64_t ord, const char *base, int32_t dt, uint32_t es,
                         const rplan *pl, int64_t koff) {
    double acc = kind == R_PROD ? 1.0 : kind == R_MAX || kind == R_ARGMAX ? -INFINITY
               : kind == R_MIN || kind == R_ARGMIN ? INFINITY : 0.0;
    int64_t best = 0;
    int64_t idx[MXP_MAX_NDIM] = {0}, off = koff;
    for (int64_t r = 0; r < pl->nred; r++) {
        double v = ob_load(base + off * es, dt);
        switch (kind) {
        case R_SUM: case R_MEAN: acc += v; break;
        case R_MAX: if (v > acc || isnan(v)) acc = v; break;
        case R_MIN: if (v < acc || isnan(v)) acc = v; break;
        case R_PROD: acc *= v; break;
        case R_NORM: acc += ord == 1 ? fabs(v) : v * v; break;
        case R_ARGMAX: if (v > acc) { acc = v; best = r; } break;
        case R_ARGMIN: if (v < acc) { acc = v; best = r; } break;
        }
        for (int d = pl->nr - 1; d >= 0; d--) {
            off += pl->rst[d];
            if (++idx[d] < pl->rshape[d]) break;
            off -= pl->rst[d] * pl->rshape[d];
            idx[d] = 0;
        }
    }
    if (kind == R_MEAN) acc /= (double)pl->nred;
    if (kind == R_NORM && ord != 1) acc = sqrt(acc);
    if (is_arg(kind)) acc = (double)best;
    return acc;
}

static int red_forward(const mxp_forward_args *a) {
    const red_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_tensor *x = &a->in[0], *y = &a->out[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    uint8_t mask[MXP_MAX_NDIM];
    int rc = reduce_mask(p, kind, x->ndim, mask);
    if (rc) return rc;
    rplan pl;
    rplan_build(&pl, x, mask);
    if (pl.nkept != mxp_tensor_numel(y))
        return ob_err(MXP_ESHAPE, "reduce: output has %lld elements, want %lld",
                      (long long)mxp_tensor_numel(y), (long long)pl.nkept);
    if (pl.nred == 0 && is_arg(kind)) return ob_err(MXP_EINVAL, "argmax/argmin of an empty axis");
    ob_it oit;
    ob_it_init(&oit, y, 0);
    const char *xb = ob_base(x);
    char *yb = ob_base(y);
    uint32_t es = mxp_dtype_size(x->dtype), os = mxp_dtype_size(y->dtype);
    for (int64_t k = 0; k < pl.nkept; k++, ob_it_next(&oit)) {
        int64_t koff = unravel_off(k, pl.nk, pl.kshape, pl.kst);
        double v = reduce_one(kind, p->ord, xb, x->dtype, es, &pl, koff);
        ob_store_req(yb + oit.off * os, y->dtype, v, a->req[0]);
    }
    return MXP_OK;
}

static int red_backward(const mxp_backward_args *a) {
    const red_param *p = a->params;
    int kind = (int)(intptr_t)a->user_data;
    const mxp_tensor *g = &a->in_grad[0];
    int req = a->req[0];
    if (req == MXP_REQ_NULL) return MXP_OK;
    if (is_arg(kind)) return ob_fill(g, 0.0, req);
    const mxp_tensor *x = &a->in[0], *y = &a->out[0], *og = &a->out_grad[0];
    uint8_t mask[MXP_MAX_NDIM];
    int rc = reduce_mask(p, kind, g->ndim, mask);
    if (rc) return rc;
    rplan gp, xp;
    rplan_build(&gp, g, mask);
    int need_x = kind != R_SUM && kind != R_MEAN;
    if (need_x) {
        if (!x->data || !y->data) return ob_err(MXP_EINVAL, "reduce backward needs input and output");
        rplan_build(&xp, x, mask);
    }
    ob_it oit, yit;
    ob_it_init(&oit, og, 0);
    if (need_x) ob_it_init(&yit, y, 0);
    char *gb = ob_base(g);
    const char *ogb = ob_base(og), *xb = need_x ? ob_base(x) : NULL, *yb = need_x ? ob_base(y) : NULL;
    uint32_t gs = mxp_dtype_size(g->dtype), ogs = mxp_dtype_size(og->dtype);
    uint32_t xs = need_x ? mxp_dtype_size(x->dtype) : 0, ys = need_x ? mxp_dtype_size(y->dtype) : 0;
    for (int64_t k = 0; k < gp.nkept; k++) {
        double o = ob_load(ogb + oit.off * ogs, og->dtype);
        double yv = need_x ? ob_load(yb + yit.off * ys, y->dtype) : 0;
        int64_t goff = unravel_off(k, gp.nk, gp.kshape, gp.kst);
        int64_t xoff = need_x ? unravel_off(k, xp.nk, xp.kshape, xp.kst) : 0;
        int64_t idx[MXP_MAX_NDIM] = {0};
        for (int64_t r = 0; r < gp.nred; r++) {
            double v = o, xv = need_x ? ob_load(xb + xoff * xs, x->dtype) : 0;
            switch (kind) {
            case R_MEAN: v = o / (double)gp.nred; break;
            case R_MAX: case R_MIN: v = xv == yv ? o : 0.0; break;
            case R_PROD: v = o * yv / xv; break;
            case R_NORM:
                v = p->ord == 1 ? o * (double)((xv > 0) - (xv < 0)) : yv == 0 ? 0.0 : o * xv / yv;
                break;
            default: break;
            }
            ob_store_req(gb + goff * gs, g->dtype, v, req);
            for (int d = gp.nr - 1; d >= 0; d--) {
                goff += gp.rst[d];
                if (need_x) xoff += xp.rst[d];
                if (++idx[d] < gp.rshape[d]) break;
                goff -= gp.rst[d] * gp.rshape[d];
                if (need_x) xoff -= xp.rst[d] * xp.rshape[d];
                idx[d] = 0;
            }
        }
        ob_it_next(&oit);
        if (need_x) ob_it_next(&yit);
    }
    return MXP_OK;
}

static int norm_check(mxp_check_params_args *a) {
    const red_param *p = a->params;
    if (p->ord != 1 && p->ord != 2) return ob_err(MXP_EINVAL, "norm: ord must be 1 or 2, got %lld", (long long)p->ord);
    return MXP_OK;
}

#define AXIS_P MXP_PARAM("axis", MXP_PARAM_SHAPE, 0, red_param, axis, "None", 0, 0, NULL, \
    "Axes to reduce; None reduces all")
#define KEEP_P MXP_PARAM("keepdims", MXP_PARAM_BOOL, 0, red_param, keepdims, "False", 0, 0, NULL, \
    "Keep reduced axes with size 1")
#define EXCL_P MXP_PARAM("exclude", MXP_PARAM_BOOL, 0, red_param, exclude, "False", 0, 0, NULL, \
    "Reduce every axis except those in axis")

static const mxp_param_def red_params[] = {AXIS_P, KEEP_P, EXCL_P};
static const mxp_param_def norm_params[] = {
    MXP_PARAM("ord", MXP_PARAM_INT, 0, red_param, ord, "2", 0, 0, NULL, "Order of the norm: 1 or 2"),
    AXIS_P,
    MXP_PARAM("out_dtype", MXP_PARAM_ENUM, 0, red_param, out_dtype, "None", 0, 0, norm_dtypes,
              "Output dtype (None: as input)"),
    KEEP_P,
};
static const mxp_param_def arg_params[] = {
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, red_param, iaxis, "None", 0, 0, NULL,
              "Axis; None searches the flattened array"),
    KEEP_P,
};

static const char *const al_sum[] = {"sum_axis", NULL};
static const char *const al_max[] = {"max_axis", NULL};
static const char *const al_min[] = {"min_axis", NULL};
static const char *const data_arg[] = {"data", NULL};

#define RDEF(NAME, AL, PARAMS, NP, KIND, DEPS, ITYPE, CHECK, DOC)                       \
    { MXP_HEADER(mxp_op_def), NAME, AL, DOC, PARAMS, NP, sizeof(red_param), data_arg,   \
      NULL, NULL, NULL, NULL, NULL, red_infer_shape, ITYPE, 0, DEPS, NULL, NULL, 0, 0,  \
      NULL, NULL, 0, 0, 0, 0, CHECK, (void *)(intptr_t)(KIND) }
#define ALLDEPS (MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA | MXP_BWD_OUT_DATA)

static const mxp_op_def red_defs[] = {
    RDEF("sum", al_sum, red_params, 3, R_SUM, MXP_BWD_OUT_GRAD, NULL, NULL, "Sum over axes."),
    RDEF("mean", NULL, red_params, 3, R_MEAN, MXP_BWD_OUT_GRAD, NULL, NULL, "Mean over axes."),
    RDEF("max", al_max, red_params, 3, R_MAX, ALLDEPS, NULL, NULL, "Maximum over axes."),
    RDEF("min", al_min, red_params, 3, R_MIN, ALLDEPS, NULL, NULL, "Minimum over axes."),
    RDEF("prod", NULL, red_params, 3, R_PROD, ALLDEPS, NULL, NULL, "Product over axes."),
    RDEF("norm", NULL, norm_params, 4, R_NORM, ALLDEPS, norm_infer_type, norm_check,
         "L1 or L2 norm over axes."),
    RDEF("argmax", NULL, arg_params, 2, R_ARGMAX, 0, NULL, NULL,
         "Index of the maximum along an axis (as the input dtype)."),
    RDEF("argmin", NULL, arg_params, 2, R_ARGMIN, 0, NULL, NULL,
         "Index of the minimum along an axis (as the input dtype)."),
};

static const mxp_op_impl red_impls[] = {
    OB_IMPL_UD("sum", red_forward, red_backward, (intptr_t)R_SUM),    OB_IMPL_UD("mean", red_forward, red_backward, (intptr_t)R_MEAN),
    OB_IMPL_UD("max", red_forward, red_backward, (intptr_t)R_MAX),    OB_IMPL_UD("min", red_forward, red_backward, (intptr_t)R_MIN),
    OB_IMPL_UD("prod", red_forward, red_backward, (intptr_t)R_PROD),   OB_IMPL_UD("norm", red_forward, red_backward, (intptr_t)R_NORM),
    OB_IMPL_UD("argmax", red_forward, red_backward, (intptr_t)R_ARGMAX), OB_IMPL_UD("argmin", red_forward, red_backward, (intptr_t)R_ARGMIN),
};

int ob_reg_reduce(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof red_defs / sizeof red_defs[0]; i++) {
        int rc = ob_add_op(r, &red_defs[i], &red_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
