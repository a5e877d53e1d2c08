/* test_pool.c — the storage pool: size classes, alignment, statistics, hit
 * rate on a repeated pattern, the cache limit, failure injection with
 * release-and-retry, naive mode, a fake device backend and concurrent use.
 * Criterion runs each test in its own process, so every test starts with
 * fresh pools and may set MXP_MEM_POOL_* before its first allocation. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"

static const mxp_device CPU0 = {MXP_DEV_CPU, 0};

Test(storage, size_classes) {
    cr_assert_eq(mxp__storage_round(1), 64);
    cr_assert_eq(mxp__storage_round(64), 64);
    cr_assert_eq(mxp__storage_round(65), 128);
    cr_assert_eq(mxp__storage_round(1000), 1024);
    cr_assert_eq(mxp__storage_round(4097), 8192);
    cr_assert_eq(mxp__storage_round((size_t)16 << 20), (size_t)16 << 20);
    /* Above 16 MiB: multiples of 16 MiB, not powers of two. */
    cr_assert_eq(mxp__storage_round(((size_t)16 << 20) + 1), (size_t)32 << 20);
    cr_assert_eq(mxp__storage_round(((size_t)40 << 20)), (size_t)48 << 20);
}

Test(storage, parse_size) {
    uint64_t v;
    cr_assert_eq(mxp__storage_parse_size("4096", &v), MXP_OK);
    cr_assert_eq(v, 4096);
    cr_assert_eq(mxp__storage_parse_size("512M", &v), MXP_OK);
    cr_assert_eq(v, 512ull << 20);
    cr_assert_eq(mxp__storage_parse_size("2g", &v), MXP_OK);
    cr_assert_eq(v, 2ull << 30);
    cr_assert_eq(mxp__storage_parse_size("3KB", &v), MXP_OK);
    cr_assert_eq(v, 3072);
    cr_assert_eq(mxp__storage_parse_size("12X", &v), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "suffix"), "%s", mxp_last_error());
    cr_assert_eq(mxp__storage_parse_size("", &v), MXP_EINVAL);
    cr_assert_eq(mxp__storage_parse_size("-5", &v), MXP_EINVAL);
}

Test(storage, alignment_and_stats) {
    mxp_storage_block b[5];
    size_t sizes[5] = {1, 100, 5000, 70000, 3};
    uint64_t expect = 0;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(mxp__storage_alloc(CPU0, sizes[i], &b[i]), MXP_OK);
        cr_assert_not_null(b[i].ptr);
        cr_assert_eq((uintptr_t)b[i].ptr % 64, 0, "block %d not 64-byte aligned", i);
        cr_assert_geq(b[i].size, sizes[i]);
        memset(b[i].ptr, 0xAB, sizes[i]); /* writable (ASan checks bounds) */
        expect += mxp__storage_round(sizes[i]);
    }
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &st), MXP_OK);
    cr_assert_eq(st.bytes_in_use, expect);
    cr_assert_eq(st.bytes_peak, expect);
    cr_assert_eq(st.bytes_pooled, 0);
    cr_assert_eq(st.n_misses, 5);
    cr_assert_eq(st.n_hits, 0);
    for (int i = 0; i < 5; i++) mxp__storage_free(&b[i]);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &st), MXP_OK);
    cr_assert_eq(st.bytes_in_use, 0);
    cr_assert_eq(st.bytes_pooled, expect);
    cr_assert_eq(st.bytes_peak, expect);
    /* Same class again: served from the pool, same pointer (LIFO). */
    mxp_storage_block again;
    cr_assert_eq(mxp__storage_alloc(CPU0, 90, &again), MXP_OK);
    cr_assert_eq(again.ptr, b[1].ptr);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &st), MXP_OK);
    cr_assert_eq(st.n_hits, 1);
    mxp__storage_free(&again);
    cr_assert_eq(mxp_storage_release_all(CPU0), MXP_OK);
    cr_assert_eq(mxp_storage_stats_get(CPU0, &st), MXP_OK);
    cr_assert_eq(st.bytes_pooled, 0);
    cr_assert_eq(st.n_releases, 5);
}

