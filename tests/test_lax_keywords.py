"""JAX 0.10's keywords of kiln.lax and the `out_sharding=` / `sharding=` keywords of lax,
kiln.numpy and kiln.random, against JAX 0.10.2: `allow_negative_indices=` of the
dynamic_slice / dynamic_update_slice family (static negative indices wrap or are a
ValueError, traced ones wrap or clamp), `dimension_numbers=` of `lax.dot`, `out_dtype=` of
`lax.mul`; eagerly, under jit, vmap and grad; and the results' shardings on kiln's CPU
devices."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.sharding import P, NamedSharding

MESH = kiln.make_mesh((4, 2), ("X", "Y"))
X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _both(call):
    """call(lax module) for JAX's lax and kiln's: the results, or the errors' (type, text)."""
    out = []
    for mod in (jax.lax, lax):
        try:
            out.append(np.asarray(call(mod)))
        except (ValueError, TypeError) as e:
            out.append((type(e), str(e).split("\n")[0]))
    return out


@pytest.mark.parametrize("allow", [True, False, (True, False), (False, True)])
@pytest.mark.parametrize("starts", [(-1, 1), (1, -2), (np.int32(-1), np.int32(1)), (2, 3)])
def test_dynamic_slice_allow_negative_indices(allow, starts):
    want, got = _both(lambda m: m.dynamic_slice(X, starts, (2, 2),
                                                allow_negative_indices=allow))
    if isinstance(want, tuple):
        assert got == want and "allow_negative_indices=False" in want[1]
    else:
        np.testing.assert_array_equal(got, want)
    # traced starts: wrapped where allowed, else clamped into range by the primitive
    traced = np.array(starts, np.int32)
    want = jax.jit(lambda s: jax.lax.dynamic_slice(X, s, (2, 2),
                                                   allow_negative_indices=allow))(traced)
    got = kiln.jit(lambda s: lax.dynamic_slice(X, s, (2, 2),
                                               allow_negative_indices=allow))(traced)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("allow", [True, False])
@pytest.mark.parametrize("index", [-1, 1, np.int32(-2)])
def test_in_dim_forms_and_updates_allow_negative_indices(allow, index):
    u = np.full((3, 1), 7.0, np.float32)
    calls = [
        lambda m, i: m.dynamic_slice_in_dim(X, i, 2, axis=1, allow_negative_indices=allow),
        lambda m, i: m.dynamic_index_in_dim(X, i, 0, False, allow_negative_indices=allow),
        lambda m, i: m.dynamic_update_slice(X, u, (0, i), allow_negative_indices=allow),
        lambda m, i: m.dynamic_update_slice_in_dim(X, u, i, 1,
                                                   allow_negative_indices=allow),
        lambda m, i: m.dynamic_update_index_in_dim(X, u[:, 0], i, 1,
                                                   allow_negative_indices=allow),
    ]
    for call in calls:
        want, got = _both(lambda m: call(m, index))
        if isinstance(want, tuple):
            assert got == want
        else:
            np.testing.assert_array_equal(got, want)
        i = np.int32(index)
        want = jax.jit(lambda j: call(jax.lax, j))(i)
        np.testing.assert_array_equal(kiln.jit(lambda j: call(lax, j))(i), want)
        idx = np.array([-1, 0, 1], np.int32)
        want = jax.vmap(lambda j: call(jax.lax, j))(idx)
        np.testing.assert_array_equal(kiln.vmap(lambda j: call(lax, j))(idx), want)


def test_allow_negative_indices_gradients_and_misuse():
    def loss(m, x, i):
        return (m.dynamic_slice_in_dim(x, i, 2, allow_negative_indices=False) ** 2).sum()
    for i in (np.array(-1, np.int32), np.array(2, np.int32)):   # arrays: clamped
        np.testing.assert_array_equal(kiln.grad(lambda x: loss(lax, x, i))(X[0]),
                                      jax.grad(lambda x: loss(jax.lax, x, i))(X[0]))
    with pytest.raises(ValueError, match=r"lax.dynamic_slice: allow_negative_indices="
                                         r"\(True, False, True\) has 3 entries for an operand "
                                         r"of 2 dimensions .*one per dimension"):
        lax.dynamic_slice(X, (0, 0), (1, 1), allow_negative_indices=(True, False, True))


