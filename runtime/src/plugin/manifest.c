/* manifest.c — parse a pack manifest (YAML, docs/manifest.md) into an
 * mxp_manifest, with libyaml's document API so every node keeps its
 * line:column for messages ("manifest.yaml:12:3: unknown key 'provdes'").
 *
 * Versioning: `manifest_version` (default 1) says which schema the file
 * follows.  For a version this runtime knows, an unknown key is an error
 * (most often a typo); for a newer version it is a warning, since the key
 * may be one the newer schema defines.  A top-level sequence is accepted as
 * a bare list of packs (the per-pack fragments in plugins/<pack>/).
 * Does not: check that files exist, or that packs are unique (discover.c
 * and registry.c do).  Library paths are made absolute against the
 * manifest's own directory. */
#include "plugin/plugin_impl.h"
#include "plugin/yaml_guard.h"

#include <yaml.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct pctx {
    yaml_document_t *doc;
    const char *file;
    int version;
} pctx;

static int node_err(pctx *c, yaml_node_t *n, const char *fmt, ...) MXP_PRINTF(3, 4);
static int node_err(pctx *c, yaml_node_t *n, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mxp__error(MXP_EFORMAT, "%s:%zu:%zu: %s", c->file, n ? n->start_mark.line + 1 : 0,
                      n ? n->start_mark.column + 1 : 0, msg);
}

static const char *scalar(yaml_node_t *n) {
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : NULL;
}

static int get_str(pctx *c, yaml_node_t *n, const char *key, char **out) {
    const char *s = scalar(n);
    if (!s) return node_err(c, n, "'%s' must be a string", key);
    free(*out);
    *out = strdup(s);
    if (!*out) return mxp__error_oom("manifest");
    return MXP_OK;
}

static int get_int(pctx *c, yaml_node_t *n, const char *key, int *out) {
    const char *s = scalar(n);
    if (!s || !*s) return node_err(c, n, "'%s' must be an integer", key);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < INT_MIN || v > INT_MAX)
        return node_err(c, n, "'%s' must be an integer, got '%s'", key, s);
    *out = (int)v;
    return MXP_OK;
}

static int get_bool(pctx *c, yaml_node_t *n, const char *key, int *out) {
    const char *s = scalar(n);
    if (s && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "yes"))) { *out = 1; return MXP_OK; }
    if (s && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "no"))) { *out = 0; return MXP_OK; }
    return node_err(c, n, "'%s' must be true or false", key);
}

/* A list of strings; a single scalar counts as a one-element list. */
static int get_strlist(pctx *c, yaml_node_t *n, const char *key, char ***out, int *out_n) {
    if (n->type == YAML_SCALAR_NODE) {
        char **v = realloc(*out, (size_t)(*out_n + 1) * sizeof *v);
        if (!v) return mxp__error_oom("manifest");
        *out = v;
        if (!(v[*out_n] = strdup(scalar(n)))) return mxp__error_oom("manifest");
        (*out_n)++;
        return MXP_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE) return node_err(c, n, "'%s' must be a list of strings", key);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(c->doc, *it);
        const char *s = scalar(e);
        if (!s || !*s) return node_err(c, e, "'%s' entries must be non-empty strings", key);
        char **v = realloc(*out, (size_t)(*out_n + 1) * sizeof *v);
        if (!v) return mxp__error_oom("manifest");
        *out = v;
        if (!(v[*out_n] = strdup(s))) return mxp__error_oom("manifest");
        (*out_n)++;
    }
    return MXP_OK;
}

/* Unknown key: error for a known schema version, warning for a newer one. */
static int unknown_key(pctx *c, yaml_node_t *k, const char *where) {
    if (c->version > MXP_MANIFEST_VERSION) {
        MXP_LOGW("plugin", "%s:%zu:%zu: key '%s' in %s is not in manifest_version %d (file says %d); ignored",
                 c->file, k->start_mark.line + 1, k->start_mark.column + 1, scalar(k) ? scalar(k) : "?",
                 where, MXP_MANIFEST_VERSION, c->version);
        return MXP_OK;
    }
    return node_err(c, k, "unknown key '%s' in %s", scalar(k) ? scalar(k) : "?", where);
}

