/* iter_harness.h — drive a data-iterator pack directly, without the host
 * runtime: dlopen the .so, call mxp_plugin_v1 -> init with a minimal fake
 * mxp_host and a registrar that captures mxp_iter_def registrations, parse
 * kwargs into the pack's parameter struct, allocate the batch arrays that
 * `provide` asks for, and call create/reset/next/destroy.
 *
 * The parser here is a stand-in for the host's (runtime/src/plugin/params.c):
 * it handles INT, FLOAT, BOOL and STRING with MXNet's spellings, HAS_MIN /
 * HAS_MAX, REQUIRED and unknown keys; other types are rejected.  It is what
 * the fake host's parse_params slot points to.  The last message a pack
 * passed to set_error (and the last log line) are kept for assertions.
 * One harness at a time per process (the fake host is static). */
#ifndef MXP_TEST_ITER_HARNESS_H
#define MXP_TEST_ITER_HARNESS_H

#include <mxp/plugin.h>

#define ITER_HARNESS_MAX_DEFS 8
#define ITER_HARNESS_MAX_ENTRIES 8

typedef struct iter_harness {
    void *dl;
    const mxp_plugin_desc *desc;
    const mxp_iter_def *defs[ITER_HARNESS_MAX_DEFS];
    uint32_t n_defs;
    int initialized;         /* init returned MXP_OK: fini is due        */
} iter_harness;

/* One created iterator with its parsed params and batch arrays. */
typedef struct iter_instance {
    const mxp_iter_def *def;
    void *params;            /* def->params_size bytes                     */
    void *state;
    uint32_t n_data, n_label;
    char names[ITER_HARNESS_MAX_ENTRIES][64];
    mxp_shape shapes[ITER_HARNESS_MAX_ENTRIES];
    int32_t dtypes[ITER_HARNESS_MAX_ENTRIES];
    int64_t shape_storage[ITER_HARNESS_MAX_ENTRIES][MXP_MAX_NDIM];
    mxp_tensor tensors[ITER_HARNESS_MAX_ENTRIES]; /* data then label        */
    void *bufs[ITER_HARNESS_MAX_ENTRIES];
    int64_t numel[ITER_HARNESS_MAX_ENTRIES];
    uint64_t *index;         /* batch entries                               */
    uint32_t index_capacity;
} iter_instance;

/* The fake host table handed to packs. */
const mxp_host *iter_harness_host(void);
/* Last message passed to host.set_error ("" if none) / to host.log. */
const char *iter_harness_error(void);
const char *iter_harness_log(void);
void iter_harness_clear_error(void);

/* Load and init the pack at so_path.  Status; message in iter_harness_error(). */
int iter_harness_open(iter_harness *h, const char *so_path);
void iter_harness_close(iter_harness *h);
const mxp_iter_def *iter_harness_find(const iter_harness *h, const char *name);

/* Parse kwargs (defaults for the rest) into out (def-described struct). */
int iter_harness_parse_params(const mxp_param_def *defs, uint32_t n_defs, const char *const *keys,
                              const char *const *vals, uint32_t n_kwargs, void *out, const char *what);
void iter_harness_free_params(const mxp_param_def *defs, uint32_t n_defs, void *params);

/* parse + create + provide + allocate.  On failure *inst is released. */
int iter_harness_create(const mxp_iter_def *def, const char *const *keys, const char *const *vals,
                        uint32_t n_kwargs, iter_instance *inst);
int iter_harness_reset(iter_instance *inst, uint64_t epoch);
/* Fill the next batch; *has_batch and *pad as the pack reported.  The
 * index array is passed when with_index is non-zero. */
int iter_harness_next(iter_instance *inst, int with_index, int *has_batch, int *pad);
void iter_harness_destroy(iter_instance *inst);
/* Float view of entry i (data entries first, then labels). */
float *iter_harness_f32(const iter_instance *inst, uint32_t i);

#endif /* MXP_TEST_ITER_HARNESS_H */
