"""`kiln.pmap(f, backend="pjrt")` and `kiln.shard_map` over a mesh of PJRT devices: one
StableHLO module replicated (pmap) or partitioned (shard_map) over several devices of XLA's CPU
plug-in (the test session's KILN_NUM_CPU_DEVICES=8 gives it 8), its collectives lowered to
StableHLO's collective ops, run in one execution. Every result is compared with the same pmap or shard_map on kiln's reference
backend (or CPU mesh): each collective at 2, 3 and 4 replicas, hypothesis over shapes (0 and 1
included), dtypes and axes, grad through psum, a shard_map over a 2 x 2 mesh with collectives
over one and both axes; the error paths (more replicas than devices, a collective in a module
that is not replicated); and, in one fresh process, the plug-in's device count following
KILN_NUM_CPU_DEVICES and the collectives beside JAX 0.10.2's pmap on two CPU devices.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax, P
from kiln.compiler.backends.pjrt import client as pjrt, plugins
from kiln.compiler.backends.stablehlo import lower_module
from kiln.compiler.errors import BackendUnsupportedError
from kiln.sharding import AxisType, Mesh
from kiln.tree_util import tree_leaves

pytestmark = pytest.mark.skipif(not any(f.name == "xla-cpu-pjrt" for f in plugins.discover()),
                                reason="no xla-cpu-pjrt plug-in (pip install -e '.[pjrt]')")
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def same(got, want, exact):
    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)


def check(f, *args, exact=False, **kwargs):
    """pmap(f) on PJRT devices against pmap(f) on the reference backend."""
    kwargs.setdefault("axis_name", "i")
    same(kiln.pmap(f, backend="pjrt", **kwargs)(*args),
         kiln.pmap(f, backend="reference", **kwargs)(*args), exact)


def _every_collective(n):
    ring = tuple((i, (i + 1) % n) for i in range(n))

    def f(v, w):
        t = jnp.concatenate([v] * n)
        return (lax.psum(v, "i"), lax.pmean(v, "i"), lax.pmax(v, "i"), lax.pmin(w, "i"),
                lax.all_gather(v, "i"), lax.all_gather(v.reshape(2, 3), "i", axis=1, tiled=True),
                lax.psum_scatter(t, "i", tiled=True), lax.psum_scatter(t.reshape(n, -1), "i"),
                lax.all_to_all(t, "i", 0, 0, tiled=True),
                lax.all_to_all(t.reshape(n, -1), "i", 0, 1),
                lax.ppermute(v, "i", ring), lax.ppermute(w, "i", ((0, n - 1),)),
                lax.axis_index("i"), lax.psum(w, "i") * lax.axis_index("i"),
                lax.pmax(w > 5, "i"), lax.pmin(w > 5, "i"), lax.psum(w.astype(jnp.int8), "i"))
    return f


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_collective(n):
    v = np.arange(n * 6, dtype=np.float32).reshape(n, 6) - 7.5
    w = (np.arange(n * 2, dtype=np.int32).reshape(n, 2) * 37) % 11
    check(_every_collective(n), v, w)


def test_module_text():
    """The replicated module: its replica count and JAX's collective operations."""
    f = kiln.pmap(lambda v: lax.psum(v, "i") + lax.axis_index("i"), "i", backend="pjrt")
    x = np.ones((4, 3), np.float32)
    ssa = kiln.make_ir(f)(x)
    with pytest.raises(BackendUnsupportedError, match="only in a module replicated over "
                       r"devices: call the function through kiln.pmap\(..., backend='pjrt'\)"):
        lower_module(ssa)
    f(x)
    from kiln import pjrt as runtime
    ssa, program = runtime.compile_replicated(ssa, (("i", 4),), kiln.devices("pjrt")[:4])
    text = program.as_text()
    assert "mhlo.num_replicas = 4 : i32" in text
    assert '"stablehlo.all_reduce"' in text and "dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>" in text
    assert "stablehlo.replica_id : tensor<ui32>" in text


@given(n=st.sampled_from([1, 2, 4]), shape=st.lists(st.integers(0, 3), min_size=0, max_size=2),
       dtype=st.sampled_from([np.float32, np.int32, np.complex64, np.float64]),
       data=st.data())
@SETTINGS
def test_shapes_dtypes_axes(n, shape, dtype, data):
    shape = tuple(shape)
    rank = len(shape)
    x = (np.arange(n * int(np.prod(shape)), dtype=np.float64).reshape((n,) + shape) % 7 - 3)
    x = x.astype(dtype)
    gather = data.draw(st.integers(0, rank), label="all_gather axis")
    tiled = rank > 0 and data.draw(st.booleans(), label="tiled")
    gather = min(gather, rank - 1) if tiled else gather
    ops = [lambda v: lax.psum(v, "i"),
           lambda v: lax.all_gather(v, "i", axis=gather, tiled=tiled)]
    if dtype != np.complex64:
        ops.append(lambda v: lax.pmax(v, "i"))
    if rank:
        axis = data.draw(st.integers(0, rank - 1), label="split/scatter axis")
        concat = data.draw(st.integers(0, rank - 1), label="concat axis")
        ops.append(lambda v: lax.psum_scatter(jnp.concatenate([v] * n, axis=axis), "i",
                                              scatter_dimension=axis, tiled=True))
        ops.append(lambda v: lax.all_to_all(jnp.concatenate([v] * n, axis=axis), "i", axis,
                                            concat, tiled=True))
    with kiln.enable_x64(dtype == np.float64):
        check(lambda v: [op(v) for op in ops], x, exact=dtype == np.int32)


