/* conv_direct_fast.c — stride-1 float32 convolution of impl "direct":
 * forward, data gradient and weight gradient on register-blocked kernels
 * (conv_direct_kern.c), bias gradient as vector sums.
 *
 * Layout ("kw-shifted copies"): for a block of output rows, each input
 * channel is copied kw times, copy kj holding the zero-padded input
 * shifted left by kj*dw and cropped to the output width Wout:
 *     buf[c][kj][r*Wout + ow] = xpad[c][r0 + r][ow + kj*dw].
 * Tap (ki, kj) of output pixel p = r*Wout + ow is then buf[c][kj][p + ki*dh*Wout]:
 * a contiguous load for 16 consecutive pixels, with no wasted columns
 * however narrow the image (a padded-width layout wastes (kw-1)/Wp of the
 * work: a third on 12x12 inputs with 5x5 kernels).  A source that already
 * has this layout (one column tap, no padding, whole vectors) is read in
 * place.
 *
 * Passes:
 *   - forward: "vconv", a valid stride-1 correlation of a virtually padded
 *     source; items (sample, block of output rows), each builds its
 *     shifted copy in scratch and runs every output channel on it.
 *   - data gradient: when the output is much smaller than the input
 *     (unpadded 5x5 on 12x12), columns dcol = w^T dy per sample (the
 *     forward kernel with one tap) added into dx (col2im): Cg*nk*P
 *     multiplies; otherwise the full correlation of dy with the flipped,
 *     transposed weights, i.e. vconv of dy padded by ((kh-1)*dh - ph,
 *     (kw-1)*dw - pw) with w'[c][m][k] = w[m][c][nk-1-k]: Cg*nk*H*W.
 *   - weight gradient: dW[m][c,k] = sum_n sum_p dy[n][m][p] * xs[n][c][kj][p + ki*dh*Wo],
 *     in L2-sized chunks of samples (a sample of more than 8 MiB in pixel
 *     pieces); items are
 *     blocks of (m, (c,k)), so no reduction across threads; the bias
 *     gradient is summed while a chunk is prepared.
 * Not here: strides > 1 and the 1x1 forward (conv_direct.c). */
#include "conv_direct_fast.h"

#include <stdlib.h>

#define SLACK 16 /* floats after each shifted row plane: the last vector's overrun */

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define ld16(p) (*(const v16u *)(const void *)(p))

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Stride of one shifted plane holding R rows of width Wout. */
static int64_t plane_stride(int64_t R, int64_t Wout) { return (R * Wout + SLACK + 15) / 16 * 16; }

/* The shifted copies: dk_shift (conv_direct_kern.c). */
#define build_shift dk_shift

/* Packed weights, blocks of mb output channels: block (gr, m0) at
 * (gr*Cout + m0)*Cin*nk, laid out [c][k][mbs].  flip: the data-gradient
 * weights (output channel = w's input channel, taps reversed). */
static float *pack(const float *w, int64_t G, int64_t Cout, int64_t Cin, int64_t nk, int mb, int flip) {
    float *p = nn_alloc((uint64_t)(G * Cout * Cin * nk) * sizeof(float));
    if (!p) return NULL;
    for (int64_t gr = 0; gr < G; gr++)
        for (int64_t m0 = 0; m0 < Cout; m0 += mb) {
            int64_t mbs = min64(mb, Cout - m0);
            float *blk = p + (gr * Cout + m0) * Cin * nk;
            for (int64_t c = 0; c < Cin; c++) for (int64_t k = 0; k < nk; k++) for (int64_t i = 0; i < mbs; i++) {
                int64_t o = m0 + i;
                blk[(c * nk + k) * mbs + i] = flip ? w[((gr * Cin + c) * Cout + o) * nk + nk - 1 - k]
                                                   : w[((gr * Cout + o) * Cin + c) * nk + k];
            }
        }
    return p;
}

/* ------------------------------------------------------------ vconv */
typedef struct vconv {
    const float *src;                 /* [N][G*Cin][Hs][Ws] */
    int64_t N, G, Cin, Cout, Hs, Ws, top, left, Hout, Wout, kh, kw, dh, dw, nk;
    const float *wpk, *bias;          /* bias [G*Cout] or NULL */
    float *out;                       /* [N][G*Cout][Hout][Wout] */
    int32_t req;
    int64_t rows, rblocks, S;         /* output rows per item, items per sample, plane stride */
    int mb, nv;
    int in_place;                     /* the source already is its own shifted copy (see vconv_plan) */
    _Atomic int no_memory;            /* set by an item whose scratch allocation failed */
    int64_t off[256];
} vconv;

