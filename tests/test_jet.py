"""kiln.experimental.jet against JAX 0.10.2's jax.experimental.jet: Taylor series of orders 1 to
4 through MLPs, tanh chains, polynomials, division, exp/log and the other primitives JAX's jet
covers (JAX's results are goldens, `tests/goldens/make_jet_goldens.py`, for the cases of
`tests/jet_cases.py`); jet inside and around jit and vmap and under grad, pytree outputs and
dtypes, JAX's scaling (jet2 unscaled), custom_jvp functions (their own series), the order-2
term against nested jvp, and the errors (those live against JAX)."""
import json
import os

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax as klax
from kiln.compiler.errors import CompileError
from kiln.compiler.primitives import PRIMITIVES
from kiln.compiler.primitives.core import JET
from kiln.experimental.jet import jet, jet2
from jet_cases import CASES, X, Y, terms, two_args

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import jet as their  # noqa: E402

with open(os.path.join(os.path.dirname(__file__), "goldens", "jet_jax_0_10_2.json")) as f:
    GOLDENS = json.load(f)


def golden(name):
    g = GOLDENS[name]
    return np.float32(g["out"]), [np.float32(t) for t in g["series"]]


def _check(mine, theirs, rtol):
    (p, s), (tp, ts) = mine, theirs
    np.testing.assert_allclose(p, tp, rtol=rtol, atol=1e-5)
    assert len(s) == len(ts)
    for k, (a, b) in enumerate(zip(s, ts)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-4 * 10 ** k,
                                   err_msg=f"term {k + 1}")


def test_the_rule_table_covers_jax_jets():
    # every primitive JAX's jet has a rule for that kiln has (JAX's split, stack, jit, ... are
    # not kiln primitives), and the custom-rule calls, which JAX's trace handles itself
    theirs = {p.name.replace("-", "_") for p in their.jet_rules}
    for name in theirs & set(PRIMITIVES):
        assert PRIMITIVES[name] in JET or PRIMITIVES[name].zero_derivative, name
    assert {p.name for p in JET} - theirs == {"custom_jvp_call", "custom_vjp_call"}


