/* test_local.c — the KVStore front end with the `local` type
 * (runtime/src/kvstore/): several arrays pushed for one key are summed
 * (checked against float64 sums computed here), a push without updater
 * replaces the value, updater and optimizer semantics (MXNet's
 * test_kvstore.py: `local += recv`; SGD against w - lr * sum(g)),
 * priorities never reorder work on the same key, string and int keys are
 * distinct, and the errors: uninitialised key, shape and dtype mismatch,
 * double init, unknown type, refused features. */
#include "../train/train_test_util.h"

TestSuite(kvstore_local, .init = trt_setup, .fini = trt_teardown);

#define N 6

static mxp_kvstore *make_local(void) {
    mxp_kvstore *kv = NULL;
    cr_assert_eq(mxp_kvstore_create("local", 0, NULL, NULL, &kv), MXP_OK, "%s", mxp_last_error());
    cr_assert_str_eq(mxp_kvstore_type(kv), "local");
    cr_assert_eq(mxp_kvstore_rank(kv), 0);
    cr_assert_eq(mxp_kvstore_num_workers(kv), 1);
    return kv;
}

static void fill(float *v, int seed) {
    for (int i = 0; i < N; i++) v[i] = (float)(0.37 * sin(1.3 * i + 0.7 * seed) + 0.01 * seed);
}

static void expect_close(mxp_ndarray *nd, const double *want, const char *what) {
    float *got = trt_get(nd);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(got[i] - want[i]) <= 1e-6 * (1 + fabs(want[i])), "%s[%d]: %.9g, expected %.9g", what, i,
                  got[i], want[i]);
    free(got);
}

Test(kvstore_local, multi_array_push_sums) {
    mxp_kvstore *kv = make_local();
    float z[N] = {0}, a[N], b[N], c[N];
    fill(a, 1), fill(b, 2), fill(c, 3);
    mxp_ndarray *init = trt_vec(N, z), *va = trt_vec(N, a), *vb = trt_vec(N, b), *vc = trt_vec(N, c);
    int64_t k3 = 3, k5 = 5;
    int64_t both[2] = {3, 5};
    mxp_ndarray *inits[2] = {init, init};
    cr_assert_eq(mxp_kvstore_init(kv, 2, both, inits), MXP_OK, "%s", mxp_last_error());
    /* Three "devices" push key 3, one pushes key 5, in one call. */
    int64_t keys[4] = {3, 5, 3, 3};
    mxp_ndarray *vals[4] = {va, vc, vb, vc};
    cr_assert_eq(mxp_kvstore_push(kv, 4, keys, vals, 0), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray *o1 = trt_vec(N, z), *o2 = trt_vec(N, z), *o5 = trt_vec(N, z);
    int64_t pk[3] = {3, 3, 5};
    mxp_ndarray *outs[3] = {o1, o2, o5};
    cr_assert_eq(mxp_kvstore_pull(kv, 3, pk, outs, 0), MXP_OK, "%s", mxp_last_error());
    double s3[N], s5[N];
    for (int i = 0; i < N; i++) s3[i] = (double)a[i] + b[i] + c[i], s5[i] = c[i];
    expect_close(o1, s3, "key 3 out 0");
    expect_close(o2, s3, "key 3 out 1");
    expect_close(o5, s5, "key 5");
    /* Without an updater a push replaces the value. */
    cr_assert_eq(mxp_kvstore_push(kv, 1, &k3, &vb, 0), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_pull(kv, 1, &k3, &o1, 0), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < N; i++) s3[i] = b[i];
    expect_close(o1, s3, "key 3 after second push");
    /* pushpull in place: out = sum of the pushed arrays. */
    mxp_ndarray *inplace = trt_vec(N, a);
    cr_assert_eq(mxp_kvstore_pushpull(kv, 1, &k5, &inplace, &inplace, 0), MXP_OK, "%s", mxp_last_error());
    for (int i = 0; i < N; i++) s5[i] = a[i];
    expect_close(inplace, s5, "pushpull in place");
    mxp_ndarray *arrs[] = {init, va, vb, vc, o1, o2, o5, inplace};
    for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++) mxp_ndarray_release(arrs[i]);
    mxp_kvstore_free(kv);
}

