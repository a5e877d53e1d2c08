/* index_ext.c — selection and ordering ops with MXNet 1.x names and
 * parameters: pick (axis, keepdims, mode), gather_nd, scatter_nd (shape),
 * batch_take, topk (axis, k, ret_typ value|indices|mask|both, is_ascend,
 * dtype), sort (axis, is_ascend), argsort (axis, is_ascend, dtype),
 * SequenceMask / SequenceLast / SequenceReverse (use_sequence_length,
 * value, axis) and diag (k, axis1, axis2).
 *
 * All run on the float64 arrays of the xop driver (xop.h).  Index inputs
 * are float arrays holding integers (MXNet's convention); they get zero
 * gradient.  Gradients scatter-add out_grad to where forward read from, so
 * repeated indices accumulate.  Ties in sort/topk/argsort keep the earlier
 * element first (a stable order; MXNet's own order for ties is not
 * specified).  Not here: topk's and argsort's integer output dtypes other
 * than what the dtype parameter names are stored through the host's
 * conversion, exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "xop.h"

static int known(const mxp_shape *s) { return ob_shape_known(s); }

/* (outer, n, inner) split of a shape around axis ax. */
static void split3(const xarr *a, int ax, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = ob_numel(ax, a->shape);
    *n = a->shape[ax];
    *inner = ob_numel(a->nd - ax - 1, a->shape + ax + 1);
}

static int64_t clip_index(double v, int64_t n, int wrap) {
    int64_t i = isnan(v) ? 0 : (int64_t)v;
    if (wrap) {
        i %= n;
        return i < 0 ? i + n : i;
    }
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* ----------------------------------------------------------------- pick */
typedef struct pick_param {
    mxp_param_opt_int axis;
    int32_t keepdims, mode;
} pick_param;
static const char *const pick_modes[] = {"clip", "wrap", NULL};

static int pick_shape(mxp_infer_shape_args *a) {
    const pick_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    mxp_shape o;
    memset(&o, 0, sizeof o);
    if (!p->axis.has_value) {
        o.ndim = 1;
        o.dims[0] = 1;
    } else {
        int64_t ax;
        if (xop_axis(p->axis.value, d->ndim, &ax))
            return ob_err(MXP_EINVAL, "pick: axis %lld out of range for rank %d", (long long)p->axis.value, d->ndim);
        for (int i = 0; i < d->ndim; i++) {
            if (i == ax && !p->keepdims) continue;
            o.dims[o.ndim++] = i == ax ? 1 : d->dims[i];
        }
    }
    a->out[0] = o;
    if (a->in[1].ndim < 0) a->in[1] = o;
    else if (ob_shape_known(&a->in[1]) && ob_numel(a->in[1].ndim, a->in[1].dims) != ob_numel(o.ndim, o.dims))
        return ob_err(MXP_ESHAPE, "pick: index has %lld elements, the result %lld",
                      (long long)ob_numel(a->in[1].ndim, a->in[1].dims), (long long)ob_numel(o.ndim, o.dims));
    return MXP_OK;
}

static void pick_geom(const pick_param *p, const xarr *d, int64_t *outer, int64_t *n, int64_t *inner) {
    if (!p->axis.has_value) {
        *outer = 1;
        *n = d->n;
        *inner = 1;
        return;
    }
    int ax = (int)(p->axis.value < 0 ? p->axis.value + d->nd : p->axis.value);
    split3(d, ax, outer, n, inner);
}

static int pick_f(xop_io *io) {
    const pick_param *p = io->params;
    int64_t O, N, I;
    pick_geom(p, &io->in[0], &O, &N, &I);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            int64_t k = clip_index(io->in[1].v[o * I + i], N, p->mode == 1);
            io->out[0].v[o * I + i] = io->in[0].v[(o * N + k) * I + i];
        }
    return MXP_OK;
}
static int pick_b(xop_io *io) {
    const pick_param *p = io->params;
    int64_t O, N, I;
    pick_geom(p, &io->ig[0], &O, &N, &I);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            int64_t k = clip_index(io->in[1].v[o * I + i], N, p->mode == 1);
            io->ig[0].v[(o * N + k) * I + i] += io->og[0].v[o * I + i];
        }
    return MXP_OK;
}
static const xop_info pick_info = {pick_f, pick_b};

