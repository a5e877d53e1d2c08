/* test_sha256.c — SHA-256 against FIPS 180-2 test vectors. */
#include <criterion/criterion.h>

#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void hex_of(const void *data, size_t n, char out[65], size_t chunk) {
    mxp_sha256 s;
    mxp__sha256_init(&s);
    for (size_t off = 0; off < n; off += chunk) mxp__sha256_update(&s, (const char *)data + off, n - off < chunk ? n - off : chunk);
    uint8_t d[32];
    mxp__sha256_final(&s, d);
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

Test(sha256, abc) {
    char h[65];
    hex_of("abc", 3, h, 3);
    cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(sha256, empty) {
    char h[65];
    hex_of("", 0, h, 1);
    cr_expect_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

Test(sha256, two_blocks_448_bits) {
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char h[65];
    hex_of(m, strlen(m), h, 7); /* odd chunking crosses block boundaries */
    cr_expect_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(sha256, million_a) {
    static char buf[1000000];
    memset(buf, 'a', sizeof buf);
    char h[65];
    hex_of(buf, sizeof buf, h, 4096);
    cr_expect_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

Test(sha256, file_matches_memory) {
    char path[] = "/tmp/mxp-sha-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("abc", f);
    fclose(f);
    char h[65];
    cr_assert_eq(mxp__sha256_file(path, h), MXP_OK);
    cr_expect_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    unlink(path);
    cr_expect_eq(mxp__sha256_file("/nonexistent/x", h), MXP_EIO);
}
