/* fake_host.h — the one fake host the pack unit tests drive packs with:
 * dlopen a pack's .so, run its init against a fake mxp_host and a
 * recording registrar (ops, impls, SimpleOps, iterators), and call the
 * pack's code directly on plain arrays, doing what the runtime would
 * (parse kwargs, infer shapes and types, allocate outputs, broadcast
 * SimpleOp inputs with stride-0 views and reduce their gradients, pass data
 * NULL for entries backward does not depend on, create/destroy state).
 * op_table.h runs tables of op cases on top of it.
 *
 * Not the runtime: no engine, no memory planning, no impl selection (an op
 * spec "Op" uses the op's first registered impl, "Op@impl" names one).
 * kwargs are parsed by the runtime's own parser (plugin/params.c), so
 * values and messages are the host's.  Host services: set_error and log
 * keep the last message (thread-local / last line); parallel_for is serial
 * in chunks of `grain` with fh_set_threads(1) (the default: kernels see
 * non-zero `begin`) and the caller plus one helper thread with
 * fh_set_threads(2) (blocked kernels split as on a 2-core host); alloc_host
 * is aligned_alloc; the rng is a deterministic splitmix64 stream.
 * Invariants: one fake host per process (its settings are global); a pack
 * handle is used from the test's thread only; test support, so allocation
 * failures abort. */
#ifndef MXP_TESTS_FAKE_HOST_H
#define MXP_TESTS_FAKE_HOST_H

#include <mxp/plugin.h>

#define FH_MAX_IO 16   /* inputs/outputs of one array-level call */
#define FH_NODE_MAX 8  /* inputs/outputs/aux of one node         */

/* ------------------------------------------------------------ the host */
const mxp_host *fh_host(void);
/* Last message a pack (or the fake host) passed to set_error, this thread. */
const char *fh_error(void);
void fh_clear_error(void);
/* Last line passed to host.log (any level; WARN and worse also go to stderr). */
const char *fh_log(void);
/* num_threads() and parallel_for's split: 1 (default) or 2. */
void fh_set_threads(int n);
/* Devices the fake host offers (CPU only; a GPU host would add its own). */
int fh_n_devices(void);
mxp_device fh_device_at(int i);
/* Deterministic uniform [lo, hi) from a splitmix64 state. */
double fh_rand(uint64_t *state, double lo, double hi);

/* --------------------------------------------------------------- packs */
typedef struct fh_pack fh_pack;
/* A path containing '/' is opened as is; otherwise the build tree's
 * $(MXP_BUILD_DIR)/plugins/libmxp-<name>.so.  NULL on failure (fh_error). */
fh_pack *fh_load(const char *name_or_path);
void fh_unload(fh_pack *p);
/* Path of a pack in the build tree. */
#define FH_PACK_PATH(name) MXP_BUILD_DIR "/plugins/libmxp-" name ".so"

/* Lookups by name or alias; NULL when absent. */
const mxp_op_def *fh_op_def(const fh_pack *p, const char *name);
/* impl NULL = the op's first registered impl. */
const mxp_op_impl *fh_impl(const fh_pack *p, const char *op, const char *impl);
const mxp_simple_op_def *fh_simple(const fh_pack *p, const char *name);
const mxp_iter_def *fh_iter_def(const fh_pack *p, const char *name);
/* Registered entries in registration order. */
int fh_n_ops(const fh_pack *p);
const mxp_op_def *fh_op_at(const fh_pack *p, int i);
int fh_n_simple(const fh_pack *p);
const mxp_simple_op_def *fh_simple_at(const fh_pack *p, int i);
int fh_n_impls(const fh_pack *p);
const mxp_op_impl *fh_impl_at(const fh_pack *p, int i);
int fh_n_iters(const fh_pack *p);
const mxp_plugin_desc *fh_pack_desc(const fh_pack *p);

