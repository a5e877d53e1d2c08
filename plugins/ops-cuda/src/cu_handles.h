/* cu_handles.h — cuBLAS / cuDNN handles bound to an engine worker's stream
 * (handles.c) and the error conversions of both libraries. */
#ifndef OPS_CUDA_CU_HANDLES_H
#define OPS_CUDA_CU_HANDLES_H

#include "cu_common.h"

#include <cublas_v2.h>
#include <cudnn.h>

int cu_blas_fail(cublasStatus_t st, const char *call, const char *where);
int cu_dnn_fail(cudnnStatus_t st, const char *call, const char *where);

#define CUBLAS_TRY(call, where)                                                   \
    do {                                                                          \
        cublasStatus_t cb_st_ = (call);                                           \
        if (cb_st_ != CUBLAS_STATUS_SUCCESS) return cu_blas_fail(cb_st_, #call, where); \
    } while (0)

#define CUDNN_TRY(call, where)                                                   \
    do {                                                                         \
        cudnnStatus_t cd_st_ = (call);                                           \
        if (cd_st_ != CUDNN_STATUS_SUCCESS) return cu_dnn_fail(cd_st_, #call, where); \
    } while (0)

/* The handle of (dev, stream), bound to that stream; created on first use. */
int cu_blas_handle(int32_t dev, void *stream, cublasHandle_t *out);
int cu_dnn_handle(int32_t dev, void *stream, cudnnHandle_t *out);
/* Destroy every handle (pack fini). */
void cu_handles_release(void);

#endif /* OPS_CUDA_CU_HANDLES_H */
