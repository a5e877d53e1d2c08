/* conv_nd.c — Convolution impl "nd": 1-D (NCW) and 3-D (NCDHW)
 * convolutions as im2col + OpenBLAS GEMM (f32, f64), forward and backward
 * (data, weight, bias), any stride / dilation / padding / groups.  The 2-D
 * impls (gemm, direct, pointwise, winograd) keep 2-D: `supports` here
 * refuses 2-D kernels and theirs refuse every other rank.
 *
 * Every rank is run as 3-D: a 1-D convolution is a 3-D one with depth and
 * height 1 (kernel 1, stride 1, pad 0), so one im2col serves both.  The
 * column matrix of one (sample, group) would be K x P (K = Cg*kd*kh*kw,
 * P = output positions), far too big for a 3-D ResNet layer, so output
 * positions are cut into chunks of `chunk` flattened positions whose
 * columns fit a ~1 MiB buffer:
 *   forward   items (sample, chunk) on parallel_for, each one im2col and
 *             one GEMM y[:, chunk] = W_g col (+ bias), its own scratch;
 *   backward  CND_PARTS fixed parts of whole samples: per sample, group and
 *             chunk, im2col then dW_part += dy col^T, and
 *             dcol = W^T dy, dx += col2im(dcol).  Parts own their samples'
 *             dx, and dW is the sum of the parts' partials in part order,
 *             so results do not depend on the thread count.
 * Scratch comes from the host pool (no workspace).  Deconvolution (deconv.c)
 * calls the two passes for its 1-D/3-D kernels. */
#include "conv.h"

#include <stdint.h>
#include <stdlib.h>

#define CND_COL_BYTES (1ull << 20) /* column buffer of one chunk */
#define CND_PARTS 8                /* backward parts (fewer when fewer samples) */

typedef struct cnd_geom {
    int64_t N, C, M, G, Cg, Mg;
    int64_t in[3], k[3], s[3], p[3], d[3], out[3];
    int64_t X, P, K, kvol; /* input plane size, output positions, rows of col, kernel taps */
    int64_t chunk, nchunk;
    uint64_t es;
    int32_t dt;
} cnd_geom;

/* Spatial dims of rank nd (1..3) right-aligned into 3 (leading dims 1). */
static void cnd_geom_init(cnd_geom *g, const conv_params *p, const int64_t *shape, int nd, int32_t dt) {
    memset(g, 0, sizeof *g);
    g->N = shape[0]; g->C = shape[1]; g->M = p->num_filter; g->G = p->num_group;
    g->Cg = g->C / g->G; g->Mg = g->M / g->G;
    g->X = 1; g->P = 1; g->kvol = 1;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - nd);
        g->in[i] = j >= 0 ? shape[2 + j] : 1;
        g->k[i] = j >= 0 ? p->kernel.dims[j] : 1;
        g->s[i] = j >= 0 ? p->stride.dims[j] : 1;
        g->p[i] = j >= 0 ? p->pad.dims[j] : 0;
        g->d[i] = j >= 0 ? p->dilate.dims[j] : 1;
        g->out[i] = nn_conv_out(g->in[i], g->k[i], g->s[i], g->p[i], g->d[i]);
        g->X *= g->in[i]; g->P *= g->out[i]; g->kvol *= g->k[i];
    }
    g->K = g->Cg * g->kvol;
    g->dt = dt; g->es = mxp_dtype_size(dt);
    int64_t chunk = (int64_t)(CND_COL_BYTES / ((uint64_t)(g->K > 0 ? g->K : 1) * (g->es ? g->es : 4)));
    if (chunk < 16) chunk = 16;
    if (chunk > g->P) chunk = g->P;
    if (chunk < 1) chunk = 1;
    g->chunk = chunk; g->nchunk = (g->P + chunk - 1) / chunk;
}

/* im2col (scatter = 0: col = columns of x) or accumulating col2im
 * (scatter = 1: x += col's columns) of one (sample, group) over output
 * positions [q0, q1): col is K x (q1 - q0), row r = (c, a, b, e) one
 * kernel tap (channel c, depth/row/column taps a/b/e).  x points at the
 * group's first channel.  Positions are walked one output row (a run of
 * output columns) at a time, so the divisions happen once per run. */
