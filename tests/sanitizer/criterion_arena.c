/* criterion_arena.c — makes Criterion usable under ThreadSanitizer.
 * Linked into every test (and canary) binary of a SANITIZE=thread build, and
 * only there.
 *
 * Why: Criterion's sandbox library (BoxFort) places its shared "inheritable
 * arena" at a random address in [0x200000000000, 0x7f0000000000) chosen with
 * rand_r(), and gives up after 10 tries whose pages are already mapped.
 * Under TSan almost all of that range is TSan's shadow/meta memory; only the
 * "mid" application range [0x550000000000, 0x568000000000) is free, so
 * Criterion aborts ~85% of the time with "Could not initialize inheritable
 * arena: Resource temporarily unavailable" (Snaipe/Criterion#274).
 *
 * What: this file defines rand_r() in the executable, which the dynamic
 * linker prefers over libc's (and libtsan's interceptor).  Calls coming from
 * libcriterion get values that put the arena inside the free mid range
 * (BoxFort computes base = 0x200000000000 + (r & 0x3fffff) << 24); every
 * other caller gets glibc's exact rand_r sequence.  It does not change how
 * tests run or what TSan reports. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NEXT; the build passes -D_GNU_SOURCE */
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int glibc_rand_r(unsigned int *seed) {
    /* The algorithm of glibc's stdlib/rand_r.c, so results are unchanged. */
    unsigned int next = *seed;
    int result;
    next *= 1103515245u;
    next += 12345u;
    result = (int)((next / 65536u) % 2048u);
    next *= 1103515245u;
    next += 12345u;
    result <<= 10;
    result ^= (int)((next / 65536u) % 1024u);
    next *= 1103515245u;
    next += 12345u;
    result <<= 10;
    result ^= (int)((next / 65536u) % 1024u);
    *seed = next;
    return result;
}

static int called_from_criterion(const void *ret) {
    Dl_info info;
    return dladdr(ret, &info) && info.dli_fname && strstr(info.dli_fname, "libcriterion");
}

int rand_r(unsigned int *seed) {
    int r = glibc_rand_r(seed);
    if (called_from_criterion(__builtin_return_address(0))) {
        /* 0x358000..0x35ffff -> arena base in [0x558000000000, 0x560000000000). */
        return 0x358000 + (r & 0x7fff);
    }
    return r;
}
