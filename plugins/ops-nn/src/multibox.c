/* multibox.c — the SSD heads MultiBoxTarget and MultiBoxDetection with
 * MXNet 1.x names, parameters and defaults (src/operator/contrib/
 * multibox_target.cc, multibox_detection.cc), on the float64 driver.
 *
 * _contrib_MultiBoxTarget / MultiBoxTarget (anchor (1, A, 4), label
 * (B, L, >=5) rows [class, xmin, ymin, xmax, ymax] padded with -1 rows,
 * cls_pred (B, C, A)) -> loc_target (B, 4A), loc_mask (B, 4A), cls_target
 * (B, A).  Per batch: the valid labels are the rows before the first
 * class -1 (its box must be -1 too, as MXNet checks).  Matching: first the
 * bipartite rule (repeatedly the best (anchor, label) pair of IoU > 1e-6
 * among unmatched anchors and labels; the first pair in anchor-major order
 * wins ties), then, with overlap_threshold > 0, every other anchor whose
 * best IoU (first best label on ties) exceeds overlap_threshold.  Matched
 * anchors get class+1, mask 1 and the encoded box ((gx-ax)/aw/v0,
 * (gy-ay)/ah/v1, log(gw/aw)/v2, log(gh/ah)/v3).  Negatives: with
 * negative_mining_ratio > 0, the unmatched anchors of best IoU <
 * negative_mining_thresh sorted by the background softmax probability of
 * cls_pred (lowest first, stable), the first max(floor(pos * ratio),
 * minimum_negative_samples) of them (at most A - pos, and at most the
 * candidates) get class 0; otherwise every unmatched anchor is negative.
 * Every other anchor gets ignore_label and mask 0.  A batch with no valid
 * label is all ignore_label.  Two choices where MXNet's CPU code and GPU
 * code disagree: minimum_negative_samples is honoured (the GPU kernel does,
 * the CPU code ignores it), and fewer candidates than the negative count
 * take all candidates (the CPU code fails a CHECK there).
 *
 * _contrib_MultiBoxDetection / MultiBoxDetection (cls_prob (B, C, A),
 * loc_pred (B, 4A), anchor (1, A, 4)) -> (B, A, 6) rows [id, score, xmin,
 * ymin, xmax, ymax].  Per anchor the best non-background class (class 0 is
 * the background, as MXNet's code: background_id is accepted and, as in
 * MXNet, not used), id -1 when its score < threshold; boxes decoded with
 * the variances, clipped to [0, 1] with clip.  Valid rows are packed first
 * in anchor order, the rest are all -1.  With 0 < nms_threshold <= 1 the
 * valid rows are sorted by score (stable), rows past nms_topk get id -1
 * (keeping MXNet's quirk: those rows keep the pre-sort contents), and a
 * greedy pass gives id -1 to every later row of the same id (any id with
 * force_suppress) with IoU >= nms_threshold to a surviving row; rows are
 * not compacted.
 *
 * Neither op is differentiable (MXNet's backward writes zeros): both are
 * MXP_OP_NO_GRADIENT, so a training graph passes no gradient through them,
 * as MXNet's SSD does with its targets.  Box math is detect.h's. */
#include <math.h>
#include <stdlib.h>

#include "detect.h"

/* Four variances from a float-tuple string. */
static int parse_variances(const char *op, const char *s, double v[4]) {
    if (nn_parse_floats(s, v, 4) != 4)
        return NN_ERR(MXP_EINVAL, "%s: variances '%s' must be 4 floats, e.g. (0.1,0.1,0.2,0.2)", op, s);
    for (int i = 0; i < 4; i++)
        if (!(v[i] != 0) || !isfinite(v[i]))
            return NN_ERR(MXP_EINVAL, "%s: variances '%s' must be finite and non-zero", op, s);
    return MXP_OK;
}

