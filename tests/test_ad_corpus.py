"""Derivatives of the autodiff corpus (`ad_corpus.py`) against finite differences.

Every corpus entry (a function with Python control flow on values, and its float64 arguments)
is checked with `kiln.test_util.check_grads` in forward and reverse mode, to second order where
it is smooth (first order otherwise), in three ways:

* eagerly: `kiln.jvp` / `kiln.vjp` of the plain function, run without `jit`;
* `jit(f)` differentiated;
* the derivative compiled: `jit` of a function that calls `kiln.jvp` / `kiln.vjp`, at every order
  of the same recursion as `check_grads` (so second order runs `jit(jvp(jvp(f)))`,
  `jit(vjp(jvp(f)))`, `jit(jvp(vjp(f)))` and `jit(vjp(vjp(f)))`).

A selection of entries is also checked in `check_grads`' "lin" mode (`kiln.linearize`).

The Jacobian API is checked against itself on every entry (`jacfwd` equals `jacrev`; `grad` and
`value_and_grad` agree with them on scalar outputs; `hessian` is symmetric), third derivatives
of a few scalar functions are exact, and `check_grads` itself is shown to catch wrong
derivatives and name what failed.
"""
import functools

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln.test_util import check_grads, check_jvp, check_vjp
from kiln.tree_util import tree_leaves, tree_structure

from ad_corpus import CORPUS

# Entries the front end cannot compile yet (not derivative problems): strict xfails, so the
# day the front end learns them the marks must go.
FRONT_END_LIMITS = {
    "early_return_in_loop": "a `return` under a traced `if` inside an unrolled loop is not "
                            "supported by the front end yet (CompileError)",
}


def _param(e):
    reason = FRONT_END_LIMITS.get(e.name)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(e, id=e.name, marks=marks)


ENTRIES = pytest.mark.parametrize("e", [_param(e) for e in CORPUS])


@pytest.fixture(autouse=True)
def _float64(x64):
    """Finite differences need float64; the corpus builds float64 arguments."""


def order(e):
    return 2 if e.smooth else 1


# ----------------------------------------------------------------------- check_grads

@ENTRIES
def test_eager(e):
    check_grads(e.fn, e.args(), order(e), modes=("fwd", "rev"))


@ENTRIES
def test_jit_differentiated(e):
    check_grads(kiln.jit(e.fn), e.args(), order(e), modes=("fwd", "rev"))


def _jvp_of(fun):
    def jvp_fun(primals, tangents):
        return kiln.jvp(fun, primals, tangents)
    return jvp_fun


def _pullback_of(fun):
    def pullback(primals, cotangent):
        _, vjp_fun = kiln.vjp(fun, *primals)
        return vjp_fun(cotangent)
    return pullback


def _output_pulled_back(fun):
    def pulled_back(*primals):
        out, vjp_fun = kiln.vjp(fun, *primals)
        return vjp_fun(out)
    return pulled_back


def check_compiled_derivatives(fun, args, k, chain=""):
    """check_grads' recursion, with every derivative compiled by `jit` before it runs."""
    jvp_msg = f"JVP of {chain}" if chain else "JVP"
    check_jvp(fun, kiln.jit(_jvp_of(fun)), args, err_msg=f"jit({jvp_msg})")
    vjp_msg = f"VJP of {chain}" if chain else "VJP"
    pullback = kiln.jit(_pullback_of(fun))
    check_vjp(fun, lambda *a: (fun(*a), lambda ct: pullback(a, ct)), args,
              err_msg=f"jit({vjp_msg})")
    if k > 1:
        check_compiled_derivatives(_jvp_of(fun), (args, args), k - 1, jvp_msg)
        check_compiled_derivatives(_output_pulled_back(fun), args, k - 1, vjp_msg)


@ENTRIES
def test_jit_of_derivative(e):
    check_compiled_derivatives(e.fn, tuple(e.args()), order(e))


LINEARIZED = ("if_elif_else_top", "newton_sqrt", "while_break", "for_traced_bound",
              "lax_cond_true", "lax_scan_cumulative", "closure_over_traced", "dict_params",
              "nested_pytree", "rnn_loss_scan", "mlp_mse", "abs_value")


@pytest.mark.parametrize("e", [e for e in CORPUS if e.name in LINEARIZED], ids=lambda e: e.name)
def test_linearize_mode(e):
    check_grads(e.fn, e.args(), order(e), modes=("lin",))


# ---------------------------------------------------------------------- Jacobian API

