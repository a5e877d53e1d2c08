/* test_image_rec.c — ImageRecordIter / ImageRecordUInt8Iter through the
 * runtime (mxp_iter_create, build manifest), on records whose PNG images are
 * written by a minimal encoder in this file (stored through zlib, not
 * libpng).  Image k is W x H RGB with R = 20x, G = 20y, B = 7 + k, so every
 * output pixel says where it came from: crop boxes, mirroring and
 * normalisation are checked against that independent arithmetic; bilinear
 * resizing of the linear ramp has a closed form.  Also: the same bytes
 * whatever preprocess_threads is, corrupt images named by record id and
 * offset, truncated files. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "png_writer.h"

#define W 12
#define H 10
#define N 16

static char dir[64], rec[128], idx[128];

static void image(int k, uint8_t *px) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            px[(y * W + x) * 3] = (uint8_t)(20 * x);
            px[(y * W + x) * 3 + 1] = (uint8_t)(20 * y);
            px[(y * W + x) * 3 + 2] = (uint8_t)(7 + k);
        }
}

/* N records; record `corrupt` (if >= 0) holds garbage instead of a PNG. */
static void make_rec(int corrupt) {
    snprintf(dir, sizeof dir, "/tmp/mxp-imgrec-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(rec, sizeof rec, "%s/t.rec", dir);
    snprintf(idx, sizeof idx, "%s/t.idx", dir);
    char env[512];
    snprintf(env, sizeof env, "%s/plugins/manifest.yaml", MXP_BUILD_DIR);
    setenv("MXP_MANIFEST", env, 1);
    mxp_recordio *w;
    cr_assert_eq(mxp_recordio_open_write(rec, idx, &w), MXP_OK, "%s", mxp_last_error());
    uint8_t px[W * H * 3], png[4096];
    for (int k = 0; k < N; k++) {
        image(k, px);
        size_t n = png_encode(px, W, H, 3, png);
        if (k == corrupt) memset(png + 20, 0xAB, n - 20); /* header kept, data garbage */
        mxp_recordio_header h = {0, (float)k, (uint64_t)(100 + k), 0};
        cr_assert_eq(mxp_recordio_write_image(w, &h, NULL, png, n), MXP_OK);
    }
    cr_assert_eq(mxp_recordio_close(w), MXP_OK, "%s", mxp_last_error());
}

static void cleanup(void) {
    mxp_engine_wait_for_all();
    unlink(rec);
    unlink(idx);
    rmdir(dir);
}

static mxp_iter *make_iter(const char *name, const char *extra[][2], int n_extra, int batch) {
    const char *keys[32], *vals[32];
    char bs[16];
    snprintf(bs, sizeof bs, "%d", batch);
    int n = 0;
    keys[n] = "path_imgrec", vals[n++] = rec;
    keys[n] = "batch_size", vals[n++] = bs;
    keys[n] = "verbose", vals[n++] = "False";
    for (int i = 0; i < n_extra; i++) keys[n] = extra[i][0], vals[n++] = extra[i][1];
    mxp_iter *it = NULL;
    int rc = mxp_iter_create(name, n, keys, vals, &it);
    cr_assert_eq(rc, MXP_OK, "%s: %s", name, mxp_last_error());
    return it;
}

static float *batch_f32(mxp_iter *it, int i, size_t n) {
    float *out = malloc(n * sizeof *out);
    mxp_ndarray *a = i == 0 ? mxp_iter_data(it, 0) : mxp_iter_label(it, 0);
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, out, n * sizeof *out), MXP_OK, "%s", mxp_last_error());
    return out;
}

