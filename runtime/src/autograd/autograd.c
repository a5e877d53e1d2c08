/* autograd.c — imperative autograd: the tape of recorded ops, the table of
 * marked variables, and backward (see <mxplug/autograd.h> for the contract).
 *
 * Values.  Every array the tape knows is a value: a marked variable used by
 * a recorded step, or an output of a step.  A hash map from the array
 * handle (retained by the tape, so the pointer cannot be reused while the
 * tape lives) to its value id finds an op's inputs; an array not in the map
 * and not a variable is a constant (no gradient).  A value "needs" a
 * gradient when it is a variable with req != null, or an output of a
 * differentiable step one of whose inputs needs one; only steps with such an
 * input are recorded.
 *
 * Backward mirrors graph/gradient.c so that the same net gives the same
 * numbers as the executor: pass 1 counts, in reverse step order, the
 * gradient contributions each value will receive (head gradients first);
 * pass 2 runs each step's backward into fresh arrays (req write) and, when a
 * value's last contribution is in, closes it: one contribution is its
 * gradient, several are summed by one ElementWiseSum in contribution order.
 * A variable's closed gradient is copied into (write) or added to (add) its
 * gradient array.  Visible outputs a backward reads but no gradient reaches
 * get zeros; loss ops (MXP_OP_LOSS) get no head gradient.
 * In-place check: each step records, for every array it reads, the var's
 * count of pushed writes (mxp__engine_var_writes_pushed); backward refuses
 * a step whose arrays were written since.
 *
 * Not here: higher-order gradients (backward is not recorded), sparse
 * arrays.  Locking: one mutex over the tape and the variables.  Backward
 * holds it while it pushes work, with recording off on its thread, so the
 * mxp_invoke calls it makes (sums, adds) never come back here. */
#include "autograd/autograd.h"
#include "base/mutex.h"

#include "engine/engine.h"
#include "ndarray/ndarray.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int tl_recording, tl_training;

enum { STEP_OP = 0, STEP_EXEC = 1 };

typedef struct ag_value {
    mxp_ndarray *nd;  /* retained */
    int step, out;    /* producer step and its output index, or -1 */
    int var;          /* index into g_vars, or -1 */
    int needs;
    /* backward scratch */
    int count, remaining;
    mxp_ndarray **con;
    int n_con, cap_con;
    mxp_ndarray *final; /* retained */
} ag_value;

typedef struct ag_step {
    int kind;
    mxp__node *node;          /* STEP_OP */
    const mxp_executor *ex;   /* STEP_EXEC; NULL once freed */
    int stale;                /* STEP_EXEC: ran forward again since */
    uint32_t flags;           /* MXP_OP_* */
    int n_in, n_out, n_vis, n_aux;
    mxp_ndarray **arr;        /* in[n_in], out[n_out], aux[n_aux], retained */
    int *in_val, *out_val;
    uint64_t *w;              /* pushed writes of arr[] at record time */
    int is_head, runs;
} ag_step;

typedef struct ag_var {
    mxp_ndarray *var, *grad; /* retained */
    int req;
} ag_var;

static mxp__mutex g_mu = MXP__MUTEX_INIT;
static ag_value *g_vals;
static int g_n_vals, g_cap_vals;
static ag_step *g_steps;
static int g_n_steps, g_cap_steps;
static ag_var *g_vars;
static int g_n_vars, g_cap_vars;
/* handle -> value id, open addressing (key NULL = empty), cleared with the tape */
static struct { const mxp_ndarray *key; int val; } *g_map;
static size_t g_map_cap, g_map_used;

static uint64_t writes_of(const mxp_ndarray *nd) { return mxp__engine_var_writes_pushed(mxp_ndarray_var(nd)); }

static size_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int map_find(const mxp_ndarray *nd) {
    if (!g_map_cap) return -1;
    for (size_t i = hash_ptr(nd) & (g_map_cap - 1);; i = (i + 1) & (g_map_cap - 1)) {
        if (!g_map[i].key) return -1;
        if (g_map[i].key == nd) return g_map[i].val;
    }
}

