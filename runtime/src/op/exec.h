/* op/exec.h — private to the op module: the exec record one run of a node
 * needs, and the node accessors exec.c needs.  The refcounted instance a
 * node binds and its pushed work holds is plugin/opdef.h's mxp__inst.
 * Not for other modules (they use op.h). */
#ifndef MXP_OP_EXEC_H
#define MXP_OP_EXEC_H

#include "op/op.h"
#include "plugin/opdef.h"
#include "resource/resource.h"

#include <stdatomic.h>

/* What one run of a node needs, filled at push time (exec.c): a plain
 * push makes one per push (freed by the engine's free_arg); a pre-created
 * step (step.c) keeps one as its engine op's argument, and its pushes only
 * add the temp pointer and the random range.  Runs of one step never
 * overlap (they write the same vars), so a run may fill t[].version, ctx
 * and cb in place; the pushing thread reads only what is fixed at build. */
typedef struct mxp__exec {
    mxp__inst *inst;
    char name[MXP__NODE_LABEL_MAX]; /* the node's label (op.h) */
    int backward, is_train;
    int async;             /* run through mxp__exec_async: completes via cb */
    mxp_device dev;
    uint32_t n_in, n_out, n_aux;
    int n_t;
    mxp_tensor *t;
    int64_t *shp;          /* [n_t][MXP_MAX_NDIM] */
    mxp_var **tvar;        /* [n_t], var to read the version from, or NULL */
    int32_t *req;          /* forward: [n_out]; backward: [n_in] */
    void *ws;
    uint64_t ws_bytes;
    void *ws_host;         /* inline runs: workspace from host memory */
    int has_rng;
    struct mxp_rng rng;
    mxp_var *ws_var;       /* step templates: the temp copy every push uses */
    uint64_t rng_values;   /* step templates: values each push reserves (0: none) */
    mxp_op_ctx ctx;
    mxp_engine_callback cb;
    /* Async runs finish when both the impl's forward/backward has returned
     * and its ctx->complete was called (either order, any threads), so the
     * engine never frees this record (and the instance it holds) under a
     * call that is still running.  The completion's status and message wait
     * here for the second party. */
    atomic_int async_parties;
    int32_t async_status;
    char *async_msg;
    mxp_var **vars;        /* [n_const | n_mutate] */
    int n_const, n_mutate, cap_vars;
    int small;             /* a block of exec.c's small size (kept per thread when freed) */
    size_t bytes;          /* the record and its arrays: one block of this size */
} mxp__exec;

/* Everything a forward / backward push needs (checks, views, req, var
 * lists); `step`: a template for a pre-created op (temp copy picked, no
 * temp pointer or random range yet).  *out_x owned by the caller. */
int mxp__exec_forward_prepare(mxp__node *n, mxp_ndarray *const *in, mxp_ndarray *const *out,
                              mxp_ndarray *const *aux, const int *req, int is_train, int step, mxp__exec **out_x);
int mxp__exec_backward_prepare(mxp__node *n, mxp_ndarray *const *out_grads, mxp_ndarray *const *in,
                               mxp_ndarray *const *out, mxp_ndarray *const *in_grads, mxp_ndarray *const *aux,
                               const int *req, int step, mxp__exec **out_x);
/* The invoke cache's prepared forward (invoke_plan.c): a template made by
 * mxp__exec_forward_prepare (not a step) for a node without aux states,
 * temp space, random numbers or mutated inputs, whose outputs are all
 * written (req write) — forward_plain says whether x is one.  forward_from
 * pushes one run of it on other arrays of the same signature: the
 * template's views, req and instance, with in's and out's data pointers
 * and vars (fresh outputs: never aliased with an input, so req stays
 * write); tiny: run on this thread when ready (as exec_push decides, fixed
 * by the signature).  The caller has checked in/out against the
 * signature (dtype, shape, device). */
int mxp__exec_forward_plain(const mxp__exec *x);
int mxp__exec_is_tiny(const mxp__exec *x);
int mxp__exec_forward_from(const mxp__exec *tmpl, int tiny, mxp_ndarray *const *in, mxp_ndarray *const *out);

/* Run the kernel (sync impl) / start it (async impl) on the calling thread. */
int mxp__exec_call(mxp__exec *x, void *stream);
void mxp__exec_async(mxp__exec *x, const mxp_run_ctx *rctx, mxp_engine_callback cb);
void mxp__exec_free(mxp__exec *x);
void mxp__exec_free_fn(void *arg); /* as an engine free_arg */
/* Engine push arguments running x (its var lists, device, name; x freed by
 * free_arg) through sync_fn or, for an async impl, async_fn. */
void mxp__exec_push_args(mxp__exec *x, mxp_engine_sync_fn sync_fn, mxp_engine_async_fn async_fn,
                         mxp_engine_push_args *p);

/* node.c accessors for exec.c. */
const mxp_shape *mxp__node_shapes(const mxp__node *n);
const int32_t *mxp__node_dtypes(const mxp__node *n);
mxp__inst *mxp__node_current(const mxp__node *n);
/* 1 when a frozen node's next forward binds exactly `in` (no policy switch
 * pending, in current): what its bind would find without looking. */
int mxp__node_runs_on(const mxp__node *n, const mxp__inst *in);
const mxp_op_def *mxp__node_def(const mxp__node *n);
void mxp__node_entry_desc(const mxp__node *n, int i, char *buf, size_t cap);

#endif /* MXP_OP_EXEC_H */
