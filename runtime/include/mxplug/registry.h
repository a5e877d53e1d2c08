/* mxplug/registry.h — packs, ops and implementation choice.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * The registry is filled from YAML manifests without opening any .so
 * (lazy loading); a pack is opened on the first use of something it
 * provides, or explicitly with mxp_pack_load.  Discovery order:
 * $MXP_MANIFEST, then manifest.yaml in each directory of $MXP_PLUGIN_PATH,
 * then the build tree's or the installed manifest (found relative to
 * libmxplug).  $MXP_PACKS=a,b restricts which packs may load.
 *
 * Handles (mxp_pack, mxp_op) are owned by the registry and stay valid
 * until mxp_registry_shutdown.  Strings returned are owned by the registry
 * and valid as long as their handle.  All functions are thread-safe and
 * initialise the registry on first use. */
#ifndef MXPLUG_REGISTRY_H
#define MXPLUG_REGISTRY_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_pack mxp_pack;
typedef struct mxp_op mxp_op;

/* ============================================================ registry */

/* Discover manifests now (otherwise done on first use).  Errors in one
 * manifest or pack are recorded on that pack and logged; the call fails
 * only when no manifest could be read at all and one was named explicitly. */
MXP_API int mxp_registry_init(void);

/* Wait for every function queued on the engine to complete (their errors
 * stay for a later wait), then unload every pack (fini, no dlclose at exit)
 * and forget all manifests.  Called from inside an engine function it does
 * nothing but log an error (MXP_EBUSY: waiting there would deadlock). */
MXP_API void mxp_registry_shutdown(void);

/* Changes whenever an implementation choice may change (policy set, pack
 * loaded, reloaded or unloaded).  Executors compare it at each forward. */
MXP_API uint64_t mxp_registry_generation(void);

/* Read an extra manifest file (as if it were named in $MXP_MANIFEST). */
MXP_API int mxp_registry_add_manifest(const char *path);

/* ============================================================ packs */

typedef enum mxp_pack_load_state {
    MXP_PACK_NOT_LOADED  = 0,
    MXP_PACK_LOADED      = 1,
    MXP_PACK_UNAVAILABLE = 2, /* requires: not met, or excluded by MXP_PACKS */
    MXP_PACK_FAILED      = 3  /* loading failed; see the reason */
} mxp_pack_load_state;

MXP_API int mxp_pack_count(void);
MXP_API const mxp_pack *mxp_pack_at(int index);              /* NULL if out of range */
MXP_API const mxp_pack *mxp_pack_find(const char *name);     /* NULL if unknown      */
MXP_API const char *mxp_pack_name(const mxp_pack *pack);
MXP_API const char *mxp_pack_version(const mxp_pack *pack);
MXP_API const char *mxp_pack_library(const mxp_pack *pack);  /* absolute path        */
MXP_API const char *mxp_pack_manifest(const mxp_pack *pack); /* file it came from    */
MXP_API void mxp_pack_abi(const mxp_pack *pack, int *out_major, int *out_minor,
                          int *out_min_host_minor);
/* State and, for UNAVAILABLE/FAILED, the reason (else ""). */
MXP_API int mxp_pack_state(const mxp_pack *pack, const char **out_reason);
MXP_API int mxp_pack_is_eager(const mxp_pack *pack);

/* Open, validate and register a pack (and its dependencies) now. */
MXP_API int mxp_pack_load(const char *name);

/* Replace a loaded pack by its file on disk: block new users and drain the
 * in-flight ones, fini, dlclose, dlopen again, register again; op states
 * are re-created lazily.  A rebuilt .so must replace the old one by rename
 * (copying over a mapped file crashes the process).  The pack's manifest
 * entry is re-read: ops and impls the new build adds appear, those it no
 * longer registers are removed (mxp_op_find no longer finds them).  An op
 * the new build drops while a bound executor or an optimizer still has a
 * node of it refuses the reload (MXP_EBUSY naming the op); the loaded
 * version then stays in service, as on any other failure. */
MXP_API int mxp_pack_reload(const char *name);

/* ---------------------------------------------------- counters of a pack */
/* The counters a loaded pack publishes (ABI 1.2, <mxp/stats.h>): its own
 * numbers, beside the runtime's per-impl calls and time
 * (mxp_op_impl_stats).  They belong to the loaded build: a reload replaces
 * them by the new build's, which start at 0; a pack not loaded has none. */
