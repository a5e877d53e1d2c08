/* fuse.c — the executor's fusion pass: before binding, three patterns of a
 * CNN become one op each in a rewritten symbol the executor binds instead
 * of the user's:
 *   relu(BatchNorm(x))                   -> _mxp_BatchNormReLU
 *   relu(elemwise_add(BatchNorm(x), r))  -> _mxp_BatchNormAddReLU (x, r)
 *   Pooling(relu(x)), max, 2-D           -> _mxp_ReLUPooling (x)
 * (ops-nn batchnorm.c, pooling.c).  These ops are memory-bound on a CNN (ResNet-20:
 * passes over 1-4 MB tensors); fused, the ReLU and the add cost no pass
 * of their own (docs/architecture.md, *Fusion*).
 *
 * What it keeps: the fused node has the BatchNorm's params and inputs
 * (the residual inserted after its arguments), so list_arguments /
 * list_auxiliary_states and binding positions do not change — the
 * residual pattern is fused only when r's node comes before the
 * BatchNorm in topological order, so the variables are visited in the
 * same order — and the ReLU's name, so the output entry keeps the ReLU's
 * name ("relu0_output") for heads and the monitor.  _mxp_ReLUPooling is
 * the Pooling node (its name, params and output) reading the ReLU's input;
 * the ReLU's output must have no other reader and not be a head, and the
 * ReLU must not be fused with a BatchNorm itself.
 * What changes: the BatchNorm's (and the add's) own output is no longer a
 * value (the monitor does not see it; mxp_executor_set_impl on their node
 * names finds no node).  Fusion needs every fused output but the ReLU's
 * to have no other reader and not be a head, output_mean_var off, and a
 * CPU device (the fused ops have CPU implementations only).
 * Nor does it fuse when the fused op is not registered, BatchNorm or
 * Activation comes from another pack, or BatchNorm, Activation or
 * elemwise_add has a CPU implementation added by another pack or a policy
 * naming an implementation (fusion_allowed).
 * MXP_EXEC_FUSE=0 binds the user's graph unchanged.
 *
 * The user's symbol is never modified: unchanged nodes are shared (a
 * retained reference), a node is copied only when one of its inputs was
 * rewritten. */
#include "executor/fuse.h"
#include "base/env.h"

#include <mxplug/registry.h>

#include <stdlib.h>
#include <string.h>

static const char FUSED_OP[] = "_mxp_BatchNormReLU", FUSED_ADD_OP[] = "_mxp_BatchNormAddReLU";
static const char POOL_OP[] = "_mxp_ReLUPooling";

static int is_op(const gnode *n, const char *op) { return n->op && !strcmp(n->op, op); }

/* May the fused op stand in for ops `parts`?  Only when it is registered,
 * the first n_own parts are defined by its pack, every part's CPU
 * implementations come from the part's own defining pack (no other pack
 * adds one), and no policy names an implementation of a part
 * (`--impl BatchNorm=mine`, MXP_IMPL_Activation=...).  A pack of the
 * user's that defines or overrides BatchNorm, or a chosen impl, keeps the
 * user's graph as is rather than being bypassed by ours. */
static int fusion_allowed(const char *fused, const char *const *parts, int n_parts, int n_own) {
    const mxp_op *f = mxp_op_find(fused);
    const char *pack = f ? mxp_op_pack(f) : NULL;
    if (!pack) return 0;
    for (int i = 0; i < n_parts; i++) {
        const mxp_op *op = mxp_op_find(parts[i]);
        const char *policy = NULL, *source = NULL, *own = op ? mxp_op_pack(op) : NULL;
        if (!own || (i < n_own && strcmp(own, pack))) return 0;
        if (mxp_op_policy(parts[i], &policy, &source) || (strcmp(policy, "auto") && strcmp(policy, "tune"))) return 0;
        for (int k = 0, n = mxp_op_impl_count(op); k < n; k++) {
            const char *dev = mxp_op_impl_device(op, k), *ip = mxp_op_impl_pack(op, k);
            if (dev && !strcmp(dev, "cpu") && (!ip || strcmp(ip, own))) return 0;
        }
    }
    return 1;
}

