/* cmd_info.c — `mxplug info NAME`: everything about one op, iterator,
 * kvstore type or device.
 *
 * Prints name, aliases, defining pack, doc, the parameter schema (name,
 * type, default, range/choices, doc), the input / output / aux-state names
 * for the given --param kwargs, the implementations and the active policy.
 * The schema and names come from the pack, so this may load the defining
 * pack; a load failure is reported (naming the pack) and exits 1 after
 * printing what the manifest alone knows.  With --why it prints
 * mxp_op_explain's report for the configuration given by --device,
 * --shape NAME=d1,d2,... and --param KEY=VALUE.  A name that is not an op
 * is looked up as an iterator, a kvstore type and a device (mxp_feature_*),
 * in that order, and described the same way (pack, doc, parameters). */
#include "cli.h"
#include "cli_args.h"

#include <stdlib.h>
#include <string.h>

#define INFO_MAX_KV 64

static void info_help(FILE *f) {
    fputs("usage: mxplug info NAME [--why] [--device DEV] [--shape NAME=d1,d2,...]...\n"
          "                     [--param KEY=VALUE]...\n"
          "\n"
          "Describe an operator (by name or alias): doc, parameters (type, default,\n"
          "range, doc), inputs, outputs, aux states and implementations.  Loads\n"
          "the pack that defines it.  NAME may also be an iterator (MNISTIter), a\n"
          "kvstore type (dist_sync) or a device (gpu): pack, doc and parameters.\n"
          "\n"
          "  --param KEY=VALUE  op parameter (repeatable); input/output names and\n"
          "                     --why depend on them (e.g. no_bias=True)\n"
          "  --shape NAME=DIMS  shape of input NAME, e.g. data=1,3,224,224 (--why)\n"
          "  --device DEV       device for --why (default cpu)\n"
          "  --why              explain, per implementation, why it would or would\n"
          "                     not be chosen for this configuration\n"
          "  -h, --help         this help\n", f);
}

static const char *nz(const char *s) { return s ? s : ""; }

/* One schema line, the same for ops and iterators. */
static void print_param(const char *name, const char *type, const char *def, const char *range,
                        const char *choices, const char *pdoc) {
    printf("  %-16s %s", nz(name), nz(type));
    if (choices && *choices) printf(" %s", choices);
    if (range && *range) printf(" %s", range);
    /* The registry reports a required param's default as "required" (or
     * empty). */
    if (!def || !*def || strcmp(def, "required") == 0) printf(", required");
    else printf(", default=%s", def);
    printf("\n");
    if (pdoc && *pdoc) printf("      %s\n", pdoc);
}

/* NAME is not an op: describe it as the first feature kind that has it.
 * Returns CLI_OK, CLI_FAIL, or -1 when no kind knows the name. */
static int info_feature(const char *name) {
    static const char *const kinds[] = {"iterator", "kvstore", "device"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int n = mxp_feature_count(kinds[k]), found = 0;
        for (int i = 0; i < n && !found; i++) found = strcmp(nz(mxp_feature_at(kinds[k], i, NULL)), name) == 0;
        if (!found) continue;
        const char *pack = NULL, *doc = NULL;
        int np = 0;
        int rc = mxp_feature_describe(kinds[k], name, &pack, &doc, &np);
        printf("%s (%s)\n", name, kinds[k]);
        if (rc != MXP_OK) return cli_fail(rc, "describing %s '%s'", kinds[k], name);
        printf("  pack: %s\n", nz(pack));
        printf("doc:\n  %s\n", (doc && *doc) ? doc : "(undocumented)");
        if (strcmp(kinds[k], "iterator") != 0) return CLI_OK;
        printf("parameters:%s\n", np == 0 ? " (none)" : "");
        int status = CLI_OK;
        for (int i = 0; i < np; i++) {
            const char *pn, *type, *def, *range, *choices, *pdoc;
            rc = mxp_feature_param_at(kinds[k], name, i, &pn, &type, &def, &range, &choices, &pdoc);
            if (rc != MXP_OK) { status = cli_fail(rc, "parameter %d of '%s'", i, name); continue; }
            print_param(pn, type, def, range, choices, pdoc);
        }
        return status;
    }
    return -1;
}

static void print_names(const mxp_op *op, int which, const char *title,
                        const char *const *keys, const char *const *vals, int n_kv, int *failed) {
    char names[64][64];
    int count = 0;
    int rc = mxp_op_list_names(op, which, keys, vals, n_kv, names, 64, &count);
    if (rc != MXP_OK && n_kv == 0) {
        /* Names that depend on required params (Convolution's kernel) are
         * unknown until they are given: say so, it is not an error. */
        printf("%s: (depend on parameters: %s; pass them with --param)\n", title, mxp_last_error());
        return;
    }
    if (rc != MXP_OK) {
        cli_fail(rc, "%s of '%s'", title, mxp_op_name(op));
        *failed = 1;
        return;
    }
    printf("%s:", title);
    if (count == 0) printf(" (none)");
    for (int i = 0; i < count && i < 64; i++) printf("%s %s", i ? "," : "", names[i]);
    printf("\n");
}

