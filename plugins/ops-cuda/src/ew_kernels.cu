/* ew_kernels.cu — the elementwise CUDA kernels behind ew_kernels.h.  One
 * kernel per family, the op code an argument (see functors/fn_common.h),
 * so nvcc compiles few kernels.  Launch shape: 256 threads per block, at
 * most 65536 blocks, and a grid-stride loop with 64-bit indices, so any n
 * is covered and no thread reads past n.  Nothing here allocates or
 * synchronises; launch errors are returned to the C side. */
#include "ew_kernels.h"

#include "functors/ew_binary.h"
#include "functors/ew_scalar.h"
#include "functors/ew_unary.h"

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

__device__ inline void store(float *dst, int64_t i, float v, int add) {
    if (add) dst[i] += v;
    else dst[i] = v;
}

__global__ void k_fill(float *dst, float value, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) store(dst, i, value, add);
}

__global__ void k_unary_fwd(int op, const float *x, float *y, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) store(y, i, cu_unary_fwd(op, x[i]), add);
}

__global__ void k_unary_bwd(int op, const float *dy, const float *v, float *dx, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride())
        store(dx, i, cu_unary_bwd(op, dy[i], v ? v[i] : 0.0f), add);
}

__global__ void k_scalar_fwd(int op, const float *x, float s, float *y, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) store(y, i, cu_scalar_fwd(op, x[i], s), add);
}

__global__ void k_scalar_bwd(int op, const float *dy, const float *v, float s, float *dx, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride())
        store(dx, i, cu_scalar_bwd(op, dy[i], v ? v[i] : 0.0f, s), add);
}

__global__ void k_binary_fwd(int op, const float *a, const float *b, float *y, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) store(y, i, cu_binary_fwd(op, a[i], b[i]), add);
}

__global__ void k_binary_bwd(int op, const float *dy, const float *a, const float *b, float *dl, int add_l,
                             float *dr, int add_r, int64_t n) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float g = dy[i], av = a ? a[i] : 0.0f, bv = b ? b[i] : 0.0f;
        float gl = cu_binary_bwd_lhs(op, g, av, bv), gr = cu_binary_bwd_rhs(op, g, av, bv);
        if (dr) store(dr, i, gr, add_r);
        if (dl) store(dl, i, gl, add_l);
    }
}

/* Offsets of output element i in lhs and rhs. */
__device__ inline void bcast_offsets(const cuk_bcast &g, int64_t i, int64_t *la, int64_t *lb) {
    int64_t oa = 0, ob = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t idx = i % g.shape[d];
        i /= g.shape[d];
        oa += idx * g.lhs_st[d];
        ob += idx * g.rhs_st[d];
    }
    *la = oa;
    *lb = ob;
}

__global__ void k_bcast_fwd(int op, cuk_bcast g, const float *a, const float *b, float *y, int64_t n, int add) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t la, lb;
        bcast_offsets(g, i, &la, &lb);
        store(y, i, cu_binary_fwd(op, a[la], b[lb]), add);
    }
}

/* One thread per element j of the gradient of input `which`, whose shape
 * (aligned to the output's dims) has dst_shape[d] = shape[d] on kept dims
 * and 1 on broadcast dims.  It sums the gradient over the output elements
 * that read element j: the broadcast dims' index space, red_count long. */
__global__ void k_bcast_bwd(int op, cuk_bcast g, const float *dy, const float *a, const float *b, int which,
                            float *dst, int64_t n_dst, int64_t red_count, int add) {
    const int64_t *st = which ? g.rhs_st : g.lhs_st;
    for (int64_t j = first_index(); j < n_dst; j += grid_stride()) {
        /* Output index of j on the kept dims (broadcast dims at 0). */
        int64_t kept[CUK_MAX_NDIM];
        int64_t rem = j;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int bcast = st[d] == 0 && g.shape[d] != 1;
            if (bcast) {
                kept[d] = 0;
            } else {
                kept[d] = rem % g.shape[d];
                rem /= g.shape[d];
            }
        }
        double acc = 0.0;
        for (int64_t r = 0; r < red_count; r++) {
            int64_t rr = r, out_off = 0, mul = 1;
            for (int d = g.ndim - 1; d >= 0; d--) {
                int bcast = st[d] == 0 && g.shape[d] != 1;
                int64_t idx = kept[d];
                if (bcast) {
                    idx = rr % g.shape[d];
                    rr /= g.shape[d];
                }
                out_off += idx * mul;
                mul *= g.shape[d];
            }
            int64_t la, lb;
            bcast_offsets(g, out_off, &la, &lb);
            float av = a ? a[la] : 0.0f, bv = b ? b[lb] : 0.0f;
            acc += which ? cu_binary_bwd_rhs(op, dy[out_off], av, bv) : cu_binary_bwd_lhs(op, dy[out_off], av, bv);
        }
        store(dst, j, (float)acc, add);
    }
}

