/* cmd_bench.c — `mxplug bench OP --shape NAME=d1,d2,... [--param K=V]...
 * [--repeat N] [--device DEV]`: time every implementation of an op that
 * accepts the configuration.
 *
 * Shapes of inputs not given (weights, biases, aux states) come from the
 * op's shape inference through a one-node symbol.  Inputs are uniform in
 * [-0.5, 0.5) (aux states 1.0), the same for every impl.  Each impl is
 * selected with mxp_op_set_impl (the previous API policy is restored at
 * the end) and run through mxp_invoke_ex: one warm-up, then N timed runs
 * (push + wait for every output), median printed, with GFLOP/s for
 * Convolution, FullyConnected and dot (2 x multiply-adds from the shapes),
 * and ||y - y_ref|| / ||y_ref|| of the first output against a float64
 * reference:
 *   - Convolution (2-D NCHW), FullyConnected (flatten=True) and 2-D dot
 *     without transposes: plain float64 loops written here, independent of
 *     every pack;
 *   - any other op: the same op run on float64 copies of the inputs with
 *     the 'auto' policy (so it shares code with the packs: the line says
 *     so); "-" when no implementation takes float64.
 * An impl that refuses the configuration is listed with its reason; under
 * each timed impl, the counters its pack published (ABI 1.2) that its
 * runs moved, with the amount per run (pack_stats.c).
 * Public API only. */
#include "cli.h"
#include "pack_stats.h"
#include "cli_args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define B_MAX_KV 32
#define B_MAX_IO 16

typedef struct bench_cfg {
    const char *op;
    const char *keys[B_MAX_KV], *vals[B_MAX_KV];
    int n_kv;
    char shape_names[B_MAX_KV][64];
    mxp_shape shapes[B_MAX_KV];
    int n_shapes;
    int repeat;
    mxp_device dev;
} bench_cfg;

