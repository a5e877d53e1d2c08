/* optim_kernels.h — C-callable launcher of the fused optimizer update
 * kernel (optim_kernels.cu): one pass per step, every array read once and
 * written once.  kind: CUK_OPT_*.  w, g and y have n elements; s1 is mom
 * (sgd_mom), mean (adam) or n (rmsprop), s2 is var (adam); unused states
 * are NULL.  States are updated in place; y (=|+=) the new weight, and y
 * may be w itself; y NULL (req null) updates only the states.  Returns the launch's cudaError_t as an int. */
#ifndef OPS_CUDA_OPTIM_KERNELS_H
#define OPS_CUDA_OPTIM_KERNELS_H

#include <stdint.h>

#include "functors/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { CUK_OPT_SGD, CUK_OPT_MOM, CUK_OPT_ADAM, CUK_OPT_RMS };

int cuk_optimizer(void *stream, int kind, const cu_opt_hp *hp, const float *w, const float *g, float *s1, float *s2,
                  float *y, int64_t n, int add);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_OPTIM_KERNELS_H */