static void vconv_range(void *arg, int64_t b, int64_t e) {
    const vconv *v = arg;
    int64_t Ct = v->G * v->Cin, HW = v->Hout * v->Wout, cs = v->in_place ? v->Hs * v->Ws : v->kw * v->S;
    float *buf = v->in_place ? NULL : nn_alloc((uint64_t)(Ct * cs) * sizeof(float));
    if (!v->in_place && !buf) { ((vconv *)v)->no_memory = 1; return; }
    float tmp[DK_MB_MAX * 16 * DK_NV_MAX];
    int add = v->req == MXP_REQ_ADD;
    for (int64_t it = b; it < e; it++) {
        int64_t n = it / v->rblocks, r0 = (it % v->rblocks) * v->rows, r1 = min64(r0 + v->rows, v->Hout);
        int64_t R = r1 - r0 + (v->kh - 1) * v->dh, pix = (r1 - r0) * v->Wout;
        const float *base = v->src + n * Ct * v->Hs * v->Ws + r0 * v->Wout;
        if (!v->in_place)
            build_shift(buf, v->src + n * Ct * v->Hs * v->Ws, Ct, v->Hs, v->Ws, v->top, v->left, r0, R, v->Wout, v->kw,
                        v->dw, v->S);
        for (int64_t gr = 0; gr < v->G; gr++)
            for (int64_t m0 = 0; m0 < v->Cout; m0 += v->mb) {
                int mbs = (int)min64(v->mb, v->Cout - m0);
                const float *wp = v->wpk + (gr * v->Cout + m0) * v->Cin * v->nk;
                const float *bp = v->bias ? v->bias + gr * v->Cout + m0 : NULL;
                const float *xb = (v->in_place ? base : buf) + gr * v->Cin * cs;
                float *op = v->out + ((n * v->G + gr) * v->Cout + m0) * HW + r0 * v->Wout;
                int64_t p = 0, step = 16 * v->nv;
                for (; p + step <= pix; p += step)
                    dk_fwd(mbs, v->nv, xb + p, cs, v->Cin, v->nk, v->off, wp, bp, op + p, HW, add);
                if (p < pix && (pix - p) % 16 == 0) /* whole vectors left */
                    dk_fwd(mbs, (int)((pix - p) / 16), xb + p, cs, v->Cin, v->nk, v->off, wp, bp, op + p, HW, add);
                else if (p < pix) { /* ragged end: into tmp, then the valid part */
                    int64_t rem = pix - p;
                    int nvt = (int)((rem + 15) / 16);
                    dk_fwd(mbs, nvt, xb + p, cs, v->Cin, v->nk, v->off, wp, bp, tmp, 16 * nvt, 0);
                    for (int i = 0; i < mbs; i++) {
                        float *o = op + i * HW + p;
                        const float *t = tmp + i * 16 * nvt;
                        if (add) for (int64_t l = 0; l < rem; l++) o[l] += t[l];
                        else memcpy(o, t, (size_t)rem * sizeof(float));
                    }
                }
            }
    }
    nn_free(buf);
}

