/* optimizer.c — mx.optimizer's SGD (with momentum), Adam and RMSProp on
 * the in-place update ops of ops-basic (sgd_update, sgd_mom_update,
 * adam_update, rmsprop_update; plugins/ops-basic/src/optimizer.c), with
 * MXNet's bookkeeping: a per-index update count, num_update = the largest
 * count, lr from the schedule at num_update, Adam's bias correction folded
 * into lr (lr * sqrt(1 - beta2^t) / (1 - beta1^t), t = the index's count),
 * weight decay only on *_weight / *_gamma parameters unless a per-name
 * multiplier says otherwise (set_lr_mult / set_wd_mult: MXNet's lr_mult /
 * wd_mult dicts, filled from variables' __lr_mult__ / __wd_mult__ by the
 * module).  State arrays are
 * created on first use as zeros next to the weight.  Save/load of states
 * (with the CPU RNG position) in a .params container: see mxplug/train.h.
 * Invariant: states[i].n_state arrays are non-NULL once states[i].used. */
#include "train/train.h"

#include "op/op.h"
#include "plugin/plugin.h"
#include "resource/resource.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { OPT_SGD = 0, OPT_ADAM = 1, OPT_RMSPROP = 2 };

/* node: the update op for this parameter, kept between steps with the
 * kwargs it was created with (k_lr, k_wd: the only ones that vary; the
 * rest are fixed at create) and the weight signature it was inferred for,
 * so a step with unchanged lr pushes through a bound node instead of
 * parsing kwargs, selecting and binding a temporary one (mxp_invoke).
 * It pushes through a pre-created engine op (step) while the arrays stay
 * the same, as an executor's nodes do, and like them pins the ops pack
 * while it lives. */
typedef struct pstate {
    int used;
    int64_t count;
    mxp_ndarray *s[2];
    mxp__node *node;
    mxp__node_step *step;   /* node's pre-created engine op (op.h) */
    double k_lr, k_wd;
    int k_ndim, k_dtype;
    int64_t k_shape[MXP_MAX_NDIM];
} pstate;

struct mxp_optimizer {
    int type;
    double lr, wd, rescale_grad, clip_gradient, momentum;
    double beta1, beta2, epsilon, gamma1, clip_weights;
    mxp_lr_schedule *sched;
    int64_t num_update;
    pstate *states;
    int n_states;
    /* Update nodes pin the ops pack between steps; a reload makes them let
     * go (plugin.h).  Everything touching `states` runs inside it. */
    mxp__holder holder;
    struct mult { char *name; double lr, wd; int has_lr, has_wd; } *mults;
    int n_mults;
};

static void release_nodes(void *owner) {
    mxp_optimizer *o = owner;
    for (int i = 0; i < o->n_states; i++) {
        mxp__node_step_reset(o->states[i].step);
        mxp__node_release(o->states[i].node);
    }
}

static const char *type_names[] = {"sgd", "adam", "rmsprop"};

static int n_state_arrays(const mxp_optimizer *o) {
    return o->type == OPT_ADAM ? 2 : o->type == OPT_RMSPROP ? 1 : o->momentum != 0.0 ? 1 : 0;
}

