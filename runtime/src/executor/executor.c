/* executor.c — binding: bind / simple_bind / reshape / free, and the
 * shape-dependent state they (re)build (executor.h): shapes and dtypes of
 * every entry (inferred from the bound arrays), the training program, the
 * memory plan and its storage, each node's signature.
 * Running is in run.c.  Binding first runs the fusion pass (fuse.c) and
 * binds its rewritten graph when it fused something.
 * Invariant after a successful setup: arr[v] is a live NDArray of value v's
 * shape and dtype for every value except head gradients (set per backward
 * call); nodes are inferred with exactly these shapes. */
#include "executor/executor.h"
#include "executor/fuse.h"
#include "base/env.h"

#include "autograd/autograd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mxp_shape shape_of(const mxp_ndarray *nd) {
    mxp_shape s = {.ndim = mxp_ndarray_ndim(nd)};
    for (int i = 0; i < s.ndim && i < MXP_MAX_NDIM; i++) s.dims[i] = mxp_ndarray_shape(nd)[i];
    return s;
}

static int shape_eq(const mxp_shape *a, const mxp_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static int new_array(const mxp_shape *s, int32_t dt, mxp_device dev, double fill, mxp_ndarray **out) {
    int rc = mxp_ndarray_create(s->dims, s->ndim, dt, dev, out);
    if (!rc) rc = mxp_ndarray_fill(*out, fill);
    return rc;
}

/* ------------------------------------------------------------ accessors */
const mxp__program *mxp__executor_program(const mxp_executor *ex) { return ex ? ex->prog : NULL; }
const mxp__plan *mxp__executor_plan(const mxp_executor *ex) { return ex ? ex->plan : NULL; }
int mxp__executor_plan_count(const mxp_executor *ex) { return ex ? ex->n_plans : 0; }

mxp__node *mxp__executor_node(const mxp_executor *ex, const char *name) {
    for (int i = 0; ex && i < ex->g->n_nodes; i++)
        if (ex->nodes[i] && !strcmp(ex->g->nodes[i].g->name, name)) return ex->nodes[i];
    return NULL;
}

/* ------------------------------------------------------------ teardown */
static void free_storage(mxp_executor *ex, int keep_blocks) {
    if (ex->prog && ex->arr)
        for (int v = 0; v < ex->prog->n_values; v++) mxp_ndarray_release(ex->arr[v]);
    free(ex->arr);
    ex->arr = NULL;
    for (int h = 0; ex->outs && h < ex->g->n_heads; h++) mxp_ndarray_release(ex->outs[h]);
    free(ex->outs);
    ex->outs = NULL;
    for (int h = 0; ex->ones && h < ex->g->n_heads; h++) mxp_ndarray_release(ex->ones[h]);
    free(ex->ones);
    ex->ones = NULL;
    if (!keep_blocks) {
        for (int b = 0; ex->blocks && ex->plan && b < ex->plan->n_blocks; b++) mxp_ndarray_release(ex->blocks[b]);
        free(ex->blocks);
        ex->blocks = NULL;
    }
    /* Steps first: their engine ops finish in-flight pushes on their own. */
    if (ex->prog && ex->steps)
        for (int s = 0; s < ex->prog->n_steps; s++) mxp__node_step_free(ex->steps[s]);
    free(ex->steps);
    ex->steps = NULL;
    free(ex->bwd_step);
    ex->bwd_step = NULL;
    if (ex->prog && ex->sum_nodes)
        for (int s = 0; s < ex->prog->n_steps; s++) mxp__node_free(ex->sum_nodes[s]);
    free(ex->sum_nodes);
    ex->sum_nodes = NULL;
}

void mxp__executor_teardown(mxp_executor *ex) {
    free_storage(ex, 0);
    mxp__plan_free(ex->plan);
    ex->plan = NULL;
    mxp__program_free(ex->prog);
    ex->prog = NULL;
}

void mxp__executor_release(void *owner) {
    mxp_executor *ex = owner;
    for (int s = 0; ex->prog && ex->steps && s < ex->prog->n_steps; s++) mxp__node_step_reset(ex->steps[s]);
    for (int s = 0; ex->prog && ex->sum_nodes && s < ex->prog->n_steps; s++) mxp__node_release(ex->sum_nodes[s]);
    for (int i = 0; ex->nodes && i < ex->g->n_nodes; i++) mxp__node_release(ex->nodes[i]);
}

void mxp_executor_free(mxp_executor *ex) {
    if (!ex) return;
    mxp__autograd_executor_freed(ex); /* steps recorded on it must not touch it */
    mxp__holder_unregister(&ex->holder);
    mxp_executor_wait(ex);
    mxp__executor_teardown(ex);
    for (int i = 0; ex->nodes && i < ex->g->n_nodes; i++) mxp__node_free(ex->nodes[i]);
    free(ex->nodes);
    for (int i = 0; i < ex->g->n_args; i++) {
        if (ex->args) mxp_ndarray_release(ex->args[i]);
        if (ex->grads) mxp_ndarray_release(ex->grads[i]);
    }
    for (int i = 0; ex->aux && i < ex->g->n_auxs; i++) mxp_ndarray_release(ex->aux[i]);
    free(ex->args);
    free(ex->grads);
    free(ex->aux);
    free(ex->grad_req);
    free(ex->shapes);
    free(ex->dtypes);
    mxp__igraph_free(ex->g);
    mxp_symbol_release(ex->sym);
    free(ex);
}

/* ------------------------------------------------------------ setup */
static int infer_node(mxp_executor *ex, int i) {
    const mxp__inode *n = &ex->g->nodes[i];
    int tot = n->n_args + n->n_outs + n->n_aux;
    mxp_shape *s = calloc((size_t)tot + 1, sizeof *s);
    int32_t *t = calloc((size_t)tot + 1, sizeof *t);
    if (!s || !t) {
        free(s);
        free(t);
        return mxp__error_oom("executor");
    }
    for (int k = 0; k < n->n_args; k++) s[k] = ex->shapes[n->in[k]], t[k] = ex->dtypes[n->in[k]];
    for (int k = 0; k < n->n_outs; k++)
        s[n->n_args + k] = ex->shapes[n->entry0 + k], t[n->n_args + k] = ex->dtypes[n->entry0 + k];
    for (int k = 0; k < n->n_aux; k++) {
        int e = n->in[n->n_args + k];
        s[n->n_args + n->n_outs + k] = ex->shapes[e];
        t[n->n_args + n->n_outs + k] = ex->dtypes[e];
    }
    int rc = mxp__node_infer(ex->nodes[i], s, t, s + n->n_args, t + n->n_args, s + n->n_args + n->n_outs,
                             t + n->n_args + n->n_outs);
    free(s);
    free(t);
    return rc ? mxp__error_prefix(rc, "node '%s'", n->g->name) : MXP_OK;
}

static int plan_fits(const mxp__plan *pl, const mxp__program *p) {
    if (!pl) return 0;
    for (int v = 0; v < p->n_values; v++) {
        int b = pl->value_block[v];
        if (!mxp__value_plannable(&p->values[v])) {
            if (b >= 0) return 0;
            continue;
        }
        if (b < 0 || pl->block_dtype[b] != p->values[v].dtype) return 0;
        if (mxp__value_bytes(&p->values[v]) > pl->block_bytes[b]) return 0;
    }
    return 1;
}

static int make_sum_node(mxp_executor *ex, int s) {
    const mxp__step *st = &ex->prog->steps[s];
    char nb[32];
    snprintf(nb, sizeof nb, "%d", st->n_in);
    const char *k[] = {"num_args"}, *v[] = {nb};
    int rc = mxp__node_create("ElementWiseSum", 1, k, v, &ex->sum_nodes[s]);
    if (rc) return mxp__error_prefix(rc, "gradient sum");
    mxp__node_set_bound(ex->sum_nodes[s]);
    mxp_shape *sh = calloc((size_t)st->n_in + 2, sizeof *sh);
    int32_t *t = calloc((size_t)st->n_in + 2, sizeof *t);
    if (!sh || !t) rc = mxp__error_oom("executor");
    for (int i = 0; i <= st->n_in && !rc; i++) {
        const mxp__value *val = &ex->prog->values[i < st->n_in ? st->in[i] : st->out[0]];
        sh[i] = val->shape;
        t[i] = val->dtype;
    }
    if (!rc) rc = mxp__node_infer(ex->sum_nodes[s], sh, t, sh + st->n_in, t + st->n_in, NULL, NULL);
    free(sh);
    free(t);
    return rc;
}

/* A view of block b with value v's shape. */
static int block_view(mxp_executor *ex, int b, const mxp__value *val, mxp_ndarray **out) {
    int64_t numel = 1;
    for (int i = 0; i < val->shape.ndim; i++) numel *= val->shape.dims[i];
    mxp_ndarray *flat = NULL;
    int rc = mxp_ndarray_slice(ex->blocks[b], 0, numel, &flat);
    if (!rc) rc = mxp_ndarray_reshape(flat, val->shape.dims, val->shape.ndim, out);
    mxp_ndarray_release(flat);
    return rc;
}

int mxp__executor_setup(mxp_executor *ex, int keep_plan) {
    const mxp__igraph *g = ex->g;
    mxp__program *prog = NULL;
    int rc = mxp__program_build(g, ex->shapes, ex->dtypes, ex->grad_req, &prog);
    if (rc) return rc;
    int reuse = keep_plan && ex->plan && ex->blocks && ex->prog && ex->prog->n_values == prog->n_values &&
                plan_fits(ex->plan, prog);
    free_storage(ex, reuse);
    mxp__program_free(ex->prog);
    ex->prog = prog;
    if (!reuse) {
        mxp__plan_free(ex->plan);
        ex->plan = NULL;
        if ((rc = mxp__plan_build(prog, ex->plan_enabled, &ex->plan))) return rc;
        ex->n_plans++;
    } else {
        /* Keep the blocks; the naive total follows the new shapes. */
        ex->plan->naive_bytes = 0;
        for (int v = 0; v < prog->n_values; v++)
            if (mxp__value_plannable(&prog->values[v])) ex->plan->naive_bytes += mxp__value_bytes(&prog->values[v]);
    }
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (ex->nodes[i]) rc = infer_node(ex, i);
    if (rc) return rc;
    ex->sum_nodes = calloc((size_t)prog->n_steps + 1, sizeof *ex->sum_nodes);
    ex->steps = calloc((size_t)prog->n_steps + 1, sizeof *ex->steps);
    ex->bwd_step = malloc(((size_t)g->n_nodes + 1) * sizeof *ex->bwd_step);
    if (!ex->steps || !ex->bwd_step) return mxp__error_oom("executor");
    for (int i = 0; i < g->n_nodes; i++) ex->bwd_step[i] = -1;
    for (int s = 0; s < prog->n_steps; s++)
        if (prog->steps[s].kind == MXP_STEP_BWD) ex->bwd_step[prog->steps[s].node] = s;
    /* Tell each node which input gradients its backward will be asked
     * for (none without a backward step), so `tune` times that backward. */
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        if (!ex->nodes[i]) continue;
        int n_in = mxp__node_num_inputs(ex->nodes[i]), b = ex->bwd_step[i];
        uint8_t *need = calloc((size_t)n_in + 1, 1);
        if (!need) return mxp__error_oom("executor");
        for (int k = 0; b >= 0 && k < n_in && k < prog->steps[b].n_in; k++)
            need[k] = prog->steps[b].ig[k] >= 0 && prog->steps[b].req[k] > MXP_REQ_NULL; /* -1: absent */
        rc = mxp__node_set_in_grad(ex->nodes[i], need, n_in);
        free(need);
    }
    if (rc) return rc;
    ex->arr = calloc((size_t)prog->n_values + 1, sizeof *ex->arr);
    ex->outs = calloc((size_t)g->n_heads + 1, sizeof *ex->outs);
    ex->ones = calloc((size_t)g->n_heads + 1, sizeof *ex->ones);
    if (!reuse) ex->blocks = calloc((size_t)ex->plan->n_blocks + 1, sizeof *ex->blocks);
    if (!ex->sum_nodes || !ex->arr || !ex->outs || !ex->ones || !ex->blocks) return mxp__error_oom("executor");
    for (int s = 0; s < prog->n_steps && !rc; s++)
        if (prog->steps[s].kind == MXP_STEP_SUM) rc = make_sum_node(ex, s);
    for (int b = 0; !reuse && b < ex->plan->n_blocks && !rc; b++) {
        uint32_t esz = mxp_dtype_size(ex->plan->block_dtype[b]);
        int64_t n = (int64_t)((ex->plan->block_bytes[b] + esz - 1) / esz);
        if (n < 1) n = 1;
        rc = mxp_ndarray_create(&n, 1, ex->plan->block_dtype[b], ex->dev, &ex->blocks[b]);
    }
    for (int v = 0; v < prog->n_values && !rc; v++) {
        const mxp__value *val = &prog->values[v];
        switch (val->kind) {
        case MXP_VAL_ARG: ex->arr[v] = mxp_ndarray_retain(ex->args[val->index]); break;
        case MXP_VAL_AUX: ex->arr[v] = mxp_ndarray_retain(ex->aux[val->index]); break;
        case MXP_VAL_ARG_GRAD: ex->arr[v] = mxp_ndarray_retain(ex->grads[val->index]); break;
        case MXP_VAL_HEAD_GRAD: break;
        case MXP_VAL_ZERO: rc = new_array(&val->shape, val->dtype, ex->dev, 0.0, &ex->arr[v]); break;
        default:
            if (mxp__value_plannable(val)) rc = block_view(ex, ex->plan->value_block[v], val, &ex->arr[v]);
            else rc = new_array(&val->shape, val->dtype, ex->dev, 0.0, &ex->arr[v]);
        }
    }
    for (int h = 0; h < g->n_heads && !rc; h++) ex->outs[h] = mxp_ndarray_retain(ex->arr[prog->entry_value[g->heads[h]]]);
    ex->trained = 0;
    return rc;
}

