/* onednn_conv.c — oneDNN side of bench/conv: the same five Convolution
 * layers, float32, forward (forward_inference) and forward+backward
 * (forward_training, backward_data, backward_weights with the bias
 * gradient), through oneDNN's C API (Debian libdnnl-dev 2.6, the library
 * PyTorch's oneDNN path calls), each primitive created with format "any" so
 * oneDNN picks its preferred (blocked) layouts.
 *
 * Two times per (layer, pass), both medians of --reps runs after a warm-up:
 *   prim     the primitives alone on data already in their layouts — the
 *            kernel time to beat;
 *   reorder  the reorders a caller holding plain NCHW/OIHW tensors pays
 *            around them: x, w (and dy) into the layouts the primitives
 *            chose, y (and dx, dw) back; an argument whose chosen layout
 *            is the plain one costs nothing.
 * Output, one process = one round (run.sh interleaves it with the mxplug
 * and PyTorch rounds and aggregates):
 *   onednn <layer> <pass> <prim_ms> <reorder_ms> <impls> <layouts>
 * impls: oneDNN's implementation names (fwd[+bwd_data+bwd_weights]);
 * layouts: the src and weights layouts of the forward primitive.
 * Threads: oneDNN here runs on OpenMP, so OMP_NUM_THREADS (run.sh sets 2).
 * Not a test and not part of the runtime: only this bench binary links
 * libdnnl.  A oneDNN failure prints the layer, the call and oneDNN's
 * status and exits 1. */
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct layer {
    const char *name;
    int64_t n, c, h, w, m, k, pad;
} layer;

/* The layers of conv_bench.c and torch_conv.py (keep the three in step). */
static const layer k_layers[] = {
    {"a", 32, 1, 28, 28, 20, 5, 0},   {"b", 32, 20, 12, 12, 50, 5, 0}, {"c", 8, 64, 56, 56, 64, 3, 1},
    {"d", 8, 128, 28, 28, 128, 3, 1}, {"e", 8, 256, 56, 56, 64, 1, 0},
};

static const char *g_where = "";

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        dnnl_status_t st_ = (call);                                                                   \
        if (st_ != dnnl_success) {                                                                    \
            fprintf(stderr, "onednn_conv: layer %s: %s failed: %s\n", g_where, #call, dnnl_status2str(st_)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* --clock cpu: the process's CPU time instead of wall-clock time (with one
 * thread, a kernel's cost that other processes on a loaded machine do not
 * inflate; with more threads it includes their spinning). */
static clockid_t g_clock = CLOCK_MONOTONIC;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A layout as oneDNN's verbose mode spells it: dims a, b, c, d outermost
 * first (capitalised when blocked), then the inner blocks, e.g. aBcd16b
 * (nChw16c) or ABcd16b16a. */
static void layout_str(const dnnl_memory_desc_t *md, char *out, size_t cap) {
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int order[DNNL_MAX_NDIMS], nd = md->ndims;
    if (md->format_kind != dnnl_blocked) {
        snprintf(out, cap, "%s", dnnl_fmt_kind2str(md->format_kind));
        return;
    }
    for (int i = 0; i < nd; i++) order[i] = i;
    for (int i = 0; i < nd; i++) /* outer dims by decreasing stride (stable) */
        for (int j = i + 1; j < nd; j++)
            if (b->strides[order[j]] > b->strides[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    size_t n = 0;
    for (int i = 0; i < nd && n + 1 < cap; i++) {
        int blocked = 0;
        for (int k = 0; k < b->inner_nblks; k++) blocked |= b->inner_idxs[k] == order[i];
        out[n++] = (char)((blocked ? 'A' : 'a') + order[i]);
    }
    out[n] = 0;
    for (int k = 0; k < b->inner_nblks && n < cap; k++)
        n += (size_t)snprintf(out + n, cap - n, "%lld%c", (long long)b->inner_blks[k], (int)('a' + b->inner_idxs[k]));
}

static void fill(dnnl_memory_t m, uint64_t seed) {
    const dnnl_memory_desc_t *md;
    void *p;
    CHECK(dnnl_memory_get_memory_desc(m, &md));
    CHECK(dnnl_memory_get_data_handle(m, &p));
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    float *v = p;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
}

static dnnl_memory_t mem(dnnl_engine_t eng, const dnnl_memory_desc_t *md, uint64_t seed) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    fill(m, seed);
    return m;
}

/* A reorder from one memory to another; the pair is NULL when the two
 * layouts are the same (nothing to pay). */
typedef struct reorder {
    dnnl_primitive_t prim;
    dnnl_memory_t from, to;
} reorder;

static reorder make_reorder(dnnl_engine_t eng, dnnl_memory_t from, dnnl_memory_t to) {
    reorder r = {NULL, from, to};
    const dnnl_memory_desc_t *a, *b;
    CHECK(dnnl_memory_get_memory_desc(from, &a));
    CHECK(dnnl_memory_get_memory_desc(to, &b));
    if (dnnl_memory_desc_equal(a, b)) return r;
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_reorder_primitive_desc_create(&pd, a, eng, b, eng, NULL));
    CHECK(dnnl_primitive_create(&r.prim, pd));
    CHECK(dnnl_primitive_desc_destroy(pd));
    return r;
}

static void run_reorder(const reorder *r, dnnl_stream_t s) {
    if (!r->prim) return;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, r->from}, {DNNL_ARG_TO, r->to}};
    CHECK(dnnl_primitive_execute(r->prim, s, 2, args));
}

