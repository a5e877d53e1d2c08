/* test_img_bilinear.c — the augmenter's fused bilinear resize + mirror +
 * normalisation (plugins/io-image/src/img_bilinear.c, compiled into this
 * test with img_resize.c) against:
 *  - an independent float64 bilinear in this file, OpenCV's half-pixel-
 *    centre definition (source coordinate f = (d + 0.5) * n_src / n_dst -
 *    0.5 clamped to [0, n_src - 1], weights 1 - frac and frac of taps
 *    floor(f) and floor(f) + 1, the edge pixel repeated): every 8-bit
 *    output within 1 of the exact value (11-bit fixed-point weights), and
 *    the float planes equal to (v - mean) * scale / std of that byte;
 *  - img_resize's interleaved bilinear followed by a plain mirror and
 *    HWC -> CHW loop: identical bytes, so batches are what they were before
 *    the fused pass (the definition did not change);
 *  - itself under each vector kernel (AVX-512F, AVX2, scalar) the CPU has:
 *    identical bytes, so batches do not depend on the machine's ISA.
 * Random images, boxes (shrinking, enlarging, 1-pixel, whole image) and
 * sizes, gray and RGB, mirrored or not.  The vector kernels' gathers read a
 * byte past a pixel: an image ending right before an unreadable page checks
 * they never do so past the image's last byte (ASan does not see gathers). */
#include <criterion/criterion.h>

#include "../../../plugins/io-image/src/img_resize.c"
#undef WB
#undef WONE
#include "../../../plugins/io-image/src/img_bilinear.c"

#include <math.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x1234567887654321ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

/* Exact bilinear of channel k at output (dx, dy) of a bw x bh box. */
static double ref_pixel(const img_u8 *s, const int box[4], int dw, int dh, int dx, int dy, int k) {
    double fx = (dx + 0.5) * box[2] / dw - 0.5, fy = (dy + 0.5) * box[3] / dh - 0.5;
    if (fx < 0) fx = 0;
    if (fy < 0) fy = 0;
    if (fx > box[2] - 1) fx = box[2] - 1;
    if (fy > box[3] - 1) fy = box[3] - 1;
    int x0 = (int)floor(fx), y0 = (int)floor(fy);
    int x1 = x0 + 1 < box[2] ? x0 + 1 : x0, y1 = y0 + 1 < box[3] ? y0 + 1 : y0;
    double ax = fx - x0, ay = fy - y0;
#define AT(x, y) (double)s->px[((size_t)(box[1] + (y)) * (size_t)s->w + (size_t)(box[0] + (x))) * (size_t)s->c + (size_t)k]
    return (1 - ay) * ((1 - ax) * AT(x0, y0) + ax * AT(x1, y0)) + ay * ((1 - ax) * AT(x0, y1) + ax * AT(x1, y1));
#undef AT
}

typedef struct trial {
    img_u8 src;
    int box[4];
    int dw, dh, mirror;
} trial;

static trial make_trial(int c) {
    trial t;
    t.src.c = c;
    t.src.w = rnd_in(1, 90);
    t.src.h = rnd_in(1, 70);
    size_t n = (size_t)t.src.w * (size_t)t.src.h * (size_t)c;
    t.src.px = malloc(n);
    cr_assert(t.src.px);
    int smooth = rnd() % 2; /* ramps and noise: both kinds of content */
    for (size_t i = 0; i < n; i++) t.src.px[i] = smooth ? (uint8_t)((i * 7 / (size_t)c) % 256) : (uint8_t)rnd();
    switch (rnd() % 4) {
    case 0: /* whole image */
        t.box[0] = t.box[1] = 0, t.box[2] = t.src.w, t.box[3] = t.src.h;
        break;
    case 1: /* one pixel */
        t.box[0] = rnd_in(0, t.src.w - 1), t.box[1] = rnd_in(0, t.src.h - 1), t.box[2] = t.box[3] = 1;
        break;
    default:
        t.box[2] = rnd_in(1, t.src.w), t.box[3] = rnd_in(1, t.src.h);
        t.box[0] = rnd_in(0, t.src.w - t.box[2]), t.box[1] = rnd_in(0, t.src.h - t.box[3]);
    }
    t.dw = rnd_in(1, 80);
    t.dh = rnd_in(1, 60);
    if (rnd() % 5 == 0) t.dw = t.box[2], t.dh = t.box[3]; /* same size: a copy */
    t.mirror = rnd() % 2;
    return t;
}

static void *run(const trial *t, const float *mul, const float *add, int out_u8, int isa) {
    img_bilinear b;
    cr_assert_eq(img_bilinear_init(&b, t->dw, t->dh, t->src.c), 0);
    size_t n = (size_t)t->dw * (size_t)t->dh * (size_t)t->src.c * (out_u8 ? 1 : sizeof(float));
    void *out = malloc(n);
    cr_assert(out);
    img_bilinear_chw_isa(&b, &t->src, t->box, t->mirror, mul, add, out_u8, out, isa);
    img_bilinear_fini(&b);
    return out;
}

