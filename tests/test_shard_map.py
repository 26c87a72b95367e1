"""kiln.shard_map over 1-D and 2-D meshes of CPU devices: blocks in and out by PartitionSpec,
collectives over one or several mesh axes, eagerly (replicas on threads) and under jit (nested
vmaps), against NumPy; the errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax


from kiln.sharding import AxisType, PartitionSpec as P


def Mesh(shape, names):   # noqa: N802 - a mesh of the first devices, as kiln.make_mesh makes
    # (Auto axes: over Explicit ones in_specs must match the arguments' types, as in JAX)
    return kiln.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


MESH = Mesh((2, 4), ("x", "y"))
X = np.arange(64, dtype=np.float32).reshape(8, 8)


def _both(f, *args, mesh=MESH, in_specs, out_specs, check_vma=True):
    eager = kiln.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                           check_vma=check_vma)
    a = np.asarray(eager(*args))
    b = np.asarray(kiln.jit(eager)(*args))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)   # summation orders differ
    return a


def blocks(x, rows, cols):
    """x's blocks, [rows][cols]."""
    return [np.split(r, cols, axis=1) for r in np.split(x, rows, axis=0)]


def test_blocks_and_axis_index():
    out = _both(lambda b: b * 10 + lax.axis_index("x") * 100 + lax.axis_index("y"), X,
                in_specs=P("x", "y"), out_specs=P("x", "y"))
    expect = X * 10 + np.repeat(np.arange(2), 4)[:, None] * 100 + np.repeat(np.arange(4), 2)
    np.testing.assert_allclose(out, expect)


@pytest.mark.parametrize("names, out_spec, expect", [
    (("x", "y"), P(), lambda bl: sum(b for row in bl for b in row)),
    ("x", P(None, "y"), lambda bl: np.concatenate([bl[0][j] + bl[1][j] for j in range(4)], 1)),
    ("y", P("x"), lambda bl: np.concatenate([sum(bl[i]) for i in range(2)], 0)),
])
def test_psum_over_some_mesh_axes(names, out_spec, expect):
    out = _both(lambda b: lax.psum(b, names), X, in_specs=P("x", "y"), out_specs=out_spec)
    np.testing.assert_allclose(out, expect(blocks(X, 2, 4)))


def test_a_dimension_split_over_two_axes_and_replicated_inputs():
    w = np.arange(8, dtype=np.float32)
    out = _both(lambda b, v: b * v, X, w,
                in_specs=(P(("x", "y")), P()), out_specs=P(("x", "y")))
    np.testing.assert_allclose(out, X * w)


def test_other_collectives_on_a_mesh():
    ring = [(i, (i + 1) % 4) for i in range(4)]
    out = _both(lambda b: lax.ppermute(b, "y", ring), X, in_specs=P("x", "y"),
                out_specs=P("x", "y"))
    bl = blocks(X, 2, 4)
    np.testing.assert_allclose(out, np.block([[bl[i][(j - 1) % 4] for j in range(4)]
                                              for i in range(2)]))
    gathered = _both(lambda b: lax.all_gather(b, "x", tiled=True), X, in_specs=P("x"),
                     out_specs=P(), check_vma=False)   # all_gather's result varies over x
    np.testing.assert_allclose(gathered, X)
    scattered = _both(lambda b: lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True), X,
                      in_specs=P("x"), out_specs=P("x", "y"))
    np.testing.assert_allclose(scattered, 4 * X)


