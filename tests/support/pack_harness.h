/* pack_harness.h — drive an operator pack directly, without the registry
 * or the engine: dlopen the .so, run its init against a minimal fake host
 * and a recording registrar, then call SimpleOp and full-op forward /
 * backward on plain contiguous arrays, doing what the host would (parse
 * kwargs, infer shapes and types, allocate outputs, broadcast views with
 * stride 0, reduce broadcast gradients, pass data NULL for entries backward
 * does not depend on).  Also numeric gradient checks by central
 * differences.  For pack unit tests until (and besides) mxp_invoke.
 *
 * Not a host: no engine, no memory planning, no impl selection (the first
 * registered impl of an op is used).  The fake host's parallel_for is
 * serial and its rng is a deterministic splitmix64 stream.
 * Invariants: one pack per process at a time; not thread-safe. */
#ifndef MXP_TESTS_PACK_HARNESS_H
#define MXP_TESTS_PACK_HARNESS_H

#include <mxp/plugin.h>

#define PH_MAX_IO 16

typedef struct ph_pack ph_pack;

/* A contiguous row-major array owned by the test. */
typedef struct ph_arr {
    int32_t dtype;
    int32_t ndim;
    int64_t shape[MXP_MAX_NDIM];
    void *data;
} ph_arr;

/* Load a pack and run its init; NULL on failure (see ph_last_error). */
ph_pack *ph_load(const char *so_path);
void ph_unload(ph_pack *p);
const char *ph_last_error(void);

/* Lookups by name or alias; NULL when absent. */
const mxp_op_def *ph_op_def(const ph_pack *p, const char *name);
const mxp_op_impl *ph_op_impl(const ph_pack *p, const char *op_name);
const mxp_simple_op_def *ph_simple(const ph_pack *p, const char *name);
/* Registered counts and entries (in registration order). */
int ph_n_ops(const ph_pack *p);
const mxp_op_def *ph_op_at(const ph_pack *p, int i);
int ph_n_simple(const ph_pack *p);
const mxp_simple_op_def *ph_simple_at(const ph_pack *p, int i);
int ph_n_impls(const ph_pack *p);
const mxp_op_impl *ph_impl_at(const ph_pack *p, int i);

/* Arrays.  ph_arr_new zero-fills. */
ph_arr ph_arr_new(int32_t dtype, int ndim, const int64_t *shape);
ph_arr ph_arr_from(int32_t dtype, int ndim, const int64_t *shape, const double *vals);
ph_arr ph_arr_clone(const ph_arr *a);
void ph_arr_free(ph_arr *a);
int64_t ph_numel(const ph_arr *a);
double ph_get(const ph_arr *a, int64_t i);
void ph_set(ph_arr *a, int64_t i, double v);
/* Uniform values in [lo, hi) from a fixed seed. */
void ph_fill_uniform(ph_arr *a, uint64_t seed, double lo, double hi);
/* A contiguous tensor view of a (strides NULL). */
mxp_tensor ph_view(const ph_arr *a);

/* Parse kwargs (NULL-terminated key, value, key, value, ..., NULL) into a
 * parameter struct described by defs, applying defaults.  0 or an error. */
int ph_parse(const mxp_param_def *defs, uint32_t n, const char *const *kw, void *out);

/* Forward.  out[0..*n_out) are allocated by the harness unless out[i].data
 * is already set (then used as is, e.g. with req MXP_REQ_ADD).  Works for
 * SimpleOps and full ops. */
int ph_forward(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
               int *n_out, ph_arr *out, int req);
/* Forward with explicit tensor views (strided inputs/outputs); shapes must
 * already be right.  For SimpleOps of kind BROADCAST the views must be
 * shaped like the output. */
int ph_forward_views(ph_pack *p, const char *op, const char *const *kw, int n_in,
                     const mxp_tensor *in, int n_out, const mxp_tensor *out, int req);
/* Backward.  in_grad[i] allocated (zeroed) unless data set; req per input
 * (NULL = all MXP_REQ_WRITE).  out are forward outputs, og out_grads. */
int ph_backward(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
                int n_out, const ph_arr *out, const ph_arr *og, ph_arr *in_grad,
                const int32_t *req);

/* Gradient check of op at the given float64 inputs: analytic backward vs
 * central differences of sum(out_k * w_k) with fixed random w; inputs whose
 * mask bit is 0 are skipped (mask -1 = all); hidden outputs (beyond the
 * def's n_visible_outputs) weigh 0.  Also checks req ADD adds.
 * Returns 0 when |a - n| <= atol + rtol |n| everywhere, else -1 with the
 * first mismatch described in ph_last_error(). */
int ph_grad_check(ph_pack *p, const char *op, const char *const *kw, int n_in, const ph_arr *in,
                  uint32_t mask, double eps, double atol, double rtol);

/* Path of a pack in the build tree. */
#define PH_PACK_PATH(name) MXP_BUILD_DIR "/plugins/libmxp-" name ".so"

#endif /* MXP_TESTS_PACK_HARNESS_H */
