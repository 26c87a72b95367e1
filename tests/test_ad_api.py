"""The autodiff API against JAX 0.10.2: `grad`, `value_and_grad`, `jvp`, `vjp`, `linearize`,
`jacfwd`, `jacrev`, `hessian` and `lax.stop_gradient`.

Expected values, pytree structures, dtypes and weak types were recorded by running the same
calls with JAX 0.10.2 (float32, `enable_x64` off); numbers are pasted here as constants. The
MLP gradients are checked against a hand-written NumPy backpropagation instead. Bad input is
checked for JAX's exception types and for messages that name the user's function and its
`file:line`.
"""
import collections
import functools
import logging
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.tree_util import tree_flatten, tree_structure

FLOAT0 = np.dtype([("float0", np.void, 0)])   # JAX's dtype of integer inputs' derivatives

Point = collections.namedtuple("Point", ["x", "y"])


class A:
    """Expected array leaf: values, dtype and weak type as JAX 0.10.2 gave them."""

    def __init__(self, value, weak=False, dtype="float32"):
        self.value, self.weak, self.dtype = np.asarray(value, dtype), weak, np.dtype(dtype)

    def __repr__(self):
        return f"A({self.value!r}, weak={self.weak})"


def W(value, dtype="float32"):
    """A weakly typed expected leaf (from Python scalars)."""
    return A(value, True, dtype)


def F0(shape=()):
    """An expected float0 leaf: the derivative of an integer input."""
    return A(np.zeros(shape, FLOAT0), False, FLOAT0)


def check(got, want):
    """`got` has `want`'s pytree structure, and each leaf the expected value, dtype, shape
    and weak type."""
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    assert got_tree == want_tree, f"structure {got_tree} != {want_tree}"
    for g, w in zip(got_leaves, want_leaves):
        assert isinstance(g, kiln.Array) or w.dtype == FLOAT0, type(g)
        arr = np.asarray(g)
        assert arr.dtype == w.dtype and arr.shape == w.value.shape, (arr.dtype, arr.shape, w)
        if w.dtype != FLOAT0:
            assert g.weak_type == w.weak, (g, w)
            np.testing.assert_allclose(arr, w.value, rtol=2e-6, atol=1e-6)


def where(fn):
    """How error messages point at a user function: its name and `file:line`."""
    code = fn.__code__
    return f"{fn.__qualname__} defined at {code.co_filename}:{code.co_firstlineno}"


# ---------------------------------------------------------------------------- argnums

def f1(x, y):
    return jnp.sin(x) * y ** 2


DF1_DX, DF1_DY = 2.161209, 3.3658838   # at (1.0, 2.0)


@pytest.mark.parametrize("argnums, want", [
    (0, W(DF1_DX)),
    (1, W(DF1_DY)),
    (-1, W(DF1_DY)),
    (-2, W(DF1_DX)),
    ((0, 1), (W(DF1_DX), W(DF1_DY))),
    ((1,), (W(DF1_DY),)),
    ((1, 0), (W(DF1_DY), W(DF1_DX))),     # in argnums order, not argument order
    ((1, -2), (W(DF1_DY), W(DF1_DX))),
])
def test_argnums(argnums, want):
    check(kiln.grad(f1, argnums=argnums)(1.0, 2.0), want)
    check(kiln.value_and_grad(f1, argnums=argnums)(1.0, 2.0), (W(3.3658838), want))


@pytest.mark.parametrize("argnums, needs", [(2, 3), (-3, 3), ((0, 5), 6)])
def test_argnums_out_of_range(argnums, needs):
    with pytest.raises(ValueError) as e:
        kiln.grad(f1, argnums=argnums)(1.0, 2.0)
    assert isinstance(e.value, TypeError)   # JAX raises TypeError for some, ValueError others
    msg = str(e.value)
    assert f"argnums={argnums}" in msg
    assert f"requires at least {needs} positional arguments" in msg
    assert "got only 2 positional arguments" in msg
    assert where(f1) in msg


def test_argnums_counts_positional_arguments_only():
    with pytest.raises(TypeError, match="got only 0 positional arguments"):
        kiln.grad(f1)(x=1.0, y=2.0)


@pytest.mark.parametrize("argnums", ["a", 1.0, (0, "b"), True])
def test_argnums_of_wrong_type(argnums):
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        kiln.grad(f1, argnums=argnums)(1.0, 2.0)


def three(x, y, z):
    return 0.5 * jnp.sum(x * x) + jnp.sum(jnp.sin(y)) + 3.0 * z


@given(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
       hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
       st.permutations([0, 1, 2]), st.integers(1, 3), st.lists(st.booleans(), min_size=3,
                                                                  max_size=3))
def test_argnums_tuples_return_gradients_in_argnums_order(sx, sy, perm, k, negative):
    x = np.linspace(-1, 1, int(np.prod(sx))).reshape(sx).astype(np.float32)
    y = np.linspace(-2, 2, int(np.prod(sy))).reshape(sy).astype(np.float32)
    argnums = tuple(a - 3 if neg else a for a, neg in zip(perm[:k], negative))
    expected = {0: x, 1: np.cos(y), 2: np.float32(3.0)}
    got = kiln.grad(three, argnums=argnums)(x, y, np.float32(0.5))
    assert len(got) == k
    for a, g in zip(argnums, got):
        np.testing.assert_allclose(np.asarray(g), expected[a % 3], rtol=1e-6, atol=1e-6)
        assert g.shape == np.shape(expected[a % 3])


# ------------------------------------------------------------------- value_and_grad

def test_value_and_grad_values_and_weak_types():
    check(kiln.value_and_grad(f1)(jnp.float32(1.0), 2.0), (A(3.3658838), A(DF1_DX)))
    check(kiln.value_and_grad(lambda x: jnp.sum(x ** 2))(jnp.arange(3.0)),
          (A(5.0), A([0.0, 2.0, 4.0])))
    check(kiln.value_and_grad(lambda x: x * 2)(3.0), (W(6.0), W(2.0)))


# ---------------------------------------------------------------------------- has_aux

def with_aux(x):
    return jnp.sum(x ** 2), {"n": x.shape[0], "m": jnp.mean(x)}


def test_has_aux():
    x = jnp.arange(3.0)
    (value, aux), g = kiln.value_and_grad(with_aux, has_aux=True)(x)
    check((value, aux["m"], g), (A(5.0), A(1.0), A([0.0, 2.0, 4.0])))
    # JAX returns a Python int aux leaf unchanged; kiln returns it as an integer array.
    assert int(aux["n"]) == 3 and sorted(aux) == ["m", "n"]
    g, aux = kiln.grad(with_aux, has_aux=True)(x)
    check((g, aux["m"]), (A([0.0, 2.0, 4.0]), A(1.0)))
    # The pair may be a list, as in JAX.
    check(kiln.grad(lambda x: [jnp.sum(x), x], has_aux=True)(x),
          (A([1.0, 1.0, 1.0]), A([0.0, 1.0, 2.0])))


