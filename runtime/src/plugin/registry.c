/* registry.c — the tables of packs, ops (by name and alias, hashed), their
 * implementations and the features packs register (devices, kvstores,
 * iterators), plus the public read-only API of mxplug/registry.h.
 *
 * Ops come from manifests first (name, aliases, declared impls: enough for
 * `mxplug list` without opening any .so) and are enriched with the real
 * definitions when their pack is published (registrar.c).  Entries are
 * never freed before mxp_registry_shutdown, so handles stay valid; strings
 * handed out are owned by the entries.  The generation counter (atomic)
 * changes whenever an implementation choice may change.
 * Not here: loading (loader.c), choosing (select.c), reload (reload.c). */
#include "plugin/plugin_impl.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mxp_registry mxp__g_reg = {
    .lock = PTHREAD_RWLOCK_INITIALIZER,
    .load_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP,
    .next_dev_type = MXP_DEV_FIRST_DYNAMIC,
};
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_init_done;

/* Which of the registry's locks this thread holds, so the _locked
 * functions can assert their lock (SQLite's assert(sqlite3_mutex_held())):
 * neither a rwlock nor a recursive mutex can say who holds it.  A thread
 * holds the table lock shared (possibly nested) or exclusive, never both
 * (that would deadlock), so unlock knows which count to drop. */
static _Thread_local int t_table_rd, t_table_wr, t_load;

void mxp__registry_rdlock(void) {
    pthread_rwlock_rdlock(&mxp__g_reg.lock);
    t_table_rd++;
}
void mxp__registry_wrlock(void) {
    pthread_rwlock_wrlock(&mxp__g_reg.lock);
    t_table_wr++;
}
void mxp__registry_unlock(void) {
    MXP_ASSERT(t_table_rd + t_table_wr > 0);
    if (t_table_wr) t_table_wr--;
    else t_table_rd--;
    pthread_rwlock_unlock(&mxp__g_reg.lock);
}
void mxp__registry_load_lock(void) {
    pthread_mutex_lock(&mxp__g_reg.load_lock);
    t_load++;
}
void mxp__registry_load_unlock(void) {
    MXP_ASSERT(t_load > 0);
    t_load--;
    pthread_mutex_unlock(&mxp__g_reg.load_lock);
}
int mxp__registry_held(void) { return t_table_rd + t_table_wr > 0; }
int mxp__registry_held_exclusive(void) { return t_table_wr > 0; }
int mxp__registry_load_held(void) { return t_load > 0; }

void mxp__registry_bump(void) { atomic_fetch_add(&mxp__g_reg.generation, 1); }
uint64_t mxp_registry_generation(void) { return (uint64_t)atomic_load(&mxp__g_reg.generation); }

/* ------------------------------------------------------------ hash map */
static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static int map_put(const char *key, struct mxp_op *op) {
    mxp_registry *r = &mxp__g_reg;
    if ((r->map_used + 1) * 2 > r->map_cap) {
        size_t ncap = r->map_cap ? r->map_cap * 2 : 64;
        void *nm = calloc(ncap, sizeof *r->map);
        if (!nm) return mxp__error_oom("registry map");
        __typeof__(r->map) old = r->map;
        size_t ocap = r->map_cap;
        r->map = nm;
        r->map_cap = ncap;
        r->map_used = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].key) map_put(old[i].key, old[i].op);
        free(old);
    }
    size_t mask = r->map_cap - 1;
    for (size_t i = hash_str(key) & mask;; i = (i + 1) & mask) {
        if (!r->map[i].key) {
            r->map[i].key = key;
            r->map[i].op = op;
            r->map_used++;
            return MXP_OK;
        }
        if (!strcmp(r->map[i].key, key)) return MXP_OK; /* first wins */
    }
}

struct mxp_op *mxp__registry_find_op_locked(const char *name) {
    MXP_ASSERT(mxp__registry_held());
    mxp_registry *r = &mxp__g_reg;
    if (!name || !r->map_cap) return NULL;
    size_t mask = r->map_cap - 1;
    for (size_t i = hash_str(name) & mask; r->map[i].key; i = (i + 1) & mask)
        if (!strcmp(r->map[i].key, name)) return r->map[i].op;
    return NULL;
}

struct mxp_op *mxp__registry_find_op(const char *name) {
    if (mxp__registry_ensure()) return NULL;
    mxp__registry_rdlock();
    struct mxp_op *op = mxp__registry_find_op_locked(name);
    mxp__registry_unlock();
    return op;
}

const char *mxp__op_name(const struct mxp_op *op) { return op ? op->name : NULL; }

mxp_pack *mxp__registry_op_pack(const struct mxp_op *op) {
    mxp__registry_rdlock();
    mxp_pack *p = op->pack;
    mxp__registry_unlock();
    return p;
}