int mxp_optimizer_create(const char *type, int n_kwargs, const char *const *keys, const char *const *vals,
                         mxp_optimizer **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_optimizer_create: out is NULL");
    *out = NULL;
    int t = -1;
    for (int i = 0; type && i < 3; i++)
        if (!strcasecmp(type, type_names[i])) t = i;
    if (t < 0) return mxp__error(MXP_EINVAL, "optimizer '%s': unknown (sgd, adam, rmsprop)", type ? type : "(null)");
    if (n_kwargs < 0 || (n_kwargs && (!keys || !vals)))
        return mxp__error(MXP_EINVAL, "optimizer '%s': bad kwargs", type);
    mxp_optimizer o = {.type = t, .lr = t == OPT_SGD ? 0.01 : 0.001, .rescale_grad = 1.0, .clip_gradient = -1.0,
                       .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .gamma1 = 0.9, .clip_weights = -1.0};
    struct { const char *key; double *dst; int types; } known[] = {
        {"learning_rate", &o.lr, 7}, {"lr", &o.lr, 7}, {"wd", &o.wd, 7}, {"rescale_grad", &o.rescale_grad, 7},
        {"clip_gradient", &o.clip_gradient, 7}, {"momentum", &o.momentum, 1}, {"beta1", &o.beta1, 2},
        {"beta2", &o.beta2, 2}, {"epsilon", &o.epsilon, 6}, {"gamma1", &o.gamma1, 4},
        {"clip_weights", &o.clip_weights, 4},
    };
    for (int i = 0; i < n_kwargs; i++) {
        int found = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
            if (!keys[i] || strcmp(keys[i], known[k].key) || !(known[k].types & (1 << t))) continue;
            found = 1;
            if (!vals[i] || !strcmp(vals[i], "None")) {
                if (!strcmp(keys[i], "clip_gradient") || !strcmp(keys[i], "clip_weights")) *known[k].dst = -1.0;
                else return mxp__error(MXP_EINVAL, "optimizer '%s': '%s' cannot be None", type, keys[i]);
                break;
            }
            char *end;
            double v = strtod(vals[i], &end);
            if (end == vals[i] || *end)
                return mxp__error(MXP_EINVAL, "optimizer '%s': cannot parse '%s' as a number for '%s'", type,
                                  vals[i], keys[i]);
            if (!isfinite(v)) /* inf/nan (or 1e999) would make every weight NaN */
                return mxp__error(MXP_EINVAL, "optimizer '%s': '%s' must be a finite number, not '%s'", type,
                                  keys[i], vals[i]);
            *known[k].dst = v;
        }
        if (!found)
            return mxp__error(MXP_EINVAL, "optimizer '%s': unknown parameter '%s'", type, keys[i] ? keys[i] : "(null)");
    }
    if (!(o.lr >= 0)) return mxp__error(MXP_EINVAL, "optimizer '%s': learning_rate %g < 0", type, o.lr);
    mxp_optimizer *p = malloc(sizeof *p);
    if (!p) return mxp__error_oom("optimizer");
    *p = o;
    mxp__holder_register(&p->holder, release_nodes, p);
    *out = p;
    return MXP_OK;
}

static void free_states(mxp_optimizer *o) {
    for (int i = 0; i < o->n_states; i++) {
        mxp_ndarray_release(o->states[i].s[0]);
        mxp_ndarray_release(o->states[i].s[1]);
        mxp__node_step_free(o->states[i].step);
        mxp__node_free(o->states[i].node);
    }
    free(o->states);
    o->states = NULL;
    o->n_states = 0;
}

void mxp_optimizer_free(mxp_optimizer *opt) {
    if (!opt) return;
    mxp__holder_unregister(&opt->holder);
    free_states(opt);
    for (int i = 0; i < opt->n_mults; i++) free(opt->mults[i].name);
    free(opt->mults);
    mxp_lr_schedule_free(opt->sched);
    free(opt);
}

static struct mult *find_mult(const mxp_optimizer *o, const char *name) {
    for (int i = 0; name && i < o->n_mults; i++)
        if (!strcmp(o->mults[i].name, name)) return &o->mults[i];
    return NULL;
}

static int set_mult(mxp_optimizer *opt, const char *name, double mult, int wd) {
    if (!opt || !name) return mxp__error(MXP_EINVAL, "mxp_optimizer_set_%s_mult: NULL argument", wd ? "wd" : "lr");
    if (!(mult >= 0) || isinf(mult))
        return mxp__error(MXP_EINVAL, "optimizer: %s_mult %g of '%s' is not a finite value >= 0", wd ? "wd" : "lr",
                          mult, name);
    struct mult *m = find_mult(opt, name);
    if (!m) {
        struct mult *g = realloc(opt->mults, (size_t)(opt->n_mults + 1) * sizeof *g);
        if (!g) return mxp__error_oom("optimizer multipliers");
        opt->mults = g;
        m = &g[opt->n_mults];
        memset(m, 0, sizeof *m);
        if (!(m->name = strdup(name))) return mxp__error_oom("optimizer multipliers");
        opt->n_mults++;
    }
    if (wd) m->wd = mult, m->has_wd = 1;
    else m->lr = mult, m->has_lr = 1;
    return MXP_OK;
}

int mxp_optimizer_set_lr_mult(mxp_optimizer *opt, const char *name, double mult) { return set_mult(opt, name, mult, 0); }
int mxp_optimizer_set_wd_mult(mxp_optimizer *opt, const char *name, double mult) { return set_mult(opt, name, mult, 1); }

void mxp_optimizer_set_lr_schedule(mxp_optimizer *opt, mxp_lr_schedule *sched) {
    if (!opt) return;
    mxp_lr_schedule_free(opt->sched);
    opt->sched = sched;
}