static int map_put(const mxp_ndarray *nd, int val) {
    if ((g_map_used + 1) * 2 > g_map_cap) {
        size_t cap = g_map_cap ? 2 * g_map_cap : 64;
        void *m = calloc(cap, sizeof *g_map);
        if (!m) return mxp__error_oom("autograd map");
        __typeof__(g_map) old = g_map;
        size_t old_cap = g_map_cap;
        g_map = m;
        g_map_cap = cap;
        g_map_used = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].key) map_put(old[i].key, old[i].val);
        free(old);
    }
    for (size_t i = hash_ptr(nd) & (g_map_cap - 1);; i = (i + 1) & (g_map_cap - 1)) {
        if (!g_map[i].key) {
            g_map[i].key = nd;
            g_map[i].val = val;
            g_map_used++;
            return MXP_OK;
        }
        if (g_map[i].key == nd) {
            g_map[i].val = val;
            return MXP_OK;
        }
    }
}

static int find_var(const mxp_ndarray *nd) {
    for (int i = 0; i < g_n_vars; i++)
        if (g_vars[i].var == nd) return i;
    return -1;
}

static void value_scratch_free(ag_value *v) {
    for (int k = 0; k < v->n_con; k++) mxp_ndarray_release(v->con[k]);
    free(v->con);
    v->con = NULL;
    v->n_con = v->cap_con = 0;
    mxp_ndarray_release(v->final);
    v->final = NULL;
    v->count = v->remaining = 0;
}

static void step_free(ag_step *s) {
    mxp__node_free(s->node);
    int n = s->n_in + s->n_out + s->n_aux;
    for (int i = 0; i < n; i++) mxp_ndarray_release(s->arr[i]);
    free(s->arr);
    free(s->in_val);
    free(s->out_val);
    free(s->w);
}

static void tape_clear_locked(void) {
    MXP_ASSERT(mxp__mutex_held(&g_mu));
    for (int i = 0; i < g_n_steps; i++) step_free(&g_steps[i]);
    for (int i = 0; i < g_n_vals; i++) {
        value_scratch_free(&g_vals[i]);
        mxp_ndarray_release(g_vals[i].nd);
    }
    g_n_steps = 0;
    g_n_vals = 0;
    if (g_map) memset(g_map, 0, g_map_cap * sizeof *g_map);
    g_map_used = 0;
}

/* Value id of an input: known, a variable (added now), or -1 (constant). */
static int input_value(mxp_ndarray *nd, int *out_id) {
    int v = map_find(nd);
    if (v >= 0) {
        *out_id = v;
        return MXP_OK;
    }
    *out_id = -1;
    int var = find_var(nd);
    if (var < 0) return MXP_OK;
    if (g_n_vals == g_cap_vals) {
        int cap = g_cap_vals ? 2 * g_cap_vals : 64;
        ag_value *nv = realloc(g_vals, (size_t)cap * sizeof *nv);
        if (!nv) return mxp__error_oom("autograd values");
        g_vals = nv;
        g_cap_vals = cap;
    }
    ag_value *val = &g_vals[g_n_vals];
    memset(val, 0, sizeof *val);
    val->nd = mxp_ndarray_retain(nd);
    val->step = val->out = -1;
    val->var = var;
    val->needs = g_vars[var].req != MXP_REQ_NULL;
    int rc = map_put(nd, g_n_vals);
    if (rc) {
        mxp_ndarray_release(val->nd);
        return rc;
    }
    *out_id = g_n_vals++;
    return MXP_OK;
}

static int value_needs(const mxp_ndarray *nd) {
    int v = map_find(nd);
    if (v >= 0) return g_vals[v].needs;
    int var = find_var(nd);
    return var >= 0 && g_vars[var].req != MXP_REQ_NULL;
}

/* ============================================================ flags */

