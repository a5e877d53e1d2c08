/* conv_direct.c — Convolution impl "direct": float32 direct convolution
 * without im2col or BLAS, forward and backward (data, weight, bias).
 *
 *   - stride 1 (any kernel, pad, dilation, groups), except the 1x1 forward:
 *     conv_direct_fast.c (kw-shifted input copies, register-blocked
 *     kernels for forward, data gradient and weight gradient).
 *   - 1x1 stride-1 unpadded forward: a channel loop vectorized over pixels,
 *     8 output channels x 16 pixels of accumulators per step (weights packed
 *     [c][8]) on the shared microkernel.
 *   - stride > 1: the gemm impl's passes (im2col + OpenBLAS).  direct's
 *     own were plain loops, 30-80x slower on ResNet's downsampling layers,
 *     and `tune` timed them (two passes of warm-up + 3 runs, ~1.4 s per
 *     layer) on every first step of a training run.
 * The vector kernels are compiled for AVX-512F, AVX2 and baseline x86-64
 * (target_clones, resolved at load), so the pack needs no CPU requirement.
 * Workspace: gemm's for strides > 1; for stride-1 training, what
 * conv_direct_fast.c asks for (shifted copies of x). */
#include "conv_direct_fast.h"

#define MR 8
#define VL 16

typedef struct dgeom {
    conv_geom g;
    int pointwise, s1;
    int64_t nk;
} dgeom;

static void dgeom_init(dgeom *d, const conv_geom *g) {
    memset(d, 0, sizeof *d);
    d->g = *g;
    d->s1 = g->sh == 1 && g->sw == 1;
    d->pointwise = d->s1 && g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0;
    d->nk = g->kh * g->kw;
}

/* Workspace: the stride-1 paths' or, for strides > 1, gemm's. */
static uint64_t direct_ws(const dgeom *d, const conv_params *p, int is_train) {
    if (d->s1) return dfast_workspace(&d->g, is_train);
    return conv_gemm_workspace_bytes(&d->g, p, MXP_DTYPE_F32);
}
/* ------------------------------------------------------ forward */
typedef struct fjob {
    const dgeom *d;
    const float *x, *wpk, *bias;
    float *y;
    int64_t nmb, chunks, qchunk;
    int32_t req;
} fjob;

/* packed weights: wpk[g][mb][c][k][MR] (zero for m beyond Mg) */
static float *pack_weights(const conv_geom *g, const float *w, int64_t *nmb_out) {
    int64_t nmb = (g->Mg + MR - 1) / MR, nk = g->kh * g->kw;
    float *p = nn_alloc((uint64_t)(g->G * nmb * g->Cg * nk * MR) * sizeof(float));
    if (!p) return NULL;
    memset(p, 0, (size_t)(g->G * nmb * g->Cg * nk * MR) * sizeof(float));
    for (int64_t m = 0; m < g->M; m++) {
        int64_t gr = m / g->Mg, mm = m % g->Mg, mb = mm / MR, i = mm % MR;
        for (int64_t c = 0; c < g->Cg; c++) for (int64_t k = 0; k < nk; k++)
            p[((((gr * nmb + mb) * g->Cg + c) * nk + k) * MR) + i] = w[(m * g->Cg + c) * nk + k];
    }
    *nmb_out = nmb;
    return p;
}

static inline void put(float *dst, float v, int32_t req) { if (req == MXP_REQ_ADD) *dst += v; else *dst = v; }

