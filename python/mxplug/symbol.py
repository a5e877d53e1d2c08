"""symbol — mx.sym: Symbol over mxp_symbol handles, Variable, Group, load,
and every registered op as a symbol constructor (generated like mx.nd's).

A Symbol owns one reference to its handle.  Op constructors create an atomic
node with the op's parameters, then compose it with the Symbol arguments
(positional in input order, or by input name); inputs left unbound become
variables "{node}_{input}" as in MXNet.  Binding (bind / simple_bind) gives
an executor.Executor.  Symbols are not thread-safe (as the C handles).
"""
import builtins as _b
import ctypes
import numbers
import sys

import numpy as np

from . import _lib, _ops
from ._lib import lib
from .base import (MXNetError, c_handle_array, c_str, c_str_array, check, dtype_code, dtype_np, param_str,
                   py_str, shape_struct, shape_tuple)
from .context import Context

_byref = ctypes.byref


def _new(fn, *args):
    out = ctypes.c_void_p()
    check(fn(*args, _byref(out)))
    return Symbol(out.value)


class Symbol:
    """A symbolic graph's list of outputs (MXNet's mx.sym.Symbol)."""
    __slots__ = ("_h", "__weakref__")

    def __init__(self, handle):
        if not handle:
            raise MXNetError("Symbol: NULL handle")
        self._h = handle

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_symbol_release(h)

    @property
    def handle(self):
        return self._h

    @property
    def name(self):
        return py_str(lib.mxp_symbol_name(self._h))

    def _list(self, fn):
        n = ctypes.c_int()
        names = ctypes.POINTER(ctypes.c_char_p)()
        check(fn(self._h, _byref(n), _byref(names)))
        return [py_str(names[i]) for i in range(n.value)]

    def list_arguments(self):
        return self._list(lib.mxp_symbol_list_arguments)

    def list_outputs(self):
        return self._list(lib.mxp_symbol_list_outputs)

    def list_auxiliary_states(self):
        return self._list(lib.mxp_symbol_list_auxiliary_states)

    def list_inputs(self):
        return self.list_arguments() + self.list_auxiliary_states()

    def __len__(self):
        return lib.mxp_symbol_num_outputs(self._h)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, index):
        if isinstance(index, str):
            return _new(lib.mxp_symbol_output_by_name, self._h, c_str(index))
        if not isinstance(index, numbers.Integral):
            raise TypeError("Symbol index must be an int or an output name")
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("output %d out of range (%d outputs)" % (index, n))
        return _new(lib.mxp_symbol_output, self._h, int(index))

    def get_internals(self):
        return _new(lib.mxp_symbol_internals, self._h)

    def __copy__(self):
        return _new(lib.mxp_symbol_copy, self._h)

    copy = __copy__

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __call__(self, *args, **kwargs):
        s = self.__copy__()
        s._compose(*args, **kwargs)
        return s

    def _compose(self, *args, name=None, **kwargs):
        if args and kwargs:
            raise TypeError("compose: give inputs either by position or by name, not both")
        for a in list(args) + list(kwargs.values()):
            if not isinstance(a, Symbol):
                raise TypeError("compose: inputs must be Symbols, got %s" % type(a).__name__)
        if kwargs:
            keys = list(kwargs)
            check(lib.mxp_symbol_compose(self._h, c_str(name) if name else None, len(keys), c_str_array(keys),
                                         c_handle_array([kwargs[k]._h for k in keys])))
        else:
            check(lib.mxp_symbol_compose(self._h, c_str(name) if name else None, len(args), None,
                                         c_handle_array([a._h for a in args])))

    # ------------------------------------------------------------ attributes
    def attr(self, key):
        v = ctypes.c_char_p()
        check(lib.mxp_symbol_attr(self._h, c_str(key), _byref(v)))
        return py_str(v.value)

    def _set_attr(self, **kwargs):
        for k, v in kwargs.items():
            check(lib.mxp_symbol_set_attr(self._h, c_str(k), c_str(v)))

    # ------------------------------------------------------------ JSON
    def tojson(self):
        p = ctypes.c_void_p()
        check(lib.mxp_symbol_save_json(self._h, _byref(p)))
        try:
            return ctypes.string_at(p.value).decode()
        finally:
            _lib.c_free(p.value)

    def save(self, fname):
        check(lib.mxp_symbol_save_file(self._h, c_str(fname)))

    # ------------------------------------------------------------ inference
    def infer_shape(self, *args, **kwargs):
        """(arg_shapes, out_shapes, aux_shapes); Nones when incomplete (as MXNet)."""
        res = self._infer_shape(args, kwargs)
        if not res[3]:
            return None, None, None
        return res[:3]

    def infer_shape_partial(self, *args, **kwargs):
        return self._infer_shape(args, kwargs)[:3]

    def _infer_shape(self, args, kwargs):
        if args and kwargs:
            raise TypeError("infer_shape: give shapes by position or by name, not both")
        if args:
            names = None
            items = [(None, s) for s in args]
        else:
            names = list(kwargs)
            items = [(k, kwargs[k]) for k in names]
        shapes = (_lib.Shape * _b.max(len(items), 1))()
        for i, (_, s) in enumerate(items):
            if s is None:
                shapes[i].ndim = -1
            else:
                shapes[i] = shape_struct(s)
        outs = [ctypes.c_int() for _ in range(3)]
        ptrs = [ctypes.POINTER(_lib.Shape)() for _ in range(3)]
        complete = ctypes.c_int()
        check(lib.mxp_symbol_infer_shape(self._h, len(items), c_str_array(names) if names else None, shapes,
                                         _byref(outs[0]), _byref(ptrs[0]), _byref(outs[1]), _byref(ptrs[1]),
                                         _byref(outs[2]), _byref(ptrs[2]), _byref(complete)))
        res = []
        for n, p in zip(outs, ptrs):
            res.append([shape_tuple(p[i]) for i in range(n.value)])
            _lib.c_free(ctypes.cast(p, ctypes.c_void_p).value)
        return res[0], res[1], res[2], bool(complete.value)

    def infer_type(self, *args, **kwargs):
        if args and kwargs:
            raise TypeError("infer_type: give types by position or by name, not both")
        if args:
            names, items = None, list(args)
        else:
            names = list(kwargs)
            items = [kwargs[k] for k in names]
        types = (ctypes.c_int * _b.max(len(items), 1))(*[-1 if t is None else dtype_code(t) for t in items])
        outs = [ctypes.c_int() for _ in range(3)]
        ptrs = [ctypes.POINTER(ctypes.c_int)() for _ in range(3)]
        complete = ctypes.c_int()
        check(lib.mxp_symbol_infer_type(self._h, len(items), c_str_array(names) if names else None, types,
                                        _byref(outs[0]), _byref(ptrs[0]), _byref(outs[1]), _byref(ptrs[1]),
                                        _byref(outs[2]), _byref(ptrs[2]), _byref(complete)))
        res = []
        for n, p in zip(outs, ptrs):
            res.append([dtype_np(p[i]).type if p[i] >= 0 else None for i in range(n.value)])
            _lib.c_free(ctypes.cast(p, ctypes.c_void_p).value)
        if not complete.value:
            return None, None, None
        return tuple(res)

    # ------------------------------------------------------------ binding
    def simple_bind(self, ctx=None, grad_req="write", type_dict=None, **kwargs):
        from .executor import Executor
        if type_dict:
            return Executor._simple_bind_typed(self, ctx or Context.default_ctx, grad_req, type_dict, kwargs)
        return Executor._simple_bind(self, ctx or Context.default_ctx, grad_req, kwargs)

    def bind(self, ctx=None, args=None, args_grad=None, grad_req="write", aux_states=None, **kwargs):
        from .executor import Executor
        return Executor._bind(self, ctx or Context.default_ctx, args, args_grad, grad_req, aux_states)

    # ------------------------------------------------------------ arithmetic
    def __add__(self, o):
        return _sym_arith(self, o, "elemwise_add", "_plus_scalar")

    __radd__ = __add__

    def __sub__(self, o):
        return _sym_arith(self, o, "elemwise_sub", "_minus_scalar")

    def __rsub__(self, o):
        return _sym_arith(self, o, None, "_rminus_scalar")

    def __mul__(self, o):
        return _sym_arith(self, o, "elemwise_mul", "_mul_scalar")

    __rmul__ = __mul__

    def __truediv__(self, o):
        return _sym_arith(self, o, "elemwise_div", "_div_scalar")

    def __rtruediv__(self, o):
        return _sym_arith(self, o, None, "_rdiv_scalar")

    def __pow__(self, o):
        return _sym_arith(self, o, "_power", "_power_scalar")

    def __neg__(self):
        return _op_symbol("negative", [self], {})

    def __repr__(self):
        n = self.name
        return "<Symbol %s>" % (n if n else "group [%s]" % ", ".join(self.list_outputs()))


