/* test_manifest.c — plugins/ops-nn/manifest.yaml (hand-written until
 * `mxplug manifest gen` exists) lists exactly the ops, aliases and impls
 * (name, device, rank) the pack registers, in the draft schema's shape. */
#include <stdio.h>
#include <string.h>
#include "nn_test_util.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0; fclose(f);
    return buf;
}

static fh_pack *p;
static void setup(void) { p = nn_load("ops-nn"); cr_assert(p, "%s", fh_error()); }
static void teardown(void) { fh_unload(p); }

Test(manifest, matches_registration, .init = setup, .fini = teardown) {
    const char *m = slurp(MXP_SOURCE_DIR "/plugins/ops-nn/manifest.yaml");
    cr_assert(strstr(m, "- name: ops-nn\n"));
    cr_assert(strstr(m, "library: libmxp-ops-nn.so"));
    int listed = 0;
    for (const char *s = m; (s = strstr(s, "      - name: ")); s++) listed++;
    cr_assert_eq(listed, fh_n_ops(p), "manifest lists %d ops, pack registers %d", listed, fh_n_ops(p));
    for (int i = 0; i < fh_n_ops(p); i++) {
        char key[128]; snprintf(key, sizeof key, "      - name: %s\n", fh_op_at(p, i)->name);
        const char *at = strstr(m, key);
        cr_assert(at, "op %s missing from manifest", fh_op_at(p, i)->name);
        const char *next = strstr(at + 1, "      - name: ");
        size_t len = next ? (size_t)(next - at) : strlen(at);
        char entry[2048]; snprintf(entry, sizeof entry, "%.*s", (int)len, at);
        for (int k = 0; fh_op_at(p, i)->aliases && fh_op_at(p, i)->aliases[k]; k++)
            cr_assert(strstr(entry, fh_op_at(p, i)->aliases[k]), "alias %s of %s missing", fh_op_at(p, i)->aliases[k], fh_op_at(p, i)->name);
        int nimpl = 0;
        for (const char *s = entry; (s = strstr(s, "{name: ")); s++) nimpl++;
        int reg = 0;
        for (int j = 0; j < fh_n_impls(p); j++) {
            if (strcmp(fh_impl_at(p, j)->op_name, fh_op_at(p, i)->name)) continue;
            reg++;
            char ik[160]; snprintf(ik, sizeof ik, "{name: %s, device: %s, rank: %d}", fh_impl_at(p, j)->impl_name, fh_impl_at(p, j)->device, fh_impl_at(p, j)->rank);
            cr_assert(strstr(entry, ik), "impl %s missing for %s", ik, fh_op_at(p, i)->name);
        }
        cr_assert_eq(nimpl, reg, "%s: manifest %d impls, registered %d", fh_op_at(p, i)->name, nimpl, reg);
    }
}
