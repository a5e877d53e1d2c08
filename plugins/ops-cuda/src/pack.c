/* pack.c — the ops-cuda pack descriptor and init: keeps the host table and
 * registers the `gpu` device and the GPU implementations of ops that
 * ops-basic and ops-nn define.  Needs host ABI 1.1 (typed reads of another
 * pack's op parameters), so min_host_minor is 1.  init touches no hardware (no CUDA call at
 * all), so the pack loads, lists and generates its manifest on a machine
 * without a GPU or driver; the device then reports 0 devices.
 * mxp_plugin_v1 is the only exported symbol (-fvisibility=hidden). */
#include "cu_common.h"
#include "cu_handles.h"

const mxp_host *g_cu_host;

static int cu_init(const mxp_plugin_init_args *a) {
    g_cu_host = a->host;
    mxp_registrar async_reg; /* every impl registered as an async wrapper (completion.c) */
    cu_async_registrar(a->registrar, &async_reg);
    int (*const regs[])(mxp_registrar *) = {
        cu_reg_device, cu_reg_elemwise, cu_reg_copy, cu_reg_optim, cu_reg_fc, cu_reg_conv_cudnn,
        cu_reg_conv_direct, cu_reg_activation, cu_reg_pooling, cu_reg_softmax, cu_reg_dropout,
        cu_reg_dot, cu_reg_batchnorm, cu_reg_sum_n, cu_reg_reduce,
    };
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++) {
        int rc = regs[i](&async_reg);
        if (rc) return rc;
    }
    return MXP_OK;
}

static void cu_fini(const mxp_plugin_fini_args *a) {
    (void)a;
    cu_completion_stop();
    cu_handles_release();
    g_cu_host = NULL;
}

static const mxp_plugin_desc cu_desc = {
    MXP_HEADER(mxp_plugin_desc), 1, 0, 0, "ops-cuda", "0.1.0",
    "The gpu device (CUDA runtime) and GPU implementations: CUDA elementwise, broadcast, copy and "
    "optimizer kernels, reductions and clip, ElementWiseSum, Philox Dropout, BatchNorm, cuBLAS FullyConnected and dot, "
    "cuDNN Convolution/Pooling/softmax, a direct CUDA Convolution; ops complete asynchronously",
    "Apache-2.0", cu_init, cu_fini,
};

MXP_PLUGIN_DEFINE(cu_desc)
