/* test_invoke_inline.c — tiny imperative ops run on the calling thread
 * (exec.c: at most MXP_INLINE_MAX_ELEMS elements over the run's tensors,
 * pushed with mxp__engine_push_here) and freed arrays go at once when
 * nothing is pending on them (ndarray.c).
 * What must hold: a tiny op whose inputs are ready has completed when
 * mxp_invoke returns (its output's version moved, nothing in flight);
 * a tiny op reading an array with a pending writer waits for it and sees
 * the written values (dependency order), and ops behind it keep push
 * order; a large op is still queued; a failing tiny op reports its error
 * at the wait as before and poisons its dependants; MXP_INLINE_MAX_ELEMS=0
 * turns the rule off; arrays released while idle are freed at once
 * (storage stats), while a pending one is freed after its work.  Results
 * are checked against values computed here in double.  Threaded engine,
 * 2 threads. */
#include "op_test_util.h"

#include "engine/engine.h"
#include "storage/storage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static void setup(void) {
    opx_setup();
    setenv("MXP_ENGINE_TYPE", "threaded", 1);
    setenv("MXP_NUM_THREADS", "2", 1);
}

static void teardown(void) { opx_teardown(); }

TestSuite(invoke_inline, .init = setup, .fini = teardown);

static mxp_ndarray *add(mxp_ndarray *a, mxp_ndarray *b) {
    mxp_ndarray *in[2] = {a, b}, *out = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    return out;
}

Test(invoke_inline, tiny_op_completes_before_invoke_returns) {
    int64_t shape[1] = {3};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){1, 2, 3});
    mxp_ndarray *b = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){10, 20, 30});
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    for (int i = 0; i < 50; i++) {
        mxp_ndarray *c = add(a, b);
        /* Ran on this thread during the call: written once, nothing queued. */
        cr_assert_eq(mxp_ndarray_version(c), 1, "iteration %d", i);
        cr_assert_eq(mxp__engine_in_flight(), 0);
        mxp_ndarray_release(c);
    }
    mxp_ndarray *c = add(a, b);
    double *v = opx_read(c);
    for (int i = 0; i < 3; i++) cr_assert_float_eq(v[i], 11.0 * (i + 1), 1e-6);
    free(v);
    mxp_ndarray_release(c);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}

/* A writer held on a worker: fills its array with 5 once the gate opens. */
static atomic_int gate_open, held;

typedef struct fill_arg {
    float *p;
    int n;
} fill_arg;

static int slow_fill(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    fill_arg *f = arg;
    atomic_store(&held, 1);
    for (int k = 0; k < 2000 && !atomic_load(&gate_open); k++) nanosleep(&(struct timespec){0, 10000000}, NULL);
    for (int i = 0; i < f->n; i++) f->p[i] = 5.0f;
    return MXP_OK;
}

Test(invoke_inline, pending_writer_is_waited_for) {
    int64_t shape[1] = {4};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){1, 1, 1, 1});
    mxp_ndarray *b = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){1, 2, 3, 4});
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    static fill_arg f;
    f = (fill_arg){mxp_ndarray_data(a), 4};
    mxp_var *va = mxp_ndarray_var(a);
    mxp_engine_push_args p = {0};
    p.sync_fn = slow_fill;
    p.arg = &f;
    p.mutate_vars = &va;
    p.n_mutate = 1;
    p.name = "slow_fill";
    cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    for (int k = 0; k < 2000 && !atomic_load(&held); k++) nanosleep(&(struct timespec){0, 1000000}, NULL);
    cr_assert(atomic_load(&held), "the writer should be running on a worker");
    /* c = a + b must wait for the writer; d = c + b must wait for c. */
    mxp_ndarray *c = add(a, b);
    mxp_ndarray *d = add(c, b);
    cr_assert_eq(mxp_ndarray_version(c), 0, "a + b ran before the pending write of a");
    cr_assert_eq(mxp_ndarray_version(d), 0);
    atomic_store(&gate_open, 1);
    double *vc = opx_read(c), *vd = opx_read(d);
    for (int i = 0; i < 4; i++) {
        cr_assert_float_eq(vc[i], 5.0 + (i + 1), 1e-6, "c[%d] = %g: read a before its writer", i, vc[i]);
        cr_assert_float_eq(vd[i], 5.0 + 2.0 * (i + 1), 1e-6);
    }
    free(vc);
    free(vd);
    mxp_ndarray_release(d);
    mxp_ndarray_release(c);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}

