/* symbol.c — nodes and symbols (MXNet's nnvm Symbol in C): variables, op
 * nodes validated against the op schema, compose, groups, internals,
 * outputs by index or name, list_* names, attributes, deep copy.
 *
 * An op node learns its argument / output / aux names when created (the
 * def is opened once, then released: see opinfo.c).  Its inputs are empty
 * until composed; mxp__gnode_complete gives an uncomposed node variables
 * "{node}_{argname}" for every input, as MXNet's compose does for inputs
 * left unbound.  Invariant: a composed op node has n_args + n_aux inputs.
 * Not here: JSON (json.c), inference (infer.c). */
#include "graph/graph.h"
#include "plugin/plugin.h"


#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------ nodes */
gnode *mxp__gnode_retain(gnode *n) {
    if (n) atomic_fetch_add(&n->refs, 1);
    return n;
}

void mxp__gnode_release(gnode *n) {
    /* Iterative over single-input chains would avoid deep recursion; graphs
     * of thousands of nodes are still fine on an 8 MB stack. */
    if (!n || atomic_fetch_sub(&n->refs, 1) != 1) return;
    for (int i = 0; i < n->n_inputs; i++) mxp__gnode_release(n->inputs[i].node);
    for (int i = 0; i < n->n_attrs; i++) {
        free(n->keys[i]);
        free(n->vals[i]);
    }
    free(n->keys);
    free(n->vals);
    free(n->inputs);
    free(n->names);
    free(n->mutates);
    free(n->op);
    free(n->name);
    free(n);
}

int mxp__gnode_set_attr(gnode *n, const char *key, const char *val) {
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->keys[i], key)) {
            char *v = strdup(val);
            if (!v) return mxp__error_oom("attribute");
            free(n->vals[i]);
            n->vals[i] = v;
            return MXP_OK;
        }
    char **k = realloc(n->keys, (size_t)(n->n_attrs + 1) * sizeof *k);
    if (!k) return mxp__error_oom("attribute");
    n->keys = k;
    char **v = realloc(n->vals, (size_t)(n->n_attrs + 1) * sizeof *v);
    if (!v) return mxp__error_oom("attribute");
    n->vals = v;
    n->keys[n->n_attrs] = strdup(key);
    n->vals[n->n_attrs] = strdup(val);
    if (!n->keys[n->n_attrs] || !n->vals[n->n_attrs]) {
        free(n->keys[n->n_attrs]);
        free(n->vals[n->n_attrs]);
        return mxp__error_oom("attribute");
    }
    n->n_attrs++;
    return MXP_OK;
}

const char *mxp__gnode_attr(const gnode *n, const char *key) {
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->keys[i], key)) return n->vals[i];
    return NULL;
}

static gnode *gnode_alloc(const char *name) {
    gnode *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    atomic_init(&n->refs, 1);
    n->name = strdup(name);
    if (!n->name) {
        free(n);
        return NULL;
    }
    return n;
}

int mxp__gnode_variable(const char *name, gnode **out) {
    *out = NULL;
    if (!name || !*name) return mxp__error(MXP_EINVAL, "variable: empty name");
    gnode *n = gnode_alloc(name);
    if (!n) return mxp__error_oom("variable");
    n->n_outs = n->n_vis = 1;
    *out = n;
    return MXP_OK;
}

/* MXNet's NameManager: "{hint}{counter}" with one counter per hint. */
static pthread_mutex_t g_name_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char hint[MXP_NAME_MAX];
    int next;
} g_names[256];
static int g_n_names;

static void auto_name(const char *op, char *buf, size_t cap) {
    char hint[MXP_NAME_MAX];
    size_t i = 0;
    for (; op[i] && i + 1 < sizeof hint; i++) hint[i] = (char)tolower((unsigned char)op[i]);
    hint[i] = 0;
    pthread_mutex_lock(&g_name_mu);
    int k = 0;
    while (k < g_n_names && strcmp(g_names[k].hint, hint)) k++;
    if (k == g_n_names && g_n_names < (int)MXP_ARRAY_LEN(g_names)) {
        snprintf(g_names[k].hint, sizeof g_names[k].hint, "%s", hint);
        g_names[k].next = 0;
        g_n_names++;
    }
    int c = k < g_n_names ? g_names[k].next++ : 0;
    pthread_mutex_unlock(&g_name_mu);
    snprintf(buf, cap, "%s%d", hint, c);
}

