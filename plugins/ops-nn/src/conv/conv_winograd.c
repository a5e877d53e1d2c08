/* conv_winograd.c — Convolution impl "winograd": F(2x2,3x3) for float32
 * 3x3 kernels with stride 1, dilation 1 and pad <= 2 (any groups).  Its
 * `supports` refuses every other configuration and says why.
 *
 * Forward, per block of nb samples and per group:
 *   U[xi][m][c] = (G g Gᵀ)[xi]          (16 x Mg x Cg, per call)
 *   V[xi][c][t] = (Bᵀ d B)[xi]          input tiles 4x4, stride 2
 *   M[xi]       = U[xi] · V[xi]         16 batched products, computed with
 *                                       the 8x16 FMA microkernel (no BLAS:
 *                                       OpenBLAS's own threads would fight
 *                                       the host's parallel_for workers)
 *   y tile      = Aᵀ M A                2x2 outputs per tile
 * The transforms are written row-wise (vertical part over whole rows, then
 * horizontal per tile) so the compiler vectorizes them.  Everything runs on
 * ctx->parallel_for: transforms over (sample, channel), products over
 * (xi, column chunk).  Row strides of V and M are padded to 16.
 * Backward data is the same algorithm on dy with the kernels flipped and
 * transposed and pad 2-p (hence pad <= 2); weight and bias gradients reuse
 * the gemm impl's code (conv_gemm_backward_impl with skip_dx), so the
 * workspace is the max of both needs. */
#include "conv.h"

#define WINO_CAP (16ull << 20)

typedef struct wgeom {
    int64_t N, C, H, W, M, G, Cg, Mg, ph, pw, Ho, Wo, th, tw, T, nb;
    int64_t nmb, Mgp, ldmax; /* 8-row blocks of Mg, Mg padded, padded row stride for nb samples */
} wgeom;
#define WCHUNK 256
static int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

static void wgeom_make(wgeom *w, int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t G,
                       int64_t ph, int64_t pw) {
    memset(w, 0, sizeof *w);
    w->N = N; w->C = C; w->H = H; w->W = W; w->M = M; w->G = G; w->Cg = C / G; w->Mg = M / G;
    w->ph = ph; w->pw = pw; w->Ho = H + 2 * ph - 2; w->Wo = W + 2 * pw - 2;
    w->th = (w->Ho + 1) / 2; w->tw = (w->Wo + 1) / 2; w->T = w->th * w->tw;
    uint64_t per = 16ull * (uint64_t)w->T * (uint64_t)(w->Cg + w->Mg) * 4;
    int64_t nb = (int64_t)(WINO_CAP / (per ? per : 1));
    w->nb = nb < 1 ? 1 : nb > N ? N : nb;
    w->nmb = (w->Mg + 7) / 8; w->Mgp = w->nmb * 8; w->ldmax = pad16(w->nb * w->T);
}
static uint64_t wgeom_ws(const wgeom *w) {
    return 4ull * (16ull * (uint64_t)(w->G * w->Mgp * w->Cg) + 16ull * (uint64_t)w->ldmax * (uint64_t)(w->Cg + w->Mgp) + 64);
}

/* ---- weight transform: U[g][xi][mb][c][8] (m = mb*8+i, zero padded)
 * from wt [M][Cg][3][3] ---- */
static void transform_weights(const wgeom *w, const float *wt, float *U) {
    memset(U, 0, (size_t)(w->G * 16 * w->Mgp * w->Cg) * sizeof(float));
    for (int64_t m = 0; m < w->M; m++) for (int64_t c = 0; c < w->Cg; c++) {
        const float *k = wt + (m * w->Cg + c) * 9;
        float t[4][3], u[4][4];
        for (int j = 0; j < 3; j++) {
            t[0][j] = k[j]; t[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
            t[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]); t[3][j] = k[6 + j];
        }
        for (int i = 0; i < 4; i++) {
            u[i][0] = t[i][0]; u[i][1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
            u[i][2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]); u[i][3] = t[i][2];
        }
        int64_t gr = m / w->Mg, mm = m % w->Mg, mb = mm / 8, i = mm % 8;
        for (int xi = 0; xi < 16; xi++)
            U[((((gr * 16 + xi) * w->nmb + mb) * w->Cg + c) * 8) + i] = u[xi / 4][xi % 4];
    }
}