int cmd_info(int argc, char **argv) {
    const char *op_name = NULL, *device = "cpu";
    int why = 0;
    const char *keys[INFO_MAX_KV], *vals[INFO_MAX_KV], *shapes[INFO_MAX_KV];
    char *kv_copy[INFO_MAX_KV];
    int n_kv = 0, n_shapes = 0, status = CLI_OK;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) { info_help(stdout); goto done; }
        if (strcmp(a, "--why") == 0) { why = 1; continue; }
        if (strcmp(a, "--device") == 0 || strcmp(a, "--shape") == 0 || strcmp(a, "--param") == 0) {
            if (i + 1 >= argc) { status = cli_usage_error("info", "%s needs a value", a); goto done; }
            const char *v = argv[++i];
            if (strcmp(a, "--device") == 0) { device = v; continue; }
            if (strcmp(a, "--shape") == 0) {
                if (n_shapes >= INFO_MAX_KV) { status = cli_usage_error("info", "too many --shape"); goto done; }
                char name[64];
                mxp_shape shp;
                if ((status = cli_parse_shape_arg("info", v, sizeof(float), 0, name, sizeof name, &shp))) goto done;
                shapes[n_shapes++] = v;
            } else {
                if (n_kv >= INFO_MAX_KV) { status = cli_usage_error("info", "too many --param"); goto done; }
                char *key;
                if ((status = cli_parse_kv_arg("info", "--param", v, &key, &vals[n_kv]))) goto done;
                kv_copy[n_kv] = key;
                keys[n_kv++] = key;
            }
            continue;
        }
        if (a[0] == '-') { status = cli_usage_error("info", "unknown option '%s'", a); goto done; }
        if (op_name) { status = cli_usage_error("info", "one OP only (got '%s' and '%s')", op_name, a); goto done; }
        op_name = a;
    }
    if (!op_name) { status = cli_usage_error("info", "missing NAME"); goto done; }

    int rc = mxp_registry_init();
    if (rc != MXP_OK) { status = cli_fail(rc, "reading manifests"); goto done; }
    const mxp_op *op = mxp_op_find(op_name);
    if (!op) {
        status = info_feature(op_name);
        if (status >= 0) goto done;
        cli_err("no op, iterator, kvstore type or device named '%s' in the manifests (see 'mxplug list "
                "--kind all')", op_name);
        status = CLI_FAIL;
        goto done;
    }

    /* What the manifest knows: needs no loading. */
    printf("%s", mxp_op_name(op));
    if (strcmp(op_name, mxp_op_name(op)) != 0) printf(" (found by alias '%s')", op_name);
    printf("\n  pack: %s\n", nz(mxp_op_pack(op)));
    int na = mxp_op_alias_count(op);
    if (na > 0) {
        printf("  aliases:");
        for (int i = 0; i < na; i++) printf("%s %s", i ? "," : "", nz(mxp_op_alias_at(op, i)));
        printf("\n");
    }
    const char *policy = NULL, *source = NULL;
    if (mxp_op_policy(mxp_op_name(op), &policy, &source) == MXP_OK)
        printf("  policy: %s (%s)\n", nz(policy), nz(source));
    printf("implementations:\n");
    int ni = mxp_op_impl_count(op);
    if (ni <= 0) printf("  (none)\n");
    for (int i = 0; i < ni; i++)
        printf("  %-14s device %-6s rank %4d  pack %s\n", nz(mxp_op_impl_name(op, i)),
               nz(mxp_op_impl_device(op, i)), mxp_op_impl_rank(op, i), nz(mxp_op_impl_pack(op, i)));

    /* The schema lives in the pack. */
    rc = mxp_op_load(op);
    if (rc != MXP_OK) {
        status = cli_fail(rc, "loading pack '%s' for op '%s'", nz(mxp_op_pack(op)), mxp_op_name(op));
        goto done;
    }
    const char *doc = mxp_op_doc(op);
    printf("doc:\n  %s\n", (doc && *doc) ? doc : "(undocumented)");
    int np = mxp_op_param_count(op);
    if (np < 0) {
        status = cli_fail(np, "parameters of '%s'", mxp_op_name(op));
    } else {
        printf("parameters:%s\n", np == 0 ? " (none)" : "");
        for (int i = 0; i < np; i++) {
            const char *name, *type, *def, *range, *choices, *pdoc;
            rc = mxp_op_param_at(op, i, &name, &type, &def, &range, &choices, &pdoc);
            if (rc != MXP_OK) { status = cli_fail(rc, "parameter %d of '%s'", i, mxp_op_name(op)); continue; }
            print_param(name, type, def, range, choices, pdoc);
        }
    }
    int failed = 0;
    print_names(op, 0, "inputs", keys, vals, n_kv, &failed);
    print_names(op, 1, "outputs", keys, vals, n_kv, &failed);
    print_names(op, 2, "aux states", keys, vals, n_kv, &failed);
    if (failed) status = CLI_FAIL;

    if (why) {
        char *report = NULL;
        rc = mxp_op_explain(mxp_op_name(op), device, shapes, n_shapes, keys, vals, n_kv, &report);
        if (rc != MXP_OK) {
            status = cli_fail(rc, "explaining the choice for '%s' on %s", mxp_op_name(op), device);
        } else {
            printf("why (device %s):\n%s", device, report ? report : "");
            if (report && *report && report[strlen(report) - 1] != '\n') printf("\n");
        }
        free(report);
    }
done:
    for (int i = 0; i < n_kv; i++) free(kv_copy[i]);
    return status;
}