/* Rows per item, plane stride, tap offsets, kernel block sizes. */
static void vconv_plan(vconv *v) {
    v->nk = v->kh * v->kw;
    /* rows per item: the most rows that still give enough items for both
     * threads (about 4 each) and a shifted copy within L2, preferring a
     * whole number of 16-pixel vectors per item (a ragged end costs a full
     * vector of work and a copy) */
    int64_t Ct = v->G * v->Cin, fallback = 0;
    v->rows = 0;
    for (int64_t r = v->Hout; r >= 1 && !v->rows; r--) {
        uint64_t bytes = (uint64_t)(Ct * v->kw * plane_stride(r + (v->kh - 1) * v->dh, v->Wout)) * sizeof(float);
        int64_t items = v->N * ((v->Hout + r - 1) / r);
        if (r > 1 && (items < 8 || bytes > (512u << 10))) continue;
        if (!fallback) fallback = r;
        if (2 * r < fallback) break; /* not at the price of halving the items */
        if ((r * v->Wout) % 16 == 0) v->rows = r;
    }
    if (!v->rows) v->rows = fallback;
    v->rblocks = (v->Hout + v->rows - 1) / v->rows;
    v->S = plane_stride(v->rows + (v->kh - 1) * v->dh, v->Wout);
    /* One column tap, no padding, source as wide as the output: the source
     * rows are the shifted copy already.  Whole vectors per item, so no
     * load runs past the source. */
    v->in_place = v->kw == 1 && v->top == 0 && v->left == 0 && v->Ws == v->Wout && (v->rows * v->Wout) % 16 == 0 &&
                  (v->Hout * v->Wout) % 16 == 0;
    for (int64_t ki = 0, k = 0; ki < v->kh; ki++)
        for (int64_t kj = 0; kj < v->kw; kj++, k++) v->off[k] = kj * v->S + ki * v->dh * v->Wout;
    int64_t pix = v->rows * v->Wout;
    v->nv = (int)min64(DK_NV_MAX, (pix + 15) / 16);
    int mmax = v->nv >= 4 ? 6 : 8;
    if (v->Cout <= mmax) v->mb = (int)v->Cout;
    else {
        v->mb = mmax;
        for (int t = mmax; t >= mmax - 2; t--)
            if (v->Cout % t == 0) { v->mb = t; break; }
    }
}

static int vconv_run(const mxp_op_ctx *ctx, vconv *v, const float *w, int flip) {
    vconv_plan(v);
    float *wpk = pack(w, v->G, v->Cout, v->Cin, v->nk, v->mb, flip);
    if (!wpk) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory for packed weights");
    v->wpk = wpk;
    int st = nn_parallel(ctx, v->N * v->rblocks, 1, vconv_range, v);
    if (st >= 0 && v->no_memory) st = NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory for a shifted copy");
    nn_free(wpk);
    return st;
}

int dfast_forward(const mxp_forward_args *a, const conv_geom *g) {
    const conv_params *p = a->params;
    vconv *v = calloc(1, sizeof *v);
    if (!v) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory");
    v->src = nn_ptr(&a->in[0]);
    v->N = g->N; v->G = g->G; v->Cin = g->Cg; v->Cout = g->Mg;
    v->Hs = g->H; v->Ws = g->W; v->top = g->ph; v->left = g->pw;
    v->Hout = g->Ho; v->Wout = g->Wo; v->kh = g->kh; v->kw = g->kw; v->dh = g->dh; v->dw = g->dw;
    v->bias = p->no_bias ? NULL : nn_ptr(&a->in[2]);
    v->out = nn_ptr(&a->out[0]);
    v->req = a->req[0];
    int st = vconv_run(a->ctx, v, nn_ptr(&a->in[1]), 0);
    free(v);
    return st;
}

/* ------------------------------------------------------------ backward */
/* Weight gradient in chunks of samples whose shifted x and dy fit in about
 * 1 MiB, so the (m, (c,k)) blocks of a chunk reread them from L2 rather
 * than memory (measured on 20->50 5x5 12x12: ~106 GFLOP/s per core with 17
 * samples per chunk, ~77 with 64); every chunk is one parallel pass
 * over the blocks, adding into dW (the first chunk writes unless req is
 * add), so no thread owns a partial sum. */
#define DW_CHUNK_BYTES (1u << 20)
/* A sample larger than a chunk is one chunk unless it exceeds this: its
 * rows are long enough for the prefetchers, and each pixel split costs
 * every block a lane sum (measured on 56x56x64 3x3: whole sample ~98
 * GFLOP/s per core, 944-pixel pieces ~87). */
#define DW_SAMPLE_BYTES (8u << 20)

typedef struct dwplan {
    int64_t Rf, S, K, Ppad;
    int64_t ns;    /* samples per chunk (1 when pixels are split)       */
    int64_t pc;    /* pixels per chunk within a sample (multiple of 16)  */
    int pad_dy;    /* dy copied with rows padded to whole vectors        */
    int x_in_place;/* 1x1 unpadded, whole vectors: x is its own copy     */
} dwplan;

