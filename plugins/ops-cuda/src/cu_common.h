/* cu_common.h — what every C file of the ops-cuda pack shares: the host
 * table, turning CUDA runtime errors into mxp errors that name the call and
 * the place, checking that a device exists, and finishing an op's work on
 * its stream.
 *
 * Execution model: the host runs each GPU op on an engine worker that owns
 * one CUDA stream (ctx->stream).  Each impl is written as if synchronous:
 * it enqueues its kernels on ctx->stream and returns through cu_finish.
 * At registration every impl is wrapped (cu_async_registrar, completion.c)
 * into an MXP_IMPL_ASYNC impl: the wrapper runs the impl with cu_finish
 * deferred, then records an event and lets the completion thread call
 * ctx->complete when the GPU is done.  Only then does the engine let
 * readers of the op's outputs run, so a later op on another worker's
 * stream, or the host, never reads memory still being written, and no CPU
 * thread waits on a stream.  Every return path of an impl is covered (an
 * early "nothing to do" return completes at once).  Called without
 * ctx->complete (tune's timing runs, host.invoke) the wrapper waits for
 * the stream instead.
 * Only float32 tensors run on the GPU; impls refuse other dtypes in
 * `supports` with the reason. */
#ifndef OPS_CUDA_CU_COMMON_H
#define OPS_CUDA_CU_COMMON_H

#include <mxp/plugin.h>

#include <cuda_runtime_api.h>

extern const mxp_host *g_cu_host;

/* Record "where: call failed: name (text)" as an mxp error and return its
 * status (MXP_ENOMEM for allocation failures, MXP_EDEVICE otherwise). */
int cu_fail(cudaError_t e, const char *call, const char *where);

/* Evaluate a CUDA runtime call; on failure return cu_fail(...) from the
 * enclosing function. */
#define CU_TRY(call, where)                                          \
    do {                                                             \
        cudaError_t cu_e_ = (call);                                  \
        if (cu_e_ != cudaSuccess) return cu_fail(cu_e_, #call, where); \
    } while (0)

/* Number of CUDA devices (0 without a GPU or driver).  Never fails; the
 * reason for 0 is kept for cu_require_device's message. */
int cu_device_count(void);

/* MXP_OK when gpu(dev_id) exists, else an MXP_EDEVICE error naming what
 * was asked: "no CUDA device: cudaGetDeviceCount says ..." or "gpu(3) does
 * not exist: 2 CUDA device(s)". */
int cu_require_device(int32_t dev_id, const char *what);

/* After enqueueing an op's kernels on `stream`: check the launch status;
 * inside the async wrapper return at once (the wrapper completes the op
 * when the stream gets there), otherwise wait for the stream and check
 * the kernels' status.  `what` names the op. */
int cu_finish(void *stream, const char *what);

/* completion.c.  cu_async_registrar: a registrar whose add_impl registers
 * an asynchronous wrapper of the impl through `real` (the wrappers live
 * until cu_completion_stop).  cu_completion_deferred: 1 while the calling
 * thread runs a wrapped impl.  cu_completion_stop (at fini): completes
 * what is in flight, joins the thread, frees events and wrappers. */
void cu_async_registrar(mxp_registrar *real, mxp_registrar *out);
int cu_completion_deferred(void);
void cu_completion_stop(void);

/* Status of a kernel launcher (the .cu side returns cudaError_t as int). */
int cu_check_launch(int cuda_status, const char *kernel, const char *op);

/* Write "only float32 contiguous tensors" style reasons for supports(). */
int cu_refuse(mxp_impl_query_args *a, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* 1 when every given tensor is float32 and contiguous (or absent). */
int cu_all_f32_contig(const mxp_tensor *t, uint32_t n);

/* Registration entry points of the pack's files. */
int cu_reg_device(mxp_registrar *r);
int cu_reg_elemwise(mxp_registrar *r);
int cu_reg_copy(mxp_registrar *r);
int cu_reg_optim(mxp_registrar *r);
int cu_reg_fc(mxp_registrar *r);
int cu_reg_conv_cudnn(mxp_registrar *r);
int cu_reg_conv_direct(mxp_registrar *r);
int cu_reg_activation(mxp_registrar *r);
int cu_reg_pooling(mxp_registrar *r);
int cu_reg_softmax(mxp_registrar *r);
int cu_reg_dropout(mxp_registrar *r);
int cu_reg_dot(mxp_registrar *r);
int cu_reg_batchnorm(mxp_registrar *r);
int cu_reg_sum_n(mxp_registrar *r);
int cu_reg_reduce(mxp_registrar *r);

#endif /* OPS_CUDA_CU_COMMON_H */
