/* requires.c — check a pack's `requires:` without opening its .so:
 * cpu_features against the flags line of /proc/cpuinfo (x86 "flags",
 * ARM "Features"), gpu against /dev/nvidia0 (or /dev/dri/renderD128 /
 * /dev/kfd), cuda_driver against /proc/driver/nvidia/version.
 * Test hooks: $MXP_CPUINFO names another cpuinfo file; $MXP_FAKE_GPU=1
 * pretends a GPU with driver $MXP_FAKE_CUDA_DRIVER (default "0"). */
#include "plugin/plugin_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mxp__requires_cpu_has(const char *feature) {
    const char *path = getenv("MXP_CPUINFO");
    FILE *f = fopen(path && *path ? path : "/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192];
    int found = 0;
    size_t flen = strlen(feature);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) && strncmp(line, "Features", 8)) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        for (char *p = colon + 1; *p;) {
            while (*p == ' ' || *p == '\t' || *p == '\n') p++;
            char *e = p;
            while (*e && *e != ' ' && *e != '\t' && *e != '\n') e++;
            if ((size_t)(e - p) == flen && !strncmp(p, feature, flen)) { found = 1; break; }
            p = e;
        }
        break; /* the first CPU's flags are enough */
    }
    fclose(f);
    return found;
}

static int have_gpu(void) {
    const char *fake = getenv("MXP_FAKE_GPU");
    if (fake && *fake) return atoi(fake) != 0;
    return access("/dev/nvidia0", F_OK) == 0 || access("/dev/kfd", F_OK) == 0;
}

/* Driver version "535.104.05" etc. as major.minor; 0 if none. */
static double driver_version(void) {
    const char *fake = getenv("MXP_FAKE_GPU");
    if (fake && *fake) {
        const char *v = getenv("MXP_FAKE_CUDA_DRIVER");
        return v ? atof(v) : 0;
    }
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return 0;
    char line[512];
    double v = 0;
    if (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "Kernel Module");
        if (p) {
            p += strlen("Kernel Module");
            v = atof(p);
        }
    }
    fclose(f);
    return v;
}

int mxp__requires_met(const mxp_man_pack *m, char *reason, size_t cap) {
    if (cap) reason[0] = '\0';
    for (int i = 0; i < m->n_cpu_features; i++) {
        if (!mxp__requires_cpu_has(m->cpu_features[i])) {
            snprintf(reason, cap, "requires CPU feature '%s', which this CPU lacks", m->cpu_features[i]);
            return 0;
        }
    }
    if ((m->need_gpu || m->cuda_driver) && !have_gpu()) {
        snprintf(reason, cap, "requires a GPU; none found (/dev/nvidia0)");
        return 0;
    }
    if (m->cuda_driver) {
        double need = atof(m->cuda_driver), have = driver_version();
        if (have < need) {
            snprintf(reason, cap, "requires CUDA driver >= %s, found %s", m->cuda_driver,
                     have > 0 ? "an older one" : "none");
            return 0;
        }
    }
    return 1;
}
