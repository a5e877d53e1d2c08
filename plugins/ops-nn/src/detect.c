/* detect.c — detection ops with MXNet 1.x names and parameters, on the
 * float64 driver (nn_dense.h):
 *   _contrib_box_iou (format corner | center): pairwise IoU, no gradient;
 *   _contrib_box_nms / _contrib_box_non_maximum_suppression (overlap_thresh,
 *     valid_thresh, topk, coord_start, score_index, id_index, background_id,
 *     force_suppress, in_format, out_format): per batch, rows with score >
 *     valid_thresh (and not background) sorted by score (stable), the best
 *     topk kept, greedy suppression of later rows of the same id (any id
 *     with force_suppress or id_index -1) whose IoU exceeds overlap_thresh;
 *     survivors packed first in score order, the remaining rows all -1.
 *     Backward routes each surviving row's out_grad to its source row (same
 *     in/out format only);
 *   MultiBoxPrior / _contrib_MultiBoxPrior (sizes, ratios, clip, steps,
 *     offsets): anchors (1, H*W*(sizes+ratios-1), 4), no gradient;
 *   ROIPooling (pooled_size, spatial_scale): max over each bin of the
 *     rounded ROI (rois (R, 5): batch, x1, y1, x2, y2), gradient to the arg
 *     max;
 *   _contrib_ROIAlign / ROIAlign (pooled_size, spatial_scale, sample_ratio,
 *     aligned): bilinear samples averaged per bin (Detectron's rule, as
 *     MXNet), gradient by the same weights; position_sensitive=True refused.
 * IoU has no "+1" on widths, as MXNet's box ops.  Only the visible output
 * of box_nms (MXNet's hidden index output is not produced). */
#include <math.h>
#include <stdlib.h>

#include "detect.h"

/* ---------------------------------------------------------------- box math */
static void to_corner(const double *b, int center, double *c) {
    if (!center) {
        c[0] = b[0], c[1] = b[1], c[2] = b[2], c[3] = b[3];
        return;
    }
    c[0] = b[0] - b[2] / 2, c[1] = b[1] - b[3] / 2, c[2] = b[0] + b[2] / 2, c[3] = b[1] + b[3] / 2;
}
double nn_box_iou_corner(const double *a, const double *b) {
    double w = fmin(a[2], b[2]) - fmax(a[0], b[0]), h = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (w <= 0 || h <= 0) return 0;
    double inter = w * h, u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return u > 0 ? inter / u : 0;
}

static const char *const fmt_choices[] = {"corner", "center", NULL};

/* ------------------------------------------------------------------ box_iou */
typedef struct iou_params { int32_t format, pad; } iou_params;
static const mxp_param_def iou_schema[] = {
    NN_P("format", MXP_PARAM_ENUM, 0, iou_params, format, "corner", fmt_choices,
         "Box encoding: corner [xmin, ymin, xmax, ymax] or center [x, y, width, height]."),
};
static const char *const lr_args[] = {"lhs", "rhs", NULL};
static int iou_shape(mxp_infer_shape_args *a) {
    const mxp_shape *l = &a->in[0], *r = &a->in[1];
    if (!nn_shape_known(l) || !nn_shape_known(r)) return MXP_EINCOMPLETE;
    if (l->dims[l->ndim - 1] != 4 || r->dims[r->ndim - 1] != 4)
        return NN_ERR(MXP_ESHAPE, "_contrib_box_iou: the last axis of both inputs must be 4");
    if (l->ndim + r->ndim - 2 > MXP_MAX_NDIM) return NN_ERR(MXP_ESHAPE, "_contrib_box_iou: result rank too large");
    mxp_shape o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < l->ndim - 1; i++) o.dims[o.ndim++] = l->dims[i];
    for (int i = 0; i < r->ndim - 1; i++) o.dims[o.ndim++] = r->dims[i];
    if (o.ndim == 0) o.dims[o.ndim++] = 1;
    a->out[0] = o;
    return MXP_OK;
}
static int iou_f(nd_io *io) {
    const iou_params *p = io->params;
    int64_t nl = io->in[0].n / 4, nr = io->in[1].n / 4;
    for (int64_t i = 0; i < nl; i++)
        for (int64_t j = 0; j < nr; j++) {
            double a[4], b[4];
            to_corner(io->in[0].v + 4 * i, p->format, a);
            to_corner(io->in[1].v + 4 * j, p->format, b);
            io->out[0].v[i * nr + j] = nn_box_iou_corner(a, b);
        }
    return MXP_OK;
}
static const nd_info iou_info = {"_contrib_box_iou", iou_f, NULL};

