/* test_user_yaml_roundtrip.c — what the runtime writes into the user config
 * and the tune cache reads back as it was, and an ignored config is ignored
 * whole (issue 12 §6, found by tests/fuzz/fuzz_user_yaml):
 *  - the config writer put names between '"' unescaped: an op name with a
 *    '"' (accepted from a hand-written config) made the rewritten file
 *    unreadable, so every policy in it was lost;
 *  - the tune cache writer escaped only '"', '\' and C0 controls: a timing
 *    name holding U+0085 or U+2028 read back as a line break (another
 *    name), one holding U+0080 not at all;
 *  - a config whose second 'impl' key was malformed was reported as
 *    ignored but kept the entries of the first.
 * The expected files are written by hand here; the runtime reads them. */
#include <criterion/criterion.h>

#include "plugin/plugin_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[64], cfg_path[160], tune_path[160];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/mxp-yamlrt-XXXXXX");
    cr_assert(mkdtemp(dir));
    char p[160];
    snprintf(p, sizeof p, "%s/config", dir);
    setenv("XDG_CONFIG_HOME", p, 1);
    snprintf(p, sizeof p, "%s/cache", dir);
    setenv("XDG_CACHE_HOME", p, 1);
    snprintf(cfg_path, sizeof cfg_path, "%s/config/mxplug/config.yaml", dir);
    snprintf(tune_path, sizeof tune_path, "%s/cache/mxplug/tune.yaml", dir);
    snprintf(p, sizeof p, "mkdir -p '%s/config/mxplug' '%s/cache/mxplug'", dir, dir);
    cr_assert_eq(system(p), 0);
    mxp__select_reset();
    mxp__tune_reset();
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}
TestSuite(user_yaml, .init = setup, .fini = teardown, .timeout = 60);

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static const char *policy(const char *op) {
    static char buf[256];
    return mxp__config_policy(op, op, buf, sizeof buf) ? buf : NULL;
}

Test(user_yaml, config_names_with_quotes_and_odd_characters_survive_a_rewrite) {
    /* Plain scalar 'Conv"x', a backslash, U+0085, U+2028 and U+0080. */
    put(cfg_path, "impl:\n  Conv\"x: gemm\n  \"back\\\\slash\": \"a\\\"b\"\n  \"nel\\u0085\": \"ls\\u2028x\"\n"
                  "  \"c1\\x80\": direct\n");
    cr_assert_str_eq(policy("Conv\"x"), "gemm");
    cr_assert_eq(mxp_config_set_impl("FullyConnected", "blas"), MXP_OK, "%s", mxp_last_error());
    mxp__select_reset(); /* read the rewritten file from disk */
    cr_assert_str_eq(policy("FullyConnected"), "blas");
    cr_assert(policy("Conv\"x"), "the rewritten config lost its entries");
    cr_assert_str_eq(policy("Conv\"x"), "gemm");
    cr_assert_str_eq(policy("back\\slash"), "a\"b");
    cr_assert_str_eq(policy("nel\xc2\x85"), "ls\xe2\x80\xa8x");
    cr_assert_str_eq(policy("c1\xc2\x80"), "direct");
}

Test(user_yaml, an_ignored_config_applies_no_entry) {
    put(cfg_path, "impl: {Convolution: gemm}\nimpl: 3\n");
    cr_assert_null(policy("Convolution"), "half of an ignored config was applied");
}

Test(user_yaml, tune_cache_names_survive_a_rewrite) {
    put(tune_path, "version: 1\nentries:\n"
                   "  - {op: \"Op\\\"q\", signature: \"sig\\u2028one\", choice: \"c\\u0085\","
                   " times_ms: {\"\\u0085a\": 1.5, \"b\\x80\": 2, \"\\U0001F600\": 3}}\n");
    mxp__tune_entry e;
    cr_assert_eq(mxp__tune_cache_find("sig\xe2\x80\xa8one", &e), 1);
    mxp__tune_entry_free(&e);
    char *names[] = {"x"};
    double ms[] = {1};
    mxp__tune_entry mine = {.op = "Other", .sig = "other", .choice = "x", .n_times = 1, .names = names, .ms = ms};
    cr_assert_eq(mxp__tune_cache_save(&mine), MXP_OK, "%s", mxp_last_error());
    mxp__tune_reset();
    cr_assert_eq(mxp__tune_cache_find("sig\xe2\x80\xa8one", &e), 1, "the rewritten cache lost the entry");
    cr_assert_str_eq(e.op, "Op\"q");
    cr_assert_str_eq(e.choice, "c\xc2\x85");
    cr_assert_eq(e.n_times, 3);
    cr_assert_str_eq(e.names[0], "\xc2\x85" "a");
    cr_assert_str_eq(e.names[1], "b\xc2\x80");
    cr_assert_str_eq(e.names[2], "\xf0\x9f\x98\x80");
    cr_assert_float_eq(e.ms[0], 1.5, 1e-9);
    mxp__tune_entry_free(&e);
}
