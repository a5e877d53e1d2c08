/* graph/graph.h — the graph module's interface to the rest of the runtime
 * (the executor) and the shared private types of the graph sources.
 *
 * Pieces, one file each: opinfo.c (an op's def + parsed params, pinned for
 * the duration of a pass), symbol.c (nodes, symbols, compose, names,
 * attributes), json.c (MXNet JSON), indexed.c (the indexed graph: nodes in
 * topological order, entries numbered by node_row_ptr), infer.c (shape and
 * type inference to a fixpoint), gradient.c (the training program: forward,
 * backward and gradient-sum steps over numbered values), plan.c (memory
 * planning with inplace and reuse by size).
 *
 * Ownership: a gnode is refcounted; a symbol holds a ref on each output's
 * node and a node holds a ref on each input's node (a DAG, no cycles).
 * An indexed graph borrows the nodes of the symbol it was built from and
 * holds a ref on that symbol.  Nothing here pins a pack beyond one call:
 * symbols and executors may live across pack reloads. */
#ifndef MXP_GRAPH_GRAPH_H
#define MXP_GRAPH_GRAPH_H

#include "base/base.h"
#include "plugin/opdef.h"

#include <mxp/op.h>

#include <stdatomic.h>

/* ------------------------------------------------------------ nodes */
typedef struct gnode gnode;

typedef struct gentry {
    gnode *node;
    int index;
    int version;
} gentry;

struct gnode {
    atomic_int refs;
    char *op;                   /* canonical op name; NULL for a variable  */
    char *name;
    int n_attrs;                /* params and "__x__" attributes            */
    char **keys, **vals;
    int n_inputs;               /* 0 until composed; then n_args + n_aux    */
    gentry *inputs;
    /* Op metadata for the parsed params (op nodes only). */
    int n_args, n_outs, n_vis, n_aux;
    char (*names)[MXP_NAME_MAX]; /* [n_args | n_outs | n_aux]               */
    uint32_t op_flags;          /* MXP_OP_*                                 */
    uint8_t *mutates;           /* [n_args] 1: the op writes this input
                                 * (mutate_inputs); a variable there is an
                                 * auxiliary state, as MXNet lists it        */
    int mark;                   /* scratch for traversals                   */
};

struct mxp_symbol {
    atomic_int refs;
    int n_out;
    gentry *outs;
    /* Cached name lists (list_* results). */
    char **list_cache[3];      /* NULL-terminated */
    int list_n[3];
    char ***retired;           /* earlier lists that differed: kept until
                                  the symbol is freed, so every list handed
                                  out stays valid for the symbol's lifetime */
    int n_retired;
};

gnode *mxp__gnode_retain(gnode *n);
void mxp__gnode_release(gnode *n);
/* New variable / op node (op: validated kwargs, metadata filled). */
int mxp__gnode_variable(const char *name, gnode **out);
int mxp__gnode_op(const char *op, const char *name, int n_kwargs, const char *const *keys,
                  const char *const *vals, gnode **out);
/* Set an attribute (copying); replaces an existing key. */
int mxp__gnode_set_attr(gnode *n, const char *key, const char *val);
const char *mxp__gnode_attr(const gnode *n, const char *key);
/* Give an op node without inputs its inputs as variables "{node}_{arg}". */
int mxp__gnode_complete(gnode *n);
/* Symbol over outputs (each node retained). */
int mxp__symbol_new(int n_out, const gentry *outs, mxp_symbol **out);
/* Output name of entry e ("fc1_output", or the variable name) into buf. */
void mxp__entry_name(const gentry *e, char *buf, size_t cap);

/* ------------------------------------------------------------ op info */
/* An op's def and params parsed from a node's kwargs, with the defining
 * pack pinned until mxp__opinfo_close (plugin/opdef.h holds the def). */
typedef struct mxp__opinfo {
    mxp__opdef od;
    const mxp_op_def *def;     /* od.def */
    void *params;
} mxp__opinfo;

int mxp__opinfo_open(const char *op, int n_kwargs, const char *const *keys, const char *const *vals,
                     mxp__opinfo *out);
void mxp__opinfo_close(mxp__opinfo *oi);

/* ------------------------------------------------------------ indexed graph */
typedef struct mxp__inode {
    gnode *g;                   /* borrowed                                */
    int is_var;
    int is_aux;                 /* variable used as an aux state           */
    int n_args, n_aux, n_outs, n_vis;
    int *in;                    /* entry ids [n_args + n_aux]              */
    int entry0;                 /* first output entry                      */
} mxp__inode;

typedef struct mxp__igraph {
    mxp_symbol *sym;            /* retained                                */
    int n_nodes;
    mxp__inode *nodes;          /* topological order (DFS post-order)      */
    int n_entries;
    int *entry_node;            /* [n_entries]                             */
    int n_heads;
    int *heads;                 /* entry ids                               */
    int n_args, n_auxs;
    int *args, *auxs;           /* variable node ids, list_* order         */
} mxp__igraph;

/* Build the indexed graph of sym (completing uncomposed op nodes). */
int mxp__igraph_build(mxp_symbol *sym, mxp__igraph **out);
void mxp__igraph_free(mxp__igraph *g);
/* Entry name into buf (see mxp__entry_name). */
void mxp__igraph_entry_name(const mxp__igraph *g, int e, char *buf, size_t cap);

