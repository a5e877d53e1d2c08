/* mxplug/executor.h — bound graphs (MXNet's Executor): bind a symbol to
 * arrays, run forward and backward through the dependency engine.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Binding infers every shape and dtype, builds the training program (the
 * forward steps, then each differentiable node's backward in reverse
 * order; gradients of values used more than once are summed), plans the
 * memory of intermediate values (inplace where ops allow it, freed storage
 * reused by size; MXP_EXEC_MEMPLAN=0 disables planning), and creates one
 * node per op.  forward/backward push work and return; read outputs with
 * mxp_ndarray_wait_to_read, or call mxp_executor_wait, which reports a
 * kernel's failure naming the node.
 * Implementation choice follows the registry: a policy change or pack
 * reload (mxp_registry_generation) is picked up at the next forward, never
 * between a forward and its backward, without re-binding.
 * One thread drives an executor at a time.  Since ABI 1.0. */
#ifndef MXPLUG_EXECUTOR_H
#define MXPLUG_EXECUTOR_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>
#include <mxplug/symbol.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_executor mxp_executor;

/* Called after each node's forward with its visible outputs, by name
 * ("fc1_output"), when installed; the array is valid during the call
 * (storage is reused by later nodes: copy what you keep). */
typedef void (*mxp_monitor_fn)(const char *name, mxp_ndarray *array, void *user);

/* Bind sym to arrays, in list_arguments / list_auxiliary_states order.
 * args[n_args]: required.  arg_grads[n_args]: may be NULL, or hold NULL
 * entries (no gradient).  grad_reqs[n_args]: MXP_REQ_NULL / WRITE / ADD
 * (NULL: WRITE where a gradient array is given).  aux[n_aux]: required
 * when the symbol has aux states.  The executor retains every array.
 * Errors: MXP_EINVAL (counts, NULL arrays), MXP_ESHAPE / MXP_ETYPE (naming
 * node, op and shapes), MXP_EINCOMPLETE (a shape cannot be inferred). */
MXP_API int mxp_executor_bind(mxp_symbol *sym, mxp_device dev, int n_args, mxp_ndarray *const *args,
                              mxp_ndarray *const *arg_grads, const int *grad_reqs, int n_aux,
                              mxp_ndarray *const *aux, mxp_executor **out);

/* Bind with every array allocated (zero-filled): shapes of some arguments
 * by name (names[i], shapes[i]); grad_req for every argument except those
 * named in no_grad[0..n_no_grad) (e.g. data and labels), which get none. */
MXP_API int mxp_executor_simple_bind(mxp_symbol *sym, mxp_device dev, int n, const char *const *names,
                                     const mxp_shape *shapes, int grad_req, int n_no_grad,
                                     const char *const *no_grad, mxp_executor **out);

/* Push the forward pass (is_train 1: training mode, aux states updated,
 * backward allowed afterwards). */
MXP_API int mxp_executor_forward(mxp_executor *ex, int is_train);
/* Push the backward pass of the last training forward.  head_grads: one
 * per output (NULL, or NULL entries: a loss head needs none; other heads
 * then get ones). */
MXP_API int mxp_executor_backward(mxp_executor *ex, int n_head_grads, mxp_ndarray *const *head_grads);
/* Wait for everything pushed; return the first failure, naming the node. */
MXP_API int mxp_executor_wait(mxp_executor *ex);

/* Arrays owned by the executor, valid until it is freed or reshaped
 * (entries of grads may be NULL). */
MXP_API int mxp_executor_outputs(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays);
MXP_API int mxp_executor_args(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays);
MXP_API int mxp_executor_grads(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays);
MXP_API int mxp_executor_aux(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays);

/* New shapes for some arguments (by name).  Arrays whose shape changes
 * are replaced (zero-filled; the old ones are released), the rest kept.
 * The memory plan is kept when every intermediate value still fits in its
 * planned storage (e.g. a smaller batch); otherwise planned again. */
MXP_API int mxp_executor_reshape(mxp_executor *ex, int n, const char *const *names, const mxp_shape *shapes);

/* Install (fn NULL: remove) the monitor callback. */
/* Choose the implementation of one node (by name, e.g. "conv2"): an impl
 * name, 'auto', 'tune' or a list like "winograd,auto"; NULL returns it to
 * the op's policy.  Same as the node attribute __impl__ in symbol JSON.
 * Validated now (MXP_EINVAL lists the valid names), used from the next
 * forward on.  MXP_ENOENT for an unknown node. */
MXP_API int mxp_executor_set_impl(mxp_executor *ex, const char *node_name, const char *policy);
MXP_API int mxp_executor_set_monitor(mxp_executor *ex, mxp_monitor_fn fn, void *user);

/* Bytes of planned intermediate storage, and what allocating each value
 * separately would take.  Any pointer may be NULL. */
MXP_API int mxp_executor_memory(const mxp_executor *ex, uint64_t *out_planned, uint64_t *out_naive);

/* The memory plan as JSON, for drawing it (`mxplug viz --plan`):
 *   {"planned_bytes": N, "naive_bytes": N, "n_forward_steps": K,
 *    "steps": ["conv1 (Convolution)", ..., "conv1 (_backward_Convolution)", ...],
 *    "blocks": [{"bytes": N, "dtype": "float32"}, ...],
 *    "values": [{"name": "conv1_output", "kind": "out"|"grad", "block": B,
 *                "bytes": N, "first": S, "last": S}, ...]}
 * Values are the planned (internal) ones; first/last are the steps that
 * write the value first and read it last (indices into "steps").
 * out: NUL-terminated, free with mxp_free.  Returns MXP_OK, MXP_EMISUSE,
 * MXP_ENOMEM. */
MXP_API int mxp_executor_memory_plan_json(const mxp_executor *ex, char **out);

/* Wait for pending work, release everything.  NULL is a no-op. */
MXP_API void mxp_executor_free(mxp_executor *ex);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_EXECUTOR_H */
