/* nn_harness.h — a minimal direct harness for pack tests: dlopen a pack,
 * init it with a fake host (errors, 2-thread parallel_for, pooled-ish
 * memory, a toy RNG, the schema-driven params parser), and run one op impl
 * on plain arrays.  It does not go through the registry or the engine
 * (tests of those live elsewhere); it exists so op kernels can be checked
 * against independent references before mxp_invoke is available.
 *
 * Usage: nnh_node n; nnh_node_init(&n, pack, "Convolution", "gemm",
 * "kernel=(3,3) num_filter=8", MXP_DTYPE_F32); set n.in_shape[0];
 * nnh_node_infer(&n); nnh_node_alloc(&n); fill n.in[i]; nnh_node_forward;
 * fill n.out_grad; nnh_node_backward; nnh_node_free. */
#ifndef NN_HARNESS_H
#define NN_HARNESS_H

#include <mxp/plugin.h>

#define NNH_MAX 8

typedef struct nnh_pack {
    void *dl;
    const mxp_plugin_desc *desc;
    const mxp_op_def *defs[64];
    int n_defs;
    const mxp_op_impl *impls[128];
    int n_impls;
} nnh_pack;

typedef struct nnh_node {
    nnh_pack *pack;
    const mxp_op_def *def;
    const mxp_op_impl *impl;
    void *params;
    int32_t dtype;
    uint32_t n_in, n_out, n_aux;
    char in_names[NNH_MAX][MXP_NAME_MAX];
    mxp_shape in_shape[NNH_MAX], out_shape[NNH_MAX], aux_shape[NNH_MAX];
    int32_t in_dtype[NNH_MAX];          /* defaults to dtype; set e.g. label */
    void *in[NNH_MAX], *out[NNH_MAX], *aux[NNH_MAX];
    void *in_grad[NNH_MAX], *out_grad[NNH_MAX];
    void *state;
    void *ws;
    uint64_t ws_bytes;
    char reason[256];
} nnh_node;

/* Loads $(MXP_BUILD_DIR)/plugins/libmxp-<name>.so; NULL on failure
 * (nnh_error() says why). */
nnh_pack *nnh_load(const char *pack_name);
void nnh_unload(nnh_pack *p);
const char *nnh_error(void);
const mxp_op_def *nnh_def(nnh_pack *p, const char *op);
const mxp_op_impl *nnh_impl(nnh_pack *p, const char *op, const char *impl);

/* Parses "k=v k2=(1,2)" against a schema into a calloc'd struct. */
int nnh_parse(const mxp_param_def *defs, uint32_t n, uint32_t size, const char *kwargs, void **out);

int nnh_node_init(nnh_node *n, nnh_pack *p, const char *op, const char *impl,
                  const char *kwargs, int32_t dtype);
/* Calls infer_shape; returns its status. */
int nnh_node_infer(nnh_node *n);
/* supports (0/1/neg), then allocates every buffer (zeroed), workspace and state. */
int nnh_node_alloc(nnh_node *n, int is_train);
int nnh_node_forward(nnh_node *n, int is_train, const int32_t *req /* NULL = write */);
int nnh_node_backward(nnh_node *n, const int32_t *req /* NULL = write */);
void nnh_node_free(nnh_node *n);
int64_t nnh_numel(const mxp_shape *s);

/* Host services the fake host offers (also for tests). */
const mxp_host *nnh_host(void);

/* Deterministic uniform [lo,hi) */
double nnh_rand(uint64_t *state, double lo, double hi);

#endif