__global__ void k_bias_rows(float *y, const float *b, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += b[i % cols];
}

/* One thread per column: consecutive threads read consecutive addresses. */
__global__ void k_col_sum(float *dst, const float *src, int64_t rows, int64_t cols, int add) {
    for (int64_t c = first_index(); c < cols; c += grid_stride()) {
        double acc = 0.0;
        for (int64_t r = 0; r < rows; r++) acc += src[r * cols + c];
        store(dst, c, (float)acc, add);
    }
}

}  // namespace

extern "C" {

int cuk_fill(void *stream, float *dst, float value, int64_t n, int add) {
    if (n <= 0) return 0;
    k_fill<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(dst, value, n, add);
    return (int)cudaGetLastError();
}

int cuk_unary_fwd(void *stream, int op, const float *x, float *y, int64_t n, int add) {
    if (n <= 0) return 0;
    k_unary_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, x, y, n, add);
    return (int)cudaGetLastError();
}

int cuk_unary_bwd(void *stream, int op, const float *dy, const float *v, float *dx, int64_t n, int add) {
    if (n <= 0) return 0;
    k_unary_bwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, dy, v, dx, n, add);
    return (int)cudaGetLastError();
}

int cuk_scalar_fwd(void *stream, int op, const float *x, float s, float *y, int64_t n, int add) {
    if (n <= 0) return 0;
    k_scalar_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, x, s, y, n, add);
    return (int)cudaGetLastError();
}

int cuk_scalar_bwd(void *stream, int op, const float *dy, const float *v, float s, float *dx, int64_t n,
                   int add) {
    if (n <= 0) return 0;
    k_scalar_bwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, dy, v, s, dx, n, add);
    return (int)cudaGetLastError();
}

int cuk_binary_fwd(void *stream, int op, const float *a, const float *b, float *y, int64_t n, int add) {
    if (n <= 0) return 0;
    k_binary_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, a, b, y, n, add);
    return (int)cudaGetLastError();
}

int cuk_binary_bwd(void *stream, int op, const float *dy, const float *a, const float *b, float *dlhs,
                   int add_l, float *drhs, int add_r, int64_t n) {
    if (n <= 0 || (!dlhs && !drhs)) return 0;
    k_binary_bwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, dy, a, b, dlhs, add_l, drhs, add_r, n);
    return (int)cudaGetLastError();
}

int cuk_bcast_fwd(void *stream, int op, const cuk_bcast *g, const float *a, const float *b, float *y, int add) {
    int64_t n = 1;
    for (int d = 0; d < g->ndim; d++) n *= g->shape[d];
    if (n <= 0) return 0;
    k_bcast_fwd<<<blocks_for(n), kThreads, 0, (cudaStream_t)stream>>>(op, *g, a, b, y, n, add);
    return (int)cudaGetLastError();
}

int cuk_bcast_bwd(void *stream, int op, const cuk_bcast *g, const float *dy, const float *a, const float *b,
                  int which, float *dst, int add) {
    const int64_t *st = which ? g->rhs_st : g->lhs_st;
    int64_t n_dst = 1, red = 1;
    for (int d = 0; d < g->ndim; d++) {
        if (st[d] == 0 && g->shape[d] != 1) red *= g->shape[d];
        else n_dst *= g->shape[d];
    }
    if (n_dst <= 0) return 0;
    if (red <= 0) { /* an empty output: every gradient element is an empty sum */
        if (add) return 0;
        k_fill<<<blocks_for(n_dst), kThreads, 0, (cudaStream_t)stream>>>(dst, 0.0f, n_dst, 0);
        return (int)cudaGetLastError();
    }
    k_bcast_bwd<<<blocks_for(n_dst), kThreads, 0, (cudaStream_t)stream>>>(op, *g, dy, a, b, which, dst, n_dst,
                                                                            red, add);
    return (int)cudaGetLastError();
}

int cuk_bias_rows(void *stream, float *y, const float *b, int64_t rows, int64_t cols) {
    if (rows <= 0 || cols <= 0) return 0;
    k_bias_rows<<<blocks_for(rows * cols), kThreads, 0, (cudaStream_t)stream>>>(y, b, rows, cols);
    return (int)cudaGetLastError();
}

int cuk_col_sum(void *stream, float *dst, const float *src, int64_t rows, int64_t cols, int add) {
    if (cols <= 0) return 0;
    k_col_sum<<<blocks_for(cols), kThreads, 0, (cudaStream_t)stream>>>(dst, src, rows, cols, add);
    return (int)cudaGetLastError();
}

}  // extern "C"
