/* exec.c — running a bound node: push forward/backward to the engine, or
 * run forward inline on caller tensors (host.invoke).
 *
 * At push time (on the pushing thread, in push order) an `exec` record is
 * filled with everything the run needs and nothing that may die before it:
 * the instance (retained), tensor views built from the NDArrays (chunk
 * pointer + byte offset + shape copy + dtype + device, and the chunk's var to
 * read the version when the op runs), req per output, the temp-space copy
 * (its var is among the mutate vars, so users of one copy serialize) and the
 * reserved RNG range.  The engine's free_arg releases the record and with it
 * the instance, so a reload waits for in-flight work, and a node can be
 * freed right after pushing.
 * Var lists: a var both read and written is only written (the engine needs
 * no duplicates, and a function must not wait on itself). */
#include "op/exec.h"

#include "base/env.h"
#include "engine/engine.h"
#include "ndarray/ndarray.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef mxp__exec exec;

/* Records of up to EXEC_SMALL bytes (the usual op: a few tensors) come
 * from a small per-thread stack of spare blocks instead of malloc: at
 * ~1 KB they are past glibc's per-thread cache, and the arena path cost
 * ~1k instructions a push.  A record is freed where it ran (the pusher's
 * thread for inline runs, a worker's otherwise) and goes onto that
 * thread's stack; a full stack frees it.  Thread exit frees the stack. */
enum { EXEC_SMALL = 2048, EXEC_SPARES = 4 };
typedef struct exec_spares {
    int n;
    void *b[EXEC_SPARES];
} exec_spares;
static _Thread_local exec_spares tl_spares;
static pthread_key_t g_spares_key;
static pthread_once_t g_spares_once = PTHREAD_ONCE_INIT;
static int g_spares_key_ok;

static void spares_destroy(void *p) {
    exec_spares *sp = p;
    while (sp->n) free(sp->b[--sp->n]);
}

static void spares_once(void) { g_spares_key_ok = pthread_key_create(&g_spares_key, spares_destroy) == 0; }

static void *block_get(size_t total) {
    exec_spares *sp = &tl_spares;
    if (total > EXEC_SMALL) return calloc(1, total);
    if (!sp->n) return calloc(1, EXEC_SMALL);
    void *b = sp->b[--sp->n];
    memset(b, 0, total);
    return b;
}

/* As block_get, for a block about to be overwritten whole. */
static void *block_get_raw(size_t total) {
    exec_spares *sp = &tl_spares;
    if (total > EXEC_SMALL) return malloc(total);
    if (!sp->n) return malloc(EXEC_SMALL);
    return sp->b[--sp->n];
}

static void block_put(void *b, int small) {
    exec_spares *sp = &tl_spares;
    if (small && sp->n < EXEC_SPARES) {
        if (sp->n == 0) { /* register the thread's destructor with its first spare */
            pthread_once(&g_spares_once, spares_once);
            if (!g_spares_key_ok || (!pthread_getspecific(g_spares_key) && pthread_setspecific(g_spares_key, sp))) {
                free(b);
                return;
            }
        }
        sp->b[sp->n++] = b;
        return;
    }
    free(b);
}

void mxp__exec_free(exec *x) {
    if (!x) return;
    mxp__inst_release(x->inst);
    free(x->async_msg);
    if (x->ws_host) mxp__host_table()->free_host(x->ws_host);
    block_put(x, x->small);
}

/* One allocation per push: the record and its arrays (tensors, shapes,
 * vars, req) behind it, each part aligned for its type. */
static exec *exec_new(mxp__inst *inst, const char *name, int n_t, int n_req, int cap_vars) {
#define EX_ALIGN(v) (((v) + 15) & ~(size_t)15)
    size_t o_t = EX_ALIGN(sizeof(exec));
    size_t o_shp = o_t + EX_ALIGN(((size_t)n_t + 1) * sizeof(mxp_tensor));
    size_t o_tvar = o_shp + EX_ALIGN(((size_t)n_t + 1) * MXP_MAX_NDIM * sizeof(int64_t));
    size_t o_vars = o_tvar + EX_ALIGN(((size_t)n_t + 1) * sizeof(mxp_var *));
    size_t o_req = o_vars + EX_ALIGN(((size_t)cap_vars + 1) * sizeof(mxp_var *));
    size_t total = o_req + ((size_t)n_req + 1) * sizeof(int32_t);
#undef EX_ALIGN
    char *b = block_get(total);
    if (!b) return NULL;
    exec *x = (exec *)b;
    x->small = total <= EXEC_SMALL;
    x->bytes = total;
    x->t = (mxp_tensor *)(b + o_t);
    x->shp = (int64_t *)(b + o_shp);
    x->tvar = (mxp_var **)(b + o_tvar);
    x->vars = (mxp_var **)(b + o_vars);
    x->req = (int32_t *)(b + o_req);
    x->cap_vars = cap_vars;
    x->n_t = n_t;
    x->inst = mxp__inst_retain(inst);
    size_t len = strlen(name);
    if (len >= sizeof x->name) len = sizeof x->name - 1;
    memcpy(x->name, name, len);
    return x;
}

