/* test_image_list.c — ImageIter (a .lst of loose image files) through the
 * runtime, on PNG files written by this test's own encoder (png_writer.h,
 * zlib only) and a .lst written here with fprintf.  Image k is W x H RGB
 * with R = 20x, G = 20y, B = 7 + k (as in test_image_rec.c), so every
 * output pixel says where it came from.  Checked: centre-crop pixels and
 * the list's labels and indices against that arithmetic; the same batches
 * as ImageRecordIter over records of the same images (the engine is
 * shared: same augmentation from the same seed); the same bytes whatever
 * preprocess_threads is; last_batch_handle pad/discard; unreadable,
 * corrupt and missing files named by path and line, or skipped and counted
 * with skip_corrupt; malformed lists and parameters refused. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "png_writer.h"

#define W 12
#define H 10
#define N 16

static char dir[64], lst[128], rec[128], idxf[128];

static void image(int k, uint8_t *px) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            px[(y * W + x) * 3] = (uint8_t)(20 * x);
            px[(y * W + x) * 3 + 1] = (uint8_t)(20 * y);
            px[(y * W + x) * 3 + 2] = (uint8_t)(7 + k);
        }
}

/* N images img/k.png listed with index 100 + k and labels (k, 10k); image
 * `corrupt` holds garbage after its PNG signature, image `missing` is
 * listed but not written.  Also t.rec/t.idx with the same images. */
