/* executor/executor.h — the executor module: the bound-graph state shared by
 * executor.c (bind, simple_bind, reshape, storage) and run.c (forward,
 * backward, monitor, wait), and what tests may inspect (the program and
 * the memory plan it runs with).
 *
 * Value storage: arr[v] holds one NDArray per program value — the bound
 * arrays for arguments, aux states and argument gradients (retained), a
 * view of a planned block for intermediate values (so values sharing a
 * block share its engine variable, and the engine orders every reuse),
 * separate arrays for heads and zeros; head gradients are set per backward
 * call.  Each op node has an mxp__node (op/op.h) inferred with its exact
 * shapes; each SUM step an ElementWiseSum node.  Every step runs as a
 * pre-created engine op (mxp__node_step): setup (bind, reshape) drops them,
 * a step's first run builds it, later runs push it again. */
#ifndef MXP_EXECUTOR_EXECUTOR_H
#define MXP_EXECUTOR_EXECUTOR_H

#include "base/base.h"
#include "graph/graph.h"
#include "op/op.h"
#include "plugin/plugin.h"

struct mxp_executor {
    mxp_symbol *sym;
    mxp__igraph *g;
    mxp_device dev;
    mxp_shape *shapes;          /* [n_entries] */
    int32_t *dtypes;            /* [n_entries] */
    int *grad_req;              /* [n_args] as bound */
    mxp__program *prog;
    mxp__plan *plan;
    int plan_enabled;
    int n_plans;                /* times a plan was built (reshape test) */
    mxp__node **nodes;          /* [n_nodes], NULL for variables */
    mxp__node **sum_nodes;      /* [n_steps], for SUM steps */
    mxp__node_step **steps;     /* [n_steps] each step's pre-created engine op
                                 * (op.h), built by its first run after setup */
    int *bwd_step;              /* [n_nodes] a node's backward step, or -1 */
    mxp_ndarray **args, **grads, **aux;
    mxp_ndarray **outs;         /* [n_heads] */
    mxp_ndarray **blocks;       /* [plan->n_blocks] */
    mxp_ndarray **arr;          /* [n_values] */
    mxp_ndarray **ones;         /* [n_heads] default head gradients */
    mxp_monitor_fn monitor;
    void *monitor_user;
    int trained;                /* last forward was a training one */
    int ran_backward;
    /* Lets a pack reload make the nodes drop their instances at a step
     * boundary (plugin.h): forward, backward and reshape run inside it. */
    mxp__holder holder;
};

/* The holder's release: every node and step lets go of pack code. */
void mxp__executor_release(void *ex);

/* (Re)build everything that depends on shapes: program, plan (kept when
 * `keep_plan` and every value still fits), nodes' signatures, storage. */
int mxp__executor_setup(mxp_executor *ex, int keep_plan);
/* Release shape-dependent state (not the bound arrays). */
void mxp__executor_teardown(mxp_executor *ex);

/* For tests. */
const mxp__program *mxp__executor_program(const mxp_executor *ex);
const mxp__plan *mxp__executor_plan(const mxp_executor *ex);
int mxp__executor_plan_count(const mxp_executor *ex);
/* The mxp__node of op node `name`, or NULL. */
mxp__node *mxp__executor_node(const mxp_executor *ex, const char *name);

#endif /* MXP_EXECUTOR_EXECUTOR_H */
