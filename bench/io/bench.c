/* bench/io/bench.c — `make bench-io` (run.sh drives it): image records
 * through ImageRecordIter vs the decode bound.
 *   bench REC IDX THREADS EPOCHS
 * 1. decode bound: every record's JPEG fully decoded to RGB by TurboJPEG
 *    (tjDecompress2, no scaling, no augmentation) on THREADS threads, each
 *    taking records from a shared counter; EPOCHS passes;
 * 2. ImageRecordIter, data_shape (3,224,224), random_resized_crop
 *    (area 0.08..1, ratio 3/4..4/3) + rand_mirror + mean/std, batch 32,
 *    preprocess_threads=THREADS, prefetch_buffer=0 (the decode threads are
 *    the only workers; the caller's thread is one of them), EPOCHS epochs.
 * Prints "decode_bound_ips=<x>" and "mxplug_ips=<y>" (images per second,
 * wall clock, after one warm-up pass each), and the same per second of
 * process CPU time ("..._per_cpu_s"), which a shared, loaded machine
 * disturbs much less than the wall clock. */
#include <mxplug.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

typedef struct img {
    const unsigned char *jpg;
    unsigned long n;
} img;

static img *imgs;
static size_t n_imgs;
static atomic_size_t next_img;
static int decode_failed;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double db_cpu_rate, it_cpu_rate;

static void *decode_worker(void *arg) {
    size_t total = *(size_t *)arg;
    tjhandle tj = tjInitDecompress();
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        size_t i = atomic_fetch_add(&next_img, 1);
        if (i >= total) break;
        const img *m = &imgs[i % n_imgs];
        int w, h, ss, cs;
        if (tjDecompressHeader3(tj, m->jpg, m->n, &w, &h, &ss, &cs)) {
            decode_failed = 1;
            break;
        }
        size_t need = (size_t)w * (size_t)h * 3;
        if (need > cap) {
            free(buf);
            buf = malloc(need);
            cap = need;
        }
        if (tjDecompress2(tj, m->jpg, m->n, buf, w, 0, h, TJPF_RGB, 0)) {
            decode_failed = 1;
            break;
        }
    }
    free(buf);
    tjDestroy(tj);
    return NULL;
}

static double decode_bound(int threads, int epochs) {
    size_t total = n_imgs * (size_t)epochs;
    double best = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
        atomic_store(&next_img, 0);
        pthread_t th[64];
        double t0 = now(), c0 = cpu_now();
        for (int t = 1; t < threads; t++) pthread_create(&th[t], NULL, decode_worker, &total);
        decode_worker(&total);
        for (int t = 1; t < threads; t++) pthread_join(th[t], NULL);
        double dt = now() - t0, dc = cpu_now() - c0;
        if (pass) {
            best = (double)total / dt;
            db_cpu_rate = (double)total / dc;
        }
    }
    return best;
}

static double iter_rate(const char *rec, const char *idx, int threads, int epochs) {
    char th[16];
    snprintf(th, sizeof th, "%d", threads);
    const char *keys[] = {"path_imgrec", "path_imgidx", "data_shape", "batch_size", "random_resized_crop",
                          "min_random_area", "max_random_area", "min_aspect_ratio", "max_aspect_ratio",
                          "rand_mirror", "mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b",
                          "preprocess_threads", "prefetch_buffer", "shuffle", "verbose"};
    const char *vals[] = {rec, idx, "(3, 224, 224)", "32", "True", "0.08", "1", "0.75", "1.3333333",
                          "True", "123.68", "116.28", "103.53", "58.395", "57.12", "57.375",
                          th, "0", "True", "False"};
    mxp_iter *it;
    int rc = mxp_iter_create("ImageRecordIter", (int)(sizeof keys / sizeof keys[0]), keys, vals, &it);
    if (rc) {
        fprintf(stderr, "bench-io: ImageRecordIter: %s\n", mxp_last_error());
        exit(1);
    }
    double rate = 0, images = 0, cpu = 0;
    for (int e = 0; e <= epochs; e++) { /* epoch 0 warms up */
        if (e) mxp_iter_reset(it);
        double t0 = now(), c0 = cpu_now();
        long n = 0;
        int has;
        while ((rc = mxp_iter_next(it, &has)) == MXP_OK && has) n += 32 - mxp_iter_pad(it);
        if (rc) {
            fprintf(stderr, "bench-io: next: %s\n", mxp_last_error());
            exit(1);
        }
        if (e) {
            rate += n / (now() - t0) / epochs;
            images += n;
            cpu += cpu_now() - c0;
        }
    }
    it_cpu_rate = images / cpu;
    mxp_iter_free(it);
    return rate;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s REC IDX THREADS EPOCHS\n", argv[0]);
        return 2;
    }
    const char *rec = argv[1], *idx = argv[2];
    int threads = atoi(argv[3]), epochs = atoi(argv[4]);
    mxp_recordio *r;
    if (mxp_recordio_open_read(rec, idx, &r)) {
        fprintf(stderr, "bench-io: %s\n", mxp_last_error());
        return 1;
    }
    const uint64_t *keys;
    uint64_t nk;
    mxp_recordio_keys(r, &keys, &nk);
    imgs = calloc(nk, sizeof *imgs);
    for (uint64_t i = 0; i < nk; i++) {
        const void *d;
        uint64_t len;
        mxp_recordio_header h;
        const void *jpg;
        uint64_t jn;
        if (mxp_recordio_read_key(r, keys[i], &d, &len) || mxp_recordio_unpack_image(d, len, &h, NULL, 0, &jpg, &jn)) {
            fprintf(stderr, "bench-io: %s\n", mxp_last_error());
            return 1;
        }
        unsigned char *copy = malloc(jn);
        memcpy(copy, jpg, jn);
        imgs[n_imgs].jpg = copy;
        imgs[n_imgs].n = (unsigned long)jn;
        n_imgs++;
    }
    mxp_recordio_close(r);
    double db = decode_bound(threads, epochs);
    if (decode_failed) {
        fprintf(stderr, "bench-io: a record is not a JPEG TurboJPEG decodes\n");
        return 1;
    }
    double mx = iter_rate(rec, idx, threads, epochs);
    printf("records=%zu threads=%d decode_bound_ips=%.0f mxplug_ips=%.0f decode_bound_per_cpu_s=%.0f "
           "mxplug_per_cpu_s=%.0f\n", n_imgs, threads, db, mx, db_cpu_rate, it_cpu_rate);
    for (size_t i = 0; i < n_imgs; i++) free((void *)imgs[i].jpg);
    free(imgs);
    return 0;
}
