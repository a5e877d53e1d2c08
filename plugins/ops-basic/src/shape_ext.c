/* shape_ext.c — layout ops that move elements, with MXNet 1.x names and
 * parameters: tile (reps), repeat (repeats, axis), reverse / flip (axis),
 * squeeze (axis), swapaxes / SwapAxis (dim1, dim2), broadcast_to (shape),
 * broadcast_axis / broadcast_axes (axis, size), broadcast_like (lhs_axes,
 * rhs_axes), slice_like (axes), depth_to_space and space_to_depth
 * (block_size), shape_array and size_array (int64 outputs).
 *
 * Each is a gather: output element o reads input element map(o).  Forward
 * is out[o] = in[map(o)], backward the scatter-add ig[map(o)] += og[o]
 * (tile / repeat / broadcast_* sum their copies this way), both on the
 * float64 arrays of the xop driver (xop.h).  Shape rules follow MXNet's
 * FInferShape of each op, including 0 in broadcast_to's shape ("keep"). */
#include "xop.h"

typedef int64_t (*gmap_fn)(const void *p, const xarr *in, const int64_t *oc, int ond);

/* out[o] = in[map(o)] over every output coordinate. */
static int gather_fwd(xop_io *io, gmap_fn map) {
    xarr *o = &io->out[0];
    int64_t oc[MXP_MAX_NDIM] = {0};
    for (int64_t k = 0; k < o->n; k++) {
        o->v[k] = io->in[0].v[map(io->params, &io->in[0], oc, o->nd)];
        for (int d = o->nd - 1; d >= 0 && ++oc[d] == o->shape[d]; d--) oc[d] = 0;
    }
    return MXP_OK;
}

static int gather_bwd(xop_io *io, gmap_fn map) {
    const xarr *g = &io->og[0];
    int64_t oc[MXP_MAX_NDIM] = {0};
    for (int64_t k = 0; k < g->n; k++) {
        io->ig[0].v[map(io->params, &io->ig[0], oc, g->nd)] += g->v[k];
        for (int d = g->nd - 1; d >= 0 && ++oc[d] == g->shape[d]; d--) oc[d] = 0;
    }
    return MXP_OK;
}

#define GATHER_OP(NAME)                                                    \
    static int NAME##_f(xop_io *io) { return gather_fwd(io, NAME##_map); } \
    static int NAME##_b(xop_io *io) { return gather_bwd(io, NAME##_map); } \
    static const xop_info NAME##_info = {NAME##_f, NAME##_b};

/* Linear index of coordinates c in a row-major shape. */
static int64_t lin(const xarr *a, const int64_t *c) {
    int64_t k = 0;
    for (int d = 0; d < a->nd; d++) k = k * a->shape[d] + c[d];
    return k;
}

static const char *const data_arg[] = {"data", NULL};

static int known1(const mxp_infer_shape_args *a) { return ob_shape_known(&a->in[0]); }

/* ---------------------------------------------------------------- tile */
typedef struct tile_param {
    mxp_param_shape reps;
} tile_param;

static int tile_shape(mxp_infer_shape_args *a) {
    const tile_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    int nr = p->reps.ndim, nd = d->ndim > nr ? d->ndim : nr;
    if (nd > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "tile: result rank %d exceeds %d", nd, MXP_MAX_NDIM);
    a->out[0].ndim = nd;
    for (int i = 0; i < nd; i++) {
        int di = i - (nd - d->ndim), ri = i - (nd - nr);
        int64_t dim = di >= 0 ? d->dims[di] : 1, rep = ri >= 0 ? p->reps.dims[ri] : 1;
        if (rep < 1) return ob_err(MXP_EINVAL, "tile: reps must be >= 1, got %lld", (long long)rep);
        a->out[0].dims[i] = dim * rep;
    }
    return MXP_OK;
}

