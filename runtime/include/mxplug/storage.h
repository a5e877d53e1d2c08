/* mxplug/storage.h — device memory pools: statistics and release.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Every device has one pool, created on first use.  Freed blocks go back to
 * the pool, bucketed by a rounded size class (powers of two below 16 MiB,
 * multiples of 16 MiB above, like MXNet's Round pool), and are handed out
 * again to later requests of the same class.  Environment (read when a
 * device's pool is created):
 *   MXP_MEM_POOL_TYPE   "pooled" (default) or "naive" (no caching; every
 *                       free returns memory to the device at once).
 *   MXP_MEM_POOL_LIMIT  most bytes the pool keeps cached, e.g. 512M, 2G,
 *                       1048576 (suffixes K, M, G, T: powers of 1024).
 *                       Default: no limit.  Beyond it, cached blocks are
 *                       released to the device.
 * An allocation that fails releases every cached block and retries once;
 * a second failure is MXP_ENOMEM with a message naming device, size and
 * pool statistics.  Nothing here aborts.  Since ABI 1.0. */
#ifndef MXPLUG_STORAGE_H
#define MXPLUG_STORAGE_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A snapshot of one device's pool.  Byte counts are rounded (class) sizes. */
typedef struct mxp_storage_stats {
    uint32_t struct_size;     /* set by the caller: sizeof as compiled      */
    uint64_t bytes_in_use;    /* handed out and not yet freed              */
    uint64_t bytes_pooled;    /* cached in the pool, ready for reuse        */
    uint64_t bytes_peak;      /* highest bytes_in_use seen                  */
    uint64_t bytes_limit;     /* MXP_MEM_POOL_LIMIT, UINT64_MAX if none     */
    uint64_t n_hits;          /* allocations served from the pool           */
    uint64_t n_misses;        /* allocations that went to the device        */
    uint64_t n_releases;      /* cached blocks given back to the device     */
    uint64_t n_failures;      /* device allocations that failed (incl. retried) */
} mxp_storage_stats;

/* Statistics of a device's pool (all zero when the device has not
 * allocated yet).  out: set out->struct_size first (MXP_STRUCT_INIT, or 0
 * for the 1.0 layout); filled up to that size, struct_size kept.
 * Returns MXP_OK, MXP_EMISUSE (out NULL).  Thread-safe. */
MXP_API int mxp_storage_stats_get(mxp_device dev, mxp_storage_stats *out);

/* Give every cached block of a device's pool back to the device.  Blocks in
 * use are not touched.  Returns MXP_OK.  Thread-safe. */
MXP_API int mxp_storage_release_all(mxp_device dev);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_STORAGE_H */