def test_every_case_has_a_golden():
    assert {f"case:{name}" for name in CASES} <= set(GOLDENS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_series_as_jax(name):
    # The first j terms of a series do not depend on the later ones, so JAX's order-4 result
    # checks kiln's orders 1, 2 and 4.
    series = terms(4)
    out, theirs = golden(f"case:{name}")
    for order in (1, 2, 4):
        mine = jet(CASES[name](knp, klax), (X,), (series[:order],))
        _check(mine, (out, theirs[:order]), 2e-4)


def test_order_three_and_two_arguments_as_jax():
    series = (terms(3), terms(3, seed=2))
    _check(jet(two_args(knp, klax), (X, Y), series), golden("two_args"), 2e-4)
    # an argument with zeros for its series, and an input the output ignores
    zero = [np.zeros(4, np.float32)] * 3
    _check(jet(two_args(knp, klax), (X, Y), (series[0], zero)), golden("one_series"), 2e-4)
    out, (a, b, c) = jet(lambda x, y: x * 2, (X, Y), series)
    np.testing.assert_allclose([out, a, b, c], [X * 2] + [t * 2 for t in series[0]])


def test_order_two_term_is_nested_jvp():
    f = CASES["mlp"](knp, klax)
    v = terms(1)[0]
    _, (d1, d2) = jet(f, (X,), ([v, np.zeros_like(v)],))

    def df(x):
        return kiln.jvp(f, (x,), (v,))[1]
    np.testing.assert_allclose(d1, df(X), rtol=1e-5)
    np.testing.assert_allclose(d2, kiln.jvp(df, (X,), (v,))[1], rtol=1e-4, atol=1e-6)


def test_exact_polynomial_coefficients():
    # x(t) = 1 + t; f = x**4: derivatives along t at 0 are 4, 12, 24, 24
    out, series = jet(lambda x: x ** 4, (1.0,), ((1.0, 0.0, 0.0, 0.0),))
    assert float(out) == 1.0
    np.testing.assert_allclose(series, [4.0, 12.0, 24.0, 24.0], rtol=1e-6)
    out, coeffs = jet2(lambda x: x ** 4, (1.0,), ((1.0, 0.0, 0.0, 0.0),))
    np.testing.assert_allclose(coeffs, [4.0, 6.0, 4.0, 1.0], rtol=1e-6)   # binomials
    _check(jet2(CASES["exp_log"](knp, klax), (X,), (terms(3),)), golden("jet2_exp_log"), 2e-4)


def test_rem_series_are_lax_rems():
    # rem(x, y) = x - y trunc(x / y); JAX's rule takes floor for trunc (its primal and series
    # then differ where x / y < 0, as at X[1])
    (sx, tx), (sy, ty) = terms(2), terms(2, seed=2)
    out, (a, b) = jet(klax.rem, (X * 3, Y), ([sx, tx], [sy, ty]))
    np.testing.assert_allclose(out, np.fmod(X * 3, Y), rtol=1e-6)
    np.testing.assert_allclose(a, kiln.jvp(klax.rem, (X * 3, Y), (sx, sy))[1], rtol=1e-6)
    np.testing.assert_allclose(b, tx - ty * np.trunc(X * 3 / Y), rtol=1e-5, atol=1e-6)


def test_jit_inside_and_around_jet():
    f = CASES["tanh_chain"](knp, klax)
    series = terms(4)
    theirs = golden("case:tanh_chain")
    _check(jet(kiln.jit(f), (X,), (series,)), theirs, 2e-4)
    _check(jet(lambda x: kiln.jit(f)(x) * 1.0, (X,), (series,)), theirs, 2e-4)
    around = kiln.jit(lambda x, s: jet(f, (x,), (s,)))
    _check(around(X, series), theirs, 2e-4)
    _check(around(X * 0.5, series), jet(f, (X * 0.5,), (series,)), 1e-5)
    # and under grad: the derivative of a series term
    np.testing.assert_allclose(
        kiln.grad(lambda x: jet(f, (x,), (series[:3],))[1][1].sum())(X),
        GOLDENS["grad_term"]["out"], rtol=1e-4, atol=1e-5)


def test_vmap_around_and_inside_jet():
    f = CASES["tanh_chain"](knp, klax)
    xs = np.stack([X, X * 0.5, -X])
    ss = [np.stack([t, t * 2, -t]) for t in terms(2)]
    each = [jet(f, (xs[i],), ([s[i] for s in ss],)) for i in range(3)]
    for out, series in (kiln.vmap(lambda x, s1, s2: jet(f, (x,), ((s1, s2),)))(xs, *ss),
                        jet(kiln.vmap(f), (xs,), (ss,))):
        np.testing.assert_allclose(out, [o for o, _ in each], rtol=1e-6)
        for k in range(2):
            np.testing.assert_allclose(series[k], [s[k] for _, s in each], rtol=1e-5)


def test_pytree_outputs_and_dtypes_as_jax():
    def f(np_):
        return lambda x: {"a": np_.sin(x), "b": (x * 2, np_.arange(3)), "c": x > 0}
    series = terms(2)
    (p, s), (tp, ts) = jet(f(knp), (X,), (series,)), their.jet(f(jnp), (X,), (series,))
    assert kiln.tree_util.tree_structure(p) == kiln.tree_util.tree_structure(
        jax.tree_util.tree_map(np.asarray, tp))
    assert sorted(s) == ["a", "b", "c"] and len(s["b"]) == 2 and len(s["b"][1]) == 2
    for mine, theirs in zip(kiln.tree_util.tree_leaves(s), jax.tree_util.tree_leaves(ts)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)
        assert (mine.dtype, mine.weak_type) == (theirs.dtype, theirs.weak_type)
    # Python numbers and float64 terms: the types JAX gives
    x2, t64 = X[:2], [np.ones(2), np.full(2, 0.5)]
    for args in [((0.5,), ((1.0, 0.0),)), ((x2,), (t64,)), ((0.5,), ((X[0], X[1]),)),
                 ((x2,), ((1.0, 2.0),))]:
        for mine, theirs in zip(kiln.tree_util.tree_leaves(jet(knp.sin, *args)),
                                jax.tree_util.tree_leaves(their.jet(jnp.sin, *args))):
            assert (mine.dtype, mine.weak_type, mine.shape) == \
                (theirs.dtype, theirs.weak_type, theirs.shape)
            np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    # integer and boolean results have zero series (JAX's jet refuses argmax: KeyError)
    _, (a, b) = jet(lambda x: knp.argmax(x) * x, (X,), (series,))
    np.testing.assert_allclose([a, b], [np.argmax(X) * series[0], np.argmax(X) * series[1]])
    # constant results, inside jit too
    for run in (jet, kiln.jit(jet, static_argnums=0)):
        (c, y), (cs, ys) = run(lambda x: (3.0, x), (X,), (series,))
        assert float(c) == 3.0 and [float(t) for t in cs] == [0.0, 0.0]
        np.testing.assert_allclose(ys, series)
    out, none = jet(knp.sin, (X,), ([],))
    np.testing.assert_allclose(out, np.sin(X), rtol=1e-6)
    assert none == []
    # Python scalars, as in JAX's docstring example: sin(z^3) at z = 0.5
    h0, h1, h2 = 0.5 ** 3, 3 * 0.5 ** 2, 6 * 0.5
    f0, (f1, f2) = jet(knp.sin, (h0,), ((h1, h2),))
    np.testing.assert_allclose([f0, f1, f2], [np.sin(h0), np.cos(h0) * h1,
                                              -np.sin(h0) * h1 ** 2 + np.cos(h0) * h2], rtol=1e-6)


def test_custom_jvp_functions_use_their_own_series():
    # JAX's jet ignores custom rules and expands the function (0.10.2 then fails with an
    # UnexpectedTracerError); kiln expands it: the rule's 100 * t is not used.
    @kiln.custom_jvp
    def f(x):
        return knp.sin(x) * 2

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), 100 * tangents[0]

    series = terms(3)
    _check(jet(lambda x: f(x) * x, (X,), (series,)),
           jet(lambda x: knp.sin(x) * 2 * x, (X,), (series,)), 1e-6)
    _check(jet(kiln.nn.softplus, (X,), (series,)),   # a custom_jvp function in kiln.nn
           jet(lambda x: knp.log1p(knp.exp(-knp.abs(x))) + knp.maximum(x, 0), (X,), (series,)),
           1e-5)


