"""Eager `kiln.lax` control flow against Python loops and JAX 0.10.2.

Values are checked against plain Python loops over NumPy; dtypes, weak types and error messages
against what JAX 0.10.2 returns or raises for the same calls (recorded with
`/tmp/jaxenv/bin/python`; where JAX's message names its own abstract-value class, kiln names
`kiln.array.Array`). Documented difference: in eager mode only the branch taken by
`cond`/`switch` runs, so branches with different output types are not reported.
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import hypothesis.extra.numpy as hnp

import kiln
from kiln import lax

SETTINGS = settings(max_examples=25, deadline=None)

small_ints = hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, min_side=0,
                                                    max_side=5),
                        elements=st.integers(-50, 50))


def _typed(x):
    """(dtype, weak_type, value) of an eager result."""
    assert isinstance(x, kiln.Array), type(x)
    return str(x.dtype), x.weak_type, x.tolist()


# ---------------------------------------------------------------------------- fori_loop

@SETTINGS
@given(lo=st.integers(-3, 5), hi=st.integers(-3, 8), init=st.integers(-10, 10))
def test_fori_loop_matches_python_loop(lo, hi, init):
    out = lax.fori_loop(lo, hi, lambda i, c: c * 2 + i, np.int32(init))
    acc = init
    for i in range(lo, hi):
        acc = acc * 2 + i
    assert out.dtype == np.int32 and int(out) == np.int32(acc)


def test_fori_loop_types_match_jax():
    assert _typed(lax.fori_loop(0, 5, lambda i, c: c + i, 0)) == ("int32", True, 10)
    assert _typed(lax.fori_loop(0, 5, lambda i, c: c * 2.0, 1.0)) == ("float32", True, 32.0)
    a, b = lax.fori_loop(2, 5, lambda i, c: (c[0] + i, c[1] * 2),
                         (np.int32(0), np.float32(1)))
    assert _typed(a) == ("int32", False, 9) and _typed(b) == ("float32", False, 8.0)
    assert _typed(lax.fori_loop(5, 2, lambda i, c: c + i, 7)) == ("int32", True, 7)
    # The index is a weak int32 whatever the bounds' dtype (JAX scans over a Python int).
    idx = lax.fori_loop(0, 1, lambda i, c: (i, c[1]), (np.int32(0), 0))[0]
    assert _typed(idx) == ("int32", True, 0)
    out = lax.fori_loop(np.int8(0), 3, lambda i, c: c + i, 0)
    assert _typed(out) == ("int32", True, 3)


def test_fori_loop_promotes_weak_carry_like_jax():
    # JAX: a weakly typed initial carry takes the body's dtype (strong float32 here).
    assert _typed(lax.fori_loop(0, 3, lambda i, c: c * 1.5, 0)) == ("float32", False, 0.0)


def test_fori_loop_x64_index(x64):
    idx = lax.fori_loop(0, 2, lambda i, c: i, 0)
    assert _typed(idx) == ("int64", True, 1)


@pytest.mark.parametrize("lo,hi,message", [
    (0.0, 3, "lower and upper arguments to fori_loop must have equal types, got float32 and "
             "int32"),
    (np.int8(0), np.int32(3), "lower and upper arguments to fori_loop must have equal types, "
                              "got int8 and int32"),
    (np.uint8(0), 3, "lower and upper arguments to fori_loop must have equal types, got uint8 "
                     "and int32"),
])
def test_fori_loop_bound_errors(lo, hi, message):
    with pytest.raises(TypeError) as info:
        lax.fori_loop(lo, hi, lambda i, c: c, 0)
    assert str(info.value) == message


def test_fori_loop_carry_errors_match_jax():
    with pytest.raises(TypeError) as info:
        lax.fori_loop(0, 3, lambda i, c: c * 1.5, np.int32(0))
    assert str(info.value) == (
        "scan body function carry input and carry output must have equal types, but they "
        "differ:\n\nThe input carry component loop_carry[1] has type int32[] but the "
        "corresponding output carry component has type float32[], so the dtypes do not "
        "match.\n\nRevise the function so that all output types match the corresponding input "
        "types.")
    with pytest.raises(TypeError) as info:
        lax.fori_loop(0, 3, lambda i, c: (c,), 0)
    assert str(info.value) == (
        "scan body function carry input and carry output must have the same pytree structure, "
        "but they differ:\n\nThe input carry component loop_carry[1] is a <class "
        "'kiln.array.Array'> but the corresponding component of the carry output is a <class "
        "'tuple'>, so their Python types differ.\n\nRevise the function so that the carry "
        "output has the same pytree structure as the carry input.")
    with pytest.raises(TypeError, match="lax.fori_loop: body_fun argument should be callable."):
        lax.fori_loop(0, 1, 3, 0)


# --------------------------------------------------------------------------- while_loop

@SETTINGS
@given(start=st.integers(1, 50), limit=st.integers(0, 2000))
def test_while_loop_matches_python_loop(start, limit):
    out = lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] * 2, c[1] + 1),
                         (np.int32(start), np.int32(0)))
    v, n = start, 0
    while v < limit:
        v, n = v * 2, n + 1
    assert (int(out[0]), int(out[1])) == (v, n)


def test_while_loop_types_match_jax():
    assert _typed(lax.while_loop(lambda c: c < 10, lambda c: c * 2, 1)) == ("int32", True, 16)
    a, b = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + 0.5),
                          (0, np.float32(0)))
    assert _typed(a) == ("int32", True, 3) and _typed(b) == ("float32", False, 1.5)
    # weak initial carry, float body: promoted to float32 (JAX 0.10.2)
    assert _typed(lax.while_loop(lambda c: c < 10, lambda c: c * 2.0, 1)) == \
        ("float32", False, 16.0)
    # the result has the type of the traced body output
    assert _typed(lax.while_loop(lambda c: c < 10, lambda c: c + np.int32(1), 0)) == \
        ("int32", False, 10)
    assert _typed(lax.while_loop(lambda c: c < 10, lambda c: 15, np.int32(0))) == \
        ("int32", True, 15)


def test_while_loop_zero_iterations_uses_body_types():
    calls = []

    def body(c):
        calls.append(1)
        return c * 2.0

    out = lax.while_loop(lambda c: c < 0, body, 5)
    assert _typed(out) == ("float32", False, 5.0)
    # The body is evaluated for its types only, as JAX traces it: twice here, because the weak
    # initial carry is promoted to float32 and the body is typed again (JAX's two passes).
    assert calls == [1, 1]
    calls.clear()
    assert _typed(lax.while_loop(lambda c: c < 0, body, np.float32(5))) == \
        ("float32", False, 5.0)
    assert calls == [1]


WHILE_ERRORS = [
    (lambda c: c < 10, lambda c: c * 2.0, np.int32(1),
     "while_loop body function carry input and carry output must have equal types, but they "
     "differ:\n\nThe input carry c has type int32[] but the corresponding output carry "
     "component has type float32[], so the dtypes do not match.\n\nRevise the function so that "
     "all output types match the corresponding input types."),
    (lambda c: c[0] < 10, lambda c: lax.concatenate([c, c], 0), np.ones(1, np.float32),
     "while_loop body function carry input and carry output must have equal types, but they "
     "differ:\n\nThe input carry c has type float32[1] but the corresponding output carry "
     "component has type float32[2], so the shapes do not match.\n\nRevise the function so "
     "that all output types match the corresponding input types."),
    (lambda c: c[0] < 10, lambda c: [c[0] + 1], (0,),
     "while_loop body function carry input and carry output must have the same pytree "
     "structure, but they differ:\n\nThe input carry c is a <class 'tuple'> but the "
     "corresponding component of the carry output is a <class 'list'>, so their Python types "
     "differ.\n\nRevise the function so that the carry output has the same pytree structure as "
     "the carry input."),
    (lambda c: c["a"] < 10, lambda c: {"a": c["a"] + 1, "b": c["b"] * 1.5},
     {"a": 0, "b": np.int32(1)},
     "while_loop body function carry input and carry output must have equal types, but they "
     "differ:\n\nThe input carry component c['b'] has type int32[] but the corresponding "
     "output carry component has type float32[], so the dtypes do not match.\n\nRevise the "
     "function so that all output types match the corresponding input types."),
    (lambda c: c[0] < 10, lambda c: (c[0] * 1.5, c[1] * 1.5), (np.int32(0), np.int32(1)),
     "while_loop body function carry input and carry output must have equal types, but they "
     "differ:\n\n  * the input carry component c[0] has type int32[] but the corresponding "
     "output carry component has type float32[], so the dtypes do not match;\n  * the input "
     "carry component c[1] has type int32[] but the corresponding output carry component has "
     "type float32[], so the dtypes do not match.\n\nRevise the function so that all output "
     "types match the corresponding input types."),
    (lambda c: c < 10, lambda c: c + 1, np.zeros(2, np.int32),
     "cond_fun must return a boolean scalar, but got output type(s) [ShapedArray(bool[2])]."),
    (lambda c: c, lambda c: c - 1, 3,
     "cond_fun must return a boolean scalar, but got output type(s) "
     "[ShapedArray(int32[], weak_type=True)]."),
    (lambda c: (c < 3, c < 3), lambda c: c + 1, 0,
     "cond_fun must return a boolean scalar, but got pytree PyTreeDef((*, *))."),
]


@pytest.mark.parametrize("cond_fun,body_fun,init,message", WHILE_ERRORS)
def test_while_loop_errors_match_jax(cond_fun, body_fun, init, message):
    with pytest.raises(TypeError) as info:
        lax.while_loop(cond_fun, body_fun, init)
    assert str(info.value) == message


def test_while_loop_requires_callables():
    with pytest.raises(TypeError, match="body_fun and cond_fun arguments should be callable"):
        lax.while_loop(1, lambda c: c, 0)


# --------------------------------------------------------------------------------- scan

def _python_scan(f, carry, xs, reverse=False):
    ys = [None] * len(xs)
    for i in (reversed(range(len(xs))) if reverse else range(len(xs))):
        carry, ys[i] = f(carry, xs[i])
    return carry, ys


@SETTINGS
@given(xs=small_ints.filter(lambda a: a.ndim == 1), reverse=st.booleans(),
       init=st.integers(-5, 5))
def test_scan_matches_python_loop(xs, reverse, init):
    def body(c, x):
        return c * 3 + x, c - x

    carry, ys = lax.scan(body, np.int32(init), xs, reverse=reverse)
    want_carry, want_ys = _python_scan(body, np.int32(init), list(xs), reverse)
    assert int(carry) == want_carry
    assert ys.shape == (len(xs),) and ys.dtype == np.int32
    assert ys.tolist() == [int(y) for y in want_ys]


@SETTINGS
@given(xs=small_ints.filter(lambda a: a.ndim == 2), reverse=st.booleans())
def test_scan_pytree_carry_and_xs(xs, reverse):
    tree_xs = {"a": xs, "b": (xs.astype(np.float32) / 2,)}

    def body(c, x):
        total, count = c
        new = (total + x["a"].sum(), count + 1)
        return new, {"row": x["b"][0] * 2, "sum": total}

    (total, count), ys = lax.scan(body, (np.int32(0), 0), tree_xs, reverse=reverse)
    rows = list(range(xs.shape[0]))[::-1] if reverse else range(xs.shape[0])
    acc, sums = 0, {}
    for r in rows:
        sums[r] = acc
        acc += int(xs[r].sum())
    assert int(total) == acc and int(count) == xs.shape[0]
    assert set(ys) == {"row", "sum"}
    np.testing.assert_array_equal(np.asarray(ys["row"]), xs.astype(np.float32))
    assert ys["sum"].tolist() == [sums[r] for r in range(xs.shape[0])]


def test_scan_without_xs_uses_length():
    carry, ys = lax.scan(lambda c, x: (c + 1, c * 2), 0, None, length=4)
    assert _typed(carry) == ("int32", True, 4)
    assert _typed(ys) == ("int32", True, [0, 2, 4, 6])


def test_scan_types_match_jax():
    carry, ys = lax.scan(lambda c, x: (c + x, c * x), 0, np.arange(5, dtype=np.int32))
    assert _typed(carry) == ("int32", False, 10)
    assert _typed(ys) == ("int32", False, [0, 0, 2, 9, 24])
    # ys keep the weak type of the first body output (the traced one in JAX)
    carry, ys = lax.scan(lambda c, x: (c + x, c), 0, np.arange(5, dtype=np.int32),
                         reverse=True)
    assert _typed(carry) == ("int32", False, 10)
    assert _typed(ys) == ("int32", True, [10, 9, 7, 4, 0])
    # weak carry promoted to the body's dtype
    carry, ys = lax.scan(lambda c, x: (c + 0.5, x), 0, np.arange(3, dtype=np.int32))
    assert _typed(carry) == ("float32", False, 1.5) and _typed(ys) == ("int32", False, [0, 1, 2])
    carry, ys = lax.scan(lambda c, x: (c + x, None), 0, np.arange(3, dtype=np.int32))
    assert _typed(carry) == ("int32", False, 3) and ys is None


def test_scan_zero_length_has_typed_outputs():
    carry, ys = lax.scan(lambda c, x: (c + x, x * 2), 0, np.zeros((0,), np.int32))
    assert _typed(carry) == ("int32", False, 0)
    assert _typed(ys) == ("int32", False, [])
    carry, ys = lax.scan(lambda c, x: (c, np.ones(2, np.float32)), 0, None, length=0)
    assert ys.shape == (0, 2) and ys.dtype == np.float32


SCAN_ERRORS = [
    (dict(f=lambda c, x: (c + 1, c), init=0, xs=None), ValueError,
     "scan got no values to scan over and `length` not provided."),
    (dict(f=lambda c, x: (c, x), init=0, xs=np.arange(3), length=4), ValueError,
     "scan got `length` argument of 4 which disagrees with leading axis sizes [3]."),
    (dict(f=lambda c, x: (c, x[0]), init=0, xs=(np.arange(3), np.arange(4))), ValueError,
     "scan got values with different leading axis sizes: 3, 4."),
    (dict(f=lambda c, x: (c, x), init=0, xs=np.int32(3)), ValueError,
     "scan got value with no leading axis to scan over: int32[]."),
    (dict(f=lambda c, x: (c * 1.5, x), init=np.int32(0), xs=np.arange(3)), TypeError,
     "scan body function carry input and carry output must have equal types, but they "
     "differ:\n\nThe input carry c has type int32[] but the corresponding output carry "
     "component has type float32[], so the dtypes do not match.\n\nRevise the function so that "
     "all output types match the corresponding input types."),
    (dict(f=lambda c, x: ((c, c), x), init=0, xs=np.arange(3)), TypeError,
     "scan body function carry input and carry output must have the same pytree structure, "
     "but they differ:\n\nThe input carry c is a <class 'kiln.array.Array'> but the "
     "corresponding component of the carry output is a <class 'tuple'>, so their Python types "
     "differ.\n\nRevise the function so that the carry output has the same pytree structure as "
     "the carry input."),
    (dict(f=3, init=0, xs=np.arange(3)), TypeError, "lax.scan: f argument should be a callable."),
]


@pytest.mark.parametrize("kwargs,exc,message", SCAN_ERRORS)
def test_scan_errors_match_jax(kwargs, exc, message):
    with pytest.raises(exc) as info:
        lax.scan(**kwargs)
    assert str(info.value) == message


def test_scan_body_must_return_a_pair():
    with pytest.raises(TypeError, match="scan body output must be a pair, got"):
        lax.scan(lambda c, x: c, 0, np.arange(3))


# --------------------------------------------------------------------------- cond/switch

@SETTINGS
@given(pred=st.one_of(st.booleans(), st.integers(-2, 2), st.floats(-1, 1, width=32)),
       x=st.integers(-100, 100))
def test_cond_matches_python_if(pred, x):
    out = lax.cond(pred, lambda v: v + 1, lambda v: v - 1, np.int32(x))
    assert int(out) == (x + 1 if pred else x - 1)


def test_cond_operands_and_pytree_outputs():
    assert _typed(lax.cond(True, lambda x: x + 1, lambda x: x - 1, 5)) == ("int32", True, 6)
    assert _typed(lax.cond(np.int32(0), lambda x, y: x + y, lambda x, y: x - y, 5, 2)) == \
        ("int32", True, 3)
    out = lax.cond(False, lambda x: {"a": x, "b": (x, x)},
                   lambda x: {"a": x * 2, "b": (x, x + 1)}, 3)
    assert _typed(out["a"]) == ("int32", True, 6)
    assert [_typed(v) for v in out["b"]] == [("int32", True, 3), ("int32", True, 4)]
    assert _typed(lax.cond(True, lambda x: x, lambda x: x, operand=3)) == ("int32", True, 3)
    assert _typed(lax.cond(1.0, lambda: 1, lambda: 2)) == ("int32", True, 1)
    assert _typed(lax.cond(np.float32(0.0), lambda: 1, lambda: 2)) == ("int32", True, 2)


def add_pair(x):
    return x[0] + x[1]


def mul_pair(x):
    return x[0] * x[1]


def test_deprecated_per_branch_operand_form():
    # JAX 0.10.2 still takes cond(pred, true_operand, true_fun, false_operand, false_fun)
    # (blackjax's NUTS termination uses it): 3.0 and 12.0 there, eagerly and under jit/vmap
    assert float(lax.cond(True, (1.0, 2.0), add_pair, (3.0, 4.0), mul_pair)) == 3.0
    f = kiln.jit(lambda p: lax.cond(p, (1.0, 2.0), add_pair, (3.0, 4.0), mul_pair))
    assert float(f(False)) == 12.0
    out = kiln.vmap(lambda p: lax.cond(p, (1.0, 2.0), add_pair, (3.0, 4.0), mul_pair))(
        np.array([True, False]))
    np.testing.assert_array_equal(np.asarray(out), [3.0, 12.0])


COND_ERRORS = [
    (np.array([True, False]), "Pred must be a scalar, got [ True False] of shape (2,)."),
    ([True], "Pred must be a scalar, got [True] of type <class 'list'>"),
    ("a", "Pred must be a scalar, got a of type <class 'str'>"),
    (None, "cond predicate is None"),
    (np.complex64(1), "Pred type must be either boolean or number, got complex64."),
]


@pytest.mark.parametrize("pred,message", COND_ERRORS)
def test_cond_pred_errors_match_jax(pred, message):
    with pytest.raises(TypeError) as info:
        lax.cond(pred, lambda: 1, lambda: 2)
    assert str(info.value) == message


def test_cond_argument_errors_match_jax():
    with pytest.raises(TypeError) as info:
        lax.cond(True, 1, lambda: 2)
    assert str(info.value) == "lax.cond: true_fun and false_fun arguments should be callable."
    with pytest.raises(TypeError) as info:
        lax.cond(True, lambda x: x, lambda x: x, 1, operand=2)
    assert str(info.value) == ("if 'operand' keyword is passed then no positional operands can "
                               "be passed, got operand=2 and positional operands (1,)")


@SETTINGS
@given(index=st.integers(-5, 8), n=st.integers(1, 4))
def test_switch_clamps_index(index, n):
    branches = [lambda x, k=k: x * 10 + k for k in range(n)]
    out = lax.switch(index, branches, np.int32(1))
    assert int(out) == 10 + min(max(index, 0), n - 1)


def test_switch_values_and_errors_match_jax():
    branches = [lambda x: x, lambda x: x * 10, lambda x: x * 100]
    assert _typed(lax.switch(1, branches, 3)) == ("int32", True, 30)
    assert _typed(lax.switch(-5, branches, 3)) == ("int32", True, 3)
    assert _typed(lax.switch(7, branches, 3)) == ("int32", True, 300)
    assert _typed(lax.switch(5, [lambda x: x * 2], 3)) == ("int32", True, 6)
    for index, branches_, exc, message in [
        (1.0, branches, TypeError, "Index type must be an integer, got 1.0 as float32"),
        (np.array([1]), branches, TypeError, "Branch index must be scalar, got [1] of shape "
                                             "(1,)."),
        (0, [], ValueError, "Empty branch sequence"),
        (0, [1, 2], TypeError, "lax.switch: branches argument should be a sequence of "
                               "callables."),
    ]:
        with pytest.raises(exc) as info:
            lax.switch(index, branches_, 3)
        assert str(info.value) == message


# ------------------------------------------------------------------ map, associative_scan

@SETTINGS
@given(xs=small_ints, batch_size=st.one_of(st.none(), st.integers(1, 3)))
def test_map_matches_python(xs, batch_size):
    ys = lax.map(lambda x: x * 2 + 1, xs, batch_size=batch_size)
    np.testing.assert_array_equal(np.asarray(ys), xs * 2 + 1)


def test_map_pytrees():
    a, b = lax.map(lambda x: (x[0] + x[1], x[0]), (np.arange(3, dtype=np.int32),
                                                  np.ones(3, np.int32)))
    assert _typed(a) == ("int32", False, [1, 2, 3]) and _typed(b) == ("int32", False, [0, 1, 2])


def _python_cumulative(fn, xs, reverse):
    seq = xs[::-1] if reverse else xs
    out, acc = [], None
    for v in seq:
        acc = v if acc is None else fn(acc, v)
        out.append(acc)
    return out[::-1] if reverse else out


@SETTINGS
@given(xs=hnp.arrays(np.int32, st.integers(0, 9), elements=st.integers(-20, 20)),
       reverse=st.booleans(), op=st.sampled_from(["add", "max", "min"]))
def test_associative_scan_matches_python(xs, reverse, op):
    out = lax.associative_scan(getattr(lax, op), xs, reverse=reverse)
    want = _python_cumulative(getattr(np, {"add": "add", "max": "maximum", "min": "minimum"}[op]),
                              list(xs), reverse)
    assert np.asarray(out).tolist() == [int(v) for v in want]


def test_associative_scan_matches_jax():
    assert _typed(lax.associative_scan(lax.add, np.arange(5, dtype=np.int32))) == \
        ("int32", False, [0, 1, 3, 6, 10])
    assert _typed(lax.associative_scan(lax.add, np.arange(5, dtype=np.int32), reverse=True)) \
        == ("int32", False, [10, 10, 9, 7, 4])
    out = lax.associative_scan(lax.max, np.array([[1, 5, 2], [3, 0, 4]], np.int32), axis=1)
    assert _typed(out) == ("int32", False, [[1, 5, 5], [3, 3, 4]])
    a, b = lax.associative_scan(lambda x, y: (x[0] + y[0], x[1] * y[1]),
                                (np.arange(1, 5, dtype=np.int32),
                                 np.arange(1, 5, dtype=np.int32)))
    assert a.tolist() == [1, 3, 6, 10] and b.tolist() == [1, 2, 6, 24]
    assert lax.associative_scan(lax.add, np.zeros((0,), np.int32)).shape == (0,)
    with pytest.raises(ValueError) as info:
        lax.associative_scan(lax.add, (np.arange(3), np.arange(4)))
    assert str(info.value) == ("Array inputs to associative_scan must have the same first "
                               "dimension. (saw: [(3,), (4,)])")


def test_associative_scan_float_rounding_matches_jax():
    # JAX's parallel prefix adds in a tree order (a sequential cumsum gives 10.25 at index 5):
    # values recorded from JAX 0.10.2.
    xs = np.array([1e8, 1.0, -1e8, 3.0, 0.25, 7.0, 1e-3], np.float32)
    out = lax.associative_scan(lax.add, xs)
    assert np.asarray(out).tolist() == [1e8, 1e8, 0.0, 0.0, 0.25, 7.25, 7.250999927520752]


def test_associative_scan_calls_fn_on_slices():
    shapes = []

    def fn(a, b):
        shapes.append(a.shape)
        return lax.add(a, b)

    lax.associative_scan(fn, np.arange(8, dtype=np.int32))
    assert shapes and max(shapes) == (4,)  # vectorised halves, as in JAX


def test_error_messages_name_the_input_carry_by_parameter_name():
    with pytest.raises(TypeError, match=re.escape("The input carry state has type int32[]")):
        lax.while_loop(lambda s: s < 3, lambda state: state * 1.5, np.int32(0))
