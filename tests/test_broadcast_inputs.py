"""Broadcast Arrays as inputs of compiled code: made contiguous once, never per call.

`jnp.zeros`/`ones`/`full`/`broadcast_to`/`*_like` leave stride-0 NumPy buffers; a jitted call
hands compiled code a C-contiguous buffer, which `Array._dense` makes on the first call and
keeps (runtime/array.py). Checked here:
- results: every creation function, shapes with 0, 1 and more elements per axis, several
  dtypes (hypothesis), give the same results as the same values made contiguous, and as the
  reference backend on the broadcast arrays; the inputs still read as before;
- one copy: repeated calls (positional arrays on the dispatch fast path, pytrees on the
  ordinary path, `lower().compile()`, arrays captured from globals) copy each broadcast array
  once (a counter around `kiln.array.dense_copy`) and hand the same buffer every time;
- donation of a broadcast array (fresh, or already made contiguous, or a broadcast view of
  another array, which must stay untouched): the result is right and the array is deleted;
- threads: eight threads passing the same fresh broadcast array at once copy it once;
- eager views (transposes, strided and reversed slices) are copied once as well;
- eager use after the copy: `.at[]` updates, NumPy views (read-only), `block_until_ready`.
"""
import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

import kiln
import kiln.numpy as jnp
from kiln import array as karray

def _counting(shape, dtype):
    """0, 1, 2, ... in `shape` (as `dtype`: booleans alternate)."""
    count = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return jnp.asarray((count % 2 if dtype == "bool" else count).astype(dtype))


DTYPES = ["float32", "int32", "bool", "float16", "complex64", "uint8"]
CREATORS = {
    "zeros": lambda shape, dtype: jnp.zeros(shape, dtype),
    "ones": lambda shape, dtype: jnp.ones(shape, dtype),
    "full": lambda shape, dtype: jnp.full(shape, 3, dtype),
    "broadcast_to row": lambda shape, dtype: jnp.broadcast_to(_counting(shape[-1:], dtype),
                                                              shape),
    "broadcast_to column": lambda shape, dtype: jnp.broadcast_to(
        _counting(shape[:1] + (1,) * (len(shape) - 1), dtype), shape),
    "zeros_like": lambda shape, dtype: jnp.zeros_like(np.empty(shape, dtype)),
    "ones_like": lambda shape, dtype: jnp.ones_like(np.empty(shape, dtype)),
    "full_like": lambda shape, dtype: jnp.full_like(np.empty(shape, dtype), 2),
}


def _program(x, y):
    return x + y, jnp.sum(x), y


@pytest.fixture
def copies(monkeypatch):
    """The arrays `Array._dense` copied during the test."""
    made = []
    copy = karray.dense_copy

    def counting(value):
        made.append(value.shape)
        return copy(value)
    monkeypatch.setattr(karray, "dense_copy", counting)
    return made


@given(shape=st.lists(st.sampled_from([0, 1, 2, 5]), max_size=3).map(tuple),
       dtype=st.sampled_from(DTYPES), creator=st.sampled_from(sorted(CREATORS)))
def test_broadcast_inputs_give_the_results_of_contiguous_ones(shape, dtype, creator):
    make = CREATORS[creator]
    x, y = make(shape, dtype), make(shape, dtype)
    expected_values = np.array(x)
    dense = [jnp.asarray(np.ascontiguousarray(np.asarray(a))) for a in (x, y)]
    llvm = kiln.jit(_program, backend="llvm")
    want = kiln.jit(_program, backend="reference")(x, y)
    got = llvm(x, y)
    again = llvm(x, y)
    from_dense = llvm(*dense)
    for w, g, a, d in zip(want, got, again, from_dense):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(w))
        np.testing.assert_array_equal(np.asarray(d), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(x), expected_values)
    assert x.shape == shape and x.dtype == np.dtype(dtype)


def test_creation_functions_leave_broadcast_buffers():
    """What this file is about: the eager creation functions do not fill memory."""
    for make in (lambda: jnp.zeros((100, 100)), lambda: jnp.ones((100, 100)),
                 lambda: jnp.full((100, 100), 2.0),
                 lambda: jnp.broadcast_to(jnp.arange(100.0), (100, 100))):
        assert 0 in make()._value.strides


def test_positional_calls_copy_a_broadcast_array_once(copies):
    f = kiln.jit(lambda x: x * x + x * 2.0, backend="llvm")
    x = jnp.ones((300, 200))
    first = f(x)
    buffer = x._value
    for _ in range(5):
        np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(first))
        assert x._value is buffer
    assert copies == [(300, 200)]
    assert buffer.flags.c_contiguous and not np.any(buffer - 1)
    np.testing.assert_array_equal(np.asarray(first), np.full((300, 200), 3.0, np.float32))


def test_pytree_calls_copy_each_broadcast_leaf_once(copies):
    """The ordinary dispatch path (pytree arguments): an MLP's `jnp.zeros` biases."""
    def loss(params, x):
        for w, b in params:
            x = jnp.tanh(x @ w + b)
        return jnp.sum(x ** 2)

    rng = np.random.default_rng(0)
    ws = [jnp.asarray(rng.standard_normal((6, 6)).astype(np.float32)) for _ in range(3)]
    broadcast = [(w, jnp.zeros(6)) for w in ws]
    dense = [(w, jnp.asarray(np.zeros(6, np.float32))) for w in ws]
    x = jnp.asarray(rng.standard_normal((4, 6)).astype(np.float32))
    g = kiln.jit(kiln.grad(loss), backend="llvm")
    for _ in range(4):
        got = g(broadcast, x)
    assert copies == [(6,)] * 3
    same_code = g(dense, x)
    want = kiln.jit(kiln.grad(loss), backend="reference")(broadcast, x)
    for got_layer, same_layer, want_layer in zip(got, same_code, want):
        for a, b, c in zip(got_layer, same_layer, want_layer):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-4, atol=1e-5)


