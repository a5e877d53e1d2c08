/* test_mnist.c — the io-image pack's MNISTIter, driven through the
 * iterator ABI by tests/support/fake_host (dlopen, fake host, registrar).
 *
 * Small IDX files are written per test (plain and gzipped) with pixels that
 * encode the sample number (pixel 0 = id & 255, pixel 1 = id >> 8, the rest
 * a known function of id and position) and label = id % 10, so every batch
 * can be checked element by element against values computed here.  Covers
 * scaling (1/256 as MXNet), shapes, batch counts, drop-last vs round_batch
 * pad, shuffle determinism per (seed, epoch), sharding, error messages, and
 * the real Fashion-MNIST files when the Debian package is installed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fake_host.h"

#define PACK_SO MXP_BUILD_DIR "/plugins/libmxp-io-image.so"
#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* ------------------------------------------------------------- fixtures */
typedef struct files {
    char dir[64];
    char img[128];
    char lab[128];
} files;

static uint8_t pixel(uint32_t id, uint32_t q) {
    if (q == 0) return (uint8_t)(id & 0xff);
    if (q == 1) return (uint8_t)(id >> 8);
    return (uint8_t)((id * 31u + q * 7u) & 0xff);
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void write_bytes(const char *path, const uint8_t *buf, size_t len, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert(f, "gzopen %s", path);
        if (len) cr_assert_eq(gzwrite(f, buf, (unsigned)len), (int)len);
        cr_assert_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert(f, "fopen %s", path);
        cr_assert_eq(fwrite(buf, 1, len, f), len);
        cr_assert_eq(fclose(f), 0);
    }
}

/* Image file of n samples rows x cols; returns the byte image (caller frees). */
static uint8_t *image_bytes(uint32_t n, uint32_t rows, uint32_t cols, size_t *len) {
    size_t item = (size_t)rows * cols;
    *len = 16 + n * item;
    uint8_t *b = malloc(*len);
    cr_assert(b);
    put_be32(b, 0x00000803);
    put_be32(b + 4, n);
    put_be32(b + 8, rows);
    put_be32(b + 12, cols);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t q = 0; q < item; q++) b[16 + i * item + q] = pixel(i, (uint32_t)q);
    return b;
}

static uint8_t *label_bytes(uint32_t n, size_t *len) {
    *len = 8 + n;
    uint8_t *b = malloc(*len);
    cr_assert(b);
    put_be32(b, 0x00000801);
    put_be32(b + 4, n);
    for (uint32_t i = 0; i < n; i++) b[8 + i] = (uint8_t)(i % 10);
    return b;
}

static void make_dir(files *f) {
    snprintf(f->dir, sizeof f->dir, "/tmp/mxp-mnist-XXXXXX");
    cr_assert(mkdtemp(f->dir), "mkdtemp");
    snprintf(f->img, sizeof f->img, "%s/images", f->dir);
    snprintf(f->lab, sizeof f->lab, "%s/labels", f->dir);
}

/* A dataset of n samples of rows x cols, gzipped or not. */
static void make_files(files *f, uint32_t n, uint32_t rows, uint32_t cols, int gz) {
    make_dir(f);
    size_t li, ll;
    uint8_t *bi = image_bytes(n, rows, cols, &li), *bl = label_bytes(n, &ll);
    write_bytes(f->img, bi, li, gz);
    write_bytes(f->lab, bl, ll, gz);
    free(bi);
    free(bl);
}

static void remove_files(files *f) {
    unlink(f->img);
    unlink(f->lab);
    rmdir(f->dir);
}

static fh_pack *H;

static void close_pack(void) {
    fh_unload(H);
    H = NULL;
}

static const mxp_iter_def *mnist(void) {
    H = fh_load(PACK_SO);
    cr_assert(H, "open %s: %s", PACK_SO, fh_error());
    const mxp_iter_def *d = fh_iter_def(H, "MNISTIter");
    cr_assert(d, "MNISTIter not registered");
    return d;
}

/* kwargs as "key=value" strings. */
static int create(const files *f, fh_iter *it, int n, const char *const *kv) {
    const char *keys[16], *vals[16];
    char store[16][96];
    cr_assert(n + 2 <= 16);
    keys[0] = "image";
    vals[0] = f->img;
    keys[1] = "label";
    vals[1] = f->lab;
    for (int i = 0; i < n; i++) {
        snprintf(store[i], sizeof store[i], "%s", kv[i]);
        char *eq = strchr(store[i], '=');
        cr_assert(eq, "bad kwarg %s", kv[i]);
        *eq = '\0';
        keys[2 + i] = store[i];
        vals[2 + i] = eq + 1;
    }
    return fh_iter_create(mnist(), keys, vals, (uint32_t)(n + 2), it);
}

