/* invoke.c — imperative invoke (mxp_invoke / mxp_invoke_ex) and the host
 * table's invoke slot, both thin wrappers over a temporary node (op.h).
 *
 * mxp_invoke: create node (kwargs validated) -> infer from the arrays given
 * -> allocate missing outputs on the run device -> node_forward (bind +
 * push) -> free the node (pushed work keeps what it needs).  Hidden outputs
 * (beyond n_visible_outputs) and absent aux states are temporaries.
 * No cache of nodes across calls: a cached node would keep impl refs (and
 * so pack pins) while idle, which would stall a pack reload until its
 * timeout; creating a node is a registry lookup and a kwargs parse.
 * host.invoke: same, but synchronous on caller tensors (mxp__node_run_tensors),
 * safe to call from inside an engine worker. */
#include "op/op.h"

#include "autograd/autograd.h"
#include "plugin/plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int host_invoke(const char *op, uint32_t n_in, const mxp_tensor *in, uint32_t n_out, const mxp_tensor *out,
                       const char *const *keys, const char *const *vals, uint32_t n_kwargs) {
    if (!op || (n_in && !in) || (n_out && !out))
        return mxp__error(MXP_EINVAL, "host.invoke('%s'): NULL argument", op ? op : "NULL");
    mxp__node *n = NULL;
    int rc = mxp__node_create(op, (int)n_kwargs, keys, vals, &n);
    if (!rc) rc = mxp__node_run_tensors(n, n_in, in, n_out, out);
    mxp__node_free(n);
    return rc;
}

void mxp__invoke_install_host(void) { mxp__host_set_invoke(host_invoke); }

/* Packs may call host.invoke before any application call of mxp_invoke. */
__attribute__((constructor)) static void invoke_ctor(void) { mxp__invoke_install_host(); }

int mxp_invoke(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out, mxp_ndarray **outputs,
               int n_kwargs, const char *const *keys, const char *const *vals) {
    return mxp_invoke_ex(op_name, n_in, inputs, n_out, outputs, n_kwargs, keys, vals, NULL);
}

static int invoke_scoped(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out,
                         mxp_ndarray **outputs, int n_kwargs, const char *const *keys, const char *const *vals,
                         const mxp_invoke_opts *opts);

/* One pin scope (plugin.h) per call: the temporary node pins the op's def,
 * then its impl; a reload in between waits for the call to finish. */
int mxp_invoke_ex(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out, mxp_ndarray **outputs,
                  int n_kwargs, const char *const *keys, const char *const *vals, const mxp_invoke_opts *opts) {
    mxp__pin_scope_enter(1);
    int rc = invoke_scoped(op_name, n_in, inputs, n_out, outputs, n_kwargs, keys, vals, opts);
    mxp__pin_scope_leave();
    return rc;
}