/* View i: signature shape s and dtype, data from nd (NULL: absent entry). */
static void set_view(exec *x, int i, const mxp_ndarray *nd, const mxp_shape *s, int32_t dtype) {
    mxp_tensor *t = &x->t[i];
    int64_t *shp = x->shp + (size_t)i * MXP_MAX_NDIM;
    t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    for (int k = 0; k < s->ndim; k++) shp[k] = s->dims[k];
    t->shape = shp;
    t->ndim = s->ndim;
    t->dtype = dtype;
    t->strides = NULL;
    t->device = x->dev;
    if (nd && !mxp_ndarray_is_none(nd)) {
        t->data = mxp__ndarray_chunk_ptr(nd);
        t->byte_offset = mxp__ndarray_offset(nd);
        x->tvar[i] = mxp_ndarray_var(nd);
    }
}

static void set_view_tensor(exec *x, int i, const mxp_tensor *src) {
    mxp_tensor *t = &x->t[i];
    int64_t *shp = x->shp + (size_t)i * MXP_MAX_NDIM;
    *t = *src;
    t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
    for (int k = 0; k < src->ndim && k < MXP_MAX_NDIM; k++) shp[k] = src->shape[k];
    t->shape = shp;
}

/* ------------------------------------------------------------ vars */
static int has_var(mxp_var *const *v, int n, const mxp_var *w) {
    for (int i = 0; i < n; i++)
        if (v[i] == w) return 1;
    return 0;
}

/* Build [const | mutate] from candidate lists: writes deduplicated; reads
 * deduplicated and without anything written. */
static void build_vars(exec *x, mxp_var *const *reads, int n_reads, mxp_var *const *writes, int n_writes) {
    mxp_var **w = x->vars + n_reads; /* temp place: after room for reads */
    int nw = 0;
    for (int i = 0; i < n_writes; i++)
        if (writes[i] && !has_var(w, nw, writes[i])) w[nw++] = writes[i];
    int nr = 0;
    mxp_var **r = x->vars;
    mxp_var *small[64];
    mxp_var **tmp = n_reads <= 64 ? small : malloc(((size_t)n_reads + 1) * sizeof *tmp);
    int nt = 0;
    for (int i = 0; i < n_reads; i++)
        if (reads[i] && !has_var(w, nw, reads[i]) && tmp && !has_var(tmp, nt, reads[i])) tmp[nt++] = reads[i];
    for (int i = 0; i < nt; i++) r[nr++] = tmp[i];
    if (tmp != small) free(tmp);
    /* Close the gap between reads and writes. */
    if (nr < n_reads) memmove(x->vars + nr, w, (size_t)nw * sizeof *w);
    x->n_const = nr;
    x->n_mutate = nw;
}

/* ------------------------------------------------------------ running */
/* The last of the two parties (the returning call, the impl's completion)
 * tells the engine; the engine may free x from then on. */
static void async_party_done(exec *x) {
    if (atomic_fetch_sub_explicit(&x->async_parties, 1, memory_order_acq_rel) != 1) return;
    char *msg = x->async_msg;
    int32_t status = x->async_status;
    x->async_msg = NULL;
    mxp_engine_callback cb = x->cb;
    cb.done(cb.token, status, msg);
    free(msg);
}

static void ctx_complete(void *token, int32_t status, const char *message) {
    exec *x = token;
    x->async_status = status;
    x->async_msg = status != MXP_OK || message ? strdup(message ? message : mxp_status_str(status)) : NULL;
    async_party_done(x);
}

/* The run itself (ctx, args, the impl's forward/backward) is opdef.c's:
 * the same path tune times. */
int mxp__exec_call(exec *x, void *stream) {
    for (int i = 0; i < x->n_t; i++)
        if (x->tvar[i]) x->t[i].version = mxp__engine_var_stamp(x->tvar[i]);
    mxp__run r = {.backward = x->backward,
                  .is_train = x->is_train,
                  .dev = x->dev,
                  .stream = stream,
                  .t = x->t,
                  .req = x->req,
                  .ws = x->ws,
                  .ws_bytes = x->ws_bytes,
                  .rng = x->has_rng ? &x->rng : NULL,
                  .complete = x->async ? ctx_complete : NULL,
                  .complete_token = x->async ? x : NULL,
                  .host_private = x,
                  .label = x->name};
    return mxp__inst_run(x->inst, &r, &x->ctx);
}

static int exec_sync(void *arg, const mxp_run_ctx *rctx) { return mxp__exec_call(arg, rctx ? rctx->stream : NULL); }

static void exec_async(void *arg, const mxp_run_ctx *rctx, mxp_engine_callback cb) { mxp__exec_async(arg, rctx, cb); }

void mxp__exec_async(exec *x, const mxp_run_ctx *rctx, mxp_engine_callback cb) {
    x->cb = cb;
    x->async = 1;
    x->async_status = MXP_OK;
    x->async_msg = NULL;
    atomic_store_explicit(&x->async_parties, 2, memory_order_release);
    int rc = mxp__exec_call(x, rctx ? rctx->stream : NULL);
    if (rc != MXP_OK) { /* the impl must not complete a call that failed */
        cb.done(cb.token, rc, mxp_last_error());
        return;
    }
    async_party_done(x);
}