typedef struct wjob {
    const wgeom *w;
    const float *x;   /* block's first sample */
    float *V, *Mx;
    float *y;
    const float *bias;
    int64_t nb, grp, ld;   /* ld: padded row stride of V and Mx */
    const float *U;
    int32_t req;
} wjob;

/* V[xi][c][s*T + t] for items (s, c) of the block. */
static void input_range(void *arg, int64_t b, int64_t e) {
    const wjob *j = arg; const wgeom *w = j->w;
    int64_t Hp = 2 * w->th + 2, Wp = 2 * w->tw + 2, ldv = j->ld;
    float *pl = nn_alloc((uint64_t)(Hp * Wp + 4 * Wp) * sizeof(float));
    if (!pl) return; /* cannot report from here; the caller checks allocation up front */
    float *t0 = pl + Hp * Wp, *t1 = t0 + Wp, *t2 = t1 + Wp, *t3 = t2 + Wp;
    for (int64_t it = b; it < e; it++) {
        int64_t s = it / w->Cg, c = it % w->Cg;
        const float *src = j->x + ((s * w->C + j->grp * w->Cg + c) * w->H) * w->W;
        memset(pl, 0, (size_t)(Hp * Wp) * sizeof(float));
        for (int64_t h = 0; h < w->H; h++) {
            int64_t ph = h + w->ph;
            if (ph >= Hp) break;
            int64_t n = w->W; if (w->pw + n > Wp) n = Wp - w->pw;
            memcpy(pl + ph * Wp + w->pw, src + h * w->W, (size_t)n * sizeof(float));
        }
        float *Vc = j->V + c * ldv + s * w->T;
        int64_t xs = w->Cg * ldv;
        for (int64_t ty = 0; ty < w->th; ty++) {
            const float *r0 = pl + 2 * ty * Wp, *r1 = r0 + Wp, *r2 = r1 + Wp, *r3 = r2 + Wp;
            for (int64_t q = 0; q < Wp; q++) {
                t0[q] = r0[q] - r2[q]; t1[q] = r1[q] + r2[q];
                t2[q] = r2[q] - r1[q]; t3[q] = r1[q] - r3[q];
            }
            const float *tr[4] = {t0, t1, t2, t3};
            for (int i = 0; i < 4; i++) {
                const float *tt = tr[i];
                float *v0 = Vc + (i * 4 + 0) * xs + ty * w->tw, *v1 = v0 + xs, *v2 = v1 + xs, *v3 = v2 + xs;
                for (int64_t tx = 0; tx < w->tw; tx++) {
                    float a0 = tt[2 * tx], a1 = tt[2 * tx + 1], a2 = tt[2 * tx + 2], a3 = tt[2 * tx + 3];
                    v0[tx] = a0 - a2; v1[tx] = a1 + a2; v2[tx] = a2 - a1; v3[tx] = a1 - a3;
                }
            }
        }
    }
    nn_free(pl);
}

