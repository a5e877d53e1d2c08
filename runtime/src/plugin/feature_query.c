/* feature_query.c — the public face of the registry's other kinds:
 * iterators, kvstore types and devices (mxp_feature_*), so `mxplug list
 * --kind iter` and `mxplug info MNISTIter` show them like ops.
 *
 * Names come from the manifests (nothing is opened) plus the runtime's own
 * kvstore types and the cpu device.  A description (doc, and for iterators
 * the parameter schema) loads the providing pack and is copied into a
 * record cached per (kind, name); a reload makes a fresh record at the next
 * describe and retires the old one, so strings already returned stay valid
 * until mxp_registry_shutdown (mxp__feature_cache_clear frees them).
 * Not here: finding and loading a feature's def (registry.c). */
#include "plugin/plugin_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct builtin_feature {
    int kind;
    const char *name, *doc;
} builtin_feature;

static const builtin_feature g_builtins[] = {
    {MXP_FEATURE_KVSTORE, "local",
     "In this process: the arrays pushed for a key are summed on the CPU and the updater (if set) runs on the sum."},
    {MXP_FEATURE_KVSTORE, "device",
     "Same as 'local' until a device pack brings its own reduction (MXNet's name for GPU-side sums)."},
    {MXP_FEATURE_DEVICE, "cpu", "The host CPU (one unit); always present."},
};
enum { N_BUILTINS = (int)(sizeof g_builtins / sizeof g_builtins[0]) };

typedef struct feature_record {
    int kind;
    char *name, *pack, *doc;
    mxp_param_text *params;
    int n_params;
    uint64_t generation;     /* registry generation it was read at        */
    int retired;             /* replaced after a reload; kept for pointers */
    struct feature_record *next;
} feature_record;

static pthread_mutex_t g_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static feature_record *g_records;

static int kind_of(const char *kind) {
    if (!kind) return 0;
    if (!strcmp(kind, "iterator") || !strcmp(kind, "iter")) return MXP_FEATURE_ITER;
    if (!strcmp(kind, "kvstore")) return MXP_FEATURE_KVSTORE;
    if (!strcmp(kind, "device")) return MXP_FEATURE_DEVICE;
    return 0;
}

static int bad_kind(const char *fn, const char *kind) {
    return mxp__error(MXP_EINVAL, "%s: unknown kind '%s' (expected 'iterator', 'kvstore' or 'device')", fn,
                      kind ? kind : "(null)");
}

static void manifest_names(const mxp_man_pack *m, int kind, char ***out, int *n) {
    if (kind == MXP_FEATURE_DEVICE) { *out = m->devices; *n = m->n_devices; }
    else if (kind == MXP_FEATURE_KVSTORE) { *out = m->kvstores; *n = m->n_kvstores; }
    else { *out = m->iterators; *n = m->n_iterators; }
}

/* The index-th name of `kind`: built-ins first, then each pack's manifest
 * entry in discovery order.  Caller holds the registry read lock. */
static const char *name_at_locked(int kind, int index, const char **out_pack) {
    MXP_ASSERT(mxp__registry_held());
    int k = 0;
    for (int i = 0; i < N_BUILTINS; i++) {
        if (g_builtins[i].kind != kind) continue;
        if (k++ == index) { *out_pack = "runtime"; return g_builtins[i].name; }
    }
    for (int p = 0; p < mxp__g_reg.n_packs; p++) {
        const mxp_man_pack *m = mxp__g_reg.packs[p]->man;
        if (!m) continue;
        char **names;
        int n;
        manifest_names(m, kind, &names, &n);
        for (int i = 0; i < n; i++)
            if (k++ == index) { *out_pack = m->name; return names[i]; }
    }
    return NULL;
}

int mxp_feature_count(const char *kind) {
    int kd = kind_of(kind);
    if (!kd) return bad_kind("mxp_feature_count", kind), -1;
    if (mxp__registry_ensure()) return -1;
    mxp__registry_rdlock();
    int n = 0;
    const char *pack;
    while (name_at_locked(kd, n, &pack)) n++;
    mxp__registry_unlock();
    return n;
}

const char *mxp_feature_at(const char *kind, int index, const char **out_pack) {
    const char *pack = NULL;
    if (out_pack) *out_pack = NULL;
    int kd = kind_of(kind);
    if (!kd) return bad_kind("mxp_feature_at", kind), NULL;
    if (index < 0 || mxp__registry_ensure()) return NULL;
    mxp__registry_rdlock();
    const char *name = name_at_locked(kd, index, &pack);
    mxp__registry_unlock();
    if (name && out_pack) *out_pack = pack;
    return name;
}

static void record_free(feature_record *r) {
    free(r->name); free(r->pack); free(r->doc);
    for (int i = 0; i < r->n_params; i++) mxp__param_text_clear(&r->params[i]);
    free(r->params);
    free(r);
}

/* A new record for (kind, name), read from its def (loading the pack) or
 * from the built-in table. */