static int64_t tile_map(const void *p, const xarr *in, const int64_t *oc, int ond) {
    (void)p;
    int64_t c[MXP_MAX_NDIM];
    for (int i = 0; i < in->nd; i++) c[i] = oc[i + ond - in->nd] % in->shape[i];
    return lin(in, c);
}
GATHER_OP(tile)

/* -------------------------------------------------------------- repeat */
typedef struct repeat_param {
    int64_t repeats;
    mxp_param_opt_int axis;
} repeat_param;

static int repeat_shape(mxp_infer_shape_args *a) {
    const repeat_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    if (!p->axis.has_value) {
        a->out[0].ndim = 1;
        a->out[0].dims[0] = ob_numel(d->ndim, d->dims) * p->repeats;
        return MXP_OK;
    }
    int64_t ax;
    if (xop_axis(p->axis.value, d->ndim, &ax))
        return ob_err(MXP_EINVAL, "repeat: axis %lld out of range for rank %d", (long long)p->axis.value, d->ndim);
    a->out[0] = *d;
    a->out[0].dims[ax] *= p->repeats;
    return MXP_OK;
}

static int64_t repeat_map(const void *pp, const xarr *in, const int64_t *oc, int ond) {
    const repeat_param *p = pp;
    if (!p->axis.has_value) return oc[0] / p->repeats;
    int64_t c[MXP_MAX_NDIM], ax = p->axis.value < 0 ? p->axis.value + ond : p->axis.value;
    for (int i = 0; i < ond; i++) c[i] = i == ax ? oc[i] / p->repeats : oc[i];
    return lin(in, c);
}
GATHER_OP(repeat)

/* ------------------------------------------------------------- reverse */
typedef struct reverse_param {
    mxp_param_shape axis;
} reverse_param;

static int same_shape(mxp_infer_shape_args *a) {
    if (!known1(a)) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    return MXP_OK;
}

static int reverse_check(mxp_check_params_args *a) {
    const reverse_param *p = a->params;
    for (int i = 0; i < p->axis.ndim; i++)
        if (p->axis.dims[i] < -MXP_MAX_NDIM || p->axis.dims[i] >= MXP_MAX_NDIM)
            return ob_err(MXP_EINVAL, "reverse: axis %lld out of range", (long long)p->axis.dims[i]);
    return MXP_OK;
}

static int reverse_shape(mxp_infer_shape_args *a) {
    const reverse_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    for (int i = 0; i < p->axis.ndim; i++) {
        int64_t ax;
        if (xop_axis(p->axis.dims[i], a->in[0].ndim, &ax))
            return ob_err(MXP_EINVAL, "reverse: axis %lld out of range for rank %d", (long long)p->axis.dims[i],
                          a->in[0].ndim);
    }
    return same_shape(a);
}

static int64_t reverse_map(const void *pp, const xarr *in, const int64_t *oc, int ond) {
    const reverse_param *p = pp;
    int64_t c[MXP_MAX_NDIM];
    for (int i = 0; i < ond; i++) c[i] = oc[i];
    for (int i = 0; i < p->axis.ndim; i++) {
        int64_t ax = p->axis.dims[i] < 0 ? p->axis.dims[i] + ond : p->axis.dims[i];
        c[ax] = in->shape[ax] - 1 - oc[ax];
    }
    return lin(in, c);
}
GATHER_OP(reverse)

/* ------------------------------------------------------------- squeeze */
typedef struct squeeze_param {
    mxp_param_shape axis;
} squeeze_param;

