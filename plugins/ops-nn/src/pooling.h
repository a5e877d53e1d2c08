/* pooling.h — the Pooling op's parameter record (MXNet 1.x PoolingParam),
 * shared by the op definition and 2-D impl (pooling.c) and the 1-D/3-D
 * impl (pooling_nd.c).  After check_params, kernel/stride/pad have the
 * kernel's rank (1..3) unless global_pool left kernel empty; global_pool
 * ignores all three (window = the data's spatial dims, stride 1, pad 0). */
#ifndef NN_POOLING_H
#define NN_POOLING_H

#include "nn_common.h"

enum { POOL_MAX, POOL_AVG, POOL_SUM, POOL_LP };

typedef struct pool_params {
    mxp_param_shape kernel, stride, pad;
    mxp_param_opt_int p_value;
    int32_t pool_type, global_pool, cudnn_off, pooling_convention, count_include_pad, layout;
} pool_params;

/* Window geometry over three spatial axes (depth, height, width); data of
 * rank 3 or 4 has its leading spatial axes set to 1 (kernel 1, stride 1,
 * pad 0), so one loop nest serves 1-D, 2-D and 3-D. */
typedef struct pool_geom3 {
    int64_t N, C, in[3], k[3], s[3], p[3], out[3];
    int type, cip;
} pool_geom3;

/* Fills g from params and an (nd+2)-D data shape (nd = ndim - 2, 1..3);
 * returns -1 when a window is larger than the padded data (no output). */
int pool_geom3_init(const pool_params *p, const int64_t *shape, int ndim, pool_geom3 *g);

extern const mxp_op_impl pool_nd_impl; /* pooling_nd.c */

#endif