/* Sample id encoded in row j of the data batch (pixels 0 and 1). */
static uint32_t id_at(const fh_iter *it, uint32_t j, uint64_t item) {
    const float *d = fh_iter_f32(it, 0) + j * item;
    return (uint32_t)(d[0] * 256.0f) | (uint32_t)(d[1] * 256.0f) << 8;
}

/* Checks every element of row j against sample `id`. */
static void check_row(const fh_iter *it, uint32_t j, uint64_t item, uint32_t id) {
    const float *d = fh_iter_f32(it, 0) + j * item;
    for (uint64_t q = 0; q < item; q++)
        cr_assert_eq(d[q], (float)pixel(id, (uint32_t)q) / 256.0f, "row %u pixel %lu: %g", j, (unsigned long)q,
                     (double)d[q]);
    cr_assert_eq(fh_iter_f32(it, 1)[j], (float)(id % 10), "row %u label", j);
}

/* Runs one epoch; records sample ids in ids[] (returns count incl. pad). */
static uint32_t run_epoch(fh_iter *it, uint64_t epoch, uint64_t item, uint32_t *ids, uint32_t cap,
                          int *batches, int *last_pad) {
    cr_assert_eq(fh_iter_reset(it, epoch), MXP_OK);
    uint32_t n = 0;
    *batches = 0;
    *last_pad = -1;
    int64_t bs = it->shapes[0].dims[0];
    for (;;) {
        int has, pad;
        cr_assert_eq(fh_iter_next(it, 1, &has, &pad), MXP_OK, "%s", fh_error());
        if (!has) {
            cr_assert_eq(pad, 0);
            break;
        }
        ++*batches;
        *last_pad = pad;
        for (int64_t j = 0; j < bs; j++) {
            uint32_t id = id_at(it, (uint32_t)j, item);
            check_row(it, (uint32_t)j, item, id);
            cr_assert_eq(it->index[j], id, "index[%ld] %lu != sample %u", (long)j, (unsigned long)it->index[j], id);
            cr_assert_lt(n, cap);
            ids[n++] = id;
        }
    }
    return n;
}

/* ---------------------------------------------------------- registration */
Test(mnist, registers_with_mxnet_schema) {
    const mxp_iter_def *d = mnist();
    cr_assert_str_eq(fh_pack_desc(H)->name, "io-image");
    cr_assert_eq(fh_n_iters(H), 5); /* MNISTIter, ImageRecordIter, ImageRecordUInt8Iter, CSVIter, ImageIter */
    static const struct { const char *name, *def; int32_t type; } want[] = {
        {"image", "./train-images-idx3-ubyte", MXP_PARAM_STRING},
        {"label", "./train-labels-idx1-ubyte", MXP_PARAM_STRING},
        {"batch_size", "128", MXP_PARAM_INT},
        {"shuffle", "True", MXP_PARAM_BOOL},
        {"flat", "False", MXP_PARAM_BOOL},
        {"seed", "0", MXP_PARAM_INT},
        {"silent", "False", MXP_PARAM_BOOL},
        {"num_parts", "1", MXP_PARAM_INT},
        {"part_index", "0", MXP_PARAM_INT},
        {"round_batch", "False", MXP_PARAM_BOOL},
        {"shard", "contiguous", MXP_PARAM_ENUM},
    };
    cr_assert_eq(d->n_params, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const mxp_param_def *p = NULL;
        for (uint32_t k = 0; k < d->n_params; k++)
            if (!strcmp(d->params[k].name, want[i].name)) p = &d->params[k];
        cr_assert(p, "missing %s", want[i].name);
        cr_assert_str_eq(p->default_value, want[i].def, "%s", want[i].name);
        cr_assert_eq(p->type, want[i].type, "%s", want[i].name);
    }
    close_pack();
}

