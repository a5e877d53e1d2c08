"""optimizer — mx.optimizer: SGD, Adam, RMSProp over the runtime's
mxp_optimizer (MXNet's update ops and definitions), create().

update(index, weight, grad) updates weight in place (async, like MXNet's
updater).  Weight decay follows the runtime's rule: parameters named
*_weight / *_gamma get wd when a name is given (set_param_names / the
`name` argument), every parameter when none is.  State lives in the C
optimizer, per index; save_states / load_states use its file format.
"""
import ctypes

from ._lib import lib
from .base import MXNetError, c_str, c_str_array, check


class Optimizer:
    _type = None

    def __init__(self, learning_rate=None, wd=0.0, rescale_grad=1.0, clip_gradient=None, lr_scheduler=None,
                 param_idx2name=None, **kwargs):
        kw = dict(kwargs)
        if learning_rate is not None:
            kw["learning_rate"] = learning_rate
        kw["wd"] = wd
        kw["rescale_grad"] = rescale_grad
        if clip_gradient is not None:
            kw["clip_gradient"] = clip_gradient
        self.kwargs = {k: v for k, v in kw.items() if v is not None}
        keys = list(self.kwargs)
        vals = [repr(float(self.kwargs[k])) for k in keys]
        out = ctypes.c_void_p()
        check(lib.mxp_optimizer_create(c_str(self._type), len(keys), c_str_array(keys), c_str_array(vals),
                                       ctypes.byref(out)))
        self._h = out.value
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None:
            if learning_rate is not None:
                lr_scheduler.base_lr = learning_rate
            lib.mxp_optimizer_set_lr_schedule(self._h, lr_scheduler._make())
        self.idx2name = dict(param_idx2name or {})

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_optimizer_free(h)

    @property
    def rescale_grad(self):
        return self.kwargs.get("rescale_grad", 1.0)

    @property
    def learning_rate(self):
        return lib.mxp_optimizer_lr(self._h)

    lr = learning_rate

    @property
    def num_update(self):
        return lib.mxp_optimizer_num_update(self._h)

    def set_param_names(self, idx2name):
        self.idx2name = dict(idx2name)

    def update(self, index, weight, grad, state=None, name=None):
        if name is None:
            name = self.idx2name.get(index)
        check(lib.mxp_optimizer_update(self._h, int(index), c_str(name) if name else None, weight.handle,
                                       grad.handle))

    def save_states(self, fname):
        check(lib.mxp_optimizer_save_states(self._h, c_str(fname)))

    def load_states(self, fname):
        check(lib.mxp_optimizer_load_states(self._h, c_str(fname)))


class SGD(Optimizer):
    _type = "sgd"

    def __init__(self, learning_rate=0.01, momentum=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=momentum, **kwargs)


class Adam(Optimizer):
    _type = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, **kwargs)


class RMSProp(Optimizer):
    _type = "rmsprop"

    def __init__(self, learning_rate=0.001, gamma1=0.9, epsilon=1e-8, centered=False, clip_weights=None,
                 **kwargs):
        if centered:
            raise MXNetError("RMSProp: centered=True is not implemented (the runtime has the non-centered form)")
        super().__init__(learning_rate=learning_rate, gamma1=gamma1, epsilon=epsilon, clip_weights=clip_weights,
                         **kwargs)


_TYPES = {"sgd": SGD, "adam": Adam, "rmsprop": RMSProp}


def create(name, **kwargs):
    if isinstance(name, Optimizer):
        return name
    try:
        return _TYPES[str(name).lower()](**kwargs)
    except KeyError:
        raise MXNetError("unknown optimizer %r (known: sgd, adam, rmsprop)" % (name,)) from None


def get_updater(optimizer):
    def updater(index, grad, weight):
        optimizer.update(index, weight, grad)
    return updater
