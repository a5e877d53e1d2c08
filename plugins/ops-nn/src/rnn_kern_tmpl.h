/* rnn_kern_tmpl.h — the fused RNN's forward and backward for one element
 * type, included twice by rnn_kern.c with RT (float, double), RK(name)
 * (the suffixed function name), RT_EXP and RT_TANH defined.  Layouts and
 * formulas: rnn_kern.c.  Not a header of its own: no include guard.
 *
 * Buffers (elements of RT; ysz = T*N*D*H, one layer's output):
 *   ys    L * ysz           every layer's output (T, N, D*H)
 *   xin   (L-1) * ysz       dropped inputs of layers 1.. (dropout only)
 *   gates Lg*D * T*N*G*H    LSTM i,f,g,o / GRU r,z,n (activated) per step
 *   aux   Lg*D * T*N*H      LSTM cell c_t / GRU h2h n-part (Wh_n h + bh_n)
 *   gh    N*G*H             one step's h2h product
 * with Lg = L in training (backward reads every layer's gates), else 1. */

typedef struct RK(rk_bufs) {
    RT *ys, *xin, *gates, *aux, *gh;
    int drop;      /* dropout applied between layers */
    uint64_t key;  /* its mask key                   */
    RT *block;
} RK(rk_bufs);

static inline RT RK(rk_sigm)(RT v) { return (RT)1 / ((RT)1 + RT_EXP(-v)); }

static int RK(rk_bufs_alloc)(const rnn_problem *pb, RK(rk_bufs) *b, uint64_t extra, RT **extra_out) {
    int64_t ysz = pb->T * pb->N * pb->D * pb->H, lg = pb->train ? pb->L : 1;
    int64_t tn = pb->T * pb->N, gh = pb->G * pb->H;
    memset(b, 0, sizeof *b);
    b->drop = pb->train && pb->p > 0 && pb->L > 1;
    uint64_t n_ys = (uint64_t)(pb->L * ysz), n_xin = b->drop ? (uint64_t)((pb->L - 1) * ysz) : 0;
    uint64_t n_gates = (uint64_t)(lg * pb->D * tn * gh);
    uint64_t n_aux = pb->mode == RNN_LSTM || pb->mode == RNN_GRU ? (uint64_t)(lg * pb->D * tn * pb->H) : 0;
    uint64_t n_gh = (uint64_t)(pb->N * gh);
    uint64_t total = n_ys + n_xin + n_gates + n_aux + n_gh + extra;
    b->block = nn_alloc(total * sizeof(RT));
    if (!b->block)
        return NN_ERR(MXP_ENOMEM, "RNN: no memory for %llu bytes of scratch", (unsigned long long)(total * sizeof(RT)));
    RT *p = b->block;
    b->ys = p; p += n_ys;
    b->xin = n_xin ? p : NULL; p += n_xin;
    b->gates = p; p += n_gates;
    b->aux = n_aux ? p : NULL; p += n_aux;
    b->gh = p; p += n_gh;
    if (extra_out) *extra_out = p;
    if (b->drop) b->key = rk_dropout_key(pb);
    return MXP_OK;
}

/* Input of layer l: data, the previous layer's output, or its dropped copy. */
static const RT *RK(rk_layer_in)(const rnn_problem *pb, const RK(rk_bufs) *b, int64_t l) {
    int64_t ysz = pb->T * pb->N * pb->D * pb->H;
    if (!l) return pb->x;
    return b->drop ? b->xin + (l - 1) * ysz : b->ys + (l - 1) * ysz;
}

