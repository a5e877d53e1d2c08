/* test_manifest.c — manifest parsing: a full entry, defaults, and every
 * kind of error with file:line:column; version rules for unknown keys. */
#include "plugin_test_util.h"

#include "plugin/plugin_impl.h"

static mxp_manifest *parse_ok(const char *text) {
    mxp_manifest *m = NULL;
    int rc = mxp__manifest_parse_mem(text, strlen(text), "/tmp/x/m.yaml", &m);
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    return m;
}

static const char *parse_err(const char *text, int expect_rc) {
    mxp_manifest *m = NULL;
    int rc = mxp__manifest_parse_mem(text, strlen(text), "m.yaml", &m);
    cr_assert_eq(rc, expect_rc, "rc %d: %s", rc, mxp_last_error());
    cr_assert_null(m);
    return mxp_last_error();
}

Test(manifest, full_entry) {
    mxp_manifest *m = parse_ok(
        "manifest_version: 1\n"
        "packs:\n"
        "  - name: ops-basic\n"
        "    version: 0.1.0\n"
        "    abi: {major: 1, minor: 0, min_host_minor: 0}\n"
        "    library: libmxp-ops-basic.so\n"
        "    sha256: 3F2A000000000000000000000000000000000000000000000000000000000000\n"
        "    load: eager\n"
        "    depends: [other-pack]\n"
        "    requires:\n"
        "      cpu_features: [avx2, fma]\n"
        "      gpu: true\n"
        "      cuda_driver: \"12.0\"\n"
        "    provides:\n"
        "      ops:\n"
        "        - name: elemwise_add\n"
        "          aliases: [_plus, _add]\n"
        "          impls:\n"
        "            - {name: default, device: cpu, rank: 256}\n"
        "      impls:\n"
        "        - {op: Convolution, name: fast, rank: 64}\n"
        "      devices: [mock]\n"
        "      kvstores: [dist_sync]\n"
        "      iterators: [MNISTIter]\n");
    cr_assert_eq(m->n_packs, 1);
    mxp_man_pack *p = &m->packs[0];
    cr_expect_str_eq(p->name, "ops-basic");
    cr_expect_str_eq(p->version, "0.1.0");
    cr_expect_str_eq(p->library, "/tmp/x/libmxp-ops-basic.so");
    cr_expect_str_eq(p->sha256, "3f2a000000000000000000000000000000000000000000000000000000000000");
    cr_expect_eq(p->eager, 1);
    cr_expect_eq(p->abi_major, 1);
    cr_expect_eq(p->min_host_minor, 0);
    cr_assert_eq(p->n_depends, 1);
    cr_expect_str_eq(p->depends[0], "other-pack");
    cr_assert_eq(p->n_cpu_features, 2);
    cr_expect_str_eq(p->cpu_features[1], "fma");
    cr_expect_eq(p->need_gpu, 1);
    cr_expect_str_eq(p->cuda_driver, "12.0");
    cr_assert_eq(p->n_ops, 1);
    cr_expect_str_eq(p->ops[0].name, "elemwise_add");
    cr_assert_eq(p->ops[0].n_aliases, 2);
    cr_expect_str_eq(p->ops[0].aliases[1], "_add");
    cr_assert_eq(p->ops[0].n_impls, 1);
    cr_expect_eq(p->ops[0].impls[0].rank, 256);
    cr_expect_str_eq(p->ops[0].impls[0].op, "elemwise_add");
    cr_assert_eq(p->n_impls, 1);
    cr_expect_str_eq(p->impls[0].op, "Convolution");
    cr_expect_str_eq(p->impls[0].device, "cpu"); /* default */
    cr_expect_eq(p->impls[0].rank, 64);
    cr_expect_str_eq(p->devices[0], "mock");
    cr_expect_str_eq(p->kvstores[0], "dist_sync");
    cr_expect_str_eq(p->iterators[0], "MNISTIter");
    mxp__manifest_free(m);
}

