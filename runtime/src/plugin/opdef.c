/* opdef.c — the one path from the runtime into an op's pack code (see
 * opdef.h): definitions held with their pack pinned, params, names,
 * inference, backward dependencies, supports, instances (workspace +
 * create + destroy) and forward/backward runs with their mxp_op_ctx.
 *
 * Each pack call clears the thread's error first, so a message left by an
 * earlier failure is never mistaken for this call's; a pack that fails
 * without a message gets one naming the op, the impl and the callback.
 * Positive statuses from packs are not statuses: they become MXP_EPLUGIN
 * (MXP_ESHAPE / MXP_ETYPE for inference).
 * Not here: the choice among impls (select.c, tune.c). */
#include "plugin/opdef.h"
#include "plugin/plugin_impl.h"

#include "engine/parallel.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ definitions */
int mxp__op_ensure_def(struct mxp_op *op, const mxp_op_def **out_def) {
    *out_def = NULL;
    mxp__registry_rdlock();
    const mxp_op_def *d = op->def;
    mxp_pack *p = op->pack;
    int removed = op->removed;
    mxp__registry_unlock();
    if (d) {
        *out_def = d;
        return MXP_OK;
    }
    if (removed)
        return mxp__error(MXP_ENOENT, "op '%s': pack '%s' no longer defines it (a reload of the pack removed it)",
                          op->name, p ? p->man->name : "?");
    if (!p) return mxp__error(MXP_ENOENT, "op '%s': implementations exist but no pack defines the op", op->name);
    int rc = mxp__pack_load(p);
    if (rc) return mxp__error_prefix(rc, "op '%s'", op->name);
    mxp__registry_rdlock();
    d = op->def;
    mxp__registry_unlock();
    if (!d) return mxp__error(MXP_ENOENT, "op '%s': pack '%s' loaded but does not define it", op->name, p->man->name);
    *out_def = d;
    return MXP_OK;
}

void mxp__op_bound_add(struct mxp_op *op, int delta) {
    if (op) atomic_fetch_add(&op->bound, delta);
}

int mxp__opdef_acquire_op(struct mxp_op *op, mxp__opdef *out) {
    memset(out, 0, sizeof *out);
    uint64_t gen = mxp_registry_generation();
    const mxp_op_def *def;
    int rc = mxp__op_ensure_def(op, &def);
    if (rc) return rc;
    mxp__registry_rdlock();
    mxp_pack *p = op->pack;
    mxp__registry_unlock();
    if (!p) return mxp__error(MXP_ENOENT, "op '%s': no defining pack", op->name);
    if ((rc = mxp__pack_pin(p))) return mxp__error_prefix(rc, "op '%s'", op->name);
    /* Read the def again under the pin: a reload may have replaced it
     * between ensure_def and the pin. */
    mxp__registry_rdlock();
    def = op->def;
    mxp__registry_unlock();
    if (!def) {
        mxp__pack_unpin(p);
        return mxp__error(MXP_ENOENT, "op '%s': its defining pack is not loaded", op->name);
    }
    out->op = op;
    out->pinned = p;
    out->def = def;
    out->name = op->name;
    out->generation = gen;
    return MXP_OK;
}

int mxp__opdef_acquire(const char *name_or_alias, mxp__opdef *out) {
    memset(out, 0, sizeof *out);
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    struct mxp_op *op = mxp__registry_find_op(name_or_alias);
    if (!op) {
        char pack[256];
        if (mxp__registry_retired_pack(name_or_alias, pack, sizeof pack))
            return mxp__error(MXP_ENOENT, "op '%s': pack '%s' no longer defines it (a reload of the pack removed it)",
                              name_or_alias, pack);
        return mxp__error(MXP_ENOENT, "op '%s': not registered (`mxplug list` shows the known ops; a pack's manifest "
                          "is found through MXP_PLUGIN_PATH or MXP_MANIFEST)", name_or_alias);
    }
    return mxp__opdef_acquire_op(op, out);
}

