/* train/train.h — shared helpers of the training library's files
 * (init.c, optimizer.c, schedule.c, metric.c, checkpoint.c).  Nothing here
 * is used outside runtime/src/train/. */
#ifndef MXP_TRAIN_TRAIN_H
#define MXP_TRAIN_TRAIN_H

#include "base/base.h"

/* Run op with kwargs given as a NULL-terminated list of key, value pairs
 * ("lr", "0.1", ..., NULL); outputs[0..n_out) must be given.  Formats
 * nothing itself: callers print doubles with "%.17g" (exact round trip). */
int mxp__train_invoke(const char *op, int n_in, mxp_ndarray *const *in, int n_out, mxp_ndarray **out,
                      const char *const *kv);

/* "%.17g" into buf (>= 32 bytes); returns buf. */
const char *mxp__train_fmt(char *buf, double v);

/* A metric's running totals (sum of per-instance values, instances), to
 * combine metrics across workers (module.c). */
void mxp__metric_totals(const mxp_metric *m, double *out_sum, int64_t *out_num);
void mxp__metric_set_totals(mxp_metric *m, double sum, int64_t num);
#endif /* MXP_TRAIN_TRAIN_H */
