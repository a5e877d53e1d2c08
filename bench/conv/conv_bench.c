/* conv_bench.c — mxplug side of bench/conv: Convolution forward and
 * forward+backward (data, weight and bias gradients, as PyTorch computes
 * them), float32, on the five layers of the brief, for every impl (policy
 * fixed to gemm / direct / winograd) and for the policies auto and tune
 * (whatever they choose).  One process = one round: per (layer, pass,
 * variant) a warm-up and --reps timed runs, median printed as
 *   mx <layer> <pass> <variant> <impl-run> <ms>      (ms "-" = unsupported)
 * run.sh interleaves rounds of this with torch_conv.py and aggregates.
 * Timing is wall-clock around push + wait (the engine runs the kernel).
 * CONV_BENCH_TRACE=1 also prints every timed run in order on stderr
 * (a process that switches between two speeds shows it there).
 * Threads: MXP_NUM_THREADS (run.sh sets 2).  The tune cache lives where
 * $XDG_CACHE_HOME says (run.sh points it at a fresh directory per bench
 * run, so the first round's warm-up is where tune times the candidates).
 * --dtype bfloat16 runs every array in bf16 (the variants that take it:
 * bf16, bf16_direct, auto, tune).
 * Not a test: nothing is asserted. */
#include <mxplug.h>

#include "op/op.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct layer {
    const char *name;
    int64_t n, c, h, w, m, k, pad, stride; /* stride 0 = 1 */
} layer;

static const layer k_layers[] = {
    {"a", 32, 1, 28, 28, 20, 5, 0, 1},   {"b", 32, 20, 12, 12, 50, 5, 0, 1}, {"c", 8, 64, 56, 56, 64, 3, 1, 1},
    {"d", 8, 128, 28, 28, 128, 3, 1, 1}, {"e", 8, 256, 56, 56, 64, 1, 0, 1},
};

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

static int32_t g_dtype = MXP_DTYPE_F32;

static mxp_ndarray *arr(int ndim, const int64_t *shape, uint64_t seed) {
    mxp_ndarray *a = NULL;
    mxp_device cpu = {MXP_DEV_CPU, 0};
    if (mxp_ndarray_create(shape, ndim, g_dtype, cpu, &a)) return NULL;
    int64_t n = mxp_ndarray_size(a);
    float *v = malloc((size_t)n * sizeof *v + 1);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    if (g_dtype == MXP_DTYPE_BF16) { /* truncation will do for timing */
        uint16_t *h = (uint16_t *)v;
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            h[i] = (uint16_t)(u >> 16);
        }
        mxp_ndarray_sync_copy_from(a, v, (size_t)n * 2);
    } else {
        mxp_ndarray_sync_copy_from(a, v, (size_t)n * sizeof *v);
    }
    free(v);
    return a;
}

typedef struct bufs {
    mxp_ndarray *in[3], *y, *og, *ig[3];
} bufs;

/* Passes: forward, forward+backward (every gradient), and the backward
 * alone for the data gradient only or the weight and bias gradients only
 * (after one untimed training forward, so each rep is one backward push). */
enum { PASS_FWD, PASS_FWDBWD, PASS_DGRAD, PASS_WGRAD, N_PASSES };
static const char *const k_pass_names[N_PASSES] = {"fwd", "fwdbwd", "dgrad", "wgrad"};

/* The gradients a backward-only pass asks for (NULL entries: req null). */
static void pass_grads(const bufs *b, int pass, mxp_ndarray **ig) {
    for (int i = 0; i < 3; i++) ig[i] = b->ig[i];
    if (pass == PASS_DGRAD) ig[1] = ig[2] = NULL;
    if (pass == PASS_WGRAD) ig[0] = NULL;
}

/* One timed pass; returns 0 or the error. */
static int run_once(mxp__node *nd, bufs *b, int pass) {
    int rc = 0;
    if (pass == PASS_DGRAD || pass == PASS_WGRAD) {
        mxp_ndarray *ig[3];
        pass_grads(b, pass, ig);
        rc = mxp__node_backward(nd, &b->og, b->in, &b->y, ig, NULL, NULL);
        for (int i = 0; !rc && i < 3; i++)
            if (ig[i]) rc = mxp_ndarray_wait_to_read(ig[i]);
        return rc;
    }
    int bwd = pass == PASS_FWDBWD;
    rc = mxp__node_forward(nd, b->in, &b->y, NULL, NULL, bwd);
    if (!rc && bwd) rc = mxp__node_backward(nd, &b->og, b->in, &b->y, b->ig, NULL, NULL);
    if (!rc) rc = mxp_ndarray_wait_to_read(b->y);
    for (int i = 0; bwd && !rc && i < 3; i++) rc = mxp_ndarray_wait_to_read(b->ig[i]);
    return rc;
}

