/* conv_winograd.c — Convolution impl "winograd": F(4x4,3x3) for float32
 * 3x3 kernels with stride 1, dilation 1 and pad <= 2 (any groups), forward
 * and backward (data, weight, bias gradients).  Its `supports` refuses every
 * other configuration and says why.  The vector kernels (transforms, the
 * 8-row product) are in conv_winograd_kern.c; the weight gradient is in
 * conv_winograd_wgrad.c.
 *
 * Forward: the output is cut into 4x4 tiles, numbered over (sample, tile
 * row, tile column), and the tiles into chunks of `tc` (a multiple of 16)
 * sized so a chunk's transformed data stays in L2.  Chunks are parallel_for
 * items; per chunk and group:
 *   V[xi][c][t]  = (Bᵀ d B)[xi]        16 tiles per vector (lane = tile):
 *                                      per channel, each sample's rows of
 *                                      the chunk are staged zero-padded,
 *                                      then gathered 16 tiles at a time
 *                                      with in-register transposes
 *   per 8 output channels mb:
 *     M[xi][i][t] = Σ_c U[xi][mb][c][i] V[xi][c][t]   36 register-blocked
 *                                      GEMMs (8 x tc, K = Cg)
 *     y tiles     = Aᵀ M A (+ bias)    scattered to NCHW, req honoured
 * U (= G g Gᵀ, packed 8 output channels at a time, zero-padded) is
 * computed once per call.  Each chunk touches only its own output tiles,
 * so no two threads write one value.
 * Backward data is the same pipeline on dy with the kernels flipped and
 * transposed (C <-> M) and pad 2-p (hence pad <= 2).  The weight gradient
 * (and with it the bias gradient) is computed in the winograd domain
 * (conv_winograd_wgrad.c).
 * Everything allocates its scratch from the host pool (no workspace);
 * float32 only (`supports` refuses float64: the gemm impl serves it). */
#include "conv.h"
#include "conv_winograd.h"
#include "nn_simd.h"

#include <stdatomic.h>


/* ---- plan ---- */

void wino_plan_make(wplan *p, int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t G,
                    int64_t ph, int64_t pw, int64_t chunk_bytes, int64_t tile_bytes) {
    memset(p, 0, sizeof *p);
    p->N = N; p->C = C; p->H = H; p->W = W; p->M = M; p->G = G; p->Cg = C / G; p->Mg = M / G;
    p->ph = ph; p->pw = pw; p->Ho = H + 2 * ph - 2; p->Wo = W + 2 * pw - 2;
    p->th = (p->Ho + 3) / 4; p->tw = (p->Wo + 3) / 4; p->T = N * p->th * p->tw;
    p->nmb = (p->Mg + 7) / 8; p->Mgp = p->nmb * 8;
    int64_t tc = chunk_bytes / (tile_bytes > 0 ? tile_bytes : 36 * 4 * p->Cg) / 16 * 16;
    if (tc < 16) tc = 16;
    if (tc > 384) tc = 384;
    int64_t tall = (p->T + 15) / 16 * 16;
    if (tc > tall) tc = tall;
    /* at least 4 chunks when there are tiles for it (two threads, dynamic balance) */
    while (tc > 16 && (p->T + tc - 1) / tc < 4) tc -= 16;
    /* A chunk count that is not a multiple of 4 leaves a thread idle at the
     * end (11 chunks of ResNet-20's 32x32 layers: 6 against 5 on two
     * threads; the weight gradient's 4 parts get unequal chunk counts):
     * round it up and shrink the chunks to match. */
    int64_t nc = (p->T + tc - 1) / tc;
    if (nc > 4 && nc % 4) {
        int64_t want = (nc + 3) / 4 * 4, t2 = ((p->T + want - 1) / want + 15) / 16 * 16;
        if (t2 >= 16 && t2 < tc) tc = t2;
    }
    p->tc = tc;
    p->nchunk = (p->T + tc - 1) / tc;
}