def assert_trees_close(got, want, rtol=1e-9, atol=1e-9):
    assert tree_structure(got) == tree_structure(want)
    for g, w in zip(tree_leaves(got), tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


@ENTRIES
def test_jacobian_api_agrees(e):
    args = e.args()
    argnums = tuple(range(len(args)))
    jac_rev = kiln.jacrev(e.fn, argnums=argnums)(*args)
    assert_trees_close(kiln.jacfwd(e.fn, argnums=argnums)(*args), jac_rev)
    out = e.fn(*args)
    if len(tree_leaves(out)) == 1 and np.ndim(tree_leaves(out)[0]) == 0:
        value, grads = kiln.value_and_grad(e.fn, argnums=argnums)(*args)
        np.testing.assert_allclose(np.asarray(value), np.asarray(tree_leaves(out)[0]),
                                   rtol=1e-12)
        assert_trees_close(grads, jac_rev)
        assert_trees_close(kiln.grad(e.fn, argnums=argnums)(*args), grads)
        assert_trees_close(kiln.jit(kiln.grad(e.fn, argnums=argnums))(*args), grads)


@pytest.mark.parametrize("e", [e for e in CORPUS if e.name in (
    "log_of_sin", "matrix_square_chain", "closure_over_traced", "helper_calls",
    "while_grow_vector", "newton_sqrt", "for_traced_bound", "lax_while_loop",
    "early_return_taken", "nested_while")], ids=lambda e: e.name)
def test_hessian_is_symmetric_and_matches_jacobians(e):
    args = e.args()

    def total(*a):
        return jnp.sum(e.fn(*a))
    h = np.asarray(kiln.hessian(total)(*args))
    square = h.reshape(np.size(args[0]), np.size(args[0]))
    np.testing.assert_allclose(square, square.T, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(h, np.asarray(kiln.jacrev(kiln.jacfwd(total))(*args)),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(h, np.asarray(kiln.jacfwd(kiln.jacfwd(total))(*args)),
                               rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------- third-order exactness

def quartic(x):
    return x ** 4


def sine(x):
    return jnp.sin(x)


def horner(x):
    coefficients = [2.0, -3.0, 0.5, 1.0, 4.0]  # 2 - 3x + 0.5x^2 + x^3 + 4x^4
    acc = 0.0
    for c in reversed(coefficients):
        acc = acc * x + c
    return acc


def grow_until_ten(x):
    while x < 10.0:
        x = x * 1.5
    return x * x * x


def exp_of_double(x):
    return jnp.exp(2.0 * x)


@pytest.mark.parametrize("fn,x,want", [
    (quartic, 2.0, 48.0),                          # 24 x
    (horner, 1.5, 6.0 + 96.0 * 1.5),               # 6 + 96 x
    (sine, 0.7, -np.cos(0.7)),
    (exp_of_double, 0.3, 8.0 * np.exp(0.6)),
    (grow_until_ten, 1.0, 6.0 * 1.5 ** 18),        # (1.5^6 x)^3 near x = 1: 6 * 1.5^18
], ids=lambda v: getattr(v, "__name__", None))
def test_third_derivatives_are_exact(fn, x, want):
    third = kiln.grad(kiln.grad(kiln.grad(fn)))
    assert float(third(x)) == pytest.approx(want, rel=1e-13, abs=1e-13)
    assert float(kiln.jit(third)(x)) == pytest.approx(want, rel=1e-13, abs=1e-13)
    mixed = kiln.jacfwd(kiln.jacrev(kiln.jacfwd(fn)))
    assert float(mixed(x)) == pytest.approx(want, rel=1e-13, abs=1e-13)
    _, t3 = kiln.jvp(lambda y: kiln.grad(kiln.grad(fn))(y), (x,), (1.0,))
    assert float(t3) == pytest.approx(want, rel=1e-13, abs=1e-13)


def test_third_derivative_of_x_to_the_fourth_at_two_is_48():
    assert kiln.grad(kiln.grad(kiln.grad(lambda x: x ** 4)))(2.0) == 48.0


def test_third_order_check_grads():
    check_grads(lambda x, y: jnp.sin(x) * jnp.exp(y) * x, (0.4, np.array([0.3, -0.2])), 3)


# ------------------------------------------------------------- the checker catches bugs

def sine_jvp_off_by_one_percent(primals, tangents):
    (x,), (t,) = primals, tangents
    return jnp.sin(x), jnp.cos(x) * t * 1.01


def test_check_jvp_catches_a_wrong_tangent():
    with pytest.raises(AssertionError, match=r"tangent output: .* max error .* > tolerance"):
        check_jvp(jnp.sin, sine_jvp_off_by_one_percent, (np.array([0.3, 1.2]),))


def test_check_vjp_names_the_argument_with_a_wrong_cotangent():
    def f(x, y):
        return x * jnp.sin(y)

    def f_vjp(x, y):
        return f(x, y), lambda ct: (ct * jnp.sin(y), ct * x * jnp.cos(y) * 1.1)
    with pytest.raises(AssertionError, match=r"cotangent projection.*along args\[1\]$"):
        check_vjp(f, f_vjp, (np.array([0.5, 1.0]), np.array([0.2, 0.4])))


def cube_of_abs(x):
    return jnp.abs(x - 1.0) ** 3  # the second derivative 6|x - 1| has a kink at 1


def test_check_grads_reports_mode_chain_and_order():
    check_grads(cube_of_abs, (1.0 + 1e-6,), 1)  # finite differences of f are still accurate
    with pytest.raises(AssertionError, match=r"check_grads\(cube_of_abs\): JVP of JVP "
                                             r"\(order 2\) tangent output"):
        check_grads(cube_of_abs, (1.0 + 1e-6,), 2)
    with pytest.raises(AssertionError, match=r"check_grads\(absolute\): VJP \(order 1\) "
                                             r"cotangent projection"):
        check_grads(jnp.absolute, (1e-6,), 1, modes=["rev"])


def test_check_grads_rejects_unknown_modes():
    with pytest.raises(ValueError, match="unknown modes"):
        check_grads(jnp.sin, (0.5,), 1, modes=("fwd", "backward"))


def test_tolerance_dict_overrides_one_dtype():
    x = (np.array([0.3, 1.2]),)
    check_jvp(jnp.sin, sine_jvp_off_by_one_percent, x, atol={np.float64: 0.1},
              rtol={np.float64: 0.1})
    check_jvp(jnp.sin, sine_jvp_off_by_one_percent, x, atol=0.1, rtol=0.1)


def test_float32_arguments_use_float32_tolerances():
    check_grads(lambda x: jnp.tanh(x) * x ** 2, (np.array([0.3, -1.2], np.float32),), 2)
