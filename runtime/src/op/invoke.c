/* invoke.c — imperative invoke (mxp_invoke / mxp_invoke_ex) and the host
 * table's invoke slot, both thin wrappers over a node (op.h).
 *
 * mxp_invoke: look the call's signature up in the thread's cache
 * (invoke_cache.c: op, kwargs, device, training flag, array shapes and
 * dtypes); on a hit the cached node is ready (inferred and bound), else
 * create a node (kwargs validated) -> infer from the arrays given.  Then
 * allocate missing outputs on the run device -> node_forward (bind + push)
 * -> offer a new node to the cache -> drop this call's reference (pushed
 * work keeps what it needs).  Hidden outputs (beyond n_visible_outputs)
 * and absent aux states are temporaries.  A hit does in the call what the
 * first call did (the same checks of given outputs and aux states happen
 * at the push), so errors are the same, worded by the push's checks.
 * A plain first call (no outputs, aux states, req or device given; no temp
 * space, random numbers or mutated inputs) also leaves its exec record in
 * the entry, and its hits take the prepared path (run_prepared): fresh
 * outputs, a copy of the record with the new arrays' data and vars, one
 * engine push, the autograd record — the key already fixed everything the
 * general path would check, except the other inputs' devices and the
 * node's instance, which are checked, and anything unusual goes the
 * general way, which reports errors as before.
 * host.invoke: uncached, synchronous on caller tensors
 * (mxp__node_run_tensors), safe to call from inside an engine worker. */
#include "op/op.h"

#include "op/exec.h"
#include "op/invoke_cache.h"

#include "autograd/autograd.h"
#include "ndarray/ndarray.h"
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

static int invoke_scoped(mxp__invoke_cache *c, const char *op_name, int n_in, mxp_ndarray *const *inputs,
                         int *n_out, mxp_ndarray **outputs, int n_kwargs, const char *const *keys,
                         const char *const *vals, const mxp_invoke_opts *opts);

/* One pin scope (plugin.h) per call: the node pins the op's def, then its
 * impl; a reload in between waits for the call to finish.  With the
 * thread's cache, the scope is its holder's (a reload pending releases the
 * cache first). */
int mxp_invoke_ex(const char *op_name, int n_in, mxp_ndarray *const *inputs, int *n_out, mxp_ndarray **outputs,
                  int n_kwargs, const char *const *keys, const char *const *vals, const mxp_invoke_opts *opts) {
    mxp__invoke_cache *c = mxp__invoke_cache_get();
    if (c) mxp__invoke_cache_enter(c);
    else mxp__pin_scope_enter(1);
    int rc = invoke_scoped(c, op_name, n_in, inputs, n_out, outputs, n_kwargs, keys, vals, opts);
    if (c) mxp__invoke_cache_leave(c);
    else mxp__pin_scope_leave();
    return rc;
}

/* The cache key of a call (invoke_cache.c), or k->ok = 0 when the call is
 * not to be cached (a NULL or none array: the uncached path reports it).
 * The device is the key's when opts names one, else input 0's (or given
 * output 0's), else CPU 0: *key_dev. */
static void make_key(mxp__invoke_key *k, const char *op_name, int n_in, mxp_ndarray *const *inputs, int cap,
                     mxp_ndarray *const *outputs, int n_kwargs, const char *const *keys, const char *const *vals,
                     const mxp_invoke_opts *opts, int is_train, mxp_device *key_dev) {
    *key_dev = (mxp_device){MXP_DEV_CPU, 0};
    mxp__invoke_key_init(k);
    mxp__invoke_key_str(k, op_name);
    size_t at_head = k->len;
    int32_t head[6] = {n_in, n_kwargs, 0, 0, is_train, opts->n_aux};
    mxp__invoke_key_bytes(k, head, sizeof head); /* the device goes in at the end */
    for (int i = 0; i < n_kwargs && k->ok; i++) {
        if (!keys[i] || !vals[i]) {
            k->ok = 0;
            return;
        }
        mxp__invoke_key_str(k, keys[i]);
        mxp__invoke_key_str(k, vals[i]);
    }
    mxp_device dev = {MXP_DEV_CPU, 0}, d;
    int have_dev = 0;
    int32_t dt, nd;
    for (int i = 0; i < n_in && k->ok; i++) {
        const int64_t *dims = mxp__ndarray_sig(inputs[i], &dt, &nd, &d);
        if (!dims) {
            k->ok = 0;
            return;
        }
        if (!have_dev) dev = d, have_dev = 1;
        mxp__invoke_key_array(k, i, dt, nd, dims);
    }
    for (int i = 0; i < cap && k->ok; i++)
        if (outputs[i]) {
            const int64_t *dims = mxp__ndarray_sig(outputs[i], &dt, &nd, &d);
            if (!dims) {
                k->ok = 0;
                return;
            }
            if (i == 0 && !have_dev) dev = d, have_dev = 1;
            mxp__invoke_key_array(k, i, dt, nd, dims);
        }
    mxp__invoke_key_int(k, -1); /* outputs | aux */
    for (int i = 0; i < opts->n_aux && k->ok; i++) {
        const int64_t *dims = opts->aux ? mxp__ndarray_sig(opts->aux[i], &dt, &nd, &d) : NULL;
        if (!dims) {
            k->ok = 0;
            return;
        }
        mxp__invoke_key_array(k, i, dt, nd, dims);
    }
    if (opts->has_device) dev = opts->device;
    *key_dev = dev;
    if (k->ok) memcpy(k->buf + at_head + 2 * sizeof(int32_t), &dev, sizeof dev);
}

