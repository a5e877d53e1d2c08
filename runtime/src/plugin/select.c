/* select.c — choosing an implementation for an op.
 *
 * Policy per op, by precedence: the API (mxp_op_set_impl) > the
 * environment (MXP_IMPL_<Op>=<impl>) > the user config
 * ($XDG_CONFIG_HOME/mxplug/config.yaml, `impl: {Op: name}`, written by
 * mxp_config_set_impl) > "auto".
 *   auto  the highest rank whose supports() accepts (ties by impl name);
 *         packs are opened lazily in that order, so a lower-ranked pack is
 *         never loaded when a higher one accepts;
 *   tune  every candidate that accepts is asked, then tune.c picks the
 *         fastest for the signature (cached in tune.yaml, else timed now);
 *   NAME  that impl; an error if it does not exist for the device or
 *         refuses the configuration (the message carries its reason).
 * Also: mxp_op_list_names, mxp_op_explain.  Calls into pack code (supports,
 * params, names, inference) go through opdef.h.
 * The config file is re-read when its path or mtime changes. */
#include "plugin/plugin_impl.h"
#include "plugin/yaml_guard.h"

#include <yaml.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ config */
typedef struct cfg_entry { char *op, *policy; } cfg_entry;
static pthread_mutex_t g_cfg_mu = PTHREAD_MUTEX_INITIALIZER;
static cfg_entry *g_cfg;
static int g_n_cfg;
static char g_cfg_path[1024];
static struct timespec g_cfg_mtime;
static int g_cfg_loaded;

