/* fuzz_manifest.c — libFuzzer harness: parse arbitrary bytes as a pack
 * manifest (mxp__manifest_parse_mem).  Must never crash or leak; errors
 * are fine.  Seeds in tests/fuzz/corpus/manifest/. */
#include "plugin/plugin_impl.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void quiet(int level, const char *cat, const char *msg, void *user) {
    (void)level; (void)cat; (void)msg; (void)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mxp_log_set_sink(quiet, NULL);
    mxp_manifest *m = NULL;
    if (mxp__manifest_parse_mem((const char *)data, size, "/fuzz/manifest.yaml", &m) == MXP_OK) {
        /* Touch every string so ASan sees any dangling pointer. */
        size_t total = 0;
        for (int i = 0; i < m->n_packs; i++) {
            total += __builtin_strlen(m->packs[i].name) + __builtin_strlen(m->packs[i].library);
            for (int k = 0; k < m->packs[i].n_ops; k++) total += __builtin_strlen(m->packs[i].ops[k].name);
        }
        (void)total;
        mxp__manifest_free(m);
    }
    return 0;
}
