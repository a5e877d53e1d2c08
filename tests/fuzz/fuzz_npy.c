/* fuzz_npy.c — libFuzzer harness for the .npy reader of `mxplug predict`
 * (tools/mxplug/npy.c, compiled in).  Feeds arbitrary bytes to npy_parse.
 * Properties: no crash, no out-of-bounds read (ASan), no leak (LSan); on
 * success the element count times the dtype size equals the data bytes,
 * and on failure the message is not empty (issue 12 §5: shape (8,0) gave
 * an empty reason).  Seed corpus: tests/fuzz/corpus/npy/ (numpy-written
 * files of each dtype and rank, a duplicate-key header, truncations). */
#include <stdint.h>
#include <stdlib.h>

#include "../../tools/mxplug/npy.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    npy_array a;
    char err[384];
    err[0] = 0;
    int rc = npy_parse((const char *)data, size, &a, err, sizeof err);
    if (rc == MXP_OK) {
        size_t es = mxp_dtype_size(a.dtype);
        size_t n = 1;
        for (int i = 0; i < a.ndim; i++) n *= (size_t)a.shape[i];
        if (n != a.count || (es && a.count > size / es)) abort();
        free(a.data);
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    return 0;
}
