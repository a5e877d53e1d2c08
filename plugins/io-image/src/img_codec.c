/* img_codec.c — JPEG (libjpeg-turbo) and PNG (libpng) decoding and
 * encoding in memory (see img_codec.h).  libjpeg reports fatal errors by
 * calling error_exit, which here longjmps back into img_decode/img_probe
 * (the only functions that call libjpeg), so a corrupt file is an error
 * return, never an exit.  Invariant: after any return the decompressor is
 * idle (jpeg_abort_decompress), ready for the next image. */
#include "img_codec.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

typedef struct jerr_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr_mgr;

struct img_dec {
    struct jpeg_decompress_struct cinfo;
    jerr_mgr jerr;
    uint8_t *buf;   /* output pixels */
    size_t cap;
    uint8_t *row;   /* one CMYK row  */
    size_t row_cap;
};

static void on_error_exit(j_common_ptr cinfo) {
    jerr_mgr *e = (jerr_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (corrupt data the library can conceal) are not printed. */
static void on_emit_message(j_common_ptr cinfo, int level) {
    (void)cinfo;
    (void)level;
}

img_dec *img_dec_new(void) {
    img_dec *volatile d = calloc(1, sizeof *d); /* volatile: used after longjmp */
    if (!d) return NULL;
    d->cinfo.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = on_error_exit;
    d->jerr.pub.emit_message = on_emit_message;
    if (setjmp(d->jerr.jb)) {
        free(d);
        return NULL;
    }
    jpeg_create_decompress(&d->cinfo);
    return d;
}

void img_dec_free(img_dec *d) {
    if (!d) return;
    jpeg_destroy_decompress(&d->cinfo);
    free(d->buf);
    free(d->row);
    free(d);
}

static int grow(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    uint8_t *q = realloc(*p, need);
    if (!q) return -1;
    *p = q;
    *cap = need;
    return 0;
}

static int is_jpeg(const uint8_t *b, size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
static int is_png(const uint8_t *b, size_t n) { return n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8); }

/* ------------------------------------------------------------------ PNG */
static int png_decode(img_dec *d, const uint8_t *buf, size_t n, int c, int probe, img_u8 *out, char *err,
                      size_t errlen) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, buf, n)) {
        snprintf(err, errlen, "corrupt PNG: %s", im.message);
        png_image_free(&im);
        return -1;
    }
    out->w = (int)im.width;
    out->h = (int)im.height;
    out->c = c;
    if (probe) {
        png_image_free(&im);
        return 0;
    }
    im.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    size_t bytes = (size_t)im.width * im.height * (size_t)c;
    if ((uint64_t)im.width * im.height > ((uint64_t)1 << 28) || grow(&d->buf, &d->cap, bytes ? bytes : 1)) {
        snprintf(err, errlen, "PNG of %ux%u is too large", im.width, im.height);
        png_image_free(&im);
        return -1;
    }
    if (!png_image_finish_read(&im, NULL, d->buf, 0, NULL)) {
        snprintf(err, errlen, "corrupt PNG: %s", im.message);
        png_image_free(&im);
        return -1;
    }
    out->px = d->buf;
    return 0;
}

/* ----------------------------------------------------------------- JPEG */
static void cmyk_to_out(const uint8_t *src, uint8_t *dst, int w, int c, int inverted) {
    for (int x = 0; x < w; x++) {
        int C = src[4 * x], M = src[4 * x + 1], Y = src[4 * x + 2], K = src[4 * x + 3];
        if (!inverted) {
            C = 255 - C;
            M = 255 - M;
            Y = 255 - Y;
            K = 255 - K;
        }
        int r = (C * K + 127) / 255, g = (M * K + 127) / 255, b = (Y * K + 127) / 255;
        if (c == 3) {
            dst[3 * x] = (uint8_t)r;
            dst[3 * x + 1] = (uint8_t)g;
            dst[3 * x + 2] = (uint8_t)b;
        } else {
            dst[x] = (uint8_t)((299 * r + 587 * g + 114 * b + 500) / 1000);
        }
    }
}

