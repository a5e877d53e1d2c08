/* device.c — the `gpu` device (mxp_device_def) on the CUDA runtime:
 * device count and memory info, cudaMalloc'd memory for the host's pooled
 * storage (never managed memory), pinned host memory, copies host<->device
 * and device<->device, one non-blocking stream per engine worker, events,
 * and the per-worker cudaSetDevice.
 *
 * Nothing here runs at pack init: the first call that needs the driver is
 * the first slot the host calls.  On a machine without a GPU or driver,
 * `count` reports 0 (not an error) and every slot that needs a device
 * fails with "no CUDA device: cudaGetDeviceCount says ...".
 * Invariants: every CUDA call's status is checked and turned into an mxp
 * error naming the call; a slot never leaves the calling thread on another
 * device than the one its arguments name. */
#include "cu_common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ errors */
int cu_fail(cudaError_t e, const char *call, const char *where) {
    int status = e == cudaErrorMemoryAllocation ? MXP_ENOMEM : MXP_EDEVICE;
    return g_cu_host->set_error(status, "%s: %s failed: %s (%s)", where, call, cudaGetErrorName(e),
                                cudaGetErrorString(e));
}

int cu_check_launch(int cuda_status, const char *kernel, const char *op) {
    if (cuda_status == (int)cudaSuccess) return MXP_OK;
    cudaError_t e = (cudaError_t)cuda_status;
    return g_cu_host->set_error(e == cudaErrorMemoryAllocation ? MXP_ENOMEM : MXP_EDEVICE,
                                "gpu op '%s': kernel %s failed: %s (%s)", op, kernel, cudaGetErrorName(e),
                                cudaGetErrorString(e));
}

int cu_finish(void *stream, const char *what) {
    CU_TRY(cudaGetLastError(), what);
    if (cu_completion_deferred()) return MXP_OK; /* the async wrapper completes it (completion.c) */
    CU_TRY(cudaStreamSynchronize((cudaStream_t)stream), what);
    return MXP_OK;
}

int cu_refuse(mxp_impl_query_args *a, const char *fmt, ...) {
    if (a->reason && a->reason_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->reason, a->reason_size, fmt, ap);
        va_end(ap);
    }
    return 0;
}

int cu_all_f32_contig(const mxp_tensor *t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (t[i].data && (t[i].dtype != MXP_DTYPE_F32 || !mxp_tensor_is_contiguous(&t[i]))) return 0;
    return 1;
}

/* ------------------------------------------------------------ counting */
static pthread_once_t g_count_once = PTHREAD_ONCE_INIT;
static int g_count;
static cudaError_t g_count_err = cudaSuccess;

static void count_devices(void) {
    int n = 0;
    g_count_err = cudaGetDeviceCount(&n);
    g_count = g_count_err == cudaSuccess && n > 0 ? n : 0;
}

int cu_device_count(void) {
    pthread_once(&g_count_once, count_devices);
    return g_count;
}

int cu_require_device(int32_t dev_id, const char *what) {
    int n = cu_device_count();
    if (n == 0) {
        if (g_count_err != cudaSuccess)
            return g_cu_host->set_error(MXP_EDEVICE, "%s: no CUDA device: cudaGetDeviceCount says %s (%s)", what,
                                        cudaGetErrorName(g_count_err), cudaGetErrorString(g_count_err));
        return g_cu_host->set_error(MXP_EDEVICE, "%s: no CUDA device: cudaGetDeviceCount says 0 devices", what);
    }
    if (dev_id < 0 || dev_id >= n)
        return g_cu_host->set_error(MXP_EDEVICE, "%s: gpu(%d) does not exist: %d CUDA device(s), gpu(0) to gpu(%d)",
                                    what, (int)dev_id, n, n - 1);
    return MXP_OK;
}

/* Make dev_id current on the calling thread after checking it exists. */
static int use_device(int32_t dev_id, const char *what) {
    int rc = cu_require_device(dev_id, what);
    if (rc) return rc;
    CU_TRY(cudaSetDevice(dev_id), what);
    return MXP_OK;
}

