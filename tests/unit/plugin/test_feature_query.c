/* test_feature_query.c — mxp_feature_*: iterators, kvstore types and
 * devices listed from the manifests and described from their packs.
 * Expected values are MXNet's documented MNISTIter parameters and the
 * io-image manifest's declared names; a reload must leave strings returned
 * earlier readable (ASan checks that). */
#include <criterion/criterion.h>
#include <mxplug.h>

#include <stdlib.h>
#include <string.h>

static void setup(void) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    cr_assert_eq(mxp_registry_init(), MXP_OK, "%s", mxp_last_error());
}
static void teardown(void) { mxp_registry_shutdown(); }

TestSuite(feature_query, .init = setup, .fini = teardown);

static int find(const char *kind, const char *name, const char **pack) {
    int n = mxp_feature_count(kind);
    for (int i = 0; i < n; i++)
        if (!strcmp(mxp_feature_at(kind, i, pack), name)) return i;
    return -1;
}

Test(feature_query, lists_manifest_and_builtin_names) {
    const char *pack = NULL;
    cr_assert_geq(find("iterator", "MNISTIter", &pack), 0);
    cr_assert_str_eq(pack, "io-image");
    cr_assert_geq(find("iter", "ImageRecordIter", &pack), 0);
    cr_assert_eq(find("kvstore", "local", &pack), 0, "runtime types come first");
    cr_assert_str_eq(pack, "runtime");
    cr_assert_geq(find("kvstore", "dist_sync", &pack), 0);
    cr_assert_str_eq(pack, "kvstore-dist");
    cr_assert_eq(find("device", "cpu", &pack), 0);
    /* Listing opened nothing. */
    const char *reason;
    cr_assert_eq(mxp_pack_state(mxp_pack_find("io-image"), &reason), MXP_PACK_NOT_LOADED);
    cr_assert_null(mxp_feature_at("iterator", mxp_feature_count("iterator"), NULL));
}

Test(feature_query, bad_kind_and_unknown_name) {
    cr_assert_eq(mxp_feature_count("op"), -1);
    cr_assert(strstr(mxp_last_error(), "unknown kind 'op'"), "%s", mxp_last_error());
    cr_assert_null(mxp_feature_at(NULL, 0, NULL));
    const char *doc = "x";
    cr_assert_eq(mxp_feature_describe("iterator", "NoSuchIter", NULL, &doc, NULL), MXP_ENOENT);
    cr_assert_null(doc);
    cr_assert(strstr(mxp_last_error(), "NoSuchIter"), "%s", mxp_last_error());
}

Test(feature_query, describes_mnist_iter_schema) {
    const char *pack, *doc;
    int np = 0;
    cr_assert_eq(mxp_feature_describe("iterator", "MNISTIter", &pack, &doc, &np), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(pack, "io-image");
    cr_assert(strstr(doc, "MNIST"));
    int seen = 0;
    for (int i = 0; i < np; i++) {
        const char *name, *type, *def, *range, *choices, *pdoc;
        cr_assert_eq(mxp_feature_param_at("iterator", "MNISTIter", i, &name, &type, &def, &range, &choices, &pdoc),
                     MXP_OK);
        if (!strcmp(name, "batch_size")) { cr_assert_str_eq(type, "int"); cr_assert_str_eq(def, "128"); seen |= 1; }
        if (!strcmp(name, "shuffle")) { cr_assert_str_eq(type, "boolean"); cr_assert_str_eq(def, "True"); seen |= 2; }
        if (!strcmp(name, "flat")) { cr_assert_str_eq(def, "False"); seen |= 4; }
    }
    cr_assert_eq(seen, 7, "batch_size, shuffle and flat all listed (seen mask %d)", seen);
    cr_assert_eq(mxp_feature_param_at("iterator", "MNISTIter", np, NULL, NULL, NULL, NULL, NULL, NULL), MXP_EINVAL);
}

Test(feature_query, strings_survive_a_reload) {
    const char *doc1, *doc2, *p0name;
    int np1, np2;
    cr_assert_eq(mxp_feature_describe("iterator", "MNISTIter", NULL, &doc1, &np1), MXP_OK);
    cr_assert_eq(mxp_feature_param_at("iterator", "MNISTIter", 0, &p0name, NULL, NULL, NULL, NULL, NULL), MXP_OK);
    char *copy = strdup(doc1);
    cr_assert_eq(mxp_pack_reload("io-image"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_feature_describe("iterator", "MNISTIter", NULL, &doc2, &np2), MXP_OK);
    cr_assert_str_eq(doc1, copy, "the old record is retired, not freed");
    cr_assert_str_eq(doc2, copy);
    cr_assert_eq(np1, np2);
    cr_assert_gt(strlen(p0name), 0);
    free(copy);
}

Test(feature_query, builtin_kvstore_has_doc_and_no_params) {
    const char *pack, *doc;
    int np = -1;
    cr_assert_eq(mxp_feature_describe("kvstore", "local", &pack, &doc, &np), MXP_OK);
    cr_assert_str_eq(pack, "runtime");
    cr_assert_gt(strlen(doc), 10);
    cr_assert_eq(np, 0);
}