void mxp__exec_free_fn(void *arg) { mxp__exec_free(arg); }

/* Random numbers to reserve for one run of x: ops draw at most 2 values
 * per element of any tensor they touch (f64 normals: 4 per pair), so 4 per
 * element, whole blocks. */
static uint64_t rng_values(const exec *x) {
    uint64_t elems = 0;
    for (int i = 0; i < x->n_t; i++) elems += (uint64_t)mxp_tensor_numel(&x->t[i]);
    return 4 * elems + 16;
}

/* The node's temp space (its workspace_bytes) on x's device. */
static int acquire_temp(exec *x, mxp_temp_space *ts) {
    uint64_t bytes = x->inst->workspace_bytes;
    int rc = mxp__temp_space_acquire(x->dev, (size_t)bytes, ts);
    if (rc) return mxp__error_prefix(rc, "op '%s': temp space of %llu bytes", x->name, (unsigned long long)bytes);
    return MXP_OK;
}

/* Temp space and RNG, at push time. */
static int exec_resources(exec *x, mxp_var **temp_var) {
    mxp__inst *in = x->inst;
    *temp_var = NULL;
    if (in->workspace_bytes) {
        mxp_temp_space ts;
        int rc = acquire_temp(x, &ts);
        if (rc) return rc;
        x->ws = ts.ptr;
        x->ws_bytes = ts.size;
        *temp_var = ts.var;
    }
    if (mxp__inst_def(in)->resources & MXP_RESOURCE_RANDOM) {
        int rc = mxp__rng_reserve(x->dev, rng_values(x), &x->rng.stream);
        if (rc) return mxp__error_prefix(rc, "op '%s': reserving random numbers", x->name);
        x->rng.cursor = 0;
        x->has_rng = 1;
    }
    return MXP_OK;
}

/* A step template's temp space and RNG: pick the temp copy now (its var is
 * in the op's list for good); the pointer and the random range are taken
 * per push (step.c). */
static int step_resources(exec *x, mxp_var **temp_var) {
    mxp__inst *in = x->inst;
    *temp_var = NULL;
    if (in->workspace_bytes) {
        mxp_temp_space ts;
        int rc = acquire_temp(x, &ts);
        if (rc) return rc;
        x->ws_var = ts.var;
        *temp_var = ts.var;
    }
    if (mxp__inst_def(in)->resources & MXP_RESOURCE_RANDOM) x->rng_values = rng_values(x);
    return MXP_OK;
}

void mxp__exec_push_args(exec *x, mxp_engine_sync_fn sync_fn, mxp_engine_async_fn async_fn,
                         mxp_engine_push_args *p) {
    memset(p, 0, sizeof *p);
    if (mxp__inst_is_async(x->inst)) {
        p->async_fn = async_fn;
        p->prop = MXP_FN_ASYNC;
    } else {
        p->sync_fn = sync_fn;
        p->prop = MXP_FN_NORMAL;
    }
    p->arg = x;
    p->free_arg = mxp__exec_free_fn;
    p->const_vars = x->vars;
    p->n_const = x->n_const;
    p->mutate_vars = x->vars + x->n_const;
    p->n_mutate = x->n_mutate;
    p->device = x->dev;
    p->name = x->name;
}

/* Tiny work: at most this many elements over all of a run's tensors
 * (inputs, outputs, aux; MXP_INLINE_MAX_ELEMS, 0 turns it off).  Such a
 * run costs less than handing it to an engine worker and back (a few µs,
 * far more on a loaded machine), so a plain push of it runs on the pushing
 * thread when it is ready at once (engine.h, mxp__engine_push_here).  The
 * bound is on elements, not flops: 1024 keeps a matrix product under
 * ~19x19x19 multiply-adds, about a microsecond. */
enum { INLINE_MAX_DEFAULT = 1024 };
static long g_inline_max;
static pthread_once_t g_inline_once = PTHREAD_ONCE_INIT;
static void read_inline_max(void) {
    g_inline_max = mxp__env_int("MXP_INLINE_MAX_ELEMS", 0, 1L << 40, INLINE_MAX_DEFAULT);
}

int mxp__exec_is_tiny(const exec *x) {
    pthread_once(&g_inline_once, read_inline_max);
    if (g_inline_max <= 0 || x->dev.type != MXP_DEV_CPU) return 0;
    int64_t elems = 0;
    for (int i = 0; i < x->n_t; i++) {
        const mxp_tensor *t = &x->t[i];
        int64_t n = 1;
        for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
        elems += n;
        if (elems > g_inline_max) return 0;
    }
    return 1;
}

static int exec_push(exec *x) {
    mxp_engine_push_args p;
    mxp__exec_push_args(x, exec_sync, exec_async, &p);
    int rc = mxp__exec_is_tiny(x) ? mxp__engine_push_here(&p) : mxp_engine_push(&p);
    if (rc) mxp__exec_free(x);
    return rc;
}

