/* pooling.c — Pooling (MXNet 1.x), 2-D NCHW: pool_type max/avg/sum,
 * global_pool, pooling_convention valid/full (same is refused), kernel,
 * stride, pad, count_include_pad (avg).  f32/f64, split over (n, c) planes.
 * Max backward routes each output gradient to the first maximum of its
 * window (rescanning the input, so backward needs data but not output).
 * Window arithmetic follows MXNet's pool_*_2d kernels: windows are clipped
 * to the padded extent for the avg divisor (count_include_pad) and to the
 * data for the values.  Max pooling with non-overlapping windows inside the
 * data (2x2 stride 2 and the like) has a fast path with the same results.
 * The op definition here also accepts 1-D (NCW) and 3-D (NCDHW) kernels and
 * data; those run on pooling_nd.c's impl, and this impl refuses them.
 * Also _mxp_ReLUPooling, max pooling of relu(data) (the fusion pass's).
 * bfloat16 data (a mixed-precision graph, graph/amp.c) runs the same
 * float32 plane kernels: each parallel task widens its plane (and, in the
 * backward, the plane's dy) into float32 scratch, runs the kernel on it
 * and rounds the plane's result into place once (req add in float32), so
 * the data is read once as bf16 and no whole-tensor copy is made. */
#include "pooling.h"
#include "bf16/bf16.h"
#include "nn_simd.h"
#include <float.h>

static const char *const pool_types[] = {"max", "avg", "sum", "lp", NULL};
static const char *const pool_conv[] = {"valid", "full", "same", NULL};
static const char *const pool_layouts[] = {"None", "NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", "NWC", NULL};

static const mxp_param_def pool_schema[] = {
    NN_P("kernel", MXP_PARAM_SHAPE, 0, pool_params, kernel, "()", NULL, "Pooling kernel size: (x,), (y, x) or (d, y, x)."),
    NN_P("pool_type", MXP_PARAM_ENUM, 0, pool_params, pool_type, "max", pool_types, "Pooling type to be applied."),
    NN_P("global_pool", MXP_PARAM_BOOL, 0, pool_params, global_pool, "False", NULL, "Ignore kernel size, do global pooling based on current input feature map."),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, pool_params, cudnn_off, "False", NULL, "Turn off cudnn pooling (accepted, ignored on CPU)."),
    NN_P("pooling_convention", MXP_PARAM_ENUM, 0, pool_params, pooling_convention, "valid", pool_conv, "Pooling convention to be applied."),
    NN_P("stride", MXP_PARAM_SHAPE, 0, pool_params, stride, "()", NULL, "Stride: for pooling (y, x). Defaults to 1."),
    NN_P("pad", MXP_PARAM_SHAPE, 0, pool_params, pad, "()", NULL, "Pad for pooling: (y, x). Defaults to 0."),
    NN_P("p_value", MXP_PARAM_OPT_INT, 0, pool_params, p_value, "None", NULL, "Value of p for Lp pooling (lp is not implemented)."),
    NN_P("count_include_pad", MXP_PARAM_BOOL, 0, pool_params, count_include_pad, "True", NULL, "Whether padded values count in the avg divisor."),
    NN_P("layout", MXP_PARAM_ENUM, 0, pool_params, layout, "None", pool_layouts, "Data layout; channel-first only (NCW, NCHW, NCDHW)."),
};
static const char *const pool_args[] = {"data", NULL};

/* stride/pad left empty get `v` in each of the kernel's nd dimensions; a
 * given one must have nd elements. */
static int fill_nd(mxp_param_shape *s, int nd, int64_t v, const char *what) {
    if (!s->has_value || s->ndim == 0) {
        s->has_value = 1; s->ndim = nd;
        for (int i = 0; i < nd; i++) s->dims[i] = v;
        return MXP_OK;
    }
    if (s->ndim != nd) return NN_ERR(MXP_EINVAL, "Pooling: %s must have %d elements like kernel, got %d", what, nd, s->ndim);
    return MXP_OK;
}

