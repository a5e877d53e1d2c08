/* mxplug/kvstore.h — the KVStore (MXNet's mx.kv): a store of NDArray
 * values by key that workers push gradients into and pull weights from,
 * with an optional updater run on the summed pushes.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Types (MXNet's names):
 *   local, device       in this process: pushed arrays are summed (on the
 *                       CPU; "device" is the same as "local" until a device
 *                       pack brings its own reduction)
 *   dist_sync,          across processes, through a transport pack
 *   dist_sync_device    (kvstore-dist on MPI): every push of a key is summed
 *                       over all workers before the updater runs, on every
 *                       worker, on identical sums
 *   dist_async          parameter servers (kvstore-dist): the last
 *                       MXP_KV_NUM_SERVERS ranks (default 1) are servers
 *                       that hold the values (keys sharded, arrays of >= 1e6
 *                       elements sliced over all servers) and run the
 *                       optimizer on each push as it arrives; workers push
 *                       and pull without waiting for each other.  A server
 *                       process calls mxp_kvstore_run_server; set_updater
 *                       and optimizer-state files are refused (the states
 *                       live on the servers).
 *
 * Keys are int64 or strings; one store may hold both kinds (an int key 3
 * and a string key "3" are different keys).  Several arrays may be given
 * for one key in one call (MXNet's "one key, one array per device"):
 * repeat the key in keys[], e.g. keys {3, 3}, vals {a, b} pushes a + b.
 *
 * Ordering: every push and pull is pushed to the dependency engine as
 * operations that read and write the arrays' vars, so calls return at once
 * and compute that does not touch those arrays overlaps communication.  A
 * pull after a push of the same key sees that push.  `priority`: larger
 * runs earlier among ready work (MXNet pushes gradient i with priority -i
 * so the first layers' gradients, needed first by the next forward, go
 * first); it never reorders work on the same arrays.  A failure while an
 * operation runs (a transport error, a dead peer) is recorded on the vars
 * it writes and raised by the next wait on them (mxp_ndarray_wait_to_read,
 * mxp_engine_wait_for_all) with a message naming the key.
 *
 * Handles are used from one thread at a time.  Since ABI 1.0. */
#ifndef MXPLUG_KVSTORE_H
#define MXPLUG_KVSTORE_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_kvstore mxp_kvstore;

/* The updater: called on the caller's thread of the push once per key
 * pushed, after the pushed arrays (and, for dist types, every worker's) are
 * summed into `recv`; it must update `stored` from `recv` by pushing engine
 * work (mxp_invoke, mxp_ndarray_copy, ...), not by reading the data
 * directly (neither may be ready yet).  key: the int key, or -1 when the
 * key is a string (str_key, else NULL).  Returns MXP_OK or an error, which
 * the push returns.  Without an updater, a push replaces the stored value
 * with the sum. */
typedef int (*mxp_kvstore_updater_fn)(void *user, int64_t key, const char *str_key, mxp_ndarray *recv,
                                      mxp_ndarray *stored);

/* Create a store.  type: see above; an unknown type is MXP_ENOENT listing
 * the known ones.  Options (text key/value pairs) are passed to a transport
 * pack; local types take none.  out: new store (caller frees with
 * mxp_kvstore_free).  For dist types every worker process must create its
 * store (the transport connects them).  Returns MXP_OK, MXP_EINVAL,
 * MXP_ENOENT, or the transport's error (MXP_ENET, MXP_ETIMEDOUT). */
MXP_API int mxp_kvstore_create(const char *type, int n_opts, const char *const *opt_keys,
                               const char *const *opt_vals, mxp_kvstore **out);
/* Wait for the store's pending work, then free it.  NULL is a no-op. */
MXP_API void mxp_kvstore_free(mxp_kvstore *kv);

MXP_API const char *mxp_kvstore_type(const mxp_kvstore *kv);   /* the name created with */
MXP_API int mxp_kvstore_rank(const mxp_kvstore *kv);           /* 0 for local types     */
MXP_API int mxp_kvstore_num_workers(const mxp_kvstore *kv);    /* 1 for local types     */
/* 1 when the store supports `capability`: "optimizer" (set_optimizer),
 * "updater" (set_updater), "gradient_compression" and "row_sparse" (never,
 * today); 0 otherwise. */
MXP_API int mxp_kvstore_is_capable(const mxp_kvstore *kv, const char *capability);

/* dist_async: 1 when this process is a server (then rank() is its index
 * among the servers and the only call left is run_server). */
MXP_API int mxp_kvstore_is_server(const mxp_kvstore *kv);
/* 1 when pushes are applied by the servers' optimizer (dist_async): a
 * trainer pushes gradients and pulls weights instead of updating. */