void mxp__opdef_release(mxp__opdef *d) {
    if (!d) return;
    if (d->pinned) mxp__pack_unpin(d->pinned);
    memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------ params */
int mxp__op_params_new(const mxp_op_def *def, const char *const *keys, const char *const *vals, int n_kwargs,
                       void **out) {
    *out = NULL;
    if (n_kwargs < 0) n_kwargs = 0;
    const char **k = calloc((size_t)n_kwargs + 1, sizeof *k), **v = calloc((size_t)n_kwargs + 1, sizeof *v);
    void *p = calloc(1, def->params_size ? def->params_size : 1);
    if (!k || !v || !p) {
        free(k);
        free(v);
        free(p);
        return mxp__error_oom("params");
    }
    int m = 0;
    for (int i = 0; i < n_kwargs; i++) {
        if (keys[i] && !strncmp(keys[i], "__", 2)) continue;
        k[m] = keys[i];
        v[m++] = vals[i];
    }
    char what[128];
    snprintf(what, sizeof what, "op '%s'", def->name);
    int rc = mxp__params_parse(def->params, def->n_params, k, v, (uint32_t)m, p, what);
    free(k);
    free(v);
    if (!rc && def->check_params) {
        mxp_check_params_args a = {MXP_HEADER(mxp_check_params_args), p, def->user_data};
        mxp__error_clear();
        rc = def->check_params(&a);
        if (rc > 0) rc = MXP_EPLUGIN;
        if (rc) rc = mxp__error_prefix(rc, "op '%s'", def->name);
    }
    if (rc) {
        mxp__params_free(def->params, def->n_params, p);
        free(p);
        return rc;
    }
    *out = p;
    return MXP_OK;
}

void mxp__op_params_free(const mxp_op_def *def, void *params) {
    if (!params) return;
    mxp__params_free(def->params, def->n_params, params);
    free(params);
}

/* ------------------------------------------------------------ names */
int mxp__op_list_names_def(const mxp_op_def *def, const void *params, int which, char (*names)[MXP_NAME_MAX],
                           int capacity, int *out_count) {
    *out_count = 0;
    int (*fn)(mxp_list_names_args *) = which == 0 ? def->list_args : which == 1 ? def->list_outputs : def->list_aux;
    if (fn) {
        mxp_list_names_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_list_names_args);
        a.params = params;
        a.user_data = def->user_data;
        a.names = names;
        a.capacity = (uint32_t)(capacity > 0 ? capacity : 0);
        mxp__error_clear();
        int rc = fn(&a);
        if (rc > 0) rc = MXP_EPLUGIN;
        if (rc) return mxp__error_prefix(rc, "op '%s': listing names", def->name);
        if ((int)a.count > capacity && capacity >= 0)
            return mxp__error(MXP_EINVAL, "op '%s': %u names do not fit in %d", def->name, a.count, capacity);
        *out_count = (int)a.count;
        return MXP_OK;
    }
    const char *const *v = which == 0 ? def->arg_names : which == 1 ? def->output_names : def->aux_names;
    static const char *const k_out[] = {"output", NULL};
    if (which == 1 && !v) v = k_out;
    int n = 0;
    for (; v && v[n]; n++) {
        if (n >= capacity) return mxp__error(MXP_EINVAL, "op '%s': more than %d names", def->name, capacity);
        snprintf(names[n], MXP_NAME_MAX, "%s", v[n]);
    }
    *out_count = n;
    return MXP_OK;
}

/* Packs refuse a names buffer that is too small without saying how many
 * they need (mxp_list_names_args has no way to): a list is tried on the
 * stack first (NAMES_SMALL: most ops have a few names, and mxp_invoke
 * lists them on every call), then in a heap buffer from NAMES_FIRST,
 * retried with 8 times the room after a refusal, up to NAMES_MOST. */
#define NAMES_SMALL 16
#define NAMES_FIRST 1024
#define NAMES_MOST (1 << 16)

/* One list into the stack buffer or *heap (grown, kept for the next). */
static int list_one(const mxp_op_def *def, const void *params, int which, char (*small)[MXP_NAME_MAX],
                    char (**heap)[MXP_NAME_MAX], int *heap_cap, char (**out)[MXP_NAME_MAX], int *count) {
    int rc = mxp__op_list_names_def(def, params, which, small, NAMES_SMALL, count);
    if (!rc) {
        *out = small;
        return MXP_OK;
    }
    for (int want = *heap_cap ? *heap_cap : NAMES_FIRST;; want *= 8) {
        if (want > *heap_cap) {
            free(*heap);
            *heap_cap = 0;
            if (!(*heap = malloc((size_t)want * MXP_NAME_MAX))) return mxp__error_oom("op names");
            *heap_cap = want;
        }
        rc = mxp__op_list_names_def(def, params, which, *heap, *heap_cap, count);
        if (!rc || *heap_cap >= NAMES_MOST) break;
    }
    *out = *heap;
    return rc;
}

