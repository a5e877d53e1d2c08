/* progress.h — training progress reporting for `mxplug train`.
 *
 * Two modes, chosen once at creation:
 *   - live (stderr is a terminal): one status line redrawn in place (\r) at
 *     most every 100 ms: epoch, a bar, batch i/n, samples/s, the running
 *     metric and the epoch's ETA.  The line is wiped before anything else
 *     is printed (progress_epoch_end), so it never mixes with other output;
 *   - plain (stderr is a file or a pipe): MXNet's Speedometer line on `out`
 *     every `frequent` batches (default 50) or `period` seconds (default
 *     10), whichever comes first, with the speed over that stretch:
 *       Epoch[0] Batch [200]	Speed: 7500.12 samples/sec	accuracy=0.810000
 *     (tabs as MXNet prints them; frequent 0 turns them off).
 * In both modes progress_epoch_end prints one line per epoch on stdout:
 *   epoch 1/2  train-accuracy=0.8123  val-accuracy=0.8456  time=12.3s  samples/s=4878
 * Times are wall-clock (CLOCK_MONOTONIC).  Training time of an epoch runs
 * from progress_epoch_begin to the last batch; the validation pass that
 * follows is reported separately, so samples/s is the training speed. */
#ifndef MXP_TOOLS_MXPLUG_PROGRESS_H
#define MXP_TOOLS_MXPLUG_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct progress {
    int live;                /* redraw a status line on err               */
    FILE *out, *err;         /* epoch lines / live line                   */
    int epochs;              /* total epochs (the last epoch number)      */
    int64_t batch_size;
    int64_t batches;         /* per epoch; 0 if unknown                   */
    double t_epoch;          /* start of the current epoch                */
    double t_last_batch;     /* time of the latest batch                  */
    double t_drawn;          /* last redraw                               */
    int64_t nbatch;          /* batches done in the current epoch         */
    int drawn;               /* a live line is on screen                  */
    double train_seconds;    /* summed over finished epochs               */
    int64_t train_samples;
    int64_t frequent;        /* plain mode: a Speedometer line every N    */
    double period;           /* ... or every this many seconds            */
    int64_t reported_batch;  /* nbatch at the last Speedometer line        */
    double t_reported;       /* and its time                              */
} progress;

/* Monotonic seconds. */
double progress_now(void);
/* live < 0: decide by isatty(fileno(err)).  out: epoch lines; err: bar. */
void progress_init(progress *p, int live, FILE *out, FILE *err, int epochs, int64_t batch_size, int64_t batches);
void progress_epoch_begin(progress *p);
/* After batch nbatch (from 1) of epoch (0-based); metric name and value. */
void progress_batch(progress *p, int epoch, int64_t nbatch, const char *metric, double value);
/* Print the epoch line (val_value NaN: no validation). */
void progress_epoch_end(progress *p, int epoch, const char *metric, double train_value, double val_value);
/* Wipe a live line (before printing an error, say). */
void progress_clear(progress *p);
/* Format seconds as "1:05" / "1:02:03" into buf. */
const char *progress_fmt_eta(double seconds, char *buf, size_t cap);

#endif /* MXP_TOOLS_MXPLUG_PROGRESS_H */
