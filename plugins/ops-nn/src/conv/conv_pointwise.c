/* conv_pointwise.c — Convolution impl "pointwise": 1x1 kernels, no
 * padding, float32 (any groups; dilation is moot for 1x1; a stride > 1
 * runs the stride-1 products on a gathered subsample, see "strided
 * layers" below).  Such a layer
 * is a GEMM per sample and group, Y = W X, with X already the column
 * matrix in NCHW; this impl runs the three products on kernels tuned for
 * that shape (conv_pointwise_kern.c) instead of im2col/BLAS or the
 * direct impl's generic loops:
 *
 *   forward        Y[m][p] = b[m] + sum_c W[m][c] X[c][p]
 *   data grad      dX[c][p] (=/+=) sum_m W[m][c] dY[m][p]
 *   weight grad    dW[m][c] (=/+=) sum_{n,p} dY[m][p] X[c][p]; db[m] = sum dY[m][p]
 *
 * Forward and data gradient share one driver (the data gradient is the
 * forward with W transposed, dY as input and no bias): items are (sample,
 * group, block of pixels); each strip of 32 pixels of the input is packed
 * contiguous (so it stays in L1 while every block of 12 output rows runs
 * on it), then the 12x32 register kernel writes the output in place.
 * Strips come in groups of up to PW_WIDE_STRIPS (the parallel items,
 * taken one at a time by whichever thread is free), and the group a thread
 * runs next is prefetched into L2 a line at a time from inside the kernels
 * while the current one computes.  A prefetched group's whole strips are
 * packed by their first row block's kernel as it reads them
 * (pwk_gemm_pack: the copy rides on that block's FMAs instead of a pass of
 * its own, ~12% of the forward's time as a pass).  Outputs of whole
 * aligned strips bypass the cache (streaming stores: without them, every
 * output line is first read from memory, and layer (e)'s forward+backward
 * took ~20% more CPU time).
 *
 * The weight gradient transposes dY a chunk of pixels at a time to
 * pixel-major (its row sums are the bias gradient) so that the kernel
 * holds 64 output channels x 6 input channels of dW in registers over the
 * whole chunk, broadcasting x.  The chunks are split into PW_PARTS fixed
 * parts, each summed into its own partial, and the partials are added in
 * part order: results are bitwise the same whatever the thread count or
 * schedule (docs/convolution.md, "Reproducibility").
 *
 * Weights are repacked on every call (a 64x256 layer's weights are 64 KiB:
 * microseconds next to the milliseconds of the products).  Scratch comes
 * from the host pool per parallel range; no workspace. */
#include "conv_pointwise.h"

#include <stdatomic.h>
#include <stdint.h>

#define PW_PARTS 8              /* weight-gradient parts (fixed)          */
#define PW_DYT_BYTES (32 << 10) /* one chunk of transposed dy: L1-sized   */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int is_pointwise(const conv_geom *g) { return g->kh == 1 && g->kw == 1 && g->ph == 0 && g->pw == 0; }

/* ------------------------------------------------------- strided layers */
/* A 1x1 layer of stride (sh, sw) > 1 is the stride-1 layer on the
 * subsampled input xs[n][c][i][j] = x[n][c][i*sh][j*sw] (N, C, Ho, Wo):
 * forward and weight gradient gather xs into scratch (a quarter of x at
 * stride 2), the data gradient is computed on that grid and scattered
 * back (zeros at the pixels no output reads).  ResNet's 1x1 stride-2
 * shortcuts ran ~2 ms per backward on gemm's im2col + sgemm. */
typedef struct sub_job {
    const float *src;
    float *dst;
    int64_t H, W, Ho, Wo, sh, sw;
    int scatter, add; /* 0: gather x -> xs; 1: scatter dxs -> dx (write or add) */
} sub_job;

static void sub_range(void *arg, int64_t b, int64_t e) {
    const sub_job *j = arg;
    for (int64_t pl = b; pl < e; pl++) {
        const float *s = j->src + pl * (j->scatter ? j->Ho * j->Wo : j->H * j->W);
        float *d = j->dst + pl * (j->scatter ? j->H * j->W : j->Ho * j->Wo);
        if (!j->scatter) {
            for (int64_t i = 0; i < j->Ho; i++)
                for (int64_t k = 0; k < j->Wo; k++) d[i * j->Wo + k] = s[i * j->sh * j->W + k * j->sw];
            continue;
        }
        if (!j->add) memset(d, 0, (size_t)(j->H * j->W) * sizeof *d);
        for (int64_t i = 0; i < j->Ho; i++)
            for (int64_t k = 0; k < j->Wo; k++) d[i * j->sh * j->W + k * j->sw] += s[i * j->Wo + k];
    }
}

