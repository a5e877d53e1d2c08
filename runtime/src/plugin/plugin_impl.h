/* plugin/plugin_impl.h — private to the plugin module's files
 * (the plugin/ sources): the shared types and internal functions behind
 * plugin.h's face.  Code outside the module includes plugin/plugin.h (and
 * plugin/opdef.h for op defs and impls), never this.
 *
 * Pieces, one file each: manifest.c (YAML -> mxp_manifest), discover.c
 * (which manifests, in which order), requires.c (requires: without opening
 * the .so), sha256.c, loader.c (dlopen + descriptor validation + init),
 * registrar.c (transactional staging, validation, publish), registry.c (the
 * tables and the public getters), params.c (MXNet's value grammar), host.c
 * (the mxp_host table), simple_op.c (SimpleOp expansion), select.c (impl
 * policies; tune.c the 'tune' policy), impl_ref.c (reference-counted impls
 * that pin their packs), reload.c, manifest_gen.c, opdef.c (the one path
 * into op pack code, plugin/opdef.h).
 *
 * Locking: g_reg.lock (rwlock) guards the tables; lookups take it shared.
 * g_reg.load_lock (recursive mutex) serialises loading, unloading and
 * reloading of packs; pack code (init/fini) runs under load_lock but never
 * under the table lock, so it may call back into the host.
 * Op and pack entries are never freed before mxp_registry_shutdown, so a
 * pointer to one stays valid; what they point into pack memory (def, impl)
 * is valid only while the pack is pinned (an impl ref) or under load_lock. */
#ifndef MXP_PLUGIN_PLUGIN_IMPL_H
#define MXP_PLUGIN_PLUGIN_IMPL_H

#include "plugin/plugin.h"
#include "plugin/opdef.h"
#include "mxp_config.h"

#define MXP_HOST_VERSION_STRING MXP_CONFIG_VERSION

/* ------------------------------------------------------------ manifest */

typedef struct mxp_man_impl {
    char *op;       /* op it implements (for provides.impls; else the op's name) */
    char *name;
    char *device;   /* default "cpu" */
    int rank;
} mxp_man_impl;

typedef struct mxp_man_op {
    char *name;
    char **aliases;
    int n_aliases;
    mxp_man_impl *impls;
    int n_impls;
} mxp_man_op;

typedef struct mxp_man_pack {
    char *name;
    char *version;
    char *library;       /* absolute (resolved against the manifest's dir)  */
    char *library_raw;   /* as written                                      */
    char *sha256;        /* lowercase hex or NULL                           */
    int abi_major, abi_minor, min_host_minor; /* -1 when absent             */
    int eager;
    char **depends;      int n_depends;
    char **cpu_features; int n_cpu_features;
    int need_gpu;
    char *cuda_driver;
    mxp_man_op *ops;     int n_ops;
    mxp_man_impl *impls; int n_impls;   /* impls of other packs' ops        */
    char **devices;      int n_devices;
    char **kvstores;     int n_kvstores;
    char **iterators;    int n_iterators;
    int line, column;    /* of the entry, for messages                      */
} mxp_man_pack;

typedef struct mxp_manifest {
    char *path;
    int version;
    mxp_man_pack *packs;
    int n_packs;
} mxp_manifest;

/* Newest manifest_version this runtime understands. */
#define MXP_MANIFEST_VERSION 1

/* Parse a manifest file / a buffer (`name` is used in messages and to
 * resolve relative library paths; may be NULL -> "<memory>" and cwd).
 * Errors: MXP_EIO (cannot read), MXP_EFORMAT "file:line:col: why". */
int mxp__manifest_parse_file(const char *path, mxp_manifest **out);
int mxp__manifest_parse_mem(const char *buf, size_t len, const char *name, mxp_manifest **out);
void mxp__manifest_free(mxp_manifest *m);

/* ------------------------------------------------------------ sha256 */
typedef struct mxp_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    uint32_t n_buf;
} mxp_sha256;
void mxp__sha256_init(mxp_sha256 *s);
void mxp__sha256_update(mxp_sha256 *s, const void *data, size_t n);
void mxp__sha256_final(mxp_sha256 *s, uint8_t out[32]);
/* Hex digest of a file into hex[65]. MXP_EIO when unreadable. */
int mxp__sha256_file(const char *path, char hex[65]);

