/* mxp/op.h — operators: definitions (semantics) and implementations.
 *
 * As in MXNet's OperatorProperty / Operator split, a pack registers
 *   - one mxp_op_def per op: name, aliases, doc, parameter schema, argument /
 *     output / aux-state names, shape and type inference, backward
 *     dependencies, inplace options and resource requests; and
 *   - any number of mxp_op_impl for an op (from this or another pack): one
 *     per (impl name, device), each with a rank, an optional `supports`
 *     predicate, optional state (create/destroy), workspace size, forward and
 *     backward.
 * The host chooses an impl per node (policy auto / fixed / tune), allocates
 * outputs and workspace, and runs forward/backward on its engine.
 *
 * Every callback takes one args struct that starts with mxp_header, so new
 * arguments are appended in a later minor without breaking old packs.
 * Callbacks that produce values write them into the args struct (fields
 * marked "out").  All callbacks return MXP_OK or a negative status after
 * describing the failure with host->set_error.
 *
 * Lifetime: a registered def/impl and everything it points to must stay
 * valid until the pack's fini returns (static const data is the norm).
 *
 * user_data: definition callbacks (list_*, infer_*, declare_backward,
 * check_params) receive mxp_op_def.user_data; implementation callbacks
 * (supports, workspace, create, forward, backward, destroy) receive
 * mxp_op_impl.user_data.  A pack that drives several ops through one
 * function must set both.
 *
 * Implementing another pack's op (since ABI 1.1): `params` in the impl
 * args points to the DEFINING pack's private struct, so an impl of, say,
 * ops-nn's Convolution in a GPU pack must not cast it.  It reads the values
 * by name and type instead, from the record `op_params` beside it:
 *     const mxp_op_params *p = mxp_impl_query_op_params(a);   (or
 *         mxp_forward_op_params / mxp_backward_op_params)
 *     mxp_param_shape kernel; int64_t num_filter; const char *layout;
 *     mxp_param_get_shape(host, p, "kernel", &kernel);
 *     mxp_param_get_int(host, p, "num_filter", &num_filter);
 *     mxp_param_get_enum(host, p, "layout", &layout);  -> "None", "NCHW", ...
 * (host.h).  Values are the parsed ones after the defining op's
 * check_params (Convolution's default stride is already (1, 1)).  A wrong
 * name or type is an error naming the op and the parameter, never a guess.
 * Read them once in `create` and keep them in the state.  `mxplug info OP`
 * lists an op's parameters with their types.
 *
 * Threads (what the host guarantees and what it asks of a pack):
 *   - Definition callbacks (check_params, list_*, infer_shape, infer_type,
 *     declare_backward) may run on any thread, several at once for the
 *     same def: they must not keep mutable state outside their args.
 *   - supports, workspace and create run on the thread that binds a node
 *     (the application's, or tune's timing thread), possibly at the same
 *     time for different nodes.
 *   - forward and backward run on engine worker threads (the caller's own
 *     thread under the naive engine, for host.invoke and for tune).  Two
 *     forwards of one state never overlap (they write the same outputs),
 *     but a backward and the next forward of one state may run at the same
 *     time: treat `state` as read-only after create.
 *   - destroy runs once, on whichever thread drops the last reference
 *     (often an engine worker), never while a forward or backward of that
 *     state runs.
 *   - Any callback may call the host table (errors, log, memory, RNG);
 *     forward/backward may also use ctx->parallel_for and host.invoke,
 *     which runs the other op inline on the calling thread.  An
 *     asynchronous impl calls ctx->complete exactly once, from any thread.
 * The host makes these calls from one module (runtime/src/plugin/opdef.c).
 * Since ABI 1.0. */
#ifndef MXP_OP_H
#define MXP_OP_H

#include <mxp/types.h>
#include <mxp/tensor.h>
#include <mxp/params.h>