typedef enum mxp_pack_stat_kind {
    MXP_PACK_STAT_COUNT = 1, /* events or items, named by unit */
    MXP_PACK_STAT_BYTES = 2,
    MXP_PACK_STAT_NANOS = 3
} mxp_pack_stat_kind;

typedef struct mxp_pack_stat {
    const char *name;  /* "conv_naive.macs"                               */
    const char *unit;  /* "bytes", "ns", or what a count counts ("calls") */
    const char *doc;   /* "" when the pack gave none                       */
    int kind;          /* mxp_pack_stat_kind                               */
    int gauge;         /* 1: a level the pack sets; 0: a running total     */
    uint64_t value;
} mxp_pack_stat;

/* A copy of every counter of `pack`, read at one moment (in registration
 * order): *out_stats (strings included) is one allocation, freed with
 * mxp_pack_stats_free; *out_count may be 0 (then *out_stats is NULL). */
MXP_API int mxp_pack_stats(const mxp_pack *pack, mxp_pack_stat **out_stats, int *out_count);
MXP_API void mxp_pack_stats_free(mxp_pack_stat *stats);
/* One counter's value by name; MXP_ENOENT naming the pack and its
 * counters when it has none of that name. */
MXP_API int mxp_pack_stat_value(const mxp_pack *pack, const char *name, uint64_t *out_value);

/* Introspect a .so without registering anything: write its manifest entry
 * (YAML, a list item) into a newly allocated string (free with mxp_free). */
MXP_API int mxp_pack_manifest_gen(const char *library_path, char **out_yaml);

/* ============================================================ ops */

MXP_API int mxp_op_count(void);                        /* without aliases   */
MXP_API const mxp_op *mxp_op_at(int index);
/* By name or alias; from the manifests alone (never opens a .so). */
MXP_API const mxp_op *mxp_op_find(const char *name_or_alias);
MXP_API const char *mxp_op_name(const mxp_op *op);
MXP_API const char *mxp_op_pack(const mxp_op *op);     /* defining pack     */
MXP_API int mxp_op_alias_count(const mxp_op *op);
MXP_API const char *mxp_op_alias_at(const mxp_op *op, int index);

/* Implementations, as declared in manifests (and, once loaded, as
 * registered). */
MXP_API int mxp_op_impl_count(const mxp_op *op);
MXP_API const char *mxp_op_impl_name(const mxp_op *op, int index);
MXP_API const char *mxp_op_impl_device(const mxp_op *op, int index);
MXP_API const char *mxp_op_impl_pack(const mxp_op *op, int index);
MXP_API int mxp_op_impl_rank(const mxp_op *op, int index);
/* What implementation `index` did in this process: forward and backward
 * calls and their wall time in ms (kept by the runtime for every pack, also
 * across reloads; an async impl's time is the time to hand the work off). */
MXP_API int mxp_op_impl_stats(const mxp_op *op, int index, uint64_t *out_forward_calls, uint64_t *out_backward_calls,
                              double *out_forward_ms, double *out_backward_ms);

/* Load the defining pack (for the schema below). */
MXP_API int mxp_op_load(const mxp_op *op);

/* Schema; these load the defining pack when needed (NULL / -1 on failure,
 * with mxp_last_error set). */
MXP_API const char *mxp_op_doc(const mxp_op *op);
MXP_API int mxp_op_param_count(const mxp_op *op);
/* Any out pointer may be NULL.  type: "int", "float", "boolean", "enum",
 * "string", "dtype", "shape", "int or None", "float or None".
 * range: "[0, inf)" style or "" ; choices: "{'relu', 'tanh'}" or "". */
MXP_API int mxp_op_param_at(const mxp_op *op, int index, const char **out_name,
                            const char **out_type, const char **out_default,
                            const char **out_range, const char **out_choices,
                            const char **out_doc);
/* Names of inputs / outputs / aux states for the given kwargs (NULL, 0 for
 * defaults).  Fills up to `capacity` names into names[][64]; sets *out_count. */
MXP_API int mxp_op_list_names(const mxp_op *op, int which /* 0 args, 1 outputs, 2 aux */,
                              const char *const *keys, const char *const *vals, int n_kwargs,
                              char (*names)[64], int capacity, int *out_count);

/* ============================================================ impl choice */

