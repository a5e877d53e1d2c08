/* test_push_handoff.c — hand-offs (mxp__engine_push_handoff, engine.h): an
 * asynchronous function that only passes work to another thread.
 * What must hold: made ready on an engine worker (the op writing its var
 * just completed there), it runs on that worker, after that op and before
 * the worker takes anything else; made ready anywhere else (free vars at its
 * push) it is queued and runs on a worker, never on the pusher; it completes
 * through its callback like any async function, later ops on its var wait
 * for that completion, and an error it reports reaches the next wait;
 * a synchronous function is refused.  Threaded engine, 2 threads (TSan runs
 * this file: tests/unit/engine/). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"
#include "engine/engine.h"

#include <string.h>

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    return v;
}

static atomic_int gate_open, writer_started;

/* The writer: records its thread, then holds its worker until the test has
 * pushed the hand-off behind it (bounded rendezvous). */
typedef struct writer_arg {
    pthread_t thread;
    long value;      /* what it writes */
    long *cell;
} writer_arg;

static int writer(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    writer_arg *a = arg;
    a->thread = pthread_self();
    atomic_fetch_add(&writer_started, 1);
    await_at_least(&gate_open, 1);
    *a->cell = a->value;
    return MXP_OK;
}

/* The hand-off: records its thread and what it saw, then completes from a
 * thread of its own (as a transport's thread would), with `status`. */
typedef struct handoff_arg {
    pthread_t thread;
    long seen;
    long *cell;
    int status;
    mxp_engine_callback cb;
} handoff_arg;

static void *complete_later(void *arg) {
    handoff_arg *a = arg;
    *a->cell += 1; /* the hand-off's own write, visible to the ops after it */
    a->cb.done(a->cb.token, a->status, a->status ? "the peer went away" : NULL);
    return NULL;
}

static void handoff(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)ctx;
    handoff_arg *a = arg;
    a->thread = pthread_self();
    a->seen = *a->cell;
    a->cb = cb;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, complete_later, a), 0);
    pthread_detach(t);
}

static int push_handoff(handoff_arg *a, mxp_var *v) {
    mxp_engine_push_args p = {0};
    p.async_fn = handoff;
    p.arg = a;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    p.prop = MXP_FN_PRIORITIZED;
    p.name = "hand-off";
    return mxp__engine_push_handoff(&p);
}

static void push_writer(writer_arg *a, mxp_var *v) {
    mxp_engine_push_args p = {0};
    p.sync_fn = writer;
    p.arg = a;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    p.name = "writer";
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
}

/* A writer that holds v until the gate opens, then the hand-off pushed
 * behind it: the hand-off becomes ready when the writer completes. */
static void writer_then_handoff(writer_arg *w, handoff_arg *h, mxp_var *v) {
    atomic_store(&gate_open, 0);
    atomic_store(&writer_started, 0);
    push_writer(w, v);
    cr_assert(await_at_least(&writer_started, 1), "the writer never started");
    cr_assert_eq(push_handoff(h, v), MXP_OK);
    atomic_store(&gate_open, 1);
}

Test(push_handoff, runs_on_the_worker_that_made_it_ready) {
    use_engine("ThreadedEngine", 2);
    mxp_var *v = new_var();
    long cell = 0;
    writer_arg w = {.value = 41, .cell = &cell};
    handoff_arg h = {.cell = &cell};
    writer_then_handoff(&w, &h, v);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert(pthread_equal(h.thread, w.thread), "the hand-off ran on another thread than the writer's worker");
    cr_assert(!pthread_equal(h.thread, pthread_self()));
    cr_assert_eq(h.seen, 41, "the hand-off saw %ld, not the writer's 41", h.seen);
    cr_assert_eq(cell, 42, "the wait returned before the hand-off completed (cell %ld)", cell);
    mxp_engine_delete_var(v);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
}

Test(push_handoff, ready_at_push_is_queued_for_a_worker) {
    use_engine("ThreadedEngine", 2);
    mxp_var *v = new_var();
    long cell = 7;
    handoff_arg h = {.cell = &cell};
    cr_assert_eq(push_handoff(&h, v), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert(!pthread_equal(h.thread, pthread_self()), "a hand-off ready at its push ran on the pusher");
    cr_assert_eq(h.seen, 7);
    cr_assert_eq(cell, 8);
    mxp_engine_delete_var(v);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
}

Test(push_handoff, an_error_it_reports_reaches_the_next_wait) {
    use_engine("ThreadedEngine", 2);
    mxp_var *v = new_var();
    long cell = 0;
    writer_arg w = {.value = 1, .cell = &cell};
    handoff_arg h = {.cell = &cell, .status = MXP_ENET};
    writer_then_handoff(&w, &h, v);
    int rc = mxp_engine_wait_for_var(v);
    cr_assert_eq(rc, MXP_ENET, "wait gave %d (%s)", rc, mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "hand-off") && strstr(mxp_last_error(), "the peer went away"), "message: %s",
              mxp_last_error());
    mxp_engine_delete_var(v);
    mxp_engine_wait_for_all();
}

Test(push_handoff, a_synchronous_function_is_refused) {
    use_engine("ThreadedEngine", 2);
    mxp_var *v = new_var();
    writer_arg w = {.value = 1};
    mxp_engine_push_args p = {0};
    p.sync_fn = writer;
    p.arg = &w;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    cr_assert_eq(mxp__engine_push_handoff(&p), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "asynchronous"), "message: %s", mxp_last_error());
    mxp_engine_delete_var(v);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
}