static int is_strided(const conv_geom *g) { return g->sh != 1 || g->sw != 1; }

/* Gather (scatter = 0: x -> new xs, returned in *out) or scatter (dxs ->
 * dx with add) over the N*C planes of g. */
static int sub_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *src, float *dst, int scatter, int add,
                   float **out) {
    if (!scatter) {
        dst = nn_alloc((uint64_t)(g->N * g->C * g->P) * sizeof(float));
        if (!dst) return NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for the subsampled input");
        *out = dst;
    }
    sub_job j = {src, dst, g->H, g->W, g->Ho, g->Wo, g->sh, g->sw, scatter, add};
    int64_t plane = g->H * g->W;
    return nn_parallel(ctx, g->N * g->C, plane >= 8192 ? 1 : 8192 / plane, sub_range, &j);
}

/* g as the stride-1 layer on the subsampled grid. */
static void to_unit_stride(conv_geom *g) {
    g->H = g->Ho;
    g->W = g->Wo;
    g->sh = g->sw = 1;
}

/* ---------------------------------------------------------- gemm passes */
/* Weights packed for pwk_gemm, per group: rows in blocks of PW_MB, block
 * (gr, r0) at (gr*R + r0)*K laid out [k][mbs].  Forward: rows are output
 * channels (R = Mg, K = Cg); data gradient (transpose): rows are input
 * channels (R = Cg, K = Mg). */
static float *pack_a(const float *w, const conv_geom *g, int transpose) {
    int64_t R = transpose ? g->Cg : g->Mg, K = transpose ? g->Mg : g->Cg;
    float *p = nn_alloc((uint64_t)(g->G * R * K) * sizeof(float));
    if (!p) return NULL;
    for (int64_t gr = 0; gr < g->G; gr++)
        for (int64_t r0 = 0; r0 < R; r0 += PW_MB) {
            int64_t mbs = min64(PW_MB, R - r0);
            float *blk = p + (gr * R + r0) * K;
            for (int64_t k = 0; k < K; k++)
                for (int64_t i = 0; i < mbs; i++) {
                    int64_t r = r0 + i;
                    blk[k * mbs + i] = transpose ? w[(gr * g->Mg + k) * g->Cg + r] : w[(gr * g->Mg + r) * g->Cg + k];
                }
        }
    return p;
}

typedef struct pwjob {
    const float *src;  /* [N][G][K][P] */
    const float *apk;  /* pack_a        */
    const float *bias; /* [G*R] or NULL */
    float *out;        /* [N][G][R][P] */
    int64_t G, K, R, P;
    int64_t gw, ngrp, nitems; /* items: (sample, group) x ngrp groups of gw pixels */
    int add;
    int stream;        /* whole aligned strips may bypass the cache (pwk_gemm add 2) */
    atomic_llong next; /* the next item nobody has taken */
    atomic_int no_memory;
} pwjob;

/* Item it: its input columns (*src, at pixel 0) and pixels [*p0, *p1). */
static void item_span(const pwjob *j, int64_t it, const float **src, int64_t *p0, int64_t *p1) {
    int64_t ng = it / j->ngrp;
    *src = j->src + ng * j->K * j->P;
    *p0 = it % j->ngrp * j->gw;
    *p1 = min64(j->P, *p0 + j->gw);
}

/* Items are groups of whole strips, taken one at a time from j->next by
 * whichever thread is free (so a thread the machine slows down takes
 * fewer: no range of 1/8 of the work left to one thread at the end), and
 * always one ahead: while an item computes, the one this thread will run
 * next is known, and its input is prefetched into L2 through the kernels
 * (pwk_pf) so that its strips can be packed by their first row block's
 * kernel as it reads them (pwk_gemm_pack).  Only a thread's first item,
 * which nothing prefetched, is packed row by row beforehand (pwk_pack_wide:
 * long runs along each input row, which the hardware prefetchers follow).
 * Of [b, e) only its size is used: a call takes up to e - b items from the
 * counter (fewer when it runs dry; then every item is taken, and if no call
 * runs dry each took its full share, which covers them all), and returns
 * to parallel_for between calls, which moves a helper woken on its
 * caller's CPU off it. */
