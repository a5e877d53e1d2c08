"""gluon.trainer — Trainer: applies an optimizer to Parameters after
backward.  step(batch_size) rescales gradients by 1/batch_size (MXNet's
rescale_grad) and updates every parameter with a gradient.  The optimizer
is the runtime's (mx.optimizer); its rescale_grad is fixed at creation, so
a different batch_size creates it again (states restart: say so by
keeping batch_size fixed, as MXNet's users do)."""
from .. import optimizer as opt_mod
from ..base import MXNetError
from .parameter import ParameterDict


class Trainer:
    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device", compression_params=None,
                 update_on_kvstore=None):
        if isinstance(params, (dict, ParameterDict)):
            params = list(params.values())
        self._params = [p for p in params]
        self._opt_name = optimizer
        self._opt_params = dict(optimizer_params or {})
        self._optimizer = None
        self._scale = None
        if not isinstance(optimizer, (str, opt_mod.Optimizer)):
            raise MXNetError("Trainer: optimizer must be a name or an mx.optimizer.Optimizer")

    @property
    def learning_rate(self):
        return self._opt_params.get("learning_rate", 0.01) if self._optimizer is None else self._optimizer.lr

    def set_learning_rate(self, lr):
        self._opt_params["learning_rate"] = lr
        self._optimizer = None

    def _ensure(self, batch_size):
        scale = 1.0 / batch_size
        if self._optimizer is None or scale != self._scale:
            if isinstance(self._opt_name, opt_mod.Optimizer):
                self._optimizer = self._opt_name
            else:
                kw = dict(self._opt_params)
                kw["rescale_grad"] = kw.get("rescale_grad", 1.0) * scale
                self._optimizer = opt_mod.create(self._opt_name, **kw)
            self._scale = scale

    def step(self, batch_size, ignore_stale_grad=False):
        self._ensure(batch_size)
        for i, p in enumerate(self._params):
            if p.grad_req == "null":
                continue
            self._optimizer.update(i, p.data(), p.grad(), name=p.name)

    def update(self, batch_size, ignore_stale_grad=False):
        self.step(batch_size, ignore_stale_grad)

    def allreduce_grads(self):
        pass

    def save_states(self, fname):
        self._optimizer.save_states(fname)

    def load_states(self, fname):
        self._optimizer.load_states(fname)