Test(image_rec, rand_crop_mirror_and_normalisation) {
    make_rec(-1);
    const char *kv[][2] = {{"data_shape", "(3, 6, 8)"}, {"rand_crop", "True"}, {"rand_mirror", "True"},
                           {"mean_r", "10"}, {"mean_g", "20"}, {"mean_b", "3"}, {"std_r", "2"},
                           {"std_g", "4"}, {"std_b", "0.5"}, {"scale", "0.25"}, {"preprocess_threads", "2"},
                           {"shuffle", "True"}, {"seed", "5"}, {"prefetch_buffer", "0"}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 14, N);
    int has;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
    cr_assert(has);
    const int c = 3, h = 6, w = 8;
    float *d = batch_f32(it, 0, (size_t)N * c * h * w), *l = batch_f32(it, 1, N);
    int seen[N] = {0}, mirrored = 0, x0s = 0, y0s = 0;
    const double mean[3] = {10, 20, 3}, sd[3] = {2, 4, 0.5};
    for (int j = 0; j < N; j++) {
        int k = (int)l[j];
        cr_assert(k >= 0 && k < N && !seen[k], "label %g", l[j]);
        seen[k] = 1;
        const float *s = d + (size_t)j * c * h * w;
        /* invert the normalisation: v = (p - mean) * scale / std */
        double p[3][6][8];
        for (int q = 0; q < c; q++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) p[q][y][x] = s[(q * h + y) * w + x] * sd[q] / 0.25 + mean[q];
        cr_assert_float_eq(p[2][0][0], 7 + k, 1e-3, "blue of record %d: %f", k, p[2][0][0]);
        int sx0 = (int)lround(p[0][0][0] / 20), sy0 = (int)lround(p[1][0][0] / 20);
        int mirror = w > 1 && p[0][0][1] < p[0][0][0];
        mirrored += mirror;
        int xmin = mirror ? sx0 - (w - 1) : sx0;
        cr_assert(xmin >= 0 && xmin + w <= W && sy0 >= 0 && sy0 + h <= H, "crop outside the image");
        x0s |= 1 << xmin;
        y0s |= 1 << sy0;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int want_x = mirror ? sx0 - x : sx0 + x;
                cr_assert_float_eq(p[0][y][x], 20.0 * want_x, 1e-3, "R at (%d,%d) of record %d", x, y, k);
                cr_assert_float_eq(p[1][y][x], 20.0 * (sy0 + y), 1e-3, "G at (%d,%d)", x, y);
                cr_assert_float_eq(p[2][y][x], 7 + k, 1e-3);
            }
    }
    cr_assert(mirrored > 0 && mirrored < N, "rand_mirror flipped %d of %d", mirrored, N);
    cr_assert(__builtin_popcount(x0s) > 1 && __builtin_popcount(y0s) > 1, "crop positions never vary");
    free(d);
    free(l);
    mxp_iter_free(it);
    cleanup();
}

/* ImageRecordUInt8Iter, and ImageRecordIter with dtype=uint8 (the same
 * output through the iterator's own dtype parameter), both against the
 * closed-form pixels. */
static void check_centre_crop_uint8(const char *name, int with_dtype) {
    make_rec(-1);
    const char *kv[][2] = {{"data_shape", "(3, 6, 8)"}, {"preprocess_threads", "1"}, {"dtype", "uint8"}};
    mxp_iter *it = make_iter(name, kv, with_dtype ? 3 : 2, 5);
    int dtype;
    cr_assert_eq(mxp_iter_provide_data(it, 0, NULL, NULL, NULL, &dtype), MXP_OK);
    cr_assert_eq(dtype, MXP_DTYPE_U8);
    int has, batches = 0, pad = 0;
    uint8_t d[5 * 3 * 6 * 8];
    while (mxp_iter_next(it, &has) == MXP_OK && has) {
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), d, sizeof d), MXP_OK);
        for (int j = 0; j < 5; j++) {
            int k = (batches * 5 + j) % N;
            for (int y = 0; y < 6; y++)
                for (int x = 0; x < 8; x++) { /* centred: x0 = (12-8)/2 = 2, y0 = (10-6)/2 = 2 */
                    cr_assert_eq(d[((j * 3 + 0) * 6 + y) * 8 + x], 20 * (2 + x));
                    cr_assert_eq(d[((j * 3 + 1) * 6 + y) * 8 + x], 20 * (2 + y));
                    cr_assert_eq(d[((j * 3 + 2) * 6 + y) * 8 + x], 7 + k);
                }
        }
        pad = mxp_iter_pad(it);
        batches++;
    }
    cr_assert_eq(batches, 4); /* 16 records, batch 5: 3 full + 1 with 4 padded */
    cr_assert_eq(pad, 4);
    mxp_iter_free(it);
    cleanup();
}

