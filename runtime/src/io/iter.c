/* iter.c — the data-iterator front end (mxp_iter_*, mxplug/io.h): creates
 * a registered iterator (pack loaded lazily and pinned while it lives;
 * kwargs parsed by the host against the iterator's schema), allocates the
 * batch buffers the iterator provides, and produces batches either on the
 * caller's thread or on one prefetch thread per iterator.
 *
 * Ring.  n_slots buffers (prefetch_buffer + 1; 1 without prefetch).  Slots
 * head .. head+used-1 (mod n_slots) are in use: when `held`, slot `head`
 * is the consumer's current batch, and the rest are ready, in order.  The
 * producer fills slot (head + used) % n_slots outside the lock (`busy`),
 * then publishes it (used++), or records end of epoch (`eof`) or an error
 * (`err` + message), after which it stops until a reset.  The consumer
 * releases its held slot at the next mxp_iter_next.
 *
 * State machine of the producer thread (all under `mu`):
 *   waiting  -> filling   when !paused && !eof && !err && used < n_slots
 *   filling  -> waiting   publishes unless `gen` changed meanwhile (then the
 *                         batch is dropped: a reset happened)
 *   any      -> exit      when `quit` (mxp_iter_free)
 * Reset (restart_epoch): gen++, paused, wait until !busy, drop the ring,
 * call the pack's reset on the caller's thread (the producer is parked, so
 * the pack is called from one thread at a time), unpause.
 *
 * Filling a slot: wait_to_write on its arrays (work the consumer pushed on
 * the previous batch in that slot finishes first), let the pack write into
 * their memory, then push an empty write op on their vars so the arrays'
 * versions change and later readers are ordered after the fill.
 *
 * The thread starts on the first mxp_iter_next (never from create or a
 * constructor), is joined by mxp_iter_free, and is recorded with the pid
 * that started it: in a fork child it does not exist, so next fails with
 * MXP_EMISUSE until a reset re-initialises the synchronisation, and free
 * skips the join. */
#include "io/io.h"
#include "engine/engine.h"

#include "ndarray/ndarray.h"
#include "plugin/plugin.h"
#include "profiler/profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ENTRIES 16

typedef struct slot {
    mxp_ndarray **arrays;   /* [n_data + n_label]                        */
    uint64_t *index;        /* [batch]                                   */
    int has_index;
    int pad;
} slot;

struct mxp_iter {
    const mxp_iter_def *def;
    mxp_pack *pack;          /* pinned; NULL for host-defined iterators    */
    void *params;            /* parsed kwargs (pack iterators)             */
    void *state;
    char name[64];

    uint32_t n_data, n_label, n;
    char names[MAX_ENTRIES][64];
    mxp_shape shapes[MAX_ENTRIES];
    int32_t dtypes[MAX_ENTRIES];
    int64_t batch;
    uint64_t epoch;

    int n_prefetch;
    int n_slots;
    slot *slots;
    mxp_tensor *tensors;     /* producer's views: [n_slots][n]             */

    pthread_mutex_t mu;
    pthread_cond_t cv_prod, cv_cons;
    pthread_t thread;
    int started;
    pid_t pid;               /* process that started the thread            */
    int head, used, held;
    int eof, err, quit, paused, busy;
    uint64_t gen;
    char errmsg[1024];
};

/* ------------------------------------------------------------ helpers */

static void set_failure(mxp_iter *it, int rc) {
    it->err = rc;
    const char *m = mxp_last_error();
    snprintf(it->errmsg, sizeof it->errmsg, "%s", m && *m ? m : mxp_status_str(rc));
}

static int nop_write(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    return MXP_OK;
}

/* Produce the next batch into slot s.  Any thread, one at a time.
 * *out_has: 1 when a batch was written. */