static int pool_check_params(mxp_check_params_args *a) {
    pool_params *p = a->params;
    int st;
    if (p->layout > 3) return NN_ERR(MXP_EUNSUPPORTED, "Pooling: only channel-first layouts (NCW, NCHW, NCDHW)");
    if (p->pool_type == POOL_LP) return NN_ERR(MXP_EUNSUPPORTED, "Pooling: pool_type 'lp' is not implemented");
    if (p->pooling_convention == 2) return NN_ERR(MXP_EUNSUPPORTED, "Pooling: pooling_convention 'same' is not implemented");
    if (p->global_pool) return MXP_OK; /* kernel, stride and pad are ignored: the rank comes from the data */
    int nd = p->kernel.has_value ? p->kernel.ndim : 0;
    if (nd < 1 || nd > 3)
        return NN_ERR(MXP_EINVAL, "Pooling: kernel must have 1, 2 or 3 elements unless global_pool (got %d)", nd);
    if (p->layout != 0 && p->layout != nd)
        return NN_ERR(MXP_EUNSUPPORTED, "Pooling: layout %s does not fit a %d-D kernel", pool_layouts[p->layout], nd);
    if ((st = fill_nd(&p->stride, nd, 1, "stride")) < 0 || (st = fill_nd(&p->pad, nd, 0, "pad")) < 0) return st;
    for (int i = 0; i < nd; i++)
        if (p->kernel.dims[i] < 1 || p->stride.dims[i] < 1 || p->pad.dims[i] < 0)
            return NN_ERR(MXP_EINVAL, "Pooling: kernel and stride must be >= 1, pad >= 0");
    return MXP_OK;
}

typedef struct pgeom { int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo; int type, cip; } pgeom;

static int pool_geom(const pool_params *p, const int64_t *d, pgeom *g, int check) {
    g->N = d[0]; g->C = d[1]; g->H = d[2]; g->W = d[3]; g->type = p->pool_type; g->cip = p->count_include_pad;
    if (p->global_pool) { g->kh = g->H; g->kw = g->W; g->sh = g->sw = 1; g->ph = g->pw = 0; }
    else { g->kh = p->kernel.dims[0]; g->kw = p->kernel.dims[1]; g->sh = p->stride.dims[0]; g->sw = p->stride.dims[1];
           g->ph = p->pad.dims[0]; g->pw = p->pad.dims[1]; }
    if (check && (g->kh > g->H + 2 * g->ph || g->kw > g->W + 2 * g->pw)) return -1;
    if (p->pooling_convention == 1) {
        g->Ho = 1 + (g->H + 2 * g->ph - g->kh + g->sh - 1) / g->sh;
        g->Wo = 1 + (g->W + 2 * g->pw - g->kw + g->sw - 1) / g->sw;
    } else {
        g->Ho = 1 + (g->H + 2 * g->ph - g->kh) / g->sh;
        g->Wo = 1 + (g->W + 2 * g->pw - g->kw) / g->sw;
    }
    return 0;
}

static int pool_infer_shape(mxp_infer_shape_args *a) {
    const pool_params *p = a->params;
    mxp_shape *d = &a->in[0];
    char b1[160];
    if (d->ndim < 0 || !nn_shape_known(d)) return MXP_EINCOMPLETE;
    int want = p->global_pool ? d->ndim : p->kernel.ndim + 2;
    if (d->ndim != want || want < 3 || want > 5)
        return NN_ERR(MXP_ESHAPE, "Pooling: %s data must be %s, got %s",
                      p->global_pool ? "global" : want == 3 ? "a 1-D kernel's" : want == 4 ? "a 2-D kernel's" : "a 3-D kernel's",
                      p->global_pool ? "3-D NCW, 4-D NCHW or 5-D NCDHW" : want == 3 ? "3-D NCW" : want == 4 ? "4-D NCHW" : "5-D NCDHW",
                      nn_shape_str(d, b1, sizeof b1));
    if (p->layout != 0 && p->layout != d->ndim - 2)
        return NN_ERR(MXP_ESHAPE, "Pooling: layout %s but data %s", pool_layouts[p->layout], nn_shape_str(d, b1, sizeof b1));
    if (d->ndim != 4) {
        pool_geom3 g3;
        if (pool_geom3_init(p, d->dims, d->ndim, &g3) < 0)
            return NN_ERR(MXP_ESHAPE, "Pooling: kernel larger than padded data %s", nn_shape_str(d, b1, sizeof b1));
        int64_t od[5] = {g3.N, g3.C};
        for (int i = 0; i < d->ndim - 2; i++) od[2 + i] = g3.out[3 - (d->ndim - 2) + i];
        mxp_shape o = nn_shape(d->ndim, od);
        return nn_shape_assign("Pooling", "output", &a->out[0], &o);
    }
    pgeom g;
    if (pool_geom(p, d->dims, &g, 1) < 0)
        return NN_ERR(MXP_ESHAPE, "Pooling: kernel (%lld,%lld) larger than padded data %s",
                      (long long)p->kernel.dims[0], (long long)p->kernel.dims[1], nn_shape_str(d, b1, sizeof b1));
    int64_t od[4] = {g.N, g.C, g.Ho, g.Wo};
    mxp_shape o = nn_shape(4, od);
    return nn_shape_assign("Pooling", "output", &a->out[0], &o);
}

