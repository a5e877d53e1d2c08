/* gradient.c — the training program: the forward steps of an indexed graph
 * followed by its gradient steps, over numbered values (graph.h).
 *
 * Which gradients exist: an entry needs one when it depends on an argument
 * whose grad_req is not null through differentiable ops (MXP_OP_NO_GRADIENT
 * blocks).  Gradient flows from the heads: a non-loss head contributes its
 * head gradient (given at backward); a loss op (MXP_OP_LOSS) needs none.
 * A node runs backward when it is differentiable, one of its arguments
 * needs a gradient, and gradient reaches one of its outputs (or it is a
 * loss).  What backward reads comes from the op's backward_deps refined by
 * declare_backward, so forward values it does not read can be freed early
 * by the memory plan.
 * Summation: every backward step writes a fresh partial gradient for each
 * input that needs one; an entry with several contributions (used more than
 * once, e.g. x*x + x, or a head that is also consumed) gets a SUM step
 * (ElementWiseSum, run by the executor) as soon as its last contribution
 * is written.  An argument with a single contribution gets it written
 * straight into its gradient array with the user's req (write or add).
 * An op flagged MXP_OP_IDENTITY_GRAD (elemwise_add, add_n) gets no step
 * when its inputs are op outputs of its shape: its output's gradient value
 * is their contribution as is (MXP_EXEC_IDENTITY_GRAD=0 keeps the step).
 * Visible outputs backward needs but no gradient reaches read a ZERO value;
 * hidden outputs (BatchNorm's mean/var) get none.
 * Built as named passes over one builder (gb_*), each a function:
 *   pass_forward  values of every entry, one FWD step per op node, each
 *                 node's opened definition and backward dependencies;
 *   pass_needs    which entries need a gradient (topological order);
 *   pass_count    contributions per entry, in reverse topological order
 *                 (exact: whether a node runs depends only on its
 *                 consumers, which come later);
 *   pass_emit     head gradients, then BWD steps in reverse order, closing
 *                 each entry (close_entry) once its last contribution is in.
 * No fixed limits: per-node arrays are sized from the graph (a node with
 * 5,000 inputs, add_n of 5,000 arrays, builds). */
#include "graph/graph.h"
#include "base/env.h"

#include <stdlib.h>
#include <string.h>

/* Growing arrays of the program being built. */
typedef struct builder {
    mxp__program *p;
    int cap_values, cap_steps;
} builder;

static int add_value(builder *b, int kind, int entry, int index, const mxp_shape *s, int32_t dt) {
    mxp__program *p = b->p;
    if (p->n_values == b->cap_values) {
        int cap = b->cap_values ? 2 * b->cap_values : 64;
        mxp__value *v = realloc(p->values, (size_t)cap * sizeof *v);
        if (!v) return mxp__error_oom("program");
        p->values = v;
        b->cap_values = cap;
    }
    mxp__value *v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->entry = entry;
    v->index = index;
    v->shape = *s;
    v->dtype = dt;
    return p->n_values++;
}

static mxp__step *add_step(builder *b, int kind, int node, int n_in, int n_out, int n_aux) {
    mxp__program *p = b->p;
    if (p->n_steps == b->cap_steps) {
        int cap = b->cap_steps ? 2 * b->cap_steps : 64;
        mxp__step *s = realloc(p->steps, (size_t)cap * sizeof *s);
        if (!s) return NULL;
        p->steps = s;
        b->cap_steps = cap;
    }
    mxp__step *s = &p->steps[p->n_steps];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->node = node;
    s->entry = -1;
    s->n_in = n_in;
    s->n_out = n_out;
    s->n_aux = n_aux;
    /* One allocation per slot array; -1 = absent. */
    int n_arr = 6;
    int *sizes = (int[]){n_in, n_out, n_out, n_in, n_aux, n_in};
    int **arrs[] = {&s->in, &s->out, &s->og, &s->ig, &s->aux, &s->req};
    for (int i = 0; i < n_arr; i++) {
        *arrs[i] = malloc(((size_t)sizes[i] + 1) * sizeof(int));
        if (!*arrs[i]) {
            for (int j = 0; j < i; j++) free(*arrs[j]);
            return NULL;
        }
        for (int k = 0; k < sizes[i]; k++) (*arrs[i])[k] = -1;
    }
    p->n_steps++;
    return s;
}

