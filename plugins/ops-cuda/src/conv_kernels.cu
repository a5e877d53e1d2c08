/* conv_kernels.cu — direct 2-D convolution kernels behind conv_kernels.h.
 * Index conventions (NCHW, weight F x C/G x KH x KW, group g = f / (F/G)):
 *   iy = oy*sh - ph + ky*dh,  ix = ox*sw - pw + kx*dw  (skipped when outside)
 * Forward: one thread per output element.  Backward data: one thread per
 * input element, visiting the (ky, kx) whose output row/column
 * oy = (iy + ph - ky*dh) / sh is whole and in range.  Backward filter: one
 * thread per weight element, summing over batch and output positions.
 * Sums are in float except the filter and bias gradients (double: they add
 * n*oh*ow terms).  Grid-stride loops with 64-bit flat indices, 256 threads
 * per block, at most 65536 blocks. */
#include "conv_kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < 65536 ? b : 65536);
}

__device__ inline void put(float *dst, int64_t i, float v, int add) {
    if (add) dst[i] += v;
    else dst[i] = v;
}

__global__ void k_fwd(cuk_conv g, const float *x, const float *w, const float *b, float *y, int add) {
    const int cg = g.c / g.groups, fg = g.f / g.groups;
    const int64_t total = (int64_t)g.n * g.f * g.oh * g.ow;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i;
        const int ox = (int)(r % g.ow); r /= g.ow;
        const int oy = (int)(r % g.oh); r /= g.oh;
        const int f = (int)(r % g.f);
        const int n = (int)(r / g.f);
        const int c0 = (f / fg) * cg;
        float acc = b ? b[f] : 0.0f;
        for (int c = 0; c < cg; c++) {
            const float *xc = x + ((int64_t)n * g.c + c0 + c) * g.h * g.w;
            const float *wc = w + ((int64_t)f * cg + c) * g.kh * g.kw;
            for (int ky = 0; ky < g.kh; ky++) {
                const int iy = oy * g.sh - g.ph + ky * g.dh;
                if (iy < 0 || iy >= g.h) continue;
                for (int kx = 0; kx < g.kw; kx++) {
                    const int ix = ox * g.sw - g.pw + kx * g.dw;
                    if (ix < 0 || ix >= g.w) continue;
                    acc += xc[(int64_t)iy * g.w + ix] * wc[ky * g.kw + kx];
                }
            }
        }
        put(y, i, acc, add);
    }
}

__global__ void k_bwd_data(cuk_conv g, const float *dy, const float *w, float *dx, int add) {
    const int cg = g.c / g.groups, fg = g.f / g.groups;
    const int64_t total = (int64_t)g.n * g.c * g.h * g.w;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i;
        const int ix = (int)(r % g.w); r /= g.w;
        const int iy = (int)(r % g.h); r /= g.h;
        const int c = (int)(r % g.c);
        const int n = (int)(r / g.c);
        const int grp = c / cg, cl = c % cg;
        float acc = 0.0f;
        for (int f = grp * fg; f < (grp + 1) * fg; f++) {
            const float *dyf = dy + ((int64_t)n * g.f + f) * g.oh * g.ow;
            const float *wf = w + ((int64_t)f * cg + cl) * g.kh * g.kw;
            for (int ky = 0; ky < g.kh; ky++) {
                const int ty = iy + g.ph - ky * g.dh;
                if (ty < 0 || ty % g.sh) continue;
                const int oy = ty / g.sh;
                if (oy >= g.oh) continue;
                for (int kx = 0; kx < g.kw; kx++) {
                    const int tx = ix + g.pw - kx * g.dw;
                    if (tx < 0 || tx % g.sw) continue;
                    const int ox = tx / g.sw;
                    if (ox >= g.ow) continue;
                    acc += dyf[(int64_t)oy * g.ow + ox] * wf[ky * g.kw + kx];
                }
            }
        }
        put(dx, i, acc, add);
    }
}

__global__ void k_bwd_filter(cuk_conv g, const float *dy, const float *x, float *dw, int add) {
    const int cg = g.c / g.groups, fg = g.f / g.groups;
    const int64_t total = (int64_t)g.f * cg * g.kh * g.kw;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i;
        const int kx = (int)(r % g.kw); r /= g.kw;
        const int ky = (int)(r % g.kh); r /= g.kh;
        const int cl = (int)(r % cg);
        const int f = (int)(r / cg);
        const int c = (f / fg) * cg + cl;
        double acc = 0.0;
        for (int n = 0; n < g.n; n++) {
            const float *dyf = dy + ((int64_t)n * g.f + f) * g.oh * g.ow;
            const float *xc = x + ((int64_t)n * g.c + c) * g.h * g.w;
            for (int oy = 0; oy < g.oh; oy++) {
                const int iy = oy * g.sh - g.ph + ky * g.dh;
                if (iy < 0 || iy >= g.h) continue;
                for (int ox = 0; ox < g.ow; ox++) {
                    const int ix = ox * g.sw - g.pw + kx * g.dw;
                    if (ix < 0 || ix >= g.w) continue;
                    acc += (double)dyf[(int64_t)oy * g.ow + ox] * xc[(int64_t)iy * g.w + ix];
                }
            }
        }
        put(dw, i, (float)acc, add);
    }
}

__global__ void k_bwd_bias(cuk_conv g, const float *dy, float *db, int add) {
    for (int f = blockIdx.x * blockDim.x + threadIdx.x; f < g.f; f += gridDim.x * blockDim.x) {
        double acc = 0.0;
        for (int n = 0; n < g.n; n++) {
            const float *p = dy + ((int64_t)n * g.f + f) * g.oh * g.ow;
            for (int64_t k = 0; k < (int64_t)g.oh * g.ow; k++) acc += p[k];
        }
        put(db, f, (float)acc, add);
    }
}

}  // namespace

extern "C" {

int cuk_conv_fwd(void *stream, const cuk_conv *g, const float *x, const float *w, const float *b, float *y, int add) {
    int64_t n = (int64_t)g->n * g->f * g->oh * g->ow;
    if (n <= 0) return 0;
    k_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(*g, x, w, b, y, add);
    return (int)cudaGetLastError();
}

int cuk_conv_bwd_data(void *stream, const cuk_conv *g, const float *dy, const float *w, float *dx, int add) {
    int64_t n = (int64_t)g->n * g->c * g->h * g->w;
    if (n <= 0) return 0;
    k_bwd_data<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(*g, dy, w, dx, add);
    return (int)cudaGetLastError();
}

int cuk_conv_bwd_filter(void *stream, const cuk_conv *g, const float *dy, const float *x, float *dw, int add) {
    int64_t n = (int64_t)g->f * (g->c / g->groups) * g->kh * g->kw;
    if (n <= 0) return 0;
    k_bwd_filter<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(*g, dy, x, dw, add);
    return (int)cudaGetLastError();
}

int cuk_conv_bwd_bias(void *stream, const cuk_conv *g, const float *dy, float *db, int add) {
    if (g->f <= 0) return 0;
    k_bwd_bias<<<blocks_for(g->f), kThreads, 0, (cudaStream_t)stream>>>(*g, dy, db, add);
    return (int)cudaGetLastError();
}

}  // extern "C"