/* ------------------------------------------------------------------ box_nms */
typedef struct nms_params {
    double overlap_thresh, valid_thresh;
    int64_t topk, coord_start, score_index, id_index, background_id;
    int32_t force_suppress, in_format, out_format, pad;
} nms_params;
static const mxp_param_def nms_schema[] = {
    NN_P("overlap_thresh", MXP_PARAM_FLOAT, 0, nms_params, overlap_thresh, "0.5", NULL, "Overlapping(IoU) threshold to suppress object with smaller score."),
    NN_P("valid_thresh", MXP_PARAM_FLOAT, 0, nms_params, valid_thresh, "0", NULL, "Filter input boxes to those whose scores greater than valid_thresh."),
    NN_P("topk", MXP_PARAM_INT, 0, nms_params, topk, "-1", NULL, "Apply nms to topk boxes with descending scores, -1 to no restriction."),
    NN_P("coord_start", MXP_PARAM_INT, 0, nms_params, coord_start, "2", NULL, "Start index of the consecutive 4 coordinates."),
    NN_P("score_index", MXP_PARAM_INT, 0, nms_params, score_index, "1", NULL, "Index of the scores/confidence of boxes."),
    NN_P("id_index", MXP_PARAM_INT, 0, nms_params, id_index, "-1", NULL, "Optional, index of the class categories, -1 to disable."),
    NN_P("background_id", MXP_PARAM_INT, 0, nms_params, background_id, "-1", NULL, "Optional, id of the background class which will be ignored in nms."),
    NN_P("force_suppress", MXP_PARAM_BOOL, 0, nms_params, force_suppress, "False", NULL, "Optional, if set false and id_index is provided, nms will only apply to boxes belongs to the same category"),
    NN_P("in_format", MXP_PARAM_ENUM, 0, nms_params, in_format, "corner", fmt_choices, "The input box encoding type."),
    NN_P("out_format", MXP_PARAM_ENUM, 0, nms_params, out_format, "corner", fmt_choices, "The output box encoding type."),
};
static const char *const data_args[] = {"data", NULL};

static int nms_shape(mxp_infer_shape_args *a) {
    const nms_params *p = a->params;
    const mxp_shape *d = &a->in[0];
    if (!nn_shape_known(d)) return MXP_EINCOMPLETE;
    int64_t K = d->dims[d->ndim - 1];
    if (d->ndim < 2 || p->coord_start < 0 || p->coord_start + 4 > K || p->score_index < 0 || p->score_index >= K ||
        p->id_index >= K)
        return NN_ERR(MXP_ESHAPE, "_contrib_box_nms: rows of %lld values cannot hold score %lld, id %lld and 4 coordinates at %lld",
                      (long long)K, (long long)p->score_index, (long long)p->id_index, (long long)p->coord_start);
    a->out[0] = *d;
    return MXP_OK;
}

static _Thread_local const double *g_scores; /* qsort has no context argument */
static _Thread_local int64_t g_K;
static int cmp_score(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    double sa = g_scores[a * g_K], sb = g_scores[b * g_K];
    return sa > sb ? -1 : sa < sb ? 1 : (a < b ? -1 : 1);
}

