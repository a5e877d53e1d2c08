/* nn_common.h — shared helpers of the ops-nn pack: the host table, error
 * reporting, tensor access, req handling, shape-inference helpers and the
 * parallel_for wrapper.  Only declarations and small inline helpers live
 * here; each op family is one .c file that registers itself through the
 * nn_register_* functions called from pack.c.
 *
 * Invariants: kernels receive contiguous row-major tensors (checked by
 * nn_check_contig before any kernel runs) of dtype float32 or float64
 * (bfloat16 where an op says so: the bf16 Convolution/FullyConnected,
 * BatchNorm, Activation, Pooling);
 * every helper returns an mxp status after describing failures with
 * host->set_error. */
#ifndef NN_COMMON_H
#define NN_COMMON_H

#include <mxp/plugin.h>
#include <string.h>
#include <stdio.h>

extern const mxp_host *nn_host;

#define NN_ERR(st, ...) (nn_host && nn_host->set_error ? nn_host->set_error((st), __VA_ARGS__) : (st))

/* ------------------------------------------------------------ tensors */
static inline void *nn_ptr(const mxp_tensor *t) { return t->data ? mxp_tensor_ptr(t) : NULL; }

/* Fails with EUNSUPPORTED unless every present tensor is contiguous. */
int nn_check_contig(const char *op, const mxp_tensor *t, uint32_t n);
/* Fails unless every present tensor has dtype f32 or f64 equal to t[0]'s. */
int nn_check_float(const char *op, const mxp_tensor *t, uint32_t n, int32_t *dtype);

/* Elementwise store honouring req: dst = v (WRITE/INPLACE) or dst += v (ADD). */
#define NN_STORE(req, dst, v) do { if ((req) == MXP_REQ_ADD) (dst) += (v); else (dst) = (v); } while (0)

/* Zero dst unless req is ADD (then leave it): for kernels that accumulate. */
static inline void nn_prepare(int32_t req, void *dst, uint64_t bytes) {
    if (req != MXP_REQ_ADD && req != MXP_REQ_NULL && dst) memset(dst, 0, bytes);
}

/* ---------------------------------------------------------- threading */
typedef void (*nn_range_fn)(void *arg, int64_t begin, int64_t end);
/* ctx->parallel_for when present, else a serial call. */
int nn_parallel(const mxp_op_ctx *ctx, int64_t n, int64_t grain, nn_range_fn fn, void *arg);

/* Scratch memory from the host pool (64-byte aligned); NULL on failure. */
void *nn_alloc(uint64_t bytes);
void nn_free(void *p);

/* ------------------------------------------------------------- shapes */
static inline int nn_shape_known(const mxp_shape *s) {
    if (s->ndim < 0) return 0;
    for (int i = 0; i < s->ndim; i++) if (s->dims[i] <= 0) return 0;
    return 1;
}
static inline mxp_shape nn_shape(int ndim, const int64_t *dims) {
    mxp_shape s; memset(&s, 0, sizeof s); s.ndim = ndim;
    for (int i = 0; i < ndim; i++) s.dims[i] = dims[i];
    return s;
}
static inline int64_t nn_shape_numel(const mxp_shape *s) {
    int64_t n = 1; for (int i = 0; i < s->ndim; i++) n *= s->dims[i]; return n;
}
/* "(2,3,4)" / "(?)" into buf. */
const char *nn_shape_str(const mxp_shape *s, char *buf, size_t size);
/* Unify *slot with want: fills unknown dims; ESHAPE naming both shapes when
 * they disagree (`what` names the slot, e.g. "weight"). */
int nn_shape_assign(const char *op, const char *what, mxp_shape *slot, const mxp_shape *want);

/* Output spatial size of a window op; < 1 means invalid. */
static inline int64_t nn_conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

/* ---------------------------------------------------------- registration */
int nn_register_fc(mxp_registrar *r);
int nn_register_conv(mxp_registrar *r);
int nn_register_pooling(mxp_registrar *r);
int nn_register_spatial(mxp_registrar *r);   /* spatial.c */
int nn_register_activation(mxp_registrar *r);
int nn_register_softmax_output(mxp_registrar *r);
int nn_register_softmax(mxp_registrar *r);
int nn_register_batchnorm(mxp_registrar *r);
int nn_register_dropout(mxp_registrar *r);
int nn_register_leaky_relu(mxp_registrar *r);
int nn_register_embedding(mxp_registrar *r);
int nn_register_upsampling(mxp_registrar *r);
int nn_register_lrn(mxp_registrar *r);
int nn_register_softmax_ce(mxp_registrar *r);
int nn_register_deconv(mxp_registrar *r);
int nn_register_ext(mxp_registrar *r);
int nn_register_norm_ext(mxp_registrar *r);
int nn_register_detect(mxp_registrar *r);
int nn_register_multibox(mxp_registrar *r); /* multibox.c */
int nn_register_ctc(mxp_registrar *r);      /* ctc_loss.c */
int nn_register_rnn(mxp_registrar *r);        /* rnn.c */

/* Schema helpers. */
#define NN_P(NAME, TYPE, FLAGS, ST, FIELD, DEF, CHOICES, DOC) \
    MXP_PARAM(NAME, TYPE, FLAGS, ST, FIELD, DEF, 0, 0, CHOICES, DOC)
#define NN_PMIN(NAME, TYPE, FLAGS, ST, FIELD, DEF, MIN, DOC) \
    MXP_PARAM(NAME, TYPE, (FLAGS) | MXP_PARAM_HAS_MIN, ST, FIELD, DEF, MIN, 0, NULL, DOC)
#define NN_COUNT(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

#endif /* NN_COMMON_H */

/* Runs the statements once with T = float (f32) or T = double (f64). */
#define NN_TYPED(dt, T, ...) do { \
    if ((dt) == MXP_DTYPE_F32) { typedef float T; __VA_ARGS__ } \
    else { typedef double T; __VA_ARGS__ } } while (0)

/* Row-major GEMM C = alpha*op(A)*op(B) + beta*C in f32 or f64 (OpenBLAS). */
void nn_gemm(int32_t dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
             double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
             double beta, void *c, int64_t ldc);
/* The same GEMM split into 2-4 independent blocks of C on ctx->parallel_for
 * (each block one single-threaded BLAS call); small GEMMs run as one call. */
int nn_gemm_par(const mxp_op_ctx *ctx, int32_t dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                double alpha, const void *a, int64_t lda, const void *b, int64_t ldb,
                double beta, void *c, int64_t ldc);
/* Makes OpenBLAS single-threaded (pack init; see nn_common.c for why). */
void nn_blas_init(void);

/* Softmax over the middle axis of an (O, K, S) view, f32/f64, parallel over
 * O*S rows; log_out gives log-softmax.  y may alias x.  (softmax.c) */
int nn_softmax_axis(const mxp_op_ctx *ctx, int32_t dt, const void *x, void *y, int32_t req,
                    int64_t O, int64_t K, int64_t S, double temperature, int log_out);
