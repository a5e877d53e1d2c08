/* nn_kernels.h — C-callable launchers of the CUDA kernels of the nn ops
 * that cuDNN does not cover (nn_kernels.cu).  Return the launch's
 * cudaError_t as an int. */
#ifndef OPS_CUDA_NN_KERNELS_H
#define OPS_CUDA_NN_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* SoftmaxOutput's loss gradient over an (O, K, S) view of the softmax p:
 *   dx[o][k][s] = ignored ? 0 : scale * (p[o][k][s] - (k == label ? on : off))
 * with label = (int64) labels[o*S + s], ignored = use_ignore && the label
 * equals ignore_label. */
typedef struct cuk_softmax_ce {
    int64_t O, K, S;
    float scale, on, off;
    int32_t use_ignore;
    float ignore_label;
} cuk_softmax_ce;

int cuk_softmax_ce_grad(void *stream, const cuk_softmax_ce *c, const float *p, const float *labels, float *dx, int add);

/* Dropout over n elements from a Philox4x32-10 stream (functors/philox.h):
 * keep element i when value i of (key, counter) < threshold (= keep
 * probability * 2^32); mask[i] = keep ? scale : 0; y (=|+=) x * mask[i]
 * unless y is NULL. */
typedef struct cuk_dropout {
    uint64_t key, counter;
    double threshold;
    float scale;
} cuk_dropout;

int cuk_dropout_fwd(void *stream, const cuk_dropout *d, const float *x, float *mask, float *y, int64_t n, int add);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_NN_KERNELS_H */
