"""context — devices as MXNet names them: mx.cpu(i), mx.gpu(i), Context.

A Context is a (device_type, device_id) pair mapped onto the runtime's
mxp_device numbers (cpu 1, gpu 2, cpu_pinned 3, cpu_shared 5, as MXNet's).
It checks nothing about the device's existence: using a gpu context without a
gpu pack fails in the runtime with its message.
"""
from . import _lib

_TYPES = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}
_NAMES = {v: k for k, v in _TYPES.items()}


class Context:
    default_ctx = None

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in _TYPES:
            raise ValueError("unknown device type %r (cpu, gpu, cpu_pinned, cpu_shared)" % (device_type,))
        if int(device_id) < 0:
            raise ValueError("device id must be >= 0, got %r" % (device_id,))
        self.device_type = device_type
        self.device_id = int(device_id)

    @property
    def device_typeid(self):
        return _TYPES[self.device_type]

    def _device(self):
        return _lib.Device(_TYPES[self.device_type], self.device_id)

    @staticmethod
    def _from_device(dev):
        return Context(_NAMES.get(dev.type, "cpu"), dev.id)

    def __eq__(self, other):
        return isinstance(other, Context) and (self.device_type, self.device_id) == (other.device_type,
                                                                                      other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __repr__(self):
        return "%s(%d)" % (self.device_type, self.device_id)

    __str__ = __repr__

    def __enter__(self):
        self._old = Context.default_ctx
        Context.default_ctx = self
        return self

    def __exit__(self, *exc):
        Context.default_ctx = self._old


def cpu(device_id=0):
    return Context("cpu", device_id)


def gpu(device_id=0):
    return Context("gpu", device_id)


def cpu_pinned(device_id=0):
    return Context("cpu_pinned", device_id)


def current_context():
    return Context.default_ctx


def num_gpus():
    """Number of GPUs (MXNet's mx.context.num_gpus()): 0 on a machine without
    a GPU or driver, or when no pack provides the gpu device."""
    from ._lib import lib
    import ctypes
    n = ctypes.c_int(0)
    if lib.mxp_device_count(b"gpu", ctypes.byref(n)) != 0:
        return 0
    return n.value


Context.default_ctx = Context("cpu", 0)