static void gemm_range(void *arg, int64_t b, int64_t e) {
    pwjob *j = arg;
    int64_t quota = e - b;
    int64_t cur = atomic_fetch_add(&j->next, 1);
    if (cur >= j->nitems) return;
    float *panel = nn_alloc((uint64_t)(j->K * PW_STRIP * PW_WIDE_STRIPS) * sizeof(float));
    if (!panel) { /* an item cannot return a status: the driver reports it */
        atomic_store(&j->no_memory, 1);
        return;
    }
    float tmp[PW_MB * PW_STRIP];
    int64_t nrb = (j->R + PW_MB - 1) / PW_MB;
    int fused = 0; /* the item was prefetched: its strips are packed by their first row block */
    while (cur < j->nitems) {
        int64_t nxt = --quota > 0 ? atomic_fetch_add(&j->next, 1) : j->nitems;
        int64_t ng = cur / j->ngrp, gr = ng % j->G, p0, p1;
        const float *src;
        item_span(j, cur, &src, &p0, &p1);
        float *out = j->out + ng * j->R * j->P;
        if (!fused) pwk_pack_wide(src + p0, j->P, j->K, p1 - p0, panel);
        pwk_pf pf = {0};
        if (nxt < j->nitems) {
            /* one line every 1 << shift kernel iterations, all of them
             * within this item's iterations */
            int64_t q0, q1;
            item_span(j, nxt, &pf.row, &q0, &q1);
            pf.row += q0;
            int64_t slots = (p1 - p0 + PW_STRIP - 1) / PW_STRIP * nrb * j->K;
            pf.ncol = q1 - q0;
            pf.ld = j->P;
            pf.left = j->K * ((q1 - q0 + 15) / 16);
            while (pf.shift < 4 && (slots >> (pf.shift + 1)) >= pf.left) pf.shift++;
        }
        for (int64_t p = p0; p < p1; p += PW_STRIP) {
            int64_t np = min64(PW_STRIP, p1 - p);
            const float *pan = fused ? panel : panel + (p - p0) / PW_STRIP * j->K * PW_STRIP;
            if (fused && np < PW_STRIP) pwk_pack(src + p, j->P, j->K, np, panel, 0);
            for (int64_t r0 = 0; r0 < j->R; r0 += PW_MB) {
                int mbs = (int)min64(PW_MB, j->R - r0);
                const float *a = j->apk + (gr * j->R + r0) * j->K;
                const float *bias = j->bias ? j->bias + gr * j->R + r0 : NULL;
                if (np == PW_STRIP) {
                    float *o = out + r0 * j->P + p;
                    int mode = j->add ? 1 : (j->stream && (uintptr_t)o % 64 == 0) ? 2 : 0;
                    if (fused && r0 == 0) pwk_gemm_pack(mbs, a, src + p, j->P, panel, j->K, o, j->P, bias, mode, &pf);
                    else pwk_gemm_pf(mbs, a, pan, j->K, o, j->P, bias, mode, &pf);
                    continue;
                }
                pwk_gemm_pf(mbs, a, pan, j->K, tmp, PW_STRIP, bias, 0, &pf); /* ragged last strip */
                for (int i = 0; i < mbs; i++) {
                    float *o = out + (r0 + i) * j->P + p;
                    if (j->add) for (int64_t l = 0; l < np; l++) o[l] += tmp[i * PW_STRIP + l];
                    else memcpy(o, tmp + i * PW_STRIP, (size_t)np * sizeof(float));
                }
            }
        }
        cur = nxt;
        fused = 1;
    }
    pwk_stream_fence();
    nn_free(panel);
}

/* Strips per item for K input rows: at most PW_WIDE_STRIPS, and few
 * enough that an item's input (K rows of the group's pixels) fits
 * PW_GROUP_BYTES.  While an item computes, the next one is prefetched into
 * L2 beside it, so two items and the weights must fit there: on a 1 MiB L2
 * (AMD Zen 5) 16 strips of a 256-row input (458 KiB an item) had the
 * prefetch evict the current item's strips before they were read. */
