/* canary_race.c — a deliberate data race inside a Criterion test.
 *
 * Not part of the test suite: `.ci/run` builds it with the suite's flags
 * (`make canary-race SANITIZE=thread`) and requires the run to FAIL, proving
 * that a ThreadSanitizer report inside Criterion's forked worker fails the
 * binary.  Two threads increment a plain int without synchronisation. */
#include <criterion/criterion.h>

#include <pthread.h>

static int counter; /* deliberately unsynchronised */

static void *bump(void *arg) {
    (void)arg;
    for (int i = 0; i < 100000; i++) counter++;
    return NULL;
}

Test(canary, data_race) {
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, bump, NULL), 0);
    cr_assert_eq(pthread_create(&b, NULL, bump, NULL), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_assert_gt(counter, 0);
}
