/* conv_strip.c — Convolution impl "strip": float32 2-D convolutions whose
 * output rows are at most 32 pixels wide (LeNet's 5x5 layers, small
 * CIFAR-sized maps).  This file: the forward pass and the impl's table;
 * the backward pass is conv_strip_bwd.c.
 *
 * Forward, stride 1 and at most 256 taps: the direct impl's kernels
 * (dfast_forward, kw-shifted copies + register-blocked correlation): on
 * LeNet's conv1 and conv2 they beat the strip kernel below (conv1: 25-row
 * panels of 24 useful pixels in 32).  Otherwise (strides) the strip kernel:
 * items are (sample, group, strip), a strip being as many whole
 * output rows as fit in 32 pixels.  Per strip the column matrix of just
 * those pixels is built by im2col straight into a [K][32] panel (K =
 * Cg*kh*kw; a 5x5 layer over 20 channels gives 500 rows, 64 KiB, L2
 * resident and read sequentially), and pwk_gemm (conv_pointwise_kern.c:
 * weights packed [k][mb] and broadcast, 2x16 pixels per row in AVX-512
 * accumulators) writes each block of output channels in place with the
 * bias.  That replaces gemm's im2col of whole samples + an OpenBLAS call
 * per item, whose packing costs as much as the product on such small
 * matrices.  The output channels are cut into near-equal blocks of at most
 * PW_MB rows (50 -> 5 x 10) so no block runs a thin tail.
 * Not here: output rows wider than 32 pixels (refused in `supports`; the
 * other impls serve them), float64.  No workspace: scratch comes from the
 * host pool (one panel per parallel range; weights repacked on every
 * forward, 50x500 floats: microseconds, in parallel by row block). */
#include "conv_strip.h"
#include "conv_direct_fast.h"

#include <stdatomic.h>

#define ST_WIDTH PW_STRIP /* pixels per strip panel column block */

static int64_t st_min(int64_t a, int64_t b) { return a < b ? a : b; }

typedef struct stjob {
    const conv_geom *g;
    const float *x, *w, *bias;
    float *apk, *out;
    st_rowblocks rb;
    int64_t rows, strips; /* output rows per strip, strips per sample */
    int add;
    atomic_int no_memory;
} stjob;

/* Weights of (group, row block) packed [k][mbs] at apk + (gr*Mg + r0)*K. */
static void pack_range(void *arg, int64_t b, int64_t e) {
    stjob *j = arg;
    const conv_geom *g = j->g;
    for (int64_t it = b; it < e; it++) {
        int64_t gr = it / j->rb.nb, blk = it % j->rb.nb;
        int64_t r0 = st_rb_start(&j->rb, blk), mbs = st_rb_size(&j->rb, blk);
        float *dst = j->apk + (gr * g->Mg + r0) * g->K;
        const float *src = j->w + (gr * g->Mg + r0) * g->K;
        for (int64_t i = 0; i < mbs; i++)
            for (int64_t k = 0; k < g->K; k++) dst[k * mbs + i] = src[i * g->K + k];
    }
}

static void fwd_range(void *arg, int64_t b, int64_t e) {
    stjob *j = arg;
    const conv_geom *g = j->g;
    float *panel = nn_alloc((uint64_t)(g->K * ST_WIDTH) * sizeof(float));
    if (!panel) { /* an item cannot return a status: the driver reports it */
        atomic_store(&j->no_memory, 1);
        return;
    }
    float tmp[PW_MB * ST_WIDTH];
    for (int64_t it = b; it < e; it++) {
        int64_t s = it % j->strips, ng = it / j->strips, n = ng / g->G, gr = ng % g->G;
        int64_t oh0 = s * j->rows, oh1 = st_min(g->Ho, oh0 + j->rows);
        int64_t p0 = oh0 * g->Wo, np = (oh1 - oh0) * g->Wo;
        const float *xs = j->x + (n * g->C + gr * g->Cg) * g->H * g->W;
        conv_im2col(MXP_DTYPE_F32, g, xs, 0, g->Cg, oh0, oh1, panel, ST_WIDTH);
        if (np < ST_WIDTH) /* columns past the strip: zero, their outputs are dropped */
            for (int64_t k = 0; k < g->K; k++) memset(panel + k * ST_WIDTH + np, 0, (size_t)(ST_WIDTH - np) * sizeof(float));
        float *out = j->out + (n * g->M + gr * g->Mg) * g->P + p0;
        for (int64_t blk = 0; blk < j->rb.nb; blk++) {
            int64_t r0 = st_rb_start(&j->rb, blk);
            int mbs = (int)st_rb_size(&j->rb, blk);
            const float *a = j->apk + (gr * g->Mg + r0) * g->K;
            const float *bias = j->bias ? j->bias + gr * g->Mg + r0 : NULL;
            if (np == ST_WIDTH) {
                pwk_gemm(mbs, a, panel, g->K, out + r0 * g->P, g->P, bias, j->add);
                continue;
            }
            pwk_gemm(mbs, a, panel, g->K, tmp, ST_WIDTH, bias, 0);
            for (int i = 0; i < mbs; i++) {
                float *o = out + (r0 + i) * g->P;
                if (j->add) for (int64_t l = 0; l < np; l++) o[l] += tmp[i * ST_WIDTH + l];
                else memcpy(o, tmp + i * ST_WIDTH, (size_t)np * sizeof(float));
            }
        }
    }
    nn_free(panel);
}

