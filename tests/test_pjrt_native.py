"""The PJRT shim's native calls (compiler/backends/pjrt/native.py) against its ctypes path, the
definition: an execution on device buffers through `kiln_pjrt_execute<N>` gives the results
the ctypes path gives (every hand-written module of test_pjrt: 0 to 2 arguments, several
results, every kind of dtype), the plug-in's errors come back as PjrtErrors with its message on
both paths (an argument PJRT has deleted, a ready event of a deleted buffer), the runner's
result Buffers and its refusal once the executable is closed, and a call made
while another holds the executable's native state takes the ctypes path."""
import json

import numpy as np
import pytest

from kiln.compiler.backends.pjrt import api, client as pjrt, native, plugins
from test_pjrt import CPU_PLUGIN, HAND_WRITTEN, _module, cpu  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(not CPU_PLUGIN, reason="xla-cpu-pjrt is not installed")


def _compiled(cpu, name):
    args, results, body, inputs, _ = HAND_WRITTEN[name]
    xs = inputs()
    want = HAND_WRITTEN[name][4](*xs)
    return pjrt.Executable(cpu, _module(args, results, body), xs, want), xs, want


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_native_execution_is_the_ctypes_execution(cpu, name):
    exe, xs, want = _compiled(cpu, name)
    buffers = [cpu.put(x) for x in xs]
    fast = exe.execute(buffers)
    slow = exe._run([b.handle for b in buffers], wait=False)
    assert len(fast) == len(slow) == len(want)
    for f, s, w in zip(fast, slow, want):
        assert (f.shape, f.dtype) == (s.shape, s.dtype) == (w.shape, w.dtype)
        assert f.handle != s.handle
        np.testing.assert_array_equal(f.block_until_ready().to_host(), w)
        np.testing.assert_array_equal(s.to_host(), w)


def test_errors_carry_the_plugins_message_on_both_paths(cpu):
    exe, xs, _ = _compiled(cpu, "add_f32")
    a, b = cpu.put(xs[0]), cpu.put(xs[1])
    cpu.api.call("Buffer_Delete", api.args(api.Buffer, buffer=a.handle))   # memory gone
    for run in (lambda: exe.execute([a, b]), lambda: exe._run([a.handle, b.handle], wait=False)):
        with pytest.raises(api.PjrtError, match="INVALID_ARGUMENT.*deleted or donated"):
            run()
    with pytest.raises(api.PjrtError, match="INVALID_ARGUMENT.*deleted or donated"):
        a.block_until_ready()
    a.delete()   # the handle is still destroyed once, natively
    assert a.handle is None


def test_a_busy_executable_takes_the_ctypes_path(cpu, monkeypatch):
    exe, xs, want = _compiled(cpu, "mul_sub_i64")
    buffers = [cpu.put(x) for x in xs]
    taken = []
    monkeypatch.setattr(exe, "_run", lambda bs, wait: taken.append(wait) or [])
    exe._idle.acquire()   # another thread is in a native call on it
    try:
        assert exe.execute(buffers) == [] and taken == [False]
    finally:
        exe._idle.release()
    monkeypatch.undo()
    out = exe.execute(buffers)
    for o, w in zip(out, want):
        np.testing.assert_array_equal(o.to_host(), w)


def test_the_runner_makes_results_as_init_does_and_refuses_a_closed_executable(cpu):
    exe, xs, want = _compiled(cpu, "mul_sub_i64")
    buffers = [cpu.put(x) for x in xs]
    run = exe.runner()
    assert exe.runner() is run
    for got, w in zip(run([b.handle for b in buffers]), want):
        assert (type(got), got.client, got.device, got.shape, got.dtype) == \
            (pjrt.Buffer, cpu, exe.device, w.shape, w.dtype)
        assert got._host is None and got._done is None
        np.testing.assert_array_equal(got.to_host(), w)
    exe.close()
    with pytest.raises(RuntimeError, match="closed"):
        run([b.handle for b in buffers])


def test_one_function_per_argument_count():
    assert native.execute_function(3) is native.execute_function(3)
    assert native.execute_function(3) is not native.execute_function(4)