int mxp__op_list_all_names(const mxp_op_def *def, const void *params, char (**out)[MXP_NAME_MAX], int counts[3]) {
    *out = NULL;
    counts[0] = counts[1] = counts[2] = 0;
    char small[NAMES_SMALL][MXP_NAME_MAX];
    char(*heap)[MXP_NAME_MAX] = NULL, (*all)[MXP_NAME_MAX] = NULL;
    int heap_cap = 0, total = 0, rc = MXP_OK;
    for (int w = 0; w < 3 && !rc; w++) {
        char(*got)[MXP_NAME_MAX] = NULL;
        int c = 0;
        if ((rc = list_one(def, params, w, small, &heap, &heap_cap, &got, &c))) break;
        char(*grown)[MXP_NAME_MAX] = realloc(all, (size_t)(total + c + 1) * MXP_NAME_MAX);
        if (!grown) {
            rc = mxp__error_oom("op names");
            break;
        }
        all = grown;
        memcpy(all + total, got, (size_t)c * MXP_NAME_MAX);
        counts[w] = c;
        total += c;
    }
    free(heap);
    if (rc) {
        free(all);
        counts[0] = counts[1] = counts[2] = 0;
        return rc;
    }
    *out = all;
    return MXP_OK;
}

int mxp__opdef_visible_outputs(const mxp_op_def *def, int n_out) {
    return def->n_visible_outputs && (int)def->n_visible_outputs <= n_out ? (int)def->n_visible_outputs : n_out;
}

/* ------------------------------------------------------------ inference */
/* A failed inference callback: its own message prefixed with `who`, else
 * one naming the status.  Positive statuses become `fallback`. */
static int infer_fail(int rc, int fallback, const char *who, const char *what) {
    if (rc > 0) rc = fallback;
    if (mxp_last_error()[0]) return mxp__error_prefix(rc, "%s: %s", who, what);
    return mxp__error(rc, "%s: %s failed (%s)", who, what, mxp_status_str(rc));
}

int mxp__opdef_infer_shape(const mxp_op_def *def, const void *params, const char *who, uint32_t n_in,
                           uint32_t n_out, uint32_t n_aux, mxp_shape *in, mxp_shape *out, mxp_shape *aux) {
    if (!def->infer_shape) return mxp__error(MXP_EPLUGIN, "%s: the definition has no infer_shape", who);
    mxp_infer_shape_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_infer_shape_args);
    a.params = params;
    a.user_data = def->user_data;
    a.n_in = n_in;
    a.n_out = n_out;
    a.n_aux = n_aux;
    a.in = in;
    a.out = out;
    a.aux = aux;
    mxp__error_clear();
    int rc = def->infer_shape(&a);
    if (rc == MXP_OK || rc == MXP_EINCOMPLETE) return rc;
    return infer_fail(rc, MXP_ESHAPE, who, "shape inference");
}

int mxp__opdef_infer_type(const mxp_op_def *def, const void *params, const char *who, uint32_t n_in,
                          uint32_t n_out, uint32_t n_aux, int32_t *in, int32_t *out, int32_t *aux) {
    if (def->infer_type) {
        mxp_infer_type_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_infer_type_args);
        a.params = params;
        a.user_data = def->user_data;
        a.n_in = n_in;
        a.n_out = n_out;
        a.n_aux = n_aux;
        a.in = in;
        a.out = out;
        a.aux = aux;
        mxp__error_clear();
        int rc = def->infer_type(&a);
        if (rc == MXP_OK || rc == MXP_EINCOMPLETE) return MXP_OK;
        return infer_fail(rc, MXP_ETYPE, who, "type inference");
    }
    /* Default rule: every entry takes the first known dtype. */
    int32_t *const arr[3] = {in, out, aux};
    const uint32_t cnt[3] = {n_in, n_out, n_aux};
    int32_t first = MXP_DTYPE_UNKNOWN;
    for (int k = 0; k < 3 && first == MXP_DTYPE_UNKNOWN; k++)
        for (uint32_t i = 0; i < cnt[k] && first == MXP_DTYPE_UNKNOWN; i++)
            if (arr[k][i] != MXP_DTYPE_UNKNOWN) first = arr[k][i];
    if (first == MXP_DTYPE_UNKNOWN) return MXP_OK;
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < cnt[k]; i++) arr[k][i] = first;
    return MXP_OK;
}

