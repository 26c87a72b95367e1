"""jnp.ufunc and jnp.frompyfunc (runtime/numpy/_ufunc.py) against JAX: the fourteen ufunc
objects, their methods eagerly and under jit/grad/vmap, errors, and that making jnp.add a
ufunc leaves compiled code unchanged."""
import jax
import jax.numpy as J
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kiln
import kiln.numpy as jnp

UFUNCS = sorted(n for n in dir(J) if isinstance(getattr(J, n), J.ufunc))
BINARY = [n for n in UFUNCS if getattr(J, n).nin == 2]


def _same(k, j):
    k, j = np.asarray(k), np.asarray(j)
    assert k.dtype == j.dtype, (k.dtype, j.dtype)
    np.testing.assert_allclose(k, j, rtol=1e-6, atol=1e-6)


def _operand(name, values):
    """Values of a dtype the ufunc takes (integers for bitwise ones, bools for logical)."""
    if name.startswith("bitwise"):
        return np.asarray(values, np.int32)
    if name.startswith("logical"):
        return np.asarray(values) > 1
    return np.asarray(values, np.float32)


def test_the_same_names_are_ufuncs_with_jax_attributes():
    assert sorted(n for n in dir(jnp) if isinstance(getattr(jnp, n), jnp.ufunc)) == UFUNCS
    for n in UFUNCS:
        k, j = getattr(jnp, n), getattr(J, n)
        assert (k.nin, k.nout, k.nargs, k.__name__, repr(k)) == \
            (j.nin, j.nout, j.nargs, j.__name__, repr(j))
        assert k.identity == j.identity or (np.isnan(k.identity) if k.identity else False)
        assert k == getattr(jnp, n) and hash(k) == hash(getattr(jnp, n))


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(BINARY),
       st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple),
       st.sampled_from([0, -1, None]), st.booleans())