int mxp_autograd_set_recording(int is_recording, int *out_prev) {
    int prev = tl_recording;
    if (out_prev) *out_prev = prev;
    if (is_recording && !prev) mxp_autograd_clear(); /* a new recording scope starts a new tape */
    tl_recording = is_recording != 0;
    return MXP_OK;
}

int mxp_autograd_set_training(int is_training, int *out_prev) {
    if (out_prev) *out_prev = tl_training;
    tl_training = is_training != 0;
    return MXP_OK;
}

int mxp_autograd_is_recording(void) { return tl_recording; }
int mxp_autograd_is_training(void) { return tl_training; }
int mxp__autograd_training(void) { return tl_training; }

/* ============================================================ variables */

int mxp_autograd_mark_variables(int n, mxp_ndarray *const *vars, const int *reqs, mxp_ndarray *const *grads) {
    if (n < 0 || (n && (!vars || !grads))) return mxp__error(MXP_EINVAL, "mark_variables: bad arguments");
    for (int i = 0; i < n; i++) {
        mxp_ndarray *v = vars[i], *g = grads[i];
        int req = reqs ? reqs[i] : MXP_REQ_WRITE;
        if (!v || !g || mxp_ndarray_is_none(v) || mxp_ndarray_is_none(g))
            return mxp__error(MXP_EINVAL, "mark_variables: variable %d or its gradient is NULL or a none array", i);
        if (req != MXP_REQ_NULL && req != MXP_REQ_WRITE && req != MXP_REQ_ADD)
            return mxp__error(MXP_EINVAL, "mark_variables: variable %d: grad_req %d is not null, write or add", i,
                              req);
        int nd = mxp_ndarray_ndim(v);
        if (nd != mxp_ndarray_ndim(g) || memcmp(mxp_ndarray_shape(v), mxp_ndarray_shape(g),
                                                (size_t)nd * sizeof(int64_t)) ||
            mxp_ndarray_dtype(v) != mxp_ndarray_dtype(g))
            return mxp__error(MXP_EINVAL, "mark_variables: variable %d: the gradient's shape or dtype differs", i);
    }
    mxp__mutex_lock(&g_mu);
    int rc = MXP_OK;
    for (int i = 0; i < n && !rc; i++) {
        int k = find_var(vars[i]);
        if (k < 0) {
            if (g_n_vars == g_cap_vars) {
                int cap = g_cap_vars ? 2 * g_cap_vars : 16;
                ag_var *nv = realloc(g_vars, (size_t)cap * sizeof *nv);
                if (!nv) {
                    rc = mxp__error_oom("autograd variables");
                    break;
                }
                g_vars = nv;
                g_cap_vars = cap;
            }
            k = g_n_vars++;
            g_vars[k].var = mxp_ndarray_retain(vars[i]);
            g_vars[k].grad = NULL;
        }
        mxp_ndarray_release(g_vars[k].grad);
        g_vars[k].grad = mxp_ndarray_retain(grads[i]);
        g_vars[k].req = reqs ? reqs[i] : MXP_REQ_WRITE;
    }
    mxp__mutex_unlock(&g_mu);
    return rc;
}

int mxp_autograd_unmark(mxp_ndarray *var) {
    if (!var) return MXP_OK;
    mxp__mutex_lock(&g_mu);
    int k = find_var(var);
    if (k >= 0) {
        /* A tape value still pointing at this variable index: forget it
         * (the tape cannot give it a gradient any more). */
        for (int i = 0; i < g_n_vals; i++) {
            if (g_vals[i].var == k) g_vals[i].var = -1;
            else if (g_vals[i].var == g_n_vars - 1) g_vals[i].var = k;
        }
        mxp_ndarray_release(g_vars[k].var);
        mxp_ndarray_release(g_vars[k].grad);
        g_vars[k] = g_vars[--g_n_vars];
    }
    mxp__mutex_unlock(&g_mu);
    return MXP_OK;
}

