/* plugin/opdef.h — the one path from the runtime into an op's pack code.
 *
 * Every call the host makes into an op definition (mxp_op_def) or an
 * implementation (mxp_op_impl) goes through this interface, so the args
 * structs, user_data, error wording and locking are written once:
 *   acquire / release     the op's definition, its defining pack pinned
 *   params                parse kwargs (check_params), free them
 *   names                 list_args / list_outputs / list_aux
 *   infer_shape/_type     one node's inference (default dtype rule included)
 *   backward_deps         def.backward_deps refined by declare_backward
 *   supports              ask one candidate impl (select.c)
 *   instances             choose an impl (select.c) and create it:
 *                         workspace + create; refcounted; destroy at the end
 *   run                   forward / backward with an mxp_op_ctx
 *                         (workspace, RNG, parallel_for, host, completion)
 * The node runtime (op/), the graph passes (graph/), selection and tune
 * (select.c, tune.c) call it; none of them calls a def or impl slot itself,
 * reads a registry entry (struct mxp_op) or takes the registry lock.
 *
 * Not here: which impl a policy picks (select.c, tune.c), engine pushes,
 * var lists and temp space (op/exec.c).
 *
 * Lifetimes: an mxp__opdef pins the defining pack, so `def` and params
 * parsed against it stay valid until mxp__opdef_release.  An instance owns
 * an impl ref (pinning the impl's and the def's packs), its params and the
 * impl's state; the last mxp__inst_release destroys the state.
 * Threads: acquire/release, params, names, inference and instance creation
 * may run on any thread; one instance may run on several threads at once
 * only if its impl allows it (op.h's threading contract). */
#ifndef MXP_PLUGIN_OPDEF_H
#define MXP_PLUGIN_OPDEF_H

#include "plugin/plugin.h"

/* ------------------------------------------------------------ definitions */
/* An op's definition, held: the defining pack stays pinned until release. */
typedef struct mxp__opdef {
    struct mxp_op *op;        /* registry entry (opaque outside plugin/)     */
    struct mxp_pack *pinned;  /* the defining pack, pinned                   */
    const mxp_op_def *def;    /* valid while pinned                          */
    const char *name;         /* canonical op name (registry-owned)          */
    uint64_t generation;      /* registry generation before acquisition      */
} mxp__opdef;

/* Find `name_or_alias` (discovery first), load its defining pack, pin it.
 * MXP_ENOENT names the op; load failures are prefixed with it.  out
 * cleared on entry; release accepts a cleared one. */
int mxp__opdef_acquire(const char *name_or_alias, mxp__opdef *out);
/* The same for a known registry entry. */
int mxp__opdef_acquire_op(struct mxp_op *op, mxp__opdef *out);
void mxp__opdef_release(mxp__opdef *d);

/* Count (+1) or uncount (-1) a node of a long-lived owner (bound executor,
 * optimizer) of op: a reload that drops the op is refused while any is
 * counted (reload_ops.c).  Count while the op's pack is pinned. */
void mxp__op_bound_add(struct mxp_op *op, int delta);

/* Ensure op's defining pack is loaded; *out_def valid only while the pack
 * stays loaded (callers that keep it acquire instead). */
int mxp__op_ensure_def(struct mxp_op *op, const mxp_op_def **out_def);

/* Parse kwargs into a new params struct (defaults applied, check_params
 * run).  Keys starting with "__" are MXNet's reserved attributes
 * (__shape__, __lr_mult__, ...), not parameters: skipped.  Free with
 * mxp__op_params_free. */
int mxp__op_params_new(const mxp_op_def *def, const char *const *keys, const char *const *vals, int n_kwargs,
                       void **out);
void mxp__op_params_free(const mxp_op_def *def, void *params);
/* Names of args (which 0) / outputs (1) / aux (2) for parsed params. */
int mxp__op_list_names_def(const mxp_op_def *def, const void *params, int which, char (*names)[MXP_NAME_MAX],
                           int capacity, int *out_count);
/* All names for parsed params, as one new array [args | outputs | aux]
 * with counts[3]; no fixed limit (a buffer a pack refuses is retried
 * larger, up to 65,536 names per list).  Free with free(). */
int mxp__op_list_all_names(const mxp_op_def *def, const void *params, char (**out)[MXP_NAME_MAX], int counts[3]);
/* Visible outputs for n_out outputs (def.n_visible_outputs, else all). */
int mxp__opdef_visible_outputs(const mxp_op_def *def, int n_out);

/* Shape inference of one node: in/out/aux are in/out (ndim < 0 unknown).
 * Returns MXP_OK, MXP_EINCOMPLETE (some left unknown: not an error), or an
 * error whose message starts with `who` ("op 'X'", "node 'n' (op 'X')"). */