static void cnd_cols(const cnd_geom *g, void *x, void *col, int64_t q0, int64_t q1, int scatter) {
    NN_TYPED(g->dt, T, {
        T *xs = x, *cs = col;
        int64_t ld = q1 - q0, W = g->in[2], sw = g->s[2];
        for (int64_t c = 0; c < g->Cg; c++) for (int64_t a = 0; a < g->k[0]; a++)
        for (int64_t b = 0; b < g->k[1]; b++) for (int64_t e = 0; e < g->k[2]; e++) {
            T *cr = cs + (((c * g->k[0] + a) * g->k[1] + b) * g->k[2] + e) * ld;
            T *xc = xs + c * g->X;
            for (int64_t q = q0; q < q1;) {
                int64_t ow = q % g->out[2], t = q / g->out[2], oh = t % g->out[1], od = t / g->out[1];
                int64_t n = g->out[2] - ow;
                if (n > q1 - q) n = q1 - q;
                int64_t id = od * g->s[0] - g->p[0] + a * g->d[0], ih = oh * g->s[1] - g->p[1] + b * g->d[1];
                T *cq = cr + (q - q0);
                if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
                    if (!scatter) memset(cq, 0, (size_t)n * sizeof(T));
                } else {
                    T *xr = xc + (id * g->in[1] + ih) * W;
                    int64_t iw = ow * sw - g->p[2] + e * g->d[2];
                    if (!scatter)
                        for (int64_t u = 0; u < n; u++, iw += sw) cq[u] = iw >= 0 && iw < W ? xr[iw] : (T)0;
                    else
                        for (int64_t u = 0; u < n; u++, iw += sw) if (iw >= 0 && iw < W) xr[iw] += cq[u];
                }
                q += n;
            }
        }
    });
}

static void cnd_im2col(const cnd_geom *g, const void *x, void *col, int64_t q0, int64_t q1) {
    cnd_cols(g, (void *)(uintptr_t)x, col, q0, q1, 0);
}
static void cnd_col2im(const cnd_geom *g, const void *col, void *dx, int64_t q0, int64_t q1) {
    cnd_cols(g, dx, (void *)(uintptr_t)col, q0, q1, 1);
}

/* ---- forward ---- */
typedef struct fwd_job {
    const cnd_geom *g;
    const char *x, *w, *b;
    char *y;
    int32_t req;
    int failed; /* set when an item could not get scratch memory */
} fwd_job;

static void fwd_range(void *arg, int64_t b0, int64_t e0) {
    fwd_job *j = arg; const cnd_geom *g = j->g;
    uint64_t es = g->es;
    char *col = nn_alloc((uint64_t)g->K * (uint64_t)g->chunk * es);
    if (!col) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); return; }
    for (int64_t it = b0; it < e0; it++) {
        int64_t n = it / g->nchunk, q0 = (it % g->nchunk) * g->chunk;
        int64_t q1 = q0 + g->chunk < g->P ? q0 + g->chunk : g->P, ld = q1 - q0;
        for (int64_t gr = 0; gr < g->G; gr++) {
            const char *xg = j->x + (uint64_t)((n * g->C + gr * g->Cg) * g->X) * es;
            char *yg = j->y + (uint64_t)((n * g->M + gr * g->Mg) * g->P + q0) * es;
            cnd_im2col(g, xg, col, q0, q1);
            nn_gemm(g->dt, 0, 0, g->Mg, ld, g->K, 1.0, j->w + (uint64_t)(gr * g->Mg * g->K) * es, g->K,
                    col, ld, j->req == MXP_REQ_ADD ? 1.0 : 0.0, yg, g->P);
        }
        if (j->b)
            for (int64_t m = 0; m < g->M; m++)
                NN_TYPED(g->dt, T, {
                    T bv = ((const T *)j->b)[m];
                    T *yr = (T *)(j->y + (uint64_t)((n * g->M + m) * g->P + q0) * es);
                    for (int64_t q = 0; q < ld; q++) yr[q] += bv;
                });
    }
    nn_free(col);
}

