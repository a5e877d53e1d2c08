/* run.c — running a bound graph: forward (is_train), backward, the monitor
 * callback and wait.  Every step goes through the node runtime (op/op.h),
 * which pushes it to the engine with the arrays' variables as
 * dependencies; values that share planned storage share a variable, so the
 * engine orders each reuse after the previous value's readers.
 * The node runtime re-selects implementations when the registry generation
 * moved, at forward only; backward runs on the instance its forward used.
 * Each step pushes its pre-created engine op (mxp__node_step, op.h),
 * rebuilt by the node runtime when its arrays or instance changed.
 * Errors found before pushing return at once, prefixed with the node's
 * name; a kernel's failure is reported by mxp_executor_wait (or when an
 * output is read), attributed to the first node in program order whose
 * output carries it. */
#include "executor/executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT(v) ((v) >= 0 ? ex->arr[(v)] : NULL)

static int gather(mxp_executor *ex, const int *ids, int n, mxp_ndarray **out) {
    for (int i = 0; i < n; i++) out[i] = SLOT(ids[i]);
    return MXP_OK;
}

static int run_monitor(mxp_executor *ex, const mxp__step *st) {
    const mxp__inode *n = &ex->g->nodes[st->node];
    for (int k = 0; k < n->n_vis; k++) {
        mxp_ndarray *a = SLOT(st->out[k]);
        if (!a) continue;
        int rc = mxp_ndarray_wait_to_read(a);
        if (rc) return mxp__error_prefix(rc, "node '%s'", n->g->name);
        char nm[2 * MXP_NAME_MAX + 2];
        mxp__igraph_entry_name(ex->g, n->entry0 + k, nm, sizeof nm);
        ex->monitor(nm, a, ex->monitor_user);
    }
    return MXP_OK;
}

static int forward_held(mxp_executor *ex, int is_train);
static int backward_held(mxp_executor *ex, int n_head_grads, mxp_ndarray *const *head_grads);

/* Both run inside the executor's holder (plugin.h): a pack reload makes
 * the nodes let go at a forward (a step boundary) or after a backward,
 * never between a training forward and its backward. */
int mxp_executor_forward(mxp_executor *ex, int is_train) {
    if (!ex) return mxp__error(MXP_EMISUSE, "mxp_executor_forward: NULL executor");
    mxp__holder_enter(&ex->holder, 1);
    int rc = forward_held(ex, is_train);
    mxp__holder_leave(&ex->holder, rc == MXP_OK && is_train);
    return rc;
}

int mxp_executor_backward(mxp_executor *ex, int n_head_grads, mxp_ndarray *const *head_grads) {
    if (!ex) return mxp__error(MXP_EMISUSE, "mxp_executor_backward: bad argument");
    mxp__holder_enter(&ex->holder, 0);
    int rc = backward_held(ex, n_head_grads, head_grads);
    mxp__holder_leave(&ex->holder, 0);
    return rc;
}

static int forward_held(mxp_executor *ex, int is_train) {
    MXP_ASSERT(mxp__holder_held(&ex->holder));
    const mxp__program *p = ex->prog;
    int cap = 8;
    for (int s = 0; s < p->n_fwd_steps; s++) {
        const mxp__step *st = &p->steps[s];
        int k = st->n_in + st->n_out + st->n_aux + 1;
        if (k > cap) cap = k;
    }
    mxp_ndarray *small[96]; /* per-call scratch: the heap only for very wide nodes */
    mxp_ndarray **buf = cap * 3 <= 96 ? small : calloc((size_t)cap * 3, sizeof *buf);
    if (!buf) return mxp__error_oom("forward");
    if (buf == small) memset(small, 0, (size_t)cap * 3 * sizeof *small); /* as calloc: unset slots NULL */
    int rc = MXP_OK;
    ex->trained = 0;
    for (int s = 0; s < p->n_fwd_steps && !rc; s++) {
        const mxp__step *st = &p->steps[s];
        mxp_ndarray **in = buf, **out = buf + cap, **aux = buf + 2 * cap;
        gather(ex, st->in, st->n_in, in);
        gather(ex, st->out, st->n_out, out);
        gather(ex, st->aux, st->n_aux, aux);
        mxp__node *node = ex->nodes[st->node];
        rc = mxp__node_forward_step(node, &ex->steps[s], in, out, aux, NULL, is_train);
        if (rc) rc = mxp__error_prefix(rc, "node '%s' (forward)", ex->g->nodes[st->node].g->name);
        /* A registry change moved the node to a new instance: its backward
         * step must not keep the old one pinned until the next backward
         * (a reload waits for it). */
        int b = ex->bwd_step[st->node];
        if (!rc && b >= 0 && mxp__node_step_stale(node, ex->steps[b])) mxp__node_step_reset(ex->steps[b]);
        if (!rc && ex->monitor) rc = run_monitor(ex, st);
    }
    if (buf != small) free(buf);
    if (!rc) ex->trained = is_train ? 1 : 0;
    ex->ran_backward = 0;
    return rc;
}

