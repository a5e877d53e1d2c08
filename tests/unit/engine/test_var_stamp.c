/* test_var_stamp.c — the version a pack sees in mxp_tensor.version
 * (mxp__engine_var_stamp, engine.h): it changes with every completed write
 * of a var, and never repeats between vars, so a pack caching data derived
 * from a tensor by (data, version) cannot take a stale entry when another
 * array reuses the address.  mxp_engine_var_version itself still counts
 * writes from 0 in every var (the public API is unchanged).  Threaded
 * engine, 2 threads (TSan runs this file). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "engine/engine.h"

#include <stdint.h>

static int noop(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    return MXP_OK;
}

static void write_n(mxp_var *v, int n) {
    for (int i = 0; i < n; i++) {
        mxp_engine_push_args a = {0};
        a.sync_fn = noop;
        a.mutate_vars = &v;
        a.n_mutate = 1;
        a.name = "write";
        cr_assert_eq(mxp_engine_push(&a), MXP_OK, "%s", mxp_last_error());
    }
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
}

Test(var_stamp, changes_with_every_write_and_differs_between_vars) {
    use_engine("threaded", 2);
    enum { N = 64 };
    uint64_t seen[N * 3];
    int n_seen = 0;
    /* Vars made and freed one after another (malloc hands the freed
     * address back), each written the same number of times: their write
     * counts agree, their stamps must not. */
    for (int k = 0; k < N; k++) {
        mxp_var *v = NULL;
        cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
        seen[n_seen++] = mxp__engine_var_stamp(v);
        write_n(v, 1);
        seen[n_seen++] = mxp__engine_var_stamp(v);
        write_n(v, 2);
        seen[n_seen++] = mxp__engine_var_stamp(v);
        cr_assert_eq(mxp_engine_var_version(v), 3, "the public write count is unchanged");
        mxp_engine_delete_var(v);
        cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    }
    for (int i = 0; i < n_seen; i++) {
        cr_assert_neq(seen[i], 0, "stamp 0 means 'not tracked'");
        for (int j = i + 1; j < n_seen; j++)
            cr_assert_neq(seen[i], seen[j], "stamps %d and %d repeat (%llu)", i, j, (unsigned long long)seen[i]);
    }
    /* Stamps for scratch tensors (tune) are another array's too. */
    uint64_t a = mxp__engine_new_stamp(), b = mxp__engine_new_stamp();
    cr_assert_neq(a, b);
    for (int i = 0; i < n_seen; i++) cr_assert(seen[i] != a && seen[i] != b);
    cr_assert_eq(mxp__engine_var_stamp(NULL), 0);
    mxp_engine_shutdown();
}
