/* test_yaml_bounds.c — YAML files mxplug reads cost memory and time in
 * proportion to their size (issue 12 §3): a manifest with anchors/aliases
 * ("billion laughs") and a deeply nested one are refused, naming file, line
 * and cause (the pre-pass stops at the cap, so the cost is linear in the
 * bytes read); the user config refuses aliases too.  Before, aliases were expanded on every
 * walk and 100 KB of nesting took seconds (quadratic). */
#include <criterion/criterion.h>

#include "plugin/plugin_impl.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/mxp-yaml-XXXXXX");
    cr_assert(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}
TestSuite(yaml_bounds, .init = setup, .fini = teardown, .timeout = 60);

static int parse(const char *text, mxp_manifest **m) {
    *m = NULL;
    return mxp__manifest_parse_mem(text, strlen(text), "/tmp/x/m.yaml", m);
}

Test(yaml_bounds, manifest_aliases_are_refused) {
    /* Each level doubles the walk: 2^20 visits of the leaf list. */
    char text[8192];
    int n = snprintf(text, sizeof text, "manifest_version: 1\nl0: &a0 [x, x]\n");
    for (int i = 1; i <= 20; i++) n += snprintf(text + n, sizeof text - n, "l%d: &a%d [*a%d, *a%d]\n", i, i, i - 1, i - 1);
    snprintf(text + n, sizeof text - n, "packs: []\n");
    mxp_manifest *m;
    cr_assert_eq(parse(text, &m), MXP_EFORMAT, "a manifest of aliases was accepted");
    cr_assert_null(m);
    cr_assert(strstr(mxp_last_error(), "m.yaml:2:") && strstr(mxp_last_error(), "anchors"), "%s", mxp_last_error());
    const char *alias_only = "manifest_version: 1\npacks: *nothing\n";
    cr_assert_eq(parse(alias_only, &m), MXP_EFORMAT);
}

Test(yaml_bounds, deep_nesting_is_refused_at_the_cap) {
    size_t depth = 100000;
    char *text = malloc(2 * depth + 64);
    cr_assert(text);
    size_t n = (size_t)sprintf(text, "manifest_version: 1\npacks: ");
    for (size_t i = 0; i < depth; i++) text[n++] = '[';
    for (size_t i = 0; i < depth; i++) text[n++] = ']';
    text[n++] = '\n';
    text[n] = 0;
    mxp_manifest *m;
    cr_assert_eq(parse(text, &m), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "nesting deeper than") && strstr(mxp_last_error(), "m.yaml:2:"), "%s",
              mxp_last_error());
    free(text);
}

Test(yaml_bounds, config_and_tune_cache_refuse_aliases) {
    char cfg[128], cache[128];
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    cr_assert_eq(mkdir(cfg, 0700), 0);
    cr_assert_eq(mkdir(cache, 0700), 0);
    setenv("XDG_CONFIG_HOME", cfg, 1);
    setenv("XDG_CACHE_HOME", cache, 1);
    char p[256];
    snprintf(p, sizeof p, "%s/mxplug", cfg);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/mxplug/config.yaml", cfg);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fputs("x: &p gemm\nimpl:\n  Convolution: *p\n", f);
    fclose(f);
    /* Setting a policy reads the existing config first. */
    cr_assert_eq(mxp_config_set_impl("Convolution", "direct"), MXP_EFORMAT, "a config with aliases was read");
    cr_assert(strstr(mxp_last_error(), "config.yaml") && strstr(mxp_last_error(), "not allowed"), "%s",
              mxp_last_error());
}
