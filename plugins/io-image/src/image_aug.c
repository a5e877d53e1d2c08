/* image_aug.c — the default augmenter of ImageRecordIter (see
 * image_aug.h): crop box planning, one cropped decode, one resize, mirror
 * and normalisation into the batch.  Invariant: the planned box is inside
 * the source image and at least 1x1. */
#include "image_aug.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t aug_splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t aug_seed(uint64_t seed, uint64_t epoch, uint64_t record) {
    uint64_t s = seed ^ 0x5DEECE66Dull;
    uint64_t a = aug_splitmix64(&s);
    s = a ^ (epoch * 0xD1B54A32D192ED03ull);
    uint64_t b = aug_splitmix64(&s);
    s = b ^ (record * 0x8CB92BA72F3D8DD7ull);
    return aug_splitmix64(&s);
}

double aug_uniform(uint64_t *s) { return (double)(aug_splitmix64(s) >> 11) * (1.0 / 9007199254740992.0); }

static int uniform_int(uint64_t *s, int lo, int hi) { /* [lo, hi] */
    if (hi <= lo) return lo;
    return lo + (int)(aug_uniform(s) * (double)(hi - lo + 1));
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void aug_plan_make(const aug_params *p, int src_w, int src_h, uint64_t *rng, aug_plan *out) {
    double vw = src_w, vh = src_h;
    if (p->resize > 0) {
        double s = (double)p->resize / (src_w < src_h ? src_w : src_h);
        vw = floor(src_w * s + 0.5);
        vh = floor(src_h * s + 0.5);
        if (vw < 1) vw = 1;
        if (vh < 1) vh = 1;
    }
    double bx = 0, by = 0, bw = vw, bh = vh;
    if (p->random_resized_crop) {
        int found = 0;
        double lr0 = log(p->min_ratio), lr1 = log(p->max_ratio);
        for (int t = 0; t < 10 && !found; t++) {
            double area = vw * vh * (p->min_area + (p->max_area - p->min_area) * aug_uniform(rng));
            double ratio = exp(lr0 + (lr1 - lr0) * aug_uniform(rng));
            double cw = floor(sqrt(area * ratio) + 0.5), ch = floor(sqrt(area / ratio) + 0.5);
            if (cw >= 1 && ch >= 1 && cw <= vw && ch <= vh) {
                bw = cw;
                bh = ch;
                bx = uniform_int(rng, 0, (int)(vw - cw));
                by = uniform_int(rng, 0, (int)(vh - ch));
                found = 1;
            }
        }
        if (!found) { /* centred, ratio clamped to the bounds */
            double r = vw / vh;
            if (r < p->min_ratio) bh = floor(vw / p->min_ratio);
            else if (r > p->max_ratio) bw = floor(vh * p->max_ratio);
            bx = floor((vw - bw) / 2);
            by = floor((vh - bh) / 2);
        }
    } else {
        bw = p->w < vw ? p->w : vw;
        bh = p->h < vh ? p->h : vh;
        if (p->rand_crop) {
            bx = uniform_int(rng, 0, (int)(vw - bw));
            by = uniform_int(rng, 0, (int)(vh - bh));
        } else {
            bx = floor((vw - bw) / 2);
            by = floor((vh - bh) / 2);
        }
    }
    int mirror = p->mirror;
    if (p->rand_mirror) mirror = aug_uniform(rng) < 0.5;
    /* Back to source pixels. */
    double sx = src_w / vw, sy = src_h / vh;
    int x0 = clampi((int)floor(bx * sx + 0.5), 0, src_w - 1);
    int y0 = clampi((int)floor(by * sy + 0.5), 0, src_h - 1);
    int x1 = clampi((int)floor((bx + bw) * sx + 0.5), x0 + 1, src_w);
    int y1 = clampi((int)floor((by + bh) * sy + 0.5), y0 + 1, src_h);
    out->x = x0;
    out->y = y0;
    out->w = x1 - x0;
    out->h = y1 - y0;
    out->mirror = mirror;
}

int aug_worker_init(aug_worker *w, const aug_params *p) {
    memset(w, 0, sizeof *w);
    w->dec = img_dec_new();
    w->resized = malloc((size_t)p->c * (size_t)p->h * (size_t)p->w);
    if (!w->dec || !w->resized || img_bilinear_init(&w->bilinear, p->w, p->h, p->c)) {
        aug_worker_fini(w);
        return -1;
    }
    return 0;
}

void aug_worker_fini(aug_worker *w) {
    img_dec_free(w->dec);
    img_bilinear_fini(&w->bilinear);
    free(w->resized);
    memset(w, 0, sizeof *w);
}

/* (v - mean) * scale / std as v * mul + add. */
static void affine(const aug_params *p, float mul[3], float add[3]) {
    for (int k = 0; k < 3; k++) {
        mul[k] = k < p->c ? p->scale / p->std[k] : 0;
        add[k] = k < p->c ? -p->mean[k] * mul[k] : 0;
    }
}

/* HWC bytes -> CHW output, mirrored and normalised (after nearest or area
 * resizing; bilinear goes through img_bilinear_chw in one pass). */
static void write_chw(const aug_params *p, const uint8_t *src, int mirror, void *dst) {
    int c = p->c, h = p->h, w = p->w;
    size_t plane = (size_t)h * (size_t)w;
    if (p->out_u8) {
        uint8_t *o = dst;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const uint8_t *px = src + ((size_t)y * (size_t)w + (size_t)(mirror ? w - 1 - x : x)) * (size_t)c;
                for (int k = 0; k < c; k++) o[(size_t)k * plane + (size_t)y * (size_t)w + (size_t)x] = px[k];
            }
        return;
    }
    float *o = dst;
    float mul[3], add[3];
    affine(p, mul, add);
    for (int y = 0; y < h; y++) {
        const uint8_t *row = src + (size_t)y * (size_t)w * (size_t)c;
        for (int k = 0; k < c; k++) {
            float *orow = o + (size_t)k * plane + (size_t)y * (size_t)w;
            float m = mul[k], a = add[k];
            if (mirror)
                for (int x = 0; x < w; x++) orow[x] = (float)row[(size_t)(w - 1 - x) * (size_t)c + (size_t)k] * m + a;
            else
                for (int x = 0; x < w; x++) orow[x] = (float)row[(size_t)x * (size_t)c + (size_t)k] * m + a;
        }
    }
}