/* 1x1: items (n, group, pixel-chunk) */
static void fwd_pw_range(void *arg, int64_t b, int64_t e) {
    const fjob *j = arg; const dgeom *d = j->d; const conv_geom *g = &d->g;
    int64_t zero = 0;
    float out[MR * VL];
    for (int64_t it = b; it < e; it++) {
        int64_t ch = it % j->chunks, ng = it / j->chunks, gr = ng % g->G, n = ng / g->G;
        const float *x = j->x + (n * g->C + gr * g->Cg) * g->P;
        int64_t p0 = ch * j->qchunk, p1 = p0 + j->qchunk < g->P ? p0 + j->qchunk : g->P;
        int64_t pv = p0 + (p1 - p0) / VL * VL;
        for (int64_t p = p0; p < pv; p += VL) {  /* pixels outer: the x tile stays in L1 across mb */
            for (int64_t mb = 0; mb < j->nmb; mb++) {
                const float *wpk = j->wpk + (gr * j->nmb + mb) * g->Cg * MR;
                int64_t mcount = g->Mg - mb * MR < MR ? g->Mg - mb * MR : MR;
                conv_mk_8x16(x + p, g->P, g->Cg, 1, &zero, wpk, out, VL);
                for (int64_t i = 0; i < mcount; i++) {
                    int64_t m = gr * g->Mg + mb * MR + i;
                    float bv = j->bias ? j->bias[m] : 0.0f;
                    float *yp = j->y + (n * g->M + m) * g->P + p;
                    if (j->req == MXP_REQ_ADD) for (int l = 0; l < VL; l++) yp[l] += out[i * VL + l] + bv;
                    else for (int l = 0; l < VL; l++) yp[l] = out[i * VL + l] + bv;
                }
            }
        }
        for (int64_t mb = 0; mb < j->nmb; mb++) {
            const float *wpk = j->wpk + (gr * j->nmb + mb) * g->Cg * MR;
            int64_t mcount = g->Mg - mb * MR < MR ? g->Mg - mb * MR : MR;
            for (int64_t p = pv; p < p1; p++) /* tail pixels */
                for (int64_t i = 0; i < mcount; i++) {
                    int64_t m = gr * g->Mg + mb * MR + i;
                    float acc = j->bias ? j->bias[m] : 0.0f;
                    for (int64_t c = 0; c < g->Cg; c++) acc += wpk[c * MR + i] * x[c * g->P + p];
                    put(&j->y[(n * g->M + m) * g->P + p], acc, j->req);
                }
        }
    }
}

static int direct_forward(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(direct): float32 only");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in[0]);
    dgeom d; dgeom_init(&d, &g);
    if (g.kh * g.kw > 256) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(direct): kernel larger than 256 taps");
    if (!d.s1) return conv_gemm_forward_impl(a);
    if (a->ctx->workspace_bytes < direct_ws(&d, p, 0))
        return NN_ERR(MXP_EINVAL, "Convolution(direct): workspace too small");
    const float *x = nn_ptr(&a->in[0]), *w = nn_ptr(&a->in[1]), *bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    float *y = nn_ptr(&a->out[0]);
    if (!d.pointwise) return dfast_forward(a, &g);
    int64_t nmb;
    float *wpk = pack_weights(&g, w, &nmb);
    if (!wpk) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory for packed weights");
    fjob j = { &d, x, wpk, bias, y, nmb, 1, 0, a->req[0] };
    int64_t target = 1024; /* pixels per chunk: enough work per item, many items */
    j.qchunk = g.P < target ? (g.P + VL - 1) / VL * VL : target;
    j.chunks = (g.P + j.qchunk - 1) / j.qchunk;
    st = nn_parallel(a->ctx, g.N * g.G * j.chunks, 1, fwd_pw_range, &j);
    nn_free(wpk);
    return st;
}

/* ------------------------------------------------------ backward */
static int direct_backward(const mxp_backward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(direct): float32 only");
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in_grad[0]);
    dgeom d; dgeom_init(&d, &g);
    if (g.kh * g.kw > 256) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(direct): kernel larger than 256 taps");
    return d.s1 ? dfast_backward(a, &g) : conv_gemm_backward_impl(a, 0);
}

static int direct_supports(mxp_impl_query_args *a) {
    const conv_params *p = a->params;
    if (!conv_supports_2d(a, "direct")) return 0;
    if (a->in_dtypes[0] != MXP_DTYPE_F32) {
        snprintf(a->reason, a->reason_size, "direct: float32 only"); return 0;
    }
    if (p->kernel.dims[0] * p->kernel.dims[1] > 256) {
        snprintf(a->reason, a->reason_size, "direct: kernels up to 256 taps"); return 0;
    }
    return 1;
}

static int direct_workspace(mxp_impl_query_args *a) {
    conv_geom g; conv_geom_init(&g, a->params, &a->in_shapes[0]);
    dgeom d; dgeom_init(&d, &g);
    a->workspace_bytes = direct_ws(&d, a->params, a->is_train);
    return MXP_OK;
}

const mxp_op_impl conv_direct_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "direct", .device = "cpu",
    .rank = MXP_RANK_SECONDARY, .doc = "vectorized direct convolution (register-blocked kernels on shifted input copies; 1x1 channel loop), float32",
    .supports = direct_supports, .workspace = direct_workspace,
    .forward = direct_forward, .backward = direct_backward,
};
