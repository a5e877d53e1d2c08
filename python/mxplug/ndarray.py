"""ndarray — mx.nd: the NDArray class over mxp_ndarray handles, creation and
file functions, and every registered op as a function.

An NDArray owns one reference to its C handle (released when the Python
object dies), so no Python call can reach a freed handle.  Work is
asynchronous as in MXNet: ops return at once, asnumpy()/wait_to_read() wait
and raise the error of failed work.  Data moves between numpy and the
runtime with exactly one copy each way (sync_copy_from / sync_copy_to).
Ops are generated from the registry: the names present at import become
module attributes; an op a pack registers later (a manifest added, a pack
loaded) is generated on first access through the module's __getattr__.
Under autograd.record() the runtime records ops itself (invoke is hooked),
so nothing here knows about the tape beyond attach_grad / backward.
"""
import builtins as _b
import ctypes
import numbers
import sys

import numpy as np

from . import _lib, _ops
from ._lib import lib
from .base import (MXNetError, c_handle_array, c_str, c_str_array, check, dtype_code, dtype_np, param_str,
                   py_str)
from .context import Context

_c_void_p = ctypes.c_void_p
_c_int = ctypes.c_int
_byref = ctypes.byref
_A1 = _c_void_p * 1
_A2 = _c_void_p * 2
_new = object.__new__
_invoke_ex = _lib.raw("mxp_invoke_ex")  # hot path: no per-argument conversion
_ndarray_free = lib.mxp_ndarray_release
_unmark = getattr(lib, "mxp_autograd_unmark", None) if _lib.has("mxp_autograd_unmark") else None
_REQ = {"null": 0, "write": 1, "inplace": 2, "add": 3}


_is_recording = lib.mxp_autograd_is_recording if _lib.has("mxp_autograd_is_recording") else None


def _recording():
    return _is_recording is not None and _is_recording() != 0


