/* pack.c — the kvstore-dist pack: its descriptor and the mxp_kvstore_def
 * callbacks of its transports:
 *   dist_sync (also registered as dist_sync_device, the same until a
 *   device pack reduces on device): create starts the communication thread
 *   (comm.c), which initialises MPI; init registers a key and broadcasts
 *   rank 0's value; pushpull queues a sum over all workers and returns;
 *   barrier and destroy are collective.
 *   dist_async: parameter servers (ps.h, ps_worker.c, ps_server.c): the
 *   last MXP_KV_NUM_SERVERS ranks (default 1) serve, the others push and
 *   pull without waiting for each other; set_updater names the update op
 *   the servers run; run_server blocks a server rank until every worker
 *   freed its store.
 *
 * Not here: MPI itself (comm.c, allreduce.c, ps_*.c).
 * One store per process, created once: MPI cannot be initialised again
 * after MPI_Finalize.  Key lookup is a linear scan of the init-ordered key
 * table (a few hundred keys at most in the nets this targets).  Options:
 * bucket_bytes (fusion bucket size, default 4 MiB, or MXP_KV_BUCKET_BYTES;
 * 0 disables fusion); MXP_KV_SEGMENT_BYTES (the pipelined sum's segment,
 * default 1 MiB, pipeline.c).  Environment of dist_async: MXP_KV_NUM_SERVERS,
 * MXP_KV_BIGARRAY_BOUND (elements; default 1000000, MXNet's bound). */
#include "kvdist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mxp_host *kvd_host;

static kvd_store g_store;
static int g_used;           /* a store was created in this process        */
static int g_live;

enum { DEFAULT_TIMEOUT_MS = 60000 };
#define DEFAULT_BUCKET_BYTES (4ll << 20)
#define DEFAULT_SEGMENT_BYTES (1ll << 20)

static int parse_bytes(const char *v, int64_t *out) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v || x < 0) return -1;
    if (*end == 'K' || *end == 'k') x <<= 10, end++;
    else if (*end == 'M' || *end == 'm') x <<= 20, end++;
    else if (*end == 'G' || *end == 'g') x <<= 30, end++;
    if (*end) return -1;
    *out = x;
    return 0;
}

static int kvd_create(mxp_kv_create_args *a) {
    if (g_live) return kvd_host->set_error(MXP_EBUSY, "kvstore %s: a dist store already exists in this process", a->type);
    if (g_used)
        return kvd_host->set_error(MXP_EMISUSE, "kvstore %s: MPI was finalised when the previous dist store was "
                                   "freed; a process can create one dist store", a->type);
    int64_t bucket = DEFAULT_BUCKET_BYTES;
    const char *env = getenv("MXP_KV_BUCKET_BYTES");
    if (env && *env && parse_bytes(env, &bucket))
        return kvd_host->set_error(MXP_EINVAL, "MXP_KV_BUCKET_BYTES='%s': expected bytes (e.g. 4M)", env);
    for (uint32_t i = 0; i < a->n_options; i++) {
        if (!strcmp(a->keys[i], "bucket_bytes")) {
            if (parse_bytes(a->vals[i], &bucket))
                return kvd_host->set_error(MXP_EINVAL, "kvstore %s: option bucket_bytes='%s': expected bytes (e.g. "
                                           "4M)", a->type, a->vals[i]);
        } else {
            return kvd_host->set_error(MXP_EINVAL, "kvstore %s: unknown option '%s' (known: bucket_bytes)", a->type,
                                       a->keys[i]);
        }
    }
    int64_t segment = DEFAULT_SEGMENT_BYTES;
    const char *sg = getenv("MXP_KV_SEGMENT_BYTES");
    if (sg && *sg && (parse_bytes(sg, &segment) || segment < 64 || segment > (1ll << 30)))
        return kvd_host->set_error(MXP_EINVAL, "MXP_KV_SEGMENT_BYTES='%s': expected bytes between 64 and 1G (e.g. "
                                   "1M)", sg);
    int async = !strcmp(a->type, "dist_async");
    int64_t servers = 1, bound = 1000000;
    const char *ns = getenv("MXP_KV_NUM_SERVERS"), *bb = getenv("MXP_KV_BIGARRAY_BOUND");
    if (async && ns && *ns && (parse_bytes(ns, &servers) || servers < 1 || servers > 4096))
        return kvd_host->set_error(MXP_EINVAL, "MXP_KV_NUM_SERVERS='%s': expected a number of server ranks >= 1", ns);
    if (async && bb && *bb && (parse_bytes(bb, &bound) || bound < 1))
        return kvd_host->set_error(MXP_EINVAL, "MXP_KV_BIGARRAY_BOUND='%s': expected a number of elements >= 1", bb);
    kvd_store *s = &g_store;
    memset(s, 0, sizeof *s);
    s->async = async;
    s->n_servers = async ? (int)servers : 0;
    s->big_bound = bound;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->timeout_ms = a->timeout_ms > 0 ? a->timeout_ms : DEFAULT_TIMEOUT_MS;
    s->bucket_bytes = bucket;
    s->segment_bytes = segment;
    g_used = 1;
    int rc = kvd_comm_start(s);
    if (rc) return rc;
    g_live = 1;
    a->store = s;
    return MXP_OK;
}

