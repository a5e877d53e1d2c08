/* test_progress.c — `mxplug train`'s progress output without a terminal
 * (tools/mxplug/progress.c): MXNet's Speedometer lines every `frequent`
 * batches with the speed over that stretch, none in live mode, and the
 * per-epoch line.  Output goes to temporary files read back here. */
#include <criterion/criterion.h>

#include "../../../tools/mxplug/progress.c"

#include <stdlib.h>

static char *slurp(FILE *f) {
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    cr_assert(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

Test(progress, speedometer_every_frequent_batches_when_not_a_terminal) {
    FILE *out = tmpfile(), *err = tmpfile();
    cr_assert(out && err);
    progress p;
    progress_init(&p, 0, out, err, 2, 32, 7);
    p.frequent = 3;
    progress_epoch_begin(&p);
    for (int b = 1; b <= 7; b++) progress_batch(&p, 0, b, "accuracy", 0.25 * (b % 4));
    char *s = slurp(out);
    /* Batches 3 and 6, nothing else (the 10 s period never elapses here). */
    cr_expect(strstr(s, "Epoch[0] Batch [3]\tSpeed: "), "%s", s);
    cr_expect(strstr(s, "Epoch[0] Batch [6]\tSpeed: "), "%s", s);
    cr_expect(strstr(s, "samples/sec\taccuracy=0.750000\n"), "%s", s);
    cr_expect(strstr(s, "samples/sec\taccuracy=0.500000\n"), "%s", s);
    cr_expect(!strstr(s, "Batch [1]") && !strstr(s, "Batch [4]") && !strstr(s, "Batch [7]"), "%s", s);
    double speed = 0;
    const char *sp = strstr(s, "Speed: ");
    cr_assert(sp && sscanf(sp, "Speed: %lf", &speed) == 1);
    cr_expect_gt(speed, 0);
    free(s);
    char *e = slurp(err);
    cr_expect_str_eq(e, "", "no live bar on a non-terminal");
    free(e);
    fclose(out);
    fclose(err);
}

Test(progress, none_in_live_mode_or_with_frequent_zero) {
    for (int mode = 0; mode < 2; mode++) {
        FILE *out = tmpfile(), *err = tmpfile();
        progress p;
        progress_init(&p, mode == 0 ? 1 : 0, out, err, 1, 8, 4);
        p.frequent = mode == 0 ? 1 : 0;
        progress_epoch_begin(&p);
        for (int b = 1; b <= 4; b++) progress_batch(&p, 0, b, "accuracy", 0.5);
        char *s = slurp(out);
        cr_expect(!strstr(s, "Speed:"), "mode %d: %s", mode, s);
        free(s);
        fclose(out);
        fclose(err);
    }
}

/* The second epoch's lines count from its own batch 0, not from where the
 * first epoch's last line was (that printed one line at batch 901 with the
 * speed over the whole validation and checkpoint pause). */
Test(progress, speedometer_restarts_each_epoch) {
    FILE *out = tmpfile(), *err = tmpfile();
    cr_assert(out && err);
    progress p;
    progress_init(&p, 0, out, err, 2, 32, 7);
    p.frequent = 3;
    for (int epoch = 0; epoch < 2; epoch++) {
        if (epoch == 0) progress_epoch_begin(&p);
        for (int b = 1; b <= 7; b++) progress_batch(&p, epoch, b, "accuracy", 0.5);
        progress_epoch_end(&p, epoch, "accuracy", 0.5, 0.5);
    }
    char *s = slurp(out);
    cr_expect(strstr(s, "Epoch[1] Batch [3]\tSpeed: "), "%s", s);
    cr_expect(strstr(s, "Epoch[1] Batch [6]\tSpeed: "), "%s", s);
    cr_expect(!strstr(s, "Epoch[1] Batch [7]"), "%s", s);
    free(s);
    fclose(out);
    fclose(err);
}
