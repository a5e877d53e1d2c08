/* test_push_tiny.c — pre-created ops measured tiny run on the pusher
 * (threaded.c: run_est, mxp__eng_push_op_here, mxp__eng_blk_decr_push).
 * What must hold: a pre-created synchronous CPU op not measured yet whose
 * vars are free runs on the pushing thread before push_op returns (that
 * run measures it); one measured tiny keeps running there, in push order
 * with everything else on its vars; one measured slow (milliseconds) goes
 * to a worker; asynchronous ops and pushes from inside an engine function
 * never run on the pusher; a failure of a run on the pusher is reported at
 * the next wait, as a worker's.  Nothing here depends on how fast the
 * machine is: a run that sleeps 2 ms always measures slow, and for the
 * tiny op the test only needs one of up to 100000 pushes to find it
 * measured tiny.  Threaded engine, 2 threads (TSan runs this file). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

static pthread_t main_thread;

typedef struct rec {
    atomic_int ran;
    atomic_int on_main;  /* the last run was on the main thread */
    atomic_int ever_main;
    long seq[8];         /* values seen, in run order (first 8 runs) */
    long value;          /* the buffer the op writes */
    int fail;
    int sleep_ms;
} rec;

static int mark(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    rec *r = arg;
    int main_now = pthread_equal(pthread_self(), main_thread);
    atomic_store(&r->on_main, main_now);
    if (main_now) atomic_store(&r->ever_main, 1);
    if (r->sleep_ms) {
        struct timespec ts = {0, r->sleep_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    int n = atomic_load(&r->ran);
    if (n < 8) r->seq[n] = r->value;
    r->value++;
    atomic_fetch_add(&r->ran, 1);
    return r->fail ? mxp__error(r->fail, "refused on purpose") : MXP_OK;
}

static mxp_engine_op *op_for(rec *r, mxp_var **w) {
    mxp_engine_push_args a = {0};
    a.sync_fn = mark;
    a.arg = r;
    a.mutate_vars = w;
    a.n_mutate = 1;
    a.name = "mark";
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK, "%s", mxp_last_error());
    return op;
}

Test(push_tiny, unmeasured_then_tiny_op_runs_on_the_pusher_in_order) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    static rec r;
    mxp_engine_op *op = op_for(&r, &v);
    /* Not measured yet, var free: runs here, before the call returns. */
    cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
    cr_assert_eq(atomic_load(&r.ran), 1, "ran before push_op returned");
    cr_assert(atomic_load(&r.on_main));
    cr_assert_eq(mxp_engine_var_version(v), 1);
    /* Measured now (tiny unless that run was preempted: then workers run
     * the next few, and the running average comes back down). */
    atomic_store(&r.ever_main, 0);
    long pushed = 1;
    for (int i = 0; i < 100000 && !atomic_load(&r.ever_main); i++, pushed++)
        cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert(atomic_load(&r.ever_main), "a tiny op should run on the pusher");
    cr_assert_eq(atomic_load(&r.ran), pushed);
    cr_assert_eq(r.value, pushed, "every run saw the previous one's write");
    for (int i = 0; i < 8 && i < pushed; i++) cr_assert_eq(r.seq[i], i, "run %d out of order", i);
    cr_assert_eq(mxp_engine_var_version(v), (uint64_t)pushed);
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(push_tiny, slow_op_goes_to_a_worker) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    static rec r = {.sleep_ms = 2};
    mxp_engine_op *op = op_for(&r, &v);
    cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK); /* measures it: >= 2 ms */
    cr_assert_eq(atomic_load(&r.ran), 1);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
        cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
        cr_assert_not(atomic_load(&r.on_main), "push %d of a slow op ran on the pusher", i + 2);
    }
    cr_assert_eq(atomic_load(&r.ran), 4);
    cr_assert_eq(mxp_engine_var_version(v), 4);
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

Test(push_tiny, failure_on_the_pusher_reported_at_the_next_wait) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL, *out = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    cr_assert_eq(mxp_engine_new_var(&out), MXP_OK);
    static rec r = {.fail = MXP_EINVAL}, dep;
    mxp_engine_op *op = op_for(&r, &v);
    cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK, "the push itself succeeds");
    cr_assert_eq(atomic_load(&r.ran), 1);
    cr_assert(atomic_load(&r.on_main));
    /* A dependant reading the failed var is skipped and inherits the error. */
    mxp_engine_push_args a = {0};
    a.sync_fn = mark;
    a.arg = &dep;
    a.const_vars = &v;
    a.n_const = 1;
    a.mutate_vars = &out;
    a.n_mutate = 1;
    a.name = "dependant";
    mxp_engine_op *dop = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &dop), MXP_OK);
    cr_assert_eq(mxp_engine_push_op(dop, 0), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(out), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "refused on purpose"), "%s", mxp_last_error());
    cr_assert_eq(atomic_load(&dep.ran), 0, "a dependant of a failed op is skipped");
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "raised once");
    mxp_engine_delete_op(dop);
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(out);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

/* ------------------------------------------------------------ async, nested */

static atomic_int async_on_main;
static completer comp;

static void nothing(void *arg) { (void)arg; }

static void async_mark(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)arg, (void)ctx;
    atomic_store(&async_on_main, pthread_equal(pthread_self(), main_thread));
    completer_post(&comp, nothing, NULL, cb, MXP_OK, NULL);
}

Test(push_tiny, async_op_never_runs_on_the_pusher) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    completer_start(&comp);
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    mxp_engine_push_args a = {0};
    a.async_fn = async_mark;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "async";
    mxp_engine_op *op = NULL;
    cr_assert_eq(mxp_engine_new_op(&a, &op), MXP_OK);
    for (int i = 0; i < 3; i++) {
        atomic_store(&async_on_main, 1);
        cr_assert_eq(mxp_engine_push_op(op, 0), MXP_OK);
        cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
        cr_assert_not(atomic_load(&async_on_main));
    }
    mxp_engine_delete_op(op);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
    completer_stop(&comp);
}

typedef struct nest {
    mxp_engine_op *inner;
    rec *inner_rec;
    atomic_int inner_ran_before_return;
} nest;

static int outer_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    nest *n = arg;
    if (mxp_engine_push_op(n->inner, 0) != MXP_OK) return MXP_EINTERNAL;
    atomic_store(&n->inner_ran_before_return, atomic_load(&n->inner_rec->ran));
    return MXP_OK;
}

Test(push_tiny, push_from_inside_a_function_is_not_run_there) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = NULL, *w = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    cr_assert_eq(mxp_engine_new_var(&w), MXP_OK);
    static rec inner;
    static nest n;
    n.inner_rec = &inner;
    n.inner = op_for(&inner, &w);
    /* Measure the inner op first (it runs here: unmeasured, var free). */
    cr_assert_eq(mxp_engine_push_op(n.inner, 0), MXP_OK);
    cr_assert_eq(atomic_load(&inner.ran), 1);
    /* The outer op is a plain push: it goes to a worker. */
    mxp_engine_push_args a = {0};
    a.sync_fn = outer_fn;
    a.arg = &n;
    a.mutate_vars = &v;
    a.n_mutate = 1;
    a.name = "outer";
    atomic_store(&n.inner_ran_before_return, -1);
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&n.inner_ran_before_return), 1,
                 "a nested push must not run inside the pushing function");
    cr_assert_eq(atomic_load(&inner.ran), 2);
    mxp_engine_delete_op(n.inner);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(w);
    mxp_engine_shutdown();
}
