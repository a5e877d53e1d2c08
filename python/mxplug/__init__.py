"""mxplug — MXNet 1.x's Python API over the mxplug runtime (libmxplug.so).

`import mxplug as mx` gives mx.nd, mx.sym, mx.mod, mx.io, mx.autograd,
mx.gluon, mx.init, mx.optimizer, mx.metric, mx.lr_scheduler, mx.callback,
mx.model, mx.random, mx.kv, mx.amp (also mx.contrib.amp) and contexts, as far as docs/python.md's table
says.  Ops are generated from the runtime's registry (mx.nd.<Op>,
mx.sym.<Op>).  Pure Python with ctypes; numpy is the only dependency.
"""
from . import _lib
from . import base
from .base import MXNetError
from .context import Context, cpu, gpu, cpu_pinned, current_context, num_gpus
from . import ndarray
from . import ndarray as nd
from . import symbol
from . import symbol as sym
from . import executor
from . import io
from . import random
from . import metric
from . import lr_scheduler
from . import optimizer
from . import initializer
from . import initializer as init
from . import callback
from . import model
from . import module
from . import module as mod
from . import registry
from . import autograd
from . import gluon
from . import kvstore
from . import kvstore as kv
from . import amp
from . import contrib

__version__ = _lib.lib.mxp_version().decode()