static int fill(mxp_iter *it, int s, int *out_has) {
    *out_has = 0;
    slot *sl = &it->slots[s];
    mxp_var *vars[MAX_ENTRIES];
    for (uint32_t i = 0; i < it->n; i++) {
        /* An error a consumer op left on the array belongs to that op,
         * which reported it already; the refill starts clean. */
        if (mxp_ndarray_wait_to_write(sl->arrays[i]) != MXP_OK) mxp__error_clear();
        vars[i] = mxp_ndarray_var(sl->arrays[i]);
    }
    const mxp_tensor *t = &it->tensors[(size_t)s * it->n];
    for (int64_t j = 0; j < it->batch; j++) sl->index[j] = UINT64_MAX;
    mxp_iter_next_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_iter_next_args);
    a.user_data = it->def->user_data;
    a.state = it->state;
    a.n_data = it->n_data;
    a.n_label = it->n_label;
    a.data = t;
    a.label = it->n_label ? t + it->n_data : NULL;
    a.index = sl->index;
    a.index_capacity = (uint32_t)it->batch;
    mxp__error_clear();
    int64_t t0 = mxp__prof_on(MXP__PROF_IO) ? mxp__prof_now() : 0;
    int rc = it->def->next(&a);
    if (t0) mxp__prof_span("io", "iter next", it->name, t0, mxp__prof_now());
    if (rc != MXP_OK) {
        const char *m = mxp_last_error();
        if (m && *m) return mxp__error_prefix(rc, "iterator '%s': next", it->name);
        return mxp__error(rc, "iterator '%s': next failed (%s)", it->name, mxp_status_name(rc));
    }
    if (!a.has_batch) return MXP_OK;
    if (a.pad < 0 || a.pad > it->batch)
        return mxp__error(MXP_EPLUGIN, "iterator '%s': next reported pad %d for a batch of %lld", it->name,
                          (int)a.pad, (long long)it->batch);
    sl->pad = a.pad;
    sl->has_index = sl->index[0] != UINT64_MAX;
    mxp_engine_push_args p;
    memset(&p, 0, sizeof p);
    p.sync_fn = nop_write;
    p.mutate_vars = vars;
    p.n_mutate = (int)it->n;
    p.prop = MXP_FN_NORMAL;
    p.name = "iter_fill";
    /* Run here when the vars are free (they are, after the wait_to_write
     * above, unless the consumer pushed again meanwhile): handed to a worker,
     * this no-op made the consumer's first op on the batch wait for a
     * wake-up, which also sent a training step run on the caller
     * (mxp__engine_pusher_runs_ready) to the workers. */
    rc = mxp__engine_push_here(&p);
    if (rc != MXP_OK) return rc;
    *out_has = 1;
    return MXP_OK;
}

static void *prefetch_main(void *arg) {
    mxp_iter *it = arg;
    mxp__prof_thread_name("%.24s prefetch", it->name);
    pthread_mutex_lock(&it->mu);
    for (;;) {
        while (!it->quit && (it->paused || it->eof || it->err || it->used >= it->n_slots))
            pthread_cond_wait(&it->cv_prod, &it->mu);
        if (it->quit) break;
        int s = (it->head + it->used) % it->n_slots;
        uint64_t gen = it->gen;
        it->busy = 1;
        pthread_mutex_unlock(&it->mu);
        int has = 0;
        int rc = fill(it, s, &has);
        pthread_mutex_lock(&it->mu);
        it->busy = 0;
        if (gen == it->gen) {
            if (rc != MXP_OK) set_failure(it, rc);
            else if (has) it->used++;
            else it->eof = 1;
        }
        pthread_cond_broadcast(&it->cv_cons);
    }
    pthread_mutex_unlock(&it->mu);
    return NULL;
}

static void sync_init(mxp_iter *it) {
    pthread_mutex_init(&it->mu, NULL);
    pthread_cond_init(&it->cv_prod, NULL);
    pthread_cond_init(&it->cv_cons, NULL);
}

static int forked(const mxp_iter *it) { return it->started && it->pid != getpid(); }

