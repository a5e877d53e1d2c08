/* op/exec.h — private to the op module: the refcounted impl instance a
 * node binds and its pushed work holds, and the node accessors exec.c
 * needs.  Not for other modules (they use op.h). */
#ifndef MXP_OP_EXEC_H
#define MXP_OP_EXEC_H

#include "op/op.h"
#include "plugin/plugin.h"

#include <stdatomic.h>

/* One implementation bound to one signature.  Immutable after bind except
 * for the refcount; the last release destroys the state, frees the params
 * (with ref->def's schema) and releases the impl ref (unpinning packs). */
typedef struct node_inst {
    atomic_int refs;
    mxp_impl_ref *ref;
    void *params;              /* parsed against ref->def                    */
    void *state;               /* impl.create, or NULL                       */
    uint64_t workspace_bytes;  /* impl.workspace                             */
    mxp_device dev;
    int is_train;
    uint64_t generation;
    mxp_shape *shapes;         /* [n_in | n_out | n_aux] at bind             */
    int32_t *dtypes;
} node_inst;

node_inst *mxp__inst_retain(node_inst *in);
void mxp__inst_release(node_inst *in);

/* node.c accessors for exec.c. */
const mxp_shape *mxp__node_shapes(const mxp__node *n);
const int32_t *mxp__node_dtypes(const mxp__node *n);
node_inst *mxp__node_current(const mxp__node *n);
const mxp_op_def *mxp__node_def(const mxp__node *n);
void mxp__node_entry_desc(const mxp__node *n, int i, char *buf, size_t cap);

#endif /* MXP_OP_EXEC_H */