const char *mxp_optimizer_type(const mxp_optimizer *opt) { return opt ? type_names[opt->type] : NULL; }
int64_t mxp_optimizer_num_update(const mxp_optimizer *opt) { return opt ? opt->num_update : 0; }
double mxp_optimizer_lr(const mxp_optimizer *opt) {
    return opt ? mxp_lr_schedule_lr(opt->sched, opt->lr, opt->num_update) : 0.0;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int grow(mxp_optimizer *o, int index) {
    if (index < o->n_states) return MXP_OK;
    int n = index + 1 > 2 * o->n_states ? index + 1 : 2 * o->n_states;
    pstate *s = realloc(o->states, (size_t)n * sizeof *s);
    if (!s) return mxp__error_oom("optimizer states");
    memset(s + o->n_states, 0, (size_t)(n - o->n_states) * sizeof *s);
    o->states = s;
    o->n_states = n;
    return MXP_OK;
}

static int zeros_like(mxp_ndarray *w, mxp_ndarray **out) {
    int rc = mxp_ndarray_create(mxp_ndarray_shape(w), mxp_ndarray_ndim(w), mxp_ndarray_dtype(w), mxp_ndarray_device(w), out);
    if (rc == MXP_OK) rc = mxp_ndarray_fill(*out, 0.0);
    return rc;
}

/* Is st->node the update for (lr, wd) on weight's signature? */
static int node_fits(const pstate *st, double lr, double wd, mxp_ndarray *weight) {
    int nd = mxp_ndarray_ndim(weight);
    return st->node && st->k_lr == lr && st->k_wd == wd && st->k_dtype == mxp_ndarray_dtype(weight) &&
           st->k_ndim == nd && !memcmp(st->k_shape, mxp_ndarray_shape(weight), (size_t)nd * sizeof(int64_t));
}

/* Replace st->node with a node for op(kv) inferred on in -> weight, or
 * leave it NULL when the op's arity is not the plain in-place update this
 * cache assumes (the caller then goes through mxp_invoke). */
static int make_node(pstate *st, const char *op, int n_in, mxp_ndarray *const *in, mxp_ndarray *weight,
                     const char *const *kv, double lr, double wd) {
    mxp__node_step_free(st->step);
    st->step = NULL;
    mxp__node_free(st->node);
    st->node = NULL;
    const char *keys[16], *vals[16];
    int n = 0;
    while (kv[2 * n] && n < 16) {
        keys[n] = kv[2 * n];
        vals[n] = kv[2 * n + 1];
        n++;
    }
    mxp__node *nd = NULL;
    int rc = mxp__node_create(op, n, keys, vals, &nd);
    if (rc) return rc;
    mxp__node_set_bound(nd); /* a reload may not drop its op while it lives */
    if (mxp__node_num_inputs(nd) != n_in || mxp__node_num_outputs(nd) != 1 || mxp__node_num_aux(nd) != 0 || n_in > 4) {
        mxp__node_free(nd);
        return MXP_OK;
    }
    mxp_shape sh[5];
    int32_t dt[5];
    memset(sh, 0, sizeof sh);
    for (int i = 0; i <= n_in; i++) {
        mxp_ndarray *a = i < n_in ? in[i] : weight;
        sh[i].ndim = mxp_ndarray_ndim(a);
        memcpy(sh[i].dims, mxp_ndarray_shape(a), (size_t)sh[i].ndim * sizeof(int64_t));
        dt[i] = mxp_ndarray_dtype(a);
    }
    rc = mxp__node_infer(nd, sh, dt, sh + n_in, dt + n_in, NULL, NULL);
    if (rc) {
        mxp__node_free(nd);
        return rc;
    }
    st->node = nd;
    st->k_lr = lr;
    st->k_wd = wd;
    st->k_dtype = mxp_ndarray_dtype(weight);
    st->k_ndim = mxp_ndarray_ndim(weight);
    memcpy(st->k_shape, mxp_ndarray_shape(weight), (size_t)st->k_ndim * sizeof(int64_t));
    return MXP_OK;
}

/* Push op(kv) in place on weight: through the parameter's node (kept while
 * lr and wd stay the same), else a one-off mxp_invoke. */
static int push_update(pstate *st, const char *op, int n_in, mxp_ndarray *const *in, mxp_ndarray *weight,
                       const char *const *kv, double lr, double wd) {
    mxp_ndarray *out[1] = {weight};
    if (!node_fits(st, lr, wd, weight)) {
        int rc = make_node(st, op, n_in, in, weight, kv, lr, wd);
        if (rc) return rc;
        if (!st->node) return mxp__train_invoke(op, n_in, in, 1, out, kv);
    }
    int rc = mxp__node_forward_step(st->node, &st->step, in, out, NULL, NULL, 0);
    if (rc) {
        mxp__node_step_free(st->step);
        st->step = NULL;
        mxp__node_free(st->node);
        st->node = NULL;
    }
    return rc;
}

static int update_held(mxp_optimizer *opt, int index, const char *name, mxp_ndarray *weight, mxp_ndarray *grad);

int mxp_optimizer_update(mxp_optimizer *opt, int index, const char *name, mxp_ndarray *weight, mxp_ndarray *grad) {
    if (!opt || !weight || !grad || index < 0) return mxp__error(MXP_EINVAL, "mxp_optimizer_update: bad argument");
    mxp__holder_enter(&opt->holder, 1);
    int rc = update_held(opt, index, name, weight, grad);
    mxp__holder_leave(&opt->holder, 0);
    return rc;
}

static int update_held(mxp_optimizer *opt, int index, const char *name, mxp_ndarray *weight, mxp_ndarray *grad) {
    int rc = grow(opt, index);
    if (rc) return rc;
    pstate *st = &opt->states[index];
    int ns = n_state_arrays(opt);
    if (!st->used) {
        for (int k = 0; k < ns; k++) {
            if (!st->s[k] && (rc = zeros_like(weight, &st->s[k]))) return rc;
        }
        st->used = 1;
    }
    st->count++;
    if (st->count > opt->num_update) opt->num_update = st->count;
    double lr = mxp_lr_schedule_lr(opt->sched, opt->lr, opt->num_update);
    double wd = (name && !ends_with(name, "_weight") && !ends_with(name, "_gamma")) ? 0.0 : opt->wd;
    const struct mult *mu = find_mult(opt, name);
    if (mu && mu->has_lr) lr *= mu->lr;
    if (mu && mu->has_wd) wd = opt->wd * mu->wd;
    if (opt->type == OPT_ADAM) {
        double t = (double)st->count;
        double coef1 = 1.0 - pow(opt->beta1, t), coef2 = 1.0 - pow(opt->beta2, t);
        lr *= sqrt(coef2) / coef1;
    }
    mxp_ndarray *in[4] = {weight, grad, st->s[0], st->s[1]};
    const char *op = opt->type == OPT_ADAM      ? "adam_update"
                     : opt->type == OPT_RMSPROP ? "rmsprop_update"
                     : ns == 0                  ? "sgd_update"
                                                : "sgd_mom_update";
    int n_in = opt->type == OPT_ADAM ? 4 : opt->type == OPT_RMSPROP ? 3 : ns == 0 ? 2 : 3;
    if (node_fits(st, lr, wd, weight)) {
        rc = push_update(st, op, n_in, in, weight, NULL, lr, wd);
    } else {
        /* Kwargs as text only when a node must be made. */
        char b_lr[32], b_wd[32], b_rs[32], b_cl[32], b_a[32], b_b[32], b_c[32], b_d[32];
        mxp__train_fmt(b_lr, lr);
        mxp__train_fmt(b_wd, wd);
        mxp__train_fmt(b_rs, opt->rescale_grad);
        mxp__train_fmt(b_cl, opt->clip_gradient < 0 ? -1.0 : opt->clip_gradient);
        const char *kv[20];
        int k = 0;
        kv[k++] = "lr", kv[k++] = b_lr;
        switch (opt->type) {
        case OPT_SGD:
            if (ns) kv[k++] = "momentum", kv[k++] = mxp__train_fmt(b_a, opt->momentum);
            break;
        case OPT_ADAM:
            kv[k++] = "beta1", kv[k++] = mxp__train_fmt(b_a, opt->beta1);
            kv[k++] = "beta2", kv[k++] = mxp__train_fmt(b_b, opt->beta2);
            kv[k++] = "epsilon", kv[k++] = mxp__train_fmt(b_c, opt->epsilon);
            break;
        default:
            kv[k++] = "gamma1", kv[k++] = mxp__train_fmt(b_a, opt->gamma1);
            kv[k++] = "epsilon", kv[k++] = mxp__train_fmt(b_b, opt->epsilon);
            kv[k++] = "clip_weights", kv[k++] = mxp__train_fmt(b_d, opt->clip_weights < 0 ? -1.0 : opt->clip_weights);
            break;
        }
        kv[k++] = "wd", kv[k++] = b_wd;
        kv[k++] = "rescale_grad", kv[k++] = b_rs;
        kv[k++] = "clip_gradient", kv[k++] = b_cl;
        kv[k] = NULL;
        rc = push_update(st, op, n_in, in, weight, kv, lr, wd);
    }
    if (rc) return mxp__error_prefix(rc, "optimizer '%s': update of parameter %d%s%s%s", type_names[opt->type], index,
                                     name ? " ('" : "", name ? name : "", name ? "')" : "");
    return MXP_OK;
}

static int i64_array(const int64_t *v, int n, mxp_ndarray **out) {
    int64_t shp[1] = {n};
    mxp_device cpu = {MXP_DEV_CPU, 0};
    int rc = mxp_ndarray_create(shp, 1, MXP_DTYPE_I64, cpu, out);
    if (rc == MXP_OK) rc = mxp_ndarray_sync_copy_from(*out, v, (size_t)n * sizeof *v);
    if (rc && *out) {
        /* The caller counts only arrays that were filled. */
        mxp_ndarray_release(*out);
        *out = NULL;
    }
    return rc;
}

/* Parameters without gradients leave holes in the indices of a states
 * file; allow that many beyond its entry count. */
enum { STATES_INDEX_SLACK = 4096 };

int mxp_optimizer_save_states(mxp_optimizer *opt, const char *path) {
    if (!opt || !path) return mxp__error(MXP_EINVAL, "mxp_optimizer_save_states: NULL argument");
    mxp_rng_stream rs;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    int rc = mxp__rng_reserve(cpu, 0, &rs);
    if (rc) return rc;
    int n_used = 0;
    for (int i = 0; i < opt->n_states; i++) n_used += opt->states[i].used;
    int cap = 1 + n_used * 3;
    mxp_ndarray **arrs = calloc((size_t)cap, sizeof *arrs);
    char **names = calloc((size_t)cap, sizeof *names);
    int n = 0;
    if (!arrs || !names) {
        rc = mxp__error_oom("states");
        goto done;
    }
    int64_t meta[6] = {1, opt->num_update, n_used, (int64_t)((uint64_t)rs.key[0] | (uint64_t)rs.key[1] << 32),
                       (int64_t)rs.counter, opt->type};
    if ((rc = i64_array(meta, 6, &arrs[n]))) goto done;
    names[n++] = strdup("mxp_states:meta");
    for (int i = 0; i < opt->n_states; i++) {
        pstate *st = &opt->states[i];
        if (!st->used) continue;
        char buf[64];
        if ((rc = i64_array(&st->count, 1, &arrs[n]))) goto done;
        snprintf(buf, sizeof buf, "count:%d", i);
        names[n++] = strdup(buf);
        for (int k = 0; k < n_state_arrays(opt); k++) {
            arrs[n] = mxp_ndarray_retain(st->s[k]);
            snprintf(buf, sizeof buf, "state:%d:%d", i, k);
            names[n++] = strdup(buf);
        }
    }
    for (int i = 0; i < n; i++)
        if (!names[i]) {
            rc = mxp__error_oom("states");
            goto done;
        }
    rc = mxp_ndarray_save(path, n, arrs, (const char *const *)names);
done:
    for (int i = 0; i < n; i++) {
        mxp_ndarray_release(arrs[i]);
        free(names[i]);
    }
    free(arrs);
    free(names);
    return rc;
}

static int read_i64(mxp_ndarray *a, int64_t *v, int n) {
    if (mxp_ndarray_dtype(a) != MXP_DTYPE_I64 || mxp_ndarray_size(a) != n) return MXP_EFORMAT;
    return mxp_ndarray_sync_copy_to(a, v, (size_t)n * sizeof *v);
}

int mxp_optimizer_load_states(mxp_optimizer *opt, const char *path) {
    if (!opt || !path) return mxp__error(MXP_EINVAL, "mxp_optimizer_load_states: NULL argument");
    int n = 0;
    mxp_ndarray **arrs = NULL;
    char **names = NULL;
    int rc = mxp_ndarray_load(path, &n, &arrs, &names);
    if (rc) return rc;
    int64_t meta[6];
    if (!names || n < 1 || strcmp(names[0], "mxp_states:meta") || read_i64(arrs[0], meta, 6) || meta[0] != 1) {
        rc = mxp__error(MXP_EFORMAT, "'%s': not an mxplug states file (format 1)", path);
        goto done;
    }
    if (meta[5] != opt->type) {
        rc = mxp__error(MXP_EFORMAT, "'%s': states of a '%s' optimizer, this one is '%s'", path,
                        meta[5] >= 0 && meta[5] < 3 ? type_names[meta[5]] : "?", type_names[opt->type]);
        goto done;
    }
    mxp_device cpu = {MXP_DEV_CPU, 0};
    mxp_rng_stream rs;
    if ((rc = mxp__rng_reserve(cpu, 0, &rs))) goto done;
    uint64_t key = (uint64_t)rs.key[0] | (uint64_t)rs.key[1] << 32;
    if (key != (uint64_t)meta[3]) {
        rc = mxp__error(MXP_EINVAL, "'%s': the random generator was seeded differently from the saved run "
                        "(call mxp_random_seed with that run's seed first)", path);
        goto done;
    }
    if (rs.counter > (uint64_t)meta[4]) {
        rc = mxp__error(MXP_EINVAL, "'%s': the random generator is already past the saved position (%" PRIu64
                        " > %" PRIu64 " blocks); re-seed before loading", path, rs.counter, (uint64_t)meta[4]);
        goto done;
    }
    /* Parse everything before touching the optimizer. */
    pstate *ns = NULL;
    int n_ns = 0;
    int per = n_state_arrays(opt);
    for (int i = 1; i < n && rc == MXP_OK; i++) {
        int idx = -1, k = -1;
        char tail;
        if (sscanf(names[i], "count:%d%c", &idx, &tail) == 1 && idx >= 0) {
            k = -1;
        } else if (sscanf(names[i], "state:%d:%d%c", &idx, &k, &tail) == 2 && idx >= 0 && k >= 0 && k < per) {
        } else {
            rc = mxp__error(MXP_EFORMAT, "'%s': unexpected entry '%s'", path, names[i]);
            break;
        }
        /* Indices are parameter positions; the file holds n entries, each
         * index needs 1 + per of them, so a larger index than the entries
         * could describe is a corrupt (or hostile: count:50000000 cost
         * 6.6 GB) file.  Allocation follows what the file can hold. */
        if (idx > n + STATES_INDEX_SLACK) {
            rc = mxp__error(MXP_EFORMAT,
                            "'%s': entry '%s': index %d is larger than a file of %d entries can describe", path,
                            names[i], idx, n);
            break;
        }
        if (idx >= n_ns) {
            pstate *g = realloc(ns, (size_t)(idx + 1) * sizeof *g);
            if (!g) {
                rc = mxp__error_oom("states");
                break;
            }
            memset(g + n_ns, 0, (size_t)(idx + 1 - n_ns) * sizeof *g);
            ns = g;
            n_ns = idx + 1;
        }
        if (k < 0) {
            if (read_i64(arrs[i], &ns[idx].count, 1)) rc = mxp__error(MXP_EFORMAT, "'%s': bad '%s'", path, names[i]);
            ns[idx].used = 1;
        } else {
            mxp_ndarray_release(ns[idx].s[k]);
            ns[idx].s[k] = mxp_ndarray_retain(arrs[i]);
        }
    }
    for (int i = 0; i < n_ns && rc == MXP_OK; i++)
        for (int k = 0; k < per; k++)
            if (ns[i].used && !ns[i].s[k]) rc = mxp__error(MXP_EFORMAT, "'%s': index %d lacks state %d", path, i, k);
    if (rc != MXP_OK) {
        for (int i = 0; i < n_ns; i++) {
            mxp_ndarray_release(ns[i].s[0]);
            mxp_ndarray_release(ns[i].s[1]);
        }
        free(ns);
        goto done;
    }
    mxp__holder_enter(&opt->holder, 1);
    free_states(opt);
    opt->states = ns;
    opt->n_states = n_ns;
    mxp__holder_leave(&opt->holder, 0);
    opt->num_update = meta[1];
    uint64_t ahead = (uint64_t)meta[4] - rs.counter;
    if (ahead) {
        mxp_rng_stream skip;
        rc = mxp__rng_reserve(cpu, ahead * 4, &skip);
    }
done:
    mxp_ndarray_list_free(n, arrs, names);
    return rc;
}