def numpy_constant_aux(x):
    return jnp.sum(x ** 2), {"a": np.arange(3), "b": 2, "c": 1.5, "d": np.float32(3.0)}


def test_numpy_constant_aux_inside_jit():
    # JAX 0.10.2, jit(value_and_grad(numpy_constant_aux, has_aux=True))(ones(3)): aux
    # a = int32 [0 1 2], b = weak int32 2, c = weak float32 1.5, d = float32 3.0
    (value, aux), g = kiln.jit(kiln.value_and_grad(numpy_constant_aux, has_aux=True))(
        jnp.ones(3))
    check((value, g), (A(3.0), A([2.0, 2.0, 2.0])))
    expect = {"a": ([0, 1, 2], "int32", False), "b": (2, "int32", True),
              "c": (1.5, "float32", True), "d": (3.0, "float32", False)}
    for k, (v, dtype, weak) in expect.items():
        assert type(aux[k]) is kiln.Array and aux[k].dtype == dtype, k
        assert aux[k].weak_type == weak and np.array_equal(np.asarray(aux[k]), v), k
    # jvp's tangent of the constant output is a zero of its type, as in JAX
    (p, c), (t, tc) = kiln.jit(lambda x: kiln.jvp(lambda y: (y, np.float32(2)), (x,), (x,)))(
        jnp.ones(2))
    assert float(c) == 2.0 and float(tc) == 0.0 and tc.dtype == np.float32


def aux_single(x):
    return x * 2.0


def aux_triple(x):
    return x, x, x


def aux_dict(x):
    return {"a": x, "b": x}


@pytest.mark.parametrize("fn, structure", [
    (aux_single, "PyTreeDef(*)"), (aux_triple, "PyTreeDef((*, *, *))"),
    (aux_dict, "PyTreeDef({'a': *, 'b': *})")])
@pytest.mark.parametrize("api", [kiln.grad, kiln.value_and_grad, kiln.jacrev, kiln.jacfwd])
def test_has_aux_needs_a_pair(api, fn, structure):
    with pytest.raises(TypeError) as e:
        api(fn, has_aux=True)(1.0)
    msg = str(e.value)
    assert "expected function with aux output to return a two-element tuple" in msg
    assert structure in msg and where(fn) in msg


def test_has_aux_with_non_scalar_value():
    with pytest.raises(TypeError, match=r"Gradient only defined for scalar-output functions. "
                                        r"Output had shape: \(2,\)"):
        kiln.grad(lambda x: (x, 1.0), has_aux=True)(jnp.ones(2))


# ------------------------------------------------------------------------------- MLP

RNG = np.random.RandomState(0)
X = RNG.randn(8, 3).astype(np.float32)
Y = RNG.randn(8, 2).astype(np.float32)
PARAMS = {"layers": [{"w": RNG.randn(3, 4).astype(np.float32) * 0.5, "b": np.zeros(4, np.float32)},
                     {"w": RNG.randn(4, 2).astype(np.float32) * 0.5,
                      "b": np.full(2, 0.1, np.float32)}]}


def mlp(params, x):
    h = x
    for i, layer in enumerate(params["layers"]):
        h = h @ layer["w"] + layer["b"]
        if i < len(params["layers"]) - 1:
            h = jnp.tanh(h)
    return h


def mlp_loss_aux(params, x, y):
    pred = mlp(params, x)
    err = pred - y
    return jnp.mean(err ** 2), {"pred": pred, "max_err": jnp.max(jnp.abs(err))}


def mlp_loss(params, x, y):
    err = mlp(params, x) - y
    return jnp.mean(err ** 2)


def numpy_backprop(params, x, y):
    """The MLP's loss, predictions and gradients, by hand."""
    (l1, l2) = params["layers"]
    z1 = x @ l1["w"] + l1["b"]
    h1 = np.tanh(z1)
    pred = h1 @ l2["w"] + l2["b"]
    err = pred - y
    loss = np.mean(err ** 2)
    d_pred = 2 * err / err.size
    d_w2, d_b2 = h1.T @ d_pred, d_pred.sum(0)
    d_z1 = (d_pred @ l2["w"].T) * (1 - h1 ** 2)
    d_w1, d_b1 = x.T @ d_z1, d_z1.sum(0)
    grads = {"layers": [{"w": d_w1, "b": d_b1}, {"w": d_w2, "b": d_b2}]}
    return loss, pred, grads


def assert_close_tree(got, want, rtol=1e-5, atol=1e-6):
    got_leaves, got_tree = tree_flatten(got)
    want_leaves, want_tree = tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).dtype == np.float32 and g.shape == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)


def test_mlp_value_and_grad_has_aux():
    (loss, aux), grads = kiln.value_and_grad(mlp_loss_aux, has_aux=True)(PARAMS, X, Y)
    want_loss, want_pred, want_grads = numpy_backprop(PARAMS, X, Y)
    assert tree_structure(grads) == tree_structure(PARAMS)
    assert tree_structure(aux) == tree_structure({"pred": 0, "max_err": 0})
    np.testing.assert_allclose(np.asarray(loss), 1.3307494, rtol=1e-6)   # JAX 0.10.2
    np.testing.assert_allclose(np.asarray(loss), want_loss, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(aux["pred"]), want_pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(aux["max_err"]),
                               np.max(np.abs(want_pred - Y)), rtol=1e-6)
    assert_close_tree(grads, want_grads)
    # A JAX 0.10.2 leaf, for good measure.
    np.testing.assert_allclose(np.asarray(grads["layers"][1]["b"]), [-0.46371806, 0.09464891],
                               rtol=1e-6)


@pytest.mark.parametrize("make", [
    lambda: kiln.jit(kiln.grad(mlp_loss)),
    lambda: kiln.grad(kiln.jit(mlp_loss)),
    lambda: kiln.grad(mlp_loss),
])
def test_mlp_grad_equals_numpy_backprop(make):
    grad_fn = make()
    want = numpy_backprop(PARAMS, X, Y)[2]
    assert_close_tree(grad_fn(PARAMS, X, Y), want)
    assert_close_tree(grad_fn(PARAMS, X * 2, Y), numpy_backprop(PARAMS, X * 2, Y)[2])


# ------------------------------------------------------------------------ allow_int

def test_allow_int_gives_float0():
    check(kiln.grad(lambda x, y: x * y, argnums=(0, 1), allow_int=True)(3, 2.0),
          (F0(), W(3.0)))
    check(kiln.grad(lambda x: jnp.sum(x * 2.0), allow_int=True)(jnp.arange(3)), F0((3,)))
    check(kiln.grad(lambda x: 1.0, allow_int=True)(jnp.array([True, False])), F0((2,)))
    check(kiln.grad(lambda p: p["n"] * p["x"], allow_int=True)({"n": 2, "x": 1.5}),
          {"n": F0(), "x": W(2.0)})


def int_input(x):
    return jnp.sum(x * 2.0)


