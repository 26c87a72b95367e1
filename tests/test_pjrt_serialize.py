"""kiln.experimental.serialize_executable on XLA's CPU plug-in: `serialize` of a compiled
`jit(backend="pjrt")` function and `deserialize_and_load` of its blob in this process and in
another one, compared with the original; an executable the disk cache loaded; donation,
another device, pytrees and weak types; the errors (a blob of another platform, as a TPU
topology's is on the CPU plug-in, bytes the plug-in cannot read, a damaged blob, pytrees or
backends that do not fit). Where JAX is installed, the signatures and pytrees against JAX's.
Over the suite's 8 CPU devices: a jit partitioned over a 4 x 2 mesh (Shardy and GSPMD), a
jit of a shard_map and pmaps (an unmapped argument, a static one), serialized and loaded in
this process and in a fresh one, against JAX 0.10.2's round trips of the same functions
(results, output shardings, pytrees); donation, missing device ids and the pmap refusals."""
import base64
import hashlib
import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.compiler.backends.pjrt import api, plugins
from kiln.compiler.backends.pjrt.topology import ForTopology
from kiln.experimental import serialize_executable as se
from kiln.jit import CompiledForTopology
from kiln import P
from kiln.sharding import Mesh, NamedSharding

from jax_devices import jax_script

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")

W = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2)


def step_of(numpy):
    def step(x, params, *, scale):
        """Closes over W (a constant of the module), takes pytrees and a keyword."""
        return {"y": numpy.tanh(x @ W).sum(axis=1) * scale + params["b"], "h": x * 0.5,
                "n": params["n"] + 1}
    return step


step = step_of(jnp)


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
PARAMS = {"b": np.float32(2.0), "n": np.int32(3)}


def compiled_step():
    return kiln.jit(step, backend="pjrt").lower(X, PARAMS, scale=3.0).compile()


def assert_same(got, want):
    assert kiln.tree_util.tree_structure(got) == kiln.tree_util.tree_structure(want)
    for g, w in zip(kiln.tree_util.tree_leaves(got), kiln.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.weak_type == w.weak_type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_round_trip_in_process():
    compiled = compiled_step()
    blob, in_tree, out_tree = se.serialize(compiled)
    assert (in_tree, out_tree) == (compiled.in_tree, compiled.out_tree)
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    want = compiled(X, PARAMS, scale=3.0)
    got = loaded(X, PARAMS, scale=3.0)
    assert_same(got, want)
    assert got["y"].device == kiln.devices("pjrt")[0]
    again = loaded(got["h"], PARAMS, scale=3.0)   # device arrays go back in
    assert_same(again, compiled(want["h"], PARAMS, scale=3.0))
    assert loaded.as_text() == compiled.as_text()
    figures = loaded.cost_analysis()   # XLA's, as the plug-in gives them
    assert figures["flops"] > 0 and figures["bytes accessed"] > 0
    assert loaded.memory_analysis().output_size_in_bytes == \
        compiled.memory_analysis().output_size_in_bytes
    with pytest.raises(TypeError, match="compiled for arguments of types"):
        loaded(X[:2], PARAMS, scale=3.0)
    with pytest.raises(TypeError, match="input pytree does not match .* called with "
                                        r"PyTreeDef\(\(\(\*,\), \{'scale': \*\}\)\)"):
        loaded(X, scale=3.0)


def test_round_trip_in_another_process(tmp_path):
    blob, in_tree, out_tree = se.serialize(compiled_step())
    (tmp_path / "exe.pkl").write_bytes(pickle.dumps((blob, in_tree, out_tree)))
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(f"""
        import pickle, numpy as np
        from kiln.experimental import serialize_executable as se
        blob, in_tree, out_tree = pickle.loads(open({str(tmp_path / "exe.pkl")!r}, "rb").read())
        out = se.deserialize_and_load(blob, in_tree, out_tree)(
            np.arange(12, dtype=np.float32).reshape(4, 3) / 7,
            {{"b": np.float32(2.0), "n": np.int32(3)}}, scale=3.0)
        np.savez({str(tmp_path / "out.npz")!r}, **{{k: np.asarray(v) for k, v in out.items()}})
    """))
    env = dict(os.environ, KILN_CACHE_DIR="0")   # nothing of this process's cache to find
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    want = compiled_step()(X, PARAMS, scale=3.0)
    for k in want:
        np.testing.assert_array_equal(got[k], np.asarray(want[k]))


