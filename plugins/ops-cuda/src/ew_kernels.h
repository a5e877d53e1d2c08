/* ew_kernels.h — C-callable launchers of the elementwise CUDA kernels
 * (ew_kernels.cu): unary, binary, scalar, broadcast forward and backward,
 * and fill.  Each enqueues one kernel on `stream` (a cudaStream_t) and
 * returns the cudaError_t of the launch as an int (0 = cudaSuccess); the
 * caller turns it into an mxp error and waits for the stream.  All tensors
 * are contiguous float32 device memory of n elements; `add` selects
 * dst += value (req add) over dst = value.  n == 0 launches nothing. */
#ifndef OPS_CUDA_EW_KERNELS_H
#define OPS_CUDA_EW_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUK_MAX_NDIM 8

/* A broadcast of lhs and rhs to the output: the output's shape and, for
 * each input, its element strides aligned to the output's dimensions
 * (0 where the input has size 1 or lacks the dimension). */
typedef struct cuk_bcast {
    int32_t ndim;
    int32_t reserved;
    int64_t shape[CUK_MAX_NDIM];
    int64_t lhs_st[CUK_MAX_NDIM];
    int64_t rhs_st[CUK_MAX_NDIM];
} cuk_bcast;

int cuk_fill(void *stream, float *dst, float value, int64_t n, int add);
int cuk_unary_fwd(void *stream, int op, const float *x, float *y, int64_t n, int add);
/* v: the op's output or input (cu_unary_grad_uses_output). */
int cuk_unary_bwd(void *stream, int op, const float *dy, const float *v, float *dx, int64_t n, int add);
int cuk_scalar_fwd(void *stream, int op, const float *x, float s, float *y, int64_t n, int add);
int cuk_scalar_bwd(void *stream, int op, const float *dy, const float *v, float s, float *dx, int64_t n,
                   int add);
int cuk_binary_fwd(void *stream, int op, const float *a, const float *b, float *y, int64_t n, int add);
/* Either gradient may be NULL (req null).  Each element is read before it
 * is written, so dy may share memory with dlhs. */
int cuk_binary_bwd(void *stream, int op, const float *dy, const float *a, const float *b, float *dlhs,
                   int add_l, float *drhs, int add_r, int64_t n);
int cuk_bcast_fwd(void *stream, int op, const cuk_bcast *g, const float *a, const float *b, float *y,
                  int add);
/* The gradient of input `which` (0 lhs, 1 rhs), contiguous with that
 * input's shape: for each of its elements, the sum over the broadcast
 * dimensions of the op's gradient; dy is contiguous with the output's
 * shape.  a and b may be NULL when the op's gradient does not read them. */
int cuk_bcast_bwd(void *stream, int op, const cuk_bcast *g, const float *dy, const float *a, const float *b,
                  int which, float *dst, int add);

/* y[r][c] += b[c] for a rows x cols row-major y (bias of FullyConnected). */
int cuk_bias_rows(void *stream, float *y, const float *b, int64_t rows, int64_t cols);
/* dst[c] (=|+=) sum over r of src[r][c], src rows x cols row-major. */
int cuk_col_sum(void *stream, float *dst, const float *src, int64_t rows, int64_t cols, int add);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_EW_KERNELS_H */
