/* reload_fixture.h — a temp directory holding the "fx-reload" fixture pack
 * (tests/fixtures/packs/fx_reload_tag.h) the way a developer's build tree
 * does: a library the tests replace by rename, as a rebuild would, and a
 * manifest they rewrite when a rebuild changes the ops the pack defines.
 * For the tests of mxp_pack_reload's op changes and of pack counters.
 * Header-only (static inline), Criterion asserts; one directory per
 * process (each Criterion test runs in its own). */
#ifndef MXP_TESTS_RELOAD_FIXTURE_H
#define MXP_TESTS_RELOAD_FIXTURE_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RFX_SO(name) MXP_BUILD_DIR "/tests/fixtures/" name ".so"

static char rfx_dir[64], rfx_lib[128], rfx_manifest[128];

static inline void rfx_copy(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    cr_assert(in && out, "copy %s -> %s", from, to);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) cr_assert_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    cr_assert_eq(fclose(out), 0);
}

/* What a rebuild does: write next to the target, rename over it. */
static inline void rfx_install(const char *so) {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", rfx_lib);
    rfx_copy(so, tmp);
    cr_assert_eq(rename(tmp, rfx_lib), 0);
}

/* (Re)write the manifest: fx-reload defines fx_tag and, when extra_op is
 * not NULL, that op with the alias "<extra_op>_alias"; also by rename. */
static inline void rfx_write_manifest(const char *extra_op) {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", rfx_manifest);
    FILE *f = fopen(tmp, "w");
    cr_assert(f);
    fprintf(f, "manifest_version: 1\n"
               "packs:\n"
               "  - name: fx-reload\n"
               "    version: 1.0.0\n"
               "    library: libfx-reload.so\n"
               "    provides:\n"
               "      ops:\n"
               "        - name: fx_tag\n"
               "          impls: [{name: default, device: cpu, rank: 256}]\n");
    if (extra_op)
        fprintf(f, "        - name: %s\n"
                   "          aliases: [%s_alias]\n"
                   "          impls: [{name: default, device: cpu, rank: 256}]\n", extra_op, extra_op);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(rename(tmp, rfx_manifest), 0);
}

/* A temp dir with `so` installed as libfx-reload.so and its manifest; the
 * registry reads the build's own manifest (ops-basic etc.) and this one. */
static inline void rfx_setup(const char *so, const char *extra_op) {
    snprintf(rfx_dir, sizeof rfx_dir, "/tmp/mxp-rfx-XXXXXX");
    cr_assert(mkdtemp(rfx_dir));
    snprintf(rfx_lib, sizeof rfx_lib, "%s/libfx-reload.so", rfx_dir);
    snprintf(rfx_manifest, sizeof rfx_manifest, "%s/manifest.yaml", rfx_dir);
    rfx_copy(so, rfx_lib);
    rfx_write_manifest(extra_op);
    char env[512];
    snprintf(env, sizeof env, "%s:%s", MXP_BUILD_DIR "/plugins/manifest.yaml", rfx_manifest);
    setenv("MXP_MANIFEST", env, 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
    setenv("MXP_RELOAD_TIMEOUT_MS", "20000", 1);
}

static inline void rfx_teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rfx_dir);
    if (system(cmd)) { /* harmless */ }
}

#endif /* MXP_TESTS_RELOAD_FIXTURE_H */
