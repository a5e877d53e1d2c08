/* mxp/host.h — what the host offers a pack: the host table (mxp_host) and
 * the registrar a pack registers its features through during init.
 *
 * Packs never link against libmxplug; every host service is a slot here
 * (SQLite's extension-API pattern), so a pack loads into any host of the
 * same major.  Slots are append-only.  Before using a slot added after 1.0,
 * check MXP_HAS_FIELD(host, mxp_host, slot) and that it is non-NULL.
 *
 * Typed reads of an op's parameters from any pack (since 1.1): the
 * mxp_param_get_* helpers after the table; see "Implementing another
 * pack's op" in op.h.
 *
 * Counters a pack publishes (since 1.2): registrar.add_stat, through
 * mxp_registrar_add_stat below; see stats.h.
 *
 * Registration is transactional: what init registers is staged, validated
 * (unique names, declared vs registered, schemas) and published only when
 * init returns MXP_OK; on failure everything is rolled back.
 * Since ABI 1.0. */
#ifndef MXP_HOST_H
#define MXP_HOST_H

#include <mxp/types.h>
#include <mxp/tensor.h>
#include <mxp/params.h>
#include <mxp/op.h>
#include <mxp/simple_op.h>
#include <mxp/device.h>
#include <mxp/kvstore.h>
#include <mxp/iter.h>
#include <mxp/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MXP_HOST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MXP_HOST_PRINTF(a, b)
#endif

struct mxp_var; /* an engine dependency variable (opaque) */

/* Engine function properties for host.engine_push (same numbers as the
 * host API's mxp_fn_prop). */
#define MXP_PUSH_NORMAL      0
#define MXP_PUSH_COPY        1
#define MXP_PUSH_PRIORITIZED 3
#define MXP_PUSH_ASYNC       4
#define MXP_PUSH_NO_SKIP     7

typedef struct mxp_host_push_args {
    mxp_header hdr;
    /* Exactly one of fn / async_fn.  fn returns a status (describe failures
     * with set_error); async_fn calls complete(token, ...) exactly once. */
    int (*fn)(void *arg);
    void (*async_fn)(void *arg, mxp_complete_fn complete, void *token);
    void *arg;
    void (*free_arg)(void *arg);       /* (optional) after the run          */
    struct mxp_var *const *const_vars; /* read                               */
    struct mxp_var *const *mutate_vars;/* written                            */
    uint32_t n_const;
    uint32_t n_mutate;
    mxp_device device;
    int32_t prop;                      /* MXP_PUSH_*                         */
    int32_t priority;
    const char *name;                  /* for errors and profiling; copied   */
} mxp_host_push_args;

