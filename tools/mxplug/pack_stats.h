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

/* A snapshot of pack `pack`'s counters (none when it is not loaded): free
 * *out with mxp_pack_stats_free. */
int cli_pack_stats_take(const char *pack, mxp_pack_stat **out, int *out_n);
/* One line per counter that moved from `before` to `after`: running totals
 * as "+delta unit (delta/runs per run)", gauges with their new level. */
void cli_pack_stats_moved(FILE *out, const char *prefix, const mxp_pack_stat *before, int n_before,
                          const mxp_pack_stat *after, int n_after, int runs);

#endif /* MXP_TOOLS_MXPLUG_PACK_STATS_H */