def _scaled():
    def scaled(v):   # a new function object each call, the same module
        return v * 3.0 - 1.0
    return scaled


def test_executable_loaded_from_the_disk_cache_serializes_whole(tmp_path, monkeypatch):
    # The CPU plug-in serializes an executable it loaded without its kernels; kiln keeps
    # the bytes it loaded (compile_cache.compile).
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    v = np.arange(5, dtype=np.float32)
    first = kiln.jit(_scaled(), backend="pjrt").lower(v).compile()
    second = kiln.jit(_scaled(), backend="pjrt").lower(v).compile()   # from the disk cache
    assert list((tmp_path / "pjrt").iterdir())
    blob, in_tree, out_tree = se.serialize(second)
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    np.testing.assert_array_equal(np.asarray(loaded(v)), np.asarray(first(v)))


def test_donation_and_another_device():
    device = kiln.devices("pjrt")[1]
    f = kiln.jit(lambda a, b: (a + b, b * 2), backend="pjrt", donate_argnums=0)
    v = np.arange(6, dtype=np.float32)
    blob, in_tree, out_tree = se.serialize(f.lower(v, v).compile())
    loaded = se.deserialize_and_load(blob, in_tree, out_tree, backend="pjrt",
                                     execution_devices=[device])
    a, b = kiln.device_put(v, device), kiln.device_put(v + 1, device)
    total, doubled = loaded(a, b)
    assert total.device == device and doubled.device == device
    np.testing.assert_array_equal(np.asarray(total), v + v + 1)
    np.testing.assert_array_equal(np.asarray(doubled), (v + 1) * 2)
    assert a.is_deleted() and not b.is_deleted()


def _blob_with(blob, **changes):
    """`blob` with its document's entries changed and its checksum made right again."""
    header, digest, payload = blob.split(b"\n", 2)
    doc = json.loads(payload)
    doc.update(changes)
    payload = json.dumps(doc).encode()
    return b"\n".join([header, hashlib.sha256(payload).hexdigest().encode(), payload])


