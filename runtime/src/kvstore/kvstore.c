/* kvstore.c — the KVStore front end (mxplug/kvstore.h): creating a store
 * (local types here, dist types through a transport pack found by name in
 * the manifests), the key table, argument checks, and turning each push /
 * pull into engine operations (reduce.c) in MXNet's order: sum the arrays
 * pushed for a key, sum over workers (transport), run the updater or
 * replace the stored value; pull copies the stored value out.
 *
 * Not here: the sums and copies themselves (reduce.c), the network (the
 * kvstore-dist pack).  Invariants: every key in the table has stored and
 * merged arrays of its shape and dtype; entries are never removed while
 * the store lives; a call that fails its checks pushes nothing. */
#include "kvstore/kvstore_impl.h"
#include "kvstore/kvstore_fit.h"

#include "ndarray/ndarray.h"

#include <mxplug/engine.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const mxp_device cpu0 = {MXP_DEV_CPU, 0};

/* ------------------------------------------------------------ keys */

/* A list of keys given as ints or strings. */
typedef struct keylist {
    int n;
    const int64_t *ik;
    const char *const *sk;
} keylist;

static uint64_t key_hash(int is_str, int64_t ik, const char *sk) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)is_str;
    if (is_str) {
        for (const unsigned char *p = (const unsigned char *)sk; *p; p++) h = (h ^ *p) * 1099511628211ull;
    } else {
        for (int i = 0; i < 8; i++) h = (h ^ (((uint64_t)ik >> (8 * i)) & 0xff)) * 1099511628211ull;
    }
    return h;
}

static int key_eq(const kv_entry *e, int is_str, int64_t ik, const char *sk) {
    return e->is_str == is_str && (is_str ? !strcmp(e->skey, sk) : e->ikey == ik);
}

static kv_entry *find_key(const mxp_kvstore *kv, const keylist *kl, int i) {
    if (!kv->n_slots) return NULL;
    int is_str = kl->sk != NULL;
    int64_t ik = is_str ? 0 : kl->ik[i];
    const char *sk = is_str ? kl->sk[i] : NULL;
    uint64_t mask = (uint64_t)kv->n_slots - 1;
    for (uint64_t h = key_hash(is_str, ik, sk) & mask;; h = (h + 1) & mask) {
        int s = kv->slots[h];
        if (!s) return NULL;
        if (key_eq(kv->entries[s - 1], is_str, ik, sk)) return kv->entries[s - 1];
    }
}

static void slot_insert(mxp_kvstore *kv, int idx) {
    const kv_entry *e = kv->entries[idx];
    uint64_t mask = (uint64_t)kv->n_slots - 1;
    uint64_t h = key_hash(e->is_str, e->ikey, e->skey) & mask;
    while (kv->slots[h]) h = (h + 1) & mask;
    kv->slots[h] = idx + 1;
}

static int table_reserve(mxp_kvstore *kv, int more) {
    int need = kv->n_entries + more;
    if (need > kv->cap_entries) {
        int cap = kv->cap_entries ? kv->cap_entries : 16;
        while (cap < need) cap *= 2;
        kv_entry **e = realloc(kv->entries, (size_t)cap * sizeof *e);
        if (!e) return mxp__error_oom("kvstore keys");
        kv->entries = e;
        kv->cap_entries = cap;
    }
    if (2 * need >= kv->n_slots) {
        int ns = kv->n_slots ? kv->n_slots : 32;
        while (2 * need >= ns) ns *= 2;
        int *slots = calloc((size_t)ns, sizeof *slots);
        if (!slots) return mxp__error_oom("kvstore keys");
        free(kv->slots);
        kv->slots = slots;
        kv->n_slots = ns;
        for (int i = 0; i < kv->n_entries; i++) slot_insert(kv, i);
    }
    return MXP_OK;
}

static void key_label(const keylist *kl, int i, char *buf, size_t cap) {
    if (kl->sk) snprintf(buf, cap, "key '%s'", kl->sk[i]);
    else snprintf(buf, cap, "key %" PRId64, kl->ik[i]);
}

static void free_entry(kv_entry *e) {
    if (!e) return;
    mxp_ndarray_release(e->stored);
    mxp_ndarray_release(e->merged);
    free(e->skey);
    free(e);
}

/* ------------------------------------------------------------ create */

