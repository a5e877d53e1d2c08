/* test_pack_stats_concurrency.c — pack counters under concurrent bumps,
 * reads and reloads (also run under ThreadSanitizer: the name ends in
 * _concurrency).
 *
 * fx-reload's fx_tag (tests/fixtures/packs/fx_reload_tag.h) bumps its
 * counters with relaxed atomic adds from whichever engine worker runs the
 * forward.  Four threads invoke it while a fifth reads snapshots:
 *   - no bump is lost: the totals equal what the threads ran (counted
 *     here), and without reloads a snapshot's running total never goes
 *     backwards;
 *   - during repeated reloads (v1 <-> v2) readers only ever see one whole
 *     build's counters (six of them, the build gauge 1 or 2, and forwards
 *     not above what the threads ran), never freed cells (ASan/TSan). */
#include "../op/op_test_util.h"

#include "reload_fixture.h"

#include <pthread.h>
#include <stdatomic.h>

static void setup(void) { rfx_setup(RFX_SO("reload_v1"), NULL); }
static void teardown(void) {
    mxp_engine_wait_for_all();
    rfx_teardown();
}
TestSuite(pack_stats_concurrency, .init = setup, .fini = teardown);

#define N_THREADS 4
#define PER_THREAD 150

typedef struct runner {
    int id;
    int n;                  /* invocations to run; 0: until stop */
    atomic_int *stop;
    atomic_long *done;      /* successful invocations, all threads */
    long elements;
    int failures;
    char err[256];
} runner;

static void *run_main(void *arg) {
    runner *r = arg;
    for (int i = 0; r->n ? i < r->n : !atomic_load(r->stop); i++) {
        int64_t shape[1] = {1 + (r->id * 7 + i) % 13};
        mxp_ndarray *x = NULL, *outs[2] = {NULL, NULL};
        int rc = mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, opx_cpu, &x);
        if (!rc) rc = mxp_ndarray_fill(x, 2.0);
        int n_out = 2;
        if (!rc) rc = mxp_invoke("fx_tag", 1, &x, &n_out, outs, 0, NULL, NULL);
        if (!rc) rc = mxp_ndarray_wait_to_read(outs[0]);
        if (rc && !r->failures++) snprintf(r->err, sizeof r->err, "%s", mxp_last_error());
        if (!rc) {
            r->elements += shape[0];
            atomic_fetch_add(r->done, 1);
        }
        mxp_ndarray_release(x);
        mxp_ndarray_release(outs[0]);
        mxp_ndarray_release(outs[1]);
    }
    return NULL;
}

typedef struct reader {
    atomic_int *stop;
    atomic_int *reloading;  /* set before the reloads start */
    atomic_long *done;
    long reads;
    int bad;
    char err[256];
} reader;

static void *read_main(void *arg) {
    reader *r = arg;
    const mxp_pack *p = mxp_pack_find("fx-reload");
    uint64_t last_fwd = 0, last_build = 0;
    while (!atomic_load(r->stop)) {
        mxp_pack_stat *st = NULL;
        int n = 0;
        if (mxp_pack_stats(p, &st, &n) != MXP_OK) {
            if (!r->bad++) snprintf(r->err, sizeof r->err, "mxp_pack_stats: %s", mxp_last_error());
            continue;
        }
        r->reads++;
        if (n == 0) continue; /* not loaded yet */
        uint64_t fwd = st[0].value, build = st[4].value;
        int ok = n == 6 && !strcmp(st[0].name, "fx_tag.forwards") && !strcmp(st[4].name, "fx_tag.build") &&
                 (build == 1 || build == 2);
        /* Without reloads a running total never goes back (with them, a
         * build seen again may be a newer load of it, restarted at 0). */
        if (ok && !atomic_load(r->reloading) && build == last_build && fwd < last_fwd) ok = 0;
        /* At most the forwards run so far, plus one in flight per thread
         * (a forward counts before its invoker sees it finish). */
        if (ok && fwd > (uint64_t)atomic_load(r->done) + N_THREADS) ok = 0;
        if (!ok && !r->bad++)
            snprintf(r->err, sizeof r->err, "snapshot of %d counters: %s=%llu, build %llu (last %llu/%llu)", n,
                     st[0].name, (unsigned long long)fwd, (unsigned long long)build, (unsigned long long)last_fwd,
                     (unsigned long long)last_build);
        last_fwd = fwd;
        last_build = build;
        mxp_pack_stats_free(st);
    }
    return NULL;
}

Test(pack_stats_concurrency, no_bump_lost_and_reads_see_whole_builds, .timeout = 240) {
    atomic_int stop = 0, reloading = 0;
    atomic_long done = 0;
    runner rn[N_THREADS];
    pthread_t th[N_THREADS], rt;
    reader rd = {.stop = &stop, .reloading = &reloading, .done = &done};
    cr_assert_eq(mxp_pack_load("fx-reload"), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(pthread_create(&rt, NULL, read_main, &rd), 0);
    for (int i = 0; i < N_THREADS; i++) {
        rn[i] = (runner){.id = i, .n = PER_THREAD, .stop = &stop, .done = &done};
        cr_assert_eq(pthread_create(&th[i], NULL, run_main, &rn[i]), 0);
    }
    long elements = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(rn[i].failures, 0, "thread %d: %s", i, rn[i].err);
        elements += rn[i].elements;
    }
    mxp_engine_wait_for_all();
    const mxp_pack *p = mxp_pack_find("fx-reload");
    uint64_t v;
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.forwards", &v), MXP_OK);
    cr_expect_eq(v, (uint64_t)N_THREADS * PER_THREAD, "no bump lost");
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.elements", &v), MXP_OK);
    cr_expect_eq(v, (uint64_t)elements);
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.bytes", &v), MXP_OK);
    cr_expect_eq(v, (uint64_t)elements * 4);

    /* Now with reloads under the bumps and the reads. */
    atomic_store(&reloading, 1);
    for (int i = 0; i < N_THREADS; i++) {
        rn[i] = (runner){.id = i, .n = 0, .stop = &stop, .done = &done};
        cr_assert_eq(pthread_create(&th[i], NULL, run_main, &rn[i]), 0);
    }
    for (int k = 0; k < 6; k++) {
        rfx_install(k % 2 ? RFX_SO("reload_v1") : RFX_SO("reload_v2"));
        cr_expect_eq(mxp_pack_reload("fx-reload"), MXP_OK, "reload %d: %s", k, mxp_last_error());
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_expect_eq(rn[i].failures, 0, "thread %d: %s", i, rn[i].err);
    }
    pthread_join(rt, NULL);
    cr_expect_eq(rd.bad, 0, "%s", rd.err);
    cr_expect_gt(rd.reads, 0);
    cr_assert_eq(mxp_pack_stat_value(p, "fx_tag.build", &v), MXP_OK);
    cr_expect_eq(v, 1, "the last reload installed build 1");
}
