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
 * and a pull is a copy stored -> out.  The entries' vars order all of it.
 * With a server-side transport (dist_async) a push is reduce, then the
 * transport's push of merged; a pull is the transport's pull into stored,
 * then the copy stored -> out.
 * A dist_sync pushpull of one array per key with no updater skips merged:
 * copy val -> out (unless they are one array), transport on out in place,
 * and the copy out -> stored deferred until something needs it
 * (kvstore.c pushpull_in_place, lazy_store.c).  mxp_module_fit's sum
 * (kvstore_fit.h) is the transport on the gradient alone. */
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
    struct kv_lazy *lazy;    /* stored's value still in an out array (lazy_store.c) */
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
    int server_side;         /* the updater runs on servers (dist_async)    */
    int is_server;           /* this process is one of those servers        */
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
/* The transport's call on a key: PUSHPULL sums merged over workers in
 * place (dist_sync); PUSH sends merged to the servers; PULL fills stored
 * from the servers (after this process's earlier pushes of the key). */
enum { MXP__KV_PUSHPULL = 0, MXP__KV_PUSH = 1, MXP__KV_PULL = 2 };
int mxp__kv_push_transport(mxp_kvstore *kv, const kv_entry *e, int kind, int priority);
/* The same call on another array of e's shape and dtype (PUSHPULL: the
 * caller's own array, summed in place). */
int mxp__kv_push_transport_on(mxp_kvstore *kv, const kv_entry *e, int kind, mxp_ndarray *target, int priority);
/* lazy_store.c.  Arm: e's value is now out's (after the transport on out
 * was pushed); the copy out -> stored waits for the next write on out or
 * the next settle.  Settle: end a pending copy, pushing it when copy is 1
 * (a push or pull of the key reads stored next) or dropping it when 0 (a
 * new sum replaces stored, or the store goes away). */
int mxp__kv_lazy_arm(kv_entry *e, mxp_ndarray *out, int priority);
int mxp__kv_lazy_settle(kv_entry *e, int copy);
/* Fill a tensor view of nd (shape points into e). */
void mxp__kv_tensor(const kv_entry *e, mxp_ndarray *nd, mxp_tensor *out);

#endif /* MXP_KVSTORE_KVSTORE_IMPL_H */
