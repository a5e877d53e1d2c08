"""_lib — finds libmxplug.so and declares every C function the package calls.

This is the only module that knows the C API's names and signatures, so a
rename in runtime/include/mxplug/*.h is a change here alone.  It does not
wrap errors (base.py does) and holds no Python objects.

Discovery order: $MXPLUG_LIBRARY (a path to the .so), a libmxplug.so next to
the package (a wheel or copied build), the build tree of a source checkout
(../../build*/lib from this file, newest first, sanitizer builds skipped),
the library `make install` installed with the package (_installed.py), then
dlopen's search path (ldconfig, LD_LIBRARY_PATH).  Optional parts of the API (autograd,
kvstore) are declared only when the library exports them; `has(name)` says.
"""
import ctypes
import os
from ctypes import (POINTER, c_char, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_uint16, c_uint32,
                    c_uint64, c_void_p, Structure, CFUNCTYPE, sizeof)

MAX_NDIM = 8


class Device(Structure):
    _fields_ = [("type", c_int32), ("id", c_int32)]


class Shape(Structure):
    _fields_ = [("ndim", c_int32), ("reserved", c_int32), ("dims", c_int64 * MAX_NDIM)]


class _Sized(Structure):
    """A versioned value struct of the C API: struct_size first, set to
    this layout's size (mxplug/base.h)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.struct_size = sizeof(self)


class InvokeOpts(_Sized):
    _fields_ = [("struct_size", c_uint32), ("is_train", c_int), ("req", POINTER(c_int)), ("has_device", c_int), ("device", Device),
                ("n_aux", c_int), ("aux", POINTER(c_void_p))]


class StorageStats(_Sized):
    _fields_ = [("struct_size", c_uint32)] + [(n, c_uint64) for n in ("bytes_in_use", "bytes_pooled", "bytes_peak", "bytes_limit",
                                        "n_hits", "n_misses", "n_releases", "n_failures")]


class Init(_Sized):
    _fields_ = [("struct_size", c_uint32), ("kind", c_int), ("value", c_double), ("scale", c_double), ("sigma", c_double),
                ("rnd_type", c_int), ("factor_type", c_int), ("magnitude", c_double)]


def _candidates():
    env = os.environ.get("MXPLUG_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libmxplug.so")
    root = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(root, "runtime", "include", "mxplug.h")):
        builds = []
        for d in sorted(os.listdir(root)):
            p = os.path.join(root, d, "lib", "libmxplug.so")
            if d.startswith("build") and "san" not in d and os.path.isfile(p):
                builds.append((os.path.getmtime(p), p))
        for _, p in sorted(builds, reverse=True):
            yield p
    try:  # written by `make install`: the library installed with this package
        from ._installed import LIBDIR
        yield os.path.join(LIBDIR, "libmxplug.so")
    except ImportError:
        pass
    yield "libmxplug.so"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("mxplug: cannot load libmxplug.so (set MXPLUG_LIBRARY to its path); tried: "
                      + "; ".join(errors))


lib, path = _load()

_HP = c_void_p            # an opaque handle
_PHP = POINTER(c_void_p)  # a handle out-parameter or an array of handles
_PSTR = POINTER(c_char_p)
_PI64 = POINTER(c_int64)
_PINT = POINTER(c_int)

LOG_SINK = CFUNCTYPE(None, c_int, c_char_p, c_char_p, c_void_p)
BATCH_CB = CFUNCTYPE(None, c_void_p, c_int, c_int64, c_char_p, c_double)
EPOCH_CB = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_double, c_double)
MONITOR_CB = CFUNCTYPE(None, c_char_p, c_void_p, c_void_p)

# name: (restype, argtypes).  Optional entries (missing in the library) are skipped.
_DECLS = {
    # base
    "mxp_last_error": (c_char_p, []),
    "mxp_status_name": (c_char_p, [c_int]),
    "mxp_version": (c_char_p, []),
    "mxp_dtype_name": (c_char_p, [c_int]),
    "mxp_dtype_from_name": (c_int, [c_char_p, _PINT]),
    "mxp_log_set_level": (c_int, [c_char_p]),
    # engine
    "mxp_engine_wait_for_all": (c_int, []),
    "mxp_num_threads": (c_int, []),
    # registry
    "mxp_registry_init": (c_int, []),
    "mxp_registry_generation": (c_uint64, []),
    "mxp_registry_add_manifest": (c_int, [c_char_p]),
    "mxp_device_count": (c_int, [c_char_p, _PINT]),
    "mxp_device_check": (c_int, [Device]),
    "mxp_pack_count": (c_int, []),
    "mxp_pack_at": (_HP, [c_int]),
    "mxp_pack_find": (_HP, [c_char_p]),
    "mxp_pack_name": (c_char_p, [_HP]),
    "mxp_pack_state": (c_int, [_HP, _PSTR]),
    "mxp_pack_load": (c_int, [c_char_p]),
    "mxp_pack_manifest_gen": (c_int, [c_char_p, POINTER(c_void_p)]),
    "mxp_op_count": (c_int, []),
    "mxp_op_at": (_HP, [c_int]),
    "mxp_op_find": (_HP, [c_char_p]),
    "mxp_op_name": (c_char_p, [_HP]),
    "mxp_op_pack": (c_char_p, [_HP]),
    "mxp_op_alias_count": (c_int, [_HP]),
    "mxp_op_alias_at": (c_char_p, [_HP, c_int]),
    "mxp_op_doc": (c_char_p, [_HP]),
    "mxp_op_param_count": (c_int, [_HP]),
    "mxp_op_param_at": (c_int, [_HP, c_int, _PSTR, _PSTR, _PSTR, _PSTR, _PSTR, _PSTR]),
    "mxp_op_list_names": (c_int, [_HP, c_int, _PSTR, _PSTR, c_int, POINTER(c_char * 64), c_int, _PINT]),
    # storage, random
    "mxp_storage_stats_get": (c_int, [Device, POINTER(StorageStats)]),
    "mxp_storage_release_all": (c_int, [Device]),
    "mxp_random_seed": (None, [c_uint64]),
    "mxp_random_seed_device": (c_int, [Device, c_uint64]),
    # ndarray
    "mxp_ndarray_create": (c_int, [_PI64, c_int, c_int, Device, _PHP]),
    "mxp_ndarray_create_none": (c_int, [_PHP]),
    "mxp_ndarray_retain": (_HP, [_HP]),
    "mxp_ndarray_release": (None, [_HP]),
    "mxp_ndarray_is_none": (c_int, [_HP]),
    "mxp_ndarray_ndim": (c_int, [_HP]),
    "mxp_ndarray_shape": (_PI64, [_HP]),
    "mxp_ndarray_dtype": (c_int, [_HP]),
    "mxp_ndarray_device": (Device, [_HP]),
    "mxp_ndarray_size": (c_int64, [_HP]),
    "mxp_ndarray_nbytes": (c_size_t, [_HP]),
    "mxp_ndarray_version": (c_uint64, [_HP]),
    "mxp_ndarray_reshape": (c_int, [_HP, _PI64, c_int, _PHP]),
    "mxp_ndarray_slice": (c_int, [_HP, c_int64, c_int64, _PHP]),
    "mxp_ndarray_at": (c_int, [_HP, c_int64, _PHP]),
    "mxp_ndarray_fill": (c_int, [_HP, c_double]),
    "mxp_ndarray_copy": (c_int, [_HP, _HP]),
    "mxp_ndarray_sync_copy_from": (c_int, [_HP, c_void_p, c_size_t]),
    "mxp_ndarray_sync_copy_to": (c_int, [_HP, c_void_p, c_size_t]),
    "mxp_ndarray_wait_to_read": (c_int, [_HP]),
    "mxp_ndarray_wait_to_write": (c_int, [_HP]),
    "mxp_ndarray_save": (c_int, [c_char_p, c_int, _PHP, _PSTR]),
    "mxp_ndarray_load": (c_int, [c_char_p, _PINT, POINTER(_PHP), POINTER(_PSTR)]),
    "mxp_ndarray_list_free": (None, [c_int, _PHP, _PSTR]),
    # invoke
    "mxp_invoke_ex": (c_int, [c_char_p, c_int, _PHP, _PINT, _PHP, c_int, _PSTR, _PSTR, POINTER(InvokeOpts)]),
    # symbol
    "mxp_symbol_variable": (c_int, [c_char_p, _PHP]),
    "mxp_symbol_create": (c_int, [c_char_p, c_char_p, c_int, _PSTR, _PSTR, _PHP]),
    "mxp_symbol_compose": (c_int, [_HP, c_char_p, c_int, _PSTR, _PHP]),
    "mxp_symbol_group": (c_int, [c_int, _PHP, _PHP]),
    "mxp_symbol_internals": (c_int, [_HP, _PHP]),
    "mxp_symbol_output": (c_int, [_HP, c_int, _PHP]),
    "mxp_symbol_output_by_name": (c_int, [_HP, c_char_p, _PHP]),
    "mxp_symbol_copy": (c_int, [_HP, _PHP]),
    "mxp_symbol_amp_convert": (c_int, [_HP, c_int, c_int, _PSTR, _PHP]),
    "mxp_symbol_amp_remove_casts": (c_int, [_HP, _PHP]),
    "mxp_symbol_release": (None, [_HP]),
    "mxp_symbol_list_arguments": (c_int, [_HP, _PINT, POINTER(_PSTR)]),
    "mxp_symbol_list_outputs": (c_int, [_HP, _PINT, POINTER(_PSTR)]),
    "mxp_symbol_list_auxiliary_states": (c_int, [_HP, _PINT, POINTER(_PSTR)]),
    "mxp_symbol_num_outputs": (c_int, [_HP]),
    "mxp_symbol_name": (c_char_p, [_HP]),
    "mxp_symbol_set_attr": (c_int, [_HP, c_char_p, c_char_p]),
    "mxp_symbol_attr": (c_int, [_HP, c_char_p, _PSTR]),
    "mxp_symbol_save_json": (c_int, [_HP, POINTER(c_void_p)]),
    "mxp_symbol_save_file": (c_int, [_HP, c_char_p]),
    "mxp_symbol_load_json": (c_int, [c_char_p, _PHP]),
    "mxp_symbol_load_file": (c_int, [c_char_p, _PHP]),
    "mxp_symbol_infer_shape": (c_int, [_HP, c_int, _PSTR, POINTER(Shape), _PINT, POINTER(POINTER(Shape)), _PINT,
                                       POINTER(POINTER(Shape)), _PINT, POINTER(POINTER(Shape)), _PINT]),
    "mxp_symbol_infer_type": (c_int, [_HP, c_int, _PSTR, _PINT, _PINT, POINTER(_PINT), _PINT, POINTER(_PINT),
                                      _PINT, POINTER(_PINT), _PINT]),
    # executor
    "mxp_executor_bind": (c_int, [_HP, Device, c_int, _PHP, _PHP, _PINT, c_int, _PHP, _PHP]),
    "mxp_executor_simple_bind": (c_int, [_HP, Device, c_int, _PSTR, POINTER(Shape), c_int, c_int, _PSTR, _PHP]),
    "mxp_executor_forward": (c_int, [_HP, c_int]),
    "mxp_executor_backward": (c_int, [_HP, c_int, _PHP]),
    "mxp_executor_wait": (c_int, [_HP]),
    "mxp_executor_outputs": (c_int, [_HP, _PINT, POINTER(_PHP)]),
    "mxp_executor_args": (c_int, [_HP, _PINT, POINTER(_PHP)]),
    "mxp_executor_grads": (c_int, [_HP, _PINT, POINTER(_PHP)]),
    "mxp_executor_aux": (c_int, [_HP, _PINT, POINTER(_PHP)]),
    "mxp_executor_reshape": (c_int, [_HP, c_int, _PSTR, POINTER(Shape)]),
    "mxp_executor_set_monitor": (c_int, [_HP, MONITOR_CB, c_void_p]),
    "mxp_executor_free": (None, [_HP]),
    # io
    "mxp_iter_create": (c_int, [c_char_p, c_int, _PSTR, _PSTR, _PHP]),
    "mxp_iter_create_ndarray": (c_int, [c_int, _PHP, c_int, _PHP, c_int64, c_int, c_uint64, c_int, _PHP]),
    "mxp_iter_free": (None, [_HP]),
    "mxp_iter_num_data": (c_int, [_HP]),
    "mxp_iter_num_label": (c_int, [_HP]),
    "mxp_iter_provide_data": (c_int, [_HP, c_int, _PSTR, _PINT, POINTER(_PI64), _PINT]),
    "mxp_iter_provide_label": (c_int, [_HP, c_int, _PSTR, _PINT, POINTER(_PI64), _PINT]),
    "mxp_iter_batch_size": (c_int64, [_HP]),
    "mxp_iter_reset": (c_int, [_HP]),
    "mxp_iter_set_epoch": (c_int, [_HP, c_uint64]),
    "mxp_iter_epoch": (c_uint64, [_HP]),
    "mxp_iter_next": (c_int, [_HP, _PINT]),
    "mxp_iter_data": (_HP, [_HP, c_int]),
    "mxp_iter_label": (_HP, [_HP, c_int]),
    "mxp_iter_pad": (c_int, [_HP]),
    # train: initializers, schedules, optimizers, metrics, checkpoints
    "mxp_init_array": (c_int, [POINTER(Init), _HP]),
    "mxp_init_xavier_fans": (c_int, [_PI64, c_int, POINTER(c_double), POINTER(c_double)]),
    "mxp_lr_schedule_factor": (c_int, [c_int64, c_double, c_double, _PHP]),
    "mxp_lr_schedule_multi_factor": (c_int, [c_int, _PI64, c_double, _PHP]),
    "mxp_lr_schedule_lr": (c_double, [_HP, c_double, c_int64]),
    "mxp_lr_schedule_free": (None, [_HP]),
    "mxp_optimizer_create": (c_int, [c_char_p, c_int, _PSTR, _PSTR, _PHP]),
    "mxp_optimizer_free": (None, [_HP]),
    "mxp_optimizer_set_lr_schedule": (None, [_HP, _HP]),
    "mxp_optimizer_lr": (c_double, [_HP]),
    "mxp_optimizer_num_update": (c_int64, [_HP]),
    "mxp_optimizer_update": (c_int, [_HP, c_int, c_char_p, _HP, _HP]),
    "mxp_optimizer_save_states": (c_int, [_HP, c_char_p]),
    "mxp_optimizer_load_states": (c_int, [_HP, c_char_p]),
    "mxp_metric_create": (c_int, [c_char_p, c_int, _PSTR, _PSTR, _PHP]),
    "mxp_metric_free": (None, [_HP]),
    "mxp_metric_reset": (None, [_HP]),
    "mxp_metric_update": (c_int, [_HP, c_int, _PHP, _PHP, c_int]),
    "mxp_metric_get": (c_int, [_HP, _PSTR, POINTER(c_double)]),
    "mxp_metric_num_inst": (c_int64, [_HP]),
    # autograd (optional until it lands in the library)
    "mxp_autograd_set_recording": (c_int, [c_int, _PINT]),
    "mxp_autograd_set_training": (c_int, [c_int, _PINT]),
    "mxp_autograd_is_recording": (c_int, []),
    "mxp_autograd_is_training": (c_int, []),
    "mxp_autograd_mark_variables": (c_int, [c_int, _PHP, _PINT, _PHP]),
    "mxp_autograd_backward": (c_int, [c_int, _PHP, _PHP, c_int]),
    "mxp_autograd_unmark": (c_int, [_HP]),
    "mxp_autograd_clear_variables": (None, []),
    "mxp_autograd_grad": (c_int, [_HP, _PHP]),
    "mxp_autograd_record_executor": (c_int, [_HP, c_int, _PHP, c_int, _PHP]),
    "mxp_autograd_clear": (None, []),
    "mxp_autograd_tape_size": (c_int, []),
    # kvstore (optional: the front end may not be in this library)
    "mxp_kvstore_create": (c_int, [c_char_p, c_int, _PSTR, _PSTR, _PHP]),
    "mxp_kvstore_free": (None, [_HP]),
    "mxp_kvstore_type": (c_char_p, [_HP]),
    "mxp_kvstore_rank": (c_int, [_HP]),
    "mxp_kvstore_num_workers": (c_int, [_HP]),
    "mxp_kvstore_init": (c_int, [_HP, c_int, _PI64, _PHP]),
    "mxp_kvstore_init_str": (c_int, [_HP, c_int, _PSTR, _PHP]),
    "mxp_kvstore_push": (c_int, [_HP, c_int, _PI64, _PHP, c_int]),
    "mxp_kvstore_push_str": (c_int, [_HP, c_int, _PSTR, _PHP, c_int]),
    "mxp_kvstore_pull": (c_int, [_HP, c_int, _PI64, _PHP, c_int]),
    "mxp_kvstore_pull_str": (c_int, [_HP, c_int, _PSTR, _PHP, c_int]),
    "mxp_kvstore_set_optimizer": (c_int, [_HP, c_char_p, c_int, _PSTR, _PSTR]),
    "mxp_kvstore_save_optimizer_states": (c_int, [_HP, c_char_p]),
    "mxp_kvstore_load_optimizer_states": (c_int, [_HP, c_char_p]),
    "mxp_kvstore_barrier": (c_int, [_HP]),
    "mxp_kvstore_is_server": (c_int, [_HP]),
    "mxp_kvstore_updates_on_servers": (c_int, [_HP]),
    "mxp_kvstore_run_server": (c_int, [_HP]),
}

_OPTIONAL_PREFIXES = ("mxp_autograd_", "mxp_kvstore_")
_present = set()

for _name, (_res, _args) in _DECLS.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        if _name.startswith(_OPTIONAL_PREFIXES):
            continue
        raise ImportError("mxplug: %s does not export %s (library and package versions differ)" % (path, _name))
    _f.restype = _res
    _f.argtypes = _args
    _present.add(_name)

# free() for strings the C API allocates (mxp_symbol_save_json).
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None
c_free = _libc.free
if hasattr(lib, "mxp_free"):  # the runtime's own free for strings it returns, once it has one
    lib.mxp_free.argtypes = [c_void_p]
    lib.mxp_free.restype = None
    c_free = lib.mxp_free


def raw(name, restype=c_int):
    """A second foreign-function object for C function `name`, without
    argtypes: ctypes then converts nothing per argument, which saves about
    0.1 us per argument on the hot paths (mxp_invoke_ex).  Callers pass only
    ctypes objects (arrays, byref, c_void_p), bytes, small ints and None."""
    f = lib[name]  # a new object each time: lib.<name> keeps its argtypes
    f.restype = restype
    return f


def has(name):
    """True when the loaded library exports the C function `name`."""
    return name in _present


def fast_module():
    """The optional C extension _mxplug_fast (python/fast/mxplug_fast.c), or
    None: looked for next to the loaded libmxplug.so (a build tree's lib/)
    and in this package (make install copies it there).  MXPLUG_NO_FAST=1
    skips it (the package then runs its pure ctypes path)."""
    if os.environ.get("MXPLUG_NO_FAST", "") not in ("", "0"):
        return None
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.path.dirname(os.path.abspath(path)), here):
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            p = os.path.join(d, "_mxplug_fast" + suffix)
            if not os.path.isfile(p):
                continue
            try:
                spec = importlib.util.spec_from_file_location("_mxplug_fast", p)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                return mod
            except ImportError:  # built for another Python: use the ctypes path
                continue
    return None


def address(name):
    """The address of C function `name` in the loaded library (0 if absent)."""
    try:
        return ctypes.cast(lib[name], c_void_p).value or 0
    except AttributeError:
        return 0