/* Drop everything produced so far and start epoch it->epoch. */
static int restart_epoch(mxp_iter *it) {
    if (forked(it)) {
        /* The thread is gone; its lock and conditions may be in any state. */
        sync_init(it);
        it->started = 0;
        it->busy = 0;
        it->quit = 0;
    }
    pthread_mutex_lock(&it->mu);
    it->gen++;
    it->paused = 1;
    while (it->busy) pthread_cond_wait(&it->cv_cons, &it->mu);
    it->head = it->used = it->held = 0;
    it->eof = it->err = 0;
    it->errmsg[0] = '\0';
    pthread_mutex_unlock(&it->mu);

    mxp_iter_reset_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_iter_reset_args);
    a.user_data = it->def->user_data;
    a.state = it->state;
    a.epoch = it->epoch;
    mxp__error_clear();
    int rc = it->def->reset ? it->def->reset(&a) : MXP_OK;
    if (rc != MXP_OK) {
        const char *m = mxp_last_error();
        if (m && *m) rc = mxp__error_prefix(rc, "iterator '%s': reset to epoch %llu", it->name,
                                            (unsigned long long)it->epoch);
        else rc = mxp__error(rc, "iterator '%s': reset to epoch %llu failed", it->name,
                             (unsigned long long)it->epoch);
    }
    pthread_mutex_lock(&it->mu);
    if (rc != MXP_OK) set_failure(it, rc);
    it->paused = 0;
    pthread_cond_broadcast(&it->cv_prod);
    pthread_mutex_unlock(&it->mu);
    return rc;
}

/* ------------------------------------------------------------ create */

static int init_layout(mxp_iter *it) {
    mxp_iter_provide_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_iter_provide_args);
    a.user_data = it->def->user_data;
    a.state = it->state;
    a.capacity = MAX_ENTRIES;
    a.names = it->names;
    a.shapes = it->shapes;
    a.dtypes = it->dtypes;
    mxp__error_clear();
    int rc = it->def->provide(&a);
    if (rc != MXP_OK) return mxp__error_prefix(rc, "iterator '%s': provide", it->name);
    if (a.n_data < 1 || a.n_data + a.n_label > MAX_ENTRIES)
        return mxp__error(MXP_EPLUGIN, "iterator '%s': provide reported %u data and %u label entries "
                          "(need 1..%d in all, at least one data)", it->name, a.n_data, a.n_label, MAX_ENTRIES);
    it->n_data = a.n_data;
    it->n_label = a.n_label;
    it->n = a.n_data + a.n_label;
    for (uint32_t i = 0; i < it->n; i++) {
        it->names[i][63] = '\0';
        if (it->shapes[i].ndim < 1 || it->shapes[i].ndim > MXP_MAX_NDIM ||
            it->shapes[i].dims[0] != it->shapes[0].dims[0] || it->shapes[i].dims[0] < 1 ||
            !mxp_dtype_name(it->dtypes[i]))
            return mxp__error(MXP_EPLUGIN, "iterator '%s': entry '%s' has a bad shape or dtype (every entry "
                              "needs the batch axis first, the same batch size, and a known dtype)",
                              it->name, it->names[i]);
    }
    it->batch = it->shapes[0].dims[0];
    if (it->batch > UINT32_MAX) return mxp__error(MXP_EINVAL, "iterator '%s': batch too large", it->name);
    return MXP_OK;
}

