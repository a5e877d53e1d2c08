/* test_dist.c — dist_sync (plugins/kvstore-dist) under mpirun on loopback,
 * 2 and 3 ranks.  This binary is both the Criterion test and the MPI
 * worker: with MXP_KVTEST_WORKER set, main runs a worker scenario instead
 * of the tests, and each test launches itself under mpirun.
 *
 * Checked: every pushed key's sum equals an independent sum computed here
 * (float32 in the same association — bit-exact — and float64 within
 * rounding), for int and string keys, float32/float64/int32, keys smaller
 * and larger than a fusion bucket; init gives every worker rank 0's value;
 * weights after SGD steps are bit-identical across workers; fused and
 * unfused runs give the same bits; a rank killed with SIGKILL mid-push, or
 * stopped (SIGSTOP), ends every other rank non-zero with a message naming
 * the rank and host, never a hang.
 * Skipped, with the reason, only when mpirun or the pack is absent.
 * Under ASan the workers get LSan suppressions for Open MPI's own
 * allocations (tests/sanitizer/mpi-lsan.supp), scoped to these workers. */
#include "../train/train_test_util.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

/* ------------------------------------------------------------ values */

enum { N_INT_KEYS = 8, ROUNDS = 3, STEPS = 5 };
/* With 64 KiB buckets (the tests set MXP_KV_BUCKET_BYTES) the small keys
 * share buckets and the last one is larger than a bucket. */
static const int64_t int_sizes[N_INT_KEYS] = {1, 7, 100, 1000, 3000, 2, 7000, 20000};

static float fval(int rank, int key, int dev, int round, int64_t i) {
    return (float)(sin(0.37 * (double)i + 1.3 * key + 0.7 * rank + 0.11 * dev + 0.05 * round) *
                   (1.0 + 0.25 * rank));
}
static double dval(int rank, int dev, int round, int64_t i) {
    return cos(0.21 * (double)i + 0.3 * rank + 0.9 * dev + 0.4 * round) / 3.0;
}
static int32_t ival(int rank, int dev, int round, int64_t i) { return (int32_t)((i * 7 + rank * 1000 + dev * 13 + round) % 2001) - 1000; }

/* ------------------------------------------------------------ worker */

static int fails;
#define WCHECK(cond, ...)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "worker: " __VA_ARGS__);                        \
            fputc('\n', stderr);                                             \
            if (++fails > 20) exit(3);                                       \
        }                                                                    \
    } while (0)
#define WOK(call)                                                            \
    do {                                                                     \
        int rc_ = (call);                                                    \
        if (rc_) {                                                           \
            fprintf(stderr, "worker: %s: %s\n", #call, mxp_last_error());   \
            exit(2);                                                         \
        }                                                                    \
    } while (0)

static mxp_ndarray *warr(int64_t n, int dtype) {
    mxp_ndarray *a = NULL;
    WOK(mxp_ndarray_create(&n, 1, dtype, trt_cpu, &a));
    return a;
}

static void *wdata(mxp_ndarray *a) {
    WOK(mxp_ndarray_wait_to_read(a));
    return mxp_ndarray_data(a);
}

/* A fresh float array holding rank me's values of (key, round), written
 * through the engine. */
static mxp_ndarray *wvals(int64_t n, int me, int key, int round) {
    mxp_ndarray *a = warr(n, MXP_DTYPE_F32);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = fval(me, key, 0, round, i);
    WOK(mxp_ndarray_sync_copy_from(a, v, (size_t)n * sizeof *v));
    free(v);
    return a;
}

/* got must hold the sum over the n ranks of (key, round) exactly. */
static void check_sum(mxp_ndarray *got, int n, int key, int round, int64_t cnt, const char *what) {
    const float *g = wdata(got);
    for (int64_t i = 0; i < cnt; i++) {
        float exact = fval(0, key, 0, round, i);
        for (int r = 1; r < n; r++) exact += fval(r, key, 0, round, i);
        WCHECK(g[i] == exact, "%s [%lld]: %.9g, expected the sum %.9g", what, (long long)i, g[i], exact);
        if (g[i] != exact) return;
    }
}

/* The store's copy of an in-place pushpull's sum is deferred until the
 * out array is written again or the key is pulled (lazy_store.c): a pull
 * must return that sum whatever happens to out in between. */
static void lazy_store_cases(mxp_kvstore *kv, const int64_t *ikeys, int me, int n) {
    int64_t n3 = int_sizes[3], n4 = int_sizes[4];
    mxp_ndarray *p3 = warr(n3, MXP_DTYPE_F32), *p4 = warr(n4, MXP_DTYPE_F32);
    /* Overwritten by an engine op right after, without waiting. */
    mxp_ndarray *a = wvals(n3, me, 80, 0);
    WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[3], &a, &a, 0));
    WOK(mxp_ndarray_fill(a, -7.0));
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[3], &p3, 0));
    check_sum(p3, n, 80, 0, n3, "pull after the out array was filled");
    WCHECK(((const float *)wdata(a))[n3 - 1] == -7.0f, "the fill after pushpull was lost");
    /* Overwritten by a host copy, then by a write after wait_to_write. */
    for (int how = 0; how < 2; how++) {
        WOK(mxp_ndarray_sync_copy_from(a, wdata(p4), (size_t)n3 * sizeof(float)));
        mxp_ndarray *b = wvals(n3, me, 81, how);
        WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[3], &b, &a, 0));
        if (how == 0) {
            float *junk = calloc((size_t)n3, sizeof *junk);
            WOK(mxp_ndarray_sync_copy_from(a, junk, (size_t)n3 * sizeof *junk));
            free(junk);
        } else {
            WOK(mxp_ndarray_wait_to_write(a));
            float *d = mxp_ndarray_data(a);
            for (int64_t i = 0; i < n3; i++) d[i] = 1e6f;
        }
        WOK(mxp_kvstore_pull(kv, 1, &ikeys[3], &p3, 0));
        check_sum(p3, n, 81, how, n3, how ? "pull after wait_to_write and a direct write" : "pull after sync_copy_from");
        const float *bd = wdata(b);
        for (int64_t i = 0; i < n3; i++)
            WCHECK(bd[i] == fval(me, 81, 0, how, i), "pushpull into another array changed the pushed one [%lld]",
                   (long long)i);
        mxp_ndarray_release(b);
    }
    mxp_ndarray_release(a);
    /* Another key summed into the same memory: key 3 into a slice of an
     * array, then key 4 into the whole array. */
    mxp_ndarray *big = warr(n4, MXP_DTYPE_F32), *s3 = NULL;
    WOK(mxp_ndarray_slice(big, 0, n3, &s3));
    mxp_ndarray *v3 = wvals(n3, me, 83, 0), *v4 = wvals(n4, me, 84, 0);
    WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[3], &v3, &s3, 0));
    WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[4], &v4, &big, 0));
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[3], &p3, 0));
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[4], &p4, 0));
    check_sum(p3, n, 83, 0, n3, "pull of a key whose out array another key's sum overwrote");
    check_sum(p4, n, 84, 0, n4, "pull of the key summed over it");
    /* Two sums, the out array released by the caller, then a pull: the last. */
    for (int round = 0; round < 2; round++) {
        mxp_ndarray *c = wvals(n3, me, 85, round);
        WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[3], &c, &c, 0));
        mxp_ndarray_release(c);
    }
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[3], &p3, 0));
    check_sum(p3, n, 85, 1, n3, "pull after two pushpulls into released arrays");
    mxp_ndarray_release(v3);
    mxp_ndarray_release(v4);
    mxp_ndarray_release(s3);
    mxp_ndarray_release(big);
    mxp_ndarray_release(p3);
    mxp_ndarray_release(p4);
}