void mxp_autograd_clear_variables(void) {
    mxp__mutex_lock(&g_mu);
    tape_clear_locked();
    for (int i = 0; i < g_n_vars; i++) {
        mxp_ndarray_release(g_vars[i].var);
        mxp_ndarray_release(g_vars[i].grad);
    }
    free(g_vars);
    g_vars = NULL;
    g_n_vars = g_cap_vars = 0;
    mxp__mutex_unlock(&g_mu);
}

int mxp_autograd_grad(mxp_ndarray *var, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EINVAL, "get_grad: out is NULL");
    *out = NULL;
    mxp__mutex_lock(&g_mu);
    int k = find_var(var);
    if (k >= 0) *out = mxp_ndarray_retain(g_vars[k].grad);
    mxp__mutex_unlock(&g_mu);
    return k >= 0 ? MXP_OK : mxp__error(MXP_ENOENT, "get_grad: the array is not a marked variable");
}

/* ============================================================ recording */

int mxp__autograd_wants(int n_in, mxp_ndarray *const *in) {
    if (!tl_recording) return 0;
    mxp__mutex_lock(&g_mu);
    int yes = 0;
    for (int i = 0; i < n_in && !yes; i++) yes = value_needs(in[i]);
    mxp__mutex_unlock(&g_mu);
    return yes;
}

static int step_append(int kind, int n_in, mxp_ndarray *const *in, int n_out, int n_vis, mxp_ndarray *const *out,
                       int n_aux, mxp_ndarray *const *aux, uint32_t flags, int *out_index) {
    if (g_n_steps == g_cap_steps) {
        int cap = g_cap_steps ? 2 * g_cap_steps : 64;
        ag_step *ns = realloc(g_steps, (size_t)cap * sizeof *ns);
        if (!ns) return mxp__error_oom("autograd tape");
        g_steps = ns;
        g_cap_steps = cap;
    }
    int tot = n_in + n_out + n_aux;
    ag_step s = {0};
    s.kind = kind;
    s.flags = flags;
    s.n_in = n_in;
    s.n_out = n_out;
    s.n_vis = n_vis;
    s.n_aux = n_aux;
    s.arr = calloc((size_t)tot + 1, sizeof *s.arr);
    s.in_val = calloc((size_t)n_in + 1, sizeof *s.in_val);
    s.out_val = calloc((size_t)n_out + 1, sizeof *s.out_val);
    s.w = calloc((size_t)tot + 1, sizeof *s.w);
    if (!s.arr || !s.in_val || !s.out_val || !s.w) {
        step_free(&s);
        return mxp__error_oom("autograd step");
    }
    int rc = MXP_OK;
    int differentiable = !(flags & MXP_OP_NO_GRADIENT), any_need = 0;
    for (int i = 0; i < n_in && !rc; i++) {
        rc = input_value(in[i], &s.in_val[i]);
        if (!rc && s.in_val[i] >= 0) any_need |= g_vals[s.in_val[i]].needs;
    }
    if (rc) {
        step_free(&s);
        return rc;
    }
    for (int i = 0; i < n_in; i++) s.arr[i] = mxp_ndarray_retain(in[i]);
    for (int i = 0; i < n_out; i++) s.arr[n_in + i] = mxp_ndarray_retain(out[i]);
    for (int i = 0; i < n_aux; i++) s.arr[n_in + n_out + i] = mxp_ndarray_retain(aux[i]);
    for (int i = 0; i < tot; i++) s.w[i] = writes_of(s.arr[i]);
    int sid = g_n_steps;
    for (int i = 0; i < n_out && !rc; i++) {
        if (g_n_vals == g_cap_vals) {
            int cap = g_cap_vals ? 2 * g_cap_vals : 64;
            ag_value *nv = realloc(g_vals, (size_t)cap * sizeof *nv);
            if (!nv) {
                rc = mxp__error_oom("autograd values");
                break;
            }
            g_vals = nv;
            g_cap_vals = cap;
        }
        ag_value *v = &g_vals[g_n_vals];
        memset(v, 0, sizeof *v);
        v->nd = mxp_ndarray_retain(out[i]);
        v->step = sid;
        v->out = i;
        v->var = -1;
        v->needs = differentiable && any_need;
        s.out_val[i] = g_n_vals++;
        rc = map_put(out[i], s.out_val[i]);
    }
    if (rc) {
        /* Values already added name step `sid`, which will not exist: drop
         * the whole tape rather than leave it inconsistent (out of memory). */
        step_free(&s);
        tape_clear_locked();
        return rc;
    }
    g_steps[g_n_steps++] = s;
    *out_index = sid;
    return MXP_OK;
}

