/* io_test_util.h — helpers shared by tests/unit/io/ (header-only: each test
 * is its own binary): environment (the build manifest plus the iter_fail
 * fixture pack's manifest in a temp dir), small MNIST IDX files (plain or
 * gzipped) whose pixels encode the sample number, and readers of batches. */
#ifndef MXP_TEST_IO_UTIL_H
#define MXP_TEST_IO_UTIL_H

#include <criterion/criterion.h>

#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IOT_FIXTURE_SO MXP_BUILD_DIR "/tests/fixtures/iter_fail.so"
#define IOT_BUILD_MANIFEST MXP_BUILD_DIR "/plugins/manifest.yaml"

static char iot_dir[64];

static inline void iot_setup(void) {
    snprintf(iot_dir, sizeof iot_dir, "/tmp/mxp-io-test-XXXXXX");
    cr_assert(mkdtemp(iot_dir));
    char path[128];
    snprintf(path, sizeof path, "%s/fx.yaml", iot_dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "manifest_version: 1\n"
            "packs:\n"
            "  - name: iter-fail\n"
            "    version: 0.0.1\n"
            "    abi: {major: 1, minor: 0, min_host_minor: 0}\n"
            "    library: %s\n"
            "    provides:\n"
            "      iterators: [CountIter]\n",
            IOT_FIXTURE_SO);
    fclose(f);
    char env[512];
    snprintf(env, sizeof env, "%s:%s", IOT_BUILD_MANIFEST, path);
    setenv("MXP_MANIFEST", env, 1);
    unsetenv("MXP_PLUGIN_PATH");
    unsetenv("MXP_PACKS");
}

static inline void iot_teardown(void) {
    mxp_engine_wait_for_all();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", iot_dir);
    if (system(cmd)) { /* harmless */ }
}

/* Pixel q of sample id: pixel 0 = id & 255, pixel 1 = id >> 8, rest mixed. */
static inline uint8_t iot_pixel(uint32_t id, uint32_t q) {
    if (q == 0) return (uint8_t)(id & 0xff);
    if (q == 1) return (uint8_t)(id >> 8);
    return (uint8_t)((id * 31u + q * 7u) & 0xff);
}

static inline void iot_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void iot_write(const char *path, const uint8_t *buf, size_t len, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        cr_assert(f);
        cr_assert_eq(gzwrite(f, buf, (unsigned)len), (int)len);
        cr_assert_eq(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        cr_assert(f);
        cr_assert_eq(fwrite(buf, 1, len, f), len);
        cr_assert_eq(fclose(f), 0);
    }
}

/* Writes <dir>/img<tag>[.gz] and lab<tag>[.gz] with n samples rows x cols,
 * label = id % 10.  Paths into img/lab (128 bytes each). */
static inline void iot_mnist_files(uint32_t n, uint32_t rows, uint32_t cols, int gz, char *img, char *lab) {
    static int tag;
    tag++;
    snprintf(img, 128, "%s/img%d%s", iot_dir, tag, gz ? ".gz" : "");
    snprintf(lab, 128, "%s/lab%d%s", iot_dir, tag, gz ? ".gz" : "");
    size_t item = (size_t)rows * cols;
    size_t ilen = 16 + n * item, llen = 8 + n;
    uint8_t *ib = malloc(ilen), *lb = malloc(llen);
    cr_assert(ib && lb);
    iot_be32(ib, 0x803);
    iot_be32(ib + 4, n);
    iot_be32(ib + 8, rows);
    iot_be32(ib + 12, cols);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t q = 0; q < item; q++) ib[16 + i * item + q] = iot_pixel(i, q);
    iot_be32(lb, 0x801);
    iot_be32(lb + 4, n);
    for (uint32_t i = 0; i < n; i++) lb[8 + i] = (uint8_t)(i % 10);
    iot_write(img, ib, ilen, gz);
    iot_write(lab, lb, llen, gz);
    free(ib);
    free(lb);
}

/* Copy array nd (float32) into a new malloc'd buffer. */
static inline float *iot_floats(mxp_ndarray *nd) {
    cr_assert(nd);
    size_t bytes = mxp_ndarray_nbytes(nd);
    float *v = malloc(bytes);
    cr_assert(v);
    cr_assert_eq(mxp_ndarray_sync_copy_to(nd, v, bytes), MXP_OK, "%s", mxp_last_error());
    return v;
}

/* Sample id of row j of an MNIST batch, decoded from its first two pixels. */
static inline uint32_t iot_sample_id(const float *data, size_t item, int64_t j) {
    uint32_t lo = (uint32_t)(data[j * item] * 256.0f + 0.5f);
    uint32_t hi = (uint32_t)(data[j * item + 1] * 256.0f + 0.5f);
    return lo | hi << 8;
}

#endif /* MXP_TEST_IO_UTIL_H */