# ------------------------------------------------------------------ the executable cache

@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    return tmp_path / "pjrt"


def _compiles(cpu, monkeypatch):
    """The names of the PJRT functions called from now on."""
    called, call = [], type(cpu.api).call
    monkeypatch.setattr(cpu.api, "call", lambda name, a: called.append(name) or
                        call(cpu.api, name, a))
    return called


def test_a_second_compile_loads_the_stored_executable(cpu, cache_dir, monkeypatch):
    exe, xs, want = _compiled(cpu, "mul_sub_i64")
    assert len(list(cache_dir.glob("*.kobj"))) == 1
    called = _compiles(cpu, monkeypatch)
    again, _, _ = _compiled(cpu, "mul_sub_i64")
    assert "Executable_DeserializeAndLoad" in called and "Client_Compile" not in called
    for o, w in zip(again(*xs), want):
        np.testing.assert_array_equal(o.to_host(), w)
    called.clear()
    other = pjrt.Executable(cpu, exe_text("mul_sub_i64"), xs, want, cpu.devices[-1])
    assert ("Client_Compile" in called) == (len(cpu.devices) > 1)   # the device is in the key
    assert other.device is cpu.devices[-1]


def exe_text(name):
    args, results, body, _, _ = HAND_WRITTEN[name]
    return _module(args, results, body)


def test_an_entry_the_plugin_cannot_load_is_compiled_again(cpu, cache_dir, monkeypatch):
    _compiled(cpu, "add_f32")
    (entry,) = cache_dir.glob("*.kobj")
    from kiln.compiler.backends.pjrt import compile_cache
    compile_cache._cache().store(entry.stem, b"not an executable")
    called = _compiles(cpu, monkeypatch)
    exe, xs, want = _compiled(cpu, "add_f32")
    assert called.count("Executable_DeserializeAndLoad") == 1 and "Client_Compile" in called
    np.testing.assert_array_equal(exe(*xs)[0].to_host(), want[0])
    assert compile_cache._cache().load(entry.stem) not in (None, b"not an executable")


def test_the_cache_can_be_turned_off(cpu, tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", "0")
    called = _compiles(cpu, monkeypatch)
    _compiled(cpu, "scalar_f64")
    _compiled(cpu, "scalar_f64")
    assert called.count("Client_Compile") == 2 and "Executable_Serialize" not in called


# ------------------------------------------------------------------ TPU topologies

LIBTPU = plugins.libtpu_path()


@pytest.mark.skipif(LIBTPU is None, reason="libtpu is not installed (pip install libtpu, or "
                    "TPU_LIBRARY_PATH=/path/to/libtpu.so)")
def test_compile_for_a_tpu_topology_without_a_tpu():
    import kiln
    import kiln.numpy as jnp
    lowered = kiln.jit(lambda x, y: jnp.tanh(x @ y).sum(axis=0)).lower(
        np.ones((8, 128), np.float32), np.ones((128, 4), np.float32))
    out = lowered.compile_for_topology("v5e:2x2")
    assert out.topology == "v5e:2x2" and out.platform == "tpu"
    assert len(out.device_kinds) == 4 and all("v5" in k for k in out.device_kinds)
    assert len(out.serialized) > 1000
    with pytest.raises(api.PjrtError):
        lowered.compile_for_topology("no-such-topology")
    # Its bytes, packed by serialize, are refused by name on another plug-in.
    from kiln.experimental import serialize_executable as se
    if any(f.name == "xla-cpu-pjrt" for f in plugins.discover()):
        blob, in_tree, out_tree = se.serialize(out)
        with pytest.raises(ValueError, match="compiled for platform 'tpu' .*v5e:2x2.* cannot "
                                             "be loaded on platform 'cpu'"):
            se.deserialize_and_load(blob, in_tree, out_tree)


def test_compile_for_a_topology_without_libtpu_fails_fast(monkeypatch):
    import kiln
    monkeypatch.setattr(plugins, "libtpu_path", lambda: None)
    lowered = kiln.jit(lambda x: x + 1).lower(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="Unable to initialize backend 'tpu'.*libtpu.*not "
                       "installed"):
        lowered.compile_for_topology("v5e:2x2")


def _partitioned_and_pmap(devices):
    """A sharded jit over a 2 x 2 mesh of `devices` and a pmap over them, lowered (kiln)."""
    import kiln
    import kiln.numpy as jnp
    from kiln import lax, P
    from kiln.sharding import Mesh, NamedSharding
    mesh = Mesh(np.array(devices, dtype=object).reshape(2, 2), ("x", "y"))
    sharded = kiln.jit(lambda a, b: (jnp.sin(a) @ b, a.sum()),
                       in_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P())),
                       out_shardings=(NamedSharding(mesh, P("x")), None)).lower(
        np.ones((8, 8), np.float32), np.ones((8, 4), np.float32))
    pmapped = kiln.pmap(lambda v: v @ v.T / lax.psum(v, "i").sum(), axis_name="i",
                        backend="pjrt", devices=devices).lower(np.ones((4, 3, 3), np.float32))
    return sharded, pmapped