static const char *const local_types[] = {"local", "device"};
/* Types with their own meaning that a transport pack may provide. */
static const char *const dist_types[] = {"dist_sync", "dist_async", "dist_sync_device", "dist_device_sync"};

static int is_local_type(const char *t) {
    for (size_t i = 0; i < sizeof local_types / sizeof *local_types; i++)
        if (!strcmp(t, local_types[i])) return 1;
    return 0;
}

static int open_transport(mxp_kvstore *kv, const char *type, int n_opts, const char *const *ok,
                          const char *const *ov) {
    const void *d = NULL;
    mxp_pack *pack = NULL;
    int rc = mxp__registry_feature(MXP_FEATURE_KVSTORE, type, &d, &pack);
    if (rc) {
        int known = 0;
        for (size_t i = 0; i < sizeof dist_types / sizeof *dist_types; i++) known |= !strcmp(type, dist_types[i]);
        if (known)
            return mxp__error_prefix(rc, "kvstore type '%s' is not provided by any pack (kvstore-dist, built when "
                                     "Open MPI is installed, provides dist_sync, dist_sync_device and dist_async; "
                                     "`mxplug packs` lists the packs)", type);
        return mxp__error(MXP_ENOENT, "kvstore type '%s': unknown (known: local, device, dist_sync, "
                          "dist_sync_device, dist_async)", type);
    }
    if (pack && (rc = mxp__pack_pin(pack))) return rc;
    kv->pack = pack;
    kv->def = d;
    if (!kv->def->create || !kv->def->info || !kv->def->init || (!kv->def->pushpull && (!kv->def->push ||
                                                                                       !kv->def->pull)))
        return mxp__error(MXP_EPLUGIN, "kvstore '%s': its definition lacks create, info, init, or pushpull (or "
                          "push and pull)", type);
    const char *tms = getenv("MXP_KV_TIMEOUT");
    int32_t timeout_ms = 0;
    if (tms && *tms) {
        char *end;
        double s = strtod(tms, &end);
        if (*end || !(s > 0) || s > 86400)
            return mxp__error(MXP_EINVAL, "MXP_KV_TIMEOUT='%s': expected seconds in (0, 86400]", tms);
        timeout_ms = (int32_t)(s * 1000.0);
        if (timeout_ms < 1) timeout_ms = 1;
    }
    mxp_kv_create_args ca;
    memset(&ca, 0, sizeof ca);
    ca.hdr = (mxp_header)MXP_HEADER(mxp_kv_create_args);
    ca.user_data = kv->def->user_data;
    ca.type = type;
    ca.keys = ok;
    ca.vals = ov;
    ca.n_options = (uint32_t)n_opts;
    ca.timeout_ms = timeout_ms;
    if ((rc = kv->def->create(&ca))) return mxp__error_prefix(rc, "kvstore '%s'", type);
    kv->store = ca.store;
    mxp_kv_info_args ia;
    memset(&ia, 0, sizeof ia);
    ia.hdr = (mxp_header)MXP_HEADER(mxp_kv_info_args);
    ia.user_data = kv->def->user_data;
    ia.store = kv->store;
    if ((rc = kv->def->info(&ia))) return mxp__error_prefix(rc, "kvstore '%s': info", type);
    kv->is_server = ia.role == 1;
    /* Servers (dist_async) hold the values and run the updater. */
    kv->server_side = ia.num_servers > 0;
    int of = kv->is_server ? ia.num_servers : ia.num_workers;
    if (ia.num_workers < 1 || ia.rank < 0 || ia.rank >= of || (kv->server_side && (!kv->def->push || !kv->def->pull)))
        return mxp__error(MXP_EPLUGIN, "kvstore '%s': rank %d of %d %s%s", type, ia.rank, of,
                          kv->is_server ? "servers" : "workers", kv->server_side ? " (or no push and pull)" : "");
    kv->rank = ia.rank;
    kv->num_workers = ia.num_workers;
    return MXP_OK;
}

