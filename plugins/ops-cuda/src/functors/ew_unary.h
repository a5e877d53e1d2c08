/* ew_unary.h — elementwise unary functors (forward and gradient) for the
 * GPU impls of ops-basic's unary ops, same math as ops-basic's CPU kernels
 * (MXNet 1.x semantics).  The gradient takes out_grad `dy` and `v`, which
 * is the op's output when cu_unary_grad_uses_output(op) says so and its
 * input otherwise (the value the op's backward dependencies keep alive).
 * floor/ceil/round/sign have zero gradient: their backward writes zeros and
 * never calls cu_unary_bwd. */
#ifndef OPS_CUDA_EW_UNARY_H
#define OPS_CUDA_EW_UNARY_H

#include "fn_common.h"

enum cu_unary_op {
    CU_U_ABS, CU_U_SIGN, CU_U_NEGATIVE, CU_U_RECIPROCAL, CU_U_SQUARE, CU_U_SQRT, CU_U_RSQRT,
    CU_U_EXP, CU_U_LOG, CU_U_LOG1P, CU_U_EXPM1, CU_U_SIN, CU_U_COS, CU_U_TANH, CU_U_SIGMOID,
    CU_U_RELU, CU_U_SOFTSIGN, CU_U_ERF, CU_U_FLOOR, CU_U_CEIL, CU_U_ROUND,
    CU_U_COUNT
};

CUFN float cu_sgnf(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }

CUFN float cu_unary_fwd(int op, float x) {
    switch (op) {
    case CU_U_ABS: return fabsf(x);
    case CU_U_SIGN: return cu_sgnf(x);
    case CU_U_NEGATIVE: return -x;
    case CU_U_RECIPROCAL: return 1.0f / x;
    case CU_U_SQUARE: return x * x;
    case CU_U_SQRT: return sqrtf(x);
    case CU_U_RSQRT: return 1.0f / sqrtf(x);
    case CU_U_EXP: return expf(x);
    case CU_U_LOG: return logf(x);
    case CU_U_LOG1P: return log1pf(x);
    case CU_U_EXPM1: return expm1f(x);
    case CU_U_SIN: return sinf(x);
    case CU_U_COS: return cosf(x);
    case CU_U_TANH: return tanhf(x);
    case CU_U_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case CU_U_RELU: return x > 0.0f ? x : 0.0f;
    case CU_U_SOFTSIGN: return x / (1.0f + fabsf(x));
    case CU_U_ERF: return erff(x);
    case CU_U_FLOOR: return floorf(x);
    case CU_U_CEIL: return ceilf(x);
    case CU_U_ROUND: return roundf(x); /* halves away from zero */
    default: return NAN;
    }
}

/* 1 when the gradient reads the output (so forward may run in place). */
CUFN int cu_unary_grad_uses_output(int op) {
    return op == CU_U_SQRT || op == CU_U_EXP || op == CU_U_TANH || op == CU_U_SIGMOID || op == CU_U_RELU;
}

/* 1 when the gradient is zero everywhere (piecewise constant ops). */
CUFN int cu_unary_grad_is_zero(int op) {
    return op == CU_U_SIGN || op == CU_U_FLOOR || op == CU_U_CEIL || op == CU_U_ROUND;
}

CUFN float cu_unary_bwd(int op, float dy, float v) {
    switch (op) {
    case CU_U_ABS: return dy * cu_sgnf(v);
    case CU_U_NEGATIVE: return -dy;
    case CU_U_RECIPROCAL: return -dy / (v * v);
    case CU_U_SQUARE: return 2.0f * v * dy;
    case CU_U_SQRT: return dy / (2.0f * v);                 /* v = output */
    case CU_U_RSQRT: return -0.5f * dy / (v * sqrtf(v));
    case CU_U_EXP: return dy * v;                           /* v = output */
    case CU_U_LOG: return dy / v;
    case CU_U_LOG1P: return dy / (1.0f + v);
    case CU_U_EXPM1: return dy * expf(v);
    case CU_U_SIN: return dy * cosf(v);
    case CU_U_COS: return -dy * sinf(v);
    case CU_U_TANH: return dy * (1.0f - v * v);             /* v = output */
    case CU_U_SIGMOID: return dy * v * (1.0f - v);          /* v = output */
    case CU_U_RELU: return v > 0.0f ? dy : 0.0f;            /* v = output */
    case CU_U_SOFTSIGN: return dy / ((1.0f + fabsf(v)) * (1.0f + fabsf(v)));
    case CU_U_ERF: return dy * 1.1283791670955126f * expf(-v * v);
    default: return 0.0f; /* sign, floor, ceil, round */
    }
}

#endif /* OPS_CUDA_EW_UNARY_H */