@pytest.mark.parametrize("x, dtype", [(1, "int32"), (jnp.arange(3), "int32"),
                                      (True, "bool"), (jnp.arange(3, dtype=jnp.uint8), "uint8")])
@pytest.mark.parametrize("api", [kiln.grad, kiln.value_and_grad, kiln.jacrev])
def test_integer_input_without_allow_int(api, x, dtype):
    with pytest.raises(TypeError) as e:
        api(int_input)(x)
    name = "jacrev" if api is kiln.jacrev else "grad"
    msg = str(e.value)
    assert msg.startswith(f"{name} requires real- or complex-valued inputs (input dtype that is "
                          f"a sub-dtype of np.inexact), but got {dtype}. If you want to use "
                          f"Boolean- or integer-valued inputs, use vjp or set allow_int to True.")
    assert where(int_input) in msg


# ---------------------------------------------------------------------------- pytrees

@pytest.mark.parametrize("fn, arg, want", [
    (lambda p: p["a"] * p["b"] ** 2, {"a": 2.0, "b": jnp.array(3.0)},
     {"a": W(9.0), "b": W(12.0)}),
    (lambda p: p[0] * jnp.sum(p[1]), (2.0, jnp.arange(2.0)), (W(1.0), A([2.0, 2.0]))),
    (lambda p: p[0] * jnp.sum(p[1]), [2.0, jnp.arange(2.0)], [W(1.0), A([2.0, 2.0])]),
    (lambda p: p.x * p.y, Point(2.0, 3.0), Point(W(3.0), W(2.0))),
    (lambda p: p[0] * 2.0, (3.0, None), (W(2.0), None)),
    (lambda p: p["a"] * 2.0, {"a": 3.0, "z": None}, {"a": W(2.0), "z": None}),
    (lambda p: p["l"][0] * jnp.sum(p["l"][1].x) + p["t"][0],
     {"l": [2.0, Point(jnp.ones(2), 1.0)], "t": (4.0,)},
     {"l": [W(2.0), Point(A([2.0, 2.0]), W(0.0))], "t": (W(1.0),)}),
    (lambda p: 2.0, {"a": jnp.ones(2), "b": (1.0,)}, {"a": A([0.0, 0.0]), "b": (W(0.0),)}),
])
def test_pytree_inputs(fn, arg, want):
    check(kiln.grad(fn)(arg), want)


def test_kwargs_are_passed_through_undifferentiated():
    check(kiln.grad(lambda x, scale=1.0: x * x * scale)(3.0, scale=2.0), W(12.0))
    check(kiln.grad(lambda x, *, w: jnp.sum(x * w))(jnp.ones(2), w=jnp.array([2.0, 3.0])),
          A([2.0, 3.0]))
    check(kiln.value_and_grad(lambda x, y, w: x * y * w, argnums=1)(1.0, 2.0, w=3.0),
          (W(6.0), W(3.0)))
    # Integer keyword arguments need no allow_int: they are not differentiated.
    check(kiln.grad(lambda x, n: x ** n)(2.0, n=3), W(12.0))
    check(kiln.grad(lambda x, p: p["s"] * x)(2.0, p={"s": jnp.float32(4.0)}), W(4.0))


class Model:
    def __init__(self, scale):
        self.scale = scale

    def loss(self, x):
        return jnp.sum(x * x) * self.scale

    def __call__(self, x):
        return jnp.sum(jnp.sin(x)) * self.scale


def scaled_product(x, y, scale):
    return x * y * scale


def test_callables_and_empty_arguments():
    check(kiln.grad(functools.partial(scaled_product, scale=2.0))(1.0, 3.0), W(6.0))
    check(kiln.grad(functools.partial(scaled_product, 5.0), argnums=1)(1.0, 3.0), W(5.0))
    check(kiln.jit(kiln.grad(functools.partial(scaled_product, scale=2.0)))(1.0, 3.0), W(6.0))
    check(kiln.grad(Model(3.0).loss)(jnp.ones(2)), A([6.0, 6.0]))
    check(kiln.grad(Model(3.0))(jnp.zeros(2)), A([3.0, 3.0]))
    check(kiln.grad(lambda *xs: xs[0] * xs[1], argnums=1)(2.0, 3.0), W(2.0))
    check(kiln.grad(lambda x, p: x, argnums=1)(1.0, ()), ())
    check(kiln.grad(lambda x, p: x, argnums=(0, 1))(1.0, {}), (W(1.0), {}))
    check(kiln.vjp(lambda: jnp.ones(2) * 2)[1](jnp.ones(2)), ())
    check(kiln.jvp(lambda: jnp.ones(2) * 2, (), ()), (A([2.0, 2.0]), A([0.0, 0.0])))
    with pytest.raises(TypeError, match="Expected a callable value, got 3"):
        kiln.grad(3)


# -------------------------------------------------------------------------- weak types

@pytest.mark.parametrize("fn, args, argnums, want", [
    (lambda x: x * x, (3.0,), 0, W(6.0)),
    (lambda x: x * x, (jnp.float32(3.0),), 0, A(6.0)),
    (lambda x: x * x, (jnp.array(3.0),), 0, W(6.0)),
    (lambda x, y: x * y, (3.0, jnp.float32(2.0)), (0, 1), (W(2.0), A(3.0))),
    (lambda x: 1.0, (3.0,), 0, W(0.0)),
    (lambda x: jnp.float32(1.0), (3.0,), 0, W(0.0)),
    (lambda x: x * jnp.float32(2.0), (3.0,), 0, W(2.0)),
    (lambda x: jnp.sum(x * jnp.ones(2)), (3.0,), 0, W(2.0)),
    (lambda x, y: y * 2.0, (jnp.ones(2), 1.0), (0, 1), (A([0.0, 0.0]), W(2.0))),
    (lambda x: x * x, (jnp.float16(3.0),), 0, A(6.0, dtype="float16")),
    (lambda x: jnp.abs(x) ** 2, (jnp.complex64(1.0 + 2j),), 0, A(2.0 - 4j, dtype="complex64")),
])
def test_gradient_weak_types(fn, args, argnums, want):
    check(kiln.grad(fn, argnums=argnums)(*args), want)


def test_dtypes_with_x64(x64):
    check(kiln.grad(lambda x: x * x)(3.0), W(6.0, dtype="float64"))
    check(kiln.grad(lambda x: x * x)(jnp.float32(3.0)), A(6.0))
    check(kiln.grad(lambda x: jnp.sum(x * 2.0))(jnp.ones(2, jnp.float32)), A([2.0, 2.0]))
    check(kiln.grad(lambda x: jnp.sum(x * x))(np.ones(2)), A([2.0, 2.0], dtype="float64"))
    check(kiln.hessian(lambda x: x ** 3)(2.0), W(12.0, dtype="float64"))
    with pytest.raises(TypeError, match="expected tangent dtype float32, but got tangent dtype "
                                        "float64 instead"):
        kiln.jvp(lambda x: x, (jnp.float32(1.0),), (1.0,))
    with pytest.raises(ValueError, match=r"got f64\[\], but expected f32\[\]"):
        kiln.vjp(lambda x: x * 2.0, jnp.float32(1.0))[1](1.0)


