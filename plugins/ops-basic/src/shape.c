/* shape.c — layout ops with MXNet 1.x names and parameters: transpose
 * (axes), Reshape / reshape (shape with the special codes 0 -1 -2 -3 -4,
 * reverse; legacy target_shape / keep_highest accepted), expand_dims
 * (axis), Flatten / flatten, slice (begin, end, step; entries may be None)
 * and slice_axis (axis, begin, end).
 *
 * Every forward is a strided view of the input copied (ob_copy) into the
 * output and every backward the reverse copy into a view of in_grad, so
 * strided inputs and req write/add work without special cases.  slice's
 * begin/end/step are MXNet tuples of optional ints ("(None, 2)"), which
 * mxp_param_shape cannot express, so they are declared STRING and parsed
 * here (parse_opt_tuple) — noted as ABI friction. */
#include <stdlib.h>

#include "common.h"

static const char *const data_arg[] = {"data", NULL};
static const mxp_inplace_pair ip00[] = {{0, 0}};

/* ----------------------------------------------------------- transpose */
typedef struct transpose_param {
    mxp_param_shape axes;
} transpose_param;

static int perm_of(const transpose_param *p, int nd, int *perm) {
    if (!p->axes.has_value || p->axes.ndim == 0) {
        for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
        return MXP_OK;
    }
    if (p->axes.ndim != nd)
        return ob_err(MXP_EINVAL, "transpose: axes has %d entries, input rank %d", p->axes.ndim, nd);
    int seen[MXP_MAX_NDIM] = {0};
    for (int i = 0; i < nd; i++) {
        int64_t a = p->axes.dims[i] < 0 ? p->axes.dims[i] + nd : p->axes.dims[i];
        if (a < 0 || a >= nd || seen[a]) return ob_err(MXP_EINVAL, "transpose: axes is not a permutation");
        seen[a] = 1;
        perm[i] = (int)a;
    }
    return MXP_OK;
}

static int transpose_shape(mxp_infer_shape_args *a) {
    if (!ob_shape_known(&a->in[0])) return MXP_EINCOMPLETE;
    int perm[MXP_MAX_NDIM];
    int rc = perm_of(a->params, a->in[0].ndim, perm);
    if (rc) return rc;
    a->out[0].ndim = a->in[0].ndim;
    for (int i = 0; i < a->in[0].ndim; i++) a->out[0].dims[i] = a->in[0].dims[perm[i]];
    return MXP_OK;
}

/* v = t with dims permuted: v dim i = t dim perm[i]. */
static void permuted(ob_view *v, const mxp_tensor *t, const int *perm) {
    ob_view base;
    ob_view_of(&base, t);
    ob_view_of(v, t);
    for (int i = 0; i < t->ndim; i++) {
        v->shape[i] = base.shape[perm[i]];
        v->strides[i] = base.strides[perm[i]];
    }
}

static int transpose_fwd(const mxp_forward_args *a) {
    int perm[MXP_MAX_NDIM];
    int rc = perm_of(a->params, a->in[0].ndim, perm);
    if (rc) return rc;
    ob_view v;
    permuted(&v, &a->in[0], perm);
    return ob_copy(&v.t, &a->out[0], a->req[0]);
}

static int transpose_bwd(const mxp_backward_args *a) {
    int perm[MXP_MAX_NDIM];
    int rc = perm_of(a->params, a->in_grad[0].ndim, perm);
    if (rc) return rc;
    ob_view v;
    permuted(&v, &a->in_grad[0], perm);
    return ob_copy(&a->out_grad[0], &v.t, a->req[0]);
}

/* -------------------------------------------------------------- Reshape */
typedef struct reshape_param {
    mxp_param_shape shape;
    int32_t reverse;
    mxp_param_shape target_shape;
    int32_t keep_highest;
} reshape_param;

