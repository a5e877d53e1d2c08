"""initializer — mx.init: Zero, One, Constant, Uniform, Normal, Xavier, Mixed.

Values come from the runtime (mxp_init_array: its RNG, MXNet's
definitions), so `mx.random.seed(s)` then the same calls give the same
weights as the CLI.  Calling an initializer with (name, arr) applies
MXNet's default rules: *weight -> this initializer; *bias, *beta,
*moving_mean, *moving_inv_var, *moving_avg -> 0; *gamma, *moving_var -> 1;
anything else is an error naming the parameter.
"""
import ctypes
import fnmatch
import json

from . import _lib
from ._lib import lib
from .base import MXNetError, check

_ZERO = ("bias", "beta", "moving_mean", "moving_inv_var", "moving_avg", "running_mean")
_ONE = ("gamma", "moving_var", "running_var")


class InitDesc(str):
    def __new__(cls, name, attrs=None, global_init=None):
        s = super().__new__(cls, name)
        s.attrs = attrs or {}
        s.global_init = global_init
        return s


class Initializer:
    _kind = None

    def __init__(self, **kwargs):
        self._kwargs = kwargs

    def _struct(self):
        raise NotImplementedError

    def dumps(self):
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def _fill(self, arr, struct):
        check(lib.mxp_init_array(ctypes.byref(struct), arr.handle))

    def _init_weight(self, name, arr):
        self._fill(arr, self._struct())

    def __call__(self, name, arr):
        name = str(name)
        if name.endswith("weight"):
            self._init_weight(name, arr)
        elif name.endswith(_ZERO):
            self._fill(arr, Zero()._struct())
        elif name.endswith(_ONE):
            self._fill(arr, One()._struct())
        else:
            raise MXNetError("Unknown initialization pattern for '%s' (names must end in weight, bias, gamma, "
                             "beta, moving_mean or moving_var; use mx.init.Mixed for others)" % name)


def _init(kind, **fields):
    s = _lib.Init()
    s.kind = kind
    for k, v in fields.items():
        setattr(s, k, v)
    return s


class Zero(Initializer):
    def _struct(self):
        return _init(0)

    def _init_weight(self, name, arr):
        self._fill(arr, self._struct())


class One(Initializer):
    def _struct(self):
        return _init(1)


class Constant(Initializer):
    def __init__(self, value):
        super().__init__(value=value)
        self.value = float(value)

    def _struct(self):
        return _init(2, value=self.value)


class Uniform(Initializer):
    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = float(scale)

    def _struct(self):
        return _init(3, scale=self.scale)


class Normal(Initializer):
    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = float(sigma)

    def _struct(self):
        return _init(4, sigma=self.sigma)


class Xavier(Initializer):
    _RND = {"uniform": 0, "gaussian": 1}
    _FACTOR = {"avg": 0, "in": 1, "out": 2}

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in self._RND or factor_type not in self._FACTOR:
            raise MXNetError("Xavier: rnd_type must be uniform/gaussian and factor_type avg/in/out")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def _struct(self):
        return _init(5, rnd_type=self._RND[self.rnd_type], factor_type=self._FACTOR[self.factor_type],
                     magnitude=self.magnitude)


class MSRAPrelu(Xavier):
    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))


class Mixed:
    """Initializers by name pattern (fnmatch), the first match wins."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise MXNetError("Mixed: %d patterns but %d initializers" % (len(patterns), len(initializers)))
        self.map = list(zip(patterns, initializers))

    def __call__(self, name, arr):
        for pat, init in self.map:
            if fnmatch.fnmatch(str(name), pat) or pat == ".*":
                init(name, arr)
                return
        raise MXNetError("Mixed: no pattern matches parameter '%s'" % name)


def create(init):
    if isinstance(init, (Initializer, Mixed)):
        return init
    names = {"zeros": Zero, "zero": Zero, "ones": One, "one": One, "uniform": Uniform, "normal": Normal,
             "xavier": Xavier}
    try:
        return names[str(init).lower()]()
    except KeyError:
        raise MXNetError("unknown initializer %r" % (init,)) from None