/* Policy of an op: "auto" (highest rank whose supports() accepts; ties by
 * name), "tune" (time each candidate per shape signature, keep the
 * fastest, persisted in $XDG_CACHE_HOME/mxplug/tune.yaml), or an impl name.
 * Precedence: this API > $MXP_IMPL_<Op> > $XDG_CONFIG_HOME/mxplug/config.yaml
 * > auto.  policy NULL clears the API setting.  Takes effect at the next
 * forward of a bound graph (never between a forward and its backward). */
MXP_API int mxp_op_set_impl(const char *op_name, const char *policy);
/* Is `policy` valid for the op: 'auto', 'tune', an implementation name, or
 * a preference list such as "winograd,auto" (the first item that exists
 * and accepts a configuration wins; 'auto'/'tune' end the list)?  Errors
 * name the bad item and list the valid names. */
MXP_API int mxp_op_policy_check(const char *op_name, const char *policy);
/* Check every MXP_IMPL_<Op> variable and every policy in the user config
 * (unknown op, misspelled impl name): the first problem, or MXP_OK.
 * Applications call it at start so a typo is not found mid-training. */
MXP_API int mxp_registry_check_policies(void);
/* Effective policy and where it came from ("api", "env", "config",
 * "default"). */
MXP_API int mxp_op_policy(const char *op_name, const char **out_policy, const char **out_source);

/* Persist a policy in the user config (what `mxplug impl OP IMPL` does);
 * policy NULL removes it. */
MXP_API int mxp_config_set_impl(const char *op_name, const char *policy);

/* Explain, for one configuration, why each implementation would or would
 * not be chosen (rank, supports() refusal with its reason, override).
 * shapes: one "name=d1,d2,..." string per known input; kwargs as above.
 * Writes a human-readable multi-line report into a newly allocated string
 * (free with mxp_free). */
MXP_API int mxp_op_explain(const char *op_name, const char *device,
                           const char *const *shapes, int n_shapes,
                           const char *const *keys, const char *const *vals, int n_kwargs,
                           char **out_report);

/* ---- devices ---- */
/* Units of a device type: "cpu" is 1; another name loads the pack that
 * provides it (its init touches no hardware) and asks its count slot, so
 * "gpu" is 0 on a machine without a GPU or driver.  MXP_ENOENT for a name
 * no manifest provides. */
MXP_API int mxp_device_count(const char *name, int *out_count);
/* MXP_OK when arrays can be made on dev: any cpu ordinal >= 0, or a unit
 * that the device's pack counts (loading the pack on first use).  Else
 * MXP_EDEVICE with the device's own explanation, e.g. "device gpu(0)
 * (pack 'ops-cuda', 0 unit(s)): gpu mem_info: no CUDA device:
 * cudaGetDeviceCount says ...", or "device gpu(0): no device named 'gpu'
 * in any manifest or loaded pack" when no pack provides it. */
MXP_API int mxp_device_check(mxp_device dev);
/* The device names a pack's manifest entry provides. */
MXP_API int mxp_pack_device_count(const mxp_pack *pack);
MXP_API const char *mxp_pack_device_at(const mxp_pack *pack, int index); /* NULL if out of range */

/* ---- iterators, kvstore types and devices ("features") ---- */
/* kind: "iterator" (or "iter"), "kvstore" or "device"; another kind is
 * MXP_EINVAL (-1 from the count).  Names come from the manifests (nothing
 * is opened) after the runtime's own ("local" and "device" kvstores, the
 * "cpu" device, whose pack is "runtime").  Returned strings are owned by
 * the registry and valid until mxp_registry_shutdown. */
MXP_API int mxp_feature_count(const char *kind);
MXP_API const char *mxp_feature_at(const char *kind, int index, const char **out_pack); /* NULL past the end */
/* Describe one (loads the pack that provides it): providing pack, doc and
 * the number of parameters (iterators take parameters by name, as
 * mxp_iter_create's kwargs; kvstore types and devices none). */
MXP_API int mxp_feature_describe(const char *kind, const char *name, const char **out_pack,
                                 const char **out_doc, int *out_n_params);
/* One parameter, in the form of mxp_op_param_at. */
MXP_API int mxp_feature_param_at(const char *kind, const char *name, int index, const char **out_name,
                                 const char **out_type, const char **out_default, const char **out_range,
                                 const char **out_choices, const char **out_doc);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_REGISTRY_H */
