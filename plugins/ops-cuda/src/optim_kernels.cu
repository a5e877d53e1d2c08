/* optim_kernels.cu — the fused optimizer update kernel behind
 * optim_kernels.h: each thread updates its elements' states and weight
 * with the functors of functors/optim.h (grid-stride loop, 64-bit indices,
 * 256 threads per block, at most 65536 blocks).  Every element is read
 * before it is written, so y may be w itself. */
#include "optim_kernels.h"

#include <cuda_runtime.h>

namespace {

__global__ void k_optimizer(int kind, cu_opt_hp hp, const float *w, const float *g, float *s1, float *s2, float *y,
                            int64_t n, int add) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float wv = w[i], gv = g[i], nw;
        switch (kind) {
        case CUK_OPT_SGD:
            nw = cu_sgd_w(&hp, wv, gv);
            break;
        case CUK_OPT_MOM: {
            float m = cu_sgd_mom_m(&hp, s1[i], wv, gv);
            s1[i] = m;
            nw = wv + m;
            break;
        }
        case CUK_OPT_ADAM: {
            float mean = cu_adam_mean(&hp, s1[i], wv, gv);
            float var = cu_adam_var(&hp, s2[i], wv, gv);
            s1[i] = mean;
            s2[i] = var;
            nw = cu_adam_w(&hp, wv, mean, var);
            break;
        }
        default: {
            float nn = cu_rms_n(&hp, s1[i], wv, gv);
            s1[i] = nn;
            nw = cu_rms_w(&hp, wv, gv, nn);
            break;
        }
        }
        if (!y) continue; /* req null: only the states advance */
        if (add) y[i] += nw;
        else y[i] = nw;
    }
}

}  // namespace

extern "C" int cuk_optimizer(void *stream, int kind, const cu_opt_hp *hp, const float *w, const float *g, float *s1,
                             float *s2, float *y, int64_t n, int add) {
    if (n <= 0) return 0;
    int64_t blocks = (n + 255) / 256;
    if (blocks > 65536) blocks = 65536;
    k_optimizer<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(kind, *hp, w, g, s1, s2, y, n, add);
    return (int)cudaGetLastError();
}