#ifndef PW_GROUP_BYTES
#define PW_GROUP_BYTES (128 << 10)
#endif
static int64_t group_strips(int64_t K) {
    return max64(1, min64(PW_WIDE_STRIPS, PW_GROUP_BYTES / (K * PW_STRIP * (int64_t)sizeof(float))));
}

/* out = A src (+ bias) for every sample and group, A from pack_a. */
static int gemm_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *src, const float *apk, const float *bias,
                    float *out, int transpose, int add) {
    pwjob j = {src, apk, bias, out, g->G, transpose ? g->Mg : g->Cg, transpose ? g->Cg : g->Mg, g->P, 0, 0, 0, add,
               pwk_have_stream() && g->P % 16 == 0, 0, 0};
    /* each (sample, group)'s strips in near-equal groups of at most
     * group_strips() */
    int64_t strips = (g->P + PW_STRIP - 1) / PW_STRIP, gmax = group_strips(j.K);
    int64_t ngrp = (strips + gmax - 1) / gmax;
    j.gw = (strips + ngrp - 1) / ngrp * PW_STRIP;
    j.ngrp = (g->P + j.gw - 1) / j.gw;
    j.nitems = g->N * g->G * j.ngrp;
    int st = nn_parallel(ctx, j.nitems, 1, gemm_range, &j);
    if (st >= 0 && atomic_load(&j.no_memory))
        st = NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for a %lld-float packed strip group",
                    (long long)(j.K * PW_STRIP * PW_WIDE_STRIPS));
    return st;
}

/* ------------------------------------------------------ weight gradient */
typedef struct dwjob {
    const float *x, *dy;
    int64_t N, G, Cg, Mg, Mgp, P, Q, nq, nparts, T;
    float *part;  /* [nparts][G][Cg][Mgp] */
    double *dbp;  /* [nparts][G*Mg] or NULL */
    int want_dw;
    atomic_int no_memory;
} dwjob;

/* A prefetch cursor over rows of ncol floats (row stride ld): `per`
 * lines a step, row by row, until `rows` rows are done (hints only). */
typedef struct dy_pf {
    const float *row;
    int64_t col, ncol, rows, per;
} dy_pf;

static void dy_pf_step(dy_pf *pf, int64_t ld) {
    for (int64_t i = 0; i < pf->per && pf->rows > 0; i++) {
        __builtin_prefetch(pf->row + pf->col, 0, 3);
        pf->col += 16;
        if (pf->col >= pf->ncol) {
            pf->col = 0;
            if (--pf->rows > 0) pf->row += ld; /* never past the array's end */
        }
    }
}

static void dw_range(void *arg, int64_t b, int64_t e) {
    dwjob *j = arg;
    float *dyT = nn_alloc((uint64_t)(j->Q * j->Mgp) * sizeof(float));
    if (!dyT) {
        atomic_store(&j->no_memory, 1);
        return;
    }
    uint64_t psz = (uint64_t)(j->G * j->Cg * j->Mgp);
    for (int64_t q = b; q < e; q++) {
        float *pt = j->part + (uint64_t)q * psz;
        double *db = j->dbp ? j->dbp + q * j->G * j->Mg : NULL;
        memset(pt, 0, psz * sizeof(float));
        if (db) memset(db, 0, (size_t)(j->G * j->Mg) * sizeof(double));
        int64_t t1 = (q + 1) * j->T / j->nparts;
        for (int64_t t = q * j->T / j->nparts; t < t1; t++) {
            int64_t n = t / j->nq, p0 = (t % j->nq) * j->Q, np = min64(j->Q, j->P - p0);
            for (int64_t gr = 0; gr < j->G; gr++) {
                const float *dys = j->dy + ((n * j->G + gr) * j->Mg) * j->P + p0;
                pwk_trans(dys, j->P, j->Mg, np, dyT, j->Mgp, db ? db + gr * j->Mg : NULL);
                if (!j->want_dw) continue;
                /* the next (chunk, group)'s dy, a few lines after each kernel
                 * call: its rows are a row pitch apart, which the hardware
                 * prefetchers do not follow, and the transpose waited on
                 * every one (~14% of the pass on AMD Zen 5) */
                dy_pf pf = {0};
                if (gr + 1 < j->G || t + 1 < t1) {
                    int64_t tn = gr + 1 < j->G ? t : t + 1, gn = gr + 1 < j->G ? gr + 1 : 0;
                    int64_t pn = (tn % j->nq) * j->Q;
                    pf.row = j->dy + ((tn / j->nq * j->G + gn) * j->Mg) * j->P + pn;
                    pf.ncol = min64(j->Q, j->P - pn);
                    pf.rows = j->Mg;
                    int64_t calls = (j->Cg + PW_DWC - 1) / PW_DWC * ((j->Mgp + PW_DWM - 1) / PW_DWM);
                    pf.per = (j->Mg * ((pf.ncol + 15) / 16) + calls - 1) / calls;
                }
                const float *xs = j->x + ((n * j->G + gr) * j->Cg) * j->P + p0;
                for (int64_t c0 = 0; c0 < j->Cg; c0 += PW_DWC) {
                    int nc = (int)min64(PW_DWC, j->Cg - c0);
                    for (int64_t m0 = 0; m0 < j->Mgp; m0 += PW_DWM) {
                        int nmv = (int)min64(PW_DWM, j->Mgp - m0) / 16;
                        const float *xpf = m0 == 0 && c0 + 2 * PW_DWC <= j->Cg ? xs + (c0 + PW_DWC) * j->P : NULL;
                        pwk_dw(nmv, nc, dyT + m0, j->Mgp, xs + c0 * j->P, j->P, np,
                               pt + (gr * j->Cg + c0) * j->Mgp + m0, j->Mgp, xpf);
                        dy_pf_step(&pf, j->P);
                    }
                }
            }
        }
    }
    nn_free(dyT);
}