#ifdef __cplusplus
extern "C" {
#endif

struct mxp_host;
typedef struct mxp_rng mxp_rng; /* opaque: draw with mxp_host.rng_* */

/* What to do with an output (MXNet's OpReqType, same numbers). */
typedef enum mxp_req {
    MXP_REQ_NULL    = 0, /* do not write                                   */
    MXP_REQ_WRITE   = 1, /* overwrite                                      */
    MXP_REQ_INPLACE = 2, /* overwrite; output memory is an input's memory  */
    MXP_REQ_ADD     = 3  /* accumulate into the existing values            */
} mxp_req;

/* Ranks order implementations of one op (higher is preferred), as
 * GStreamer's ranks do.  Any integer is allowed. */
#define MXP_RANK_NONE      0
#define MXP_RANK_MARGINAL  64
#define MXP_RANK_SECONDARY 128
#define MXP_RANK_PRIMARY   256

/* What mxp_op_impl.supports answers (negative = error).  A rank is static;
 * FALLBACK lets an impl rank itself below the others for one
 * configuration: it can run it correctly but expects another impl to be
 * faster there (Winograd on a 1-channel input, say).  The `auto` policy
 * takes a FALLBACK impl only when no impl answers YES (the highest-ranked
 * FALLBACK then); `tune` times it like any other; a policy naming it
 * takes it.  Since ABI 1.3: a host older than 1.3 reads 2 as a refusal,
 * so answer FALLBACK only when mxp_host_supports_fallback(host). */
#define MXP_SUPPORTS_NO       0
#define MXP_SUPPORTS_YES      1
#define MXP_SUPPORTS_FALLBACK 2

/* Resource requests (mxp_op_def.resources). */
#define MXP_RESOURCE_TEMP_SPACE 0x1u /* ctx->workspace, sized by impl.workspace */
#define MXP_RESOURCE_RANDOM     0x2u /* ctx->rng                                */

/* Backward dependencies (mxp_op_def.backward_deps): which forward values
 * backward reads.  Entries not needed are passed with data == NULL, and the
 * memory planner may reuse their storage. */
#define MXP_BWD_OUT_GRAD 0x1u
#define MXP_BWD_IN_DATA  0x2u
#define MXP_BWD_OUT_DATA 0x4u

/* Op flags (mxp_op_def.flags). */
#define MXP_OP_NO_GRADIENT 0x1u /* not differentiable: no backward pass    */
#define MXP_OP_LOSS        0x2u /* a loss head: backward ignores out_grad,
                                   which need not be given                 */
/* (since 1.3) Backward gives every input exactly out_grad (one output,
 * inputs of its shape and dtype: elemwise_add, add_n).  The executor may
 * then hand out_grad on as those gradients without running backward,
 * which must still be implemented (an older host, or autograd, runs it). */
#define MXP_OP_IDENTITY_GRAD 0x4u

/* Impl flags (mxp_op_impl.flags). */
#define MXP_IMPL_ASYNC     0x1u /* forward/backward finish later through
                                   ctx->complete (GPU, network)            */

/* ------------------------------------------------------------ op context */
typedef void (*mxp_range_fn)(void *arg, int64_t begin, int64_t end);

/* Where and how a forward/backward call runs.  Owned by the host. */
typedef struct mxp_op_ctx {
    mxp_header hdr;
    mxp_device device;
    void *stream;              /* device stream; NULL on the CPU            */
    int32_t is_train;          /* 1 in training forward/backward            */
    int32_t reserved;
    void *workspace;           /* temp space, at least workspace_bytes      */
    uint64_t workspace_bytes;
    mxp_rng *rng;              /* with MXP_RESOURCE_RANDOM, else NULL       */
    /* Run fn(arg, begin, end) over [0, n) in chunks of at least `grain`
     * on the host's threads.  Packs never start thread pools of their own.
     * Returns when all chunks are done. */
    int (*parallel_for)(const struct mxp_op_ctx *ctx, int64_t n, int64_t grain,
                        mxp_range_fn fn, void *arg);
    /* For MXP_IMPL_ASYNC impls: call exactly once, from any thread, when the
     * work is done.  message may be NULL on success; it is copied.  A call
     * that returns an error instead of MXP_OK must not call complete. */
    void (*complete)(void *token, int32_t status, const char *message);
    void *complete_token;
    const struct mxp_host *host;
    void *host_private;        /* host use only */
} mxp_op_ctx;

/* ---------------------------------------------------------- definitions */
#define MXP_NAME_MAX 64

/* list_args / list_outputs / list_aux: names that depend on params (e.g.
 * no_bias drops "bias"; Concat has num_args inputs "arg0".."argN"). */
typedef struct mxp_list_names_args {
    mxp_header hdr;
    const void *params;          /* the parsed parameter struct             */
    void *user_data;             /* mxp_op_def.user_data                    */
    char (*names)[MXP_NAME_MAX]; /* out: names[0..count), NUL-terminated    */
    uint32_t capacity;           /* entries available in names              */
    uint32_t count;              /* out                                      */
} mxp_list_names_args;

/* Shape inference.  Entries with ndim < 0, or a dim of 0, are unknown.  The
 * op fills out[] and aux[] and may fill unknown in[] entries (weights from
 * data and params).  Returns MXP_OK when every shape is known,
 * MXP_EINCOMPLETE when it needs more information (not an error), and
 * MXP_ESHAPE (with a message naming both shapes) when they are inconsistent. */
typedef struct mxp_infer_shape_args {
    mxp_header hdr;
    const void *params;
    void *user_data;
    uint32_t n_in, n_out, n_aux, reserved;
    mxp_shape *in;   /* in/out */
    mxp_shape *out;  /* out    */
    mxp_shape *aux;  /* in/out */
} mxp_infer_shape_args;

/* Type inference: dtypes, MXP_DTYPE_UNKNOWN (-1) where unknown.  Same
 * return convention as shape inference (MXP_ETYPE when inconsistent).
 * Optional: by default every input, output and aux state takes the first
 * known dtype among them. */
typedef struct mxp_infer_type_args {
    mxp_header hdr;
    const void *params;
    void *user_data;
    uint32_t n_in, n_out, n_aux, reserved;
    int32_t *in;
    int32_t *out;
    int32_t *aux;
} mxp_infer_type_args;

/* Refine backward dependencies per entry.  The host pre-fills the arrays
 * from mxp_op_def.backward_deps; the callback may clear entries. */
typedef struct mxp_backward_deps_args {
    mxp_header hdr;
    const void *params;
    void *user_data;
    uint32_t n_in, n_out;
    uint8_t *need_out_grad; /* [n_out] in/out */
    uint8_t *need_in;       /* [n_in]  in/out */
    uint8_t *need_out;      /* [n_out] in/out */
} mxp_backward_deps_args;

/* Cross-parameter validation after parsing (e.g. kernel and stride ranks). */
typedef struct mxp_check_params_args {
    mxp_header hdr;
    void *params;   /* may be normalised in place (e.g. default strides)   */
    void *user_data;
} mxp_check_params_args;

/* from/to index pairs for inplace options. */
typedef struct mxp_inplace_pair {
    int32_t from;
    int32_t to;
} mxp_inplace_pair;

typedef struct mxp_op_def {
    mxp_header hdr;
    const char *name;                 /* MXNet's op name, e.g. "Convolution" */
    const char *const *aliases;       /* NULL-terminated (optional)          */
    const char *doc;
    const mxp_param_def *params;      /* schema (optional when n_params 0)   */
    uint32_t n_params;
    uint32_t params_size;             /* sizeof the pack's param struct      */
    /* Static names, NULL-terminated; used when the list_* slot is NULL. */
    const char *const *arg_names;     /* inputs, e.g. data, weight, bias     */
    const char *const *output_names;  /* NULL means one output "output"      */
    const char *const *aux_names;     /* aux states (optional)               */
    int (*list_args)(mxp_list_names_args *a);    /* (optional) */
    int (*list_outputs)(mxp_list_names_args *a); /* (optional) */
    int (*list_aux)(mxp_list_names_args *a);     /* (optional) */
    int (*infer_shape)(mxp_infer_shape_args *a); /* required   */
    int (*infer_type)(mxp_infer_type_args *a);   /* (optional) */
    uint32_t flags;                   /* MXP_OP_*                            */
    uint32_t backward_deps;           /* MXP_BWD_*                           */
    int (*declare_backward)(mxp_backward_deps_args *a); /* (optional) */
    /* Forward: input `from` may share memory with output `to`. */
    const mxp_inplace_pair *forward_inplace;
    uint32_t n_forward_inplace;
    /* Backward: out_grad `from` may share memory with in_grad `to`. */
    uint32_t n_backward_inplace;
    const mxp_inplace_pair *backward_inplace;
    /* Inputs the op writes besides its outputs (optimizer state, e.g.
     * sgd_mom_update's mom), as MXNet's FMutateInputs. */
    const int32_t *mutate_inputs;
    uint32_t n_mutate_inputs;
    uint32_t resources;               /* MXP_RESOURCE_*                      */
    /* Outputs visible to users (the rest are internal, e.g. BatchNorm's
     * saved mean/var); 0 means all. */
    uint32_t n_visible_outputs;
    uint32_t reserved;
    int (*check_params)(mxp_check_params_args *a); /* (optional) */
    void *user_data;                  /* passed to every callback            */
} mxp_op_def;

/* ------------------------------------------------------ implementations */
/* Arguments of supports / workspace / create: the node's configuration. */
typedef struct mxp_impl_query_args {
    mxp_header hdr;
    const void *params;
    void *user_data;            /* mxp_op_impl.user_data                      */
    mxp_device device;
    uint32_t n_in, n_out, n_aux;
    int32_t is_train;
    const mxp_shape *in_shapes, *out_shapes, *aux_shapes;
    const int32_t *in_dtypes, *out_dtypes, *aux_dtypes;
    char *reason;               /* supports: may write why it refuses         */
    uint32_t reason_size;
    uint32_t reserved;
    uint64_t workspace_bytes;   /* out: workspace                             */
    void *state;                /* out: create                                */
    /* Since 1.1: `params` as a typed record, readable from any pack
     * (mxp_param_get_* in host.h).  Use mxp_impl_query_op_params(a). */
    const mxp_op_params *op_params;
} mxp_impl_query_args;

typedef struct mxp_forward_args {
    mxp_header hdr;
    const mxp_op_ctx *ctx;
    const void *params;
    void *state;                /* from create, or NULL                      */
    void *user_data;
    uint32_t n_in, n_out, n_aux, reserved;
    const mxp_tensor *in;       /* [n_in]                                    */
    const mxp_tensor *out;      /* [n_out]                                   */
    const mxp_tensor *aux;      /* [n_aux], writable (e.g. moving averages)  */
    const int32_t *req;         /* [n_out] mxp_req                           */
    const mxp_op_params *op_params; /* since 1.1, as in mxp_impl_query_args */
} mxp_forward_args;

/* Entries backward does not depend on (see backward_deps) have data NULL. */
typedef struct mxp_backward_args {
    mxp_header hdr;
    const mxp_op_ctx *ctx;
    const void *params;
    void *state;
    void *user_data;
    uint32_t n_in, n_out, n_aux, reserved;
    const mxp_tensor *out_grad; /* [n_out]                                   */
    const mxp_tensor *in;       /* [n_in]                                    */
    const mxp_tensor *out;      /* [n_out]                                   */
    const mxp_tensor *in_grad;  /* [n_in] to write                           */
    const mxp_tensor *aux;      /* [n_aux]                                   */
    const int32_t *req;         /* [n_in] mxp_req per in_grad                */
    const mxp_op_params *op_params; /* since 1.1, as in mxp_impl_query_args */
} mxp_backward_args;

typedef struct mxp_destroy_args {
    mxp_header hdr;
    void *state;
    void *user_data;
} mxp_destroy_args;

typedef struct mxp_op_impl {
    mxp_header hdr;
    const char *op_name;        /* the op it implements (its name, not alias) */
    const char *impl_name;      /* e.g. "gemm", "direct", "winograd"         */
    const char *device;         /* "cpu", "gpu" or a device a pack registers */
    int32_t rank;               /* MXP_RANK_* or any integer                 */
    uint32_t flags;             /* MXP_IMPL_*                                */
    const char *doc;            /* (optional) one line                       */
    /* 1 = can run this configuration, 0 = refuses (write the reason),
     * 2 = can run it but others are likely faster (MXP_SUPPORTS_FALLBACK,
     * since 1.3; the reason may say why), negative = error.
     * (optional: NULL accepts everything) */
    int (*supports)(mxp_impl_query_args *a);
    /* Sets a->workspace_bytes.  (optional: NULL means 0) */
    int (*workspace)(mxp_impl_query_args *a);
    /* Sets a->state for this configuration.  (optional: NULL = stateless) */
    int (*create)(mxp_impl_query_args *a);
    int (*forward)(const mxp_forward_args *a);
    int (*backward)(const mxp_backward_args *a); /* (optional for ops
                                                    with MXP_OP_NO_GRADIENT) */
    void (*destroy)(const mxp_destroy_args *a);  /* (optional) */
    void *user_data;
} mxp_op_impl;

/* The op_params record of impl args, or NULL when the host is older than
 * ABI 1.1 (its args end before the field) or gave none. */
static inline const mxp_op_params *mxp_impl_query_op_params(const mxp_impl_query_args *a) {
    return a && MXP_HAS_FIELD(a, mxp_impl_query_args, op_params) ? a->op_params : NULL;
}
static inline const mxp_op_params *mxp_forward_op_params(const mxp_forward_args *a) {
    return a && MXP_HAS_FIELD(a, mxp_forward_args, op_params) ? a->op_params : NULL;
}
static inline const mxp_op_params *mxp_backward_op_params(const mxp_backward_args *a) {
    return a && MXP_HAS_FIELD(a, mxp_backward_args, op_params) ? a->op_params : NULL;
}

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
_Static_assert(offsetof(mxp_op_ctx, device) == 8, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, stream) == 16, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, is_train) == 24, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, workspace) == 32, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, workspace_bytes) == 40, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, rng) == 48, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, parallel_for) == 56, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, complete) == 64, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, complete_token) == 72, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_op_ctx, host) == 80, "mxp_op_ctx layout is frozen");
_Static_assert(sizeof(mxp_op_ctx) == 96, "mxp_op_ctx layout is frozen");
_Static_assert(offsetof(mxp_list_names_args, names) == 24, "layout is frozen");
_Static_assert(sizeof(mxp_list_names_args) == 40, "layout is frozen");
_Static_assert(offsetof(mxp_infer_shape_args, in) == 40, "layout is frozen");
_Static_assert(sizeof(mxp_infer_shape_args) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_infer_type_args) == 64, "layout is frozen");
_Static_assert(sizeof(mxp_backward_deps_args) == 56, "layout is frozen");
_Static_assert(sizeof(mxp_check_params_args) == 24, "layout is frozen");
_Static_assert(offsetof(mxp_op_def, name) == 8, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, params) == 32, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, arg_names) == 48, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, infer_shape) == 96, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, flags) == 112, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, declare_backward) == 120, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, forward_inplace) == 128, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, backward_inplace) == 144, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, mutate_inputs) == 152, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, resources) == 164, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, check_params) == 176, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_op_def, user_data) == 184, "mxp_op_def layout is frozen");
_Static_assert(sizeof(mxp_op_def) == 192, "mxp_op_def layout is frozen");
_Static_assert(offsetof(mxp_impl_query_args, device) == 24, "layout is frozen");
_Static_assert(offsetof(mxp_impl_query_args, in_shapes) == 48, "layout is frozen");
_Static_assert(offsetof(mxp_impl_query_args, reason) == 96, "layout is frozen");
_Static_assert(offsetof(mxp_impl_query_args, workspace_bytes) == 112, "layout is frozen");
_Static_assert(offsetof(mxp_impl_query_args, op_params) == 128, "layout is frozen");
_Static_assert(sizeof(mxp_impl_query_args) == 136, "layout is frozen");
_Static_assert(offsetof(mxp_forward_args, in) == 56, "layout is frozen");
_Static_assert(offsetof(mxp_forward_args, op_params) == 88, "layout is frozen");
_Static_assert(sizeof(mxp_forward_args) == 96, "layout is frozen");
_Static_assert(offsetof(mxp_backward_args, out_grad) == 56, "layout is frozen");
_Static_assert(offsetof(mxp_backward_args, op_params) == 104, "layout is frozen");
_Static_assert(sizeof(mxp_backward_args) == 112, "layout is frozen");
_Static_assert(sizeof(mxp_destroy_args) == 24, "layout is frozen");
_Static_assert(offsetof(mxp_op_impl, rank) == 32, "mxp_op_impl layout is frozen");
_Static_assert(offsetof(mxp_op_impl, supports) == 48, "mxp_op_impl layout is frozen");
_Static_assert(offsetof(mxp_op_impl, forward) == 72, "mxp_op_impl layout is frozen");
_Static_assert(offsetof(mxp_op_impl, user_data) == 96, "mxp_op_impl layout is frozen");
_Static_assert(sizeof(mxp_op_impl) == 104, "mxp_op_impl layout is frozen");
#endif

#ifdef __cplusplus
}
#endif
#endif /* MXP_OP_H */
