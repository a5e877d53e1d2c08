/* fuzz_image.c — libFuzzer harness for the io-image decode path: the
 * header probe, JPEG/PNG decoding (full, and cropped + DCT-scaled as
 * ImageRecordIter asks), resizing and the augmenter that writes a sample
 * (plugins/io-image/src/img_codec.c, img_resize.c, image_aug.c, linked in
 * by the pack's pack.mk).  libjpeg-turbo and libpng are the system's (not
 * instrumented): this checks our use of them — error handling through
 * longjmp, buffer sizes, crop arithmetic — not their internals.
 * Properties: no crash or sanitizer report; a failure returns -1 with a
 * message; a success gives the probed size (full decode) and a crop box
 * inside the decoded image.  Images over 4 Mpixel are skipped after the
 * probe (time and memory; the pack itself allows 256 Mpixel). */
#include "../../plugins/io-image/src/image_aug.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static img_dec *dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dec && !(dec = img_dec_new())) abort();
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    int w, h;
    char fmt, err[512];
    err[0] = 0;
    if (img_probe(dec, buf, size, &w, &h, &fmt, err, sizeof err)) {
        if (!err[0]) abort();
        free(buf);
        return 0;
    }
    if (w <= 0 || h <= 0 || (int64_t)w * h > 4 << 20) {
        free(buf);
        return 0;
    }
    for (int c = 1; c <= 3; c += 2) {
        img_u8 out;
        int box[4];
        err[0] = 0;
        if (img_decode(dec, buf, size, c, NULL, &out, box, err, sizeof err)) {
            if (!err[0]) abort();
            continue;
        }
        if (out.w != w || out.h != h || out.c != c) abort();
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < (size_t)w * h * c; i++) sink ^= out.px[i];
        (void)sink;
    }
    aug_params p;
    memset(&p, 0, sizeof p);
    p.c = 3;
    p.h = 7;
    p.w = 9;
    p.resize = -1;
    p.random_resized_crop = 1;
    p.min_area = 0.05;
    p.max_area = 1;
    p.min_ratio = 0.5;
    p.max_ratio = 2;
    p.rand_mirror = 1;
    p.mean[0] = p.mean[1] = p.mean[2] = 0;
    p.std[0] = p.std[1] = p.std[2] = 1;
    p.scale = 1;
    p.inter = size % 2 ? 1 : 3;
    aug_worker wk;
    if (aug_worker_init(&wk, &p)) abort();
    float sample[3 * 7 * 9];
    uint64_t rng = size * 0x9E3779B97F4A7C15ull;
    err[0] = 0;
    if (aug_apply(&wk, &p, buf, size, &rng, sample, err, sizeof err) && !err[0]) abort();
    aug_worker_fini(&wk);
    free(buf);
    return 0;
}
