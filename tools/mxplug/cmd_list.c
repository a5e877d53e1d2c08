/* cmd_list.c — `mxplug list`: every op the manifests declare, with aliases,
 * defining pack, implementations (name, device, rank, pack) and the active
 * policy with its source.
 *
 * Without --loaded this never opens a .so: everything comes from the
 * manifests through mxp_op_* (which the registry answers from manifests
 * alone) and mxp_op_policy (API > env > config > default, no loading).
 * With --loaded each pack (or the --pack one) is loaded first, every failure
 * is reported on stderr naming the pack and its cause, and the exit status
 * is 1 if any failed; the list is still printed.  --json prints the same
 * data through libjansson.  --kind lists iterators, kvstore types or
 * devices instead (or as well, with 'all'), from mxp_feature_*. */
#include "cli.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

static void list_help(FILE *f) {
    fputs("usage: mxplug list [--kind KIND] [--pack PACK] [--json] [--loaded]\n"
          "\n"
          "List every operator declared in the manifests: name, aliases, defining\n"
          "pack, implementations (name, device, rank, pack) and the active\n"
          "implementation policy with where it comes from (api, env, config,\n"
          "default).  No pack is opened unless --loaded is given.\n"
          "\n"
          "  --kind KIND  op (default), iter, kvstore, device, or all\n"
          "  --pack PACK  only ops PACK defines or implements (only what PACK\n"
          "               provides, for the other kinds)\n"
          "  --json       machine-readable output (one JSON object)\n"
          "  --loaded     open the packs first (only PACK with --pack) and report\n"
          "               every pack that fails to load; exit 1 if any did\n"
          "  -h, --help   this help\n", f);
}

/* True when `pack` defines op or provides one of its implementations. */
static int op_involves_pack(const mxp_op *op, const char *pack) {
    const char *def = mxp_op_pack(op);
    if (def && strcmp(def, pack) == 0) return 1;
    int n = mxp_op_impl_count(op);
    for (int i = 0; i < n; i++) {
        const char *p = mxp_op_impl_pack(op, i);
        if (p && strcmp(p, pack) == 0) return 1;
    }
    return 0;
}

static const char *nz(const char *s) { return s ? s : "?"; }

/* Load packs for --loaded; returns the number that failed.  Failures are
 * printed, and recorded in `failures` (may be NULL) for --json. */
static int load_packs(const char *only, json_t *failures) {
    int n_failed = 0;
    int n = mxp_pack_count();
    for (int i = 0; i < n; i++) {
        const mxp_pack *p = mxp_pack_at(i);
        const char *name = mxp_pack_name(p);
        if (!name || (only && strcmp(only, name) != 0)) continue;
        int rc = mxp_pack_load(name);
        if (rc == MXP_OK) continue;
        n_failed++;
        const char *msg = mxp_last_error();
        cli_pack_problem(" list", name, nz(mxp_pack_library(p)), msg, rc);
        if (failures) {
            json_array_append_new(failures,
                json_pack("{s:s, s:s, s:s, s:s}", "pack", name,
                          "library", nz(mxp_pack_library(p)),
                          "status", mxp_status_name(rc),
                          "message", (msg && *msg) ? msg : mxp_status_str(rc)));
        }
    }
    return n_failed;
}

static json_t *op_to_json(const mxp_op *op) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(nz(mxp_op_name(op))));
    /* An op known only through impls of other packs has no defining pack. */
    json_object_set_new(o, "pack", mxp_op_pack(op) ? json_string(mxp_op_pack(op)) : json_null());
    json_t *aliases = json_array();
    for (int a = 0, na = mxp_op_alias_count(op); a < na; a++)
        json_array_append_new(aliases, json_string(nz(mxp_op_alias_at(op, a))));
    json_object_set_new(o, "aliases", aliases);
    json_t *impls = json_array();
    for (int i = 0, ni = mxp_op_impl_count(op); i < ni; i++) {
        json_array_append_new(impls,
            json_pack("{s:s, s:s, s:i, s:s}", "name", nz(mxp_op_impl_name(op, i)),
                      "device", nz(mxp_op_impl_device(op, i)),
                      "rank", mxp_op_impl_rank(op, i),
                      "pack", nz(mxp_op_impl_pack(op, i))));
    }
    json_object_set_new(o, "impls", impls);
    const char *policy = NULL, *source = NULL;
    if (mxp_op_policy(mxp_op_name(op), &policy, &source) == MXP_OK)
        json_object_set_new(o, "policy", json_pack("{s:s, s:s}", "policy", nz(policy),
                                                    "source", nz(source)));
    else
        json_object_set_new(o, "policy", json_null());
    return o;
}

static void op_print(const mxp_op *op) {
    const char *policy = NULL, *source = NULL;
    int prc = mxp_op_policy(mxp_op_name(op), &policy, &source);
    printf("%s", nz(mxp_op_name(op)));
    int na = mxp_op_alias_count(op);
    if (na > 0) {
        printf(" (aliases:");
        for (int a = 0; a < na; a++) printf("%s %s", a ? "," : "", nz(mxp_op_alias_at(op, a)));
        printf(")");
    }
    printf("  [pack %s]  policy: %s (%s)\n", nz(mxp_op_pack(op)),
           prc == MXP_OK ? nz(policy) : "?", prc == MXP_OK ? nz(source) : mxp_last_error());
    int ni = mxp_op_impl_count(op);
    if (ni <= 0) printf("    (no implementations)\n");
    for (int i = 0; i < ni; i++)
        printf("    impl %-14s device %-6s rank %4d  pack %s\n", nz(mxp_op_impl_name(op, i)),
               nz(mxp_op_impl_device(op, i)), mxp_op_impl_rank(op, i), nz(mxp_op_impl_pack(op, i)));
}