int mxp_kvstore_create(const char *type, int n_opts, const char *const *opt_keys, const char *const *opt_vals,
                       mxp_kvstore **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_kvstore_create: out is NULL");
    *out = NULL;
    if (!type) return mxp__error(MXP_EINVAL, "mxp_kvstore_create: type is NULL");
    if (n_opts < 0 || (n_opts && (!opt_keys || !opt_vals)))
        return mxp__error(MXP_EINVAL, "kvstore '%s': bad options", type);
    mxp_kvstore *kv = calloc(1, sizeof *kv);
    if (!kv || !(kv->type = strdup(type))) {
        free(kv);
        return mxp__error_oom("kvstore");
    }
    kv->num_workers = 1;
    int rc = MXP_OK;
    if (is_local_type(type)) {
        if (n_opts) rc = mxp__error(MXP_EINVAL, "kvstore '%s': unknown option '%s' (it takes none)", type, opt_keys[0]);
    } else {
        rc = open_transport(kv, type, n_opts, opt_keys, opt_vals);
    }
    if (rc) {
        mxp_kvstore_free(kv);
        return rc;
    }
    *out = kv;
    return MXP_OK;
}

void mxp_kvstore_free(mxp_kvstore *kv) {
    if (!kv) return;
    /* Pending pushes use the entries' arrays and the transport's store. */
    for (int i = 0; i < kv->n_entries; i++) mxp__kv_lazy_settle(kv->entries[i], 0);
    for (int i = 0; i < kv->n_entries; i++) {
        mxp_ndarray_wait_to_read(kv->entries[i]->merged);
        mxp_ndarray_wait_to_read(kv->entries[i]->stored);
    }
    if (kv->def && kv->store && kv->def->destroy) {
        mxp_kv_simple_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_kv_simple_args);
        a.user_data = kv->def->user_data;
        a.store = kv->store;
        kv->def->destroy(&a);
    }
    if (kv->pack) mxp__pack_unpin(kv->pack);
    for (int i = 0; i < kv->n_entries; i++) free_entry(kv->entries[i]);
    free(kv->entries);
    free(kv->slots);
    mxp_optimizer_free(kv->opt);
    free(kv->type);
    free(kv);
}

const char *mxp_kvstore_type(const mxp_kvstore *kv) { return kv ? kv->type : NULL; }
int mxp_kvstore_rank(const mxp_kvstore *kv) { return kv ? kv->rank : 0; }
int mxp_kvstore_num_workers(const mxp_kvstore *kv) { return kv ? kv->num_workers : 1; }

int mxp_kvstore_is_capable(const mxp_kvstore *kv, const char *cap) {
    if (!kv || !cap) return 0;
    return !strcmp(cap, "optimizer") || (!strcmp(cap, "updater") && !kv->server_side);
}

int mxp_kvstore_is_server(const mxp_kvstore *kv) { return kv && kv->is_server; }

int mxp_kvstore_updates_on_servers(const mxp_kvstore *kv) { return kv && kv->server_side; }

int mxp_kvstore_run_server(mxp_kvstore *kv) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_run_server: kv is NULL");
    if (!kv->is_server || !kv->def->run_server)
        return mxp__error(MXP_EMISUSE, "kvstore '%s': this process is not a server (only dist_async has servers: the "
                          "last MXP_KV_NUM_SERVERS ranks)", kv->type);
    mxp_kv_simple_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_kv_simple_args);
    a.user_data = kv->def->user_data;
    a.store = kv->store;
    int rc = kv->def->run_server(&a);
    return rc ? mxp__error_prefix(rc, "kvstore '%s' server %d", kv->type, kv->rank) : MXP_OK;
}

/* Calls a server process may not make: it only serves. */
static int refuse_server(const mxp_kvstore *kv, const char *what) {
    if (!kv->is_server) return MXP_OK;
    return mxp__error(MXP_EMISUSE, "kvstore '%s' %s: this process is server %d, not a worker (the last "
                      "MXP_KV_NUM_SERVERS ranks serve: call mxp_kvstore_run_server there)", kv->type, what, kv->rank);
}

/* ------------------------------------------------------------ checks */

static void shape_text(const int64_t *sh, int nd, char *buf, size_t cap) {
    mxp_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = nd;
    for (int i = 0; i < nd && i < MXP_MAX_NDIM; i++) s.dims[i] = sh[i];
    mxp__shape_str(&s, buf, cap);
}