/* y from Mx[xi][m][s*T + t] for items (s, m). */
static void output_range(void *arg, int64_t b, int64_t e) {
    const wjob *j = arg; const wgeom *w = j->w;
    int64_t ldm = j->ld, xs = w->Mgp * ldm, tw = w->tw;
    float *buf = nn_alloc((uint64_t)(8 * tw + 4 * tw) * sizeof(float));
    if (!buf) return;
    float *u0 = buf, *u1 = buf + 4 * tw, *row = buf + 8 * tw; /* u*: [4][tw]; row: [2][2tw] */
    for (int64_t it = b; it < e; it++) {
        int64_t s = it / w->Mg, m = it % w->Mg, mo = j->grp * w->Mg + m;
        float bv = j->bias ? j->bias[mo] : 0.0f;
        float *yp = j->y + (s * w->M + mo) * w->Ho * w->Wo;
        const float *Mm = j->Mx + m * ldm + s * w->T;
        for (int64_t ty = 0; ty < w->th; ty++) {
            for (int c = 0; c < 4; c++) {
                const float *a0 = Mm + (0 * 4 + c) * xs + ty * tw, *a1 = Mm + (1 * 4 + c) * xs + ty * tw;
                const float *a2 = Mm + (2 * 4 + c) * xs + ty * tw, *a3 = Mm + (3 * 4 + c) * xs + ty * tw;
                float *p0 = u0 + c * tw, *p1 = u1 + c * tw;
                for (int64_t tx = 0; tx < tw; tx++) { p0[tx] = a0[tx] + a1[tx] + a2[tx]; p1[tx] = a1[tx] - a2[tx] - a3[tx]; }
            }
            for (int64_t tx = 0; tx < tw; tx++) {
                row[2 * tx]          = u0[tx] + u0[tw + tx] + u0[2 * tw + tx] + bv;
                row[2 * tx + 1]      = u0[tw + tx] - u0[2 * tw + tx] - u0[3 * tw + tx] + bv;
                row[2 * tw + 2 * tx]     = u1[tx] + u1[tw + tx] + u1[2 * tw + tx] + bv;
                row[2 * tw + 2 * tx + 1] = u1[tw + tx] - u1[2 * tw + tx] - u1[3 * tw + tx] + bv;
            }
            for (int r = 0; r < 2; r++) {
                int64_t oh = 2 * ty + r;
                if (oh >= w->Ho) break;
                float *yr = yp + oh * w->Wo; const float *sr = row + r * 2 * tw;
                if (j->req == MXP_REQ_ADD) for (int64_t q = 0; q < w->Wo; q++) yr[q] += sr[q];
                else memcpy(yr, sr, (size_t)w->Wo * sizeof(float));
            }
        }
    }
    nn_free(buf);
}

/* Mx[xi][mb*8+i][t] = sum_c U[g][xi][mb][c][i] V[xi][c][t]; items (xi, chunk) */
static void product_range(void *arg, int64_t b, int64_t e) {
    const wjob *j = arg; const wgeom *w = j->w;
    int64_t nch = (j->ld + WCHUNK - 1) / WCHUNK, zero = 0;
    for (int64_t it = b; it < e; it++) {
        int64_t xi = it / nch, t0 = (it % nch) * WCHUNK, t1 = t0 + WCHUNK < j->ld ? t0 + WCHUNK : j->ld;
        const float *V = j->V + xi * w->Cg * j->ld;
        for (int64_t mb = 0; mb < w->nmb; mb++) {
            const float *U = j->U + ((j->grp * 16 + xi) * w->nmb + mb) * w->Cg * 8;
            float *Mo = j->Mx + (xi * w->Mgp + mb * 8) * j->ld;
            for (int64_t t = t0; t < t1; t += 16) conv_mk_8x16(V + t, j->ld, w->Cg, 1, &zero, U, Mo + t, j->ld);
        }
    }
}

/* y = winograd_conv(x, wt) (+ bias), honouring req. */
static int wino_run(const mxp_op_ctx *ctx, const wgeom *w, const float *x, const float *wt,
                    const float *bias, float *y, int32_t req) {
    if (ctx->workspace_bytes < wgeom_ws(w))
        return NN_ERR(MXP_EINVAL, "Convolution(winograd): workspace %llu bytes < %llu needed",
                      (unsigned long long)ctx->workspace_bytes, (unsigned long long)wgeom_ws(w));
    float *U = ctx->workspace;
    float *V = U + 16 * w->G * w->Mgp * w->Cg;
    float *Mx = V + 16 * w->Cg * w->ldmax + 16;
    transform_weights(w, wt, U);
    for (int64_t n0 = 0; n0 < w->N; n0 += w->nb) {
        int64_t nb = w->N - n0 < w->nb ? w->N - n0 : w->nb, ld = pad16(nb * w->T);
        for (int64_t gr = 0; gr < w->G; gr++) {
            wjob j = { w, x + n0 * w->C * w->H * w->W, V, Mx, y + n0 * w->M * w->Ho * w->Wo, bias, nb, gr, ld, U, req };
            /* padding columns of V feed only padding columns of Mx; zero them so no garbage (NaN) is computed */
            if (ld > nb * w->T) for (int64_t r = 0; r < 16 * w->Cg; r++)
                memset(V + r * ld + nb * w->T, 0, (size_t)(ld - nb * w->T) * sizeof(float));
            int st = nn_parallel(ctx, nb * w->Cg, 1, input_range, &j);
            if (st < 0) return st;
            if ((st = nn_parallel(ctx, 16 * ((ld + WCHUNK - 1) / WCHUNK), 1, product_range, &j)) < 0) return st;
            if ((st = nn_parallel(ctx, nb * w->Mg, 1, output_range, &j)) < 0) return st;
        }
    }
    return MXP_OK;
}