static int config_path(char *buf, size_t cap) {
    const char *x = getenv("XDG_CONFIG_HOME");
    if (x && *x) return snprintf(buf, cap, "%s/mxplug/config.yaml", x) < (int)cap ? 0 : -1;
    const char *h = getenv("HOME");
    if (!h || !*h) return -1;
    return snprintf(buf, cap, "%s/.config/mxplug/config.yaml", h) < (int)cap ? 0 : -1;
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
    if (access(path, F_OK) != 0) return MXP_OK;
    FILE *f = NULL;
    int rc0 = mxp_file_open_read(path, "user config", 16u << 20, &f, NULL);
    if (!rc0 && (rc0 = mxp__yaml_guard_file(f, "user config", path))) fclose(f);
    if (rc0) return rc0;
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = MXP_OK;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return mxp__error_oom("config parser");
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = mxp__error(MXP_EFORMAT, "%s:%zu:%zu: malformed YAML: %s", path, parser.problem_mark.line + 1,
                        parser.problem_mark.column + 1, parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        fclose(f);
        return rc;
    }
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
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

/* Refresh the cache when the file changed (g_cfg_mu held). */
static void cfg_refresh(void) {
    char path[1024];
    if (config_path(path, sizeof path)) {
        cfg_clear();
        g_cfg_path[0] = '\0';
        return;
    }
    struct stat st;
    struct timespec mt = {0, 0};
    if (stat(path, &st) == 0) mt = st.st_mtim;
    if (g_cfg_loaded && !strcmp(path, g_cfg_path) && mt.tv_sec == g_cfg_mtime.tv_sec &&
        mt.tv_nsec == g_cfg_mtime.tv_nsec)
        return;
    snprintf(g_cfg_path, sizeof g_cfg_path, "%s", path);
    g_cfg_mtime = mt;
    g_cfg_loaded = 1;
    if (cfg_read(path)) MXP_LOGW("plugin", "user config ignored: %s", mxp_last_error());
}

void mxp__select_reset(void) {
    pthread_mutex_lock(&g_cfg_mu);
    cfg_clear();
    g_cfg_loaded = 0;
    pthread_mutex_unlock(&g_cfg_mu);
}

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

/* The config file's content (g_cfg_mu held). */
static int cfg_write(FILE *f, void *unused) {
    (void)unused;
    fprintf(f, "# mxplug user config (written by mxp_config_set_impl / `mxplug impl`)\n");
    fprintf(f, g_n_cfg ? "impl:\n" : "impl: {}\n");
    for (int i = 0; i < g_n_cfg; i++) fprintf(f, "  \"%s\": \"%s\"\n", g_cfg[i].op, g_cfg[i].policy);
    return MXP_OK;
}

int mxp_config_set_impl(const char *op_name, const char *policy) {
    if (!op_name || !*op_name) return mxp__error(MXP_EMISUSE, "mxp_config_set_impl: NULL op name");
    char path[1024];
    if (config_path(path, sizeof path))
        return mxp__error(MXP_EINVAL, "user config: neither XDG_CONFIG_HOME nor HOME is set");
    pthread_mutex_lock(&g_cfg_mu);
    g_cfg_loaded = 0;
    int rc = cfg_read(path);
    if (!rc) rc = cfg_put(op_name, policy);
    if (!rc && mkdirs(path)) rc = mxp__error(MXP_EIO, "user config '%s': cannot create its directory: %s", path, strerror(errno));
    if (!rc) rc = mxp_file_write_atomic(path, "user config", cfg_write, NULL);
    g_cfg_loaded = 0;
    pthread_mutex_unlock(&g_cfg_mu);
    mxp__registry_bump();
    return rc;
}

/* ------------------------------------------------------------ policy */
static _Thread_local char t_policy[256];

int mxp__select_policy(const char *op_name, const char **out_policy, const char **out_source) {
    *out_policy = "auto";
    *out_source = "default";
    struct mxp_op *op = mxp__registry_find_op(op_name);
    const char *canon = op ? mxp__op_name(op) : op_name;
    if (op && mxp__registry_op_api_policy(op, t_policy, sizeof t_policy)) {
        *out_policy = t_policy;
        *out_source = "api";
        return MXP_OK;
    }
    char env[160];
    snprintf(env, sizeof env, "MXP_IMPL_%s", canon);
    const char *e = getenv(env);
    if (e && *e) {
        snprintf(t_policy, sizeof t_policy, "%s", e);
        *out_policy = t_policy;
        *out_source = "env";
        return MXP_OK;
    }
    pthread_mutex_lock(&g_cfg_mu);
    cfg_refresh();
    for (int i = 0; i < g_n_cfg; i++) {
        if (!strcmp(g_cfg[i].op, canon) || !strcmp(g_cfg[i].op, op_name)) {
            snprintf(t_policy, sizeof t_policy, "%s", g_cfg[i].policy);
            *out_policy = t_policy;
            *out_source = "config";
            break;
        }
    }
    pthread_mutex_unlock(&g_cfg_mu);
    return MXP_OK;
}

int mxp_op_policy(const char *op_name, const char **out_policy, const char **out_source) {
    if (out_policy) *out_policy = NULL;
    if (out_source) *out_source = NULL;
    if (!op_name || !out_policy || !out_source) return mxp__error(MXP_EMISUSE, "mxp_op_policy: NULL argument");
    return mxp__select_policy(op_name, out_policy, out_source);
}

int mxp_op_set_impl(const char *op_name, const char *policy) {
    if (!op_name) return mxp__error(MXP_EMISUSE, "mxp_op_set_impl: NULL op name");
    struct mxp_op *op = mxp__registry_find_op(op_name);
    if (!op) return mxp__error(MXP_ENOENT, "op '%s': not registered", op_name);
    int rc = mxp__registry_op_set_api_policy(op, policy);
    if (rc) return rc;
    mxp__registry_bump();
    return MXP_OK;
}

/* ------------------------------------------------------------ choosing */
static int cmp_entry(const void *a, const void *b) {
    const mxp_impl_entry *x = *(mxp_impl_entry *const *)a, *y = *(mxp_impl_entry *const *)b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    return strcmp(x->name, y->name);
}

typedef mxp__strbuf report;
static void rep(report *r, const char *fmt, ...) MXP_PRINTF(2, 3);
static void rep(report *r, const char *fmt, ...) {
    if (!r) return;
    va_list ap;
    va_start(ap, fmt);
    mxp__strbuf_vaddf(r, fmt, ap);
    va_end(ap);
}

/* One item of a policy: 'auto', 'tune' or an impl name; appends to rp. */
static int select_one(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref **out, report *rp,
                      const char *policy, const char *src) {
    *out = NULL;
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    const char *op_name = mxp__op_name(op);
    int tune = !strcmp(policy, "tune");
    int fixed = strcmp(policy, "auto") && !tune;
    mxp_impl_entry **c;
    int nc;
    int crc = mxp__registry_op_impls(op, dev, &c, &nc);
    if (crc) return crc;
    qsort(c, (size_t)nc, sizeof *c, cmp_entry);
    char refusals[1024] = "";
    size_t roff = 0;
    int rc = MXP_OK, found_fixed = 0;
    mxp_impl_ref *chosen = NULL;
    mxp_impl_ref **acc = tune ? calloc((size_t)(nc ? nc : 1), sizeof *acc) : NULL;
    int n_acc = 0;
    if (tune && !acc) {
        free(c);
        return mxp__error_oom("select");
    }
    for (int i = 0; i < nc; i++) {
        mxp_impl_entry *e = c[i];
        if (fixed && strcmp(e->name, policy)) {
            rep(rp, "  %-12s rank %4d  pack %-14s  not chosen: policy names '%s'\n", e->name, e->rank,
                e->pack->man->name, policy);
            continue;
        }
        found_fixed = 1;
        if (chosen && !rp) continue;
        int lrc = mxp__pack_load(e->pack);
        mxp_pack *defining = mxp__registry_op_pack(op);
        if (!lrc && defining && defining != e->pack) lrc = mxp__pack_load(defining);
        mxp_impl_ref *ref = NULL;
        if (!lrc) lrc = mxp__impl_ref_acquire(e, &ref);
        if (lrc) {
            rep(rp, "  %-12s rank %4d  pack %-14s  unavailable: %s\n", e->name, e->rank, e->pack->man->name,
                mxp_last_error());
            if (roff < sizeof refusals)
                roff += (size_t)snprintf(refusals + roff, sizeof refusals - roff, "%s'%s': %s", roff ? "; " : "",
                                         e->name, mxp_last_error());
            if (fixed) rc = lrc;
            continue;
        }
        char reason[256];
        int s = mxp__opdef_supports(ref, q, reason, sizeof reason);
        if (s == 1 && tune) {
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts: a tune candidate\n", e->name, e->rank, e->pack->man->name);
            acc[n_acc++] = ref;
            continue;
        }
        if (s == 1 && chosen) {
            /* Explaining: every impl's answer, not only the winner's. */
            rep(rp, "  %-12s rank %4d  pack %-14s  accepts, not needed: a higher-ranked impl accepted\n", e->name,
                e->rank, e->pack->man->name);
            mxp__impl_ref_release(ref);
            continue;
        }
        if (s == 1) {
            rep(rp, "  %-12s rank %4d  pack %-14s  CHOSEN%s\n", e->name, e->rank, e->pack->man->name,
                fixed ? " (named by policy)" : " (highest rank that accepts)");
            chosen = ref;
            if (!rp) break;
            continue;
        }
        rep(rp, "  %-12s rank %4d  pack %-14s  refused: %s\n", e->name, e->rank, e->pack->man->name,
            reason[0] ? reason : "(no reason given)");
        if (chosen) {
            mxp__impl_ref_release(ref);
            continue;
        }
        if (roff < sizeof refusals)
            roff += (size_t)snprintf(refusals + roff, sizeof refusals - roff, "%s'%s' refused: %s", roff ? "; " : "",
                                     e->name, reason[0] ? reason : "(no reason given)");
        mxp__impl_ref_release(ref);
    }
    free(c);
    if (tune && n_acc) {
        int idx = 0;
        char *note = NULL;
        int trc = mxp__tune_pick(op, q, acc, n_acc, &idx, rp ? &note : NULL);
        if (trc) rep(rp, "  tune failed (%s): choosing as auto\n", mxp_last_error());
        if (trc) idx = 0;
        chosen = acc[idx];
        rep(rp, "  %-12s CHOSEN (%s)\n", chosen->entry->name, note ? note : "tune");
        free(note);
        for (int i = 0; i < n_acc; i++)
            if (i != idx) mxp__impl_ref_release(acc[i]);
        mxp__error_clear();
    }
    free(acc);
    if (chosen) {
        *out = chosen;
        return MXP_OK;
    }
    if (fixed && !found_fixed)
        return mxp__error(MXP_ENOENT, "op '%s': implementation '%s' (policy from %s) does not exist for device '%s'",
                          op_name, policy, src, dev);
    if (fixed && rc) return mxp__error(rc, "op '%s': implementation '%s' (policy from %s): %s", op_name, policy, src, refusals);
    if (fixed)
        return mxp__error(MXP_EUNSUPPORTED, "op '%s': implementation '%s' (policy from %s) cannot run this configuration: %s",
                          op_name, policy, src, refusals);
    if (!nc) return mxp__error(MXP_ENOENT, "op '%s': no implementation for device '%s'", op_name, dev);
    return mxp__error(MXP_EUNSUPPORTED, "op '%s': no implementation for device '%s' accepts this configuration: %s",
                      op_name, dev, refusals);
}

/* A policy is one item or a preference list "winograd,direct,auto": the
 * first item that exists and accepts the configuration wins; 'auto' and
 * 'tune' choose among all impls and end the list.  q->policy (a node's
 * own: its __impl__ attribute, mxp_executor_set_impl) overrides the op's. */
int mxp__select_impl(struct mxp_op *op, const mxp_select_query *q, mxp_impl_ref **out, char **explain) {
    *out = NULL;
    if (explain) *explain = NULL;
    report R = {0}, *rp = explain ? &R : NULL;
    const char *dev = q->device_name ? q->device_name : mxp__device_name(q->device.type);
    const char *op_name = mxp__op_name(op);
    const char *pol, *src;
    if (q->policy && *q->policy) {
        pol = q->policy;
        src = "node";
    } else mxp__select_policy(op_name, &pol, &src);
    char policy[256], whole[256];
    snprintf(policy, sizeof policy, "%s", pol);
    snprintf(whole, sizeof whole, "%s", pol);
    rep(rp, "op '%s' on %s: policy '%s' (from %s)\n", op_name, dev, policy, src);
    char errs[1024] = "";
    size_t eoff = 0;
    int rc = MXP_ENOENT, n_items = 0;
    char *save = NULL;
    for (char *item = strtok_r(policy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        size_t len = strlen(item);
        while (len && item[len - 1] == ' ') item[--len] = '\0';
        if (!*item) continue;
        if (n_items++) rep(rp, " then '%s':\n", item);
        mxp__error_clear();
        rc = select_one(op, q, out, rp, item, src);
        if (!rc) break;
        if (eoff < sizeof errs)
            eoff += (size_t)snprintf(errs + eoff, sizeof errs - eoff, "%s%s", eoff ? " | " : "", mxp_last_error());
        if (!strcmp(item, "auto") || !strcmp(item, "tune")) break;
    }
    if (explain) *explain = R.buf ? R.buf : strdup("");
    else free(R.buf);
    if (!n_items) return mxp__error(MXP_EINVAL, "op '%s': empty implementation policy (from %s)", op_name, src);
    if (rc && n_items > 1)
        return mxp__error(rc, "op '%s': no item of policy '%s' (from %s) can run this: %s", op_name, whole, src, errs);
    return rc ? mxp__error(rc, "%s", errs) : MXP_OK;
}

int mxp_op_policy_check(const char *op_name, const char *policy) {
    if (!op_name || !policy) return mxp__error(MXP_EMISUSE, "mxp_op_policy_check: NULL argument");
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    struct mxp_op *op = mxp__registry_find_op(op_name);
    if (!op) return mxp__error(MXP_ENOENT, "op '%s': not registered (see `mxplug list`)", op_name);
    char where[300];
    snprintf(where, sizeof where, "policy '%s'", policy);
    return mxp__registry_policy_check(op, policy, where);
}

extern char **environ;

int mxp_registry_check_policies(void) {
    int rc = mxp__registry_ensure();
    if (rc) return rc;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "MXP_IMPL_", 9)) continue;
        const char *eq = strchr(*e, '=');
        if (!eq || !eq[1]) continue;
        char name[160], where[200];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e - 9), *e + 9);
        snprintf(where, sizeof where, "%.*s", (int)(eq - *e), *e);
        struct mxp_op *op = mxp__registry_find_op(name);
        if (!op) return mxp__error(MXP_EINVAL, "%s: no op named '%s' (see `mxplug list`)", where, name);
        if ((rc = mxp__registry_policy_check(op, eq + 1, where))) return rc;
    }
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