static int gnode_op_scoped(const char *op, const char *name, int n_kwargs, const char *const *keys,
                           const char *const *vals, gnode **out);

/* In a pin scope (plugin.h): validating kwargs may pin the defining pack
 * more than once, which must not wait for a reload in between. */
int mxp__gnode_op(const char *op, const char *name, int n_kwargs, const char *const *keys,
                  const char *const *vals, gnode **out) {
    mxp__pin_scope_enter(1);
    int rc = gnode_op_scoped(op, name, n_kwargs, keys, vals, out);
    mxp__pin_scope_leave();
    return rc;
}

static int gnode_op_scoped(const char *op, const char *name, int n_kwargs, const char *const *keys,
                           const char *const *vals, gnode **out) {
    *out = NULL;
    for (int i = 0; i < n_kwargs; i++)
        if (!keys[i] || !vals[i]) return mxp__error(MXP_EINVAL, "op '%s': kwarg %d is NULL", op, i);
    mxp__opinfo oi;
    int rc = mxp__opinfo_open(op, n_kwargs, keys, vals, &oi);
    if (rc) return name ? mxp__error_prefix(rc, "node '%s'", name) : rc;
    char(*tmp)[MXP_NAME_MAX] = NULL;
    int counts[3] = {0, 0, 0};
    rc = mxp__op_list_all_names(oi.def, oi.params, &tmp, counts);
    char nm[MXP_NAME_MAX + 16];
    if (!rc && !name) auto_name(oi.od.name, nm, sizeof nm);
    gnode *n = rc ? NULL : gnode_alloc(name ? name : nm);
    if (!rc && !n) rc = mxp__error_oom("op node");
    if (!rc) {
        n->op = strdup(oi.od.name);
        n->n_args = counts[0];
        n->n_outs = counts[1];
        n->n_aux = counts[2];
        n->n_vis = mxp__opdef_visible_outputs(oi.def, n->n_outs);
        n->op_flags = oi.def->flags;
        int tot = counts[0] + counts[1] + counts[2];
        n->names = calloc((size_t)tot + 1, MXP_NAME_MAX);
        if (!n->op || !n->names) rc = mxp__error_oom("op node");
        else memcpy(n->names, tmp, (size_t)tot * MXP_NAME_MAX);
        if (!rc && oi.def->n_mutate_inputs) {
            /* MXNet's FMutateInputs: optimizer states (sgd_mom_update's mom)
             * are auxiliary states of the graph, not arguments. */
            if (!(n->mutates = calloc((size_t)n->n_args + 1, 1))) rc = mxp__error_oom("op node");
            for (uint32_t k = 0; !rc && k < oi.def->n_mutate_inputs; k++) {
                int32_t m = oi.def->mutate_inputs[k];
                if (m >= 0 && m < n->n_args) n->mutates[m] = 1;
            }
        }
        for (int i = 0; i < n_kwargs && !rc; i++) rc = mxp__gnode_set_attr(n, keys[i], vals[i]);
    }
    free(tmp);
    mxp__opinfo_close(&oi);
    if (rc) {
        mxp__gnode_release(n);
        return rc;
    }
    *out = n;
    return MXP_OK;
}

static int gnode_input_count(const gnode *n) { return n->n_args + n->n_aux; }
static const char *gnode_input_name(const gnode *n, int i) {
    return i < n->n_args ? n->names[i] : n->names[n->n_args + n->n_outs + (i - n->n_args)];
}

int mxp__gnode_complete(gnode *n) {
    if (!n->op || n->n_inputs || !gnode_input_count(n)) return MXP_OK;
    int k = gnode_input_count(n);
    gentry *in = calloc((size_t)k, sizeof *in);
    if (!in) return mxp__error_oom("compose");
    for (int i = 0; i < k; i++) {
        char nm[2 * MXP_NAME_MAX + 2];
        snprintf(nm, sizeof nm, "%s_%s", n->name, gnode_input_name(n, i));
        int rc = mxp__gnode_variable(nm, &in[i].node);
        if (rc) {
            for (int j = 0; j < i; j++) mxp__gnode_release(in[j].node);
            free(in);
            return rc;
        }
    }
    n->inputs = in;
    n->n_inputs = k;
    return MXP_OK;
}