static int check_array(const kv_entry *e, mxp_ndarray *a, const char *what) {
    if (!a || mxp_ndarray_is_none(a)) return mxp__error(MXP_EINVAL, "kvstore %s: %s array is NULL or none", e->label, what);
    int nd = mxp_ndarray_ndim(a);
    const int64_t *sh = mxp_ndarray_shape(a);
    int same = nd == e->ndim;
    for (int i = 0; same && i < nd; i++) same = sh[i] == e->shape[i];
    if (!same) {
        char got[160], want[160];
        shape_text(sh, nd, got, sizeof got);
        shape_text(e->shape, e->ndim, want, sizeof want);
        return mxp__error(MXP_ESHAPE, "kvstore %s: %s array has shape %s, the key was initialised with %s", e->label,
                          what, got, want);
    }
    if (mxp_ndarray_dtype(a) != e->dtype)
        return mxp__error(MXP_ETYPE, "kvstore %s: %s array is %s, the key was initialised as %s", e->label, what,
                          mxp_dtype_name(mxp_ndarray_dtype(a)), mxp_dtype_name(e->dtype));
    if (mxp_ndarray_device(a).type != MXP_DEV_CPU && mxp_ndarray_device(a).type != MXP_DEV_CPU_PINNED &&
        mxp_ndarray_device(a).type != MXP_DEV_CPU_SHARED)
        return mxp__error(MXP_EUNSUPPORTED, "kvstore %s: %s array is not on the CPU (device reduction needs a "
                          "device pack)", e->label, what);
    return MXP_OK;
}

/* Look every key up and check its arrays; entries[i] gets keys[i]'s entry. */
static int resolve(const mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *arrs, const char *what,
                   kv_entry **entries) {
    if (kl->n < 0 || (kl->n && ((!kl->ik && !kl->sk) || !arrs)))
        return mxp__error(MXP_EINVAL, "kvstore %s: bad arguments (n %d)", what, kl->n);
    for (int i = 0; i < kl->n; i++) {
        if (kl->sk && !kl->sk[i]) return mxp__error(MXP_EINVAL, "kvstore %s: key %d is NULL", what, i);
        kv_entry *e = find_key(kv, kl, i);
        if (!e) {
            char lb[96];
            key_label(kl, i, lb, sizeof lb);
            return mxp__error(MXP_ENOENT, "kvstore %s: %s was not initialised (call mxp_kvstore_init first)", what, lb);
        }
        int rc = check_array(e, arrs[i], what);
        if (rc) return rc;
        entries[i] = e;
    }
    return MXP_OK;
}

/* ------------------------------------------------------------ init */

static int init_keys(mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *vals) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_init: kv is NULL");
    int rs = refuse_server(kv, "init");
    if (rs) return rs;
    if (kl->n < 0 || (kl->n && ((!kl->ik && !kl->sk) || !vals)))
        return mxp__error(MXP_EINVAL, "kvstore init: bad arguments (n %d)", kl->n);
    for (int i = 0; i < kl->n; i++) {
        char lb[96];
        if (kl->sk && !kl->sk[i]) return mxp__error(MXP_EINVAL, "kvstore init: key %d is NULL", i);
        key_label(kl, i, lb, sizeof lb);
        if (find_key(kv, kl, i)) return mxp__error(MXP_EEXIST, "kvstore init: %s is already initialised", lb);
        for (int j = 0; j < i; j++) {
            int same = kl->sk ? !strcmp(kl->sk[i], kl->sk[j]) : kl->ik[i] == kl->ik[j];
            if (same) return mxp__error(MXP_EINVAL, "kvstore init: %s is given twice", lb);
        }
        if (!vals[i] || mxp_ndarray_is_none(vals[i]))
            return mxp__error(MXP_EINVAL, "kvstore init: %s: the value is NULL or none", lb);
        int dt = mxp_ndarray_dtype(vals[i]);
        if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64 && dt != MXP_DTYPE_I32 && dt != MXP_DTYPE_I64)
            return mxp__error(MXP_ETYPE, "kvstore init: %s is %s (float32, float64, int32, int64 are supported)", lb,
                              mxp_dtype_name(dt));
    }
    int rc = table_reserve(kv, kl->n);
    for (int i = 0; rc == MXP_OK && i < kl->n; i++) {
        kv_entry *e = calloc(1, sizeof *e);
        if (!e) {
            rc = mxp__error_oom("kvstore key");
            break;
        }
        e->is_str = kl->sk != NULL;
        if (e->is_str) e->skey = strdup(kl->sk[i]);
        else e->ikey = kl->ik[i];
        key_label(kl, i, e->label, sizeof e->label);
        e->ndim = mxp_ndarray_ndim(vals[i]);
        e->dtype = mxp_ndarray_dtype(vals[i]);
        memcpy(e->shape, mxp_ndarray_shape(vals[i]), (size_t)e->ndim * sizeof(int64_t));
        if (e->is_str && !e->skey) rc = mxp__error_oom("kvstore key");
        if (rc == MXP_OK) rc = mxp_ndarray_create(e->shape, e->ndim, e->dtype, cpu0, &e->stored);
        if (rc == MXP_OK) rc = mxp_ndarray_create(e->shape, e->ndim, e->dtype, cpu0, &e->merged);
        if (rc == MXP_OK) rc = check_array(e, vals[i], "init");
        if (rc == MXP_OK) rc = mxp__kv_push_copy(e, vals[i], e->stored, 0, "init");
        if (rc == MXP_OK && kv->def) {
            /* Every worker ends with rank 0's value (mxp/kvstore.h: init is
             * synchronous; outs receive the agreed value). */
            rc = mxp_ndarray_wait_to_read(e->stored);
            mxp_tensor t;
            mxp__kv_tensor(e, e->stored, &t);
            mxp_kv_args a;
            memset(&a, 0, sizeof a);
            a.hdr = (mxp_header)MXP_HEADER(mxp_kv_args);
            a.user_data = kv->def->user_data;
            a.store = kv->store;
            a.n = 1;
            const char *sk = e->skey;
            if (e->is_str) a.str_keys = &sk;
            else a.int_keys = &e->ikey;
            a.values = &t;
            a.outs = &t;
            if (rc == MXP_OK && (rc = kv->def->init(&a))) rc = mxp__error_prefix(rc, "kvstore init %s", e->label);
        }
        if (rc) {
            mxp_ndarray_wait_to_read(e->stored);
            free_entry(e);
            break;
        }
        e->index = kv->n_entries;
        kv->entries[kv->n_entries++] = e;
        slot_insert(kv, e->index);
    }
    return rc;
}