/* keep[0..*nk): source rows of the survivors, in output order. */
static int nms_select(const nms_params *p, const double *rows, int64_t N, int64_t K, int64_t *keep, int64_t *nk) {
    int64_t *order = keep, n = 0;
    for (int64_t i = 0; i < N; i++) {
        const double *r = rows + i * K;
        if (!(r[p->score_index] > p->valid_thresh)) continue;
        if (p->id_index >= 0 && p->background_id >= 0 && r[p->id_index] == (double)p->background_id) continue;
        order[n++] = i;
    }
    g_scores = rows + p->score_index;
    g_K = K;
    qsort(order, (size_t)n, sizeof *order, cmp_score);
    if (p->topk > 0 && n > p->topk) n = p->topk;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double *ri = rows + order[i] * K;
        double bi[4];
        to_corner(ri + p->coord_start, p->in_format, bi);
        int dead = 0;
        for (int64_t j = 0; j < m && !dead; j++) {
            const double *rj = rows + keep[j] * K;
            if (!p->force_suppress && p->id_index >= 0 && rj[p->id_index] != ri[p->id_index]) continue;
            double bj[4];
            to_corner(rj + p->coord_start, p->in_format, bj);
            dead = nn_box_iou_corner(bi, bj) > p->overlap_thresh;
        }
        if (!dead) keep[m++] = order[i]; /* m <= i: never overwrites an unread entry */
    }
    *nk = m;
    return MXP_OK;
}

static int nms_run(nd_io *io, int back) {
    const nms_params *p = io->params;
    const ndarr *d = &io->in[0];
    int64_t K = d->shape[d->nd - 1], N = d->shape[d->nd - 2], B = d->n / (N * K);
    if (back && p->in_format != p->out_format)
        return NN_ERR(MXP_EUNSUPPORTED, "_contrib_box_nms: the gradient with in_format != out_format is not supported");
    int64_t *keep = nn_alloc((uint64_t)(N ? N : 1) * sizeof *keep);
    if (!keep) return NN_ERR(MXP_ENOMEM, "_contrib_box_nms: out of memory");
    for (int64_t b = 0; b < B; b++) {
        const double *rows = d->v + b * N * K;
        int64_t nk;
        nms_select(p, rows, N, K, keep, &nk);
        for (int64_t i = 0; i < N; i++) {
            if (back) {
                if (i < nk)
                    for (int64_t k = 0; k < K; k++) io->ig[0].v[(b * N + keep[i]) * K + k] += io->og[0].v[(b * N + i) * K + k];
                continue;
            }
            double *o = io->out[0].v + (b * N + i) * K;
            if (i >= nk) {
                for (int64_t k = 0; k < K; k++) o[k] = -1;
                continue;
            }
            memcpy(o, rows + keep[i] * K, (size_t)K * sizeof(double));
            if (p->in_format != p->out_format) {
                double c[4], *q = o + p->coord_start;
                to_corner(q, p->in_format, c);
                if (p->out_format) q[0] = (c[0] + c[2]) / 2, q[1] = (c[1] + c[3]) / 2, q[2] = c[2] - c[0], q[3] = c[3] - c[1];
                else q[0] = c[0], q[1] = c[1], q[2] = c[2], q[3] = c[3];
            }
        }
    }
    nn_free(keep);
    return MXP_OK;
}
static int nms_f(nd_io *io) { return nms_run(io, 0); }
static int nms_b(nd_io *io) { return nms_run(io, 1); }
static const nd_info nms_info = {"_contrib_box_nms", nms_f, nms_b};

/* ------------------------------------------------------------ MultiBoxPrior */
/* sizes / ratios / steps / offsets are float tuples in MXNet; the host's
 * SHAPE type holds integers, so they are declared STRING and parsed here. */
