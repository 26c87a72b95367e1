"""shard_map manual over some mesh axes (`axis_names`), nested shard_maps, and the varying
manual axes of values in a body (`typeof(x).manual_axis_type`, `pcast`, `check_vma`),
checked against JAX 0.10.2's results (values computed with NumPy here)."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.sharding import AxisType, NamedSharding, PartitionSpec as P

X = np.arange(64, dtype=np.float32).reshape(8, 8)


@pytest.mark.parametrize("shape", [(2, 4), (4, 2)])
def test_manual_over_x_only(shape, capsys):
    mesh = kiln.make_mesh(shape, ("x", "y"))

    def body(b):
        print(kiln.typeof(b))
        return lax.psum(b, "x") * 2

    f = kiln.shard_map(body, mesh=mesh, in_specs=P("x", None), out_specs=P(None, None),
                       axis_names={"x"})
    rows = 8 // shape[0]
    expect = 2 * X.reshape(shape[0], rows, 8).sum(0)
    for g in (f, kiln.jit(f)):
        np.testing.assert_allclose(np.asarray(g(X)), expect)
    assert capsys.readouterr().out.split() == [f"f32[{rows},8]{{V:x}}"] * 2
    out = f(X)
    assert out.sharding == NamedSharding(mesh, P(None, None))
    # an argument split over the automatic axis y stays so in the body and in the result
    xs = kiln.device_put(X, NamedSharding(mesh, P(None, "y")))
    out = f(xs)
    assert capsys.readouterr().out.split() == [f"f32[{rows},8@y]{{V:x}}"]
    assert out.sharding == NamedSharding(mesh, P(None, "y"))
    assert str(kiln.typeof(out)) == "f32[4,8@y]" if shape[0] == 2 else "f32[2,8@y]"
    g = kiln.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                       axis_names={"x"})
    out = g(xs)
    np.testing.assert_allclose(np.asarray(out), 2 * X)
    assert out.sharding == NamedSharding(mesh, P("x", "y"))


def test_grad_and_vmap_through_partial_shard_map():
    mesh = kiln.make_mesh((2, 4), ("x", "y"))
    f = kiln.shard_map(lambda b: lax.psum(b, "x") * 2, mesh=mesh, in_specs=P("x", None),
                       out_specs=P(), axis_names={"x"})
    grad = kiln.grad(lambda x: f(x).sum())(X)
    np.testing.assert_allclose(np.asarray(grad), np.full((8, 8), 2.0))   # as JAX's
    out = kiln.vmap(f)(np.stack([X, X + 1]))
    np.testing.assert_allclose(np.asarray(out)[1], 2 * (X + 1).reshape(2, 4, 8).sum(0))


def test_nested_shard_maps(capsys):
    mesh = kiln.make_mesh((2, 4), ("x", "y"))

    def outer(b):
        b = kiln.reshard(b, P(None, "y"))

        def inner(c):
            print(kiln.typeof(c))
            return lax.psum(c, "y") + lax.psum(c, "x")
        return kiln.shard_map(inner, in_specs=P(None, "y"), out_specs=P(None, "y"),
                              axis_names={"y"})(b)

    h = kiln.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                       axis_names={"x"})
    with kiln.set_mesh(mesh):
        out = h(X)
    bl = X.reshape(2, 4, 4, 2)                        # [x, rows, y, cols]
    expect = bl.sum(2, keepdims=True) + bl.sum(0, keepdims=True)
    np.testing.assert_allclose(np.asarray(out), expect.reshape(8, 8))
    assert capsys.readouterr().out.split() == ["f32[4,2]{V:(x,y)}"]
    assert out.sharding == NamedSharding(mesh, P("x", "y"))


def test_specs_may_name_only_manual_axes():
    mesh = kiln.make_mesh((2, 4), ("x", "y"))
    with pytest.raises(ValueError, match="'y', which is not manual here"):
        kiln.shard_map(lambda b: b, mesh=mesh, in_specs=P("y"), out_specs=P("y"),
                       axis_names={"x"})(X)
    with pytest.raises(ValueError, match="not axes of the mesh"):
        kiln.shard_map(lambda b: b, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                       axis_names={"z"})(X)


def test_varying_manual_axes_in_types(capsys):
    mesh = kiln.make_mesh((2, 4), ("i", "j"), axis_types=(AxisType.Auto,) * 2)

    @kiln.shard_map(mesh=mesh, in_specs=(P("i", "j"), P()), out_specs=P())
    def f(x, c):
        for name, v in (("x", x), ("c", c), ("psum_j", lax.psum(x, "j")),
                        ("pmax", lax.pmax(x, ("i", "j"))), ("index", lax.axis_index("j")),
                        ("gather", lax.all_gather(x, "i")), ("mixed", x[0] + c[0]),
                        ("pcast", lax.pcast(c, ("j",), to="varying"))):
            print(name, kiln.typeof(v), sorted(kiln.typeof(v).manual_axis_type.varying))
        return lax.psum(x.sum(), ("i", "j"))

    assert float(f(X, np.ones(3, np.float32))) == X.sum()
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines == {
        "x": "f32[4,2]{V:(i,j)} ['i', 'j']", "c": "f32[3] []", "psum_j": "f32[4,2]{V:i} ['i']",
        "pmax": "f32[4,2] []", "index": "i32[]{V:j} ['j']",
        "gather": "f32[2,4,2]{V:(i,j)} ['i', 'j']", "mixed": "f32[2]{V:(i,j)} ['i', 'j']",
        "pcast": "f32[3]{V:j} ['j']"}
    assert kiln.typeof(np.ones(3)).manual_axis_type.varying == set()


def test_check_vma_refuses_an_out_spec_that_drops_a_varying_axis():
    mesh = kiln.make_mesh((2,), ("i",), axis_types=(AxisType.Auto,))
    x = np.arange(6.0, dtype=np.float32)
    f = kiln.shard_map(lambda b: b, mesh=mesh, in_specs=P("i"), out_specs=P())
    with pytest.raises(ValueError, match="replicated across mesh axis 'i', but the value "
                                         "varies over 'i'"):
        f(x)
    with pytest.raises(ValueError, match="check_vma=False"):
        kiln.jit(f)(x)
    loose = kiln.shard_map(lambda b: b, mesh=mesh, in_specs=P("i"), out_specs=P(),
                           check_vma=False)
    np.testing.assert_allclose(np.asarray(loose(x)), x[:3])
    fixed = kiln.shard_map(lambda b: lax.psum(b, "i"), mesh=mesh, in_specs=P("i"),
                           out_specs=P())
    np.testing.assert_allclose(np.asarray(fixed(x)), x[:3] + x[3:])
    # pcast makes an invariant value varying: an out_spec that names the axis takes it
    cast = kiln.shard_map(lambda b: jnp.sin(lax.pcast(b, "i", to="varying")), mesh=mesh,
                          in_specs=P(), out_specs=P("i"))
    np.testing.assert_allclose(np.asarray(cast(x)), np.tile(np.sin(x), 2), rtol=1e-6)


def test_check_vma_looks_into_control_flow():
    """A psum inside scan / while_loop / cond bodies makes their results invariant (as in
    JAX), so out_specs=P() is accepted; a carry that picks up a varying value is varying."""
    mesh = kiln.make_mesh((2,), ("i",), axis_types=(AxisType.Auto,))

    def body(x):
        c, _ = lax.scan(lambda c, xi: (c + lax.psum(xi, "i"), None), jnp.zeros(()), x)
        d = lax.fori_loop(0, 3, lambda k, a: a + lax.psum(x.sum(), "i"), 0.0)
        e = lax.cond(x.sum() > 0, lambda: lax.psum(x.sum(), "i"), lambda: 0.0)
        f = lax.while_loop(lambda c: c < 100.0, lambda c: c + lax.psum(x.sum(), "i"), 1.0)
        return c + d + e + f

    x = np.arange(8.0, dtype=np.float32)
    out = kiln.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P())(x)
    assert float(out) == 28.0 + 3 * 28.0 + 28.0 + 113.0
    leaky = kiln.shard_map(
        lambda x: lax.scan(lambda c, xi: (c + xi, None), jnp.zeros(()), x)[0], mesh=mesh,
        in_specs=P("i"), out_specs=P())
    with pytest.raises(ValueError, match="varies over 'i'"):
        leaky(x)


def test_result_shardings_eager_and_under_jit():
    """As JAX's: eagerly the out_spec as written; under jit typed and placed, padded."""
    mesh = kiln.make_mesh((2, 4), ("x", "y"))
    f = kiln.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    x = kiln.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("x")))
    assert f(x).sharding.spec == P("x") and str(kiln.typeof(f(x))) == "f32[8@x,4]"
    out = kiln.jit(f)(x)
    assert out.sharding == NamedSharding(mesh, P("x", None))
    assert str(kiln.typeof(out)) == "f32[8@x,4]"
    np.testing.assert_allclose(np.asarray(out), 2 * np.ones((8, 4)))


