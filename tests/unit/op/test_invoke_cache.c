/* test_invoke_cache.c — mxp_invoke's per-thread cache of prepared nodes
 * (op/invoke_cache.c): a repeated signature is a hit and computes the same
 * values as the first call (checked against sums computed here); a new
 * shape, kwarg value or training flag is a new entry; mxp_op_set_impl moves
 * the registry generation, so the next call re-selects (which impl ran is
 * read from mxp_op_impl_stats, not from the cache); mxp_pack_reload
 * releases an idle cache instead of waiting for its pins (the reload would
 * otherwise fail with MXP_EBUSY after MXP_RELOAD_TIMEOUT_MS); a thread's
 * cache goes with the thread; the tape shares a cached node and the
 * gradients of two recorded calls of one signature are both right;
 * MXP_INVOKE_CACHE=0 caches nothing. */
#include "op_test_util.h"

#include "op/invoke_cache.h"

#include <pthread.h>

static void setup(void) {
    opx_setup();
    setenv("MXP_RELOAD_TIMEOUT_MS", "3000", 1);
}
static void teardown(void) {
    mxp_op_set_impl("psel_scale", NULL);
    opx_teardown();
}
TestSuite(invoke_cache, .init = setup, .fini = teardown);

static void stats(unsigned long *h, unsigned long *m, unsigned long *e) { mxp__invoke_cache_stats(h, m, e); }

/* out = a + b through mxp_invoke; checks every element against a + b. */
static void add_and_check(mxp_ndarray *a, mxp_ndarray *b) {
    mxp_ndarray *in[2] = {a, b}, *out = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    double *x = opx_read(a), *y = opx_read(b), *z = opx_read(out);
    for (int64_t i = 0; i < mxp_ndarray_size(a); i++) cr_assert_float_eq(z[i], x[i] + y[i], 1e-6, "element %ld", (long)i);
    free(x), free(y), free(z);
    mxp_ndarray_release(out);
}

Test(invoke_cache, repeated_signature_hits_and_new_shapes_miss) {
    int64_t s3[1] = {3}, s5[2] = {1, 5};
    double va[5], vb[5];
    opx_fill(va, 5, 1, -2, 2);
    opx_fill(vb, 5, 2, -2, 2);
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s3, va), *b = opx_arr(MXP_DTYPE_F32, 1, s3, vb);
    mxp_ndarray *c = opx_arr(MXP_DTYPE_F32, 2, s5, va), *d = opx_arr(MXP_DTYPE_F32, 2, s5, vb);
    unsigned long h0, m0, e0, h, m, e;
    stats(&h0, &m0, &e0);
    for (int i = 0; i < 5; i++) add_and_check(a, b);
    stats(&h, &m, &e);
    cr_expect_eq(m - m0, 1, "first call misses (got %lu misses)", m - m0);
    cr_expect_eq(h - h0, 4, "the next four hit (got %lu hits)", h - h0);
    add_and_check(c, d); /* another shape: another entry */
    add_and_check(c, d);
    stats(&h, &m, &e);
    cr_expect_eq(m - m0, 2);
    cr_expect_eq(h - h0, 5);
    cr_expect_eq(e, e0 + 2, "two signatures cached (got %lu entries)", e);
    mxp_ndarray_release(a), mxp_ndarray_release(b), mxp_ndarray_release(c), mxp_ndarray_release(d);
}

/* psel_scale's impl index named `name`. */
static int impl_index(const mxp_op *op, const char *name) {
    for (int i = 0; i < mxp_op_impl_count(op); i++)
        if (!strcmp(mxp_op_impl_name(op, i), name)) return i;
    cr_assert_fail("psel_scale has no impl '%s'", name);
    return -1;
}

static uint64_t fwd_calls(const mxp_op *op, const char *impl) {
    uint64_t f = 0, b = 0;
    double fm = 0, bm = 0;
    cr_assert_eq(mxp_op_impl_stats(op, impl_index(op, impl), &f, &b, &fm, &bm), MXP_OK, "%s", mxp_last_error());
    return f;
}