typedef struct mxp_host {
    mxp_header hdr;
    const char *host_version;          /* e.g. "0.1.0"                       */

    /* --- errors and logging ------------------------------------------- */
    /* Describe the current failure (what, why, where) and return status.
     * The message reaches the application through mxp_last_error(). */
    int (*set_error)(int32_t status, const char *fmt, ...) MXP_HOST_PRINTF(2, 3);
    /* Log at a level (mxp_log_level); category is usually the pack name. */
    void (*log)(int32_t level, const char *category, const char *fmt, ...) MXP_HOST_PRINTF(3, 4);

    /* --- threads ------------------------------------------------------ */
    int32_t (*num_threads)(void);      /* the runtime's thread budget        */
    /* As mxp_op_ctx.parallel_for, usable outside op callbacks. */
    int (*parallel_for)(int64_t n, int64_t grain, mxp_range_fn fn, void *arg);

    /* --- host memory (64-byte aligned, pooled) ------------------------ */
    void *(*alloc_host)(uint64_t bytes); /* NULL on failure                  */
    void (*free_host)(void *ptr);        /* NULL is a no-op                  */

    /* --- random numbers from the op's reserved counter range ---------- */
    int (*rng_uniform_f32)(mxp_rng *rng, float lo, float hi, float *out, uint64_t n);
    int (*rng_normal_f32)(mxp_rng *rng, float mean, float stddev, float *out, uint64_t n);
    int (*rng_bernoulli_f32)(mxp_rng *rng, float p, float *out, uint64_t n);
    int (*rng_uniform_f64)(mxp_rng *rng, double lo, double hi, double *out, uint64_t n);
    int (*rng_normal_f64)(mxp_rng *rng, double mean, double stddev, double *out, uint64_t n);
    int (*rng_bits)(mxp_rng *rng, uint32_t *out, uint64_t n);
    /* Philox4x32-10 key and first counter of the op's range, for device
     * kernels that generate in place (counter advances by 1 per 4 words). */
    int (*rng_philox)(mxp_rng *rng, uint64_t *out_key, uint64_t *out_counter);

    /* --- devices and params ------------------------------------------- */
    /* The device type number of a device name ("cpu", "gpu", "mock"), or
     * MXP_DEV_UNKNOWN. */
    int32_t (*device_type)(const char *name);
    /* Parse MXNet-style kwargs into a struct described by defs (the same
     * machinery the host uses for ops).  `what` names the owner in errors. */
    int (*parse_params)(const mxp_param_def *defs, uint32_t n_defs,
                        const char *const *keys, const char *const *vals,
                        uint32_t n_kwargs, void *out_struct, const char *what);
    /* Release what parse_params stored (STRING values).  */
    void (*free_params)(const mxp_param_def *defs, uint32_t n_defs, void *params);

    /* --- running other ops --------------------------------------------- */
    /* Run a registered op synchronously on the calling thread (e.g. a
     * server-side optimizer update).  Outputs must be allocated. */
    int (*invoke)(const char *op_name,
                  uint32_t n_in, const mxp_tensor *in,
                  uint32_t n_out, const mxp_tensor *out,
                  const char *const *keys, const char *const *vals, uint32_t n_kwargs);

    /* --- engine, for packs with asynchronous work of their own -------- */
    int (*engine_new_var)(struct mxp_var **out_var);
    void (*engine_delete_var)(struct mxp_var *var);
    int (*engine_push)(const mxp_host_push_args *a);
    int (*engine_wait_for_var)(struct mxp_var *var);

    /* --- reading an op's parsed parameters (since 1.1) ------------------ */
    /* Read parameter `name` of the record p (an impl's args->op_params)
     * into *out, whose C type is given by `type`:
     *   MXP_PARAM_INT     int64_t              MXP_PARAM_FLOAT  double
     *   MXP_PARAM_BOOL    int32_t (0/1)        MXP_PARAM_DTYPE  int32_t (mxp_dtype)
     *   MXP_PARAM_ENUM    const char * (the choice's name, e.g. "NCHW")
     *   MXP_PARAM_STRING  const char * (NULL when unset)
     *   MXP_PARAM_SHAPE   mxp_param_shape      (has_value 0 for "None")
     *   MXP_PARAM_OPT_INT mxp_param_opt_int    MXP_PARAM_OPT_FLOAT mxp_param_opt_float
     * `type` must be the parameter's declared type (no conversions).
     * Errors (described for mxp_last_error / set_error's chain):
     *   MXP_ENOENT  the op has no parameter `name` (the message lists them)
     *   MXP_ETYPE   the parameter has another type (the message says which)
     *   MXP_EINVAL  p, name or out is NULL, or p is not a valid record.
     * Prefer the typed helpers below, which also handle an older host. */
    int (*param_get)(const mxp_op_params *p, const char *name, int32_t type, void *out);
} mxp_host;

/* ------------------------------------------ typed parameter reads (1.1) */
/* mxp_param_get_<type>(host, record, name, &out): the typed front of
 * host->param_get.  They return MXP_EUNSUPPORTED (with a message) when the
 * host predates ABI 1.1 or when record is NULL (an old host passes none);
 * set min_host_minor = 1 in the descriptor to refuse such hosts at load. */
