/* reduce.h — reduction functors (sum, mean, max, min, prod, L1 and L2 norm)
 * and their gradients, same math as ops-basic's reduce.c: accumulation in
 * double; max/min propagate NaN and send the gradient to every element
 * equal to the result; prod's gradient is dy * y / x; the L2 norm's is
 * dy * x / y (0 where y is 0), the L1 norm's dy * sign(x).
 * A reduction is init, step per element, final with the element count. */
#ifndef OPS_CUDA_REDUCE_H
#define OPS_CUDA_REDUCE_H

#include "fn_common.h"

#include <stdint.h>

enum cu_reduce_op { CU_R_SUM, CU_R_MEAN, CU_R_MAX, CU_R_MIN, CU_R_PROD, CU_R_NORM1, CU_R_NORM2, CU_R_COUNT };

CUFN double cu_reduce_init(int op) {
    switch (op) {
    case CU_R_MAX: return -INFINITY;
    case CU_R_MIN: return INFINITY;
    case CU_R_PROD: return 1.0;
    default: return 0.0;
    }
}

CUFN double cu_reduce_step(int op, double acc, float xf) {
    double x = (double)xf;
    switch (op) {
    case CU_R_SUM: case CU_R_MEAN: return acc + x;
    case CU_R_MAX: return (x > acc || isnan(x)) ? x : acc;
    case CU_R_MIN: return (x < acc || isnan(x)) ? x : acc;
    case CU_R_PROD: return acc * x;
    case CU_R_NORM1: return acc + fabs(x);
    case CU_R_NORM2: return acc + x * x;
    default: return NAN;
    }
}

/* Combine two partial results (tree reductions on the GPU). */
CUFN double cu_reduce_merge(int op, double a, double b) {
    switch (op) {
    case CU_R_MAX: return (b > a || isnan(b)) ? b : a;
    case CU_R_MIN: return (b < a || isnan(b)) ? b : a;
    case CU_R_PROD: return a * b;
    default: return a + b;
    }
}

CUFN float cu_reduce_final(int op, double acc, int64_t count) {
    if (op == CU_R_MEAN) acc /= (double)count;
    if (op == CU_R_NORM2) acc = sqrt(acc);
    return (float)acc;
}

/* Gradient at one input element x whose reduction result is y. */
CUFN float cu_reduce_bwd(int op, float dy, float x, float y, int64_t count) {
    switch (op) {
    case CU_R_SUM: return dy;
    case CU_R_MEAN: return (float)((double)dy / (double)count);
    case CU_R_MAX: case CU_R_MIN: return x == y ? dy : 0.0f;
    case CU_R_PROD: return (float)((double)dy * (double)y / (double)x);
    case CU_R_NORM1: return dy * (float)((x > 0.0f) - (x < 0.0f));
    case CU_R_NORM2: return y == 0.0f ? 0.0f : (float)((double)dy * (double)x / (double)y);
    default: return NAN;
    }
}

#endif /* OPS_CUDA_REDUCE_H */