void wino_tiles_decode(const wplan *p, int64_t t0, int64_t nt, wtile *tl) {
    int64_t per = p->th * p->tw, ih0 = 0;
    for (int64_t i = 0; i < nt; i++) {
        int64_t t = t0 + i, n = t / per, r = t % per, ty = r / p->tw, tx = r % p->tw;
        tl[i].n = n; tl[i].oh = 4 * ty; tl[i].ow = 4 * tx;
        tl[i].ih = 4 * ty - p->ph; tl[i].iw = 4 * tx - p->pw;
        if (i == 0 || n != tl[i - 1].n) ih0 = tl[i].ih;
        tl[i].srow = tl[i].ih - ih0;
        tl[i].rend = (n + 1) * per - t0 < nt ? (n + 1) * per - t0 : nt;
    }
}

/* Copies n floats 4 at a time: inline, since a libc memcpy call costs as
 * much as the 8-32 float rows of the small maps it copies (4-float vectors:
 * this file is built for baseline x86-64, where wider GCC vectors go
 * through the stack). */
static inline void copy_row(float *d, const float *s, int64_t n) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) *(v4u *)(void *)(d + j) = *(const v4u *)(const void *)(s + j);
    for (; j < n; j++) d[j] = s[j];
}

void wino_stage(const float *plane, int64_t H, int64_t W, int64_t h0, int64_t pad, int rows, int64_t ld,
                float *dst, int zero) {
    for (int i = 0; i < rows; i++, dst += ld) {
        int64_t h = h0 + i;
        if (h < 0 || h >= H) { if (zero) memset(dst, 0, (size_t)ld * sizeof(float)); continue; }
        if (zero) {
            for (int64_t c = 0; c < pad; c++) dst[c] = 0.0f;
            for (int64_t c = pad + W; c < ld; c++) dst[c] = 0.0f;
        }
        copy_row(dst + pad, plane + h * W, W);
    }
}

/* ---- weight transform: U[g][xi][ob][i][k8] for output channel o = ob*8+k8
 * and input channel i (per group), zero for padded o.  flip: the filter of
 * (o, i) is the 180°-rotated forward filter of (output i, input o) — the
 * data-gradient pass, where o runs over forward input channels. ---- */
typedef struct ujob { const wplan *p; const float *wt; float *U; int flip; } ujob;
/* Items (g, ob): 8 output channels at once (one per vector lane in
 * wino_wt_tf8), so each U[g][xi][ob][i][0..8) is one 32-byte store
 * (scattered float stores over the 36 frequency planes thrash the cache). */
static void u_range(void *arg, int64_t b, int64_t e) {
    const ujob *j = arg; const wplan *p = j->p;
    int64_t Og = p->Mg, Ig = p->Cg; /* of this pass */
    float k[72];
    for (int64_t it = b; it < e; it++) {
        int64_t g = it / p->nmb, ob = it % p->nmb, nl = Og - ob * 8 < 8 ? Og - ob * 8 : 8;
        if (nl < 8) memset(k, 0, sizeof k);
        for (int64_t i = 0; i < Ig; i++) {
            for (int64_t l = 0; l < nl; l++) {
                int64_t o = ob * 8 + l;
                if (!j->flip) {
                    const float *w = j->wt + ((g * Og + o) * Ig + i) * 9;
                    for (int q = 0; q < 9; q++) k[q * 8 + l] = w[q];
                } else {
                    const float *w = j->wt + ((g * Ig + i) * Og + o) * 9;
                    for (int q = 0; q < 9; q++) k[q * 8 + l] = w[8 - q];
                }
            }
            wino_wt_tf8(k, j->U + ((g * 36 * p->nmb + ob) * Ig + i) * 8, p->nmb * Ig * 8);
        }
    }
}

/* U for plan p from forward weights wt ([G*Mg][Cg][3][3] of the pass when
 * !flip); NULL on allocation failure. */
static float *weights_transform(const mxp_op_ctx *ctx, const wplan *p, const float *wt, int flip) {
    uint64_t n = 36ull * (uint64_t)(p->G * p->Mgp * p->Cg);
    float *U = nn_alloc(n * sizeof(float));
    if (!U) return NULL;
    ujob j = { p, wt, U, flip };
    if (nn_parallel(ctx, p->G * p->nmb, 1, u_range, &j) != MXP_OK) {
        nn_free(U);
        return NULL;
    }
    return U;
}

/* ---- forward pipeline ---- */
typedef struct fjob {
    const wplan *p;
    const float *x, *U, *bias;
    float *y;
    int32_t req;
    atomic_int failed;      /* a chunk could not get its scratch */
} fjob;