_Static_assert(sizeof(mxp_device) == 2 * sizeof(int32_t), "the key's head holds a device in two int32 slots");

static int dev_eq(mxp_device a, mxp_device b) { return a.type == b.type && a.id == b.id; }

/* A hit with a prepared forward (invoke_cache.h): what the cached call
 * did, without redoing its checks — the key fixed the op, kwargs, arrays'
 * dtypes and shapes, input 0's device and the training flag; the other
 * inputs' devices and the node's instance are checked here, and anything
 * else (another device, an instance changed) goes the general way
 * (*handled 0).  Outputs are allocated as the general path does, the
 * forward pushed from the template, the call recorded for autograd. */
enum { PREP_MAX_OUT = 8 };
static _Thread_local unsigned long tl_prepared_runs;
unsigned long mxp__invoke_prepared_runs(void) { return tl_prepared_runs; }

static int run_prepared(mxp__node *n, const mxp__invoke_prep *prep, int n_in, mxp_ndarray *const *inputs,
                        int *n_out, mxp_ndarray **outputs, mxp_device dev, int *handled) {
    const mxp__exec *tmpl = prep->tmpl;
    *handled = 0;
    int no = (int)tmpl->n_out, nv = mxp__node_num_visible_outputs(n);
    if (n_in < 1 || no > PREP_MAX_OUT || *n_out < nv || !dev_eq(tmpl->dev, dev) || !mxp__node_runs_on(n, tmpl->inst))
        return MXP_OK;
    for (int i = 1; i < n_in; i++)
        if (!dev_eq(mxp_ndarray_device(inputs[i]), dev)) return MXP_OK;
    *handled = 1;
    tl_prepared_runs++;
    mxp_ndarray *outs[PREP_MAX_OUT];
    int rc = MXP_OK, made = 0;
    for (; made < no && !rc; made++) {
        const mxp_tensor *t = &tmpl->t[n_in + made];
        rc = mxp__ndarray_create_like(inputs[0], t->shape, t->ndim, t->dtype, &outs[made]);
        if (rc) mxp__error_prefix(rc, "op '%s': allocating output %d", mxp__node_op_name(n), made);
    }
    if (rc) made--; /* the failed one holds nothing */
    int record = !rc && mxp__autograd_wants(n_in, inputs);
    if (!rc) rc = mxp__exec_forward_from(tmpl, prep->tiny, inputs, outs);
    if (!rc && record) {
        int taken = 0;
        rc = mxp__autograd_record_op(mxp__node_retain(n), n_in, inputs, no, nv, outs, 0, NULL, &taken);
        if (!taken) mxp__node_free(n);
    }
    int given = rc ? 0 : nv; /* the caller's now */
    for (int i = 0; i < given; i++) outputs[i] = outs[i];
    for (int i = given; i < made; i++) mxp_ndarray_release(outs[i]);
    if (!rc) *n_out = nv;
    return rc;
}

/* The first call of a signature that may be prepared: plain options, no
 * outputs given, no aux states; the template is built from this call's
 * arrays (only its views and var lists are replaced at each hit). */
static mxp__exec *prepare(mxp__node *n, mxp_ndarray *const *inputs, mxp_ndarray *const *outs, int is_train,
                          int *tiny) {
    const mxp__inst *in = mxp__node_current(n);
    if (!in || in->state || in->workspace_bytes || (mxp__inst_def(in)->resources & MXP_RESOURCE_RANDOM) ||
        mxp__node_num_aux(n) || mxp__node_num_outputs(n) > PREP_MAX_OUT || mxp__node_num_inputs(n) < 1)
        return NULL;
    mxp__exec *x = NULL;
    if (mxp__exec_forward_prepare(n, inputs, outs, NULL, NULL, is_train, 0, &x)) {
        mxp__error_clear();
        return NULL;
    }
    if (!mxp__exec_forward_plain(x) || x->inst != in) {
        mxp__exec_free(x);
        return NULL;
    }
    *tiny = mxp__exec_is_tiny(x);
    return x;
}

#define SMALL 16 /* signature entries kept on the stack */

