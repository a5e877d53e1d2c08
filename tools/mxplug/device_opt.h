/* device_opt.h — the `--device` option of `mxplug train`, `score` and
 * `predict`: "cpu", "cpu:N", "gpu", "gpu:N" (also MXNet's "gpu(N)"), parsed
 * into an mxp_device and checked before anything is loaded or trained, so
 * a missing GPU is one clear line and exit status 1, never a crash. */
#ifndef MXP_TOOLS_MXPLUG_DEVICE_OPT_H
#define MXP_TOOLS_MXPLUG_DEVICE_OPT_H

#include "cli.h"

/* Parse spec into *out.  A bad spec prints a usage error (CLI_USAGE). */
int cli_device_parse(const char *cmd, const char *spec, mxp_device *out);

/* CLI_OK when arrays can be made on dev; otherwise prints
 * "mxplug: CMD: --device gpu:0: no CUDA device (driver reports 0): <the
 * runtime's explanation>" (or "... gpu:3: no such device (driver reports
 * 2)", or "no pack provides device 'gpu'") and returns CLI_FAIL. */
int cli_device_check(const char *cmd, mxp_device dev);

/* "cpu:0", "gpu:1" into buf. */
const char *cli_device_str(mxp_device dev, char *buf, size_t cap);

#endif /* MXP_TOOLS_MXPLUG_DEVICE_OPT_H */
