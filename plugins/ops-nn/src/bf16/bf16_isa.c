/* bf16/bf16_isa.c — which bf16 kernel path runs: CPUID feature bits, the
 * XCR0 state the OS enables, the Linux AMX permission request, and the
 * MXP_BF16_KERNEL override.  Detection runs once (pthread_once); the
 * override is read at every selection so a process (or a test) may change
 * it between calls.  Nothing here executes a bf16 or AMX instruction. */
#include "bf16/bf16.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_avail[NN_BF16_N_PATHS];
static const char *g_why[NN_BF16_N_PATHS];

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux refuses AMX tile data until the process asks for it (5.16+). */
static int amx_permission(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

static void detect(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    g_avail[NN_BF16_FP32] = 1;
    for (int p = 1; p < NN_BF16_N_PATHS; p++) g_avail[p] = 0;
    g_why[NN_BF16_AVX512F] = "this CPU lacks avx512f (or the OS does not enable AVX-512 state)";
    g_why[NN_BF16_AVX512BF16] = "this CPU lacks avx512_bf16 (no VDPBF16PS)";
    g_why[NN_BF16_AMX] = "this CPU lacks amx_tile/amx_bf16";
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return; /* OSXSAVE */
    uint64_t xcr0 = xgetbv0();
    int zmm_state = (xcr0 & 0xe6) == 0xe6; /* SSE, AVX, opmask, ZMM hi */
    unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
    if (!__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) return;
    if (__get_cpuid_count(7, 1, &a71, &b, &c, &d)) {} else a71 = 0;
    int f = (b7 >> 16) & 1, bw = (b7 >> 30) & 1;
    g_avail[NN_BF16_AVX512F] = f && bw && zmm_state;
    g_avail[NN_BF16_AVX512BF16] = g_avail[NN_BF16_AVX512F] && ((a71 >> 5) & 1);
    int amx = ((d7 >> 22) & 1) && ((d7 >> 24) & 1); /* amx_bf16, amx_tile */
    if (amx && (xcr0 & 0x60000) != 0x60000) g_why[NN_BF16_AMX] = "the OS does not enable AMX tile state (XCR0)";
    else if (amx && !amx_permission()) g_why[NN_BF16_AMX] = "the kernel refused AMX tile data (arch_prctl)";
    else g_avail[NN_BF16_AMX] = amx;
}

const char *nn_bf16_path_name(int path) {
    static const char *const names[NN_BF16_N_PATHS] = {"fp32", "avx512f", "avx512bf16", "amx"};
    return path >= 0 && path < NN_BF16_N_PATHS ? names[path] : "?";
}

int nn_bf16_path_available(int path, const char **why) {
    pthread_once(&g_once, detect);
    if (path < 0 || path >= NN_BF16_N_PATHS) {
        if (why) *why = "no such path";
        return 0;
    }
    if (why) *why = g_avail[path] ? NULL : g_why[path];
    return g_avail[path];
}

int nn_bf16_path_select(int *out_path) {
    pthread_once(&g_once, detect);
    const char *env = getenv("MXP_BF16_KERNEL");
    if (!env || !*env || !strcasecmp(env, "auto")) {
        *out_path = g_avail[NN_BF16_AMX]          ? NN_BF16_AMX
                    : g_avail[NN_BF16_AVX512BF16] ? NN_BF16_AVX512BF16
                    : g_avail[NN_BF16_AVX512F]    ? NN_BF16_AVX512F
                                                  : NN_BF16_FP32;
        return MXP_OK;
    }
    for (int p = 0; p < NN_BF16_N_PATHS; p++)
        if (!strcasecmp(env, nn_bf16_path_name(p))) {
            if (!g_avail[p])
                return NN_ERR(MXP_EUNSUPPORTED, "MXP_BF16_KERNEL=%s: %s", env, g_why[p]);
            *out_path = p;
            return MXP_OK;
        }
    return NN_ERR(MXP_EINVAL, "MXP_BF16_KERNEL='%s': expected auto, amx, avx512bf16, avx512f or fp32", env);
}