static int squeeze_shape(mxp_infer_shape_args *a) {
    const squeeze_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    int drop[MXP_MAX_NDIM] = {0};
    if (p->axis.has_value) {
        for (int i = 0; i < p->axis.ndim; i++) {
            int64_t ax;
            if (xop_axis(p->axis.dims[i], d->ndim, &ax))
                return ob_err(MXP_EINVAL, "squeeze: axis %lld out of range for rank %d", (long long)p->axis.dims[i],
                              d->ndim);
            if (d->dims[ax] != 1)
                return ob_err(MXP_ESHAPE, "squeeze: axis %lld has size %lld, not 1", (long long)ax,
                              (long long)d->dims[ax]);
            drop[ax] = 1;
        }
    } else {
        for (int i = 0; i < d->ndim; i++) drop[i] = d->dims[i] == 1;
    }
    mxp_shape *o = &a->out[0];
    o->ndim = 0;
    for (int i = 0; i < d->ndim; i++)
        if (!drop[i]) o->dims[o->ndim++] = d->dims[i];
    if (o->ndim == 0) o->dims[o->ndim++] = 1; /* MXNet keeps (1,) */
    return MXP_OK;
}

static int squeeze_f(xop_io *io) {
    memcpy(io->out[0].v, io->in[0].v, (size_t)io->in[0].n * sizeof(double));
    return MXP_OK;
}
static int squeeze_b(xop_io *io) {
    memcpy(io->ig[0].v, io->og[0].v, (size_t)io->og[0].n * sizeof(double));
    return MXP_OK;
}
static const xop_info squeeze_info = {squeeze_f, squeeze_b};

/* ------------------------------------------------------------ swapaxes */
typedef struct swap_param {
    int64_t dim1, dim2;
} swap_param;

static int swap_shape(mxp_infer_shape_args *a) {
    const swap_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    int64_t x, y;
    if (xop_axis(p->dim1, a->in[0].ndim, &x) || xop_axis(p->dim2, a->in[0].ndim, &y))
        return ob_err(MXP_EINVAL, "swapaxes: dim1 %lld / dim2 %lld out of range for rank %d", (long long)p->dim1,
                      (long long)p->dim2, a->in[0].ndim);
    a->out[0] = a->in[0];
    a->out[0].dims[x] = a->in[0].dims[y];
    a->out[0].dims[y] = a->in[0].dims[x];
    return MXP_OK;
}

static int64_t swap_map(const void *pp, const xarr *in, const int64_t *oc, int ond) {
    const swap_param *p = pp;
    int64_t c[MXP_MAX_NDIM];
    for (int i = 0; i < ond; i++) c[i] = oc[i];
    int64_t x = p->dim1 < 0 ? p->dim1 + ond : p->dim1, y = p->dim2 < 0 ? p->dim2 + ond : p->dim2;
    c[x] = oc[y];
    c[y] = oc[x];
    return lin(in, c);
}
GATHER_OP(swap)

/* ------------------------------------------------ broadcast_to / _axis */
/* Input dims of size 1 read index 0; others read the output coordinate. */
static int64_t bcast_map(const void *p, const xarr *in, const int64_t *oc, int ond) {
    (void)p;
    int64_t c[MXP_MAX_NDIM];
    for (int i = 0; i < in->nd; i++) c[i] = in->shape[i] == 1 ? 0 : oc[i + ond - in->nd];
    return lin(in, c);
}
GATHER_OP(bcast)

typedef struct bto_param {
    mxp_param_shape shape;
} bto_param;

static int bto_shape(mxp_infer_shape_args *a) {
    const bto_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    if (p->shape.ndim != d->ndim)
        return ob_err(MXP_ESHAPE, "broadcast_to: shape has %d dims, the input %d", p->shape.ndim, d->ndim);
    a->out[0].ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        int64_t t = p->shape.dims[i] == 0 ? d->dims[i] : p->shape.dims[i];
        if (d->dims[i] != 1 && d->dims[i] != t)
            return ob_err(MXP_ESHAPE, "broadcast_to: dim %d of size %lld cannot become %lld", i,
                          (long long)d->dims[i], (long long)t);
        a->out[0].dims[i] = t;
    }
    return MXP_OK;
}

typedef struct bax_param {
    mxp_param_shape axis, size;
} bax_param;