int mxp_kvstore_init(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals) {
    keylist kl = {n, keys, NULL};
    return init_keys(kv, &kl, vals);
}

int mxp_kvstore_init_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals) {
    keylist kl = {n, NULL, keys};
    return init_keys(kv, &kl, vals);
}

/* ------------------------------------------------------------ push / pull */

static int optimizer_updater(mxp_kvstore *kv, kv_entry *e) {
    return mxp_optimizer_update(kv->opt, e->index, e->is_str ? e->skey : NULL, e->stored, e->merged);
}

static int push_keys(mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *vals, int priority) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_push: kv is NULL");
    int rs = refuse_server(kv, "push");
    if (rs) return rs;
    if (kl->n == 0) return MXP_OK;
    kv_entry **ent = calloc((size_t)kl->n, sizeof *ent);
    mxp_ndarray **group = calloc((size_t)kl->n, sizeof *group);
    char *done = calloc((size_t)kl->n, 1);
    int rc = ent && group && done ? MXP_OK : mxp__error_oom("kvstore push");
    if (rc == MXP_OK) rc = resolve(kv, kl, vals, "push", ent);
    /* Keys in order of first appearance; a key's arrays summed together. */
    for (int i = 0; rc == MXP_OK && i < kl->n; i++) {
        if (done[i]) continue;
        kv_entry *e = ent[i];
        rc = mxp__kv_lazy_settle(e, 1); /* an updater reads stored */
        if (rc) break;
        int ng = 0;
        for (int j = i; j < kl->n; j++)
            if (ent[j] == e) {
                group[ng++] = vals[j];
                done[j] = 1;
            }
        rc = mxp__kv_push_reduce(e, ng, group, priority);
        if (rc == MXP_OK && kv->server_side) { /* the servers update */
            rc = mxp__kv_push_transport(kv, e, MXP__KV_PUSH, priority);
            continue;
        }
        if (rc == MXP_OK && kv->def) rc = mxp__kv_push_transport(kv, e, MXP__KV_PUSHPULL, priority);
        if (rc == MXP_OK) {
            if (kv->updater) {
                rc = kv->updater(kv->updater_user, e->is_str ? -1 : e->ikey, e->skey, e->merged, e->stored);
                if (rc) rc = mxp__error_prefix(rc, "kvstore updater, %s", e->label);
            } else if (kv->opt) {
                rc = optimizer_updater(kv, e);
                if (rc) rc = mxp__error_prefix(rc, "kvstore optimizer, %s", e->label);
            } else {
                rc = mxp__kv_push_copy(e, e->merged, e->stored, priority, "store");
            }
        }
    }
    free(ent);
    free(group);
    free(done);
    return rc;
}

