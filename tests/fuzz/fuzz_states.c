/* fuzz_states.c — libFuzzer harness for optimizer states files (the
 * .states layer above the .params byte parser: the meta record, the
 * count:I / state:I:K names and their indices, the random generator
 * position).  Each input is written to a temporary file and loaded with
 * mxp_optimizer_load_states into an SGD-with-momentum optimizer after
 * seeding the generator with 7 (the seed of the corpus files).
 * Properties: no crash, no leak, and no allocation beyond what the file
 * can describe (-rss_limit_mb; issue 12 §3: a 440 KB file with an entry
 * renamed count:50000000 reached 6.6 GB).  Seed corpus:
 * tests/fuzz/corpus/states/ (files written by a real training run). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <mxplug.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];
static void remove_tmp(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("MXP_ENGINE_TYPE", "naive", 0);
    setenv("MXP_LOG_LEVEL", "error", 0);
    snprintf(path, sizeof path, "/tmp/mxp-fuzz-states-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    atexit(remove_tmp);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    mxp_random_seed(7);
    const char *k[] = {"learning_rate", "momentum"}, *v[] = {"0.1", "0.9"};
    mxp_optimizer *opt = NULL;
    if (mxp_optimizer_create("sgd", 2, k, v, &opt)) abort();
    mxp_optimizer_load_states(opt, path);
    mxp_optimizer_free(opt);
    return 0;
}