int mxp__autograd_record_op(mxp__node *n, int n_in, mxp_ndarray *const *in, int n_out, int n_vis,
                            mxp_ndarray *const *out, int n_aux, mxp_ndarray *const *aux, int *taken) {
    *taken = 0;
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++)
            if (out[o] && mxp__ndarray_same_chunk(out[o], in[i]))
                return mxp__error(MXP_EINVAL,
                                  "op '%s': output %d is written in place over input %d while recording; "
                                  "in-place ops cannot be differentiated (write to a new array)",
                                  mxp__node_op_name(n), o, i);
    mxp__mutex_lock(&g_mu);
    int sid = -1;
    int rc = step_append(STEP_OP, n_in, in, n_out, n_vis, out, n_aux, aux, mxp__node_flags(n), &sid);
    if (!rc) {
        g_steps[sid].node = n;
        *taken = 1;
    }
    mxp__mutex_unlock(&g_mu);
    return rc;
}

int mxp_autograd_record_executor(mxp_executor *ex, int n_args, mxp_ndarray *const *args, int n_outs,
                                 mxp_ndarray *const *outs) {
    if (!ex || n_args < 0 || n_outs < 1 || (n_args && !args) || !outs)
        return mxp__error(MXP_EINVAL, "record_executor: bad arguments");
    int n = 0;
    mxp_ndarray *const *xa = NULL;
    int rc = mxp_executor_args(ex, &n, &xa);
    if (rc) return rc;
    if (n != n_args) return mxp__error(MXP_EINVAL, "record_executor: %d arguments for an executor with %d", n_args, n);
    for (int i = 0; i < n_args; i++)
        if (!args[i]) return mxp__error(MXP_EINVAL, "record_executor: argument %d is NULL", i);
    for (int i = 0; i < n_outs; i++)
        if (!outs[i]) return mxp__error(MXP_EINVAL, "record_executor: output %d is NULL", i);
    mxp__mutex_lock(&g_mu);
    int sid = -1;
    for (int i = 0; i < g_n_steps; i++)
        if (g_steps[i].kind == STEP_EXEC && g_steps[i].ex == ex) g_steps[i].stale = 1;
    rc = step_append(STEP_EXEC, n_args, args, n_outs, n_outs, outs, 0, NULL, 0, &sid);
    if (!rc) g_steps[sid].ex = ex;
    mxp__mutex_unlock(&g_mu);
    return rc;
}

void mxp__autograd_executor_freed(const mxp_executor *ex) {
    mxp__mutex_lock(&g_mu);
    for (int i = 0; i < g_n_steps; i++)
        if (g_steps[i].kind == STEP_EXEC && g_steps[i].ex == ex) g_steps[i].ex = NULL;
    mxp__mutex_unlock(&g_mu);
}

void mxp_autograd_clear(void) {
    mxp__mutex_lock(&g_mu);
    tape_clear_locked();
    mxp__mutex_unlock(&g_mu);
}

int mxp_autograd_tape_size(void) {
    mxp__mutex_lock(&g_mu);
    int n = g_n_steps;
    mxp__mutex_unlock(&g_mu);
    return n;
}

/* ============================================================ backward */

static const char *step_name(const ag_step *s) { return s->kind == STEP_OP ? mxp__node_op_name(s->node) : "executor"; }

