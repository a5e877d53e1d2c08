/* discover.c — which manifests are read, in which order, and which packs
 * may load.
 *
 * Order (the first pack of a name wins; a later one is reported with a
 * warning by registry.c):
 *   1. $MXP_MANIFEST, a ':'-separated list of files;
 *   2. manifest.yaml in each directory of $MXP_PLUGIN_PATH (':'-separated);
 *   3. relative to libmxplug itself (dladdr): <libdir>/mxplug/manifest.yaml
 *      (installed), then <libdir>/../plugins/manifest.yaml (build tree).
 *      With a static libmxplug (unit tests) dladdr names the executable, so
 *      tests set $MXP_MANIFEST.
 * A file named explicitly in $MXP_MANIFEST that cannot be read is an error
 * (returned and logged); missing directory manifests are silently skipped.
 * A malformed manifest is logged and skipped, so other manifests still work.
 * $MXP_PACKS=a,b restricts which packs may load (others are UNAVAILABLE). */
#include "plugin/plugin_impl.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int mxp__discover_pack_allowed(const char *name) {
    const char *list = getenv("MXP_PACKS");
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    const char *p = list;
    while (*p) {
        while (*p == ',' || *p == ' ') p++;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if ((size_t)(t - p) == n && !strncmp(p, name, n)) return 1;
        p = e;
    }
    return 0;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int mxp__discover_default_paths(char ***out_paths, int *out_n) {
    *out_paths = NULL;
    *out_n = 0;
    Dl_info info;
    if (!dladdr((void *)&mxp__discover_default_paths, &info) || !info.dli_fname) return MXP_OK;
    char self[PATH_MAX];
    if (!realpath(info.dli_fname, self)) return MXP_OK;
    char *slash = strrchr(self, '/');
    if (!slash) return MXP_OK;
    *slash = '\0';
    char **v = calloc(2, sizeof *v);
    if (!v) return mxp__error_oom("discover");
    char buf[PATH_MAX + 64];
    int n = 0;
    snprintf(buf, sizeof buf, "%s/mxplug/manifest.yaml", self);
    v[n++] = strdup(buf);
    snprintf(buf, sizeof buf, "%s/../plugins/manifest.yaml", self);
    v[n++] = strdup(buf);
    *out_paths = v;
    *out_n = n;
    return MXP_OK;
}

/* Read one manifest; explicit: failure to read is an error. */
/* The same file reached by two routes (e.g. $MXP_MANIFEST and the build
 * tree's default) is read once. */
static int already_read(const char *path) {
    char a[PATH_MAX], b[PATH_MAX];
    if (!realpath(path, a)) return 0;
    int found = 0;
    mxp__registry_rdlock();
    for (int i = 0; i < mxp__g_reg.n_manifests && !found; i++)
        found = realpath(mxp__g_reg.manifests[i]->path, b) && !strcmp(a, b);
    mxp__registry_unlock();
    return found;
}

static int read_one(const char *path, int explicit_) {
    if (!explicit_ && !file_exists(path)) return MXP_OK;
    if (already_read(path)) return MXP_OK;
    mxp_manifest *m;
    int rc = mxp__manifest_parse_file(path, &m);
    if (rc) {
        MXP_LOGE("plugin", "%s", mxp_last_error());
        return rc;
    }
    MXP_LOGD("plugin", "manifest %s: %d pack(s)", path, m->n_packs);
    return mxp__registry_add_manifest(m);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int read_list(const char *list, int dirs) {
    int rc_first = MXP_OK;
    char *copy = strdup(list);
    if (!copy) return mxp__error_oom("discover");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (!*tok) continue;
        int rc;
        if (dirs) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/manifest.yaml", tok);
            if (file_exists(tok) && !is_dir(tok)) {
                rc = mxp__error(MXP_EINVAL, "MXP_PLUGIN_PATH entry '%s' is a file: a directory (holding manifest.yaml) "
                                "is expected; name a manifest file in MXP_MANIFEST instead", tok);
                MXP_LOGE("plugin", "%s", mxp_last_error());
            } else if (!is_dir(tok)) {
                rc = mxp__error(MXP_ENOENT, "MXP_PLUGIN_PATH entry '%s' does not exist", tok);
                MXP_LOGW("plugin", "%s", mxp_last_error());
            } else {
                rc = read_one(path, 0);
            }
        } else if (is_dir(tok)) {
            rc = mxp__error(MXP_EINVAL, "MXP_MANIFEST entry '%s' is a directory: a manifest file is expected (e.g. "
                            "%s/manifest.yaml), or put the directory in MXP_PLUGIN_PATH", tok, tok);
            MXP_LOGE("plugin", "%s", mxp_last_error());
        } else {
            rc = read_one(tok, 1);
        }
        if (rc && !rc_first) rc_first = rc;
    }
    free(copy);
    return rc_first;
}

int mxp__discover_all(void) {
    char errbuf[1024] = "";
    int rc_explicit = MXP_OK;
    const char *env = getenv("MXP_MANIFEST");
    if (env && *env) {
        rc_explicit = read_list(env, 0);
        if (rc_explicit) snprintf(errbuf, sizeof errbuf, "%s", mxp_last_error());
    }
    const char *pp = getenv("MXP_PLUGIN_PATH");
    if (pp && *pp) read_list(pp, 1);
    char **defaults;
    int n_def;
    if (mxp__discover_default_paths(&defaults, &n_def) == MXP_OK) {
        for (int i = 0; i < n_def; i++) {
            if (defaults[i]) read_one(defaults[i], 0);
            free(defaults[i]);
        }
        free(defaults);
    }
    /* Eager packs, in discovery order. */
    mxp__registry_rdlock();
    int n = mxp__g_reg.n_packs;
    mxp__registry_unlock();
    for (int i = 0; i < n; i++) {
        mxp__registry_rdlock();
        mxp_pack *p = mxp__g_reg.packs[i];
        int eager = p->man->eager && p->state == PACK_NOT_LOADED;
        mxp__registry_unlock();
        if (eager && mxp__pack_load(p)) MXP_LOGW("plugin", "eager pack '%s': %s", p->man->name, mxp_last_error());
    }
    if (rc_explicit) return mxp__error(rc_explicit, "%s", errbuf);
    mxp__error_clear();
    return MXP_OK;
}