/* ------------------------------------------------------------ checks */
static int dev_eq(mxp_device a, mxp_device b) { return a.type == b.type && a.id == b.id; }

/* The checks run on every push: the entry's description is formatted only
 * when one fails. */
static int check_array(const mxp__node *n, int sig, const mxp_ndarray *nd, mxp_device dev) {
    char what[96], a[128], b[128];
    const char *op = mxp__node_op_name(n);
    if (mxp_ndarray_is_none(nd)) {
        mxp__node_entry_desc(n, sig, what, sizeof what);
        return mxp__error(MXP_EINVAL, "op '%s': %s is a none array", op, what);
    }
    const mxp_shape *s = &mxp__node_shapes(n)[sig];
    int ndim = mxp_ndarray_ndim(nd);
    const int64_t *dims = mxp_ndarray_shape(nd);
    int same = ndim == s->ndim;
    for (int k = 0; same && k < ndim; k++) same = dims[k] == s->dims[k];
    if (!same) {
        mxp_shape g = {.ndim = ndim};
        for (int k = 0; k < g.ndim && k < MXP_MAX_NDIM; k++) g.dims[k] = dims[k];
        mxp__node_entry_desc(n, sig, what, sizeof what);
        mxp__shape_str(&g, a, sizeof a);
        mxp__shape_str(s, b, sizeof b);
        return mxp__error(MXP_ESHAPE, "op '%s': %s has shape %s, expected %s", op, what, a, b);
    }
    int32_t dt = mxp__node_dtypes(n)[sig];
    if (mxp_ndarray_dtype(nd) != dt) {
        mxp__node_entry_desc(n, sig, what, sizeof what);
        return mxp__error(MXP_ETYPE, "op '%s': %s has dtype %s, expected %s", op, what,
                          mxp_dtype_name(mxp_ndarray_dtype(nd)) ? mxp_dtype_name(mxp_ndarray_dtype(nd)) : "?",
                          mxp_dtype_name(dt) ? mxp_dtype_name(dt) : "?");
    }
    mxp_device d = mxp_ndarray_device(nd);
    if (!dev_eq(d, dev)) {
        mxp__node_entry_desc(n, sig, what, sizeof what);
        return mxp__error(MXP_EINVAL, "op '%s': %s is on device %d(%d), the op runs on %d(%d)", op, what, d.type, d.id,
                          dev.type, dev.id);
    }
    return MXP_OK;
}

static int aliases(const mxp_ndarray *a, const mxp_ndarray *b) {
    return a && b && mxp__ndarray_same_chunk(a, b) && mxp__ndarray_dptr(a) == mxp__ndarray_dptr(b);
}

static mxp_device pick_device(mxp_ndarray *const *a, int na, mxp_ndarray *const *b, int nb) {
    for (int i = 0; i < na; i++)
        if (a && a[i] && !mxp_ndarray_is_none(a[i])) return mxp_ndarray_device(a[i]);
    for (int i = 0; i < nb; i++)
        if (b && b[i] && !mxp_ndarray_is_none(b[i])) return mxp_ndarray_device(b[i]);
    return (mxp_device){MXP_DEV_CPU, 0};
}

/* ------------------------------------------------------------ forward */
/* Checks, views, req and var lists of one forward push.  Temp space and
 * RNG: a plain push reserves its own (exec_resources); a step template
 * (`step`) only picks its temp copy, whose var joins the list, and each push
 * of the step takes the pointer and the random range (step_resources). */
