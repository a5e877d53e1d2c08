/* rec_data.h — the `rec:PREFIX` data source of `mxplug train` (and score):
 * ImageRecordIter over PREFIX_train.rec (training, shuffled by the seed and
 * the epoch) and PREFIX_val.rec (validation, when present), with an .idx
 * next to each used when present.  Prints its errors; returns CLI_*. */
#ifndef MXP_TOOLS_MXPLUG_REC_DATA_H
#define MXP_TOOLS_MXPLUG_REC_DATA_H

#include "cli.h"

typedef struct cli_rec_opts {
    const char *data_shape;  /* "3,32,32" (required)                     */
    int rand_crop, rand_mirror;
    const char *aug;         /* "key=value,key=value" more ImageRecordIter kwargs, or NULL */
} cli_rec_opts;

/* Is spec "rec:PREFIX"? */
int cli_is_rec_spec(const char *spec);
/* Create the iterators; *val is NULL without PREFIX_val.rec.  *n_train:
 * records in the training file. */
int cli_rec_iters(const char *cmd, const char *spec, const cli_rec_opts *o, int64_t batch, uint64_t seed,
                  mxp_iter **train, mxp_iter **val, int64_t *n_train);

#endif /* MXP_TOOLS_MXPLUG_REC_DATA_H */
