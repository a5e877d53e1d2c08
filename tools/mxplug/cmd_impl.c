/* cmd_impl.c — `mxplug impl OP [IMPL|auto|tune]` shows the effective
 * implementation policy of an op (and where it comes from), or persists
 * one in the user config with mxp_config_set_impl; `--unset` removes it.
 * A new policy must be auto, tune or the name of a declared implementation
 * (checked against the manifests, so nothing is loaded).  The environment
 * (MXP_IMPL_<Op>) still overrides the config: that is reported. */
#include "cli.h"

#include <string.h>

static void impl_help(FILE *f) {
    fputs("usage: mxplug impl OP               show the policy and implementations\n"
          "       mxplug impl OP IMPL|auto|tune set it in the user config\n"
          "       mxplug impl OP --unset        remove it from the user config\n"
          "\n"
          "auto picks the highest-ranked implementation that supports the node;\n"
          "tune times each candidate per shape signature and keeps the fastest.\n"
          "Precedence: API > $MXP_IMPL_<Op> > user config > auto.\n"
          "\n"
          "  -h, --help  this help\n", f);
}

static const char *nz(const char *s) { return s ? s : "?"; }

static int show(const mxp_op *op) {
    const char *policy = NULL, *source = NULL;
    int rc = mxp_op_policy(mxp_op_name(op), &policy, &source);
    if (rc != MXP_OK) return cli_fail(rc, "policy of '%s'", mxp_op_name(op));
    printf("%s: policy %s (from %s)\n", mxp_op_name(op), nz(policy), nz(source));
    for (int i = 0, n = mxp_op_impl_count(op); i < n; i++)
        printf("  %s %-14s device %-6s rank %4d  pack %s\n",
               (policy && strcmp(policy, nz(mxp_op_impl_name(op, i))) == 0) ? "*" : " ",
               nz(mxp_op_impl_name(op, i)), nz(mxp_op_impl_device(op, i)),
               mxp_op_impl_rank(op, i), nz(mxp_op_impl_pack(op, i)));
    return CLI_OK;
}

int cmd_impl(int argc, char **argv) {
    const char *op_name = NULL, *policy = NULL;
    int unset = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { impl_help(stdout); return CLI_OK; }
        if (strcmp(argv[i], "--unset") == 0) unset = 1;
        else if (argv[i][0] == '-') return cli_usage_error("impl", "unknown option '%s'", argv[i]);
        else if (!op_name) op_name = argv[i];
        else if (!policy) policy = argv[i];
        else return cli_usage_error("impl", "unexpected argument '%s'", argv[i]);
    }
    if (!op_name) return cli_usage_error("impl", "missing OP");
    if (unset && policy) return cli_usage_error("impl", "--unset takes no policy");

    int rc = mxp_registry_init();
    if (rc != MXP_OK) return cli_fail(rc, "reading manifests");
    const mxp_op *op = mxp_op_find(op_name);
    if (!op) {
        cli_err("no op named '%s' in the manifests (see 'mxplug list')", op_name);
        return CLI_FAIL;
    }
    if (!policy && !unset) return show(op);

    if (policy && strcmp(policy, "auto") != 0 && strcmp(policy, "tune") != 0) {
        int found = 0, n = mxp_op_impl_count(op);
        for (int i = 0; i < n && !found; i++)
            found = mxp_op_impl_name(op, i) && strcmp(mxp_op_impl_name(op, i), policy) == 0;
        if (!found) {
            fprintf(stderr, "mxplug: op '%s' has no implementation '%s'; choose auto, tune",
                    mxp_op_name(op), policy);
            for (int i = 0; i < n; i++) fprintf(stderr, ", %s", nz(mxp_op_impl_name(op, i)));
            fputc('\n', stderr);
            return CLI_FAIL;
        }
    }
    rc = mxp_config_set_impl(mxp_op_name(op), unset ? NULL : policy);
    if (rc != MXP_OK) return cli_fail(rc, "saving the policy of '%s'", mxp_op_name(op));
    printf("%s: %s\n", mxp_op_name(op), unset ? "policy removed from the user config"
                                               : "policy saved in the user config");
    const char *eff = NULL, *source = NULL;
    if (mxp_op_policy(mxp_op_name(op), &eff, &source) == MXP_OK && source &&
        strcmp(source, "config") != 0 && strcmp(source, "default") != 0)
        fprintf(stderr, "mxplug: note: '%s' currently uses '%s' from %s, which overrides the config\n",
                mxp_op_name(op), nz(eff), source);
    return CLI_OK;
}