#define FOR_PAIRS(c, n, kname, knode, vnode)                                                    \
    for (yaml_node_pair_t *pr_ = (n)->data.mapping.pairs.start; pr_ < (n)->data.mapping.pairs.top; \
         pr_++)                                                                                  \
        for (yaml_node_t *knode = yaml_document_get_node((c)->doc, pr_->key),                    \
                         *vnode = yaml_document_get_node((c)->doc, pr_->value);                  \
             knode; knode = NULL)                                                                \
            for (const char *kname = scalar(knode) ? scalar(knode) : ""; kname; kname = NULL)

/* A key given twice in one mapping is an error (YAML leaves it undefined). */
static int dup_keys(pctx *c, yaml_node_t *n) {
    for (yaml_node_pair_t *a = n->data.mapping.pairs.start; a < n->data.mapping.pairs.top; a++) {
        const char *ka = scalar(yaml_document_get_node(c->doc, a->key));
        if (!ka) return node_err(c, yaml_document_get_node(c->doc, a->key), "keys must be strings");
        for (yaml_node_pair_t *b = n->data.mapping.pairs.start; b < a; b++) {
            const char *kb = scalar(yaml_document_get_node(c->doc, b->key));
            if (kb && !strcmp(ka, kb))
                return node_err(c, yaml_document_get_node(c->doc, a->key), "duplicate key '%s'", ka);
        }
    }
    return MXP_OK;
}

static int parse_impl(pctx *c, yaml_node_t *n, mxp_man_impl *im, int need_op) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "an impl must be a mapping");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    int rc = MXP_OK;
    im->rank = 0;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "name")) rc = get_str(c, vn, k, &im->name);
        else if (!strcmp(k, "device")) rc = get_str(c, vn, k, &im->device);
        else if (!strcmp(k, "rank")) rc = get_int(c, vn, k, &im->rank);
        else if (need_op && !strcmp(k, "op")) rc = get_str(c, vn, k, &im->op);
        else rc = unknown_key(c, kn, "an impl");
    }
    if (rc) return rc;
    if (!im->name || !*im->name) return node_err(c, n, "impl without a 'name'");
    if (need_op && (!im->op || !*im->op)) return node_err(c, n, "impl '%s' without an 'op'", im->name);
    if (!im->device && !(im->device = strdup("cpu"))) return mxp__error_oom("manifest");
    return MXP_OK;
}

static int parse_impls(pctx *c, yaml_node_t *n, mxp_man_impl **out, int *out_n, int need_op) {
    if (n->type != YAML_SEQUENCE_NODE) return node_err(c, n, "'impls' must be a list");
    size_t cnt = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    mxp_man_impl *v = calloc(cnt ? cnt : 1, sizeof *v);
    if (!v) return mxp__error_oom("manifest");
    *out = v;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *e = yaml_document_get_node(c->doc, n->data.sequence.items.start[i]);
        *out_n = (int)i + 1;
        int rc = parse_impl(c, e, &v[i], need_op);
        if (rc) return rc;
    }
    return MXP_OK;
}

static int parse_op(pctx *c, yaml_node_t *n, mxp_man_op *op) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "an op must be a mapping");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    int rc = MXP_OK;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "name")) rc = get_str(c, vn, k, &op->name);
        else if (!strcmp(k, "aliases")) rc = get_strlist(c, vn, k, &op->aliases, &op->n_aliases);
        else if (!strcmp(k, "impls")) rc = parse_impls(c, vn, &op->impls, &op->n_impls, 0);
        else rc = unknown_key(c, kn, "an op");
    }
    if (rc) return rc;
    if (!op->name || !*op->name) return node_err(c, n, "op without a 'name'");
    for (int i = 0; i < op->n_impls; i++)
        if (!op->impls[i].op && !(op->impls[i].op = strdup(op->name))) return mxp__error_oom("manifest");
    return MXP_OK;
}