/* relu: _mxp_ReLUPooling, max pooling of max(x, 0) (the input read
 * through a ReLU; its gradient gated by x > 0). */
typedef struct pjob { pgeom g; int32_t dt, req; int relu; const void *x, *dy; void *y, *dx; } pjob;

/* window [hs,he) x [ws,we) clipped to data; divisor per MXNet */
#define WINDOW(g, oh, ow) \
    int64_t hs = (oh) * (g)->sh - (g)->ph, ws = (ow) * (g)->sw - (g)->pw; \
    int64_t he = hs + (g)->kh, we = ws + (g)->kw; \
    if (he > (g)->H + (g)->ph) he = (g)->H + (g)->ph; \
    if (we > (g)->W + (g)->pw) we = (g)->W + (g)->pw; \
    int64_t psize = (he - hs) * (we - ws); \
    if (hs < 0) hs = 0; \
    if (ws < 0) ws = 0; \
    if (he > (g)->H) he = (g)->H; \
    if (we > (g)->W) we = (g)->W; \
    if (!(g)->cip) psize = (he - hs) * (we - ws);

static void pool_fwd_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pgeom *g = &j->g;
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = (const T *)j->x + pl * g->H * g->W;
        T *y = (T *)j->y + pl * g->Ho * g->Wo;
        for (int64_t oh = 0; oh < g->Ho; oh++) for (int64_t ow = 0; ow < g->Wo; ow++) {
            WINDOW(g, oh, ow)
            T v;
            if (g->type == POOL_MAX) {
                v = j->relu ? (T)0 : j->dt == MXP_DTYPE_F32 ? (T)-FLT_MAX : (T)-DBL_MAX; /* max(relu(x)) = max(0, x...) */
                for (int64_t h = hs; h < he; h++) for (int64_t w = ws; w < we; w++) if (x[h * g->W + w] > v) v = x[h * g->W + w];
            } else {
                T s = 0;
                for (int64_t h = hs; h < he; h++) for (int64_t w = ws; w < we; w++) s += x[h * g->W + w];
                v = g->type == POOL_AVG ? (psize > 0 ? s / (T)psize : 0) : s;
            }
            NN_STORE(j->req, y[oh * g->Wo + ow], v);
        }
    });
}

static void pool_bwd_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pgeom *g = &j->g;
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = j->x ? (const T *)j->x + pl * g->H * g->W : NULL;
        const T *dy = (const T *)j->dy + pl * g->Ho * g->Wo;
        T *dx = (T *)j->dx + pl * g->H * g->W;
        if (j->req != MXP_REQ_ADD) memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));
        for (int64_t oh = 0; oh < g->Ho; oh++) for (int64_t ow = 0; ow < g->Wo; ow++) {
            WINDOW(g, oh, ow)
            T gv = dy[oh * g->Wo + ow];
            if (g->type == POOL_MAX) {
                int64_t best = -1; T v = 0;
                /* with relu: the first maximum of relu(x) when it is > 0
                 * (the first x equal to it), else none (relu's gradient is 0) */
                for (int64_t h = hs; h < he; h++) for (int64_t w = ws; w < we; w++)
                    if ((best < 0 && !j->relu) || x[h * g->W + w] > v) { v = x[h * g->W + w]; best = h * g->W + w; }
                if (best >= 0) dx[best] += gv;
            } else {
                T s = g->type == POOL_AVG ? (psize > 0 ? gv / (T)psize : 0) : gv;
                for (int64_t h = hs; h < he; h++) for (int64_t w = ws; w < we; w++) dx[h * g->W + w] += s;
            }
        }
    });
}

/* Fast path: max pooling with non-overlapping windows inside the data
 * (stride == kernel, no pad, Ho*kh <= H, Wo*kw <= W: LeNet's 2x2/2).  Same
 * results as the generic loops (forward: NaN never taken; backward: the
 * gradient goes to the first maximum in row-major window order, found by a
 * strict `>` scan from the window's first element) without the per-window
 * clipping; backward writes every window element once instead of clearing
 * the plane and then scattering.
 *
 * 2x2 windows are the hot case and get branch-free kernels: the argmax of a
 * window of random data is unpredictable, so the scan-with-branches version
 * spent most of its time in mispredictions (5x the forward's time).  For
 * float32 each step takes 8 input columns (4 windows) of the two input rows
 * as vectors: lane 2i holds a window's left column, lane 2i+1 its right
 * one; swapping adjacent lanes puts all four values of window i into lane
 * 2i, where the same compare/select chain as the scalar code runs.  The
 * remaining windows of a row (and float64) use the scalar chain, written
 * with selects so it compiles without branches. */
