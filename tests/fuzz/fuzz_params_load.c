/* fuzz_params_load.c — libFuzzer harness for the .params loader.
 *
 * Feeds arbitrary bytes to mxp__ndarray_load_mem (the parser behind
 * mxp_ndarray_load).  Properties checked: no crash, no out-of-bounds read
 * (ASan), no leak (LSan), no huge allocation from a corrupt count (the
 * loader checks every count/size against the bytes left, so allocations are
 * bounded by the input size; -rss_limit_mb catches a regression), and on
 * success every array's bytes fit in the input.  The naive engine is used
 * so every push runs inline (fast, deterministic).
 * Seed corpus: tests/fuzz/corpus/params_load/ (valid files of each record
 * version and truncated ones). */
#include <stdint.h>
#include <stdlib.h>

#include "ndarray/ndarray.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("MXP_ENGINE_TYPE", "naive", 0);
    setenv("MXP_LOG_LEVEL", "error", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int n = 0;
    mxp_ndarray **arrays = NULL;
    char **names = NULL;
    int rc = mxp__ndarray_load_mem(data, size, "fuzz.params", &n, &arrays, &names);
    if (rc == MXP_OK) {
        size_t total = 0;
        for (int i = 0; i < n; i++) {
            total += mxp_ndarray_nbytes(arrays[i]);
            if (!mxp_ndarray_is_none(arrays[i]) && mxp_ndarray_nbytes(arrays[i]) &&
                mxp_ndarray_wait_to_read(arrays[i]) != MXP_OK)
                abort();
        }
        if (total > size) abort(); /* data bytes must have come from the input */
    } else if (arrays || names || n) {
        abort(); /* outputs must be cleared on failure */
    }
    mxp_ndarray_list_free(n, arrays, names);
    return 0;
}