Test(invoke_inline, large_op_is_queued) {
    /* 3 x 600 elements > 1024: not tiny.  Whether a worker has finished it
     * when invoke returns is timing; what must hold is the result. */
    int64_t shape[1] = {600};
    double va[600], vb[600];
    opx_fill(va, 600, 1, -1, 1);
    opx_fill(vb, 600, 2, -1, 1);
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F64, 1, shape, va), *b = opx_arr(MXP_DTYPE_F64, 1, shape, vb);
    mxp_ndarray *c = add(a, b);
    double *v = opx_read(c);
    for (int i = 0; i < 600; i++) cr_assert_float_eq(v[i], va[i] + vb[i], 1e-12);
    free(v);
    mxp_ndarray_release(c);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}

Test(invoke_inline, failing_tiny_op_reports_at_the_wait) {
    int64_t shape[1] = {7};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){1, 2, 3, 4, 5, 6, 7});
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    mxp__error(MXP_EINVAL, "caller's message");
    mxp_ndarray *out[1] = {NULL}, *o2[1] = {NULL};
    int n_out = 1;
    cr_assert_eq(mxp_invoke("fxi_fail", 1, &x, &n_out, out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    /* It ran here and failed; the call itself succeeded. */
    cr_assert_eq(mxp_ndarray_version(out[0]), 1);
    cr_assert_eq(mxp_invoke("sqrt", 1, out, &n_out, o2, 0, NULL, NULL), MXP_OK);
    cr_assert_neq(mxp_engine_wait_for_var(mxp_ndarray_var(o2[0])), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "op 'fxi_fail' failed"), "%s", mxp_last_error());
    cr_assert(strstr(mxp_last_error(), "deliberate failure on 7 elements"), "%s", mxp_last_error());
    mxp_engine_wait_for_all();
    mxp_ndarray_release(o2[0]);
    mxp_ndarray_release(out[0]);
    mxp_ndarray_release(x);
}

Test(invoke_inline, off_with_zero_limit) {
    setenv("MXP_INLINE_MAX_ELEMS", "0", 1);
    int64_t shape[1] = {1};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){2});
    mxp_ndarray *b = opx_arr(MXP_DTYPE_F32, 1, shape, (double[]){3});
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    /* Hold both workers, so a queued op cannot have run when invoke returns. */
    static fill_arg f1, f2;
    mxp_var *v1 = NULL, *v2 = NULL;
    cr_assert_eq(mxp_engine_new_var(&v1), MXP_OK);
    cr_assert_eq(mxp_engine_new_var(&v2), MXP_OK);
    mxp_var *vs[2] = {v1, v2};
    fill_arg *fs[2] = {&f1, &f2};
    for (int i = 0; i < 2; i++) {
        mxp_engine_push_args p = {0};
        p.sync_fn = slow_fill;
        p.arg = fs[i];
        p.mutate_vars = &vs[i];
        p.n_mutate = 1;
        p.name = "hold";
        cr_assert_eq(mxp_engine_push(&p), MXP_OK);
    }
    mxp_ndarray *c = add(a, b);
    cr_assert_eq(mxp_ndarray_version(c), 0, "ran inline although MXP_INLINE_MAX_ELEMS=0");
    atomic_store(&gate_open, 1);
    double *v = opx_read(c);
    cr_assert_float_eq(v[0], 5.0, 1e-6);
    free(v);
    mxp_ndarray_release(c);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
    mxp_engine_delete_var(v1);
    mxp_engine_delete_var(v2);
    unsetenv("MXP_INLINE_MAX_ELEMS");
}

Test(invoke_inline, idle_arrays_are_freed_at_once) {
    mxp_device cpu = {MXP_DEV_CPU, 0};
    int64_t shape[1] = {1000};
    mxp_storage_stats s0 = {.struct_size = sizeof s0}, s1 = {.struct_size = sizeof s1};
    mxp_ndarray *a = NULL;
    cr_assert_eq(mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, cpu, &a), MXP_OK);
    cr_assert_eq(mxp_engine_wait_for_all(), MXP_OK);
    cr_assert_eq(mxp_storage_stats_get(cpu, &s0), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_release(a);
    /* No wait: nothing was pending, so the block is back in the pool now. */
    cr_assert_eq(mxp_storage_stats_get(cpu, &s1), MXP_OK);
    cr_assert_eq(s1.bytes_in_use + mxp__storage_round(4000), s0.bytes_in_use, "in use %llu -> %llu",
                 (unsigned long long)s0.bytes_in_use, (unsigned long long)s1.bytes_in_use);
    cr_assert_eq(mxp__engine_in_flight(), 0);
}