/* ------------------------------------------------- gather_nd / scatter_nd */
/* indices (M, Y...) into data (X0..X{N-1}): result (Y..., X_M...). */
static int gnd_result(const mxp_shape *d, const mxp_shape *ix, mxp_shape *o, const char *op) {
    int64_t m = ix->dims[0];
    if (ix->ndim < 1 || m > d->ndim)
        return ob_err(MXP_ESHAPE, "%s: indices' first dim %lld exceeds the data rank %d", op, (long long)m, d->ndim);
    memset(o, 0, sizeof *o);
    for (int i = 1; i < ix->ndim; i++) o->dims[o->ndim++] = ix->dims[i];
    for (int i = (int)m; i < d->ndim; i++) o->dims[o->ndim++] = d->dims[i];
    if (o->ndim > MXP_MAX_NDIM) return ob_err(MXP_ESHAPE, "%s: result rank too large", op);
    if (o->ndim == 0) o->dims[o->ndim++] = 1;
    return MXP_OK;
}

static int gnd_shape(mxp_infer_shape_args *a) {
    if (!known(&a->in[0]) || !known(&a->in[1])) return MXP_EINCOMPLETE;
    return gnd_result(&a->in[0], &a->in[1], &a->out[0], "gather_nd");
}

/* For y in [0, Y), the data offset of element (indices[:, y], 0...). */
static int gnd_base(const xarr *data, const xarr *ix, int64_t y, int64_t Y, int64_t *off) {
    int64_t m = ix->shape[0], k = 0;
    for (int d = 0; d < m; d++) {
        int64_t dim = data->shape[d];
        double v = ix->v[d * Y + y];
        int64_t i = (int64_t)v;
        if (i < 0) i += dim;
        if (i < 0 || i >= dim)
            return ob_err(MXP_EINVAL, "gather_nd: index %lld out of range [0, %lld) on axis %d", (long long)(int64_t)v,
                          (long long)dim, d);
        k = k * dim + i;
    }
    *off = k * ob_numel(data->nd - (int)m, data->shape + m);
    return MXP_OK;
}

static int gnd_f(xop_io *io) {
    const xarr *d = &io->in[0], *ix = &io->in[1];
    int64_t Y = ix->n / ix->shape[0], R = ob_numel(d->nd - (int)ix->shape[0], d->shape + ix->shape[0]);
    for (int64_t y = 0; y < Y; y++) {
        int64_t off;
        int rc = gnd_base(d, ix, y, Y, &off);
        if (rc) return rc;
        memcpy(io->out[0].v + y * R, d->v + off, (size_t)R * sizeof(double));
    }
    return MXP_OK;
}
static int gnd_b(xop_io *io) {
    const xarr *ix = &io->in[1];
    xarr *g = &io->ig[0];
    int64_t Y = ix->n / ix->shape[0], R = ob_numel(g->nd - (int)ix->shape[0], g->shape + ix->shape[0]);
    for (int64_t y = 0; y < Y; y++) {
        int64_t off;
        int rc = gnd_base(g, ix, y, Y, &off);
        if (rc) return rc;
        for (int64_t r = 0; r < R; r++) g->v[off + r] += io->og[0].v[y * R + r];
    }
    return MXP_OK;
}
static const xop_info gnd_info = {gnd_f, gnd_b};

typedef struct snd_param {
    mxp_param_shape shape;
} snd_param;

static int snd_shape(mxp_infer_shape_args *a) {
    const snd_param *p = a->params;
    mxp_shape o;
    memset(&o, 0, sizeof o);
    o.ndim = p->shape.ndim;
    for (int i = 0; i < o.ndim; i++) o.dims[i] = p->shape.dims[i];
    a->out[0] = o;
    if (!known(&a->in[0]) || !known(&a->in[1])) return MXP_EINCOMPLETE;
    mxp_shape want;
    int rc = gnd_result(&o, &a->in[1], &want, "scatter_nd");
    if (rc) return rc;
    if (ob_numel(want.ndim, want.dims) != ob_numel(a->in[0].ndim, a->in[0].dims))
        return ob_err(MXP_ESHAPE, "scatter_nd: data has %lld elements, indices and shape select %lld",
                      (long long)ob_numel(a->in[0].ndim, a->in[0].dims), (long long)ob_numel(want.ndim, want.dims));
    return MXP_OK;
}

