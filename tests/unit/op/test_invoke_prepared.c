/* test_invoke_prepared.c — the invoke cache's prepared forward (a hit of a
 * plain call pushes a copy of the first call's exec record: op/invoke.c,
 * op/exec.c mxp__exec_forward_from).  Checked against values computed
 * here: repeated calls run prepared and compute a + b; another dtype,
 * shape or kwarg value is another entry; a + a (one var read twice); a
 * prepared run waits for a pending write on an input and a later write to
 * an input waits for it (write-after-read); versions bump as on the
 * general path; NULL / none inputs and a second input on another device
 * are refused as before (not run prepared); recorded prepared calls get
 * the right gradients; given outputs are never run prepared. */
#include "op_test_util.h"

#include "ndarray/ndarray.h"
#include "op/invoke_cache.h"

#include <time.h>

static void setup(void) { opx_setup(); }
static void teardown(void) { opx_teardown(); }
TestSuite(invoke_prepared, .init = setup, .fini = teardown);

static mxp_ndarray *binop(const char *op, mxp_ndarray *a, mxp_ndarray *b) {
    mxp_ndarray *in[2] = {a, b}, *out = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke(op, 2, in, &n_out, &out, 0, NULL, NULL), MXP_OK, "%s: %s", op, mxp_last_error());
    cr_assert_eq(n_out, 1);
    return out;
}

static void expect_values(mxp_ndarray *z, const double *want, int64_t n, const char *what) {
    double *got = opx_read(z);
    for (int64_t i = 0; i < n; i++)
        cr_expect_float_eq(got[i], want[i], 1e-6, "%s: element %ld is %g, want %g", what, (long)i, got[i], want[i]);
    free(got);
}

Test(invoke_prepared, repeated_calls_run_prepared_and_compute_the_same) {
    int64_t s3[1] = {3}, s22[2] = {2, 2};
    double va[4], vb[4], sum[4], prod[4], twice[4];
    opx_fill(va, 4, 11, -3, 3);
    opx_fill(vb, 4, 12, -3, 3);
    for (int i = 0; i < 4; i++) sum[i] = va[i] + vb[i], prod[i] = va[i] * vb[i], twice[i] = 2 * va[i];
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s3, va), *b = opx_arr(MXP_DTYPE_F32, 1, s3, vb);
    mxp_ndarray *a64 = opx_arr(MXP_DTYPE_F64, 1, s3, va), *b64 = opx_arr(MXP_DTYPE_F64, 1, s3, vb);
    mxp_ndarray *c = opx_arr(MXP_DTYPE_F32, 2, s22, va), *d = opx_arr(MXP_DTYPE_F32, 2, s22, vb);
    unsigned long p0 = mxp__invoke_prepared_runs();
    for (int i = 0; i < 4; i++) {
        mxp_ndarray *z = binop("elemwise_add", a, b);
        expect_values(z, sum, 3, "f32 a + b");
        mxp_ndarray_release(z);
    }
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 3, "the first call prepares, the next three run prepared (%lu)",
                 mxp__invoke_prepared_runs() - p0);
    /* Another dtype, shape, op: each a first call (not prepared), then prepared. */
    p0 = mxp__invoke_prepared_runs();
    for (int i = 0; i < 2; i++) {
        mxp_ndarray *z = binop("elemwise_add", a64, b64);
        cr_expect_eq(mxp_ndarray_dtype(z), MXP_DTYPE_F64);
        expect_values(z, sum, 3, "f64 a + b");
        mxp_ndarray_release(z);
        z = binop("elemwise_add", c, d);
        cr_expect_eq(mxp_ndarray_ndim(z), 2);
        cr_expect_eq(mxp_ndarray_shape(z)[0], 2);
        cr_expect_eq(mxp_ndarray_shape(z)[1], 2);
        expect_values(z, sum, 4, "2x2 a + b");
        mxp_ndarray_release(z);
        z = binop("elemwise_mul", a, b);
        expect_values(z, prod, 3, "a * b");
        mxp_ndarray_release(z);
    }
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 3, "one prepared run per new signature (%lu)",
                 mxp__invoke_prepared_runs() - p0);
    /* a + a has a + b's key: one var read through both inputs. */
    p0 = mxp__invoke_prepared_runs();
    mxp_ndarray *z = binop("elemwise_add", a, a);
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 1);
    expect_values(z, twice, 3, "a + a");
    mxp_ndarray_release(z);
    mxp_ndarray *arrs[6] = {a, b, a64, b64, c, d};
    for (int i = 0; i < 6; i++) mxp_ndarray_release(arrs[i]);
}

