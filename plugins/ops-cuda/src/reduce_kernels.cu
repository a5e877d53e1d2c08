/* reduce_kernels.cu — reductions (sum, mean, max, min, prod, norm) and
 * clip behind reduce_kernels.h, on the functors of functors/reduce.h.
 * Launch shape as ew_kernels.cu: 256 threads, at most 65536 blocks,
 * grid-stride loops with 64-bit indices.  Forward: one thread per output
 * element walks its reduced sub-block in row-major order, accumulating in
 * double (no atomics, results independent of the launch).  Backward: one
 * thread per input element finds its output element and applies the
 * functor's gradient. */
#include "reduce_kernels.h"

#include "functors/reduce.h"

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

inline unsigned blocks_for(int64_t n) {
    int64_t b = (n + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

__device__ inline int64_t first_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return (int64_t)gridDim.x * blockDim.x; }

/* The input offset of output element o (row-major over the kept dims). */
__device__ inline int64_t keep_offset(const cuk_reduce &r, int64_t o) {
    int64_t off = 0;
    for (int d = r.n_keep - 1; d >= 0; d--) {
        int64_t c = o % r.keep_size[d];
        o /= r.keep_size[d];
        off += c * r.keep_stride[d];
    }
    return off;
}

__global__ void k_reduce_fwd(cuk_reduce r, const float *x, float *y, int add) {
    for (int64_t o = first_index(); o < r.n_out; o += grid_stride()) {
        int64_t base = keep_offset(r, o);
        double acc = cu_reduce_init(r.op);
        for (int64_t k = 0; k < r.count; k++) {
            int64_t rest = k, off = base;
            for (int d = r.n_red - 1; d >= 0; d--) {
                off += (rest % r.red_size[d]) * r.red_stride[d];
                rest /= r.red_size[d];
            }
            acc = cu_reduce_step(r.op, acc, x[off]);
        }
        float v = cu_reduce_final(r.op, acc, r.count);
        if (add) y[o] += v;
        else y[o] = v;
    }
}

struct in_geom {
    int ndim;
    int64_t size[CUK_RED_MAX_NDIM];
    uint8_t reduced[CUK_RED_MAX_NDIM];
};

__global__ void k_reduce_bwd(cuk_reduce r, in_geom g, const float *dy, const float *x, const float *y, float *dx,
                             int64_t n_in, int add) {
    for (int64_t i = first_index(); i < n_in; i += grid_stride()) {
        /* Row-major coordinates of i; the kept ones index the output. */
        int64_t rest = i, o = 0, scale = 1;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t c = rest % g.size[d];
            rest /= g.size[d];
            if (!g.reduced[d]) {
                o += c * scale;
                scale *= g.size[d];
            }
        }
        float v = cu_reduce_bwd(r.op, dy[o], x ? x[i] : 0.0f, y ? y[o] : 0.0f, r.count);
        if (add) dx[i] += v;
        else dx[i] = v;
    }
}

__global__ void k_clip_fwd(const float *x, float *y, float lo, float hi, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float v = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
        if (add) y[i] += v;
        else y[i] = v;
    }
}

__global__ void k_clip_bwd(const float *dy, const float *x, float *dx, float lo, float hi, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float v = (x[i] >= lo && x[i] <= hi) ? dy[i] : 0.0f;
        if (add) dx[i] += v;
        else dx[i] = v;
    }
}

} // namespace

extern "C" {

int cuk_reduce_fwd(void *stream, const cuk_reduce *r, const float *x, float *y, int add) {
    if (r->n_out <= 0) return 0;
    k_reduce_fwd<<<blocks_for(r->n_out), kThreads, 0, (cudaStream_t)stream>>>(*r, x, y, add);
    return (int)cudaGetLastError();
}

int cuk_reduce_bwd(void *stream, const cuk_reduce *r, int ndim, const int64_t *in_size, const uint8_t *reduced,
                   const float *dy, const float *x, const float *y, float *dx, int64_t n_in, int add) {
    if (n_in <= 0) return 0;
    in_geom g = {};
    g.ndim = ndim;
    for (int d = 0; d < ndim && d < CUK_RED_MAX_NDIM; d++) {
        g.size[d] = in_size[d];
        g.reduced[d] = reduced[d];
    }
    k_reduce_bwd<<<blocks_for(n_in), kThreads, 0, (cudaStream_t)stream>>>(*r, g, dy, x, y, dx, n_in, add);
    return (int)cudaGetLastError();
}

int cuk_clip_fwd(void *stream, const float *x, float *y, float lo, float hi, int64_t n, int add) {
    if (n <= 0) return 0;
    k_clip_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(x, y, lo, hi, n, add);
    return (int)cudaGetLastError();
}

int cuk_clip_bwd(void *stream, const float *dy, const float *x, float *dx, float lo, float hi, int64_t n, int add) {
    if (n <= 0) return 0;
    k_clip_bwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(dy, x, dx, lo, hi, n, add);
    return (int)cudaGetLastError();
}

} // extern "C"
