/* indexed.c — the indexed graph every pass works on: nodes numbered in
 * topological order (DFS post-order from the heads, inputs in order, as
 * nnvm's IndexedGraph and the JSON writer), entries numbered by
 * node_row_ptr (each node's outputs consecutive, all outputs counted,
 * hidden ones too), argument and aux-state variables in first-visit order
 * (MXNet's list_arguments / list_auxiliary_states order).
 * A variable is an aux state when some op uses it in an aux slot.
 * Building completes uncomposed op nodes (inputs become variables).
 * The traversal is iterative, so deep chains do not exhaust the stack. */
#include "graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pointer -> index map (open addressing). */
typedef struct pmap {
    const void **k;
    int *v;
    size_t cap;
} pmap;

static size_t phash(const void *p, size_t cap) { return ((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull & (cap - 1); }

static int pmap_get(const pmap *m, const void *p) {
    for (size_t i = phash(p, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->k[i]) return -1;
        if (m->k[i] == p) return m->v[i];
    }
}

static void pmap_put(pmap *m, const void *p, int v) {
    size_t i = phash(p, m->cap);
    while (m->k[i] && m->k[i] != p) i = (i + 1) & (m->cap - 1);
    m->k[i] = p;
    m->v[i] = v;
}

static int pmap_grow(pmap *m, size_t need) {
    if (need * 2 < m->cap) return MXP_OK;
    size_t cap = m->cap ? m->cap * 2 : 64;
    while (cap < need * 2 + 2) cap *= 2;
    pmap n = {calloc(cap, sizeof *n.k), calloc(cap, sizeof *n.v), cap};
    if (!n.k || !n.v) {
        free(n.k);
        free(n.v);
        return mxp__error_oom("graph index");
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->k[i]) pmap_put(&n, m->k[i], m->v[i]);
    free(m->k);
    free(m->v);
    *m = n;
    return MXP_OK;
}

void mxp__igraph_free(mxp__igraph *g) {
    if (!g) return;
    /* n_nodes is counted before nodes is allocated: a failed build may
     * have nodes NULL with n_nodes > 0. */
    for (int i = 0; g->nodes && i < g->n_nodes; i++) free(g->nodes[i].in);
    free(g->nodes);
    free(g->entry_node);
    free(g->heads);
    free(g->args);
    free(g->auxs);
    mxp_symbol_release(g->sym);
    free(g);
}

int mxp__igraph_build(mxp_symbol *sym, mxp__igraph **out) {
    *out = NULL;
    mxp__igraph *g = calloc(1, sizeof *g);
    if (!g) return mxp__error_oom("graph index");
    g->sym = mxp_symbol_retain(sym);
    pmap m = {0};
    int cap = 64, rc = MXP_OK;
    gnode **order = malloc((size_t)cap * sizeof *order);
    /* Explicit DFS stack of (node, next input). */
    int scap = 64, sp = 0;
    struct frame {
        gnode *n;
        int next;
    } *st = malloc((size_t)scap * sizeof *st);
    if (!order || !st) rc = mxp__error_oom("graph index");
    if (!rc) rc = pmap_grow(&m, 16);
    /* Visited marks: index -2 = on stack, >= 0 = done. */
    for (int h = 0; h < sym->n_out && !rc; h++) {
        gnode *root = sym->outs[h].node;
        if (pmap_get(&m, root) != -1) continue;
        if ((rc = pmap_grow(&m, (size_t)g->n_nodes + 2))) break;
        st[sp++] = (struct frame){root, 0};
        pmap_put(&m, root, -2);
        while (sp && !rc) {
            struct frame *f = &st[sp - 1];
            if (f->next == 0 && (rc = mxp__gnode_complete(f->n))) break;
            if (f->next < f->n->n_inputs) {
                gnode *c = f->n->inputs[f->next++].node;
                int v = pmap_get(&m, c);
                if (v == -2) {
                    rc = mxp__error(MXP_EINVAL, "graph: cycle through node '%s'", c->name);
                    break;
                }
                if (v >= 0) continue;
                if ((rc = pmap_grow(&m, (size_t)g->n_nodes + (size_t)sp + 2))) break;
                pmap_put(&m, c, -2);
                if (sp == scap) {
                    struct frame *s2 = realloc(st, (size_t)(scap *= 2) * sizeof *st);
                    if (!s2) {
                        rc = mxp__error_oom("graph index");
                        break;
                    }
                    st = s2;
                }
                st[sp++] = (struct frame){c, 0};
                continue;
            }
            if (g->n_nodes == cap) {
                gnode **o2 = realloc(order, (size_t)(cap *= 2) * sizeof *order);
                if (!o2) {
                    rc = mxp__error_oom("graph index");
                    break;
                }
                order = o2;
            }
            pmap_put(&m, f->n, g->n_nodes);
            order[g->n_nodes++] = f->n;
            sp--;
        }
    }
    free(st);
    if (!rc) {
        g->nodes = calloc((size_t)g->n_nodes + 1, sizeof *g->nodes);
        if (!g->nodes) rc = mxp__error_oom("graph index");
    }
    int ne = 0;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        mxp__inode *in = &g->nodes[i];
        gnode *n = order[i];
        in->g = n;
        in->is_var = n->op == NULL;
        in->n_args = in->is_var ? 0 : n->n_args;
        in->n_aux = in->is_var ? 0 : n->n_aux;
        in->n_outs = in->is_var ? 1 : n->n_outs;
        in->n_vis = in->is_var ? 1 : n->n_vis;
        in->entry0 = ne;
        ne += in->n_outs;
        if (!in->is_var && n->n_inputs != n->n_args + n->n_aux)
            rc = mxp__error(MXP_EINVAL, "node '%s' (op '%s'): %d inputs, the op takes %d", n->name, n->op, n->n_inputs,
                            n->n_args + n->n_aux);
        if (rc || in->is_var) continue;
        in->in = calloc((size_t)n->n_inputs + 1, sizeof *in->in);
        if (!in->in) rc = mxp__error_oom("graph index");
    }
    g->n_entries = ne;
    if (!rc) {
        g->entry_node = calloc((size_t)ne + 1, sizeof *g->entry_node);
        g->heads = calloc((size_t)sym->n_out + 1, sizeof *g->heads);
        g->args = calloc((size_t)g->n_nodes + 1, sizeof *g->args);
        g->auxs = calloc((size_t)g->n_nodes + 1, sizeof *g->auxs);
        if (!g->entry_node || !g->heads || !g->args || !g->auxs) rc = mxp__error_oom("graph index");
    }
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        mxp__inode *in = &g->nodes[i];
        for (int j = 0; j < in->n_outs; j++) g->entry_node[in->entry0 + j] = i;
        for (int j = 0; j < in->g->n_inputs && !in->is_var; j++) {
            const gentry *e = &in->g->inputs[j];
            int src = pmap_get(&m, e->node);
            MXP_ASSERT(src >= 0 && src < i);
            if (e->index < 0 || e->index >= g->nodes[src].n_outs) {
                rc = mxp__error(MXP_EINVAL, "node '%s': input %d refers to output %d of '%s', which has %d", in->g->name,
                                j, e->index, e->node->name, g->nodes[src].n_outs);
                break;
            }
            in->in[j] = g->nodes[src].entry0 + e->index;
            /* An aux slot, or an input the op writes (MXNet lists both as
             * auxiliary states). */
            int aux_slot = j >= in->n_args || (in->g->mutates && in->g->mutates[j]);
            if (aux_slot && g->nodes[src].is_var) g->nodes[src].is_aux = 1;
        }
    }
    for (int h = 0; h < sym->n_out && !rc; h++) {
        int src = pmap_get(&m, sym->outs[h].node);
        if (sym->outs[h].index < 0 || sym->outs[h].index >= g->nodes[src].n_outs)
            rc = mxp__error(MXP_EINVAL, "symbol: output %d refers to a missing output of '%s'", h,
                            sym->outs[h].node->name);
        else g->heads[h] = g->nodes[src].entry0 + sym->outs[h].index;
    }
    g->n_heads = sym->n_out;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        if (!g->nodes[i].is_var) continue;
        if (g->nodes[i].is_aux) g->auxs[g->n_auxs++] = i;
        else g->args[g->n_args++] = i;
    }
    free(order);
    free(m.k);
    free(m.v);
    if (rc) {
        mxp__igraph_free(g);
        return rc;
    }
    *out = g;
    return MXP_OK;
}

void mxp__igraph_entry_name(const mxp__igraph *g, int e, char *buf, size_t cap) {
    const mxp__inode *n = &g->nodes[g->entry_node[e]];
    gentry ge = {n->g, e - n->entry0, 0};
    mxp__entry_name(&ge, buf, cap);
}