int mxp_op_list_names(const mxp_op *cop, int which, const char *const *keys, const char *const *vals, int n_kwargs,
                      char (*names)[64], int capacity, int *out_count) {
    if (out_count) *out_count = 0;
    if (!cop || !out_count || (capacity > 0 && !names) || which < 0 || which > 2)
        return mxp__error(MXP_EMISUSE, "mxp_op_list_names: bad argument");
    /* Hold the def (defining pack pinned) while we call into it. */
    mxp__opdef od;
    int rc = mxp__opdef_acquire_op((struct mxp_op *)cop, &od);
    if (rc) return rc;
    void *params;
    rc = mxp__op_params_new(od.def, keys, vals, n_kwargs, &params);
    if (!rc) {
        rc = mxp__op_list_names_def(od.def, params, which, names, capacity, out_count);
        mxp__op_params_free(od.def, params);
    }
    mxp__opdef_release(&od);
    return rc;
}

/* ------------------------------------------------------------ explain */
/* Parse "name=d1,d2,..." into the shape of the input so named. */
static int explain_shape(const char *op, const char *spec, char (*names)[MXP_NAME_MAX], int n_in, mxp_shape *sh) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq) return mxp__error(MXP_EINVAL, "explain: shape '%s' is not name=d1,d2,...", spec ? spec : "(null)");
    int idx = -1;
    for (int i = 0; i < n_in; i++)
        if (strlen(names[i]) == (size_t)(eq - spec) && !strncmp(names[i], spec, (size_t)(eq - spec))) idx = i;
    if (idx < 0) return mxp__error(MXP_EINVAL, "explain: op '%s' has no input named '%.*s'", op, (int)(eq - spec), spec);
    mxp_shape *t = &sh[idx];
    t->ndim = 0;
    for (const char *p = eq + 1; *p && t->ndim < MXP_MAX_NDIM;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        t->dims[t->ndim++] = v;
        p = *end == ',' ? end + 1 : end;
    }
    return MXP_OK;
}