/* Later duplicates win in forward (a plain assignment); backward gathers. */
static int snd_f(xop_io *io) {
    const xarr *ix = &io->in[1];
    xarr *o = &io->out[0];
    int64_t Y = ix->n / ix->shape[0], R = ob_numel(o->nd - (int)ix->shape[0], o->shape + ix->shape[0]);
    for (int64_t y = 0; y < Y; y++) {
        int64_t off;
        int rc = gnd_base(o, ix, y, Y, &off);
        if (rc) return rc;
        memcpy(o->v + off, io->in[0].v + y * R, (size_t)R * sizeof(double));
    }
    return MXP_OK;
}
static int snd_b(xop_io *io) {
    const xarr *ix = &io->in[1];
    const xarr *g = &io->og[0];
    int64_t Y = ix->n / ix->shape[0], R = ob_numel(g->nd - (int)ix->shape[0], g->shape + ix->shape[0]);
    for (int64_t y = 0; y < Y; y++) {
        int64_t off;
        int rc = gnd_base(g, ix, y, Y, &off);
        if (rc) return rc;
        memcpy(io->ig[0].v + y * R, g->v + off, (size_t)R * sizeof(double));
    }
    return MXP_OK;
}
static const xop_info snd_info = {snd_f, snd_b};

/* ------------------------------------------------------------ batch_take */
static int btake_shape(mxp_infer_shape_args *a) {
    if (!known(&a->in[0]) || !known(&a->in[1])) return MXP_EINCOMPLETE;
    if (a->in[0].ndim != 2 || ob_numel(a->in[1].ndim, a->in[1].dims) != a->in[0].dims[0])
        return ob_err(MXP_ESHAPE, "batch_take: needs a (N, M) array and N indices");
    a->out[0] = a->in[1];
    return MXP_OK;
}
static int btake_f(xop_io *io) {
    int64_t N = io->in[0].shape[0], M = io->in[0].shape[1];
    for (int64_t i = 0; i < N; i++) io->out[0].v[i] = io->in[0].v[i * M + clip_index(io->in[1].v[i], M, 0)];
    return MXP_OK;
}
static int btake_b(xop_io *io) {
    int64_t N = io->ig[0].shape[0], M = io->ig[0].shape[1];
    for (int64_t i = 0; i < N; i++) io->ig[0].v[i * M + clip_index(io->in[1].v[i], M, 0)] += io->og[0].v[i];
    return MXP_OK;
}
static const xop_info btake_info = {btake_f, btake_b};

/* ------------------------------------------------- topk / sort / argsort */
enum { RET_VALUE, RET_INDICES, RET_MASK, RET_BOTH };
static const char *const ret_choices[] = {"value", "indices", "mask", "both", NULL};

typedef struct topk_param {
    mxp_param_opt_int axis;
    int64_t k;
    int32_t ret_typ, is_ascend, dtype, reserved;
} topk_param;

typedef struct sort_param {
    mxp_param_opt_int axis;
    int32_t is_ascend, dtype;
} sort_param;

/* Row geometry of axis (None: the flattened array). */
static int row_geom(const mxp_param_opt_int *axis, const xarr *d, int64_t *O, int64_t *N, int64_t *I) {
    if (!axis->has_value) {
        *O = 1, *N = d->n, *I = 1;
        return MXP_OK;
    }
    int ax = (int)(axis->value < 0 ? axis->value + d->nd : axis->value);
    split3(d, ax, O, N, I);
    return MXP_OK;
}

static int64_t topk_k(const topk_param *p, int64_t n) { return p->k <= 0 || p->k > n ? n : p->k; }

static int topk_shape_for(const mxp_param_opt_int *axis, int64_t k, int whole, const mxp_shape *d, mxp_shape *o,
                          const char *op) {
    if (!axis->has_value) {
        int64_t n = ob_numel(d->ndim, d->dims);
        memset(o, 0, sizeof *o);
        o->ndim = 1;
        o->dims[0] = whole ? n : (k <= 0 || k > n ? n : k);
        return MXP_OK;
    }
    int64_t ax;
    if (xop_axis(axis->value, d->ndim, &ax))
        return ob_err(MXP_EINVAL, "%s: axis %lld out of range for rank %d", op, (long long)axis->value, d->ndim);
    *o = *d;
    if (!whole) o->dims[ax] = k <= 0 || k > d->dims[ax] ? d->dims[ax] : k;
    return MXP_OK;
}

static int topk_list_outputs(mxp_list_names_args *a) {
    const topk_param *p = a->params;
    a->count = p->ret_typ == RET_BOTH ? 2 : 1;
    if (a->capacity < a->count) return MXP_EINVAL;
    snprintf(a->names[0], MXP_NAME_MAX, "output");
    if (a->count == 2) snprintf(a->names[1], MXP_NAME_MAX, "indices");
    return MXP_OK;
}