/* MXNet's InferReshapeShape, literally (including -4 with -1). */
static int reshape_infer(const int64_t *sp, int nsp, const int64_t *ds, int nds, int64_t *out, int *nout) {
    int src = 0, inf = -1, n = 0;
    for (int i = 0; i < nsp; i++) {
        int64_t d = sp[i];
        if (n >= MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "Reshape: result rank exceeds %d", MXP_MAX_NDIM);
        if (d == 0) {
            if (src >= nds) return ob_err(MXP_ESHAPE, "Reshape: 0 at position %d has no input dim", i);
            out[n++] = ds[src++];
        } else if (d == -1) {
            if (inf >= 0) return ob_err(MXP_ESHAPE, "Reshape: more than one -1");
            inf = n;
            out[n++] = 1;
            src++;
        } else if (d == -2) {
            while (src < nds) {
                if (n >= MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "Reshape: result rank too large");
                out[n++] = ds[src++];
            }
        } else if (d == -3) {
            if (src + 1 >= nds) return ob_err(MXP_ESHAPE, "Reshape: -3 needs two input dims");
            out[n++] = ds[src] * ds[src + 1];
            src += 2;
        } else if (d == -4) {
            if (i + 2 >= nsp || src >= nds) return ob_err(MXP_ESHAPE, "Reshape: -4 needs two following values");
            int64_t d0 = ds[src++], d1 = sp[++i], d2 = sp[++i];
            if (d1 == -1 && d2 == -1) return ob_err(MXP_ESHAPE, "Reshape: -4 split with two -1");
            if (d1 == -1) d1 = d2 ? d0 / d2 : 0;
            if (d2 == -1) d2 = d1 ? d0 / d1 : 0;
            if (d1 * d2 != d0)
                return ob_err(MXP_ESHAPE, "Reshape: -4 split %lld into %lld x %lld", (long long)d0,
                              (long long)d1, (long long)d2);
            if (n + 1 >= MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "Reshape: result rank too large");
            out[n++] = d1;
            out[n++] = d2;
        } else if (d > 0) {
            out[n++] = d;
            src++;
        } else {
            return ob_err(MXP_ESHAPE, "Reshape: invalid code %lld", (long long)d);
        }
    }
    int64_t total = ob_numel(nds, ds);
    if (inf >= 0) {
        int64_t rest = 1;
        for (int i = 0; i < n; i++) if (i != inf) rest *= out[i];
        if (rest == 0 || total % rest)
            return ob_err(MXP_ESHAPE, "Reshape: cannot infer -1: %lld elements into blocks of %lld",
                          (long long)total, (long long)rest);
        out[inf] = total / rest;
    }
    if (ob_numel(n, out) != total)
        return ob_err(MXP_ESHAPE, "Reshape: %lld elements cannot become %lld", (long long)total,
                      (long long)ob_numel(n, out));
    *nout = n;
    return MXP_OK;
}

static int reshape_shape(mxp_infer_shape_args *a) {
    const reshape_param *p = a->params;
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    int64_t sp[MXP_PARAM_SHAPE_MAX], ds[MXP_MAX_NDIM], out[MXP_MAX_NDIM];
    int nsp, n = 0;
    if (p->shape.has_value && p->shape.ndim > 0) {
        nsp = p->shape.ndim;
        for (int i = 0; i < nsp; i++) sp[i] = p->shape.dims[i];
    } else if (p->target_shape.has_value && p->target_shape.ndim > 0) {
        /* legacy: 0 means "infer"; keep_highest keeps dim 0 */
        nsp = p->target_shape.ndim;
        for (int i = 0; i < nsp; i++) sp[i] = p->target_shape.dims[i] == 0 ? -1 : p->target_shape.dims[i];
        if (p->keep_highest) {
            if (nsp >= MXP_PARAM_SHAPE_MAX) return ob_err(MXP_EINVAL, "Reshape: target_shape too long");
            memmove(sp + 1, sp, sizeof(int64_t) * (size_t)nsp);
            sp[0] = 0;
            nsp++;
        }
    } else {
        return ob_err(MXP_EINVAL, "Reshape: shape is required");
    }
    for (int i = 0; i < in->ndim; i++) ds[i] = in->dims[i];
    if (p->reverse) {
        for (int i = 0; i < nsp / 2; i++) { int64_t t = sp[i]; sp[i] = sp[nsp - 1 - i]; sp[nsp - 1 - i] = t; }
        for (int i = 0; i < in->ndim / 2; i++) { int64_t t = ds[i]; ds[i] = ds[in->ndim - 1 - i]; ds[in->ndim - 1 - i] = t; }
    }
    int rc = reshape_infer(sp, nsp, ds, in->ndim, out, &n);
    if (rc) return rc;
    if (p->reverse)
        for (int i = 0; i < n / 2; i++) { int64_t t = out[i]; out[i] = out[n - 1 - i]; out[n - 1 - i] = t; }
    ob_shape_set(&a->out[0], n, out);
    return MXP_OK;
}

