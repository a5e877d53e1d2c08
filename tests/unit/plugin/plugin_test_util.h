/* plugin_test_util.h — helpers shared by tests/unit/plugin/ (header-only:
 * each test is its own binary). Temp dirs, file writing, and the manifest
 * of the plugin_sel fixture pack. */
#ifndef MXP_TEST_PLUGIN_UTIL_H
#define MXP_TEST_PLUGIN_UTIL_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define PSEL_SO MXP_BUILD_DIR "/tests/fixtures/plugin_sel.so"

static inline char *tu_tmpdir(void) {
    char *d = strdup("/tmp/mxp-plugin-test-XXXXXX");
    cr_assert(d && mkdtemp(d));
    return d;
}

static inline char *tu_write(const char *dir, const char *name, const char *text) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    cr_assert(path);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return path;
}

static inline void tu_rmrf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}

/* The manifest entry of plugin_sel (what it registers). */
#define PSEL_ENTRY(name, lib)                                                 \
    "  - name: " name "\n"                                                    \
    "    version: 0.0.1\n"                                                    \
    "    abi: {major: 1, minor: 0, min_host_minor: 0}\n"                      \
    "    library: " lib "\n"                                                  \
    "    provides:\n"                                                         \
    "      ops:\n"                                                            \
    "        - name: psel_scale\n"                                            \
    "          aliases: [psel_scale_alias]\n"                                 \
    "          impls:\n"                                                      \
    "            - {name: fast, device: cpu, rank: 200}\n"                    \
    "            - {name: mid, device: cpu, rank: 150}\n"                     \
    "            - {name: slow, device: cpu, rank: 100}\n"                    \
    "        - name: psel_badd\n"                                             \
    "          impls: [{name: default, device: cpu, rank: 256}]\n"            \
    "        - name: psel_mul_scalar\n"                                       \
    "          impls: [{name: default, device: cpu, rank: 256}]\n"            \
    "        - name: psel_wmul\n"                                             \
    "          impls:\n"                                                      \
    "            - {name: dgrad_slow, device: cpu, rank: 200}\n"              \
    "            - {name: fwd_slow, device: cpu, rank: 100}\n"

static inline char *tu_psel_manifest(const char *dir) {
    return tu_write(dir, "psel.yaml", "manifest_version: 1\npacks:\n" PSEL_ENTRY("plugin-sel", PSEL_SO));
}

#endif
