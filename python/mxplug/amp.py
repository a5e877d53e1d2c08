"""amp — mx.amp (MXNet 1.x: mx.contrib.amp): mixed precision by graph
conversion, over the runtime's mxp_symbol_amp_convert.

convert_symbol puts amp_cast nodes around the low-precision ops
(Convolution and FullyConnected unless target_dtype_ops says otherwise);
for bfloat16, BatchNorm, Activation, Pooling, Flatten and the elementwise
adds then run in whatever precision their data inputs have, so a
conv -> BatchNorm -> ReLU -> conv chain carries no cast.  Variables stay
float32: the parameters bound to them are float32 master weights, their
gradients arrive in float32 and the optimizer updates them in float32.
bfloat16 needs no loss scaling (float32's exponent range).

Not here (refused with MXNetError rather than ignored): fp32_ops,
conditional_fp32_ops, excluded_sym_names and cast_optional_params=True
(parameters are always kept in float32).  amp.init()'s patching of the
op namespaces, init_trainer and scale_loss do not exist: convert the
symbol (or an exported HybridBlock's) instead.
"""
from . import symbol as _sym
from ._lib import lib
from .base import MXNetError, c_str_array, dtype_code

__all__ = ["convert_symbol", "convert_model", "remove_casts"]

_DEFAULT_OPS = ("Convolution", "FullyConnected")


def _refuse_unsupported(fp32_ops, conditional_fp32_ops, excluded_sym_names, cast_optional_params):
    for name, value in (("fp32_ops", fp32_ops), ("conditional_fp32_ops", conditional_fp32_ops),
                        ("excluded_sym_names", excluded_sym_names)):
        if value:
            raise MXNetError("amp: %s is not supported by mxplug (only the ops in target_dtype_ops run in low "
                             "precision; every other op already reads float32)" % name)
    if cast_optional_params:
        raise MXNetError("amp: cast_optional_params=True is not supported: mxplug keeps parameters in float32 "
                         "(master weights) and casts them inside the graph")


def convert_symbol(sym, target_dtype="float16", target_dtype_ops=None, fp32_ops=None, conditional_fp32_ops=None,
                   excluded_sym_names=None, data_names=None, cast_optional_params=False):
    """A copy of `sym` in which the ops named by target_dtype_ops (default:
    Convolution, FullyConnected) run in target_dtype ("bfloat16" or
    "float16").  data_names is accepted for MXNet's signature: inputs are
    float32 and cast where a low-precision op reads them, whatever it says."""
    _refuse_unsupported(fp32_ops, conditional_fp32_ops, excluded_sym_names, cast_optional_params)
    if not isinstance(sym, _sym.Symbol):
        raise MXNetError("amp.convert_symbol: expected a Symbol, got %s" % type(sym).__name__)
    target = dtype_code(target_dtype)
    ops = list(target_dtype_ops) if target_dtype_ops is not None else []
    if target_dtype_ops is not None and not ops:
        raise MXNetError("amp.convert_symbol: target_dtype_ops is empty (None means %s)" % ", ".join(_DEFAULT_OPS))
    return _sym._new(lib.mxp_symbol_amp_convert, sym.handle, target, len(ops), c_str_array(ops) if ops else None)


def convert_model(sym, arg_params, aux_params, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                  conditional_fp32_ops=None, excluded_sym_names=None, cast_optional_params=False):
    """(converted symbol, arg_params, aux_params): the parameters are
    returned as they are (float32; the graph casts them)."""
    out = convert_symbol(sym, target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops, excluded_sym_names,
                         None, cast_optional_params)
    return out, arg_params, aux_params


def remove_casts(sym):
    """A copy of `sym` with every amp_cast bypassed (its readers read the
    cast's input): what save_checkpoint(remove_amp_cast=True) saves."""
    return _sym._new(lib.mxp_symbol_amp_remove_casts, sym.handle)