static int invoke_scoped(mxp__invoke_cache *c, const char *op_name, int n_in, mxp_ndarray *const *inputs,
                         int *n_out, mxp_ndarray **outputs, int n_kwargs, const char *const *keys,
                         const char *const *vals, const mxp_invoke_opts *opts) {
    if (!op_name || !n_out || n_in < 0 || (n_in && !inputs) || *n_out < 0 || (*n_out && !outputs))
        return mxp__error(MXP_EINVAL, "mxp_invoke('%s'): bad argument", op_name ? op_name : "NULL");
    /* A copy of the caller's options at this library's size (absent
     * fields 0); no options: all defaults. */
    mxp_invoke_opts o;
    mxp__app_struct_in(&o, sizeof o, opts, MXP__SIZE_THROUGH(mxp_invoke_opts, aux));
    opts = &o;
    mxp__invoke_install_host();
    int cap = *n_out;
    /* Under autograd recording (and training mode) the op runs in training
     * mode and, when an input needs a gradient, the node and arrays go on
     * the tape (autograd.c), which then holds a reference on the node. */
    int is_train = opts->is_train || mxp__autograd_training() ? 1 : 0;
    mxp__invoke_key key;
    key.ok = 0;
    key.len = 0;
    uint64_t hash = 0;
    mxp__node *n = NULL;
    int hit = 0;
    /* Plain: no req, device or aux given (outputs given show in the key). */
    int plain = !opts->req && !opts->has_device && !opts->n_aux;
    if (c && n_kwargs >= 0 && (!n_kwargs || (keys && vals))) {
        mxp_device key_dev;
        make_key(&key, op_name, n_in, inputs, cap, outputs, n_kwargs, keys, vals, opts, is_train, &key_dev);
        mxp__invoke_prep prep;
        n = mxp__invoke_cache_find(c, &key, &hash, &prep);
        if (n && prep.tmpl && plain) {
            int handled;
            int rc = run_prepared(n, &prep, n_in, inputs, n_out, outputs, key_dev, &handled);
            if (handled) return rc;
        }
        if (n) {
            mxp__node_retain(n);
            hit = 1;
        }
    }
    int rc = MXP_OK;
    if (!n && (rc = mxp__node_create(op_name, n_kwargs, keys, vals, &n))) return rc;
    const char *op = mxp__node_op_name(n);
    int ni = mxp__node_num_inputs(n), no = mxp__node_num_outputs(n), nv = mxp__node_num_visible_outputs(n),
        na = mxp__node_num_aux(n);
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
    /* Per-call scratch: on the stack for the usual few entries. */
    int tot = ni + no + na;
    mxp_shape s_small[SMALL];
    int32_t t_small[SMALL];
    mxp_ndarray *outs_small[SMALL], *aux_small[SMALL];
    int req_small[SMALL];
    uint8_t mine_small[SMALL];
    int heap = tot >= SMALL;
    mxp_shape *s = heap ? calloc((size_t)tot + 1, sizeof *s) : s_small;
    int32_t *t = heap ? calloc((size_t)tot + 1, sizeof *t) : t_small;
    mxp_ndarray **outs = heap ? calloc((size_t)no + 1, sizeof *outs) : outs_small;
    mxp_ndarray **aux = heap ? calloc((size_t)na + 1, sizeof *aux) : aux_small;
    int *req = heap ? calloc((size_t)no + 1, sizeof *req) : req_small;
    uint8_t *mine = heap ? calloc((size_t)no + 1, 1) : mine_small; /* outputs we allocated */
    if (!s || !t || !outs || !aux || !req || !mine) {
        rc = mxp__error_oom("invoke");
        goto out;
    }
    memset(outs, 0, ((size_t)no + 1) * sizeof *outs);
    memset(aux, 0, ((size_t)na + 1) * sizeof *aux);
    memset(mine, 0, (size_t)no + 1);
    if (hit) {
        /* The signature is the key's: what infer found the first time. */
        memcpy(s, mxp__node_shapes(n), (size_t)tot * sizeof *s);
        memcpy(t, mxp__node_dtypes(n), (size_t)tot * sizeof *t);
    } else {
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
    }
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
    int record = mxp__autograd_wants(n_in, inputs);
    rc = mxp__node_forward(n, inputs, outs, aux, req, is_train);
    if (rc) goto out;
    if (!hit && c && key.ok) {
        int given = 0, tiny = 0;
        for (int i = 0; i < cap && !given; i++) given = outputs[i] != NULL;
        mxp__exec *tmpl = plain && !given ? prepare(n, inputs, outs, is_train, &tiny) : NULL;
        mxp__invoke_cache_put(c, &key, hash, n, tmpl, tiny);
    }
    if (record) {
        int taken = 0;
        rc = mxp__autograd_record_op(mxp__node_retain(n), n_in, inputs, no, nv, outs, na, aux, &taken);
        if (!taken) mxp__node_free(n);
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
    if (heap) {
        free(s);
        free(t);
        free(outs);
        free(aux);
        free(req);
        free(mine);
    }
    mxp__node_free(n);
    return rc;
}