static int attr_is(const gnode *n, const char *key, const char *val) {
    const char *v = mxp__gnode_attr(n, key);
    return v && !strcmp(v, val);
}

static int attr_true(const gnode *n, const char *key) {
    const char *v = mxp__gnode_attr(n, key);
    return v && (!strcmp(v, "1") || !strcmp(v, "True") || !strcmp(v, "true"));
}

/* BatchNorm node b of g whose output entry e is read once and whose
 * hidden outputs are unread; else -1. */
static int lone_bn(const mxp__igraph *g, const int *uses, int e) {
    int b = g->entry_node[e];
    const mxp__inode *bn = &g->nodes[b];
    if (bn->is_var || !is_op(bn->g, "BatchNorm") || e != bn->entry0 || attr_true(bn->g, "output_mean_var")) return -1;
    if (uses[e] != 1) return -1;
    for (int k = 1; k < bn->n_outs; k++)
        if (uses[bn->entry0 + k]) return -1;
    return b;
}

/* What node r (an Activation relu) fuses with: f->bn the BatchNorm node,
 * f->addend the residual entry (-1 for BatchNorm + ReLU).  0: nothing.
 * For a Pooling node (f->pool): f->bn is the ReLU whose input it takes. */
typedef struct fusion {
    int bn, addend, pool;
} fusion;

static int fusable(const mxp__igraph *g, const int *uses, int r, fusion *f) {
    const mxp__inode *rn = &g->nodes[r];
    if (rn->is_var || !is_op(rn->g, "Activation") || !attr_is(rn->g, "act_type", "relu") || rn->n_args != 1) return 0;
    int e = rn->in[0], a = g->entry_node[e];
    if ((f->bn = lone_bn(g, uses, e)) >= 0) {
        f->addend = -1;
        return 1;
    }
    /* relu(elemwise_add(bn, addend)): the addend's node must come before
     * the BatchNorm in topological order, so the fused node (inputs data,
     * gamma, beta, addend, aux) visits the variables in the same order
     * as the add did (bn's subtree, then the addend's, already visited) */
    const mxp__inode *an = &g->nodes[a];
    if (an->is_var || !is_op(an->g, "elemwise_add") || an->n_args != 2 || uses[e] != 1) return 0;
    if ((f->bn = lone_bn(g, uses, an->in[0])) < 0) return 0;
    f->addend = an->in[1];
    return g->entry_node[f->addend] < f->bn;
}

/* Pooling node p (max, a 2-D kernel, channel-first) reading only the
 * output of an unfused Activation relu that nothing else reads: that
 * ReLU's node, else -1.  fu: the fusions of the nodes before p. */
static int relu_pool(const mxp__igraph *g, const int *uses, const fusion *fu, int p) {
    const mxp__inode *pn = &g->nodes[p];
    if (pn->is_var || !is_op(pn->g, "Pooling") || pn->n_args != 1 || mxp__gnode_attr(pn->g, "__impl__")) return -1;
    const char *type = mxp__gnode_attr(pn->g, "pool_type"), *kernel = mxp__gnode_attr(pn->g, "kernel");
    const char *layout = mxp__gnode_attr(pn->g, "layout");
    if ((type && strcmp(type, "max")) || attr_true(pn->g, "global_pool") || !kernel) return -1;
    if (layout && strcmp(layout, "NCHW") && strcmp(layout, "None")) return -1;
    int commas = 0, digits = 0; /* "(2, 2)": two sizes */
    for (const char *c = kernel; *c; c++) commas += *c == ',', digits += *c >= '0' && *c <= '9';
    if (commas != 1 || !digits) return -1;
    int e = pn->in[0], r = g->entry_node[e];
    const mxp__inode *rn = &g->nodes[r];
    if (rn->is_var || !is_op(rn->g, "Activation") || !attr_is(rn->g, "act_type", "relu") || rn->n_args != 1 ||
        e != rn->entry0 || uses[e] != 1 || fu[r].bn >= 0 || mxp__gnode_attr(rn->g, "__impl__"))
        return -1;
    return r;
}

