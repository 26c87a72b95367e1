"""Sharded jit on PJRT devices under both of XLA's partitioners (runtime/pjrt_partitioned.py):
Shardy (`jax_use_shardy_partitioner` on, the default as in JAX 0.10.2: `sdy.mesh` and
`sdy.sharding` in the module, compiled with use_shardy_partitioner) and GSPMD (off:
`mhlo.sharding`). Results against NumPy and between the two, the module texts, the compile
options' field, the option's default and environment variable, and, where JAX is installed,
kiln's Shardy module against the one JAX 0.10.2 writes for the same function and shardings.
Output shardings left open are XLA's choice, read back from the executable
(pjrt/shardings.py): against JAX's for the same call, and the tilings' decoding.
`with_sharding_constraint` inside a partitioned jit: the `sdy.sharding_constraint` (GSPMD:
`@Sharding`) JAX writes, the output sharding and values as JAX's, under grad and vmap,
dropped where nothing is partitioned, refused over another mesh."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import P
from kiln.compiler.backends.pjrt import client as pjrt, plugins, shardings as chosen
from kiln.compiler.config import Config
from kiln.sharding import Mesh, NamedSharding

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")


@pytest.fixture
def partitioner():
    """Sets jax_use_shardy_partitioner for a test and puts the value before it back."""
    before = kiln.config.read("jax_use_shardy_partitioner")
    yield lambda on: kiln.config.update("jax_use_shardy_partitioner", on)
    kiln.config.update("jax_use_shardy_partitioner", before)


def mesh_2x2():
    return Mesh(np.array(kiln.devices("pjrt")[:4], dtype=object).reshape(2, 2), ("x", "y"))


def function():
    return lambda a, b: (jnp.sin(a) + b, a.sum(0), a.T * 2)


def shardings(mesh, spec):
    replicated = NamedSharding(mesh, P())
    return dict(in_shardings=(NamedSharding(mesh, spec), replicated),
                out_shardings=(NamedSharding(mesh, spec), replicated,
                               NamedSharding(mesh, P(*reversed(spec.padded(2))))))


A = np.arange(32, dtype=np.float32).reshape(4, 8) / 5
B = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
WANT = (np.sin(A) + B, A.sum(0), A.T * 2)


@pytest.mark.parametrize("spec", [P("x"), P("y", "x"), P(None, ("x", "y"))])
def test_both_partitioners_give_the_same_results(spec, partitioner):
    mesh = mesh_2x2()
    results, texts = {}, {}
    for on in (True, False):
        partitioner(on)
        f = kiln.jit(function(), backend="pjrt", **shardings(mesh, spec))
        results[on] = [np.asarray(r) for r in f(A, B)]
        (entry,) = f._partitioned.values()
        texts[on] = entry.text
    for got in results.values():
        for g, w in zip(got, WANT):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    for g, h in zip(results[True], results[False]):
        np.testing.assert_array_equal(g, h)
    names = [[n for n in spec.names(d)] for d in range(2)]
    split = "[" + ", ".join("{" + ", ".join(f'"{n}"' for n in d) + "}" for d in names) + "]"
    assert 'sdy.mesh @mesh = <["x"=2, "y"=2]>' in texts[True]
    assert f"sdy.sharding = #sdy.sharding<@mesh, {split}>" in texts[True]
    assert "sdy.sharding = #sdy.sharding<@mesh, [{}]>" in texts[True]   # the sum, replicated
    assert "mhlo.sharding" not in texts[True]
    assert 'mhlo.sharding = "{replicated}"' in texts[False] and "sdy" not in texts[False]


def test_the_option_is_part_of_the_cache_key(partitioner):
    mesh = mesh_2x2()
    f = kiln.jit(lambda a: a * 2, in_shardings=NamedSharding(mesh, P("x")), backend="pjrt")
    for on in (True, False, True):
        partitioner(on)
        np.testing.assert_array_equal(np.asarray(f(A)), A * 2)
    assert len(f._partitioned.values()) == 2
    assert sorted("sdy.mesh" in e.text for e in f._partitioned.values()) == [False, True]


def test_compile_options_turn_shardy_on():
    gspmd = pjrt.compile_options(0, 1, partitioned=True)
    shardy = pjrt.compile_options(0, 1, partitioned=True, shardy=True)
    assert shardy[2:] == gspmd[2:] + b"\x98\x01\x01"   # field 19 of the build options: 1
    jax = pytest.importorskip("jax")
    from jax._src.lib import xla_client
    options = xla_client.CompileOptions()
    before = options.SerializeAsString()
    options.executable_build_options.use_shardy_partitioner = True
    assert b"\x98\x01\x01" in options.SerializeAsString() and b"\x98\x01\x01" not in before
    assert jax.config.jax_use_shardy_partitioner is True


def test_the_default_and_the_environment(monkeypatch):
    monkeypatch.delenv("JAX_USE_SHARDY_PARTITIONER", raising=False)
    assert Config().read("jax_use_shardy_partitioner") is True
    monkeypatch.setenv("JAX_USE_SHARDY_PARTITIONER", "0")
    assert Config().read("jax_use_shardy_partitioner") is False
    monkeypatch.setenv("JAX_USE_SHARDY_PARTITIONER", "true")
    assert Config().read("use_shardy_partitioner") is True


def _sdy(text):
    """The mesh declaration and the sdy.sharding of each argument and result, in order."""
    mesh = re.search(r"sdy\.mesh @mesh = <\[[^\]]*\]>", text).group(0)
    return mesh, re.findall(r"#sdy\.sharding<@mesh, \[[^\]]*\]>", text)


def test_the_module_has_jax_s_shardy_structure(tmp_path, partitioner):
    pytest.importorskip("jax")
    script = tmp_path / "jax_module.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, jax, jax.numpy as jnp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
        f = jax.jit(lambda a, b: (jnp.sin(a) + b, a.sum(0), a.T * 2),
                    in_shardings=(NamedSharding(mesh, P("y", "x")), NamedSharding(mesh, P())),
                    out_shardings=(NamedSharding(mesh, P("y", "x")), NamedSharding(mesh, P()),
                                   NamedSharding(mesh, P("x", "y"))))
        print(f.lower(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)).as_text())
        for spec in ({SPECS}):
            g = jax.jit({OPEN}, in_shardings=(NamedSharding(mesh, spec), NamedSharding(mesh, P())))
            print("@@", [tuple(o.sharding.spec) for o in g(np.ones((4, 8), np.float32),
                                                          np.ones((4, 8), np.float32))])
    """).replace("{SPECS}", SPECS).replace("{OPEN}", OPEN))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    partitioner(True)
    f = kiln.jit(function(), backend="pjrt", **shardings(mesh_2x2(), P("y", "x")))
    f(A, B)
    (entry,) = f._partitioned.values()
    assert _sdy(entry.text) == _sdy(done.stdout)
    assert len(_sdy(entry.text)[1]) == 5
    # the output shardings XLA chooses, under both partitioners, as JAX's
    jax_specs = [eval(line[3:]) for line in done.stdout.splitlines() if line.startswith("@@")]
    for on in (True, False):
        partitioner(on)
        for spec, want in zip(eval(SPECS), jax_specs):
            g = kiln.jit(open_outputs, in_shardings=(
                NamedSharding(mesh_2x2(), spec), NamedSharding(mesh_2x2(), P())))
            outs = g(A, B)
            assert [tuple(o.sharding.spec) for o in outs] == want
            (entry,) = g._partitioned.values()
            assert "sdy.sharding<@mesh, [{}, {}]>}) -> (tensor<4x8xf32>, tensor<8xf32>, " \
                   "tensor<8x4xf32>, tensor<f32>)" in entry.text or not on
            for o, w in zip(outs, (np.sin(A) + B, A.sum(0), A.T, A.sum())):
                np.testing.assert_allclose(np.asarray(o), w, rtol=1e-5, atol=1e-4)