def test_an_executable_of_another_platform_is_refused_by_name():
    # A topology-compiled executable as compile_for_topology gives it (libtpu is not
    # needed to make one for the loading path: the plug-in never sees these bytes).
    lowered = kiln.jit(lambda x, y: x * 2.0 + y).lower(np.ones(4, np.float32),
                                                       np.ones(4, np.float32))
    made = CompiledForTopology(lowered._entry, ForTopology(
        "v5e:2x2", "tpu", "libtpu 0.0.42.1", ("TPU v5 lite",) * 4, b"libtpu's bytes", (0,)))
    blob, in_tree, out_tree = se.serialize(made)
    with pytest.raises(ValueError, match=r"compiled for platform 'tpu' \(topology 'v5e:2x2', "
                                         r"TPU v5 lite, by libtpu\) and cannot be loaded on "
                                         r"platform 'cpu' \(the plug-in xla-cpu-pjrt.*"
                                         r"backend='tpu'.*kiln.jit\(f, backend='pjrt'\)"):
        se.deserialize_and_load(blob, in_tree, out_tree)
    with pytest.raises(ValueError, match="not a kiln serialized executable.*"
                                         r"serialize\(compiled_for_topology\)\[0\]"):
        se.deserialize_and_load(made.serialized, in_tree, out_tree)


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_bytes_the_plug_in_cannot_read_are_its_error(damage):
    blob, in_tree, out_tree = se.serialize(compiled_step())
    inner = base64.b64decode(json.loads(blob.split(b"\n", 2)[2])["executable"])
    inner = inner[:len(inner) // 2] if damage == "truncated" else b"\x01" * 64
    bad = _blob_with(blob, executable=base64.b64encode(inner).decode())
    with pytest.raises(api.PjrtError, match="the cpu plug-in xla-cpu-pjrt could not load the "
                                            "serialized executable of 'step'.*: "
                                            "PjRtCpuClient::DeserializeExecutable proto "
                                            "deserialization failed"):
        se.deserialize_and_load(bad, in_tree, out_tree)


def test_damaged_blobs_and_misfits():
    compiled = compiled_step()
    blob, in_tree, out_tree = se.serialize(compiled)
    flipped = blob[:200] + bytes([blob[200] ^ 1]) + blob[201:]
    with pytest.raises(ValueError, match="corrupt .*truncated or altered"):
        se.deserialize_and_load(flipped, in_tree, out_tree)
    with pytest.raises(ValueError, match="kiln.serialize_executable format version 9; this "
                                         "kiln reads version 2. Serialize the executable"):
        se.deserialize_and_load(blob.replace(b"executable 2\n", b"executable 9\n", 1),
                                in_tree, out_tree)
    with pytest.raises(ValueError, match="looks like a pickle"):
        se.deserialize_and_load(pickle.dumps(("exec", b"")), in_tree, out_tree)
    with pytest.raises(ValueError, match="in_tree .* have 2 and 3 leaves, but the executable "
                                         "of 'step' takes 4 arguments"):
        se.deserialize_and_load(blob, kiln.tree_util.tree_structure((1, 2)), out_tree)
    with pytest.raises(ValueError, match="backend 'cpu' does not load PJRT executables"):
        se.deserialize_and_load(blob, in_tree, out_tree, backend="cpu")
    with pytest.raises(ValueError, match="execution_devices must be PJRT devices"):
        se.deserialize_and_load(blob, in_tree, out_tree, execution_devices=kiln.devices())
    llvm = kiln.jit(step).lower(X, PARAMS, scale=3.0).compile()
    with pytest.raises(ValueError, match="Compilation does not support serialization: 'step' "
                                         "was compiled by the LLVM backend.*backend='pjrt'"):
        se.serialize(llvm)
    with pytest.raises(TypeError, match="expected the result of kiln.jit"):
        se.serialize(blob)


def test_the_api_is_jax_s():
    jax = pytest.importorskip("jax")
    from jax.experimental import serialize_executable as jse
    for name in ("serialize", "deserialize_and_load"):
        ours, theirs = inspect.signature(getattr(se, name)), \
            inspect.signature(getattr(jse, name))
        assert list(ours.parameters) == list(theirs.parameters)
        assert [p.default for p in ours.parameters.values()] == \
            [p.default for p in theirs.parameters.values()]
    jitted = jax.jit(step_of(jax.numpy), static_argnames="scale")
    _, jax_in, jax_out = jse.serialize(jitted.lower(X, PARAMS, scale=3.0).compile())
    compiled = kiln.jit(step, backend="pjrt", static_argnames="scale").lower(
        X, PARAMS, scale=3.0).compile()
    _, in_tree, out_tree = se.serialize(compiled)
    assert (str(in_tree), str(out_tree)) == (str(jax_in), str(jax_out))


# ------------------------------------------------------------------ partitioned executables
# A jit partitioned over a 4 x 2 mesh of the plug-in's 8 CPU devices (the suite's conftest
# sets 8), and a shard_map under jit over it, against the same calls through JAX 0.10.2
# (run in a subprocess with 8 CPU devices).

def mesh_4x2():
    return Mesh(np.array(kiln.devices("pjrt")[:8], dtype=object).reshape(4, 2), ("x", "y"))


A = np.arange(32, dtype=np.float32).reshape(8, 4) / 5


def sharded_of(numpy):
    def sharded(a, b):
        """Closes over W2; the second result's sharding is left to XLA."""
        return numpy.sin(a) * 2.0 + b, (a @ W2).sum(0), a.T
    return sharded


W2 = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
SPECS = dict(in_specs=(P("x", "y"), P()), out_specs=(P("x"), None, P("y", "x")))


def compiled_sharded(mesh, **jit_args):
    ins, outs = (tuple(None if s is None else NamedSharding(mesh, s) for s in SPECS[k])
                 for k in ("in_specs", "out_specs"))
    f = kiln.jit(sharded_of(jnp), in_shardings=ins, out_shardings=outs, backend="pjrt",
                 **jit_args)
    return f.lower(A, np.float32(1.5)).compile()


def smapped(mesh):
    from kiln import lax
    body = kiln.shard_map(lambda v: lax.psum(v, "y") * 2.0, mesh=mesh, in_specs=P("x", "y"),
                          out_specs=P("x"))
    return kiln.jit(body, in_shardings=NamedSharding(mesh, P("x", "y")),
                    out_shardings=NamedSharding(mesh, P("x")))


_JAX_SCRIPT = """
import json, sys, numpy as np, jax, jax.numpy as jnp
from jax.experimental import serialize_executable as se
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
A = np.arange(32, dtype=np.float32).reshape(8, 4) / 5
W2 = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
def sharded(a, b):
    return jnp.sin(a) * 2.0 + b, (a @ W2).sum(0), a.T
f = jax.jit(sharded, in_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P())),
            out_shardings=(NamedSharding(mesh, P("x")), None, NamedSharding(mesh, P("y", "x"))))
c = f.lower(A, np.float32(1.5)).compile()
g = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "y") * 2.0, mesh=mesh, in_specs=P("x", "y"),
                          out_specs=P("x")))
d = g.lower(A).compile()
p = jax.pmap(lambda v, w: (v / jax.lax.psum(v, "i") + w.sum(), v.sum()), axis_name="i",
             in_axes=(0, None))
e = p.lower(A, W2[0]).compile()
s = jax.pmap(lambda v, k: v * k, static_broadcasted_argnums=1).lower(A, 3).compile()
out = {}
for name, compiled, args in (("sharded", c, (A, np.float32(1.5))), ("smapped", d, (A,)),
                             ("pmap", e, (A, W2[0])), ("static", s, (A,))):
    blob, in_tree, out_tree = se.serialize(compiled)
    got = se.deserialize_and_load(blob, in_tree, out_tree)(*args)
    got = got if isinstance(got, tuple) else (got,)
    out[name] = [[tuple(r.sharding.spec) for r in got], [np.asarray(r).tolist() for r in got],
                 [str(in_tree), str(out_tree)]]
json.dump(out, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def jax_partitioned(tmp_path_factory):
    """What JAX 0.10.2's loaded executables give: {name: [specs, values]}."""
    return jax_script(tmp_path_factory.mktemp("jax"), _JAX_SCRIPT)


def _specs(results):
    return [tuple(tuple(e) if isinstance(e, tuple) else e for e in r.sharding.spec)
            for r in results]


def _jax_specs(specs):
    return [tuple(tuple(e) if isinstance(e, list) else e for e in s) for s in specs]


def test_sharded_jit_round_trip_in_process(jax_partitioned):
    mesh = mesh_4x2()
    compiled = compiled_sharded(mesh)
    blob, in_tree, out_tree = se.serialize(compiled)
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    b = np.float32(1.5)
    want, got = compiled(A, b), loaded(A, b)
    assert [r.sharding for r in got] == [r.sharding for r in want]
    assert loaded.output_shardings == compiled.output_shardings
    assert loaded.input_shardings == compiled.input_shardings
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.weak_type == w.weak_type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    specs, values, trees = jax_partitioned["sharded"]
    assert [str(in_tree), str(out_tree)] == trees
    assert _specs(got) == _jax_specs(specs)   # the second one XLA's choice, as in JAX
    for g, w in zip(got, values):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w, np.float32), rtol=1e-6,
                                   atol=1e-6)
    assert loaded.as_text() == compiled.as_text() and "sdy.mesh @mesh" in loaded.as_text()
    assert loaded.cost_analysis()["flops"] > 0
    spread = kiln.device_put(A, NamedSharding(mesh, P("x", "y")))
    again = loaded(spread, b)   # a spread argument goes in as its blocks
    np.testing.assert_array_equal(np.asarray(again[0]), np.asarray(want[0]))
    with pytest.raises(TypeError, match="compiled for arguments of types"):
        loaded(A[:4], b)


