/* curves.h — per-epoch training curves of `mxplug train` (--plot FILE.svg,
 * --log-json FILE); see curves.c.  A curves object with neither path set
 * does nothing. */
#ifndef MXP_TOOLS_MXPLUG_CURVES_H
#define MXP_TOOLS_MXPLUG_CURVES_H

#include "cli.h"

#include <stdint.h>

typedef struct curve_point {
    int epoch;            /* from 1 */
    double train, val;    /* metric values; val NaN: no validation */
    double seconds;       /* training time of the epoch */
    double samples_per_s; /* NaN when unknown */
} curve_point;

typedef struct curves {
    const char *svg_path, *json_path, *title; /* NULL: not wanted */
    char metric[32];
    curve_point *pts;
    int n, cap;
    int failed;           /* a write failed (reported on stderr) */
} curves;

void curves_init(curves *c, const char *svg_path, const char *json_path, const char *title);
/* Record epoch (0-based, as fit reports it) and rewrite the files
 * atomically.  Returns 0, or -1 after printing why a file was not written. */
int curves_epoch(curves *c, int epoch, const char *metric, double train, double val, double seconds,
                 int64_t samples);
void curves_free(curves *c);

#endif /* MXP_TOOLS_MXPLUG_CURVES_H */
