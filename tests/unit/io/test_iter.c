/* test_iter.c — the iterator front end (runtime/src/io/iter.c) on real
 * packs: MNISTIter (io-image) on small IDX files written here, and the
 * iter_fail fixture's CountIter for error propagation.  Checks values
 * (pixels / 256, labels), batch counts, round_batch pad, per-epoch shuffle
 * as a function of (seed, epoch), set_epoch = resume, prefetch giving the
 * same sequence as synchronous production (also across resets mid-epoch),
 * that batch arrays stay valid until the next call, errors from the pack
 * in order with its message, kwarg errors, and use after fork. */
#include "io_test_util.h"

#include <sys/wait.h>

TestSuite(io_iter, .init = iot_setup, .fini = iot_teardown);

static mxp_iter *mnist(const char *img, const char *lab, const char *batch, const char *shuffle,
                       const char *prefetch, const char *extra_k, const char *extra_v) {
    const char *k[8] = {"image", "label", "batch_size", "shuffle", "flat", "silent", "prefetch_buffer", extra_k};
    const char *v[8] = {img, lab, batch, shuffle, "True", "True", prefetch, extra_v};
    mxp_iter *it = NULL;
    int rc = mxp_iter_create("MNISTIter", extra_k ? 8 : 7, k, v, &it);
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    return it;
}

/* Sample ids of every batch of the current epoch, concatenated; *n_batches. */
static uint32_t *epoch_ids(mxp_iter *it, size_t item, int *n_batches, int *last_pad) {
    int64_t B = mxp_iter_batch_size(it);
    uint32_t *ids = malloc(sizeof *ids * 4096);
    int nb = 0;
    *last_pad = 0;
    for (;;) {
        int has = -1;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
        if (!has) break;
        float *d = iot_floats(mxp_iter_data(it, 0));
        float *l = iot_floats(mxp_iter_label(it, 0));
        for (int64_t j = 0; j < B; j++) {
            uint32_t id = iot_sample_id(d, item, j);
            ids[nb * B + j] = id;
            for (size_t q = 0; q < item; q++)
                cr_assert_eq(d[j * item + q], (float)iot_pixel(id, (uint32_t)q) / 256.0f);
            cr_assert_eq(l[j], (float)(id % 10));
        }
        int64_t n_idx = 0;
        const uint64_t *idx = mxp_iter_index(it, &n_idx);
        cr_assert(idx);
        cr_assert_eq(n_idx, B);
        for (int64_t j = 0; j < B; j++) cr_assert_eq(idx[j], ids[nb * B + j]);
        *last_pad = mxp_iter_pad(it);
        free(d);
        free(l);
        nb++;
    }
    *n_batches = nb;
    return ids;
}

Test(io_iter, mnist_values_layout_and_end_of_epoch) {
    char img[128], lab[128];
    iot_mnist_files(60, 3, 5, 1, img, lab);
    mxp_iter *it = mnist(img, lab, "10", "False", "2", NULL, NULL);
    cr_assert_eq(mxp_iter_num_data(it), 1);
    cr_assert_eq(mxp_iter_num_label(it), 1);
    const char *name;
    int ndim, dtype;
    const int64_t *shape;
    cr_assert_eq(mxp_iter_provide_data(it, 0, &name, &ndim, &shape, &dtype), MXP_OK);
    cr_assert_str_eq(name, "data");
    cr_assert_eq(ndim, 2);
    cr_assert_eq(shape[0], 10);
    cr_assert_eq(shape[1], 15);
    cr_assert_eq(dtype, MXP_DTYPE_F32);
    cr_assert_eq(mxp_iter_provide_label(it, 0, &name, &ndim, &shape, &dtype), MXP_OK);
    cr_assert_str_eq(name, "softmax_label");
    cr_assert_eq(ndim, 1);
    cr_assert_eq(shape[0], 10);
    cr_assert_eq(mxp_iter_provide_label(it, 1, &name, NULL, NULL, NULL), MXP_EINVAL);
    cr_assert_null(mxp_iter_data(it, 0), "no batch before the first next");

    int nb, pad;
    uint32_t *ids = epoch_ids(it, 15, &nb, &pad);
    cr_assert_eq(nb, 6);
    cr_assert_eq(pad, 0);
    for (uint32_t i = 0; i < 60; i++) cr_assert_eq(ids[i], i, "unshuffled order");
    free(ids);
    /* Past the end it stays at the end. */
    int has = 1;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    cr_assert_eq(has, 0);
    cr_assert_null(mxp_iter_data(it, 0));
    /* The next epoch starts again. */
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    cr_assert_eq(mxp_iter_epoch(it), 1);
    ids = epoch_ids(it, 15, &nb, &pad);
    cr_assert_eq(nb, 6);
    cr_assert_eq(ids[0], 0);
    free(ids);
    mxp_iter_free(it);
}