/* One layer, one direction, all steps. */
static int RK(rk_layer_fwd)(const mxp_op_ctx *ctx, const rnn_problem *pb, RK(rk_bufs) *b, int64_t l, int64_t d) {
    const int64_t T = pb->T, N = pb->N, H = pb->H, GH = pb->G * H, DH = pb->D * H, I = rk_in_size(pb, l);
    const int mode = pb->mode;
    const RT *w = pb->w;
    const RT *wx = w + rk_w_off(pb, l, d), *wh = wx + GH * I;
    const RT *bx = w + rk_b_off(pb, l, d), *bh = bx + GH;
    const RT *x = RK(rk_layer_in)(pb, b, l);
    RT *y = b->ys + l * T * N * DH;
    int64_t gl = pb->train ? l : 0;
    RT *gt = b->gates + (gl * pb->D + d) * T * N * GH;
    RT *aux = b->aux ? b->aux + (gl * pb->D + d) * T * N * H : NULL;
    const RT *h0 = (const RT *)pb->hx + (l * pb->D + d) * N * H;
    const RT *c0 = pb->cx ? (const RT *)pb->cx + (l * pb->D + d) * N * H : NULL;
    RT *gh = b->gh;
    int rc = rk_gemm(ctx, pb->dtype, 0, 1, T * N, GH, I, x, I, wx, I, 0, gt);
    if (rc < 0) return rc;
    for (int64_t r = 0; r < T * N; r++) {
        RT *g = gt + r * GH;
        if (mode == RNN_GRU) for (int64_t j = 0; j < GH; j++) g[j] += bx[j];
        else for (int64_t j = 0; j < GH; j++) g[j] += bx[j] + bh[j];
    }
    for (int64_t s = 0; s < T; s++) {
        int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
        const RT *hp = s ? y + tp * N * DH + d * H : h0;
        int64_t ldh = s ? DH : H;
        if ((rc = rk_gemm(ctx, pb->dtype, 0, 1, N, GH, H, hp, ldh, wh, H, 0, gh)) < 0) return rc;
        RT *g = gt + t * N * GH, *yt = y + t * N * DH + d * H;
        for (int64_t n = 0; n < N; n++) {
            RT *gn = g + n * GH, *yn = yt + n * DH;
            const RT *hn = gh + n * GH, *hpn = hp + n * ldh;
            if (mode == RNN_LSTM) {
                const RT *cp = s ? aux + tp * N * H + n * H : c0 + n * H;
                RT *cn = aux + t * N * H + n * H;
                for (int64_t j = 0; j < H; j++) {
                    RT i = RK(rk_sigm)(gn[j] + hn[j]), f = RK(rk_sigm)(gn[H + j] + hn[H + j]);
                    RT gg = RT_TANH(gn[2 * H + j] + hn[2 * H + j]), o = RK(rk_sigm)(gn[3 * H + j] + hn[3 * H + j]);
                    RT c = f * cp[j] + i * gg;
                    gn[j] = i; gn[H + j] = f; gn[2 * H + j] = gg; gn[3 * H + j] = o;
                    cn[j] = c;
                    yn[j] = o * RT_TANH(c);
                }
            } else if (mode == RNN_GRU) {
                RT *an = aux + t * N * H + n * H;
                for (int64_t j = 0; j < H; j++) {
                    RT r = RK(rk_sigm)(gn[j] + hn[j] + bh[j]), z = RK(rk_sigm)(gn[H + j] + hn[H + j] + bh[H + j]);
                    RT hnn = hn[2 * H + j] + bh[2 * H + j];
                    RT nn = RT_TANH(gn[2 * H + j] + r * hnn);
                    gn[j] = r; gn[H + j] = z; gn[2 * H + j] = nn;
                    an[j] = hnn;
                    yn[j] = ((RT)1 - z) * nn + z * hpn[j];
                }
            } else {
                for (int64_t j = 0; j < H; j++) {
                    RT a = gn[j] + hn[j];
                    yn[j] = mode == RNN_RELU ? (a > 0 ? a : 0) : RT_TANH(a);
                }
            }
        }
    }
    return MXP_OK;
}

/* Applies the dropout mask of layer l to the output of layer l (into xin). */
static void RK(rk_dropout)(const rnn_problem *pb, RK(rk_bufs) *b, int64_t l, const RT *src, RT *dst) {
    int64_t ysz = pb->T * pb->N * pb->D * pb->H;
    RT scale = (RT)(1.0 / (1.0 - pb->p));
    for (int64_t e = 0; e < ysz; e++) dst[e] = rk_keep(b->key, l, e, pb->p) ? src[e] * scale : 0;
}