int mxp__opdef_infer_shape(const mxp_op_def *def, const void *params, const char *who, uint32_t n_in,
                           uint32_t n_out, uint32_t n_aux, mxp_shape *in, mxp_shape *out, mxp_shape *aux);
/* Type inference of one node (MXP_DTYPE_UNKNOWN = unknown): the op's
 * infer_type; without one, the default rule: every entry takes the first
 * known dtype (a differing known one is then the caller's mismatch).
 * MXP_OK (unknowns may remain) or an error starting with `who`. */
int mxp__opdef_infer_type(const mxp_op_def *def, const void *params, const char *who, uint32_t n_in,
                          uint32_t n_out, uint32_t n_aux, int32_t *in, int32_t *out, int32_t *aux);
/* Which forward values backward reads, as 0/1 arrays need_out_grad[n_out],
 * need_in[n_in], need_out[n_out]: def.backward_deps refined by
 * declare_backward; everything when the refinement fails. */
void mxp__opdef_backward_deps(const mxp_op_def *def, const void *params, uint32_t n_in, uint32_t n_out,
                              uint8_t *need_out_grad, uint8_t *need_in, uint8_t *need_out);

/* ------------------------------------------------------------ impls */
/* A configuration over contiguous [n_in | n_out | n_aux] shapes and dtypes. */
void mxp__opdef_query(mxp_select_query *q, const void *params, mxp_device dev, int is_train, uint32_t n_in,
                      uint32_t n_out, uint32_t n_aux, const mxp_shape *shapes, const int32_t *dtypes);
/* impl.supports for configuration q: 1 accepts, 0 refuses (reason filled),
 * < 0 error (reason says so). */
int mxp__opdef_supports(const mxp_impl_ref *ref, const mxp_select_query *q, char *reason, size_t cap);

/* One implementation bound to one signature: an impl ref, params parsed
 * against ref->def, the impl's state and workspace size, and a copy of the
 * signature.  Immutable after creation except for the refcount. */
typedef struct mxp__inst {
    atomic_int refs;
    mxp_impl_ref *ref;
    void *params;              /* parsed against ref->def                    */
    int own_params;            /* freed with the instance                    */
    mxp_op_params op_params;   /* params + ref->def's schema (ABI 1.1 record) */
    void *state;               /* impl.create, or NULL                       */
    int created;               /* impl.create ran (tests count creates)      */
    uint64_t workspace_bytes;  /* impl.workspace                             */
    mxp_device dev;
    int is_train;
    uint64_t generation;       /* ref's registry generation                  */
    uint32_t n_in, n_out, n_aux;
    mxp_shape *shapes;         /* [n_in | n_out | n_aux]                     */
    int32_t *dtypes;
} mxp__inst;

/* Choose an impl of od's op for q (select.c: policy, supports, tune),
 * parse kwargs against the chosen ref's def, then workspace + create.
 * q->params are od's parsed params (what supports and tune see). */
int mxp__inst_bind(const mxp__opdef *od, const mxp_select_query *q, const char *const *keys,
                   const char *const *vals, int n_kwargs, mxp__inst **out);
/* workspace + create for a given candidate (tune): takes over `ref`;
 * params are borrowed (must outlive the instance). */
int mxp__inst_create(mxp_impl_ref *ref, const mxp_select_query *q, void *params, int own_params, mxp__inst **out);
mxp__inst *mxp__inst_retain(mxp__inst *in);
/* The last release destroys the state, frees owned params, releases the ref. */
void mxp__inst_release(mxp__inst *in);
/* What callers may know of an instance. */
const char *mxp__inst_impl_name(const mxp__inst *in);
const mxp_op_def *mxp__inst_def(const mxp__inst *in);
int mxp__inst_is_async(const mxp__inst *in);
int mxp__inst_has_backward(const mxp__inst *in);

/* ------------------------------------------------------------ running */
/* One run of an instance.  Tensors: forward [in | out | aux]; backward
 * [out_grad | in | out | in_grad | aux] (absent entries data NULL). */
typedef struct mxp__run {
    int backward, is_train;
    mxp_device dev;
    void *stream;
    mxp_tensor *t;
    const int32_t *req;        /* forward [n_out]; backward [n_in]           */
    void *ws;
    uint64_t ws_bytes;
    mxp_rng *rng;              /* NULL: the op asked for none                */
    /* Asynchronous impls finish through complete(token, status, message). */
    void (*complete)(void *token, int32_t status, const char *message);
    void *complete_token;
    void *host_private;
    const char *label;         /* names the op in errors                     */
} mxp__run;

/* Fill *ctx (caller storage that outlives an asynchronous run) and call
 * forward or backward on the calling thread.  Errors carry
 * "op 'LABEL' (impl 'I'): forward failed (...)" unless the impl set one. */
int mxp__inst_run(const mxp__inst *in, const mxp__run *r, mxp_op_ctx *ctx);

#endif /* MXP_PLUGIN_OPDEF_H */