def test_reduce_and_accumulate_match_jax(name, shape, axis, keepdims):
    x = _operand(name, np.arange(int(np.prod(shape))).reshape(shape) % 5)
    k, j = getattr(jnp, name), getattr(J, name)
    for call in (lambda u, x: u.reduce(x, axis=axis, keepdims=keepdims),
                 lambda u, x: u.accumulate(x, axis=-1 if axis is None else axis)):
        try:
            want = call(j, x)
        except (ValueError, TypeError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                call(k, x)
            continue
        _same(call(k, x), want)


@pytest.mark.parametrize("name", BINARY)
def test_reduce_options_match_jax(name):
    x = _operand(name, np.arange(12).reshape(3, 4) % 5)
    where = np.arange(12).reshape(3, 4) % 3 != 0
    init = _operand(name, [3])[0]
    k, j = getattr(jnp, name), getattr(J, name)
    _same(k.reduce(x, axis=1, initial=init, where=where),
          j.reduce(x, axis=1, initial=init, where=where))
    _same(k.reduce(x, axis=None, initial=init), j.reduce(x, axis=None, initial=init))
    for kw in (dict(axis=(0, 1)), dict(where=where), dict(axis=0, where=where.astype(int))):
        try:
            want = j.reduce(x, **kw)
        except (ValueError, NotImplementedError) as e:
            with pytest.raises(type(e), match=str(e).split("\n")[0][:40].replace("(", ".")):
                k.reduce(x, **kw)
        else:
            _same(k.reduce(x, **kw), want)


@pytest.mark.parametrize("name", UFUNCS)
def test_at_outer_reduceat_match_jax(name):
    k, j = getattr(jnp, name), getattr(J, name)
    a = _operand(name, np.arange(10) % 4)
    idx = np.array([0, 0, 3, 9])
    args = () if k.nin == 1 else (_operand(name, [2, 3, 1, 2]),)
    _same(k.at(a, idx, *args, inplace=False), j.at(a, idx, *args, inplace=False))
    _same(k.at(a, 2, *(arg[0] for arg in args), inplace=False),
          j.at(a, 2, *(arg[0] for arg in args), inplace=False))
    with pytest.raises(NotImplementedError, match="inplace=False"):
        k.at(a, idx, *args)
    if k.nin == 1:
        with pytest.raises(ValueError, match="only supported for binary ufuncs"):
            k.outer(a, a)
        return
    a2 = _operand(name, np.arange(12).reshape(3, 4) % 5)
    _same(k.outer(a2, a[:3]), j.outer(a2, a[:3]))
    _same(k.reduceat(a2, np.array([0, 2, 1]), axis=1), j.reduceat(a2, np.array([0, 2, 1]), axis=1))
    _same(k(a2, a2[0]), j(a2, a2[0]))


def test_errors_match_jax():
    x = np.ones((2, 3), np.float32)
    cases = [lambda m: m.add(x, x, out=x), lambda m: m.add(x, x, where=x > 0),
             lambda m: m.add.reduce(x, out=1), lambda m: m.negative.reduce(x),
             lambda m: m.maximum.reduce(x, where=x > 0), lambda m: m.add([1.0], 2.0),
             lambda m: m.bitwise_and.reduce(x), lambda m: m.add.accumulate(x, axis=2),
             lambda m: m.subtract.accumulate(x, axis=None),
             lambda m: m.add.reduceat(x, np.zeros((1, 1), int)),
             lambda m: m.maximum.reduce(np.ones((0, 2))),
             lambda m: m.subtract.reduce(np.ones((0, 2))),
             lambda m: m.add.reduce(x, where=np.ones((2, 3), np.int32), initial=0)]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(J)
        with pytest.raises(type(want.value)) as got:
            case(jnp)
        assert str(got.value).replace("kiln", "jax").split("\n")[0] == \
            str(want.value).split("\n")[0], (got.value, want.value)


def test_frompyfunc_as_jax():
    def fn(a, b):
        return a * b + 1

    k, j = jnp.frompyfunc(fn, 2, 1, identity=1), J.frompyfunc(fn, 2, 1, identity=1)
    assert (repr(k), k.nin, k.nout, k.identity) == (repr(j), j.nin, j.nout, j.identity)
    x = np.arange(1, 7, dtype=np.int32).reshape(2, 3)
    for call in (lambda u: u(x, 2), lambda u: u.reduce(x, axis=1), lambda u: u.accumulate(x),
                 lambda u: u.outer(x[0], x[1]), lambda u: u.at(x, (1, 2), 5, inplace=False),
                 lambda u: u.reduceat(x[0], np.array([0, 1]))):
        _same(call(k), call(j))
    two = jnp.frompyfunc(lambda a, b: (a + b, a * b), 2, 2)
    _same(two(x, 2)[1], x * 2)
    with pytest.raises(ValueError, match="returning a single value"):
        two.reduce(x)


def test_methods_under_jit_grad_vmap():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7

    def f(m, x):
        return (m.add.reduce(x, axis=1), m.maximum.accumulate(x, axis=1),
                m.subtract.reduce(x, axis=None), m.multiply.outer(x[0], x[1]),
                m.add.at(x, (0, np.array([1, 1])), 2.0, inplace=False),
                m.minimum.at(x, np.array([0, 0]), -x[:2], inplace=False),
                m.add.reduceat(x, np.array([0, 2]), axis=1), m.logaddexp.reduce(x, axis=None),
                m.subtract.accumulate(x, axis=1))
    for k, j in zip(kiln.jit(lambda x: f(jnp, x))(x), jax.jit(lambda x: f(J, x))(x)):
        _same(k, j)

    def g(m, x):
        return (m.subtract.reduce(x ** 2, axis=None) + m.maximum.accumulate(x).sum()
                + m.multiply.reduce(x + 1, axis=None) + m.logaddexp.reduce(x, axis=None))
    _same(kiln.jit(kiln.grad(lambda x: g(jnp, x)))(x), jax.grad(lambda x: g(J, x))(x))
    _same(kiln.grad(lambda x: g(jnp, x))(x), jax.grad(lambda x: g(J, x))(x))
    _same(kiln.vmap(lambda r: jnp.add.outer(r, r).sum() + jnp.subtract.reduce(r))(x),
          jax.vmap(lambda r: J.add.outer(r, r).sum() + J.subtract.reduce(r))(x))


def test_ufunc_objects_compile_to_the_code_of_their_functions():
    """jnp.add is a ufunc object now: under jit the front end calls it with the traced values,
    so the compiled program is the one the plain function gives."""
    from kiln.numpy import _ufuncs

    def with_ufuncs(x, y):
        return jnp.maximum(jnp.add(x, y), jnp.negative(y)) * x - y

    def with_functions(x, y):
        return _ufuncs.maximum(_ufuncs.add(x, y), _ufuncs.negative(y)) * x - y
    x = np.ones((4, 3), np.float32)
    texts = [kiln.jit(f).lower(x, x).as_text().replace(f.__name__, "f")
             for f in (with_ufuncs, with_functions)]
    assert texts[0] == texts[1]
