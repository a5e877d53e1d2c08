/* mxplug/train.h — training library: initializers, optimizers with
 * learning-rate schedules, evaluation metrics, checkpoints (MXNet's
 * mx.init, mx.optimizer, mx.lr_scheduler, mx.metric, mx.model
 * save_checkpoint), built on NDArrays and mxp_invoke.
 * Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * Everything follows MXNet 1.x definitions so numbers match; where mxplug
 * departs, the declaration says so.  Handles are single-threaded objects
 * (use one from one thread at a time).  Since ABI 1.0. */
#ifndef MXPLUG_TRAIN_H
#define MXPLUG_TRAIN_H

#include <mxplug/base.h>
#include <mxplug/ndarray.h>
#include <mxplug/symbol.h>
#include <mxplug/io.h>
#include <mxplug/kvstore.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================ initializers */

typedef enum mxp_init_kind {
    MXP_INIT_ZEROS    = 0,
    MXP_INIT_ONES     = 1,
    MXP_INIT_CONSTANT = 2, /* value                                          */
    MXP_INIT_UNIFORM  = 3, /* U(-scale, scale)           (MXNet default 0.07) */
    MXP_INIT_NORMAL   = 4, /* N(0, sigma^2)              (MXNet default 0.01) */
    MXP_INIT_XAVIER   = 5  /* rnd_type, factor_type, magnitude              */
} mxp_init_kind;

typedef enum mxp_xavier_rnd { MXP_XAVIER_UNIFORM = 0, MXP_XAVIER_GAUSSIAN = 1 } mxp_xavier_rnd;
typedef enum mxp_xavier_factor { MXP_XAVIER_AVG = 0, MXP_XAVIER_IN = 1, MXP_XAVIER_OUT = 2 } mxp_xavier_factor;

/* One initializer (a plain value; build with the helpers below). */
typedef struct mxp_init {
    uint32_t struct_size; /* the helpers below set it (mxplug/base.h)   */
    int kind;        /* mxp_init_kind                                   */
    double value;    /* CONSTANT                                        */
    double scale;    /* UNIFORM                                         */
    double sigma;    /* NORMAL                                          */
    int rnd_type;    /* XAVIER: mxp_xavier_rnd                          */
    int factor_type; /* XAVIER: mxp_xavier_factor                       */
    double magnitude;/* XAVIER                                          */
} mxp_init;

MXP_API mxp_init mxp_init_zeros(void);
MXP_API mxp_init mxp_init_ones(void);
MXP_API mxp_init mxp_init_constant(double value);
MXP_API mxp_init mxp_init_uniform(double scale);
MXP_API mxp_init mxp_init_normal(double sigma);
/* MXNet's defaults: rnd_type uniform, factor_type avg, magnitude 3. */
MXP_API mxp_init mxp_init_xavier(int rnd_type, int factor_type, double magnitude);

/* Xavier's fans as MXNet computes them: shape (out, in, k...) ->
 * fan_in = in * prod(k), fan_out = out * prod(k).  ndim must be >= 2
 * (MXNet refuses vectors).  Returns MXP_OK or MXP_EINVAL. */
MXP_API int mxp_init_xavier_fans(const int64_t *shape, int ndim, double *out_fan_in, double *out_fan_out);

/* Fill arr (float32 or float64, any device) with init.  Random kinds draw
 * from the runtime RNG (mxp_random_seed), so the same seed and the same
 * order of calls give the same values.  Async like mxp_invoke. */
MXP_API int mxp_init_array(const mxp_init *init, mxp_ndarray *arr);

/* Initializer rules by parameter name: shell patterns (fnmatch), the
 * rules added last are tried first, then MXNet's default rules:
 *   "*weight" -> the default initializer given at create,
 *   "*bias", "*beta", "*moving_mean", "*moving_inv_var", "*moving_avg" -> zeros,
 *   "*gamma", "*moving_var" -> ones.
 * A name no rule matches is an error (as MXNet's "Unknown initialization
 * pattern"). */
