"""mx.mod.Module.fit with a dist KVStore, under mpirun on loopback (skipped
when mpirun or the kvstore-dist pack is absent).

dist_sync: 2 workers x batch 4, each on its half of every batch of 8,
end with the parameters one process reaches with batch 8 (the sum of the
gradients is the batch gradient; rescale_grad is 1/(4 x 2)), to float
tolerance.  dist_async: 2 workers + 1 server train, the server process ends
by itself, and both workers pull the same final weights.

This file is also the MPI worker: run as a script, it trains and writes
its parameters to OUT.<rank>.npz."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

STEPS, GLOBAL, FEAT, CLASSES = 6, 8, 5, 3


def _data():
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (STEPS * GLOBAL, FEAT)).astype(np.float32)
    y = (np.abs(x[:, 0] * 3).astype(np.int64) % CLASSES).astype(np.float32)
    return x, y


def _train(mx, kv, part, parts):
    x, y = _data()
    per = GLOBAL // parts
    rows = np.concatenate([np.arange(b * GLOBAL + part * per, b * GLOBAL + (part + 1) * per) for b in range(STEPS)])
    it = mx.io.NDArrayIter(x[rows], y[rows], batch_size=per)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=CLASSES, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net)
    mx.random.seed(5)
    mod.fit(it, num_epoch=1, kvstore=kv if kv is not None else "local", optimizer="sgd",
            optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9)), initializer=mx.init.Xavier())
    arg, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}


def _worker(kind, out):
    import mxplug as mx
    kv = mx.kv.create(kind)  # a dist_async server serves here, then exits
    params = _train(mx, kv, kv.rank, kv.num_workers if kind == "dist_sync" else 2)
    if kind == "dist_async":
        kv.barrier()  # every push is in; pull the servers' final weights
        for name in sorted(params):
            arr = mx.nd.zeros(params[name].shape)
            kv.pull(name, out=arr)
            params[name] = arr.asnumpy()
    np.savez("%s.%d.npz" % (out, kv.rank), **params)


def _mpirun(np_, kind, tmp):
    env = dict(os.environ)
    env.pop("BXFI_MAP", None)
    cmd = ["timeout", "-k", "5", "120", "mpirun", "-np", str(np_), "--allow-run-as-root", "--oversubscribe",
           "--bind-to", "none", "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo",
           "--mca", "oob_tcp_if_include", "lo", sys.executable, os.path.abspath(__file__), kind, str(tmp / "out")]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=150)
    assert r.returncode == 0, r.stdout.decode("utf-8", "replace")


def _have_dist():
    build = os.environ.get("MXPLUG_BUILD") or os.path.dirname(os.path.dirname(os.environ.get("MXPLUG_LIBRARY", "")))
    return shutil.which("mpirun") and os.path.isfile(os.path.join(build, "plugins", "libmxp-kvstore-dist.so"))


needs_mpi = pytest.mark.skipif(not _have_dist(), reason="mpirun or the kvstore-dist pack is absent")


@needs_mpi
def test_module_dist_sync_two_workers_equal_one(tmp_path):
    import mxplug as mx
    _mpirun(2, "dist_sync", tmp_path)
    w0, w1 = np.load(tmp_path / "out.0.npz"), np.load(tmp_path / "out.1.npz")
    single = _train(mx, None, 0, 1)
    for name, ref in single.items():
        np.testing.assert_array_equal(w0[name], w1[name])
        np.testing.assert_allclose(w0[name], ref, rtol=1e-4, atol=1e-5)


@needs_mpi
def test_module_dist_async_workers_and_a_server(tmp_path):
    _mpirun(3, "dist_async", tmp_path)
    w0, w1 = np.load(tmp_path / "out.0.npz"), np.load(tmp_path / "out.1.npz")
    assert not os.path.exists(tmp_path / "out.2.npz")  # rank 2 served
    for name in w0.files:
        np.testing.assert_array_equal(w0[name], w1[name])
        assert np.all(np.isfinite(w0[name]))


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
