/* handles.c — cuBLAS and cuDNN handles per (device, stream).  Each engine
 * worker of a gpu owns one stream and runs one op at a time, so a handle
 * keyed by its stream is never used by two threads at once; the table only
 * guards creation.  Handles are created on first use (never at pack init:
 * that would touch the hardware) and destroyed by cu_handles_release at
 * pack fini.  Every cuBLAS/cuDNN status is turned into an mxp error naming
 * the call. */
#include "cu_handles.h"

#include <pthread.h>
#include <string.h>

#define MAX_HANDLES 256

typedef struct handle_slot {
    void *stream;
    int32_t dev;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
} handle_slot;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static handle_slot g_slots[MAX_HANDLES];
static int g_n;

int cu_blas_fail(cublasStatus_t st, const char *call, const char *where) {
    return g_cu_host->set_error(st == CUBLAS_STATUS_ALLOC_FAILED ? MXP_ENOMEM : MXP_EDEVICE, "%s: %s failed: %s (%s)",
                                where, call, cublasGetStatusName(st), cublasGetStatusString(st));
}

int cu_dnn_fail(cudnnStatus_t st, const char *call, const char *where) {
    return g_cu_host->set_error(st == CUDNN_STATUS_ALLOC_FAILED ? MXP_ENOMEM : MXP_EDEVICE, "%s: %s failed: %s", where,
                                call, cudnnGetErrorString(st));
}

/* The slot of (dev, stream), created when missing.  Caller holds g_mu. */
static int slot_of(int32_t dev, void *stream, handle_slot **out) {
    for (int i = 0; i < g_n; i++)
        if (g_slots[i].stream == stream && g_slots[i].dev == dev) {
            *out = &g_slots[i];
            return MXP_OK;
        }
    if (g_n == MAX_HANDLES)
        return g_cu_host->set_error(MXP_ENOMEM, "gpu: more than %d (device, stream) pairs hold library handles",
                                    MAX_HANDLES);
    handle_slot *s = &g_slots[g_n++];
    memset(s, 0, sizeof *s);
    s->stream = stream;
    s->dev = dev;
    *out = s;
    return MXP_OK;
}

int cu_blas_handle(int32_t dev, void *stream, cublasHandle_t *out) {
    *out = NULL;
    pthread_mutex_lock(&g_mu);
    handle_slot *s = NULL;
    int rc = slot_of(dev, stream, &s);
    if (!rc && !s->blas) {
        cublasHandle_t h = NULL;
        cublasStatus_t st = cublasCreate(&h);
        if (st != CUBLAS_STATUS_SUCCESS) rc = cu_blas_fail(st, "cublasCreate", "gpu");
        else s->blas = h;
    }
    cublasHandle_t h = rc ? NULL : s->blas;
    pthread_mutex_unlock(&g_mu);
    if (rc) return rc;
    CUBLAS_TRY(cublasSetStream(h, (cudaStream_t)stream), "gpu");
    *out = h;
    return MXP_OK;
}

int cu_dnn_handle(int32_t dev, void *stream, cudnnHandle_t *out) {
    *out = NULL;
    pthread_mutex_lock(&g_mu);
    handle_slot *s = NULL;
    int rc = slot_of(dev, stream, &s);
    if (!rc && !s->dnn) {
        cudnnHandle_t h = NULL;
        cudnnStatus_t st = cudnnCreate(&h);
        if (st != CUDNN_STATUS_SUCCESS) rc = cu_dnn_fail(st, "cudnnCreate", "gpu");
        else s->dnn = h;
    }
    cudnnHandle_t h = rc ? NULL : s->dnn;
    pthread_mutex_unlock(&g_mu);
    if (rc) return rc;
    CUDNN_TRY(cudnnSetStream(h, (cudaStream_t)stream), "gpu");
    *out = h;
    return MXP_OK;
}

void cu_handles_release(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++) {
        if (cudaSetDevice(g_slots[i].dev) != cudaSuccess) continue;
        if (g_slots[i].blas) cublasDestroy(g_slots[i].blas);
        if (g_slots[i].dnn) cudnnDestroy(g_slots[i].dnn);
    }
    g_n = 0;
    pthread_mutex_unlock(&g_mu);
}