# ------------------------------------------------------------------------ bad outputs

def vector_out(x):
    return x * 2


def pair_out(x):
    return x, x


def complex_out(x):
    return x * (1 + 1j)


def int_out(x):
    return jnp.int32(1)


def test_grad_of_non_scalar_output():
    for make in (kiln.grad, kiln.value_and_grad):
        with pytest.raises(TypeError) as e:
            make(vector_out)(jnp.ones(3))
        msg = str(e.value)
        assert msg.startswith("Gradient only defined for scalar-output functions. Output had "
                              "shape: (3,).")
        assert where(vector_out) in msg
    with pytest.raises(TypeError, match="Gradient only defined for scalar-output functions") as e:
        kiln.grad(pair_out)(1.0)
    assert where(pair_out) in str(e.value)


@pytest.mark.parametrize("fn, structure", [
    (lambda x: [x * 2], "PyTreeDef([*])"), (lambda x: (x * 2,), "PyTreeDef((*,))"),
    (lambda x: {"a": x * 2}, "PyTreeDef({'a': *})")])
def test_grad_of_a_container_holding_one_scalar(fn, structure):
    """JAX differentiates a single array output only, not a container around one."""
    with pytest.raises(TypeError) as e:
        kiln.grad(fn)(1.0)
    assert str(e.value).startswith("Gradient only defined for scalar-output functions. Output "
                                   f"was a pytree with structure {structure}")


def square(z):
    return z * z


def real_part(z):
    return jnp.real(z)


@pytest.mark.parametrize("api", [kiln.grad, kiln.jacfwd, kiln.jacrev])
def test_holomorphic(api):
    check(api(square, holomorphic=True)(jnp.complex64(1 + 1j)), A(2 + 2j, dtype="complex64"))
    name = {kiln.grad: "grad", kiln.jacfwd: "jacfwd", kiln.jacrev: "jacrev"}[api]
    for fn, x, side in [(square, 1.0, "inputs"), (real_part, 1.0 + 1j, "outputs")]:
        with pytest.raises(TypeError) as e:
            api(fn, holomorphic=True)(x)
        assert str(e.value).startswith(f"{name} with holomorphic=True requires {side} with "
                                       f"complex dtype, but got float32.")
        assert where(fn) in str(e.value)


def test_grad_of_complex_or_integer_output():
    with pytest.raises(TypeError) as e:
        kiln.grad(complex_out)(1.0)
    msg = str(e.value)
    assert msg.startswith("grad requires real-valued outputs (output dtype that is a sub-dtype of "
                          "np.floating), but got complex64. For holomorphic differentiation, "
                          "pass holomorphic=True. For differentiation of non-holomorphic "
                          "functions involving complex outputs, use kiln.vjp directly.")
    assert where(complex_out) in msg
    with pytest.raises(TypeError) as e:
        kiln.grad(int_out)(1.0)
    msg = str(e.value)
    assert "but got int32. For differentiation of functions with integer outputs, use kiln.vjp" \
        in msg and where(int_out) in msg


def test_errors_name_the_user_function_through_wrappers():
    """Inside `jit`, under another `grad` and through `jit(f)`, the message still points at the
    user's function, not at kiln's wrappers."""
    calls = [lambda: kiln.jit(kiln.grad(vector_out))(jnp.ones(3)),
             lambda: kiln.grad(lambda x: jnp.sum(kiln.grad(vector_out)(x)))(jnp.ones(3)),
             lambda: kiln.grad(kiln.jit(vector_out))(jnp.ones(3)),
             lambda: kiln.jit(lambda x: kiln.grad(vector_out)(x))(jnp.ones(3))]
    for call in calls:
        with pytest.raises(TypeError, match="Gradient only defined for scalar-output") as e:
            call()
        assert where(vector_out) in str(e.value)


# ------------------------------------------------------------------------------- jvp

def tree_fn(p):
    return jnp.sin(p["a"]) * p["b"], {"s": jnp.sum(p["a"] ** 2)}


def test_jvp_pytrees():
    primals = {"a": jnp.array([0.5, 1.0, 2.0]), "b": jnp.float32(3.0)}
    tangents = {"a": jnp.array([1.0, 0.0, -1.0]), "b": jnp.float32(0.5)}
    check(kiln.jvp(tree_fn, (primals,), (tangents,)),
          ((A([1.4382766, 2.5244129, 2.7278922]), {"s": A(5.25)}),
           (A([2.8724604, 0.4207355, 1.7030892]), {"s": A(-3.0)})))
    check(kiln.jvp(lambda x: x * x, (3.0,), (1.0,)), (W(9.0), W(6.0)))
    check(kiln.jvp(lambda x, y: x * y, (3.0, jnp.ones(2)), (1.0, jnp.arange(2.0))),
          (A([3.0, 3.0]), A([1.0, 4.0])))
    check(kiln.jvp(lambda x: x * jnp.float32(2.0), (3.0,), (1.0,)), (A(6.0), A(2.0)))
    check(kiln.jvp(lambda x: x * 2, (jnp.ones(2),), (np.ones(2),)),   # float64 canonicalised
          (A([2.0, 2.0]), A([2.0, 2.0])))
    # a constant result inside jit (a Literal in the SSA) is returned as a value of its own
    check(kiln.jit(lambda x: kiln.jvp(lambda x: 3.0, (x,), (x,)))(jnp.ones(2)),
          (W(3.0), W(0.0)))


def test_jvp_has_aux_and_integers():
    check(kiln.jvp(lambda x: (x * x, {"c": x + 1}), (3.0,), (2.0,), has_aux=True),
          (W(9.0), W(12.0), {"c": W(4.0)}))
    check(kiln.jvp(lambda x, n: x * n, (3.0, 2), (1.0, np.zeros((), FLOAT0))), (W(6.0), W(2.0)))
    check(kiln.jvp(lambda n: n * 2, (jnp.arange(2),), (np.zeros(2, FLOAT0),)),
          (A([0, 2], dtype="int32"), F0((2,))))
    check(kiln.jvp(lambda x: (x * 2, jnp.int32(3)), (3.0,), (1.0,)),
          ((W(6.0), A(3, dtype="int32")), (W(2.0), F0())))


