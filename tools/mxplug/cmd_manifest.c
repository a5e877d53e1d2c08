/* cmd_manifest.c — `mxplug manifest gen LIB.so [-o FILE]`: print a pack's
 * manifest entry (a YAML list item, as plugins/<pack>/manifest.yaml holds)
 * by loading and introspecting the library with mxp_pack_manifest_gen.
 * Nothing is registered; the pack's init runs against a staging registrar.
 * Writes stdout, or FILE (atomically, via FILE.tmp + rename). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static void manifest_help(FILE *f) {
    fputs("usage: mxplug manifest gen LIB.so [-o FILE]\n"
          "\n"
          "Load LIB.so without registering it and print its manifest entry: name,\n"
          "version, ABI, library, and every op, implementation, device, kvstore and\n"
          "iterator it provides.  Paste it under `packs:` in a manifest.yaml (the\n"
          "library path is the file name: keep the manifest next to the .so).\n"
          "\n"
          "  -o FILE     write to FILE instead of stdout\n"
          "  -h, --help  this help\n", f);
}

static int put_yaml(FILE *f, void *text) {
    fputs(text, f);
    return MXP_OK;
}

int cmd_manifest(int argc, char **argv) {
    const char *sub = NULL, *lib = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) { manifest_help(stdout); return CLI_OK; }
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (++i >= argc) return cli_usage_error("manifest", "-o needs a file");
            out = argv[i];
        } else if (argv[i][0] == '-') {
            return cli_usage_error("manifest", "unknown option '%s'", argv[i]);
        } else if (!sub) {
            sub = argv[i];
        } else if (!lib) {
            lib = argv[i];
        } else {
            return cli_usage_error("manifest", "unexpected argument '%s'", argv[i]);
        }
    }
    if (!sub) return cli_usage_error("manifest", "missing subcommand (gen)");
    if (strcmp(sub, "gen") != 0) return cli_usage_error("manifest", "unknown subcommand '%s'", sub);
    if (!lib) return cli_usage_error("manifest", "gen needs a library path (LIB.so)");

    char *yaml = NULL;
    int rc = mxp_pack_manifest_gen(lib, &yaml);
    if (rc != MXP_OK) return cli_fail(rc, "generating the manifest entry of '%s'", lib);
    int status = CLI_OK;
    if (!out) {
        fputs(yaml ? yaml : "", stdout);
    } else {
        if ((rc = mxp_file_write_atomic(out, "manifest entry", put_yaml, yaml ? yaml : (char *)""))) {
            cli_fail(rc, "manifest gen");
            status = CLI_FAIL;
        }
    }
    free(yaml);
    return status;
}
