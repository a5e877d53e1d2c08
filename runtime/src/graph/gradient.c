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
 * Visible outputs backward needs but no gradient reaches read a ZERO value;
 * hidden outputs (BatchNorm's mean/var) get none.
 * Two passes: the first counts contributions per entry in reverse
 * topological order (exact, since whether a node runs depends only on its
 * consumers, which come later), the second emits the steps. */
#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

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

/* Backward dependencies of one node (plugin/opdef.h, as the node runtime's). */
static void bwd_deps(const mxp__opinfo *oi, const mxp__inode *n, uint8_t *og, uint8_t *in, uint8_t *out) {
    mxp__opdef_backward_deps(oi->def, oi->params, (uint32_t)n->n_args, (uint32_t)n->n_outs, og, in, out);
}

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

int mxp__program_build(const mxp__igraph *g, const mxp_shape *shapes, const int32_t *dtypes, const int *grad_req,
                       mxp__program **out) {
    *out = NULL;
    builder b = {0};
    mxp__program *p = b.p = calloc(1, sizeof *p);
    if (!p) return mxp__error_oom("program");
    int ne = g->n_entries, nn = g->n_nodes, rc = MXP_OK;
    p->entry_value = malloc(((size_t)ne + 1) * sizeof(int));
    p->arg_grad_req = calloc((size_t)g->n_args + 1, sizeof(int));
    p->arg_grad_value = malloc(((size_t)g->n_args + 1) * sizeof(int));
    p->head_grad_value = malloc(((size_t)g->n_heads + 1) * sizeof(int));
    int *arg_of_node = malloc(((size_t)nn + 1) * sizeof(int)), *aux_of_node = malloc(((size_t)nn + 1) * sizeof(int));
    uint8_t *needs = calloc((size_t)ne + 1, 1), *is_head = calloc((size_t)ne + 1, 1), *runs = calloc((size_t)nn + 1, 1);
    int *count = calloc((size_t)ne + 1, sizeof(int)), *remaining = calloc((size_t)ne + 1, sizeof(int));
    int *final_grad = malloc(((size_t)ne + 1) * sizeof(int));
    contrib *con = calloc((size_t)ne + 1, sizeof *con);
    uint8_t *deps = malloc(((size_t)nn + 1) * 3 * 1024);
    mxp__opinfo *oi = calloc((size_t)nn + 1, sizeof *oi);
    if (!p->entry_value || !p->arg_grad_req || !p->arg_grad_value || !p->head_grad_value || !arg_of_node ||
        !aux_of_node || !needs || !is_head || !runs || !count || !remaining || !final_grad || !con || !deps || !oi)
        rc = mxp__error_oom("program");
    for (int i = 0; i < nn && !rc; i++) arg_of_node[i] = aux_of_node[i] = -1;
    for (int i = 0; i < g->n_args && !rc; i++) {
        arg_of_node[g->args[i]] = i;
        p->arg_grad_req[i] = grad_req ? grad_req[i] : MXP_REQ_NULL;
        if (p->arg_grad_req[i] == MXP_REQ_INPLACE) p->arg_grad_req[i] = MXP_REQ_WRITE;
        p->arg_grad_value[i] = -1;
    }
    for (int i = 0; i < g->n_auxs && !rc; i++) aux_of_node[g->auxs[i]] = i;
    for (int h = 0; h < g->n_heads && !rc; h++) {
        is_head[g->heads[h]] = 1;
        p->head_grad_value[h] = -1;
    }
    for (int e = 0; e < ne && !rc; e++) final_grad[e] = -1;

    /* Forward values and steps. */
    for (int i = 0; i < nn && !rc; i++) {
        const mxp__inode *n = &g->nodes[i];
        for (int j = 0; j < n->n_outs && rc >= 0; j++) {
            int e = n->entry0 + j;
            int kind = !n->is_var ? MXP_VAL_OUT : n->is_aux ? MXP_VAL_AUX : MXP_VAL_ARG;
            int idx = kind == MXP_VAL_ARG ? arg_of_node[i] : kind == MXP_VAL_AUX ? aux_of_node[i] : -1;
            rc = add_value(&b, kind, e, idx, &shapes[e], dtypes[e]);
            if (rc >= 0) {
                p->entry_value[e] = rc;
                p->values[rc].persistent = kind == MXP_VAL_OUT && is_head[e];
                rc = MXP_OK;
            }
        }
        if (rc || n->is_var) continue;
        const gnode *gn = n->g;
        rc = mxp__opinfo_open(gn->op, gn->n_attrs, (const char *const *)gn->keys, (const char *const *)gn->vals, &oi[i]);
        if (rc) {
            rc = mxp__error_prefix(rc, "node '%s'", gn->name);
            break;
        }
        if (n->n_outs > 1024 || n->n_args > 1024) {
            rc = mxp__error(MXP_EINVAL, "node '%s': too many inputs or outputs", gn->name);
            break;
        }
        mxp__step *s = add_step(&b, MXP_STEP_FWD, i, n->n_args, n->n_outs, n->n_aux);
        if (!s) {
            rc = mxp__error_oom("program");
            break;
        }
        for (int k = 0; k < n->n_args; k++) s->in[k] = p->entry_value[n->in[k]];
        for (int k = 0; k < n->n_aux; k++) s->aux[k] = p->entry_value[n->in[n->n_args + k]];
        for (int k = 0; k < n->n_outs; k++) s->out[k] = p->entry_value[n->entry0 + k];
        const mxp_op_def *def = oi[i].def;
        for (uint32_t k = 0; k < def->n_forward_inplace && !rc; k++) {
            int f = def->forward_inplace[k].from, t = def->forward_inplace[k].to;
            if (f >= 0 && f < n->n_args && t >= 0 && t < n->n_outs) rc = add_inplace(s, s->in[f], s->out[t]);
        }
        uint8_t *d = deps + (size_t)i * 3 * 1024;
        bwd_deps(&oi[i], n, d, d + 1024, d + 2048);
    }
    /* Which entries need a gradient (topological order). */
    if (!rc) {
        for (int i = 0; i < g->n_args; i++)
            if (p->arg_grad_req[i] != MXP_REQ_NULL) needs[g->nodes[g->args[i]].entry0] = 1;
        for (int i = 0; i < nn; i++) {
            const mxp__inode *n = &g->nodes[i];
            if (n->is_var) continue;
            int any = 0;
            for (int k = 0; k < n->n_args; k++) any |= needs[n->in[k]];
            if (oi[i].def->flags & MXP_OP_NO_GRADIENT) any = 0;
            for (int k = 0; k < n->n_outs; k++) needs[n->entry0 + k] = (uint8_t)any;
        }
    }
    p->n_fwd_steps = p->n_steps;
    int any_grad = 0;
    for (int i = 0; !rc && i < g->n_args; i++) any_grad |= p->arg_grad_req[i] != MXP_REQ_NULL;

    /* Pass 1: count contributions (head gradients first). */
    for (int h = 0; h < g->n_heads && !rc && any_grad; h++) {
        int e = g->heads[h], nid = g->entry_node[e];
        if (!needs[e]) continue;
        if (!g->nodes[nid].is_var && (oi[nid].def->flags & MXP_OP_LOSS)) continue;
        count[e]++;
    }
    for (int i = nn - 1; i >= 0 && !rc && any_grad; i--) {
        const mxp__inode *n = &g->nodes[i];
        if (n->is_var) continue;
        const mxp_op_def *def = oi[i].def;
        int in_need = 0, out_has = 0;
        for (int k = 0; k < n->n_args; k++) in_need |= needs[n->in[k]];
        for (int k = 0; k < n->n_outs; k++) out_has |= count[n->entry0 + k] > 0;
        runs[i] = !(def->flags & MXP_OP_NO_GRADIENT) && in_need && (out_has || (def->flags & MXP_OP_LOSS));
        if (!runs[i]) continue;
        for (int k = 0; k < n->n_args; k++)
            if (needs[n->in[k]]) count[n->in[k]]++;
    }
    for (int e = 0; e < ne && !rc; e++) remaining[e] = count[e];

    /* Pass 2: emit.  A helper closes an entry once all its contributions
     * are in: single -> that value; several -> a SUM step. */
#define CLOSE_ENTRY(E)                                                                                 \
    do {                                                                                              \
        int e_ = (E), nid_ = g->entry_node[e_];                                                       \
        const mxp__inode *vn_ = &g->nodes[nid_];                                                      \
        int arg_ = vn_->is_var && !vn_->is_aux ? arg_of_node[nid_] : -1;                              \
        int direct_ = arg_ >= 0 && con[e_].n == 1 && con[e_].v[0] == p->arg_grad_value[arg_];          \
        if (direct_ || con[e_].n == 0) break;                                                         \
        if (con[e_].n == 1 && arg_ < 0) {                                                              \
            final_grad[e_] = con[e_].v[0];                                                            \
            break;                                                                                    \
        }                                                                                             \
        mxp__step *s_ = add_step(&b, MXP_STEP_SUM, -1, con[e_].n, 1, 0);                              \
        if (!s_) {                                                                                    \
            rc = mxp__error_oom("program");                                                           \
            break;                                                                                    \
        }                                                                                             \
        s_->entry = e_;                                                                               \
        for (int k_ = 0; k_ < con[e_].n; k_++) s_->in[k_] = con[e_].v[k_];                            \
        int o_;                                                                                       \
        if (arg_ >= 0) {                                                                              \
            o_ = add_value(&b, MXP_VAL_ARG_GRAD, e_, arg_, &shapes[e_], dtypes[e_]);                 \
            if (o_ >= 0) p->arg_grad_value[arg_] = o_;                                                \
            s_ = &p->steps[p->n_steps - 1];                                                           \
            s_->req[0] = p->arg_grad_req[arg_];                                                       \
        } else {                                                                                      \
            o_ = add_value(&b, MXP_VAL_GRAD, e_, -1, &shapes[e_], dtypes[e_]);                       \
            s_ = &p->steps[p->n_steps - 1];                                                           \
            s_->req[0] = MXP_REQ_WRITE;                                                               \
        }                                                                                             \
        if (o_ < 0) {                                                                                 \
            rc = o_;                                                                                  \
            break;                                                                                    \
        }                                                                                             \
        s_->out[0] = o_;                                                                              \
        final_grad[e_] = o_;                                                                          \
        rc = add_inplace(s_, s_->in[0], o_);                                                          \
    } while (0)

    for (int h = 0; h < g->n_heads && !rc && any_grad; h++) {
        int e = g->heads[h], nid = g->entry_node[e];
        if (!needs[e]) continue;
        if (!g->nodes[nid].is_var && (oi[nid].def->flags & MXP_OP_LOSS)) continue;
        int v = add_value(&b, MXP_VAL_HEAD_GRAD, e, h, &shapes[e], dtypes[e]);
        if (v < 0) {
            rc = v;
            break;
        }
        p->head_grad_value[h] = v;
        if ((rc = contrib_add(&con[e], v))) break;
        if (--remaining[e] == 0) CLOSE_ENTRY(e);
    }
    for (int i = nn - 1; i >= 0 && !rc && any_grad; i--) {
        const mxp__inode *n = &g->nodes[i];
        if (n->is_var || !runs[i]) continue;
        const mxp_op_def *def = oi[i].def;
        const uint8_t *d = deps + (size_t)i * 3 * 1024;
        mxp__step *s = add_step(&b, MXP_STEP_BWD, i, n->n_args, n->n_outs, n->n_aux);
        if (!s) {
            rc = mxp__error_oom("program");
            break;
        }
        int sid = p->n_steps - 1;
        for (int k = 0; k < n->n_outs && !rc; k++) {
            int e = n->entry0 + k;
            if (!d[k]) continue;
            if (final_grad[e] >= 0) p->steps[sid].og[k] = final_grad[e];
            else if (k < n->n_vis && !(def->flags & MXP_OP_LOSS)) {
                int z = add_value(&b, MXP_VAL_ZERO, e, -1, &shapes[e], dtypes[e]);
                if (z < 0) rc = z;
                else p->steps[sid].og[k] = z;
            }
        }
        s = &p->steps[sid];
        for (int k = 0; k < n->n_args; k++)
            if (d[1024 + k]) s->in[k] = p->entry_value[n->in[k]];
        for (int k = 0; k < n->n_outs; k++)
            if (d[2048 + k]) s->out[k] = p->entry_value[n->entry0 + k];
        for (int k = 0; k < n->n_aux; k++) s->aux[k] = p->entry_value[n->in[n->n_args + k]];
        for (int k = 0; k < n->n_args && !rc; k++) {
            int e = n->in[k];
            if (!needs[e]) continue;
            int nid = g->entry_node[e];
            int arg = g->nodes[nid].is_var && !g->nodes[nid].is_aux ? arg_of_node[nid] : -1;
            int v;
            if (arg >= 0 && count[e] == 1) {
                v = add_value(&b, MXP_VAL_ARG_GRAD, e, arg, &shapes[e], dtypes[e]);
                if (v >= 0) p->arg_grad_value[arg] = v;
                if (v >= 0) p->steps[sid].req[k] = p->arg_grad_req[arg];
            } else {
                v = add_value(&b, MXP_VAL_GRAD, e, -1, &shapes[e], dtypes[e]);
                if (v >= 0) p->steps[sid].req[k] = MXP_REQ_WRITE;
            }
            if (v < 0) {
                rc = v;
                break;
            }
            p->steps[sid].ig[k] = v;
            rc = contrib_add(&con[e], v);
        }
        s = &p->steps[sid];
        for (uint32_t k = 0; k < def->n_backward_inplace && !rc; k++) {
            int f = def->backward_inplace[k].from, t = def->backward_inplace[k].to;
            if (f >= 0 && f < n->n_outs && t >= 0 && t < n->n_args) rc = add_inplace(s, s->og[f], s->ig[t]);
        }
        /* Entries whose last contribution this was. */
        for (int k = 0; k < n->n_args && !rc; k++) {
            int e = n->in[k];
            if (!needs[e]) continue;
            if (--remaining[e] == 0) CLOSE_ENTRY(e);
        }
    }
#undef CLOSE_ENTRY
    /* Any of these may be NULL after an allocation failure above. */
    for (int i = 0; oi && i < nn; i++) mxp__opinfo_close(&oi[i]);
    for (int e = 0; con && e < ne; e++) free(con[e].v);
    free(oi);
    free(con);
    free(deps);
    free(final_grad);
    free(count);
    free(remaining);
    free(runs);
    free(is_head);
    free(needs);
    free(arg_of_node);
    free(aux_of_node);
    if (rc) {
        mxp__program_free(p);
        return rc;
    }
    *out = p;
    return MXP_OK;
}