MXP_API int mxp_kvstore_updates_on_servers(const mxp_kvstore *kv);
/* Serve the workers until every one of them freed its store (MXNet's
 * KVStoreServer.run), then return; free the store afterwards.  Returns
 * MXP_OK, MXP_EMISUSE (not a server), or the transport's error (a worker
 * dead or stalled, named, after MXP_KV_TIMEOUT). */
MXP_API int mxp_kvstore_run_server(mxp_kvstore *kv);

/* Initialise keys with values (copied; the arrays fix each key's shape and
 * dtype).  A key may be initialised once (MXP_EEXIST after).  dist types:
 * every worker calls init with the same keys in the same order, and rank
 * 0's values are what every worker's store holds afterwards (pull them to
 * start from identical weights).  Returns MXP_OK, MXP_EINVAL, MXP_EEXIST,
 * MXP_ETYPE (dtype other than float32/float64/int32/int64). */
MXP_API int mxp_kvstore_init(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals);
MXP_API int mxp_kvstore_init_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals);

/* Push vals[i] to keys[i] (repeated keys are summed first).  Every key must
 * have been initialised (MXP_ENOENT) and every array must have its key's
 * shape (MXP_ESHAPE) and dtype (MXP_ETYPE); nothing is pushed then.  Async:
 * returns once the work is in the engine. */
MXP_API int mxp_kvstore_push(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals, int priority);
MXP_API int mxp_kvstore_push_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals,
                                 int priority);
/* Copy the stored value of keys[i] into outs[i] (a repeated key fills each
 * of its outs).  Checks as push.  Async. */
MXP_API int mxp_kvstore_pull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *outs, int priority);
MXP_API int mxp_kvstore_pull_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *outs,
                                 int priority);
/* push(keys, vals) then pull(keys, outs): outs may be vals (in place).
 * dist_sync without an updater sums in outs, and the store keeps that sum
 * copy-on-write: it holds a reference to each out array and copies it
 * before the next write on it (any engine write, mxp_ndarray_wait_to_write
 * included: write through mxp_ndarray_data only after it, as always), or
 * at the key's next push or pull. */
MXP_API int mxp_kvstore_pushpull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals,
                                 mxp_ndarray *const *outs, int priority);
MXP_API int mxp_kvstore_pushpull_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals,
                                     mxp_ndarray *const *outs, int priority);
/* init(keys, vals) then pull(keys, outs) (mx.kv broadcast). */
MXP_API int mxp_kvstore_broadcast(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals,
                                  mxp_ndarray *const *outs, int priority);
MXP_API int mxp_kvstore_broadcast_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals,
                                      mxp_ndarray *const *outs, int priority);
/* Refused (MXP_EUNSUPPORTED): row-sparse arrays do not exist in mxplug. */
MXP_API int mxp_kvstore_row_sparse_pull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *outs,
                                        mxp_ndarray *const *row_ids, int priority);
/* Refused (MXP_EUNSUPPORTED): no compression is implemented. */
MXP_API int mxp_kvstore_set_gradient_compression(mxp_kvstore *kv, int n, const char *const *keys,
                                                 const char *const *vals);

/* Set the updater (replaces a previous updater or optimizer; fn NULL
 * removes it). */
MXP_API int mxp_kvstore_set_updater(mxp_kvstore *kv, mxp_kvstore_updater_fn fn, void *user);
/* Use an optimizer as the updater (mxp_optimizer_create's type and kwargs):
 * a push runs the same in-place update op (sgd_mom_update, adam_update,
 * ...) on the stored weight with the summed gradient.  The optimizer's
 * index of a key is its position in init order; its name (for wd_mult) is
 * the string key, none for int keys.  Returns as mxp_optimizer_create. */
MXP_API int mxp_kvstore_set_optimizer(mxp_kvstore *kv, const char *type, int n_kwargs, const char *const *keys,
                                      const char *const *vals);
/* The optimizer's states (mxp_optimizer_save_states format); MXP_EMISUSE
 * without set_optimizer. */
MXP_API int mxp_kvstore_save_optimizer_states(mxp_kvstore *kv, const char *path);
MXP_API int mxp_kvstore_load_optimizer_states(mxp_kvstore *kv, const char *path);

/* Wait until every worker reached the barrier (local: returns at once
 * after the store's pending work).  Returns MXP_OK or the transport's
 * error (a dead peer: MXP_ETIMEDOUT / MXP_ENET naming it). */
MXP_API int mxp_kvstore_barrier(mxp_kvstore *kv);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_KVSTORE_H */
