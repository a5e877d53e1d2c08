/* bench.c — KVStore benchmark, run under mpirun by run.sh (one process per
 * rank).  Modes:
 *   pushpull MIB REPS   mxp_kvstore_pushpull of one float32 key of MIB MiB
 *                       through dist_sync; algorithm bandwidth = bytes /
 *                       seconds per pushpull (GB/s, 1e9)
 *   raw MIB REPS        MPI_Allreduce(MPI_SUM) of the same bytes, called
 *                       directly (this process never loads the pack): the
 *                       floor for this transport
 *   lenet REPS          one step of LeNet's parameter set (8 keys, 431k
 *                       floats) pushed and pulled through dist_sync
 *   train DIR NET KV B  LeNet training, B batches of 64 per worker, through
 *                       dist_sync when KV is 1; samples/s of the 2nd epoch
 * Rank 0 prints one line `<mode> ... seconds=<s per op> gbps=<x>
 * min_seconds=<fastest>`; run.sh turns them into the closing lines (the
 * minimum is the least disturbed by other load on a shared machine).  The median of REPS timed repetitions
 * after 3 warm-up ones.  Each repetition starts with the engine idle and a
 * barrier (raw: MPI_Barrier) and ends by a barrier-free wait on the result
 * (KV_BENCH_BACK_TO_BACK=1: without waiting for the engine first;
 * KV_BENCH_PULL=1: a pull of each key into another array follows each
 * pushpull, inside the timed span; see pushpull()). */
#include <mxplug.h>

#ifdef KVBENCH_HAVE_MPI
#include <mpi.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define CHECK(call)                                                          \
    do {                                                                     \
        int rc_ = (call);                                                    \
        if (rc_) {                                                           \
            fprintf(stderr, "bench-kvstore: %s: %s\n", #call, mxp_last_error()); \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static int raw(double mib, int reps) {
#ifndef KVBENCH_HAVE_MPI
    (void)mib, (void)reps;
    fprintf(stderr, "bench-kvstore: built without Open MPI\n");
    return 1;
#else
    MPI_Init(NULL, NULL);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int64_t n = (int64_t)(mib * 1024 * 1024 / 4);
    float *buf = calloc((size_t)n, 4);
    if (!buf) return 1;
    double *t = calloc((size_t)reps, sizeof *t);
    for (int i = -3; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (i >= 0) t[i] = now() - t0;
    }
    double s = median(t, reps), lo = t[0]; /* median sorts t */
    if (rank == 0) printf("raw mib=%g seconds=%.6f gbps=%.3f min_seconds=%.6f\n", mib, s, (double)n * 4 / s / 1e9, lo);
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
#endif
}

static int pushpull(int n_keys, const int64_t *sizes, const char *mode, double mib, int reps) {
    mxp_kvstore *kv = NULL;
    CHECK(mxp_kvstore_create("dist_sync", 0, NULL, NULL, &kv));
    mxp_device cpu = {MXP_DEV_CPU, 0};
    mxp_ndarray **a = calloc((size_t)n_keys, sizeof *a);
    int64_t *keys = calloc((size_t)n_keys, sizeof *keys);
    double bytes = 0;
    for (int k = 0; k < n_keys; k++) {
        keys[k] = k;
        CHECK(mxp_ndarray_create(&sizes[k], 1, MXP_DTYPE_F32, cpu, &a[k]));
        CHECK(mxp_ndarray_fill(a[k], 0.0));
        bytes += (double)sizes[k] * 4;
    }
    CHECK(mxp_kvstore_init(kv, n_keys, keys, a));
    double *t = calloc((size_t)reps, sizeof *t);
    /* The timed span: from the pushpull call until every out array is
     * readable (what a caller waits for).  The store keeps each key's last
     * sum for later pulls by copy-on-write (runtime/src/kvstore/
     * lazy_store.c): the copy into the store is made only before out is
     * written again or the key is pulled or pushed, and a pushpull of the
     * key drops it; in this loop out is only rewritten by the next
     * pushpull, so no store copy is made, in or out of the span.
     * KV_BENCH_PULL=1 pulls every key into another array after each
     * pushpull and waits for that too (the deferred copy then falls into
     * the span).  Each repetition starts from an idle engine, as the raw
     * side starts from an idle MPI (KV_BENCH_BACK_TO_BACK=1: without that
     * wait). */
    const char *b2b = getenv("KV_BENCH_BACK_TO_BACK"), *pl = getenv("KV_BENCH_PULL");
    int drain = !(b2b && atoi(b2b)), pull = pl && atoi(pl);
    mxp_ndarray **p = calloc((size_t)n_keys, sizeof *p);
    for (int k = 0; pull && k < n_keys; k++) CHECK(mxp_ndarray_create(&sizes[k], 1, MXP_DTYPE_F32, cpu, &p[k]));
    for (int i = -3; i < reps; i++) {
        if (drain) CHECK(mxp_engine_wait_for_all());
        CHECK(mxp_kvstore_barrier(kv));
        double t0 = now();
        for (int k = 0; k < n_keys; k++) CHECK(mxp_kvstore_pushpull(kv, 1, &keys[k], &a[k], &a[k], -k));
        for (int k = 0; pull && k < n_keys; k++) CHECK(mxp_kvstore_pull(kv, 1, &keys[k], &p[k], -k));
        for (int k = 0; k < n_keys; k++) CHECK(mxp_ndarray_wait_to_read(pull ? p[k] : a[k]));
        if (i >= 0) t[i] = now() - t0;
    }
    for (int k = 0; pull && k < n_keys; k++) mxp_ndarray_release(p[k]);
    free(p);
    double s = median(t, reps), lo = t[0]; /* median sorts t */
    if (mxp_kvstore_rank(kv) == 0)
        printf("%s mib=%g keys=%d seconds=%.6f gbps=%.3f min_seconds=%.6f\n", mode, mib, n_keys, s, bytes / s / 1e9,
               lo);
    for (int k = 0; k < n_keys; k++) mxp_ndarray_release(a[k]);
    free(a);
    free(keys);
    free(t);
    mxp_kvstore_free(kv);
    return 0;
}

/* ------------------------------------------------------------ training */

/* KV_BENCH_THREADS=1: each thread's CPU time (ns, /proc/self/task/T/
 * schedstat) over the timed epoch, on stderr — where a worker's core goes
 * besides compute (the communication thread, MPI's own threads) — and how
 * long it was runnable but waiting for the core (schedstat's second field:
 * a compute thread preempted by the threads beside it or by other load). */
enum { MAX_TASKS = 64 };
static long long task_id[MAX_TASKS], task_ns[MAX_TASKS], task_sw[MAX_TASKS], task_wait[MAX_TASKS];
static char task_name[MAX_TASKS][32];
static int n_tasks;

static int read_tasks(long long *id, long long *ns, long long *sw, long long *wt, char (*name)[32]) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < MAX_TASKS) {
        if (de->d_name[0] == '.') continue;
        char path[96];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", de->d_name);
        FILE *f = fopen(path, "r");
        long long run = 0, wait = 0, slices = 0;
        if (!f) continue;
        int ok = fscanf(f, "%lld %lld %lld", &run, &wait, &slices) == 3;
        fclose(f);
        if (!ok) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        name[n][0] = 0;
        if ((f = fopen(path, "r"))) {
            if (fgets(name[n], 32, f)) name[n][strcspn(name[n], "\n")] = 0;
            fclose(f);
        }
        id[n] = atoll(de->d_name), ns[n] = run, sw[n] = slices, wt[n] = wait;
        n++;
    }
    if (d) closedir(d);
    return n;
}