static int alloc_slots(mxp_iter *it) {
    it->n_slots = it->n_prefetch > 0 ? it->n_prefetch + 1 : 1;
    it->slots = calloc((size_t)it->n_slots, sizeof *it->slots);
    it->tensors = calloc((size_t)it->n_slots * it->n, sizeof *it->tensors);
    if (!it->slots || !it->tensors) return mxp__error_oom("iterator slots");
    mxp_device cpu = {MXP_DEV_CPU, 0};
    for (int s = 0; s < it->n_slots; s++) {
        slot *sl = &it->slots[s];
        sl->arrays = calloc(it->n, sizeof *sl->arrays);
        sl->index = calloc((size_t)it->batch, sizeof *sl->index);
        if (!sl->arrays || !sl->index) return mxp__error_oom("iterator slots");
        for (uint32_t i = 0; i < it->n; i++) {
            int rc = mxp_ndarray_create(it->shapes[i].dims, it->shapes[i].ndim, it->dtypes[i], cpu, &sl->arrays[i]);
            if (rc != MXP_OK) return mxp__error_prefix(rc, "iterator '%s': batch buffer '%s'", it->name, it->names[i]);
            /* Fresh memory: defined contents even if a pack leaves some unwritten. */
            memset(mxp__ndarray_dptr(sl->arrays[i]), 0, mxp_ndarray_nbytes(sl->arrays[i]));
            mxp_tensor *t = &it->tensors[(size_t)s * it->n + i];
            t->hdr = (mxp_header)MXP_HEADER(mxp_tensor);
            t->data = mxp__ndarray_chunk_ptr(sl->arrays[i]);
            t->byte_offset = mxp__ndarray_offset(sl->arrays[i]);
            t->dtype = it->dtypes[i];
            t->ndim = it->shapes[i].ndim;
            t->shape = mxp_ndarray_shape(sl->arrays[i]);
            t->strides = NULL;
            t->device = cpu;
        }
    }
    return MXP_OK;
}

int mxp__iter_create_def(const mxp_iter_def *def, void *state, int n_prefetch, mxp_iter **out) {
    *out = NULL;
    mxp_iter *it = calloc(1, sizeof *it);
    if (!it) {
        if (def->destroy) {
            mxp_iter_destroy_args d = {MXP_HEADER(mxp_iter_destroy_args), def->user_data, state};
            def->destroy(&d);
        }
        return mxp__error_oom("iterator");
    }
    it->def = def;
    it->state = state;
    it->n_prefetch = n_prefetch < 0 ? 0 : n_prefetch;
    snprintf(it->name, sizeof it->name, "%s", def->name ? def->name : "?");
    sync_init(it);
    int rc = init_layout(it);
    if (rc == MXP_OK) rc = alloc_slots(it);
    if (rc == MXP_OK) rc = restart_epoch(it);
    if (rc != MXP_OK) {
        mxp_iter_free(it);
        return rc;
    }
    *out = it;
    return MXP_OK;
}

/* Whether the iterator's schema declares parameter `key` (then the host
 * passes it on instead of handling it itself). */
static int schema_has(const mxp_iter_def *def, const char *key) {
    for (uint32_t i = 0; def->params && i < def->n_params; i++)
        if (def->params[i].name && !strcmp(def->params[i].name, key)) return 1;
    return 0;
}

static int is_host_key(const char *k) {
    return !strcmp(k, "prefetch_buffer") || !strcmp(k, "ctx") || !strcmp(k, "dtype");
}