Test(image_rec, centre_crop_uint8_and_pad) {
    check_centre_crop_uint8("ImageRecordUInt8Iter", 0);
    check_centre_crop_uint8("ImageRecordUInt8Iter", 1);
    check_centre_crop_uint8("ImageRecordIter", 1);
}

Test(image_rec, dtype_values_and_uint8_normalisation_are_checked) {
    make_rec(-1);
    const char *keys[] = {"path_imgrec", "batch_size", "data_shape", "dtype", "mean_g"};
    mxp_iter *it = NULL;
    const char *v1[] = {rec, "4", "(3, 6, 8)", "float16", "0"};
    cr_assert_neq(mxp_iter_create("ImageRecordIter", 4, keys, v1, &it), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "dtype") && strstr(mxp_last_error(), "float16"), "%s", mxp_last_error());
    const char *v2[] = {rec, "4", "(3, 6, 8)", "uint8", "117"};
    cr_assert_eq(mxp_iter_create("ImageRecordIter", 5, keys, v2, &it), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "mean_g") && strstr(mxp_last_error(), "float32"), "%s", mxp_last_error());
    const char *v3[] = {rec, "4", "(3, 6, 8)", "float32", "0"};
    cr_assert_eq(mxp_iter_create("ImageRecordUInt8Iter", 4, keys, v3, &it), MXP_EINVAL);
    cr_assert(strstr(mxp_last_error(), "'dtype'"), "%s", mxp_last_error());
    cr_assert_null(it);
    /* float32 and None stay float32 output; normalisation allowed */
    const char *v4[] = {rec, "4", "(3, 6, 8)", "float32", "117"};
    cr_assert_eq(mxp_iter_create("ImageRecordIter", 5, keys, v4, &it), MXP_OK, "%s", mxp_last_error());
    int dtype;
    cr_assert_eq(mxp_iter_provide_data(it, 0, NULL, NULL, NULL, &dtype), MXP_OK);
    cr_assert_eq(dtype, MXP_DTYPE_F32);
    mxp_iter_free(it);
    cleanup();
}

Test(image_rec, bilinear_resize_matches_closed_form) {
    make_rec(-1);
    /* random_resized_crop with area 1 and ratio exactly W/H: the box is the
     * whole image, resized 12x10 -> 6x5.  R = 20 sx with
     * sx = (dx + 0.5) * 2 - 0.5, so R = 40 dx + 10; same for G. */
    const char *kv[][2] = {{"data_shape", "(3, 5, 6)"}, {"random_resized_crop", "True"},
                           {"min_aspect_ratio", "1.2"}, {"max_aspect_ratio", "1.2"}, {"prefetch_buffer", "0"}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 5, 2);
    int has;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
    float *d = batch_f32(it, 0, 2 * 3 * 5 * 6);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 6; x++) {
            cr_assert_float_eq(d[(0 * 5 + y) * 6 + x], 40.0 * x + 10, 1.0, "R(%d,%d)=%f", x, y, d[(0 * 5 + y) * 6 + x]);
            cr_assert_float_eq(d[(1 * 5 + y) * 6 + x], 40.0 * y + 10, 1.0, "G(%d,%d)", x, y);
        }
    free(d);
    mxp_iter_free(it);
    cleanup();
}

