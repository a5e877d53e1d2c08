/* test_npy.c — the mxplug CLI's .npy reader/writer (tools/mxplug/npy.c).
 *
 * npy.c belongs to the CLI (it is not part of libmxplug), so it is compiled
 * into this test by including the source; it depends only on <mxp/types.h>.
 * References are files numpy 1.24 wrote (npy_fixtures.h): the reader must
 * give their values, the writer must reproduce them byte for byte, and
 * everything outside the supported subset must fail with a status and a
 * message that says why. */
#include <criterion/criterion.h>

#include "../../../tools/mxplug/npy.c"
#include "npy_fixtures.h"

#include <math.h>
#include <unistd.h>

static char tmpdir[64];

static void setup(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mxp-npy-test-XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void teardown(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect(system(cmd) == 0);
}

TestSuite(npy, .init = setup, .fini = teardown);

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmpdir, name);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "open %s", path);
    unsigned char *buf = malloc(1 << 16);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static void write_bytes(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* ------------------------------------------------------------ reading */

Test(npy, reads_numpy_float32_2d) {
    npy_array a;
    char err[256] = "";
    cr_assert_eq(npy_parse(np_f32_2x3, sizeof np_f32_2x3, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.dtype, MXP_DTYPE_F32);
    cr_expect_eq(a.ndim, 2);
    cr_expect_eq(a.shape[0], 2);
    cr_expect_eq(a.shape[1], 3);
    cr_assert_eq(a.count, 6);
    for (int i = 0; i < 6; i++) cr_expect_eq(((float *)a.data)[i], i / 4.0f, "element %d", i);
    npy_free(&a);
    cr_expect_null(a.data);
}

Test(npy, reads_numpy_float64_uint8_scalar_and_v2) {
    npy_array a;
    char err[256] = "";
    cr_assert_eq(npy_parse(np_f64_3, sizeof np_f64_3, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.dtype, MXP_DTYPE_F64);
    cr_expect_eq(a.ndim, 1);
    cr_expect_eq(a.shape[0], 3);
    cr_expect_eq(((double *)a.data)[0], 1.5);
    cr_expect_eq(((double *)a.data)[1], -2.25);
    cr_expect_eq(((double *)a.data)[2], 1e300);
    npy_free(&a);

    cr_assert_eq(npy_parse(np_u8_2x2x2, sizeof np_u8_2x2x2, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.dtype, MXP_DTYPE_U8);
    cr_expect_eq(a.ndim, 3);
    for (int i = 0; i < 8; i++) cr_expect_eq(((uint8_t *)a.data)[i], i * 30);
    float f[8];
    npy_to_f32(&a, f);
    cr_expect_eq(f[7], 210.0f);
    npy_free(&a);

    cr_assert_eq(npy_parse(np_f32_scalar, sizeof np_f32_scalar, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.ndim, 0);
    cr_expect_eq(a.count, 1);
    cr_expect_eq(((float *)a.data)[0], 3.5f);
    npy_free(&a);

    cr_assert_eq(npy_parse(np_f32_v2, sizeof np_f32_v2, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.ndim, 1);
    cr_expect_eq(((float *)a.data)[1], 2.0f);
    npy_free(&a);

    cr_assert_eq(npy_parse(np_f32_1000x0, sizeof np_f32_1000x0, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.shape[0], 1000);
    cr_expect_eq(a.count, 0);
    npy_free(&a);
}

Test(npy, float64_converts_to_float32) {
    npy_array a;
    cr_assert_eq(npy_parse(np_f64_3, sizeof np_f64_3, &a, NULL, 0), MXP_OK);
    float f[3];
    npy_to_f32(&a, f);
    cr_expect_eq(f[0], 1.5f);
    cr_expect_eq(f[1], -2.25f);
    cr_expect(isinf(f[2]), "1e300 overflows float32 to inf");
    npy_free(&a);
}

/* ------------------------------------------------------------ writing */

static void expect_same_as_numpy(const char *name, int dtype, int ndim, const int64_t *shape, const void *data,
                                 const unsigned char *ref, size_t ref_n) {
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, name);
    cr_assert_eq(npy_save(path, dtype, ndim, shape, data, err, sizeof err), MXP_OK, "%s", err);
    size_t n = 0;
    unsigned char *got = slurp(path, &n);
    cr_expect_eq(n, ref_n, "%s: %zu bytes, numpy wrote %zu", name, n, ref_n);
    cr_expect(n == ref_n && memcmp(got, ref, n) == 0, "%s: bytes differ from np.save", name);
    free(got);
}

Test(npy, writes_what_numpy_writes) {
    float f23[6];
    for (int i = 0; i < 6; i++) f23[i] = i / 4.0f;
    expect_same_as_numpy("f23.npy", MXP_DTYPE_F32, 2, (int64_t[]){2, 3}, f23, np_f32_2x3, sizeof np_f32_2x3);
    double d3[3] = {1.5, -2.25, 1e300};
    expect_same_as_numpy("d3.npy", MXP_DTYPE_F64, 1, (int64_t[]){3}, d3, np_f64_3, sizeof np_f64_3);
    uint8_t u8[8];
    for (int i = 0; i < 8; i++) u8[i] = (uint8_t)(i * 30);
    expect_same_as_numpy("u8.npy", MXP_DTYPE_U8, 3, (int64_t[]){2, 2, 2}, u8, np_u8_2x2x2, sizeof np_u8_2x2x2);
    float s = 3.5f;
    expect_same_as_numpy("s.npy", MXP_DTYPE_F32, 0, NULL, &s, np_f32_scalar, sizeof np_f32_scalar);
    expect_same_as_numpy("e.npy", MXP_DTYPE_F32, 2, (int64_t[]){1000, 0}, NULL, np_f32_1000x0,
                         sizeof np_f32_1000x0);
}

Test(npy, round_trip_large_float32) {
    enum { N = 64, C = 784 };
    float *x = malloc(sizeof(float) * N * C);
    uint32_t s = 12345;
    for (int i = 0; i < N * C; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
    }
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "big.npy");
    cr_assert_eq(npy_save(path, MXP_DTYPE_F32, 4, (int64_t[]){N, 1, 28, 28}, x, err, sizeof err), MXP_OK, "%s", err);
    npy_array a;
    cr_assert_eq(npy_load(path, &a, err, sizeof err), MXP_OK, "%s", err);
    cr_expect_eq(a.ndim, 4);
    cr_expect_eq(a.shape[0], N);
    cr_expect_eq(a.shape[3], 28);
    cr_assert_eq(a.count, (size_t)N * C);
    cr_expect(memcmp(a.data, x, sizeof(float) * N * C) == 0);
    /* The data starts on a 64-byte boundary. */
    size_t n = 0;
    unsigned char *raw = slurp(path, &n);
    cr_expect_eq((n - sizeof(float) * N * C) % 64, 0);
    free(raw);
    npy_free(&a);
    free(x);
}

Test(npy, writer_refuses_unsupported_dtype) {
    char path[128], err[256] = "";
    tmp_path(path, sizeof path, "i32.npy");
    int v[2] = {1, 2};
    cr_expect_eq(npy_save(path, MXP_DTYPE_I32, 1, (int64_t[]){2}, v, err, sizeof err), MXP_EUNSUPPORTED);
    cr_expect(access(path, F_OK) != 0, "nothing written");
    cr_expect_eq(npy_save("/nonexistent-dir/x.npy", MXP_DTYPE_F32, 1, (int64_t[]){2}, v, err, sizeof err), MXP_EIO);
    cr_expect(strstr(err, "/nonexistent-dir/x.npy"), "message names the path: %s", err);
}

/* ------------------------------------------------------------ refusals */

static void expect_refused(const unsigned char *b, size_t n, int status, const char *needle) {
    npy_array a;
    char err[256] = "";
    int rc = npy_parse(b, n, &a, err, sizeof err);
    cr_expect_eq(rc, status, "status %d, want %d (%s)", rc, status, err);
    cr_expect(strstr(err, needle), "message '%s' should mention '%s'", err, needle);
    cr_expect_null(a.data);
    cr_expect_eq(a.count, 0);
}

Test(npy, refuses_other_dtypes_orders_and_byte_orders) {
    expect_refused(np_i4_2, sizeof np_i4_2, MXP_EUNSUPPORTED, "'<i4' is not supported");
    expect_refused(np_f32_fortran, sizeof np_f32_fortran, MXP_EUNSUPPORTED, "Fortran");
    expect_refused(np_f4_be, sizeof np_f4_be, MXP_EUNSUPPORTED, "big-endian");
}

Test(npy, refuses_malformed_files) {
    unsigned char b[256];
    /* Truncated data: drop the last float. */
    expect_refused(np_f32_2x3, sizeof np_f32_2x3 - 4, MXP_EFORMAT, "truncated data");
    /* Extra bytes after the data. */
    memcpy(b, np_f32_scalar, sizeof np_f32_scalar);
    b[sizeof np_f32_scalar] = 0;
    expect_refused(b, sizeof np_f32_scalar + 1, MXP_EFORMAT, "unexpected bytes");
    /* No magic. */
    expect_refused((const unsigned char *)"PK\3\4 not numpy at all", 22, MXP_EFORMAT, "magic");
    /* Unknown version. */
    memcpy(b, np_f32_scalar, sizeof np_f32_scalar);
    b[6] = 4;
    expect_refused(b, sizeof np_f32_scalar, MXP_EUNSUPPORTED, "version 4.0");
    /* Header length beyond the file. */
    memcpy(b, np_f32_scalar, sizeof np_f32_scalar);
    b[9] = 0x10;
    expect_refused(b, sizeof np_f32_scalar, MXP_EFORMAT, "truncated header");
    /* Header that is not a dict / has an unknown key / lacks shape. */
    static const char *bad[][2] = {
        {"[1, 2]", "not a dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", "unknown key 'extra'"},
        {"{'descr': '<f4', 'fortran_order': False, }", "lacks 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "not True or False"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "structured"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }",
         "shape too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", "more than 8 dimensions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t hl = strlen(bad[i][0]);
        memcpy(b, "\x93NUMPY\x01\x00", 8);
        b[8] = (unsigned char)hl;
        b[9] = 0;
        memcpy(b + 10, bad[i][0], hl);
        int status = strstr(bad[i][1], "structured") || strstr(bad[i][1], "more than") ? MXP_EUNSUPPORTED : MXP_EFORMAT;
        expect_refused(b, 10 + hl, status, bad[i][1]);
    }
}

Test(npy, load_names_the_path) {
    npy_array a;
    char err[256] = "", path[128];
    cr_expect_eq(npy_load("/nonexistent/input.npy", &a, err, sizeof err), MXP_EIO);
    cr_expect(strstr(err, "/nonexistent/input.npy"), "%s", err);
    tmp_path(path, sizeof path, "ints.npy");
    write_bytes(path, np_i4_2, sizeof np_i4_2);
    cr_expect_eq(npy_load(path, &a, err, sizeof err), MXP_EUNSUPPORTED);
    cr_expect(strstr(err, path) && strstr(err, "<i4"), "%s", err);
}