int mxp_iter_create(const char *name, int n_kwargs, const char *const *keys, const char *const *vals,
                    mxp_iter **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_iter_create: out is NULL");
    *out = NULL;
    if (!name) return mxp__error(MXP_EINVAL, "mxp_iter_create: name is NULL");
    if (n_kwargs < 0 || (n_kwargs > 0 && (!keys || !vals)))
        return mxp__error(MXP_EINVAL, "iterator '%s': bad kwargs (n=%d)", name, n_kwargs);
    int prefetch = MXP_ITER_PREFETCH_DEFAULT;
    const char **pk = calloc((size_t)n_kwargs + 1, sizeof *pk);
    const char **pv = calloc((size_t)n_kwargs + 1, sizeof *pv);
    if (!pk || !pv) {
        free(pk);
        free(pv);
        return mxp__error_oom("iterator kwargs");
    }
    uint32_t n_pack = 0;
    const char *dtype_val = NULL;
    int rc = MXP_OK;
    for (int i = 0; i < n_kwargs && rc == MXP_OK; i++) {
        if (!keys[i] || !vals[i]) {
            rc = mxp__error(MXP_EINVAL, "iterator '%s': kwarg %d is NULL", name, i);
        } else if (!strcmp(keys[i], "prefetch_buffer")) {
            char *end;
            long v = strtol(vals[i], &end, 10);
            if (end == vals[i] || *end || v < 0 || v > 64)
                rc = mxp__error(MXP_EINVAL, "iterator '%s': parameter 'prefetch_buffer': '%s' is not an "
                                "integer in [0, 64]", name, vals[i]);
            prefetch = (int)v;
        } else if (!strcmp(keys[i], "ctx")) {
            if (strncmp(vals[i], "cpu", 3) && strncmp(vals[i], "gpu", 3))
                rc = mxp__error(MXP_EINVAL, "iterator '%s': parameter 'ctx': '%s' is not cpu or gpu", name, vals[i]);
            /* Only a hint in MXNet too: batches are produced in host memory. */
        } else if (!strcmp(keys[i], "dtype")) {
            dtype_val = vals[i]; /* the iterator's own if its schema has it, else the host's (below) */
        } else if (is_host_key(keys[i])) {
            /* unreachable: every host key is handled above */
        } else {
            pk[n_pack] = keys[i];
            pv[n_pack] = vals[i];
            n_pack++;
        }
    }
    const mxp_iter_def *def = NULL;
    mxp_pack *pack = NULL;
    if (rc == MXP_OK) {
        const void *d = NULL;
        rc = mxp__registry_feature(MXP_FEATURE_ITER, name, &d, &pack);
        def = d;
    }
    int pinned = 0;
    if (rc == MXP_OK && pack) {
        rc = mxp__pack_pin(pack);
        pinned = rc == MXP_OK;
        if (rc == MXP_OK) {
            /* The pack may have been reloaded between lookup and pin. */
            const void *d = NULL;
            mxp_pack *p2 = NULL;
            rc = mxp__registry_feature(MXP_FEATURE_ITER, name, &d, &p2);
            if (rc == MXP_OK && (p2 != pack || d != def))
                rc = mxp__error(MXP_EBUSY, "iterator '%s': its pack was reloaded while creating it", name);
        }
    }
    if (rc == MXP_OK && (!def->create || !def->provide || !def->next))
        rc = mxp__error(MXP_EPLUGIN, "iterator '%s': its definition lacks create, provide or next", name);
    if (rc == MXP_OK && dtype_val) {
        if (schema_has(def, "dtype")) { /* e.g. ImageRecordIter's float32 | uint8 output */
            pk[n_pack] = "dtype";
            pv[n_pack] = dtype_val;
            n_pack++;
        } else if (strcmp(dtype_val, "float32") && strcmp(dtype_val, "None")) {
            rc = mxp__error(MXP_EUNSUPPORTED, "iterator '%s': parameter 'dtype': '%s' is not supported "
                            "(this iterator produces float32 only)", name, dtype_val);
        }
    }
    void *params = NULL;
    char what[96];
    snprintf(what, sizeof what, "iterator '%s'", name);
    if (rc == MXP_OK) {
        params = calloc(1, def->params_size ? def->params_size : 1);
        if (!params) rc = mxp__error_oom("iterator params");
    }
    if (rc == MXP_OK && def->n_params)
        rc = mxp__params_parse(def->params, def->n_params, pk, pv, n_pack, params, what);
    else if (rc == MXP_OK && n_pack)
        rc = mxp__error(MXP_EINVAL, "%s: unknown parameter '%s' (it takes none)", what, pk[0]);
    int parsed = rc == MXP_OK;
    free(pk);
    free(pv);
    mxp_iter_create_args ca;
    memset(&ca, 0, sizeof ca);
    if (rc == MXP_OK) {
        ca.hdr = (mxp_header)MXP_HEADER(mxp_iter_create_args);
        ca.params = params;
        ca.user_data = def->user_data;
        mxp__error_clear();
        rc = def->create(&ca);
        if (rc != MXP_OK) {
            const char *m = mxp_last_error();
            rc = m && *m ? mxp__error_prefix(rc, "%s: create", what)
                         : mxp__error(rc, "%s: create failed (%s)", what, mxp_status_name(rc));
        }
    }
    if (rc != MXP_OK) {
        if (parsed && def->n_params) mxp__params_free(def->params, def->n_params, params);
        free(params);
        if (pinned) mxp__pack_unpin(pack);
        return rc;
    }
    mxp_iter *it = NULL;
    rc = mxp__iter_create_def(def, ca.state, prefetch, &it);
    if (rc != MXP_OK) {
        /* mxp__iter_create_def destroyed the state. */
        if (def->n_params) mxp__params_free(def->params, def->n_params, params);
        free(params);
        if (pinned) mxp__pack_unpin(pack);
        return rc;
    }
    it->params = params;
    it->pack = pinned ? pack : NULL;
    *out = it;
    return MXP_OK;
}