static void make_set(int corrupt, int missing) {
    snprintf(dir, sizeof dir, "/tmp/mxp-imglst-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(lst, sizeof lst, "%s/t.lst", dir);
    snprintf(rec, sizeof rec, "%s/t.rec", dir);
    snprintf(idxf, sizeof idxf, "%s/t.idx", dir);
    char env[512], path[256];
    snprintf(env, sizeof env, "%s/plugins/manifest.yaml", MXP_BUILD_DIR);
    setenv("MXP_MANIFEST", env, 1);
    snprintf(path, sizeof path, "%s/img", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    FILE *l = fopen(lst, "w");
    cr_assert(l);
    mxp_recordio *w;
    cr_assert_eq(mxp_recordio_open_write(rec, idxf, &w), MXP_OK, "%s", mxp_last_error());
    uint8_t px[W * H * 3], png[4096];
    for (int k = 0; k < N; k++) {
        image(k, px);
        size_t n = png_encode(px, W, H, 3, png);
        if (k == corrupt) memset(png + 20, 0xAB, n - 20);
        float labels[2] = {(float)k, 10.0f * k};
        mxp_recordio_header h = {2, 0, (uint64_t)(100 + k), 0};
        cr_assert_eq(mxp_recordio_write_image(w, &h, labels, png, n), MXP_OK);
        fprintf(l, "%d\t%d\t%d\timg/%d.png\n", 100 + k, k, 10 * k, k);
        if (k == missing) continue;
        snprintf(path, sizeof path, "%s/img/%d.png", dir, k);
        FILE *f = fopen(path, "wb");
        cr_assert(f && fwrite(png, 1, n, f) == n);
        fclose(f);
    }
    fclose(l);
    cr_assert_eq(mxp_recordio_close(w), MXP_OK, "%s", mxp_last_error());
}

static void cleanup(void) {
    mxp_engine_wait_for_all();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Create `name` with batch_size, verbose=False and extra; returns the status. */
static int try_iter(const char *name, const char *extra[][2], int n_extra, int batch, mxp_iter **out) {
    const char *keys[32], *vals[32];
    char bs[16];
    snprintf(bs, sizeof bs, "%d", batch);
    int n = 0;
    keys[n] = "batch_size", vals[n++] = bs;
    keys[n] = "verbose", vals[n++] = "False";
    for (int i = 0; i < n_extra; i++) keys[n] = extra[i][0], vals[n++] = extra[i][1];
    *out = NULL;
    return mxp_iter_create(name, n, keys, vals, out);
}

static mxp_iter *make_iter(const char *name, const char *extra[][2], int n_extra, int batch) {
    mxp_iter *it;
    int rc = try_iter(name, extra, n_extra, batch, &it);
    cr_assert_eq(rc, MXP_OK, "%s: %s", name, mxp_last_error());
    return it;
}

Test(image_list, centre_crop_labels_and_indices) {
    make_set(-1, -1);
    const char *kv[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"data_shape", "(3, 6, 8)"},
                           {"label_width", "2"}, {"preprocess_threads", "2"}};
    mxp_iter *it = make_iter("ImageIter", kv, 5, 5);
    int has, batches = 0, pad = 0;
    float d[5 * 3 * 6 * 8]; /* mean 0, std 1, scale 1: the pixel values */
    float lab[10];
    while (mxp_iter_next(it, &has) == MXP_OK && has) {
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), d, sizeof d), MXP_OK);
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), lab, sizeof lab), MXP_OK);
        int64_t m;
        const uint64_t *ix = mxp_iter_index(it, &m);
        cr_assert(ix && m == 5);
        for (int j = 0; j < 5; j++) {
            int k = (batches * 5 + j) % N;
            cr_assert_eq(ix[j], (uint64_t)(100 + k));
            cr_assert_float_eq(lab[2 * j], (float)k, 0);
            cr_assert_float_eq(lab[2 * j + 1], 10.0f * k, 0);
            for (int y = 0; y < 6; y++)
                for (int x = 0; x < 8; x++) { /* centred: x0 = (12-8)/2 = 2, y0 = (10-6)/2 = 2 */
                    cr_assert_float_eq(d[((j * 3 + 0) * 6 + y) * 8 + x], 20 * (2 + x), 0);
                    cr_assert_float_eq(d[((j * 3 + 1) * 6 + y) * 8 + x], 20 * (2 + y), 0);
                    cr_assert_float_eq(d[((j * 3 + 2) * 6 + y) * 8 + x], 7 + k, 0);
                }
        }
        pad = mxp_iter_pad(it);
        batches++;
    }
    cr_assert_eq(batches, 4); /* 16 images, batch 5, last_batch_handle=pad: 3 full + 1 with 4 padded */
    cr_assert_eq(pad, 4);
    mxp_iter_free(it);
    /* discard: the short last batch is dropped; path_root with a trailing '/'. */
    char root[140];
    snprintf(root, sizeof root, "%s/", dir);
    const char *kv2[][2] = {{"path_imglist", lst}, {"path_root", root}, {"data_shape", "(3, 6, 8)"},
                            {"last_batch_handle", "discard"}};
    it = make_iter("ImageIter", kv2, 4, 5);
    batches = 0;
    while (mxp_iter_next(it, &has) == MXP_OK && has) batches++;
    cr_assert_eq(batches, 3);
    mxp_iter_free(it);
    /* dtype=uint8: the same centred pixels as bytes. */
    const char *kv3[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"data_shape", "(3, 6, 8)"}, {"dtype", "uint8"}};
    it = make_iter("ImageIter", kv3, 4, 5);
    int dtype;
    cr_assert_eq(mxp_iter_provide_data(it, 0, NULL, NULL, NULL, &dtype), MXP_OK);
    cr_assert_eq(dtype, MXP_DTYPE_U8);
    uint8_t u[5 * 3 * 6 * 8];
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
    cr_assert(has);
    cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), u, sizeof u), MXP_OK);
    for (int j = 0; j < 5; j++)
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 8; x++) {
                cr_assert_eq(u[((j * 3 + 0) * 6 + y) * 8 + x], 20 * (2 + x));
                cr_assert_eq(u[((j * 3 + 1) * 6 + y) * 8 + x], 20 * (2 + y));
                cr_assert_eq(u[((j * 3 + 2) * 6 + y) * 8 + x], 7 + j);
            }
    mxp_iter_free(it);
    cleanup();
}

/* Every batch of `epochs` epochs into out (data, then labels). */
static void epochs_of(mxp_iter *it, int epochs, int batch, size_t sample, float *out, size_t cap) {
    size_t at = 0;
    for (int e = 0; e < epochs; e++) {
        if (e) cr_assert_eq(mxp_iter_reset(it), MXP_OK);
        int has;
        while (mxp_iter_next(it, &has) == MXP_OK && has) {
            cr_assert(at + (size_t)batch * (sample + 1) <= cap);
            cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), out + at, (size_t)batch * sample * 4), MXP_OK);
            at += (size_t)batch * sample;
            cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), out + at, (size_t)batch * 4), MXP_OK);
            at += (size_t)batch;
        }
    }
    cr_assert_eq(at, cap);
}

