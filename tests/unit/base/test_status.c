/* test_status.c — status codes and the per-thread last-error message
 * (runtime/src/base/error.c).
 *
 * Covers: every code in MXP_STATUS_MAP has the name "MXP_<NAME>" and the
 * table's text, names and texts are distinct, unknown codes give the fixed
 * fallbacks; mxp__error formats, returns its status and may quote the
 * current message; messages are per thread; mxp__error_prefix and
 * mxp__error_oom compose as documented, including truncation at the buffer
 * size.  Expected strings are spelled out here, not derived from the code
 * under test. */
#include <criterion/criterion.h>

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

typedef struct status_row {
    int value;
    const char *name;
    const char *text;
} status_row;

static const status_row rows[] = {
#define ROW_(name, value, text) {value, "MXP_" #name, text},
    MXP_STATUS_MAP(ROW_)
#undef ROW_
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

Test(status, table_names_and_texts) {
    cr_assert_geq(N_ROWS, 21, "the table lost codes: %d", N_ROWS);
    for (int i = 0; i < N_ROWS; i++) {
        cr_expect_str_eq(mxp_status_name(rows[i].value), rows[i].name, "code %d", rows[i].value);
        cr_expect_str_eq(mxp_status_str(rows[i].value), rows[i].text, "code %d", rows[i].value);
        cr_expect_str_neq(mxp_status_str(rows[i].value), "unknown status", "code %d", rows[i].value);
        cr_expect_gt(strlen(rows[i].text), 0u, "code %d has empty text", rows[i].value);
        for (int j = 0; j < i; j++) {
            cr_expect_neq(rows[i].value, rows[j].value, "%s and %s share a value", rows[i].name, rows[j].name);
            cr_expect_str_neq(rows[i].name, rows[j].name);
            cr_expect_str_neq(rows[i].text, rows[j].text, "%s and %s share a text", rows[i].name, rows[j].name);
        }
    }
}

Test(status, known_spellings) {
    cr_expect_str_eq(mxp_status_name(0), "MXP_OK");
    cr_expect_str_eq(mxp_status_name(-1), "MXP_EINVAL");
    cr_expect_str_eq(mxp_status_str(-1), "invalid argument");
    cr_expect_str_eq(mxp_status_name(-2), "MXP_ENOMEM");
    cr_expect_eq(MXP_OK, 0);
    cr_expect_lt(MXP_ECANCELED, 0);
}

Test(status, codes_are_dense_and_negative) {
    /* Append-only rule: codes run 0, -1, -2, ... without gaps, down to just
     * above MXP_STATUS_LAST_. */
    for (int v = 0; v > MXP_STATUS_LAST_; v--)
        cr_expect_str_neq(mxp_status_name(v), "MXP_E?", "code %d has no name", v);
}

Test(status, unknown_codes) {
    const int unknown[] = {1, 42, MXP_STATUS_LAST_, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        cr_expect_str_eq(mxp_status_name(unknown[i]), "MXP_E?", "code %d", unknown[i]);
        cr_expect_str_eq(mxp_status_str(unknown[i]), "unknown status", "code %d", unknown[i]);
    }
}

Test(error, set_format_return_clear) {
    cr_expect_str_eq(mxp_last_error(), "", "a fresh thread has no message");
    int rc = mxp__error(MXP_ENOENT, "op '%s' not found (%d candidates)", "Convolution", 3);
    cr_expect_eq(rc, MXP_ENOENT);
    cr_expect_str_eq(mxp_last_error(), "op 'Convolution' not found (3 candidates)");
    mxp__error_clear();
    cr_expect_str_eq(mxp_last_error(), "");
}

Test(error, message_may_quote_itself) {
    mxp__error(MXP_EIO, "read failed");
    int rc = mxp__error(MXP_EPLUGIN, "loading pack '%s': %s", "ops-nn", mxp_last_error());
    cr_expect_eq(rc, MXP_EPLUGIN);
    cr_expect_str_eq(mxp_last_error(), "loading pack 'ops-nn': read failed");
}

Test(error, long_message_truncated_and_terminated) {
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mxp__error(MXP_EINVAL, "%s", big);
    size_t n = strlen(mxp_last_error());
    cr_expect_eq(n, 1023u, "message length %zu", n);
    cr_expect_eq(mxp_last_error()[0], 'x');
}

static void *set_on_other_thread(void *arg) {
    char **out = arg;
    /* The other thread starts with an empty message of its own ... */
    out[0] = strdup(mxp_last_error());
    mxp__error(MXP_EBUSY, "worker message");
    out[1] = strdup(mxp_last_error());
    return NULL;
}

Test(error, per_thread) {
    mxp__error(MXP_EINVAL, "main message");
    char *seen[2] = {NULL, NULL};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, set_on_other_thread, seen), 0);
    pthread_join(t, NULL);
    cr_assert_not_null(seen[0]);
    cr_assert_not_null(seen[1]);
    cr_expect_str_eq(seen[0], "", "main's message leaked into the worker");
    cr_expect_str_eq(seen[1], "worker message");
    cr_expect_str_eq(mxp_last_error(), "main message", "worker's message leaked into main");
    free(seen[0]);
    free(seen[1]);
}

Test(error, prefix_composes) {
    mxp__error(MXP_EFORMAT, "line 3: bad key");
    int rc = mxp__error_prefix(MXP_EFORMAT, "manifest '%s'", "a.yaml");
    cr_expect_eq(rc, MXP_EFORMAT);
    cr_expect_str_eq(mxp_last_error(), "manifest 'a.yaml': line 3: bad key");
    rc = mxp__error_prefix(MXP_EPLUGIN, "pack %d", 2);
    cr_expect_eq(rc, MXP_EPLUGIN);
    cr_expect_str_eq(mxp_last_error(), "pack 2: manifest 'a.yaml': line 3: bad key");
}

Test(error, prefix_without_message_uses_status_text) {
    mxp__error_clear();
    mxp__error_prefix(MXP_ETIMEDOUT, "waiting for var");
    cr_expect_str_eq(mxp_last_error(), "waiting for var: timed out");
}

Test(error, prefix_truncation_keeps_start) {
    char big[2000];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mxp__error(MXP_EINVAL, "%s", big);
    mxp__error_prefix(MXP_EINVAL, "ctx");
    cr_expect_eq(strlen(mxp_last_error()), 1023u);
    cr_expect_eq(strncmp(mxp_last_error(), "ctx: yyy", 8), 0, "got '%.10s'", mxp_last_error());
}

Test(error, oom) {
    int rc = mxp__error_oom("tensor of 4 GiB");
    cr_expect_eq(rc, MXP_ENOMEM);
    cr_expect_str_eq(mxp_last_error(), "out of memory: tensor of 4 GiB");
    rc = mxp__error_oom(NULL);
    cr_expect_eq(rc, MXP_ENOMEM);
    cr_expect_str_eq(mxp_last_error(), "out of memory");
    mxp__error_oom("");
    cr_expect_str_eq(mxp_last_error(), "out of memory");
}

Test(error, oom_long_and_self_quoting) {
    char big[1500];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mxp__error_oom(big);
    cr_expect_eq(strlen(mxp_last_error()), 1023u);
    cr_expect_eq(strncmp(mxp_last_error(), "out of memory: zzz", 18), 0);
    /* `what` pointing into the message buffer itself must not corrupt it. */
    mxp__error(MXP_EINVAL, "pool 'cpu'");
    mxp__error_oom(mxp_last_error());
    cr_expect_str_eq(mxp_last_error(), "out of memory: pool 'cpu'");
}