void mxp_iter_free(mxp_iter *it) {
    if (!it) return;
    if (it->started && !forked(it)) {
        pthread_mutex_lock(&it->mu);
        it->quit = 1;
        pthread_cond_broadcast(&it->cv_prod);
        pthread_mutex_unlock(&it->mu);
        pthread_join(it->thread, NULL);
    }
    if (!forked(it)) {
        pthread_mutex_destroy(&it->mu);
        pthread_cond_destroy(&it->cv_prod);
        pthread_cond_destroy(&it->cv_cons);
    }
    if (it->slots) {
        for (int s = 0; s < it->n_slots; s++) {
            if (it->slots[s].arrays)
                for (uint32_t i = 0; i < it->n; i++) mxp_ndarray_release(it->slots[s].arrays[i]);
            free(it->slots[s].arrays);
            free(it->slots[s].index);
        }
    }
    free(it->slots);
    free(it->tensors);
    if (it->def->destroy) {
        mxp_iter_destroy_args d;
        memset(&d, 0, sizeof d);
        d.hdr = (mxp_header)MXP_HEADER(mxp_iter_destroy_args);
        d.user_data = it->def->user_data;
        d.state = it->state;
        it->def->destroy(&d);
    }
    if (it->params) {
        if (it->def->n_params) mxp__params_free(it->def->params, it->def->n_params, it->params);
        free(it->params);
    }
    if (it->pack) mxp__pack_unpin(it->pack);
    free(it);
}

/* ------------------------------------------------------------ layout */

int mxp_iter_num_data(const mxp_iter *it) { return it ? (int)it->n_data : 0; }
int mxp_iter_num_label(const mxp_iter *it) { return it ? (int)it->n_label : 0; }
int64_t mxp_iter_batch_size(const mxp_iter *it) { return it ? it->batch : 0; }
uint64_t mxp_iter_epoch(const mxp_iter *it) { return it ? it->epoch : 0; }

static int provide(const mxp_iter *it, uint32_t e, const char **out_name, int *out_ndim,
                   const int64_t **out_shape, int *out_dtype) {
    if (out_name) *out_name = it->names[e];
    if (out_ndim) *out_ndim = it->shapes[e].ndim;
    if (out_shape) *out_shape = it->shapes[e].dims;
    if (out_dtype) *out_dtype = it->dtypes[e];
    return MXP_OK;
}

int mxp_iter_provide_data(const mxp_iter *it, int i, const char **out_name, int *out_ndim,
                          const int64_t **out_shape, int *out_dtype) {
    if (out_name) *out_name = NULL;
    if (out_shape) *out_shape = NULL;
    if (!it || i < 0 || (uint32_t)i >= it->n_data)
        return mxp__error(MXP_EINVAL, "mxp_iter_provide_data: index %d out of range", i);
    return provide(it, (uint32_t)i, out_name, out_ndim, out_shape, out_dtype);
}

int mxp_iter_provide_label(const mxp_iter *it, int i, const char **out_name, int *out_ndim,
                           const int64_t **out_shape, int *out_dtype) {
    if (out_name) *out_name = NULL;
    if (out_shape) *out_shape = NULL;
    if (!it || i < 0 || (uint32_t)i >= it->n_label)
        return mxp__error(MXP_EINVAL, "mxp_iter_provide_label: index %d out of range", i);
    return provide(it, it->n_data + (uint32_t)i, out_name, out_ndim, out_shape, out_dtype);
}

