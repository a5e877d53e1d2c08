/* device_glue.c — connects a device a pack registers (mxp_device_def) to the
 * runtime modules that move and compute on its memory:
 *   - storage: the device's alloc/free become the pool's backend;
 *   - NDArray: its copy slot becomes the copy path cpu<->device and
 *     device<->device (synchronised on the worker's stream);
 *   - engine: workers for the device type call thread_init and create a
 *     stream per worker through the def's slots.
 * The engine and copy hooks look the def up by device type at call time, so
 * a reloaded pack's new def is used without re-registering (the engine keeps
 * a device type's hooks for the life of the process). */
#include "plugin/plugin_impl.h"

#include "engine/engine.h"
#include "ndarray/ndarray.h"
#include "storage/storage.h"

#include <string.h>

/* The live def of a device type, or NULL when its pack is not loaded. */
static const mxp_device_def *def_for_type(int32_t type) {
    const mxp_device_def *d = NULL;
    mxp__registry_rdlock();
    for (int k = 0; k < mxp__g_reg.n_features; k++)
        if (mxp__g_reg.features[k].kind == MXP_FEATURE_DEVICE && mxp__g_reg.features[k].dev_type == type)
            d = mxp__g_reg.features[k].def;
    mxp__registry_unlock();
    return d;
}

/* ------------------------------------------------------------ storage */
static void *dev_alloc(void *ctx, int32_t dev_id, size_t bytes, size_t align) {
    const mxp_device_def *d = ctx;
    mxp_dev_alloc_args a = {MXP_HEADER(mxp_dev_alloc_args), d->user_data, dev_id, 0, bytes, align, NULL};
    if (!d->alloc || d->alloc(&a) != MXP_OK) return NULL;
    return a.ptr;
}

static void dev_free(void *ctx, int32_t dev_id, void *ptr, size_t bytes) {
    const mxp_device_def *d = ctx;
    mxp_dev_alloc_args a = {MXP_HEADER(mxp_dev_alloc_args), d->user_data, dev_id, 0, bytes, 64, ptr};
    if (d->free) d->free(&a);
}

static int dev_check(void *ctx, int32_t dev_id) {
    return mxp__device_check(ctx, dev_id);
}

/* ------------------------------------------------------------ copies */
/* ctx carries the device type whose def performs the copy. */
static int dev_copy(void *ctx, void *dst, mxp_device dst_dev, const void *src, mxp_device src_dev,
                    size_t bytes, const mxp_run_ctx *rctx) {
    int32_t type = (int32_t)(intptr_t)ctx;
    const mxp_device_def *d = def_for_type(type);
    if (!d || !d->copy)
        return mxp__error(MXP_EDEVICE, "copy %d(%d) -> %d(%d): device pack for type %d is not loaded",
                          src_dev.type, src_dev.id, dst_dev.type, dst_dev.id, type);
    void *stream = rctx ? rctx->stream : NULL;
    mxp_dev_copy_args a = {MXP_HEADER(mxp_dev_copy_args), d->user_data, dst, src, dst_dev, src_dev,
                           bytes, stream};
    int rc = d->copy(&a);
    if (rc != MXP_OK) return mxp__error_prefix(rc, "device '%s': copy of %zu bytes", d->name, bytes);
    /* The NDArray copy contract is synchronous: finish the stream's work. */
    if (stream && d->stream_sync) {
        mxp_dev_stream_args s = {MXP_HEADER(mxp_dev_stream_args), d->user_data,
                                 dst_dev.type == type ? dst_dev.id : src_dev.id, 0, stream, NULL};
        rc = d->stream_sync(&s);
        if (rc != MXP_OK) return mxp__error_prefix(rc, "device '%s': stream sync after copy", d->name);
    }
    return MXP_OK;
}

/* ------------------------------------------------------------ engine */
static int dev_stream_create(mxp_device dev, int lane, void **out_stream) {
    (void)lane;
    *out_stream = NULL;
    const mxp_device_def *d = def_for_type(dev.type);
    if (!d) return mxp__error(MXP_EDEVICE, "device type %d: its pack is not loaded", dev.type);
    if (d->thread_init) {
        mxp_dev_query_args q = {MXP_HEADER(mxp_dev_query_args), d->user_data, dev.id, 0, 0, 0};
        int rc = d->thread_init(&q);
        if (rc != MXP_OK) return mxp__error_prefix(rc, "device '%s' %d: thread_init", d->name, dev.id);
    }
    if (d->stream_create) {
        mxp_dev_stream_args s = {MXP_HEADER(mxp_dev_stream_args), d->user_data, dev.id, 0, NULL, NULL};
        int rc = d->stream_create(&s);
        if (rc != MXP_OK) return mxp__error_prefix(rc, "device '%s' %d: stream_create", d->name, dev.id);
        *out_stream = s.stream;
    }
    return MXP_OK;
}

static void dev_stream_destroy(mxp_device dev, void *stream) {
    const mxp_device_def *d = def_for_type(dev.type);
    if (!d || !stream || !d->stream_destroy) return;
    mxp_dev_stream_args s = {MXP_HEADER(mxp_dev_stream_args), d->user_data, dev.id, 0, stream, NULL};
    d->stream_destroy(&s);
}

/* ------------------------------------------------------------ entry points */
void mxp__device_glue_attach(const char *pack_name, int32_t type, const mxp_device_def *d) {
    if (type == MXP_DEV_UNKNOWN || type == MXP_DEV_CPU) return;
    mxp_storage_backend b = {d->name, (void *)d, dev_alloc, dev_free, 64,
                             (d->flags & MXP_DEVICE_HOST_ACCESSIBLE) ? 1 : 0, NULL};
    b.check = dev_check;
    if (mxp__storage_register_device(type, &b))
        MXP_LOGW("plugin", "pack '%s': device '%s': storage backend not registered: %s", pack_name, d->name,
                 mxp_last_error());
    void *ctx = (void *)(intptr_t)type;
    if (d->copy) {
        if (mxp__ndarray_register_copy(MXP_DEV_CPU, type, dev_copy, ctx) ||
            mxp__ndarray_register_copy(type, MXP_DEV_CPU, dev_copy, ctx) ||
            mxp__ndarray_register_copy(type, type, dev_copy, ctx))
            MXP_LOGW("plugin", "pack '%s': device '%s': copy path not registered: %s", pack_name, d->name,
                     mxp_last_error());
    }
    mxp__engine_device_hooks hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.stream_create = dev_stream_create;
    hooks.stream_destroy = dev_stream_destroy;
    int rc = mxp__engine_register_device(type, &hooks);
    if (rc != MXP_OK && rc != MXP_EEXIST) /* EEXIST: a reload; hooks look the def up by type */
        MXP_LOGW("plugin", "pack '%s': device '%s': engine workers not registered: %s", pack_name, d->name,
                 mxp_last_error());
}

void mxp__device_glue_detach(const char *pack_name, int32_t type, const mxp_device_def *d) {
    if (type == MXP_DEV_UNKNOWN || type == MXP_DEV_CPU) return;
    mxp__ndarray_register_copy(MXP_DEV_CPU, type, NULL, NULL);
    mxp__ndarray_register_copy(type, MXP_DEV_CPU, NULL, NULL);
    mxp__ndarray_register_copy(type, type, NULL, NULL);
    if (mxp__storage_unregister_device(type))
        MXP_LOGW("plugin", "pack '%s': device '%s' still has memory in use", pack_name, d->name);
}