@pytest.mark.skipif(LIBTPU is None, reason="libtpu is not installed (pip install libtpu, or "
                    "TPU_LIBRARY_PATH=/path/to/libtpu.so)")
@pytest.mark.parametrize("shardy", [True, False])
def test_partitioned_jit_and_pmap_compile_for_a_tpu_topology(shardy):
    import kiln
    from kiln.experimental import serialize_executable as se
    kiln.config.update("jax_use_shardy_partitioner", shardy)
    try:
        sharded, pmapped = _partitioned_and_pmap(kiln.devices("pjrt")[:4])
    finally:
        kiln.config.update("jax_use_shardy_partitioner", True)
    for lowered, what in ((sharded, "partitions"), (pmapped, "replicas")):
        out = lowered.compile_for_topology("v5e:2x2")
        assert out.platform == "tpu" and len(out.device_ids) == 4, what
        assert len(set(out.device_ids)) == 4 and len(out.serialized) > 1000
        assert out.in_tree == lowered.compile().in_tree
        assert out.out_tree == lowered.compile().out_tree
        # Packed with the mesh (or replicas) on the topology's devices, refused on the CPU.
        blob, in_tree, out_tree = se.serialize(out)
        doc = json.loads(blob.split(b"\n", 2)[2])
        assert doc["topology"] == "v5e:2x2" and doc["plugin"] == "libtpu"
        ids = (doc["mesh"] or doc["pmap"])["device_ids"]
        assert ids == list(out.device_ids)
        assert "custom_call" not in doc["module"]   # no CPU plug-in handlers
        with pytest.raises(ValueError, match="compiled for platform 'tpu' .*v5e:2x2.* "
                                             "cannot be loaded on platform 'cpu'"):
            se.deserialize_and_load(blob, in_tree, out_tree)
    # A topology with fewer devices than the replicas.
    eight = kiln.pmap(lambda v: v + 1, backend="pjrt", devices=kiln.devices("pjrt")[:8]).lower(
        np.ones((8, 2), np.float32))
    with pytest.raises(ValueError, match="the pmap of .* runs on 8 devices, but the topology "
                                         "'v5e:2x2' has 4; name a topology with at least 8"):
        eight.compile_for_topology("v5e:2x2")


def test_partitioned_and_pmap_topologies_need_libtpu_and_pjrt(monkeypatch):
    import kiln
    from kiln import lax
    sharded, pmapped = _partitioned_and_pmap(kiln.devices("pjrt")[:4])
    llvm = kiln.pmap(lambda v: v / lax.psum(v, "i"), axis_name="i").lower(
        np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="compile_for_topology: the pmap of .* was compiled "
                                         "by the llvm backend.*backend='pjrt'"):
        llvm.compile_for_topology("v5e:2x2")
    monkeypatch.setattr(plugins, "libtpu_path", lambda: None)
    for lowered in (sharded, pmapped):
        with pytest.raises(RuntimeError, match="Unable to initialize backend 'tpu'.*libtpu"):
            lowered.compile_for_topology("v5e:2x2")