/* A new array shaped like `like`, filled with `fill` when do_fill. */
static int new_like(const mxp_ndarray *like, int do_fill, double fill, mxp_ndarray **out) {
    int rc = mxp_ndarray_create(mxp_ndarray_shape(like), mxp_ndarray_ndim(like), mxp_ndarray_dtype(like),
                                mxp_ndarray_device(like), out);
    if (!rc && do_fill) rc = mxp_ndarray_fill(*out, fill);
    return rc;
}

static int contrib_add(ag_value *v, mxp_ndarray *g) {
    if (v->n_con == v->cap_con) {
        int cap = v->cap_con ? 2 * v->cap_con : 4;
        mxp_ndarray **c = realloc(v->con, (size_t)cap * sizeof *c);
        if (!c) return mxp__error_oom("autograd gradients");
        v->con = c;
        v->cap_con = cap;
    }
    v->con[v->n_con++] = mxp_ndarray_retain(g);
    return MXP_OK;
}

/* All contributions of v are in: its gradient is the one, or their sum;
 * a variable's goes to its gradient array. */
static int close_value(ag_value *v) {
    int rc = MXP_OK;
    if (v->n_con == 1) {
        v->final = mxp_ndarray_retain(v->con[0]);
    } else if (v->n_con > 1) {
        char num[16];
        snprintf(num, sizeof num, "%d", v->n_con);
        const char *k[] = {"num_args"}, *val[] = {num};
        int n_out = 1;
        mxp_ndarray *sum = NULL;
        rc = mxp_invoke("ElementWiseSum", v->n_con, v->con, &n_out, &sum, 1, k, val);
        if (rc) return mxp__error_prefix(rc, "autograd: summing %d gradients", v->n_con);
        v->final = sum;
    }
    if (v->var < 0 || !v->final) return rc;
    const ag_var *var = &g_vars[v->var];
    if (var->req == MXP_REQ_WRITE) return mxp_ndarray_copy(v->final, var->grad);
    if (var->req == MXP_REQ_ADD) {
        int n_out = 1;
        mxp_ndarray *o = var->grad, *in[2] = {var->grad, v->final};
        return mxp_invoke("elemwise_add", 2, in, &n_out, &o, 0, NULL, NULL);
    }
    return MXP_OK;
}

static int value_got(ag_value *v, mxp_ndarray *g) {
    int rc = contrib_add(v, g);
    if (!rc && --v->remaining == 0) rc = close_value(v);
    return rc;
}

static int check_unchanged(const ag_step *s) {
    int tot = s->n_in + s->n_out + s->n_aux;
    for (int i = 0; i < tot; i++) {
        if (i >= s->n_in + s->n_out) continue; /* aux states are updated in place by design */
        if (writes_of(s->arr[i]) != s->w[i]) {
            int is_in = i < s->n_in;
            return mxp__error(MXP_EMISUSE,
                              "autograd: %s %d of op '%s' was overwritten after it was recorded; the gradient "
                              "would be wrong (copy the array before changing it, or record again)",
                              is_in ? "input" : "output", is_in ? i : i - s->n_in, step_name(s));
        }
    }
    return MXP_OK;
}