/* y = x * factor through psel_scale; checks y against x * factor. */
static void scale_and_check(mxp_ndarray *x, const char *factor) {
    const char *k[1] = {"factor"}, *v[1] = {factor};
    mxp_ndarray *y = NULL;
    int n_out = 1;
    cr_assert_eq(mxp_invoke("psel_scale", 1, &x, &n_out, &y, 1, k, v), MXP_OK, "%s", mxp_last_error());
    double *xv = opx_read(x), *yv = opx_read(y);
    for (int64_t i = 0; i < mxp_ndarray_size(x); i++) cr_assert_float_eq(yv[i], xv[i] * atof(factor), 1e-5);
    free(xv), free(yv);
    mxp_ndarray_release(y);
}

Test(invoke_cache, set_impl_invalidates_the_cached_choice) {
    int64_t s[1] = {8};
    double v[8];
    opx_fill(v, 8, 3, -1, 1);
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, s, v);
    scale_and_check(x, "2.5"); /* loads the pack */
    const mxp_op *op = mxp_op_find("psel_scale");
    cr_assert(op);
    uint64_t fast0 = fwd_calls(op, "fast"), slow0 = fwd_calls(op, "slow");
    scale_and_check(x, "2.5");
    scale_and_check(x, "2.5");
    cr_expect_eq(fwd_calls(op, "fast"), fast0 + 2, "auto picks 'fast' (rank 200) for 8 elements");
    cr_assert_eq(mxp_op_set_impl("psel_scale", "slow"), MXP_OK, "%s", mxp_last_error());
    unsigned long h0, m0, e0, h, m, e;
    stats(&h0, &m0, &e0);
    scale_and_check(x, "2.5");
    scale_and_check(x, "2.5");
    cr_expect_eq(fwd_calls(op, "slow"), slow0 + 2, "after set_impl('slow') both calls run 'slow'");
    cr_expect_eq(fwd_calls(op, "fast"), fast0 + 2, "and 'fast' no more");
    stats(&h, &m, &e);
    cr_expect_eq(m - m0, 1, "the first call after set_impl re-selects (misses: %lu)", m - m0);
    cr_expect_eq(h - h0, 1);
    /* A new kwarg value is another node. */
    scale_and_check(x, "-1.5");
    stats(&h, &m, &e);
    cr_expect_eq(m - m0, 2);
    cr_assert_eq(mxp_op_set_impl("psel_scale", NULL), MXP_OK);
    scale_and_check(x, "2.5");
    cr_expect_eq(fwd_calls(op, "fast"), fast0 + 3, "back to auto: 'fast' again");
    mxp_ndarray_release(x);
}

Test(invoke_cache, reload_releases_an_idle_cache, .timeout = 60) {
    int64_t s[1] = {4};
    double va[4], vb[4];
    opx_fill(va, 4, 4, -1, 1);
    opx_fill(vb, 4, 5, -1, 1);
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    add_and_check(a, b);
    add_and_check(a, b);
    unsigned long h, m, e;
    stats(&h, &m, &e);
    cr_assert_geq(e, 1, "elemwise_add is cached (and pins ops-basic)");
    int rc = mxp_pack_reload("ops-basic");
    cr_assert_eq(rc, MXP_OK, "reload with a cached node: %s", mxp_last_error());
    stats(&h, &m, &e);
    cr_expect_eq(e, 0, "the reload released the cache (%lu entries left)", e);
    unsigned long m0 = m;
    add_and_check(a, b); /* re-resolved on the reloaded pack */
    add_and_check(a, b);
    stats(&h, &m, &e);
    cr_expect_eq(m - m0, 1);
    cr_expect_eq(e, 1);
    mxp_ndarray_release(a), mxp_ndarray_release(b);
}