int mxp__exec_forward_prepare(mxp__node *n, mxp_ndarray *const *in, mxp_ndarray *const *out, mxp_ndarray *const *aux,
                           const int *req, int is_train, int step, exec **out_x) {
    *out_x = NULL;
    if (!n) return mxp__error(MXP_EMISUSE, "node_forward: NULL node");
    const char *op = mxp__node_op_name(n);
    int n_in = mxp__node_num_inputs(n), n_out = mxp__node_num_outputs(n), n_aux = mxp__node_num_aux(n);
    if ((n_in && !in) || (n_out && !out) || (n_aux && !aux))
        return mxp__error(MXP_EINVAL, "op '%s': forward needs %d inputs, %d outputs and %d aux arrays", op, n_in,
                          n_out, n_aux);
    mxp_device dev = pick_device(in, n_in, out, n_out);
    /* Bind finds the cached instance for the current signature (or
     * re-selects after a registry change) — cheap when nothing changed. */
    int brc = mxp__node_bind(n, dev, is_train ? 1 : 0);
    if (brc) return brc;
    mxp__inst *cur = mxp__node_current(n);
    char what[96];
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) {
            mxp__node_entry_desc(n, i, what, sizeof what);
            return mxp__error(MXP_EINVAL, "op '%s': %s is NULL", op, what);
        }
        int rc = check_array(n, i, in[i], dev);
        if (rc) return rc;
    }
    /* Per-push scratch on the stack when small (the common case). */
    int32_t rq_small[32];
    int32_t *rq = n_out < 32 ? rq_small : malloc(((size_t)n_out + 1) * sizeof *rq);
    if (!rq) return mxp__error_oom("forward");
    for (int i = 0; i < n_out; i++) {
        rq[i] = req ? req[i] : MXP_REQ_WRITE;
        if (rq[i] < MXP_REQ_NULL || rq[i] > MXP_REQ_ADD) {
            int bad = rq[i];
            if (rq != rq_small) free(rq);
            return mxp__error(MXP_EINVAL, "op '%s': req %d of output %d is not a valid mxp_req", op, bad, i);
        }
        if (!out[i]) {
            if (rq[i] != MXP_REQ_NULL) {
                if (rq != rq_small) free(rq);
                mxp__node_entry_desc(n, n_in + i, what, sizeof what);
                return mxp__error(MXP_EINVAL, "op '%s': %s is NULL but its req is not null", op, what);
            }
            continue;
        }
        int rc = check_array(n, n_in + i, out[i], dev);
        if (rc) {
            if (rq != rq_small) free(rq);
            return rc;
        }
        if (rq[i] == MXP_REQ_WRITE)
            for (int j = 0; j < n_in; j++)
                if (aliases(out[i], in[j])) rq[i] = MXP_REQ_INPLACE;
    }
    for (int i = 0; i < n_aux; i++) {
        int rc = aux[i] ? check_array(n, n_in + n_out + i, aux[i], dev)
                        : mxp__error(MXP_EINVAL, "op '%s': aux state %d is NULL", op, i);
        if (rc) {
            if (rq != rq_small) free(rq);
            return rc;
        }
    }
    const mxp_op_def *def = mxp__inst_def(cur);
    int n_t = n_in + n_out + n_aux;
    exec *x = exec_new(cur, mxp__node_label(n), n_t, n_out, 2 * n_t + (int)def->n_mutate_inputs + 2);
    if (!x) {
        if (rq != rq_small) free(rq);
        return mxp__error_oom("forward");
    }
    x->is_train = is_train ? 1 : 0;
    x->dev = dev;
    x->n_in = (uint32_t)n_in;
    x->n_out = (uint32_t)n_out;
    x->n_aux = (uint32_t)n_aux;
    memcpy(x->req, rq, (size_t)n_out * sizeof *rq);
    if (rq != rq_small) free(rq);
    const mxp_shape *sh = cur->shapes;
    const int32_t *dt = cur->dtypes;
    for (int i = 0; i < n_in; i++) set_view(x, i, in[i], &sh[i], dt[i]);
    for (int i = 0; i < n_out; i++) set_view(x, n_in + i, x->req[i] == MXP_REQ_NULL ? NULL : out[i], &sh[n_in + i], dt[n_in + i]);
    for (int i = 0; i < n_aux; i++) set_view(x, n_in + n_out + i, aux[i], &sh[n_in + n_out + i], dt[n_in + n_out + i]);
    mxp_var *temp = NULL;
    int rc = step ? step_resources(x, &temp) : exec_resources(x, &temp);
    if (rc) {
        mxp__exec_free(x);
        return rc;
    }
    mxp_var *rd_small[32], *wr_small[36];
    int big = n_t >= 32 || (size_t)n_t + def->n_mutate_inputs + 2 > 36;
    mxp_var **reads = big ? calloc((size_t)n_t + 1, sizeof *reads) : rd_small,
            **writes = big ? calloc((size_t)n_t + def->n_mutate_inputs + 2, sizeof *writes) : wr_small;
    if (!reads || !writes) {
        if (big) free(reads), free(writes);
        mxp__exec_free(x);
        return mxp__error_oom("forward");
    }
    int nr = 0, nw = 0;
    for (int i = 0; i < n_in; i++) reads[nr++] = mxp_ndarray_var(in[i]);
    for (int i = 0; i < n_out; i++)
        if (x->req[i] != MXP_REQ_NULL) writes[nw++] = mxp_ndarray_var(out[i]);
    for (int i = 0; i < n_aux; i++) writes[nw++] = mxp_ndarray_var(aux[i]);
    for (uint32_t i = 0; i < def->n_mutate_inputs; i++) {
        int32_t k = def->mutate_inputs[i];
        if (k >= 0 && k < n_in) writes[nw++] = mxp_ndarray_var(in[k]);
    }
    if (temp) writes[nw++] = temp;
    build_vars(x, reads, nr, writes, nw);
    if (big) free(reads), free(writes);
    *out_x = x;
    return MXP_OK;
}

int mxp__node_forward(mxp__node *n, mxp_ndarray *const *in, mxp_ndarray *const *out, mxp_ndarray *const *aux,
                      const int *req, int is_train) {
    exec *x;
    int rc = mxp__exec_forward_prepare(n, in, out, aux, req, is_train, 0, &x);
    return rc ? rc : exec_push(x);
}

/* ------------------------------------------------------------ prepared */
int mxp__exec_forward_plain(const exec *x) {
    if (!x || x->backward || x->n_aux || x->ws || x->ws_var || x->has_rng || x->rng_values || x->ws_host ||
        mxp__inst_def(x->inst)->n_mutate_inputs)
        return 0;
    for (uint32_t i = 0; i < x->n_out; i++)
        if (x->req[i] != MXP_REQ_WRITE) return 0;
    return 1;
}

