/* test_params.c — .params load/save: a file written independently by
 * tests/data/ndarray/make_params.py (V1/V2/V3/legacy records, f32/f64/i32,
 * scalar, none, empty), save->load round trip, and corrupt input: every
 * truncation of a valid file fails cleanly with an offset in the message,
 * and crafted headers (huge counts, sparse, bad magic/type/ndim) are
 * rejected before any large allocation.  ASan runs catch leaks/overreads. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ndarray/ndarray.h"

#define SAMPLE MXP_SOURCE_DIR "/tests/data/ndarray/sample.params"

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void check_values(mxp_ndarray *a, int dtype, int ndim, const int64_t *shape, const void *vals,
                         size_t bytes) {
    cr_assert_eq(mxp_ndarray_dtype(a), dtype);
    cr_assert_eq(mxp_ndarray_ndim(a), ndim);
    for (int i = 0; i < ndim; i++) cr_assert_eq(mxp_ndarray_shape(a)[i], shape[i]);
    cr_assert_eq(mxp_ndarray_nbytes(a), bytes);
    unsigned char buf[64];
    cr_assert_eq(mxp_ndarray_sync_copy_to(a, buf, bytes), MXP_OK);
    cr_assert_eq(memcmp(buf, vals, bytes), 0);
}

static void check_sample(int n, mxp_ndarray **arr, char **names) {
    cr_assert_eq(n, 7);
    cr_assert_not_null(names);
    const char *want[7] = {"arg:w", "arg:b", "aux:idx", "aux:legacy", "scalar", "none", "empty"};
    for (int i = 0; i < 7; i++) cr_assert_str_eq(names[i], want[i]);
    float w[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    check_values(arr[0], MXP_DTYPE_F32, 2, (int64_t[]){2, 3}, w, sizeof w);
    cr_assert_eq(mxp_ndarray_device(arr[0]).type, MXP_DEV_CPU, "loaded onto the CPU");
    double b[4] = {0.001, 2.5, -7.25, 1e10};
    check_values(arr[1], MXP_DTYPE_F64, 1, (int64_t[]){4}, b, sizeof b);
    int32_t idx[4] = {1, -2, 3, INT32_MIN};
    check_values(arr[2], MXP_DTYPE_I32, 2, (int64_t[]){2, 2}, idx, sizeof idx);
    float leg[3] = {3.0f, 2.0f, 1.0f};
    check_values(arr[3], MXP_DTYPE_F32, 1, (int64_t[]){3}, leg, sizeof leg);
    double sc = 42.0;
    check_values(arr[4], MXP_DTYPE_F64, 0, NULL, &sc, sizeof sc);
    cr_assert(mxp_ndarray_is_none(arr[5]));
    cr_assert_eq(mxp_ndarray_ndim(arr[6]), 2);
    cr_assert_eq(mxp_ndarray_shape(arr[6])[0], 0);
    cr_assert_eq(mxp_ndarray_size(arr[6]), 0);
}

Test(params, load_independent_sample) {
    int n = -1;
    mxp_ndarray **arr = NULL;
    char **names = NULL;
    int rc = mxp_ndarray_load(SAMPLE, &n, &arr, &names);
    cr_assert_eq(rc, MXP_OK, "%s", mxp_last_error());
    check_sample(n, arr, names);
    mxp_ndarray_list_free(n, arr, names);
}

Test(params, round_trip_is_byte_identical_for_v2_files) {
    int n;
    mxp_ndarray **arr;
    char **names;
    cr_assert_eq(mxp_ndarray_load(SAMPLE, &n, &arr, &names), MXP_OK);
    char path[] = "/tmp/mxp_params_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(mxp_ndarray_save(path, n, arr, (const char *const *)names), MXP_OK, "%s", mxp_last_error());
    int n2;
    mxp_ndarray **arr2;
    char **names2;
    cr_assert_eq(mxp_ndarray_load(path, &n2, &arr2, &names2), MXP_OK, "%s", mxp_last_error());
    check_sample(n2, arr2, names2);
    mxp_ndarray_list_free(n2, arr2, names2);
    /* Saving a list (no names): m == 0, load gives NULL names. */
    cr_assert_eq(mxp_ndarray_save(path, 2, arr, NULL), MXP_OK);
    cr_assert_eq(mxp_ndarray_load(path, &n2, &arr2, &names2), MXP_OK);
    cr_assert_eq(n2, 2);
    cr_assert_null(names2);
    mxp_ndarray_list_free(n2, arr2, names2);
    /* Writer layout, byte by byte, for one V2 record. */
    cr_assert_eq(mxp_ndarray_save(path, 1, arr, (const char *const *)names), MXP_OK);
    size_t len;
    unsigned char *buf = slurp(path, &len);
    size_t want_len = 24 + (4 + 4 + 4 + 16 + 12 + 24) + 8 + 8 + 5;
    cr_assert_eq(len, want_len);
    uint32_t magic;
    memcpy(&magic, buf + 24, 4);
    cr_assert_eq(magic, 0xF993fac9u);
    int32_t ctx_type;
    memcpy(&ctx_type, buf + 24 + 28, 4);
    cr_assert_eq(ctx_type, 1);
    free(buf);
    unlink(path);
    mxp_ndarray_list_free(n, arr, names);
}