static int topk_shape(mxp_infer_shape_args *a) {
    const topk_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    int rc = topk_shape_for(&p->axis, p->k, p->ret_typ == RET_MASK, &a->in[0], &a->out[0], "topk");
    if (!rc && p->ret_typ == RET_MASK) a->out[0] = a->in[0]; /* the mask has the data's shape */
    if (!rc && a->n_out > 1) a->out[1] = a->out[0];
    return rc;
}

static int topk_type(mxp_infer_type_args *a) {
    const topk_param *p = a->params;
    if (a->in[0] < 0) return MXP_EINCOMPLETE;
    a->out[0] = p->ret_typ == RET_INDICES ? p->dtype : a->in[0];
    if (a->n_out > 1) a->out[1] = p->dtype;
    return MXP_OK;
}

/* Sort order of row (o, i): idx[0..N) by value, stable. */
typedef struct sort_ctx {
    const double *v;
    int64_t I;
    int asc;
} sort_ctx;
static _Thread_local const sort_ctx *g_sort;
static int cmp_idx(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    double va = g_sort->v[a * g_sort->I], vb = g_sort->v[b * g_sort->I];
    int c = va < vb ? -1 : va > vb ? 1 : 0;
    if (!g_sort->asc) c = -c;
    return c ? c : (a < b ? -1 : 1);
}

static int sort_row(const double *row, int64_t N, int64_t I, int asc, int64_t *idx) {
    for (int64_t j = 0; j < N; j++) idx[j] = j;
    sort_ctx c = {row, I, asc};
    g_sort = &c;
    qsort(idx, (size_t)N, sizeof *idx, cmp_idx);
    return MXP_OK;
}

/* Runs fn for each row with its sorted order. */
typedef void (*row_fn)(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx);
static int for_rows(xop_io *io, const mxp_param_opt_int *axis, int asc, const xarr *d, row_fn fn) {
    int64_t O, N, I;
    row_geom(axis, d, &O, &N, &I);
    int64_t *idx = ob_host->alloc_host((uint64_t)(N ? N : 1) * sizeof *idx);
    if (!idx) return ob_err(MXP_ENOMEM, "ops-basic: out of memory sorting %lld values", (long long)N);
    for (int64_t o = 0; o < O; o++)
        for (int64_t i = 0; i < I; i++) {
            sort_row(io->in[0].v + o * N * I + i, N, I, asc, idx);
            fn(io, o, i, N, I, idx);
        }
    ob_host->free_host(idx);
    return MXP_OK;
}

static void topk_row_f(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx) {
    const topk_param *p = io->params;
    int64_t k = topk_k(p, N);
    const double *x = io->in[0].v + o * N * I + i;
    if (p->ret_typ == RET_MASK) {
        for (int64_t j = 0; j < k; j++) io->out[0].v[o * N * I + i + idx[j] * I] = 1.0;
        return;
    }
    for (int64_t j = 0; j < k; j++) {
        double *dst = io->out[0].v + o * k * I + i + j * I;
        if (p->ret_typ == RET_INDICES) *dst = (double)idx[j];
        else *dst = x[idx[j] * I];
        if (p->ret_typ == RET_BOTH) io->out[1].v[o * k * I + i + j * I] = (double)idx[j];
    }
}
static void topk_row_b(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx) {
    const topk_param *p = io->params;
    int64_t k = topk_k(p, N);
    if (p->ret_typ != RET_VALUE && p->ret_typ != RET_BOTH) return;
    for (int64_t j = 0; j < k; j++) io->ig[0].v[o * N * I + i + idx[j] * I] += io->og[0].v[o * k * I + i + j * I];
}
static int topk_f(xop_io *io) {
    const topk_param *p = io->params;
    return for_rows(io, &p->axis, p->is_ascend, &io->in[0], topk_row_f);
}
static int topk_b(xop_io *io) {
    const topk_param *p = io->params;
    return for_rows(io, &p->axis, p->is_ascend, &io->in[0], topk_row_b);
}
static const xop_info topk_info = {topk_f, topk_b};