def test_dot_dimension_numbers():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(40, dtype=np.float32).reshape(2, 4, 5)
    dn = (((2,), (1,)), ((0,), (0,)))
    want = jax.lax.dot(a, b, dimension_numbers=dn)
    np.testing.assert_array_equal(lax.dot(a, b, dimension_numbers=dn), want)
    np.testing.assert_array_equal(
        kiln.jit(lambda p, q: lax.dot(p, q, dimension_numbers=dn))(a, b), want)
    np.testing.assert_array_equal(
        kiln.vmap(lambda p, q: lax.dot(p, q, dimension_numbers=(((1,), (0,)), ((), ()))))(
            a, b), want)
    g = kiln.grad(lambda p: lax.dot(p, b, dimension_numbers=dn).sum())(a)
    np.testing.assert_array_equal(g, jax.grad(lambda p: jax.lax.dot(
        p, b, dimension_numbers=dn).sum())(a))
    got = lax.dot(X, X[0], preferred_element_type=np.float32)   # matrix-vector, as before
    np.testing.assert_array_equal(got, jax.lax.dot(X, X[0]))
    want, got = _both(lambda m: m.dot(a, b))
    assert got == want and want[0] is ValueError and "dimension_numbers must be specified" \
        in want[1] and "lhs_shape=(2, 3, 4) rhs_shape=(2, 4, 5)" in want[1]
    want, got = _both(lambda m: m.dot(X, X))        # mismatched contraction: the same error
    assert got == want