/* Reshape, Flatten, expand_dims: row-major order is unchanged. */
static int linear_fwd(const mxp_forward_args *a) {
    return ob_copy(&a->in[0], &a->out[0], a->req[0]);
}
static int linear_bwd(const mxp_backward_args *a) {
    return ob_copy(&a->out_grad[0], &a->in_grad[0], a->req[0]);
}

/* ---------------------------------------------------------- expand_dims */
typedef struct expand_param {
    int64_t axis;
} expand_param;

static int expand_shape(mxp_infer_shape_args *a) {
    const expand_param *p = a->params;
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    int nd = in->ndim;
    int64_t ax = p->axis < 0 ? p->axis + nd + 1 : p->axis;
    if (ax < 0 || ax > nd || nd + 1 > MXP_MAX_NDIM)
        return ob_err(MXP_EINVAL, "expand_dims: axis %lld invalid for rank %d", (long long)p->axis, nd);
    mxp_shape *o = &a->out[0];
    o->ndim = nd + 1;
    for (int i = 0, j = 0; i < nd + 1; i++) o->dims[i] = i == ax ? 1 : in->dims[j++];
    return MXP_OK;
}

/* -------------------------------------------------------------- Flatten */
static int flatten_shape(mxp_infer_shape_args *a) {
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    if (in->ndim == 0) return ob_err(MXP_ESHAPE, "Flatten: input must have rank >= 1");
    int64_t rest = 1;
    for (int i = 1; i < in->ndim; i++) rest *= in->dims[i];
    int64_t d[2] = {in->dims[0], rest};
    ob_shape_set(&a->out[0], 2, d);
    return MXP_OK;
}

/* ---------------------------------------------------------------- slice */
typedef struct slice_param {
    const char *begin, *end, *step;
} slice_param;

typedef struct opt_tuple {
    int n;
    int has[MXP_MAX_NDIM];
    int64_t v[MXP_MAX_NDIM];
} opt_tuple;

/* "(1, None, -2)" / "[1,None]" / "()" / "None" -> opt_tuple. */
static int parse_opt_tuple(const char *s, opt_tuple *t, const char *what) {
    memset(t, 0, sizeof *t);
    if (!s) return MXP_OK;
    const char *c = s;
    while (*c == ' ' || *c == '(' || *c == '[') c++;
    if (!strcmp(c, "None")) return MXP_OK;
    while (*c && *c != ')' && *c != ']') {
        if (t->n >= MXP_MAX_NDIM) return ob_err(MXP_EINVAL, "slice: %s '%s' too long", what, s);
        if (!strncmp(c, "None", 4)) {
            t->has[t->n] = 0;
            c += 4;
        } else {
            char *end;
            long long v = strtoll(c, &end, 10);
            if (end == c) return ob_err(MXP_EINVAL, "slice: bad %s '%s'", what, s);
            t->has[t->n] = 1;
            t->v[t->n] = v;
            c = end;
            if (*c == 'L') c++;
        }
        t->n++;
        while (*c == ' ') c++;
        if (*c == ',') c++;
        while (*c == ' ') c++;
    }
    return MXP_OK;
}

typedef struct slice_plan {
    int nd;
    int64_t begin[MXP_MAX_NDIM], step[MXP_MAX_NDIM], len[MXP_MAX_NDIM];
} slice_plan;

