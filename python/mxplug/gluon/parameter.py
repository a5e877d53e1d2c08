"""gluon.parameter — Parameter (an NDArray with its gradient, initializer,
grad_req and possibly deferred shape) and ParameterDict.

A Parameter's shape may hold 0s (unknown until the first forward: Dense's
in_units); initialize() then defers, and the owning block completes the
shape by shape inference and initializes it before its first forward.
data() / grad() raise a clear error before that.  One context (cpu).
Gradients are marked with the runtime's autograd (attach_grad), so a
recorded forward's backward writes them.
"""
from collections import OrderedDict

import numpy as np

from .. import initializer as init_mod
from .. import ndarray as nd
from .. import symbol as sym
from ..base import MXNetError
from ..context import cpu


class DeferredInitializationError(MXNetError):
    pass


class Parameter:
    def __init__(self, name, grad_req="write", shape=None, dtype=np.float32, init=None,
                 allow_deferred_init=False, differentiable=True, lr_mult=1.0, wd_mult=1.0):
        self.name = name
        self.grad_req = grad_req if differentiable else "null"
        self._shape = tuple(shape) if shape is not None else None
        self.dtype = dtype
        self.init = init
        self.lr_mult, self.wd_mult = lr_mult, wd_mult
        self._data = None
        self._grad = None
        self._deferred = None  # (initializer, ctx) waiting for the shape
        self._var = None

    def __repr__(self):
        return "Parameter %s (shape=%s, dtype=%s)" % (self.name, self.shape, np.dtype(self.dtype).name)

    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, new):
        new = tuple(new)
        if self._shape is not None and len(self._shape) == len(new):
            for a, b in zip(self._shape, new):
                if a not in (0, b):
                    raise MXNetError("Parameter %s: shape %s is incompatible with %s" % (self.name, new, self._shape))
        self._shape = new

    def _known(self):
        return self._shape is not None and all(d > 0 for d in self._shape)

    def initialize(self, init=None, ctx=None, default_init=None, force_reinit=False):
        if self._data is not None and not force_reinit:
            return
        chosen = self.init if self.init is not None else (init if init is not None else default_init)
        chosen = init_mod.create(chosen) if chosen is not None else init_mod.Uniform()
        if not self._known():
            self._deferred = (chosen, ctx)
            return
        self._init_now(chosen)

    def _init_now(self, initializer):
        data = nd.zeros(self._shape, dtype=self.dtype)
        if isinstance(initializer, init_mod.Initializer) and self.init is not None:
            initializer._init_weight(self.name, data)  # an explicit per-parameter initializer
        else:
            initializer(init_mod.InitDesc(self.name), data)
        self._data = data
        self._deferred = None
        if self.grad_req != "null":
            self._data.attach_grad(self.grad_req)
            self._grad = self._data.grad

    def _finish_deferred_init(self):
        if self._data is None and self._deferred is not None and self._known():
            self._init_now(self._deferred[0])

    def data(self, ctx=None):
        if self._data is None:
            if self._deferred is not None:
                raise DeferredInitializationError(
                    "Parameter %s has not been initialized yet: its shape %s is known after the first forward"
                    % (self.name, self._shape))
            raise MXNetError("Parameter %s has not been initialized; call initialize()" % self.name)
        return self._data

    def list_data(self):
        return [self.data()]

    def grad(self, ctx=None):
        if self._grad is None:
            raise MXNetError("Parameter %s has no gradient (grad_req %r or not initialized)" % (self.name, self.grad_req))
        return self._grad

    def list_grad(self):
        return [self.grad()]

    def list_ctx(self):
        return [cpu()]

    def set_data(self, data):
        arr = data if isinstance(data, nd.NDArray) else nd.array(np.asarray(data), dtype=self.dtype)
        if self._data is None:
            self._shape = arr.shape
            self._init_now(init_mod.Zero())
        if arr.shape != self._data.shape:
            raise MXNetError("Parameter %s: set_data with shape %s, expected %s" % (self.name, arr.shape,
                                                                                  self._data.shape))
        self._data[:] = arr

    def zero_grad(self):
        if self._grad is not None:
            self._grad[:] = 0

    def var(self):
        if self._var is None:
            self._var = sym.Variable(self.name, shape=self._shape if self._known() else None)
        return self._var


class ParameterDict(OrderedDict):
    def __init__(self, prefix=""):
        super().__init__()
        self.prefix = prefix

    def get(self, name, **kwargs):
        full = self.prefix + name
        if full not in self:
            self[full] = Parameter(full, **kwargs)
        return self[full]

    def update(self, other):
        for k, v in other.items():
            self[k] = v

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False):
        for p in self.values():
            p.initialize(None, ctx, init, force_reinit)

    def zero_grad(self):
        for p in self.values():
            p.zero_grad()

    def setattr(self, name, value):
        for p in self.values():
            setattr(p, name, value)

    def save(self, filename, strip_prefix=""):
        nd.save(filename, {k[len(strip_prefix):] if k.startswith(strip_prefix) else k: p.data()
                           for k, p in self.items()})

    def load(self, filename, ctx=None, allow_missing=False, ignore_extra=False, restore_prefix=""):
        loaded = nd.load(filename)
        loaded = {(restore_prefix + k.split(":", 1)[-1]): v for k, v in loaded.items()}
        for k, p in self.items():
            if k in loaded:
                p.set_data(loaded[k])
            elif not allow_missing:
                raise MXNetError("load: parameter %s is missing from %s" % (k, filename))
        if not ignore_extra:
            extra = set(loaded) - set(self)
            if extra:
                raise MXNetError("load: %s has parameters the block does not: %s" % (filename, sorted(extra)))