static void epoch_bytes(int threads, int seed, float *out, size_t per_batch, int epochs) {
    char th[8], sd[8];
    snprintf(th, sizeof th, "%d", threads);
    snprintf(sd, sizeof sd, "%d", seed);
    const char *kv[][2] = {{"data_shape", "(3, 7, 7)"}, {"random_resized_crop", "True"},
                           {"min_random_area", "0.3"}, {"max_aspect_ratio", "1.5"}, {"min_aspect_ratio", "0.6"},
                           {"rand_mirror", "True"}, {"shuffle", "True"}, {"path_imgidx", idx},
                           {"preprocess_threads", th}, {"seed", sd}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 10, 4);
    size_t at = 0;
    for (int e = 0; e < epochs; e++) {
        if (e) cr_assert_eq(mxp_iter_reset(it), MXP_OK);
        int has;
        while (mxp_iter_next(it, &has) == MXP_OK && has) {
            cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), out + at, per_batch * 4), MXP_OK);
            at += per_batch;
        }
    }
    mxp_iter_free(it);
}

Test(image_rec, same_batches_whatever_the_thread_count) {
    make_rec(-1);
    size_t per = 4 * 3 * 7 * 7, n = per * 4 * 2;
    float *a = calloc(n, 4), *b = calloc(n, 4), *c = calloc(n, 4);
    epoch_bytes(1, 11, a, per, 2);
    epoch_bytes(3, 11, b, per, 2);
    epoch_bytes(3, 12, c, per, 2);
    cr_assert(!memcmp(a, b, n * 4), "1 and 3 decode threads gave different batches");
    cr_assert(memcmp(a, c, n * 4), "another seed gave the same batches");
    cr_assert(memcmp(a, a + n / 2, n * 2), "epoch 1 repeated epoch 0");
    free(a);
    free(b);
    free(c);
    cleanup();
}

Test(image_rec, corrupt_image_names_record_and_offset) {
    make_rec(5);
    const char *kv[][2] = {{"data_shape", "(3, 6, 8)"}, {"path_imgidx", idx}, {"preprocess_threads", "3"}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 3, 8);
    int has;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_EFORMAT);
    const char *e = mxp_last_error();
    /* record 5 starts where the index says */
    FILE *f = fopen(idx, "r");
    unsigned long long key, off = 0, k2, o2;
    while (fscanf(f, "%llu\t%llu", &k2, &o2) == 2)
        if (k2 == 105) key = k2, off = o2;
    fclose(f);
    char want[64];
    snprintf(want, sizeof want, "byte offset %llu", off);
    cr_assert(strstr(e, "record id 105") && strstr(e, want) && strstr(e, "t.rec") && strstr(e, "PNG"), "%s", e);
    (void)key;
    mxp_iter_free(it);
    cleanup();
}

Test(image_rec, truncated_file_and_bad_params_are_refused) {
    make_rec(-1);
    FILE *f = fopen(rec, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    cr_assert_eq(truncate(rec, size - 10), 0);
    const char *keys[] = {"path_imgrec", "batch_size", "data_shape"};
    const char *vals[] = {rec, "4", "(3, 6, 8)"};
    mxp_iter *it = NULL;
    cr_assert_eq(mxp_iter_create("ImageRecordIter", 3, keys, vals, &it), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "truncated") && strstr(mxp_last_error(), "record 15"), "%s", mxp_last_error());
    const char *vals2[] = {rec, "4", "(3, 6)"};
    cr_assert_neq(mxp_iter_create("ImageRecordIter", 3, keys, vals2, &it), MXP_OK);
    cr_assert(strstr(mxp_last_error(), "data_shape"), "%s", mxp_last_error());
    const char *keys3[] = {"path_imgrec", "batch_size", "data_shape", "max_rotate_angle"};
    const char *vals3[] = {rec, "4", "(3, 6, 8)", "10"};
    cr_assert_eq(mxp_iter_create("ImageRecordIter", 4, keys3, vals3, &it), MXP_EUNSUPPORTED);
    cr_assert(strstr(mxp_last_error(), "max_rotate_angle"), "%s", mxp_last_error());
    cleanup();
}

