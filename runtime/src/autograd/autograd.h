/* autograd/autograd.h — what the op runtime and the executor call of the
 * autograd module (the public API is <mxplug/autograd.h>).
 *
 * mxp_invoke_ex asks mxp__autograd_wants() after validating its arguments;
 * when it says yes, after a successful forward push it hands the node and
 * the arrays to mxp__autograd_record_op, which keeps the node (the caller
 * must not free it then).  mxp_executor_free tells the tape an executor is
 * gone so a step recorded on it fails cleanly instead of touching it. */
#ifndef MXP_AUTOGRAD_AUTOGRAD_H
#define MXP_AUTOGRAD_AUTOGRAD_H

#include "base/base.h"
#include "op/op.h"

#include <mxplug/autograd.h>

/* 1 when this thread records and an input is a variable needing a gradient
 * or an output of a recorded op that does.  Cheap when not recording. */
int mxp__autograd_wants(int n_in, mxp_ndarray *const *in);

/* 1 when this thread is in training mode (autograd.train_mode / record). */
int mxp__autograd_training(void);

/* Append a step: node n (taken over on MXP_OK: *taken set to 1), in[n_in],
 * out[n_out] (all outputs, hidden ones included; n_vis visible), aux[n_aux].
 * Every array is retained.  MXP_EINVAL when an output is a view of an input
 * (in-place ops cannot be differentiated). */
int mxp__autograd_record_op(mxp__node *n, int n_in, mxp_ndarray *const *in, int n_out, int n_vis,
                            mxp_ndarray *const *out, int n_aux, mxp_ndarray *const *aux, int *taken);

/* An executor is being freed: its steps on the tape become unusable. */
void mxp__autograd_executor_freed(const mxp_executor *ex);

#endif /* MXP_AUTOGRAD_AUTOGRAD_H */