/* V[xi][c][ld] for the chunk's tiles: per channel, the input rows of each
 * sample's run of tiles are staged zero-padded (no bounds checks in the
 * gather, each row copied once), then 16 tiles at a time are gathered and
 * transformed in registers.  Lanes beyond nt read staged data (finite) and
 * only feed output columns nobody stores. */
void wino_input_chunk(const wplan *p, const float *x, int64_t g, const wtile *tl, int64_t nt, int64_t ld, int64_t cs,
                      float *V, float *st, const float **tp) {
    uint64_t plane = (uint64_t)(p->H * p->W);
    int64_t Wp = wino_stage_w(p);
    const float *src[16];
    for (int64_t c = 0; c < p->Cg; c++) {
        float *dst = st;
        for (int64_t i = 0, e, rows; i < nt; i = e) {
            e = wino_run_end(tl, i, nt, &rows);
            wino_stage(x + (uint64_t)(tl[i].n * p->C + g * p->Cg + c) * plane, p->H, p->W, tl[i].ih, p->pw, (int)rows,
                       Wp, dst, c == 0);
            if (c == 0) for (int64_t k = i; k < e; k++) tp[k] = dst + tl[k].srow * Wp + tl[k].ow;
            dst += rows * Wp;
        }
        if (c + 1 < p->Cg)
            for (int64_t i = 0, e, rows; i < nt; i = e) {
                e = wino_run_end(tl, i, nt, &rows);
                wino_prefetch_rows(x + (uint64_t)(tl[i].n * p->C + g * p->Cg + c + 1) * plane, p->H, p->W, tl[i].ih, rows);
            }
        for (int64_t l0 = 0; l0 < ld; l0 += 16) {
            /* two runs of 8 adjacent tiles (every group of a 32-wide map)
             * or four of 4 (a 16-wide map; wino_runs_of): their rows reach
             * column 4*7 + 8 (4*3 + 8) <= Wp */
            if (l0 + 16 <= nt && wino_runs_of(tp + l0, 8)) {
                wino_in_tf16_rows8(tp[l0], tp[l0 + 8], Wp, V + c * ld + l0, cs * ld);
                continue;
            }
            if (l0 + 16 <= nt && wino_runs_of(tp + l0, 4)) {
                const float *run[4] = { tp[l0], tp[l0 + 4], tp[l0 + 8], tp[l0 + 12] };
                wino_in_tf16_rows4(run, Wp, V + c * ld + l0, cs * ld);
                continue;
            }
            for (int64_t l = 0; l < 16; l++) src[l] = l0 + l < nt ? tp[l0 + l] : st;
            wino_in_tf16(src, Wp, V + c * ld + l0, cs * ld);
        }
    }
}

/* dst[k] (= or +=) src[k] + bv for k < n. */
static inline void put_row(float *dst, const float *src, int64_t n, float bv, int add) {
    int64_t k = 0;
    if (add) {
        for (; k + 4 <= n; k += 4)
            *(v4u *)(void *)(dst + k) = *(const v4u *)(const void *)(dst + k) + *(const v4u *)(const void *)(src + k) + bv;
        for (; k < n; k++) dst[k] += src[k] + bv;
    } else {
        for (; k + 4 <= n; k += 4) *(v4u *)(void *)(dst + k) = *(const v4u *)(const void *)(src + k) + bv;
        for (; k < n; k++) dst[k] = src[k] + bv;
    }
}

/* y tiles of output channels mb*8.. from Mx[xi][8][ld]; o: 256 floats.
 * The transform gives rows of 16 tiles (wino_out_tf16r), so a run of
 * whole tiles along one tile row is stored 4 rows at a time, each row one
 * contiguous segment; ragged tiles (the right and bottom edges) are stored
 * tile by tile. */