def _sym_arith(a, b, op, scalar_op):
    if isinstance(b, Symbol):
        if op is None:
            raise TypeError("unsupported operand order")
        return _op_symbol(op, [a, b], {})
    if isinstance(b, numbers.Number):
        return _op_symbol(scalar_op, [a], {"scalar": repr(float(b))})
    return NotImplemented


def _op_symbol(op, inputs, params, name=None, named=None):
    keys = [k for k, v in params.items() if v is not None and not k.startswith("__")]
    vals = [param_str(params[k]) for k in keys]
    attrs = {k: str(v) for k, v in params.items() if k.startswith("__") and v is not None}
    s = _new(lib.mxp_symbol_create, c_str(op), c_str(name) if name else None, len(keys), c_str_array(keys),
             c_str_array(vals))
    if named:
        if inputs:
            info = _ops.find(op)
            argn, auxn = info.input_names(keys, vals)
            allnames = argn + auxn
            for i, x in enumerate(inputs):
                if allnames[i] in named:
                    raise MXNetError("op '%s': input '%s' given twice" % (op, allnames[i]))
                named[allnames[i]] = x
        s._compose(**named)
    elif inputs:
        s._compose(*inputs)
    for k, v in attrs.items():
        check(lib.mxp_symbol_set_attr(s._h, c_str(k), c_str(v)))
    return s


