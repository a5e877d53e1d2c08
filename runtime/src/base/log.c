/* log.c — the one logging function, its sink and its level spec.
 *
 * Levels: a global level plus up to LOG_MAX_CATS per-category overrides,
 * parsed from "warn,engine=debug" (MXP_LOG_LEVEL or mxp_log_set_level).
 * The spec is read from the environment lazily on first use; nothing runs
 * from constructors. */
#include "base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LOG_MAX_CATS 16
#define LOG_CAT_LEN 32

typedef struct log_cat_level {
    char name[LOG_CAT_LEN];
    int level;
} log_cat_level;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_global_level = MXP_LOG_WARN;
static log_cat_level log_cats[LOG_MAX_CATS];
static int log_n_cats;
static mxp_log_sink log_sink;
static void *log_sink_user;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

static int parse_level(const char *s, size_t n, int *out) {
    for (int i = 0; i < (int)MXP_ARRAY_LEN(level_names); i++) {
        if (strlen(level_names[i]) == n && strncasecmp(s, level_names[i], n) == 0) {
            *out = i;
            return MXP_OK;
        }
    }
    if (n == 7 && strncasecmp(s, "warning", 7) == 0) { *out = MXP_LOG_WARN; return MXP_OK; }
    return MXP_EINVAL;
}

/* Parse into temporaries first so a bad spec leaves the old levels intact. */
static int apply_spec(const char *spec) {
    int global = log_global_level;
    log_cat_level cats[LOG_MAX_CATS];
    int n_cats = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *next = p + len;
        /* Blanks around an item are allowed ("warn, engine=debug"). */
        while (len && (*p == ' ' || *p == '\t')) { p++; len--; }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        const char *eq = memchr(p, '=', len);
        int lvl;
        if (!eq) {
            if (parse_level(p, len, &lvl) != MXP_OK)
                return mxp__error(MXP_EINVAL, "log level spec '%s': unknown level '%.*s' "
                                  "(expected error, warn, info, debug or trace)", spec, (int)len, p);
            global = lvl;
        } else {
            size_t name_len = (size_t)(eq - p);
            const char *lv = eq + 1;
            size_t lv_len = len - name_len - 1;
            while (name_len && (p[name_len - 1] == ' ' || p[name_len - 1] == '\t')) name_len--;
            while (lv_len && (*lv == ' ' || *lv == '\t')) { lv++; lv_len--; }
            if (parse_level(lv, lv_len, &lvl) != MXP_OK)
                return mxp__error(MXP_EINVAL, "log level spec '%s': unknown level '%.*s' for "
                                  "category '%.*s' (expected error, warn, info, debug or trace)",
                                  spec, (int)lv_len, lv, (int)name_len, p);
            if (name_len == 0 || name_len >= LOG_CAT_LEN)
                return mxp__error(MXP_EINVAL, "log level spec '%s': bad category name '%.*s' "
                                  "(1 to %d characters)", spec, (int)name_len, p, LOG_CAT_LEN - 1);
            if (n_cats == LOG_MAX_CATS)
                return mxp__error(MXP_EINVAL, "log level spec '%s': more than %d categories",
                                  spec, LOG_MAX_CATS);
            memcpy(cats[n_cats].name, p, name_len);
            cats[n_cats].name[name_len] = '\0';
            cats[n_cats].level = lvl;
            n_cats++;
        }
        p = next;
        if (*p == ',') p++;
    }
    log_global_level = global;
    memcpy(log_cats, cats, sizeof(cats[0]) * (size_t)n_cats);
    log_n_cats = n_cats;
    return MXP_OK;
}

/* Runs inside whatever call logs first, possibly on a failure path that has
 * just set the caller's error message: keep that message intact. */
static void read_env_once(void) {
    const char *spec = getenv("MXP_LOG_LEVEL");
    if (!spec || !*spec) return;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", mxp_last_error());
    if (apply_spec(spec) != MXP_OK)
        fprintf(stderr, "mxplug: ignoring MXP_LOG_LEVEL: %s\n", mxp_last_error());
    mxp__error(MXP_OK, "%s", saved);
}

int mxp_log_set_level(const char *spec) {
    if (!spec) return mxp__error(MXP_EINVAL, "mxp_log_set_level: spec is NULL");
    pthread_once(&log_once, read_env_once);
    pthread_mutex_lock(&log_lock);
    int rc = apply_spec(spec);
    pthread_mutex_unlock(&log_lock);
    return rc;
}

static int level_for(const char *category) {
    int lvl = log_global_level;
    if (category) {
        for (int i = 0; i < log_n_cats; i++)
            if (strcmp(log_cats[i].name, category) == 0) lvl = log_cats[i].level;
    }
    return lvl;
}

int mxp_log_enabled(int level, const char *category) {
    pthread_once(&log_once, read_env_once);
    pthread_mutex_lock(&log_lock);
    int on = level <= level_for(category);
    pthread_mutex_unlock(&log_lock);
    return on;
}

void mxp_log_set_sink(mxp_log_sink sink, void *user) {
    pthread_mutex_lock(&log_lock);
    log_sink = sink;
    log_sink_user = user;
    pthread_mutex_unlock(&log_lock);
}

void mxp_logv(int level, const char *category, const char *fmt, va_list ap) {
    pthread_once(&log_once, read_env_once);
    char msg[2048];
    pthread_mutex_lock(&log_lock);
    int on = level <= level_for(category);
    mxp_log_sink sink = log_sink;
    void *user = log_sink_user;
    pthread_mutex_unlock(&log_lock);
    if (!on) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (sink) {
        sink(level, category ? category : "", msg, user);
    } else {
        const char *lname = (level >= 0 && level < (int)MXP_ARRAY_LEN(level_names)) ? level_names[level] : "?";
        fprintf(stderr, "mxplug %s [%s] %s\n", lname, category ? category : "-", msg);
    }
}

void mxp_log(int level, const char *category, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mxp_logv(level, category, fmt, ap);
    va_end(ap);
}
