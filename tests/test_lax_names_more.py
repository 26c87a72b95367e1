"""kiln.lax's rng_uniform, scaled_dot, pcast, psend/precv and ragged_all_to_all: against JAX
where JAX runs them on the CPU (scaled_dot, rng_uniform's dtypes and errors, pcast's errors),
against a NumPy transcription of JAX's documented semantics where it does not (JAX 0.10.2 runs
psend/precv only on GPUs and has no CPU ragged-all-to-all), eagerly, under jit, shard_map, pmap,
vmap and grad."""
import numpy as np
import pytest

import kiln
from kiln import lax
from kiln.sharding import AxisType, PartitionSpec as P

jax = pytest.importorskip("jax")
jl = jax.lax

RNG = np.random.default_rng(3)


# ------------------------------------------------------------------------- rng_uniform

@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (np.float32(-2), np.float32(5)),
                                    (np.int32(3), np.int32(9)), (np.uint32(1), np.uint32(4)),
                                    (np.float16(0), np.float16(1))])
def test_rng_uniform_dtype_range_and_fresh_draws(lo, hi):
    x = lax.rng_uniform(lo, hi, (2000,))
    want = jl.rng_uniform(lo, hi, (2000,))
    assert (x.dtype, x.weak_type, x.shape) == (want.dtype, want.weak_type, want.shape)
    v = np.asarray(x)
    assert v.min() >= lo and v.max() < hi
    assert abs(v.astype(float).mean() - (float(lo) + float(hi) - (1 if v.dtype.kind in "iu"
                                                                     else 0)) / 2) < 0.1 * (hi - lo)
    assert not np.array_equal(v, np.asarray(lax.rng_uniform(lo, hi, (2000,))))


def test_rng_uniform_under_jit_vmap_and_grad():
    f = kiln.jit(lambda a: (lax.rng_uniform(a, 2.0, (50,)), lax.rng_uniform(a, 2.0, (50,))))
    (x, y), (z, _) = f(1.0), f(1.0)
    assert not np.array_equal(x, y) and not np.array_equal(x, z)   # each draw is its own
    assert 1.0 <= np.asarray(x).min() and np.asarray(x).max() < 2.0
    lanes = np.asarray(kiln.vmap(lambda a: lax.rng_uniform(a, a + 1, (40,)))(
        np.array([0.0, 10.0], np.float32)))
    assert (lanes[1] >= 10).all() and not np.allclose(lanes[1] - 10, lanes[0])
    # a + (b - a) u: d/da = 1 - u, d/db = u, so the two gradients of a sum add up to its size.
    ga, gb = kiln.grad(lambda a, b: lax.rng_uniform(a, b, (8,)).sum(), (0, 1))(1.0, 3.0)
    assert 0 < ga < 8 and 0 < gb < 8 and ga + gb == pytest.approx(8.0)


def test_rng_uniform_errors_match_jax():
    for a, b in [(np.float32(0), np.int32(1)), (np.zeros(2, np.float32), np.ones(2, np.float32))]:
        with pytest.raises(ValueError) as want:
            jl.rng_uniform(a, b, (2,))
        with pytest.raises(ValueError) as got:
            lax.rng_uniform(a, b, (2,))
        assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="integer or floating"):
        lax.rng_uniform(True, True, (2,))


# -------------------------------------------------------------------------- scaled_dot

@pytest.mark.parametrize("shapes", [((3, 8), (8, 5), (3, 2), (2, 5)),
                                    ((2, 3, 8), (2, 8, 5), (2, 3, 4), (2, 2, 5)),
                                    ((1, 4), (4, 0), (1, 2), (2, 0))])
@pytest.mark.parametrize("out", [None, np.float32])
def test_scaled_dot_matches_jax_bits(shapes, out):
    lhs, rhs = (RNG.standard_normal(s).astype(np.float32) for s in shapes[:2])
    ls, rs = (RNG.uniform(0.3, 3, s).astype(np.float32) for s in shapes[2:])
    want = np.asarray(jl.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs,
                                    preferred_element_type=out).astype(np.float32))
    got = lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=rs, preferred_element_type=out)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(got), want)
    jitted = kiln.jit(lambda a, b, c, d: lax.scaled_dot(a, b, lhs_scale=c, rhs_scale=d,
                                                        preferred_element_type=out))
    np.testing.assert_array_equal(np.asarray(jitted(lhs, rhs, ls, rs)), want)
    plain = np.asarray(jl.scaled_dot(lhs, rhs, preferred_element_type=out).astype(np.float32))
    np.testing.assert_array_equal(np.asarray(lax.scaled_dot(lhs, rhs,
                                                            preferred_element_type=out)), plain)


