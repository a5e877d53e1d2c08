/* conv_winograd.h — shared declarations of the winograd Convolution impl:
 * the tiling plan and tile helpers (conv_winograd.c), the weight and bias
 * gradients (conv_winograd_wgrad.c) and the vector kernels
 * (conv_winograd_kern.c): the F(4x4,3x3) tile transforms on 16 lanes (one
 * lane = one tile, or one channel, as the caller lays them out) and the
 * 8-row register-blocked product used for every per-frequency GEMM.
 *
 * Transforms (points 0, ±1, ±2, ∞):
 *   input   V  = Bᵀ d B    6x6 data tile  -> 36 frequencies
 *   output  y  = Aᵀ M A    36 frequencies -> 4x4 output tile
 *   dy      D  = A dy Aᵀ   4x4 dy tile    -> 36 frequencies (weight gradient:
 *                          dU = Σ_tiles D ⊙ V, dW = Gᵀ dU G)
 * The kernels gather their 16 lanes themselves (in-register transposes of
 * staged rows) and store frequency xi of lane l at out[xi*stride + l]. */
#ifndef NN_CONV_WINOGRAD_H
#define NN_CONV_WINOGRAD_H

#include "nn_common.h"

/* Bytes of transformed data one forward chunk of tiles aims at (V of the
 * chunk), so it and the products' operands stay in the 2 MiB L2. */
#define WINO_CHUNK_BYTES (640ll << 10)

/* One pass: y[N][M][Ho][Wo] = conv3x3(x[N][C][H][W]), pad (ph, pw), G
 * groups; 4x4 output tiles numbered over (n, tile row, tile col). */
typedef struct wplan {
    int64_t N, C, H, W, M, G, Cg, Mg, ph, pw, Ho, Wo;
    int64_t th, tw, T;    /* tile rows and columns per image, T = N*th*tw */
    int64_t tc, nchunk;   /* tiles per chunk (multiple of 16), chunks     */
    int64_t nmb, Mgp;     /* 8-channel blocks of Mg, Mg padded to them    */
} wplan;

typedef struct wtile {
    int64_t n, oh, ow;    /* sample, output origin                        */
    int64_t ih, iw;       /* input origin of the 6x6 tile (may be < 0)    */
    int64_t srow;         /* its first input row, counted from the first
                             input row of its sample's run of tiles in
                             the chunk (the run is staged as one block)   */
    int64_t rend;         /* one past the last tile of its run, in the
                             chunk's numbering                            */
} wtile;

/* chunk_bytes: what tc tiles of tile_bytes each should take (0: 36*Cg
 * floats), rounded down to 16 tiles. */
void wino_plan_make(wplan *p, int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t G,
                    int64_t ph, int64_t pw, int64_t chunk_bytes, int64_t tile_bytes);
/* Tiles t0..t0+nt-1. */
void wino_tiles_decode(const wplan *p, int64_t t0, int64_t nt, wtile *tl);
/* The run of tiles of one sample starting at tile i: returns its end; the
 * run's input rows are tl[i].ih .. tl[i].ih + *rows - 1. */
static inline int64_t wino_run_end(const wtile *tl, int64_t i, int64_t nt, int64_t *rows) {
    (void)nt; /* decoded once per chunk: a scan here, per channel, cost ~15% of the input transform */
    int64_t e = tl[i].rend;
    *rows = tl[e - 1].srow + 6;
    return e;
}
/* Row length of a staged tile row: 4*tw + 2 columns + slack so every tile
 * can read 8 floats per row. */
static inline int64_t wino_stage_w(const wplan *p) { return 4 * p->tw + 4; }
/* Most staged input rows a chunk of tc tiles needs: every tile row it
 * spans (at most tc/tw + 2) takes 4 rows, every sample run 2 more. */
static inline int64_t wino_max_rows(const wplan *p) {
    int64_t s = p->tc / p->tw + 2; if (s > p->tc) s = p->tc;
    return 6 * s;
}
/* Prefetch rows h0..h0+rows-1 (clipped to the plane) of an H x W plane:
 * staging the next channel's rows otherwise waits on DRAM, since each
 * plane's run of rows is too short for the hardware prefetcher. */
static inline void wino_prefetch_rows(const float *plane, int64_t H, int64_t W, int64_t h0, int64_t rows) {
    int64_t a = h0 < 0 ? 0 : h0, b = h0 + rows > H ? H : h0 + rows;
    for (const float *q = plane + a * W, *end = plane + b * W; q < end; q += 16) __builtin_prefetch(q, 0, 3);
}
/* Staging: dst[i*ld + col] = plane[h0+i][col-pad] for i < rows, zero
 * outside the H x W plane (ld >= W + pad).  zero = 0 writes only the
 * values inside the plane: for a dst staged before with the same h0, pad,
 * rows and ld (the next channel of the same tiles), whose zeros stand. */
void wino_stage(const float *plane, int64_t H, int64_t W, int64_t h0, int64_t pad, int rows, int64_t ld,
                float *dst, int zero);

