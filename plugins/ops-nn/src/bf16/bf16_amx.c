/* bf16/bf16_amx.c — the AMX micro-kernel of the bf16 GEMM: one 16×32 fp32
 * tile of C from TDPBF16PS on tiles (A: 16 rows × 32 bf16, B: 16 pair rows ×
 * 16 columns, two C tiles side by side).  Compiled with target attributes,
 * so the pack builds and loads anywhere; called only after bf16_isa.c saw
 * amx_tile + amx_bf16 in CPUID, the tile state in XCR0 and got the
 * kernel's permission.  Layouts: see bf16_gemm.c.  The tile configuration
 * is loaded on every call and released at its end, so no tile state
 * outlives a call (a thread switching to other work carries none). */
#include "bf16/bf16.h"

#include <immintrin.h>

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

void nn_bf16_amx_tile(const uint16_t *ap, const uint32_t *bp, int64_t kp, float *tile);

__attribute__((target("amx-tile,amx-bf16")))
void nn_bf16_amx_tile(const uint16_t *ap, const uint32_t *bp, int64_t kp, float *tile) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 5; t++) { /* 0,1: C halves; 2: A; 3,4: B halves */
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    const int64_t lda = 2 * kp * 2; /* bytes per A row */
    for (int64_t q = 0; q < kp; q += 16) {
        _tile_loadd(2, ap + 2 * q, lda);
        _tile_loadd(3, bp + q * 32, 128);
        _tile_loadd(4, bp + q * 32 + 16, 128);
        _tile_dpbf16ps(0, 2, 3);
        _tile_dpbf16ps(1, 2, 4);
    }
    _tile_stored(0, tile, 128);
    _tile_stored(1, tile + 16, 128);
    _tile_release();
}