int mxp__exec_forward_from(const exec *tmpl, int tiny, mxp_ndarray *const *in, mxp_ndarray *const *out) {
    char *b = block_get_raw(tmpl->bytes);
    if (!b) return mxp__error_oom("forward");
    /* The template's block, its array pointers moved to this block. */
    memcpy(b, tmpl, tmpl->bytes);
    exec *x = (exec *)b;
    ptrdiff_t d = b - (const char *)tmpl;
    x->t = (mxp_tensor *)((char *)tmpl->t + d);
    x->shp = (int64_t *)((char *)tmpl->shp + d);
    x->tvar = (mxp_var **)((char *)tmpl->tvar + d);
    x->vars = (mxp_var **)((char *)tmpl->vars + d);
    x->req = (int32_t *)((char *)tmpl->req + d);
    x->small = tmpl->bytes <= EXEC_SMALL;
    x->inst = mxp__inst_retain(tmpl->inst);
    int n_in = (int)x->n_in, n_out = (int)x->n_out, nr = 0;
    for (int i = 0; i < n_in + n_out; i++) {
        const mxp_ndarray *nd = i < n_in ? in[i] : out[i - n_in];
        mxp_tensor *t = &x->t[i];
        t->shape = x->shp + (size_t)i * MXP_MAX_NDIM;
        size_t off;
        mxp__ndarray_view(nd, &t->data, &off, &x->tvar[i]);
        t->byte_offset = off;
    }
    /* Reads: the inputs' vars once each (a + a reads one); writes: the
     * fresh outputs' vars, which no input has. */
    for (int i = 0; i < n_in; i++)
        if (!has_var(x->vars, nr, x->tvar[i])) x->vars[nr++] = x->tvar[i];
    for (int i = 0; i < n_out; i++) x->vars[nr + i] = x->tvar[n_in + i];
    x->n_const = nr;
    x->n_mutate = n_out;
    mxp_engine_push_args p;
    mxp__exec_push_args(x, exec_sync, exec_async, &p);
    int rc = tiny ? mxp__engine_push_here_distinct(&p) : mxp_engine_push(&p);
    if (rc) mxp__exec_free(x);
    return rc;
}