@pytest.mark.parametrize("primals, tangents, error, message", [
    ((jnp.float32(1.0),), (jnp.float16(1.0),), TypeError,
     "Got primal dtype float32 and so expected tangent dtype float32, but got tangent dtype "
     "float16 instead."),
    ((jnp.float16(1.0),), (1.0,), TypeError,
     "Got primal dtype float16 and so expected tangent dtype float16, but got tangent dtype "
     "float32 instead."),
    ((1.0,), (1,), TypeError,
     "expected tangent dtype float32, but got tangent dtype int32 instead."),
    ((jnp.complex64(1.0),), (jnp.float32(1.0),), TypeError,
     "expected tangent dtype complex64, but got tangent dtype float32 instead."),
    ((1,), (1.0,), TypeError,
     "Got primal dtype int32 and so expected tangent dtype float0, but got tangent dtype "
     "float32 instead."),
    ((1,), (1,), TypeError, "expected tangent dtype float0, but got tangent dtype int32"),
    ((jnp.ones(3),), (jnp.ones(2),), ValueError,
     "called with different primal and tangent shapes; got primal shape (3,) and tangent "
     "shape as (2,)"),
    ((jnp.ones(2),), (1.0,), ValueError, "got primal shape (2,) and tangent shape as ()"),
    ((jnp.arange(2),), (np.zeros(3, FLOAT0),), ValueError,
     "got primal shape (2,) and tangent shape as (3,)"),
    (((1.0, 2.0),), ([1.0, 2.0],), TypeError,
     "primal and tangent arguments to kiln.jvp must have the same tree structure; primals have "
     "tree structure PyTreeDef(((*, *),)) whereas tangents have tree structure "
     "PyTreeDef(([*, *],))."),
    ((1.0, 2.0), (1.0,), TypeError, "must have equal length; got 2 primals and 1 tangents"),
    (1.0, (1.0,), TypeError, "primal arguments to kiln.jvp must be tuples or lists; found float"),
])
def test_jvp_mismatched_primals_and_tangents(primals, tangents, error, message):
    with pytest.raises(error) as e:
        kiln.jvp(first, primals, tangents)
    assert message in str(e.value)
    if "dtype" in message or "shape" in message:
        assert where(first) in str(e.value)
    if error is TypeError and "dtype" in message:
        assert "dtypes must be equal, or in case of int/bool primal dtype the tangent dtype " \
            "must be float0" in str(e.value)


def first(*xs):
    return xs[0]


# ------------------------------------------------------------------------------- vjp

def test_vjp_pytrees():
    def fn(x, y):
        return {"u": x * y, "v": (jnp.sin(x), y ** 2)}
    out, vjp_fun = kiln.vjp(fn, jnp.array([1.0, 2.0]), 3.0)
    check(out, {"u": A([3.0, 6.0]), "v": (A([0.841471, 0.9092974]), W(9.0))})
    ct = {"u": jnp.array([1.0, -1.0]), "v": (jnp.array([0.5, 0.5]), 2.0)}
    check(vjp_fun(ct), (A([3.2701511, -3.2080734]), W(11.0)))
    # vjp_fun can be called again with other cotangents.
    ct = {"u": jnp.zeros(2), "v": (jnp.zeros(2), 1.0)}
    check(vjp_fun(ct), (A([0.0, 0.0]), W(6.0)))


def test_vjp_has_aux_and_integers():
    out, vjp_fun, aux = kiln.vjp(lambda x: (x * x, [x, 7]), jnp.array([1.0, 2.0]), has_aux=True)
    check((out, vjp_fun(jnp.ones(2)), aux[0]), (A([1.0, 4.0]), (A([2.0, 4.0]),), A([1.0, 2.0])))
    assert isinstance(aux, list) and int(aux[1]) == 7
    out, vjp_fun = kiln.vjp(lambda x, n: x * n, 2.0, 3)
    check((out, vjp_fun(1.0)), (W(6.0), (W(3.0), F0())))
    # Integer outputs take a float0 (or integer) cotangent.
    _, vjp_fun = kiln.vjp(lambda x: (x * 2.0, 1), 1.0)
    check(vjp_fun((1.0, np.zeros((), FLOAT0))), (W(2.0),))
    check(vjp_fun((1.0, 0)), (W(2.0),))
    check(kiln.vjp(lambda x: x * 2.0, jnp.float32(3.0))[1](1.0), (A(2.0),))


def test_vjp_fun_under_vmap_and_jit():
    # The autodiff cookbook's matrix-Jacobian products: vmap(vjp_fun) over cotangent rows
    # (and jit of it) compiles the derivative with the primals as constants.
    def fn(w, b):
        return {"y": jnp.tanh(w * 2.0 + b["c"]), "s": jnp.sum(w)}
    w, b = jnp.array([0.5, -1.0, 2.0]), {"c": 0.25}
    _, vjp_fun = kiln.vjp(fn, w, b)
    rows = {"y": jnp.eye(3), "s": jnp.arange(3.0)}
    got = kiln.vmap(vjp_fun)(rows)
    want = [vjp_fun({"y": rows["y"][i], "s": rows["s"][i]}) for i in range(3)]
    np.testing.assert_allclose(got[0], np.stack([np.asarray(v[0]) for v in want]), rtol=1e-6)
    np.testing.assert_allclose(got[1]["c"], [float(v[1]["c"]) for v in want], rtol=1e-6)
    ct = {"y": jnp.array([1.0, 2.0, -1.0]), "s": jnp.float32(0.5)}
    got, want = kiln.jit(vjp_fun)(ct), vjp_fun(ct)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1]["c"], want[1]["c"], rtol=1e-6)
    _, vjp_aux, aux = kiln.vjp(lambda x: (x * x, x + 1), jnp.arange(2.0), has_aux=True)
    np.testing.assert_allclose(kiln.vmap(vjp_aux)(jnp.eye(2))[0], [[0.0, 0.0], [0.0, 2.0]])


def test_derivatives_inside_jit_at_python_floats():
    # grad(f)(0.25) inside jit differentiates at the constant, as outside (it gave 0)
    def f(c):
        return jnp.sin(c) * 2.0
    want = 2 * np.cos(0.25)
    uses = [lambda: kiln.grad(f)(0.25), lambda: kiln.value_and_grad(f)(0.25)[1],
            lambda: kiln.vjp(f, 0.25)[1](1.0)[0], lambda: kiln.jacrev(f)(0.25),
            lambda: kiln.jvp(f, (0.25,), (1.0,))[1],
            lambda: kiln.grad(lambda d: f(d["c"]))({"c": 0.25})["c"]]
    for use in uses:
        np.testing.assert_allclose(kiln.jit(lambda x: use() * x)(1.0), want, rtol=1e-6)


def doubled(x):
    return x * 2


def pair(x):
    return x, x


@pytest.mark.parametrize("fn, primal, ct, got, expected", [
    (doubled, jnp.ones(3), jnp.ones(2), "f32[2]", "f32[3]"),
    (doubled, jnp.ones(3), jnp.ones(3, jnp.int32), "i32[3]", "f32[3]"),
    (doubled, jnp.ones(3), jnp.ones(3, jnp.float16), "f16[3]", "f32[3]"),
    (doubled, 3.0, 1, "i32[]", "f32[]"),
    (doubled, jnp.float16(1.0), 1.0, "f32[]", "f16[]"),
    (doubled, 1.0, np.zeros((), FLOAT0), "float0[]", "f32[]"),
    (lambda x: (x, jnp.arange(2)), 1.0, (1.0, np.zeros(3, FLOAT0)), "float0[3]", "i32[2]"),
])
def test_vjp_fun_with_wrong_cotangent_type(fn, primal, ct, got, expected):
    _, vjp_fun = kiln.vjp(fn, primal)
    with pytest.raises(ValueError) as e:
        vjp_fun(ct)
    assert str(e.value) == (
        f"unexpected type (shape/dtype) for argument to VJP function: got {got}, but expected "
        f"{expected} because the corresponding output of the differentiated function had type "
        f"{expected}. (Differentiating {where(fn)}.)")