static void output_chunk(const fjob *j, int64_t g, int64_t mb, const wtile *tl, int64_t nt, int64_t ld,
                         const float *Mx, float *o) {
    const wplan *p = j->p;
    uint64_t plane = (uint64_t)(p->Ho * p->Wo);
    int add = j->req == MXP_REQ_ADD;
    for (int64_t i = 0; i < 8 && mb * 8 + i < p->Mg; i++) {
        int64_t mo = g * p->Mg + mb * 8 + i;
        float bv = j->bias ? j->bias[mo] : 0.0f;
        for (int64_t l0 = 0; l0 < nt; l0 += 16) {
            wino_out_tf16r(Mx + i * ld + l0, 8 * ld, o);
            int64_t nl = nt - l0 < 16 ? nt - l0 : 16;
            for (int64_t l = 0, e; l < nl; l = e) {
                const wtile *t = &tl[l0 + l];
                float *yp = j->y + (uint64_t)(t->n * p->M + mo) * plane + t->oh * p->Wo + t->ow;
                const float *s = o + l * 4;
                e = l + 1;
                if (t->oh + 4 <= p->Ho && t->ow + 4 <= p->Wo) { /* whole tiles l..e-1 of one tile row */
                    while (e < nl && tl[l0 + e].oh == t->oh && tl[l0 + e].n == t->n && tl[l0 + e].ow + 4 <= p->Wo) e++;
                    for (int r = 0; r < 4; r++) put_row(yp + r * p->Wo, s + r * 64, 4 * (e - l), bv, add);
                    continue;
                }
                int64_t nr = p->Ho - t->oh < 4 ? p->Ho - t->oh : 4, ncol = p->Wo - t->ow < 4 ? p->Wo - t->ow : 4;
                for (int64_t r = 0; r < nr; r++) put_row(yp + r * p->Wo, s + r * 64, ncol, bv, add);
            }
        }
    }
}

static void fwd_range(void *arg, int64_t b, int64_t e) {
    const fjob *j = arg; const wplan *p = j->p;
    int64_t tc = p->tc;
    uint64_t nV = 36ull * (uint64_t)(p->Cg * tc), nM = 36ull * 8 * (uint64_t)tc;
    uint64_t nS = (uint64_t)(wino_max_rows(p) * wino_stage_w(p));
    float *buf = nn_alloc((nV + nM + nS + 256) * sizeof(float) + (uint64_t)tc * (sizeof(wtile) + sizeof(float *)));
    if (!buf) { /* a chunk cannot return a status: run_forward reports it */
        atomic_store(&((fjob *)arg)->failed, 1);
        return;
    }
    float *V = buf, *Mx = V + nV, *st = Mx + nM, *tmp = st + nS;
    wtile *tl = (wtile *)(void *)(tmp + 256);
    const float **tp = (const float **)(void *)(tl + tc);
    for (int64_t ch = b; ch < e; ch++) {
        int64_t t0 = ch * tc, nt = p->T - t0 < tc ? p->T - t0 : tc, ld = (nt + 15) / 16 * 16;
        wino_tiles_decode(p, t0, nt, tl);
        for (int64_t g = 0; g < p->G; g++) {
            wino_input_chunk(p, j->x, g, tl, nt, ld, p->Cg, V, st, tp);
            for (int64_t mb = 0; mb < p->nmb; mb++) {
                for (int xi = 0; xi < 36; xi++)
                    wino_gemm8(p->Cg, j->U + ((g * 36 + xi) * p->nmb + mb) * p->Cg * 8, V + xi * p->Cg * ld, ld,
                               Mx + xi * 8 * ld, ld, ld, 0);
                output_chunk(j, g, mb, tl, nt, ld, Mx, tmp);
            }
        }
    }
    nn_free(buf);
}

/* y (req) = winograd conv of x with the weights of U. */
static int run_forward(const mxp_op_ctx *ctx, const wplan *p, const float *x, const float *U, const float *bias,
                       float *y, int32_t req) {
    fjob j = { p, x, U, bias, y, req, 0 };
    int st = nn_parallel(ctx, p->nchunk, 1, fwd_range, &j);
    if (st == MXP_OK && atomic_load(&j.failed))
        st = NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for a chunk's transform buffers");
    return st;
}

static int wino_forward(const mxp_forward_args *a) {
    const conv_params *cp = a->params;
    int32_t dt; int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(winograd): float32 only");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g; conv_geom_from_tensor(&g, cp, &a->in[0]);
    wplan p; wino_plan_make(&p, g.N, g.C, g.H, g.W, g.M, g.G, g.ph, g.pw, WINO_CHUNK_BYTES, 0);
    float *U = weights_transform(a->ctx, &p, nn_ptr(&a->in[1]), 0);
    if (!U) return NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for transformed weights");
    st = run_forward(a->ctx, &p, nn_ptr(&a->in[0]), U, cp->no_bias ? NULL : nn_ptr(&a->in[2]),
                     nn_ptr(&a->out[0]), a->req[0]);
    nn_free(U);
    return st;
}

