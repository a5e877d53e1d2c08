/* model.h — helpers shared by `mxplug train`, `predict` and `score`:
 * option parsing, the `mnist:DIR` data source, the flat-vs-image input
 * decision, and an inference binding of a checkpoint (symbol + params).
 *
 * Everything goes through the public API (<mxplug.h>); errors are printed
 * here (cli_err / cli_fail) and reported as CLI_* exit statuses, so the
 * commands stay short. */
#ifndef MXP_TOOLS_MXPLUG_MODEL_H
#define MXP_TOOLS_MXPLUG_MODEL_H

#include "cli.h"
#include "cli_args.h"

#include <mxplug/executor.h>

/* ------------------------------------------------------------ options */
/* Matches argv[*i] against "--name VALUE" or "--name=VALUE"; on a match
 * stores the value, advances *i past it and returns 1; a missing value
 * prints a usage error and returns -1.  0: not this option. */
int cli_opt(const char *cmd, int argc, char **argv, int *i, const char *name, const char **val);
/* Strict number parsing: cli_args.h. */

/* ------------------------------------------------------------ data */
/* `mnist:DIR`: DIR/{train,t10k}-images-idx3-ubyte[.gz] and the labels.
 * split: "train" or "t10k".  Prints the error and returns CLI_FAIL when a
 * file is missing, CLI_USAGE when spec is not mnist:DIR. */
int cli_mnist_files(const char *cmd, const char *spec, const char *split, char *images, char *labels, size_t cap);
/* Number of items in an IDX file (plain or gzipped), or -1 (printed). */
int64_t cli_idx_count(const char *path);
/* An MNISTIter over the files (pixels /256 as MXNet); flat: (B,784),
 * else (B,1,28,28).  round_batch: keep every sample (last batch padded). */
int cli_mnist_iter(const char *images, const char *labels, int64_t batch, int flat, int shuffle, uint64_t seed,
                   int round_batch, mxp_iter **out);
/* The same over part part_index of num_parts (a worker's shard); shard:
 * MNISTIter's "contiguous" (MXNet's split) or "strided" (one global order,
 * every num_parts-th sample), NULL for the iterator's default. */
int cli_mnist_iter_part(const char *images, const char *labels, int64_t batch, int flat, int shuffle, uint64_t seed,
                        int round_batch, int num_parts, int part_index, const char *shard, mxp_iter **out);

/* Does the net take flat (B, rows*cols) input?  Decided by shape
 * inference: flat if the graph infers with it, else image (B,1,rows,cols)
 * if that infers; otherwise the inference error is printed (CLI_FAIL). */
int cli_net_input_layout(mxp_symbol *sym, int64_t batch, int rows, int cols, int *out_flat);

/* ------------------------------------------------------------ inference */
typedef struct cli_model {
    mxp_symbol *sym;
    int n_params;                /* checkpoint entries (arg: then aux:)   */
    char **arg_names, **aux_names;
    mxp_ndarray **args, **auxs;
    int n_arg, n_aux;
    mxp_executor *ex;            /* bound by cli_model_bind               */
    int64_t batch;
    int data_index;              /* "data" in list_arguments              */
    mxp_device dev;              /* where cli_model_bind binds; type 0 (as
                                    cli_model_load leaves it): cpu(0)     */
} cli_model;

/* PREFIX-symbol.json + PREFIX-%04d.params (printed errors, CLI_*). */
int cli_model_load(const char *prefix, int epoch, cli_model *m);
/* 1 when data of `shape` is consistent with the net and the checkpoint's
 * parameter shapes (shape inference with all of them; nothing printed). */
int cli_model_fits(cli_model *m, const mxp_shape *shape);
/* Bind for inference with data of `shape` (batch = shape->dims[0]) on
 * m->dev and copy the checkpoint's parameters in (a missing one is an
 * error). */
int cli_model_bind(cli_model *m, const mxp_shape *shape);
/* The executor's data input array (fill it, then forward). */
mxp_ndarray *cli_model_data(cli_model *m);
/* Forward (inference) and wait; *out: output 0 (owned by the executor). */
int cli_model_forward(cli_model *m, mxp_ndarray **out);
void cli_model_free(cli_model *m);

#endif /* MXP_TOOLS_MXPLUG_MODEL_H */
