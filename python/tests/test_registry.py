"""Ops come from the registry: a pack registered at run time (a fixture
built from examples/third-party-op, with its manifest generated now) shows
its op in mx.nd and mx.sym on first access, with its docstring."""
import os
import shutil

import numpy as np
import pytest

import mxplug as mx
from conftest import BUILD


def test_every_registered_op_is_generated():
    names = mx.registry.list_ops()
    assert "Convolution" in names and "elemwise_add" in names
    for n in names:
        if n.isidentifier():
            assert callable(getattr(mx.nd, n)) and callable(getattr(mx.sym, n)), n
    assert "ops-basic" in mx.registry.list_packs()


def test_op_of_a_pack_registered_later(tmp_path):
    so = os.path.join(BUILD, "tests", "fixtures", "ex_thirdparty.so")
    if not os.path.isfile(so):
        pytest.skip("fixture pack not built (make tests)")
    assert "hardswish" not in dir(mx.nd)
    so = shutil.copy(so, str(tmp_path))  # the entry names the library relative to its manifest
    yaml = mx.registry.manifest_gen(so)
    man = tmp_path / "manifest.yaml"
    man.write_text("manifest_version: 1\npacks:\n" + "".join("  " + ln + "\n" for ln in yaml.splitlines()))
    mx.registry.add_manifest(str(man))
    x = np.linspace(-4, 4, 17).astype(np.float32)
    got = mx.nd.hardswish(mx.nd.array(x)).asnumpy()
    np.testing.assert_allclose(got, x * np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-6)
    assert "hardswish" in dir(mx.nd)
    assert mx.nd.hardswish.__doc__
    s = mx.sym.hardswish(mx.sym.Variable("x"), name="hs")
    assert s.list_outputs() == ["hs_output"]