def test_scaled_dot_vmap_grad_and_errors():
    lhs, rhs = RNG.standard_normal((4, 3, 8)).astype(np.float32), \
        RNG.standard_normal((8, 5)).astype(np.float32)
    got = kiln.vmap(lambda a: lax.scaled_dot(a, rhs, preferred_element_type=np.float32))(lhs)
    want = jax.vmap(lambda a: jl.scaled_dot(a, rhs, preferred_element_type=np.float32))(lhs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    g = kiln.grad(lambda a: lax.scaled_dot(a, rhs, preferred_element_type=np.float32).sum())(
        lhs[0])
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(rhs.sum(1), (3, 8)), atol=0.02)
    for args, kw in [((lhs[0, 0], rhs), {}),
                     ((lhs[0], rhs), dict(lhs_scale=np.ones((3, 8), np.float32))),
                     ((lhs[0], rhs), dict(lhs_scale=np.ones((3, 3), np.float32))),
                     ((lhs, rhs), {})]:
        with pytest.raises(TypeError) as want:
            jl.scaled_dot(*args, **kw)
        with pytest.raises(TypeError) as got:
            lax.scaled_dot(*args, **kw)
        assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="float type"):
        lax.scaled_dot(lhs[0], rhs, preferred_element_type=np.int32)


# ----------------------------------------------------------------- named-axis collectives

MESH = kiln.make_mesh((4,), ("i",), axis_types=(AxisType.Auto,))   # (Auto: in_specs over
# Explicit axes must match the arguments' types, as in JAX)


def _sharded(f, *args):
    g = kiln.shard_map(f, mesh=MESH, in_specs=P("i"), out_specs=P("i"))
    eager, jitted = np.asarray(g(*args)), np.asarray(kiln.jit(g)(*args))
    np.testing.assert_array_equal(eager, jitted)
    return eager


def test_pcast_is_the_identity_and_checks_like_jax():
    x = np.arange(8.0, dtype=np.float32)
    for to in ("varying", "reduced", "unreduced"):
        np.testing.assert_array_equal(_sharded(lambda v: lax.pcast(v, "i", to=to) * 2, x), 2 * x)
    grad = kiln.grad(lambda v: kiln.shard_map(lambda b: lax.pcast(b, ("i",), to="varying"),
                                              mesh=MESH, in_specs=P("i"),
                                              out_specs=P("i"))(v).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.ones(8))
    assert lax.pcast(x, (), to="anything") is x
    for axis, to in [({"i"}, "varying"), ("i", "sideways")]:
        with pytest.raises((TypeError, ValueError)) as want:
            jl.pcast(x, axis, to=to)
        with pytest.raises(want.type) as got:
            lax.pcast(x, axis, to=to)
        assert str(got.value).startswith(str(want.value).split(".")[0])
    with pytest.raises(NameError, match="unbound axis name"):
        lax.pcast(x, "i", to="varying")