/* Copies layer l direction d's final states into hy / cy (req honoured). */
static void RK(rk_final_states)(const rnn_problem *pb, const RK(rk_bufs) *b, const rnn_fwd_out *o, int64_t l,
                                int64_t d) {
    const int64_t T = pb->T, N = pb->N, H = pb->H, DH = pb->D * H;
    int64_t tl = d ? 0 : T - 1, sl = (l * pb->D + d) * N * H;
    if (o->hy && o->req_hy != MXP_REQ_NULL) {
        const RT *src = b->ys + l * T * N * DH + tl * N * DH + d * H;
        RT *dst = (RT *)o->hy + sl;
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < H; j++) NN_STORE(o->req_hy, dst[n * H + j], src[n * DH + j]);
    }
    if (o->cy && o->req_cy != MXP_REQ_NULL && pb->mode == RNN_LSTM) {
        int64_t gl = pb->train ? l : 0;
        const RT *src = b->aux + (gl * pb->D + d) * T * N * H + tl * N * H;
        RT *dst = (RT *)o->cy + sl;
        for (int64_t i = 0; i < N * H; i++) NN_STORE(o->req_cy, dst[i], src[i]);
    }
}

/* Every layer forward; final states into o when o is not NULL. */
static int RK(rk_run)(const mxp_op_ctx *ctx, const rnn_problem *pb, RK(rk_bufs) *b, const rnn_fwd_out *o) {
    int64_t ysz = pb->T * pb->N * pb->D * pb->H;
    for (int64_t l = 0; l < pb->L; l++) {
        for (int64_t d = 0; d < pb->D; d++) {
            int rc = RK(rk_layer_fwd)(ctx, pb, b, l, d);
            if (rc < 0) return rc;
            if (o) RK(rk_final_states)(pb, b, o, l, d);
        }
        if (b->drop && l + 1 < pb->L) RK(rk_dropout)(pb, b, l, b->ys + l * ysz, b->xin + l * ysz);
    }
    return MXP_OK;
}

static int RK(rnn_forward)(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_fwd_out *o) {
    RK(rk_bufs) b;
    int rc = RK(rk_bufs_alloc)(pb, &b, 0, NULL);
    if (rc < 0) return rc;
    rc = RK(rk_run)(ctx, pb, &b, o);
    if (rc == MXP_OK && o->y && o->req_y != MXP_REQ_NULL) {
        int64_t ysz = pb->T * pb->N * pb->D * pb->H;
        const RT *src = b.ys + (pb->L - 1) * ysz;
        RT *dst = o->y;
        for (int64_t e = 0; e < ysz; e++) NN_STORE(o->req_y, dst[e], src[e]);
    }
    nn_free(b.block);
    return rc;
}

/* Scratch of backward beyond the forward's (rk_bufs_alloc's `extra`). */
typedef struct RK(rk_grads) {
    RT *dyl;  /* (T*N, D*H): gradient of the current layer's output        */
    RT *dxl;  /* (T*N, I):   gradient of the current layer's input         */
    RT *dg;   /* (T*N, G*H): gradient of the gates' pre-activations (x path) */
    RT *dgh;  /* GRU: the h path's (n-part times r); else == dg            */
    RT *dhn, *dcn; /* (N, H): gradient flowing to the previous step's h, c */
} RK(rk_grads);

/* Backward of layer l, direction d: accumulates into g->dxl and io->dw,
 * writes dhx/dcx of (l, d). */