/* ------------------------------------------------------------ params */
/* Format field of def in params as MXNet would print it ("(3, 3)", "True"),
 * into buf.  Returns MXP_OK or MXP_EINVAL (buffer too small). */
int mxp__params_format(const mxp_param_def *def, const void *params, char *buf, size_t cap);
/* Type name as mxp_op_param_at reports it. */
const char *mxp__params_type_name(int32_t type);
/* The typed record (ABI 1.1) of an op's parsed params, for impl args
 * (param_access.c); mxp__param_get serves host.param_get. */
void mxp__op_params_record(const mxp_op_def *def, const void *values, mxp_op_params *out);
int mxp__param_get(const mxp_op_params *p, const char *name, int32_t type, void *out);
/* Element i of a param def array, honouring the writer's struct_size. */
const mxp_param_def *mxp__param_def_at(const mxp_param_def *defs, uint32_t i);

/* ------------------------------------------------------------ registry */

typedef enum mxp_pack_state_internal {
    PACK_NOT_LOADED = MXP_PACK_NOT_LOADED,
    PACK_LOADED = MXP_PACK_LOADED,
    PACK_UNAVAILABLE = MXP_PACK_UNAVAILABLE,
    PACK_FAILED = MXP_PACK_FAILED,
    PACK_LOADING = 10   /* reported as NOT_LOADED; used to detect cycles */
} mxp_pack_state_internal;

struct mxp_simple_expansion; /* simple_op.c */

/* Something a loaded pack registered (owned by the pack entry). */
typedef struct mxp_pub_op {
    const mxp_op_def *def;                 /* pack memory, or host for SimpleOps */
    struct mxp_simple_expansion *simple;   /* non-NULL for an expanded SimpleOp  */
} mxp_pub_op;

struct mxp_pack {
    mxp_man_pack *man;        /* owned (a deep copy)                          */
    char *manifest_path;
    int state;                /* mxp_pack_state_internal; under table lock    */
    char reason[1024];
    void *handle;             /* dlopen handle while loaded                   */
    const mxp_plugin_desc *desc;
    int desc_major, desc_minor, desc_min_host_minor;
    /* What the pack published (for unload). */
    mxp_pub_op *ops;          int n_ops;
    const mxp_op_impl **impls; int n_impls;
    struct mxp_simple_expansion **simples; int n_simples;
    const mxp_device_def **devices; int n_devices;
    const mxp_kvstore_def **kvstores; int n_kvstores;
    const mxp_iter_def **iters; int n_iters;
    /* Pins: live impl refs into this pack.  reloading blocks new pins. */
    atomic_long pins;
    atomic_int reloading;
    atomic_int reload_claimed; /* a mxp_pack_reload is running (reload.c)   */
    const char *loaded_version; /* the loaded library's, registry-owned      */
    int reloads;              /* successful reloads (under the table lock)    */
    struct mxp__stat_set *stats; /* counters the loaded build publishes
                                  (pack_stats.c); under the table lock      */
};

/* One implementation of an op: declared by a manifest, and/or registered. */
typedef struct mxp_impl_entry {
    struct mxp_op *op;
    char *name;
    char *device;
    int rank;
    mxp_pack *pack;           /* the pack that provides it                    */
    const mxp_op_impl *impl;  /* NULL until the pack is loaded               */
    int declared;             /* appeared in a manifest                       */
    /* Calls of this impl in this process and their wall time (opdef.c),
     * [0] forward, [1] backward; across reloads.  mxp_op_impl_stats. */
    atomic_ullong calls[2];
    atomic_ullong nanos[2];
} mxp_impl_entry;

/* Cached text of one parameter for mxp_op_param_at (registry-owned). */
typedef struct mxp_param_text {
    char *name, *type, *dflt, *range, *choices, *doc;
} mxp_param_text;
/* param_text.c: fill from a schema entry (heap copies); clear frees them. */
int mxp__param_text_fill(mxp_param_text *t, const mxp_param_def *d);
/* The *_param_at out-parameters from t (each may be NULL); t NULL clears them. */
void mxp__param_text_out(const mxp_param_text *t, const char **out_name, const char **out_type,
                         const char **out_default, const char **out_range, const char **out_choices,
                         const char **out_doc);
