/* third_party_op.c — a pack written outside the mxplug tree, built only
 * from the installed plugin headers (pkg-config mxplug-plugin).
 *
 * It shows the ways a third party extends the runtime:
 *   - a new op, `hardswish` (out = x * relu6(x + 3) / 6, MobileNetV3), with
 *     forward and backward;
 *   - a second implementation, `thirdparty`, of an op another pack defines:
 *     `relu` from ops-basic.  Its rank (MXP_RANK_MARGINAL) is below the
 *     default's, so `auto` keeps choosing ops-basic's unless the policy
 *     names it (`mxplug impl relu thirdparty`, MXP_IMPL_relu=thirdparty);
 *   - a `naive` implementation of ops-nn's Convolution that reads the op's
 *     parameters (kernel, stride, dilate, pad, num_filter, num_group,
 *     no_bias, layout) by name through the host (ABI 1.1:
 *     mxp_param_get_* on args->op_params), never through ops-nn's private
 *     struct.  Also opt-in: MXP_IMPL_Convolution=naive.
 * It also publishes counters of its own (ABI 1.2, <mxp/stats.h>), so an
 * author sees what ran and how much work it did, beside the runtime's
 * calls and time per impl: `mxplug train --stats`, `mxplug packs --stats`
 * or mxp_pack_stats() in an application.  Registered in init, bumped with
 * one relaxed atomic add; on a host older than 1.2 they are simply absent.
 * The relu impl follows the op's definition in ops-basic (a SimpleOp whose
 * gradient uses the output): backward reads out_grad and the output only.
 * Kernels: contiguous float32/float64; anything else is refused by
 * `supports` with a reason.  No symbol but mxp_plugin_v1 is exported. */
#include <mxp/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mxp_host *tp_host;

/* Counters (host-owned cells; NULL on a host without them: bumps no-op). */
static mxp_stat *tp_st_relu_elems, *tp_st_conv_macs, *tp_st_conv_scratch;

static int tp_supports(mxp_impl_query_args *a) {
    int32_t dt = a->n_in ? a->in_dtypes[0] : MXP_DTYPE_UNKNOWN;
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64) {
        if (a->reason) snprintf(a->reason, a->reason_size, "float32/float64 only (dtype %d)", (int)dt);
        return 0;
    }
    return 1;
}

static int tp_check(const char *op, const mxp_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++) {
        if (!ts[i]->data) return tp_host->set_error(MXP_EINVAL, "%s (third-party pack): missing tensor %d", op, i);
        if (!mxp_tensor_is_contiguous(ts[i]))
            return tp_host->set_error(MXP_EUNSUPPORTED, "%s (third-party pack): strided views unsupported", op);
        if (ts[i]->dtype != ts[0]->dtype || (ts[i]->dtype != MXP_DTYPE_F32 && ts[i]->dtype != MXP_DTYPE_F64))
            return tp_host->set_error(MXP_ETYPE, "%s (third-party pack): float32/float64 only", op);
    }
    return MXP_OK;
}

/* Elementwise y[i] (req) = f(a[i], b[i]) for float and double. */
#define TP_MAP(NAME, EXPR)                                                          \
    static void NAME(const mxp_tensor *ta, const mxp_tensor *tb, const mxp_tensor *ty, \
                     int32_t req) {                                                 \
        int64_t n = mxp_tensor_numel(ty);                                           \
        if (ty->dtype == MXP_DTYPE_F32) {                                           \
            typedef float T;                                                        \
            const T *A = mxp_tensor_ptr(ta), *B = tb ? mxp_tensor_ptr(tb) : NULL;   \
            T *Y = mxp_tensor_ptr(ty);                                              \
            for (int64_t i = 0; i < n; i++) {                                       \
                T a = A[i], b = B ? B[i] : (T)0, v = (EXPR);                        \
                (void)b;                                                            \
                Y[i] = req == MXP_REQ_ADD ? Y[i] + v : v;                           \
            }                                                                       \
        } else {                                                                    \
            typedef double T;                                                       \
            const T *A = mxp_tensor_ptr(ta), *B = tb ? mxp_tensor_ptr(tb) : NULL;   \
            T *Y = mxp_tensor_ptr(ty);                                              \
            for (int64_t i = 0; i < n; i++) {                                       \
                T a = A[i], b = B ? B[i] : (T)0, v = (EXPR);                        \
                (void)b;                                                            \
                Y[i] = req == MXP_REQ_ADD ? Y[i] + v : v;                           \
            }                                                                       \
        }                                                                           \
    }