Test(storage, zero_bytes_and_bad_device) {
    mxp_storage_block b;
    cr_assert_eq(mxp__storage_alloc(CPU0, 0, &b), MXP_OK);
    cr_assert_null(b.ptr);
    mxp__storage_free(&b); /* no-op */
    mxp__storage_free(NULL);
    mxp_device bogus = {40, 0};
    cr_assert_eq(mxp__storage_alloc(bogus, 10, &b), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "device type 40"), "%s", mxp_last_error());
}

/* A training-like pattern: per iteration, activations of several sizes are
 * allocated, gradients allocated, then everything freed in a different
 * order.  After the first iteration every request must hit the pool. */
Test(storage, hit_rate_training_pattern) {
    enum { ITERS = 1000, N = 12 };
    size_t sizes[N] = {4096 * 4, 128 * 256 * 4, 1000 * 4, 64 * 1000 * 4, 32 * 32 * 3 * 4 * 64,
                       500, 7, 300000, 1 << 20, 3 << 20, 64 * 4, 123457};
    mxp_storage_block b[N];
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < N; i++) cr_assert_eq(mxp__storage_alloc(CPU0, sizes[i], &b[i]), MXP_OK);
        for (int i = N - 1; i >= 0; i -= 2) mxp__storage_free(&b[i]);
        for (int i = N - 2; i >= 0; i -= 2) mxp__storage_free(&b[i]);
    }
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.n_misses, N, "misses %llu", (unsigned long long)st.n_misses);
    cr_assert_eq(st.n_hits, (uint64_t)(ITERS - 1) * N);
    double rate = (double)st.n_hits / (double)(st.n_hits + st.n_misses);
    cr_log_info("storage hit rate over %d iterations x %d blocks: %.4f (%llu hits, %llu misses)", ITERS, N,
                rate, (unsigned long long)st.n_hits, (unsigned long long)st.n_misses);
    cr_assert_gt(rate, 0.998);
}

Test(storage, limit_caps_cached_bytes) {
    setenv("MXP_MEM_POOL_LIMIT", "8K", 1);
    mxp_storage_block b[4];
    for (int i = 0; i < 4; i++) cr_assert_eq(mxp__storage_alloc(CPU0, 4096, &b[i]), MXP_OK);
    for (int i = 0; i < 4; i++) mxp__storage_free(&b[i]);
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_limit, 8192);
    cr_assert_eq(st.bytes_pooled, 8192, "pooled %llu", (unsigned long long)st.bytes_pooled);
    cr_assert_eq(st.n_releases, 2);
    /* A block larger than the limit is never cached. */
    mxp_storage_block big;
    cr_assert_eq(mxp__storage_alloc(CPU0, 65536, &big), MXP_OK);
    mxp__storage_free(&big);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_pooled, 8192);
    cr_assert_eq(st.n_releases, 3);
}

Test(storage, naive_mode_never_caches) {
    setenv("MXP_MEM_POOL_TYPE", "naive", 1);
    mxp_storage_block b;
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(mxp__storage_alloc(CPU0, 1000, &b), MXP_OK);
        cr_assert_eq(b.size, 1024); /* rounded to the 64-byte alignment only */
        mxp__storage_free(&b);
    }
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.n_hits, 0);
    cr_assert_eq(st.n_misses, 10);
    cr_assert_eq(st.bytes_pooled, 0);
}

/* Failure injection: fail the first device allocation only.  The pool must
 * release its cache, retry, and succeed. */
static int fail_count;
static int fail_first_n(mxp_device dev, size_t bytes, void *user) {
    (void)dev; (void)bytes; (void)user;
    if (fail_count > 0) { fail_count--; return 1; }
    return 0;
}