Test(invoke_prepared, kwargs_values_are_separate_entries) {
    int64_t s[1] = {3};
    double va[3] = {1.5, -2, 4};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va);
    const char *k[1] = {"scalar"};
    const char *vals[3] = {"2", "-0.5", "2"};
    double add[3] = {2, -0.5, 2};
    unsigned long p0 = mxp__invoke_prepared_runs();
    for (int round = 0; round < 2; round++)
        for (int j = 0; j < 3; j++) {
            mxp_ndarray *in[1] = {a}, *out = NULL;
            int n_out = 1;
            cr_assert_eq(mxp_invoke("_plus_scalar", 1, in, &n_out, &out, 1, k, &vals[j]), MXP_OK, "%s",
                         mxp_last_error());
            double want[3];
            for (int i = 0; i < 3; i++) want[i] = va[i] + add[j];
            expect_values(out, want, 3, vals[j]);
            mxp_ndarray_release(out);
        }
    /* scalar=2 twice in round 0, then every call of round 1 is prepared. */
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 4, "prepared runs: %lu", mxp__invoke_prepared_runs() - p0);
    mxp_ndarray_release(a);
}

/* An engine function writing `value + i` into a host F32 array after a
 * nap, so that the work behind it is pending for a while. */
typedef struct slow_write {
    float *data;
    int n;
    float value;
} slow_write;

static int slow_write_fn(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    slow_write *w = arg;
    nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL);
    for (int i = 0; i < w->n; i++) w->data[i] = w->value + (float)i;
    return MXP_OK;
}

static void push_slow_write(mxp_ndarray *a, float value) {
    slow_write *w = malloc(sizeof *w);
    cr_assert(w);
    *w = (slow_write){mxp__ndarray_dptr(a), (int)mxp_ndarray_size(a), value};
    mxp_var *v = mxp_ndarray_var(a);
    mxp_engine_push_args p = {.struct_size = sizeof p, .sync_fn = slow_write_fn, .arg = w, .free_arg = free,
                              .mutate_vars = &v, .n_mutate = 1, .device = opx_cpu, .name = "slow_write"};
    cr_assert_eq(mxp_engine_push(&p), MXP_OK, "%s", mxp_last_error());
}

Test(invoke_prepared, ordering_with_pending_writes_is_kept, .timeout = 60) {
    int64_t s[1] = {4};
    double va[4] = {1, 2, 3, 4}, vb[4] = {10, 20, 30, 40};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    mxp_ndarray_release(binop("elemwise_add", a, b)); /* prepares */
    unsigned long p0 = mxp__invoke_prepared_runs();
    /* Read after a pending write: c sees a = 100 + i. */
    push_slow_write(a, 100);
    mxp_ndarray *c = binop("elemwise_add", a, b);
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = 100 + i + vb[i];
    expect_values(c, want, 4, "a (written before) + b");
    mxp_ndarray_release(c);
    /* Write after a pending read: b is busy, so c's read of a waits in the
     * queue; a fill of a pushed after it must not overtake it. */
    push_slow_write(b, 1000);
    c = binop("elemwise_add", a, b);
    cr_assert_eq(mxp_ndarray_fill(a, -7.0), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < 4; i++) want[i] = (100 + i) + (1000 + i);
    expect_values(c, want, 4, "a (before the fill) + b (written before)");
    double filled[4] = {-7, -7, -7, -7};
    expect_values(a, filled, 4, "a after the fill");
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 2, "both adds ran prepared");
    mxp_ndarray_release(c);
    mxp_ndarray_release(a), mxp_ndarray_release(b);
}

Test(invoke_prepared, versions_bump_as_on_the_general_path) {
    int64_t s[1] = {2};
    double va[2] = {1, 2}, vb[2] = {3, 4};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    mxp_engine_wait_for_all();
    uint64_t va0 = mxp_ndarray_version(a), vb0 = mxp_ndarray_version(b);
    mxp_ndarray *first = binop("elemwise_sub", a, b); /* general path */
    unsigned long p0 = mxp__invoke_prepared_runs();
    mxp_ndarray *again = binop("elemwise_sub", a, b); /* prepared */
    cr_assert_eq(mxp__invoke_prepared_runs() - p0, 1);
    mxp_engine_wait_for_all();
    cr_expect_eq(mxp_ndarray_version(again), mxp_ndarray_version(first), "output versions %llu vs %llu",
                 (unsigned long long)mxp_ndarray_version(again), (unsigned long long)mxp_ndarray_version(first));
    cr_expect_eq(mxp_ndarray_version(first), 1, "one write of a fresh output");
    cr_expect_eq(mxp_ndarray_version(a), va0, "inputs are only read");
    cr_expect_eq(mxp_ndarray_version(b), vb0);
    double want[2] = {-2, -2};
    expect_values(again, want, 2, "a - b");
    mxp_ndarray_release(first), mxp_ndarray_release(again);
    mxp_ndarray_release(a), mxp_ndarray_release(b);
}