static const char *const g_feature_kinds[] = {"iterator", "kvstore", "device"};

/* Iterators, kvstore types or devices (feature kind k), from the manifests
 * and the runtime's own; into `json` (an object, gets an array under the
 * kind's plural) or printed. */
static int list_features(int k, const char *only, json_t *json) {
    const char *kind = g_feature_kinds[k];
    int n = mxp_feature_count(kind), shown = 0;
    if (n < 0) return cli_fail(MXP_EINVAL, "listing %ss", kind);
    json_t *arr = json ? json_array() : NULL;
    if (!json) printf("%ss:\n", kind);
    for (int i = 0; i < n; i++) {
        const char *pack = NULL, *name = mxp_feature_at(kind, i, &pack);
        if (!name || (only && strcmp(only, nz(pack)) != 0)) continue;
        shown++;
        if (json) json_array_append_new(arr, json_pack("{s:s, s:s}", "name", name, "pack", nz(pack)));
        else printf("    %-22s [pack %s]\n", name, nz(pack));
    }
    if (json) {
        char key[32];
        snprintf(key, sizeof key, "%ss", kind);
        json_object_set_new(json, key, arr);
    } else if (shown == 0) {
        printf("    (none%s%s)\n", only ? " from pack " : "", only ? only : "");
    }
    return CLI_OK;
}

int cmd_list(int argc, char **argv) {
    const char *only = NULL, *kind = "op";
    int json = 0, loaded = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { list_help(stdout); return CLI_OK; }
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--loaded") == 0) loaded = 1;
        else if (strcmp(argv[i], "--kind") == 0) {
            if (++i >= argc) return cli_usage_error("list", "--kind needs op, iter, kvstore, device or all");
            kind = argv[i];
        } else if (strncmp(argv[i], "--kind=", 7) == 0) kind = argv[i] + 7;
        else if (strcmp(argv[i], "--pack") == 0) {
            if (++i >= argc) return cli_usage_error("list", "--pack needs a pack name");
            only = argv[i];
        } else if (strncmp(argv[i], "--pack=", 7) == 0) only = argv[i] + 7;
        else return cli_usage_error("list", "unknown argument '%s'", argv[i]);
    }
    /* Which kinds: bit 0 ops, bits 1.. the feature kinds in order. */
    unsigned kinds = 0;
    if (!strcmp(kind, "op") || !strcmp(kind, "ops")) kinds = 1u;
    else if (!strcmp(kind, "all")) kinds = 0xFu;
    for (int k = 0; k < 3; k++) {
        size_t len = strlen(g_feature_kinds[k]);
        if (!strcmp(kind, g_feature_kinds[k]) || (k == 0 && !strcmp(kind, "iter")) ||
            (!strncmp(kind, g_feature_kinds[k], len) && !strcmp(kind + len, "s")))
            kinds = 1u << (k + 1);
    }
    if (!kinds)
        return cli_usage_error("list", "unknown --kind '%s' (op, iter, kvstore, device or all)", kind);
    int rc = mxp_registry_init();
    if (rc != MXP_OK) return cli_fail(rc, "reading manifests");
    if (only && !mxp_pack_find(only)) {
        cli_err("no pack named '%s' in the manifests", only);
        return CLI_FAIL;
    }
    json_t *failures = json ? json_array() : NULL;
    int n_failed = loaded ? load_packs(only, failures) : 0;

    int n = (kinds & 1u) ? mxp_op_count() : 0;
    if (json) {
        json_t *ops = json_array();
        for (int i = 0; i < n; i++) {
            const mxp_op *op = mxp_op_at(i);
            if (op && (!only || op_involves_pack(op, only))) json_array_append_new(ops, op_to_json(op));
        }
        json_t *root = json_object();
        if (kinds & 1u) json_object_set_new(root, "ops", ops);
        else json_decref(ops);
        for (int k = 0; k < 3; k++)
            if (kinds & (1u << (k + 1))) list_features(k, only, root);
        if (loaded) json_object_set_new(root, "load_failures", failures);
        else json_decref(failures);
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        if (!text) { cli_err("out of memory formatting JSON"); return CLI_FAIL; }
        puts(text);
        free(text);
    } else {
        int shown = 0;
        for (int i = 0; i < n; i++) {
            const mxp_op *op = mxp_op_at(i);
            if (!op || (only && !op_involves_pack(op, only))) continue;
            op_print(op);
            shown++;
        }
        if ((kinds & 1u) && shown == 0) printf("(no ops%s%s)\n", only ? " from pack " : "", only ? only : "");
        for (int k = 0; k < 3; k++)
            if (kinds & (1u << (k + 1))) list_features(k, only, NULL);
    }
    if (n_failed) {
        cli_err("%d pack(s) failed to load", n_failed);
        return CLI_FAIL;
    }
    return CLI_OK;
}