static int add_inplace(mxp__step *s, int from, int to) {
    if (from < 0 || to < 0) return MXP_OK;
    int(*ip)[2] = realloc(s->inplace, (size_t)(s->n_inplace + 1) * sizeof *ip);
    if (!ip) return mxp__error_oom("program");
    s->inplace = ip;
    s->inplace[s->n_inplace][0] = from;
    s->inplace[s->n_inplace][1] = to;
    s->n_inplace++;
    return MXP_OK;
}

void mxp__program_free(mxp__program *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        mxp__step *s = &p->steps[i];
        free(s->in);
        free(s->out);
        free(s->og);
        free(s->ig);
        free(s->aux);
        free(s->req);
        free(s->inplace);
    }
    free(p->steps);
    free(p->values);
    free(p->entry_value);
    free(p->arg_grad_req);
    free(p->arg_grad_value);
    free(p->head_grad_value);
    free(p);
}

int mxp__step_reads(const mxp__step *s, int *buf, int cap) {
    int n = 0;
#define PUT(arr, cnt)                                                   \
    for (int i_ = 0; i_ < (cnt); i_++)                                  \
        if ((arr)[i_] >= 0 && n < cap) buf[n++] = (arr)[i_];
    if (s->kind == MXP_STEP_FWD) {
        PUT(s->in, s->n_in);
        PUT(s->aux, s->n_aux);
    } else if (s->kind == MXP_STEP_BWD) {
        PUT(s->og, s->n_out);
        PUT(s->in, s->n_in);
        PUT(s->out, s->n_out);
        PUT(s->aux, s->n_aux);
    } else {
        PUT(s->in, s->n_in);
    }
    return n;
}

int mxp__step_writes(const mxp__step *s, int *buf, int cap) {
    int n = 0;
    if (s->kind == MXP_STEP_FWD) {
        PUT(s->out, s->n_out);
        PUT(s->aux, s->n_aux);
    } else if (s->kind == MXP_STEP_BWD) {
        PUT(s->ig, s->n_in);
    } else {
        PUT(s->out, s->n_out);
    }
#undef PUT
    return n;
}

/* The gradient values written for one entry, in order. */
typedef struct contrib {
    int *v;
    int n, cap;
} contrib;

static int contrib_add(contrib *c, int v) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        int *a = realloc(c->v, (size_t)cap * sizeof *a);
        if (!a) return mxp__error_oom("program");
        c->v = a;
        c->cap = cap;
    }
    c->v[c->n++] = v;
    return MXP_OK;
}

/* Everything the passes share.  Arrays indexed by entry (ne), node (nn) or
 * argument; deps of node i start at dep_off[i]: [n_outs | n_args | n_outs]
 * flags (backward reads out_grad k / input k / output k). */
typedef struct grad_builder {
    builder b;
    const mxp__igraph *g;
    const mxp_shape *shapes;
    const int32_t *dtypes;
    int any_grad;              /* some argument has a grad_req          */
    int *arg_of_node, *aux_of_node;
    uint8_t *needs;            /* entry needs a gradient                */
    uint8_t *is_head;
    uint8_t *runs;             /* node runs backward                    */
    int *count;                /* contributions per entry               */
    int *remaining;            /* contributions still to come           */
    int *final_grad;           /* entry -> its (summed) gradient value  */
    contrib *con;
    mxp__opinfo *oi;           /* op nodes' definitions, held           */
    size_t *dep_off;
    uint8_t *deps;
} grad_builder;

static void gb_free(grad_builder *gb) {
    const mxp__igraph *g = gb->g;
    if (gb->oi)
        for (int i = 0; i < g->n_nodes; i++) mxp__opinfo_close(&gb->oi[i]);
    if (gb->con)
        for (int e = 0; e < g->n_entries; e++) free(gb->con[e].v);
    free(gb->oi);
    free(gb->con);
    free(gb->deps);
    free(gb->dep_off);
    free(gb->final_grad);
    free(gb->count);
    free(gb->remaining);
    free(gb->runs);
    free(gb->is_head);
    free(gb->needs);
    free(gb->arg_of_node);
    free(gb->aux_of_node);
}

