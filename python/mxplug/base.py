"""base — errors and the small conversions every module shares.

MXNetError carries mxp_last_error()'s message (what failed, why, where) and
the status name.  `check(rc)` turns a C status into it.  Values given as op
parameters are written in MXNet's text grammar ("(3, 3)", "True", "None").
Nothing here holds C handles.
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib


class MXNetError(RuntimeError):
    """An error reported by the mxplug runtime (the C library's message)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


def check(rc):
    """Raise MXNetError with the runtime's message when rc is a failure."""
    if rc != 0:
        msg = lib.mxp_last_error().decode("utf-8", "replace")
        name = lib.mxp_status_name(rc).decode()
        raise MXNetError("%s: %s" % (name, msg) if msg else name, name)


def c_str(s):
    if isinstance(s, bytes):
        return s
    return str(s).encode("utf-8")


def py_str(b):
    return b.decode("utf-8", "replace") if b is not None else None


def c_str_array(strs):
    arr = (ctypes.c_char_p * max(len(strs), 1))()
    for i, s in enumerate(strs):
        arr[i] = c_str(s)
    return arr


def c_handle_array(handles):
    arr = (ctypes.c_void_p * max(len(handles), 1))()
    for i, h in enumerate(handles):
        arr[i] = h
    return arr


def param_str(v):
    """A Python value in MXNet's parameter grammar."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(param_str(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return np.dtype(v).name
    return str(v)


# dtype numbers (mshadow's flags, as in mxp/types.h) <-> numpy dtypes
_DTYPE_NP = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8, 6: np.int64,
             7: np.bool_, 8: np.int16, 9: np.uint16, 10: np.uint32, 11: np.uint64}
_NP_DTYPE = {np.dtype(v): k for k, v in _DTYPE_NP.items()}


def dtype_np(code):
    try:
        return np.dtype(_DTYPE_NP[code])
    except KeyError:
        raise MXNetError("dtype %d has no numpy equivalent" % code) from None


def dtype_code(dtype):
    """numpy dtype, name ("float32") or number -> mxplug dtype number."""
    if dtype is None:
        return 0
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in _DTYPE_NP or int(dtype) == 12:
            return int(dtype)
        raise MXNetError("unknown dtype %r" % (dtype,))
    if isinstance(dtype, str):
        out = ctypes.c_int()
        if lib.mxp_dtype_from_name(c_str(dtype), ctypes.byref(out)) == 0:
            return out.value
    try:
        return _NP_DTYPE[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise MXNetError("unknown or unsupported dtype %r" % (dtype,)) from None


def shape_struct(shape):
    s = _lib.Shape()
    shape = tuple(int(d) for d in shape)
    if len(shape) > _lib.MAX_NDIM:
        raise MXNetError("shape %r has more than %d dimensions" % (shape, _lib.MAX_NDIM))
    s.ndim = len(shape)
    for i, d in enumerate(shape):
        s.dims[i] = d
    return s


def shape_tuple(s):
    if s.ndim < 0:
        return None
    return tuple(s.dims[i] for i in range(s.ndim))