/* ------------------------------------------------------------ slots */
static int gpu_count(mxp_dev_query_args *a) {
    a->count = cu_device_count();
    return MXP_OK;
}

static int gpu_mem_info(mxp_dev_query_args *a) {
    a->free_bytes = a->total_bytes = 0;
    int rc = use_device(a->dev_id, "gpu mem_info");
    if (rc) return rc;
    size_t free_b = 0, total_b = 0;
    CU_TRY(cudaMemGetInfo(&free_b, &total_b), "gpu mem_info");
    a->free_bytes = free_b;
    a->total_bytes = total_b;
    return MXP_OK;
}

/* cudaMalloc returns 256-byte aligned memory; larger alignments are refused. */
#define GPU_ALIGN 256u

static int gpu_alloc(mxp_dev_alloc_args *a) {
    a->ptr = NULL;
    int rc = use_device(a->dev_id, "gpu alloc");
    if (rc) return rc;
    if (a->alignment > GPU_ALIGN)
        return g_cu_host->set_error(MXP_EINVAL, "gpu alloc: alignment %llu exceeds cudaMalloc's %u",
                                    (unsigned long long)a->alignment, GPU_ALIGN);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, a->bytes ? a->bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free error state */
        char where[96];
        snprintf(where, sizeof where, "gpu(%d) alloc of %llu bytes", (int)a->dev_id, (unsigned long long)a->bytes);
        return cu_fail(e, "cudaMalloc", where);
    }
    a->ptr = p;
    return MXP_OK;
}

static int gpu_free(mxp_dev_alloc_args *a) {
    if (!a->ptr) return MXP_OK;
    int rc = use_device(a->dev_id, "gpu free");
    if (rc) return rc;
    CU_TRY(cudaFree(a->ptr), "gpu free");
    return MXP_OK;
}

static int gpu_alloc_pinned(mxp_dev_alloc_args *a) {
    a->ptr = NULL;
    int rc = cu_require_device(0, "pinned host alloc");
    if (rc) return rc;
    if (a->alignment > 4096)
        return g_cu_host->set_error(MXP_EINVAL, "pinned host alloc: alignment %llu exceeds a page",
                                    (unsigned long long)a->alignment);
    void *p = NULL;
    CU_TRY(cudaHostAlloc(&p, a->bytes ? a->bytes : 1, cudaHostAllocPortable), "pinned host alloc");
    a->ptr = p;
    return MXP_OK;
}

static int gpu_free_pinned(mxp_dev_alloc_args *a) {
    if (!a->ptr) return MXP_OK;
    CU_TRY(cudaFreeHost(a->ptr), "pinned host free");
    return MXP_OK;
}

static int is_gpu(mxp_device d) { return d.type == MXP_DEV_GPU; }

/* Any pair of host and gpu ends.  With UVA (every 64-bit platform CUDA
 * supports) cudaMemcpyDefault infers the direction from the pointers; peer
 * copies between two GPUs use cudaMemcpyPeer so they work without peer
 * access enabled. */
static int gpu_copy(mxp_dev_copy_args *a) {
    if (!is_gpu(a->src_dev) && !is_gpu(a->dst_dev))
        return g_cu_host->set_error(MXP_EINVAL, "gpu copy: neither end is a gpu (types %d -> %d)",
                                    (int)a->src_dev.type, (int)a->dst_dev.type);
    if (a->bytes == 0) return MXP_OK;
    int32_t dev = is_gpu(a->dst_dev) ? a->dst_dev.id : a->src_dev.id;
    if (is_gpu(a->src_dev) && is_gpu(a->dst_dev) && a->src_dev.id != a->dst_dev.id) {
        int rc = cu_require_device(a->src_dev.id, "gpu peer copy source");
        if (rc) return rc;
        rc = use_device(a->dst_dev.id, "gpu peer copy");
        if (rc) return rc;
        if (a->stream)
            CU_TRY(cudaMemcpyPeerAsync(a->dst, a->dst_dev.id, a->src, a->src_dev.id, a->bytes,
                                       (cudaStream_t)a->stream), "gpu peer copy");
        else
            CU_TRY(cudaMemcpyPeer(a->dst, a->dst_dev.id, a->src, a->src_dev.id, a->bytes), "gpu peer copy");
        return MXP_OK;
    }
    int rc = use_device(dev, "gpu copy");
    if (rc) return rc;
    if (a->stream)
        CU_TRY(cudaMemcpyAsync(a->dst, a->src, a->bytes, cudaMemcpyDefault, (cudaStream_t)a->stream), "gpu copy");
    else
        CU_TRY(cudaMemcpy(a->dst, a->src, a->bytes, cudaMemcpyDefault), "gpu copy");
    return MXP_OK;
}

