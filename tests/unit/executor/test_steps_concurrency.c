/* test_steps_concurrency.c — two threads each drive their own executor
 * (same net, same values) through many forward/backward rounds on the one
 * engine, so pre-created step ops of both are in flight together and the
 * runs fill their templates on worker threads while the drivers push (TSan
 * runs this file).  Both end with bit-identical gradients, equal to a
 * single round on a third executor: the values never change (no update),
 * so every round must reproduce them. */
#include "exec_test_util.h"

#include "executor/executor.h"

#include <pthread.h>

typedef struct driver {
    mxp_executor *ex;
    int rounds;
    int rc;
    char why[256];
} driver;

static void *drive(void *p) {
    driver *d = p;
    for (int r = 0; r < d->rounds && !d->rc; r++) {
        d->rc = mxp_executor_forward(d->ex, 1);
        if (!d->rc) d->rc = mxp_executor_backward(d->ex, 0, NULL);
    }
    if (!d->rc) d->rc = mxp_executor_wait(d->ex);
    if (d->rc) snprintf(d->why, sizeof d->why, "%s", mxp_last_error());
    return NULL;
}

Test(steps_concurrency, two_drivers_on_one_engine_agree_with_a_single_round) {
    mxp_symbol *sym = et_mlp(6, 3);
    mxp_shape d = {.ndim = 2, .dims = {5, 4}};
    const char *nm[] = {"data"};
    driver dr[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        memset(&dr[t], 0, sizeof dr[t]);
        dr[t].ex = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 11, MXP_REQ_WRITE, "softmax_label", 3);
        dr[t].rounds = 40;
    }
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, drive, &dr[t]);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) cr_assert_eq(dr[t].rc, MXP_OK, "driver %d: %s", t, dr[t].why);
    mxp_executor *one = et_bind(sym, MXP_DTYPE_F32, 1, nm, &d, 11, MXP_REQ_WRITE, "softmax_label", 3);
    cr_assert_eq(mxp_executor_forward(one, 1), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_backward(one, 0, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_executor_wait(one), MXP_OK, "%s", mxp_last_error());
    const char *names[] = {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};
    for (int k = 0; k < 4; k++) {
        mxp_ndarray *ref = et_arg(one, sym, names[k], 1);
        void *want = et_bytes(ref);
        for (int t = 0; t < 2; t++) {
            void *got = et_bytes(et_arg(dr[t].ex, sym, names[k], 1));
            cr_expect(!memcmp(got, want, mxp_ndarray_nbytes(ref)), "driver %d: gradient of %s differs", t, names[k]);
            free(got);
        }
        free(want);
    }
    for (int t = 0; t < 2; t++) mxp_executor_free(dr[t].ex);
    mxp_executor_free(one);
    mxp_symbol_release(sym);
}
