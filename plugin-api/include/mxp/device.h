/* mxp/device.h — device backends ("gpu" from ops-cuda, test accelerators).
 *
 * A device pack registers one mxp_device_def per device type.  The host
 * builds its storage pool, copies, streams and per-worker set-up on these
 * slots.  `count` and every other slot may be called on a machine without
 * the hardware: they must fail cleanly (count 0), never crash; the pack's
 * init must not touch hardware at all, so listing and `manifest gen` work
 * anywhere.  Pointers a device returns are opaque to the host unless the
 * def sets MXP_DEVICE_HOST_ACCESSIBLE.
 * Threads (what the host guarantees and what it asks of a pack):
 *   - count and mem_info may run on any thread, several at once.
 *   - alloc / free (and the pinned pair) are the storage pool's backend:
 *     they run on whichever thread allocates or frees an array (the
 *     application's, an engine worker, an iterator's prefetch thread),
 *     several at once, never under a lock the pack could wait on.  free
 *     gets back exactly a pointer alloc returned, once.
 *   - thread_init runs once on each engine worker serving the device,
 *     before its first function; stream_create / stream_destroy on that
 *     worker (destroy when the engine shuts down, possibly on the thread
 *     that shuts it down).  A stream is used by one worker at a time.
 *   - copy runs on an engine worker with that worker's stream (or on the
 *     calling thread with no stream), followed by stream_sync on the same
 *     thread; several copies run at once on different streams.
 *   - Any slot may call the host table (errors, log); none may wait for
 *     engine work (it may be running on the worker that would do it).
 * The host makes these calls from runtime/src/plugin/device_glue.c and
 * device_query.c.
 * Since ABI 1.0. */
#ifndef MXP_DEVICE_H
#define MXP_DEVICE_H

#include <mxp/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* mxp_device_def.flags */
#define MXP_DEVICE_HOST_ACCESSIBLE 0x1u /* host may read/write device pointers */

/* count, mem_info, thread_init. */
typedef struct mxp_dev_query_args {
    mxp_header hdr;
    void *user_data;
    int32_t dev_id;
    int32_t count;          /* out: count                                  */
    uint64_t free_bytes;    /* out: mem_info                               */
    uint64_t total_bytes;   /* out: mem_info                               */
} mxp_dev_query_args;

/* alloc / free and alloc_pinned / free_pinned. */
typedef struct mxp_dev_alloc_args {
    mxp_header hdr;
    void *user_data;
    int32_t dev_id;
    uint32_t reserved;
    uint64_t bytes;
    uint64_t alignment;     /* power of two                                */
    void *ptr;              /* out for alloc; in for free                  */
} mxp_dev_alloc_args;

/* Copy `bytes` from src to dst.  Either side may be the host (type CPU).
 * With stream NULL the copy is complete on return; otherwise it is ordered
 * on the stream. */
typedef struct mxp_dev_copy_args {
    mxp_header hdr;
    void *user_data;
    void *dst;
    const void *src;
    mxp_device dst_dev;
    mxp_device src_dev;
    uint64_t bytes;
    void *stream;
} mxp_dev_copy_args;

/* Streams and events. */
typedef struct mxp_dev_stream_args {
    mxp_header hdr;
    void *user_data;
    int32_t dev_id;
    int32_t ready;          /* out: event_query, 1 when the event completed */
    void *stream;           /* out for stream_create, in otherwise          */
    void *event;            /* out for event_create, in otherwise           */
} mxp_dev_stream_args;

typedef struct mxp_device_def {
    mxp_header hdr;
    const char *name;         /* "gpu", "mock", ...                         */
    const char *doc;
    int32_t type_hint;        /* a fixed mxp_device_type (MXP_DEV_GPU), or 0
                                 to let the host assign a dynamic one       */
    uint32_t flags;           /* MXP_DEVICE_*                               */
    int (*count)(mxp_dev_query_args *a);
    int (*mem_info)(mxp_dev_query_args *a);          /* (optional) */
    int (*alloc)(mxp_dev_alloc_args *a);
    int (*free)(mxp_dev_alloc_args *a);
    int (*alloc_pinned)(mxp_dev_alloc_args *a);      /* (optional) */
    int (*free_pinned)(mxp_dev_alloc_args *a);       /* (optional) */
    int (*copy)(mxp_dev_copy_args *a);
    int (*stream_create)(mxp_dev_stream_args *a);    /* (optional) */
    int (*stream_destroy)(mxp_dev_stream_args *a);   /* (optional) */
    int (*stream_sync)(mxp_dev_stream_args *a);      /* (optional) */
    int (*event_create)(mxp_dev_stream_args *a);     /* (optional) */
    int (*event_destroy)(mxp_dev_stream_args *a);    /* (optional) */
    int (*event_record)(mxp_dev_stream_args *a);     /* event on stream */
    int (*event_wait)(mxp_dev_stream_args *a);       /* stream waits event */
    int (*event_query)(mxp_dev_stream_args *a);      /* (optional) */
    /* Called once on every engine worker thread that serves this device,
     * before its first op (e.g. cudaSetDevice).  (optional) */
    int (*thread_init)(mxp_dev_query_args *a);
    void *user_data;
} mxp_device_def;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_dev_query_args) == 40, "layout is frozen");
_Static_assert(sizeof(mxp_dev_alloc_args) == 48, "layout is frozen");
_Static_assert(offsetof(mxp_dev_copy_args, dst_dev) == 32, "layout is frozen");
_Static_assert(sizeof(mxp_dev_copy_args) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_dev_stream_args) == 40, "layout is frozen");
_Static_assert(offsetof(mxp_device_def, count) == 32, "layout is frozen");
_Static_assert(offsetof(mxp_device_def, copy) == 80, "layout is frozen");
_Static_assert(offsetof(mxp_device_def, thread_init) == 152, "layout is frozen");
_Static_assert(sizeof(mxp_device_def) == 168, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_DEVICE_H */
