/* common.h — shared machinery of the ops-basic pack (internal, not ABI).
 *
 * What it gives the family files:
 *   - the host table saved at init (ob_host) and ob_err() for failures;
 *   - dtype-generic element load/store (every mxp_dtype, through double);
 *   - ob_it, a row-major odometer over a strided view;
 *   - ob_view, an owned copy of a tensor view whose shape/strides can be
 *     rewritten (transpose, slice, concat pieces are all views + ob_copy);
 *   - ob_copy / ob_fill honouring req (write / inplace / add);
 *   - ob_ew, the elementwise driver: a kernel is a pair of typed,
 *     contiguous, vectorizable loops (float, double); ob_ew calls it on the
 *     whole array when every tensor is dense and of the kernel's type, and
 *     otherwise on chunks gathered from strided views (stride 0 = broadcast)
 *     and converted to double, scattering the result back with req.
 * What it does not do: shape inference, parameter parsing (the host does).
 * Invariants: all index arithmetic is int64; views never exceed
 * MXP_MAX_NDIM; nothing here allocates except through ob_host. */
#ifndef OPS_BASIC_COMMON_H
#define OPS_BASIC_COMMON_H

#include <mxp/plugin.h>
#include <string.h>

extern const mxp_host *ob_host;

/* Describe a failure through the host (when known) and return status. */
int ob_err(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------ dtypes */
double ob_load(const void *p, int32_t dtype);
void ob_store(void *p, int32_t dtype, double v);
static inline void ob_store_req(void *p, int32_t dtype, double v, int req) {
    if (req == MXP_REQ_ADD) v += ob_load(p, dtype);
    ob_store(p, dtype, v);
}
static inline char *ob_base(const mxp_tensor *t) {
    return (char *)t->data + t->byte_offset;
}

/* ------------------------------------------------------------- views */
typedef struct ob_view {
    mxp_tensor t;                  /* shape/strides point into this struct */
    int64_t shape[MXP_MAX_NDIM];
    int64_t strides[MXP_MAX_NDIM];
} ob_view;

/* Copy t into v with explicit strides (row-major when t->strides is NULL).
 * The view must not be copied by value afterwards (self-pointers); use
 * ob_view_fix after moving it. */
void ob_view_of(ob_view *v, const mxp_tensor *t);
static inline void ob_view_fix(ob_view *v) { v->t.shape = v->shape; v->t.strides = v->strides; }
/* Row-major strides of a shape. */
void ob_rowmajor(int nd, const int64_t *shape, int64_t *strides);
int64_t ob_numel(int nd, const int64_t *shape);

/* ----------------------------------------------------------- odometer */
typedef struct ob_it {
    int nd;
    int64_t shape[MXP_MAX_NDIM], st[MXP_MAX_NDIM], idx[MXP_MAX_NDIM];
    int64_t off;                    /* element offset from ob_base         */
} ob_it;
/* Position at row-major linear index `start` of t's own shape. */
void ob_it_init(ob_it *it, const mxp_tensor *t, int64_t start);
static inline void ob_it_next(ob_it *it) {
    for (int d = it->nd - 1; d >= 0; d--) {
        it->off += it->st[d];
        if (++it->idx[d] < it->shape[d]) return;
        it->off -= it->st[d] * it->shape[d];
        it->idx[d] = 0;
    }
}

/* dst (in its own row-major order) = src (in its own row-major order);
 * numel must match; converts dtypes; req write/inplace/add/null. */
int ob_copy(const mxp_tensor *src, const mxp_tensor *dst, int req);
/* Contiguous float32 <-> bfloat16 of n elements (bf16_convert.c); src and
 * dst must not overlap. */
void ob_f32_to_bf16_n(const void *src, void *dst, int64_t n);
void ob_bf16_to_f32_n(const void *src, void *dst, int64_t n);
/* dst = v (write/inplace) or dst += v (add). */
int ob_fill(const mxp_tensor *dst, double v, int req);

/* ------------------------------------------------------- elementwise */
typedef struct ob_env {
    double s;                       /* the op's scalar                     */
    double a, b, c, d, e2, f;       /* op-specific constants                */
} ob_env;
/* n contiguous elements; in[0..3] (unused entries NULL); out may alias an
 * input exactly (inplace), never partially. */
typedef void (*ob_kf32)(int64_t n, const float *const *in, float *out, int req, const ob_env *e);
typedef void (*ob_kf64)(int64_t n, const double *const *in, double *out, int req, const ob_env *e);
typedef struct ob_kernel {
    ob_kf32 f32;
    ob_kf64 f64;
} ob_kernel;

#define OB_MAX_EW_IN 4
/* out = k(in...) elementwise; every in[i] has out's shape (strides may be
 * anything, including 0).  ctx may be NULL (then serial). */
int ob_ew(const mxp_op_ctx *ctx, int n_in, const mxp_tensor *const *in,
          const mxp_tensor *out, int req, const ob_kernel *k, const ob_env *e);

/* Define a kernel NAME from an expression over A[i], B[i], C[i], D[i] (the
 * inputs, typed T = float or double), s (the scalar as T) and e (ob_env).
 * Include <tgmath.h> before using it so exp/log/... follow T. */
#define OB_KBODY(EXPR)                                                      \
    const T *A = in[0], *B = in[1], *C = in[2], *D = in[3];                 \
    const T s = (T)e->s;                                                    \
    (void)A; (void)B; (void)C; (void)D; (void)s;                            \
    if (req == MXP_REQ_ADD) {                                               \
        for (int64_t i = 0; i < n; i++) out[i] += (T)(EXPR);                \
    } else {                                                                \
        for (int64_t i = 0; i < n; i++) out[i] = (T)(EXPR);                 \
    }
#define OB_KERNEL(NAME, EXPR)                                               \
    static void NAME##_f32(int64_t n, const float *const *in, float *out,   \
                           int req, const ob_env *e) {                      \
        typedef float T; OB_KBODY(EXPR)                                     \
    }                                                                       \
    static void NAME##_f64(int64_t n, const double *const *in, double *out, \
                           int req, const ob_env *e) {                      \
        typedef double T; OB_KBODY(EXPR)                                    \
    }                                                                       \
    static const ob_kernel NAME = { NAME##_f32, NAME##_f64 };

/* ------------------------------------------------------------ shapes */
static inline void ob_shape_set(mxp_shape *s, int nd, const int64_t *dims) {
    s->ndim = nd; s->reserved = 0;
    for (int i = 0; i < nd; i++) s->dims[i] = dims[i];
}
/* 1 when rank and every dim are known. */
static inline int ob_shape_known(const mxp_shape *s) {
    if (s->ndim < 0) return 0;
    for (int i = 0; i < s->ndim; i++) if (s->dims[i] <= 0) return 0;
    return 1;
}
/* "(2,3,4)" into buf. */
const char *ob_shape_str(const mxp_shape *s, char *buf, size_t n);

/* Registration helpers: one "default" cpu impl per op. */
int ob_add_op(mxp_registrar *r, const mxp_op_def *def, const mxp_op_impl *impl);

/* Registration entry points of the family files. */
int ob_reg_unary(mxp_registrar *r);
int ob_reg_binary(mxp_registrar *r);
int ob_reg_scalar(mxp_registrar *r);
int ob_reg_reduce(mxp_registrar *r);
int ob_reg_dot(mxp_registrar *r);
int ob_reg_shape(mxp_registrar *r);
int ob_reg_join(mxp_registrar *r);
int ob_reg_index(mxp_registrar *r);
int ob_reg_cast(mxp_registrar *r);
int ob_reg_init(mxp_registrar *r);
int ob_reg_random(mxp_registrar *r);
int ob_reg_sum_n(mxp_registrar *r);
int ob_reg_optimizer(mxp_registrar *r);
int ob_reg_math_ext(mxp_registrar *r);
int ob_reg_shape_ext(mxp_registrar *r);
int ob_reg_index_ext(mxp_registrar *r);
int ob_reg_reduce_ext(mxp_registrar *r);

#define OB_IMPL_UD(OPNAME, FWD, BWD, UD)                                    \
    { MXP_HEADER(mxp_op_impl), OPNAME, "default", "cpu", MXP_RANK_PRIMARY,  \
      0, NULL, NULL, NULL, NULL, FWD, BWD, NULL, (void *)(UD) }
#define OB_IMPL(OPNAME, FWD, BWD) OB_IMPL_UD(OPNAME, FWD, BWD, NULL)

#endif /* OPS_BASIC_COMMON_H */
