/* test_recordio.c — the public RecordIO API against fixtures written by an
 * independent writer (tests/data/recordio/make_recordio_fixtures.py, only
 * Python's struct): reading them record by record and by key gives the
 * plain payloads the script saved; writing those payloads gives the
 * script's bytes exactly (split records included); truncated files and bad
 * indexes fail with messages naming the offset / line. */
#include <criterion/criterion.h>

#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FX MXP_SOURCE_DIR "/tests/data/recordio/"
#define N_REC 5

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    unsigned char *buf = malloc(1 << 16);
    cr_assert(buf);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static unsigned char *payload(int k, size_t *n) {
    char path[512];
    snprintf(path, sizeof path, FX "payload_%d.bin", k);
    return slurp(path, n);
}

Test(recordio, reads_independent_fixture_in_order) {
    mxp_recordio *r;
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", NULL, &r), MXP_OK, "%s", mxp_last_error());
    for (int k = 0; k < N_REC; k++) {
        const void *d;
        uint64_t len;
        int has;
        cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_OK, "record %d: %s", k, mxp_last_error());
        cr_assert_eq(has, 1, "record %d missing", k);
        size_t n;
        unsigned char *want = payload(k, &n);
        cr_assert_eq(len, n, "record %d: length %lu, want %zu", k, (unsigned long)len, n);
        cr_assert(n == 0 || !memcmp(d, want, n), "record %d: bytes differ", k);
        free(want);
    }
    const void *d;
    uint64_t len;
    int has = 7;
    cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_OK);
    cr_assert_eq(has, 0);
    cr_assert_eq(mxp_recordio_close(r), MXP_OK);
}

Test(recordio, idx_seek_by_key_and_image_header) {
    mxp_recordio *r;
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", FX "tiny.idx", &r), MXP_OK, "%s", mxp_last_error());
    const uint64_t *keys;
    uint64_t n;
    cr_assert_eq(mxp_recordio_keys(r, &keys, &n), MXP_OK);
    cr_assert_eq(n, N_REC);
    int order[] = {4, 1, 3, 0, 2, 1};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const void *d;
        uint64_t len;
        cr_assert_eq(mxp_recordio_read_key(r, (uint64_t)order[i], &d, &len), MXP_OK, "%s", mxp_last_error());
        size_t pn;
        unsigned char *want = payload(order[i], &pn);
        cr_assert_eq(len, pn);
        cr_assert(pn == 0 || !memcmp(d, want, pn), "key %d bytes differ", order[i]);
        free(want);
    }
    /* Record 1: flag 2, labels 1.5 and -2.0, id 1, id2 7, image = magic "xyz!" magic "end". */
    const void *d;
    uint64_t len;
    cr_assert_eq(mxp_recordio_read_key(r, 1, &d, &len), MXP_OK);
    mxp_recordio_header h;
    float labels[4] = {0};
    const void *img;
    uint64_t img_len;
    cr_assert_eq(mxp_recordio_unpack_image(d, len, &h, labels, 4, &img, &img_len), MXP_OK);
    cr_assert_eq(h.flag, 2);
    cr_assert_eq(h.id, 1);
    cr_assert_eq(h.id2, 7);
    cr_assert_eq(labels[0], 1.5f);
    cr_assert_eq(labels[1], -2.0f);
    cr_assert_eq(img_len, 15);
    cr_assert(!memcmp(img, "\x0a\x23\xd7\xcexyz!\x0a\x23\xd7\xce" "end", 15));
    cr_assert_eq(mxp_recordio_read_key(r, 0, &d, &len), MXP_OK);
    cr_assert_eq(mxp_recordio_unpack_image(d, len, &h, labels, 4, &img, &img_len), MXP_OK);
    cr_assert_eq(h.flag, 0);
    cr_assert_eq(h.label, 3.0f);
    cr_assert_eq(img_len, 3);
    /* Unknown key. */
    cr_assert_eq(mxp_recordio_read_key(r, 99, &d, &len), MXP_ENOENT);
    cr_assert(strstr(mxp_last_error(), "99"), "%s", mxp_last_error());
    /* Seek to a record's offset (record 2 starts at byte 100) and read on. */
    cr_assert_eq(mxp_recordio_seek(r, 100), MXP_OK);
    int has;
    cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_OK);
    cr_assert_eq(len, 4);
    cr_assert_eq(mxp_recordio_seek(r, 101), MXP_EINVAL);
    mxp_recordio_close(r);
}