static int worker_sums(FILE *out) {
    mxp_kvstore *kv = NULL;
    WOK(mxp_kvstore_create("dist_sync", 0, NULL, NULL, &kv));
    int me = mxp_kvstore_rank(kv), n = mxp_kvstore_num_workers(kv);
    int64_t ikeys[N_INT_KEYS];
    mxp_ndarray *store[N_INT_KEYS + 2];
    for (int k = 0; k < N_INT_KEYS; k++) {
        ikeys[k] = 10 * k + 1;
        store[k] = warr(int_sizes[k], MXP_DTYPE_F32);
        float *d = wdata(store[k]);
        for (int64_t i = 0; i < int_sizes[k]; i++) d[i] = (float)me;
    }
    WOK(mxp_kvstore_init(kv, N_INT_KEYS, ikeys, store));
    const char *skeys[2] = {"fc_weight", "counts"};
    store[N_INT_KEYS] = warr(33, MXP_DTYPE_F64);
    store[N_INT_KEYS + 1] = warr(5, MXP_DTYPE_I32);
    memset(wdata(store[N_INT_KEYS]), 0, 33 * 8);
    memset(wdata(store[N_INT_KEYS + 1]), 0, 5 * 4);
    WOK(mxp_kvstore_init_str(kv, 2, skeys, store + N_INT_KEYS));
    /* init: every worker holds rank 0's value. */
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[3], &store[3], 0));
    WCHECK(((float *)wdata(store[3]))[5] == 0.0f, "init: rank %d holds %g, not rank 0's 0", me,
           ((float *)wdata(store[3]))[5]);
    for (int round = 0; round < ROUNDS; round++) {
        /* Two "devices" per key; pushed in an order that differs by rank,
         * with priorities, so the engines run them in different orders. */
        mxp_ndarray *vals[N_INT_KEYS][2];
        for (int k = 0; k < N_INT_KEYS; k++)
            for (int dev = 0; dev < 2; dev++) {
                vals[k][dev] = warr(int_sizes[k], MXP_DTYPE_F32);
                float *d = wdata(vals[k][dev]);
                for (int64_t i = 0; i < int_sizes[k]; i++) d[i] = fval(me, k, dev, round, i);
            }
        for (int j = 0; j < N_INT_KEYS; j++) {
            int k = (me % 2) ? N_INT_KEYS - 1 - j : j;
            int64_t kk[2] = {ikeys[k], ikeys[k]};
            WOK(mxp_kvstore_push(kv, 2, kk, vals[k], -k));
        }
        mxp_ndarray *dv[2] = {warr(33, MXP_DTYPE_F64), warr(33, MXP_DTYPE_F64)};
        mxp_ndarray *iv[2] = {warr(5, MXP_DTYPE_I32), warr(5, MXP_DTYPE_I32)};
        for (int dev = 0; dev < 2; dev++) {
            double *d = wdata(dv[dev]);
            int32_t *x = wdata(iv[dev]);
            for (int i = 0; i < 33; i++) d[i] = dval(me, dev, round, i);
            for (int i = 0; i < 5; i++) x[i] = ival(me, dev, round, i);
        }
        const char *sk2[2] = {"fc_weight", "fc_weight"}, *ck2[2] = {"counts", "counts"};
        WOK(mxp_kvstore_push_str(kv, 2, sk2, dv, 0));
        WOK(mxp_kvstore_pushpull_str(kv, 2, ck2, iv, iv, 0));
        for (int k = 0; k < N_INT_KEYS; k++) WOK(mxp_kvstore_pull(kv, 1, &ikeys[k], &store[k], -k));
        WOK(mxp_kvstore_pull_str(kv, 1, &skeys[0], &store[N_INT_KEYS], 0));
        /* Check against sums computed here. */
        for (int k = 0; k < N_INT_KEYS; k++) {
            const float *got = wdata(store[k]);
            for (int64_t i = 0; i < int_sizes[k]; i++) {
                float exact = 0;
                double ref = 0;
                for (int r = 0; r < n; r++) {
                    float local = fval(r, k, 0, round, i) + fval(r, k, 1, round, i);
                    exact = r == 0 ? local : exact + local;
                    ref += (double)fval(r, k, 0, round, i) + fval(r, k, 1, round, i);
                }
                WCHECK(got[i] == exact, "round %d key %lld [%lld]: %.9g, expected exactly %.9g", round,
                       (long long)ikeys[k], (long long)i, got[i], exact);
                WCHECK(fabs(got[i] - ref) <= 1e-5 * (1 + fabs(ref)), "key %lld [%lld]: %.9g vs float64 %.9g",
                       (long long)ikeys[k], (long long)i, got[i], ref);
            }
            fwrite(got, sizeof(float), (size_t)int_sizes[k], out);
        }
        const double *gd = wdata(store[N_INT_KEYS]);
        for (int i = 0; i < 33; i++) {
            double ref = 0;
            for (int r = 0; r < n; r++) ref += dval(r, 0, round, i) + dval(r, 1, round, i);
            WCHECK(fabs(gd[i] - ref) <= 1e-12, "fc_weight[%d]: %.17g vs %.17g", i, gd[i], ref);
        }
        fwrite(gd, sizeof(double), 33, out);
        const int32_t *gi = wdata(iv[0]);
        for (int i = 0; i < 5; i++) {
            int32_t ref = 0;
            for (int r = 0; r < n; r++) ref += ival(r, 0, round, i) + ival(r, 1, round, i);
            WCHECK(gi[i] == ref && ((int32_t *)wdata(iv[1]))[i] == ref, "counts[%d]: %d vs %d", i, gi[i], ref);
        }
        for (int k = 0; k < N_INT_KEYS; k++) mxp_ndarray_release(vals[k][0]), mxp_ndarray_release(vals[k][1]);
        for (int dev = 0; dev < 2; dev++) mxp_ndarray_release(dv[dev]), mxp_ndarray_release(iv[dev]);
    }
    /* One small key pushed alone again and again: after two rounds its sum
     * rides along with the negotiation (comm.c's cached key set); the sums
     * must stay exact. */
    /* Odd rounds sum into another array (the pushed one stays as it was);
     * a later pull returns the last sum (the store keeps it). */
    for (int round = 0; round < 8; round++) {
        mxp_ndarray *g = warr(int_sizes[2], MXP_DTYPE_F32), *h = round % 2 ? warr(int_sizes[2], MXP_DTYPE_F32) : g;
        float *d = wdata(g);
        for (int64_t i = 0; i < int_sizes[2]; i++) d[i] = fval(me, 70, 0, round, i);
        WOK(mxp_kvstore_pushpull(kv, 1, &ikeys[2], &g, &h, 0));
        const float *got = wdata(h);
        for (int64_t i = 0; i < int_sizes[2]; i++) {
            float exact = fval(0, 70, 0, round, i);
            for (int r = 1; r < n; r++) exact += fval(r, 70, 0, round, i);
            WCHECK(got[i] == exact, "repeated key, round %d [%lld]: %.9g, expected exactly %.9g", round, (long long)i,
                   got[i], exact);
            if (h != g)
                WCHECK(((const float *)wdata(g))[i] == fval(me, 70, 0, round, i),
                       "pushpull into another array changed the pushed one, round %d [%lld]", round, (long long)i);
        }
        if (h != g) mxp_ndarray_release(h);
        mxp_ndarray_release(g);
    }
    WOK(mxp_kvstore_pull(kv, 1, &ikeys[2], &store[2], 0));
    for (int64_t i = 0; i < int_sizes[2]; i++) {
        float exact = fval(0, 70, 0, 7, i);
        for (int r = 1; r < n; r++) exact += fval(r, 70, 0, 7, i);
        WCHECK(((const float *)wdata(store[2]))[i] == exact, "pull after pushpull [%lld]: %.9g, expected %.9g",
               (long long)i, ((const float *)wdata(store[2]))[i], exact);
    }
    lazy_store_cases(kv, ikeys, me, n);
    /* SGD on every worker from identical sums: weights stay bit-identical. */
    const char *ok[] = {"learning_rate", "momentum", "wd", "rescale_grad"};
    const char *ov[] = {"0.05", "0.9", "0.001", "0.5"};
    WOK(mxp_kvstore_set_optimizer(kv, "sgd", 4, ok, ov));
    const char *wkeys[2] = {"w0_weight", "w1_bias"};
    int64_t wn[2] = {1000, 5};
    mxp_ndarray *w[2];
    for (int j = 0; j < 2; j++) {
        w[j] = warr(wn[j], MXP_DTYPE_F32);
        float *d = wdata(w[j]);
        for (int64_t i = 0; i < wn[j]; i++) d[i] = fval(me, 40 + j, 0, 0, i); /* differs by rank: init unifies */
    }
    WOK(mxp_kvstore_init_str(kv, 2, wkeys, w));
    WOK(mxp_kvstore_pull_str(kv, 2, wkeys, w, 0));
    for (int step = 0; step < STEPS; step++) {
        for (int j = 0; j < 2; j++) {
            mxp_ndarray *g = warr(wn[j], MXP_DTYPE_F32);
            float *d = wdata(g);
            for (int64_t i = 0; i < wn[j]; i++) d[i] = fval(me, 50 + j, 0, step, i);
            WOK(mxp_kvstore_pushpull_str(kv, 1, &wkeys[j], &g, &w[j], -j));
            mxp_ndarray_release(g);
        }
    }
    for (int j = 0; j < 2; j++) fwrite(wdata(w[j]), sizeof(float), (size_t)wn[j], out);
    WOK(mxp_kvstore_barrier(kv));
    for (int j = 0; j < 2; j++) mxp_ndarray_release(w[j]);
    for (int k = 0; k < N_INT_KEYS + 2; k++) mxp_ndarray_release(store[k]);
    mxp_kvstore_free(kv);
    return fails ? 3 : 0;
}

