/* infer.c — shape and type inference over an indexed graph, forward and
 * backward to a fixpoint, and the public mxp_symbol_infer_shape/_type.
 *
 * Each sweep calls every op's infer_shape (or infer_type) on the current
 * shapes of its inputs, outputs and aux states, in topological order and
 * then in reverse, so information flows both ways (ops fill unknown input
 * shapes, e.g. weights from data and params; a known output may determine
 * an input).  The result is merged into the entries: unknown dims (0) and
 * unknown ranks (ndim < 0) are filled, a known value that differs is an
 * inconsistency, reported with node, op, entry and both values.  An op
 * returning MXP_EINCOMPLETE is not an error: it may succeed on a later
 * sweep.  Stops when a sweep changes nothing.
 * Ops are opened (pinned, params parsed) once per call, not kept. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A variable's __shape__ ("(0, 3, 28)", "[2,3]", "(8L, 3L)"): the tuple
 * grammar of op parameters, dims >= 0 (0 = unknown).  MXP_EINVAL when
 * malformed. */
static int parse_shape(const char *txt, mxp_shape *s) {
    memset(s, 0, sizeof *s);
    int n = 0;
    if (mxp__tuple_parse(txt, s->dims, MXP_MAX_NDIM, &n)) return MXP_EINVAL;
    for (int i = 0; i < n; i++)
        if (s->dims[i] < 0) return MXP_EINVAL;
    s->ndim = n;
    return MXP_OK;
}

/* Merge inferred value `got` into entry `*cur`.  1 if cur changed, 0 if
 * not, MXP_ESHAPE on a conflict (message built by the caller). */
static int merge_shape(mxp_shape *cur, const mxp_shape *got) {
    if (got->ndim < 0) return 0;
    if (cur->ndim < 0) {
        *cur = *got;
        return 1;
    }
    if (cur->ndim != got->ndim) return MXP_ESHAPE;
    int changed = 0;
    for (int i = 0; i < cur->ndim; i++) {
        if (got->dims[i] <= 0) continue;
        if (cur->dims[i] <= 0) {
            cur->dims[i] = got->dims[i];
            changed = 1;
        } else if (cur->dims[i] != got->dims[i]) return MXP_ESHAPE;
    }
    return changed;
}

static const char *slot_kind(const mxp__inode *n, int slot) {
    return slot < n->n_args ? "input" : slot < n->n_args + n->n_outs ? "output" : "aux state";
}

static const char *slot_name(const mxp__inode *n, int slot) {
    /* slot over [args | outs | aux], the names array's layout. */
    return n->g->names[slot];
}

static int slot_entry(const mxp__inode *n, int slot) {
    if (slot < n->n_args) return n->in[slot];
    if (slot < n->n_args + n->n_outs) return n->entry0 + slot - n->n_args;
    return n->in[n->n_args + slot - n->n_args - n->n_outs];
}

static int open_ops(const mxp__igraph *g, mxp__opinfo **out) {
    mxp__opinfo *oi = calloc((size_t)g->n_nodes + 1, sizeof *oi);
    if (!oi) return mxp__error_oom("inference");
    for (int i = 0; i < g->n_nodes; i++) {
        const gnode *n = g->nodes[i].g;
        if (!n->op) continue;
        int rc = mxp__opinfo_open(n->op, n->n_attrs, (const char *const *)n->keys, (const char *const *)n->vals, &oi[i]);
        if (rc) {
            for (int j = 0; j < i; j++) mxp__opinfo_close(&oi[j]);
            free(oi);
            return mxp__error_prefix(rc, "node '%s'", n->name);
        }
    }
    *out = oi;
    return MXP_OK;
}

static void close_ops(const mxp__igraph *g, mxp__opinfo *oi) {
    for (int i = 0; i < g->n_nodes; i++) mxp__opinfo_close(&oi[i]);
    free(oi);
}

