/* bench/engine/peer/omp_peer.c — the OpenMP `task depend` peer of
 * bench/engine/bench.c: the same three workloads, the same counters and
 * checks, timed from the first task creation to the end of taskwait.
 * Built by run.sh with -fopenmp (kept out of bench/engine/*.c so the
 * Makefile does not link it into bench_engine).  Run with
 * OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive.
 * Usage: omp_peer WORKLOAD [N]; prints "<workload> omp <us_per_op>". */
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

static long cnt[NIND], out[FAN], x;

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *wl = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    long ops = 0;
    double t0 = 0, t1 = 0;
    int w = strcmp(wl, "chain") == 0 ? 0 : strcmp(wl, "independent") == 0 ? 1 : strcmp(wl, "fanout") == 0 ? 2 : -1;
    if (w < 0) return 2;
#pragma omp parallel
#pragma omp single
    {
        /* Warm-up, like the mxplug side. */
        for (int i = 0; i < 20000; i++) {
#pragma omp task depend(inout : cnt[i % NIND]) firstprivate(i)
            cnt[i % NIND]++;
        }
#pragma omp taskwait
        memset(cnt, 0, sizeof cnt);
        t0 = now_s();
        if (w == 0) {
            for (long i = 0; i < n; i++) {
#pragma omp task depend(inout : cnt[0])
                cnt[0]++;
            }
            ops = n;
        } else if (w == 1) {
            for (long i = 0; i < n; i++) {
                int k = (int)(i % NIND);
#pragma omp task depend(inout : cnt[k]) firstprivate(k)
                cnt[k]++;
            }
            ops = n;
        } else {
            long rounds = n / (FAN + 1);
            for (long r = 0; r < rounds; r++) {
                for (int j = 0; j < FAN; j++) {
#pragma omp task depend(in : x) depend(inout : out[j]) firstprivate(j)
                    out[j]++;
                }
#pragma omp task depend(inout : x)
                x++;
            }
            ops = rounds * (FAN + 1);
        }
#pragma omp taskwait
        t1 = now_s();
    }
    int ok = 1;
    if (w == 0) ok = cnt[0] == n;
    if (w == 1) { long t = 0; for (int i = 0; i < NIND; i++) t += cnt[i]; ok = t == n; }
    if (w == 2) { long r = n / (FAN + 1); for (int j = 0; j < FAN; j++) ok &= out[j] == r; ok &= x == r; }
    if (!ok) { fprintf(stderr, "omp_peer: %s totals wrong\n", wl); return 1; }
    printf("%s omp %.4f\n", wl, (t1 - t0) * 1e6 / (double)ops);
    return 0;
}
