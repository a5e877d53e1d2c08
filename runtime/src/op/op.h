/* op/op.h — the node runtime: everything needed to run one op node on
 * NDArrays through the engine, shared by imperative invoke (mxp_invoke) and
 * the graph executor (which keeps one mxp__node per graph node).
 *
 * Life of a node:
 *   mxp__node_create(op, kwargs)   find the op, load its defining pack, pin it,
 *                                  validate + parse kwargs (keys starting with
 *                                  "__" are MXNet's reserved attrs: dropped)
 *   mxp__node_infer(...)           shapes and dtypes of args/outputs/aux from
 *                                  what is known; given entries are checked
 *   mxp__node_bind(dev, is_train)  choose an impl for the inferred signature
 *                                  and create its state (cached per signature)
 *   mxp__node_forward / _backward  push the work to the engine
 *   mxp__node_free
 *
 * Reload / policy change: a node records the registry generation.  At each
 * forward (and bind), if mxp_registry_generation() moved, it drops its impl
 * instances (state destroyed once in-flight work is done), unpins, reloads
 * the def, re-parses its kwargs and re-selects.  Backward never re-selects:
 * it runs on the instance its forward used.
 *
 * Lifetimes: pushed work holds a reference on its "instance" (impl ref +
 * params parsed against that impl's def + state), released in the engine's
 * free_arg, so a node (or a temporary one in mxp_invoke) may be freed while
 * its work is in flight, and a reload drains correctly.  Pushed work keeps
 * no pointer to mxp_ndarray handles: data pointers and vars are captured at
 * push time (ndarray.h).
 *
 * Not thread-safe per node: one thread drives a node at a time (different
 * nodes may be used concurrently). */
#ifndef MXP_OP_OP_H
#define MXP_OP_OP_H

#include "base/base.h"

#include <mxp/op.h>

typedef struct mxp__node mxp__node;

/* Create a node for op `op_name` (name or alias) with MXNet-style kwargs.
 * Errors: MXP_ENOENT (unknown op, naming it), MXP_EINVAL (unknown key, bad
 * or out-of-range value: the message names the op and the key), load
 * failures of the defining pack.  out cleared on entry. */
int mxp__node_create(const char *op_name, int n_kwargs, const char *const *keys, const char *const *vals,
                     mxp__node **out);
/* Nodes are reference-counted: create returns one reference; retain adds
 * one (the invoke cache and the autograd tape share a node); free drops
 * one and frees the node with the last.  NULL ok. */
mxp__node *mxp__node_retain(mxp__node *n);
void mxp__node_free(mxp__node *n);

/* Mark n as a node of a long-lived owner (a bound executor, an optimizer),
 * right after creating it: while it lives, a reload of its pack that drops
 * its op is refused (plugin/reload_ops.c).  Once per node. */
void mxp__node_set_bound(mxp__node *n);

/* Which input gradients the backward of this node will be asked for
 * ([n_in], nonzero: wanted; NULL: unknown, all), set by an owner that
 * knows (a bound executor, from its grad reqs) before the first bind:
 * `tune` then times the backward the step runs (plugin.h in_grad).
 * Instances already bound keep their impl. */
int mxp__node_set_in_grad(mxp__node *n, const uint8_t *need, int n_in);

/* Freeze a node whose signature never changes again (the invoke cache's,
 * shared with the tape): infer and bind no longer refresh it when the
 * registry generation moves, so a backward always finds the instance its
 * forward used; the owner compares mxp__node_generation with the
 * registry's and drops a stale node instead of using it. */
void mxp__node_freeze(mxp__node *n);
/* Registry generation the node's definition and instances belong to. */
uint64_t mxp__node_generation(const mxp__node *n);

/* The op's canonical name (valid while n lives). */
const char *mxp__node_op_name(const mxp__node *n);
/* The name pushed work carries, which the engine puts in a failing op's
 * error ("op 'LABEL' failed: ..."): "NODE (OP)" after set_label (a graph
 * node's name: two nodes of one op, or values sharing storage, are then
 * told apart), else the op name.  Truncated to MXP__NODE_LABEL_MAX - 1. */
#define MXP__NODE_LABEL_MAX (2 * MXP_NAME_MAX + 4)
const char *mxp__node_label(const mxp__node *n);
void mxp__node_set_label(mxp__node *n, const char *node_name);
/* Counts for the parsed params: inputs (args), outputs (all, including
 * internal ones), visible outputs, aux states. */
int mxp__node_num_inputs(const mxp__node *n);
int mxp__node_num_outputs(const mxp__node *n);
int mxp__node_num_visible_outputs(const mxp__node *n);
int mxp__node_num_aux(const mxp__node *n);
/* Name of input / output / aux i ("data", "output", ...), or NULL. */
const char *mxp__node_input_name(const mxp__node *n, int i);
const char *mxp__node_output_name(const mxp__node *n, int i);
/* The op def's resource requests (MXP_RESOURCE_*) and flags (MXP_OP_*). */
uint32_t mxp__node_resources(const mxp__node *n);
uint32_t mxp__node_flags(const mxp__node *n);

/* Shape and type inference.  Arrays are in/out, sized by the counts above
 * (any may be NULL when its count is 0): entries with ndim < 0 (dtype
 * MXP_DTYPE_UNKNOWN) are unknown and get filled; known entries are checked
 * against what the op infers (MXP_ESHAPE / MXP_ETYPE naming op, entry and
 * both values).  Dtypes: the op's infer_type, else the default rule (every
 * entry takes the first known dtype among inputs, outputs, aux), and
 * float32 when nothing is known.  Anything still unknown is MXP_ESHAPE.
 * The node remembers the result as its signature. */
