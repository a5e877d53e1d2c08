/* common_test.h — shared setup of the ops-basic unit tests: load the pack
 * once per test (Criterion forks) and small helpers. */
#ifndef OPS_BASIC_COMMON_TEST_H
#define OPS_BASIC_COMMON_TEST_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "fake_host.h"

static fh_pack *P;

static void ob_setup(void) {
    P = fh_load("ops-basic");
    cr_assert(P, "load ops-basic: %s", fh_error());
}
static void ob_teardown(void) { fh_unload(P); }

static inline int close_to(double a, double b, double atol, double rtol) {
    if (isnan(a) && isnan(b)) return 1;
    if (isinf(a) || isinf(b)) return a == b;
    return fabs(a - b) <= atol + rtol * fabs(b);
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define KW(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Run op forward, asserting success; returns out[0] (caller frees). */
static inline fh_arr run1(const char *op, const char *const *kw, int n_in, const fh_arr *in) {
    fh_arr out[FH_MAX_IO];
    memset(out, 0, sizeof out);
    int n_out = 0;
    int rc = fh_forward(P, op, kw, n_in, in, &n_out, out, MXP_REQ_WRITE);
    cr_assert_eq(rc, 0, "%s forward: %d %s", op, rc, fh_error());
    for (int i = 1; i < n_out; i++) fh_arr_free(&out[i]);
    return out[0];
}

#define GRAD_OK(op, kw, n, in, mask)                                                   \
    cr_assert_eq(fh_grad_check(P, op, kw, n, in, mask, 1e-6, 1e-6, 1e-5), 0, "%s",     \
                 fh_error())

#endif
