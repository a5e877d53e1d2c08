/* step.c — pre-created node steps: one engine operator per (node, forward
 * or backward) step of a bound graph, built once and pushed every run.
 *
 * A step keeps what every run of it shares: the exec template (views,
 * req, var lists, instance; exec.h) as its engine op's argument, and the
 * signature of the arrays it was built on (var, data pointer, offset,
 * shape, dtype per slot; the req given; is_train).  A push compares the
 * arrays it is given with that signature and the node's current instance
 * with the template's; when everything matches it pushes the engine op
 * (mxp_engine_push_op), with a small per-push record only for what must
 * be taken at push time — the temp-space pointer of the template's copy
 * (it may have grown) and the reserved random range (mxp_engine_push_op_arg;
 * the engine releases the record after the run or skip).  Otherwise it
 * rebuilds: a new template and engine op; the old op is deleted and frees
 * its template after its in-flight pushes.  So a registry change (hot swap,
 * reload: new instance at the node's next bind), new arrays (reshape,
 * other head gradients) or a train/inference switch rebuild the step, and
 * a rebuild holds no reference on an old instance once its pushes drained.
 *
 * Invariant: runs of one step never overlap — they write the same vars
 * (a step that writes nothing gets a private var) — so a run may fill the
 * template's per-run fields in place; the pushing thread reads only fields
 * fixed at build.  Not thread-safe per step (one driver, like a node).
 * Not here: building a template (exec.c), the executor's slots (executor). */
#include "op/exec.h"

#include "ndarray/ndarray.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot_sig {
    const mxp_ndarray *nd; /* NULL: no array given */
    mxp_var *var;
    void *data;
    size_t offset;
    int32_t dtype;
    int ndim;
    int64_t dims[MXP_MAX_NDIM];
} slot_sig;

struct mxp__node_step {
    mxp_engine_op *op;
    mxp__exec *x;         /* the op's argument, freed by the engine after the op's last push */
    mxp_var *own;         /* private write var when the template writes none */
    int backward, is_train;
    int n_slots, n_req;
    slot_sig *sig;        /* [n_slots] */
    int32_t *req;         /* [n_req] as given (NULL given: all write) */
    int req_given;
    int builds;
};

typedef struct step_push {
    mxp__exec *x;
    void *ws;
    uint64_t ws_bytes;
    int has_rng;
    struct mxp_rng rng;
} step_push;

/* ------------------------------------------------------------ runs */
static void take_push(const step_push *p) {
    mxp__exec *x = p->x;
    x->ws = p->ws;
    x->ws_bytes = p->ws_bytes;
    x->has_rng = p->has_rng;
    if (p->has_rng) x->rng = p->rng;
}

static int run_template(void *arg, const mxp_run_ctx *ctx) { return mxp__exec_call(arg, ctx ? ctx->stream : NULL); }

static int run_record(void *arg, const mxp_run_ctx *ctx) {
    const step_push *p = arg;
    take_push(p);
    return mxp__exec_call(p->x, ctx ? ctx->stream : NULL);
}

static void run_template_async(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    mxp__exec_async(arg, ctx, cb);
}

static void run_record_async(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    const step_push *p = arg;
    take_push(p);
    mxp__exec_async(p->x, ctx, cb);
}

/* ------------------------------------------------------------ signature */
static void sig_take(slot_sig *s, const mxp_ndarray *nd) {
    memset(s, 0, sizeof *s);
    s->nd = nd;
    if (!nd) return;
    s->var = mxp_ndarray_var(nd);
    s->data = mxp__ndarray_chunk_ptr(nd);
    s->offset = mxp__ndarray_offset(nd);
    s->dtype = mxp_ndarray_dtype(nd);
    s->ndim = mxp_ndarray_ndim(nd);
    const int64_t *d = mxp_ndarray_shape(nd);
    for (int k = 0; k < s->ndim && k < MXP_MAX_NDIM; k++) s->dims[k] = d[k];
}

/* Same array as at build: the handle may be another one (freed and made
 * again), what the run reads must be the same. */
