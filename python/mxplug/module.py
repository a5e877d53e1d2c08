"""module — mx.mod.Module: a symbol bound for training (MXNet 1.x's Module API:
bind, init_params, init_optimizer, forward/backward/update, update_metric,
fit, score, predict, get/set_params, save_checkpoint, load).

One training executor (simple_bind on the data and label shapes; no
gradient for data and labels), rebound by reshape when a batch has another
size.  Parameters are the arguments other than data and labels, in
list_arguments order, which is also the optimizer's index (as MXNet's).
rescale_grad defaults to 1/batch_size as in MXNet's Module.  CPU contexts;
a list of contexts (data parallelism) is refused.

kvstore (init_optimizer / fit): "local" and "device" change nothing with
one context.  A dist store ("dist_sync", "dist_async" or a KVStore from
mx.kv.create), one process per worker under mpirun: every parameter becomes
a key (worker 0's initial values win).  With dist_sync each gradient is
summed over the workers before this module's optimizer updates
(rescale_grad 1/(batch * workers)); with dist_async the optimizer is sent
to the servers, update() pushes the gradients and pulls the weights
(rescale_grad 1/batch).  Give each worker its own part of the data, as
with MXNet (MNISTIter(num_parts=kv.num_workers, part_index=kv.rank)).
"""
import logging
import time

import numpy as np

from . import initializer as init_mod
from . import kvstore as kvs_mod
from . import metric as metric_mod
from . import model as model_mod
from . import ndarray as nd
from . import optimizer as opt_mod
from .base import MXNetError
from .callback import BatchEndParam
from .context import Context, cpu


def _shapes(descs):
    out = []
    for d in descs or []:
        if hasattr(d, "name"):
            out.append((d.name, tuple(d.shape)))
        else:
            out.append((d[0], tuple(d[1])))
    return out