Test(manifest, bare_list_fragment_and_defaults) {
    mxp_manifest *m = parse_ok("- name: a\n  library: /abs/liba.so\n- name: b\n  library: sub/libb.so\n");
    cr_assert_eq(m->n_packs, 2);
    cr_expect_str_eq(m->packs[0].library, "/abs/liba.so");
    cr_expect_str_eq(m->packs[1].library, "/tmp/x/sub/libb.so");
    cr_expect_eq(m->packs[1].eager, 0);
    cr_expect_eq(m->packs[1].abi_major, -1);
    mxp__manifest_free(m);
}

Test(manifest, malformed_yaml_has_line_and_column) {
    const char *e = parse_err("packs:\n  - name: a\n    library: [x\n", MXP_EFORMAT);
    cr_expect(strstr(e, "m.yaml:"), "%s", e);
    cr_expect(strstr(e, "malformed YAML"), "%s", e);
    /* The problem is reported on line 3 or 4 (at or after the open bracket). */
    cr_expect(strstr(e, "m.yaml:3:") || strstr(e, "m.yaml:4:"), "%s", e);
}

Test(manifest, misspelt_key_is_error_with_position) {
    const char *e = parse_err("manifest_version: 1\npacks:\n  - name: a\n    library: l.so\n    provdes: {}\n",
                              MXP_EFORMAT);
    cr_expect(strstr(e, "m.yaml:5:5: unknown key 'provdes'"), "%s", e);
}

Test(manifest, misspelt_nested_key) {
    const char *e = parse_err("packs:\n  - name: a\n    library: l.so\n    provides:\n      ops:\n"
                              "        - name: x\n          impls: [{name: d, rnak: 3}]\n", MXP_EFORMAT);
    cr_expect(strstr(e, "m.yaml:7:") && strstr(e, "'rnak'"), "%s", e);
}

static char g_warn[2048];
static void sink(int level, const char *cat, const char *msg, void *u) {
    (void)cat; (void)u;
    if (level == MXP_LOG_WARN) snprintf(g_warn + strlen(g_warn), sizeof g_warn - strlen(g_warn), "%s\n", msg);
}

Test(manifest, newer_version_unknown_key_warns) {
    g_warn[0] = '\0';
    mxp_log_set_sink(sink, NULL);
    mxp_manifest *m = parse_ok("manifest_version: 2\npacks:\n  - name: a\n    library: l.so\n    signature: xyz\n");
    mxp_log_set_sink(NULL, NULL);
    cr_expect_eq(m->version, 2);
    cr_expect_eq(m->n_packs, 1);
    cr_expect(strstr(g_warn, "signature"), "no warning naming the key: %s", g_warn);
    cr_expect(strstr(g_warn, "m.yaml:5:5"), "%s", g_warn);
    mxp__manifest_free(m);
}

Test(manifest, semantic_errors) {
    cr_expect(strstr(parse_err("packs:\n  - library: l.so\n", MXP_EFORMAT), "without a 'name'"));
    cr_expect(strstr(parse_err("packs:\n  - name: a\n", MXP_EFORMAT), "no 'library'"));
    cr_expect(strstr(parse_err("packs:\n  - name: a\n    library: l\n    load: sometimes\n", MXP_EFORMAT), "m.yaml:4:11"));
    cr_expect(strstr(parse_err("packs:\n  - name: a\n    library: l\n    sha256: abc\n", MXP_EFORMAT), "64 hex"));
    cr_expect(strstr(parse_err("packs:\n  - name: a\n    library: l\n    abi: {major: x}\n", MXP_EFORMAT), "integer"));
    cr_expect(strstr(parse_err("packs: 3\n", MXP_EFORMAT), "must be a list"));
    cr_expect(strstr(parse_err("", MXP_EFORMAT), "empty"));
    cr_expect(strstr(parse_err("- 1\n", MXP_EFORMAT), "mapping"));
}

Test(manifest, missing_file) {
    mxp_manifest *m;
    cr_expect_eq(mxp__manifest_parse_file("/nonexistent/manifest.yaml", &m), MXP_EIO);
    cr_expect(strstr(mxp_last_error(), "/nonexistent/manifest.yaml"));
}
