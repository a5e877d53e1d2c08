/* index.c — take (axis, mode clip|raise|wrap), one_hot (depth, on_value,
 * off_value, dtype) and where (condition, x, y) with MXNet 1.x names.
 *
 * take gathers slices of `a` along axis at the given indices (float
 * indices are truncated, as MXNet casts them); its gradient scatter-adds
 * out_grad into a's gradient (indices get zero).  one_hot has zero
 * gradient.  where accepts a condition shaped like x or a 1-D condition
 * selecting whole rows (x.shape[0] entries), which becomes a stride-0
 * view so ob_ew handles both. */
#include <math.h>

#include "common.h"

/* ----------------------------------------------------------------- take */
typedef struct take_param {
    int64_t axis;
    int32_t mode;
} take_param;

enum { MODE_CLIP, MODE_RAISE, MODE_WRAP };
static const char *const take_modes[] = {"clip", "raise", "wrap", NULL};

static int take_shape(mxp_infer_shape_args *a) {
    const take_param *p = a->params;
    const mxp_shape *d = &a->in[0], *ix = &a->in[1];
    if (!ob_shape_known(d) || !ob_shape_known(ix)) return MXP_EINCOMPLETE;
    int64_t ax = p->axis < 0 ? p->axis + d->ndim : p->axis;
    if (ax < 0 || ax >= d->ndim) return ob_err(MXP_EINVAL, "take: axis %lld invalid for rank %d", (long long)p->axis, d->ndim);
    if (d->ndim - 1 + ix->ndim > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "take: result rank too large");
    mxp_shape *o = &a->out[0];
    o->ndim = 0;
    for (int i = 0; i < ax; i++) o->dims[o->ndim++] = d->dims[i];
    for (int i = 0; i < ix->ndim; i++) o->dims[o->ndim++] = ix->dims[i];
    for (int i = (int)ax + 1; i < d->ndim; i++) o->dims[o->ndim++] = d->dims[i];
    return MXP_OK;
}

static int take_type(mxp_infer_type_args *a) {
    if (a->in[0] < 0) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    if (a->in[1] < 0) a->in[1] = a->in[0];
    return MXP_OK;
}

static int64_t off_of(int64_t lin, int n, const int64_t *shape, const int64_t *st) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (lin % shape[d]) * st[d];
        lin /= shape[d];
    }
    return off;
}

/* Visit (outer, j, inner) of take's output: fn(a-offset, out linear). */
typedef struct take_plan {
    int64_t ax, nouter, nidx, ninner, dim;
    ob_view a, ix;
} take_plan;

static int take_index(const take_param *p, const take_plan *t, int64_t j, int64_t *k) {
    double v = ob_load(ob_base(&t->ix.t) + off_of(j, t->ix.t.ndim, t->ix.shape, t->ix.strides) *
                       (int64_t)mxp_dtype_size(t->ix.t.dtype), t->ix.t.dtype);
    int64_t i = (int64_t)v, n = t->dim;
    if (isnan(v)) i = 0;
    if (p->mode == MODE_WRAP) { i %= n; if (i < 0) i += n; }
    else if (p->mode == MODE_RAISE) {
        if (i < 0 || i >= n) return ob_err(MXP_EINVAL, "take: index %lld out of range [0, %lld)", (long long)i, (long long)n);
    } else i = i < 0 ? 0 : i >= n ? n - 1 : i;
    *k = i;
    return MXP_OK;
}

static void take_plan_of(take_plan *t, const take_param *p, const mxp_tensor *a, const mxp_tensor *ix) {
    ob_view_of(&t->a, a);
    ob_view_of(&t->ix, ix);
    t->ax = p->axis < 0 ? p->axis + a->ndim : p->axis;
    t->nouter = ob_numel((int)t->ax, a->shape);
    t->dim = a->shape[t->ax];
    t->ninner = ob_numel(a->ndim - (int)t->ax - 1, a->shape + t->ax + 1);
    t->nidx = mxp_tensor_numel(ix);
}

