/* plugin/plugin.h — the plugin module's face: what other runtime modules
 * use of it.  Everything else (manifests, the registry tables and their
 * locks, loading, staging, selection and tune internals) is private to
 * the plugin/ sources in plugin_impl.h; an include of plugin_impl.h from
 * outside the module is a review flag (white-box tests of the module are
 * the exception).
 *
 * Here: kwargs parsing against a schema (iterators), registered features
 * (devices, kvstores, iterators) and pack pins, the mxp_host table and the
 * host.invoke installer, the RNG record behind the ABI's opaque mxp_rng,
 * selection queries, pin scopes and holders (long-lived users of pack code
 * that a reload may ask to let go).  Calls into an op's definition and
 * implementations go through plugin/opdef.h, which includes this.
 *
 * Opaque outside the module: struct mxp_op (a registry entry), mxp_impl_ref
 * (a pinned impl).  Their fields are read through opdef.h's functions. */
#ifndef MXP_PLUGIN_PLUGIN_H
#define MXP_PLUGIN_PLUGIN_H

#include "base/base.h"
#include "base/mutex.h"
#include "resource/resource.h"

#include <mxp/plugin.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A registry entry of an op (registry.c); opaque outside plugin/. */
struct mxp_op;
/* A reference-counted handle on one implementation, pinning its packs
 * (impl_ref.c); opaque outside plugin/. */
typedef struct mxp_impl_ref mxp_impl_ref;

/* ------------------------------------------------------------ params */
/* Parse kwargs into `out_struct` (params_size bytes, zeroed first, defaults
 * applied).  `what` names the owner ("op 'Convolution'"). */
int mxp__params_parse(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                      const char *const *vals, uint32_t n_kwargs, void *out_struct,
                      const char *what);
/* Parse one value into dst (the field).  Strings are strdup'ed. */
int mxp__params_parse_value(const mxp_param_def *def, const char *val, void *dst, const char *what);
void mxp__params_free(const mxp_param_def *defs, uint32_t n_defs, void *params);

/* ------------------------------------------------------------ features */
#define MXP_FEATURE_DEVICE 1
#define MXP_FEATURE_KVSTORE 2
#define MXP_FEATURE_ITER 3
/* The name of a device type ("cpu", "gpu", a registered device's). */
const char *mxp__device_name(int32_t type);
/* Registered features by name (loading the pack that declares it if
 * needed).  out_def points into pack memory. */
int mxp__registry_feature(int kind, const char *name, const void **out_def, mxp_pack **out_pack);
/* Pin / unpin a pack directly (impl refs; kvstores and iterators keep
 * their pack loaded this way).  MXP_EBUSY on timeout. */
int mxp__pack_pin(mxp_pack *p);
void mxp__pack_unpin(mxp_pack *p);

/* ------------------------------------------------------------ host */
const mxp_host *mxp__host_table(void);

/* The opaque mxp_rng of the ABI: the op's reserved Philox range and how
 * many 32-bit values of it the op has drawn (host.rng_* advance it). */
struct mxp_rng {
    mxp_rng_stream stream;
    uint64_t cursor;
};

/* host.invoke is served by the op runtime (runtime/src/op), which installs
 * itself here on first use. */
typedef int (*mxp__host_invoke_fn)(const char *op, uint32_t n_in, const mxp_tensor *in, uint32_t n_out,
                                   const mxp_tensor *out, const char *const *keys, const char *const *vals,
                                   uint32_t n_kwargs);
void mxp__host_set_invoke(mxp__host_invoke_fn fn);

/* ------------------------------------------------------------ selection */
/* A configuration an impl is chosen for (select.c, opdef.h's
 * mxp__opdef_query builds one from contiguous shapes and dtypes). */
typedef struct mxp_select_query {
    const void *params;           /* parsed params of the op                 */
    mxp_device device;
    const char *device_name;      /* "cpu" etc.                              */
    uint32_t n_in, n_out, n_aux;
    int32_t is_train;
    const mxp_shape *in_shapes, *out_shapes, *aux_shapes;
    const int32_t *in_dtypes, *out_dtypes, *aux_dtypes;
    const char *policy;           /* a node's own policy, or NULL: the op's  */
    /* Training: [n_in] 1 where the backward will be asked for input i's
     * gradient (a bound executor knows from its grad reqs), so `tune`
     * times the backward the step runs; NULL: unknown, all of them. */
    const uint8_t *in_grad;
} mxp_select_query;

/* ------------------------------------------------------------ pins and holders */
/* Pin scopes (impl_ref.c): wrap a call that may take several pins.
 * wait_for_reloads: first wait, holding no pin, until no reload is pending
 * (a new step); 0 for a call that must finish what a held pin started (a
 * backward).  Nest freely; only the outermost counts. */
void mxp__pin_scope_enter(int wait_for_reloads);
void mxp__pin_scope_leave(void);
long mxp__pins_in_scope(void);

/* Long-lived users of pack code (bound executors, optimizers) that a
 * reload can make let go at their step boundary (holders.c).  The owner
 * calls enter/leave around each call that touches its nodes; `boundary`:
 * this call starts a new step (a forward), so pending reloads are served
 * first; leave's `busy`: a backward must follow (no release until then). */
typedef struct mxp__holder {
    mxp__mutex mu;
    int busy;
    void (*release)(void *owner);
    void *owner;
    struct mxp__holder *prev, *next;
} mxp__holder;
void mxp__holder_register(mxp__holder *h, void (*release)(void *owner), void *owner);
void mxp__holder_unregister(mxp__holder *h); /* no-op if never registered */
void mxp__holder_enter(mxp__holder *h, int boundary);
void mxp__holder_leave(mxp__holder *h, int busy);
/* The calling thread is between enter and leave (for `_held` functions'
 * asserts; always 1 with NDEBUG). */
static inline int mxp__holder_held(mxp__holder *h) { return mxp__mutex_held(&h->mu); }

#endif /* MXP_PLUGIN_PLUGIN_H */
