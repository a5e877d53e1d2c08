"""metric — mx.metric: Accuracy, TopKAccuracy, CrossEntropy (the runtime's
mxp_metric, so values match the CLI's), CompositeEvalMetric, create().

update(labels, preds) takes lists of NDArrays (or numpy arrays) and waits
for them; get() gives (name, value) as MXNet.
"""
import ctypes

import numpy as np

from ._lib import lib
from .base import MXNetError, c_handle_array, c_str, c_str_array, check, py_str


class EvalMetric:
    def __init__(self, name):
        self.name = name

    def get_name_value(self):
        name, value = self.get()
        if isinstance(name, list):
            return list(zip(name, value))
        return [(name, value)]


class _CMetric(EvalMetric):
    def __init__(self, kind, name, **kwargs):
        super().__init__(name)
        keys = list(kwargs)
        vals = [str(kwargs[k]) for k in keys]
        out = ctypes.c_void_p()
        check(lib.mxp_metric_create(c_str(kind), len(keys), c_str_array(keys), c_str_array(vals),
                                    ctypes.byref(out)))
        self._h = out.value

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_metric_free(h)

    def update(self, labels, preds, pad=0):
        from .ndarray import NDArray, array
        if not isinstance(labels, (list, tuple)):
            labels = [labels]
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
        if len(labels) != len(preds):
            raise MXNetError("metric %s: %d labels but %d predictions" % (self.name, len(labels), len(preds)))
        labels = [x if isinstance(x, NDArray) else array(np.asarray(x, np.float32)) for x in labels]
        preds = [x if isinstance(x, NDArray) else array(np.asarray(x, np.float32)) for x in preds]
        check(lib.mxp_metric_update(self._h, len(labels), c_handle_array([x.handle for x in labels]),
                                    c_handle_array([x.handle for x in preds]), int(pad)))

    def reset(self):
        lib.mxp_metric_reset(self._h)

    def get(self):
        name = ctypes.c_char_p()
        value = ctypes.c_double()
        check(lib.mxp_metric_get(self._h, ctypes.byref(name), ctypes.byref(value)))
        return py_str(name.value), value.value

    @property
    def num_inst(self):
        return lib.mxp_metric_num_inst(self._h)


class Accuracy(_CMetric):
    def __init__(self, axis=1, name="accuracy"):
        if axis != 1:
            raise MXNetError("Accuracy: only axis=1 is implemented")
        super().__init__("acc", name)


class TopKAccuracy(_CMetric):
    def __init__(self, top_k=1, name="top_k_accuracy"):
        super().__init__("top_k_accuracy", name, top_k=int(top_k))


class CrossEntropy(_CMetric):
    def __init__(self, eps=1e-12, name="cross-entropy"):
        super().__init__("ce", name, eps=repr(float(eps)))


class CompositeEvalMetric(EvalMetric):
    def __init__(self, metrics=None, name="composite"):
        super().__init__(name)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric):
        self.metrics.append(create(metric))

    def update(self, labels, preds, pad=0):
        for m in self.metrics:
            m.update(labels, preds, pad)

    def reset(self):
        for m in self.metrics:
            m.reset()

    def get(self):
        names, values = [], []
        for m in self.metrics:
            n, v = m.get()
            names.append(n)
            values.append(v)
        return names, values


_NAMES = {"acc": Accuracy, "accuracy": Accuracy, "top_k_accuracy": TopKAccuracy, "top_k_acc": TopKAccuracy,
          "ce": CrossEntropy, "cross-entropy": CrossEntropy}


def create(metric, *args, **kwargs):
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric(list(metric))
    try:
        cls = _NAMES[str(metric).lower()]
    except KeyError:
        raise MXNetError("unknown metric %r (known: %s)" % (metric, ", ".join(sorted(_NAMES)))) from None
    return cls(*args, **kwargs)