static int record_build(int kind, const char *name, feature_record **out) {
    *out = NULL;
    uint64_t gen = mxp_registry_generation();
    const char *doc = NULL, *pack = "runtime";
    const mxp_param_def *params = NULL;
    uint32_t n_params = 0;
    for (int i = 0; i < N_BUILTINS; i++)
        if (g_builtins[i].kind == kind && !strcmp(g_builtins[i].name, name)) doc = g_builtins[i].doc;
    if (!doc) {
        const void *def = NULL;
        mxp_pack *p = NULL;
        int rc = mxp__registry_feature(kind, name, &def, &p);
        if (rc) return rc;
        pack = p && p->man ? p->man->name : "?";
        if (kind == MXP_FEATURE_ITER) {
            const mxp_iter_def *d = def;
            doc = d->doc;
            params = d->params;
            n_params = d->n_params;
        } else if (kind == MXP_FEATURE_KVSTORE) {
            doc = ((const mxp_kvstore_def *)def)->doc;
        } else {
            doc = ((const mxp_device_def *)def)->doc;
        }
    }
    feature_record *r = calloc(1, sizeof *r);
    if (!r) return mxp__error(MXP_ENOMEM, "describing '%s': out of memory", name);
    r->kind = kind;
    r->generation = gen;
    r->name = strdup(name);
    r->pack = strdup(pack);
    r->doc = strdup(doc ? doc : "");
    r->params = n_params ? calloc(n_params, sizeof *r->params) : NULL;
    int rc = (!r->name || !r->pack || !r->doc || (n_params && !r->params))
                 ? mxp__error(MXP_ENOMEM, "describing '%s': out of memory", name) : MXP_OK;
    for (uint32_t i = 0; rc == MXP_OK && i < n_params; i++) {
        rc = mxp__param_text_fill(&r->params[i], mxp__param_def_at(params, i));
        if (rc == MXP_OK) r->n_params++;
    }
    if (rc) { record_free(r); return rc; }
    *out = r;
    return MXP_OK;
}

/* The current record for (kind, name), building it when missing or older
 * than the registry's generation. */
static int record_get(const char *fn, const char *kind, const char *name, feature_record **out) {
    *out = NULL;
    int kd = kind_of(kind);
    if (!kd) return bad_kind(fn, kind);
    if (!name) return mxp__error(MXP_EINVAL, "%s: NULL name", fn);
    uint64_t gen = mxp_registry_generation();
    pthread_mutex_lock(&g_cache_lock);
    for (feature_record *r = g_records; r; r = r->next)
        if (!r->retired && r->kind == kd && !strcmp(r->name, name) && r->generation == gen) {
            *out = r;
            pthread_mutex_unlock(&g_cache_lock);
            return MXP_OK;
        }
    pthread_mutex_unlock(&g_cache_lock);
    /* Built outside the cache lock: it may load a pack. */
    feature_record *fresh;
    int rc = record_build(kd, name, &fresh);
    if (rc) return rc;
    pthread_mutex_lock(&g_cache_lock);
    for (feature_record *r = g_records; r; r = r->next)
        if (!r->retired && r->kind == kd && !strcmp(r->name, name)) r->retired = 1;
    fresh->next = g_records;
    g_records = fresh;
    pthread_mutex_unlock(&g_cache_lock);
    *out = fresh;
    return MXP_OK;
}

int mxp_feature_describe(const char *kind, const char *name, const char **out_pack, const char **out_doc,
                         int *out_n_params) {
    if (out_pack) *out_pack = NULL;
    if (out_doc) *out_doc = NULL;
    if (out_n_params) *out_n_params = 0;
    feature_record *r;
    int rc = record_get("mxp_feature_describe", kind, name, &r);
    if (rc) return rc;
    if (out_pack) *out_pack = r->pack;
    if (out_doc) *out_doc = r->doc;
    if (out_n_params) *out_n_params = r->n_params;
    return MXP_OK;
}

int mxp_feature_param_at(const char *kind, const char *name, int index, const char **out_name,
                         const char **out_type, const char **out_default, const char **out_range,
                         const char **out_choices, const char **out_doc) {
    mxp__param_text_out(NULL, out_name, out_type, out_default, out_range, out_choices, out_doc);
    feature_record *r;
    int rc = record_get("mxp_feature_param_at", kind, name, &r);
    if (rc) return rc;
    if (index < 0 || index >= r->n_params)
        return mxp__error(MXP_EINVAL, "%s '%s': no parameter #%d (it has %d)", kind, name, index, r->n_params);
    const mxp_param_text *t = &r->params[index];
    mxp__param_text_out(t, out_name, out_type, out_default, out_range, out_choices, out_doc);
    return MXP_OK;
}

void mxp__feature_cache_clear(void) {
    pthread_mutex_lock(&g_cache_lock);
    feature_record *r = g_records;
    g_records = NULL;
    pthread_mutex_unlock(&g_cache_lock);
    while (r) {
        feature_record *next = r->next;
        record_free(r);
        r = next;
    }
}