void mxp__opdef_backward_deps(const mxp_op_def *def, const void *params, uint32_t n_in, uint32_t n_out,
                              uint8_t *need_out_grad, uint8_t *need_in, uint8_t *need_out) {
    memset(need_out_grad, (def->backward_deps & MXP_BWD_OUT_GRAD) ? 1 : 0, n_out);
    memset(need_in, (def->backward_deps & MXP_BWD_IN_DATA) ? 1 : 0, n_in);
    memset(need_out, (def->backward_deps & MXP_BWD_OUT_DATA) ? 1 : 0, n_out);
    if (!def->declare_backward) return;
    mxp_backward_deps_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_backward_deps_args);
    a.params = params;
    a.user_data = def->user_data;
    a.n_in = n_in;
    a.n_out = n_out;
    a.need_out_grad = need_out_grad;
    a.need_in = need_in;
    a.need_out = need_out;
    if (def->declare_backward(&a) != MXP_OK) {
        /* Be safe: when the refinement fails, pass everything. */
        memset(need_out_grad, 1, n_out);
        memset(need_in, 1, n_in);
        memset(need_out, 1, n_out);
    }
    mxp__error_clear();
}

/* ------------------------------------------------------------ impls */
static void fill_query(mxp_impl_query_args *a, const mxp_op_impl *impl, const mxp_select_query *q,
                       const mxp_op_params *rec) {
    memset(a, 0, sizeof *a);
    a->hdr = (mxp_header)MXP_HEADER(mxp_impl_query_args);
    a->params = q->params;
    a->op_params = rec;
    a->user_data = impl->user_data;
    a->device = q->device;
    a->n_in = q->n_in;
    a->n_out = q->n_out;
    a->n_aux = q->n_aux;
    a->is_train = q->is_train;
    a->in_shapes = q->in_shapes;
    a->out_shapes = q->out_shapes;
    a->aux_shapes = q->aux_shapes;
    a->in_dtypes = q->in_dtypes;
    a->out_dtypes = q->out_dtypes;
    a->aux_dtypes = q->aux_dtypes;
}

void mxp__opdef_query(mxp_select_query *q, const void *params, mxp_device dev, int is_train, uint32_t n_in,
                      uint32_t n_out, uint32_t n_aux, const mxp_shape *shapes, const int32_t *dtypes) {
    memset(q, 0, sizeof *q);
    q->params = params;
    q->device = dev;
    q->is_train = is_train ? 1 : 0;
    q->n_in = n_in;
    q->n_out = n_out;
    q->n_aux = n_aux;
    q->in_shapes = shapes;
    q->out_shapes = shapes + n_in;
    q->aux_shapes = shapes + n_in + n_out;
    q->in_dtypes = dtypes;
    q->out_dtypes = dtypes + n_in;
    q->aux_dtypes = dtypes + n_in + n_out;
}

int mxp__opdef_supports(const mxp_impl_ref *ref, const mxp_select_query *q, char *reason, size_t cap) {
    reason[0] = '\0';
    if (!ref->impl->supports) return 1;
    mxp_impl_query_args a;
    mxp_op_params rec;
    mxp__op_params_record(ref->def, q->params, &rec);
    fill_query(&a, ref->impl, q, &rec);
    a.reason = reason;
    a.reason_size = (uint32_t)cap;
    mxp__error_clear();
    int rc = ref->impl->supports(&a);
    reason[cap - 1] = '\0';
    if (rc < 0 && !reason[0]) snprintf(reason, cap, "supports() failed: %s", mxp_last_error());
    return rc;
}