typedef struct mxp_init_rules mxp_init_rules;
MXP_API int mxp_init_rules_create(const mxp_init *weight_init, mxp_init_rules **out);
MXP_API int mxp_init_rules_add(mxp_init_rules *rules, const char *pattern, const mxp_init *init);
MXP_API void mxp_init_rules_free(mxp_init_rules *rules);
/* The initializer for `name` (a pointer into rules), or NULL with
 * MXP_ENOENT set as the last error. */
MXP_API const mxp_init *mxp_init_rules_find(const mxp_init_rules *rules, const char *name);
/* Find + mxp_init_array. */
MXP_API int mxp_init_rules_apply(const mxp_init_rules *rules, const char *name, mxp_ndarray *arr);

/* ============================================================ lr schedules */

/* lr as a function of the update count (MXNet's num_update), pure: the
 * same count gives the same lr, so a resumed run continues exactly.
 *   factor:       lr = base * factor^k, k = #{ j >= 1 : num_update > j*step },
 *                 never below stop_factor_lr   (mx.lr_scheduler.FactorScheduler)
 *   multi-factor: lr = base * factor^#{ s in steps : num_update > s }
 *                                              (MultiFactorScheduler)
 * base is the optimizer's learning_rate. */
typedef struct mxp_lr_schedule mxp_lr_schedule;
MXP_API int mxp_lr_schedule_factor(int64_t step, double factor, double stop_factor_lr, mxp_lr_schedule **out);
MXP_API int mxp_lr_schedule_multi_factor(int n_steps, const int64_t *steps, double factor, mxp_lr_schedule **out);
MXP_API double mxp_lr_schedule_lr(const mxp_lr_schedule *s, double base_lr, int64_t num_update);
MXP_API void mxp_lr_schedule_free(mxp_lr_schedule *s);

/* ============================================================ optimizers */

/* An optimizer (mx.optimizer.create) with its per-parameter state.
 * type: "sgd" (momentum 0 -> sgd_update, else sgd_mom_update), "adam"
 * (adam_update with MXNet's bias correction folded into lr), "rmsprop"
 * (non-centered rmsprop_update).  kwargs (MXNet names, values as text):
 *   learning_rate (sgd 0.01, adam/rmsprop 0.001), wd (0), rescale_grad (1),
 *   clip_gradient (none; < 0 = none), momentum (sgd, 0), beta1 (0.9),
 *   beta2 (0.999), epsilon (1e-8), gamma1 (rmsprop, 0.9), clip_weights
 *   (rmsprop, none).
 * Weight decay applies only to parameters whose name ends in "_weight" or
 * "_gamma" (MXNet's default wd_mult when parameter names are known); pass
 * name NULL to apply it always.
 * Returns MXP_OK, MXP_EINVAL (unknown type or key, bad value). */
typedef struct mxp_optimizer mxp_optimizer;
MXP_API int mxp_optimizer_create(const char *type, int n_kwargs, const char *const *keys,
                                 const char *const *vals, mxp_optimizer **out);
MXP_API void mxp_optimizer_free(mxp_optimizer *opt);
/* Attach a schedule (the optimizer takes ownership; NULL removes). */
MXP_API void mxp_optimizer_set_lr_schedule(mxp_optimizer *opt, mxp_lr_schedule *sched);
MXP_API const char *mxp_optimizer_type(const mxp_optimizer *opt);
/* Current lr (after the schedule, for the current num_update). */
MXP_API double mxp_optimizer_lr(const mxp_optimizer *opt);
/* MXNet's num_update: the largest update count of any parameter. */
MXP_API int64_t mxp_optimizer_num_update(const mxp_optimizer *opt);

/* One step for parameter `index` (state created on first use, zeros):
 * weight is updated in place from grad.  name: for wd_mult (see above).
 * Async (pushed to the engine). */
MXP_API int mxp_optimizer_update(mxp_optimizer *opt, int index, const char *name, mxp_ndarray *weight,
                                 mxp_ndarray *grad);