/* ------------------------------------------------------------ inference */
/* Shapes / dtypes of every entry, in/out ([n_entries]): unknown entries
 * (ndim < 0 or zero dims; MXP_DTYPE_UNKNOWN) are filled where possible;
 * variables' __shape__ / __dtype__ attributes are applied first.
 * *out_unknown: number of entries still not fully known (0 = complete).
 * Errors: MXP_ESHAPE / MXP_ETYPE naming node, op, entry and both values. */
int mxp__graph_infer_shapes(const mxp__igraph *g, mxp_shape *shapes, int *out_unknown);
int mxp__graph_infer_types(const mxp__igraph *g, int32_t *dtypes, int *out_unknown);

/* ------------------------------------------------------------ training program */
typedef enum mxp__val_kind {
    MXP_VAL_ARG = 1,      /* a bound argument array (external)              */
    MXP_VAL_AUX,          /* a bound aux-state array (external)             */
    MXP_VAL_OUT,          /* an op output (internal; heads persistent)      */
    MXP_VAL_HEAD_GRAD,    /* gradient of a head, given at backward          */
    MXP_VAL_GRAD,         /* a gradient or partial gradient (internal)      */
    MXP_VAL_ARG_GRAD,     /* a bound gradient array (external)              */
    MXP_VAL_ZERO          /* zeros for an output without gradient          */
} mxp__val_kind;

typedef struct mxp__value {
    int kind;
    int entry;            /* the forward entry it is (or is the grad of)   */
    int index;            /* ARG/AUX/ARG_GRAD: position in list_*; HEAD_GRAD: head */
    int persistent;       /* never shares storage (heads)                  */
    mxp_shape shape;
    int32_t dtype;
} mxp__value;

typedef enum mxp__step_kind { MXP_STEP_FWD = 1, MXP_STEP_BWD, MXP_STEP_SUM } mxp__step_kind;

/* A step reads and writes values (ids; -1 = absent).  Slots:
 *   FWD: in[n_in] (the op's arguments), aux[n_aux], out[n_out]
 *   BWD: og[n_out], in[n_in], out[n_out], ig[n_in], aux[n_aux], req[n_in]
 *        (og / in / out hold -1 where backward does not read the value)
 *   SUM: in[n_in] (partial gradients), out[1], req[1] */
typedef struct mxp__step {
    int kind;
    int node;             /* FWD/BWD: node id; SUM: -1                      */
    int entry;            /* SUM: the entry whose gradient it sums          */
    int n_in, n_out, n_aux;
    int *in, *out, *og, *ig, *aux, *req;
    /* Inplace candidates: (read slot value, written value) pairs the op
     * allows, as value ids; filled by gradient.c from the def. */
    int n_inplace;
    int (*inplace)[2];
} mxp__step;

typedef struct mxp__program {
    int n_values;
    mxp__value *values;
    int n_steps;
    mxp__step *steps;
    int n_fwd_steps;      /* steps [0, n_fwd_steps) are the forward pass    */
    int *entry_value;     /* [n_entries] forward value of each entry        */
    int *arg_grad_req;    /* [n_args] effective req (MXP_REQ_NULL/WRITE/ADD) */
    int *arg_grad_value;  /* [n_args] ARG_GRAD value written by the program,
                             or -1 when no gradient reaches the argument     */
    int *head_grad_value; /* [n_heads] HEAD_GRAD value, or -1 (loss head or
                             no gradient needed)                             */
} mxp__program;

/* Build the program for shapes/dtypes of every entry and grad_req per
 * argument (NULL: no gradients).  Only the forward pass when no argument
 * wants a gradient. */
int mxp__program_build(const mxp__igraph *g, const mxp_shape *shapes, const int32_t *dtypes,
                       const int *grad_req, mxp__program **out);
void mxp__program_free(mxp__program *p);
/* All values a step reads / writes (ids >= 0), into buf; returns count. */
int mxp__step_reads(const mxp__step *s, int *buf, int cap);
int mxp__step_writes(const mxp__step *s, int *buf, int cap);

/* ------------------------------------------------------------ memory plan */
typedef struct mxp__plan {
    int n_blocks;
    uint64_t *block_bytes;
    int32_t *block_dtype;
    int *value_block;     /* [n_values]: block id, or -1 (not planned)      */
    int n_inplace;        /* (from, to) value pairs that share by inplace   */
    int (*inplace)[2];
    uint64_t planned_bytes; /* sum of block sizes                          */
    uint64_t naive_bytes;   /* sum of planned values' sizes                */
} mxp__plan;

/* Whether a value is planned (internal, non-persistent). */
int mxp__value_plannable(const mxp__value *v);
uint64_t mxp__value_bytes(const mxp__value *v);
/* Plan storage for the program's internal values.  enabled 0: every value
 * gets its own block (the reference run). */
int mxp__plan_build(const mxp__program *p, int enabled, mxp__plan **out);
void mxp__plan_free(mxp__plan *pl);

#endif /* MXP_GRAPH_GRAPH_H */
