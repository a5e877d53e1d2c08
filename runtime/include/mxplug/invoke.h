/* mxplug/invoke.h — run any registered op on NDArrays (MXNet's imperative
 * invoke, MXImperativeInvoke).  Part of mxplug.h; include <mxplug.h>.
 *
 * mxp_invoke validates the kwargs against the op's schema, infers output
 * shapes and dtypes, allocates the outputs the caller did not pass, chooses
 * an implementation for the shapes and device, and pushes the work to the
 * engine.  It returns as soon as the work is queued: read the results with
 * mxp_ndarray_wait_to_read / sync_copy_to, which also report a kernel's
 * failure (the message names the op).  Errors found before pushing (unknown
 * op, unknown kwarg, bad or out-of-range value, shape or dtype mismatch) are
 * returned directly, with mxp_last_error() naming the op and the cause;
 * then nothing was pushed and no output was allocated.
 *
 * Kwargs use MXNet's value grammar ("(3, 3)", "True", "0.5").  Keys that
 * begin with "__" (MXNet's reserved attributes such as __shape__,
 * __lr_mult__) are ignored.
 * Since ABI 1.0. */
#ifndef MXPLUG_INVOKE_H
#define MXPLUG_INVOKE_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>
#include <mxp/op.h> /* mxp_req: MXP_REQ_NULL / WRITE / INPLACE / ADD */

#ifdef __cplusplus
extern "C" {
#endif

/* Options of mxp_invoke_ex.  Start from MXP_STRUCT_INIT(mxp_invoke_opts)
 * (or zero), then set what you need. */
typedef struct mxp_invoke_opts {
    uint32_t struct_size;      /* sizeof as compiled (mxplug/base.h) */
    int is_train;              /* 1: training-mode forward (Dropout, BatchNorm) */
    const int *req;            /* [visible outputs] mxp_req per output; NULL: all
                                  MXP_REQ_WRITE.  MXP_REQ_ADD accumulates into a
                                  caller-passed output.  A write into an output
                                  that aliases an input runs as MXP_REQ_INPLACE. */
    int has_device;            /* 1: run on `device` (needed for ops without
                                  inputs, e.g. _zeros, _random_uniform;
                                  default: the first input's device, else cpu 0) */
    mxp_device device;
    int n_aux;                 /* aux states (e.g. BatchNorm's moving mean and
                                  var): updated in place.  0 with aux NULL:
                                  zero-filled temporaries are used and dropped. */
    mxp_ndarray *const *aux;
} mxp_invoke_opts;

/* Run op `op_name` (name or alias) on inputs[0..n_in).
 * n_out: in: capacity of outputs[]; out: number of outputs produced (the
 *        op's visible outputs).  A capacity below that is MXP_EINVAL (and
 *        *n_out is set to the number needed).
 * outputs[i]: an array to write (checked against the inferred shape and
 *        dtype), or NULL: a new array is allocated on the run device and
 *        stored there (the caller frees it with mxp_ndarray_release).
 * keys/vals: n_kwargs strings each.
 * Returns MXP_OK, MXP_ENOENT (unknown op), MXP_EINVAL (bad kwarg, counts),
 * MXP_ESHAPE, MXP_ETYPE, MXP_ENOMEM, or a loading/selection error.
 * Thread-safe. */
MXP_API int mxp_invoke(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out,
                       mxp_ndarray **outputs, int n_kwargs, const char *const *keys, const char *const *vals);

/* mxp_invoke with options (opts NULL: the defaults above). */
MXP_API int mxp_invoke_ex(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out,
                          mxp_ndarray **outputs, int n_kwargs, const char *const *keys, const char *const *vals,
                          const mxp_invoke_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_INVOKE_H */