static int dw_run(const mxp_op_ctx *ctx, const conv_geom *g, const float *x, const float *dy, float *dw, int32_t req_dw,
                  float *db, int32_t req_db) {
    dwjob j = {x, dy, g->N, g->G, g->Cg, g->Mg, (g->Mg + 15) / 16 * 16, g->P, 0, 0, 0, 0, NULL, NULL,
               req_dw != MXP_REQ_NULL, 0};
    j.Q = max64(64, min64(512, PW_DYT_BYTES / (int64_t)sizeof(float) / j.Mgp / 16 * 16));
    j.nq = (g->P + j.Q - 1) / j.Q;
    j.T = g->N * j.nq;
    j.nparts = min64(PW_PARTS, j.T);
    uint64_t psz = (uint64_t)(g->G * g->Cg * j.Mgp);
    j.part = nn_alloc((uint64_t)j.nparts * psz * sizeof(float));
    if (req_db != MXP_REQ_NULL) j.dbp = nn_alloc((uint64_t)(j.nparts * g->M) * sizeof(double));
    if (!j.part || (req_db != MXP_REQ_NULL && !j.dbp)) {
        nn_free(j.part);
        nn_free(j.dbp);
        return NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for %lld weight-gradient partials",
                      (long long)j.nparts);
    }
    int st = nn_parallel(ctx, j.nparts, 1, dw_range, &j);
    if (st >= 0 && atomic_load(&j.no_memory))
        st = NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for a transposed dy chunk");
    if (st >= 0 && req_dw != MXP_REQ_NULL)
        for (int64_t gr = 0; gr < g->G; gr++)
            for (int64_t m = 0; m < g->Mg; m++)
                for (int64_t c = 0; c < g->Cg; c++) {
                    float s = 0.0f;
                    for (int64_t q = 0; q < j.nparts; q++) s += j.part[q * psz + (gr * g->Cg + c) * j.Mgp + m];
                    NN_STORE(req_dw, dw[(gr * g->Mg + m) * g->Cg + c], s);
                }
    if (st >= 0 && req_db != MXP_REQ_NULL)
        for (int64_t m = 0; m < g->M; m++) {
            double s = 0;
            for (int64_t q = 0; q < j.nparts; q++) s += j.dbp[q * g->M + m];
            NN_STORE(req_db, db[m], (float)s);
        }
    nn_free(j.part);
    nn_free(j.dbp);
    return st;
}

