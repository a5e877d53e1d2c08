"""gluon.block — Block and HybridBlock: layers owning Parameters and child
blocks, names as MXNet's Gluon gives them (dense0_weight,
hybridsequential0_conv0_bias), imperative forward, hybridize() and export().

A HybridBlock defines hybrid_forward(F, x, **params) once; F is mx.nd for an
imperative call (params are NDArrays) and mx.sym when the block is traced
(params are Variables named after the parameters).  hybridize() makes the
outermost hybridized block trace itself once, bind the symbol through the
executor (parameters bound as the executor's own arguments, so no copy of
weights) and run later calls there; under autograd.record() the whole
executor is one step on the runtime's tape (mxp_autograd_record_executor),
so backward reaches the parameters.  A call with a new input shape binds
again.  Deferred shapes (0s) are completed by the symbol's shape inference
on the first input.  Not here: multiple inputs to a hybridized block's
cache beyond positional NDArrays, contexts other than cpu.
"""
import threading
from collections import OrderedDict


from .. import amp
from .. import autograd
from .. import ndarray as nd
from .. import symbol as sym
from ..base import MXNetError, c_handle_array, check
from .._lib import lib
from .parameter import Parameter, ParameterDict

_scope = threading.local()


class _NameScope:
    def __init__(self, block):
        self._block = block
        self._counters = {}

    def __enter__(self):
        stack = getattr(_scope, "stack", None)
        if stack is None:
            stack = _scope.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _scope.stack.pop()


_global_counters = {}


def _new_prefix(alias):
    stack = getattr(_scope, "stack", None)
    if stack:
        top = stack[-1]
        n = top._counters.get(alias, 0)
        top._counters[alias] = n + 1
        return top._block.prefix + "%s%d_" % (alias, n)
    n = _global_counters.get(alias, 0)
    _global_counters[alias] = n + 1
    return "%s%d_" % (alias, n)


class Block:
    def __init__(self, prefix=None, params=None):
        self._prefix = prefix if prefix is not None else _new_prefix(self._alias())
        self._params = ParameterDict(self._prefix)
        if params is not None:
            self._params.update(params)
        self._children = OrderedDict()
        self._scope = _NameScope(self)

    def _alias(self):
        return type(self).__name__.lower()

    @property
    def prefix(self):
        return self._prefix

    @property
    def name(self):
        return self._prefix[:-1] if self._prefix.endswith("_") else self._prefix

    @property
    def params(self):
        return self._params

    def name_scope(self):
        return self._scope

    def __setattr__(self, name, value):
        if isinstance(value, Block) and "_children" in self.__dict__:
            self._children[name] = value
        super().__setattr__(name, value)

    def register_child(self, block, name=None):
        self._children[name or str(len(self._children))] = block

    def collect_params(self, select=None):
        out = ParameterDict(self._prefix)
        out.update(self._params)
        for c in self._children.values():
            out.update(c.collect_params())
        if select:
            import re
            pat = re.compile(select)
            out = ParameterDict(self._prefix)
            for k, v in self._collect_all().items():
                if pat.match(k):
                    out[k] = v
        return out

    def _collect_all(self):
        out = OrderedDict(self._params)
        for c in self._children.values():
            out.update(c._collect_all())
        return out

    def initialize(self, init=None, ctx=None, verbose=False, force_reinit=False):
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def hybridize(self, active=True, **kwargs):
        for c in self._children.values():
            c.hybridize(active, **kwargs)

    def save_parameters(self, filename):
        self.collect_params().save(filename)

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False):
        self.collect_params().load(filename, ctx, allow_missing, ignore_extra)

    def __call__(self, *args):
        return self.forward(*args)

    def forward(self, *args):
        raise NotImplementedError

    def __repr__(self):
        lines = ["%s(" % type(self).__name__]
        for k, c in self._children.items():
            lines.append("  (%s): %s" % (k, repr(c).replace("\n", "\n  ")))
        lines.append(")")
        return "\n".join(lines)


