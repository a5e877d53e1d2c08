/* png_writer.h — a minimal PNG encoder for the io-image tests (8-bit RGB
 * or gray, filter 0, one IDAT through zlib's compress): bytes written
 * independently of libpng, which the code under test decodes with.
 * Header-only (static functions); include it from one test file each. */
#ifndef MXP_TESTS_IO_IMAGE_PNG_WRITER_H
#define MXP_TESTS_IO_IMAGE_PNG_WRITER_H

#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static size_t chunk(uint8_t *out, const char *type, const uint8_t *data, uint32_t n) {
    be32(out, n);
    memcpy(out + 4, type, 4);
    if (n) memcpy(out + 8, data, n);
    uint32_t crc = (uint32_t)crc32(0, out + 4, n + 4);
    be32(out + 8 + n, crc);
    return 12 + n;
}

/* RGB (c=3) or gray (c=1) 8-bit PNG of w x h from px; returns its size. */
static size_t png_encode(const uint8_t *px, int w, int h, int c, uint8_t *out) {
    size_t n = 0;
    memcpy(out, "\x89PNG\r\n\x1a\n", 8);
    n = 8;
    uint8_t ihdr[13];
    be32(ihdr, (uint32_t)w);
    be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;
    ihdr[9] = c == 3 ? 2 : 0;
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    n += chunk(out + n, "IHDR", ihdr, 13);
    size_t raw_n = (size_t)h * (1 + (size_t)w * (size_t)c);
    uint8_t *raw = malloc(raw_n);
    for (int y = 0; y < h; y++) {
        raw[(size_t)y * (1 + (size_t)w * c)] = 0;
        memcpy(raw + (size_t)y * (1 + (size_t)w * c) + 1, px + (size_t)y * w * c, (size_t)w * c);
    }
    uLongf zn = compressBound(raw_n);
    uint8_t *z = malloc(zn);
    cr_assert_eq(compress(z, &zn, raw, raw_n), Z_OK);
    n += chunk(out + n, "IDAT", z, (uint32_t)zn);
    n += chunk(out + n, "IEND", NULL, 0);
    free(raw);
    free(z);
    return n;
}

#endif /* MXP_TESTS_IO_IMAGE_PNG_WRITER_H */
