/* graph/amp.c — mixed-precision conversion of a symbol (MXNet's
 * amp.convert_symbol for a list of low-precision ops): amp_cast nodes are
 * inserted around the listed ops of a deep copy, so those ops run on
 * bfloat16 (or float16) values while every variable and every head stays
 * float32.
 * For bfloat16, a second list of "follow" ops (MXNet's BF16_FP32_FUNCS:
 * BatchNorm and its fused forms, Activation, Pooling, Flatten, the
 * elementwise adds) runs in whichever precision its data inputs have: when
 * all of them are bf16 the op reads them as they are and its output is
 * bf16, so conv -> BatchNorm -> ReLU -> conv carries no cast; when they
 * differ the op takes the widest type (MXNet's WIDEST_TYPE_CASTS): its bf16
 * data inputs are cast to float32 and its output is float32.  BatchNorm's
 * gamma/beta/moving statistics are not data: they stay float32 (the
 * kernels keep statistics and parameters in float32), and its mean/var
 * outputs are float32.  Every other op reads float32.  float16 has no such
 * kernels, so it keeps the plain rule (cast around the listed ops only).
 * Not here: choosing kernels (ops pick impls by dtype) or loss scaling
 * (bfloat16 has float32's exponent range).
 * mxp_symbol_amp_remove_casts is the inverse for saving (MXNet's
 * RemoveAmpCast): every reader of an amp_cast output reads the cast's
 * input instead.
 * Invariant: the input symbol is never modified; each (entry, dtype) gets
 * at most one cast node, shared by all its consumers. */
#include "graph/graph.h"

#include <mxplug/symbol.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cast_memo {
    gnode *src;
    int index, dtype;
    gnode *cast; /* one reference held by the memo */
} cast_memo;

typedef struct amp_ctx {
    int target, n_ops;
    const char *const *ops;
    gnode **order; /* op and variable nodes of the copy, post-order */
    int n_order, cap_order;
    struct node_low *low; /* per node: is its data output low precision? (sorted by node) */
    cast_memo *memo;
    int n_memo, cap_memo;
    int mark;
} amp_ctx;

static const char *const g_default_ops[] = {"Convolution", "FullyConnected"};

/* Ops with bf16 and float32 kernels (ops-nn, ops-basic), run in the
 * precision of their data inputs.  data: bit i set when argument i is data
 * (0: every argument); the others (BatchNorm's gamma, beta) stay float32. */
typedef struct follow_op {
    const char *name;
    unsigned data;
} follow_op;
static const follow_op g_follow[] = {
    {"BatchNorm", 0x1},    {"_mxp_BatchNormReLU", 0x1}, {"_mxp_BatchNormAddReLU", 0x9 /* data, addend */},
    {"Activation", 0},     {"Pooling", 0},              {"_mxp_ReLUPooling", 0},
    {"Flatten", 0},        {"elemwise_add", 0},         {"ElementWiseSum", 0},
};

typedef struct node_low {
    const gnode *node;
    int low;
} node_low;

static int is_target(const amp_ctx *c, const gnode *n) {
    if (!n->op) return 0;
    for (int i = 0; i < c->n_ops; i++)
        if (!strcmp(n->op, c->ops[i])) return 1;
    return 0;
}

/* The follow-list entry of n, or NULL (only for a bfloat16 target). */
static const follow_op *follow_of(const amp_ctx *c, const gnode *n) {
    if (!n->op || c->target != MXP_DTYPE_BF16) return NULL;
    for (size_t i = 0; i < sizeof g_follow / sizeof g_follow[0]; i++)
        if (!strcmp(n->op, g_follow[i].name)) return &g_follow[i];
    return NULL;
}

/* Is argument i of n (follow op f) a data input? */
static int is_data_arg(const gnode *n, const follow_op *f, int i) {
    return i < n->n_args && (f->data == 0 || (i < 32 && (f->data >> i & 1u)));
}

