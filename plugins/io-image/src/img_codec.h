/* img_codec.h — JPEG and PNG in memory to 8-bit pixels and back, for the
 * io-image pack (ImageRecordIter) and the `mxplug im2rec` command, which
 * links the same objects.
 *
 * Pixels are interleaved rows (HWC), c = 1 (gray) or 3 (RGB), stride w*c.
 * JPEG decoding uses libjpeg-turbo's libjpeg API rather than TurboJPEG's
 * because libjpeg-turbo 2.1 (Debian 12) offers row skipping and column
 * cropping only there: img_decode can decode at a DCT scale 1/2, 1/4, 1/8
 * (the smallest one that keeps a region of interest at least a target size)
 * and only the scanlines and MCU columns covering that region.  Gray JPEGs
 * become RGB on request, CMYK/YCCK (Adobe, inverted) are converted to RGB.
 * PNG: libpng, any bit depth/palette/alpha reduced to 8-bit gray or RGB.
 * Encoding: JPEG through TurboJPEG (4:2:0, given quality), PNG with libpng.
 * An img_dec holds one thread's decoder state; never share one between
 * threads.  Errors return nonzero with a message in err (never a longjmp
 * escaping, never abort). */
#ifndef MXP_IO_IMAGE_IMG_CODEC_H
#define MXP_IO_IMAGE_IMG_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct img_u8 {
    uint8_t *px; /* h * w * c, malloc'd (or owned by an img_dec)        */
    int w, h, c;
} img_u8;

/* Region of interest in source pixel coordinates and the size it will be
 * resized to: lets the decoder pick a DCT scale and skip rows/columns.
 * w == 0 means the whole image; want_w == 0 disables scaling. */
typedef struct img_roi {
    int x, y, w, h;
    int want_w, want_h;
} img_roi;

typedef struct img_dec img_dec;

img_dec *img_dec_new(void);
void img_dec_free(img_dec *d);

/* Format and size from the headers only.  fmt: 'J' JPEG, 'P' PNG.
 * Returns 0, or -1 with err for an unknown or corrupt header. */
int img_probe(img_dec *d, const uint8_t *buf, size_t n, int *out_w, int *out_h, char *out_fmt, char *err,
              size_t errlen);

/* Decode buf to c channels (1 or 3).  With roi (may be NULL): *out holds
 * at least the region, scaled by 1/out_scale_denom (1, 2, 4, 8); *out_box
 * gets the region's box in out's pixels ([x, y, w, h]).  out->px is owned
 * by d and valid until its next decode.  Returns 0 or -1 with err. */
int img_decode(img_dec *d, const uint8_t *buf, size_t n, int c, const img_roi *roi, img_u8 *out,
               int out_box[4], char *err, size_t errlen);

/* Encode src as JPEG (quality 1..100) or PNG into a malloc'd buffer. */
int img_encode_jpeg(const img_u8 *src, int quality, uint8_t **out, size_t *out_n, char *err, size_t errlen);
int img_encode_png(const img_u8 *src, uint8_t **out, size_t *out_n, char *err, size_t errlen);

/* Resize box (x, y, w, h) of src to dst (dst->w/h/c set, px allocated by
 * the caller, c equal).  inter: 0 nearest, 1 bilinear, 2 bicubic is
 * refused by the caller, 3 area (box average when shrinking, bilinear
 * when growing), as MXNet's inter_method.  Pixel centres are aligned
 * (OpenCV's convention: sx = (dx + 0.5) * w_src / w_dst - 0.5). */
void img_resize(const img_u8 *src, const int box[4], img_u8 *dst, int inter);

/* Bilinear taps of n_dst outputs over n_src inputs (OpenCV's half-pixel
 * centres, clamped; the definition in img_bilinear.h): first source index
 * i0[i] and the second tap's 11-bit weight w1[i] (the first's is 2048 - w1). */
void img_bilinear_taps(int n_dst, int n_src, int32_t *i0, int32_t *w1);

#endif /* MXP_IO_IMAGE_IMG_CODEC_H */