def test_mul_out_dtype():
    a, b = np.int8([1, 2, 100]), np.int8([100, 100, 2])
    cases = [(a, b, np.int32), (np.float32(1.1), np.float32(3), np.float16),
             (a, np.float32(2.0), np.float32), (2, 3, np.float32), (2.5, np.ones(2, np.float16),
                                                                   np.float32)]
    for x, y, dt in cases:
        want, got = jax.lax.mul(x, y, out_dtype=dt), lax.mul(x, y, out_dtype=dt)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    np.testing.assert_array_equal(
        kiln.jit(lambda p, q: lax.mul(p, q, out_dtype=np.int32))(a, b),
        jax.lax.mul(a, b, out_dtype=np.int32))
    np.testing.assert_array_equal(kiln.vmap(lambda p, q: lax.mul(p, q, out_dtype=np.int16))(
        a, b), jax.vmap(lambda p, q: jax.lax.mul(p, q, out_dtype=np.int16))(a, b))
    xs = (np.ones(3, np.float16), np.ones(3, np.float16) * 2)
    want = jax.grad(lambda p, q: jax.lax.mul(p, q, out_dtype=np.float32).sum())(*xs)
    got = kiln.grad(lambda p, q: lax.mul(p, q, out_dtype=np.float32).sum())(
        *xs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    for call in (lambda m: m.mul(a, np.float32(2.0)),
                 lambda m: m.mul(np.ones(2, bool), np.ones(2, bool), out_dtype=np.int32)):
        want, got = _both(call)
        assert got[0] is want[0] is TypeError
    assert _both(lambda m: m.mul(np.ones(2, bool), a[:2], out_dtype=np.int32))[1][1] == (
        "mul does not accept dtype bool at position 0. Accepted dtypes at position 0 are "
        "subtypes of integer, floating, complexfloating.")


# ------------------------------------------------------------------------- out_sharding

def _key(mod):
    return mod.random.key(0)


V = np.arange(32.0, dtype=np.float32).reshape(8, 4)
# (the samplers compiled here are the cheap ones; test_every_sampler_takes_out_sharding places
# every sampler's draws eagerly)
SHARDED = {   # name: (call(module, key, v, **sharding keyword), the result's type with P("X"))
    "lax.broadcast": (lambda m, k, v, **s: m.lax.broadcast(v[0, 0], (8, 2), **s),
                      "f32[8@X,2]"),
    "lax.reduce": (lambda m, k, v, **s: m.lax.reduce(v, np.float32(0), m.lax.add, (1,), **s),
                   "f32[8@X]"),
    "lax.reduce_sum": (lambda m, k, v, **s: m.lax.reduce_sum(v, (1,), **s), "f32[8@X]"),
    "lax.reshape": (lambda m, k, v, **s: m.lax.reshape(v, (8, 2, 2), **s), "f32[8@X,2,2]"),
    "numpy.bincount": (lambda m, k, v, **s: m.numpy.bincount(
        m.numpy.astype(v[:, 0], np.int32) % 3, length=8, **s), "i32[8@X]"),
    "numpy.percentile": (lambda m, k, v, **s: m.numpy.percentile(v.T, 30.0, axis=0, **s),
                         "f32[8@X]"),
    "random.bits": (lambda m, k, v, **s: m.random.bits(k, (8,), **s), "u32[8@X]"),
    "random.cauchy": (lambda m, k, v, **s: m.random.cauchy(k, (8,), **s), "f32[8@X]"),
}


@pytest.mark.parametrize("name", sorted(SHARDED))
def test_out_sharding_places_results(name):
    call, typed = SHARDED[name]
    plain = call(kiln, _key(kiln), jnp.asarray(V))
    want = call(jax, _key(jax), jjnp.asarray(V))
    np.testing.assert_allclose(np.asarray(plain), np.asarray(want), rtol=2e-6, atol=1e-6)
    with kiln.set_mesh(MESH):
        placed = call(kiln, _key(kiln), jnp.asarray(V), out_sharding=P("X"))
        assert str(kiln.typeof(placed)) == typed
        assert placed.sharding == NamedSharding(MESH, P("X"))
        np.testing.assert_array_equal(placed, plain)
        traced = kiln.jit(lambda k, v: call(kiln, k, v, out_sharding=P("X")))(_key(kiln), V)
        assert str(kiln.typeof(traced)) == typed
        np.testing.assert_array_equal(traced, plain)
    where = NamedSharding(MESH, P(None, "Y")) if len(plain.shape) > 1 else \
        NamedSharding(MESH, P("Y"))
    assert call(kiln, _key(kiln), jnp.asarray(V), out_sharding=where).sharding == where


def test_iota_and_constants_under_jit():
    """broadcasted_iota places its result; inside jit a value that depends on no argument is
    computed while tracing, placed, and comes out untyped (docs/pmap.md)."""
    with kiln.set_mesh(MESH):
        iota = lax.broadcasted_iota(np.int32, (8, 3), 1, out_sharding=P("X"))
        assert str(kiln.typeof(iota)) == "i32[8@X,3]"
        np.testing.assert_array_equal(iota, jax.lax.broadcasted_iota(np.int32, (8, 3), 1))
        inside = kiln.jit(lambda: lax.broadcasted_iota(np.int32, (8, 3), 1,
                                                       out_sharding=P("X")))()
        assert str(kiln.typeof(inside)) == "i32[8,3]"
        np.testing.assert_array_equal(inside, iota)


def test_every_sampler_takes_out_sharding():
    names = ("ball beta bits cauchy chisquare dirichlet exponential f gamma generalized_normal "
             "geometric laplace loggamma logistic lognormal maxwell multivariate_normal "
             "orthogonal pareto poisson rademacher rayleigh t triangular wald").split()
    args = {"ball": (2,), "beta": (2.0, 3.0), "chisquare": (3.0,),
            "dirichlet": (np.ones(3, np.float32),), "f": (2.0, 3.0), "gamma": (2.0,),
            "generalized_normal": (1.5,), "geometric": (0.3,), "loggamma": (2.0,),
            "lognormal": (1.0,), "multivariate_normal": (np.zeros(2, np.float32),
                                                         np.eye(2, dtype=np.float32)),
            "orthogonal": (2,), "pareto": (2.0,), "poisson": (3.0,), "rayleigh": (1.0,),
            "t": (3.0,), "triangular": (0.0, 0.5, 1.0), "wald": (1.0,)}
    key = kiln.random.key(1)
    with kiln.set_mesh(MESH):
        for name in names:
            f = getattr(kiln.random, name)
            plain = f(key, *args.get(name, ()), shape=(8,))
            placed = f(key, *args.get(name, ()), shape=(8,), out_sharding=P("X"))
            assert placed.sharding == NamedSharding(MESH, P("X")), name
            assert str(kiln.typeof(placed)).split("[")[1].startswith("8@X"), name
            np.testing.assert_array_equal(placed, plain)


def test_positional_shardings_and_misuse():
    with kiln.set_mesh(MESH):
        # JAX takes these two positionally too
        r = lax.reduce(np.ones((8, 4), np.float32), np.float32(0), lax.max, (1,), P("X"))
        assert str(kiln.typeof(r)) == "f32[8@X]"
        pair = lax.reduce((np.ones((8, 4)), np.ones((8, 4))), (0.0, 1.0),
                          lambda a, b: (a[0] + b[0], a[1] * b[1]), (1,), P("X"))
        assert [str(kiln.typeof(v)) for v in pair] == ["f32[8@X]", "f32[8@X]"]
        full = lax.full_like(np.ones((8, 4), np.float32), 2, None, None, P(None, "Y"))
        assert str(kiln.typeof(full)) == "f32[8,4@Y]"
        np.testing.assert_array_equal(full, np.full((8, 4), 2.0))
        g = kiln.grad(lambda v: lax.reshape(v, (8, 2), out_sharding=P("X")).sum())(
            np.ones(16, np.float32))
        np.testing.assert_array_equal(g, np.ones(16))
        with pytest.raises(ValueError, match="does not evenly divide"):
            lax.broadcast(np.float32(1), (6,), out_sharding=P("X"))
    with pytest.raises(ValueError, match="needs a mesh"):
        kiln.jit(lambda v: lax.reduce_sum(v, (1,), out_sharding=P("X")))(V)


# --------------------------------------------------------------------- all_gather's to=

LINE = kiln.make_mesh((4,), ("i",), axis_types=(kiln.sharding.AxisType.Auto,))


@pytest.mark.parametrize("to", ["invarying", "reduced"])
@pytest.mark.parametrize("tiled", [True, False])
def test_all_gather_to(to, tiled):
    """Invariant over the gathered axis: returned under out_specs P(); values and gradients
    are JAX 0.10.2's (recorded with four CPU devices: 'reduced' needs Explicit axes there,
    with the same values and psum_scatter derivative)."""
    f = kiln.shard_map(lambda b: lax.all_gather(b, "i", tiled=tiled, to=to), mesh=LINE,
                       in_specs=P("i"), out_specs=P())
    x = np.arange(8.0, dtype=np.float32)
    want = x if tiled else x.reshape(4, 2)
    np.testing.assert_array_equal(f(x), want)
    np.testing.assert_array_equal(kiln.jit(f)(x), want)
    for grad in (kiln.grad(lambda v: jnp.sum(f(v) ** 2)),
                 kiln.jit(kiln.grad(lambda v: jnp.sum(f(v) ** 2)))):
        np.testing.assert_array_equal(grad(x), 2 * x)
    seen = []
    kiln.shard_map(lambda b: seen.append(str(kiln.typeof(lax.all_gather(
        b, "i", tiled=True, to=to)))) or b, mesh=LINE, in_specs=P("i"), out_specs=P("i"))(x)
    assert seen == ["f32[8]"]


def test_all_gather_to_misuse():
    x = np.arange(8.0, dtype=np.float32)
    varying = kiln.shard_map(lambda b: lax.all_gather(b, "i", tiled=True), mesh=LINE,
                             in_specs=P("i"), out_specs=P())
    with pytest.raises(ValueError, match="the value varies over 'i'"):
        varying(x)
    with pytest.raises(ValueError, match=r"Got unexpected `to` value 'sum' for "
                                         r"`lax.all_gather`. Allowed `to` values are"):
        kiln.shard_map(lambda b: lax.all_gather(b, "i", to="sum"), mesh=LINE,
                       in_specs=P("i"), out_specs=P())(x)
    with pytest.raises(ValueError, match=r"to='reduced'\) is a Varying -> Reduced collective"
                                         r".*use to='invarying'"):
        kiln.shard_map(lambda b: lax.all_gather(b * 0 + 1.0, "i", to="reduced"), mesh=LINE,
                       in_specs=P(), out_specs=P())(x)
    got = kiln.pmap(lambda b: lax.all_gather(b, "i", to="invarying"), axis_name="i")(
        np.arange(4.0))
    np.testing.assert_array_equal(got, np.tile(np.arange(4.0), (4, 1)))