static int cmp_low(const void *a, const void *b) {
    const gnode *x = ((const node_low *)a)->node, *y = ((const node_low *)b)->node;
    return x < y ? -1 : x > y;
}

static node_low *low_slot(const amp_ctx *c, const gnode *n) {
    node_low key = {n, 0};
    return bsearch(&key, c->low, (size_t)c->n_order, sizeof key, cmp_low);
}

/* Is entry e low precision?  A node's outputs are when it was marked
 * low, except BatchNorm's statistics outputs (mean, var: float32). */
static int entry_low(const amp_ctx *c, gentry e) {
    const node_low *s = low_slot(c, e.node);
    if (!s || !s->low) return 0;
    return e.index == 0 || !e.node->op || !strstr(e.node->op, "BatchNorm");
}

static int collect(amp_ctx *c, gnode *n) {
    if (n->mark == c->mark) return MXP_OK;
    n->mark = c->mark;
    for (int i = 0; i < n->n_inputs; i++) {
        int rc = collect(c, n->inputs[i].node);
        if (rc) return rc;
    }
    if (c->n_order == c->cap_order) {
        int cap = c->cap_order ? 2 * c->cap_order : 32;
        gnode **o = realloc(c->order, (size_t)cap * sizeof *o);
        if (!o) return mxp__error_oom("amp convert");
        c->order = o;
        c->cap_order = cap;
    }
    c->order[c->n_order++] = n;
    return MXP_OK;
}

/* The entry (src, index) cast to dtype: an existing cast node or a new one. */
static int cast_of(amp_ctx *c, gentry e, int dtype, gentry *out) {
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo[i].src == e.node && c->memo[i].index == e.index && c->memo[i].dtype == dtype) {
            *out = (gentry){c->memo[i].cast, 0, 0};
            return MXP_OK;
        }
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? 2 * c->cap_memo : 16;
        cast_memo *m = realloc(c->memo, (size_t)cap * sizeof *m);
        if (!m) return mxp__error_oom("amp convert");
        c->memo = m;
        c->cap_memo = cap;
    }
    char src[MXP_NAME_MAX * 2 + 2], name[MXP_NAME_MAX * 2 + 32];
    mxp__entry_name(&e, src, sizeof src);
    const char *dn = mxp_dtype_name(dtype);
    snprintf(name, sizeof name, "%s_%s", src, dn);
    const char *key = "dtype";
    gnode *n = NULL;
    int rc = mxp__gnode_op("amp_cast", name, 1, &key, &dn, &n);
    if (rc) return mxp__error_prefix(rc, "amp convert: creating cast '%s'", name);
    n->inputs = calloc(1, sizeof *n->inputs);
    if (!n->inputs) {
        mxp__gnode_release(n);
        return mxp__error_oom("amp convert");
    }
    n->inputs[0] = e;
    mxp__gnode_retain(e.node);
    n->n_inputs = 1;
    c->memo[c->n_memo++] = (cast_memo){e.node, e.index, dtype, n};
    *out = (gentry){n, 0, 0};
    return MXP_OK;
}

/* Replace *slot by its cast to dtype (the slot's reference moves). */
static int recast(amp_ctx *c, gentry *slot, int dtype) {
    gentry ce;
    int rc = cast_of(c, *slot, dtype, &ce);
    if (rc) return rc;
    mxp__gnode_release(slot->node);
    *slot = ce;
    mxp__gnode_retain(ce.node);
    return MXP_OK;
}

static int g_amp_mark = -1000000; /* distinct from symbol.c's marks (positive) */