/* Per-parameter multipliers (MXNet's Optimizer.set_lr_mult / set_wd_mult),
 * by the name given to mxp_optimizer_update: lr becomes lr * mult; wd
 * becomes wd * mult, replacing the *_weight / *_gamma rule for that name.
 * The module sets them from variables' __lr_mult__ / __wd_mult__.
 * Returns MXP_OK, MXP_EINVAL (NULL, or mult negative or not finite). */
MXP_API int mxp_optimizer_set_lr_mult(mxp_optimizer *opt, const char *name, double mult);
MXP_API int mxp_optimizer_set_wd_mult(mxp_optimizer *opt, const char *name, double mult);

/* Save / load the optimizer's state: per index its update count and state
 * arrays (momentum; Adam's mean and var; RMSProp's n), plus num_update and
 * the CPU random generator's position.  The file is a .params file (so
 * mx.nd.load can read it) holding, in this order:
 *   "mxp_states:meta"  int64 [6]: format version (1), num_update,
 *                      number of indices, RNG key (two uint32 as one
 *                      int64), RNG counter (next Philox block), type code
 *                      (0 sgd, 1 adam, 2 rmsprop)
 *   per index i (ascending):  "count:<i>" int64 [1]  and
 *                      "state:<i>:<k>" the k-th state array (k = 0, 1)
 * Loading replaces every state, and restores the RNG position: it
 * re-seeds nothing, so the caller must have called mxp_random_seed with
 * the seed of the saved run (else MXP_EINVAL: the key differs).
 * Returns MXP_OK, MXP_EIO, MXP_EFORMAT (not a states file, other type). */
MXP_API int mxp_optimizer_save_states(mxp_optimizer *opt, const char *path);
MXP_API int mxp_optimizer_load_states(mxp_optimizer *opt, const char *path);

/* ============================================================ metrics */

/* name: "acc" / "accuracy", "top_k_accuracy" (kwarg top_k, default 1),
 * "ce" / "cross-entropy" (kwarg eps, default 1e-12).  Definitions as
 * mx.metric: accuracy compares argmax over axis 1 of pred (or pred itself
 * when it has the label's shape) with int(label); top-k counts label among
 * the k largest scores; cross-entropy sums -log(pred[i, label_i] + eps).
 * The value is sum / number of instances (NaN before any update). */
typedef struct mxp_metric mxp_metric;
MXP_API int mxp_metric_create(const char *name, int n_kwargs, const char *const *keys,
                              const char *const *vals, mxp_metric **out);
MXP_API void mxp_metric_free(mxp_metric *m);
MXP_API void mxp_metric_reset(mxp_metric *m);
/* Add a batch: labels[i] (N) or (N,1) and preds[i] (N, C) float32, for i in
 * [0, n).  The last `pad` rows of each are ignored (a padded batch).
 * Waits for the arrays.  Returns MXP_OK, MXP_ESHAPE, MXP_ETYPE. */
MXP_API int mxp_metric_update(mxp_metric *m, int n, mxp_ndarray *const *labels, mxp_ndarray *const *preds,
                              int pad);
/* Name ("accuracy", "top_k_accuracy_5", "cross-entropy") and value. */
MXP_API int mxp_metric_get(const mxp_metric *m, const char **out_name, double *out_value);
MXP_API int64_t mxp_metric_num_inst(const mxp_metric *m);

/* ============================================================ checkpoints */

/* PREFIX-%04d.params as mx.model.save_checkpoint writes it: keys
 * "arg:<name>" then "aux:<name>".  Any array may be on any device. */
MXP_API int mxp_checkpoint_save_params(const char *prefix, int epoch, int n_arg, const char *const *arg_names,
                                       mxp_ndarray *const *args, int n_aux, const char *const *aux_names,
                                       mxp_ndarray *const *auxs);
/* Load PREFIX-%04d.params and split it by prefix (names without "arg:" /
 * "aux:").  Free each pair with mxp_ndarray_list_free.  Keys without
 * either prefix are MXP_EFORMAT. */
MXP_API int mxp_checkpoint_load_params(const char *prefix, int epoch, int *out_n_arg, char ***out_arg_names,
                                       mxp_ndarray ***out_args, int *out_n_aux, char ***out_aux_names,
                                       mxp_ndarray ***out_auxs);
