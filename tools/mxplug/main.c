/* main.c — entry point of the `mxplug` tool: global options, the command
 * table and the helpers every command shares (error printing).
 *
 * The table lists every command name the tool reserves, including those
 * whose implementation lands later (train, predict, score, bench): they
 * appear in `mxplug --help` marked "(not yet available)" and exit 1 with a
 * clear message, so scripts can already probe for them.  Adding a command
 * means one cmd_<name>.c file and one row here.
 * Does not parse command options: each cmd_*.c owns its own. */
#include "cli.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct cli_cmd {
    const char *name;
    cli_cmd_fn fn;          /* NULL: reserved, not implemented yet */
    const char *summary;
} cli_cmd;

static const cli_cmd commands[] = {
    {"list",     cmd_list,     "list ops, their implementations and policies (no pack is opened)"},
    {"info",     cmd_info,     "describe one op: doc, params, inputs, outputs, impls (--why)"},
    {"packs",    cmd_packs,    "list packs with version, ABI, library and load state"},
    {"check",    cmd_check,    "validate a manifest by loading each of its packs"},
    {"manifest", cmd_manifest, "manifest gen LIB.so: print a pack's manifest entry"},
    {"impl",     cmd_impl,     "show or persist the implementation policy of an op"},
    {"train",    cmd_train,    "train a network (symbol JSON)"},
    {"predict",  cmd_predict,  "run a trained network on inputs"},
    {"score",    cmd_score,    "evaluate a trained network on a data set"},
    {"im2rec",   cmd_im2rec,   "make image lists and RecordIO files (.lst, .rec + .idx) as MXNet's im2rec"},
    {"bench",    cmd_bench,    "time each implementation of an op for given shapes"},
    {"viz",      cmd_viz,      "draw a network (symbol JSON) as DOT, SVG or PNG"},
};

void cli_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("mxplug: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_fail(int rc, const char *fmt, ...) {
    /* Read the message before anything else could call the library. */
    const char *msg = mxp_last_error();
    va_list ap;
    va_start(ap, fmt);
    fputs("mxplug: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s (%s)\n", (msg && *msg) ? msg : mxp_status_str(rc), mxp_status_name(rc));
    return CLI_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxplug %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'mxplug %s --help'.\n", cmd);
    va_end(ap);
    return CLI_USAGE;
}

void cli_pack_problem(const char *tag, const char *name, const char *lib, const char *msg, int status) {
    char who[64];
    snprintf(who, sizeof who, "pack '%s'", name ? name : "?");
    if (!msg || !*msg) msg = status ? mxp_status_str(status) : "unknown problem";
    fprintf(stderr, "mxplug%s: ", tag ? tag : "");
    if (!strstr(msg, who)) fprintf(stderr, "%s (%s): ", who, lib ? lib : "?");
    fputs(msg, stderr);
    if (status) fprintf(stderr, " (%s)", mxp_status_name(status));
    fputc('\n', stderr);
}

int cli_is_help(const char *s) {
    return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

const char *cli_pack_state_name(int state) {
    switch (state) {
    case MXP_PACK_NOT_LOADED:  return "not loaded";
    case MXP_PACK_LOADED:      return "loaded";
    case MXP_PACK_UNAVAILABLE: return "unavailable";
    case MXP_PACK_FAILED:      return "failed";
    default:                   return "unknown";
    }
}

static void usage(FILE *f) {
    uint16_t major = 0, minor = 0;
    mxp_abi_version(&major, &minor);
    fprintf(f,
            "usage: mxplug [--version] [--help] COMMAND [ARGS...]\n"
            "\n"
            "Inspect and manage mxplug plugin packs and operators.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s%s\n", commands[i].name, commands[i].summary,
                commands[i].fn ? "" : " (not yet available)");
    fprintf(f,
            "\n"
            "Run 'mxplug COMMAND --help' for a command's options.\n"
            "\n"
            "Environment:\n"
            "  MXP_MANIFEST     manifest file(s) to read first\n"
            "  MXP_PLUGIN_PATH  directories holding manifest.yaml files\n"
            "  MXP_PACKS        comma-separated packs allowed to load\n"
            "  MXP_IMPL_<Op>    implementation policy of an op\n"
            "  MXP_LOG_LEVEL    e.g. 'warn' or 'info,plugin=debug'\n"
            "\n"
            "mxplug %s, plugin ABI %u.%u\n", mxp_version(), major, minor);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (cli_is_help(name) || strcmp(name, "help") == 0) {
        /* `mxplug help CMD` is `mxplug CMD --help`. */
        if (strcmp(name, "help") == 0 && argc > 2) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
                if (strcmp(commands[i].name, argv[2]) == 0 && commands[i].fn) {
                    char *hargv[] = {argv[2], "--help", NULL};
                    return commands[i].fn(2, hargv);
                }
            }
        }
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        uint16_t major = 0, minor = 0;
        mxp_abi_version(&major, &minor);
        printf("mxplug %s (plugin ABI %u.%u)\n", mxp_version(), major, minor);
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(commands[i].name, name) != 0) continue;
        if (!commands[i].fn) {
            cli_err("command '%s' is not available yet in this build", name);
            return CLI_FAIL;
        }
        int rc = commands[i].fn(argc - 1, argv + 1);
        mxp_registry_shutdown();
        return rc;
    }
    cli_err("unknown command '%s'", name);
    fprintf(stderr, "Try 'mxplug --help'.\n");
    return CLI_USAGE;
}