/* The memory a primitive wants for an argument: the user's own when the
 * layouts agree, else a new one (filled, so timings see real data). */
static dnnl_memory_t want(dnnl_engine_t eng, dnnl_primitive_desc_t pd, dnnl_query_t q, int idx, dnnl_memory_t user,
                          uint64_t seed) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, idx), *umd;
    CHECK(dnnl_memory_get_memory_desc(user, &umd));
    if (dnnl_memory_desc_equal(md, umd)) return user;
    return mem(eng, md, seed);
}

static const char *impl_of(dnnl_primitive_desc_t pd) {
    const char *s = "?";
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s));
    return s;
}

#define MAXR 12

static void bench_layer(const layer *L, int bwd, int reps, dnnl_engine_t eng, dnnl_stream_t s, double *t) {
    int64_t ho = L->h + 2 * L->pad - L->k + 1, wo = L->w + 2 * L->pad - L->k + 1;
    dnnl_dims_t dx = {L->n, L->c, L->h, L->w}, dw = {L->m, L->c, L->k, L->k}, db = {L->m},
                dy = {L->n, L->m, ho, wo}, strides = {1, 1}, pad = {L->pad, L->pad};
    dnnl_memory_desc_t ux, uw, ub, uy, ax, aw, ay;
    CHECK(dnnl_memory_desc_init_by_tag(&ux, 4, dx, dnnl_f32, dnnl_nchw));
    CHECK(dnnl_memory_desc_init_by_tag(&uw, 4, dw, dnnl_f32, dnnl_oihw));
    CHECK(dnnl_memory_desc_init_by_tag(&ub, 1, db, dnnl_f32, dnnl_x));
    CHECK(dnnl_memory_desc_init_by_tag(&uy, 4, dy, dnnl_f32, dnnl_nchw));
    CHECK(dnnl_memory_desc_init_by_tag(&ax, 4, dx, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&aw, 4, dw, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&ay, 4, dy, dnnl_f32, dnnl_format_tag_any));

    /* The user's plain tensors. */
    dnnl_memory_t x = mem(eng, &ux, 1), w = mem(eng, &uw, 2), b = mem(eng, &ub, 3), y = mem(eng, &uy, 4);
    dnnl_memory_t gy = mem(eng, &uy, 5), gx = mem(eng, &ux, 6), gw = mem(eng, &uw, 7), gb = mem(eng, &ub, 8);

    dnnl_convolution_desc_t fd, bdd, bwd_d;
    CHECK(dnnl_convolution_forward_desc_init(&fd, bwd ? dnnl_forward_training : dnnl_forward_inference,
                                             dnnl_convolution_direct, &ax, &aw, &ub, &ay, strides, pad, pad));
    dnnl_primitive_desc_t fpd, dpd = NULL, wpd = NULL;
    CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
    if (bwd) {
        CHECK(dnnl_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &ax, &aw, &ay, strides, pad, pad));
        CHECK(dnnl_primitive_desc_create(&dpd, &bdd, NULL, eng, fpd));
        CHECK(dnnl_convolution_backward_weights_desc_init(&bwd_d, dnnl_convolution_direct, &ax, &aw, &ub, &ay, strides,
                                                          pad, pad));
        CHECK(dnnl_primitive_desc_create(&wpd, &bwd_d, NULL, eng, fpd));
    }

    /* Memories in the primitives' layouts, and the reorders to/from the
     * user's.  A backward primitive that wants the same layout as the
     * forward one reads the same memory (one reorder, not two). */
    reorder r[MAXR];
    int nr = 0;
    dnnl_memory_t fx = want(eng, fpd, dnnl_query_src_md, 0, x, 1), fw = want(eng, fpd, dnnl_query_weights_md, 0, w, 2),
                  fy = want(eng, fpd, dnnl_query_dst_md, 0, y, 4);
    r[nr++] = make_reorder(eng, x, fx);
    r[nr++] = make_reorder(eng, w, fw);
    dnnl_primitive_t fp, dp = NULL, wp = NULL;
    CHECK(dnnl_primitive_create(&fp, fpd));
    dnnl_exec_arg_t fargs[] = {{DNNL_ARG_SRC, fx}, {DNNL_ARG_WEIGHTS, fw}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, fy}};
    dnnl_exec_arg_t dargs[3], wargs[4];
    dnnl_memory_t extra[8];
    int nextra = 0;
    if (bwd) {
        const dnnl_memory_desc_t *fxmd, *fwmd;
        CHECK(dnnl_memory_get_memory_desc(fx, &fxmd));
        CHECK(dnnl_memory_get_memory_desc(fw, &fwmd));
        /* backward data: dy (user) -> its layout, its weights layout, dx back */
        dnnl_memory_t dgy = want(eng, dpd, dnnl_query_diff_dst_md, 0, gy, 5);
        const dnnl_memory_desc_t *dwmd = dnnl_primitive_desc_query_md(dpd, dnnl_query_weights_md, 0);
        dnnl_memory_t dw_ = dnnl_memory_desc_equal(dwmd, fwmd) ? fw : want(eng, dpd, dnnl_query_weights_md, 0, w, 2);
        dnnl_memory_t dgx = want(eng, dpd, dnnl_query_diff_src_md, 0, gx, 6);
        r[nr++] = make_reorder(eng, gy, dgy);
        if (dw_ != fw) r[nr++] = make_reorder(eng, w, dw_);
        /* backward weights: x in its layout (shared with forward when equal), dy, dw/db back */
        const dnnl_memory_desc_t *wxmd = dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0), *dgymd;
        CHECK(dnnl_memory_get_memory_desc(dgy, &dgymd));
        dnnl_memory_t wx = dnnl_memory_desc_equal(wxmd, fxmd) ? fx : want(eng, wpd, dnnl_query_src_md, 0, x, 1);
        const dnnl_memory_desc_t *wgymd = dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0);
        dnnl_memory_t wgy = dnnl_memory_desc_equal(wgymd, dgymd) ? dgy : want(eng, wpd, dnnl_query_diff_dst_md, 0, gy, 5);
        dnnl_memory_t wgw = want(eng, wpd, dnnl_query_diff_weights_md, 0, gw, 7);
        dnnl_memory_t wgb = want(eng, wpd, dnnl_query_diff_weights_md, 1, gb, 8);
        if (wx != fx) r[nr++] = make_reorder(eng, x, wx);
        if (wgy != dgy) r[nr++] = make_reorder(eng, gy, wgy);
        r[nr++] = make_reorder(eng, fy, y);
        r[nr++] = make_reorder(eng, dgx, gx);
        r[nr++] = make_reorder(eng, wgw, gw);
        r[nr++] = make_reorder(eng, wgb, gb);
        dnnl_memory_t all[] = {dgy, dw_, dgx, wx, wgy, wgw, wgb};
        for (int i = 0; i < 7; i++) {
            dnnl_memory_t u[] = {x, w, b, y, gy, gx, gw, gb, fx, fw, fy};
            int own = 0;
            for (int k = 0; k < 11; k++) own |= all[i] == u[k];
            for (int k = 0; k < nextra; k++) own |= all[i] == extra[k];
            if (!own) extra[nextra++] = all[i];
        }
        CHECK(dnnl_primitive_create(&dp, dpd));
        CHECK(dnnl_primitive_create(&wp, wpd));
        dnnl_exec_arg_t da[] = {{DNNL_ARG_DIFF_DST, dgy}, {DNNL_ARG_WEIGHTS, dw_}, {DNNL_ARG_DIFF_SRC, dgx}};
        dnnl_exec_arg_t wa[] = {{DNNL_ARG_SRC, wx}, {DNNL_ARG_DIFF_DST, wgy}, {DNNL_ARG_DIFF_WEIGHTS, wgw},
                                {DNNL_ARG_DIFF_BIAS, wgb}};
        memcpy(dargs, da, sizeof da);
        memcpy(wargs, wa, sizeof wa);
    } else {
        r[nr++] = make_reorder(eng, fy, y);
    }

    double tp[64], tr[64];
    for (int rep = 0; rep <= reps; rep++) {
        double t0 = now_ms();
        CHECK(dnnl_primitive_execute(fp, s, 4, fargs));
        if (bwd) {
            CHECK(dnnl_primitive_execute(dp, s, 3, dargs));
            CHECK(dnnl_primitive_execute(wp, s, 4, wargs));
        }
        CHECK(dnnl_stream_wait(s));
        double t1 = now_ms();
        for (int i = 0; i < nr; i++) run_reorder(&r[i], s);
        CHECK(dnnl_stream_wait(s));
        double t2 = now_ms();
        if (rep) {
            tp[rep - 1] = t1 - t0;
            tr[rep - 1] = t2 - t1;
        }
    }
    qsort(tp, (size_t)reps, sizeof *tp, cmp_d);
    qsort(tr, (size_t)reps, sizeof *tr, cmp_d);
    t[0] = tp[reps / 2];
    t[1] = tr[reps / 2];

    char lx[64], lw[64];
    const dnnl_memory_desc_t *mx, *mw;
    CHECK(dnnl_memory_get_memory_desc(fx, &mx));
    CHECK(dnnl_memory_get_memory_desc(fw, &mw));
    layout_str(mx, lx, sizeof lx);
    layout_str(mw, lw, sizeof lw);
    printf("onednn %s %s %.4f %.4f %s%s%s%s%s src=%s,wei=%s\n", L->name, bwd ? "fwdbwd" : "fwd", t[0], t[1],
           impl_of(fpd), bwd ? "+" : "", bwd ? impl_of(dpd) : "", bwd ? "+" : "", bwd ? impl_of(wpd) : "", lx, lw);
    fflush(stdout);

    for (int i = 0; i < nr; i++)
        if (r[i].prim) dnnl_primitive_destroy(r[i].prim);
    dnnl_primitive_destroy(fp);
    dnnl_primitive_destroy(dp);
    dnnl_primitive_destroy(wp);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(dpd);
    dnnl_primitive_desc_destroy(wpd);
    dnnl_memory_t mine[] = {x, w, b, y, gy, gx, gw, gb};
    for (int i = 0; i < 8; i++) dnnl_memory_destroy(mine[i]);
    if (fx != x) dnnl_memory_destroy(fx);
    if (fw != w) dnnl_memory_destroy(fw);
    if (fy != y) dnnl_memory_destroy(fy);
    for (int i = 0; i < nextra; i++) dnnl_memory_destroy(extra[i]);
}

int main(int argc, char **argv) {
    int reps = 5;
    const char *only = "abcde";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--clock") && i + 1 < argc && !strcmp(argv[i + 1], "cpu")) {
            g_clock = CLOCK_PROCESS_CPUTIME_ID;
            i++;
        }
        else {
            fprintf(stderr, "usage: %s [--reps N (1..64)] [--layers abcde] [--clock cpu]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    dnnl_engine_t eng;
    dnnl_stream_t s;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&s, eng, dnnl_stream_default_flags));
    for (size_t li = 0; li < sizeof k_layers / sizeof k_layers[0]; li++) {
        if (!strchr(only, k_layers[li].name[0])) continue;
        g_where = k_layers[li].name;
        for (int bwd = 0; bwd < 2; bwd++) {
            double t[2];
            bench_layer(&k_layers[li], bwd, reps, eng, s, t);
        }
    }
    dnnl_stream_destroy(s);
    dnnl_engine_destroy(eng);
    return 0;
}