/* The file names: PREFIX-%04d.params, PREFIX-%04d.states, PREFIX-symbol.json. */
MXP_API int mxp_checkpoint_path(const char *prefix, int epoch, const char *what, char *buf, size_t cap);
/* Before writing checkpoints under `prefix` (DIR/NAME): checks that files
 * can be created there (MXP_EIO with the OS's reason, e.g. "No such file or
 * directory", "Permission denied"; MXP_EINVAL for a name too long), then
 * removes the NAME*.tmp.PID.N temporaries of writers that no longer run.
 * mxp_module_fit calls it before training when checkpoint_prefix is set. */
MXP_API int mxp_checkpoint_prepare(const char *prefix);

/* ============================================================ module */

/* A Module (mx.mod.Module): a symbol bound for training through the
 * executor (mxp_executor_simple_bind), its parameters, an optimizer and
 * the fit / score / predict loops.  Parameters are the symbol's arguments
 * other than the data and label names, in list_arguments order (that order
 * is the optimizer's index, as in MXNet), plus its aux states. */
typedef struct mxp_module mxp_module;

/* Progress callbacks (optional).  epoch is the epoch number, nbatch the
 * batch within it (from 1); metric values as mxp_metric_get. */
typedef void (*mxp_batch_cb)(void *user, int epoch, int64_t nbatch, const char *metric, double value);
typedef void (*mxp_epoch_cb)(void *user, int epoch, const char *metric, double train_value, double val_value);

typedef struct mxp_fit_opts {
    uint32_t struct_size;       /* sizeof as compiled (mxplug/base.h)           */
    int begin_epoch;            /* first epoch to run (resume: the loaded one) */
    int num_epoch;              /* run epochs [begin_epoch, num_epoch)          */
    const char *optimizer;      /* "sgd" (default), "adam", "rmsprop"           */
    int n_opt_kwargs;           /* e.g. learning_rate, momentum, wd; MXNet's    */
    const char *const *opt_keys;/* rescale_grad default is 1/batch_size         */
    const char *const *opt_vals;
    uint64_t seed;              /* mxp_random_seed(seed) before initializing    */
    const mxp_init *initializer;/* weights; NULL: MXNet's Uniform(0.01)        */
    const char *eval_metric;    /* "acc" (default), "ce", "top_k_accuracy"      */
    const char *checkpoint_prefix; /* non-NULL: save PREFIX-%04d.params/.states
                                   and PREFIX-symbol.json after every epoch
                                   (file number = epoch + 1, as MXNet's
                                   do_checkpoint callback)                   */
    mxp_batch_cb batch_cb;
    mxp_epoch_cb epoch_cb;
    void *user;
    /* Learning-rate schedule of a newly created optimizer:
     * MultiFactorScheduler(lr_steps, lr_factor), steps in updates
     * (num_update, i.e. batches: epoch e ends at update (e + 1) * batches
     * per epoch); none when n_lr_steps is 0.  A pure function of
     * num_update, so a resumed run follows it exactly. */
    int n_lr_steps;
    const int64_t *lr_steps;
    double lr_factor;
    /* 0 (default): a non-finite value in a batch's output or, at the end of
     * an epoch, in a parameter stops fit with MXP_EINVAL naming the epoch
     * and batch (nothing of that epoch is saved).  1: go on regardless. */
    int allow_nan;
    /* A KVStore to train through (MXNet's Module.fit(kvstore=...)); NULL
     * trains alone.  fit initialises one key per parameter (its name) with
     * this worker's parameters and pulls them back, so every worker starts
     * from rank 0's; each step pushes every gradient (priority -index, so
     * the first layers' sums go first) and pulls the sum over all pushes
     * and workers back before this module's optimizer updates the weights —
     * the same sum on every worker, so weights stay identical.  Give each
     * worker its shard of the data (MNISTIter num_parts / part_index).
     * With a dist_*sync type, rescale_grad defaults to 1 / (batch_size *
     * num_workers) (MXNet's rule).  The epoch's train and validation
     * metrics are summed over workers (key "__mxp_metric__") before
     * epoch_cb, and only rank 0 writes checkpoints.  The store must have no
     * updater (the module updates); aux states (BatchNorm's moving
     * statistics) stay per worker, as in MXNet. */
    mxp_kvstore *kvstore;
} mxp_fit_opts;

