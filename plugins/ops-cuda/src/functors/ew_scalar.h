/* ew_scalar.h — tensor-with-scalar functors (_plus_scalar, _rdiv_scalar,
 * _power_scalar, ..., and smooth_l1 whose scalar is sigma), forward and
 * gradient, same math as ops-basic's CPU kernels.  The gradient takes
 * out_grad `dy` and `v`: the output when cu_scalar_grad_uses_output(op)
 * (only _rpower_scalar), else the input. */
#ifndef OPS_CUDA_EW_SCALAR_H
#define OPS_CUDA_EW_SCALAR_H

#include "fn_common.h"

enum cu_scalar_op {
    CU_S_PLUS, CU_S_MINUS, CU_S_RMINUS, CU_S_MUL, CU_S_DIV, CU_S_RDIV, CU_S_POWER, CU_S_RPOWER,
    CU_S_MAXIMUM, CU_S_MINIMUM, CU_S_EQUAL, CU_S_NOT_EQUAL, CU_S_GREATER, CU_S_GREATER_EQUAL,
    CU_S_LESSER, CU_S_LESSER_EQUAL, CU_S_SMOOTH_L1,
    CU_S_COUNT
};

CUFN float cu_scalar_fwd(int op, float x, float s) {
    switch (op) {
    case CU_S_PLUS: return x + s;
    case CU_S_MINUS: return x - s;
    case CU_S_RMINUS: return s - x;
    case CU_S_MUL: return x * s;
    case CU_S_DIV: return x / s;
    case CU_S_RDIV: return s / x;
    case CU_S_POWER: return powf(x, s);
    case CU_S_RPOWER: return powf(s, x);
    case CU_S_MAXIMUM: return x > s ? x : s;
    case CU_S_MINIMUM: return x < s ? x : s;
    case CU_S_EQUAL: return x == s ? 1.0f : 0.0f;
    case CU_S_NOT_EQUAL: return x != s ? 1.0f : 0.0f;
    case CU_S_GREATER: return x > s ? 1.0f : 0.0f;
    case CU_S_GREATER_EQUAL: return x >= s ? 1.0f : 0.0f;
    case CU_S_LESSER: return x < s ? 1.0f : 0.0f;
    case CU_S_LESSER_EQUAL: return x <= s ? 1.0f : 0.0f;
    case CU_S_SMOOTH_L1: /* 0.5 (sigma x)^2 for |x| < 1/sigma^2, else |x| - 0.5/sigma^2 */
        return fabsf(x) < 1.0f / (s * s) ? 0.5f * s * s * x * x : fabsf(x) - 0.5f / (s * s);
    default: return NAN;
    }
}

CUFN int cu_scalar_grad_is_zero(int op) { return op >= CU_S_EQUAL && op <= CU_S_LESSER_EQUAL; }
CUFN int cu_scalar_grad_uses_output(int op) { return op == CU_S_RPOWER; }
/* 1 when the gradient reads the input or output (not only out_grad). */
CUFN int cu_scalar_grad_uses_value(int op) {
    return op == CU_S_RDIV || op == CU_S_POWER || op == CU_S_RPOWER || op == CU_S_MAXIMUM ||
           op == CU_S_MINIMUM || op == CU_S_SMOOTH_L1;
}

CUFN float cu_scalar_bwd(int op, float dy, float v, float s) {
    switch (op) {
    case CU_S_PLUS: case CU_S_MINUS: return dy;
    case CU_S_RMINUS: return -dy;
    case CU_S_MUL: return dy * s;
    case CU_S_DIV: return dy / s;
    case CU_S_RDIV: return -dy * s / (v * v);
    case CU_S_POWER: return dy * s * powf(v, s - 1.0f);
    case CU_S_RPOWER: return dy * v * logf(s);              /* v = output */
    case CU_S_MAXIMUM: return v >= s ? dy : 0.0f;
    case CU_S_MINIMUM: return v <= s ? dy : 0.0f;
    case CU_S_SMOOTH_L1:
        return dy * (v > 1.0f / (s * s) ? 1.0f : v < -1.0f / (s * s) ? -1.0f : s * s * v);
    default: return 0.0f;
    }
}

#endif /* OPS_CUDA_EW_SCALAR_H */