Test(image_list, same_batches_as_image_record_iter_and_any_thread_count) {
    make_set(-1, -1);
    const size_t sample = 3 * 7 * 7, cap = 2 * 4 * 4 * (sample + 1);
    float *a = malloc(cap * 4), *b = malloc(cap * 4), *c = malloc(cap * 4);
#define AUG {"data_shape", "(3, 7, 7)"}, {"random_resized_crop", "True"}, {"min_random_area", "0.3"}, \
            {"max_aspect_ratio", "1.5"}, {"min_aspect_ratio", "0.6"}, {"rand_mirror", "True"}, \
            {"shuffle", "True"}, {"seed", "11"}, {"mean_r", "5"}, {"std_b", "3"}
    const char *kl1[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"preprocess_threads", "1"}, AUG};
    const char *kl3[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"preprocess_threads", "3"}, AUG};
    const char *kr[][2] = {{"path_imgrec", rec}, {"preprocess_threads", "2"}, AUG};
#undef AUG
    mxp_iter *it = make_iter("ImageIter", kl1, 13, 4);
    epochs_of(it, 2, 4, sample, a, cap);
    mxp_iter_free(it);
    it = make_iter("ImageIter", kl3, 13, 4);
    epochs_of(it, 2, 4, sample, b, cap);
    mxp_iter_free(it);
    it = make_iter("ImageRecordIter", kr, 12, 4);
    epochs_of(it, 2, 4, sample, c, cap);
    mxp_iter_free(it);
    cr_assert(!memcmp(a, b, cap * 4), "1 and 3 decode threads gave different batches");
    cr_assert(!memcmp(a, c, cap * 4), "ImageIter and ImageRecordIter differ on the same images");
    cr_assert(memcmp(a, a + cap / 2, cap * 2), "epoch 1 repeated epoch 0");
    /* The shuffle is real: the first batch's labels are not 0 1 2 3. */
    float *l0 = a + 4 * sample;
    cr_assert(!(l0[0] == 0 && l0[1] == 1 && l0[2] == 2 && l0[3] == 3));
    free(a);
    free(b);
    free(c);
    cleanup();
}

static void expect_next_error(const char *subs[], int n_subs, int corrupt, int missing) {
    make_set(corrupt, missing);
    const char *kv[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"data_shape", "(3, 6, 8)"},
                           {"preprocess_threads", "3"}};
    mxp_iter *it = make_iter("ImageIter", kv, 4, 4);
    int has = 1, rc = MXP_OK;
    for (int b = 0; b < 4 && rc == MXP_OK && has; b++) rc = mxp_iter_next(it, &has);
    cr_assert_eq(rc, MXP_EFORMAT);
    const char *e = mxp_last_error();
    for (int i = 0; i < n_subs; i++) cr_assert(strstr(e, subs[i]), "'%s' not in: %s", subs[i], e);
    mxp_iter_free(it);
    cleanup();
}

Test(image_list, corrupt_and_missing_files_are_named) {
    const char *a[] = {"img/6.png", "line 7", "t.lst", "index 106", "PNG", "skip_corrupt"};
    expect_next_error(a, 6, 6, -1);
    const char *b[] = {"img/9.png", "line 10", "index 109", "cannot open", "No such file"};
    expect_next_error(b, 5, -1, 9);
}