int mxp__registry_op_impls(const struct mxp_op *op, const char *dev, mxp_impl_entry ***out, int *out_n) {
    *out = NULL;
    *out_n = 0;
    mxp__registry_rdlock();
    int n = op->n_impls, nc = 0;
    mxp_impl_entry **c = calloc((size_t)(n ? n : 1), sizeof *c);
    if (c)
        for (int i = 0; i < n; i++)
            if (!dev || !strcmp(op->impls[i]->device, dev)) c[nc++] = op->impls[i];
    mxp__registry_unlock();
    if (!c) return mxp__error_oom("impl list");
    *out = c;
    *out_n = nc;
    return MXP_OK;
}

int mxp__registry_op_api_policy(const struct mxp_op *op, char *buf, size_t cap) {
    mxp__registry_rdlock();
    int set = op->api_policy != NULL;
    if (set) snprintf(buf, cap, "%s", op->api_policy);
    mxp__registry_unlock();
    return set;
}

int mxp__registry_policy_check(const struct mxp_op *op, const char *policy, const char *where) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", policy);
    char *save = NULL;
    int n = 0, ended = 0;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        size_t len = strlen(item);
        while (len && item[len - 1] == ' ') item[--len] = '\0';
        if (!*item) continue;
        n++;
        if (ended)
            return mxp__error(MXP_EINVAL, "%s: '%s' comes after 'auto'/'tune' and can never be used (policy '%s')",
                              where, item, policy);
        int ok = !strcmp(item, "auto") || !strcmp(item, "tune");
        if (ok) {
            ended = 1;
            continue;
        }
        char list[512] = "";
        size_t off = 0;
        mxp__registry_rdlock();
        for (int i = 0; i < op->n_impls && !ok; i++) ok = !strcmp(op->impls[i]->name, item);
        for (int i = 0; i < op->n_impls && off < sizeof list; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'", i ? ", " : "", op->impls[i]->name);
        mxp__registry_unlock();
        if (!ok)
            return mxp__error(MXP_EINVAL, "%s: op '%s' has no implementation '%s' (valid: %s; or auto, tune, or a "
                              "preference list like 'winograd,auto')", where, op->name, item, *list ? list : "none");
    }
    if (!n) return mxp__error(MXP_EINVAL, "%s: empty implementation policy", where);
    return MXP_OK;
}

int mxp__registry_op_set_api_policy(struct mxp_op *op, const char *policy) {
    char *copy = NULL;
    if (policy) {
        char where[200];
        snprintf(where, sizeof where, "mxp_op_set_impl('%s', '%s')", op->name, policy);
        int rc = mxp__registry_policy_check(op, policy, where);
        if (rc) return rc;
        if (!(copy = strdup(policy))) return mxp__error_oom("policy");
    }
    mxp__registry_wrlock();
    free(op->api_policy);
    op->api_policy = copy;
    mxp__registry_unlock();
    return MXP_OK;
}

mxp_pack *mxp__registry_find_pack_locked(const char *name) {
    MXP_ASSERT(mxp__registry_held());
    for (int i = 0; i < mxp__g_reg.n_packs; i++)
        if (!strcmp(mxp__g_reg.packs[i]->man->name, name)) return mxp__g_reg.packs[i];
    return NULL;
}

struct mxp_op *mxp__registry_add_op_locked(const char *name, mxp_pack *pack) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    mxp_registry *r = &mxp__g_reg;
    struct mxp_op *op = calloc(1, sizeof *op);
    struct mxp_op **v = realloc(r->ops, (size_t)(r->n_ops + 1) * sizeof *v);
    if (!op || !v || !(op->name = strdup(name))) {
        if (v) r->ops = v;
        free(op);
        mxp__error_oom("registry op");
        return NULL;
    }
    r->ops = v;
    op->pack = pack;
    if (map_put(op->name, op)) {
        free(op->name);
        free(op);
        return NULL;
    }
    r->ops[r->n_ops++] = op;
    return op;
}

int mxp__registry_add_alias_locked(struct mxp_op *op, const char *alias) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    for (int i = 0; i < op->n_aliases; i++)
        if (!strcmp(op->aliases[i], alias)) return MXP_OK;
    struct mxp_op *other = mxp__registry_find_op_locked(alias);
    if (other && other != op) {
        MXP_LOGW("plugin", "alias '%s' of op '%s' already names op '%s'; ignored", alias, op->name, other->name);
        return MXP_OK;
    }
    char **v = realloc(op->aliases, (size_t)(op->n_aliases + 1) * sizeof *v);
    if (!v) return mxp__error_oom("alias");
    op->aliases = v;
    if (!(v[op->n_aliases] = strdup(alias))) return mxp__error_oom("alias");
    op->n_aliases++;
    return map_put(v[op->n_aliases - 1], op);
}

mxp_impl_entry *mxp__registry_find_impl_locked(struct mxp_op *op, const char *name, const char *device) {
    MXP_ASSERT(mxp__registry_held());
    for (int i = 0; i < op->n_impls; i++)
        if (!strcmp(op->impls[i]->name, name) && !strcmp(op->impls[i]->device, device ? device : "cpu"))
            return op->impls[i];
    return NULL;
}