def test_lowered_and_compiled_calls_copy_once(copies):
    f = kiln.jit(lambda x, y: x - y, backend="llvm")
    x, y = jnp.full((50, 3), 7, "int32"), jnp.zeros((50, 3), "int32")
    compiled = f.lower(x, y).compile()
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(compiled(x, y)), np.full((50, 3), 7))
    assert copies == [(50, 3)] * 2


@pytest.mark.parametrize("view", [lambda x: x.T, lambda x: x[:, ::2], lambda x: x[::-1]],
                         ids=["transpose", "strided slice", "reversed"])
def test_eager_views_are_copied_once_too(copies, view):
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    x = view(jnp.asarray(base))
    assert not x._value.flags.c_contiguous   # eager views share their source's buffer
    f = kiln.jit(lambda x: x * 2.0 + 1.0, backend="llvm")
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x)), view(base) * 2 + 1)
    assert copies == [view(base).shape]


BIAS = jnp.zeros((40, 40))


def test_a_captured_broadcast_global_is_copied_once(copies):
    f = kiln.jit(lambda x: x + BIAS, backend="llvm")
    x = jnp.asarray(np.arange(1600, dtype=np.float32).reshape(40, 40))
    for _ in range(4):
        np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(x))
    assert copies == [(40, 40)]


def test_donating_a_fresh_broadcast_array():
    f = kiln.jit(lambda x: x + 1.0, backend="llvm", donate_argnums=0)
    x = jnp.zeros((64, 64))
    view = np.asarray(x)   # a NumPy view of the broadcast buffer taken before the call
    y = f(x)
    np.testing.assert_array_equal(np.asarray(y), np.ones((64, 64), np.float32))
    np.testing.assert_array_equal(view, np.zeros((64, 64), np.float32))
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="Array has been deleted with shape=float32"):
        x + 1


def test_donating_a_broadcast_array_already_made_contiguous_reuses_its_copy():
    plain = kiln.jit(lambda x: x * 2.0, backend="llvm")
    donating = kiln.jit(lambda x: x + 1.0, backend="llvm", donate_argnums=0)
    x = jnp.ones((32, 32))
    plain(x)   # makes x contiguous
    address = x._value.__array_interface__["data"][0]   # (holding the buffer would be a use)
    y = donating(x)
    # computed in the copy `plain` made, which nothing else uses
    assert y._value.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(np.asarray(y), np.full((32, 32), 2.0, np.float32))
    assert x.is_deleted()


def test_donating_a_broadcast_view_leaves_its_source_alone():
    row = jnp.arange(8.0)
    x = jnp.broadcast_to(row, (5, 8))
    f = kiln.jit(lambda x: x * 10.0, backend="llvm", donate_argnums=0)
    y = f(x)
    np.testing.assert_array_equal(np.asarray(y), np.tile(np.arange(8.0) * 10, (5, 1)))
    np.testing.assert_array_equal(np.asarray(row), np.arange(8.0))
    assert x.is_deleted() and not row.is_deleted()


def test_threads_passing_one_fresh_broadcast_array_copy_it_once(monkeypatch):
    made = []
    copy = karray.dense_copy

    def slow_copy(value):   # widens the window in which a second thread could copy too
        made.append(value.shape)
        time.sleep(0.05)
        return copy(value)
    monkeypatch.setattr(karray, "dense_copy", slow_copy)
    f = kiln.jit(lambda x: x * 3.0, backend="llvm")
    f(jnp.ones((3, 3)))   # compiled before the threads start
    made.clear()
    x = jnp.ones((200, 100))
    start = threading.Barrier(8)
    results, errors = [], []

    def call():
        try:
            start.wait()
            results.append(np.asarray(f(x)))
        except Exception as e:   # reported below: a thread's exception is otherwise lost
            errors.append(e)
    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert made == [(200, 100)]
    assert len(results) == 8
    for r in results:
        np.testing.assert_array_equal(r, np.full((200, 100), 3.0, np.float32))


def test_eager_use_after_the_copy_is_unchanged():
    f = kiln.jit(lambda x: x + 0.5, backend="llvm")
    x = jnp.zeros((4, 3))
    f(x)
    assert x._value.flags.c_contiguous
    updated = x.at[1, 2].set(9.0)
    np.testing.assert_array_equal(np.asarray(x), np.zeros((4, 3), np.float32))
    assert float(updated[1, 2]) == 9.0 and float(jnp.sum(updated)) == 9.0
    view = np.asarray(x)
    assert not view.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 1.0
    assert x.block_until_ready() is x
    np.testing.assert_array_equal(np.asarray(x * 2 + 1), np.ones((4, 3), np.float32))


def test_a_deleted_array_passed_again_raises_jaxs_error():
    f = kiln.jit(lambda x: x + 1.0, backend="llvm", donate_argnums=0)
    x = jnp.ones(10)
    f(x)
    with pytest.raises(RuntimeError, match="Array has been deleted with shape=float32\\[10\\]"):
        f(x)