/* Stable descending order by key (ties by index), for both ops' sorts. */
typedef struct keyed { double key; int64_t idx; } keyed;
static int cmp_desc(const void *x, const void *y) {
    const keyed *a = x, *b = y;
    if (a->key > b->key) return -1;
    if (a->key < b->key) return 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* ------------------------------------------------------------ MultiBoxTarget */
typedef struct mbt_params {
    double overlap_threshold, ignore_label, negative_mining_ratio, negative_mining_thresh;
    int64_t minimum_negative_samples;
    const char *variances;
} mbt_params;
static const mxp_param_def mbt_schema[] = {
    NN_P("overlap_threshold", MXP_PARAM_FLOAT, 0, mbt_params, overlap_threshold, "0.5", NULL,
         "Anchor-GT overlap threshold to be regarded as a positive match."),
    NN_P("ignore_label", MXP_PARAM_FLOAT, 0, mbt_params, ignore_label, "-1", NULL, "Label for ignored anchors."),
    NN_P("negative_mining_ratio", MXP_PARAM_FLOAT, 0, mbt_params, negative_mining_ratio, "-1", NULL,
         "Max negative to positive samples ratio, use -1 to disable mining"),
    NN_P("negative_mining_thresh", MXP_PARAM_FLOAT, 0, mbt_params, negative_mining_thresh, "0.5", NULL,
         "Threshold used for negative mining."),
    NN_P("minimum_negative_samples", MXP_PARAM_INT, 0, mbt_params, minimum_negative_samples, "0", NULL,
         "Minimum number of negative samples."),
    NN_P("variances", MXP_PARAM_STRING, 0, mbt_params, variances, "(0.1,0.1,0.2,0.2)", NULL,
         "Variances to be encoded in box regression target."),
};
static const char *const mbt_args[] = {"anchor", "label", "cls_pred", NULL};
static const char *const mbt_outs[] = {"loc_target", "loc_mask", "cls_target", NULL};

static int mbt_check(mxp_check_params_args *a) {
    const mbt_params *p = a->params;
    double v[4];
    int rc = parse_variances("MultiBoxTarget", p->variances, v);
    if (rc) return rc;
    if (p->negative_mining_ratio > 0 && !(p->negative_mining_thresh > 0))
        return NN_ERR(MXP_EINVAL, "MultiBoxTarget: negative_mining_thresh must be > 0 when negative mining is on "
                      "(negative_mining_ratio %g)", p->negative_mining_ratio);
    if (p->minimum_negative_samples < 0)
        return NN_ERR(MXP_EINVAL, "MultiBoxTarget: minimum_negative_samples must be >= 0");
    return MXP_OK;
}

static int mbt_shape(mxp_infer_shape_args *a) {
    const mxp_shape *an = &a->in[0], *lb = &a->in[1], *cp = &a->in[2];
    char s1[64], s2[64], s3[64];
    if (!nn_shape_known(an) || !nn_shape_known(lb) || !nn_shape_known(cp)) return MXP_EINCOMPLETE;
    if (an->ndim != 3 || an->dims[0] != 1 || an->dims[2] != 4)
        return NN_ERR(MXP_ESHAPE, "MultiBoxTarget: anchor %s must be (1, num_anchors, 4), shared by the batch",
                      nn_shape_str(an, s1, sizeof s1));
    if (lb->ndim != 3 || lb->dims[2] < 5)
        return NN_ERR(MXP_ESHAPE, "MultiBoxTarget: label %s must be (batch, num_labels, >= 5) rows "
                      "[class, xmin, ymin, xmax, ymax, ...]", nn_shape_str(lb, s1, sizeof s1));
    if (cp->ndim != 3 || cp->dims[2] != an->dims[1] || cp->dims[0] != lb->dims[0])
        return NN_ERR(MXP_ESHAPE, "MultiBoxTarget: cls_pred %s must be (batch, num_classes, num_anchors) for anchor %s "
                      "and label %s", nn_shape_str(cp, s1, sizeof s1), nn_shape_str(an, s2, sizeof s2),
                      nn_shape_str(lb, s3, sizeof s3));
    int64_t B = lb->dims[0], A = an->dims[1];
    a->out[0] = nn_shape(2, (const int64_t[]){B, 4 * A});
    a->out[1] = a->out[0];
    a->out[2] = nn_shape(2, (const int64_t[]){B, A});
    return MXP_OK;
}

/* Box regression target of label box g for anchor an (MXNet's encoding). */
static void encode_box(const double *an, const double *g, const double *v, double *dst) {
    double aw = an[2] - an[0], ah = an[3] - an[1], ax = (an[0] + an[2]) * 0.5, ay = (an[1] + an[3]) * 0.5;
    double gw = g[2] - g[0], gh = g[3] - g[1], gx = (g[0] + g[2]) * 0.5, gy = (g[1] + g[3]) * 0.5;
    dst[0] = (gx - ax) / aw / v[0];
    dst[1] = (gy - ay) / ah / v[1];
    dst[2] = log(gw / aw) / v[2];
    dst[3] = log(gh / ah) / v[3];
}

/* Scratch of one batch element: IoU table and per-anchor match state. */
typedef struct mbt_work {
    double *iou;        /* [A][G] */
    double *best_iou;   /* [A], -1 = not computed */
    int64_t *best_gt;   /* [A] */
    signed char *flag;  /* [A]: 1 positive, 0 negative, -1 ignored */
    unsigned char *gt_done; /* [G] */
    keyed *cand;        /* [A] */
} mbt_work;

/* Best label of anchor j (first on ties), cached. */
static void anchor_best(mbt_work *w, int64_t j, int64_t G) {
    if (w->best_iou[j] >= 0) return;
    double m = -1;
    int64_t k_best = -1;
    for (int64_t k = 0; k < G; k++)
        if (w->iou[j * G + k] > m) m = w->iou[j * G + k], k_best = k;
    w->best_iou[j] = m, w->best_gt[j] = k_best;
}

static int mbt_batch(const mbt_params *p, const double *var, const double *anchors, int64_t A, const double *lab,
                     int64_t L, int64_t LW, const double *cls, int64_t C, int64_t b, mbt_work *w, double *loc,
                     double *mask, double *ct) {
    for (int64_t j = 0; j < A; j++) ct[j] = p->ignore_label;
    int64_t G = 0;
    for (; G < L; G++) {
        const double *r = lab + G * LW;
        if (r[0] != -1.0) continue;
        if (r[1] != -1.0 || r[2] != -1.0 || r[3] != -1.0 || r[4] != -1.0)
            return NN_ERR(MXP_EINVAL, "MultiBoxTarget: label row %lld of batch %lld has class -1 (padding) but box "
                          "(%g, %g, %g, %g); padding rows must be all -1", (long long)G, (long long)b, r[1], r[2], r[3], r[4]);
        break;
    }
    if (G == 0) return MXP_OK;
    for (int64_t j = 0; j < A; j++) {
        for (int64_t k = 0; k < G; k++) w->iou[j * G + k] = nn_box_iou_corner(anchors + 4 * j, lab + k * LW + 1);
        w->best_iou[j] = -1, w->best_gt[j] = -1, w->flag[j] = -1;
    }
    memset(w->gt_done, 0, (size_t)G);
    int64_t pos = 0;
    /* Bipartite: every label takes its best free anchor, best pairs first. */
    for (int64_t left = G; left > 0; left--) {
        double m = 1e-6;
        int64_t ja = -1, ka = -1;
        for (int64_t j = 0; j < A; j++) {
            if (w->flag[j] == 1) continue;
            for (int64_t k = 0; k < G; k++)
                if (!w->gt_done[k] && w->iou[j * G + k] > m) m = w->iou[j * G + k], ja = j, ka = k;
        }
        if (ja < 0) break;
        w->best_iou[ja] = m, w->best_gt[ja] = ka, w->flag[ja] = 1, w->gt_done[ka] = 1;
        pos++;
    }
    if (p->overlap_threshold > 0)
        for (int64_t j = 0; j < A; j++) {
            if (w->flag[j] == 1) continue;
            anchor_best(w, j, G);
            if (w->best_iou[j] > p->overlap_threshold) w->flag[j] = 1, pos++;
        }
    if (p->negative_mining_ratio > 0) {
        int64_t neg = (int64_t)((double)pos * p->negative_mining_ratio);
        if (neg < p->minimum_negative_samples) neg = p->minimum_negative_samples;
        if (neg > A - pos) neg = A - pos;
        if (neg > 0) {
            int64_t nc = 0;
            const double *cb = cls + b * C * A;
            for (int64_t j = 0; j < A; j++) {
                if (w->flag[j] != -1) continue;
                anchor_best(w, j, G);
                if (!(w->best_iou[j] < p->negative_mining_thresh)) continue;
                double mx = cb[j];
                for (int64_t c = 1; c < C; c++) mx = fmax(mx, cb[c * A + j]);
                double sum = 0;
                for (int64_t c = 0; c < C; c++) sum += exp(cb[c * A + j] - mx);
                w->cand[nc].key = -(exp(cb[j] - mx) / sum); /* hardest: least background */
                w->cand[nc].idx = j;
                nc++;
            }
            qsort(w->cand, (size_t)nc, sizeof *w->cand, cmp_desc);
            for (int64_t i = 0; i < neg && i < nc; i++) w->flag[w->cand[i].idx] = 0;
        }
    } else {
        for (int64_t j = 0; j < A; j++)
            if (w->flag[j] != 1) w->flag[j] = 0;
    }
    for (int64_t j = 0; j < A; j++) {
        if (w->flag[j] == 1) {
            const double *g = lab + w->best_gt[j] * LW;
            ct[j] = g[0] + 1; /* 0 is the background */
            for (int q = 0; q < 4; q++) mask[4 * j + q] = 1;
            encode_box(anchors + 4 * j, g + 1, var, loc + 4 * j);
        } else if (w->flag[j] == 0) {
            ct[j] = 0;
        }
    }
    return MXP_OK;
}

static int mbt_f(nd_io *io) {
    const mbt_params *p = io->params;
    double var[4];
    int rc = parse_variances("MultiBoxTarget", p->variances, var);
    if (rc) return rc;
    const ndarr *an = &io->in[0], *lb = &io->in[1], *cp = &io->in[2];
    int64_t A = an->shape[1], B = lb->shape[0], L = lb->shape[1], LW = lb->shape[2], C = cp->shape[1];
    mbt_work w;
    uint64_t na = (uint64_t)A, ng = (uint64_t)(L ? L : 1);
    w.iou = nn_alloc(na * ng * sizeof(double));
    w.best_iou = nn_alloc(na * sizeof(double));
    w.best_gt = nn_alloc(na * sizeof(int64_t));
    w.flag = nn_alloc(na);
    w.gt_done = nn_alloc(ng);
    w.cand = nn_alloc(na * sizeof(keyed));
    if (!w.iou || !w.best_iou || !w.best_gt || !w.flag || !w.gt_done || !w.cand)
        rc = NN_ERR(MXP_ENOMEM, "MultiBoxTarget: out of memory for %lld anchors x %lld labels", (long long)A, (long long)L);
    for (int64_t b = 0; b < B && !rc; b++)
        rc = mbt_batch(p, var, an->v, A, lb->v + b * L * LW, L, LW, cp->v, C, b, &w, io->out[0].v + b * 4 * A,
                       io->out[1].v + b * 4 * A, io->out[2].v + b * A);
    nn_free(w.iou), nn_free(w.best_iou), nn_free(w.best_gt), nn_free(w.flag), nn_free(w.gt_done), nn_free(w.cand);
    return rc;
}
static const nd_info mbt_info = {"MultiBoxTarget", mbt_f, NULL};

/* --------------------------------------------------------- MultiBoxDetection */
typedef struct mbd_params {
    double threshold, nms_threshold;
    int64_t background_id, nms_topk;
    int32_t clip, force_suppress;
    const char *variances;
} mbd_params;
static const mxp_param_def mbd_schema[] = {
    NN_P("clip", MXP_PARAM_BOOL, 0, mbd_params, clip, "True", NULL, "Clip out-of-boundary boxes."),
    NN_P("threshold", MXP_PARAM_FLOAT, 0, mbd_params, threshold, "0.01", NULL, "Threshold to be a positive prediction."),
    NN_P("background_id", MXP_PARAM_INT, 0, mbd_params, background_id, "0", NULL,
         "Background id (as in MXNet, class 0 is the background whatever its value)."),
    NN_P("nms_threshold", MXP_PARAM_FLOAT, 0, mbd_params, nms_threshold, "0.5", NULL, "Non-maximum suppression threshold."),
    NN_P("force_suppress", MXP_PARAM_BOOL, 0, mbd_params, force_suppress, "False", NULL,
         "Suppress all detections regardless of class_id."),
    NN_P("variances", MXP_PARAM_STRING, 0, mbd_params, variances, "(0.1,0.1,0.2,0.2)", NULL,
         "Variances to be decoded from box regression output."),
    NN_P("nms_topk", MXP_PARAM_INT, 0, mbd_params, nms_topk, "-1", NULL,
         "Keep maximum top k detections before nms, -1 for no limit."),
};
static const char *const mbd_args[] = {"cls_prob", "loc_pred", "anchor", NULL};

static int mbd_check(mxp_check_params_args *a) {
    const mbd_params *p = a->params;
    double v[4];
    return parse_variances("MultiBoxDetection", p->variances, v);
}

static int mbd_shape(mxp_infer_shape_args *a) {
    const mxp_shape *cp = &a->in[0], *lp = &a->in[1], *an = &a->in[2];
    char s1[64], s2[64], s3[64];
    if (!nn_shape_known(cp) || !nn_shape_known(lp) || !nn_shape_known(an)) return MXP_EINCOMPLETE;
    if (cp->ndim != 3 || lp->ndim != 2 || an->ndim != 3 || an->dims[2] != 4 || cp->dims[2] != an->dims[1] ||
        lp->dims[1] != 4 * cp->dims[2] || lp->dims[0] != cp->dims[0])
        return NN_ERR(MXP_ESHAPE, "MultiBoxDetection: cls_prob %s, loc_pred %s and anchor %s must be (batch, "
                      "num_classes, A), (batch, 4A) and (1, A, 4)", nn_shape_str(cp, s1, sizeof s1),
                      nn_shape_str(lp, s2, sizeof s2), nn_shape_str(an, s3, sizeof s3));
    a->out[0] = nn_shape(3, (const int64_t[]){cp->dims[0], cp->dims[2], 6});
    return MXP_OK;
}

/* Box of anchor an moved by prediction lp (MXNet's decoding). */
static void decode_box(const double *an, const double *lp, const double *v, int clip, double *o) {
    double aw = an[2] - an[0], ah = an[3] - an[1], ax = (an[0] + an[2]) / 2, ay = (an[1] + an[3]) / 2;
    double ox = lp[0] * v[0] * aw + ax, oy = lp[1] * v[1] * ah + ay;
    double ow = exp(lp[2] * v[2]) * aw / 2, oh = exp(lp[3] * v[3]) * ah / 2;
    o[0] = ox - ow, o[1] = oy - oh, o[2] = ox + ow, o[3] = oy + oh;
    if (clip)
        for (int q = 0; q < 4; q++) o[q] = fmax(0.0, fmin(1.0, o[q]));
}

static void mbd_batch(const mbd_params *p, const double *var, const double *cls, const double *loc,
                      const double *anchors, int64_t C, int64_t A, double *rows, double *tmp, keyed *order,
                      double *out) {
    for (int64_t i = 0; i < A * 6; i++) out[i] = -1;
    for (int64_t i = 0; i < A; i++) {
        double score = -1;
        int64_t id = 0;
        for (int64_t c = 1; c < C; c++)
            if (cls[c * A + i] > score) score = cls[c * A + i], id = c;
        if (id > 0 && score < p->threshold) id = 0;
        double *r = rows + 6 * i;
        r[0] = (double)(id - 1), r[1] = score;
        decode_box(anchors + 4 * i, loc + 4 * i, var, p->clip, r + 2);
    }
    int64_t valid = 0;
    for (int64_t i = 0; i < A; i++)
        if (rows[6 * i] >= 0) memcpy(out + 6 * valid++, rows + 6 * i, 6 * sizeof(double));
    if (valid < 1 || p->nms_threshold <= 0 || p->nms_threshold > 1) return;
    memcpy(tmp, out, (size_t)valid * 6 * sizeof(double));
    for (int64_t i = 0; i < valid; i++) order[i].key = tmp[6 * i + 1], order[i].idx = i;
    qsort(order, (size_t)valid, sizeof *order, cmp_desc);
    int64_t keep = valid;
    if (p->nms_topk > 0 && p->nms_topk < keep) {
        keep = p->nms_topk;
        for (int64_t i = keep; i < valid; i++) out[6 * i] = -1; /* MXNet leaves the rest of these rows as they were */
    }
    for (int64_t i = 0; i < keep; i++) memcpy(out + 6 * i, tmp + 6 * order[i].idx, 6 * sizeof(double));
    for (int64_t i = 0; i < keep; i++) {
        if (out[6 * i] < 0) continue;
        for (int64_t j = i + 1; j < keep; j++) {
            if (out[6 * j] < 0) continue;
            if ((p->force_suppress || out[6 * i] == out[6 * j]) &&
                nn_box_iou_corner(out + 6 * i + 2, out + 6 * j + 2) >= p->nms_threshold)
                out[6 * j] = -1;
        }
    }
}

static int mbd_f(nd_io *io) {
    const mbd_params *p = io->params;
    double var[4];
    int rc = parse_variances("MultiBoxDetection", p->variances, var);
    if (rc) return rc;
    const ndarr *cp = &io->in[0], *lp = &io->in[1], *an = &io->in[2];
    int64_t B = cp->shape[0], C = cp->shape[1], A = cp->shape[2];
    double *rows = nn_alloc((uint64_t)A * 6 * sizeof(double)), *tmp = nn_alloc((uint64_t)A * 6 * sizeof(double));
    keyed *order = nn_alloc((uint64_t)A * sizeof(keyed));
    if (!rows || !tmp || !order) rc = NN_ERR(MXP_ENOMEM, "MultiBoxDetection: out of memory for %lld anchors", (long long)A);
    for (int64_t b = 0; b < B && !rc; b++)
        mbd_batch(p, var, cp->v + b * C * A, lp->v + b * 4 * A, an->v, C, A, rows, tmp, order, io->out[0].v + b * A * 6);
    nn_free(rows), nn_free(tmp), nn_free(order);
    return rc;
}
static const nd_info mbd_info = {"MultiBoxDetection", mbd_f, NULL};

/* ------------------------------------------------------------- registration */
static const char *const mbt_aliases[] = {"MultiBoxTarget", "_npx_multibox_target", NULL};
static const char *const mbd_aliases[] = {"MultiBoxDetection", "_npx_multibox_detection", NULL};

static const mxp_op_def defs[] = {
    {.hdr = MXP_HEADER(mxp_op_def), .name = "_contrib_MultiBoxTarget", .aliases = mbt_aliases,
     .doc = "Compute Multibox training targets", .params = mbt_schema, .n_params = NN_COUNT(mbt_schema),
     .params_size = sizeof(mbt_params), .arg_names = mbt_args, .output_names = mbt_outs, .infer_shape = mbt_shape,
     .flags = MXP_OP_NO_GRADIENT, .check_params = mbt_check},
    {.hdr = MXP_HEADER(mxp_op_def), .name = "_contrib_MultiBoxDetection", .aliases = mbd_aliases,
     .doc = "Convert multibox detection predictions.", .params = mbd_schema, .n_params = NN_COUNT(mbd_schema),
     .params_size = sizeof(mbd_params), .arg_names = mbd_args, .infer_shape = mbd_shape, .flags = MXP_OP_NO_GRADIENT,
     .check_params = mbd_check},
};
static const mxp_op_impl impls[] = {
    ND_IMPL("_contrib_MultiBoxTarget", mbt_info),
    ND_IMPL("_contrib_MultiBoxDetection", mbd_info),
};

int nn_register_multibox(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int st = r->add_op(r, &defs[i]);
        if (st < 0 || (st = r->add_impl(r, &impls[i])) < 0) return st;
    }
    return MXP_OK;
}
