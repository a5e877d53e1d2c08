/* invoke_overhead.c — the C floor under the Python op overhead: time of one
 * mxp_invoke("elemwise_add") on 1-element float32 arrays (validate kwargs,
 * infer, allocate the output, choose the impl, push), averaged over a loop
 * that waits once at the end, as bench.py's Python loop does.  Prints
 *   c invoke_us=<x>
 * Usage: invoke_overhead [ITERS] (default 200000). */
#include <mxplug.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    if (iters < 1) {
        fprintf(stderr, "invoke_overhead: ITERS must be >= 1\n");
        return 2;
    }
    int64_t shape[1] = {1};
    mxp_device cpu = {MXP_DEV_CPU, 0};
    mxp_ndarray *in[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (mxp_ndarray_create(shape, 1, MXP_DTYPE_F32, cpu, &in[i]) || mxp_ndarray_fill(in[i], 1.0)) {
            fprintf(stderr, "invoke_overhead: %s\n", mxp_last_error());
            return 1;
        }
    double best = 1e30;
    for (int round = 0; round < 3; round++) {
        double t0 = now_s();
        for (long k = 0; k < iters; k++) {
            mxp_ndarray *out = NULL;
            int n_out = 1;
            if (mxp_invoke("elemwise_add", 2, in, &n_out, &out, 0, NULL, NULL)) {
                fprintf(stderr, "invoke_overhead: %s\n", mxp_last_error());
                return 1;
            }
            mxp_ndarray_release(out);
        }
        if (mxp_engine_wait_for_all()) {
            fprintf(stderr, "invoke_overhead: %s\n", mxp_last_error());
            return 1;
        }
        double us = (now_s() - t0) / (double)iters * 1e6;
        if (us < best) best = us;
    }
    printf("c invoke_us=%.3f\n", best);
    mxp_ndarray_release(in[0]);
    mxp_ndarray_release(in[1]);
    return 0;
}