@pytest.mark.parametrize("shape", [(2, 4), (4, 2)])
def test_grad_and_jit_through_nested_shard_maps(shape):
    """(JAX 0.10.2's grad of this raises a DuplicateSpecError; its value and jit agree.)"""
    mesh = kiln.make_mesh(shape, ("x", "y"))

    def outer(b):
        def inner(c):
            return jnp.sin(c) * lax.psum(c, "y") + lax.pmean(c, "x")
        return kiln.shard_map(inner, in_specs=P(None, "y"), out_specs=P(None, "y"),
                              axis_names={"y"})(b)

    h = kiln.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})

    def reference(x):                                  # the same without shard_map
        b = x.reshape(shape[0], 8 // shape[0], shape[1], 8 // shape[1])
        s = jnp.sin(b) * b.sum(2, keepdims=True) + b.mean(0, keepdims=True)
        return s.reshape(8, 8)

    x = np.arange(64.0, dtype=np.float32).reshape(8, 8) / 10
    with kiln.set_mesh(mesh):
        for g in (h, kiln.jit(h)):
            np.testing.assert_allclose(np.asarray(g(x)), np.asarray(reference(x)), rtol=1e-5)
        grad = kiln.grad(lambda x: (h(x) ** 2).sum())(x)
    expect = kiln.grad(lambda x: (reference(x) ** 2).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(expect), rtol=1e-4)


def test_nested_shard_map_over_an_axis_already_manual_is_an_error():
    mesh = kiln.make_mesh((2, 4), ("x", "y"))
    inner = kiln.shard_map(lambda c: c * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                           axis_names={"x"})
    h = kiln.shard_map(inner, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    with pytest.raises(ValueError, match=r"over the mesh axes \['x'\] inside the body of a "
                                         r"shard_map that is already manual over them"):
        h(X)
