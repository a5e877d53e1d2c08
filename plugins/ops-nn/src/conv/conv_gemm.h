/* conv_gemm.h — internal declarations shared by the gemm Convolution impl's
 * files: the plan (which of the three loop structures runs, and its block
 * sizes), the batched paths of conv_gemm_blocks.c (independent sample
 * blocks / 1x1 pixel blocks on parallel_for) and the reduction helpers
 * (conv_gemm_sum.c).  Not part of conv.h: only conv_gemm*.c use these. */
#ifndef NN_CONV_GEMM_H
#define NN_CONV_GEMM_H

#include "conv.h"

typedef struct gemm_plan {
    int one_by_one;  /* 1x1, stride 1, no pad: data is the column matrix     */
    int64_t nblk;    /* > 0: the batch runs as nblk sample blocks (items)    */
    int64_t pb, npb; /* 1x1: pixel block and blocks per sample (items N*npb) */
    int64_t rb;      /* otherwise: output rows per column block              */
    int rows;        /* row blocks as parallel items (conv_gemm_rows.c)      */
    uint64_t ws;     /* workspace bytes (row-block path only)                */
} gemm_plan;

void conv_gemm_plan(const conv_geom *g, const conv_params *p, int32_t dt, gemm_plan *pl);

/* Weight/bias gradient partials (conv_gemm_blocks.c).  The backward items
 * are split into CONV_GRAD_PARTS fixed, contiguous parts (fewer when there
 * are fewer items), each summed into its own partial: a constant, so the
 * rounding of dW/db depends neither on the thread count nor on how
 * parallel_for chunked the work (it runs everything as one chunk when no
 * helper is free) — results are bitwise reproducible.  A partial holds db
 * (double, M) then dW transposed per group ([K][Mg]: dW^T += col dy^T,
 * so BLAS transposes the small dy block when packing, not the column
 * matrix); finish sums them in part order and transposes back. */
#define CONV_GRAD_PARTS 8
typedef struct conv_gemm_partials {
    int64_t nitems;           /* parts */
    int64_t Mg, K;
    uint64_t db_bytes, bytes; /* db (double, M, padded to 64 B) then dW^T (T, M*K) */
    char **slot;              /* [nitems]; slot[q] = partial of part q */
} conv_gemm_partials;
int conv_gemm_partials_init(conv_gemm_partials *pt, int64_t nparts, const conv_geom *g, uint64_t es);
/* A zeroed partial for part q, kept in its slot (NULL: no memory). */
char *conv_gemm_partials_take(conv_gemm_partials *pt, int64_t q);
/* Sums the partials into dW/db (req; NULL skips) and frees them. */
int conv_gemm_partials_finish(conv_gemm_partials *pt, const mxp_backward_args *a, const conv_geom *g, int32_t dt,
                              int32_t rq_dw, int32_t rq_db);

/* Sample-block path (plan nblk > 0). */
int conv_gemm_fwd_blocks(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt);
int conv_gemm_bwd_blocks(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                         int32_t rq_dx, int32_t rq_dw, int32_t rq_db);
/* Row items (plan rows > 0; conv_gemm_rows.c): forward items (sample,
 * output-row block), backward parts over whole samples. */
int conv_gemm_fwd_rows(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt);
int conv_gemm_bwd_rows(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                       int32_t rq_dx, int32_t rq_dw, int32_t rq_db);
/* 1x1 path (plan one_by_one). */
int conv_gemm_fwd_1x1(const mxp_forward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt);
int conv_gemm_bwd_1x1(const mxp_backward_args *a, const conv_geom *g, const gemm_plan *pl, int32_t dt,
                      int32_t rq_dx, int32_t rq_dw, int32_t rq_db);

/* Sum of n values of row p (f32/f64 by dt) in double, several independent
 * vector accumulators (a single double accumulator is a serial add chain:
 * ~4 cycles per element). */
double conv_gemm_row_sum(int32_t dt, const void *p, int64_t n);
/* y[0..n) = v (fill) or y += v, f32/f64. */
void conv_gemm_row_bias(int32_t dt, void *y, int64_t n, double v, int add);
/* y[0..n) = t + b (store) or y += t + b, f32/f64. */
void conv_gemm_row_out(int32_t dt, void *y, const void *t, int64_t n, double b, int add);

#endif