Test(io_iter, mnist_round_batch_pads_and_default_drops) {
    char img[128], lab[128];
    iot_mnist_files(25, 2, 2, 0, img, lab);
    mxp_iter *it = mnist(img, lab, "10", "False", "1", "round_batch", "True");
    int nb, pad;
    uint32_t *ids = epoch_ids(it, 4, &nb, &pad);
    cr_assert_eq(nb, 3);
    cr_assert_eq(pad, 5);
    for (uint32_t i = 0; i < 30; i++) cr_assert_eq(ids[i], i % 25, "wraps to the start");
    free(ids);
    mxp_iter_free(it);

    it = mnist(img, lab, "10", "False", "0", NULL, NULL);
    ids = epoch_ids(it, 4, &nb, &pad);
    cr_assert_eq(nb, 2, "MXNet's MNISTIter drops the short last batch");
    free(ids);
    mxp_iter_free(it);
}

Test(io_iter, mnist_shuffle_is_a_function_of_seed_and_epoch) {
    char img[128], lab[128];
    iot_mnist_files(40, 2, 2, 1, img, lab);
    mxp_iter *a = mnist(img, lab, "8", "True", "2", "seed", "7");
    int nb, pad;
    uint32_t *e0 = epoch_ids(a, 4, &nb, &pad);
    cr_assert_eq(nb, 5);
    int seen[40] = {0}, moved = 0;
    for (int i = 0; i < 40; i++) {
        seen[e0[i]]++;
        moved += e0[i] != (uint32_t)i;
    }
    for (int i = 0; i < 40; i++) cr_assert_eq(seen[i], 1, "a permutation");
    cr_assert_gt(moved, 20);
    cr_assert_eq(mxp_iter_reset(a), MXP_OK);
    uint32_t *e1 = epoch_ids(a, 4, &nb, &pad);
    cr_assert_neq(memcmp(e0, e1, 40 * sizeof *e0), 0, "a new order each epoch");

    /* Resume: a fresh iterator set to epoch 1 sees epoch 1's order. */
    mxp_iter *b = mnist(img, lab, "8", "True", "0", "seed", "7");
    cr_assert_eq(mxp_iter_set_epoch(b, 1), MXP_OK);
    cr_assert_eq(mxp_iter_epoch(b), 1);
    uint32_t *r1 = epoch_ids(b, 4, &nb, &pad);
    cr_assert_eq(memcmp(e1, r1, 40 * sizeof *e1), 0);
    /* And back to epoch 0. */
    cr_assert_eq(mxp_iter_set_epoch(b, 0), MXP_OK);
    uint32_t *r0 = epoch_ids(b, 4, &nb, &pad);
    cr_assert_eq(memcmp(e0, r0, 40 * sizeof *e0), 0);
    /* Another seed, another order. */
    mxp_iter *c = mnist(img, lab, "8", "True", "0", "seed", "8");
    uint32_t *c0 = epoch_ids(c, 4, &nb, &pad);
    cr_assert_neq(memcmp(e0, c0, 40 * sizeof *e0), 0);
    free(e0);
    free(e1);
    free(r1);
    free(r0);
    free(c0);
    mxp_iter_free(a);
    mxp_iter_free(b);
    mxp_iter_free(c);
}

/* Everything one epoch yields, as floats, after consuming `skip` batches of
 * the previous epoch and then resetting (exercises draining). */