@pytest.mark.parametrize("fn, ct, structure", [
    (pair, [jnp.ones(3), jnp.ones(3)], "got PyTreeDef([*, *]), expected PyTreeDef((*, *))"),
    (doubled, (jnp.ones(3),), "got PyTreeDef((*,)), expected PyTreeDef(*)"),
])
def test_vjp_fun_with_wrong_cotangent_structure(fn, ct, structure):
    _, vjp_fun = kiln.vjp(fn, jnp.ones(3))
    with pytest.raises(ValueError) as e:
        vjp_fun(ct)
    msg = str(e.value)
    assert msg.startswith("unexpected tree structure")
    assert structure in msg and where(fn) in msg


# ------------------------------------------------------------------------- linearize

def test_linearize():
    out, f_jvp = kiln.linearize(lambda x, y: {"a": jnp.sin(x) * y}, jnp.array([0.5, 1.0]), 2.0)
    check(out, {"a": A([0.9588511, 1.6829419])})
    check(f_jvp(jnp.array([1.0, 1.0]), 0.5), {"a": A([1.9948778, 1.50134])})
    check(f_jvp(jnp.zeros(2), 1.0), {"a": A([0.4794255, 0.841471])})
    out, f_jvp = kiln.linearize(lambda x, n: x * n, 1.0, 2)
    check((out, f_jvp(2.0, np.zeros((), FLOAT0))), (W(2.0), W(4.0)))
    with pytest.raises(TypeError, match="linearized function called on tangents with structure"):
        f_jvp(2.0)
    with pytest.raises(TypeError, match="expected tangent dtype float0, but got tangent dtype "
                                        "float32") as e:
        f_jvp(2.0, 1.0)
    assert "(Differentiating test_linearize.<locals>.<lambda> defined at" in str(e.value)


# ------------------------------------------------------------------------- Jacobians

def jac_tree_fn(x):
    return {"o": jnp.sin(x["a"]) * x["b"][0], "p": x["b"][1] * jnp.sum(x["a"])}


JAC_TREE_X = {"a": jnp.array([0.5, 1.0]), "b": (2.0, jnp.array([1.0, 2.0, 3.0]))}


def jac_tree_want(weak_scalar_column):
    """JAX's Jacobian of `jac_tree_fn`: {output: {input: block}}; jacrev keeps the weak type of
    the Python-scalar input's column, jacfwd does not."""
    mk = W if weak_scalar_column else A
    return {"o": {"a": A([[1.7551651, 0.0], [0.0, 1.0806046]]),
                  "b": (mk([0.4794255, 0.841471]), A(np.zeros((2, 3))))},
            "p": {"a": A([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]),
                  "b": (mk([0.0, 0.0, 0.0]), A(np.eye(3) * 1.5))}}


def test_jacobians_of_pytrees():
    check(kiln.jacfwd(jac_tree_fn)(JAC_TREE_X), jac_tree_want(False))
    check(kiln.jacrev(jac_tree_fn)(JAC_TREE_X), jac_tree_want(True))
    # A list output over a dict input: the output structure outside, the input's inside.
    check(kiln.jacrev(lambda p: [p["a"] * 2, jnp.sum(p["b"])])({"a": 1.0, "b": jnp.ones(2)}),
          [{"a": W(2.0), "b": A([0.0, 0.0])}, {"a": W(0.0), "b": A([1.0, 1.0])}])


MATMUL_JAC = [[[[2.0, 3.0], [2.0, 0.0]], [[2.0, 5.0], [0.0, 2.0]]],
              [[[3.0, 0.0], [5.0, 3.0]], [[0.0, 3.0], [2.0, 8.0]]]]


@pytest.mark.parametrize("jac", [kiln.jacfwd, kiln.jacrev])
def test_jacobians(jac):
    check(jac(lambda a: a @ a)(jnp.array([[1.0, 2.0], [3.0, 4.0]])), A(MATMUL_JAC))
    check(jac(lambda x: x * 2.0)(jnp.ones(2)), A([[2.0, 0.0], [0.0, 2.0]]))
    check(jac(lambda x, y: x * y, argnums=(0, 1))(jnp.array([1.0, 2.0]), 3.0),
          (A([[3.0, 0.0], [0.0, 3.0]]), (W if jac is kiln.jacrev else A)([1.0, 2.0])))
    check(jac(lambda x, y: x * y, argnums=(1, 0))(jnp.array([1.0, 2.0]), 3.0),
          ((W if jac is kiln.jacrev else A)([1.0, 2.0]), A([[3.0, 0.0], [0.0, 3.0]])))
    check(jac(lambda x: (x ** 2, x[0]), has_aux=True)(jnp.array([1.0, 2.0])),
          (A([[2.0, 0.0], [0.0, 4.0]]), A(1.0)))
    check(jac(lambda x: x * x)(jnp.float32(3.0)), A(6.0))
    check(jac(lambda x: x * jnp.ones(2))(3.0), (W if jac is kiln.jacrev else A)([1.0, 1.0]))


def test_jacrev_of_python_scalar_keeps_weak_type():
    check(kiln.jacrev(lambda x: x * x)(3.0), W(6.0))


@pytest.mark.parametrize("x", [3.0, jnp.array(3.0)])
def test_jacfwd_of_weak_input_keeps_weak_type(x):
    check(kiln.jacfwd(lambda x: x * x)(x), W(6.0))


def test_jacobian_dtype_rules():
    # jacrev takes complex inputs (real outputs); jacfwd takes complex outputs (real inputs).
    check(kiln.jacrev(lambda x: jnp.real(x * x))(jnp.array([1.0 + 1j, 2.0])),
          A([[2.0 + 2j, 0.0], [0.0, 4.0]], dtype="complex64"))
    check(kiln.jacfwd(lambda x: x * (1 + 1j))(jnp.array([1.0, 2.0])),
          A([[1.0 + 1j, 0.0], [0.0, 1.0 + 1j]], dtype="complex64"))
    check(kiln.jacrev(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3),
          (W(3.0), W(0, dtype="int32")))   # JAX's jacrev gives integer zeros here, not float0


def real_in_complex_out(x):
    return x * (1 + 1j)


def complex_in(x):
    return jnp.real(x * x)