static void kvd_destroy(mxp_kv_simple_args *a) {
    kvd_store *s = a->store;
    if (!s || !g_live) return;
    kvd_comm_stop(s);
    for (int i = 0; i < s->cap_keys; i++) free(s->keys[i].skey);
    free(s->keys);
    for (int r = 0; s->hosts && r < s->size; r++) free(s->hosts[r]);
    free(s->hosts);
    free(s->pids);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    g_live = 0;
}

static int refuse_on_server(const kvd_store *s, const char *what) {
    if (!s->async || !s->role) return MXP_OK;
    return kvd_host->set_error(MXP_EMISUSE, "kvstore dist_async: %s on rank %d, a server (the last %d of %d ranks "
                               "serve, MXP_KV_NUM_SERVERS): a server process only runs mxp_kvstore_run_server",
                               what, s->rank, s->n_servers, s->size);
}

static int find_key(kvd_store *s, const mxp_kv_args *a, uint32_t i) {
    for (int k = 0; k < s->n_keys; k++) {
        const kvd_key *e = &s->keys[k];
        if (a->str_keys ? e->is_str && !strcmp(e->skey, a->str_keys[i]) : !e->is_str && e->ikey == a->int_keys[i])
            return k;
    }
    return -1;
}

static void key_text(const mxp_kv_args *a, uint32_t i, char *buf, size_t cap) {
    if (a->str_keys) snprintf(buf, cap, "'%s'", a->str_keys[i]);
    else snprintf(buf, cap, "%lld", (long long)a->int_keys[i]);
}

static int check_tensor(const mxp_tensor *t, const char *key) {
    if (!t || !t->data || !mxp_tensor_is_contiguous(t))
        return kvd_host->set_error(MXP_EINVAL, "kvstore dist: key %s: a non-contiguous or empty array", key);
    if (t->dtype != MXP_DTYPE_F32 && t->dtype != MXP_DTYPE_F64 && t->dtype != MXP_DTYPE_I32 &&
        t->dtype != MXP_DTYPE_I64)
        return kvd_host->set_error(MXP_ETYPE, "kvstore dist: key %s: dtype %d is not supported", key, t->dtype);
    return MXP_OK;
}