/* Gray and CMYK JPEGs written by PIL (tests/fuzz/corpus/image/, made from
 * the gradient R = 37x, G = 53y, B = xy mod 256): gray becomes R = G = B;
 * PIL's CMYK is C = 255 - R, M = 255 - G, Y = 255 - B, K = 0, stored
 * Adobe-inverted, so decoding must give the gradient back (within JPEG's
 * error at quality 90). */
static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    uint8_t *b = malloc(1 << 16);
    *n = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

Test(image_rec, gray_and_cmyk_jpeg) {
    snprintf(dir, sizeof dir, "/tmp/mxp-imgrec-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(rec, sizeof rec, "%s/t.rec", dir);
    snprintf(idx, sizeof idx, "%s/t.idx", dir);
    char env[512];
    snprintf(env, sizeof env, "%s/plugins/manifest.yaml", MXP_BUILD_DIR);
    setenv("MXP_MANIFEST", env, 1);
    const char *files[] = {MXP_SOURCE_DIR "/tests/fuzz/corpus/image/cmyk.jpg",
                           MXP_SOURCE_DIR "/tests/fuzz/corpus/image/gray.jpg"};
    const char *shapes[] = {"(3, 12, 16)", "(3, 9, 13)"};
    for (int f = 0; f < 2; f++) {
        mxp_recordio *w;
        cr_assert_eq(mxp_recordio_open_write(rec, idx, &w), MXP_OK);
        size_t n;
        uint8_t *b = read_all(files[f], &n);
        mxp_recordio_header h = {0, 1, 0, 0};
        cr_assert_eq(mxp_recordio_write_image(w, &h, NULL, b, n), MXP_OK);
        free(b);
        cr_assert_eq(mxp_recordio_close(w), MXP_OK);
        const char *kv[][2] = {{"data_shape", shapes[f]}};
        mxp_iter *it = make_iter("ImageRecordUInt8Iter", kv, 1, 1);
        int has;
        cr_assert_eq(mxp_iter_next(it, &has), MXP_OK, "%s", mxp_last_error());
        int hh = f == 0 ? 12 : 9, ww = f == 0 ? 16 : 13;
        uint8_t px[3 * 12 * 16];
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), px, (size_t)3 * hh * ww), MXP_OK);
        double err = 0;
        for (int y = 0; y < hh; y++)
            for (int x = 0; x < ww; x++) {
                int r = px[(0 * hh + y) * ww + x], g = px[(1 * hh + y) * ww + x], b2 = px[(2 * hh + y) * ww + x];
                if (f == 1) {
                    cr_assert(r == g && g == b2, "gray JPEG: channels differ at (%d,%d)", x, y);
                } else {
                    err += abs(r - (37 * x) % 256) + abs(g - (53 * y) % 256) + abs(b2 - (x * y) % 256);
                }
            }
        if (f == 0) cr_assert(err / (3.0 * hh * ww) < 12, "CMYK decode: mean error %f", err / (3.0 * hh * ww));
        mxp_iter_free(it);
        mxp_engine_wait_for_all();
    }
    cleanup();
}

/* skip_corrupt: record 5 (id 105) is garbage; the epoch holds the other 15
 * in file order, each slot the image its id names (blue = 7 + k), none
 * missing or repeated before the pad, and the same bytes with 1 and 3
 * decode threads. */
static int skip_epoch(int threads, float *data, float *labels, uint64_t *ids, int *pads) {
    char th[8];
    snprintf(th, sizeof th, "%d", threads);
    const char *kv[][2] = {{"data_shape", "(3, 6, 8)"}, {"skip_corrupt", "True"}, {"preprocess_threads", th}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 3, 4);
    int has, batches = 0, rc;
    const size_t per = 4 * 3 * 6 * 8;
    while ((rc = mxp_iter_next(it, &has)) == MXP_OK && has) {
        cr_assert(batches < 8, "too many batches");
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_data(it, 0), data + batches * per, per * 4), MXP_OK);
        cr_assert_eq(mxp_ndarray_sync_copy_to(mxp_iter_label(it, 0), labels + batches * 4, 16), MXP_OK);
        int64_t k = 0;
        const uint64_t *ix = mxp_iter_index(it, &k);
        cr_assert(ix && k == 4);
        memcpy(ids + batches * 4, ix, 4 * sizeof *ix);
        pads[batches] = mxp_iter_pad(it);
        batches++;
    }
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    mxp_iter_free(it);
    return batches;
}

