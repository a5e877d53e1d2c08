/* pack_stats.h — per-pack statistics of this process for the CLI (see
 * pack_stats.c): the runtime's per-impl calls and time, and the counters
 * each loaded pack publishes (ABI 1.2). */
#ifndef MXP_TOOLS_MXPLUG_PACK_STATS_H
#define MXP_TOOLS_MXPLUG_PACK_STATS_H

#include <mxplug.h>

#include <jansson.h>
#include <stdio.h>

/* For every loaded pack: arr NULL prints text on out, each line starting
 * with prefix (e.g. "train: "), implementations that never ran left out;
 * else appends one object per pack to the JSON array arr ({pack, version,
 * impls: [{op, impl, device, forward_calls, forward_ms, backward_calls,
 * backward_ms}], counters: [{name, kind, unit, gauge, value, doc}]}).
 * Returns MXP_OK or the failing call's status. */
int cli_pack_stats(FILE *out, const char *prefix, json_t *arr);

#endif /* MXP_TOOLS_MXPLUG_PACK_STATS_H */