static int nd_check(const mxp_tensor *t, uint32_t n, int ndim, int32_t *dt) {
    int st;
    if ((st = nn_check_float("Convolution", t, n, dt)) < 0) return st;
    if ((st = nn_check_contig("Convolution", t, n)) < 0) return st;
    if (t[0].ndim != ndim)
        return NN_ERR(MXP_ESHAPE, "Convolution (nd): data has %d dims, kernel needs %d", t[0].ndim, ndim);
    return MXP_OK;
}

int conv_nd_forward_impl(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = nd_check(a->in, a->n_in, p->kernel.ndim + 2, &dt)) < 0) return st;
    if ((st = nn_check_contig("Convolution", a->out, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    cnd_geom g; cnd_geom_init(&g, p, a->in[0].shape, p->kernel.ndim, dt);
    fwd_job j = { &g, nn_ptr(&a->in[0]), nn_ptr(&a->in[1]), p->no_bias ? NULL : nn_ptr(&a->in[2]),
                  nn_ptr(&a->out[0]), a->req[0], 0 };
    if ((st = nn_parallel(a->ctx, g.N * g.nchunk, 1, fwd_range, &j)) < 0) return st;
    if (j.failed) return NN_ERR(MXP_ENOMEM, "Convolution (nd): out of memory for a column buffer");
    return MXP_OK;
}

/* ---- backward ---- */
typedef struct bwd_job {
    const cnd_geom *g;
    const char *x, *w, *dy;
    char *dx;
    char **dw_part;     /* [nparts] M x K partials, NULL when dW is not wanted */
    int64_t nparts;
    int32_t rq_dx;
    int failed;
} bwd_job;

static void bwd_range(void *arg, int64_t b0, int64_t e0) {
    bwd_job *j = arg; const cnd_geom *g = j->g;
    uint64_t es = g->es, cbytes = (uint64_t)g->K * (uint64_t)g->chunk * es;
    char *col = nn_alloc(cbytes), *dcol = nn_alloc(cbytes);
    if (!col || !dcol) { __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED); nn_free(col); nn_free(dcol); return; }
    for (int64_t part = b0; part < e0; part++) {
        int64_t n0 = part * g->N / j->nparts, n1 = (part + 1) * g->N / j->nparts;
        char *dwp = j->dw_part ? j->dw_part[part] : NULL;
        for (int64_t n = n0; n < n1; n++) {
            if (j->rq_dx != MXP_REQ_NULL && j->rq_dx != MXP_REQ_ADD)
                memset(j->dx + (uint64_t)(n * g->C * g->X) * es, 0, (uint64_t)(g->C * g->X) * es);
            for (int64_t gr = 0; gr < g->G; gr++) {
                uint64_t xo = (uint64_t)((n * g->C + gr * g->Cg) * g->X) * es;
                const char *wg = j->w + (uint64_t)(gr * g->Mg * g->K) * es;
                for (int64_t q0 = 0; q0 < g->P; q0 += g->chunk) {
                    int64_t q1 = q0 + g->chunk < g->P ? q0 + g->chunk : g->P, ld = q1 - q0;
                    const char *dyg = j->dy + (uint64_t)((n * g->M + gr * g->Mg) * g->P + q0) * es;
                    if (dwp) {
                        cnd_im2col(g, j->x + xo, col, q0, q1);
                        nn_gemm(g->dt, 0, 1, g->Mg, g->K, ld, 1.0, dyg, g->P, col, ld, 1.0,
                                dwp + (uint64_t)(gr * g->Mg * g->K) * es, g->K);
                    }
                    if (j->rq_dx != MXP_REQ_NULL) {
                        nn_gemm(g->dt, 1, 0, g->K, ld, g->Mg, 1.0, wg, g->K, dyg, g->P, 0.0, dcol, ld);
                        cnd_col2im(g, dcol, j->dx + xo, q0, q1);
                    }
                }
            }
        }
    }
    nn_free(col); nn_free(dcol);
}

int conv_nd_backward_impl(const mxp_backward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = nd_check(a->in, 2, p->kernel.ndim + 2, &dt)) < 0) return st;
    if ((st = nn_check_float("Convolution", a->out_grad, 1, NULL)) < 0) return st;
    if (a->out_grad[0].dtype != dt) return NN_ERR(MXP_ETYPE, "Convolution (nd): out_grad dtype differs from data");
    if ((st = nn_check_contig("Convolution", a->in_grad, a->n_in)) < 0 ||
        (st = nn_check_contig("Convolution", a->out_grad, 1)) < 0) return st;
    cnd_geom g; cnd_geom_init(&g, p, a->in[0].shape, p->kernel.ndim, dt);
    int32_t rq_dx = a->req[0], rq_dw = a->req[1];
    int32_t rq_db = (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    uint64_t es = g.es, wbytes = (uint64_t)(g.M * g.K) * es;
    bwd_job j; memset(&j, 0, sizeof j);
    j.g = &g; j.x = nn_ptr(&a->in[0]); j.w = nn_ptr(&a->in[1]); j.dy = nn_ptr(&a->out_grad[0]);
    j.dx = nn_ptr(&a->in_grad[0]); j.rq_dx = rq_dx;
    j.nparts = g.N < CND_PARTS ? g.N : CND_PARTS;
    if (rq_dx != MXP_REQ_NULL || rq_dw != MXP_REQ_NULL) {
        if (rq_dw != MXP_REQ_NULL) {
            j.dw_part = calloc((size_t)j.nparts, sizeof *j.dw_part);
            if (!j.dw_part) return NN_ERR(MXP_ENOMEM, "Convolution (nd): out of memory");
            for (int64_t q = 0; q < j.nparts; q++) {
                j.dw_part[q] = nn_alloc(wbytes);
                if (!j.dw_part[q]) { st = NN_ERR(MXP_ENOMEM, "Convolution (nd): out of memory for weight gradients"); goto done; }
                memset(j.dw_part[q], 0, wbytes);
            }
        }
        if ((st = nn_parallel(a->ctx, j.nparts, 1, bwd_range, &j)) < 0) goto done;
        if (j.failed) { st = NN_ERR(MXP_ENOMEM, "Convolution (nd): out of memory for a column buffer"); goto done; }
        if (j.dw_part) {
            NN_TYPED(dt, T, {
                T *dw = nn_ptr(&a->in_grad[1]);
                for (int64_t i = 0; i < g.M * g.K; i++) {
                    T acc = 0;
                    for (int64_t q = 0; q < j.nparts; q++) acc += ((const T *)j.dw_part[q])[i];
                    NN_STORE(rq_dw, dw[i], acc);
                }
            });
        }
    }
    if (rq_db != MXP_REQ_NULL) {
        NN_TYPED(dt, T, {
            const T *dy = (const T *)j.dy; T *db = nn_ptr(&a->in_grad[2]);
            for (int64_t m = 0; m < g.M; m++) {
                double acc = 0;
                for (int64_t n = 0; n < g.N; n++) {
                    const T *r = dy + (n * g.M + m) * g.P;
                    for (int64_t q = 0; q < g.P; q++) acc += r[q];
                }
                NN_STORE(rq_db, db[m], (T)acc);
            }
        });
    }
    st = MXP_OK;
done:
    if (j.dw_part) {
        for (int64_t q = 0; q < j.nparts; q++) nn_free(j.dw_part[q]);
        free(j.dw_part);
    }
    return st;
}

static int nd_supports(mxp_impl_query_args *a) {
    const conv_params *p = a->params;
    if (a->in_dtypes[0] != MXP_DTYPE_F32 && a->in_dtypes[0] != MXP_DTYPE_F64) {
        snprintf(a->reason, a->reason_size, "nd: dtype %d not supported (float32, float64)", a->in_dtypes[0]);
        return 0;
    }
    if (p->kernel.ndim != 1 && p->kernel.ndim != 3) {
        snprintf(a->reason, a->reason_size, "nd: 1-D and 3-D kernels only (2-D runs on gemm/direct/winograd/pointwise)");
        return 0;
    }
    return 1;
}

const mxp_op_impl conv_nd_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "nd", .device = "cpu",
    .rank = 64, .doc = "1-D (NCW) and 3-D (NCDHW): chunked im2col + OpenBLAS GEMM, float32/float64",
    .supports = nd_supports, .forward = conv_nd_forward_impl, .backward = conv_nd_backward_impl,
};
