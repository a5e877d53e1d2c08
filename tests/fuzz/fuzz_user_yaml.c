/* fuzz_user_yaml.c — libFuzzer harness for the two per-user YAML files:
 * the user config (runtime/src/plugin/user_config.c) and the tune cache
 * (tune_cache.c), both read through yaml_file.c (size cap, anchor/alias
 * and nesting guard, libyaml) and both rewritten by the runtime.
 *
 * Each input is written as $XDG_CONFIG_HOME/mxplug/config.yaml and as
 * $XDG_CACHE_HOME/mxplug/tune.yaml under a private temporary directory
 * (made at start, removed at exit; nothing is written anywhere else).
 * Properties, besides no crash, leak or UB:
 *  - config: when the runtime says the file is ignored, no op named in it
 *    has a policy (no half-applied file); after mxp_config_set_impl adds
 *    one more op and the file is re-read from disk, every op named in the
 *    input has the policy it had before (the writer's quoting round-trips
 *    whatever the reader accepted);
 *  - tune cache: after mxp__tune_cache_save adds one entry (which rewrites
 *    the file with the entries read from it) and the file is re-read, every
 *    signature named in the input gives the same entry as before: op,
 *    choice, timing names, times (to the 6 digits the file keeps).
 * The harness walks the input's document itself only to collect candidate
 * names (keys under 'impl', values of 'signature'), never to decide what
 * the runtime should have accepted.  Seeds: tests/fuzz/corpus/user_yaml/. */
#include "plugin/plugin_impl.h"
#include "plugin/yaml_file.h"

#include <yaml.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[64], g_cfg_path[160], g_tune_path[160];
static int g_ignored; /* a "user config ignored" warning was logged */

static void sink(int level, const char *cat, const char *msg, void *user) {
    (void)level;
    (void)cat;
    (void)user;
    if (strstr(msg, "user config ignored")) g_ignored = 1;
}

static void cleanup(void) {
    char cmd[128];
    if (!g_dir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) { /* best effort */ }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(g_dir, sizeof g_dir, "/tmp/mxp-fuzz-yaml-XXXXXX");
    if (!mkdtemp(g_dir)) abort();
    atexit(cleanup);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/config", g_dir);
    setenv("XDG_CONFIG_HOME", sub, 1);
    snprintf(sub, sizeof sub, "%s/cache", g_dir);
    setenv("XDG_CACHE_HOME", sub, 1);
    snprintf(g_cfg_path, sizeof g_cfg_path, "%s/config/mxplug/config.yaml", g_dir);
    snprintf(g_tune_path, sizeof g_tune_path, "%s/cache/mxplug/tune.yaml", g_dir);
    if (mxp__mkdirs_for(g_cfg_path, "fuzz") || mxp__mkdirs_for(g_tune_path, "fuzz")) abort();
    return 0;
}

static void put_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
}

/* ------------------------------------------------------ candidate names */
#define MAX_NAMES 32
typedef struct names {
    char *v[MAX_NAMES];
    int n;
} names;

static void names_add(names *ns, const char *s) {
    if (ns->n < MAX_NAMES && s && *s && !(ns->v[ns->n] = strdup(s))) abort();
    if (ns->n < MAX_NAMES && s && *s) ns->n++;
}

static void names_free(names *ns) {
    for (int i = 0; i < ns->n; i++) free(ns->v[i]);
    ns->n = 0;
}

static const char *scalar(yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Keys of mappings under a top-level `key1`, and scalar values of `key2`
 * in mappings listed under it (the tune cache's entries).  Top two levels
 * only: aliases are never followed further. */
static void collect(const uint8_t *data, size_t size, const char *key1, const char *key2, names *ns) {
    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p)) abort();
    yaml_parser_set_input_string(&p, data, size);
    if (!yaml_parser_load(&p, &doc)) {
        yaml_parser_delete(&p);
        return;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < root->data.mapping.pairs.top; q++) {
            const char *k = scalar(yaml_document_get_node(&doc, q->key));
            yaml_node_t *v = yaml_document_get_node(&doc, q->value);
            if (!k || strcmp(k, key1) || !v) continue;
            if (v->type == YAML_MAPPING_NODE && !key2)
                for (yaml_node_pair_t *r = v->data.mapping.pairs.start; r < v->data.mapping.pairs.top; r++)
                    names_add(ns, scalar(yaml_document_get_node(&doc, r->key)));
            if (v->type == YAML_SEQUENCE_NODE && key2)
                for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                    yaml_node_t *m = yaml_document_get_node(&doc, *it);
                    if (!m || m->type != YAML_MAPPING_NODE) continue;
                    for (yaml_node_pair_t *r = m->data.mapping.pairs.start; r < m->data.mapping.pairs.top; r++) {
                        const char *rk = scalar(yaml_document_get_node(&doc, r->key));
                        if (rk && !strcmp(rk, key2)) names_add(ns, scalar(yaml_document_get_node(&doc, r->value)));
                    }
                }
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
}