/* V[xi*cs*ld + c*ld + t] = (Bᵀ d B)[xi] of tile t of the chunk tl[0..nt),
 * channel c < Cg of group g (cs >= Cg rows per frequency; lanes t >= nt
 * hold finite values); st: wino_max_rows x wino_stage_w floats, tp: nt
 * pointers of scratch (conv_winograd.c). */
void wino_input_chunk(const wplan *p, const float *x, int64_t g, const wtile *tl, int64_t nt, int64_t ld, int64_t cs,
                      float *V, float *st, const float **tp);

/* Re-chunks a forward plan for the weight gradient (conv_winograd_wgrad.c). */
void wino_wgrad_plan(wplan *p);
/* dw (req) = dL/dW of pass p for x and dy, in the winograd domain; also
 * db (rq_db) = Σ dy per filter when db is not NULL. */
int wino_weight_grad(const mxp_op_ctx *ctx, const wplan *p, const float *x, const float *dy, float *dw, int32_t req,
                     float *db, int32_t rq_db);
/* db[m] (req) = Σ_n Σ_q dy[n][m][q], q < P. */
int wino_bias_grad(const mxp_op_ctx *ctx, int64_t N, int64_t M, int64_t P, const float *dy, float *db, int32_t req);

/* Weight transform of 8 filters (lane l): dst[xi*xs + l] = (G g Gᵀ)[xi]
 * with g[a][b] = k[(a*3+b)*8 + l]. */
void wino_wt_tf8(const float *k, float *dst, int64_t xs);
/* out[xi*os + l] = (Bᵀ d B)[xi] for lanes l < 16, gathering the 6x6 tile
 * d[i][j] = src[l][i*rs + j]; each src[l] + i*rs must have 8 readable
 * floats. */
void wino_in_tf16(const float *const *src, int64_t rs, float *out, int64_t os);
/* wino_in_tf16 with src[l] = a + 4*l and src[8 + l] = b + 4*l (l < 8):
 * two runs of 8 horizontally adjacent tiles; rows a + i*rs and b + i*rs
 * (i < 6) must have 36 readable floats.  Same results as wino_in_tf16,
 * with about a third of its shuffles. */
void wino_in_tf16_rows8(const float *a, const float *b, int64_t rs, float *out, int64_t os);
/* wino_in_tf16 with src[4*r + l] = p[r] + 4*l (r, l < 4): four runs of 4
 * horizontally adjacent tiles (a 16-wide map); rows p[r] + i*rs (i < 6)
 * must have 20 readable floats.  Same results as wino_in_tf16. */
void wino_in_tf16_rows4(const float *const *p, int64_t rs, float *out, int64_t os);
/* Where the 16 tile pointers tp[0..16) are runs of `run` (8 or 4)
 * horizontally adjacent tiles: tiles are at least 4 floats apart in the
 * staged rows (one tile right: 4; the next tile row or sample: more), so
 * a span of 4*(run-1) over run-1 steps means every step is one tile. */
static inline int wino_runs_of(const float *const *tp, int run) {
    for (int r = 0; r < 16; r += run)
        if (tp[r + run - 1] - tp[r] != 4 * (run - 1)) return 0;
    return 1;
}
/* out[r*64 + l*4 + c] = (Aᵀ M A)[r][c] for lanes l < 16, M[xi] =
 * in[xi*is + l]: row-major, so row r of 16 consecutive tiles is
 * contiguous. */
void wino_out_tf16r(const float *in, int64_t is, float *out);
/* (A dy Aᵀ)[xi] for lanes l < 16, gathering dy[r][c] = src[l][r*rs + c]
 * (8 floats readable per row), storing lanes 0-7 of frequency xi at
 * lo[xi*os], lanes 8-15 at lo[hi + xi*os]. */
void wino_dy_tf16(const float *const *src, int64_t rs, float *lo, int64_t hi, int64_t os);
/* wino_dy_tf16 with src[l] = a + 4*l and src[8 + l] = b + 4*l (l < 8);
 * rows a + r*rs, b + r*rs (r < 4) must have 32 readable floats. */
void wino_dy_tf16_rows8(const float *a, const float *b, int64_t rs, float *lo, int64_t hi, int64_t os);
/* wino_dy_tf16 with src[4*r + l] = p[r] + 4*l (r, l < 4); rows
 * p[r] + i*rs (i < 4) must have 16 readable floats. */
void wino_dy_tf16_rows4(const float *const *p, int64_t rs, float *lo, int64_t hi, int64_t os);
/* dU[i*ldu + j] += Σ_{t<ld} D[i*ld + t] V[j*ld + t] for i < Mb, j < Cb
 * (both multiples of 4, ld of 16): tiles in the lanes
 * (conv_winograd_tlkern.c). */
void wino_tl_product(int64_t Mb, int64_t Cb, int64_t ld, const float *D, const float *V, float *dU, int64_t ldu);
/* C[i*ldc + j] = (acc ? C[i*ldc + j] : 0) + Σ_k A[k*8 + i] B[k*ldb + j]
 * for i < 8 and j < n; n must be a multiple of 16. */
void wino_gemm8(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t n, int acc);

#endif