static void usage(FILE *f) {
    fputs("usage: mxplug bench OP --shape NAME=d1,d2,... [--shape ...] [--param KEY=VALUE]...\n"
          "                       [--repeat N] [--device cpu]\n"
          "\n"
          "Time every implementation of OP that accepts the configuration: median of\n"
          "N runs (default 10, after one warm-up) in ms, GFLOP/s for Convolution,\n"
          "FullyConnected and dot, and the norm-wise relative difference of the first\n"
          "output from a float64 reference (plain loops for Convolution,\n"
          "FullyConnected and dot; otherwise the op itself on float64 inputs).\n"
          "Shapes of weights, biases and aux states are inferred.\n",
          f);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *param(const bench_cfg *c, const char *k) {
    for (int i = c->n_kv - 1; i >= 0; i--)
        if (!strcmp(c->keys[i], k)) return c->vals[i];
    return NULL;
}

/* "(3, 3)" / "3" / "[3,3]" -> up to 2 ints; missing -> dflt. */
static void tuple2(const char *s, int64_t dflt, int64_t out[2]) {
    out[0] = out[1] = dflt;
    if (!s) return;
    int n = 0;
    for (const char *p = s; *p && n < 2;) {
        if ((*p >= '0' && *p <= '9') || *p == '-') {
            char *e;
            out[n++] = strtoll(p, &e, 10);
            p = e;
        } else p++;
    }
    if (n == 1) out[1] = out[0];
}

static int truthy(const char *s) { return s && (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")); }

static int64_t numel(const mxp_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dims[i];
    return n;
}

/* ------------------------------------------------------------ references */
/* Plain float64 loops.  Returns 1 when it could compute y (ny values). */
static int ref_conv(const bench_cfg *c, double *const *in, const mxp_shape *is, int n_in, const mxp_shape *os,
                    double *y) {
    if (is[0].ndim != 4 || is[1].ndim != 4 || os->ndim != 4) return 0;
    const char *layout = param(c, "layout");
    if (layout && strcmp(layout, "None") && strcmp(layout, "NCHW")) return 0;
    int64_t st[2], pd[2], dl[2];
    tuple2(param(c, "stride"), 1, st);
    tuple2(param(c, "pad"), 0, pd);
    tuple2(param(c, "dilate"), 1, dl);
    const char *g = param(c, "num_group");
    int64_t G = g ? atoll(g) : 1;
    int has_bias = !truthy(param(c, "no_bias")) && n_in > 2;
    int64_t N = is[0].dims[0], C = is[0].dims[1], H = is[0].dims[2], W = is[0].dims[3];
    int64_t M = is[1].dims[0], Cg = is[1].dims[1], KH = is[1].dims[2], KW = is[1].dims[3];
    int64_t Ho = os->dims[2], Wo = os->dims[3], Mg = M / (G ? G : 1);
    if (G < 1 || Cg * G != C) return 0;
    const double *x = in[0], *w = in[1], *b = has_bias ? in[2] : NULL;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t gi = m / Mg;
            double *yo = y + (n * M + m) * Ho * Wo;
            for (int64_t i = 0; i < Ho * Wo; i++) yo[i] = b ? b[m] : 0;
            for (int64_t cc = 0; cc < Cg; cc++) {
                const double *xc = x + (n * C + gi * Cg + cc) * H * W;
                for (int64_t u = 0; u < KH; u++)
                    for (int64_t v = 0; v < KW; v++) {
                        double wv = w[((m * Cg + cc) * KH + u) * KW + v];
                        for (int64_t oh = 0; oh < Ho; oh++) {
                            int64_t ih = oh * st[0] - pd[0] + u * dl[0];
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t ow = 0; ow < Wo; ow++) {
                                int64_t iw = ow * st[1] - pd[1] + v * dl[1];
                                if (iw >= 0 && iw < W) yo[oh * Wo + ow] += wv * xc[ih * W + iw];
                            }
                        }
                    }
            }
        }
    return 1;
}

static int ref_fc(const bench_cfg *c, double *const *in, const mxp_shape *is, int n_in, const mxp_shape *os,
                  double *y) {
    const char *fl = param(c, "flatten");
    if (fl && !truthy(fl)) return 0;
    if (is[1].ndim != 2 || os->ndim != 2) return 0;
    int64_t N = is[0].dims[0], K = numel(&is[0]) / (N ? N : 1), Hd = is[1].dims[0];
    if (is[1].dims[1] != K) return 0;
    int has_bias = !truthy(param(c, "no_bias")) && n_in > 2;
    for (int64_t n = 0; n < N; n++)
        for (int64_t h = 0; h < Hd; h++) {
            double s = has_bias ? in[2][h] : 0;
            for (int64_t k = 0; k < K; k++) s += in[0][n * K + k] * in[1][h * K + k];
            y[n * Hd + h] = s;
        }
    return 1;
}

static int ref_dot(const bench_cfg *c, double *const *in, const mxp_shape *is, const mxp_shape *os, double *y) {
    if (truthy(param(c, "transpose_a")) || truthy(param(c, "transpose_b"))) return 0;
    if (is[0].ndim != 2 || is[1].ndim != 2 || os->ndim != 2) return 0;
    int64_t M = is[0].dims[0], K = is[0].dims[1], N = is[1].dims[1];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += in[0][i * K + k] * in[1][k * N + j];
            y[i * N + j] = s;
        }
    return 1;
}

/* Multiply-adds x 2, or 0 when not defined for the op. */
static double flops(const char *op, const mxp_shape *is, const mxp_shape *os) {
    if (!strcmp(op, "Convolution") && os->ndim == 4 && is[1].ndim == 4)
        return 2.0 * (double)numel(os) * (double)(is[1].dims[1] * is[1].dims[2] * is[1].dims[3]);
    if (!strcmp(op, "FullyConnected") && is[1].ndim == 2) return 2.0 * (double)numel(os) * (double)is[1].dims[1];
    if (!strcmp(op, "dot") && is[0].ndim == 2 && os->ndim == 2) return 2.0 * (double)numel(os) * (double)is[0].dims[1];
    return 0;
}