/* Pushes in a loop; the rank named by MXP_KVTEST_VICTIM kills (or stops)
 * itself in the middle of its pushes. */
static int worker_fault(const char *how) {
    mxp_kvstore *kv = NULL;
    WOK(mxp_kvstore_create("dist_sync", 0, NULL, NULL, &kv));
    int me = mxp_kvstore_rank(kv);
    int victim = atoi(getenv("MXP_KVTEST_VICTIM"));
    int64_t keys[4] = {1, 2, 3, 4};
    mxp_ndarray *v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = warr(20000, MXP_DTYPE_F32);
        memset(wdata(v[k]), 0, 20000 * 4);
    }
    WOK(mxp_kvstore_init(kv, 4, keys, v));
    for (int step = 0;; step++) {
        for (int k = 0; k < 4; k++) {
            if (me == victim && step == 3 && k == 2) raise(!strcmp(how, "stop") ? SIGSTOP : SIGKILL);
            WOK(mxp_kvstore_pushpull(kv, 1, &keys[k], &v[k], &v[k], -k));
        }
        for (int k = 0; k < 4; k++) {
            int rc = mxp_ndarray_wait_to_read(v[k]);
            if (rc) {
                fprintf(stderr, "worker rank %d: step %d: %s\n", me, step, mxp_last_error());
                /* Exit without freeing (freeing the store is collective and
                 * would wait for the dead peer), and without the leak check
                 * that would report what this early exit leaves. */
                fflush(NULL);
                _exit(4);
            }
        }
        if (step > 100000) return 5;
    }
}

