/* img_resize.c — resizing a box of an 8-bit HWC image (img_codec.h):
 * nearest, bilinear, and area (box average) as MXNet's inter_method 0, 1
 * and 3.  Coordinates follow OpenCV (pixel centres aligned:
 * sx = (dx + 0.5) * scale - 0.5, clamped to the box), so results match
 * what cv::resize gives within rounding.  Bilinear precomputes per-column
 * taps and interpolates in fixed point (11-bit weights), which is exact to
 * +-1 of the float result.  No allocation beyond two small tap tables on
 * the stack or heap; never reads outside the box. */
#include "img_codec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WB 11
#define WONE (1 << WB)

static void resize_nearest(const img_u8 *s, const int b[4], img_u8 *d) {
    int c = s->c;
    for (int y = 0; y < d->h; y++) {
        int sy = (int)floor((y + 0.5) * b[3] / (double)d->h);
        if (sy >= b[3]) sy = b[3] - 1;
        const uint8_t *row = s->px + ((size_t)(b[1] + sy) * (size_t)s->w + (size_t)b[0]) * (size_t)c;
        uint8_t *out = d->px + (size_t)y * (size_t)d->w * (size_t)c;
        for (int x = 0; x < d->w; x++) {
            int sx = (int)floor((x + 0.5) * b[2] / (double)d->w);
            if (sx >= b[2]) sx = b[2] - 1;
            memcpy(out + (size_t)x * (size_t)c, row + (size_t)sx * (size_t)c, (size_t)c);
        }
    }
}

/* Source index and weight of the second tap for destination i (the
 * definition in img_bilinear.h; img_bilinear.c's fused pass uses it too). */
void img_bilinear_taps(int n_dst, int n_src, int32_t *i0, int32_t *w1) {
    double scale = (double)n_src / n_dst;
    for (int i = 0; i < n_dst; i++) {
        double f = (i + 0.5) * scale - 0.5;
        if (f < 0) f = 0;
        int k = (int)f;
        double frac = f - k;
        if (k >= n_src - 1) {
            k = n_src - 1;
            frac = 0;
        }
        i0[i] = k;
        w1[i] = (int32_t)lround(frac * WONE);
    }
}

static void resize_bilinear(const img_u8 *s, const int b[4], img_u8 *d) {
    int c = s->c;
    int32_t *xi = malloc(sizeof(int32_t) * 2 * (size_t)d->w);
    int32_t *yi = malloc(sizeof(int32_t) * 2 * (size_t)d->h);
    if (!xi || !yi) { /* degrade to nearest rather than fail */
        free(xi);
        free(yi);
        resize_nearest(s, b, d);
        return;
    }
    int32_t *xw = xi + d->w, *yw = yi + d->h;
    img_bilinear_taps(d->w, b[2], xi, xw);
    img_bilinear_taps(d->h, b[3], yi, yw);
    size_t sstride = (size_t)s->w * (size_t)c;
    const uint8_t *base = s->px + (size_t)b[1] * sstride + (size_t)b[0] * (size_t)c;
    for (int y = 0; y < d->h; y++) {
        const uint8_t *r0 = base + (size_t)yi[y] * sstride;
        const uint8_t *r1 = yi[y] + 1 < b[3] ? r0 + sstride : r0;
        int wy = yw[y];
        uint8_t *out = d->px + (size_t)y * (size_t)d->w * (size_t)c;
        for (int x = 0; x < d->w; x++) {
            int x0 = xi[x], wx = xw[x];
            int x1 = x0 + 1 < b[2] ? x0 + 1 : x0;
            const uint8_t *a0 = r0 + (size_t)x0 * (size_t)c, *a1 = r0 + (size_t)x1 * (size_t)c;
            const uint8_t *c0 = r1 + (size_t)x0 * (size_t)c, *c1 = r1 + (size_t)x1 * (size_t)c;
            for (int k = 0; k < c; k++) {
                int top = a0[k] * (WONE - wx) + a1[k] * wx;
                int bot = c0[k] * (WONE - wx) + c1[k] * wx;
                int v = (top * (WONE - wy) + bot * wy + (1 << (2 * WB - 1))) >> (2 * WB);
                out[(size_t)x * (size_t)c + (size_t)k] = (uint8_t)v;
            }
        }
    }
    free(xi);
    free(yi);
}

/* Area: each destination pixel averages the source pixels it covers,
 * partial pixels weighted by their covered fraction (shrinking only). */
static void resize_area(const img_u8 *s, const int b[4], img_u8 *d) {
    if (d->w > b[2] || d->h > b[3]) {
        resize_bilinear(s, b, d);
        return;
    }
    int c = s->c;
    double sx = (double)b[2] / d->w, sy = (double)b[3] / d->h;
    for (int y = 0; y < d->h; y++) {
        double fy0 = y * sy, fy1 = (y + 1) * sy;
        uint8_t *out = d->px + (size_t)y * (size_t)d->w * (size_t)c;
        for (int x = 0; x < d->w; x++) {
            double fx0 = x * sx, fx1 = (x + 1) * sx;
            double acc[4] = {0, 0, 0, 0}, wsum = 0;
            for (int yy = (int)fy0; yy < b[3] && yy < fy1; yy++) {
                double wy = fmin(fy1, yy + 1.0) - fmax(fy0, (double)yy);
                if (wy <= 0) continue;
                const uint8_t *row = s->px + ((size_t)(b[1] + yy) * (size_t)s->w + (size_t)b[0]) * (size_t)c;
                for (int xx = (int)fx0; xx < b[2] && xx < fx1; xx++) {
                    double wx = fmin(fx1, xx + 1.0) - fmax(fx0, (double)xx);
                    if (wx <= 0) continue;
                    for (int k = 0; k < c; k++) acc[k] += wx * wy * row[(size_t)xx * (size_t)c + (size_t)k];
                    wsum += wx * wy;
                }
            }
            for (int k = 0; k < c; k++) out[(size_t)x * (size_t)c + (size_t)k] = (uint8_t)lround(acc[k] / wsum);
        }
    }
}

void img_resize(const img_u8 *src, const int box[4], img_u8 *dst, int inter) {
    if (box[2] == dst->w && box[3] == dst->h) { /* plain copy of the box */
        size_t row = (size_t)dst->w * (size_t)dst->c;
        for (int y = 0; y < dst->h; y++)
            memcpy(dst->px + (size_t)y * row,
                   src->px + ((size_t)(box[1] + y) * (size_t)src->w + (size_t)box[0]) * (size_t)src->c, row);
        return;
    }
    if (inter == 0) resize_nearest(src, box, dst);
    else if (inter == 3) resize_area(src, box, dst);
    else resize_bilinear(src, box, dst);
}