static void run_schedule(mxp_iter *it, float *out, int *n_out) {
    int n = 0;
    for (int epoch = 0; epoch < 3; epoch++) {
        int limit = epoch == 1 ? 2 : 1000; /* epoch 1 is cut short by a reset */
        for (int b = 0; b < limit; b++) {
            int has = 0;
            cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
            if (!has) break;
            float *d = iot_floats(mxp_iter_data(it, 0));
            memcpy(out + n, d, mxp_ndarray_nbytes(mxp_iter_data(it, 0)));
            n += (int)(mxp_ndarray_nbytes(mxp_iter_data(it, 0)) / sizeof(float));
            out[n++] = (float)mxp_iter_pad(it);
            free(d);
        }
        cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    }
    *n_out = n;
}

Test(io_iter, prefetch_gives_the_same_sequence_as_none) {
    char img[128], lab[128];
    iot_mnist_files(50, 4, 4, 0, img, lab);
    static float ref[20000], got[20000];
    int n_ref = 0, n_got = 0;
    mxp_iter *s = mnist(img, lab, "7", "True", "0", "round_batch", "True");
    run_schedule(s, ref, &n_ref);
    mxp_iter_free(s);
    cr_assert_gt(n_ref, 1000);
    const char *depths[] = {"1", "2", "4"};
    for (int d = 0; d < 3; d++) {
        mxp_iter *p = mnist(img, lab, "7", "True", depths[d], "round_batch", "True");
        run_schedule(p, got, &n_got);
        mxp_iter_free(p);
        cr_assert_eq(n_got, n_ref, "depth %s", depths[d]);
        cr_assert_eq(memcmp(ref, got, (size_t)n_ref * sizeof(float)), 0, "depth %s", depths[d]);
    }
}

Test(io_iter, batch_stays_valid_until_next_and_engine_reads_are_ordered) {
    mxp_iter *it = NULL;
    const char *k[] = {"n_batches", "batch_size", "width", "prefetch_buffer"};
    const char *v[] = {"30", "4", "3", "3"};
    cr_assert_eq(mxp_iter_create("CountIter", 4, k, v, &it), MXP_OK, "%s", mxp_last_error());
    mxp_device cpu = {MXP_DEV_CPU, 0};
    int64_t shp[2] = {4, 3};
    for (int b = 0; b < 30; b++) {
        int has = 0;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
        cr_assert_eq(has, 1);
        /* Push a copy of the batch, then let the producer run ahead: the
         * copy must still see this batch. */
        mxp_ndarray *copy = NULL;
        cr_assert_eq(mxp_ndarray_create(shp, 2, MXP_DTYPE_F32, cpu, &copy), MXP_OK);
        cr_assert_eq(mxp_ndarray_copy(mxp_iter_data(it, 0), copy), MXP_OK);
        usleep(200);
        float *c = iot_floats(copy);
        for (int j = 0; j < 4; j++)
            for (int q = 0; q < 3; q++) cr_assert_float_eq(c[j * 3 + q], (float)(b * 10 + j) + (float)q / 10.0f, 1e-5);
        free(c);
        mxp_ndarray_release(copy);
    }
    int has = 1;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    cr_assert_eq(has, 0);
    mxp_iter_free(it);
}

Test(io_iter, pack_errors_surface_in_order_with_the_message) {
    for (int pf = 0; pf < 2; pf++) {
        mxp_iter *it = NULL;
        const char *k[] = {"fail_at", "prefetch_buffer"};
        const char *v[] = {"2", pf ? "3" : "0"};
        cr_assert_eq(mxp_iter_create("CountIter", 2, k, v, &it), MXP_OK, "%s", mxp_last_error());
        for (int b = 0; b < 2; b++) {
            int has = 0;
            cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
            cr_assert_eq(has, 1);
            float *l = iot_floats(mxp_iter_label(it, 0));
            cr_assert_eq(l[0], (float)b);
            free(l);
        }
        int has = 1;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_EIO);
        cr_assert_eq(has, 0);
        cr_assert(strstr(mxp_last_error(), "CountIter: injected failure at batch 2 of epoch 0"), "%s", mxp_last_error());
        cr_assert(strstr(mxp_last_error(), "iterator 'CountIter'"), "%s", mxp_last_error());
        /* Sticky until a reset. */
        cr_assert_eq(mxp_iter_next(it, &has), MXP_EIO);
        cr_assert(strstr(mxp_last_error(), "injected failure"), "%s", mxp_last_error());
        cr_assert_eq(mxp_iter_reset(it), MXP_OK);
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
        cr_assert_eq(has, 1);
        float *d = iot_floats(mxp_iter_data(it, 0));
        cr_assert_eq(d[0], 1000.0f, "epoch 1, batch 0");
        free(d);
        mxp_iter_free(it);
    }
}

