"""autograd — mx.autograd over the runtime's imperative autograd
(<mxplug/autograd.h>): record, pause, train_mode, predict_mode,
is_recording, is_training, mark_variables, backward, grad.

The tape lives in the C runtime: every op mx.nd runs while recording, on
arrays that need a gradient, is recorded there; backward runs each op's
declared backward (the executor's gradient program), so imperative and
symbolic gradients agree.  A new outermost record() scope starts a new tape;
backward without retain_graph clears it.
"""
import ctypes

from ._lib import lib
from .base import MXNetError, c_handle_array, check

_REQ = {"null": 0, "write": 1, "add": 3}


def _require():
    if not hasattr(lib, "mxp_autograd_backward"):
        raise MXNetError("this libmxplug has no autograd (mxp_autograd_*); rebuild the runtime")


def set_recording(is_recording):
    prev = ctypes.c_int()
    check(lib.mxp_autograd_set_recording(1 if is_recording else 0, ctypes.byref(prev)))
    return bool(prev.value)


def set_training(train_mode):
    prev = ctypes.c_int()
    check(lib.mxp_autograd_set_training(1 if train_mode else 0, ctypes.byref(prev)))
    return bool(prev.value)


def is_recording():
    return bool(lib.mxp_autograd_is_recording())


def is_training():
    return bool(lib.mxp_autograd_is_training())


class _Scope:
    def __init__(self, is_record, train_mode):
        self._rec, self._train = is_record, train_mode
        self._prev_rec = self._prev_train = None

    def __enter__(self):
        if self._rec is not None:
            self._prev_rec = set_recording(self._rec)
        if self._train is not None:
            self._prev_train = set_training(self._train)
        return self

    def __exit__(self, *exc):
        if self._rec is not None and self._prev_rec != self._rec:
            set_recording(self._prev_rec)
        if self._train is not None and self._prev_train != self._train:
            set_training(self._prev_train)


def record(train_mode=True):
    """Record ops for backward (and run them in training mode unless train_mode=False)."""
    return _Scope(True, train_mode)


def pause(train_mode=False):
    return _Scope(False, train_mode)


def train_mode():
    return _Scope(None, True)


def predict_mode():
    return _Scope(None, False)


def mark_variables(variables, gradients, grad_reqs="write"):
    from .ndarray import NDArray
    if isinstance(variables, NDArray):
        variables, gradients = [variables], [gradients]
    if isinstance(grad_reqs, str):
        grad_reqs = [grad_reqs] * len(variables)
    if not len(variables) == len(gradients) == len(grad_reqs):
        raise MXNetError("mark_variables: %d variables, %d gradients, %d grad_reqs" %
                         (len(variables), len(gradients), len(grad_reqs)))
    try:
        reqs = [_REQ[r] for r in grad_reqs]
    except KeyError as e:
        raise MXNetError("grad_req must be 'write', 'add' or 'null', got %r" % (e.args[0],)) from None
    check(lib.mxp_autograd_mark_variables(len(variables), c_handle_array([v.handle for v in variables]),
                                          (ctypes.c_int * max(len(reqs), 1))(*reqs),
                                          c_handle_array([g.handle for g in gradients])))
    for v, g in zip(variables, gradients):
        v._grad = g


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Gradients of heads with respect to the marked variables they depend on."""
    from .ndarray import NDArray
    if isinstance(heads, NDArray):
        heads = [heads]
        if head_grads is not None and not isinstance(head_grads, (list, tuple)):
            head_grads = [head_grads]
    if head_grads is not None and len(head_grads) != len(heads):
        raise MXNetError("backward: %d heads but %d head gradients" % (len(heads), len(head_grads)))
    hg = c_handle_array([g.handle if g is not None else None for g in head_grads]) if head_grads else None
    check(lib.mxp_autograd_backward(len(heads), c_handle_array([h.handle for h in heads]), hg,
                                    1 if retain_graph else 0))


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False, train_mode=True):
    """Gradients of heads with respect to variables, as new arrays (variables' own grads untouched)."""
    from .ndarray import NDArray, zeros
    if create_graph:
        raise MXNetError("autograd.grad: create_graph (higher-order gradients) is not implemented")
    if isinstance(variables, NDArray):
        variables = [variables]
    old = [v._grad for v in variables]
    fresh = [zeros(v.shape, v.context, v.dtype) for v in variables]
    mark_variables(variables, fresh, "write")
    try:
        backward(heads, head_grads, bool(retain_graph))
    finally:
        for v, g in zip(variables, old):
            if g is not None:
                mark_variables([v], [g], "write")
    return fresh


def clear():
    """Drop the recorded tape."""
    lib.mxp_autograd_clear()


def tape_size():
    return lib.mxp_autograd_tape_size()


_ = _require
