/* test_ndarray_iter.c — NDArrayIter (runtime/src/io/ndarray_iter.c) through
 * the front end: MXNet names for one and several arrays, batches and pad
 * (last_batch_handle pad / discard / roll_over), index, any dtype, shuffle
 * as a function of (seed, epoch), and roll_over resuming exactly with
 * set_epoch.  Sample s of data array a has row values 100*a + s + k/10. */
#include "io_test_util.h"

TestSuite(io_ndarray_iter, .init = iot_setup, .fini = iot_teardown);

static const mxp_device cpu = {MXP_DEV_CPU, 0};

static mxp_ndarray *rows(int64_t n, int64_t w, float base) {
    int64_t shp[2] = {n, w};
    mxp_ndarray *nd = NULL;
    cr_assert_eq(mxp_ndarray_create(shp, 2, MXP_DTYPE_F32, cpu, &nd), MXP_OK);
    float *v = malloc((size_t)(n * w) * sizeof *v);
    for (int64_t s = 0; s < n; s++)
        for (int64_t k = 0; k < w; k++) v[s * w + k] = base + (float)s + (float)k / 10.0f;
    cr_assert_eq(mxp_ndarray_sync_copy_from(nd, v, (size_t)(n * w) * sizeof *v), MXP_OK);
    free(v);
    return nd;
}

/* Sample ids of the current epoch's batches (from data row values). */
static int epoch(mxp_iter *it, int64_t *ids, int *pads) {
    int nb = 0;
    int64_t B = mxp_iter_batch_size(it);
    for (;;) {
        int has = 0;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
        if (!has) break;
        float *d = iot_floats(mxp_iter_data(it, 0));
        int64_t w = mxp_ndarray_shape(mxp_iter_data(it, 0))[1];
        int64_t n_idx = 0;
        const uint64_t *idx = mxp_iter_index(it, &n_idx);
        cr_assert_eq(n_idx, B);
        for (int64_t j = 0; j < B; j++) {
            ids[nb * B + j] = (int64_t)(d[j * w] + 0.5f);
            cr_assert_eq(idx[j], (uint64_t)ids[nb * B + j]);
        }
        pads[nb] = mxp_iter_pad(it);
        free(d);
        nb++;
    }
    return nb;
}

Test(io_ndarray_iter, names_shapes_and_label_values) {
    mxp_ndarray *d0 = rows(10, 3, 0), *d1 = rows(10, 2, 100);
    int64_t lshp[1] = {10};
    mxp_ndarray *lab = NULL;
    cr_assert_eq(mxp_ndarray_create(lshp, 1, MXP_DTYPE_I32, cpu, &lab), MXP_OK);
    int32_t lv[10];
    for (int i = 0; i < 10; i++) lv[i] = 7 * i;
    cr_assert_eq(mxp_ndarray_sync_copy_from(lab, lv, sizeof lv), MXP_OK);
    mxp_ndarray *data[2] = {d0, d1};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(2, data, 1, &lab, 4, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_OK, "%s",
                 mxp_last_error());
    const char *name;
    int ndim, dtype;
    const int64_t *shape;
    cr_assert_eq(mxp_iter_provide_data(it, 0, &name, &ndim, &shape, &dtype), MXP_OK);
    cr_assert_str_eq(name, "_0_data");
    cr_assert_eq(shape[0], 4);
    cr_assert_eq(shape[1], 3);
    cr_assert_eq(mxp_iter_provide_data(it, 1, &name, &ndim, &shape, &dtype), MXP_OK);
    cr_assert_str_eq(name, "_1_data");
    cr_assert_eq(shape[1], 2);
    cr_assert_eq(mxp_iter_provide_label(it, 0, &name, &ndim, &shape, &dtype), MXP_OK);
    cr_assert_str_eq(name, "softmax_label");
    cr_assert_eq(dtype, MXP_DTYPE_I32);
    cr_assert_eq(ndim, 1);
    int has = 0;
    for (int b = 0; b < 3; b++) {
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
        cr_assert_eq(has, 1);
        float *x1 = iot_floats(mxp_iter_data(it, 1));
        int32_t l[4];
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), l, sizeof l), MXP_OK);
        for (int j = 0; j < 4; j++) {
            int s = (b * 4 + j) % 10;
            cr_assert_eq(l[j], 7 * s);
            cr_assert_float_eq(x1[j * 2 + 1], 100.0f + (float)s + 0.1f, 1e-4);
        }
        free(x1);
    }
    cr_assert_eq(mxp_iter_pad(it), 2);
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK);
    cr_assert_eq(has, 0);
    mxp_iter_free(it);
    /* One array each: MXNet's plain names. */
    cr_assert_eq(mxp_iter_create_ndarray(1, &d0, 1, &lab, 5, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_OK);
    cr_assert_eq(mxp_iter_provide_data(it, 0, &name, NULL, NULL, NULL), MXP_OK);
    cr_assert_str_eq(name, "data");
    mxp_iter_free(it);
    mxp_ndarray_release(d0);
    mxp_ndarray_release(d1);
    mxp_ndarray_release(lab);
}

