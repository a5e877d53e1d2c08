/* image_aug.h — ImageRecordIter's default augmenter (MXNet's aug_default)
 * in two steps: plan (pure: from the image size and the sample's random
 * stream, the crop box in source pixels and the mirror flag) and apply
 * (decode only that box, resize it to data_shape, mirror, normalise and
 * write CHW into the batch).
 *
 * Semantics (MXNet's, composed into one resize):
 *   resize > 0      the image is first scaled so its shorter side is
 *                   `resize` ("virtual" size vw x vh);
 *   random_resized_crop  a box of area U(min_random_area, max_random_area)
 *                   * vw*vh and aspect ratio (w/h) log-uniform in the
 *                   aspect bounds, at a uniform position, up to 10 tries;
 *                   else the largest centred box with the clamped ratio;
 *                   then resized to data_shape;
 *   rand_crop       a data_shape box (shrunk to the image if smaller) at a
 *                   uniform position;  otherwise the centred box;
 *   rand_mirror / mirror  flip left-right (probability 1/2 / always);
 *   float output    (pixel - mean_c) * scale / std_c;  uint8: raw pixels.
 * The box is mapped back to source pixels, so the image is resized once.
 * Randomness: a splitmix64 stream per sample seeded from (seed, epoch,
 * record) — independent of threads and batch position. */
#ifndef MXP_IO_IMAGE_IMAGE_AUG_H
#define MXP_IO_IMAGE_IMAGE_AUG_H

#include "img_bilinear.h"
#include "img_codec.h"

#include <stdint.h>

typedef struct aug_params {
    int c, h, w;                 /* data_shape                      */
    int resize;                  /* shorter side; <= 0 off          */
    int rand_crop, random_resized_crop;
    double min_area, max_area;   /* fractions of the image area     */
    double min_ratio, max_ratio; /* aspect ratio w/h bounds         */
    int rand_mirror, mirror;
    float mean[3], std[3], scale;
    int inter;                   /* 0 nearest, 1 bilinear, 3 area   */
    int out_u8;                  /* write uint8 pixels, no normalisation */
} aug_params;

typedef struct aug_plan {
    int x, y, w, h; /* crop box in source pixels */
    int mirror;
} aug_plan;

uint64_t aug_splitmix64(uint64_t *s);
/* The stream of one sample. */
uint64_t aug_seed(uint64_t seed, uint64_t epoch, uint64_t record);
/* Uniform double in [0, 1). */
double aug_uniform(uint64_t *s);

void aug_plan_make(const aug_params *p, int src_w, int src_h, uint64_t *rng, aug_plan *out);

/* Per-thread scratch: the decoder, the fused bilinear resize's tables and
 * the resized image (nearest and area resizing). */
typedef struct aug_worker {
    img_dec *dec;
    img_bilinear bilinear;
    uint8_t *resized;
} aug_worker;

int aug_worker_init(aug_worker *w, const aug_params *p);
void aug_worker_fini(aug_worker *w);

/* Decode img[0..n), augment with rng, write one sample (c*h*w floats or
 * bytes) at dst.  Returns 0 or -1 with err. */
int aug_apply(aug_worker *w, const aug_params *p, const uint8_t *img, size_t n, uint64_t *rng, void *dst,
              char *err, size_t errlen);

#endif /* MXP_IO_IMAGE_IMAGE_AUG_H */
