/* test_write_hook.c — a var's write hook (engine.h,
 * mxp__engine_var_arm_write_hook), what the KVStore's lazy store copy
 * rests on.
 * What must hold: an armed hook fires once, on the next write pushed on its
 * var (a queued push, a direct run on the pusher, wait_to_write), before
 * that write is registered — the work fire() pushes runs before the write;
 * reads do not fire it; a hook taken back (disarm true) never fires; after
 * it fired, disarm says false; arming over an armed hook fires the old one.
 * Threaded engine, 2 threads (TSan runs this file: tests/unit/engine/). */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "engine/engine.h"

/* Appends to one log, in run order: every op writes the log's var. */
typedef struct wlog {
    char s[32];
    int n;
    mxp_var *var;
} wlog;
typedef struct wl_arg {
    wlog *log;
    char c;
} wl_arg;

static int wl_append(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    wl_arg *a = arg;
    a->log->s[a->log->n++] = a->c;
    return MXP_OK;
}

/* Push "append c" writing the log's var and touching v (read or write). */
static void push_mark(wlog *log, mxp_var *v, int write, char c) {
    wl_arg *a = malloc(sizeof *a);
    *a = (wl_arg){log, c};
    mxp_var *muts[2] = {log->var, v};
    mxp_engine_push_args p = {.sync_fn = wl_append, .arg = a, .free_arg = free, .mutate_vars = muts,
                              .n_mutate = write ? 2 : 1, .const_vars = &v, .n_const = write ? 0 : 1,
                              .name = "mark"};
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
}

typedef struct test_hook {
    mxp__var_write_hook hook;
    wlog *log;
    mxp_var *var;
    atomic_int fired;
} test_hook;

/* Reads the var (as the KVStore's copy does) and logs 'H'. */
static void th_fire(mxp__var_write_hook *h) {
    test_hook *t = (test_hook *)h;
    atomic_fetch_add(&t->fired, 1);
    push_mark(t->log, t->var, 0, 'H');
}

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    return v;
}

static void setup(void) { use_engine("ThreadedEngine", 2); }

TestSuite(write_hook, .init = setup, .fini = mxp_engine_shutdown, .timeout = 60);

Test(write_hook, fires_once_before_the_next_write_not_on_reads) {
    wlog log = {.var = new_var()};
    mxp_var *v = new_var();
    test_hook h = {{th_fire}, &log, v, 0};
    push_mark(&log, v, 1, 'a');
    mxp__engine_var_arm_write_hook(v, &h.hook);
    push_mark(&log, v, 0, 'r');              /* a read: no fire */
    cr_assert_eq(atomic_load(&h.fired), 0);
    push_mark(&log, v, 1, 'W');              /* fires: H before W */
    cr_assert_eq(atomic_load(&h.fired), 1);
    push_mark(&log, v, 1, 'X');              /* fired already */
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_str_eq(log.s, "arHWX");
    cr_assert_eq(atomic_load(&h.fired), 1);
    cr_assert(!mxp__engine_var_disarm_write_hook(v, &h.hook), "disarm after the hook fired must say false");
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(log.var);
}

Test(write_hook, a_disarmed_hook_never_fires) {
    wlog log = {.var = new_var()};
    mxp_var *v = new_var();
    test_hook h = {{th_fire}, &log, v, 0};
    mxp__engine_var_arm_write_hook(v, &h.hook);
    cr_assert(mxp__engine_var_disarm_write_hook(v, &h.hook));
    cr_assert(!mxp__engine_var_disarm_write_hook(v, &h.hook), "a second disarm finds nothing");
    push_mark(&log, v, 1, 'W');
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_str_eq(log.s, "W");
    cr_assert_eq(atomic_load(&h.fired), 0);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(log.var);
}

Test(write_hook, arming_over_an_armed_hook_fires_the_old_one) {
    wlog log = {.var = new_var()};
    mxp_var *v = new_var();
    test_hook h1 = {{th_fire}, &log, v, 0}, h2 = {{th_fire}, &log, v, 0};
    mxp__engine_var_arm_write_hook(v, &h1.hook);
    mxp__engine_var_arm_write_hook(v, &h2.hook);
    cr_assert_eq(atomic_load(&h1.fired), 1);
    cr_assert_eq(atomic_load(&h2.fired), 0);
    push_mark(&log, v, 1, 'W');
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_str_eq(log.s, "HHW");
    cr_assert_eq(atomic_load(&h2.fired), 1);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(log.var);
}

/* A write the pusher runs itself (nothing pending: a direct run) and
 * wait_to_write's no-op write fire it too. */
static int flag_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    wlog *log = arg;
    log->s[log->n++] = 'D';
    return MXP_OK;
}

Test(write_hook, a_direct_run_and_wait_to_write_fire_it) {
    wlog log = {.var = new_var()};
    mxp_var *v = new_var();
    test_hook h = {{th_fire}, &log, v, 0};
    mxp__engine_var_arm_write_hook(v, &h.hook);
    mxp_var *muts[2] = {log.var, v};
    mxp_engine_push_args p = {.sync_fn = flag_fn, .arg = &log, .mutate_vars = muts, .n_mutate = 2, .name = "direct"};
    cr_assert_eq(mxp__engine_push_here(&p), MXP_OK);
    cr_assert_eq(atomic_load(&h.fired), 1);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_str_eq(log.s, "HD");

    int64_t n = 4;
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(&n, 1, MXP_DTYPE_F32, (mxp_device){MXP_DEV_CPU, 0}, &a), MXP_OK);
    test_hook g = {{th_fire}, &log, mxp_ndarray_var(a), 0};
    mxp__engine_var_arm_write_hook(mxp_ndarray_var(a), &g.hook);
    cr_assert_eq(mxp_ndarray_wait_to_write(a), MXP_OK);
    cr_assert_eq(atomic_load(&g.fired), 1);
    cr_assert_str_eq(log.s, "HDH", "wait_to_write returned before the hook's work ran");
    mxp_ndarray_release(a);
    mxp_engine_delete_var(v);
    mxp_engine_delete_var(log.var);
}
