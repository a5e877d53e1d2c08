/* test_env.c — MXP_* variables are parsed by one helper that warns about a
 * value it cannot use (issue 12 §5): mxp__env_int / mxp__env_bool return the
 * value or the default, and a bad value produces one warning naming the
 * variable, the value and the default; the executor's MXP_EXEC_MEMPLAN=zz
 * (ignored silently before) now warns at bind. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include "base/env.h"

#include <stdlib.h>
#include <string.h>

static char seen[8][512];
static int n_seen;
static void sink(int level, const char *cat, const char *msg, void *user) {
    (void)user;
    if (level <= MXP_LOG_WARN && n_seen < 8) snprintf(seen[n_seen++], sizeof seen[0], "[%s] %s", cat, msg);
}
static void setup(void) {
    n_seen = 0;
    mxp_log_set_sink(sink, NULL);
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
}
TestSuite(env, .init = setup, .timeout = 30);

static int warned(const char *a, const char *b) {
    for (int i = 0; i < n_seen; i++)
        if (strstr(seen[i], a) && strstr(seen[i], b)) return 1;
    return 0;
}

Test(env, integers) {
    setenv("MXP_TEST_INT", "42", 1);
    cr_assert_eq(mxp__env_int("MXP_TEST_INT", 1, 100, 7), 42);
    cr_assert_eq(n_seen, 0);
    const char *bad[] = {"abc", "-1", "101", "12x", "99999999999999999999999"};
    for (int i = 0; i < 5; i++) {
        setenv("MXP_TEST_INT", bad[i], 1);
        cr_assert_eq(mxp__env_int("MXP_TEST_INT", 1, 100, 7), 7, "%s", bad[i]);
        cr_assert(warned("MXP_TEST_INT", bad[i]), "no warning for MXP_TEST_INT=%s", bad[i]);
    }
    int before = n_seen;
    setenv("MXP_TEST_INT", "abc", 1);
    cr_assert_eq(mxp__env_int("MXP_TEST_INT", 1, 100, 7), 7);
    cr_assert_eq(n_seen, before, "the same bad value warned twice");
    unsetenv("MXP_TEST_INT");
    cr_assert_eq(mxp__env_int("MXP_TEST_INT", 1, 100, 7), 7);
}

Test(env, booleans) {
    const char *t[] = {"1", "true", "YES", "on"}, *f[] = {"0", "False", "no", "OFF"};
    for (int i = 0; i < 4; i++) {
        setenv("MXP_TEST_BOOL", t[i], 1);
        cr_assert_eq(mxp__env_bool("MXP_TEST_BOOL", 0), 1, "%s", t[i]);
        setenv("MXP_TEST_BOOL", f[i], 1);
        cr_assert_eq(mxp__env_bool("MXP_TEST_BOOL", 1), 0, "%s", f[i]);
    }
    cr_assert_eq(n_seen, 0);
    setenv("MXP_TEST_BOOL", "x", 1);
    cr_assert_eq(mxp__env_bool("MXP_TEST_BOOL", 1), 1);
    cr_assert(warned("MXP_TEST_BOOL", "'x'"));
}

Test(env, exec_memplan_garbage_warns_at_bind) {
    setenv("MXP_EXEC_MEMPLAN", "zz", 1);
    mxp_symbol *x = NULL, *y = NULL;
    cr_assert_eq(mxp_symbol_variable("x", &x), MXP_OK);
    const char *k = "act_type", *v = "relu";
    cr_assert_eq(mxp_symbol_create("Activation", "act", 1, &k, &v, &y), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"data"};
    cr_assert_eq(mxp_symbol_compose(y, "act", 1, names, &x), MXP_OK, "%s", mxp_last_error());
    mxp_executor *ex = NULL;
    const char *sn[] = {"x"};
    mxp_shape s = {0};
    s.ndim = 1;
    s.dims[0] = 4;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    cr_assert_eq(mxp_executor_simple_bind(y, cpu, 1, sn, &s, 0, 0, NULL, &ex), MXP_OK, "%s", mxp_last_error());
    cr_assert(warned("MXP_EXEC_MEMPLAN", "zz"), "MXP_EXEC_MEMPLAN=zz was ignored silently");
    mxp_executor_free(ex);
    mxp_symbol_release(y);
    mxp_symbol_release(x);
}