static void dwplan_init(dwplan *d, const conv_geom *g) {
    d->Rf = g->Ho + (g->kh - 1) * g->dh;
    d->S = plane_stride(d->Rf, g->Wo);
    d->K = g->Cg * g->kh * g->kw;
    d->Ppad = (g->P + 15) / 16 * 16;
    d->pad_dy = g->P % 16 != 0;
    d->x_in_place = g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0 && !d->pad_dy;
    if (d->x_in_place) d->S = g->P;
    uint64_t per = (uint64_t)(g->C * g->kw * d->S + g->M * d->Ppad) * sizeof(float);
    if (per <= DW_CHUNK_BYTES) {
        d->ns = (int64_t)(DW_CHUNK_BYTES / per);
        if (d->ns > g->N) d->ns = g->N;
        d->pc = d->Ppad;
    } else if (per <= DW_SAMPLE_BYTES) {
        d->ns = 1;
        d->pc = d->Ppad;
    } else {
        d->ns = 1;
        d->pc = (int64_t)((double)d->Ppad * DW_SAMPLE_BYTES / (double)per) / 16 * 16;
        if (d->pc < 64) d->pc = 64;
        if (d->pc > d->Ppad) d->pc = d->Ppad;
    }
}

/* Floats of one chunk's buffer: shifted x, then padded dy when needed. */
static int64_t dwplan_chunk(const dwplan *d, const conv_geom *g) {
    return d->ns * ((d->x_in_place ? 0 : g->C * g->kw * d->S) + (d->pad_dy ? g->M * d->Ppad : 0));
}
/* Two chunk buffers when there are several chunks: the next one is
 * prepared during the last weight-gradient pass of the current one. */
static uint64_t dwplan_ws(const dwplan *d, const conv_geom *g) {
    return (uint64_t)((d->ns < g->N ? 2 : 1) * dwplan_chunk(d, g)) * sizeof(float);
}

/* Sum of one row of floats: vector partials, then double. */
static double row_sum(const float *s, int64_t P) {
    v16 v0 = {0}, v1 = {0};
    int64_t q = 0;
    for (; q + 32 <= P; q += 32) { v0 += ld16(s + q); v1 += ld16(s + q + 16); }
    for (; q + 16 <= P; q += 16) v0 += ld16(s + q);
    v0 += v1;
    double t = 0;
    for (; q < P; q++) t += s[q];
    for (int l = 0; l < 16; l++) t += v0[l];
    return t;
}

/* One chunk's preparation.  Items (n, c): shifted copies of x.  Items m:
 * the chunk's part of the bias gradient, and dy rows padded with zeros to
 * whole vectors when needed; reading dy here also brings the chunk's dy
 * into cache for the weight-gradient pass that follows. */
typedef struct shjob {
    const conv_geom *g; const dwplan *d;
    const float *x, *dy; float *xs, *dyz, *db;
    int64_t n0, ns;
    int32_t req_db; /* MXP_REQ_NULL: no bias gradient; ADD: add the chunk's sum */
} shjob;
static void shift_range(void *arg, int64_t b, int64_t e) {
    const shjob *j = arg; const conv_geom *g = j->g; const dwplan *d = j->d;
    int64_t span = d->x_in_place ? 0 : j->ns * g->C;
    for (int64_t it = b; it < e; it++) {
        if (it < span) { /* it = local n * C + c */
            int64_t off = j->n0 * g->C + it;
            build_shift(j->xs + it * g->kw * d->S, j->x + off * g->H * g->W, 1, g->H, g->W, g->ph, g->pw, 0, d->Rf,
                        g->Wo, g->kw, g->dw, d->S);
            continue;
        }
        int64_t m = it - span;
        double acc = 0;
        for (int64_t ln = 0; ln < j->ns; ln++) {
            const float *src = j->dy + ((j->n0 + ln) * g->M + m) * g->P;
            if (j->req_db != MXP_REQ_NULL) acc += row_sum(src, g->P);
            if (d->pad_dy) {
                float *dst = j->dyz + (ln * g->M + m) * d->Ppad;
                memcpy(dst, src, (size_t)g->P * sizeof(float));
                memset(dst + g->P, 0, (size_t)(d->Ppad - g->P) * sizeof(float));
            }
        }
        if (j->req_db == MXP_REQ_ADD) j->db[m] += (float)acc;
        else if (j->req_db != MXP_REQ_NULL) j->db[m] = (float)acc;
    }
}

typedef struct dwjob {
    const conv_geom *g; const dwplan *d;
    const float *xs, *dy;
    float *dw;
    int64_t ldy, dys, ns, p0, nvec, mbl, kbl;
    int add;
    const int64_t *roff;
} dwjob;
/* items: blocks (group, k-block, m-block), m-block fastest so consecutive
 * items reuse the same x rows from L1 */