static int sort_shape(mxp_infer_shape_args *a) {
    const sort_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    return topk_shape_for(&p->axis, 0, 0, &a->in[0], &a->out[0], "sort");
}
static int argsort_type(mxp_infer_type_args *a) {
    const sort_param *p = a->params;
    if (a->in[0] < 0) return MXP_EINCOMPLETE;
    a->out[0] = p->dtype;
    return MXP_OK;
}
static void sort_row_f(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx) {
    for (int64_t j = 0; j < N; j++) io->out[0].v[o * N * I + i + j * I] = io->in[0].v[o * N * I + i + idx[j] * I];
}
static void sort_row_b(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx) {
    for (int64_t j = 0; j < N; j++) io->ig[0].v[o * N * I + i + idx[j] * I] += io->og[0].v[o * N * I + i + j * I];
}
static void argsort_row_f(xop_io *io, int64_t o, int64_t i, int64_t N, int64_t I, const int64_t *idx) {
    for (int64_t j = 0; j < N; j++) io->out[0].v[o * N * I + i + j * I] = (double)idx[j];
}
static int sort_f(xop_io *io) {
    const sort_param *p = io->params;
    return for_rows(io, &p->axis, p->is_ascend, &io->in[0], sort_row_f);
}
static int sort_b(xop_io *io) {
    const sort_param *p = io->params;
    return for_rows(io, &p->axis, p->is_ascend, &io->in[0], sort_row_b);
}
static int argsort_f(xop_io *io) {
    const sort_param *p = io->params;
    return for_rows(io, &p->axis, p->is_ascend, &io->in[0], argsort_row_f);
}
static const xop_info sort_info = {sort_f, sort_b};
static const xop_info argsort_info = {argsort_f, NULL};

/* ------------------------------------------------------------ Sequence* */
typedef struct seq_param {
    int32_t use_sequence_length, reserved;
    double value;
    int64_t axis;
} seq_param;

static int seq_list_args(mxp_list_names_args *a) {
    const seq_param *p = a->params;
    a->count = p->use_sequence_length ? 2 : 1;
    if (a->capacity < a->count) return MXP_EINVAL;
    snprintf(a->names[0], MXP_NAME_MAX, "data");
    if (a->count == 2) snprintf(a->names[1], MXP_NAME_MAX, "sequence_length");
    return MXP_OK;
}

static int seq_check(const seq_param *p, const mxp_infer_shape_args *a, const char *op) {
    const mxp_shape *d = &a->in[0];
    if (p->axis != 0 && p->axis != 1) return ob_err(MXP_EINVAL, "%s: axis must be 0 or 1, got %lld", op, (long long)p->axis);
    if (d->ndim < 2) return ob_err(MXP_ESHAPE, "%s: data needs at least 2 dims", op);
    if (p->use_sequence_length) {
        int64_t B = d->dims[p->axis ? 0 : 1];
        mxp_shape l;
        memset(&l, 0, sizeof l);
        l.ndim = 1;
        l.dims[0] = B;
        if (a->in[1].ndim < 0) ((mxp_infer_shape_args *)a)->in[1] = l;
        else if (known(&a->in[1]) && (a->in[1].ndim != 1 || a->in[1].dims[0] != B))
            return ob_err(MXP_ESHAPE, "%s: sequence_length must be (%lld,)", op, (long long)B);
    }
    return MXP_OK;
}

static int smask_shape(mxp_infer_shape_args *a) {
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    int rc = seq_check(a->params, a, "SequenceMask");
    if (!rc) a->out[0] = a->in[0];
    return rc;
}
static int slast_shape(mxp_infer_shape_args *a) {
    const seq_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    int rc = seq_check(p, a, "SequenceLast");
    if (rc) return rc;
    mxp_shape o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < a->in[0].ndim; i++)
        if (i != p->axis) o.dims[o.ndim++] = a->in[0].dims[i];
    a->out[0] = o;
    return MXP_OK;
}
static int srev_shape(mxp_infer_shape_args *a) {
    const seq_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    if (p->axis != 0) return ob_err(MXP_EINVAL, "SequenceReverse: only axis 0 is supported (as in MXNet)");
    int rc = seq_check(p, a, "SequenceReverse");
    if (!rc) a->out[0] = a->in[0];
    return rc;
}

/* Element (t, b, r) of data laid out (T, B, R) for axis 0 or (B, T, R). */
typedef struct seq_geom {
    int64_t T, B, R;
    int axis;
} seq_geom;
static seq_geom seq_of(const seq_param *p, const xarr *d) {
    seq_geom g;
    g.axis = (int)p->axis;
    g.T = d->shape[g.axis];
    g.B = d->shape[1 - g.axis];
    g.R = d->n / (g.T * g.B);
    return g;
}
static int64_t seq_at(const seq_geom *g, int64_t t, int64_t b) { return (g->axis ? b * g->T + t : t * g->B + b) * g->R; }
static int64_t seq_len(const seq_param *p, const xop_io *io, const seq_geom *g, int64_t b) {
    if (!p->use_sequence_length) return g->T;
    int64_t l = (int64_t)io->in[1].v[b];
    return l < 0 ? 0 : l > g->T ? g->T : l;
}