static int run_step(ag_step *s) {
    int rc = check_unchanged(s);
    if (rc) return rc;
    if (s->kind == STEP_EXEC && (!s->ex || s->stale))
        return mxp__error(MXP_EMISUSE, "autograd: a recorded executor %s since it was recorded",
                          s->ex ? "ran forward again" : "was freed");
    int n_in = s->n_in, n_out = s->n_out;
    mxp_ndarray **og = calloc((size_t)n_out + 1, sizeof *og);
    mxp_ndarray **ig = calloc((size_t)n_in + 1, sizeof *ig);
    int *req = calloc((size_t)n_in + 1, sizeof *req);
    uint8_t *need_og = calloc((size_t)n_out + 1, 1), *need_in = calloc((size_t)n_in + 1, 1),
            *need_out = calloc((size_t)n_out + 1, 1);
    if (!og || !ig || !req || !need_og || !need_in || !need_out) rc = mxp__error_oom("autograd backward");
    if (!rc && s->kind == STEP_OP) mxp__node_backward_deps(s->node, need_og, need_in, need_out);
    if (!rc && s->kind == STEP_EXEC) memset(need_og, 1, (size_t)n_out);
    for (int k = 0; k < n_out && !rc; k++) {
        ag_value *v = &g_vals[s->out_val[k]];
        if (!need_og[k]) continue;
        if (v->final) og[k] = mxp_ndarray_retain(v->final);
        else if (k < s->n_vis && !(s->flags & MXP_OP_LOSS)) rc = new_like(s->arr[n_in + k], 1, 0.0, &og[k]);
    }
    if (s->kind == STEP_OP) {
        for (int k = 0; k < n_in && !rc; k++) {
            req[k] = MXP_REQ_NULL;
            if (s->in_val[k] < 0 || !g_vals[s->in_val[k]].needs) continue;
            rc = new_like(s->arr[k], 0, 0.0, &ig[k]);
            req[k] = MXP_REQ_WRITE;
        }
        if (!rc)
            rc = mxp__node_backward(s->node, og, s->arr, s->arr + n_in, ig, s->arr + n_in + n_out, req);
        if (rc) rc = mxp__error_prefix(rc, "autograd: backward of op '%s'", step_name(s));
    } else if (!rc) {
        mxp_executor *ex = (mxp_executor *)s->ex;
        rc = mxp_executor_backward(ex, n_out, og);
        int n = 0;
        mxp_ndarray *const *grads = NULL;
        if (!rc) rc = mxp_executor_grads(ex, &n, &grads);
        for (int k = 0; k < n_in && k < n && !rc; k++) {
            if (s->in_val[k] < 0 || !g_vals[s->in_val[k]].needs) continue;
            if (!grads[k])
                rc = mxp__error(MXP_EINVAL, "autograd: the recorded executor has no gradient for argument %d", k);
            else ig[k] = mxp_ndarray_retain(grads[k]);
        }
        if (rc) rc = mxp__error_prefix(rc, "autograd: backward of a recorded executor");
    }
    for (int k = 0; k < n_in && !rc; k++)
        if (ig[k]) rc = value_got(&g_vals[s->in_val[k]], ig[k]);
    for (int k = 0; og && k < n_out; k++) mxp_ndarray_release(og[k]);
    for (int k = 0; ig && k < n_in; k++) mxp_ndarray_release(ig[k]);
    free(og);
    free(ig);
    free(req);
    free(need_og);
    free(need_in);
    free(need_out);
    return rc;
}