def test_primitive_without_a_rule_is_refused_with_its_line():
    def f(x):
        y = knp.exp(x)
        return knp.tan(y)
    with pytest.raises(CompileError) as e:
        jet(f, (X,), (terms(2),))
    msg = str(e.value)
    assert "no Taylor rule for the primitive 'tan'; JAX's jet has none" in msg
    assert "test_jet.py" in msg and "return knp.tan(y)" in msg
    with pytest.raises(KeyError):   # JAX refuses it too
        their.jet(jnp.tan, (X,), (terms(2),))

    def g(x):
        return knp.sort(x) * 2
    with pytest.raises(CompileError, match="'sort'"):
        kiln.jit(lambda x, s: jet(g, (x,), (s,)))(X, terms(1))

    def h(x):
        if x[0] > 0:   # compiles to a cond
            x = x * 2
        return x
    with pytest.raises(CompileError) as e:
        jet(h, (X,), (terms(1),))
    assert "primitive 'cond' (a Python `if` on traced values or lax.cond compiles to it)" in \
        str(e.value) and "if x[0] > 0:" in str(e.value)


def test_argument_errors_as_jax():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(knp.add, (X, X), (terms(1), terms(2)))
    with pytest.raises(ValueError, match="primal value at position 0 is not an array"):
        jet(lambda d: d["a"], ({"a": X},), ({"a": terms(1)},))
    with pytest.raises(ValueError, match="term 1 for argument 0 is not an array"):
        jet(knp.sin, (X,), ([X, (X, X)],))
