/* conv_cudnn.c — Convolution on the gpu through cuDNN 9 ("cudnn"): 2-D
 * NCHW float32, groups, stride, dilation, padding, optional bias.  The
 * algorithms are cuDNN's heuristics (cudnnGet*Algorithm_v7: the first
 * result that succeeds and fits the workspace limit), chosen the same way
 * in `workspace` and `create` so the temp space the host reserves is what
 * the chosen algorithms need; the workspace comes from the host's temp
 * space resource (ctx->workspace).  Math is CUDNN_FMA_MATH (true float32,
 * no TF32), so results match the CPU impls within float rounding.
 * Algorithm choice follows MXNet's `cudnn_tune`: 'off' uses the
 * heuristics; 'limited_workspace' times every algorithm with
 * cudnnFind*Algorithm (cudnn_tune=fastest in MXNet's sense: measured, not
 * guessed) and keeps the fastest within the node's `workspace` (MB);
 * 'fastest' the fastest within CONV_WS_LIMIT.  'None' (the default) reads
 * MXP_CUDNN_AUTOTUNE_DEFAULT: 0 heuristics (the default), 1
 * limited_workspace, 2 fastest (MXNet's MXNET_CUDNN_AUTOTUNE_DEFAULT).
 * Timed choices are kept per (geometry, device, mode, limit) for the life
 * of the pack, so `workspace` and `create` — and every later node of that
 * shape — agree on one choice and the host's temp space fits it.
 * The state holds the descriptors and the three algorithms; it is made on
 * the node's device in create.  Every cuDNN status is checked. */
#include "conv_cfg.h"
#include "cu_handles.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Host threads share the (device, no stream) handle for the heuristics. */
static pthread_mutex_t g_query_mu = PTHREAD_MUTEX_INITIALIZER;

/* The most workspace an algorithm may ask for (cuDNN's fastest algorithms
 * for large layers stay far below this). */
#define CONV_WS_LIMIT ((size_t)1 << 30)

typedef struct conv_state {
    conv_cfg cfg;
    int32_t dev;
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_bytes;
} conv_state;

static void state_free(conv_state *s) {
    if (!s) return;
    if (s->x) cudnnDestroyTensorDescriptor(s->x);
    if (s->y) cudnnDestroyTensorDescriptor(s->y);
    if (s->b) cudnnDestroyTensorDescriptor(s->b);
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    if (s->conv) cudnnDestroyConvolutionDescriptor(s->conv);
    free(s);
}

static int make_descs(conv_state *s) {
    const conv_cfg *c = &s->cfg;
    const char *where = "gpu op 'Convolution' (cudnn)";
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->x), where);
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->y), where);
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->b), where);
    CUDNN_TRY(cudnnCreateFilterDescriptor(&s->w), where);
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s->conv), where);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, c->n, c->c, c->h, c->w), where);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, c->n, c->f, c->oh, c->ow), where);
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c->f, 1, 1), where);
    CUDNN_TRY(cudnnSetFilter4dDescriptor(s->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, c->f, c->c / c->groups, c->kh,
                                         c->kw), where);
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(s->conv, c->ph, c->pw, c->sh, c->sw, c->dh, c->dw,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), where);
    CUDNN_TRY(cudnnSetConvolutionGroupCount(s->conv, c->groups), where);
    CUDNN_TRY(cudnnSetConvolutionMathType(s->conv, CUDNN_FMA_MATH), where);
    int n, ch, h, w;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(s->conv, s->x, s->w, &n, &ch, &h, &w), where);
    if (n != c->n || ch != c->f || h != c->oh || w != c->ow)
        return g_cu_host->set_error(MXP_ESHAPE, "%s: cuDNN computes output (%d, %d, %d, %d), the node has (%d, %d, %d, %d)",
                                    where, n, ch, h, w, c->n, c->f, c->oh, c->ow);
    return MXP_OK;
}

/* How the algorithms are chosen (cudnn_tune). */
enum { TUNE_HEURISTIC = 0, TUNE_LIMITED = 1, TUNE_FASTEST = 2 };