int img_probe(img_dec *d, const uint8_t *buf, size_t n, int *out_w, int *out_h, char *out_fmt, char *err,
              size_t errlen) {
    *out_w = *out_h = 0;
    *out_fmt = 0;
    if (is_png(buf, n)) {
        img_u8 o;
        if (png_decode(d, buf, n, 3, 1, &o, err, errlen)) return -1;
        *out_w = o.w;
        *out_h = o.h;
        *out_fmt = 'P';
        return 0;
    }
    if (!is_jpeg(buf, n)) {
        snprintf(err, errlen, "not a JPEG or PNG image (%zu bytes)", n);
        return -1;
    }
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (setjmp(d->jerr.jb)) {
        jpeg_abort_decompress(ci);
        snprintf(err, errlen, "corrupt JPEG: %s", d->jerr.msg);
        return -1;
    }
    jpeg_mem_src(ci, buf, (unsigned long)n);
    jpeg_read_header(ci, TRUE);
    *out_w = (int)ci->image_width;
    *out_h = (int)ci->image_height;
    *out_fmt = 'J';
    jpeg_abort_decompress(ci);
    return 0;
}

/* Largest denominator in {8, 4, 2} keeping the region >= the wanted size. */
static int pick_denom(const img_roi *r) {
    if (!r || r->want_w <= 0 || r->want_h <= 0) return 1;
    for (int dn = 8; dn > 1; dn /= 2)
        if ((r->w + dn - 1) / dn >= r->want_w && (r->h + dn - 1) / dn >= r->want_h) return dn;
    return 1;
}

static int jpeg_decode(img_dec *d, const uint8_t *buf, size_t n, int c, const img_roi *roi, img_u8 *out,
                       int box[4], char *err, size_t errlen) {
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (setjmp(d->jerr.jb)) {
        jpeg_abort_decompress(ci);
        snprintf(err, errlen, "corrupt JPEG: %s", d->jerr.msg);
        return -1;
    }
    jpeg_mem_src(ci, buf, (unsigned long)n);
    jpeg_read_header(ci, TRUE);
    int W = (int)ci->image_width, H = (int)ci->image_height;
    if ((uint64_t)W * (uint64_t)H > ((uint64_t)1 << 28)) {
        jpeg_abort_decompress(ci);
        snprintf(err, errlen, "JPEG of %dx%d is too large", W, H);
        return -1;
    }
    img_roi r = {0, 0, W, H, 0, 0};
    if (roi && roi->w > 0 && roi->h > 0) r = *roi;
    if (r.x < 0 || r.y < 0 || r.w <= 0 || r.h <= 0 || r.x + r.w > W || r.y + r.h > H) {
        jpeg_abort_decompress(ci);
        snprintf(err, errlen, "region %dx%d+%d+%d outside the %dx%d JPEG", r.w, r.h, r.x, r.y, W, H);
        return -1;
    }
    int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : (c == 1 ? JCS_GRAYSCALE : JCS_RGB);
    int dn = pick_denom(roi ? &r : NULL);
    ci->scale_num = 1;
    ci->scale_denom = (unsigned)dn;
    jpeg_start_decompress(ci);
    int ow = (int)ci->output_width, oh = (int)ci->output_height;
    /* The region in scaled pixels. */
    int sx0 = r.x / dn, sy0 = r.y / dn;
    int sx1 = (r.x + r.w + dn - 1) / dn, sy1 = (r.y + r.h + dn - 1) / dn;
    if (sx1 > ow) sx1 = ow;
    if (sy1 > oh) sy1 = oh;
    if (sx0 >= sx1) sx0 = sx1 - 1;
    if (sy0 >= sy1) sy0 = sy1 - 1;
    JDIMENSION xoff = (JDIMENSION)sx0, cw = (JDIMENSION)(sx1 - sx0);
    if ((int)cw < ow) jpeg_crop_scanline(ci, &xoff, &cw);
    else xoff = 0, cw = (JDIMENSION)ow;
    int comps = ci->output_components;
    size_t stride = (size_t)ci->output_width * (size_t)comps;
    size_t rows = (size_t)(sy1 - sy0);
    if (grow(&d->buf, &d->cap, (size_t)ci->output_width * rows * (size_t)c) ||
        (cmyk && grow(&d->row, &d->row_cap, stride))) {
        jpeg_abort_decompress(ci);
        snprintf(err, errlen, "out of memory decoding a %dx%d JPEG", W, H);
        return -1;
    }
    if (sy0 > 0) jpeg_skip_scanlines(ci, (JDIMENSION)sy0);
    int inverted = ci->saw_Adobe_marker;
    for (size_t y = 0; y < rows; y++) {
        uint8_t *dst = d->buf + y * (size_t)ci->output_width * (size_t)c;
        JSAMPROW rp = cmyk ? d->row : dst;
        if (jpeg_read_scanlines(ci, &rp, 1) != 1) {
            jpeg_abort_decompress(ci);
            snprintf(err, errlen, "corrupt JPEG: scanline %zu missing", (size_t)sy0 + y);
            return -1;
        }
        if (cmyk) cmyk_to_out(d->row, dst, (int)ci->output_width, c, inverted);
    }
    out->px = d->buf;
    out->w = (int)ci->output_width;
    out->h = (int)rows;
    out->c = c;
    box[0] = sx0 - (int)xoff;
    box[1] = 0;
    box[2] = sx1 - sx0;
    box[3] = sy1 - sy0;
    /* Keep the box inside the cropped width (crop_scanline may widen). */
    if (box[0] + box[2] > out->w) box[2] = out->w - box[0];
    jpeg_abort_decompress(ci);
    return 0;
}

