/* pooling_nd.c — Pooling impl "nd": 1-D (NCW) and 3-D (NCDHW) max / avg /
 * sum pooling, f32/f64, forward and backward, split over (n, c) planes.
 * The 2-D impl (pooling.c) keeps 4-D data; `supports` here refuses it.
 *
 * Every rank runs as 3-D (pool_geom3: a 1-D window has depth and height 1).
 * Window arithmetic is MXNet's pool_*_1d/3d kernels': per axis the window
 * [o*s - p, o*s - p + k) is clipped to the padded extent [-p, in + p) for
 * the avg divisor when count_include_pad, and to the data [0, in) for the
 * values (and for the divisor otherwise).  Max forward starts at the
 * dtype's lowest value and takes strictly larger values (NaN never taken);
 * max backward routes a window's gradient to its first maximum in
 * (d, h, w) order, rescanning the input, as the 2-D impl does. */
#include "pooling.h"
#include "bf16_via_f32.h"

#include <float.h>

int pool_geom3_init(const pool_params *p, const int64_t *shape, int ndim, pool_geom3 *g) {
    int nd = ndim - 2, bad = 0;
    memset(g, 0, sizeof *g);
    g->N = shape[0]; g->C = shape[1]; g->type = p->pool_type; g->cip = p->count_include_pad;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd);
        g->in[i] = j >= 0 ? shape[2 + j] : 1;
        if (j < 0 || p->global_pool) { g->k[i] = g->in[i]; g->s[i] = 1; g->p[i] = 0; }
        else { g->k[i] = p->kernel.dims[j]; g->s[i] = p->stride.dims[j]; g->p[i] = p->pad.dims[j]; }
        int64_t span = g->in[i] + 2 * g->p[i] - g->k[i];
        if (span < 0) { bad = 1; span = 0; }
        g->out[i] = 1 + (p->pooling_convention == 1 ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]);
    }
    return bad ? -1 : 0;
}

typedef struct win { int64_t lo[3], hi[3], psize; } win;

/* The window of output position (o0, o1, o2), clipped as described above. */
static void window(const pool_geom3 *g, const int64_t *o, win *w) {
    int64_t padded = 1, inside = 1;
    for (int i = 0; i < 3; i++) {
        int64_t lo = o[i] * g->s[i] - g->p[i], hi = lo + g->k[i];
        if (hi > g->in[i] + g->p[i]) hi = g->in[i] + g->p[i];
        padded *= hi - lo;
        if (lo < 0) lo = 0;
        if (hi > g->in[i]) hi = g->in[i];
        w->lo[i] = lo; w->hi[i] = hi;
        inside *= hi > lo ? hi - lo : 0;
    }
    w->psize = g->cip ? padded : inside;
}

typedef struct pjob { pool_geom3 g; int32_t dt, req; const void *x, *dy; void *y, *dx; } pjob;

static void fwd_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pool_geom3 *g = &j->g;
    int64_t X = g->in[0] * g->in[1] * g->in[2], Y = g->out[0] * g->out[1] * g->out[2];
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = (const T *)j->x + pl * X;
        T *y = (T *)j->y + pl * Y;
        int64_t o[3], q = 0;
        for (o[0] = 0; o[0] < g->out[0]; o[0]++) for (o[1] = 0; o[1] < g->out[1]; o[1]++)
        for (o[2] = 0; o[2] < g->out[2]; o[2]++, q++) {
            win w; window(g, o, &w);
            T v = j->dt == MXP_DTYPE_F32 ? (T)-FLT_MAX : (T)-DBL_MAX, s = 0;
            for (int64_t a = w.lo[0]; a < w.hi[0]; a++) for (int64_t c = w.lo[1]; c < w.hi[1]; c++) {
                const T *r = x + (a * g->in[1] + c) * g->in[2];
                if (g->type == POOL_MAX) { for (int64_t t = w.lo[2]; t < w.hi[2]; t++) if (r[t] > v) v = r[t]; }
                else for (int64_t t = w.lo[2]; t < w.hi[2]; t++) s += r[t];
            }
            if (g->type == POOL_AVG) v = w.psize > 0 ? s / (T)w.psize : 0;
            else if (g->type == POOL_SUM) v = s;
            NN_STORE(j->req, y[q], v);
        }
    });
}

