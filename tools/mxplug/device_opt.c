/* device_opt.c — `--device` for train / score / predict (device_opt.h).
 * Only the public API: mxp_device_count says how many units a device has
 * (0 for "gpu" on a machine without a GPU or driver: the ops-cuda pack
 * loads anyway and its count slot says 0), mxp_device_check gives the
 * device's own explanation for the message. */
#include "device_opt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *cli_device_str(mxp_device dev, char *buf, size_t cap) {
    const char *name = dev.type == MXP_DEV_GPU ? "gpu" : dev.type == MXP_DEV_CPU ? "cpu" : "device";
    snprintf(buf, cap, "%s:%d", name, (int)dev.id);
    return buf;
}

int cli_device_parse(const char *cmd, const char *spec, mxp_device *out) {
    out->type = MXP_DEV_CPU;
    out->id = 0;
    const char *rest;
    if (!strncmp(spec, "cpu", 3)) {
        out->type = MXP_DEV_CPU;
        rest = spec + 3;
    } else if (!strncmp(spec, "gpu", 3)) {
        out->type = MXP_DEV_GPU;
        rest = spec + 3;
    } else {
        return cli_usage_error(cmd, "--device '%s': use cpu, gpu or gpu:N", spec);
    }
    if (!*rest) return CLI_OK;
    int paren = *rest == '(';
    if (*rest != ':' && !paren) return cli_usage_error(cmd, "--device '%s': use cpu, gpu or gpu:N", spec);
    rest++;
    char *end;
    errno = 0;
    long v = strtol(rest, &end, 10);
    if (end == rest || errno || v < 0 || v > 1023 || (paren ? strcmp(end, ")") : *end != 0))
        return cli_usage_error(cmd, "--device '%s': the ordinal must be a number from 0 to 1023", spec);
    out->id = (int32_t)v;
    return CLI_OK;
}

int cli_device_check(const char *cmd, mxp_device dev) {
    char name[32];
    cli_device_str(dev, name, sizeof name);
    if (dev.type == MXP_DEV_CPU) return mxp_device_check(dev) ? cli_fail(MXP_EDEVICE, "%s: --device %s", cmd, name) : CLI_OK;
    int n = 0;
    int rc = mxp_device_count("gpu", &n);
    if (rc) {
        cli_err("%s: --device %s: no pack provides device 'gpu' (the ops-cuda pack is built only where nvcc is "
                "found, and not in sanitizer builds): %s", cmd, name, mxp_last_error());
        return CLI_FAIL;
    }
    if (dev.id < n) {
        rc = mxp_device_check(dev);
        return rc ? cli_fail(rc, "%s: --device %s", cmd, name) : CLI_OK;
    }
    rc = mxp_device_check(dev); /* for the device's own explanation */
    const char *why = rc ? mxp_last_error() : "";
    if (n == 0)
        cli_err("%s: --device %s: no CUDA device (driver reports 0)%s%s", cmd, name, rc ? ": " : "", why);
    else
        cli_err("%s: --device %s: no such device (driver reports %d: gpu:0 to gpu:%d)%s%s", cmd, name, n, n - 1,
                rc ? ": " : "", why);
    return CLI_FAIL;
}