int img_decode(img_dec *d, const uint8_t *buf, size_t n, int c, const img_roi *roi, img_u8 *out, int out_box[4],
               char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (errlen) err[0] = '\0';
    if (c != 1 && c != 3) {
        snprintf(err, errlen, "%d channels requested (1 or 3)", c);
        return -1;
    }
    if (is_jpeg(buf, n)) return jpeg_decode(d, buf, n, c, roi, out, out_box, err, errlen);
    if (is_png(buf, n)) {
        if (png_decode(d, buf, n, c, 0, out, err, errlen)) return -1;
        if (roi && roi->w > 0 && roi->h > 0) {
            if (roi->x < 0 || roi->y < 0 || roi->x + roi->w > out->w || roi->y + roi->h > out->h) {
                snprintf(err, errlen, "region %dx%d+%d+%d outside the %dx%d PNG", roi->w, roi->h, roi->x, roi->y,
                         out->w, out->h);
                return -1;
            }
            out_box[0] = roi->x;
            out_box[1] = roi->y;
            out_box[2] = roi->w;
            out_box[3] = roi->h;
        } else {
            out_box[0] = out_box[1] = 0;
            out_box[2] = out->w;
            out_box[3] = out->h;
        }
        return 0;
    }
    snprintf(err, errlen, "not a JPEG or PNG image (%zu bytes, starts %02x %02x)", n, n > 0 ? buf[0] : 0,
             n > 1 ? buf[1] : 0);
    return -1;
}

/* ------------------------------------------------------------- encoding */
int img_encode_jpeg(const img_u8 *src, int quality, uint8_t **out, size_t *out_n, char *err, size_t errlen) {
    *out = NULL;
    *out_n = 0;
    tjhandle tj = tjInitCompress();
    if (!tj) {
        snprintf(err, errlen, "TurboJPEG: %s", tjGetErrorStr2(NULL));
        return -1;
    }
    unsigned char *jb = NULL;
    unsigned long jn = 0;
    int pf = src->c == 1 ? TJPF_GRAY : TJPF_RGB;
    int samp = src->c == 1 ? TJSAMP_GRAY : TJSAMP_420;
    int rc = tjCompress2(tj, src->px, src->w, 0, src->h, pf, &jb, &jn, samp, quality, 0);
    if (rc != 0) {
        snprintf(err, errlen, "JPEG encoding failed: %s", tjGetErrorStr2(tj));
        tjFree(jb);
        tjDestroy(tj);
        return -1;
    }
    *out = malloc(jn);
    if (*out) {
        memcpy(*out, jb, jn);
        *out_n = jn;
    }
    tjFree(jb);
    tjDestroy(tj);
    if (!*out) {
        snprintf(err, errlen, "out of memory for a %lu-byte JPEG", jn);
        return -1;
    }
    return 0;
}

int img_encode_png(const img_u8 *src, uint8_t **out, size_t *out_n, char *err, size_t errlen) {
    *out = NULL;
    *out_n = 0;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)src->w;
    im.height = (png_uint_32)src->h;
    im.format = src->c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    if (!png_image_write_to_memory(&im, NULL, &n, 0, src->px, 0, NULL)) {
        snprintf(err, errlen, "PNG encoding failed: %s", im.message);
        return -1;
    }
    *out = malloc(n ? n : 1);
    if (!*out) {
        snprintf(err, errlen, "out of memory for a PNG");
        return -1;
    }
    if (!png_image_write_to_memory(&im, *out, &n, 0, src->px, 0, NULL)) {
        snprintf(err, errlen, "PNG encoding failed: %s", im.message);
        free(*out);
        *out = NULL;
        return -1;
    }
    *out_n = n;
    return 0;
}
