/* node.c — the node runtime: parse, infer, bind and keep the chosen impl of
 * one op node (see op.h for the contract).  Pushing work is in exec.c.
 *
 * What a node owns:
 *   - the op's definition held through plugin/opdef.h (its defining pack
 *     pinned, so `def` and `params`, parsed against it, stay valid), its
 *     kwargs (copies, reserved "__" keys dropped), the arg/output/aux names
 *     for the parsed params;
 *   - the inferred signature (shapes and dtypes of inputs | outputs | aux);
 *   - a small cache of instances, one per bound signature.  An instance
 *     (mxp__inst, plugin/opdef.h) is refcounted: impl ref + params parsed
 *     against ref->def + state + workspace size.  Pushed work holds a
 *     reference, so dropping an instance here never frees state in use.
 * Invariant: every cached instance has generation == n->generation; when
 * the registry generation moves, refresh() drops them all and re-parses.
 * Every call into the op's pack code goes through plugin/opdef.h. */
#include "op/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE_CACHE 4
#define SIG_SMALL 16   /* signature entries checked on the stack in infer */

struct mxp__node {
    atomic_int refs;           /* mxp__node_retain / mxp__node_free          */
    int frozen;                /* never refreshed (mxp__node_freeze)          */
    int bound;                 /* counted in its op's bound nodes            */
    char name[MXP_NAME_MAX];
    char label[MXP__NODE_LABEL_MAX]; /* pushed work's name: "NODE (OP)" or OP */
    int n_kwargs;
    char **keys, **vals;
    mxp__opdef od;             /* the held definition (op entry kept)       */
    struct mxp_op *op;         /* registry entry, for re-acquiring          */
    const mxp_op_def *def;     /* od.def                                    */
    void *params;              /* parsed against def                         */
    uint64_t generation;       /* registry generation def/params belong to   */
    int n_in, n_out, n_aux, n_visible;
    char (*names)[MXP_NAME_MAX]; /* [n_in | n_out | n_aux]                   */
    mxp_shape *shapes;         /* inferred signature [n_in | n_out | n_aux]  */
    int32_t *dtypes;
    int inferred;
    mxp__inst *cache[NODE_CACHE];
    int n_cache;
    mxp__inst *cur;            /* instance of the last bind                  */
    int creates;
    char *policy;              /* own impl policy (__impl__), NULL: the op's */
    char *pending_policy;      /* set_policy: applied at the next bind       */
    int policy_pending;
    uint8_t *in_grad;          /* [n_in] gradients backward is asked for, or
                                  NULL: unknown, all (mxp__node_set_in_grad) */
    int n_in_grad;
};

/* ------------------------------------------------------------ helpers */
static const char *dtype_str(int32_t d) {
    const char *s = mxp_dtype_name(d);
    return s ? s : "unknown";
}

static void free_kwargs(mxp__node *n) {
    for (int i = 0; i < n->n_kwargs; i++) {
        free(n->keys[i]);
        free(n->vals[i]);
    }
    free(n->keys);
    free(n->vals);
    n->keys = n->vals = NULL;
    n->n_kwargs = 0;
}

static void drop_instances(mxp__node *n) {
    for (int i = 0; i < n->n_cache; i++) mxp__inst_release(n->cache[i]);
    n->n_cache = 0;
    n->cur = NULL;
}

static void drop_def(mxp__node *n) {
    if (n->params) mxp__op_params_free(n->def, n->params);
    n->params = NULL;
    n->def = NULL;
    mxp__opdef_release(&n->od);
}

