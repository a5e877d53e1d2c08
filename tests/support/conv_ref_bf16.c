/* conv_ref_bf16.c — see conv_ref_bf16.h.  Straight loops over outputs and
 * taps; no blocking, no shared code with the impls it checks. */
#include "conv_ref_bf16.h"

#include <math.h>
#include <string.h>

static double bf16_value(const uint16_t *p, int64_t i) {
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void conv_ref_bf16(const conv_ref_geom *c, const uint16_t *x, const uint16_t *w, const uint16_t *b,
                   const uint16_t *dy, double *ref, double *mag) {
    const int64_t Cg = c->C / c->G, Mg = c->M / c->G, Ho = c->Ho, Wo = c->Wo;
    const int64_t ny = c->N * c->M * Ho * Wo, nx = c->N * c->C * c->H * c->W, nw = c->M * Cg * c->k * c->k;
    double *ry = ref, *rdx = ry + ny, *rdw = rdx + nx, *rdb = rdw + nw;
    double *my = mag, *mdx = my + ny, *mdw = mdx + nx, *mdb = mdw + nw;
    for (int64_t s = 0; s < c->N; s++)
        for (int64_t m = 0; m < c->M; m++) {
            int64_t g = m / Mg;
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    int64_t yi = ((s * c->M + m) * Ho + oh) * Wo + ow;
                    double acc = b ? bf16_value(b, m) : 0, mg = fabs(acc), go = bf16_value(dy, yi);
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t i = 0; i < c->k; i++)
                            for (int64_t j = 0; j < c->k; j++) {
                                int64_t h = oh * c->s - c->p + i * c->d, ww = ow * c->s - c->p + j * c->d;
                                if (h < 0 || h >= c->H || ww < 0 || ww >= c->W) continue;
                                int64_t xi = ((s * c->C + g * Cg + ci) * c->H + h) * c->W + ww;
                                int64_t wi = ((m * Cg + ci) * c->k + i) * c->k + j;
                                double xv = bf16_value(x, xi), wv = bf16_value(w, wi), t = xv * wv;
                                acc += t;
                                mg += fabs(t);
                                rdx[xi] += go * wv;
                                mdx[xi] += fabs(go * wv);
                                rdw[wi] += go * xv;
                                mdw[wi] += fabs(go * xv);
                            }
                    ry[yi] = acc;
                    my[yi] = mg;
                    rdb[m] += go;
                    mdb[m] += fabs(go);
                }
        }
}
