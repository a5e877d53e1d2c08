/* storage/storage.h — the storage module's interface to the rest of the
 * runtime: pooled allocation per device and the device backend registry.
 *
 * A device type's memory comes from a backend: a small struct of function
 * pointers registered by device type (CPU is built in; device packs register
 * theirs).  Above each backend, every (type, id) device has one pool with
 * rounded size classes (see mxplug/storage.h).  The pool never touches the
 * memory it hands out, so backends may return device pointers the host
 * cannot dereference (host_accessible = 0).
 *
 * Invariants: a block is freed with mxp__storage_free exactly once, on the
 * device it came from; block.size is the class size (>= requested bytes);
 * block.ptr is aligned to the backend's alignment (64 bytes on CPU). */
#ifndef MXP_STORAGE_STORAGE_H
#define MXP_STORAGE_STORAGE_H

#include "base/base.h"

#include <stddef.h>

/* One allocation handed out by a pool. */
typedef struct mxp_storage_block {
    void *ptr;       /* NULL for a zero-byte block                        */
    size_t size;     /* class size actually reserved                      */
    mxp_device dev;  /* where it lives                                    */
} mxp_storage_block;

/* How a device type gets raw memory.  All slots but copy are required.
 * alloc: return `bytes` bytes aligned to `align`, or NULL on failure (never
 *        abort).  free: give back a pointer alloc returned (bytes = the size
 *        asked for).  Both may be called from any thread concurrently.
 * copy (optional): synchronous copy between this device and the host or
 *        itself, used by ndarray when no specific copy hook is registered.
 * host_accessible: 1 if the host may read/write the memory directly. */
typedef struct mxp_storage_backend {
    const char *name;
    void *ctx;
    void *(*alloc)(void *ctx, int32_t dev_id, size_t bytes, size_t align);
    void (*free)(void *ctx, int32_t dev_id, void *ptr, size_t bytes);
    size_t align;
    int host_accessible;
    /* (optional) MXP_OK when ordinal dev_id exists, else an error saying
     * why (e.g. no GPU on this machine); asked before arrays are made. */
    int (*check)(void *ctx, int32_t dev_id);
} mxp_storage_backend;

/* Register the backend of a device type (the struct is copied).  Replaces a
 * previous registration only when that type's pools hold no memory.
 * Returns MXP_OK, MXP_EINVAL (bad type or missing slot), MXP_EBUSY. */
int mxp__storage_register_device(int32_t dev_type, const mxp_storage_backend *backend);

/* Remove a device type's backend after releasing its cached blocks.
 * MXP_EBUSY while blocks are in use.  CPU cannot be removed. */
int mxp__storage_unregister_device(int32_t dev_type);

/* The backend of a device type, or NULL. The pointer stays valid until the
 * type is unregistered. */
const mxp_storage_backend *mxp__storage_backend(int32_t dev_type);

/* Allocate at least `bytes` bytes on dev.  bytes == 0 gives {NULL, 0}.
 * out: the block (cleared on entry).
 * Returns MXP_OK, MXP_EINVAL (unknown device type), MXP_ENOMEM (after
 * releasing the pool and retrying; message names device, size, stats). */
int mxp__storage_alloc(mxp_device dev, size_t bytes, mxp_storage_block *out);

/* Give a block back (to the pool, or to the device in naive mode or when
 * the pool is over its limit).  A NULL ptr is a no-op. */
void mxp__storage_free(const mxp_storage_block *block);

/* The size class `bytes` rounds to under the current settings. */
size_t mxp__storage_round(size_t bytes);

/* Parse a byte count with an optional K/M/G/T suffix ("512M", "2g", "4096").
 * Returns MXP_OK or MXP_EINVAL. */
int mxp__storage_parse_size(const char *text, uint64_t *out);

/* Test hook: called before every device allocation; a nonzero return makes
 * that allocation fail as if the device were out of memory.  NULL removes it. */
typedef int (*mxp_storage_fail_hook)(mxp_device dev, size_t bytes, void *user);
void mxp__storage_set_fail_hook(mxp_storage_fail_hook hook, void *user);

/* Release all pools' cached memory and forget their settings, so the next
 * allocation re-reads MXP_MEM_POOL_TYPE / MXP_MEM_POOL_LIMIT.  Pools with
 * memory in use keep their counters.  For tests and shutdown. */
void mxp__storage_reset(void);

#endif /* MXP_STORAGE_STORAGE_H */