static void dw_range(void *arg, int64_t b, int64_t e) {
    const dwjob *j = arg; const conv_geom *g = j->g; const dwplan *d = j->d;
    float res[DK_DWM_MAX * DK_DWK_MAX];
    int64_t xsn = g->C * g->kw * d->S;
    for (int64_t t = b; t < e; t++) {
        int64_t gr = t / (j->mbl * j->kbl), kk = t / j->mbl % j->kbl, mi = t % j->mbl;
        int64_t m0 = mi * DK_DWM_MAX, r0 = kk * DK_DWK_MAX;
        int mbs = (int)min64(DK_DWM_MAX, g->Mg - m0), kbs = (int)min64(DK_DWK_MAX, d->K - r0);
        dk_dw(mbs, kbs, j->dy + (gr * g->Mg + m0) * j->ldy + j->p0, j->ldy, j->dys,
              j->xs + gr * g->Cg * g->kw * d->S + j->p0, j->roff + r0, xsn, j->ns, j->nvec, res);
        for (int i = 0; i < mbs; i++)
            for (int r = 0; r < kbs; r++) {
                float *o = &j->dw[(gr * g->Mg + m0 + i) * d->K + r0 + r];
                if (j->add) *o += res[i * DK_DWK_MAX + r];
                else *o = res[i * DK_DWK_MAX + r];
            }
    }
}

/* A weight-gradient pass, optionally with the next chunk's preparation
 * appended as extra items (one parallel pass instead of two). */
typedef struct dwpass { dwjob dw; shjob sh; int64_t ntask, nsh; } dwpass;
static void dwpass_range(void *arg, int64_t b, int64_t e) {
    const dwpass *p = arg;
    if (b < p->ntask) dw_range((void *)&p->dw, b, min64(e, p->ntask));
    if (e > p->ntask) shift_range((void *)&p->sh, max64(b, p->ntask) - p->ntask, e - p->ntask);
}

static int dw_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *x, const float *dy, float *dw, int32_t req,
                  float *db, int32_t req_db, void *ws) {
    dwplan d; dwplan_init(&d, g);
    int64_t *roff = malloc((size_t)d.K * sizeof(int64_t));
    if (!roff) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory");
    for (int64_t c = 0, r = 0; c < g->Cg; c++)
        for (int64_t ki = 0; ki < g->kh; ki++)
            for (int64_t kj = 0; kj < g->kw; kj++, r++) roff[r] = (c * g->kw + kj) * d.S + ki * g->dh * g->Wo;
    int64_t chunk = dwplan_chunk(&d, g), xsz = d.x_in_place ? 0 : d.ns * g->C * g->kw * d.S;
    float *buf[2] = { chunk ? ws : NULL, chunk ? (float *)ws + chunk : NULL };
    int dy_items = d.pad_dy || req_db != MXP_REQ_NULL;
    /* chunk preparation job for the chunk starting at sample n0 into buf[bi] */
#define SHJOB(n0_, bi_) ((shjob){ g, &d, x, dy, buf[bi_], buf[bi_] ? buf[bi_] + xsz : NULL, db, (n0_), min64(d.ns, g->N - (n0_)), \
                                  (n0_) == 0 || req_db == MXP_REQ_NULL ? req_db : MXP_REQ_ADD })
    dwpass pass;
    pass.sh = SHJOB(0, 0);
    int64_t xitems = d.x_in_place ? 0 : g->C; /* per sample */
    int st = nn_parallel(ctx, pass.sh.ns * xitems + (dy_items ? g->M : 0), 1, shift_range, &pass.sh);
    int first = 1;
    for (int64_t n0 = 0, bi = 0; n0 < g->N && st >= 0; n0 += d.ns, bi ^= 1) {
        int64_t ns = min64(d.ns, g->N - n0);
        dwjob j = { g, &d, d.x_in_place ? x + n0 * g->C * g->P : buf[bi], dy + n0 * g->M * g->P, dw, g->P, g->M * g->P, ns, 0, 0,
                    (g->Mg + DK_DWM_MAX - 1) / DK_DWM_MAX, (d.K + DK_DWK_MAX - 1) / DK_DWK_MAX, 0, roff };
        if (d.pad_dy) { j.dy = buf[bi] + xsz; j.ldy = d.Ppad; j.dys = g->M * d.Ppad; }
        for (int64_t p0 = 0; p0 < d.Ppad && st >= 0; p0 += d.pc) {
            j.p0 = p0;
            j.nvec = min64(d.pc, d.Ppad - p0) / 16;
            j.add = !first || req == MXP_REQ_ADD;
            pass.dw = j;
            pass.ntask = g->G * j.mbl * j.kbl;
            pass.nsh = 0;
            if (p0 + d.pc >= d.Ppad && n0 + d.ns < g->N) { /* last pass of this chunk: prepare the next */
                pass.sh = SHJOB(n0 + d.ns, bi ^ 1);
                pass.nsh = pass.sh.ns * xitems + (dy_items ? g->M : 0);
            }
            st = nn_parallel(ctx, pass.ntask + pass.nsh, 1, dwpass_range, &pass);
            first = 0;
        }
    }
