/* kvstore/kvstore_fit.h — the one KVStore entry the runtime's own training
 * loop (train/module.c) uses beyond the public API.  Not public: its
 * contract (the stored value is left alone) suits a loop that never pulls
 * the keys it sums. */
#ifndef MXP_KVSTORE_KVSTORE_FIT_H
#define MXP_KVSTORE_KVSTORE_FIT_H

#include <mxplug/kvstore.h>

/* Sum `arr` over the store's workers in place, under string key `key`, as
 * mxp_kvstore_pushpull_str(kv, 1, &key, &arr, &arr, priority) does, but
 * without copying the sum into the store's own value of the key (a later
 * pull returns what the store held before).  Falls back to that pushpull
 * when the sum cannot run in place (an updater or optimizer on the store,
 * server-side updates, a local store). */
int mxp__kvstore_sum_in_place_str(mxp_kvstore *kv, const char *key, mxp_ndarray *arr, int priority);

#endif /* MXP_KVSTORE_KVSTORE_FIT_H */
