/* pack_stats.c — what the packs did in this process, for `mxplug packs
 * --stats` and `mxplug train --stats`: per loaded pack, the runtime's
 * calls and time of each implementation the pack provides
 * (mxp_op_impl_stats) and the counters the pack publishes itself
 * (mxp_pack_stats, ABI 1.2), as text or as JSON.
 * Text leaves out implementations that never ran, so a training run's
 * table shows which impl did the work; JSON lists every one.  Also the
 * counters one pack moved between two snapshots (`mxplug bench`, per
 * impl).  Public API only. */
#include "pack_stats.h"

#include <string.h>

static const char *kind_name(int kind) {
    return kind == MXP_PACK_STAT_BYTES ? "bytes" : kind == MXP_PACK_STAT_NANOS ? "nanos" : "count";
}

/* Counter values with their unit: bytes as MiB beside the exact number,
 * nanoseconds as ms. */
static void format_value(const mxp_pack_stat *s, char *buf, size_t cap) {
    if (s->kind == MXP_PACK_STAT_NANOS)
        snprintf(buf, cap, "%.3f ms", (double)s->value / 1e6);
    else if (s->kind == MXP_PACK_STAT_BYTES && s->value >= (1u << 20))
        snprintf(buf, cap, "%llu bytes (%.1f MiB)", (unsigned long long)s->value, (double)s->value / 1048576.0);
    else
        snprintf(buf, cap, "%llu %s", (unsigned long long)s->value, s->unit);
}

/* Impls of pack `pname` (of any op) into JSON array `arr` (may be NULL)
 * and, when they ran, as text lines; returns the number of text lines. */
static int impls_of(FILE *out, const char *prefix, const char *pname, json_t *arr) {
    int lines = 0;
    for (int i = 0; i < mxp_op_count(); i++) {
        const mxp_op *op = mxp_op_at(i);
        for (int k = 0; k < mxp_op_impl_count(op); k++) {
            const char *ip = mxp_op_impl_pack(op, k);
            if (!ip || strcmp(ip, pname)) continue;
            uint64_t fc = 0, bc = 0;
            double fm = 0, bm = 0;
            if (mxp_op_impl_stats(op, k, &fc, &bc, &fm, &bm)) continue;
            if (arr) {
                json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:I, s:f, s:I, s:f}", "op", mxp_op_name(op),
                                                     "impl", mxp_op_impl_name(op, k), "device",
                                                     mxp_op_impl_device(op, k), "forward_calls", (json_int_t)fc,
                                                     "forward_ms", fm, "backward_calls", (json_int_t)bc,
                                                     "backward_ms", bm));
                continue;
            }
            if (!fc && !bc) continue;
            if (!lines++)
                fprintf(out, "%s  %-32s %-6s %14s %10s %14s %10s\n", prefix, "implementation", "device",
                        "forward calls", "ms", "backward calls", "ms");
            char who[192];
            snprintf(who, sizeof who, "%s/%s", mxp_op_name(op), mxp_op_impl_name(op, k));
            fprintf(out, "%s  %-32s %-6s %14llu %10.1f %14llu %10.1f\n", prefix, who, mxp_op_impl_device(op, k),
                    (unsigned long long)fc, fm, (unsigned long long)bc, bm);
        }
    }
    return lines;
}

int cli_pack_stats(FILE *out, const char *prefix, json_t *arr) {
    if (!prefix) prefix = "";
    int shown = 0;
    for (int i = 0; i < mxp_pack_count(); i++) {
        const mxp_pack *p = mxp_pack_at(i);
        if (mxp_pack_state(p, NULL) != MXP_PACK_LOADED) continue;
        const char *name = mxp_pack_name(p);
        mxp_pack_stat *st = NULL;
        int n = 0;
        int rc = mxp_pack_stats(p, &st, &n);
        if (rc) return rc;
        if (arr) {
            json_t *impls = json_array(), *counters = json_array();
            impls_of(out, prefix, name, impls);
            for (int k = 0; k < n; k++)
                json_array_append_new(counters, json_pack("{s:s, s:s, s:s, s:b, s:I, s:s}", "name", st[k].name,
                                                          "kind", kind_name(st[k].kind), "unit", st[k].unit, "gauge",
                                                          st[k].gauge, "value", (json_int_t)st[k].value, "doc",
                                                          st[k].doc));
            json_array_append_new(arr, json_pack("{s:s, s:s, s:o, s:o}", "pack", name, "version",
                                                 mxp_pack_version(p), "impls", impls, "counters", counters));
            mxp_pack_stats_free(st);
            shown++;
            continue;
        }
        fprintf(out, "%spack %s %s\n", prefix, name, mxp_pack_version(p));
        int lines = impls_of(out, prefix, name, NULL);
        for (int k = 0; k < n; k++) {
            char val[96];
            format_value(&st[k], val, sizeof val);
            fprintf(out, "%s  %-32s %s%s%s%s\n", prefix, st[k].name, val, st[k].gauge ? " (level)" : "",
                    *st[k].doc ? "  # " : "", st[k].doc);
        }
        if (!lines && !n) fprintf(out, "%s  (no implementation ran; the pack publishes no counters)\n", prefix);
        else if (!n) fprintf(out, "%s  (the pack publishes no counters)\n", prefix);
        mxp_pack_stats_free(st);
        shown++;
    }
    if (!shown && !arr) fprintf(out, "%s(no pack loaded)\n", prefix);
    return MXP_OK;
}

int cli_pack_stats_take(const char *pack, mxp_pack_stat **out, int *out_n) {
    *out = NULL;
    *out_n = 0;
    const mxp_pack *p = pack ? mxp_pack_find(pack) : NULL;
    if (!p || mxp_pack_state(p, NULL) != MXP_PACK_LOADED) return MXP_OK;
    return mxp_pack_stats(p, out, out_n);
}

void cli_pack_stats_moved(FILE *out, const char *prefix, const mxp_pack_stat *before, int n_before,
                          const mxp_pack_stat *after, int n_after, int runs) {
    for (int k = 0; k < n_after; k++) {
        uint64_t was = 0;
        for (int j = 0; j < n_before; j++)
            if (!strcmp(before[j].name, after[k].name)) was = before[j].value;
        if (after[k].gauge) {
            if (after[k].value != was) fprintf(out, "%s%s = %llu %s (level)\n", prefix, after[k].name,
                                               (unsigned long long)after[k].value, after[k].unit);
            continue;
        }
        if (after[k].value <= was) continue; /* a reload restarted it, or nothing moved */
        uint64_t d = after[k].value - was;
        if (after[k].kind == MXP_PACK_STAT_NANOS)
            fprintf(out, "%s%s +%.3f ms (%.3f ms per run)\n", prefix, after[k].name, (double)d / 1e6,
                    runs > 0 ? (double)d / 1e6 / runs : 0.0);
        else
            fprintf(out, "%s%s +%llu %s (%.0f per run)\n", prefix, after[k].name, (unsigned long long)d,
                    after[k].unit, runs > 0 ? (double)d / runs : 0.0);
    }
}