typedef struct mbp_raw {
    const char *sizes, *ratios, *steps, *offsets;
    int32_t clip, pad;
} mbp_raw;
static const mxp_param_def mbp_schema[] = {
    NN_P("sizes", MXP_PARAM_STRING, 0, mbp_raw, sizes, "(1,)", NULL, "List of sizes of generated MultiBoxPriores."),
    NN_P("ratios", MXP_PARAM_STRING, 0, mbp_raw, ratios, "(1,)", NULL, "List of aspect ratios of generated MultiBoxPriores."),
    NN_P("clip", MXP_PARAM_BOOL, 0, mbp_raw, clip, "False", NULL, "Whether to clip out-of-boundary boxes."),
    NN_P("steps", MXP_PARAM_STRING, 0, mbp_raw, steps, "(-1,-1)", NULL, "Priorbox step across y and x, -1 for auto calculation."),
    NN_P("offsets", MXP_PARAM_STRING, 0, mbp_raw, offsets, "(0.5,0.5)", NULL, "Priorbox center offsets, y and x respectively"),
};
#define MBP_MAX 32
/* See detect.h. */
int nn_parse_floats(const char *s, double *v, int cap) {
    const char *p = s;
    while (*p == ' ' || *p == '(' || *p == '[') p++;
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')' || *p == ']' || *p == '\0') break;
        char *end;
        double x = strtod(p, &end);
        if (end == p || n == cap) return -1;
        v[n++] = x;
        p = end;
        if (*p == 'L') p++;
    }
    return n;
}
typedef struct mbp_cfg { double sizes[MBP_MAX], ratios[MBP_MAX], steps[2], offsets[2]; int ns, nr; } mbp_cfg;
static int mbp_parse(const mbp_raw *p, mbp_cfg *c) {
    c->ns = nn_parse_floats(p->sizes, c->sizes, MBP_MAX);
    c->nr = nn_parse_floats(p->ratios, c->ratios, MBP_MAX);
    if (c->ns < 1 || c->nr < 1 || nn_parse_floats(p->steps, c->steps, 2) != 2 || nn_parse_floats(p->offsets, c->offsets, 2) != 2)
        return NN_ERR(MXP_EINVAL, "MultiBoxPrior: sizes '%s', ratios '%s', steps '%s', offsets '%s' are not float tuples "
                      "(sizes and ratios non-empty, steps and offsets of 2)", p->sizes, p->ratios, p->steps, p->offsets);
    for (int i = 0; i < c->ns; i++) if (c->sizes[i] <= 0) return NN_ERR(MXP_EINVAL, "MultiBoxPrior: sizes must be > 0");
    for (int i = 0; i < c->nr; i++) if (c->ratios[i] <= 0) return NN_ERR(MXP_EINVAL, "MultiBoxPrior: ratios must be > 0");
    return MXP_OK;
}
static int mbp_check(mxp_check_params_args *a) {
    mbp_cfg c;
    return mbp_parse(a->params, &c);
}
static int mbp_shape(mxp_infer_shape_args *a) {
    mbp_cfg c;
    int rc = mbp_parse(a->params, &c);
    if (rc) return rc;
    const mxp_shape *d = &a->in[0];
    if (!nn_shape_known(d)) return MXP_EINCOMPLETE;
    if (d->ndim != 4) return NN_ERR(MXP_ESHAPE, "MultiBoxPrior: data must be 4-D (N, C, H, W)");
    mxp_shape o;
    memset(&o, 0, sizeof o);
    o.ndim = 3;
    o.dims[0] = 1;
    o.dims[1] = d->dims[2] * d->dims[3] * (c.ns + c.nr - 1);
    o.dims[2] = 4;
    a->out[0] = o;
    return MXP_OK;
}
static int mbp_f(nd_io *io) {
    mbp_cfg c;
    int rc = mbp_parse(io->params, &c);
    if (rc) return rc;
    const mbp_raw *p = io->params;
    int64_t H = io->in[0].shape[2], W = io->in[0].shape[3];
    double sy = c.steps[0] > 0 ? c.steps[0] : 1.0 / (double)H, sx = c.steps[1] > 0 ? c.steps[1] : 1.0 / (double)W;
    double *o = io->out[0].v;
    for (int64_t r = 0; r < H; r++)
        for (int64_t col = 0; col < W; col++) {
            double cy = ((double)r + c.offsets[0]) * sy, cx = ((double)col + c.offsets[1]) * sx;
            for (int k = 0; k < c.ns + c.nr - 1; k++) {
                double size = k < c.ns ? c.sizes[k] : c.sizes[0], ratio = k < c.ns ? 1.0 : sqrt(c.ratios[k - c.ns + 1]);
                double w = size * (double)H / (double)W * ratio / 2, h = size / ratio / 2;
                double box[4] = {cx - w, cy - h, cx + w, cy + h};
                for (int q = 0; q < 4; q++) *o++ = p->clip ? fmin(fmax(box[q], 0.0), 1.0) : box[q];
            }
        }
    return MXP_OK;
}
static const nd_info mbp_info = {"MultiBoxPrior", mbp_f, NULL};