static void tasks_report(int rank, double wall) {
    long long id[MAX_TASKS], ns[MAX_TASKS], sw[MAX_TASKS], wt[MAX_TASKS];
    char name[MAX_TASKS][32];
    int n = read_tasks(id, ns, sw, wt, name);
    for (int i = 0; i < n; i++) {
        long long ns0 = 0, sw0 = 0, wt0 = 0;
        for (int j = 0; j < n_tasks; j++)
            if (task_id[j] == id[i]) ns0 = task_ns[j], sw0 = task_sw[j], wt0 = task_wait[j];
        if (ns[i] - ns0 > 0)
            fprintf(stderr, "threads rank=%d tid=%lld name=%s cpu_ms=%.1f (%.1f%% of the epoch) timeslices=%lld "
                    "runnable_wait_ms=%.1f\n", rank, id[i], name[i], (double)(ns[i] - ns0) / 1e6,
                    100.0 * (double)(ns[i] - ns0) / 1e9 / wall, sw[i] - sw0, (double)(wt[i] - wt0) / 1e6);
    }
}

static double t_epoch[2];
static int want_threads;
static void on_epoch(void *user, int epoch, const char *metric, double tv, double vv) {
    (void)user, (void)metric, (void)tv, (void)vv;
    if (epoch < 2) t_epoch[epoch] = now();
    if (epoch == 0 && want_threads) n_tasks = read_tasks(task_id, task_ns, task_sw, task_wait, task_name);
}

/* LeNet (examples/lenet) on BATCHES batches of 64 Fashion-MNIST images per
 * worker, 2 epochs; the second epoch's samples/s.  workers > 1: through
 * dist_sync, each worker on its own slice.  Prints `train rank=R sps=X`. */