void mxp__entry_name(const gentry *e, char *buf, size_t cap) {
    const gnode *n = e->node;
    if (!n->op) snprintf(buf, cap, "%s", n->name);
    else snprintf(buf, cap, "%s_%s", n->name, n->names[n->n_args + e->index]);
}

/* ------------------------------------------------------------ symbols */
int mxp__symbol_new(int n_out, const gentry *outs, mxp_symbol **out) {
    *out = NULL;
    mxp_symbol *s = calloc(1, sizeof *s);
    if (!s) return mxp__error_oom("symbol");
    s->outs = calloc((size_t)n_out + 1, sizeof *s->outs);
    if (!s->outs) {
        free(s);
        return mxp__error_oom("symbol");
    }
    atomic_init(&s->refs, 1);
    s->n_out = n_out;
    for (int i = 0; i < n_out; i++) {
        s->outs[i] = outs[i];
        mxp__gnode_retain(outs[i].node);
    }
    *out = s;
    return MXP_OK;
}

static void free_list(char **names) {
    for (int i = 0; names && names[i]; i++) free(names[i]);
    free(names);
}

static void clear_lists(mxp_symbol *s) {
    for (int w = 0; w < 3; w++) {
        free_list(s->list_cache[w]);
        s->list_cache[w] = NULL;
        s->list_n[w] = 0;
    }
    for (int i = 0; i < s->n_retired; i++) free_list(s->retired[i]);
    free(s->retired);
    s->retired = NULL;
    s->n_retired = 0;
}

mxp_symbol *mxp_symbol_retain(mxp_symbol *sym) {
    if (sym) atomic_fetch_add(&sym->refs, 1);
    return sym;
}

void mxp_symbol_release(mxp_symbol *sym) {
    if (!sym || atomic_fetch_sub(&sym->refs, 1) != 1) return;
    for (int i = 0; i < sym->n_out; i++) mxp__gnode_release(sym->outs[i].node);
    clear_lists(sym);
    free(sym->outs);
    free(sym);
}

static gentry node_entry(gnode *n, int i) { return (gentry){n, i, 0}; }

int mxp_symbol_variable(const char *name, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!out) return mxp__error(MXP_EMISUSE, "mxp_symbol_variable: NULL out");
    gnode *n;
    int rc = mxp__gnode_variable(name, &n);
    if (rc) return rc;
    gentry e = node_entry(n, 0);
    rc = mxp__symbol_new(1, &e, out);
    mxp__gnode_release(n);
    return rc;
}

/* A symbol over the visible outputs of node n. */
static int symbol_of_node(gnode *n, mxp_symbol **out) {
    int k = n->op ? n->n_vis : 1;
    gentry *e = calloc((size_t)k + 1, sizeof *e);
    if (!e) return mxp__error_oom("symbol");
    for (int i = 0; i < k; i++) e[i] = node_entry(n, i);
    int rc = mxp__symbol_new(k, e, out);
    free(e);
    return rc;
}

int mxp_symbol_create(const char *op, const char *name, int n_kwargs, const char *const *keys,
                      const char *const *vals, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!op || !out || n_kwargs < 0 || (n_kwargs && (!keys || !vals)))
        return mxp__error(MXP_EMISUSE, "mxp_symbol_create: bad argument");
    gnode *n;
    int rc = mxp__gnode_op(op, name, n_kwargs, keys, vals, &n);
    if (rc) return rc;
    rc = symbol_of_node(n, out);
    mxp__gnode_release(n);
    return rc;
}

/* The symbol's single op node when it is atomic (uncomposed), else NULL. */
static gnode *atomic_node(const mxp_symbol *s) {
    if (s->n_out < 1) return NULL;
    gnode *n = s->outs[0].node;
    for (int i = 1; i < s->n_out; i++)
        if (s->outs[i].node != n) return NULL;
    return n->op && !n->n_inputs ? n : NULL;
}

/* ---- deep copy: nodes are copied once each (memo by mark index). */
typedef struct copy_map {
    gnode **from, **to;
    int n, cap;
} copy_map;