/* --layer NAME=N,C,H,W,M,K,PAD[,STRIDE]: one extra layer (e.g. ResNet-20's
 * 16-channel 32x32 3x3 layer: r1=64,16,32,32,16,3,1), run alone unless
 * --layers names others too. */
#define MAX_EXTRA 16
static layer g_extra[MAX_EXTRA];
static char g_extra_name[MAX_EXTRA][16];
static int g_n_extra;

static int parse_layer(const char *spec) {
    if (g_n_extra >= MAX_EXTRA) return -1;
    layer *L = &g_extra[g_n_extra];
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || eq - spec >= 16) return -1;
    memcpy(g_extra_name[g_n_extra], spec, (size_t)(eq - spec));
    L->name = g_extra_name[g_n_extra];
    long long v[8] = {0};
    int n = sscanf(eq + 1, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (n < 7) return -1;
    L->n = v[0]; L->c = v[1]; L->h = v[2]; L->w = v[3]; L->m = v[4]; L->k = v[5]; L->pad = v[6]; L->stride = n > 7 ? v[7] : 1;
    g_n_extra++;
    return 0;
}

/* --resnet20: ResNet-20's convolution shapes at batch 64
 * (examples/resnet/resnet20-symbol.json): the RGB stem, the 3x3 stride-1
 * layer of each stage, the two stride-2 3x3 layers and the two 1x1
 * stride-2 projections. */
static const char *const k_resnet20[] = {
    "stem=64,3,32,32,16,3,1",     "s1=64,16,32,32,16,3,1",     "s2down=64,16,32,32,32,3,1,2",
    "s2proj=64,16,32,32,32,1,0,2", "s2=64,32,16,16,32,3,1",    "s3down=64,32,16,16,64,3,1,2",
    "s3proj=64,32,16,16,64,1,0,2", "s3=64,64,8,8,64,3,1",
};

