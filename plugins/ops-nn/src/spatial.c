/* spatial.c — MXNet 1.x's spatial transformer family, on the float64
 * driver (nn_dense.h):
 *   GridGenerator (transform_type affine | warp, target_shape (H, W)):
 *     affine: data (N, 6) is theta = [[a, b, c], [d, e, f]]; output
 *     (N, 2, H, W) holds, for each target pixel with normalised coordinates
 *     x_t = -1 + 2 w / (W - 1), y_t = -1 + 2 h / (H - 1), the source point
 *     (a x_t + b y_t + c, d x_t + e y_t + f) — channel 0 is x, 1 is y;
 *     warp: data (N, 2, H, W) is a flow in pixels; output is the flow plus
 *     the pixel's own coordinates, normalised to [-1, 1] by (W-1)/2, (H-1)/2;
 *   BilinearSampler (data (N, C, H, W), grid (N, 2, Ho, Wo)): output
 *     (N, C, Ho, Wo) samples data at x = (grid_x + 1)(W - 1)/2,
 *     y = (grid_y + 1)(H - 1)/2 bilinearly; neighbours outside the image
 *     count as 0.  Gradients to data and grid (piecewise linear: at an
 *     integer coordinate the right-hand slope, as MXNet's floor);
 *   SpatialTransformer (data, loc (N, 6); target_shape, transform_type
 *     affine, sampler_type bilinear): GridGenerator affine then
 *     BilinearSampler, gradients to data and loc.
 * A target side of 1 is refused (MXNet divides by W - 1 = 0 and returns
 * NaN).  cudnn_off is accepted and ignored (there is no cuDNN path on the
 * CPU). */
#include <math.h>

#include "nn_dense.h"

static const char *const gg_types[] = {"affine", "warp", NULL};
static const char *const st_types[] = {"affine", NULL};
static const char *const st_samplers[] = {"bilinear", NULL};

typedef struct gg_params {
    int32_t transform_type, pad;
    mxp_param_shape target_shape;
} gg_params;

typedef struct bs_params {
    int32_t cudnn_off, pad;
} bs_params;

typedef struct st_params {
    mxp_param_shape target_shape;
    int32_t transform_type, sampler_type, cudnn_off, pad;
} st_params;

static const mxp_param_def gg_schema[] = {
    NN_P("transform_type", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, gg_params, transform_type, NULL, gg_types,
         "The type of transformation. For `affine`, input data should be an affine matrix of size (batch, 6). "
         "For `warp`, input data should be an optical flow of size (batch, 2, h, w)."),
    NN_P("target_shape", MXP_PARAM_SHAPE, 0, gg_params, target_shape, "(0,0)", NULL,
         "Specifies the output shape (H, W). This is required if transformation type is `affine`. If "
         "transformation type is `warp`, this parameter is ignored."),
};
static const mxp_param_def bs_schema[] = {
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, bs_params, cudnn_off, "False", NULL,
         "whether to turn cudnn off (accepted; no cuDNN on the CPU)"),
};
static const mxp_param_def st_schema[] = {
    NN_P("target_shape", MXP_PARAM_SHAPE, 0, st_params, target_shape, "(0,0)", NULL,
         "output shape(H, W) of next layer pooling"),
    NN_P("transform_type", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, st_params, transform_type, NULL, st_types,
         "transformation type"),
    NN_P("sampler_type", MXP_PARAM_ENUM, MXP_PARAM_REQUIRED, st_params, sampler_type, NULL, st_samplers,
         "sampling type"),
    NN_P("cudnn_off", MXP_PARAM_BOOL, 0, st_params, cudnn_off, "False", NULL,
         "whether to turn cudnn off (accepted; no cuDNN on the CPU)"),
};

static int target_ok(const char *op, const mxp_param_shape *t) {
    if (!t->has_value || t->ndim != 2 || t->dims[0] < 2 || t->dims[1] < 2)
        return NN_ERR(MXP_EINVAL, "%s: target_shape must be (H, W) with H, W >= 2 (the grid spans [-1, 1] "
                      "from the first to the last pixel)", op);
    return MXP_OK;
}

/* ------------------------------------------------------------ GridGenerator */
static int gg_check(mxp_check_params_args *a) {
    const gg_params *p = a->params;
    return p->transform_type == 0 ? target_ok("GridGenerator", &p->target_shape) : MXP_OK;
}