static int RK(rk_layer_bwd)(const mxp_op_ctx *ctx, const rnn_problem *pb, const RK(rk_bufs) *b, RK(rk_grads) *g,
                            const rnn_bwd_io *io, int64_t l, int64_t d) {
    const int64_t T = pb->T, N = pb->N, H = pb->H, GH = pb->G * H, DH = pb->D * H, I = rk_in_size(pb, l);
    const int mode = pb->mode;
    const RT *w = pb->w;
    const RT *wx = w + rk_w_off(pb, l, d), *wh = wx + GH * I;
    const RT *x = RK(rk_layer_in)(pb, b, l);
    const RT *y = b->ys + l * T * N * DH;
    const RT *gt = b->gates + (l * pb->D + d) * T * N * GH;
    const RT *aux = b->aux ? b->aux + (l * pb->D + d) * T * N * H : NULL;
    const int64_t sl = (l * pb->D + d) * N * H;
    const RT *h0 = (const RT *)pb->hx + sl;
    const RT *c0 = pb->cx ? (const RT *)pb->cx + sl : NULL;
    RT *dhn = g->dhn, *dcn = g->dcn;
    int rc;
    for (int64_t i = 0; i < N * H; i++) {
        dhn[i] = io->dhy ? ((const RT *)io->dhy)[sl + i] : 0;
        dcn[i] = io->dcy && mode == RNN_LSTM ? ((const RT *)io->dcy)[sl + i] : 0;
    }
    for (int64_t s = T - 1; s >= 0; s--) {
        int64_t t = d ? T - 1 - s : s, tp = d ? t + 1 : t - 1;
        const RT *hp = s ? y + tp * N * DH + d * H : h0;
        int64_t ldh = s ? DH : H;
        const RT *gs = gt + t * N * GH, *dyt = g->dyl + t * N * DH + d * H;
        RT *dgs = g->dg + t * N * GH, *dghs = g->dgh + t * N * GH;
        for (int64_t n = 0; n < N; n++) {
            const RT *gn = gs + n * GH, *dyn = dyt + n * DH, *hpn = hp + n * ldh;
            RT *dgn = dgs + n * GH, *dghn = dghs + n * GH, *dh = dhn + n * H, *dc = dcn + n * H;
            if (mode == RNN_LSTM) {
                const RT *cp = s ? aux + tp * N * H + n * H : c0 + n * H;
                const RT *cn = aux + t * N * H + n * H;
                for (int64_t j = 0; j < H; j++) {
                    RT i = gn[j], f = gn[H + j], gg = gn[2 * H + j], o = gn[3 * H + j];
                    RT tc = RT_TANH(cn[j]), dht = dyn[j] + dh[j];
                    RT dct = dc[j] + dht * o * ((RT)1 - tc * tc);
                    dgn[j] = dct * gg * i * ((RT)1 - i);
                    dgn[H + j] = dct * cp[j] * f * ((RT)1 - f);
                    dgn[2 * H + j] = dct * i * ((RT)1 - gg * gg);
                    dgn[3 * H + j] = dht * tc * o * ((RT)1 - o);
                    dc[j] = dct * f;
                }
            } else if (mode == RNN_GRU) {
                const RT *an = aux + t * N * H + n * H;
                for (int64_t j = 0; j < H; j++) {
                    RT r = gn[j], z = gn[H + j], nn = gn[2 * H + j], dht = dyn[j] + dh[j];
                    RT dan = dht * ((RT)1 - z) * ((RT)1 - nn * nn);
                    RT dz = dht * (hpn[j] - nn);
                    dgn[j] = dghn[j] = dan * an[j] * r * ((RT)1 - r);
                    dgn[H + j] = dghn[H + j] = dz * z * ((RT)1 - z);
                    dgn[2 * H + j] = dan;
                    dghn[2 * H + j] = dan * r;
                    dh[j] = dht * z;
                }
            } else {
                const RT *yn = y + t * N * DH + d * H + n * DH;
                for (int64_t j = 0; j < H; j++) {
                    RT dht = dyn[j] + dh[j], h = yn[j];
                    dgn[j] = mode == RNN_RELU ? (h > 0 ? dht : 0) : dht * ((RT)1 - h * h);
                }
            }
        }
        /* dh_prev = dGh_t . Wh (+ dh z for GRU, already in dhn) */
        if ((rc = rk_gemm(ctx, pb->dtype, 0, 0, N, H, GH, dghs, GH, wh, H, mode == RNN_GRU, dhn)) < 0) return rc;
    }
    if (io->dhx && io->req_dhx != MXP_REQ_NULL)
        for (int64_t i = 0; i < N * H; i++) NN_STORE(io->req_dhx, ((RT *)io->dhx)[sl + i], dhn[i]);
    if (io->dcx && io->req_dcx != MXP_REQ_NULL && mode == RNN_LSTM)
        for (int64_t i = 0; i < N * H; i++) NN_STORE(io->req_dcx, ((RT *)io->dcx)[sl + i], dcn[i]);
    if (io->dw && io->req_dw != MXP_REQ_NULL) {
        RT *dwx = (RT *)io->dw + rk_w_off(pb, l, d), *dwh = dwx + GH * I;
        RT *dbx = (RT *)io->dw + rk_b_off(pb, l, d), *dbh = dbx + GH;
        if ((rc = rk_gemm(ctx, pb->dtype, 1, 0, GH, I, T * N, g->dg, GH, x, I, 1, dwx)) < 0) return rc;
        /* dWh = sum_t dGh_t^T h_prev(t): steps with h_prev in y in one GEMM, the h0 step apart */
        const RT *dgh_y = d ? g->dgh : g->dgh + N * GH, *y_prev = d ? y + N * DH + d * H : y + d * H;
        if ((rc = rk_gemm(ctx, pb->dtype, 1, 0, GH, H, (T - 1) * N, dgh_y, GH, y_prev, DH, 1, dwh)) < 0) return rc;
        if ((rc = rk_gemm(ctx, pb->dtype, 1, 0, GH, H, N, g->dgh + (d ? T - 1 : 0) * N * GH, GH, h0, H, 1, dwh)) < 0)
            return rc;
        for (int64_t r = 0; r < T * N; r++)
            for (int64_t j = 0; j < GH; j++) {
                dbx[j] += g->dg[r * GH + j];
                dbh[j] += g->dgh[r * GH + j];
            }
    }
    return rk_gemm(ctx, pb->dtype, 0, 0, T * N, I, GH, g->dg, GH, wx, I, 1, g->dxl);
}