int mxp_symbol_amp_convert(const mxp_symbol *sym, int target, int n_ops, const char *const *ops, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !out || n_ops < 0 || (n_ops && !ops)) return mxp__error(MXP_EMISUSE, "mxp_symbol_amp_convert: bad argument");
    if (target != MXP_DTYPE_BF16 && target != MXP_DTYPE_F16)
        return mxp__error(MXP_EINVAL, "amp convert: target dtype %s is not bfloat16 or float16", mxp_dtype_name(target));
    for (int i = 0; i < n_ops; i++)
        if (!ops[i]) return mxp__error(MXP_EINVAL, "amp convert: op name %d is NULL", i);
    amp_ctx c = {.target = target, .n_ops = n_ops ? n_ops : 2, .ops = n_ops ? ops : g_default_ops};
    mxp_symbol *copy = NULL;
    int rc = mxp_symbol_copy(sym, &copy);
    if (rc) return rc;
    c.mark = __atomic_sub_fetch(&g_amp_mark, 1, __ATOMIC_RELAXED); /* the copy is private: any unique mark */
    for (int i = 0; i < copy->n_out && !rc; i++) rc = collect(&c, copy->outs[i].node);
    if (!rc && !(c.low = calloc((size_t)c.n_order + 1, sizeof *c.low))) rc = mxp__error_oom("amp convert");
    for (int k = 0; k < c.n_order && !rc; k++) c.low[k] = (node_low){c.order[k], 0};
    if (!rc) qsort(c.low, (size_t)c.n_order, sizeof *c.low, cmp_low);
    /* post-order: every input's precision is decided before its reader's */
    for (int k = 0; k < c.n_order && !rc; k++) {
        gnode *n = c.order[k];
        const follow_op *f = follow_of(&c, n);
        int low = is_target(&c, n);
        if (f) { /* low when every data input is low (else the widest: float32) */
            int n_data = 0, n_low = 0;
            for (int i = 0; i < n->n_inputs; i++)
                if (is_data_arg(n, f, i)) n_data++, n_low += entry_low(&c, n->inputs[i]);
            low = n_data > 0 && n_low == n_data;
        }
        for (int i = 0; i < n->n_inputs && !rc; i++) {
            int from_low = entry_low(&c, n->inputs[i]);
            int wants_low = low && i < n->n_args && (!f || is_data_arg(n, f, i));
            if (wants_low && !from_low) rc = recast(&c, &n->inputs[i], target);
            else if (!wants_low && from_low) rc = recast(&c, &n->inputs[i], MXP_DTYPE_F32);
        }
        low_slot(&c, n)->low = low;
    }
    for (int i = 0; i < copy->n_out && !rc; i++)
        if (entry_low(&c, copy->outs[i])) rc = recast(&c, &copy->outs[i], MXP_DTYPE_F32);
    for (int i = 0; i < c.n_memo; i++) mxp__gnode_release(c.memo[i].cast);
    free(c.memo);
    free(c.low);
    free(c.order);
    if (rc) {
        mxp_symbol_release(copy);
        return rc;
    }
    *out = copy;
    return MXP_OK;
}

/* *slot reads what its chain of casts reads (the slot's reference moves
 * to that node). */
static void bypass_casts(gentry *slot) {
    gentry e = *slot;
    while (e.node->op && !strcmp(e.node->op, "amp_cast") && e.node->n_inputs == 1) e = e.node->inputs[0];
    if (e.node == slot->node) return;
    mxp__gnode_retain(e.node); /* before the release: the cast may hold the only reference */
    mxp__gnode_release(slot->node);
    *slot = e;
}

static void remove_casts(gnode *n, int mark) {
    if (n->mark == mark) return;
    n->mark = mark;
    for (int i = 0; i < n->n_inputs; i++) {
        bypass_casts(&n->inputs[i]);
        remove_casts(n->inputs[i].node, mark);
    }
}

int mxp_symbol_amp_remove_casts(const mxp_symbol *sym, mxp_symbol **out) {
    if (out) *out = NULL;
    if (!sym || !out) return mxp__error(MXP_EMISUSE, "mxp_symbol_amp_remove_casts: NULL argument");
    mxp_symbol *copy = NULL;
    int rc = mxp_symbol_copy(sym, &copy);
    if (rc) return rc;
    int mark = __atomic_sub_fetch(&g_amp_mark, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < copy->n_out; i++) {
        bypass_casts(&copy->outs[i]);
        remove_casts(copy->outs[i].node, mark);
    }
    *out = copy;
    return MXP_OK;
}