#undef SHJOB
    free(roff);
    return st;
}

typedef struct dbjob { const float *dy; float *db; int64_t N, M, P; int32_t req; } dbjob;
static void db_range(void *arg, int64_t b, int64_t e) {
    const dbjob *j = arg;
    for (int64_t m = b; m < e; m++) {
        double acc = 0;
        for (int64_t n = 0; n < j->N; n++) acc += row_sum(j->dy + (n * j->M + m) * j->P, j->P);
        if (j->req == MXP_REQ_ADD) j->db[m] += (float)acc;
        else j->db[m] = (float)acc;
    }
}

/* Data gradient of small images as columns: dcol[(c,ki,kj)][p] = sum_m w[m][c,ki,kj] * dy[m][p]
 * (the forward kernel with one tap, rows (c,k) as outputs), then added
 * into dx at (oh - ph + ki*dh, ow - pw + kj*dw).  Needs Cg*nk*P multiplies
 * per sample where the full correlation needs Cg*nk*H*W, i.e. fewer when
 * the output is much smaller than the input (unpadded 5x5 on 12x12: 64
 * vs 144 pixels).  Items are samples (columns of one sample overlap in dx). */
typedef struct dcjob {
    const float *dy, *wpk;
    float *dx;
    int64_t G, Cg, Mg, K, kh, kw, P, Ppad, H, W, Ho, Wo, dh, dw, ph, pw;
    int mb, nv;
    int32_t req;
    _Atomic int no_memory;             /* set by an item whose scratch allocation failed */
} dcjob;

static void dcol_range(void *arg, int64_t b, int64_t e) {
    const dcjob *j = arg;
    int64_t C = j->G * j->Cg, M = j->G * j->Mg, zero = 0;
    float *dcol = nn_alloc((uint64_t)(j->K * j->Ppad) * sizeof(float));
    float *dyz = j->P % 16 ? nn_alloc((uint64_t)(j->Mg * j->Ppad) * sizeof(float)) : NULL;
    if (!dcol || (j->P % 16 && !dyz)) { nn_free(dcol); nn_free(dyz); ((dcjob *)j)->no_memory = 1; return; }
    for (int64_t n = b; n < e; n++) {
        float *dxn = j->dx + n * C * j->H * j->W;
        if (j->req != MXP_REQ_ADD) memset(dxn, 0, (size_t)(C * j->H * j->W) * sizeof(float));
        for (int64_t gr = 0; gr < j->G; gr++) {
            const float *src = j->dy + (n * M + gr * j->Mg) * j->P;
            int64_t cs = j->P;
            if (dyz) { /* whole vectors per channel: zero-padded copy */
                for (int64_t m = 0; m < j->Mg; m++) {
                    memcpy(dyz + m * j->Ppad, src + m * j->P, (size_t)j->P * sizeof(float));
                    memset(dyz + m * j->Ppad + j->P, 0, (size_t)(j->Ppad - j->P) * sizeof(float));
                }
                src = dyz; cs = j->Ppad;
            }
            for (int64_t r0 = 0; r0 < j->K; r0 += j->mb) {
                int rbs = (int)min64(j->mb, j->K - r0);
                const float *wp = j->wpk + (gr * j->K + r0) * j->Mg;
                for (int64_t p = 0; p < j->Ppad; p += 16 * j->nv) {
                    int nvt = (int)min64(j->nv, (j->Ppad - p) / 16);
                    dk_fwd(rbs, nvt, src + p, cs, j->Mg, 1, &zero, wp, NULL, dcol + r0 * j->Ppad + p, j->Ppad, 0);
                }
            }
            dk_col2im(dxn + gr * j->Cg * j->H * j->W, dcol, j->Ppad, j->K, j->kh, j->kw, j->H, j->W, j->Ho, j->Wo,
                      j->ph, j->pw, j->dh, j->dw);
        }
    }
    nn_free(dcol);
    nn_free(dyz);
}