/* hardswish(a) = a * clamp(a + 3, 0, 6) / 6 */
TP_MAP(tp_hardswish_map, a <= (T)-3 ? (T)0 : a >= (T)3 ? a : a * (a + (T)3) / (T)6)
/* d hardswish / da = 0 (a < -3), 1 (a > 3), (2a + 3) / 6 between; times b = out_grad */
TP_MAP(tp_hardswish_grad_map, a < (T)-3 ? (T)0 : a > (T)3 ? b : b * ((T)2 * a + (T)3) / (T)6)
/* relu(a) */
TP_MAP(tp_relu_map, a > (T)0 ? a : (T)0)
/* relu backward from the output a and out_grad b */
TP_MAP(tp_relu_grad_map, a > (T)0 ? b : (T)0)

/* ------------------------------------------------------------ hardswish */
static int tp_same_shape(mxp_infer_shape_args *a) {
    if (a->in[0].ndim < 0) return MXP_EINCOMPLETE;
    a->out[0] = a->in[0];
    return MXP_OK;
}

static const mxp_op_def tp_hardswish_def = {
    .hdr = MXP_HEADER(mxp_op_def),
    .name = "hardswish",
    .aliases = (const char *const[]){"hard_swish", NULL},
    .doc = "Hard swish: data * relu6(data + 3) / 6 (MobileNetV3).  From a third-party pack.",
    .arg_names = (const char *const[]){"data", NULL},
    .infer_shape = tp_same_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
};

static int tp_hardswish_forward(const mxp_forward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("hardswish", ts, 2);
    if (rc == MXP_OK) tp_hardswish_map(&a->in[0], NULL, &a->out[0], a->req[0]);
    return rc;
}

static int tp_hardswish_backward(const mxp_backward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out_grad[0], &a->in_grad[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("hardswish", ts, 3);
    if (rc == MXP_OK) tp_hardswish_grad_map(&a->in[0], &a->out_grad[0], &a->in_grad[0], a->req[0]);
    return rc;
}

static const mxp_op_impl tp_hardswish_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "hardswish", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY,
    .doc = "plain loop",
    .supports = tp_supports,
    .forward = tp_hardswish_forward,
    .backward = tp_hardswish_backward,
};

