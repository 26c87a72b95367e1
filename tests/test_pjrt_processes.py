"""`kiln.pmap(f, backend="pjrt")` over an axis that spans several MPI processes: XLA's CPU plug-in
runs each process's replicas, and the collectives' part across processes runs in kiln's XLA FFI
handlers over MPI (runtime/pjrt_processes.py, stablehlo/lower_processes.py).

One run of `mpirun -np 2` (two CPU devices per process: an axis of 4) computes `outputs` (every
collective, a few axes and dtypes, grad of a psum, value_and_grad of a pmean, a psum step
fed its own results three times) on the PJRT
backend and on the llvm backend, each process on its rows of the global data; the two must be
equal, and the processes' rows stacked must equal JAX 0.10.2's pmap of the same function over
4 devices of one process on the global data. The module's text and the layouts kiln does not
lower across processes are checked in this process.
"""
import json
import os
import sys

import numpy as np
import pytest

import kiln
from kiln import lax
from kiln.compiler.backends.pjrt import plugins
from kiln.compiler.backends.stablehlo import lower_module
from kiln.compiler.errors import BackendUnsupportedError
from kiln.compiler.primitives.replicas import with_collective_params
from jax_devices import jax_results
from test_distributed import mpirun, needs_mpi

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")
N = 4   # the axis: 2 processes of 2 devices
V = (np.arange(N * 6, dtype=np.float32).reshape(N, 6) - 7.5).tolist()
W = ((np.arange(N * 2, dtype=np.int32).reshape(N, 2) * 37) % 11).tolist()


def outputs(lib, pmap_kwargs, v, w, rows=slice(None)):
    """The results (a flat list) of pmaps of every collective on `v` and `w` (lists; `rows`
    of a larger array of N rows), with `lib` kiln or jax."""
    lax, jnp = lib.lax, lib.numpy
    v, w = np.asarray(v, np.float32), np.asarray(w, np.int32)
    ring = [(i, (i + 1) % N) for i in range(N)]

    def f(v, w):
        t = jnp.concatenate([v] * N)
        m = v.reshape(2, 3)
        return (lax.psum(v, "i"), lax.pmean(v, "i"), lax.pmax(v, "i"), lax.pmin(w, "i"),
                lax.all_gather(v, "i"), lax.all_gather(m, "i", axis=1, tiled=True),
                lax.all_gather(m, "i", axis=2),
                lax.psum_scatter(t, "i", tiled=True), lax.psum_scatter(t.reshape(N, -1), "i"),
                lax.psum_scatter(jnp.concatenate([m] * N, axis=1), "i", scatter_dimension=1,
                                 tiled=True),
                lax.all_to_all(t, "i", 0, 0, tiled=True),
                lax.all_to_all(t.reshape(N, -1), "i", 0, 1),
                lax.all_to_all(jnp.concatenate([m] * N, axis=1), "i", 1, 0, tiled=True),
                lax.ppermute(v, "i", ring), lax.ppermute(w, "i", [(0, N - 1), (3, 1)]),
                lax.axis_index("i"), lax.psum(w, "i") * lax.axis_index("i"),
                lax.pmax(w > 5, "i"), lax.psum(w.astype(jnp.int8), "i"))

    def loss(k, xb):
        return lax.pmean(jnp.sum(jnp.tanh(xb @ k) ** 2), "i")
    k = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    results = list(lib.pmap(f, "i", **pmap_kwargs)(v, w))
    results.append(lib.pmap(lib.grad(lambda x: lax.psum(x, "i").sum()), "i", **pmap_kwargs)(v))
    value, grad = lib.pmap(lib.value_and_grad(loss), "i", in_axes=(None, 0),
                           **pmap_kwargs)(k, v.reshape(-1, 2, 3))
    # reductions split among each process's replicas (over lower_processes.CHUNKED a replica)
    big = (np.arange(N * 8195) % 97 - 48).astype(np.float32).reshape(N, 8195)[rows]
    results += lib.pmap(lambda u: (lax.psum(u, "i"), lax.pmax(u, "i"),
                                   lax.pmin(u.astype(jnp.int32) * 3, "i")),
                        "i", **pmap_kwargs)(big)
    step = lib.pmap(lambda x: x * 0.5 + lax.psum(x, "i") * 0.1, "i", **pmap_kwargs)
    chained = step(step(step(v)))   # (on PJRT: results fed back on the devices, run async)
    return [np.asarray(r) for r in results + [value, grad, chained]]