static int bax_shape(mxp_infer_shape_args *a) {
    const bax_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    if (p->axis.ndim != p->size.ndim)
        return ob_err(MXP_EINVAL, "broadcast_axis: axis has %d entries, size %d", p->axis.ndim, p->size.ndim);
    a->out[0] = *d;
    for (int i = 0; i < p->axis.ndim; i++) {
        int64_t ax;
        if (xop_axis(p->axis.dims[i], d->ndim, &ax))
            return ob_err(MXP_EINVAL, "broadcast_axis: axis %lld out of range for rank %d", (long long)p->axis.dims[i],
                          d->ndim);
        if (d->dims[ax] != 1)
            return ob_err(MXP_ESHAPE, "broadcast_axis: axis %lld has size %lld, not 1", (long long)ax,
                          (long long)d->dims[ax]);
        a->out[0].dims[ax] = p->size.dims[i];
    }
    return MXP_OK;
}

typedef struct blike_param {
    mxp_param_shape lhs_axes, rhs_axes;
} blike_param;

static int blike_shape(mxp_infer_shape_args *a) {
    const blike_param *p = a->params;
    const mxp_shape *l = &a->in[0], *r = &a->in[1];
    if (!ob_shape_known(l) || !ob_shape_known(r)) return MXP_EINCOMPLETE;
    if (!p->lhs_axes.has_value || p->lhs_axes.ndim == 0) {
        if (l->ndim != r->ndim)
            return ob_err(MXP_ESHAPE, "broadcast_like: lhs rank %d, rhs rank %d", l->ndim, r->ndim);
        for (int i = 0; i < l->ndim; i++)
            if (l->dims[i] != 1 && l->dims[i] != r->dims[i])
                return ob_err(MXP_ESHAPE, "broadcast_like: lhs dim %d (%lld) cannot become %lld", i,
                              (long long)l->dims[i], (long long)r->dims[i]);
        a->out[0] = *r;
        return MXP_OK;
    }
    if (p->lhs_axes.ndim != p->rhs_axes.ndim)
        return ob_err(MXP_EINVAL, "broadcast_like: lhs_axes and rhs_axes differ in length");
    a->out[0] = *l;
    for (int i = 0; i < p->lhs_axes.ndim; i++) {
        int64_t la, ra;
        if (xop_axis(p->lhs_axes.dims[i], l->ndim, &la) || xop_axis(p->rhs_axes.dims[i], r->ndim, &ra))
            return ob_err(MXP_EINVAL, "broadcast_like: axis out of range");
        if (l->dims[la] != 1)
            return ob_err(MXP_ESHAPE, "broadcast_like: lhs axis %lld has size %lld, not 1", (long long)la,
                          (long long)l->dims[la]);
        a->out[0].dims[la] = r->dims[ra];
    }
    return MXP_OK;
}

/* ----------------------------------------------------------- slice_like */
typedef struct slike_param {
    mxp_param_shape axes;
} slike_param;

static int slike_shape(mxp_infer_shape_args *a) {
    const slike_param *p = a->params;
    const mxp_shape *d = &a->in[0], *s = &a->in[1];
    if (!ob_shape_known(d) || !ob_shape_known(s)) return MXP_EINCOMPLETE;
    a->out[0] = *d;
    if (p->axes.ndim == 0) {
        if (d->ndim != s->ndim)
            return ob_err(MXP_ESHAPE, "slice_like: data rank %d, shape_like rank %d", d->ndim, s->ndim);
        for (int i = 0; i < d->ndim; i++) {
            if (s->dims[i] > d->dims[i])
                return ob_err(MXP_ESHAPE, "slice_like: dim %d: %lld > %lld", i, (long long)s->dims[i],
                              (long long)d->dims[i]);
            a->out[0].dims[i] = s->dims[i];
        }
        return MXP_OK;
    }
    for (int i = 0; i < p->axes.ndim; i++) {
        int64_t ax;
        if (xop_axis(p->axes.dims[i], d->ndim, &ax) || ax >= s->ndim)
            return ob_err(MXP_EINVAL, "slice_like: axis %lld out of range", (long long)p->axes.dims[i]);
        if (s->dims[ax] > d->dims[ax])
            return ob_err(MXP_ESHAPE, "slice_like: axis %lld: %lld > %lld", (long long)ax, (long long)s->dims[ax],
                          (long long)d->dims[ax]);
        a->out[0].dims[ax] = s->dims[ax];
    }
    return MXP_OK;
}

