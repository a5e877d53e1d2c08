/* cli.h — shared declarations of the mxplug command-line tool.
 *
 * main.c dispatches argv[1] to one cmd_<name>() per command (one file each);
 * every command parses its own options, prints results on stdout and
 * problems on stderr (always with mxp_last_error() when a library call
 * failed), and returns the process exit status: 0 success, 1 a problem was
 * found or an operation failed, 2 bad usage.  Commands never exit() and
 * never touch registry internals: only the public API in <mxplug.h>. */
#ifndef MXP_TOOLS_MXPLUG_CLI_H
#define MXP_TOOLS_MXPLUG_CLI_H

#include <mxplug.h>

#include <stdio.h>

#define CLI_OK    0
#define CLI_FAIL  1
#define CLI_USAGE 2

/* A command: argv[0] is the command name ("list"), options follow. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cmd_list(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_packs(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_impl(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);   /* cmd_train.c   */
int cmd_predict(int argc, char **argv); /* cmd_predict.c */
int cmd_score(int argc, char **argv);   /* cmd_score.c   */
int cmd_viz(int argc, char **argv);     /* cmd_viz.c     */
int cmd_im2rec(int argc, char **argv);  /* cmd_im2rec.c  */

/* "mxplug: <msg>" on stderr. */
void cli_err(const char *fmt, ...) MXP_PRINTF(1, 2);
/* "mxplug: <what>: <mxp_last_error()> (<status name>)" on stderr; returns
 * CLI_FAIL so failure paths read  return cli_fail(rc, "loading '%s'", n); */
int cli_fail(int rc, const char *fmt, ...) MXP_PRINTF(2, 3);
/* Unknown option / missing argument: message plus a pointer to --help. */
int cli_usage_error(const char *cmd, const char *fmt, ...) MXP_PRINTF(2, 3);

/* True when s is "-h" or "--help". */
int cli_is_help(const char *s);

/* "mxplug<tag>: pack 'NAME' (LIB): MSG (STATUS)" on stderr; the pack and
 * library are left out when MSG already names the pack (the loader's
 * messages do), so nothing is said twice.  status 0: no status suffix. */
void cli_pack_problem(const char *tag, const char *name, const char *lib, const char *msg, int status);

/* Name of an mxp_pack_load_state ("not loaded", "loaded", ...). */
const char *cli_pack_state_name(int state);

#endif /* MXP_TOOLS_MXPLUG_CLI_H */
