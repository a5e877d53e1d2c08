/* mxplug/symbol.h — symbolic graphs (MXNet's Symbol): variables, op nodes,
 * composition, groups, attributes, MXNet-compatible JSON, and shape / type
 * inference.  Part of mxplug.h; include <mxplug.h> rather than this file.
 *
 * A symbol is a refcounted handle on a list of outputs of a graph of
 * nodes; nodes are shared between symbols (composition never copies the
 * graph of its arguments).  Names follow MXNet:
 *   - an op argument or aux state left unbound by compose becomes a
 *     variable "{node}_{argname}" (fc1_weight, bn_moving_mean,
 *     softmax_label);
 *   - list_outputs gives "{node}_{outname}" ("fc1_output", and for an op
 *     with named outputs the op's names); a variable's output is its name;
 *   - an op node created without a name is named "{lowercase op}{N}".
 * Aux states (BatchNorm's moving_mean) are inputs of their op node after
 * its arguments, as in MXNet's JSON; a variable used as an aux state is
 * listed by list_auxiliary_states and not by list_arguments.
 * Strings returned by the list_* calls are owned by the symbol and valid
 * for its lifetime (until its last release), across later calls on it.
 * Handles are not thread-safe per
 * symbol (distinct symbols may be used from distinct threads).
 * Since ABI 1.0. */
#ifndef MXPLUG_SYMBOL_H
#define MXPLUG_SYMBOL_H

#include <mxplug/base.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxp_symbol mxp_symbol;

/* ============================================================ creation */

/* A variable (a free input of a graph).  name: copied.  out: new symbol. */
MXP_API int mxp_symbol_variable(const char *name, mxp_symbol **out);

/* An op node with MXNet-style kwargs ("num_hidden"="128", "kernel"="(5,5)"),
 * validated against the op's schema (unknown key, bad or out-of-range value:
 * MXP_EINVAL naming op and key; unknown op: MXP_ENOENT).  Keys beginning
 * with "__" are attributes (__lr_mult__ ...), not parameters.  name may be
 * NULL (auto-named).  The result is "atomic": its inputs are set by
 * mxp_symbol_compose (or become variables when it is first used). */
MXP_API int mxp_symbol_create(const char *op, const char *name, int n_kwargs, const char *const *keys,
                              const char *const *vals, mxp_symbol **out);

/* Compose: bind inputs of `sym`.
 *   atomic op symbol: args[i] (single-output symbols) fill the op's inputs
 *     by position (arguments then aux states), or by input name when
 *     arg_names is given; inputs left unbound become variables
 *     "{node}_{argname}".  `name`, if not NULL, renames the node first.
 *   any other symbol: free variables are replaced, by name (arg_names) or
 *     in list_arguments order; the graph is copied first, so other symbols
 *     sharing nodes are unaffected.
 * Modifies sym in place.  Returns MXP_OK, MXP_EINVAL (unknown input name,
 * too many args, multi-output arg, already composed). */
MXP_API int mxp_symbol_compose(mxp_symbol *sym, const char *name, int n_args, const char *const *arg_names,
                               mxp_symbol *const *args);

/* All outputs of syms[0..n) in order.  out: new symbol. */
MXP_API int mxp_symbol_group(int n, mxp_symbol *const *syms, mxp_symbol **out);
/* Every output of every node (visible outputs only), in topological order. */
MXP_API int mxp_symbol_internals(const mxp_symbol *sym, mxp_symbol **out);
/* Output `index` / the output whose list_outputs name is `name`. */
MXP_API int mxp_symbol_output(const mxp_symbol *sym, int index, mxp_symbol **out);
MXP_API int mxp_symbol_output_by_name(const mxp_symbol *sym, const char *name, mxp_symbol **out);
/* A deep copy of the graph (no node shared with sym). */
MXP_API int mxp_symbol_copy(const mxp_symbol *sym, mxp_symbol **out);

MXP_API mxp_symbol *mxp_symbol_retain(mxp_symbol *sym);
/* Drop a reference.  NULL is a no-op. */
MXP_API void mxp_symbol_release(mxp_symbol *sym);

/* ============================================================ names */

/* Names as MXNet prints them.  *out_names: array of *out_n strings owned by
 * sym, valid for sym's lifetime (until its last release; a later call,
 * even after compose changed the names, leaves earlier arrays valid). */
MXP_API int mxp_symbol_list_arguments(mxp_symbol *sym, int *out_n, const char *const **out_names);
MXP_API int mxp_symbol_list_outputs(mxp_symbol *sym, int *out_n, const char *const **out_names);
MXP_API int mxp_symbol_list_auxiliary_states(mxp_symbol *sym, int *out_n, const char *const **out_names);
/* Number of outputs; name of a single-output symbol's node (NULL for groups). */
MXP_API int mxp_symbol_num_outputs(const mxp_symbol *sym);
MXP_API const char *mxp_symbol_name(const mxp_symbol *sym);