/* A copy of n (params, attributes, metadata) with inputs `in`. */
static int clone_node(const gnode *n, const gentry *in, gnode **out) {
    *out = NULL;
    gnode *c = calloc(1, sizeof *c);
    if (!c) return mxp__error_oom("fusion");
    atomic_init(&c->refs, 1);
    c->n_args = n->n_args;
    c->n_outs = n->n_outs;
    c->n_vis = n->n_vis;
    c->n_aux = n->n_aux;
    c->op_flags = n->op_flags;
    int rc = MXP_OK, tot = n->n_args + n->n_outs + n->n_aux;
    if (!(c->name = strdup(n->name)) || (n->op && !(c->op = strdup(n->op)))) rc = mxp__error_oom("fusion");
    if (!rc && n->names) {
        if (!(c->names = calloc((size_t)tot + 1, MXP_NAME_MAX))) rc = mxp__error_oom("fusion");
        else memcpy(c->names, n->names, (size_t)tot * MXP_NAME_MAX);
    }
    if (!rc && n->mutates) {
        if (!(c->mutates = malloc((size_t)n->n_args + 1))) rc = mxp__error_oom("fusion");
        else memcpy(c->mutates, n->mutates, (size_t)n->n_args + 1);
    }
    for (int i = 0; i < n->n_attrs && !rc; i++) rc = mxp__gnode_set_attr(c, n->keys[i], n->vals[i]);
    if (!rc && n->n_inputs) {
        if (!(c->inputs = calloc((size_t)n->n_inputs, sizeof *c->inputs))) rc = mxp__error_oom("fusion");
        for (int i = 0; i < n->n_inputs && !rc; i++) {
            c->inputs[i] = in[i];
            mxp__gnode_retain(in[i].node);
            c->n_inputs = i + 1;
        }
    }
    if (rc) {
        mxp__gnode_release(c);
        return rc;
    }
    *out = c;
    return MXP_OK;
}

/* The fused node for BatchNorm bn (inputs `in`: bn's, with the addend
 * after its arguments for op FUSED_ADD_OP) named after relu; for POOL_OP
 * bn and relu are both the Pooling node (its params and name). */
static int fused_node(const char *op, const gnode *bn, const gnode *relu, const gentry *in, int n_in, gnode **out) {
    *out = NULL;
    /* params go through the op's schema; "__x__" attributes are set as is */
    const char **keys = calloc((size_t)bn->n_attrs + 1, sizeof *keys), **vals = calloc((size_t)bn->n_attrs + 1, sizeof *vals);
    int np = 0, rc = MXP_OK;
    if (!keys || !vals) rc = mxp__error_oom("fusion");
    for (int i = 0; i < bn->n_attrs && !rc; i++)
        if (strncmp(bn->keys[i], "__", 2)) keys[np] = bn->keys[i], vals[np++] = bn->vals[i];
    gnode *f = NULL;
    if (!rc) rc = mxp__gnode_op(op, relu->name, np, keys, vals, &f);
    for (int i = 0; i < bn->n_attrs && !rc; i++)
        if (!strncmp(bn->keys[i], "__", 2)) rc = mxp__gnode_set_attr(f, bn->keys[i], bn->vals[i]);
    if (!rc && f->n_args + f->n_aux != n_in)
        rc = mxp__error(MXP_EINTERNAL, "fusion: %s has %d inputs, '%s' gives %d", op, f->n_args + f->n_aux,
                        bn->name, n_in);
    if (!rc && !(f->inputs = calloc((size_t)n_in, sizeof *f->inputs))) rc = mxp__error_oom("fusion");
    for (int i = 0; !rc && i < n_in; i++) {
        f->inputs[i] = in[i];
        mxp__gnode_retain(in[i].node);
        f->n_inputs = i + 1;
    }
    free(keys);
    free(vals);
    if (rc) {
        mxp__gnode_release(f);
        return rc;
    }
    *out = f;
    return MXP_OK;
}

