/* canary_ub.c — deliberate undefined behaviour (signed overflow and a
 * misaligned load) inside a Criterion test.
 *
 * Not part of the test suite: `.ci/run` builds it with the suite's flags
 * (`make canary-ub SANITIZE=address,undefined`, -fno-sanitize-recover=all)
 * and requires the run to FAIL, proving that a UBSan report inside
 * Criterion's forked worker fails the binary.  Operands come from volatile
 * variables so the compiler cannot fold the overflow away. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdint.h>

static volatile int big = INT_MAX;
static volatile int one = 1;

Test(canary, signed_overflow) {
    int r = big + one; /* UB: signed integer overflow */
    cr_assert_neq(r, 0);
}

Test(canary, misaligned_load) {
    static _Alignas(8) unsigned char buf[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    volatile uintptr_t off = 1;
    const uint32_t *p = (const uint32_t *)(const void *)(buf + off); /* misaligned */
    cr_assert_neq(*p, 0u);
}