static int gb_init(grad_builder *gb, const mxp__igraph *g, const mxp_shape *shapes, const int32_t *dtypes,
                   const int *grad_req) {
    memset(gb, 0, sizeof *gb);
    gb->g = g;
    gb->shapes = shapes;
    gb->dtypes = dtypes;
    mxp__program *p = gb->b.p = calloc(1, sizeof *p);
    if (!p) return mxp__error_oom("program");
    size_t ne = (size_t)g->n_entries + 1, nn = (size_t)g->n_nodes + 1;
    p->entry_value = malloc(ne * sizeof(int));
    p->arg_grad_req = calloc((size_t)g->n_args + 1, sizeof(int));
    p->arg_grad_value = malloc(((size_t)g->n_args + 1) * sizeof(int));
    p->head_grad_value = malloc(((size_t)g->n_heads + 1) * sizeof(int));
    gb->arg_of_node = malloc(nn * sizeof(int));
    gb->aux_of_node = malloc(nn * sizeof(int));
    gb->needs = calloc(ne, 1);
    gb->is_head = calloc(ne, 1);
    gb->runs = calloc(nn, 1);
    gb->count = calloc(ne, sizeof(int));
    gb->remaining = calloc(ne, sizeof(int));
    gb->final_grad = malloc(ne * sizeof(int));
    gb->con = calloc(ne, sizeof *gb->con);
    gb->oi = calloc(nn, sizeof *gb->oi);
    gb->dep_off = malloc(nn * sizeof(size_t));
    size_t n_deps = 1;
    for (int i = 0; gb->dep_off && i < g->n_nodes; i++) {
        gb->dep_off[i] = n_deps;
        n_deps += 2 * (size_t)g->nodes[i].n_outs + (size_t)g->nodes[i].n_args;
    }
    gb->deps = calloc(n_deps, 1);
    if (!p->entry_value || !p->arg_grad_req || !p->arg_grad_value || !p->head_grad_value || !gb->arg_of_node ||
        !gb->aux_of_node || !gb->needs || !gb->is_head || !gb->runs || !gb->count || !gb->remaining ||
        !gb->final_grad || !gb->con || !gb->oi || !gb->dep_off || !gb->deps)
        return mxp__error_oom("program");
    for (int i = 0; i < g->n_nodes; i++) gb->arg_of_node[i] = gb->aux_of_node[i] = -1;
    for (int i = 0; i < g->n_args; i++) {
        gb->arg_of_node[g->args[i]] = i;
        p->arg_grad_req[i] = grad_req ? grad_req[i] : MXP_REQ_NULL;
        if (p->arg_grad_req[i] == MXP_REQ_INPLACE) p->arg_grad_req[i] = MXP_REQ_WRITE;
        p->arg_grad_value[i] = -1;
        gb->any_grad |= p->arg_grad_req[i] != MXP_REQ_NULL;
    }
    for (int i = 0; i < g->n_auxs; i++) gb->aux_of_node[g->auxs[i]] = i;
    for (int h = 0; h < g->n_heads; h++) {
        gb->is_head[g->heads[h]] = 1;
        p->head_grad_value[h] = -1;
    }
    for (int e = 0; e < g->n_entries; e++) gb->final_grad[e] = -1;
    return MXP_OK;
}

/* A value for entry e (kind, index as mxp__value), its shape and dtype. */
static int gb_value(grad_builder *gb, int kind, int e, int index) {
    return add_value(&gb->b, kind, e, index, &gb->shapes[e], gb->dtypes[e]);
}

/* The argument index of the variable entry e, or -1 (op output, aux). */
static int arg_of_entry(const grad_builder *gb, int e) {
    int nid = gb->g->entry_node[e];
    const mxp__inode *n = &gb->g->nodes[nid];
    return n->is_var && !n->is_aux ? gb->arg_of_node[nid] : -1;
}

/* A head whose gradient comes from outside (not a loss op's output). */
static int head_takes_grad(const grad_builder *gb, int e) {
    int nid = gb->g->entry_node[e];
    return gb->needs[e] && (gb->g->nodes[nid].is_var || !(gb->oi[nid].def->flags & MXP_OP_LOSS));
}