/* ------------------------------------------------------------ backward */
/* As forward_prepare, for backward on the instance the last forward used. */
int mxp__exec_backward_prepare(mxp__node *n, mxp_ndarray *const *out_grads, mxp_ndarray *const *in,
                            mxp_ndarray *const *out, mxp_ndarray *const *in_grads, mxp_ndarray *const *aux,
                            const int *req, int step, exec **out_x) {
    *out_x = NULL;
    if (!n) return mxp__error(MXP_EMISUSE, "node_backward: NULL node");
    const char *op = mxp__node_op_name(n);
    mxp__inst *cur = mxp__node_current(n);
    if (!cur) return mxp__error(MXP_EMISUSE, "op '%s': backward before forward", op);
    const mxp_op_def *def = mxp__inst_def(cur);
    if (def->flags & MXP_OP_NO_GRADIENT) return mxp__error(MXP_EUNSUPPORTED, "op '%s' is not differentiable", op);
    if (!mxp__inst_has_backward(cur))
        return mxp__error(MXP_EUNSUPPORTED, "op '%s' (impl '%s') has no backward", op, mxp__inst_impl_name(cur));
    int n_in = mxp__node_num_inputs(n), n_out = mxp__node_num_outputs(n), n_aux = mxp__node_num_aux(n);
    int n_vis = mxp__node_num_visible_outputs(n);
    if (n_aux && !aux) return mxp__error(MXP_EINVAL, "op '%s': backward needs %d aux arrays", op, n_aux);
    uint8_t *need = calloc((size_t)(2 * n_out + n_in) + 1, 1);
    if (!need) return mxp__error_oom("backward");
    uint8_t *need_og = need, *need_in = need + n_out, *need_out = need + n_out + n_in;
    mxp__node_backward_deps(n, need_og, need_in, need_out);
    mxp_device dev = cur->dev;
    int rc = MXP_OK;
    char what[96];
    /* Check what we will read / write. */
    for (int i = 0; i < n_out && !rc; i++) {
        mxp_ndarray *g = out_grads ? out_grads[i] : NULL;
        if (!g) {
            if (need_og[i] && i < n_vis && !(def->flags & MXP_OP_LOSS))
                rc = mxp__error(MXP_EINVAL, "op '%s': backward needs the gradient of output %d '%s'", op, i,
                                mxp__node_output_name(n, i));
            need_og[i] = 0;
            continue;
        }
        if (!need_og[i]) continue;
        rc = check_array(n, n_in + i, g, dev);
        if (rc) mxp__error_prefix(rc, "gradient of output %d", i);
    }
    for (int i = 0; i < n_in && !rc; i++) {
        if (!need_in[i]) continue;
        if (!in || !in[i]) {
            mxp__node_entry_desc(n, i, what, sizeof what);
            rc = mxp__error(MXP_EINVAL, "op '%s': backward needs %s", op, what);
        } else rc = check_array(n, i, in[i], dev);
    }
    for (int i = 0; i < n_out && !rc; i++) {
        if (!need_out[i]) continue;
        if (!out || !out[i]) {
            mxp__node_entry_desc(n, n_in + i, what, sizeof what);
            rc = mxp__error(MXP_EINVAL, "op '%s': backward needs %s", op, what);
        } else rc = check_array(n, n_in + i, out[i], dev);
    }
    for (int i = 0; i < n_aux && !rc; i++)
        rc = aux[i] ? check_array(n, n_in + n_out + i, aux[i], dev)
                    : mxp__error(MXP_EINVAL, "op '%s': aux state %d is NULL", op, i);
    int32_t *rq = calloc((size_t)n_in + 1, sizeof *rq);
    if (!rc && !rq) rc = mxp__error_oom("backward");
    for (int i = 0; i < n_in && !rc; i++) {
        mxp_ndarray *g = in_grads ? in_grads[i] : NULL;
        rq[i] = g ? (req ? req[i] : MXP_REQ_WRITE) : MXP_REQ_NULL;
        if (rq[i] < MXP_REQ_NULL || rq[i] > MXP_REQ_ADD) {
            rc = mxp__error(MXP_EINVAL, "op '%s': req %d of input gradient %d is not a valid mxp_req", op, rq[i], i);
            break;
        }
        if (rq[i] == MXP_REQ_NULL) continue;
        rc = check_array(n, i, g, dev);
        if (rc) {
            mxp__error_prefix(rc, "gradient of input %d", i);
            break;
        }
        if (rq[i] == MXP_REQ_WRITE)
            for (int j = 0; j < n_out; j++)
                if (need_og[j] && aliases(g, out_grads[j])) rq[i] = MXP_REQ_INPLACE;
    }
    if (rc) {
        free(need);
        free(rq);
        return rc;
    }
    int n_t = 2 * n_out + 2 * n_in + n_aux;
    exec *x = exec_new(cur, mxp__node_label(n), n_t, n_in, 2 * n_t + 2);
    if (!x) {
        free(need);
        free(rq);
        return mxp__error_oom("backward");
    }
    x->backward = 1;
    x->is_train = 1;
    x->dev = dev;
    x->n_in = (uint32_t)n_in;
    x->n_out = (uint32_t)n_out;
    x->n_aux = (uint32_t)n_aux;
    memcpy(x->req, rq, (size_t)n_in * sizeof *rq);
    free(rq);
    const mxp_shape *sh = cur->shapes;
    const int32_t *dt = cur->dtypes;
    int b_og = 0, b_in = n_out, b_out = n_out + n_in, b_ig = 2 * n_out + n_in, b_aux = 2 * n_out + 2 * n_in;
    for (int i = 0; i < n_out; i++) set_view(x, b_og + i, need_og[i] ? out_grads[i] : NULL, &sh[n_in + i], dt[n_in + i]);
    for (int i = 0; i < n_in; i++) set_view(x, b_in + i, need_in[i] ? in[i] : NULL, &sh[i], dt[i]);
    for (int i = 0; i < n_out; i++) set_view(x, b_out + i, need_out[i] ? out[i] : NULL, &sh[n_in + i], dt[n_in + i]);
    for (int i = 0; i < n_in; i++) set_view(x, b_ig + i, x->req[i] != MXP_REQ_NULL ? in_grads[i] : NULL, &sh[i], dt[i]);
    for (int i = 0; i < n_aux; i++) set_view(x, b_aux + i, aux[i], &sh[n_in + n_out + i], dt[n_in + n_out + i]);
    mxp_var *temp = NULL;
    rc = step ? step_resources(x, &temp) : exec_resources(x, &temp);
    mxp_var **reads = calloc((size_t)n_t + 1, sizeof *reads), **writes = calloc((size_t)n_in + 2, sizeof *writes);
    if (!rc && (!reads || !writes)) rc = mxp__error_oom("backward");
    if (rc) {
        free(reads);
        free(writes);
        free(need);
        mxp__exec_free(x);
        return rc;
    }
    int nr = 0, nw = 0;
    for (int i = 0; i < n_t; i++)
        if (x->tvar[i] && !(i >= b_ig && i < b_aux)) reads[nr++] = x->tvar[i];
    for (int i = 0; i < n_in; i++)
        if (x->req[i] != MXP_REQ_NULL) writes[nw++] = mxp_ndarray_var(in_grads[i]);
    if (temp) writes[nw++] = temp;
    build_vars(x, reads, nr, writes, nw);
    free(reads);
    free(writes);
    free(need);
    *out_x = x;
    return MXP_OK;
}

int mxp__node_backward(mxp__node *n, mxp_ndarray *const *out_grads, mxp_ndarray *const *in,
                       mxp_ndarray *const *out, mxp_ndarray *const *in_grads, mxp_ndarray *const *aux,
                       const int *req) {
    exec *x;
    int rc = mxp__exec_backward_prepare(n, out_grads, in, out, in_grads, aux, req, 0, &x);
    return rc ? rc : exec_push(x);
}