Test(invoke_prepared, bad_inputs_are_refused_as_before) {
    int64_t s[1] = {2};
    double va[2] = {1, 2}, vb[2] = {3, 4};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    mxp_ndarray_release(binop("elemwise_add", a, b));
    mxp_ndarray_release(binop("elemwise_add", a, b));
    unsigned long p0 = mxp__invoke_prepared_runs();
    mxp_ndarray *none = NULL, *out = NULL;
    cr_assert_eq(mxp_ndarray_create_none(&none), MXP_OK);
    mxp_ndarray *in[2] = {a, none};
    int n_out = 1;
    cr_expect_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "none array"), "message: %s", mxp_last_error());
    cr_expect_null(out);
    in[1] = NULL;
    n_out = 1;
    cr_expect_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "NULL"), "message: %s", mxp_last_error());
    /* No room for the output: the general path's error. */
    n_out = 0;
    in[1] = b;
    cr_expect_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_EINVAL);
    cr_expect(strstr(mxp_last_error(), "room for 0"), "message: %s", mxp_last_error());
    /* The second input on another device: refused by the general path's
     * check (the key only holds input 0's device). */
    mxp_ndarray *pinned = NULL;
    int rc = mxp_ndarray_create(s, 1, MXP_DTYPE_F32, (mxp_device){MXP_DEV_CPU_PINNED, 0}, &pinned);
    if (rc == MXP_OK) {
        in[1] = pinned;
        n_out = 1;
        cr_expect_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_EINVAL);
        cr_expect(strstr(mxp_last_error(), "device"), "message: %s", mxp_last_error());
        cr_expect_null(out);
        mxp_ndarray_release(pinned);
    }
    cr_expect_eq(mxp__invoke_prepared_runs(), p0, "none of these ran prepared");
    /* An input released right after the call, its work maybe pending. */
    mxp_ndarray *a2 = opx_arr(MXP_DTYPE_F32, 1, s, va);
    mxp_ndarray *z = binop("elemwise_add", a2, b);
    mxp_ndarray_release(a2);
    double want[2] = {4, 6};
    expect_values(z, want, 2, "a (released) + b");
    cr_expect_eq(mxp__invoke_prepared_runs(), p0 + 1);
    mxp_ndarray_release(z), mxp_ndarray_release(none);
    mxp_ndarray_release(a), mxp_ndarray_release(b);
}

Test(invoke_prepared, given_outputs_are_not_run_prepared) {
    int64_t s[1] = {2};
    double va[2] = {1, 2}, vb[2] = {3, 4};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    mxp_ndarray *o = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    unsigned long p0 = mxp__invoke_prepared_runs();
    for (int i = 0; i < 3; i++) {
        mxp_ndarray *in[2] = {a, b}, *out = o;
        int n_out = 1;
        cr_assert_eq(mxp_invoke("elemwise_mul", 2, in, &n_out, &out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
        cr_expect_eq(out, o, "written into the given output");
    }
    double want[2] = {3, 8};
    expect_values(o, want, 2, "a * b into o");
    cr_expect_eq(mxp__invoke_prepared_runs(), p0);
    mxp_ndarray_release(o), mxp_ndarray_release(a), mxp_ndarray_release(b);
}

Test(invoke_prepared, recorded_prepared_calls_get_their_gradients) {
    int64_t s[1] = {3};
    double vx[3] = {0.5, -1.25, 2.0}, vw[3] = {1.5, 0.25, -3.0};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, s, vx), *w = opx_arr(MXP_DTYPE_F32, 1, s, vw);
    mxp_ndarray *gx = opx_arr(MXP_DTYPE_F32, 1, s, NULL), *gw = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    mxp_ndarray *vars[2] = {x, w}, *grads[2] = {gx, gw};
    cr_assert_eq(mxp_autograd_mark_variables(2, vars, NULL, grads), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_autograd_set_recording(1, NULL), MXP_OK);
    /* Prime the recorded (training) signature, then y1 = x * w, y2 = y1 * w
     * (both prepared), z = y2 + y1: dz/dx = w^2 + w, dz/dw = 2 x w + x. */
    mxp_ndarray_release(binop("elemwise_mul", x, w));
    mxp_ndarray_release(binop("elemwise_add", x, w));
    unsigned long p0 = mxp__invoke_prepared_runs();
    mxp_ndarray *y1 = binop("elemwise_mul", x, w);
    mxp_ndarray *y2 = binop("elemwise_mul", y1, w);
    mxp_ndarray *z = binop("elemwise_add", y2, y1);
    cr_assert_eq(mxp_autograd_set_recording(0, NULL), MXP_OK);
    cr_expect_eq(mxp__invoke_prepared_runs() - p0, 3, "all three recorded calls ran prepared");
    cr_assert_eq(mxp_autograd_backward(1, &z, NULL, 0), MXP_OK, "%s", mxp_last_error());
    double *g1 = opx_read(gx), *g2 = opx_read(gw);
    for (int i = 0; i < 3; i++) {
        cr_expect_float_eq(g1[i], vw[i] * vw[i] + vw[i], 1e-5, "dz/dx[%d] = %g", i, g1[i]);
        cr_expect_float_eq(g2[i], 2 * vx[i] * vw[i] + vx[i], 1e-5, "dz/dw[%d] = %g", i, g2[i]);
    }
    free(g1), free(g2);
    mxp_autograd_clear_variables();
    mxp_ndarray_release(y1), mxp_ndarray_release(y2), mxp_ndarray_release(z);
    mxp_ndarray_release(x), mxp_ndarray_release(w), mxp_ndarray_release(gx), mxp_ndarray_release(gw);
}