static int smask_f(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->in[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t L = seq_len(p, io, &g, b);
        for (int64_t t = 0; t < g.T; t++)
            for (int64_t r = 0; r < g.R; r++)
                io->out[0].v[seq_at(&g, t, b) + r] = t < L ? io->in[0].v[seq_at(&g, t, b) + r] : p->value;
    }
    return MXP_OK;
}
static int smask_b(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->ig[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t L = seq_len(p, io, &g, b);
        for (int64_t t = 0; t < L; t++)
            for (int64_t r = 0; r < g.R; r++) io->ig[0].v[seq_at(&g, t, b) + r] = io->og[0].v[seq_at(&g, t, b) + r];
    }
    return MXP_OK;
}
static int slast_f(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->in[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t t = seq_len(p, io, &g, b) - 1;
        if (t < 0) t = 0;
        memcpy(io->out[0].v + b * g.R, io->in[0].v + seq_at(&g, t, b), (size_t)g.R * sizeof(double));
    }
    return MXP_OK;
}
static int slast_b(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->ig[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t t = seq_len(p, io, &g, b) - 1;
        if (t < 0) t = 0;
        for (int64_t r = 0; r < g.R; r++) io->ig[0].v[seq_at(&g, t, b) + r] += io->og[0].v[b * g.R + r];
    }
    return MXP_OK;
}
/* Steps [0, L) reversed, steps from L on kept in place. */
static int64_t srev_src(int64_t t, int64_t L) { return t < L ? L - 1 - t : t; }
static int srev_f(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->in[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t L = seq_len(p, io, &g, b);
        for (int64_t t = 0; t < g.T; t++)
            memcpy(io->out[0].v + seq_at(&g, t, b), io->in[0].v + seq_at(&g, srev_src(t, L), b),
                   (size_t)g.R * sizeof(double));
    }
    return MXP_OK;
}
static int srev_b(xop_io *io) {
    const seq_param *p = io->params;
    seq_geom g = seq_of(p, &io->ig[0]);
    for (int64_t b = 0; b < g.B; b++) {
        int64_t L = seq_len(p, io, &g, b);
        for (int64_t t = 0; t < g.T; t++)
            memcpy(io->ig[0].v + seq_at(&g, srev_src(t, L), b), io->og[0].v + seq_at(&g, t, b),
                   (size_t)g.R * sizeof(double));
    }
    return MXP_OK;
}
static const xop_info smask_info = {smask_f, smask_b};
static const xop_info slast_info = {slast_f, slast_b};
static const xop_info srev_info = {srev_f, srev_b};

/* ----------------------------------------------------------------- diag */
typedef struct diag_param {
    int64_t k, axis1, axis2;
} diag_param;

static int diag_shape(mxp_infer_shape_args *a) {
    const diag_param *p = a->params;
    if (!known(&a->in[0])) return MXP_EINCOMPLETE;
    const mxp_shape *d = &a->in[0];
    mxp_shape o;
    memset(&o, 0, sizeof o);
    if (d->ndim == 1) {
        int64_t n = d->dims[0] + (p->k < 0 ? -p->k : p->k);
        o.ndim = 2;
        o.dims[0] = o.dims[1] = n;
    } else {
        if (d->ndim != 2 || !((p->axis1 == 0 && p->axis2 == 1) || (p->axis1 == 1 && p->axis2 == 0)))
            return ob_err(MXP_EUNSUPPORTED, "diag: only 1-D and 2-D inputs (axis1, axis2 = 0, 1) are supported");
        int64_t r = d->dims[0], c = d->dims[1], k = p->axis1 == 0 ? p->k : -p->k;
        int64_t n = k >= 0 ? (c - k < r ? c - k : r) : (r + k < c ? r + k : c);
        if (n < 1) return ob_err(MXP_ESHAPE, "diag: offset %lld is outside a %lldx%lld matrix", (long long)p->k,
                                 (long long)r, (long long)c);
        o.ndim = 1;
        o.dims[0] = n;
    }
    a->out[0] = o;
    return MXP_OK;
}

/* Visits the diagonal pairs (vector index j, matrix offset). */
static void diag_pairs(const diag_param *p, const xarr *mat, int transposed, int64_t n, double *vec, int to_vec,
                       double *m) {
    int64_t cols = mat->shape[1], k = p->k; /* in the (possibly transposed) view */
    for (int64_t j = 0; j < n; j++) {
        int64_t r = k >= 0 ? j : j - k, c = k >= 0 ? j + k : j;
        int64_t off = transposed ? c * cols + r : r * cols + c;
        if (to_vec) vec[j] += m[off];
        else m[off] += vec[j];
    }
}

