/* rnn_kern.h — the fused RNN's kernels (rnn_kern.c), called by rnn.c.
 *
 * A problem is described by rnn_problem: sizes, mode, and the tensors in
 * MXNet's layouts (data (T, N, C); the flat packed parameter vector; states
 * (L*D, N, H)).  rnn_forward computes the outputs; rnn_backward recomputes
 * the forward into scratch (the op has no hidden output to keep the
 * per-step gates from forward to backward, see rnn.c) and writes the
 * gradients of data, parameters and initial states.  float32 and float64
 * (the kernels are instantiated twice from rnn_kern_tmpl.h). */
#ifndef NN_RNN_KERN_H
#define NN_RNN_KERN_H

#include "nn_common.h"

/* MXNet's rnn_enum::RNNModeType order, which is also the `mode` choices'. */
enum { RNN_RELU = 0, RNN_TANH = 1, RNN_LSTM = 2, RNN_GRU = 3 };

typedef struct rnn_problem {
    int mode;
    int64_t L, D, T, N, C, H, G; /* layers, directions, steps, batch, input, state, gates */
    double p;                    /* dropout between layers (applied when train)           */
    int train;
    int32_t dtype;               /* MXP_DTYPE_F32 / F64                                  */
    const void *x, *w, *hx, *cx; /* inputs (cx NULL unless LSTM)                          */
} rnn_problem;

/* Number of parameters of MXNet's packed vector for these sizes. */
int64_t rnn_param_count(int mode, int64_t L, int64_t D, int64_t C, int64_t H);

/* Outputs (each may be NULL = not wanted) with req WRITE/INPLACE or ADD. */
typedef struct rnn_fwd_out {
    void *y, *hy, *cy;
    int32_t req_y, req_hy, req_cy;
} rnn_fwd_out;

/* Input gradients (NULL = not wanted) with their reqs; dy is (T, N, D*H),
 * dhy / dcy the out_grads of hy / cy (NULL when absent: zero). */
typedef struct rnn_bwd_io {
    const void *dy, *dhy, *dcy;
    void *dx, *dw, *dhx, *dcx;
    int32_t req_dx, req_dw, req_dhx, req_dcx;
} rnn_bwd_io;

int rnn_forward(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_fwd_out *o);
int rnn_backward(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_bwd_io *io);

#endif