static int pull_keys(mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *outs, int priority) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_pull: kv is NULL");
    int rs = refuse_server(kv, "pull");
    if (rs) return rs;
    if (kl->n == 0) return MXP_OK;
    kv_entry **ent = calloc((size_t)kl->n, sizeof *ent);
    int rc = ent ? MXP_OK : mxp__error_oom("kvstore pull");
    if (rc == MXP_OK) rc = resolve(kv, kl, outs, "pull", ent);
    for (int i = 0; rc == MXP_OK && i < kl->n; i++) {
        /* A key repeated in one call is fetched from the servers once. */
        int first = 1;
        for (int j = 0; kv->server_side && j < i; j++) first &= ent[j] != ent[i];
        rc = mxp__kv_lazy_settle(ent[i], 1);
        if (rc == MXP_OK && kv->server_side && first) rc = mxp__kv_push_transport(kv, ent[i], MXP__KV_PULL, priority);
        if (rc == MXP_OK) rc = mxp__kv_push_copy(ent[i], ent[i]->stored, outs[i], priority, "pull");
    }
    free(ent);
    return rc;
}

int mxp_kvstore_push(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals, int priority) {
    keylist kl = {n, keys, NULL};
    return push_keys(kv, &kl, vals, priority);
}
int mxp_kvstore_push_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals, int priority) {
    keylist kl = {n, NULL, keys};
    return push_keys(kv, &kl, vals, priority);
}
int mxp_kvstore_pull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, keys, NULL};
    return pull_keys(kv, &kl, outs, priority);
}
int mxp_kvstore_pull_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, NULL, keys};
    return pull_keys(kv, &kl, outs, priority);
}

/* A worker-side sum (dist_sync) with nothing to run on the sum and every
 * key given once: the sum runs on the out array itself (one transport op
 * instead of reduce, transport, store and pull: two copies of the key
 * fewer), and out is the key's value until the next write on out or the
 * next push or pull of the key copies it to stored (lazy_store.c): out is
 * readable as soon as the sum is.  The same values and bits as the
 * general path: a single array's local "sum" is a copy. */
static int pushpull_in_place(mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *vals, mxp_ndarray *const *outs,
                             kv_entry **ent, int priority) {
    int rc = MXP_OK;
    for (int i = 0; rc == MXP_OK && i < kl->n; i++) {
        kv_entry *e = ent[i];
        rc = mxp__kv_lazy_settle(e, 0); /* this sum replaces it */
        if (rc) break;
        if (mxp_ndarray_var(vals[i]) != mxp_ndarray_var(outs[i]) ||
            mxp__ndarray_dptr(vals[i]) != mxp__ndarray_dptr(outs[i]))
            rc = mxp__kv_push_copy(e, vals[i], outs[i], priority, "pushpull copy");
        if (rc == MXP_OK) rc = mxp__kv_push_transport_on(kv, e, MXP__KV_PUSHPULL, outs[i], priority);
        if (rc == MXP_OK) rc = mxp__kv_lazy_arm(e, outs[i], priority);
    }
    return rc;
}

static int pushpull_keys(mxp_kvstore *kv, const keylist *kl, mxp_ndarray *const *vals, mxp_ndarray *const *outs,
                         int priority) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_pushpull: kv is NULL");
    kv_entry **ent = kl->n > 0 ? calloc((size_t)kl->n, sizeof *ent) : NULL;
    if (kl->n > 0 && !ent) return mxp__error_oom("kvstore pushpull");
    /* Check the outs before pushing anything. */
    int rc = kl->n > 0 ? resolve(kv, kl, outs, "pull", ent) : MXP_OK;
    int in_place = rc == MXP_OK && kv->def && !kv->server_side && !kv->updater && !kv->opt;
    for (int i = 0; in_place && i < kl->n; i++)
        for (int j = 0; j < i; j++) in_place &= ent[i] != ent[j];
    if (in_place) {
        kv_entry **ev = calloc((size_t)kl->n, sizeof *ev);
        rc = ev ? resolve(kv, kl, vals, "push", ev) : mxp__error_oom("kvstore pushpull");
        free(ev);
        if (rc == MXP_OK) rc = pushpull_in_place(kv, kl, vals, outs, ent, priority);
        free(ent);
        return rc;
    }
    free(ent);
    if (rc == MXP_OK) rc = push_keys(kv, kl, vals, priority);
    if (rc == MXP_OK) rc = pull_keys(kv, kl, outs, priority);
    return rc;
}