/* MXNet's test_updater: local += recv, pushed twice, with two arrays. */
typedef struct upd_log { int calls; int64_t last_key; char last_str[32]; } upd_log;

static int add_updater(void *user, int64_t key, const char *str_key, mxp_ndarray *recv, mxp_ndarray *stored) {
    upd_log *log = user;
    log->calls++;
    log->last_key = key;
    snprintf(log->last_str, sizeof log->last_str, "%s", str_key ? str_key : "");
    mxp_ndarray *in[2] = {stored, recv};
    int n_out = 1;
    return mxp_invoke("elemwise_add", 2, in, &n_out, &stored, 0, NULL, NULL);
}

Test(kvstore_local, updater_semantics) {
    mxp_kvstore *kv = make_local();
    upd_log log = {0};
    cr_assert_eq(mxp_kvstore_set_updater(kv, add_updater, &log), MXP_OK);
    float w[N], g1[N], g2[N], z[N] = {0};
    fill(w, 4), fill(g1, 5), fill(g2, 6);
    mxp_ndarray *vw = trt_vec(N, w), *v1 = trt_vec(N, g1), *v2 = trt_vec(N, g2), *out = trt_vec(N, z);
    const char *key = "fc1_weight";
    cr_assert_eq(mxp_kvstore_init_str(kv, 1, &key, &vw), MXP_OK, "%s", mxp_last_error());
    const char *keys[2] = {key, key};
    mxp_ndarray *vals[2] = {v1, v2};
    for (int step = 0; step < 2; step++)
        cr_assert_eq(mxp_kvstore_push_str(kv, 2, keys, vals, -step), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_pull_str(kv, 1, &key, &out, 0), MXP_OK, "%s", mxp_last_error());
    double want[N];
    for (int i = 0; i < N; i++) want[i] = (double)w[i] + 2.0 * ((double)g1[i] + g2[i]);
    expect_close(out, want, "stored after two updates");
    cr_expect_eq(log.calls, 2, "the updater runs once per key per push");
    cr_expect_eq(log.last_key, -1);
    cr_expect_str_eq(log.last_str, "fc1_weight");
    /* Init copied the value: the caller's array is untouched. */
    for (int i = 0; i < N; i++) want[i] = w[i];
    expect_close(vw, want, "init source");
    mxp_ndarray *arrs[] = {vw, v1, v2, out};
    for (size_t i = 0; i < 4; i++) mxp_ndarray_release(arrs[i]);
    mxp_kvstore_free(kv);
}