static int gg_shape(mxp_infer_shape_args *a) {
    const gg_params *p = a->params;
    const mxp_shape *d = &a->in[0];
    if (!nn_shape_known(d)) return MXP_EINCOMPLETE;
    mxp_shape o;
    memset(&o, 0, sizeof o);
    o.ndim = 4;
    o.dims[0] = d->dims[0];
    o.dims[1] = 2;
    if (p->transform_type == 0) {
        if (d->ndim != 2 || d->dims[1] != 6)
            return NN_ERR(MXP_ESHAPE, "GridGenerator (affine): data must be (batch, 6)");
        o.dims[2] = p->target_shape.dims[0];
        o.dims[3] = p->target_shape.dims[1];
    } else {
        if (d->ndim != 4 || d->dims[1] != 2 || d->dims[2] < 2 || d->dims[3] < 2)
            return NN_ERR(MXP_ESHAPE, "GridGenerator (warp): data must be a flow (batch, 2, H, W) with H, W >= 2");
        o.dims[2] = d->dims[2];
        o.dims[3] = d->dims[3];
    }
    a->out[0] = o;
    return MXP_OK;
}

static double norm_coord(int64_t i, int64_t n) { return -1.0 + 2.0 * (double)i / (double)(n - 1); }

/* Affine grid of theta (6 values) into g (2, H, W); or, backward, the
 * gradient of theta (6 values, accumulated) from og (2, H, W). */
static void affine_grid(const double *theta, int64_t H, int64_t W, double *g) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
            double x = norm_coord(w, W), y = norm_coord(h, H);
            g[h * W + w] = theta[0] * x + theta[1] * y + theta[2];
            g[H * W + h * W + w] = theta[3] * x + theta[4] * y + theta[5];
        }
}
static void affine_grid_back(const double *og, int64_t H, int64_t W, double *dtheta) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
            double x = norm_coord(w, W), y = norm_coord(h, H), gx = og[h * W + w], gy = og[H * W + h * W + w];
            dtheta[0] += gx * x, dtheta[1] += gx * y, dtheta[2] += gx;
            dtheta[3] += gy * x, dtheta[4] += gy * y, dtheta[5] += gy;
        }
}

static int gg_run(nd_io *io, int back) {
    const gg_params *p = io->params;
    const ndarr *d = &io->in[0];
    int64_t N = d->shape[0];
    if (back && !io->ig[0].v) return MXP_OK;
    if (p->transform_type == 0) {
        int64_t H = p->target_shape.dims[0], W = p->target_shape.dims[1];
        for (int64_t n = 0; n < N; n++) {
            if (back) affine_grid_back(io->og[0].v + n * 2 * H * W, H, W, io->ig[0].v + n * 6);
            else affine_grid(d->v + n * 6, H, W, io->out[0].v + n * 2 * H * W);
        }
        return MXP_OK;
    }
    int64_t H = d->shape[2], W = d->shape[3];
    double sx = 2.0 / (double)(W - 1), sy = 2.0 / (double)(H - 1);
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++) {
                int64_t ix = (n * 2 * H + h) * W + w, iy = ix + H * W;
                if (back) {
                    io->ig[0].v[ix] += io->og[0].v[ix] * sx;
                    io->ig[0].v[iy] += io->og[0].v[iy] * sy;
                } else {
                    io->out[0].v[ix] = (d->v[ix] + (double)w) * sx - 1.0;
                    io->out[0].v[iy] = (d->v[iy] + (double)h) * sy - 1.0;
                }
            }
    return MXP_OK;
}
static int gg_f(nd_io *io) { return gg_run(io, 0); }
static int gg_b(nd_io *io) { return gg_run(io, 1); }
static const nd_info gg_info = {"GridGenerator", gg_f, gg_b};

/* ---------------------------------------------------------- BilinearSampler */
/* Sample one (C, H, W) image at the grid (2, Ho, Wo) into out (C, Ho, Wo);
 * or, backward, accumulate the gradients of image and grid from og.  The
 * four neighbours of (x, y) are weighted (1-dx)(1-dy), dx(1-dy), (1-dx)dy,
 * dx dy; those outside [0, W-1] x [0, H-1] read as 0. */