static int gpu_stream_create(mxp_dev_stream_args *a) {
    a->stream = NULL;
    int rc = use_device(a->dev_id, "gpu stream create");
    if (rc) return rc;
    cudaStream_t s = NULL;
    CU_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "gpu stream create");
    a->stream = s;
    return MXP_OK;
}

static int gpu_stream_destroy(mxp_dev_stream_args *a) {
    if (!a->stream) return MXP_OK;
    int rc = use_device(a->dev_id, "gpu stream destroy");
    if (rc) return rc;
    CU_TRY(cudaStreamDestroy((cudaStream_t)a->stream), "gpu stream destroy");
    return MXP_OK;
}

static int gpu_stream_sync(mxp_dev_stream_args *a) {
    CU_TRY(cudaStreamSynchronize((cudaStream_t)a->stream), "gpu stream sync");
    return MXP_OK;
}

static int gpu_event_create(mxp_dev_stream_args *a) {
    a->event = NULL;
    int rc = use_device(a->dev_id, "gpu event create");
    if (rc) return rc;
    cudaEvent_t ev = NULL;
    CU_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "gpu event create");
    a->event = ev;
    return MXP_OK;
}

static int gpu_event_destroy(mxp_dev_stream_args *a) {
    if (!a->event) return MXP_OK;
    CU_TRY(cudaEventDestroy((cudaEvent_t)a->event), "gpu event destroy");
    return MXP_OK;
}

static int gpu_event_record(mxp_dev_stream_args *a) {
    CU_TRY(cudaEventRecord((cudaEvent_t)a->event, (cudaStream_t)a->stream), "gpu event record");
    return MXP_OK;
}

/* The stream waits on the device; no CPU thread blocks. */
static int gpu_event_wait(mxp_dev_stream_args *a) {
    CU_TRY(cudaStreamWaitEvent((cudaStream_t)a->stream, (cudaEvent_t)a->event, 0), "gpu event wait");
    return MXP_OK;
}

static int gpu_event_query(mxp_dev_stream_args *a) {
    cudaError_t e = cudaEventQuery((cudaEvent_t)a->event);
    if (e == cudaErrorNotReady) {
        a->ready = 0;
        return MXP_OK;
    }
    if (e != cudaSuccess) return cu_fail(e, "cudaEventQuery", "gpu event query");
    a->ready = 1;
    return MXP_OK;
}

static int gpu_thread_init(mxp_dev_query_args *a) { return use_device(a->dev_id, "gpu worker thread init"); }

static const mxp_device_def gpu_device = {
    MXP_HEADER(mxp_device_def),
    "gpu",
    "NVIDIA GPUs through the CUDA runtime: cudaMalloc'd pooled memory, pinned host memory, "
    "one stream per engine worker",
    MXP_DEV_GPU,
    0,
    gpu_count,
    gpu_mem_info,
    gpu_alloc,
    gpu_free,
    gpu_alloc_pinned,
    gpu_free_pinned,
    gpu_copy,
    gpu_stream_create,
    gpu_stream_destroy,
    gpu_stream_sync,
    gpu_event_create,
    gpu_event_destroy,
    gpu_event_record,
    gpu_event_wait,
    gpu_event_query,
    gpu_thread_init,
    NULL,
};

int cu_reg_device(mxp_registrar *r) { return r->add_device(r, &gpu_device); }