static inline int mxp_param_get(const mxp_host *h, const mxp_op_params *p, const char *name, int32_t type,
                                void *out) {
    if (!h) return MXP_EINVAL;
    if (!MXP_HAS_FIELD(h, mxp_host, param_get) || !h->param_get || !p)
        return !h->set_error ? MXP_EUNSUPPORTED : h->set_error(MXP_EUNSUPPORTED, "reading parameter '%s': the host has no typed parameter "
                            "access (ABI 1.1 needed, host has %u.%u)", name ? name : "?",
                            (unsigned)h->hdr.abi_major, (unsigned)h->hdr.abi_minor);
    return h->param_get(p, name, type, out);
}
static inline int mxp_param_get_int(const mxp_host *h, const mxp_op_params *p, const char *name, int64_t *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_INT, out);
}
static inline int mxp_param_get_float(const mxp_host *h, const mxp_op_params *p, const char *name, double *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_FLOAT, out);
}
static inline int mxp_param_get_bool(const mxp_host *h, const mxp_op_params *p, const char *name, int32_t *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_BOOL, out);
}
/* The choice's name ("NCHW"); compare names, not indices. */
static inline int mxp_param_get_enum(const mxp_host *h, const mxp_op_params *p, const char *name,
                                     const char **out) {
    return mxp_param_get(h, p, name, MXP_PARAM_ENUM, (void *)out);
}
static inline int mxp_param_get_string(const mxp_host *h, const mxp_op_params *p, const char *name,
                                       const char **out) {
    return mxp_param_get(h, p, name, MXP_PARAM_STRING, (void *)out);
}
static inline int mxp_param_get_dtype(const mxp_host *h, const mxp_op_params *p, const char *name, int32_t *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_DTYPE, out);
}
static inline int mxp_param_get_shape(const mxp_host *h, const mxp_op_params *p, const char *name,
                                      mxp_param_shape *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_SHAPE, out);
}
static inline int mxp_param_get_opt_int(const mxp_host *h, const mxp_op_params *p, const char *name,
                                        mxp_param_opt_int *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_OPT_INT, out);
}
static inline int mxp_param_get_opt_float(const mxp_host *h, const mxp_op_params *p, const char *name,
                                          mxp_param_opt_float *out) {
    return mxp_param_get(h, p, name, MXP_PARAM_OPT_FLOAT, out);
}

/* The registrar handed to init.  Each add_* stages a feature; the pointer
 * passed must stay valid until the pack's fini returns. */
typedef struct mxp_registrar {
    mxp_header hdr;
    void *host_private;
    int (*add_op)(struct mxp_registrar *r, const mxp_op_def *def);
    int (*add_impl)(struct mxp_registrar *r, const mxp_op_impl *impl);
    int (*add_simple_op)(struct mxp_registrar *r, const mxp_simple_op_def *def);
    int (*add_device)(struct mxp_registrar *r, const mxp_device_def *def);
    int (*add_kvstore)(struct mxp_registrar *r, const mxp_kvstore_def *def);
    int (*add_iter)(struct mxp_registrar *r, const mxp_iter_def *def);
    /* --- since 1.2 ---------------------------------------------------- */
    /* Register a counter the pack publishes (stats.h); *out gets the
     * host-owned cell, valid until the pack's fini returns.  Errors:
     * MXP_EINVAL (bad name or kind), MXP_EEXIST (name registered twice).
     * Call it through mxp_registrar_add_stat. */
    int (*add_stat)(struct mxp_registrar *r, const mxp_stat_def *def, mxp_stat **out);
} mxp_registrar;

/* Register counter `def` during init (since 1.2).  On a host older than
 * 1.2 this succeeds with *out = NULL: the mxp_stat_* helpers then do
 * nothing, so the pack runs unchanged, without counters. */
static inline int mxp_registrar_add_stat(mxp_registrar *r, const mxp_stat_def *def, mxp_stat **out) {
    if (!out) return MXP_EINVAL;
    *out = NULL;
    if (!r || !MXP_HAS_FIELD(r, mxp_registrar, add_stat) || !r->add_stat) return MXP_OK;
    return r->add_stat(r, def, out);
}

/* Whether host h reads a supports() answer of MXP_SUPPORTS_FALLBACK (op.h)
 * as "runs it, prefer others" (since 1.3); an older host reads 2 as a
 * refusal, so a pack answers MXP_SUPPORTS_YES there instead. */
static inline int mxp_host_supports_fallback(const mxp_host *h) {
    return h && h->hdr.abi_major == MXP_ABI_MAJOR && h->hdr.abi_minor >= 3;
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(offsetof(mxp_host_push_args, const_vars) == 40, "layout is frozen");
_Static_assert(offsetof(mxp_host_push_args, device) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_host_push_args) == 88, "layout is frozen");
_Static_assert(offsetof(mxp_host, set_error) == 16, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, num_threads) == 32, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, alloc_host) == 48, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, rng_uniform_f32) == 64, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, rng_philox) == 112, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, device_type) == 120, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, invoke) == 144, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, engine_new_var) == 152, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_host, param_get) == 184, "mxp_host layout is frozen");
_Static_assert(sizeof(mxp_host) == 192, "mxp_host layout is frozen");
_Static_assert(offsetof(mxp_registrar, add_op) == 16, "layout is frozen");
_Static_assert(offsetof(mxp_registrar, add_stat) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_registrar) == 72, "layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_HOST_H */