def test_grad_of_psum():
    x = np.arange(4.0, dtype=np.float32)
    got = kiln.pmap(kiln.grad(lambda v: lax.psum(v, "i")), "i", backend="pjrt")(x)
    np.testing.assert_array_equal(np.asarray(got), [4.0, 4.0, 4.0, 4.0])

    def loss(w, xb):
        return lax.pmean(jnp.sum(jnp.tanh(xb @ w) ** 2), "i")
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    xb = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 4, 3)
    check(kiln.value_and_grad(loss), w, xb, in_axes=(None, 0))


def test_unmapped_outputs_and_constants():
    table = jnp.arange(3.0)

    def f(v, s):
        return lax.psum(v * table, "i"), v + s
    check(f, np.ones((2, 3), np.float32), np.float32(2), in_axes=(0, None), out_axes=(None, 0))
    check(lambda v: v * 2, np.arange(6.0).reshape(3, 2))   # no collective: one execution too


def test_shard_map_over_pjrt_devices():
    mesh = Mesh(np.array(kiln.devices("pjrt")[:4], dtype=object).reshape(2, 2), ("x", "y"))
    cpu = kiln.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def g(b):
        return (lax.psum(b, "y"), lax.psum(b, ("x", "y")), lax.all_gather(b, "x"),
                (lax.axis_index("y") + 10 * lax.axis_index("x")).reshape(1, 1),
                lax.ppermute(b, "x", [(0, 1)]), lax.pmax(b, ("y", "x")),
                lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True),
                lax.all_to_all(b, "x", 1, 0, tiled=True))
    specs = dict(in_specs=P("x", "y"), out_specs=(P("x"), P(), P(None, "x", "y"), P("x", "y"),
                                                  P("x", "y"), P(), P("x", "y"), P("x", "y")))
    x = np.arange(32.0, dtype=np.float32).reshape(4, 8)
    same(kiln.shard_map(g, mesh=mesh, **specs)(x), kiln.shard_map(g, mesh=cpu, **specs)(x),
         exact=False)


def test_too_many_replicas():
    two = kiln.devices("pjrt")[:2]
    with pytest.raises(ValueError, match=r"compiling computation that requires 3 logical "
                       r"devices, but only 2 XLA devices are available \(num_replicas=3\)"):
        kiln.pmap(lambda v: lax.psum(v, "i"), "i", devices=two)(np.ones(3, np.float32))
    got = kiln.pmap(lambda v: lax.psum(v, "i"), "i", devices=two)(np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(got), [2.0, 2.0])   # devices= picks pjrt


def test_compile_options_for_replicas():
    one = pjrt.compile_options(2)
    assert one == bytes.fromhex("1a0e" "2001" "2801" "4a08" "0801" "1001" "1a02" "0802")
    three = pjrt.compile_options(4, 5, 6)
    assert three == bytes.fromhex("1a12" "2003" "2801" "4a0c" "0803" "1001" "1a06" "0804"
                                  "0805" "0806")


def test_device_count_in_a_fresh_process(tmp_path):
    """KILN_NUM_CPU_DEVICES=2 gives the CPU plug-in two devices (its create option
    cpu_device_count); pmap over two runs, over three is the ValueError; where JAX is
    installed, JAX's pmap on two CPU devices gives the same collectives."""
    code = "\n".join([
        "import numpy as np, kiln",
        "from kiln import lax",
        "print(len(kiln.devices('pjrt')))",
        "f = kiln.pmap(lambda v: lax.psum(v, 'i'), 'i', backend='pjrt')",
        "print(np.asarray(f(np.arange(2.0))).tolist())",
        "try:\n    f(np.arange(3.0))\nexcept ValueError as e:\n    print(str(e)[:69])",
        "def g(v, lax):",
        "    return (lax.psum(v, 'i'), lax.pmax(v, 'i'), lax.all_gather(v, 'i'),",
        "            lax.ppermute(v, 'i', [(0, 1)]), lax.axis_index('i'),",
        "            lax.psum_scatter(v, 'i', tiled=True), lax.all_to_all(v, 'i', 0, 0))",
        "x = np.arange(4.0, dtype=np.float32).reshape(2, 2) - 1.5",
        "ours = kiln.pmap(lambda v: g(v, lax), 'i', backend='pjrt')(x)",
        "try:\n    import jax\nexcept ImportError:\n    jax = None",
        "theirs = jax.pmap(lambda v: g(v, jax.lax), 'i')(x) if jax else ours",
        "print(all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(ours, theirs)))",
    ])
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    env["KILN_NUM_CPU_DEVICES"] = "2"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"   # JAX's two devices
    script = tmp_path / "count.py"   # a file: kiln reads the lambda's source
    script.write_text(code + "\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "2", "[1.0, 1.0]",
        "compiling computation that requires 3 logical devices, but only 2 XLA", "True"]
