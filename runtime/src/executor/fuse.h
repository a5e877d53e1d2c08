/* executor/fuse.h — the executor's fusion pass (fuse.c): BatchNorm +
 * ReLU, BatchNorm + residual add + ReLU and ReLU + max Pooling become
 * _mxp_BatchNormReLU, _mxp_BatchNormAddReLU and _mxp_ReLUPooling nodes in
 * a rewritten symbol bound in place of the user's.  MXP_EXEC_FUSE=0 turns it off. */
#ifndef MXP_EXECUTOR_FUSE_H
#define MXP_EXECUTOR_FUSE_H

#include "graph/graph.h"

/* *out: a new symbol with the fusable patterns of g fused (*n_fused of them),
 * or NULL when there is nothing to fuse, the pass is off or dev is not the
 * CPU.  The nodes of g's symbol are shared, never modified. */
int mxp__exec_fuse(const mxp__igraph *g, mxp_device dev, mxp_symbol **out, int *n_fused);

#endif /* MXP_EXECUTOR_FUSE_H */