static int backward_locked(int n, mxp_ndarray *const *heads, mxp_ndarray *const *head_grads) {
    MXP_ASSERT(mxp__mutex_held(&g_mu));
    int rc = MXP_OK;
    int *hv = calloc((size_t)n + 1, sizeof *hv);
    if (!hv) return mxp__error_oom("autograd backward");
    for (int i = 0; i < g_n_vals; i++) value_scratch_free(&g_vals[i]);
    for (int i = 0; i < g_n_steps; i++) g_steps[i].is_head = g_steps[i].runs = 0;
    for (int h = 0; h < n && !rc; h++) {
        if (!heads[h]) {
            rc = mxp__error(MXP_EINVAL, "autograd backward: head %d is NULL", h);
            break;
        }
        hv[h] = map_find(heads[h]);
        if (hv[h] < 0 && find_var(heads[h]) >= 0) rc = input_value(heads[h], &hv[h]);
        if (!rc && (hv[h] < 0 || !g_vals[hv[h]].needs))
            rc = mxp__error(MXP_EINVAL,
                            "autograd backward: head %d was not computed under recording from an array with a "
                            "gradient (attach_grad / mark_variables, then record)%s", h,
                            g_n_steps ? "" : "; the tape is empty (cleared by an earlier backward without "
                                             "retain_graph or a new recording scope)");
        if (!rc && head_grads && head_grads[h]) {
            const mxp_ndarray *a = heads[h], *g = head_grads[h];
            int nd = mxp_ndarray_ndim(a);
            if (nd != mxp_ndarray_ndim(g) ||
                memcmp(mxp_ndarray_shape(a), mxp_ndarray_shape(g), (size_t)nd * sizeof(int64_t)) ||
                mxp_ndarray_dtype(a) != mxp_ndarray_dtype(g))
                rc = mxp__error(MXP_EINVAL, "autograd backward: head gradient %d differs from its head in shape "
                                            "or dtype", h);
        }
    }
    /* Pass 1: count contributions. */
    for (int h = 0; h < n && !rc; h++) {
        ag_value *v = &g_vals[hv[h]];
        if (v->step >= 0) {
            g_steps[v->step].is_head = 1;
            if (g_steps[v->step].flags & MXP_OP_LOSS) continue;
        }
        v->count++;
    }
    for (int i = g_n_steps - 1; i >= 0 && !rc; i--) {
        ag_step *s = &g_steps[i];
        int in_need = 0, out_has = 0;
        for (int k = 0; k < s->n_in; k++) in_need |= s->in_val[k] >= 0 && g_vals[s->in_val[k]].needs;
        for (int k = 0; k < s->n_out; k++) out_has |= g_vals[s->out_val[k]].count > 0;
        s->runs = !(s->flags & MXP_OP_NO_GRADIENT) && in_need && (out_has || ((s->flags & MXP_OP_LOSS) && s->is_head));
        if (!s->runs) continue;
        for (int k = 0; k < s->n_in; k++)
            if (s->in_val[k] >= 0 && g_vals[s->in_val[k]].needs) g_vals[s->in_val[k]].count++;
    }
    for (int i = 0; i < g_n_vals; i++) g_vals[i].remaining = g_vals[i].count;
    /* Pass 2: head gradients, then steps in reverse. */
    for (int h = 0; h < n && !rc; h++) {
        ag_value *v = &g_vals[hv[h]];
        if (v->step >= 0 && (g_steps[v->step].flags & MXP_OP_LOSS)) continue;
        mxp_ndarray *g = head_grads ? head_grads[h] : NULL;
        if (g) {
            rc = value_got(v, g);
        } else {
            rc = new_like(heads[h], 1, 1.0, &g);
            if (!rc) rc = value_got(v, g);
            mxp_ndarray_release(g);
        }
    }
    for (int i = g_n_steps - 1; i >= 0 && !rc; i--)
        if (g_steps[i].runs) rc = run_step(&g_steps[i]);
    /* Variables on the tape no gradient reached: zeros for req write. */
    for (int i = 0; i < g_n_vals && !rc; i++) {
        ag_value *v = &g_vals[i];
        if (v->var >= 0 && v->needs && v->count == 0 && g_vars[v->var].req == MXP_REQ_WRITE)
            rc = mxp_ndarray_fill(g_vars[v->var].grad, 0.0);
    }
    for (int i = 0; i < g_n_vals; i++) value_scratch_free(&g_vals[i]);
    free(hv);
    return rc;
}

int mxp_autograd_backward(int n, mxp_ndarray *const *heads, mxp_ndarray *const *head_grads, int retain_graph) {
    if (n < 1 || !heads) return mxp__error(MXP_EINVAL, "autograd backward: no heads");
    /* Ops pushed by backward (gradient sums, copies) must not be recorded,
     * and mxp_invoke must not take the lock we hold. */
    int was_recording = tl_recording;
    tl_recording = 0;
    mxp__mutex_lock(&g_mu);
    int rc = backward_locked(n, heads, head_grads);
    if (!retain_graph) tape_clear_locked();
    mxp__mutex_unlock(&g_mu);
    tl_recording = was_recording;
    return rc;
}
