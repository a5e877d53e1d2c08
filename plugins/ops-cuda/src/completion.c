/* completion.c — asynchronous completion of GPU ops: an op enqueues its
 * kernels on its worker's stream, records an event after them and returns;
 * one completion thread per process waits for the events and calls each
 * op's ctx->complete when the GPU has finished it.  So no engine worker
 * blocks on a stream: a worker launches the next ready op while the GPU
 * still runs the previous ones, and the engine releases an op's outputs to
 * their readers (on any stream, or the host) only once they are written —
 * the ordering contract of the CPU engine, unchanged.  This is MXNet's
 * stream-per-worker design with the engine's async completion (seeds:
 * "the engine doesn't consider the function finished until the Callback
 * function is called").
 *
 * Why a thread of ours and not cudaLaunchHostFunc: a host function must not
 * call CUDA, and completing an op may free its state (cuDNN descriptors,
 * cudaFree of pooled memory) or run engine work on the completing thread.
 *
 * The pack's impls are written as if synchronous (enqueue, then
 * cu_finish); the wrappers registered in their place (cu_async_registrar)
 * are MXP_IMPL_ASYNC: they run the impl with cu_finish deferred and, when
 * it returned MXP_OK, hand its stream to this thread.  So every return path
 * of an impl completes exactly once, and a failed call never completes
 * (the host's contract).
 *
 * Invariants: every pending record is completed exactly once (with the
 * event's error if the GPU work failed); records are completed as their
 * events finish, oldest first when several are ready, never before; the
 * thread sleeps in cudaEventSynchronize (blocking-sync events) or on its
 * condition variable, never spins.  Events are recycled per device.
 * Not here: the per-op work (each impl), streams (device.c). */
#include "cu_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cu_pending {
    struct cu_pending *next;
    cudaEvent_t ev;
    int dev;
    void (*complete)(void *token, int32_t status, const char *message);
    void *token;
    char what[96];
} cu_pending;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static cu_pending *g_head, *g_tail; /* in flight, in the order they were recorded */
static cu_pending *g_free;          /* recycled records, each keeping its event  */
static int g_running, g_stop;
static pthread_t g_thread;

static void recycle(cu_pending *p) {
    pthread_mutex_lock(&g_mu);
    p->next = g_free;
    g_free = p;
    pthread_mutex_unlock(&g_mu);
}

static void finish(cu_pending *p, cudaError_t e) {
    void (*complete)(void *, int32_t, const char *) = p->complete;
    void *token = p->token;
    char msg[320];
    if (e != cudaSuccess)
        snprintf(msg, sizeof msg, "%s: the GPU work failed: %s (%s)", p->what, cudaGetErrorName(e),
                 cudaGetErrorString(e));
    recycle(p); /* before completing: the completion may unload nothing of ours, but may take long */
    complete(token, e == cudaSuccess ? MXP_OK : (e == cudaErrorMemoryAllocation ? MXP_ENOMEM : MXP_EDEVICE),
             e == cudaSuccess ? NULL : msg);
}

/* Unlink p from the in-flight list.  Caller holds g_mu. */
static void unlink_locked(cu_pending *p) {
    cu_pending **pp = &g_head, *prev = NULL;
    while (*pp && *pp != p) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp) return;
    *pp = p->next;
    if (g_tail == p) g_tail = prev;
}

