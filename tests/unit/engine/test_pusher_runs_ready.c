/* test_pusher_runs_ready.c — the per-thread mode in which a thread runs the
 * ready CPU work it pushes itself (mxp__engine_pusher_runs_ready, engine.h;
 * threaded.c mxp__eng_blk_decr_push), as mxp_module_fit's loop uses it.
 * What must hold: with the mode on, a plain push or a pre-created op's push
 * (normal or prioritized) whose vars are free runs on the calling thread
 * before the call returns; a push that must wait for other work is queued
 * and runs later, after that work, on a worker; the mode is per thread and
 * the call returns the previous setting; an error of a function run here
 * is reported at the next wait like a worker's.  Threaded engine, 2
 * threads (TSan runs this file: tests/unit/engine/). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"
#include "engine/engine.h"

#include <stdint.h>
#include <string.h>

static pthread_t main_thread;

typedef struct rec {
    atomic_int ran;
    atomic_int on_main;
    int fail;
} rec;

static int mark(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    rec *r = arg;
    atomic_store(&r->on_main, pthread_equal(pthread_self(), main_thread));
    atomic_fetch_add(&r->ran, 1);
    return r->fail ? mxp__error(r->fail, "refused on purpose") : MXP_OK;
}

static mxp_engine_push_args args_for(rec *r, mxp_var **w, int prop) {
    mxp_engine_push_args a = {0};
    a.sync_fn = mark;
    a.arg = r;
    a.mutate_vars = w;
    a.n_mutate = 1;
    a.prop = prop;
    a.name = "mark";
    return a;
}

static atomic_int gate_open, blocked;

static int hold(void *arg, const mxp_run_ctx *ctx) {
    (void)arg, (void)ctx;
    atomic_fetch_add(&blocked, 1);
    await_at_least(&gate_open, 1);
    return MXP_OK;
}

Test(pusher_runs_ready, ready_pushes_run_on_the_caller_before_return) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    cr_assert_eq(mxp__engine_pusher_runs_ready(1), 0);
    static rec r[3];
    mxp_engine_push_args a = args_for(&r[0], &v, MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(atomic_load(&r[0].ran), 1, "ran before the push returned");
    cr_assert(atomic_load(&r[0].on_main));
    cr_assert_eq(mxp_engine_var_version(v), 1);
    /* A pre-created op, on the prioritized lane. */
    a = args_for(&r[1], &v, MXP_FN_DEV_PRIORITIZED);
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK);
    cr_assert_eq(mxp_engine_push_op(op, 5), MXP_OK);
    cr_assert_eq(atomic_load(&r[1].ran), 1);
    cr_assert(atomic_load(&r[1].on_main));
    cr_assert_eq(mxp_engine_var_version(v), 2);
    /* The previous setting comes back; off, work goes to a worker. */
    cr_assert_eq(mxp__engine_pusher_runs_ready(0), 1);
    a = args_for(&r[2], &v, MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&r[2].ran), 1);
    cr_assert_not(atomic_load(&r[2].on_main));
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(pusher_runs_ready, waiting_pushes_queue_and_run_after_their_dependency) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp_engine_push_args h = {0};
    h.sync_fn = hold;
    h.mutate_vars = &v;
    h.n_mutate = 1;
    h.name = "hold";
    cr_assert_eq(mxp_engine_push(&h), MXP_OK);
    cr_assert(await_at_least(&blocked, 1), "the blocker should be running on a worker");
    int was = mxp__engine_pusher_runs_ready(1);
    static rec r;
    mxp_engine_push_args a = args_for(&r, &v, MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(atomic_load(&r.ran), 0, "must wait for the blocker");
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    mxp__engine_pusher_runs_ready(was);
    cr_assert_eq(atomic_load(&r.ran), 1);
    cr_assert_not(atomic_load(&r.on_main), "queued work runs on a worker");
    cr_assert_eq(mxp_engine_var_version(v), 2);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

/* Another thread's mode is its own: a thread that did not ask hands off. */
static void *push_from_other(void *arg) {
    mxp_var **v = arg;
    static rec r;
    mxp_engine_push_args a = args_for(&r, v, MXP_FN_NORMAL);
    int rc = mxp_engine_push(&a);
    if (rc == MXP_OK) rc = mxp_engine_wait_for_var(*v);
    return (void *)(intptr_t)(rc == MXP_OK && !pthread_equal(pthread_self(), main_thread) && atomic_load(&r.ran) == 1
                                  ? 1 : 0);
}

Test(pusher_runs_ready, mode_is_per_thread) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp__engine_pusher_runs_ready(1);
    pthread_t t;
    void *ok = NULL;
    cr_assert_eq(pthread_create(&t, NULL, push_from_other, &v), 0);
    cr_assert_eq(pthread_join(t, &ok), 0);
    cr_assert_eq((intptr_t)ok, 1);
    mxp__engine_pusher_runs_ready(0);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(pusher_runs_ready, failure_reported_at_the_next_wait) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp__engine_pusher_runs_ready(1);
    static rec r = {.fail = MXP_EINVAL};
    mxp_engine_push_args a = args_for(&r, &v, MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK, "the push itself succeeds");
    cr_assert_eq(atomic_load(&r.ran), 1);
    cr_assert(atomic_load(&r.on_main));
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "refused on purpose"), "%s", mxp_last_error());
    mxp__engine_pusher_runs_ready(0);
    mxp_engine_wait_for_all();
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}
