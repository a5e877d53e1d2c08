/* env.c — the one parser of MXP_* environment variables (see env.h).
 * Warnings go to the "env" log category, once per (variable, value) pair so
 * that a variable read at every bind does not flood the log.  Not here:
 * variables holding names or paths (MXP_MANIFEST, MXP_PACKS, ...), which
 * their readers check against what they name. */
#include "base/env.h"
#include "base/base.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_mutex_t g_warned_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_warned[32][96];
static int g_n_warned;

/* 1 the first time (name, value) is seen, 0 after. */
static int first_time(const char *name, const char *value) {
    char key[96];
    snprintf(key, sizeof key, "%s=%s", name, value);
    pthread_mutex_lock(&g_warned_mu);
    int seen = 0;
    for (int i = 0; i < g_n_warned && !seen; i++) seen = !strcmp(g_warned[i], key);
    if (!seen && g_n_warned < (int)(sizeof g_warned / sizeof g_warned[0]))
        snprintf(g_warned[g_n_warned++], sizeof g_warned[0], "%s", key);
    pthread_mutex_unlock(&g_warned_mu);
    return !seen;
}

long mxp__env_int(const char *name, long lo, long hi, long dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        if (first_time(name, s))
            MXP_LOGW("env", "%s='%s' is not an integer in %ld..%ld; using %ld", name, s, lo, hi, dflt);
        return dflt;
    }
    return v;
}

int mxp__env_bool(const char *name, int dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return 1;
        if (!strcasecmp(s, no[i])) return 0;
    }
    if (first_time(name, s))
        MXP_LOGW("env", "%s='%s' is not a boolean (1/0, true/false, yes/no, on/off); using %d", name, s, dflt);
    return dflt;
}