Test(img_bilinear, within_one_of_float64_bilinear_and_normalised_exactly) {
    const float mean[3] = {123.68f, 116.28f, 103.53f}, stdv[3] = {58.395f, 57.12f, 57.375f};
    float mul[3], add[3];
    for (int k = 0; k < 3; k++) mul[k] = 1.0f / stdv[k], add[k] = -mean[k] * mul[k];
    for (int trial_i = 0; trial_i < 300; trial_i++) {
        int c = trial_i % 3 == 0 ? 1 : 3;
        trial t = make_trial(c);
        uint8_t *u = run(&t, mul, add, 1, 2);
        float *f = run(&t, mul, add, 0, 2);
        for (int k = 0; k < c; k++)
            for (int y = 0; y < t.dh; y++)
                for (int x = 0; x < t.dw; x++) {
                    size_t at = ((size_t)k * (size_t)t.dh + (size_t)y) * (size_t)t.dw + (size_t)x;
                    double want = ref_pixel(&t.src, t.box, t.dw, t.dh, t.mirror ? t.dw - 1 - x : x, y, k);
                    cr_assert(fabs(u[at] - want) <= 1.0, "trial %d: %dx%d box %d,%d %dx%d -> %dx%d mirror %d: "
                              "(%d,%d,%d) = %d, float64 bilinear %.3f", trial_i, t.src.w, t.src.h, t.box[0],
                              t.box[1], t.box[2], t.box[3], t.dw, t.dh, t.mirror, k, y, x, u[at], want);
                    float norm = (float)u[at] * mul[k] + add[k]; /* the documented map of the byte */
                    cr_assert(f[at] == norm, "trial %d: float (%d,%d,%d) = %.9g, want %.9g", trial_i, k, y, x,
                              (double)f[at], (double)norm);
                    cr_assert(fabs(f[at] - (u[at] - mean[k]) / stdv[k]) < 1e-5, "normalisation (%d,%d,%d)", k, y, x);
                }
        free(u);
        free(f);
        free(t.src.px);
    }
}

Test(img_bilinear, same_bytes_as_interleaved_resize_then_chw) {
    for (int trial_i = 0; trial_i < 300; trial_i++) {
        int c = trial_i % 4 == 0 ? 1 : 3;
        trial t = make_trial(c);
        uint8_t *u = run(&t, NULL, NULL, 1, 2);
        img_u8 hwc = {malloc((size_t)t.dw * (size_t)t.dh * (size_t)c), t.dw, t.dh, c};
        cr_assert(hwc.px);
        img_resize(&t.src, t.box, &hwc, 1);
        for (int k = 0; k < c; k++)
            for (int y = 0; y < t.dh; y++)
                for (int x = 0; x < t.dw; x++) {
                    int sx = t.mirror ? t.dw - 1 - x : x;
                    uint8_t want = hwc.px[((size_t)y * (size_t)t.dw + (size_t)sx) * (size_t)c + (size_t)k];
                    uint8_t got = u[((size_t)k * (size_t)t.dh + (size_t)y) * (size_t)t.dw + (size_t)x];
                    cr_assert_eq(got, want, "trial %d (%d,%d,%d): fused %d, img_resize %d", trial_i, k, y, x, got, want);
                }
        free(hwc.px);
        free(u);
        free(t.src.px);
    }
}

Test(img_bilinear, every_vector_kernel_gives_the_scalar_bytes) {
    const float mul[3] = {0.017125f, 0.017507f, 0.017429f}, add[3] = {-2.1179f, -2.0357f, -1.8044f};
    cr_log_info("img_bilinear: this CPU runs kernel %d (2 AVX-512F, 1 AVX2, 0 scalar)", img_bilinear_isa());
    for (int trial_i = 0; trial_i < 200; trial_i++) {
        trial t = make_trial(trial_i % 2 ? 3 : 1);
        size_t n = (size_t)t.dw * (size_t)t.dh * (size_t)t.src.c * sizeof(float);
        float *ref = run(&t, mul, add, 0, 0);
        for (int isa = 1; isa <= img_bilinear_isa(); isa++) {
            float *got = run(&t, mul, add, 0, isa);
            cr_assert(!memcmp(got, ref, n), "trial %d: kernel %d differs from the scalar loop", trial_i, isa);
            free(got);
        }
        free(ref);
        free(t.src.px);
    }
}

Test(img_bilinear, never_reads_past_the_image_end) {
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(map != MAP_FAILED);
    cr_assert_eq(mprotect(map + page, (size_t)page, PROT_NONE), 0);
    for (int trial_i = 0; trial_i < 100; trial_i++) {
        trial t;
        t.src.c = trial_i % 4 == 0 ? 1 : 3;
        t.src.w = rnd_in(1, 40);
        t.src.h = rnd_in(1, 30);
        size_t n = (size_t)t.src.w * (size_t)t.src.h * (size_t)t.src.c;
        t.src.px = map + page - n; /* the last pixel's last byte is the page's last byte */
        for (size_t i = 0; i < n; i++) t.src.px[i] = (uint8_t)rnd();
        t.box[2] = rnd_in(1, t.src.w), t.box[3] = rnd_in(1, t.src.h);
        t.box[0] = t.src.w - t.box[2], t.box[1] = t.src.h - t.box[3]; /* touching the right and bottom edges */
        t.dw = rnd_in(1, 70);
        t.dh = rnd_in(1, 50);
        t.mirror = trial_i % 2;
        for (int isa = 0; isa <= img_bilinear_isa(); isa++) free(run(&t, NULL, NULL, 1, isa));
    }
    munmap(map, (size_t)page * 2);
}