/* Python slicing semantics per dimension, as MXNet's GetIndexRange. */
static int slice_dim(int64_t dim, int hb, int64_t b, int he, int64_t e, int64_t step, int64_t *ob,
                     int64_t *olen) {
    if (step == 0) return ob_err(MXP_EINVAL, "slice: step 0");
    if (step > 0) {
        b = hb ? (b < 0 ? b + dim : b) : 0;
        e = he ? (e < 0 ? e + dim : e) : dim;
        if (b < 0) b = 0;
        if (b > dim) b = dim;
        if (e < 0) e = 0;
        if (e > dim) e = dim;
        *olen = e > b ? (e - b + step - 1) / step : 0;
    } else {
        b = hb ? (b < 0 ? b + dim : b) : dim - 1;
        e = he ? (e < 0 ? e + dim : e) : -1;
        if (b > dim - 1) b = dim - 1;
        if (b < -1) b = -1;
        if (e < -1) e = -1;
        if (e > dim - 1) e = dim - 1;
        *olen = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
    *ob = b;
    return MXP_OK;
}

static int slice_plan_of(const slice_param *p, int nd, const int64_t *shape, slice_plan *pl) {
    opt_tuple b, e, s;
    int rc = parse_opt_tuple(p->begin, &b, "begin");
    if (!rc) rc = parse_opt_tuple(p->end, &e, "end");
    if (!rc) rc = parse_opt_tuple(p->step, &s, "step");
    if (rc) return rc;
    if (b.n != e.n) return ob_err(MXP_EINVAL, "slice: begin has %d entries, end %d", b.n, e.n);
    if (s.n && s.n != b.n) return ob_err(MXP_EINVAL, "slice: step has %d entries, begin %d", s.n, b.n);
    if (b.n > nd) return ob_err(MXP_EINVAL, "slice: %d entries for rank %d", b.n, nd);
    pl->nd = nd;
    for (int d = 0; d < nd; d++) {
        if (d >= b.n) {
            pl->begin[d] = 0;
            pl->step[d] = 1;
            pl->len[d] = shape[d];
            continue;
        }
        int64_t st = s.n && s.has[d] ? s.v[d] : 1;
        pl->step[d] = st;
        rc = slice_dim(shape[d], b.has[d], b.v[d], e.has[d], e.v[d], st, &pl->begin[d], &pl->len[d]);
        if (rc) return rc;
    }
    return MXP_OK;
}

static int slice_shape(mxp_infer_shape_args *a) {
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    slice_plan pl;
    int rc = slice_plan_of(a->params, in->ndim, in->dims, &pl);
    if (rc) return rc;
    ob_shape_set(&a->out[0], in->ndim, pl.len);
    return MXP_OK;
}

static void slice_view(ob_view *v, const mxp_tensor *t, const slice_plan *pl) {
    ob_view_of(v, t);
    int64_t off = 0;
    for (int d = 0; d < pl->nd; d++) {
        if (pl->len[d] > 0) off += pl->begin[d] * v->strides[d];
        v->strides[d] *= pl->step[d];
        v->shape[d] = pl->len[d];
    }
    v->t.byte_offset += (uint64_t)(off * (int64_t)mxp_dtype_size(t->dtype));
}

static int slice_fwd(const mxp_forward_args *a) {
    slice_plan pl;
    int rc = slice_plan_of(a->params, a->in[0].ndim, a->in[0].shape, &pl);
    if (rc) return rc;
    ob_view v;
    slice_view(&v, &a->in[0], &pl);
    return ob_copy(&v.t, &a->out[0], a->req[0]);
}

/* Scatter og into the sliced region of in_grad; the rest is 0 (write) or
 * unchanged (add). */
static int slice_bwd(const mxp_backward_args *a) {
    const mxp_tensor *g = &a->in_grad[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    slice_plan pl;
    int rc = slice_plan_of(a->params, g->ndim, g->shape, &pl);
    if (rc) return rc;
    if (a->req[0] != MXP_REQ_ADD) {
        rc = ob_fill(g, 0.0, MXP_REQ_WRITE);
        if (rc) return rc;
    }
    ob_view v;
    slice_view(&v, g, &pl);
    return ob_copy(&a->out_grad[0], &v.t, a->req[0] == MXP_REQ_ADD ? MXP_REQ_ADD : MXP_REQ_WRITE);
}

/* ----------------------------------------------------------- slice_axis */
typedef struct slice_axis_param {
    int64_t axis, begin;
    mxp_param_opt_int end;
} slice_axis_param;

static int slice_axis_plan(const slice_axis_param *p, int nd, const int64_t *shape, slice_plan *pl) {
    int64_t ax = p->axis < 0 ? p->axis + nd : p->axis;
    if (ax < 0 || ax >= nd) return ob_err(MXP_EINVAL, "slice_axis: axis %lld invalid for rank %d", (long long)p->axis, nd);
    pl->nd = nd;
    for (int d = 0; d < nd; d++) { pl->begin[d] = 0; pl->step[d] = 1; pl->len[d] = shape[d]; }
    int64_t dim = shape[ax], b = p->begin < 0 ? p->begin + dim : p->begin;
    int64_t e = p->end.has_value ? (p->end.value < 0 ? p->end.value + dim : p->end.value) : dim;
    if (b < 0 || b > dim || e < b || e > dim)
        return ob_err(MXP_EINVAL, "slice_axis: [%lld, %lld) invalid for dim %lld", (long long)p->begin,
                      (long long)(p->end.has_value ? p->end.value : dim), (long long)dim);
    pl->begin[ax] = b;
    pl->len[ax] = e - b;
    return MXP_OK;
}

static int slice_axis_shape(mxp_infer_shape_args *a) {
    const mxp_shape *in = &a->in[0];
    if (!ob_shape_known(in)) return MXP_EINCOMPLETE;
    slice_plan pl;
    int rc = slice_axis_plan(a->params, in->ndim, in->dims, &pl);
    if (rc) return rc;
    ob_shape_set(&a->out[0], in->ndim, pl.len);
    return MXP_OK;
}

static int slice_axis_fwd(const mxp_forward_args *a) {
    slice_plan pl;
    int rc = slice_axis_plan(a->params, a->in[0].ndim, a->in[0].shape, &pl);
    if (rc) return rc;
    ob_view v;
    slice_view(&v, &a->in[0], &pl);
    return ob_copy(&v.t, &a->out[0], a->req[0]);
}

static int slice_axis_bwd(const mxp_backward_args *a) {
    const mxp_tensor *g = &a->in_grad[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    slice_plan pl;
    int rc = slice_axis_plan(a->params, g->ndim, g->shape, &pl);
    if (rc) return rc;
    if (a->req[0] != MXP_REQ_ADD && (rc = ob_fill(g, 0.0, MXP_REQ_WRITE))) return rc;
    ob_view v;
    slice_view(&v, g, &pl);
    return ob_copy(&a->out_grad[0], &v.t, a->req[0] == MXP_REQ_ADD ? MXP_REQ_ADD : MXP_REQ_WRITE);
}

/* --------------------------------------------------------- registration */
static const mxp_param_def transpose_params[] = {
    MXP_PARAM("axes", MXP_PARAM_SHAPE, 0, transpose_param, axes, "()", 0, 0, NULL,
              "Permutation of the axes; () reverses them"),
};
static const mxp_param_def reshape_params[] = {
    MXP_PARAM("shape", MXP_PARAM_SHAPE, 0, reshape_param, shape, "()", 0, 0, NULL,
              "Target shape; 0 copy, -1 infer, -2 copy rest, -3 merge two, -4 split one"),
    MXP_PARAM("reverse", MXP_PARAM_BOOL, 0, reshape_param, reverse, "False", 0, 0, NULL,
              "Apply the special codes from the right"),
    MXP_PARAM("target_shape", MXP_PARAM_SHAPE, 0, reshape_param, target_shape, "()", 0, 0, NULL,
              "(Deprecated) target shape, 0 = infer"),
    MXP_PARAM("keep_highest", MXP_PARAM_BOOL, 0, reshape_param, keep_highest, "False", 0, 0, NULL,
              "(Deprecated) keep dim 0 with target_shape"),
};
static const mxp_param_def expand_params[] = {
    MXP_PARAM("axis", MXP_PARAM_INT, MXP_PARAM_REQUIRED, expand_param, axis, NULL, 0, 0, NULL,
              "Position of the new axis"),
};
static const mxp_param_def slice_params[] = {
    MXP_PARAM("begin", MXP_PARAM_STRING, MXP_PARAM_REQUIRED, slice_param, begin, NULL, 0, 0, NULL,
              "Start indices, a tuple of int or None"),
    MXP_PARAM("end", MXP_PARAM_STRING, MXP_PARAM_REQUIRED, slice_param, end, NULL, 0, 0, NULL,
              "End indices (exclusive), a tuple of int or None"),
    MXP_PARAM("step", MXP_PARAM_STRING, 0, slice_param, step, "()", 0, 0, NULL,
              "Steps, a tuple of int or None"),
};
static const mxp_param_def slice_axis_params[] = {
    MXP_PARAM("axis", MXP_PARAM_INT, MXP_PARAM_REQUIRED, slice_axis_param, axis, NULL, 0, 0, NULL, "Axis"),
    MXP_PARAM("begin", MXP_PARAM_INT, MXP_PARAM_REQUIRED, slice_axis_param, begin, NULL, 0, 0, NULL,
              "Start index"),
    MXP_PARAM("end", MXP_PARAM_OPT_INT, MXP_PARAM_REQUIRED, slice_axis_param, end, NULL, 0, 0, NULL,
              "End index (exclusive) or None"),
};

static const char *const al_reshape[] = {"reshape", NULL};
static const char *const al_flatten[] = {"flatten", NULL};
static const char *const al_slice[] = {"crop", NULL};

#define SHDEF(NAME, AL, PARAMS, NP, PSIZE, SHAPEFN, INPLACE, DOC)                        \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .aliases = AL, .doc = DOC,            \
      .params = PARAMS, .n_params = NP, .params_size = PSIZE, .arg_names = data_arg,     \
      .infer_shape = SHAPEFN, .backward_deps = MXP_BWD_OUT_GRAD,                         \
      .forward_inplace = (INPLACE) ? ip00 : NULL, .n_forward_inplace = (INPLACE) ? 1 : 0, \
      .backward_inplace = (INPLACE) ? ip00 : NULL, .n_backward_inplace = (INPLACE) ? 1 : 0 }

static const mxp_op_def shape_defs[] = {
    SHDEF("transpose", NULL, transpose_params, 1, sizeof(transpose_param), transpose_shape, 0,
          "Permute the axes."),
    SHDEF("Reshape", al_reshape, reshape_params, 4, sizeof(reshape_param), reshape_shape, 1,
          "Reshape without changing the row-major order (MXNet special codes)."),
    SHDEF("expand_dims", NULL, expand_params, 1, sizeof(expand_param), expand_shape, 1,
          "Insert an axis of size 1."),
    SHDEF("Flatten", al_flatten, NULL, 0, 0, flatten_shape, 1,
          "Collapse all axes but the first: (d0, d1*...*dn)."),
    SHDEF("slice", al_slice, slice_params, 3, sizeof(slice_param), slice_shape, 0,
          "Strided slice along leading axes (Python semantics)."),
    SHDEF("slice_axis", NULL, slice_axis_params, 3, sizeof(slice_axis_param), slice_axis_shape, 0,
          "Slice [begin, end) along one axis."),
};

static const mxp_op_impl shape_impls[] = {
    OB_IMPL("transpose", transpose_fwd, transpose_bwd),
    OB_IMPL("Reshape", linear_fwd, linear_bwd),
    OB_IMPL("expand_dims", linear_fwd, linear_bwd),
    OB_IMPL("Flatten", linear_fwd, linear_bwd),
    OB_IMPL("slice", slice_fwd, slice_bwd),
    OB_IMPL("slice_axis", slice_axis_fwd, slice_axis_bwd),
};

int ob_reg_shape(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof shape_defs / sizeof shape_defs[0]; i++) {
        int rc = ob_add_op(r, &shape_defs[i], &shape_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
