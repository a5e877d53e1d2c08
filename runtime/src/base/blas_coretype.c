/* blas_coretype.c — pick OpenBLAS's kernel set from CPUID when nobody did.
 *
 * Debian's OpenBLAS (0.3.21, built DYNAMIC_ARCH) chooses its kernels by CPU
 * model number.  For a model newer than itself (e.g. family 6 model 207,
 * Emerald Rapids) it falls back to its SSE3 "Prescott" kernels although the
 * CPU has AVX-512: LeNet then trains about 2x slower (measured side by side:
 * 2289 vs 4676-5066 samples/s).  OpenBLAS reads OPENBLAS_CORETYPE once, when
 * it is loaded.  Only packs link it, and the runtime dlopens them later, so
 * setting the variable in this library's constructor reaches it; the process
 * is normally still single-threaded then, as setenv requires.
 *
 * The choice follows the instruction sets, best first: AVX-512 with BF16
 * -> Cooperlake, AVX-512 F/BW/DQ/VL -> SkylakeX, AVX2+FMA -> Haswell (the
 * names OpenBLAS 0.3.21 knows; the checks include the OS's register-state
 * support).  A user's OPENBLAS_CORETYPE is left alone, and
 * MXP_BLAS_CORETYPE=0 keeps OpenBLAS's own choice.  An OpenBLAS loaded
 * before libmxplug (e.g. by numpy) has chosen already; nothing changes it.
 * Not here: threading of OpenBLAS (the packs set it per call). */
#include "env.h"

#include <stdlib.h>

static const char *coretype_for_this_cpu(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
    if (avx512) return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

__attribute__((constructor)) static void blas_coretype_from_cpuid(void) {
    if (getenv("OPENBLAS_CORETYPE") || !mxp__env_bool("MXP_BLAS_CORETYPE", 1)) return;
    const char *name = coretype_for_this_cpu();
    if (name) setenv("OPENBLAS_CORETYPE", name, 0);
}