/* --------------------------------------------------------- ROIPooling / Align */
typedef struct roi_params {
    mxp_param_shape pooled_size;
    double spatial_scale;
    int64_t sample_ratio;
    int32_t position_sensitive, aligned;
} roi_params;
static const mxp_param_def roip_schema[] = {
    NN_P("pooled_size", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, roi_params, pooled_size, NULL, NULL, "ROI pooling output shape (h,w) "),
    NN_P("spatial_scale", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, roi_params, spatial_scale, NULL, NULL,
         "Ratio of input feature map height (or w) to raw image height (or w)."),
};
static const mxp_param_def roia_schema[] = {
    NN_P("pooled_size", MXP_PARAM_SHAPE, MXP_PARAM_REQUIRED, roi_params, pooled_size, NULL, NULL, "ROI Align output roi feature map height and width: (h, w)"),
    NN_P("spatial_scale", MXP_PARAM_FLOAT, MXP_PARAM_REQUIRED, roi_params, spatial_scale, NULL, NULL,
         "Ratio of input feature map height (or w) to raw image height (or w)."),
    NN_P("sample_ratio", MXP_PARAM_INT, 0, roi_params, sample_ratio, "-1", NULL, "Optional sampling ratio of ROI align, using adaptive size by default."),
    NN_P("position_sensitive", MXP_PARAM_BOOL, 0, roi_params, position_sensitive, "False", NULL, "Whether to perform position-sensitive RoI pooling (not supported)."),
    NN_P("aligned", MXP_PARAM_BOOL, 0, roi_params, aligned, "False", NULL, "Shift the box coordinates by -0.5 for a better alignment."),
};
static const char *const roi_args[] = {"data", "rois", NULL};
static int roi_check(mxp_check_params_args *a) {
    const roi_params *p = a->params;
    if (p->pooled_size.ndim != 2 || p->pooled_size.dims[0] < 1 || p->pooled_size.dims[1] < 1)
        return NN_ERR(MXP_EINVAL, "ROI op: pooled_size must be two values >= 1");
    if (p->position_sensitive) return NN_ERR(MXP_EUNSUPPORTED, "_contrib_ROIAlign: position_sensitive=True is not supported");
    return MXP_OK;
}
static int roi_shape(mxp_infer_shape_args *a) {
    const roi_params *p = a->params;
    const mxp_shape *d = &a->in[0], *r = &a->in[1];
    if (!nn_shape_known(d) || !nn_shape_known(r)) return MXP_EINCOMPLETE;
    if (d->ndim != 4 || r->ndim != 2 || r->dims[1] != 5)
        return NN_ERR(MXP_ESHAPE, "ROI op: data must be (N, C, H, W) and rois (R, 5)");
    mxp_shape o;
    memset(&o, 0, sizeof o);
    o.ndim = 4;
    o.dims[0] = r->dims[0], o.dims[1] = d->dims[1], o.dims[2] = p->pooled_size.dims[0], o.dims[3] = p->pooled_size.dims[1];
    a->out[0] = o;
    return MXP_OK;
}

