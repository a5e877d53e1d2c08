/* cmd_check.c — `mxplug check [MANIFEST]`: validate manifests by loading
 * every pack they declare, one at a time.
 *
 * Problems counted (each printed on stderr naming the pack and the cause):
 *   - errors the registry logs while reading manifests (bad YAML with line
 *     and column, duplicate names, dependency cycles, ...), caught through a
 *     log sink installed for the duration of discovery;
 *   - a pack left FAILED by discovery, or failing mxp_pack_load (missing
 *     file, not a shared object, sha256 mismatch, ABI mismatch, missing
 *     entry symbol, failing init, declared-vs-registered mismatch, ...).
 * A pack UNAVAILABLE on this machine (requires: not met, MXP_PACKS) is
 * reported but is not a problem unless --strict.
 * With MANIFEST, only that file is read (MXP_MANIFEST is set to it and
 * MXP_PLUGIN_PATH cleared) and only its packs are checked.  Exit 0 when no
 * problem was found, 1 otherwise. */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void check_help(FILE *f) {
    fputs("usage: mxplug check [--strict] [-v] [MANIFEST]\n"
          "\n"
          "Validate the manifest(s) and load each declared pack in turn.  Every\n"
          "problem is printed naming the pack and its cause; exit 1 if any.\n"
          "Without MANIFEST, checks what MXP_MANIFEST / MXP_PLUGIN_PATH / the\n"
          "default manifest declare.\n"
          "\n"
          "  --strict    count packs unavailable on this machine as problems\n"
          "  -v          also print log messages emitted while loading\n"
          "  -h, --help  this help\n", f);
}

typedef struct check_log {
    int collecting;  /* count errors as problems (discovery phase) */
    int verbose;
    int n_errors;
} check_log;

static void check_sink(int level, const char *category, const char *message, void *user) {
    check_log *st = user;
    if (st->collecting && level <= MXP_LOG_ERROR) {
        st->n_errors++;
        fprintf(stderr, "mxplug check: problem: %s\n", message ? message : "");
    } else if (st->collecting && level <= MXP_LOG_WARN) {
        fprintf(stderr, "mxplug check: warning: %s\n", message ? message : "");
    } else if (st->verbose) {
        fprintf(stderr, "mxplug check: [%s] %s\n", category ? category : "", message ? message : "");
    }
}

static int same_file(const char *a, const char *b) {
    char ra[PATH_MAX], rb[PATH_MAX];
    if (!a || !b) return 0;
    if (!realpath(a, ra) || !realpath(b, rb)) return strcmp(a, b) == 0;
    return strcmp(ra, rb) == 0;
}

static const char *nz(const char *s) { return s ? s : "?"; }

int cmd_check(int argc, char **argv) {
    const char *manifest = NULL;
    int strict = 0;
    check_log st = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { check_help(stdout); return CLI_OK; }
        if (strcmp(argv[i], "--strict") == 0) strict = 1;
        else if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) st.verbose = 1;
        else if (argv[i][0] == '-') return cli_usage_error("check", "unknown option '%s'", argv[i]);
        else if (!manifest) manifest = argv[i];
        else return cli_usage_error("check", "one MANIFEST only");
    }
    if (manifest) {
        FILE *f = NULL;
        int orc = mxp_file_open_read(manifest, "manifest", 0, &f, NULL);
        if (orc) return cli_fail(orc, "check");
        fclose(f);
        setenv("MXP_MANIFEST", manifest, 1);
        unsetenv("MXP_PLUGIN_PATH");
    }

    int problems = 0, ok = 0, checked = 0;
    mxp_log_set_sink(check_sink, &st);
    st.collecting = 1;
    int rc = mxp_registry_init();
    st.collecting = 0;
    if (rc != MXP_OK) {
        cli_fail(rc, "reading manifests");
        problems++;
    }
    problems += st.n_errors;

    int n = mxp_pack_count();
    for (int i = 0; i < n; i++) {
        const mxp_pack *p = mxp_pack_at(i);
        if (manifest && !same_file(mxp_pack_manifest(p), manifest)) continue;
        checked++;
        const char *name = nz(mxp_pack_name(p)), *lib = nz(mxp_pack_library(p));
        const char *reason = NULL;
        int state = mxp_pack_state(p, &reason);
        if (state == MXP_PACK_UNAVAILABLE) {
            fprintf(stderr, "mxplug check: %s: pack '%s' (%s): unavailable: %s\n",
                    strict ? "problem" : "note", name, lib, nz(reason));
            if (strict) problems++;
            continue;
        }
        if (state == MXP_PACK_FAILED) {
            cli_pack_problem(" check: problem", name, lib, reason, 0);
            problems++;
            continue;
        }
        rc = mxp_pack_load(name);
        if (rc != MXP_OK) {
            cli_pack_problem(" check: problem", name, lib, mxp_last_error(), rc);
            problems++;
            continue;
        }
        printf("ok   %-20s %s\n", name, lib);
        ok++;
    }
    mxp_log_set_sink(NULL, NULL);
    if (checked == 0 && problems == 0) {
        cli_err("no packs declared%s%s", manifest ? " in " : "", manifest ? manifest : "");
        return CLI_FAIL;
    }
    printf("check: %d pack(s) ok, %d problem(s)\n", ok, problems);
    return problems ? CLI_FAIL : CLI_OK;
}