/* Values of every entry and the forward steps. */
static int pass_forward(grad_builder *gb) {
    const mxp__igraph *g = gb->g;
    mxp__program *p = gb->b.p;
    for (int i = 0; i < g->n_nodes; i++) {
        const mxp__inode *n = &g->nodes[i];
        for (int j = 0; j < n->n_outs; j++) {
            int e = n->entry0 + j;
            int kind = !n->is_var ? MXP_VAL_OUT : n->is_aux ? MXP_VAL_AUX : MXP_VAL_ARG;
            int idx = kind == MXP_VAL_ARG ? gb->arg_of_node[i] : kind == MXP_VAL_AUX ? gb->aux_of_node[i] : -1;
            int v = gb_value(gb, kind, e, idx);
            if (v < 0) return v;
            p->entry_value[e] = v;
            p->values[v].persistent = kind == MXP_VAL_OUT && gb->is_head[e];
        }
        if (n->is_var) continue;
        const gnode *gn = n->g;
        int rc = mxp__opinfo_open(gn->op, gn->n_attrs, (const char *const *)gn->keys, (const char *const *)gn->vals,
                                  &gb->oi[i]);
        if (rc) return mxp__error_prefix(rc, "node '%s'", gn->name);
        mxp__step *s = add_step(&gb->b, MXP_STEP_FWD, i, n->n_args, n->n_outs, n->n_aux);
        if (!s) return mxp__error_oom("program");
        for (int k = 0; k < n->n_args; k++) s->in[k] = p->entry_value[n->in[k]];
        for (int k = 0; k < n->n_aux; k++) s->aux[k] = p->entry_value[n->in[n->n_args + k]];
        for (int k = 0; k < n->n_outs; k++) s->out[k] = p->entry_value[n->entry0 + k];
        const mxp_op_def *def = gb->oi[i].def;
        for (uint32_t k = 0; k < def->n_forward_inplace; k++) {
            int f = def->forward_inplace[k].from, t = def->forward_inplace[k].to;
            if (f >= 0 && f < n->n_args && t >= 0 && t < n->n_outs && (rc = add_inplace(s, s->in[f], s->out[t])))
                return rc;
        }
        uint8_t *d = gb->deps + gb->dep_off[i];
        mxp__opdef_backward_deps(def, gb->oi[i].params, (uint32_t)n->n_args, (uint32_t)n->n_outs, d,
                                 d + n->n_outs, d + n->n_outs + n->n_args);
    }
    p->n_fwd_steps = p->n_steps;
    return MXP_OK;
}

/* Which entries need a gradient: an argument with a grad_req, and every
 * output of a differentiable node with such an input (topological order). */
static void pass_needs(grad_builder *gb) {
    const mxp__igraph *g = gb->g;
    for (int i = 0; i < g->n_args; i++)
        if (gb->b.p->arg_grad_req[i] != MXP_REQ_NULL) gb->needs[g->nodes[g->args[i]].entry0] = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const mxp__inode *n = &g->nodes[i];
        if (n->is_var) continue;
        int any = 0;
        for (int k = 0; k < n->n_args; k++) any |= gb->needs[n->in[k]];
        if (gb->oi[i].def->flags & MXP_OP_NO_GRADIENT) any = 0;
        for (int k = 0; k < n->n_outs; k++) gb->needs[n->entry0 + k] = (uint8_t)any;
    }
}

/* Contributions per entry (head gradients first), and which nodes run
 * backward. */
static void pass_count(grad_builder *gb) {
    const mxp__igraph *g = gb->g;
    for (int h = 0; h < g->n_heads; h++)
        if (head_takes_grad(gb, g->heads[h])) gb->count[g->heads[h]]++;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const mxp__inode *n = &g->nodes[i];
        if (n->is_var) continue;
        const mxp_op_def *def = gb->oi[i].def;
        int in_need = 0, out_has = 0;
        for (int k = 0; k < n->n_args; k++) in_need |= gb->needs[n->in[k]];
        for (int k = 0; k < n->n_outs; k++) out_has |= gb->count[n->entry0 + k] > 0;
        gb->runs[i] = !(def->flags & MXP_OP_NO_GRADIENT) && in_need && (out_has || (def->flags & MXP_OP_LOSS));
        if (!gb->runs[i]) continue;
        for (int k = 0; k < n->n_args; k++)
            if (gb->needs[n->in[k]]) gb->count[n->in[k]]++;
    }
    memcpy(gb->remaining, gb->count, (size_t)g->n_entries * sizeof *gb->count);
}

