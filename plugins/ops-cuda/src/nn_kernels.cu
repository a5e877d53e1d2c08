/* nn_kernels.cu — CUDA kernels of the nn ops behind nn_kernels.h: one
 * thread per output element, grid-stride loop, 64-bit indices, 256
 * threads per block, at most 65536 blocks. */
#include "nn_kernels.h"

#include "functors/philox.h"

#include <cuda_runtime.h>

namespace {

__global__ void k_softmax_ce(cuk_softmax_ce c, const float *p, const float *labels, float *dx, int add) {
    const int64_t total = c.O * c.K * c.S;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = i % c.S;
        const int64_t k = (i / c.S) % c.K;
        const int64_t o = i / (c.S * c.K);
        const float l = labels[o * c.S + s];
        float v = 0.0f;
        if (!(c.use_ignore && l == c.ignore_label)) {
            const float t = (k == (int64_t)l) ? c.on : c.off;
            v = c.scale * (p[i] - t);
        }
        if (add) dx[i] += v;
        else dx[i] = v;
    }
}

__global__ void k_dropout(cuk_dropout d, const float *x, float *mask, float *y, int64_t n, int add) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float m = cu_bernoulli(cu_philox_value(d.key, d.counter, (uint64_t)i), d.threshold) ? d.scale : 0.0f;
        const float v = x[i] * m;
        mask[i] = m;
        if (y) {
            if (add) y[i] += v;
            else y[i] = v;
        }
    }
}

}  // namespace

extern "C" int cuk_softmax_ce_grad(void *stream, const cuk_softmax_ce *c, const float *p, const float *labels, float *dx,
                                   int add) {
    int64_t n = c->O * c->K * c->S;
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    k_softmax_ce<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(*c, p, labels, dx, add);
    return (int)cudaGetLastError();
}

extern "C" int cuk_dropout_fwd(void *stream, const cuk_dropout *d, const float *x, float *mask, float *y, int64_t n,
                               int add) {
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    k_dropout<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(*d, x, mask, y, n, add);
    return (int)cudaGetLastError();
}
