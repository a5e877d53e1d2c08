/* bench/engine/bench.c — engine overhead per op on three workloads, 2
 * threads by default (MXP_NUM_THREADS).  Each op increments a counter in the
 * buffer its written var guards; totals are checked after every run.
 *   chain        N ops, all writing one var
 *   independent  N ops, op i writes var[i % 1000]
 *   fanout       rounds of R readers of one var (reader j also writes its own
 *                out[j]), then one writer of that var
 * µs/op = (first push .. return of wait_for_all) / N.
 * Usage: bench_engine WORKLOAD MODE [N]   MODE: push (plain push) or op
 * (pre-created operators).  Prints "<workload> <mode> <us_per_op>". */
#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NIND 1000
#define FAN 100

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int incr(void *arg, const mxp_run_ctx *ctx) {
    (void)ctx;
    (*(long *)arg)++;
    return MXP_OK;
}

static int push1(mxp_var **c, int nc, mxp_var **m, long *counter) {
    mxp_engine_push_args a = {0};
    a.sync_fn = incr;
    a.arg = counter;
    a.const_vars = c;
    a.n_const = nc;
    a.mutate_vars = m;
    a.n_mutate = 1;
    a.name = "incr";
    return mxp_engine_push(&a);
}

static mxp_engine_op *mkop(mxp_var **c, int nc, mxp_var **m, long *counter) {
    mxp_engine_push_args a = {0};
    a.sync_fn = incr;
    a.arg = counter;
    a.const_vars = c;
    a.n_const = nc;
    a.mutate_vars = m;
    a.n_mutate = 1;
    a.name = "incr";
    mxp_engine_op *op = NULL;
    if (mxp_engine_new_op(&a, &op) != MXP_OK) {
        fprintf(stderr, "new_op: %s\n", mxp_last_error());
        exit(1);
    }
    return op;
}

static void die_if(int bad, const char *what) {
    if (bad) {
        fprintf(stderr, "bench_engine: %s (%s)\n", what, mxp_last_error());
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s chain|independent|fanout push|op [N]\n", argv[0]);
        return 2;
    }
    const char *wl = argv[1];
    int use_op = strcmp(argv[2], "op") == 0;
    long n = argc > 3 ? atol(argv[3]) : 1000000;
    setenv("MXP_NUM_THREADS", getenv("MXP_NUM_THREADS") ? getenv("MXP_NUM_THREADS") : "2", 1);

    static long cnt[NIND], out[FAN], x;
    static mxp_var *v[NIND], *ov[FAN];
    mxp_var *xv;
    for (int i = 0; i < NIND; i++) die_if(mxp_engine_new_var(&v[i]) != MXP_OK, "new_var");
    for (int i = 0; i < FAN; i++) die_if(mxp_engine_new_var(&ov[i]) != MXP_OK, "new_var");
    die_if(mxp_engine_new_var(&xv) != MXP_OK, "new_var");
    /* Warm up: start the workers and fill the pools. */
    long warm = 0;
    for (int i = 0; i < 20000; i++) die_if(push1(NULL, 0, &v[i % NIND], &warm), "push");
    die_if(mxp_engine_wait_for_all() != MXP_OK, "warm-up");
    memset(cnt, 0, sizeof cnt);

    long ops = 0;
    double t0 = 0, t1 = 0;
    if (strcmp(wl, "chain") == 0) {
        mxp_engine_op *op = use_op ? mkop(NULL, 0, &v[0], &cnt[0]) : NULL;
        t0 = now_s();
        for (long i = 0; i < n; i++)
            die_if((use_op ? mxp_engine_push_op(op, 0) : push1(NULL, 0, &v[0], &cnt[0])) != MXP_OK, "push");
        die_if(mxp_engine_wait_for_all() != MXP_OK, "wait");
        t1 = now_s();
        ops = n;
        die_if(cnt[0] != n, "chain total wrong");
        mxp_engine_delete_op(op);
    } else if (strcmp(wl, "independent") == 0) {
        static mxp_engine_op *opv[NIND];
        if (use_op)
            for (int i = 0; i < NIND; i++) opv[i] = mkop(NULL, 0, &v[i], &cnt[i]);
        t0 = now_s();
        for (long i = 0; i < n; i++) {
            int k = (int)(i % NIND);
            die_if((use_op ? mxp_engine_push_op(opv[k], 0) : push1(NULL, 0, &v[k], &cnt[k])) != MXP_OK, "push");
        }
        die_if(mxp_engine_wait_for_all() != MXP_OK, "wait");
        t1 = now_s();
        ops = n;
        long tot = 0;
        for (int i = 0; i < NIND; i++) tot += cnt[i];
        die_if(tot != n || cnt[NIND - 1] != n / NIND, "independent totals wrong");
        if (use_op)
            for (int i = 0; i < NIND; i++) mxp_engine_delete_op(opv[i]);
    } else if (strcmp(wl, "fanout") == 0) {
        long rounds = n / (FAN + 1);
        static mxp_engine_op *rop[FAN];
        mxp_engine_op *wop = NULL;
        if (use_op) {
            for (int j = 0; j < FAN; j++) rop[j] = mkop(&xv, 1, &ov[j], &out[j]);
            wop = mkop(NULL, 0, &xv, &x);
        }
        t0 = now_s();
        for (long r = 0; r < rounds; r++) {
            for (int j = 0; j < FAN; j++)
                die_if((use_op ? mxp_engine_push_op(rop[j], 0) : push1(&xv, 1, &ov[j], &out[j])) != MXP_OK, "push");
            die_if((use_op ? mxp_engine_push_op(wop, 0) : push1(NULL, 0, &xv, &x)) != MXP_OK, "push");
        }
        die_if(mxp_engine_wait_for_all() != MXP_OK, "wait");
        t1 = now_s();
        ops = rounds * (FAN + 1);
        for (int j = 0; j < FAN; j++) die_if(out[j] != rounds, "fanout reader total wrong");
        die_if(x != rounds, "fanout writer total wrong");
        if (use_op) {
            for (int j = 0; j < FAN; j++) mxp_engine_delete_op(rop[j]);
            mxp_engine_delete_op(wop);
        }
    } else {
        fprintf(stderr, "unknown workload '%s'\n", wl);
        return 2;
    }
    printf("%s %s %.4f\n", wl, use_op ? "op" : "push", (t1 - t0) * 1e6 / (double)ops);
    for (int i = 0; i < NIND; i++) mxp_engine_delete_var(v[i]);
    for (int i = 0; i < FAN; i++) mxp_engine_delete_var(ov[i]);
    mxp_engine_delete_var(xv);
    mxp_engine_shutdown();
    return 0;
}
