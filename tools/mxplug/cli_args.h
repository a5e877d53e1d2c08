/* cli_args.h — the option values mxplug's commands share, parsed strictly
 * in one place: numbers (--batch-size, --lr, --repeat), shapes
 * (--shape NAME=d1,d2,...; --data-shape C,H,W), KEY=VALUE (--param) and
 * key=value lists (--aug), and data sources (--data mnist:DIR, rec:PREFIX).
 * (--device is device_opt.h.)
 *
 * Every function is pure apart from its message: on bad input it prints a
 * usage error naming the command, the option and the value
 * (cli_usage_error) and returns CLI_USAGE; nothing is truncated silently
 * (a name or path that does not fit is an error).  No registry, no files:
 * tests/fuzz/fuzz_cli_args.c drives them directly, without a command. */
#ifndef MXP_TOOLS_MXPLUG_CLI_ARGS_H
#define MXP_TOOLS_MXPLUG_CLI_ARGS_H

#include "cli.h"

#include <stddef.h>

/* Longest path a --data spec may name: every file name derived from it
 * (PREFIX_train.idx, DIR/t10k-images-idx3-ubyte.gz) fits in CLI_PATH_MAX. */
#define CLI_PATH_MAX 4096
#define CLI_DATA_PATH_MAX (CLI_PATH_MAX - 64)

/* Strict number parsing ("what" names the option in the error): the whole
 * string, decimal, in [lo, hi]; a double must be finite. */
int cli_parse_int(const char *cmd, const char *what, const char *s, long long lo, long long hi, long long *out);
int cli_parse_double(const char *cmd, const char *what, const char *s, double *out);

/* "d1,d2,...": decimal digits only, each >= lo, between min_ndim and
 * max_ndim (<= MXP_MAX_NDIM) of them ("" is 0 dimensions). */
int cli_parse_dims(const char *cmd, const char *what, const char *s, long long lo, int min_ndim, int max_ndim,
                   mxp_shape *out);

/* "NAME=d1,d2,..." (--shape): NAME non-empty and shorter than name_cap,
 * dimensions >= 0, at most MXP_MAX_NDIM, and elements * elem_size + extra
 * bytes representable (mxp_size_of_shape). */
int cli_parse_shape_arg(const char *cmd, const char *arg, size_t elem_size, size_t extra, char *name,
                        size_t name_cap, mxp_shape *out);

/* "KEY=VALUE" (--param): KEY non-empty; *key is a malloc'd copy (free
 * it), *val points into arg after the first '='. */
int cli_parse_kv_arg(const char *cmd, const char *opt, const char *arg, char **key, const char **val);

/* "k=v,k=v,..." (--aug): split a copy of s (*copy, free it even on error)
 * at ','; empty items are skipped; every item needs a non-empty key and
 * '='; at most cap items (*n of them). */
int cli_parse_kv_list(const char *cmd, const char *opt, const char *s, char **copy, const char **keys,
                      const char **vals, int cap, int *n);

/* --data: "mnist:DIR" or "rec:PREFIX"; *path points after the colon and is
 * non-empty and at most CLI_DATA_PATH_MAX bytes. */
enum { CLI_DATA_MNIST = 1, CLI_DATA_REC = 2 };
int cli_parse_data_spec(const char *cmd, const char *spec, int *kind, const char **path);

#endif /* MXP_TOOLS_MXPLUG_CLI_ARGS_H */
