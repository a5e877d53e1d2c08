/* graph_test_util.h — helpers shared by tests/unit/graph and
 * tests/unit/executor (header-only; each test is its own binary): building
 * small symbols by name, the LeNet fixtures' paths, list comparison.
 * Ops come from the build manifest (MXP_MANIFEST, set by run-tests.sh). */
#ifndef MXP_TEST_GRAPH_UTIL_H
#define MXP_TEST_GRAPH_UTIL_H

#include <criterion/criterion.h>

#include <mxplug.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GT_FIXTURE(name) MXP_SOURCE_DIR "/tests/data/symbol/" name

static inline mxp_symbol *gt_var(const char *name) {
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_variable(name, &s), MXP_OK, "%s", mxp_last_error());
    return s;
}

/* op(name, kwargs "k=v" strings..., NULL) composed positionally with args
 * (n_args of them; NULL entries are not allowed).  Takes no ownership. */
static inline mxp_symbol *gt_op(const char *op, const char *name, int n_args, mxp_symbol *const *args,
                                const char *kv0, ...) {
    const char *keys[16], *vals[16];
    char buf[16][128];
    int n = 0;
    va_list ap;
    va_start(ap, kv0);
    for (const char *kv = kv0; kv && n < 16; kv = va_arg(ap, const char *)) {
        snprintf(buf[n], sizeof buf[n], "%s", kv);
        char *eq = strchr(buf[n], '=');
        cr_assert(eq, "kwarg '%s' lacks '='", kv);
        *eq = 0;
        keys[n] = buf[n];
        vals[n] = eq + 1;
        n++;
    }
    va_end(ap);
    mxp_symbol *s = NULL;
    cr_assert_eq(mxp_symbol_create(op, name, n, keys, vals, &s), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_symbol_compose(s, NULL, n_args, NULL, args), MXP_OK, "%s", mxp_last_error());
    return s;
}

/* Assert a name list equals the NULL-terminated expectation. */
static inline void gt_names_eq(int n, const char *const *got, const char *const *want) {
    int k = 0;
    while (want[k]) k++;
    for (int i = 0; i < n && i < k; i++) cr_expect_str_eq(got[i], want[i], "name %d", i);
    cr_assert_eq(n, k, "got %d names, want %d", n, k);
}

/* Assert a list_* call's names equal the NULL-terminated expectation. */
static inline void gt_list_eq(int (*fn)(mxp_symbol *, int *, const char *const **), mxp_symbol *s,
                              const char *const *want) {
    int n = 0;
    const char *const *got = NULL;
    cr_assert_eq(fn(s, &n, &got), MXP_OK, "%s", mxp_last_error());
    gt_names_eq(n, got, want);
}

#endif /* MXP_TEST_GRAPH_UTIL_H */
