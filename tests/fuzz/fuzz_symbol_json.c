/* fuzz_symbol_json.c — libFuzzer harness for MXNet symbol JSON through
 * everything a symbol goes through before it computes: load, shape
 * inference (with "data" given as (2, 1, 28, 28), the shape of the
 * examples), and, when shapes are complete and small, a training bind
 * (gradient graph and memory plan), then a save/load/save round trip that
 * must reproduce the same text.  Properties: no crash, no leak, a refusal
 * always has a message; round trips are stable.  Ops come from the build
 * tree's packs (tools/run-fuzz.sh sets MXP_MANIFEST); without them only the
 * parser is exercised.  Seed corpus: tests/fuzz/corpus/symbol_json/
 * (the examples' and tests' symbol files). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mxplug.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("MXP_ENGINE_TYPE", "naive", 0);
    setenv("MXP_LOG_LEVEL", "error", 0);
    return 0;
}

static void bind_small(mxp_symbol *sym) {
    const char *names[] = {"data"};
    mxp_shape shp = {0};
    shp.ndim = 4;
    shp.dims[0] = 2, shp.dims[1] = 1, shp.dims[2] = 28, shp.dims[3] = 28;
    int na = 0, no = 0, nx = 0, complete = 0;
    mxp_shape *as = NULL, *os = NULL, *xs = NULL;
    if (mxp_symbol_infer_shape(sym, 1, names, &shp, &na, &as, &no, &os, &nx, &xs, &complete) == MXP_OK && complete) {
        int64_t total = 0;
        for (int i = 0; i < na + nx; i++) {
            const mxp_shape *s = i < na ? &as[i] : &xs[i - na];
            int64_t n = 0;
            if (mxp_size_of_shape("arg", s->dims, s->ndim, 4, 0, &n, NULL) || n > (1 << 20)) total = INT64_MAX;
            else if (total < INT64_MAX) total += n;
        }
        if (total < (1 << 22)) {
            mxp_executor *ex = NULL;
            mxp_device cpu = {MXP_DEV_CPU, 0};
            if (mxp_executor_simple_bind(sym, cpu, 1, names, &shp, 1, 0, NULL, &ex) == MXP_OK) mxp_executor_free(ex);
        }
    }
    free(as);
    free(os);
    free(xs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    mxp_symbol *sym = NULL;
    int rc = mxp_symbol_load_json(text, &sym);
    free(text);
    if (rc != MXP_OK) {
        if (!*mxp_last_error()) abort(); /* a refusal says why */
        return 0;
    }
    bind_small(sym);
    char *a = NULL, *b = NULL;
    mxp_symbol *again = NULL;
    if (mxp_symbol_save_json(sym, &a) == MXP_OK) {
        if (mxp_symbol_load_json(a, &again) != MXP_OK) abort(); /* what we save, we load */
        if (mxp_symbol_save_json(again, &b) != MXP_OK || strcmp(a, b)) abort();
    }
    free(a);
    free(b);
    mxp_symbol_release(again);
    mxp_symbol_release(sym);
    return 0;
}