SPECS = 'P("x", "y"), P("y"), P(None, ("y", "x"))'
OPEN = "lambda a, b: (jnp.sin(a) + b, a.sum(0), a.T, a.sum())"   # JAX's, as open_outputs


def open_outputs(a, b):
    return jnp.sin(a) + b, a.sum(0), a.T, a.sum()


@pytest.mark.parametrize("sizes", [(2, 2), (2, 1, 2), (4,), (2, 3)])
def test_tilings_read_back_as_mesh_axes(sizes):
    import itertools
    axes = range(len(sizes))
    for order in itertools.permutations(axes):
        for where in itertools.product(range(3), repeat=len(sizes)):   # dim 0, 1 or none
            dims = [tuple(a for a in order if where[a] == d) for d in range(2)]
            tiling = chosen.layout(sizes, dims)
            found = chosen.mesh_dims(tiling, sizes)
            assert found is not None
            np.testing.assert_array_equal(chosen.layout(sizes, found), tiling)
            assert [tuple(a for a in d if sizes[a] > 1) for d in found] == \
                [tuple(a for a in d if sizes[a] > 1) for d in dims]
    if sizes == (2, 2):   # partitions 0 and 3 together: no mesh layout
        assert chosen.mesh_dims(np.array([[[0], [3]], [[1], [2]]]), sizes) is None