/* ------------------------------------------------------------ epochs */

int mxp_iter_reset(mxp_iter *it) {
    if (!it) return mxp__error(MXP_EMISUSE, "mxp_iter_reset: iterator is NULL");
    it->epoch++;
    return restart_epoch(it);
}

int mxp_iter_set_epoch(mxp_iter *it, uint64_t epoch) {
    if (!it) return mxp__error(MXP_EMISUSE, "mxp_iter_set_epoch: iterator is NULL");
    it->epoch = epoch;
    return restart_epoch(it);
}

/* ------------------------------------------------------------ batches */

int mxp_iter_next(mxp_iter *it, int *out_has_batch) {
    if (out_has_batch) *out_has_batch = 0;
    if (!it || !out_has_batch) return mxp__error(MXP_EMISUSE, "mxp_iter_next: NULL argument");
    if (forked(it))
        return mxp__error(MXP_EMISUSE, "iterator '%s': its prefetch thread was started in process %d, not in "
                          "this one (fork); call mxp_iter_reset or mxp_iter_set_epoch first", it->name, (int)it->pid);
    if (it->n_prefetch == 0) {
        it->held = 0;
        if (it->err) return mxp__error(it->err, "%s", it->errmsg);
        if (it->eof) return MXP_OK;
        int has = 0;
        int rc = fill(it, 0, &has);
        if (rc != MXP_OK) {
            set_failure(it, rc);
            return rc;
        }
        if (!has) {
            it->eof = 1;
            return MXP_OK;
        }
        it->held = 1;
        *out_has_batch = 1;
        return MXP_OK;
    }
    pthread_mutex_lock(&it->mu);
    if (!it->started) {
        int e = pthread_create(&it->thread, NULL, prefetch_main, it);
        if (e) {
            pthread_mutex_unlock(&it->mu);
            return mxp__error(MXP_ENOMEM, "iterator '%s': cannot start the prefetch thread (errno %d)", it->name, e);
        }
        it->started = 1;
        it->pid = getpid();
    }
    if (it->held) {
        it->head = (it->head + 1) % it->n_slots;
        it->used--;
        it->held = 0;
        pthread_cond_broadcast(&it->cv_prod);
    }
    int64_t t_wait = it->used == 0 && mxp__prof_on(MXP__PROF_IO) ? mxp__prof_now() : 0;
    while (it->used == 0 && !it->eof && !it->err) pthread_cond_wait(&it->cv_cons, &it->mu);
    if (t_wait) mxp__prof_span("io", "iter wait", it->name, t_wait, mxp__prof_now());
    int rc = MXP_OK;
    if (it->used > 0) {
        it->held = 1;
        *out_has_batch = 1;
    } else if (it->err) {
        rc = mxp__error(it->err, "%s", it->errmsg);
    }
    pthread_mutex_unlock(&it->mu);
    return rc;
}

static const slot *current(const mxp_iter *it) {
    if (!it || !it->held) return NULL;
    return &it->slots[it->n_prefetch == 0 ? 0 : it->head];
}

mxp_ndarray *mxp_iter_data(const mxp_iter *it, int i) {
    const slot *s = current(it);
    if (!s || i < 0 || (uint32_t)i >= it->n_data) return NULL;
    return s->arrays[i];
}

mxp_ndarray *mxp_iter_label(const mxp_iter *it, int i) {
    const slot *s = current(it);
    if (!s || i < 0 || (uint32_t)i >= it->n_label) return NULL;
    return s->arrays[it->n_data + (uint32_t)i];
}

int mxp_iter_pad(const mxp_iter *it) {
    const slot *s = current(it);
    return s ? s->pad : 0;
}

const uint64_t *mxp_iter_index(const mxp_iter *it, int64_t *out_n) {
    if (out_n) *out_n = 0;
    const slot *s = current(it);
    if (!s || !s->has_index) return NULL;
    if (out_n) *out_n = it->batch;
    return s->index;
}