static int wino_backward(const mxp_backward_args *a) {
    const conv_params *cp = a->params;
    int32_t dt; int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(winograd): float32 only");
    conv_geom g; conv_geom_from_tensor(&g, cp, &a->in_grad[0]);
    const float *dy = nn_ptr(&a->out_grad[0]);
    if (a->req[0] != MXP_REQ_NULL) {
        /* dx = conv(dy, W') with W'[g*Cg+c][m] = flip(W[g*Mg+m][c]), pad 2-p */
        wplan p; wino_plan_make(&p, g.N, g.M, g.Ho, g.Wo, g.C, g.G, 2 - g.ph, 2 - g.pw, WINO_CHUNK_BYTES, 0);
        float *U = weights_transform(a->ctx, &p, nn_ptr(&a->in[1]), 1);
        if (!U) return NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for transformed weights");
        st = run_forward(a->ctx, &p, dy, U, NULL, nn_ptr(&a->in_grad[0]), a->req[0]);
        nn_free(U);
        if (st < 0) return st;
    }
    int32_t rq_db = (!cp->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    if (a->req[1] != MXP_REQ_NULL) { /* the bias gradient comes along (dy is staged there anyway) */
        wplan p; wino_plan_make(&p, g.N, g.C, g.H, g.W, g.M, g.G, g.ph, g.pw, 0, 0);
        wino_wgrad_plan(&p);
        return wino_weight_grad(a->ctx, &p, nn_ptr(&a->in[0]), dy, nn_ptr(&a->in_grad[1]), a->req[1],
                                rq_db == MXP_REQ_NULL ? NULL : nn_ptr(&a->in_grad[2]), rq_db);
    }
    if (rq_db != MXP_REQ_NULL)
        return wino_bias_grad(a->ctx, g.N, g.M, g.Ho * g.Wo, dy, nn_ptr(&a->in_grad[2]), rq_db);
    return MXP_OK;
}

static int wino_supports(mxp_impl_query_args *a) {
    const conv_params *p = a->params;
    if (!conv_supports_2d(a, "winograd")) return 0;
    const char *why = NULL;
    if (a->in_dtypes[0] != MXP_DTYPE_F32) why = "float32 only";
    else if (p->kernel.dims[0] != 3 || p->kernel.dims[1] != 3) why = "needs a 3x3 kernel";
    else if (p->stride.dims[0] != 1 || p->stride.dims[1] != 1) why = "needs stride 1 (3x3 kernel)";
    else if (p->dilate.dims[0] != 1 || p->dilate.dims[1] != 1) why = "needs dilation 1 (3x3 kernel)";
    else if (p->pad.dims[0] > 2 || p->pad.dims[1] > 2) why = "needs pad <= 2 (3x3 kernel)";
    if (why) { snprintf(a->reason, a->reason_size, "winograd F(4x4,3x3): %s", why); return 0; }
    /* Under 4 input channels (a grayscale or RGB first layer) the tile
     * transforms outweigh the saved multiplies: direct and gemm were
     * faster on 64x1x32x32 and 64x3x32x32 (docs/io-image.md), so `auto`
     * should prefer them; tune and a named policy still run it. */
    int64_t cin = a->in_shapes[0].ndim == 4 ? a->in_shapes[0].dims[1] : -1;
    if (cin >= 1 && cin < 4 && mxp_host_supports_fallback(nn_host)) {
        snprintf(a->reason, a->reason_size, "winograd F(4x4,3x3): %lld input channel(s), the transforms dominate",
                 (long long)cin);
        return MXP_SUPPORTS_FALLBACK;
    }
    return 1;
}

const mxp_op_impl conv_winograd_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "winograd", .device = "cpu",
    /* Above gemm: where it applies (3x3, stride 1, float32) it was 2-3x
     * faster than gemm on the bench's 3x3 layers (docs/convolution.md), so
     * `auto` should take it. */
    .rank = MXP_RANK_PRIMARY + 64, .doc = "Winograd F(4x4,3x3), 3x3 stride 1 dilation 1 pad<=2, float32",
    .supports = wino_supports,
    .forward = wino_forward, .backward = wino_backward,
};
