/* user_config.c — the user config file, $XDG_CONFIG_HOME/mxplug/config.yaml
 * (else ~/.config/mxplug/config.yaml):
 *   impl:
 *     Convolution: gemm
 * One policy per op (select.c's precedence puts it below the API and
 * MXP_IMPL_<Op>, above "auto").  Read through yaml_file.h and re-read when
 * its path or mtime changes; mxp_config_set_impl rewrites it atomically
 * (the file's current entries, with the one changed).  A malformed file is
 * ignored with a warning naming file:line.  Not here: what the policy
 * means (select.c).  Thread-safe: g_cfg_mu guards the table and the file. */
#include "plugin/plugin_impl.h"
#include "plugin/yaml_file.h"

#include <mxplug/fileio.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cfg_entry { char *op, *policy; } cfg_entry;
static pthread_mutex_t g_cfg_mu = PTHREAD_MUTEX_INITIALIZER;
static cfg_entry *g_cfg;
static int g_n_cfg;
static mxp__file_stamp g_cfg_stamp;   /* the file g_cfg was read from      */

static int config_path(char *buf, size_t cap) {
    return mxp__user_file_path("XDG_CONFIG_HOME", ".config", "config.yaml", buf, cap);
}

static void cfg_clear(void) {
    for (int i = 0; i < g_n_cfg; i++) {
        free(g_cfg[i].op);
        free(g_cfg[i].policy);
    }
    free(g_cfg);
    g_cfg = NULL;
    g_n_cfg = 0;
}

static int cfg_put(const char *op, const char *policy) {
    for (int i = 0; i < g_n_cfg; i++) {
        if (!strcmp(g_cfg[i].op, op)) {
            if (!policy) {
                free(g_cfg[i].op);
                free(g_cfg[i].policy);
                g_cfg[i] = g_cfg[--g_n_cfg];
                return MXP_OK;
            }
            char *np = strdup(policy);
            if (!np) return mxp__error_oom("config");
            free(g_cfg[i].policy);
            g_cfg[i].policy = np;
            return MXP_OK;
        }
    }
    if (!policy) return MXP_OK;
    cfg_entry *v = realloc(g_cfg, (size_t)(g_n_cfg + 1) * sizeof *v);
    if (!v) return mxp__error_oom("config");
    g_cfg = v;
    v[g_n_cfg].op = strdup(op);
    v[g_n_cfg].policy = strdup(policy);
    if (!v[g_n_cfg].op || !v[g_n_cfg].policy) {
        free(v[g_n_cfg].op);
        free(v[g_n_cfg].policy);
        return mxp__error_oom("config");
    }
    g_n_cfg++;
    return MXP_OK;
}

/* Parse the config file (g_cfg_mu held).  Missing file = empty. */
static int cfg_read(const char *path) {
    cfg_clear();
    yaml_document_t doc;
    int found = 0, rc = mxp__yaml_file_load(path, "user config", 16u << 20, &doc, &found);
    if (rc || !found) return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key), *v = yaml_document_get_node(&doc, p->value);
            if (k->type != YAML_SCALAR_NODE || strcmp((char *)k->data.scalar.value, "impl")) continue;
            if (v->type == YAML_SCALAR_NODE && !v->data.scalar.length) continue; /* "impl:" with none */
            if (v->type != YAML_MAPPING_NODE) {
                rc = mxp__error(MXP_EFORMAT, "%s:%zu:%zu: 'impl' must map op names to policies", path,
                                v->start_mark.line + 1, v->start_mark.column + 1);
                break;
            }
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top && !rc; q++) {
                yaml_node_t *ok = yaml_document_get_node(&doc, q->key), *ov = yaml_document_get_node(&doc, q->value);
                if (ok->type == YAML_SCALAR_NODE && ov->type == YAML_SCALAR_NODE)
                    rc = cfg_put((char *)ok->data.scalar.value, (char *)ov->data.scalar.value);
            }
        }
    } else if (root && !(root->type == YAML_SCALAR_NODE && !root->data.scalar.length)) {
        rc = mxp__error(MXP_EFORMAT, "%s: the config must be a mapping", path);
    }
    yaml_document_delete(&doc);
    /* An ignored file is ignored whole: entries read before the offending
     * one must not stay in force (fuzz_user_yaml). */
    if (rc) cfg_clear();
    return rc;
}