static int plugin_fail(int rc, const char *op, const char *impl, const char *what) {
    if (rc > 0) rc = MXP_EPLUGIN;
    if (mxp_last_error()[0]) return mxp__error_prefix(rc, "op '%s' (impl '%s'): %s", op, impl, what);
    return mxp__error(rc, "op '%s' (impl '%s'): %s failed (%s)", op, impl, what, mxp_status_str(rc));
}

mxp__inst *mxp__inst_retain(mxp__inst *in) {
    if (in) atomic_fetch_add(&in->refs, 1);
    return in;
}

void mxp__inst_release(mxp__inst *in) {
    if (!in || atomic_fetch_sub(&in->refs, 1) != 1) return;
    const mxp_op_impl *impl = in->ref->impl;
    if (in->state && impl->destroy) {
        mxp_destroy_args d = {MXP_HEADER(mxp_destroy_args), in->state, impl->user_data};
        impl->destroy(&d);
    }
    if (in->own_params) mxp__op_params_free(in->ref->def, in->params);
    mxp__impl_ref_release(in->ref);
    free(in->shapes);
    free(in->dtypes);
    free(in);
}

int mxp__inst_create(mxp_impl_ref *ref, const mxp_select_query *q, void *params, int own_params, mxp__inst **out) {
    *out = NULL;
    uint32_t tot = q->n_in + q->n_out + q->n_aux;
    mxp__inst *in = calloc(1, sizeof *in);
    if (in) {
        in->shapes = malloc(((size_t)tot + 1) * sizeof *in->shapes);
        in->dtypes = malloc(((size_t)tot + 1) * sizeof *in->dtypes);
    }
    if (!in || !in->shapes || !in->dtypes) {
        if (in) free(in->shapes), free(in->dtypes);
        free(in);
        if (own_params) mxp__op_params_free(ref->def, params);
        mxp__impl_ref_release(ref);
        return mxp__error_oom("op instance");
    }
    atomic_init(&in->refs, 1);
    in->ref = ref;
    in->params = params;
    in->own_params = own_params;
    mxp__op_params_record(ref->def, params, &in->op_params);
    in->dev = q->device;
    in->is_train = q->is_train ? 1 : 0;
    in->generation = ref->generation;
    in->n_in = q->n_in;
    in->n_out = q->n_out;
    in->n_aux = q->n_aux;
    const mxp_shape *const ss[3] = {q->in_shapes, q->out_shapes, q->aux_shapes};
    const int32_t *const ts[3] = {q->in_dtypes, q->out_dtypes, q->aux_dtypes};
    const uint32_t cnt[3] = {q->n_in, q->n_out, q->n_aux};
    for (uint32_t k = 0, b = 0; k < 3; b += cnt[k], k++)
        for (uint32_t i = 0; i < cnt[k]; i++) {
            in->shapes[b + i] = ss[k][i];
            in->dtypes[b + i] = ts[k][i];
        }
    /* The impl sees the instance's own copies and params. */
    mxp_select_query iq;
    mxp__opdef_query(&iq, params, q->device, in->is_train, in->n_in, in->n_out, in->n_aux, in->shapes, in->dtypes);
    iq.device_name = q->device_name;
    const mxp_op_impl *impl = ref->impl;
    const char *op = ref->def->name, *name = ref->entry->name;
    mxp_impl_query_args qa;
    int rc = MXP_OK;
    if (!impl->forward) rc = mxp__error(MXP_EPLUGIN, "op '%s' (impl '%s'): no forward", op, name);
    if (!rc && impl->workspace) {
        fill_query(&qa, impl, &iq, &in->op_params);
        mxp__error_clear();
        int w = impl->workspace(&qa);
        if (w) rc = plugin_fail(w, op, name, "workspace");
        else in->workspace_bytes = qa.workspace_bytes;
    }
    if (!rc && impl->create) {
        fill_query(&qa, impl, &iq, &in->op_params);
        mxp__error_clear();
        int c = impl->create(&qa);
        if (c) rc = plugin_fail(c, op, name, "create");
        else {
            in->state = qa.state;
            in->created = 1;
        }
    }
    if (rc) {
        mxp__inst_release(in);
        return rc;
    }
    *out = in;
    return MXP_OK;
}