Test(io_iter, create_errors_name_the_cause) {
    mxp_iter *it = (mxp_iter *)1;
    cr_assert_eq(mxp_iter_create("NoSuchIter", 0, NULL, NULL, &it), MXP_ENOENT);
    cr_assert_null(it);
    cr_assert(strstr(mxp_last_error(), "NoSuchIter"), "%s", mxp_last_error());

    const char *k1[] = {"bogus"};
    const char *v1[] = {"1"};
    cr_assert_eq(mxp_iter_create("CountIter", 1, k1, v1, &it), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "bogus"), "%s", mxp_last_error());

    const char *k2[] = {"prefetch_buffer"};
    const char *v2[] = {"-1"};
    cr_assert_eq(mxp_iter_create("CountIter", 1, k2, v2, &it), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "prefetch_buffer"), "%s", mxp_last_error());

    const char *k3[] = {"dtype"};
    const char *v3[] = {"float16"};
    cr_assert_eq(mxp_iter_create("CountIter", 1, k3, v3, &it), MXP_EUNSUPPORTED);

    const char *k4[] = {"fail_create"};
    const char *v4[] = {"True"};
    cr_assert_eq(mxp_iter_create("CountIter", 1, k4, v4, &it), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "create refused"), "%s", mxp_last_error());

    const char *k5[] = {"image", "label", "ctx", "dtype"};
    const char *v5[] = {"/nonexistent/img", "/nonexistent/lab", "cpu(0)", "float32"};
    cr_assert_neq(mxp_iter_create("MNISTIter", 4, k5, v5, &it), MXP_OK);
    cr_assert_null(it);
    cr_assert(strstr(mxp_last_error(), "/nonexistent/img"), "%s", mxp_last_error());

    /* Host keys are accepted (not passed to the pack). */
    const char *k6[] = {"ctx", "dtype", "prefetch_buffer"};
    const char *v6[] = {"cpu", "float32", "4"};
    cr_assert_eq(mxp_iter_create("CountIter", 3, k6, v6, &it), MXP_OK, "%s", mxp_last_error());
    mxp_iter_free(it);
    mxp_iter_free(NULL);
}

Test(io_iter, fork_child_must_reset_then_works) {
    mxp_iter *it = NULL;
    const char *k[] = {"prefetch_buffer", "n_batches"};
    const char *v[] = {"2", "5"};
    cr_assert_eq(mxp_iter_create("CountIter", 2, k, v, &it), MXP_OK, "%s", mxp_last_error());
    int has = 0;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    cr_assert_eq(has, 1);
    mxp_engine_wait_for_all();
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int h = 0;
        if (mxp_iter_next(it, &h) != MXP_EMISUSE) _exit(1);
        if (mxp_iter_set_epoch(it, 3) != MXP_OK) _exit(2);
        int n = 0;
        while (mxp_iter_next(it, &h) == MXP_OK && h) {
            float d = 0;
            if (mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), &(float[6]){0}, 6 * sizeof(float)) != MXP_OK) _exit(3);
            (void)d;
            n++;
        }
        mxp_iter_free(it);
        _exit(n == 5 ? 0 : 4);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0);
    /* The parent goes on. */
    int n = 1;
    while (mxp_iter_next(it, &has) == MXP_OK && has) n++;
    cr_assert_eq(n, 5);
    mxp_iter_free(it);
}