def test_op_shardings_as_jaxlib_writes_them():
    from kiln.compiler.backends.pjrt.client import _field
    # OTHER, tiles [2, 1, 2] on devices 0 2 1 3, the last dimension replicated: rows over
    # mesh axis 1 of a 2 x 2 mesh
    explicit = bytes.fromhex("08031a030201022204000201033001")
    tiling = chosen._tiling(explicit)
    np.testing.assert_array_equal(tiling, [[[0, 2]], [[1, 3]]])
    assert chosen.mesh_dims(tiling, (2, 2)) == [(1,), ()]
    # the same as an iota: arange(4).reshape(2, 2).T
    iota = _field(1, 3) + _field(3, bytes([2, 1, 2])) + _field(6, 1) + \
        _field(9, bytes([2, 2])) + _field(10, bytes([1, 0]))
    np.testing.assert_array_equal(chosen._tiling(iota), tiling)
    assert chosen._tiling(_field(1, 0)) is None                    # REPLICATED
    assert chosen._tiling(_field(1, 1) + _field(4, b"\x02")) is False   # MAXIMAL
    jax = pytest.importorskip("jax")
    from jax._src.lib import xla_client
    made = xla_client.OpSharding()
    made.type = xla_client.OpSharding.Type.OTHER
    made.tile_assignment_dimensions = [2, 1, 2]
    made.tile_assignment_devices = [0, 2, 1, 3]
    made.replicate_on_last_tile_dim = True
    assert made.SerializeToString() == explicit


# ------------------------------------ with_sharding_constraint (sdy.sharding_constraint)

def constrained_of(lax, numpy, mesh, named, spec):
    def constrained(a):
        return lax.with_sharding_constraint(numpy.sin(a), named(mesh, spec)) * 2.0
    return constrained


C = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
_CONSTRAINT_SPECS = '[P("y", "x"), P(None, ("x", "y")), P()]'