Test(storage, failure_releases_cache_and_retries) {
    mxp_storage_block cached;
    cr_assert_eq(mxp__storage_alloc(CPU0, 2048, &cached), MXP_OK);
    mxp__storage_free(&cached);
    mxp__storage_set_fail_hook(fail_first_n, NULL);
    fail_count = 1;
    mxp_storage_block b;
    cr_assert_eq(mxp__storage_alloc(CPU0, 100000, &b), MXP_OK);
    cr_assert_not_null(b.ptr);
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.n_failures, 1);
    cr_assert_eq(st.bytes_pooled, 0, "cache released before retry");
    cr_assert_eq(st.n_releases, 1);
    mxp__storage_free(&b);
    /* Two failures in a row: ENOMEM with a message, nothing leaked/counted. */
    fail_count = 2;
    cr_assert_eq(mxp__storage_alloc(CPU0, 5000, &b), MXP_ENOMEM);
    cr_assert_null(b.ptr);
    const char *msg = mxp_last_error();
    cr_assert(strstr(msg, "cpu(0)") && strstr(msg, "5000 bytes") && strstr(msg, "in use"), "%s", msg);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 0);
    mxp__storage_set_fail_hook(NULL, NULL);
}

/* A fake accelerator backend that fails on demand and counts its memory. */
typedef struct fake_dev {
    size_t live_bytes;
    int fail;
    int n_alloc, n_free;
} fake_dev;

static void *fake_alloc(void *ctx, int32_t id, size_t bytes, size_t align) {
    fake_dev *f = ctx;
    (void)id;
    if (f->fail) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes)) return NULL;
    f->live_bytes += bytes;
    f->n_alloc++;
    return p;
}

static void fake_free(void *ctx, int32_t id, void *ptr, size_t bytes) {
    fake_dev *f = ctx;
    (void)id;
    f->live_bytes -= bytes;
    f->n_free++;
    free(ptr);
}

Test(storage, fake_device_backend) {
    enum { FAKE_TYPE = 20 };
    fake_dev f = {0};
    mxp_storage_backend be = {.name = "fake", .ctx = &f, .alloc = fake_alloc, .free = fake_free,
                              .align = 256, .host_accessible = 0};
    cr_assert_eq(mxp__storage_register_device(FAKE_TYPE, &be), MXP_OK);
    cr_assert_eq(mxp__storage_backend(FAKE_TYPE)->host_accessible, 0);
    mxp_device d1 = {FAKE_TYPE, 1};
    mxp_storage_block b;
    cr_assert_eq(mxp__storage_alloc(d1, 3000, &b), MXP_OK);
    cr_assert_eq((uintptr_t)b.ptr % 256, 0);
    cr_assert_eq(f.live_bytes, 4096);
    /* Replacing a backend with memory allocated is refused. */
    cr_assert_eq(mxp__storage_register_device(FAKE_TYPE, &be), MXP_EBUSY);
    cr_assert_eq(mxp__storage_unregister_device(FAKE_TYPE), MXP_EBUSY);
    mxp__storage_free(&b);
    cr_assert_eq(f.live_bytes, 4096, "cached, not returned");
    f.fail = 1;
    mxp_storage_block c;
    cr_assert_eq(mxp__storage_alloc(d1, 1 << 20, &c), MXP_ENOMEM);
    cr_assert(strstr(mxp_last_error(), "fake(1)"), "%s", mxp_last_error());
    cr_assert_eq(f.live_bytes, 0, "cache released on failure");
    f.fail = 0;
    cr_assert_eq(mxp__storage_unregister_device(FAKE_TYPE), MXP_OK);
    cr_assert_eq(mxp__storage_alloc(d1, 10, &c), MXP_EINVAL);
    cr_assert_eq(f.n_alloc, f.n_free);
}

static void *hammer(void *arg) {
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        mxp_storage_block b;
        size_t sz = (size_t)(64 << (i % 8));
        if (mxp__storage_alloc(CPU0, sz, &b) != MXP_OK) return (void *)1;
        ((volatile char *)b.ptr)[sz - 1] = 1;
        mxp__storage_free(&b);
    }
    return NULL;
}

Test(storage, concurrent_alloc_free) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    mxp_storage_stats st = MXP_STRUCT_INIT(mxp_storage_stats);
    mxp_storage_stats_get(CPU0, &st);
    cr_assert_eq(st.bytes_in_use, 0);
    cr_assert_eq(st.n_hits + st.n_misses, 80000);
    cr_assert_leq(st.n_misses, 32); /* at most 4 threads x 8 classes */
}
