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

static nnh_pack *p;
static void setup(void) { p = nnh_load("ops-nn"); cr_assert(p, "%s", nnh_error()); }
static void teardown(void) { nnh_unload(p); }

Test(manifest, matches_registration, .init = setup, .fini = teardown) {
    const char *m = slurp(MXP_SOURCE_DIR "/plugins/ops-nn/manifest.yaml");
    cr_assert(strstr(m, "- name: ops-nn\n"));
    cr_assert(strstr(m, "library: libmxp-ops-nn.so"));
    int listed = 0;
    for (const char *s = m; (s = strstr(s, "      - name: ")); s++) listed++;
    cr_assert_eq(listed, p->n_defs, "manifest lists %d ops, pack registers %d", listed, p->n_defs);
    for (int i = 0; i < p->n_defs; i++) {
        char key[128]; snprintf(key, sizeof key, "      - name: %s\n", p->defs[i]->name);
        const char *at = strstr(m, key);
        cr_assert(at, "op %s missing from manifest", p->defs[i]->name);
        const char *next = strstr(at + 1, "      - name: ");
        size_t len = next ? (size_t)(next - at) : strlen(at);
        char entry[2048]; snprintf(entry, sizeof entry, "%.*s", (int)len, at);
        for (int k = 0; p->defs[i]->aliases && p->defs[i]->aliases[k]; k++)
            cr_assert(strstr(entry, p->defs[i]->aliases[k]), "alias %s of %s missing", p->defs[i]->aliases[k], p->defs[i]->name);
        int nimpl = 0;
        for (const char *s = entry; (s = strstr(s, "{name: ")); s++) nimpl++;
        int reg = 0;
        for (int j = 0; j < p->n_impls; j++) {
            if (strcmp(p->impls[j]->op_name, p->defs[i]->name)) continue;
            reg++;
            char ik[160]; snprintf(ik, sizeof ik, "{name: %s, device: %s, rank: %d}", p->impls[j]->impl_name, p->impls[j]->device, p->impls[j]->rank);
            cr_assert(strstr(entry, ik), "impl %s missing for %s", ik, p->defs[i]->name);
        }
        cr_assert_eq(nimpl, reg, "%s: manifest %d impls, registered %d", p->defs[i]->name, nimpl, reg);
    }
}