static int parse_provides(pctx *c, yaml_node_t *n, mxp_man_pack *p) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "'provides' must be a mapping");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    int rc = MXP_OK;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "ops")) {
            if (vn->type != YAML_SEQUENCE_NODE) { rc = node_err(c, vn, "'ops' must be a list"); break; }
            size_t cnt = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
            p->ops = calloc(cnt ? cnt : 1, sizeof *p->ops);
            if (!p->ops) { rc = mxp__error_oom("manifest"); break; }
            for (size_t i = 0; i < cnt && !rc; i++) {
                p->n_ops = (int)i + 1;
                rc = parse_op(c, yaml_document_get_node(c->doc, vn->data.sequence.items.start[i]), &p->ops[i]);
            }
        } else if (!strcmp(k, "impls")) rc = parse_impls(c, vn, &p->impls, &p->n_impls, 1);
        else if (!strcmp(k, "devices")) rc = get_strlist(c, vn, k, &p->devices, &p->n_devices);
        else if (!strcmp(k, "kvstores")) rc = get_strlist(c, vn, k, &p->kvstores, &p->n_kvstores);
        else if (!strcmp(k, "iterators")) rc = get_strlist(c, vn, k, &p->iterators, &p->n_iterators);
        else rc = unknown_key(c, kn, "'provides'");
    }
    return rc;
}

static int parse_requires(pctx *c, yaml_node_t *n, mxp_man_pack *p) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "'requires' must be a mapping");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    int rc = MXP_OK;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "cpu_features")) rc = get_strlist(c, vn, k, &p->cpu_features, &p->n_cpu_features);
        else if (!strcmp(k, "gpu")) rc = get_bool(c, vn, k, &p->need_gpu);
        else if (!strcmp(k, "cuda_driver")) rc = get_str(c, vn, k, &p->cuda_driver);
        else rc = unknown_key(c, kn, "'requires'");
    }
    return rc;
}

static int parse_abi(pctx *c, yaml_node_t *n, mxp_man_pack *p) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "'abi' must be a mapping {major, minor, min_host_minor}");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    int rc = MXP_OK;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "major")) rc = get_int(c, vn, k, &p->abi_major);
        else if (!strcmp(k, "minor")) rc = get_int(c, vn, k, &p->abi_minor);
        else if (!strcmp(k, "min_host_minor")) rc = get_int(c, vn, k, &p->min_host_minor);
        else rc = unknown_key(c, kn, "'abi'");
    }
    return rc;
}

static char *dir_of(const char *file) {
    char buf[PATH_MAX];
    const char *slash = strrchr(file, '/');
    if (!slash) {
        if (!getcwd(buf, sizeof buf)) return strdup(".");
        return strdup(buf);
    }
    size_t len = (size_t)(slash - file);
    char *d = strndup(file, len ? len : 1);
    if (!d) return NULL;
    if (d[0] != '/' && getcwd(buf, sizeof buf)) {
        size_t need = strlen(buf) + 1 + strlen(d) + 1;
        char *abs = malloc(need);
        if (abs) snprintf(abs, need, "%s/%s", buf, d);
        free(d);
        return abs;
    }
    return d;
}