static int diag_f(xop_io *io) {
    const diag_param *p = io->params;
    if (io->in[0].nd == 1) diag_pairs(p, &io->out[0], 0, io->in[0].n, io->in[0].v, 0, io->out[0].v);
    else diag_pairs(p, &io->in[0], p->axis1 != 0, io->out[0].n, io->out[0].v, 1, io->in[0].v);
    return MXP_OK;
}
static int diag_b(xop_io *io) {
    const diag_param *p = io->params;
    if (io->ig[0].nd == 1) diag_pairs(p, &io->og[0], 0, io->ig[0].n, io->ig[0].v, 1, io->og[0].v);
    else diag_pairs(p, &io->ig[0], p->axis1 != 0, io->og[0].n, io->og[0].v, 0, io->ig[0].v);
    return MXP_OK;
}
static const xop_info diag_info = {diag_f, diag_b};

/* --------------------------------------------------------- registration */
static const mxp_param_def pick_params[] = {
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, pick_param, axis, "-1", 0, 0, NULL,
              "The axis to pick the elements (None: the flattened input)."),
    MXP_PARAM("keepdims", MXP_PARAM_BOOL, 0, pick_param, keepdims, "False", 0, 0, NULL,
              "If true, the axis is left in the result as dimension with size one."),
    MXP_PARAM("mode", MXP_PARAM_ENUM, 0, pick_param, mode, "clip", 0, 0, pick_modes,
              "How out-of-bound indices behave: clip or wrap."),
};
static const mxp_param_def snd_params[] = {
    MXP_PARAM("shape", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, snd_param, shape, NULL, 0, 0, NULL, "Shape of output."),
};
static const mxp_param_def topk_params[] = {
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, topk_param, axis, "-1", 0, 0, NULL,
              "Axis along which to choose the top k (None: the flattened input)."),
    MXP_PARAM("k", MXP_PARAM_INT, 0, topk_param, k, "1", 0, 0, NULL,
              "Number of top elements to select; k < 1 selects them all."),
    MXP_PARAM("ret_typ", MXP_PARAM_ENUM, 0, topk_param, ret_typ, "indices", 0, 0, ret_choices,
              "The return type: value, indices, mask or both (value and indices)."),
    MXP_PARAM("is_ascend", MXP_PARAM_BOOL, 0, topk_param, is_ascend, "False", 0, 0, NULL,
              "Whether to choose k largest or k smallest elements."),
    MXP_PARAM("dtype", MXP_PARAM_DTYPE, 0, topk_param, dtype, "float32", 0, 0, NULL,
              "The dtype of the output indices."),
};
static const mxp_param_def sort_params[] = {
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, sort_param, axis, "-1", 0, 0, NULL,
              "Axis along which to sort (None: the flattened input)."),
    MXP_PARAM("is_ascend", MXP_PARAM_BOOL, 0, sort_param, is_ascend, "True", 0, 0, NULL,
              "Whether to sort in ascending or descending order."),
};
static const mxp_param_def argsort_params[] = {
    MXP_PARAM("axis", MXP_PARAM_OPT_INT, 0, sort_param, axis, "-1", 0, 0, NULL,
              "Axis along which to sort (None: the flattened input)."),
    MXP_PARAM("is_ascend", MXP_PARAM_BOOL, 0, sort_param, is_ascend, "True", 0, 0, NULL,
              "Whether to sort in ascending or descending order."),
    MXP_PARAM("dtype", MXP_PARAM_DTYPE, 0, sort_param, dtype, "float32", 0, 0, NULL,
              "The dtype of the output indices."),
};
static const mxp_param_def seq_params[] = {
    MXP_PARAM("use_sequence_length", MXP_PARAM_BOOL, 0, seq_param, use_sequence_length, "False", 0, 0, NULL,
              "If set to true, the sequence_length input gives each sequence's length."),
    MXP_PARAM("value", MXP_PARAM_FLOAT, 0, seq_param, value, "0", 0, 0, NULL, "The value to be used as a mask."),
    MXP_PARAM("axis", MXP_PARAM_INT, 0, seq_param, axis, "0", 0, 0, NULL,
              "The sequence axis: 0 (T, B, ...) or 1 (B, T, ...)."),
};
static const mxp_param_def diag_params[] = {
    MXP_PARAM("k", MXP_PARAM_INT, 0, diag_param, k, "0", 0, 0, NULL, "Diagonal in question."),
    MXP_PARAM("axis1", MXP_PARAM_INT, 0, diag_param, axis1, "0", 0, 0, NULL, "The first axis of the sub-arrays."),
    MXP_PARAM("axis2", MXP_PARAM_INT, 0, diag_param, axis2, "1", 0, 0, NULL, "The second axis of the sub-arrays."),
};