Test(image_rec, skip_corrupt_squeezes_the_record_out) {
    make_rec(5);
    float d1[8 * 4 * 3 * 6 * 8], l1[32], d3[8 * 4 * 3 * 6 * 8], l3[32];
    uint64_t i1[32], i3[32];
    int p1[8], p3[8];
    memset(d1, 0, sizeof d1), memset(d3, 0, sizeof d3), memset(l1, 0, sizeof l1), memset(l3, 0, sizeof l3);
    memset(i1, 0, sizeof i1), memset(i3, 0, sizeof i3);
    int b1 = skip_epoch(1, d1, l1, i1, p1), b3 = skip_epoch(3, d3, l3, i3, p3);
    cr_assert_eq(b1, 4, "15 good records in batches of 4: 4 batches, got %d", b1);
    cr_assert_eq(b3, 4);
    cr_assert_eq(p1[3], 1, "the last batch pads 1 slot");
    cr_assert(!memcmp(d1, d3, sizeof d1) && !memcmp(l1, l3, sizeof l1) && !memcmp(i1, i3, sizeof i1),
              "1 and 3 threads differ");
    int want[16], m = 0;
    for (int k = 0; k < N; k++)
        if (k != 5) want[m++] = k;
    want[m++] = 0; /* the pad wraps to the epoch's first record */
    for (int j = 0; j < 16; j++) {
        int k = want[j];
        cr_assert_eq(i1[j], (uint64_t)(100 + k), "slot %d: id %llu, want %d", j, (unsigned long long)i1[j], 100 + k);
        cr_assert_float_eq(l1[j], (float)k, 0);
        const float *s = d1 + (size_t)j * 3 * 6 * 8;
        for (int y = 0; y < 6; y++)
            for (int x = 0; x < 8; x++) {
                cr_assert_float_eq(s[(0 * 6 + y) * 8 + x], 20.0 * (2 + x), 1e-4);
                cr_assert_float_eq(s[(2 * 6 + y) * 8 + x], 7.0 + k, 1e-4, "slot %d holds image %d", j, k);
            }
    }
    cleanup();
}

Test(image_rec, skip_corrupt_every_record_bad_is_an_error) {
    make_rec(-1);
    /* Overwrite every record's PNG data (keep the container intact). */
    FILE *f = fopen(idx, "r");
    unsigned long long key, off;
    int fixed = 0;
    FILE *r = fopen(rec, "r+b");
    while (fscanf(f, "%llu\t%llu", &key, &off) == 2) {
        /* 8 bytes of RecordIO header, 24 of IRHeader, then the PNG: spoil from byte 20 of the PNG */
        fseek(r, (long)(off + 8 + 24 + 20), SEEK_SET);
        uint8_t junk[16];
        memset(junk, 0xCD, sizeof junk);
        fwrite(junk, 1, sizeof junk, r);
        fixed++;
    }
    fclose(f);
    fclose(r);
    cr_assert_eq(fixed, N);
    const char *kv[][2] = {{"data_shape", "(3, 6, 8)"}, {"skip_corrupt", "True"}, {"preprocess_threads", "2"}};
    mxp_iter *it = make_iter("ImageRecordIter", kv, 3, 4);
    int has = 1;
    cr_assert_eq(mxp_iter_next(it, &has), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "all skipped as corrupt"), "%s", mxp_last_error());
    mxp_iter_free(it);
    cleanup();
}
