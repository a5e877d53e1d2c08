/* io/io.h — the io module's interface inside the runtime.
 *
 * iter.c is the front end (mxp_iter_*): it runs any mxp_iter_def — one a
 * pack registered, or one the runtime defines itself such as NDArrayIter
 * (ndarray_iter.c) — with optional prefetching.  A host-defined iterator
 * is created through mxp__iter_create_def with its state already built. */
#ifndef MXP_IO_IO_H
#define MXP_IO_IO_H

#include "base/base.h"

#include <mxp/iter.h>

/* Wrap def + state (created by the caller; destroyed through def->destroy
 * by mxp_iter_free, also when this call fails) into an iterator.
 * n_prefetch: 0 for synchronous production.  out cleared on entry. */
int mxp__iter_create_def(const mxp_iter_def *def, void *state, int n_prefetch, mxp_iter **out);

/* NDArrayIter's definition (ndarray_iter.c). */
extern const mxp_iter_def mxp__ndarray_iter_def;

#endif /* MXP_IO_IO_H */