/* ROIPooling: MXNet's rounding and bins; backward to the arg max. */
static int roip_run(nd_io *io, int back) {
    const roi_params *p = io->params;
    const ndarr *d = &io->in[0], *rois = &io->in[1];
    int64_t C = d->shape[1], H = d->shape[2], W = d->shape[3], PH = p->pooled_size.dims[0], PW = p->pooled_size.dims[1];
    for (int64_t r = 0; r < rois->shape[0]; r++) {
        const double *b = rois->v + 5 * r;
        int64_t n = (int64_t)b[0];
        if (n < 0 || n >= d->shape[0]) return NN_ERR(MXP_EINVAL, "ROIPooling: roi %lld names batch %lld of %lld", (long long)r, (long long)n, (long long)d->shape[0]);
        int64_t x1 = (int64_t)round(b[1] * p->spatial_scale), y1 = (int64_t)round(b[2] * p->spatial_scale);
        int64_t x2 = (int64_t)round(b[3] * p->spatial_scale), y2 = (int64_t)round(b[4] * p->spatial_scale);
        double rh = (double)(y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1), rw = (double)(x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1);
        double bh = rh / (double)PH, bw = rw / (double)PW;
        for (int64_t c = 0; c < C; c++)
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    int64_t hs = (int64_t)floor((double)ph * bh) + y1, he = (int64_t)ceil((double)(ph + 1) * bh) + y1;
                    int64_t ws = (int64_t)floor((double)pw * bw) + x1, we = (int64_t)ceil((double)(pw + 1) * bw) + x1;
                    hs = hs < 0 ? 0 : hs > H ? H : hs, he = he < 0 ? 0 : he > H ? H : he;
                    ws = ws < 0 ? 0 : ws > W ? W : ws, we = we < 0 ? 0 : we > W ? W : we;
                    int64_t oi = ((r * C + c) * PH + ph) * PW + pw, arg = -1;
                    double mx = -INFINITY;
                    for (int64_t y = hs; y < he; y++)
                        for (int64_t x = ws; x < we; x++) {
                            int64_t di = ((n * C + c) * H + y) * W + x;
                            if (d->v[di] > mx) mx = d->v[di], arg = di;
                        }
                    if (back) { if (arg >= 0) io->ig[0].v[arg] += io->og[0].v[oi]; }
                    else io->out[0].v[oi] = arg >= 0 ? mx : 0;
                }
    }
    return MXP_OK;
}
static int roip_f(nd_io *io) { return roip_run(io, 0); }
static int roip_b(nd_io *io) { return roip_run(io, 1); }
static const nd_info roip_info = {"ROIPooling", roip_f, roip_b};

/* Bilinear weights of point (y, x) on an H x W map (Detectron's rule). */
static int bilinear(double y, double x, int64_t H, int64_t W, int64_t *idx, double *w) {
    if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return 0;
    if (y <= 0) y = 0;
    if (x <= 0) x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= H - 1) yh = yl = H - 1, y = (double)yl; else yh = yl + 1;
    if (xl >= W - 1) xh = xl = W - 1, x = (double)xl; else xh = xl + 1;
    double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
    idx[0] = yl * W + xl, idx[1] = yl * W + xh, idx[2] = yh * W + xl, idx[3] = yh * W + xh;
    w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
    return 1;
}