/* ============================================================ attributes */

/* Set an attribute on the node of a single-output symbol ("__shape__" =
 * "(0, 3)", "__dtype__" = "0", "__lr_mult__", "__wd_mult__", "__init__").
 * Only "__*__" keys may be set; op parameters are fixed at creation. */
MXP_API int mxp_symbol_set_attr(mxp_symbol *sym, const char *key, const char *value);
/* *out_value: the value (owned by sym) or NULL when absent (MXP_OK). */
MXP_API int mxp_symbol_attr(const mxp_symbol *sym, const char *key, const char **out_value);

/* ============================================================ JSON */

/* MXNet symbol JSON (nodes / arg_nodes / node_row_ptr / heads / attrs
 * {"mxnet_version": ["int", 10901]}).  out_json: new string, free with
 * mxp_free. */
MXP_API int mxp_symbol_save_json(const mxp_symbol *sym, char **out_json);
MXP_API int mxp_symbol_save_file(const mxp_symbol *sym, const char *path);
/* Load the current layout and legacy files (node keys "param"/"attr",
 * no mxnet_version = 800, aux states missing from inputs before 0.9 are
 * added as variables).  Errors: MXP_EFORMAT (what and where), MXP_ENOENT
 * (unknown op: names node and op), MXP_EINVAL (bad parameter). */
MXP_API int mxp_symbol_load_json(const char *json, mxp_symbol **out);
MXP_API int mxp_symbol_load_file(const char *path, mxp_symbol **out);

/* ============================================================ mixed precision */

/* Mixed precision, as MXNet's amp.convert_symbol: a copy of sym in which
 * every node whose op is in ops[0..n_ops) (n_ops 0: Convolution and
 * FullyConnected) reads its arguments through amp_cast(dtype=target) and
 * every other consumer (and every head) reads its outputs through
 * amp_cast(dtype=float32); two such ops in a row pass the low-precision
 * value directly.  Variables keep their names and stay float32, so the
 * weights bound to them are fp32 master copies whose gradients arrive as
 * float32 through amp_cast's backward.  target: MXP_DTYPE_BF16 or
 * MXP_DTYPE_F16.  Cast nodes are named "{entry}_{dtype}" (conv1_weight_bfloat16,
 * conv1_output_float32).  out: new symbol; sym is not modified.
 * Errors: MXP_EINVAL (target not a low-precision float, NULL op name). */
MXP_API int mxp_symbol_amp_convert(const mxp_symbol *sym, int target, int n_ops, const char *const *ops,
                                   mxp_symbol **out);

/* The inverse, for saving a graph (MXNet's RemoveAmpCast, what
 * save_checkpoint(remove_amp_cast=True) does): a copy of sym in which
 * every reader of an amp_cast output reads the cast's input instead, so
 * the graph runs in float32 again.  sym is not modified.
 * Errors: MXP_EMISUSE. */
MXP_API int mxp_symbol_amp_remove_casts(const mxp_symbol *sym, mxp_symbol **out);

/* ============================================================ inference */

/* Shape inference, forward and backward to a fixpoint (ops may fill
 * unknown input shapes: weights from data and parameters).
 * Known shapes: n entries, names[i] an argument or aux state name (names
 * NULL: positional, in list_arguments order); dims of 0 are unknown.
 * Variables' __shape__ attributes count as known shapes where no shape is
 * given (a given shape wins, as in MXNet; "(8L, 3L)" is read too).
 * Out: arrays (free with mxp_free) of *out_n_args / *out_n_outs / *out_n_aux
 * shapes in list_* order; unknown ones have ndim -1 or zero dims.
 * *out_complete: 1 when every shape is known.  Incomplete is not an
 * error; inconsistent shapes are MXP_ESHAPE, naming node, op and both shapes.
 * Any out pointer may be NULL. */
MXP_API int mxp_symbol_infer_shape(mxp_symbol *sym, int n, const char *const *names, const mxp_shape *shapes,
                                   int *out_n_args, mxp_shape **out_arg_shapes, int *out_n_outs,
                                   mxp_shape **out_out_shapes, int *out_n_aux, mxp_shape **out_aux_shapes,
                                   int *out_complete);
/* Type inference, same convention (dtypes, MXP_DTYPE_UNKNOWN when unknown;
 * variables' __dtype__ attributes count where no dtype is given;
 * MXP_ETYPE when inconsistent). */
MXP_API int mxp_symbol_infer_type(mxp_symbol *sym, int n, const char *const *names, const int *dtypes,
                                  int *out_n_args, int **out_arg_types, int *out_n_outs, int **out_out_types,
                                  int *out_n_aux, int **out_aux_types, int *out_complete);

#ifdef __cplusplus
}
#endif
#endif /* MXPLUG_SYMBOL_H */
