/* test_push_here.c — tiny work run on the pushing thread
 * (mxp__engine_push_here, threaded.c mxp__eng_run_here) and the direct
 * free of an idle var (mxp__engine_var_free_if_idle).
 * What must hold: a push whose vars are all free runs on the calling thread
 * before the call returns (version bumped, nothing in flight); a push that
 * finds a pending writer on a read var, or anything pending on a written
 * var, is queued and runs after that work, in push order with the pushes
 * behind it; concurrent reads are allowed; a failure is reported like a
 * worker's ("op 'NAME' failed: why" at the next wait on a written var, and
 * by wait_for_all), poisons the ops that read the var (skipped, error
 * passed on) except MXP_FN_NO_SKIP ones; the pusher's own last-error
 * message survives; inside an engine function nothing runs nested; async
 * functions and the naive engine take the ordinary path.  Threaded engine,
 * 2 threads (TSan runs this file: tests/unit/engine/). */
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

static pthread_t main_thread;

/* A log of values appended in run order; the ops appending to one log all
 * write one var, so the engine serializes them (no lock needed). */
typedef struct run_log {
    long v[64];
    int n;
    int on_main[64];
} run_log;

typedef struct log_arg {
    run_log *log;
    long value;
    int fail;      /* return this status instead of MXP_OK */
} log_arg;

static int append(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    log_arg *a = arg;
    a->log->on_main[a->log->n] = pthread_equal(pthread_self(), main_thread);
    a->log->v[a->log->n++] = a->value;
    if (a->fail) return mxp__error(a->fail, "value %ld refused", a->value);
    return MXP_OK;
}

static int push_here(log_arg *a, mxp_var **reads, int n_reads, mxp_var **writes, int n_writes, const char *name,
                     int prop) {
    mxp_engine_push_args p = {0};
    p.sync_fn = append;
    p.arg = a;
    p.const_vars = reads;
    p.n_const = n_reads;
    p.mutate_vars = writes;
    p.n_mutate = n_writes;
    p.prop = prop;
    p.name = name;
    return mxp__engine_push_here(&p);
}

static atomic_int gate_open, blocked;

/* Holds a worker until the test opens the gate (bounded: 20 s). */
static int hold(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    run_log *log = arg;
    atomic_fetch_add(&blocked, 1);
    await_at_least(&gate_open, 1);
    if (log) log->v[log->n++] = -1; /* the blocker's own mark, before anything queued behind it */
    return MXP_OK;
}

/* A blocking op on a worker: it writes (or reads) v until the gate opens. */
static void push_blocker(mxp_var *v, int write, run_log *log) {
    mxp_engine_push_args a = {0};
    a.sync_fn = hold;
    a.arg = log;
    if (write) {
        a.mutate_vars = &v;
        a.n_mutate = 1;
    } else {
        a.const_vars = &v;
        a.n_const = 1;
    }
    a.name = "hold";
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
    cr_assert(await_at_least(&blocked, 1), "the blocker should be running on a worker");
}