void mxp__param_text_clear(mxp_param_text *t);
/* feature_query.c: forget the cached iterator/kvstore/device descriptions
 * (registry shutdown). */
void mxp__feature_cache_clear(void);

struct mxp_op {
    char *name;
    char **aliases;
    int n_aliases;
    mxp_pack *pack;           /* defining pack (NULL: only impls are known)   */
    const mxp_op_def *def;    /* NULL until the defining pack is loaded       */
    mxp_impl_entry **impls;
    int n_impls;
    /* Copies made at publish, valid while the registry lives. */
    char *doc;
    mxp_param_text *ptext;
    int n_ptext;
    char *api_policy;         /* mxp_op_set_impl, or NULL                     */
    /* Nodes of long-lived owners (bound executors, optimizers) of this op:
     * a reload that drops the op is refused while any exist (reload_ops.c). */
    atomic_long bound;
    int removed;              /* dropped by its pack's reload: in the retired
                                 list, not in the tables (under the lock)    */
};

/* Registry tables (registry.c). */
typedef struct mxp_registry {
    pthread_rwlock_t lock;
    pthread_mutex_t load_lock;  /* recursive */
    int initialized;
    mxp_manifest **manifests; int n_manifests;
    mxp_pack **packs; int n_packs;
    struct mxp_op **ops; int n_ops;
    /* name/alias -> op hash (open addressing, power-of-two capacity). */
    struct { const char *key; struct mxp_op *op; } *map;
    size_t map_cap, map_used;
    /* Registered devices / kvstores / iterators, with their packs. */
    struct mxp_feature { const char *name; mxp_pack *pack; const void *def; int kind; int32_t dev_type; } *features;
    int n_features;
    int32_t next_dev_type;
    atomic_uint_fast64_t generation;
    /* Entries a reload removed (reload_ops.c): kept, never reachable by
     * name, so pointers held elsewhere stay valid; freed at shutdown. */
    struct mxp_op **retired_ops; int n_retired_ops;
    mxp_impl_entry **retired_impls; int n_retired_impls;
} mxp_registry;

extern mxp_registry mxp__g_reg;


void mxp__registry_rdlock(void);
void mxp__registry_wrlock(void);
void mxp__registry_unlock(void);
void mxp__registry_load_lock(void);
void mxp__registry_load_unlock(void);
/* Whether the calling thread holds the table lock (shared or exclusive),
 * the table lock exclusively, the load lock: for MXP_ASSERT in the
 * *_locked functions. */
int mxp__registry_held(void);
int mxp__registry_held_exclusive(void);
int mxp__registry_load_held(void);
/* Ensure initialised (discovery done). */
int mxp__registry_ensure(void);
void mxp__registry_bump(void);
/* Lookups; *_locked variants expect the table lock held. */
struct mxp_op *mxp__registry_find_op_locked(const char *name_or_alias);
struct mxp_op *mxp__registry_find_op(const char *name_or_alias);
mxp_pack *mxp__registry_find_pack_locked(const char *name);
/* Accessors of an op entry for the rest of the plugin module (each takes
 * the table lock itself).  The name is immutable. */
const char *mxp__op_name(const struct mxp_op *op);
mxp_pack *mxp__registry_op_pack(const struct mxp_op *op);
/* The op's impl entries on device `dev` (NULL: all): a new array. */
int mxp__registry_op_impls(const struct mxp_op *op, const char *dev, mxp_impl_entry ***out, int *out_n);
/* The policy set through mxp_op_set_impl into buf: 1 when one is set. */
int mxp__registry_op_api_policy(const struct mxp_op *op, char *buf, size_t cap);
/* Set (NULL: clear) it, after checking it names an impl, 'auto' or 'tune'. */
int mxp__registry_op_set_api_policy(struct mxp_op *op, const char *policy);
/* Validate a policy for op: 'auto', 'tune', an impl name or a preference
 * list "a,b,auto" ('auto'/'tune' last).  `where` starts the message. */
