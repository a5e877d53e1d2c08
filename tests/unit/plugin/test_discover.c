/* test_discover.c — search order (MXP_MANIFEST list, MXP_PLUGIN_PATH),
 * first-found-wins for duplicate pack names, MXP_PACKS, requires:, lazy
 * registry (manifest-only listing without opening the .so). */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

static char *g_dir;

static void setup(void) {
    g_dir = tu_tmpdir();
    unsetenv("MXP_MANIFEST");
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
}
static void teardown(void) {
    mxp_registry_shutdown();
    tu_rmrf(g_dir);
    free(g_dir);
}
TestSuite(discover, .init = setup, .fini = teardown);

Test(discover, lazy_listing_from_manifest_only) {
    /* The library does not exist: listing must still work (never opened). */
    char *m = tu_write(g_dir, "m.yaml", "packs:\n  - name: ghost\n    library: libghost.so\n    provides:\n"
                                        "      ops:\n        - name: ghost_op\n          aliases: [g_op]\n"
                                        "          impls: [{name: a, rank: 5}, {name: b, rank: 9}]\n");
    setenv("MXP_MANIFEST", m, 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    const mxp_op *op = mxp_op_find("g_op");
    cr_assert(op);
    cr_expect_str_eq(mxp_op_name(op), "ghost_op");
    cr_expect_str_eq(mxp_op_pack(op), "ghost");
    cr_expect_eq(mxp_op_impl_count(op), 2);
    cr_expect_eq(mxp_op_impl_rank(op, 1), 9);
    const mxp_pack *p = mxp_pack_find("ghost");
    cr_assert(p);
    cr_expect_eq(mxp_pack_state(p, NULL), MXP_PACK_NOT_LOADED);
    /* First use fails clearly, naming the pack and file. */
    cr_expect_neq(mxp_op_load(op), MXP_OK);
    cr_expect(strstr(mxp_last_error(), "ghost") && strstr(mxp_last_error(), "libghost.so"), "%s", mxp_last_error());
    const char *why;
    cr_expect_eq(mxp_pack_state(p, &why), MXP_PACK_FAILED);
    cr_expect(strstr(why, "not found"), "%s", why);
    free(m);
}

Test(discover, manifest_list_order_first_wins) {
    char *a = tu_write(g_dir, "a.yaml", "packs:\n  - {name: p, version: '1', library: liba.so}\n");
    char *b = tu_write(g_dir, "b.yaml", "packs:\n  - {name: p, version: '2', library: libb.so}\n"
                                        "  - {name: q, library: libq.so}\n");
    char list[1024];
    snprintf(list, sizeof list, "%s:%s", b, a);
    setenv("MXP_MANIFEST", list, 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(mxp_pack_version(mxp_pack_find("p")), "2");
    cr_expect(strstr(mxp_pack_manifest(mxp_pack_find("p")), "b.yaml"));
    cr_expect(mxp_pack_find("q"));
    cr_expect_eq(mxp_pack_count(), 2);
    free(a); free(b);
}

Test(discover, plugin_path_after_manifest_env) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/dir1", g_dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    char *d = tu_write(sub, "manifest.yaml", "packs:\n  - {name: p, version: from-path, library: x.so}\n"
                                             "  - {name: r, library: r.so}\n");
    char *e = tu_write(g_dir, "e.yaml", "packs:\n  - {name: p, version: from-env, library: y.so}\n");
    setenv("MXP_MANIFEST", e, 1);
    char pp[1024];
    snprintf(pp, sizeof pp, "/nonexistent-dir:%s", sub);
    setenv("MXP_PLUGIN_PATH", pp, 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    cr_expect_str_eq(mxp_pack_version(mxp_pack_find("p")), "from-env");
    cr_expect(mxp_pack_find("r"));
    cr_expect_str_eq(mxp_pack_library(mxp_pack_find("r")), strcat(sub, "/r.so"));
    free(d); free(e);
}

Test(discover, explicit_missing_manifest_is_error) {
    setenv("MXP_MANIFEST", "/nonexistent/m.yaml", 1);
    cr_expect_neq(mxp_registry_init(), MXP_OK);
    cr_expect(strstr(mxp_last_error(), "/nonexistent/m.yaml"));
}

Test(discover, mxp_packs_restricts) {
    char *m = tu_psel_manifest(g_dir);
    char *o = tu_write(g_dir, "o.yaml", "packs:\n  - {name: other, library: o.so}\n");
    char list[1024];
    snprintf(list, sizeof list, "%s:%s", m, o);
    setenv("MXP_MANIFEST", list, 1);
    setenv("MXP_PACKS", "other, something", 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
    const char *why;
    cr_expect_eq(mxp_pack_state(mxp_pack_find("plugin-sel"), &why), MXP_PACK_UNAVAILABLE);
    cr_expect(strstr(why, "MXP_PACKS"), "%s", why);
    cr_expect_eq(mxp_pack_state(mxp_pack_find("other"), NULL), MXP_PACK_NOT_LOADED);
    cr_expect_eq(mxp_pack_load("plugin-sel"), MXP_EUNSUPPORTED);
    cr_expect(strstr(mxp_last_error(), "plugin-sel"));
    free(m); free(o);
}

Test(discover, requires_cpu_feature) {
    char *ci = tu_write(g_dir, "cpuinfo", "processor : 0\nflags : fpu sse2 avx2\n");
    setenv("MXP_CPUINFO", ci, 1);
    char *m = tu_write(g_dir, "m.yaml", "packs:\n"
                                        "  - {name: ok, library: a.so, requires: {cpu_features: [avx2]}}\n"
                                        "  - {name: no, library: b.so, requires: {cpu_features: [avx512f]}}\n"
                                        "  - {name: gpu, library: c.so, requires: {gpu: true}}\n");
    setenv("MXP_MANIFEST", m, 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK);
    const char *why;
    cr_expect_eq(mxp_pack_state(mxp_pack_find("ok"), NULL), MXP_PACK_NOT_LOADED);
    cr_expect_eq(mxp_pack_state(mxp_pack_find("no"), &why), MXP_PACK_UNAVAILABLE);
    cr_expect(strstr(why, "avx512f"), "%s", why);
    if (access("/dev/nvidia0", F_OK) != 0) {
        cr_expect_eq(mxp_pack_state(mxp_pack_find("gpu"), &why), MXP_PACK_UNAVAILABLE);
        cr_expect(strstr(why, "GPU"), "%s", why);
    }
    unsetenv("MXP_CPUINFO");
    free(m); free(ci);
}

Test(discover, load_and_manifest_gen) {
    char *m = tu_psel_manifest(g_dir);
    setenv("MXP_MANIFEST", m, 1);
    cr_assert_eq(mxp_pack_load("plugin-sel"), MXP_OK, "%s", mxp_last_error());
    const mxp_op *op = mxp_op_find("psel_scale_alias");
    cr_assert(op);
    cr_expect_str_eq(mxp_op_doc(op), "Scale by factor (fixture).");
    cr_expect_eq(mxp_op_param_count(op), 1);
    const char *name, *type, *dflt;
    cr_assert_eq(mxp_op_param_at(op, 0, &name, &type, &dflt, NULL, NULL, NULL), MXP_OK);
    cr_expect_str_eq(name, "factor");
    cr_expect_str_eq(type, "float");
    cr_expect_str_eq(dflt, "1.0");
    /* SimpleOp expansion: scalar param and arg names. */
    const mxp_op *ms = mxp_op_find("psel_mul_scalar");
    cr_assert(ms);
    cr_expect_eq(mxp_op_param_count(ms), 1);
    char names[4][64];
    int n;
    cr_assert_eq(mxp_op_list_names(mxp_op_find("psel_badd"), 0, NULL, NULL, 0, names, 4, &n), MXP_OK);
    cr_expect_eq(n, 2);
    cr_expect_str_eq(names[1], "rhs");
    char *yaml = NULL;
    cr_assert_eq(mxp_pack_manifest_gen(PSEL_SO, &yaml), MXP_OK, "%s", mxp_last_error());
    cr_expect(strstr(yaml, "- name: plugin-sel\n"), "%s", yaml);
    cr_expect(strstr(yaml, "library: plugin_sel.so\n"), "%s", yaml);
    cr_expect(strstr(yaml, "{name: fast, device: cpu, rank: 200}"), "%s", yaml);
    cr_expect(strstr(yaml, "aliases: [psel_scale_alias]"), "%s", yaml);
    /* The generated entry parses and matches what the pack registers. */
    char doc[4096];
    snprintf(doc, sizeof doc, "packs:\n");
    for (const char *p = yaml; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        strncat(doc, "  ", sizeof doc - strlen(doc) - 1);
        strncat(doc, p, len < sizeof doc - strlen(doc) - 1 ? len : sizeof doc - strlen(doc) - 1);
        p += len;
    }
    mxp_manifest *mf;
    cr_assert_eq(mxp__manifest_parse_mem(doc, strlen(doc), MXP_BUILD_DIR "/tests/fixtures/gen.yaml", &mf), MXP_OK, "%s\n%s", mxp_last_error(), doc);
    cr_expect_eq(mf->packs[0].n_ops, 4); /* psel_scale, psel_badd, psel_mul_scalar, psel_wmul */
    cr_expect_str_eq(mf->packs[0].library, PSEL_SO);
    mxp__manifest_free(mf);
    free(yaml);
    free(m);
}