/* One node's shape step.  *changed |= anything filled. */
static int shape_node(const mxp__igraph *g, int id, const mxp__opinfo *oi, mxp_shape *shapes, int *changed) {
    const mxp__inode *n = &g->nodes[id];
    int tot = n->n_args + n->n_outs + n->n_aux;
    mxp_shape *s = calloc((size_t)tot + 1, sizeof *s);
    if (!s) return mxp__error_oom("inference");
    for (int k = 0; k < tot; k++) s[k] = shapes[slot_entry(n, k)];
    char who[2 * MXP_NAME_MAX + 24];
    snprintf(who, sizeof who, "node '%s' (op '%s')", n->g->name, n->g->op);
    int rc = mxp__opdef_infer_shape(oi->def, oi->params, who, (uint32_t)n->n_args, (uint32_t)n->n_outs,
                                    (uint32_t)n->n_aux, s, s + n->n_args, s + n->n_args + n->n_outs);
    if (rc != MXP_OK && rc != MXP_EINCOMPLETE) {
        free(s);
        return rc;
    }
    for (int k = 0; k < tot; k++) {
        mxp_shape *cur = &shapes[slot_entry(n, k)];
        mxp_shape before = *cur;
        int m = merge_shape(cur, &s[k]);
        if (m < 0) {
            char a1[160], b1[160];
            mxp__shape_str(&before, a1, sizeof a1);
            mxp__shape_str(&s[k], b1, sizeof b1);
            free(s);
            return mxp__error(MXP_ESHAPE, "node '%s' (op '%s'): %s '%s' has shape %s, but the op infers %s",
                              n->g->name, n->g->op, slot_kind(n, k), slot_name(n, k), a1, b1);
        }
        if (m) *changed = 1;
    }
    free(s);
    return MXP_OK;
}

/* MXNet reads a variable's __shape__ only when its shape is otherwise
 * unknown (infer_graph_attr_pass: fis_none on the entry): a shape given at
 * bind/infer wins, so a net exported at one input size runs at another. */
static int apply_var_attrs_shape(const mxp__igraph *g, mxp_shape *shapes) {
    for (int i = 0; i < g->n_nodes; i++) {
        const mxp__inode *n = &g->nodes[i];
        if (!n->is_var) continue;
        const char *txt = mxp__gnode_attr(n->g, "__shape__");
        if (!txt) continue;
        mxp_shape s;
        if (parse_shape(txt, &s))
            return mxp__error(MXP_EINVAL, "variable '%s': __shape__ '%s' is not a shape", n->g->name, txt);
        mxp_shape *cur = &shapes[n->entry0];
        if (cur->ndim < 0) *cur = s;
    }
    return MXP_OK;
}

int mxp__graph_infer_shapes(const mxp__igraph *g, mxp_shape *shapes, int *out_unknown) {
    *out_unknown = g->n_entries;
    int rc = apply_var_attrs_shape(g, shapes);
    if (rc) return rc;
    mxp__opinfo *oi;
    if ((rc = open_ops(g, &oi))) return rc;
    for (int sweep = 0; sweep < 2 * g->n_nodes + 4 && !rc; sweep++) {
        int changed = 0;
        for (int k = 0; k < g->n_nodes && !rc; k++) {
            int id = sweep % 2 ? g->n_nodes - 1 - k : k;
            if (!g->nodes[id].is_var) rc = shape_node(g, id, &oi[id], shapes, &changed);
        }
        if (!changed && sweep) break;
    }
    close_ops(g, oi);
    if (rc) return rc;
    int unknown = 0;
    for (int e = 0; e < g->n_entries; e++) unknown += !mxp__shape_known(&shapes[e]);
    *out_unknown = unknown;
    return MXP_OK;
}

/* ------------------------------------------------------------ types */
static int type_node(const mxp__igraph *g, int id, const mxp__opinfo *oi, int32_t *dt, int *changed) {
    const mxp__inode *n = &g->nodes[id];
    int tot = n->n_args + n->n_outs + n->n_aux;
    int32_t *t = calloc((size_t)tot + 1, sizeof *t);
    if (!t) return mxp__error_oom("inference");
    for (int k = 0; k < tot; k++) t[k] = dt[slot_entry(n, k)];
    char who[2 * MXP_NAME_MAX + 24];
    snprintf(who, sizeof who, "node '%s' (op '%s')", n->g->name, n->g->op);
    /* Without infer_type, the default rule gives every entry the first
     * known dtype; known entries that differ are reported by the merge. */
    int rc = mxp__opdef_infer_type(oi->def, oi->params, who, (uint32_t)n->n_args, (uint32_t)n->n_outs,
                                   (uint32_t)n->n_aux, t, t + n->n_args, t + n->n_args + n->n_outs);
    if (rc) {
        free(t);
        return rc;
    }
    for (int k = 0; k < tot; k++) {
        int32_t *cur = &dt[slot_entry(n, k)];
        if (t[k] < 0) continue;
        if (*cur < 0) {
            *cur = t[k];
            *changed = 1;
        } else if (*cur != t[k]) {
            const char *a1 = mxp_dtype_name(*cur), *b1 = mxp_dtype_name(t[k]);
            rc = mxp__error(MXP_ETYPE, "node '%s' (op '%s'): %s '%s' has dtype %s, but the op infers %s", n->g->name,
                            n->g->op, slot_kind(n, k), slot_name(n, k), a1 ? a1 : "?", b1 ? b1 : "?");
            break;
        }
    }
    free(t);
    return rc;
}

