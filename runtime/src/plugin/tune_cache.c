/* tune_cache.c — the tune policy's cache file and its in-memory table:
 * $XDG_CACHE_HOME/mxplug/tune.yaml (else ~/.cache/mxplug/tune.yaml):
 *   version: 1
 *   entries:
 *     - op: Convolution
 *       signature: "Convolution|cpu|train=0|threads=2|..."
 *       choice: gemm
 *       times_ms: {direct: 1.234, gemm: 0.812}
 * Read through yaml_file.h once per (path, mtime); written after every new
 * result by merging the file's current entries with ours (ours win), into a
 * temporary file renamed over the old one, so readers never see half a
 * file.  A corrupt file is ignored with a warning naming file:line and is
 * rewritten at the next save.  Not here: signatures and the choice
 * (tune.c), timing (tune_time.c).
 * Thread-safe: g_tune_mu guards the table and the file. */
#include "plugin/plugin_impl.h"
#include "plugin/yaml_file.h"

#include <mxplug/fileio.h>

#include <yaml.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tune_table {
    mxp__tune_entry *v;
    int n;
} tune_table;

static pthread_mutex_t g_tune_mu = PTHREAD_MUTEX_INITIALIZER;
static tune_table g_tab;              /* entries read or made             */
static mxp__file_stamp g_tab_stamp;   /* file g_tab was read from         */

void mxp__tune_entry_free(mxp__tune_entry *e) {
    free(e->op);
    free(e->sig);
    free(e->choice);
    for (int i = 0; i < e->n_times; i++) free(e->names[i]);
    free(e->names);
    free(e->ms);
    memset(e, 0, sizeof *e);
}

static void table_clear(tune_table *t) {
    for (int i = 0; i < t->n; i++) mxp__tune_entry_free(&t->v[i]);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

static mxp__tune_entry *table_find(tune_table *t, const char *sig) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].sig, sig)) return &t->v[i];
    return NULL;
}

/* Deep copy of e into t (replacing an entry of the same signature). */
static int table_put(tune_table *t, const mxp__tune_entry *e) {
    mxp__tune_entry c = {0};
    c.op = strdup(e->op);
    c.sig = strdup(e->sig);
    c.choice = strdup(e->choice);
    c.names = calloc((size_t)e->n_times + 1, sizeof *c.names);
    c.ms = calloc((size_t)e->n_times + 1, sizeof *c.ms);
    int ok = c.op && c.sig && c.choice && c.names && c.ms;
    for (int i = 0; ok && i < e->n_times; i++) {
        if (!(c.names[i] = strdup(e->names[i]))) ok = 0;
        c.ms[i] = e->ms[i];
        c.n_times = i + 1;
    }
    if (!ok) {
        mxp__tune_entry_free(&c);
        return mxp__error_oom("tune cache");
    }
    mxp__tune_entry *old = table_find(t, e->sig);
    if (old) {
        mxp__tune_entry_free(old);
        *old = c;
        return MXP_OK;
    }
    mxp__tune_entry *v = realloc(t->v, ((size_t)t->n + 1) * sizeof *v);
    if (!v) {
        mxp__tune_entry_free(&c);
        return mxp__error_oom("tune cache");
    }
    t->v = v;
    t->v[t->n++] = c;
    return MXP_OK;
}

/* ------------------------------------------------------------ file */
int mxp__tune_cache_path(char *buf, size_t cap) {
    return mxp__user_file_path("XDG_CACHE_HOME", ".cache", "tune.yaml", buf, cap);
}

static const char *scalar(yaml_document_t *d, yaml_node_t *n) {
    (void)d;
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Parse one entry mapping into e (fields borrowed from the document are
 * copied by table_put).  Returns 0, or -1 with *bad the offending node. */
static int read_entry(yaml_document_t *d, yaml_node_t *m, tune_table *t, yaml_node_t **bad) {
    *bad = m;
    if (m->type != YAML_MAPPING_NODE) return -1;
    mxp__tune_entry e = {0};
    char *names[64];
    double ms[64];
    e.names = names;
    e.ms = ms;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key), *v = yaml_document_get_node(d, p->value);
        const char *ks = scalar(d, k);
        *bad = v;
        if (!ks) return -1;
        if (!strcmp(ks, "op")) e.op = (char *)scalar(d, v);
        else if (!strcmp(ks, "signature")) e.sig = (char *)scalar(d, v);
        else if (!strcmp(ks, "choice")) e.choice = (char *)scalar(d, v);
        else if (!strcmp(ks, "times_ms")) {
            if (v->type != YAML_MAPPING_NODE) return -1;
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
                yaml_node_t *qk = yaml_document_get_node(d, q->key), *qv = yaml_document_get_node(d, q->value);
                const char *name = scalar(d, qk), *val = scalar(d, qv);
                char *end;
                *bad = qv;
                if (!name || !val || e.n_times >= 64) return -1;
                double x = strtod(val, &end);
                if (end == val || *end) return -1;
                names[e.n_times] = (char *)name;
                ms[e.n_times++] = x;
            }
        }
    }
    *bad = m;
    if (!e.op || !e.sig || !e.choice || !*e.choice) return -1;
    return table_put(t, &e) ? -1 : 0;
}

/* Read path into t (cleared first).  Missing file: empty, 0.  Corrupt:
 * warning naming file:line, t left empty, returns 1. */