/* data_names / label_names: the symbol's inputs fed by iterators.  NULL
 * data_names with n_data 0 or 1: {"data"}; NULL label_names with n_label 1:
 * {"softmax_label"}, with n_label 0: no label; NULL names with a larger
 * count, or a negative count: MXP_EINVAL.  The module retains sym and
 * runs on cpu(0) until mxp_module_set_device. */
MXP_API int mxp_module_create(mxp_symbol *sym, int n_data, const char *const *data_names, int n_label,
                              const char *const *label_names, mxp_module **out);
MXP_API void mxp_module_free(mxp_module *mod);

/* Bind the module's executors on `dev` (MXNet's Module(context=...)), e.g.
 * {MXP_DEV_GPU, 0}: parameters, gradients, optimizer states and outputs
 * live there; batches are copied in from the iterators at each step and
 * metrics, checks, predictions and checkpoints read copies on the host.
 * Initial weights are drawn on the host and copied, so a seed gives the
 * same ones on every device.  Before the first fit/score/predict only
 * (MXP_EMISUSE after).  The device is checked now: one that does not
 * exist is MXP_EDEVICE with mxp_device_check's message.  A kvstore is
 * refused at fit for a module off the host (its sums run on the CPU). */
MXP_API int mxp_module_set_device(mxp_module *mod, mxp_device dev);
/* The module's device (cpu(0) unless set). */
MXP_API mxp_device mxp_module_device(const mxp_module *mod);

/* Train: bind to train's shapes (first call), seed, initialize parameters
 * (unless already set), apply a pending mxp_module_load_checkpoint, create
 * the optimizer (restoring loaded states), then per epoch: set the
 * iterator's epoch, forward/backward/update every batch, evaluate `val`
 * (may be NULL) with the same metric, callbacks, checkpoint.
 * Returns MXP_OK or the first error. */
MXP_API int mxp_module_fit(mxp_module *mod, mxp_iter *train, mxp_iter *val, const mxp_fit_opts *opts);

/* Evaluate on every batch of iter's current epoch (padded rows ignored)
 * with metric `metric` ("acc", ...).  Uses an inference binding without
 * labels, bound on demand.  Parameters: those of a pending
 * mxp_module_load_checkpoint (no fit needed; every parameter and aux state
 * must be in it), else the trained ones; neither: MXP_EMISUSE.
 * *out_value: the metric's value. */
MXP_API int mxp_module_score(mxp_module *mod, mxp_iter *iter, const char *metric, double *out_value);

/* Output 0 for every sample of iter's current epoch, padded rows dropped,
 * concatenated: out (n_samples, ...) new array (caller frees).  Parameters
 * as mxp_module_score. */
MXP_API int mxp_module_predict(mxp_module *mod, mxp_iter *iter, mxp_ndarray **out);

/* Parameters (owned by the module; valid while it lives) by name. NULL if
 * unknown or not yet initialized. */
MXP_API mxp_ndarray *mxp_module_param(const mxp_module *mod, const char *name);
MXP_API int mxp_module_num_params(const mxp_module *mod);
MXP_API const char *mxp_module_param_name(const mxp_module *mod, int i);

/* PREFIX-symbol.json, PREFIX-%04d.params (arg:/aux:), and with
 * save_states PREFIX-%04d.states (mxp_optimizer_save_states). */
MXP_API int mxp_module_save_checkpoint(mxp_module *mod, const char *prefix, int epoch, int save_states);
/* Remember a checkpoint to load: its parameters replace the initialized
 * ones at the next fit (after initialization, so the RNG advances as in
 * the original run), and with load_states the optimizer's states and RNG
 * position are restored then.  Until that fit, score and predict use the
 * checkpoint's parameters.  Checks the files exist now. */
MXP_API int mxp_module_load_checkpoint(mxp_module *mod, const char *prefix, int epoch, int load_states);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_TRAIN_H */