static int pool_disjoint_max(const pgeom *g) {
    return g->type == POOL_MAX && g->sh == g->kh && g->sw == g->kw && g->ph == 0 && g->pw == 0 &&
           g->Ho * g->kh <= g->H && g->Wo * g->kw <= g->W;
}

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef float v8fu __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4fu __attribute__((vector_size(16), aligned(4), may_alias));
#define LD8(p) (*(const v8fu *)(const void *)(p))
#define ST8(p, v) (*(v8fu *)(void *)(p) = (v))
#define LD4(p) (*(const v4fu *)(const void *)(p))
#define ST4(p, v) (*(v4fu *)(void *)(p) = (v))
/* bitwise select on float lanes: m ? a : b (m all-ones or zero per lane) */
#define SEL8(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))

/* 2x2/2 max pooling backward over `planes` consecutive float32 planes: the
 * window's gradient dy goes to its first maximum (order r0[2ow], r0[2ow+1],
 * r1[2ow], r1[2ow+1]), the other three get 0 (write) or nothing (add).
 * Rows and columns no window covers are left alone (the caller clears).
 * relu (_mxp_ReLUPooling): the scan starts from 0 with no index (k = 4),
 * so dy goes to the first maximum only when it is > 0 (the first maximum
 * of relu(x) is then the first x equal to it) and nowhere otherwise
 * (relu's gradient there is 0): max pooling's backward of relu(x)
 * followed by relu's, exactly. */
TC static void max2x2_bwd_f32(const float *x, const float *dy, float *dx, int64_t planes, int64_t H,
                              int64_t W, int64_t Ho, int64_t Wo, int add, int relu) {
    const v8i swap = {1, 0, 3, 2, 5, 4, 7, 6}, dup_even = {0, 0, 2, 2, 4, 4, 6, 6};
    const v8i col = {0, 1, 0, 1, 0, 1, 0, 1}, one = col - col + 1, two = one + one, three = two + one;
    const v8i none = three + one;
    const v8f zero = {0};
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t oh = 0; oh < Ho; oh++) {
            const float *r0 = x + pl * H * W + 2 * oh * W, *r1 = r0 + W, *dyr = dy + (pl * Ho + oh) * Wo;
            float *d0 = dx + pl * H * W + 2 * oh * W, *d1 = d0 + W;
            int64_t ow = 0;
            for (; ow + 4 <= Wo; ow += 4) {
                v8f a = LD8(r0 + 2 * ow), c = LD8(r1 + 2 * ow);
                v8f b = __builtin_shuffle(a, swap), d = __builtin_shuffle(c, swap);
                /* even lanes: the scalar chain v = a, k = 0; b > v -> k = 1; ...
                 * (relu: v = 0, k = none; a > v -> k = 0; ...) */
                v8f v = a;
                v8i k = one - one, gt;
                if (relu) { gt = a > zero; v = SEL8(gt, a, zero); k = ~gt & none; }
                gt = b > v; v = SEL8(gt, b, v); k = (gt & one) | (~gt & k);
                gt = c > v; v = SEL8(gt, c, v); k = (gt & two) | (~gt & k);
                gt = d > v; k = (gt & three) | (~gt & k);
                k = __builtin_shuffle(k, dup_even);          /* each window's k on both its lanes */
                v4f g4 = LD4(dyr + ow);
                v8f g = __builtin_shufflevector(g4, g4, 0, 0, 1, 1, 2, 2, 3, 3);
                v8f top = (v8f)((v8i)g & (k == col)), bot = (v8f)((v8i)g & (k == col + two));
                if (add) { top += LD8(d0 + 2 * ow); bot += LD8(d1 + 2 * ow); }
                ST8(d0 + 2 * ow, top); ST8(d1 + 2 * ow, bot);
            }
            for (; ow < Wo; ow++) {
                float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1], gv = dyr[ow];
                int k = 0; float v = a;
                if (relu) { k = a > 0 ? 0 : 4; v = a > 0 ? a : 0; }
                k = b > v ? 1 : k; v = b > v ? b : v;
                k = c > v ? 2 : k; v = c > v ? c : v;
                k = d > v ? 3 : k;
                float z0 = add ? d0[2 * ow] : 0, z1 = add ? d0[2 * ow + 1] : 0;
                float z2 = add ? d1[2 * ow] : 0, z3 = add ? d1[2 * ow + 1] : 0;
                d0[2 * ow] = k == 0 ? z0 + gv : z0; d0[2 * ow + 1] = k == 1 ? z1 + gv : z1;
                d1[2 * ow] = k == 2 ? z2 + gv : z2; d1[2 * ow + 1] = k == 3 ? z3 + gv : z3;
            }
        }
}