def test_with_sharding_constraint_is_jax_s(tmp_path, partitioner):
    """kiln's module writes the constraint as JAX 0.10.2 writes it (Shardy's
    sdy.sharding_constraint, GSPMD's @Sharding custom call), and the results and the output
    sharding XLA chooses after it are JAX's."""
    pytest.importorskip("jax")
    script = tmp_path / "jax_constraint.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, jax, jax.numpy as jnp
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
        C = np.arange(32, dtype=np.float32).reshape(4, 8) / 7
        for shardy in (True, False):
            jax.config.update("jax_use_shardy_partitioner", shardy)
            for spec in {SPECS}:
                f = jax.jit(lambda a: jax.lax.with_sharding_constraint(
                    jnp.sin(a), NamedSharding(mesh, spec)) * 2.0,
                    in_shardings=NamedSharding(mesh, P("x")))
                text = f.lower(C).as_text()
                lines = [l.strip() for l in text.splitlines() if "sharding_constraint" in l
                         or "@Sharding" in l]
                out = f(C)
                print("@@", repr((lines, tuple(out.sharding.spec), np.asarray(out).tolist())))
    """).replace("{SPECS}", _CONSTRAINT_SPECS))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    jax_runs = iter(eval(line[3:]) for line in done.stdout.splitlines()
                    if line.startswith("@@"))
    mesh = mesh_2x2()
    for shardy in (True, False):
        partitioner(shardy)
        for spec in eval(_CONSTRAINT_SPECS):
            lines, jax_spec, values = next(jax_runs)
            f = kiln.jit(constrained_of(kiln.lax, jnp, mesh, NamedSharding, spec),
                         in_shardings=NamedSharding(mesh, P("x")))
            text = f.lower(C).as_text("stablehlo")
            ours = [line.strip() for line in text.splitlines()
                    if "sharding_constraint" in line or "@Sharding" in line]
            assert len(ours) == len(lines) == 1
            if shardy:   # the same operation and sharding (only the value's name differs)
                assert re.sub(r"%\w+", "%v", ours[0]) == re.sub(r"%\w+", "%v", lines[0])
            else:        # the same custom call (JAX writes the tiling as an iota)
                assert "stablehlo.custom_call @Sharding(" in ours[0]
                assert 'backend_config = "", mhlo.sharding = "{' in ours[0]
            out = f(C)
            assert tuple(out.sharding.spec) == jax_spec
            np.testing.assert_allclose(np.asarray(out), np.asarray(values, np.float32),
                                       rtol=1e-6, atol=1e-6)


def test_constraints_under_grad_and_vmap_and_elsewhere(partitioner):
    partitioner(True)
    mesh = mesh_2x2()
    split = NamedSharding(mesh, P("x"))
    f = constrained_of(kiln.lax, jnp, mesh, NamedSharding, P("y", "x"))
    g = kiln.jit(kiln.grad(lambda a: f(a).sum()), in_shardings=split)
    np.testing.assert_allclose(np.asarray(g(C)), 2 * np.cos(C), rtol=1e-6)
    # the cotangent is constrained too, as in JAX (the primal's constraint is dead code)
    assert g.lower(C).as_text("stablehlo").count("sdy.sharding_constraint") == 1
    batched = kiln.jit(kiln.vmap(f), in_shardings=split)
    stack = np.stack([C, C + 1])
    text = batched.lower(stack).as_text("stablehlo")
    assert re.search(r'sdy\.sharding_constraint %\w+ <@mesh, \[\{\}, \{"y"\}, \{"x"\}\]>', text)
    np.testing.assert_allclose(np.asarray(batched(stack)), np.sin(stack) * 2, rtol=1e-6)
    # unpartitioned modules (one PJRT device, the LLVM backend): the value itself
    assert "sharding_constraint" not in kiln.jit(f, backend="pjrt").lower(C).as_text("stablehlo")
    np.testing.assert_allclose(np.asarray(kiln.jit(f, backend="pjrt")(C)), np.sin(C) * 2,
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(kiln.jit(f)(C)), np.sin(C) * 2, rtol=1e-6)
    assert "sharding_constraint(" in str(kiln.make_jaxpr(f)(C))


def test_a_constraint_over_another_mesh_is_refused(partitioner):
    from kiln.compiler.errors import BackendUnsupportedError
    partitioner(True)
    other = Mesh(np.array(kiln.devices("pjrt")[4:8], dtype=object).reshape(2, 2), ("x", "y"))
    f = constrained_of(kiln.lax, jnp, other, NamedSharding, P("y"))
    g = kiln.jit(f, in_shardings=NamedSharding(mesh_2x2(), P("x")))
    with pytest.raises(BackendUnsupportedError, match=r"with_sharding_constraint over the mesh "
                                                      r"\{'x': 2, 'y': 2\} of devices \[4, 5, 6,"
                                                      r" 7\] inside a function partitioned over "
                                                      r"the mesh .* of devices \[0, 1, 2, 3\]"):
        g(C)