static int parse_pack(pctx *c, yaml_node_t *n, mxp_man_pack *p, const char *dir) {
    if (n->type != YAML_MAPPING_NODE) return node_err(c, n, "a pack entry must be a mapping");
    if (dup_keys(c, n)) return MXP_EFORMAT;
    p->line = (int)n->start_mark.line + 1;
    p->column = (int)n->start_mark.column + 1;
    p->abi_major = p->abi_minor = p->min_host_minor = -1;
    int rc = MXP_OK;
    FOR_PAIRS(c, n, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "name")) rc = get_str(c, vn, k, &p->name);
        else if (!strcmp(k, "version")) rc = get_str(c, vn, k, &p->version);
        else if (!strcmp(k, "abi")) rc = parse_abi(c, vn, p);
        else if (!strcmp(k, "library")) rc = get_str(c, vn, k, &p->library_raw);
        else if (!strcmp(k, "sha256")) {
            rc = get_str(c, vn, k, &p->sha256);
            if (!rc) {
                size_t len = strlen(p->sha256);
                int ok = len == 64;
                for (size_t i = 0; ok && i < len; i++) {
                    char ch = p->sha256[i];
                    if (ch >= 'A' && ch <= 'F') p->sha256[i] = (char)(ch - 'A' + 'a');
                    else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) ok = 0;
                }
                if (!ok) rc = node_err(c, vn, "'sha256' must be 64 hex digits");
            }
        } else if (!strcmp(k, "load")) {
            const char *s = scalar(vn);
            if (s && !strcmp(s, "lazy")) p->eager = 0;
            else if (s && !strcmp(s, "eager")) p->eager = 1;
            else rc = node_err(c, vn, "'load' must be 'lazy' or 'eager', got '%s'", s ? s : "?");
        } else if (!strcmp(k, "depends")) rc = get_strlist(c, vn, k, &p->depends, &p->n_depends);
        else if (!strcmp(k, "requires")) rc = parse_requires(c, vn, p);
        else if (!strcmp(k, "provides")) rc = parse_provides(c, vn, p);
        else rc = unknown_key(c, kn, "a pack entry");
    }
    if (rc) return rc;
    if (!p->name || !*p->name) return node_err(c, n, "pack entry without a 'name'");
    if (!p->library_raw || !*p->library_raw)
        return node_err(c, n, "pack '%s': no 'library'", p->name);
    if (p->library_raw[0] == '/') p->library = strdup(p->library_raw);
    else {
        size_t need = strlen(dir) + 1 + strlen(p->library_raw) + 1;
        if ((p->library = malloc(need))) snprintf(p->library, need, "%s/%s", dir, p->library_raw);
    }
    if (!p->library) return mxp__error_oom("manifest");
    return MXP_OK;
}

static int parse_packs(pctx *c, yaml_node_t *seq, mxp_manifest *m, const char *dir) {
    if (seq->type != YAML_SEQUENCE_NODE) return node_err(c, seq, "'packs' must be a list");
    size_t cnt = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    m->packs = calloc(cnt ? cnt : 1, sizeof *m->packs);
    if (!m->packs) return mxp__error_oom("manifest");
    for (size_t i = 0; i < cnt; i++) {
        m->n_packs = (int)i + 1;
        int rc = parse_pack(c, yaml_document_get_node(c->doc, seq->data.sequence.items.start[i]),
                            &m->packs[i], dir);
        if (rc) return rc;
    }
    return MXP_OK;
}

static int parse_doc(pctx *c, mxp_manifest *m, const char *dir) {
    yaml_node_t *root = yaml_document_get_root_node(c->doc);
    if (!root) return mxp__error(MXP_EFORMAT, "%s:1:1: empty manifest", c->file);
    if (root->type == YAML_SEQUENCE_NODE) {
        m->version = c->version = 1;
        return parse_packs(c, root, m, dir);
    }
    if (root->type != YAML_MAPPING_NODE)
        return node_err(c, root, "a manifest must be a mapping with 'manifest_version' and 'packs'");
    if (dup_keys(c, root)) return MXP_EFORMAT;
    c->version = 1;
    FOR_PAIRS(c, root, k, kn, vn) {
        if (!strcmp(k, "manifest_version")) {
            int rc = get_int(c, vn, k, &c->version);
            if (rc) return rc;
            if (c->version < 1) return node_err(c, vn, "manifest_version must be >= 1");
            if (c->version > MXP_MANIFEST_VERSION)
                MXP_LOGW("plugin", "%s: manifest_version %d is newer than this runtime's %d; "
                         "reading what it understands", c->file, c->version, MXP_MANIFEST_VERSION);
        }
    }
    m->version = c->version;
    int rc = MXP_OK;
    FOR_PAIRS(c, root, k, kn, vn) {
        if (rc) break;
        if (!strcmp(k, "manifest_version")) continue;
        if (!strcmp(k, "packs")) rc = parse_packs(c, vn, m, dir);
        else rc = unknown_key(c, kn, "the manifest");
    }
    return rc;
}