/* The output is the leading corner of the input. */
static int64_t corner_map(const void *p, const xarr *in, const int64_t *oc, int ond) {
    (void)p;
    (void)ond;
    return lin(in, oc);
}
GATHER_OP(corner)

/* ------------------------------------------ depth_to_space / space_to_depth */
typedef struct block_param {
    int64_t block_size;
} block_param;

static int d2s_shape(mxp_infer_shape_args *a) {
    const block_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    int64_t b = p->block_size;
    if (d->ndim != 4 || d->dims[1] % (b * b))
        return ob_err(MXP_ESHAPE, "depth_to_space: needs 4-D data with channels divisible by %lld",
                      (long long)(b * b));
    a->out[0] = *d;
    a->out[0].dims[1] = d->dims[1] / (b * b);
    a->out[0].dims[2] = d->dims[2] * b;
    a->out[0].dims[3] = d->dims[3] * b;
    return MXP_OK;
}

/* out[n, c, h*b+i, w*b+j] = in[n, (i*b+j)*C' + c, h, w] */
static int64_t d2s_map(const void *pp, const xarr *in, const int64_t *oc, int ond) {
    const block_param *p = pp;
    (void)ond;
    int64_t b = p->block_size, cp = in->shape[1] / (b * b);
    int64_t c[4] = {oc[0], ((oc[2] % b) * b + oc[3] % b) * cp + oc[1], oc[2] / b, oc[3] / b};
    return lin(in, c);
}
GATHER_OP(d2s)

static int s2d_shape(mxp_infer_shape_args *a) {
    const block_param *p = a->params;
    if (!known1(a)) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    int64_t b = p->block_size;
    if (d->ndim != 4 || d->dims[2] % b || d->dims[3] % b)
        return ob_err(MXP_ESHAPE, "space_to_depth: needs 4-D data with height and width divisible by %lld",
                      (long long)b);
    a->out[0] = *d;
    a->out[0].dims[1] = d->dims[1] * b * b;
    a->out[0].dims[2] = d->dims[2] / b;
    a->out[0].dims[3] = d->dims[3] / b;
    return MXP_OK;
}

/* out[n, (i*b+j)*C + c, h, w] = in[n, c, h*b+i, w*b+j] */
static int64_t s2d_map(const void *pp, const xarr *in, const int64_t *oc, int ond) {
    const block_param *p = pp;
    (void)ond;
    int64_t b = p->block_size, C = in->shape[1], q = oc[1] / C, cc = oc[1] % C;
    int64_t c[4] = {oc[0], cc, oc[2] * b + q / b, oc[3] * b + q % b};
    return lin(in, c);
}
GATHER_OP(s2d)

/* ------------------------------------------------ shape_array / size_array */
static int sarr_shape(mxp_infer_shape_args *a) {
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE;
    a->out[0].ndim = 1;
    a->out[0].dims[0] = a->in[0].ndim;
    return MXP_OK;
}
static int zarr_shape(mxp_infer_shape_args *a) {
    a->out[0].ndim = 1;
    a->out[0].dims[0] = 1;
    return MXP_OK;
}
static int i64_type(mxp_infer_type_args *a) {
    a->out[0] = MXP_DTYPE_I64;
    return a->in[0] < 0 ? MXP_EINCOMPLETE : MXP_OK;
}
static int sarr_f(xop_io *io) {
    for (int i = 0; i < io->in[0].nd; i++) io->out[0].v[i] = (double)io->in[0].shape[i];
    return MXP_OK;
}
static int zarr_f(xop_io *io) {
    io->out[0].v[0] = (double)io->in[0].n;
    return MXP_OK;
}
static const xop_info sarr_info = {sarr_f, NULL};
static const xop_info zarr_info = {zarr_f, NULL};