/* ------------------------------------------------------------ retiring (reload_ops.c) */
static int push_ptr(void ***v, int *n, void *x) {
    void **nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return mxp__error_oom("retired registry entries");
    nv[(*n)++] = x;
    *v = nv;
    return MXP_OK;
}

/* The map holds keys owned by the entries: rebuild it from the live ops. */
static void map_rebuild_locked(void) {
    mxp_registry *r = &mxp__g_reg;
    memset(r->map, 0, r->map_cap * sizeof *r->map);
    r->map_used = 0;
    for (int i = 0; i < r->n_ops; i++) {
        map_put(r->ops[i]->name, r->ops[i]);
        for (int a = 0; a < r->ops[i]->n_aliases; a++) map_put(r->ops[i]->aliases[a], r->ops[i]);
    }
}

void mxp__registry_retire_op_locked(struct mxp_op *op) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    mxp_registry *r = &mxp__g_reg;
    /* Without room in the retired list the entry stays live (still found,
     * reporting that its pack does not define it): never lost or freed. */
    if (push_ptr((void ***)&r->retired_ops, &r->n_retired_ops, op)) return;
    int w = 0;
    for (int i = 0; i < r->n_ops; i++)
        if (r->ops[i] != op) r->ops[w++] = r->ops[i];
    r->n_ops = w;
    op->removed = 1;
    map_rebuild_locked();
}

void mxp__registry_retire_impl_locked(struct mxp_op *op, mxp_impl_entry *e) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    mxp_registry *r = &mxp__g_reg;
    if (push_ptr((void ***)&r->retired_impls, &r->n_retired_impls, e)) return;
    int w = 0;
    for (int i = 0; i < op->n_impls; i++)
        if (op->impls[i] != e) op->impls[w++] = op->impls[i];
    op->n_impls = w;
}

struct mxp_op *mxp__registry_unretire_op_locked(const char *name, mxp_pack *p) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    mxp_registry *r = &mxp__g_reg;
    for (int i = 0; i < r->n_retired_ops; i++) {
        struct mxp_op *op = r->retired_ops[i];
        if (op->pack != p || strcmp(op->name, name)) continue;
        if (push_ptr((void ***)&r->ops, &r->n_ops, op)) return NULL;
        r->retired_ops[i] = r->retired_ops[--r->n_retired_ops];
        op->removed = 0;
        if (map_put(op->name, op)) return op;
        for (int a = 0; a < op->n_aliases; a++)
            if (!mxp__registry_find_op_locked(op->aliases[a])) map_put(op->aliases[a], op);
        return op;
    }
    return NULL;
}

int mxp__registry_retired_pack(const char *name, char *pack, size_t cap) {
    int found = 0;
    mxp__registry_rdlock();
    for (int i = mxp__g_reg.n_retired_ops - 1; i >= 0 && !found; i--) {
        const struct mxp_op *op = mxp__g_reg.retired_ops[i];
        found = !strcmp(op->name, name);
        for (int a = 0; a < op->n_aliases && !found; a++) found = !strcmp(op->aliases[a], name);
        if (found) snprintf(pack, cap, "%s", op->pack ? op->pack->man->name : "?");
    }
    mxp__registry_unlock();
    return found;
}

mxp_impl_entry *mxp__registry_add_impl_locked(struct mxp_op *op, const char *name, const char *device,
                                              int rank, mxp_pack *pack) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    mxp_impl_entry *e = calloc(1, sizeof *e);
    mxp_impl_entry **v = realloc(op->impls, (size_t)(op->n_impls + 1) * sizeof *v);
    if (v) op->impls = v;
    if (!e || !v || !(e->name = strdup(name)) || !(e->device = strdup(device ? device : "cpu"))) {
        if (e) free(e->name);
        free(e);
        mxp__error_oom("impl entry");
        return NULL;
    }
    e->op = op;
    e->rank = rank;
    e->pack = pack;
    op->impls[op->n_impls++] = e;
    return e;
}

void mxp__pack_set_state(mxp_pack *p, int state, const char *fmt, ...) {
    mxp__registry_wrlock();
    p->state = state;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->reason, sizeof p->reason, fmt, ap);
        va_end(ap);
    } else {
        p->reason[0] = '\0';
    }
    mxp__registry_unlock();
}