int mxp__exec_fuse(const mxp__igraph *g, mxp_device dev, mxp_symbol **out, int *n_fused) {
    *out = NULL;
    *n_fused = 0;
    if (dev.type != MXP_DEV_CPU || !mxp__env_bool("MXP_EXEC_FUSE", 1)) return MXP_OK;
    int *uses = calloc((size_t)g->n_entries + 1, sizeof *uses);
    fusion *fu = calloc((size_t)g->n_nodes + 1, sizeof *fu);
    gnode **nn = calloc((size_t)g->n_nodes + 1, sizeof *nn);
    gentry *in = NULL, *heads = calloc((size_t)g->n_heads + 1, sizeof *heads);
    int rc = uses && fu && nn && heads ? MXP_OK : mxp__error_oom("fusion"), cap_in = 0, nf = 0;
    for (int i = 0; !rc && i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_args + g->nodes[i].n_aux; k++) uses[g->nodes[i].in[k]]++;
    for (int h = 0; !rc && h < g->n_heads; h++) uses[g->heads[h]]++;
    static const char *const relu_parts[] = {"BatchNorm", "Activation"};
    static const char *const add_parts[] = {"BatchNorm", "Activation", "elemwise_add"};
    static const char *const pool_parts[] = {"Pooling", "Activation"};
    const int relu_ok = fusion_allowed(FUSED_OP, relu_parts, 2, 2), add_ok = fusion_allowed(FUSED_ADD_OP, add_parts, 3, 2);
    const int pool_ok = fusion_allowed(POOL_OP, pool_parts, 2, 2);
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        if (fusable(g, uses, i, &fu[i]) && (fu[i].addend < 0 ? relu_ok : add_ok)) nf++;
        else if (pool_ok && (fu[i].bn = relu_pool(g, uses, fu, i)) >= 0) fu[i] = (fusion){fu[i].bn, -1, 1}, nf++;
        else fu[i].bn = -1;
    }
    if (!rc && !nf) goto done;
    /* nn[i]: node i of the new graph (topological order: inputs first) */
    for (int i = 0; !rc && i < g->n_nodes; i++) {
        const mxp__inode *in_i = &g->nodes[i];
        int fused = fu[i].bn >= 0, src = fused ? fu[i].bn : i; /* whose inputs the new node takes */
        const gnode *sn = g->nodes[src].g;
        int k_in = sn->n_inputs, n_in = k_in + (fused && fu[i].addend >= 0), changed = fused;
        if (n_in > cap_in) {
            gentry *t = realloc(in, (size_t)n_in * sizeof *t);
            if (!t) { rc = mxp__error_oom("fusion"); break; }
            in = t;
            cap_in = n_in;
        }
        for (int k = 0, o = 0; k < k_in; k++, o++) {
            if (n_in > k_in && k == sn->n_args) { /* the addend, after BatchNorm's arguments */
                int ae = fu[i].addend, an = g->entry_node[ae];
                in[o++] = (gentry){nn[an], ae - g->nodes[an].entry0, 0};
            }
            in[o] = sn->inputs[k];
            in[o].node = nn[g->entry_node[g->nodes[src].in[k]]];
            if (in[o].node != sn->inputs[k].node) changed = 1;
        }
        if (n_in > k_in) { /* the addend's version: as the add read it */
            const gnode *add = g->nodes[g->entry_node[in_i->in[0]]].g;
            in[sn->n_args].version = add->inputs[1].version;
        }
        if (!changed) nn[i] = mxp__gnode_retain(in_i->g);
        else if (fused && fu[i].pool) rc = fused_node(POOL_OP, in_i->g, in_i->g, in, n_in, &nn[i]);
        else if (fused) rc = fused_node(n_in > k_in ? FUSED_ADD_OP : FUSED_OP, sn, in_i->g, in, n_in, &nn[i]);
        else rc = clone_node(in_i->g, in, &nn[i]);
    }
    for (int h = 0; !rc && h < g->n_heads; h++) {
        int e = g->heads[h], n = g->entry_node[e];
        heads[h] = (gentry){nn[n], e - g->nodes[n].entry0, g->sym->outs[h].version};
    }
    if (!rc) rc = mxp__symbol_new(g->n_heads, heads, out);
    if (!rc) *n_fused = nf;
done:
    for (int i = 0; nn && i < g->n_nodes; i++) mxp__gnode_release(nn[i]);
    free(nn);
    free(in);
    free(heads);
    free(uses);
    free(fu);
    return rc;
}

