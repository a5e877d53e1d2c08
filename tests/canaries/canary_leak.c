/* canary_leak.c — a deliberate memory leak inside a Criterion test.
 *
 * Not part of the test suite: `.ci/run` builds it with the suite's
 * sanitizer flags and runner (`make canary-leak SANITIZE=address,undefined`)
 * and requires the run to FAIL.  If LeakSanitizer's report inside Criterion's
 * forked worker did not fail the binary, every leak in the real suite would
 * go unnoticed.  The pointer is dropped through a volatile store so the
 * compiler cannot elide the allocation. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

static void *volatile sink;

Test(canary, leaks_memory) {
    char *p = malloc(4096);
    cr_assert_not_null(p);
    memset(p, 0x5a, 4096);
    sink = p;
    sink = NULL; /* the only reference is gone: a definite leak */
    cr_assert_eq(sink, NULL);
}