/* 2x2/2 max pooling forward over `planes` consecutive float32 planes:
 * y[ow] (=|+=) the scan v = -FLT_MAX, then v = x > v ? x : v over r0[2ow],
 * r0[2ow+1], r1[2ow], r1[2ow+1] (NaN never taken; of equal values the
 * first stays, so even the sign of a zero matches the scalar loop).  Same
 * lane layout as the backward below; the four results of a step are lanes
 * 0, 2, 4, 6.  The baseline compiler already vectorized the plain loop
 * (maxps on strided loads) for wide rows, but 16-lane auto-vectorization
 * leaves LeNet's 12- and 4-wide rows in the scalar remainder; 4 windows a
 * step fit both (~1.3x faster on both LeNet pools, single thread). */
TC static void max2x2_fwd_f32(const float *x, float *y, int64_t planes, int64_t H, int64_t W,
                              int64_t Ho, int64_t Wo, int add, int relu) {
    const float lowest = relu ? 0.0f : -FLT_MAX; /* relu: max(0, x...) = max(relu(x)) */
    const v8i swap = {1, 0, 3, 2, 5, 4, 7, 6};
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t oh = 0; oh < Ho; oh++) {
            const float *r0 = x + pl * H * W + 2 * oh * W, *r1 = r0 + W;
            float *yr = y + (pl * Ho + oh) * Wo;
            int64_t ow = 0;
            for (; ow + 4 <= Wo; ow += 4) {
                v8f a = LD8(r0 + 2 * ow), c = LD8(r1 + 2 * ow);
                v8f b = __builtin_shuffle(a, swap), d = __builtin_shuffle(c, swap);
                v8f v = (v8f){0} + lowest;
                v = SEL8(a > v, a, v); v = SEL8(b > v, b, v);
                v = SEL8(c > v, c, v); v = SEL8(d > v, d, v);
                v4f m = __builtin_shufflevector(v, v, 0, 2, 4, 6);
                if (add) m += LD4(yr + ow);
                ST4(yr + ow, m);
            }
            for (; ow < Wo; ow++) {
                float v = lowest, a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
                v = a > v ? a : v; v = b > v ? b : v; v = c > v ? c : v; v = d > v ? d : v;
                yr[ow] = add ? yr[ow] + v : v;
            }
        }
}

static void pool_fwd_disjoint_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pgeom *g = &j->g;
    if (g->kh == 2 && g->kw == 2 && j->dt == MXP_DTYPE_F32) {
        max2x2_fwd_f32((const float *)j->x + b * g->H * g->W, (float *)j->y + b * g->Ho * g->Wo, e - b,
                       g->H, g->W, g->Ho, g->Wo, j->req == MXP_REQ_ADD, j->relu);
        return;
    }
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = (const T *)j->x + pl * g->H * g->W;
        T *y = (T *)j->y + pl * g->Ho * g->Wo;
        T lowest = j->relu ? (T)0 : j->dt == MXP_DTYPE_F32 ? (T)-FLT_MAX : (T)-DBL_MAX;
        for (int64_t oh = 0; oh < g->Ho; oh++) {
            T *yr = y + oh * g->Wo;
            if (g->kh == 2 && g->kw == 2) {
                const T *r0 = x + (2 * oh) * g->W, *r1 = r0 + g->W;
                for (int64_t ow = 0; ow < g->Wo; ow++) {
                    T v = lowest;
                    v = r0[2 * ow] > v ? r0[2 * ow] : v; v = r0[2 * ow + 1] > v ? r0[2 * ow + 1] : v;
                    v = r1[2 * ow] > v ? r1[2 * ow] : v; v = r1[2 * ow + 1] > v ? r1[2 * ow + 1] : v;
                    NN_STORE(j->req, yr[ow], v);
                }
                continue;
            }
            for (int64_t ow = 0; ow < g->Wo; ow++) {
                T v = lowest;
                for (int64_t h = oh * g->kh; h < (oh + 1) * g->kh; h++)
                    for (int64_t w = ow * g->kw; w < (ow + 1) * g->kw; w++) v = x[h * g->W + w] > v ? x[h * g->W + w] : v;
                NN_STORE(j->req, yr[ow], v);
            }
        }
    });
}