Test(params, every_truncation_fails_cleanly) {
    size_t len;
    unsigned char *full = slurp(SAMPLE, &len);
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *buf = malloc(cut ? cut : 1); /* exact size: ASan sees any overread */
        memcpy(buf, full, cut);
        int n = -1;
        mxp_ndarray **arr = (mxp_ndarray **)1;
        char **names = (char **)1;
        int rc = mxp__ndarray_load_mem(buf, cut, "s.params", &n, &arr, &names);
        cr_assert_eq(rc, MXP_EFORMAT, "cut at %zu: rc %d", cut, rc);
        cr_assert_eq(n, 0);
        cr_assert_null(arr);
        cr_assert_null(names);
        const char *msg = mxp_last_error();
        cr_assert(strstr(msg, "s.params: offset ") && strstr(msg, "truncated"), "cut %zu: %s", cut, msg);
        free(buf);
    }
    free(full);
}

static int load_bytes(const void *buf, size_t len) {
    int n;
    mxp_ndarray **arr;
    char **names;
    int rc = mxp__ndarray_load_mem(buf, len, "x.params", &n, &arr, &names);
    if (rc == MXP_OK) mxp_ndarray_list_free(n, arr, names);
    return rc;
}

Test(params, corrupt_headers) {
    size_t len;
    unsigned char *full = slurp(SAMPLE, &len);
    unsigned char *b = malloc(len);
    uint64_t u64;
    uint32_t u32;
    int32_t i32;

    memcpy(b, full, len);
    b[0] = 0x13;
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "offset 0: not an NDArray file"), "%s", mxp_last_error());

    memcpy(b, full, len); /* absurd array count: rejected before allocating */
    u64 = (uint64_t)1 << 60;
    memcpy(b + 16, &u64, 8);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "offset 16: truncated or corrupt file: array count"), "%s", mxp_last_error());

    memcpy(b, full, len); /* sparse storage type in record 0 */
    i32 = 2;
    memcpy(b + 28, &i32, 4);
    cr_assert_eq(load_bytes(b, len), MXP_EUNSUPPORTED);
    cr_assert(strstr(mxp_last_error(), "record 0: sparse storage (csr)"), "%s", mxp_last_error());

    memcpy(b, full, len); /* ndim 9 */
    i32 = 9;
    memcpy(b + 32, &i32, 4);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "offset 32: record 0: ndim 9"), "%s", mxp_last_error());

    memcpy(b, full, len); /* huge dims whose product overflows */
    u64 = (uint64_t)1 << 40;
    memcpy(b + 36, &u64, 8);
    memcpy(b + 44, &u64, 8);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "truncated record 0 data (need more than 2^64 bytes"), "%s",
              mxp_last_error());

    memcpy(b, full, len); /* large dim: data claimed beyond the file */
    u64 = 1000;
    memcpy(b + 36, &u64, 8);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "offset 64: truncated record 0 data (need 12000 bytes"), "%s",
              mxp_last_error());

    memcpy(b, full, len); /* unknown type flag */
    i32 = 99;
    memcpy(b + 60, &i32, 4);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "unknown type flag 99"), "%s", mxp_last_error());

    memcpy(b, full, len); /* garbage record magic */
    u32 = 0xdeadbeef;
    memcpy(b + 24, &u32, 4);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "unknown record magic 0xdeadbeef"), "%s", mxp_last_error());

    /* Name count mismatch and an absurd name length: find the names section
     * (after the last record = "empty": header of 8 + 4 + 4 + 16 + 12 bytes). */
    size_t names_at = len - 8;
    for (int i = 6; i >= 0; i--) {
        static const size_t lens[7] = {5, 5, 7, 10, 6, 4, 5};
        names_at -= 8 + lens[i];
    }
    memcpy(&u64, full + names_at, 8);
    cr_assert_eq(u64, 7);
    memcpy(b, full, len);
    u64 = 3;
    memcpy(b + names_at, &u64, 8);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "name count 3 does not match array count 7"), "%s", mxp_last_error());
    memcpy(b, full, len);
    u64 = UINT64_MAX;
    memcpy(b + names_at + 8, &u64, 8);
    cr_assert_eq(load_bytes(b, len), MXP_EFORMAT);
    cr_assert(strstr(mxp_last_error(), "truncated name 0"), "%s", mxp_last_error());
    free(b);
    free(full);
}

Test(params, file_errors) {
    int n;
    mxp_ndarray **arr;
    char **names;
    cr_assert_eq(mxp_ndarray_load("/nonexistent/dir/x.params", &n, &arr, &names), MXP_EIO);
    cr_assert(strstr(mxp_last_error(), "/nonexistent/dir/x.params"), "%s", mxp_last_error());
    mxp_ndarray *a = NULL;
    int64_t s[1] = {2};
    cr_assert_eq(mxp_ndarray_create(s, 1, MXP_DTYPE_F32, (mxp_device){MXP_DEV_CPU, 0}, &a), MXP_OK);
    cr_assert_eq(mxp_ndarray_save("/nonexistent/dir/x.params", 1, &a, NULL), MXP_EIO);
    mxp_ndarray_release(a);
}