static int invoke_scoped(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out,
                         mxp_ndarray **outputs, int n_kwargs, const char *const *keys, const char *const *vals,
                         const mxp_invoke_opts *opts) {
    if (!op_name || !n_out || n_in < 0 || (n_in && !inputs) || *n_out < 0 || (*n_out && !outputs))
        return mxp__error(MXP_EINVAL, "mxp_invoke('%s'): bad argument", op_name ? op_name : "NULL");
    /* A copy of the caller's options at this library's size (absent
     * fields 0); no options: all defaults. */
    mxp_invoke_opts o;
    mxp__app_struct_in(&o, sizeof o, opts, MXP__SIZE_THROUGH(mxp_invoke_opts, aux));
    opts = &o;
    mxp__invoke_install_host();
    mxp__node *n = NULL;
    int rc = mxp__node_create(op_name, n_kwargs, keys, vals, &n);
    if (rc) return rc;
    const char *op = mxp__node_op_name(n);
    int ni = mxp__node_num_inputs(n), no = mxp__node_num_outputs(n), nv = mxp__node_num_visible_outputs(n),
        na = mxp__node_num_aux(n);
    int cap = *n_out;
    if (n_in != ni) {
        char names[512] = "";
        size_t off = 0;
        for (int i = 0; i < ni && off < sizeof names; i++)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", i ? ", " : "", mxp__node_input_name(n, i));
        rc = mxp__error(MXP_EINVAL, "op '%s': got %d inputs, it takes %d (%s)", op, n_in, ni, names);
    } else if (cap < nv) {
        *n_out = nv;
        rc = mxp__error(MXP_EINVAL, "op '%s': produces %d outputs, room for %d", op, nv, cap);
    } else if (opts->n_aux != 0 && opts->n_aux != na) {
        rc = mxp__error(MXP_EINVAL, "op '%s': got %d aux arrays, it has %d", op, opts->n_aux, na);
    } else if (opts->n_aux && !opts->aux) {
        rc = mxp__error(MXP_EINVAL, "op '%s': n_aux %d but aux is NULL", op, opts->n_aux);
    }
    for (int i = 0; i < n_in && !rc; i++)
        if (!inputs[i] || mxp_ndarray_is_none(inputs[i]))
            rc = mxp__error(MXP_EINVAL, "op '%s': input %d '%s' is %s", op, i, mxp__node_input_name(n, i),
                            inputs[i] ? "a none array" : "NULL");
    if (rc) {
        mxp__node_free(n);
        return rc;
    }
    int tot = ni + no + na;
    mxp_shape *s = calloc((size_t)tot + 1, sizeof *s);
    int32_t *t = calloc((size_t)tot + 1, sizeof *t);
    mxp_ndarray **outs = calloc((size_t)no + 1, sizeof *outs);
    mxp_ndarray **aux = calloc((size_t)na + 1, sizeof *aux);
    int *req = calloc((size_t)no + 1, sizeof *req);
    uint8_t *mine = calloc((size_t)no + 1, 1);      /* outputs we allocated */
    if (!s || !t || !outs || !aux || !req || !mine) {
        rc = mxp__error_oom("invoke");
        goto out;
    }
    for (int i = 0; i < tot; i++) {
        s[i].ndim = -1;
        t[i] = MXP_DTYPE_UNKNOWN;
    }
    for (int i = 0; i < ni; i++) {
        s[i].ndim = mxp_ndarray_ndim(inputs[i]);
        memcpy(s[i].dims, mxp_ndarray_shape(inputs[i]), (size_t)s[i].ndim * sizeof(int64_t));
        t[i] = mxp_ndarray_dtype(inputs[i]);
    }
    for (int i = 0; i < nv; i++) {
        mxp_ndarray *o = outputs[i];
        if (!o) continue;
        if (mxp_ndarray_is_none(o)) {
            rc = mxp__error(MXP_EINVAL, "op '%s': output %d is a none array", op, i);
            goto out;
        }
        s[ni + i].ndim = mxp_ndarray_ndim(o);
        memcpy(s[ni + i].dims, mxp_ndarray_shape(o), (size_t)s[ni + i].ndim * sizeof(int64_t));
        t[ni + i] = mxp_ndarray_dtype(o);
    }
    for (int i = 0; i < opts->n_aux; i++) {
        mxp_ndarray *a = opts->aux[i];
        if (!a || mxp_ndarray_is_none(a)) {
            rc = mxp__error(MXP_EINVAL, "op '%s': aux state %d is %s", op, i, a ? "a none array" : "NULL");
            goto out;
        }
        s[ni + no + i].ndim = mxp_ndarray_ndim(a);
        memcpy(s[ni + no + i].dims, mxp_ndarray_shape(a), (size_t)s[ni + no + i].ndim * sizeof(int64_t));
        t[ni + no + i] = mxp_ndarray_dtype(a);
    }
    rc = mxp__node_infer(n, s, t, s + ni, t + ni, s + ni + no, t + ni + no);
    if (rc) goto out;
    mxp_device dev = opts->has_device ? opts->device
                     : ni             ? mxp_ndarray_device(inputs[0])
                     : (nv && outputs[0]) ? mxp_ndarray_device(outputs[0])
                                      : (mxp_device){MXP_DEV_CPU, 0};
    for (int i = 0; i < no; i++) {
        req[i] = (i < nv && opts->req) ? opts->req[i] : MXP_REQ_WRITE;
        if (i < nv && outputs[i]) {
            outs[i] = outputs[i];
            continue;
        }
        rc = mxp_ndarray_create(s[ni + i].dims, s[ni + i].ndim, t[ni + i], dev, &outs[i]);
        if (rc) {
            mxp__error_prefix(rc, "op '%s': allocating output %d", op, i);
            goto out;
        }
        mine[i] = 1;
        /* Fresh memory holds nothing to add to. */
        if (req[i] == MXP_REQ_ADD || req[i] == MXP_REQ_NULL) req[i] = MXP_REQ_WRITE;
    }
    for (int i = 0; i < na; i++) {
        if (opts->n_aux) {
            aux[i] = opts->aux[i];
            continue;
        }
        rc = mxp_ndarray_create(s[ni + no + i].dims, s[ni + no + i].ndim, t[ni + no + i], dev, &aux[i]);
        if (!rc) rc = mxp_ndarray_fill(aux[i], 0.0);
        if (rc) {
            mxp__error_prefix(rc, "op '%s': allocating aux state %d", op, i);
            goto out;
        }
    }
    /* Under autograd recording (and training mode) the op runs in training
     * mode and, when an input needs a gradient, the node and arrays go on
     * the tape (autograd.c), which then owns the node. */
    int record = mxp__autograd_wants(n_in, inputs);
    rc = mxp__node_forward(n, inputs, outs, aux, req, opts->is_train || mxp__autograd_training());
    if (rc) goto out;
    if (record) {
        int taken = 0;
        rc = mxp__autograd_record_op(n, n_in, inputs, no, nv, outs, na, aux, &taken);
        if (taken) n = NULL;
        if (rc) goto out;
    }
    for (int i = 0; i < nv; i++)
        if (mine[i]) {
            outputs[i] = outs[i];
            mine[i] = 0; /* now the caller's */
        }
    *n_out = nv;
out:
    if (outs)
        for (int i = 0; i < no; i++)
            if (mine && mine[i]) mxp_ndarray_release(outs[i]);
    if (aux && !opts->n_aux)
        for (int i = 0; i < na; i++) mxp_ndarray_release(aux[i]);
    free(s);
    free(t);
    free(outs);
    free(aux);
    free(req);
    free(mine);
    mxp__node_free(n);
    return rc;
}