int mxp__registry_policy_check(const struct mxp_op *op, const char *policy, const char *where);
/* Create an op entry (table write lock held). */
struct mxp_op *mxp__registry_add_op_locked(const char *name, mxp_pack *pack);
int mxp__registry_add_alias_locked(struct mxp_op *op, const char *alias);
mxp_impl_entry *mxp__registry_find_impl_locked(struct mxp_op *op, const char *name, const char *device);
mxp_impl_entry *mxp__registry_add_impl_locked(struct mxp_op *op, const char *name, const char *device,
                                              int rank, mxp_pack *pack);
/* Add the packs of a parsed manifest (takes ownership of m). */
int mxp__registry_add_manifest(mxp_manifest *m);
/* Device type number for a device name (cpu, gpu, registered devices). */
int32_t mxp__registry_device_type(const char *name);

/* Connect a published device def to storage, NDArray copies and engine
 * workers (device_glue.c); detach before its pack is unloaded. */
void mxp__device_glue_attach(const char *pack_name, int32_t type, const mxp_device_def *d);
void mxp__device_glue_detach(const char *pack_name, int32_t type, const mxp_device_def *d);
/* MXP_OK when device def d has no count slot or dev_id is below its count;
 * else MXP_EDEVICE with the device's own explanation (device_query.c). */
int mxp__device_check(const mxp_device_def *d, int32_t dev_id);
/* Set the pack's state and reason (printf) under the table lock. */
void mxp__pack_set_state(mxp_pack *p, int state, const char *fmt, ...) MXP_PRINTF(3, 4);
/* Fill the cached schema text of op from its def (table write lock held). */
void mxp__registry_cache_schema_locked(struct mxp_op *op);

/* ------------------------------------------------------------ discovery */
/* Read every manifest in the search order into the registry. */
int mxp__discover_all(void);
/* Whether MXP_PACKS allows a pack name. */
int mxp__discover_pack_allowed(const char *name);
/* Default manifests found relative to the library (for tests). */
int mxp__discover_default_paths(char ***out_paths, int *out_n);

/* ------------------------------------------------------------ requires */
/* 1 when the manifest's requires: are met, else 0 with reason filled. */
int mxp__requires_met(const mxp_man_pack *m, char *reason, size_t cap);
/* /proc/cpuinfo flags contain `feature` (test hook: $MXP_CPUINFO path). */
int mxp__requires_cpu_has(const char *feature);

/* ------------------------------------------------------------ loader */
/* Load a pack (dependencies first).  Takes load_lock.  Returns MXP_OK when
 * loaded (or already), else the error (also recorded as the pack's reason). */
int mxp__pack_load(mxp_pack *p);
/* fini + unpublish (+ dlclose when do_dlclose).  load_lock held. */
void mxp__pack_unload_locked(mxp_pack *p, int do_dlclose);
/* Open a .so and validate its descriptor (no init).  name_expect may be NULL. */
int mxp__loader_open(const char *path, const char *name_expect, void **out_handle,
                     const mxp_plugin_desc **out_desc);

/* ------------------------------------------------------------ registrar */
typedef struct mxp_stage mxp_stage;
/* A staging area for pack p (p may be NULL for manifest gen: no checks
 * against declarations, no publish). */
int mxp__stage_create(mxp_pack *p, const char *pack_name, mxp_stage **out);
mxp_registrar *mxp__stage_registrar(mxp_stage *s);
/* Validate everything staged; MXP_OK or the first problem. */
int mxp__stage_validate(mxp_stage *s);
/* Publish into the registry (takes the table write lock). */
int mxp__stage_publish(mxp_stage *s);
void mxp__stage_free(mxp_stage *s);
/* Introspection for manifest_gen. */
int mxp__stage_n_ops(const mxp_stage *s);
const mxp_op_def *mxp__stage_op(const mxp_stage *s, int i);
int mxp__stage_n_impls(const mxp_stage *s);
const mxp_op_impl *mxp__stage_impl(const mxp_stage *s, int i);
int mxp__stage_n_features(const mxp_stage *s, int kind);
const char *mxp__stage_feature_name(const mxp_stage *s, int kind, int i);