RING = [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_psend_precv_deliver_the_permuted_values():
    x = np.arange(8.0, dtype=np.float32)

    def step(v, perm):
        token = lax.psend(v, "i", perm)
        return lax.precv(token, kiln.ShapeDtypeStruct(v.shape, v.dtype), "i", perm)
    np.testing.assert_array_equal(_sharded(lambda v: step(v, RING), x), np.roll(x, 2))
    partial = _sharded(lambda v: step(v, [(0, 3)]), x)   # only member 3 receives
    np.testing.assert_array_equal(partial, [0, 0, 0, 0, 0, 0, 0, 1])
    grad = kiln.grad(lambda v: kiln.shard_map(lambda b: step(b, RING) * np.float32([1, 2]),
                                              mesh=MESH, in_specs=P("i"),
                                              out_specs=P("i"))(v).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.tile([1, 2], 4))


def test_precv_errors():
    x = np.arange(8.0, dtype=np.float32)
    spec = kiln.ShapeDtypeStruct((2,), np.float32)
    for f, err, text in [
            (lambda v: lax.precv(lax.create_token(), spec, "i", RING), ValueError, "psend"),
            (lambda v: lax.precv(lax.psend(v, "i", RING), spec, "i", RING[::-1]), ValueError,
             "differ"),
            (lambda v: lax.precv(lax.psend(v, "i", RING), kiln.ShapeDtypeStruct((3,), np.float32),
                                 "i", RING), TypeError, "out_shape")]:
        with pytest.raises(err, match=text):
            _sharded(f, x)


def _ragged_reference(operands, outputs, io, ss, oo, rs):
    """JAX's docstring's SEND/RECEIVE loop, over all members at once."""
    members = len(operands)
    per = len(io[0]) // members
    results = [o.copy() for o in outputs]
    for dst in range(members):
        for i in range(len(io[0])):
            src, t = divmod(i, per)
            j = dst * per + t                      # the sender's entry for this member
            size = rs[dst][i]
            sent = operands[src][io[src][j]:io[src][j] + size]
            results[dst][oo[src][j]:oo[src][j] + size] = sent
    return results


def _ragged_case(members=4, per=2, n=6, m=17):
    """Random ragged exchanges: each member sends `per` slices to every member, written at
    non-overlapping places of the receivers' outputs."""
    count = members * per
    send = RNG.integers(0, 3, (members, count))
    recv = np.stack([send[:, d * per:(d + 1) * per].reshape(-1) for d in range(members)])
    io = np.zeros((members, count), np.int32)
    oo = np.zeros((members, count), np.int32)
    for src in range(members):
        io[src] = RNG.integers(0, n - 2, count)
    for dst in range(members):
        at = np.concatenate([[0], np.cumsum(recv[dst])[:-1]])
        for i in range(count):
            src, t = divmod(i, per)
            oo[src, dst * per + t] = at[i]
    operand = RNG.standard_normal((members, n, 2)).astype(np.float32)
    output = RNG.standard_normal((members, m, 2)).astype(np.float32)
    return operand, output, io, send.astype(np.int32), oo, recv.astype(np.int32)


def test_ragged_all_to_all_docstring_example():
    def f(*args):
        return lax.ragged_all_to_all(*args, axis_name="i")
    args = (np.float32([[1, 2, 2], [3, 4, 0]]), np.zeros((2, 4), np.float32),
            np.int32([[0, 1], [0, 1]]), np.int32([[1, 2], [1, 1]]), np.int32([[0, 0], [1, 2]]),
            np.int32([[1, 1], [2, 1]]))
    want = [[1, 3, 0, 0], [2, 2, 4, 0]]
    np.testing.assert_array_equal(np.asarray(kiln.pmap(f, axis_name="i")(*args)), want)
    np.testing.assert_array_equal(np.asarray(kiln.vmap(f, axis_name="i")(*args)), want)


def test_ragged_all_to_all_matches_the_reference_and_differentiates():
    case = _ragged_case()
    want = _ragged_reference(*case)

    def f(*args):
        return lax.ragged_all_to_all(*args, axis_name="i")
    flat = [a.reshape((-1,) + a.shape[2:]) for a in case]
    got = _sharded(f, *flat).reshape(case[1].shape)
    np.testing.assert_array_equal(got, np.stack(want))
    np.testing.assert_array_equal(np.asarray(kiln.pmap(f, axis_name="i")(*case)), np.stack(want))
    # The derivative is the reference's linear map: d(sum(w * out)) / d operand, d output.
    w = RNG.standard_normal(case[1].shape).astype(np.float32)
    g_op, g_out = kiln.grad(lambda op, out: (kiln.pmap(f, axis_name="i")(
        op, out, *case[2:]) * w).sum(), (0, 1))(case[0], case[1])
    probe_op = _ragged_reference(list(np.ones_like(case[0])), list(np.zeros_like(case[1])),
                                 *case[2:])
    np.testing.assert_array_equal(np.asarray(g_out), np.where(np.stack(probe_op) == 1, 0, w))
    assert np.isclose(np.asarray(g_op).sum(), (w * np.stack(probe_op)).sum(), rtol=1e-5)


def test_ragged_all_to_all_errors():
    x = np.zeros((4, 3), np.float32)
    ok = np.zeros(4, np.int32)
    for args, text in [((x, x, ok.astype(np.float32), ok, ok, ok), "integer type"),
                       ((x, x, ok[None], ok, ok, ok), "rank 1"),
                       ((x, x, ok[:3], ok[:3], ok[:3], ok[:3]), "multiple"),
                       ((x, np.zeros((4, 3, 2), np.float32), ok, ok, ok, ok), "same shape")]:
        with pytest.raises((TypeError, ValueError), match=text):
            kiln.vmap(lambda *a: lax.ragged_all_to_all(*a, axis_name="i"), axis_name="i",
                      in_axes=(0, 0, None, None, None, None))(*args)