static int RK(rnn_backward)(const mxp_op_ctx *ctx, const rnn_problem *pb, const rnn_bwd_io *io) {
    const int64_t TN = pb->T * pb->N, ysz = TN * pb->D * pb->H, GH = pb->G * pb->H;
    const int64_t xsz = TN * (pb->C > pb->D * pb->H ? pb->C : pb->D * pb->H);
    uint64_t extra = (uint64_t)(ysz + xsz + TN * GH * (pb->mode == RNN_GRU ? 2 : 1) + 2 * pb->N * pb->H);
    RK(rk_bufs) b;
    RT *ex = NULL;
    rnn_problem tp = *pb;
    tp.train = 1;
    int rc = RK(rk_bufs_alloc)(&tp, &b, extra, &ex);
    if (rc < 0) return rc;
    RK(rk_grads) g;
    g.dyl = ex; ex += ysz;
    g.dxl = ex; ex += xsz;
    g.dg = ex; ex += TN * GH;
    g.dgh = g.dg;
    if (pb->mode == RNN_GRU) { g.dgh = ex; ex += TN * GH; }
    g.dhn = ex; ex += pb->N * pb->H;
    g.dcn = ex;
    if (io->dw && io->req_dw != MXP_REQ_NULL)
        nn_prepare(io->req_dw, io->dw, (uint64_t)rnn_param_count(pb->mode, pb->L, pb->D, pb->C, pb->H) * sizeof(RT));
    if ((rc = RK(rk_run)(ctx, &tp, &b, NULL)) < 0) goto done;
    if (io->dy) memcpy(g.dyl, io->dy, (size_t)ysz * sizeof(RT));
    else memset(g.dyl, 0, (size_t)ysz * sizeof(RT));
    for (int64_t l = pb->L - 1; l >= 0; l--) {
        int64_t isz = TN * rk_in_size(pb, l);
        memset(g.dxl, 0, (size_t)isz * sizeof(RT));
        for (int64_t d = 0; d < pb->D; d++)
            if ((rc = RK(rk_layer_bwd)(ctx, &tp, &b, &g, io, l, d)) < 0) goto done;
        if (l) { /* through the dropout into the previous layer's output */
            RT scale = (RT)(1.0 / (1.0 - pb->p));
            for (int64_t e = 0; e < isz; e++)
                g.dyl[e] = !b.drop ? g.dxl[e] : rk_keep(b.key, l - 1, e, pb->p) ? g.dxl[e] * scale : 0;
        } else if (io->dx && io->req_dx != MXP_REQ_NULL) {
            RT *dx = io->dx;
            for (int64_t e = 0; e < isz; e++) NN_STORE(io->req_dx, dx[e], g.dxl[e]);
        }
    }
done:
    nn_free(b.block);
    return rc;
}
