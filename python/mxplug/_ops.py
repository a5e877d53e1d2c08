"""_ops — what the registry says about each op, for generating mx.nd.<Op> and
mx.sym.<Op>: names, aliases, parameter schema, docstrings, input names.

OpInfo is built from the public registry API (mxp_op_*), which loads an op's
defining pack to read its schema.  Input and aux names may depend on the
parameters (Concat's num_args), so `input_names(keys, vals)` asks the
registry with the call's kwargs, caching the parameter-free answer.  This
module makes no NDArrays or symbols; ndarray.py and symbol.py do.
"""
import ctypes

from . import _lib
from ._lib import lib
from .base import MXNetError, c_str, c_str_array, check, py_str

_NAMES_CAP = 256


class OpInfo:
    __slots__ = ("name", "bname", "handle", "pack", "params", "param_names", "doc", "_default_io",
                 "var_args_key", "_io_cache")

    def __init__(self, name, handle):
        self.name = name
        self.bname = c_str(name)
        self.handle = handle
        self.pack = py_str(lib.mxp_op_pack(handle)) or ""
        self.params = []
        self._default_io = None
        self._io_cache = {}
        n = lib.mxp_op_param_count(handle)
        desc = py_str(lib.mxp_op_doc(handle)) if n >= 0 else None
        if n < 0:
            err = py_str(lib.mxp_last_error())
            self.doc = "%s (pack %s): schema unavailable: %s" % (name, self.pack, err)
            n = 0
        for i in range(n):
            f = [ctypes.c_char_p() for _ in range(6)]
            if lib.mxp_op_param_at(handle, i, *[ctypes.byref(x) for x in f]) != 0:
                continue
            self.params.append(tuple(py_str(x.value) or "" for x in f))
        self.param_names = frozenset(p[0] for p in self.params)
        self.var_args_key = "num_args" if "num_args" in self.param_names else None
        if n or desc is not None:
            self.doc = self._make_doc(desc or "")

    def _make_doc(self, desc):
        lines = [desc.strip() or self.name, "", "Defined by pack '%s'." % self.pack, ""]
        ins = None
        try:
            ins, aux = self.input_names((), ())
        except MXNetError:
            lines += ["Inputs: depend on the parameters.", ""]
        if ins is not None:
            lines += ["Inputs: " + (", ".join(ins) or "(none)")]
            if aux:
                lines += ["Aux states: " + ", ".join(aux)]
            lines.append("")
        lines += ["Parameters", "----------"]
        for name, typ, default, rng, choices, doc in self.params:
            t = typ
            if choices:
                t += " " + choices
            if rng:
                t += " in " + rng
            t += ", required" if default in ("", "required") else ", default=%s" % default
            lines.append("%s : %s" % (name, t))
            if doc:
                lines.append("    " + doc)
        lines += ["out : NDArray, optional", "    The output array (nd only).",
                  "name : str, optional", "    The node name (sym only)."]
        return "\n".join(lines)

    def input_names(self, keys, vals):
        """(argument names, aux names) for these kwargs (strings)."""
        if not keys and self._default_io is not None:
            return self._default_io
        ck_ = (tuple(keys), tuple(vals))
        hit = self._io_cache.get(ck_)
        if hit is not None:
            return hit
        res = []
        ck = c_str_array(keys)
        cv = c_str_array(vals)
        for which in (0, 2):
            names = (ctypes.c_char * 64 * _NAMES_CAP)()
            cnt = ctypes.c_int()
            check(lib.mxp_op_list_names(self.handle, which, ck, cv, len(keys),
                                        ctypes.cast(names, ctypes.POINTER(ctypes.c_char * 64)), _NAMES_CAP,
                                        ctypes.byref(cnt)))
            res.append([names[i].value.decode() for i in range(min(cnt.value, _NAMES_CAP))])
        out = (res[0], res[1])
        if not keys:
            self._default_io = out
        elif len(self._io_cache) < 256:
            self._io_cache[ck_] = out
        return out


_cache = {}


def find(name):
    """OpInfo for an op name or alias, or None when the registry has no such op."""
    info = _cache.get(name)
    if info is not None:
        return info
    h = lib.mxp_op_find(c_str(name))
    if not h:
        return None
    canon = py_str(lib.mxp_op_name(h))
    info = _cache.get(canon)
    if info is None:
        info = OpInfo(canon, h)
        _cache[canon] = info
    _cache[name] = info
    return info


def all_names():
    """Every op name and alias the registry knows now (manifests read)."""
    lib.mxp_registry_init()
    out = []
    for i in range(lib.mxp_op_count()):
        h = lib.mxp_op_at(i)
        if not h:
            continue
        out.append(py_str(lib.mxp_op_name(h)))
        for j in range(lib.mxp_op_alias_count(h)):
            out.append(py_str(lib.mxp_op_alias_at(h, j)))
    return out


def generation():
    return lib.mxp_registry_generation()


def list_packs():
    out = []
    for i in range(lib.mxp_pack_count()):
        p = lib.mxp_pack_at(i)
        out.append(py_str(lib.mxp_pack_name(p)))
    return out


def load_pack(name):
    """Load a pack now (its ops then appear in mx.nd and mx.sym)."""
    check(lib.mxp_pack_load(c_str(name)))


def manifest_gen(library_path):
    """The manifest entry (YAML) of a pack's .so, without registering it."""
    p = ctypes.c_void_p()
    check(lib.mxp_pack_manifest_gen(c_str(library_path), ctypes.byref(p)))
    try:
        return ctypes.string_at(p.value).decode()
    finally:
        _lib.c_free(p.value)


def add_manifest(path):
    """Read another manifest (e.g. a third-party pack's); its ops appear on first access."""
    check(lib.mxp_registry_add_manifest(c_str(path)))