/* ------------------------------------------------------------ relu */
static int tp_relu_forward(const mxp_forward_args *a) {
    const mxp_tensor *ts[] = {&a->in[0], &a->out[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("relu", ts, 2);
    if (rc == MXP_OK) tp_relu_map(&a->in[0], NULL, &a->out[0], a->req[0]);
    if (rc == MXP_OK) mxp_stat_add(tp_st_relu_elems, (uint64_t)mxp_tensor_numel(&a->in[0]));
    return rc;
}

static int tp_relu_backward(const mxp_backward_args *a) {
    const mxp_tensor *ts[] = {&a->out[0], &a->out_grad[0], &a->in_grad[0]};
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    int rc = tp_check("relu", ts, 3);
    if (rc == MXP_OK) tp_relu_grad_map(&a->out[0], &a->out_grad[0], &a->in_grad[0], a->req[0]);
    return rc;
}

static const mxp_op_impl tp_relu_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "relu", .impl_name = "thirdparty", .device = "cpu",
    .rank = MXP_RANK_MARGINAL, /* below ops-basic's default: opt-in */
    .doc = "third-party relu (opt in with the policy)",
    .supports = tp_supports,
    .forward = tp_relu_forward,
    .backward = tp_relu_backward,
};

/* ------------------------------------------------------------ Convolution */
/* ops-nn defines Convolution; this pack only implements it.  The params
 * pointer in the args is ops-nn's private struct, so the impl reads the
 * values by name from the record beside it (a->op_params) in `create`,
 * and keeps them in its state. */
typedef struct tp_conv {
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    int64_t num_filter, num_group;
    int32_t no_bias;
} tp_conv;

/* Read and check every parameter the kernel depends on.  On failure the
 * host has the message (naming the op and the parameter). */
static int tp_conv_read(const mxp_op_params *p, tp_conv *c, char *why, size_t why_size) {
    mxp_param_shape kernel, stride, dilate, pad;
    const char *layout = NULL;
    int rc;
    if ((rc = mxp_param_get_shape(tp_host, p, "kernel", &kernel)) < 0 ||
        (rc = mxp_param_get_shape(tp_host, p, "stride", &stride)) < 0 ||
        (rc = mxp_param_get_shape(tp_host, p, "dilate", &dilate)) < 0 ||
        (rc = mxp_param_get_shape(tp_host, p, "pad", &pad)) < 0 ||
        (rc = mxp_param_get_int(tp_host, p, "num_filter", &c->num_filter)) < 0 ||
        (rc = mxp_param_get_int(tp_host, p, "num_group", &c->num_group)) < 0 ||
        (rc = mxp_param_get_bool(tp_host, p, "no_bias", &c->no_bias)) < 0 ||
        (rc = mxp_param_get_enum(tp_host, p, "layout", &layout)) < 0)
        return rc;
    /* ops-nn normalises stride/dilate/pad to 2 elements; check anyway. */
    if (kernel.ndim != 2 || stride.ndim != 2 || dilate.ndim != 2 || pad.ndim != 2) {
        snprintf(why, why_size, "2-D convolution only (kernel has %d dims)", (int)kernel.ndim);
        return 0;
    }
    if (strcmp(layout, "None") != 0 && strcmp(layout, "NCHW") != 0) {
        snprintf(why, why_size, "layout %s: NCHW only", layout);
        return 0;
    }
    c->kh = kernel.dims[0]; c->kw = kernel.dims[1];
    c->sh = stride.dims[0]; c->sw = stride.dims[1];
    c->dh = dilate.dims[0]; c->dw = dilate.dims[1];
    c->ph = pad.dims[0];    c->pw = pad.dims[1];
    return 1;
}

static int tp_conv_supports(mxp_impl_query_args *a) {
    const mxp_op_params *p = mxp_impl_query_op_params(a);
    if (!p) {
        snprintf(a->reason, a->reason_size, "needs a host with typed parameter access (ABI 1.1)");
        return 0;
    }
    if (a->n_in < 2 || a->in_shapes[0].ndim != 4) {
        snprintf(a->reason, a->reason_size, "4-D NCHW data only");
        return 0;
    }
    tp_conv c;
    int rc = tp_conv_read(p, &c, a->reason, a->reason_size);
    if (rc <= 0) return rc;
    return tp_supports(a);
}

static int tp_conv_create(mxp_impl_query_args *a) {
    tp_conv *c = calloc(1, sizeof *c);
    if (!c) return tp_host->set_error(MXP_ENOMEM, "Convolution (naive): out of memory");
    char why[128] = "";
    int rc = tp_conv_read(mxp_impl_query_op_params(a), c, why, sizeof why);
    if (rc <= 0) {
        free(c);
        return rc < 0 ? rc : tp_host->set_error(MXP_EUNSUPPORTED, "Convolution (naive): %s", why);
    }
    a->state = c;
    return MXP_OK;
}

static void tp_conv_destroy(const mxp_destroy_args *a) { free(a->state); }

/* Geometry of one call, from the state and the tensors' shapes. */
typedef struct tp_geom {
    int64_t N, C, H, W, F, OH, OW, G, Cg, Fg;
} tp_geom;

static int tp_conv_geom(const tp_conv *c, const mxp_tensor *x, const mxp_tensor *w, const mxp_tensor *y,
                        tp_geom *g) {
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4)
        return tp_host->set_error(MXP_ESHAPE, "Convolution (naive): data, weight and output must be 4-D");
    g->N = x->shape[0]; g->C = x->shape[1]; g->H = x->shape[2]; g->W = x->shape[3];
    g->F = c->num_filter; g->G = c->num_group; g->Cg = g->C / g->G; g->Fg = g->F / g->G;
    g->OH = (g->H + 2 * c->ph - c->dh * (c->kh - 1) - 1) / c->sh + 1;
    g->OW = (g->W + 2 * c->pw - c->dw * (c->kw - 1) - 1) / c->sw + 1;
    if (w->shape[0] != g->F || w->shape[1] != g->Cg || w->shape[2] != c->kh || w->shape[3] != c->kw ||
        y->shape[0] != g->N || y->shape[1] != g->F || y->shape[2] != g->OH || y->shape[3] != g->OW)
        return tp_host->set_error(MXP_ESHAPE, "Convolution (naive): tensors do not match the parameters");
    return MXP_OK;
}

