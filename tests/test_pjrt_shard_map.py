"""shard_map inside a jit partitioned over PJRT devices, against JAX 0.10.2 (run in a
subprocess with 8 CPU devices): the module kiln writes (Shardy's `sdy.manual_computation`,
GSPMD's `@SPMDFullToShardShape` / `@SPMDShardToFullShape`, the body's collectives over
partitions) line by line against JAX's `jax.jit(f).lower(x).as_text()`, the values and
output shardings, grad and vmap through it, a `jit(shard_map)` called with host
arguments running on the shard_map's mesh, a shard_map called on its own (one partitioned
module), and a shard_map over another mesh than the call's: a region over a mesh of the same
devices, JAX's error over other devices."""
import re

import numpy as np
import pytest

import kiln
from kiln.sharding import Mesh, NamedSharding

import shard_map_bodies
from jax_devices import jax_script

pytestmark = pytest.mark.skipif(len(kiln.devices("pjrt")) < 8,
                                reason="needs 8 PJRT devices (the suite's KILN_NUM_CPU_DEVICES)")

_JAX = '''
import json, sys
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AxisType, PartitionSpec as P
''' + open(shard_map_bodies.__file__).read().split("import kiln.numpy as jnp\n", 1)[1] + '''


def spec(result):
    return [list(e) if isinstance(e, tuple) else e for e in result.sharding.spec]


mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
x = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 8
x3 = np.stack([x, x + 1.0, x * 2.0], 1)
out = {}
for name, body in BODIES.items():
    f = jax.shard_map(body, mesh=mesh, **SPECS[name])
    got = {"texts": {}}
    for shardy in (True, False):
        jax.config.update("jax_use_shardy_partitioner", shardy)
        got["texts"][str(shardy)] = jax.jit(f).lower(x).as_text()
    jax.config.update("jax_use_shardy_partitioner", True)
    ys = jax.tree.leaves(jax.jit(f)(x))
    got["values"], got["specs"] = [np.asarray(y).tolist() for y in ys], [spec(y) for y in ys]
    if name in DIFFERENTIATED:
        loss = lambda a: sum((y ** 2).sum() for y in jax.tree.leaves(f(a)))
        got["grad"] = np.asarray(jax.jit(jax.grad(loss))(x)).tolist()
        got["jvp"] = np.asarray(jax.jit(lambda a, t: jax.jvp(loss, (a,), (t,))[1])(
            x, np.cos(x))).tolist()
        got["vmap"] = [np.asarray(y).tolist() for y in
                       jax.tree.leaves(jax.jit(jax.vmap(f, in_axes=1))(x3))]
    out[name] = got

# a shard_map called on its own (not under jit), over the whole mesh and over "x" only
for name in ("psum_index", "partial"):
    ys = jax.tree.leaves(jax.shard_map(BODIES[name], mesh=mesh, **SPECS[name])(x))
    out[name]["eager"] = ([np.asarray(y).tolist() for y in ys], [spec(y) for y in ys])

# a shard_map over another mesh: a 2 x 4 one of the same devices, and a sub-mesh of 4
devices = np.array(jax.devices())
other = jax.sharding.Mesh(devices.reshape(2, 4), ("x", "y"))
sub = jax.sharding.Mesh(devices[:4].reshape(2, 2), ("x", "y"))
spread = jax.device_put(x, jax.sharding.NamedSharding(mesh, P("x", "y")))
got = out["other_mesh"] = {"texts": {}, "placed": {}}
for shardy in (True, False):
    jax.config.update("jax_use_shardy_partitioner", shardy)
    g = jax.jit(other_mesh(jax.shard_map, other))
    got["texts"][str(shardy)] = g.lower(spread).as_text()
    y = g(spread)
    got["values"] = np.asarray(y).tolist()
    got["placed"][str(shardy)] = (list(y.sharding.mesh.shape.values()), spec(y))
jax.config.update("jax_use_shardy_partitioner", True)
got["grad"] = np.asarray(jax.jit(jax.grad(lambda a: (g(a) ** 2).sum()))(spread)).tolist()
got["host_spec"] = spec(g(x))
try:
    jax.jit(other_mesh(jax.shard_map, sub))(spread)
except ValueError as e:
    got["sub_error"] = str(e)
y = jax.jit(other_mesh(jax.shard_map, sub))(x)
got["sub_host"] = (np.asarray(y).tolist(), spec(y))
json.dump(out, open(sys.argv[1], "w"))
'''