static void pool_bwd_disjoint_range(void *arg, int64_t b, int64_t e) {
    const pjob *j = arg; const pgeom *g = &j->g;
    int add = j->req == MXP_REQ_ADD;
    int partial = g->Ho * g->kh != g->H || g->Wo * g->kw != g->W; /* edge rows/cols no window covers */
    if (g->kh == 2 && g->kw == 2 && j->dt == MXP_DTYPE_F32) {
        if (!add && partial) memset((float *)j->dx + b * g->H * g->W, 0, (size_t)((e - b) * g->H * g->W) * sizeof(float));
        max2x2_bwd_f32((const float *)j->x + b * g->H * g->W, (const float *)j->dy + b * g->Ho * g->Wo,
                       (float *)j->dx + b * g->H * g->W, e - b, g->H, g->W, g->Ho, g->Wo, add, j->relu);
        return;
    }
    NN_TYPED(j->dt, T, for (int64_t pl = b; pl < e; pl++) {
        const T *x = (const T *)j->x + pl * g->H * g->W;
        const T *dy = (const T *)j->dy + pl * g->Ho * g->Wo;
        T *dx = (T *)j->dx + pl * g->H * g->W;
        if (!add && partial) memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));
        if (g->kh == 2 && g->kw == 2) {
            for (int64_t oh = 0; oh < g->Ho; oh++) {
                const T *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W, *dyr = dy + oh * g->Wo;
                T *d0 = dx + 2 * oh * g->W, *d1 = d0 + g->W;
                for (int64_t ow = 0; ow < g->Wo; ow++) {
                    T a = r0[2 * ow], bb = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1], gv = dyr[ow];
                    int k = 0; T v = a;   /* first maximum in window order a, bb, c, d (relu: > 0, else none) */
                    if (j->relu) { k = a > 0 ? 0 : 4; v = a > 0 ? a : 0; }
                    k = bb > v ? 1 : k; v = bb > v ? bb : v;
                    k = c > v ? 2 : k; v = c > v ? c : v;
                    k = d > v ? 3 : k;
                    T z0 = add ? d0[2 * ow] : 0, z1 = add ? d0[2 * ow + 1] : 0;
                    T z2 = add ? d1[2 * ow] : 0, z3 = add ? d1[2 * ow + 1] : 0;
                    d0[2 * ow] = k == 0 ? z0 + gv : z0; d0[2 * ow + 1] = k == 1 ? z1 + gv : z1;
                    d1[2 * ow] = k == 2 ? z2 + gv : z2; d1[2 * ow + 1] = k == 3 ? z3 + gv : z3;
                }
            }
            continue;
        }
        for (int64_t oh = 0; oh < g->Ho; oh++) for (int64_t ow = 0; ow < g->Wo; ow++) {
            int64_t h0 = oh * g->kh, w0 = ow * g->kw, best = j->relu ? -1 : h0 * g->W + w0;
            T v = j->relu ? (T)0 : x[best];
            for (int64_t h = h0; h < h0 + g->kh; h++) for (int64_t w = w0; w < w0 + g->kw; w++)
                if (x[h * g->W + w] > v) { v = x[h * g->W + w]; best = h * g->W + w; }
            T gv = dy[oh * g->Wo + ow];
            if (add) { if (best >= 0) dx[best] += gv; continue; }
            for (int64_t h = h0; h < h0 + g->kh; h++) for (int64_t w = w0; w < w0 + g->kw; w++) dx[h * g->W + w] = 0;
            if (best >= 0) dx[best] = gv;
        }
    });
}

/* bf16: job `f` (float32, req write) run plane by plane on float32
 * copies; x/y/dy/dx of the caller's job are bf16. */
typedef struct pool_bf16_job {
    pjob f;           /* the float32 job; its pointers are set per plane */
    nn_range_fn fn;   /* the float32 plane kernel */
    const uint16_t *x, *dy;
    uint16_t *y, *dx;
    int32_t req;
    int backward;
    atomic_int st;
} pool_bf16_job;