int mxp_kvstore_pushpull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals,
                         mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, keys, NULL};
    return pushpull_keys(kv, &kl, vals, outs, priority);
}
int mxp_kvstore_pushpull_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals,
                             mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, NULL, keys};
    return pushpull_keys(kv, &kl, vals, outs, priority);
}

/* kvstore_fit.h: mxp_module_fit's per-step gradient sum.  The copy into
 * `stored` is a memcpy of every gradient each step, and it ran in front of
 * the next backward (which rewrites the gradient it reads); fit never
 * pulls these keys, so it is left out. */
int mxp__kvstore_sum_in_place_str(mxp_kvstore *kv, const char *key, mxp_ndarray *arr, int priority) {
    keylist kl = {1, NULL, &key};
    if (!kv || !kv->def || kv->server_side || kv->updater || kv->opt)
        return kv ? pushpull_keys(kv, &kl, &arr, &arr, priority) : mxp__error(MXP_EINVAL, "kvstore sum: kv is NULL");
    kv_entry *e = NULL;
    int rc = resolve(kv, &kl, &arr, "pushpull", &e);
    if (rc == MXP_OK) rc = mxp__kv_push_transport_on(kv, e, MXP__KV_PUSHPULL, arr, priority);
    return rc;
}

int mxp_kvstore_broadcast(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *vals,
                          mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, keys, NULL};
    int rc = init_keys(kv, &kl, vals);
    return rc ? rc : pull_keys(kv, &kl, outs, priority);
}
int mxp_kvstore_broadcast_str(mxp_kvstore *kv, int n, const char *const *keys, mxp_ndarray *const *vals,
                              mxp_ndarray *const *outs, int priority) {
    keylist kl = {n, NULL, keys};
    int rc = init_keys(kv, &kl, vals);
    return rc ? rc : pull_keys(kv, &kl, outs, priority);
}

int mxp_kvstore_row_sparse_pull(mxp_kvstore *kv, int n, const int64_t *keys, mxp_ndarray *const *outs,
                                mxp_ndarray *const *row_ids, int priority) {
    (void)kv; (void)n; (void)keys; (void)outs; (void)row_ids; (void)priority;
    return mxp__error(MXP_EUNSUPPORTED, "kvstore row_sparse_pull: mxplug has no row-sparse arrays; use pull");
}

int mxp_kvstore_set_gradient_compression(mxp_kvstore *kv, int n, const char *const *keys, const char *const *vals) {
    (void)kv; (void)n; (void)keys; (void)vals;
    return mxp__error(MXP_EUNSUPPORTED, "kvstore set_gradient_compression: no gradient compression is implemented");
}

/* ------------------------------------------------------------ updaters */

int mxp_kvstore_set_updater(mxp_kvstore *kv, mxp_kvstore_updater_fn fn, void *user) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_set_updater: kv is NULL");
    if (kv->server_side)
        return mxp__error(MXP_EUNSUPPORTED, "kvstore '%s' set_updater: the updater runs on the servers, which cannot "
                          "call a function of this process; use mxp_kvstore_set_optimizer", kv->type);
    mxp_optimizer_free(kv->opt);
    kv->opt = NULL;
    kv->updater = fn;
    kv->updater_user = user;
    return MXP_OK;
}

/* The optimizer as the servers' updater: its update op and that op's
 * kwargs (mxp_optimizer's names and defaults; the servers apply its wd rule
 * and Adam's bias correction per key, ps_server.c). */