static int kvd_init(mxp_kv_args *a) {
    kvd_store *s = a->store;
    int rc0 = refuse_on_server(s, "init");
    if (rc0) return rc0;
    for (uint32_t i = 0; i < a->n; i++) {
        char kt[96];
        key_text(a, i, kt, sizeof kt);
        const mxp_tensor *v = &a->values[i];
        int rc = check_tensor(v, kt);
        if (rc) return rc;
        if (!a->outs || mxp_tensor_ptr(&a->outs[i]) != mxp_tensor_ptr(v))
            return kvd_host->set_error(MXP_EINVAL, "kvstore dist: init of key %s: outs must be the values "
                                       "(the broadcast is in place)", kt);
        pthread_mutex_lock(&s->lock);
        int dup = find_key(s, a, i) >= 0;
        int idx = s->n_keys, grow_ok = 1;
        if (!dup && idx >= s->cap_keys) {
            int cap = s->cap_keys ? 2 * s->cap_keys : 64;
            kvd_key *k = realloc(s->keys, (size_t)cap * sizeof *k);
            if (k) {
                memset(k + s->cap_keys, 0, (size_t)(cap - s->cap_keys) * sizeof *k);
                s->keys = k;
                s->cap_keys = cap;
            } else {
                grow_ok = 0;
            }
        }
        if (!dup && grow_ok) {
            kvd_key *e = &s->keys[idx];
            free(e->skey);
            memset(e, 0, sizeof *e);
            e->is_str = a->str_keys != NULL;
            if (e->is_str) grow_ok = (e->skey = strdup(a->str_keys[i])) != NULL;
            else e->ikey = a->int_keys[i];
        }
        pthread_mutex_unlock(&s->lock);
        if (dup) return kvd_host->set_error(MXP_EEXIST, "kvstore dist: key %s is already initialised", kt);
        if (!grow_ok) return kvd_host->set_error(MXP_ENOMEM, "kvstore dist: out of memory");
        kvd_req r;
        memset(&r, 0, sizeof r);
        r.kind = KVD_INIT;
        r.key = idx;
        r.data = mxp_tensor_ptr(v);
        r.count = mxp_tensor_numel(v);
        r.dtype = v->dtype;
        if ((rc = kvd_run_sync(s, &r))) return rc;
    }
    return MXP_OK;
}

static int kvd_pushpull(mxp_kv_args *a) {
    kvd_store *s = a->store;
    if (a->n != 1 || !a->complete)
        return kvd_host->set_error(MXP_EINVAL, "kvstore dist_sync: pushpull takes one key and a completion");
    char kt[96];
    key_text(a, 0, kt, sizeof kt);
    const mxp_tensor *v = &a->values[0];
    int rc = check_tensor(v, kt);
    if (rc) return rc;
    if (!a->outs || mxp_tensor_ptr(&a->outs[0]) != mxp_tensor_ptr(v))
        return kvd_host->set_error(MXP_EINVAL, "kvstore dist_sync: key %s: outs must be the values (the sum is "
                                   "in place)", kt);
    pthread_mutex_lock(&s->lock);
    int k = find_key(s, a, 0);
    int64_t count = k >= 0 ? s->keys[k].count : 0;
    int32_t dtype = k >= 0 ? s->keys[k].dtype : -1;
    pthread_mutex_unlock(&s->lock);
    if (k < 0) return kvd_host->set_error(MXP_ENOENT, "kvstore dist_sync: key %s was not initialised", kt);
    if (count != mxp_tensor_numel(v) || dtype != v->dtype)
        return kvd_host->set_error(MXP_ESHAPE, "kvstore dist_sync: key %s: %lld elements of dtype %d pushed, "
                                   "initialised with %lld of dtype %d", kt, (long long)mxp_tensor_numel(v), v->dtype,
                                   (long long)count, dtype);
    kvd_req *r = calloc(1, sizeof *r);
    if (!r) return kvd_host->set_error(MXP_ENOMEM, "kvstore dist_sync: out of memory");
    r->kind = KVD_PUSHPULL;
    r->key = k;
    r->data = mxp_tensor_ptr(v);
    r->count = count;
    r->dtype = dtype;
    r->complete = a->complete;
    r->token = a->complete_token;
    kvd_enqueue(s, r);
    return MXP_OK;
}