/* ------------------------------------------------------------ inline */
int mxp__node_run_tensors(mxp__node *n, uint32_t n_in, const mxp_tensor *in, uint32_t n_out, const mxp_tensor *out) {
    if (!n) return mxp__error(MXP_EMISUSE, "node_run_tensors: NULL node");
    const char *op = mxp__node_op_name(n);
    if ((int)n_in != mxp__node_num_inputs(n) || (int)n_out != mxp__node_num_outputs(n) || mxp__node_num_aux(n))
        return mxp__error(MXP_EINVAL, "op '%s': invoked with %u inputs and %u outputs, the op has %d, %d (and %d aux)",
                          op, n_in, n_out, mxp__node_num_inputs(n), mxp__node_num_outputs(n), mxp__node_num_aux(n));
    int tot = (int)(n_in + n_out);
    mxp_shape *s = calloc((size_t)tot + 1, sizeof *s);
    int32_t *t = calloc((size_t)tot + 1, sizeof *t);
    if (!s || !t) {
        free(s);
        free(t);
        return mxp__error_oom("invoke");
    }
    mxp_device dev = n_in ? MXP_ARRAY_AT(mxp_tensor, in, 0)->device
                          : n_out ? MXP_ARRAY_AT(mxp_tensor, out, 0)->device : (mxp_device){MXP_DEV_CPU, 0};
    int rc = MXP_OK;
    for (int i = 0; i < tot && !rc; i++) {
        const mxp_tensor *x = i < (int)n_in ? MXP_ARRAY_AT(mxp_tensor, in, i) : MXP_ARRAY_AT(mxp_tensor, out, i - (int)n_in);
        if (x->ndim < 0 || x->ndim > MXP_MAX_NDIM || (x->ndim && !x->shape) || !x->data)
            rc = mxp__error(MXP_EINVAL, "op '%s': tensor %d is malformed (ndim %d, data %p)", op, i, x->ndim, x->data);
        else if (!mxp_tensor_is_contiguous(x))
            rc = mxp__error(MXP_EUNSUPPORTED, "op '%s': tensor %d is not contiguous", op, i);
        else if (x->device.type != dev.type || x->device.id != dev.id)
            rc = mxp__error(MXP_EINVAL, "op '%s': tensors on different devices", op);
        if (rc) break;
        s[i].ndim = x->ndim;
        for (int k = 0; k < x->ndim; k++) s[i].dims[k] = x->shape[k];
        t[i] = x->dtype;
    }
    if (!rc) rc = mxp__node_infer(n, s, t, s + n_in, t + n_in, NULL, NULL);
    if (!rc) rc = mxp__node_bind(n, dev, 0);
    free(s);
    free(t);
    if (rc) return rc;
    mxp__inst *cur = mxp__node_current(n);
    exec *x = exec_new(cur, op, tot, (int)n_out, 1);
    if (!x) return mxp__error_oom("invoke");
    x->dev = dev;
    x->n_in = n_in;
    x->n_out = n_out;
    for (int i = 0; i < tot; i++)
        set_view_tensor(x, i, i < (int)n_in ? MXP_ARRAY_AT(mxp_tensor, in, i) : MXP_ARRAY_AT(mxp_tensor, out, i - (int)n_in));
    for (uint32_t i = 0; i < n_out; i++) {
        x->req[i] = MXP_REQ_WRITE;
        for (uint32_t j = 0; j < n_in; j++)
            if (mxp_tensor_ptr(&x->t[n_in + i]) == mxp_tensor_ptr(&x->t[j])) x->req[i] = MXP_REQ_INPLACE;
    }
    if (cur->workspace_bytes) {
        /* Not the shared temp space: its users serialize through the engine,
         * and this may run inside an engine worker. */
        x->ws_host = mxp__host_table()->alloc_host(cur->workspace_bytes);
        if (!x->ws_host) {
            mxp__exec_free(x);
            return mxp__error(MXP_ENOMEM, "op '%s': workspace of %llu bytes", op, (unsigned long long)cur->workspace_bytes);
        }
        x->ws = x->ws_host;
        x->ws_bytes = cur->workspace_bytes;
    }
    if (mxp__inst_def(cur)->resources & MXP_RESOURCE_RANDOM) {
        uint64_t elems = 0;
        for (int i = 0; i < tot; i++) elems += (uint64_t)mxp_tensor_numel(&x->t[i]);
        rc = mxp__rng_reserve(dev, 4 * elems + 16, &x->rng.stream);
        if (rc) {
            mxp__exec_free(x);
            return rc;
        }
        x->has_rng = 1;
    }
    if (mxp__inst_is_async(cur)) {
        mxp__exec_free(x);
        return mxp__error(MXP_EUNSUPPORTED, "op '%s': host.invoke cannot run an asynchronous impl", op);
    }
    rc = mxp__exec_call(x, NULL);
    mxp__exec_free(x);
    return rc;
}