Test(image_list, skip_corrupt_skips_and_counts) {
    make_set(3, 12);
    const mxp_pack *pk = NULL;
    uint64_t before = 0, after = 0;
    const char *kv[][2] = {{"path_imglist", lst}, {"path_root", dir}, {"data_shape", "(3, 6, 8)"},
                           {"skip_corrupt", "True"}, {"preprocess_threads", "2"}};
    mxp_iter *it = make_iter("ImageIter", kv, 5, 7);
    cr_assert((pk = mxp_pack_find("io-image")));
    cr_assert_eq(mxp_pack_stat_value(pk, "image_iter.skipped_corrupt", &before), MXP_OK, "%s", mxp_last_error());
    int has, batches = 0, rc, pad = 0;
    float d[7 * 3 * 6 * 8];
    float lab[7];
    int seen = 0;
    while ((rc = mxp_iter_next(it, &has)) == MXP_OK && has) {
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), d, sizeof d), MXP_OK);
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), lab, sizeof lab), MXP_OK);
        pad = mxp_iter_pad(it);
        for (int j = 0; j < 7 - pad; j++) {
            int k = (int)lab[j];
            cr_assert(k != 3 && k != 12, "a skipped image came back");
            cr_assert_float_eq(d[((j * 3 + 2) * 6) * 8], 7 + k, 0, "slot %d holds label %d's pixels", j, k);
            seen++;
        }
        batches++;
    }
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(seen, 14, "14 good images in the epoch, saw %d", seen);
    cr_assert_eq(batches, 2);
    cr_assert_eq(pad, 0);
    /* The pack's counter (mxplug train --stats) saw the two. */
    cr_assert_eq(mxp_pack_stat_value(pk, "image_iter.skipped_corrupt", &after), MXP_OK, "%s", mxp_last_error());
    cr_assert_eq(after - before, 2);
    mxp_iter_free(it);
    cleanup();
}

static void expect_create_error(const char *extra[][2], int n, int status, const char *sub) {
    mxp_iter *it;
    cr_assert_eq(try_iter("ImageIter", extra, n, 4, &it), status, "%s", mxp_last_error());
    cr_assert_null(it);
    cr_assert(strstr(mxp_last_error(), sub), "'%s' not in: %s", sub, mxp_last_error());
}

Test(image_list, bad_lists_and_parameters_are_refused) {
    make_set(-1, -1);
    const char *shape[2] = {"data_shape", "(3, 6, 8)"};
    const char *k1[][2] = {{shape[0], shape[1]}, {"path_imglist", lst}, {"label_width", "3"}};
    expect_create_error(k1, 3, MXP_EFORMAT, "line 1 has 2 label(s), label_width is 3");
    const char *k2[][2] = {{shape[0], shape[1]}, {"path_imglist", lst}, {"path_imgrec", rec}};
    expect_create_error(k2, 3, MXP_EUNSUPPORTED, "ImageRecordIter");
    const char *k3[][2] = {{shape[0], shape[1]}, {"path_imglist", lst}, {"last_batch_handle", "roll_over"}};
    expect_create_error(k3, 3, MXP_EUNSUPPORTED, "roll_over");
    const char *k4[][2] = {{shape[0], shape[1]}};
    expect_create_error(k4, 1, MXP_EINVAL, "'path_imglist': required");
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.lst", dir);
    const char *k5[][2] = {{shape[0], shape[1]}, {"path_imglist", missing}};
    expect_create_error(k5, 2, MXP_EIO, "none.lst");
    /* Malformed lines, each named by its number. */
    struct { const char *text, *sub; } bad[] = {
        {"0\t1\ta.png\n\nx\t1\tb.png\n", "line 3: the index"},
        {"0\t1\ta.png\n1\tb.png\n", "line 2: expected"},
        {"0\t1\ta.png\n1\t2\t\n", "line 2: the path"},
        {"0\tone\ta.png\n", "line 1: a label is not a finite number"},
        {"0\t1\ta.png\n1\t2\tb.png\n2\tnan\tc.png\n", "line 3: a label"},
        {"0 1 a.png\n", "line 1: expected"},
        {"0\t1\ta.png\n -1\t2\tb.png\n", "line 2: the index"}, /* strtoull would negate it */
        {"\t1\ta.png\n", "line 1: the index"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(lst, "w");
        fputs(bad[i].text, f);
        fclose(f);
        const char *k[][2] = {{shape[0], shape[1]}, {"path_imglist", lst}};
        expect_create_error(k, 2, MXP_EFORMAT, bad[i].sub);
    }
    cleanup();
}
