/* criterion_leakcheck.c — makes a memory leak fail the Criterion test that
 * leaked it.  Linked into every test (and canary) binary of a build whose
 * SANITIZE includes "address" (LeakSanitizer is part of ASan), and only there.
 *
 * Why: Criterion runs each test in a forked worker and records the result
 * from the worker's messages; LeakSanitizer's normal check runs at worker
 * exit, after the worker already reported "passed", and Criterion ignores a
 * non-zero exit status at that point.  A leak would be printed and the
 * binary would still exit 0.
 *
 * What: the Test() macro expands to a function in the test binary that calls
 * criterion_internal_test_main(impl).  Defining that symbol here makes those
 * calls land on this wrapper, which hands Criterion a trampoline: run the
 * test body, then __lsan_do_recoverable_leak_check(); if it found leaks
 * (they are printed with stack traces), the test fails with cr_assert_fail.  Memory
 * still reachable from globals (runtime singletons, fixtures freed in
 * .fini) is not a leak and is not reported.  The check runs again at exit as
 * usual; tools/run-tests.sh also fails a binary whose workers left any
 * sanitizer report in its log directory. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NEXT; the build passes -D_GNU_SOURCE */
#endif
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __lsan_do_recoverable_leak_check(void);

typedef void (*test_fn)(void);

static test_fn current_body;

static void leak_check(void) {
    if (__lsan_do_recoverable_leak_check() != 0)
        cr_assert_fail("LeakSanitizer: memory leaked by this test (report above)");
}

/* Criterion calls fn() for a plain test and fn(param) for a parameterized
 * one (test->data->param_ set), so there is one trampoline of each type. */
static void body_then_leak_check(void) {
    current_body();
    leak_check();
}

static void param_body_then_leak_check(void *param) {
    ((void (*)(void *))current_body)(param);
    leak_check();
}

/* In the worker, Criterion's test record is a copy in its arena that is not
 * necessarily aligned (UBSan flags a plain ->data->param_), so the field is
 * read with memcpy. */
static int is_parameterized(void) {
    const struct criterion_test *t = criterion_current_test;
    if (!t) return 0;
    const struct criterion_test_extra_data *data;
    memcpy(&data, (const char *)t + offsetof(struct criterion_test, data), sizeof data);
    if (!data) return 0;
    struct criterion_test_params (*param)(void);
    memcpy(&param, (const char *)data + offsetof(struct criterion_test_extra_data, param_), sizeof param);
    return param != NULL;
}

void criterion_internal_test_main(void (*fn)(void)) {
    static void (*real)(void (*)(void));
    if (!real) {
        *(void **)&real = dlsym(RTLD_NEXT, "criterion_internal_test_main");
        if (!real) {
            fprintf(stderr, "criterion_leakcheck: criterion_internal_test_main not found: %s\n",
                    dlerror());
            abort();
        }
    }
    current_body = fn;
    if (is_parameterized())
        real((void (*)(void))param_body_then_leak_check);
    else
        real(body_then_leak_check);
}