/* 1 when name is one of the comma-separated words of list ("bf16" is not
 * "bf16_direct"). */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n])) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int reps = 5;
    const char *only = "abcde", *variant_list = NULL;
    int only_given = 0, use_min = 0, pass_lo = 0, pass_hi = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) only = argv[++i], only_given = 1;
        else if (!strcmp(argv[i], "--layer") && i + 1 < argc && !parse_layer(argv[i + 1])) i++;
        else if (!strcmp(argv[i], "--resnet20")) {
            for (size_t k = 0; k < sizeof k_resnet20 / sizeof k_resnet20[0]; k++) parse_layer(k_resnet20[k]);
        }
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) variant_list = argv[++i];
        else if (!strcmp(argv[i], "--pass") && i + 1 < argc) { /* one pass only, or "all" four */
            const char *want = argv[++i];
            if (!strcmp(want, "all")) pass_lo = PASS_FWD, pass_hi = PASS_WGRAD;
            else {
                int p = 0;
                while (p < N_PASSES && strcmp(want, k_pass_names[p])) p++;
                if (p == N_PASSES) {
                    fprintf(stderr, "conv_bench: --pass fwd|fwdbwd|dgrad|wgrad|all, not %s\n", want);
                    return 2;
                }
                pass_lo = pass_hi = p;
            }
        }
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc && !strcmp(argv[i + 1], "bfloat16")) {
            g_dtype = MXP_DTYPE_BF16;
            i++;
        }
        else if (!strcmp(argv[i], "--min")) use_min = 1; /* fastest run, not the median: less noise on a loaded machine */
        else if (!strcmp(argv[i], "--clock") && i + 1 < argc && !strcmp(argv[i + 1], "cpu")) {
            g_clock = CLOCK_PROCESS_CPUTIME_ID;
            i++;
        }
        else {
            fprintf(stderr, "usage: %s [--reps N] [--layers abcde] [--layer NAME=N,C,H,W,M,K,PAD[,STRIDE]]... [--resnet20]\n"
                            "       [--variants gemm,winograd,...] [--pass fwd|fwdbwd|dgrad|wgrad|all] [--clock cpu] [--min] [--dtype bfloat16]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (g_n_extra && !only_given) only = "";
    const char *variants[] = {"gemm", "direct", "winograd", "pointwise", "strip", "bf16", "bf16_direct", "bf16_wino_row", "auto", "tune"};
    double *t = malloc((size_t)reps * sizeof *t);
    size_t nfixed = sizeof k_layers / sizeof k_layers[0];
    for (size_t li = 0; li < nfixed + (size_t)g_n_extra; li++) {
        const layer *L = li < nfixed ? &k_layers[li] : &g_extra[li - nfixed];
        if (li < nfixed && !strchr(only, L->name[0])) continue;
        int64_t st = L->stride > 0 ? L->stride : 1;
        int64_t ho = (L->h + 2 * L->pad - L->k) / st + 1, wo = (L->w + 2 * L->pad - L->k) / st + 1;
        int64_t sx[4] = {L->n, L->c, L->h, L->w}, sw[4] = {L->m, L->c, L->k, L->k}, sb[1] = {L->m},
                sy[4] = {L->n, L->m, ho, wo};
        bufs b;
        b.in[0] = arr(4, sx, 1);
        b.in[1] = arr(4, sw, 2);
        b.in[2] = arr(1, sb, 3);
        b.y = arr(4, sy, 4);
        b.og = arr(4, sy, 5);
        b.ig[0] = arr(4, sx, 6);
        b.ig[1] = arr(4, sw, 7);
        b.ig[2] = arr(1, sb, 8);
        char kern[32], pad[32], nf[32], strd[32];
        snprintf(kern, sizeof kern, "(%lld, %lld)", (long long)L->k, (long long)L->k);
        snprintf(pad, sizeof pad, "(%lld, %lld)", (long long)L->pad, (long long)L->pad);
        snprintf(nf, sizeof nf, "%lld", (long long)L->m);
        snprintf(strd, sizeof strd, "(%lld, %lld)", (long long)st, (long long)st);
        const char *keys[] = {"kernel", "pad", "num_filter", "stride"}, *vals[] = {kern, pad, nf, strd};
        for (int pass = pass_lo; pass <= pass_hi; pass++) {
            const char *pname = k_pass_names[pass];
            for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
                if (variant_list && !listed(variant_list, variants[v])) continue;
                mxp_op_set_impl("Convolution", strcmp(variants[v], "auto") ? variants[v] : NULL);
                mxp__node *nd = NULL;
                int rc = mxp__node_create("Convolution", 4, keys, vals, &nd);
                mxp_shape is[3], os = {.ndim = -1};
                int32_t it[3] = {g_dtype, g_dtype, g_dtype}, ot = MXP_DTYPE_UNKNOWN;
                for (int i = 0; i < 3; i++) {
                    is[i].ndim = mxp_ndarray_ndim(b.in[i]);
                    for (int k = 0; k < is[i].ndim; k++) is[i].dims[k] = mxp_ndarray_shape(b.in[i])[k];
                }
                if (!rc) rc = mxp__node_infer(nd, is, it, &os, &ot, NULL, NULL);
                if (!rc && pass >= PASS_DGRAD) /* the forward the backward-only passes differentiate */
                    rc = mxp__node_forward(nd, b.in, &b.y, NULL, NULL, 1);
                if (!rc) rc = run_once(nd, &b, pass); /* warm-up (and tune's timing) */
                for (int r = 0; !rc && r < reps; r++) {
                    double t0 = now_ms();
                    rc = run_once(nd, &b, pass);
                    t[r] = now_ms() - t0;
                }
                if (!rc && getenv("CONV_BENCH_TRACE")) { /* every run in order, to see bimodal timings */
                    fprintf(stderr, "%s %s %s:", L->name, pname, variants[v]);
                    for (int r = 0; r < reps; r++) fprintf(stderr, " %.3f", t[r]);
                    fprintf(stderr, "\n");
                }
                const char *impl = nd && mxp__node_impl_name(nd) ? mxp__node_impl_name(nd) : "-";
                if (rc) {
                    printf("mx %s %s %s - -\n", L->name, pname, variants[v]);
                    fprintf(stderr, "conv_bench: layer %s %s %s: %s\n", L->name, pname, variants[v],
                            mxp_last_error());
                } else {
                    qsort(t, (size_t)reps, sizeof *t, cmp_d);
                    printf("mx %s %s %s %s %.4f\n", L->name, pname, variants[v], impl, t[use_min ? 0 : reps / 2]);
                }
                fflush(stdout);
                mxp__node_free(nd);
                mxp_engine_wait_for_all();
            }
        }
        mxp_ndarray *all[] = {b.in[0], b.in[1], b.in[2], b.y, b.og, b.ig[0], b.ig[1], b.ig[2]};
        for (int i = 0; i < 8; i++) mxp_ndarray_release(all[i]);
    }
    mxp_op_set_impl("Convolution", NULL);
    free(t);
    mxp_engine_shutdown();
    return 0;
}