/* -------------------------------------------------------------- params */
/* kw: NULL-terminated key, value, key, value, ..., NULL (may be NULL).
 * Parses into out (zeroed by the caller) with defaults; free with
 * fh_params_free (STRING values are allocated). */
int fh_parse(const mxp_param_def *defs, uint32_t n, const char *const *kw, void *out);
/* "k=v k2=(1, 2)" into a calloc'd struct of `size` bytes in *out. */
int fh_parse_text(const mxp_param_def *defs, uint32_t n, uint32_t size, const char *kwargs, void **out);
void fh_params_free(const mxp_param_def *defs, uint32_t n, void *params);

/* -------------------------------------------------------------- arrays */
/* A contiguous row-major array owned by the test. */
typedef struct fh_arr {
    int32_t dtype;
    int32_t ndim;
    int64_t shape[MXP_MAX_NDIM];
    void *data;
} fh_arr;

fh_arr fh_arr_new(int32_t dtype, int ndim, const int64_t *shape); /* zero-filled */
fh_arr fh_arr_from(int32_t dtype, int ndim, const int64_t *shape, const double *vals);
fh_arr fh_arr_clone(const fh_arr *a);
fh_arr fh_arr_cast(const fh_arr *a, int32_t dtype);
void fh_arr_free(fh_arr *a);
int64_t fh_numel(const fh_arr *a);
int64_t fh_shape_numel(const mxp_shape *s);
double fh_get(const fh_arr *a, int64_t i);
void fh_set(fh_arr *a, int64_t i, double v);
/* Uniform values in [lo, hi) from a fixed seed. */
void fh_fill_uniform(fh_arr *a, uint64_t seed, double lo, double hi);
/* A contiguous CPU tensor view of a (strides NULL). */
mxp_tensor fh_view(const fh_arr *a);
/* Typed element access on raw buffers (float32 / float64 / integers). */
double fh_get_raw(const void *p, int32_t dtype, int64_t i);
void fh_set_raw(void *p, int32_t dtype, int64_t i, double v);

/* ------------------------------------------------- array-level op calls */
/* op is "Name" or "Name@impl".  Forward: out[0..*n_out) are allocated
 * unless out[i].data is set (then used as is, e.g. with req MXP_REQ_ADD).
 * SimpleOps and full ops alike. */
int fh_forward(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in, int *n_out,
               fh_arr *out, int req);
/* Forward with explicit tensor views (strided inputs/outputs); shapes must
 * already be right.  For SimpleOps of kind BROADCAST the views must be
 * shaped like the output. */
int fh_forward_views(fh_pack *p, const char *op, const char *const *kw, int n_in, const mxp_tensor *in,
                     int n_out, const mxp_tensor *out, int req);
/* Backward.  in_grad[i] allocated (zeroed) unless data set; req per input
 * (NULL = all MXP_REQ_WRITE).  out are forward outputs, og out_grads. */
int fh_backward(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in, int n_out,
                const fh_arr *out, const fh_arr *og, fh_arr *in_grad, const int32_t *req);
/* Gradient check at float64 inputs: analytic backward vs central
 * differences of sum(out_k * w_k) with fixed random w (hidden outputs,
 * beyond the def's n_visible_outputs, weigh 0); inputs whose mask bit is 0
 * are skipped (mask -1 = all); also checks that req ADD adds.  0 when
 * |a - n| <= atol + rtol |n| everywhere, else -1, the first mismatch in
 * fh_error(). */
int fh_grad_check(fh_pack *p, const char *op, const char *const *kw, int n_in, const fh_arr *in, uint32_t mask,
                  double eps, double atol, double rtol);

/* ------------------------------------------------------- node-level calls */
/* One op instance with buffers owned by the node, for tests that set
 * shapes and fill inputs themselves:
 *   fh_node n; fh_node_init(&n, P, "Convolution", "gemm", "kernel=(3,3) num_filter=8", MXP_DTYPE_F32);
 *   n.in_shape[0] = ...; fh_node_infer(&n); fh_node_alloc(&n, 1); fill n.in[i];
 *   fh_node_forward(&n, 1, NULL); fill n.out_grad; fh_node_backward(&n, NULL); fh_node_free(&n); */
