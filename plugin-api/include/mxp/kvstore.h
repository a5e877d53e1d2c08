/* mxp/kvstore.h — KVStore transports (dist_sync, dist_async, ...).
 *
 * The host's KVStore front end (mxp_kvstore_*) owns key bookkeeping,
 * engine ordering and the local reduction; a transport moves values between
 * processes.  Keys are int64 or strings (one of int_keys / str_keys is
 * non-NULL).  push/pull/pushpull are asynchronous: they return at once and
 * call complete(token, status, message) exactly once, from any thread; a
 * call that returns an error does not call complete.  A dead or silent peer
 * must end in MXP_ETIMEDOUT / MXP_ENET with a message naming the peer, after
 * at most timeout_ms — never a hang.
 * init (synchronous, collective for dist types): values[i] is this
 * process's value; outs[i], when given, receives the value every worker
 * holds afterwards (rank 0's for dist_sync), and may be values[i].
 * The server-side updater is named by an op plus kwargs (e.g. "sgd_update",
 * lr=0.1) and run by the transport on servers through mxp_host.invoke.
 * Threads (what the host guarantees and what it asks of a pack):
 *   - create, info, init, barrier and destroy run on the application's
 *     thread that calls mxp_kvstore_*, one at a time per store; destroy
 *     runs after every push/pull of the store has completed.
 *   - push, pull and pushpull run on engine worker threads, possibly
 *     several at once for different keys of one store; they must return
 *     without waiting on peers (queue the request; complete later).
 *   - complete may be called from any thread (a transport's communication
 *     thread, typically), exactly once per accepted request, even before
 *     the call that accepted it has returned.
 *   - The server-side updater runs through mxp_host.invoke, inline on the
 *     transport's thread.
 * The host makes these calls from runtime/src/kvstore/ (kvstore.c,
 * reduce.c).
 * Since ABI 1.0. */
#ifndef MXP_KVSTORE_H
#define MXP_KVSTORE_H

#include <mxp/types.h>
#include <mxp/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*mxp_complete_fn)(void *token, int32_t status, const char *message);

typedef struct mxp_kv_create_args {
    mxp_header hdr;
    void *user_data;
    const char *type;            /* the store name asked for, "dist_sync"  */
    const char *const *keys;     /* options, e.g. scheduler address        */
    const char *const *vals;
    uint32_t n_options;
    int32_t timeout_ms;          /* per network operation; <= 0: default   */
    void *store;                 /* out                                     */
} mxp_kv_create_args;

typedef struct mxp_kv_args {
    mxp_header hdr;
    void *user_data;
    void *store;
    uint32_t n;                  /* number of keys                          */
    int32_t priority;            /* larger goes first                       */
    const int64_t *int_keys;     /* [n] or NULL                             */
    const char *const *str_keys; /* [n] or NULL                             */
    const mxp_tensor *values;    /* [n] init/push: values to send           */
    const mxp_tensor *outs;      /* [n] pull/pushpull: where results go     */
    mxp_complete_fn complete;    /* push/pull/pushpull                      */
    void *complete_token;
} mxp_kv_args;

typedef struct mxp_kv_info_args {
    mxp_header hdr;
    void *user_data;
    void *store;
    int32_t rank;                /* out                                     */
    int32_t num_workers;         /* out                                     */
    int32_t num_servers;         /* out                                     */
    int32_t role;                /* out: 0 worker, 1 server, 2 scheduler    */
} mxp_kv_info_args;

typedef struct mxp_kv_updater_args {
    mxp_header hdr;
    void *user_data;
    void *store;
    const char *op_name;         /* in-place update op, e.g. "sgd_mom_update" */
    const char *const *keys;     /* its kwargs                              */
    const char *const *vals;
    uint32_t n_kwargs;
    uint32_t reserved;
} mxp_kv_updater_args;

typedef struct mxp_kv_simple_args {  /* destroy, barrier, run_server */
    mxp_header hdr;
    void *user_data;
    void *store;
} mxp_kv_simple_args;

typedef struct mxp_kvstore_def {
    mxp_header hdr;
    const char *name;                               /* "dist_sync"          */
    const char *doc;
    int (*create)(mxp_kv_create_args *a);
    void (*destroy)(mxp_kv_simple_args *a);
    int (*init)(mxp_kv_args *a);                    /* synchronous          */
    int (*push)(mxp_kv_args *a);
    int (*pull)(mxp_kv_args *a);
    int (*pushpull)(mxp_kv_args *a);                /* (optional)           */
    int (*info)(mxp_kv_info_args *a);
    int (*barrier)(mxp_kv_simple_args *a);
    int (*set_updater)(mxp_kv_updater_args *a);     /* (optional)           */
    int (*run_server)(mxp_kv_simple_args *a);       /* blocks until shutdown */
    void *user_data;
} mxp_kvstore_def;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(sizeof(mxp_kv_create_args) == 56, "layout is frozen");
_Static_assert(offsetof(mxp_kv_args, int_keys) == 32, "layout is frozen");
_Static_assert(sizeof(mxp_kv_args) == 80, "layout is frozen");
_Static_assert(sizeof(mxp_kv_info_args) == 40, "layout is frozen");
_Static_assert(sizeof(mxp_kv_updater_args) == 56, "layout is frozen");
_Static_assert(sizeof(mxp_kv_simple_args) == 24, "layout is frozen");
_Static_assert(offsetof(mxp_kvstore_def, create) == 24, "layout is frozen");
_Static_assert(sizeof(mxp_kvstore_def) == 112, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_KVSTORE_H */