Test(kvstore_local, set_optimizer_runs_sgd) {
    mxp_kvstore *kv = make_local();
    cr_assert(mxp_kvstore_is_capable(kv, "optimizer"));
    cr_assert(!mxp_kvstore_is_capable(kv, "gradient_compression"));
    const char *ok[] = {"learning_rate", "momentum", "wd"};
    const char *ov[] = {"0.1", "0.9", "0.01"};
    cr_assert_eq(mxp_kvstore_set_optimizer(kv, "sgd", 3, ok, ov), MXP_OK, "%s", mxp_last_error());
    float w[N], g1[N], g2[N], z[N] = {0};
    fill(w, 7);
    mxp_ndarray *vw = trt_vec(N, w), *out = trt_vec(N, z);
    int64_t k = 0;
    cr_assert_eq(mxp_kvstore_init(kv, 1, &k, &vw), MXP_OK, "%s", mxp_last_error());
    double rw[N], mom[N] = {0};
    for (int i = 0; i < N; i++) rw[i] = w[i];
    for (int step = 0; step < 3; step++) {
        fill(g1, 10 + step), fill(g2, 20 + step);
        mxp_ndarray *v1 = trt_vec(N, g1), *v2 = trt_vec(N, g2);
        int64_t keys[2] = {0, 0};
        mxp_ndarray *vals[2] = {v1, v2};
        cr_assert_eq(mxp_kvstore_push(kv, 2, keys, vals, 0), MXP_OK, "%s", mxp_last_error());
        mxp_ndarray_release(v1);
        mxp_ndarray_release(v2);
        /* sgd_mom_update: mom = momentum*mom - lr*(grad + wd*w); w += mom
         * (int keys carry no name, so wd applies). */
        for (int i = 0; i < N; i++) {
            double g = (double)g1[i] + g2[i];
            mom[i] = 0.9 * mom[i] - 0.1 * (g + 0.01 * rw[i]);
            rw[i] += mom[i];
        }
    }
    cr_assert_eq(mxp_kvstore_pull(kv, 1, &k, &out, 0), MXP_OK, "%s", mxp_last_error());
    expect_close(out, rw, "weight after 3 SGD steps");
    char path[128];
    snprintf(path, sizeof path, "%s/kv.states", trt_dir);
    cr_assert_eq(mxp_kvstore_save_optimizer_states(kv, path), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_load_optimizer_states(kv, path), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_release(vw);
    mxp_ndarray_release(out);
    mxp_kvstore_free(kv);
}

/* Priorities order ready work; they never reorder work on one key: a pull
 * pushed with a higher priority than the push before it still sees it. */
Test(kvstore_local, priorities_keep_key_order) {
    mxp_kvstore *kv = make_local();
    enum { K = 12 };
    float z[N] = {0};
    mxp_ndarray *init = trt_vec(N, z), *vals[K], *outs[K];
    int64_t keys[K];
    for (int k = 0; k < K; k++) {
        keys[k] = 100 + k;
        cr_assert_eq(mxp_kvstore_init(kv, 1, &keys[k], &init), MXP_OK, "%s", mxp_last_error());
    }
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < K; k++) {
            float v[N];
            fill(v, 31 * round + k);
            vals[k] = trt_vec(N, v);
            outs[k] = trt_vec(N, z);
            cr_assert_eq(mxp_kvstore_push(kv, 1, &keys[k], &vals[k], -k), MXP_OK, "%s", mxp_last_error());
        }
        for (int k = K - 1; k >= 0; k--)
            cr_assert_eq(mxp_kvstore_pull(kv, 1, &keys[k], &outs[k], 100 + k), MXP_OK, "%s", mxp_last_error());
        for (int k = 0; k < K; k++) {
            float v[N];
            double want[N];
            fill(v, 31 * round + k);
            for (int i = 0; i < N; i++) want[i] = v[i];
            expect_close(outs[k], want, "pulled value");
            mxp_ndarray_release(vals[k]);
            mxp_ndarray_release(outs[k]);
        }
    }
    mxp_ndarray_release(init);
    mxp_kvstore_free(kv);
}

Test(kvstore_local, string_and_int_keys_are_distinct) {
    mxp_kvstore *kv = make_local();
    float a[N], b[N], z[N] = {0};
    fill(a, 40), fill(b, 41);
    mxp_ndarray *va = trt_vec(N, a), *vb = trt_vec(N, b), *out = trt_vec(N, z);
    int64_t k = 3;
    const char *sk = "3";
    cr_assert_eq(mxp_kvstore_init(kv, 1, &k, &va), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_init_str(kv, 1, &sk, &vb), MXP_OK, "%s", mxp_last_error());
    double wa[N], wb[N];
    for (int i = 0; i < N; i++) wa[i] = a[i], wb[i] = b[i];
    cr_assert_eq(mxp_kvstore_pull(kv, 1, &k, &out, 0), MXP_OK, "%s", mxp_last_error());
    expect_close(out, wa, "int key 3");
    cr_assert_eq(mxp_kvstore_pull_str(kv, 1, &sk, &out, 0), MXP_OK, "%s", mxp_last_error());
    expect_close(out, wb, "string key '3'");
    /* Many string keys (the table grows past its first size). */
    char names[100][16];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "p%d_weight", i);
        const char *nm = names[i];
        cr_assert_eq(mxp_kvstore_init_str(kv, 1, &nm, i % 2 ? &va : &vb), MXP_OK, "%s", mxp_last_error());
    }
    for (int i = 0; i < 100; i += 7) {
        const char *nm = names[i];
        cr_assert_eq(mxp_kvstore_pull_str(kv, 1, &nm, &out, 0), MXP_OK, "%s", mxp_last_error());
        expect_close(out, i % 2 ? wa : wb, names[i]);
    }
    /* broadcast = init + pull. */
    const char *bk = "bcast";
    cr_assert_eq(mxp_kvstore_broadcast_str(kv, 1, &bk, &va, &out, 0), MXP_OK, "%s", mxp_last_error());
    expect_close(out, wa, "broadcast");
    mxp_ndarray_release(va);
    mxp_ndarray_release(vb);
    mxp_ndarray_release(out);
    mxp_kvstore_free(kv);
}