static int set_server_optimizer(mxp_kvstore *kv, const char *type, int n_kwargs, const char *const *keys,
                                const char *const *vals) {
    if (!kv->def->set_updater)
        return mxp__error(MXP_EPLUGIN, "kvstore '%s': the transport cannot set the servers' updater", kv->type);
    int sgd = !strcasecmp(type, "sgd"), adam = !strcasecmp(type, "adam");
    int has_lr = 0, mom = 0;
    const char *ok[40], *ov[40];
    int n = 0;
    for (int i = 0; i < n_kwargs && n < 38; i++) {
        const char *k = !strcmp(keys[i], "learning_rate") ? "lr" : keys[i];
        const char *v = !vals[i] || !strcmp(vals[i], "None") ? "-1" : vals[i]; /* clip_*: None = off */
        has_lr |= !strcmp(k, "lr");
        if (!strcmp(k, "momentum")) mom = strtod(v, NULL) != 0.0;
        if (!strcmp(k, "momentum") && !mom) continue; /* plain sgd_update has none */
        ok[n] = k, ov[n++] = v;
    }
    if (!has_lr) ok[n] = "lr", ov[n++] = sgd ? "0.01" : "0.001";
    const char *op = adam ? "adam_update" : !sgd ? "rmsprop_update" : mom ? "sgd_mom_update" : "sgd_update";
    mxp_kv_updater_args a;
    memset(&a, 0, sizeof a);
    a.hdr = (mxp_header)MXP_HEADER(mxp_kv_updater_args);
    a.user_data = kv->def->user_data;
    a.store = kv->store;
    a.op_name = op;
    a.keys = ok;
    a.vals = ov;
    a.n_kwargs = (uint32_t)n;
    int rc = kv->def->set_updater(&a);
    return rc ? mxp__error_prefix(rc, "kvstore '%s' set_optimizer '%s'", kv->type, type) : MXP_OK;
}

int mxp_kvstore_set_optimizer(mxp_kvstore *kv, const char *type, int n_kwargs, const char *const *keys,
                              const char *const *vals) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_set_optimizer: kv is NULL");
    mxp_optimizer *opt = NULL;
    int rc = mxp_optimizer_create(type, n_kwargs, keys, vals, &opt); /* checks type and kwargs */
    if (rc) return rc;
    if (kv->server_side) {
        mxp_optimizer_free(opt);
        return set_server_optimizer(kv, type, n_kwargs, keys, vals);
    }
    mxp_optimizer_free(kv->opt);
    kv->opt = opt;
    kv->updater = NULL;
    kv->updater_user = NULL;
    return MXP_OK;
}

int mxp_kvstore_save_optimizer_states(mxp_kvstore *kv, const char *path) {
    if (!kv || !path) return mxp__error(MXP_EINVAL, "mxp_kvstore_save_optimizer_states: NULL argument");
    if (kv->server_side)
        return mxp__error(MXP_EUNSUPPORTED, "kvstore '%s' save_optimizer_states: the states live on the servers",
                          kv->type);
    if (!kv->opt) return mxp__error(MXP_EMISUSE, "kvstore save_optimizer_states: no optimizer (set_optimizer first)");
    return mxp_optimizer_save_states(kv->opt, path);
}

int mxp_kvstore_load_optimizer_states(mxp_kvstore *kv, const char *path) {
    if (!kv || !path) return mxp__error(MXP_EINVAL, "mxp_kvstore_load_optimizer_states: NULL argument");
    if (kv->server_side)
        return mxp__error(MXP_EUNSUPPORTED, "kvstore '%s' load_optimizer_states: the states live on the servers",
                          kv->type);
    if (!kv->opt) return mxp__error(MXP_EMISUSE, "kvstore load_optimizer_states: no optimizer (set_optimizer first)");
    return mxp_optimizer_load_states(kv->opt, path);
}

int mxp_kvstore_barrier(mxp_kvstore *kv) {
    if (!kv) return mxp__error(MXP_EINVAL, "mxp_kvstore_barrier: kv is NULL");
    int rc = refuse_server(kv, "barrier");
    for (int i = 0; i < kv->n_entries && rc == MXP_OK; i++) {
        rc = mxp_ndarray_wait_to_read(kv->entries[i]->merged);
        if (rc == MXP_OK) rc = mxp_ndarray_wait_to_read(kv->entries[i]->stored);
    }
    if (rc == MXP_OK && kv->def && kv->def->barrier) {
        mxp_kv_simple_args a;
        memset(&a, 0, sizeof a);
        a.hdr = (mxp_header)MXP_HEADER(mxp_kv_simple_args);
        a.user_data = kv->def->user_data;
        a.store = kv->store;
        if ((rc = kv->def->barrier(&a))) rc = mxp__error_prefix(rc, "kvstore '%s' barrier", kv->type);
    }
    return rc;
}