/* ------------------------------------------------------------ dist_async */

enum { AS_KEYS = 3, AS_STEPS = 4 };
/* With MXP_KV_BIGARRAY_BOUND=1000 (the test sets it) "a_weight" is sliced
 * over both servers; the others live whole on one server each. */
static const char *const as_names[2] = {"a_weight", "b_bias"};
static const int64_t as_sizes[AS_KEYS] = {1500, 7, 300};

static float as_grad(int worker, int step, int key, int64_t i) {
    return (float)cos(0.13 * (double)i + 0.7 * worker + 0.31 * step + 1.1 * key);
}

static int as_dummy_updater(void *u, int64_t k, const char *sk, mxp_ndarray *r, mxp_ndarray *s) {
    (void)u, (void)k, (void)sk, (void)r, (void)s;
    return MXP_OK;
}

/* Push key j's gradient (worker w, step) through kv, string keys for 0-1
 * and int key 42 for 2. */
static void as_push(mxp_kvstore *kv, int w, int step, int j) {
    mxp_ndarray *g = warr(as_sizes[j], MXP_DTYPE_F32);
    float *d = wdata(g);
    for (int64_t i = 0; i < as_sizes[j]; i++) d[i] = as_grad(w, step, j, i);
    int64_t ik = 42;
    if (j < 2) WOK(mxp_kvstore_push_str(kv, 1, &as_names[j], &g, -j));
    else WOK(mxp_kvstore_push(kv, 1, &ik, &g, -j));
    mxp_ndarray_release(g);
}

static void as_pull_all(mxp_kvstore *kv, mxp_ndarray **w) {
    int64_t ik = 42;
    WOK(mxp_kvstore_pull_str(kv, 2, as_names, w, 0));
    WOK(mxp_kvstore_pull(kv, 1, &ik, &w[2], 0));
    for (int j = 0; j < AS_KEYS; j++) WOK(mxp_ndarray_wait_to_read(w[j]));
}

static void as_init(mxp_kvstore *kv, int me, mxp_ndarray **w) {
    for (int j = 0; j < AS_KEYS; j++) {
        w[j] = warr(as_sizes[j], MXP_DTYPE_F32);
        float *d = wdata(w[j]);
        for (int64_t i = 0; i < as_sizes[j]; i++) d[i] = fval(me, 60 + j, 0, 0, i); /* init unifies to worker 0's */
    }
    int64_t ik = 42;
    WOK(mxp_kvstore_init_str(kv, 2, as_names, w));
    WOK(mxp_kvstore_init(kv, 1, &ik, &w[2]));
    static const char *ok[] = {"learning_rate", "momentum", "wd", "rescale_grad"};
    static const char *ov[] = {"0.1", "0.9", "0.01", "0.5"};
    WOK(mxp_kvstore_set_optimizer(kv, "sgd", 4, ok, ov));
}

/* 2 workers, 2 servers: pushes serialised (worker 0's step, then worker
 * 1's, each waited for through a pull and a barrier) reach the weights a
 * local store reaches on the same pushes in the same order, bit for bit. */
