"""Sharding in types (JAX's explicit mode) as kiln carries it: `typeof(x).sharding` of placed
arrays (eagerly and as jit arguments), shard_map's in_specs inferred from them (the FSDP
all_gather pattern of JAX's shard_map notebook), AbstractMesh / get_abstract_mesh /
use_abstract_mesh, auto_axes / explicit_axes, PartitionSpec's unreduced= / reduced=,
`out_sharding=` of creation functions and products, and the plain-text
visualize_array_sharding; against NumPy and JAX's printed forms; the errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.sharding import (P, NamedSharding, AbstractMesh, AxisType, get_abstract_mesh,
                           use_abstract_mesh, auto_axes, explicit_axes, reshard)

MESH = kiln.make_mesh((4, 2), ("X", "Y"))
LINE = kiln.make_mesh((4,), ("batch",))


def test_typeof_placed_arrays():
    x = kiln.device_put(np.arange(32.0).reshape(8, 4), NamedSharding(MESH, P("X", "Y")))
    t = kiln.typeof(x)
    assert str(t) == "f32[8@X,4@Y]" and repr(t) == "ShapedArray(f32[8@X,4@Y])"
    assert repr(t.sharding) == (
        "NamedSharding(mesh=AbstractMesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit), "
        "device_kind=cpu, num_cores=None, platform=cpu), spec=P('X', 'Y'))")
    both = kiln.device_put(np.arange(8.0), NamedSharding(MESH, P(("X", "Y"))))
    assert str(kiln.typeof(both)) == "f32[8@(X,Y)]"
    assert str(kiln.typeof(kiln.device_put(x, NamedSharding(MESH, P(None, "Y"))))) == \
        "f32[8,4@Y]"
    plain = kiln.typeof(jnp.ones(3))
    assert str(plain) == "f32[3]"
    assert repr(plain.sharding) == "NamedSharding(mesh=AbstractMesh((), axis_types=()), " \
        "spec=P(None,))"
    # Auto axes are not in types (pmap's results, meshes made with Auto axes)
    auto = kiln.make_mesh((4,), ("Q",), (AxisType.Auto,))
    assert kiln.typeof(kiln.device_put(np.arange(8.0), NamedSharding(auto, P("Q")))) \
        .sharding.spec == P(None)
    assert kiln.typeof(x) == kiln.typeof(x) and kiln.typeof(x) != kiln.typeof(np.asarray(x))


def test_jit_sees_and_keys_on_argument_types(capsys):
    @kiln.jit
    def f(v):
        print(kiln.typeof(v))   # (at tracing: once per specialisation)
        return v * 2 + (1.0 if kiln.typeof(v).sharding.spec[0] else 0.0)

    x = kiln.device_put(np.arange(8.0), NamedSharding(LINE, P("batch")))
    for arg in (x, x, np.arange(8.0), x, np.arange(8.0)):
        # one specialisation per type, and the fast path never runs one for another type
        np.testing.assert_array_equal(f(arg), np.arange(8.0) * 2 + (arg is x))
    assert capsys.readouterr().out.split() == ["f32[8@batch]", "f32[8]"]


def _blocks_seen(f, *args):
    def body(*blocks):
        print(*(b.shape for b in blocks))
        return lax.psum(sum(b.sum() for b in blocks), "batch")
    return f(kiln.shard_map(body, mesh=LINE, out_specs=P()))(*args)


def test_shard_map_infers_in_specs_from_types(capsys):
    x = kiln.device_put(np.arange(8.0), NamedSharding(LINE, P("batch")))
    y = np.arange(8.0)
    for wrap in (lambda g: g, kiln.jit):
        total = _blocks_seen(wrap, x, y)
        # JAX 0.10.2: the placed array arrives as its blocks, the unplaced one whole
        assert capsys.readouterr().out.splitlines()[0] == "(2,) (8,)"
        assert float(total) == 28.0 + 4 * 28.0


def test_fsdp_all_gather_of_placed_weights_matches_replicated():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    inputs = rng.standard_normal((4, 8)).astype(np.float32)

    def loss(w, inputs):
        return jnp.sum(jnp.tanh(inputs @ w))

    def loss_fsdp(w, inputs):
        full = lax.all_gather(w, "batch", tiled=True)
        return lax.psum(loss(full, inputs), "batch") / 4

    sharded = kiln.shard_map(loss_fsdp, mesh=LINE, out_specs=P())
    w_blocks = kiln.device_put(w, NamedSharding(LINE, P("batch")))
    want = np.sum(np.tanh(inputs @ w))
    np.testing.assert_allclose(float(kiln.jit(sharded)(w_blocks, inputs)), want, rtol=1e-5)
    np.testing.assert_allclose(kiln.jit(kiln.grad(sharded))(w_blocks, inputs),
                               kiln.grad(loss)(w, inputs), rtol=1e-4, atol=1e-5)


def test_shard_map_inference_errors_and_current_mesh():
    other = kiln.make_mesh((2,), ("other",))
    z = kiln.device_put(np.arange(8.0), NamedSharding(other, P("other")))
    with pytest.raises(ValueError, match="split over the mesh AbstractMesh\\('other'.*reshard"):
        kiln.shard_map(lambda a: a, mesh=LINE, out_specs=P("batch"))(z)
    # JAX's defaults: the Mesh constructor's axes are Auto, make_mesh's Explicit
    auto = kiln.sharding.Mesh(np.array(kiln.devices()[:4], dtype=object), ("batch",))
    assert auto.axis_types == (AxisType.Auto,) and LINE.axis_types == (AxisType.Explicit,)
    with pytest.raises(TypeError, match="omitted only over a mesh whose axes are all Explicit"):
        kiln.shard_map(lambda a: a, mesh=auto, out_specs=P("batch"))(np.arange(8.0))
    # an array placed over Auto axes is not typed: no propagation errors, no inferred blocks
    p = kiln.device_put(np.ones((4, 4)), NamedSharding(auto, P("batch")))
    q = kiln.device_put(np.ones((4, 4)), NamedSharding(auto, P(None, "batch")))
    assert str(kiln.typeof(p + q)) == "f32[4,4]"
    # without mesh=, the mesh current at the call (not at decoration)
    f = kiln.shard_map(lambda a: a * 0 + lax.axis_size("k"), in_specs=P("k"), out_specs=P("k"))
    # (Auto axes: over Explicit ones in_specs must match the arguments' types, as in JAX)
    with kiln.set_mesh(kiln.make_mesh((2,), ("k",), axis_types=(AxisType.Auto,))):
        np.testing.assert_array_equal(f(np.zeros(4)), [2, 2, 2, 2])
    with kiln.set_mesh(kiln.make_mesh((4,), ("k",), axis_types=(AxisType.Auto,))):
        np.testing.assert_array_equal(f(np.zeros(4)), [4, 4, 4, 4])


def test_scalar_result_of_eager_shard_map_stays_scalar():
    out = kiln.shard_map(lambda a: a.sum(), mesh=LINE, in_specs=P("batch"), out_specs=P(),
                         check_vma=False)(
        kiln.device_put(np.arange(8.0), NamedSharding(LINE, P("batch"))))
    assert out.shape == () and float(out) == 1.0


def test_abstract_mesh_and_axis_type_switches(capsys):
    assert repr(AbstractMesh((8,), ("A",), (AxisType.Explicit,))) == \
        "AbstractMesh('A': 8, axis_types=(Explicit,))"
    assert repr(AbstractMesh((2, 4), ("a", "b"))) == \
        "AbstractMesh('a': 2, 'b': 4, axis_types=(Auto, Auto))"
    assert repr(get_abstract_mesh()) == "AbstractMesh((), axis_types=())"
    with kiln.set_mesh(MESH):
        assert get_abstract_mesh() == MESH.abstract_mesh
        with use_abstract_mesh(AbstractMesh((8,), ("A",), (AxisType.Explicit,))):
            assert get_abstract_mesh().axis_names == ("A",)
        with pytest.raises(ValueError, match="total size cannot change"):
            use_abstract_mesh(AbstractMesh((2,), ("A",)))
        x = kiln.device_put(np.arange(16).reshape(4, 4), P("X", None))
        y = kiln.device_put(np.arange(16).reshape(4, 4), P(None, "X"))
        @auto_axes
        def add(a, b):
            print(get_abstract_mesh().axis_types)
            return a + b
        out = add(x, y, out_sharding=P("X", None))
        assert capsys.readouterr().out == "(Auto, Auto)\n"
        assert str(kiln.typeof(out)) == "i32[4@X,4]"
        np.testing.assert_array_equal(out, 2 * np.arange(16).reshape(4, 4))
        with pytest.raises(TypeError, match="needs out_sharding"):
            add(x, y)

        @explicit_axes(axes="Y")
        def twice(a):
            print(get_abstract_mesh().axis_types, kiln.typeof(a))
            return a * 2
        twice(np.ones((4, 4)), in_sharding=P("X", "Y"))
        assert capsys.readouterr().out == "(Explicit, Explicit) f32[4@X,4@Y]\n"
        np.testing.assert_array_equal(kiln.jit(lambda a: add(a, a, out_sharding=P("X")))(x),
                                      2 * np.arange(16).reshape(4, 4))
        assert reshard is kiln.reshard


def test_partition_spec_unreduced_reduced():
    assert repr(P("X", None, unreduced={"Y"})) == "P('X', None, unreduced={'Y'})"
    assert repr(P(reduced={"Y"})) == "P(reduced={'Y'})"
    assert repr(P("X")) == "P('X',)" and repr(P()) == "P()"
    assert P("X", unreduced={"Y"}) != P("X") and P("X").unreduced == frozenset()
    with pytest.raises(ValueError, match="overlap the axes the dimensions are split over"):
        P("X", unreduced={"X"})


def test_device_put_unreduced():
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    where = NamedSharding(MESH, P(None, "X", unreduced={"Y"}))
    y = kiln.device_put(x, where)
    assert y.sharding == where and str(kiln.typeof(y)) == "f32[2,4@X,3]{U:Y}"
    np.testing.assert_array_equal(np.asarray(y), x)          # the logical value
    shards = {s.device.id: np.asarray(s.data) for s in y.addressable_shards}
    np.testing.assert_array_equal(shards[0], x[:, :1])       # as JAX lays it out: the block
    np.testing.assert_array_equal(shards[1], np.zeros((2, 1, 3)))   # at Y=0, zeros at Y=1
    total = sum(np.asarray(s.data) for s in y.addressable_shards if s.device.id in (2, 3))
    np.testing.assert_array_equal(total, x[:, 1:2])


def test_out_sharding_places_results():
    with kiln.set_mesh(MESH):
        key = kiln.random.key(0)
        x = kiln.random.normal(key, (8, 4), out_sharding=P("X", "Y"))
        np.testing.assert_array_equal(x, kiln.random.normal(key, (8, 4)))
        assert str(kiln.typeof(x)) == "f32[8@X,4@Y]"
        cases = {
            "f32[8@X,4]": jnp.zeros((8, 4), out_sharding=P("X")),
            "i32[8@Y]": jnp.arange(8, out_sharding=P("Y")),
            "f32[8@X,16]": jnp.dot(jnp.ones((8, 4)), jnp.ones((4, 16)), out_sharding=P("X")),
            "f32[8,16@Y]": jnp.einsum("ij,jk->ik", jnp.ones((8, 4)), jnp.ones((4, 16)),
                                      out_sharding=P(None, "Y")),
            "f32[8@X,2]": lax.dot_general(jnp.ones((8, 4)), jnp.ones((4, 2)),
                                          (((1,), (0,)), ((), ())), out_sharding=P("X")),
            "f32[8@Y]": lax.full((8,), 1.0, sharding=P("Y")),
        }
        for want, value in cases.items():
            assert str(kiln.typeof(value)) == want
        np.testing.assert_array_equal(cases["f32[8@X,16]"], np.full((8, 16), 4.0))
        with pytest.raises(ValueError, match="does not evenly divide"):
            jnp.zeros((6,), out_sharding=P("X"))
        # inside a specialisation the value is as it is (traced values carry no sharding)
        np.testing.assert_array_equal(
            kiln.jit(lambda: jnp.ones((8,), out_sharding=P("X")) * 3)(), np.full(8, 3.0))


def test_visualize_array_sharding(capsys):
    x = kiln.device_put(np.zeros((8, 4)), NamedSharding(MESH, P("X", "Y")))
    kiln.debug.visualize_array_sharding(kiln.device_put(x, NamedSharding(MESH, P(None, "X"))))
    kiln.debug.visualize_array_sharding(jnp.arange(4.0))
    kiln.jit(kiln.debug.visualize_array_sharding)(kiln.device_put(
        np.zeros(8), NamedSharding(MESH, P("Y"))))
    assert capsys.readouterr().out == (
        "+---------+---------+---------+---------+\n"
        "| CPU 0,1 | CPU 2,3 | CPU 4,5 | CPU 6,7 |\n"
        "+---------+---------+---------+---------+\n"
        "+-------+\n| CPU 0 |\n+-------+\n"
        # traced (at trace time): the type's sharding, naming mesh positions
        "+---------+---------+\n| 0,2,4,6 | 1,3,5,7 |\n+---------+---------+\n")
    kiln.debug.visualize_array_sharding(x)
    assert capsys.readouterr().out.splitlines()[1:4] == [
        "| CPU 0 | CPU 1 |", "+-------+-------+", "| CPU 2 | CPU 3 |"]
    seen = []
    kiln.debug.inspect_array_sharding({"a": x}, callback=seen.append)
    assert seen == [x.sharding]
    with pytest.raises(ValueError, match="1-d and 2-d"):
        kiln.debug.visualize_array_sharding(jnp.zeros((2, 2, 2)))


def test_eager_results_take_their_operands_types():
    """JAX's propagation rules (the examples of its parallel.md), values as NumPy's."""
    with kiln.set_mesh(MESH):
        x = kiln.device_put(np.arange(32.0).reshape(8, 4), P("X", "Y"))
        got = {"sin.T": jnp.sin(x).T, "sum0": x.sum(0), "mul": x * 2, "radd": 1.0 + x,
               "outer": kiln.device_put(np.arange(4).reshape(4, 1), P("X", None))
               + kiln.device_put(np.arange(8).reshape(1, 8), P(None, "Y")),
               "gathered": jnp.dot(jnp.ones((8, 4)), kiln.device_put(np.ones((4, 16)),
                                                                      P("X", None))),
               "row": x[0]}
        want = {"sin.T": "f32[4@Y,8@X]", "sum0": "f32[4@Y]", "mul": "f32[8@X,4@Y]",
                "radd": "f32[8@X,4@Y]", "outer": "i32[4@X,8@Y]", "gathered": "f32[8,16]",
                "row": "f32[4]"}   # (indexing has no rule here: untyped)
        assert {k: str(kiln.typeof(v)) for k, v in got.items()} == want
        np.testing.assert_allclose(got["sin.T"], np.sin(np.arange(32.0).reshape(8, 4)).T,
                                   rtol=1e-6)
        # the result passed to shard_map without in_specs arrives as blocks, as in JAX
        shapes = kiln.shard_map(lambda b: b * 0 + b.shape[0], out_specs=P("X", "Y"))(got["mul"])
        np.testing.assert_array_equal(shapes, np.full((8, 4), 2.0))

        a = kiln.device_put(np.ones((8, 4)), P(None, "X"))
        b = kiln.device_put(np.ones((4, 16)), P("X", None))
        with pytest.raises(ValueError, match="contracting dimensions are split.*out_sharding"):
            jnp.dot(a, b)
        assert str(kiln.typeof(jnp.dot(a, b, out_sharding=P("X", None)))) == "f32[8@X,16]"
        p = kiln.device_put(np.ones((4, 4)), P("X", None))
        q = kiln.device_put(np.ones((4, 4)), P(None, "X"))
        with pytest.raises(ValueError, match=r"add of operands \[4@X,4\], \[4,4@X\]: the "
                                             r"result would be split over one mesh axis twice"):
            p + q
        with pytest.raises(ValueError, match="dimension 0 is split over different mesh axes"):
            kiln.device_put(np.ones(8), P("X")) * kiln.device_put(np.ones(8), P("Y"))
        # inside auto_axes the axes are Auto: no types, no errors
        assert str(kiln.typeof(auto_axes(lambda u, v: u + v)(p, q, out_sharding=P("X")))) \
            == "f32[4@X,4]"


def test_types_inside_specialisations(capsys):
    """Inside jit (and grad) the rules type intermediate values; jit places typed results;
    reshard and out_sharding= type traced values; transforms' own products stay untyped."""
    with kiln.set_mesh(MESH):
        a = kiln.device_put(np.arange(4).reshape(4, 1), P("X", None))
        b = kiln.device_put(np.arange(8).reshape(1, 8), P(None, "Y"))

        @kiln.jit
        def f(u, v):
            w = u + v
            print(kiln.typeof(w), kiln.typeof(jnp.sin(w).T.sum(0)))
            return w
        out = f(a, b)
        assert capsys.readouterr().out == "i32[4@X,8@Y] f32[4@X]\n"
        assert out.sharding == NamedSharding(MESH, P("X", "Y"))
        np.testing.assert_array_equal(out, np.arange(4)[:, None] + np.arange(8))

        x = kiln.device_put(np.arange(8.0), P("X"))
        twice = kiln.jit(lambda v: kiln.shard_map(lambda blk: blk * 0 + blk.shape[0],
                                                  out_specs=P("X"))(v * 2))
        np.testing.assert_array_equal(twice(x), np.full(8, 2.0))   # blocks of 2, as in JAX
        g = kiln.jit(kiln.grad(lambda v: jnp.sum(jnp.sin(v) * 2)))(x)
        assert str(kiln.typeof(g)) == "f32[8@X]"
        np.testing.assert_allclose(g, 2 * np.cos(np.arange(8.0)), rtol=1e-6)

        p = kiln.device_put(np.ones((8, 4)), P(None, "X"))
        q = kiln.device_put(np.ones((4, 16)), P("X", None))
        r = kiln.jit(lambda u, v: jnp.dot(u, v, out_sharding=P("X", None)))(p, q)
        assert str(kiln.typeof(r)) == "f32[8@X,16]"
        np.testing.assert_array_equal(r, np.full((8, 16), 4.0))
        # a weight gradient contracts the split batch dimension: untyped, no error
        batch = kiln.device_put(np.ones((8, 4), np.float32), P("X"))
        w = kiln.jit(kiln.grad(lambda w, xb: jnp.sum(xb @ w)))(np.ones((4, 2), np.float32),
                                                                batch)
        np.testing.assert_array_equal(w, np.full((4, 2), 8.0))

        @kiln.jit
        def moved(v):
            with use_abstract_mesh(AbstractMesh((8,), ("A",), (AxisType.Explicit,))):
                y = reshard(v, P("A", None))
                print(kiln.typeof(y))
                return y
        moved(kiln.device_put(np.ones((8, 4)), P("X", "Y")))
        assert capsys.readouterr().out == "f32[8@A,4]\n"