def test_jacobian_dtype_errors():
    with pytest.raises(TypeError) as e:
        kiln.jacrev(real_in_complex_out)(jnp.array([1.0, 2.0]))
    assert str(e.value).startswith(
        "jacrev requires real-valued outputs (output dtype that is a sub-dtype of np.floating), "
        "but got complex64. For holomorphic differentiation, pass holomorphic=True.")
    assert where(real_in_complex_out) in str(e.value)
    for x in (jnp.array([1.0 + 1j, 2.0]), jnp.arange(2)):
        with pytest.raises(TypeError) as e:
            kiln.jacfwd(complex_in)(x)
        assert str(e.value).startswith(
            f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
            f"np.floating), but got {x.dtype}. For holomorphic differentiation, pass "
            f"holomorphic=True.")
        assert where(complex_in) in str(e.value)


def test_hessian():
    check(kiln.hessian(lambda x: jnp.sum(x ** 3) + x[0] * x[1])(jnp.array([1.0, 2.0])),
          A([[6.0, 1.0], [1.0, 12.0]]))
    check(kiln.hessian(lambda x: x ** 4)(2.0), W(48.0))
    check(kiln.hessian(lambda x: x ** 3)(jnp.float32(3.0)), A(18.0))
    check(kiln.hessian(lambda p: p["a"] ** 2 * p["b"])({"a": 2.0, "b": 3.0}),
          {"a": {"a": W(6.0), "b": W(4.0)}, "b": {"a": W(4.0), "b": W(0.0)}})
    check(kiln.hessian(lambda x, y: x ** 2 * y ** 3, argnums=(0, 1))(2.0, 3.0),
          ((W(54.0), W(108.0)), (W(108.0), W(72.0))))


def test_mixed_jacobians():
    fn = lambda x: jnp.sin(x) * x[0]   # noqa: E731
    want = A([[[1.5154524, 0.0], [0.0, 0.0]], [[0.0, 0.5403023], [0.5403023, -0.4207355]]])
    check(kiln.jacfwd(kiln.jacrev(fn))(jnp.array([0.5, 1.0])), want)
    check(kiln.jacrev(kiln.jacrev(fn))(jnp.array([0.5, 1.0])), want)
    check(kiln.jacrev(kiln.jacfwd(fn))(jnp.array([0.5, 1.0])), want)


# --------------------------------------------------------------------- stop_gradient

def test_stop_gradient():
    check(kiln.grad(lambda x: x * lax.stop_gradient(x))(3.0), W(3.0))
    check(kiln.grad(lambda x: jnp.sum(lax.stop_gradient(x ** 2) + x))(jnp.ones(2)),
          A([1.0, 1.0]))
    check(kiln.grad(lambda x: lax.stop_gradient({"a": x, "b": x})["a"] * x)(2.0), W(2.0))
    check(kiln.jvp(lambda x: x * lax.stop_gradient(x), (3.0,), (1.0,)), (W(9.0), W(3.0)))
    check(kiln.grad(kiln.grad(lambda x: x ** 2 * lax.stop_gradient(x ** 2)))(3.0), W(18.0))
    check(kiln.jit(kiln.grad(lambda x: jnp.sum(x * lax.stop_gradient(jnp.exp(x)))))(
        jnp.zeros(2)), A([1.0, 1.0]))
    # Outside differentiation it is the identity, on pytrees and integers too.
    value = lax.stop_gradient({"a": 2.0, "b": jnp.arange(2)})
    check(value, {"a": W(2.0), "b": A([0, 1], dtype="int32")})


# ----------------------------------------------- higher orders, jit, closures, seeds

def cube(x):
    return 2 * x ** 3


def test_seed_examples(capsys):
    g = kiln.grad(cube)
    check((g(1.0), kiln.grad(g)(1.0), kiln.grad(kiln.grad(g))(1.0)), (W(6.0), W(12.0), W(12.0)))
    assert float(g(1.0)) == 6.0 and float(kiln.grad(g)(1.0)) == 12.0
    print(kiln.grad(jnp.tanh)(1.0))
    assert capsys.readouterr().out == "0.4199743\n"


def test_grad_of_jit_and_jit_of_grad():
    fn = lambda x: jnp.sin(x) * x   # noqa: E731
    check(kiln.grad(kiln.jit(fn))(1.0), W(1.3817732))
    check(kiln.jit(kiln.grad(fn))(1.0), W(1.3817732))
    check(kiln.jit(kiln.grad(kiln.jit(fn)))(1.0), W(1.3817732))
    check(kiln.jvp(kiln.grad(lambda x: x ** 3), (2.0,), (1.0,)), (W(12.0), W(12.0)))
    check(kiln.value_and_grad(lambda x: kiln.value_and_grad(lambda y: y ** 3)(x)[1])(2.0),
          (W(12.0), W(12.0)))


def grad_in_jit(x, y):
    def inner(z):
        return jnp.sum(jnp.sin(z * x) * y)   # closes over the jit arguments x and y
    return kiln.grad(inner)(x * 2)


def test_closures_over_outer_traced_values():
    x = jnp.array([0.5, 1.0])
    check(kiln.jit(grad_in_jit)(x, 3.0), A([1.3163738, -1.2484405]))
    check(grad_in_jit(x, 3.0), A([1.3163738, -1.2484405]))
    # Differentiating through it: the outer derivative flows through the closed-over x.
    check(kiln.grad(lambda x: jnp.sum(grad_in_jit(x, 2.0)))(x), A([0.796314, -8.106673]))

    def jvp_closure(x):
        return kiln.jvp(lambda y: jnp.sin(x * y), (2.0,), (1.0,))[1]
    check(kiln.grad(jvp_closure)(0.5), W(-0.3011687))
    check(kiln.jit(kiln.grad(jvp_closure))(0.5), W(-0.3011687))


def sum_sin(x):
    return jnp.sum(jnp.sin(x))


def test_eager_grad_compiles_once_per_signature(monkeypatch, caplog):
    monkeypatch.setenv("KILN_LOG_COMPILES", "1")
    g = kiln.grad(sum_sin)
    with caplog.at_level(logging.DEBUG, logger="kiln"):
        check((g(jnp.zeros(3)), g(jnp.ones(3))), (A([1.0, 1.0, 1.0]), A(np.cos(np.ones(3)))))
        check(g(jnp.zeros(2)), A([1.0, 1.0]))
    messages = [r.getMessage() for r in caplog.records if r.name == "kiln"]
    assert messages == ["kiln: compiling grad_sum_sin for f32[3]",
                        "kiln: compiling grad_sum_sin for f32[2]"]


# ----------------------------------------------------------------- readable output

def readable(x):
    y = jnp.sin(x) * x
    return jnp.sum(y)


def two_args(x, w):
    h = jnp.tanh(x @ w)
    loss = jnp.sum(h * h)
    return loss


def _lines(text):
    return [line.strip() for line in str(text).splitlines() if line.strip()]