int mxp__graph_infer_types(const mxp__igraph *g, int32_t *dtypes, int *out_unknown) {
    *out_unknown = g->n_entries;
    for (int i = 0; i < g->n_nodes; i++) {
        const mxp__inode *n = &g->nodes[i];
        const char *txt = n->is_var ? mxp__gnode_attr(n->g, "__dtype__") : NULL;
        if (!txt) continue;
        char *end;
        long v = strtol(txt, &end, 10);
        int d = (int)v;
        if (end == txt || *end) {
            if (mxp_dtype_from_name(txt, &d))
                return mxp__error(MXP_EINVAL, "variable '%s': __dtype__ '%s' is not a dtype", n->g->name, txt);
        }
        if (!mxp_dtype_size(d)) return mxp__error(MXP_EINVAL, "variable '%s': __dtype__ '%s' is not a dtype", n->g->name, txt);
        /* As for __shape__: a dtype given at bind/infer wins. */
        int32_t *cur = &dtypes[n->entry0];
        if (*cur < 0) *cur = d;
    }
    mxp__opinfo *oi;
    int rc = open_ops(g, &oi);
    if (rc) return rc;
    for (int sweep = 0; sweep < 2 * g->n_nodes + 4 && !rc; sweep++) {
        int changed = 0;
        for (int k = 0; k < g->n_nodes && !rc; k++) {
            int id = sweep % 2 ? g->n_nodes - 1 - k : k;
            if (!g->nodes[id].is_var) rc = type_node(g, id, &oi[id], dtypes, &changed);
        }
        if (!changed && sweep) break;
    }
    close_ops(g, oi);
    if (rc) return rc;
    int unknown = 0;
    for (int e = 0; e < g->n_entries; e++) unknown += dtypes[e] < 0;
    *out_unknown = unknown;
    return MXP_OK;
}

/* ------------------------------------------------------------ public API */
/* Index of name among args (0..n_args) or aux (n_args..), else -1. */
static int find_var(const mxp__igraph *g, const char *name) {
    for (int i = 0; i < g->n_args; i++)
        if (!strcmp(g->nodes[g->args[i]].g->name, name)) return g->nodes[g->args[i]].entry0;
    for (int i = 0; i < g->n_auxs; i++)
        if (!strcmp(g->nodes[g->auxs[i]].g->name, name)) return g->nodes[g->auxs[i]].entry0;
    return -1;
}

static int given_entry(const mxp__igraph *g, int i, const char *const *names, int *out_e) {
    if (names) {
        if (!names[i]) return mxp__error(MXP_EINVAL, "infer: name %d is NULL", i);
        *out_e = find_var(g, names[i]);
        if (*out_e < 0) return mxp__error(MXP_EINVAL, "infer: '%s' is not an argument or aux state", names[i]);
    } else {
        if (i >= g->n_args) return mxp__error(MXP_EINVAL, "infer: %d positional values, %d arguments", i + 1, g->n_args);
        *out_e = g->nodes[g->args[i]].entry0;
    }
    return MXP_OK;
}