/* The input index read by output (oh, ow) at kernel tap (i, j), or -1 in the padding. */
static int64_t tp_tap(const tp_conv *c, const tp_geom *g, int64_t oh, int64_t ow, int64_t i, int64_t j) {
    int64_t h = oh * c->sh - c->ph + i * c->dh, w = ow * c->sw - c->pw + j * c->dw;
    return h < 0 || h >= g->H || w < 0 || w >= g->W ? -1 : h * g->W + w;
}

static double tp_get(const mxp_tensor *t, int64_t i) {
    return t->dtype == MXP_DTYPE_F32 ? (double)((const float *)mxp_tensor_ptr(t))[i]
                                     : ((const double *)mxp_tensor_ptr(t))[i];
}

static void tp_put(const mxp_tensor *t, int64_t i, double v, int32_t req) {
    if (t->dtype == MXP_DTYPE_F32) {
        float *p = (float *)mxp_tensor_ptr(t) + i;
        *p = req == MXP_REQ_ADD ? *p + (float)v : (float)v;
    } else {
        double *p = (double *)mxp_tensor_ptr(t) + i;
        *p = req == MXP_REQ_ADD ? *p + v : v;
    }
}

static int tp_conv_forward(const mxp_forward_args *a) {
    const tp_conv *c = a->state;
    const mxp_tensor *x = &a->in[0], *w = &a->in[1], *b = c->no_bias ? NULL : &a->in[2], *y = &a->out[0];
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    const mxp_tensor *ts[] = {x, w, y, b};
    tp_geom g;
    int rc = tp_check("Convolution", ts, b ? 4 : 3);
    if (rc == MXP_OK) rc = tp_conv_geom(c, x, w, y, &g);
    if (rc < 0) return rc;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t f = 0; f < g.F; f++) {
            int64_t grp = f / g.Fg;
            for (int64_t oh = 0; oh < g.OH; oh++)
                for (int64_t ow = 0; ow < g.OW; ow++) {
                    double acc = b ? tp_get(b, f) : 0.0;
                    for (int64_t cc = 0; cc < g.Cg; cc++) {
                        int64_t xbase = (n * g.C + grp * g.Cg + cc) * g.H * g.W;
                        for (int64_t i = 0; i < c->kh; i++)
                            for (int64_t j = 0; j < c->kw; j++) {
                                int64_t at = tp_tap(c, &g, oh, ow, i, j);
                                if (at >= 0)
                                    acc += tp_get(x, xbase + at) * tp_get(w, ((f * g.Cg + cc) * c->kh + i) * c->kw + j);
                            }
                    }
                    tp_put(y, ((n * g.F + f) * g.OH + oh) * g.OW + ow, acc, a->req[0]);
                }
        }
    /* Multiply-adds of the loop nest above, padding taps included. */
    mxp_stat_add(tp_st_conv_macs, (uint64_t)(g.N * g.F * g.OH * g.OW * g.Cg * c->kh * c->kw));
    return MXP_OK;
}

/* in_grad: data (0), weight (1), bias (2).  Each is accumulated in doubles
 * over its own loop nest, then written once with its req. */