@pytest.fixture(scope="module")
def jax_out(tmp_path_factory):
    return jax_script(tmp_path_factory.mktemp("jax"), _JAX)


SPACE = vars(shard_map_bodies)
X = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 8


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(kiln.devices("pjrt")[:8], dtype=object).reshape(4, 2), ("x", "y"))


def _mapped(name, mesh):
    return kiln.shard_map(SPACE["BODIES"][name], mesh=mesh, **SPACE["SPECS"][name])


# ------------------------------------------------------------------ the module's text

def _iota(match):
    """GSPMD's iota device list `<=[8]`, `<=[4,2]T(1,0)` written out, as kiln writes it."""
    shape = [int(n) for n in match.group(1).split(",")]
    ids = np.arange(int(np.prod(shape))).reshape(shape)
    if match.group(2):
        ids = ids.transpose([int(n) for n in match.group(2).split(",")])
    return ",".join(map(str, ids.reshape(-1)))


def _lines(text):
    """What is compared: the manual computation's line (names dropped), each collective's
    attributes and types, `partition_id`, and GSPMD's custom calls (target, configuration,
    sharding with the devices written out, types), sorted (JAX writes GSPMD's body in a
    function of its own, after `@main`). Left out: the constraint JAX writes on the scalar
    in a partially manual all_reduce's region (`sdy.sharding_constraint`, or `@Sharding` of
    a `tensor<f32>`), which kiln does not."""
    text = re.sub(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?", _iota, text)
    heads, collectives = [], []
    for line in text.splitlines():
        line = re.sub(r"%[\w#:]+", "%", line.strip())
        if "sdy.manual_computation" in line or ("stablehlo.custom_call" in line and
                                                  "(tensor<f32>) -> tensor<f32>" not in line):
            heads.append(line.split("= ", 1)[1])
        elif "stablehlo.partition_id" in line:
            heads.append("partition_id")
        found = re.search(r'"stablehlo\.(all_reduce|all_gather|reduce_scatter|all_to_all|'
                          r'collective_permute)"\(%\) (<\{.*\}>)(.*)', line)
        if found:
            collectives.append(found.group(1) + found.group(2) +
                               (found.group(3) if " -> " in found.group(3) else ""))
    return sorted(heads), sorted(collectives)


@pytest.mark.parametrize("shardy", [True, False])
@pytest.mark.parametrize("name", sorted(SPACE["SPECS"]))
def test_the_module_is_jax_s(jax_out, mesh, name, shardy):
    kiln.config.update("jax_use_shardy_partitioner", shardy)
    try:
        text = kiln.jit(_mapped(name, mesh)).lower(X).as_text("stablehlo")
    finally:
        kiln.config.update("jax_use_shardy_partitioner", True)
    want = jax_out[name]["texts"][str(shardy)]
    got_heads, got_collectives = _lines(text)
    want_heads, want_collectives = _lines(want)
    assert got_collectives == want_collectives
    assert got_heads == want_heads
    assert ("sdy.manual_computation" in text) == shardy
    assert ("@SPMDFullToShardShape" in text) == (not shardy)


# ------------------------------------------------------------------ values

@pytest.mark.parametrize("name", sorted(SPACE["SPECS"]))
def test_values_and_shardings_are_jax_s(jax_out, mesh, name):
    want = jax_out[name]
    f = kiln.jit(_mapped(name, mesh))
    spread = kiln.device_put(X, NamedSharding(mesh, shard_map_bodies.SPECS[name]["in_specs"]))
    for got in (f(spread), f(X)):   # spread arguments, and host ones: on the mesh either way
        got = kiln.tree_util.tree_leaves(got)
        assert len(got) == len(want["values"])
        for y, value, spec in zip(got, want["values"], want["specs"]):
            np.testing.assert_allclose(np.asarray(y), value, rtol=1e-5, atol=1e-6)
            assert y.sharding.mesh == mesh
            assert [list(e) if isinstance(e, tuple) else e for e in y.sharding.spec] == spec


@pytest.mark.parametrize("name", SPACE["DIFFERENTIATED"])
def test_grad_and_vmap_through_the_region(jax_out, mesh, name):
    want = jax_out[name]
    f = _mapped(name, mesh)
    spread = kiln.device_put(X, NamedSharding(mesh, kiln.P("x", "y")))
    def loss(a):
        return sum((y ** 2).sum() for y in kiln.tree_util.tree_leaves(f(a)))
    g = kiln.jit(kiln.grad(loss))
    assert g.lower(spread).as_text("stablehlo").count("sdy.manual_computation") == 2
    np.testing.assert_allclose(np.asarray(g(spread)), want["grad"], rtol=1e-5, atol=1e-5)
    t = kiln.jit(lambda a, da: kiln.jvp(loss, (a,), (da,))[1])
    assert "sdy.manual_computation" in t.lower(spread, np.cos(X)).as_text("stablehlo")
    np.testing.assert_allclose(np.asarray(t(spread, np.cos(X))), want["jvp"], rtol=1e-4,
                               atol=1e-4)
    x3 = np.stack([X, X + 1.0, X * 2.0], 1)
    v = kiln.jit(kiln.vmap(f, in_axes=1))
    for y, value in zip(kiln.tree_util.tree_leaves(v(x3)), want["vmap"], strict=True):
        np.testing.assert_allclose(np.asarray(y), value, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["psum_index", "partial"])
def test_a_call_on_its_own_is_one_partitioned_module(jax_out, mesh, name):
    f = _mapped(name, mesh)
    values, specs = jax_out[name]["eager"]
    # host arguments, and arguments spread over another mesh of the devices: the call runs
    # on the shard_map's mesh either way, its result with JAX's sharding
    elsewhere = kiln.device_put(X, NamedSharding(_devices_as((2, 4)), kiln.P("y")))
    for arg in (X, elsewhere):
        (y,) = kiln.tree_util.tree_leaves(f(arg))
        np.testing.assert_allclose(np.asarray(y), values[0], rtol=1e-5, atol=1e-6)
        assert y.sharding == NamedSharding(mesh, kiln.P(*specs[0]))
    # the call is jit(shard_map): its partitioned entry holds the manual computation
    assert "sdy.manual_computation" in kiln.jit(f).lower(X).as_text("stablehlo")


def _devices_as(shape):
    count = int(np.prod(shape))
    return Mesh(np.array(kiln.devices("pjrt")[:count], dtype=object).reshape(shape),
                ("x", "y"))


@pytest.mark.parametrize("shardy", [True, False])
def test_a_shard_map_over_another_mesh_of_the_devices_is_a_region(jax_out, mesh, shardy):
    want = jax_out["other_mesh"]
    g = kiln.jit(shard_map_bodies.other_mesh(kiln.shard_map, _devices_as((2, 4))))
    spread = kiln.device_put(X, NamedSharding(mesh, kiln.P("x", "y")))
    kiln.config.update("jax_use_shardy_partitioner", shardy)
    try:
        text = g.lower(spread).as_text("stablehlo")
        y = g(spread)
    finally:
        kiln.config.update("jax_use_shardy_partitioner", True)
    assert _lines(text) == _lines(want["texts"][str(shardy)])
    declared = [line.split(" {stablehlo.mesh")[0].strip()
                for line in want["texts"][str(shardy)].splitlines() if "sdy.mesh @" in line]
    assert [line.strip() for line in text.splitlines() if "sdy.mesh @" in line] == declared
    np.testing.assert_allclose(np.asarray(y), want["values"], rtol=1e-6)
    # XLA's choice of the result's sharding read over the shard_map's mesh, as JAX reads it;
    # under Shardy XLA splits kiln's result over "x" where it replicates JAX's (P())
    shape, spec = want["placed"][str(shardy)]
    assert y.sharding.mesh == _devices_as(tuple(shape))
    assert y.sharding.spec == (kiln.P(*spec) if not shardy else kiln.P("x"))
    assert spec == (["x"] if not shardy else [])
    assert y.addressable_shards[0].data.shape == y.sharding.shard_shape(y.shape)
    grad = kiln.jit(kiln.grad(lambda a: (g(a) ** 2).sum()))
    np.testing.assert_allclose(np.asarray(grad(spread)), want["grad"], rtol=1e-5)
    # with host arguments the call runs on the shard_map's mesh, as JAX's
    y = g(X)
    assert y.sharding == NamedSharding(_devices_as((2, 4)), kiln.P(*want["host_spec"]))


def test_a_shard_map_over_other_devices_is_jax_s_error(jax_out, mesh):
    want = jax_out["other_mesh"]
    sub = _devices_as((2, 2))
    g = kiln.jit(shard_map_bodies.other_mesh(kiln.shard_map, sub))
    spread = kiln.device_put(X, NamedSharding(mesh, kiln.P("x", "y")))
    with pytest.raises(ValueError) as raised:
        g(spread)
    jax_says, jax_where = want["sub_error"].rsplit(" at ", 1)
    column, function = re.fullmatch(r".*:\d+:(\d+) \((.*)\)", jax_where).groups()
    line = open(shard_map_bodies.__file__).read().split("inner(a) + 1.0")[0].count("\n") + 1
    assert jax_says == ("Received incompatible devices for jitted computation. Got argument a "
                        "of other_mesh.<locals>.<lambda> with shape float32[8,4] and with "
                        "device ids [0, 1, 2, 3, 4, 5, 6, 7] on platform CPU and shard_map "
                        "inside jit with device ids [0, 1, 2, 3] on platform CPU")
    message = str(raised.value)   # JAX's, at the same place (JAX runs a copy of the file)
    assert message.startswith(f"{jax_says} at {shard_map_bodies.__file__}:{line}:{column} "
                              f"({function}). A jit runs on one list of devices")
    y = g(X)   # host arguments: on the sub-mesh, as JAX's
    values, spec = want["sub_host"]
    assert y.sharding == NamedSharding(sub, kiln.P(*spec))
    np.testing.assert_allclose(np.asarray(y), values, rtol=1e-6)


def test_a_region_outside_its_partitioned_module_is_refused(mesh):
    from kiln.compiler.backends.stablehlo import lower_module
    from kiln.compiler.errors import BackendUnsupportedError
    lowered = kiln.jit(_mapped("psum_index", mesh)).lower(X)
    with pytest.raises(BackendUnsupportedError, match=r"a shard_map over the mesh \{'x': 4, "
                       r"'y': 2\} of the devices \[0, 1, 2, 3, 4, 5, 6, 7\] lowers only in a "
                       r"module partitioned over those devices in that order, not in a module "
                       r"that is not partitioned"):
        lower_module(lowered._entry.ssa)


def test_jit_of_shard_map_without_shardings_serializes(jax_out, mesh):
    from kiln.experimental import serialize_executable as se
    from kiln.pjrt_partitioned import PartitionedCompiled
    compiled = kiln.jit(_mapped("psum_index", mesh)).lower(X).compile()
    assert isinstance(compiled, PartitionedCompiled)
    blob, in_tree, out_tree = se.serialize(compiled)
    loaded = se.deserialize_and_load(blob, in_tree, out_tree)
    y = loaded(X)
    np.testing.assert_allclose(np.asarray(y), jax_out["psum_index"]["values"][0], rtol=1e-6)
    assert y.sharding == NamedSharding(mesh, kiln.P("x"))