Test(io_ndarray_iter, last_batch_pad_discard_roll_over) {
    mxp_ndarray *d = rows(10, 2, 0);
    int64_t ids[64];
    int pads[16];
    mxp_iter *it = NULL;

    cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, 4, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_OK);
    cr_assert_eq(mxp_iter_num_label(it), 0);
    cr_assert_eq(epoch(it, ids, pads), 3);
    int64_t want_pad[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1};
    for (int i = 0; i < 12; i++) cr_assert_eq(ids[i], want_pad[i]);
    cr_assert_eq(pads[0], 0);
    cr_assert_eq(pads[2], 2);
    mxp_iter_free(it);

    cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, 4, 0, 0, MXP_LAST_BATCH_DISCARD, &it), MXP_OK);
    cr_assert_eq(epoch(it, ids, pads), 2);
    cr_assert_eq(ids[7], 7);
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    cr_assert_eq(epoch(it, ids, pads), 2);
    cr_assert_eq(ids[0], 0);
    mxp_iter_free(it);

    cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, 4, 0, 0, MXP_LAST_BATCH_ROLL_OVER, &it), MXP_OK);
    cr_assert_eq(epoch(it, ids, pads), 2, "epoch 0: 8,9 roll over");
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    cr_assert_eq(epoch(it, ids, pads), 3, "epoch 1: 2 carried + 10 = 3 batches");
    int64_t want_roll[12] = {8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int i = 0; i < 12; i++) cr_assert_eq(ids[i], want_roll[i], "i=%d", i);
    cr_assert_eq(pads[0], 0);
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    cr_assert_eq(epoch(it, ids, pads), 2, "epoch 2: nothing carried");
    cr_assert_eq(ids[0], 0);
    mxp_iter_free(it);
    mxp_ndarray_release(d);
}

Test(io_ndarray_iter, shuffled_roll_over_resumes_exactly) {
    /* N=7, B=5: carries of 2, 4, 1, 3, 0 ... and, with B > N below, carries
     * that span more than one epoch. */
    int64_t Ns[2] = {7, 3}, Bs[2] = {5, 5};
    for (int c = 0; c < 2; c++) {
        mxp_ndarray *d = rows(Ns[c], 1, 0);
        mxp_iter *seq = NULL;
        cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, Bs[c], 1, 42, MXP_LAST_BATCH_ROLL_OVER, &seq), MXP_OK);
        int64_t all[8][64];
        int nbs[8], pads[16];
        int64_t total = 0;
        for (int e = 0; e < 8; e++) {
            if (e) cr_assert_eq(mxp_iter_reset(seq), MXP_OK);
            nbs[e] = epoch(seq, all[e], pads);
            total += nbs[e] * Bs[c];
        }
        /* Every sample appears as often as full epochs allow. */
        cr_assert_eq(total, (8 * Ns[c]) / Bs[c] * Bs[c]);
        for (int e = 1; e < 8; e++) {
            mxp_iter *r = NULL;
            cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, Bs[c], 1, 42, MXP_LAST_BATCH_ROLL_OVER, &r), MXP_OK);
            cr_assert_eq(mxp_iter_set_epoch(r, (uint64_t)e), MXP_OK);
            int64_t got[64];
            int nb = epoch(r, got, pads);
            cr_assert_eq(nb, nbs[e], "N=%lld epoch %d", (long long)Ns[c], e);
            cr_assert_eq(memcmp(got, all[e], (size_t)(nb * Bs[c]) * sizeof *got), 0, "N=%lld epoch %d",
                         (long long)Ns[c], e);
            mxp_iter_free(r);
        }
        mxp_iter_free(seq);
        mxp_ndarray_release(d);
    }
}

Test(io_ndarray_iter, shuffle_permutes_per_epoch) {
    mxp_ndarray *d = rows(32, 1, 0);
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create_ndarray(1, &d, 0, NULL, 8, 1, 3, MXP_LAST_BATCH_PAD, &it), MXP_OK);
    int64_t e0[32], e1[32];
    int pads[8];
    cr_assert_eq(epoch(it, e0, pads), 4);
    cr_assert_eq(mxp_iter_reset(it), MXP_OK);
    cr_assert_eq(epoch(it, e1, pads), 4);
    int seen0[32] = {0}, seen1[32] = {0}, moved = 0;
    for (int i = 0; i < 32; i++) {
        seen0[e0[i]]++;
        seen1[e1[i]]++;
        moved += e0[i] != i;
    }
    for (int i = 0; i < 32; i++) cr_assert(seen0[i] == 1 && seen1[i] == 1);
    cr_assert_gt(moved, 16);
    cr_assert_neq(memcmp(e0, e1, sizeof e0), 0);
    mxp_iter_free(it);
    mxp_ndarray_release(d);
}

Test(io_ndarray_iter, argument_errors) {
    mxp_ndarray *a = rows(10, 2, 0), *b = rows(9, 2, 0);
    mxp_ndarray *both[2] = {a, b};
    mxp_iter *it = (mxp_iter *)1;
    cr_assert_eq(mxp_iter_create_ndarray(2, both, 0, NULL, 4, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_ESHAPE);
    cr_assert_null(it);
    cr_assert_eq(mxp_iter_create_ndarray(1, &a, 0, NULL, 0, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_EINVAL);
    cr_assert_eq(mxp_iter_create_ndarray(1, &a, 0, NULL, 4, 0, 0, 9, &it), MXP_EINVAL);
    cr_assert_eq(mxp_iter_create_ndarray(0, NULL, 0, NULL, 4, 0, 0, MXP_LAST_BATCH_PAD, &it), MXP_EINVAL);
    mxp_ndarray_release(a);
    mxp_ndarray_release(b);
}