static int sig_same(const slot_sig *s, const mxp_ndarray *nd) {
    if (!nd || !s->nd) return !nd && !s->nd;
    if (mxp_ndarray_var(nd) != s->var || mxp__ndarray_chunk_ptr(nd) != s->data ||
        mxp__ndarray_offset(nd) != s->offset || mxp_ndarray_dtype(nd) != s->dtype || mxp_ndarray_ndim(nd) != s->ndim)
        return 0;
    const int64_t *d = mxp_ndarray_shape(nd);
    for (int k = 0; k < s->ndim; k++)
        if (d[k] != s->dims[k]) return 0;
    return 1;
}

/* Slots in the template's order: forward in | out | aux; backward
 * out_grad | in | out | in_grad | aux.  lists[i] may be NULL (all absent). */
typedef struct slot_lists {
    mxp_ndarray *const *list[5];
    int count[5];
    int n_lists;
} slot_lists;

static const mxp_ndarray *slot_at(const slot_lists *l, int i) {
    for (int k = 0; k < l->n_lists; k++) {
        if (i < l->count[k]) return l->list[k] ? l->list[k][i] : NULL;
        i -= l->count[k];
    }
    return NULL;
}

static int step_matches(const mxp__node_step *s, const slot_lists *l, const int *req, int n_req, int is_train,
                        const mxp__inst *cur) {
    if (!s || !s->op || s->x->inst != cur || s->is_train != is_train || s->n_req != n_req || s->req_given != !!req)
        return 0;
    for (int i = 0; req && i < n_req; i++)
        if (s->req[i] != req[i]) return 0;
    for (int i = 0; i < s->n_slots; i++)
        if (!sig_same(&s->sig[i], slot_at(l, i))) return 0;
    return 1;
}

/* ------------------------------------------------------------ build */
static void step_drop_op(mxp__node_step *s) {
    if (s->op) mxp_engine_delete_op(s->op); /* frees the template after its pushes */
    else mxp__exec_free(s->x);
    s->op = NULL;
    s->x = NULL;
}

/* Replace the step's template and op with ones built on x (taken). */
static int step_install(mxp__node_step *s, mxp__exec *x, const slot_lists *l, const int *req, int n_req,
                        int is_train, int backward) {
    int n_slots = 0;
    for (int k = 0; k < l->n_lists; k++) n_slots += l->count[k];
    slot_sig *sig = calloc((size_t)n_slots + 1, sizeof *sig);
    int32_t *rq = calloc((size_t)n_req + 1, sizeof *rq);
    if (!sig || !rq) {
        free(sig);
        free(rq);
        mxp__exec_free(x);
        return mxp__error_oom("node step");
    }
    for (int i = 0; i < n_slots; i++) sig_take(&sig[i], slot_at(l, i));
    for (int i = 0; req && i < n_req; i++) rq[i] = req[i];
    int rc = MXP_OK;
    if (x->n_mutate == 0) {
        /* Nothing written: a private var keeps this step's runs apart. */
        if (!s->own) rc = mxp_engine_new_var(&s->own);
        if (!rc && x->n_const + 1 <= x->cap_vars) x->vars[x->n_const + x->n_mutate++] = s->own;
        else if (!rc) rc = mxp__error(MXP_EINTERNAL, "node step '%s': no room for its private var", x->name);
    }
    int with_record = x->ws_var || x->rng_values;
    mxp_engine_push_args p;
    mxp__exec_push_args(x, with_record ? run_record : run_template,
                        with_record ? run_record_async : run_template_async, &p);
    mxp_engine_op *op = NULL;
    if (!rc) rc = mxp_engine_new_op(&p, &op);
    if (rc) {
        free(sig);
        free(rq);
        mxp__exec_free(x);
        return rc;
    }
    step_drop_op(s);
    free(s->sig);
    free(s->req);
    s->op = op;
    s->x = x;
    s->sig = sig;
    s->req = rq;
    s->n_slots = n_slots;
    s->n_req = n_req;
    s->req_given = req != NULL;
    s->is_train = is_train;
    s->backward = backward;
    s->builds++;
    return MXP_OK;
}