/* ------------------------------------------------------------ host */

/* Undo a publish (registrar.c). */
int mxp__stage_unpublish(mxp_pack *p);

/* ------------------------------------------------------------ simple ops */
typedef struct mxp_simple_expansion {
    mxp_op_def def;
    mxp_op_impl impl;
    const mxp_simple_op_def *sdef;  /* pack memory                        */
    mxp_param_def *params;          /* pack params + "scalar"             */
    uint32_t n_params;
    uint32_t scalar_offset;         /* in the expanded param struct       */
    mxp_inplace_pair fwd_inplace, bwd_inplace;
    int define_op;                  /* 0: only adds an impl (name exists) */
} mxp_simple_expansion;
int mxp__simple_expand(const mxp_simple_op_def *sdef, mxp_simple_expansion **out);
void mxp__simple_free(mxp_simple_expansion *e);
/* Broadcast two shapes numpy-style (a, b -> out). MXP_ESHAPE on mismatch. */
int mxp__simple_broadcast_shape(const mxp_shape *a, const mxp_shape *b, mxp_shape *out);

/* ------------------------------------------------------------ impl refs */
/* A reference-counted handle on one implementation: pins the impl's pack
 * and the defining pack, so neither can be unloaded while it lives. */
struct mxp_impl_ref {
    atomic_long refs;
    struct mxp_op *op;
    mxp_impl_entry *entry;
    const mxp_op_def *def;     /* valid while the ref lives                */
    const mxp_op_impl *impl;   /* valid while the ref lives                */
    mxp_pack *impl_pack, *def_pack;
    uint64_t generation;       /* registry generation at acquisition       */
};

/* Acquire a ref on an impl entry (its packs must be loaded).  Waits while
 * either pack is reloading.  out cleared on entry. */
int mxp__impl_ref_acquire(mxp_impl_entry *e, mxp_impl_ref **out);
mxp_impl_ref *mxp__impl_ref_retain(mxp_impl_ref *r);
void mxp__impl_ref_release(mxp_impl_ref *r);
/* Wait until p has no pins (ms timeout). MXP_OK or MXP_EBUSY. */
int mxp__pack_drain(mxp_pack *p, long timeout_ms);

/* ------------------------------------------------------------ selection */

/* Effective policy of an op (strings static or registry-owned). */
int mxp__select_policy(const char *op_name, const char **out_policy, const char **out_source);
/* Choose an impl for a configuration and return a ref on it.  Loads packs
 * lazily in rank order.  explain (may be NULL): appended report. */
int mxp__select_impl(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref **out,
                     char **explain);
/* ------------------------------------------------------------ user config (user_config.c) */
/* The policy $XDG_CONFIG_HOME/mxplug/config.yaml gives op `canon` (or the
 * spelling `op_name` it was asked by) into buf: 1 when one is set. */
int mxp__config_policy(const char *canon, const char *op_name, char *buf, size_t cap);
/* Check every policy the config gives against the registry (an op and
 * impl of that name exist): MXP_OK or MXP_EINVAL naming file and op. */
int mxp__config_check_policies(void);
/* Forget the cached config (tests; the file is re-read on next use). */
void mxp__select_reset(void);
/* ------------------------------------------------------------ tune (tune.c) */
/* Policy 'tune': among refs[0..n) (candidates that accept q, in auto
 * order), the fastest for q's signature, from the cache or timed now (and
 * saved).  *out_index is 0 (the auto choice) when nothing could be timed.
 * out_note (may be NULL): newly allocated one-line account for explain. */
int mxp__tune_pick(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref *const *refs, int n, int *out_index,
                   char **out_note);
/* $XDG_CACHE_HOME/mxplug/tune.yaml (else ~/.cache/...); -1 when unknown. */
int mxp__tune_cache_path(char *buf, size_t cap);
/* Forward calls timed by tune so far in this process (tests). */
unsigned long mxp__tune_timing_runs(void);
/* Forget the in-memory cache (tests; the file is re-read on next use). */
void mxp__tune_reset(void);
/* One cache entry: the signature's choice and the candidates' times. */
typedef struct mxp__tune_entry {
    char *op, *sig, *choice;
    int n_times;
    char **names;
    double *ms;
} mxp__tune_entry;
void mxp__tune_entry_free(mxp__tune_entry *e);
/* The cached entry for sig, as a copy the caller frees
 * (mxp__tune_entry_free): 1 when found (tune_cache.c). */
