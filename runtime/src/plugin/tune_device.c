/* tune_device.c — what `tune` needs to time an implementation on a device
 * whose memory the host cannot touch (the GPU) and to time asynchronous
 * impls (every GPU impl is one):
 *   - scratch: tune.c fills its scratch tensors on the host; for such a
 *     device each buffer is copied into a block of the device's pooled
 *     storage and the tensor points there until the timing ends (then the
 *     host pointer is put back for tune.c to free);
 *   - a stream: the timing thread gets one as an engine worker of the
 *     device does (the device's thread_init, e.g. cudaSetDevice, and
 *     stream_create), so the impl runs exactly as on a worker;
 *   - completion: an async impl's run is complete when its ctx->complete
 *     was called; the timing thread waits for that, so the measured time
 *     includes the device's work.
 * Host-accessible devices (cpu) need none of it: every call is a no-op
 * there and sync impls run as before.  Not here: candidates, runs, the
 * cache (tune.c). */
#include "tune_device.h"

#include "plugin/plugin_impl.h"

#include "engine/engine.h"
#include "ndarray/ndarray.h"
#include "storage/storage.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int host_accessible(mxp_device dev) {
    if (dev.type == MXP_DEV_CPU || dev.type == MXP_DEV_CPU_PINNED || dev.type == MXP_DEV_CPU_SHARED) return 1;
    const mxp_storage_backend *be = mxp__storage_backend(dev.type);
    return !be || be->host_accessible;
}

int mxp__tune_dev_begin(mxp_device dev, mxp__tune_dev *td) {
    memset(td, 0, sizeof *td);
    td->dev = dev;
    td->on_device = !host_accessible(dev);
    if (!td->on_device) return MXP_OK;
    const mxp__engine_device_hooks *h = mxp__engine_device_hooks_for(dev.type);
    if (h && h->stream_create) {
        int rc = h->stream_create(dev, 0, &td->stream);
        if (rc) return mxp__error_prefix(rc, "tune on %s(%d): a stream for the timing thread", mxp__device_name(dev.type),
                                         (int)dev.id);
    }
    return MXP_OK;
}

int mxp__tune_dev_move(mxp__tune_dev *td, void **ptr, size_t bytes) {
    if (!td->on_device || !*ptr) return MXP_OK;
    if (td->n == td->cap) {
        int cap = td->cap ? 2 * td->cap : 16;
        mxp__tune_dev_slot *s = realloc(td->slots, (size_t)cap * sizeof *s);
        if (!s) return mxp__error_oom("tune device scratch");
        td->slots = s;
        td->cap = cap;
    }
    mxp__tune_dev_slot *s = &td->slots[td->n];
    int rc = mxp__storage_alloc(td->dev, bytes, &s->block);
    if (rc) return mxp__error_prefix(rc, "tune: %zu bytes of scratch on %s(%d)", bytes, mxp__device_name(td->dev.type),
                                     (int)td->dev.id);
    mxp_ndarray_copy_fn fn = NULL;
    void *ctx = NULL;
    rc = mxp__ndarray_find_copy((mxp_device){MXP_DEV_CPU, 0}, td->dev, &fn, &ctx);
    if (rc == MXP_OK) {
        mxp_run_ctx rctx = {sizeof(mxp_run_ctx), td->dev, td->stream, 0, 0};
        rc = fn(ctx, s->block.ptr, td->dev, *ptr, (mxp_device){MXP_DEV_CPU, 0}, bytes, &rctx);
    }
    if (rc) {
        mxp__storage_free(&s->block);
        return mxp__error_prefix(rc, "tune: copying scratch to %s(%d)", mxp__device_name(td->dev.type), (int)td->dev.id);
    }
    s->where = ptr;
    s->host = *ptr;
    *ptr = s->block.ptr;
    td->n++;
    return MXP_OK;
}

void mxp__tune_dev_end(mxp__tune_dev *td) {
    for (int i = td->n - 1; i >= 0; i--) {
        *td->slots[i].where = td->slots[i].host;
        mxp__storage_free(&td->slots[i].block);
    }
    free(td->slots);
    td->slots = NULL;
    td->n = td->cap = 0;
    if (td->stream) {
        const mxp__engine_device_hooks *h = mxp__engine_device_hooks_for(td->dev.type);
        if (h && h->stream_destroy) h->stream_destroy(td->dev, td->stream);
        td->stream = NULL;
    }
}

/* ------------------------------------------------------------ async runs */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int32_t status;
    char msg[512];
} waiter;

static void waiter_complete(void *token, int32_t status, const char *message) {
    waiter *w = token;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    if (message) snprintf(w->msg, sizeof w->msg, "%s", message);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int mxp__tune_run(const mxp__inst *inst, const mxp__run *r, mxp_op_ctx *ctx) {
    if (!mxp__inst_is_async(inst)) return mxp__inst_run(inst, r, ctx);
    waiter w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    mxp__run ar = *r;
    ar.complete = waiter_complete;
    ar.complete_token = &w;
    int rc = mxp__inst_run(inst, &ar, ctx);
    if (rc == MXP_OK) { /* the impl took the run: it completes exactly once */
        pthread_mutex_lock(&w.mu);
        while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        if (w.status != MXP_OK)
            rc = mxp__error(w.status, "op '%s': %s", r->label ? r->label : "?", w.msg[0] ? w.msg : mxp_status_str(w.status));
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}