/* ------------------------------------------------------------ bind */
static int unknown_error(const mxp_executor *ex, const char *what) {
    for (int e = 0; e < ex->g->n_entries; e++) {
        int bad = !strcmp(what, "shape") ? !mxp__shape_known(&ex->shapes[e]) : ex->dtypes[e] < 0;
        if (!bad) continue;
        char nm[160], sh[160];
        mxp__igraph_entry_name(ex->g, e, nm, sizeof nm);
        mxp__shape_str(&ex->shapes[e], sh, sizeof sh);
        return mxp__error(MXP_EINCOMPLETE, "bind: cannot infer the %s of '%s' (got %s); give more input shapes", what,
                          nm, sh);
    }
    return mxp__error(MXP_EINCOMPLETE, "bind: incomplete %s inference", what);
}

/* Shapes and dtypes of every entry from the bound arrays. */
static int infer_all(mxp_executor *ex) {
    const mxp__igraph *g = ex->g;
    for (int e = 0; e < g->n_entries; e++) {
        ex->shapes[e] = (mxp_shape){.ndim = -1};
        ex->dtypes[e] = MXP_DTYPE_UNKNOWN;
    }
    for (int i = 0; i < g->n_args; i++) {
        int e = g->nodes[g->args[i]].entry0;
        ex->shapes[e] = shape_of(ex->args[i]);
        ex->dtypes[e] = mxp_ndarray_dtype(ex->args[i]);
    }
    for (int i = 0; i < g->n_auxs; i++) {
        int e = g->nodes[g->auxs[i]].entry0;
        ex->shapes[e] = shape_of(ex->aux[i]);
        ex->dtypes[e] = mxp_ndarray_dtype(ex->aux[i]);
    }
    int unknown = 0;
    int rc = mxp__graph_infer_shapes(g, ex->shapes, &unknown);
    if (!rc && unknown) rc = unknown_error(ex, "shape");
    if (!rc) rc = mxp__graph_infer_types(g, ex->dtypes, &unknown);
    if (!rc && unknown) rc = unknown_error(ex, "dtype");
    /* The bound arrays must be exactly what inference settled on. */
    for (int i = 0; i < g->n_args && !rc; i++) {
        int e = g->nodes[g->args[i]].entry0;
        mxp_shape s = shape_of(ex->args[i]);
        if (!shape_eq(&s, &ex->shapes[e])) rc = mxp__error(MXP_ESHAPE, "bind: argument '%s' shape mismatch", g->nodes[g->args[i]].g->name);
        else if (ex->grads[i]) {
            mxp_shape gs = shape_of(ex->grads[i]);
            if (!shape_eq(&gs, &s) || mxp_ndarray_dtype(ex->grads[i]) != ex->dtypes[e]) {
                char a[160], b[160];
                mxp__shape_str(&gs, a, sizeof a);
                mxp__shape_str(&s, b, sizeof b);
                rc = mxp__error(MXP_ESHAPE, "bind: gradient of '%s' has shape %s (%s), the argument %s (%s)",
                                g->nodes[g->args[i]].g->name, a, mxp_dtype_name(mxp_ndarray_dtype(ex->grads[i])), b,
                                mxp_dtype_name(ex->dtypes[e]));
            }
        }
    }
    return rc;
}