static void pool_bf16_range(void *arg, int64_t b, int64_t e) {
    pool_bf16_job *j = arg;
    const pgeom *g = &j->f.g;
    int64_t in_n = g->H * g->W, out_n = g->Ho * g->Wo;
    float *buf = nn_alloc((uint64_t)(2 * in_n + out_n) * sizeof(float) + 64);
    if (!buf) {
        nn_bf16_job_fail(&j->st, NN_ERR(MXP_ENOMEM, "Pooling (bf16): out of memory"));
        return;
    }
    float *xs = buf, *ins = buf + in_n, *outs = ins + in_n; /* ins: dx (backward) */
    for (int64_t pl = b; pl < e; pl++) {
        pjob sub = j->f;
        sub.req = MXP_REQ_WRITE;
        if (j->x) {
            nn_bf16_widen(j->x + pl * in_n, xs, in_n);
            sub.x = xs;
        }
        if (!j->backward) {
            sub.y = outs;
            j->fn(&sub, 0, 1);
            nn_bf16_store(j->req, outs, j->y + pl * out_n, out_n);
        } else {
            nn_bf16_widen(j->dy + pl * out_n, outs, out_n);
            sub.dy = outs;
            sub.dx = ins;
            j->fn(&sub, 0, 1);
            nn_bf16_store(j->req, ins, j->dx + pl * in_n, in_n);
        }
    }
    nn_free(buf);
}

static int pool_run_bf16(const mxp_op_ctx *ctx, const pjob *f, nn_range_fn fn, int backward) {
    pool_bf16_job j;
    memset(&j, 0, sizeof j);
    j.f = *f;
    j.f.dt = MXP_DTYPE_F32;
    j.fn = fn;
    j.x = f->x; j.dy = f->dy; j.y = f->y; j.dx = f->dx;
    j.req = f->req;
    j.backward = backward;
    atomic_init(&j.st, MXP_OK);
    int st = nn_parallel(ctx, f->g.N * f->g.C, 1, pool_bf16_range, &j);
    return st < 0 ? st : atomic_load(&j.st);
}

static int pool_run_forward(const mxp_forward_args *a, int relu) {
    int32_t dt; int st;
    if (a->in[0].dtype == MXP_DTYPE_BF16) {
        if (a->out[0].dtype != MXP_DTYPE_BF16) return NN_ERR(MXP_ETYPE, "Pooling: bfloat16 data, output dtype %d", a->out[0].dtype);
        dt = MXP_DTYPE_BF16;
    } else if ((st = nn_check_float("Pooling", a->in, 1, &dt)) < 0) return st;
    if ((st = nn_check_contig("Pooling", a->in, 1)) < 0 || (st = nn_check_contig("Pooling", a->out, 1)) < 0) return st;
    if (a->in[0].ndim != 4) return NN_ERR(MXP_ESHAPE, "Pooling: data must be 4-D");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    pjob j; memset(&j, 0, sizeof j);
    pool_geom(a->params, a->in[0].shape, &j.g, 0);
    j.dt = dt; j.req = a->req[0]; j.relu = relu; j.x = nn_ptr(&a->in[0]); j.y = nn_ptr(&a->out[0]);
    nn_range_fn fn = pool_disjoint_max(&j.g) ? pool_fwd_disjoint_range : pool_fwd_range;
    if (dt == MXP_DTYPE_BF16) return pool_run_bf16(a->ctx, &j, fn, 0);
    return nn_parallel(a->ctx, j.g.N * j.g.C, 1, fn, &j);
}

static int pool_run_backward(const mxp_backward_args *a, int relu) {
    int st;
    if (a->out_grad[0].dtype == MXP_DTYPE_BF16 &&
        (a->in_grad[0].dtype != MXP_DTYPE_BF16 || (a->in[0].data && a->in[0].dtype != MXP_DTYPE_BF16)))
        return NN_ERR(MXP_ETYPE, "Pooling: bfloat16 output gradient with data / data gradient of dtype %d / %d",
                      a->in[0].dtype, a->in_grad[0].dtype);
    if ((st = nn_check_contig("Pooling", a->in_grad, 1)) < 0 || (st = nn_check_contig("Pooling", a->out_grad, 1)) < 0) return st;
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    pjob j; memset(&j, 0, sizeof j);
    pool_geom(a->params, a->in_grad[0].shape, &j.g, 0);
    j.dt = a->out_grad[0].dtype; j.req = a->req[0]; j.relu = relu; j.x = nn_ptr(&a->in[0]);
    j.dy = nn_ptr(&a->out_grad[0]); j.dx = nn_ptr(&a->in_grad[0]);
    if (j.g.type == POOL_MAX && !j.x) return NN_ERR(MXP_EINVAL, "Pooling: max backward needs data");
    nn_range_fn fn = pool_disjoint_max(&j.g) ? pool_bwd_disjoint_range : pool_bwd_range;
    if (j.dt == MXP_DTYPE_BF16) return pool_run_bf16(a->ctx, &j, fn, 1);
    return nn_parallel(a->ctx, j.g.N * j.g.C, 1, fn, &j);
}