static int tune_mode(const mxp_op_params *p, size_t *limit) {
    const char *t = NULL;
    int64_t ws_mb = 1024;
    *limit = CONV_WS_LIMIT;
    if (mxp_param_get_enum(g_cu_host, p, "cudnn_tune", &t) != MXP_OK) t = NULL;
    if (mxp_param_get_int(g_cu_host, p, "workspace", &ws_mb) != MXP_OK) ws_mb = 1024;
    int mode;
    if (t && !strcmp(t, "off")) mode = TUNE_HEURISTIC;
    else if (t && !strcmp(t, "limited_workspace")) mode = TUNE_LIMITED;
    else if (t && !strcmp(t, "fastest")) mode = TUNE_FASTEST;
    else {
        const char *e = getenv("MXP_CUDNN_AUTOTUNE_DEFAULT");
        mode = e && (e[0] == '1' || e[0] == '2') && !e[1] ? e[0] - '0' : TUNE_HEURISTIC;
    }
    if (mode == TUNE_LIMITED && ws_mb > 0 && (size_t)ws_mb << 20 < *limit) *limit = (size_t)ws_mb << 20;
    return mode;
}

/* Timed choices (cudnnFind*), one per configuration; under g_query_mu. */
typedef struct found_algos {
    conv_cfg cfg;
    int32_t dev;
    int mode;
    size_t limit;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws_bytes;
} found_algos;

enum { MAX_FOUND = 256 };
static found_algos g_found[MAX_FOUND];
static int g_n_found, g_next_found;

static found_algos *found_lookup(const conv_state *s, int mode, size_t limit) {
    for (int i = 0; i < g_n_found; i++) {
        found_algos *f = &g_found[i];
        if (f->dev == s->dev && f->mode == mode && f->limit == limit && !memcmp(&f->cfg, &s->cfg, sizeof f->cfg)) return f;
    }
    return NULL;
}

/* cuDNN times every algorithm (its own buffers); results come fastest
 * first: keep the first that succeeded within the limit. */
