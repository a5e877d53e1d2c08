"""model — mx.model: save_checkpoint / load_checkpoint in MXNet's layout
(PREFIX-symbol.json, PREFIX-%04d.params with "arg:" / "aux:" keys)."""
from . import amp
from . import ndarray as nd
from . import symbol as sym
from .base import MXNetError


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """remove_amp_cast: save the symbol without the amp_cast nodes a mixed
    precision conversion inserted (mx.amp.convert_symbol), as MXNet does."""
    if symbol is not None:
        if remove_amp_cast:
            symbol = amp.remove_casts(symbol)
        symbol.save("%s-symbol.json" % prefix)
    data = {"arg:%s" % k: v for k, v in arg_params.items()}
    data.update({"aux:%s" % k: v for k, v in (aux_params or {}).items()})
    nd.save("%s-%04d.params" % (prefix, epoch), data)


def load_params(prefix, epoch):
    loaded = nd.load("%s-%04d.params" % (prefix, epoch))
    if not isinstance(loaded, dict):
        raise MXNetError("%s-%04d.params holds no names (not a checkpoint)" % (prefix, epoch))
    arg, aux = {}, {}
    for k, v in loaded.items():
        kind, _, name = k.partition(":")
        if kind == "arg":
            arg[name] = v
        elif kind == "aux":
            aux[name] = v
        else:
            raise MXNetError("%s-%04d.params: key '%s' has neither 'arg:' nor 'aux:'" % (prefix, epoch, k))
    return arg, aux


def load_checkpoint(prefix, epoch):
    symbol = sym.load("%s-symbol.json" % prefix)
    arg, aux = load_params(prefix, epoch)
    return symbol, arg, aux
