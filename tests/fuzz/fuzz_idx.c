/* fuzz_idx.c — libFuzzer harness for the io-image pack's IDX parser
 * (plugins/io-image/src/idx.c, linked in directly: see the pack's pack.mk,
 * or build by hand with
 *   clang -fsanitize=fuzzer,address -Iplugin-api/include \
 *         plugins/io-image/src/idx.c tests/fuzz/fuzz_idx.c).
 *
 * Each input is parsed as a label file and as an image file.  Properties
 * checked: no crash or sanitizer report; the status is MXP_OK or
 * MXP_EFORMAT; a rejection always comes with a message; an acceptance
 * describes exactly the input (header + count * item_size == size, data
 * inside the buffer), and every data byte is readable.  The input is
 * copied to an exact-size heap buffer so ASan sees any over-read. */
#include "../../plugins/io-image/src/idx.h"

#include <mxp/types.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *buf, size_t size, uint32_t magic) {
    idx_view v;
    char err[512];
    int rc = idx_parse_mem(buf, size, magic, "<fuzz>", &v, err, sizeof err);
    if (rc != MXP_OK) {
        if (rc != MXP_EFORMAT || err[0] == '\0' || !strstr(err, "<fuzz>")) abort();
        return;
    }
    if (v.magic != magic || v.data != buf + v.data_offset) abort();
    if (v.data_offset + v.count * v.item_size != size) abort();
    if (v.count != v.dims[0] || v.item_size == 0) abort();
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < v.count * v.item_size; i++) sink ^= v.data[i];
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    check(buf, size, IDX_MAGIC_LABELS);
    check(buf, size, IDX_MAGIC_IMAGES);
    free(buf);
    return 0;
}