int mxp__tune_cache_find(const char *sig, mxp__tune_entry *out);
/* Record e (copied) and rewrite the file atomically with it. */
int mxp__tune_cache_save(const mxp__tune_entry *e);
/* Median run time in ms of one candidate for configuration q, through the
 * production path (tune_time.c).  MXP_EUNSUPPORTED for an async impl. */
int mxp__tune_time_one(const char *op_name, mxp_impl_ref *ref, const mxp_select_query *q, double *out_ms,
                       double *out_min_ms);
/* a and b timed run by run in turn for q (tune_time.c): *out_ratio the
 * median over the rounds of a's time / b's (below 1: a is faster), each
 * one's median time, and the number of rounds. */
int mxp__tune_duel(const char *op_name, mxp_impl_ref *a, mxp_impl_ref *b, const mxp_select_query *q,
                   double *out_ratio, double *out_a_ms, double *out_b_ms, int *out_rounds);

/* Wake threads waiting on pins / reloads (impl_ref.c). */
void mxp__pack_notify(void);
/* Wait up to ms for p to have no pins and no thread to be in a pin scope;
 * 1 when so (no error set). */
int mxp__pack_wait_unpinned(mxp_pack *p, long ms);

/* ------------------------------------------------------------ pack counters (pack_stats.c) */
typedef struct mxp__stat_set mxp__stat_set;
/* Register def into *set (created on first use) and hand out its cell. */
int mxp__stat_set_add(mxp__stat_set **set, const char *pack_name, const mxp_stat_def *def, mxp_stat **out);
int mxp__stat_set_count(const mxp__stat_set *s);
void mxp__stat_set_free(mxp__stat_set *s);
/* Publish set as p's counters (table write lock taken here); returns the
 * previous set, which the caller frees once the old library is gone. */
mxp__stat_set *mxp__pack_stats_swap(mxp_pack *p, mxp__stat_set *set);
/* Take the counters a stage collected (the stage no longer frees them). */
mxp__stat_set *mxp__stage_take_stats(mxp_stage *s);

/* ------------------------------------------------------------ reloads */
/* Keep a re-read manifest for the registry's life (reload.c). */
int mxp__registry_keep_manifest(mxp_manifest *m);
/* Record the loaded library's version (copied; old copies stay valid). */
void mxp__pack_set_loaded_version_locked(mxp_pack *p, const char *version);
/* Check a stage against this manifest entry instead of the pack's. */
void mxp__stage_set_manifest(mxp_stage *s, const mxp_man_pack *man);
/* Ops of p that the staged new build no longer defines, and a bound node
 * still uses: MXP_OK when none, else MXP_EBUSY naming them (reload_ops.c). */
int mxp__reload_check_dropped(mxp_pack *p, const mxp_stage *s);
/* After publishing the new build: remove p's op and impl entries it did
 * not register again (table write lock taken here); returns how many. */
int mxp__reload_remove_dropped(mxp_pack *p);
/* Registry side of removal (registry.c, table write lock held): move op /
 * impl entry e to the retired lists and out of the name map; bring a
 * retired op of pack p back by name (a later build defines it again). */
void mxp__registry_retire_op_locked(struct mxp_op *op);
void mxp__registry_retire_impl_locked(struct mxp_op *op, mxp_impl_entry *e);
struct mxp_op *mxp__registry_unretire_op_locked(const char *name, mxp_pack *p);
/* 1 when a reload removed an op of this name or alias; its pack's name
 * into pack (takes the table lock). */
int mxp__registry_retired_pack(const char *name, char *pack, size_t cap);

/* Reload side: release every holder that is neither in a call nor busy. */
int mxp__holders_revoke_idle(void);
int mxp__reload_pending(void);
void mxp__reload_pending_add(int delta);

#endif /* MXP_PLUGIN_PLUGIN_IMPL_H */