int mxp__inst_bind(const mxp__opdef *od, const mxp_select_query *q, const char *const *keys,
                   const char *const *vals, int n_kwargs, mxp__inst **out) {
    *out = NULL;
    mxp_impl_ref *ref = NULL;
    int rc = mxp__select_impl(od->op, q, &ref, NULL);
    if (rc) return rc;
    /* Params for the instance, parsed against the def its ref pins (the
     * caller's def may be dropped on a later refresh while work using this
     * instance is still in flight). */
    void *params = NULL;
    rc = mxp__op_params_new(ref->def, keys, vals, n_kwargs, &params);
    if (rc) {
        mxp__impl_ref_release(ref);
        return rc;
    }
    return mxp__inst_create(ref, q, params, 1, out);
}

const char *mxp__inst_impl_name(const mxp__inst *in) { return in ? in->ref->entry->name : NULL; }
const mxp_op_def *mxp__inst_def(const mxp__inst *in) { return in->ref->def; }
int mxp__inst_is_async(const mxp__inst *in) { return (in->ref->impl->flags & MXP_IMPL_ASYNC) != 0; }
int mxp__inst_has_backward(const mxp__inst *in) { return in->ref->impl->backward != NULL; }

/* ------------------------------------------------------------ running */
static int ctx_parallel_for(const mxp_op_ctx *ctx, int64_t n, int64_t grain, mxp_range_fn fn, void *arg) {
    (void)ctx;
    return mxp__parallel_for(n, grain, fn, arg);
}

int mxp__inst_run(const mxp__inst *in, const mxp__run *r, mxp_op_ctx *c) {
    const mxp_op_impl *impl = in->ref->impl;
    memset(c, 0, sizeof *c);
    c->hdr = (mxp_header)MXP_HEADER(mxp_op_ctx);
    c->device = r->dev;
    c->stream = r->stream;
    c->is_train = r->is_train;
    c->workspace = r->ws;
    c->workspace_bytes = r->ws ? r->ws_bytes : 0;
    c->rng = r->rng;
    c->parallel_for = ctx_parallel_for;
    c->host = mxp__host_table();
    c->host_private = r->host_private;
    c->complete = r->complete;
    c->complete_token = r->complete_token;
    uint32_t n_in = in->n_in, n_out = in->n_out, n_aux = in->n_aux;
    mxp__error_clear();
    int rc;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!r->backward) {
        mxp_forward_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_forward_args);
        a.ctx = c;
        a.params = in->params;
        a.op_params = &in->op_params;
        a.state = in->state;
        a.user_data = impl->user_data;
        a.n_in = n_in;
        a.n_out = n_out;
        a.n_aux = n_aux;
        a.in = r->t;
        a.out = r->t + n_in;
        a.aux = r->t + n_in + n_out;
        a.req = r->req;
        rc = impl->forward(&a);
    } else {
        mxp_backward_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_backward_args);
        a.ctx = c;
        a.params = in->params;
        a.op_params = &in->op_params;
        a.state = in->state;
        a.user_data = impl->user_data;
        a.n_in = n_in;
        a.n_out = n_out;
        a.n_aux = n_aux;
        a.out_grad = r->t;
        a.in = r->t + n_out;
        a.out = r->t + n_out + n_in;
        a.in_grad = r->t + 2 * n_out + n_in;
        a.aux = r->t + 2 * n_out + 2 * n_in;
        a.req = r->req;
        rc = impl->backward(&a);
    }
    /* Per-impl counters (for an async impl: the time to hand the work off). */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    mxp_impl_entry *e = in->ref->entry;
    int k = r->backward ? 1 : 0;
    atomic_fetch_add_explicit(&e->calls[k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->nanos[k],
                              (unsigned long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)),
                              memory_order_relaxed);
    if (mxp__prof_on(MXP__PROF_OPS))
        mxp__prof_op(in->ref->def->name, r->backward, r->label, e->name, r->t, n_in, n_out, n_aux,
                     t0.tv_sec * 1000000000LL + t0.tv_nsec, t1.tv_sec * 1000000000LL + t1.tv_nsec);
    if (rc != MXP_OK) {
        if (rc > 0) rc = MXP_EPLUGIN;
        if (!mxp_last_error()[0])
            mxp__error(rc, "op '%s' (impl '%s'): %s failed (%s)", r->label ? r->label : in->ref->def->name,
                       in->ref->entry->name, r->backward ? "backward" : "forward", mxp_status_str(rc));
    }
    return rc;
}