static int take_fwd(const mxp_forward_args *a) {
    const take_param *p = a->params;
    const mxp_tensor *y = &a->out[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    take_plan t;
    take_plan_of(&t, p, &a->in[0], &a->in[1]);
    if (t.dim == 0) return ob_err(MXP_EINVAL, "take: axis has size 0");
    ob_it oit;
    ob_it_init(&oit, y, 0);
    uint32_t es = mxp_dtype_size(a->in[0].dtype), os = mxp_dtype_size(y->dtype);
    const char *ab = ob_base(&a->in[0]);
    char *yb = ob_base(y);
    int ax = (int)t.ax;
    for (int64_t o = 0; o < t.nouter; o++) {
        int64_t ooff = off_of(o, ax, t.a.shape, t.a.strides);
        for (int64_t j = 0; j < t.nidx; j++) {
            int64_t k;
            int rc = take_index(p, &t, j, &k);
            if (rc) return rc;
            int64_t base = ooff + k * t.a.strides[ax];
            for (int64_t i = 0; i < t.ninner; i++, ob_it_next(&oit)) {
                int64_t off = base + off_of(i, t.a.t.ndim - ax - 1, t.a.shape + ax + 1, t.a.strides + ax + 1);
                ob_store_req(yb + oit.off * os, y->dtype, ob_load(ab + off * es, a->in[0].dtype), a->req[0]);
            }
        }
    }
    return MXP_OK;
}

static int take_bwd(const mxp_backward_args *a) {
    const take_param *p = a->params;
    const mxp_tensor *g = &a->in_grad[0], *og = &a->out_grad[0];
    int rc = MXP_OK;
    if (a->req[1] != MXP_REQ_NULL && a->in_grad[1].data) rc = ob_fill(&a->in_grad[1], 0.0, a->req[1]);
    if (rc || a->req[0] == MXP_REQ_NULL) return rc;
    if (a->req[0] != MXP_REQ_ADD && (rc = ob_fill(g, 0.0, MXP_REQ_WRITE))) return rc;
    take_plan t;
    take_plan_of(&t, p, g, &a->in[1]);
    ob_it oit;
    ob_it_init(&oit, og, 0);
    uint32_t gs = mxp_dtype_size(g->dtype), os = mxp_dtype_size(og->dtype);
    char *gb = ob_base(g);
    const char *ob = ob_base(og);
    int ax = (int)t.ax;
    for (int64_t o = 0; o < t.nouter; o++) {
        int64_t ooff = off_of(o, ax, t.a.shape, t.a.strides);
        for (int64_t j = 0; j < t.nidx; j++) {
            int64_t k;
            if ((rc = take_index(p, &t, j, &k))) return rc;
            int64_t base = ooff + k * t.a.strides[ax];
            for (int64_t i = 0; i < t.ninner; i++, ob_it_next(&oit)) {
                int64_t off = base + off_of(i, t.a.t.ndim - ax - 1, t.a.shape + ax + 1, t.a.strides + ax + 1);
                ob_store_req(gb + off * gs, g->dtype, ob_load(ob + oit.off * os, og->dtype), MXP_REQ_ADD);
            }
        }
    }
    return MXP_OK;
}

/* A's data is not needed for take's gradient, only its indices. */
static int take_deps(mxp_backward_deps_args *a) {
    a->need_in[0] = 0;
    return MXP_OK;
}

/* -------------------------------------------------------------- one_hot */
typedef struct one_hot_param {
    int64_t depth;
    double on_value, off_value;
    int32_t dtype;
} one_hot_param;

static int one_hot_shape(mxp_infer_shape_args *a) {
    const one_hot_param *p = a->params;
    const mxp_shape *ix = &a->in[0];
    if (!ob_shape_known(ix)) return MXP_EINCOMPLETE;
    if (ix->ndim + 1 > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "one_hot: rank too large");
    a->out[0] = *ix;
    a->out[0].dims[a->out[0].ndim++] = p->depth;
    return MXP_OK;
}

static int one_hot_type(mxp_infer_type_args *a) {
    const one_hot_param *p = a->params;
    a->out[0] = p->dtype;
    if (a->in[0] < 0) a->in[0] = MXP_DTYPE_F32;
    return MXP_OK;
}

static int one_hot_fwd(const mxp_forward_args *a) {
    const one_hot_param *p = a->params;
    const mxp_tensor *ix = &a->in[0], *y = &a->out[0];
    int req = a->req[0];
    if (req == MXP_REQ_NULL) return MXP_OK;
    ob_it iit, oit;
    ob_it_init(&iit, ix, 0);
    ob_it_init(&oit, y, 0);
    uint32_t is = mxp_dtype_size(ix->dtype), os = mxp_dtype_size(y->dtype);
    int64_t n = mxp_tensor_numel(ix);
    for (int64_t j = 0; j < n; j++, ob_it_next(&iit)) {
        double v = ob_load(ob_base(ix) + iit.off * is, ix->dtype);
        int64_t k = isnan(v) ? -1 : (int64_t)v;
        for (int64_t d = 0; d < p->depth; d++, ob_it_next(&oit))
            ob_store_req(ob_base(y) + oit.off * os, y->dtype, d == k ? p->on_value : p->off_value, req);
    }
    return MXP_OK;
}

static int zero_bwd(const mxp_backward_args *a) {
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (!a->in_grad[i].data) continue;
        int rc = ob_fill(&a->in_grad[i], 0.0, a->req[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}

/* ---------------------------------------------------------------- where */
OB_KERNEL(k_where, A[i] != (T)0 ? B[i] : C[i])
OB_KERNEL(g_where_x, B[i] != (T)0 ? A[i] : (T)0)
OB_KERNEL(g_where_y, B[i] != (T)0 ? (T)0 : A[i])

static int where_shape(mxp_infer_shape_args *a) {
    mxp_shape *c = &a->in[0], *x = &a->in[1], *y = &a->in[2];
    if (!ob_shape_known(x) && ob_shape_known(y)) *x = *y;
    if (!ob_shape_known(y) && ob_shape_known(x)) *y = *x;
    if (!ob_shape_known(x) || !ob_shape_known(c)) return MXP_EINCOMPLETE;
    char b1[96], b2[96];
    if (x->ndim != y->ndim || memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->ndim))
        return ob_err(MXP_ESHAPE, "where: x %s and y %s differ", ob_shape_str(x, b1, 96), ob_shape_str(y, b2, 96));
    int same = c->ndim == x->ndim && !memcmp(c->dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    int rows = c->ndim == 1 && x->ndim >= 1 && c->dims[0] == x->dims[0];
    if (!same && !rows)
        return ob_err(MXP_ESHAPE, "where: condition %s must be shaped like x %s or (%lld,)",
                      ob_shape_str(c, b1, 96), ob_shape_str(x, b2, 96), (long long)x->dims[0]);
    a->out[0] = *x;
    return MXP_OK;
}

static int where_type(mxp_infer_type_args *a) {
    int32_t t = a->in[1] >= 0 ? a->in[1] : a->in[2];
    if (t < 0) return MXP_EINCOMPLETE;
    if (a->in[1] >= 0 && a->in[2] >= 0 && a->in[1] != a->in[2])
        return ob_err(MXP_ETYPE, "where: x dtype %d, y dtype %d", a->in[1], a->in[2]);
    a->in[1] = a->in[2] = a->out[0] = t;
    if (a->in[0] < 0) a->in[0] = t;
    return MXP_OK;
}

/* Condition viewed with `like`'s shape (stride 0 past dim 0 when 1-D). */
static void cond_view(ob_view *v, const mxp_tensor *c, const mxp_tensor *like) {
    ob_view_of(v, c);
    if (c->ndim == like->ndim) return;
    int64_t s0 = v->strides[0];
    v->t.ndim = like->ndim;
    for (int d = 0; d < like->ndim; d++) {
        v->shape[d] = like->shape[d];
        v->strides[d] = d == 0 ? s0 : 0;
    }
}

static int where_fwd(const mxp_forward_args *a) {
    ob_view c;
    cond_view(&c, &a->in[0], &a->out[0]);
    const mxp_tensor *in[3] = {&c.t, &a->in[1], &a->in[2]};
    ob_env e = {0};
    return ob_ew(a->ctx, 3, in, &a->out[0], a->req[0], &k_where, &e);
}

static int where_bwd(const mxp_backward_args *a) {
    ob_view c;
    cond_view(&c, &a->in[0], &a->out_grad[0]);
    const mxp_tensor *in[2] = {&a->out_grad[0], &c.t};
    ob_env e = {0};
    int rc = MXP_OK;
    if (a->in_grad[0].data) rc = ob_fill(&a->in_grad[0], 0.0, a->req[0]);
    if (!rc) rc = ob_ew(a->ctx, 2, in, &a->in_grad[1], a->req[1], &g_where_x, &e);
    if (!rc) rc = ob_ew(a->ctx, 2, in, &a->in_grad[2], a->req[2], &g_where_y, &e);
    return rc;
}

static int where_deps(mxp_backward_deps_args *a) {
    a->need_in[1] = a->need_in[2] = 0;
    return MXP_OK;
}

/* --------------------------------------------------------- registration */
static const mxp_param_def take_params[] = {
    MXP_PARAM("axis", MXP_PARAM_INT, 0, take_param, axis, "0", 0, 0, NULL, "Axis to take along"),
    MXP_PARAM("mode", MXP_PARAM_ENUM, 0, take_param, mode, "clip", 0, 0, take_modes,
              "Out-of-range indices: clip, raise or wrap"),
};
static const mxp_param_def one_hot_params[] = {
    MXP_PARAM("depth", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, one_hot_param, depth,
              NULL, 0, 0, NULL, "Size of the one-hot dimension"),
    MXP_PARAM("on_value", MXP_PARAM_FLOAT, 0, one_hot_param, on_value, "1", 0, 0, NULL, "Value at the index"),
    MXP_PARAM("off_value", MXP_PARAM_FLOAT, 0, one_hot_param, off_value, "0", 0, 0, NULL, "Value elsewhere"),
    MXP_PARAM("dtype", MXP_PARAM_DTYPE, 0, one_hot_param, dtype, "float32", 0, 0, NULL, "Output dtype"),
};

static const char *const take_args[] = {"a", "indices", NULL};
static const char *const one_hot_args[] = {"indices", NULL};
static const char *const where_args[] = {"condition", "x", "y", NULL};

static const mxp_op_def index_defs[] = {
    { .hdr = MXP_HEADER(mxp_op_def), .name = "take", .doc = "Gather slices of a along axis at indices.",
      .params = take_params, .n_params = 2, .params_size = sizeof(take_param), .arg_names = take_args,
      .infer_shape = take_shape, .infer_type = take_type,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .declare_backward = take_deps },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "one_hot", .doc = "One-hot encoding of indices (zero gradient).",
      .params = one_hot_params, .n_params = 4, .params_size = sizeof(one_hot_param),
      .arg_names = one_hot_args, .infer_shape = one_hot_shape, .infer_type = one_hot_type },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "where",
      .doc = "Elements of x where condition is non-zero, else of y.", .arg_names = where_args,
      .infer_shape = where_shape, .infer_type = where_type,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .declare_backward = where_deps },
};

static const mxp_op_impl index_impls[] = {
    OB_IMPL("take", take_fwd, take_bwd),
    OB_IMPL("one_hot", one_hot_fwd, zero_bwd),
    OB_IMPL("where", where_fwd, where_bwd),
};

int ob_reg_index(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof index_defs / sizeof index_defs[0]; i++) {
        int rc = ob_add_op(r, &index_defs[i], &index_impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