static gnode *copy_node(gnode *n, copy_map *m, int *rc) {
    for (int i = 0; i < m->n; i++)
        if (m->from[i] == n) return m->to[i];
    gnode *c = gnode_alloc(n->name);
    if (!c) {
        *rc = mxp__error_oom("symbol copy");
        return NULL;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        gnode **f = realloc(m->from, (size_t)cap * sizeof *f), **t = f ? realloc(m->to, (size_t)cap * sizeof *t) : NULL;
        if (f) m->from = f;
        if (!f || !t) {
            mxp__gnode_release(c);
            *rc = mxp__error_oom("symbol copy");
            return NULL;
        }
        m->to = t;
        m->cap = cap;
    }
    m->from[m->n] = n;
    m->to[m->n++] = c; /* the map's reference */
    c->n_args = n->n_args;
    c->n_outs = n->n_outs;
    c->n_vis = n->n_vis;
    c->n_aux = n->n_aux;
    c->op_flags = n->op_flags;
    if (n->op && !(c->op = strdup(n->op))) *rc = mxp__error_oom("symbol copy");
    int tot = n->n_args + n->n_outs + n->n_aux;
    if (n->names && !*rc) {
        c->names = calloc((size_t)tot + 1, MXP_NAME_MAX);
        if (!c->names) *rc = mxp__error_oom("symbol copy");
        else memcpy(c->names, n->names, (size_t)tot * MXP_NAME_MAX);
    }
    if (n->mutates && !*rc) {
        if (!(c->mutates = malloc((size_t)n->n_args + 1))) *rc = mxp__error_oom("symbol copy");
        else memcpy(c->mutates, n->mutates, (size_t)n->n_args + 1);
    }
    for (int i = 0; i < n->n_attrs && !*rc; i++) *rc = mxp__gnode_set_attr(c, n->keys[i], n->vals[i]);
    if (n->n_inputs && !*rc) {
        c->inputs = calloc((size_t)n->n_inputs, sizeof *c->inputs);
        if (!c->inputs) *rc = mxp__error_oom("symbol copy");
        for (int i = 0; i < n->n_inputs && !*rc; i++) {
            gnode *ci = copy_node(n->inputs[i].node, m, rc);
            if (!ci) break;
            c->inputs[i] = n->inputs[i];
            c->inputs[i].node = mxp__gnode_retain(ci);
            c->n_inputs = i + 1;
        }
    }
    return *rc ? NULL : c;
}

static void copy_map_free(copy_map *m) {
    for (int i = 0; i < m->n; i++) mxp__gnode_release(m->to[i]);
    free(m->from);
    free(m->to);
}

static int symbol_deep_copy(const mxp_symbol *sym, mxp_symbol **out, copy_map *m) {
    int rc = MXP_OK;
    gentry *e = calloc((size_t)sym->n_out + 1, sizeof *e);
    if (!e) return mxp__error_oom("symbol copy");
    for (int i = 0; i < sym->n_out && !rc; i++) {
        e[i] = sym->outs[i];
        e[i].node = copy_node(sym->outs[i].node, m, &rc);
    }
    if (!rc) rc = mxp__symbol_new(sym->n_out, e, out);
    free(e);
    return rc;
}

int mxp_symbol_copy(const mxp_symbol *sym, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_copy: NULL argument");
    copy_map m = {0};
    int rc = symbol_deep_copy(sym, out, &m);
    copy_map_free(&m);
    return rc;
}

/* Replace free variables of a (copied) graph by name. */
static void substitute(gnode *n, const char *const *names, mxp_symbol *const *args, int n_args, int *visit_mark) {
    if (n->mark == *visit_mark) return;
    n->mark = *visit_mark;
    for (int i = 0; i < n->n_inputs; i++) {
        gnode *in = n->inputs[i].node;
        if (!in->op) {
            for (int k = 0; k < n_args; k++)
                if (!strcmp(in->name, names[k])) {
                    n->inputs[i] = args[k]->outs[0];
                    mxp__gnode_retain(n->inputs[i].node);
                    mxp__gnode_release(in);
                    break;
                }
        } else substitute(in, names, args, n_args, visit_mark);
    }
}