static int roia_run(nd_io *io, int back) {
    const roi_params *p = io->params;
    const ndarr *d = &io->in[0], *rois = &io->in[1];
    int64_t C = d->shape[1], H = d->shape[2], W = d->shape[3], PH = p->pooled_size.dims[0], PW = p->pooled_size.dims[1];
    double off = p->aligned ? 0.5 : 0.0;
    for (int64_t r = 0; r < rois->shape[0]; r++) {
        const double *b = rois->v + 5 * r;
        int64_t n = (int64_t)b[0];
        if (n < 0 || n >= d->shape[0]) return NN_ERR(MXP_EINVAL, "_contrib_ROIAlign: roi %lld names batch %lld of %lld", (long long)r, (long long)n, (long long)d->shape[0]);
        double x1 = b[1] * p->spatial_scale - off, y1 = b[2] * p->spatial_scale - off;
        double rw = b[3] * p->spatial_scale - off - x1, rh = b[4] * p->spatial_scale - off - y1;
        if (!p->aligned) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        double bh = rh / (double)PH, bw = rw / (double)PW;
        int64_t gh = p->sample_ratio > 0 ? p->sample_ratio : (int64_t)ceil(rh / (double)PH);
        int64_t gw = p->sample_ratio > 0 ? p->sample_ratio : (int64_t)ceil(rw / (double)PW);
        if (gh < 1) gh = 1;
        if (gw < 1) gw = 1;
        double cnt = (double)(gh * gw);
        for (int64_t c = 0; c < C; c++) {
            const int64_t plane = (n * C + c) * H * W;
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    int64_t oi = ((r * C + c) * PH + ph) * PW + pw;
                    double acc = 0;
                    for (int64_t iy = 0; iy < gh; iy++)
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double y = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double x = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            int64_t idx[4];
                            double w[4];
                            if (!bilinear(y, x, H, W, idx, w)) continue;
                            for (int q = 0; q < 4; q++) {
                                if (back) io->ig[0].v[plane + idx[q]] += io->og[0].v[oi] * w[q] / cnt;
                                else acc += w[q] * d->v[plane + idx[q]];
                            }
                        }
                    if (!back) io->out[0].v[oi] = acc / cnt;
                }
        }
    }
    return MXP_OK;
}
static int roia_f(nd_io *io) { return roia_run(io, 0); }
static int roia_b(nd_io *io) { return roia_run(io, 1); }
static const nd_info roia_info = {"_contrib_ROIAlign", roia_f, roia_b};

/* ------------------------------------------------------------- registration */
static const char *const nms_aliases[] = {"_contrib_box_non_maximum_suppression", NULL};
static const char *const mbp_aliases[] = {"_contrib_MultiBoxPrior", NULL};
static const char *const roia_aliases[] = {"ROIAlign", NULL};

#define DDEF(NAME, ALIASES, DOC, SCHEMA, PT, ARGS, SHAPE, CHECK) \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .aliases = ALIASES, .doc = DOC, .params = SCHEMA, \
      .n_params = NN_COUNT(SCHEMA), .params_size = PT, .arg_names = ARGS, .infer_shape = SHAPE, \
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .check_params = CHECK }

static const mxp_op_def defs[] = {
    DDEF("_contrib_box_iou", NULL, "Bounding box overlap of two arrays (IoU), pairwise.", iou_schema, sizeof(iou_params),
         lr_args, iou_shape, NULL),
    DDEF("_contrib_box_nms", nms_aliases, "Apply non-maximum suppression to input.", nms_schema, sizeof(nms_params),
         data_args, nms_shape, NULL),
    DDEF("MultiBoxPrior", mbp_aliases, "Generate prior(anchor) boxes from data, sizes and ratios.", mbp_schema,
         sizeof(mbp_raw), data_args, mbp_shape, mbp_check),
    DDEF("ROIPooling", NULL, "Performs region of interest (ROI) max pooling on the input array.", roip_schema,
         sizeof(roi_params), roi_args, roi_shape, roi_check),
    DDEF("_contrib_ROIAlign", roia_aliases, "ROI Align: bilinear samples averaged over each output bin.", roia_schema,
         sizeof(roi_params), roi_args, roi_shape, roi_check),
};
static const mxp_op_impl impls[] = {
    ND_IMPL("_contrib_box_iou", iou_info), ND_IMPL("_contrib_box_nms", nms_info), ND_IMPL("MultiBoxPrior", mbp_info),
    ND_IMPL("ROIPooling", roip_info), ND_IMPL("_contrib_ROIAlign", roia_info),
};

int nn_register_detect(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int st = r->add_op(r, &defs[i]);
        if (st < 0 || (st = r->add_impl(r, &impls[i])) < 0) return st;
    }
    return MXP_OK;
}