Test(push_here, free_vars_run_on_the_pusher_before_return) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *in = new_var(), *out = new_var();
    static run_log log;
    static log_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (log_arg){&log, i, 0};
        cr_assert_eq(push_here(&args[i], &in, 1, &out, 1, "tiny", MXP_FN_NORMAL), MXP_OK);
        /* Ran before the call returned, on this thread, and completed. */
        cr_assert_eq(log.n, i + 1);
        cr_assert(log.on_main[i]);
        cr_assert_eq(mxp_engine_var_version(out), (uint64_t)i + 1);
        cr_assert_eq(mxp_engine_var_version(in), 0);
        cr_assert_eq(mxp__engine_in_flight(), 0);
    }
    /* A var both read and written counts once, as a write. */
    static log_arg same = {&log, 100, 0};
    cr_assert_eq(push_here(&same, &out, 1, &out, 1, "same", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(log.v[8], 100);
    cr_assert_eq(mxp_engine_var_version(out), 9);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_engine_delete_var(in);
    mxp_engine_delete_var(out);
    mxp_engine_shutdown();
}

/* A read var with a pending writer: the push queues behind the writer, and
 * later pushes on the same vars queue behind it (push order kept). */
Test(push_here, pending_writer_queues_in_push_order) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *in = new_var(), *out = new_var(), *other = new_var();
    static run_log log; /* the blocker writes `in` and marks -1 here */
    push_blocker(in, 1, &log);
    static log_arg args[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (log_arg){&log, i, 0};
        cr_assert_eq(push_here(&args[i], &in, 1, &out, 1, "reader", MXP_FN_NORMAL), MXP_OK);
    }
    /* Nothing ran: op 0 waits for the writer, ops 1.. wait for op 0 on out. */
    cr_assert_eq(log.n, 0);
    cr_assert_eq(mxp_engine_var_version(out), 0);
    /* Unrelated vars are free: such a push still runs here at once. */
    static run_log free_log;
    static log_arg free_arg = {&free_log, 42, 0};
    cr_assert_eq(push_here(&free_arg, NULL, 0, &other, 1, "unrelated", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(free_log.n, 1);
    cr_assert(free_log.on_main[0]);
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(log.n, 7);
    cr_assert_eq(log.v[0], -1, "the reader ran before its pending writer");
    for (int i = 0; i < 6; i++) cr_assert_eq(log.v[i + 1], i, "push order lost at %d", i);
    cr_assert_eq(mxp_engine_var_version(out), 6);
    cr_assert_eq(mxp_engine_var_version(in), 1);
    mxp_engine_delete_var(in);
    mxp_engine_delete_var(out);
    mxp_engine_delete_var(other);
    mxp_engine_shutdown();
}

/* A running reader: another read runs here at once (reads share), a write
 * of that var queues until the reader is done. */
Test(push_here, pending_reader_blocks_writes_not_reads) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = new_var(), *out = new_var();
    push_blocker(v, 0, NULL);
    static run_log rlog, wlog;
    static log_arg r = {&rlog, 1, 0}, w = {&wlog, 2, 0};
    cr_assert_eq(push_here(&r, &v, 1, &out, 1, "second reader", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(rlog.n, 1, "a read beside a running read should run at once");
    cr_assert(rlog.on_main[0]);
    cr_assert_eq(push_here(&w, NULL, 0, &v, 1, "writer", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(wlog.n, 0, "a write ran while a read of its var was running");
    cr_assert_eq(mxp_engine_var_version(v), 0);
    atomic_store(&gate_open, 1);
    cr_assert_eq(mxp_engine_wait_for_var(v), MXP_OK);
    cr_assert_eq(wlog.n, 1);
    cr_assert_eq(mxp_engine_var_version(v), 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(out);
    mxp_engine_shutdown();
}

/* A failure of a run made here is reported as a worker's would be; readers
 * of the failed var are skipped and carry the error on, NO_SKIP ones run;
 * the pusher's own message survives every run. */
Test(push_here, errors_propagate_as_from_a_worker) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *a = new_var(), *b = new_var(), *c = new_var();
    static run_log la, lb, lc;
    static log_arg fail = {&la, 1, MXP_EINVAL}, next = {&lb, 2, 0}, noskip = {&lc, 3, 0};
    mxp__error(MXP_EINVAL, "the pusher's own message");
    cr_assert_eq(push_here(&fail, NULL, 0, &a, 1, "failing", MXP_FN_NORMAL), MXP_OK, "the push itself succeeds");
    cr_assert_eq(la.n, 1, "the failing op should have run here");
    cr_assert_str_eq(mxp_last_error(), "the pusher's own message");
    cr_assert_eq(push_here(&next, &a, 1, &b, 1, "reader", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(lb.n, 0, "a reader of a failed var should be skipped");
    cr_assert_eq(push_here(&noskip, &a, 1, &c, 1, "noskip", MXP_FN_NO_SKIP), MXP_OK);
    cr_assert_eq(lc.n, 1, "a NO_SKIP reader runs anyway");
    cr_assert_str_eq(mxp_last_error(), "the pusher's own message");
    /* The skipped reader's output carries the same error. */
    cr_assert_eq(mxp_engine_wait_for_var(b), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "op 'failing' failed: value 1 refused"), "got: %s", mxp_last_error());
    /* Raised once: the record is shared, so a wait on `a` is quiet now. */
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    /* Versions moved as for any completed write, failed or skipped. */
    cr_assert_eq(mxp_engine_var_version(a), 1);
    cr_assert_eq(mxp_engine_var_version(b), 1);
    mxp_engine_delete_var(a);
    mxp_engine_delete_var(b);
    mxp_engine_delete_var(c);
    mxp_engine_shutdown();
}

Test(push_here, failure_reaches_wait_for_all) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *a = new_var();
    static run_log la;
    static log_arg fail = {&la, 5, MXP_ESHAPE};
    cr_assert_eq(push_here(&fail, NULL, 0, &a, 1, "shapeless", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_ESHAPE);
    cr_assert(strstr(mxp_last_error(), "op 'shapeless' failed: value 5 refused"), "got: %s", mxp_last_error());
    mxp_engine_delete_var(a);
    mxp_engine_shutdown();
}

/* Inside an engine function a push_here never runs nested: the inner op
 * runs after the outer one has returned. */
static atomic_int outer_done, inner_saw_outer_done;
static mxp_var *inner_var;

static int inner(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    atomic_store(&inner_saw_outer_done, atomic_load(&outer_done) + 1);
    return MXP_OK;
}

static int outer(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    mxp_engine_push_args p = {0};
    p.sync_fn = inner;
    p.mutate_vars = &inner_var;
    p.n_mutate = 1;
    p.name = "inner";
    int rc = mxp__engine_push_here(&p);
    atomic_store(&outer_done, 1);
    return rc;
}

Test(push_here, never_nested_inside_an_engine_function) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = new_var();
    inner_var = new_var();
    mxp_engine_push_args p = {0};
    p.sync_fn = outer;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    p.name = "outer";
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&inner_saw_outer_done), 2, "the inner op ran nested inside the outer one");
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(inner_var);
    mxp_engine_shutdown();
}

static atomic_int async_on_main;

static void async_fn(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)arg;
    (void)ctx;
    if (pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&async_on_main, 1);
    cb.done(cb.token, MXP_OK, NULL);
}

/* Async functions and the naive engine take the ordinary path (the naive
 * engine runs everything on the pusher anyway). */
Test(push_here, async_queued_naive_unchanged) {
    use_engine("threaded", 2);
    main_thread = pthread_self();
    mxp_var *v = new_var();
    mxp_engine_push_args p = {0};
    p.async_fn = async_fn;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    p.prop = MXP_FN_ASYNC;
    p.name = "async";
    for (int i = 0; i < 20; i++) cr_assert_eq(mxp__engine_push_here(&p), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(atomic_load(&async_on_main), 0);
    cr_assert_eq(mxp_engine_var_version(v), 20);
    mxp_engine_delete_var(v);
    use_engine("naive", 1);
    v = new_var();
    static run_log log;
    static log_arg arg = {&log, 9, 0};
    cr_assert_eq(push_here(&arg, NULL, 0, &v, 1, "naive", MXP_FN_NORMAL), MXP_OK);
    cr_assert_eq(log.n, 1);
    cr_assert(log.on_main[0]);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp_engine_delete_var(v);
    mxp_engine_shutdown();
}

/* Bad arguments get the ordinary push's errors. */
Test(push_here, bad_arguments_refused) {
    use_engine("threaded", 2);
    mxp_var *v = NULL;
    mxp_engine_push_args p = {0};
    p.sync_fn = append;
    p.mutate_vars = &v;
    p.n_mutate = 1;
    p.name = "null var";
    cr_assert_eq(mxp__engine_push_here(&p), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "mutate_vars[0] is NULL"), "got: %s", mxp_last_error());
    cr_assert_eq(mxp__engine_push_here(NULL), MXP_EINVAL);
    mxp_engine_shutdown();
}

/* Many threads pushing here on shared and private vars: every op runs once,
 * each shared var's ops in a consistent order (TSan checks the protocol). */
enum { THREADS = 4, PER_THREAD = 2000 };
static mxp_var *shared_var;
static long shared_count; /* written only by ops holding shared_var */

static int bump(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    long *p = arg;
    (*p)++;
    return MXP_OK;
}

static void *pusher(void *arg) {
    (void)arg;
    mxp_var *mine = NULL;
    if (mxp_engine_new_var(&mine)) return (void *)1;
    long *own = calloc(1, sizeof *own);
    for (int i = 0; i < PER_THREAD; i++) {
        mxp_engine_push_args p = {0};
        p.sync_fn = bump;
        if (i % 2) {
            p.arg = &shared_count;
            p.mutate_vars = &shared_var;
            p.const_vars = &mine;
            p.n_const = 1;
        } else {
            p.arg = own;
            p.mutate_vars = &mine;
            p.const_vars = &shared_var;
            p.n_const = 1;
        }
        p.n_mutate = 1;
        p.name = "bump";
        if (mxp__engine_push_here(&p)) return (void *)1;
    }
    mxp_engine_wait_for_var(mine);
    long got = *own;
    free(own);
    mxp_engine_delete_var(mine);
    return got == PER_THREAD / 2 ? NULL : (void *)1;
}

Test(push_here, concurrent_pushers) {
    use_engine("threaded", 2);
    shared_var = new_var();
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, pusher, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        cr_assert_null(r, "pusher %d lost or repeated an op", i);
    }
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(shared_count, (long)THREADS * PER_THREAD / 2);
    cr_assert_eq(mxp_engine_var_version(shared_var), (uint64_t)THREADS * PER_THREAD / 2);
    mxp_engine_delete_var(shared_var);
    mxp_engine_shutdown();
}

/* The direct free of a var nobody uses any more. */
Test(push_here, var_free_if_idle) {
    use_engine("threaded", 2);
    mxp_var *v = new_var();
    push_blocker(v, 1, NULL);
    cr_assert_not(mxp__engine_var_free_if_idle(v), "a var with a running writer must not be freed");
    atomic_store(&gate_open, 1);
    /* wait_for_all, not wait_for_var: the latter's own waiting op may still
     * be completing its read when the call returns. */
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert(mxp__engine_var_free_if_idle(v));
    cr_assert_not(mxp__engine_var_free_if_idle(NULL));
    mxp_engine_shutdown();
}