/* ------------------------------------------------------------ manifests */
static int add_pack_locked(mxp_man_pack *mp, const char *manifest_path) {
    mxp_registry *r = &mxp__g_reg;
    mxp_pack *dup = mxp__registry_find_pack_locked(mp->name);
    if (dup) {
        /* Across manifests this is the documented override rule; within one
         * file it is a mistake in that file. */
        if (!strcmp(dup->manifest_path, manifest_path)) {
            MXP_LOGE("plugin", "%s:%d: pack '%s' is listed twice in this manifest (first at line %d); "
                     "the duplicate entry is ignored", manifest_path, mp->line, mp->name, dup->man->line);
            return mxp__error(MXP_EEXIST, "%s:%d: pack '%s' is listed twice in this manifest (first at line %d)",
                              manifest_path, mp->line, mp->name, dup->man->line);
        }
        MXP_LOGW("plugin", "pack '%s' in %s:%d is already provided by %s (%s); the first found wins, "
                 "this duplicate is ignored", mp->name, manifest_path, mp->line, dup->manifest_path,
                 dup->man->library);
        return MXP_OK;
    }
    mxp_pack *p = calloc(1, sizeof *p);
    mxp_pack **v = realloc(r->packs, (size_t)(r->n_packs + 1) * sizeof *v);
    if (v) r->packs = v;
    if (!p || !v) {
        free(p);
        return mxp__error_oom("pack");
    }
    p->man = mp;
    p->manifest_path = (char *)manifest_path;
    p->state = PACK_NOT_LOADED;
    atomic_init(&p->pins, 0);
    atomic_init(&p->reloading, 0);
    r->packs[r->n_packs++] = p;
    char why[512];
    if (!mxp__discover_pack_allowed(mp->name)) {
        p->state = PACK_UNAVAILABLE;
        snprintf(p->reason, sizeof p->reason, "excluded by MXP_PACKS");
    } else if (!mxp__requires_met(mp, why, sizeof why)) {
        p->state = PACK_UNAVAILABLE;
        snprintf(p->reason, sizeof p->reason, "%s", why);
    }
    for (int i = 0; i < mp->n_ops; i++) {
        mxp_man_op *mo = &mp->ops[i];
        struct mxp_op *op = mxp__registry_find_op_locked(mo->name);
        if (op && op->pack && op->pack != p) {
            MXP_LOGW("plugin", "op '%s' is defined by packs '%s' and '%s' (%s); the first found wins",
                     mo->name, op->pack->man->name, mp->name, manifest_path);
            continue;
        }
        if (!op && !(op = mxp__registry_add_op_locked(mo->name, p))) return MXP_ENOMEM;
        op->pack = p;
        for (int a = 0; a < mo->n_aliases; a++) {
            int rc = mxp__registry_add_alias_locked(op, mo->aliases[a]);
            if (rc) return rc;
        }
        for (int k = 0; k < mo->n_impls; k++) {
            mxp_man_impl *mi = &mo->impls[k];
            mxp_impl_entry *e = mxp__registry_find_impl_locked(op, mi->name, mi->device);
            if (e) continue;
            if (!(e = mxp__registry_add_impl_locked(op, mi->name, mi->device, mi->rank, p))) return MXP_ENOMEM;
            e->declared = 1;
        }
    }
    for (int k = 0; k < mp->n_impls; k++) {
        mxp_man_impl *mi = &mp->impls[k];
        struct mxp_op *op = mxp__registry_find_op_locked(mi->op);
        if (!op && !(op = mxp__registry_add_op_locked(mi->op, NULL))) return MXP_ENOMEM;
        mxp_impl_entry *e = mxp__registry_find_impl_locked(op, mi->name, mi->device);
        if (e) {
            MXP_LOGW("plugin", "impl '%s' (%s) of op '%s' is provided by packs '%s' and '%s'; the first wins",
                     mi->name, mi->device, mi->op, e->pack->man->name, mp->name);
            continue;
        }
        if (!(e = mxp__registry_add_impl_locked(op, mi->name, mi->device, mi->rank, p))) return MXP_ENOMEM;
        e->declared = 1;
    }
    return MXP_OK;
}

int mxp__registry_add_manifest(mxp_manifest *m) {
    mxp_registry *r = &mxp__g_reg;
    mxp__registry_wrlock();
    mxp_manifest **v = realloc(r->manifests, (size_t)(r->n_manifests + 1) * sizeof *v);
    if (!v) {
        mxp__registry_unlock();
        mxp__manifest_free(m);
        return mxp__error_oom("manifest list");
    }
    r->manifests = v;
    r->manifests[r->n_manifests++] = m;
    int rc = MXP_OK;
    char msg[1024] = "";
    for (int i = 0; i < m->n_packs; i++) {
        int r1 = add_pack_locked(&m->packs[i], m->path);
        if (r1 && !rc) {
            rc = r1;
            snprintf(msg, sizeof msg, "%s", mxp_last_error());
        }
    }
    mxp__registry_unlock();
    if (rc) {
        mxp__registry_bump();
        return mxp__error(rc, "%s", msg);
    }
    mxp__registry_bump();
    return rc;
}