static int find_algos(conv_state *s, cudnnHandle_t h, int mode, size_t limit) {
    const char *where = "gpu op 'Convolution' (cudnn) algorithm timing (cudnnFind)";
    found_algos *hit = found_lookup(s, mode, limit);
    if (hit) {
        s->fwd = hit->fwd;
        s->bwd_data = hit->bwd_data;
        s->bwd_filter = hit->bwd_filter;
        s->ws_bytes = hit->ws_bytes;
        return MXP_OK;
    }
    enum { MAXA = 16 };
    int got = 0, found;
    size_t need = 0;
    cudnnConvolutionFwdAlgoPerf_t fp[MAXA];
    CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(h, s->x, s->w, s->conv, s->y, MAXA, &got, fp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (fp[i].status == CUDNN_STATUS_SUCCESS && fp[i].memory <= limit) {
            s->fwd = fp[i].algo;
            need = fp[i].memory;
            found = 1;
        }
    if (!found) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no forward algorithm within %zu bytes", where, limit);
    cudnnConvolutionBwdDataAlgoPerf_t dp[MAXA];
    CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithm(h, s->w, s->y, s->conv, s->x, MAXA, &got, dp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (dp[i].status == CUDNN_STATUS_SUCCESS && dp[i].memory <= limit) {
            s->bwd_data = dp[i].algo;
            if (dp[i].memory > need) need = dp[i].memory;
            found = 1;
        }
    if (!found)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no backward-data algorithm within %zu bytes", where, limit);
    cudnnConvolutionBwdFilterAlgoPerf_t wp[MAXA];
    CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithm(h, s->x, s->y, s->conv, s->w, MAXA, &got, wp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (wp[i].status == CUDNN_STATUS_SUCCESS && wp[i].memory <= limit) {
            s->bwd_filter = wp[i].algo;
            if (wp[i].memory > need) need = wp[i].memory;
            found = 1;
        }
    if (!found)
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no backward-filter algorithm within %zu bytes", where, limit);
    s->ws_bytes = need;
    found_algos *f = &g_found[g_next_found];
    g_next_found = (g_next_found + 1) % MAX_FOUND; /* oldest replaced when full */
    if (g_n_found < MAX_FOUND) g_n_found++;
    *f = (found_algos){s->cfg, s->dev, mode, limit, s->fwd, s->bwd_data, s->bwd_filter, s->ws_bytes};
    return MXP_OK;
}

/* cuDNN's heuristics: the first algorithm that succeeds within the limit. */
static int pick_algos(conv_state *s, cudnnHandle_t h) {
    const char *where = "gpu op 'Convolution' (cudnn) algorithm choice";
    enum { MAXA = 16 };
    int got = 0, found;
    size_t need = 0;

    cudnnConvolutionFwdAlgoPerf_t fp[MAXA];
    CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, s->x, s->w, s->conv, s->y, MAXA, &got, fp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (fp[i].status == CUDNN_STATUS_SUCCESS && fp[i].memory <= CONV_WS_LIMIT) {
            s->fwd = fp[i].algo;
            need = fp[i].memory;
            found = 1;
        }
    if (!found) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no forward algorithm for this layer", where);

    cudnnConvolutionBwdDataAlgoPerf_t dp[MAXA];
    CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->w, s->y, s->conv, s->x, MAXA, &got, dp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (dp[i].status == CUDNN_STATUS_SUCCESS && dp[i].memory <= CONV_WS_LIMIT) {
            s->bwd_data = dp[i].algo;
            if (dp[i].memory > need) need = dp[i].memory;
            found = 1;
        }
    if (!found) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no backward-data algorithm for this layer", where);

    cudnnConvolutionBwdFilterAlgoPerf_t wp[MAXA];
    CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->x, s->y, s->conv, s->w, MAXA, &got, wp), where);
    found = 0;
    for (int i = 0; i < got && !found; i++)
        if (wp[i].status == CUDNN_STATUS_SUCCESS && wp[i].memory <= CONV_WS_LIMIT) {
            s->bwd_filter = wp[i].algo;
            if (wp[i].memory > need) need = wp[i].memory;
            found = 1;
        }
    if (!found) return g_cu_host->set_error(MXP_EUNSUPPORTED, "%s: no backward-filter algorithm for this layer", where);
    s->ws_bytes = need;
    return MXP_OK;
}

/* A state for the query's configuration on its device (the calling thread
 * is switched to that device: callers are host threads, not workers). */
static int state_for(const mxp_impl_query_args *a, conv_state **out) {
    *out = NULL;
    char reason[256] = "";
    conv_state *s = calloc(1, sizeof *s);
    if (!s) return g_cu_host->set_error(MXP_ENOMEM, "gpu op 'Convolution' (cudnn): out of memory");
    int rc = conv_cfg_query(a, &s->cfg, reason, sizeof reason);
    if (rc == 0) rc = g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Convolution' (cudnn): %s", reason);
    if (rc < 0) {
        state_free(s);
        return rc;
    }
    s->dev = a->device.id;
    rc = cu_require_device(s->dev, "gpu op 'Convolution' (cudnn)");
    if (!rc && cudaSetDevice(s->dev) != cudaSuccess) rc = cu_fail(cudaGetLastError(), "cudaSetDevice", "gpu op 'Convolution'");
    cudnnHandle_t h = NULL;
    if (!rc) rc = make_descs(s);
    if (!rc) {
        size_t limit;
        int mode = tune_mode(mxp_impl_query_op_params(a), &limit);
        pthread_mutex_lock(&g_query_mu);
        rc = cu_dnn_handle(s->dev, NULL, &h);
        if (!rc) rc = mode == TUNE_HEURISTIC ? pick_algos(s, h) : find_algos(s, h, mode, limit);
        pthread_mutex_unlock(&g_query_mu);
    }
    if (rc) {
        state_free(s);
        return rc;
    }
    *out = s;
    return MXP_OK;
}

static int cudnn_supports(mxp_impl_query_args *a) {
    conv_cfg cfg;
    return conv_cfg_query(a, &cfg, a->reason, a->reason_size);
}

static int cudnn_workspace(mxp_impl_query_args *a) {
    conv_state *s;
    int rc = state_for(a, &s);
    if (rc) return rc;
    a->workspace_bytes = s->ws_bytes;
    state_free(s);
    return MXP_OK;
}

static int cudnn_create(mxp_impl_query_args *a) {
    conv_state *s;
    int rc = state_for(a, &s);
    if (rc) return rc;
    a->state = s;
    return MXP_OK;
}

static void cudnn_destroy(const mxp_destroy_args *a) { state_free(a->state); }

static const float k_one = 1.0f, k_zero = 0.0f;

static int check(const mxp_tensor *t, const char *what) {
    if (!t->data || !cu_all_f32_contig(t, 1))
        return g_cu_host->set_error(MXP_EUNSUPPORTED, "gpu op 'Convolution' (cudnn): %s must be a contiguous float32 "
                                    "array", what);
    return MXP_OK;
}

static int workspace_ok(const conv_state *s, const mxp_op_ctx *ctx) {
    if (s->ws_bytes && (!ctx->workspace || ctx->workspace_bytes < s->ws_bytes))
        return g_cu_host->set_error(MXP_EINVAL, "gpu op 'Convolution' (cudnn): needs %zu workspace bytes, got %llu",
                                    s->ws_bytes, (unsigned long long)ctx->workspace_bytes);
    return MXP_OK;
}

static int cudnn_forward(const mxp_forward_args *a) {
    const conv_state *s = a->state;
    int32_t req = a->req ? a->req[0] : MXP_REQ_WRITE;
    if (!s) return g_cu_host->set_error(MXP_EINVAL, "gpu op 'Convolution' (cudnn): no state");
    if (req == MXP_REQ_NULL) return MXP_OK;
    int rc = check(&a->in[0], "data");
    if (!rc) rc = check(&a->in[1], "weight");
    if (!rc && s->cfg.has_bias) rc = check(&a->in[2], "bias");
    if (!rc) rc = check(&a->out[0], "output");
    if (!rc) rc = workspace_ok(s, a->ctx);
    cudnnHandle_t h;
    if (!rc) rc = cu_dnn_handle(s->dev, a->ctx->stream, &h);
    if (rc) return rc;
    const char *where = "gpu op 'Convolution' (cudnn) forward";
    CUDNN_TRY(cudnnConvolutionForward(h, &k_one, s->x, mxp_tensor_ptr(&a->in[0]), s->w, mxp_tensor_ptr(&a->in[1]), s->conv,
                                      s->fwd, a->ctx->workspace, s->ws_bytes, req == MXP_REQ_ADD ? &k_one : &k_zero, s->y,
                                      mxp_tensor_ptr(&a->out[0])),
              where);
    if (s->cfg.has_bias)
        CUDNN_TRY(cudnnAddTensor(h, &k_one, s->b, mxp_tensor_ptr(&a->in[2]), &k_one, s->y, mxp_tensor_ptr(&a->out[0])),
                  where);
    return cu_finish(a->ctx->stream, where);
}

static int cudnn_backward(const mxp_backward_args *a) {
    const conv_state *s = a->state;
    if (!s) return g_cu_host->set_error(MXP_EINVAL, "gpu op 'Convolution' (cudnn): no state");
    const int32_t *req = a->req;
    int rc = check(&a->out_grad[0], "out_grad");
    if (!rc && req[0] != MXP_REQ_NULL) rc = check(&a->in[1], "weight");
    if (!rc && req[1] != MXP_REQ_NULL) rc = check(&a->in[0], "data");
    if (!rc) rc = workspace_ok(s, a->ctx);
    cudnnHandle_t h;
    if (!rc) rc = cu_dnn_handle(s->dev, a->ctx->stream, &h);
    if (rc) return rc;
    const char *where = "gpu op 'Convolution' (cudnn) backward";
    const void *dy = mxp_tensor_ptr(&a->out_grad[0]);
    if (req[0] != MXP_REQ_NULL)
        CUDNN_TRY(cudnnConvolutionBackwardData(h, &k_one, s->w, mxp_tensor_ptr(&a->in[1]), s->y, dy, s->conv, s->bwd_data,
                                               a->ctx->workspace, s->ws_bytes, req[0] == MXP_REQ_ADD ? &k_one : &k_zero,
                                               s->x, mxp_tensor_ptr(&a->in_grad[0])),
                  where);
    if (req[1] != MXP_REQ_NULL)
        CUDNN_TRY(cudnnConvolutionBackwardFilter(h, &k_one, s->x, mxp_tensor_ptr(&a->in[0]), s->y, dy, s->conv,
                                                 s->bwd_filter, a->ctx->workspace, s->ws_bytes,
                                                 req[1] == MXP_REQ_ADD ? &k_one : &k_zero, s->w,
                                                 mxp_tensor_ptr(&a->in_grad[1])),
                  where);
    if (s->cfg.has_bias && a->n_in > 2 && req[2] != MXP_REQ_NULL)
        CUDNN_TRY(cudnnConvolutionBackwardBias(h, &k_one, s->y, dy, req[2] == MXP_REQ_ADD ? &k_one : &k_zero, s->b,
                                               mxp_tensor_ptr(&a->in_grad[2])),
                  where);
    return cu_finish(a->ctx->stream, where);
}

static const mxp_op_impl g_conv_cudnn = {
    MXP_HEADER(mxp_op_impl), "Convolution", "cudnn", "gpu", MXP_RANK_PRIMARY, 0,
    "cuDNN 9, heuristic algorithms, workspace from temp space (2-D NCHW float32)",
    cudnn_supports, cudnn_workspace, cudnn_create, cudnn_forward, cudnn_backward, cudnn_destroy, NULL,
};

int cu_reg_conv_cudnn(mxp_registrar *r) { return r->add_impl(r, &g_conv_cudnn); }
