/* cmd_packs.c — `mxplug packs`: one line per pack the manifests declare:
 * name, version, ABI (major.minor, min host minor), library and state
 * ("not loaded", "loaded", "unavailable: <reason>", "failed: <reason>").
 * Opens nothing unless --load is given, which loads every pack first so the
 * states show what loading does (exit 1 if any failed).  A loaded pack that
 * provides devices gets a line per device with its unit count ("device gpu:
 * available, 0 devices" on a machine without a GPU).  --stats adds, per
 * loaded pack, what it did in this process (pack_stats.c): its impls'
 * calls and time and the counters it publishes (ABI 1.2); in a fresh
 * process that lists the counters with their zero values (an application
 * reads them with mxp_pack_stats; `mxplug train --stats` prints them after
 * training). */
#include "cli.h"
#include "pack_stats.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

static void packs_help(FILE *f) {
    fputs("usage: mxplug packs [--load] [--stats] [--json]\n"
          "\n"
          "List the packs declared in the manifests: name, version, ABI\n"
          "(major.minor and oldest host minor needed), library path and state\n"
          "(not loaded / loaded / unavailable: reason / failed: reason).\n"
          "\n"
          "  --load      try to load every pack first; exit 1 if any fails\n"
          "  --stats     for each loaded pack, its implementations' calls and time\n"
          "              and the counters the pack publishes (0 in a fresh process:\n"
          "              use --load to see every pack's counters; `mxplug train\n"
          "              --stats` prints them after training)\n"
          "  --json      machine-readable output\n"
          "  -h, --help  this help\n", f);
}

static const char *nz(const char *s) { return s ? s : "?"; }

/* For a loaded pack that provides devices: "    device gpu: available, 0
 * devices" (a device pack loads without its hardware and counts 0). */
static void print_devices(const mxp_pack *p, int state) {
    if (state != MXP_PACK_LOADED) return;
    for (int k = 0; k < mxp_pack_device_count(p); k++) {
        const char *dev = mxp_pack_device_at(p, k);
        int n = 0;
        if (mxp_device_count(dev, &n) == MXP_OK)
            printf("    device %s: available, %d device%s\n", dev, n, n == 1 ? "" : "s");
        else
            printf("    device %s: count failed: %s\n", dev, mxp_last_error());
    }
}

int cmd_packs(int argc, char **argv) {
    int json = 0, load = 0, stats = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { packs_help(stdout); return CLI_OK; }
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--stats") == 0) stats = 1;
        else if (strcmp(argv[i], "--load") == 0) load = 1;
        else return cli_usage_error("packs", "unknown argument '%s'", argv[i]);
    }
    int rc = mxp_registry_init();
    if (rc != MXP_OK) return cli_fail(rc, "reading manifests");
    int n = mxp_pack_count(), n_failed = 0;
    if (load) {
        for (int i = 0; i < n; i++) {
            const char *name = mxp_pack_name(mxp_pack_at(i));
            if (name && mxp_pack_load(name) != MXP_OK) n_failed++;
        }
    }
    json_t *arr = json ? json_array() : NULL;
    if (!json && n > 0)
        printf("%-20s %-9s %-9s %-12s %s\n", "PACK", "VERSION", "ABI", "STATE", "LIBRARY");
    for (int i = 0; i < n; i++) {
        const mxp_pack *p = mxp_pack_at(i);
        int major = 0, minor = 0, min_host = 0;
        mxp_pack_abi(p, &major, &minor, &min_host);
        const char *reason = NULL;
        int state = mxp_pack_state(p, &reason);
        char abi[32];
        snprintf(abi, sizeof abi, "%d.%d", major, minor);
        if (min_host > 0) snprintf(abi + strlen(abi), sizeof abi - strlen(abi), "(>=.%d)", min_host);
        if (json) {
            json_array_append_new(arr,
                json_pack("{s:s, s:s, s:{s:i, s:i, s:i}, s:s, s:s, s:s, s:s, s:b}",
                          "name", nz(mxp_pack_name(p)), "version", nz(mxp_pack_version(p)),
                          "abi", "major", major, "minor", minor, "min_host_minor", min_host,
                          "library", nz(mxp_pack_library(p)), "manifest", nz(mxp_pack_manifest(p)),
                          "state", cli_pack_state_name(state), "reason", reason ? reason : "",
                          "eager", mxp_pack_is_eager(p)));
            continue;
        }
        char st[1024];
        if (reason && *reason) snprintf(st, sizeof st, "%s: %s", cli_pack_state_name(state), reason);
        else snprintf(st, sizeof st, "%s", cli_pack_state_name(state));
        /* State last but one would be cut by long reasons: print the library
         * before a long state so columns stay readable. */
        printf("%-20s %-9s %-9s %-12s %s\n", nz(mxp_pack_name(p)), nz(mxp_pack_version(p)), abi,
               (reason && *reason) ? cli_pack_state_name(state) : st, nz(mxp_pack_library(p)));
        if (reason && *reason) printf("    %s\n", st);
        print_devices(p, state);
    }
    json_t *stats_arr = json && stats ? json_array() : NULL;
    if (stats) {
        if (!json) printf("\nwhat the loaded packs did in this process:\n");
        rc = cli_pack_stats(stdout, "", stats_arr);
        if (rc != MXP_OK) {
            json_decref(arr);
            json_decref(stats_arr);
            return cli_fail(rc, "reading pack counters");
        }
    }
    if (json) {
        /* With --stats: {"packs": [...], "stats": [...]}; else the list. */
        if (stats) arr = json_pack("{s:o, s:o}", "packs", arr, "stats", stats_arr);
        char *text = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(arr);
        if (!text) { cli_err("out of memory formatting JSON"); return CLI_FAIL; }
        puts(text);
        free(text);
    } else if (n == 0) {
        printf("(no packs: set MXP_MANIFEST or MXP_PLUGIN_PATH)\n");
    }
    if (n_failed) {
        cli_err("%d pack(s) failed to load", n_failed);
        return CLI_FAIL;
    }
    return CLI_OK;
}
