/* progress.c — live progress bar and per-epoch lines of `mxplug train`
 * (see progress.h).  Pure presentation: no library calls, so it can be
 * driven from the training library's batch/epoch callbacks.  Redraws are
 * throttled to 10 per second so a fast MLP epoch (thousands of batches a
 * second) does not spend its time writing to the terminal. */
#include "progress.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_init(progress *p, int live, FILE *out, FILE *err, int epochs, int64_t batch_size, int64_t batches) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->err = err;
    p->live = live < 0 ? isatty(fileno(err)) : live;
    p->epochs = epochs;
    p->batch_size = batch_size;
    p->batches = batches;
    p->t_epoch = p->t_last_batch = progress_now();
    p->frequent = 50;
    p->period = 10.0;
    p->t_reported = p->t_epoch;
}

const char *progress_fmt_eta(double s, char *buf, size_t cap) {
    if (!(s >= 0) || s > 360000) {
        snprintf(buf, cap, "--:--");
        return buf;
    }
    long t = lround(s);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
    return buf;
}

void progress_epoch_begin(progress *p) {
    p->t_epoch = p->t_last_batch = progress_now();
    p->t_drawn = 0;
    p->nbatch = 0;
    p->reported_batch = 0;
    p->t_reported = p->t_epoch;
}

void progress_clear(progress *p) {
    if (p->live && p->drawn) {
        fputs("\r\033[K", p->err);
        fflush(p->err);
        p->drawn = 0;
    }
}

void progress_batch(progress *p, int epoch, int64_t nbatch, const char *metric, double value) {
    double now = progress_now();
    p->nbatch = nbatch;
    p->t_last_batch = now;
    if (!p->live) {
        /* MXNet's Speedometer: the speed over the batches since the last line. */
        if (p->frequent <= 0 || nbatch <= p->reported_batch) return;
        if (nbatch - p->reported_batch < p->frequent && now - p->t_reported < p->period) return;
        double dt = now - p->t_reported;
        double sps = dt > 0 ? (double)((nbatch - p->reported_batch) * p->batch_size) / dt : 0;
        fprintf(p->out, "Epoch[%d] Batch [%lld]\tSpeed: %.2f samples/sec\t%s=%f\n", epoch, (long long)nbatch, sps,
                metric ? metric : "metric", value);
        fflush(p->out);
        p->reported_batch = nbatch;
        p->t_reported = now;
        return;
    }
    if (now - p->t_drawn < 0.1 && !(p->batches && nbatch >= p->batches)) return;
    p->t_drawn = now;
    double el = now - p->t_epoch;
    double sps = el > 0 ? (double)(nbatch * p->batch_size) / el : 0;
    char bar[32], eta[32];
    int width = 24, fill = p->batches ? (int)(width * nbatch / p->batches) : 0;
    if (fill > width) fill = width;
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
    bar[width] = 0;
    double left = p->batches && nbatch ? el / (double)nbatch * (double)(p->batches - nbatch) : NAN;
    fprintf(p->err, "\r\033[Kepoch %d/%d [%s] %lld/%lld  %.0f samples/s  %s=%.4f  ETA %s", epoch + 1, p->epochs, bar,
            (long long)nbatch, (long long)p->batches, sps, metric ? metric : "metric", value,
            progress_fmt_eta(left, eta, sizeof eta));
    fflush(p->err);
    p->drawn = 1;
}

void progress_epoch_end(progress *p, int epoch, const char *metric, double train_value, double val_value) {
    double now = progress_now();
    double train_t = p->t_last_batch - p->t_epoch;
    int64_t samples = p->nbatch * p->batch_size;
    p->train_seconds += train_t;
    p->train_samples += samples;
    progress_clear(p);
    const char *m = metric ? metric : "metric";
    fprintf(p->out, "epoch %d/%d  train-%s=%.4f", epoch + 1, p->epochs, m, train_value);
    if (!isnan(val_value)) fprintf(p->out, "  val-%s=%.4f", m, val_value);
    fprintf(p->out, "  time=%.1fs  samples/s=%.0f  (validation+checkpoint %.1fs)\n", train_t,
            train_t > 0 ? (double)samples / train_t : 0.0, now - p->t_last_batch);
    fflush(p->out);
    /* The next epoch starts now (after validation and checkpoint), with its
     * Speedometer counting from batch 0 again. */
    progress_epoch_begin(p);
}
