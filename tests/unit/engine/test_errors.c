/* test_errors.c — errors are values: a failing function's status and
 * message land on the vars it writes; dependants are skipped and inherit
 * the error (unless MXP_FN_NO_SKIP); wait_for_var returns it once with a
 * message naming the op; wait_for_all returns the first error.  Each case
 * runs on both engines. */
#include <criterion/criterion.h>

#include "engine_test_util.h"
#include "base/base.h"

#include <string.h>

static mxp_var *new_var(void) {
    mxp_var *v = NULL;
    cr_assert_eq(mxp_engine_new_var(&v), MXP_OK);
    return v;
}

static int fail_conv(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    /* The worker thread's last error is what gets recorded. */
    return mxp__error(MXP_ESHAPE, "weight shape (3,3) does not match input (4,4)");
}

static atomic_int ran;
static int mark_ran(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    atomic_fetch_add(&ran, 1);
    return MXP_OK;
}

static void pushx(mxp_engine_sync_fn fn, mxp_var **c, int nc, mxp_var **m, int nm, const char *name,
                  int prop) {
    mxp_engine_push_args a = {0};
    a.sync_fn = fn;
    a.const_vars = c;
    a.n_const = nc;
    a.mutate_vars = m;
    a.n_mutate = nm;
    a.name = name;
    a.prop = prop;
    cr_assert_eq(mxp_engine_push(&a), MXP_OK);
}


static void skip_inherit_raise_once(const char *type) {
    use_engine(type, 2);
    mxp_var *a = new_var(), *b = new_var(), *c = new_var(), *d = new_var();
    pushx(fail_conv, NULL, 0, &a, 1, "Convolution", MXP_FN_NORMAL);
    pushx(mark_ran, &a, 1, &b, 1, "relu", MXP_FN_NORMAL);     /* skipped, b inherits */
    pushx(mark_ran, &b, 1, &c, 1, "pool", MXP_FN_NORMAL);     /* skipped transitively */
    pushx(mark_ran, NULL, 0, &d, 1, "unrelated", MXP_FN_NORMAL);
    int rc = mxp_engine_wait_for_var(c);
    cr_assert_eq(rc, MXP_ESHAPE, "got %s", mxp_status_name(rc));
    cr_assert(strstr(mxp_last_error(), "op 'Convolution' failed: weight shape (3,3)"), "message: %s",
              mxp_last_error());
    /* wait_for_var(c) says nothing about d: the unrelated op may still be
     * queued, so wait for it before counting. */
    cr_assert_eq(mxp_engine_wait_for_var(d), MXP_OK);
    cr_assert_eq(atomic_load(&ran), 1, "only the unrelated op ran");
    /* Raised once: the same error is not raised again through a or b. */
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(b), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(d), MXP_OK);
    /* Versions still advance: the skipped ops completed their writes. */
    cr_assert_eq(mxp_engine_var_version(c), 1);
    /* After it was raised, new work on the var runs normally. */
    pushx(mark_ran, &a, 1, &b, 1, "relu2", MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_wait_for_var(b), MXP_OK);
    cr_assert_eq(atomic_load(&ran), 2);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "already raised: %s", mxp_last_error());
    mxp_engine_delete_var(a);
    mxp_engine_delete_var(b);
    mxp_engine_delete_var(c);
    mxp_engine_delete_var(d);
    mxp_engine_shutdown();
}

static void no_skip_runs(const char *type) {
    use_engine(type, 2);
    mxp_var *a = new_var(), *b = new_var();
    pushx(fail_conv, NULL, 0, &a, 1, "Convolution", MXP_FN_NORMAL);
    pushx(mark_ran, &a, 1, &b, 1, "CustomOperatorWait", MXP_FN_NO_SKIP);
    int rc = mxp_engine_wait_for_var(b);
    cr_assert_eq(atomic_load(&ran), 1, "NO_SKIP op runs despite the error");
    /* It still carries the inherited error forward. */
    cr_assert_eq(rc, MXP_ESHAPE);
    cr_assert(strstr(mxp_last_error(), "'Convolution'"), "%s", mxp_last_error());
    mxp_engine_delete_var(a);
    mxp_engine_delete_var(b);
    mxp_engine_shutdown();
}

static completer comp;
static void async_fail(void *arg, const mxp_run_ctx *ctx, mxp_engine_callback cb) {
    (void)arg;
    (void)ctx;
    completer_post(&comp, NULL, NULL, cb, MXP_EIO, "disk read failed at offset 42");
}