int mxp_registry_add_manifest(const char *path) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    mxp_manifest *m;
    rc = mxp__manifest_parse_file(path, &m);
    if (rc) return rc;
    int rc_add = mxp__registry_add_manifest(m);
    char msg[1024] = "";
    if (rc_add) snprintf(msg, sizeof msg, "%s", mxp_last_error());
    if (rc_add == MXP_ENOMEM) return rc_add;
    /* Eager packs of this manifest. */
    mxp__registry_rdlock();
    int n = mxp__g_reg.n_packs;
    mxp__registry_unlock();
    for (int i = 0; i < n; i++) {
        mxp__registry_rdlock();
        mxp_pack *p = mxp__g_reg.packs[i];
        int eager = p->man->eager && p->state == PACK_NOT_LOADED && !strcmp(p->manifest_path, m->path);
        mxp__registry_unlock();
        if (eager && mxp__pack_load(p))
            MXP_LOGW("plugin", "eager pack '%s': %s", p->man->name, mxp_last_error());
    }
    if (rc_add) return mxp__error(rc_add, "%s", msg);
    return MXP_OK;
}

/* ------------------------------------------------------------ reloads */
/* Strings handed out by mxp_pack_version stay valid until shutdown, also
 * across reloads (an application may hold one). */
static char **g_versions;
static int g_n_versions;

void mxp__pack_set_loaded_version_locked(mxp_pack *p, const char *version) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    if (!version) version = "";
    for (int i = 0; i < g_n_versions; i++)
        if (!strcmp(g_versions[i], version)) {
            p->loaded_version = g_versions[i];
            return;
        }
    char **v = realloc(g_versions, (size_t)(g_n_versions + 1) * sizeof *v);
    char *s = strdup(version);
    if (v) g_versions = v;
    if (!v || !s) {
        free(s);
        return; /* keep the previous one: a version string is not worth failing for */
    }
    g_versions[g_n_versions++] = s;
    p->loaded_version = s;
}

int mxp__registry_keep_manifest(mxp_manifest *m) {
    mxp_registry *r = &mxp__g_reg;
    mxp__registry_wrlock();
    mxp_manifest **v = realloc(r->manifests, (size_t)(r->n_manifests + 1) * sizeof *v);
    if (v) {
        r->manifests = v;
        r->manifests[r->n_manifests++] = m;
    }
    mxp__registry_unlock();
    if (!v) {
        mxp__manifest_free(m);
        return mxp__error_oom("manifest list");
    }
    return MXP_OK;
}

/* ------------------------------------------------------------ init/shutdown */
/* Set on the thread running discovery: eager packs it loads call back into
 * the registry, which must not wait for the init in progress. */
static _Thread_local int tl_in_init;

int mxp__registry_ensure(void) {
    if (atomic_load_explicit(&g_init_done, memory_order_acquire) || tl_in_init) return MXP_OK;
    return mxp_registry_init();
}

int mxp_registry_init(void) {
    if (tl_in_init) return MXP_OK;
    pthread_mutex_lock(&g_init_lock);
    if (atomic_load(&g_init_done)) {
        pthread_mutex_unlock(&g_init_lock);
        return MXP_OK;
    }
    /* Other threads wait on g_init_lock until discovery is complete; only
     * then is "done" published, so no lookup sees a half-filled registry. */
    tl_in_init = 1;
    mxp__g_reg.initialized = 1;
    int rc = mxp__discover_all();
    atomic_store_explicit(&g_init_done, 1, memory_order_release);
    tl_in_init = 0;
    pthread_mutex_unlock(&g_init_lock);
    return rc;
}

void mxp_registry_shutdown(void) {
    /* Queued engine work runs pack code and reads impl records: let it all
     * finish before fini and the frees below (issue 12: a fit that failed
     * with initializers still queued crashed here).  From inside an engine
     * function the wait would deadlock, so shutdown is refused. */
    if (mxp__engine_drain()) {
        MXP_LOGE("plugin", "mxp_registry_shutdown: %s; registry left as it is", mxp_last_error());
        return;
    }
    /* Idle holders (bound executors, the invoke caches of threads) keep
     * instances of the packs unloaded below: they let go now, while the
     * packs' destroy callbacks can still run. */
    mxp__holders_revoke_idle();
    pthread_mutex_lock(&g_init_lock);
    if (!atomic_load(&g_init_done)) {
        pthread_mutex_unlock(&g_init_lock);
        return;
    }
    mxp_registry *r = &mxp__g_reg;
    mxp__registry_load_lock();
    for (int i = r->n_packs - 1; i >= 0; i--)
        if (r->packs[i]->state == PACK_LOADED) mxp__pack_unload_locked(r->packs[i], 0);
    mxp__registry_wrlock();
    /* Retired entries are freed with the live ones. */
    for (int i = 0; i < r->n_retired_impls; i++) {
        free(r->retired_impls[i]->name);
        free(r->retired_impls[i]->device);
        free(r->retired_impls[i]);
    }
    free(r->retired_impls);
    r->retired_impls = NULL;
    r->n_retired_impls = 0;
    for (int i = 0; i < r->n_retired_ops; i++) push_ptr((void ***)&r->ops, &r->n_ops, r->retired_ops[i]);
    free(r->retired_ops);
    r->retired_ops = NULL;
    r->n_retired_ops = 0;
    for (int i = 0; i < r->n_ops; i++) {
        struct mxp_op *op = r->ops[i];
        for (int k = 0; k < op->n_impls; k++) {
            free(op->impls[k]->name);
            free(op->impls[k]->device);
            free(op->impls[k]);
        }
        free(op->impls);
        for (int a = 0; a < op->n_aliases; a++) free(op->aliases[a]);
        free(op->aliases);
        for (int k = 0; k < op->n_ptext; k++) mxp__param_text_clear(&op->ptext[k]);
        free(op->ptext);
        free(op->doc);
        free(op->api_policy);
        free(op->name);
        free(op);
    }
    free(r->ops);
    for (int i = 0; i < r->n_packs; i++) free(r->packs[i]);
    free(r->packs);
    for (int i = 0; i < r->n_manifests; i++) mxp__manifest_free(r->manifests[i]);
    free(r->manifests);
    for (int i = 0; i < g_n_versions; i++) free(g_versions[i]);
    free(g_versions);
    g_versions = NULL;
    g_n_versions = 0;
    free(r->map);
    free(r->features);
    r->ops = NULL; r->n_ops = 0;
    r->packs = NULL; r->n_packs = 0;
    r->manifests = NULL; r->n_manifests = 0;
    r->map = NULL; r->map_cap = r->map_used = 0;
    r->features = NULL; r->n_features = 0;
    r->next_dev_type = MXP_DEV_FIRST_DYNAMIC;
    r->initialized = 0;
    mxp__registry_unlock();
    mxp__registry_load_unlock();
    mxp__select_reset();
    mxp__feature_cache_clear();
    atomic_store(&g_init_done, 0);
    mxp__registry_bump();
    pthread_mutex_unlock(&g_init_lock);
}