/* ------------------------------------------------------------- config */
static const char *FUZZ_OP = "FuzzHarnessOp";

static void check_config(const uint8_t *data, size_t size) {
    names ns = {0};
    collect(data, size, "impl", NULL, &ns);
    put_file(g_cfg_path, data, size);
    mxp__select_reset();
    g_ignored = 0;
    char before[MAX_NAMES][256];
    int had[MAX_NAMES];
    for (int i = 0; i < ns.n; i++) {
        had[i] = mxp__config_policy(ns.v[i], ns.v[i], before[i], sizeof before[i]);
        if (g_ignored && had[i]) abort(); /* an ignored file must not apply in part */
    }
    if (mxp_config_set_impl(FUZZ_OP, "fuzz-policy") == MXP_OK) {
        mxp__select_reset();
        g_ignored = 0;
        char now[256];
        if (!mxp__config_policy(FUZZ_OP, FUZZ_OP, now, sizeof now) || strcmp(now, "fuzz-policy")) abort();
        for (int i = 0; i < ns.n; i++) {
            if (!strcmp(ns.v[i], FUZZ_OP)) continue;
            int has = mxp__config_policy(ns.v[i], ns.v[i], now, sizeof now);
            if (has != had[i] || (has && strcmp(now, before[i]))) abort(); /* rewrite changed an entry */
        }
    }
    names_free(&ns);
}

/* --------------------------------------------------------- tune cache */
static const char *FUZZ_SIG = "FuzzHarnessOp|cpu|fuzz=1";

static int same_ms(double a, double b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (a == b) return 1;
    return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)) || fabs(a - b) < 1e-300;
}

static int same_entry(const mxp__tune_entry *x, const mxp__tune_entry *y) {
    if (strcmp(x->op, y->op) || strcmp(x->sig, y->sig) || strcmp(x->choice, y->choice) || x->n_times != y->n_times)
        return 0;
    for (int i = 0; i < x->n_times; i++)
        if (strcmp(x->names[i], y->names[i]) || !same_ms(x->ms[i], y->ms[i])) return 0;
    return 1;
}

static void check_tune(const uint8_t *data, size_t size) {
    names ns = {0};
    collect(data, size, "entries", "signature", &ns);
    put_file(g_tune_path, data, size);
    mxp__tune_reset();
    mxp__tune_entry before[MAX_NAMES];
    int had[MAX_NAMES];
    for (int i = 0; i < ns.n; i++) had[i] = mxp__tune_cache_find(ns.v[i], &before[i]);
    char *tn[] = {"direct", "gemm"};
    double tm[] = {1.5, 0.25};
    mxp__tune_entry mine = {.op = "FuzzHarnessOp", .sig = (char *)FUZZ_SIG, .choice = "gemm", .n_times = 2,
                            .names = tn, .ms = tm};
    if (mxp__tune_cache_save(&mine) == MXP_OK) {
        mxp__tune_reset();
        mxp__tune_entry now;
        if (!mxp__tune_cache_find(FUZZ_SIG, &now)) abort();
        if (!same_entry(&now, &mine)) abort();
        mxp__tune_entry_free(&now);
        for (int i = 0; i < ns.n; i++) {
            if (!strcmp(ns.v[i], FUZZ_SIG)) continue;
            int has = mxp__tune_cache_find(ns.v[i], &now);
            if (has != had[i] || (has && !same_entry(&now, &before[i]))) abort(); /* rewrite changed an entry */
            if (has) mxp__tune_entry_free(&now);
        }
    }
    for (int i = 0; i < ns.n; i++)
        if (had[i]) mxp__tune_entry_free(&before[i]);
    names_free(&ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 16)) return 0;
    mxp_log_set_sink(sink, NULL);
    check_config(data, size);
    check_tune(data, size);
    return 0;
}