def test_shard_map_under_jit_round_trip(jax_partitioned):
    mesh = mesh_4x2()
    compiled = smapped(mesh).lower(A).compile()
    blob, in_tree, out_tree = se.serialize(compiled)
    got = se.deserialize_and_load(blob, in_tree, out_tree)(A)
    want = compiled(A)
    assert got.sharding == want.sharding == NamedSharding(mesh, P("x"))
    specs, (values,), _ = jax_partitioned["smapped"]
    assert _specs([got]) == _jax_specs(specs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(values, np.float32))


def test_sharded_and_pmap_round_trips_in_another_process(tmp_path):
    """One fresh process loads a sharded jit's blob and a pmap's (compiled here)."""
    blobs = [se.serialize(compiled_sharded(mesh_4x2())),
             se.serialize(pmapped().lower(A, W2[0]).compile())]
    (tmp_path / "exe.pkl").write_bytes(pickle.dumps(blobs))
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(f"""
        import json, pickle, numpy as np
        from kiln.experimental import serialize_executable as se
        sharded, pmapped = pickle.loads(open({str(tmp_path / "exe.pkl")!r}, "rb").read())
        a = np.arange(32, dtype=np.float32).reshape(8, 4) / 5
        out = [*se.deserialize_and_load(*sharded)(a, np.float32(1.5)),
               *se.deserialize_and_load(*pmapped)(
                   a, np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)[0])]
        np.savez({str(tmp_path / "out.npz")!r}, *[np.asarray(r) for r in out])
        json.dump([[str(e) for e in r.sharding.spec] + [r.sharding.mesh.axis_names,
                   [d.id for d in r.sharding.mesh.devices.flat]] for r in out],
                  open({str(tmp_path / "specs.json")!r}, "w"))
    """))
    env = dict(os.environ, KILN_CACHE_DIR="0", KILN_NUM_CPU_DEVICES="8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    want = [*compiled_sharded(mesh_4x2())(A, np.float32(1.5)), *pmapped()(A, W2[0])]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(got[f"arr_{k}"], np.asarray(w))
    assert json.loads((tmp_path / "specs.json").read_text()) == \
        [[str(e) for e in w.sharding.spec] + [list(w.sharding.mesh.axis_names),
                                              [d.id for d in w.sharding.mesh.devices.flat]]
         for w in want]


def test_sharded_donation_and_devices_not_given():
    mesh = mesh_4x2()
    sharding = NamedSharding(mesh, P("x"))
    f = kiln.jit(lambda a, b: (a + b, b * 2), in_shardings=(sharding, sharding),
                 out_shardings=(sharding, sharding), donate_argnums=0)
    blob, in_tree, out_tree = se.serialize(f.lower(A, A).compile())
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    a, b = kiln.device_put(A, sharding), kiln.device_put(A + 1, sharding)
    total, doubled = loaded(a, b)
    np.testing.assert_array_equal(np.asarray(total), A + (A + 1))
    np.testing.assert_array_equal(np.asarray(doubled), (A + 1) * 2)
    assert a.is_deleted() and not b.is_deleted()
    with pytest.raises(ValueError, match=r"runs on the PJRT devices with ids \[0, 1, 2, 3, 4, "
                                         r"5, 6, 7\] \(a mesh of shape \(4, 2\)\), but "
                                         r"execution_devices has none with id \[4, 5, 6, 7\]"):
        se.deserialize_and_load(blob, in_tree, out_tree,
                                execution_devices=kiln.devices("pjrt")[:4])


def pmapped():
    from kiln import lax
    return kiln.pmap(lambda v, w: (v / lax.psum(v, "i") + w.sum(), v.sum()), axis_name="i",
                     in_axes=(0, None), backend="pjrt")


def test_pmap_round_trip(jax_partitioned):
    w = W2[0]
    compiled = pmapped().lower(A, w).compile()
    blob, in_tree, out_tree = se.serialize(compiled)
    specs, values, trees = jax_partitioned["pmap"]
    assert [str(in_tree), str(out_tree)] == trees
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    want, got = compiled(A, w), loaded(A, w)
    mesh = Mesh(np.array(kiln.devices("pjrt")[:8], dtype=object), ("i",))
    for g, h, v in zip(got, want, values):
        assert g.sharding == h.sharding == NamedSharding(mesh, P("i"))   # JAX's P('i')
        np.testing.assert_array_equal(np.asarray(g), np.asarray(h))
        np.testing.assert_allclose(np.asarray(g), np.asarray(v, np.float32), rtol=1e-6)
    assert [tuple(s) for s in specs] == [("i",), ("i",)]
    again = loaded(got[0], w)   # a pmap result goes back in as its buffers
    np.testing.assert_array_equal(np.asarray(again[1]), np.asarray(got[0]).sum(1))
    assert loaded.as_text() == compiled.as_text() and "mhlo.num_replicas = 8" in \
        loaded.as_text()
    with pytest.raises(TypeError, match="compiled for arguments of types"):
        loaded(A[:4], w)


def test_pmap_refusals():
    from kiln import lax
    on_cpu = kiln.pmap(lambda v: v / lax.psum(v, "i"), axis_name="i")
    with pytest.raises(ValueError, match="Compilation does not support serialization: the "
                                         "pmap of .* was compiled by the LLVM backend.*"
                                         "backend='pjrt'"):
        se.serialize(on_cpu.lower(A).compile())
    scaled = kiln.pmap(lambda v, s: v * s, axis_name="i", in_axes=(0, None), backend="pjrt")
    with pytest.raises(ValueError, match="specialised for the values of its Python-number "
                                         r"arguments \(1 of them\).*np.asarray"):
        se.serialize(scaled.lower(A, 2).compile())   # an int: specialised by value
    blob, in_tree, out_tree = se.serialize(scaled.lower(A, 2.0).compile())   # a float: not
    np.testing.assert_array_equal(
        np.asarray(se.deserialize_and_load(blob, in_tree, out_tree)(A, 3.0)), A * 3)
    blob, in_tree, out_tree = se.serialize(pmapped().lower(A, W2[0]).compile())
    with pytest.raises(ValueError, match=r"ids \[0, 1, 2, 3, 4, 5, 6, 7\] \(8 replicas\)"):
        se.deserialize_and_load(blob, in_tree, out_tree,
                                execution_devices=kiln.devices("pjrt")[:2])


def test_pmap_static_arguments_are_left_out(jax_partitioned):
    scaled = kiln.pmap(lambda v, k: v * k, static_broadcasted_argnums=1, backend="pjrt")
    compiled = scaled.lower(A, 3).compile()
    blob, in_tree, out_tree = se.serialize(compiled)
    specs, (values,), trees = jax_partitioned["static"]
    assert [str(in_tree), str(out_tree)] == trees   # the static argument is not in it
    for run in (compiled, se.deserialize_and_load(blob, in_tree, out_tree)):
        np.testing.assert_array_equal(np.asarray(run(A)), np.asarray(values, np.float32))


def test_a_gspmd_executable_loads_with_gspmd_s_options():
    before = kiln.config.read("jax_use_shardy_partitioner")
    kiln.config.update("jax_use_shardy_partitioner", False)
    try:
        compiled = compiled_sharded(mesh_4x2())
    finally:
        kiln.config.update("jax_use_shardy_partitioner", before)
    assert "mhlo.sharding" in compiled.as_text() and "sdy" not in compiled.as_text()
    loaded = se.deserialize_and_load(*se.serialize(compiled))
    b = np.float32(1.5)
    for g, w in zip(loaded(A, b), compiled(A, b)):
        assert g.sharding == w.sharding
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