/* dist_async push (values) or pull (outs) of one key. */
static int kvd_async_op(mxp_kv_args *a, int kind) {
    kvd_store *s = a->store;
    const char *what = kind == KVD_PUSH ? "push" : "pull";
    int rc = refuse_on_server(s, what);
    if (rc) return rc;
    if (a->n != 1 || !a->complete)
        return kvd_host->set_error(MXP_EINVAL, "kvstore dist_async: %s takes one key and a completion", what);
    char kt[96];
    key_text(a, 0, kt, sizeof kt);
    const mxp_tensor *v = kind == KVD_PUSH ? (a->values ? &a->values[0] : NULL) : (a->outs ? &a->outs[0] : NULL);
    if ((rc = check_tensor(v, kt))) return rc;
    pthread_mutex_lock(&s->lock);
    int k = find_key(s, a, 0);
    int64_t count = k >= 0 ? s->keys[k].count : 0;
    int32_t dtype = k >= 0 ? s->keys[k].dtype : -1;
    pthread_mutex_unlock(&s->lock);
    if (k < 0) return kvd_host->set_error(MXP_ENOENT, "kvstore dist_async: key %s was not initialised", kt);
    if (count != mxp_tensor_numel(v) || dtype != v->dtype)
        return kvd_host->set_error(MXP_ESHAPE, "kvstore dist_async: key %s: %lld elements of dtype %d in a %s, "
                                   "initialised with %lld of dtype %d", kt, (long long)mxp_tensor_numel(v), v->dtype,
                                   what, (long long)count, dtype);
    kvd_req *r = calloc(1, sizeof *r);
    if (!r) return kvd_host->set_error(MXP_ENOMEM, "kvstore dist_async: out of memory");
    r->kind = kind;
    r->key = k;
    r->data = mxp_tensor_ptr(v);
    r->count = count;
    r->dtype = dtype;
    r->complete = a->complete;
    r->token = a->complete_token;
    kvd_enqueue(s, r);
    return MXP_OK;
}

static int kvd_async_push(mxp_kv_args *a) { return kvd_async_op(a, KVD_PUSH); }
static int kvd_async_pull(mxp_kv_args *a) { return kvd_async_op(a, KVD_PULL); }

/* The servers' updater: op\0k1\0v1\0... sent by worker 0 to every server. */
static int kvd_set_updater(mxp_kv_updater_args *a) {
    kvd_store *s = a->store;
    int rc = refuse_on_server(s, "set_updater");
    if (rc) return rc;
    if (!a->op_name || (a->n_kwargs && (!a->keys || !a->vals)))
        return kvd_host->set_error(MXP_EINVAL, "kvstore dist_async: set_updater: NULL op or kwargs");
    size_t len = strlen(a->op_name) + 1;
    for (uint32_t i = 0; i < a->n_kwargs; i++) {
        if (!a->keys[i] || !a->vals[i]) return kvd_host->set_error(MXP_EINVAL, "kvstore dist_async: NULL kwarg");
        len += strlen(a->keys[i]) + strlen(a->vals[i]) + 2;
    }
    char *blob = malloc(len), *p = blob;
    if (!blob) return kvd_host->set_error(MXP_ENOMEM, "kvstore dist_async: out of memory");
    p = stpcpy(p, a->op_name) + 1;
    for (uint32_t i = 0; i < a->n_kwargs; i++) {
        p = stpcpy(p, a->keys[i]) + 1;
        p = stpcpy(p, a->vals[i]) + 1;
    }
    kvd_req r;
    memset(&r, 0, sizeof r);
    r.kind = KVD_UPDATER;
    r.blob = blob;
    r.blob_len = (int64_t)len;
    rc = kvd_run_sync(s, &r);
    free(blob);
    return rc;
}

static int kvd_run_server(mxp_kv_simple_args *a) {
    kvd_store *s = a->store;
    if (!s->async || !s->role)
        return kvd_host->set_error(MXP_EMISUSE, "kvstore %s: rank %d is a worker, not a server", s->async ?
                                   "dist_async" : "dist_sync", s->rank);
    pthread_mutex_lock(&s->lock);
    while (!s->served) pthread_cond_wait(&s->cond, &s->lock);
    int broken = s->broken;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", s->broken_msg);
    pthread_mutex_unlock(&s->lock);
    return broken ? kvd_host->set_error(MXP_ENET, "%s", msg) : MXP_OK;
}

