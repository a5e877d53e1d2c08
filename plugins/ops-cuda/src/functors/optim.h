/* optim.h — optimizer update functors for the GPU impls of ops-basic's
 * sgd_update, sgd_mom_update, adam_update and rmsprop_update, the same
 * float expressions in the same order as ops-basic's CPU kernels (MXNet 1.x
 * formulas):
 *   sgd:     w = (1 - lr wd) w - lr clip(rescale g)
 *   sgd_mom: mom = momentum mom - (lr wd) w - lr clip(rescale g); w += mom
 *   adam:    g' = clip(rescale g + wd w); mean = b1 mean + (1-b1) g';
 *            var = b2 var + (1-b2) g'^2; w -= lr mean / (sqrt(var) + eps)
 *   rmsprop: g' = clip(rescale g + wd w); n = (1-gamma1) g'^2 + gamma1 n;
 *            w -= lr g' / sqrt(n + eps), then clip to clip_weights if >= 0
 * clip(x) = max(-c, min(c, x)) when c >= 0. */
#ifndef OPS_CUDA_OPTIM_H
#define OPS_CUDA_OPTIM_H

#include "fn_common.h"

/* Hyperparameters as floats (the CPU kernels cast them to float too). */
typedef struct cu_opt_hp {
    float lr, wd, rescale, clip;
    float d;   /* momentum, beta1 or gamma1 */
    float e2;  /* beta2 (adam) or epsilon (rmsprop) */
    float f;   /* epsilon (adam) or clip_weights (rmsprop) */
} cu_opt_hp;

CUFN float cu_clip_grad(float x, float c) { return c >= 0.0f ? (x > c ? c : x < -c ? -c : x) : x; }

CUFN float cu_sgd_w(const cu_opt_hp *h, float w, float g) {
    return (1.0f - h->lr * h->wd) * w - h->lr * cu_clip_grad(h->rescale * g, h->clip);
}

/* The new momentum; the new weight is w + that. */
CUFN float cu_sgd_mom_m(const cu_opt_hp *h, float mom, float w, float g) {
    float lw = h->lr * h->wd;
    return h->d * mom - lw * w - h->lr * cu_clip_grad(h->rescale * g, h->clip);
}

/* clip(rescale g + wd w), shared by adam and rmsprop. */
CUFN float cu_grad_wd(const cu_opt_hp *h, float w, float g) { return cu_clip_grad(h->rescale * g + h->wd * w, h->clip); }

CUFN float cu_adam_mean(const cu_opt_hp *h, float mean, float w, float g) {
    return h->d * mean + (1.0f - h->d) * cu_grad_wd(h, w, g);
}
CUFN float cu_adam_var(const cu_opt_hp *h, float var, float w, float g) {
    float gg = cu_grad_wd(h, w, g);
    return h->e2 * var + (1.0f - h->e2) * gg * gg;
}
CUFN float cu_adam_w(const cu_opt_hp *h, float w, float mean, float var) {
    return w - h->lr * mean / (sqrtf(var) + h->f);
}

CUFN float cu_rms_n(const cu_opt_hp *h, float n, float w, float g) {
    float gg = cu_grad_wd(h, w, g);
    return (1.0f - h->d) * gg * gg + h->d * n;
}
/* n is the updated n. */
CUFN float cu_rms_w(const cu_opt_hp *h, float w, float g, float n) {
    float nw = w - h->lr * cu_grad_wd(h, w, g) / sqrtf(n + h->e2);
    return h->f >= 0.0f ? (nw > h->f ? h->f : nw < -h->f ? -h->f : nw) : nw;
}

#endif /* OPS_CUDA_OPTIM_H */
