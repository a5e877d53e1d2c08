/* test_log.c — logging: level specs, categories, the sink, MXP_LOG_LEVEL
 * (runtime/src/base/log.c).
 *
 * Each Criterion test runs in its own process, so every test starts from the
 * library defaults (global level warn, no categories, stderr sink, the
 * environment not read yet).  A capturing sink records what is emitted; the
 * expected records are written out by hand. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define CAP_MAX 32

typedef struct captured {
    int n;
    int level[CAP_MAX];
    char category[CAP_MAX][32];
    char message[CAP_MAX][128];
} captured;

static void capture(int level, const char *category, const char *message, void *user) {
    captured *c = user;
    if (c->n >= CAP_MAX) return;
    c->level[c->n] = level;
    snprintf(c->category[c->n], sizeof c->category[0], "%s", category);
    snprintf(c->message[c->n], sizeof c->message[0], "%s", message);
    c->n++;
}

static void no_env(void) { unsetenv("MXP_LOG_LEVEL"); }

TestSuite(log, .init = no_env);

Test(log, default_level_is_warn) {
    cr_expect(mxp_log_enabled(MXP_LOG_ERROR, NULL));
    cr_expect(mxp_log_enabled(MXP_LOG_WARN, "engine"));
    cr_expect_not(mxp_log_enabled(MXP_LOG_INFO, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_DEBUG, "engine"));
}

Test(log, global_and_category_spec) {
    cr_assert_eq(mxp_log_set_level("warn,engine=debug"), MXP_OK, "%s", mxp_last_error());
    cr_expect(mxp_log_enabled(MXP_LOG_DEBUG, "engine"));
    cr_expect_not(mxp_log_enabled(MXP_LOG_TRACE, "engine"));
    cr_expect(mxp_log_enabled(MXP_LOG_WARN, "plugin"));
    cr_expect_not(mxp_log_enabled(MXP_LOG_INFO, "plugin"));
    cr_expect_not(mxp_log_enabled(MXP_LOG_DEBUG, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_DEBUG, "engine2"), "categories match exactly");
}

Test(log, names_case_and_alias_and_blanks) {
    cr_assert_eq(mxp_log_set_level("TRACE"), MXP_OK);
    cr_expect(mxp_log_enabled(MXP_LOG_TRACE, NULL));
    cr_assert_eq(mxp_log_set_level("Warning"), MXP_OK);
    cr_expect(mxp_log_enabled(MXP_LOG_WARN, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_INFO, NULL));
    cr_assert_eq(mxp_log_set_level(" error , plugin = info "), MXP_OK, "%s", mxp_last_error());
    cr_expect_not(mxp_log_enabled(MXP_LOG_WARN, NULL));
    cr_expect(mxp_log_enabled(MXP_LOG_INFO, "plugin"));
    cr_expect_not(mxp_log_enabled(MXP_LOG_DEBUG, "plugin"));
}

Test(log, error_level_silences_warnings) {
    cr_assert_eq(mxp_log_set_level("error"), MXP_OK);
    cr_expect(mxp_log_enabled(MXP_LOG_ERROR, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_WARN, NULL));
}

Test(log, bad_specs_rejected_old_levels_kept) {
    cr_assert_eq(mxp_log_set_level("info,engine=trace"), MXP_OK);
    const char *bad[] = {
        "verbose",            /* unknown global level           */
        "info,engine=loud",   /* unknown category level         */
        "=debug",             /* empty category                 */
        "engine=",            /* empty level                    */
        "debug,,",            /* empty item                     */
        "a_category_name_that_is_far_too_long=debug",
        "c1=info,c2=info,c3=info,c4=info,c5=info,c6=info,c7=info,c8=info,c9=info,"
        "c10=info,c11=info,c12=info,c13=info,c14=info,c15=info,c16=info,c17=info",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mxp__error_clear();
        cr_expect_eq(mxp_log_set_level(bad[i]), MXP_EINVAL, "spec '%s' accepted", bad[i]);
        cr_expect_neq(mxp_last_error()[0], '\0', "spec '%s': no message", bad[i]);
        cr_expect_not_null(strstr(mxp_last_error(), "log level spec"), "spec '%s': '%s'", bad[i],
                           mxp_last_error());
        /* Nothing of the bad spec applied, even its valid leading part. */
        cr_expect(mxp_log_enabled(MXP_LOG_INFO, NULL), "spec '%s' changed the global level", bad[i]);
        cr_expect_not(mxp_log_enabled(MXP_LOG_DEBUG, NULL), "spec '%s' changed the global level", bad[i]);
        cr_expect(mxp_log_enabled(MXP_LOG_TRACE, "engine"), "spec '%s' dropped engine=trace", bad[i]);
    }
    cr_expect_eq(mxp_log_set_level(NULL), MXP_EINVAL);
}

