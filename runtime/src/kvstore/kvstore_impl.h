/* kvstore/kvstore_impl.h — private to the files of runtime/src/kvstore/: the store,
 * its key table, and the engine operations one push or pull becomes
 * (reduce.c).
 *
 * A key's entry owns two arrays: `stored` (the value pulls copy out) and
 * `merged` (the sum of one push, the updater's `recv`).  One push of key k
 * is, in engine order:
 *   reduce     reads the pushed arrays, writes merged     (reduce.c)
 *   transport  writes merged: the sum over workers        (dist types only)
 *   update     the updater / optimizer, or copy merged -> stored
 * and a pull is a copy stored -> out.  The entries' vars order all of it. */
#ifndef MXP_KVSTORE_KVSTORE_IMPL_H
#define MXP_KVSTORE_KVSTORE_IMPL_H

#include "base/base.h"
#include "plugin/plugin.h"

#include <mxplug/kvstore.h>
#include <mxplug/train.h>

typedef struct kv_entry {
    int is_str;
    int64_t ikey;
    char *skey;
    char label[96];          /* "key 3" / "key 'fc1_weight'", for messages  */
    int index;               /* position in init order (optimizer index)    */
    mxp_ndarray *stored;
    mxp_ndarray *merged;
    int ndim, dtype;
    int64_t shape[MXP_MAX_NDIM];
} kv_entry;

struct mxp_kvstore {
    char *type;
    /* Transport (dist types); NULL def for local / device. */
    const mxp_kvstore_def *def;
    mxp_pack *pack;          /* pinned while the store lives                */
    void *store;             /* the transport's handle                      */
    int rank, num_workers;
    kv_entry **entries;
    int n_entries, cap_entries;
    int *slots;              /* open-addressing hash: entry index + 1, 0 free */
    int n_slots;             /* power of two, > 2 * n_entries               */
    mxp_kvstore_updater_fn updater;
    void *updater_user;
    mxp_optimizer *opt;
};

/* Engine operations (reduce.c).  They capture data pointers at push time
 * and hold no NDArray handle. */
/* merged = sum of srcs (n >= 1), all of e's shape and dtype. */
int mxp__kv_push_reduce(const kv_entry *e, int n, mxp_ndarray *const *srcs, int priority);
/* dst = src (same shape and dtype). */
int mxp__kv_push_copy(const kv_entry *e, mxp_ndarray *src, mxp_ndarray *dst, int priority, const char *what);
/* merged = the transport's pushpull of merged (sum over workers). */
int mxp__kv_push_transport(mxp_kvstore *kv, const kv_entry *e, int priority);
/* Fill a tensor view of nd (shape points into e). */
void mxp__kv_tensor(const kv_entry *e, mxp_ndarray *nd, mxp_tensor *out);

#endif /* MXP_KVSTORE_KVSTORE_IMPL_H */
