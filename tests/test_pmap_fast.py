"""pmap's dispatch fast path (runtime/pmap_fast.py, compiler/backends/llvm/stacked.py): the
second call of positional arrays runs every replica from one native call into stacked
outputs. Its results must be the ordinary path's, bit for bit, with the same dtype, weak type
and sharding; whatever it does not cover must fall back to the ordinary path; errors must be
the ordinary path's."""
import sys

import numpy as np
import pytest

import kiln
import kiln.numpy as jnp
from kiln import lax
from kiln.compiler.backends.llvm.stacked import Stacked


@pytest.fixture
def fast_calls(monkeypatch):
    """For each call that went through Stacked (the fast path), whether its replicas ran at
    once (True) or in turn."""
    calls = []
    call = Stacked.__call__

    def recording(self, values):
        out = call(self, values)
        if out is not None:
            calls.append(self.parallel)
        return out
    monkeypatch.setattr(Stacked, "__call__", recording)
    return calls


def slow_loop(v):   # takes well over 50 us per replica: its replicas run at once
    return lax.fori_loop(0, 20000, lambda i, a: a * 0.999 + 1.0, v)


def two_outputs(a, b):
    return {"sum": a + b, "prod": (a * b).astype(jnp.int32)}


CASES = [
    ("in turn", lambda x: x + 1, {}, [np.arange(8 * 3, dtype=np.float32).reshape(8, 3)],
     False),
    ("psum", lambda x: lax.psum(x, "i") * x, {"axis_name": "i"},
     [np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)], True),
    ("all_gather", lambda x: lax.all_gather(x, "i").sum(0) + lax.axis_index("i"),
     {"axis_name": "i"}, [np.arange(6, dtype=np.int32).reshape(3, 2)], True),
    ("at once", slow_loop, {}, [np.ones((2, 1024), np.float32)], True),
    ("shared argument", two_outputs, {"in_axes": (0, None)},
     [np.arange(12, dtype=np.float32).reshape(4, 3), np.full(3, 2.5, np.float32)], False),
    ("empty rows", lambda x: x * 2, {}, [np.zeros((3, 0, 2), np.float32)], False),
    ("one replica", lambda x: jnp.dot(x, x.T), {}, [np.ones((1, 3, 3), np.float32)], False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fast_path_equals_the_ordinary_path(case, fast_calls):
    _, fun, options, args, at_once = case
    f = kiln.pmap(fun, **options)
    first = f(*args)               # the ordinary path, which installs the fast one
    second = f(*args)
    third = f(*[jnp.asarray(a) for a in args])
    assert fast_calls == [at_once] * 2
    for got in (second, third):
        for a, b in zip(kiln.tree_util.tree_leaves(first), kiln.tree_util.tree_leaves(got)):
            assert type(b) is kiln.Array
            assert a.dtype == b.dtype and a.shape == b.shape and a.weak_type == b.weak_type
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            assert a.sharding == b.sharding
            assert not np.shares_memory(np.asarray(a), np.asarray(b))   # fresh buffers
    assert kiln.tree_util.tree_structure(first) == kiln.tree_util.tree_structure(second)


def test_results_kept_are_never_overwritten(fast_calls):
    f = kiln.pmap(lambda x: x * 3)
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    f(x)
    kept = f(x)
    f(x + 1)
    np.testing.assert_array_equal(np.asarray(kept), x * 3)
    assert len(fast_calls) == 2


def test_other_calls_take_the_ordinary_path(fast_calls):
    f = kiln.pmap(lambda x: x - 1)
    x = np.arange(8, dtype=np.float32).reshape(8, 1)
    f(x)
    np.testing.assert_array_equal(np.asarray(f(x[:4])), x[:4] - 1)        # another size
    np.testing.assert_array_equal(np.asarray(f(x.astype(np.int32))), x - 1)  # another dtype
    np.testing.assert_array_equal(np.asarray(f(np.asfortranarray(np.ones((8, 2), np.float32)))),
                                  np.zeros((8, 2)))                        # reinstalled shape
    np.testing.assert_array_equal(np.asarray(f(x=x)), x - 1)               # a keyword
    np.testing.assert_array_equal(np.asarray(f(x[::-1])), x[::-1] - 1)     # a strided view
    assert fast_calls == []
    weak = kiln.pmap(lambda v: v * 2)(jnp.ones(8) * 1)
    g = kiln.pmap(lambda v: v + 1)
    assert g(np.ones(8, np.float32)).weak_type == g(weak).weak_type is False


def test_out_axes_and_in_axes_other_than_0_have_no_fast_path(fast_calls):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    f = kiln.pmap(lambda v: lax.psum(v, "i"), axis_name="i", out_axes=None)
    g = kiln.pmap(lambda v: v + 1, in_axes=1, out_axes=1)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(f(x)), x.sum(0))
        np.testing.assert_array_equal(np.asarray(g(x.T.copy())), x.T + 1)
    assert fast_calls == []


SCALE = 2.0


def test_globals_read_are_checked(fast_calls):
    global SCALE
    f = kiln.pmap(lambda v: v * SCALE)
    x = np.ones((2, 2), np.float32)
    f(x)
    SCALE = 5.0
    try:
        np.testing.assert_array_equal(np.asarray(f(x)), x * 5)
    finally:
        SCALE = 2.0


def test_a_failing_replica_raises_the_ordinary_error():
    fail = [False]

    def host(v):
        if fail[0]:
            raise ValueError("host side failed")
        return v

    f = kiln.pmap(lambda v: kiln.pure_callback(host, kiln.ShapeDtypeStruct(v.shape, v.dtype), v))
    x = np.ones((4, 2), np.float32)
    f(x)
    fail[0] = True
    with pytest.raises(Exception, match="host side failed"):
        f(x)
    fail[0] = False
    np.testing.assert_array_equal(np.asarray(f(x)), x)


def test_no_execution_is_honoured():
    f = kiln.pmap(lambda v: v + 2)
    x = np.ones((2, 2), np.float32)
    f(x)
    with kiln.no_execution(True):
        with pytest.raises(RuntimeError, match="no_execution"):
            f(x)


def test_reference_counts_are_unchanged(fast_calls):
    f = kiln.pmap(lambda a, b: (a + b, a * b), in_axes=(0, None))
    a, b = np.ones((8, 4), np.float32), np.ones(4, np.float32)
    f(a, b)
    before = sys.getrefcount(a), sys.getrefcount(b)
    for _ in range(20):
        out = f(a, b)
    del out
    assert (sys.getrefcount(a), sys.getrefcount(b)) == before
    assert len(fast_calls) == 20


def test_calls_from_several_threads_at_once(fast_calls):
    import threading
    f = kiln.pmap(lambda v: lax.psum(v, "i") + v, axis_name="i")
    x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    expect = np.asarray(f(x))
    results = []

    def worker(k):
        for _ in range(10):
            results.append(np.array_equal(np.asarray(f(x + 0)), expect))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 30 and fast_calls == [True] * 30
