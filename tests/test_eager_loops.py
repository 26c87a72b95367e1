"""Long eager loops compile the rest of their iterations (runtime/eager_tiers.py,
`compiled_rest`; runtime/lax/_control_flow.py): `fori_loop`, `while_loop` and `scan` outside
`jit` run `HOT_ITERATIONS` iterations eagerly, then the others compiled, with the results of
a loop run eagerly to the end."""
import numpy as np
import pytest

import kiln
from kiln import lax, eager_tiers

X = np.linspace(0, 1, 7, dtype=np.float32)


@pytest.fixture
def hot(monkeypatch):
    monkeypatch.setattr(eager_tiers, "HOT_ITERATIONS", 8)
    eager_tiers._LOOPS.clear()
    return eager_tiers._LOOPS


def eager(run):
    """`run()` with every loop eager to the end."""
    enabled, eager_tiers.ENABLED = eager_tiers.ENABLED, False
    try:
        return run()
    finally:
        eager_tiers.ENABLED = enabled


def same(a, b):
    la, lb = kiln.tree_util.tree_leaves(a), kiln.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.weak_type == y.weak_type, (x, y)
        np.testing.assert_array_equal(x, y)


def decay(i, v):
    return v * 0.999 + 0.001 * i


def test_fori_loop_compiles_once_for_every_trip_count(hot):
    for n in [20, 50, 9]:
        same(lax.fori_loop(0, n, decay, X), eager(lambda: lax.fori_loop(0, n, decay, X)))
    assert list(hot) == [("fori_loop", decay)]
    # a weak Python carry promoted by the body, as eagerly
    same(lax.fori_loop(0, 30, lambda i, c: c * 1.5, 1), eager(
        lambda: lax.fori_loop(0, 30, lambda i, c: c * 1.5, 1)))


def test_fori_loop_at_the_default_threshold():
    eager_tiers._LOOPS.clear()
    n = eager_tiers.HOT_ITERATIONS + 300
    same(lax.fori_loop(0, n, decay, X), eager(lambda: lax.fori_loop(0, n, decay, X)))
    assert list(eager_tiers._LOOPS) == [("fori_loop", decay)]


def count_up(c):
    return c[0] + 1, c[1] * 1.0001


def below(c):
    return c[0] < 40


def test_while_loop(hot):
    same(lax.while_loop(below, count_up, (0, X)),
         eager(lambda: lax.while_loop(below, count_up, (0, X))))
    assert ("while_loop", below, count_up) in hot


def accumulate(c, x):
    return c + x, (c * x, x > 0.5)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_xs_and_ys(hot, reverse):
    xs = np.linspace(0, 1, 30, dtype=np.float32)
    same(lax.scan(accumulate, np.float32(0), xs, reverse=reverse),
         eager(lambda: lax.scan(accumulate, np.float32(0), xs, reverse=reverse)))
    assert ("scan", accumulate, reverse, 30 - 8) in hot


def step_without_xs(c, _):
    return c * 0.5 + 1.0, c


def test_scan_with_a_length_only(hot):
    same(lax.scan(step_without_xs, X, None, length=25),
         eager(lambda: lax.scan(step_without_xs, X, None, length=25)))
    np.testing.assert_array_equal(lax.map(lambda x: x * 2.0, np.arange(20.0, dtype=np.float32)),
                                  np.arange(20.0, dtype=np.float32) * 2.0)


def needs_a_value(i, v):
    return v + float(v[0]) * 0.0 + 1.0   # float() of a carry: cannot be compiled


def test_a_body_that_does_not_compile_goes_on_eagerly(hot):
    same(lax.fori_loop(0, 20, needs_a_value, X), eager(lambda: lax.fori_loop(
        0, 20, needs_a_value, X)))
    assert hot[("fori_loop", needs_a_value)] == eager_tiers._EAGER
    np.testing.assert_allclose(lax.fori_loop(0, 20, needs_a_value, X), X + 20.0, rtol=1e-6)


def test_stays_eager_under_disable_jit_and_inside_jit(hot):
    calls = []

    def counted(i, v):
        calls.append(None)
        return v + 1.0

    with kiln.disable_jit():
        lax.fori_loop(0, 20, counted, X)
    assert len(calls) == 20 and not hot
    calls.clear()
    lax.fori_loop(0, 20, counted, X)   # 8 eager iterations, then the body specialised once
    assert len(calls) == 9


def test_errors_of_the_body_are_raised(hot):
    def bad(i, v):
        if i == 12:
            raise ValueError("iteration 12")
        return v + 1.0

    with pytest.raises(ValueError, match="iteration 12"):
        with kiln.disable_jit():
            lax.fori_loop(0, 20, bad, X)
    # compiled past iteration 8, `i` is traced: the comparison is staged, and the raise in
    # its branch is the user's error at specialisation, which the eager loop then raises
    with pytest.raises(ValueError, match="iteration 12"):
        lax.fori_loop(0, 20, bad, X)