def _listed(arrays):
    return [[str(a.dtype), a.tolist()] for a in arrays]


def jax_outputs(jax):
    """JAX's results on the global data (in a process of JAX's own: jax_devices.py)."""
    return _listed(outputs(jax, {}, V, W))


SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
import kiln
kiln.config.update("jax_num_cpu_devices", 2)
kiln.distributed.initialize()
import test_pjrt_processes as t
p = kiln.process_index()
rows = slice(2 * p, 2 * p + 2)
v, w = np.asarray(t.V)[rows], np.asarray(t.W)[rows]
got = {{backend: t._listed(t.outputs(kiln, {{"backend": backend}}, v, w, rows))
        for backend in ("pjrt", "cpu")}}
print("RESULT", p, json.dumps(got), flush=True)
"""


@needs_mpi
def test_every_collective_across_two_processes(tmp_path):
    code, output, seconds = mpirun(tmp_path, SCRIPT.format(tests=os.path.dirname(__file__)),
                                   env={"KILN_NUM_CPU_DEVICES": "2"}, limit=120)
    assert code == 0, output[-4000:]
    found = {}
    for line in output.splitlines():
        if line.startswith("RESULT "):
            _, rank, payload = line.split(" ", 2)
            found[int(rank)] = json.loads(payload)
    assert sorted(found) == [0, 1], output[-4000:]
    for rank in (0, 1):   # the PJRT backend gives the llvm backend's results
        _same(found[rank]["pjrt"], found[rank]["cpu"], f"process {rank}")
    want = jax_results("test_pjrt_processes", "t.jax_outputs(jax)")
    got = [[found[0]["pjrt"][k][0], found[0]["pjrt"][k][1] + found[1]["pjrt"][k][1]]
           for k in range(len(found[0]["pjrt"]))]   # the processes' rows, stacked
    _same(got, want, "JAX")


def _same(got, want, what):
    """Two `_listed` results equal: the same dtypes and shapes, equal values (floats within
    rounding: XLA's tanh is not kiln's)."""
    assert len(got) == len(want)
    for k, ((dtype, value), (dtype_want, value_want)) in enumerate(zip(got, want)):
        assert dtype == dtype_want, (what, k, dtype, dtype_want)
        value, value_want = np.asarray(value, dtype), np.asarray(value_want, dtype)
        assert value.shape == value_want.shape, (what, k, value.shape, value_want.shape)
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, value_want, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{what}: output {k}")
        else:
            np.testing.assert_array_equal(value, value_want, err_msg=f"{what}: output {k}")


def test_module_text_across_processes():
    """The module each process compiles: XLA's collective over its replicas, then kiln's
    custom call; axis_index adds n times the process index."""
    f = kiln.pmap(lambda v: (lax.psum(v, "i"), lax.all_gather(v, "i"), lax.axis_index("i")),
                  "i", backend="pjrt")
    ssa = with_collective_params(kiln.make_ir(f)(np.ones((4, 3), np.float32)),
                                 mesh_axes=(("i", 2),), processes=2)
    text = lower_module(ssa, replicas=2).text
    assert '"stablehlo.all_reduce"' in text and "dense<[[0, 1]]> : tensor<1x2xi64>" in text
    for target in ("kiln_mpi_psum", "kiln_mpi_all_gather", "kiln_mpi_process_index"):
        assert f"stablehlo.custom_call @{target}(" in text
    assert "(tensor<2x3xf32>, tensor<ui32>) -> tensor<2x2x3xf32>" in text
    assert text.count("has_side_effect = true") == 2
    # a larger value: reduce-scattered among the replicas, each chunk across processes
    ssa = with_collective_params(kiln.make_ir(f)(np.ones((4, 8195), np.float32)),
                                 mesh_axes=(("i", 2),), processes=2)
    text = lower_module(ssa, replicas=2).text
    assert '"stablehlo.reduce_scatter"' in text
    assert ("stablehlo.custom_call @kiln_mpi_psum" in text and
            "(tensor<4098xf32>, tensor<ui32>) -> tensor<4098xf32>" in text)


def test_layouts_not_lowered_across_processes():
    f = kiln.pmap(lambda v: lax.psum(v, "i"), "i", backend="pjrt")
    ssa = kiln.make_ir(f)(np.ones((4, 3), np.float32))
    two_axes = with_collective_params(ssa, mesh_axes=(("i", 2), ("j", 1)), processes=2)
    with pytest.raises(BackendUnsupportedError, match=r"lowers 'psum' across 2 processes only "
                       r"in a pmap over PJRT devices \(one axis of replicas\); run this "
                       r"function with the llvm backend"):
        lower_module(two_axes, replicas=2)


# -- multi-process clients: the key-value store callbacks --------------------------------------

class DictStore:
    """A store of one process (MpiStore's interface), recording its calls."""

    def __init__(self):
        self.values, self.calls = {}, []

    def put(self, key, value):
        self.calls.append(("put", key, value))
        self.values[key] = value

    def get(self, key, timeout):
        self.calls.append(("get", key, timeout))
        if key not in self.values:
            raise TimeoutError(f"no {key!r} after {timeout:g} s")
        return self.values[key]

    def try_get(self, key):
        return self.values.get(key)


def test_key_value_callbacks_as_a_plugin_calls_them():
    """The callbacks PJRT_Client_Create gets (pjrt/kv_store.py), called through their
    addresses with pjrt_c_api.h's argument structs, as a plug-in calls them."""
    import ctypes as C
    from kiln.compiler.backends.pjrt import api, kv_store
    store = DictStore()
    fields = kv_store.callbacks(store, b"gpu:")
    errors = []

    @api.CALLBACK_ERROR
    def callback_error(code, message, size):
        errors.append((code, C.string_at(message, size).decode()))
        return 0x1234   # (the plug-in's PJRT_Error)
    error_slot = C.c_void_p(C.cast(callback_error, C.c_void_p).value)

    def call(name, struct, **values):
        args = api.args(struct, callback_error=C.addressof(error_slot), **values)
        function = C.CFUNCTYPE(C.c_void_p, C.c_void_p)(fields[name])
        return function(C.byref(args)), args

    key, value = C.create_string_buffer(b"node/0"), C.create_string_buffer(b"a\0b")
    error, _ = call("kv_put_callback", api.KeyValuePut, key=C.addressof(key), key_size=6,
                    value=C.addressof(value), value_size=3)
    assert error is None and store.values == {b"gpu:node/0": b"a\0b"}
    for name, struct, extra in [("kv_get_callback", api.KeyValueGet, {"timeout_in_ms": 2500}),
                                ("kv_try_get_callback", api.KeyValueTryGet, {})]:
        error, args = call(name, struct, key=C.addressof(key), key_size=6, **extra)
        assert error is None and C.string_at(args.value, args.value_size) == b"a\0b"
        assert args.value_deleter == C.cast(C.CDLL(None).free, C.c_void_p).value
        C.CFUNCTYPE(None, C.c_void_p)(args.value_deleter)(args.value)   # the plug-in frees it
    assert store.calls[-1] == ("get", b"gpu:node/0", 2.5)
    other = C.create_string_buffer(b"node/1")
    error, _ = call("kv_try_get_callback", api.KeyValueTryGet, key=C.addressof(other),
                    key_size=6)
    assert error == 0x1234 and errors[-1] == (kv_store.NOT_FOUND, "key b'gpu:node/1' not "
                                              "found in kiln's key-value store")
    error, _ = call("kv_get_callback", api.KeyValueGet, key=C.addressof(other), key_size=6,
                    timeout_in_ms=10)
    assert error == 0x1234 and errors[-1] == (kv_store.DEADLINE_EXCEEDED,
                                              "no b'gpu:node/1' after 0.01 s")


def test_client_with_a_store_and_options():
    """The CPU plug-in takes the callbacks (and ignores them: it calls none creating its
    client); another plug-in in a run of several processes gets node_id and num_nodes."""
    from kiln import pjrt as runtime
    from kiln.compiler.backends.pjrt import client as pjrt
    found = next(f for f in plugins.discover() if f.name == "xla-cpu-pjrt")
    store = DictStore()
    made = pjrt.Client(plugins.load(found.path), {"cpu_device_count": 2}, store)
    assert len(made.devices) == 2 and store.calls == []
    made.close()
    with kiln.distributed.compiling_for(1, 2):
        assert runtime.client_options("/opt/pjrt/pjrt_c_api_gpu_plugin.so") == {
            "node_id": 1, "num_nodes": 2}
        assert "node_id" not in runtime.client_options(found.path)
    assert runtime.client_options("/opt/pjrt/pjrt_c_api_gpu_plugin.so") == {}


STORE_SCRIPT = """
import time
import kiln
kiln.distributed.initialize()
from kiln.pjrt_store import shared_store
store = shared_store()
p = kiln.process_index()
keys = [f"k{i}".encode() for i in range(6)]   # (owned by both processes)
if p == 0:
    time.sleep(0.5)   # process 1's gets wait for these puts
    for i, k in enumerate(keys):
        store.put(k, bytes([i]) * (i * 5000))
got = [store.get(k, 20.0) for k in keys]
assert got == [bytes([i]) * (i * 5000) for i in range(6)], [len(g) for g in got]
assert store.try_get(b"absent") is None and store.try_get(b"k1") == bytes([1]) * 5000
try:
    store.get(b"never", 0.2)
except TimeoutError as e:
    print("TIMEOUT", p, e, flush=True)
print("STORE OK", p, flush=True)
# a process that does not come: the other's collective fails after KILN_DISTRIBUTED_TIMEOUT
import numpy as np
from kiln import lax
f = kiln.pmap(lambda v: lax.psum(v, "i"), "i", backend="pjrt")
x = np.ones((len(kiln.devices("pjrt")), 3), np.float32)
f(x)   # (compiled, and run by both)
if p == 0:
    import os
    os.environ["KILN_DISTRIBUTED_TIMEOUT"] = "2"   # (read at every wait)
    try:
        f(x)
    except Exception as e:
        print("PSUM", type(e).__name__, e, flush=True)
"""


@needs_mpi
def test_store_and_a_missing_process(tmp_path):
    """The store across two processes; then a psum on PJRT that one process does not join
    is the other's execution error, and the job is aborted at its exit."""
    code, output, _ = mpirun(tmp_path, STORE_SCRIPT, limit=60)
    for rank in (0, 1):
        assert f"STORE OK {rank}" in output, output[-3000:]
        assert (f"TIMEOUT {rank} key b'never' did not appear in kiln's key-value store "
                f"within 0.2 s") in output
    assert ("PSUM PjrtError PJRT error INTERNAL: Compute error: kiln_mpi_psum: "
            "DistributedTimeoutError: the cross-process part of a PJRT pmap's collective "
            "(kiln_mpi_psum) did not complete within 2 s") in output, output[-3000:]
    assert code != 0 and "a cross-process wait timed out; aborting the MPI job" in output
