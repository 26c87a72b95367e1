"""Derivative rules of the structural and indexing primitives (compiler/primitives/structural.py
and indexing.py): JVP and VJP to second order against finite differences (`check_grads`, every
mode pair) on hypothesis-drawn shapes, including 0- and 1-sized axes, and params.

The primitives here are linear in their differentiable operands except scatter_mul/min/max; for
the linear ones the tests also check exactly that the JVP is the primitive applied to the
tangent and that the VJP is its transpose: <ct, J t> == <J^T ct, t>. Values are distinct and
away from zero, so scatter_min/max have no ties and scatter_mul no zero division within the
finite-difference step; ties, zeros and out-of-bounds windows get explicit cases, with the
expected numbers from JAX 0.10.2 where JAX's rule applies.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
from kiln import lax
from kiln.compiler.primitives import structural, indexing
from kiln.compiler.primitives.core import Primitive, JVP, VJP
from kiln.test_util import check_grads

EXAMPLES = settings(max_examples=12)
DTYPES = st.sampled_from([np.float64, np.complex128])


pytestmark = pytest.mark.usefixtures("x64")  # second-order finite differences want float64


# ----------------------------------------------------------------------------- helpers

def _distinct(rng, *shapes, dtype=np.float64):
    """Arrays of the given shapes whose values are pairwise distinct (0.25 apart at least)
    and at least 0.25 from zero, both signs; complex values get a random imaginary part."""
    sizes = [int(np.prod(s)) for s in shapes]
    n = sum(sizes)
    vals = (rng.permutation(n) + 1) * 0.25 * rng.choice([-1.0, 1.0], n)
    if np.dtype(dtype).kind == "c":
        vals = vals + 1j * rng.standard_normal(n)
    out, start = [], 0
    for s, k in zip(shapes, sizes):
        out.append(vals[start:start + k].reshape(s).astype(dtype))
        start += k
    return out


def _check_smooth_linear(f, *args):
    """Second-order `check_grads` in every mode pair, then the exact linear checks."""
    check_grads(f, args, order=2)
    _check_linear(f, list(args))


def _check_linear(f, args):
    """For f linear in all of `args`: its JVP is f applied to the tangents, and its VJP is the
    transpose of its JVP (<ct, J t> == <J^T ct, t>, the plain bilinear pairing)."""
    rng = np.random.default_rng(1)
    tangents = [_rand_like(rng, a) for a in args]
    out, t_out = kiln.jvp(f, tuple(args), tuple(tangents))
    np.testing.assert_allclose(np.asarray(t_out), np.asarray(f(*tangents)), rtol=1e-12,
                               atol=1e-12)
    ct = _rand_like(rng, out)
    cts = kiln.vjp(f, *args)[1](ct)
    for c, a in zip(cts, args):
        assert np.shape(c) == np.shape(a) and np.asarray(c).dtype == np.asarray(a).dtype
    lhs = np.sum(ct * np.asarray(t_out))
    rhs = sum(np.sum(np.asarray(c) * t) for c, t in zip(cts, tangents))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-10)


def _rand_like(rng, x):
    x = np.asarray(x)
    r = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        r = r + 1j * rng.standard_normal(x.shape)
    return r.astype(x.dtype)


shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2**16)


# ----------------------------------------------------------------------------- completeness

def test_every_structural_and_indexing_primitive_has_rules():
    for module in (structural, indexing):
        prims = [p for p in vars(module).values() if isinstance(p, Primitive)]
        assert prims
        for p in prims:
            assert p.zero_derivative or (p in JVP and p in VJP), p.name


# ------------------------------------------------------------------------------ structural

def test_iota_has_zero_derivative():
    assert structural.iota.zero_derivative

    def f(x):
        return x * lax.broadcasted_iota(np.float64, (2, 3), 1)
    check_grads(f, (np.ones((2, 3)),), order=2)
    assert np.array_equal(kiln.grad(lambda x: (f(x) * f(x)).sum())(np.ones((2, 3))),
                          2 * np.array([[0.0, 1, 4]] * 2))


@st.composite
def broadcast_cases(draw):
    x_shape = draw(shapes)
    out_rank = draw(st.integers(len(x_shape), 4))
    dims = sorted(draw(st.permutations(range(out_rank)))[:len(x_shape)])
    out = [draw(st.integers(0, 3)) for _ in range(out_rank)]
    for n, d in zip(x_shape, dims):
        out[d] = n if n != 1 else draw(st.integers(0, 3))
    return x_shape, tuple(out), tuple(dims)


@EXAMPLES
@given(broadcast_cases(), DTYPES, seeds)
def test_broadcast_in_dim(case, dtype, seed):
    x_shape, shape, dims = case
    x, = _distinct(np.random.default_rng(seed), x_shape, dtype=dtype)

    def f(x):
        return lax.broadcast_in_dim(x, shape, dims)
    _check_smooth_linear(f, x)


@EXAMPLES
@given(shapes, st.data(), DTYPES, seeds)
def test_reshape(shape, data, dtype, seed):
    n = int(np.prod(shape))
    new = data.draw(st.sampled_from([(n,), shape[::-1], (1,) + shape, shape + (1, 1)]))
    dims = data.draw(st.none() | st.permutations(range(len(shape))).map(tuple))
    x, = _distinct(np.random.default_rng(seed), shape, dtype=dtype)

    def f(x):
        return lax.reshape(x, new, dims)
    _check_smooth_linear(f, x)


@EXAMPLES
@given(shapes, st.data(), DTYPES, seeds)
def test_transpose_squeeze_rev(shape, data, dtype, seed):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    flips = tuple(sorted(data.draw(st.sets(st.sampled_from(range(len(shape))))))) if shape else ()
    x, = _distinct(np.random.default_rng(seed), shape, dtype=dtype)
    ones = tuple(i for i, n in enumerate(shape) if n == 1)
    squeezed = tuple(sorted(data.draw(st.sets(st.sampled_from(ones))))) if ones else ()

    after = tuple(sorted(perm.index(i) for i in squeezed))  # renumbered by the transpose

    def f(x):
        return lax.squeeze(lax.rev(lax.transpose(x, perm), flips), after)
    _check_smooth_linear(f, x)


@st.composite
def slice_cases(draw):
    shape = draw(shapes)
    starts, limits, strides = [], [], []
    for n in shape:
        s = draw(st.integers(0, n))
        starts.append(s)
        limits.append(draw(st.integers(s, n)))
        strides.append(draw(st.integers(1, 3)))
    return shape, tuple(starts), tuple(limits), draw(st.none() | st.just(tuple(strides)))


@EXAMPLES
@given(slice_cases(), DTYPES, seeds)
def test_slice(case, dtype, seed):
    shape, starts, limits, strides = case
    x, = _distinct(np.random.default_rng(seed), shape, dtype=dtype)

    def f(x):
        return lax.slice(x, starts, limits, strides)
    _check_smooth_linear(f, x)


@st.composite
def pad_cases(draw):
    shape = draw(shapes)
    config = []
    for n in shape:
        interior = draw(st.integers(0, 2))
        span = n + max(n - 1, 0) * interior
        lo = draw(st.integers(-span, 3))
        hi = draw(st.integers(-(span + lo), 3))  # the padded size is at least 0
        config.append((lo, hi, interior))
    return shape, tuple(config)


@EXAMPLES
@given(pad_cases(), DTYPES, seeds)
def test_pad(case, dtype, seed):
    shape, cfg = case
    x, v = _distinct(np.random.default_rng(seed), shape, (), dtype=dtype)

    def f(x, v):
        return lax.pad(x, v, cfg)
    _check_smooth_linear(f, x, v)


@pytest.mark.parametrize("cfg", [((-1, 2, 1), (-2, -1, 2)), ((-4, 3, 1), (0, -7, 3)),
                                 ((1, 2, 0), (0, 0, 1)), ((-2, -1, 0), (0, 0, 0))])
def test_pad_negative_and_interior_cotangents(cfg):
    x = np.arange(12.0).reshape(3, 4)

    def f(x, v):
        return lax.pad(x, v, cfg)
    out = np.asarray(f(x, 0.5))
    ct = np.arange(out.size, dtype=np.float64).reshape(out.shape) + 1
    ct_x, ct_v = kiln.vjp(f, x, 0.5)[1](ct)
    # Each operand element's cotangent is the cotangent where it lands, 0 if cropped; the
    # padding value's is the rest. Located by padding a marker array.
    marks = np.asarray(lax.pad(np.arange(1.0, 13.0).reshape(3, 4), 0.0, cfg))
    want = np.zeros(12)
    for m, c in zip(marks.ravel(), ct.ravel()):
        if m:
            want[int(m) - 1] = c
    np.testing.assert_array_equal(np.asarray(ct_x), want.reshape(3, 4))
    np.testing.assert_allclose(ct_v, ct[marks == 0].sum())


@st.composite
def concatenate_cases(draw):
    rank = draw(st.integers(1, 3))
    dim = draw(st.integers(0, rank - 1))
    base = [draw(st.integers(0, 3)) for _ in range(rank)]
    sizes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    return [tuple(s if i == dim else b for i, b in enumerate(base)) for s in sizes], dim


@EXAMPLES
@given(concatenate_cases(), DTYPES, seeds)
def test_concatenate(case, dtype, seed):
    shapes_, dim = case
    xs = _distinct(np.random.default_rng(seed), *shapes_, dtype=dtype)

    def f(*xs):
        return lax.concatenate(xs, dim)
    _check_smooth_linear(f, *xs)


# ------------------------------------------------------------------------- dynamic slices

@st.composite
def dynamic_slice_cases(draw):
    shape = draw(shapes)
    sizes = tuple(draw(st.integers(0, n)) for n in shape)
    starts = tuple(draw(st.integers(-2, n + 2)) for n in shape)  # out of range: clamped
    return shape, sizes, starts


@EXAMPLES
@given(dynamic_slice_cases(), DTYPES, seeds)
def test_dynamic_slice(case, dtype, seed):
    shape, sizes, starts = case
    x, = _distinct(np.random.default_rng(seed), shape, dtype=dtype)

    def f(x):
        return lax.dynamic_slice(x, starts, sizes)
    _check_smooth_linear(f, x)


@EXAMPLES
@given(dynamic_slice_cases(), DTYPES, seeds)
def test_dynamic_update_slice(case, dtype, seed):
    shape, sizes, starts = case
    x, u = _distinct(np.random.default_rng(seed), shape, sizes, dtype=dtype)

    def f(x, u):
        return lax.dynamic_update_slice(x, u, starts)
    _check_smooth_linear(f, x, u)


def test_dynamic_slice_traced_start():
    x = np.arange(10.0)

    def f(x, s):
        i = lax.convert_element_type(lax.round(s), np.int32)
        return lax.dynamic_update_slice(x, lax.dynamic_slice(x, (i,), (3,)) * 2.0, (i + 1,))
    check_grads(f, (x, 8.0), order=2)  # start 9 clamps to 7
    check_grads(kiln.jit(f), (x, 8.0), order=2)
    g = kiln.grad(lambda x, s: f(x, s).sum(), argnums=(0, 1))(x, 8.0)
    np.testing.assert_array_equal(g[0], [1, 1, 1, 1, 1, 1, 1, 0, 0, 0] + np.array(
        [0, 0, 0, 0, 0, 0, 0, 2, 2, 2]))
    assert g[1] == 0


# --------------------------------------------------------------------------- gather/scatter

@st.composite
def gather_cases(draw, max_index_range=2):
    """(operand shape, indices, GatherDimensionNumbers, slice_sizes, output shape)."""
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0, 3)) for _ in range(rank))
    n_idx = draw(st.integers(0, rank))
    start_index_map = tuple(draw(st.permutations(range(rank)))[:n_idx])
    sizes = tuple(draw(st.integers(0, n)) for n in shape)
    ones = [i for i in range(rank) if sizes[i] == 1]
    collapsed = tuple(sorted(draw(st.sets(st.sampled_from(ones))))) if ones else ()
    batch = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    offset = [z for i, z in enumerate(sizes) if i not in collapsed]
    out_rank = len(batch) + len(offset)
    offset_dims = tuple(sorted(draw(st.permutations(range(out_rank)))[:len(offset)]))
    seed = draw(seeds)
    rng = np.random.default_rng(seed)
    hi = max(shape) + max_index_range
    indices = rng.integers(-max_index_range, hi, batch + (n_idx,)).astype(np.int32)
    b, o = iter(batch), iter(offset)
    out_shape = tuple(next(o) if i in offset_dims else next(b) for i in range(out_rank))
    dn = lax.GatherDimensionNumbers(offset_dims, collapsed, start_index_map)
    return shape, indices, dn, sizes, out_shape


@EXAMPLES
@given(gather_cases(), st.sampled_from(["clip", "fill", "promise_in_bounds"]), DTYPES, seeds)
def test_gather(case, mode, dtype, seed):
    shape, indices, dn, sizes, _ = case
    x, = _distinct(np.random.default_rng(seed), shape, dtype=dtype)

    def f(x):  # fill_value 0 keeps it linear; other fill values are constants
        return lax.gather(x, indices, dn, sizes, mode=mode, fill_value=0)
    _check_smooth_linear(f, x)

    def g(x):
        return lax.gather(x, indices, dn, sizes, mode=mode, fill_value=-3.0)
    check_grads(g, (x,), order=2)


def _scatter_dn(dn):
    return lax.ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims,
                                       dn.start_index_map)


SCATTER_MODES = st.sampled_from(["clip", "drop", "promise_in_bounds"])


@EXAMPLES
@given(gather_cases(max_index_range=1), SCATTER_MODES,
       st.sampled_from(["scatter_add", "scatter"]), DTYPES, seeds)
def test_linear_scatters(case, mode, name, dtype, seed):
    shape, indices, dn, _, u_shape = case
    x, u = _distinct(np.random.default_rng(seed), shape, u_shape, dtype=dtype)
    op = getattr(lax, name)

    def f(x, u):
        return op(x, indices, u, _scatter_dn(dn), mode=mode)
    _check_smooth_linear(f, x, u)


@EXAMPLES
@given(gather_cases(max_index_range=1), SCATTER_MODES,
       st.sampled_from(["scatter_mul", "scatter_min", "scatter_max"]), DTYPES, seeds)
def test_nonlinear_scatters(case, mode, name, dtype, seed):
    shape, indices, dn, _, u_shape = case
    x, u = _distinct(np.random.default_rng(seed), shape, u_shape, dtype=dtype)
    op = getattr(lax, name)

    def f(x, u):
        return op(x, indices, u, _scatter_dn(dn), mode=mode)
    check_grads(f, (x, u), order=2)


# Cases with repeated indices, overlapping windows, out-of-bounds windows, ties and zeros:
# x is (3, 4); each index row addresses a (1, 2) window.
X = np.array([[0.3, -1.2, 0.8, 1.5], [-0.4, 0.9, -2.0, 0.1], [1.1, -0.6, 0.7, -1.3]])
IDX = np.array([[1, 1], [1, 1], [1, 0], [2, 2], [0, 3], [-1, 1], [2, 3]], np.int32)
U = np.array([[0.5, -0.7], [0.5, -0.7], [1.4, 0.2], [0.7, 2.5], [-0.9, 0.6], [1.8, -1.1],
              [0.4, 0.3]])  # rows 0 and 1 tie; U[3, 0] ties with X[2, 2]
DN = lax.ScatterDimensionNumbers((1,), (0,), (0, 1))


def _jvp_vjp(name, mode, x=X, u=U):
    op = getattr(lax, name)

    def f(x, u):
        return op(x, IDX, u, DN, mode=mode)
    rng = np.random.default_rng(7)
    tx, tu, ct = rng.standard_normal(X.shape), rng.standard_normal(U.shape), \
        rng.standard_normal(X.shape)
    _, t_out = kiln.jvp(f, (x, u), (tx, tu))
    return (tx, tu, ct), np.asarray(t_out), [np.asarray(c) for c in kiln.vjp(f, x, u)[1](ct)]


def test_scatter_repeated_indices_last_update_wins():
    (tx, tu, ct), t_out, (ct_x, ct_u) = _jvp_vjp("scatter", "drop")
    # Out-of-bounds windows (rows 4: columns 3:5, 5: row -1, 6: columns 3:5) are dropped; rows
    # 0 and 1 both write [1, 1:3], then row 2 writes [1, 0:2]: the last write wins.
    want = tx.copy()
    want[1, 0:2], want[1, 2], want[2, 2:4] = tu[2], tu[1, 1], tu[3]
    np.testing.assert_allclose(t_out, want)
    want_x = ct.copy()
    want_x[1, 0:3] = 0
    want_x[2, 2:4] = 0
    want_u = np.zeros_like(U)
    want_u[2], want_u[1, 1], want_u[3] = ct[1, 0:2], ct[1, 2], ct[2, 2:4]
    np.testing.assert_allclose(ct_x, want_x)
    np.testing.assert_allclose(ct_u, want_u)


def test_scatter_extremum_ties_share_like_jax():
    # JAX's convention (the numbers agree with JAX 0.10.2's in mode "fill"): candidates equal
    # to the result share its derivative equally, the operand element included.
    for name in ("scatter_min", "scatter_max"):
        (tx, tu, ct), t_out, (ct_x, ct_u) = _jvp_vjp(name, "drop")
        out = np.asarray(getattr(lax, name)(X, IDX, U, DN, mode="drop"))
        # Element [2, 2]: X 0.7 ties U[3, 0] 0.7 (for both min and max): half each.
        np.testing.assert_allclose(t_out[2, 2], (tx[2, 2] + tu[3, 0]) / 2)
        np.testing.assert_allclose([ct_x[2, 2], ct_u[3, 0]], [ct[2, 2] / 2] * 2)
        # Element [1, 1] (rows 0, 1 tie at 0.5, row 2 offers 0.2, X has 0.9).
        winners = [(0, 0), (1, 0)] if out[1, 1] == 0.5 else [(2, 1)] if out[1, 1] == 0.2 else []
        share = [tu[w] for w in winners] or [tx[1, 1]]
        np.testing.assert_allclose(t_out[1, 1], np.mean(share))
        for w in winners:
            np.testing.assert_allclose(ct_u[w], ct[1, 1] / len(winners))
        # Dropped updates get nothing.
        np.testing.assert_array_equal(ct_u[4:6], 0)


def test_complex_scatter_extremum_ties_share_like_jax():
    # Complex values in their lexicographic order; z[2] ties w[2] (w[3] = 9j has a smaller real
    # part). The numbers are JAX 0.10.2's, eagerly and under jit.
    z = np.array([1 + 2j, 3 - 1j, 0.5 + 0.5j], np.complex64)
    w = np.array([2, 3 - 2j, 0.5 + 0.5j, 9j], np.complex64)
    tz, tw = np.array([1 + 1j, 2, 3j], np.complex64), np.array([1, 2j, 3, 4 + 4j], np.complex64)
    c = np.array([1 - 2j, 0.5 + 1j, 2 + 3j], np.complex64)
    i = np.array([0, 1, 2, 2])
    want = {"max": ([2, 3 - 1j, 0.5 + 0.5j], [1, 2, 1.5 + 1.5j],
                    [0, 0.5 + 1j, 1 + 1.5j], [1 - 2j, 0, 1 + 1.5j, 0]),
            "min": ([1 + 2j, 3 - 2j, 9j], [1 + 1j, 2j, 4 + 4j],
                    [1 - 2j, 0, 0], [0, 0.5 + 1j, 0, 2 + 3j])}
    for name, (out, t_out, g_z, g_w) in want.items():
        def f(z, w):
            return getattr(z.at[i], name)(w)

        def loss(z, w):
            return kiln.numpy.sum(f(z, w) * c).real
        for run in (lambda g, *a: g(*a), lambda g, *a: kiln.jit(g)(*a)):
            primal, tangent = run(lambda z, w: kiln.jvp(f, (z, w), (tz, tw)), z, w)
            grads = run(kiln.grad(loss, argnums=(0, 1)), z, w)
            for got, expected in zip((primal, tangent, *grads), (out, t_out, g_z, g_w)):
                np.testing.assert_allclose(np.asarray(got), np.array(expected, np.complex64),
                                           rtol=1e-6)


@pytest.mark.parametrize("zeros", [[(0, 0)], [(0, 0), (1, 0)], [(0, 0), (1, 0), (2, 1)],
                                   [(0, 0), (2, 1)]])
def test_scatter_mul_zero_updates(zeros):
    # Element [1, 1] is X[1, 1] * U[0, 0] * U[1, 0] * U[2, 1]; with some of them 0, first and
    # second derivatives are those of that monomial (check_grads' second order alone would
    # not see it: it takes the tangent equal to the primal, 0 at the zeros).
    u = U.copy()
    for z in zeros:
        u[z] = 0.0

    def f(x, u):
        return lax.scatter_mul(x, IDX, u, DN, mode="clip")
    check_grads(f, (X, u), order=2)

    def element(u):
        return f(X, u)[1, 1]
    factors = [(0, 0), (1, 0), (2, 1)]
    hess = np.asarray(kiln.hessian(element)(u))
    grad = np.asarray(kiln.grad(element)(u))
    for a in factors:
        rest = [b for b in factors if b != a]
        np.testing.assert_allclose(grad[a], X[1, 1] * u[rest[0]] * u[rest[1]], rtol=1e-14)
        for b in rest:
            c, = [c for c in rest if c != b]
            np.testing.assert_allclose(hess[a + b], X[1, 1] * u[c], rtol=1e-14)
    assert np.count_nonzero(hess) <= 6


@pytest.mark.parametrize("mode", ["clip", "promise_in_bounds"])
def test_gather_clamped_windows_transpose_to_clamped_scatter(mode):
    # kiln's gather clamps in "promise_in_bounds" as in "clip", so the cotangent of a clamped
    # window lands where the window was read (JAX 0.10.2's promise_in_bounds rule drops it).
    dn = lax.GatherDimensionNumbers((1,), (0,), (0, 1))

    def f(x):
        return lax.gather(x, IDX, dn, (1, 2), mode=mode)
    ct = np.ones((7, 2))
    ct_x = np.asarray(kiln.vjp(f, X)[1](ct)[0])
    want = np.zeros_like(X)
    for r, c in IDX:
        r, c = min(max(r, 0), 2), min(max(c, 0), 2)
        want[r, c:c + 2] += 1
    np.testing.assert_array_equal(ct_x, want)


def test_gather_fill_out_of_bounds_windows_get_no_cotangent():
    dn = lax.GatherDimensionNumbers((1,), (0,), (0, 1))

    def f(x):  # default fill is NaN for the out-of-bounds windows
        return lax.gather(x, IDX, dn, (1, 2), mode="fill")
    out, t = kiln.jvp(f, (X,), (np.ones_like(X),))
    assert np.isnan(np.asarray(out)[4:6]).all()
    np.testing.assert_array_equal(np.asarray(t)[4:6], 0)
    ct_x = np.asarray(kiln.vjp(f, X)[1](np.ones((7, 2)))[0])
    want = np.zeros_like(X)
    for r, c in IDX[[0, 1, 2, 3, 6]]:
        if 0 <= r <= 2 and 0 <= c <= 2:
            want[r, c:c + 2] += 1
    np.testing.assert_array_equal(ct_x, want)


U32 = U[:1].astype(np.float32)
GDN = lax.GatherDimensionNumbers((1,), (0,), (0, 1))


def _pad32(x):
    return lax.pad(x, np.float32(1), ((1, -1, 1), (0, 0, 0))).sum()


def _scatter_max32(x):
    return lax.scatter_max(x, IDX[:1], U32, DN, mode="clip").sum()


def _gather32(x):
    return lax.gather(x, IDX[:3], GDN, (1, 2), mode="clip").sum()


@pytest.mark.parametrize("f", [_pad32, _scatter_max32, _gather32])
def test_float32_cotangents_keep_dtype(f):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = kiln.grad(f)(x)
    assert np.asarray(g).dtype == np.float32 and g.shape == x.shape