static void sample(const double *img, const double *grid, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                   double *out, const double *og, double *dimg, double *dgrid) {
    const double hx = (double)(W - 1) / 2.0, hy = (double)(H - 1) / 2.0;
    for (int64_t i = 0; i < Ho * Wo; i++) {
        double x = (grid[i] + 1.0) * hx, y = (grid[Ho * Wo + i] + 1.0) * hy;
        double x0f = floor(x), y0f = floor(y), dx = x - x0f, dy = y - y0f;
        int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f;
        int in_x0 = x0 >= 0 && x0 < W, in_x1 = x0 + 1 >= 0 && x0 + 1 < W;
        int in_y0 = y0 >= 0 && y0 < H, in_y1 = y0 + 1 >= 0 && y0 + 1 < H;
        double gx = 0, gy = 0;
        for (int64_t c = 0; c < C; c++) {
            const double *pl = img + c * H * W;
            double v00 = in_y0 && in_x0 ? pl[y0 * W + x0] : 0, v01 = in_y0 && in_x1 ? pl[y0 * W + x0 + 1] : 0;
            double v10 = in_y1 && in_x0 ? pl[(y0 + 1) * W + x0] : 0, v11 = in_y1 && in_x1 ? pl[(y0 + 1) * W + x0 + 1] : 0;
            if (!og) {
                out[c * Ho * Wo + i] = v00 * (1 - dx) * (1 - dy) + v01 * dx * (1 - dy) + v10 * (1 - dx) * dy + v11 * dx * dy;
                continue;
            }
            double g = og[c * Ho * Wo + i];
            if (dimg) {
                double *dp = dimg + c * H * W;
                if (in_y0 && in_x0) dp[y0 * W + x0] += g * (1 - dx) * (1 - dy);
                if (in_y0 && in_x1) dp[y0 * W + x0 + 1] += g * dx * (1 - dy);
                if (in_y1 && in_x0) dp[(y0 + 1) * W + x0] += g * (1 - dx) * dy;
                if (in_y1 && in_x1) dp[(y0 + 1) * W + x0 + 1] += g * dx * dy;
            }
            gx += g * ((v01 - v00) * (1 - dy) + (v11 - v10) * dy);
            gy += g * ((v10 - v00) * (1 - dx) + (v11 - v01) * dx);
        }
        if (og && dgrid) {
            dgrid[i] += gx * hx;
            dgrid[Ho * Wo + i] += gy * hy;
        }
    }
}

static const char *const bs_args[] = {"data", "grid", NULL};
static int bs_shape(mxp_infer_shape_args *a) {
    const mxp_shape *d = &a->in[0], *g = &a->in[1];
    if (!nn_shape_known(d) || !nn_shape_known(g)) return MXP_EINCOMPLETE;
    if (d->ndim != 4 || g->ndim != 4 || g->dims[1] != 2 || g->dims[0] != d->dims[0])
        return NN_ERR(MXP_ESHAPE, "BilinearSampler: data must be (N, C, H, W) and grid (N, 2, Ho, Wo) with the "
                      "same N");
    if (d->dims[2] < 2 || d->dims[3] < 2) return NN_ERR(MXP_ESHAPE, "BilinearSampler: data H and W must be >= 2");
    mxp_shape o = *d;
    o.dims[2] = g->dims[2];
    o.dims[3] = g->dims[3];
    a->out[0] = o;
    return MXP_OK;
}

static int bs_run(nd_io *io, int back) {
    const ndarr *d = &io->in[0], *g = &io->in[1];
    int64_t N = d->shape[0], C = d->shape[1], H = d->shape[2], W = d->shape[3], Ho = g->shape[2], Wo = g->shape[3];
    for (int64_t n = 0; n < N; n++) {
        const double *img = d->v + n * C * H * W, *grid = g->v + n * 2 * Ho * Wo;
        if (!back) {
            sample(img, grid, C, H, W, Ho, Wo, io->out[0].v + n * C * Ho * Wo, NULL, NULL, NULL);
            continue;
        }
        sample(img, grid, C, H, W, Ho, Wo, NULL, io->og[0].v + n * C * Ho * Wo,
               io->ig[0].v ? io->ig[0].v + n * C * H * W : NULL, io->ig[1].v ? io->ig[1].v + n * 2 * Ho * Wo : NULL);
    }
    return MXP_OK;
}
static int bs_f(nd_io *io) { return bs_run(io, 0); }
static int bs_b(nd_io *io) { return bs_run(io, 1); }
static const nd_info bs_info = {"BilinearSampler", bs_f, bs_b};