/* Load + pin the defining pack, parse the kwargs, list names. */
static int load_def(mxp__node *n) {
    int rc = mxp__opdef_acquire_op(n->op, &n->od);
    if (rc) return rc;
    const mxp_op_def *def = n->def = n->od.def;
    n->generation = n->od.generation;
    if (!def->infer_shape) return mxp__error(MXP_EPLUGIN, "op '%s': the definition has no infer_shape", n->name);
    rc = mxp__op_params_new(def, (const char *const *)n->keys, (const char *const *)n->vals, n->n_kwargs,
                            &n->params);
    if (rc) return rc;
    int counts[3];
    char(*all)[MXP_NAME_MAX] = NULL;
    if ((rc = mxp__op_list_all_names(def, n->params, &all, counts))) return rc;
    int shape_change = n->names && (n->n_in != counts[0] || n->n_out != counts[1] || n->n_aux != counts[2]);
    free(n->names);
    n->names = all;
    n->n_in = counts[0];
    n->n_out = counts[1];
    n->n_aux = counts[2];
    n->n_visible = mxp__opdef_visible_outputs(def, n->n_out);
    if (shape_change || !n->shapes) {
        int tot = n->n_in + n->n_out + n->n_aux;
        free(n->shapes);
        free(n->dtypes);
        n->shapes = calloc((size_t)tot + 1, sizeof *n->shapes);
        n->dtypes = calloc((size_t)tot + 1, sizeof *n->dtypes);
        if (!n->shapes || !n->dtypes) return mxp__error_oom("node shapes");
        n->inferred = 0;
    }
    return MXP_OK;
}

/* The registry moved (a pack loaded or reloaded, a policy changed): drop
 * everything derived from the old def and impls, then parse again. */
static int refresh(mxp__node *n) {
    drop_instances(n);
    drop_def(n);
    return load_def(n);
}

int mxp__node_set_policy(mxp__node *n, const char *policy) {
    if (!n) return mxp__error(MXP_EMISUSE, "node_set_policy: NULL node");
    if (policy) {
        int rc = mxp_op_policy_check(n->name, policy);
        if (rc) return rc;
    }
    char *copy = policy ? strdup(policy) : NULL;
    if (policy && !copy) return mxp__error_oom("node policy");
    free(n->pending_policy);
    n->pending_policy = copy;
    n->policy_pending = 1;
    return MXP_OK;
}

const char *mxp__node_policy(const mxp__node *n) {
    return !n ? NULL : n->policy_pending ? n->pending_policy : n->policy;
}

void mxp__node_release(mxp__node *n) {
    if (!n) return;
    drop_instances(n);
    drop_def(n);
    n->generation = UINT64_MAX; /* never a registry generation: the next use refreshes */
}

/* ------------------------------------------------------------ create */
int mxp__node_create(const char *op_name, int n_kwargs, const char *const *keys, const char *const *vals,
                     mxp__node **out) {
    if (out) *out = NULL;
    if (!op_name || !out || n_kwargs < 0 || (n_kwargs > 0 && (!keys || !vals)))
        return mxp__error(MXP_EMISUSE, "node: bad argument (op %s)", op_name ? op_name : "NULL");
    mxp__opdef od;
    int rc = mxp__opdef_acquire(op_name, &od);
    if (rc) return rc;
    mxp__node *n = calloc(1, sizeof *n);
    if (!n) {
        mxp__opdef_release(&od);
        return mxp__error_oom("node");
    }
    atomic_init(&n->refs, 1);
    n->op = od.op;
    snprintf(n->name, sizeof n->name, "%s", od.name);
    snprintf(n->label, sizeof n->label, "%s", od.name);
    /* load_def acquires again for the node's own hold. */
    mxp__opdef_release(&od);
    n->keys = calloc((size_t)n_kwargs + 1, sizeof *n->keys);
    n->vals = calloc((size_t)n_kwargs + 1, sizeof *n->vals);
    if (!n->keys || !n->vals) rc = mxp__error_oom("node kwargs");
    for (int i = 0; i < n_kwargs && !rc; i++) {
        if (!keys[i] || !vals[i]) {
            rc = mxp__error(MXP_EINVAL, "op '%s': kwarg %d has a NULL %s", n->name, i, keys[i] ? "value" : "key");
            break;
        }
        /* MXNet's reserved attributes (__shape__, __dtype__, __lr_mult__,
         * ...) ride along in symbol files; they are not op parameters.
         * __impl__ is ours: this node's implementation policy. */
        if (!strcmp(keys[i], "__impl__")) {
            free(n->policy);
            if (!(n->policy = strdup(vals[i]))) rc = mxp__error_oom("node policy");
            else if ((rc = mxp_op_policy_check(n->name, vals[i])))
                rc = mxp__error_prefix(rc, "op '%s': attribute __impl__", n->name);
            continue;
        }
        if (!strncmp(keys[i], "__", 2)) continue;
        n->keys[n->n_kwargs] = strdup(keys[i]);
        n->vals[n->n_kwargs] = strdup(vals[i]);
        n->n_kwargs++;
        if (!n->keys[n->n_kwargs - 1] || !n->vals[n->n_kwargs - 1]) rc = mxp__error_oom("node kwargs");
    }
    if (!rc) rc = load_def(n);
    if (rc) {
        mxp__node_free(n);
        return rc;
    }
    *out = n;
    return MXP_OK;
}