Test(kvstore_local, errors_name_the_key) {
    mxp_kvstore *kv = make_local();
    float z[N] = {0};
    mxp_ndarray *v = trt_vec(N, z), *bad = trt_vec(N - 1, z);
    int64_t k = 7;
    cr_assert_eq(mxp_kvstore_push(kv, 1, &k, &v, 0), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "key 7") && strstr(mxp_last_error(), "not initialised"), "%s",
              mxp_last_error());
    const char *sk = "conv0_bias";
    cr_assert_eq(mxp_kvstore_pull_str(kv, 1, &sk, &v, 0), MXP_ENOENT);
    cr_expect(strstr(mxp_last_error(), "'conv0_bias'"), "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_init(kv, 1, &k, &v), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_init(kv, 1, &k, &v), MXP_EEXIST);
    cr_assert_eq(mxp_kvstore_push(kv, 1, &k, &bad, 0), MXP_ESHAPE);
    cr_expect(strstr(mxp_last_error(), "key 7") && strstr(mxp_last_error(), "(5,)") && strstr(mxp_last_error(), "(6,)"),
              "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_pull(kv, 1, &k, &bad, 0), MXP_ESHAPE);
    /* A failed check pushes nothing: the valid first key is not pushed. */
    int64_t two[2] = {7, 7};
    float one[N] = {1, 1, 1, 1, 1, 1};
    mxp_ndarray *ones = trt_vec(N, one);
    mxp_ndarray *mixed[2] = {ones, bad};
    cr_assert_eq(mxp_kvstore_push(kv, 2, two, mixed, 0), MXP_ESHAPE);
    cr_assert_eq(mxp_kvstore_pull(kv, 1, &k, &ones, 0), MXP_OK, "%s", mxp_last_error());
    double zero[N] = {0};
    expect_close(ones, zero, "after a refused push");
    int64_t sh = N;
    mxp_ndarray *f64 = NULL;
    cr_assert_eq(mxp_ndarray_create(&sh, 1, MXP_DTYPE_F64, trt_cpu, &f64), MXP_OK);
    cr_assert_eq(mxp_kvstore_push(kv, 1, &k, &f64, 0), MXP_ETYPE);
    cr_expect(strstr(mxp_last_error(), "float64"), "%s", mxp_last_error());
    cr_assert_eq(mxp_kvstore_row_sparse_pull(kv, 1, &k, &v, &v, 0), MXP_EUNSUPPORTED);
    cr_assert_eq(mxp_kvstore_set_gradient_compression(kv, 0, NULL, NULL), MXP_EUNSUPPORTED);
    cr_assert_eq(mxp_kvstore_save_optimizer_states(kv, "/tmp/x"), MXP_EMISUSE);
    cr_assert_eq(mxp_kvstore_barrier(kv), MXP_OK, "%s", mxp_last_error());
    mxp_ndarray_release(f64);
    mxp_ndarray_release(ones);
    mxp_ndarray_release(v);
    mxp_ndarray_release(bad);
    mxp_kvstore_free(kv);
    mxp_kvstore *none = (mxp_kvstore *)1;
    cr_assert_eq(mxp_kvstore_create("nccl", 0, NULL, NULL, &none), MXP_ENOENT);
    cr_assert_null(none);
    cr_expect(strstr(mxp_last_error(), "'nccl'") && strstr(mxp_last_error(), "dist_sync"), "%s", mxp_last_error());
    /* (dist_async with one process is refused in test_dist.c: creating it
     * here would initialise MPI in this process.) */
    const char *ok = "x", *ov = "1";
    cr_assert_eq(mxp_kvstore_create("local", 1, &ok, &ov, &none), MXP_EINVAL);
    cr_assert_eq(mxp_kvstore_create("device", 0, NULL, NULL, &none), MXP_OK, "%s", mxp_last_error());
    mxp_kvstore_free(none);
}