int mxp_op_explain(const char *op_name, const char *device, const char *const *shapes, int n_shapes,
                   const char *const *keys, const char *const *vals, int n_kwargs, char **out_report) {
    if (out_report) *out_report = NULL;
    if (!op_name || !out_report) return mxp__error(MXP_EMISUSE, "mxp_op_explain: NULL argument");
    mxp__opdef od;
    int rc = mxp__opdef_acquire(op_name, &od);
    if (rc) return rc;
    const mxp_op_def *def = od.def;
    void *params = NULL;
    char (*names)[MXP_NAME_MAX] = calloc(3 * 64, MXP_NAME_MAX);
    mxp_shape *sh = calloc(3 * 64, sizeof *sh);
    int32_t *dt = calloc(3 * 64, sizeof *dt);
    int n_in = 0, n_out = 0, n_aux = 0;
    if (!names || !sh || !dt) rc = mxp__error_oom("explain");
    if (!rc) rc = mxp__op_params_new(def, keys, vals, n_kwargs, &params);
    if (!rc) rc = mxp__op_list_names_def(def, params, 0, names, 64, &n_in);
    if (!rc) rc = mxp__op_list_names_def(def, params, 1, names + 64, 64, &n_out);
    if (!rc) rc = mxp__op_list_names_def(def, params, 2, names + 128, 64, &n_aux);
    int shapes_known = 0;
    if (!rc) {
        for (int i = 0; i < 3 * 64; i++) { sh[i].ndim = -1; dt[i] = MXP_DTYPE_F32; }
        for (int s = 0; s < n_shapes && !rc; s++) rc = explain_shape(od.name, shapes[s], names, n_in, sh);
        if (!rc) {
            char who[MXP_NAME_MAX + 8];
            snprintf(who, sizeof who, "op '%s'", od.name);
            int irc = mxp__opdef_infer_shape(def, params, who, (uint32_t)n_in, (uint32_t)n_out, (uint32_t)n_aux, sh,
                                             sh + 64, sh + 128);
            shapes_known = irc == MXP_OK;
            if (irc < 0 && irc != MXP_EINCOMPLETE) rc = irc;
        }
    }
    char *rep_text = NULL;
    if (!rc) {
        mxp_select_query q;
        memset(&q, 0, sizeof q);
        q.params = params;
        q.device_name = device ? device : "cpu";
        q.device.type = mxp__registry_device_type(q.device_name);
        q.n_in = (uint32_t)n_in; q.n_out = (uint32_t)n_out; q.n_aux = (uint32_t)n_aux;
        q.in_shapes = sh; q.out_shapes = sh + 64; q.aux_shapes = sh + 128;
        q.in_dtypes = dt; q.out_dtypes = dt + 64; q.aux_dtypes = dt + 128;
        mxp_impl_ref *ref = NULL;
        int src = mxp__select_impl(od.op, &q, &ref, &rep_text);
        mxp__impl_ref_release(ref);
        report R = {0};
        rep(&R, "%s", rep_text ? rep_text : "");
        if (!shapes_known) rep(&R, "  (shapes incomplete: supports() saw unknown shapes)\n");
        if (src) rep(&R, "  result: %s\n", mxp_last_error());
        free(rep_text);
        *out_report = R.buf ? R.buf : strdup("");
    }
    if (params) mxp__op_params_free(def, params);
    free(names); free(sh); free(dt);
    mxp__opdef_release(&od);
    return rc;
}