/* --------------------------------------------------------- registration */
static const mxp_param_def tile_params[] = {
    MXP_PARAM("reps", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, tile_param, reps, NULL, 0, 0, NULL,
              "The number of times to repeat the input along each axis."),
};
static const mxp_param_def repeat_params[] = {
    MXP_PARAM("repeats", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, repeat_param, repeats, NULL, 1, 0,
              NULL, "The number of repetitions for each element."),
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, repeat_param, axis, "None", 0, 0, NULL,
              "The axis along which to repeat values (None: the flattened input)."),
};
static const mxp_param_def reverse_params[] = {
    MXP_PARAM("axis", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, reverse_param, axis, NULL, 0, 0, NULL,
              "The axis which to reverse elements."),
};
static const mxp_param_def squeeze_params[] = {
    MXP_PARAM("axis", MXP_PARAM_SHAPE, 0, squeeze_param, axis, "None", 0, 0, NULL,
              "Axes of size 1 to remove (None: every axis of size 1)."),
};
static const mxp_param_def swap_params[] = {
    MXP_PARAM("dim1", MXP_PARAM_INT, 0, swap_param, dim1, "0", 0, 0, NULL, "the first axis to be swapped."),
    MXP_PARAM("dim2", MXP_PARAM_INT, 0, swap_param, dim2, "0", 0, 0, NULL, "the second axis to be swapped."),
};
static const mxp_param_def bto_params[] = {
    MXP_PARAM("shape", MXP_PARAM_SHAPE, 0, bto_param, shape, "[]", 0, 0, NULL,
              "The shape of the desired array (0 keeps the input's dim)."),
};
static const mxp_param_def bax_params[] = {
    MXP_PARAM("axis", MXP_PARAM_SHAPE, 0, bax_param, axis, "[]", 0, 0, NULL, "The axes to perform the broadcasting."),
    MXP_PARAM("size", MXP_PARAM_SHAPE, 0, bax_param, size, "[]", 0, 0, NULL, "Target sizes of the broadcasting axes."),
};
static const mxp_param_def blike_params[] = {
    MXP_PARAM("lhs_axes", MXP_PARAM_SHAPE, 0, blike_param, lhs_axes, "None", 0, 0, NULL, "Axes to perform broadcast on in the first input array"),
    MXP_PARAM("rhs_axes", MXP_PARAM_SHAPE, 0, blike_param, rhs_axes, "None", 0, 0, NULL, "Axes to copy from the second input array"),
};
static const mxp_param_def slike_params[] = {
    MXP_PARAM("axes", MXP_PARAM_SHAPE, 0, slike_param, axes, "()", 0, 0, NULL,
              "List of axes on which input data will be sliced according to the corresponding size of the second input."),
};
static const mxp_param_def block_params[] = {
    MXP_PARAM("block_size", MXP_PARAM_INT, MXP_PARAM_REQUIRED | MXP_PARAM_HAS_MIN, block_param, block_size, NULL, 1,
              0, NULL, "Blocks of [block_size. block_size] are moved"),
};

static const char *const lr_args[] = {"lhs", "rhs", NULL};
static const char *const slike_args[] = {"data", "shape_like", NULL};
static const char *const al_reverse[] = {"flip", NULL};
static const char *const al_swap[] = {"SwapAxis", NULL};
static const char *const al_bax[] = {"broadcast_axes", NULL};

#define NP_(A) ((uint32_t)(sizeof(A) / sizeof((A)[0])))
#define XDEF(NAME, ALIASES, DOC, PARAMS, PT, ARGS, SHAPE, TYPE, CHECK)                      \
    XDEFN(NAME, ALIASES, DOC, PARAMS, NP_(PARAMS), PT, ARGS, SHAPE, TYPE, CHECK)