static int g_mark = 0;
static pthread_mutex_t g_mark_mu = PTHREAD_MUTEX_INITIALIZER;
static int next_mark(void) {
    pthread_mutex_lock(&g_mark_mu);
    int m = ++g_mark;
    pthread_mutex_unlock(&g_mark_mu);
    return m;
}

int mxp_symbol_compose(mxp_symbol *sym, const char *name, int n_args, const char *const *arg_names,
                       mxp_symbol *const *args) {
    if (!sym || n_args < 0 || (n_args && !args)) return mxp__error(MXP_EMISUSE, "mxp_symbol_compose: bad argument");
    for (int i = 0; i < n_args; i++) {
        if (!args[i]) return mxp__error(MXP_EINVAL, "compose: argument %d is NULL", i);
        if (args[i]->n_out != 1)
            return mxp__error(MXP_EINVAL, "compose: argument %d ('%s') has %d outputs; one is needed", i,
                              arg_names ? arg_names[i] : "", args[i]->n_out);
    }
    gnode *n = atomic_node(sym);
    if (n) {
        int k = gnode_input_count(n);
        if (!arg_names && n_args > k)
            return mxp__error(MXP_EINVAL, "node '%s' (op '%s'): %d arguments given, the op takes %d", n->name, n->op,
                              n_args, k);
        int *slot = calloc((size_t)n_args + 1, sizeof *slot);
        if (!slot) return mxp__error_oom("compose");
        for (int i = 0; i < n_args; i++) {
            slot[i] = i;
            if (!arg_names) continue;
            slot[i] = -1;
            for (int j = 0; j < k; j++)
                if (arg_names[i] && !strcmp(arg_names[i], gnode_input_name(n, j))) slot[i] = j;
            if (slot[i] < 0) {
                int rc = mxp__error(MXP_EINVAL, "node '%s' (op '%s'): no input named '%s'", n->name, n->op,
                                    arg_names[i] ? arg_names[i] : "(null)");
                free(slot);
                return rc;
            }
        }
        if (name) {
            char *nm = strdup(name);
            if (!nm) {
                free(slot);
                return mxp__error_oom("compose");
            }
            free(n->name);
            n->name = nm;
        }
        gentry *in = calloc((size_t)k + 1, sizeof *in);
        if (!in) {
            free(slot);
            return mxp__error_oom("compose");
        }
        for (int i = 0; i < n_args; i++) {
            in[slot[i]] = args[i]->outs[0];
            mxp__gnode_retain(in[slot[i]].node);
        }
        free(slot);
        int rc = MXP_OK;
        for (int j = 0; j < k && !rc; j++) {
            if (in[j].node) continue;
            char nm[2 * MXP_NAME_MAX + 2];
            snprintf(nm, sizeof nm, "%s_%s", n->name, gnode_input_name(n, j));
            rc = mxp__gnode_variable(nm, &in[j].node);
        }
        if (rc) {
            for (int j = 0; j < k; j++) mxp__gnode_release(in[j].node);
            free(in);
            return rc;
        }
        n->inputs = in;
        n->n_inputs = k;
        return MXP_OK;
    }
    /* A graph: replace its free variables (copy first). */
    const char *const *names = arg_names;
    int n_list = 0;
    const char *const *list = NULL;
    if (!names) {
        int rc = mxp_symbol_list_arguments(sym, &n_list, &list);
        if (rc) return rc;
        if (n_args > n_list)
            return mxp__error(MXP_EINVAL, "compose: %d arguments given, the symbol has %d", n_args, n_list);
        names = list;
    }
    char **keep = calloc((size_t)n_args + 1, sizeof *keep);
    if (!keep) return mxp__error_oom("compose");
    int rc = MXP_OK;
    for (int i = 0; i < n_args && !rc; i++)
        if (!(keep[i] = strdup(names[i] ? names[i] : ""))) rc = mxp__error_oom("compose");
    mxp_symbol *c = NULL;
    copy_map m = {0};
    if (!rc) rc = symbol_deep_copy(sym, &c, &m);
    copy_map_free(&m);
    if (!rc) {
        int mark = next_mark();
        for (int i = 0; i < c->n_out; i++) {
            gnode *o = c->outs[i].node;
            if (!o->op) {
                for (int k = 0; k < n_args; k++)
                    if (!strcmp(o->name, keep[k])) {
                        c->outs[i] = args[k]->outs[0];
                        mxp__gnode_retain(c->outs[i].node);
                        mxp__gnode_release(o);
                        break;
                    }
            } else substitute(o, (const char *const *)keep, args, n_args, &mark);
        }
        /* Move c's outputs into sym. */
        for (int i = 0; i < sym->n_out; i++) mxp__gnode_release(sym->outs[i].node);
        free(sym->outs);
        sym->outs = c->outs;
        sym->n_out = c->n_out;
        c->outs = NULL;
        c->n_out = 0;
        mxp_symbol_release(c);
    }
    for (int i = 0; i < n_args; i++) free(keep[i]);
    free(keep);
    return rc;
}