static int worker_async(FILE *out) {
    mxp_kvstore *kv = NULL;
    WOK(mxp_kvstore_create("dist_async", 0, NULL, NULL, &kv));
    if (mxp_kvstore_is_server(kv)) {
        WCHECK(mxp_kvstore_push_str(kv, 0, NULL, NULL, 0) == MXP_EMISUSE, "a server accepted a push");
        WOK(mxp_kvstore_run_server(kv));
        mxp_kvstore_free(kv);
        return fails ? 3 : 0;
    }
    int me = mxp_kvstore_rank(kv), n = mxp_kvstore_num_workers(kv);
    WCHECK(n == 2 && mxp_kvstore_updates_on_servers(kv), "%d workers, updates on servers %d", n,
           mxp_kvstore_updates_on_servers(kv));
    WCHECK(mxp_kvstore_set_updater(kv, as_dummy_updater, NULL) == MXP_EUNSUPPORTED, "set_updater was accepted");
    mxp_ndarray *w[AS_KEYS];
    as_init(kv, me, w);
    as_pull_all(kv, w);
    WCHECK(((float *)mxp_ndarray_data(w[0]))[1400] == fval(0, 60, 0, 0, 1400), "init: worker %d does not hold worker "
           "0's value", me);
    /* Without it worker 0's first push could reach the servers before the
     * other worker's pull above, which would then see the updated value
     * (seen under load in CI). */
    WOK(mxp_kvstore_barrier(kv));
    for (int step = 0; step < AS_STEPS; step++)
        for (int turn = 0; turn < n; turn++) {
            if (turn == me) {
                for (int j = 0; j < AS_KEYS; j++) as_push(kv, me, step, j);
                as_pull_all(kv, w); /* the servers answer after applying this worker's pushes */
            }
            WOK(mxp_kvstore_barrier(kv));
        }
    as_pull_all(kv, w);
    /* The serial replay on a local store. */
    mxp_kvstore *loc = NULL;
    WOK(mxp_kvstore_create("local", 0, NULL, NULL, &loc));
    mxp_ndarray *r[AS_KEYS];
    as_init(loc, 0, r);
    for (int step = 0; step < AS_STEPS; step++)
        for (int turn = 0; turn < n; turn++)
            for (int j = 0; j < AS_KEYS; j++) as_push(loc, turn, step, j);
    as_pull_all(loc, r);
    for (int j = 0; j < AS_KEYS; j++) {
        const float *a = mxp_ndarray_data(w[j]), *b = mxp_ndarray_data(r[j]);
        int64_t bad = 0;
        for (int64_t i = 0; i < as_sizes[j]; i++) bad += a[i] != b[i];
        WCHECK(bad == 0, "key %d: %lld of %lld weights differ from the serial replay (e.g. %.9g vs %.9g)", j,
               (long long)bad, (long long)as_sizes[j], a[0], b[0]);
        fwrite(a, 4, (size_t)as_sizes[j], out);
        mxp_ndarray_release(r[j]);
    }
    mxp_kvstore_free(loc);
    for (int j = 0; j < AS_KEYS; j++) mxp_ndarray_release(w[j]);
    mxp_kvstore_free(kv);
    return fails ? 3 : 0;
}

/* dist_async under a fault: workers push and pull in a loop; the rank
 * MXP_KVTEST_VICTIM stops itself (SIGSTOP) — a worker mid-push, or the
 * server from a thread while it serves. */
static void *stop_later(void *arg) {
    (void)arg;
    struct timespec ts = {0, 500000000L};
    nanosleep(&ts, NULL);
    raise(SIGSTOP);
    return NULL;
}

static int worker_async_fault(void) {
    mxp_kvstore *kv = NULL;
    WOK(mxp_kvstore_create("dist_async", 0, NULL, NULL, &kv));
    int victim = atoi(getenv("MXP_KVTEST_VICTIM"));
    if (mxp_kvstore_is_server(kv)) {
        pthread_t t;
        if (mxp_kvstore_num_workers(kv) + mxp_kvstore_rank(kv) == victim) pthread_create(&t, NULL, stop_later, NULL);
        int rc = mxp_kvstore_run_server(kv);
        fprintf(stderr, "server: %s\n", rc ? mxp_last_error() : "ended without an error");
        fflush(NULL);
        _exit(rc ? 4 : 5);
    }
    int me = mxp_kvstore_rank(kv);
    int64_t keys[2] = {1, 2};
    mxp_ndarray *v[2];
    for (int k = 0; k < 2; k++) {
        v[k] = warr(5000, MXP_DTYPE_F32);
        memset(wdata(v[k]), 0, 5000 * 4);
    }
    WOK(mxp_kvstore_init(kv, 2, keys, v));
    for (int step = 0; step < 1000000; step++) {
        if (me == victim && step == 20) raise(SIGSTOP);
        WOK(mxp_kvstore_pushpull(kv, 2, keys, v, v, 0));
        for (int k = 0; k < 2; k++)
            if (mxp_ndarray_wait_to_read(v[k])) {
                fprintf(stderr, "worker rank %d: step %d: %s\n", me, step, mxp_last_error());
                fflush(NULL);
                _exit(4);
            }
    }
    return 5;
}

/* ------------------------------------------------------------ equivalence */

#define FASHION "/usr/share/datasets/fashion-mnist"
enum { EQ_STEPS = 20, EQ_GLOBAL = 64, EQ_FEAT = 784 };

/* The first EQ_STEPS * EQ_GLOBAL training images (flat) and labels. */
static void fashion_head(float **x, float **y) {
    char bs[16];
    snprintf(bs, sizeof bs, "%d", EQ_STEPS * EQ_GLOBAL);
    const char *k[] = {"image", "label", "batch_size", "shuffle", "flat", "silent"};
    const char *v[] = {FASHION "/train-images-idx3-ubyte.gz", FASHION "/train-labels-idx1-ubyte.gz", bs, "False",
                       "True", "True"};
    mxp_iter *it = NULL;
    WOK(mxp_iter_create("MNISTIter", 6, k, v, &it));
    int has = 0;
    WOK(mxp_iter_next(it, &has));
    if (!has) exit(2);
    size_t n = (size_t)EQ_STEPS * EQ_GLOBAL;
    *x = malloc(n * EQ_FEAT * 4);
    *y = malloc(n * 4);
    if (!*x || !*y) exit(2);
    WOK(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), *x, n * EQ_FEAT * 4));
    WOK(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), *y, n * 4));
    mxp_iter_free(it);
}