/* ------------------------------------------------------------ features */
int mxp__registry_feature(int kind, const char *name, const void **out_def, mxp_pack **out_pack) {
    *out_def = NULL;
    if (out_pack) *out_pack = NULL;
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    static const char *kinds[] = {"", "device", "kvstore", "iterator"};
    for (int attempt = 0; attempt < 2; attempt++) {
        mxp_pack *decl = NULL;
        mxp__registry_rdlock();
        for (int i = 0; i < mxp__g_reg.n_features; i++) {
            if (mxp__g_reg.features[i].kind == kind && !strcmp(mxp__g_reg.features[i].name, name)) {
                *out_def = mxp__g_reg.features[i].def;
                if (out_pack) *out_pack = mxp__g_reg.features[i].pack;
                mxp__registry_unlock();
                return MXP_OK;
            }
        }
        for (int i = 0; i < mxp__g_reg.n_packs && !decl; i++) {
            mxp_man_pack *m = mxp__g_reg.packs[i]->man;
            char **v = kind == MXP_FEATURE_DEVICE ? m->devices : kind == MXP_FEATURE_KVSTORE ? m->kvstores : m->iterators;
            int n = kind == MXP_FEATURE_DEVICE ? m->n_devices : kind == MXP_FEATURE_KVSTORE ? m->n_kvstores : m->n_iterators;
            for (int k = 0; k < n; k++)
                if (!strcmp(v[k], name)) decl = mxp__g_reg.packs[i];
        }
        mxp__registry_unlock();
        if (!decl || attempt) break;
        rc = mxp__pack_load(decl);
        if (rc) return mxp__error_prefix(rc, "%s '%s'", kinds[kind], name);
    }
    return mxp__error(MXP_ENOENT, "no %s named '%s' in any manifest or loaded pack", kinds[kind], name);
}

int32_t mxp__registry_device_type(const char *name) {
    if (!name) return MXP_DEV_UNKNOWN;
    if (!strcmp(name, "cpu")) return MXP_DEV_CPU;
    if (!strcmp(name, "cpu_pinned")) return MXP_DEV_CPU_PINNED;
    if (!strcmp(name, "cpu_shared")) return MXP_DEV_CPU_SHARED;
    const void *def;
    mxp_pack *p;
    if (mxp__registry_feature(MXP_FEATURE_DEVICE, name, &def, &p) == MXP_OK) {
        int32_t t = MXP_DEV_UNKNOWN;
        mxp__registry_rdlock();
        for (int i = 0; i < mxp__g_reg.n_features; i++)
            if (mxp__g_reg.features[i].def == def) t = mxp__g_reg.features[i].dev_type;
        mxp__registry_unlock();
        return t;
    }
    mxp__error_clear();
    if (!strcmp(name, "gpu")) return MXP_DEV_GPU;
    return MXP_DEV_UNKNOWN;
}

const char *mxp__device_name(int32_t type) {
    switch (type) {
    case MXP_DEV_CPU: return "cpu";
    case MXP_DEV_GPU: return "gpu";
    case MXP_DEV_CPU_PINNED: return "cpu_pinned";
    case MXP_DEV_CPU_SHARED: return "cpu_shared";
    default: break;
    }
    const char *n = "unknown";
    mxp__registry_rdlock();
    for (int i = 0; i < mxp__g_reg.n_features; i++)
        if (mxp__g_reg.features[i].kind == MXP_FEATURE_DEVICE && mxp__g_reg.features[i].dev_type == type)
            n = mxp__g_reg.features[i].name;
    mxp__registry_unlock();
    return n;
}