def _make_sym_function(info):
    def sym_function(*args, name=None, attr=None, **kwargs):
        inputs = []
        for a in args:
            if isinstance(a, Symbol):
                inputs.append(a)
            elif isinstance(a, (list, tuple)) and _b.all(isinstance(x, Symbol) for x in a):
                inputs.extend(a)
            else:
                raise TypeError("%s: positional arguments must be Symbols, got %s (pass parameters by name)"
                                % (info.name, type(a).__name__))
        named = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
        params = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol) and v is not None}
        if "dtype" in params and not isinstance(params["dtype"], str):
            params["dtype"] = np.dtype(params["dtype"]).name
        if info.var_args_key and info.var_args_key not in params:
            params[info.var_args_key] = len(inputs) + len(named)
        if attr:
            params.update(attr)
        return _op_symbol(info.name, inputs, params, name, named)

    sym_function.__name__ = info.name
    sym_function.__qualname__ = info.name
    sym_function.__doc__ = info.doc
    return sym_function


_generated = {}


def _sym_function(name):
    fn = _generated.get(name)
    if fn is None:
        info = _ops.find(name)
        if info is None:
            return None
        fn = _make_sym_function(info)
        _generated[name] = fn
    return fn


def __getattr__(name):
    if not name.startswith("__"):
        fn = _sym_function(name)
        if fn is not None:
            setattr(sys.modules[__name__], name, fn)
            return fn
    raise AttributeError("module 'mxplug.sym' has no attribute '%s' (no such op in the registry)" % name)


def Variable(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None, **kwargs):
    s = _new(lib.mxp_symbol_variable, c_str(name))
    attrs = dict(attr or {})
    if shape is not None:
        attrs["__shape__"] = param_str(tuple(shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(dtype_code(dtype))
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    for k, v in attrs.items():
        check(lib.mxp_symbol_set_attr(s._h, c_str(k), c_str(v)))
    return s


var = Variable


def Group(symbols):
    symbols = list(symbols)
    for x in symbols:
        if not isinstance(x, Symbol):
            raise TypeError("Group: expected Symbols, got %s" % type(x).__name__)
    return _new(lib.mxp_symbol_group, len(symbols), c_handle_array([x._h for x in symbols]))


def load_json(json_str):
    if not isinstance(json_str, (str, bytes)):
        raise TypeError("load_json: expected a JSON string")
    return _new(lib.mxp_symbol_load_json, c_str(json_str))


def load(fname):
    return _new(lib.mxp_symbol_load_file, c_str(fname))


def _generate_all():
    mod = sys.modules[__name__]
    for name in _ops.all_names():
        if name.isidentifier() and not hasattr(mod, name):
            fn = _sym_function(name)
            if fn is not None:
                setattr(mod, name, fn)


_generate_all()