static int tp_conv_backward(const mxp_backward_args *a) {
    const tp_conv *c = a->state;
    const mxp_tensor *dy = &a->out_grad[0], *x = &a->in[0], *w = &a->in[1];
    const mxp_tensor *ts[] = {dy, x, w};
    tp_geom g;
    int rc = tp_check("Convolution", ts, 3);
    if (rc == MXP_OK) rc = tp_conv_geom(c, x, w, dy, &g);
    if (rc < 0) return rc;
    uint32_t n_grads = c->no_bias ? 2 : 3;
    for (uint32_t k = 0; k < n_grads && k < a->n_in; k++) {
        const mxp_tensor *gt = &a->in_grad[k];
        int32_t req = a->req[k];
        if (req == MXP_REQ_NULL || !gt->data) continue;
        int64_t len = mxp_tensor_numel(gt);
        double *acc = calloc((size_t)len + 1, sizeof *acc);
        if (!acc) return tp_host->set_error(MXP_ENOMEM, "Convolution (naive): out of memory");
        mxp_stat_add(tp_st_conv_scratch, (uint64_t)len * sizeof *acc);
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t f = 0; f < g.F; f++)
                for (int64_t oh = 0; oh < g.OH; oh++)
                    for (int64_t ow = 0; ow < g.OW; ow++) {
                        double d = tp_get(dy, ((n * g.F + f) * g.OH + oh) * g.OW + ow);
                        if (k == 2) { acc[f] += d; continue; }
                        int64_t grp = f / g.Fg;
                        for (int64_t cc = 0; cc < g.Cg; cc++) {
                            int64_t xbase = (n * g.C + grp * g.Cg + cc) * g.H * g.W;
                            for (int64_t i = 0; i < c->kh; i++)
                                for (int64_t j = 0; j < c->kw; j++) {
                                    int64_t at = tp_tap(c, &g, oh, ow, i, j), wi = ((f * g.Cg + cc) * c->kh + i) * c->kw + j;
                                    if (at < 0) continue;
                                    if (k == 0) acc[xbase + at] += d * tp_get(w, wi);
                                    else acc[wi] += d * tp_get(x, xbase + at);
                                }
                        }
                    }
        for (int64_t i = 0; i < len; i++) tp_put(gt, i, acc[i], req);
        free(acc);
    }
    return MXP_OK;
}

static const mxp_op_impl tp_conv_impl = {
    .hdr = MXP_HEADER(mxp_op_impl),
    .op_name = "Convolution", .impl_name = "naive", .device = "cpu",
    .rank = MXP_RANK_MARGINAL - 32, /* below ops-nn's impls: opt-in */
    .doc = "third-party reference loops; params read by name (ABI 1.1)",
    .supports = tp_conv_supports,
    .create = tp_conv_create,
    .forward = tp_conv_forward,
    .backward = tp_conv_backward,
    .destroy = tp_conv_destroy,
};

/* ------------------------------------------------------------ pack */
static const mxp_stat_def tp_stats[] = {
    {MXP_HEADER(mxp_stat_def), "relu_thirdparty.elements", MXP_STAT_COUNT, 0, "elements",
     "elements the thirdparty relu impl computed (forward)"},
    {MXP_HEADER(mxp_stat_def), "conv_naive.macs", MXP_STAT_COUNT, 0, "multiply-adds",
     "multiply-adds of naive Convolution forwards, N*F*OH*OW*(C/G)*KH*KW"},
    {MXP_HEADER(mxp_stat_def), "conv_naive.backward_scratch", MXP_STAT_BYTES, 0, NULL,
     "bytes of float64 accumulators naive Convolution backwards allocated"},
};

static int tp_init(const mxp_plugin_init_args *a) {
    tp_host = a->host;
    mxp_registrar *r = a->registrar;
    int rc = r->add_op(r, &tp_hardswish_def);
    if (rc == MXP_OK) rc = r->add_impl(r, &tp_hardswish_impl);
    if (rc == MXP_OK) rc = r->add_impl(r, &tp_relu_impl);
    if (rc == MXP_OK) rc = r->add_impl(r, &tp_conv_impl);
    mxp_stat **cells[] = {&tp_st_relu_elems, &tp_st_conv_macs, &tp_st_conv_scratch};
    for (int i = 0; i < 3 && rc == MXP_OK; i++) rc = mxp_registrar_add_stat(r, &tp_stats[i], cells[i]);
    return rc;
}

static const mxp_plugin_desc tp_desc = {
    .hdr = MXP_HEADER(mxp_plugin_desc),
    .min_host_minor = 1, /* the Convolution impl reads params by name */
    .name = "thirdparty",
    .version = "1.0.0",
    .description = "Example third-party pack: hardswish, and relu and Convolution implementations",
    .license = "MIT",
    .init = tp_init,
};
MXP_PLUGIN_DEFINE(tp_desc)
