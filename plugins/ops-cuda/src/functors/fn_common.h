/* fn_common.h — the one macro that lets the functor headers compile both
 * under nvcc (as __host__ __device__ functions kernels call) and under the
 * C compiler (plain static inline functions the CPU tests call), so the
 * CPU tests exercise exactly the math the GPU kernels run (the pattern of
 * MXNet's mshadow_op.h).  Functors are pure: float in, float out, no
 * memory access, no state.  Op codes are small enums; a kernel takes the
 * code as an argument and switches on it (uniform across a launch, so the
 * branch costs nothing and each family compiles to one kernel). */
#ifndef OPS_CUDA_FN_COMMON_H
#define OPS_CUDA_FN_COMMON_H

#ifdef __CUDACC__
#define CUFN __host__ __device__ static inline
#include <math.h>
#else
#define CUFN static inline
#include <math.h>
#endif

#endif /* OPS_CUDA_FN_COMMON_H */