/* All contributions to entry e are in: one -> it is the gradient (written
 * straight into an argument's gradient when it was that); several -> a SUM
 * step into a fresh value, or into the argument's gradient with its req. */
static int close_entry(grad_builder *gb, int e) {
    mxp__program *p = gb->b.p;
    const contrib *c = &gb->con[e];
    int arg = arg_of_entry(gb, e);
    if (c->n == 0 || (arg >= 0 && c->n == 1 && c->v[0] == p->arg_grad_value[arg])) return MXP_OK;
    if (c->n == 1 && arg < 0) {
        gb->final_grad[e] = c->v[0];
        return MXP_OK;
    }
    mxp__step *s = add_step(&gb->b, MXP_STEP_SUM, -1, c->n, 1, 0);
    if (!s) return mxp__error_oom("program");
    int sid = p->n_steps - 1;
    s->entry = e;
    for (int k = 0; k < c->n; k++) s->in[k] = c->v[k];
    int o = arg >= 0 ? gb_value(gb, MXP_VAL_ARG_GRAD, e, arg) : gb_value(gb, MXP_VAL_GRAD, e, -1);
    if (o < 0) return o;
    s = &p->steps[sid];
    if (arg >= 0) p->arg_grad_value[arg] = o;
    s->req[0] = arg >= 0 ? p->arg_grad_req[arg] : MXP_REQ_WRITE;
    s->out[0] = o;
    gb->final_grad[e] = o;
    return add_inplace(s, s->in[0], o);
}

static int shape_same(const mxp_shape *a, const mxp_shape *b) {
    if (a->ndim != b->ndim) return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->dims[k] != b->dims[k]) return 0;
    return 1;
}

/* An MXP_OP_IDENTITY_GRAD node (elemwise_add, add_n) whose output has a
 * gradient value and whose inputs needing one are op outputs of the
 * output's shape and dtype: that value becomes each input's contribution
 * as is, with no step (a residual block's add no longer copies its
 * out_grad to both branches).  Arguments keep the step, which writes
 * their gradient arrays with the user's req.  1 when handled. */
static int pass_identity(grad_builder *gb, int i, int *rc) {
    const mxp__igraph *g = gb->g;
    const mxp__inode *n = &g->nodes[i];
    const mxp_op_def *def = gb->oi[i].def;
    *rc = MXP_OK;
    if (!(def->flags & MXP_OP_IDENTITY_GRAD) || n->n_outs != 1 || gb->final_grad[n->entry0] < 0) return 0;
    int og = gb->final_grad[n->entry0];
    for (int k = 0; k < n->n_args; k++) {
        int e = n->in[k];
        if (!gb->needs[e]) continue;
        if (arg_of_entry(gb, e) >= 0 || gb->dtypes[e] != gb->dtypes[n->entry0] ||
            !shape_same(&gb->shapes[e], &gb->shapes[n->entry0]))
            return 0;
    }
    for (int k = 0; k < n->n_args && !*rc; k++)
        if (gb->needs[n->in[k]]) *rc = contrib_add(&gb->con[n->in[k]], og);
    for (int k = 0; k < n->n_args && !*rc; k++) {
        int e = n->in[k];
        if (gb->needs[e] && --gb->remaining[e] == 0) *rc = close_entry(gb, e);
    }
    return 1;
}

/* One node's BWD step: what it reads, a fresh gradient value per input
 * that needs one, and the entries whose last contribution it writes. */
