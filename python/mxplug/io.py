"""io — mx.io: DataBatch, DataDesc, DataIter, NDArrayIter over numpy arrays,
and every iterator a pack registers (MNISTIter, ...) by name.

Both kinds wrap an mxp_iter.  A batch's arrays are the iterator's buffers,
valid until the next call to next()/reset() (as MXNet's C++ iterators):
copy what you keep.  A registered iterator is created by its name as a
class-like factory: mx.io.MNISTIter(image=..., batch_size=...); names not
known at import are looked up in the runtime on first access (a name the
runtime does not have raises AttributeError when called, naming it).
"""
import ctypes
import sys
from collections import namedtuple

import numpy as np

from ._lib import lib
from .base import MXNetError, c_handle_array, c_str, c_str_array, check, dtype_np, param_str, py_str
from .ndarray import NDArray, _wrap_borrowed, array as nd_array


class DataDesc(namedtuple("DataDesc", ["name", "shape", "dtype", "layout"])):
    def __new__(cls, name, shape, dtype=np.float32, layout="NCHW"):
        return super().__new__(cls, name, tuple(shape), dtype, layout)


class DataBatch:
    def __init__(self, data, label=None, pad=0, index=None, provide_data=None, provide_label=None):
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __repr__(self):
        return "DataBatch: data shapes: %s label shapes: %s pad: %d" % (
            [d.shape for d in self.data], [lb.shape for lb in (self.label or [])], self.pad)


class DataIter:
    """Base class: iterate with `for batch in it`, then `it.reset()`."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def reset(self):
        pass

    def next(self):
        raise StopIteration


class _CIter(DataIter):
    """A DataIter over an mxp_iter handle."""

    def __init__(self, handle, data_names=None, label_names=None):
        self._h = handle
        super().__init__(lib.mxp_iter_batch_size(handle))
        self._data_names = data_names
        self._label_names = label_names
        self.provide_data = self._descs(lib.mxp_iter_num_data(handle), lib.mxp_iter_provide_data, data_names)
        self.provide_label = self._descs(lib.mxp_iter_num_label(handle), lib.mxp_iter_provide_label, label_names)
        self._started = False

    def _descs(self, n, fn, names):
        out = []
        for i in range(n):
            name = ctypes.c_char_p()
            ndim = ctypes.c_int()
            shape = ctypes.POINTER(ctypes.c_int64)()
            dt = ctypes.c_int()
            check(fn(self._h, i, ctypes.byref(name), ctypes.byref(ndim), ctypes.byref(shape), ctypes.byref(dt)))
            nm = names[i] if names and i < len(names) else py_str(name.value)
            out.append(DataDesc(nm, tuple(shape[j] for j in range(ndim.value)), dtype_np(dt.value).type))
        return out

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_iter_free(h)

    @property
    def handle(self):
        return self._h

    def reset(self):
        check(lib.mxp_iter_reset(self._h))

    def iter_next(self):
        has = ctypes.c_int()
        check(lib.mxp_iter_next(self._h, ctypes.byref(has)))
        return bool(has.value)

    def getdata(self):
        return [_wrap_borrowed(lib.mxp_iter_data(self._h, i)) for i in range(len(self.provide_data))]

    def getlabel(self):
        return [_wrap_borrowed(lib.mxp_iter_label(self._h, i)) for i in range(len(self.provide_label))]

    def getpad(self):
        return lib.mxp_iter_pad(self._h)

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return DataBatch(self.getdata(), self.getlabel(), self.getpad(), None, self.provide_data,
                         self.provide_label)

    @property
    def epoch(self):
        return lib.mxp_iter_epoch(self._h)

    def set_epoch(self, epoch):
        check(lib.mxp_iter_set_epoch(self._h, int(epoch)))


_LAST_BATCH = {"pad": 0, "discard": 1, "roll_over": 2}


def _as_arrays(x, default_name):
    if x is None:
        return [], []
    if isinstance(x, dict):
        names = list(x.keys())
        vals = [x[k] for k in names]
    elif isinstance(x, (list, tuple)):
        vals = list(x)
        names = [default_name] if len(vals) == 1 else ["_%d_%s" % (i, default_name) for i in range(len(vals))]
    else:
        vals = [x]
        names = [default_name]
    arrs = [v if isinstance(v, NDArray) else nd_array(np.asarray(v)) for v in vals]
    return names, arrs


class NDArrayIter(_CIter):
    """Batches over arrays in memory (numpy arrays, NDArrays, lists or dicts of them)."""

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad", data_name="data",
                 label_name="softmax_label", seed=0):
        dn, da = _as_arrays(data, data_name)
        ln, la = _as_arrays(label, label_name)
        if not da:
            raise MXNetError("NDArrayIter: no data")
        if last_batch_handle not in _LAST_BATCH:
            raise MXNetError("NDArrayIter: last_batch_handle must be pad, discard or roll_over, got %r"
                             % (last_batch_handle,))
        self._keep = da + la
        out = ctypes.c_void_p()
        check(lib.mxp_iter_create_ndarray(len(da), c_handle_array([a.handle for a in da]), len(la),
                                          c_handle_array([a.handle for a in la]), int(batch_size),
                                          1 if shuffle else 0, int(seed), _LAST_BATCH[last_batch_handle],
                                          ctypes.byref(out)))
        super().__init__(out.value, dn, ln)
        self.num_data = da[0].shape[0]


def create_iter(name, **kwargs):
    """A registered iterator by name with MXNet's kwargs."""
    keys = list(kwargs)
    vals = [param_str(kwargs[k]) for k in keys]
    out = ctypes.c_void_p()
    check(lib.mxp_iter_create(c_str(name), len(keys), c_str_array(keys), c_str_array(vals), ctypes.byref(out)))
    return _CIter(out.value)


def _factory(name):
    def make(**kwargs):
        return create_iter(name, **kwargs)
    make.__name__ = name
    make.__doc__ = "The registered iterator %s: mx.io.%s(**kwargs) with MXNet's kwargs." % (name, name)
    return make


MNISTIter = _factory("MNISTIter")
ImageRecordIter = _factory("ImageRecordIter")
CSVIter = _factory("CSVIter")


def __getattr__(name):
    if name.endswith("Iter") and name.isidentifier():
        fn = _factory(name)
        setattr(sys.modules[__name__], name, fn)
        return fn
    raise AttributeError("module 'mxplug.io' has no attribute '%s'" % name)