int mxp__node_infer(mxp__node *n, mxp_shape *in_shapes, int32_t *in_dtypes, mxp_shape *out_shapes,
                    int32_t *out_dtypes, mxp_shape *aux_shapes, int32_t *aux_dtypes);

/* Choose the implementation for the inferred signature on `dev` and create
 * its state (impl.create) and workspace size (impl.workspace); reuses a
 * cached instance for an identical (device, is_train, shapes, dtypes,
 * registry generation).  Requires a successful mxp__node_infer. */
int mxp__node_bind(mxp__node *n, mxp_device dev, int is_train);

/* This node's own implementation policy (an impl name, 'auto', 'tune' or a
 * list like "winograd,auto"; NULL: back to the op's policy), validated now
 * and applied at the next forward, never between a forward and its
 * backward.  A node created with the attribute __impl__ starts with it. */
int mxp__node_set_policy(mxp__node *n, const char *policy);
const char *mxp__node_policy(const mxp__node *n); /* NULL: the op's */

/* Drop everything that pins packs (instances, the def and its pin): what
 * a reload needs from an idle holder (plugin.h, mxp__holder).  The node
 * stays usable: its next infer / bind / forward re-resolves everything and
 * re-infers the signature it had.  Not while its work needs a backward. */
void mxp__node_release(mxp__node *n);

/* Name of the bound implementation ("default", "gemm", ...) or NULL. */
const char *mxp__node_impl_name(const mxp__node *n);
/* Workspace bytes the bound implementation asked for. */
uint64_t mxp__node_workspace_bytes(const mxp__node *n);
/* How many times an impl's create ran for this node (tests: caching). */
int mxp__node_create_count(const mxp__node *n);

/* Push forward.  in[n_in], out[n_out], aux[n_aux] (out may hold NULL for an
 * output whose req is MXP_REQ_NULL).  req[n_out] (NULL: all write); a write
 * into an array aliasing an input becomes MXP_REQ_INPLACE.  Arrays must
 * match the inferred shapes and dtypes.  Binds (or re-binds after a registry
 * change) on the device of the first input (else first output).  Read vars:
 * inputs not also written; write vars: outputs, mutate_inputs, aux, the
 * temp-space var; RNG range reserved here, at push time.  Errors of the
 * kernel surface through the written arrays' vars, naming the op. */
int mxp__node_forward(mxp__node *n, mxp_ndarray *const *in, mxp_ndarray *const *out, mxp_ndarray *const *aux,
                      const int *req, int is_train);

/* Which forward values backward reads (from def.backward_deps refined by
 * declare_backward), as 0/1 arrays [n_out], [n_in], [n_out] (may be NULL). */
void mxp__node_backward_deps(const mxp__node *n, uint8_t *need_out_grad, uint8_t *need_in, uint8_t *need_out);

/* Push backward on the instance the last forward used.  out_grads[n_out]
 * (entries NULL for outputs without gradient; all may be NULL for a loss
 * op), in[n_in], out[n_out] (entries backward does not need may be NULL),
 * in_grads[n_in] (NULL entries: not wanted, req NULL), aux[n_aux],
 * req[n_in] (NULL: write).  MXP_EUNSUPPORTED for MXP_OP_NO_GRADIENT ops. */
int mxp__node_backward(mxp__node *n, mxp_ndarray *const *out_grads, mxp_ndarray *const *in,
                       mxp_ndarray *const *out, mxp_ndarray *const *in_grads, mxp_ndarray *const *aux,
                       const int *req);

/* Pre-created steps (step.c): what a graph executor keeps per step so each
 * run pushes one engine op made once, instead of building a push.  `*slot`
 * starts NULL; the first call builds the step, later calls with the same
 * arrays (same var, data, offset, shape, dtype per slot), req and is_train,
 * on the node's same instance, push it again; anything else rebuilds it
 * (the old op finishes its in-flight pushes first).  Same contract, checks
 * and errors as mxp__node_forward / _backward; slot NULL: a plain push. */
typedef struct mxp__node_step mxp__node_step;
int mxp__node_forward_step(mxp__node *n, mxp__node_step **slot, mxp_ndarray *const *in, mxp_ndarray *const *out,
                           mxp_ndarray *const *aux, const int *req, int is_train);
int mxp__node_backward_step(mxp__node *n, mxp__node_step **slot, mxp_ndarray *const *out_grads,
                            mxp_ndarray *const *in, mxp_ndarray *const *out, mxp_ndarray *const *in_grads,
                            mxp_ndarray *const *aux, const int *req);
/* The step runs on an instance the node no longer has (registry change
 * seen by the node's forward): reset it, so it pins nothing until rebuilt. */
int mxp__node_step_stale(const mxp__node *n, const mxp__node_step *s);
void mxp__node_step_reset(mxp__node_step *s);
/* Engine ops built for this step so far (tests: reuse and rebuild). */
int mxp__node_step_builds(const mxp__node_step *s);
/* Free after its in-flight pushes (the engine keeps what they need).  NULL ok. */
void mxp__node_step_free(mxp__node_step *s);

/* Run forward synchronously on the calling thread on caller-owned tensors
 * (no engine: what host.invoke serves).  Outputs must be allocated; req
 * write; aux none.  Workspace comes from host memory for the call. */
int mxp__node_run_tensors(mxp__node *n, uint32_t n_in, const mxp_tensor *in, uint32_t n_out,
                          const mxp_tensor *out);

/* Install mxp_invoke's host.invoke handler (idempotent). */
void mxp__invoke_install_host(void);

#endif /* MXP_OP_OP_H */