def test_make_ir_shows_forward_then_backward():
    lines = _lines(kiln.make_ir(kiln.grad(readable))(jnp.ones(3)))
    assert lines[0] == "def grad_readable(x: 'f32[3]') -> '(f32[], f32[3])':"
    defined = [line.split(" = ")[0] for line in lines[1:-1]]
    first_bar = next(i for i, name in enumerate(defined) if name.endswith("_bar"))
    forward, backward = lines[1:1 + first_bar], lines[1 + first_bar:-1]
    # The forward section is the user's computation, with the user's names.
    assert [re.match(r"\w+ = (\w+)\(", line).group(1) for line in forward] == \
        ["sin", "mul", "reduce_sum"]
    assert any(line.startswith("y = mul(") for line in forward)
    # The backward section names cotangents after the variables: y_bar, x_bar.
    assert "y_bar" in defined and "x_bar" in defined
    assert not any("sin(" in line for line in backward)
    assert any("cos(x)" in line for line in backward)
    assert re.fullmatch(r"return \w+, x_bar(_\d+)?", lines[-1])


def test_make_ir_uses_parameter_names():
    lines = _lines(kiln.make_ir(kiln.grad(two_args, argnums=(0, 1)))(jnp.ones(3),
                                                                     jnp.ones((3, 2))))
    assert lines[0] == ("def grad_two_args(x: 'f32[3]', w: 'f32[3,2]') -> "
                        "'(f32[], f32[3], f32[3,2])':")
    defined = [line.split(" = ")[0] for line in lines[1:-1]]
    assert {"h", "loss", "h_bar", "x_bar", "w_bar"} <= set(defined)
    assert defined.index("loss") < min(i for i, n in enumerate(defined) if n.endswith("_bar"))
    assert lines[-1] == "return loss, x_bar, w_bar"
    # The derivative shown is the one that runs.
    x, w = np.linspace(-1, 1, 3).astype(np.float32), np.ones((3, 2), np.float32) * 0.3
    h = np.tanh(x @ w)
    d = 2 * h * (1 - h ** 2)
    check(kiln.grad(two_args, argnums=(0, 1))(x, w), (A(w @ d), A(np.outer(x, d))))


def test_traced_vjp_and_jvp_recompute_for_new_argument_types():
    # Derivatives shared between calls must not keep the first call's types.
    def pulled_back(z):
        out, f_vjp = kiln.vjp(lax.exp, z)
        return f_vjp(out)[0]
    kiln.jvp(pulled_back, (np.float32(0.5),), (np.float32(1.0),))
    z = np.complex64(0.5 + 1j)
    want = np.exp(z) * np.exp(z)    # d/dz of exp(z)*exp(z) ... pulled back: exp(z)**2
    np.testing.assert_allclose(np.asarray(pulled_back(z)), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(kiln.jvp(pulled_back, (z,), (np.complex64(1),))[0]),
                               want, rtol=1e-5)
    f = lambda x: x * 2  # noqa: E731
    assert float(kiln.jvp(f, (1.0,), (1.0,))[1]) == 2.0
    assert kiln.jvp(f, (np.int32(1),), (np.zeros((), kiln.ad.float0),))[1].dtype == kiln.ad.float0
    assert float(kiln.jvp(f, (2.0,), (3.0,))[1]) == 6.0


def _tanh_row_sum(w):
    return jnp.tanh(w @ jnp.ones(4)) * jnp.sum(w)


def test_eager_vjp_and_linearize_functions_under_vmap_and_jit():
    # A vjp_fun (or linearized function) made outside jit, then mapped or jitted: the
    # matrix-Jacobian product of JAX's autodiff cookbook, checked row by row.
    w = jnp.asarray(np.arange(12.).reshape(3, 4) / 10)
    m = jnp.asarray(np.arange(9.).reshape(3, 3))
    _, vjp_fun = kiln.vjp(_tanh_row_sum, w)
    rows = np.stack([np.asarray(vjp_fun(r)[0]) for r in m])
    np.testing.assert_allclose(kiln.vmap(vjp_fun)(m)[0], rows, rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(vjp_fun)(m[1])[0], rows[1], rtol=1e-6)
    _, vjp_aux, aux = kiln.vjp(lambda v: (_tanh_row_sum(v), v.sum()), w, has_aux=True)
    np.testing.assert_allclose(kiln.vmap(vjp_aux)(m)[0], rows, rtol=1e-6)
    _, lin = kiln.linearize(_tanh_row_sum, w)
    t = jnp.stack([w, 2 * w])
    cols = np.stack([np.asarray(lin(v)) for v in t])
    np.testing.assert_allclose(kiln.vmap(lin)(t), cols, rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(lin)(w), cols[0], rtol=1e-6)


def _sin_times(x):
    return jnp.sin(x) * x


def _dot_with_aux(x, y):
    return (x * y).sum(), {"aux": x}


def test_the_function_vjp_returns_inside_jit_is_a_pytree():
    # autodiff_remat.md: jit (and make_jaxpr) of a function returning vjp's function, whose
    # leaves are arrays (the primals in kiln, the residuals in JAX).
    x = np.arange(3.0, dtype=np.float32)
    want = np.cos(x) * x + np.sin(x)
    y, f_vjp = kiln.jit(lambda v: kiln.vjp(_sin_times, v))(x)
    assert all(isinstance(leaf, kiln.Array) for leaf in kiln.tree_util.tree_leaves(f_vjp))
    np.testing.assert_allclose(y, np.sin(x) * x, rtol=1e-6)
    np.testing.assert_allclose(f_vjp(jnp.ones(3))[0], want, rtol=1e-6)
    np.testing.assert_allclose(kiln.jit(lambda f, c: f(c))(f_vjp, jnp.ones(3))[0], want,
                               rtol=1e-6)
    out, g_vjp, aux = kiln.jit(lambda a, b: kiln.vjp(_dot_with_aux, a, b, has_aux=True))(
        x, np.ones(3, np.float32))
    assert float(out) == 3.0 and np.array_equal(aux["aux"], x)
    np.testing.assert_allclose(g_vjp(1.0)[0], np.ones(3))
    np.testing.assert_allclose(g_vjp(1.0)[1], x)
    kiln.make_jaxpr(lambda v: kiln.vjp(_sin_times, v))(x)


def test_the_function_eager_vjp_returns_is_a_pytree_of_its_residuals():
    # autodiff_remat.md's print_fwd_bwd: flatten vjp's function, rebuild it in a staged one.
    # Its leaves are JAX's: the argument the backward pass reads and the sine and cosine.
    x = np.arange(3.0, dtype=np.float32)
    _, f_vjp = kiln.vjp(_sin_times, jnp.asarray(x))
    leaves, tree = tree_flatten(f_vjp)
    assert len(leaves) == 3 and all(isinstance(leaf, kiln.Array) for leaf in leaves)
    np.testing.assert_array_equal(leaves[0], x)

    def rebuilt(*args):
        *res, ct = args
        return kiln.tree_util.tree_unflatten(tree, res)(ct)
    want = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(kiln.jit(rebuilt)(*leaves, jnp.ones(3))[0], want, rtol=1e-6)
    np.testing.assert_allclose(rebuilt(*leaves, jnp.ones(3))[0], want, rtol=1e-6)