static int backward_held(mxp_executor *ex, int n_head_grads, mxp_ndarray *const *head_grads) {
    MXP_ASSERT(mxp__holder_held(&ex->holder));
    if (n_head_grads < 0 || (n_head_grads && !head_grads))
        return mxp__error(MXP_EMISUSE, "mxp_executor_backward: bad argument");
    if (!ex->trained)
        return mxp__error(MXP_EMISUSE, "backward: needs a preceding forward with is_train = 1");
    const mxp__program *p = ex->prog;
    const mxp__igraph *g = ex->g;
    if (n_head_grads > g->n_heads)
        return mxp__error(MXP_EINVAL, "backward: %d head gradients for %d outputs", n_head_grads, g->n_heads);
    int rc = MXP_OK;
    /* Head gradients: given, or ones. */
    for (int h = 0; h < g->n_heads && !rc; h++) {
        int v = p->head_grad_value[h];
        if (v < 0) continue;
        mxp_ndarray *given = h < n_head_grads ? head_grads[h] : NULL;
        if (!given) {
            if (!ex->ones[h]) {
                const mxp__value *val = &p->values[v];
                rc = mxp_ndarray_create(val->shape.dims, val->shape.ndim, val->dtype, ex->dev, &ex->ones[h]);
                if (!rc) rc = mxp_ndarray_fill(ex->ones[h], 1.0);
            }
            given = ex->ones[h];
        }
        if (rc) break;
        mxp_ndarray_release(ex->arr[v]);
        ex->arr[v] = mxp_ndarray_retain(given);
    }
    /* Arguments no gradient reaches: zeros (req write), untouched (add). */
    for (int i = 0; i < g->n_args && !rc; i++)
        if (p->arg_grad_req[i] == MXP_REQ_WRITE && p->arg_grad_value[i] < 0 && ex->grads[i])
            rc = mxp_ndarray_fill(ex->grads[i], 0.0);
    int cap = 8;
    for (int s = p->n_fwd_steps; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        int k = st->n_in + st->n_out + st->n_aux + 1;
        if (k > cap) cap = k;
    }
    mxp_ndarray *small[192];
    mxp_ndarray **buf = cap * 6 <= 192 ? small : calloc((size_t)cap * 6, sizeof *buf);
    if (!rc && !buf) rc = mxp__error_oom("backward");
    if (buf == small) memset(small, 0, (size_t)cap * 6 * sizeof *small);
    for (int s = p->n_fwd_steps; s < p->n_steps && !rc; s++) {
        const mxp__step *st = &p->steps[s];
        mxp_ndarray **og = buf, **in = buf + cap, **out = buf + 2 * cap, **ig = buf + 3 * cap, **aux = buf + 4 * cap,
                    **so = buf + 5 * cap;
        if (st->kind == MXP_STEP_BWD) {
            gather(ex, st->og, st->n_out, og);
            gather(ex, st->in, st->n_in, in);
            gather(ex, st->out, st->n_out, out);
            gather(ex, st->ig, st->n_in, ig);
            gather(ex, st->aux, st->n_aux, aux);
            rc = mxp__node_backward_step(ex->nodes[st->node], &ex->steps[s], og, in, out, ig, aux, st->req);
            if (rc) rc = mxp__error_prefix(rc, "node '%s' (backward)", g->nodes[st->node].g->name);
        } else if (st->kind == MXP_STEP_SUM) {
            gather(ex, st->in, st->n_in, in);
            so[0] = SLOT(st->out[0]);
            rc = mxp__node_forward_step(ex->sum_nodes[s], &ex->steps[s], in, so, NULL, st->req, 1);
            if (rc) {
                char nm[2 * MXP_NAME_MAX + 2];
                mxp__igraph_entry_name(g, st->entry, nm, sizeof nm);
                rc = mxp__error_prefix(rc, "gradient sum of '%s'", nm);
            }
        }
    }
    if (buf != small) free(buf);
    ex->ran_backward = 1;
    return rc;
}

int mxp_executor_wait(mxp_executor *ex) {
    if (!ex) return mxp__error(MXP_EMISUSE, "mxp_executor_wait: NULL executor");
    const mxp__program *p = ex->prog;
    /* A bind that failed part-way frees an executor without its arrays. */
    if (!p || !ex->arr) return MXP_OK;
    int first = MXP_OK;
    char msg[1024] = "";
    /* Room for every value any step writes (add_n's backward writes one per
     * input).  Without memory for a wide step, wait for all engine work
     * instead: this wait also guards mxp_executor_free, so it never gives up. */
    int small[256], cap = (int)MXP_ARRAY_LEN(small), *wr = small;
    for (int s = 0; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        if (st->n_in + st->n_out + st->n_aux > cap) cap = st->n_in + st->n_out + st->n_aux;
    }
    if (cap > (int)MXP_ARRAY_LEN(small) && !(wr = malloc((size_t)cap * sizeof *wr))) {
        int rc = mxp_engine_wait_for_all();
        return rc ? rc : mxp__error_oom("executor wait");
    }
    for (int s = 0; s < p->n_steps; s++) {
        const mxp__step *st = &p->steps[s];
        int n = mxp__step_writes(st, wr, cap);
        for (int i = 0; i < n; i++) {
            mxp_ndarray *a = ex->arr[wr[i]];
            if (!a) continue;
            int rc = mxp_ndarray_wait_to_read(a);
            if (rc && first == MXP_OK) {
                first = rc;
                if (st->kind == MXP_STEP_SUM) {
                    char nm[2 * MXP_NAME_MAX + 2];
                    mxp__igraph_entry_name(ex->g, st->entry, nm, sizeof nm);
                    snprintf(msg, sizeof msg, "gradient sum of '%s': %s", nm, mxp_last_error());
                } else
                    snprintf(msg, sizeof msg, "node '%s' (%s): %s", ex->g->nodes[st->node].g->name,
                             st->kind == MXP_STEP_FWD ? "forward" : "backward", mxp_last_error());
            }
        }
    }
    for (int h = 0; ex->outs && h < ex->g->n_heads; h++) {
        int rc = ex->outs[h] ? mxp_ndarray_wait_to_read(ex->outs[h]) : MXP_OK;
        if (rc && first == MXP_OK) {
            first = rc;
            snprintf(msg, sizeof msg, "%s", mxp_last_error());
        }
    }
    if (wr != small) free(wr);
    if (first) return mxp__error(first, "%s", msg);
    return MXP_OK;
}