#define XDEFN(NAME, ALIASES, DOC, PARAMS, NP, PT, ARGS, SHAPE, TYPE, CHECK)                 \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .aliases = ALIASES, .doc = DOC,          \
      .params = PARAMS, .n_params = NP,                                                      \
      .params_size = PT, .arg_names = ARGS, .infer_shape = SHAPE, .infer_type = TYPE,      \
      .backward_deps = MXP_BWD_OUT_GRAD, .check_params = CHECK }

static const mxp_op_def defs[] = {
    XDEF("tile", NULL, "Repeats the whole array multiple times.", tile_params, sizeof(tile_param), data_arg,
         tile_shape, NULL, NULL),
    XDEF("repeat", NULL, "Repeats each element of an array.", repeat_params, sizeof(repeat_param), data_arg,
         repeat_shape, NULL, NULL),
    XDEF("reverse", al_reverse, "Reverses the order of elements along given axes.", reverse_params,
         sizeof(reverse_param), data_arg, reverse_shape, NULL, reverse_check),
    XDEF("squeeze", NULL, "Removes axes of size 1.", squeeze_params, sizeof(squeeze_param), data_arg, squeeze_shape,
         NULL, NULL),
    XDEF("swapaxes", al_swap, "Interchanges two axes of an array.", swap_params, sizeof(swap_param), data_arg,
         swap_shape, NULL, NULL),
    XDEF("broadcast_to", NULL, "Broadcasts the input array to a new shape.", bto_params, sizeof(bto_param), data_arg,
         bto_shape, NULL, NULL),
    XDEF("broadcast_axis", al_bax, "Broadcasts the input array over particular axes.", bax_params, sizeof(bax_param),
         data_arg, bax_shape, NULL, NULL),
    XDEF("broadcast_like", NULL, "Broadcasts lhs to have the same shape as rhs.", blike_params, sizeof(blike_param),
         lr_args, blike_shape, NULL, NULL),
    XDEF("slice_like", NULL, "Slices data like the shape of shape_like (from index 0).", slike_params,
         sizeof(slike_param), slike_args, slike_shape, NULL, NULL),
    XDEF("depth_to_space", NULL, "Rearranges depth (channel) blocks into spatial blocks.", block_params,
         sizeof(block_param), data_arg, d2s_shape, NULL, NULL),
    XDEF("space_to_depth", NULL, "Rearranges spatial blocks into depth (channel) blocks.", block_params,
         sizeof(block_param), data_arg, s2d_shape, NULL, NULL),
    XDEFN("shape_array", NULL, "Returns the shape of the input as a 1-D int64 array.", NULL, 0, 0, data_arg, sarr_shape,
         i64_type, NULL),
    XDEFN("size_array", NULL, "Returns the element count of the input as a 1-D int64 array.", NULL, 0, 0, data_arg,
         zarr_shape, i64_type, NULL),
};

static const mxp_op_impl impls[] = {
    XOP_IMPL("tile", tile_info),          XOP_IMPL("repeat", repeat_info),
    XOP_IMPL("reverse", reverse_info),    XOP_IMPL("squeeze", squeeze_info),
    XOP_IMPL("swapaxes", swap_info),      XOP_IMPL("broadcast_to", bcast_info),
    XOP_IMPL("broadcast_axis", bcast_info), XOP_IMPL("broadcast_like", bcast_info),
    XOP_IMPL("slice_like", corner_info),  XOP_IMPL("depth_to_space", d2s_info),
    XOP_IMPL("space_to_depth", s2d_info), XOP_IMPL("shape_array", sarr_info),
    XOP_IMPL("size_array", zarr_info),
};

int ob_reg_shape_ext(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int rc = ob_add_op(r, &defs[i], &impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