Test(log, message_names_the_bad_part) {
    cr_assert_eq(mxp_log_set_level("warn,engine=loud"), MXP_EINVAL);
    cr_expect_not_null(strstr(mxp_last_error(), "'loud'"), "%s", mxp_last_error());
    cr_expect_not_null(strstr(mxp_last_error(), "engine"), "%s", mxp_last_error());
}

Test(log, sink_gets_messages_at_or_above_level) {
    captured c = {0};
    mxp_log_set_sink(capture, &c);
    cr_assert_eq(mxp_log_set_level("info,engine=error"), MXP_OK);
    mxp_log(MXP_LOG_ERROR, "plugin", "e%d", 1);
    mxp_log(MXP_LOG_WARN, "plugin", "w%d", 2);
    mxp_log(MXP_LOG_INFO, "plugin", "i%d", 3);
    mxp_log(MXP_LOG_DEBUG, "plugin", "d%d", 4);   /* below info: dropped  */
    mxp_log(MXP_LOG_WARN, "engine", "w%d", 5);    /* engine=error: dropped */
    mxp_log(MXP_LOG_ERROR, "engine", "e%d", 6);
    MXP_LOGD("plugin", "d%d", 7);                  /* dropped */
    MXP_LOGI(NULL, "i%d", 8);                     /* NULL category -> ""  */
    mxp_log_set_sink(NULL, NULL);
    mxp_log(MXP_LOG_ERROR, "plugin", "to stderr, not captured");

    cr_assert_eq(c.n, 5, "got %d records", c.n);
    const int lv[] = {MXP_LOG_ERROR, MXP_LOG_WARN, MXP_LOG_INFO, MXP_LOG_ERROR, MXP_LOG_INFO};
    const char *cat[] = {"plugin", "plugin", "plugin", "engine", ""};
    const char *msg[] = {"e1", "w2", "i3", "e6", "i8"};
    for (int i = 0; i < 5; i++) {
        cr_expect_eq(c.level[i], lv[i], "record %d", i);
        cr_expect_str_eq(c.category[i], cat[i], "record %d", i);
        cr_expect_str_eq(c.message[i], msg[i], "record %d", i);
    }
}

Test(log, env_level_read_on_first_use) {
    setenv("MXP_LOG_LEVEL", "debug,storage=trace", 1);
    cr_expect(mxp_log_enabled(MXP_LOG_DEBUG, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_TRACE, NULL));
    cr_expect(mxp_log_enabled(MXP_LOG_TRACE, "storage"));
    /* An explicit call overrides the environment. */
    cr_assert_eq(mxp_log_set_level("error"), MXP_OK);
    cr_expect_not(mxp_log_enabled(MXP_LOG_WARN, NULL));
}

Test(log, env_read_before_first_set_level) {
    /* set_level must not be overridden by a later lazy read of the env. */
    setenv("MXP_LOG_LEVEL", "trace", 1);
    cr_assert_eq(mxp_log_set_level("error"), MXP_OK);
    cr_expect_not(mxp_log_enabled(MXP_LOG_WARN, NULL));
}

Test(log, bad_env_ignored_and_error_message_preserved) {
    setenv("MXP_LOG_LEVEL", "shouty", 1);
    mxp__error(MXP_EIO, "caller's failure");
    /* First use reads the bad env: warn stays, and the caller's message is
     * not replaced by the env parse error. */
    cr_expect(mxp_log_enabled(MXP_LOG_WARN, NULL));
    cr_expect_not(mxp_log_enabled(MXP_LOG_INFO, NULL));
    cr_expect_str_eq(mxp_last_error(), "caller's failure");
}