/* ---------------------------------------------------------------- values */
static void values_and_shape(int gz, int flat) {
    files f;
    make_files(&f, 5, 3, 4, gz);
    fh_iter it;
    const char *kv[] = {"batch_size=5", "shuffle=False", flat ? "flat=True" : "flat=False"};
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK, "%s", fh_error());
    cr_assert_eq(it.n_data, 1);
    cr_assert_eq(it.n_label, 1);
    cr_assert_str_eq(it.names[0], "data");
    cr_assert_str_eq(it.names[1], "softmax_label");
    cr_assert_eq(it.dtypes[0], MXP_DTYPE_F32);
    cr_assert_eq(it.dtypes[1], MXP_DTYPE_F32);
    if (flat) {
        cr_assert_eq(it.shapes[0].ndim, 2);
        cr_assert_eq(it.shapes[0].dims[0], 5);
        cr_assert_eq(it.shapes[0].dims[1], 12);
    } else {
        cr_assert_eq(it.shapes[0].ndim, 4);
        int64_t e[4] = {5, 1, 3, 4};
        for (int d = 0; d < 4; d++) cr_assert_eq(it.shapes[0].dims[d], e[d]);
    }
    cr_assert_eq(it.shapes[1].ndim, 1);
    cr_assert_eq(it.shapes[1].dims[0], 5);
    /* The log line MXNet prints (silent=False). */
    cr_assert(strstr(fh_log(), "MNISTIter: load 5 images"), "log: %s", fh_log());
    int has, pad;
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_OK);
    cr_assert_eq(has, 1);
    cr_assert_eq(pad, 0);
    for (uint32_t j = 0; j < 5; j++) check_row(&it, j, 12, j);
    /* Spot values: sample 4, pixel 2 = (4*31 + 14) & 255 = 138 -> 138/256. */
    cr_assert_eq(fh_iter_f32(&it, 0)[4 * 12 + 2], 0.5390625f);
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_OK);
    cr_assert_eq(has, 0);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

Test(mnist, values_scaled_by_1_256_plain) { values_and_shape(0, 0); }
Test(mnist, values_scaled_by_1_256_gzip) { values_and_shape(1, 0); }
Test(mnist, flat_shape) { values_and_shape(0, 1); }
Test(mnist, flat_shape_gzip) { values_and_shape(1, 1); }

Test(mnist, full_scale_pixel_is_255_over_256) {
    files f;
    make_dir(&f);
    uint8_t img[16 + 4], lab[9];
    put_be32(img, 0x803);
    put_be32(img + 4, 1);
    put_be32(img + 8, 2);
    put_be32(img + 12, 2);
    img[16] = 255; img[17] = 0; img[18] = 128; img[19] = 1;
    put_be32(lab, 0x801);
    put_be32(lab + 4, 1);
    lab[8] = 7;
    write_bytes(f.img, img, sizeof img, 0);
    write_bytes(f.lab, lab, sizeof lab, 1);
    fh_iter it;
    const char *kv[] = {"batch_size=1", "silent=True"};
    cr_assert_eq(create(&f, &it, 2, kv), MXP_OK, "%s", fh_error());
    int has, pad;
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_OK);
    const float *d = fh_iter_f32(&it, 0);
    cr_assert_eq(d[0], 0.99609375f);
    cr_assert_eq(d[1], 0.0f);
    cr_assert_eq(d[2], 0.5f);
    cr_assert_eq(d[3], 0.00390625f);
    cr_assert_eq(fh_iter_f32(&it, 1)[0], 7.0f);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

/* --------------------------------------------------------- batch counting */
Test(mnist, short_last_batch_dropped_like_mxnet) {
    files f;
    make_files(&f, 10, 2, 2, 0);
    fh_iter it;
    const char *kv[] = {"batch_size=4", "shuffle=False", "silent=True"};
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK, "%s", fh_error());
    uint32_t ids[64];
    int batches, pad;
    uint32_t n = run_epoch(&it, 0, 4, ids, 64, &batches, &pad);
    cr_assert_eq(batches, 2);
    cr_assert_eq(n, 8);
    cr_assert_eq(pad, 0);
    for (uint32_t i = 0; i < n; i++) cr_assert_eq(ids[i], i);
    /* Epoch 1 restarts from the beginning. */
    n = run_epoch(&it, 1, 4, ids, 64, &batches, &pad);
    cr_assert_eq(batches, 2);
    cr_assert_eq(ids[0], 0);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

