/* test_yaml_file.c — the helper the user config and the tune cache share
 * (plugin/yaml_file.c): per-user paths from XDG_* or HOME, the (path,
 * mtime) stamp that decides a re-read, the guarded parse (missing file,
 * malformed file named with line and column), directory creation; and the
 * registry's held-lock counts the *_locked assertions read. */
#include <criterion/criterion.h>

#include "plugin/plugin_impl.h"
#include "plugin/yaml_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/mxp-yfile-XXXXXX");
    cr_assert(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) { /* harmless */ }
}
TestSuite(yaml_file, .init = setup, .fini = teardown, .timeout = 60);

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

Test(yaml_file, user_path_prefers_xdg_then_home) {
    char buf[256];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/home/u", 1);
    cr_assert_eq(mxp__user_file_path("XDG_CACHE_HOME", ".cache", "tune.yaml", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/x/cache/mxplug/tune.yaml");
    setenv("XDG_CACHE_HOME", "", 1);
    cr_assert_eq(mxp__user_file_path("XDG_CACHE_HOME", ".cache", "tune.yaml", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/home/u/.cache/mxplug/tune.yaml");
    unsetenv("HOME");
    cr_expect_eq(mxp__user_file_path("XDG_CACHE_HOME", ".cache", "tune.yaml", buf, sizeof buf), -1);
    setenv("XDG_CACHE_HOME", "/x", 1);
    cr_expect_eq(mxp__user_file_path("XDG_CACHE_HOME", ".cache", "tune.yaml", buf, 8), -1, "too small: %s", buf);
}

Test(yaml_file, stamp_reports_new_path_and_new_mtime_only) {
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/a.yaml", dir);
    snprintf(b, sizeof b, "%s/b.yaml", dir);
    mxp__file_stamp st = {0};
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 1, "nothing recorded yet (file missing)");
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 0, "still missing: unchanged");
    write_file(a, "x: 1\n");
    struct timespec t[2] = {{1000000000, 0}, {1000000000, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, a, t, 0), 0);
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 1, "created");
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 0);
    t[1].tv_nsec = 5; /* a rewrite within the same second */
    cr_assert_eq(utimensat(AT_FDCWD, a, t, 0), 0);
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 1, "mtime moved by 5 ns");
    cr_expect_eq(mxp__file_stamp_changed(&st, b), 1, "another path");
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 1, "back to the first path");
    /* Our own write: touch records it, so it is not news. */
    t[1].tv_sec = 1000000100;
    cr_assert_eq(utimensat(AT_FDCWD, a, t, 0), 0);
    mxp__file_stamp_touch(&st, a);
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 0);
    mxp__file_stamp_clear(&st);
    cr_expect_eq(mxp__file_stamp_changed(&st, a), 1, "cleared");
}

Test(yaml_file, load_missing_valid_and_malformed) {
    char p[128];
    snprintf(p, sizeof p, "%s/c.yaml", dir);
    yaml_document_t doc;
    int found = 7;
    cr_assert_eq(mxp__yaml_file_load(p, "test file", 1 << 20, &doc, &found), MXP_OK);
    cr_expect_eq(found, 0);
    write_file(p, "impl:\n  Convolution: gemm\n");
    cr_assert_eq(mxp__yaml_file_load(p, "test file", 1 << 20, &doc, &found), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(found, 1);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    cr_assert(root && root->type == YAML_MAPPING_NODE);
    yaml_node_t *v = yaml_document_get_node(&doc, root->data.mapping.pairs.start->value);
    yaml_node_t *k = yaml_document_get_node(&doc, v->data.mapping.pairs.start->key);
    cr_expect_str_eq((char *)k->data.scalar.value, "Convolution");
    yaml_document_delete(&doc);
    write_file(p, "a: 1\nb: [unclosed\n");
    cr_expect_eq(mxp__yaml_file_load(p, "test file", 1 << 20, &doc, &found), MXP_EFORMAT);
    cr_expect_eq(found, 0);
    char want[160];
    snprintf(want, sizeof want, "test file %s:3:", p);
    cr_expect(strstr(mxp_last_error(), want), "'%s' should contain '%s'", mxp_last_error(), want);
    write_file(p, "a: &x 1\nb: *x\n");
    cr_expect_eq(mxp__yaml_file_load(p, "test file", 1 << 20, &doc, &found), MXP_EFORMAT, "aliases refused");
}

Test(yaml_file, mkdirs_for_creates_parents_and_names_failures) {
    char p[160];
    snprintf(p, sizeof p, "%s/x/y/z.yaml", dir);
    cr_assert_eq(mxp__mkdirs_for(p, "test file"), MXP_OK, "%s", mxp_last_error());
    char d[160];
    snprintf(d, sizeof d, "%s/x/y", dir);
    struct stat st;
    cr_expect(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
    char blocker[128];
    snprintf(blocker, sizeof blocker, "%s/file", dir);
    write_file(blocker, "");
    snprintf(p, sizeof p, "%s/file/sub/z.yaml", dir);
    cr_expect_eq(mxp__mkdirs_for(p, "test file"), MXP_EIO);
    cr_expect(strstr(mxp_last_error(), "test file '") && strstr(mxp_last_error(), "cannot create its directory"),
              "%s", mxp_last_error());
}

Test(yaml_file, registry_lock_counts_follow_this_thread) {
    cr_expect_eq(mxp__registry_held(), 0);
    mxp__registry_rdlock();
    mxp__registry_rdlock();
    cr_expect_eq(mxp__registry_held(), 1);
    cr_expect_eq(mxp__registry_held_exclusive(), 0);
    mxp__registry_unlock();
    cr_expect_eq(mxp__registry_held(), 1, "one shared hold left");
    mxp__registry_unlock();
    cr_expect_eq(mxp__registry_held(), 0);
    mxp__registry_wrlock();
    cr_expect_eq(mxp__registry_held_exclusive(), 1);
    mxp__registry_unlock();
    cr_expect_eq(mxp__registry_held(), 0);
    cr_expect_eq(mxp__registry_load_held(), 0);
    mxp__registry_load_lock();
    mxp__registry_load_lock(); /* recursive */
    mxp__registry_load_unlock();
    cr_expect_eq(mxp__registry_load_held(), 1);
    mxp__registry_load_unlock();
    cr_expect_eq(mxp__registry_load_held(), 0);
}