class Module:
    def __init__(self, symbol, data_names=("data",), label_names=("softmax_label",), logger=logging,
                 context=None, work_load_list=None, fixed_param_names=None):
        if isinstance(context, (list, tuple)):
            if len(context) != 1:
                raise MXNetError("Module: several contexts (data parallelism) are not implemented; give one")
            context = context[0]
        self._symbol = symbol
        self._context = context or cpu()
        if not isinstance(self._context, Context):
            raise TypeError("Module: context must be a Context")
        args = symbol.list_arguments()
        self._data_names = list(data_names or [])
        self._label_names = [n for n in (label_names or []) if n in args]
        for n in self._data_names:
            if n not in args:
                raise MXNetError("Module: data name '%s' is not an argument of the symbol (%s)" % (n, ", ".join(args)))
        self._param_names = [n for n in args if n not in self._data_names and n not in self._label_names]
        self._aux_names = symbol.list_auxiliary_states()
        self._fixed = set(fixed_param_names or [])
        self.logger = logger
        self.binded = self.params_initialized = self.optimizer_initialized = False
        self._exec = None
        self._kv = None
        self._arg_params = self._aux_params = None
        self._optimizer = None
        self.for_training = False

    # ------------------------------------------------------------ properties
    @property
    def symbol(self):
        return self._symbol

    @property
    def data_names(self):
        return self._data_names

    @property
    def label_names(self):
        return self._label_names

    @property
    def output_names(self):
        return self._symbol.list_outputs()

    @property
    def data_shapes(self):
        return self._data_shapes

    @property
    def label_shapes(self):
        return self._label_shapes

    @property
    def output_shapes(self):
        return [(n, o.shape) for n, o in zip(self.output_names, self._exec.outputs)]

    # ------------------------------------------------------------ setup
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False, force_rebind=False,
             shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        self._data_shapes = _shapes(data_shapes)
        self._label_shapes = _shapes(label_shapes) if label_shapes else []
        shapes = dict(self._data_shapes + self._label_shapes)
        req = {n: ("null" if n in self._data_names and not inputs_need_grad else
                   "null" if n in self._label_names or n in self._fixed or not for_training else grad_req)
               for n in self._symbol.list_arguments()}
        self._exec = self._symbol.simple_bind(self._context, grad_req=req, **shapes)
        self._batch = self._data_shapes[0][1][0] if self._data_shapes and self._data_shapes[0][1] else 0
        self.for_training = for_training
        self.binded = True
        if self.params_initialized:
            self._exec.copy_params_from(self._arg_params, self._aux_params)

    def init_params(self, initializer=None, arg_params=None, aux_params=None, allow_missing=False, force_init=False,
                    allow_extra=False):
        if self.params_initialized and not force_init:
            return
        if not self.binded:
            raise MXNetError("Module: call bind() before init_params()")
        initializer = init_mod.create(initializer) if initializer is not None else init_mod.Uniform(0.01)
        for name in self._param_names:
            arr = self._exec.arg_dict[name]
            if arg_params and name in arg_params:
                arg_params[name].copyto(arr) if arg_params[name].shape == arr.shape else arr._sync_copyfrom(
                    arg_params[name].asnumpy())
            elif arg_params and not allow_missing:
                raise MXNetError("init_params: '%s' is missing from arg_params" % name)
            else:
                initializer(name, arr)
        for name in self._aux_names:
            arr = self._exec.aux_dict[name]
            if aux_params and name in aux_params:
                aux_params[name].copyto(arr)
            elif aux_params and not allow_missing:
                raise MXNetError("init_params: '%s' is missing from aux_params" % name)
            else:
                initializer(name, arr)
        self._arg_params = {n: self._exec.arg_dict[n] for n in self._param_names}
        self._aux_params = {n: self._exec.aux_dict[n] for n in self._aux_names}
        self.params_initialized = True

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True, allow_extra=False):
        self.init_params(None, arg_params, aux_params, allow_missing, force_init, allow_extra)

    def get_params(self):
        if not self.params_initialized:
            raise MXNetError("Module: parameters are not initialized")
        return ({n: a.copy() for n, a in self._arg_params.items()},
                {n: a.copy() for n, a in self._aux_params.items()})

    def init_optimizer(self, kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
                       force_init=False):
        if self.optimizer_initialized and not force_init:
            return
        if not (self.binded and self.params_initialized):
            raise MXNetError("Module: bind and init_params before init_optimizer")
        kv = None
        if isinstance(kvstore, kvs_mod.KVStore):
            kv = kvstore
        elif isinstance(kvstore, str) and kvstore.startswith("dist"):
            kv = kvs_mod.create(kvstore)
        elif kvstore not in (None, "local", "device"):
            raise MXNetError("Module: kvstore %r: expected local, device, a dist_* type or a KVStore" % (kvstore,))
        if kv is not None and not kv.type.startswith("dist"):
            kv = None  # a local store of one context sums nothing
        on_servers = kv is not None and kv.updates_on_servers
        params = dict(optimizer_params)
        if isinstance(optimizer, str):
            workers = kv.num_workers if kv is not None and not on_servers else 1
            params.setdefault("rescale_grad", 1.0 / max(self._batch * workers, 1))
            idx2name = dict(enumerate(self._param_names))
            optimizer = opt_mod.create(optimizer, param_idx2name=idx2name, **params)
        else:
            optimizer.set_param_names(dict(enumerate(self._param_names)))
        self._optimizer = optimizer
        if kv is not None:
            names = [n for n in self._param_names if n not in self._fixed]
            arrays = [self._exec.arg_dict[n] for n in names]
            kv.init(names, arrays)
            kv.pull(names, out=arrays)
            if on_servers:
                kv.set_optimizer(optimizer)
        self._kv = kv
        self._kv_on_servers = on_servers
        self.optimizer_initialized = True

    # ------------------------------------------------------------ steps
    def _feed(self, data_batch):
        data = data_batch.data
        bs = data[0].shape[0]
        if bs != self._batch:
            shapes = {n: (bs,) + tuple(s[1:]) for n, s in self._data_shapes + self._label_shapes}
            self._exec.reshape(**shapes)
            self._batch = bs
        for name, arr in zip(self._data_names, data):
            arr.copyto(self._exec.arg_dict[name])
        if data_batch.label and self._label_names:
            for name, arr in zip(self._label_names, data_batch.label):
                dst = self._exec.arg_dict[name]
                if arr.shape == dst.shape and arr.dtype == dst.dtype:
                    arr.copyto(dst)
                else:
                    dst._sync_copyfrom(arr.asnumpy().reshape(dst.shape))

    def forward(self, data_batch, is_train=None):
        if is_train is None:
            is_train = self.for_training
        self._feed(data_batch)
        self._exec.forward(is_train=is_train)

    def backward(self, out_grads=None):
        self._exec.backward(out_grads)

    def forward_backward(self, data_batch):
        self.forward(data_batch, is_train=True)
        self.backward()

    def update(self):
        if not self.optimizer_initialized:
            raise MXNetError("Module: call init_optimizer() before update()")
        grads = self._exec.grad_dict
        kv = self._kv
        for i, name in enumerate(self._param_names):
            g = grads.get(name)
            if g is None or (kv is not None and name in self._fixed):
                continue
            if kv is None:
                self._optimizer.update(i, self._exec.arg_dict[name], g, name=name)
            elif self._kv_on_servers:  # dist_async: the servers update
                kv.push(name, g, priority=-i)
                kv.pull(name, out=self._exec.arg_dict[name], priority=-i)
            else:  # dist_sync: the sum over workers, then this worker's update
                kv.pushpull(name, g, priority=-i)
                self._optimizer.update(i, self._exec.arg_dict[name], g, name=name)

    def get_outputs(self, merge_multi_context=True):
        return self._exec.outputs

    def get_input_grads(self, merge_multi_context=True):
        return [self._exec.grad_dict.get(n) for n in self._data_names]

    def update_metric(self, eval_metric, labels, pre_sliced=False, pad=0):
        eval_metric.update(labels, self._exec.outputs[:len(labels)], pad)

    # ------------------------------------------------------------ loops
    def fit(self, train_data, eval_data=None, eval_metric="acc", epoch_end_callback=None, batch_end_callback=None,
            kvstore="local", optimizer="sgd", optimizer_params=(("learning_rate", 0.01),),
            eval_end_callback=None, eval_batch_end_callback=None, initializer=None, arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False, begin_epoch=0,
            num_epoch=None, validation_metric=None, monitor=None):
        if num_epoch is None:
            raise MXNetError("fit: num_epoch is required")
        self.bind(train_data.provide_data, train_data.provide_label, for_training=True, force_rebind=force_rebind)
        self.init_params(initializer, arg_params, aux_params, allow_missing, force_init)
        self.init_optimizer(kvstore, optimizer, optimizer_params)
        eval_metric = metric_mod.create(eval_metric)
        validation_metric = metric_mod.create(validation_metric) if validation_metric else eval_metric
        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            for batch in train_data:
                self.forward_backward(batch)
                self.update()
                eval_metric.update(batch.label, self._exec.outputs[:len(batch.label)], batch.pad)
                nbatch += 1
                for cb in _as_list(batch_end_callback):
                    cb(BatchEndParam(epoch, nbatch, eval_metric, locals()))
            for name, val in eval_metric.get_name_value():
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg, aux = self.get_params()
            for cb in _as_list(epoch_end_callback):
                cb(epoch, self._symbol, arg, aux)
            if eval_data is not None:
                for name, val in self.score(eval_data, validation_metric):
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    def iter_predict(self, eval_data, num_batch=None, reset=True):
        if reset:
            eval_data.reset()
        for n, batch in enumerate(eval_data):
            if num_batch is not None and n == num_batch:
                break
            self.forward(batch, is_train=False)
            yield self._exec.outputs, n, batch

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None, score_end_callback=None,
              reset=True, epoch=0):
        if not (self.binded and self.params_initialized):
            raise MXNetError("score: bind and initialize (or fit) the module first")
        eval_metric = metric_mod.create(eval_metric)
        eval_metric.reset()
        for outs, n, batch in self.iter_predict(eval_data, num_batch, reset):
            eval_metric.update(batch.label, outs[:len(batch.label)], batch.pad)
        return eval_metric.get_name_value()

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True, always_output_list=False):
        if not (self.binded and self.params_initialized):
            raise MXNetError("predict: bind and initialize (or fit) the module first")
        parts = []
        for outs, n, batch in self.iter_predict(eval_data, num_batch, reset):
            keep = outs[0].shape[0] - batch.pad
            parts.append([o.asnumpy()[:keep] for o in outs])
        if not merge_batches:
            return [[nd.array(p) for p in ps] for ps in parts]
        if not parts:
            return []
        merged = [nd.array(np.concatenate([ps[i] for ps in parts])) for i in range(len(parts[0]))]
        return merged[0] if len(merged) == 1 and not always_output_list else merged

    # ------------------------------------------------------------ checkpoints
    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        arg, aux = self.get_params()
        model_mod.save_checkpoint(prefix, epoch, self._symbol, arg, aux, remove_amp_cast=remove_amp_cast)
        if save_optimizer_states:
            self.save_optimizer_states("%s-%04d.states" % (prefix, epoch))

    def save_optimizer_states(self, fname):
        self._optimizer.save_states(fname)

    def load_optimizer_states(self, fname):
        self._optimizer.load_states(fname)

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, **kwargs):
        sym, arg, aux = model_mod.load_checkpoint(prefix, epoch)
        mod = Module(sym, **kwargs)
        orig_bind = mod.bind

        def bind_then_set(*a, **kw):
            orig_bind(*a, **kw)
            if not mod.params_initialized:
                mod.init_params(None, arg, aux, allow_missing=False)
        mod.bind = bind_then_set
        if load_optimizer_states:
            orig_init_opt = mod.init_optimizer

            def init_opt_then_load(*a, **kw):
                orig_init_opt(*a, **kw)
                mod.load_optimizer_states("%s-%04d.states" % (prefix, epoch))
            mod.init_optimizer = init_opt_then_load
        return mod


def _as_list(x):
    if x is None:
        return []
    return x if isinstance(x, (list, tuple)) else [x]
