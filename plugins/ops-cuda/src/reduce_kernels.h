/* reduce_kernels.h — C-callable launchers of the reduction and clip
 * kernels (reduce_kernels.cu).  Each enqueues one kernel on `stream` and
 * returns the launch's cudaError_t as an int (0 = success).  Tensors are
 * contiguous float32 device memory; `add` selects += over =.
 *
 * A reduction is described by its split of the input's dimensions: the
 * kept ones (in order, with the input's element strides) index the output
 * row-major; the reduced ones (with their strides) are walked for each
 * output element.  Every output element is computed by one thread in
 * double, in the input's row-major order — the same order as ops-basic's
 * CPU reduce, and independent of the launch shape. */
#ifndef OPS_CUDA_REDUCE_KERNELS_H
#define OPS_CUDA_REDUCE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUK_RED_MAX_NDIM 8

typedef struct cuk_reduce {
    int32_t op;                          /* enum cu_reduce_op (functors/reduce.h) */
    int32_t n_keep, n_red;
    int32_t reserved;
    int64_t keep_size[CUK_RED_MAX_NDIM], keep_stride[CUK_RED_MAX_NDIM];
    int64_t red_size[CUK_RED_MAX_NDIM], red_stride[CUK_RED_MAX_NDIM];
    int64_t n_out;                       /* product of keep_size             */
    int64_t count;                       /* product of red_size              */
} cuk_reduce;

int cuk_reduce_fwd(void *stream, const cuk_reduce *r, const float *x, float *y, int add);
/* dx for every input element (n_in of them, row-major input with `ndim`
 * dims `in_size`); y and x may be NULL for sum and mean. */
int cuk_reduce_bwd(void *stream, const cuk_reduce *r, int ndim, const int64_t *in_size, const uint8_t *reduced,
                   const float *dy, const float *x, const float *y, float *dx, int64_t n_in, int add);

/* clip: y = min(max(x, lo), hi); dx = dy where lo <= x <= hi, else 0. */
int cuk_clip_fwd(void *stream, const float *x, float *y, float lo, float hi, int64_t n, int add);
int cuk_clip_bwd(void *stream, const float *dy, const float *x, float *dx, float lo, float hi, int64_t n, int add);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_REDUCE_KERNELS_H */
