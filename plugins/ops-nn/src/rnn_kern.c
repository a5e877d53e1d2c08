/* rnn_kern.c — the fused RNN's arithmetic (MXNet's RNN op on the CPU):
 * LSTM, GRU and Elman (relu/tanh) layers, stacked and optionally
 * bidirectional, over MXNet's packed parameter vector.
 *
 * Parameter layout (MXNet's / cuDNN's, rnn-inl.h GetRnnParamSize): all
 * weights first -- for each layer, for each direction, the i2h weight
 * (G*H, I) then the h2h weight (G*H, H), I = C for layer 0 and D*H above --
 * then all biases in the same order, i2h bias (G*H) then h2h bias (G*H).
 * Gate blocks: LSTM i, f, g, o; GRU r, z, n with
 *   n = tanh(Wx_n x + bx_n + r * (Wh_n h + bh_n)),  h' = (1 - z) n + z h.
 * The reverse direction runs t = T-1 .. 0 and writes its half of each
 * output row; its final state (hy, cy) is the one at t = 0.
 *
 * Per layer and direction, one GEMM projects the whole sequence
 * (T*N rows) through the i2h weights; each step then does one (N, H) x
 * (H, G*H) GEMM and the elementwise gate math.  Backward is the mirror:
 * per step one GEMM for dh_prev, then whole-sequence GEMMs for dWx, dWh
 * and dx.  GEMMs are fc_kern's small float32 kernels where they apply,
 * else OpenBLAS split over ctx->parallel_for (nn_gemm_par).
 *
 * Backward recomputes the forward (the op cannot carry the per-step gates
 * from forward to backward, see rnn.c).  Dropout between layers therefore
 * needs the same mask in both passes: it is drawn from a counter-based hash
 * keyed by the bits of the data and the parameters (which the optimizer
 * changes every step), so forward and backward of one call agree and
 * different batches/steps get different masks.  It is not tied to the
 * host's seeded RNG.
 *
 * Scratch (nn_alloc, one block per call): every layer's output, the dropped
 * inputs, and the gates (and LSTM cell / GRU h2h n-part) of every layer in
 * training, of one layer in inference. */
#include "rnn_kern.h"
#include "fc_kern.h"

#include <math.h>
#include <stdint.h>

int64_t rnn_param_count(int mode, int64_t L, int64_t D, int64_t C, int64_t H) {
    int64_t g = mode == RNN_LSTM ? 4 : mode == RNN_GRU ? 3 : 1;
    int64_t size = g * H * D;
    return (C + H + 2) * size + (L - 1) * (D * H + H + 2) * size;
}

static int64_t rk_in_size(const rnn_problem *pb, int64_t l) { return l ? pb->D * pb->H : pb->C; }

/* Offset of layer l, direction d's i2h weight (l == L gives the weights' total). */
static int64_t rk_w_off(const rnn_problem *pb, int64_t l, int64_t d) {
    int64_t gh = pb->G * pb->H, o = 0;
    for (int64_t k = 0; k < l; k++) o += pb->D * gh * (rk_in_size(pb, k) + pb->H);
    return l < pb->L ? o + d * gh * (rk_in_size(pb, l) + pb->H) : o;
}

static int64_t rk_b_off(const rnn_problem *pb, int64_t l, int64_t d) {
    return rk_w_off(pb, pb->L, 0) + (l * pb->D + d) * 2 * pb->G * pb->H;
}

/* C = op(A) op(B) (+ C when acc); C is dense (ldc == n). */
static int rk_gemm(const mxp_op_ctx *ctx, int32_t dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                   int64_t lda, const void *b, int64_t ldb, int acc, void *c) {
    if (m <= 0 || n <= 0 || k <= 0) return MXP_OK;
    if (dt == MXP_DTYPE_F32 && nn_sgemm_small(ctx, ta, tb, m, n, k, a, lda, b, ldb, acc, c, n, NULL)) return MXP_OK;
    return nn_gemm_par(ctx, dt, ta, tb, m, n, k, 1.0, a, lda, b, ldb, acc ? 1.0 : 0.0, c, n);
}

/* splitmix64's finaliser: a bijective mix with full avalanche. */
static uint64_t rk_mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rk_hash_bytes(uint64_t h, const void *p, uint64_t bytes) {
    const unsigned char *s = p;
    uint64_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = rk_mix(h ^ w);
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(bytes - i));
    return rk_mix(h ^ w ^ bytes);
}

/* The dropout key of one call: the bits of data and parameters. */
static uint64_t rk_dropout_key(const rnn_problem *pb) {
    uint64_t es = pb->dtype == MXP_DTYPE_F32 ? 4 : 8;
    uint64_t h = rk_hash_bytes(0x524e4e64726f70ull, pb->x, (uint64_t)(pb->T * pb->N * pb->C) * es);
    return rk_hash_bytes(h, pb->w, (uint64_t)rnn_param_count(pb->mode, pb->L, pb->D, pb->C, pb->H) * es);
}

/* 1 when element e of layer l's output is kept. */
static inline int rk_keep(uint64_t key, int64_t l, int64_t e, double p) {
    uint64_t u = rk_mix(rk_mix(key ^ (uint64_t)(l + 1)) + (uint64_t)e);
    return (double)(u >> 11) * 0x1p-53 >= p;
}

#define RT float
#define RK(name) name##_f32
#define RT_EXP expf
#define RT_TANH tanhf
#include "rnn_kern_tmpl.h"
#undef RT
#undef RK
#undef RT_EXP
#undef RT_TANH

#define RT double
#define RK(name) name##_f64
#define RT_EXP exp
#define RT_TANH tanh
#include "rnn_kern_tmpl.h"
#undef RT
#undef RK
#undef RT_EXP
#undef RT_TANH

int rnn_forward(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_fwd_out *o) {
    return pb->dtype == MXP_DTYPE_F32 ? rnn_forward_f32(ctx, pb, o) : rnn_forward_f64(ctx, pb, o);
}

int rnn_backward(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_bwd_io *io) {
    return pb->dtype == MXP_DTYPE_F32 ? rnn_backward_f32(ctx, pb, io) : rnn_backward_f64(ctx, pb, io);
}