int mxp_symbol_infer_shape(mxp_symbol *sym, int n, const char *const *names, const mxp_shape *shapes, int *out_n_args,
                           mxp_shape **out_arg_shapes, int *out_n_outs, mxp_shape **out_out_shapes, int *out_n_aux,
                           mxp_shape **out_aux_shapes, int *out_complete) {
    if (out_n_args) *out_n_args = 0;
    if (out_arg_shapes) *out_arg_shapes = NULL;
    if (out_n_outs) *out_n_outs = 0;
    if (out_out_shapes) *out_out_shapes = NULL;
    if (out_n_aux) *out_n_aux = 0;
    if (out_aux_shapes) *out_aux_shapes = NULL;
    if (out_complete) *out_complete = 0;
    if (!sym || n < 0 || (n && !shapes)) return mxp__error(MXP_EMISUSE, "mxp_symbol_infer_shape: bad argument");
    mxp__igraph *g;
    int rc = mxp__igraph_build(sym, &g);
    if (rc) return rc;
    mxp_shape *s = calloc((size_t)g->n_entries + 1, sizeof *s);
    mxp_shape *ra = calloc((size_t)g->n_args + 1, sizeof *ra), *ro = calloc((size_t)g->n_heads + 1, sizeof *ro),
              *rx = calloc((size_t)g->n_auxs + 1, sizeof *rx);
    if (!s || !ra || !ro || !rx) rc = mxp__error_oom("infer_shape");
    for (int e = 0; e < g->n_entries && !rc; e++) s[e].ndim = -1;
    for (int i = 0; i < n && !rc; i++) {
        int e;
        if ((rc = given_entry(g, i, names, &e))) break;
        if (shapes[i].ndim > MXP_MAX_NDIM) rc = mxp__error(MXP_EINVAL, "infer_shape: shape %d has ndim %d", i, shapes[i].ndim);
        else s[e] = shapes[i];
    }
    int unknown = 0;
    if (!rc) rc = mxp__graph_infer_shapes(g, s, &unknown);
    if (!rc) {
        for (int i = 0; i < g->n_args; i++) ra[i] = s[g->nodes[g->args[i]].entry0];
        for (int i = 0; i < g->n_heads; i++) ro[i] = s[g->heads[i]];
        for (int i = 0; i < g->n_auxs; i++) rx[i] = s[g->nodes[g->auxs[i]].entry0];
        if (out_n_args) *out_n_args = g->n_args;
        if (out_n_outs) *out_n_outs = g->n_heads;
        if (out_n_aux) *out_n_aux = g->n_auxs;
        /* Complete means every argument, output and aux state is known. */
        int c = 1;
        for (int i = 0; i < g->n_args; i++) c &= mxp__shape_known(&ra[i]);
        for (int i = 0; i < g->n_heads; i++) c &= mxp__shape_known(&ro[i]);
        for (int i = 0; i < g->n_auxs; i++) c &= mxp__shape_known(&rx[i]);
        if (out_complete) *out_complete = c;
        if (out_arg_shapes) *out_arg_shapes = ra, ra = NULL;
        if (out_out_shapes) *out_out_shapes = ro, ro = NULL;
        if (out_aux_shapes) *out_aux_shapes = rx, rx = NULL;
    }
    free(s);
    free(ra);
    free(ro);
    free(rx);
    mxp__igraph_free(g);
    return rc;
}

int mxp_symbol_infer_type(mxp_symbol *sym, int n, const char *const *names, const int *dtypes, int *out_n_args,
                          int **out_arg_types, int *out_n_outs, int **out_out_types, int *out_n_aux,
                          int **out_aux_types, int *out_complete) {
    if (out_n_args) *out_n_args = 0;
    if (out_arg_types) *out_arg_types = NULL;
    if (out_n_outs) *out_n_outs = 0;
    if (out_out_types) *out_out_types = NULL;
    if (out_n_aux) *out_n_aux = 0;
    if (out_aux_types) *out_aux_types = NULL;
    if (out_complete) *out_complete = 0;
    if (!sym || n < 0 || (n && !dtypes)) return mxp__error(MXP_EMISUSE, "mxp_symbol_infer_type: bad argument");
    mxp__igraph *g;
    int rc = mxp__igraph_build(sym, &g);
    if (rc) return rc;
    int32_t *t = calloc((size_t)g->n_entries + 1, sizeof *t);
    int *ra = calloc((size_t)g->n_args + 1, sizeof *ra), *ro = calloc((size_t)g->n_heads + 1, sizeof *ro),
        *rx = calloc((size_t)g->n_auxs + 1, sizeof *rx);
    if (!t || !ra || !ro || !rx) rc = mxp__error_oom("infer_type");
    for (int e = 0; e < g->n_entries && !rc; e++) t[e] = MXP_DTYPE_UNKNOWN;
    for (int i = 0; i < n && !rc; i++) {
        int e;
        if ((rc = given_entry(g, i, names, &e))) break;
        t[e] = dtypes[i];
    }
    int unknown = 0;
    if (!rc) rc = mxp__graph_infer_types(g, t, &unknown);
    if (!rc) {
        int c = 1;
        for (int i = 0; i < g->n_args; i++) c &= (ra[i] = t[g->nodes[g->args[i]].entry0]) >= 0;
        for (int i = 0; i < g->n_heads; i++) c &= (ro[i] = t[g->heads[i]]) >= 0;
        for (int i = 0; i < g->n_auxs; i++) c &= (rx[i] = t[g->nodes[g->auxs[i]].entry0]) >= 0;
        if (out_n_args) *out_n_args = g->n_args;
        if (out_n_outs) *out_n_outs = g->n_heads;
        if (out_n_aux) *out_n_aux = g->n_auxs;
        if (out_complete) *out_complete = c;
        if (out_arg_types) *out_arg_types = ra, ra = NULL;
        if (out_out_types) *out_out_types = ro, ro = NULL;
        if (out_aux_types) *out_aux_types = rx, rx = NULL;
    }
    free(t);
    free(ra);
    free(ro);
    free(rx);
    mxp__igraph_free(g);
    return rc;
}