class HybridBlock(Block):
    def __init__(self, prefix=None, params=None):
        super().__init__(prefix, params)
        self._active = False
        self._cache = None  # (input shapes, executor, symbol, arg plan)

    def hybridize(self, active=True, **kwargs):
        self._active = active
        self._cache = None
        super().hybridize(active, **kwargs)

    def _own_params(self):
        # hybrid_forward's keyword names: the parameter's name without the block prefix
        return {k[len(self._prefix):]: p for k, p in self._params.items()}

    def __call__(self, x, *args):
        if isinstance(x, sym.Symbol):
            return self.hybrid_forward(sym, x, *args, **{k: p.var() for k, p in self._own_params().items()})
        if not isinstance(x, nd.NDArray):
            raise TypeError("%s: input must be an NDArray or a Symbol, got %s" % (self.name, type(x).__name__))
        if self._active:
            return self._call_cached(x, *args)
        return self.forward(x, *args)

    def forward(self, x, *args):
        self._complete_shapes([x] + list(args))
        return self.hybrid_forward(nd, x, *args, **{k: p.data() for k, p in self._own_params().items()})

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError

    # ------------------------------------------------------------ shapes
    def _trace(self, n_inputs):
        names = ["data"] if n_inputs == 1 else ["data%d" % i for i in range(n_inputs)]
        inputs = [sym.Variable(n) for n in names]
        out = self(*inputs)
        if isinstance(out, (list, tuple)):
            out = sym.Group(list(out))
        return out, names

    def _complete_shapes(self, inputs):
        params = self._collect_all()
        pending = [p for p in params.values() if p._data is None and p._deferred is not None]
        if not pending:
            return
        out, names = self._trace(len(inputs))
        arg_shapes, _, aux_shapes = out.infer_shape_partial(**{n: a.shape for n, a in zip(names, inputs)})
        shapes = dict(zip(out.list_arguments(), arg_shapes))
        shapes.update(zip(out.list_auxiliary_states(), aux_shapes))
        for p in pending:
            s = shapes.get(p.name)
            if s is None or any(d == 0 for d in s):
                raise MXNetError("%s: cannot infer the shape of parameter %s from input shapes %s"
                                 % (self.name, p.name, [a.shape for a in inputs]))
            p.shape = s
            p._var = None
            p._finish_deferred_init()

    # ------------------------------------------------------------ hybridized
    def _call_cached(self, *inputs):
        self._complete_shapes(list(inputs))
        key = tuple(a.shape for a in inputs)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key,) + self._bind(inputs)
        _, ex, names, plan, grads_given = self._cache
        for n, a in zip(names, inputs):
            a.copyto(ex.arg_dict[n])
        train = autograd.is_training()
        recording = autograd.is_recording() and grads_given
        check(lib.mxp_executor_forward(ex.handle, 1 if (train or recording) else 0))
        outs = [o.copy() for o in ex.outputs]
        if recording:
            check(lib.mxp_autograd_record_executor(ex.handle, len(plan), c_handle_array([a.handle for a in plan]),
                                                   len(outs), c_handle_array([o.handle for o in outs])))
        return outs[0] if len(outs) == 1 else outs

    def _bind(self, inputs):
        out, names = self._trace(len(inputs))
        params = {p.name: p for p in self._collect_all().values()}
        args, grads, reqs = [], [], []
        for n in out.list_arguments():
            if n in names:
                a = nd.empty(inputs[names.index(n)].shape, dtype=inputs[names.index(n)].dtype)
                args.append(a)
                grads.append(None)
                reqs.append("null")
            elif n in params:
                p = params[n]
                args.append(p.data())
                g = p.grad_req != "null"
                grads.append(nd.zeros(p.shape, dtype=p.dtype) if g else None)
                reqs.append("write" if g else "null")
            else:
                raise MXNetError("%s: the traced graph has an input '%s' that is neither the data nor a parameter"
                                 % (self.name, n))
        aux = []
        for n in out.list_auxiliary_states():
            if n not in params:
                raise MXNetError("%s: aux state '%s' is not a parameter" % (self.name, n))
            aux.append(params[n].data())
        ex = out.bind(args=args, args_grad=grads, grad_req=reqs, aux_states=aux)
        # The tape sees the executor's inputs as these arrays: the block's data
        # input is a copy (no gradient), parameters are the Parameters' own arrays.
        return ex, names, args, any(g is not None for g in grads)

    def export(self, path, epoch=0, remove_amp_cast=True):
        """Write PATH-symbol.json and PATH-%04d.params (arg:/aux: names, as MXNet's export)."""
        out, _ = self._trace(1)
        if remove_amp_cast:
            out = amp.remove_casts(out)
        out.save("%s-symbol.json" % path)
        params = {p.name: p for p in self._collect_all().values()}
        aux_names = set(out.list_auxiliary_states())
        data = {}
        for n in out.list_arguments() + out.list_auxiliary_states():
            if n in params:
                data[("aux:" if n in aux_names else "arg:") + n] = params[n].data()
        nd.save("%s-%04d.params" % (path, epoch), data)
        return out


class SymbolBlock(HybridBlock):
    """A block running a loaded symbol (e.g. an exported model) with its parameters."""

    def __init__(self, outputs, inputs, params=None):
        super().__init__(prefix="")
        self._sym = outputs
        self._input_names = [i.name for i in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        for n in outputs.list_arguments() + outputs.list_auxiliary_states():
            if n not in self._input_names:
                self._params[n] = Parameter(n, grad_req="null" if n in outputs.list_auxiliary_states() else "write",
                                            allow_deferred_init=True)

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, ctx=None):
        s = sym.load(symbol_file)
        if isinstance(input_names, str):
            input_names = [input_names]
        blk = SymbolBlock(s, [sym.Variable(n) for n in input_names])
        if param_file:
            blk.collect_params().load(param_file, ignore_extra=True)
        return blk

    def __call__(self, x, *args):
        if isinstance(x, sym.Symbol):
            return self._sym(**{self._input_names[0]: x})
        return self._call_cached(x, *args)

    def _trace(self, n_inputs):
        return self._sym, self._input_names