static int kvd_push_alone(mxp_kv_args *a) {
    (void)a;
    return kvd_host->set_error(MXP_EUNSUPPORTED, "kvstore dist_sync: sums go through pushpull (the front end's "
                               "push); a bare push or pull is not a transport operation here");
}

static int kvd_info(mxp_kv_info_args *a) {
    kvd_store *s = a->store;
    a->rank = s->async && s->role ? s->rank - s->n_workers : s->rank;
    a->num_workers = s->async ? s->n_workers : s->size;
    a->num_servers = s->n_servers;
    a->role = s->async ? s->role : 0;
    return MXP_OK;
}

static int kvd_barrier(mxp_kv_simple_args *a) {
    int rc = refuse_on_server(a->store, "barrier");
    if (rc) return rc;
    kvd_req r;
    memset(&r, 0, sizeof r);
    r.kind = KVD_BARRIER;
    return kvd_run_sync(a->store, &r);
}

static const mxp_kvstore_def dist_sync_def = {
    .hdr = MXP_HEADER(mxp_kvstore_def),
    .name = "dist_sync",
    .doc = "Synchronous data parallelism on MPI: every push of a key is summed over all workers (fused into "
           "buckets, on a communication thread) and every worker runs the updater on the same sum",
    .create = kvd_create,
    .destroy = kvd_destroy,
    .init = kvd_init,
    .push = kvd_push_alone,
    .pull = kvd_push_alone,
    .pushpull = kvd_pushpull,
    .info = kvd_info,
    .barrier = kvd_barrier,
};

static const mxp_kvstore_def dist_async_def = {
    .hdr = MXP_HEADER(mxp_kvstore_def),
    .name = "dist_async",
    .doc = "Parameter servers on MPI: the last MXP_KV_NUM_SERVERS ranks hold the keys (sharded, big arrays sliced "
           "over all servers) and run the updater on each push as it arrives; workers push and pull without a "
           "barrier",
    .create = kvd_create,
    .destroy = kvd_destroy,
    .init = kvd_init,
    .push = kvd_async_push,
    .pull = kvd_async_pull,
    .info = kvd_info,
    .barrier = kvd_barrier,
    .set_updater = kvd_set_updater,
    .run_server = kvd_run_server,
};

static mxp_kvstore_def dist_sync_device_def;

static int kvd_pack_init(const mxp_plugin_init_args *a) {
    if (!a || !a->host || !a->registrar || !a->registrar->add_kvstore) return MXP_EINVAL;
    kvd_host = a->host;
    dist_sync_device_def = dist_sync_def;
    dist_sync_device_def.name = "dist_sync_device";
    int rc = a->registrar->add_kvstore(a->registrar, &dist_sync_def);
    if (rc == MXP_OK) rc = a->registrar->add_kvstore(a->registrar, &dist_sync_device_def);
    if (rc == MXP_OK) rc = a->registrar->add_kvstore(a->registrar, &dist_async_def);
    return rc;
}

static void kvd_pack_fini(const mxp_plugin_fini_args *a) {
    (void)a;
    if (g_live) {
        mxp_kv_simple_args d = {.store = &g_store};
        kvd_destroy(&d);
    }
}

static const mxp_plugin_desc kvd_desc = {
    .hdr = MXP_HEADER(mxp_plugin_desc),
    .min_host_minor = 0,
    .name = "kvstore-dist",
    .version = "0.1.0",
    .description = "Distributed KVStore on Open MPI: dist_sync, dist_sync_device, dist_async",
    .license = "Apache-2.0",
    .init = kvd_pack_init,
    .fini = kvd_pack_fini,
};

MXP_PLUGIN_DEFINE(kvd_desc)
