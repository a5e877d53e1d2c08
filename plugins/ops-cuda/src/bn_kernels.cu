/* bn_kernels.cu — BatchNorm kernels behind bn_kernels.h: one block of 256
 * threads per channel (grid-stride over channels), sums in double through
 * a shared-memory tree, the same per-channel arithmetic as ops-nn's CPU
 * BatchNorm (biased batch variance; moving = moving * momentum + batch *
 * (1 - momentum)).  Every block-wide sum is reached by all threads of the
 * block (the branch conditions are uniform per launch). */
#include "bn_kernels.h"

#include <cuda_runtime.h>
#include <math.h>

namespace {

constexpr int kThreads = 256;

/* Sum of v over the block; every thread gets the result. */
__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

__device__ inline int64_t at(const cuk_bn &p, int64_t c, int64_t i) {
    return ((i / p.S) * p.C + c) * p.S + i % p.S;
}

__device__ inline void put(float *dst, int64_t i, float v, int req) {
    if (req == 3) dst[i] += v; /* MXP_REQ_ADD */
    else dst[i] = v;
}

__global__ void k_bn_fwd(cuk_bn p, const float *x, const float *gamma, const float *beta, float *y, float *mean_out,
                         float *var_out, float *mm, float *mv) {
    __shared__ double sh[kThreads];
    const int64_t n = p.O * p.S;
    const double cnt = (double)n;
    for (int64_t c = blockIdx.x; c < p.C; c += gridDim.x) {
        double mean, var;
        if (p.batch_stats) {
            double s = 0.0;
            for (int64_t i = threadIdx.x; i < n; i += kThreads) s += x[at(p, c, i)];
            mean = block_sum(s, sh) / cnt;
            double s2 = 0.0;
            for (int64_t i = threadIdx.x; i < n; i += kThreads) {
                double d = x[at(p, c, i)] - mean;
                s2 += d * d;
            }
            var = block_sum(s2, sh) / cnt;
            if (threadIdx.x == 0) {
                mm[c] = (float)(mm[c] * p.momentum + mean * (1.0 - p.momentum));
                mv[c] = (float)(mv[c] * p.momentum + var * (1.0 - p.momentum));
            }
        } else {
            mean = mm[c];
            var = mv[c];
        }
        if (threadIdx.x == 0) {
            if (mean_out) mean_out[c] = (float)mean;
            if (var_out) var_out[c] = (float)var;
        }
        const double g = p.fix_gamma ? 1.0 : gamma[c];
        const double sc = g / sqrt(var + p.eps), shift = beta[c] - mean * sc;
        if (y)
            for (int64_t i = threadIdx.x; i < n; i += kThreads) {
                const int64_t k = at(p, c, i);
                put(y, k, (float)(x[k] * sc + shift), p.req);
            }
        __syncthreads(); /* the next channel reuses sh */
    }
}

__global__ void k_bn_bwd(cuk_bn p, const float *x, const float *gamma, const float *dy, const float *mean_in,
                         const float *var_in, float *dx, float *dgamma, float *dbeta) {
    __shared__ double sh[kThreads];
    const int64_t n = p.O * p.S;
    const double cnt = (double)n;
    for (int64_t c = blockIdx.x; c < p.C; c += gridDim.x) {
        const double mean = mean_in[c], var = var_in[c];
        const double inv = 1.0 / sqrt(var + p.eps);
        const double g = p.fix_gamma ? 1.0 : gamma[c];
        double a = 0.0, b = 0.0;
        for (int64_t i = threadIdx.x; i < n; i += kThreads) {
            const int64_t k = at(p, c, i);
            a += dy[k];
            b += dy[k] * (x[k] - mean);
        }
        const double sdy = block_sum(a, sh), sdyx = block_sum(b, sh);
        const double dg = sdyx * inv;
        if (threadIdx.x == 0) {
            if (dbeta) put(dbeta, c, (float)sdy, p.req_b);
            if (dgamma) put(dgamma, c, (float)(p.fix_gamma ? 0.0 : dg), p.req_g);
        }
        if (dx)
            for (int64_t i = threadIdx.x; i < n; i += kThreads) {
                const int64_t k = at(p, c, i);
                double v;
                if (p.batch_stats) {
                    const double xh = (x[k] - mean) * inv;
                    v = g * inv * (dy[k] - sdy / cnt - xh * dg / cnt);
                } else {
                    v = g * inv * dy[k];
                }
                put(dx, k, (float)v, p.req);
            }
        __syncthreads();
    }
}

inline unsigned grid_for(int64_t c) { return (unsigned)(c < 65535 ? c : 65535); }

}  // namespace

extern "C" {

int cuk_bn_fwd(void *stream, const cuk_bn *p, const float *x, const float *gamma, const float *beta, float *y,
               float *mean_out, float *var_out, float *mm, float *mv) {
    if (p->C <= 0) return 0;
    k_bn_fwd<<<grid_for(p->C), kThreads, 0, (cudaStream_t)stream>>>(*p, x, gamma, beta, y, mean_out, var_out, mm, mv);
    return (int)cudaGetLastError();
}

int cuk_bn_bwd(void *stream, const cuk_bn *p, const float *x, const float *gamma, const float *dy, const float *mean,
               const float *var, float *dx, float *dgamma, float *dbeta) {
    if (p->C <= 0) return 0;
    k_bn_bwd<<<grid_for(p->C), kThreads, 0, (cudaStream_t)stream>>>(*p, x, gamma, dy, mean, var, dx, dgamma, dbeta);
    return (int)cudaGetLastError();
}

}  // extern "C"