/* ------------------------------------------------------------ arrays */
enum { STAGING_OOM = 1 }; /* make_array: its staging buffer failed; reported */
static int make_array(const mxp_shape *s, int dtype, mxp_device dev, const double *vals, mxp_ndarray **out) {
    int rc = mxp_ndarray_create(s->dims, s->ndim, dtype, dev, out);
    if (rc) return rc;
    int64_t n = numel(s);
    size_t es = dtype == MXP_DTYPE_F64 ? 8 : 4;
    void *buf = malloc((size_t)n * es + 1);
    if (!buf) {
        cli_err("out of memory for a %lld-element staging buffer", (long long)n);
        return STAGING_OOM;
    }
    for (int64_t i = 0; i < n; i++) {
        if (dtype == MXP_DTYPE_F64) ((double *)buf)[i] = vals[i];
        else ((float *)buf)[i] = (float)vals[i];
    }
    rc = mxp_ndarray_sync_copy_from(*out, buf, (size_t)n * es);
    free(buf);
    return rc;
}

static int read_array(mxp_ndarray *a, double *out) {
    int64_t n = mxp_ndarray_size(a);
    int dt = mxp_ndarray_dtype(a);
    size_t es = dt == MXP_DTYPE_F64 ? 8 : 4;
    if (dt != MXP_DTYPE_F64 && dt != MXP_DTYPE_F32) return MXP_ETYPE;
    void *buf = malloc((size_t)n * es + 1);
    if (!buf) return MXP_ENOMEM;
    int rc = mxp_ndarray_sync_copy_to(a, buf, (size_t)n * es);
    for (int64_t i = 0; !rc && i < n; i++) out[i] = dt == MXP_DTYPE_F64 ? ((double *)buf)[i] : ((float *)buf)[i];
    free(buf);
    return rc;
}

/* Run op once on arrays; outputs freed by the caller.  Waits. */
static int run_op(const bench_cfg *c, int n_in, mxp_ndarray **in, int n_aux, mxp_ndarray **aux, int *n_out,
                  mxp_ndarray **out) {
    mxp_invoke_opts o;
    memset(&o, 0, sizeof o);
    o.n_aux = n_aux;
    o.aux = aux;
    o.has_device = 1;
    o.device = c->dev;
    *n_out = B_MAX_IO;
    int rc = mxp_invoke_ex(c->op, n_in, in, n_out, out, c->n_kv, c->keys, c->vals, &o);
    for (int i = 0; !rc && i < *n_out; i++) rc = mxp_ndarray_wait_to_read(out[i]);
    return rc;
}

/* ------------------------------------------------------------ main */
static int parse(int argc, char **argv, bench_cfg *c) {
    memset(c, 0, sizeof *c);
    c->repeat = 10;
    c->dev.type = MXP_DEV_CPU;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) return 1;
        if (!strcmp(a, "--shape") || !strcmp(a, "--param") || !strcmp(a, "--repeat") || !strcmp(a, "--device")) {
            if (i + 1 >= argc) return cli_usage_error("bench", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--repeat")) {
                long long r;
                if (cli_parse_int("bench", "--repeat", v, 1, 1000000, &r)) return CLI_USAGE;
                c->repeat = (int)r;
            } else if (!strcmp(a, "--device")) {
                if (strcmp(v, "cpu")) return cli_usage_error("bench", "only --device cpu is supported");
            } else if (!strcmp(a, "--shape")) {
                if (c->n_shapes >= B_MAX_KV) return cli_usage_error("bench", "too many --shape");
                /* Every buffer holds n doubles (+8): refuse sizes that overflow. */
                if (cli_parse_shape_arg("bench", v, sizeof(double), 8, c->shape_names[c->n_shapes],
                                        sizeof c->shape_names[0], &c->shapes[c->n_shapes]))
                    return CLI_USAGE;
                c->n_shapes++;
            } else {
                if (c->n_kv >= B_MAX_KV) return cli_usage_error("bench", "too many --param");
                char *key;
                int rc = cli_parse_kv_arg("bench", "--param", v, &key, &c->vals[c->n_kv]);
                if (rc) return rc == CLI_USAGE ? rc : -1; /* 1 means --help */
                c->keys[c->n_kv++] = key;
            }
        } else if (a[0] == '-') {
            return cli_usage_error("bench", "unknown option '%s'", a);
        } else if (!c->op) {
            c->op = a;
        } else {
            return cli_usage_error("bench", "unexpected argument '%s'", a);
        }
    }
    if (!c->op) return cli_usage_error("bench", "missing OP");
    if (!c->n_shapes) return cli_usage_error("bench", "give at least one --shape NAME=d1,d2,...");
    return 0;
}