static void *thread_adds(void *arg) {
    mxp_ndarray **ab = arg;
    mxp_ndarray *out = NULL;
    int n_out = 1;
    int rc = mxp_invoke("elemwise_mul", 2, ab, &n_out, &out, 0, NULL, NULL);
    if (!rc) rc = mxp_ndarray_wait_to_read(out);
    mxp_ndarray_release(out);
    unsigned long h, m, e;
    mxp__invoke_cache_stats(&h, &m, &e);
    return (void *)(intptr_t)(rc ? -1 : (long)e);
}

Test(invoke_cache, a_threads_cache_goes_with_the_thread, .timeout = 60) {
    int64_t s[1] = {4};
    double va[4];
    opx_fill(va, 4, 6, -1, 1);
    mxp_ndarray *ab[2] = {opx_arr(MXP_DTYPE_F32, 1, s, va), opx_arr(MXP_DTYPE_F32, 1, s, va)};
    pthread_t t;
    void *ret = NULL;
    cr_assert_eq(pthread_create(&t, NULL, thread_adds, ab), 0);
    pthread_join(t, &ret);
    cr_assert_eq((long)(intptr_t)ret, 1, "the thread's cache held its node (%ld)", (long)(intptr_t)ret);
    unsigned long h, m, e;
    stats(&h, &m, &e);
    cr_expect_eq(e, 0, "nothing cached on this thread");
    /* Nothing pins ops-basic any more: the reload needs no revocation. */
    cr_assert_eq(mxp_pack_reload("ops-basic"), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_release(ab[0]), mxp_ndarray_release(ab[1]);
}

Test(invoke_cache, recorded_calls_share_a_cached_node_and_get_their_own_gradients) {
    int64_t s[1] = {3};
    double vx[3] = {0.5, -1.25, 2.0}, vw[3] = {1.5, 0.25, -3.0};
    mxp_ndarray *x = opx_arr(MXP_DTYPE_F32, 1, s, vx), *w = opx_arr(MXP_DTYPE_F32, 1, s, vw);
    mxp_ndarray *gx = opx_arr(MXP_DTYPE_F32, 1, s, NULL), *gw = opx_arr(MXP_DTYPE_F32, 1, s, NULL);
    mxp_ndarray *vars[2] = {x, w}, *grads[2] = {gx, gw};
    cr_assert_eq(mxp_autograd_mark_variables(2, vars, NULL, grads), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_autograd_set_recording(1, NULL), MXP_OK);
    /* y1 = x * w, y2 = y1 * w (one signature: the same cached node twice),
     * z = y2 + y1: dz/dx = w^2 + w, dz/dw = 2 x w + x. */
    mxp_ndarray *in1[2] = {x, w}, *y1 = NULL, *y2 = NULL, *z = NULL;
    int n = 1;
    cr_assert_eq(mxp_invoke("elemwise_mul", 2, in1, &n, &y1, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *in2[2] = {y1, w};
    n = 1;
    cr_assert_eq(mxp_invoke("elemwise_mul", 2, in2, &n, &y2, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *in3[2] = {y2, y1};
    n = 1;
    cr_assert_eq(mxp_invoke("elemwise_add", 2, in3, &n, &z, 0, NULL, NULL), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_autograd_set_recording(0, NULL), MXP_OK);
    unsigned long h, m, e;
    stats(&h, &m, &e);
    cr_expect_geq(h, 1, "the second elemwise_mul was a hit");
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

Test(invoke_cache, off_with_MXP_INVOKE_CACHE_0) {
    setenv("MXP_INVOKE_CACHE", "0", 1);
    int64_t s[1] = {2};
    double va[2] = {1, 2}, vb[2] = {3, 5};
    mxp_ndarray *a = opx_arr(MXP_DTYPE_F32, 1, s, va), *b = opx_arr(MXP_DTYPE_F32, 1, s, vb);
    add_and_check(a, b);
    add_and_check(a, b);
    unsigned long h, m, e;
    stats(&h, &m, &e);
    cr_expect_eq(h + m + e, 0, "no cache: %lu hits, %lu misses, %lu entries", h, m, e);
    mxp_ndarray_release(a), mxp_ndarray_release(b);
}