/* ------------------------------------------------------------ public: packs */
int mxp_pack_count(void) {
    if (mxp__registry_ensure()) return 0;
    mxp__registry_rdlock();
    int n = mxp__g_reg.n_packs;
    mxp__registry_unlock();
    return n;
}

const mxp_pack *mxp_pack_at(int index) {
    if (mxp__registry_ensure()) return NULL;
    mxp__registry_rdlock();
    const mxp_pack *p = (index >= 0 && index < mxp__g_reg.n_packs) ? mxp__g_reg.packs[index] : NULL;
    mxp__registry_unlock();
    return p;
}

const mxp_pack *mxp_pack_find(const char *name) {
    if (!name || mxp__registry_ensure()) return NULL;
    mxp__registry_rdlock();
    const mxp_pack *p = mxp__registry_find_pack_locked(name);
    mxp__registry_unlock();
    return p;
}

const char *mxp_pack_name(const mxp_pack *p) { return p ? p->man->name : NULL; }
const char *mxp_pack_version(const mxp_pack *p) {
    if (!p) return NULL;
    mxp__registry_rdlock();
    const char *v = p->state == PACK_LOADED && p->loaded_version ? p->loaded_version
                    : p->man->version ? p->man->version : "";
    mxp__registry_unlock();
    return v;
}
const char *mxp_pack_library(const mxp_pack *p) { return p ? p->man->library : NULL; }
const char *mxp_pack_manifest(const mxp_pack *p) { return p ? p->manifest_path : NULL; }

void mxp_pack_abi(const mxp_pack *p, int *out_major, int *out_minor, int *out_min_host_minor) {
    int ma = -1, mi = -1, mh = -1;
    if (p) {
        mxp__registry_rdlock();
        if (p->state == PACK_LOADED || p->desc_major) {
            ma = p->desc_major; mi = p->desc_minor; mh = p->desc_min_host_minor;
        } else {
            ma = p->man->abi_major; mi = p->man->abi_minor; mh = p->man->min_host_minor;
        }
        mxp__registry_unlock();
    }
    if (out_major) *out_major = ma;
    if (out_minor) *out_minor = mi;
    if (out_min_host_minor) *out_min_host_minor = mh;
}

int mxp_pack_state(const mxp_pack *p, const char **out_reason) {
    if (out_reason) *out_reason = "";
    if (!p) return mxp__error(MXP_EMISUSE, "mxp_pack_state: NULL pack");
    mxp__registry_rdlock();
    int s = p->state == PACK_LOADING ? PACK_NOT_LOADED : p->state;
    if (out_reason && (s == PACK_FAILED || s == PACK_UNAVAILABLE)) *out_reason = p->reason;
    mxp__registry_unlock();
    return s;
}

int mxp_pack_is_eager(const mxp_pack *p) { return p ? p->man->eager : 0; }

int mxp_pack_load(const char *name) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    if (!name) return mxp__error(MXP_EMISUSE, "mxp_pack_load: NULL name");
    mxp__registry_rdlock();
    mxp_pack *p = mxp__registry_find_pack_locked(name);
    mxp__registry_unlock();
    if (!p) return mxp__error(MXP_ENOENT, "pack '%s': not in any manifest", name);
    return mxp__pack_load(p);
}

/* ------------------------------------------------------------ public: ops */
int mxp_op_count(void) {
    if (mxp__registry_ensure()) return 0;
    mxp__registry_rdlock();
    int n = mxp__g_reg.n_ops;
    mxp__registry_unlock();
    return n;
}

const mxp_op *mxp_op_at(int index) {
    if (mxp__registry_ensure()) return NULL;
    mxp__registry_rdlock();
    const mxp_op *op = (index >= 0 && index < mxp__g_reg.n_ops) ? mxp__g_reg.ops[index] : NULL;
    mxp__registry_unlock();
    return op;
}

const mxp_op *mxp_op_find(const char *name) { return name ? mxp__registry_find_op(name) : NULL; }
const char *mxp_op_name(const mxp_op *op) { return op ? op->name : NULL; }
const char *mxp_op_pack(const mxp_op *op) { return (op && op->pack) ? op->pack->man->name : NULL; }

int mxp_op_alias_count(const mxp_op *op) {
    if (!op) return 0;
    mxp__registry_rdlock();
    int n = op->n_aliases;
    mxp__registry_unlock();
    return n;
}

const char *mxp_op_alias_at(const mxp_op *op, int i) {
    if (!op) return NULL;
    mxp__registry_rdlock();
    const char *s = (i >= 0 && i < op->n_aliases) ? op->aliases[i] : NULL;
    mxp__registry_unlock();
    return s;
}