mxp__node *mxp__node_retain(mxp__node *n) {
    if (n) atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
    return n;
}

void mxp__node_free(mxp__node *n) {
    if (!n || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
    if (n->bound) mxp__op_bound_add(n->op, -1);
    drop_instances(n);
    drop_def(n);
    free_kwargs(n);
    free(n->policy);
    free(n->pending_policy);
    free(n->in_grad);
    free(n->names);
    free(n->shapes);
    free(n->dtypes);
    free(n);
}

void mxp__node_set_bound(mxp__node *n) {
    if (!n || n->bound) return;
    n->bound = 1;
    mxp__op_bound_add(n->op, 1);
}

int mxp__node_set_in_grad(mxp__node *n, const uint8_t *need, int n_in) {
    if (!n) return MXP_OK;
    uint8_t *c = NULL;
    if (need && n_in > 0 && !(c = malloc((size_t)n_in))) return mxp__error_oom("node in_grad");
    for (int i = 0; c && i < n_in; i++) c[i] = need[i] ? 1 : 0;
    free(n->in_grad);
    n->in_grad = c;
    n->n_in_grad = c ? n_in : 0;
    return MXP_OK;
}

void mxp__node_freeze(mxp__node *n) {
    if (n) n->frozen = 1;
}
uint64_t mxp__node_generation(const mxp__node *n) { return n ? n->generation : 0; }

const char *mxp__node_op_name(const mxp__node *n) { return n ? n->name : NULL; }
const char *mxp__node_label(const mxp__node *n) { return n ? n->label : NULL; }
void mxp__node_set_label(mxp__node *n, const char *node_name) {
    if (!n) return;
    if (node_name && node_name[0]) snprintf(n->label, sizeof n->label, "%s (%s)", node_name, n->name);
    else snprintf(n->label, sizeof n->label, "%s", n->name);
}
int mxp__node_num_inputs(const mxp__node *n) { return n ? n->n_in : 0; }
int mxp__node_num_outputs(const mxp__node *n) { return n ? n->n_out : 0; }
int mxp__node_num_visible_outputs(const mxp__node *n) { return n ? n->n_visible : 0; }
int mxp__node_num_aux(const mxp__node *n) { return n ? n->n_aux : 0; }
const char *mxp__node_input_name(const mxp__node *n, int i) {
    return n && i >= 0 && i < n->n_in ? n->names[i] : NULL;
}
const char *mxp__node_output_name(const mxp__node *n, int i) {
    return n && i >= 0 && i < n->n_out ? n->names[n->n_in + i] : NULL;
}
uint32_t mxp__node_resources(const mxp__node *n) { return n && n->def ? n->def->resources : 0; }
uint32_t mxp__node_flags(const mxp__node *n) { return n && n->def ? n->def->flags : 0; }
const char *mxp__node_impl_name(const mxp__node *n) { return n ? mxp__inst_impl_name(n->cur) : NULL; }
uint64_t mxp__node_workspace_bytes(const mxp__node *n) { return n && n->cur ? n->cur->workspace_bytes : 0; }
int mxp__node_create_count(const mxp__node *n) { return n ? n->creates : 0; }
const mxp_shape *mxp__node_shapes(const mxp__node *n) { return n->shapes; }
const int32_t *mxp__node_dtypes(const mxp__node *n) { return n->dtypes; }
mxp__inst *mxp__node_current(const mxp__node *n) { return n->cur; }
int mxp__node_runs_on(const mxp__node *n, const mxp__inst *in) {
    return n->frozen && !n->policy_pending && n->cur == in;
}
const mxp_op_def *mxp__node_def(const mxp__node *n) { return n->def; }

static const char *kind_name(int k) { return k == 0 ? "input" : k == 1 ? "output" : "aux state"; }

/* Entry i of the signature as "input 1 'rhs'". */
static void entry_desc(const mxp__node *n, int i, char *buf, size_t cap) {
    int k = i < n->n_in ? 0 : i < n->n_in + n->n_out ? 1 : 2;
    int j = k == 0 ? i : k == 1 ? i - n->n_in : i - n->n_in - n->n_out;
    snprintf(buf, cap, "%s %d '%s'", kind_name(k), j, n->names[i]);
}

/* ------------------------------------------------------------ infer */
int mxp__node_infer(mxp__node *n, mxp_shape *in_shapes, int32_t *in_dtypes, mxp_shape *out_shapes,
                    int32_t *out_dtypes, mxp_shape *aux_shapes, int32_t *aux_dtypes) {
    if (!n) return mxp__error(MXP_EMISUSE, "node_infer: NULL node");
    if (!n->frozen && mxp_registry_generation() != n->generation) {
        int rc = refresh(n);
        if (rc) return rc;
    }
    int tot = n->n_in + n->n_out + n->n_aux;
    mxp_shape given_small[SIG_SMALL];
    int32_t given_t_small[SIG_SMALL];
    int heap = tot > SIG_SMALL;
    mxp_shape *given = heap ? calloc((size_t)tot + 1, sizeof *given) : given_small;
    int32_t *given_t = heap ? calloc((size_t)tot + 1, sizeof *given_t) : given_t_small;
    if (!given || !given_t) {
        if (heap) free(given), free(given_t);
        return mxp__error_oom("infer");
    }
    mxp_shape *const src_s[3] = {in_shapes, out_shapes, aux_shapes};
    int32_t *const src_t[3] = {in_dtypes, out_dtypes, aux_dtypes};
    const int cnt[3] = {n->n_in, n->n_out, n->n_aux};
    for (int k = 0, base = 0; k < 3; base += cnt[k], k++)
        for (int i = 0; i < cnt[k]; i++) {
            mxp_shape s = {.ndim = -1};
            if (src_s[k]) s = src_s[k][i];
            given[base + i] = s;
            given_t[base + i] = src_t[k] ? src_t[k][i] : MXP_DTYPE_UNKNOWN;
        }
    memcpy(n->shapes, given, (size_t)tot * sizeof *given);
    memcpy(n->dtypes, given_t, (size_t)tot * sizeof *given_t);
    n->inferred = 0;
    const mxp_op_def *def = n->def;
    char a[128], b[128], what[96];
    int rc = MXP_OK;

    /* Shapes. */
    char who[MXP_NAME_MAX + 8];
    snprintf(who, sizeof who, "op '%s'", n->name);
    int src = mxp__opdef_infer_shape(def, n->params, who, (uint32_t)n->n_in, (uint32_t)n->n_out, (uint32_t)n->n_aux,
                                     n->shapes, n->shapes + n->n_in, n->shapes + n->n_in + n->n_out);
    if (src != MXP_OK && src != MXP_EINCOMPLETE) {
        rc = src;
        goto done;
    }
    for (int i = 0; i < tot; i++) {
        if (given[i].ndim >= 0 && mxp__shape_known(&given[i]) && !mxp__shape_eq(&given[i], &n->shapes[i])) {
            entry_desc(n, i, what, sizeof what);
            mxp__shape_str(&given[i], a, sizeof a);
            mxp__shape_str(&n->shapes[i], b, sizeof b);
            rc = mxp__error(MXP_ESHAPE, "op '%s': %s has shape %s, but the op infers %s", n->name, what, a, b);
            goto done;
        }
        if (!mxp__shape_known(&n->shapes[i])) {
            entry_desc(n, i, what, sizeof what);
            mxp__shape_str(&n->shapes[i], a, sizeof a);
            rc = mxp__error(MXP_ESHAPE, "op '%s': cannot infer the shape of %s (got %s)", n->name, what, a);
            goto done;
        }
    }

    /* Dtypes: the op's rule (or the default one: the first known dtype
     * for every entry), then float32 for what is left. */
    rc = mxp__opdef_infer_type(def, n->params, who, (uint32_t)n->n_in, (uint32_t)n->n_out, (uint32_t)n->n_aux,
                               n->dtypes, n->dtypes + n->n_in, n->dtypes + n->n_in + n->n_out);
    if (rc) goto done;
    int32_t first = MXP_DTYPE_UNKNOWN;
    for (int i = 0; i < tot && first == MXP_DTYPE_UNKNOWN; i++)
        if (n->dtypes[i] != MXP_DTYPE_UNKNOWN) first = n->dtypes[i];
    if (first == MXP_DTYPE_UNKNOWN) first = MXP_DTYPE_F32;
    for (int i = 0; i < tot; i++) {
        /* Without infer_type every entry took the first known dtype, so a
         * mismatching given one is an error below. */
        if (n->dtypes[i] == MXP_DTYPE_UNKNOWN) n->dtypes[i] = first;
        if (given_t[i] != MXP_DTYPE_UNKNOWN && given_t[i] != n->dtypes[i]) {
            entry_desc(n, i, what, sizeof what);
            rc = mxp__error(MXP_ETYPE, "op '%s': %s has dtype %s, but the op infers %s", n->name, what,
                            dtype_str(given_t[i]), dtype_str(n->dtypes[i]));
            goto done;
        }
        if (!mxp_dtype_size(n->dtypes[i])) {
            entry_desc(n, i, what, sizeof what);
            rc = mxp__error(MXP_ETYPE, "op '%s': %s has invalid dtype %d", n->name, what, n->dtypes[i]);
            goto done;
        }
    }
    /* Hand the result back. */
    for (int k = 0, base = 0; k < 3; base += cnt[k], k++)
        for (int i = 0; i < cnt[k]; i++) {
            if (src_s[k]) src_s[k][i] = n->shapes[base + i];
            if (src_t[k]) src_t[k][i] = n->dtypes[base + i];
        }
    n->inferred = 1;
done:
    if (heap) free(given), free(given_t);
    return rc;
}

/* ------------------------------------------------------------ bind */
static int inst_matches(const mxp__inst *in, const mxp__node *n, mxp_device dev, int is_train) {
    int tot = n->n_in + n->n_out + n->n_aux;
    if (in->dev.type != dev.type || in->dev.id != dev.id || in->is_train != is_train) return 0;
    if (in->generation != n->generation) return 0;
    for (int i = 0; i < tot; i++)
        if (!mxp__shape_eq(&in->shapes[i], &n->shapes[i]) || in->dtypes[i] != n->dtypes[i]) return 0;
    return 1;
}

int mxp__node_bind(mxp__node *n, mxp_device dev, int is_train) {
    if (!n) return mxp__error(MXP_EMISUSE, "node_bind: NULL node");
    /* A frozen node keeps what it has: its user (the invoke cache)
     * compares generations itself and drops it instead. */
    if (!n->frozen && mxp_registry_generation() != n->generation) {
        /* Keep the signature: it does not depend on which impl runs. */
        int tot = n->n_in + n->n_out + n->n_aux, was = n->inferred;
        mxp_shape *s = malloc(((size_t)tot + 1) * sizeof *s);
        int32_t *t = malloc(((size_t)tot + 1) * sizeof *t);
        if (!s || !t) {
            free(s);
            free(t);
            return mxp__error_oom("bind");
        }
        memcpy(s, n->shapes, (size_t)tot * sizeof *s);
        memcpy(t, n->dtypes, (size_t)tot * sizeof *t);
        int rc = refresh(n);
        if (!rc && was) {
            if (tot != n->n_in + n->n_out + n->n_aux) rc = mxp__error(MXP_EINVAL, "op '%s': argument counts changed on reload", n->name);
            else rc = mxp__node_infer(n, s, t, s + n->n_in, t + n->n_in, s + n->n_in + n->n_out, t + n->n_in + n->n_out);
        }
        free(s);
        free(t);
        if (rc) return rc;
    }
    if (!n->inferred) return mxp__error(MXP_EMISUSE, "op '%s': bind before shapes and types are inferred", n->name);
    if (n->policy_pending) {
        /* Only binds (forwards) get here, never a backward: the switch
         * happens between one step and the next. */
        free(n->policy);
        n->policy = n->pending_policy;
        n->pending_policy = NULL;
        n->policy_pending = 0;
        drop_instances(n);
    }
    if (n->cur && inst_matches(n->cur, n, dev, is_train)) return MXP_OK;
    for (int i = 0; i < n->n_cache; i++)
        if (inst_matches(n->cache[i], n, dev, is_train)) {
            n->cur = n->cache[i];
            return MXP_OK;
        }
    mxp_select_query q;
    mxp__opdef_query(&q, n->params, dev, is_train, (uint32_t)n->n_in, (uint32_t)n->n_out, (uint32_t)n->n_aux,
                     n->shapes, n->dtypes);
    q.policy = n->policy;
    if (n->in_grad && n->n_in_grad == n->n_in) q.in_grad = n->in_grad;
    mxp__inst *in;
    int rc = mxp__inst_bind(&n->od, &q, (const char *const *)n->keys, (const char *const *)n->vals, n->n_kwargs, &in);
    if (rc) return rc;
    in->generation = n->generation;
    n->creates += in->created;
    if (n->n_cache == NODE_CACHE) {
        mxp__inst_release(n->cache[0]);
        memmove(n->cache, n->cache + 1, (NODE_CACHE - 1) * sizeof *n->cache);
        n->n_cache--;
    }
    n->cache[n->n_cache++] = in;
    n->cur = in;
    return MXP_OK;
}

/* ------------------------------------------------------------ backward deps */
void mxp__node_backward_deps(const mxp__node *n, uint8_t *need_out_grad, uint8_t *need_in, uint8_t *need_out) {
    if (!n) return;
    uint8_t *og = calloc((size_t)n->n_out + 1, 1), *ni = calloc((size_t)n->n_in + 1, 1),
            *no = calloc((size_t)n->n_out + 1, 1);
    if (og && ni && no) {
        mxp__opdef_backward_deps(n->def, n->params, (uint32_t)n->n_in, (uint32_t)n->n_out, og, ni, no);
        if (need_out_grad) memcpy(need_out_grad, og, (size_t)n->n_out);
        if (need_in) memcpy(need_in, ni, (size_t)n->n_in);
        if (need_out) memcpy(need_out, no, (size_t)n->n_out);
    } else {
        if (need_out_grad) memset(need_out_grad, 1, (size_t)n->n_out);
        if (need_in) memset(need_in, 1, (size_t)n->n_in);
        if (need_out) memset(need_out, 1, (size_t)n->n_out);
    }
    free(og);
    free(ni);
    free(no);
}

/* Shape / dtype of signature entry i, for exec.c's checks and messages. */
void mxp__node_entry_desc(const mxp__node *n, int i, char *buf, size_t cap) { entry_desc(n, i, buf, cap); }