static void *completion_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!g_head && !g_stop) pthread_cond_wait(&g_cv, &g_mu);
        if (!g_head) break; /* stopping, nothing in flight */
        /* Every record whose event is done, oldest first; else wait for the
         * oldest (later ones usually finish after it on a busy GPU). */
        cu_pending *ready = NULL;
        cudaError_t ready_err = cudaSuccess;
        for (cu_pending *p = g_head; p; p = p->next) {
            cudaError_t q = cudaEventQuery(p->ev);
            if (q != cudaErrorNotReady) {
                ready = p;
                ready_err = q;
                break;
            }
        }
        if (!ready) {
            cu_pending *oldest = g_head;
            pthread_mutex_unlock(&g_mu);
            cudaError_t e = cudaEventSynchronize(oldest->ev);
            pthread_mutex_lock(&g_mu);
            ready = oldest;
            ready_err = e;
        }
        unlink_locked(ready);
        pthread_mutex_unlock(&g_mu);
        finish(ready, ready_err);
        pthread_mutex_lock(&g_mu);
    }
    g_running = 0;
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* A record with an event on device dev (the calling thread's current one). */
static cu_pending *take(int dev) {
    pthread_mutex_lock(&g_mu);
    cu_pending **pp = &g_free, *p = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->dev == dev) {
            p = *pp;
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    if (p) return p;
    p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (cudaEventCreateWithFlags(&p->ev, cudaEventDisableTiming | cudaEventBlockingSync) != cudaSuccess) {
        (void)cudaGetLastError();
        free(p);
        return NULL;
    }
    p->dev = dev;
    return p;
}

/* Start the thread once; 0 when it cannot run (then ops finish inline). */
static int ensure_thread(void) {
    int ok;
    pthread_mutex_lock(&g_mu);
    if (!g_running && !g_stop) g_running = pthread_create(&g_thread, NULL, completion_main, NULL) == 0;
    ok = g_running;
    pthread_mutex_unlock(&g_mu);
    return ok;
}

/* The inline path: wait for the stream, then complete (the host accepts a
 * completion before the call returns). */
static int finish_inline(const mxp_op_ctx *ctx, const char *what) {
    CU_TRY(cudaStreamSynchronize((cudaStream_t)ctx->stream), what);
    ctx->complete(ctx->complete_token, MXP_OK, NULL);
    return MXP_OK;
}

static int complete_later(const mxp_op_ctx *ctx, const char *what) {
    int dev = 0;
    CU_TRY(cudaGetDevice(&dev), what);
    if (!ensure_thread()) return finish_inline(ctx, what);
    cu_pending *p = take(dev);
    if (!p) return finish_inline(ctx, what);
    cudaError_t e = cudaEventRecord(p->ev, (cudaStream_t)ctx->stream);
    if (e != cudaSuccess) {
        recycle(p);
        return cu_fail(e, "cudaEventRecord", what);
    }
    p->complete = ctx->complete;
    p->token = ctx->complete_token;
    snprintf(p->what, sizeof p->what, "%s", what);
    p->next = NULL;
    pthread_mutex_lock(&g_mu);
    if (g_tail) g_tail->next = p;
    else g_head = p;
    g_tail = p;
    pthread_cond_signal(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return MXP_OK;
}

/* ------------------------------------------------------------ wrappers */
typedef struct cu_async_impl {
    mxp_op_impl impl;          /* what the host sees: flags | MXP_IMPL_ASYNC */
    const mxp_op_impl *inner;  /* the pack's impl */
    char what[96];             /* "gpu op 'Convolution' (cudnn)" */
    struct cu_async_impl *next;
} cu_async_impl;

static cu_async_impl *g_wrappers; /* every wrapper made, freed at stop */
static mxp_registrar *g_real;     /* the host's registrar during init */
static _Thread_local int tl_deferred;

int cu_completion_deferred(void) { return tl_deferred; }

/* After the inner call returned MXP_OK: complete through the thread, or
 * (no completion asked for: tune, host.invoke) wait for the stream. */
static int after_inner(const mxp_op_ctx *ctx, const char *what) {
    if (!ctx->complete) {
        CU_TRY(cudaStreamSynchronize((cudaStream_t)ctx->stream), what);
        return MXP_OK;
    }
    return complete_later(ctx, what);
}

/* Copy a host args struct into ours: the fields both know; a newer host's
 * extra fields are not seen by the inner impl, which does not know them. */
#define COPY_ARGS(dst, src)                                                              \
    do {                                                                                 \
        memset(&(dst), 0, sizeof(dst));                                                  \
        size_t n_ = (src)->hdr.struct_size < sizeof(dst) ? (src)->hdr.struct_size : sizeof(dst); \
        memcpy(&(dst), (src), n_);                                                       \
        (dst).hdr.struct_size = (uint32_t)n_;                                            \
    } while (0)

static int wrap_forward(const mxp_forward_args *a) {
    const cu_async_impl *w = a->user_data;
    mxp_forward_args b;
    COPY_ARGS(b, a);
    b.user_data = w->inner->user_data;
    tl_deferred = 1;
    int rc = w->inner->forward(&b);
    tl_deferred = 0;
    return rc != MXP_OK ? rc : after_inner(a->ctx, w->what);
}

static int wrap_backward(const mxp_backward_args *a) {
    const cu_async_impl *w = a->user_data;
    mxp_backward_args b;
    COPY_ARGS(b, a);
    b.user_data = w->inner->user_data;
    tl_deferred = 1;
    int rc = w->inner->backward(&b);
    tl_deferred = 0;
    return rc != MXP_OK ? rc : after_inner(a->ctx, w->what);
}

/* supports / workspace / create / destroy see the inner user_data too. */
static int wrap_supports(mxp_impl_query_args *a) {
    const cu_async_impl *w = a->user_data;
    a->user_data = w->inner->user_data;
    int rc = w->inner->supports(a);
    a->user_data = (void *)w;
    return rc;
}

static int wrap_workspace(mxp_impl_query_args *a) {
    const cu_async_impl *w = a->user_data;
    a->user_data = w->inner->user_data;
    int rc = w->inner->workspace(a);
    a->user_data = (void *)w;
    return rc;
}

static int wrap_create(mxp_impl_query_args *a) {
    const cu_async_impl *w = a->user_data;
    a->user_data = w->inner->user_data;
    int rc = w->inner->create(a);
    a->user_data = (void *)w;
    return rc;
}

static void wrap_destroy(const mxp_destroy_args *a) {
    const cu_async_impl *w = a->user_data;
    mxp_destroy_args b = *a;
    b.user_data = w->inner->user_data;
    w->inner->destroy(&b);
}

static int async_add_impl(mxp_registrar *r, const mxp_op_impl *impl) {
    (void)r;
    cu_async_impl *w = calloc(1, sizeof *w);
    if (!w) return g_cu_host->set_error(MXP_ENOMEM, "ops-cuda: out of memory wrapping impl '%s'", impl->impl_name);
    w->inner = impl;
    w->impl = *impl;
    w->impl.flags |= MXP_IMPL_ASYNC;
    w->impl.user_data = w;
    w->impl.supports = impl->supports ? wrap_supports : NULL;
    w->impl.workspace = impl->workspace ? wrap_workspace : NULL;
    w->impl.create = impl->create ? wrap_create : NULL;
    w->impl.forward = impl->forward ? wrap_forward : NULL;
    w->impl.backward = impl->backward ? wrap_backward : NULL;
    w->impl.destroy = impl->destroy ? wrap_destroy : NULL;
    snprintf(w->what, sizeof w->what, "gpu op '%s' (%s)", impl->op_name, impl->impl_name);
    w->next = g_wrappers;
    g_wrappers = w;
    return g_real->add_impl(g_real, &w->impl);
}

void cu_async_registrar(mxp_registrar *real, mxp_registrar *out) {
    g_real = real;
    *out = *real;
    out->add_impl = async_add_impl;
}

void cu_completion_stop(void) {
    pthread_mutex_lock(&g_mu);
    int running = g_running;
    g_stop = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    if (running) pthread_join(g_thread, NULL); /* completes whatever is still in flight first */
    pthread_mutex_lock(&g_mu);
    cu_pending *p = g_free;
    g_free = NULL;
    g_stop = 0; /* a reload of the pack starts afresh */
    pthread_mutex_unlock(&g_mu);
    while (p) {
        cu_pending *n = p->next;
        cudaEventDestroy(p->ev);
        free(p);
        p = n;
    }
    while (g_wrappers) {
        cu_async_impl *n = g_wrappers->next;
        free(g_wrappers);
        g_wrappers = n;
    }
}