def test_data_parallel_gradient_on_a_1d_mesh():
    mesh = Mesh((4,), ("batch",))
    w = np.linspace(-1, 1, 8).astype(np.float32)

    def grads(w, x):
        g = kiln.grad(lambda w: jnp.sum(jnp.tanh(x @ w) ** 2))(w)
        return lax.psum(g, "batch")
    out = _both(grads, w, X, mesh=mesh, in_specs=(P(), P("batch")), out_specs=P())
    whole = kiln.grad(lambda w: jnp.sum(jnp.tanh(X @ w) ** 2))(w)
    np.testing.assert_allclose(out, np.asarray(whole), rtol=1e-5, atol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match=r"not evenly divisible.*dimension 0 \(size 3\)"):
        kiln.shard_map(lambda b: b, mesh=MESH, in_specs=P("x"), out_specs=P("x"))(np.ones((3, 8)))
    with pytest.raises(ValueError, match="names the axis 'z'"):
        kiln.shard_map(lambda b: b, mesh=MESH, in_specs=P("z"), out_specs=P())(X)
    with pytest.raises(ValueError, match="names the mesh axis 'x' twice"):
        kiln.shard_map(lambda b: b, mesh=MESH, in_specs=P("x", "x"), out_specs=P())(X)
    unmeshed = kiln.shard_map(lambda b: b, in_specs=P(), out_specs=P())   # (as JAX: at the call)
    with pytest.raises(ValueError, match="needs a mesh"):
        unmeshed(X)
    with pytest.raises(ValueError, match="needs 16 devices, but only 8"):
        kiln.make_mesh((4, 4), ("a", "b"))
    with pytest.raises(NameError, match="unbound axis name: i"):
        kiln.shard_map(lambda b: lax.psum(b, "i"), mesh=MESH, in_specs=P(), out_specs=P())(X)


def test_decorator_form():
    @kiln.shard_map(mesh=MESH, in_specs=P("x"), out_specs=P("x"))
    def double(b):
        return 2 * b
    np.testing.assert_allclose(np.asarray(double(X)), 2 * X)


def test_make_ir_shows_one_replica():
    f = kiln.shard_map(lambda b: lax.psum(b, "y"), mesh=MESH, in_specs=P("x", "y"),
                       out_specs=P("x"))
    text = str(kiln.make_ir(f)(X))
    assert "psum" in text and "f32[4,2]" in text


def _oracle_blocks(x, spec, shape, names):
    """{mesh coordinates: the block shard_map gives that replica}, by loops over NumPy."""
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    entries += [()] * (x.ndim - len(entries))
    sizes = dict(zip(names, shape))
    out = {}
    for coords in np.ndindex(*shape):
        at = dict(zip(names, coords))
        index = []
        for d, e in enumerate(entries):
            parts, k = 1, 0
            for n in e:
                k, parts = k * sizes[n] + at[n], parts * sizes[n]
            width = x.shape[d] // parts
            index.append(slice(k * width, (k + 1) * width))
        out[coords] = (tuple(index), x[tuple(index)])
    return out


@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (8,), (2, 2), (2, 4), (4, 2)])
def test_every_mesh_shape_and_spec(shape):
    names = ("a", "b")[:len(shape)]
    mesh = Mesh(shape, names)
    x = np.random.default_rng(len(shape)).standard_normal((24, 48)).astype(np.float32)
    for spec in [P(names[0]), P(None, names[-1]), P(names), P(names[::-1]), P(names[0], None)]:
        out = _both(lambda b: b * 2 + lax.psum(b, names), x, mesh=mesh, in_specs=spec,
                    out_specs=spec)
        blocks = _oracle_blocks(x, spec, shape, names)
        total = sum(b for _, b in blocks.values())
        expect = np.empty_like(x)
        for index, b in blocks.values():
            expect[index] = 2 * b + total
        np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-4, err_msg=str(spec))


def test_make_ir_of_pmap():
    text = str(kiln.make_ir(kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i"))(X[:4]))
    assert "psum" in text and "f32[8]" in text


def test_results_carry_their_sharding_and_the_current_mesh_is_used():
    out = kiln.shard_map(lambda b: b + 1, mesh=MESH, in_specs=P("x", "y"),
                         out_specs=P("x", "y"))(X)
    assert out.sharding == kiln.NamedSharding(MESH, P("x", "y"))
    assert len(out.addressable_shards) == 8
    np.testing.assert_array_equal(np.asarray(out.addressable_shards[5].data),
                                  X[4:8, 2:4] + 1)
    with kiln.set_mesh(MESH):
        again = kiln.shard_map(lambda b: b * 2, in_specs=P("x"), out_specs=P("x"))(X)
        np.testing.assert_allclose(np.asarray(again), 2 * X)
        halves = kiln.smap(lambda b: b - b.mean(), in_axes=0, out_axes=0, axis_name="x")(X)
        np.testing.assert_allclose(np.asarray(halves)[:4], X[:4] - X[:4].mean())