/* ------------------------------------------------------- SpatialTransformer */
static const char *const st_args[] = {"data", "loc", NULL};
static int st_check(mxp_check_params_args *a) {
    const st_params *p = a->params;
    return target_ok("SpatialTransformer", &p->target_shape);
}
static int st_shape(mxp_infer_shape_args *a) {
    const st_params *p = a->params;
    const mxp_shape *d = &a->in[0], *l = &a->in[1];
    if (!nn_shape_known(d) || !nn_shape_known(l)) return MXP_EINCOMPLETE;
    if (d->ndim != 4 || l->ndim != 2 || l->dims[1] != 6 || l->dims[0] != d->dims[0])
        return NN_ERR(MXP_ESHAPE, "SpatialTransformer: data must be (N, C, H, W) and loc (N, 6)");
    if (d->dims[2] < 2 || d->dims[3] < 2) return NN_ERR(MXP_ESHAPE, "SpatialTransformer: data H and W must be >= 2");
    mxp_shape o = *d;
    o.dims[2] = p->target_shape.dims[0];
    o.dims[3] = p->target_shape.dims[1];
    a->out[0] = o;
    return MXP_OK;
}

static int st_run(nd_io *io, int back) {
    const st_params *p = io->params;
    const ndarr *d = &io->in[0], *loc = &io->in[1];
    int64_t N = d->shape[0], C = d->shape[1], H = d->shape[2], W = d->shape[3];
    int64_t Ho = p->target_shape.dims[0], Wo = p->target_shape.dims[1];
    double *grid = nn_alloc((uint64_t)(2 * Ho * Wo) * sizeof *grid);
    double *dgrid = back ? nn_alloc((uint64_t)(2 * Ho * Wo) * sizeof *dgrid) : NULL;
    if (!grid || (back && !dgrid)) {
        nn_free(grid);
        nn_free(dgrid);
        return NN_ERR(MXP_ENOMEM, "SpatialTransformer: out of memory for a %lldx%lld grid", (long long)Ho,
                      (long long)Wo);
    }
    for (int64_t n = 0; n < N; n++) {
        const double *img = d->v + n * C * H * W;
        affine_grid(loc->v + n * 6, Ho, Wo, grid);
        if (!back) {
            sample(img, grid, C, H, W, Ho, Wo, io->out[0].v + n * C * Ho * Wo, NULL, NULL, NULL);
            continue;
        }
        memset(dgrid, 0, (size_t)(2 * Ho * Wo) * sizeof *dgrid);
        sample(img, grid, C, H, W, Ho, Wo, NULL, io->og[0].v + n * C * Ho * Wo,
               io->ig[0].v ? io->ig[0].v + n * C * H * W : NULL, dgrid);
        if (io->ig[1].v) affine_grid_back(dgrid, Ho, Wo, io->ig[1].v + n * 6);
    }
    nn_free(grid);
    nn_free(dgrid);
    return MXP_OK;
}
static int st_f(nd_io *io) { return st_run(io, 0); }
static int st_b(nd_io *io) { return st_run(io, 1); }
static const nd_info st_info = {"SpatialTransformer", st_f, st_b};

/* ------------------------------------------------------------- registration */
static const char *const data_args[] = {"data", NULL};

#define SDEF(NAME, DOC, SCHEMA, PT, ARGS, SHAPE, CHECK) \
    { .hdr = MXP_HEADER(mxp_op_def), .name = NAME, .doc = DOC, .params = SCHEMA, .n_params = NN_COUNT(SCHEMA), \
      .params_size = PT, .arg_names = ARGS, .infer_shape = SHAPE, \
      .backward_deps = MXP_BWD_OUT_GRAD | MXP_BWD_IN_DATA, .check_params = CHECK }

static const mxp_op_def defs[] = {
    SDEF("GridGenerator", "Generates 2D sampling grid for bilinear sampling.", gg_schema, sizeof(gg_params),
         data_args, gg_shape, gg_check),
    SDEF("BilinearSampler", "Applies bilinear sampling to input feature map.", bs_schema, sizeof(bs_params),
         bs_args, bs_shape, NULL),
    SDEF("SpatialTransformer", "Applies a spatial transformer to input feature map.", st_schema, sizeof(st_params),
         st_args, st_shape, st_check),
};
static const mxp_op_impl impls[] = {
    ND_IMPL("GridGenerator", gg_info), ND_IMPL("BilinearSampler", bs_info), ND_IMPL("SpatialTransformer", st_info),
};

int nn_register_spatial(mxp_registrar *r) {
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        int st = r->add_op(r, &defs[i]);
        if (st < 0 || (st = r->add_impl(r, &impls[i])) < 0) return st;
    }
    return MXP_OK;
}