/* Name of the first op node that reads variable node `v`, or "(a head)". */
static const char *consumer_of(const mxp__igraph *g, int v) {
    int e = g->nodes[v].entry0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mxp__inode *n = &g->nodes[i];
        for (int k = 0; !n->is_var && k < n->n_args + n->n_aux; k++)
            if (n->in[k] == e) return n->g->name ? n->g->name : "(unnamed)";
    }
    return "(a head)";
}

static int by_var_name(const void *a, const void *b, void *graph) {
    const mxp__igraph *g = graph;
    const char *x = g->nodes[*(const int *)a].g->name, *y = g->nodes[*(const int *)b].g->name;
    int c = strcmp(x ? x : "", y ? y : "");
    return c ? c : (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Two different variable nodes with one name (two 'data', two
 * 'fc2_weight') would be bound to separate arrays but saved, loaded and fed
 * by name: training at chance and checkpoints nobody can load.  Refused,
 * naming the ops that read each.  O(n log n). */
static int check_unique_names(const mxp__igraph *g) {
    int n = g->n_args + g->n_auxs;
    if (n < 2) return MXP_OK;
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return mxp__error_oom("bind");
    for (int i = 0; i < g->n_args; i++) ids[i] = g->args[i];
    for (int i = 0; i < g->n_auxs; i++) ids[g->n_args + i] = g->auxs[i];
    qsort_r(ids, (size_t)n, sizeof *ids, by_var_name, (void *)g);
    int rc = MXP_OK;
    for (int i = 1; i < n && !rc; i++) {
        const char *a = g->nodes[ids[i - 1]].g->name, *b = g->nodes[ids[i]].g->name;
        if (a && b && !strcmp(a, b))
            rc = mxp__error(MXP_EINVAL,
                            "bind: two different variables are named '%s' (one read by '%s', the other by '%s'); "
                            "give them distinct names, or use one variable for both",
                            a, consumer_of(g, ids[i - 1]), consumer_of(g, ids[i]));
    }
    free(ids);
    return rc;
}

static int bind_scoped(mxp_symbol *sym, mxp_device dev, int n_args, mxp_ndarray *const *args,
                       mxp_ndarray *const *arg_grads, const int *grad_reqs, int n_aux, mxp_ndarray *const *aux,
                       mxp_executor **out);

/* The same variable names in the same order (list_arguments and
 * list_auxiliary_states, i.e. the binding positions). */
static int same_vars(const mxp__igraph *a, const mxp__igraph *b) {
    if (a->n_args != b->n_args || a->n_auxs != b->n_auxs) return 0;
    for (int i = 0; i < a->n_args; i++)
        if (strcmp(a->nodes[a->args[i]].g->name, b->nodes[b->args[i]].g->name)) return 0;
    for (int i = 0; i < a->n_auxs; i++)
        if (strcmp(a->nodes[a->auxs[i]].g->name, b->nodes[b->auxs[i]].g->name)) return 0;
    return 1;
}

/* ex->g becomes the graph of the fusion pass's symbol (fuse.c), when it
 * fused something and binds the same arguments in the same positions
 * (the pass only fuses where it does; otherwise the user's graph stays). */
static int fuse_graph(mxp_executor *ex) {
    mxp_symbol *fused = NULL;
    int nf = 0, rc = mxp__exec_fuse(ex->g, ex->dev, &fused, &nf);
    if (rc || !fused) return rc;
    mxp__igraph *g2 = NULL;
    rc = mxp__igraph_build(fused, &g2);
    mxp_symbol_release(fused); /* g2 holds its own reference */
    if (rc) return rc;
    if (!same_vars(ex->g, g2) || ex->g->n_heads != g2->n_heads) { /* the pass avoids it: bind the user's graph */
        mxp__igraph_free(g2);
        return MXP_OK;
    }
    mxp__igraph_free(ex->g);
    ex->g = g2;
    return MXP_OK;
}

/* Binding creates a node per op (each pins its def): one pin scope. */
static int bind_impl(mxp_symbol *sym, mxp_device dev, int n_args, mxp_ndarray *const *args,
                     mxp_ndarray *const *arg_grads, const int *grad_reqs, int n_aux, mxp_ndarray *const *aux,
                     mxp_executor **out) {
    mxp__pin_scope_enter(1);
    int rc = bind_scoped(sym, dev, n_args, args, arg_grads, grad_reqs, n_aux, aux, out);
    mxp__pin_scope_leave();
    return rc;
}

static int bind_scoped(mxp_symbol *sym, mxp_device dev, int n_args, mxp_ndarray *const *args,
                     mxp_ndarray *const *arg_grads, const int *grad_reqs, int n_aux, mxp_ndarray *const *aux,
                     mxp_executor **out) {
    mxp_executor *ex = calloc(1, sizeof *ex);
    if (!ex) return mxp__error_oom("executor");
    ex->sym = mxp_symbol_retain(sym);
    ex->dev = dev;
    ex->plan_enabled = mxp__env_bool("MXP_EXEC_MEMPLAN", 1);
    int rc = mxp__igraph_build(sym, &ex->g);
    if (!rc && (rc = check_unique_names(ex->g))) mxp__igraph_free(ex->g);
    if (!rc && (rc = fuse_graph(ex))) mxp__igraph_free(ex->g);
    if (rc) {
        mxp_symbol_release(ex->sym);
        free(ex);
        return rc;
    }
    const mxp__igraph *g = ex->g;
    ex->args = calloc((size_t)g->n_args + 1, sizeof *ex->args);
    ex->grads = calloc((size_t)g->n_args + 1, sizeof *ex->grads);
    ex->aux = calloc((size_t)g->n_auxs + 1, sizeof *ex->aux);
    ex->grad_req = calloc((size_t)g->n_args + 1, sizeof *ex->grad_req);
    ex->shapes = calloc((size_t)g->n_entries + 1, sizeof *ex->shapes);
    ex->dtypes = calloc((size_t)g->n_entries + 1, sizeof *ex->dtypes);
    ex->nodes = calloc((size_t)g->n_nodes + 1, sizeof *ex->nodes);
    if (!ex->args || !ex->grads || !ex->aux || !ex->grad_req || !ex->shapes || !ex->dtypes || !ex->nodes)
        rc = mxp__error_oom("executor");
    if (!rc && n_args != g->n_args)
        rc = mxp__error(MXP_EINVAL, "bind: %d argument arrays given, the symbol has %d arguments", n_args, g->n_args);
    if (!rc && n_aux != g->n_auxs)
        rc = mxp__error(MXP_EINVAL, "bind: %d aux arrays given, the symbol has %d aux states", n_aux, g->n_auxs);
    for (int i = 0; i < g->n_args && !rc; i++) {
        const char *nm = g->nodes[g->args[i]].g->name;
        if (!args || !args[i] || mxp_ndarray_is_none(args[i])) {
            rc = mxp__error(MXP_EINVAL, "bind: no array for argument '%s'", nm);
            break;
        }
        ex->args[i] = mxp_ndarray_retain(args[i]);
        int req = arg_grads && arg_grads[i] ? (grad_reqs ? grad_reqs[i] : MXP_REQ_WRITE) : MXP_REQ_NULL;
        if (grad_reqs && grad_reqs[i] != MXP_REQ_NULL && !(arg_grads && arg_grads[i]))
            rc = mxp__error(MXP_EINVAL, "bind: argument '%s' has grad_req %d but no gradient array", nm, grad_reqs[i]);
        if (req < MXP_REQ_NULL || req > MXP_REQ_ADD) rc = mxp__error(MXP_EINVAL, "bind: bad grad_req %d for '%s'", req, nm);
        ex->grad_req[i] = req == MXP_REQ_INPLACE ? MXP_REQ_WRITE : req;
        if (req != MXP_REQ_NULL) ex->grads[i] = mxp_ndarray_retain(arg_grads[i]);
    }
    for (int i = 0; i < g->n_auxs && !rc; i++) {
        if (!aux || !aux[i]) {
            rc = mxp__error(MXP_EINVAL, "bind: no array for aux state '%s'", g->nodes[g->auxs[i]].g->name);
            break;
        }
        ex->aux[i] = mxp_ndarray_retain(aux[i]);
    }
    if (!rc) rc = infer_all(ex);
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        const gnode *n = g->nodes[i].g;
        if (!n->op) continue;
        rc = mxp__node_create(n->op, n->n_attrs, (const char *const *)n->keys, (const char *const *)n->vals,
                              &ex->nodes[i]);
        if (rc) rc = mxp__error_prefix(rc, "node '%s'", n->name);
        else {
            mxp__node_set_label(ex->nodes[i], n->name); /* kernel errors name the node */
            mxp__node_set_bound(ex->nodes[i]);         /* reloads may not drop its op */
        }
    }
    if (!rc) rc = mxp__executor_setup(ex, 0);
    if (rc) {
        mxp_executor_free(ex);
        return rc;
    }
    mxp__holder_register(&ex->holder, mxp__executor_release, ex);
    *out = ex;
    return MXP_OK;
}

int mxp_executor_bind(mxp_symbol *sym, mxp_device dev, int n_args, mxp_ndarray *const *args,
                      mxp_ndarray *const *arg_grads, const int *grad_reqs, int n_aux, mxp_ndarray *const *aux,
                      mxp_executor **out) {
    if (out) *out = NULL;
    if (!sym || !out || n_args < 0 || n_aux < 0) return mxp__error(MXP_EMISUSE, "mxp_executor_bind: bad argument");
    return bind_impl(sym, dev, n_args, args, arg_grads, grad_reqs, n_aux, aux, out);
}

int mxp_executor_simple_bind(mxp_symbol *sym, mxp_device dev, int n, const char *const *names,
                             const mxp_shape *shapes, int grad_req, int n_no_grad, const char *const *no_grad,
                             mxp_executor **out) {
    if (out) *out = NULL;
    if (!sym || !out || n < 0 || (n && (!names || !shapes)) || n_no_grad < 0 || (n_no_grad && !no_grad))
        return mxp__error(MXP_EMISUSE, "mxp_executor_simple_bind: bad argument");
    int na = 0, nx = 0, complete = 0;
    mxp_shape *as = NULL, *xs = NULL;
    int *at = NULL, *xt = NULL;
    int rc = mxp_symbol_infer_shape(sym, n, names, shapes, &na, &as, NULL, NULL, &nx, &xs, &complete);
    if (!rc) rc = mxp_symbol_infer_type(sym, 0, NULL, NULL, NULL, &at, NULL, NULL, NULL, &xt, NULL);
    const char *const *an = NULL;
    if (!rc) rc = mxp_symbol_list_arguments(sym, &na, &an);
    if (!rc && !complete) {
        for (int i = 0; i < na; i++)
            if (!mxp__shape_known(&as[i])) {
                rc = mxp__error(MXP_EINCOMPLETE, "simple_bind: cannot infer the shape of argument '%s'", an[i]);
                break;
            }
        if (!rc) rc = mxp__error(MXP_EINCOMPLETE, "simple_bind: incomplete shape inference");
    }
    mxp_ndarray **args = calloc((size_t)na + 1, sizeof *args), **grads = calloc((size_t)na + 1, sizeof *grads),
                **aux = calloc((size_t)nx + 1, sizeof *aux);
    int *reqs = calloc((size_t)na + 1, sizeof *reqs);
    if (!rc && (!args || !grads || !aux || !reqs)) rc = mxp__error_oom("simple_bind");
    for (int i = 0; i < na && !rc; i++) {
        int32_t dt = at && at[i] >= 0 ? at[i] : MXP_DTYPE_F32;
        rc = new_array(&as[i], dt, dev, 0.0, &args[i]);
        int skip = grad_req == MXP_REQ_NULL;
        for (int k = 0; k < n_no_grad && !skip; k++) skip = no_grad[k] && !strcmp(no_grad[k], an[i]);
        reqs[i] = skip ? MXP_REQ_NULL : grad_req;
        if (!rc && !skip) rc = new_array(&as[i], dt, dev, 0.0, &grads[i]);
    }
    for (int i = 0; i < nx && !rc; i++) rc = new_array(&xs[i], xt && xt[i] >= 0 ? xt[i] : MXP_DTYPE_F32, dev, 0.0, &aux[i]);
    if (!rc) rc = bind_impl(sym, dev, na, args, grads, reqs, nx, aux, out);
    for (int i = 0; args && i < na; i++) {
        mxp_ndarray_release(args[i]);
        if (grads) mxp_ndarray_release(grads[i]);
    }
    for (int i = 0; aux && i < nx; i++) mxp_ndarray_release(aux[i]);
    free(args);
    free(grads);
    free(aux);
    free(reqs);
    free(as);
    free(xs);
    free(at);
    free(xt);
    return rc;
}

/* ------------------------------------------------------------ reshape */
static int reshape_held(mxp_executor *ex, int n, const char *const *names, const mxp_shape *shapes);

int mxp_executor_reshape(mxp_executor *ex, int n, const char *const *names, const mxp_shape *shapes) {
    if (!ex || n < 0 || (n && (!names || !shapes))) return mxp__error(MXP_EMISUSE, "mxp_executor_reshape: bad argument");
    mxp__holder_enter(&ex->holder, 1);
    int rc = reshape_held(ex, n, names, shapes);
    mxp__holder_leave(&ex->holder, 0);
    return rc;
}

static int reshape_held(mxp_executor *ex, int n, const char *const *names, const mxp_shape *shapes) {
    MXP_ASSERT(mxp__holder_held(&ex->holder));
    const mxp__igraph *g = ex->g;
    int rc = mxp_executor_wait(ex);
    if (rc) return rc;
    /* New shapes for the named arguments, the others as bound; then infer. */
    mxp_shape *s = calloc((size_t)g->n_entries + 1, sizeof *s);
    int32_t *t = calloc((size_t)g->n_entries + 1, sizeof *t);
    if (!s || !t) rc = mxp__error_oom("reshape");
    for (int e = 0; e < g->n_entries && !rc; e++) s[e].ndim = -1, t[e] = ex->dtypes[e];
    for (int i = 0; i < g->n_args && !rc; i++) {
        int e = g->nodes[g->args[i]].entry0;
        s[e] = ex->shapes[e];
        for (int k = 0; k < n; k++)
            if (names[k] && !strcmp(names[k], g->nodes[g->args[i]].g->name)) s[e] = shapes[k];
    }
    for (int k = 0; k < n && !rc; k++) {
        int found = 0;
        for (int i = 0; i < g->n_args && !found; i++) found = names[k] && !strcmp(names[k], g->nodes[g->args[i]].g->name);
        if (!found) rc = mxp__error(MXP_EINVAL, "reshape: '%s' is not an argument", names[k] ? names[k] : "(null)");
    }
    /* Weights keep their shapes: let inference check them against data. */
    int unknown = 0;
    if (!rc) rc = mxp__graph_infer_shapes(g, s, &unknown);
    if (!rc && unknown) rc = mxp__error(MXP_EINCOMPLETE, "reshape: shapes cannot all be inferred");
    if (rc) {
        free(s);
        free(t);
        return rc;
    }
    /* Replace the arrays whose shape changed. */
    for (int i = 0; i < g->n_args && !rc; i++) {
        int e = g->nodes[g->args[i]].entry0;
        if (shape_eq(&s[e], &ex->shapes[e])) continue;
        mxp_ndarray *a = NULL, *gr = NULL;
        rc = new_array(&s[e], ex->dtypes[e], ex->dev, 0.0, &a);
        if (!rc && ex->grads[i]) rc = new_array(&s[e], ex->dtypes[e], ex->dev, 0.0, &gr);
        if (rc) {
            mxp_ndarray_release(a);
            break;
        }
        mxp_ndarray_release(ex->args[i]);
        ex->args[i] = a;
        if (ex->grads[i]) {
            mxp_ndarray_release(ex->grads[i]);
            ex->grads[i] = gr;
        }
    }
    for (int i = 0; i < g->n_auxs && !rc; i++) {
        int e = g->nodes[g->auxs[i]].entry0;
        if (shape_eq(&s[e], &ex->shapes[e])) continue;
        mxp_ndarray *a = NULL;
        if ((rc = new_array(&s[e], ex->dtypes[e], ex->dev, 0.0, &a))) break;
        mxp_ndarray_release(ex->aux[i]);
        ex->aux[i] = a;
    }
    if (!rc) {
        memcpy(ex->shapes, s, (size_t)g->n_entries * sizeof *s);
        rc = mxp__executor_setup(ex, 1);
    }
    free(s);
    free(t);
    return rc;
}

/* ------------------------------------------------------------ accessors */
int mxp_executor_outputs(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays) {
    if (out_n) *out_n = 0;
    if (out_arrays) *out_arrays = NULL;
    if (!ex || !out_n || !out_arrays) return mxp__error(MXP_EMISUSE, "mxp_executor_outputs: NULL argument");
    *out_n = ex->g->n_heads;
    *out_arrays = ex->outs;
    return MXP_OK;
}

static int list_out(mxp_executor *ex, int n, mxp_ndarray **a, int *out_n, mxp_ndarray *const **out_arrays) {
    if (out_n) *out_n = 0;
    if (out_arrays) *out_arrays = NULL;
    if (!ex || !out_n || !out_arrays) return mxp__error(MXP_EMISUSE, "mxp_executor: NULL argument");
    *out_n = n;
    *out_arrays = a;
    return MXP_OK;
}

int mxp_executor_args(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays) {
    return list_out(ex, ex ? ex->g->n_args : 0, ex ? ex->args : NULL, out_n, out_arrays);
}
int mxp_executor_grads(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays) {
    return list_out(ex, ex ? ex->g->n_args : 0, ex ? ex->grads : NULL, out_n, out_arrays);
}
int mxp_executor_aux(mxp_executor *ex, int *out_n, mxp_ndarray *const **out_arrays) {
    return list_out(ex, ex ? ex->g->n_auxs : 0, ex ? ex->aux : NULL, out_n, out_arrays);
}

int mxp_executor_set_impl(mxp_executor *ex, const char *node_name, const char *policy) {
    if (!ex || !node_name) return mxp__error(MXP_EMISUSE, "mxp_executor_set_impl: NULL argument");
    mxp__node *n = mxp__executor_node(ex, node_name);
    if (!n) return mxp__error(MXP_ENOENT, "executor: no op node named '%s'", node_name);
    mxp__holder_enter(&ex->holder, 0);
    int rc = mxp__node_set_policy(n, policy);
    mxp__holder_leave(&ex->holder, ex->holder.busy);
    if (rc) return mxp__error_prefix(rc, "node '%s'", node_name);
    return MXP_OK;
}

int mxp_executor_set_monitor(mxp_executor *ex, mxp_monitor_fn fn, void *user) {
    if (!ex) return mxp__error(MXP_EMISUSE, "mxp_executor_set_monitor: NULL executor");
    ex->monitor = fn;
    ex->monitor_user = user;
    return MXP_OK;
}

int mxp_executor_memory(const mxp_executor *ex, uint64_t *out_planned, uint64_t *out_naive) {
    if (out_planned) *out_planned = 0;
    if (out_naive) *out_naive = 0;
    if (!ex) return mxp__error(MXP_EMISUSE, "mxp_executor_memory: NULL executor");
    if (out_planned) *out_planned = ex->plan ? ex->plan->planned_bytes : 0;
    if (out_naive) *out_naive = ex->plan ? ex->plan->naive_bytes : 0;
    return MXP_OK;
}