/* The column form when it saves a seventh or more of the multiplies and
 * one sample's columns stay within L2. */
static int use_dcol(const conv_geom *g) {
    int64_t K = g->Cg * g->kh * g->kw, Ppad = (g->P + 15) / 16 * 16;
    return g->H * g->W * 6 > g->P * 7 && K * Ppad <= (256 << 10);
}

static int dcol_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *w, const float *dy, float *dx,
                    int32_t req) {
    dcjob j = { dy, NULL, dx, g->G, g->Cg, g->Mg, g->Cg * g->kh * g->kw, g->kh, g->kw, g->P,
                (g->P + 15) / 16 * 16, g->H, g->W, g->Ho, g->Wo, g->dh, g->dw, g->ph, g->pw, 0, 0, req, 0 };
    j.nv = (int)min64(DK_NV_MAX, j.Ppad / 16);
    int mmax = j.nv >= 4 ? 6 : 8;
    j.mb = mmax;
    if (j.K <= mmax) j.mb = (int)j.K;
    else for (int t = mmax; t >= mmax - 2; t--) if (j.K % t == 0) { j.mb = t; break; }
    float *wpk = pack(w, g->G, j.K, g->Mg, 1, j.mb, 1); /* rows (c,k), inputs m: w transposed */
    if (!wpk) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory for packed weights");
    j.wpk = wpk;
    int st = nn_parallel(ctx, g->N, 1, dcol_range, &j);
    if (st >= 0 && j.no_memory) st = NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory for data-gradient columns");
    nn_free(wpk);
    return st;
}

uint64_t dfast_workspace(const conv_geom *g, int is_train) {
    if (!is_train) return 0;
    dwplan d; dwplan_init(&d, g);
    return dwplan_ws(&d, g);
}

int dfast_backward(const mxp_backward_args *a, const conv_geom *g) {
    const conv_params *p = a->params;
    int32_t req_dx = a->req[0], req_dw = a->req[1];
    int32_t req_db = (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    const float *x = nn_ptr(&a->in[0]), *w = nn_ptr(&a->in[1]), *dy = nn_ptr(&a->out_grad[0]);
    int st = MXP_OK;
    float *db = req_db != MXP_REQ_NULL ? nn_ptr(&a->in_grad[2]) : NULL;
    if (req_dw != MXP_REQ_NULL) { /* the bias gradient rides along */
        if (a->ctx->workspace_bytes < dfast_workspace(g, 1))
            return NN_ERR(MXP_EINVAL, "Convolution(direct): workspace too small (is_train was 0 at planning?)");
        if ((st = dw_run(a->ctx, g, x, dy, nn_ptr(&a->in_grad[1]), req_dw, db, req_db, a->ctx->workspace)) < 0)
            return st;
    } else if (req_db != MXP_REQ_NULL) {
        dbjob bj = { dy, db, g->N, g->M, g->P, req_db };
        if ((st = nn_parallel(a->ctx, g->M, 1, db_range, &bj)) < 0) return st;
    }
    if (req_dx != MXP_REQ_NULL && use_dcol(g)) return dcol_run(a->ctx, g, w, dy, nn_ptr(&a->in_grad[0]), req_dx);
    if (req_dx != MXP_REQ_NULL) {
        vconv *v = calloc(1, sizeof *v);
        if (!v) return NN_ERR(MXP_ENOMEM, "Convolution(direct): no memory");
        v->src = dy;
        v->N = g->N; v->G = g->G; v->Cin = g->Mg; v->Cout = g->Cg;
        v->Hs = g->Ho; v->Ws = g->Wo; v->top = (g->kh - 1) * g->dh - g->ph; v->left = (g->kw - 1) * g->dw - g->pw;
        v->Hout = g->H; v->Wout = g->W; v->kh = g->kh; v->kw = g->kw; v->dh = g->dh; v->dw = g->dw;
        v->out = nn_ptr(&a->in_grad[0]);
        v->req = req_dx;
        st = vconv_run(a->ctx, v, w, 1);
        free(v);
    }
    return st;
}