static int wino_forward(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(winograd): float32 only");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in[0]);
    wgeom w; wgeom_make(&w, g.N, g.C, g.H, g.W, g.M, g.G, g.ph, g.pw);
    return wino_run(a->ctx, &w, nn_ptr(&a->in[0]), nn_ptr(&a->in[1]),
                    p->no_bias ? NULL : nn_ptr(&a->in[2]), nn_ptr(&a->out[0]), a->req[0]);
}

static int wino_backward(const mxp_backward_args *a) {
    const conv_params *p = a->params;
    int32_t dt; int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(winograd): float32 only");
    conv_geom g; conv_geom_from_tensor(&g, p, &a->in_grad[0]);
    if (a->req[0] != MXP_REQ_NULL) {
        /* dx = conv(dy, W') with W'[g*Cg+c][m] = flip(W[g*Mg+m][c]), pad 2-p */
        wgeom w; wgeom_make(&w, g.N, g.M, g.Ho, g.Wo, g.C, g.G, 2 - g.ph, 2 - g.pw);
        float *wf = nn_alloc((uint64_t)(g.M * g.Cg * 9) * sizeof(float));
        if (!wf) return NN_ERR(MXP_ENOMEM, "Convolution(winograd): no memory for flipped weights");
        const float *wt = nn_ptr(&a->in[1]);
        for (int64_t gr = 0; gr < g.G; gr++) for (int64_t m = 0; m < g.Mg; m++) for (int64_t c = 0; c < g.Cg; c++)
            for (int k = 0; k < 9; k++)
                wf[((gr * g.Cg + c) * g.Mg + m) * 9 + k] = wt[((gr * g.Mg + m) * g.Cg + c) * 9 + (8 - k)];
        st = wino_run(a->ctx, &w, nn_ptr(&a->out_grad[0]), wf, NULL, nn_ptr(&a->in_grad[0]), a->req[0]);
        nn_free(wf);
        if (st < 0) return st;
    }
    return conv_gemm_backward_impl(a, 1);
}

static int wino_supports(mxp_impl_query_args *a) {
    const conv_params *p = a->params;
    const char *why = NULL;
    if (a->in_dtypes[0] != MXP_DTYPE_F32) why = "float32 only";
    else if (p->kernel.dims[0] != 3 || p->kernel.dims[1] != 3) why = "needs a 3x3 kernel";
    else if (p->stride.dims[0] != 1 || p->stride.dims[1] != 1) why = "needs stride 1 (3x3 kernel)";
    else if (p->dilate.dims[0] != 1 || p->dilate.dims[1] != 1) why = "needs dilation 1 (3x3 kernel)";
    else if (p->pad.dims[0] > 2 || p->pad.dims[1] > 2) why = "needs pad <= 2 (3x3 kernel)";
    if (why) { snprintf(a->reason, a->reason_size, "winograd F(2x2,3x3): %s", why); return 0; }
    return 1;
}

static int wino_workspace(mxp_impl_query_args *a) {
    conv_geom g; conv_geom_init(&g, a->params, &a->in_shapes[0]);
    wgeom f, b; wgeom_make(&f, g.N, g.C, g.H, g.W, g.M, g.G, g.ph, g.pw);
    wgeom_make(&b, g.N, g.M, g.Ho, g.Wo, g.C, g.G, 2 - g.ph, 2 - g.pw);
    uint64_t ws = wgeom_ws(&f);
    if (a->is_train) {
        if (wgeom_ws(&b) > ws) ws = wgeom_ws(&b);
        uint64_t gw = conv_gemm_workspace_bytes(&g, a->params, a->in_dtypes[0]);
        if (gw > ws) ws = gw;
    }
    a->workspace_bytes = ws;
    return MXP_OK;
}

const mxp_op_impl conv_winograd_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "winograd", .device = "cpu",
    .rank = MXP_RANK_SECONDARY, .doc = "Winograd F(2x2,3x3), 3x3 stride 1 dilation 1 pad<=2, float32",
    .supports = wino_supports, .workspace = wino_workspace,
    .forward = wino_forward, .backward = wino_backward,
};
