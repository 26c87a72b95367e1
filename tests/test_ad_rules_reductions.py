"""Derivative rules of the reduction, cumulative, dot_general, sort and debug_print primitives.

Every rule is checked by `kiln.test_util.check_grads` to second order in both modes (fwd-of-fwd,
rev-of-fwd, fwd-of-rev, rev-of-rev) against finite differences, on hypothesis-drawn shapes
(sizes 0 and 1 included), axes, scan directions, dimension numbers and sort layouts. Inputs
are drawn away from the points where these functions are not differentiable (ties for max/min
and sort keys), and JAX's conventions at those points (ties share the derivative as JAX's
associative-scan tree splits it, products are right at zeros, infinities in cumlogsumexp,
NaN) are compared with Jacobians and Hessians recorded from JAX 0.10.2 (`JAX_GOLDENS`; kiln
never imports jax).
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.config import config
from kiln.compiler.primitives import callbacks, linalg, reductions, sorting
from kiln.compiler.primitives.core import Primitive, JVP, VJP
from kiln.test_util import check_grads

inf, nan = np.inf, np.nan


@pytest.fixture(autouse=True, scope="module")
def _x64():
    """Float64 throughout: second-order finite differences need the precision."""
    old = config.read("enable_x64")
    config.update("enable_x64", True)
    yield
    config.update("enable_x64", old)


# ------------------------------------------------------------------------------ inputs

def _distinct(rng, shape):
    """Values at least 0.15 apart (no ties within a finite-difference step), shuffled."""
    n = int(np.prod(shape, dtype=np.int64))
    return ((rng.permutation(n) - n / 2) * 0.25 + rng.uniform(-0.05, 0.05, n)).reshape(shape)


def _factors(rng, shape):
    """Magnitudes in [0.5, 1.5], either sign: products stay well scaled."""
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


VALUES = {"reduce_sum": lambda rng, s: rng.randn(*s), "reduce_prod": _factors,
          "reduce_max": _distinct, "reduce_min": _distinct,
          "cumsum": lambda rng, s: rng.randn(*s), "cumprod": _factors, "cummax": _distinct,
          "cummin": _distinct, "cumlogsumexp": lambda rng, s: 2 * rng.randn(*s)}

# Each example compiles second-order derivatives of its own shape: fewer examples than the
# profile's default keep the file fast.
few = settings(max_examples=min(20, settings.default.max_examples))
shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)
seeds = st.integers(0, 2 ** 31 - 1)


# ------------------------------------------------------------------------------ completeness

def test_every_primitive_of_these_modules_has_rules():
    prims = [v for m in (reductions, linalg, sorting, callbacks) for v in vars(m).values()
             if isinstance(v, Primitive)]
    assert {p.name for p in prims} >= {"reduce_sum", "reduce_prod", "reduce_max", "reduce_min",
                                       "reduce_and", "reduce_or", "reduce_xor", "argmax",
                                       "argmin", "cumsum", "cumprod", "cummax", "cummin",
                                       "cumlogsumexp", "dot_general", "sort", "debug_print"}
    for p in prims:
        assert p.zero_derivative != (p in JVP and p in VJP), p.name


# ------------------------------------------------------------------------------ reductions

@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
@few
@given(shape=shapes, data=st.data(), seed=seeds)
def test_reduction_rules(name, shape, data, seed):
    mask = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    axes = tuple(i for i, m in enumerate(mask) if m)
    if name in ("reduce_max", "reduce_min") and any(shape[a] == 0 for a in axes):
        axes = tuple(a for a in axes if shape[a])   # an empty max has no derivative (NaN)
    x = VALUES[name](np.random.RandomState(seed), shape)
    op = getattr(lax, name)
    check_grads(lambda x: op(x, axes), (x,), order=2)


def test_reduce_prod_with_zeros_to_second_order():
    x = np.array([[0.0, 1.5, -2.0], [0.0, 0.0, 3.0], [0.7, 0.0, 1.1]])
    for axes in [(0,), (1,), (0, 1)]:
        check_grads(lambda x: lax.reduce_prod(x, axes), (x,), order=2)


def test_reduce_max_over_empty_axis_has_jax_nan_tangent():
    x = np.zeros((2, 0))
    out, t = kiln.jvp(lambda x: lax.reduce_max(x, (1,)), (x,), (x,))
    np.testing.assert_array_equal(out, [-inf, -inf])
    np.testing.assert_array_equal(t, [nan, nan])   # 0/0, as JAX


# ------------------------------------------------------------------------------ cumulative ops

@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
@few
@given(shape=shapes.filter(len), data=st.data(), seed=seeds)
def test_cumulative_rules(name, shape, data, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    reverse = data.draw(st.booleans())
    x = VALUES[name](np.random.RandomState(seed), shape)
    op = getattr(lax, name)
    check_grads(lambda x: op(x, axis, reverse=reverse), (x,), order=2)


@pytest.mark.parametrize("name", ["cumprod", "cummax", "cumlogsumexp"])
@pytest.mark.parametrize("n", [8, 13])
def test_cumulative_rules_on_long_scans(name, n):
    """Every level of the scan tree (odd and even lengths at each level)."""
    x = VALUES[name](np.random.RandomState(n), (2, n))
    op = getattr(lax, name)
    for reverse in (False, True):
        check_grads(lambda x: op(x, 1, reverse=reverse), (x,), order=2)


# ------------------------------------------------------------------------------ dot_general

@st.composite
def dot_problems(draw):
    """(lhs shape, rhs shape, dimension_numbers) with every axis kind in a random order."""
    size = st.integers(0, 3)
    nb, nc, nl, nr = (draw(st.integers(0, n)) for n in (2, 2, 2, 2))
    batch = [draw(size) for _ in range(nb)]
    contract = [draw(size) for _ in range(nc)]
    lhs_axes = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", draw(size)) for _ in range(nl)]
    rhs_axes = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", draw(size)) for _ in range(nr)]
    lhs_axes, rhs_axes = draw(st.permutations(lhs_axes)), draw(st.permutations(rhs_axes))

    def layout(axes):
        shape = tuple(batch[i] if k == "b" else contract[i] if k == "c" else i
                      for k, i in axes)
        where = {a: j for j, a in enumerate(axes)}
        return (shape, tuple(where[("c", i)] for i in range(nc)),
                tuple(where[("b", i)] for i in range(nb)))
    (ls, lc, lb), (rs, rc, rb) = layout(lhs_axes), layout(rhs_axes)
    return ls, rs, ((lc, rc), (lb, rb))


@few
@given(problem=dot_problems(), seed=seeds)
def test_dot_general_rules(problem, seed):
    ls, rs, dn = problem
    rng = np.random.RandomState(seed)
    lhs, rhs = rng.randn(*ls), rng.randn(*rs)
    check_grads(lambda a, b: lax.dot_general(a, b, dn), (lhs, rhs), order=2)


def test_dot_general_cotangents_take_operand_dtypes():
    rng = np.random.RandomState(0)
    a32, b64 = rng.randn(2, 3).astype(np.float32), rng.randn(3, 4)
    dn = (((1,), (0,)), ((), ()))
    ct = rng.randn(2, 4)
    reference = (ct @ b64.T, a32.astype(np.float64).T @ ct)
    cases = [(lambda a, b: lax.dot_general(a, b, dn), (a32, b64), np.float64),
             (lambda a, b: lax.dot_general(a, b, dn, preferred_element_type=np.float64),
              (a32, b64.astype(np.float32)), np.float64)]
    for f, args, out_dtype in cases:
        out, f_vjp = kiln.vjp(f, *args)
        assert out.dtype == out_dtype
        grads = f_vjp(ct.astype(out_dtype))
        for g, arg, want in zip(grads, args, reference):
            assert g.dtype == arg.dtype
            np.testing.assert_allclose(g, want, rtol=1e-5)
        _, t = kiln.jvp(f, args, tuple(np.ones_like(a) for a in args))
        assert t.dtype == out_dtype


def test_dot_general_integer_operand_gets_no_cotangent():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.random.RandomState(1).randn(3, 2)
    g = kiln.grad(lambda a, b: jnp.sum(lax.dot(a, b)), argnums=1)(a, b)
    np.testing.assert_allclose(g, np.broadcast_to(a.sum(0)[:, None], (3, 2)))
    check_grads(lambda b: lax.dot(a, b), (b,), order=2)


def test_complex_cotangents_are_plain_transposes_as_in_jax():
    A = np.array([[1 + 2j, 3 - 1j], [0.5j, 2]])
    B = np.array([[2 - 1j], [1 + 1j]])
    C = np.array([[1 - 1j], [2 + 0.5j]])
    ga, gb = kiln.vjp(lambda a, b: jnp.dot(a, b), A, B)[1](C)
    np.testing.assert_allclose(ga, [[1 - 3j, 2], [4.5 - 1j, 1.5 + 2.5j]])
    np.testing.assert_allclose(gb, [[2.75 + 2j], [6 - 3j]])
    gp, = kiln.vjp(lambda a: lax.reduce_prod(a, (0,)), A)[1](np.array([1 + 1j, 2 - 1j]))
    np.testing.assert_allclose(gp, [[-0.5 + 0.5j, 4 - 2j], [-1 + 3j, 5 - 5j]])
    gc, = kiln.vjp(lambda a: lax.cumprod(a, 1), A)[1](A)
    np.testing.assert_allclose(gc, [[9 - 4j, 5 + 5j], [4 + 0.5j, 1j]])
    check_grads(lambda a, b: lax.dot(a, b), (A, B), order=2)
    check_grads(lambda a: lax.cumprod(a, 1, reverse=True), (A,), order=2)


# ------------------------------------------------------------------------------ sort

@few
@given(shape=shapes.filter(len), data=st.data(), seed=seeds)
def test_sort_rules(shape, data, seed):
    """Float keys (distinct) and passengers; an integer leading key with ties, when drawn,
    makes the later keys decide within each tie."""
    rng = np.random.RandomState(seed)
    dimension = data.draw(st.integers(0, len(shape) - 1))
    n_float = data.draw(st.integers(1, 3))
    int_key = data.draw(st.booleans())
    n_ops = n_float + int_key
    num_keys = data.draw(st.integers(1 + int_key, n_ops))
    xs = tuple(_distinct(rng, shape) for _ in range(n_float))
    ties = rng.randint(0, 2, shape).astype(np.int32)

    def f(*xs):
        ops = ((ties,) if int_key else ()) + xs
        return lax.sort(ops, dimension=dimension, num_keys=num_keys)[int_key:]
    check_grads(f, xs, order=2)


def test_sort_cotangent_of_passenger_follows_the_permutation():
    keys = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    vals = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    ct = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (sk, sv), f_vjp = kiln.vjp(lambda k, v: lax.sort((k, v), dimension=1), keys, vals)
    np.testing.assert_array_equal(sv, [[20.0, 30.0, 10.0], [50.0, 40.0, 60.0]])
    gk, gv = f_vjp((ct, 10 * ct))
    np.testing.assert_array_equal(gk, [[3.0, 1.0, 2.0], [5.0, 4.0, 6.0]])
    np.testing.assert_array_equal(gv, 10 * gk)


# ------------------------------------------------------------------------------ zero derivatives

def _uses_argmax(x):
    i = lax.argmax(x, 0, np.int32)
    j = lax.argmin(x, 0, np.int32)
    return jnp.sin(x) * lax.convert_element_type(i - j, x.dtype)


def _uses_logical(x):
    pos = x > 0
    b = lax.reduce_and(pos, (0,)) | lax.reduce_or(pos, (0,)) ^ lax.reduce_xor(pos, (0,))
    return jnp.where(b, x * x, -x)


@pytest.mark.parametrize("f", [_uses_argmax, _uses_logical])
def test_zero_derivative_primitives(f):
    x = np.array([0.3, -1.2, 2.5, 0.9])
    check_grads(f, (x,), order=2)


def test_argmax_gives_no_tangent():
    x = np.array([0.3, -1.2, 2.5])
    _, t = kiln.jvp(lambda x: jnp.sum(x) * lax.argmax(x, 0, np.int32), (x,), (np.ones(3),))
    assert t == 6.0


def _printing(x):
    kiln.debug.print("x={}", x)
    return jnp.sin(x) * x


@pytest.mark.parametrize("transform", [
    lambda f: kiln.grad(f),
    lambda f: kiln.grad(kiln.grad(f)),
    lambda f: (lambda x: kiln.jvp(f, (x,), (1.0,))[1]),
    lambda f: kiln.jit(kiln.grad(f)),
], ids=["grad", "grad_grad", "jvp", "jit_grad"])
def test_debug_print_prints_once_in_the_forward_sweep(transform, capsys):
    d = transform(_printing)(0.5)
    assert capsys.readouterr().out == "x=0.5\n"
    assert np.isfinite(d)


# ------------------------------------------------------------------------------ JAX conventions
# (name, primitive, params, x): Jacobians (and Hessians of the summed output) recorded from
# JAX 0.10.2 with jax.jacfwd / jax.jacrev / jax.hessian, float64.

CASES = [
    ("max_tie", "reduce_max", dict(axes=(0,)), [1., 3., 3.]),
    ("max_tie_3way", "reduce_max", dict(axes=(0, 1)), [[3., 3.], [1., 3.]]),
    ("max_tie_rows", "reduce_max", dict(axes=(1,)), [[2., 2., 1.], [0., 5., 5.]]),
    ("min_tie", "reduce_min", dict(axes=(0,)), [1., 3., 1.]),
    ("max_nan", "reduce_max", dict(axes=(0,)), [1., nan, 3.]),
    ("max_no_axes", "reduce_max", dict(axes=()), [1., 1.]),
    ("prod_zero", "reduce_prod", dict(axes=(0,)), [2., 0., 3.]),
    ("prod_two_zeros", "reduce_prod", dict(axes=(0,)), [0., 0., 3.]),
    ("prod_zero_2d", "reduce_prod", dict(axes=(0, 2)),
     [[[1., 2.], [0., 3.]], [[0., 4.], [5., 6.]]]),
    ("cumsum_rev", "cumsum", dict(axis=0, reverse=True), [1., 2., 3.]),
    ("cummax_tie_5", "cummax", dict(axis=0, reverse=False), [1.] * 5),
    ("cummax_tie_7", "cummax", dict(axis=0, reverse=False), [1.] * 7),
    ("cummax_tie_6_rev", "cummax", dict(axis=0, reverse=True), [1.] * 6),
    ("cummax_mixed_2d", "cummax", dict(axis=1, reverse=False),
     [[0., 2., 2., 1., 2.], [3., 3., 4., 4., 4.]]),
    ("cummin_mixed", "cummin", dict(axis=0, reverse=False), [3., 1., 2., 1., 1., 0.5]),
    ("cummin_mixed_rev", "cummin", dict(axis=0, reverse=True), [3., 1., 2., 1., 1., 0.5]),
    ("cumprod_zeros", "cumprod", dict(axis=0, reverse=False), [2., 0., 3., 0., 5.]),
    ("cumprod_zeros_rev", "cumprod", dict(axis=0, reverse=True), [2., 0., 3., 0., 5.]),
    ("cumlse_neginf", "cumlogsumexp", dict(axis=0, reverse=False), [0., 1., -inf, 2.]),
    ("cumlse_all_neginf", "cumlogsumexp", dict(axis=0, reverse=False), [-inf, -inf, 1.]),
    ("cumlse_posinf", "cumlogsumexp", dict(axis=0, reverse=False), [1., inf, 1.]),
    ("cumlse_rev", "cumlogsumexp", dict(axis=0, reverse=True), [0.5, -1., 2., 0.]),
    ("sort_ties", "sort", dict(dimension=0), [2., 1., 2., 1.]),
    ("sort_zero_nan", "sort", dict(dimension=0), [0., -0., nan, 1., -1.]),
    ("sort_2d", "sort", dict(dimension=1), [[3., 1., 2.], [0., 5., -1.]]),
]

JAX_GOLDENS = {
    'max_tie': {'jac': [0.0, 0.5, 0.5]},
    'max_tie_3way': {'jac': [[1 / 3, 1 / 3], [0.0, 1 / 3]]},
    'max_tie_rows': {'jac': [[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]],
                             [[0.0, 0.0, 0.0], [0.0, 0.5, 0.5]]]},
    'min_tie': {'jac': [0.5, 0.0, 0.5]},
    'max_nan': {'jac': [nan, nan, nan]},
    'max_no_axes': {'jac': [[1.0, 0.0], [0.0, 1.0]]},
    'prod_zero': {'jac': [0.0, 6.0, 0.0],
                  'hessian': [[0.0, 3.0, 0.0], [3.0, 0.0, 2.0], [0.0, 2.0, 0.0]]},
    'prod_two_zeros': {'jac': [0.0, 0.0, 0.0],
                       'hessian': [[0.0, 3.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]]},
    'prod_zero_2d': {
        'jac': [[[[0.0, 0.0], [0.0, 0.0]], [[8.0, 0.0], [0.0, 0.0]]],
                [[[0.0, 0.0], [90.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]],
        'hessian': [[[[[[0.0, 0.0], [0.0, 0.0]], [[8.0, 0.0], [0.0, 0.0]]],
                      [[[0.0, 0.0], [0.0, 0.0]], [[4.0, 0.0], [0.0, 0.0]]]],
                     [[[[0.0, 0.0], [0.0, 30.0]], [[0.0, 0.0], [18.0, 15.0]]],
                      [[[0.0, 0.0], [30.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]]],
                    [[[[[8.0, 4.0], [0.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]],
                      [[[0.0, 0.0], [0.0, 0.0]], [[2.0, 0.0], [0.0, 0.0]]]],
                     [[[[0.0, 0.0], [18.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]],
                      [[[0.0, 0.0], [15.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]]]]},
    'cumsum_rev': {'jac': [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]},
    'cummax_tie_5': {'jac': [[1.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0],
                             [0.25, 0.25, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25, 0.0],
                             [0.125, 0.125, 0.125, 0.125, 0.5]]},
    'cummax_tie_7': {'jac': [[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                             [0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0],
                             [0.25, 0.25, 0.5, 0.0, 0.0, 0.0, 0.0],
                             [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0],
                             [0.125, 0.125, 0.125, 0.125, 0.5, 0.0, 0.0],
                             [0.125, 0.125, 0.125, 0.125, 0.25, 0.25, 0.0],
                             [0.0625, 0.0625, 0.0625, 0.0625, 0.125, 0.125, 0.5]]},
    'cummax_tie_6_rev': {'jac': [[0.25, 0.25, 0.125, 0.125, 0.125, 0.125],
                                 [0.0, 0.5, 0.125, 0.125, 0.125, 0.125],
                                 [0.0, 0.0, 0.25, 0.25, 0.25, 0.25],
                                 [0.0, 0.0, 0.0, 0.5, 0.25, 0.25],
                                 [0.0, 0.0, 0.0, 0.0, 0.5, 0.5],
                                 [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]},
    'cummax_mixed_2d': {
        'jac': [[[[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]],
                 [[0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]],
                 [[0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]],
                 [[0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]],
                 [[0.0, 0.25, 0.25, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0]]],
                [[[0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]],
                 [[0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0]],
                 [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]],
                 [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5, 0.0]],
                 [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.25, 0.25, 0.5]]]],
        'hessian': np.zeros((2, 5, 2, 5)).tolist()},
    'cummin_mixed': {'jac': [[1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                             [0.0, 1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5, 0.0, 0.0],
                             [0.0, 0.25, 0.0, 0.25, 0.5, 0.0],
                             [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]},
    'cummin_mixed_rev': {'jac': [[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]] * 6},
    'cumprod_zeros': {'jac': [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0, 0.0],
                              [0.0, 6.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                              [0.0, 0.0, 0.0, 0.0, 0.0]],
                      'hessian': [[0.0, 4.0, 0.0, 0.0, 0.0], [4.0, 0.0, 2.0, 36.0, 0.0],
                                  [0.0, 2.0, 0.0, 0.0, 0.0], [0.0, 36.0, 0.0, 0.0, 0.0],
                                  [0.0, 0.0, 0.0, 0.0, 0.0]]},
    'cumprod_zeros_rev': {'jac': [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                                  [0.0, 0.0, 0.0, 15.0, 0.0], [0.0, 0.0, 0.0, 5.0, 0.0],
                                  [0.0, 0.0, 0.0, 0.0, 1.0]]},
    'cumlse_neginf': {'jac': [[1.0, 0.0, 0.0, 0.0],
                              [0.2689414213699951, 0.731058578630005, 0.0, 0.0],
                              [0.2689414213699951, 0.731058578630005, 0.0, 0.0],
                              [0.09003057317038042, 0.2447284710547976, 0.0,
                               0.6652409557748217]]},
    # 0 * NaN weights: where the NaNs land differs between the modes, in JAX as here.
    'cumlse_all_neginf': {'jacfwd': [[1.0, 0.0, 0.0], [nan, nan, nan], [nan, nan, nan]],
                          'jacrev': [[nan, nan, 0.0], [nan, nan, 0.0], [nan, nan, 1.0]]},
    'cumlse_posinf': {'jac': [[1.0, 0.0, 0.0], [2.7182818284590455, 1.0, 0.0],
                              [2.7182818284590455, 1.0, 2.7182818284590455]]},
    'cumlse_rev': {
        'jac': [[0.15844470951497971, 0.03535379340874887, 0.7100999228861741,
                 0.0961015741900972],
                [0.0, 0.04201006613406605, 0.8437947344813395, 0.11419519938459448],
                [0.0, 0.0, 0.8807970779778823, 0.11920292202211753],
                [0.0, 0.0, 0.0, 1.0]],
        'hessian': [[0.13333998354169344, -0.005601621526901818, -0.11251157600830934,
                     -0.015226786006482222],
                    [-0.005601621526901815, 0.07434912317783782, -0.06055259857242407,
                     -0.00819490307851192],
                    [-0.11251157600830937, -0.06055259857242407, 0.4426567883496356,
                     -0.269592613768902],
                    [-0.015226786006482224, -0.00819490307851192, -0.269592613768902,
                     0.2930143028538961]]},
    'sort_ties': {'jac': [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0],
                          [0.0, 0.0, 1.0, 0.0]]},
    'sort_zero_nan': {'jac': [[0.0, 0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0],
                              [0.0, 1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0, 0.0],
                              [0.0, 0.0, 1.0, 0.0, 0.0]]},
    'sort_2d': {'jac': [[[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]],
                         [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]],
                        [[[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]],
                         [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]]},
}


def _op(prim, params):
    if prim.startswith("reduce_"):
        return lambda x: getattr(lax, prim)(x, params["axes"])
    if prim == "sort":
        return lambda x: lax.sort(x, dimension=params["dimension"])
    return lambda x: getattr(lax, prim)(x, params["axis"], reverse=params["reverse"])


def _basis(shape):
    n = int(np.prod(shape, dtype=np.int64))
    return [np.eye(n)[i].reshape(shape) for i in range(n)]


def _jacfwd(f, x):
    """d f(x) / d x by one kiln.jvp per input direction: shape out.shape + x.shape."""
    cols = [np.asarray(kiln.jvp(f, (x,), (e,))[1]) for e in _basis(x.shape)]
    return np.moveaxis(np.stack(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


def _jacrev(f, x):
    """d f(x) / d x by one kiln.vjp per output direction."""
    out, f_vjp = kiln.vjp(f, x)
    rows = [np.asarray(f_vjp(e)[0]) for e in _basis(np.shape(out))]
    return np.stack(rows).reshape(np.shape(out) + x.shape)


@pytest.mark.parametrize("name, prim, params, x", CASES, ids=[c[0] for c in CASES])
def test_jax_conventions_at_ties_zeros_and_infinities(name, prim, params, x):
    f, x = _op(prim, params), np.asarray(x, np.float64)
    golden = JAX_GOLDENS[name]
    for mode, jac in (("jacfwd", _jacfwd), ("jacrev", _jacrev)):
        want = np.asarray(golden.get(mode, golden.get("jac")))
        np.testing.assert_allclose(jac(f, x), want, rtol=1e-13, atol=1e-15, err_msg=mode)
    if "hessian" in golden:
        def g(x):
            return kiln.grad(lambda y: jnp.sum(f(y)))(x)
        want = np.asarray(golden["hessian"])
        for mode, jac in (("fwd-of-rev", _jacfwd), ("rev-of-rev", _jacrev)):
            np.testing.assert_allclose(jac(g, x), want, rtol=1e-12, atol=1e-14, err_msg=mode)