Test(recordio, writer_matches_independent_bytes) {
    char dir[] = "/tmp/mxp-rec-test-XXXXXX";
    cr_assert(mkdtemp(dir));
    char rec[128], idx[128];
    snprintf(rec, sizeof rec, "%s/out.rec", dir);
    snprintf(idx, sizeof idx, "%s/out.idx", dir);
    mxp_recordio *w;
    cr_assert_eq(mxp_recordio_open_write(rec, idx, &w), MXP_OK, "%s", mxp_last_error());
    for (int k = 0; k < N_REC; k++) {
        size_t n;
        unsigned char *p = payload(k, &n);
        cr_assert_eq(mxp_recordio_write_key(w, (uint64_t)k, p, n), MXP_OK, "%s", mxp_last_error());
        free(p);
    }
    cr_assert_eq(access(rec, F_OK), -1, "the final name appears only at close");
    cr_assert_eq(mxp_recordio_close(w), MXP_OK, "%s", mxp_last_error());
    size_t a, b;
    unsigned char *got = slurp(rec, &a), *want = slurp(FX "tiny.rec", &b);
    cr_assert_eq(a, b);
    cr_assert(!memcmp(got, want, a), ".rec bytes differ from the independent writer's");
    free(got);
    free(want);
    got = slurp(idx, &a);
    want = slurp(FX "tiny.idx", &b);
    cr_assert_eq(a, b);
    cr_assert(!memcmp(got, want, a), ".idx differs from the independent writer's");
    free(got);
    free(want);

    /* write_image produces the same bytes as the fixture's record 1. */
    char rec2[128];
    snprintf(rec2, sizeof rec2, "%s/img.rec", dir);
    cr_assert_eq(mxp_recordio_open_write(rec2, NULL, &w), MXP_OK);
    mxp_recordio_header h = {.flag = 2, .label = 0, .id = 1, .id2 = 7};
    float labels[2] = {1.5f, -2.0f};
    cr_assert_eq(mxp_recordio_write_image(w, &h, labels, "\x0a\x23\xd7\xcexyz!\x0a\x23\xd7\xce" "end", 15), MXP_OK);
    cr_assert_eq(mxp_recordio_close(w), MXP_OK);
    got = slurp(rec2, &a);
    want = slurp(FX "tiny.rec", &b);
    cr_assert_eq(a, 100 - 36);
    cr_assert(!memcmp(got, want + 36, a));
    free(got);
    free(want);
    unlink(rec);
    unlink(idx);
    unlink(rec2);
    rmdir(dir);
}

Test(recordio, truncated_file_names_offset) {
    mxp_recordio *r;
    cr_assert_eq(mxp_recordio_open_read(FX "tiny_truncated.rec", NULL, &r), MXP_OK);
    const void *d;
    uint64_t len;
    int has;
    for (int k = 0; k < N_REC - 1; k++) cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_OK);
    cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_EFORMAT);
    cr_assert_eq(has, 0);
    const char *e = mxp_last_error();
    cr_assert(strstr(e, "truncated") && strstr(e, "offset 124") && strstr(e, "tiny_truncated.rec"), "%s", e);
    mxp_recordio_close(r);
}

Test(recordio, bad_index_is_refused_naming_line) {
    mxp_recordio *r = (mxp_recordio *)1;
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", FX "bad_past_end.idx", &r), MXP_EFORMAT);
    cr_assert_null(r);
    const char *e = mxp_last_error();
    cr_assert(strstr(e, "line 2") && strstr(e, "past the end") && strstr(e, "bad_past_end.idx"), "%s", e);
    /* A record offset that is not a record start: bad magic, named. */
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", NULL, &r), MXP_OK);
    cr_assert_eq(mxp_recordio_seek(r, 8), MXP_OK);
    const void *d;
    uint64_t len;
    int has;
    cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "bad magic") && strstr(mxp_last_error(), "offset 8"), "%s", mxp_last_error());
    mxp_recordio_close(r);
    cr_assert_eq(mxp_recordio_open_read(FX "no-such.rec", NULL, &r), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "no-such.rec"));
}

Test(recordio, continuation_part_first_is_refused) {
    /* Record 1 of the fixture starts at 36; its second part (cflag 2) at 76. */
    mxp_recordio *r;
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", NULL, &r), MXP_OK);
    cr_assert_eq(mxp_recordio_seek(r, 76), MXP_OK);
    const void *d;
    uint64_t len;
    int has;
    cr_assert_eq(mxp_recordio_read_next(r, &d, &len, &has), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "continuation flag 2"), "%s", mxp_last_error());
    mxp_recordio_close(r);
}

Test(recordio, fifo_is_refused_without_blocking) {
    char dir[] = "/tmp/mxp-rec-fifo-XXXXXX";
    cr_assert(mkdtemp(dir));
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/f.rec", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    mxp_recordio *r;
    cr_assert_eq(mxp_recordio_open_read(fifo, NULL, &r), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "not a regular file"), "%s", mxp_last_error());
    cr_assert_eq(mxp_recordio_open_read(FX "tiny.rec", fifo, &r), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "f.rec"), "%s", mxp_last_error());
    unlink(fifo);
    rmdir(dir);
}