Test(mnist, round_batch_pads_last_batch_by_wrapping) {
    files f;
    make_files(&f, 10, 2, 2, 1);
    fh_iter it;
    const char *kv[] = {"batch_size=4", "shuffle=False", "silent=True", "round_batch=True"};
    cr_assert_eq(create(&f, &it, 4, kv), MXP_OK, "%s", fh_error());
    uint32_t ids[64];
    int batches, pad;
    uint32_t n = run_epoch(&it, 0, 4, ids, 64, &batches, &pad);
    cr_assert_eq(batches, 3);
    cr_assert_eq(n, 12);
    cr_assert_eq(pad, 2);
    uint32_t want[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1};
    for (uint32_t i = 0; i < 12; i++) cr_assert_eq(ids[i], want[i], "position %u", i);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

Test(mnist, round_batch_with_shuffle_pads_from_the_epoch_order) {
    files f;
    make_files(&f, 7, 2, 2, 0);
    fh_iter it;
    const char *kv[] = {"batch_size=3", "seed=5", "silent=True", "round_batch=True"};
    cr_assert_eq(create(&f, &it, 4, kv), MXP_OK, "%s", fh_error());
    uint32_t ids[64];
    int batches, pad;
    uint32_t n = run_epoch(&it, 2, 4, ids, 64, &batches, &pad);
    cr_assert_eq(batches, 3);
    cr_assert_eq(n, 9);
    cr_assert_eq(pad, 2);
    cr_assert_eq(ids[7], ids[0]);
    cr_assert_eq(ids[8], ids[1]);
    int seen[7] = {0};
    for (uint32_t i = 0; i < 7; i++) seen[ids[i]]++;
    for (uint32_t i = 0; i < 7; i++) cr_assert_eq(seen[i], 1, "sample %u seen %d times", i, seen[i]);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

Test(mnist, batch_larger_than_dataset) {
    files f;
    make_files(&f, 3, 2, 2, 0);
    fh_iter it;
    const char *kv[] = {"batch_size=8", "shuffle=False", "silent=True"};
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK, "%s", fh_error());
    uint32_t ids[64];
    int batches, pad;
    cr_assert_eq(run_epoch(&it, 0, 4, ids, 64, &batches, &pad), 0);
    cr_assert_eq(batches, 0);
    fh_iter_destroy(&it);
    close_pack();
    const char *kv2[] = {"batch_size=8", "shuffle=False", "silent=True", "round_batch=1"};
    cr_assert_eq(create(&f, &it, 4, kv2), MXP_OK, "%s", fh_error());
    cr_assert_eq(run_epoch(&it, 0, 4, ids, 64, &batches, &pad), 8);
    cr_assert_eq(batches, 1);
    cr_assert_eq(pad, 5);
    uint32_t want[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    for (uint32_t i = 0; i < 8; i++) cr_assert_eq(ids[i], want[i]);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

/* --------------------------------------------------------------- shuffle */
static void epoch_ids(const files *f, const char *seed, uint64_t epoch, uint32_t *ids, uint32_t n) {
    fh_iter it;
    const char *kv[] = {"batch_size=10", "silent=True", seed};
    cr_assert_eq(create(f, &it, 3, kv), MXP_OK, "%s", fh_error());
    uint32_t got[512];
    int batches, pad;
    cr_assert_eq(run_epoch(&it, epoch, 4, got, 512, &batches, &pad), n);
    memcpy(ids, got, n * sizeof *ids);
    fh_iter_destroy(&it);
    close_pack();
}

static int same(const uint32_t *a, const uint32_t *b, uint32_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

Test(mnist, shuffle_is_a_pure_function_of_seed_and_epoch) {
    enum { N = 300 };
    files f;
    make_files(&f, N, 2, 2, 0);
    uint32_t a[N], b[N], c[N], d[N], e0[N];
    epoch_ids(&f, "seed=7", 3, a, N);
    epoch_ids(&f, "seed=7", 3, b, N);
    epoch_ids(&f, "seed=7", 4, c, N);
    epoch_ids(&f, "seed=8", 3, d, N);
    epoch_ids(&f, "seed=7", 0, e0, N);
    cr_assert(same(a, b, N), "same (seed, epoch) must give the same order");
    cr_assert_not(same(a, c, N), "epochs 3 and 4 gave the same order");
    cr_assert_not(same(a, d, N), "seeds 7 and 8 gave the same order");
    int seen[N] = {0}, moved = 0;
    for (uint32_t i = 0; i < N; i++) {
        seen[a[i]]++;
        moved += a[i] != i;
    }
    for (uint32_t i = 0; i < N; i++) cr_assert_eq(seen[i], 1, "sample %u seen %d times", i, seen[i]);
    cr_assert_gt(moved, N / 2, "order barely shuffled (%d moved)", moved);

    /* Resuming: an iterator that ran epochs 0..3 and one reset straight
     * to epoch 3 see the same order; so does going back to epoch 0. */
    fh_iter it;
    const char *kv[] = {"batch_size=10", "silent=True", "seed=7"};
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK);
    uint32_t got[N];
    int batches, pad;
    for (uint64_t e = 0; e <= 3; e++) run_epoch(&it, e, 4, got, N, &batches, &pad);
    cr_assert(same(got, a, N));
    run_epoch(&it, 0, 4, got, N, &batches, &pad);
    cr_assert(same(got, e0, N));
    /* Before any reset the iterator is in epoch 0. */
    fh_iter_destroy(&it);
    close_pack();
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK);
    uint32_t n = 0;
    for (;;) {
        int has;
        cr_assert_eq(fh_iter_next(&it, 1, &has, &pad), MXP_OK);
        if (!has) break;
        for (uint32_t j = 0; j < 10; j++) got[n++] = (uint32_t)it.index[j];
    }
    cr_assert_eq(n, N);
    cr_assert(same(got, e0, N));
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

Test(mnist, no_shuffle_keeps_file_order_every_epoch) {
    files f;
    make_files(&f, 20, 1, 2, 0);
    uint32_t a[20];
    fh_iter it;
    const char *kv[] = {"batch_size=5", "silent=True", "shuffle=False", "seed=99"};
    cr_assert_eq(create(&f, &it, 4, kv), MXP_OK);
    int batches, pad;
    for (uint64_t e = 0; e < 3; e++) {
        cr_assert_eq(run_epoch(&it, e, 2, a, 20, &batches, &pad), 20);
        for (uint32_t i = 0; i < 20; i++) cr_assert_eq(a[i], i);
    }
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

/* -------------------------------------------------------------- sharding */
static void check_shards(uint32_t n, int parts, const char *shuffle) {
    files f;
    make_files(&f, n, 2, 2, 0);
    int owner[1024];
    cr_assert(n <= 1024);
    for (uint32_t i = 0; i < n; i++) owner[i] = -1;
    for (int k = 0; k < parts; k++) {
        char np[32], pi[32];
        snprintf(np, sizeof np, "num_parts=%d", parts);
        snprintf(pi, sizeof pi, "part_index=%d", k);
        const char *kv[] = {"batch_size=1", "silent=True", shuffle, np, pi};
        fh_iter it;
        cr_assert_eq(create(&f, &it, 5, kv), MXP_OK, "%s", fh_error());
        uint32_t ids[1024];
        int batches, pad;
        uint32_t got = run_epoch(&it, 1, 4, ids, 1024, &batches, &pad);
        /* MXNet's slice [n*k/parts, n*(k+1)/parts), computed exactly. */
        uint32_t lo = (uint32_t)((uint64_t)n * (uint64_t)k / (uint64_t)parts);
        uint32_t hi = (uint32_t)((uint64_t)n * (uint64_t)(k + 1) / (uint64_t)parts);
        cr_assert_eq(got, hi - lo, "part %d of %d: %u samples, want %u", k, parts, got, hi - lo);
        for (uint32_t i = 0; i < got; i++) {
            cr_assert(ids[i] >= lo && ids[i] < hi, "part %d got sample %u outside [%u, %u)", k, ids[i], lo, hi);
            cr_assert_eq(owner[ids[i]], -1, "sample %u in parts %d and %d", ids[i], owner[ids[i]], k);
            owner[ids[i]] = k;
        }
        fh_iter_destroy(&it);
        close_pack();
    }
    for (uint32_t i = 0; i < n; i++) cr_assert_neq(owner[i], -1, "sample %u in no part", i);
    remove_files(&f);
}

Test(mnist, sharding_is_contiguous_disjoint_and_complete) {
    check_shards(10, 3, "shuffle=False");
    check_shards(10, 3, "shuffle=True");
    check_shards(100, 7, "shuffle=True");
    check_shards(5, 8, "shuffle=False"); /* more parts than samples */
}

/* shard=strided: for each epoch, batch b of part k (batch size B, P
 * parts) holds samples order[(b*B + j)*P + k] of the one-part epoch order
 * (batch size P*B), so the P parts' batch b together are the one-part
 * batch b; every part gets floor(n/P) samples, none twice within a part. */
static void check_strided(uint32_t n, int parts, uint32_t batch, const char *shuffle) {
    files f;
    make_files(&f, n, 2, 2, 0);
    char bsp[32], np[32];
    snprintf(bsp, sizeof bsp, "batch_size=%u", batch);
    snprintf(np, sizeof np, "num_parts=%d", parts);
    for (uint64_t epoch = 0; epoch < 3; epoch++) {
        /* The one-part order, in round_batch mode to see every sample. */
        fh_iter whole;
        const char *kw[] = {"batch_size=1", "silent=True", shuffle, "seed=11"};
        cr_assert_eq(create(&f, &whole, 4, kw), MXP_OK, "%s", fh_error());
        uint32_t order[512];
        int batches, pad;
        cr_assert_eq(run_epoch(&whole, epoch, 4, order, 512, &batches, &pad), n);
        fh_iter_destroy(&whole);
        close_pack();
        for (int k = 0; k < parts; k++) {
            char pi[32];
            snprintf(pi, sizeof pi, "part_index=%d", k);
            const char *kv[] = {bsp, "silent=True", shuffle, "seed=11", np, pi, "shard=strided"};
            fh_iter it;
            cr_assert_eq(create(&f, &it, 7, kv), MXP_OK, "%s", fh_error());
            uint32_t ids[512];
            uint32_t got = run_epoch(&it, epoch, 4, ids, 512, &batches, &pad);
            uint32_t per = n / (uint32_t)parts;
            cr_assert_eq(got, per / batch * batch, "part %d: %u samples, want %u", k, got, per / batch * batch);
            for (uint32_t i = 0; i < got; i++)
                cr_assert_eq(ids[i], order[i * (uint32_t)parts + (uint32_t)k], "epoch %lu part %d position %u",
                             (unsigned long)epoch, k, i);
            fh_iter_destroy(&it);
            close_pack();
        }
    }
    remove_files(&f);
}

Test(mnist, strided_shards_make_up_the_one_part_batches) {
    check_strided(40, 2, 4, "shuffle=True");
    check_strided(41, 3, 2, "shuffle=True"); /* 41 = 3*13 + 2: the tail of each epoch's order is left out */
    check_strided(12, 2, 3, "shuffle=False");
}

Test(mnist, part_index_out_of_range) {
    files f;
    make_files(&f, 4, 2, 2, 0);
    fh_iter it;
    const char *kv[] = {"num_parts=2", "part_index=2"};
    cr_assert_eq(create(&f, &it, 2, kv), MXP_EINVAL);
    cr_assert(strstr(fh_error(), "part_index"), "%s", fh_error());
    close_pack();
    remove_files(&f);
}

/* ---------------------------------------------------------------- errors */
static void expect_error(const files *f, int status, const char *const *subs, int n_subs) {
    fh_iter it;
    const char *kv[] = {"silent=True"};
    int rc = create(f, &it, 1, kv);
    cr_assert_eq(rc, status, "status %d, want %d (%s)", rc, status, fh_error());
    for (int i = 0; i < n_subs; i++)
        cr_assert(strstr(fh_error(), subs[i]), "message lacks '%s': %s", subs[i], fh_error());
    close_pack();
}

Test(mnist, truncated_image_file) {
    for (int gz = 0; gz < 2; gz++) {
        files f;
        make_dir(&f);
        size_t li, ll;
        uint8_t *bi = image_bytes(10, 4, 4, &li), *bl = label_bytes(10, &ll);
        write_bytes(f.img, bi, li - 5, gz); /* last image short by 5 bytes */
        write_bytes(f.lab, bl, ll, gz);
        const char *subs[] = {f.img, "truncated", "10 item(s) of 16 byte(s)", "byte offset 16", "byte offset 171",
                              "9 complete"};
        expect_error(&f, MXP_EFORMAT, subs, 6);
        /* Cut inside the header. */
        write_bytes(f.img, bi, 10, gz);
        const char *subs2[] = {f.img, "truncated IDX header", "byte offset 4", "byte offset 10"};
        expect_error(&f, MXP_EFORMAT, subs2, 4);
        free(bi);
        free(bl);
        remove_files(&f);
    }
}

Test(mnist, header_claiming_huge_sizes_is_not_trusted) {
    files f;
    make_dir(&f);
    uint8_t img[16 + 8];
    put_be32(img, 0x803);
    put_be32(img + 4, 0xffffffffu);
    put_be32(img + 8, 0xffffffffu);
    put_be32(img + 12, 0xffffffffu);
    memset(img + 16, 7, 8);
    size_t ll;
    uint8_t *bl = label_bytes(2, &ll);
    write_bytes(f.img, img, sizeof img, 1);
    write_bytes(f.lab, bl, ll, 0);
    /* Refused from the header, before inflating anything (issue 12 §3). */
    const char *subs[] = {f.img, "4294967295 item(s)", "limit"};
    expect_error(&f, MXP_EFORMAT, subs, 3);
    free(bl);
    remove_files(&f);
}

Test(mnist, truncated_gzip_stream) {
    files f;
    make_dir(&f);
    size_t li, ll;
    uint8_t *bi = image_bytes(50, 8, 8, &li), *bl = label_bytes(50, &ll);
    write_bytes(f.img, bi, li, 1);
    write_bytes(f.lab, bl, ll, 0);
    /* Cut the compressed file in half. */
    FILE *fp = fopen(f.img, "rb");
    cr_assert(fp);
    uint8_t z[8192];
    size_t zn = fread(z, 1, sizeof z, fp);
    fclose(fp);
    cr_assert_gt(zn, 40);
    write_bytes(f.img, z, zn / 2, 0);
    const char *subs[] = {f.img, "truncated"};
    expect_error(&f, MXP_EFORMAT, subs, 2);
    free(bi);
    free(bl);
    remove_files(&f);
}

Test(mnist, wrong_magic) {
    files f;
    make_files(&f, 4, 2, 2, 0);
    /* Swap the two paths: the label file where images are expected. */
    files sw = f;
    memcpy(sw.img, f.lab, sizeof sw.img);
    memcpy(sw.lab, f.img, sizeof sw.lab);
    const char *subs[] = {f.lab, "wrong IDX magic at byte offset 0", "expected 0x00000803", "found 0x00000801",
                          "swapped"};
    expect_error(&sw, MXP_EFORMAT, subs, 5);
    /* Garbage magic in the label file. */
    size_t ll;
    uint8_t *bl = label_bytes(4, &ll);
    put_be32(bl, 0x01080000u);
    write_bytes(f.lab, bl, ll, 1);
    const char *subs2[] = {f.lab, "expected 0x00000801", "found 0x01080000", "byte-swapped"};
    expect_error(&f, MXP_EFORMAT, subs2, 4);
    free(bl);
    remove_files(&f);
}

Test(mnist, label_count_mismatch) {
    files f;
    make_dir(&f);
    size_t li, ll;
    uint8_t *bi = image_bytes(10, 2, 2, &li), *bl = label_bytes(9, &ll);
    write_bytes(f.img, bi, li, 0);
    write_bytes(f.lab, bl, ll, 1);
    const char *subs[] = {"holds 10 image(s)", "holds 9 label(s)", f.img, f.lab, "expected equal counts"};
    expect_error(&f, MXP_EFORMAT, subs, 5);
    free(bi);
    free(bl);
    remove_files(&f);
}

Test(mnist, label_file_inconsistent_with_its_header) {
    files f;
    make_dir(&f);
    size_t li, ll;
    uint8_t *bi = image_bytes(10, 2, 2, &li), *bl = label_bytes(10, &ll);
    put_be32(bl + 4, 8); /* header says 8, the file has 10 labels */
    write_bytes(f.img, bi, li, 0);
    write_bytes(f.lab, bl, ll, 0);
    const char *subs[] = {f.lab, "2 unexpected trailing byte(s)", "byte offset 16"};
    expect_error(&f, MXP_EFORMAT, subs, 3);
    free(bi);
    free(bl);
    remove_files(&f);
}

Test(mnist, missing_file) {
    files f;
    make_files(&f, 4, 2, 2, 0);
    unlink(f.img);
    const char *subs[] = {"cannot open", f.img, "No such file"};
    expect_error(&f, MXP_EIO, subs, 3);
    remove_files(&f);
}

Test(mnist, next_rejects_wrong_tensors) {
    files f;
    make_files(&f, 4, 2, 2, 0);
    fh_iter it;
    const char *kv[] = {"batch_size=2", "silent=True"};
    cr_assert_eq(create(&f, &it, 2, kv), MXP_OK);
    int has, pad;
    it.tensors[0].dtype = MXP_DTYPE_F64;
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_ETYPE);
    cr_assert_eq(has, 0);
    it.tensors[0].dtype = MXP_DTYPE_F32;
    it.shape_storage[1][0] = 3;
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_ESHAPE);
    cr_assert(strstr(fh_error(), "softmax_label"), "%s", fh_error());
    it.shape_storage[1][0] = 2;
    it.index_capacity = 1;
    cr_assert_eq(fh_iter_next(&it, 1, &has, &pad), MXP_EINVAL);
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_OK);
    cr_assert_eq(has, 1);
    fh_iter_destroy(&it);
    close_pack();
    remove_files(&f);
}

/* ------------------------------------------------------ real Fashion-MNIST */
static int have_fashion(void) {
    return access(FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) == 0 &&
           access(FASHION_DIR "/t10k-labels-idx1-ubyte.gz", R_OK) == 0;
}

static void fashion_epoch(const char *prefix, uint32_t n, uint32_t batch) {
    files f;
    snprintf(f.img, sizeof f.img, FASHION_DIR "/%s-images-idx3-ubyte.gz", prefix);
    snprintf(f.lab, sizeof f.lab, FASHION_DIR "/%s-labels-idx1-ubyte.gz", prefix);
    char bs[32];
    snprintf(bs, sizeof bs, "batch_size=%u", batch);
    const char *kv[] = {bs, "shuffle=False"};
    fh_iter it;
    cr_assert_eq(create(&f, &it, 2, kv), MXP_OK, "%s", fh_error());
    int64_t e[4] = {batch, 1, 28, 28};
    for (int d = 0; d < 4; d++) cr_assert_eq(it.shapes[0].dims[d], e[d]);
    uint32_t hist[10] = {0}, batches = 0;
    for (;;) {
        int has, pad;
        cr_assert_eq(fh_iter_next(&it, 1, &has, &pad), MXP_OK, "%s", fh_error());
        if (!has) break;
        cr_assert_eq(pad, 0);
        const float *lab = fh_iter_f32(&it, 1), *d = fh_iter_f32(&it, 0);
        for (uint32_t j = 0; j < batch; j++) {
            cr_assert(lab[j] >= 0.0f && lab[j] <= 9.0f && lab[j] == (float)(int)lab[j], "label %g", (double)lab[j]);
            hist[(int)lab[j]]++;
            cr_assert_eq(it.index[j], (uint64_t)batches * batch + j);
        }
        for (uint32_t q = 0; q < batch * 784u; q++) cr_assert(d[q] >= 0.0f && d[q] <= 255.0f / 256.0f);
        batches++;
    }
    cr_assert_eq(batches, n / batch);
    /* Fashion-MNIST is balanced: n/10 samples of each class. */
    for (int c = 0; c < 10; c++) cr_assert_eq(hist[c], n / 10, "class %d: %u", c, hist[c]);
    fh_iter_destroy(&it);
    close_pack();
}

Test(mnist, real_fashion_mnist_test_set) {
    if (!have_fashion()) cr_skip_test("Debian package dataset-fashion-mnist not installed (" FASHION_DIR ")");
    fashion_epoch("t10k", 10000, 100);
    /* First test labels as published: ankle boot, pullover, trouser, ... */
    files f;
    snprintf(f.img, sizeof f.img, FASHION_DIR "/t10k-images-idx3-ubyte.gz");
    snprintf(f.lab, sizeof f.lab, FASHION_DIR "/t10k-labels-idx1-ubyte.gz");
    const char *kv[] = {"batch_size=10", "shuffle=False", "silent=True"};
    fh_iter it;
    cr_assert_eq(create(&f, &it, 3, kv), MXP_OK, "%s", fh_error());
    int has, pad;
    cr_assert_eq(fh_iter_next(&it, 0, &has, &pad), MXP_OK);
    const float want[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    for (int j = 0; j < 10; j++) cr_assert_eq(fh_iter_f32(&it, 1)[j], want[j], "label %d", j);
    /* Sum of the first image's bytes (33456, computed from the file with
     * Python's gzip) / 256. */
    double s = 0;
    for (int q = 0; q < 784; q++) s += fh_iter_f32(&it, 0)[q];
    cr_assert_float_eq(s, 33456.0 / 256.0, 1e-3);
    fh_iter_destroy(&it);
    close_pack();
}

Test(mnist, real_fashion_mnist_train_set, .timeout = 120) {
    if (!have_fashion()) cr_skip_test("Debian package dataset-fashion-mnist not installed (" FASHION_DIR ")");
    fashion_epoch("train", 60000, 1000);
}

Test(mnist, batch_size_bounds) {
    files f;
    make_files(&f, 4, 2, 2, 0);
    fh_iter it;
    const char *kv0[] = {"batch_size=0"};
    cr_assert_eq(create(&f, &it, 1, kv0), MXP_EINVAL);
    cr_assert(strstr(fh_error(), "batch_size"), "%s", fh_error());
    close_pack();
    const char *kv1[] = {"batch_size=2147483648"};
    cr_assert_eq(create(&f, &it, 1, kv1), MXP_EINVAL);
    cr_assert(strstr(fh_error(), "batch_size"), "%s", fh_error());
    close_pack();
    remove_files(&f);
}