class NDArray:
    """An n-dimensional array on a device (MXNet's mx.nd.NDArray)."""
    __slots__ = ("_h", "_grad", "_shape", "__weakref__")
    __array_priority__ = 1000.0

    def __init__(self, handle):
        if not handle:
            raise MXNetError("NDArray: NULL handle")
        self._h = handle
        self._grad = None
        self._shape = None  # a handle's shape never changes (reshape makes a new handle)

    def __del__(self):
        try:
            h = self._h
        except AttributeError:  # __init__ did not run to the end
            return
        if h and _ndarray_free is not None:
            self._h = None
            if self._grad is not None and _unmark is not None:
                _unmark(h)  # the runtime's variable table holds a reference until then
            _ndarray_free(h)

    @property
    def handle(self):
        return self._h

    # ------------------------------------------------------------ properties
    @property
    def shape(self):
        s = self._shape
        if s is None:
            n = lib.mxp_ndarray_ndim(self._h)
            if n < 0:
                return None
            p = lib.mxp_ndarray_shape(self._h)
            s = self._shape = tuple(p[i] for i in range(n))
        return s

    @property
    def ndim(self):
        return lib.mxp_ndarray_ndim(self._h)

    @property
    def size(self):
        return lib.mxp_ndarray_size(self._h)

    @property
    def dtype(self):
        code = lib.mxp_ndarray_dtype(self._h)
        return dtype_np(code).type if code >= 0 else None

    @property
    def context(self):
        return Context._from_device(lib.mxp_ndarray_device(self._h))

    ctx = context

    @property
    def grad(self):
        return self._grad

    @property
    def T(self):
        return transpose(self)

    def is_none(self):
        return bool(lib.mxp_ndarray_is_none(self._h))

    # ------------------------------------------------------------ data
    def wait_to_read(self):
        check(lib.mxp_ndarray_wait_to_read(self._h))

    def wait_to_write(self):
        check(lib.mxp_ndarray_wait_to_write(self._h))

    def asnumpy(self):
        if self.is_none():
            raise MXNetError("asnumpy: the array is a none array (no shape, no data)")
        out = np.empty(self.shape, dtype=dtype_np(lib.mxp_ndarray_dtype(self._h)))
        check(lib.mxp_ndarray_sync_copy_to(self._h, out.ctypes.data, out.nbytes))
        return out

    def __array__(self, dtype=None):
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype)

    def asscalar(self):
        if self.size != 1:
            raise ValueError("asscalar: the array has %d elements (shape %s), not 1" % (self.size, self.shape))
        return self.asnumpy().reshape(()).item()

    def item(self):
        return self.asscalar()

    def tolist(self):
        return self.asnumpy().tolist()

    def _sync_copyfrom(self, source):
        src = np.ascontiguousarray(source, dtype=dtype_np(lib.mxp_ndarray_dtype(self._h)))
        if src.shape != self.shape:
            try:
                src = np.ascontiguousarray(np.broadcast_to(src, self.shape))
            except ValueError:
                raise MXNetError("cannot copy an array of shape %s into one of shape %s" %
                                 (np.shape(source), self.shape)) from None
        check(lib.mxp_ndarray_sync_copy_from(self._h, src.ctypes.data, src.nbytes))

    def copyto(self, other):
        if isinstance(other, Context):
            other = empty(self.shape, other, self.dtype)
        if not isinstance(other, NDArray):
            raise TypeError("copyto: target must be an NDArray or a Context, got %r" % type(other).__name__)
        if other._h == self._h:
            return other
        check(lib.mxp_ndarray_copy(self._h, other._h))
        return other

    def copy(self):
        return self.copyto(self.context)

    def as_in_context(self, ctx):
        return self if self.context == ctx else self.copyto(ctx)

    def astype(self, dtype, copy=True):
        if not copy and np.dtype(dtype) == np.dtype(self.dtype):
            return self
        return _invoke("Cast", [self], {"dtype": np.dtype(dtype).name})

    def reshape(self, *shape, **kwargs):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = kwargs.get("shape", shape)
        # While recording, an op rather than a view: the tape must see it.
        if _recording() or _b.any(int(d) < -1 for d in shape) or 0 in shape:
            return _invoke("Reshape", [self], {"shape": tuple(shape)})
        dims = (ctypes.c_int64 * _b.max(len(shape), 1))(*[int(d) for d in shape])
        out = _c_void_p()
        check(lib.mxp_ndarray_reshape(self._h, dims, len(shape), _byref(out)))
        return NDArray(out.value)

    def flatten(self):
        return _invoke("Flatten", [self], {})

    def detach(self):
        """The same data without autograd history (a new handle: not on the tape)."""
        return self.reshape(self.shape) if self.ndim > 0 else self.copy()

    def attach_grad(self, grad_req="write", stype=None):
        """Allocate a zero gradient and mark this array as an autograd variable."""
        from . import autograd
        g = zeros(self.shape, self.context, self.dtype)
        autograd.mark_variables([self], [g], grad_req)

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        from . import autograd
        autograd.backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    # ------------------------------------------------------------ indexing
    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d array")
        return s[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def _axis0(self, key):
        """A view for an int or a step-1 slice on axis 0, else None (also
        while recording: views are not ops, the tape would not see them)."""
        if _recording():
            return None
        if isinstance(key, (numbers.Integral, np.integer)) and not isinstance(key, bool):
            n = len(self)
            k = int(key)
            if k < 0:
                k += n
            if not 0 <= k < n:
                raise IndexError("index %d is out of bounds for axis 0 with size %d" % (int(key), n))
            out = _c_void_p()
            check(lib.mxp_ndarray_at(self._h, k, _byref(out)))
            return NDArray(out.value)
        if isinstance(key, _b.slice) and key.step in (None, 1):
            n = len(self)
            b, e, _ = key.indices(n)
            e = _b.max(e, b)
            out = _c_void_p()
            check(lib.mxp_ndarray_slice(self._h, b, e, _byref(out)))
            return NDArray(out.value)
        return None

    def __getitem__(self, key):
        if self.ndim == 0:
            if key == () or key is Ellipsis:
                return self
            raise IndexError("too many indices for a 0-d array")
        v = self._axis0(key)
        if v is not None:
            return v
        if isinstance(key, NDArray):
            return _invoke("take", [self, key], {"axis": 0})
        if isinstance(key, (list, np.ndarray)):
            return _invoke("take", [self, array(np.asarray(key), dtype=np.int64)], {"axis": 0})
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            raise IndexError("too many indices: %d for an array of %d dims" % (len(key), self.ndim))
        if _b.all(isinstance(k, (_b.slice, numbers.Integral)) and not isinstance(k, bool) for k in key):
            begin, end, step, drop = [], [], [], []
            for ax, k in enumerate(key):
                n = self.shape[ax]
                if isinstance(k, _b.slice):
                    b, e, s = k.indices(n)
                    begin.append(b)
                    end.append(e if e >= 0 else None)
                    step.append(s)
                else:
                    kk = int(k) + (n if k < 0 else 0)
                    if not 0 <= kk < n:
                        raise IndexError("index %d is out of bounds for axis %d with size %d" % (int(k), ax, n))
                    begin.append(kk)
                    end.append(kk + 1)
                    step.append(1)
                    drop.append(ax)
            out = _invoke("slice", [self], {"begin": tuple(begin), "end": tuple(end), "step": tuple(step)})
            if drop:
                shape = [d for i, d in enumerate(out.shape) if i not in drop]
                out = out.reshape(shape) if shape else out.reshape((1,)).reshape(())
            return out
        return array(self.asnumpy()[key], self.context, self.dtype)

    def __setitem__(self, key, value):
        if isinstance(key, _b.slice) and key == _b.slice(None):
            target = self
        elif key is Ellipsis or key == ():
            target = self
        else:
            target = self._axis0(key) if self.ndim else None
        if target is None:
            a = self.asnumpy()
            a[key] = value.asnumpy() if isinstance(value, NDArray) else value
            self._sync_copyfrom(a)
            return
        if isinstance(value, numbers.Number) and not isinstance(value, bool) or isinstance(value, np.generic):
            check(lib.mxp_ndarray_fill(target._h, float(value)))
        elif isinstance(value, NDArray):
            if value.shape == target.shape and value.dtype == target.dtype:
                check(lib.mxp_ndarray_copy(value._h, target._h))
            else:
                target._sync_copyfrom(value.asnumpy())
        else:
            target._sync_copyfrom(np.asarray(value))

    # ------------------------------------------------------------ operators
    def __add__(self, o):
        if type(o) is NDArray:  # the common case first: two arrays
            s = self._shape or self.shape
            if s == (o._shape or o.shape):
                return _binop(b"elemwise_add", self._h, o._h, s)
            return _binop(b"broadcast_add", self._h, o._h, None)
        return _arith(self, o, "elemwise_add", "broadcast_add", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, o):
        if type(o) is NDArray:  # the common case first: two arrays
            s = self._shape or self.shape
            if s == (o._shape or o.shape):
                return _binop(b"elemwise_sub", self._h, o._h, s)
            return _binop(b"broadcast_sub", self._h, o._h, None)
        return _arith(self, o, "elemwise_sub", "broadcast_sub", "_minus_scalar")

    def __rsub__(self, o):
        return _arith(self, o, None, None, "_rminus_scalar", True)

    def __mul__(self, o):
        if type(o) is NDArray:  # the common case first: two arrays
            s = self._shape or self.shape
            if s == (o._shape or o.shape):
                return _binop(b"elemwise_mul", self._h, o._h, s)
            return _binop(b"broadcast_mul", self._h, o._h, None)
        return _arith(self, o, "elemwise_mul", "broadcast_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, o):
        if type(o) is NDArray:  # the common case first: two arrays
            s = self._shape or self.shape
            if s == (o._shape or o.shape):
                return _binop(b"elemwise_div", self._h, o._h, s)
            return _binop(b"broadcast_div", self._h, o._h, None)
        return _arith(self, o, "elemwise_div", "broadcast_div", "_div_scalar")

    def __rtruediv__(self, o):
        return _arith(self, o, None, None, "_rdiv_scalar", True)

    def __pow__(self, o):
        return _arith(self, o, "_power", "broadcast_power", "_power_scalar")

    def __rpow__(self, o):
        return _arith(self, o, None, None, "_rpower_scalar", True)

    def __neg__(self):
        return _invoke("negative", [self], {})

    def __abs__(self):
        return _invoke("abs", [self], {})

    def __eq__(self, o):
        if o is None:
            return False
        return _arith(self, o, "_equal", "broadcast_equal", "_equal_scalar")

    def __ne__(self, o):
        if o is None:
            return True
        return _arith(self, o, "_not_equal", "broadcast_not_equal", "_not_equal_scalar")

    def __gt__(self, o):
        return _arith(self, o, "_greater", "broadcast_greater", "_greater_scalar")

    def __ge__(self, o):
        return _arith(self, o, "_greater_equal", "broadcast_greater_equal", "_greater_equal_scalar")

    def __lt__(self, o):
        return _arith(self, o, "_lesser", "broadcast_lesser", "_lesser_scalar")

    def __le__(self, o):
        return _arith(self, o, "_lesser_equal", "broadcast_lesser_equal", "_lesser_equal_scalar")

    __hash__ = object.__hash__

    def _inplace(self, o, elem, bcast, scalar):
        _arith(self, o, elem, bcast, scalar, out=self)
        return self

    def __iadd__(self, o):
        return self._inplace(o, "elemwise_add", "broadcast_add", "_plus_scalar")

    def __isub__(self, o):
        return self._inplace(o, "elemwise_sub", "broadcast_sub", "_minus_scalar")

    def __imul__(self, o):
        return self._inplace(o, "elemwise_mul", "broadcast_mul", "_mul_scalar")

    def __itruediv__(self, o):
        return self._inplace(o, "elemwise_div", "broadcast_div", "_div_scalar")

    def __bool__(self):
        if self.size != 1:
            raise ValueError("the truth value of an NDArray with %d elements is ambiguous" % self.size)
        return bool(self.asscalar())

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __repr__(self):
        if self.is_none():
            return "<NDArray none>"
        return "\n%s\n<NDArray %s @%s>" % (self.asnumpy(), "x".join(str(d) for d in self.shape) or "()",
                                          self.context)

    # common methods as MXNet's NDArray has them
    def sum(self, axis=None, keepdims=False):
        return _reduce("sum", self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        return _reduce("mean", self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce("max", self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduce("min", self, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _reduce("argmax", self, axis, keepdims)

    def exp(self):
        return _invoke("exp", [self], {})

    def log(self):
        return _invoke("log", [self], {})

    def sqrt(self):
        return _invoke("sqrt", [self], {})

    def square(self):
        return _invoke("square", [self], {})

    def relu(self):
        return _invoke("relu", [self], {})

    def sigmoid(self):
        return _invoke("sigmoid", [self], {})

    def tanh(self):
        return _invoke("tanh", [self], {})

    def transpose(self, axes=None):
        return _invoke("transpose", [self], {} if axes is None else {"axes": tuple(axes)})

    def expand_dims(self, axis):
        return _invoke("expand_dims", [self], {"axis": axis})

    def clip(self, a_min, a_max):
        return _invoke("clip", [self], {"a_min": a_min, "a_max": a_max})

    def softmax(self, axis=-1):
        return _invoke("softmax", [self], {"axis": axis})

    def one_hot(self, depth):
        return _invoke("one_hot", [self], {"depth": depth})

    def zeros_like(self):
        return zeros(self.shape, self.context, self.dtype)

    def ones_like(self):
        return ones(self.shape, self.context, self.dtype)


def _reduce(op, a, axis, keepdims):
    kw = {"keepdims": keepdims} if keepdims else {}
    if axis is not None:
        kw["axis"] = axis
    return _invoke(op, [a], kw)


def _as_nd(x, like):
    if isinstance(x, NDArray):
        return x
    v = np.asarray(x)
    # None, strings and other objects are no operands: numpy's float cast
    # would turn None into NaN silently (numpy itself raises TypeError).
    if v.dtype.kind not in "biuf":
        raise TypeError("an NDArray operand must be a number, an NDArray or numeric array-like, not %s"
                        % type(x).__name__)
    return array(v, like.context, like.dtype)


def _arith(a, b, elem, bcast, scalar_op, reverse=False, out=None):
    if isinstance(b, numbers.Number) and not isinstance(b, bool) or isinstance(b, np.generic):
        return _invoke(scalar_op, [a], {"scalar": repr(float(b))}, out=out)
    if isinstance(b, bool):
        return _invoke(scalar_op, [a], {"scalar": "1.0" if b else "0.0"}, out=out)
    if not isinstance(b, NDArray):
        try:
            b = _as_nd(b, a)
        except (TypeError, ValueError):
            return NotImplemented
    x, y = (b, a) if reverse else (a, b)
    if reverse:
        elem, bcast = {"_rminus_scalar": ("elemwise_sub", "broadcast_sub"),
                       "_rdiv_scalar": ("elemwise_div", "broadcast_div"),
                       "_rpower_scalar": ("_power", "broadcast_power")}[scalar_op]
    if elem is not None and x.shape == y.shape:
        return _invoke2(elem, x, y, out)
    return _invoke2(bcast, x, y, out)


_BINARY_NAMES = {}


def _wrap(h):
    """An NDArray owning handle h (non-NULL), without __init__'s checks."""
    a = _new(NDArray)
    a._h = h
    a._grad = None
    a._shape = None
    return a


_I1 = _c_int * 1
_invoke_c = _lib.raw("mxp_invoke")  # as _invoke_ex, one argument fewer


def _binop(op, hx, hy, shape):
    """The operators' fast path: op (bytes) on two handles, a new NDArray
    back; shape: the result's when known (elementwise ops keep their
    inputs'), so a chain of operators asks C for no shapes.  One C call;
    its only ctypes objects are the three small arrays it needs."""
    outs = _A1()
    rc = _invoke_c(op, 2, _A2(hx, hy), _I1(1), outs, 0, None, None)
    if rc:
        check(rc)
    a = _new(NDArray)
    a._h = outs[0]
    a._grad = None
    a._shape = shape
    return a


# The optional C extension (python/fast/mxplug_fast.c, docs/python.md):
# when present, NDArray + - * / between two arrays and NDArray.__del__ run
# in C (one mxp_invoke, no Python frame, no ctypes objects); every other
# operand goes to the Python methods above, kept here as the fallback.
_PY_METHODS = {k: NDArray.__dict__[k] for k in ("__add__", "__sub__", "__mul__", "__truediv__", "__del__",
                                                   "__radd__", "__rmul__")}
_fast = _lib.fast_module()
if _fast is not None:
    _fast.install(NDArray, _lib.address("mxp_invoke"), _lib.address("mxp_ndarray_release"),
                  _lib.address("mxp_autograd_unmark"), check, _PY_METHODS)
FAST = _fast is not None  # True: the C fast path is installed

def _invoke2(op, x, y, out=None):
    """Fast path of a two-input, one-output op without parameters."""
    bname = _BINARY_NAMES.get(op)
    if bname is None:
        bname = _BINARY_NAMES[op] = c_str(op)
    outs = _A1()
    if out is not None:
        outs[0] = out._h
    n = _c_int(1)
    rc = _invoke_ex(bname, 2, _A2(x._h, y._h), _byref(n), outs, 0, None, None, None)
    if rc:
        check(rc)
    if out is not None:
        return out
    return _wrap(outs[0])


# (op, ((key, type, value), ...)) -> (op bytes, n, keys array, vals array,
# key strings, value strings): a call with parameters seen before converts
# nothing (the type is in the key: True == 1 but "True" != "1").
_KW_CACHE = {}
_KW_CACHE_MAX = 4096


def _kwargs(op, params):
    try:
        ck = (op, tuple((k, type(v), v) for k, v in params.items()))
        hit = _KW_CACHE.get(ck)
    except TypeError:  # an unhashable value (a list): converted every time
        ck = hit = None
    if hit is None:
        keys = tuple(k for k, v in params.items() if v is not None)
        vals = tuple(param_str(params[k]) for k in keys)
        hit = (c_str(op), len(keys), c_str_array(keys) if keys else None, c_str_array(vals) if keys else None,
               keys, vals)
        if ck is not None and len(_KW_CACHE) < _KW_CACHE_MAX:
            _KW_CACHE[ck] = hit
    return hit


def _invoke(op, inputs, params, out=None, aux=None, device=None, req=None, is_train=None):
    """Run op `op` on NDArrays `inputs` with parameter values `params` (Python
    values, converted to MXNet's grammar).  out: NDArray or list to write
    into.  Returns the NDArray, or a list when the op has several outputs."""
    bop, nk, ckeys, cvals, _, _ = _kwargs(op, params)
    for i, x in enumerate(inputs):
        if not isinstance(x, NDArray):
            raise TypeError("op '%s': input %d is a %s, not an NDArray" % (op, i, type(x).__name__))
    outs_given = out if isinstance(out, (list, tuple)) else ([] if out is None else [out])
    for o in outs_given:
        if not isinstance(o, NDArray):
            raise TypeError("op '%s': out must be an NDArray, got %s" % (op, type(o).__name__))
    cap = _b.max(len(outs_given), 8)
    ins = (_c_void_p * _b.max(len(inputs), 1))(*[x._h for x in inputs])
    outs = (_c_void_p * cap)(*[o._h for o in outs_given])
    n = _c_int(cap)
    opts = None
    if aux is not None or device is not None or req is not None or is_train:
        opts = _lib.InvokeOpts()
        opts.is_train = 1 if is_train else 0
        if device is not None:
            opts.has_device = 1
            opts.device = device._device()
        if aux is not None:
            opts.n_aux = len(aux)
            keep = c_handle_array([a._h for a in aux])
            opts.aux = ctypes.cast(keep, ctypes.POINTER(_c_void_p))
        if req is not None:
            r = (ctypes.c_int * _b.max(len(req), 1))(*[_REQ[x] if isinstance(x, str) else int(x) for x in req])
            opts.req = ctypes.cast(r, ctypes.POINTER(ctypes.c_int))
        opts = _byref(opts)
    rc = _invoke_ex(bop, len(inputs), ins, _byref(n), outs, nk, ckeys, cvals, opts)
    if rc:
        check(rc)
    if n.value == 1 and not outs_given:
        return _wrap(outs[0])
    res = []
    for i in range(n.value):
        if i < len(outs_given):
            res.append(outs_given[i])
        else:
            res.append(_wrap(outs[i]))
    if out is not None and not isinstance(out, (list, tuple)):
        return res[0]
    return res[0] if len(res) == 1 else res


# ---------------------------------------------------------------- op functions
def _make_op_function(info):
    def op_function(*args, out=None, name=None, ctx=None, **kwargs):
        inputs = []
        for a in args:
            if isinstance(a, NDArray):
                inputs.append(a)
            elif isinstance(a, (list, tuple)) and a and _b.all(isinstance(x, NDArray) for x in a):
                inputs.extend(a)
            else:
                raise TypeError("%s: positional arguments must be NDArrays, got %s (pass parameters by name)"
                                % (info.name, type(a).__name__))
        named = {k: v for k, v in kwargs.items() if isinstance(v, NDArray)}
        params = {k: v for k, v in kwargs.items() if not isinstance(v, NDArray) and v is not None}
        if "dtype" in params and not isinstance(params["dtype"], str):
            params["dtype"] = np.dtype(params["dtype"]).name
        if info.var_args_key and info.var_args_key not in params and not named:
            params[info.var_args_key] = len(inputs)
        aux = None
        if named or not info.var_args_key:
            ks, vs = _kwargs(info.name, params)[4:]
            argn, auxn = info.input_names(ks, vs)
            if named or len(inputs) > len(argn):
                slots = dict(zip(argn + auxn, inputs))
                for k, v in named.items():
                    if k not in argn and k not in auxn:
                        raise MXNetError("op '%s' has no input '%s' (inputs: %s)" %
                                         (info.name, k, ", ".join(argn + auxn)))
                    if k in slots:
                        raise MXNetError("op '%s': input '%s' given twice" % (info.name, k))
                    slots[k] = v
                missing = [k for k in argn if k not in slots]
                if missing:
                    raise MXNetError("op '%s': missing input(s) %s" % (info.name, ", ".join(missing)))
                inputs = [slots[k] for k in argn]
                if auxn and _b.any(k in slots for k in auxn):
                    if not _b.all(k in slots for k in auxn):
                        raise MXNetError("op '%s': give all aux states (%s) or none" %
                                         (info.name, ", ".join(auxn)))
                    aux = [slots[k] for k in auxn]
        device = ctx if ctx is not None else (None if inputs else Context.default_ctx)
        return _invoke(info.name, inputs, params, out=out, aux=aux, device=device)

    op_function.__name__ = info.name
    op_function.__qualname__ = info.name
    op_function.__doc__ = info.doc
    return op_function


_generated = {}


def _op_function(name):
    fn = _generated.get(name)
    if fn is None:
        info = _ops.find(name)
        if info is None:
            return None
        fn = _make_op_function(info)
        _generated[name] = fn
    return fn


def __getattr__(name):
    # ops of packs registered after import appear on first access
    if not name.startswith("__"):
        fn = _op_function(name)
        if fn is not None:
            setattr(sys.modules[__name__], name, fn)
            return fn
    raise AttributeError("module 'mxplug.nd' has no attribute '%s' (no such op in the registry)" % name)


def _generate_all():
    mod = sys.modules[__name__]
    for name in _ops.all_names():
        if name.isidentifier() and not hasattr(mod, name):
            fn = _op_function(name)
            if fn is not None:
                setattr(mod, name, fn)


# ---------------------------------------------------------------- creation
def _ctx(ctx):
    return Context.default_ctx if ctx is None else ctx


def empty(shape, ctx=None, dtype=None):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = tuple(int(d) for d in shape)
    dims = (ctypes.c_int64 * _b.max(len(shape), 1))(*shape)
    out = _c_void_p()
    check(lib.mxp_ndarray_create(dims, len(shape), dtype_code(np.float32 if dtype is None else dtype),
                                 _ctx(ctx)._device(), _byref(out)))
    return NDArray(out.value)


def full(shape, val, ctx=None, dtype=None, out=None):
    a = out if out is not None else empty(shape, ctx, dtype)
    check(lib.mxp_ndarray_fill(a._h, float(val)))
    return a


def zeros(shape, ctx=None, dtype=None, **kwargs):
    return full(shape, 0.0, ctx, dtype)


def ones(shape, ctx=None, dtype=None, **kwargs):
    return full(shape, 1.0, ctx, dtype)


def zeros_like(a):
    return zeros(a.shape, a.context, a.dtype)


def ones_like(a):
    return ones(a.shape, a.context, a.dtype)


def array(source_array, ctx=None, dtype=None):
    """An NDArray with a copy of source_array (numpy array, list, NDArray).
    dtype: default float32 unless source_array is a numpy array or NDArray
    (then its dtype), as MXNet."""
    if isinstance(source_array, NDArray):
        src = source_array.asnumpy()
    else:
        src = source_array
    if dtype is None:
        dtype = src.dtype if isinstance(src, np.ndarray) else np.float32
    src = np.ascontiguousarray(src, dtype=dtype)
    a = empty(src.shape, ctx, src.dtype)
    check(lib.mxp_ndarray_sync_copy_from(a._h, src.ctypes.data, src.nbytes))
    return a


def arange(start, stop=None, step=1.0, repeat=1, ctx=None, dtype=None):
    if stop is None:
        start, stop = 0, start
    vals = np.repeat(np.arange(start, stop, step), repeat)
    return array(vals, ctx, np.float32 if dtype is None else dtype)


def concat(*arrays, dim=1):
    return _invoke("Concat", list(arrays), {"num_args": len(arrays), "dim": dim})


def waitall():
    check(lib.mxp_engine_wait_for_all())


# ---------------------------------------------------------------- files
def save(fname, data):
    """Save an NDArray, a list of them or a dict name -> NDArray (MXNet .params)."""
    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        names = list(data.keys())
        arrays = [data[k] for k in names]
    else:
        names = None
        arrays = list(data)
    for a in arrays:
        if not isinstance(a, NDArray):
            raise TypeError("save: values must be NDArrays, got %s" % type(a).__name__)
    check(lib.mxp_ndarray_save(c_str(fname), len(arrays), c_handle_array([a._h for a in arrays]),
                               c_str_array(names) if names is not None else None))


def load(fname):
    """Load a .params file: a dict when it has names, else a list."""
    n = ctypes.c_int()
    arrs = ctypes.POINTER(_c_void_p)()
    names = ctypes.POINTER(ctypes.c_char_p)()
    check(lib.mxp_ndarray_load(c_str(fname), _byref(n), _byref(arrs), _byref(names)))
    try:
        out = [NDArray(lib.mxp_ndarray_retain(arrs[i])) for i in range(n.value)]
        if names:
            return {py_str(names[i]): out[i] for i in range(n.value)}
        return out
    finally:
        lib.mxp_ndarray_list_free(n.value, arrs, names)


def _wrap_borrowed(h):
    """An NDArray for a handle the runtime owns (adds a reference)."""
    return NDArray(lib.mxp_ndarray_retain(h))


_generate_all()