int mxp_op_impl_count(const mxp_op *op) {
    if (!op) return 0;
    mxp__registry_rdlock();
    int n = op->n_impls;
    mxp__registry_unlock();
    return n;
}

static const mxp_impl_entry *impl_at(const mxp_op *op, int i) {
    if (!op) return NULL;
    mxp__registry_rdlock();
    const mxp_impl_entry *e = (i >= 0 && i < op->n_impls) ? op->impls[i] : NULL;
    mxp__registry_unlock();
    return e;
}
const char *mxp_op_impl_name(const mxp_op *op, int i) { const mxp_impl_entry *e = impl_at(op, i); return e ? e->name : NULL; }
const char *mxp_op_impl_device(const mxp_op *op, int i) { const mxp_impl_entry *e = impl_at(op, i); return e ? e->device : NULL; }
const char *mxp_op_impl_pack(const mxp_op *op, int i) { const mxp_impl_entry *e = impl_at(op, i); return e ? e->pack->man->name : NULL; }
int mxp_op_impl_rank(const mxp_op *op, int i) { const mxp_impl_entry *e = impl_at(op, i); return e ? e->rank : 0; }

int mxp_op_impl_stats(const mxp_op *op, int i, uint64_t *out_forward_calls, uint64_t *out_backward_calls,
                      double *out_forward_ms, double *out_backward_ms) {
    if (out_forward_calls) *out_forward_calls = 0;
    if (out_backward_calls) *out_backward_calls = 0;
    if (out_forward_ms) *out_forward_ms = 0;
    if (out_backward_ms) *out_backward_ms = 0;
    mxp_impl_entry *e = (mxp_impl_entry *)impl_at(op, i);
    if (!e) return mxp__error(MXP_EINVAL, "mxp_op_impl_stats: no implementation %d", i);
    if (out_forward_calls) *out_forward_calls = atomic_load(&e->calls[0]);
    if (out_backward_calls) *out_backward_calls = atomic_load(&e->calls[1]);
    if (out_forward_ms) *out_forward_ms = (double)atomic_load(&e->nanos[0]) / 1e6;
    if (out_backward_ms) *out_backward_ms = (double)atomic_load(&e->nanos[1]) / 1e6;
    return MXP_OK;
}

int mxp_op_load(const mxp_op *op) {
    const mxp_op_def *def;
    if (!op) return mxp__error(MXP_EMISUSE, "mxp_op_load: NULL op");
    return mxp__op_ensure_def((struct mxp_op *)op, &def);
}

void mxp__registry_cache_schema_locked(struct mxp_op *op) {
    MXP_ASSERT(mxp__registry_held_exclusive());
    const mxp_op_def *def = op->def;
    if (!def) return;
    free(op->doc);
    op->doc = strdup(def->doc ? def->doc : "");
    for (int k = 0; k < op->n_ptext; k++) mxp__param_text_clear(&op->ptext[k]);
    free(op->ptext);
    op->ptext = NULL;
    op->n_ptext = 0;
    if (!def->n_params) return;
    op->ptext = calloc(def->n_params, sizeof *op->ptext);
    if (!op->ptext) return;
    op->n_ptext = (int)def->n_params;
    for (uint32_t i = 0; i < def->n_params; i++)
        /* A failed fill leaves that entry's strings NULL, shown as empty. */
        (void)mxp__param_text_fill(&op->ptext[i], mxp__param_def_at(def->params, i));
}

const char *mxp_op_doc(const mxp_op *op) {
    const mxp_op_def *def;
    if (!op) { mxp__error(MXP_EMISUSE, "mxp_op_doc: NULL op"); return NULL; }
    if (mxp__op_ensure_def((struct mxp_op *)op, &def)) return NULL;
    return op->doc ? op->doc : "";
}

int mxp_op_param_count(const mxp_op *op) {
    const mxp_op_def *def;
    if (!op) return mxp__error(MXP_EMISUSE, "mxp_op_param_count: NULL op"), -1;
    if (mxp__op_ensure_def((struct mxp_op *)op, &def)) return -1;
    return op->n_ptext;
}

int mxp_op_param_at(const mxp_op *op, int index, const char **out_name, const char **out_type,
                    const char **out_default, const char **out_range, const char **out_choices,
                    const char **out_doc) {
    mxp__param_text_out(NULL, out_name, out_type, out_default, out_range, out_choices, out_doc);
    const mxp_op_def *def;
    if (!op) return mxp__error(MXP_EMISUSE, "mxp_op_param_at: NULL op");
    int rc = mxp__op_ensure_def((struct mxp_op *)op, &def);
    if (rc) return rc;
    if (index < 0 || index >= op->n_ptext)
        return mxp__error(MXP_EINVAL, "op '%s': no parameter #%d (it has %d)", op->name, index, op->n_ptext);
    const mxp_param_text *t = &op->ptext[index];
    mxp__param_text_out(t, out_name, out_type, out_default, out_range, out_choices, out_doc);
    return MXP_OK;
}