static int cache_read(const char *path, tune_table *t) {
    table_clear(t);
    yaml_document_t doc;
    int found = 0;
    if (mxp__yaml_file_load(path, "tune cache", 64u << 20, &doc, &found)) {
        MXP_LOGW("plugin", "%s; ignoring the file (it is rewritten at the next tune)", mxp_last_error());
        return 1;
    }
    if (!found) return 0;
    int bad = 0;
    size_t line = 0;
    const char *why = "";
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *badnode = root;
    if (!root) { /* empty file */
    } else if (root->type != YAML_MAPPING_NODE) {
        bad = 1;
        why = "the cache must be a mapping with 'version' and 'entries'";
    } else {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top && !bad; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
            const char *ks = scalar(&doc, k);
            badnode = v;
            if (ks && !strcmp(ks, "version")) {
                const char *vs = scalar(&doc, v);
                if (!vs || strcmp(vs, "1")) {
                    bad = 1;
                    why = "unknown cache version (expected 1)";
                }
            } else if (ks && !strcmp(ks, "entries")) {
                if (v->type == YAML_SCALAR_NODE && !v->data.scalar.length) continue;
                if (v->type != YAML_SEQUENCE_NODE) {
                    bad = 1;
                    why = "'entries' must be a list";
                    continue;
                }
                for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                    if (read_entry(&doc, yaml_document_get_node(&doc, *it), t, &badnode)) {
                        bad = 1;
                        why = "malformed entry (needs op, signature, choice and numeric times_ms)";
                        break;
                    }
                }
            }
        }
    }
    if (bad) {
        line = badnode ? badnode->start_mark.line + 1 : 1;
        MXP_LOGW("plugin", "tune cache %s:%zu: %s; ignoring the file (it is rewritten at the next tune)", path, line,
                 why);
        table_clear(t);
    }
    yaml_document_delete(&doc);
    return bad;
}

/* Make sure g_tab reflects the file (g_tune_mu held). */
static void cache_refresh(void) {
    char path[1024];
    if (mxp__tune_cache_path(path, sizeof path)) {
        if (g_tab_stamp.valid && g_tab_stamp.path[0]) table_clear(&g_tab);
        mxp__file_stamp_clear(&g_tab_stamp);
        g_tab_stamp.valid = 1; /* no file: nothing to re-read until a path appears */
        return;
    }
    int same_path = g_tab_stamp.valid && !strcmp(path, g_tab_stamp.path);
    if (!mxp__file_stamp_changed(&g_tab_stamp, path)) return;
    /* Entries made in this process under the same path survive a re-read
     * (another process rewrote the file): merge them back. */
    tune_table mine = {0};
    if (same_path) {
        mine = g_tab;
        g_tab.v = NULL;
        g_tab.n = 0;
    }
    cache_read(path, &g_tab);
    for (int i = 0; i < mine.n; i++)
        if (!table_find(&g_tab, mine.v[i].sig)) table_put(&g_tab, &mine.v[i]);
    table_clear(&mine);
}

/* The cache file's content: every entry of the table `vt`. */
static int cache_put(FILE *f, void *vt) {
    const tune_table *t = vt;
    fprintf(f, "# mxplug tune cache: the fastest implementation per op signature, written by\n"
               "# the 'tune' policy.  Safe to delete; entries are re-timed when missing.\n"
               "version: 1\nentries:%s\n", t->n ? "" : " []");
    int bad = 0;
    for (int i = 0; i < t->n; i++) {
        const mxp__tune_entry *e = &t->v[i];
        fputs("  - op: ", f);
        bad |= mxp__yaml_put_quoted(f, e->op);
        fputs("\n    signature: ", f);
        bad |= mxp__yaml_put_quoted(f, e->sig);
        fputs("\n    choice: ", f);
        bad |= mxp__yaml_put_quoted(f, e->choice);
        fputs("\n    times_ms: {", f);
        for (int k = 0; k < e->n_times; k++) {
            fputs(k ? ", " : "", f);
            bad |= mxp__yaml_put_quoted(f, e->names[k]);
            fprintf(f, ": %.6g", e->ms[k]);
        }
        fputs("}\n", f);
    }
    return bad ? mxp__error(MXP_EINVAL, "tune cache: an entry holds a string that is not UTF-8") : MXP_OK;
}

/* Merge the file's entries with g_tab and write atomically (g_tune_mu held). */
static int cache_write(void) {
    char path[1024];
    if (mxp__tune_cache_path(path, sizeof path))
        return mxp__error(MXP_EINVAL, "tune cache: neither XDG_CACHE_HOME nor HOME is set");
    tune_table disk = {0};
    cache_read(path, &disk);
    for (int i = 0; i < g_tab.n; i++) table_put(&disk, &g_tab.v[i]);
    int rc = mxp__mkdirs_for(path, "tune cache");
    if (!rc) rc = mxp_file_write_atomic(path, "tune cache", cache_put, &disk);
    table_clear(&disk);
    if (!rc) mxp__file_stamp_touch(&g_tab_stamp, path); /* our own write is not news */
    return rc;
}

void mxp__tune_reset(void) {
    pthread_mutex_lock(&g_tune_mu);
    table_clear(&g_tab);
    mxp__file_stamp_clear(&g_tab_stamp);
    pthread_mutex_unlock(&g_tune_mu);
}

/* ------------------------------------------------------------ interface */
int mxp__tune_cache_find(const char *sig, mxp__tune_entry *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g_tune_mu);
    cache_refresh();
    mxp__tune_entry *hit = table_find(&g_tab, sig);
    tune_table one = {0};
    int found = hit && table_put(&one, hit) == MXP_OK;
    pthread_mutex_unlock(&g_tune_mu);
    if (found) *out = one.v[0];
    free(one.v);
    return found;
}

int mxp__tune_cache_save(const mxp__tune_entry *e) {
    pthread_mutex_lock(&g_tune_mu);
    cache_refresh();
    int rc = table_put(&g_tab, e);
    if (!rc) rc = cache_write();
    pthread_mutex_unlock(&g_tune_mu);
    return rc;
}
