/* bn_kernels.h — C-callable launchers of the BatchNorm kernels
 * (bn_kernels.cu).  Data is an (O, C, S) view of a contiguous float32
 * array (channel axis C).  Forward: with batch_stats, per-channel batch
 * mean and biased variance, the moving statistics mm/mv updated in place;
 * otherwise mm/mv are used; mean_out/var_out (may be NULL) receive the
 * statistics used; y (NULL: not written) = x * sc + shift with
 * sc = gamma / sqrt(var + eps) (gamma 1 with fix_gamma), shift = beta -
 * mean * sc.  Backward: the CPU's formulas; any gradient may be NULL.
 * req fields are mxp_req values (3 = add).  Return the launch's
 * cudaError_t as an int. */
#ifndef OPS_CUDA_BN_KERNELS_H
#define OPS_CUDA_BN_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuk_bn {
    int64_t O, C, S;
    double eps, momentum;
    int32_t fix_gamma, batch_stats;
    int32_t req, req_g, req_b, reserved;
} cuk_bn;

int cuk_bn_fwd(void *stream, const cuk_bn *p, const float *x, const float *gamma, const float *beta, float *y,
               float *mean_out, float *var_out, float *mm, float *mv);
int cuk_bn_bwd(void *stream, const cuk_bn *p, const float *x, const float *gamma, const float *dy, const float *mean,
               const float *var, float *dx, float *dgamma, float *dbeta);

#ifdef __cplusplus
}
#endif
#endif /* OPS_CUDA_BN_KERNELS_H */
