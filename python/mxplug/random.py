"""random — mx.random: seeding the runtime's generator, and sampling into NDArrays.

seed(s) seeds every device (mxp_random_seed); seed(s, ctx) one device.
uniform/normal run the registered _random_uniform / _random_normal ops, so
numbers follow the runtime's Philox streams (the same program and seed give
the same numbers whatever the thread count).
"""
from ._lib import lib
from .base import check
from .context import Context


def seed(seed_state, ctx="all"):
    if ctx == "all" or ctx is None:
        lib.mxp_random_seed(int(seed_state) & 0xFFFFFFFFFFFFFFFF)
    else:
        check(lib.mxp_random_seed_device(ctx._device(), int(seed_state) & 0xFFFFFFFFFFFFFFFF))


def uniform(low=0.0, high=1.0, shape=(1,), ctx=None, dtype="float32", out=None):
    from .ndarray import _invoke
    return _invoke("_random_uniform", [], {"low": low, "high": high, "shape": tuple(shape), "dtype": dtype},
                   out=out, device=ctx or Context.default_ctx)


def normal(loc=0.0, scale=1.0, shape=(1,), ctx=None, dtype="float32", out=None):
    from .ndarray import _invoke
    return _invoke("_random_normal", [], {"loc": loc, "scale": scale, "shape": tuple(shape), "dtype": dtype},
                   out=out, device=ctx or Context.default_ctx)
