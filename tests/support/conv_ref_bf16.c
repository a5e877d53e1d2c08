/* conv_ref_bf16.c — see conv_ref_bf16.h.  Straight loops over outputs and
 * taps; no blocking, no shared code with the impls it checks. */
#include "conv_ref_bf16.h"
#include "fake_host.h"

#include <cpuid.h>
#include <math.h>
#include <string.h>

double bf16_at(const uint16_t *p, int64_t i) {
    uint32_t u = (uint32_t)p[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void bf16_fill_uniform(void *p, int64_t n, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        float f = (float)fh_rand(rng, -1, 1);
        uint32_t u;
        memcpy(&u, &f, 4);
        ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    }
}

int cpu_has_avx512bf16(void) {
    unsigned a, b, c, d, b7 = 0, a71 = 0;
    if (!__get_cpuid_count(7, 0, &a, &b7, &c, &d)) return 0;
    if (!__get_cpuid_count(7, 1, &a71, &b, &c, &d)) a71 = 0;
    return ((b7 >> 16) & 1) && ((a71 >> 5) & 1);
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
                    double acc = b ? bf16_at(b, m) : 0, mg = fabs(acc), go = bf16_at(dy, yi);
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t i = 0; i < c->k; i++)
                            for (int64_t j = 0; j < c->k; j++) {
                                int64_t h = oh * c->s - c->p + i * c->d, ww = ow * c->s - c->p + j * c->d;
                                if (h < 0 || h >= c->H || ww < 0 || ww >= c->W) continue;
                                int64_t xi = ((s * c->C + g * Cg + ci) * c->H + h) * c->W + ww;
                                int64_t wi = ((m * Cg + ci) * c->k + i) * c->k + j;
                                double xv = bf16_at(x, xi), wv = bf16_at(w, wi), t = xv * wv;
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