/* Train examples/mlp for EQ_STEPS steps: as worker `part` of `parts`, on
 * the part-th slice of each global batch, through kv (NULL: alone, on whole
 * batches).  Writes every parameter, in module order, to out. */
static void train_mlp(mxp_kvstore *kv, int part, int parts, FILE *out) {
    float *x, *y;
    fashion_head(&x, &y);
    int64_t per = EQ_GLOBAL / parts, n = (int64_t)EQ_STEPS * per;
    int64_t xs[2] = {n, EQ_FEAT}, ys = n;
    mxp_ndarray *xd = NULL, *yd = NULL;
    WOK(mxp_ndarray_create(xs, 2, MXP_DTYPE_F32, trt_cpu, &xd));
    WOK(mxp_ndarray_create(&ys, 1, MXP_DTYPE_F32, trt_cpu, &yd));
    float *xp = wdata(xd), *yp = wdata(yd);
    for (int64_t b = 0; b < EQ_STEPS; b++) {
        int64_t src = b * EQ_GLOBAL + part * per, dst = b * per;
        memcpy(xp + dst * EQ_FEAT, x + src * EQ_FEAT, (size_t)per * EQ_FEAT * 4);
        memcpy(yp + dst, y + src, (size_t)per * 4);
    }
    free(x);
    free(y);
    mxp_iter *it = NULL;
    WOK(mxp_iter_create_ndarray(1, &xd, 1, &yd, per, 0, 0, MXP_LAST_BATCH_DISCARD, &it));
    mxp_symbol *sym = NULL;
    WOK(mxp_symbol_load_file(MXP_SOURCE_DIR "/examples/mlp/mlp-symbol.json", &sym));
    mxp_module *m = NULL;
    WOK(mxp_module_create(sym, 0, NULL, 1, NULL, &m));
    static const char *ok[] = {"learning_rate", "momentum", "wd"}, *ov[] = {"0.05", "0.9", "0.0001"};
    mxp_init xav = mxp_init_xavier(MXP_XAVIER_UNIFORM, MXP_XAVIER_AVG, 3.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = (uint32_t)sizeof o;
    o.num_epoch = 1;
    o.optimizer = "sgd";
    o.n_opt_kwargs = 3;
    o.opt_keys = ok;
    o.opt_vals = ov;
    o.seed = 7;
    o.initializer = &xav;
    o.kvstore = kv;
    WOK(mxp_module_fit(m, it, NULL, &o));
    for (int i = 0; i < mxp_module_num_params(m); i++) {
        mxp_ndarray *p = mxp_module_param(m, mxp_module_param_name(m, i));
        fwrite(wdata(p), 1, mxp_ndarray_nbytes(p), out);
    }
    mxp_module_free(m);
    mxp_symbol_release(sym);
    mxp_iter_free(it);
    mxp_ndarray_release(xd);
    mxp_ndarray_release(yd);
}

static int worker_equiv(FILE *out) {
    mxp_kvstore *kv = NULL;
    WOK(mxp_kvstore_create("dist_sync", 0, NULL, NULL, &kv));
    train_mlp(kv, mxp_kvstore_rank(kv), mxp_kvstore_num_workers(kv), out);
    mxp_kvstore_free(kv);
    return 0;
}

static int worker_main(const char *scenario) {
    setenv("MXP_MANIFEST", MXP_BUILD_DIR "/plugins/manifest.yaml", 1);
    if (!strcmp(scenario, "async_fault")) return worker_async_fault();
    if (!strcmp(scenario, "async_alone")) { /* one rank: no room for a server and a worker */
        mxp_kvstore *kv = NULL;
        int rc = mxp_kvstore_create("dist_async", 0, NULL, NULL, &kv);
        printf("create: %d %s\n", rc, mxp_last_error());
        return rc == MXP_EINVAL && !kv && strstr(mxp_last_error(), "MXP_KV_NUM_SERVERS") ? 0 : 3;
    }
    if (!strcmp(scenario, "sums") || !strcmp(scenario, "equiv") || !strcmp(scenario, "async")) {
        const char *dir = getenv("MXP_KVTEST_DIR");
        char path[512];
        snprintf(path, sizeof path, "%s/out.%s", dir, getenv("OMPI_COMM_WORLD_RANK"));
        FILE *f = fopen(path, "wb");
        if (!f) return 2;
        int rc = !strcmp(scenario, "sums") ? worker_sums(f) : !strcmp(scenario, "async") ? worker_async(f)
                                                                                            : worker_equiv(f);
        fclose(f);
        return rc;
    }
    if (!strcmp(scenario, "kill") || !strcmp(scenario, "stop")) return worker_fault(scenario);
    fprintf(stderr, "unknown worker scenario '%s'\n", scenario);
    return 2;
}

/* ------------------------------------------------------------ launcher */

static int have_mpi(void) {
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        cr_log_warn("skipped: mpirun not found (Open MPI is absent; install openmpi-bin libopenmpi-dev)");
        return 0;
    }
    if (access(MXP_BUILD_DIR "/plugins/libmxp-kvstore-dist.so", R_OK)) {
        cr_log_warn("skipped: the kvstore-dist pack was not built (Open MPI headers absent)");
        return 0;
    }
    return 1;
}

/* Run this binary as `np` MPI workers; returns mpirun's exit status and
 * the seconds it took; output goes to trt_dir/log.<tag>. */