int mxp_symbol_group(int n, mxp_symbol *const *syms, mxp_symbol **out) {
    if (out) *out = NULL;
    if (n < 0 || (n && !syms) || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_group: bad argument");
    int tot = 0;
    for (int i = 0; i < n; i++) {
        if (!syms[i]) return mxp__error(MXP_EINVAL, "group: symbol %d is NULL", i);
        tot += syms[i]->n_out;
    }
    gentry *e = calloc((size_t)tot + 1, sizeof *e);
    if (!e) return mxp__error_oom("group");
    for (int i = 0, k = 0; i < n; i++)
        for (int j = 0; j < syms[i]->n_out; j++) e[k++] = syms[i]->outs[j];
    int rc = mxp__symbol_new(tot, e, out);
    free(e);
    return rc;
}

int mxp_symbol_internals(const mxp_symbol *sym, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_internals: NULL argument");
    mxp__igraph *g;
    int rc = mxp__igraph_build((mxp_symbol *)sym, &g);
    if (rc) return rc;
    int tot = 0;
    for (int i = 0; i < g->n_nodes; i++) tot += g->nodes[i].n_vis;
    gentry *e = calloc((size_t)tot + 1, sizeof *e);
    if (!e) rc = mxp__error_oom("internals");
    for (int i = 0, k = 0; i < g->n_nodes && !rc; i++)
        for (int j = 0; j < g->nodes[i].n_vis; j++) e[k++] = node_entry(g->nodes[i].g, j);
    if (!rc) rc = mxp__symbol_new(tot, e, out);
    free(e);
    mxp__igraph_free(g);
    return rc;
}

int mxp_symbol_output(const mxp_symbol *sym, int index, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_output: NULL argument");
    if (index < 0 || index >= sym->n_out)
        return mxp__error(MXP_EINVAL, "symbol: output %d out of range (%d outputs)", index, sym->n_out);
    return mxp__symbol_new(1, &sym->outs[index], out);
}

int mxp_symbol_output_by_name(const mxp_symbol *sym, const char *name, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !name || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_output_by_name: NULL argument");
    char buf[2 * MXP_NAME_MAX + 2];
    for (int i = 0; i < sym->n_out; i++) {
        mxp__entry_name(&sym->outs[i], buf, sizeof buf);
        if (!strcmp(buf, name)) return mxp__symbol_new(1, &sym->outs[i], out);
    }
    return mxp__error(MXP_ENOENT, "symbol: no output named '%s'", name);
}

int mxp_symbol_num_outputs(const mxp_symbol *sym) { return sym ? sym->n_out : 0; }

const char *mxp_symbol_name(const mxp_symbol *sym) {
    if (!sym || sym->n_out < 1) return NULL;
    for (int i = 1; i < sym->n_out; i++)
        if (sym->outs[i].node != sym->outs[0].node) return NULL;
    return sym->outs[0].node->name;
}

/* ------------------------------------------------------------ lists */
/* Lists handed out stay valid for the symbol's lifetime: an identical
 * list returns the cached one; a different one (the graph was composed or
 * renamed since) retires the old one until the symbol is freed. */
static int set_list(mxp_symbol *s, int w, int n, char **names, int *out_n, const char *const **out_names) {
    char **old = s->list_cache[w];
    int same = old && s->list_n[w] == n;
    for (int i = 0; same && i < n; i++) same = !strcmp(old[i], names[i]);
    if (same) {
        free_list(names);
        *out_n = n;
        *out_names = (const char *const *)old;
        return MXP_OK;
    }
    if (old) {
        char ***r = realloc(s->retired, ((size_t)s->n_retired + 1) * sizeof *r);
        if (!r) {
            free_list(names);
            return mxp__error_oom("symbol names");
        }
        s->retired = r;
        s->retired[s->n_retired++] = old;
    }
    s->list_cache[w] = names;
    s->list_n[w] = n;
    *out_n = n;
    *out_names = (const char *const *)names;
    return MXP_OK;
}

static int list_names(mxp_symbol *sym, int w, int *out_n, const char *const **out_names) {
    if (out_n) *out_n = 0;
    if (out_names) *out_names = NULL;
    if (!sym || !out_n || !out_names) return mxp__error(MXP_EMISUSE, "mxp_symbol_list: NULL argument");
    int n = 0, rc = MXP_OK;
    char **names = NULL;
    if (w == 1) {
        names = calloc((size_t)sym->n_out + 1, sizeof *names);
        if (!names) return mxp__error_oom("list_outputs");
        char buf[2 * MXP_NAME_MAX + 2];
        for (int i = 0; i < sym->n_out && !rc; i++) {
            mxp__entry_name(&sym->outs[i], buf, sizeof buf);
            if (!(names[n++] = strdup(buf))) rc = mxp__error_oom("list_outputs");
        }
    } else {
        mxp__igraph *g;
        if ((rc = mxp__igraph_build(sym, &g))) return rc;
        int k = w == 0 ? g->n_args : g->n_auxs;
        const int *ids = w == 0 ? g->args : g->auxs;
        names = calloc((size_t)k + 1, sizeof *names);
        if (!names) rc = mxp__error_oom("list");
        for (int i = 0; i < k && !rc; i++)
            if (!(names[n++] = strdup(g->nodes[ids[i]].g->name))) rc = mxp__error_oom("list");
        mxp__igraph_free(g);
    }
    if (rc) {
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
        return rc;
    }
    return set_list(sym, w, n, names, out_n, out_names);
}

int mxp_symbol_list_arguments(mxp_symbol *sym, int *out_n, const char *const **out_names) {
    return list_names(sym, 0, out_n, out_names);
}
int mxp_symbol_list_outputs(mxp_symbol *sym, int *out_n, const char *const **out_names) {
    return list_names(sym, 1, out_n, out_names);
}
int mxp_symbol_list_auxiliary_states(mxp_symbol *sym, int *out_n, const char *const **out_names) {
    return list_names(sym, 2, out_n, out_names);
}

/* ------------------------------------------------------------ attributes */
static gnode *single_node(const mxp_symbol *sym) {
    if (!sym || sym->n_out < 1) return NULL;
    for (int i = 1; i < sym->n_out; i++)
        if (sym->outs[i].node != sym->outs[0].node) return NULL;
    return sym->outs[0].node;
}

int mxp_symbol_set_attr(mxp_symbol *sym, const char *key, const char *value) {
    if (!sym || !key || !value) return mxp__error(MXP_EMISUSE, "mxp_symbol_set_attr: NULL argument");
    gnode *n = single_node(sym);
    if (!n) return mxp__error(MXP_EINVAL, "set_attr '%s': the symbol is a group of several nodes", key);
    size_t len = strlen(key);
    if (len < 5 || strncmp(key, "__", 2) || strcmp(key + len - 2, "__"))
        return mxp__error(MXP_EINVAL, "node '%s': attribute '%s' is not of the form __name__ (op parameters are "
                          "fixed at creation)", n->name, key);
    return mxp__gnode_set_attr(n, key, value);
}

int mxp_symbol_attr(const mxp_symbol *sym, const char *key, const char **out_value) {
    if (out_value) *out_value = NULL;
    if (!sym || !key || !out_value) return mxp__error(MXP_EMISUSE, "mxp_symbol_attr: NULL argument");
    gnode *n = single_node(sym);
    if (!n) return mxp__error(MXP_EINVAL, "get_attr '%s': the symbol is a group of several nodes", key);
    *out_value = mxp__gnode_attr(n, key);
    return MXP_OK;
}
