"""executor — mx.executor.Executor: a symbol bound to arrays (mxp_executor).

The Executor keeps NDArray wrappers (each holding its own reference) of the
runtime's argument, gradient, aux and output arrays, so they stay valid
after the executor is dropped.  forward() copies given kwargs into the bound
arguments; backward() takes head gradients (none for loss heads).  Outputs
are re-read after reshape.  One thread drives an executor at a time.
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib
from .base import MXNetError, c_handle_array, c_str_array, check, shape_struct
from .ndarray import NDArray, _wrap_borrowed, array as nd_array, zeros as nd_zeros

_REQ = {"null": 0, "write": 1, "inplace": 2, "add": 3}


def _borrowed_list(fn, h):
    n = ctypes.c_int()
    arr = ctypes.POINTER(ctypes.c_void_p)()
    check(fn(h, ctypes.byref(n), ctypes.byref(arr)))
    return [_wrap_borrowed(arr[i]) if arr[i] else None for i in range(n.value)]


class Executor:
    def __init__(self, handle, symbol, ctx):
        self._h = handle
        self._symbol = symbol
        self._ctx = ctx
        self._arg_names = symbol.list_arguments()
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._refresh()

    def _refresh(self):
        self.arg_arrays = _borrowed_list(lib.mxp_executor_args, self._h)
        self.grad_arrays = _borrowed_list(lib.mxp_executor_grads, self._h)
        self.aux_arrays = _borrowed_list(lib.mxp_executor_aux, self._h)
        self.outputs = _borrowed_list(lib.mxp_executor_outputs, self._h)
        self.arg_dict = dict(zip(self._arg_names, self.arg_arrays))
        self.grad_dict = {k: g for k, g in zip(self._arg_names, self.grad_arrays) if g is not None}
        self.aux_dict = dict(zip(self._aux_names, self.aux_arrays))
        self.output_dict = dict(zip(self._output_names, self.outputs))

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_executor_free(h)

    @property
    def handle(self):
        return self._h

    @staticmethod
    def _simple_bind(symbol, ctx, grad_req, shapes):
        names = [k for k, v in shapes.items() if v is not None]
        sh = (_lib.Shape * max(len(names), 1))()
        for i, k in enumerate(names):
            sh[i] = shape_struct(shapes[k])
        arg_names = symbol.list_arguments()
        no_grad = []
        if isinstance(grad_req, dict):
            no_grad = [k for k in arg_names if grad_req.get(k, "null") == "null"]
            req = 1
        elif isinstance(grad_req, (list, tuple)):
            no_grad = [k for k, r in zip(arg_names, grad_req) if r == "null"]
            req = 1
        else:
            if grad_req not in _REQ:
                raise MXNetError("unknown grad_req %r (null, write, add)" % (grad_req,))
            req = _REQ[grad_req]
        out = ctypes.c_void_p()
        check(lib.mxp_executor_simple_bind(symbol._h, ctx._device(), len(names), c_str_array(names), sh, req,
                                           len(no_grad), c_str_array(no_grad), ctypes.byref(out)))
        return Executor(out.value, symbol, ctx)

    @staticmethod
    def _simple_bind_typed(symbol, ctx, grad_req, type_dict, shapes):
        """simple_bind with dtypes (MXNet's type_dict): the C simple_bind
        allocates float32 only, so the arrays are made here, with the
        inferred shapes and types (float32 where nothing decides), and
        bound.  grad_req as in simple_bind."""
        arg_names = symbol.list_arguments()
        unknown = [k for k in type_dict if k not in arg_names]
        if unknown:
            raise MXNetError("simple_bind: type_dict names %s, not arguments of the symbol (arguments: %s)"
                             % (", ".join(unknown), ", ".join(arg_names)))
        arg_shapes, _, aux_shapes = symbol.infer_shape(**{k: v for k, v in shapes.items() if v is not None})
        if arg_shapes is None:
            raise MXNetError("simple_bind: the shapes given (%s) do not determine every argument's shape"
                             % ", ".join(shapes))
        arg_types, _, aux_types = symbol.infer_type(**type_dict)
        arg_types = [t or np.float32 for t in (arg_types or [None] * len(arg_names))]
        aux_types = [t or np.float32 for t in (aux_types or [None] * len(aux_shapes))]
        if isinstance(grad_req, str):
            if grad_req not in _REQ:
                raise MXNetError("unknown grad_req %r (null, write, add)" % (grad_req,))
            reqs = [grad_req] * len(arg_names)
        elif isinstance(grad_req, dict):
            reqs = [grad_req.get(k, "null") for k in arg_names]
        else:
            reqs = list(grad_req)
        args = [nd_zeros(s, ctx, t) for s, t in zip(arg_shapes, arg_types)]
        grads = [nd_zeros(s, ctx, t) if r != "null" else None for s, t, r in zip(arg_shapes, arg_types, reqs)]
        aux = [nd_zeros(s, ctx, t) for s, t in zip(aux_shapes, aux_types)]
        return Executor._bind(symbol, ctx, args, grads, reqs, aux)

    @staticmethod
    def _bind(symbol, ctx, args, args_grad, grad_req, aux_states):
        arg_names = symbol.list_arguments()
        aux_names = symbol.list_auxiliary_states()

        def as_list(v, names, what, required):
            if v is None:
                if required and names:
                    raise MXNetError("bind: %s are required (%s)" % (what, ", ".join(names)))
                return [None] * len(names)
            if isinstance(v, dict):
                missing = [k for k in names if k not in v]
                if required and missing:
                    raise MXNetError("bind: %s missing for %s" % (what, ", ".join(missing)))
                return [v.get(k) for k in names]
            v = list(v)
            if len(v) != len(names):
                raise MXNetError("bind: %d %s given, the symbol has %d (%s)" % (len(v), what, len(names),
                                                                               ", ".join(names)))
            return v

        a = as_list(args, arg_names, "arguments", True)
        g = as_list(args_grad, arg_names, "gradients", False)
        x = as_list(aux_states, aux_names, "aux states", True)
        for lst in (a, g, x):
            for i, v in enumerate(lst):
                if v is not None and not isinstance(v, NDArray):
                    lst[i] = nd_array(np.asarray(v), ctx)
        if isinstance(grad_req, str):
            reqs = [(_REQ[grad_req] if gg is not None else 0) for gg in g]
        elif isinstance(grad_req, dict):
            reqs = [_REQ[grad_req.get(k, "null")] if gg is not None else 0 for k, gg in zip(arg_names, g)]
        else:
            reqs = [_REQ[r] for r in grad_req]
        out = ctypes.c_void_p()
        check(lib.mxp_executor_bind(symbol._h, ctx._device(), len(a), c_handle_array([v._h for v in a]),
                                    c_handle_array([v._h if v is not None else None for v in g]),
                                    (ctypes.c_int * max(len(reqs), 1))(*reqs), len(x),
                                    c_handle_array([v._h for v in x]), ctypes.byref(out)))
        return Executor(out.value, symbol, ctx)

    def forward(self, is_train=False, **kwargs):
        for k, v in kwargs.items():
            if k not in self.arg_dict:
                raise MXNetError("forward: unknown argument '%s' (arguments: %s)" % (k, ", ".join(self._arg_names)))
            dst = self.arg_dict[k]
            if isinstance(v, NDArray):
                v.copyto(dst) if v.shape == dst.shape else dst._sync_copyfrom(v.asnumpy())
            else:
                dst._sync_copyfrom(np.asarray(v))
        check(lib.mxp_executor_forward(self._h, 1 if is_train else 0))
        return self.outputs

    def backward(self, out_grads=None, is_train=True):
        if out_grads is None:
            out_grads = []
        elif isinstance(out_grads, NDArray):
            out_grads = [out_grads]
        check(lib.mxp_executor_backward(self._h, len(out_grads),
                                        c_handle_array([o._h if o is not None else None for o in out_grads])))

    def wait(self):
        check(lib.mxp_executor_wait(self._h))

    def reshape(self, allow_up_sizing=False, **kwargs):
        names = list(kwargs)
        sh = (_lib.Shape * max(len(names), 1))()
        for i, k in enumerate(names):
            sh[i] = shape_struct(kwargs[k])
        check(lib.mxp_executor_reshape(self._h, len(names), c_str_array(names), sh))
        self._refresh()
        return self

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        for name, arr in (arg_params or {}).items():
            if name in self.arg_dict:
                arr.copyto(self.arg_dict[name])
            elif not allow_extra_params:
                raise MXNetError("copy_params_from: '%s' is not an argument of the symbol" % name)
        for name, arr in (aux_params or {}).items():
            if name in self.aux_dict:
                arr.copyto(self.aux_dict[name])
            elif not allow_extra_params:
                raise MXNetError("copy_params_from: '%s' is not an aux state of the symbol" % name)

