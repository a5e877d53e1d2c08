/* mxplug/autograd.h — imperative automatic differentiation (MXNet's
 * mx.autograd): record ops run through mxp_invoke, then compute gradients.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Usage:  mark variables (mxp_autograd_mark_variables: an array, its
 * gradient array and grad_req), turn recording on, run ops with mxp_invoke,
 * turn it off, call mxp_autograd_backward on the result(s).  Gradients land
 * in the variables' gradient arrays, written or added (grad_req).
 *
 * The tape.  While recording is on (per thread), every mxp_invoke /
 * mxp_invoke_ex whose inputs include a marked variable or an output of a
 * recorded op is appended to one process-wide tape: the op node (so
 * backward runs on the implementation instance its forward used), its
 * inputs, all its outputs (hidden ones too, e.g. BatchNorm's saved mean)
 * and aux states, each retained, with each array's count of pushed writes.
 * Backward walks the tape in reverse from the heads and runs each op's
 * declared backward (mxp_op_def.backward with backward_deps), summing the
 * gradients of values used several times with ElementWiseSum once all
 * contributions are in — the same program the graph executor builds
 * (graph/gradient.c), so on the same net the gradients are the same.
 * Backward refuses (MXP_EMISUSE, naming the op and input) when a recorded
 * array was overwritten after it was recorded (an in-place change would
 * make the gradient wrong).  Ops flagged MXP_OP_NO_GRADIENT stop gradients.
 *
 * Lifetime.  The tape is cleared when recording is turned on from off
 * (a new mxp_autograd_set_recording(1) scope), by a backward without
 * retain_graph, and by mxp_autograd_clear.  Marked variables (and their
 * gradient arrays) are retained until mxp_autograd_unmark or
 * mxp_autograd_clear_variables.
 *
 * Training mode (per thread) makes mxp_invoke run ops in training mode
 * (Dropout masks, BatchNorm batch statistics), as if opts->is_train were 1.
 *
 * Executors.  mxp_autograd_record_executor puts a whole bound graph on the
 * tape as one step (Gluon's hybridized blocks): backward runs the
 * executor's backward and reads its gradient arrays.
 *
 * Thread-safety: the recording and training flags are per thread; the tape
 * and the variable table are shared and locked.  Since ABI 1.0. */
#ifndef MXPLUG_AUTOGRAD_H
#define MXPLUG_AUTOGRAD_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>
#include <mxplug/executor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turn recording / training mode on (1) or off (0) for the calling thread.
 * out_prev (may be NULL): the previous state.  Returns MXP_OK. */
MXP_API int mxp_autograd_set_recording(int is_recording, int *out_prev);
MXP_API int mxp_autograd_set_training(int is_training, int *out_prev);
MXP_API int mxp_autograd_is_recording(void);
MXP_API int mxp_autograd_is_training(void);

/* Mark vars[i] as variables with gradient array grads[i] (same shape and
 * dtype) and reqs[i] (MXP_REQ_NULL / WRITE / ADD; reqs NULL: all WRITE).
 * Marking an array again replaces its gradient and req.  Both arrays are
 * retained.  Returns MXP_OK, MXP_EINVAL (NULL, none array, shape or dtype
 * differs, bad req), MXP_ENOMEM. */
MXP_API int mxp_autograd_mark_variables(int n, mxp_ndarray *const *vars, const int *reqs,
                                        mxp_ndarray *const *grads);
/* Forget a variable (releases it and its gradient).  Unknown: MXP_OK. */
MXP_API int mxp_autograd_unmark(mxp_ndarray *var);
/* Forget every variable. */
MXP_API void mxp_autograd_clear_variables(void);
/* The gradient array of a variable: a new reference in *out (free with
 * mxp_ndarray_release), or NULL with MXP_ENOENT when var is not marked. */
MXP_API int mxp_autograd_grad(mxp_ndarray *var, mxp_ndarray **out);

/* Compute the gradients of heads[0..n) with respect to every marked
 * variable they depend on.  head_grads: NULL or n entries; a NULL entry is
 * ones for an ordinary head, nothing for a loss op's output (SoftmaxOutput
 * ignores it, as in the executor).  Variables no gradient reaches keep
 * their gradient array (req add) or get zeros (req write) when they were
 * inputs of a recorded op.  retain_graph 0 clears the tape afterwards.
 * Pushes work and returns; read gradients with mxp_ndarray_wait_to_read.
 * Errors: MXP_EINVAL (a head not computed from variables under recording,
 * shape of a head gradient), MXP_EMISUSE (a recorded array overwritten
 * since, the tape cleared), or the op's backward error. */
MXP_API int mxp_autograd_backward(int n, mxp_ndarray *const *heads, mxp_ndarray *const *head_grads,
                                  int retain_graph);

/* Record a bound executor's last training forward as one tape step:
 * args[0..n_args) its arguments (as mxp_executor_args lists them, the
 * arrays the caller treats as its inputs) and outs[0..n_outs) the arrays
 * the caller treats as its outputs (copies of the executor's outputs).
 * Backward calls mxp_executor_backward and takes each argument's gradient
 * from mxp_executor_grads.  The executor must stay alive and run no other
 * forward until that backward (else MXP_EMISUSE at backward);
 * mxp_executor_free drops its steps from the tape. */
MXP_API int mxp_autograd_record_executor(mxp_executor *ex, int n_args, mxp_ndarray *const *args, int n_outs,
                                         mxp_ndarray *const *outs);

/* Drop every recorded step (variables stay marked). */
MXP_API void mxp_autograd_clear(void);
/* Number of steps on the tape (tests, diagnostics). */
MXP_API int mxp_autograd_tape_size(void);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_AUTOGRAD_H */