typedef struct fh_node {
    fh_pack *pack;
    const mxp_op_def *def;
    const mxp_op_impl *impl;
    void *params;
    int32_t dtype;
    uint32_t n_in, n_out, n_aux;
    char in_names[FH_NODE_MAX][MXP_NAME_MAX];
    mxp_shape in_shape[FH_NODE_MAX], out_shape[FH_NODE_MAX], aux_shape[FH_NODE_MAX];
    int32_t in_dtype[FH_NODE_MAX]; /* defaults to dtype; set e.g. a label's */
    /* default to dtype; set e.g. a bfloat16 BatchNorm's float32 mean/var
     * outputs and moving statistics */
    int32_t out_dtype[FH_NODE_MAX], aux_dtype[FH_NODE_MAX];
    void *in[FH_NODE_MAX], *out[FH_NODE_MAX], *aux[FH_NODE_MAX];
    void *in_grad[FH_NODE_MAX], *out_grad[FH_NODE_MAX];
    void *state;
    void *ws;
    uint64_t ws_bytes;
    char reason[256];
} fh_node;

int fh_node_init(fh_node *n, fh_pack *p, const char *op, const char *impl, const char *kwargs, int32_t dtype);
int fh_node_infer(fh_node *n); /* infer_shape's status */
/* supports (its 0/1/negative), then every buffer (zeroed), workspace, state. */
int fh_node_alloc(fh_node *n, int is_train);
int fh_node_forward(fh_node *n, int is_train, const int32_t *req /* NULL = write */);
int fh_node_backward(fh_node *n, const int32_t *req /* NULL = write */);
void fh_node_free(fh_node *n);

/* ----------------------------------------------------------- iterators */
#define FH_ITER_MAX_ENTRIES 8

/* One created iterator with its parsed params and batch arrays. */
typedef struct fh_iter {
    const mxp_iter_def *def;
    void *params; /* def->params_size bytes */
    void *state;
    uint32_t n_data, n_label;
    char names[FH_ITER_MAX_ENTRIES][64];
    mxp_shape shapes[FH_ITER_MAX_ENTRIES];
    int32_t dtypes[FH_ITER_MAX_ENTRIES];
    int64_t shape_storage[FH_ITER_MAX_ENTRIES][MXP_MAX_NDIM];
    mxp_tensor tensors[FH_ITER_MAX_ENTRIES]; /* data then label */
    void *bufs[FH_ITER_MAX_ENTRIES];
    int64_t numel[FH_ITER_MAX_ENTRIES];
    uint64_t *index; /* batch entries */
    uint32_t index_capacity;
} fh_iter;

/* parse + create + provide + allocate (garbage-filled, so a pack that
 * leaves elements unwritten is caught).  On failure *it is released. */
int fh_iter_create(const mxp_iter_def *def, const char *const *keys, const char *const *vals, uint32_t n_kwargs,
                   fh_iter *it);
int fh_iter_reset(fh_iter *it, uint64_t epoch);
/* Fill the next batch; *has_batch and *pad as the pack reported; the index
 * array is passed when with_index is non-zero. */
int fh_iter_next(fh_iter *it, int with_index, int *has_batch, int *pad);
void fh_iter_destroy(fh_iter *it);
/* Float view of entry i (data entries first, then labels). */
float *fh_iter_f32(const fh_iter *it, uint32_t i);

/* ------------------------------------------- internals of fake_host*.c */
/* The op context the fake host hands to kernels (rng only for ops that
 * asked for MXP_RESOURCE_RANDOM). */
mxp_op_ctx fh__ctx(void *ws, uint64_t ws_bytes, int is_train, int use_rng);
void *fh__alloc(uint64_t bytes);
int fh__fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *fh__xcalloc(size_t n, size_t size);

#endif /* MXP_TESTS_FAKE_HOST_H */