/* -------------------------------------------------------------- entry */
static int pw_forward(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt;
    int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(pointwise): float32 only");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g;
    conv_geom_from_tensor(&g, p, &a->in[0]);
    if (!is_pointwise(&g))
        return NN_ERR(MXP_EUNSUPPORTED, "Convolution(pointwise): needs a 1x1 kernel and no padding");
    const float *x = nn_ptr(&a->in[0]);
    float *xs = NULL;
    if (is_strided(&g)) {
        if ((st = sub_run(a->ctx, &g, x, NULL, 0, 0, &xs)) < 0) { nn_free(xs); return st; }
        x = xs;
        to_unit_stride(&g);
    }
    float *apk = pack_a(nn_ptr(&a->in[1]), &g, 0);
    if (!apk) { nn_free(xs); return NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for packed weights"); }
    st = gemm_run(a->ctx, &g, x, apk, p->no_bias ? NULL : nn_ptr(&a->in[2]), nn_ptr(&a->out[0]), 0,
                  a->req[0] == MXP_REQ_ADD);
    nn_free(apk);
    nn_free(xs);
    return st;
}

static int pw_backward(const mxp_backward_args *a) {
    const conv_params *p = a->params;
    int32_t dt;
    int st = MXP_OK;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(pointwise): float32 only");
    conv_geom g;
    conv_geom_from_tensor(&g, p, &a->in_grad[0]);
    if (!is_pointwise(&g))
        return NN_ERR(MXP_EUNSUPPORTED, "Convolution(pointwise): needs a 1x1 kernel and no padding");
    int32_t req_dx = a->req[0], req_dw = a->req[1];
    int32_t req_db = (!p->no_bias && a->n_in > 2) ? a->req[2] : MXP_REQ_NULL;
    const float *dy = nn_ptr(&a->out_grad[0]);
    conv_geom full = g; /* the real input grid, for the scatter */
    int strided = is_strided(&g);
    if (strided) to_unit_stride(&g);
    if (req_dw != MXP_REQ_NULL || req_db != MXP_REQ_NULL) {
        const float *x = nn_ptr(&a->in[0]);
        float *xs = NULL;
        if (strided && req_dw != MXP_REQ_NULL) {
            if ((st = sub_run(a->ctx, &full, x, NULL, 0, 0, &xs)) < 0) { nn_free(xs); return st; }
            x = xs;
        }
        st = dw_run(a->ctx, &g, x, dy, nn_ptr(&a->in_grad[1]), req_dw,
                    req_db != MXP_REQ_NULL ? nn_ptr(&a->in_grad[2]) : NULL, req_db);
        nn_free(xs);
        if (st < 0) return st;
    }
    if (req_dx != MXP_REQ_NULL) {
        float *apk = pack_a(nn_ptr(&a->in[1]), &g, 1);
        if (!apk) return NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for packed weights");
        float *dxs = strided ? nn_alloc((uint64_t)(g.N * g.C * g.P) * sizeof(float)) : NULL;
        if (strided && !dxs) {
            nn_free(apk);
            return NN_ERR(MXP_ENOMEM, "Convolution(pointwise): no memory for the subsampled data gradient");
        }
        st = gemm_run(a->ctx, &g, dy, apk, NULL, strided ? dxs : nn_ptr(&a->in_grad[0]), 1,
                      !strided && req_dx == MXP_REQ_ADD);
        if (st >= 0 && strided) st = sub_run(a->ctx, &full, dxs, nn_ptr(&a->in_grad[0]), 1, req_dx == MXP_REQ_ADD, NULL);
        nn_free(dxs);
        nn_free(apk);
    }
    return st;
}

static int pw_supports(mxp_impl_query_args *a) {
    const conv_params *p = a->params;
    if (!conv_supports_2d(a, "pointwise")) return 0;
    if (a->in_dtypes[0] != MXP_DTYPE_F32) {
        snprintf(a->reason, a->reason_size, "pointwise: float32 only");
        return 0;
    }
    if (p->kernel.dims[0] != 1 || p->kernel.dims[1] != 1 || p->pad.dims[0] != 0 || p->pad.dims[1] != 0) {
        snprintf(a->reason, a->reason_size, "pointwise: needs a 1x1 kernel and no padding");
        return 0;
    }
    return 1;
}

const mxp_op_impl conv_pointwise_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "pointwise", .device = "cpu",
    .rank = 300, .doc = "1x1 convolution (any stride, no padding) as packed-strip GEMMs on register-blocked kernels, float32",
    .supports = pw_supports, .forward = pw_forward, .backward = pw_backward,
};