/* Refresh the cache when the file changed (g_cfg_mu held). */
static void cfg_refresh(void) {
    char path[1024];
    if (config_path(path, sizeof path)) {
        cfg_clear();
        mxp__file_stamp_clear(&g_cfg_stamp);
        return;
    }
    if (!mxp__file_stamp_changed(&g_cfg_stamp, path)) return;
    if (cfg_read(path)) MXP_LOGW("plugin", "user config ignored: %s", mxp_last_error());
}

int mxp__config_policy(const char *canon, const char *op_name, char *buf, size_t cap) {
    int found = 0;
    pthread_mutex_lock(&g_cfg_mu);
    cfg_refresh();
    for (int i = 0; i < g_n_cfg && !found; i++) {
        if (!strcmp(g_cfg[i].op, canon) || !strcmp(g_cfg[i].op, op_name)) {
            snprintf(buf, cap, "%s", g_cfg[i].policy);
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_cfg_mu);
    return found;
}

void mxp__select_reset(void) {
    pthread_mutex_lock(&g_cfg_mu);
    cfg_clear();
    mxp__file_stamp_clear(&g_cfg_stamp);
    pthread_mutex_unlock(&g_cfg_mu);
}

/* The config file's content (g_cfg_mu held). */
static int cfg_write(FILE *f, void *unused) {
    (void)unused;
    fprintf(f, "# mxplug user config (written by mxp_config_set_impl / `mxplug impl`)\n");
    fprintf(f, g_n_cfg ? "impl:\n" : "impl: {}\n");
    for (int i = 0; i < g_n_cfg; i++) {
        /* Quoted so that any name the reader accepted reads back the same
         * (a '"' in a name made the file unreadable: fuzz_user_yaml). */
        fputs("  ", f);
        if (mxp__yaml_put_quoted(f, g_cfg[i].op)) return mxp__error(MXP_EINVAL, "user config: op name is not UTF-8");
        fputs(": ", f);
        if (mxp__yaml_put_quoted(f, g_cfg[i].policy))
            return mxp__error(MXP_EINVAL, "user config: policy of '%s' is not UTF-8", g_cfg[i].op);
        fputc('\n', f);
    }
    return MXP_OK;
}

int mxp_config_set_impl(const char *op_name, const char *policy) {
    if (!op_name || !*op_name) return mxp__error(MXP_EMISUSE, "mxp_config_set_impl: NULL op name");
    char path[1024];
    if (config_path(path, sizeof path))
        return mxp__error(MXP_EINVAL, "user config: neither XDG_CONFIG_HOME nor HOME is set");
    pthread_mutex_lock(&g_cfg_mu);
    mxp__file_stamp_clear(&g_cfg_stamp);
    int rc = cfg_read(path);
    if (!rc) rc = cfg_put(op_name, policy);
    if (!rc) rc = mxp__mkdirs_for(path, "user config");
    if (!rc) rc = mxp_file_write_atomic(path, "user config", cfg_write, NULL);
    mxp__file_stamp_clear(&g_cfg_stamp);
    pthread_mutex_unlock(&g_cfg_mu);
    mxp__registry_bump();
    return rc;
}

int mxp__config_check_policies(void) {
    int rc = MXP_OK;
    char path[1024];
    if (config_path(path, sizeof path)) snprintf(path, sizeof path, "the user config");
    pthread_mutex_lock(&g_cfg_mu);
    cfg_refresh();
    int n = g_n_cfg;
    char (*ops)[128] = calloc((size_t)n + 1, sizeof *ops), (*pols)[128] = calloc((size_t)n + 1, sizeof *pols);
    for (int i = 0; ops && pols && i < n; i++) {
        snprintf(ops[i], 128, "%s", g_cfg[i].op);
        snprintf(pols[i], 128, "%s", g_cfg[i].policy);
    }
    pthread_mutex_unlock(&g_cfg_mu);
    if (!ops || !pols) rc = mxp__error_oom("policies");
    for (int i = 0; !rc && i < n; i++) {
        char where[1200];
        snprintf(where, sizeof where, "%s: impl of '%s'", path, ops[i]);
        struct mxp_op *op = mxp__registry_find_op(ops[i]);
        if (!op) rc = mxp__error(MXP_EINVAL, "%s: no op named '%s'", where, ops[i]);
        else rc = mxp__registry_policy_check(op, pols[i], where);
    }
    free(ops);
    free(pols);
    return rc;
}