static int emit_backward(grad_builder *gb, int i) {
    const mxp__igraph *g = gb->g;
    mxp__program *p = gb->b.p;
    const mxp__inode *n = &g->nodes[i];
    const mxp_op_def *def = gb->oi[i].def;
    int prc;
    if (mxp__env_bool("MXP_EXEC_IDENTITY_GRAD", 1) && pass_identity(gb, i, &prc)) return prc;
    const uint8_t *d_og = gb->deps + gb->dep_off[i], *d_in = d_og + n->n_outs, *d_out = d_in + n->n_args;
    if (!add_step(&gb->b, MXP_STEP_BWD, i, n->n_args, n->n_outs, n->n_aux)) return mxp__error_oom("program");
    int sid = p->n_steps - 1;
    for (int k = 0; k < n->n_outs; k++) {
        int e = n->entry0 + k;
        if (!d_og[k]) continue;
        if (gb->final_grad[e] >= 0) {
            p->steps[sid].og[k] = gb->final_grad[e];
        } else if (k < n->n_vis && !(def->flags & MXP_OP_LOSS)) {
            int z = gb_value(gb, MXP_VAL_ZERO, e, -1);
            if (z < 0) return z;
            p->steps[sid].og[k] = z;
        }
    }
    mxp__step *s = &p->steps[sid];
    for (int k = 0; k < n->n_args; k++)
        if (d_in[k]) s->in[k] = p->entry_value[n->in[k]];
    for (int k = 0; k < n->n_outs; k++)
        if (d_out[k]) s->out[k] = p->entry_value[n->entry0 + k];
    for (int k = 0; k < n->n_aux; k++) s->aux[k] = p->entry_value[n->in[n->n_args + k]];
    for (int k = 0; k < n->n_args; k++) {
        int e = n->in[k];
        if (!gb->needs[e]) continue;
        int arg = arg_of_entry(gb, e);
        int direct = arg >= 0 && gb->count[e] == 1;
        int v = direct ? gb_value(gb, MXP_VAL_ARG_GRAD, e, arg) : gb_value(gb, MXP_VAL_GRAD, e, -1);
        if (v < 0) return v;
        if (direct) p->arg_grad_value[arg] = v;
        p->steps[sid].req[k] = direct ? p->arg_grad_req[arg] : MXP_REQ_WRITE;
        p->steps[sid].ig[k] = v;
        int rc = contrib_add(&gb->con[e], v);
        if (rc) return rc;
    }
    s = &p->steps[sid];
    for (uint32_t k = 0; k < def->n_backward_inplace; k++) {
        int f = def->backward_inplace[k].from, t = def->backward_inplace[k].to;
        int rc = f >= 0 && f < n->n_outs && t >= 0 && t < n->n_args ? add_inplace(s, s->og[f], s->ig[t]) : MXP_OK;
        if (rc) return rc;
    }
    for (int k = 0; k < n->n_args; k++) {
        int e = n->in[k];
        if (!gb->needs[e] || --gb->remaining[e] != 0) continue;
        int rc = close_entry(gb, e);
        if (rc) return rc;
    }
    return MXP_OK;
}

/* Head gradients, then the backward steps in reverse topological order. */
static int pass_emit(grad_builder *gb) {
    const mxp__igraph *g = gb->g;
    for (int h = 0; h < g->n_heads; h++) {
        int e = g->heads[h];
        if (!head_takes_grad(gb, e)) continue;
        int v = gb_value(gb, MXP_VAL_HEAD_GRAD, e, h);
        if (v < 0) return v;
        gb->b.p->head_grad_value[h] = v;
        int rc = contrib_add(&gb->con[e], v);
        if (!rc && --gb->remaining[e] == 0) rc = close_entry(gb, e);
        if (rc) return rc;
    }
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (g->nodes[i].is_var || !gb->runs[i]) continue;
        int rc = emit_backward(gb, i);
        if (rc) return rc;
    }
    return MXP_OK;
}

int mxp__program_build(const mxp__igraph *g, const mxp_shape *shapes, const int32_t *dtypes, const int *grad_req,
                       mxp__program **out) {
    *out = NULL;
    grad_builder gb;
    int rc = gb_init(&gb, g, shapes, dtypes, grad_req);
    if (!rc) rc = pass_forward(&gb);
    if (!rc && gb.any_grad) {
        pass_needs(&gb);
        pass_count(&gb);
        rc = pass_emit(&gb);
    }
    mxp__program *p = gb.b.p;
    gb_free(&gb);
    if (rc) {
        mxp__program_free(p);
        return rc;
    }
    *out = p;
    return MXP_OK;
}