static int launch(int np, const char *scenario, const char *extra_env, const char *tag, double *secs) {
    char self[512];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(len > 0);
    self[len] = 0;
    /* Under ASan: Open MPI is built without frame pointers, so its leaks'
     * stacks only name its libraries (and match the suppressions) with the
     * slow unwinder. */
    const char *lsan = getenv("LSAN_OPTIONS"), *asan = getenv("ASAN_OPTIONS");
    char cmd[4096];
    /* env -u BXFI_MAP: Criterion's sandbox marks its workers with it, and a
     * process of this binary that inherits it thinks it is one. */
    snprintf(cmd, sizeof cmd,
             "env -u BXFI_MAP MXP_KVTEST_WORKER=%s MXP_KVTEST_DIR=%s %s %s%s%s %s%s%s "
             "timeout -k 5 120 mpirun -np %d --allow-run-as-root --oversubscribe --bind-to none "
             "--mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "
             "%s >%s/log.%s 2>&1",
             scenario, trt_dir, extra_env ? extra_env : "", lsan ? "LSAN_OPTIONS='" : "", lsan ? lsan : "",
             lsan ? ":suppressions=" MXP_SOURCE_DIR "/tests/sanitizer/mpi-lsan.supp'" : "", asan ? "ASAN_OPTIONS='" : "",
             asan ? asan : "", asan ? ":fast_unwind_on_malloc=0'" : "", np, self, trt_dir, tag);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (secs) *secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *slurp(const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", trt_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert(b);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    if (len) *len = got;
    return b;
}

static void expect_ok_run(int rc, const char *tag) {
    char name[64];
    snprintf(name, sizeof name, "log.%s", tag);
    char *log = slurp(name, NULL);
    cr_assert_eq(rc, 0, "mpirun (%s) exited %d:\n%s", tag, rc, log ? log : "(no log)");
    free(log);
}

/* Returns rank r's output of the last run (caller frees). */
static char *rank_out(int r, size_t *len) {
    char name[32];
    snprintf(name, sizeof name, "out.%d", r);
    char *b = slurp(name, len);
    cr_assert(b, "rank %d wrote no output", r);
    return b;
}

TestSuite(kvstore_dist, .init = trt_setup, .fini = trt_teardown, .timeout = 300);

static void sums_identical_across_ranks(int np, const char *env, const char *tag, char **out0, size_t *len0) {
    int rc = launch(np, "sums", env, tag, NULL);
    expect_ok_run(rc, tag);
    *out0 = rank_out(0, len0);
    size_t want = 0;
    for (int k = 0; k < N_INT_KEYS; k++) want += (size_t)int_sizes[k] * 4;
    want = want * ROUNDS + 33 * 8 * ROUNDS + 1005 * 4;
    cr_assert_eq(*len0, want, "rank 0 wrote %zu bytes, expected %zu", *len0, want);
    for (int r = 1; r < np; r++) {
        size_t len;
        char *o = rank_out(r, &len);
        cr_expect(len == *len0 && !memcmp(o, *out0, len), "%s: rank %d's sums and weights differ from rank 0's", tag,
                  r);
        free(o);
    }
}

Test(kvstore_dist, two_ranks_sums_and_identical_weights) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    char *o;
    size_t len;
    /* With held steps forced on (plugins/kvstore-dist/src/defer.c: on by
     * itself only on one CPU per rank): repeated key sets get held, the
     * pushes that wait for a previous sum make holds time out. */
    sums_identical_across_ranks(2, "MXP_KV_BUCKET_BYTES=64K MXP_KV_SEGMENT_BYTES=8K MXP_KV_DEFER=1", "np2", &o, &len);
    free(o);
}

Test(kvstore_dist, three_ranks_fused_and_unfused_give_the_same_bits) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    char *fused, *unfused;
    size_t lf, lu;
    /* Fused and cut into 4 KiB segments (many pipelined segments, pieces
     * crossing key boundaries) against whole keys, one at a time. */
    sums_identical_across_ranks(3, "MXP_KV_BUCKET_BYTES=64K MXP_KV_SEGMENT_BYTES=4K", "np3-fused", &fused, &lf);
    sums_identical_across_ranks(3, "MXP_KV_BUCKET_BYTES=0", "np3-unfused", &unfused, &lu);
    cr_expect(lf == lu && !memcmp(fused, unfused, lf), "bucketed and unbucketed sums differ");
    free(fused);
    free(unfused);
}

static void expect_fault_reported_by(int np, const char *how, const char *env, const char *tag, int victim) {
    double secs = 0;
    int rc = launch(np, how, env, tag, &secs);
    char name[32], who[32];
    snprintf(name, sizeof name, "log.%s", tag);
    snprintf(who, sizeof who, "rank %d", victim);
    char *log = slurp(name, NULL);
    cr_assert(log);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    cr_expect_neq(rc, 0, "mpirun exited 0 after %s was %s:\n%s", who, tag, log);
    cr_expect_neq(rc, 124, "mpirun hung (killed by the test's 120 s timeout):\n%s", log);
    cr_expect(strstr(log, who) && strstr(log, host), "no message naming %s on host %s:\n%s", who, host, log);
    cr_log_info("%s: mpirun exited %d after %.1f s", tag, rc, secs);
    free(log);
}

static void expect_fault_reported(const char *how) {
    expect_fault_reported_by(3, how, "MXP_KV_TIMEOUT=6 MXP_KVTEST_VICTIM=2", how, 2);
}

Test(kvstore_dist, killed_rank_ends_the_others) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    expect_fault_reported("kill");
}

Test(kvstore_dist, stopped_rank_times_out_naming_it) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    expect_fault_reported("stop");
}