static void async_failure_message(const char *type) {
    use_engine(type, 2);
    completer_start(&comp);
    mxp_var *a = new_var(), *b = new_var();
    mxp_engine_push_args p = {0};
    p.async_fn = async_fail;
    p.mutate_vars = &a;
    p.n_mutate = 1;
    p.prop = MXP_FN_ASYNC;
    p.name = "ImageRecordIter";
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    pushx(mark_ran, &a, 1, &b, 1, "decode", MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_wait_for_var(b), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "op 'ImageRecordIter' failed: disk read failed at offset 42"), "%s",
              mxp_last_error());
    cr_assert_eq(atomic_load(&ran), 0);
    mxp_engine_delete_var(a);
    mxp_engine_delete_var(b);
    mxp_engine_shutdown();
    completer_stop(&comp);
}

static int fail_io(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    return mxp__error(MXP_EIO, "second failure");
}

static void wait_for_all_first_error(const char *type) {
    use_engine(type, 2);
    mxp_var *a = new_var(), *b = new_var();
    pushx(fail_conv, NULL, 0, &a, 1, "Convolution", MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_ESHAPE); /* ordering: the first error is first */
    /* a was raised; now fail b twice more, wait_for_all gets the first. */
    pushx(fail_io, NULL, 0, &b, 1, "first_io", MXP_FN_NORMAL);
    pushx(fail_conv, NULL, 0, &a, 1, "second_conv", MXP_FN_NORMAL);
    mxp_engine_wait_for_var(a); /* raises second_conv */
    int rc = mxp_engine_wait_for_all();
    cr_assert_eq(rc, MXP_EIO, "got %s (%s)", mxp_status_name(rc), mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "op 'first_io' failed: second failure"), "%s", mxp_last_error());
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK, "cleared after being returned");
    cr_assert_eq(mxp_engine_wait_for_var(b), MXP_OK, "raised once across both waits");
    mxp_engine_delete_var(a);
    mxp_engine_delete_var(b);
    mxp_engine_shutdown();
}

static int fail_without_message(void *arg, const mxp_run_ctx *ctx) {
    (void)arg;
    (void)ctx;
    return MXP_EDEVICE;
}

Test(errors, failure_without_message_uses_status_text) {
    use_engine("threaded", 2);
    mxp_var *a = new_var();
    pushx(fail_without_message, NULL, 0, &a, 1, "Dense", MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_EDEVICE);
    cr_assert(strstr(mxp_last_error(), "op 'Dense' failed: device error"), "%s", mxp_last_error());
    mxp_engine_delete_var(a);
    mxp_engine_shutdown();
}

/* A write that reads nothing is still skipped when its output var carries
 * an error (it could be read-modify-write); a fresh var starts clean. */
Test(errors, output_var_error_skips_writer) {
    use_engine("threaded", 2);
    mxp_var *a = new_var();
    pushx(fail_conv, NULL, 0, &a, 1, "Convolution", MXP_FN_NORMAL);
    pushx(mark_ran, NULL, 0, &a, 1, "zero_grad", MXP_FN_NORMAL);
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_ESHAPE);
    cr_assert_eq(atomic_load(&ran), 0);
    mxp_engine_delete_var(a);
    mxp_engine_shutdown();
}

static int wait_inside(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    return mxp_engine_wait_for_all() == MXP_EMISUSE ? MXP_OK : (*(int *)arg = 1, MXP_EINTERNAL);
}

Test(errors, wait_inside_function_is_misuse_not_deadlock) {
    use_engine("threaded", 2);
    static int bad;
    mxp_var *a = new_var();
    mxp_engine_push_args p = {0};
    p.sync_fn = wait_inside;
    p.arg = &bad;
    p.mutate_vars = &a;
    p.n_mutate = 1;
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_var(a), MXP_OK);
    cr_assert_eq(bad, 0);
    mxp_engine_delete_var(a);
    mxp_engine_shutdown();
}

Test(errors, skip_inherit_raise_once_threaded) { skip_inherit_raise_once("threaded"); }
Test(errors, skip_inherit_raise_once_naive) { skip_inherit_raise_once("naive"); }
Test(errors, no_skip_runs_threaded) { no_skip_runs("threaded"); }
Test(errors, no_skip_runs_naive) { no_skip_runs("naive"); }
Test(errors, async_failure_message_threaded) { async_failure_message("threaded"); }
Test(errors, async_failure_message_naive) { async_failure_message("naive"); }
Test(errors, wait_for_all_first_error_threaded) { wait_for_all_first_error("threaded"); }
Test(errors, wait_for_all_first_error_naive) { wait_for_all_first_error("naive"); }