static void bwd_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pool_geom3 *g = &j->g;
    int64_t X = g->in[0] * g->in[1] * g->in[2], Y = g->out[0] * g->out[1] * g->out[2];
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = j->x ? (const T *)j->x + pl * X : NULL;
        const T *dy = (const T *)j->dy + pl * Y;
        T *dx = (T *)j->dx + pl * X;
        if (j->req != MXP_REQ_ADD) memset(dx, 0, (size_t)X * sizeof(T));
        int64_t o[3], q = 0;
        for (o[0] = 0; o[0] < g->out[0]; o[0]++) for (o[1] = 0; o[1] < g->out[1]; o[1]++)
        for (o[2] = 0; o[2] < g->out[2]; o[2]++, q++) {
            win w; window(g, o, &w);
            T gv = dy[q];
            if (g->type == POOL_MAX) {
                int64_t best = -1; T v = 0;
                for (int64_t a = w.lo[0]; a < w.hi[0]; a++) for (int64_t c = w.lo[1]; c < w.hi[1]; c++)
                    for (int64_t t = w.lo[2]; t < w.hi[2]; t++) {
                        int64_t i = (a * g->in[1] + c) * g->in[2] + t;
                        if (best < 0 || x[i] > v) { v = x[i]; best = i; }
                    }
                if (best >= 0) dx[best] += gv;
                continue;
            }
            T s = g->type == POOL_AVG ? (w.psize > 0 ? gv / (T)w.psize : 0) : gv;
            for (int64_t a = w.lo[0]; a < w.hi[0]; a++) for (int64_t c = w.lo[1]; c < w.hi[1]; c++) {
                T *r = dx + (a * g->in[1] + c) * g->in[2];
                for (int64_t t = w.lo[2]; t < w.hi[2]; t++) r[t] += s;
            }
        }
    });
}

static int nd_forward(const mxp_forward_args *a) {
    if (a->in[0].dtype == MXP_DTYPE_BF16) return nn_bf16_via_f32_forward(a, nd_forward); /* bf16: float32 copies */
    int32_t dt; int st;
    if ((st = nn_check_float("Pooling", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("Pooling", a->in, 1)) < 0 || (st = nn_check_contig("Pooling", a->out, 1)) < 0) return st;
    if (a->in[0].ndim != 3 && a->in[0].ndim != 5) return NN_ERR(MXP_ESHAPE, "Pooling (nd): data must be 3-D or 5-D");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    pjob j; memset(&j, 0, sizeof j);
    if (pool_geom3_init(a->params, a->in[0].shape, a->in[0].ndim, &j.g) < 0)
        return NN_ERR(MXP_ESHAPE, "Pooling (nd): kernel larger than padded data");
    j.dt = dt; j.req = a->req[0]; j.x = nn_ptr(&a->in[0]); j.y = nn_ptr(&a->out[0]);
    return nn_parallel(a->ctx, j.g.N * j.g.C, 1, fwd_range, &j);
}

static int nd_backward(const mxp_backward_args *a) {
    if (a->out_grad[0].dtype == MXP_DTYPE_BF16) return nn_bf16_via_f32_backward(a, nd_backward);
    int st;
    int32_t dt = a->out_grad[0].dtype;
    if ((st = nn_check_float("Pooling", a->out_grad, 1, NULL)) < 0) return st;
    if ((st = nn_check_contig("Pooling", a->in_grad, 1)) < 0 || (st = nn_check_contig("Pooling", a->out_grad, 1)) < 0 ||
        (st = nn_check_contig("Pooling", a->in, 1)) < 0) return st;
    if (a->in_grad[0].dtype != dt || (a->in[0].data && a->in[0].dtype != dt))
        return NN_ERR(MXP_ETYPE, "Pooling (nd): gradients and data must share one dtype");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    pjob j; memset(&j, 0, sizeof j);
    if (pool_geom3_init(a->params, a->in_grad[0].shape, a->in_grad[0].ndim, &j.g) < 0)
        return NN_ERR(MXP_ESHAPE, "Pooling (nd): kernel larger than padded data");
    j.dt = dt; j.req = a->req[0]; j.x = nn_ptr(&a->in[0]);
    j.dy = nn_ptr(&a->out_grad[0]); j.dx = nn_ptr(&a->in_grad[0]);
    if (j.g.type == POOL_MAX && !j.x) return NN_ERR(MXP_EINVAL, "Pooling: max backward needs data");
    return nn_parallel(a->ctx, j.g.N * j.g.C, 1, bwd_range, &j);
}

static int nd_supports(mxp_impl_query_args *a) {
    int nd = a->in_shapes[0].ndim;
    if (nd != 3 && nd != 5) {
        snprintf(a->reason, a->reason_size, "nd: 1-D (NCW) and 3-D (NCDHW) data only; 2-D runs on default");
        return 0;
    }
    if (a->in_dtypes[0] != MXP_DTYPE_F32 && a->in_dtypes[0] != MXP_DTYPE_F64) {
        snprintf(a->reason, a->reason_size, "nd: dtype %d not supported (float32, float64)", a->in_dtypes[0]);
        return 0;
    }
    return 1;
}

const mxp_op_impl pool_nd_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Pooling", .impl_name = "nd", .device = "cpu",
    .rank = 64, .doc = "1-D (NCW) and 3-D (NCDHW) max/avg/sum pooling, float32/float64",
    .supports = nd_supports, .forward = nd_forward, .backward = nd_backward,
};