Test(kvstore_dist, async_two_servers_equal_a_serial_replay) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    int rc = launch(4, "async", "MXP_KV_NUM_SERVERS=2 MXP_KV_BIGARRAY_BOUND=1000", "async", NULL);
    expect_ok_run(rc, "async");
    size_t l0, l1;
    char *w0 = rank_out(0, &l0), *w1 = rank_out(1, &l1);
    cr_expect_eq(l0, (size_t)(1500 + 7 + 300) * 4, "worker 0 wrote %zu bytes", l0);
    cr_expect(l0 == l1 && !memcmp(w0, w1, l0), "the two workers pulled different weights");
    free(w0);
    free(w1);
}

Test(kvstore_dist, async_needs_a_server_and_a_worker) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    expect_ok_run(launch(1, "async_alone", NULL, "async-alone", NULL), "async-alone");
}

/* A stopped worker: the server names it and ends the job. */
Test(kvstore_dist, async_stopped_worker_is_named_by_the_server) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    expect_fault_reported_by(3, "async_fault", "MXP_KV_TIMEOUT=4 MXP_KVTEST_VICTIM=1", "async-stop-worker", 1);
}

/* A stopped server: the workers' pulls time out naming it. */
Test(kvstore_dist, async_stopped_server_is_named_by_the_workers) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    expect_fault_reported_by(3, "async_fault", "MXP_KV_TIMEOUT=4 MXP_KVTEST_VICTIM=2", "async-stop-server", 2);
}

/* dist_sync with 2 workers x batch 32 on the halves of each batch of 64 ==
 * 1 worker x batch 64 (sum of gradients = batch gradient; rescale_grad is
 * 1/64 in both), after 20 SGD-momentum steps, to float tolerance. */
Test(kvstore_dist, two_workers_batch_32_equal_one_worker_batch_64) {
    if (!have_mpi()) cr_skip_test("Open MPI or the kvstore-dist pack is absent");
    if (access(FASHION "/train-images-idx3-ubyte.gz", R_OK)) cr_skip_test("Fashion-MNIST not installed");
    /* Held steps forced on (defer.c; by itself on only with one CPU per
     * rank): the learned step set is examples/mlp's 6 parameters (3
     * FullyConnected, weight and bias), and the sums stay exact.  A
     * malformed MXP_KV_HOT_US ('3ms') is warned about by name and the
     * default used, not read as 0. */
    int rc = launch(2, "equiv", "MXP_KV_DEFER=1 MXP_KV_STATS=1 MXP_KV_HOT_US=3ms", "equiv", NULL);
    expect_ok_run(rc, "equiv");
    char *elog = slurp("log.equiv", NULL);
    cr_assert(elog);
    int learned = 0;
    for (const char *q = elog; (q = strstr(q, "deferral on: ")); q++) learned += !!strstr(q, "step set of 6 keys");
    int with_set = 0;
    for (const char *q = elog; (q = strstr(q, "step set of 6 keys")); q++) with_set++;
    cr_expect(learned >= 1 && with_set == 2, "the 2 ranks did not both learn the 6-key step set:\n%s", elog);
    /* Each rank's held steps: a step's wait for the peers is part of its
     * time to the last sum, so the medians keep that order too.  Only
     * held steps that were released (not timed out) have one: a rank with
     * none (on a loaded machine a step's pushes can spread past the hold
     * limit, so all went unheld or timed out) prints zero medians. */
    int medians = 0;
    for (const char *q = elog; (q = strstr(q, "deferral on: ")); q++) {
        int held = -1, timed_out = -1;
        double tail = -1, wait = -1;
        const char *m = strstr(q, "(medians ");
        cr_expect(sscanf(q, "deferral on: %d steps held (%d timed out)", &held, &timed_out) == 2 && m &&
                      sscanf(m, "(medians %lf us, %lf us)", &tail, &wait) == 2,
                  "no held-step counts or medians in:\n%s", elog);
        if (held - timed_out > 0)
            cr_expect(tail > 0 && wait >= 0 && wait <= tail, "held-step medians out of order in:\n%s", elog);
        else
            cr_expect(tail == 0 && wait == 0, "medians without held steps in:\n%s", elog);
        medians++;
    }
    cr_expect(medians == 2, "%d ranks printed held-step medians, not 2:\n%s", medians, elog);
    int warned = 0;
    for (const char *q = elog; (q = strstr(q, "MXP_KV_HOT_US='3ms' is not a whole number")); q++) warned++;
    cr_expect(warned == 2, "%d ranks warned about MXP_KV_HOT_US='3ms', not 2:\n%s", warned, elog);
    free(elog);
    size_t l0, l1;
    char *w0 = rank_out(0, &l0), *w1 = rank_out(1, &l1);
    cr_assert(l0 == l1 && !memcmp(w0, w1, l0), "the two workers' parameters differ");
    char path[512];
    snprintf(path, sizeof path, "%s/single", trt_dir);
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    train_mlp(NULL, 0, 1, f);
    fclose(f);
    size_t ls;
    char *ws = slurp("single", &ls);
    cr_assert_eq(ls, l0, "single run wrote %zu bytes, workers %zu", ls, l0);
    const float *a = (const float *)w0, *b = (const float *)ws;
    double worst = 0;
    size_t n = ls / 4, moved = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (1e-3 + fabs((double)b[i]));
        if (d > worst) worst = d;
        moved += a[i] != b[i];
    }
    cr_log_info("equivalence: %zu parameters, %zu differ in some bit, worst relative difference %.3g", n, moved,
                worst);
    cr_expect_lt(worst, 1e-3, "2x32 vs 1x64: worst relative difference %.3g", worst);
    free(w0);
    free(w1);
    free(ws);
}

int main(int argc, char **argv) {
    const char *scenario = getenv("MXP_KVTEST_WORKER");
    if (scenario) return worker_main(scenario);
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