static void shape_str(const mxp_shape *s, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < s->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    if (o < cap) snprintf(buf + o, cap - o, ")");
}

int cmd_bench(int argc, char **argv) {
    bench_cfg c;
    int prc = parse(argc, argv, &c);
    if (prc) {
        for (int i = 0; i < c.n_kv; i++) free((char *)c.keys[i]);
        if (prc == 1) usage(stdout);
        return prc == 1 ? CLI_OK : prc < 0 ? CLI_FAIL : prc;
    }
    int status = CLI_FAIL, rc;
    const mxp_op *op = mxp_op_find(c.op);
    mxp_symbol *sym = NULL, *vars[B_MAX_IO] = {0};
    mxp_shape *as = NULL, *os = NULL, *xs = NULL;
    int n_args = 0, n_outs = 0, n_aux = 0, complete = 0;
    double *vin[2 * B_MAX_IO] = {0}, *yref = NULL, *y = NULL, *times = NULL;
    mxp_ndarray *in32[B_MAX_IO] = {0}, *aux32[B_MAX_IO] = {0};
    const char *old_policy = NULL, *old_src = NULL;
    char saved_policy[128] = "";
    int had_api = 0;
    if (!op) {
        cli_err("unknown op '%s'", c.op);
        goto done;
    }
    c.op = mxp_op_name(op);
    /* Inputs by name, shapes inferred through a one-node symbol. */
    char names[2 * B_MAX_IO][64];
    int n_in = 0, n_ax = 0;
    if ((rc = mxp_op_list_names(op, 0, c.keys, c.vals, c.n_kv, names, B_MAX_IO, &n_in)) ||
        (rc = mxp_op_list_names(op, 2, c.keys, c.vals, c.n_kv, names + B_MAX_IO, B_MAX_IO, &n_ax))) {
        status = cli_fail(rc, "op '%s'", c.op);
        goto done;
    }
    if ((rc = mxp_symbol_create(c.op, "bench", c.n_kv, c.keys, c.vals, &sym))) {
        status = cli_fail(rc, "op '%s'", c.op);
        goto done;
    }
    const char *arg_names[2 * B_MAX_IO];
    for (int i = 0; i < n_in + n_ax; i++) {
        const char *nm = i < n_in ? names[i] : names[B_MAX_IO + i - n_in];
        arg_names[i] = nm;
        if ((rc = mxp_symbol_variable(nm, &vars[i]))) goto symfail;
    }
    if ((rc = mxp_symbol_compose(sym, "bench", n_in + n_ax, arg_names, vars))) goto symfail;
    const char *known_names[B_MAX_KV];
    for (int s = 0; s < c.n_shapes; s++) known_names[s] = c.shape_names[s];
    rc = mxp_symbol_infer_shape(sym, c.n_shapes, known_names, c.shapes, &n_args, &as, &n_outs, &os, &n_aux, &xs,
                                &complete);
    if (rc) goto symfail;
    if (!complete || n_args != n_in || n_aux != n_ax) {
        cli_err("op '%s': shapes are incomplete with the given --shape (inputs: %d, aux: %d)", c.op, n_in, n_ax);
        goto done;
    }
    for (int i = 0; i < n_in + n_ax + 1; i++) { /* inferred shapes, output 0 too */
        const mxp_shape *s = i < n_in ? &as[i] : i < n_in + n_ax ? &xs[i - n_in] : &os[0];
        if ((rc = mxp_size_of_shape(i < n_in + n_ax ? arg_names[i] : "output 0", s->dims, s->ndim, sizeof(double),
                                    8, NULL, NULL)))
            goto symfail;
    }
    /* Inputs: same values for every impl (and the reference). */
    uint64_t seed = 0x243F6A8885A308D3ull;
    for (int i = 0; i < n_in + n_ax; i++) {
        const mxp_shape *s = i < n_in ? &as[i] : &xs[i - n_in];
        int64_t n = numel(s);
        vin[i] = malloc((size_t)n * sizeof(double) + 8);
        if (!vin[i]) {
            cli_err("op '%s': input '%s': out of memory for %lld float64 values", c.op, arg_names[i], (long long)n);
            goto done;
        }
        for (int64_t k = 0; k < n; k++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            /* Through float32 so the reference sees what the impls see. */
            vin[i][k] = i < n_in ? (double)(float)((double)(seed >> 11) / 9007199254740992.0 - 0.5) : 1.0;
        }
        if ((rc = make_array(s, MXP_DTYPE_F32, c.dev, vin[i], i < n_in ? &in32[i] : &aux32[i - n_in]))) {
            if (rc == STAGING_OOM) goto done; /* reported */
            goto symfail;
        }
    }
    int64_t ny = numel(&os[0]);
    yref = malloc((size_t)ny * sizeof *yref + 8);
    y = malloc((size_t)ny * sizeof *y + 8);
    times = malloc((size_t)c.repeat * sizeof *times);
    if (!yref || !y || !times) {
        cli_err("op '%s': out of memory for %lld output values", c.op, (long long)ny);
        goto done;
    }
    /* Reference. */
    const char *ref_what = NULL;
    if (!strcmp(c.op, "Convolution") && ref_conv(&c, vin, as, n_in, &os[0], yref))
        ref_what = "float64 plain loops in mxplug bench (independent of the packs)";
    else if (!strcmp(c.op, "FullyConnected") && ref_fc(&c, vin, as, n_in, &os[0], yref))
        ref_what = "float64 plain loops in mxplug bench (independent of the packs)";
    else if (!strcmp(c.op, "dot") && ref_dot(&c, vin, as, &os[0], yref))
        ref_what = "float64 plain loops in mxplug bench (independent of the packs)";
    mxp_op_policy(c.op, &old_policy, &old_src);
    if (!strcmp(old_src, "api")) {
        had_api = 1;
        snprintf(saved_policy, sizeof saved_policy, "%s", old_policy);
    }
    if (!ref_what) {
        mxp_ndarray *in64[B_MAX_IO] = {0}, *aux64[B_MAX_IO] = {0}, *o64[B_MAX_IO] = {0};
        int ok = 1, no = 0;
        for (int i = 0; i < n_in + n_ax && ok; i++)
            ok = !make_array(i < n_in ? &as[i] : &xs[i - n_in], MXP_DTYPE_F64, c.dev, vin[i],
                             i < n_in ? &in64[i] : &aux64[i - n_in]);
        mxp_op_set_impl(c.op, "auto");
        if (ok && !run_op(&c, n_in, in64, n_ax, aux64, &no, o64) && !read_array(o64[0], yref))
            ref_what = "the op itself on float64 inputs, policy auto (shares code with the packs)";
        for (int i = 0; i < n_in + n_ax; i++) mxp_ndarray_release(i < n_in ? in64[i] : aux64[i - n_in]);
        for (int i = 0; i < no; i++) mxp_ndarray_release(o64[i]);
    }
    double refnorm = 0;
    for (int64_t i = 0; ref_what && i < ny; i++) refnorm += yref[i] * yref[i];
    refnorm = sqrt(refnorm);
    double fl = flops(c.op, as, &os[0]);
    /* Header. */
    printf("%s", c.op);
    for (int i = 0; i < n_in; i++) {
        char sb[128];
        shape_str(&as[i], sb, sizeof sb);
        printf(" %s=%s", names[i], sb);
    }
    for (int i = 0; i < c.n_kv; i++) printf(" %s=%s", c.keys[i], c.vals[i]);
    printf("\nfloat32, %d threads, median of %d runs after 1 warm-up\nreference: %s\n", mxp_num_threads(), c.repeat,
           ref_what ? ref_what : "none (no float64 implementation)");
    printf("%-12s %12s %10s %12s\n", "impl", "median_ms", "GFLOP/s", "rel_diff");
    /* Every cpu impl, once per name. */
    int n_impls = mxp_op_impl_count(op), timed = 0;
    for (int k = 0; k < n_impls; k++) {
        const char *iname = mxp_op_impl_name(op, k);
        if (strcmp(mxp_op_impl_device(op, k), "cpu")) continue;
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= !strcmp(mxp_op_impl_name(op, j), iname) && !strcmp(mxp_op_impl_device(op, j), "cpu");
        if (dup) continue;
        if ((rc = mxp_op_set_impl(c.op, iname))) {
            printf("%-12s %s\n", iname, mxp_last_error());
            continue;
        }
        mxp_ndarray *out[B_MAX_IO] = {0};
        int no = 0;
        /* The impl's pack counters (ABI 1.2) before its runs. */
        mxp_pack_stat *st0 = NULL;
        int n_st0 = 0;
        cli_pack_stats_take(mxp_op_impl_pack(op, k), &st0, &n_st0);
        rc = run_op(&c, n_in, in32, n_ax, aux32, &no, out); /* warm-up */
        for (int r = 0; !rc && r < c.repeat; r++) {
            for (int i = 0; i < no; i++) mxp_ndarray_release(out[i]);
            memset(out, 0, sizeof out);
            double t0 = now_ms();
            rc = run_op(&c, n_in, in32, n_ax, aux32, &no, out);
            times[r] = now_ms() - t0;
        }
        if (rc) {
            const char *m = mxp_last_error();
            const char *why = strstr(m, "refused: ");
            printf("%-12s %s\n", iname, why ? why : m);
        } else {
            qsort(times, (size_t)c.repeat, sizeof *times, cmp_d);
            double med = times[c.repeat / 2];
            char gf[32] = "-", rd[32] = "-";
            if (fl > 0 && med > 0) snprintf(gf, sizeof gf, "%.1f", fl / (med * 1e6));
            if (ref_what && !read_array(out[0], y)) {
                double d = 0;
                for (int64_t i = 0; i < ny; i++) d += (y[i] - yref[i]) * (y[i] - yref[i]);
                snprintf(rd, sizeof rd, "%.2e", refnorm > 0 ? sqrt(d) / refnorm : sqrt(d));
            }
            printf("%-12s %12.3f %10s %12s\n", iname, med, gf, rd);
            timed++;
            /* What the pack counted over the warm-up and the timed runs. */
            mxp_engine_wait_for_all();
            mxp_pack_stat *st1 = NULL;
            int n_st1 = 0;
            if (cli_pack_stats_take(mxp_op_impl_pack(op, k), &st1, &n_st1) == MXP_OK)
                cli_pack_stats_moved(stdout, "             ", st0, n_st0, st1, n_st1, c.repeat + 1);
            mxp_pack_stats_free(st1);
        }
        mxp_pack_stats_free(st0);
        for (int i = 0; i < no; i++) mxp_ndarray_release(out[i]);
        fflush(stdout);
    }
    status = timed ? CLI_OK : CLI_FAIL;
    if (!timed) cli_err("no implementation of '%s' ran this configuration", c.op);
    goto done;
symfail:
    status = cli_fail(rc, "op '%s'", c.op);
done:
    if (op) mxp_op_set_impl(c.op, had_api ? saved_policy : NULL);
    mxp_engine_wait_for_all();
    for (int i = 0; i < B_MAX_IO; i++) {
        mxp_ndarray_release(in32[i]);
        mxp_ndarray_release(aux32[i]);
        if (vars[i]) mxp_symbol_release(vars[i]);
    }
    for (int i = 0; i < 2 * B_MAX_IO; i++) free(vin[i]);
    mxp_symbol_release(sym);
    free(as);
    free(os);
    free(xs);
    free(yref);
    free(y);
    free(times);
    for (int i = 0; i < c.n_kv; i++) free((char *)c.keys[i]);
    return status;
}