static int pool_forward(const mxp_forward_args *a) { return pool_run_forward(a, 0); }
static int pool_backward(const mxp_backward_args *a) { return pool_run_backward(a, 0); }

static int pool_declare_backward(mxp_backward_deps_args *a) {
    const pool_params *p = a->params;
    a->need_in[0] = p->pool_type == POOL_MAX;
    a->need_out[0] = 0;
    return MXP_OK;
}

static const mxp_op_def pool_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "Pooling",
    .doc = "Performs pooling on the input (1-D NCW, 2-D NCHW, 3-D NCDHW).",
    .params = pool_schema, .n_params = NN_COUNT(pool_schema), .params_size = sizeof(pool_params),
    .arg_names = pool_args, .infer_shape = pool_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .declare_backward = pool_declare_backward,
    .check_params = pool_check_params,
};
static int pool_supports(mxp_impl_query_args *a) {
    if (a->in_shapes[0].ndim != 4) {
        snprintf(a->reason, a->reason_size, "default: 2-D (4-D NCHW data) only; impl nd serves 1-D/3-D");
        return 0;
    }
    return 1;
}

static const mxp_op_impl pool_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Pooling", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .supports = pool_supports, .forward = pool_forward, .backward = pool_backward,
};

/* ------------------------------------------------- _mxp_ReLUPooling */
/* Pooling(relu(x)) for max pooling on 2-D (NCHW) data: the executor's
 * fusion pass (runtime/src/executor/fuse.c) puts it in place of a ReLU
 * read only by a max Pooling (LeNet's conv -> relu -> pool), so the ReLU
 * costs no pass of its own, forward or backward, and its output is no
 * longer stored.  Pooling's params and data; results equal the two ops'
 * exactly (no arithmetic, only the same compares): the forward's scan
 * starts from 0 instead of the lowest value, and the backward routes dy to
 * the first maximum only when it is > 0 (pjob.relu). */
static int relu_pool_check_params(mxp_check_params_args *a) {
    int st = pool_check_params(a);
    const pool_params *p = a->params;
    if (st < 0) return st;
    if (p->pool_type != POOL_MAX) return NN_ERR(MXP_EUNSUPPORTED, "_mxp_ReLUPooling: pool_type max only");
    if (!p->global_pool && p->kernel.ndim != 2)
        return NN_ERR(MXP_EUNSUPPORTED, "_mxp_ReLUPooling: 2-D kernels only (got %d-D)", p->kernel.ndim);
    return MXP_OK;
}
static int relu_pool_forward(const mxp_forward_args *a) { return pool_run_forward(a, 1); }
static int relu_pool_backward(const mxp_backward_args *a) { return pool_run_backward(a, 1); }

static const mxp_op_def relu_pool_def = {
    .hdr = MXP_HEADER(mxp_op_def), .name = "_mxp_ReLUPooling",
    .doc = "Max Pooling of max(data, 0) in one op (made by the executor's fusion pass from Activation relu + Pooling).",
    .params = pool_schema, .n_params = NN_COUNT(pool_schema), .params_size = sizeof(pool_params),
    .arg_names = pool_args, .infer_shape = pool_infer_shape,
    .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA,
    .check_params = relu_pool_check_params,
};
static const mxp_op_impl relu_pool_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "_mxp_ReLUPooling", .impl_name = "default", .device = "cpu",
    .rank = MXP_RANK_PRIMARY, .supports = pool_supports, .forward = relu_pool_forward, .backward = relu_pool_backward,
};

int nn_register_pooling(mxp_registrar *r) {
    int st = r->add_op(r, &pool_def);
    if (st >= 0) st = r->add_impl(r, &pool_impl);
    if (st >= 0) st = r->add_impl(r, &pool_nd_impl);
    if (st >= 0) st = r->add_op(r, &relu_pool_def);
    return st < 0 ? st : r->add_impl(r, &relu_pool_impl);
}
