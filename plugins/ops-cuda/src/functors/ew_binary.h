/* ew_binary.h — elementwise binary functors (forward and the gradients
 * with respect to lhs and rhs) shared by the equal-shape ops (elemwise_add,
 * _power, _maximum, ...) and their broadcast_* twins, same math as
 * ops-basic's CPU kernels.  Comparisons return 0/1 and have zero gradient.
 * Ties of maximum/minimum send the gradient to lhs (as ops-basic). */
#ifndef OPS_CUDA_EW_BINARY_H
#define OPS_CUDA_EW_BINARY_H

#include "fn_common.h"

enum cu_binary_op {
    CU_B_ADD, CU_B_SUB, CU_B_MUL, CU_B_DIV, CU_B_POWER, CU_B_MAXIMUM, CU_B_MINIMUM,
    CU_B_EQUAL, CU_B_NOT_EQUAL, CU_B_GREATER, CU_B_GREATER_EQUAL, CU_B_LESSER, CU_B_LESSER_EQUAL,
    CU_B_COUNT
};

CUFN float cu_binary_fwd(int op, float a, float b) {
    switch (op) {
    case CU_B_ADD: return a + b;
    case CU_B_SUB: return a - b;
    case CU_B_MUL: return a * b;
    case CU_B_DIV: return a / b;
    case CU_B_POWER: return powf(a, b);
    case CU_B_MAXIMUM: return a > b ? a : b;
    case CU_B_MINIMUM: return a < b ? a : b;
    case CU_B_EQUAL: return a == b ? 1.0f : 0.0f;
    case CU_B_NOT_EQUAL: return a != b ? 1.0f : 0.0f;
    case CU_B_GREATER: return a > b ? 1.0f : 0.0f;
    case CU_B_GREATER_EQUAL: return a >= b ? 1.0f : 0.0f;
    case CU_B_LESSER: return a < b ? 1.0f : 0.0f;
    case CU_B_LESSER_EQUAL: return a <= b ? 1.0f : 0.0f;
    default: return NAN;
    }
}

/* 1 for comparisons (zero gradient). */
CUFN int cu_binary_grad_is_zero(int op) { return op >= CU_B_EQUAL; }

/* 1 when the gradient reads the inputs (all but add and sub). */
CUFN int cu_binary_grad_uses_inputs(int op) { return op != CU_B_ADD && op != CU_B_SUB && op < CU_B_EQUAL; }

CUFN float cu_binary_bwd_lhs(int op, float dy, float a, float b) {
    switch (op) {
    case CU_B_ADD: return dy;
    case CU_B_SUB: return dy;
    case CU_B_MUL: return dy * b;
    case CU_B_DIV: return dy / b;
    case CU_B_POWER: return dy * b * powf(a, b - 1.0f);
    case CU_B_MAXIMUM: return a >= b ? dy : 0.0f;
    case CU_B_MINIMUM: return a <= b ? dy : 0.0f;
    default: return 0.0f;
    }
}

CUFN float cu_binary_bwd_rhs(int op, float dy, float a, float b) {
    switch (op) {
    case CU_B_ADD: return dy;
    case CU_B_SUB: return -dy;
    case CU_B_MUL: return dy * a;
    case CU_B_DIV: return -dy * a / (b * b);
    case CU_B_POWER: return dy * powf(a, b) * logf(a);
    case CU_B_MAXIMUM: return a < b ? dy : 0.0f;
    case CU_B_MINIMUM: return a > b ? dy : 0.0f;
    default: return 0.0f;
    }
}

#endif /* OPS_CUDA_EW_BINARY_H */