static int st_forward(const mxp_forward_args *a) {
    const conv_params *p = a->params;
    int32_t dt;
    int st;
    if ((st = conv_check_fwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(strip): float32 only");
    if (a->req[0] == MXP_REQ_NULL) return MXP_OK;
    conv_geom g;
    conv_geom_from_tensor(&g, p, &a->in[0]);
    if (g.sh == 1 && g.sw == 1 && g.kh * g.kw <= 256) return dfast_forward(a, &g);
    if (g.Wo > ST_WIDTH || g.Wo < 1 || g.Ho < 1)
        return NN_ERR(MXP_EUNSUPPORTED, "Convolution(strip): output rows of %lld pixels (at most %d)",
                      (long long)g.Wo, ST_WIDTH);
    stjob j = {&g, nn_ptr(&a->in[0]), nn_ptr(&a->in[1]), p->no_bias ? NULL : nn_ptr(&a->in[2]), NULL,
               nn_ptr(&a->out[0]), st_row_blocks(g.Mg), ST_WIDTH / g.Wo, 0, a->req[0] == MXP_REQ_ADD, 0};
    j.strips = (g.Ho + j.rows - 1) / j.rows;
    j.apk = nn_alloc((uint64_t)(g.M * g.K) * sizeof(float));
    if (!j.apk) return NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for packed weights");
    st = nn_parallel(a->ctx, g.G * j.rb.nb, 1, pack_range, &j);
    if (st >= 0) st = nn_parallel(a->ctx, g.N * g.G * j.strips, 1, fwd_range, &j);
    if (st >= 0 && atomic_load(&j.no_memory))
        st = NN_ERR(MXP_ENOMEM, "Convolution(strip): no memory for a %lld-float column panel",
                    (long long)(g.K * ST_WIDTH));
    nn_free(j.apk);
    return st;
}

static int st_backward(const mxp_backward_args *a) {
    int32_t dt;
    int st;
    if ((st = conv_check_bwd(a, &dt)) < 0) return st;
    if (dt != MXP_DTYPE_F32) return NN_ERR(MXP_EUNSUPPORTED, "Convolution(strip): float32 only");
    conv_geom g;
    conv_geom_from_tensor(&g, a->params, &a->in_grad[0]);
    return st_backward_run(a, &g);
}

static int st_supports(mxp_impl_query_args *a) {
    if (!conv_supports_2d(a, "strip")) return 0;
    if (a->in_dtypes[0] != MXP_DTYPE_F32) {
        snprintf(a->reason, a->reason_size, "strip: float32 only");
        return 0;
    }
    conv_geom g;
    conv_geom_init(&g, a->params, &a->in_shapes[0]);
    if (g.Wo > ST_WIDTH) {
        snprintf(a->reason, a->reason_size, "strip: output rows of %lld pixels (at most %d)", (long long)g.Wo,
                 ST_WIDTH);
        return 0;
    }
    return 1;
}

const mxp_op_impl conv_strip_impl = {
    .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "strip", .device = "cpu",
    .rank = 200, .doc = "backward: im2col chunks + register-blocked dW / W^T dy kernels; forward: direct's kernels at stride 1, else per-strip im2col panels; "
                        "float32, output rows up to 32 pixels",
    .supports = st_supports, .forward = st_forward, .backward = st_backward,
};