int mxp__manifest_parse_mem(const char *buf, size_t len, const char *name, mxp_manifest **out) {
    if (out) *out = NULL;
    if (!out || (!buf && len)) return mxp__error(MXP_EMISUSE, "mxp__manifest_parse_mem: NULL argument");
    const char *file = name ? name : "<memory>";
    mxp_manifest *m = calloc(1, sizeof *m);
    if (!m) return mxp__error_oom("manifest");
    m->path = strdup(file);
    char *dir = dir_of(file);
    if (!m->path || !dir) {
        free(dir);
        mxp__manifest_free(m);
        return mxp__error_oom("manifest");
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    /* No aliases, bounded nesting: checked before libyaml builds a tree. */
    int rc = mxp__yaml_guard_string(buf ? buf : "", len, "manifest", file);
    if (rc) {
        free(dir);
        mxp__manifest_free(m);
        return rc;
    }
    if (!yaml_parser_initialize(&parser)) {
        free(dir);
        mxp__manifest_free(m);
        return mxp__error_oom("yaml parser");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_mark_t mk = parser.problem_mark;
        rc = mxp__error(MXP_EFORMAT, "%s:%zu:%zu: malformed YAML: %s%s%s", file, mk.line + 1,
                        mk.column + 1, parser.problem ? parser.problem : "parse error",
                        parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        free(dir);
        mxp__manifest_free(m);
        return rc;
    }
    pctx c = {&doc, file, 1};
    rc = parse_doc(&c, m, dir);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(dir);
    if (rc) {
        mxp__manifest_free(m);
        return rc;
    }
    *out = m;
    return MXP_OK;
}

int mxp__manifest_parse_file(const char *path, mxp_manifest **out) {
    if (out) *out = NULL;
    if (!path || !out) return mxp__error(MXP_EMISUSE, "mxp__manifest_parse_file: NULL argument");
    /* A regular file of at most 64 MiB (a FIFO or device would hang the
     * read), read into a buffer of exactly its size. */
    FILE *f = NULL;
    uint64_t size = 0;
    int rc = mxp_file_open_read(path, "manifest", 64u << 20, &f, &size);
    if (rc) return rc;
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return mxp__error(MXP_ENOMEM, "manifest '%s': out of memory for %llu bytes", path, (unsigned long long)size);
    }
    size_t len = fread(buf, 1, (size_t)size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || len != size) {
        free(buf);
        return mxp__error(MXP_EIO, "manifest '%s': read %zu of %llu bytes", path, len, (unsigned long long)size);
    }
    rc = mxp__manifest_parse_mem(buf, len, path, out);
    free(buf);
    return rc;
}

static void free_strs(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void free_impls(mxp_man_impl *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].op);
        free(v[i].name);
        free(v[i].device);
    }
    free(v);
}

void mxp__manifest_free(mxp_manifest *m) {
    if (!m) return;
    for (int i = 0; i < m->n_packs; i++) {
        mxp_man_pack *p = &m->packs[i];
        free(p->name); free(p->version); free(p->library); free(p->library_raw); free(p->sha256);
        free(p->cuda_driver);
        free_strs(p->depends, p->n_depends);
        free_strs(p->cpu_features, p->n_cpu_features);
        for (int j = 0; j < p->n_ops; j++) {
            free(p->ops[j].name);
            free_strs(p->ops[j].aliases, p->ops[j].n_aliases);
            free_impls(p->ops[j].impls, p->ops[j].n_impls);
        }
        free(p->ops);
        free_impls(p->impls, p->n_impls);
        free_strs(p->devices, p->n_devices);
        free_strs(p->kvstores, p->n_kvstores);
        free_strs(p->iterators, p->n_iterators);
    }
    free(m->packs);
    free(m->path);
    free(m);
}