static int train(const char *dir, const char *net, int use_kv, int batches) {
    mxp_kvstore *kv = NULL;
    want_threads = getenv("KV_BENCH_THREADS") && atoi(getenv("KV_BENCH_THREADS"));
    if (use_kv) CHECK(mxp_kvstore_create("dist_sync", 0, NULL, NULL, &kv));
    int rank = kv ? mxp_kvstore_rank(kv) : 0, workers = kv ? mxp_kvstore_num_workers(kv) : 1;
    int64_t per = (int64_t)batches * 64, total = per * workers;
    char img[1024], lab[1024], bs[32];
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir);
    snprintf(bs, sizeof bs, "%lld", (long long)total);
    const char *k[] = {"image", "label", "batch_size", "shuffle", "flat", "silent"};
    const char *v[] = {img, lab, bs, "False", "False", "True"};
    mxp_iter *all = NULL;
    CHECK(mxp_iter_create("MNISTIter", 6, k, v, &all));
    int has = 0;
    CHECK(mxp_iter_next(all, &has));
    /* Copies of this worker's slice: the iterator's batch buffers are its own. */
    mxp_ndarray *xv = NULL, *yv = NULL, *xs = NULL, *ys = NULL;
    CHECK(mxp_ndarray_slice(mxp_iter_data(all, 0), rank * per, (rank + 1) * per, &xv));
    CHECK(mxp_ndarray_slice(mxp_iter_label(all, 0), rank * per, (rank + 1) * per, &yv));
    mxp_device cpu = {MXP_DEV_CPU, 0};
    CHECK(mxp_ndarray_create(mxp_ndarray_shape(xv), mxp_ndarray_ndim(xv), MXP_DTYPE_F32, cpu, &xs));
    CHECK(mxp_ndarray_create(mxp_ndarray_shape(yv), mxp_ndarray_ndim(yv), MXP_DTYPE_F32, cpu, &ys));
    CHECK(mxp_ndarray_copy(xv, xs));
    CHECK(mxp_ndarray_copy(yv, ys));
    CHECK(mxp_ndarray_wait_to_read(xs));
    CHECK(mxp_ndarray_wait_to_read(ys));
    mxp_ndarray_release(xv);
    mxp_ndarray_release(yv);
    mxp_iter *it = NULL;
    CHECK(mxp_iter_create_ndarray(1, &xs, 1, &ys, 64, 0, 0, MXP_LAST_BATCH_DISCARD, &it));
    mxp_symbol *sym = NULL;
    CHECK(mxp_symbol_load_file(net, &sym));
    mxp_module *m = NULL;
    CHECK(mxp_module_create(sym, 1, NULL, 1, NULL, &m));
    static const char *ok[] = {"learning_rate", "momentum"}, *ov[] = {"0.01", "0.9"};
    mxp_init xav = mxp_init_xavier(MXP_XAVIER_GAUSSIAN, MXP_XAVIER_IN, 2.0);
    mxp_fit_opts o;
    memset(&o, 0, sizeof o);
    o.struct_size = (uint32_t)sizeof o;
    o.num_epoch = 2;
    o.optimizer = "sgd";
    o.n_opt_kwargs = 2;
    o.opt_keys = ok;
    o.opt_vals = ov;
    o.initializer = &xav;
    o.epoch_cb = on_epoch;
    o.kvstore = kv;
    CHECK(mxp_module_fit(m, it, NULL, &o));
    if (want_threads) tasks_report(rank, t_epoch[1] - t_epoch[0]);
    printf("train rank=%d workers=%d sps=%.1f\n", rank, workers, (double)per / (t_epoch[1] - t_epoch[0]));
    fflush(stdout);
    mxp_module_free(m);
    mxp_symbol_release(sym);
    mxp_iter_free(it);
    mxp_ndarray_release(xs);
    mxp_ndarray_release(ys);
    mxp_iter_free(all);
    mxp_kvstore_free(kv);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "train")) return train(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    if (argc < 3) {
        fprintf(stderr, "usage: bench-kvstore pushpull|raw MIB REPS | lenet REPS | train DIR NET KV BATCHES\n");
        return 2;
    }
    if (!strcmp(argv[1], "raw") && argc == 4) return raw(atof(argv[2]), atoi(argv[3]));
    if (!strcmp(argv[1], "pushpull") && argc == 4) {
        double mib = atof(argv[2]);
        int64_t n = (int64_t)(mib * 1024 * 1024 / 4);
        return pushpull(1, &n, "pushpull", mib, atoi(argv[3]));
    }
    if (!strcmp(argv[1], "lenet")) {
        /* examples/lenet: conv1 20x1x5x5 + 20, conv2 50x20x5x5 + 50,
         * fc1 500x800 + 500, fc2 10x500 + 10. */
        static const int64_t lenet[8] = {500, 20, 25000, 50, 400000, 500, 5000, 10};
        double total = 0;
        for (int i = 0; i < 8; i++) total += (double)lenet[i] * 4;
        return pushpull(8, lenet, "lenet", total / 1024 / 1024, atoi(argv[2]));
    }
    fprintf(stderr, "bench-kvstore: unknown mode '%s'\n", argv[1]);
    return 2;
}