int aug_apply(aug_worker *w, const aug_params *p, const uint8_t *img, size_t n, uint64_t *rng, void *dst, char *err,
              size_t errlen) {
    int sw, sh;
    char fmt;
    if (img_probe(w->dec, img, n, &sw, &sh, &fmt, err, errlen)) return -1;
    if (sw <= 0 || sh <= 0) {
        snprintf(err, errlen, "image has size %dx%d", sw, sh);
        return -1;
    }
    aug_plan plan;
    aug_plan_make(p, sw, sh, rng, &plan);
    img_roi roi = {plan.x, plan.y, plan.w, plan.h, p->w, p->h};
    img_u8 dec;
    int box[4];
    if (img_decode(w->dec, img, n, p->c, &roi, &dec, box, err, errlen)) return -1;
    if (p->inter == 1 || (box[2] == p->w && box[3] == p->h)) { /* bilinear, or a copy: exact either way */
        float mul[3], add[3];
        affine(p, mul, add);
        img_bilinear_chw(&w->bilinear, &dec, box, plan.mirror, mul, add, p->out_u8, dst);
        return 0;
    }
    img_u8 out = {w->resized, p->w, p->h, p->c};
    img_resize(&dec, box, &out, p->inter);
    write_chw(p, w->resized, plan.mirror, dst);
    return 0;
}
