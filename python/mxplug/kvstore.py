"""kvstore — mx.kv: create(type) and KVStore (init / push / pull / pushpull /
barrier / set_optimizer) over the runtime's KVStore front end
(<mxplug/kvstore.h>).

dist_async: on a server rank (the last MXP_KV_NUM_SERVERS ranks of the
mpirun job) create() serves until every worker has finished and then ends
the process, as MXNet's server processes do; workers get a KVStore.

Keys are ints or strings (one call uses one kind); a list of arrays for
one key is summed, as MXNet's per-device lists.  When the loaded
libmxplug has no KVStore (an older build), create() raises MXNetError
saying so; nothing else in the package depends on it.
"""
import ctypes

from . import _lib
from ._lib import lib
from .base import MXNetError, c_handle_array, c_str, c_str_array, check, py_str
from .ndarray import NDArray


def _flatten(keys, vals):
    if not isinstance(keys, (list, tuple)):
        keys, vals = [keys], [vals]
    ks, vs = [], []
    for k, v in zip(keys, vals):
        for a in (v if isinstance(v, (list, tuple)) else [v]):
            if not isinstance(a, NDArray):
                raise TypeError("kvstore: values must be NDArrays, got %s" % type(a).__name__)
            ks.append(k)
            vs.append(a)
    if ks and len({isinstance(k, str) for k in ks}) > 1:
        raise MXNetError("kvstore: one call takes int keys or string keys, not both")
    return ks, vs


class KVStore:
    def __init__(self, handle):
        self._h = handle

    def __del__(self):
        h = getattr(self, "_h", None)
        if h and lib is not None:
            self._h = None
            lib.mxp_kvstore_free(h)

    @property
    def type(self):
        return py_str(lib.mxp_kvstore_type(self._h))

    @property
    def rank(self):
        return lib.mxp_kvstore_rank(self._h)

    @property
    def num_workers(self):
        return lib.mxp_kvstore_num_workers(self._h)

    def _call(self, fn_int, fn_str, keys, vals, *extra):
        ks, vs = _flatten(keys, vals)
        if not ks:
            return
        h = c_handle_array([v.handle for v in vs])
        if isinstance(ks[0], str):
            check(fn_str(self._h, len(ks), c_str_array(ks), h, *extra))
        else:
            arr = (ctypes.c_int64 * len(ks))(*[int(k) for k in ks])
            check(fn_int(self._h, len(ks), arr, h, *extra))

    def init(self, key, value):
        self._call(lib.mxp_kvstore_init, lib.mxp_kvstore_init_str, key, value)

    def push(self, key, value, priority=0):
        self._call(lib.mxp_kvstore_push, lib.mxp_kvstore_push_str, key, value, int(priority))

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        if out is None:
            raise MXNetError("pull: out is required")
        self._call(lib.mxp_kvstore_pull, lib.mxp_kvstore_pull_str, key, out, int(priority))

    def pushpull(self, key, value, out=None, priority=0):
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    @property
    def updates_on_servers(self):
        """True when the servers run the optimizer (dist_async): push
        gradients, pull weights."""
        return bool(_lib.has("mxp_kvstore_updates_on_servers") and lib.mxp_kvstore_updates_on_servers(self._h))

    def set_optimizer(self, optimizer):
        keys = list(optimizer.kwargs)
        vals = [repr(float(optimizer.kwargs[k])) for k in keys]
        check(lib.mxp_kvstore_set_optimizer(self._h, c_str(optimizer._type), len(keys), c_str_array(keys),
                                            c_str_array(vals)))

    def save_optimizer_states(self, fname, dump_optimizer=False):
        check(lib.mxp_kvstore_save_optimizer_states(self._h, c_str(fname)))

    def load_optimizer_states(self, fname):
        check(lib.mxp_kvstore_load_optimizer_states(self._h, c_str(fname)))

    def barrier(self):
        check(lib.mxp_kvstore_barrier(self._h))

    _barrier = barrier


def create(name="local"):
    if not _lib.has("mxp_kvstore_create"):
        raise MXNetError("mx.kv.create: this libmxplug (%s) has no KVStore front end" % _lib.path)
    out = ctypes.c_void_p()
    check(lib.mxp_kvstore_create(c_str(name), 0, None, None, ctypes.byref(out)))
    if _lib.has("mxp_kvstore_is_server") and lib.mxp_kvstore_is_server(out.value):
        import os
        import sys
        rc = lib.mxp_kvstore_run_server(out.value)
        if rc:
            sys.stderr.write("mx.kv: %s server: %s\n" % (name, py_str(lib.mxp_last_error())))
            sys.stderr.flush()
            os._exit(1)  # freeing the store would wait for the workers
        lib.mxp_kvstore_free(out.value)
        sys.exit(0)
    return KVStore(out.value)