static const char *const data_arg[] = {"data", NULL};
static const char *const pick_args[] = {"data", "index", NULL};
static const char *const gnd_args[] = {"data", "indices", NULL};
static const char *const btake_args[] = {"a", "indices", NULL};

#define XD(NAME, DOC, PARAMS, NP, PT, ARGS, SHAPE, TYPE)                                         \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = PARAMS, .n_params = NP, \
      .params_size = PT, .arg_names = ARGS, .infer_shape = SHAPE, .infer_type = TYPE,          \
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA }
#define NP_(A) ((uint32_t)(sizeof(A) / sizeof((A)[0])))

static int index_type(mxp_infer_type_args *a) {
    if (a->in[0] < 0) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    for (uint32_t i = 1; i < a->n_in; i++)
        if (a->in[i] < 0) a->in[i] = a->in[0];
    return MXP_OK;
}

static const mxp_op_def defs[] = {
    XD("pick", "Picks elements from an input array along the given axis.", pick_params, NP_(pick_params),
       sizeof(pick_param), pick_args, pick_shape, index_type),
    XD("gather_nd", "Gathers elements or slices from data into a tensor of the indices' shape.", NULL, 0, 0,
       gnd_args, gnd_shape, index_type),
    XD("scatter_nd", "Scatters data into a new tensor of the given shape according to indices.", snd_params,
       NP_(snd_params), sizeof(snd_param), gnd_args, snd_shape, index_type),
    XD("batch_take", "Takes elements from a (N, M) array: out[i] = a[i, indices[i]].", NULL, 0, 0, btake_args,
       btake_shape, index_type),
    { .hdr = MXP_HEADER(mxp_op_def), .name = "topk",
      .doc = "Returns the top k elements (or their indices, or a mask) along an axis.", .params = topk_params,
      .n_params = NP_(topk_params), .params_size = sizeof(topk_param), .arg_names = data_arg,
      .list_outputs = topk_list_outputs, .infer_shape = topk_shape, .infer_type = topk_type,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    XD("sort", "Returns a sorted copy of an input array along the given axis.", sort_params, NP_(sort_params),
       sizeof(sort_param), data_arg, sort_shape, NULL),
    XD("argsort", "Returns the indices that would sort an input array along the given axis.", argsort_params,
       NP_(argsort_params), sizeof(sort_param), data_arg, sort_shape, argsort_type),
    { .hdr = MXP_HEADER(mxp_op_def), .name = "SequenceMask",
      .doc = "Sets all elements outside each sequence to a constant value.", .params = seq_params,
      .n_params = NP_(seq_params), .params_size = sizeof(seq_param), .list_args = seq_list_args,
      .infer_shape = smask_shape, .infer_type = index_type, .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "SequenceLast", .doc = "Takes the last element of each sequence.",
      .params = seq_params, .n_params = NP_(seq_params), .params_size = sizeof(seq_param),
      .list_args = seq_list_args, .infer_shape = slast_shape, .infer_type = index_type,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    { .hdr = MXP_HEADER(mxp_op_def), .name = "SequenceReverse", .doc = "Reverses the elements of each sequence.",
      .params = seq_params, .n_params = NP_(seq_params), .params_size = sizeof(seq_param),
      .list_args = seq_list_args, .infer_shape = srev_shape, .infer_type = index_type,
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA },
    XD("diag", "Extracts a diagonal or constructs a diagonal array.", diag_params, NP_(diag_params),
       sizeof(diag_param), data_arg, diag_shape, NULL),
};

static const mxp_op_impl impls[] = {
    XOP_IMPL("pick", pick_info),
    XOP_IMPL("gather_nd", gnd_info),
    XOP_IMPL("scatter_nd", snd_info),
    XOP_IMPL("batch_take", btake_info),
    XOP_IMPL("topk", topk_info),
    XOP_IMPL("sort", sort_info),
    XOP_IMPL("argsort", argsort_info),
    XOP_IMPL("SequenceMask", smask_info),
    XOP_IMPL("SequenceLast", slast_info),
    XOP_IMPL("SequenceReverse", srev_info),
    XOP_IMPL("diag", diag_info),
};

int ob_reg_index_ext(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int rc = ob_add_op(r, &defs[i], &impls[i]);
        if (rc) return rc;
    }
    return MXP_OK;
}