static int push_step(mxp__node_step *s) {
    mxp__exec *x = s->x;
    if (!x->ws_var && !x->rng_values) return mxp_engine_push_op(s->op, 0);
    step_push *p = calloc(1, sizeof *p);
    if (!p) return mxp__error_oom("node step push");
    p->x = x;
    int rc = MXP_OK;
    if (x->ws_var) {
        mxp_temp_space ts;
        rc = mxp__temp_space_acquire_same(x->dev, (size_t)x->inst->workspace_bytes, x->ws_var, &ts);
        if (rc) rc = mxp__error_prefix(rc, "op '%s': temp space of %llu bytes", x->name,
                                       (unsigned long long)x->inst->workspace_bytes);
        p->ws = ts.ptr;
        p->ws_bytes = ts.size;
    }
    if (!rc && x->rng_values) {
        rc = mxp__rng_reserve(x->dev, x->rng_values, &p->rng.stream);
        if (rc) rc = mxp__error_prefix(rc, "op '%s': reserving random numbers", x->name);
        p->rng.cursor = 0;
        p->has_rng = 1;
    }
    if (!rc) rc = mxp_engine_push_op_arg(s->op, 0, p, free);
    if (rc) free(p);
    return rc;
}

static mxp__node_step *slot_get(mxp__node_step **slot) {
    if (!*slot) *slot = calloc(1, sizeof **slot);
    return *slot;
}

/* ------------------------------------------------------------ API */
int mxp__node_forward_step(mxp__node *n, mxp__node_step **slot, mxp_ndarray *const *in, mxp_ndarray *const *out,
                           mxp_ndarray *const *aux, const int *req, int is_train) {
    if (!slot) return mxp__node_forward(n, in, out, aux, req, is_train);
    if (!n) return mxp__error(MXP_EMISUSE, "node_forward_step: NULL node");
    is_train = is_train ? 1 : 0;
    int n_in = mxp__node_num_inputs(n), n_out = mxp__node_num_outputs(n), n_aux = mxp__node_num_aux(n);
    slot_lists l = {{in, out, aux}, {n_in, n_out, n_aux}, 3};
    mxp__node_step *s = slot_get(slot);
    if (!s) return mxp__error_oom("node step");
    /* The node's bind (cheap when nothing changed) notices a registry
     * change; its current instance then differs from the template's. */
    if (s->op) {
        int rc = mxp__node_bind(n, s->x->dev, is_train);
        if (rc) return rc;
        if (step_matches(s, &l, req, n_out, is_train, mxp__node_current(n))) return push_step(s);
    }
    mxp__exec *x = NULL;
    int rc = mxp__exec_forward_prepare(n, in, out, aux, req, is_train, 1, &x);
    if (!rc) rc = step_install(s, x, &l, req, n_out, is_train, 0);
    return rc ? rc : push_step(s);
}

int mxp__node_backward_step(mxp__node *n, mxp__node_step **slot, mxp_ndarray *const *out_grads,
                            mxp_ndarray *const *in, mxp_ndarray *const *out, mxp_ndarray *const *in_grads,
                            mxp_ndarray *const *aux, const int *req) {
    if (!slot) return mxp__node_backward(n, out_grads, in, out, in_grads, aux, req);
    if (!n) return mxp__error(MXP_EMISUSE, "node_backward_step: NULL node");
    int n_in = mxp__node_num_inputs(n), n_out = mxp__node_num_outputs(n), n_aux = mxp__node_num_aux(n);
    slot_lists l = {{out_grads, in, out, in_grads, aux}, {n_out, n_in, n_out, n_in, n_aux}, 5};
    mxp__node_step *s = slot_get(slot);
    if (!s) return mxp__error_oom("node step");
    if (s->op && step_matches(s, &l, req, n_in, 1, mxp__node_current(n))) return push_step(s);
    mxp__exec *x = NULL;
    int rc = mxp__exec_backward_prepare(n, out_grads, in, out, in_grads, aux, req, 1, &x);
    if (!rc) rc = step_install(s, x, &l, req, n_in, 1, 1);
    return rc ? rc : push_step(s);
}

int mxp__node_step_stale(const mxp__node *n, const mxp__node_step *s) {
    return s && s->op && s->x->inst != mxp__node_current(n);
}

void mxp__node_step_reset(mxp__node_step *s) {
    if (!s) return;
    step_drop_op(s);
}

int mxp__node_step_builds(const mxp__node_step *s) { return s ? s->builds : 0; }

void mxp__node_step_free(mxp__node_step *s) {
    if (!s) return;
    step_drop_op(s);
    free(s->sig);
    free(s->req);
    if (s->own) mxp_engine_delete_var(s->own); /* after the op's pushes: they wrote it */
    free(s);
}
